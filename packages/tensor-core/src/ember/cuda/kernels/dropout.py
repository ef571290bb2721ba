"""Dropout on the GPU in one kernel: draw the mask, scale the kept values, write the output (and the mask).

The decomposition of ``F.dropout`` on cuda took three passes over memory: ``ember.bernoulli`` writes a bool
mask (:func:`ember.cuda.kernels.philox.bernoulli`), then ``input * mask`` and ``* scale`` are two pointwise
kernels, about 10 bytes of traffic per bfloat16 element and three launches. :func:`forward` does it in one
pass: each thread computes one Philox4x32-10 block (:mod:`.philox`) for four elements, compares their
uniforms with ``keep``, and writes

    out[i]  = (x[i] * m[i]) * scale     m[i] = 1 where u_i < keep, else 0
    mask[i] = m[i]                     (bool; only when asked: what autograd keeps for the backward)

computed in float32 for float32, float16 and bfloat16 (float64 in float64) and rounded once to the dtype.

Same values as the decomposition
--------------------------------
* the stream: element ``i`` takes word ``i % 4`` of Philox block ``i // 4`` of ``(key, offset)`` and keeps
  it where ``(w >> 8) < threshold(keep)``, the layout of :func:`.philox.bernoulli`, so for the key the
  default generator hands out the mask is the one ``ember.bernoulli(empty(shape, bool), keep)`` draws;
* the arithmetic: ``scale`` is ``1 / keep`` rounded to the dtype (``nn_dropout._dropout_scale``), so
  ``x * scale`` of two 16-bit values is exact in float32 and rounded once, as the decomposition's 16-bit
  multiplication rounds it; ``x * m`` first keeps ``x * 0`` of a dropped element (``-0``, or NaN for an
  infinite ``x``) as the decomposition's ``(x * mask) * scale`` gives it.

:func:`backward` is the gradient, ``(grad * m) * scale`` rounded once, one pass over ``grad`` and the
mask; it equals the decomposition's ``grad * (mask / keep)``.

Arrays: C-contiguous CuPy arrays of float32, float64, float16 or bfloat16 (:func:`supported`); a thread
loads and stores its four elements with one vector access when every pointer is aligned to one, else one
by one. ``out`` may be ``x`` itself (in-place dropout): a thread reads its elements before writing them.
"""

from __future__ import annotations

import numpy as np

from .._runtime import cupy_module
from . import philox
from .halves import SOURCES as _HALF_SOURCES

__all__ = ["SOURCE", "supported", "forward", "backward", "reference", "compiled"]

_THREADS = 256

#: numpy dtype name -> (storage type, compute type) in the CUDA source
_TYPES = {"float32": ("float", "float"), "float64": ("double", "double"), "float16": ("f16", "float"),
          "bfloat16": ("bf16", "float")}

# loads and stores of the 32- and 64-bit types (the 16-bit ones are :mod:`.halves`' structs)
_PLAIN_TYPE_SOURCE = r"""
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ void put(double* p, double v) { *p = v; }
"""

