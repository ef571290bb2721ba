"""``embedding`` on the GPU, forward and backward, without a host read: one launch each.

The generic route (``index_select`` forward, ``index_add`` backward) checks the indices' range with a
reduction whose answer the host reads: a wait for the GPU in every language model's forward and backward.
As PyTorch's kernels do with a device-side assert, these kernels check on the GPU: an index outside
``[0, num_embeddings)`` sets a flag (its row of the result is zero, its gradient is dropped), and the flag
is read at the next synchronising call (:mod:`ember.cuda._async_errors`), which raises PyTorch's
``IndexError("index out of range in self")`` there.

* :func:`forward`: rows of a contiguous weight of 1, 2, 4 or 8-byte elements, copied as raw bits (one thread per
  element);
* :func:`weight_grad`: the weight's gradient of float32/float64 (atomic adds of each gradient row into its
  index's row; ``padding_idx`` gets none). Outside deterministic mode only (the order of the additions varies,
  as in the generic ``index_add`` on the GPU, which also adds atomically).
"""

from __future__ import annotations

import numpy as np

from ..._dtype import numpy_dtype_name
from .. import _async_errors
from .._runtime import cupy_module

__all__ = ["forward", "weight_grad", "register"]

_THREADS = 256
_WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}  # (by itemsize)
_INDEX = {"int64": "long long", "int32": "int"}
_ACCUMULATE = {"float32": "float", "float64": "double"}

_FORWARD = r"""
extern "C" __global__ void ember_embedding_forward(const W* __restrict__ weight, const I* __restrict__ index,
                                                   W* __restrict__ out, long long n, long long width,
                                                   long long rows, int* __restrict__ bad) {
    const long long total = n * width;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / width, j = e - i * width;
        const long long r = (long long)index[i];
        if (r < 0 || r >= rows) {  // reported at the next synchronising call; the row is left zero
            out[e] = (W)0;
            if (j == 0) *bad = 1;
            continue;
        }
        out[e] = weight[r * width + j];
    }
}
"""

_BACKWARD = r"""
extern "C" __global__ void ember_embedding_backward(const T* __restrict__ grad, const I* __restrict__ index,
                                                    T* __restrict__ out, long long n, long long width,
                                                    long long rows, long long padding) {
    const long long total = n * width;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / width;
        const long long r = (long long)index[i];
        if (r < 0 || r >= rows || r == padding) continue;  // (a bad index was flagged by the forward)
        atomicAdd(out + r * width + (e - i * width), grad[e]);
    }
}
"""

_kernels = {}
_flags = {}  # device id -> a one-element int32 CuPy array: an index out of range was seen (until read)


def _kernel(kind, word, index):
    key = (kind, word, index)
    fn = _kernels.get(key)
    if fn is None:
        body, name = (_FORWARD, "ember_embedding_forward") if kind == "forward" else (_BACKWARD,
                                                                                      "ember_embedding_backward")
        letter = "W" if kind == "forward" else "T"
        # the source text depends on the types only, so CuPy's on-disk cache finds it in a new process
        code = f"#define {letter} {word}\n#define I {_INDEX[index]}\n" + body
        fn = _kernels[key] = cupy_module().RawKernel(code, name)
    return fn


def _grid(total):
    return (max(1, min((total + _THREADS - 1) // _THREADS, 65535)),)


def _bad_flag(cp):
    dev = cp.cuda.runtime.getDevice()
    flag = _flags.get(dev)
    if flag is None:
        flag = _flags[dev] = cp.zeros(1, np.int32)
    return flag


def _read_flag(flag):
    if int(flag.get()[0]):  # (inside a synchronising call: host_sync has reported it)
        flag.fill(0)
        raise IndexError("index out of range in self (found by an embedding kernel on the GPU and reported at "
                         "this synchronizing call)")


def forward(weight, index):
    """``weight[index]`` for a C-contiguous 2-D CuPy ``weight`` and int64/int32 CuPy ``index`` of any shape, or
    None when the kernel doesn't take them (another layout or index dtype). Out-of-range indices are flagged on
    the GPU and raise ``IndexError`` at the next synchronising call."""
    cp = cupy_module()
    itemsize = weight.dtype.itemsize
    index_dtype = numpy_dtype_name(index.dtype)
    if weight.ndim != 2 or not weight._c_contiguous or itemsize not in _WORDS or index_dtype not in _INDEX:
        return None
    rows, width = weight.shape
    out = cp.ndarray(tuple(index.shape) + (width,), weight.dtype)
    total = index.size * width
    if total == 0:
        return out
    index = index if index._c_contiguous else cp.ascontiguousarray(index)
    flag = _bad_flag(cp)
    _kernel("forward", _WORDS[itemsize], index_dtype)(
        _grid(total), (_THREADS,), (weight, index, out, np.int64(index.size), np.int64(width), np.int64(rows), flag))
    _async_errors.defer(("embedding indices", flag.data.device_id), lambda: _read_flag(flag))
    return out


def weight_grad(grad, index, num_weights, padding_idx):
    """The gradient of ``embedding``'s weight, ``(num_weights, width)``, from the output's gradient ``grad``
    (CuPy, ``index.shape + (width,)``, float32/float64) and the int64/int32 CuPy ``index``; the row of
    ``padding_idx`` (may be negative, or None) gets nothing. None when the kernel doesn't take them."""
    cp = cupy_module()
    name = numpy_dtype_name(grad.dtype)
    index_dtype = numpy_dtype_name(index.dtype)
    if name not in _ACCUMULATE or index_dtype not in _INDEX or grad.ndim < 1:
        return None
    width = grad.shape[-1]
    out = cp.zeros((num_weights, width), grad.dtype)
    total = index.size * width
    if total == 0:
        return out
    grad = grad if grad._c_contiguous else cp.ascontiguousarray(grad)
    index = index if index._c_contiguous else cp.ascontiguousarray(index)
    padding = -1 if padding_idx is None else (padding_idx + num_weights if padding_idx < 0 else padding_idx)
    _kernel("backward", _ACCUMULATE[name], index_dtype)(
        _grid(total), (_THREADS,),
        (grad, index, out, np.int64(index.size), np.int64(width), np.int64(num_weights), np.int64(padding)))
    return out


def weight_grad_tensor(grad, input, num_weights, padding_idx):
    """:func:`weight_grad` on tensors: a new cuda tensor, or None (then the derivative's formula runs).
    Not in deterministic mode (atomic additions)."""
    from ..._deterministic import are_deterministic_algorithms_enabled
    from ..._tensor import Tensor

    if are_deterministic_algorithms_enabled() or input._device.type != "cuda":
        return None
    out = weight_grad(grad._data, input._data, num_weights, padding_idx)
    return None if out is None else Tensor._make(out, grad._device)


def _embedding_kernel(op):
    from .rows import _generic

    def kernel(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
               sparse=False):
        out = None
        if max_norm is None and input._device.type == "cuda":
            out = forward(weight._data, input._data)
        if out is None:
            return _generic(op, input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
        return out

    kernel.__name__ = "embedding_cuda"
    return kernel


def register():
    """Install :func:`forward` as the ``cuda`` kernel of ``embedding`` (once; a kernel there already stays)."""
    from ..._ops._registry import registry

    op = registry.get("embedding")
    if op is not None and "cuda" not in op.kernels:
        op.register_kernel("cuda", _embedding_kernel(op))
