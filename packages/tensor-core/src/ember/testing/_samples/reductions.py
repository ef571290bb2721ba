"""OpInfos of ember._ops.reductions: reductions, scans, sorting, unique, histograms, searching.

The references below are written on purpose in a different way from the kernels (Python loops over
rows, ``sorted`` with keys, numpy's own functions in float64), so that they check rather than repeat.

Ties: where PyTorch's CPU kernels leave the index among equal values unspecified (``sort`` without
``stable=True``, ``topk``, ``kthvalue``, ``median``/``nanmedian`` along a dim) the samples use
tensors of distinct values. ``mode`` can't avoid ties (the mode is a repeated value): its parity
check compares the values and takes PyTorch's index to be the last occurrence of the mode, which is
ember's rule (PyTorch returns the last one for small rows, an unspecified one for large rows).
"""

from __future__ import annotations

import cmath
import collections
import functools
import math
import warnings

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    ALL_TYPES,
    COMPLEX_TYPES,
    FLOATING_TYPES,
    INTEGRAL_TYPES,
    ErrorInput,
    OpInfo,
    SampleInput,
    register_opinfo,
)
from ._common import maker

_REAL = ALL_TYPES  # bool, integers, floats
_NUMERIC = INTEGRAL_TYPES + FLOATING_TYPES  # no bool, no complex
_FLOAT_COMPLEX = FLOATING_TYPES + COMPLEX_TYPES
_NO_COMPLEX_SUM = ALL_TYPES  # nansum and friends refuse complex on CPU
_FLOAT32_64 = (D.float32, D.float64)


# -- making inputs ---------------------------------------------------------------------------------------


def _tensor(array, dtype, device, noncontiguous=False):
    """A tensor of ``array``'s values as ``dtype``; optionally a non-contiguous view of the same values."""
    import ember

    array = np.asarray(array)
    if dtype.is_complex:
        array = array.astype(np.complex128)
    array = array.astype(dtype.numpy_dtype)
    if noncontiguous and array.ndim and array.size > 1:
        wide = np.zeros(array.shape[:-1] + (array.shape[-1] * 2,), dtype=array.dtype)
        wide[..., ::2] = array
        return ember.tensor(wide, device=device)[..., ::2]
    return ember.tensor(array, device=device)


