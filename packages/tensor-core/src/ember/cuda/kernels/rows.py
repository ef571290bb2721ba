"""Fused CUDA row kernels: softmax, log_softmax, layer_norm, cross_entropy and nll_loss (and their backward).

Each op here is one or two kernel launches where its CPU kernel run on CuPy arrays (the generic path of
:mod:`ember.cuda._backend`) or its decomposition would launch ten or more. The kernels are CUDA C
compiled by NVRTC through ``cupy.RawKernel`` (CuPy caches the binaries on disk), written so that:

* one warp handles a row of up to 512 elements (four rows per 128-thread block), and one block a longer
  row; a row of up to 16 values per thread is held in registers and read from memory once, a longer one
  is read twice (an online max/sum pass, then the output pass);
* reductions are warp shuffles, then one exchange through shared memory for block rows;
* float16 and bfloat16 are loaded as 16-bit words and converted with PTX instructions or bit arithmetic
  (no CUDA headers are needed), and every statistic is accumulated in float32 (float64 for float64);
* an op along a non-last dimension, ``(outer, C, inner)``, runs a column kernel (one thread per
  ``(outer, inner)`` pair, loads coalesced along ``inner``) when there are enough pairs to fill the GPU,
  else moves the dimension last (two copies) and runs the row kernel.

:func:`register` installs the forward kernels as the ``cuda`` kernels of the registry ops ``softmax``,
``log_softmax``, ``softmin``, ``layer_norm``, ``cross_entropy`` and ``nll_loss``; calls a kernel does not take
(probability targets of ``cross_entropy``, dtypes other than float16/bfloat16/float32/float64) run the op's
decomposition, as they did before these kernels. The backward functions (:func:`softmax_backward`,
:func:`log_softmax_backward`, :func:`layer_norm_backward`, :func:`cross_entropy_backward`) work on CuPy
arrays, and their ``*_tensor`` forms on CUDA tensors, for the derivative formulas (backward passes that record
nothing).
"""

from __future__ import annotations

import math

import numpy as np

from ..._dtype import numpy_dtype_name
from .. import _async_errors
from .._runtime import cupy_module
from .halves import CTYPES, SOURCE

__all__ = [
    "register",
    "softmax_forward",
    "softmax_backward",
    "log_softmax_backward",
    "layer_norm_forward",
    "layer_norm_backward",
    "cross_entropy_forward",
    "cross_entropy_backward",
    "nll_loss_forward",
    "softmax_backward_tensor",
    "layer_norm_backward_tensor",
    "cross_entropy_backward_tensor",
    "CHECK_TARGETS",
]

#: Whether cross_entropy/nll_loss report a class index outside ``[0, C)`` that is not ``ignore_index`` with
#: CPU's ``IndexError``. The kernel flags such a target in device memory either way, and its loss term (and
#: weight) is NaN, so a bad target never passes silently. The flag is read at the next synchronizing call
#: (:mod:`ember.cuda._async_errors`: the next host read of a cuda tensor, or ``ember.cuda.synchronize()``),
#: which raises the error, as PyTorch's CUDA kernels report theirs through a device assert; reading it at
#: once would make every call wait for the GPU. False leaves the flag unread: only the NaN marks the target.
CHECK_TARGETS = True

# -- CUDA source -----------------------------------------------------------------------------------------

_PRELUDE = SOURCE + r"""
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }

__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(float* p, double v) { *p = (float)v; }
__device__ __forceinline__ void put(double* p, double v) { *p = v; }
__device__ __forceinline__ void put(double* p, float v) { *p = (double)v; }

__device__ __forceinline__ float ex(float v) { return expf(v); }
__device__ __forceinline__ double ex(double v) { return exp(v); }
__device__ __forceinline__ float lg(float v) { return logf(v); }
__device__ __forceinline__ double lg(double v) { return log(v); }
__device__ __forceinline__ float sq(float v) { return sqrtf(v); }
__device__ __forceinline__ double sq(double v) { return sqrt(v); }
template <typename S> __device__ __forceinline__ S neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ double neg_inf<double>() { return __longlong_as_double(0xfff0000000000000ULL); }
template <typename S> __device__ __forceinline__ S nan_of();
template <> __device__ __forceinline__ float nan_of<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ __forceinline__ double nan_of<double>() { return __longlong_as_double(0x7ff8000000000000ULL); }

struct MaxOp {
    template <typename S> __device__ __forceinline__ S operator()(S a, S b) const { return a > b ? a : b; }
};
struct SumOp {
    template <typename S> __device__ __forceinline__ S operator()(S a, S b) const { return a + b; }
};

// Reduce v over the NT threads of a row (NT == 32: one warp; NT == blockDim.x: the block); every thread
// of the row gets the result. sh holds 32 partials; it may be reused right after the call returns.
template <int NT, typename S, typename F>
__device__ __forceinline__ S row_reduce(S v, F f, S* sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (NT > 32) {
        const int w = threadIdx.x >> 5;
        __syncthreads();
        if ((threadIdx.x & 31) == 0) sh[w] = v;
        __syncthreads();
        v = sh[0];
#pragma unroll
        for (int k = 1; k < NT / 32; k++) v = f(v, sh[k]);
    }
    return v;
}

// exp(m - M) scaled partial sum of an online softmax, with -inf maxima contributing nothing
template <typename S>
__device__ __forceinline__ S rescale(S s, S m, S M) { return m == M ? s : (m == neg_inf<S>() ? (S)0 : s * ex(m - M)); }

// one value v into an online log-sum-exp: the running maximum m and the sum s of exp(value - m)
template <typename S>
__device__ __forceinline__ void lse_add(S v, S& m, S& s) {
    if (v > m) { s = rescale(s, m, v) + (S)1; m = v; }
    else if (v != neg_inf<S>()) s += ex(v - m);
}

// cross_entropy of one target tg, given its row's maximum M and sum s of exp(x - M) (lse_add) and, for
// label smoothing, the sums sx of w * x and sw of w over the classes: l = wt * -log_softmax(x)[tg] with
// wt its class weight, blended with the smoothing term; an ignored target gives l = wt = 0, one out of
// range NaN (and is recorded in bad). xr[c * stride] is the row's logit of class c.
template <typename S, typename X>
__device__ __forceinline__ void ce_target_loss(S M, S s, S sx, S sw, long long tg, int C, long long ignore_index,
                                               double smoothing, const X* xr, long long stride, const X* weight,
                                               bool hw, long long* bad, S& l, S& wt) {
    const S shift = (M == neg_inf<S>() || M == -neg_inf<S>()) ? (S)0 : M;  // a row of infinite maxima: no shift
    const S lse = (shift == M ? lg(s) : lg(s * ex(M - shift))) + shift;
    l = 0;
    wt = 0;
    if (tg == ignore_index) return;
    if (tg < 0 || tg >= C) { bad[1] = tg; bad[0] = 1; l = wt = nan_of<S>(); return; }
    wt = hw ? (S)to_acc(weight[tg]) : (S)1;
    l = wt * (lse - (S)to_acc(xr[tg * stride]));
    if (smoothing > 0.0) l = l * (S)(1.0 - smoothing) + (lse * sw - sx) * (S)(smoothing / C);
}
"""

