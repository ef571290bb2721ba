"""CUDA kernels of max, average and adaptive pooling (the CuPy side of ``ember._ops.nn_pooling``).

The pooling ops' CPU kernels are also their CUDA kernels: they hand arrays that are not numpy's to this
module (installed by :func:`register` when the CUDA backend initialises). CuPy is reached only through the
arrays' namespace, so this module imports without a GPU.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ..._ops._array_module import array_namespace as _array_namespace
from ..._ops._nn_common import _HALF_TYPES
from ..._ops._spatial import _compute, _lift3, _memoized
from ..._ops.nn_pooling import _max_pool_any

__all__ = ["register", "max_pool"]


# -- pooling over any array namespace (CuPy arrays; numpy arrays keep the ember._C kernels) ---------------
#
# The windows of a pool are a strided view (planes, *out, *kernel) of the (padded) input, reduced over
# the kernel axes in one launch; adaptive windows (unequal sizes) are gathered with one ``take``. Index
# maps and masks of window taps depend only on shapes: they are built on the host with numpy (metadata,
# memoised) and uploaded once per GPU (``_uploaded``). On CuPy arrays max pooling itself runs one CUDA
# kernel (``_max_pool_device``, below); its window reductions (``_max_pool_xp``) remain the fallback.
# These functions take numpy arrays too, where tests/cuda/test_cuda_pool.py checks them against ember._C.


_DEVICE_COPIES = {}


def _uploaded(xp, host):
    """``host`` (a memoised numpy index map or mask: metadata) on the current GPU, uploaded once while it lives."""
    if xp is np:
        return host
    key = (id(host), xp.cuda.runtime.getDevice())
    entry = _DEVICE_COPIES.get(key)
    if entry is None or entry[0] is not host:  # the entry keeps ``host`` alive, so its id is not reused meanwhile
        if len(_DEVICE_COPIES) >= 256:
            _DEVICE_COPIES.clear()
        entry = _DEVICE_COPIES[key] = (host, xp.asarray(host))
    return entry[1]


def _lowest(dtype):
    """The value that never wins a max: the minimum of integer dtypes, else -inf."""
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _padded_planes_xp(xp, x, n, lo, hi, fill):
    """``x`` (…, *spatial) as (planes, *spatial), ``lo``/``hi`` cells of ``fill`` added on each side."""
    spatial = x.shape[x.ndim - n:]
    planes = x.reshape((-1, *spatial))
    if not any(lo) and not any(hi):
        return planes
    padded = xp.full((planes.shape[0], *(a + size + b for a, size, b in zip(lo, spatial, hi))), fill, x.dtype)
    padded[(slice(None), *(slice(a, a + size) for a, size in zip(lo, spatial)))] = planes
    return padded


def _pool_windows_xp(xp, planes, k, s, d, out):
    """The strided view (planes, *out, *k) of every window of ``planes`` (planes, *spatial); read it only."""
    n = len(k)
    st = planes.strides
    shape = (planes.shape[0], *out, *k)
    strides = (st[0], *(st[1 + i] * s[i] for i in range(n)), *(st[1 + i] * d[i] for i in range(n)))
    return xp.lib.stride_tricks.as_strided(planes, shape, strides)


def _window_pick(xp, windows, values, valid, window_dims=1):
    """The tap (0..K-1) of every window that ember._C's max pools report for its maximum ``values``.

    ``windows`` is (P, *cells, *taps) with ``window_dims`` tap dims, ``values`` (P, *cells); the result
    is (P, cells). The first maximum wins, or the last NaN of a window holding NaN (``values`` is NaN
    there). ``valid`` (cells, K) masks taps outside the input (None: all are inside).
    """
    hit = windows == values.reshape(values.shape + (1,) * window_dims)
    nan_kind = windows.dtype.kind == "f"
    if nan_kind:
        hit |= xp.isnan(windows)  # a window holding NaN has NaN as its maximum: its NaN taps are the hits
    planes = hit.shape[0]
    cells = math.prod(values.shape[1:])
    taps = math.prod(windows.shape[windows.ndim - window_dims:])
    hit = hit.reshape(planes, cells, taps)  # hit is a new contiguous array: a free reshape
    if valid is not None:
        hit &= valid
    first = xp.argmax(hit, axis=-1)  # argmax picks the first of equal values (numpy and CuPy alike)
    if not nan_kind:
        return first
    last = (hit.shape[-1] - 1) - xp.argmax(hit[..., ::-1], axis=-1)
    return xp.where(xp.isnan(values.reshape(planes, cells)), last, first)


@_memoized
def _max_pool_taps(spatial, k, s, p, d, out):
    """Host metadata of a max pool's windows: flat input index = ``start[cell] + offset[tap]`` of every tap.

    Returns ``(start (cells,), offset (K,), valid (cells, K) bool or None when every tap is inside)``.
    """
    n = len(k)
    start = np.zeros((1,) * n, np.int64)
    offset = np.zeros((1,) * n, np.int64)
    valid = np.ones((1,) * (2 * n), bool)
    for i in range(n):
        first = np.arange(out[i]) * s[i] - p[i]
        taps = np.arange(k[i]) * d[i]
        shape = [1] * n
        shape[i] = -1
        start = start * spatial[i] + first.reshape(shape)
        offset = offset * spatial[i] + taps.reshape(shape)
        pos = first[:, None] + taps[None, :]
        inside = ((pos >= 0) & (pos < spatial[i])).reshape([out[i] if j == i else k[i] if j == n + i else 1
                                                            for j in range(2 * n)])
        valid = valid & inside
    valid = np.broadcast_to(valid, (*out, *k)).reshape(math.prod(out), math.prod(k))
    return start.reshape(-1), offset.reshape(-1), None if valid.all() else valid


def _max_pool_xp(x, n, k, s, p, d, out, with_indices):
    """Max pooling of an array of any namespace (…, *spatial): as ``_max_pool_run``, same values and indices."""
    xp = _array_namespace(x)
    lead, spatial = x.shape[:x.ndim - n], x.shape[x.ndim - n:]
    hi = [max(0, (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - p[i] - spatial[i]) for i in range(n)]
    planes = _padded_planes_xp(xp, x, n, p, hi, _lowest(x.dtype))
    windows = _pool_windows_xp(xp, planes, k, s, d, out)
    values = windows.max(axis=tuple(range(n + 1, 2 * n + 1)))
    if not with_indices:
        return values.reshape((*lead, *out))
    start, offset, valid = _max_pool_taps(tuple(spatial), tuple(k), tuple(s), tuple(p), tuple(d), tuple(out))
    tap = _window_pick(xp, windows, values, None if valid is None else _uploaded(xp, valid), n)
    indices = _uploaded(xp, start) + xp.take(_uploaded(xp, offset), tap)
    return values.reshape((*lead, *out)), indices.reshape((*lead, *out))


#: CuPy arrays max-pool in one CUDA kernel (ember._C.max_pool's loop, one thread per output value);
#: False: :func:`_max_pool_xp`'s window reductions (about a dozen launches with indices).
_MAX_POOL_RAW_KERNEL = True

# element i of the output (P, oD, oH, oW): the maximum of its window and the window's flat plane index of
# it, the first maximum or the last NaN, as ember._C.max_pool
_MAX_POOL_SOURCE = r"""
long long r = i;
const long long ow = r % out_w; r /= out_w;
const long long oh = r % out_h; r /= out_h;
const long long od = r % out_d;
const long long pl = r / out_d;
long long d0 = od * s_d - p_d, h0 = oh * s_h - p_h, w0 = ow * s_w - p_w;
const long long d_end = d0 + (k_d - 1) * dil_d + 1, h_end = h0 + (k_h - 1) * dil_h + 1;
const long long w_end = w0 + (k_w - 1) * dil_w + 1;
const long long d1 = d_end < size_d ? d_end : size_d, h1 = h_end < size_h ? h_end : size_h;
const long long w1 = w_end < size_w ? w_end : size_w;
while (d0 < 0) d0 += dil_d;
while (h0 < 0) h0 += dil_h;
while (w0 < 0) w0 += dil_w;
long long best = (d0 * size_h + h0) * size_w + w0;
T m = lowest;
const long long base = pl * size_d * size_h * size_w;
for (long long dd = d0; dd < d1; dd += dil_d)
  for (long long hh = h0; hh < h1; hh += dil_h) {
    const long long row = (dd * size_h + hh) * size_w;
    for (long long ww = w0; ww < w1; ww += dil_w) {
      const T v = x[base + row + ww];
      if (v > m || v != v) {
        m = v;
        best = row + ww;
      }
    }
  }