def _distinct(shape, dtype, device, seed=0, noncontiguous=False):
    """A tensor of pairwise different values (so that indices among ties are never in question)."""
    n = math.prod(shape)
    base = np.random.default_rng(seed).permutation(n)
    if dtype is D.uint8:
        values = base
    elif dtype.category == D.INTEGRAL:
        values = base - n // 2
    else:
        values = (base - n // 2) * 0.5  # exact in float16 and bfloat16
    return _tensor(values.reshape(shape), dtype, device, noncontiguous)


def _small_ints(shape, dtype, device, seed=0, low=0, high=3, noncontiguous=False):
    """A tensor of few distinct integer values (many ties, zeros), in any dtype."""
    values = np.random.default_rng(seed).integers(low, high + 1, size=shape)
    if dtype is D.bool:
        values = values % 2
    return _tensor(values, dtype, device, noncontiguous)


def _with_nan(t, *flat_positions):
    """A copy of floating ``t`` with NaN at the given flat positions (unchanged for other dtypes)."""
    import ember

    if not (t.dtype.is_floating_point or t.dtype.is_complex) or t.dtype is D.bfloat16:
        # bfloat16 is left out: numpy's assert_array_equal (test_inputs_not_modified) sees its NaNs as different
        return t
    array = t.cpu().numpy().astype(np.complex128 if t.dtype.is_complex else np.float64)
    for p in flat_positions:
        array.reshape(-1)[p] = np.nan
    return ember.tensor(array.astype(t.dtype.numpy_dtype), device=t.device)


# -- reference helpers -----------------------------------------------------------------------------------


def _wide(a):
    """``a`` in the widest dtype of its kind: references compute in int64/float64/complex128."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def _ax(a, dim):
    """numpy's ``axis`` for a PyTorch ``dim`` (None / () / int / list; zero-dim arrays: None)."""
    if dim is None or np.ndim(a) == 0:
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(dim) if dim else None
    return dim


def _quiet(fn):
    """Run a reference with numpy's warnings (empty slices, 0/0) silenced."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)

    return run


def _along(a, dim, row_fn, keepdim=False):
    """Apply ``row_fn`` (1-D array -> tuple of scalars) to every row along ``dim``; stack each output."""
    a = np.asarray(a)
    if a.ndim == 0:
        return tuple(np.asarray(v) for v in row_fn(a.reshape(1)))
    moved = np.moveaxis(a, dim, -1)
    lead = moved.shape[:-1]
    rows = moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1])
    outs = [row_fn(r) for r in rows]
    count = len(outs[0]) if outs else len(row_fn(np.zeros(1, a.dtype)))
    results = []
    for i in range(count):
        col = np.array([o[i] for o in outs]).reshape(lead)
        if keepdim:
            col = np.expand_dims(col, dim % a.ndim)
        results.append(col)
    return tuple(results)


def _scan(a, dim, row_fn):
    """Apply ``row_fn`` (1-D -> tuple of 1-D arrays of the same length) along ``dim``."""
    a = np.asarray(a)
    if a.ndim == 0:
        return tuple(np.asarray(v).reshape(()) for v in row_fn(a.reshape(1)))
    moved = np.moveaxis(a, dim, -1)
    rows = moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1])
    outs = [row_fn(r) for r in rows]
    count = len(row_fn(np.zeros(1, a.dtype)))
    results = []
    for i in range(count):
        stacked = np.array([o[i] for o in outs]).reshape(moved.shape) if outs else np.zeros(moved.shape)
        results.append(np.moveaxis(stacked, -1, dim))
    return tuple(results)


class _Lazy:
    """A tensor argument of an error case, made when the case runs (on the device under test)."""

    def __init__(self, make):
        self.make = make

    def __call__(self, ember, device):
        return self.make(ember, device)


def _resolve(value, ember, device):
    return value(ember, device) if isinstance(value, _Lazy) else value


def _errors(*cases):
    """ErrorInputs from ``(input, args, kwargs, error, regex)``; :class:`_Lazy` values become tensors."""

    def gen(opinfo, device):
        import ember

        for make_input, args, kwargs, error, regex in cases:
            args = tuple(_resolve(a, ember, device) for a in args)
            kwargs = {k: _resolve(v, ember, device) for k, v in kwargs.items()}
            yield ErrorInput(SampleInput(make_input(ember, device), args, kwargs), error, regex)

    return gen


def _floats(*shape):
    return _Lazy(lambda ember, device: ember.ones(*shape, device=device))


def _ints(*shape):
    return _Lazy(lambda ember, device: ember.ones(*shape, dtype=ember.int64, device=device))


def _empty(*shape):
    return _Lazy(lambda ember, device: ember.zeros(*shape, device=device))


def _of(values, dtype=None):
    return _Lazy(lambda ember, device: ember.tensor(values, dtype=dtype, device=device))


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


# -- scans ----------------------------------------------------------------------------------------------


def _scan_samples(opinfo, device, dtype, requires_grad, *, low=None, high=None, dtype_arg=False):
    make = maker(device, dtype, requires_grad, low=low, high=high)
    yield SampleInput(make((3, 4)), (1,), name="dim 1")
    yield SampleInput(make((3, 4)), (0,), name="dim 0")
    yield SampleInput(make((2, 3, 4)), (-2,), name="negative dim")
    yield SampleInput(make((5,)), (0,), name="1-d")
    yield SampleInput(make(()), (0,), name="zero-dim")
    yield SampleInput(make((0, 3)), (0,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (1,), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (1,), name="transposed view")
    if dtype_arg and not dtype.is_complex:
        yield SampleInput(make((3, 4)), (1,), {"dtype": D.float64}, name="dtype")


def _cum_ref(np_fn):
    def ref(a, dim, *, dtype=None):
        if dtype is not None:
            a = np.asarray(a).astype(dtype.numpy_dtype)
        x = _wide(a)
        if x.ndim == 0:
            return x
        return np_fn(x, axis=dim)

    return ref


register_opinfo(OpInfo("cumsum", functools.partial(_scan_samples, dtype_arg=True), ref=_cum_ref(np.cumsum),
                       error_inputs=_errors((_floats(2, 3), ((0,),), {}, TypeError, "must be int"),
                                            (_floats(2, 3), (2,), {}, IndexError, "Dimension out of range"))))
register_opinfo(OpInfo("cumprod", functools.partial(_scan_samples, low=-2, high=2, dtype_arg=True),
                       ref=_cum_ref(np.cumprod),
                       error_inputs=_errors((_floats(2, 3), (2,), {}, IndexError, "Dimension out of range"))))


def _cum_extreme_samples(opinfo, device, dtype, requires_grad):
    yield from _scan_samples(opinfo, device, dtype, requires_grad)
    yield SampleInput(_small_ints((3, 7), dtype, device), (1,), name="ties: the latest index")
    make = maker(device, dtype, requires_grad, seed=3)
    yield SampleInput(_with_nan(make((2, 6)), 2, 4, 7), (1,), name="nan: the latest nan")


def _cum_extreme_ref(better):
    def row(values):
        out_v, out_i = [], []
        best, where = None, 0
        for i, v in enumerate(values.tolist()):
            if best is None or (isinstance(best, float) and math.isnan(best)):
                take = best is None or (isinstance(v, float) and math.isnan(v))
            else:
                take = (isinstance(v, float) and math.isnan(v)) or better(v, best) or v == best
            if take:
                best, where = v, i
            out_v.append(best)
            out_i.append(where)
        return np.array(out_v, dtype=values.dtype), np.array(out_i, dtype=np.int64)

    def ref(a, dim):
        return _scan(_wide(a), dim, row)

    return ref


register_opinfo(OpInfo("cummax", _cum_extreme_samples, dtypes=_REAL, ref=_cum_extreme_ref(lambda v, b: v > b),
                       error_inputs=_errors((_of([1j]), (0,), {}, RuntimeError, "complex"))))
register_opinfo(OpInfo("cummin", _cum_extreme_samples, dtypes=_REAL, ref=_cum_extreme_ref(lambda v, b: v < b),
                       error_inputs=_errors((_of([1j]), (0,), {}, RuntimeError, "complex"))))


def _logcumsumexp_samples(opinfo, device, dtype, requires_grad):
    yield from _scan_samples(opinfo, device, dtype, requires_grad, low=-3, high=3)
    if dtype.is_floating_point:
        import ember

        inf = float("inf")
        values = [[-inf, -inf, 1.0, -inf], [0.0, inf, 2.0, 1.0], [30.0, 31.0, 29.0, -20.0]]
        yield SampleInput(ember.tensor(values, dtype=dtype, device=device), (1,), name="infinities, large")


@_quiet
def _logcumsumexp_ref(a, dim):
    x = _wide(a)
    if x.ndim == 0:
        return x
    if x.dtype.kind == "c":
        return _scan(x, dim, _complex_logcumsumexp_row)[0]
    return np.logaddexp.accumulate(x, axis=dim)


def _complex_logcumsumexp_row(row):
    """PyTorch's complex recurrence ``s = hi + log1p(exp(lo - hi))`` (``hi``: the larger real part), one number
    at a time: the imaginary part is not wrapped into ``(-pi, pi]``, so it is PyTorch's branch of the log."""
    out, s = [], None
    for v in row.tolist():
        if s is None:
            s = v
        else:
            hi, lo = (v, s) if v.real > s.real else (s, v)
            s = hi + cmath.log(1 + cmath.exp(lo - hi))
        out.append(s)
    return (np.array(out, dtype=np.complex128),)


register_opinfo(OpInfo(
    "logcumsumexp", _logcumsumexp_samples, dtypes=_FLOAT_COMPLEX, ref=_logcumsumexp_ref,
    tolerances={D.complex64: (1e-5, 1e-5)},
    error_inputs=_errors((_ints(3), (0,), {}, RuntimeError, "floating point or complex")),
))


# -- sort, argsort, msort, topk, kthvalue ----------------------------------------------------------------


def _sort_samples(opinfo, device, dtype, requires_grad):
    def stable(**kw):
        return {"stable": True, **kw}

    if dtype is not D.bool:  # PyTorch's default (unstable) sort: distinct values only
        yield SampleInput(_distinct((3, 5), dtype, device), name="default")
        yield SampleInput(_distinct((3, 5), dtype, device, 1), (0, True), name="dim 0, descending")
        yield SampleInput(_distinct((2, 3, 4), dtype, device, 2), (1,), name="3-d")
        yield SampleInput(_distinct((3, 4), dtype, device, 3, noncontiguous=True), name="noncontiguous")
        yield SampleInput(_distinct((4, 3), dtype, device, 4).t(), (), {"descending": True}, name="transposed view")
    yield SampleInput(_small_ints((3, 9), dtype, device), (), stable(), name="stable, ties")
    yield SampleInput(_small_ints((3, 9), dtype, device, 1), (), stable(descending=True), name="stable, descending")
    yield SampleInput(_small_ints((9, 2), dtype, device, 2), (), stable(dim=0), name="stable, dim 0")
    make = maker(device, dtype, requires_grad)
    yield SampleInput(_with_nan(make((2, 6)), 1, 4, 8), (), stable(), name="nan last")
    yield SampleInput(_with_nan(make((2, 6)), 1, 4, 8), (), stable(descending=True), name="nan first descending")
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make((0, 3)), (), stable(dim=0), name="empty")


