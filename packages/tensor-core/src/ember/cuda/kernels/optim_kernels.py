"""The fused Adam/AdamW step for CUDA parameters: one kernel launch for a whole list of tensors.

:func:`fused_adam_` is the CUDA counterpart of ``ember._C.fused_adam_`` (the CPU fused step that
``ember.optim.Adam`` takes by default). The tensors of a step are seen as one concatenation: each block of
the kernel updates a fixed-size chunk of it, finds the tensor its chunk starts in by a binary search over
the running sizes, and walks on into the next tensors. The device needs each tensor's five pointers
(parameter, gradient, two moments, AMSGrad's maximum) and the running sizes: a small int64 table, passed by
value as a kernel argument (built on the host at each step: nothing is uploaded, nothing synchronizes, and
nothing depends on the gradients keeping their addresses between steps), so a step is just the launch.

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
// Passed by value (in the kernel parameter space, no upload): n pointers for each of the 5 arrays (parameter,
// gradient, two moments, AMSGrad's maximum), then the n + 1 running sizes; MAX_TENSORS keeps it under 4 KB.
struct Table { long long w[6 * MAX_TENSORS + 1]; };

extern "C" __global__ void __launch_bounds__(256)
ember_fused_adam(const Table table, int n, long long total, double lr, double beta1,
                 double beta2, double wd, double eps_term, double step_size, int flags) {
    const long long start = (long long)blockIdx.x * CHUNK;
    const long long end = start + CHUNK < total ? start + CHUNK : total;
    int lo = 0, hi = n - 1;
    while (lo < hi) {  // the last tensor whose range starts at or before this chunk
        const int mid = (lo + hi + 1) >> 1;
        if (table.w[5 * n + mid] <= start) lo = mid; else hi = mid - 1;
    }
    int k = lo;
    const bool amsgrad = flags & 1, maximize = flags & 2, decoupled = flags & 4;
    const A wdv = (A)wd, decay = (A)(1.0 - lr * wd);
    const A w1 = (A)(1.0 - beta1), w2 = (A)(1.0 - beta2), et = (A)eps_term, ss = (A)step_size;
    for (long long e = start + threadIdx.x; e < end; e += blockDim.x) {
        while (e >= table.w[5 * n + k + 1]) k++;
        const long long i = e - table.w[5 * n + k];
        T* p = (T*)table.w[k];
        const T* g = (const T*)table.w[n + k];
        T* m = (T*)table.w[2 * n + k];
        T* v = (T*)table.w[3 * n + k];
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
            T* vm = (T*)table.w[4 * n + k];
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

#: Tensors per launch: the by-value table of one launch holds ``6 * _MAX_TENSORS + 1`` int64 words (3080 bytes),
#: which with the other arguments stays under CUDA's 4 KB of kernel arguments. A group of more tensors takes
#: one launch per ``_MAX_TENSORS`` of them.
_MAX_TENSORS = 64
_TABLE_WORDS = 6 * _MAX_TENSORS + 1
#: The table as CuPy passes it: a numpy array of one element is passed by value, its bytes copied into the launch.
_TABLE_DTYPE = np.dtype((np.void, 8 * _TABLE_WORDS))


def supported_dtype(array):
    """Whether the fused step takes CuPy ``array``'s dtype (float16, bfloat16, float32, float64)."""
    return numpy_dtype_name(array.dtype) in _CTYPES


def _kernel(dtype):
    fn = _kernels.get(dtype)
    if fn is None:
        ctype, acc = _CTYPES[dtype]
        code = f"#define T {ctype}\n#define A {acc}\n#define CHUNK {_CHUNK}\n#define MAX_TENSORS {_MAX_TENSORS}\n"
        fn = _kernels[dtype] = cupy_module().RawKernel(code + _PRELUDE + _ADAM, "ember_fused_adam")
    return fn


def _pack_table(columns, idx):
    """The kernel's table for the tensors at ``idx`` (at most :data:`_MAX_TENSORS`) of the five ``columns``
    (arrays with ``.data.ptr`` and ``.size``, or None), and their total size.

    Returns:
        (numpy array of one :data:`_TABLE_DTYPE` element, int): the by-value kernel argument (each column's
        ``len(idx)`` device addresses, 0 for None, then the ``len(idx) + 1`` running sizes of ``columns[0]``'s
        arrays, zeros after) and the total size. Built on the host for every launch, so that nothing is uploaded
        and nothing depends on the gradients keeping their addresses between steps.
    """
    words = []
    for col in columns:
        words += [0 if col[i] is None else col[i].data.ptr for i in idx]
    total = 0
    words.append(0)
    for i in idx:
        total += columns[0][i].size
        words.append(total)
    table = np.zeros(_TABLE_WORDS, np.uint64)  # addresses may not fit int64; the kernel reads the same bits
    table[: len(words)] = words
    return table.view(_TABLE_DTYPE), total


def _groups(params, steps):
    """The indices of ``params`` by (numpy dtype, step as a float), in first-seen order: one kernel each."""
    groups = {}
    for i, p in enumerate(params):
        key = (p.dtype, float(steps[i]))
        group = groups.get(key)
        if group is None:
            groups[key] = [i]
        else:
            group.append(i)
    return groups


def fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay, eps,
                amsgrad, maximize, decoupled_weight_decay):
    """One Adam/AdamW step over CuPy arrays, in place: ``params``, ``exp_avgs``, ``exp_avg_sqs`` (and
    ``max_exp_avg_sqs`` with ``amsgrad``) are updated; ``steps`` are the step numbers (already incremented)
    as Python numbers.

    All arrays of one parameter share its dtype and size and are C-contiguous on the current device.
    Parameters are launched together per (dtype, step) group, :data:`_MAX_TENSORS` at a time: usually one launch.
    The launch is the only CUDA call (the pointer table travels with it): nothing synchronizes with the device.
    """
    columns = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs if amsgrad else [None] * len(params))
    flags = int(bool(amsgrad)) | int(bool(maximize)) << 1 | int(bool(decoupled_weight_decay)) << 2
    for (np_dtype, step), idx in _groups(params, steps).items():
        bc1 = 1 - beta1**step
        bc2_sqrt = (1 - beta2**step) ** 0.5
        step_size = lr / bc1 * bc2_sqrt
        eps_term = eps * bc2_sqrt
        dtype = numpy_dtype_name(np_dtype)
        for first in range(0, len(idx), _MAX_TENSORS):
            part = idx[first:first + _MAX_TENSORS]
            table, total = _pack_table(columns, part)
            if total == 0:
                continue
            # CuPy passes a numpy array of one element by value (its custom-structure kernel arguments, CuPy >= 9)
            _kernel(dtype)(
                ((total + _CHUNK - 1) // _CHUNK,), (_THREADS,),
                (table, np.int32(len(part)), np.int64(total), np.float64(lr), np.float64(beta1), np.float64(beta2),
                 np.float64(weight_decay), np.float64(eps_term), np.float64(step_size), np.int32(flags)),
            )
