"""The ``meta`` device: tensors with shape, dtype and strides but no data.

A :class:`MetaArray` stands where a numpy array would: it has ``shape``,
``strides`` (bytes, as numpy), ``dtype``, ``ndim``, ``size`` and an element
offset into its storage. Meta functions of the op registry return them; the
meta device's kernel of every op is its meta function, so shape and dtype
propagation costs no memory and no arithmetic.
"""

from __future__ import annotations

import math

from ._alloc import SURELY_FITS as _SURELY_FITS
from ._alloc import check_sizes
from ._device import Backend, register_backend_type

__all__ = ["MetaArray", "contiguous_strides", "dense_strides_like"]

_prod = math.prod


def contiguous_strides(shape):
    """Row-major strides, in elements, of a tensor of ``shape``."""
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _is_non_overlapping_and_dense(shape, strides):
    """Whether some permutation of the dims makes (shape, strides) row-major contiguous."""
    expected = 1
    for d in sorted(range(len(shape)), key=lambda d: (strides[d], shape[d])):
        if shape[d] == 1:
            continue
        if strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def dense_strides_like(shape, strides):
    """Strides (elements) of a dense copy that keeps the layout of (shape, strides).

    This is what ``clone`` (``preserve_format``) and ``empty_like`` give, as in
    PyTorch: a tensor whose elements are dense without overlap keeps its
    strides (a transposed matrix stays transposed); otherwise the dims are laid
    out densely in the order of their strides, innermost = smallest stride.
    Dims of stride 0 (expanded) keep their place relative to their neighbours.
    """
    shape, strides = tuple(shape), tuple(strides)
    if 0 in shape or _is_non_overlapping_and_dense(shape, strides):
        return strides
    ndim = len(shape)

    def order(a, b):
        """> 0 when dim ``a`` must sit inside dim ``b``, < 0 when outside, 0 when undecided."""
        if strides[a] == 0 or strides[b] == 0:
            return 0
        if strides[a] != strides[b]:
            return 1 if strides[a] > strides[b] else -1
        return 1 if shape[a] > shape[b] else 0

    # dims from innermost to outermost; an insertion sort that leaves undecided pairs alone
    perm = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        j = i
        for k in range(i - 1, -1, -1):
            c = order(perm[k], perm[j])
            if c > 0:
                perm[k], perm[j] = perm[j], perm[k]
                j = k
            elif c < 0:
                break
    result = [0] * ndim
    acc = 1
    for d in perm:
        result[d] = acc
        acc *= max(shape[d], 1)
    return tuple(result)


class MetaArray:
    """Metadata of an array without its data.

    Args:
        shape (tuple[int]): sizes.
        dtype (numpy.dtype): element type (a ``numpy.dtype`` instance).
        strides (tuple[int], optional): strides in *elements*; row-major if omitted.
        offset (int): element offset into the storage.

    Raises:
        RuntimeError: when the element count or the storage spanned does not fit in int64
            (:func:`ember._alloc.check_sizes`). Every op's outputs pass here before any kernel
            allocates, so this is the one place that refuses impossible sizes.
    """

    __slots__ = ("shape", "dtype", "_strides", "offset")

    def __init__(self, shape, dtype, strides=None, offset=0):
        # Kept cheap: meta functions build one per op call on every device.
        self.shape = shape if type(shape) is tuple else tuple(shape)
        n = _prod(self.shape)
        if type(n) is not int or n > _SURELY_FITS:  # check_sizes's first test, inlined: one product per op
            check_sizes(self.shape, dtype, strides, offset)
        self.dtype = dtype
        self._strides = strides
        self.offset = offset

    @property
    def _elem_strides(self):
        if self._strides is None:
            self._strides = contiguous_strides(self.shape)
        return self._strides

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def strides(self):
        itemsize = self.dtype.itemsize
        return tuple(s * itemsize for s in self._elem_strides)

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def data_ptr(self):
        return 0

    def _ember_storage_bytes(self):
        if self.size == 0:
            return None, 0
        extent = 1 + sum((n - 1) * abs(s) for n, s in zip(self.shape, self._elem_strides))
        return None, (self.offset + extent) * self.dtype.itemsize

    def __repr__(self):
        return f"MetaArray(shape={self.shape}, dtype={self.dtype}, strides={self._elem_strides}, offset={self.offset})"


class _MetaBackend(Backend):
    def from_numpy(self, array, index):
        return MetaArray(array.shape, array.dtype)

    def to_numpy(self, array):
        raise NotImplementedError(
            "Cannot copy out of meta tensor; no data! Meta tensors carry shape, dtype and strides only."
        )


register_backend_type("meta", _MetaBackend())