def _stable_order(row, descending):
    """Indices sorting ``row`` stably, NaN as the largest value (Python's sorted: a reference)."""
    values = row.tolist()

    def key(i):
        v = values[i]
        is_nan = isinstance(v, float) and math.isnan(v)
        return (is_nan, 0 if is_nan else v)

    return sorted(range(len(values)), key=key, reverse=descending)


def _sort_ref(a, dim=-1, descending=False, *, stable=False):
    x = _wide(a)

    def row(r):
        order = np.array(_stable_order(r, descending), dtype=np.int64)
        return r[order], order

    return _scan(x, dim, row)


_SORT_ERRORS = _errors((_of([1j, 2j]), (), {}, RuntimeError, "complex"),
                       (_floats(2, 3), (2,), {}, IndexError, "Dimension out of range"))

register_opinfo(OpInfo("sort", _sort_samples, dtypes=_REAL, ref=_sort_ref, error_inputs=_SORT_ERRORS))
register_opinfo(OpInfo("argsort", _sort_samples, dtypes=_REAL, ref=lambda *a, **k: _sort_ref(*a, **k)[1],
                       error_inputs=_SORT_ERRORS, supports_autograd=False))


def _msort_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 3)), name="2-d")
    yield SampleInput(_small_ints((6, 2), dtype, device), name="ties")
    yield SampleInput(make((5,)), name="1-d")
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(_with_nan(make((4, 2)), 2), name="nan")
    yield SampleInput(make((3, 4), noncontiguous=True), name="noncontiguous")


register_opinfo(OpInfo("msort", _msort_samples, dtypes=_REAL, ref=lambda a: _sort_ref(a, 0)[0],
                       error_inputs=_errors((_of([1j, 2j]), (), {}, RuntimeError, "complex"))))


def _topk_samples(opinfo, device, dtype, requires_grad):
    # PyTorch's order among equal values is unspecified: distinct values only
    yield SampleInput(_distinct((3, 6), dtype, device), (2,), name="largest")
    yield SampleInput(_distinct((3, 6), dtype, device, 1), (3, 1, False), name="smallest")
    yield SampleInput(_distinct((5, 4), dtype, device, 2), (2, 0), name="dim 0")
    yield SampleInput(_distinct((3, 6), dtype, device, 3), (6,), name="k = size")
    yield SampleInput(_distinct((3, 6), dtype, device, 4), (0,), name="k = 0")
    yield SampleInput(_distinct((2, 7), dtype, device, 5), (3,), {"sorted": False}, name="unsorted")
    yield SampleInput(_distinct((3, 4), dtype, device, 6, noncontiguous=True), (2,), name="noncontiguous")
    yield SampleInput(_distinct((4, 3), dtype, device, 7).t(), (1,), name="transposed view")
    yield SampleInput(_with_nan(_distinct((2, 5), dtype, device, 8), 3), (2,), name="nan is the largest")
    yield SampleInput(_distinct((1,), dtype, device).reshape(()), (1,), name="zero-dim")
    yield SampleInput(maker(device, dtype, requires_grad)((0, 3)), (2,), name="empty")


def _topk_ref(a, k, dim=-1, largest=True, sorted=True):
    values, indices = _sort_ref(a, dim, largest)
    if np.ndim(a) == 0:
        return values, indices
    return np.take(values, range(k), axis=dim), np.take(indices, range(k), axis=dim)