#: The kernels, over storage type ``ember_t`` computed in ``ember_acc`` (defined before this text).
SOURCE = r"""
// A thread's four elements go through one vector access where x, out (and the mask) are aligned to one.
__device__ __forceinline__ bool ember_dropout_packed(const void* a, const void* b, const void* m) {
    const unsigned long long bits = (unsigned long long)a | (unsigned long long)b;
    return bits % sizeof(ember_pack4<ember_t>) == 0 && (unsigned long long)m % 4 == 0;
}

// out = (x * m) * scale, m = ((w >> 8) < threshold) from Philox block j of (key, offset); the mask, if any,
// gets m. One Philox block (four elements) per thread. x and out may be the same array (no __restrict__).
extern "C" __global__ void ember_dropout_forward(const ember_t* x, ember_t* out, unsigned char* mask,
                                                 const long long n, const unsigned long long key,
                                                 const unsigned long long offset, const unsigned int threshold,
                                                 const ember_acc scale) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long first = j * 4;
    if (first >= n) return;
    const ember_philox_words w = ember_philox_block((unsigned long long)j, key, offset);
    ember_pack4<unsigned char> m;
#pragma unroll
    for (int k = 0; k < 4; ++k) m.v[k] = (w.v[k] >> 8) < threshold ? 1 : 0;
    if (first + 4 <= n && ember_dropout_packed(x + first, out + first, mask)) {
        const ember_pack4<ember_t> xv = *reinterpret_cast<const ember_pack4<ember_t>*>(x + first);
        ember_pack4<ember_t> r;
#pragma unroll
        for (int k = 0; k < 4; ++k) put(&r.v[k], (to_acc(xv.v[k]) * (ember_acc)m.v[k]) * scale);
        *reinterpret_cast<ember_pack4<ember_t>*>(out + first) = r;
        if (mask != 0) *reinterpret_cast<ember_pack4<unsigned char>*>(mask + first) = m;
    } else {  // the last, partial block, or pointers off the packs
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (first + k < n) {
                put(out + first + k, (to_acc(x[first + k]) * (ember_acc)m.v[k]) * scale);
                if (mask != 0) mask[first + k] = m.v[k];
            }
        }
    }
}

// The gradient: out = (grad * mask) * scale, four elements per thread.
extern "C" __global__ void ember_dropout_backward(const ember_t* __restrict__ grad,
                                                  const unsigned char* __restrict__ mask,
                                                  ember_t* __restrict__ out, const long long n,
                                                  const ember_acc scale) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long first = j * 4;
    if (first >= n) return;
    if (first + 4 <= n && ember_dropout_packed(grad + first, out + first, mask + first)) {
        const ember_pack4<ember_t> g = *reinterpret_cast<const ember_pack4<ember_t>*>(grad + first);
        const ember_pack4<unsigned char> m = *reinterpret_cast<const ember_pack4<unsigned char>*>(mask + first);
        ember_pack4<ember_t> r;
#pragma unroll
        for (int k = 0; k < 4; ++k) put(&r.v[k], (to_acc(g.v[k]) * (ember_acc)m.v[k]) * scale);
        *reinterpret_cast<ember_pack4<ember_t>*>(out + first) = r;
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (first + k < n) put(out + first + k, (to_acc(grad[first + k]) * (ember_acc)mask[first + k]) * scale);
    }
}
"""

#: (device index, numpy dtype name) -> (forward function, backward function)
compiled = {}


def _source(name):
    """The whole CUDA C for numpy dtype ``name``: Philox, the storage type's loads and stores, the kernels."""
    storage, compute = _TYPES[name]
    types = _HALF_SOURCES[storage] if storage in _HALF_SOURCES else _PLAIN_TYPE_SOURCE
    return (philox.SOURCE + types + f"typedef {storage} ember_t;\ntypedef {compute} ember_acc;\n" + SOURCE)


def _functions(name):
    """The two kernels for numpy dtype ``name`` on the current GPU (compiled once; CuPy caches the binary)."""
    cp = cupy_module()
    key = (cp.cuda.runtime.getDevice(), name)
    entry = compiled.get(key)
    if entry is None:
        # --fmad=false: nothing to contract here, but it keeps the binary identical to the tested host build
        module = cp.RawModule(code=_source(name), options=("--fmad=false",))
        entry = compiled[key] = (module.get_function("ember_dropout_forward"),
                                 module.get_function("ember_dropout_backward"))
    return entry


def supported(x):
    """Whether :func:`forward` takes array ``x``: a C-contiguous CuPy array of float32, float64, float16 or
    bfloat16 (other arrays go through the decomposition); False without CuPy (a cuda tensor of the meta kind)."""
    try:
        cp = cupy_module()
    except RuntimeError:
        return False
    return isinstance(x, cp.ndarray) and x.dtype.name in _TYPES and x.flags.c_contiguous


def _scalar(value, dtype):
    """``value`` as the kernels' ``ember_acc`` argument: float64 for float64 arrays, else float32."""
    return np.float64(value) if dtype.name == "float64" else np.float32(value)


