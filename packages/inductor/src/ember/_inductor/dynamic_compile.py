"""``compile_fx`` for graphs with dynamic dims: one compile whose kernels take the sizes as arguments.

:func:`compile_fx_dynamic` traces the captured graph at the hint sizes and at four probe sizes
(:mod:`ember._inductor.dynamic`), compiles each resulting graph once with symbolic sizes, and returns a
callable with an ``accepts(args)`` method: whether a call's inputs are ones it was compiled for (same
dtypes, static sizes and modes; dynamic sizes that keep the compiled code's assumptions). The caller
(:class:`ember._dynamo.symbolic.PerShapeCompiled`) compiles again where it says no. When a graph cannot
be compiled with symbolic sizes, it returns None and ``compile_fx`` compiles for the sizes at hand
(logged, counted as a ``"fallback"``).
"""

from __future__ import annotations

import logging

import ember

from . import config, debug, dynamic
from .compile_fx import is_known_limit
from .inkernel_random import seed_graph

__all__ = ["compile_fx_dynamic"]

log = logging.getLogger("ember._inductor")

#: The reason of the last dynamic compile that fell back to fixed sizes (for tests and debugging).
last_fallback_reason = None


def compile_fx_dynamic(gm, example_inputs, spec, *, triton, name, decompositions=None, partition_fn=None,
                       device=None):
    """Compile ``gm`` for any sizes of its dynamic dims, or return None (compile it for fixed sizes).

    Args:
        gm (ember.fx.GraphModule): the captured graph.
        example_inputs (list): its inputs at the hint sizes.
        spec (DynamicDims): the dynamic dims of each input.
        triton (bool): compile the kernels to Triton (else C++).
        device (ember.device or None): the device of the real inputs (Triton graphs' factories name it).
        name (str): the debug folder's name.
        decompositions, partition_fn: as in ``compile_fx``.

    Returns:
        callable or None: ``f(*inputs)`` with ``accepts(inputs) -> bool`` and ``assumptions`` (the
        relations between sizes the compiled code relies on).

    Raises:
        Exception: a compiler bug, when ``config.fallback_on_compile_error`` is off.
    """
    global last_fallback_reason
    from .compile_fx import _aot_pieces

    _, default_decomps, default_partition = _aot_pieces()
    spec = spec.at(example_inputs)  # the capture's hints, or this compile's sizes
    graphs = []

    def compile_graphs(gms, inputs):
        if triton:
            from .runtime.triton_graph import compile_graph_triton_dynamic as compile_graph
        else:
            from .codegen.wrapper import compile_graph_dynamic as compile_graph
        # random ops computed in the kernels: each trace gets the seed input (inkernel_random)
        seeded = [seed_graph(g, i) for g, i in zip(gms, inputs)]
        if any(s is not None for s in seeded):
            if any(s is None or s.count != seeded[0].count for s in seeded):
                raise dynamic.NotDynamic("the traces have different random ops")
            gms, inputs = [s.gm for s in seeded], [s.example_inputs for s in seeded]
        compiled = compile_graph(gms, inputs, spec, device=device) if triton else compile_graph(gms, inputs, spec)
        graphs.append(compiled)
        return seeded[0].wrap(compiled) if seeded[0] is not None else compiled

    with debug.compiling(name + "_dynamic"):
        try:
            from .aot.api import aot_module_dynamic

            runs = [list(example_inputs)]
            runs += [dynamic.probe_inputs(example_inputs, spec, k) for k in range(1, dynamic.RUNS)]
            run = aot_module_dynamic(
                gm, list(example_inputs), runs, compile_graphs,
                partition_fn=partition_fn or default_partition,
                decompositions=default_decomps if decompositions is None else decompositions,
                sizes=_SizeOutputs(spec),
            )
        except Exception as exc:  # noqa: BLE001 - any failure: compile for the sizes at hand
            expected = isinstance(exc, dynamic.NotDynamic) or is_known_limit(exc)
            if not expected and not config.fallback_on_compile_error:
                raise
            last_fallback_reason = f"{type(exc).__name__}: {exc}"
            log.info("ember-inductor compiles this graph for fixed sizes (dynamic sizes: %s)", last_fallback_reason)
            debug.stage("dynamic_fallback", last_fallback_reason)
            dynamic.count_compilation("fallback")
            return None
    dynamic.count_compilation("dynamic")
    return _DynamicCompiled(run, spec, example_inputs, graphs)


class _SizeOutputs:
    """Ints a graph returns that are sizes: fitted over the symbols, evaluated per call from the inputs."""

    def __init__(self, spec):
        self._unifier = dynamic.Unifier(spec)
        canon = spec.canonical()
        self._where = {}
        for position, dims in enumerate(spec.dims):
            for d, symbol in dims:
                self._where.setdefault(canon[symbol], (position, d))

    def fit(self, values):
        """The size expression of an int output seen as ``values`` across the traces (one per trace).

        Raises:
            NotDynamic: when the expression would need a divisibility assumption of the sizes.
        """
        expr = self._unifier.fit(values)
        if self._unifier.assumptions:
            raise dynamic.NotDynamic(f"an int output {expr} needs a divisibility of the sizes")
        return expr

    def env(self, args):
        """Each size symbol's value for a call's ``args`` (read from the input shapes)."""
        return {s: args[p].shape[d] for s, (p, d) in self._where.items()}


class _DynamicCompiled:
    """The callable :func:`compile_fx_dynamic` returns."""

    def __init__(self, run, spec, example_inputs, graphs):
        self._run = run
        self.graphs = graphs
        self.fallbacks = []
        canon = spec.canonical()
        self.assumptions = sorted({a for g in graphs for a in g.assumptions})
        # per input: what must stay as it was (static dims, dtype, device, requires_grad, or a value)
        self._specs = []
        for value, dims in zip(example_inputs, spec.dims):
            if isinstance(value, ember.Tensor):
                dynamic_dims = {d: canon[s] for d, s in dims}
                static = tuple(n for d, n in enumerate(value.shape) if d not in dynamic_dims)
                self._specs.append(("tensor", value.dim(), static, tuple(dynamic_dims.items()),
                                    value.dtype, value.device, value.requires_grad))
            else:
                self._specs.append(("value", value))
        self._checks = [g.binding for g in graphs]

    def accepts(self, inputs):
        """Whether these inputs run on this compile (else the caller compiles again)."""
        if len(inputs) != len(self._specs) or ember.is_grad_enabled() != self._run.grad_enabled:
            return False
        if tuple(m.training for m in self._run.modules) != self._run.training:
            return False
        env = {}
        for value, spec in zip(inputs, self._specs):
            if spec[0] == "value":
                if type(value) is not type(spec[1]) or value != spec[1]:
                    return False
                continue
            _, ndim, static, dims, dtype, device, requires_grad = spec
            if not isinstance(value, ember.Tensor) or value.dim() != ndim or value.dtype != dtype or \
                    value.device != device or value.requires_grad != requires_grad:
                return False
            shape = value.shape
            dyn = dict(dims)
            if tuple(n for d, n in enumerate(shape) if d not in dyn) != static:
                return False
            for d, symbol in dims:
                if shape[d] < 2 or env.setdefault(symbol, shape[d]) != shape[d]:  # 0 and 1 specialise
                    return False
        return all(b.check_env(env) for b in self._checks)

    def __call__(self, *args):
        return self._run(*args)
