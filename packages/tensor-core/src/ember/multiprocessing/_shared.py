"""Shared memory for CPU tensors: mappings other processes can attach, and the pickling reducer.

A shared tensor's data lives in a :class:`SharedMapping`, an ``mmap`` of a memory file that
other processes map too, so a tensor sent through a queue is the same memory on both sides.
Two sharing strategies, as in PyTorch:

* ``"file_descriptor"`` (the default): the memory file has no name (``memfd_create``); a
  receiving process gets a duplicate of its descriptor (``multiprocessing.reduction.DupFd``,
  served by the sender's resource sharer until received).
* ``"file_system"``: a named file in ``/dev/shm``; the receiver opens it by name. The sender
  removes the file when its tensor is freed (or at exit): keep the tensor alive until it has
  been received.

What goes through pickle is only the handle (descriptor or name), the mapping's size, the
numpy dtype, shape, strides and offset: never the tensor's data.
"""

from __future__ import annotations

import atexit
import itertools
import mmap
import os
import weakref
from multiprocessing import reduction

import numpy as np

from .._tensor import Tensor

__all__ = ["get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies", "SharedMapping",
           "share_memory_", "is_shared", "reduce_tensor", "init_reductions"]

_STRATEGIES = ("file_descriptor", "file_system")
_strategy = "file_descriptor" if hasattr(os, "memfd_create") else "file_system"
_counter = itertools.count()
_created_files = set()  # file_system files this process made and has not removed yet


def get_all_sharing_strategies():
    """The sharing strategies this platform supports."""
    return {s for s in _STRATEGIES if s != "file_descriptor" or hasattr(os, "memfd_create")}


def get_sharing_strategy():
    """The strategy new shared tensors use: ``"file_descriptor"`` or ``"file_system"``."""
    return _strategy


def set_sharing_strategy(new_strategy):
    """Choose how tensors are shared from now on.

    Raises:
        ValueError: for a strategy not in :func:`get_all_sharing_strategies`.
    """
    global _strategy
    if new_strategy not in get_all_sharing_strategies():
        raise ValueError(f"set_sharing_strategy: new_strategy must be one of "
                         f"{sorted(get_all_sharing_strategies())}, got {new_strategy!r}")
    _strategy = new_strategy


class SharedMapping(mmap.mmap):
    """A mapping of shared memory; ``handle`` says how another process attaches it."""

    def _setup(self, strategy, fd, path, owner):
        self.strategy = strategy
        self.fd = fd  # kept open for "file_descriptor": it is what a receiver gets a copy of
        self.path = path
        self.address = np.frombuffer(self, np.uint8, count=1).ctypes.data if len(self) else 0
        if fd is not None:
            weakref.finalize(self, os.close, fd)
        if owner and path is not None:
            weakref.finalize(self, _remove_file, path)
        return self


