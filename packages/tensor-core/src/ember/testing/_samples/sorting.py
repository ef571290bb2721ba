"""OpInfos of the ops built on sorted order (ember._ops.sorting, order_statistics, unique, searching).

Ties: where PyTorch's CPU kernels leave the index among equal values unspecified (``sort`` without
``stable=True``, ``topk``, ``kthvalue``, ``median``/``nanmedian`` along a dim) the samples use
tensors of distinct values. ``mode`` can't avoid ties (the mode is a repeated value): its parity
check compares the values and takes PyTorch's index to be the last occurrence of the mode, which is
ember's rule (PyTorch returns the last one for small rows, an unspecified one for large rows).
"""

from __future__ import annotations

import collections
import functools
import math

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._reduction_helpers import (
    _FLOAT32_64,
    _NUMERIC,
    _REAL,
    _empty,
    _errors,
    _floats,
    _ints,
    _of,
    _quiet,
    _scan,
    _small_ints,
    _tensor,
    _wide,
    _with_nan,
)


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
