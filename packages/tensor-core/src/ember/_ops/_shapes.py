"""Shape arithmetic shared by meta functions: broadcasting, dims, sizes."""

from __future__ import annotations

import math

__all__ = ["broadcast_shapes", "wrap_dim", "shape_of", "normalize_size", "infer_size"]

_INT64_MAX = 2**63 - 1


def shape_of(x):
    """The shape of a tensor, or ``()`` for a Python number."""
    data = getattr(x, "_data", None)
    return () if data is None else data.shape


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to (numpy/PyTorch rules).

    Raises:
        RuntimeError: naming the sizes that do not match and their dimension.

    Example:
        >>> import ember
        >>> ember.broadcast_shapes((2, 1), (3,))
        ember.Size([2, 3])
    """
    if len(shapes) == 2:  # the common case, without the general loop
        a, b = shapes
        if a == b:
            return tuple(a)
    ndim = max((len(s) for s in shapes), default=0)
    result = [1] * ndim
    for shape in shapes:
        offset = ndim - len(shape)
        for i, n in enumerate(shape):
            if n < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(shape)}")
            j = offset + i
            r = result[j]
            if r == 1:
                result[j] = n
            elif n != 1 and n != r:
                raise RuntimeError(
                    f"The size of tensor a ({r}) must match the size of tensor b ({n}) at non-singleton dimension {j}"
                )
    return tuple(result)


def wrap_dim(dim, ndim, *, scalar_ok=True):
    """Normalise a possibly negative dimension index against ``ndim`` dimensions.

    Zero-dim tensors accept dims -1 and 0, as in PyTorch.

    Raises:
        IndexError: naming the valid range.
        TypeError: if ``dim`` is not an int.
    """
    if not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    n = ndim if ndim > 0 or not scalar_ok else 1
    if n == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def normalize_size(size, name="size"):
    """Turn ``(2, 3)``, ``[2, 3]``, ``ember.Size`` or varargs ``((2, 3),)`` into a tuple of ints.

    Raises:
        TypeError: for non-integer entries and entries past 2**63 - 1.
        RuntimeError: for negative sizes.
    """
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    result = []
    for s in size:
        if hasattr(s, "__index__") and not isinstance(s, bool):
            s = s.__index__()
        else:
            raise TypeError(f"{name} must be a tuple of ints, but got an element of type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        if s > _INT64_MAX:  # PyTorch's argument parser refuses it the same way
            raise TypeError(f"{name} must be a tuple of ints that fit in int64, but got {s}")
        result.append(s)
    return tuple(result)


def infer_size(shape, numel):
    """Resolve one ``-1`` in ``shape`` so that it holds ``numel`` elements.

    Raises:
        RuntimeError: "shape '[...]' is invalid for input of size N" when impossible.
    """
    shape = list(shape)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    known = math.prod(s for s in shape if s != -1)
    if unknown:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{_fmt(shape)}' is invalid for input of size {numel}")
        shape[unknown[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{_fmt(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _fmt(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"