# Softmax (LOG=0) or log-softmax (LOG=1) of each contiguous row of C elements.
_SOFTMAX_ROWS = r"""
extern "C" __global__ void __launch_bounds__(BLOCK)
ember_softmax_rows(const T* __restrict__ x, T* __restrict__ y, long long rows, int C) {
    __shared__ A sh[32];
    const int t = threadIdx.x % TPR;
    const long long row = (long long)blockIdx.x * (BLOCK / TPR) + threadIdx.x / TPR;
    if (row >= rows) return;
    const T* xr = x + row * (long long)C;
    T* yr = y + row * (long long)C;
#if ITEMS > 0
    A v[ITEMS];
    A m = neg_inf<A>();
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int c = i * TPR + t;
        v[i] = c < C ? (A)to_acc(xr[c]) : neg_inf<A>();
        m = v[i] > m ? v[i] : m;
    }
    m = row_reduce<TPR>(m, MaxOp(), sh);
    A s = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        if (i * TPR + t < C) { v[i] -= m; s += ex(v[i]); }
    }
    s = row_reduce<TPR>(s, SumOp(), sh);
#if LOG
    const A ls = lg(s);
#pragma unroll
    for (int i = 0; i < ITEMS; i++) { const int c = i * TPR + t; if (c < C) put(yr + c, v[i] - ls); }
#else
#pragma unroll
    for (int i = 0; i < ITEMS; i++) { const int c = i * TPR + t; if (c < C) put(yr + c, ex(v[i]) / s); }
#endif
#else
    A m = neg_inf<A>(), s = 0;
    for (int c = t; c < C; c += TPR) {
        const A v = to_acc(xr[c]);
        lse_add(v, m, s);
    }
    const A M = row_reduce<TPR>(m, MaxOp(), sh);
    s = row_reduce<TPR>(rescale(s, m, M), SumOp(), sh);
#if LOG
    const A ls = lg(s);
    for (int c = t; c < C; c += TPR) put(yr + c, (A)to_acc(xr[c]) - M - ls);
#else
    for (int c = t; c < C; c += TPR) put(yr + c, ex((A)to_acc(xr[c]) - M) / s);
#endif
#endif
}
"""

# Softmax/log-softmax along the middle dim of an (outer, C, inner) array: one thread per (outer, inner).
_SOFTMAX_COLS = r"""
extern "C" __global__ void __launch_bounds__(256)
ember_softmax_cols(const T* __restrict__ x, T* __restrict__ y, long long outer, int C, long long inner) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= outer * inner) return;
    const long long o = k / inner, i = k - o * inner;
    const long long base = o * (long long)C * inner + i;
    A m = neg_inf<A>(), s = 0;
    for (int c = 0; c < C; c++) {
        const A v = to_acc(x[base + c * inner]);
        lse_add(v, m, s);
    }
#if LOG
    const A ls = lg(s);
    for (int c = 0; c < C; c++) put(y + base + c * inner, (A)to_acc(x[base + c * inner]) - m - ls);
#else
    for (int c = 0; c < C; c++) put(y + base + c * inner, ex((A)to_acc(x[base + c * inner]) - m) / s);
#endif
}
"""

# Backward of softmax (LOG=0: dx = y * (g - sum(g * y))) or log_softmax (LOG=1: dx = g - exp(y) * sum(g)).
_SOFTMAX_BWD_ROWS = r"""
extern "C" __global__ void __launch_bounds__(BLOCK)
ember_softmax_bwd_rows(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ dx, long long rows, int C) {
    __shared__ A sh[32];
    const int t = threadIdx.x % TPR;
    const long long row = (long long)blockIdx.x * (BLOCK / TPR) + threadIdx.x / TPR;
    if (row >= rows) return;
    const long long off = row * (long long)C;
    g += off; y += off; dx += off;
#if ITEMS > 0
    A gv[ITEMS], yv[ITEMS];
    A s = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int c = i * TPR + t;
        gv[i] = c < C ? (A)to_acc(g[c]) : (A)0;
        yv[i] = c < C ? (A)to_acc(y[c]) : (A)0;
#if LOG
        s += gv[i];
#else
        s += gv[i] * yv[i];
#endif
    }
    s = row_reduce<TPR>(s, SumOp(), sh);
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int c = i * TPR + t;
#if LOG
        if (c < C) put(dx + c, gv[i] - ex(yv[i]) * s);
#else
        if (c < C) put(dx + c, yv[i] * (gv[i] - s));
#endif
    }
#else
    A s = 0;
    for (int c = t; c < C; c += TPR) {
#if LOG
        s += (A)to_acc(g[c]);
#else
        s += (A)to_acc(g[c]) * (A)to_acc(y[c]);
#endif
    }
    s = row_reduce<TPR>(s, SumOp(), sh);
    for (int c = t; c < C; c += TPR) {
        const A gc = to_acc(g[c]), yc = to_acc(y[c]);
#if LOG
        put(dx + c, gc - ex(yc) * s);
#else
        put(dx + c, yc * (gc - s));
#endif
    }
#endif
}
"""

_SOFTMAX_BWD_COLS = r"""
extern "C" __global__ void __launch_bounds__(256)
ember_softmax_bwd_cols(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ dx, long long outer, int C,
                       long long inner) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= outer * inner) return;
    const long long o = k / inner, i = k - o * inner;
    const long long base = o * (long long)C * inner + i;
    A s = 0;
    for (int c = 0; c < C; c++) {
        const long long j = base + c * inner;
#if LOG
        s += (A)to_acc(g[j]);
#else
        s += (A)to_acc(g[j]) * (A)to_acc(y[j]);
#endif
    }
    for (int c = 0; c < C; c++) {
        const long long j = base + c * inner;
        const A gc = to_acc(g[j]), yc = to_acc(y[j]);
#if LOG
        put(dx + j, gc - ex(yc) * s);
#else
        put(dx + j, yc * (gc - s));
#endif
    }
}
"""

# Layer norm of each contiguous row of N elements; W is the parameters' storage type. flags: 1 weight,
# 2 bias, 4 write the row statistics (mean, 1/std) to stats[2 * row], stats[2 * row + 1].
_LAYER_NORM_ROWS = r"""
extern "C" __global__ void __launch_bounds__(BLOCK)
ember_layer_norm_rows(const T* __restrict__ x, const W* __restrict__ w, const W* __restrict__ b, T* __restrict__ y,
                      A* __restrict__ stats, long long rows, int N, double eps, int flags) {
    __shared__ A sh[32];
    const int t = threadIdx.x % TPR;
    const long long row = (long long)blockIdx.x * (BLOCK / TPR) + threadIdx.x / TPR;
    if (row >= rows) return;
    const T* xr = x + row * (long long)N;
    T* yr = y + row * (long long)N;
    const bool hw = flags & 1, hb = flags & 2;
#if ITEMS > 0
    A v[ITEMS];
    A s = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int c = i * TPR + t;
        v[i] = c < N ? (A)to_acc(xr[c]) : (A)0;
        s += v[i];
    }
    const A mean = row_reduce<TPR>(s, SumOp(), sh) / (A)N;
    A q = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        if (i * TPR + t < N) { v[i] -= mean; q += v[i] * v[i]; }
    }
    const A var = row_reduce<TPR>(q, SumOp(), sh) / (A)N;
    const A rstd = (A)1 / sq(var + (A)eps);
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int c = i * TPR + t;
        if (c < N) {
            A o = v[i] * rstd;
            if (hw) o *= (A)to_acc(w[c]);
            if (hb) o += (A)to_acc(b[c]);
            put(yr + c, o);
        }
    }
#else
    A s = 0;
    for (int c = t; c < N; c += TPR) s += (A)to_acc(xr[c]);
    const A mean = row_reduce<TPR>(s, SumOp(), sh) / (A)N;
    A q = 0;
    for (int c = t; c < N; c += TPR) { const A d = (A)to_acc(xr[c]) - mean; q += d * d; }
    const A var = row_reduce<TPR>(q, SumOp(), sh) / (A)N;
    const A rstd = (A)1 / sq(var + (A)eps);
    for (int c = t; c < N; c += TPR) {
        A o = ((A)to_acc(xr[c]) - mean) * rstd;
        if (hw) o *= (A)to_acc(w[c]);
        if (hb) o += (A)to_acc(b[c]);
        put(yr + c, o);
    }
#endif
    if ((flags & 4) && t == 0) { stats[2 * row] = mean; stats[2 * row + 1] = rstd; }
}
"""

