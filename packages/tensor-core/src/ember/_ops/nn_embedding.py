"""ember.nn.functional: embeddings (``embedding``, ``embedding_bag``) and ``one_hot``.

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _C
from .. import _dtype as D
from .._grad_mode import no_grad
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._array_module import cuda_runs_cpu_kernel as _cuda_runs_cpu_kernel
from ._array_module import ufunc_at as _ufunc_at
from ._array_module import values_for_checks as _values_for_checks
from ._nn_common import (
    _E,
    _NN,
    _NN_ONLY,
    _check_optional_tensor,
    _check_tensor,
    _composite,
    _compute,
    _int_arg,
    _size,
    _vector_norm,
    _vector_norm_np,
)

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# =====================================================================================================
# Embeddings and one-hot
# =====================================================================================================

_INDEX_TYPES = (D.int32, D.int64)
_TORCH_TENSOR_TYPES = {
    "bool": "BoolTensor", "uint8": "ByteTensor", "int8": "CharTensor", "int16": "ShortTensor", "int32": "IntTensor",
    "int64": "LongTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor", "float32": "FloatTensor",
    "float64": "DoubleTensor", "complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor",
}


def _check_indices(op, name, t, position=1):
    if t.dtype not in _INDEX_TYPES:
        raise RuntimeError(
            f"Expected tensor for argument #{position} '{name}' to have one of the following scalar types: Long, Int; "
            f"but got ember.{_TORCH_TENSOR_TYPES[t.dtype.name]} instead (while checking arguments for {op})"
        )


def _padding_index(padding_idx, num_embeddings):
    """``padding_idx`` made non-negative, or None.

    Raises:
        AssertionError: as PyTorch, if it is out of range (raised explicitly, so ``python -O`` keeps it).
    """
    if padding_idx is None:
        return None
    if padding_idx >= 0:
        if padding_idx >= num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
        return padding_idx
    if padding_idx < -num_embeddings:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx + num_embeddings


def _renorm_rows_np(weight, indices, max_norm, norm_type):
    """Rescale (in place) the rows of ``weight`` used by ``indices`` whose ``norm_type``-norm exceeds ``max_norm``."""
    rows = np.unique(indices.reshape(-1))
    if rows.size == 0:
        return
    data = weight._data
    values = _compute(data[rows])
    norms = _vector_norm_np(values, float(norm_type), 1)
    with np.errstate(all="ignore"):
        scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    data[rows] = (values * scale).astype(data.dtype)
    weight._bump_version()


def _check_index_range(indices, num_embeddings):
    if indices.size and (indices.min() < 0 or indices.max() >= num_embeddings):
        raise IndexError("index out of range in self")


def _embedding_meta(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                    sparse=False):
    """Look up rows of ``weight``: ``weight[input]``.

    With ``max_norm``, the rows that ``input`` uses and whose ``norm_type``-norm
    exceeds ``max_norm`` are first rescaled **in place** in ``weight`` to norm
    ``max_norm`` (as PyTorch does). ``padding_idx`` only matters to gradients
    (that row gets none); ``scale_grad_by_freq`` and ``sparse`` too.

    Args:
        input (Tensor): int64 or int32 indices, any shape.
        weight (Tensor): ``(num_embeddings, embedding_dim)``.
        padding_idx (int, optional): a row index, may be negative.
        max_norm (float, optional): renormalize the used rows to at most this norm.
        norm_type (float): the ``p`` of the norm for ``max_norm``.
        scale_grad_by_freq (bool): gradient option (no effect on values).
        sparse (bool): gradient option (no effect on values).

    Returns:
        Tensor: ``(*input.shape, embedding_dim)`` of ``weight``'s dtype.

    Raises:
        RuntimeError: for non-integer indices or a weight that is not 2-D.
        IndexError: for an index outside ``[0, num_embeddings)``.
        AssertionError: for a ``padding_idx`` out of range (as PyTorch).

    Example:
        >>> import ember
        >>> w = ember.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
        >>> ember.embedding(ember.tensor([2, 1]), w)
        tensor([[3., 4.],
                [1., 2.]])
    """
    _check_tensor("embedding", "input", input)
    _check_tensor("embedding", "weight", weight, 2)
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    _padding_index(padding_idx, weight.shape[0])
    _check_indices("embedding", "indices", input)
    return MetaArray(tuple(input.shape) + (weight.shape[1],), weight._data.dtype)


def _embedding_cpu(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                   sparse=False):
    indices = input._data
    if max_norm is not None:
        _check_index_range(indices, weight.shape[0])
        _renorm_rows_np(weight, indices, max_norm, norm_type)
    data = weight._data
    if data.shape[1] > 1 and data.strides[1] != data.itemsize:  # rows not contiguous: numpy gathers them
        _check_index_range(indices, data.shape[0])
        return np.take(data, indices, axis=0)
    # ember._C.embedding copies whole rows (memcpy, OpenMP over indices) and raises the IndexError of an index
    # out of range itself (np.ascontiguousarray would make a 0-dim index 1-dim)
    return _C.embedding(data, indices if indices.flags.c_contiguous else np.ascontiguousarray(indices))


def _renorm_rows(weight, input, max_norm, norm_type):
    """Decomposition of the ``max_norm`` renormalization, in ember ops (not recorded by autograd)."""
    with no_grad():
        rows = _E.unique(input.reshape(-1))
        values = _E.index_select(weight, 0, rows)
        norms = _vector_norm(values, norm_type, 1, keepdim=True)
        scale = _E.where(norms > max_norm, max_norm / (norms + 1e-7), _E.ones_like(norms))
        _E.index_copy_(weight, 0, rows, (values * scale).to(weight.dtype))


def _embedding_decomp(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                      sparse=False):
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    rows = _E.index_select(weight, 0, input.reshape(-1))
    return rows.reshape(tuple(input.shape) + (weight.shape[1],))


embedding = _composite("embedding", _embedding_meta, cpu=_embedding_cpu, decomposition=_embedding_decomp, tags=_NN)


def _embedding_bag_meta(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                        mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                        padding_idx=None):
    """Sums, means or maxima of bags of embedding rows, without materializing the rows.

    A 2-D ``input`` ``(B, L)`` holds ``B`` bags of ``L`` indices. A 1-D
    ``input`` is the concatenation of the bags, which start at ``offsets``
    (the last bag runs to the end, or, with ``include_last_offset``, the last
    offset marks the end). Indices equal to ``padding_idx`` are left out of
    their bag (and of its count for ``'mean'``); an empty bag gives zeros.

    Args:
        input (Tensor): int64 or int32 indices, 1-D or 2-D.
        weight (Tensor): ``(num_embeddings, embedding_dim)``, floating point.
        offsets (Tensor, optional): start of each bag for a 1-D ``input``; increasing, ``offsets[0] == 0``.
        max_norm (float, optional): renormalize the used rows of ``weight`` in place (see :func:`ember.embedding`).
        norm_type (float): the ``p`` of the norm for ``max_norm``.
        scale_grad_by_freq (bool): gradient option (no effect on values).
        mode (str): ``'sum'``, ``'mean'`` or ``'max'``.
        sparse (bool): gradient option (no effect on values).
        per_sample_weights (Tensor, optional): weights of the indices, shaped like ``input`` (``'sum'`` only).
        include_last_offset (bool): ``offsets`` has one more entry, the end of the last bag.
        padding_idx (int, optional): an index to leave out of the bags.

    Returns:
        Tensor: ``(num_bags, embedding_dim)`` of ``weight``'s dtype.

    Raises:
        ValueError: for inconsistent ``input``/``offsets``/``per_sample_weights`` shapes or an unknown mode.
        NotImplementedError: for ``per_sample_weights`` with a mode other than ``'sum'``.
        RuntimeError: for bad offsets, non-integer indices or a non-floating weight.

    Example:
        >>> import ember
        >>> w = ember.tensor([[1.0, 1.0], [2.0, 4.0], [3.0, 0.0]])
        >>> ember.embedding_bag(ember.tensor([0, 1, 2]), w, ember.tensor([0, 2]), mode="sum")
        tensor([[3., 5.],
                [3., 0.]])
    """
    _check_tensor("embedding_bag", "input", input)
    _check_tensor("embedding_bag", "weight", weight, 2)
    _check_optional_tensor("embedding_bag", "offsets", offsets, 3)
    _check_optional_tensor("embedding_bag", "per_sample_weights", per_sample_weights, 9)
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({_size(per_sample_weights.shape)}) is not None, then it must "
            f"have the same shape as the input ({_size(input.shape)})"
        )
    _padding_index(padding_idx, weight.shape[0])
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length "
                f"sequences. However, found offsets of type {type(offsets)}"
            )
        bags = input.shape[0]
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}'). Please open a feature request on GitHub."
        )
    if input.ndim == 2 and input.shape[1] == 0 and input.shape[0] > 0:
        raise RuntimeError("step must be nonzero")
    _check_indices("embedding_bag", "indices", input)
    if offsets is not None:
        _check_indices("embedding_bag", "offsets", offsets, 3)
    if weight.dtype.category != D.FLOATING:
        raise RuntimeError(
            "Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, BFloat16, "
            f"Float, Double; but got ember.{_TORCH_TENSOR_TYPES[weight.dtype.name]} instead (while checking "
            "arguments for embedding_bag)"
        )
    if per_sample_weights is not None and per_sample_weights.dtype is not weight.dtype:
        raise RuntimeError(
            "Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
            f"'per_sample_weights'; but type ember.{_TORCH_TENSOR_TYPES[weight.dtype.name]} does not equal "
            f"ember.{_TORCH_TENSOR_TYPES[per_sample_weights.dtype.name]} (while checking arguments for embedding_bag)"
        )
    return MetaArray((max(bags, 0), weight.shape[1]), weight._data.dtype)


def _bag_bounds(input, offsets, include_last_offset):
    """``(indices, starts, ends)`` of the bags as numpy arrays (1-D indices, one start/end per bag).

    Raises:
        RuntimeError: for offsets that don't start at 0, decrease, or pass the end of ``input``.
    """
    indices = input._data
    if indices.ndim == 2:
        b, length = indices.shape
        starts = _array_namespace(indices).arange(b, dtype=np.int64) * length
        return indices.reshape(-1), starts, starts + length
    n = indices.shape[0]
    offs = offsets._data.astype(np.int64)
    if offs.size:
        if offs[0] != 0:
            raise RuntimeError(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
                f"However, got {offs[0]}"
            )
        if offs[-1] > n:
            raise RuntimeError(
                f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {offs[-1]}"
            )
        if np.any(np.diff(offs) < 0):
            raise RuntimeError("embedding_bag: offsets must be non-decreasing")
    if include_last_offset:
        starts, ends = offs[:-1], offs[1:]
    else:
        starts, ends = offs, np.append(offs[1:], n)
    return indices, starts, ends


def _embedding_bag_cpu(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                       mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                       padding_idx=None):
    indices, starts, ends = _bag_bounds(input, offsets, include_last_offset)
    num, dim = weight.shape
    if indices.size and (indices.min() < 0 or indices.max() >= num):
        raise RuntimeError(f"embedding_bag: indices must be in [0, {num}), got {int(indices.max())}")
    if max_norm is not None:
        _renorm_rows_np(weight, indices, max_norm, norm_type)
    w = weight._data
    xp = _array_namespace(w)
    out_dtype = w.dtype
    bags = starts.shape[0]
    if bags == 0:
        return xp.zeros((0, dim), out_dtype)
    rows = _compute(np.take(w, indices, axis=0))
    valid = None
    pad = _padding_index(padding_idx, num)
    if pad is not None:
        valid = indices != pad
    if per_sample_weights is not None:
        rows = rows * _compute(per_sample_weights._data).reshape(-1, 1)
    lengths = ends - starts
    nonempty = lengths > 0
    if mode == "max":
        if valid is not None:
            rows = np.where(valid[:, None], rows, -np.inf)
        if rows.shape[0] == 0:
            return xp.zeros((bags, dim), out_dtype)
        out = _bag_reduce(np.maximum, rows, starts, ends, nonempty)
        out[np.isneginf(out).all(axis=1) & nonempty] = 0
        return out.astype(out_dtype, copy=False)
    if valid is not None:
        rows = rows * valid[:, None]
    if rows.shape[0] == 0:
        return xp.zeros((bags, dim), out_dtype)
    out = _bag_reduce(np.add, rows, starts, ends, nonempty)
    if mode == "mean":
        counts = lengths if valid is None else _bag_reduce(np.add, valid.astype(np.int64)[:, None], starts, ends,
                                                           nonempty)[:, 0]
        with np.errstate(all="ignore"):
            out = np.where(counts[:, None] > 0, out / np.maximum(counts, 1)[:, None].astype(out.dtype), 0)
    return out.astype(out_dtype, copy=False)


def _bag_reduce(ufunc, rows, starts, ends, nonempty):
    """``ufunc`` (np.add or np.maximum) over the rows of each bag: ``(bags, dim)``, zero for empty bags.

    Bags are consecutive (each starts where the previous one ends). numpy reduces them with
    ``ufunc.reduceat``; CuPy (no reduceat) scatters each row into its bag with ``_array_module.ufunc_at``.
    """
    end = int(ends[-1])  # rows past the last bag's end belong to no bag (CuPy: a host read)
    rows = rows[:end]
    if type(rows) is np.ndarray:
        if end and starts[-1] < end:  # every start is a row: empty bags (given one row by reduceat) are zeroed
            out = ufunc.reduceat(rows, starts, axis=0)
            out[~nonempty] = 0
            return out
        # trailing empty bags start past the last row: reduce the non-empty bags only
        out = np.zeros((starts.shape[0],) + rows.shape[1:], rows.dtype)
        if end:
            out[nonempty] = ufunc.reduceat(rows, starts[nonempty], axis=0)
        return out
    xp = _array_namespace(rows)
    out = xp.zeros((starts.shape[0],) + rows.shape[1:], rows.dtype)
    if end == 0:
        return out
    # each row's bag: the last bag starting at or before it (empty bags share their start with the next one)
    bag_of = xp.searchsorted(starts, xp.arange(end, dtype=np.int64), side="right") - 1
    width = math.prod(rows.shape[1:])
    positions = (bag_of[:, None] * width + xp.arange(width, dtype=np.int64)).reshape(-1)
    if ufunc is np.maximum:
        out.fill(-np.inf)
    _ufunc_at(ufunc, out.reshape(-1), positions, xp.ascontiguousarray(rows).reshape(-1))
    out[~nonempty] = 0
    return out


def _embedding_bag_decomp(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                          mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                          padding_idx=None):
    num, dim = weight.shape
    flat = input.reshape(-1)
    if input.ndim == 2:
        bags, length = input.shape
        bag_of = _E.arange(bags * length, device=input.device) // length
    else:
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        positions = _E.arange(flat.shape[0], device=input.device)
        bag_of = _E.searchsorted(offsets.to(D.int64), positions, right=True) - 1
    if max_norm is not None:
        _renorm_rows(weight, flat, max_norm, norm_type)
    rows = _E.index_select(weight, 0, flat)
    keep = None
    pad = _padding_index(padding_idx, num)
    if pad is not None:
        keep = flat != pad
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    if include_last_offset and input.ndim == 1 and bags >= 0:
        in_range = bag_of < bags
        keep = in_range if keep is None else _E.logical_and(keep, in_range)
        bag_of = _E.clamp(bag_of, max=max(bags - 1, 0))
    zeros = _E.zeros((bags, dim), dtype=weight.dtype, device=weight.device)
    index = bag_of.reshape(-1, 1).expand(-1, dim) if dim else bag_of.reshape(-1, 1)
    if mode == "max":
        if keep is not None:
            rows = _E.where(keep.reshape(-1, 1), rows, _E.full_like(rows, -math.inf))
        out = _E.scatter_reduce(_E.full_like(zeros, -math.inf), 0, index, rows, "amax")
        return _E.where(_E.isneginf(out), zeros, out)
    if keep is not None:
        rows = rows * keep.reshape(-1, 1).to(rows.dtype)
    total = _E.index_add(zeros, 0, bag_of, rows)
    if mode == "sum":
        return total
    ones = _E.ones(flat.shape[0], dtype=weight.dtype, device=weight.device)
    if keep is not None:
        ones = ones * keep.to(weight.dtype)
    counts = _E.index_add(_E.zeros(bags, dtype=weight.dtype, device=weight.device), 0, bag_of, ones)
    return total / _E.clamp(counts, min=1).reshape(-1, 1)


embedding_bag = _composite(
    "embedding_bag", _embedding_bag_meta, cpu=_embedding_bag_cpu, decomposition=_embedding_bag_decomp, tags=_NN
)
_cuda_runs_cpu_kernel(embedding_bag)  # (the offsets checks are the kernel's)


def _one_hot_classes(tensor, num_classes):
    """The number of classes of a one_hot call (data-dependent when ``num_classes == -1``)."""
    if tensor.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return num_classes
    if num_classes == -1:
        if tensor.device.type == "meta":
            raise NotImplementedError(
                "one_hot with num_classes=-1 on a meta tensor has a data-dependent shape; pass num_classes"
            )
        return int(_values_for_checks(tensor).max()) + 1  # (CuPy: a host read)
    return num_classes


def _one_hot_meta(tensor, num_classes=-1):
    """One-hot encoding of class indices: ``result[..., c] = 1 if tensor[...] == c else 0``.

    Args:
        tensor (Tensor): int64 class indices, ``>= 0``.
        num_classes (int): the number of classes; ``-1`` takes the largest index + 1 (a data-dependent shape).

    Returns:
        Tensor: ``(*tensor.shape, num_classes)``, int64.

    Raises:
        RuntimeError: for a tensor that is not int64, negative indices, indices ``>= num_classes``, or an empty
            tensor with ``num_classes=-1``.

    Example:
        >>> import ember
        >>> ember.nn.functional.one_hot(ember.tensor([0, 2]), 3)
        tensor([[1, 0, 0],
                [0, 0, 1]])
    """
    _check_tensor("one_hot", "tensor", tensor)
    num_classes = _int_arg("one_hot", "num_classes", num_classes, 2)
    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    classes = _one_hot_classes(tensor, num_classes)
    return MetaArray(tuple(tensor.shape) + (max(classes, 0),), np.dtype(np.int64))


def _one_hot_cpu(tensor, num_classes=-1):
    data = tensor._data
    classes = _one_hot_classes(tensor, num_classes)
    if data.size:
        if data.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if data.max() >= classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (data[..., None] == _array_namespace(data).arange(max(classes, 0))).astype(np.int64)


def _one_hot_decomp(tensor, num_classes=-1):
    classes = _one_hot_classes(tensor, num_classes)
    return _E.eq(_E.unsqueeze(tensor, -1), _E.arange(classes, device=tensor.device)).to(D.int64)


one_hot = _composite("one_hot", _one_hot_meta, cpu=_one_hot_cpu, decomposition=_one_hot_decomp, tags=_NN_ONLY)
_cuda_runs_cpu_kernel(one_hot)  # (the class-range checks are the kernel's)
