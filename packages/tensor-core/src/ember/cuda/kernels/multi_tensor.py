"""``clip_grad_norm_`` of CUDA gradients in three launches, with nothing read back.

The list-op route takes one norm per gradient, a stack, a norm of the norms and one multiplication per
gradient: for the 50 gradients of a small GPT about 300 launches, each a few microseconds of host time.
Here the gradients (float32 or float64, one device, C-contiguous) are seen as one concatenation, as in the
fused Adam step (:mod:`.optim_kernels`, whose by-value pointer table this module shares in spirit):

1. ``ember_sumsq``: each block sums the squares of a fixed chunk of the concatenation in float64 and writes
   its partial sum;
2. ``ember_clip_coef``: one block adds the partial sums in a fixed order and writes the total norm
   ``sqrt(sum)`` and the clip coefficient ``min(max_norm / (total + 1e-6), 1)`` (both in the gradients'
   dtype, as PyTorch computes them on the tensors);
3. ``ember_scale``: every gradient element multiplied by the coefficient, read on the device.

The result is deterministic (fixed chunks, fixed order of additions); the squares are summed in float64, so
the norm may differ from the list-op route's float32 norm of norms in its last bits.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..._dtype import numpy_dtype_name
from .._runtime import cupy_module

__all__ = ["clip_grad_norm_", "supported"]

_CHUNK = 16384  # elements per block of the sum of squares and of the scaling
_THREADS = 256
#: Tensors per launch: the by-value table holds ``2 * _MAX_TENSORS + 1`` int64 words (3208 bytes), under CUDA's
#: 4 KB of kernel arguments with the others.
_MAX_TENSORS = 200
_TABLE_WORDS = 2 * _MAX_TENSORS + 1
_TABLE_DTYPE = np.dtype((np.void, 8 * _TABLE_WORDS))
_CTYPES = {"float32": "float", "float64": "double"}

_SOURCE = r"""
// Passed by value: n data pointers, then the n + 1 running sizes of the tensors.
struct Table { long long w[2 * MAX_TENSORS + 1]; };

