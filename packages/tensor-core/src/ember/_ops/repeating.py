"""Repeating ops: repeat, tile and repeat_interleave."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._shape_helpers import _INT32_OR_64, _data_dependent, _dims_method, _fresh, _int_list, _require_tensor
from ._shapes import wrap_dim
from .creation import clone
from .index_along_dim import index_select
from .views import expand, reshape, unsqueeze

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["repeat", "repeat_interleave"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}
#: Methods whose argument parsing differs from the function's; filled in below, next to their ops.
OPERATORS: dict = {}


def _sizes(sizes):
    """Varargs sizes ``(2, 3)`` or one sequence ``((2, 3),)`` as a tuple of ints (negatives kept)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    result = []
    for s in sizes:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"sizes must be a tuple of ints, but got an element of type {type(s).__name__}")
        result.append(s.__index__())
    return tuple(result)


# -- repeat / tile / repeat_interleave ---------------------------------------------------------------


def _repeat_shape(input, repeats):
    shape = input._data.shape
    if len(repeats) < len(shape):
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    padded = (1,) * (len(repeats) - len(shape)) + tuple(shape)
    result = tuple(p * r for p, r in zip(padded, repeats))
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(result)}: {list(result)}")
    return padded, result


def _repeat_meta(input, *sizes):
    """``input`` repeated ``sizes[i]`` times along each dim (``Tensor.repeat``; numpy's ``tile``).

    When ``sizes`` has more entries than ``input`` has dims, ``input`` is
    treated as having leading size-1 dims.

    Args:
        input (Tensor): the tensor.
        *sizes (int or sequence of int): repetitions per dimension.

    Raises:
        RuntimeError: for fewer sizes than dims, or negative sizes.

    Example:
        >>> import ember
        >>> ember.tensor([1, 2]).repeat(2, 2)
        tensor([[1, 2, 1, 2],
                [1, 2, 1, 2]])
    """
    _require_tensor("repeat", "input", input)
    _, result = _repeat_shape(input, _sizes(sizes))
    return MetaArray(result, input._data.dtype)


def _repeat_cpu(input, *sizes):
    repeats = _sizes(sizes)
    padded, _ = _repeat_shape(input, repeats)
    return _fresh(np.tile(input._data.reshape(padded), repeats))


def _repeat_decomp(input, *sizes):
    repeats = _sizes(sizes)
    padded, result = _repeat_shape(input, repeats)
    # view as (1, s0, 1, s1, ...), broadcast to (r0, s0, r1, s1, ...), then merge the pairs (a copy)
    interleaved = tuple(x for s in padded for x in (1, s))
    expanded = tuple(x for r, s in zip(repeats, padded) for x in (r, s))
    # reshape keeps a stride-0 view where a repeated dim has size 1 (eye(3).repeat(4, 1, 1)): clone, since
    # repeat returns new memory (writing into one copy must not change the others)
    return clone(reshape(expand(reshape(input, interleaved), expanded), result))


repeat = defop("repeat", _repeat_meta, cpu=_repeat_cpu, category=COMPOSITE, decomposition=_repeat_decomp)


def _tile_repeats(input, dims):
    dims = _int_list("tile", "dims", dims)
    return (1,) * (input._data.ndim - len(dims)) + dims


def _tile_meta(input, dims):
    """``input`` repeated ``dims[i]`` times along each dimension (numpy's ``tile``).

    Fewer ``dims`` than dimensions are padded with leading 1s; more ``dims``
    add leading dimensions to ``input``.

    Args:
        input (Tensor): the tensor.
        dims (sequence of int): repetitions per dimension.

    Raises:
        RuntimeError: for negative repetitions.

    Example:
        >>> import ember
        >>> ember.tile(ember.tensor([1, 2]), (2,))
        tensor([1, 2, 1, 2])
    """
    _require_tensor("tile", "input", input)
    return _repeat_meta(input, _tile_repeats(input, dims))


def _tile_cpu(input, dims):
    return _repeat_cpu(input, _tile_repeats(input, dims))


def _tile_decomp(input, dims):
    _require_tensor("tile", "input", input)
    return repeat(input, _tile_repeats(input, dims))


tile = defop("tile", _tile_meta, cpu=_tile_cpu, category=COMPOSITE, decomposition=_tile_decomp)
OPERATORS["tile"] = _dims_method(tile, "dims")


def _repeats_values(repeats):
    """The host values of a repeats tensor (int32/int64, 0-D or 1-D)."""
    return repeats._host_array().astype(np.int64, copy=False)


