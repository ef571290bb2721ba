"""OpInfos of the reductions (ember._ops.sums, variance, extrema, all_any, norms).

sum, nansum, prod, mean, nanmean, var, std, var_mean, std_mean, amax, amin, max, min, aminmax,
argmax, argmin, all, any, count_nonzero, logsumexp and norm. The references are written on purpose
in a different way from the kernels (see :mod:`._reduction_helpers`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES, FLOATING_TYPES, OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._reduction_helpers import (
    _FLOAT_COMPLEX,
    _NUMERIC,
    _REAL,
    _empty,
    _errors,
    _floats,
    _ints,
    _of,
    _quiet,
    _small_ints,
    _tensor,
    _wide,
    _with_nan,
)

_NO_COMPLEX_SUM = ALL_TYPES  # nansum and friends refuse complex on CPU


def _ax(a, dim):
    """numpy's ``axis`` for a PyTorch ``dim`` (None / () / int / list; zero-dim arrays: None)."""
    if dim is None or np.ndim(a) == 0:
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(dim) if dim else None
    return dim


_DIM_ERRORS = (
    (_floats(2, 3), (2,), {}, IndexError, r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    (_floats(2, 3), ((0, 0),), {}, RuntimeError, "dim 0 appears multiple times in the list of dims"),
)


# -- sum, nansum, prod, mean, nanmean ------------------------------------------------------------------


def _reduction_samples(opinfo, device, dtype, requires_grad, *, tuple_dims=True, dtype_arg=None, nan=False,
                       low=None, high=None):
    make = maker(device, dtype, requires_grad, low=low, high=high)

    def fix(t):
        return _with_nan(t, 1, 4) if nan else t

    yield SampleInput(fix(make((2, 3, 4))), name="full")
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make(()), (0,), {"keepdim": True}, name="zero-dim dim 0")
    yield SampleInput(fix(make((2, 3, 4))), (1,), name="dim")
    yield SampleInput(fix(make((2, 3, 4))), (-1, True), name="negative dim, keepdim")
    if tuple_dims:
        yield SampleInput(fix(make((2, 3, 4))), ((0, 2),), name="tuple dims")
        yield SampleInput(fix(make((3, 4))), (None, True), name="dim None, keepdim")
    yield SampleInput(make((0, 3)), name="empty")
    yield SampleInput(make((0, 3)), (0,), name="empty dim 0")
    yield SampleInput(make((0, 3)), (1,), name="empty dim 1")
    yield SampleInput(fix(make((3, 4), noncontiguous=True)), (1,), name="noncontiguous")
    yield SampleInput(fix(make((4, 3)).t()), (0,), name="transposed view")
    if dtype_arg is not None:
        target = dtype_arg(dtype)
        if target is not None:
            yield SampleInput(fix(make((3, 4))), (1,), {"dtype": target}, name="dtype")


def _sum_dtype_arg(dtype):
    return D.complex128 if dtype.is_complex else D.float64


def _sum_ref(np_fn):
    @_quiet
    def ref(a, dim=None, keepdim=False, *, dtype=None):
        if dtype is not None:
            a = np.asarray(a).astype(dtype.numpy_dtype)
        return np_fn(_wide(a), axis=_ax(a, dim), keepdims=keepdim)

    return ref


_SUM_ERRORS = _errors(*_DIM_ERRORS, (_floats(2), ("x",), {}, TypeError, "dim"))

register_opinfo(OpInfo(
    "sum", functools.partial(_reduction_samples, dtype_arg=_sum_dtype_arg), ref=_sum_ref(np.sum),
    error_inputs=_SUM_ERRORS,
))
register_opinfo(OpInfo(
    "nansum", functools.partial(_reduction_samples, dtype_arg=_sum_dtype_arg, nan=True), dtypes=_NO_COMPLEX_SUM,
    ref=_sum_ref(np.nansum),
    error_inputs=_errors(*_DIM_ERRORS, (_of([1j]), (), {}, RuntimeError, "nansum does not support complex")),
))
register_opinfo(OpInfo(
    "prod", functools.partial(_reduction_samples, tuple_dims=False, dtype_arg=_sum_dtype_arg, low=-2, high=2),
    ref=_sum_ref(np.prod),
    error_inputs=_errors((_floats(2, 3), ((0, 1),), {}, TypeError, "must be int"),
                         (_floats(2, 3), (2,), {}, IndexError, "Dimension out of range")),
))


