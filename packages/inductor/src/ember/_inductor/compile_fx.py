"""The compiler's entry point: an FX graph and example inputs in, a fast callable out.

``compile_fx(gm, example_inputs)`` is what the ``"inductor"`` backend (and
``ember.compile``'s default) calls. It chains the pipeline's stages::

    aot_module_simplified          (aot/api.py)  joint forward+backward trace, functionalized
      decompositions               (aot/decompositions.py)  composite ops -> the core set
      min-cut partition            (aot/partitioners.py)  forward graph / backward graph
      compile_graph, per graph     (codegen/wrapper.py)  lower -> schedule -> C++ -> load

Never a wrong answer, never a silent surprise: a graph the compiler cannot handle
(a :class:`~ember._inductor.exc.LoweringException`, or aot's
:class:`~ember._inductor.exc.InductorError` for a data-dependent trace) runs eagerly, and so does one on
which the compiler fails in any other way (a failing C++ build, a bug) while
``config.fallback_on_compile_error`` is on (the default; the tests turn it off so
a compiler bug fails them). Each fallback logs a warning with its reason on the
logger ``ember._inductor``, and the returned callable lists the reasons in its
``fallbacks`` attribute.
"""

from __future__ import annotations

import logging

from ember._gc import paused as gc_paused

from . import config, debug
from .exc import CppCompileError, InductorError
from .inkernel_random import seed_graph

__all__ = ["compile_fx", "compile_fx_inner", "graph_name", "is_known_limit", "uses_triton", "real_device"]

log = logging.getLogger("ember._inductor")


def graph_name(gm, default: str = "graph") -> str:
    """A readable name for ``gm`` (its class name unless that is the generic ``GraphModule``)."""
    name = type(gm).__name__
    return default if name in ("GraphModule", "") else name


def _eager_callable(gm):
    """Run ``gm`` with ember's eager kernels, returning its outputs as a tuple like a compiled graph."""

    def run_eagerly(*args):
        out = gm(*args)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    return run_eagerly


def is_known_limit(exc) -> bool:
    """Whether ``exc`` is the compiler saying "I can't do this" (a limit) rather than a bug.

    Limits are the errors (:class:`~ember._inductor.exc.InductorError`) a stage raises on purpose:
    a :class:`~ember._inductor.exc.LoweringException`, or aot refusing a data-dependent
    trace (``nonzero``, ``.item()``). A failing C++ build and any other exception are bugs.
    """
    return isinstance(exc, InductorError) and not isinstance(exc, CppCompileError)


def _fall_back(stage, exc, fallbacks, *, expected, eager):
    """Record and log why ``stage`` runs eagerly and return ``eager`` (or re-raise ``exc``).

    ``exc`` is re-raised when it is not an ``expected`` limit and
    ``config.fallback_on_compile_error`` is off.
    """
    if not expected and not config.fallback_on_compile_error:
        raise exc
    reason = f"{stage}: {type(exc).__name__}: {exc}"
    fallbacks.append(reason)
    log.warning("ember-inductor runs this graph eagerly (%s)", reason)
    debug.stage(f"{stage}_fallback", reason)
    return eager


