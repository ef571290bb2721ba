"""Reductions, scans, sorting, searching, unique and histograms.

Conventions shared by the ops of this module (PyTorch's):

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

Kernels read ``t._data`` and return new numpy arrays; meta functions do every
argument check, so the messages are the same on every device.
"""

from __future__ import annotations

import builtins
import collections
import math

import numpy as np

from .. import _C
from .. import _dtype as D
from .._alloc import check_sizes
from .._meta import MetaArray
from .._tensor import Tensor
from ._pointwise_helpers import _torch_name, make_inplace
from ._registry import COMPOSITE, defop, registry
from ._shapes import wrap_dim
from ._xp import accumulate as _accumulate  # numpy's ufunc.accumulate, also for CuPy arrays
from ._xp import array_namespace as _array_namespace
from ._xp import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._xp import cuda_runs_cpu_kernel as _cuda_runs_cpu_kernel
from ._xp import values_for_checks as _values_for_checks

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = [
    "sum", "nansum", "mean", "nanmean", "prod", "std", "var", "max", "min", "amax", "amin", "aminmax", "argmax",
    "argmin", "all", "any", "norm", "logsumexp", "count_nonzero", "cumsum", "cumsum_", "cumprod", "cumprod_",
    "cummax", "cummin", "logcumsumexp", "median", "nanmedian", "mode", "quantile", "nanquantile", "sort", "argsort",
    "msort", "topk", "kthvalue", "unique", "unique_consecutive", "bincount", "histc", "histogram", "diff",
]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}

_REDUCTION = ("reduction",)
_SCAN = ("scan",)
_SORT = ("sort",)

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_I32 = np.dtype(np.int32)
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


def _check_not_complex(name, input):
    if input.dtype.is_complex:
        raise RuntimeError(f"{name}(): does not support complex input")


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


# -- compiled kernels (ember._C) for sum, mean, cumsum and cumprod -----------------------------------------
# They take C-contiguous float32/float64/int64 arrays and return None for anything else (see
# csrc/reduce.cpp). Their float sums are blocked-pairwise with float64 block accumulators (at least as
# accurate as numpy's pairwise sum, and faster); their float32 scans accumulate in float64, as PyTorch's do.

_C_DTYPES = (_F32, _F64, _I64)


def _c_sum(data, dims, keepdim):
    """Sum of ``data`` over the sorted ``dims`` by ember._C, or None where that kernel does not apply.

    It applies to float32/float64/int64 arrays with at least one dim, C- or F-contiguous, whose reduced
    dims are adjacent. The result is a new C-contiguous array.
    """
    if not data.ndim or dims[-1] - dims[0] + 1 != len(dims) or type(data) is not np.ndarray:  # (CuPy: numpy path)
        return None
    result = _C.sum_dims(data, dims[0], dims[-1], keepdim)
    if result is None and data.ndim > 1 and data.flags.f_contiguous:
        # e.g. a transposed matrix: reduce its C-contiguous transpose, whose dims run the other way
        last = data.ndim - 1
        result = _C.sum_dims(data.T, last - dims[-1], last - dims[0], keepdim)
        if result is not None:
            result = np.ascontiguousarray(result.T)
    return result


def _c_scan(kernel, data, d):
    """``kernel`` (ember._C.cumsum or cumprod) along dim ``d`` of an array, or None for other dtypes."""
    if type(data) is not np.ndarray:  # a CuPy array takes the numpy-namespace path
        return None
    return kernel(data if data.flags.c_contiguous else np.ascontiguousarray(data), d)


# -- sum, nansum, mean, nanmean, prod ------------------------------------------------------------------


def _sum_dtype(input, dtype):
    if dtype is not None:
        return dtype
    d = input.dtype
    return D.int64 if d.category <= D.INTEGRAL else d


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


# -- var, std, var_mean, std_mean ----------------------------------------------------------------------


def _var_args(name, input, dim, unbiased, correction):
    """Resolve the overloads ``(input, unbiased)``, ``(input, dim, unbiased)`` and ``correction=``."""
    _check_tensor(name, input)
    if isinstance(dim, bool):  # var(input, unbiased)
        if unbiased is not None:
            raise TypeError(f"{name}(): got two values for 'unbiased'")
        unbiased, dim = dim, None
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}(): pass either 'unbiased' or 'correction', not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    elif not isinstance(correction, (int, float)) or isinstance(correction, bool):
        raise TypeError(f"{name}(): argument 'correction' must be a number, not {type(correction).__name__}")
    if input.dtype.category < D.FLOATING:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    return _dims(name, dim, input._data.ndim), correction


