"""How calls of compiled functions are intercepted, and what happens on a cache miss.

ember-dynamo does not hook CPython's frame evaluation (no PEP 523 C extension):
``ember.compile(fn)`` returns a wrapper, and calling the wrapper is the interception point. The
wrapper binds the arguments to ``fn``'s parameters (the frame's locals, ``L``), runs the guards of
``fn.__code__``'s cache entries and, on a miss, captures ``fn``'s bytecode with these arguments.

Limits that follow from this choice (also in the package README):

* only the wrapped function's own frame is entered; the functions it calls are inlined by the
  translator, or, when they cannot be, cause a graph break and run natively;
* code that runs outside the wrapper - callbacks, other threads, functions called from a graph
  break's native part - is not compiled (unless it is itself a compiled function);
* a function's free variables are read when the wrapper is called (their cell contents are put in
  ``L`` under the variable's name).
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import warnings

from ember._gc import paused as gc_paused

from . import config
from .cache import CacheEntry
from .guards import Guard, GuardCheck, GuardKind, autocast_state, default_dtype, size_mismatch_dims

__all__ = ["make_binder", "CompileSettings", "handle_miss", "capture_observers"]

log = logging.getLogger("ember._dynamo")

# Callables told of every capture (explain, tests): observer(record: CaptureRecord).
capture_observers: list = []

# One capture at a time: the translator and backends keep global state (fake tensors, caches).
_COMPILE_LOCK = threading.RLock()


# ----------------------------------------------------------------------------- binding arguments


def make_binder(fn):
    """A generated function with ``fn``'s signature that returns ``fn``'s frame locals as a dict.

    Python's own argument binding does the work (defaults, keywords, ``*args``/``**kwargs``, and
    the same ``TypeError`` messages as calling ``fn``), which is far faster than
    ``inspect.Signature.bind``. Free variables' cell contents are added under their names.

    Args:
        fn (function): a plain Python function.

    Returns:
        callable: ``bind(*args, **kwargs) -> dict``.
    """
    sig = inspect.signature(fn, follow_wrapped=False)
    namespace: dict = {}
    params, names = [], []
    seen_kw_only = False
    seen_pos_only = False
    for i, p in enumerate(sig.parameters.values()):
        default = ""
        if p.default is not inspect.Parameter.empty:
            namespace[f"___d{i}"] = p.default
            default = f"=___d{i}"
        if p.kind is p.POSITIONAL_ONLY:
            seen_pos_only = True
        elif seen_pos_only:
            params.append("/")
            seen_pos_only = False
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            seen_kw_only = True
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not seen_kw_only:
                params.append("*")
                seen_kw_only = True
            params.append(f"{p.name}{default}")
        names.append(p.name)
    if seen_pos_only:
        params.append("/")
    lines = [f"def ___bind({', '.join(params)}):"]
    lines.append("    L = {" + "".join(f"{n!r}: {n}, " for n in names) + "}")
    code = fn.__code__
    for i, (var, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or ())):
        namespace[f"___cell{i}"] = cell
        lines.append("    try:")
        lines.append(f"        L[{var!r}] = ___cell{i}.cell_contents")
        lines.append("    except ValueError:")  # an empty cell (assigned later): not readable yet
        lines.append("        pass")
    lines.append("    return L")
    exec(compile("\n".join(lines) + "\n", f"<ember._dynamo binder of {fn.__qualname__}>", "exec"), namespace)  # noqa: S102
    binder = namespace["___bind"]
    # a wrong call's TypeError names the user's function, as calling it would
    binder.__code__ = binder.__code__.replace(co_name=fn.__name__, co_qualname=fn.__qualname__)
    binder.__name__, binder.__qualname__ = fn.__name__, fn.__qualname__
    return binder


# ----------------------------------------------------------------------------- compile settings


class CompileSettings:
    """What one ``ember.compile(...)`` call asked for; entries are made under one settings object.

    Attributes:
        backend (callable): the resolved backend ``(gm, example_inputs) -> callable``.
        backend_name (str): its name (for messages).
        fullgraph (bool), dynamic (bool or None), mode (str or None), options (dict or None).
    """

    __slots__ = ("backend", "backend_name", "fullgraph", "dynamic", "mode", "options")

    def __init__(self, backend, backend_name, fullgraph=False, dynamic=None, mode=None, options=None):
        self.backend = backend
        self.backend_name = backend_name
        self.fullgraph = bool(fullgraph)
        self.dynamic = dynamic
        self.mode = mode
        self.options = dict(options) if options else None

    def __repr__(self):
        return (
            f"CompileSettings(backend={self.backend_name!r}, fullgraph={self.fullgraph}, dynamic={self.dynamic}, "
            f"mode={self.mode!r})"
        )


class CaptureRecord:
    """What observers are told about one capture (or one decision to run a frame eagerly).

    Attributes:
        code (CodeType), fn (function): what was captured.
        settings (CompileSettings): under which settings.
        captured (CapturedFrame or None): the capture (``None`` when the frame runs eagerly).
        entry (CacheEntry or None): the cache entry made from it.
        reason (str or None): why the frame was (re)compiled: ``None`` for a first capture.
        eager_reason (str or None): why the frame runs eagerly instead (no capture).
        seconds (float): time spent capturing and compiling.
    """

    def __init__(self, code, fn, settings, captured=None, entry=None, reason=None, eager_reason=None, seconds=0.0):
        self.code, self.fn, self.settings = code, fn, settings
        self.captured, self.entry = captured, entry
        self.reason, self.eager_reason, self.seconds = reason, eager_reason, seconds


def _notify(record):
    for observer in list(capture_observers):
        observer(record)


def _where(code) -> str:
    return f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"


# ----------------------------------------------------------------------------- the miss path


def _exc_types():
    """The translator's exceptions that mean "run this frame eagerly": ``Unsupported`` and ``SkipFrame``."""
    from . import exc

    return tuple(getattr(exc, name) for name in ("Unsupported", "SkipFrame") if hasattr(exc, name))