def _repeat_interleave_plan(input, repeats, dim, output_size):
    """(axis of the flattened-or-not input, output length along it or None when data-dependent)."""
    if repeats is None:  # repeat_interleave(repeats): input holds the repeats
        if input._data.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if input.dtype not in _INT32_OR_64:
            raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for \'{_torch_name(input.dtype)}\'')
        return 0, _repeats_total(input, None, output_size)
    ndim = input._data.ndim
    if dim is None:
        d, size = 0, math.prod(input._data.shape)
    else:
        d = wrap_dim(dim, ndim)
        size = input._data.shape[d] if ndim else 1
    if isinstance(repeats, Tensor):
        if repeats._data.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.dtype not in _INT32_OR_64:
            raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for \'{_torch_name(repeats.dtype)}\'')
        count = math.prod(repeats._data.shape)
        if count == 1:
            if repeats.device.type == "meta":
                raise _data_dependent("repeat_interleave with a tensor of repeats")
            repeats = int(_repeats_values(repeats).reshape(-1)[0])
        else:
            if count != size:
                raise RuntimeError(
                    "repeats must have the same size as input along dim, but got repeats.size(0) = "
                    f"{count} and input.size({d}) = {size}"
                )
            return d, _repeats_total(repeats, size, output_size)
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)):
        raise TypeError(f"repeat_interleave(): argument 'repeats' must be int or Tensor, not {type(repeats).__name__}")
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    total = size * int(repeats)
    if output_size is not None and output_size != total:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {total} but got {output_size}")
    return d, total


def _repeats_total(repeats, size, output_size):
    if repeats.device.type == "meta":
        if output_size is None:
            raise _data_dependent("repeat_interleave with a tensor of repeats")
        return output_size
    values = _repeats_values(repeats)
    if values.size and values.min() < 0:
        raise RuntimeError("repeats can not be negative")
    total = int(values.sum())
    if output_size is not None and output_size != total:
        raise RuntimeError("allocated size does not match required size")
    return total


def _repeat_interleave_meta(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (or each slice along ``dim``) of ``input`` ``repeats`` times, keeping their order.

    With ``repeats`` omitted, ``input`` is a 1-D integer tensor of repeat
    counts and the result is ``arange(len(input))`` repeated by them.

    Args:
        input (Tensor): the tensor.
        repeats (int or Tensor, optional): one count for all, or one per slice
            along ``dim`` (an int32/int64 tensor; one element broadcasts).
        dim (int, optional): the dimension to repeat along; None flattens
            ``input`` first.
        output_size (int, optional): the total length along ``dim``, if known
            (saves reading ``repeats``; must be right).

    Returns:
        Tensor: a new tensor (1-D when ``dim`` is None).

    Raises:
        RuntimeError: for negative repeats, a repeats tensor whose length
            differs from the dimension, or a wrong ``output_size``.

    Example:
        >>> import ember
        >>> ember.repeat_interleave(ember.tensor([[1, 2], [3, 4]]), ember.tensor([1, 2]), dim=0)
        tensor([[1, 2],
                [3, 4],
                [3, 4]])
    """
    _require_tensor("repeat_interleave", "input", input)
    d, total = _repeat_interleave_plan(input, repeats, dim, output_size)
    if repeats is None or dim is None or input._data.ndim == 0:
        return MetaArray((total,), input._data.dtype)
    shape = list(input._data.shape)
    shape[d] = total
    return MetaArray(tuple(shape), input._data.dtype)


def _repeat_interleave_cpu(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:
        counts = _repeats_values(input)
        return np.repeat(np.arange(counts.size, dtype=input._data.dtype), counts)
    data = input._data
    if dim is None or data.ndim == 0:
        data, d = data.reshape(-1), 0
    else:
        d = wrap_dim(dim, data.ndim)
    if isinstance(repeats, Tensor):
        counts = _repeats_values(repeats).reshape(-1)
        counts = int(counts[0]) if counts.size == 1 else counts
    else:
        counts = int(repeats)
    return _fresh(np.repeat(data, counts, axis=d))


def _repeat_interleave_decomp(input, repeats=None, dim=None, *, output_size=None):
    from .._creation import tensor

    d, _ = _repeat_interleave_plan(input, repeats, dim, output_size)
    if repeats is None:
        counts = _repeats_values(input)
        return tensor(np.repeat(np.arange(counts.size), counts), dtype=input.dtype, device=input.device)
    source = reshape(input, -1) if dim is None or input._data.ndim == 0 else input
    if isinstance(repeats, Tensor) and math.prod(repeats._data.shape) != 1:
        positions = repeat_interleave(repeats, output_size=output_size)
        return index_select(source, d, positions.to(D.int64))
    count = int(_repeats_values(repeats).reshape(-1)[0]) if isinstance(repeats, Tensor) else int(repeats)
    shape = tuple(source._data.shape)
    # (.., n, ..) -> (.., n, 1, ..) -> (.., n, count, ..) -> (.., n * count, ..)
    expanded = expand(unsqueeze(source, d + 1), shape[: d + 1] + (count,) + shape[d + 1 :])
    return reshape(expanded, shape[:d] + (shape[d] * count,) + shape[d + 1 :])


repeat_interleave = defop("repeat_interleave", _repeat_interleave_meta, cpu=_repeat_interleave_cpu,
                          category=COMPOSITE, decomposition=_repeat_interleave_decomp)