def _mean_samples(opinfo, device, dtype, requires_grad, nan=False):
    yield from _reduction_samples(opinfo, device, dtype, requires_grad, nan=nan,
                                  dtype_arg=lambda d: D.complex128 if d.is_complex else D.float64)


def _mean_int_samples(opinfo, device, dtype, requires_grad):
    yield from _mean_samples(opinfo, device, dtype, requires_grad)
    # an integer input with a floating dtype= is allowed
    yield SampleInput(_small_ints((2, 3), D.int32, device), (1,), {"dtype": dtype}, name="int input, dtype")


_MEAN_ERRORS = _errors(
    (_ints(3), (), {}, RuntimeError, r"mean\(\): could not infer output dtype. Input dtype must be either a floating"),
    (_of([True]), (), {}, RuntimeError, "Input dtype must be either a floating point or complex dtype. Got: Bool"),
    (_floats(3), (), {"dtype": D.int64}, RuntimeError, "Optional dtype must be either a floating point or complex"),
    *_DIM_ERRORS,
)

register_opinfo(OpInfo("mean", _mean_int_samples, dtypes=_FLOAT_COMPLEX, ref=_sum_ref(np.mean),
                       error_inputs=_MEAN_ERRORS))
register_opinfo(OpInfo(
    "nanmean", functools.partial(_mean_samples, nan=True), dtypes=FLOATING_TYPES, ref=_sum_ref(np.nanmean),
    error_inputs=_errors(
        (_ints(3), (), {}, RuntimeError, r"nanmean\(\): expected input to have floating point or complex dtype"),
        (_of([1j]), (), {}, RuntimeError, "nansum does not support complex"),
    ),
))


# -- var, std, var_mean, std_mean -----------------------------------------------------------------------


def _var_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), name="full")
    yield SampleInput(make((2, 3, 4)), (1,), name="dim")
    yield SampleInput(make((2, 3, 4)), ((0, 2),), {"keepdim": True}, name="tuple dims, keepdim")
    yield SampleInput(make((3, 4)), (), {"correction": 0}, name="correction 0")
    yield SampleInput(make((3, 4)), (1,), {"correction": 2}, name="correction 2")
    yield SampleInput(make((3, 4)), (1,), {"correction": 0.5}, name="float correction")
    yield SampleInput(make((3, 4)), (False,), name="unbiased=False overload")
    yield SampleInput(make((3, 4)), (1, False, True), name="dim, unbiased, keepdim positional")
    yield SampleInput(make((3, 4)), (None,), {"keepdim": True, "correction": 0}, name="dim None, keepdim")
    yield SampleInput(make(()), (), {"correction": 0}, name="zero-dim")
    yield SampleInput(make((0, 3)), (1,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (1,), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (0,), name="transposed view")


def _var_args(dim=None, unbiased=None, keepdim=False, correction=None):
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, keepdim, correction


@_quiet
def _var_ref(a, *args, **kwargs):
    dim, keepdim, correction = _var_args(*args, **kwargs)
    x = _wide(a)
    axis = _ax(a, dim)
    n = x.size if axis is None else math.prod(x.shape[d] for d in np.atleast_1d(axis))
    dev = x - np.mean(x, axis=axis, keepdims=True)
    return np.sum(np.abs(dev) ** 2, axis=axis, keepdims=keepdim) / max(0, n - correction)


@_quiet
def _moments_ref(take_sqrt, a, *args, **kwargs):
    dim, keepdim, _ = _var_args(*args, **kwargs)
    spread = _var_ref(a, *args, **kwargs)
    return (np.sqrt(spread) if take_sqrt else spread), np.mean(_wide(a), axis=_ax(a, dim), keepdims=keepdim)


_VAR_ERRORS = _errors(
    (_ints(3), (), {}, RuntimeError, "std and var only support floating point and complex dtypes"),
    (_floats(3), (0, True), {"correction": 0}, TypeError, "either 'unbiased' or 'correction'"),
    *_DIM_ERRORS,
)

register_opinfo(OpInfo("var", _var_samples, dtypes=_FLOAT_COMPLEX, ref=_var_ref, error_inputs=_VAR_ERRORS))
register_opinfo(OpInfo("std", _var_samples, dtypes=_FLOAT_COMPLEX, ref=lambda *a, **k: np.sqrt(_var_ref(*a, **k)),
                       error_inputs=_VAR_ERRORS))
register_opinfo(OpInfo("var_mean", _var_samples, dtypes=_FLOAT_COMPLEX, ref=functools.partial(_moments_ref, False),
                       error_inputs=_VAR_ERRORS))
register_opinfo(OpInfo("std_mean", _var_samples, dtypes=_FLOAT_COMPLEX, ref=functools.partial(_moments_ref, True),
                       error_inputs=_VAR_ERRORS))


# -- amax, amin, max, min, aminmax, argmax, argmin -------------------------------------------------------


def _extreme_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), name="full")
    yield SampleInput(make((2, 3, 4)), (1,), name="dim")
    yield SampleInput(make((2, 3, 4)), ((0, 2), True), name="tuple dims, keepdim")
    yield SampleInput(make((2, 3, 4)), (None,), name="dim None")
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make((0, 3)), (1,), name="empty, non-empty dim")
    yield SampleInput(_small_ints((3, 5), dtype, device), (1,), name="ties")
    yield SampleInput(_with_nan(make((3, 4)), 1, 6), (1,), name="nan")
    yield SampleInput(make((3, 4), noncontiguous=True), (0,), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (-1,), name="transposed view")


