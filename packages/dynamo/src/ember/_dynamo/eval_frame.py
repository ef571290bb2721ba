"""The user-facing wrappers: compiled functions, disabled functions, ``OptimizedModule``.

:class:`CompiledFunction` is what ``ember.compile(fn)`` returns for a function: calling it binds
the arguments, runs the guards of the cache entries of ``fn.__code__`` and runs the matching
entry, or captures a new one (:func:`~ember._dynamo.frames.handle_miss`).
:class:`OptimizedModule` wraps an ``nn.Module``; :class:`DisabledFunction` is what
:func:`disable` returns.
"""

from __future__ import annotations

import functools
import threading
import types

from ember.nn import Module
from ember.nn.modules.module import _ForwardCall

from . import frames
from .cache import cache_for

__all__ = ["CompiledFunction", "DisabledFunction", "OptimizedModule", "disable", "is_disabled", "module_call_function"]


class _State(threading.local):
    # > 0 while a function disabled with recursive=True runs on this thread: compiled functions it
    # calls run eagerly, as PyTorch's do under torch.compiler.disable.
    disabled_depth = 0


_state = _State()


def _plain_function(fn):
    """``(function, bound self or _UNBOUND)`` for a function or a bound method of a Python function."""
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return fn.__func__, fn.__self__
    if isinstance(fn, types.FunctionType):
        return fn, _UNBOUND
    raise TypeError(
        f"ember.compile expects a Python function, a method or an nn.Module, got {type(fn).__name__}: "
        "built-in and C functions have no bytecode to capture"
    )


_UNBOUND = object()


class CompiledFunction:
    """A function compiled with ``ember.compile``: same signature, runs captured graphs.

    Attributes:
        _orig_fn (callable): what was compiled (the translator inlines this when a compiled
            function is called from inside another compiled function).
    """

    def __init__(self, fn, settings):
        func, bound_self = _plain_function(fn)
        self._orig_fn = fn
        self._func = func
        self._settings = settings
        self._globals = func.__globals__
        self._cache = cache_for(func.__code__)
        binder = frames.make_binder(func)
        self._binder = binder
        self._refresh_defaults()  # and after a later ``fn.__defaults__ = ...``, at the next call
        self._bind = binder if bound_self is _UNBOUND else functools.partial(binder, bound_self)
        functools.update_wrapper(self, fn)

    def _refresh_defaults(self):
        """``fn.__defaults__``/``__kwdefaults__`` were replaced: bind the new ones (the binder has ``fn``'s
        parameters, so its default tuples line up with ``fn``'s)."""
        func = self._func
        self._binder.__defaults__ = func.__defaults__
        self._binder.__kwdefaults__ = func.__kwdefaults__  # shared: an in-place edit shows too
        self._defaults = func.__defaults__
        self._kwdefaults = func.__kwdefaults__

    def __call__(self, *args, **kwargs):
        if _state.disabled_depth:
            return self._orig_fn(*args, **kwargs)
        func = self._func
        if func.__defaults__ is not self._defaults or func.__kwdefaults__ is not self._kwdefaults:
            self._refresh_defaults()
        frame_locals = self._bind(*args, **kwargs)
        entries = self._cache.entries
        if entries:  # the most recently used entry first, inline: the common case of one matching entry
            entry = entries[0]
            if entry.settings is self._settings and entry.check_fn(frame_locals, self._globals):
                return entry.run(frame_locals, self._globals)
            entry = self._cache.lookup(self._settings, frame_locals, self._globals)
            if entry is not None:
                return entry.run(frame_locals, self._globals)
        return frames.handle_miss(self, frame_locals, args, kwargs)

    def __get__(self, obj, objtype=None):
        # @ember.compile on a method in a class body: instance.method binds like a function
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __deepcopy__(self, memo):
        # a copy compiles the copied target (a module's copy gets a __call__ bound to the copied
        # module) with the same settings; the cache belongs to the code object, not to the copy
        import copy

        return CompiledFunction(copy.deepcopy(self._orig_fn, memo), self._settings)

    def __repr__(self):
        return f"<compiled {getattr(self._orig_fn, '__qualname__', self._orig_fn)!r} ({self._settings!r})>"