y = m;
"""
_MAX_POOL_PARAMS = ("raw T x, T lowest, int64 size_d, int64 size_h, int64 size_w, int64 out_d, int64 out_h, "
                    "int64 out_w, int64 k_d, int64 k_h, int64 k_w, int64 s_d, int64 s_h, int64 s_w, int64 p_d, "
                    "int64 p_h, int64 p_w, int64 dil_d, int64 dil_h, int64 dil_w")
_max_pool_kernels = {}


def _max_pool_device(xp, x, n, k, s, p, d, out, with_indices):
    """Max pooling of a CuPy array (…, *spatial) in one kernel: values, or (values, int64 indices)."""
    kernel = _max_pool_kernels.get((xp, with_indices))
    if kernel is None:
        outputs = "T y, int64 best_index" if with_indices else "T y"
        source = _MAX_POOL_SOURCE + ("best_index = best;\n" if with_indices else "")
        name = "ember_max_pool_indices" if with_indices else "ember_max_pool"
        kernel = _max_pool_kernels[xp, with_indices] = xp.ElementwiseKernel(_MAX_POOL_PARAMS, outputs, source, name)
    lead, spatial = x.shape[:x.ndim - n], x.shape[x.ndim - n:]
    planes = xp.ascontiguousarray(x).reshape(-1)
    shape = (*lead, *out)
    values = xp.empty(shape, x.dtype)
    indices = xp.empty(shape, np.int64) if with_indices else None
    if values.size:
        args = (planes, x.dtype.type(_lowest(x.dtype)), *_lift3(spatial, 1), *_lift3(out, 1), *_lift3(k, 1),
                *_lift3(s, 1), *_lift3(p, 0), *_lift3(d, 1), values)
        if with_indices:
            kernel(*args, indices)
        else:
            kernel(*args)
    return (values, indices) if with_indices else values


def max_pool(x, n, k, s, p, d, out, with_indices):
    """Max pooling of a CuPy array: one CUDA kernel, or :func:`_max_pool_xp` (``_MAX_POOL_RAW_KERNEL`` off).

    float16 and bfloat16 pool in float32 (exact: the maxima are input values), as on CPU.
    """
    data = _compute(x)
    if _MAX_POOL_RAW_KERNEL:
        result = _max_pool_device(_array_namespace(x), data, n, k, s, p, d, out, with_indices)
    else:
        result = _max_pool_xp(data, n, k, s, p, d, out, with_indices)
    if data is x:
        return result
    if with_indices:
        return result[0].astype(x.dtype), result[1]
    return result.astype(x.dtype)


@_memoized
def _avg_pool_divisors(spatial, k, s, p, out, count_include_pad):
    """Host metadata: every window's divisor as ember._C's avg_pool (int64, shape ``out``), or an int if all agree."""
    n = len(k)
    divisor = np.ones((1,) * n, np.int64)
    for i in range(n):
        first = np.arange(out[i]) * s[i] - p[i]
        last = np.minimum(first + k[i], spatial[i] + p[i])
        size = last - first if count_include_pad else np.minimum(last, spatial[i]) - np.maximum(first, 0)
        shape = [1] * n
        shape[i] = -1
        divisor = divisor * size.reshape(shape)
    divisor = np.broadcast_to(divisor, out)
    return int(divisor.flat[0]) if (divisor == divisor.flat[0]).all() else np.ascontiguousarray(divisor)


def _truncating_divide(total, divisor):
    """Integer ``total / divisor`` rounded toward zero (C's division), for a positive ``divisor``."""
    quotient = total // divisor
    return quotient + ((total < 0) & (quotient * divisor != total))


def _avg_pool_xp(x, n, k, s, p, out, count_include_pad, divisor_override):
    """Average pooling of an array of any namespace (…, *spatial): as ``_avg_pool_run``."""
    xp = _array_namespace(x)
    lead, spatial = x.shape[:x.ndim - n], x.shape[x.ndim - n:]
    data = _compute(x)
    hi = [max(0, (out[i] - 1) * s[i] + k[i] - p[i] - spatial[i]) for i in range(n)]
    planes = _padded_planes_xp(xp, data, n, p, hi, 0)
    windows = _pool_windows_xp(xp, planes, k, s, (1,) * n, out)
    total = windows.sum(axis=tuple(range(n + 1, 2 * n + 1)), dtype=data.dtype)
    if divisor_override is not None and divisor_override > 0:
        divisor = int(divisor_override)
    else:
        divisor = _avg_pool_divisors(tuple(spatial), tuple(k), tuple(s), tuple(p), tuple(out), bool(count_include_pad))
    if data.dtype.kind == "i":
        result = _truncating_divide(total, divisor if type(divisor) is int else _uploaded(xp, divisor))
    elif type(divisor) is int:
        result = total / data.dtype.type(divisor)
    else:
        result = total / _uploaded(xp, divisor).astype(data.dtype, copy=False)
    return result.reshape((*lead, *out)).astype(x.dtype, copy=False)



@_memoized
def _adaptive_taps(spatial, out):
    """Host metadata of adaptive pooling windows.

    Returns the flat input index (cells, K) of every tap of the widest window (clipped into the
    input), whether each tap is inside its window (None: all are), and the windows' sizes (cells,).
    """
    n = len(out)
    index = np.zeros((1,) * (2 * n), np.int64)
    valid = np.ones((1,) * (2 * n), bool)
    sizes = np.ones((1,) * n, np.int64)
    widths = []
    for i in range(n):
        o = np.arange(out[i])
        first = (o * spatial[i]) // out[i]
        last = -((-(o + 1) * spatial[i]) // out[i])
        widths.append(int((last - first).max()))
        pos = first[:, None] + np.arange(widths[i])[None, :]
        shape = [out[i] if j == i else widths[i] if j == n + i else 1 for j in range(2 * n)]
        index = index * spatial[i] + np.minimum(pos, spatial[i] - 1).reshape(shape)
        valid = valid & (pos < last[:, None]).reshape(shape)
        size_shape = [1] * n
        size_shape[i] = -1
        sizes = sizes * (last - first).reshape(size_shape)
    cells, taps = math.prod(out), math.prod(widths)
    index = np.broadcast_to(index, (*out, *widths)).reshape(cells, taps)
    valid = np.broadcast_to(valid, (*out, *widths)).reshape(cells, taps)
    return index, None if valid.all() else valid, np.broadcast_to(sizes, out).reshape(-1)


def _adaptive_windows_xp(xp, planes, spatial, sizes, fill):
    """Every adaptive window of ``planes`` (P, plane size) gathered as (P, cells, K), ``fill`` at taps
    outside the window; with the host index map (cells, K) and the windows' sizes (cells,)."""
    index, valid, counts = _adaptive_taps(tuple(spatial), tuple(sizes))
    windows = xp.take(planes, _uploaded(xp, index).reshape(-1), axis=1).reshape(planes.shape[0], *index.shape)
    if valid is not None:
        windows = xp.where(_uploaded(xp, valid), windows, windows.dtype.type(fill))
    return windows, index, counts


def _adaptive_avg_xp(x, n, sizes, shape):
    """Adaptive average pooling of an array of any namespace: window sums divided by their sizes, as ember._C."""
    xp = _array_namespace(x)
    if 0 in sizes:
        return xp.zeros(shape, x.dtype)
    data = _compute(x)
    spatial = x.shape[x.ndim - n:]
    planes = data.reshape(-1, math.prod(spatial))
    if all(spatial[i] % sizes[i] == 0 for i in range(n)):  # equal windows that tile the input: a reshape
        split = []
        for i in range(n):
            split += [sizes[i], spatial[i] // sizes[i]]
        total = planes.reshape(planes.shape[0], *split).sum(axis=tuple(range(2, 2 * n + 1, 2)))
        result = total / data.dtype.type(math.prod(spatial) // math.prod(sizes))
    else:
        windows, _, counts = _adaptive_windows_xp(xp, planes, spatial, sizes, 0)
        result = windows.sum(axis=-1) / _uploaded(xp, counts).astype(data.dtype, copy=False)
    return result.reshape(shape).astype(x.dtype, copy=False)


def _adaptive_max_xp(x, n, sizes, shape):
    """Adaptive max pooling of an array of any namespace: values and indices as ember._C's.

    float16 and bfloat16 pool in float32 (exact: the maxima are input values), as on CPU.
    """
    xp = _array_namespace(x)
    if 0 in sizes:
        return xp.zeros(shape, x.dtype), xp.zeros(shape, np.int64)
    if x.dtype in _HALF_TYPES:
        values, indices = _adaptive_max_xp(_compute(x), n, sizes, shape)
        return values.astype(x.dtype), indices
    spatial = x.shape[x.ndim - n:]
    if all(spatial[i] % sizes[i] == 0 for i in range(n)):  # equal windows that tile the input: a max pool
        k = tuple(spatial[i] // sizes[i] for i in range(n))
        values, indices = _max_pool_any(x, n, k, k, (0,) * n, (1,) * n, tuple(sizes), True)
        return values.reshape(shape), indices.reshape(shape)
    planes = x.reshape(-1, math.prod(spatial))
    windows, index, _ = _adaptive_windows_xp(xp, planes, spatial, sizes, _lowest(x.dtype))
    values = windows.max(axis=-1)
    # taps past a window hold the lowest value; tap 0 is always inside, so they are never the first maximum
    tap = _window_pick(xp, windows, values, None)
    index = _uploaded(xp, index)
    indices = index[xp.arange(index.shape[0]), tap]
    return values.reshape(shape), indices.reshape(shape)



def register():
    """Hand the CuPy arrays of the pooling ops' kernels (``ember._ops.nn_pooling``) to this module (idempotent)."""
    from ..._ops import nn_pooling

    nn_pooling._device = sys.modules[__name__]