def _var_meta(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim``: ``sum(|x - mean|^2) / max(0, N - correction)``.

    Args:
        input (Tensor): floating or complex.
        dim (int or tuple of ints, optional): the dims to reduce; all by default.
            ``var(input, False)`` is the old ``unbiased`` overload.
        unbiased (bool, optional): ``False`` means ``correction=0``; the default is ``correction=1``.
        keepdim (bool): keep the reduced dims with size 1.
        correction (int or float, optional): Bessel's correction (1 by default).

    Returns:
        Tensor: a real tensor (complex inputs give their real dtype); NaN where ``N <= correction``.

    Raises:
        RuntimeError: for integer or bool inputs.
        TypeError: if both ``unbiased`` and ``correction`` are given.

    Example:
        >>> import ember
        >>> ember.var(ember.tensor([1., 2., 3., 4.]))
        tensor(1.6667)
        >>> ember.var(ember.tensor([1., 2., 3., 4.]), correction=0)
        tensor(1.2500)
    """
    dims, _ = _var_args("var", input, dim, unbiased, correction)
    data = input._data
    return MetaArray(_out_shape(data.shape, dims, keepdim), input.dtype.to_real().numpy_dtype)


def _moments(input, dims, keepdim, correction):
    """(variance, mean) over ``dims`` in the computation dtype."""
    data = _upcast(input._data)
    axis = _axis(data, dims)
    n = _count(data.shape, dims)
    with np.errstate(all="ignore"):
        mean = np.true_divide(np.sum(data, axis=axis, keepdims=True), n, dtype=data.dtype)
        dev = data - mean
        sq = dev.real * dev.real + dev.imag * dev.imag if dev.dtype.kind == "c" else dev * dev
        var = np.true_divide(np.sum(sq, axis=axis, keepdims=keepdim), builtins.max(0, n - correction), dtype=sq.dtype)
    if not keepdim:
        mean = mean.reshape(var.shape)
    return var, mean


def _var_cpu(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dims, correction = _var_args("var", input, dim, unbiased, correction)
    var, _ = _moments(input, dims, keepdim, correction)
    return _finish(var, input.dtype.to_real().numpy_dtype)


var = defop("var", _var_meta, cpu=_var_cpu, has_out=True, tags=_REDUCTION)


def _std_meta(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over ``dim``: the square root of :func:`ember.var` (same arguments).

    Example:
        >>> import ember
        >>> ember.std(ember.tensor([[1., 3.], [2., 2.]]), dim=1)
        tensor([1.4142, 0.0000])
    """
    dims, _ = _var_args("std", input, dim, unbiased, correction)
    data = input._data
    return MetaArray(_out_shape(data.shape, dims, keepdim), input.dtype.to_real().numpy_dtype)


def _std_cpu(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dims, correction = _var_args("std", input, dim, unbiased, correction)
    var, _ = _moments(input, dims, keepdim, correction)
    return _finish(np.sqrt(var), input.dtype.to_real().numpy_dtype)


def _std_decomp(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _std_meta(input, dim, unbiased, keepdim, correction=correction)
    return _op("sqrt")(var(input, dim, unbiased, keepdim, correction=correction))


std = defop("std", _std_meta, cpu=_std_cpu, category=COMPOSITE, decomposition=_std_decomp, has_out=True,
            tags=_REDUCTION)


def _moments_op(name, take_sqrt):
    def meta(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        dims, _ = _var_args(name, input, dim, unbiased, correction)
        shape = _out_shape(input._data.shape, dims, keepdim)
        return MetaArray(shape, input.dtype.to_real().numpy_dtype), MetaArray(shape, input._data.dtype)

    def cpu(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        dims, correction = _var_args(name, input, dim, unbiased, correction)
        var_, mean_ = _moments(input, dims, keepdim, correction)
        if take_sqrt:
            var_ = np.sqrt(var_)
        return _finish(var_, input.dtype.to_real().numpy_dtype), _finish(mean_, input._data.dtype)

    def decomposition(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        meta(input, dim, unbiased, keepdim, correction=correction)
        spread = (std if take_sqrt else var)(input, dim, unbiased, keepdim, correction=correction)
        if isinstance(dim, bool):
            dim = None
        return spread, mean(input, dim, keepdim)

    what = "standard deviation" if take_sqrt else "variance"
    meta.__name__ = name
    meta.__doc__ = f"""The {what} and the mean of ``input`` over ``dim``, computed together.

    Takes the arguments of :func:`ember.{"std" if take_sqrt else "var"}`.

    Returns:
        tuple[Tensor, Tensor]: ``({"std" if take_sqrt else "var"}, mean)``; the first is real, the mean keeps
        ``input``'s dtype.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1., 2., 3., 4.]), correction=0)
        (tensor({"1.1180" if take_sqrt else "1.2500"}), tensor(2.5000))
    """
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_REDUCTION)


var_mean = _moments_op("var_mean", take_sqrt=False)
std_mean = _moments_op("std_mean", take_sqrt=True)


# -- amax, amin, max, min, aminmax, argmax, argmin -------------------------------------------------------


def _check_full_nonempty(name, input):
    if input._data.size == 0:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
            "with the 'dim' argument."
        )


def _extreme_meta(name):
    def meta(input, dim=(), keepdim=False):
        _check_tensor(name, input)
        _check_not_complex(name, input)
        data = input._data
        dims = _dims(name, dim, data.ndim)
        if dim is None or (isinstance(dim, (tuple, list)) and not dim):
            _check_full_nonempty(name, input)
        _check_nonempty_dims(name, data.shape, dims)
        return MetaArray(_out_shape(data.shape, dims, keepdim), data.dtype)

    meta.__name__ = name
    word = "largest" if name == "amax" else "smallest"
    meta.__doc__ = f"""The {word} element of ``input`` over ``dim`` (every dim by default); NaN propagates.

    Args:
        input (Tensor): a real or bool tensor.
        dim (int or tuple of ints): the dims to reduce; ``()`` (the default) reduces all.
        keepdim (bool): keep the reduced dims with size 1.

    Returns:
        Tensor: of ``input``'s dtype.

    Raises:
        RuntimeError: for complex inputs, or a full reduction of an empty tensor.
        IndexError: when a reduced dim has size 0.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([[1, 5], [4, 2]]), dim=1)
        tensor([{"5, 4" if name == "amax" else "1, 2"}])
    """
    return meta


def _extreme_cpu(np_fn, name):
    def cpu(input, dim=(), keepdim=False):
        data = input._data
        dims = _dims(name, dim, data.ndim)
        return _finish(np_fn(_upcast(data), axis=_axis(data, dims), keepdims=keepdim), data.dtype)

    return cpu


amax = defop("amax", _extreme_meta("amax"), cpu=_extreme_cpu(np.max, "amax"), has_out=True, tags=_REDUCTION)
amin = defop("amin", _extreme_meta("amin"), cpu=_extreme_cpu(np.min, "amin"), has_out=True, tags=_REDUCTION)


def _arg_extreme_meta(name):
    def meta(input, dim=None, keepdim=False):
        _check_tensor(name, input)
        if input.dtype is D.bool:
            raise RuntimeError(f"{name}(): does not support bool input")
        _check_not_complex(name, input)
        data = input._data
        if dim is None:
            if data.size == 0:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
            return MetaArray((1,) * data.ndim if keepdim else (), _I64)
        d = _one_dim(name, dim, data.ndim)
        _check_nonempty_dims(name, data.shape, (d,))
        return MetaArray(_out_shape(data.shape, (d,), keepdim), _I64)

    meta.__name__ = name
    word = "largest" if name == "argmax" else "smallest"
    meta.__doc__ = f"""Index of the {word} element over ``dim`` (of the flattened tensor if ``dim`` is None).

    The first occurrence wins among equal values; a NaN counts as the {word} value.

    Args:
        input (Tensor): a real (not bool) tensor.
        dim (int, optional): the dim to reduce.
        keepdim (bool): keep the reduced dim(s) with size 1.

    Returns:
        Tensor: int64 indices.

    Raises:
        RuntimeError: for bool or complex inputs.
        IndexError: for an empty reduction.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([[1, 5, 5], [4, 2, 2]]), dim=1)
        tensor([{"1, 0" if name == "argmax" else "0, 1"}])
    """
    return meta


def _arg_extreme_cpu(np_fn, name):
    def cpu(input, dim=None, keepdim=False):
        data = _upcast(input._data)
        if dim is None or data.ndim == 0:
            result = _as_array(np_fn(data)).astype(_I64, copy=False)
            return result.reshape((1,) * data.ndim) if keepdim else result.reshape(())
        d = wrap_dim(dim, data.ndim)
        return _finish(np_fn(data, axis=d, keepdims=keepdim), _I64)

    return cpu


argmax = defop("argmax", _arg_extreme_meta("argmax"), cpu=_arg_extreme_cpu(np.argmax, "argmax"), has_out=True,
               tags=_REDUCTION)
argmin = defop("argmin", _arg_extreme_meta("argmin"), cpu=_arg_extreme_cpu(np.argmin, "argmin"), has_out=True,
               tags=_REDUCTION)

_max_type = _return_type("max", ["values", "indices"])
_min_type = _return_type("min", ["values", "indices"])


def _max_min_meta(name, pointwise):
    def meta(input, dim=None, keepdim=False, *, other=None):
        _check_tensor(name, input)
        if isinstance(dim, Tensor):
            if other is not None:
                raise TypeError(f"{name}(): got two values for 'other'")
            dim, other = None, dim
        if other is not None:
            if keepdim:
                raise TypeError(f"{name}(): 'keepdim' is not an argument of the elementwise form {name}(input, other)")
            return _op(pointwise).meta(input, other)
        _check_not_complex(name, input)
        data = input._data
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): 'keepdim' needs a 'dim'")
            _check_full_nonempty(name, input)
            return MetaArray((), data.dtype)
        d = _one_dim(name, dim, data.ndim)
        _check_nonempty_dims(name, data.shape, (d,))
        shape = _out_shape(data.shape, (d,), keepdim)
        return MetaArray(shape, data.dtype), MetaArray(shape, _I64)

    meta.__name__ = name
    word, arg = ("largest", "argmax") if name == "max" else ("smallest", "argmin")
    meta.__doc__ = f"""The {word} element: over everything, along a ``dim`` with its index, or elementwise.

    Three forms, as in PyTorch:

    * ``{name}(input)``: the {word} element (NaN if any element is NaN);
    * ``{name}(input, dim, keepdim=False)``: a namedtuple ``(values, indices)`` along ``dim``; the index of
      the first occurrence, as :func:`ember.{arg}`;
    * ``{name}(input, other)``: the elementwise {"maximum" if name == "max" else "minimum"} of two tensors.

    Args:
        input (Tensor): a real or bool tensor.
        dim (int, optional): the dim to reduce.
        keepdim (bool): keep the reduced dim with size 1.
        other (Tensor, optional): the second tensor of the elementwise form.

    Raises:
        RuntimeError: for complex inputs, or a full reduction of an empty tensor.
        IndexError: when the reduced dim has size 0.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1., 7.], [4., 2.]])
        >>> ember.{name}(x)
        tensor({"7." if name == "max" else "1."})
        >>> ember.{name}(x, dim=1).indices
        tensor([{"1, 0" if name == "max" else "0, 1"}])
    """
    return meta


def _max_min_cpu(name, pointwise, np_fn, np_arg):
    def cpu(input, dim=None, keepdim=False, *, other=None):
        if isinstance(dim, Tensor):
            dim, other = None, dim
        if other is not None:
            return _op(pointwise).kernels["cpu"](input, other)
        data = _upcast(input._data)
        if dim is None:
            return _finish(np_fn(data), input._data.dtype)
        if data.ndim == 0:
            return _finish(data, input._data.dtype).copy(), np.zeros((), _I64)
        d = wrap_dim(dim, data.ndim)
        values = _finish(np_fn(data, axis=d, keepdims=keepdim), input._data.dtype)
        return values, _finish(np_arg(data, axis=d, keepdims=keepdim), _I64)

    return cpu


def _max_min_decomp(name, pointwise, extreme, arg, meta):
    def decomposition(input, dim=None, keepdim=False, *, other=None):
        meta(input, dim, keepdim, other=other)
        if isinstance(dim, Tensor):
            dim, other = None, dim
        if other is not None:
            return _op(pointwise)(input, other)
        if dim is None:
            return extreme(input)
        source = input if input.dtype is not D.bool else input.to(D.uint8)
        return (_max_type if name == "max" else _min_type)(extreme(input, dim, keepdim), arg(source, dim, keepdim))

    return decomposition


def _max_min_op(name, pointwise, np_fn, np_arg, extreme, arg, return_type):
    meta = _max_min_meta(name, pointwise)
    return defop(
        name, meta, cpu=_max_min_cpu(name, pointwise, np_fn, np_arg), category=COMPOSITE,
        decomposition=_max_min_decomp(name, pointwise, extreme, arg, meta), has_out=True, tags=_REDUCTION,
        return_type=return_type,
    )


max = _max_min_op("max", "maximum", np.max, np.argmax, amax, argmax, _max_type)  # noqa: A001
min = _max_min_op("min", "minimum", np.min, np.argmin, amin, argmin, _min_type)  # noqa: A001

_aminmax_type = _return_type("aminmax", ["min", "max"])


def _aminmax_meta(input, *, dim=None, keepdim=False):
    """The smallest and the largest element over ``dim`` (all by default), computed together.

    Args:
        input (Tensor): a real or bool tensor.
        dim (int, optional): the dim to reduce.
        keepdim (bool): keep the reduced dim(s) with size 1.

    Returns:
        tuple[Tensor, Tensor]: a namedtuple ``(min, max)``.

    Raises:
        RuntimeError: for complex inputs, or a full reduction of an empty tensor.
        IndexError: when the reduced dim has size 0.

    Example:
        >>> import ember
        >>> ember.aminmax(ember.tensor([3, 1, 4]))
        aminmax(min=tensor(1), max=tensor(4))
    """
    _check_tensor("aminmax", input)
    _check_not_complex("aminmax", input)
    data = input._data
    if dim is None:
        if data.size == 0:
            raise RuntimeError(
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
            )
        dims = _dims("aminmax", None, data.ndim)
    else:
        dims = (_one_dim("aminmax", dim, data.ndim),)
        _check_nonempty_dims("aminmax", data.shape, dims)
    shape = _out_shape(data.shape, dims, keepdim)
    return MetaArray(shape, data.dtype), MetaArray(shape, data.dtype)


def _aminmax_cpu(input, *, dim=None, keepdim=False):
    data = input._data
    dims = _dims("aminmax", dim, data.ndim)
    axis = _axis(data, dims)
    up = _upcast(data)
    return (_finish(np.min(up, axis=axis, keepdims=keepdim), data.dtype),
            _finish(np.max(up, axis=axis, keepdims=keepdim), data.dtype))


def _aminmax_decomp(input, *, dim=None, keepdim=False):
    _aminmax_meta(input, dim=dim, keepdim=keepdim)
    dims = () if dim is None else dim
    return _aminmax_type(amin(input, dims, keepdim), amax(input, dims, keepdim))


aminmax = defop("aminmax", _aminmax_meta, cpu=_aminmax_cpu, category=COMPOSITE, decomposition=_aminmax_decomp,
                has_out=True, tags=_REDUCTION, return_type=_aminmax_type)


# -- all, any, count_nonzero ---------------------------------------------------------------------------


def _logical_reduction(name, np_fn):
    def meta(input, dim=None, keepdim=False):
        _check_tensor(name, input)
        data = input._data
        dims = _dims(name, dim, data.ndim, empty_means_all=False)
        out = data.dtype if data.dtype == np.uint8 else np.dtype(np.bool_)
        return MetaArray(_out_shape(data.shape, dims, keepdim), out)

    def cpu(input, dim=None, keepdim=False):
        data = input._data
        dims = _dims(name, dim, data.ndim, empty_means_all=False)
        out = data.dtype if data.dtype == np.uint8 else np.dtype(np.bool_)
        if data.dtype in _BFLOAT16:
            data = data.astype(_F32)
        if not dims:
            return (data != 0).astype(out)
        return _finish(np_fn(data, axis=_axis(data, dims), keepdims=keepdim), out)

    meta.__name__ = name
    meta.__doc__ = f"""Whether {name} elements over ``dim`` are nonzero (over all dims by default).

    Args:
        input (Tensor): any dtype.
        dim (int or tuple of ints, optional): the dims to reduce; an empty tuple reduces none.
        keepdim (bool): keep the reduced dims with size 1.

    Returns:
        Tensor: bool, or uint8 for a uint8 input (as in PyTorch). ``all`` of nothing is True, ``any`` False.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([[True, False], [True, True]]), dim=1)
        tensor([{"False,  True" if name == "all" else "True, True"}])
    """
    return defop(name, meta, cpu=cpu, has_out=True, tags=_REDUCTION)


all = _logical_reduction("all", np.all)  # noqa: A001
any = _logical_reduction("any", np.any)  # noqa: A001


def _count_nonzero_meta(input, dim=None):
    """Number of nonzero elements over ``dim`` (all dims by default).

    Args:
        input (Tensor): any dtype.
        dim (int or tuple of ints, optional): the dims to reduce; ``None`` or ``()`` reduce all.

    Returns:
        Tensor: int64 counts.

    Example:
        >>> import ember
        >>> ember.count_nonzero(ember.tensor([[0, 1, 2], [0, 0, 3]]), dim=1)
        tensor([2, 1])
    """
    _check_tensor("count_nonzero", input)
    data = input._data
    dims = _dims("count_nonzero", dim, data.ndim)
    return MetaArray(_out_shape(data.shape, dims, False), _I64)


def _count_nonzero_cpu(input, dim=None):
    data = input._data
    dims = _dims("count_nonzero", dim, data.ndim)
    if data.dtype in _BFLOAT16:
        data = data.astype(_F32)
    return _finish(np.count_nonzero(data, axis=_axis(data, dims)), _I64)


def _count_nonzero_decomp(input, dim=None):
    _count_nonzero_meta(input, dim)
    return sum(_op("ne")(input, 0), dim)


count_nonzero = defop("count_nonzero", _count_nonzero_meta, cpu=_count_nonzero_cpu, category=COMPOSITE,
                      decomposition=_count_nonzero_decomp, tags=_REDUCTION)


# -- logsumexp, norm -------------------------------------------------------------------------------------


def _logsumexp_meta(input, dim, keepdim=False):
    """``log(sum(exp(input), dim))``, computed stably (the largest value is factored out).

    Args:
        input (Tensor): any dtype; integer and bool inputs give the default float dtype.
        dim (int or tuple of ints): the dims to reduce.
        keepdim (bool): keep the reduced dims with size 1.

    Returns:
        Tensor: ``-inf`` for an empty reduction.

    Example:
        >>> import ember
        >>> ember.logsumexp(ember.tensor([[0., 0.], [1., 1.]]), dim=1)
        tensor([0.6931, 1.6931])
    """
    _check_tensor("logsumexp", input)
    data = input._data
    dims = _dims("logsumexp", dim, data.ndim)
    out = input.dtype if input.dtype.category >= D.FLOATING else D.get_default_dtype()
    return MetaArray(_out_shape(data.shape, dims, keepdim), out.numpy_dtype)


def _logsumexp_cpu(input, dim, keepdim=False):
    data = input._data
    dims = _dims("logsumexp", dim, data.ndim)
    out = input.dtype if input.dtype.category >= D.FLOATING else D.get_default_dtype()
    x = _upcast(data.astype(out.numpy_dtype) if data.dtype != out.numpy_dtype else data)
    axis = _axis(x, dims)
    with np.errstate(all="ignore"):
        shift = np.max(x.real, axis=axis, keepdims=True, initial=-np.inf)
        shift = np.where(np.isfinite(shift), shift, 0).astype(x.real.dtype)
        total = np.sum(np.exp(x - shift), axis=axis, keepdims=keepdim)
        result = np.log(total) + (shift if keepdim else shift.reshape(total.shape))
    return _finish(result, out.numpy_dtype)


def _logsumexp_decomp(input, dim, keepdim=False):
    _logsumexp_meta(input, dim, keepdim)
    if input.dtype.category < D.FLOATING:
        input = input.to(D.get_default_dtype())
    shape = tuple(input.shape)
    dims = _dims("logsumexp", dim, input.ndim)
    if _count(shape, dims) == 0:  # an empty sum: log(0)
        return _op("full")(_out_shape(shape, dims, keepdim), -math.inf, dtype=input.dtype, device=input.device)
    shift = amax(_op("real")(input) if input.dtype.is_complex else input, dim, True)
    shift = _op("where")(_op("isfinite")(shift), shift, 0)
    total = sum(_op("exp")(_op("sub")(input, shift)), dim, keepdim)
    if not keepdim:
        shift = _op("reshape")(shift, _out_shape(shape, dims, False))
    return _op("add")(_op("log")(total), shift)


logsumexp = defop("logsumexp", _logsumexp_meta, cpu=_logsumexp_cpu, category=COMPOSITE,
                  decomposition=_logsumexp_decomp, has_out=True, tags=_REDUCTION)


def _norm_plan(input, p, dim, keepdim, dtype):
    """Check ``norm``'s arguments; return ("vector", ord, dims) or ("nuclear", None, dims), and the result dtype."""
    _check_tensor("norm", input)
    _check_dtype_arg("norm", dtype)
    ndim = input._data.ndim
    if isinstance(dim, (tuple, list)):
        dim_list = list(dim)
    elif dim is None:
        dim_list = None
    else:
        dim_list = [dim]
    if isinstance(p, str):
        if p == "fro" and (dim_list is None or len(dim_list) <= 2):
            kind, ord_ = "vector", 2.0
        elif p in ("fro", "nuc"):
            kind, ord_ = ("nuclear" if p == "nuc" else "frobenius"), None
        else:
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    else:
        if p is None:
            p = 2.0
        if not isinstance(p, (int, float)) or isinstance(p, bool):
            raise TypeError(f"norm(): argument 'p' must be a number or a string, not {type(p).__name__}")
        kind, ord_ = "vector", float(p)
    if kind == "vector":
        out = _vector_norm_dtype(input, dtype)
        dims = _dims("norm", dim_list, ndim)
        shape = input._data.shape
        if ord_ < 0 or ord_ == math.inf:
            if input._data.size == 0 and dim_list in (None, []):
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {_fmt_ord(ord_)} norm on an empty tensor because the "
                    "operation does not have an identity"
                )
            for d in dims:
                if shape and shape[d] == 0:
                    raise RuntimeError(
                        f"linalg.vector_norm cannot compute the {_fmt_ord(ord_)} norm on the dimension {d} because "
                        "this dimension is empty and the operation does not have an identity"
                    )
        return kind, ord_, dims, out
    # matrix norms: over exactly two dims
    if ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    dims_given = list(range(ndim)) if dim_list is None else dim_list
    if len(dims_given) != 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got " + " ".join(str(d) for d in dims_given))
    dims = _dims("norm", dims_given, ndim)
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(
            f"linalg.matrix_norm: Expected a floating point or complex tensor as input. Got {_torch_name(input.dtype)}"
        )
    if input.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"linalg.matrix_norm: Low precision dtypes not supported. Got {_torch_name(input.dtype)}")
    out = _vector_norm_dtype(input, dtype)
    return kind, ord_, dims, out


def _fmt_ord(ord_):
    if ord_ in (math.inf, -math.inf):
        return "inf" if ord_ > 0 else "-inf"
    return f"{ord_:g}"


def _vector_norm_dtype(input, dtype):
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {_torch_name(input.dtype)}"
        )
    if dtype is None:
        return input.dtype.to_real()
    if dtype.category < D.FLOATING:
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be floating point or complex, but got {_torch_name(dtype)}"
        )
    if input.dtype.is_complex and not dtype.is_complex:
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be complex for complex inputs, but got {_torch_name(dtype)}"
        )
    if D.promote_types(input.dtype, dtype) is not dtype:
        raise RuntimeError(
            f"linalg.vector_norm: the dtype of the input ({_torch_name(input.dtype)}) should be convertible without "
            f"narrowing to the specified dtype ({_torch_name(dtype)})"
        )
    return dtype.to_real()


