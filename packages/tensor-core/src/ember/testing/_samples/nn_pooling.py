"""OpInfos of ember._ops.nn_pooling: max, average, adaptive and lp pooling.

The references are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._spatial import _FLOATS, _INTS, _args, _errors, _tup, _wide, _z


def _pool_out(size, k, s, p, d, ceil_mode):
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _windows(x, n, k, s, p, d, ceil_mode):
    """Yield (output index, tuple of index arrays of the window's in-bounds positions, padded window count)."""
    spatial = x.shape[x.ndim - n:]
    out = [_pool_out(spatial[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(n)]
    for o in np.ndindex(*out):
        axes = []
        full = 1
        for i in range(n):
            start = o[i] * s[i] - p[i]
            positions = start + np.arange(k[i]) * d[i]
            full *= len([q for q in positions if q < spatial[i] + p[i]])
            axes.append(positions[(positions >= 0) & (positions < spatial[i])])
        yield o, axes, full, out


def _ref_max_pool(n):
    def ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        k = _tup(kernel_size, n)
        s = k if stride is None or stride == () or stride == [] else _tup(stride, n)
        p, d = _tup(padding, n), _tup(dilation, n)
        lead = x.shape[:x.ndim - n]
        spatial = x.shape[x.ndim - n:]
        values = indices = None
        for o, axes, _, out in _windows(x, n, k, s, p, d, ceil_mode):
            if values is None:
                values = np.zeros(lead + tuple(out), x.dtype)
                indices = np.zeros(lead + tuple(out), np.int64)
            grid = np.meshgrid(*axes, indexing="ij")
            flat = np.ravel_multi_index(tuple(grid), spatial).reshape(-1)
            window = x.reshape(lead + (math.prod(spatial),))[..., flat]
            best = np.argmax(window, axis=-1)
            values[(Ellipsis, *o)] = np.take_along_axis(window, best[..., None], -1)[..., 0]
            indices[(Ellipsis, *o)] = flat[best]
        return (values, indices) if return_indices else values

    return ref


def _ref_max_pool_with_indices(n):
    def ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        return _ref_max_pool(n)(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)

    return ref


def _ref_avg_pool(n):
    def ref(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
        k = _tup(kernel_size, n)
        s = k if stride is None else _tup(stride, n)
        p = _tup(padding, n)
        lead = x.shape[:x.ndim - n]
        spatial = x.shape[x.ndim - n:]
        wide = _wide(x)
        result = None
        for o, axes, full, out in _windows(x, n, k, s, p, (1,) * n, ceil_mode):
            if result is None:
                result = np.zeros(lead + tuple(out), wide.dtype)
            grid = np.meshgrid(*axes, indexing="ij")
            flat = np.ravel_multi_index(tuple(grid), spatial).reshape(-1)
            total = wide.reshape(lead + (math.prod(spatial),))[..., flat].sum(axis=-1)
            divisor = divisor_override or (full if count_include_pad else flat.size)
            if flat.size == 0:
                result[(Ellipsis, *o)] = 0
            elif wide.dtype.kind == "i":
                result[(Ellipsis, *o)] = np.trunc(total / divisor).astype(np.int64)
            else:
                result[(Ellipsis, *o)] = total / divisor
        return result

    return ref


def _adaptive_cells(size, out):
    return [(i * size // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _ref_adaptive(n, reduce, with_indices):
    def ref(x, output_size, return_indices=False):
        spatial = x.shape[x.ndim - n:]
        sizes = _tup(output_size, n)
        sizes = tuple(spatial[i] if v is None else v for i, v in enumerate(sizes))
        lead = x.shape[:x.ndim - n]
        wide = _wide(x)
        values = np.zeros(lead + sizes, wide.dtype)
        indices = np.zeros(lead + sizes, np.int64)
        cells = [_adaptive_cells(spatial[i], sizes[i]) for i in range(n)]
        for o in np.ndindex(*sizes):
            axes = [np.arange(*cells[i][o[i]]) for i in range(n)]
            flat = np.ravel_multi_index(tuple(np.meshgrid(*axes, indexing="ij")), spatial).reshape(-1)
            window = wide.reshape(lead + (math.prod(spatial),))[..., flat]
            if reduce == "mean":
                values[(Ellipsis, *o)] = window.mean(axis=-1)
            else:
                best = np.argmax(window, axis=-1)
                values[(Ellipsis, *o)] = np.take_along_axis(window, best[..., None], -1)[..., 0]
                indices[(Ellipsis, *o)] = flat[best]
        return (values, indices) if with_indices and return_indices else values

    return ref


def _ref_adaptive_with_indices(n):
    def ref(x, output_size):
        return _ref_adaptive(n, "max", True)(x, output_size, return_indices=True)

    return ref


def _ref_lp_pool(n):
    def ref(x, norm_type, kernel_size, stride=None, ceil_mode=False):
        k = _tup(kernel_size, n)
        if math.isinf(norm_type):
            values = _ref_max_pool(n)(np.abs(_wide(x)) if norm_type > 0 else -np.abs(_wide(x)), kernel_size, stride,
                                      0, 1, ceil_mode)
            return values if norm_type > 0 else -values
        integral = x.dtype.kind in "biu" and isinstance(norm_type, int)
        with np.errstate(all="ignore"):  # a negative value to a fractional power is NaN, as in PyTorch
            powered = _wide(x).astype(np.int64) ** norm_type if integral else _wide(x).astype(np.float64) ** norm_type
            avg = _ref_avg_pool(n)(powered, kernel_size, stride, 0, ceil_mode)
            return (avg.astype(np.float64) * math.prod(k)) ** (1.0 / norm_type)

    return ref


def _max_pool_samples(n, with_indices=False):
    """Samples of ``max_pool{n}d`` (with and without ``return_indices``) or of ``max_pool{n}d_with_indices``."""

    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        spatial = (7, 6, 5)[:n]
        indices = dtype in _INTS and n == 1  # PyTorch's max_pool1d takes integers only with indices
        for ri in ((None,) if with_indices else (True,) if indices else (False, True)):
            extra = {} if ri is None else {"return_indices": ri}
            yield SampleInput(make((2, 3, *spatial)), (2,), extra, name="2")
            yield SampleInput(make((3, *spatial), noncontiguous=True), (3, 2, 1), {"ceil_mode": True, **extra},
                              name="unbatched, stride, padding, ceil_mode")
            yield SampleInput(make((1, 2, *spatial)), ((2, 3, 2)[:n],),
                              {"stride": (1, 2, 1)[:n], "dilation": (2, 1, 2)[:n], "padding": (1, 1, 0)[:n], **extra},
                              name="dilation")
            yield SampleInput(make((0, 2, *spatial)), (2,), extra, name="empty batch")

    return gen


def _avg_pool_samples(n):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        spatial = (7, 6, 5)[:n]
        yield SampleInput(make((2, 3, *spatial)), (2,), name="2")
        yield SampleInput(make((3, *spatial), noncontiguous=True), (3, 2, 1), {"ceil_mode": True},
                          name="unbatched, padding, ceil_mode")
        yield SampleInput(make((1, 2, *spatial)), (3, 2, 1), {"ceil_mode": True, "count_include_pad": False},
                          name="without padding in the divisor")
        if n > 1:
            yield SampleInput(make((1, 2, *spatial)), ((2, 3, 2)[:n],), {"divisor_override": 3, "padding": 1},
                              name="divisor_override")
        yield SampleInput(make((0, 2, *spatial)), (2,), name="empty batch")

    return gen


def _adaptive_samples(n, indices, with_indices=False):
    """Samples of ``adaptive_{avg,max}_pool{n}d`` (``indices``: some with ``return_indices``), or of the max
    pool's ``_with_indices`` op."""

    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        spatial = (7, 6, 5)[:n]
        extra = {"return_indices": True} if indices and not with_indices else {}
        yield SampleInput(make((2, 3, *spatial)), ((3, 4, 2)[:n],), extra, name="shrink")
        yield SampleInput(make((3, *spatial), noncontiguous=True), ((9, 8, 6)[:n],), name="unbatched, grow")
        yield SampleInput(make((1, 2, *spatial)), (1,), extra, name="global")
        if n > 1:
            yield SampleInput(make((1, 2, *spatial)), ((None, 2, None)[:n],), name="None keeps a size")
        yield SampleInput(make((0, 2, *spatial)), (2,), name="empty batch")

    return gen


def _lp_pool_samples(n):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad, low=0 if dtype.category <= D.INTEGRAL else -3, high=3)
        spatial = (7, 6, 5)[:n]
        yield SampleInput(make((2, 3, *spatial)), (2, 2), name="p=2")
        if dtype.is_floating_point:
            yield SampleInput(make((3, *spatial), noncontiguous=True), (3.0, 3, 2), {"ceil_mode": True},
                              name="unbatched, p=3, ceil_mode")
            yield SampleInput(make((1, 2, *spatial)), (1.5, (2, 3, 2)[:n] if n > 1 else 2), name="p=1.5")
        if dtype.is_floating_point and n > 1:
            yield SampleInput(make((1, 2, *spatial)), (float("inf"), 2), name="p=inf")

    return gen


def _pool_errors(name, n, *, dilation=True, return_indices=False):
    spatial = (6,) * n
    cases = [
        (_args(_z(2, 3, *spatial), 3, 1, 2), {}, RuntimeError, "pad should be at most half of effective kernel size"),
        (_args(_z(2, 3, *(2,) * n), 3), {}, RuntimeError, "Output size is too small"),
        (_args(_z(2, 0, *spatial), 2), {}, RuntimeError, "with optional 0 dim batch size"),
        (_args(_z(1, 2, 3, *(6,) * n), 2), {}, RuntimeError, "Expected"),
        (_args(_z(2, 3, *spatial, dtype=D.complex64), 2), {}, NotImplementedError, "not implemented for 'ComplexFloat'"),
    ]
    if dilation:
        cases.append((_args(_z(2, 3, *spatial), 2), {"dilation": 0}, RuntimeError, "dilation should be greater than zero"))
    if n == 1 and name.startswith("max") and not return_indices:  # integers pool in 1-d only with the indices
        cases.append((_args(_z(2, 3, 6, dtype=D.int64), 2), {}, NotImplementedError,
                      "\"max_pool1d_impl\" not implemented for 'Long'"))
    if name.startswith("avg"):
        cases.append((_args(_z(2, 3, *spatial, dtype=D.int32), 2), {}, NotImplementedError, "not implemented for 'Int'"))
    if name.startswith("avg") and n > 1:
        cases.append((_args(_z(2, 3, *spatial), 2), {"divisor_override": 0}, RuntimeError, "divisor must be not zero"))
    return _errors(*cases)


def _adaptive_errors(name, n):
    spatial = (6,) * n
    return _errors(
        (_args(_z(6), 2), {}, RuntimeError, "Expected"),
        (_args(_z(2, 3, *(0,) * n), 2), {}, RuntimeError, "Expected input to have non-zero size for non-batch"),
        (_args(_z(2, 3, *spatial, dtype=D.int64), 2), {}, NotImplementedError, f"\"{name}\" not implemented for 'Long'"),
        (_args(_z(2, 3, *spatial), -1), {}, RuntimeError, "elements of output_size must be greater than or equal to 0"),
    )


# -- registration -------------------------------------------------------------------------------------

_INFOS = []

for _n in (1, 2, 3):
    _INFOS += [
        OpInfo(f"max_pool{_n}d", _max_pool_samples(_n), dtypes=(*_INTS, *_FLOATS), ref=_ref_max_pool(_n),
               error_inputs=_pool_errors(f"max_pool{_n}d", _n), torch_name=f"nn.functional.max_pool{_n}d"),
        OpInfo(f"max_pool{_n}d_with_indices", _max_pool_samples(_n, with_indices=True), dtypes=(*_INTS, *_FLOATS),
               ref=_ref_max_pool_with_indices(_n),
               error_inputs=_pool_errors(f"max_pool{_n}d", _n, return_indices=True),
               torch_name=f"nn.functional.max_pool{_n}d_with_indices"),
        OpInfo(f"avg_pool{_n}d", _avg_pool_samples(_n),
               dtypes=(D.int64, *_FLOATS) if _n < 3 else (D.int64, D.float32, D.float64), ref=_ref_avg_pool(_n),
               error_inputs=_pool_errors(f"avg_pool{_n}d", _n, dilation=False),
               torch_name=f"nn.functional.avg_pool{_n}d", tolerances={D.float16: (2e-3, 1e-2)}),
        # PyTorch's 3-d kernel sums float16/bfloat16 in that dtype, a few ulps off a float32 sum
        OpInfo(f"adaptive_avg_pool{_n}d", _adaptive_samples(_n, False), dtypes=_FLOATS, ref=_ref_adaptive(_n, "mean", False),
               error_inputs=_adaptive_errors(f"adaptive_avg_pool{_n}d", _n),
               torch_name=f"nn.functional.adaptive_avg_pool{_n}d",
               tolerances={D.float16: (4e-3, 1e-2), D.bfloat16: (3e-2, 6e-2)} if _n == 3 else {D.float16: (2e-3, 1e-2)}),
        OpInfo(f"adaptive_max_pool{_n}d", _adaptive_samples(_n, True), dtypes=_FLOATS, ref=_ref_adaptive(_n, "max", True),
               error_inputs=_adaptive_errors(f"adaptive_max_pool{_n}d", _n),
               torch_name=f"nn.functional.adaptive_max_pool{_n}d"),
        OpInfo(f"adaptive_max_pool{_n}d_with_indices", _adaptive_samples(_n, True, with_indices=True), dtypes=_FLOATS,
               ref=_ref_adaptive_with_indices(_n), error_inputs=_adaptive_errors(f"adaptive_max_pool{_n}d", _n),
               torch_name=f"nn.functional.adaptive_max_pool{_n}d_with_indices"),
        OpInfo(f"lp_pool{_n}d", _lp_pool_samples(_n),
               dtypes=(D.bool, D.int64, *_FLOATS) if _n < 3 else (D.bool, D.int64, D.float32, D.float64),
               ref=_ref_lp_pool(_n), torch_name=f"nn.functional.lp_pool{_n}d",
               tolerances={D.float32: (1e-5, 1e-5), D.float16: (4e-3, 1e-2), D.bfloat16: (2e-2, 5e-2)}),
    ]

for _info in _INFOS:
    register_opinfo(_info)
del _info, _n
