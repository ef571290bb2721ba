"""Joining ops: cat/concat/concatenate, stack, hstack/vstack/dstack, column_stack and block_diag."""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._registry import COMPOSITE, defop
from ._shape_helpers import _astype, _atleast_shape, _shape_str
from ._shapes import wrap_dim
from .creation import copy_, zeros
from .views import narrow, reshape, unsqueeze

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


def _tensor_sequence(op, tensors, arg="tensors"):
    """``tensors`` as a tuple of tensors (a list or tuple is required, as in PyTorch)."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument '{arg}' (position 1) must be tuple of Tensors, not {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument '{arg}', but got {type(t).__name__}")
    return tuple(tensors)


def _promote_all(tensors):
    """PyTorch's promotion over tensors that all count as dimensioned (cat, stack)."""
    first = tensors[0]._data.dtype
    for t in tensors:
        if t._data.dtype != first:
            return functools.reduce(D.promote_types, (t.dtype for t in tensors))
    return D.from_numpy_dtype(first)


# -- cat / stack -------------------------------------------------------------------------------


def _is_legacy_empty(shape):
    return len(shape) == 1 and shape[0] == 0


def _cat_shape(op, shapes, dim):
    """Output shape of concatenating ``shapes`` along ``dim``; 1-D empty shapes are skipped (PyTorch's legacy rule)."""
    kept = [(i, s) for i, s in enumerate(shapes) if not _is_legacy_empty(s)]
    if not kept:
        return (0,)
    first_i, first = kept[0]
    d = wrap_dim(dim, len(first))
    total = 0
    for i, s in kept:
        if len(s) != len(first):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(first)} and {len(s)}")
        for k, (a, b) in enumerate(zip(first, s)):
            if k != d and a != b:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {a} but got size {b} for "
                    f"tensor number {i} in the list."
                )
        total += s[d]
    return tuple(first[:d]) + (total,) + tuple(first[d + 1 :])


