"""Searching sorted sequences: searchsorted and bucketize."""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._array_module import as_array as _as_array
from ._pointwise_helpers import _torch_name
from ._reduction_helpers import _I64, _SORT, _check_tensor, _upcast
from ._registry import COMPOSITE, defop

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


_I32 = np.dtype(np.int32)


# -- searchsorted, bucketize ------------------------------------------------------------------------------


def _check_searchable(name, t):
    if t.dtype is D.bool or t.dtype.is_complex:
        raise RuntimeError(f"{name}(): not implemented for {_torch_name(t.dtype)} inputs")


def _searchsorted_meta(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value of ``input``, the index where it would be inserted into ``sorted_sequence``.

    ``left`` (the default) gives the first position whose value is ``>= x``, ``right`` the first whose value
    is ``> x``. A NaN value is inserted at the end.

    Args:
        sorted_sequence (Tensor): increasing along its last dim; 1-D, or with leading dims equal to
            ``input``'s (one sequence per row).
        input (Tensor or Number): the values to place.
        out_int32 (bool): int32 instead of int64 indices.
        right (bool): search from the right (same as ``side="right"``).
        side (str, optional): ``"left"`` or ``"right"``.
        sorter (Tensor, optional): int64 indices that sort ``sorted_sequence`` (its argsort) if it is not sorted.

    Returns:
        Tensor: ``input``'s shape (zero-dim for a number).

    Raises:
        RuntimeError: for mismatched shapes, conflicting ``side`` and ``right``, a bad ``sorter``, or bool or
            complex tensors.

    Example:
        >>> import ember
        >>> ember.searchsorted(ember.tensor([1, 3, 5, 7]), ember.tensor([3, 6, 9]))
        tensor([1, 3, 4])
        >>> ember.searchsorted(ember.tensor([1, 3, 5, 7]), ember.tensor([3, 6, 9]), right=True)
        tensor([2, 3, 4])
    """
    _check_tensor("searchsorted", sorted_sequence, "sorted_sequence")
    _check_searchable("searchsorted", sorted_sequence)
    if isinstance(input, Tensor):
        _check_searchable("searchsorted", input)
        shape = tuple(input.shape)
    elif isinstance(input, (int, float)) and not isinstance(input, bool):
        shape = ()
    else:
        raise TypeError(f"searchsorted(): argument 'input' must be Tensor or Number, not {type(input).__name__}")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"ember.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(
                "ember.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
            )
    seq_shape = tuple(sorted_sequence.shape)
    if not seq_shape:
        raise RuntimeError(
            "ember.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension"
        )
    if len(seq_shape) > 1 and (len(shape) != len(seq_shape) or seq_shape[:-1] != shape[:-1]):
        raise RuntimeError(
            "ember.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
            f"tensor and input value tensor must match, but we got boundaries tensor {list(seq_shape)} and input value "
            f"tensor {list(shape)}"
        )
    if sorter is not None:
        _check_tensor("searchsorted", sorter, "sorter")
        if sorter.dtype is not D.int64:
            raise RuntimeError(
                f"ember.searchsorted(): sorter must be a tensor of long dtype but got dtype {_torch_name(sorter.dtype)}"
            )
        if tuple(sorter.shape) != seq_shape:
            raise RuntimeError(
                f"ember.searchsorted(): boundary and sorter must have the same size, but got boundary tensor "
                f"{list(seq_shape)}and got sorter tensor {list(sorter.shape)}"
            )
        if sorter.device.type != "meta":
            order = sorter._host_array()
            if order.size and (order.min() < 0 or order.max() >= seq_shape[-1]):
                raise RuntimeError("ember.searchsorted(): sorter index out of range")
    return MetaArray(shape, _I32 if out_int32 else _I64)


def _searchsorted_cpu(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    seq = sorted_sequence._data
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter._data, axis=-1)
    compute = D.result_type_of((sorted_sequence, input) if isinstance(input, Tensor) else (sorted_sequence,))
    if not isinstance(input, Tensor):
        compute = D.promote_types(compute, D.scalar_dtype(input))
    np_dtype = _upcast(np.empty(0, compute.numpy_dtype)).dtype
    seq = seq.astype(np_dtype, copy=False)
    values = input._data if isinstance(input, Tensor) else _array_namespace(seq).asarray(input)
    values = values.astype(np_dtype, copy=False)
    side = "right" if right or side == "right" else "left"
    out = _I32 if out_int32 else _I64
    if seq.ndim == 1:
        result = np.searchsorted(seq, values, side=side)
    else:
        # one sequence per row: count the entries that come before each value
        before = np.less(seq[..., None, :], values[..., :, None]) if side == "left" else \
            np.less_equal(seq[..., None, :], values[..., :, None])
        result = before.sum(axis=-1)
    if values.dtype.kind == "f":
        result = np.where(np.isnan(values), seq.shape[-1], result)  # NaN goes last, as PyTorch
    return _as_array(result).astype(out)


searchsorted = defop("searchsorted", _searchsorted_meta, cpu=_searchsorted_cpu, has_out=True, tags=_SORT)


def _bucketize_meta(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value of ``input`` between increasing 1-D ``boundaries``.

    ``right=False`` gives ``i`` with ``boundaries[i-1] < x <= boundaries[i]``; ``right=True`` gives
    ``boundaries[i-1] <= x < boundaries[i]`` (as ``searchsorted(boundaries, input, right=right)``).

    Args:
        input (Tensor or Number): the values.
        boundaries (Tensor): 1-D, increasing.
        out_int32 (bool): int32 instead of int64 indices.
        right (bool): which side of a boundary belongs to a bucket.

    Raises:
        RuntimeError: if ``boundaries`` is not 1-D.

    Example:
        >>> import ember
        >>> ember.bucketize(ember.tensor([0.5, 2., 9.]), ember.tensor([1., 2., 3.]))
        tensor([0, 1, 3])
    """
    _check_tensor("bucketize", boundaries, "boundaries", 2)
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _searchsorted_meta(boundaries, input, out_int32=out_int32, right=right)


def _bucketize_cpu(input, boundaries, *, out_int32=False, right=False):
    return _searchsorted_cpu(boundaries, input, out_int32=out_int32, right=right)


def _bucketize_decomp(input, boundaries, *, out_int32=False, right=False):
    _bucketize_meta(input, boundaries, out_int32=out_int32, right=right)
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


bucketize = defop("bucketize", _bucketize_meta, cpu=_bucketize_cpu, category=COMPOSITE,
                  decomposition=_bucketize_decomp, has_out=True, tags=_SORT)