def _norm_meta(input, p="fro", dim=None, keepdim=False, *, dtype=None):
    """The vector or matrix norm of ``input`` (PyTorch's ``torch.norm``).

    * ``p`` a number (or ``None`` = 2): the vector p-norm over ``dim`` (every element by default):
      ``sum(|x|^p)^(1/p)``; ``inf``/``-inf`` give ``max``/``min(|x|)``, ``0`` the count of nonzeros.
    * ``p="fro"``: the Frobenius norm (the 2-norm of the elements) over up to two dims.
    * ``p="nuc"``: the nuclear norm (sum of singular values) over two dims (all of a 2-D input).

    Args:
        input (Tensor): floating or complex.
        p (int, float, inf, "fro" or "nuc"): the order.
        dim (int or tuple of ints, optional): the dims to reduce.
        keepdim (bool): keep the reduced dims with size 1.
        dtype (ember.dtype, optional): compute in this dtype (no narrowing of ``input``'s dtype).

    Returns:
        Tensor: real (complex inputs give their real dtype).

    Raises:
        RuntimeError: for integer or bool inputs, an unknown order, a matrix norm over other than two dims,
            or an ``inf``/negative norm of an empty reduction.

    Example:
        >>> import ember
        >>> ember.norm(ember.tensor([3., 4.]))
        tensor(5.)
        >>> ember.norm(ember.tensor([[1., -2.], [3., 0.]]), p=1, dim=1)
        tensor([3., 3.])
    """
    kind, _, dims, out = _norm_plan(input, p, dim, keepdim, dtype)
    return MetaArray(_out_shape(input._data.shape, dims, keepdim), out.numpy_dtype)


def _norm_cpu(input, p="fro", dim=None, keepdim=False, *, dtype=None):
    kind, ord_, dims, out = _norm_plan(input, p, dim, keepdim, dtype)
    data = input._data
    if dtype is not None and data.dtype != dtype.numpy_dtype:
        data = data.astype(dtype.numpy_dtype)
    data = _upcast(data)
    if kind == "nuclear":
        return _finish(_nuclear_norm(data, dims, keepdim), out.numpy_dtype)
    axis = _axis(data, dims)
    if ord_ == 2.0 and data.dtype.kind == "f":
        with np.errstate(all="ignore"):
            if len(dims) == data.ndim and data.flags.c_contiguous:  # every element: one BLAS dot product
                flat = data.reshape(-1)
                total = _as_array(np.dot(flat, flat))
                result = np.sqrt(total.reshape((1,) * data.ndim) if keepdim else total)
            elif type(data) is np.ndarray:
                result = np.sqrt(np.add.reduce(data * data, axis=axis, keepdims=keepdim))
            else:  # CuPy (its ufuncs' reduce method is not general)
                result = np.sqrt(np.sum(data * data, axis=axis, keepdims=keepdim))
        return _finish(result, out.numpy_dtype)
    x = np.abs(data)
    with np.errstate(all="ignore"):
        if ord_ == 2.0:
            result = np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdim))
        elif ord_ == 1.0:
            result = np.sum(x, axis=axis, keepdims=keepdim)
        elif ord_ == math.inf:
            result = np.max(x, axis=axis, keepdims=keepdim)
        elif ord_ == -math.inf:
            result = np.min(x, axis=axis, keepdims=keepdim)
        elif ord_ == 0.0:
            result = np.sum(x != 0, axis=axis, keepdims=keepdim, dtype=x.dtype)
        else:
            result = np.power(np.sum(np.power(x, ord_), axis=axis, keepdims=keepdim), 1.0 / ord_)
    return _finish(result, out.numpy_dtype)


def _nuclear_norm(data, dims, keepdim):
    d0, d1 = dims
    moved = np.moveaxis(data, (d0, d1), (-2, -1))
    xp = _array_namespace(data)
    if moved.size == 0:
        result = xp.zeros(moved.shape[:-2], dtype=moved.real.dtype)
    else:
        result = xp.linalg.svd(moved, compute_uv=False).sum(-1)
    if keepdim:
        result = np.expand_dims(result, (d0, d1))
    return result


def _norm_decomp(input, p="fro", dim=None, keepdim=False, *, dtype=None):
    kind, ord_, dims, out = _norm_plan(input, p, dim, keepdim, dtype)
    if kind == "nuclear":
        raise NotImplementedError("norm(p='nuc') needs singular values; no decomposition into ember ops")
    if dtype is not None:
        input = input.to(dtype)
    x = _op("abs")(input)
    if ord_ == math.inf:
        return amax(x, dims, keepdim)
    if ord_ == -math.inf:
        return amin(x, dims, keepdim)
    if ord_ == 0.0:
        return sum(_op("ne")(x, 0), dims, keepdim, dtype=out)
    if ord_ == 1.0:
        return sum(x, dims, keepdim)
    return _op("pow")(sum(_op("pow")(x, ord_), dims, keepdim), 1.0 / ord_)


