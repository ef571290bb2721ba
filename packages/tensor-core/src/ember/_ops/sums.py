"""Sum-like reductions: sum, nansum, mean, nanmean and prod (conventions in :mod:`ember._ops._reduction_helpers`)."""

from __future__ import annotations

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._float_errors import quiet
from ._pointwise_helpers import _torch_name
from ._reduction_helpers import (
    _F32,
    _LOW_FLOATS,
    _REDUCTION,
    _axis,
    _c_reduce,
    _check_dtype_arg,
    _check_tensor,
    _count,
    _dims,
    _finish,
    _one_dim,
    _op,
    _out_shape,
    _sum_dtype,
    _upcast,
)
from ._registry import COMPOSITE, defop

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["sum", "nansum", "mean", "nanmean", "prod"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


def _c_sum(data, dims, keepdim):
    """Sum of ``data`` over the sorted ``dims`` by ember._C, or None where that kernel does not apply.

    It applies to float32/float64/int64 arrays with at least one dim. C- or F-contiguous data reduced over
    adjacent dims goes straight to the kernel; other layouts and dim sets of large arrays are reordered by the
    threaded copy first (see ``_reduction_helpers._c_reduce``). The result is a new C-contiguous array.
    """
    if not data.ndim or type(data) is not np.ndarray:  # (CuPy: numpy path)
        return None
    if dims[-1] - dims[0] + 1 == len(dims):
        result = _C.sum_dims(data, dims[0], dims[-1], keepdim)
        if result is None and data.ndim > 1 and data.flags.f_contiguous:
            # e.g. a transposed matrix: reduce its C-contiguous transpose, whose dims run the other way
            last = data.ndim - 1
            result = _C.sum_dims(data.T, last - dims[-1], last - dims[0], keepdim)
            if result is not None:
                result = np.ascontiguousarray(result.T)
        if result is not None:
            return result
    kept = _kept_block(data, dims)
    if kept is not None:
        # the dims around one kept block (a bias gradient's grad.sum((0, 2, 3))): summed in place, no reordering copy
        result = _C.sum_around(data, *kept)
        if result is not None:
            return result.reshape(_out_shape(data.shape, dims, keepdim))
    return _c_reduce(lambda x, first, last: _C.sum_dims(x, first, last, False), data, dims, keepdim)


#: Elements of the runs below which _C.sum_around is not used (a per-run call costs more than reordering).
_AROUND_MIN_RUN = 16


def _kept_block(data, dims):
    """``(first, last)`` when the sorted ``dims`` are the first and last dims of a large C-contiguous ``data``
    around one block ``first..last`` that is kept, with contiguous runs of at least ``_AROUND_MIN_RUN``
    elements after it; else None."""
    nd = data.ndim
    if dims[0] != 0 or dims[-1] != nd - 1 or not data.flags.c_contiguous or data.size < (1 << 12):
        return None
    kept = [d for d in range(nd) if d not in dims]
    if not kept or kept[-1] - kept[0] + 1 != len(kept):
        return None
    if np.prod(data.shape[kept[-1] + 1 :]) < _AROUND_MIN_RUN:
        return None
    return kept[0], kept[-1]


def _sum_meta(input, dim=None, keepdim=False, *, dtype=None):
    """Sum of ``input``'s elements over ``dim`` (every dim by default).

    Args:
        input (Tensor): any dtype.
        dim (int or tuple of ints, optional): the dims to reduce; ``None`` or ``()`` reduce all.
        keepdim (bool): keep the reduced dims with size 1.
        dtype (ember.dtype, optional): cast ``input`` to this dtype first and return it.

    Returns:
        Tensor: bool and integer inputs give int64 (unless ``dtype``); others keep their dtype.
        An empty reduction gives 0.

    Raises:
        IndexError: for a dim out of range.
        RuntimeError: for a dim given twice.

    Example:
        >>> import ember
        >>> ember.sum(ember.tensor([[1, 2], [3, 4]]), dim=0)
        tensor([4, 6])
    """
    _check_tensor("sum", input)
    _check_dtype_arg("sum", dtype)
    data = input._data
    dims = _dims("sum", dim, data.ndim)
    return MetaArray(_out_shape(data.shape, dims, keepdim), _sum_dtype(input, dtype).numpy_dtype)


def _sum_cpu(input, dim=None, keepdim=False, *, dtype=None):
    data = input._data
    out = _sum_dtype(input, dtype).numpy_dtype
    if dtype is not None and data.dtype != out:
        data = (data.real if data.dtype.kind == "c" and out.kind != "c" else data).astype(out)
    acc = _F32 if out in _LOW_FLOATS else out
    dims = _dims("sum", dim, data.ndim)
    if data.dtype == acc:  # no cast needed
        result = _c_sum(data, dims, keepdim)
        if result is not None:
            return result
    if acc.kind in "iu":  # integer sums wrap silently
        return _finish(np.add.reduce(data, axis=_axis(data, dims), dtype=acc, keepdims=keepdim), out)
    with np.errstate(all="ignore"):
        return _finish(np.add.reduce(data, axis=_axis(data, dims), dtype=acc, keepdims=keepdim), out)


sum = defop("sum", _sum_meta, cpu=_sum_cpu, has_out=True, tags=_REDUCTION)  # noqa: A001

_CHECKED_SUM_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64))