def _cat_meta(tensors, dim=0):
    """Concatenate ``tensors`` along ``dim``.

    All tensors must have the same shape except in ``dim``. The result has
    the promoted dtype of all inputs. 1-D tensors with no elements are
    skipped, as in PyTorch (so ``cat([empty(0), x])`` works for any ``x``).

    Args:
        tensors (sequence of Tensor): at least one tensor, none zero-dimensional.
        dim (int): the dimension to concatenate along.

    Returns:
        Tensor: a new tensor.

    Raises:
        ValueError: for an empty sequence.
        RuntimeError: for zero-dim tensors, different numbers of dimensions or
            sizes that differ outside ``dim``.
        IndexError: for an out-of-range ``dim``.

    Example:
        >>> import ember
        >>> ember.cat([ember.tensor([1, 2]), ember.tensor([3.])])
        tensor([1., 2., 3.])
    """
    tensors = _tensor_sequence("cat", tensors)
    if not tensors:
        raise ValueError("cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t._data.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    shape = _cat_shape("cat", [t._data.shape for t in tensors], dim)
    return MetaArray(shape, _promote_all(tensors).numpy_dtype)


def _cat_arrays(arrays, dim, np_dtype):
    kept = [a if a.dtype == np_dtype else a.astype(np_dtype) for a in arrays if a.shape != (0,)]
    if not kept:
        return np.empty((0,), np_dtype)
    d = dim + kept[0].ndim if dim < 0 else dim
    return np.concatenate(kept, axis=d)


def _cat_cpu(tensors, dim=0):
    return _cat_arrays([t._data for t in tensors], dim, _promote_all(tensors).numpy_dtype)


cat = defop("cat", _cat_meta, cpu=_cat_cpu, has_out=True)


def _concat_meta(tensors, dim=0):
    """Alias of :func:`ember.cat`."""
    return _cat_meta(tensors, dim)


def _concat_decomp(tensors, dim=0):
    return cat(tensors, dim)


concat = defop("concat", _concat_meta, category=COMPOSITE, decomposition=_concat_decomp, has_out=True)


def _concatenate_meta(tensors, axis=0):
    """Alias of :func:`ember.cat` (numpy's name, with ``axis`` for ``dim``)."""
    return _cat_meta(tensors, axis)


def _concatenate_decomp(tensors, axis=0):
    return cat(tensors, axis)


concatenate = defop("concatenate", _concatenate_meta, category=COMPOSITE, decomposition=_concatenate_decomp,
                    has_out=True)


def _stack_meta(tensors, dim=0):
    """Stack tensors of equal shape along a new dimension ``dim``.

    Args:
        tensors (sequence of Tensor): at least one tensor, all of the same shape.
        dim (int): where the new dimension goes, in ``[-ndim - 1, ndim]``.

    Returns:
        Tensor: a new tensor of the promoted dtype with one more dimension.

    Raises:
        RuntimeError: for an empty sequence or tensors of different shapes.
        IndexError: for an out-of-range ``dim``.

    Example:
        >>> import ember
        >>> ember.stack([ember.tensor([1, 2]), ember.tensor([3, 4])], dim=1)
        tensor([[1, 3],
                [2, 4]])
    """
    tensors = _tensor_sequence("stack", tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {_shape_str(shape)} at entry 0 and "
                f"{_shape_str(t._data.shape)} at entry {i}"
            )
    d = wrap_dim(dim, len(shape) + 1, scalar_ok=False)
    return MetaArray(tuple(shape[:d]) + (len(tensors),) + tuple(shape[d:]), _promote_all(tensors).numpy_dtype)


def _stack_cpu(tensors, dim=0):
    np_dtype = _promote_all(tensors).numpy_dtype
    d = wrap_dim(dim, tensors[0]._data.ndim + 1, scalar_ok=False)
    return np.stack([_astype(t._data, np_dtype) for t in tensors], axis=d)


def _stack_decomp(tensors, dim=0):
    _stack_meta(tensors, dim)
    d = wrap_dim(dim, tensors[0]._data.ndim + 1, scalar_ok=False)
    return cat([unsqueeze(t, d) for t in tensors], d)


stack = defop("stack", _stack_meta, cpu=_stack_cpu, category=COMPOSITE, decomposition=_stack_decomp, has_out=True)


def _stacker(name, ndim, cat_dim, summary, example):
    """hstack / vstack / dstack: ``atleast_{ndim}d`` of each tensor, then cat along ``cat_dim``."""

    def dim_for(shapes):
        if name == "hstack":
            return 0 if len(shapes[0]) == 1 else 1
        return cat_dim

    def meta(tensors):
        tensors = _tensor_sequence(name, tensors)
        if not tensors:
            raise RuntimeError(f"{name} expects a non-empty TensorList")
        shapes = [_atleast_shape(t._data.shape, ndim) for t in tensors]
        return MetaArray(_cat_shape(name, shapes, dim_for(shapes)), _promote_all(tensors).numpy_dtype)

    def cpu(tensors):
        arrays = [t._data.reshape(_atleast_shape(t._data.shape, ndim)) for t in tensors]
        return _cat_arrays(arrays, dim_for([a.shape for a in arrays]), _promote_all(tensors).numpy_dtype)

    def decomposition(tensors):
        meta(tensors)
        parts = [reshape(t, _atleast_shape(t._data.shape, ndim)) for t in tensors]
        return cat(parts, dim_for([p._data.shape for p in parts]))

    meta.__name__ = name
    meta.__doc__ = f"""{summary}

    Args:
        tensors (sequence of Tensor): at least one tensor.

    Returns:
        Tensor: a new tensor of the promoted dtype.

    Raises:
        RuntimeError: for an empty sequence or sizes that don't fit together.

    Example:
        >>> import ember
{example}
    """
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, has_out=True)


hstack = _stacker(
    "hstack", 1, 1,
    "Concatenate horizontally: along dim 0 for 1-D tensors, dim 1 otherwise (0-D tensors count as 1-D).",
    "        >>> ember.hstack([ember.tensor([1, 2]), ember.tensor([3])])\n        tensor([1, 2, 3])",
)
vstack = _stacker(
    "vstack", 2, 0, "Concatenate vertically (along dim 0) after making every tensor at least 2-D.",
    "        >>> ember.vstack([ember.tensor([1, 2]), ember.tensor([3, 4])])\n"
    "        tensor([[1, 2],\n                [3, 4]])",
)
dstack = _stacker(
    "dstack", 3, 2, "Concatenate depthwise (along dim 2) after making every tensor at least 3-D.",
    "        >>> ember.dstack([ember.tensor([1, 2]), ember.tensor([3, 4])]).shape\n        ember.Size([1, 2, 2])",
)


