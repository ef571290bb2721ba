"""Grids and combinations of inputs: meshgrid, cartesian_prod and combinations."""

from __future__ import annotations

import functools
import itertools
import math
import warnings

import numpy as np

from .._meta import MetaArray
from ._registry import COMPOSITE, defop
from ._shape_helpers import _def_multi_view, _fresh, _require_tensor, _shape_str, _varargs_tensors
from .creation import clone, zeros
from .indexing import index as index_op
from .joining import stack
from .views import expand, reshape, view

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- meshgrid / cartesian_prod / combinations / block_diag / atleast ---------------------------------------


def _meshgrid_plan(tensors, indexing):
    """(tensors, indexing, swap): the checked arguments; ``swap`` for "xy" with two or more inputs."""
    tensors = _varargs_tensors("meshgrid", tensors)
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'ember.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in tensors:
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
        if t._data.ndim > 1:
            raise RuntimeError(f"ember.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t._data.ndim}D")
    return tensors, indexing == "xy" and len(tensors) >= 2


def _meshgrid(*tensors, indexing=None):
    """Coordinate grids: one view per 1-D (or 0-D) input, all of shape ``(len(t0), len(t1), ...)``.

    Output ``i`` holds ``tensors[i]``'s values varying along dim ``i``
    (``indexing="ij"``). With ``indexing="xy"`` (numpy's default) the first
    two dims are swapped, so for two inputs the shape is ``(len(t1), len(t0))``.

    Args:
        *tensors (Tensor): 0-D or 1-D tensors of one dtype (or one list of them).
        indexing (str, optional): ``"ij"`` or ``"xy"``; omitting it means
            ``"ij"`` and warns, as in PyTorch.

    Returns:
        tuple[Tensor]: broadcast views of the inputs.

    Raises:
        RuntimeError: for no tensors, mixed dtypes, inputs of more than 1 dim,
            or another ``indexing``.

    Example:
        >>> import ember
        >>> x, y = ember.meshgrid(ember.tensor([1, 2, 3]), ember.tensor([4, 5]), indexing="ij")
        >>> x
        tensor([[1, 1],
                [2, 2],
                [3, 3]])
    """
    tensors, swap = _meshgrid_plan(tensors, indexing)
    order = list(tensors)
    if swap:
        order[0], order[1] = order[1], order[0]
    sizes = tuple(math.prod(t._data.shape) for t in order)
    grids = []
    for i, t in enumerate(order):
        shape = [1] * len(order)
        shape[i] = -1
        grids.append(expand(view(t, tuple(shape)), sizes))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def _meshgrid_decomp(*tensors, indexing=None):
    if indexing is None:
        warnings.warn("ember.meshgrid: pass the indexing argument ('ij' or 'xy'); it defaults to 'ij'.",
                      UserWarning, stacklevel=5)
    return _meshgrid(*tensors, indexing=indexing)


meshgrid = _def_multi_view("meshgrid", _meshgrid, _meshgrid_decomp)


def _cartesian_prod_meta(*tensors):
    """The Cartesian product of 1-D tensors: every combination, one per row (like ``itertools.product``).

    Args:
        *tensors (Tensor): 1-D tensors of one dtype.

    Returns:
        Tensor: of shape ``(prod of lengths, len(tensors))``, or the single
        input's values when one tensor is given.

    Raises:
        RuntimeError: for inputs that are not 1-D, mixed dtypes, or none.

    Example:
        >>> import ember
        >>> ember.cartesian_prod(ember.tensor([1, 2]), ember.tensor([3, 4]))
        tensor([[1, 3],
                [1, 4],
                [2, 3],
                [2, 4]])
    """
    tensors = _varargs_tensors("cartesian_prod", tensors)
    for t in tensors:
        if t._data.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {_shape_str(t._data.shape)}")
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if len(tensors) == 1:
        return MetaArray(tensors[0]._data.shape, tensors[0]._data.dtype)
    if any(t.dtype is not tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    return MetaArray((math.prod(t._data.shape[0] for t in tensors), len(tensors)), tensors[0]._data.dtype)


def _cartesian_prod_cpu(*tensors):
    tensors = _varargs_tensors("cartesian_prod", tensors)
    if len(tensors) == 1:
        return _fresh(tensors[0]._data)
    grids = np.meshgrid(*(t._data for t in tensors), indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1)


def _cartesian_prod_decomp(*tensors):
    _cartesian_prod_meta(*tensors)
    tensors = _varargs_tensors("cartesian_prod", tensors)
    if len(tensors) == 1:
        return clone(tensors[0])
    return stack([reshape(g, -1) for g in meshgrid(*tensors, indexing="ij")], 1)


cartesian_prod = defop("cartesian_prod", _cartesian_prod_meta, cpu=_cartesian_prod_cpu, category=COMPOSITE,
                       decomposition=_cartesian_prod_decomp)


@functools.lru_cache(maxsize=64)
def _combination_indices(n, r, with_replacement):
    """(M, r) int64 positions of the r-combinations of range(n), in lexicographic order (cached, read-only)."""
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    flat = np.fromiter(itertools.chain.from_iterable(pick(range(n), r)), dtype=np.int64)
    result = flat.reshape(-1, r)
    result.setflags(write=False)
    return result


def _combinations_plan(input, r, with_replacement):
    _require_tensor("combinations", "input", input)
    if input._data.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {_shape_str(input._data.shape)}")
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
        raise TypeError(f"combinations(): argument 'r' must be int, not {type(r).__name__}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    n = input._data.shape[0]
    if r == 0:
        return None
    if with_replacement:
        count = math.comb(n + r - 1, r) if n else 0
    else:
        count = math.comb(n, r)
    return count


def _combinations_meta(input, r=2, with_replacement=False):
    """The length-``r`` combinations of the elements of a 1-D tensor, one per row (like ``itertools.combinations``).

    Args:
        input (Tensor): 1-D.
        r (int): elements per combination.
        with_replacement (bool): allow an element to repeat within a combination.

    Returns:
        Tensor: of shape ``(count, r)`` in lexicographic order of positions;
        ``r=0`` gives an empty 1-D tensor.

    Raises:
        RuntimeError: for an input that is not 1-D or a negative ``r``.

    Example:
        >>> import ember
        >>> ember.combinations(ember.tensor([1, 2, 3]))
        tensor([[1, 2],
                [1, 3],
                [2, 3]])
    """
    count = _combinations_plan(input, r, with_replacement)
    if count is None:
        return MetaArray((0,), input._data.dtype)
    return MetaArray((count, r), input._data.dtype)


def _combinations_cpu(input, r=2, with_replacement=False):
    if _combinations_plan(input, r, with_replacement) is None:
        return np.empty((0,), input._data.dtype)
    return input._data[_combination_indices(input._data.shape[0], int(r), bool(with_replacement))]


def _combinations_decomp(input, r=2, with_replacement=False):
    from .._creation import tensor

    if _combinations_plan(input, r, with_replacement) is None:
        return zeros((0,), dtype=input.dtype, device=input.device)
    positions = _combination_indices(input._data.shape[0], int(r), bool(with_replacement))
    return index_op(input, [tensor(positions, device=input.device)])


combinations = defop("combinations", _combinations_meta, cpu=_combinations_cpu, category=COMPOSITE,
                     decomposition=_combinations_decomp)