def _sum_checked(input, *rest):
    """``sum(input)`` of a float32/float64 CPU tensor without the meta function (which only checks that
    ``input`` is a tensor): the sum of a loss, on the hot path of every training step; None otherwise."""
    if rest or type(input) is not Tensor:
        return None
    data = input._data
    if type(data) is not np.ndarray or data.dtype not in _CHECKED_SUM_DTYPES:
        return None
    result = quiet(_sum_cpu, input)  # checked kernels quiet numpy themselves (see _dispatch)
    return result if type(result) is np.ndarray else None


sum.register_checked_kernel("cpu", _sum_checked)


def _nansum_meta(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` treating NaN as zero (see :func:`ember.sum` for ``dim``, ``keepdim``, ``dtype``).

    Raises:
        RuntimeError: for complex inputs (as PyTorch's CPU kernel).

    Example:
        >>> import ember
        >>> ember.nansum(ember.tensor([1., float("nan"), 2.]))
        tensor(3.)
    """
    _check_tensor("nansum", input)
    if input.dtype.is_complex:
        raise RuntimeError("nansum does not support complex inputs")
    return _sum_meta(input, dim, keepdim, dtype=dtype)


def _nansum_cpu(input, dim=None, keepdim=False, *, dtype=None):
    data = input._data
    out = _sum_dtype(input, dtype).numpy_dtype
    if data.dtype.kind != "f" and data.dtype not in _LOW_FLOATS:
        return _sum_cpu(input, dim, keepdim, dtype=dtype)
    if data.dtype != out:
        data = data.astype(out)
    acc = _F32 if out in _LOW_FLOATS else out
    dims = _dims("nansum", dim, data.ndim)
    with np.errstate(all="ignore"):
        return _finish(np.nansum(data, axis=_axis(data, dims), dtype=acc, keepdims=keepdim), out)


def _nansum_decomp(input, dim=None, keepdim=False, *, dtype=None):
    _nansum_meta(input, dim, keepdim, dtype=dtype)  # a decomposition runs without the meta check
    if input.dtype.category == D.FLOATING:
        input = _op("where")(_op("isnan")(input), 0, input)
    return sum(input, dim, keepdim, dtype=dtype)


nansum = defop("nansum", _nansum_meta, cpu=_nansum_cpu, category=COMPOSITE, decomposition=_nansum_decomp,
               has_out=True, tags=_REDUCTION)


def _mean_dtype(name, input, dtype):
    if dtype is not None:
        if dtype.category < D.FLOATING:
            raise RuntimeError(
                f"{name}(): could not infer output dtype. Optional dtype must be either a floating point or complex "
                f"dtype. Got: {_torch_name(dtype)}"
            )
        return dtype
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(
            f"{name}(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {_torch_name(input.dtype)}"
        )
    return input.dtype


def _mean_meta(input, dim=None, keepdim=False, *, dtype=None):
    """Arithmetic mean over ``dim`` (every dim by default).

    Args:
        input (Tensor): floating or complex; integer/bool inputs need a floating ``dtype``.
        dim (int or tuple of ints, optional): the dims to reduce; ``None`` or ``()`` reduce all.
        keepdim (bool): keep the reduced dims with size 1.
        dtype (ember.dtype, optional): cast ``input`` to this (floating or complex) dtype first.

    Returns:
        Tensor: the mean; NaN for an empty reduction.

    Raises:
        RuntimeError: for integer or bool inputs without a floating ``dtype``.

    Example:
        >>> import ember
        >>> ember.mean(ember.tensor([[1., 2.], [3., 5.]]), dim=1)
        tensor([1.5000, 4.0000])
    """
    _check_tensor("mean", input)
    _check_dtype_arg("mean", dtype)
    out = _mean_dtype("mean", input, dtype)
    data = input._data
    dims = _dims("mean", dim, data.ndim)
    return MetaArray(_out_shape(data.shape, dims, keepdim), out.numpy_dtype)


def _mean_cpu(input, dim=None, keepdim=False, *, dtype=None):
    data = input._data
    out = (input.dtype if dtype is None else dtype).numpy_dtype
    if data.dtype != out:
        data = data.astype(out)
    data = _upcast(data)
    dims = _dims("mean", dim, data.ndim)
    count = _count(data.shape, dims)
    if count and data.dtype.kind == "f":
        total = _c_sum(data, dims, keepdim)
        if total is not None:  # a new array: divide in place (by a positive count: no floating warnings)
            return _finish(np.true_divide(total, count, out=total), out)
    with np.errstate(all="ignore"):
        total = np.sum(data, axis=_axis(data, dims), keepdims=keepdim)
        return _finish(np.true_divide(total, count, dtype=data.dtype), out)


def _mean_decomp(input, dim=None, keepdim=False, *, dtype=None):
    _mean_meta(input, dim, keepdim, dtype=dtype)
    dims = _dims("mean", dim, input.ndim)
    return _op("div")(sum(input, dim, keepdim, dtype=dtype or input.dtype), _count(tuple(input.shape), dims))


mean = defop("mean", _mean_meta, cpu=_mean_cpu, category=COMPOSITE, decomposition=_mean_decomp, has_out=True,
             tags=_REDUCTION)


def _nanmean_meta(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim`` of the elements that are not NaN (NaN where there are none).

    Args:
        input (Tensor): floating point (complex is refused, as by PyTorch's CPU kernel).
        dim, keepdim, dtype: as :func:`ember.mean`.

    Raises:
        RuntimeError: for integer, bool or complex inputs.

    Example:
        >>> import ember
        >>> ember.nanmean(ember.tensor([1., float("nan"), 2.]))
        tensor(1.5000)
    """
    _check_tensor("nanmean", input)
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(
            f"nanmean(): expected input to have floating point or complex dtype but got {_torch_name(input.dtype)}"
        )
    if input.dtype.is_complex:
        raise RuntimeError("nansum does not support complex inputs")
    _check_dtype_arg("nanmean", dtype)
    return _mean_meta(input, dim, keepdim, dtype=dtype)


def _nanmean_cpu(input, dim=None, keepdim=False, *, dtype=None):
    data = input._data
    out = (input.dtype if dtype is None else dtype).numpy_dtype
    if data.dtype != out:
        data = data.astype(out)
    data = _upcast(data)
    dims = _dims("nanmean", dim, data.ndim)
    axis = _axis(data, dims)
    with np.errstate(all="ignore"):
        total = np.nansum(data, axis=axis, keepdims=keepdim)
        count = np.sum(~np.isnan(data), axis=axis, keepdims=keepdim)
        return _finish(np.true_divide(total, count, dtype=data.dtype), out)


def _nanmean_decomp(input, dim=None, keepdim=False, *, dtype=None):
    _nanmean_meta(input, dim, keepdim, dtype=dtype)
    count = sum(_op("logical_not")(_op("isnan")(input)), dim, keepdim)
    return _op("div")(nansum(input, dim, keepdim, dtype=dtype), count)


nanmean = defop("nanmean", _nanmean_meta, cpu=_nanmean_cpu, category=COMPOSITE, decomposition=_nanmean_decomp,
                has_out=True, tags=_REDUCTION)


def _prod_meta(input, dim=None, keepdim=False, *, dtype=None):
    """Product of ``input``'s elements over one ``dim`` (every element by default).

    Args:
        input (Tensor): any dtype.
        dim (int, optional): the dim to reduce (one int, as in PyTorch).
        keepdim (bool): keep the reduced dim with size 1.
        dtype (ember.dtype, optional): cast ``input`` to this dtype first.

    Returns:
        Tensor: bool and integer inputs give int64 (unless ``dtype``). An empty product is 1.

    Raises:
        TypeError: for a ``dim`` that is not an int.

    Example:
        >>> import ember
        >>> ember.prod(ember.tensor([[1, 2], [3, 4]]), 1)
        tensor([ 2, 12])
    """
    _check_tensor("prod", input)
    _check_dtype_arg("prod", dtype)
    data = input._data
    dims = _dims("prod", None, data.ndim) if dim is None else (_one_dim("prod", dim, data.ndim),)
    return MetaArray(_out_shape(data.shape, dims, keepdim), _sum_dtype(input, dtype).numpy_dtype)


def _prod_cpu(input, dim=None, keepdim=False, *, dtype=None):
    data = input._data
    out = _sum_dtype(input, dtype).numpy_dtype
    if dtype is not None and data.dtype != out:
        data = data.astype(out)
    acc = _F32 if out in _LOW_FLOATS else out
    dims = _dims("prod", dim, data.ndim)
    with np.errstate(all="ignore"):
        return _finish(np.prod(data, axis=_axis(data, dims), dtype=acc, keepdims=keepdim), out)


prod = defop("prod", _prod_meta, cpu=_prod_cpu, has_out=True, tags=_REDUCTION)