def _torch_topk(input, k, dim=-1, largest=True, sorted=True):
    """torch.topk, with ``sorted=False`` results put in sorted order (PyTorch leaves that order unspecified)."""
    import torch

    values, indices = torch.topk(input, k, dim, largest, sorted)
    if not sorted:
        values, order = torch.sort(values, dim=dim, descending=largest, stable=True)
        indices = torch.gather(indices, dim, order)
    return values, indices


register_opinfo(OpInfo(
    "topk", _topk_samples, dtypes=_NUMERIC, ref=_topk_ref, torch_fn=_torch_topk,
    error_inputs=_errors(
        (_floats(2, 3), (4,), {}, RuntimeError, "selected index k out of range"),
        (_floats(2, 3), (-1,), {}, RuntimeError, "selected index k out of range"),
        (_of([True, False]), (1,), {}, RuntimeError, "bool"),
        (_floats(2, 3), (1.5,), {}, TypeError, "must be int"),
    ),
))


def _kthvalue_samples(opinfo, device, dtype, requires_grad):
    # distinct values: PyTorch's index among equal values is unspecified
    yield SampleInput(_distinct((3, 6), dtype, device), (2,), name="k=2")
    yield SampleInput(_distinct((3, 6), dtype, device, 1), (6, 1, True), name="k = size, keepdim")
    yield SampleInput(_distinct((5, 4), dtype, device, 2), (1, 0), name="dim 0")
    yield SampleInput(_distinct((2, 3, 4), dtype, device, 3), (3, -1), name="3-d")
    yield SampleInput(_distinct((3, 4), dtype, device, 4, noncontiguous=True), (2,), name="noncontiguous")
    yield SampleInput(_with_nan(_distinct((2, 5), dtype, device, 5), 3), (5,), name="nan is the largest")
    yield SampleInput(_distinct((1,), dtype, device).reshape(()), (1,), name="zero-dim")
    yield SampleInput(maker(device, dtype, requires_grad)((0, 3)), (2,), name="empty, non-empty dim")


def _kthvalue_ref(a, k, dim=-1, keepdim=False):
    values, indices = _sort_ref(a, dim)
    if np.ndim(a) == 0:
        return values, indices
    take = (lambda x: np.take(x, [k - 1], axis=dim)) if keepdim else (lambda x: np.take(x, k - 1, axis=dim))
    return take(values), take(indices)


register_opinfo(OpInfo(
    "kthvalue", _kthvalue_samples, dtypes=_NUMERIC, ref=_kthvalue_ref,
    error_inputs=_errors(
        (_floats(2, 3), (4,), {}, RuntimeError, "kthvalue\\(\\): selected number k out of range for dimension 1"),
        (_floats(2, 3), (0,), {}, RuntimeError, "selected number k out of range"),
        (_empty(0, 3), (1, 0), {}, IndexError, "Expected reduction dim 0 to have non-zero size"),
    ),
))


# -- median, nanmedian, mode, quantile, nanquantile -------------------------------------------------------


def _median_samples(opinfo, device, dtype, requires_grad, *, ignore_nan=False):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4)), name="full")
    yield SampleInput(_small_ints((2, 5), dtype, device), name="full, ties")
    yield SampleInput(make(()), name="zero-dim")
    if dtype.is_floating_point:
        yield SampleInput(make((0, 3)), name="full, empty: nan")
        yield SampleInput(_with_nan(make((7,)), 2, 5), name="full, nan")
    # along a dim: distinct values (PyTorch's index among equal values is unspecified)
    yield SampleInput(_distinct((3, 5), dtype, device), (1,), name="dim, odd")
    yield SampleInput(_distinct((4, 6), dtype, device, 1), (1, True), name="dim, even, keepdim")
    yield SampleInput(_distinct((4, 3), dtype, device, 2), (0,), name="dim 0")
    yield SampleInput(_distinct((2, 3, 4), dtype, device, 3), (-2,), name="3-d")
    yield SampleInput(_distinct((1,), dtype, device).reshape(()), (0,), name="zero-dim dim 0")
    yield SampleInput(_distinct((3, 4), dtype, device, 4, noncontiguous=True), (1,), name="noncontiguous")
    yield SampleInput(_distinct((4, 3), dtype, device, 5).t(), (1,), name="transposed view")
    yield SampleInput(make((0, 3)), (1,), name="empty, non-empty dim")
    if dtype.is_floating_point:
        yield SampleInput(_with_nan(_distinct((3, 5), dtype, device, 6), 1, 7), (1,), name="one nan per row")


