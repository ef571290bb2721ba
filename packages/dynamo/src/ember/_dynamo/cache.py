"""The compiled-code cache: per code object, a list of entries, each valid under its guards.

An entry is one capture of the code: its guard check (one generated function, see
:class:`~ember._dynamo.guards.GuardCheck`), the backend's compiled graph, how to read the graph's
inputs from the frame, the side effects to replay, how to build the result, and - when the capture
ended at a graph break - the break function that runs the unsupported instruction and resumes.

The cache is keyed by the code object's identity (two equal code objects, e.g. one copied per
compiled module, keep separate caches). A code object's cache lives as long as a compiled function
of it does (the registry holds caches weakly), so compiling many short-lived modules leaks nothing.
"""

from __future__ import annotations

import threading
import weakref

from .guards import autocast_state

__all__ = ["CacheEntry", "CodeCache", "cache_for", "all_caches", "reset"]


def _inputs_reader(sources, frame=None):
    """One generated function ``read(L, G) -> tuple`` that reads every graph input in order.

    Pasting the sources' path expressions into one function is several times faster than
    calling each source's ``read`` method. With the capture's ``frame`` (``(L, G)``), the paths are
    written as the guards' are (:class:`~ember._dynamo.guards._CodeWriter`): a parameter or buffer of
    a submodule is read from its module's store dict, each module on the way read once, instead of
    through ``Module.__getattr__`` at every step (a Python call each: 30-40 per call of a small MLP).
    """
    if not sources:
        return lambda L, G: ()
    try:
        from .guards import _CodeWriter

        w = _CodeWriter(frame)
        names = [w.value(s) for s in sources]
        params = "".join(f", {name}={name}" for name in w.constants)
        body = "".join(f"    {line}\n" for line in w.lines)
        text = f"def ___read(L, G{params}):\n{body}    return ({''.join(f'{n}, ' for n in names)})\n"
        namespace = dict(w.constants)
        exec(compile(text, "<ember._dynamo graph inputs>", "exec"), namespace)  # noqa: S102 - our own text
        return namespace["___read"]
    except SyntaxError:  # a source kind whose name() is not an expression: read them one by one
        return lambda L, G: tuple(s.read(L, G) for s in sources)


class CacheEntry:
    """One capture of a code object, ready to run.

    Attributes:
        check (GuardCheck): the guards, compiled.
        settings: the compile settings (backend, fullgraph, ...) it was made under.
        captured: the translator's :class:`CapturedFrame`.
        compiled (callable): the backend's callable for ``captured.gm``.
        break_fn (callable or None): at a graph break, runs the rest of the frame.
    """

    __slots__ = (
        "check",
        "check_fn",
        "settings",
        "captured",
        "compiled",
        "break_fn",
        "read_inputs",
        "side_effects",
        "result",
        "callee_index",
        "compiled_callees",
        "autocast_devices",
    )

    def __init__(self, check, settings, captured, compiled, break_fn, frame=None):
        """``frame``: ``(L, G)`` of the capture, to write the input reader's paths (not kept)."""
        self.check = check
        self.check_fn = check._fn  # the generated function itself: one Python call less per lookup
        self.settings = settings
        self.captured = captured
        self.compiled = compiled
        self.break_fn = break_fn
        self.read_inputs = _inputs_reader(captured.graph_inputs, frame)
        self.side_effects = tuple(captured.side_effects)
        self.result = captured.result
        brk = captured.graph_break
        # a break whose reason lies inside a function or module the capture inlined: that callee is
        # called compiled, so tracing goes on inside it (what PEP 523 frame interception would do)
        self.callee_index = getattr(brk, "callee_stack_index", None) if brk is not None else None
        self.compiled_callees = {}  # key of the callee -> (callee, its CompiledFunction)
        # captured inside autocast regions (guarded): the graph holds their casts as nodes, so it runs
        # with the regions suspended (a region's mode would otherwise act on ops traced after its exit)
        self.autocast_devices = tuple(device for device, _ in autocast_state())

    def run(self, frame_locals, frame_globals):
        """Run the entry on a frame whose guards hold: graph, side effects, result (or the rest after a break)."""
        if self.autocast_devices:
            with _autocast_suspended(self.autocast_devices):
                outs = self.compiled(*self.read_inputs(frame_locals, frame_globals))
        else:
            outs = self.compiled(*self.read_inputs(frame_locals, frame_globals))
        if type(outs) is not tuple:
            outs = tuple(outs) if isinstance(outs, list) else (outs,)
        for effect in self.side_effects:
            effect.apply(outs, frame_locals, frame_globals)
        value = self.result.build(outs, frame_locals, frame_globals)
        if self.break_fn is None:
            return value
        stack_values, live_local_values = value
        if self.callee_index is not None:
            stack_values = list(stack_values)
            stack_values[self.callee_index] = self._compiled_callee(stack_values[self.callee_index])
        return self.break_fn(*stack_values, *live_local_values)

    def _compiled_callee(self, callee):
        """``callee`` (a function, bound method or nn.Module) compiled with this entry's settings, made once."""
        import types

        from ember.nn import Module

        from .eval_frame import CompiledFunction, module_call_function

        if isinstance(callee, CompiledFunction):
            return callee
        if isinstance(callee, types.MethodType):
            key = (id(callee.__func__), id(callee.__self__))
        else:
            key = (id(callee), None)
        known = self.compiled_callees.get(key)
        if known is not None and (known[0] is callee or known[0] == callee):
            return known[1]
        # a module (or its bound __call__) is compiled as ember.compile(module) compiles it: forward,
        # with its hooks (nn.Module._call_impl itself would look for a compiled call)
        if isinstance(callee, types.MethodType) and isinstance(callee.__self__, Module) and \
                callee.__func__ is getattr(type(callee.__self__), "__call__", None):  # noqa: B004
            callee_module = callee.__self__
        else:
            callee_module = callee if isinstance(callee, Module) else None
        target = module_call_function(callee_module) if callee_module is not None else callee
        try:
            compiled = CompiledFunction(target, self.settings)
        except TypeError:  # not a Python function (a partial, a C function): it runs as it is
            return callee
        if len(self.compiled_callees) >= 64:  # callees of many objects (bound methods of new instances)
            self.compiled_callees.clear()
        self.compiled_callees[key] = (callee, compiled)
        return compiled