def compile_fx_inner(gm, example_inputs, *, stage="graph", fallbacks=None, triton=None, cudagraph_group=None,
                     device=None):
    """Compile one functional graph (a forward, a backward or an inference graph) to C++, or to Triton
    kernels when its tensors are on cuda (see :func:`uses_triton`).

    Unless ``config.fallback_random`` is on, the graph's ``bernoulli``/``rand``/``randn`` nodes are
    computed inside the kernels from a seed drawn at each call (the pass
    :func:`~ember._inductor.inkernel_random.seed_graph` adds it as an input).

    Args:
        gm (ember.fx.GraphModule): a functional graph of registry ops (after aot).
        example_inputs (list[Tensor]): tensors (real or meta) like the graph's inputs.
        stage (str): the graph's role, used in log lines and debug file names.
        fallbacks (list[str] or None): where to append the reason when it runs eagerly.
        triton (bool or None): compile to Triton (True) or C++ (False); None decides from
            ``example_inputs`` (:func:`uses_triton`). ``compile_fx`` passes its decision: aot hands
            this function meta tensors, which do not say which device the graph runs on.
        device (ember.device or None): the device the graph runs on (``compile_fx`` passes the real inputs'
            one: a factory naming it, such as cross-entropy's ``arange(n, device=...)``, is then a loop, not
            an extern call); None: the first non-meta tensor's of ``example_inputs``.
        cudagraph_group (CudaGraphGroup or None): run the compiled graph under CUDA graphs
            (:mod:`~ember._inductor.runtime.cudagraphs`; ``compile_fx`` passes one group to its forward
            and backward when ``config.cudagraphs`` is on). None: only when ``config.cudagraphs`` is on.

    Returns:
        callable: ``f(*inputs) -> tuple`` of the graph's outputs.

    Raises:
        Exception: the compiler's error, when ``config.fallback_on_compile_error`` is off
            (a known limit, :func:`is_known_limit`, always falls back instead).
    """
    fallbacks = [] if fallbacks is None else fallbacks
    debug.stage(f"{stage}_graph", lambda: gm.code)
    try:
        # random ops computed in the kernels read a seed input the runtime fills (config.fallback_random)
        seeded = seed_graph(gm, example_inputs)
        graph, inputs = (seeded.gm, seeded.example_inputs) if seeded is not None else (gm, example_inputs)
        if uses_triton(example_inputs) if triton is None else triton:
            compiled = _triton_compile(graph, inputs, device)
        else:
            compiled = _core_compile(graph, inputs)
        if seeded is not None:
            compiled = seeded.wrap(compiled)
    except Exception as exc:  # noqa: BLE001 - any compiler failure becomes eager (or is raised, by config)
        return _fall_back(stage, exc, fallbacks, expected=is_known_limit(exc), eager=_eager_callable(gm))
    if cudagraph_group is None and not config.cudagraphs:
        return compiled
    from .runtime.cudagraphs import cudagraphify

    return cudagraphify(compiled, gm, role=stage, group=cudagraph_group, name=graph_name(gm, stage))


def _core_compile(gm, example_inputs):
    """The compiler core for cpu graphs (codegen/wrapper.py): lower, schedule, generate C++, load."""
    from .codegen.wrapper import compile_graph

    return compile_graph(gm, example_inputs)


def _triton_compile(gm, example_inputs, device=None):
    """The compiler core for cuda graphs (runtime/triton_graph.py) - and for cpu graphs under Triton's
    interpreter when ``config.triton_on_cpu`` asks for it: lower, schedule, generate Triton, load."""
    from .runtime.triton_graph import compile_graph_triton

    return compile_graph_triton(gm, example_inputs, device=device)


def real_device(tensors):
    """The device of the first tensor of ``tensors`` not on the cpu or meta, else the cpu."""
    from ember._device import device
    from ember._tensor import Tensor

    for t in tensors:
        if isinstance(t, Tensor) and t.device.type not in ("cpu", "meta"):
            return t.device
    return device("cpu")


def uses_triton(example_inputs) -> bool:
    """Whether a graph with these example inputs is compiled to Triton: a tensor on cuda, or
    ``config.resolved_triton_on_cpu()`` (cpu graphs through Triton's interpreter)."""
    from ember._tensor import Tensor

    if any(isinstance(t, Tensor) and t.device.type == "cuda" for t in example_inputs):
        return True
    return config.resolved_triton_on_cpu()


def _aot_pieces():
    """aot_module_simplified, the inductor decompositions and the min-cut partitioner."""
    from .aot.api import aot_module_simplified
    from .aot.decompositions import inductor_decompositions
    from .aot.partitioners import min_cut_rematerialization_partition

    return aot_module_simplified, inductor_decompositions(), min_cut_rematerialization_partition


