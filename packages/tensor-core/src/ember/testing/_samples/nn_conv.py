"""OpInfos of ember._ops.nn_conv: convolution, pooling, padding, interpolation, grid sampling, pixel shuffle, fold.

The references below are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker

_FLOATS = (D.float16, D.bfloat16, D.float32, D.float64)
_INTS = (D.uint8, D.int8, D.int16, D.int32, D.int64)
_CONV_TYPES = tuple(d for d in ALL_TYPES_AND_COMPLEX if d is not D.bool)
_CONV_TRANSPOSE_TYPES = (D.int64, *_FLOATS, D.complex64, D.complex128)
_FOLD_TYPES = (D.bool, *_FLOATS, D.complex64, D.complex128)
# sums of many products: float32 rounding grows with the sum's terms
_SUM_TOLERANCES = {D.float32: (1e-4, 1e-5), D.complex64: (1e-4, 1e-5), D.float16: (4e-3, 1e-2),
                   D.bfloat16: (1.6e-2, 5e-2)}


def _tup(value, n):
    return tuple(value) * (n if len(tuple(value)) == 1 else 1) if isinstance(value, (tuple, list)) else (value,) * n


def _wide(a):
    """``a`` in a dtype where the reference computes exactly enough: int64, float64 or complex128 (bool stays)."""
    if a.dtype.kind == "b":
        return a
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def _errors(*cases):
    """``(make_args, kwargs, error, regex)`` -> an error_inputs generator; make_args(ember, device) gives the args."""

    def gen(opinfo, device):
        import ember

        for make_args, kwargs, error, regex in cases:
            args = make_args(ember, device)
            yield ErrorInput(SampleInput(args[0], tuple(args[1:]), kwargs), error, regex)

    return gen


# -- references ----------------------------------------------------------------------------------------


def _ref_conv(n):
    def ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
        unbatched = x.ndim == n + 1
        x, w = _wide(x), _wide(w)
        if unbatched:
            x = x[None]
        k = w.shape[2:]
        s, d = _tup(stride, n), _tup(dilation, n)
        if padding == "valid":
            lo = hi = (0,) * n
        elif padding == "same":
            lo = tuple(d[i] * (k[i] - 1) // 2 for i in range(n))
            hi = tuple(d[i] * (k[i] - 1) - lo[i] for i in range(n))
        else:
            lo = hi = _tup(padding, n)
        xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)))
        out = tuple((xp.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n))
        out_channels, cpg = w.shape[:2]
        opg = out_channels // groups
        result = np.zeros((x.shape[0], out_channels, *out), np.result_type(x, w))
        for o in range(out_channels):
            g = o // opg
            for offset in np.ndindex(*k):
                window = tuple(slice(offset[i] * d[i], offset[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i]) for i in range(n))
                patch = xp[(slice(None), slice(g * cpg, (g + 1) * cpg), *window)]
                result[:, o] += np.tensordot(w[(o, slice(None), *offset)], patch, axes=([0], [1]))
        if b is not None:
            result += _wide(b).reshape((-1,) + (1,) * n)
        return result[0] if unbatched else result

    return ref


def _ref_conv_transpose(n):
    def ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        unbatched = x.ndim == n + 1
        x, w = _wide(x), _wide(w)
        if unbatched:
            x = x[None]
        s, p, op, d = _tup(stride, n), _tup(padding, n), _tup(output_padding, n), _tup(dilation, n)
        cin, opg = w.shape[:2]
        cpg = cin // groups
        k, blocks = w.shape[2:], x.shape[2:]
        out = tuple((blocks[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(n))
        full = tuple(max((blocks[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1, p[i] + out[i]) for i in range(n))
        buffer = np.zeros((x.shape[0], opg * groups, *full), np.result_type(x, w))
        for c in range(cin):
            g = c // cpg
            for o in range(opg):
                for offset in np.ndindex(*k):
                    target = tuple(slice(offset[i] * d[i], offset[i] * d[i] + (blocks[i] - 1) * s[i] + 1, s[i])
                                   for i in range(n))
                    buffer[(slice(None), g * opg + o, *target)] += x[:, c] * w[(c, o, *offset)]
        result = buffer[(slice(None), slice(None), *(slice(p[i], p[i] + out[i]) for i in range(n)))]
        if b is not None:
            result = result + _wide(b).reshape((-1,) + (1,) * n)
        return result[0] if unbatched else result

    return ref


def _ref_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    n = w.ndim - 2
    if transposed:
        return _ref_conv_transpose(n)(x, w, b, stride, padding, output_padding, groups, dilation)
    return _ref_conv(n)(x, w, b, stride, padding, dilation, groups)


def _ref_im2col(x, kernel_size, dilation=1, padding=0, stride=1):
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    k, d, p, s = _tup(kernel_size, 2), _tup(dilation, 2), _tup(padding, 2), _tup(stride, 2)
    xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
    blocks = [(xp.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    rows = []
    for c in range(x.shape[1]):
        for i, j in np.ndindex(*k):
            patch = xp[:, c, i * d[0]: i * d[0] + (blocks[0] - 1) * s[0] + 1: s[0],
                       j * d[1]: j * d[1] + (blocks[1] - 1) * s[1] + 1: s[1]]
            rows.append(patch.reshape(x.shape[0], blocks[0] * blocks[1]))
    result = np.stack(rows, axis=1)
    return result[0] if unbatched else result


def _ref_fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    unbatched = x.ndim == 2
    if unbatched:
        x = x[None]
    out, k = _tup(output_size, 2), _tup(kernel_size, 2)
    d, p, s = _tup(dilation, 2), _tup(padding, 2), _tup(stride, 2)
    blocks = [(out[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    channels = x.shape[1] // (k[0] * k[1])
    acc = x.astype(np.int64) if x.dtype == bool else _wide(x)
    image = np.zeros((x.shape[0], channels, out[0] + 2 * p[0] + s[0] * k[0], out[1] + 2 * p[1] + s[1] * k[1]),
                     acc.dtype)
    cols = acc.reshape(x.shape[0], channels, k[0], k[1], blocks[0], blocks[1])
    for i, j in np.ndindex(*k):
        image[:, :, i * d[0]: i * d[0] + (blocks[0] - 1) * s[0] + 1: s[0],
              j * d[1]: j * d[1] + (blocks[1] - 1) * s[1] + 1: s[1]] += cols[:, :, i, j]
    result = image[:, :, p[0]: p[0] + out[0], p[1]: p[1] + out[1]]
    if x.dtype == bool:
        result = result > 0
    return result[0] if unbatched else result


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


def _ref_max_unpool(n):
    def ref(x, indices, kernel_size, stride=None, padding=0, output_size=None):
        k = _tup(kernel_size, n)
        s = k if stride is None else _tup(stride, n)
        p = _tup(padding, n)
        spatial = x.shape[x.ndim - n:]
        if output_size is None:
            out = tuple((spatial[i] - 1) * s[i] + k[i] - 2 * p[i] for i in range(n))
        else:
            out = tuple(output_size)[-n:]
        lead = x.shape[:x.ndim - n]
        result = np.zeros(lead + (math.prod(out),), x.dtype)
        flat_x = x.reshape(lead + (math.prod(spatial),))
        flat_i = indices.reshape(lead + (math.prod(spatial),))
        for lead_index in np.ndindex(*lead):
            result[lead_index][flat_i[lead_index]] = flat_x[lead_index]
        return result.reshape(lead + out)

    return ref


def _ref_pad(x, pad, mode="constant", value=None):
    result = _wide(x) if x.dtype.kind != "b" else x
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        size = result.shape[axis]
        result = np.take(result, np.arange(max(-lo, 0), size - max(-hi, 0)), axis=axis)  # crop first
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        if mode == "constant":
            fill = np.array(0 if value is None else value).astype(x.dtype).astype(result.dtype)
            result = np.pad(result, widths, mode="constant", constant_values=fill)
        else:
            result = np.pad(result, widths, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])
    return result


def _ref_pixel_shuffle(x, r):
    c, h, w = x.shape[-3:]
    out = np.zeros(x.shape[:-3] + (c // (r * r), h * r, w * r), x.dtype)
    for ch, i, j in itertools.product(range(c // (r * r)), range(r), range(r)):
        out[..., ch, i::r, j::r] = x[..., ch * r * r + i * r + j, :, :]
    return out


def _ref_channel_shuffle(x, groups):
    out = np.empty_like(x)
    per_group = x.shape[1] // groups
    for g, j in itertools.product(range(groups), range(per_group)):
        out[:, j * groups + g] = x[:, g * per_group + j]
    return out


def _ref_pixel_unshuffle(x, r):
    c, h, w = x.shape[-3:]
    out = np.zeros(x.shape[:-3] + (c * r * r, h // r, w // r), x.dtype)
    for ch, i, j in itertools.product(range(c), range(r), range(r)):
        out[..., ch * r * r + i * r + j, :, :] = x[..., ch, i::r, j::r]
    return out


def _source_scale(in_size, out_size, align_corners, scale):
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale else in_size / out_size


def _cubic(t, a):
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


def _resample_matrix(in_size, out_size, mode, align_corners, scale, antialias):
    """(out, in) weights of one dimension of ``interpolate``, from the definitions (float64)."""
    m = np.zeros((out_size, in_size))
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(1.0 / scale) if scale else np.float32(in_size) / np.float32(out_size)
        for o in range(out_size):
            position = np.float32(o) + (np.float32(0.5) if mode == "nearest-exact" else np.float32(0))
            m[o, min(int(np.floor(position * s)), in_size - 1)] = 1
        return m
    s = _source_scale(in_size, out_size, align_corners, scale)
    cubic = mode == "bicubic"
    if antialias:
        support = (2 if cubic else 1) * max(s, 1.0)
        for o in range(out_size):
            center = s * (o + 0.5)
            lo, hi = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), in_size)
            for i in range(lo, hi):
                x = (i - center + 0.5) / max(s, 1.0)
                m[o, i] = _cubic(x, -0.5) if cubic else max(0.0, 1 - abs(x))
            m[o] /= m[o].sum()
        return m
    for o in range(out_size):
        src = s * o if align_corners else s * (o + 0.5) - 0.5
        if not cubic:
            src = max(src, 0.0)
            i0 = min(int(np.floor(src)), in_size - 1)
            lam = min(max(src - i0, 0.0), 1.0)
            m[o, i0] += 1 - lam
            m[o, min(i0 + 1, in_size - 1)] += lam
        else:
            i0 = int(np.floor(src))
            t = src - i0
            for j in range(-1, 3):
                m[o, min(max(i0 + j, 0), in_size - 1)] += _cubic(t - j, -0.75)
    return m


def _ref_interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                     antialias=False):
    n = x.ndim - 2
    spatial = x.shape[2:]
    scales = None
    if size is not None:
        out = _tup(size, n)
    else:
        scales = _tup(scale_factor, n)
        out = tuple(math.floor(spatial[i] * scales[i]) for i in range(n))
        if recompute_scale_factor or mode == "area":
            scales = None
    if mode == "area":
        return _ref_adaptive(n, "mean", False)(x, out)
    result = _wide(x).astype(np.float64)
    for i in range(n):
        m = _resample_matrix(spatial[i], out[i], mode, align_corners, scales[i] if scales else None, antialias)
        result = np.moveaxis(np.tensordot(m, np.moveaxis(result, 2 + i, 0), axes=([1], [0])), 0, 2 + i)
    if x.dtype == np.uint8:
        result = np.clip(np.floor(result + 0.5), 0, 255)
    return result


def _ref_grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    n = x.ndim - 2
    # PyTorch computes float16/bfloat16 coordinates in that dtype: round after every step as it does
    half = grid.dtype.itemsize == 2

    def rnd(v):
        return float(np.array(v).astype(grid.dtype)) if half else v

    x, grid = _wide(x), _wide(grid)
    spatial = x.shape[2:]
    out_spatial = grid.shape[1:-1]
    result = np.zeros(x.shape[:2] + out_spatial)

    def coordinate(c, size):
        if align_corners:
            return rnd(rnd(rnd(c + 1) / 2) * (size - 1))
        return rnd(rnd(rnd(rnd(c + 1) * size) - 1) / 2)

    def padded(c, size):
        if padding_mode == "border":
            return min(max(c, 0.0), size - 1.0)
        if padding_mode == "reflection":
            low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
            span = high - low
            if span <= 0:
                return 0.0
            c = abs(c - low)
            flips, extra = divmod(c, span)
            c = low + extra if int(flips) % 2 == 0 else high - extra
            return min(max(c, 0.0), size - 1.0)
        return c

    def value(nb, idx):
        if all(0 <= idx[i] < spatial[i] for i in range(n)):
            return x[(nb, slice(None), *idx)]
        return 0.0

    for nb in range(x.shape[0]):
        for o in np.ndindex(*out_spatial):
            point = grid[(nb, *o)]
            coords = [coordinate(point[n - 1 - i], spatial[i]) for i in range(n)]
            if mode == "bicubic":
                base = [math.floor(c) for c in coords]
                acc = 0.0
                for taps in itertools.product(range(-1, 3), repeat=n):
                    weight = np.prod([_cubic(coords[i] - base[i] - taps[i], -0.75) for i in range(n)])
                    idx = [int(padded(float(base[i] + taps[i]), spatial[i])) for i in range(n)]
                    acc = acc + weight * value(nb, idx)
            else:
                coords = [padded(c, spatial[i]) for i, c in enumerate(coords)]
                if mode == "nearest":
                    acc = value(nb, [int(np.rint(c)) for c in coords])
                else:
                    acc = 0.0
                    base = [math.floor(c) for c in coords]
                    for corner in itertools.product(range(2), repeat=n):
                        weight = np.prod([(coords[i] - base[i]) if corner[i] else (1 - coords[i] + base[i])
                                          for i in range(n)])
                        acc = acc + weight * value(nb, [base[i] + corner[i] for i in range(n)])
            result[(nb, slice(None), *o)] = acc
    return result


def _ref_affine_grid(theta, size, align_corners=None):
    n = len(size) - 2
    spatial = size[2:]

    def base(steps):
        if steps <= 1:
            return np.zeros(1)
        r = np.linspace(-1, 1, steps)
        return r if align_corners else r * (steps - 1) / steps

    axes = [base(spatial[n - 1 - i]) for i in range(n)]  # x along the last dim
    points = np.stack(list(np.meshgrid(*reversed(axes), indexing="ij"))[::-1] + [np.ones(spatial)], axis=-1)
    return np.einsum("...j,nij->n...i", points, _wide(theta))


# -- samples -------------------------------------------------------------------------------------------


def _conv_samples(n):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad, low=-3, high=3)
        spatial = (6, 5, 4)[:n]
        k = (3, 2, 2)[:n]
        dilated = dtype not in _INTS or dtype is D.int64  # PyTorch has no dilated kernel for the small integers
        yield SampleInput(make((2, 4, *spatial)), (make((6, 4, *k)), make((6,))), name="bias")
        yield SampleInput(make((2, 4, *spatial), noncontiguous=True), (make((6, 2, *k)),),
                          {"stride": 2, "padding": 1, "groups": 2}, name="groups, stride, padding, noncontiguous")
        yield SampleInput(make((4, *spatial)), (make((3, 4, *k)),), {"padding": "same"}, name="unbatched, same")
        yield SampleInput(make((1, 3, *spatial)), (make((3, 1, *(2,) * n)),),
                          {"padding": "same" if dilated else "valid", "groups": 3}, name="depthwise, even kernel")
        if dilated:
            yield SampleInput(make((1, 2, *spatial)), (make((2, 2, *(2,) * n)), None),
                              {"dilation": 2, "padding": (1,) * n}, name="dilation")
        yield SampleInput(make((0, 2, *spatial)), (make((3, 2, *k)),), name="empty batch")
        yield SampleInput(make((1, 2, *spatial)), (make((3, 2, *(1,) * n)),), {"padding": "valid"}, name="1x1")
        if n == 2:
            x = make((2, 5, 4, 3)).transpose(2, 3)
            yield SampleInput(x, (make((2, 5, 2, 2)),), {"stride": (1, 2)}, name="transposed view")

    return gen


def _conv_transpose_samples(n):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad, low=-3, high=3)
        spatial = (4, 3, 3)[:n]
        k = (3, 2, 2)[:n]
        yield SampleInput(make((2, 4, *spatial)), (make((4, 3, *k)), make((3,))), name="bias")
        yield SampleInput(make((2, 4, *spatial), noncontiguous=True), (make((4, 2, *k)),),
                          {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
                          name="groups, stride, output_padding")
        yield SampleInput(make((4, *spatial)), (make((4, 2, *k)),), {"dilation": 2, "stride": (2,) * n},
                          name="unbatched, dilation")
        yield SampleInput(make((0, 2, *spatial)), (make((2, 3, *k)),), name="empty batch")

    return gen


def _convolution_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    yield SampleInput(make((2, 4, 5)), (make((6, 2, 3)), make((6,)), [2], [1], [1], False, [0], 2), name="1-d")
    yield SampleInput(make((1, 2, 4, 5)), (make((3, 2, 2, 3)), None, [1, 2], [0, 1], [1, 1], False, [0, 0], 1),
                      name="2-d")
    if dtype in _CONV_TRANSPOSE_TYPES:
        yield SampleInput(make((1, 2, 3, 3)), (make((2, 3, 2, 2)), make((3,)), [2, 2], [1, 0], [1, 1], True, [1, 0], 1),
                          name="transposed")


def _im2col_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4, 5)), (2,), name="2x2")
    yield SampleInput(make((2, 4, 5), noncontiguous=True), ((2, 3),), {"dilation": (1, 2), "padding": 1, "stride": 2},
                      name="unbatched, all parameters")
    yield SampleInput(make((0, 2, 3, 3)), (3,), {"padding": 1}, name="empty batch")


def _fold_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 12, 12)), ((4, 5), 2), name="2x2")
    yield SampleInput(make((8, 6), noncontiguous=True), ((4, 5), (2, 2)), {"padding": 1, "stride": 2, "dilation": (2, 1)},
                      name="unbatched, all parameters")
    yield SampleInput(make((0, 4, 4)), (3, 2), {"padding": 1, "stride": 2}, name="empty batch")


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


def _max_unpool_samples(n):
    def gen(opinfo, device, dtype, requires_grad):
        import ember

        make = maker(device, dtype, requires_grad)
        spatial = (6, 4, 4)[:n]
        pool = getattr(ember.nn.functional, f"max_pool{n}d")
        values, indices = pool(make((2, 3, *spatial)), 2, return_indices=True)
        yield SampleInput(values, (indices, 2), name="2")
        values, indices = pool(make((3, *(s + 1 for s in spatial))), 3, 2, 1, return_indices=True)
        yield SampleInput(values, (indices, 3, 2, 1), {"output_size": tuple(s + 1 for s in spatial)},
                          name="unbatched, output_size")

    return gen


def _pad_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    scalar = True if dtype is D.bool else 2
    yield SampleInput(make((2, 3)), ((1, 2),), name="constant")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), ((1, 0, -1, 2, 1, 1),), {"value": scalar},
                      name="constant, value, cropping")
    yield SampleInput(make(()), ((),), name="zero-dim")
    yield SampleInput(make((0, 3)), ((1, 1, 1, 1),), name="empty")
    yield SampleInput(make((2, 3, 4)), ((2, 1),), {"mode": "circular"}, name="circular")
    yield SampleInput(make((1, 2, 3, 4)), ((-1, 2, 3, 0),), {"mode": "circular"}, name="circular, cropping")
    if dtype is not D.bool:
        yield SampleInput(make((2, 3, 4)), ((3, 1),), {"mode": "reflect"}, name="reflect")
        yield SampleInput(make((1, 2, 3, 4), noncontiguous=True), ((1, 2, 2, 0),), {"mode": "reflect"},
                          name="reflect 2-d")
        yield SampleInput(make((2, 2, 3, 3)), ((1, 1, 2, 0, 0, 3),), {"mode": "replicate"}, name="replicate 3-d")
        yield SampleInput(make((3, 4)), ((-1, 2),), {"mode": "replicate"}, name="replicate, cropping")


_UINT8_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")


def _interpolate_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=0 if dtype is D.uint8 else -3, high=200 if dtype is D.uint8 else 3)
    cases = [
        ((2, 3, 5), {"scale_factor": 2}, "nearest 1-d"),
        ((1, 2, 4, 5), {"size": (3, 7)}, "nearest 2-d"),
        ((1, 2, 3, 4, 3), {"scale_factor": (1.5, 0.5, 2.0)}, "nearest 3-d"),
        ((1, 2, 5, 4), {"size": (7, 3), "mode": "nearest-exact"}, "nearest-exact"),
        ((2, 2, 5), {"size": 8, "mode": "linear", "align_corners": True}, "linear, align_corners"),
        ((1, 2, 4, 5), {"scale_factor": 1.5, "mode": "bilinear"}, "bilinear, scale_factor"),
        ((1, 2, 5, 4), {"size": (3, 6), "mode": "bilinear", "align_corners": True}, "bilinear, align_corners"),
        ((1, 2, 4, 5), {"size": (6, 3), "mode": "bicubic"}, "bicubic"),
        ((1, 2, 8, 6), {"size": (3, 4), "mode": "bilinear", "antialias": True}, "bilinear, antialias"),
        ((1, 2, 8, 6), {"size": (5, 2), "mode": "bicubic", "antialias": True}, "bicubic, antialias"),
        ((1, 2, 3, 4, 3), {"size": (4, 3, 5), "mode": "trilinear"}, "trilinear"),
        ((1, 2, 5, 7), {"size": (2, 3), "mode": "area"}, "area"),
        ((1, 2, 5), {"scale_factor": 1.7, "mode": "linear", "recompute_scale_factor": True}, "recompute_scale_factor"),
        ((0, 2, 4, 4), {"size": 3, "mode": "bilinear"}, "empty batch"),
    ]
    for shape, kwargs, name in cases:
        if dtype is D.uint8 and kwargs.get("mode", "nearest") not in _UINT8_MODES:
            continue
        if kwargs.get("antialias") and dtype in (D.float16, D.bfloat16):  # PyTorch has no such kernel
            continue
        yield SampleInput(make(shape, noncontiguous=name == "bilinear, scale_factor"), (), kwargs, name=name)


def _upsample_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((1, 2, 3, 4)), (), {"scale_factor": 2}, name="nearest")
    if dtype is not D.uint8 or opinfo.name == "upsample_bilinear":
        yield SampleInput(make((1, 2, 3, 4)), ((5, 6),), name="size")
    if opinfo.name == "upsample":
        yield SampleInput(make((1, 2, 3, 4)), ((5, 6), None, "bilinear", True), name="bilinear")


def _grid_sample_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    grid2 = ember.tensor([[[[-1.0, -1.0], [0.25, 0.5], [1.2, -0.3]], [[0.0, 0.0], [-0.9, 1.5], [0.7, 0.1]]]] * 2,
                         dtype=dtype, device=device)
    grid3 = ember.tensor([[[[[-1.0, -1.0, 0.0], [0.25, 0.5, -0.75]], [[1.2, -0.3, 0.5], [0.0, 0.25, 1.4]]]]],
                         dtype=dtype, device=device)
    yield SampleInput(make((2, 3, 4, 5)), (grid2,), {"align_corners": False}, name="bilinear")
    yield SampleInput(make((2, 2, 4, 5), noncontiguous=True), (grid2,),
                      {"mode": "nearest", "padding_mode": "border", "align_corners": True}, name="nearest, border")
    yield SampleInput(make((2, 2, 4, 5)), (grid2,), {"mode": "bicubic", "padding_mode": "reflection",
                                                     "align_corners": False}, name="bicubic, reflection")
    yield SampleInput(make((2, 2, 3, 4)), (grid2,), {"padding_mode": "reflection", "align_corners": True},
                      name="bilinear, reflection, align_corners")
    yield SampleInput(make((1, 2, 3, 4, 3)), (grid3,), {"padding_mode": "border", "align_corners": False},
                      name="trilinear 3-d")


def _affine_grid_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-1, high=1)
    yield SampleInput(make((2, 2, 3)), ((2, 3, 4, 5),), {"align_corners": False}, name="2-d")
    if dtype in (D.float32, D.float64):  # PyTorch fails on a unit size in float16/bfloat16 ("tensor_cpu")
        yield SampleInput(make((1, 2, 3)), ((1, 1, 1, 3),), {"align_corners": True}, name="2-d, a unit size")
    yield SampleInput(make((2, 3, 4)), ((2, 1, 2, 3, 4),), {"align_corners": True}, name="3-d")


def _shuffle_samples(up):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        if up:
            yield SampleInput(make((2, 8, 2, 3)), (2,), name="r=2")
            yield SampleInput(make((9, 2, 1), noncontiguous=True), (3,), name="unbatched, r=3")
            yield SampleInput(make((2, 1, 4, 2, 2)), (2,), name="extra batch dims")
        else:
            yield SampleInput(make((2, 2, 4, 6)), (2,), name="r=2")
            yield SampleInput(make((1, 6, 3), noncontiguous=True), (3,), name="unbatched, r=3")
        yield SampleInput(make((2, 3, 2, 2)), (1,), name="r=1")

    return gen


def _channel_shuffle_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 6, 3)), (3,), name="1-D, groups=3")
    yield SampleInput(make((1, 8, 2, 3), noncontiguous=True), (2,), name="2-D, groups=2")
    yield SampleInput(make((2, 4, 1, 2, 2)), (4,), name="3-D, groups=C")
    yield SampleInput(make((2, 5, 3)), (1,), name="groups=1")


# -- errors --------------------------------------------------------------------------------------------


def _z(*shape, dtype=None):
    return lambda e, d: e.zeros(*shape, dtype=dtype, device=d)


def _args(*makers):
    return lambda e, d: tuple(m(e, d) if callable(m) else m for m in makers)


_CONV_ERRORS = _errors(
    (_args(_z(2, 4, 5, 5), _z(6, 3, 3, 3)), {}, RuntimeError, "expected input\\[2, 4, 5, 5\\] to have 3 channels"),
    (_args(_z(5, 5), _z(6, 4, 3, 3)), {}, RuntimeError, "Expected 3D \\(unbatched\\) or 4D \\(batched\\) input"),
    (_args(_z(1, 4, 2, 2), _z(6, 4, 3, 3)), {}, RuntimeError, "Kernel size can't be greater than actual input size"),
    (_args(_z(1, 4, 5, 5), _z(6, 2, 3, 3)), {"groups": 4}, RuntimeError, "expected weight to be divisible by 4"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3)), {"stride": 0}, RuntimeError, "non-positive stride is not supported"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3)), {"padding": "same", "stride": 2}, RuntimeError,
     "padding='same' is not supported for strided convolutions"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3)), {"padding": "full"}, RuntimeError, "Invalid padding string: 'full'"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3), _z(5)), {}, RuntimeError, "expected bias to be 1-dimensional with 6"),
    (_args(_z(1, 4, 5, 5, dtype=D.float64), _z(6, 4, 3, 3)), {}, RuntimeError, "should be the same"),
    (_args(_z(1, 4, 5, 5, dtype=D.bool), _z(6, 4, 3, 3, dtype=D.bool)), {}, NotImplementedError,
     "not implemented for 'Bool'"),
)

_CONV_TRANSPOSE_ERRORS = _errors(
    (_args(_z(2, 4, 5, 5), _z(3, 3, 3, 3)), {}, RuntimeError, "Given transposed=1, weight of size \\[3, 3, 3, 3\\]"),
    (_args(_z(2, 4, 5, 5), _z(4, 3, 3, 3)), {"output_padding": 1}, RuntimeError,
     "output padding must be smaller than either stride or dilation"),
    (_args(_z(2, 4, 5, 5), _z(4, 3, 3, 3)), {"groups": 3}, RuntimeError, "expected weight to be divisible by 3"),
    (_args(_z(2, 4, 5, 5), _z(4, 3, 3, 3), _z(4)), {}, RuntimeError, "expected bias to be 1-dimensional with 3"),
    (_args(_z(2, 4, 5, 5, dtype=D.int32), _z(4, 3, 3, 3, dtype=D.int32)), {}, NotImplementedError,
     "not implemented for 'Int'"),
)

_CONVOLUTION_ERRORS = _errors(
    (_args(_z(4, 5, 5), _z(6, 4, 3, 3), None, [1], [0], [1], False, [0], 1), {}, RuntimeError,
     "Expected 4-dimensional input for 4-dimensional weight"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3), None, [1, 2, 3], [0], [1], False, [0], 1), {}, RuntimeError,
     "expected stride to be a single integer value or a list of 2 values"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3), None, [1], [0], [1], False, [0], 0), {}, RuntimeError,
     "non-positive groups is not supported"),
)

_IM2COL_ERRORS = _errors(
    (_args(_z(1, 2, 3, 5, 5), 2), {}, RuntimeError, "Expected 3D or 4D \\(batch mode\\) tensor"),
    (_args(_z(1, 2, 5, 5), 6), {}, RuntimeError, "calculated shape of the array of sliding blocks as \\(0, 0\\)"),
    (_args(_z(1, 2, 5, 5), 0), {}, RuntimeError, "kernel size should be greater than zero"),
    (_args(_z(1, 2, 5, 5), (2, 2, 2)), {}, RuntimeError, "It is expected kernel_size equals to 2, but got size 3"),
    (_args(_z(1, 2, 5, 5, dtype=D.int64), 2), {}, NotImplementedError, "\"im2col_out_cpu\" not implemented for 'Long'"),
)

_FOLD_ERRORS = _errors(
    (_args(_z(2, 12, 16), (6, 6), 2), {}, RuntimeError, "to match the calculated number of sliding blocks 5 \\* 5 = 25"),
    (_args(_z(2, 13, 16), (5, 5), 2), {}, RuntimeError, "to be divisible by the product of kernel_size"),
    (_args(_z(1, 2, 12, 16), (5, 5), 2), {}, RuntimeError, "Expected 2D or 3D \\(batch mode\\) tensor"),
    (_args(_z(2, 12, 16), (5, 5, 5), 2), {}, RuntimeError, "It is expected output_size equals to 2"),
)


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


def _max_unpool_errors(n):
    def values(e, d):
        return e.zeros(2, 3, *(3,) * n, device=d)

    return _errors(
        (_args(values, _z(2, 3, *(3,) * n, dtype=D.int32), 2), {}, RuntimeError, "should be type int64 but got: Int"),
        (_args(values, _z(2, 3, *(2,) * n, dtype=D.int64), 2), {}, RuntimeError, "Expected shape of indices"),
        (_args(values, lambda e, d: e.full((2, 3, *(3,) * n), 999, dtype=D.int64, device=d), 2), {}, RuntimeError,
         "Found an invalid max index: 999"),
        (_args(values, _z(2, 3, *(3,) * n, dtype=D.int64), 2), {"output_size": (9,) * n}, ValueError,
         "invalid output_size"),
        (_args(_z(3, *(3,) * n, dtype=D.int64), _z(3, *(3,) * n, dtype=D.int64), 2), {}, NotImplementedError,
         "not implemented for 'Long'"),
    )


_PAD_ERRORS = _errors(
    (_args(_z(2, 3), (1,)), {}, RuntimeError, "Padding length must be divisible by 2"),
    (_args(_z(2, 3), (1, 1) * 3), {}, RuntimeError, "Padding length should be less than or equal to two times"),
    (_args(_z(2, 3), (1, 1)), {"mode": "wrap"}, NotImplementedError, "Unrecognised padding mode wrap"),
    (_args(_z(2, 3, 4), (4, 1)), {"mode": "reflect"}, RuntimeError, "Padding size should be less than the corresponding"),
    (_args(_z(2, 3, 4), (5, 1)), {"mode": "circular"}, RuntimeError, "wrapping around more than once"),
    (_args(_z(4), (1, 1)), {"mode": "replicate"}, NotImplementedError, "Padding size 2 is not supported for 1D input"),
    (_args(_z(2, 3, 4), (1, 1)), {"mode": "reflect", "value": 1.0}, RuntimeError, "doesn't take in value argument"),
    (_args(_z(2, 3, 4, dtype=D.bool), (1, 1)), {"mode": "reflect"}, NotImplementedError, "not implemented for 'Bool'"),
)

_INTERPOLATE_ERRORS = _errors(
    (_args(_z(1, 2, 4, 4)), {}, ValueError, "either size or scale_factor should be defined"),
    (_args(_z(1, 2, 4, 4)), {"size": 2, "scale_factor": 2}, ValueError, "only one of size or scale_factor"),
    (_args(_z(1, 2, 4, 4)), {"size": (2, 2, 2)}, ValueError, "Input and output must have the same number of spatial"),
    (_args(_z(1, 2, 4, 4)), {"size": 2, "align_corners": True}, ValueError, "align_corners option can only be set"),
    (_args(_z(1, 2, 4)), {"size": 2, "mode": "bilinear"}, NotImplementedError, "Got 3D input, but bilinear mode needs 4D"),
    (_args(_z(1, 2, 4, 4)), {"size": 2, "antialias": True}, ValueError, "Anti-alias option is restricted"),
    (_args(_z(1, 2, 4, 4)), {"size": 0}, RuntimeError, "Input and output sizes should be greater than 0"),
    (_args(_z(1, 2, 4, dtype=D.uint8)), {"size": 2, "mode": "linear"}, NotImplementedError, "not implemented for 'Byte'"),
    (_args(_z(1, 2, 4, 4, dtype=D.int64)), {"size": 2}, NotImplementedError, "not implemented for 'Long'"),
)

_GRID_SAMPLE_ERRORS = _errors(
    (_args(_z(2, 3, 4, 4), _z(2, 3, 3, 2)), {"mode": "cubic", "align_corners": False}, ValueError,
     "expected mode to be 'bilinear', 'nearest' or 'bicubic'"),
    (_args(_z(2, 3, 4, 4), _z(2, 3, 3, 2)), {"padding_mode": "wrap", "align_corners": False}, ValueError,
     "expected padding_mode to be 'zeros', 'border', or 'reflection'"),
    (_args(_z(2, 3, 4, 4), _z(1, 3, 3, 2)), {"align_corners": False}, RuntimeError, "same batch size"),
    (_args(_z(2, 3, 4, 4), _z(2, 3, 3, 3)), {"align_corners": False}, RuntimeError, "to have size 2 in last dimension"),
    (_args(_z(1, 3, 4, 4, 4), _z(1, 2, 2, 2, 3)), {"mode": "bicubic", "align_corners": False}, RuntimeError,
     "bicubic interpolation only supports 4D input"),
    (_args(_z(2, 3, 4, 4, dtype=D.int64), _z(2, 3, 3, 2, dtype=D.int64)), {"align_corners": False}, NotImplementedError,
     "not implemented for 'Long'"),
)

_AFFINE_GRID_ERRORS = _errors(
    (_args(_z(2, 2, 3, dtype=D.int64), (2, 3, 4, 5)), {"align_corners": False}, ValueError,
     "Expected theta to have floating point type"),
    (_args(_z(2, 3, 4), (2, 3, 4, 5)), {"align_corners": False}, ValueError, "Expected a batch of 2D affine matrices"),
    (_args(_z(2, 2, 3), (2, 3, 4)), {"align_corners": False}, NotImplementedError, "affine_grid only supports 4D and 5D"),
    (_args(_z(2, 2, 3), (2, 3, 0, 4)), {"align_corners": False}, ValueError, "Expected non-zero, positive output size"),
)

_PIXEL_SHUFFLE_ERRORS = _errors(
    (_args(_z(2, 3), 2), {}, RuntimeError, "pixel_shuffle expects input to have at least 3 dimensions"),
    (_args(_z(2, 3, 2, 2), 2), {}, RuntimeError, "divisible by the square of upscale_factor"),
    (_args(_z(2, 4, 2, 2), 0), {}, RuntimeError, "pixel_shuffle expects a positive upscale_factor"),
    (_args(_z(2, 4, 2, 2), 2.0), {}, TypeError, "must be int"),
)

_CHANNEL_SHUFFLE_ERRORS = _errors(
    (_args(_z(2, 4), 2), {}, RuntimeError, "channel_shuffle expects input with > 2 dims"),
    (_args(_z(2, 4, 3), 0), {}, RuntimeError, "Number of groups to divide channels in must be positive"),
    (_args(_z(2, 3, 3), 2), {}, RuntimeError, "Number of channels must be divisible by groups. Got 3 channels"),
    (_args(_z(2, 4, 3), 2.0), {}, TypeError, "must be int"),
)

_PIXEL_UNSHUFFLE_ERRORS = _errors(
    (_args(_z(2, 3), 1), {}, RuntimeError, "pixel_unshuffle expects input to have at least 3 dimensions"),
    (_args(_z(2, 3, 5, 4), 2), {}, RuntimeError, "expects height to be divisible by downscale_factor"),
    (_args(_z(2, 3, 4, 5), 2), {}, RuntimeError, "expects width to be divisible by downscale_factor"),
    (_args(_z(2, 3, 4, 4), -1), {}, RuntimeError, "pixel_unshuffle expects a positive downscale_factor"),
)


# -- registration -------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("convolution", _convolution_samples, dtypes=(*_INTS, *_FLOATS), ref=_ref_convolution,
           error_inputs=_CONVOLUTION_ERRORS, tolerances=_SUM_TOLERANCES),
    OpInfo("im2col", _im2col_samples, dtypes=_FOLD_TYPES, ref=_ref_im2col, error_inputs=_IM2COL_ERRORS,
           torch_name="nn.functional.unfold"),
    OpInfo("fold", _fold_samples, dtypes=_FOLD_TYPES, ref=_ref_fold, error_inputs=_FOLD_ERRORS,
           torch_name="nn.functional.fold", tolerances=_SUM_TOLERANCES),
    OpInfo("pad", _pad_samples, dtypes=ALL_TYPES_AND_COMPLEX, ref=_ref_pad, error_inputs=_PAD_ERRORS,
           torch_name="nn.functional.pad"),
    OpInfo("interpolate", _interpolate_samples, dtypes=(D.uint8, *_FLOATS), ref=_ref_interpolate,
           error_inputs=_INTERPOLATE_ERRORS, torch_name="nn.functional.interpolate",
           tolerances={D.float32: (1e-5, 1e-5), D.uint8: (0, 1), D.float16: (4e-3, 1e-2), D.bfloat16: (1.6e-2, 2e-2)}),
    OpInfo("upsample", _upsample_samples, dtypes=(D.uint8, *_FLOATS), ref=_ref_interpolate,
           torch_name="nn.functional.upsample", tolerances={D.float32: (1e-5, 1e-5), D.uint8: (0, 1)}),
    OpInfo("upsample_nearest", _upsample_samples, dtypes=(D.uint8, *_FLOATS),
           ref=lambda x, size=None, scale_factor=None: _ref_interpolate(x, size, scale_factor),
           torch_name="nn.functional.upsample_nearest"),
    OpInfo("upsample_bilinear", _upsample_samples, dtypes=(D.uint8, *_FLOATS),
           ref=lambda x, size=None, scale_factor=None: _ref_interpolate(x, size, scale_factor, "bilinear", True),
           torch_name="nn.functional.upsample_bilinear", tolerances={D.float32: (1e-5, 1e-5), D.uint8: (0, 1)}),
    OpInfo("grid_sample", _grid_sample_samples, dtypes=_FLOATS, ref=_ref_grid_sample, error_inputs=_GRID_SAMPLE_ERRORS,
           torch_name="nn.functional.grid_sample",
           # bfloat16 coordinates (as PyTorch computes them) move sample points by up to 1/64 pixel
           tolerances={D.float32: (1e-5, 1e-5), D.float16: (4e-3, 2e-2), D.bfloat16: (5e-2, 0.4)}),
    OpInfo("affine_grid", _affine_grid_samples, dtypes=_FLOATS, ref=_ref_affine_grid, error_inputs=_AFFINE_GRID_ERRORS,
           torch_name="nn.functional.affine_grid", tolerances={D.float32: (1e-5, 1e-6)}),
    OpInfo("pixel_shuffle", _shuffle_samples(True), dtypes=ALL_TYPES_AND_COMPLEX, ref=_ref_pixel_shuffle,
           error_inputs=_PIXEL_SHUFFLE_ERRORS, torch_name="nn.functional.pixel_shuffle"),
    OpInfo("pixel_unshuffle", _shuffle_samples(False), dtypes=ALL_TYPES_AND_COMPLEX, ref=_ref_pixel_unshuffle,
           error_inputs=_PIXEL_UNSHUFFLE_ERRORS, torch_name="nn.functional.pixel_unshuffle"),
    OpInfo("channel_shuffle", _channel_shuffle_samples, dtypes=ALL_TYPES_AND_COMPLEX, ref=_ref_channel_shuffle,
           error_inputs=_CHANNEL_SHUFFLE_ERRORS, torch_name="nn.functional.channel_shuffle"),
]

for _n in (1, 2, 3):
    _INFOS += [
        OpInfo(f"conv{_n}d", _conv_samples(_n), dtypes=_CONV_TYPES, ref=_ref_conv(_n), tolerances=_SUM_TOLERANCES,
               error_inputs=_CONV_ERRORS if _n == 2 else lambda opinfo, device: iter(()),
               torch_name=f"nn.functional.conv{_n}d"),
        OpInfo(f"conv_transpose{_n}d", _conv_transpose_samples(_n), dtypes=_CONV_TRANSPOSE_TYPES,
               ref=_ref_conv_transpose(_n), tolerances=_SUM_TOLERANCES,
               error_inputs=_CONV_TRANSPOSE_ERRORS if _n == 2 else lambda opinfo, device: iter(()),
               torch_name=f"nn.functional.conv_transpose{_n}d"),
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
        OpInfo(f"max_unpool{_n}d", _max_unpool_samples(_n), dtypes=_FLOATS, ref=_ref_max_unpool(_n),
               error_inputs=_max_unpool_errors(_n), torch_name=f"nn.functional.max_unpool{_n}d"),
    ]

for _info in _INFOS:
    register_opinfo(_info)
del _info, _n