# Layer norm backward, input part: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w.
# Writes the row statistics to stats (for the parameter gradients) when flags & 4.
_LAYER_NORM_BWD_ROWS = r"""
extern "C" __global__ void __launch_bounds__(BLOCK)
ember_layer_norm_bwd_rows(const T* __restrict__ g, const T* __restrict__ x, const W* __restrict__ w,
                          T* __restrict__ dx, A* __restrict__ stats, long long rows, int N, double eps, int flags) {
    __shared__ A sh[32];
    const int t = threadIdx.x % TPR;
    const long long row = (long long)blockIdx.x * (BLOCK / TPR) + threadIdx.x / TPR;
    if (row >= rows) return;
    const long long off = row * (long long)N;
    g += off; x += off;
    const bool hw = flags & 1, want_dx = flags & 8;
#if ITEMS > 0
    A v[ITEMS], gv[ITEMS];
    A s = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int c = i * TPR + t;
        v[i] = c < N ? (A)to_acc(x[c]) : (A)0;
        s += v[i];
    }
    const A mean = row_reduce<TPR>(s, SumOp(), sh) / (A)N;
    A q = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        if (i * TPR + t < N) { v[i] -= mean; q += v[i] * v[i]; }
    }
    const A rstd = (A)1 / sq(row_reduce<TPR>(q, SumOp(), sh) / (A)N + (A)eps);
    if ((flags & 4) && t == 0) { stats[2 * row] = mean; stats[2 * row + 1] = rstd; }
    if (!want_dx) return;
    A sg = 0, sgx = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int c = i * TPR + t;
        gv[i] = c < N ? (A)to_acc(g[c]) * (hw ? (A)to_acc(w[c]) : (A)1) : (A)0;
        v[i] *= rstd;
        sg += gv[i];
        sgx += gv[i] * v[i];
    }
    sg = row_reduce<TPR>(sg, SumOp(), sh) / (A)N;
    sgx = row_reduce<TPR>(sgx, SumOp(), sh) / (A)N;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int c = i * TPR + t;
        if (c < N) put(dx + off + c, (gv[i] - sg - v[i] * sgx) * rstd);
    }
#else
    A s = 0;
    for (int c = t; c < N; c += TPR) s += (A)to_acc(x[c]);
    const A mean = row_reduce<TPR>(s, SumOp(), sh) / (A)N;
    A q = 0;
    for (int c = t; c < N; c += TPR) { const A d = (A)to_acc(x[c]) - mean; q += d * d; }
    const A rstd = (A)1 / sq(row_reduce<TPR>(q, SumOp(), sh) / (A)N + (A)eps);
    if ((flags & 4) && t == 0) { stats[2 * row] = mean; stats[2 * row + 1] = rstd; }
    if (!want_dx) return;
    A sg = 0, sgx = 0;
    for (int c = t; c < N; c += TPR) {
        const A gc = (A)to_acc(g[c]) * (hw ? (A)to_acc(w[c]) : (A)1);
        sg += gc;
        sgx += gc * ((A)to_acc(x[c]) - mean) * rstd;
    }
    sg = row_reduce<TPR>(sg, SumOp(), sh) / (A)N;
    sgx = row_reduce<TPR>(sgx, SumOp(), sh) / (A)N;
    for (int c = t; c < N; c += TPR) {
        const A gc = (A)to_acc(g[c]) * (hw ? (A)to_acc(w[c]) : (A)1);
        const A xh = ((A)to_acc(x[c]) - mean) * rstd;
        put(dx + off + c, (gc - sg - xh * sgx) * rstd);
    }
#endif
}
"""

# Parameter gradients of layer norm: dw[j] = sum_r g[r, j] * xhat[r, j], db[j] = sum_r g[r, j]. A block is
# 32 columns by 16 row lanes; flags: 1 dw, 2 db.
_LAYER_NORM_BWD_PARAMS = r"""
extern "C" __global__ void __launch_bounds__(512)
ember_layer_norm_bwd_params(const T* __restrict__ g, const T* __restrict__ x, const A* __restrict__ stats,
                            W* __restrict__ dw, W* __restrict__ db, long long rows, int N, int flags) {
    __shared__ A shw[16][33];
    __shared__ A shb[16][33];
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const int col = blockIdx.x * 32 + tx;
    A sw = 0, sb = 0;
    if (col < N) {
        for (long long r = ty; r < rows; r += 16) {
            const long long j = r * (long long)N + col;
            const A gc = to_acc(g[j]);
            sb += gc;
            sw += gc * (((A)to_acc(x[j]) - stats[2 * r]) * stats[2 * r + 1]);
        }
    }
    shw[ty][tx] = sw;
    shb[ty][tx] = sb;
    __syncthreads();
    if (ty == 0 && col < N) {
        for (int k = 1; k < 16; k++) { sw += shw[k][tx]; sb += shb[k][tx]; }
        if (flags & 1) put(dw + col, sw);
        if (flags & 2) put(db + col, sb);
    }
}
"""

# cross_entropy (class indices) over contiguous rows of C logits, one row per target. flags: 1 class weights,
# 2 reduction 'none' (write out[row] in T), else loss[row] and wsum[row] (accumulation type) for the reduction
# kernel. A target outside [0, C) that is not ignore_index sets bad[0] = 1, bad[1] = target.
_CE_ROWS = r"""
extern "C" __global__ void __launch_bounds__(BLOCK)
ember_ce_rows(const T* __restrict__ x, const I* __restrict__ target, const T* __restrict__ weight,
              T* __restrict__ out, A* __restrict__ loss, A* __restrict__ wsum, long long* __restrict__ bad,
              long long rows, int C, long long ignore_index, double smoothing, int flags) {
    __shared__ A sh[32];
    const int t = threadIdx.x % TPR;
    const long long row = (long long)blockIdx.x * (BLOCK / TPR) + threadIdx.x / TPR;
    if (row >= rows) return;
    const T* xr = x + row * (long long)C;
    const bool hw = flags & 1;
    const bool smooth = smoothing > 0.0;
    A m = neg_inf<A>(), s = 0, sx = 0, sw = 0;
    for (int c = t; c < C; c += TPR) {
        const A v = to_acc(xr[c]);
        lse_add(v, m, s);
        if (smooth) {
            const A wc = hw ? (A)to_acc(weight[c]) : (A)1;
            sx += wc * v;
            sw += wc;
        }
    }
    const A M = row_reduce<TPR>(m, MaxOp(), sh);
    s = row_reduce<TPR>(rescale(s, m, M), SumOp(), sh);
    if (smooth) {
        sx = row_reduce<TPR>(sx, SumOp(), sh);
        sw = row_reduce<TPR>(sw, SumOp(), sh);
    }
    if (t != 0) return;
    A l, wt;
    ce_target_loss(M, s, sx, sw, (long long)target[row], C, ignore_index, smoothing, xr, 1, weight, hw, bad, l, wt);
    if (flags & 2) put(out + row, l);
    else { loss[row] = l; wsum[row] = wt; }
}
"""

