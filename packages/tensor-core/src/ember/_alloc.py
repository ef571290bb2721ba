"""Sizes that can exist, and allocations that failed.

Every op's meta function describes its outputs with :class:`ember._meta.MetaArray`, and the
dispatcher runs it before any kernel allocates; :func:`check_sizes`, called there, refuses a
shape whose element count or storage in bytes does not fit in int64, as PyTorch does. So a
call such as ``F.pad(x, (2**62, 0))`` fails at once on every device, meta included, instead of
reaching an allocator.

A size that fits int64 may still not fit in memory: the backend's allocator then fails
(numpy raises ``MemoryError``), and :func:`allocation_error` turns that into the
``RuntimeError`` PyTorch raises, naming the bytes asked for.
"""

from __future__ import annotations

import math
import operator

__all__ = ["INT64_MAX", "SURELY_FITS", "check_sizes", "AllocationError", "OutOfMemoryError", "allocation_error"]

#: The largest element count and storage size (in bytes) a tensor may have.
INT64_MAX = 2**63 - 1

#: Element counts up to this need no closer look: even at 16 bytes an element they fit int64.
SURELY_FITS = INT64_MAX // 16


def check_sizes(shape, dtype, strides=None, offset=0):
    """Refuse ``shape`` when its element count or its storage does not fit in int64.

    Cheap for ordinary shapes (one product); the exact checks run only past 2**59 elements.

    Args:
        shape (tuple[int]): the sizes.
        dtype (numpy.dtype): the element type (its ``itemsize`` gives the bytes).
        strides (tuple[int] or None): strides in elements; None for a new contiguous tensor.
        offset (int): element offset into the storage.

    Raises:
        RuntimeError: "numel: integer multiplication overflow" when the element count passes
            2**63 - 1, or "Storage size calculation overflowed" when the bytes of the storage
            the tensor spans do (an expanded view spans little storage and may be larger).
    """
    n = math.prod(shape)
    if type(n) is int and n <= SURELY_FITS:  # a product of numpy ints may have wrapped around: look closer
        return
    try:
        shape = [operator.index(s) for s in shape]
    except TypeError:
        return  # symbolic sizes (a compiler's SymPy symbols) are checked once they are numbers
    _check_exactly(shape, dtype, strides, offset)


def _check_exactly(shape, dtype, strides, offset):
    n = math.prod(shape)
    if n > INT64_MAX:
        raise RuntimeError(
            f"numel: integer multiplication overflow: sizes={shape} hold {n} elements, more than 2**63 - 1"
        )
    if n == 0:
        return
    if strides is None:
        extent = n
    else:
        extent = offset + 1 + sum((size - 1) * abs(int(stride)) for size, stride in zip(shape, strides))
    itemsize = getattr(dtype, "itemsize", 1)
    if extent * itemsize > INT64_MAX:
        raise RuntimeError(
            f"Storage size calculation overflowed with sizes={shape}: {extent} elements of {itemsize} bytes "
            f"need more than 2**63 - 1 bytes"
        )


class AllocationError(RuntimeError, MemoryError):
    """An allocation the device's allocator refused.

    A ``RuntimeError``, as PyTorch raises; also a ``MemoryError``, so code written against
    numpy's ``MemoryError`` still catches it.
    """


#: PyTorch's name (``torch.OutOfMemoryError``, ``torch.cuda.OutOfMemoryError``), which programs
#: catch to retry with a smaller batch; ember raises the one class on every device.
OutOfMemoryError = AllocationError


def allocation_error(exc, device):
    """The :class:`AllocationError` to raise for backend error ``exc`` (a ``MemoryError``) on ``device``."""
    nbytes = getattr(exc, "_total_size", None)  # numpy's _ArrayMemoryError knows what was asked for
    if nbytes is None:
        what = str(exc) or type(exc).__name__
        return AllocationError(f"can't allocate memory on device '{device}': {what}")
    shape = list(getattr(exc, "shape", ()))
    return AllocationError(
        f"can't allocate memory on device '{device}': you tried to allocate {nbytes} bytes "
        f"(an array of shape {shape} and dtype {getattr(exc, 'dtype', '?')})"
    )