def _translate(fn, frame_locals, capture_config):
    from .translator import translate

    return translate(fn, frame_locals, config=capture_config)


def _dynamic_dims(cache, settings, frame_locals):
    """Source name -> dims to make symbolic: ``mark_dynamic`` on arguments, and automatic dynamic."""
    dims = {}
    if settings.dynamic is None:
        for name, dims_seen in cache.dynamic_dims.items():
            dims[name] = frozenset(dims_seen)
    if settings.dynamic is not False:
        for name, value in frame_locals.items():
            # an argument, or an item of ``*args``/``**kwargs`` (a compiled module's call takes those)
            items = [(f"L[{name!r}]", value)]
            if type(value) in (tuple, list):
                items += [(f"L[{name!r}][{i!r}]", v) for i, v in enumerate(value)]
            elif type(value) is dict:
                items += [(f"L[{name!r}][{k!r}]", v) for k, v in value.items() if isinstance(k, str)]
            for key, item in items:
                marked = getattr(item, "_dynamo_dynamic_indices", None)
                if marked:
                    dims[key] = frozenset(dims.get(key, frozenset()) | set(marked))
    return dims


def _recompile_reason(cache, settings, frame_locals, frame_globals):
    """Why no entry of ``settings`` matched (the failing guard of the most recent one), noting
    dims that changed size only, for automatic dynamic shapes."""
    reasons = []
    for entry in cache.entries:
        if entry.settings is not settings:
            continue
        failures = [g for g in entry.check.guards if _fails(g, frame_locals, frame_globals)]
        if not failures:
            continue
        reasons.append(entry.check.explain_failure(frame_locals, frame_globals))
        if settings.dynamic is None and config.automatic_dynamic_shapes:
            # only sizes or int values changed: make those dims (and ints: "dim" None) dynamic
            changed = [(g, _changed_dims(g, frame_locals, frame_globals)) for g in failures]
            if all(dims for _, dims in changed):
                for guard, dims in changed:
                    cache.dynamic_dims.setdefault(guard.source.name(), set()).update(dims)
    return reasons[0] if reasons else None