def _median_row(ignore_nan):
    def row(r):
        values = r.tolist()
        nans = [i for i, v in enumerate(values) if isinstance(v, float) and math.isnan(v)]
        if nans and not ignore_nan:
            return np.nan, nans[0]
        order = [i for i in _stable_order(r, False) if i not in nans]
        if not order:
            return np.nan, nans[0]
        pick = order[(len(order) - 1) // 2]
        return values[pick], pick

    return row


def _median_ref(ignore_nan):
    def ref(a, dim=None, keepdim=False):
        x = _wide(a)
        if dim is None:
            if x.size == 0:
                return np.float64(np.nan)
            return np.asarray(_median_row(ignore_nan)(x.reshape(-1))[0])
        return _along(x, dim, _median_row(ignore_nan), keepdim)

    return ref


def _median_errors(name):
    return _errors(
        (_empty(0, 3), (0,), {}, IndexError, f"{name}\\(\\): Expected reduction dim 0 to have non-zero size"),
        (_of([True, False]), (), {}, RuntimeError, "Bool"),
        (_floats(2, 3), ((0,),), {}, TypeError, "must be int"),
    )


register_opinfo(OpInfo("median", _median_samples, dtypes=_NUMERIC, ref=_median_ref(False),
                       error_inputs=_median_errors("median")))
register_opinfo(OpInfo("nanmedian", functools.partial(_median_samples, ignore_nan=True), dtypes=_NUMERIC,
                       ref=_median_ref(True), error_inputs=_median_errors("nanmedian")))


def _mode_samples(opinfo, device, dtype, requires_grad):
    # ties are the point of mode; which occurrence PyTorch returns is unspecified, see _torch_mode
    yield SampleInput(_small_ints((4, 9), dtype, device), name="ties")
    yield SampleInput(_small_ints((4, 9), dtype, device, 1), (0, True), name="dim 0, keepdim")
    yield SampleInput(_small_ints((2, 3, 8), dtype, device, 2, low=0, high=5), (-1,), name="3-d")
    yield SampleInput(_small_ints((3, 8), dtype, device, 3, noncontiguous=True), (1,), name="noncontiguous")
    yield SampleInput(_small_ints((8, 3), dtype, device, 4).t(), (1,), name="transposed view")
    yield SampleInput(maker(device, dtype, requires_grad)((3, 5)), name="all distinct: the smallest")
    yield SampleInput(maker(device, dtype, requires_grad)(()), name="zero-dim")
    yield SampleInput(maker(device, dtype, requires_grad)((0, 3)), name="empty, non-empty dim")


def _mode_row(r):
    values = r.tolist()
    counts = collections.Counter(values)
    best = max(counts.values())
    value = min(v for v, c in counts.items() if c == best)
    return value, max(i for i, v in enumerate(values) if v == value)


def _torch_mode(input, dim=-1, keepdim=False):
    """torch.mode's values, with the index of the last occurrence of each mode value (ember's rule).

    PyTorch leaves the occurrence unspecified (the last one for small rows, any for large rows), so parity
    compares the values only, and that ember's index is the last occurrence of PyTorch's mode.
    """
    import torch

    values, indices = torch.mode(input, dim, keepdim)
    if input.ndim == 0:
        return values, indices
    d = dim % input.ndim
    shape = [-1 if i == d else 1 for i in range(input.ndim)]
    positions = torch.arange(input.shape[d]).reshape(shape)
    hits = torch.where(input == (values if keepdim else values.unsqueeze(d)), positions, -1)
    return values, hits.amax(d, keepdim=keepdim)


register_opinfo(OpInfo(
    "mode", _mode_samples, dtypes=_REAL, torch_fn=_torch_mode,
    ref=lambda a, dim=-1, keepdim=False: _along(_wide(a), dim, _mode_row, keepdim),
    error_inputs=_errors((_empty(0, 3), (0,), {}, IndexError, "mode\\(\\): Expected reduction dim 0 to have non-zero size"),
                         (_of([1j]), (), {}, RuntimeError, "complex")),
))


def _quantile_samples(opinfo, device, dtype, requires_grad, *, ignore_nan=False):
    import ember

    make = maker(device, dtype, requires_grad)
    qs = ember.tensor([0.0, 0.1, 0.375, 0.5, 0.9, 1.0], dtype=dtype, device=device)
    yield SampleInput(make((3, 5)), (0.3,), name="scalar q, all elements")
    yield SampleInput(make((3, 5)), (qs,), name="1-d q")
    yield SampleInput(make((3, 5)), (qs, 1), name="1-d q, dim")
    yield SampleInput(make((2, 3, 4)), (qs, 0, True), name="1-d q, dim 0, keepdim")
    yield SampleInput(make((3, 5)), (qs,), {"keepdim": True}, name="all elements, keepdim")
    yield SampleInput(make((3, 5)), (ember.tensor(0.25, dtype=dtype, device=device), -1), name="zero-dim q")
    for interpolation in ("lower", "higher", "midpoint", "nearest"):
        yield SampleInput(make((3, 5)), (qs, 1), {"interpolation": interpolation}, name=interpolation)
    yield SampleInput(make(()), (0.5,), name="zero-dim")
    yield SampleInput(make((3, 4), noncontiguous=True), (qs, 1), name="noncontiguous")
    yield SampleInput(_with_nan(make((3, 5)), 2, 7, 8), (qs, 1), name="nan")
    if ignore_nan:
        yield SampleInput(_with_nan(make((2, 3)), 3, 4, 5), (qs, 1), name="a row of nan")


def _quantile_ref(np_fn):
    @_quiet
    def ref(a, q, dim=None, keepdim=False, *, interpolation="linear"):
        x = _wide(a)
        axis = None if dim is None else dim % max(x.ndim, 1)
        if x.ndim == 0:
            axis = None
        result = np_fn(x, np.asarray(q, dtype=np.float64), axis=axis, method=interpolation, keepdims=keepdim)
        return result

    return ref


def _quantile_errors(name):
    return _errors(
        (_ints(3), (0.5,), {}, RuntimeError, f"{name}\\(\\) input tensor must be either float or double dtype"),
        (_floats(3), (1.5,), {}, RuntimeError, "q must be in the range \\[0, 1\\] but got 1.5"),
        (_floats(3), (None,), {}, TypeError, "q"),
        (_floats(3), (0.5,), {"interpolation": "foo"}, RuntimeError, "interpolation must be one of"),
        (_empty(0), (0.5,), {}, RuntimeError, "input tensor must be non-empty"),
    )


register_opinfo(OpInfo("quantile", _quantile_samples, dtypes=_FLOAT32_64, ref=_quantile_ref(np.quantile),
                       error_inputs=_quantile_errors("quantile")))
register_opinfo(OpInfo("nanquantile", functools.partial(_quantile_samples, ignore_nan=True), dtypes=_FLOAT32_64,
                       ref=_quantile_ref(np.nanquantile), error_inputs=_quantile_errors("nanquantile")))


# -- unique, unique_consecutive --------------------------------------------------------------------------


def _unique_samples(opinfo, device, dtype, requires_grad, *, consecutive=False):
    def s(t, kwargs, name):
        return SampleInput(t, (), kwargs, name=name, data_dependent=True)

    both = {"return_inverse": True, "return_counts": True}
    yield s(_small_ints((12,), dtype, device), {}, "1-d")
    yield s(_small_ints((3, 4), dtype, device, 1), both, "2-d, inverse and counts")
    yield s(_small_ints((3, 4), dtype, device, 2), {"return_inverse": True}, "inverse")
    yield s(_small_ints((3, 4), dtype, device, 3), {"return_counts": True}, "counts")
    yield s(_small_ints((5, 2), dtype, device, 4, high=1), {"dim": 0, **both}, "dim 0")
    yield s(_small_ints((2, 6), dtype, device, 5, high=1), {"dim": 1, **both}, "dim 1")
    yield s(_small_ints((3, 4), dtype, device, 6, noncontiguous=True), both, "noncontiguous")
    yield s(_small_ints((1,), dtype, device).reshape(()), both, "zero-dim")
    # an empty input has outputs of known sizes: meta tensors run it
    yield SampleInput(_small_ints((0, 3), dtype, device), (), both, name="empty")
    yield SampleInput(_small_ints((0, 3), dtype, device), (), {"dim": 0, **both}, name="empty, dim")
    if not consecutive:
        yield s(_small_ints((10,), dtype, device, 7), {"sorted": False}, "sorted=False")


def _unique_ref(a, sorted=True, return_inverse=False, return_counts=False, dim=None):
    x = _wide(a)
    if dim is None:
        values, inverse, counts = np.unique(x.reshape(-1), return_inverse=True, return_counts=True)
        inverse = inverse.reshape(x.shape)
    else:
        values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True, axis=dim)
        inverse = inverse.reshape(-1)
    outputs = (values, inverse.astype(np.int64), counts.astype(np.int64))
    chosen = (True, return_inverse, return_counts)
    result = tuple(o for o, keep in zip(outputs, chosen) if keep)
    return result if len(result) > 1 else result[0]