def compile_fx(gm, example_inputs, *, name=None, inner_compile=None, decompositions=None, partition_fn=None):
    """Compile an FX graph into a callable that runs generated C++ (forward and backward).

    Args:
        gm (ember.fx.GraphModule or ember.nn.Module): the graph to compile (from ``make_fx``,
            ``ember.fx.symbolic_trace`` or the bytecode capture); any module called with
            positional tensors works too (its parameters and buffers become graph inputs).
        example_inputs (list[Tensor]): inputs like those the result will be called with
            (shapes, dtypes, ``requires_grad``); the graph is specialised to them.
        name (str or None): the name of the debug output folder (default: the graph's class name).
        inner_compile (callable or None): ``(gm, example_inputs) -> callable`` used for each
            graph instead of the C++ compiler (tests, and the ``aot_eager`` backend).
        decompositions (dict or None): overrides the inductor decomposition table.
        partition_fn (callable or None): overrides the min-cut partitioner.

    Raises:
        TypeError: if ``gm`` is not a module (a plain function must be captured first).

    Returns:
        callable: ``f(*inputs)`` returning what ``gm`` returns; differentiable through
        ``ember.autograd`` when inputs require grad. Its ``fallbacks`` attribute lists the
        reasons of the graphs that run eagerly (empty when everything compiled).

    Example:
        >>> import ember
        >>> from ember.fx.experimental.proxy_tensor import make_fx
        >>> from ember._inductor.compile_fx import compile_fx
        >>> x = ember.randn(8)
        >>> gm = make_fx(lambda t: ember.sigmoid(t) * 2)(x)
        >>> f = compile_fx(gm, [x])
        >>> bool(ember.allclose(f(x), ember.sigmoid(x) * 2))
        True
    """
    from ember.nn import Module

    if not isinstance(gm, Module):
        raise TypeError(
            f"compile_fx: gm must be an ember.fx.GraphModule or an ember.nn.Module, got {type(gm).__name__}; "
            "capture a function first, e.g. compile_fx(make_fx(fn)(*inputs), inputs)"
        )
    fallbacks: list[str] = []
    # decided here, on the real inputs (and the module's parameters): the graphs aot hands to
    # compile_fx_inner come with meta example inputs
    tensors = [*example_inputs, *gm.parameters(), *gm.buffers()]
    triton, device = uses_triton(tensors), real_device(tensors)
    folder_name = name or graph_name(gm)
    spec = getattr(gm, "meta", {}).get("dynamic_dims")
    # symbolic sizes from ember-dynamo: kernels take sizes (CUDA graphs record fixed shapes: per shape)
    if spec is not None and inner_compile is None and not (triton and config.cudagraphs):
        from .dynamic_compile import compile_fx_dynamic

        with gc_paused():
            compiled = compile_fx_dynamic(gm, example_inputs, spec, triton=triton, device=device, name=folder_name,
                                          decompositions=decompositions, partition_fn=partition_fn)
        if compiled is not None:
            return compiled
    from .metrics import count_compilation

    count_compilation("static")
    with gc_paused(), debug.compiling(folder_name):
        debug.stage("fx_graph", lambda: getattr(gm, "code", None) or repr(gm))

        folder = debug.current_handle()
        cudagraph_group = _cudagraph_group(folder_name)  # forward and backward: one group, decided now

        max_autotune = config.resolved_max_autotune()  # the backward, compiled later, keeps the mode

        def graph_compiler(role):
            def compile_one(graph, inputs):
                # the backward may be compiled later, on the first backward call: same folder
                with debug.resume(folder), config.patch(max_autotune=max_autotune):
                    if inner_compile is not None:
                        return inner_compile(graph, inputs)
                    return compile_fx_inner(graph, inputs, stage=role, fallbacks=fallbacks, triton=triton,
                                            cudagraph_group=cudagraph_group, device=device)

            return compile_one

        try:
            aot_module_simplified, default_decomps, default_partition = _aot_pieces()
            compiled = aot_module_simplified(
                gm,
                list(example_inputs),
                fw_compiler=graph_compiler("forward"),
                bw_compiler=graph_compiler("backward"),
                inference_compiler=graph_compiler("inference"),
                decompositions=default_decomps if decompositions is None else decompositions,
                partition_fn=partition_fn or default_partition,
            )
        except Exception as exc:  # noqa: BLE001 - a failure of aot tracing: eager (or raised, by config)
            compiled = _fall_back("aot", exc, fallbacks, expected=is_known_limit(exc), eager=gm.forward)
    return _with_fallbacks(compiled, fallbacks)


def _cudagraph_group(name):
    """A group for the CUDA graphs of one compile when ``config.cudagraphs`` is on, else None."""
    if not config.cudagraphs:
        return None
    from .runtime.cudagraphs import CudaGraphGroup

    return CudaGraphGroup(name)


def _with_fallbacks(compiled, fallbacks):
    """Wrap ``compiled`` so that its ``fallbacks`` attribute is the list of reasons."""

    def compiled_fn(*args):
        return compiled(*args)

    compiled_fn.fallbacks = fallbacks
    compiled_fn.__wrapped__ = compiled
    return compiled_fn
