"""The fused Adam/AdamW step for CUDA parameters: one kernel launch for a whole list of tensors.

:func:`fused_adam_` is the CUDA counterpart of ``ember._C.fused_adam_`` (the CPU fused step that
``ember.optim.Adam`` takes by default). The tensors of a step are seen as one concatenation: each block of
the kernel updates a fixed-size chunk of it, finds the tensor its chunk starts in by a binary search over
the running sizes, and walks on into the next tensors. The device needs each tensor's five pointers
(parameter, gradient, two moments, AMSGrad's maximum) and the running sizes: a small int64 table, uploaded
when the set of tensors changes and kept between steps otherwise (parameters and moments are updated in
place, and CuPy's memory pool hands the gradients of each backward pass the same addresses in a steady
training loop), so a step is usually just the launch.

Every element is read and written once, in float32 (float64 for float64 tensors) whatever the storage
dtype (float16, bfloat16, float32, float64), in the single-tensor loop's order of operations.
"""

from __future__ import annotations

import numpy as np

from ..._dtype import numpy_dtype_name
from .._runtime import cupy_module
from .rows import _CTYPES, _PRELUDE

__all__ = ["fused_adam_", "supported_dtype"]

_CHUNK = 4096  # elements per block
_THREADS = 256

_ADAM = r"""
extern "C" __global__ void __launch_bounds__(256)
ember_fused_adam(const long long* __restrict__ table, int n, long long total, double lr, double beta1,
                 double beta2, double wd, double eps_term, double step_size, int flags) {
    const long long* off = table + 5 * n;
    const long long start = (long long)blockIdx.x * CHUNK;
    const long long end = start + CHUNK < total ? start + CHUNK : total;
    int lo = 0, hi = n - 1;
    while (lo < hi) {  // the last tensor whose range starts at or before this chunk
        const int mid = (lo + hi + 1) >> 1;
        if (off[mid] <= start) lo = mid; else hi = mid - 1;
    }
    int k = lo;
    const bool amsgrad = flags & 1, maximize = flags & 2, decoupled = flags & 4;
    const A wdv = (A)wd, decay = (A)(1.0 - lr * wd);
    const A w1 = (A)(1.0 - beta1), w2 = (A)(1.0 - beta2), et = (A)eps_term, ss = (A)step_size;
    for (long long e = start + threadIdx.x; e < end; e += blockDim.x) {
        while (e >= off[k + 1]) k++;
        const long long i = e - off[k];
        T* p = (T*)table[k];
        const T* g = (const T*)table[n + k];
        T* m = (T*)table[2 * n + k];
        T* v = (T*)table[3 * n + k];
        A gv = to_acc(g[i]);
        if (maximize) gv = -gv;
        A pv = to_acc(p[i]);
        if (wdv != (A)0) {
            if (decoupled) pv = pv * decay;
            else gv = gv + wdv * pv;
        }
        A mv = to_acc(m[i]);
        mv = mv + w1 * (gv - mv);
        A vv = to_acc(v[i]);
        vv = vv + w2 * (gv * gv - vv);
        A den;
        if (amsgrad) {
            T* vm = (T*)table[4 * n + k];
            A mx = to_acc(vm[i]);
            mx = mx > vv ? mx : vv;
            put(vm + i, mx);
            den = sq(mx) + et;
        } else {
            den = sq(vv) + et;
        }
        pv = pv - ss * mv / den;
        put(p + i, pv);
        put(m + i, mv);
        put(v + i, vv);
    }
}
"""

_kernels = {}
_tables = {}  # (device, dtype, pointers and sizes) -> the uploaded table
_MAX_TABLES = 32


def supported_dtype(array):
    """Whether the fused step takes CuPy ``array``'s dtype (float16, bfloat16, float32, float64)."""
    return numpy_dtype_name(array.dtype) in _CTYPES


def _kernel(dtype):
    fn = _kernels.get(dtype)
    if fn is None:
        ctype, acc = _CTYPES[dtype]
        code = f"#define T {ctype}\n#define A {acc}\n#define CHUNK {_CHUNK}\n" + _PRELUDE + _ADAM
        fn = _kernels[dtype] = cupy_module().RawKernel(code, "ember_fused_adam")
    return fn


def _table(cp, dtype, columns, sizes):
    """The device table of pointers and running sizes for one launch (cached by its contents)."""
    n = len(sizes)
    ptrs = [0 if a is None else a.data.ptr for col in columns for a in col]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    key = (cp.cuda.runtime.getDevice(), dtype, tuple(ptrs), tuple(sizes))
    table = _tables.get(key)
    if table is None:
        if len(_tables) >= _MAX_TABLES:
            _tables.clear()
        host = np.concatenate([np.array(ptrs, dtype=np.uint64).view(np.int64), offsets])
        # A host-to-device copy of launch metadata (addresses and sizes), not of tensor data.
        table = _tables[key] = cp.asarray(host)
    return table, int(offsets[-1])


def fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay, eps,
                amsgrad, maximize, decoupled_weight_decay):
    """One Adam/AdamW step over CuPy arrays, in place: ``params``, ``exp_avgs``, ``exp_avg_sqs`` (and
    ``max_exp_avg_sqs`` with ``amsgrad``) are updated; ``steps`` are the step numbers (already incremented)
    as Python numbers.

    All arrays of one parameter share its dtype and size and are C-contiguous on the current device.
    Parameters are launched together per (dtype, step) group: usually one launch.
    """
    cp = cupy_module()
    groups = {}
    for i, p in enumerate(params):
        groups.setdefault((numpy_dtype_name(p.dtype), float(steps[i])), []).append(i)
    flags = int(bool(amsgrad)) | int(bool(maximize)) << 1 | int(bool(decoupled_weight_decay)) << 2
    for (dtype, step), idx in groups.items():
        bc1 = 1 - beta1**step
        bc2_sqrt = (1 - beta2**step) ** 0.5
        step_size = lr / bc1 * bc2_sqrt
        eps_term = eps * bc2_sqrt
        columns = (
            [params[i] for i in idx], [grads[i] for i in idx], [exp_avgs[i] for i in idx],
            [exp_avg_sqs[i] for i in idx], [max_exp_avg_sqs[i] for i in idx] if amsgrad else [None] * len(idx),
        )
        sizes = [int(params[i].size) for i in idx]
        table, total = _table(cp, dtype, columns, sizes)
        if total == 0:
            continue
        blocks = (total + _CHUNK - 1) // _CHUNK
        _kernel(dtype)(
            (blocks,), (_THREADS,),
            (table, np.int32(len(idx)), np.int64(total), np.float64(lr), np.float64(beta1), np.float64(beta2),
             np.float64(weight_decay), np.float64(eps_term), np.float64(step_size), np.int32(flags)),
        )