def _changed_dims(guard, frame_locals, frame_globals):
    """The dims whose sizes alone failed a tensor guard, or ``{None}`` for an int argument or
    attribute whose value changed (automatic dynamic ints, as PyTorch's); empty for other failures."""
    from .guards import GuardKind

    if guard.kind is GuardKind.EQUALS_MATCH and type(guard.expected) is int and guard.source is not None:
        try:
            now = guard.source.read(frame_locals, frame_globals)
        except Exception:  # noqa: BLE001 - the source no longer reads: not a value change
            return set()
        return {None} if type(now) is int else set()
    return size_mismatch_dims(guard, frame_locals, frame_globals)


def _fails(guard, frame_locals, frame_globals):
    from .guards import describe_failure

    return describe_failure(guard, frame_locals, frame_globals) is not None


def _compile_graph(settings, captured):
    """The callable that runs ``captured.gm``: the backend's, or the graph itself when it has no ops."""
    gm = captured.gm
    if not captured.ops_in_graph:
        return gm.forward  # nothing to compile: the graph only passes values through
    if settings.backend_name in ("aot_eager", "inductor") and _enables_grad_inside(gm):
        # called under no_grad, the graph turns grad on (``with enable_grad():``): aot autograd decides
        # inference-or-training from the caller's mode and would drop the region's autograd history
        return gm.forward
    from .backends import BackendCompilerFailed

    options = _inductor_options(settings)

    def compile(example_inputs):
        try:
            if options:
                from ember._inductor import config as inductor_config

                with inductor_config.patch(**options):
                    return settings.backend(gm, example_inputs)
            return settings.backend(gm, example_inputs)
        except Exception as exc:
            raise BackendCompilerFailed(settings.backend_name, exc) from exc

    if getattr(captured, "symbols", ()) and settings.backend_name in ("aot_eager", "inductor"):
        # symbolic sizes, but these backends specialise to their example inputs: one compile per
        # signature of input shapes inside this entry (issue 27: kernels that take sizes as arguments)
        from .symbolic import PerShapeCompiled

        return PerShapeCompiled(compile, captured.example_inputs)
    return compile(list(captured.example_inputs))


def _inductor_options(settings):
    """The ember-inductor settings a compile runs under: the mode's CUDA-graph settings
    (``mode="reduce-overhead"``: ``cudagraphs``), then ``options``; None for other backends."""
    if settings.backend_name != "inductor":
        return None
    options = dict(settings.options or {})
    if settings.mode is not None:
        from ember._inductor import config as inductor_config

        options = {**inductor_config.mode_options(settings.mode), **options}
    return options or None


def _enables_grad_inside(gm):
    """Whether a graph captured with grad mode off switches it on somewhere."""
    import ember

    from .graph import _set_grad_enabled

    if ember.is_grad_enabled():
        return False
    return any(n.op == "call_function" and n.target is _set_grad_enabled and n.args[0] for n in gm.graph.nodes)


def _break_function(compiled_fn, captured):
    """The function that runs the rest of the frame after a graph break."""
    from .eval_frame import CompiledFunction
    from .resume import make_break_function, make_resume_function

    brk = captured.graph_break
    plan = brk.plan
    func = compiled_fn._func
    # the rest of the frame is compiled with the same settings: tracing resumes there
    resume = [make_resume_function(plan.code, s, func.__globals__, func.__closure__) for s in plan.successors]
    compiled = [CompiledFunction(r, compiled_fn._settings) for r in resume]
    return make_break_function(plan, compiled, func.__globals__, func.__closure__)


def _fullgraph_error(brk):
    from .exc import Unsupported

    return Unsupported(f"graph break with fullgraph=True: {brk.reason}", brk.filename, brk.lineno, brk.source_line)


def _run_eagerly_from_now_on(compiled_fn, cache, settings, reason, why):
    """Mark the code "run eagerly" (until reset) and tell the observers; returns ``None`` (no entry)."""
    cache.eager_reason = why
    log.info("running %s eagerly: %s", _where(cache.code), why)
    _notify(CaptureRecord(cache.code, compiled_fn._func, settings, reason=reason, eager_reason=why))
    return None


