"""The CUDA kernel of grid_sample's bilinear and nearest modes (the CuPy side of ``ember._ops.nn_grid_sample``).

Installed by :func:`register` when the CUDA backend initialises; CuPy is reached only through the arrays'
namespace, so this module imports without a GPU.
"""

from __future__ import annotations

import sys

__all__ = ["register"]


#: CuPy arrays of float32/float64 run bilinear and nearest grid sampling as one CUDA kernel (the
#: computation of ember._C.grid_sample, one thread per output value); False: the xp code of
#: ``ember._ops.nn_grid_sample._grid_sample_cpu``.
_GRID_SAMPLE_RAW_KERNEL = True

_GRID_SAMPLE_PREAMBLE = r"""
template <typename F> __device__ F gs_unnormalize(F c, long long size, bool align) {
  return align ? (c + F(1)) / F(2) * F(size - 1) : ((c + F(1)) * F(size) - F(1)) / F(2);
}
template <typename F> __device__ F gs_reflect(F c, long long twice_low, long long twice_high) {
  if (twice_low == twice_high) return F(0);
  const F low = F(twice_low) / F(2);
  const F span = F(twice_high - twice_low) / F(2);
  c = fabs(c - low);
  const F extra = fmod(c, span);
  const long long flips = (long long)floor(c / span);
  return flips % 2 == 0 ? extra + low : span - extra + low;
}
template <typename F> __device__ F gs_pad(F c, long long size, int padding, bool align) {
  if (padding == 0 || !isfinite(c)) return c;
  if (padding == 2) c = align ? gs_reflect(c, 0, 2 * (size - 1)) : gs_reflect(c, -1, 2 * size - 1);
  c = c < F(0) ? F(0) : c;
  return c < F(size - 1) ? c : F(size - 1);
}
template <typename F> __device__ long long gs_floor_index(F c, long long size) {
  if (!(c > F(-2) && c < F(size + 1))) return -2;
  return (long long)floor(c);
}
"""

_GRID_SAMPLE_SOURCE = r"""
const long long p = i % n_p;
const long long nc = i / n_p;
const long long g = (nc / n_c * n_p + p) * nd;
const T cx = gs_pad(gs_unnormalize(grid[g], size_w, align), size_w, padding, align);
const T cy = gs_pad(gs_unnormalize(grid[g + 1], size_h, align), size_h, padding, align);
const T cz = nd == 3 ? gs_pad(gs_unnormalize(grid[g + 2], size_d, align), size_d, padding, align) : T(0);
const long long plane = nc * size_d * size_h * size_w;
if (mode == 1) {
  const long long ix = gs_floor_index(nearbyint(cx), size_w), iy = gs_floor_index(nearbyint(cy), size_h),
                  iz = gs_floor_index(nearbyint(cz), size_d);
  const bool inside = ix >= 0 && ix < size_w && iy >= 0 && iy < size_h && iz >= 0 && iz < size_d;
  y = inside ? x[plane + (iz * size_h + iy) * size_w + ix] : T(0);
} else {
  const long long x0 = gs_floor_index(cx, size_w), y0 = gs_floor_index(cy, size_h);
  const long long z0 = nd == 3 ? gs_floor_index(cz, size_d) : 0;
  const T tx = cx - T(x0), ty = cy - T(y0), tz = cz - T(z0);
  T acc = T(0);
  for (int dz = 0; dz < (nd == 3 ? 2 : 1); ++dz)
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx) {
        const long long ix = x0 + dx, iy = y0 + dy, iz = z0 + dz;
        T w = (dx ? tx : T(1) - tx) * (dy ? ty : T(1) - ty);
        if (nd == 3) w *= dz ? tz : T(1) - tz;
        if (ix >= 0 && ix < size_w && iy >= 0 && iy < size_h && iz >= 0 && iz < size_d)
          acc += x[plane + (iz * size_h + iy) * size_w + ix] * w;
      }
  y = acc;
}
"""

_grid_sample_kernels = {}


def _grid_sample_device(xp, x5, points, mode, padding, align):
    """ember._C.grid_sample's computation on CuPy arrays: x5 (N, C, D, H, W), points (N, P, nd) -> (N, C, P)."""
    kernel = _grid_sample_kernels.get(xp)
    if kernel is None:
        kernel = xp.ElementwiseKernel(
            "raw T x, raw T grid, int64 n_c, int64 n_p, int64 size_d, int64 size_h, int64 size_w, int32 nd, "
            "int32 mode, int32 padding, bool align", "T y", _GRID_SAMPLE_SOURCE, "ember_grid_sample",
            preamble=_GRID_SAMPLE_PREAMBLE)
        _grid_sample_kernels[xp] = kernel
    N, C, D, H, W = x5.shape
    P, nd = points.shape[1], points.shape[2]
    y = xp.empty((N, C, P), x5.dtype)
    if y.size:
        kernel(x5.reshape(-1), points.reshape(-1), C, P, D, H, W, nd, mode, padding, bool(align), y)
    return y



def register():
    """Hand grid_sample's CuPy arrays (``ember._ops.nn_grid_sample``) to this module (idempotent)."""
    from ..._ops import nn_grid_sample

    nn_grid_sample._device = sys.modules[__name__]
