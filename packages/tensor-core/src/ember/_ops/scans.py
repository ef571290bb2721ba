"""Scans and differences along a dim: cumsum, cumprod, cummax, cummin, logcumsumexp and diff."""

from __future__ import annotations

import builtins

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import accumulate as _accumulate
from ._array_module import array_namespace as _array_namespace
from ._array_module import cuda_runs_cpu_kernel as _cuda_runs_cpu_kernel
from ._pointwise_helpers import _torch_name, make_inplace
from ._reduction_helpers import (
    _F32,
    _F64,
    _I64,
    _LOW_FLOATS,
    _check_dtype_arg,
    _check_int,
    _check_tensor,
    _finish,
    _one_dim,
    _op,
    _return_type,
    _sum_dtype,
    _upcast,
)
from ._registry import COMPOSITE, defop
from ._shapes import wrap_dim
from .extrema import amax

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["cumsum", "cumsum_", "cumprod", "cumprod_", "cummax", "cummin", "logcumsumexp", "diff"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


_SCAN = ("scan",)


# -- compiled kernels (ember._C) for sum, mean, cumsum and cumprod -----------------------------------------
# They take C-contiguous float32/float64/int64 arrays and return None for anything else (see
# csrc/reduce.cpp). Their float sums are blocked-pairwise with float64 block accumulators (at least as
# accurate as numpy's pairwise sum, and faster); their float32 scans accumulate in float64, as PyTorch's do.

_C_DTYPES = (_F32, _F64, _I64)


def _c_scan(kernel, data, d):
    """``kernel`` (ember._C.cumsum or cumprod) along dim ``d`` of an array, or None for other dtypes."""
    if type(data) is not np.ndarray:  # a CuPy array takes the numpy-namespace path
        return None
    return kernel(data if data.flags.c_contiguous else np.ascontiguousarray(data), d)


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