# cross_entropy over an (N, C, S) array, one thread per (n, s) target (S > 1: classes strided by S).
_CE_COLS = r"""
extern "C" __global__ void __launch_bounds__(256)
ember_ce_cols(const T* __restrict__ x, const I* __restrict__ target, const T* __restrict__ weight,
              T* __restrict__ out, A* __restrict__ loss, A* __restrict__ wsum, long long* __restrict__ bad,
              long long outer, int C, long long inner, long long ignore_index, double smoothing, int flags) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= outer * inner) return;
    const long long o = k / inner, i = k - o * inner;
    const T* xr = x + o * (long long)C * inner + i;
    const bool hw = flags & 1;
    const bool smooth = smoothing > 0.0;
    A m = neg_inf<A>(), s = 0, sx = 0, sw = 0;
    for (int c = 0; c < C; c++) {
        const A v = to_acc(xr[c * inner]);
        lse_add(v, m, s);
        if (smooth) {
            const A wc = hw ? (A)to_acc(weight[c]) : (A)1;
            sx += wc * v;
            sw += wc;
        }
    }
    A l, wt;
    ce_target_loss(m, s, sx, sw, (long long)target[k], C, ignore_index, smoothing, xr, inner, weight, hw, bad, l, wt);
    if (flags & 2) put(out + k, l);
    else { loss[k] = l; wsum[k] = wt; }
}
"""

# nll_loss over an (N, C, S) array of log-probabilities, one thread per target.
_NLL = r"""
extern "C" __global__ void __launch_bounds__(256)
ember_nll(const T* __restrict__ x, const I* __restrict__ target, const T* __restrict__ weight,
          T* __restrict__ out, A* __restrict__ loss, A* __restrict__ wsum, long long* __restrict__ bad,
          long long outer, int C, long long inner, long long ignore_index, int flags) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= outer * inner) return;
    const long long o = k / inner, i = k - o * inner;
    const long long tg = (long long)target[k];
    A l = 0, wt = 0;
    if (tg != ignore_index) {
        if (tg < 0 || tg >= C) { bad[1] = tg; bad[0] = 1; l = wt = nan_of<A>(); }
        else {
            wt = (flags & 1) ? (A)to_acc(weight[tg]) : (A)1;
            l = -((A)to_acc(x[(o * (long long)C + tg) * inner + i]) * wt);
        }
    }
    if (flags & 2) put(out + k, l);
    else { loss[k] = l; wsum[k] = wt; }
}
"""

# cross_entropy and its 'sum'/'mean' reduction in one launch, for small problems (where the launches are the
# cost): one block, each warp taking rows warp, warp + 32, ...; the sums are double and in a fixed order.
# flags: 1 class weights, 4 'mean'.
_CE_SMALL = r"""
extern "C" __global__ void __launch_bounds__(1024)
ember_ce_small(const T* __restrict__ x, const I* __restrict__ target, const T* __restrict__ weight,
               T* __restrict__ out, long long* __restrict__ bad, long long rows, int C, long long ignore_index,
               double smoothing, int flags) {
    __shared__ double shl[32], shw[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool hw = flags & 1;
    const bool smooth = smoothing > 0.0;
    double accl = 0, accw = 0;
    for (long long row = warp; row < rows; row += 32) {
        const T* xr = x + row * (long long)C;
        A m = neg_inf<A>(), s = 0, sx = 0, sw = 0;
        for (int c = lane; c < C; c += 32) {
            const A v = to_acc(xr[c]);
            lse_add(v, m, s);
            if (smooth) {
                const A wc = hw ? (A)to_acc(weight[c]) : (A)1;
                sx += wc * v;
                sw += wc;
            }
        }
        const A M = row_reduce<32>(m, MaxOp(), (A*)0);
        s = row_reduce<32>(rescale(s, m, M), SumOp(), (A*)0);
        if (smooth) {
            sx = row_reduce<32>(sx, SumOp(), (A*)0);
            sw = row_reduce<32>(sw, SumOp(), (A*)0);
        }
        if (lane == 0) {
            A l, wt;
            ce_target_loss(M, s, sx, sw, (long long)target[row], C, ignore_index, smoothing, xr, 1, weight, hw, bad,
                           l, wt);
            accl += (double)l;
            accw += (double)wt;
        }
    }
    if (lane == 0) { shl[warp] = accl; shw[warp] = accw; }
    __syncthreads();
    if (threadIdx.x == 0) {
        double L = 0, Wt = 0;
        for (int k = 0; k < 32; k++) { L += shl[k]; Wt += shw[k]; }
        put(out, (A)((flags & 4) ? L / Wt : L));
    }
}
"""

# nll_loss and its 'sum'/'mean' reduction in one launch, for small problems: one block, thread k taking
# targets k, k + 1024, ...; double sums in a fixed order. flags: 1 class weights, 4 'mean'.
_NLL_SMALL = r"""
extern "C" __global__ void __launch_bounds__(1024)
ember_nll_small(const T* __restrict__ x, const I* __restrict__ target, const T* __restrict__ weight,
                T* __restrict__ out, long long* __restrict__ bad, long long outer, int C, long long inner,
                long long ignore_index, int flags) {
    __shared__ double sh[32];
    double s = 0, w = 0;
    for (long long k = threadIdx.x; k < outer * inner; k += 1024) {
        const long long o = k / inner, i = k - o * inner;
        const long long tg = (long long)target[k];
        if (tg == ignore_index) continue;
        if (tg < 0 || tg >= C) { bad[1] = tg; bad[0] = 1; s = w = (double)nan_of<A>(); continue; }
        const double wt = (flags & 1) ? (double)to_acc(weight[tg]) : 1.0;
        s += -((double)to_acc(x[(o * (long long)C + tg) * inner + i]) * wt);
        w += wt;
    }
    s = row_reduce<1024>(s, SumOp(), sh);
    w = row_reduce<1024>(w, SumOp(), sh);
    if (threadIdx.x == 0) put(out, (A)((flags & 4) ? s / w : s));
}
"""

# The 'sum'/'mean' reduction of the per-target losses and weights: one block of 1024 threads, double sums.
_LOSS_REDUCE = r"""
extern "C" __global__ void __launch_bounds__(1024)
ember_loss_reduce(const A* __restrict__ loss, const A* __restrict__ wsum, T* __restrict__ out, long long n, int mean) {
    __shared__ double sh[32];
    double s = 0, w = 0;
    for (long long k = threadIdx.x; k < n; k += 1024) { s += (double)loss[k]; w += (double)wsum[k]; }
    s = row_reduce<1024>(s, SumOp(), sh);
    w = row_reduce<1024>(w, SumOp(), sh);
    if (threadIdx.x == 0) put(out, (A)(mean ? s / w : s));
}
"""

