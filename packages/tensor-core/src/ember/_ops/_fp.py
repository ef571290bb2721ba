"""Computing without floating-point warnings, cheaply.

PyTorch computes ``1/0``, ``0/0`` and overflows silently (inf and NaN); numpy
warns unless told otherwise with ``np.errstate``. Entering ``np.errstate``
costs about as much as a small ufunc call, which matters on the per-op hot
path, so :func:`quiet` sets numpy's error state through the context variable
that ``np.errstate`` itself uses (numpy >= 2), and falls back to
``np.errstate`` where that variable is not there.
"""

from __future__ import annotations

import numpy as np

__all__ = ["quiet"]

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _error_state
except ImportError:  # another numpy layout: the public, slower way
    _error_state = None

if _error_state is not None:
    with np.errstate(all="ignore"):
        _IGNORE_ALL = _error_state.get()

    def quiet(fn, *args):
        """``fn(*args)`` with every numpy floating-point error ignored (per thread, as np.errstate)."""
        token = _error_state.set(_IGNORE_ALL)
        try:
            return fn(*args)
        finally:
            _error_state.reset(token)

else:

    def quiet(fn, *args):
        """``fn(*args)`` with every numpy floating-point error ignored."""
        with np.errstate(all="ignore"):
            return fn(*args)
