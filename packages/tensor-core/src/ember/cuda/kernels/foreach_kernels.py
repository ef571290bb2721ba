"""``ember._foreach_add_``/``_foreach_sub_`` of CUDA tensor lists in one launch (the SGD step's update).

The list ops run one registry op per tensor (:mod:`ember._ops.foreach`); on the GPU each ``t.add_(g, alpha=a)``
is a dispatch, a fused ``add`` kernel and a copy back, about 100 µs of host time for an MLP's six parameters
where PyTorch's multi-tensor kernel takes one launch. Here the tensors of the first list (float32, float64,
float16 or bfloat16, one device, C-contiguous) are seen as one concatenation, as in :mod:`.multi_tensor`, and
paired element by element with those of the second list (the same shapes and dtype): one kernel computes
``t + o * alpha`` (or ``t - o * alpha``; ``t + o`` when ``alpha`` is 1) in the tensors' dtype, each operation
rounded once (``--fmad=false``), which is what the per-tensor ``add_`` computes: the same bits. float16/bfloat16 are
computed in float32 (``alpha`` too) and rounded once, as the per-tensor fast kernels
(:mod:`.pointwise`) compute them.

:func:`add_` declines (returns False) every call it does not take; the list op then runs its per-tensor ops.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._runtime import cupy_module
from .halves import CTYPES as _CTYPES
from .halves import SOURCES as _HALF_SOURCES

__all__ = ["add_"]

_CHUNK = 16384  # elements per block
_THREADS = 256
#: Tensors per launch: the by-value table holds ``3 * _MAX_TENSORS + 1`` int64 words (3080 bytes), under CUDA's
#: 4 KB of kernel arguments with the others.
_MAX_TENSORS = 128
_TABLE_WORDS = 3 * _MAX_TENSORS + 1
_TABLE_DTYPE = np.dtype((np.void, 8 * _TABLE_WORDS))

_SOURCE = r"""
// Passed by value: n pointers of the written tensors, n of the operands, then the n + 1 running sizes.
struct Table { long long w[3 * MAX_TENSORS + 1]; };