def _unique_consecutive_ref(a, return_inverse=False, return_counts=False, dim=None):
    x = np.asarray(a)
    if dim is None:
        items = list(x.reshape(-1))
        same = lambda u, v: u == v  # noqa: E731
    else:
        items = list(np.moveaxis(x, dim, 0))
        same = lambda u, v: np.array_equal(u, v)  # noqa: E731
    kept, inverse, counts = [], [], []
    for item in items:
        if not kept or not same(kept[-1], item):
            kept.append(item)
            counts.append(0)
        counts[-1] += 1
        inverse.append(len(kept) - 1)
    if dim is None:
        values = np.array(kept, dtype=x.dtype)
        inverse = np.array(inverse, dtype=np.int64).reshape(x.shape)
    else:
        values = np.moveaxis(np.array(kept, dtype=x.dtype).reshape((len(kept),) + np.moveaxis(x, dim, 0).shape[1:]), 0, dim)
        inverse = np.array(inverse, dtype=np.int64)
    outputs = (values, inverse, np.array(counts, dtype=np.int64))
    chosen = (True, return_inverse, return_counts)
    result = tuple(o for o, keep in zip(outputs, chosen) if keep)
    return result if len(result) > 1 else result[0]


_UNIQUE_ERRORS = _errors(
    (_of([1j, 2j]), (), {}, RuntimeError, "ComplexFloat"),
    (_floats(3), (), {"dim": 1}, IndexError, "Dimension out of range"),
    (_empty(0, 3), (), {"dim": 1}, RuntimeError, "There are 0 sized dimensions, and they aren't selected"),
)

register_opinfo(OpInfo("unique", _unique_samples, dtypes=_REAL, ref=_unique_ref, error_inputs=_UNIQUE_ERRORS,
                       supports_autograd=False))
register_opinfo(OpInfo("unique_consecutive", functools.partial(_unique_samples, consecutive=True), dtypes=_REAL,
                       ref=_unique_consecutive_ref, error_inputs=_UNIQUE_ERRORS, supports_autograd=False))


# -- bincount, histc, histogram --------------------------------------------------------------------------


def _bincount_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=0, high=6)
    weights = maker(device, D.float32, False, seed=1)
    yield SampleInput(make((10,)), name="counts", data_dependent=True)
    yield SampleInput(make((10,)), (), {"minlength": 12}, name="minlength", data_dependent=True)
    yield SampleInput(make((6,)), (weights((6,)),), name="float32 weights", data_dependent=True)
    yield SampleInput(make((6,)), (maker(device, D.float64, False)((6,)),), name="float64 weights", data_dependent=True)
    yield SampleInput(make((6,)), (maker(device, D.int32, False)((6,)),), name="int weights: float64",
                      data_dependent=True)
    yield SampleInput(make((0,)), name="empty")  # outputs of known size: meta tensors run it
    yield SampleInput(make((0,)), (), {"minlength": 3}, name="empty, minlength")
    yield SampleInput(make((8,), noncontiguous=True), name="noncontiguous", data_dependent=True)


def _bincount_ref(a, weights=None, minlength=0):
    if weights is None:
        return np.bincount(a, minlength=minlength)
    return np.bincount(a, weights=weights.astype(np.float64), minlength=minlength)


