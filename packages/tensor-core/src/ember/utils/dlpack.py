"""DLPack exchange (``torch.utils.dlpack`` counterpart): share a tensor's memory with another library.

:func:`to_dlpack` returns a DLPack capsule (a ``PyCapsule`` named ``"dltensor"``) that another
library consumes once; :func:`from_dlpack` takes such a capsule, or any object with
``__dlpack__``/``__dlpack_device__`` (numpy, CuPy, JAX, PyTorch tensors), and returns an ember tensor
viewing the same memory: writes through one are seen by the other, nothing is copied. An older
``"dltensor"`` capsule carries no read-only flag, and numpy imports its memory read-only: a tensor
made from one on cpu can be read but not written in place.

Reference: the DLPack specification, https://dmlc.github.io/dlpack/latest/ , and the Python array
API's ``from_dlpack`` protocol.
"""

from __future__ import annotations

import ctypes

from .._creation import from_dlpack

__all__ = ["to_dlpack", "from_dlpack", "capsule_device"]

_LEGACY_NAME = b"dltensor"
_VERSIONED_NAME = b"dltensor_versioned"
# DLManagedTensorVersioned = {DLPackVersion version (2 x uint32), void* manager_ctx, deleter, uint64
# flags, DLTensor dl_tensor}: its DLTensor starts 32 bytes in; a legacy DLManagedTensor starts with it.
_VERSIONED_TENSOR_OFFSET = 32
# DLTensor = {void* data, DLDevice device = {int32 device_type, int32 device_id}, ...}
_DEVICE_OFFSET = ctypes.sizeof(ctypes.c_void_p)


def to_dlpack(tensor):
    """A DLPack capsule viewing ``tensor``'s memory, for a consumer's ``from_dlpack``.

    Args:
        tensor (Tensor): any strided tensor on cpu or cuda that does not require grad.

    Returns:
        PyCapsule: named ``"dltensor_versioned"`` (DLPack 1.0, which carries a read-only flag:
        PyTorch, numpy and CuPy read it) where the backing library writes one, else the older
        ``"dltensor"``; it may be consumed once.

    Raises:
        BufferError: if ``tensor`` requires grad (``detach()`` it first) or its dtype has no
            DLPack code in the backing library (bfloat16/float8 on cpu).
    """
    try:
        return tensor.__dlpack__(max_version=(1, 0))
    except TypeError:  # a library without DLPack 1.0 export
        return tensor.__dlpack__()


def _pointer(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    name = get_name(capsule)
    if name not in (_LEGACY_NAME, _VERSIONED_NAME):
        raise ValueError(f"from_dlpack: expected an unconsumed DLPack capsule, got a capsule named {name!r}")
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, name)
    return address + (_VERSIONED_TENSOR_OFFSET if name == _VERSIONED_NAME else 0)


def capsule_device(capsule):
    """``(device_type, device_id)`` of the DLTensor in a DLPack capsule (1: cpu, 2: cuda, 3: pinned host).

    Raises:
        ValueError: if ``capsule`` is not an unconsumed DLPack capsule.
    """
    device = (ctypes.c_int32 * 2).from_address(_pointer(capsule) + _DEVICE_OFFSET)
    return int(device[0]), int(device[1])


class _Capsule:
    """Lets a bare capsule go through the ``__dlpack__`` protocol that numpy and CuPy consume."""

    def __init__(self, capsule):
        self._device = capsule_device(capsule)
        self._capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return self._device
