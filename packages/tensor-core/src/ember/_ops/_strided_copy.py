"""The threaded strided copy of ``ember._C`` (csrc/copy.cpp) for large CPU arrays.

``contiguous``, ``clone``, ``to(dtype)`` and ``copy_`` (ember._ops.creation) and the reductions that
reorder their input (``_reduction_helpers._c_reduce``) call these helpers. Arrays below
:data:`COPY_MIN_ELEMENTS` elements, CuPy arrays and dtypes the kernel does not know (complex) get
``None`` / ``False`` back, and the caller keeps its numpy path: small copies are cheaper there.
"""

from __future__ import annotations

import numpy as np

from .. import _C

#: Elements from which the C++ copy is used (below, numpy's copy costs less than the call).
COPY_MIN_ELEMENTS = 1 << 15

# float16 conversions stay with numpy: the kernel is compiled for the x86-64 baseline, where the
# compiler converts float16 one element at a time in software (3-4x numpy's loops, which use F16C).
_FLOAT16 = np.dtype(np.float16)


def _large(data):
    return type(data) is np.ndarray and data.size >= COPY_MIN_ELEMENTS and data.dtype != _FLOAT16


def copy_array(data, np_dtype=None, strides=None):
    """A new array with ``data``'s values converted to ``np_dtype`` (default: its own dtype).

    Args:
        data (numpy.ndarray): any strides.
        np_dtype (numpy.dtype, optional): the result's dtype.
        strides (tuple of ints, optional): the result's strides in elements (dense); C order by default.

    Returns:
        numpy.ndarray or None: ``None`` when the C++ copy does not apply (small or CuPy arrays,
        unsupported dtypes, a layout it can't write); the caller then copies with numpy.
    """
    if not _large(data):
        return None
    np_dtype = data.dtype if np_dtype is None else np_dtype
    if np_dtype == _FLOAT16:
        return None
    if strides is None:
        out = np.empty(data.shape, np_dtype)
    else:
        itemsize = np_dtype.itemsize
        out = np.ndarray(data.shape, np_dtype, buffer=np.empty(data.size, np_dtype),
                         strides=tuple(s * itemsize for s in strides))
    return out if _C.copy_into(out, data) else None


def copy_into(dst, src):
    """Copy ``src`` (broadcast to ``dst``'s shape) into ``dst`` with the C++ kernel; True if it did.

    False (and nothing written) for small or CuPy arrays, unsupported dtypes or layouts, and when the
    two arrays may overlap (numpy's copyto buffers that case).
    """
    if not (_large(dst) and type(src) is np.ndarray and src.dtype != _FLOAT16) or np.may_share_memory(dst, src):
        return False
    if src.shape != dst.shape:
        src = np.broadcast_to(src, dst.shape)
    return bool(_C.copy_into(dst, src))
