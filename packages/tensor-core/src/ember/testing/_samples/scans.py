"""OpInfos of the scans and differences (ember._ops.scans): cumsum, cumprod, cummax, cummin, logcumsumexp, diff."""

from __future__ import annotations

import cmath
import functools
import math

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._reduction_helpers import (
    _FLOAT_COMPLEX,
    _REAL,
    _errors,
    _floats,
    _ints,
    _of,
    _quiet,
    _scan,
    _small_ints,
    _wide,
    _with_nan,
)

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