class DisabledFunction:
    """A function that ember.compile never traces (see :func:`disable`).

    Attributes:
        _orig_fn (callable): the function.
        recursive (bool): whether compiled functions it calls run eagerly too.
    """

    def __init__(self, fn, recursive=True, reason=None):
        self._orig_fn = fn
        self.recursive = recursive
        self.reason = reason
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if not self.recursive:
            return self._orig_fn(*args, **kwargs)
        _state.disabled_depth += 1
        try:
            return self._orig_fn(*args, **kwargs)
        finally:
            _state.disabled_depth -= 1

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return f"<disabled {getattr(self._orig_fn, '__qualname__', self._orig_fn)!r}>"


def disable(fn=None, recursive=True, *, reason=None):
    """Exclude ``fn`` from compilation: calling it inside a compiled function is a graph break,
    and it always runs natively.

    Usable as ``@disable``, ``@disable(recursive=False)`` or ``disable(fn)``.

    Args:
        fn (callable or None): the function (or ``nn.Module``: its ``forward`` is disabled).
        recursive (bool): also run eagerly the compiled functions that ``fn`` calls. Default: ``True``.
        reason (str or None): why, shown in graph-break messages.

    Returns:
        DisabledFunction: the wrapper (``fn`` itself, with ``forward`` replaced, for a module).

    Example::

        >>> import ember
        >>> @ember.compiler.disable
        ... def log_stats(t):
        ...     print(float(t.mean()))
    """
    if fn is None:
        return lambda f: disable(f, recursive=recursive, reason=reason)
    if isinstance(fn, (DisabledFunction,)):
        return fn
    if isinstance(fn, Module):
        fn.forward = DisabledFunction(fn.forward, recursive=recursive, reason=reason)
        return fn
    if not callable(fn):
        raise TypeError(f"disable: fn must be callable, got {type(fn).__name__}")
    return DisabledFunction(fn, recursive=recursive, reason=reason)


def is_disabled(obj) -> bool:
    """Whether ``obj`` was excluded from compilation with :func:`disable` (the translator breaks on calls to it)."""
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    return isinstance(obj, DisabledFunction)


# ----------------------------------------------------------------------------- modules


def _module_call(self, *args, **kwargs):
    # What nn.Module._call_impl does, minus its check of _compiled_call_impl (that would call the
    # compiled function again): forward, with the module's hooks when it has any.
    if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks:
        return self._call_with_hooks(self.forward, _ForwardCall(args, kwargs))
    return self.forward(*args, **kwargs)


def module_call_function(module):
    """A bound ``module.__call__``-equivalent with its OWN code object (so each compiled module has
    its own cache and cache-size limit, rather than sharing one across every module class)."""
    code = _module_call.__code__.replace()
    fn = types.FunctionType(code, _module_call.__globals__, "__call__")
    fn.__qualname__ = f"{type(module).__qualname__}.__call__"
    return types.MethodType(fn, module)


class OptimizedModule(Module):
    """An ``nn.Module`` compiled with ``ember.compile``: calls run the compiled ``_orig_mod.__call__``.

    The wrapped module is the submodule ``_orig_mod`` (state-dict keys get the prefix
    ``_orig_mod.``, as in PyTorch); other attributes are read from it.

    Args:
        mod (nn.Module): the module to compile.
        settings (CompileSettings): backend and options.
    """

    def __init__(self, mod, settings):
        super().__init__()
        self._orig_mod = mod
        # object.__setattr__: a plain attribute, not a submodule or parameter
        object.__setattr__(self, "_compiled_call", CompiledFunction(module_call_function(mod), settings))

    def forward(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            orig = self.__dict__.get("_modules", {}).get("_orig_mod")
            if orig is None:  # during copy/unpickling, before __init__'s state exists
                raise
            return getattr(orig, name)