norm = defop("norm", _norm_meta, cpu=_norm_cpu, category=COMPOSITE, decomposition=_norm_decomp, has_out=True,
             tags=_REDUCTION)
_cuda_runs_cpu_kernel(norm)  # the nuclear norm needs singular values (xp.linalg.svd), which no ember op gives


# -- scans: cumsum, cumprod, cummax, cummin, logcumsumexp -------------------------------------------------


def _cum_op(name, np_fn, c_kernel):
    def meta(input, dim, *, dtype=None):
        _check_tensor(name, input)
        _check_dtype_arg(name, dtype)
        _one_dim(name, dim, input._data.ndim)
        return MetaArray(input._data.shape, _sum_dtype(input, dtype).numpy_dtype)

    def cpu(input, dim, *, dtype=None):
        data = input._data
        out = _sum_dtype(input, dtype).numpy_dtype
        if data.dtype != out:
            data = data.astype(out)
        if data.ndim == 0:
            return data.copy()
        if out in _C_DTYPES:  # (float16/bfloat16 accumulate in float32 below, as PyTorch's do)
            result = _c_scan(c_kernel, data, wrap_dim(dim, data.ndim))
            if result is not None:
                return result
        acc = _F32 if out in _LOW_FLOATS else out
        with np.errstate(all="ignore"):
            return _finish(np_fn(data, axis=wrap_dim(dim, data.ndim), dtype=acc), out)

    meta.__name__ = name
    word = "sum" if name == "cumsum" else "product"
    meta.__doc__ = f"""Cumulative {word} along ``dim``: element ``i`` combines elements ``0..i``.

    Args:
        input (Tensor): any dtype.
        dim (int): the dim to scan.
        dtype (ember.dtype, optional): cast ``input`` to this dtype first.

    Returns:
        Tensor: ``input``'s shape; bool and integer inputs give int64 (unless ``dtype``).

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1, 2, 3, 4]), dim=0)
        tensor([ {"1,  3,  6, 10" if name == "cumsum" else "1,  2,  6, 24"}])
    """
    op = defop(name, meta, cpu=cpu, has_out=True, tags=_SCAN)
    make_inplace(op)
    return op


cumsum = _cum_op("cumsum", np.cumsum, _C.cumsum)
cumprod = _cum_op("cumprod", np.cumprod, _C.cumprod)

_cummax_type = _return_type("cummax", ["values", "indices"])
_cummin_type = _return_type("cummin", ["values", "indices"])


def _cum_extreme(name, ufunc, return_type):
    def meta(input, dim):
        _check_tensor(name, input)
        if input.dtype.is_complex:
            raise RuntimeError(f"{name}(): does not support complex input")
        data = input._data
        _one_dim(name, dim, data.ndim)
        return MetaArray(data.shape, data.dtype), MetaArray(data.shape, _I64)

    def cpu(input, dim):
        data = input._data
        xp = _array_namespace(data)
        if data.ndim == 0:
            return data.copy(), xp.zeros((), _I64)
        d = wrap_dim(dim, data.ndim)
        x = _upcast(data)
        values = _accumulate(ufunc, x, d)  # maximum/minimum propagate NaN
        reached = x == values
        if x.dtype.kind == "f":
            reached |= np.isnan(x) & np.isnan(values)
        shape = [1] * x.ndim
        shape[d] = x.shape[d]
        positions = np.where(reached, xp.arange(x.shape[d], dtype=_I64).reshape(shape), 0)
        # the last position (so far) where the running extreme was reached
        return _finish(values, data.dtype), _accumulate(np.maximum, positions, d)

    meta.__name__ = name
    word = "maximum" if name == "cummax" else "minimum"
    meta.__doc__ = f"""Running {word} along ``dim`` and where it was last reached.

    Among equal values the index moves to the latest one; once a NaN is met the values stay NaN and the
    index follows the latest NaN (PyTorch's CPU behaviour).

    Args:
        input (Tensor): a real or bool tensor.
        dim (int): the dim to scan.

    Returns:
        tuple[Tensor, Tensor]: a namedtuple ``(values, indices)``, indices int64.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1, 3, 2, 3]), dim=0).{"indices" if name == "cummax" else "values"}
        tensor([{"0, 1, 1, 3" if name == "cummax" else "1, 1, 1, 1"}])
    """
    return defop(name, meta, cpu=cpu, has_out=True, tags=_SCAN, return_type=return_type)


cummax = _cum_extreme("cummax", np.maximum, _cummax_type)
cummin = _cum_extreme("cummin", np.minimum, _cummin_type)


def _logcumsumexp_meta(input, dim):
    """Running ``log(sum(exp(x)))`` along ``dim``, computed stably.

    Args:
        input (Tensor): floating or complex.
        dim (int): the dim to scan.

    Raises:
        RuntimeError: for integer or bool inputs.

    Example:
        >>> import ember
        >>> ember.logcumsumexp(ember.tensor([0., 0., 0.]), dim=0)
        tensor([0.0000, 0.6931, 1.0986])
    """
    _check_tensor("logcumsumexp", input)
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(
            f"logcumsumexp(): expected a floating point or complex input, got {_torch_name(input.dtype)}"
        )
    data = input._data
    _one_dim("logcumsumexp", dim, data.ndim)
    return MetaArray(data.shape, data.dtype)


def _logcumsumexp_cpu(input, dim):
    data = input._data
    if data.ndim == 0:
        return data.copy()
    d = wrap_dim(dim, data.ndim)
    x = _upcast(data)
    with np.errstate(all="ignore"):
        if x.dtype.kind != "c":
            return _finish(_accumulate(np.logaddexp, x, d), data.dtype)
        return _complex_logcumsumexp(x, d)


def _complex_logaddexp(a, b):
    """``log(exp(a) + exp(b))`` of complex arrays as PyTorch computes it: ``hi + log1p(exp(lo - hi))``.

    ``hi`` is the operand with the larger real part. The imaginary part is not brought back into
    ``(-pi, pi]``, so a running sum keeps PyTorch's branch of the logarithm.
    """
    swap = a.real < b.real
    hi, lo = np.where(swap, b, a), np.where(swap, a, b)
    result = hi + np.log1p(np.exp(lo - hi))
    both_infinite = np.isinf(lo.real) & (lo.real == hi.real)
    if both_infinite.any():
        result = np.where(both_infinite & (lo.real < 0), lo, result)
        result = np.where(both_infinite & (lo.real > 0), np.log(np.exp(lo) + np.exp(hi)), result)
    return result


def _complex_logcumsumexp(x, d):
    """The running complex log-sum-exp along ``d``, step by step (vectorised over the other dims)."""
    moved = np.moveaxis(x, d, 0)
    out = np.empty_like(moved)
    if moved.shape[0]:
        out[0] = moved[0]
        for i in range(1, moved.shape[0]):
            out[i] = _complex_logaddexp(out[i - 1], moved[i])
    return np.moveaxis(out, 0, d).copy()


def _logcumsumexp_decomp(input, dim):
    _logcumsumexp_meta(input, dim)
    # Factor out the largest real part along ``dim``. For complex inputs the imaginary parts come out in
    # (-pi, pi], which may differ from the CPU kernel's (PyTorch's) branch by a multiple of 2*pi.
    if input.numel() == 0:
        return _op("clone")(input)
    shift = amax(_op("real")(input) if input.dtype.is_complex else input, dim, True)
    shift = _op("where")(_op("isfinite")(shift), shift, 0)
    return _op("add")(_op("log")(cumsum(_op("exp")(_op("sub")(input, shift)), dim)), shift)


logcumsumexp = defop("logcumsumexp", _logcumsumexp_meta, cpu=_logcumsumexp_cpu, category=COMPOSITE,
                     decomposition=_logcumsumexp_decomp, has_out=True, tags=_SCAN)
_cuda_runs_cpu_kernel(logcumsumexp)  # (the decomposition's complex branch of the logarithm differs)


# -- sorting: sort, argsort, msort, topk, kthvalue -------------------------------------------------------

_sort_type = _return_type("sort", ["values", "indices"])
_topk_type = _return_type("topk", ["values", "indices"])
_kthvalue_type = _return_type("kthvalue", ["values", "indices"])


def _sort_order(x, axis, descending):
    """Stable argsort of ``x`` along ``axis``: NaN last ascending and first descending; ties keep index order."""
    if x.dtype in _BFLOAT16:
        x = x.astype(_F32)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # sort the reversed array ascending and reverse the order: descending, equal values still in index order
    order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - np.flip(order, axis)


def _check_sortable(name, input):
    if input.dtype.is_complex:
        raise RuntimeError(f"{name}(): sort does not support complex dtypes")


def _sort_meta(input, dim=-1, descending=False, *, stable=False):
    """Sort ``input`` along ``dim``; a namedtuple ``(values, indices)``.

    The sort is always stable (equal values keep their order, ``stable`` is accepted for PyTorch
    compatibility). NaN sorts as the largest value: last ascending, first descending.

    Args:
        input (Tensor): a real or bool tensor.
        dim (int): the dim to sort along (the last by default).
        descending (bool): largest first.
        stable (bool): accepted; every sort is stable.

    Returns:
        tuple[Tensor, Tensor]: ``(values, indices)``, indices int64 into ``dim``.

    Raises:
        RuntimeError: for complex inputs.

    Example:
        >>> import ember
        >>> ember.sort(ember.tensor([3., 1., 2.]), descending=True)
        sort(values=tensor([3., 2., 1.]), indices=tensor([0, 2, 1]))
    """
    _check_tensor("sort", input)
    _check_sortable("sort", input)
    data = input._data
    _one_dim("sort", dim, data.ndim)
    return MetaArray(data.shape, data.dtype), MetaArray(data.shape, _I64)


def _sort_cpu(input, dim=-1, descending=False, *, stable=False):
    data = input._data
    if data.ndim == 0:
        return data.copy(), np.zeros((), _I64)
    d = wrap_dim(dim, data.ndim)
    order = _sort_order(data, d, descending)
    return np.take_along_axis(data, order, axis=d), order


sort = defop("sort", _sort_meta, cpu=_sort_cpu, has_out=True, tags=_SORT, return_type=_sort_type)


