"""``GradScaler``'s unscale and scale update on CUDA: two kernels, nothing read back (issue 22's AMP row).

The list-op route of :meth:`ember.amp.GradScaler.unscale_` takes six ops per gradient (``isfinite``, ``all``,
``logical_not``, a cast, ``add_`` into the flag, ``mul_``), and :meth:`~ember.amp.GradScaler.update` read the
flag and the growth tracker on the host: two waits for the GPU per step besides the one ``step`` needs. As
PyTorch's ``_amp_foreach_non_finite_check_and_unscale_`` and ``_amp_update_scale_`` do:

* ``ember_unscale``: the gradients (float32 or float64, one device, C-contiguous) seen as one concatenation,
  through the by-value pointer table of :mod:`.multi_tensor`; each element is checked (a non-finite one
  writes 1 into the float32 flag) and multiplied in place by ``inv_scale`` cast to its dtype: the values of
  ``grad.mul_(inv_scale.to(grad.dtype))``, the flag that of the list ops (0 or 1);
* ``ember_update_scale``: one thread reads the flags of every optimizer and updates the float32 scale and
  the int32 growth tracker in place, as the host code did (``scale * backoff`` after a bad step; after
  ``growth_interval`` good steps ``scale * growth``, unless that overflows float32).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..._dtype import numpy_dtype_name
from .._runtime import cupy_module
from . import multi_tensor

__all__ = ["unscale_", "update_scale_", "supported"]

_THREADS = multi_tensor._THREADS
_CHUNK = multi_tensor._CHUNK

_UNSCALE_SOURCE = r"""
struct Table { long long w[2 * MAX_TENSORS + 1]; };

__device__ __forceinline__ int first_tensor(const Table& table, int n, long long start) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (table.w[n + mid] <= start) lo = mid; else hi = mid - 1;
    }
    return lo;
}