extern "C" __global__ void __launch_bounds__(THREADS)
ember_foreach_axpy(const Table table, int n, long long total, A alpha) {
    const long long* sizes = table.w + 2 * n;
    const long long start = (long long)blockIdx.x * CHUNK;
    const long long end = start + CHUNK < total ? start + CHUNK : total;
    int lo = 0, hi = n - 1;
    while (lo < hi) {  // the last tensor whose range starts at or before start
        const int mid = (lo + hi + 1) >> 1;
        if (sizes[mid] <= start) lo = mid; else hi = mid - 1;
    }
    int k = lo;
    for (long long e = start + threadIdx.x; e < end; e += blockDim.x) {
        while (e >= sizes[k + 1]) k++;
        const long long i = e - sizes[k];
        T* x = (T*)table.w[k];
        const A y = LOAD(((const T*)table.w[n + k])[i]);
        STORE(x[i], EXPR);
    }
}
"""

# the per-tensor kernels' expressions (ember.cuda.kernels.pointwise): add, add_alpha, sub, sub_alpha
_EXPRESSIONS = {("add", False): "LOAD(x[i]) + y", ("add", True): "LOAD(x[i]) + y * alpha",
                ("sub", False): "LOAD(x[i]) - y", ("sub", True): "LOAD(x[i]) - y * alpha"}
#: reading and writing an element: the 16-bit types widen to float and round back once
_FLOAT_ACCESS = "#define LOAD(v) (v)\n#define STORE(slot, v) ((slot) = (v))\n"
_HALF_ACCESS = "#define LOAD(v) to_acc(v)\n#define STORE(slot, v) put(&(slot), (v))\n"

_functions = {}  # (device, dtype, op, scaled) -> the kernel, or None when it did not compile


def _function(cp, dtype, name, scaled):
    key = (cp.cuda.runtime.getDevice(), dtype, name, scaled)
    fn = _functions.get(key, False)
    if fn is False:
        storage, compute = _CTYPES[dtype.name]
        access = _FLOAT_ACCESS if storage == compute else _HALF_SOURCES[storage] + _HALF_ACCESS
        code = (f"#define T {storage}\n#define A {compute}\n#define CHUNK {_CHUNK}\n#define THREADS {_THREADS}\n"
                f"#define MAX_TENSORS {_MAX_TENSORS}\n#define EXPR ({_EXPRESSIONS[name, scaled]})\n{access}{_SOURCE}")
        try:
            fn = cp.RawModule(code=code, options=("--fmad=false",)).get_function("ember_foreach_axpy")
        except Exception as exc:  # a kernel that does not build leaves the list op to its per-tensor ops
            warnings.warn(f"ember: the CUDA _foreach_{name}_ kernel for {dtype} did not compile "
                          f"({type(exc).__name__}: {exc}); the list op takes its per-tensor ops", RuntimeWarning,
                          stacklevel=3)
            fn = None
        _functions[key] = fn
    return fn


def _arrays(tensors, others):
    """The CuPy arrays of two paired lists of plain cuda tensors when the kernel takes them: one float dtype,
    one device, C-contiguous, equal shapes; else None."""
    first = tensors[0]._data
    dtype = first.dtype
    if dtype.name not in _CTYPES:
        return None
    device = first.data.device_id
    xs, ys = [], []
    for t, o in zip(tensors, others):
        x, y = t._data, o._data
        if x.dtype != dtype or y.dtype != dtype or x.shape != y.shape:
            return None
        if not (x._c_contiguous and y._c_contiguous) or x.data.device_id != device or y.data.device_id != device:
            return None
        xs.append(x)
        ys.append(y)
    return xs, ys


def _tables(xs, ys):
    """``(table, n, total)`` per launch, at most :data:`_MAX_TENSORS` pairs each."""
    for first in range(0, len(xs), _MAX_TENSORS):
        part_x, part_y = xs[first:first + _MAX_TENSORS], ys[first:first + _MAX_TENSORS]
        n = len(part_x)
        words = np.zeros(_TABLE_WORDS, np.uint64)  # addresses may not fit int64; the kernel reads the same bits
        words[:n] = [a.data.ptr for a in part_x]
        words[n:2 * n] = [a.data.ptr for a in part_y]
        sizes = np.cumsum([0] + [a.size for a in part_x])
        words[2 * n:3 * n + 1] = sizes
        yield words.view(_TABLE_DTYPE), n, int(sizes[-1])


def add_(name, tensors, others, alpha):
    """``t.<name>_(o, alpha=alpha)`` for the paired plain cuda tensors of the lists ``tensors`` and ``others``
    (``name``: ``"add"`` or ``"sub"``) in one launch per :data:`_MAX_TENSORS` pairs; returns whether it ran
    (False: nothing was written, and the caller runs the per-tensor ops). The caller checked that the tensors
    are plain cuda tensors, that no mode is active and that nothing records; it bumps their versions."""
    if (type(alpha) is not int and type(alpha) is not float) or (type(alpha) is int and not -(2**24) <= alpha <= 2**24):
        return False
    arrays = _arrays(tensors, others)
    if arrays is None:
        return False
    xs, ys = arrays
    cp = cupy_module()
    dtype = xs[0].dtype
    scaled = not (type(alpha) is int and alpha == 1)
    with cp.cuda.Device(xs[0].data.device_id):
        fn = _function(cp, dtype, name, scaled)
        if fn is None:
            return False
        # the per-tensor kernels' alpha: rounded to the dtype, or to float32 for the 16-bit dtypes
        a = (dtype if dtype.itemsize > 2 else np.dtype(np.float32)).type(alpha)
        for table, n, total in _tables(xs, ys):
            if total:
                fn(((total + _CHUNK - 1) // _CHUNK,), (_THREADS,), (table, np.int32(n), np.int64(total), a))
    return True
