"""Dispatch modes: intercept every op call below the Python API.

A :class:`DispatchMode` (PyTorch's ``TorchDispatchMode``) sees each op call
with its arguments normalised to the op's signature, after
``__ember_function__`` overrides and before autograd and the kernels. Inside
its handler the mode is popped off the stack, so calling ``func`` runs the op
one layer further down. FakeTensor-style propagation, ``make_fx`` tracing and
functionalization are built on this.

Example:
    >>> import ember
    >>> from ember.utils._python_dispatch import DispatchMode
    >>> class Log(DispatchMode):
    ...     def __init__(self):
    ...         self.calls = []
    ...     def __ember_dispatch__(self, func, types, args=(), kwargs=None):
    ...         self.calls.append(func.name)
    ...         return func(*args, **(kwargs or {}))
    >>> with Log() as log:
    ...     _ = ember.ones(2) + 1
    >>> log.calls
    ['ones', 'add']
"""

from __future__ import annotations

from .._ops._dispatch import state

__all__ = ["DispatchMode", "TorchDispatchMode", "active_modes", "_get_current_dispatch_mode"]


class DispatchMode:
    """Base class of dispatch modes; override :meth:`__ember_dispatch__`.

    Use as a context manager: modes nest, the innermost sees a call first.
    """

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        """Handle one op call.

        Args:
            func (ember._ops.Op): the op.
            types (tuple[type]): the types of the tensor arguments.
            args (tuple): positional arguments, normalised.
            kwargs (dict): keyword-only arguments, normalised.

        Returns:
            Whatever the op call should return.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement __ember_dispatch__")

    def __enter__(self):
        state.modes.append(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        modes = state.modes
        if not modes or modes[-1] is not self:
            raise RuntimeError(f"dispatch mode {type(self).__name__} exited out of order")
        modes.pop()
        return False

    @classmethod
    def push(cls, *args, **kwargs):
        """Create the mode and enter it (``with Mode.push(...)``)."""
        return cls(*args, **kwargs)


# PyTorch's name, for users porting modes.
TorchDispatchMode = DispatchMode


def active_modes():
    """The active modes, outermost first."""
    return tuple(state.modes)


def _get_current_dispatch_mode():
    """The innermost active mode, or None."""
    return state.modes[-1] if state.modes else None