def _extreme_ref(np_fn):
    def ref(a, dim=(), keepdim=False):
        return np_fn(_wide(a), axis=_ax(a, dim), keepdims=keepdim)

    return ref


def _extreme_errors(name):
    return _errors(
        (_empty(0, 3), (), {}, RuntimeError, f"{name}\\(\\): Expected reduction dim to be specified for input.numel"),
        (_empty(0, 3), (0,), {}, IndexError, f"{name}\\(\\): Expected reduction dim 0 to have non-zero size"),
        (_of([1j]), (), {}, RuntimeError, "complex"),
        *_DIM_ERRORS,
    )


for _name, _fn in (("amax", np.max), ("amin", np.min)):
    register_opinfo(OpInfo(_name, _extreme_samples, dtypes=_REAL, ref=_extreme_ref(_fn), error_inputs=_extreme_errors(_name)))


def _max_min_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), name="full")
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(_with_nan(make((5,)), 2), name="full, nan")
    yield SampleInput(make((2, 3, 4)), (1,), name="dim")
    yield SampleInput(make((2, 3, 4)), (-1, True), name="dim, keepdim")
    yield SampleInput(make((2, 3, 4)), (), {"dim": 0, "keepdim": True}, name="keyword dim")
    yield SampleInput(make(()), (0,), name="zero-dim dim 0")
    yield SampleInput(make((0, 3)), (1,), name="empty, non-empty dim")
    yield SampleInput(_small_ints((3, 5), dtype, device), (1,), name="ties: first index")
    yield SampleInput(_with_nan(make((3, 4)), 1, 3, 6), (1,), name="nan: first nan's index")
    yield SampleInput(make((3, 4), noncontiguous=True), (0,), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (1,), name="transposed view")
    if "maximum" in ember._ops.registry and "minimum" in ember._ops.registry:  # the pointwise ops (issue 3)
        yield SampleInput(make((2, 3)), (make((2, 3)),), name="elementwise")
        yield SampleInput(make((2, 1, 3)), (make((4, 3)),), name="elementwise broadcast")


def _max_min_ref(np_fn, np_arg, np_elementwise):
    def ref(a, dim=None, keepdim=False, *, other=None):
        if isinstance(dim, np.ndarray):
            return np_elementwise(_wide(a), _wide(dim))
        x = _wide(a)
        if dim is None:
            return np_fn(x)
        if x.ndim == 0:
            return x, np.int64(0)
        return np_fn(x, axis=dim, keepdims=keepdim), np_arg(x, axis=dim, keepdims=keepdim)

    return ref