def _grid(n):
    threads = -(-n // 4)  # one Philox block (four elements) per thread
    return (-(-threads // _THREADS),), (_THREADS,)


def forward(x, keep, scale, key, offset=0, *, with_mask=False, out=None):
    """Dropout of ``x`` in one kernel: ``(x * m) * scale``, ``m`` the Bernoulli(``keep``) draws of the stream.

    Args:
        x (cupy.ndarray): C-contiguous, float32/float64/float16/bfloat16 (see :func:`supported`), any shape.
        keep (float): the probability of keeping an element, in [0, 1].
        scale (float): the factor of kept elements, a value of ``x``'s dtype (``1 / keep`` rounded to it);
            passed to the kernel in float32 (float64 for float64 arrays), which is exact.
        key (int): the 64-bit Philox key (one draw of the default generator, as ``ember.bernoulli`` takes).
        offset (int): the 64-bit stream index (0 for the generator's draws).
        with_mask (bool): also return the bool mask (for the backward pass).
        out (cupy.ndarray, optional): where to write, ``x`` itself for in-place dropout; else a new array.

    Returns:
        tuple: ``(out, mask)``, ``out`` of ``x``'s shape and dtype, ``mask`` bool of that shape (None
        without ``with_mask``); equal to :func:`reference` of the same arguments.

    Raises:
        TypeError: for an array :func:`supported` does not take, or an ``out`` of another shape or dtype.
        ValueError: for ``keep`` outside [0, 1], or ``key``/``offset`` outside [0, 2**64).
    """
    cp = cupy_module()
    if not supported(x):
        raise TypeError(f"dropout.forward: x must be a C-contiguous cupy array of float32, float64, float16 or "
                        f"bfloat16, got {type(x).__name__} of dtype {x.dtype}")
    if out is None:
        out = cp.empty(x.shape, x.dtype)
    elif out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise TypeError(f"dropout.forward: out must be C-contiguous of shape {x.shape} and dtype {x.dtype}, got "
                        f"{out.shape} {out.dtype}")
    threshold = philox.threshold(keep)
    key, offset = philox._u64("key", key), philox._u64("offset", offset)
    mask = cp.empty(x.shape, np.bool_) if with_mask else None
    n = x.size
    if n:
        grid, block = _grid(n)
        # no mask: a null pointer, passed as 8 zero bytes (older CuPy versions mishandle None arguments)
        target = np.uint64(0) if mask is None else mask
        _functions(x.dtype.name)[0](grid, block, (x, out, target, np.int64(n), np.uint64(key), np.uint64(offset),
                                                  np.uint32(threshold), _scalar(scale, x.dtype)))
    return out, mask


def backward(grad, mask, scale):
    """The gradient of :func:`forward`: ``(grad * mask) * scale`` in one kernel, rounded once.

    Args:
        grad (cupy.ndarray): the output's gradient, of a dtype :func:`supported` takes (any strides: a
            non-contiguous one is copied first).
        mask (cupy.ndarray): the bool mask :func:`forward` returned, of ``grad``'s shape, C-contiguous.
        scale (float): the forward's ``scale``.

    Returns:
        cupy.ndarray: C-contiguous, of ``grad``'s shape and dtype.

    Raises:
        TypeError: for a dtype the kernels do not take, or a mask of another shape or not bool.
    """
    cp = cupy_module()
    if grad.dtype.name not in _TYPES or mask.dtype != np.bool_ or mask.shape != grad.shape:
        raise TypeError(f"dropout.backward: grad must be float32/float64/float16/bfloat16 and mask bool of its "
                        f"shape, got {grad.dtype} {grad.shape} and {mask.dtype} {mask.shape}")
    grad = cp.ascontiguousarray(grad)
    out = cp.empty(grad.shape, grad.dtype)
    n = grad.size
    if n:
        grid, block = _grid(n)
        _functions(grad.dtype.name)[1](grid, block, (grad, mask, out, np.int64(n), _scalar(scale, grad.dtype)))
    return out


def reference(x, keep, scale, key, offset=0):
    """:func:`forward` with ``with_mask=True`` computed in numpy on the host (the same values, bit for bit).

    Example:
        >>> out, mask = reference(np.ones(4, np.float32), 0.5, 2.0, key=0)
        >>> mask.tolist(), out.tolist()
        ([True, False, False, False], [2.0, 0.0, 0.0, 0.0])
    """
    x = np.asarray(x)
    mask = philox.bernoulli_reference(x.shape, keep, np.bool_, key, offset)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    with np.errstate(all="ignore"):
        out = ((x.astype(acc) * mask.astype(acc)) * acc(scale)).astype(x.dtype)
    return out, mask
