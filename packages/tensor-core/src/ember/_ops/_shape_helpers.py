"""Helpers shared by the shape op modules (joining, repeating, reordering, index and mask ops, ...).

Argument parsing (tensor sequences, int lists, varargs sizes), the in-place
variant builder, multi-view composites, and the reductions at flat positions
that scatter-style ops (``scatter``, ``scatter_reduce``, ``index_add``,
``index_reduce``, ``put``) share: their index tensor becomes flat positions of a
contiguous destination, sum-accumulation goes through
``ember._C.index_accumulate`` (C++) and the other reductions through numpy's
``ufunc.at`` (means: sums and ``np.bincount`` counts), so repeated indices cost
no Python loop.
"""

from __future__ import annotations

import numpy as np

from .. import _C
from .. import _dtype as D
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._array_module import assign_last as _assign_last
from ._array_module import check_bounds as _check_bounds
from ._array_module import ufunc_at as _ufunc_at
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from .creation import check_scalar_fits, copy_, full

_LOW_FLOATS = D.numpy_dtype_set((D.float16, D.bfloat16))  # computed in float32, stored back (learns bfloat16 on load)
# dtypes that ember._C.index_accumulate handles
_C_ACCUMULATE = frozenset(
    np.dtype(n) for n in ("float32", "float64", "int64", "int32", "int16", "int8", "uint8", "complex64", "complex128")
)
_INT32_OR_64 = (D.int32, D.int64)


# -- argument helpers -----------------------------------------------------------------------


