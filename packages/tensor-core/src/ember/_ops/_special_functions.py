"""scipy.special's functions for the pointwise ops, imported on first call, with their CuPy counterparts.

scipy.special takes 0.1 s to import, so :func:`special` returns a function that imports it
the first time it runs; on GPU arrays (the CUDA backend) it calls ``cupyx.scipy.special``
instead, with scipy's values where the two differ.
"""

from __future__ import annotations

import importlib
import math

import numpy as np

from ._array_module import array_namespace as _array_namespace

__all__ = ["special"]


def special(name):
    """scipy.special's function ``name``, imported on first call (scipy.special takes 0.1 s to import).

    On GPU arrays (the CUDA backend) the call goes to :func:`_device_special` instead: scipy.special
    computes on the host only.
    """
    fn = None

    def call(*args):
        nonlocal fn
        if type(args[-1]) is not np.ndarray and _array_namespace(*args) is not np:
            return _device_special(name, *args)
        if fn is None:
            fn = getattr(importlib.import_module("scipy.special"), name)
        return fn(*args)

    call.__name__ = name
    return call


def _device_special(name, *args):
    """scipy.special's ``name`` on GPU arrays, from ``cupyx.scipy.special``, with numpy's (scipy's) values.

    Where CuPy's function differs from scipy's (``i0``, ``i1``, ``j0``, ``j1`` at +-inf, ``xlog1py`` at a NaN
    ``y``; ``j0``, ``j1``, ``i1`` compute float32 in float64 as scipy does) or takes other arguments
    (``polygamma``'s order must be an array there), the difference is made up here.
    """
    special = importlib.import_module("cupyx.scipy.special")
    if name == "polygamma":
        n, x = args
        if n == 0:
            return _device_special("psi", x)
        # psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 (Hurwitz zeta), scipy's own formula
        try:
            factorial = float(math.factorial(n))
        except OverflowError:  # above 170!, as scipy's gamma(n + 1)
            factorial = math.inf
        return (-1.0) ** (n + 1) * factorial * special.zeta(float(n + 1), x)
    if name in _IN_DOUBLE and args[0].dtype == np.float32:
        args = (args[0].astype(np.float64),)
    value = getattr(special, name)(*args)
    if name in _NAN_AT_INF:
        value = np.where(np.isinf(args[0]), np.nan, value)
    if name == "xlog1py":  # CuPy's kernel tests ``~isnan(y)`` (a bitwise not: always true), so 0 * log1p(NaN) is 0
        value = _nan_where_nan(value, args[1])
    if name == "psi":  # scipy's poles: psi(+-0) = -+inf, NaN at the negative integers and -inf
        x = args[0]
        value = np.where(x == 0, np.copysign(np.inf, -x), value)
        value = np.where((x < 0) & (np.floor(x) == x), np.nan, value)
    return value  # of the input's dtype or wider: the callers cast to the result dtype


#: Functions whose CuPy float32 kernel computes in float32 (CUDA's ``j0f``, ``j1f``, ``cyl_bessel_i1f``), a few
#: ulp from scipy's, which computes float32 inputs in double: they compute in float64 here.
_IN_DOUBLE = frozenset({"j0", "j1", "i1"})
#: Functions that are NaN at +-inf in scipy (its expansions give inf/inf or an undefined phase) where CUDA's
#: are finite or infinite: ``j0``/``j1`` give 0, ``i0``/``i1`` give +-inf.
_NAN_AT_INF = frozenset({"j0", "j1", "i0", "i1"})


def _nan_where_nan(value, y):
    """``value`` with NaN where ``y`` (a GPU array or a number) is NaN."""
    cupy = importlib.import_module("cupy")
    return cupy.where(cupy.isnan(cupy.asarray(y)), math.nan, value)
