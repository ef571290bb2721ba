"""Computing without floating-point warnings, cheaply.

PyTorch computes ``1/0``, ``0/0`` and overflows silently (inf and NaN); numpy
warns unless told otherwise with ``np.errstate``. Entering ``np.errstate``
costs about as much as a small ufunc call, which matters on the per-op hot
path, so :func:`quiet` sets numpy's error state through the context variable
that ``np.errstate`` itself uses (numpy >= 2), and falls back to
``np.errstate`` where that variable is not there.

Even that costs about a small ufunc call per op, so a caller that runs many
ember ops and no user code (the backward engine running derivative formulas)
can set the state once with :func:`enter_quiet`: kernels see the state is
already :data:`IGNORE_ALL` and set nothing. Code of the user's that runs
inside such a region (hooks, custom ``Function`` backwards, saved-tensor
unpack hooks, ``__ember_function__`` overrides) goes through :func:`as_user`,
which puts back the state the user had, so the user's numpy code keeps its
own settings.
"""

from __future__ import annotations

import contextvars

import numpy as np

__all__ = [
    "quiet", "enter_quiet", "exit_quiet", "as_user", "IGNORE_ALL", "get_error_state", "set_error_state",
    "reset_error_state",
]

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _error_state
except ImportError:  # another numpy layout: the public, slower way
    _error_state = None

# the numpy error state of the code that called enter_quiet (None outside a quiet region)
_user_state = contextvars.ContextVar("ember_user_error_state", default=None)

if _error_state is not None:
    with np.errstate(all="ignore"):
        # numpy's error-state object with every error ignored. Only ember sets this very object: a
        # user's own np.errstate(all="ignore") makes another one, so `state is IGNORE_ALL` means
        # "ember set it" (as_user relies on that).
        IGNORE_ALL = _IGNORE_ALL = _error_state.get()
    get_error_state, set_error_state, reset_error_state = _error_state.get, _error_state.set, _error_state.reset

    def quiet(fn, *args):
        """``fn(*args)`` with every numpy floating-point error ignored (per thread, as np.errstate)."""
        if get_error_state() is _IGNORE_ALL:  # already quiet (inside a kernel or the backward engine)
            return fn(*args)
        token = _error_state.set(_IGNORE_ALL)
        try:
            return fn(*args)
        finally:
            _error_state.reset(token)

    def enter_quiet():
        """Ignore every numpy floating-point error until :func:`exit_quiet`; returns its token.

        Only for code that runs ember's own kernels: call anything of the user's through :func:`as_user`.
        """
        current = _error_state.get()
        if current is _IGNORE_ALL:
            return None
        return _user_state.set(current), _error_state.set(_IGNORE_ALL)

    def exit_quiet(tokens):
        """Undo :func:`enter_quiet` (``tokens`` is what it returned)."""
        if tokens is not None:
            user, state = tokens
            _error_state.reset(state)
            _user_state.reset(user)

    def as_user(fn, *args):
        """``fn(*args)`` under the numpy error state that the caller of :func:`enter_quiet` had."""
        user = _user_state.get()
        if user is None or _error_state.get() is not _IGNORE_ALL:
            return fn(*args)
        token = _error_state.set(user)
        try:
            return fn(*args)
        finally:
            _error_state.reset(token)

else:
    IGNORE_ALL = object()  # never the state: callers that compare with it always quiet themselves

    def get_error_state():
        return None

    def set_error_state(value):
        """Enter np.errstate(all="ignore") (``value`` is IGNORE_ALL); returns the context manager to exit."""
        context = np.errstate(all="ignore")
        context.__enter__()
        return context

    def reset_error_state(context):
        context.__exit__(None, None, None)

    def quiet(fn, *args):
        """``fn(*args)`` with every numpy floating-point error ignored."""
        with np.errstate(all="ignore"):
            return fn(*args)

    def enter_quiet():
        """Nothing to do without numpy's context variable: every kernel quiets itself."""
        return None

    def exit_quiet(tokens):
        """Undo :func:`enter_quiet`."""

    def as_user(fn, *args):
        """``fn(*args)``."""
        return fn(*args)
