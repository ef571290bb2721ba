"""Storage: the allocation that a tensor and all its views share.

A storage holds the base array of one allocation, as flat bytes, and the
version counter that every in-place operation on any view of it bumps. It is
created lazily: a freshly computed tensor gets its storage object the first
time something asks for it (a view, an in-place op, ``_version``), so the
common path of out-of-place arithmetic never pays for it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Storage", "storage_of", "array_data_ptr"]


class Storage:
    """One allocation shared by a tensor and its views.

    Attributes:
        base: the allocation as a flat ``uint8`` backend array (``None`` on meta).
        nbytes (int): size of the allocation in bytes.
        device (ember.device): where it lives.
        version (int): bumped by every in-place write through any view.
    """

    # ``_source``: for a storage made by :func:`storage_of`, the array it was asked for; ``base`` and
    # ``nbytes`` are found from it on first use. Autograd asks for the storage of most outputs it saves
    # (for the shared version counter only), so finding the allocation eagerly would cost every op.
    __slots__ = ("_base", "_nbytes", "_source", "device", "version", "__weakref__")

    def __init__(self, base, nbytes, device):
        self._base = base
        self._nbytes = nbytes
        self._source = None
        self.device = device
        self.version = 0

    @classmethod
    def _of_array(cls, array, device):
        """The storage of ``array``'s allocation, found when first needed."""
        storage = _new_object(cls)
        storage._source = array
        storage.device = device
        storage.version = 0
        return storage

    def _resolve(self):
        array, self._source = self._source, None
        self._base, self._nbytes = _allocation_of(array)

    @property
    def base(self):
        if self._source is not None:
            self._resolve()
        return self._base

    @property
    def nbytes(self):
        if self._source is not None:
            self._resolve()
        return self._nbytes

    def data_ptr(self):
        """Address of the first byte of the allocation (0 on meta)."""
        base = self.base
        if base is None:
            return 0
        return array_data_ptr(base)

    def __repr__(self):
        return f"Storage(nbytes={self.nbytes}, device={self.device})"


_new_object = object.__new__


def array_data_ptr(array):
    """The address of the first element of a numpy, CuPy or meta array."""
    if isinstance(array, np.ndarray):
        return array.__array_interface__["data"][0]
    data = getattr(array, "data", None)
    ptr = getattr(data, "ptr", None)  # cupy
    if ptr is not None:
        return ptr
    return array.data_ptr()


def _numpy_root_bytes(array):
    """The whole allocation that a numpy array views, as flat bytes."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.flags.c_contiguous or root.flags.f_contiguous:
        return root.reshape(-1, order="A").view(np.uint8)
    # A strided root over foreign memory (np.lib.stride_tricks.as_strided on
    # a buffer): its storage is the bytes from its first element to its last.
    extent = root.itemsize + sum((n - 1) * s for n, s in zip(root.shape, root.strides) if n > 0)
    if root.size == 0:
        return np.empty(0, np.uint8)
    first = np.lib.stride_tricks.as_strided(root, shape=(1,), strides=(root.itemsize,)).view(np.uint8)
    return np.lib.stride_tricks.as_strided(first, shape=(extent,), strides=(1,))


def storage_of(tensor):
    """The storage of ``tensor``, created on first use."""
    storage = tensor._storage
    if storage is None:
        storage = tensor._storage = Storage._of_array(tensor._data, tensor._device)
    return storage


def _allocation_of(array):
    """``(base, nbytes)``: the allocation a backend array views, as flat bytes, and its size."""
    if isinstance(array, np.ndarray):
        base = _numpy_root_bytes(array)
        return base, base.nbytes
    storage_hook = getattr(array, "_ember_storage_bytes", None)
    if storage_hook is not None:  # meta and out-of-tree arrays describe themselves
        return storage_hook()
    # CuPy: follow .base to the owning array, as for numpy.
    root = array
    while getattr(root, "base", None) is not None:
        root = root.base
    return root, root.nbytes