def _max_min_errors(name):
    return _errors(
        (_empty(0, 3), (), {}, RuntimeError, f"{name}\\(\\): Expected reduction dim to be specified for input.numel"),
        (_empty(0, 3), (0,), {}, IndexError, f"{name}\\(\\): Expected reduction dim 0 to have non-zero size"),
        (_floats(2, 3), ((0, 1),), {}, TypeError, "must be int"),
        (_of([1j, 2j]), (0,), {}, RuntimeError, "complex"),
        (_floats(2, 3), (2,), {}, IndexError, "Dimension out of range"),
    )


register_opinfo(OpInfo("max", _max_min_samples, dtypes=_REAL, ref=_max_min_ref(np.max, np.argmax, np.maximum),
                       error_inputs=_max_min_errors("max")))
register_opinfo(OpInfo("min", _max_min_samples, dtypes=_REAL, ref=_max_min_ref(np.min, np.argmin, np.minimum),
                       error_inputs=_max_min_errors("min")))


def _aminmax_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), name="full")
    yield SampleInput(make((2, 3, 4)), (), {"dim": 1}, name="dim")
    yield SampleInput(make((2, 3, 4)), (), {"dim": -1, "keepdim": True}, name="dim, keepdim")
    yield SampleInput(make((3, 4)), (), {"keepdim": True}, name="full, keepdim")
    yield SampleInput(make(()), (), {"dim": 0}, name="zero-dim")
    yield SampleInput(make((0, 3)), (), {"dim": 1}, name="empty, non-empty dim")
    yield SampleInput(_with_nan(make((3, 4)), 5), (), {"dim": 1}, name="nan")
    yield SampleInput(make((3, 4), noncontiguous=True), (), {"dim": 0}, name="noncontiguous")


def _aminmax_ref(a, *, dim=None, keepdim=False):
    x = _wide(a)
    axis = _ax(a, dim)
    if axis is None and keepdim:
        axis = tuple(range(x.ndim))
    return np.min(x, axis=axis, keepdims=keepdim), np.max(x, axis=axis, keepdims=keepdim)


register_opinfo(OpInfo(
    "aminmax", _aminmax_samples, dtypes=_REAL, ref=_aminmax_ref,
    error_inputs=_errors(
        (_empty(0, 3), (), {}, RuntimeError, "cannot compute aminmax over an empty dimension"),
        (_empty(0, 3), (), {"dim": 0}, IndexError, "Expected reduction dim 0 to have non-zero size"),
        (_floats(2, 3), (), {"dim": (0,)}, TypeError, "must be int"),
    ),
))


def _arg_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), name="full")
    yield SampleInput(make((2, 3, 4)), (None, True), name="full, keepdim")
    yield SampleInput(make((2, 3, 4)), (1,), name="dim")
    yield SampleInput(make((2, 3, 4)), (-1, True), name="dim, keepdim")
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make(()), (0,), name="zero-dim dim 0")
    yield SampleInput(make((0, 3)), (1,), name="empty, non-empty dim")
    yield SampleInput(_small_ints((3, 5), dtype, device), (1,), name="ties: first index")
    yield SampleInput(_small_ints((15,), dtype, device), name="ties, full")
    yield SampleInput(_with_nan(make((3, 4)), 1, 3, 6), (1,), name="nan: first nan")
    yield SampleInput(make((3, 4), noncontiguous=True), (0,), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (1,), name="transposed view")


def _arg_ref(np_fn):
    def ref(a, dim=None, keepdim=False):
        x = _wide(a)
        if dim is None or x.ndim == 0:
            index = np.int64(np_fn(x))
            return np.reshape(index, (1,) * x.ndim) if keepdim else index
        return np_fn(x, axis=dim, keepdims=keepdim)

    return ref


def _arg_errors(name):
    return _errors(
        (_empty(0, 3), (), {}, IndexError, f"{name}\\(\\): Expected reduction dim to be specified"),
        (_empty(0, 3), (0,), {}, IndexError, "Expected reduction dim 0 to have non-zero size"),
        (_of([True, False]), (), {}, RuntimeError, "does not support bool"),
        (_floats(2, 3), ((0,),), {}, TypeError, "must be int"),
    )