extern "C" __global__ void __launch_bounds__(THREADS)
ember_unscale(const Table table, int n, long long total, const float* __restrict__ inv_scale,
              float* __restrict__ found_inf) {
    const long long start = (long long)blockIdx.x * CHUNK;
    const long long end = start + CHUNK < total ? start + CHUNK : total;
    const T inv = (T)inv_scale[0];
    bool bad = false;
    int k = first_tensor(table, n, start);
    for (long long e = start + threadIdx.x; e < end; e += blockDim.x) {
        while (e >= table.w[n + k + 1]) k++;
        T* g = (T*)table.w[k] + (e - table.w[n + k]);
        const T v = *g;
        bad |= !isfinite(v);
        *g = v * inv;
    }
    if (bad) found_inf[0] = 1.0f;  // every writer stores the same value
}
"""

_UPDATE_SOURCE = r"""
extern "C" __global__ void ember_update_scale(float* scale, int* tracker, const float* found, int count,
                                              double growth, double backoff, int interval) {
    bool bad = false;
    for (int i = 0; i < count; ++i) bad |= found[i] != 0.0f;
    if (bad) {
        scale[0] = scale[0] * (float)backoff;  // a float32 tensor times a Python float: float32 arithmetic
        tracker[0] = 0;
        return;
    }
    int t = tracker[0] + 1;
    if (t == interval) {
        // the host code compared float64(scale) * growth with float32's largest value
        if ((double)scale[0] * growth <= 3.4028234663852886e38) scale[0] = scale[0] * (float)growth;
        t = 0;
    }
    tracker[0] = t;
}
"""

_CTYPES = multi_tensor._CTYPES  # (the dtypes multi_tensor.supported takes)
_unscale_kernels = {}  # (device, dtype name) -> kernel, or None when it did not compile
_update_kernels = {}  # device -> kernel, or None


def _compile(cache, key, code, name, what):
    entry = cache.get(key, False)
    if entry is False:
        cp = cupy_module()
        try:
            entry = cp.RawModule(code=code).get_function(name)
        except Exception as exc:  # a kernel that does not build leaves the scaler to the list ops
            warnings.warn(f"ember: the CUDA {what} kernel did not compile ({type(exc).__name__}: {exc}); "
                          "GradScaler takes the list ops", RuntimeWarning, stacklevel=4)
            entry = None
        cache[key] = entry
    return entry


def supported(arrays):
    """Whether :func:`unscale_` takes these CuPy arrays: one dtype (float32 or float64), one device,
    C-contiguous (an empty list too)."""
    return not arrays or multi_tensor.supported(arrays)


def unscale_(arrays, inv_scale, found_inf):
    """Multiply every array of ``arrays`` (see :func:`supported`) by ``inv_scale`` (a one-element float32 CuPy
    array) in place and store 1 in ``found_inf`` (a one-element float32 CuPy array, which the caller zeroed)
    when one of their elements was inf or NaN before. Returns False when the kernel is not available (then
    nothing was done)."""
    if not arrays:
        return True
    cp = cupy_module()
    dtype = numpy_dtype_name(arrays[0].dtype)
    with cp.cuda.Device(arrays[0].data.device_id):
        code = (f"#define T {_CTYPES[dtype]}\n#define CHUNK {_CHUNK}\n#define THREADS {_THREADS}\n"
                f"#define MAX_TENSORS {multi_tensor._MAX_TENSORS}\n{_UNSCALE_SOURCE}")
        kernel = _compile(_unscale_kernels, (cp.cuda.runtime.getDevice(), dtype), code, "ember_unscale",
                          "GradScaler unscale")
        if kernel is None:
            return False
        for table, n, total in multi_tensor._tables(arrays):
            if total:
                blocks = (total + _CHUNK - 1) // _CHUNK
                kernel((blocks,), (_THREADS,), (table, np.int32(n), np.int64(total), inv_scale, found_inf))
    return True


def update_scale_(scale, tracker, found, growth_factor, backoff_factor, growth_interval):
    """Update ``scale`` (one-element float32 CuPy array) and ``tracker`` (one-element int32) in place from the
    float32 flags ``found`` (a CuPy array, one per optimizer). Returns False when the kernel is not available."""
    cp = cupy_module()
    with cp.cuda.Device(scale.data.device_id):
        kernel = _compile(_update_kernels, cp.cuda.runtime.getDevice(), _UPDATE_SOURCE, "ember_update_scale",
                          "GradScaler update")
        if kernel is None:
            return False
        kernel((1,), (1,), (scale, tracker, found, np.int32(found.size), np.float64(growth_factor),
                            np.float64(backoff_factor), np.int32(growth_interval)))
    return True


# -- the GradScaler's entry points, on Tensors ----------------------------------------------------------------


def _plain_cuda(t, dtype_name, device):
    from ..._tensor import Tensor

    return (type(t) is Tensor and t._device == device and numpy_dtype_name(t._data.dtype) == dtype_name
            and t._data.size == 1)


def tensors_unscale_(grads, inv_scale, found_inf):
    """:func:`unscale_` on the Tensors of :meth:`ember.amp.GradScaler.unscale_` (``inv_scale`` and the zeroed
    ``found_inf``: one-element float32 cuda Tensors); True when done, False for calls it does not take
    (sparse or non-contiguous gradients, other dtypes or devices, tensor subclasses, dispatch modes), which
    take the list ops."""
    from ..._ops._dispatch import ops_intercepted
    from ..._tensor import Tensor

    device = found_inf._device
    if ops_intercepted() or not _plain_cuda(found_inf, "float32", device) or \
            not _plain_cuda(inv_scale, "float32", device):
        return False
    if any(type(g) is not Tensor or g._device != device for g in grads):
        return False
    arrays = [g._data for g in grads]
    if not supported(arrays) or not unscale_(arrays, inv_scale._data, found_inf._data):
        return False
    for g in grads:  # written in place, as the list ops' mul_ would record
        g._bump_version()
    found_inf._bump_version()
    return True


def tensors_update_scale_(scale, tracker, found, growth_factor, backoff_factor, growth_interval):
    """:func:`update_scale_` on :meth:`ember.amp.GradScaler.update`'s Tensors (``found``: the optimizers'
    one-element float32 flags); True when done, False for calls it does not take."""
    from ..._ops._dispatch import ops_intercepted

    device = scale._device
    if ops_intercepted() or not _plain_cuda(scale, "float32", device) or not _plain_cuda(tracker, "int32", device):
        return False
    if not found or not all(_plain_cuda(f, "float32", device) for f in found):
        return False
    cp = cupy_module()
    flags = found[0]._data.reshape(1) if len(found) == 1 else cp.stack([f._data.reshape(()) for f in found])
    flags = cp.ascontiguousarray(flags)
    if not update_scale_(scale._data, tracker._data, flags, growth_factor, backoff_factor, growth_interval):
        return False
    scale._bump_version()
    tracker._bump_version()
    return True