register_opinfo(OpInfo(
    "bincount", _bincount_samples, dtypes=INTEGRAL_TYPES, ref=_bincount_ref, supports_autograd=False,
    error_inputs=_errors(
        (_of([-1, 2]), (), {}, RuntimeError, "bincount only supports 1-d non-negative integral inputs"),
        (_of([[1, 2]]), (), {}, RuntimeError, "bincount only supports 1-d non-negative integral inputs"),
        (_of([1, 2]), (), {"minlength": -1}, RuntimeError, "minlength should be >= 0"),
        (_of([1, 2]), (_of([1.0]),), {}, RuntimeError, "weights should be 1-d and have the same length"),
        (_of([1.0, 2.0]), (), {}, RuntimeError, "integer"),
    ),
))


def _histc_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((20,)), name="default: 100 bins over the data's range")
    yield SampleInput(make((4, 5)), (7,), name="7 bins")
    yield SampleInput(make((4, 5)), (6, -4, 4), name="range, elements outside")
    yield SampleInput(make((4, 5)), (), {"bins": 5, "min": -9, "max": 9}, name="keywords")
    yield SampleInput(_tensor([2.0, 2.0, 2.0], dtype, device), (4,), name="a single value: widened")
    yield SampleInput(_tensor([0.0, 1.0, 2.0, 3.0], dtype, device), (3, 0, 3), name="edges")
    yield SampleInput(make((0,)), (3,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (5,), name="noncontiguous")


@_quiet
def _histc_ref(a, bins=100, min=0, max=0):
    x = _wide(a).reshape(-1)
    low, high = float(min), float(max)
    if low == high and x.size:
        low, high = float(x.min()), float(x.max())
    if low == high:
        low, high = low - 1, high + 1
    return np.histogram(x, bins=bins, range=(low, high))[0]


_HISTC_HALF = "bins are found in the input's (half) precision as in PyTorch; numpy's float64 bins differ at edges"

register_opinfo(OpInfo(
    "histc", _histc_samples, dtypes=FLOATING_TYPES, ref=_histc_ref, supports_autograd=False,
    skips=(("test_reference_values", D.float16, _HISTC_HALF), ("test_reference_values", D.bfloat16, _HISTC_HALF)),
    error_inputs=_errors(
        (_floats(3), (0,), {}, RuntimeError, "bins must be > 0"),
        (_floats(3), (3, 3, 1), {}, RuntimeError, "max must be larger than min"),
        (_of([1.0, float("inf")]), (3,), {}, RuntimeError, "is not finite"),
        (_ints(3), (3,), {}, RuntimeError, "floating point"),
    ),
))


def _histogram_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    edges = ember.tensor([-9.0, -2.0, 0.0, 0.5, 6.0], dtype=dtype, device=device)
    yield SampleInput(make((20,)), (5,), name="int bins")
    yield SampleInput(make((4, 5)), (4,), {"range": (-5.0, 5.0)}, name="range")
    yield SampleInput(make((4, 5)), (4,), {"weight": make((4, 5)), "density": True}, name="weight, density")
    yield SampleInput(make((4, 5)), (edges,), name="tensor bins")
    yield SampleInput(make((4, 5)), (edges,), {"density": True}, name="tensor bins, density")
    yield SampleInput(_tensor([2.0, 2.0], dtype, device), (3,), name="a single value: widened")
    yield SampleInput(make((0,)), (3,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (6,), name="noncontiguous")


def _histogram_ref(a, bins=100, *, range=None, weight=None, density=False):
    x = _wide(a).reshape(-1)
    if isinstance(bins, np.ndarray):
        edges = bins.astype(np.float64)
    else:
        if range is None:
            low, high = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
        else:
            low, high = range
        if low == high:
            low, high = low - 0.5, high + 0.5
        edges = np.linspace(low, high, bins + 1)
    w = None if weight is None else weight.reshape(-1).astype(np.float64)
    hist, edges = np.histogram(x, bins=edges, weights=w, density=density)
    return hist, edges


register_opinfo(OpInfo(
    "histogram", _histogram_samples, dtypes=_FLOAT32_64, ref=_histogram_ref, supports_autograd=False,
    error_inputs=_errors(
        (_floats(3), (3,), {"range": (3.0, 1.0)}, RuntimeError, "min should not exceed max"),
        (_floats(3), (_of([0.0, 1.0], D.float64),), {}, RuntimeError, "should have the same dtype"),
        (_of([1.0, float("nan")]), (3,), {}, RuntimeError, "is not finite"),
        (_ints(3), (3,), {}, RuntimeError, "float"),
    ),
))


# -- searchsorted, bucketize -----------------------------------------------------------------------------


def _sorted_seq(shape, dtype, device, seed=0):
    """Increasing rows of distinct values."""
    t = _distinct(shape, dtype, device, seed)
    return _tensor(np.sort(t.cpu().numpy().astype(np.float64), axis=-1), dtype, device)


def _searchsorted_samples(opinfo, device, dtype, requires_grad):
    import ember

    seq = _sorted_seq((8,), dtype, device)
    values = _small_ints((2, 5), dtype, device, low=-5 if dtype.is_signed else 0, high=5)
    yield SampleInput(seq, (values,), name="1-d sequence")
    yield SampleInput(seq, (values,), {"right": True}, name="right")
    yield SampleInput(seq, (values,), {"side": "right"}, name="side right")
    yield SampleInput(seq, (values,), {"out_int32": True}, name="out_int32")
    yield SampleInput(seq, (3,), name="python scalar")
    yield SampleInput(seq, (values[0, 1],), name="zero-dim value")
    yield SampleInput(_sorted_seq((3, 6), dtype, device, 1), (_small_ints((3, 4), dtype, device, 1, high=4),),
                      name="a sequence per row")
    yield SampleInput(_sorted_seq((3, 6), dtype, device, 2), (_small_ints((3, 4), dtype, device, 2, high=4),),
                      {"right": True}, name="a sequence per row, right")
    order = ember.tensor([3, 0, 7, 5, 1, 6, 2, 4], device=device)
    shuffled = ember.tensor(seq.cpu().numpy()[np.argsort([3, 0, 7, 5, 1, 6, 2, 4])], device=device)
    yield SampleInput(shuffled, (values,), {"sorter": order}, name="sorter")
    yield SampleInput(seq, (values.t(),), name="transposed values")
    yield SampleInput(seq, (_small_ints((0,), dtype, device),), name="empty values")
    yield SampleInput(_small_ints((0,), dtype, device), (values,), name="empty sequence")
    if dtype.is_floating_point:
        yield SampleInput(seq, (_with_nan(values, 3),), name="nan goes last")


@_quiet
def _searchsorted_ref(seq, values, *, out_int32=False, right=False, side=None, sorter=None):
    side = "right" if right or side == "right" else "left"
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, axis=-1)
    values = np.asarray(values)
    seq = _wide(seq).astype(np.float64)
    wide = _wide(values).astype(np.float64)
    if seq.ndim == 1:
        result = np.searchsorted(seq, wide, side=side)
    else:
        result = np.stack([np.searchsorted(s, v, side=side) for s, v in zip(seq, wide)])
    result = np.where(np.isnan(wide), seq.shape[-1], result)
    return np.asarray(result).astype(np.int32 if out_int32 else np.int64)


register_opinfo(OpInfo(
    "searchsorted", _searchsorted_samples, dtypes=_NUMERIC, ref=_searchsorted_ref, supports_autograd=False,
    error_inputs=_errors(
        (_floats(2, 3), (_floats(1, 2),), {}, RuntimeError, "boundaries tensor should be 1 dimension or"),
        (_floats(3), (_floats(2),), {"side": "foo"}, RuntimeError, "side can only be 'left' or 'right'"),
        (_floats(3), (_floats(2),), {"side": "left", "right": True}, RuntimeError,
         "side and right can't be set to opposites"),
        (_floats(3), (_floats(2),), {"sorter": _of([0, 1], D.int32)}, RuntimeError,
         "sorter must be a tensor of long dtype"),
        (_floats(3), (_floats(2),), {"sorter": _of([0, 1])}, RuntimeError,
         "boundary and sorter must have the same size"),
        (_floats(3), (_floats(2),), {"sorter": _of([0, 1, 3])}, RuntimeError,
         "sorter index out of range"),
        (_of(1.0), (_floats(2),), {}, RuntimeError, "boundaries tensor should have positive dimension"),
    ),
))


def _bucketize_samples(opinfo, device, dtype, requires_grad):
    bounds = _sorted_seq((6,), dtype, device)
    values = _small_ints((3, 4), dtype, device, low=-4 if dtype.is_signed else 0, high=4)
    yield SampleInput(values, (bounds,), name="default")
    yield SampleInput(values, (bounds,), {"right": True}, name="right")
    yield SampleInput(values, (bounds,), {"out_int32": True}, name="out_int32")
    yield SampleInput(values[1, 2], (bounds,), name="zero-dim")
    yield SampleInput(values.t(), (bounds,), name="transposed")
    yield SampleInput(_small_ints((0, 2), dtype, device), (bounds,), name="empty")


register_opinfo(OpInfo(
    "bucketize", _bucketize_samples, dtypes=_NUMERIC,
    ref=lambda a, b, *, out_int32=False, right=False: _searchsorted_ref(b, a, out_int32=out_int32, right=right),
    supports_autograd=False,
    error_inputs=_errors((_floats(3), (_floats(2, 2),), {}, RuntimeError,
                          r"boundaries tensor must be 1 dimension, but got dim\(2\)")),
))


# -- diff -----------------------------------------------------------------------------------------------


def _diff_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((6,)), name="1-d")
    yield SampleInput(make((3, 5)), (2,), name="n=2")
    yield SampleInput(make((3, 5)), (1, 0), name="dim 0")
    yield SampleInput(make((3, 5)), (0,), name="n=0")
    yield SampleInput(make((3, 5)), (7,), name="n past the size: empty")
    yield SampleInput(make((3, 4)), (1, -1, make((3, 2)), make((3, 1))), name="prepend, append")
    yield SampleInput(make((3, 4)), (), {"dim": 0, "append": make((1, 4))}, name="append along dim 0")
    yield SampleInput(make((3, 4)), (), {"prepend": maker(device, D.float64, False)((3, 1))}, name="promoting prepend")
    yield SampleInput(make((0, 3)), (1, 0), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (2,), name="transposed view")