register_opinfo(OpInfo("argmax", _arg_samples, dtypes=_NUMERIC, ref=_arg_ref(np.argmax), error_inputs=_arg_errors("argmax"),
                       supports_autograd=False))
register_opinfo(OpInfo("argmin", _arg_samples, dtypes=_NUMERIC, ref=_arg_ref(np.argmin), error_inputs=_arg_errors("argmin"),
                       supports_autograd=False))


# -- all, any, count_nonzero ---------------------------------------------------------------------------


def _logical_samples(opinfo, device, dtype, requires_grad):
    def make(shape, **kw):
        return _small_ints(shape, dtype, device, seed=len(shape), low=0, high=1, **kw)

    yield SampleInput(make((2, 3, 4)), name="full")
    yield SampleInput(make((2, 3, 4)), (1,), name="dim")
    yield SampleInput(make((2, 3, 4)), ((0, 2), True), name="tuple dims, keepdim")
    yield SampleInput(make((2, 3)), ((),), name="empty tuple: no reduction")
    yield SampleInput(make((3, 4)), (None, True), name="dim None, keepdim")
    yield SampleInput(_tensor(np.ones((3, 2)), dtype, device), (0,), name="all nonzero")
    yield SampleInput(_tensor(np.zeros(()), dtype, device), name="zero-dim")
    yield SampleInput(_tensor(np.zeros((0, 3)), dtype, device), name="empty")
    yield SampleInput(_tensor(np.zeros((0, 3)), dtype, device), (0,), name="empty dim 0")
    yield SampleInput(make((3, 4), noncontiguous=True), (1,), name="noncontiguous")


def _logical_ref(np_fn):
    def ref(a, dim=None, keepdim=False):
        nonzero = _wide(a) != 0
        if isinstance(dim, tuple) and not dim:
            result = nonzero
        else:
            result = np_fn(nonzero, axis=_ax(a, dim), keepdims=keepdim)
        return np.asarray(result).astype(np.uint8 if a.dtype == np.uint8 else np.bool_)

    return ref


register_opinfo(OpInfo("all", _logical_samples, ref=_logical_ref(np.all), error_inputs=_errors(*_DIM_ERRORS),
                       supports_autograd=False))
register_opinfo(OpInfo("any", _logical_samples, ref=_logical_ref(np.any), error_inputs=_errors(*_DIM_ERRORS),
                       supports_autograd=False))


def _count_nonzero_samples(opinfo, device, dtype, requires_grad):
    def make(shape, **kw):
        return _small_ints(shape, dtype, device, low=0, high=2, **kw)

    yield SampleInput(make((2, 3, 4)), name="full")
    yield SampleInput(make((2, 3, 4)), (1,), name="dim")
    yield SampleInput(make((2, 3, 4)), ((0, 2),), name="tuple dims")
    yield SampleInput(make((2, 3, 4)), (), {"dim": -1}, name="keyword dim")
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make((0, 3)), (0,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (1,), name="noncontiguous")


register_opinfo(OpInfo(
    "count_nonzero", _count_nonzero_samples, ref=lambda a, dim=None: np.count_nonzero(_wide(a), axis=_ax(a, dim)),
    error_inputs=_errors(*_DIM_ERRORS), supports_autograd=False,
))


# -- logsumexp, norm -------------------------------------------------------------------------------------


def _logsumexp_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), (1,), name="dim")
    yield SampleInput(make((2, 3, 4)), ((0, 2), True), name="tuple dims, keepdim")
    yield SampleInput(make(()), (0,), name="zero-dim")
    yield SampleInput(make((0, 3)), (0,), name="empty dim: -inf")
    yield SampleInput(make((3, 4), noncontiguous=True), (-1,), name="noncontiguous")
    if dtype.is_floating_point:
        import ember

        inf = float("inf")
        values = [[-inf, -inf, 1.0], [inf, 2.0, 0.0], [30.0, 31.0, 29.0]]
        yield SampleInput(ember.tensor(values, dtype=dtype, device=device), (1,), name="infinities, large")