def _autocast_suspended(devices):
    """A context that disables autocast on ``devices`` (device types) and restores it after."""
    import contextlib

    import ember

    stack = contextlib.ExitStack()
    for device in devices:
        stack.enter_context(ember.autocast(device, enabled=False))
    return stack


class CodeCache:
    """The entries of one code object (most recently hit first) and its compile state.

    Attributes:
        code (CodeType): the code object.
        entries (list[CacheEntry]): valid captures.
        eager_reason (str or None): why this code always runs eagerly (a capture it cannot do).
        dynamic_dims (dict[str, set[int]]): dims seen changing size, made dynamic on the next capture.
        recompile_reasons (list[str]): why each capture after the first was made.
        limit_warned (bool): the cache-size-limit warning was given.
    """

    __slots__ = ("code", "entries", "eager_reason", "dynamic_dims", "recompile_reasons", "limit_warned", "__weakref__")

    def __init__(self, code):
        self.code = code
        self.clear()

    def clear(self):
        self.entries: list[CacheEntry] = []
        self.eager_reason: str | None = None
        self.dynamic_dims: dict[str, set[int]] = {}
        self.recompile_reasons: list[str] = []
        self.limit_warned = False

    def lookup(self, settings, frame_locals, frame_globals):
        """The first entry made under ``settings`` whose guards hold (moved to the front), or ``None``."""
        entries = self.entries
        for i, entry in enumerate(entries):
            if entry.settings is settings and entry.check_fn(frame_locals, frame_globals):
                if i:  # most recently used first: a loop alternating two shapes tests one guard set per call
                    entries.insert(0, entries.pop(i))
                return entry
        return None

    def drop(self, settings):
        """Remove the entries made under ``settings`` (``explain`` cleans up after itself)."""
        self.entries = [e for e in self.entries if e.settings is not settings]


# id(code) -> its cache. Weak values: the compiled functions hold their cache, the cache holds its code
# (so the id cannot be reused while the entry exists).
_CACHES: weakref.WeakValueDictionary[int, CodeCache] = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


def cache_for(code) -> CodeCache:
    """The cache of ``code`` (created empty on first use)."""
    cache = _CACHES.get(id(code))
    if cache is None:
        with _LOCK:
            cache = _CACHES.get(id(code))
            if cache is None:
                cache = _CACHES[id(code)] = CodeCache(code)
    return cache


def all_caches() -> list[CodeCache]:
    """Every code object's cache (for ``explain`` and tests)."""
    return list(_CACHES.values())


def reset() -> None:
    """Forget every capture: all entries, eager marks and automatic-dynamic state."""
    for cache in list(_CACHES.values()):
        cache.clear()
