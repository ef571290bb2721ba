"""Random numbers computed inside the compiled kernels (``config.fallback_random`` off, the default).

:func:`seed_graph` is the pass that makes it possible. It runs on each graph ``compile_fx_inner`` compiles
(after partitioning: the forward, or the inference graph; the backward has no random op), and when
the graph calls a random op the kernels can compute (:data:`INKERNEL_OPS`, without an explicit
``generator=``) it returns a copy of the graph with:

* one more placeholder, ``inkernel_rng_seed``: a 0-d int64 tensor holding a 64-bit seed, the last input;
* ``node.meta[META] = (seed placeholder, ordinal)`` on each such random node, ordinals ``0, 1, ...`` in
  graph order.

The lowerings of those ops (:mod:`ember._inductor.lowering`) then build pointwise loop bodies over the
IR ops ``philox_rand`` / ``philox_randn`` instead of extern calls, so a dropout mask fuses with its
consumers. A node without ``META`` (``fallback_random`` on, an explicit generator, a graph compiled
without this pass) stays an extern call of the eager op.

:class:`SeededGraph.wrap` turns the compiled graph back into one with the original inputs: each call
draws a fresh seed from ember's default CPU generator (:func:`draw_seed`) and passes it as the last
input, so ``ember.manual_seed`` makes compiled runs reproducible and two calls draw different numbers.

The numbers (the same in the C++ and the Triton kernels; the tests check them bit for bit against
:func:`ember.cuda.kernels.philox.philox4x32_10`): random node ``k`` reads a stream of 32-bit words,
``W[m]`` being word ``m & 3`` of the Philox4x32-10 block (Salmon et al., SC'11) of counter
``(lo32(m >> 2), hi32(m >> 2), k, 0)`` under key ``(lo32(seed), hi32(seed))``: one block gives four
words (the C++ kernels compute sixteen consecutive blocks at once and keep them, so a loop pays one
block per four numbers). With ``i`` the row-major position in the op's output:

* uniform (``rand``, ``bernoulli``): ``u = (W[i] >> 8) * 2**-24`` (word ``i & 3`` of block ``i >> 2``;
  float32, in ``[0, 1 - 2**-24]``);
  ``bernoulli(p)`` is ``u < p`` compared exactly (a number ``p`` is rounded up to float32 first, which
  keeps the comparison exact because ``u`` has 24 bits);
* normal (``randn``): Box-Muller, ``sqrt(-2 log(1 - u0)) * cos(2 pi u1)`` with ``u0``, ``u1`` the uniforms
  of ``W[2i]`` and ``W[2i+1]`` (float32): the pair of words ``2j, 2j+1`` of block ``i >> 1``, ``j = i & 1``.
"""

from __future__ import annotations

import copy

import numpy as np

import ember

__all__ = ["META", "INKERNEL_OPS", "SEED_NAME", "seed_graph", "SeededGraph", "draw_seed", "inkernel_nodes"]

#: The ``node.meta`` key of a random node computed in the kernel: ``(seed placeholder node, ordinal)``.
META = "inkernel_random"
#: The random ops whose numbers the kernels compute (others stay extern calls of the eager op).
INKERNEL_OPS = frozenset({"bernoulli", "rand", "rand_like", "randn", "randn_like"})
#: The name of the seed placeholder the pass adds.
SEED_NAME = "inkernel_rng_seed"


def inkernel_nodes(gm):
    """The nodes of ``gm`` whose random numbers the kernels compute: calls of :data:`INKERNEL_OPS` with
    no ``generator=`` (an explicit generator is a stream the caller owns: it stays an eager call)."""
    found = []
    for node in gm.graph.nodes:
        name = getattr(node.target, "name", None)
        if node.op != "call_function" or name not in INKERNEL_OPS:
            continue
        if node.kwargs.get("generator") is not None:
            continue
        found.append(node)
    return found


class SeededGraph:
    """A copy of a graph with the seed input added (the result of :func:`seed_graph`).

    Attributes:
        gm (ember.fx.GraphModule): the copy; its last placeholder is the seed.
        example_inputs (list): the original example inputs plus a 0-d int64 seed example.
        count (int): the random nodes computed in the kernels.
    """

    def __init__(self, gm, example_inputs, count):
        self.gm = gm
        self.example_inputs = example_inputs
        self.count = count

    def wrap(self, compiled):
        """``compiled`` (a callable taking the copy's inputs) as a callable of the original inputs, which
        draws the seed at each call. Other attributes of ``compiled`` (a dynamic compile's ``binding``)
        stay readable."""
        return _Seeded(compiled)


class _Seeded:
    """A compiled graph called with a fresh seed as its last input."""

    def __init__(self, compiled):
        self._compiled = compiled
        self._device = None  # the device the seed tensor is made on: that of the first tensor argument

    def __call__(self, *args):
        if self._device is None:
            self._device = next((a.device for a in args if isinstance(a, ember.Tensor)), ember.device("cpu"))
        # a fill kernel with the seed as its argument: ember.tensor(seed, device="cuda") would copy 8 bytes from
        # pageable host memory, which waits for the stream's queued work (the host could not run ahead)
        seed = ember.full((), draw_seed(), dtype=ember.int64, device=self._device)
        return self._compiled(*args, seed)

    def __getattr__(self, name):
        return getattr(self.__dict__["_compiled"], name)


def draw_seed():
    """One 64-bit seed from ember's default CPU generator, as a signed int64 value (two's complement)."""
    # the generator's numpy stream (ember's random ops draw from it too): one draw advances it
    value = int(ember.default_generator._rng.integers(0, 2**64, dtype=np.uint64))
    return value - 2**64 if value >= 2**63 else value


def seed_graph(gm, example_inputs):
    """The pass: a copy of ``gm`` whose in-kernel random nodes read a seed input, or None.

    Args:
        gm (ember.fx.GraphModule): a functional graph (after aot).
        example_inputs (list): one per placeholder (real or meta tensors, or numbers).

    Returns:
        SeededGraph or None: None when ``config.fallback_random`` is on or no node qualifies
        (:func:`inkernel_nodes`); ``gm`` itself is never changed.
    """
    from . import config

    if config.fallback_random or not inkernel_nodes(gm):
        return None
    graph = copy.deepcopy(gm.graph)  # node metas are copied, so marking the copy leaves gm's alone
    nodes = list(graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    if placeholders:
        with graph.inserting_after(placeholders[-1]):
            seed = graph.placeholder(SEED_NAME)
    else:
        with graph.inserting_before(nodes[0]):
            seed = graph.placeholder(SEED_NAME)
    seed.meta["val"] = ember.empty((), dtype=ember.int64, device="meta")
    copied = ember.fx.GraphModule(gm, graph, type(gm).__name__)
    copied.meta = dict(getattr(gm, "meta", {}))
    marked = inkernel_nodes(copied)
    for ordinal, node in enumerate(marked):
        node.meta[META] = (seed, ordinal)
    tensors = [t for t in example_inputs if isinstance(t, ember.Tensor)]
    device = tensors[0].device if tensors else ember.device("cpu")
    example = (ember.empty((), dtype=ember.int64, device="meta") if device.type == "meta"
               else ember.zeros((), dtype=ember.int64, device=device))
    return SeededGraph(copied, [*example_inputs, example], len(marked))