@_quiet
def _logsumexp_ref(a, dim, keepdim=False):
    from scipy.special import logsumexp

    x = _wide(a)
    if x.dtype.kind in "biu":
        x = x.astype(np.float64)
    axis = _ax(a, dim)
    if x.size == 0:
        return np.full(np.sum(x, axis=axis, keepdims=keepdim).shape, -np.inf)
    return logsumexp(x, axis=axis, keepdims=keepdim)


register_opinfo(OpInfo("logsumexp", _logsumexp_samples, ref=_logsumexp_ref, error_inputs=_errors(*_DIM_ERRORS),
                       tolerances={D.complex64: (1e-5, 1e-5)}))


def _norm_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    inf = float("inf")
    yield SampleInput(make((3, 4)), name="default: Frobenius")
    yield SampleInput(make((2, 3, 4)), ("fro", (0, 2)), name="fro over two dims")
    for p in (1, 2, 3, 0.5, 0, -1, inf, -inf):
        yield SampleInput(make((3, 4)), (p,), name=f"p={p}")
    yield SampleInput(make((2, 3, 4)), (2, 1, True), name="dim, keepdim")
    yield SampleInput(make((2, 3, 4)), (inf, (0, 1)), name="inf over dims")
    yield SampleInput(make((2, 3, 4)), (None, -1), name="p None")
    yield SampleInput(make((3, 4)), (), {"keepdim": True}, name="keepdim")
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make((0, 3)), name="empty")
    yield SampleInput(make((0, 3)), (inf, 1), name="inf, empty result")
    yield SampleInput(make((3, 4), noncontiguous=True), (1, 1), name="noncontiguous")
    if dtype not in (D.float16, D.bfloat16):
        yield SampleInput(make((3, 4)), ("nuc",), name="nuclear")
        yield SampleInput(make((2, 3, 4)), ("nuc", (0, 2), True), name="nuclear over dims, keepdim")
    wider = {D.float16: D.float32, D.bfloat16: D.float64, D.float32: D.float64, D.complex64: D.complex128}.get(dtype)
    if wider is not None:
        yield SampleInput(make((3, 4)), (2, 1), {"dtype": wider}, name="dtype")


def _norm_ref(a, p="fro", dim=None, keepdim=False, *, dtype=None):
    x = _wide(a)
    if p == "nuc":
        dims = (0, 1) if dim is None else tuple(d % x.ndim for d in dim)
        moved = np.moveaxis(x, dims, (-2, -1))
        result = np.linalg.svd(moved, compute_uv=False).sum(-1)
        return np.expand_dims(result, dims) if keepdim else result
    p = 2 if p in ("fro", None) else p
    axis = _ax(a, dim)
    m = np.abs(x)
    if p == math.inf:
        return np.max(m, axis=axis, keepdims=keepdim)
    if p == -math.inf:
        return np.min(m, axis=axis, keepdims=keepdim)
    if p == 0:
        return np.sum(m != 0, axis=axis, keepdims=keepdim).astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.sum(m ** p, axis=axis, keepdims=keepdim) ** (1 / p)


register_opinfo(OpInfo(
    "norm", _norm_samples, dtypes=_FLOAT_COMPLEX, ref=_norm_ref,
    error_inputs=_errors(
        (_ints(3), (), {}, RuntimeError, "linalg.vector_norm: Expected a floating point or complex tensor as input"),
        (_floats(3), (), {"dtype": D.int64}, RuntimeError, "dtype should be floating point or complex"),
        (lambda ember, device: ember.ones(3, dtype=ember.float64, device=device), (), {"dtype": D.float32},
         RuntimeError, "should be convertible without narrowing"),
        (_floats(2, 2, 2), ("nuc",), {}, RuntimeError, "linalg.matrix_norm: dim must be a 2-tuple"),
        (_floats(2), ("nuc",), {}, RuntimeError, "must have at least 2 dimensions"),
        (_floats(2, 2), ("foo",), {}, RuntimeError, "Order foo not supported"),
        (_empty(0, 3), (float("inf"),), {}, RuntimeError, "cannot compute the inf norm on an empty tensor"),
        (_empty(0, 3), (-1, 0), {}, RuntimeError, "cannot compute the -1 norm on the dimension 0"),
    ),
))
