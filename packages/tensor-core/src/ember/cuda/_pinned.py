"""Pinned (page-locked) host memory: ``Tensor.pin_memory()``, ``Tensor.is_pinned()`` and fast uploads.

The GPU copies page-locked host memory directly (DMA), at full bus speed and
asynchronously; pageable memory is first staged through a pinned buffer by the
driver. As in PyTorch, :meth:`Tensor.pin_memory` copies a CPU tensor into pinned
memory (taken from CuPy's pinned memory pool, ``cupyx.empty_pinned``), and the
result is an ordinary CPU tensor whose numpy array lives in that memory:
``.to("cuda", non_blocking=True)`` of it can then return before the copy ends
(:func:`to_device`), and ``DataLoader(pin_memory=True)`` hands out such batches.

Pinning needs a GPU (its driver owns the pinning); without one
:meth:`Tensor.pin_memory` raises and :meth:`Tensor.is_pinned` is False.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .._tensor import Tensor
from ._runtime import cupy_module, is_available, unavailable_reason
from ._sync import host_sync

__all__ = ["pin_memory", "is_pinned", "is_pinned_array", "pinned_empty", "to_device", "install"]

_CUDA_MEMORY_TYPE_HOST = 1  # cudaMemoryTypeHost: page-locked host memory known to the driver


def pinned_empty(shape, dtype):
    """An uninitialised C-contiguous numpy array of ``shape``/``dtype`` in pinned host memory.

    Raises:
        RuntimeError: when CUDA is not available.
    """
    cupy_module()
    import cupyx

    return cupyx.empty_pinned(shape, np.dtype(dtype))


def is_pinned_array(array):
    """Whether numpy ``array`` lies in page-locked host memory that CUDA knows (False without CUDA)."""
    if type(array) is not np.ndarray or array.size == 0 or not is_available():
        return False
    cp = cupy_module()
    try:
        attributes = cp.cuda.runtime.pointerGetAttributes(array.ctypes.data)
    except cp.cuda.runtime.CUDARuntimeError:  # drivers that refuse ordinary host pointers
        return False
    kind = getattr(attributes, "type", getattr(attributes, "memoryType", None))
    return kind == _CUDA_MEMORY_TYPE_HOST


def is_pinned(self, device=None):
    """``Tensor.is_pinned()``: whether this CPU tensor's memory is pinned (page-locked).

    Always False for tensors on other devices, and on machines without CUDA.
    """
    return self._device.type == "cpu" and is_pinned_array(self._data)


def pin_memory(self, device=None):
    """``Tensor.pin_memory()``: this CPU tensor copied to pinned host memory (itself if already pinned).

    The copy is contiguous, keeps the dtype and, as in PyTorch, autograd history
    (gradients flow through it to ``self``).

    Raises:
        RuntimeError: for a tensor that is not on the CPU, or when CUDA is not
            available (pinning needs the GPU driver).
    """
    if self._device.type != "cpu":
        raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
    if not is_available():
        raise RuntimeError(f"Cannot pin memory: {unavailable_reason()}")
    if is_pinned_array(self._data):
        return self
    target = Tensor._make(pinned_empty(self._data.shape, self._data.dtype), self._device)
    return target.copy_(self)


def to_device(array, index, non_blocking=False):
    """A CuPy copy of numpy ``array`` on GPU ``index`` (the current GPU when None).

    A C-contiguous pinned ``array`` is copied by DMA straight from its memory, on
    the current stream. With ``non_blocking=True`` this returns as soon as the copy
    is queued, as a non-blocking ``.to("cuda")`` in PyTorch does: work queued later
    on that stream sees the data, and the host must not write into ``array`` before
    the stream reaches the copy (``ember.cuda.synchronize()``); without it, this
    waits for the copy. Pageable memory is copied synchronously (CuPy stages it
    through a pinned buffer).
    """
    from ._backend import from_numpy

    if not (array.flags.c_contiguous and array.size and is_pinned_array(array)):
        return from_numpy(array, index)
    cp = cupy_module()
    previous = cp.cuda.runtime.getDevice()
    if index is not None and index != previous:
        cp.cuda.runtime.setDevice(index)
    try:
        out = cp.empty(array.shape, array.dtype)
        stream = cp.cuda.get_current_stream()
        out.data.copy_from_host_async(ctypes.c_void_p(array.ctypes.data), array.nbytes, stream)
        if non_blocking:
            _keep_until_copied(array, stream)
        else:
            host_sync("a blocking copy from pinned memory", stream.synchronize)
    finally:
        if index is not None and index != previous:
            cp.cuda.runtime.setDevice(previous)
    return out


# (event, host array) of asynchronous uploads in flight: the host memory must outlive the copy, even when the
# caller drops its tensor at once (CuPy's pinned pool would hand the block out again)
_in_flight = []


def _keep_until_copied(array, stream):
    cp = cupy_module()
    _in_flight[:] = [(event, kept) for event, kept in _in_flight if not event.done]
    event = cp.cuda.Event(block=False, disable_timing=True)
    event.record(stream)
    _in_flight.append((event, array))


def install():
    """Give :class:`ember.Tensor` its ``pin_memory`` and ``is_pinned`` methods (unless it has them)."""
    if not hasattr(Tensor, "pin_memory"):
        Tensor.pin_memory = pin_memory
    if not hasattr(Tensor, "is_pinned"):
        Tensor.is_pinned = is_pinned