def _argsort_meta(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort ``input`` along ``dim`` (``sort(...).indices``; always stable).

    Example:
        >>> import ember
        >>> ember.argsort(ember.tensor([3., 1., 2.]))
        tensor([1, 2, 0])
    """
    _check_tensor("argsort", input)
    _check_sortable("argsort", input)
    data = input._data
    _one_dim("argsort", dim, data.ndim)
    return MetaArray(data.shape, _I64)


def _argsort_cpu(input, dim=-1, descending=False, *, stable=False):
    data = input._data
    if data.ndim == 0:
        return np.zeros((), _I64)
    return _sort_order(data, wrap_dim(dim, data.ndim), descending)


def _argsort_decomp(input, dim=-1, descending=False, *, stable=False):
    _argsort_meta(input, dim, descending, stable=stable)
    return sort(input, dim, descending, stable=stable)[1]


argsort = defop("argsort", _argsort_meta, cpu=_argsort_cpu, category=COMPOSITE, decomposition=_argsort_decomp,
                tags=_SORT)


def _msort_meta(input):
    """``input`` sorted along its first dim (``sort(input, dim=0).values``).

    Example:
        >>> import ember
        >>> ember.msort(ember.tensor([[3, 1], [2, 4]]))
        tensor([[2, 1],
                [3, 4]])
    """
    _check_tensor("msort", input)
    _check_sortable("msort", input)
    return MetaArray(input._data.shape, input._data.dtype)


def _msort_cpu(input):
    return _sort_cpu(input, 0)[0]


def _msort_decomp(input):
    _msort_meta(input)
    return sort(input, 0)[0]


msort = defop("msort", _msort_meta, cpu=_msort_cpu, category=COMPOSITE, decomposition=_msort_decomp, has_out=True,
              tags=_SORT)


def _dim_size(data, d):
    return data.shape[d] if data.ndim else 1


def _topk_meta(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or smallest) elements along ``dim``; a namedtuple ``(values, indices)``.

    NaN counts as the largest value. The result is always in sorted order (``sorted=False`` allows any
    order, so sorted is a valid answer).

    Args:
        input (Tensor): a real (not bool) tensor.
        k (int): how many, ``0 <= k <= input.size(dim)``.
        dim (int): the dim to select along (the last by default).
        largest (bool): the largest (True) or the smallest elements.
        sorted (bool): return them sorted (they always are).

    Raises:
        RuntimeError: for ``k`` out of range, or bool or complex inputs.

    Example:
        >>> import ember
        >>> ember.topk(ember.tensor([1., 5., 3., 4.]), 2)
        topk(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    _check_tensor("topk", input)
    k = _check_int("topk", k, "k")
    if input.dtype is D.bool:
        raise RuntimeError("topk does not support bool dtypes")
    _check_sortable("topk", input)
    data = input._data
    d = _one_dim("topk", dim, data.ndim)
    if not 0 <= k <= _dim_size(data, d):
        raise RuntimeError("selected index k out of range")
    shape = list(data.shape)
    if shape:
        shape[d] = k
    return MetaArray(tuple(shape), data.dtype), MetaArray(tuple(shape), _I64)


def _topk_cpu(input, k, dim=-1, largest=True, sorted=True):
    data = input._data
    if data.ndim == 0:
        return data.copy(), np.zeros((), _I64)
    d = wrap_dim(dim, data.ndim)
    n = data.shape[d]
    if 0 < k < n and n >= 64 and k * 8 <= n:
        # select the k candidates in linear time, then sort only them (in index order first, so that the
        # result is deterministic)
        x = _upcast(data)
        part = np.argpartition(x, n - k if largest else k - 1, axis=d)
        chosen = np.sort(np.take(part, np.arange(n - k, n) if largest else np.arange(k), axis=d), axis=d)
        order = np.take_along_axis(chosen, _sort_order(np.take_along_axis(x, chosen, axis=d), d, largest), axis=d)
    else:
        order = np.take(_sort_order(data, d, largest), np.arange(k), axis=d)
    return np.take_along_axis(data, order, axis=d), order


topk = defop("topk", _topk_meta, cpu=_topk_cpu, has_out=True, tags=_SORT, return_type=_topk_type)


def _kthvalue_meta(input, k, dim=-1, keepdim=False):
    """The ``k``-th smallest element along ``dim`` (``k`` counts from 1) and its index.

    Args:
        input (Tensor): a real (not bool) tensor.
        k (int): ``1 <= k <= input.size(dim)``.
        dim (int): the dim (the last by default).
        keepdim (bool): keep the reduced dim with size 1.

    Returns:
        tuple[Tensor, Tensor]: a namedtuple ``(values, indices)``. Among equal values the index is the
        one a stable sort puts at position ``k``, on every device (NaN counts as the largest value).
        PyTorch leaves that index unspecified: its CPU kernel returns whichever tie its quickselect
        leaves there, and on CUDA any of them, so the indices may differ from PyTorch's at ties;
        the values never do.

    Raises:
        RuntimeError: for ``k`` out of range, or bool or complex inputs.
        IndexError: when ``dim`` has size 0.

    Example:
        >>> import ember
        >>> ember.kthvalue(ember.tensor([4., 1., 3., 2.]), 2)
        kthvalue(values=tensor(2.), indices=tensor(3))
    """
    _check_tensor("kthvalue", input)
    k = _check_int("kthvalue", k, "k")
    if input.dtype is D.bool or input.dtype.is_complex:
        raise RuntimeError(f"kthvalue(): not implemented for {_torch_name(input.dtype)} inputs")
    data = input._data
    d = _one_dim("kthvalue", dim, data.ndim)
    _check_nonempty_dims("kthvalue", data.shape, (d,))
    if not 1 <= k <= _dim_size(data, d):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    shape = _out_shape(data.shape, (d,), keepdim)
    return MetaArray(shape, data.dtype), MetaArray(shape, _I64)


def _kthvalue_cpu(input, k, dim=-1, keepdim=False):
    data = input._data
    if data.ndim == 0:
        return data.copy(), np.zeros((), _I64)
    d = wrap_dim(dim, data.ndim)
    rows = _to_last(data, d)
    lead = rows.shape[:-1]
    rows = rows.reshape(math.prod(lead), rows.shape[-1])
    values, index = _select_rows(rows, np.full(rows.shape[0], k - 1, dtype=_I64))
    values, index = values.reshape(lead), index.reshape(lead)
    if keepdim:
        values, index = np.expand_dims(values, d), np.expand_dims(index, d)
    return values, index


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


def _kthvalue_decomp(input, k, dim=-1, keepdim=False):
    _kthvalue_meta(input, k, dim, keepdim)
    values, indices = sort(input, dim, stable=True)
    if input.ndim == 0:
        return _kthvalue_type(values, indices)
    d = wrap_dim(dim, input.ndim)
    values, indices = _op("narrow")(values, d, k - 1, 1), _op("narrow")(indices, d, k - 1, 1)
    if not keepdim:
        values, indices = _op("squeeze")(values, d), _op("squeeze")(indices, d)
    return _kthvalue_type(values, indices)


kthvalue = defop("kthvalue", _kthvalue_meta, cpu=_kthvalue_cpu, category=COMPOSITE, decomposition=_kthvalue_decomp,
                 has_out=True, tags=_SORT, return_type=_kthvalue_type)


# -- median, nanmedian, mode, quantile, nanquantile -------------------------------------------------------

_median_type = _return_type("median", ["values", "indices"])
_nanmedian_type = _return_type("nanmedian", ["values", "indices"])
_mode_type = _return_type("mode", ["values", "indices"])


def _median_op(name, ignore_nan, return_type):
    def meta(input, dim=None, keepdim=False):
        _check_tensor(name, input)
        if input.dtype is D.bool or input.dtype.is_complex:
            raise RuntimeError(f"{name}(): not implemented for {_torch_name(input.dtype)} inputs")
        data = input._data
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): 'keepdim' needs a 'dim'")
            return MetaArray((), data.dtype)
        d = _one_dim(name, dim, data.ndim)
        _check_nonempty_dims(name, data.shape, (d,))
        shape = _out_shape(data.shape, (d,), keepdim)
        return MetaArray(shape, data.dtype), MetaArray(shape, _I64)

    def cpu(input, dim=None, keepdim=False):
        data = input._data
        if dim is None:
            flat = data.reshape(-1)
            if flat.size == 0:  # PyTorch: NaN, or the smallest value of an integer dtype
                fill = np.nan if data.dtype.kind == "f" or data.dtype in _LOW_FLOATS else np.iinfo(data.dtype).min
                return np.full((), fill, dtype=data.dtype)
            values, _ = _median_rows(flat.reshape(1, -1), ignore_nan)
            return values.reshape(())
        d = wrap_dim(dim, data.ndim)
        rows = _to_last(data, d)
        lead = rows.shape[:-1]
        values, indices = _median_rows(rows.reshape(-1, rows.shape[-1]), ignore_nan)
        values, indices = values.reshape(lead), indices.reshape(lead)
        if keepdim and data.ndim:
            values, indices = np.expand_dims(values, d), np.expand_dims(indices, d)
        return values, indices

    meta.__name__ = name
    what = "ignoring NaN (NaN only where all are NaN)" if ignore_nan else "NaN if any element is NaN"
    meta.__doc__ = f"""The median of ``input`` ({what}): over all elements, or along ``dim`` with its index.

    For an even count this is the lower of the two middle values (no averaging, as in PyTorch).

    Args:
        input (Tensor): a real (not bool) tensor.
        dim (int, optional): the dim to reduce; without it, a zero-dim tensor of the median of all elements.
        keepdim (bool): keep the reduced dim with size 1.

    Returns:
        Tensor, or a namedtuple ``(values, indices)`` when ``dim`` is given. Among equal values the index is
        not specified (PyTorch's CPU kernel may return any of them).

    Raises:
        RuntimeError: for bool or complex inputs.
        IndexError: when ``dim`` has size 0.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([4., 1., 3., 2.]))
        tensor(2.)
    """
    return defop(name, meta, cpu=cpu, has_out=True, tags=_REDUCTION, return_type=return_type)


def _median_rows(rows, ignore_nan):
    """Lower median and its index of each row of a 2-D array (rows of length >= 1)."""
    n = rows.shape[1]
    if rows.dtype.kind == "f" or rows.dtype in _LOW_FLOATS:
        nans = np.isnan(rows).sum(axis=1)
    else:
        nans = _array_namespace(rows).zeros(rows.shape[0], dtype=_I64)
    valid = n - nans
    if ignore_nan:
        pos = np.where(valid > 0, (valid - 1) // 2, 0)
    else:  # a row with NaN: its first NaN (sorted last, in index order)
        pos = np.where(nans > 0, valid, (n - 1) // 2)
    return _select_rows(rows, pos.astype(_I64, copy=False))


median = _median_op("median", False, _median_type)
nanmedian = _median_op("nanmedian", True, _nanmedian_type)


def _mode_meta(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` and the index of its last occurrence.

    Among equally frequent values the smallest wins. The index is that of the last occurrence of the value
    (PyTorch's CPU kernel returns that one for small rows; for large rows it leaves the occurrence unspecified).

    Args:
        input (Tensor): a real or bool tensor.
        dim (int): the dim (the last by default).
        keepdim (bool): keep the reduced dim with size 1.

    Returns:
        tuple[Tensor, Tensor]: a namedtuple ``(values, indices)``.

    Raises:
        RuntimeError: for complex inputs.
        IndexError: when ``dim`` has size 0.

    Example:
        >>> import ember
        >>> ember.mode(ember.tensor([2, 1, 2, 3, 1, 2]))
        mode(values=tensor(2), indices=tensor(5))
    """
    _check_tensor("mode", input)
    if input.dtype.is_complex:
        raise RuntimeError("mode(): not implemented for complex inputs")
    data = input._data
    d = _one_dim("mode", dim, data.ndim)
    _check_nonempty_dims("mode", data.shape, (d,))
    shape = _out_shape(data.shape, (d,), keepdim)
    return MetaArray(shape, data.dtype), MetaArray(shape, _I64)


def _mode_cpu(input, dim=-1, keepdim=False):
    data = input._data
    d = wrap_dim(dim, data.ndim)
    rows = _to_last(data, d)
    lead = rows.shape[:-1]
    rows = rows.reshape(-1, rows.shape[-1])
    m, n = rows.shape
    xp = _array_namespace(rows)
    if m == 0:
        values, indices = xp.empty(0, data.dtype), xp.empty(0, _I64)
    else:
        order = _sort_order(rows, 1, False)
        ordered = np.take_along_axis(rows, order, axis=1)
        starts = xp.ones((m, n), dtype=bool)
        starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        flat_starts = np.flatnonzero(starts)  # runs of equal values, row by row
        lengths = np.diff(np.append(flat_starts, m * n))
        run_rows = flat_starts // n
        if xp is np:
            first_run = np.searchsorted(run_rows, xp.arange(m))
            longest = np.maximum.reduceat(lengths, first_run)
            candidates = np.flatnonzero(lengths == longest[run_rows])
            chosen = candidates[np.searchsorted(run_rows[candidates], xp.arange(m))]  # first (smallest) per row
        else:  # CuPy (no reduceat): sort the runs by (row, longest first), stably (smaller values first)
            key = run_rows * (n + 1) + (n - lengths)
            by_key = xp.argsort(key, kind="stable")
            chosen = by_key[xp.searchsorted(key[by_key], xp.arange(m, dtype=key.dtype) * (n + 1))]
        ends = flat_starts[chosen] + lengths[chosen] - 1  # stable order: the run's end is its largest index
        values = ordered.reshape(-1)[ends]
        indices = order.reshape(-1)[ends].astype(_I64, copy=False)
    values, indices = values.reshape(lead), indices.reshape(lead)
    if data.ndim == 0:
        return values.reshape(()).copy(), indices.reshape(())
    if keepdim:
        values, indices = np.expand_dims(values, d), np.expand_dims(indices, d)
    return values, indices


mode = defop("mode", _mode_meta, cpu=_mode_cpu, has_out=True, tags=_REDUCTION, return_type=_mode_type)

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_op(name, ignore_nan):
    def meta(input, q, dim=None, keepdim=False, *, interpolation="linear"):
        _check_tensor(name, input)
        if input.dtype not in (D.float32, D.float64):
            raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
        if isinstance(q, Tensor):
            if q.dtype is not input.dtype:
                raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
            if q.ndim > 1:
                raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
            if q.device.type != "meta":
                values = _data_for_checks(q)  # (CuPy: checked on the GPU, one bool read back)
                if values.size and not ((values >= 0) & (values <= 1)).all():
                    raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
            q_shape = tuple(q.shape)
        elif isinstance(q, (int, float)) and not isinstance(q, bool):
            if not 0 <= q <= 1:
                raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
            q_shape = ()
        else:
            raise TypeError(f"{name}(): argument 'q' must be Tensor or float, not {type(q).__name__}")
        if interpolation not in _INTERPOLATIONS:
            raise RuntimeError(
                f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, but got "
                f"{interpolation}"
            )
        data = input._data
        if data.size == 0:
            raise RuntimeError(f"{name}() input tensor must be non-empty")
        if dim is None:
            shape = (1,) * data.ndim if keepdim else ()
        else:
            d = _one_dim(name, dim, data.ndim)
            shape = _out_shape(data.shape, (d,), keepdim)
        return MetaArray(q_shape + shape, data.dtype)

    def cpu(input, q, dim=None, keepdim=False, *, interpolation="linear"):
        data = input._data
        if dim is None:
            rows, shape = data.reshape(1, -1), ((1,) * data.ndim if keepdim else ())
        else:
            d = wrap_dim(dim, data.ndim)
            moved = _to_last(data, d)
            rows = moved.reshape(-1, moved.shape[-1])
            shape = _out_shape(data.shape, (d,), keepdim)
        if type(data) is np.ndarray:
            q_array = q._host_array() if isinstance(q, Tensor) else np.asarray(q, dtype=data.dtype)
        else:  # CuPy: q's values stay on (or go to) the GPU
            q_array = _array_namespace(data).asarray(q._data if isinstance(q, Tensor) else np.asarray(q, data.dtype))
        result = _quantile_rows(rows, q_array.reshape(-1).astype(data.dtype), interpolation, ignore_nan)
        return result.reshape(tuple(q_array.shape) + shape).copy()

    meta.__name__ = name
    nan_doc = "NaNs are ignored (NaN only where a row is all NaN)" if ignore_nan else "a NaN makes the result NaN"
    meta.__doc__ = f"""The ``q``-quantiles of ``input`` along ``dim`` (of all elements if ``dim`` is None); {nan_doc}.

    Args:
        input (Tensor): float32 or float64, not empty.
        q (float or Tensor): quantiles in ``[0, 1]``: a number, or a 0-D/1-D tensor of ``input``'s dtype.
        dim (int, optional): the dim to reduce.
        keepdim (bool): keep the reduced dim(s) with size 1.
        interpolation (str): between the two nearest sorted values: ``"linear"``, ``"lower"``,
            ``"higher"``, ``"midpoint"`` or ``"nearest"`` (half-way goes to the even rank).

    Returns:
        Tensor: for a 1-D ``q`` its values index the first dim of the result.

    Raises:
        RuntimeError: for other dtypes, ``q`` out of range or of another dtype, an unknown interpolation,
            or an empty ``input``.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1., 2., 3., 4.]), ember.tensor([0.25, 0.5]))
        tensor([1.7500, 2.5000])
    """
    return defop(name, meta, cpu=cpu, has_out=True, tags=_REDUCTION)


def _quantile_rows(rows, qs, interpolation, ignore_nan):
    """Quantiles ``qs`` (shape (Q,)) of each row of ``rows`` (M, N): shape (Q, M)."""
    dtype = rows.dtype
    ordered = np.sort(rows, axis=1)  # NaN last
    n = rows.shape[1]
    nans = np.isnan(rows).sum(axis=1)
    if ignore_nan:
        last = (n - nans - 1).astype(dtype)  # rank of the last valid value; -1 for an all-NaN row
    else:
        last = _array_namespace(rows).full(rows.shape[0], n - 1, dtype=dtype)
    with np.errstate(all="ignore"):
        ranks = qs[:, None] * last[None, :]  # (Q, M), in the input's dtype as PyTorch
        if not ignore_nan:
            ranks = np.where(nans[None, :] > 0, n - 1, ranks)  # rows with NaN pick a NaN
        ranks = np.where(ranks < 0, n - 1, ranks)  # all-NaN rows (nanquantile): a NaN
        if interpolation == "lower":
            ranks = np.floor(ranks)
        elif interpolation == "higher":
            ranks = np.ceil(ranks)
        elif interpolation == "nearest":
            ranks = np.round(ranks)
        below = np.floor(ranks).astype(_I64)
        above = np.minimum(np.ceil(ranks).astype(_I64), n - 1)
        low = np.take_along_axis(ordered, below.T, axis=1).T
        if interpolation in ("lower", "higher", "nearest"):
            return low
        high = np.take_along_axis(ordered, above.T, axis=1).T
        weight = np.full_like(ranks, 0.5) if interpolation == "midpoint" else (ranks - below).astype(dtype)
        # lerp as PyTorch computes it: from the nearer end
        return np.where(weight < 0.5, low + weight * (high - low), high - (high - low) * (1 - weight)).astype(dtype)


quantile = _quantile_op("quantile", False)
nanquantile = _quantile_op("nanquantile", True)


# -- unique, unique_consecutive --------------------------------------------------------------------------


def _check_meta_data_dependent(name, input):
    if input.device.type == "meta":
        raise NotImplementedError(f"{name}(): the output shape is data-dependent, so meta tensors can't run it")


def _unique_check(name, input, dim, return_inverse, return_counts):
    """Check the arguments of unique/unique_consecutive; the outputs' metadata when they don't depend on values.

    Only an empty input has outputs of known sizes; otherwise meta tensors can't run the op.
    """
    _check_tensor(name, input)
    if input.dtype.is_complex:
        raise RuntimeError(f"{name}(): not implemented for {_torch_name(input.dtype)} inputs")
    data = input._data
    if dim is not None:
        if data.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        d = _one_dim(name, dim, data.ndim)
        if data.size == 0 and data.shape[d] != 0:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    if data.size:
        _check_meta_data_dependent(name, input)
        return None
    if dim is None:
        values, inverse = MetaArray((0,), data.dtype), MetaArray(data.shape, _I64)
    else:
        values, inverse = MetaArray(data.shape, data.dtype), MetaArray((0,), _I64)
    return _unique_outputs(values, inverse, MetaArray((0,), _I64), return_inverse, return_counts)


def _unique_meta(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of ``input`` (or distinct slices along ``dim``), sorted.

    Args:
        input (Tensor): a real or bool tensor.
        sorted (bool): accepted; the result is always sorted (as PyTorch's CPU kernel).
        return_inverse (bool): also return, for each element (slice), the index of its value in the result.
        return_counts (bool): also return how often each distinct value occurs.
        dim (int, optional): compare whole slices along this dim instead of elements.

    Returns:
        Tensor, or a tuple ``(output, inverse)``, ``(output, counts)`` or ``(output, inverse, counts)``.
        Each NaN is distinct from every other value.

    Raises:
        RuntimeError: for complex inputs.
        NotImplementedError: on the meta device, unless ``input`` is empty (the output size depends on the
            values).

    Example:
        >>> import ember
        >>> ember.unique(ember.tensor([3, 1, 3, 2]), return_counts=True)
        (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    return _unique_check("unique", input, dim, return_inverse, return_counts)


def _unique_outputs(values, inverse, counts, return_inverse, return_counts):
    if not (return_inverse or return_counts):
        return values
    result = (values,)
    if return_inverse:
        result += (inverse,)
    if return_counts:
        result += (counts,)
    return result


def _unique_cpu(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    data = input._data
    xp = _array_namespace(data)
    if dim is None:
        flat = _upcast(data.reshape(-1))
        order = np.argsort(flat, kind="stable")
        ordered = flat[order]
        starts = xp.ones(ordered.size, dtype=bool)
        starts[1:] = ordered[1:] != ordered[:-1]  # NaN != NaN: each NaN stays distinct
        values = ordered[starts].astype(data.dtype)
        group = np.cumsum(starts) - 1
        inverse = xp.empty(flat.size, dtype=_I64)
        inverse[order] = group
        counts = np.diff(np.append(np.flatnonzero(starts), flat.size)).astype(_I64)
        return _unique_outputs(values, inverse.reshape(data.shape), counts, return_inverse, return_counts)
    d = wrap_dim(dim, data.ndim)
    slices = np.moveaxis(data, d, 0)
    n = slices.shape[0]
    rows = _upcast(slices.reshape(n, math.prod(slices.shape[1:])))
    if n == 0:
        return _unique_outputs(np.moveaxis(slices, 0, d).copy(), xp.empty(0, _I64), xp.empty(0, _I64),
                               return_inverse, return_counts)
    order = _lexsort_rows(rows) if rows.shape[1] else xp.arange(n)  # lexicographic, stable
    ordered = rows[order]
    starts = xp.ones(n, dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    group = np.cumsum(starts) - 1
    inverse = xp.empty(n, dtype=_I64)
    inverse[order] = group
    counts = np.diff(np.append(np.flatnonzero(starts), n)).astype(_I64)
    values = np.moveaxis(slices[order[starts]], 0, d)
    return _unique_outputs(xp.ascontiguousarray(values), inverse, counts, return_inverse, return_counts)


def _lexsort_rows(rows):
    """The stable order that sorts the rows of a 2-D array lexicographically (first column most significant)."""
    if type(rows) is np.ndarray:
        return np.lexsort(rows.T[::-1])
    # CuPy: stable argsorts from the last column to the first (its lexsort is less general)
    xp = _array_namespace(rows)
    order = xp.arange(rows.shape[0])
    for column in range(rows.shape[1] - 1, -1, -1):
        order = order[xp.argsort(rows[order, column], kind="stable")]
    return order


unique = defop("unique", _unique_meta, cpu=_unique_cpu, tags=_SORT)


def _unique_consecutive_meta(input, return_inverse=False, return_counts=False, dim=None):
    """``input`` with each run of equal consecutive elements (or slices along ``dim``) kept once.

    Args:
        input (Tensor): a real or bool tensor.
        return_inverse (bool): also return, for each element (slice), the index of its run.
        return_counts (bool): also return each run's length.
        dim (int, optional): compare whole slices along this dim instead of elements (of the flattened input).

    Returns:
        Tensor, or a tuple with the inverse and/or the counts, as :func:`ember.unique`.

    Raises:
        RuntimeError: for complex inputs.
        NotImplementedError: on the meta device, unless ``input`` is empty (the output size depends on the
            values).

    Example:
        >>> import ember
        >>> ember.unique_consecutive(ember.tensor([1, 1, 2, 2, 1]))
        tensor([1, 2, 1])
    """
    return _unique_check("unique_consecutive", input, dim, return_inverse, return_counts)


def _unique_consecutive_cpu(input, return_inverse=False, return_counts=False, dim=None):
    data = input._data
    xp = _array_namespace(data)
    if dim is None:
        flat = data.reshape(-1)
        starts = xp.ones(flat.size, dtype=bool)
        starts[1:] = flat[1:] != flat[:-1]
        group = np.cumsum(starts, dtype=_I64) - 1
        counts = np.diff(np.append(np.flatnonzero(starts), flat.size)).astype(_I64)
        return _unique_outputs(flat[starts], group.reshape(data.shape), counts, return_inverse, return_counts)
    d = wrap_dim(dim, data.ndim)
    slices = np.moveaxis(data, d, 0)
    n = slices.shape[0]
    rows = slices.reshape(n, math.prod(slices.shape[1:]))
    starts = xp.ones(n, dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    group = np.cumsum(starts, dtype=_I64) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), n)).astype(_I64)
    values = xp.ascontiguousarray(np.moveaxis(slices[starts], 0, d))
    return _unique_outputs(values, group, counts, return_inverse, return_counts)


unique_consecutive = defop("unique_consecutive", _unique_consecutive_meta, cpu=_unique_consecutive_cpu, tags=_SORT)


# -- bincount, histc, histogram --------------------------------------------------------------------------


def _bincount_dtype(weights):
    if weights is None:
        return _I64
    return _F32 if weights.dtype is D.float32 else _F64


def _bincount_meta(input, weights=None, minlength=0):
    """Count each value of a 1-D non-negative integer tensor: ``result[v]`` = occurrences of ``v``.

    Args:
        input (Tensor): 1-D, integer (not bool), values ``>= 0``.
        weights (Tensor, optional): 1-D, ``input``'s length; sum these instead of counting 1s.
        minlength (int): the smallest length of the result.

    Returns:
        Tensor: of length ``max(max(input) + 1, minlength)``; int64 counts, or with ``weights`` float32
        (float32 weights) or float64 (any other).

    Raises:
        RuntimeError: for other shapes or dtypes, negative values or ``minlength``, or mismatched ``weights``.
        NotImplementedError: on the meta device, unless ``input`` is empty (the output size depends on the
            values).

    Example:
        >>> import ember
        >>> ember.bincount(ember.tensor([0, 2, 2, 3]))
        tensor([1, 0, 2, 1])
    """
    _check_tensor("bincount", input)
    minlength = _check_int("bincount", minlength, "minlength")
    if input.dtype.category != D.INTEGRAL:
        raise RuntimeError(f"bincount(): expected an integer input, got {_torch_name(input.dtype)}")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None:
        _check_tensor("bincount", weights, "weights", 2)
        if weights.ndim != 1 or weights.shape[0] != input.shape[0]:
            raise RuntimeError("weights should be 1-d and have the same length as input")
    if input._data.size == 0:
        return MetaArray((minlength,), _bincount_dtype(weights))
    _check_meta_data_dependent("bincount", input)
    if _data_for_checks(input).min() < 0:  # (CuPy: one reduction, one host read)
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    return None


def _bincount_cpu(input, weights=None, minlength=0):
    data = input._data
    # the length depends on the data, so the meta function cannot check it: refuse one past int64 here
    check_sizes((builtins.max(minlength, int(data.max()) + 1 if data.size else 0),), _F64)
    if weights is None:
        return np.bincount(data, minlength=minlength).astype(_I64, copy=False)
    w = weights._data
    w = w.real if w.dtype.kind == "c" else w
    out = _bincount_dtype(weights)
    return np.bincount(data, weights=w.astype(_F64), minlength=minlength).astype(out)


bincount = defop("bincount", _bincount_meta, cpu=_bincount_cpu, tags=_REDUCTION)


def _histc_meta(input, bins=100, min=0, max=0):
    """Histogram of ``input``'s elements in ``bins`` equal-width bins over ``[min, max]``.

    With ``min == max`` (the default) the data's own minimum and maximum are used (widened by 1 on
    each side if they are equal). Elements outside the range are ignored; the last bin includes ``max``.

    Args:
        input (Tensor): floating point.
        bins (int): the number of bins.
        min, max (float): the range.

    Returns:
        Tensor: the counts, of ``input``'s dtype, shape ``(bins,)``.

    Raises:
        RuntimeError: for ``bins <= 0``, ``min > max``, a non-finite range, or a non-floating input.

    Example:
        >>> import ember
        >>> ember.histc(ember.tensor([1., 2., 1.]), bins=4, min=0, max=3)
        tensor([0., 2., 1., 0.])
    """
    _check_tensor("histc", input)
    bins = _check_int("histc", bins, "bins")
    if input.dtype.category != D.FLOATING:
        raise RuntimeError(f"histc(): expected a floating point input, got {_torch_name(input.dtype)}")
    if bins <= 0:
        raise RuntimeError(f"ember.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("ember.histc: max must be larger than min")
    if min == max and input.device.type != "meta":
        _histc_range(_data_for_checks(input), min, max)
    elif not (math.isfinite(min) and math.isfinite(max)):
        raise RuntimeError(f"ember.histc: range of [{min}, {max}] is not finite")
    return MetaArray((bins,), input._data.dtype)


def _histc_range(data, low, high):
    """(low, high) for histc: the data's range when they are equal, widened when it is a point."""
    if low == high and data.size:
        low, high = np.min(data).item(), np.max(data).item()
    if low == high:
        low, high = low - 1, high + 1
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"ember.histc: range of [{low}, {high}] is not finite")
    return low, high


def _histc_cpu(input, bins=100, min=0, max=0):
    data = input._data
    low, high = _histc_range(data, min, max)
    dtype = data.dtype
    x = data.reshape(-1)
    edges = np.linspace(low, high, bins + 1).astype(dtype)
    left, right = edges[0], edges[-1]
    with np.errstate(all="ignore"):
        inside = (x >= left) & (x <= right)
        x = x[inside]
        # the bin by linear interpolation in the input's dtype, as PyTorch's histc
        pos = ((x - left) * dtype.type(bins) / (right - left)).astype(np.float64).astype(_I64)
    pos = np.minimum(pos, bins - 1)
    return np.bincount(pos, minlength=bins).astype(dtype)


histc = defop("histc", _histc_meta, cpu=_histc_cpu, has_out=True, tags=_REDUCTION)

_histogram_type = _return_type("histogram", ["hist", "bin_edges"])


def _histogram_meta(input, bins=100, *, range=None, weight=None, density=False):
    """Histogram of ``input``'s elements: a namedtuple ``(hist, bin_edges)``.

    Args:
        input (Tensor): float32 or float64.
        bins (int or Tensor): the number of equal-width bins, or the increasing bin edges (1-D, ``input``'s
            dtype). Each bin includes its left edge; the last also its right edge.
        range (tuple of float, optional): ``(min, max)`` for integer ``bins``; the data's range by default.
        weight (Tensor, optional): ``input``'s shape; sum these instead of counting 1s.
        density (bool): normalise so that the histogram integrates to 1.

    Returns:
        tuple[Tensor, Tensor]: ``(hist, bin_edges)`` of ``input``'s dtype.

    Raises:
        RuntimeError: for other dtypes, ``bins <= 0``, ``min > max``, a non-finite range, or edges or
            weights of another dtype or shape.

    Example:
        >>> import ember
        >>> ember.histogram(ember.tensor([1., 2., 1.]), bins=2, range=(0., 2.))
        histogram(hist=tensor([0., 3.]), bin_edges=tensor([0., 1., 2.]))
    """
    _check_tensor("histogram", input)
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"histogram(): expected a float or double input, got {_torch_name(input.dtype)}")
    if isinstance(bins, Tensor):
        if bins.dtype is not input.dtype:
            raise RuntimeError(
                "ember.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
                f"dtype {input.dtype.name} and bins for dimension 0 with dtype {bins.dtype.name}"
            )
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise RuntimeError("ember.histogramdd: bins tensor should have one dimension and at least 1 element")
        n_bins = bins.shape[0] - 1
    else:
        n_bins = _check_int("histogram", bins, "bins")
        if n_bins <= 0:
            raise RuntimeError(f"ember.histogramdd(): bins must be > 0, but got {n_bins} for dimension 0")
        if range is not None:
            low, high = range
            if low > high:
                raise RuntimeError(
                    f"ember.histogramdd: min should not exceed max, but got min {low} max {high} for dimension 0"
                )
            if not (math.isfinite(low) and math.isfinite(high)):
                raise RuntimeError(f"ember.histogramdd: dimension 0's range [{low}, {high}] is not finite")
        elif input.device.type != "meta":
            _histogram_range(_data_for_checks(input), None)
    if weight is not None:
        _check_tensor("histogram", weight, "weight")
        if tuple(weight.shape) != tuple(input.shape) or weight.dtype is not input.dtype:
            raise RuntimeError("ember.histogramdd: weight should have the same shape and dtype as input")
    dtype = input._data.dtype
    return MetaArray((n_bins,), dtype), MetaArray((n_bins + 1,), dtype)


_data_for_checks = _values_for_checks  # an array to check values on, without a host copy of a GPU array


def _histogram_range(data, range):
    if range is not None:
        low, high = float(range[0]), float(range[1])
    elif data.size:
        low, high = np.min(data).item(), np.max(data).item()
    else:
        low, high = 0.0, 1.0
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"ember.histogramdd: dimension 0's range [{low}, {high}] is not finite")
    if low == high:
        low, high = low - 0.5, high + 0.5
    return low, high


def _histogram_cpu(input, bins=100, *, range=None, weight=None, density=False):
    data = input._data
    dtype = data.dtype
    if isinstance(bins, Tensor):
        edges = bins._data.astype(dtype, copy=True)
    else:
        low, high = _histogram_range(data, range)
        edges = np.linspace(low, high, bins + 1).astype(dtype)
        if type(data) is not np.ndarray:  # computed on the host from the range (numbers), as on CPU
            edges = _array_namespace(data).asarray(edges)
    n_bins = edges.size - 1
    x = data.reshape(-1)
    w = None if weight is None else weight._data.reshape(-1)
    inside = (x >= edges[0]) & (x <= edges[-1])
    x = x[inside]
    pos = np.minimum(np.searchsorted(edges, x, side="right") - 1, n_bins - 1)
    hist = np.bincount(pos, weights=None if w is None else w[inside], minlength=n_bins).astype(dtype)
    if density:
        with np.errstate(all="ignore"):
            hist = hist / (hist.sum() * np.diff(edges))
    return hist.astype(dtype, copy=False), edges


histogram = defop("histogram", _histogram_meta, cpu=_histogram_cpu, has_out=True, tags=_REDUCTION,
                  return_type=_histogram_type)


# -- searchsorted, bucketize ------------------------------------------------------------------------------


def _check_searchable(name, t):
    if t.dtype is D.bool or t.dtype.is_complex:
        raise RuntimeError(f"{name}(): not implemented for {_torch_name(t.dtype)} inputs")


def _searchsorted_meta(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value of ``input``, the index where it would be inserted into ``sorted_sequence``.

    ``left`` (the default) gives the first position whose value is ``>= x``, ``right`` the first whose value
    is ``> x``. A NaN value is inserted at the end.

    Args:
        sorted_sequence (Tensor): increasing along its last dim; 1-D, or with leading dims equal to
            ``input``'s (one sequence per row).
        input (Tensor or Number): the values to place.
        out_int32 (bool): int32 instead of int64 indices.
        right (bool): search from the right (same as ``side="right"``).
        side (str, optional): ``"left"`` or ``"right"``.
        sorter (Tensor, optional): int64 indices that sort ``sorted_sequence`` (its argsort) if it is not sorted.

    Returns:
        Tensor: ``input``'s shape (zero-dim for a number).

    Raises:
        RuntimeError: for mismatched shapes, conflicting ``side`` and ``right``, a bad ``sorter``, or bool or
            complex tensors.

    Example:
        >>> import ember
        >>> ember.searchsorted(ember.tensor([1, 3, 5, 7]), ember.tensor([3, 6, 9]))
        tensor([1, 3, 4])
        >>> ember.searchsorted(ember.tensor([1, 3, 5, 7]), ember.tensor([3, 6, 9]), right=True)
        tensor([2, 3, 4])
    """
    _check_tensor("searchsorted", sorted_sequence, "sorted_sequence")
    _check_searchable("searchsorted", sorted_sequence)
    if isinstance(input, Tensor):
        _check_searchable("searchsorted", input)
        shape = tuple(input.shape)
    elif isinstance(input, (int, float)) and not isinstance(input, bool):
        shape = ()
    else:
        raise TypeError(f"searchsorted(): argument 'input' must be Tensor or Number, not {type(input).__name__}")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"ember.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(
                "ember.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
            )
    seq_shape = tuple(sorted_sequence.shape)
    if not seq_shape:
        raise RuntimeError(
            "ember.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension"
        )
    if len(seq_shape) > 1 and (len(shape) != len(seq_shape) or seq_shape[:-1] != shape[:-1]):
        raise RuntimeError(
            "ember.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
            f"tensor and input value tensor must match, but we got boundaries tensor {list(seq_shape)} and input value "
            f"tensor {list(shape)}"
        )
    if sorter is not None:
        _check_tensor("searchsorted", sorter, "sorter")
        if sorter.dtype is not D.int64:
            raise RuntimeError(
                f"ember.searchsorted(): sorter must be a tensor of long dtype but got dtype {_torch_name(sorter.dtype)}"
            )
        if tuple(sorter.shape) != seq_shape:
            raise RuntimeError(
                f"ember.searchsorted(): boundary and sorter must have the same size, but got boundary tensor "
                f"{list(seq_shape)}and got sorter tensor {list(sorter.shape)}"
            )
        if sorter.device.type != "meta":
            order = sorter._host_array()
            if order.size and (order.min() < 0 or order.max() >= seq_shape[-1]):
                raise RuntimeError("ember.searchsorted(): sorter index out of range")
    return MetaArray(shape, _I32 if out_int32 else _I64)


def _searchsorted_cpu(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    seq = sorted_sequence._data
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter._data, axis=-1)
    compute = D.result_type_of((sorted_sequence, input) if isinstance(input, Tensor) else (sorted_sequence,))
    if not isinstance(input, Tensor):
        compute = D.promote_types(compute, D.scalar_dtype(input))
    np_dtype = _upcast(np.empty(0, compute.numpy_dtype)).dtype
    seq = seq.astype(np_dtype, copy=False)
    values = input._data if isinstance(input, Tensor) else _array_namespace(seq).asarray(input)
    values = values.astype(np_dtype, copy=False)
    side = "right" if right or side == "right" else "left"
    out = _I32 if out_int32 else _I64
    if seq.ndim == 1:
        result = np.searchsorted(seq, values, side=side)
    else:
        # one sequence per row: count the entries that come before each value
        before = np.less(seq[..., None, :], values[..., :, None]) if side == "left" else \
            np.less_equal(seq[..., None, :], values[..., :, None])
        result = before.sum(axis=-1)
    if values.dtype.kind == "f":
        result = np.where(np.isnan(values), seq.shape[-1], result)  # NaN goes last, as PyTorch
    return _as_array(result).astype(out)


searchsorted = defop("searchsorted", _searchsorted_meta, cpu=_searchsorted_cpu, has_out=True, tags=_SORT)


def _bucketize_meta(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value of ``input`` between increasing 1-D ``boundaries``.

    ``right=False`` gives ``i`` with ``boundaries[i-1] < x <= boundaries[i]``; ``right=True`` gives
    ``boundaries[i-1] <= x < boundaries[i]`` (as ``searchsorted(boundaries, input, right=right)``).

    Args:
        input (Tensor or Number): the values.
        boundaries (Tensor): 1-D, increasing.
        out_int32 (bool): int32 instead of int64 indices.
        right (bool): which side of a boundary belongs to a bucket.

    Raises:
        RuntimeError: if ``boundaries`` is not 1-D.

    Example:
        >>> import ember
        >>> ember.bucketize(ember.tensor([0.5, 2., 9.]), ember.tensor([1., 2., 3.]))
        tensor([0, 1, 3])
    """
    _check_tensor("bucketize", boundaries, "boundaries", 2)
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _searchsorted_meta(boundaries, input, out_int32=out_int32, right=right)


def _bucketize_cpu(input, boundaries, *, out_int32=False, right=False):
    return _searchsorted_cpu(boundaries, input, out_int32=out_int32, right=right)


def _bucketize_decomp(input, boundaries, *, out_int32=False, right=False):
    _bucketize_meta(input, boundaries, out_int32=out_int32, right=right)
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


bucketize = defop("bucketize", _bucketize_meta, cpu=_bucketize_cpu, category=COMPOSITE,
                  decomposition=_bucketize_decomp, has_out=True, tags=_SORT)


# -- diff -----------------------------------------------------------------------------------------------


def _diff_plan(input, n, dim, prepend, append):
    """Check ``diff``'s arguments; return (dim, result dtype, result shape)."""
    _check_tensor("diff", input)
    n = _check_int("diff", n, "n")
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _one_dim("diff", dim, input.ndim)
    shape = list(input.shape)
    parts = [input]
    for extra in (prepend, append):
        if extra is None:
            continue
        _check_tensor("diff", extra, "prepend" if extra is prepend else "append")
        if extra.ndim != input.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        for i, (a, b) in enumerate(zip(input.shape, extra.shape)):
            if i != d and a != b:
                raise RuntimeError(
                    "diff expects the shape of tensor to prepend or append to match that of input except along the "
                    f"differencing dimension; input.size({i}) = {a}, but got tensor.size({i}) = {b}"
                )
        shape[d] += extra.shape[d]
        parts.append(extra)
    dtype = D.result_type_of(parts) if len(parts) > 1 else input.dtype
    shape[d] = builtins.max(0, shape[d] - n)
    return d, dtype, tuple(shape)


def _diff_meta(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``: ``out[i] = x[i + 1] - x[i]``, applied ``n`` times.

    Bool inputs give ``x[i + 1] != x[i]``. ``prepend``/``append`` are concatenated to ``input`` along ``dim``
    first (with type promotion).

    Args:
        input (Tensor): at least 1-D.
        n (int): how many times to difference (``>= 0``).
        dim (int): the dim (the last by default).
        prepend, append (Tensor, optional): same number of dims as ``input``, same sizes except along ``dim``.

    Returns:
        Tensor: ``n`` shorter along ``dim`` (at least empty).

    Raises:
        RuntimeError: for a zero-dim input, negative ``n``, or mismatched ``prepend``/``append``.

    Example:
        >>> import ember
        >>> ember.diff(ember.tensor([1, 3, 6, 10]))
        tensor([2, 3, 4])
    """
    _, dtype, shape = _diff_plan(input, n, dim, prepend, append)
    return MetaArray(shape, dtype.numpy_dtype)


def _diff_cpu(input, n=1, dim=-1, prepend=None, append=None):
    d, dtype, _ = _diff_plan(input, n, dim, prepend, append)
    np_dtype = dtype.numpy_dtype
    parts = [t._data.astype(np_dtype, copy=False) for t in (prepend, input, append) if t is not None]
    data = np.concatenate(parts, axis=d) if len(parts) > 1 else parts[0]
    if n == 0:
        return data.copy()
    with np.errstate(all="ignore"):
        return _finish(np.diff(data, n=n, axis=d), np_dtype)


def _diff_decomp(input, n=1, dim=-1, prepend=None, append=None):
    d, dtype, _ = _diff_plan(input, n, dim, prepend, append)
    parts = [t for t in (prepend, input, append) if t is not None]
    x = _op("cat")(parts, d) if len(parts) > 1 else input
    step = _op("logical_xor") if dtype is D.bool else _op("sub")
    for _ in builtins.range(n):
        length = x.shape[d]
        if length == 0:
            break
        x = step(_op("narrow")(x, d, 1, length - 1), _op("narrow")(x, d, 0, length - 1))
    return x if n else _op("clone")(x)


diff = defop("diff", _diff_meta, cpu=_diff_cpu, category=COMPOSITE, decomposition=_diff_decomp, has_out=True)
