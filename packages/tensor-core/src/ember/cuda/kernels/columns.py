"""Kernels over the columns of a row-major matrix: a bias added to every row, and the sums of the columns.

These are the two halves of a bias in a training step, ``linear``'s ``x @ w.T + b`` and its gradient
``sum(grad, 0)``. Each is one small CUDA C kernel compiled by NVRTC (``cupy.RawKernel``), launched for
about 5 µs of host time on the H200's machine, where a cuBLAS call costs about 20 µs and CuPy's
reduction over the leading axes about 65 µs (and 380 µs of GPU time on a (16384, 3072) float32 matrix).

* :func:`add_to_rows` adds ``b[j]`` to ``out[i, j]`` in place: one IEEE addition per element, so the
  result is that of ``matmul`` then ``add``.
* :func:`column_sums` sums each column in a fixed order with a float64 accumulator: chunks of
  :data:`CHUNK` rows in one launch, then the chunks' sums (the same order on every run, so the sums
  are deterministic). float32 and float16 sums are rounded once, from float64.

float16 (autocast's dtype on cuda) is stored as 16-bit words and converted with the PTX ``cvt``
instructions (no header needed): ``add_to_rows`` adds in float32 and rounds once to float16, which is
CuPy's float16 addition (the generic path's).
"""

from __future__ import annotations

import numpy as np

from .._runtime import cupy_module

__all__ = ["add_to_rows", "column_sums", "CHUNK", "DTYPES"]

#: rows summed by one thread in the first pass of :func:`column_sums`
CHUNK = 256
_THREADS = 256
_MAX_BLOCKS = 4096  # the grid-stride loop of add_to_rows covers the rest
_MAX_GRID_Y = 65535
_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.float16): "unsigned short"}
#: the dtypes the kernels take
DTYPES = frozenset(_CTYPES)

# Loads give float32 for float16 words (float32 and float64 as they are); stores round to the destination's
# type (float16 from float32 or float64 in one rounding, by cvt.rn).
_CONVERSIONS = r"""
#if !defined(__CUDACC__)  /* the host tests compile these kernels with g++ */
#define __device__
#define __forceinline__ inline
#endif
__device__ __forceinline__ float ember_load(float x) { return x; }
__device__ __forceinline__ double ember_load(double x) { return x; }
__device__ __forceinline__ void ember_store(float& d, float v) { d = v; }
__device__ __forceinline__ void ember_store(float& d, double v) { d = (float)v; }
__device__ __forceinline__ void ember_store(double& d, double v) { d = v; }
#if defined(__CUDACC__)
__device__ __forceinline__ float ember_load(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ void ember_store(unsigned short& d, float v) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); d = h;
}
__device__ __forceinline__ void ember_store(unsigned short& d, double v) {
    unsigned short h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(v)); d = h;
}
#else
inline float ember_load(unsigned short h) { _Float16 f; __builtin_memcpy(&f, &h, 2); return (float)f; }
inline void ember_store(unsigned short& d, float v) { _Float16 f = (_Float16)v; __builtin_memcpy(&d, &f, 2); }
inline void ember_store(unsigned short& d, double v) { _Float16 f = (_Float16)v; __builtin_memcpy(&d, &f, 2); }
#endif
"""

_SOURCES = {}  # kernel name -> its CUDA C, compiled on its own with the kernel's type defines
_SOURCES["ember_add_to_rows"] = _CONVERSIONS + r"""
extern "C" __global__ void ember_add_to_rows(T* __restrict__ out, const T* __restrict__ bias,
                                             long long n, long long cols) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        ember_store(out[i], ember_load(out[i]) + ember_load(bias[i % cols]));
    }
}
"""
_SOURCES["ember_column_sums"] = _CONVERSIONS + r"""
extern "C" __global__ void ember_column_sums(const IN* __restrict__ x, OUT* __restrict__ out,
                                             long long rows, long long cols, long long chunk) {
    const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    const long long start = (long long)blockIdx.y * chunk;
    const long long end = start + chunk < rows ? start + chunk : rows;
    double acc = 0.0;
    for (long long r = start; r < end; ++r) acc += (double)ember_load(x[r * cols + col]);
    ember_store(out[(long long)blockIdx.y * cols + col], acc);
}
"""

_kernels = {}


def _kernel(name, **types):
    key = (name, *sorted(types.items()))
    fn = _kernels.get(key)
    if fn is None:
        defines = "".join(f"#define {k} {v}\n" for k, v in types.items())
        # --fmad=false: no multiply-add contraction, so every result is the plain IEEE operation
        fn = _kernels[key] = cupy_module().RawKernel(defines + _SOURCES[name], name, options=("--fmad=false",))
    return fn


def add_to_rows(out, bias):
    """``out[i, j] += bias[j]`` in place, for a C-contiguous (M, N) CuPy array ``out`` and a C-contiguous (N,)
    ``bias`` of the same dtype (float32, float64 or float16) on the current GPU. Returns ``out``."""
    n = out.size
    if n == 0:
        return out
    blocks = min((n + _THREADS - 1) // _THREADS, _MAX_BLOCKS)
    _kernel("ember_add_to_rows", T=_CTYPES[out.dtype])((blocks,), (_THREADS,),
                                                        (out, bias, np.int64(n), np.int64(out.shape[1])))
    return out


def column_sums(x):
    """The sums of the columns of a C-contiguous (M, N) CuPy array ``x`` (float32, float64 or float16, M and N > 0) on
    the current GPU: a new (N,) array of ``x``'s dtype, accumulated in float64 in a fixed order."""
    cp = cupy_module()
    rows, cols = x.shape
    ctype = _CTYPES[x.dtype]
    chunk = max(CHUNK, -(-rows // _MAX_GRID_Y))
    chunks = -(-rows // chunk)
    col_blocks = (cols + _THREADS - 1) // _THREADS
    if chunks == 1:
        out = cp.ndarray(cols, x.dtype)
        _kernel("ember_column_sums", IN=ctype, OUT=ctype)((col_blocks, 1), (_THREADS,),
                                                          (x, out, np.int64(rows), np.int64(cols), np.int64(chunk)))
        return out
    partial = cp.ndarray((chunks, cols), np.float64)
    _kernel("ember_column_sums", IN=ctype, OUT="double")((col_blocks, chunks), (_THREADS,),
                                                         (x, partial, np.int64(rows), np.int64(cols), np.int64(chunk)))
    out = cp.ndarray(cols, x.dtype)
    _kernel("ember_column_sums", IN="double", OUT=ctype)((col_blocks, 1), (_THREADS,),
                                                         (partial, out, np.int64(chunks), np.int64(cols),
                                                          np.int64(chunks)))
    return out
