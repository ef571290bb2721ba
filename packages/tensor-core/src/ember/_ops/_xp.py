"""The array namespace (``xp``) of a kernel's arrays: numpy on CPU, CuPy on CUDA.

Kernels are written once against numpy's namespace (docs/internals.rst, "The CUDA
backend"). numpy forwards its ufuncs and most functions to CuPy for CuPy arrays, but
not ``np.asarray``/``np.array``/``np.ascontiguousarray``, which try to pull the data to
the host (CuPy refuses). Kernels call :func:`as_array` instead where they turn a
numpy scalar result into a 0-d array, and :func:`array_namespace` where they must create
arrays. Both cost one type check for numpy arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["as_array", "array_namespace", "is_device_array"]

_ndarray = np.ndarray
_generic = np.generic


def is_device_array(value):
    """Whether ``value`` is a GPU array (anything exposing ``__cuda_array_interface__``: CuPy's)."""
    return hasattr(value, "__cuda_array_interface__")


def array_namespace(*values):
    """``cupy`` if any of ``values`` is a GPU array, else ``numpy``."""
    for value in values:
        if type(value) is not _ndarray and is_device_array(value):
            import cupy

            return cupy
    return np


def as_array(value, order=None):
    """``value`` as an array of its own namespace (numpy's ``np.asarray(value, order=order)`` on CPU).

    numpy scalars and Python numbers become numpy 0-d arrays; numpy arrays pass through (copied only
    for ``order``); GPU arrays stay on the GPU.
    """
    if type(value) is _ndarray:
        return value if order is None else np.asarray(value, order=order)
    if isinstance(value, _generic):  # numpy's scalar results (tested first: the common case on CPU)
        return np.asarray(value)
    if is_device_array(value):
        if order == "C" and not value.flags.c_contiguous:
            import cupy

            return cupy.ascontiguousarray(value)
        return value
    return np.asarray(value, order=order)