def _column_shape(shape):
    return (math.prod(shape), 1) if len(shape) <= 1 else tuple(shape)


def _column_stack_meta(tensors):
    """Stack tensors as columns: 0-D and 1-D tensors become columns, then everything is concatenated along dim 1.

    Args:
        tensors (sequence of Tensor): at least one tensor.

    Returns:
        Tensor: a new 2-D (or higher) tensor of the promoted dtype.

    Raises:
        RuntimeError: for an empty sequence or row counts that differ.

    Example:
        >>> import ember
        >>> ember.column_stack([ember.tensor([1, 2]), ember.tensor([3, 4])])
        tensor([[1, 3],
                [2, 4]])
    """
    tensors = _tensor_sequence("column_stack", tensors)
    if not tensors:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    shapes = [_column_shape(t._data.shape) for t in tensors]
    return MetaArray(_cat_shape("column_stack", shapes, 1), _promote_all(tensors).numpy_dtype)


def _column_stack_cpu(tensors):
    arrays = [t._data.reshape(_column_shape(t._data.shape)) for t in tensors]
    return _cat_arrays(arrays, 1, _promote_all(tensors).numpy_dtype)


def _column_stack_decomp(tensors):
    _column_stack_meta(tensors)
    return cat([reshape(t, _column_shape(t._data.shape)) for t in tensors], 1)


column_stack = defop("column_stack", _column_stack_meta, cpu=_column_stack_cpu, category=COMPOSITE,
                     decomposition=_column_stack_decomp, has_out=True)


def _block_shapes(tensors):
    shapes = []
    for i, t in enumerate(tensors):
        ndim = t._data.ndim
        if ndim > 2:
            raise RuntimeError(
                f"ember.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {ndim} dimensions"
            )
        shape = t._data.shape
        shapes.append((1, 1) if ndim == 0 else (1, shape[0]) if ndim == 1 else tuple(shape))
    return shapes


def _block_diag_meta(*tensors):
    """A block-diagonal matrix with the inputs as blocks (0-D -> 1x1, 1-D -> one row), zero elsewhere.

    Args:
        *tensors (Tensor): tensors of at most 2 dims.

    Returns:
        Tensor: 2-D, of the promoted dtype; ``(1, 0)`` for no inputs.

    Raises:
        RuntimeError: for an input of more than 2 dims.

    Example:
        >>> import ember
        >>> ember.block_diag(ember.tensor([[1, 2]]), ember.tensor(3))
        tensor([[1, 2, 0],
                [0, 0, 3]])
    """
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"block_diag(): expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    shapes = _block_shapes(tensors)
    dtype = D.result_type_of(tensors) if tensors else D.get_default_dtype()
    if not tensors:
        return MetaArray((1, 0), dtype.numpy_dtype)
    return MetaArray((sum(s[0] for s in shapes), sum(s[1] for s in shapes)), dtype.numpy_dtype)


def _block_diag_cpu(*tensors):
    meta = _block_diag_meta(*tensors)
    out = np.zeros(meta.shape, meta.dtype)
    row = col = 0
    for t, (h, w) in zip(tensors, _block_shapes(tensors)):
        out[row : row + h, col : col + w] = t._data.reshape(h, w)
        row += h
        col += w
    return out


def _block_diag_decomp(*tensors):
    meta = _block_diag_meta(*tensors)
    device = tensors[0].device if tensors else None
    out = zeros(meta.shape, dtype=D.from_numpy_dtype(meta.dtype), device=device)
    row = col = 0
    for t, (h, w) in zip(tensors, _block_shapes(tensors)):
        block = narrow(narrow(out, 0, row, h), 1, col, w)
        copy_(block, reshape(t, (h, w)))
        row += h
        col += w
    return out


block_diag = defop("block_diag", _block_diag_meta, cpu=_block_diag_cpu, category=COMPOSITE,
                   decomposition=_block_diag_decomp)