def _diff_ref(a, n=1, dim=-1, prepend=None, append=None):
    parts = [np.asarray(p) for p in (prepend, a, append) if p is not None]
    integral = all(p.dtype.kind in "iu" for p in parts)
    dtype = np.result_type(*parts) if integral else None  # integer results wrap around in their dtype
    x = np.concatenate([_wide(p) for p in parts], axis=dim)
    for _ in range(n):
        head = np.take(x, range(1, x.shape[dim]), axis=dim)
        tail = np.take(x, range(0, max(x.shape[dim] - 1, 0)), axis=dim)
        x = head != tail if x.dtype == np.bool_ else head - tail
    return x.astype(dtype) if integral else x


register_opinfo(OpInfo(
    "diff", _diff_samples, ref=_diff_ref,
    error_inputs=_errors(
        (_of(1.0), (), {}, RuntimeError, "diff expects input to be at least one-dimensional"),
        (_floats(3), (-1,), {}, RuntimeError, "order must be non-negative but got -1"),
        (_floats(2, 3), (1, -1, _floats(3)), {}, RuntimeError, "the same dimension as input"),
        (_floats(2, 3), (1, 0, _floats(1, 2)), {}, RuntimeError, "input.size\\(1\\) = 3, but got tensor.size\\(1\\) = 2"),
    ),
))
