"""Helpers shared by the reduction op modules (sums, extrema, scans, sorting, ...).

Conventions shared by those ops (PyTorch's):

* ``dim`` is an int, a tuple/list of ints or ``None``; negative dims count
  from the end; a zero-dim tensor accepts dims ``0`` and ``-1``. Repeated
  dims are an error. For the sum-like reductions ``None`` and ``()`` mean
  "every dim"; for ``all``/``any`` an empty tuple reduces nothing.
* Integer and bool inputs of ``sum``, ``prod``, ``cumsum`` and ``cumprod``
  give int64; float-only math (``mean``, ``var``, ``norm``...) refuses them
  unless a floating ``dtype`` is given, and ``logsumexp`` promotes them.
* Index outputs are int64. Among equal values ``argmax``/``max(dim)`` return
  the first index, ``cummax``/``cummin`` the last one reached, ``mode`` the
  last occurrence of the mode, ``kthvalue``/``median`` the one a stable sort
  puts there, and ``sort`` is always stable.
* NaN propagates through ``max``/``min``/``amax``/``median`` (and counts as
  the largest value when sorting: last ascending, first descending).
* float16 and bfloat16 are computed in float32 and rounded once at the end;
  float32 ``cumsum``/``cumprod`` accumulate in float64 (as PyTorch's CPU kernels do).
* ``sum``, ``mean``, ``cumsum`` and ``cumprod`` of float32/float64/int64 data run the C++
  kernels of ``ember._C`` (csrc/reduce.cpp): the sums for C- or F-contiguous data reduced
  over adjacent dims, the scans always. Other cases use numpy.
* ``amax``/``amin``, ``max``/``min`` along a dim, ``argmax``/``argmin``, ``var``/``std`` (and
  their ``_mean`` forms) and the 1-, 2- and inf-norms run C++ kernels of the same file on
  arrays of at least :data:`_C_MIN_ELEMENTS` elements (see :func:`_c_reduce`): any dims, any
  layout (the input is reordered by the threaded copy of csrc/copy.cpp when its reduced dims
  are not adjacent in memory). float16/bfloat16 inputs are widened to float32 first.

Kernels read ``t._data`` and return new numpy arrays; meta functions do every
argument check, so the messages are the same on every device.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from . import _strided_copy
from ._array_module import as_array as _as_array
from ._array_module import values_for_checks as _values_for_checks
from ._registry import registry
from ._shapes import wrap_dim

_REDUCTION = ("reduction",)
_SORT = ("sort",)

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_LOW_FLOATS = D.numpy_dtype_set((D.float16, D.bfloat16))  # computed in float32 (learns bfloat16 on load)
# (a set, not bfloat16.numpy_dtype read per call: that read would load ml_dtypes for float32 inputs too)
_BFLOAT16 = D.numpy_dtype_set((D.bfloat16,))


def _return_type(name, fields):
    """A namedtuple class for a multi-output op (``values, indices`` ...), like ``torch.return_types``."""
    cls = collections.namedtuple(name, fields)
    cls.__module__ = "ember.return_types"
    return cls


def _op(name):
    """The registry op ``name``, looked up at call time (it may live in a module registered later)."""
    try:
        return registry[name]
    except KeyError:
        raise NotImplementedError(f"this operation needs the op '{name}', which is not registered") from None


# -- argument checks shared by the meta functions -------------------------------------------------------


def _check_tensor(name, x, arg="input", position=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be Tensor, not {type(x).__name__}")


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_int(name, value, arg):
    if not _is_int(value):
        raise TypeError(f"{name}(): argument '{arg}' must be int, not {type(value).__name__}")
    return int(value)


def _check_dtype_arg(name, dtype):
    if dtype is not None and not isinstance(dtype, D.dtype):
        raise TypeError(f"{name}(): argument 'dtype' must be ember.dtype, not {type(dtype).__name__}")


def _dims(name, dim, ndim, *, empty_means_all=True):
    """``dim`` (None, an int, or a tuple/list of ints) as a sorted tuple of non-negative dims.

    ``None`` means every dim; so does ``()`` unless ``empty_means_all`` is False.

    Raises:
        TypeError: for a ``dim`` that is not an int or a sequence of ints.
        IndexError: for a dim out of range.
        RuntimeError: for a dim given twice.
    """
    if dim is None:
        return tuple(range(ndim)) if ndim else (0,)
    if _is_int(dim):
        return (wrap_dim(int(dim), ndim),)
    if not isinstance(dim, (tuple, list)):
        raise TypeError(f"{name}(): argument 'dim' must be int or tuple of ints, not {type(dim).__name__}")
    if not dim:
        if not empty_means_all:
            return ()
        return tuple(range(ndim)) if ndim else (0,)
    dims = []
    for d in dim:
        if not _is_int(d):
            raise TypeError(
                f"{name}(): argument 'dim' must be tuple of ints, but found element of type {type(d).__name__}"
            )
        w = wrap_dim(int(d), ndim)
        if w in dims:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        dims.append(w)
    return tuple(sorted(dims))


def _one_dim(name, dim, ndim):
    """A single int ``dim``, wrapped; TypeError for tuples (ops whose ``dim`` is one int)."""
    if not _is_int(dim):
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    return wrap_dim(int(dim), ndim)


def _out_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _axis(data, dims):
    """The numpy ``axis`` for reduction dims (None for a zero-dim array)."""
    return dims if data.ndim else None


def _count(shape, dims):
    """How many elements each output element reduces over."""
    return math.prod(shape[d] for d in dims) if shape else 1


def _check_nonempty_dims(name, shape, dims):
    for d in dims:
        if shape and shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _upcast(data):
    """float16/bfloat16 values as float32 (numpy's loops for them are slow or missing)."""
    return data.astype(_F32) if data.dtype in _LOW_FLOATS else data


def _finish(result, np_dtype):
    """``result`` as a new array of ``np_dtype``."""
    result = _as_array(result)
    return result.astype(np_dtype) if result.dtype != np_dtype else result


def _to_last(data, d):
    """``data`` with dim ``d`` moved last (a zero-dim array becomes shape (1,))."""
    if data.ndim == 0:
        return data.reshape(1)
    return np.moveaxis(data, d, -1)


# -- the C++ reduction kernels ----------------------------------------------------------------------------

#: Elements from which the C++ kernels of amax, argmax, var and norm are used; smaller inputs keep
#: the numpy path (its results are the same; this keeps small ops on their long-tested path).
_C_MIN_ELEMENTS = 1 << 12
_C_DTYPES = (_F32, _F64, np.dtype(np.int32), _I64)


def _c_input(data):
    """``data`` as the C++ kernels take it (float16/bfloat16 widened to float32), or None if they don't apply."""
    if type(data) is not np.ndarray or data.ndim == 0 or data.size < _C_MIN_ELEMENTS:
        return None
    if data.dtype in _LOW_FLOATS:
        wide = _strided_copy.copy_array(data, _F32)
        return data.astype(_F32) if wide is None else wide
    return data if data.dtype in _C_DTYPES else None


def _c_reduce(kernel, data, dims, keepdim):
    """Run ``kernel(array, first, last)`` of ember._C over the sorted ``dims`` of ``data``, any layout.

    The kernels reduce the adjacent dims ``first..last`` of a C-contiguous array (without keepdim). A
    C-contiguous ``data`` reduced over adjacent dims goes straight in; an F-contiguous one (a transposed
    matrix) as its C-contiguous transpose; anything else is first copied with its reduced dims moved last.

    Returns:
        The kernel's array (or tuple of arrays), reshaped for ``keepdim``, as new C-contiguous arrays;
        None when the kernels don't apply (the caller uses numpy).
    """
    x = _c_input(data)
    if x is None:
        return None
    nd = x.ndim
    transposed = False
    if dims[-1] - dims[0] + 1 == len(dims) and x.flags.c_contiguous:
        first, last = dims[0], dims[-1]
    elif dims[-1] - dims[0] + 1 == len(dims) and x.flags.f_contiguous:
        x, first, last, transposed = x.T, nd - 1 - dims[-1], nd - 1 - dims[0], True
    else:
        kept = [d for d in range(nd) if d not in dims]
        moved = x.transpose(kept + list(dims))
        x = _strided_copy.copy_array(moved)
        if x is None:
            x = np.ascontiguousarray(moved)
        first, last = len(kept), nd - 1
    result = kernel(x, first, last)
    if result is None:
        return None
    shape = _out_shape(data.shape, dims, keepdim)

    def finish(a):
        if transposed:
            a = np.ascontiguousarray(a.T)
        return a.reshape(shape)

    return tuple(finish(a) for a in result) if isinstance(result, tuple) else finish(result)


# -- helpers shared by several reduction op modules ----------------------------------------------------


def _sum_dtype(input, dtype):
    if dtype is not None:
        return dtype
    d = input.dtype
    return D.int64 if d.category <= D.INTEGRAL else d
def _sort_order(x, axis, descending):
    """Stable argsort of ``x`` along ``axis``: NaN last ascending and first descending; ties keep index order."""
    if x.dtype in _BFLOAT16:
        x = x.astype(_F32)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # sort the reversed array ascending and reverse the order: descending, equal values still in index order
    order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - np.flip(order, axis)
def _select_rows(rows, kth):
    """The ``kth[i]``-th smallest value of each row ``i`` of a 2-D array, and its index.

    NaN counts as the largest value. The index is the one a stable sort puts at ``kth[i]``: among equal
    values, the ``j``-th occurrence in index order, ``j`` = ``kth[i]`` minus the count of smaller values.
    Found by partitioning (linear time) rather than sorting.
    """
    x = _upcast(rows)
    # (CuPy: always the sort; its partition takes the ranks as host integers)
    positions = np.unique(kth) if x.shape[1] > 32 and type(x) is np.ndarray else None
    if positions is None or positions.size > 8:  # short rows, or many ranks: one sort is cheaper
        order = np.take_along_axis(_sort_order(x, 1, False), kth[:, None], axis=1)
        return np.take_along_axis(rows, order, axis=1)[:, 0], order[:, 0].astype(_I64, copy=False)
    values = np.take_along_axis(np.partition(x, positions, axis=1), kth[:, None], axis=1)
    if x.dtype.kind == "f":
        nan_value = np.isnan(values)
        nan_x = np.isnan(x)
        smaller = np.where(nan_value[:, 0], (~nan_x).sum(axis=1), (x < values).sum(axis=1))
        equal = np.where(nan_value, nan_x, x == values)
    else:
        smaller = (x < values).sum(axis=1)
        equal = x == values
    occurrence = kth - smaller  # 0-based, among the equal values in index order
    index = np.argmax(np.cumsum(equal, axis=1) > occurrence[:, None], axis=1).astype(_I64)
    return np.take_along_axis(rows, index[:, None], axis=1)[:, 0], index
def _check_meta_data_dependent(name, input):
    if input.device.type == "meta":
        raise NotImplementedError(f"{name}(): the output shape is data-dependent, so meta tensors can't run it")
_data_for_checks = _values_for_checks  # an array to check values on, without a host copy of a GPU array
