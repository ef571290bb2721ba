"""Random numbers in compiled graphs: the two rules, and the checks that keep them.

``config.fallback_random`` (PyTorch's name) picks the rule a compiled graph follows. Both share
what aot does; they differ in who draws the numbers when the compiled forward runs.

What aot does (both rules)
--------------------------

* **Random ops are graph nodes.** ``bernoulli``, ``rand``, ``randn``, ... (every op tagged
  ``random``; dropout is traced through its decomposition, whose mask comes from ``bernoulli``)
  are recorded in the order the function calls them, and dead-code elimination never removes one
  (an unused draw still advances the generator in eager mode).
* **Tracing draws nothing.** Tracing runs on meta tensors, whose random kernels do not
  touch any generator, so compiling does not shift the numbers of the first call.
* **In-place draws.** ``x.bernoulli_(p)`` with a number ``p`` (stochastic depth) is recorded as
  ``bernoulli(x, p)`` written into ``x``: both draw one uniform per element, in order, so the CPU
  numbers are eager mode's. On cuda the functional op draws from the device's Philox stream and the
  in-place one from host draws (``ember.cuda._backend``), so compiled masks differ from eager's
  there (same distribution). Other in-place samplers (``uniform_``, ``normal_``, ``bernoulli_``
  with a tensor ``p``, ...) are refused with a clear error.
* **The backward never draws.** Partitioners save a random op's output for the backward
  instead of recomputing it (the dropout mask is a saved value); :func:`check_backward_draws_nothing`
  refuses a backward graph that contains a random op. Under either rule the backward reads the
  forward's mask.

``fallback_random = False`` (the default): numbers computed in the kernels
--------------------------------------------------------------------------

``bernoulli`` (a number ``p`` or a floating tensor of probabilities), ``rand``/``rand_like`` and
``randn``/``randn_like`` (float32 and half outputs) without an explicit ``generator=`` are lowered to
pointwise loop bodies that compute Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3", SC'11) in the kernel, so a dropout mask fuses with its consumers (``x * mask / (1 - p)``
is one loop). The pass :func:`ember._inductor.inkernel_random.seed_graph` gives the compiled forward
one more input, a 64-bit seed, which the runtime draws from ember's default CPU generator at each
call: ``ember.manual_seed`` makes compiled runs reproducible, and each call draws new numbers.
A Philox4x32-10 block of counter ``(lo32(b), hi32(b), k, 0)`` under key
``(lo32(seed), hi32(seed))`` gives four words to the ``k``-th such node of the graph: element ``i``
(row-major) of a uniform is ``(w >> 8) * 2**-24`` (float32, in ``[0, 1)``) of word ``i & 3`` of block
``i >> 2``, a Bernoulli mask ``uniform < p``, a normal Box-Muller of the uniforms of words ``2j`` and
``2j + 1`` of block ``i >> 1`` (``j = i & 1``). The C++ and the Triton kernels compute the same bits.
The numbers differ from eager mode's (the same distributions), as PyTorch's compiled masks do.
Other random ops, and those with a generator, stay eager calls as below.

``fallback_random = True``: eager mode's numbers
------------------------------------------------

Every random op runs, when the compiled forward runs, as a call of the eager op on the default
generator (or the generator object passed to it), in program order: a compiled function draws
exactly the numbers eager mode would for the same ``ember.manual_seed`` and leaves the generator
where eager mode does. A compiled dropout gives eager mode's values and gradients
(``tests/test_aot_rng.py``; the tests that compare compiled with eager values turn this on).
"""

from __future__ import annotations

from ..exc import InductorError
from .functionalize import is_random_op

__all__ = ["is_random_op", "random_nodes", "check_backward_draws_nothing"]


def random_nodes(gm):
    """The nodes of ``gm`` that call a random op, in graph (= execution) order."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and is_random_op(n.target)]


def check_backward_draws_nothing(bw_gm):
    """Raise if a backward graph calls a random op (it would draw numbers eager mode never draws).

    Raises:
        InductorError: naming the random nodes found.
    """
    found = random_nodes(bw_gm)
    if found:
        names = ", ".join(f"{n.name} ({n.target.name})" for n in found)
        raise InductorError(
            f"aot: the backward graph calls random ops ({names}); the partitioner must save their outputs "
            "from the forward instead of recomputing them"
        )