def _remove_file(path):
    if path in _created_files:
        _created_files.discard(path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


@atexit.register
def _remove_all_files():
    for path in list(_created_files):
        _remove_file(path)


def new_mapping(nbytes):
    """A new shared mapping of ``nbytes`` (at least 1) with the current strategy."""
    size = max(int(nbytes), 1)
    if _strategy == "file_descriptor":
        fd = os.memfd_create(f"ember_{os.getpid()}_{next(_counter)}", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        return SharedMapping(fd, size)._setup("file_descriptor", fd, None, owner=True)
    path = f"/dev/shm/ember_{os.getpid()}_{next(_counter)}_{os.urandom(4).hex()}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    _created_files.add(path)
    try:
        os.ftruncate(fd, size)
        mapping = SharedMapping(fd, size)
    finally:
        os.close(fd)
    return mapping._setup("file_system", None, path, owner=True)


def _mapping_of(array):
    """The :class:`SharedMapping` under a numpy array, or None."""
    root = array
    while root is not None and not isinstance(root, (memoryview, SharedMapping)):
        root = getattr(root, "base", None)  # ndarrays, and as_strided's wrapper of its input
    if isinstance(root, memoryview):
        root = root.obj
    return root if isinstance(root, SharedMapping) else None


def is_shared(tensor):
    """Whether ``tensor``'s data lives in shared memory (:meth:`ember.Tensor.is_shared`)."""
    if tensor._device.type != "cpu":
        return tensor._device.type == "cuda"  # as PyTorch: cuda memory is shareable through IPC
    return _mapping_of(tensor._data) is not None


def share_memory_(tensor):
    """Move ``tensor``'s data into shared memory, in place (:meth:`ember.Tensor.share_memory_`).

    The whole allocation is copied into a new shared mapping and the tensor rebased on it.
    Views of the tensor made before the call keep the old memory. A no-op for a shared tensor
    and on cuda.

    Returns:
        Tensor: ``tensor``.
    """
    if tensor._device.type != "cpu" or is_shared(tensor):
        return tensor
    from .._storage import array_data_ptr, storage_of

    data = tensor._data
    root = storage_of(tensor).base
    mapping = new_mapping(root.nbytes)
    flat = np.frombuffer(mapping, np.uint8, count=root.nbytes)
    flat[...] = root
    offset = array_data_ptr(data) - array_data_ptr(root) if data.size else 0
    tensor._data = _array_in(mapping, data.dtype, data.shape, data.strides, offset)
    tensor._storage = None
    return tensor


def empty_shared(shape, dtype):
    """A new CPU tensor of ``shape`` and numpy ``dtype`` in shared memory, its values uninitialised
    (the DataLoader's workers collate into it, so sending the batch copies nothing)."""
    shape = tuple(int(n) for n in shape)
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    strides = _contiguous_strides(shape, dtype.itemsize)
    return Tensor._make(_array_in(new_mapping(nbytes), dtype, shape, strides, 0))


def _contiguous_strides(shape, itemsize):
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _array_in(mapping, dtype, shape, strides, offset):
    """The numpy array ``(dtype, shape, strides)`` at byte ``offset`` of ``mapping`` (writable)."""
    flat = np.frombuffer(mapping, np.uint8)
    if not shape or all(n > 0 for n in shape):
        start = flat[offset:]
        first = np.frombuffer(start, dtype, count=1) if start.nbytes >= np.dtype(dtype).itemsize else None
        if first is not None:
            return np.lib.stride_tricks.as_strided(first, shape=shape, strides=strides)
    return np.empty(shape, dtype)  # no elements: nothing to share


def _handle(mapping):
    if mapping.strategy == "file_descriptor":
        return ("fd", reduction.DupFd(mapping.fd))
    return ("name", mapping.path)


def _attach(handle, nbytes):
    kind, value = handle
    if kind == "fd":
        fd = value.detach()
        return SharedMapping(fd, nbytes)._setup("file_descriptor", fd, None, owner=False)
    fd = os.open(value, os.O_RDWR)
    try:
        mapping = SharedMapping(fd, nbytes)
    finally:
        os.close(fd)
    return mapping._setup("file_system", None, value, owner=False)


def _rebuild_tensor(cls, handle, nbytes, dtype, shape, strides, offset, requires_grad):
    mapping = _attach(handle, nbytes)
    tensor = Tensor._make(_array_in(mapping, dtype, shape, strides, offset))
    if cls is not Tensor:
        tensor = cls(tensor) if requires_grad is None else cls(tensor, requires_grad)
        return tensor
    if requires_grad:
        tensor.requires_grad_(True)
    return tensor


def reduce_tensor(tensor):
    """The pickling reduction of a CPU tensor: it moves into shared memory, and only its handle,
    dtype, shape, strides and offset are pickled.

    Raises:
        RuntimeError: for a non-leaf tensor that requires grad, or a tensor not on the CPU.
    """
    if tensor._requires_grad and tensor._grad_fn is not None:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
                           "does not support crossing process boundaries. If you just want to transfer the data, "
                           "call detach() on the tensor before serializing (e.g., putting it on the queue).")
    if tensor._device.type != "cpu":
        raise RuntimeError(f"ember.multiprocessing shares CPU tensors only; got a tensor on {tensor._device} "
                           "(move it with .cpu() first)")
    share_memory_(tensor)
    data = tensor._data
    mapping = _mapping_of(data)
    offset = data.__array_interface__["data"][0] - mapping.address if data.size else 0
    cls = type(tensor)
    requires_grad = bool(tensor._requires_grad)
    return _rebuild_tensor, (cls, _handle(mapping), len(mapping), data.dtype, data.shape, data.strides, offset,
                             requires_grad)


_registered = set()


def init_reductions():
    """Register :func:`reduce_tensor` with multiprocessing's pickler for ember's tensor types
    (done on import of :mod:`ember.multiprocessing`)."""
    from .._ops._dispatch import PLAIN_TENSOR_TYPES

    for cls in (Tensor, *PLAIN_TENSOR_TYPES):
        if cls not in _registered:
            reduction.ForkingPickler.register(cls, reduce_tensor)
            _registered.add(cls)
