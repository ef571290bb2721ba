"""Ops on flat or per-row positions: take, take_along_dim and put."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import as_array as _as_array
from ._array_module import cuda_runs_cpu_kernel as _cuda_runs_cpu_kernel
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._shape_helpers import (
    _check_index_bounds,
    _check_index_dtype,
    _def_inplace,
    _first_out_of_range,
    _fresh,
    _reduce_at,
    _require_tensor,
    _write_through,
)
from ._shapes import broadcast_shapes, wrap_dim
from .gather_scatter import gather
from .index_along_dim import index_add, index_copy, index_fill, index_reduce, index_select
from .indexing import index as index_op
from .indexing import index_put
from .views import expand, reshape, view

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["take", "take_along_dim", "put", "put_"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- take / take_along_dim / put ---------------------------------------------------------------------


def _take_meta(input, index):
    """The elements of ``input``, seen as 1-D, at ``index``; the result has ``index``'s shape.

    Args:
        input (Tensor): the tensor (read in row-major order).
        index (Tensor): int64 positions in ``[-input.numel(), input.numel())``.

    Raises:
        RuntimeError: for a non-int64 index.
        IndexError: for out-of-range positions.

    Example:
        >>> import ember
        >>> ember.take(ember.tensor([[1, 2], [3, 4]]), ember.tensor([0, -1]))
        tensor([1, 4])
    """
    _require_tensor("take", "input", input)
    _require_tensor("take", "index", index)
    _check_index_dtype(index, (D.int64,), "take(): Expected a long tensor for index, but got {name}")
    return MetaArray(index._data.shape, input._data.dtype)


def _flat_bounds(op, idx, numel):
    if numel == 0 and idx.size:
        raise IndexError(f"{op}(): tried to take from an empty tensor")
    bad = _first_out_of_range(idx, -numel, numel)
    if bad is not None:
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {numel} elements.")


def _take_cpu(input, index):
    data = input._data
    idx = index._data
    _flat_bounds("take", idx, data.size)
    return _as_array(data.reshape(-1)[idx])


def _take_decomp(input, index):
    _take_meta(input, index)
    return index_op(reshape(input, -1), [index])


take = defop("take", _take_meta, cpu=_take_cpu, category=COMPOSITE, decomposition=_take_decomp, has_out=True)


def _take_along_dim_plan(input, indices, dim):
    _require_tensor("take_along_dim", "input", input)
    _require_tensor("take_along_dim", "indices", indices)
    _check_index_dtype(indices, (D.int64,), "ember.take_along_dim(): dtype of indices should be Long but got {name}")
    if dim is None:
        return None, None, None
    ndim = input._data.ndim
    d = wrap_dim(dim, ndim)
    if indices._data.ndim != ndim:
        raise RuntimeError(
            "ember.take_along_dim(): input and indices should have the same number of dimensions, but got "
            f"{ndim} dimensions for input, and {indices._data.ndim} dimensions for indices"
        )
    ishape, jshape = list(input._data.shape), list(indices._data.shape)
    ishape[d] = jshape[d] = 1
    common = list(broadcast_shapes(tuple(ishape), tuple(jshape)))
    input_shape = common.copy()
    input_shape[d] = input._data.shape[d]
    index_shape = common.copy()
    index_shape[d] = indices._data.shape[d]
    return d, tuple(input_shape), tuple(index_shape)


def _take_along_dim_meta(input, indices, dim=None):
    """Values of ``input`` at ``indices`` along ``dim``, with ``input`` and ``indices`` broadcast in the other dims.

    Like numpy's ``take_along_axis``. With ``dim=None`` both are flattened.

    Args:
        input (Tensor): the tensor.
        indices (Tensor): int64, with ``input``'s number of dims (unless ``dim``
            is None); negative values count from the end of ``dim``.
        dim (int, optional): the dimension to select along.

    Returns:
        Tensor: the broadcast shape, with ``indices``' size in ``dim``.

    Raises:
        RuntimeError: for non-int64 indices, a different number of dims, shapes
            that don't broadcast, or out-of-range indices.

    Example:
        >>> import ember
        >>> x = ember.tensor([[10, 30, 20], [60, 40, 50]])
        >>> ember.take_along_dim(x, ember.tensor([[1], [0]]), dim=1)
        tensor([[30],
                [60]])
    """
    d, _, index_shape = _take_along_dim_plan(input, indices, dim)
    if d is None:
        return MetaArray((math.prod(indices._data.shape),), input._data.dtype)
    return MetaArray(index_shape, input._data.dtype)


def _take_along_dim_cpu(input, indices, dim=None):
    d, input_shape, index_shape = _take_along_dim_plan(input, indices, dim)
    if d is None:
        data, idx, d = input._data.reshape(-1), indices._data.reshape(-1), 0
        _check_index_bounds(idx, data.size, 0)
        return np.take(data, idx)
    data = np.broadcast_to(input._data, input_shape)
    idx = np.broadcast_to(indices._data, index_shape)
    size = input_shape[d]
    bad = _first_out_of_range(idx, -size, size)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    if idx.size and idx.min() < 0:
        idx = np.where(idx < 0, idx + size, idx)
    return _fresh(np.take_along_axis(data, idx, axis=d))


def _take_along_dim_decomp(input, indices, dim=None):
    d, input_shape, index_shape = _take_along_dim_plan(input, indices, dim)
    if d is None:
        return gather(reshape(input, -1), 0, reshape(indices, -1))
    from .comparison import lt
    from .pointwise import add, mul

    size = input_shape[d]
    wrapped = add(indices, mul(lt(indices, 0).to(D.int64), size))  # negative indices count from the end
    return gather(expand(input, input_shape), d, expand(wrapped, index_shape))


take_along_dim = defop("take_along_dim", _take_along_dim_meta, cpu=_take_along_dim_cpu, category=COMPOSITE,
                       decomposition=_take_along_dim_decomp, has_out=True)


def _put_meta(input, index, source, accumulate=False):
    """A copy of ``input`` with ``source``'s elements written at the flat positions ``index``.

    ``input`` is seen as 1-D (row-major). With ``accumulate=True``, values add
    up (repeated positions too); otherwise with repeated positions the last
    write wins.

    Args:
        input (Tensor): the destination.
        index (Tensor): int64 positions in ``[-input.numel(), input.numel())``.
        source (Tensor): of ``input``'s dtype, as many elements as ``index``.
        accumulate (bool): add instead of overwriting.

    Raises:
        RuntimeError: for a non-int64 index or another dtype of ``source``.
        IndexError: for counts that differ or out-of-range positions.

    Example:
        >>> import ember
        >>> ember.put(ember.zeros(2, 2), ember.tensor([0, 3, 0]), ember.tensor([1., 2., 3.]), accumulate=True)
        tensor([[4., 0.],
                [0., 2.]])
    """
    _require_tensor("put", "input", input)
    _require_tensor("put", "index", index)
    _require_tensor("put", "source", source)
    _check_index_dtype(index, (D.int64,), "put_(): Expected a long tensor for index, but got {name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(
            "put_(): self and source expected to have the same dtype, but got self.dtype = "
            f"{_torch_name(input.dtype)} and source.dtype = {_torch_name(source.dtype)}"
        )
    n_index, n_source = math.prod(index._data.shape), math.prod(source._data.shape)
    if n_index != n_source:
        raise IndexError(
            "put_(): Expected source and index to have the same number of elements, but got source.numel() = "
            f"{n_source}, index.numel() = {n_index}"
        )
    return MetaArray(input._data.shape, input._data.dtype)


def _put_into(out, index, source, accumulate):
    idx = index._data.reshape(-1)
    if idx.size == 0:
        return
    flat = out.reshape(-1)
    _flat_bounds("put", idx, flat.size)
    if idx.min() < 0:
        idx = np.where(idx < 0, idx + flat.size, idx)
    _reduce_at(flat, idx.astype(np.int64, copy=False), source._data.reshape(-1), "sum" if accumulate else None)


def _put_cpu(input, index, source, accumulate=False):
    out = _fresh(input._data)
    _put_into(out, index, source, accumulate)
    return out


def _put_decomp(input, index, source, accumulate=False):
    _put_meta(input, index, source, accumulate)
    from .comparison import lt
    from .pointwise import add, mul

    numel = math.prod(input._data.shape)
    flat_index = reshape(index, -1)
    flat_index = add(flat_index, mul(lt(flat_index, 0).to(D.int64), numel))
    flat = index_put(reshape(input, -1), [flat_index], reshape(source, -1), accumulate)
    return view(flat, tuple(input._data.shape))


put = defop("put", _put_meta, cpu=_put_cpu, category=COMPOSITE, decomposition=_put_decomp)
_def_inplace(put, lambda self, index, source, accumulate=False: _write_through(
    self, lambda out: _put_into(out, index, source, accumulate)))


for _op in (index_select, take, take_along_dim, put, index_add, index_copy, index_fill, index_reduce):
    _cuda_runs_cpu_kernel(_op)  # (their decompositions' index checks are index's, with other errors)
del _op
