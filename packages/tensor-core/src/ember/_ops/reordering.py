"""Reordering ops: flip, fliplr, flipud, roll and rot90."""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray, contiguous_strides
from ._registry import COMPOSITE, defop
from ._shape_helpers import _dims_method, _fresh, _int_list, _int_or_list, _require_tensor
from ._shapes import wrap_dim
from .creation import clone
from .joining import cat
from .views import narrow, reshape, transpose, view

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["fliplr", "flipud", "roll", "rot90"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}
#: Methods whose argument parsing differs from the function's; filled in below, next to their ops.
OPERATORS: dict = {}


# -- flip / roll / rot90 -----------------------------------------------------------------------------


def _flip_dims(name, input, dims):
    ndim = input._data.ndim
    wrapped = [wrap_dim(d, ndim) for d in _int_list(name, "dims", dims)]
    seen = set()
    for d in wrapped:
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return tuple(wrapped) if ndim else ()


def _flip_meta(input, dims):
    """``input`` with the order of elements reversed along each dim in ``dims`` (a copy).

    Args:
        input (Tensor): the tensor.
        dims (sequence of int): dims to reverse.

    Raises:
        RuntimeError: if a dim appears twice.
        IndexError: for out-of-range dims.

    Example:
        >>> import ember
        >>> ember.flip(ember.tensor([[1, 2], [3, 4]]), (1,))
        tensor([[2, 1],
                [4, 3]])
    """
    _require_tensor("flip", "input", input)
    _flip_dims("flip", input, dims)
    return MetaArray(input._data.shape, input._data.dtype)


def _flip_cpu(input, dims):
    return _fresh(np.flip(input._data, axis=_flip_dims("flip", input, dims)))


flip = defop("flip", _flip_meta, cpu=_flip_cpu)


OPERATORS["flip"] = _dims_method(flip, "dims")


def _flip_one_dim(name, dim, doc, cpu):
    """fliplr (``dim`` 1) or flipud (``dim`` 0): ``input`` reversed along ``dim``, for inputs of more than
    ``dim`` dims; ``cpu`` is the kernel (a reversed slice, copied)."""
    min_ndim = dim + 1
    message = f"Input must be >= {min_ndim}-d."

    def meta(input):
        _require_tensor(name, "input", input)
        if input._data.ndim < min_ndim:
            raise RuntimeError(message)
        return MetaArray(input._data.shape, input._data.dtype)

    def decomposition(input):
        meta(input)
        return flip(input, (dim,))

    meta.__name__, meta.__doc__ = f"_{name}_meta", doc
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition)


fliplr = _flip_one_dim("fliplr", 1, """``input`` reversed along dim 1 (left/right); needs at least 2 dims.

    Raises:
        RuntimeError: for tensors of fewer than 2 dims.
    """, lambda input: _fresh(input._data[:, ::-1]))
flipud = _flip_one_dim("flipud", 0, """``input`` reversed along dim 0 (up/down); needs at least 1 dim.

    Raises:
        RuntimeError: for zero-dim tensors.
    """, lambda input: _fresh(input._data[::-1]))


def _roll_plan(input, shifts, dims):
    shifts = _int_or_list(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return shifts, None
    dims = _int_or_list(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    return shifts, tuple(wrap_dim(d, input._data.ndim, scalar_ok=False) for d in dims)


def _roll_meta(input, shifts, dims=None):
    """``input`` rolled: elements shifted by ``shifts`` along ``dims``, wrapping around (a copy).

    Args:
        input (Tensor): the tensor.
        shifts (int or sequence of int): shift per dim (negative rolls backwards).
        dims (int or sequence of int, optional): the dims; None rolls the
            flattened tensor and restores its shape.

    Raises:
        RuntimeError: if ``shifts`` and ``dims`` differ in length.
        IndexError: for out-of-range dims.

    Example:
        >>> import ember
        >>> ember.roll(ember.tensor([1, 2, 3, 4]), 1)
        tensor([4, 1, 2, 3])
    """
    _require_tensor("roll", "input", input)
    _roll_plan(input, shifts, dims)
    return MetaArray(input._data.shape, input._data.dtype)


def _roll_cpu(input, shifts, dims=None):
    shifts, dims = _roll_plan(input, shifts, dims)
    if dims is None:
        return _fresh(np.roll(input._data.reshape(-1), shifts[0]).reshape(input._data.shape))
    return _fresh(np.roll(input._data, shifts, axis=dims))


def _roll_decomp(input, shifts, dims=None):
    shifts, dims = _roll_plan(input, shifts, dims)
    if dims is None:
        return view(_roll_decomp(reshape(input, -1), shifts, 0), tuple(input._data.shape))
    result = input
    for shift, d in zip(shifts, dims):
        size = result._data.shape[d]
        if size == 0 or shift % size == 0:
            continue
        s = shift % size
        result = cat([narrow(result, d, size - s, s), narrow(result, d, 0, size - s)], d)
    return result if result is not input else clone(input)


roll = defop("roll", _roll_meta, cpu=_roll_cpu, category=COMPOSITE, decomposition=_roll_decomp)


def _rot90_plan(input, k, dims):
    dims = _int_list("rot90", "dims", dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    ndim = input._data.ndim
    if ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {ndim}")
    d0, d1 = wrap_dim(dims[0], ndim), wrap_dim(dims[1], ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    return int(k) % 4, d0, d1


def _rot90_meta(input, k=1, dims=(0, 1)):
    """``input`` rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first dim toward the second.

    Args:
        input (Tensor): at least 2-D.
        k (int): number of quarter turns (negative turns the other way).
        dims (sequence of two int): the plane.

    Raises:
        RuntimeError: for fewer than 2 dims, ``dims`` not of length 2, or equal dims.

    Example:
        >>> import ember
        >>> ember.rot90(ember.tensor([[1, 2], [3, 4]]))
        tensor([[2, 4],
                [1, 3]])
    """
    _require_tensor("rot90", "input", input)
    k, d0, d1 = _rot90_plan(input, k, dims)
    shape = list(input._data.shape)
    if k % 2 == 0:
        return MetaArray(tuple(shape), input._data.dtype)
    # an odd turn is a transposed view of a flipped copy (PyTorch's layout too)
    strides = list(contiguous_strides(shape))
    shape[d0], shape[d1] = shape[d1], shape[d0]
    strides[d0], strides[d1] = strides[d1], strides[d0]
    return MetaArray(tuple(shape), input._data.dtype, tuple(strides))


def _rot90_cpu(input, k=1, dims=(0, 1)):
    k, d0, d1 = _rot90_plan(input, k, dims)
    data = input._data
    if k == 0:
        return _fresh(data)
    if k == 2:
        return _fresh(np.flip(data, (d0, d1)))
    return np.swapaxes(_fresh(np.flip(data, d1 if k == 1 else d0)), d0, d1)


def _rot90_decomp(input, k=1, dims=(0, 1)):
    k, d0, d1 = _rot90_plan(input, k, dims)
    if k == 1:
        return clone(transpose(flip(input, (d1,)), d0, d1))
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return clone(transpose(flip(input, (d0,)), d0, d1))
    return clone(input)


rot90 = defop("rot90", _rot90_meta, cpu=_rot90_cpu, category=COMPOSITE, decomposition=_rot90_decomp)