def _require_tensor(op, arg, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _varargs_tensors(op, tensors):
    """``f(a, b)`` or ``f([a, b])``: the tensors as a tuple."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    return tuple(tensors)


def _is_number(x):
    return isinstance(x, (bool, int, float, complex, np.number, np.bool_))


def _int_list(op, arg, value):
    """A sequence of ints (``dims``, ``sizes``); PyTorch refuses a bare int for these arguments."""
    if isinstance(value, Tensor) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, not {type(value).__name__}")
    result = []
    for v in value:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(
                f"{op}(): argument '{arg}' must be tuple of ints, but found element of type {type(v).__name__}"
            )
        result.append(v.__index__())
    return tuple(result)


def _int_or_list(value):
    return (value,) if isinstance(value, int) else tuple(int(v) for v in value)


def _check_index_dtype(index, allowed, message, error=RuntimeError):
    if index.dtype not in allowed:
        raise error(message.format(name=_torch_name(index.dtype)))


def _fresh(array):
    """``array`` as a new C-contiguous array that shares no memory with any input."""
    xp = np if type(array) is np.ndarray else _array_namespace(array)  # CuPy arrays stay on their device
    return xp.array(array, order="C", copy=True)


def _astype(array, np_dtype):
    return array if array.dtype == np_dtype else array.astype(np_dtype)


def _shape_str(shape):
    return str(list(shape))


def _first_out_of_range(idx, low, high):
    """The first value of ``idx`` outside ``[low, high)``, or None."""
    if idx.size == 0:
        return None
    if type(idx) is not np.ndarray:  # CuPy: one reduction, one host read (as PyTorch's device-side assert syncs)
        return _check_bounds(idx, low, high)
    if idx.min() >= low and idx.max() < high:
        return None
    flat = idx.reshape(-1)
    return int(flat[np.flatnonzero((flat < low) | (flat >= high))[0]])


def _data_dependent(op):
    return NotImplementedError(
        f"{op}: the output shape is data-dependent, so a meta tensor can't compute it (run on a device with data)"
    )


def _dims_method(op, arg):
    """A Tensor method taking ``op``'s ``arg`` as varargs too: ``x.flip(0, 1)`` as well as ``x.flip((0, 1))``."""

    def method(self, *values, **kwargs):
        if arg in kwargs:
            return op(self, kwargs.pop(arg), *values, **kwargs)
        if len(values) == 1 and isinstance(values[0], (list, tuple)):
            values = values[0]
        return op(self, tuple(values), **kwargs)

    method.__name__ = method.__qualname__ = op.name
    method.__doc__ = f"``ember.{op.name}(self, {arg})``; the {arg} may also be given as separate ints."
    return method


# -- in-place variants -----------------------------------------------------------------------


def _write_through(self, fill):
    """Run ``fill(array)`` on ``self``'s data (a contiguous copy when the view isn't contiguous)."""
    data = self._data
    if data.flags.c_contiguous:
        fill(data)
        return
    tmp = _fresh(data)
    fill(tmp)
    np.copyto(data, tmp)


def _def_inplace(op, kernel):
    """Register ``op.name + "_"``: ``op`` whose result is written into its first argument.

    ``kernel(self, *args, **kwargs)`` writes into ``self._data`` directly. The
    decomposition (for backends without a kernel) is ``copy_(self, op(...))``.
    """

    def meta(self, *args, **kwargs):
        result = op.meta(self, *args, **kwargs)
        if tuple(result.shape) != tuple(self._data.shape):
            raise RuntimeError(
                f"output with shape {_shape_str(self._data.shape)} doesn't match the broadcast shape "
                f"{_shape_str(result.shape)}"
            )
        return self._data

    def decomposition(self, *args, **kwargs):
        meta(self, *args, **kwargs)
        return copy_(self, op(self, *args, **kwargs))

    meta.__name__ = op.name + "_"
    meta.__doc__ = f"In-place version of :func:`ember.{op.name}`: writes the result into ``self`` and returns it."
    inplace = defop(
        op.name + "_", meta, cpu=kernel, kind="inplace", category=COMPOSITE, decomposition=decomposition, tags=op.tags
    )
    inplace.functional = op
    op.inplace = inplace
    return inplace


def _def_multi_view(name, views, decomposition=None):
    """Register a composite whose outputs view *different* inputs (``broadcast_tensors``, ``meshgrid``, ...).

    Kind "view" would make every output a view of the first argument, so these
    are kind "other" (the function returns the final tensors): ``views``,
    written in view ops, is both the meta function (checks, and the kernel of
    the meta device, where it builds views of meta tensors) and, unless given,
    the decomposition that every other device runs after it.
    """
    return defop(name, views, category=COMPOSITE, kind="other", decomposition=decomposition or views)
# -- reductions at positions (shared by scatter, index_add/reduce, put) ----------------------------

_UFUNCS = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
_BOOL_UFUNCS = {"sum": np.logical_or, "prod": np.logical_and, "amax": np.logical_or, "amin": np.logical_and}


def _reduce_identity(reduce, dtype):
    """The value a position starts from when its old value is excluded (``include_self=False``)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == np.bool_:
        return reduce == "amin"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    return -np.inf if reduce == "amax" else np.inf


def _reduce_at(flat, pos, vals, reduce, include_self=True):
    """Reduce ``vals`` into the 1-D contiguous array ``flat`` at flat positions ``pos``.

    ``reduce`` is None (assignment; the last write wins), "sum", "prod",
    "mean", "amax" or "amin". Without ``include_self`` the old value of a
    position that receives values takes no part. float16/bfloat16 reduce in
    float32; integer means round toward minus infinity, as in PyTorch; NaN
    propagates through amax/amin.
    """
    if pos.size == 0:
        return
    dtype = flat.dtype
    if reduce is None:
        if type(flat) is np.ndarray:
            flat[pos] = vals
        else:  # CuPy: repeated positions keep their last value, as numpy's sequential writes do
            _assign_last(flat, pos, vals)
        return
    if dtype in _LOW_FLOATS:
        work = flat.astype(np.float32)
        _reduce_at(work, pos, vals.astype(np.float32), reduce, include_self)
        flat[...] = work.astype(dtype)
        return
    xp = _array_namespace(flat)
    vals = xp.ascontiguousarray(_astype(vals, dtype))
    pos = xp.ascontiguousarray(pos, dtype=np.int64)
    if reduce == "mean":
        total = xp.zeros(flat.size, dtype)
        _accumulate(total, pos, vals)
        count = np.bincount(pos, minlength=flat.size)
        hit = np.flatnonzero(count)
        total, count = total[hit], count[hit]
        if include_self:
            total += flat[hit]
            count += 1
        with np.errstate(all="ignore"):
            flat[hit] = np.floor_divide(total.astype(np.int64), count) if dtype.kind in "iu" else total / count
        return
    if not include_self:
        flat[pos] = _reduce_identity(reduce, dtype)
    if reduce == "sum":
        _accumulate(flat, pos, vals)
        return
    with np.errstate(all="ignore"):  # NaN propagates through amax/amin silently, as in PyTorch
        # numpy's ufunc.at; on CuPy, _array_module.ufunc_at gives the same results for every ufunc and dtype
        _ufunc_at((_BOOL_UFUNCS if dtype == np.bool_ else _UFUNCS)[reduce], flat, pos, vals)


def _accumulate(flat, pos, vals):
    """``flat[pos] += vals`` with repeats adding up (``or`` for bool)."""
    if type(flat) is np.ndarray and flat.dtype in _C_ACCUMULATE:
        _C.index_accumulate(flat, pos, vals)
    elif flat.dtype == np.bool_:
        _ufunc_at(np.logical_or, flat, pos, vals)
    else:
        _ufunc_at(np.add, flat, pos, vals)


# -- checks and shapes shared by several shape op modules ----------------------------------------


def _atleast_shape(shape, n):
    """The shape ``atleast_{n}d`` gives (numpy's and PyTorch's rule for 3-D: (n,) -> (1, n, 1))."""
    if len(shape) >= n:
        return tuple(shape)
    if n == 1:
        return (1,)
    if n == 2:
        return (1,) * (2 - len(shape)) + tuple(shape)
    return {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}[len(shape)]
def _check_fill_value(op, value, dtype):
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(
                f"{op} only supports a 0-dimensional value tensor, but got tensor with {value._data.ndim} dimension(s)."
            )
    elif _is_number(value):
        check_scalar_fits(value, dtype)
    else:
        raise TypeError(f"{op}(): argument 'value' must be Number or Tensor, not {type(value).__name__}")
def _fill_tensor(value, input):
    """``value`` (a number or zero-dim tensor) as a zero-dim tensor of ``input``'s dtype and device."""
    if isinstance(value, Tensor):
        return value.to(input.dtype)
    return full((), value, dtype=input.dtype, device=input.device)
def _as_1d(shape):
    return tuple(shape) if len(shape) else (1,)
def _check_index_bounds(idx, size, dim):
    bad = _first_out_of_range(idx, 0, size)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
def _check_reduction_dtype(op, reduce, dtype):
    if reduce == "mean" and dtype is D.bool:
        raise NotImplementedError(f'"{op}_mean" not implemented for \'Bool\'')
    if reduce in ("amax", "amin") and dtype.is_complex:
        raise NotImplementedError(f'"{op}_{reduce}" not implemented for \'{_torch_name(dtype)}\'')
