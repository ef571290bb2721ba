"""Ops that index one dim with an index vector: index_select, index_add, index_copy, index_fill, index_reduce.

Index values are data, so their bounds are checked by the kernels; every
other argument check is in the meta functions.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._array_module import keep_last as _keep_last
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._shape_helpers import (
    _C_ACCUMULATE,
    _INT32_OR_64,
    _LOW_FLOATS,
    _as_1d,
    _astype,
    _check_fill_value,
    _check_index_bounds,
    _check_index_dtype,
    _check_reduction_dtype,
    _def_inplace,
    _fill_tensor,
    _first_out_of_range,
    _fresh,
    _is_number,
    _reduce_at,
    _require_tensor,
    _shape_str,
    _write_through,
)
from ._shapes import wrap_dim
from .creation import _cast_scalar, check_scalar_fits, clone
from .gather_scatter import scatter_reduce
from .indexing import index as index_op
from .indexing import index_put
from .views import expand, reshape

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = [
    "index_select", "index_add", "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_", "index_reduce",
    "index_reduce_"
]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- index_select / masks --------------------------------------------------------------------------


def _index_select_check(input, dim, index):
    _require_tensor("index_select", "input", input)
    _require_tensor("index_select", "index", index)
    d = wrap_dim(dim, input._data.ndim)
    _check_index_dtype(index, _INT32_OR_64, "index_select(): Expected dtype int32 or int64 for index")
    if index._data.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    count = math.prod(index._data.shape)
    if input._data.ndim == 0 and count != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {count} value(s)")
    return d, count


def _index_select_meta(input, dim, index):
    """The slices of ``input`` along ``dim`` at the positions in ``index``, in that order (a copy).

    Args:
        input (Tensor): the tensor.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D, int32 or int64, values in ``[0, input.size(dim))``.

    Returns:
        Tensor: ``input``'s shape with ``dim`` of size ``index.numel()``.

    Raises:
        RuntimeError: for a non-integer ``index``.
        IndexError: for an index of more than one dim or out-of-range values.

    Example:
        >>> import ember
        >>> ember.index_select(ember.tensor([[1, 2], [3, 4], [5, 6]]), 0, ember.tensor([2, 0]))
        tensor([[5, 6],
                [1, 2]])
    """
    d, count = _index_select_check(input, dim, index)
    if input._data.ndim == 0:
        return MetaArray((), input._data.dtype)
    shape = list(input._data.shape)
    shape[d] = count
    return MetaArray(tuple(shape), input._data.dtype)


def _index_select_cpu(input, dim, index):
    data = input._data
    idx = index._data.reshape(-1)
    size = data.shape[wrap_dim(dim, data.ndim)] if data.ndim else 1
    if _first_out_of_range(idx, 0, size) is not None:
        raise IndexError("index out of range in self")
    if data.ndim == 0:
        return _fresh(data)
    return np.take(data, idx, axis=wrap_dim(dim, data.ndim))


def _index_select_decomp(input, dim, index):
    d, _ = _index_select_check(input, dim, index)
    if input._data.ndim == 0:
        return clone(input)
    return index_op(input, [None] * d + [reshape(index, -1)])


index_select = defop("index_select", _index_select_meta, cpu=_index_select_cpu, category=COMPOSITE,
                     decomposition=_index_select_decomp, has_out=True)


# -- index_add / index_copy / index_fill / index_reduce ----------------------------------------------


def _check_index_source(op, input, dim, index, source, *, long_only=False, vector_message=None):
    """Shared checks of index_add/index_copy/index_reduce; returns the wrapped dim."""
    _require_tensor(op, "input", input)
    _require_tensor(op, "index", index)
    _require_tensor(op, "source", source)
    ndim = input._data.ndim
    d = wrap_dim(dim, ndim)
    if index._data.ndim > 1:
        raise IndexError(vector_message.format(ndim=index._data.ndim, name=_torch_name(index.dtype),
                                               shape=_shape_str(index._data.shape)))
    count = math.prod(index._data.shape)
    if source.dtype is not input.dtype:
        raise RuntimeError(
            f"{op}_(): self ({_torch_name(input.dtype)}) and source ({_torch_name(source.dtype)}) must have the "
            "same scalar type"
        )
    sshape, ishape = source._data.shape, input._data.shape
    if len(sshape) != ndim or any(a != b for k, (a, b) in enumerate(zip(ishape, sshape)) if k != d):
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
            f"{_shape_str(ishape)} source.shape = {_shape_str(sshape)}"
        )
    source_count = sshape[d] if len(sshape) else 1
    if count != source_count:
        raise RuntimeError(
            f"{op}_(): Number of indices ({count}) should be equal to source.size(dim): ({source_count}), for dim: {d}"
        )
    return d


def _index_positions(shape, dim, idx):
    """Flat positions in a contiguous array of ``shape`` of ``out[(..., idx[j], ...)]`` along ``dim``, in
    the row-major order of a source of shape ``shape[:dim] + (len(idx),) + shape[dim + 1:]``."""
    pre, size, post = math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1 :])
    # (pre, post) offsets of the other dims plus (n,) offsets along dim: one pass over the result
    xp = _array_namespace(idx)
    others = xp.arange(pre, dtype=np.int64)[:, None] * (size * post) + xp.arange(post, dtype=np.int64)
    along = np.multiply(idx, post, dtype=np.int64)
    return np.add(others[:, None, :], along[None, :, None]).reshape(-1)


def _index_add_meta(input, dim, index, source, *, alpha=1):
    """A copy of ``input`` with ``alpha * source`` added to the slices at ``index`` along ``dim``.

    Repeated indices accumulate.

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D, int32/int64, values in ``[0, input.size(dim))``.
        source (Tensor): of ``input``'s dtype and shape except ``dim``, whose size
            is ``index.numel()``.
        alpha (Number): multiplier of ``source`` (converted to ``input``'s dtype).

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype.

    Raises:
        RuntimeError: for mismatched dtypes or shapes, a non-integer index or
            out-of-range index values.
        IndexError: for an index of more than one dim.

    Example:
        >>> import ember
        >>> ember.index_add(ember.zeros(3, 2), 0, ember.tensor([0, 0]), ember.ones(2, 2), alpha=2)
        tensor([[4., 4.],
                [0., 0.],
                [0., 0.]])
    """
    _require_tensor("index_add", "index", index)
    _check_index_dtype(index, _INT32_OR_64, "index_add_(): Expected dtype int32/int64 for index but got: {name}")
    _check_index_source("index_add", input, dim, index, source, vector_message=(
        "index_add_(): Index is supposed to be a vector, but got dim: {ndim} with type: {name} and size: {shape}"))
    if not _is_number(alpha):
        raise TypeError(f"index_add(): argument 'alpha' must be Number, not {type(alpha).__name__}")
    check_scalar_fits(alpha, input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _index_reduce_into(out, dim, index, source, reduce, include_self=True, alpha=None):
    idx = index._data.reshape(-1)
    if idx.size == 0:
        return
    shape = _as_1d(out.shape)
    d = wrap_dim(dim, out.ndim)
    _check_index_bounds_for(reduce, idx, shape[d], d)
    vals = source._data.reshape(-1)
    if alpha is not None and not (type(alpha) in (int, bool) and alpha == 1):
        if out.dtype == np.bool_:
            vals = vals & bool(alpha)
        else:
            compute = np.dtype(np.float32) if out.dtype in _LOW_FLOATS else out.dtype
            vals = np.multiply(_astype(vals, compute), _cast_scalar(alpha, compute)).astype(out.dtype)
    if reduce == "sum" and _add_rows(out, shape, d, idx, vals):
        return
    _reduce_at(out.reshape(-1), _index_positions(shape, d, idx), vals, reduce, include_self)


def _add_rows(out, shape, dim, idx, vals):
    """``index_add`` of whole rows: the source's slices along ``dim`` added as rows of ``prod(shape[dim + 1:])``
    contiguous elements (``_C.index_accumulate_rows``; an embedding gradient's 128-wide rows: the op 98 -> 62 us),
    each output element receiving its values in the order of the element-wise path. False, having written
    nothing, where that path must run (elements that are not rows, numpy arrays only, other dtypes)."""
    row = math.prod(shape[dim + 1:])
    if row < 2 or type(out) is not np.ndarray or type(vals) is not np.ndarray or out.dtype not in _C_ACCUMULATE \
            or vals.dtype != out.dtype or not out.flags.c_contiguous:
        return False
    pre = math.prod(shape[:dim])
    if pre == 0:  # an empty batch: nothing to add
        return True
    rows = np.asarray(idx, dtype=np.int64)
    if pre > 1:  # the slices of each leading index: row numbers in out viewed as (pre * size, row)
        rows = (np.arange(pre, dtype=np.int64)[:, None] * shape[dim] + rows[None, :]).reshape(-1)
    _C.index_accumulate_rows(out.reshape(-1), np.ascontiguousarray(rows), np.ascontiguousarray(vals), row)
    return True


def _check_index_bounds_for(reduce, idx, size, dim):
    if reduce == "sum":  # index_add
        _check_index_bounds(idx, size, dim)
    elif _first_out_of_range(idx, 0, size) is not None:
        raise IndexError("index out of range in self")


def _index_add_cpu(input, dim, index, source, *, alpha=1):
    out = _fresh(input._data)
    _index_reduce_into(out, dim, index, source, "sum", alpha=alpha)
    return out


def _index_add_decomp(input, dim, index, source, *, alpha=1):
    _index_add_meta(input, dim, index, source, alpha=alpha)
    from .pointwise import mul

    if input.dtype.category == D.INTEGRAL:
        alpha = int(alpha)  # PyTorch converts alpha to the dtype first
    values = source if alpha == 1 else mul(source, alpha)
    return _put_along(input, dim, reshape(index, -1).to(D.int64), values, True)


def _put_along(input, dim, positions, values, accumulate=False):
    """``input`` with ``values`` written (or added) at the 1-D ``positions`` along ``dim``, through
    ``index_put``: the common step of the index_add/index_copy/index_fill decompositions (a 0-d
    ``input`` is taken as one element along dim 0)."""
    if input._data.ndim == 0:
        return reshape(index_put(reshape(input, 1), [positions], reshape(values, -1), accumulate), ())
    d = wrap_dim(dim, input._data.ndim)
    return index_put(input, [None] * d + [positions], values, accumulate)


index_add = defop("index_add", _index_add_meta, cpu=_index_add_cpu, category=COMPOSITE,
                  decomposition=_index_add_decomp, has_out=True)
_def_inplace(index_add, lambda self, dim, index, source, *, alpha=1: _write_through(
    self, lambda out: _index_reduce_into(out, dim, index, source, "sum", alpha=alpha)))


def _index_copy_meta(input, dim, index, source):
    """A copy of ``input`` with the slices at ``index`` along ``dim`` replaced by those of ``source``.

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D int64, values in ``[0, input.size(dim))``.
        source (Tensor): of ``input``'s dtype; its slices along ``dim`` have
            ``input``'s slice shape, and there are ``index.numel()`` of them.

    Returns:
        Tensor: a new tensor. With repeated indices the last slice wins.

    Raises:
        RuntimeError: for a non-int64 index or mismatched dtypes or shapes.
        IndexError: for an index of more than one dim, a count that differs
            from ``source``'s or out-of-range index values.

    Example:
        >>> import ember
        >>> ember.index_copy(ember.zeros(3), 0, ember.tensor([2, 0]), ember.tensor([1., 2.]))
        tensor([2., 0., 1.])
    """
    _require_tensor("index_copy", "input", input)
    _require_tensor("index_copy", "index", index)
    _require_tensor("index_copy", "source", source)
    d = wrap_dim(dim, input._data.ndim)
    if index._data.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index._data.ndim})")
    count = math.prod(index._data.shape)
    sshape, ishape = source._data.shape, input._data.shape
    source_count = sshape[d] if len(sshape) > d else 1
    if count != source_count:
        raise IndexError(
            f"index_copy_(): Number of indices ({count}) should be equal to source.size(dim) ({source_count})"
        )
    _check_index_dtype(index, (D.int64,), "index_copy_(): Expected a long tensor for index, but got {name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(
            "index_copy_(): self and source expected to have the same dtype, but got (self) "
            f"{_torch_name(input.dtype)} and (source) {_torch_name(source.dtype)}"
        )
    self_slice = [s for k, s in enumerate(ishape) if k != d]
    source_slice = [s for k, s in enumerate(sshape) if k != d]
    if len(ishape) and self_slice != source_slice:
        k = next((k for k, (a, b) in enumerate(zip(self_slice, source_slice)) if a != b), len(self_slice))
        dest = self_slice[k] if k < len(self_slice) else 1
        src = source_slice[k] if k < len(source_slice) else 1
        raise RuntimeError(
            "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: "
            f"{dest} at dimension {k + (k >= d)} and source slice shape: {src} at dimension {k}."
        )
    return MetaArray(ishape, input._data.dtype)


def _index_copy_into(out, dim, index, source):
    idx = index._data.reshape(-1)
    if idx.size == 0:
        return
    target = out.reshape(_as_1d(out.shape))
    d = wrap_dim(dim, out.ndim)
    size = target.shape[d]
    bad = _first_out_of_range(idx, 0, size)
    if bad is not None:
        raise IndexError(f"index_copy_(): index {bad} is out of bounds for dimension {d} with size {size}")
    src = np.moveaxis(source._data.reshape(target.shape[:d] + (idx.size,) + target.shape[d + 1 :]), d, 0)
    if type(idx) is not np.ndarray:  # CuPy: of repeated indices only the last slice is written (numpy's result)
        keep = _keep_last(idx)
        idx, src = idx[keep], src[keep]
    np.moveaxis(target, d, 0)[idx] = src


def _index_copy_cpu(input, dim, index, source):
    out = _fresh(input._data)
    _index_copy_into(out, dim, index, source)
    return out


def _index_copy_decomp(input, dim, index, source):
    _index_copy_meta(input, dim, index, source)
    return _put_along(input, dim, reshape(index, -1), source)


index_copy = defop("index_copy", _index_copy_meta, cpu=_index_copy_cpu, category=COMPOSITE,
                   decomposition=_index_copy_decomp, has_out=True)
_def_inplace(index_copy, lambda self, dim, index, source: _write_through(
    self, lambda out: _index_copy_into(out, dim, index, source)))


def _index_fill_meta(input, dim, index, value):
    """A copy of ``input`` with the slices at ``index`` along ``dim`` set to ``value``.

    Args:
        input (Tensor): the tensor.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D int64; negative values count from the end.
        value (Number or Tensor): the fill value (a zero-dim tensor is allowed).

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype.

    Raises:
        IndexError: for a non-int64 index or out-of-range index values.
        RuntimeError: for an index of more than one dim, a value tensor with
            dimensions, or a value the dtype can't hold.

    Example:
        >>> import ember
        >>> ember.index_fill(ember.zeros(2, 3), 1, ember.tensor([0, 2]), -1.)
        tensor([[-1.,  0., -1.],
                [-1.,  0., -1.]])
    """
    _require_tensor("index_fill", "input", input)
    _require_tensor("index_fill", "index", index)
    wrap_dim(dim, input._data.ndim)
    _check_index_dtype(index, (D.int64,), "index_fill_(): Expected dtype int64 for index.", IndexError)
    if index._data.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if isinstance(value, (complex, np.complexfloating)) and not input.dtype.is_complex:
        raise RuntimeError("index_fill_(): Converting complex Scalar to non-complex type is not supported")
    _check_fill_value("index_fill_", value, input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _index_fill_into(out, dim, index, value):
    idx = index._data.reshape(-1)
    if idx.size == 0:
        return
    target = out.reshape(_as_1d(out.shape))
    d = wrap_dim(dim, out.ndim)
    size = target.shape[d]
    bad = _first_out_of_range(idx, -size, size)
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    np.moveaxis(target, d, 0)[idx] = _cast_scalar(value, out.dtype)


def _index_fill_cpu(input, dim, index, value):
    out = _fresh(input._data)
    _index_fill_into(out, dim, index, value)
    return out


def _index_fill_decomp(input, dim, index, value):
    _index_fill_meta(input, dim, index, value)
    return _put_along(input, dim, reshape(index, -1), _fill_tensor(value, input))


index_fill = defop("index_fill", _index_fill_meta, cpu=_index_fill_cpu, category=COMPOSITE,
                   decomposition=_index_fill_decomp)
_def_inplace(index_fill, lambda self, dim, index, value: _write_through(
    self, lambda out: _index_fill_into(out, dim, index, value)))

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _index_reduce_meta(input, dim, index, source, reduce, *, include_self=True):
    """A copy of ``input`` with the slices of ``source`` reduced into the slices at ``index`` along ``dim``.

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D, int32/int64, values in ``[0, input.size(dim))``.
        source (Tensor): as in :func:`ember.index_add`.
        reduce (str): ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
        include_self (bool): whether ``input``'s values at the indexed slices
            take part in the reduction.

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype. Integer means round down.

    Raises:
        RuntimeError: for another ``reduce``, mismatched dtypes or shapes, or a
            non-integer index.
        IndexError: for an index of more than one dim or out-of-range values.
        NotImplementedError: for ``"mean"`` of bool and ``"amax"``/``"amin"`` of
            complex tensors, and ``include_self=False`` with bool or complex
            tensors (as PyTorch).

    Example:
        >>> import ember
        >>> x = ember.ones(3)
        >>> ember.index_reduce(x, 0, ember.tensor([0, 0, 2]), ember.tensor([2., 3., 4.]), "prod")
        tensor([6., 1., 4.])
    """
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    _require_tensor("index_reduce", "index", index)
    _check_index_dtype(index, _INT32_OR_64, "index_reduce_(): Expected dtype int32/int64 for index but got: {name}")
    _check_index_source("index_reduce", input, dim, index, source, vector_message=(
        "index_reduce_(): Index is supposed to be a vector, but got dim: {ndim} with type: {name} and size: {shape}"))
    _check_reduction_dtype("index_reduce_func_cpu", reduce, input.dtype)
    if not include_self and (input.dtype is D.bool or input.dtype.is_complex):
        # PyTorch's CPU kernel has no such variant; refusing keeps the dtype coverage identical
        raise NotImplementedError(
            f'"index_reduce_func_exclude_input_init" not implemented for \'{_torch_name(input.dtype)}\''
        )
    return MetaArray(input._data.shape, input._data.dtype)


def _index_reduce_cpu(input, dim, index, source, reduce, *, include_self=True):
    out = _fresh(input._data)
    _index_reduce_into(out, dim, index, source, reduce, include_self)
    return out


def _index_reduce_decomp(input, dim, index, source, reduce, *, include_self=True):
    _index_reduce_meta(input, dim, index, source, reduce, include_self=include_self)
    if input._data.ndim == 0:
        return reshape(scatter_reduce(reshape(input, 1), 0, reshape(index, -1), reshape(source, -1), reduce,
                                      include_self=include_self), ())
    d = wrap_dim(dim, input._data.ndim)
    shape = [1] * input._data.ndim
    shape[d] = -1
    positions = expand(reshape(index, shape), tuple(source._data.shape))
    return scatter_reduce(input, d, positions, source, reduce, include_self=include_self)


index_reduce = defop("index_reduce", _index_reduce_meta, cpu=_index_reduce_cpu, category=COMPOSITE,
                     decomposition=_index_reduce_decomp, has_out=True)
_def_inplace(index_reduce, lambda self, dim, index, source, reduce, *, include_self=True: _write_through(
    self, lambda out: _index_reduce_into(out, dim, index, source, reduce, include_self)))
