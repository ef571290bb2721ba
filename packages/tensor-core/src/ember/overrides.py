"""``__ember_function__``: objects that intercept ember's public functions.

PyTorch's ``__torch_function__`` protocol, under our name. A class that
defines the classmethod::

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None): ...

is handed every call of a registered op (``ember.add``, ``Tensor.view``,
operators, ...) in which one of its instances appears among the arguments
(directly or inside a list/tuple). ``func`` is the :class:`ember._ops.Op`;
``types`` are the overriding types. Returning ``NotImplemented`` passes the
call on to the next overriding type. FX proxies and Tensor subclasses use it.
"""

from __future__ import annotations

import contextlib

from ._ops._dispatch import _disabled_ember_function, state
from ._tensor import Tensor

__all__ = ["handle_ember_function", "has_ember_function", "disable_ember_function", "is_tensor_like"]


def has_ember_function(args):
    """Whether any of ``args`` overrides ember functions (and overrides are enabled)."""
    if state.overrides_disabled:
        return False
    for a in args:
        t = type(a)
        if t is Tensor:
            continue
        f = getattr(t, "__ember_function__", None)
        if f is not None and getattr(f, "__func__", None) is not _disabled_ember_function:
            return True
    return False


def is_tensor_like(obj):
    """True for tensors and for objects that override ember functions."""
    return isinstance(obj, Tensor) or hasattr(type(obj), "__ember_function__")


def handle_ember_function(func, overloaded, args, kwargs):
    """Call the ``__ember_function__`` of each overriding type until one handles the call.

    Subclasses are tried before their parents, otherwise in argument order.

    Raises:
        TypeError: if every override returned ``NotImplemented``.
    """
    types = []
    for obj in overloaded:
        t = type(obj)
        if t not in types:
            types.append(t)
    ordered = []
    for t in types:  # subclasses first
        index = len(ordered)
        for i, placed in enumerate(ordered):
            if issubclass(t, placed):
                index = i
                break
        ordered.insert(index, t)
    types_tuple = tuple(ordered)
    for t in ordered:
        result = t.__ember_function__(func, types_tuple, args, kwargs or {})
        if result is not NotImplemented:
            return result
    raise TypeError(
        f"no implementation found for '{func.__name__}' on types that implement __ember_function__: "
        f"{[t.__name__ for t in ordered]}"
    )


@contextlib.contextmanager
def disable_ember_function():
    """Within this block, ``__ember_function__`` overrides are not consulted."""
    previous = state.overrides_disabled
    state.overrides_disabled = True
    try:
        yield
    finally:
        state.overrides_disabled = previous


def _convert(value, cls):
    if cls is Tensor:
        return value
    if isinstance(value, Tensor) and not isinstance(value, cls):
        return value.as_subclass(cls)
    if isinstance(value, tuple):
        converted = [_convert(v, cls) for v in value]
        return type(value)(*converted) if hasattr(value, "_fields") else tuple(converted)
    if isinstance(value, list):
        return [_convert(v, cls) for v in value]
    return value


def _default_ember_function(cls, func, types, args, kwargs):
    """Tensor's own ``__ember_function__``: run ``func`` and keep the subclass on tensor results."""
    if not all(issubclass(cls, t) for t in types if issubclass(t, Tensor)):
        return NotImplemented
    with disable_ember_function():
        result = func(*args, **(kwargs or {}))
    return _convert(result, cls)