def handle_miss(compiled_fn, frame_locals, args, kwargs):
    """No cache entry matched: capture and compile (or run eagerly), then run.

    Args:
        compiled_fn (CompiledFunction): the wrapper that was called.
        frame_locals (dict): the bound arguments (``L``).
        args, kwargs: the call's arguments, for running eagerly.

    Returns:
        The function's return value.
    """
    settings = compiled_fn._settings
    cache = compiled_fn._cache
    frame_globals = compiled_fn._globals
    with _COMPILE_LOCK:
        # another thread may have compiled a matching entry meanwhile
        entry = cache.lookup(settings, frame_locals, frame_globals)
        if entry is None:
            with gc_paused():
                entry = _capture(compiled_fn, cache, settings, frame_locals, frame_globals)
    if entry is None:
        return compiled_fn._orig_fn(*args, **kwargs)
    return entry.run(frame_locals, frame_globals)


def _capture(compiled_fn, cache, settings, frame_locals, frame_globals):
    """A new cache entry for this frame, or ``None`` when the frame must run eagerly."""
    code = cache.code
    if cache.eager_reason is not None:
        return None
    reason = _recompile_reason(cache, settings, frame_locals, frame_globals) if cache.entries else None
    if len(cache.entries) >= config.cache_size_limit:
        if not cache.limit_warned:
            cache.limit_warned = True
            warnings.warn(
                f"ember._dynamo hit config.cache_size_limit ({config.cache_size_limit}) for {_where(code)}; "
                f"last reason: {reason}. Calls that miss the cache run eagerly from now on "
                "(raise ember._dynamo.config.cache_size_limit, or mark the changing dims dynamic).",
                stacklevel=4,
            )
        return None
    if reason is not None:
        cache.recompile_reasons.append(reason)
        log.info("recompiling %s: %s", _where(code), reason)
    capture_config = config.CaptureConfig(
        fullgraph=settings.fullgraph,
        dynamic=settings.dynamic,
        dynamic_dims=_dynamic_dims(cache, settings, frame_locals),
    )
    start = time.perf_counter()
    try:
        captured = _translate(compiled_fn._func, frame_locals, capture_config)
    except _exc_types() as exc:
        if settings.fullgraph:
            raise
        return _run_eagerly_from_now_on(compiled_fn, cache, settings, reason, str(exc))
    except Exception as exc:
        if not config.suppress_errors:
            raise
        warnings.warn(f"ember._dynamo: capturing {_where(code)} failed, running it eagerly: {exc!r}", stacklevel=4)
        return _run_eagerly_from_now_on(compiled_fn, cache, settings, reason, f"internal error: {exc!r}")
    if captured.graph_break is not None and settings.fullgraph:
        raise _fullgraph_error(captured.graph_break)
    guards = list(captured.guards)
    if not any(g.kind is GuardKind.AUTOCAST for g in guards):
        # the autocast state decides the dtypes a compiled graph computes in (aot and inductor trace
        # under it): a graph is reused only under the state it was captured in
        guards.append(Guard(None, GuardKind.AUTOCAST, autocast_state()))
    # factories in the graph, dtypes read and branches on them follow the default dtype at capture
    guards.append(Guard(None, GuardKind.DEFAULT_DTYPE, default_dtype()))
    check = GuardCheck(guards, frame_locals, frame_globals)
    if config.verify_guards_on_capture and not check(frame_locals, frame_globals):
        raise RuntimeError(
            f"ember._dynamo internal error: the guards of a fresh capture of {_where(code)} fail on the frame "
            f"it was captured from: {check.explain_failure(frame_locals, frame_globals)}"
        )
    compiled = _compile_graph(settings, captured)
    # the entry outlives this call: it must not keep the first call's tensors (a batch, activations) alive
    captured.example_inputs = []
    break_fn = _break_function(compiled_fn, captured) if captured.graph_break is not None else None
    entry = CacheEntry(check, settings, captured, compiled, break_fn, frame=(frame_locals, frame_globals))
    cache.entries.insert(0, entry)
    seconds = time.perf_counter() - start
    _notify(CaptureRecord(code, compiled_fn._func, settings, captured, entry, reason=reason, seconds=seconds))
    return entry
