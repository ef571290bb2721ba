"""Grad mode: whether ops record autograd graphs (thread-local).

The flag lives in core because the dispatcher reads it on every call;
ember-autograd builds the engine on top and re-exports these names.
"""

from __future__ import annotations

import functools
import inspect

from ._ops._dispatch import state

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
]


def _decorate(fn, make_context):
    """``fn`` run inside a fresh ``make_context()``; for a generator function, each step of it is."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args, **kwargs):
            gen = fn(*args, **kwargs)
            # the mode must hold while the body runs, i.e. during each next()/send(), not while the
            # caller holds the generator between steps
            try:
                with make_context():
                    request = gen.send(None)
                while True:
                    try:
                        response = yield request
                    except GeneratorExit:
                        with make_context():
                            gen.close()
                        raise
                    except BaseException as exc:  # noqa: BLE001 - thrown into the generator
                        with make_context():
                            request = gen.throw(exc)
                    else:
                        with make_context():
                            request = gen.send(response)
            except StopIteration as stop:
                return stop.value

        return generator

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with make_context():
            return fn(*args, **kwargs)

    return wrapper


class _GradModeContext:
    """Base of the grad-mode context managers; also usable as decorators, with or without parentheses."""

    def __new__(cls, *args, **kwargs):
        # ``@no_grad`` (no parentheses) calls the class with the function: decorate it directly
        if cls._bare_decorator and len(args) == 1 and not kwargs and callable(args[0]):
            return _decorate(args[0], cls)
        return super().__new__(cls)

    _bare_decorator = True

    def _enter_value(self):
        raise NotImplementedError

    def __enter__(self):
        self._previous = state.grad_enabled
        state.grad_enabled = self._enter_value()
        return self

    def __exit__(self, *exc):
        state.grad_enabled = self._previous
        return False

    def __call__(self, fn):
        return _decorate(fn, self.__class__)


class no_grad(_GradModeContext):
    """Context manager and decorator: ops inside record no autograd graph.

    Example:
        >>> import ember
        >>> with ember.no_grad():
        ...     ember.is_grad_enabled()
        False
    """

    def _enter_value(self):
        return False


class enable_grad(_GradModeContext):
    """Context manager and decorator: turn graph recording back on inside ``no_grad``."""

    def _enter_value(self):
        return True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to ``mode``: immediately, and restored on exit when used with ``with``.

    Args:
        mode (bool): whether to record autograd graphs.
    """

    _bare_decorator = False  # set_grad_enabled(mode) takes a bool, never a function

    def __init__(self, mode):
        self._mode = bool(mode)
        self._previous = state.grad_enabled
        state.grad_enabled = self._mode

    def _enter_value(self):
        return self._mode

    def __enter__(self):
        return self

    def __call__(self, fn):
        state.grad_enabled = self._previous
        mode = self._mode
        return _decorate(fn, lambda: set_grad_enabled(mode))


def is_grad_enabled():
    """Whether ops currently record autograd graphs (this thread)."""
    return state.grad_enabled


class inference_mode(_GradModeContext):
    """Like :class:`no_grad`, and marks the block as inference (``is_inference_mode_enabled``).

    Args:
        mode (bool): enable (default) or disable inference mode.
    """

    def __init__(self, mode=True):
        self._mode = bool(mode)

    def _enter_value(self):
        # as PyTorch: inference_mode(True) turns grad off, inference_mode(False) turns it on
        return not self._mode

    def __enter__(self):
        self._previous_inference = state.inference_mode
        state.inference_mode = self._mode
        return super().__enter__()

    def __exit__(self, *exc):
        state.inference_mode = self._previous_inference
        return super().__exit__(*exc)

    def __call__(self, fn):
        mode = self._mode
        return _decorate(fn, lambda: inference_mode(mode))


def is_inference_mode_enabled():
    """Whether an ``inference_mode`` block is active (this thread)."""
    return state.inference_mode