# Fused backward of cross_entropy with class indices, rows of C contiguous logits, one launch:
# dx = g * ((p - one_hot(t)) * w_t * (1 - eps) + (p * sum(w) - w) * eps / C) with class weights w, else
# dx = g * (p - (1 - eps) * one_hot(t) - eps / C); p = softmax(x), 0 for ignored targets. g is the loss's
# gradient (per row when flags & 2), divided by *divisor (the 'mean' total weight) when flags & 4.
_CE_BWD_ROWS = r"""
extern "C" __global__ void __launch_bounds__(BLOCK)
ember_ce_bwd_rows(const T* __restrict__ x, const I* __restrict__ target, const T* __restrict__ weight,
                  const T* __restrict__ grad, const A* __restrict__ divisor, T* __restrict__ dx, long long rows, int C,
                  long long ignore_index, double smoothing, int flags) {
    __shared__ A sh[32];
    const int t = threadIdx.x % TPR;
    const long long row = (long long)blockIdx.x * (BLOCK / TPR) + threadIdx.x / TPR;
    if (row >= rows) return;
    const long long off = row * (long long)C;
    const T* xr = x + off;
    const bool hw = flags & 1;
    A g = to_acc(grad[(flags & 2) ? row : 0]);
    if (flags & 4) g /= divisor[0];
    A m = neg_inf<A>(), s = 0, sw = 0;
    for (int c = t; c < C; c += TPR) {
        const A v = to_acc(xr[c]);
        lse_add(v, m, s);
        if (hw) sw += (A)to_acc(weight[c]);
    }
    const A M = row_reduce<TPR>(m, MaxOp(), sh);
    s = row_reduce<TPR>(rescale(s, m, M), SumOp(), sh);
    if (hw) sw = row_reduce<TPR>(sw, SumOp(), sh);
    const long long tg = (long long)target[row];
    const bool keep = tg != ignore_index;
    const A wt = (keep && hw && tg >= 0 && tg < C) ? (A)to_acc(weight[tg]) : (A)1;
    const A eps = (A)smoothing, epc = (A)(smoothing / C);
    for (int c = t; c < C; c += TPR) {
        A d = 0;
        if (keep) {
            const A p = ex((A)to_acc(xr[c]) - M) / s;
            const A oh = c == tg ? (A)1 : (A)0;
            if (hw) {
                const A wc = to_acc(weight[c]);
                d = (p - oh) * wt * ((A)1 - eps) + (p * sw - wc) * epc;
            } else {
                d = p - oh * ((A)1 - eps) - epc;
            }
            d *= g;
        }
        put(dx + off + c, d);
    }
}
"""

# The 'mean' divisor of a class-index loss: the total weight of the kept targets (their count without class
# weights; targets out of range count 0), one block.
_TARGET_WEIGHT_SUM = r"""
extern "C" __global__ void __launch_bounds__(1024)
ember_target_weight_sum(const I* __restrict__ target, const T* __restrict__ weight, A* __restrict__ out, long long n,
                        int C, long long ignore_index, int flags) {
    __shared__ double sh[32];
    double s = 0;
    for (long long k = threadIdx.x; k < n; k += 1024) {
        const long long tg = (long long)target[k];
        if (tg != ignore_index && tg >= 0 && tg < C) s += (flags & 1) ? (double)to_acc(weight[tg]) : 1.0;
    }
    s = row_reduce<1024>(s, SumOp(), sh);
    if (threadIdx.x == 0) out[0] = (A)s;
}
"""

_KERNELS = {
    "softmax_rows": (_SOFTMAX_ROWS, "ember_softmax_rows"),
    "softmax_cols": (_SOFTMAX_COLS, "ember_softmax_cols"),
    "softmax_bwd_rows": (_SOFTMAX_BWD_ROWS, "ember_softmax_bwd_rows"),
    "softmax_bwd_cols": (_SOFTMAX_BWD_COLS, "ember_softmax_bwd_cols"),
    "layer_norm_rows": (_LAYER_NORM_ROWS, "ember_layer_norm_rows"),
    "layer_norm_bwd_rows": (_LAYER_NORM_BWD_ROWS, "ember_layer_norm_bwd_rows"),
    "layer_norm_bwd_params": (_LAYER_NORM_BWD_PARAMS, "ember_layer_norm_bwd_params"),
    "ce_rows": (_CE_ROWS, "ember_ce_rows"),
    "ce_cols": (_CE_COLS, "ember_ce_cols"),
    "nll": (_NLL, "ember_nll"),
    "loss_reduce": (_LOSS_REDUCE, "ember_loss_reduce"),
    "ce_small": (_CE_SMALL, "ember_ce_small"),
    "nll_small": (_NLL_SMALL, "ember_nll_small"),
    "ce_bwd_rows": (_CE_BWD_ROWS, "ember_ce_bwd_rows"),
    "target_weight_sum": (_TARGET_WEIGHT_SUM, "ember_target_weight_sum"),
}

# Storage type in the CUDA source of each dtype the kernels take, and its accumulation type.
_CTYPES = CTYPES
_ITYPES = {"int64": "long long", "uint8": "unsigned char", "int32": "int"}

_compiled = {}


def _kernel(kind, dtype, *, w=None, index=None, tpr=32, block=128, items=0, log=0):
    """The compiled kernel ``kind`` for storage dtype name ``dtype`` and the given compile-time constants."""
    key = (kind, dtype, w, index, tpr, block, items, log)
    fn = _compiled.get(key)
    if fn is None:
        src, name = _KERNELS[kind]
        ctype, acc = _CTYPES[dtype]
        defines = [
            f"#define T {ctype}", f"#define A {acc}", f"#define TPR {tpr}", f"#define BLOCK {block}",
            f"#define ITEMS {items}", f"#define LOG {log}",
            f"#define W {_CTYPES[w][0] if w else ctype}", f"#define I {_ITYPES[index] if index else 'long long'}",
        ]
        code = "\n".join(defines) + _PRELUDE + src
        fn = _compiled[key] = cupy_module().RawKernel(code, name)
    return fn


def _pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


