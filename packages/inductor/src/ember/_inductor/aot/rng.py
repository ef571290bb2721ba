"""Random numbers in compiled graphs: the rule, and the checks that keep it.

The rule
--------

A compiled function draws the same random numbers as eager mode for the same
``ember.manual_seed``:

* **Random ops stay calls of the eager op.** ``bernoulli``, ``rand``, ``randn``, ... (every
  op tagged ``random``; dropout is traced through its decomposition, whose mask comes
  from ``bernoulli``) are recorded as graph nodes and run, when the compiled forward runs,
  as calls of the eager op on the default generator (or the generator object passed to
  them). A compiler keeps them as extern calls, in graph order.
* **Program order.** The trace records the random ops in the order the function calls them,
  and dead-code elimination never removes one (an unused draw still advances the
  generator in eager mode), so the compiled forward draws in eager order.
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
  refuses a backward graph that contains a random op.

A compiled dropout therefore gives eager mode's values and gradients for the same seed
(``tests/test_aot_rng.py``).
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