__device__ __forceinline__ int first_tensor(const Table& table, int n, long long start) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {  // the last tensor whose range starts at or before start
        const int mid = (lo + hi + 1) >> 1;
        if (table.w[n + mid] <= start) lo = mid; else hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ double block_sum(double s, double* shared) {
    shared[threadIdx.x] = s;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half >>= 1) {  // a fixed order: the same bits every run
        if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    return shared[0];
}

extern "C" __global__ void __launch_bounds__(THREADS)
ember_sumsq(const Table table, int n, long long total, double* __restrict__ partials, long long base) {
    __shared__ double shared[THREADS];
    const long long start = (long long)blockIdx.x * CHUNK;
    const long long end = start + CHUNK < total ? start + CHUNK : total;
    int k = first_tensor(table, n, start);
    double s = 0.0;
    for (long long e = start + threadIdx.x; e < end; e += blockDim.x) {
        while (e >= table.w[n + k + 1]) k++;
        const double v = (double)((const T*)table.w[k])[e - table.w[n + k]];
        s += v * v;
    }
    s = block_sum(s, shared);
    if (threadIdx.x == 0) partials[base + blockIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(1024)
ember_clip_coef(const double* __restrict__ partials, long long count, double max_norm, T* __restrict__ norm,
                T* __restrict__ coef) {
    __shared__ double shared[1024];
    double s = 0.0;
    for (long long i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
    s = block_sum(s, shared);
    if (threadIdx.x == 0) {
        const T total = (T)sqrt(s);
        T c = (T)max_norm / (total + (T)1e-6);
        norm[0] = total;
        coef[0] = c < (T)1 ? c : (T)1;  // (a NaN coefficient stays NaN, as clamp keeps it)
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
ember_scale(const Table table, int n, long long total, const T* __restrict__ coef) {
    const long long start = (long long)blockIdx.x * CHUNK;
    const long long end = start + CHUNK < total ? start + CHUNK : total;
    const T c = coef[0];
    int k = first_tensor(table, n, start);
    for (long long e = start + threadIdx.x; e < end; e += blockDim.x) {
        while (e >= table.w[n + k + 1]) k++;
        T* g = (T*)table.w[k];
        g[e - table.w[n + k]] *= c;
    }
}
"""

_modules = {}  # (device, dtype name) -> (sumsq, clip_coef, scale) kernels, or None when they did not compile


def _kernels(cp, dtype):
    key = (cp.cuda.runtime.getDevice(), dtype)
    entry = _modules.get(key, False)
    if entry is False:
        # the source depends on the dtype only, so CuPy's on-disk cache finds it in a new process
        code = (f"#define T {_CTYPES[dtype]}\n#define CHUNK {_CHUNK}\n#define THREADS {_THREADS}\n"
                f"#define MAX_TENSORS {_MAX_TENSORS}\n{_SOURCE}")
        try:
            module = cp.RawModule(code=code)
            entry = tuple(module.get_function(name) for name in ("ember_sumsq", "ember_clip_coef", "ember_scale"))
        except Exception as exc:  # a kernel that does not build leaves clip_grad_norm_ to the list ops
            warnings.warn(f"ember: the CUDA clip_grad_norm_ kernels for {dtype} did not compile "
                          f"({type(exc).__name__}: {exc}); clip_grad_norm_ takes the list ops", RuntimeWarning,
                          stacklevel=3)
            entry = None
        _modules[key] = entry
    return entry


def supported(arrays):
    """Whether :func:`clip_grad_norm_` takes these CuPy arrays: at least one, all of one dtype (float32 or
    float64) and device, C-contiguous."""
    if not arrays:
        return False
    first = arrays[0]
    dtype, device = first.dtype, first.data.device_id
    if numpy_dtype_name(dtype) not in _CTYPES:
        return False
    return all(a.dtype == dtype and a.data.device_id == device and a._c_contiguous for a in arrays)


def _tables(arrays):
    """``(table, n, total)`` per launch: the by-value tables of at most :data:`_MAX_TENSORS` arrays each."""
    for first in range(0, len(arrays), _MAX_TENSORS):
        part = arrays[first:first + _MAX_TENSORS]
        words = [a.data.ptr for a in part]
        total = 0
        words.append(0)
        for a in part:
            total += a.size
            words.append(total)
        table = np.zeros(_TABLE_WORDS, np.uint64)  # addresses may not fit int64; the kernel reads the same bits
        table[: len(words)] = words
        yield table.view(_TABLE_DTYPE), len(part), total


def clip_grad_norm_(arrays, max_norm):
    """Scale the CuPy ``arrays`` (see :func:`supported`) in place so that their total 2-norm is at most
    ``max_norm``; returns the total norm before clipping as a 0-d CuPy array of their dtype, or None when the
    kernels are not available (then nothing was done). Nothing is read back: three launches (more for over
    :data:`_MAX_TENSORS` arrays)."""
    cp = cupy_module()
    dtype = numpy_dtype_name(arrays[0].dtype)
    with cp.cuda.Device(arrays[0].data.device_id):
        kernels = _kernels(cp, dtype)
        if kernels is None:
            return None
        sumsq, clip_coef, scale = kernels
        tables = [t for t in _tables(arrays) if t[2]]
        blocks = [(total + _CHUNK - 1) // _CHUNK for _, _, total in tables]
        partials = cp.ndarray(max(sum(blocks), 1), np.float64)
        if not tables:
            partials.fill(0)  # no element: a norm of 0
        base = 0
        for (table, n, total), count in zip(tables, blocks):
            sumsq((count,), (_THREADS,), (table, np.int32(n), np.int64(total), partials, np.int64(base)))
            base += count
        norm = cp.ndarray((), arrays[0].dtype)
        coef = cp.ndarray((), arrays[0].dtype)
        clip_coef((1,), (1024,), (partials, np.int64(max(base, 1)), np.float64(max_norm), norm, coef))
        for (table, n, total), count in zip(tables, blocks):
            scale((count,), (_THREADS,), (table, np.int32(n), np.int64(total), coef))
    return norm