def _row_config(C, dtype):
    """``(threads per row, threads per block, items per thread or 0 to loop)`` for rows of ``C`` elements.

    A row of up to 512 elements (256 for float64) is a warp's, four rows to a block; a longer one is a block's,
    of the fewest threads (128 to 1024) that hold it in 16 registers each (8 for float64), so that several rows
    are in flight on each multiprocessor. (On the H200, 1024-thread blocks of 8 items, two resident per
    multiprocessor, ran (8192, 8192) float32 softmax in 0.25 ms and bfloat16 layer_norm no faster than float32,
    a sign of too few rows in flight; the 512-thread blocks of 16 items chosen now fit three or four per
    multiprocessor by their register counts, not yet timed.) A row longer than that is read twice by 1024
    threads.
    """
    max_items = 8 if dtype == "float64" else 16
    if C <= 32 * max_items:
        return 32, 128, _pow2(-(-C // 32))
    tpr = min(1024, max(128, _pow2(-(-C // max_items))))
    items = _pow2(-(-C // tpr))
    if items > max_items:
        return 1024, 1024, 0
    return tpr, tpr, items


#: Fewest (outer, inner) pairs for which a reduction along a middle dim runs the column kernel (one thread
#: per pair); with fewer, and long columns, the dim is moved last (two copies) and the row kernel runs:
#: a few thousand threads each walking a long column leave most of the GPU idle.
_COLUMN_MIN_THREADS = 65536


def _transpose_columns(outer, C, inner):
    return outer * inner < _COLUMN_MIN_THREADS and C >= 64


def _grid_rows(rows, tpr, block):
    return (int(-(-rows // (block // tpr))),)


_i64, _i32, _f64 = np.int64, np.int32, np.float64


def _dtype_name(a):
    name = numpy_dtype_name(a.dtype)
    return name if name in _CTYPES else None


def _contig(cp, a):
    return a if a._c_contiguous else cp.ascontiguousarray(a)  # (.flags builds an object per read)


# -- softmax ---------------------------------------------------------------------------------------------


def softmax_forward(x, dim, log=False):
    """Softmax (or log-softmax) of the CuPy array ``x`` along ``dim``, in ``x``'s dtype (float16, bfloat16,
    float32 or float64; float16/bfloat16 computed in float32). Returns a new C-contiguous array.

    Raises:
        TypeError: for another dtype.
    """
    cp = cupy_module()
    name = _dtype_name(x)
    if name is None:
        raise TypeError(f"softmax_forward: unsupported dtype {x.dtype}")
    if x.ndim == 0:
        return softmax_forward(x.reshape(1), 0, log).reshape(())
    y = cp.ndarray(x.shape, x.dtype)
    if x.size == 0:
        return y
    x = _contig(cp, x)
    dim %= x.ndim
    C = x.shape[dim]
    inner = math.prod(x.shape[dim + 1:])
    outer = x.size // (C * inner)
    if inner == 1:
        tpr, block, items = _row_config(C, name)
        k = _kernel("softmax_rows", name, tpr=tpr, block=block, items=items, log=int(log))
        k(_grid_rows(outer, tpr, block), (block,), (x, y, _i64(outer), _i32(C)))
    elif _transpose_columns(outer, C, inner):
        xt = cp.ascontiguousarray(cp.moveaxis(x.reshape(outer, C, inner), 1, 2))
        yt = softmax_forward(xt, 2, log)
        y[...] = cp.moveaxis(yt, 2, 1).reshape(y.shape)
    else:
        n = outer * inner
        k = _kernel("softmax_cols", name, log=int(log))
        k(((n + 255) // 256,), (256,), (x, y, _i64(outer), _i32(C), _i64(inner)))
    return y


def _softmax_backward(grad, result, dim, log):
    cp = cupy_module()
    name = _dtype_name(result)
    if name is None:
        raise TypeError(f"softmax backward: unsupported dtype {result.dtype}")
    if grad.dtype != result.dtype:
        grad = grad.astype(result.dtype)
    if result.ndim == 0:
        return _softmax_backward(grad.reshape(1), result.reshape(1), 0, log).reshape(())
    dx = cp.ndarray(result.shape, result.dtype)
    if result.size == 0:
        return dx
    grad, result = _contig(cp, grad), _contig(cp, result)
    dim %= result.ndim
    C = result.shape[dim]
    inner = math.prod(result.shape[dim + 1:])
    outer = result.size // (C * inner)
    if inner == 1:
        tpr, block, items = _row_config(C, name)
        if items > 8:  # two arrays in registers
            tpr, block, items = (1024, 1024, 0) if tpr == 1024 else (tpr, block, items)
        k = _kernel("softmax_bwd_rows", name, tpr=tpr, block=block, items=items, log=int(log))
        k(_grid_rows(outer, tpr, block), (block,), (grad, result, dx, _i64(outer), _i32(C)))
    elif _transpose_columns(outer, C, inner):
        def last(a):
            return cp.ascontiguousarray(cp.moveaxis(a.reshape(outer, C, inner), 1, 2))

        dxt = _softmax_backward(last(grad), last(result), 2, log)
        dx[...] = cp.moveaxis(dxt, 2, 1).reshape(dx.shape)
    else:
        n = outer * inner
        k = _kernel("softmax_bwd_cols", name, log=int(log))
        k(((n + 255) // 256,), (256,), (grad, result, dx, _i64(outer), _i32(C), _i64(inner)))
    return dx


def softmax_backward(grad, result, dim):
    """The gradient of softmax's input, ``result * (grad - sum(grad * result, dim))``, in one launch.

    ``grad`` and ``result`` are CuPy arrays of one shape; the gradient has ``result``'s dtype.
    """
    return _softmax_backward(grad, result, dim, False)


def log_softmax_backward(grad, result, dim):
    """The gradient of log_softmax's input, ``grad - exp(result) * sum(grad, dim)``, in one launch."""
    return _softmax_backward(grad, result, dim, True)


# -- layer_norm ------------------------------------------------------------------------------------------


def _flat(a):
    """``a.reshape(-1)``, skipped for an array that is 1-D already (a CuPy reshape costs a few microseconds)."""
    return a if a.ndim == 1 else a.reshape(-1)


def _param(cp, p, n):
    return None if p is None else _contig(cp, p if p.shape == (n,) else p.reshape(n))


def layer_norm_forward(x, inner, weight=None, bias=None, eps=1e-5, stats=False):
    """Layer norm of the CuPy array ``x`` over its trailing dims holding ``inner`` elements.

    ``weight``/``bias`` (optional) hold ``inner`` elements, of ``x``'s dtype or float32. Returns the output
    (``x``'s dtype), or ``(output, stats)`` with ``stats`` a ``(rows, 2)`` array of (mean, 1/std) in the
    accumulation dtype when ``stats``.
    """
    cp = cupy_module()
    name = _dtype_name(x)
    y = cp.ndarray(x.shape, x.dtype)
    rows = x.size // inner if inner else 0
    acc = np.float64 if name == "float64" else np.float32
    st = cp.ndarray((rows, 2), acc) if stats else None
    if x.size == 0:
        return (y, st) if stats else y
    x = _contig(cp, x)
    w, b = _param(cp, weight, inner), _param(cp, bias, inner)
    pdt = (w if w is not None else b)
    wname = _dtype_name(pdt) if pdt is not None else None
    tpr, block, items = _row_config(inner, name)
    k = _kernel("layer_norm_rows", name, w=wname, tpr=tpr, block=block, items=items)
    flags = (w is not None) | (b is not None) << 1 | bool(stats) << 2
    k(_grid_rows(rows, tpr, block), (block,),
      (x, x if w is None else w, x if b is None else b, y, y if st is None else st, _i64(rows), _i32(inner),
       _f64(eps), _i32(flags)))
    return (y, st) if stats else y


def _trailing_dims(shape, inner):
    """How many trailing dims of ``shape`` hold ``inner`` elements (the fewest; 0 for ``inner == 1``)."""
    k, n = 0, 1
    while n != inner and k < len(shape):
        k += 1
        n *= shape[len(shape) - k]
    return k


def layer_norm_backward(grad, x, inner, weight=None, eps=1e-5, output_mask=(True, True, True), param_shape=None):
    """Gradients of layer norm: ``(d input, d weight, d bias)`` (None where ``output_mask`` is False; d weight
    also when there is no weight), from the output gradient ``grad`` and the input ``x`` (CuPy arrays of one
    shape); the statistics are recomputed. Two launches: the input gradient (and row statistics), then the
    parameter gradients (in ``weight``'s dtype, else ``x``'s).
    """
    cp = cupy_module()
    name = _dtype_name(x)
    if grad.dtype != x.dtype:
        grad = grad.astype(x.dtype)
    rows = x.size // inner if inner else 0
    want_dx = bool(output_mask[0])
    want_dw = bool(output_mask[1]) and weight is not None
    want_db = bool(output_mask[2])
    pdtype = weight.dtype if weight is not None else x.dtype
    dx = cp.ndarray(x.shape, x.dtype) if want_dx else None
    pshape = weight.shape if weight is not None else param_shape
    if pshape is None:
        pshape = x.shape[x.ndim - _trailing_dims(x.shape, inner):]
    dw = cp.ndarray(pshape, pdtype) if want_dw else None
    db = cp.ndarray(pshape, pdtype) if want_db else None
    if x.size == 0:
        for a in (dx, dw, db):
            if a is not None:
                a.fill(0)
        return dx, dw, db
    x, grad = _contig(cp, x), _contig(cp, grad)
    w = _param(cp, weight, inner)
    wname = _dtype_name(w) if w is not None else None
    acc = np.float64 if name == "float64" else np.float32
    st = cp.ndarray((rows, 2), acc) if (want_dw or want_db) else None
    tpr, block, items = _row_config(inner, name)
    if items > 8 and tpr == 1024:  # two arrays in registers: 1024 threads of 16 items each would spill
        tpr, block, items = 1024, 1024, 0
    flags = (w is not None) | (st is not None) << 2 | want_dx << 3
    if want_dx or st is not None:
        k = _kernel("layer_norm_bwd_rows", name, w=wname, tpr=tpr, block=block, items=items)
        k(_grid_rows(rows, tpr, block), (block,),
          (grad, x, x if w is None else w, x if dx is None else dx, x if st is None else st, _i64(rows),
           _i32(inner), _f64(eps), _i32(flags)))
    if st is not None:
        k = _kernel("layer_norm_bwd_params", name, w=wname)
        pflags = want_dw | want_db << 1
        anyp = dw if dw is not None else db
        k(((inner + 31) // 32,), (512,),
          (grad, x, st, anyp if dw is None else _flat(dw), anyp if db is None else _flat(db), _i64(rows),
           _i32(inner), _i32(pflags)))
    return dx, dw, db


# -- cross_entropy, nll_loss -------------------------------------------------------------------------------

_bad_flags = {}  # device id -> a (2,) int64 device array: (a target was out of range, its value)


_unchecked = set()  # devices whose flag may hold a bad target of a call that ran without CHECK_TARGETS


def _bad_flag(cp):
    """The current device's flag, zero when :data:`CHECK_TARGETS` is set (checked calls reset it on a hit)."""
    dev = cp.cuda.runtime.getDevice()
    flag = _bad_flags.get(dev)
    if flag is None:
        flag = _bad_flags[dev] = cp.zeros(2, np.int64)
    if not CHECK_TARGETS:
        _unchecked.add(dev)
    elif dev in _unchecked:
        flag.fill(0)
        _unchecked.discard(dev)
    return flag


def _check_bad(flag):
    if CHECK_TARGETS:  # read at the next synchronizing call, not now (no wait for the GPU here)
        _async_errors.defer(("class targets", flag.data.device_id), lambda: _read_flag(flag))


def _read_flag(flag):
    # The one host read of these ops: whether a target was out of range (a 16-byte copy). No tensor data is
    # copied.
    bad, value = (int(v) for v in flag.get())
    if bad:
        flag.fill(0)
        raise IndexError(f"Target {value} is out of bounds. (Found by a cross_entropy/nll_loss kernel on "
                         "the GPU and reported at this synchronizing call.)")


def _class_layout(x):
    """``(outer, C, inner)`` of a logits/log-probabilities array with classes in dim 1 (dim 0 when 1-D)."""
    if x.ndim == 1:
        return 1, x.shape[0], 1
    return x.shape[0], x.shape[1], math.prod(x.shape[2:])


def cross_entropy_forward(x, target, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """cross_entropy of logits ``x`` (CuPy, classes in dim 1, or dim 0 when 1-D) and class indices ``target``
    (int64 or uint8, ``x``'s shape without the class dim). Returns a CuPy array in ``x``'s dtype: the
    per-target losses (``'none'``, target's shape) or a 0-d sum/mean.

    A target outside ``[0, C)`` other than ``ignore_index`` makes its loss term NaN (and the reduced loss).

    Raises:
        IndexError: for such a target, when :data:`CHECK_TARGETS` is set.
    """
    cp = cupy_module()
    name = _dtype_name(x)
    outer, C, inner = _class_layout(x)
    n = outer * inner
    x = _contig(cp, x)
    t = _contig(cp, _flat(target))
    w = None if weight is None else _contig(cp, _flat(weight).astype(x.dtype, copy=False))
    if reduction != "none" and inner == 1 and 0 < n * C <= _SMALL_LOSS:
        return _run_small_loss(cp, "ce_small", x, t, w, (_i64(n), _i32(C), _i64(ignore_index),
                                                          _f64(label_smoothing)), name, reduction)
    if inner == 1:
        tpr, block, _ = _row_config(C, name)
        tpr, block = (32, 128) if tpr == 32 else (min(tpr, 1024), min(tpr, 1024))
        k = _kernel("ce_rows", name, index=numpy_dtype_name(t.dtype), tpr=tpr, block=block)
        grid = _grid_rows(n, tpr, block)
        rest = (_i64(n), _i32(C), _i64(ignore_index), _f64(label_smoothing))
        bsize = block
    else:
        k = _kernel("ce_cols", name, index=numpy_dtype_name(t.dtype))
        grid, bsize = ((n + 255) // 256,), 256
        rest = (_i64(outer), _i32(C), _i64(inner), _i64(ignore_index), _f64(label_smoothing))
    out_shape = target.shape
    return _run_loss(cp, k, grid, bsize, (x, t, w), rest, out_shape, x.dtype, name, reduction, n)


def nll_loss_forward(x, target, weight=None, ignore_index=-100, reduction="mean"):
    """nll_loss of log-probabilities ``x`` (CuPy, classes in dim 1, or dim 0 when 1-D) and class indices
    ``target``: ``-weight[t] * x[n, t]`` per target, then the reduction, in ``x``'s dtype. A target outside
    ``[0, C)`` other than ``ignore_index`` makes its term NaN.

    Raises:
        IndexError: for such a target, when :data:`CHECK_TARGETS` is set.
    """
    cp = cupy_module()
    name = _dtype_name(x)
    outer, C, inner = _class_layout(x)
    n = outer * inner
    x = _contig(cp, x)
    t = _contig(cp, _flat(target))
    w = None if weight is None else _contig(cp, _flat(weight).astype(x.dtype, copy=False))
    rest = (_i64(outer), _i32(C), _i64(inner), _i64(ignore_index))
    if reduction != "none" and 0 < n <= _SMALL_LOSS:
        return _run_small_loss(cp, "nll_small", x, t, w, rest, name, reduction)
    k = _kernel("nll", name, index=numpy_dtype_name(t.dtype))
    return _run_loss(cp, k, ((n + 255) // 256,), 256, (x, t, w), rest, target.shape, x.dtype, name, reduction, n)


#: Most logits (cross_entropy) or targets (nll_loss) for which a reduced loss is one single-block launch
#: (``ce_small``/``nll_small``) rather than a per-target kernel and a reduction kernel.
_SMALL_LOSS = 65536


def _run_small_loss(cp, kind, x, t, w, rest, name, reduction):
    flag = _bad_flag(cp)
    out = cp.ndarray((), x.dtype)
    flags = (w is not None) | (reduction == "mean") << 2
    _kernel(kind, name, index=numpy_dtype_name(t.dtype))((1,), (1024,), (x, t, x if w is None else w, out, flag, *rest,
                                                            _i32(flags)))
    _check_bad(flag)
    return out


def _run_loss(cp, kernel, grid, block, arrays, rest, out_shape, dtype, name, reduction, n):
    x, t, w = arrays
    flag = _bad_flag(cp)
    acc = np.float64 if name == "float64" else np.float32
    if reduction == "none":
        out = cp.ndarray(out_shape, dtype)
        loss = wsum = out
        flags = 2
    else:
        out = cp.ndarray((), dtype)
        loss = cp.ndarray(max(n, 1), acc)
        wsum = cp.ndarray(max(n, 1), acc)
        flags = 0
    flags |= w is not None
    if n:
        kernel(grid, (block,), (x, t, x if w is None else w, out, loss, wsum, flag, *rest, _i32(flags)))
    if reduction != "none":
        _kernel("loss_reduce", name)((1,), (1024,), (loss, wsum, out, _i64(n), _i32(reduction == "mean")))
        if n:
            _check_bad(flag)
    elif n:
        _check_bad(flag)
    return out


def cross_entropy_backward(grad, x, target, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """The gradient of cross_entropy's logits for class-index targets, from the loss's gradient ``grad``
    (CuPy: 0-d for 'mean'/'sum', per target for 'none'): ``(softmax(x) - smoothed one-hot target) * grad``
    per row, class weights included. One launch (two for 'mean': the total target weight first).

    ``x`` is ``(N, C)`` or ``(C,)`` (with a 0-d ``target``); returns an array of ``x``'s dtype and shape.

    Raises:
        NotImplementedError: for inputs of more than 2 dims.
    """
    cp = cupy_module()
    name = _dtype_name(x)
    if x.ndim > 2:
        raise NotImplementedError("cross_entropy_backward: (N, C, d1, ...) inputs are not supported")
    xs = x.reshape(1, -1) if x.ndim == 1 else x
    rows, C = xs.shape
    dx = cp.ndarray(xs.shape, x.dtype)
    if xs.size == 0:
        return dx.reshape(x.shape)
    xs = _contig(cp, xs)
    t = _contig(cp, _flat(target))
    w = None if weight is None else _contig(cp, _flat(weight).astype(x.dtype, copy=False))
    g = _contig(cp, _flat(grad.astype(x.dtype, copy=False)))
    index = numpy_dtype_name(t.dtype)
    flags = (w is not None) | (reduction == "none") << 1
    divisor = g
    if reduction == "mean":
        acc = np.float64 if name == "float64" else np.float32
        divisor = cp.ndarray(1, acc)
        _kernel("target_weight_sum", name, index=index)(
            (1,), (1024,), (t, xs if w is None else w, divisor, _i64(rows), _i32(C), _i64(ignore_index),
                           _i32(w is not None)))
        flags |= 4
    tpr, block, _ = _row_config(C, name)
    tpr, block = (32, 128) if tpr == 32 else (tpr, tpr)
    k = _kernel("ce_bwd_rows", name, index=index, tpr=tpr, block=block)
    k(_grid_rows(rows, tpr, block), (block,),
      (xs, t, xs if w is None else w, g, divisor, dx, _i64(rows), _i32(C), _i64(ignore_index), _f64(label_smoothing),
       _i32(flags)))
    return dx.reshape(x.shape)


# -- tensor-level helpers for the derivative formulas ------------------------------------------------------


def _wrap(array, like):
    from ..._tensor import Tensor

    return Tensor._make(array, like._device)


def softmax_backward_tensor(grad, result, dim, log=False):
    """:func:`softmax_backward` (or :func:`log_softmax_backward`) on CUDA tensors: a new tensor (not recorded
    by autograd; for backward passes without ``create_graph``)."""
    return _wrap(_softmax_backward(grad._data, result._data, dim, log), result)


def layer_norm_backward_tensor(grad, input, normalized_shape, weight, eps, output_mask):
    """:func:`layer_norm_backward` on CUDA tensors: ``(d input, d weight, d bias)`` tensors (or None)."""
    inner = math.prod(input.shape[input.ndim - len(normalized_shape):])
    dx, dw, db = layer_norm_backward(grad._data, input._data, inner, None if weight is None else weight._data,
                                     float(eps), output_mask, tuple(normalized_shape))
    return tuple(None if a is None else _wrap(a, input) for a in (dx, dw, db))


def cross_entropy_backward_tensor(grad, input, target, weight, ignore_index, label_smoothing, reduction):
    """:func:`cross_entropy_backward` on CUDA tensors, or None for the calls it does not take (probability
    targets, inputs of more than 2 dims, dtypes other than float16/bfloat16/float32/float64)."""
    if input.ndim > 2 or tuple(target.shape) == tuple(input.shape) or _dtype_name(input._data) is None:
        return None
    if numpy_dtype_name(target._data.dtype) not in _ITYPES or type(target._data) is np.ndarray:
        return None
    w = None if weight is None else weight._data
    return _wrap(cross_entropy_backward(grad._data, input._data, target._data, w, int(ignore_index),
                                        float(label_smoothing), reduction), input)


# -- registry kernels --------------------------------------------------------------------------------------


def _device_array(cp, t):
    """``t``'s array on the GPU (a 0-dim CPU tensor may join a CUDA op: its value is copied over)."""
    a = t._data
    return cp.asarray(a) if type(a) is np.ndarray else a


def _generic(op, *args):
    """What ``op`` ran on CUDA before these kernels: its decomposition (all of these ops are composites; run
    without recording, as a kernel runs below autograd), else its generic kernel."""
    if op.decomposition is not None:
        from ..._grad_mode import no_grad

        with no_grad():
            return op.decomposition(*args)._data
    from .._backend import fallback_kernel

    return fallback_kernel(op)(*args)


def _softmax_kernel(op, log):
    from ..._ops.nn_softmax import _softmax_args

    opname = op.name

    negate = opname == "softmin"

    def kernel(input, dim=None, _stacklevel=3, dtype=None):
        d, out = _softmax_args(opname, input, dim, _stacklevel, dtype, warn=False)
        x = input._data
        if negate:  # softmin(x) = softmax(-x), -x taken in x's dtype as on CPU
            if numpy_dtype_name(x.dtype) == "bfloat16":  # through ember's neg, which knows CuPy's bfloat16
                from ..._grad_mode import no_grad

                with no_grad():
                    x = (-input)._data
            else:
                x = cupy_module().negative(x)
        want = out.numpy_dtype
        if x.dtype != want:
            x = x.astype(want)
        if _dtype_name(x) is None:
            return _generic(op, input, dim, _stacklevel, dtype)
        return softmax_forward(x, d, log)

    kernel.__name__ = f"{opname}_cuda"
    return kernel


def _layer_norm_kernel(op):
    def kernel(input, normalized_shape, weight=None, bias=None, eps=1e-05):
        cp = cupy_module()
        x = input._data
        params = [None if p is None else _device_array(cp, p) for p in (weight, bias)]
        if _dtype_name(x) is None or any(p is not None and _dtype_name(p) is None for p in params):
            return _generic(op, input, normalized_shape, weight, bias, eps)
        k = len(normalized_shape)
        inner = math.prod(x.shape[x.ndim - k:])
        return layer_norm_forward(x, inner, params[0], params[1], float(eps))

    kernel.__name__ = "layer_norm_cuda"
    return kernel


def _class_loss_args(cp, input, target, weight):
    """``(x, target, weight)`` arrays for a class-index loss kernel, or None when the kernels don't take them."""
    x = input._data
    if _dtype_name(x) is None:
        return None
    t = _device_array(cp, target)
    if numpy_dtype_name(t.dtype) not in _ITYPES:
        return None
    w = None if weight is None else _device_array(cp, weight)
    return x, t, w


def _cross_entropy_kernel(op):
    from ..._ops._nn_common import _kernel_reduction

    def kernel(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
               label_smoothing=0.0):
        cp = cupy_module()
        args = None
        if tuple(target.shape) != tuple(input.shape):  # probability targets take the generic kernel
            args = _class_loss_args(cp, input, target, weight)
        if args is None:
            return _generic(op, input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        reduction = _kernel_reduction(size_average, reduce, reduction)
        return cross_entropy_forward(*args, int(ignore_index), float(label_smoothing), reduction)

    kernel.__name__ = "cross_entropy_cuda"
    return kernel


def _nll_loss_kernel(op):
    from ..._ops._nn_common import _kernel_reduction

    def kernel(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        cp = cupy_module()
        args = _class_loss_args(cp, input, target, weight)
        if args is None:
            return _generic(op, input, target, weight, size_average, ignore_index, reduce, reduction)
        reduction = _kernel_reduction(size_average, reduce, reduction)
        return nll_loss_forward(*args, int(ignore_index), reduction)

    kernel.__name__ = "nll_loss_cuda"
    return kernel


def register():
    """Install the kernels of this module as the ``cuda`` kernels of their registry ops (once; an op that
    has a ``cuda`` kernel already keeps it)."""
    from ..._ops._registry import registry

    makers = {
        "softmax": lambda op: _softmax_kernel(op, False),
        "log_softmax": lambda op: _softmax_kernel(op, True),
        "softmin": lambda op: _softmax_kernel(op, False),
        "layer_norm": _layer_norm_kernel,
        "cross_entropy": _cross_entropy_kernel,
        "nll_loss": _nll_loss_kernel,
    }
    for name, make in makers.items():
        op = registry.get(name)
        if op is not None and "cuda" not in op.kernels:
            op.register_kernel("cuda", make(op))
