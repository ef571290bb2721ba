"""gather and the scatter family along a dim: scatter, scatter_add, scatter_reduce.

Index values are data, so their bounds are checked by the kernels; every
other argument check is in the meta functions.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _C
from .._meta import MetaArray, contiguous_strides
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._registry import defop
from ._shape_helpers import (
    _INT32_OR_64,
    _as_1d,
    _check_index_bounds,
    _check_index_dtype,
    _check_reduction_dtype,
    _def_inplace,
    _fresh,
    _is_number,
    _reduce_at,
    _require_tensor,
    _shape_str,
    _write_through,
)
from ._shapes import wrap_dim
from .creation import _cast_scalar, check_scalar_fits

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = [
    "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_"
]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# dtypes whose gather runs in ember._C.gather (any of 1, 2, 4, 8, 16 bytes) and scatter_add in ember._C.scatter_add_
_C_GATHER_KINDS = "biufc"
_C_SCATTER_ADD = frozenset(np.dtype(n) for n in ("float32", "float64"))


def _check_gather_scatter(name, input, dim, index, src=None):
    """Shared checks of gather and the scatter family; returns the wrapped dim."""
    _require_tensor(name, "input", input)
    _require_tensor(name, "index", index)
    d = wrap_dim(dim, input._data.ndim)
    family = "gather" if name == "gather" else "scatter"
    _check_index_dtype(index, _INT32_OR_64, f"{family}(): Expected dtype int32/int64 for index")
    if src is not None and src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if math.prod(index._data.shape) == 0:
        return d
    ishape, sshape = _as_1d(index._data.shape), _as_1d(input._data.shape)
    what = "input" if name == "gather" else "self"
    if len(ishape) != len(sshape):
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {what} tensor")
    if src is not None and len(_as_1d(src._data.shape)) != len(ishape):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    for k, (i, s) in enumerate(zip(ishape, sshape)):
        if k != d and i > s:
            if name == "gather":
                raise RuntimeError(
                    f"Size does not match at dimension {k} expected index {_shape_str(index._data.shape)} to be no "
                    f"larger than self {_shape_str(input._data.shape)} apart from dimension {d}"
                )
            raise RuntimeError(_scatter_size_message(index, input, d, src))
    if src is not None and any(i > s for i, s in zip(ishape, _as_1d(src._data.shape))):
        raise RuntimeError(_scatter_size_message(index, input, d, src))
    return d


def _scatter_size_message(index, input, d, src):
    message = (f"Expected index {_shape_str(index._data.shape)} to be no larger than self "
               f"{_shape_str(input._data.shape)} apart from dimension {d}")
    if src is not None:
        message += f" and to be no larger size than src {_shape_str(src._data.shape)}"
    return message


def _gather_meta(input, dim, index, *, sparse_grad=False):
    """Values of ``input`` along ``dim`` at ``index``: ``out[i][j] = input[index[i][j]][j]`` for ``dim=0``.

    Args:
        input (Tensor): the source.
        dim (int): the dimension to gather along.
        index (Tensor): int32/int64 with ``input``'s number of dims, no larger
            than ``input`` in the other dims; values in ``[0, input.size(dim))``.
        sparse_grad (bool): accepted for compatibility (gradients are dense).

    Returns:
        Tensor: of ``index``'s shape and ``input``'s dtype.

    Raises:
        RuntimeError: for a non-integer index, mismatched dims or sizes, or
            out-of-range index values.

    Example:
        >>> import ember
        >>> ember.gather(ember.tensor([[1, 2], [3, 4]]), 1, ember.tensor([[0, 0], [1, 0]]))
        tensor([[1, 1],
                [4, 3]])
    """
    _check_gather_scatter("gather", input, dim, index)
    return MetaArray(index._data.shape, input._data.dtype)


def _gather_cpu(input, dim, index, *, sparse_grad=False):
    data = input._data
    idx = index._data
    xp = _array_namespace(data)
    if idx.size == 0:
        return xp.empty(idx.shape, data.dtype)
    d = wrap_dim(dim, data.ndim)
    data = data.reshape(_as_1d(data.shape))
    idx = idx.reshape(_as_1d(idx.shape))
    if xp is np and data.dtype.kind in _C_GATHER_KINDS and _matches_outside(idx.shape, data.shape, d):
        # one pass in C++ (which checks the indices, with the same error)
        return _C.gather(np.ascontiguousarray(data), d, np.ascontiguousarray(idx)).reshape(index._data.shape)
    _check_index_bounds(idx, data.shape[d], d)
    # flat positions into the (contiguous) input, then one take: much faster than take_along_axis
    flat = xp.ascontiguousarray(data).reshape(-1)
    return flat.take(_scatter_positions(data.shape, d, idx)).reshape(index._data.shape)


gather = defop("gather", _gather_meta, cpu=_gather_cpu, has_out=True)


def _matches_outside(ishape, shape, dim):
    """Whether the index shape ``ishape`` equals ``shape`` in every dim but ``dim`` (what the C++ kernels take)."""
    return all(i == s for k, (i, s) in enumerate(zip(ishape, shape)) if k != dim)


def _scatter_positions(shape, dim, idx):
    """Flat positions in a contiguous array of ``shape`` of the elements that ``idx`` addresses along ``dim``."""
    strides = contiguous_strides(shape)
    ndim = len(shape)
    # the offsets of the other dims form a small broadcastable array: one pass over idx remains
    xp = _array_namespace(idx)
    base = xp.zeros((1,) * ndim, dtype=np.int64)
    for k, n in enumerate(idx.shape):
        if k != dim and n > 1:
            base = base + (xp.arange(n, dtype=np.int64) * strides[k]).reshape((n,) + (1,) * (ndim - k - 1))
    if strides[dim] == 1:
        pos = np.add(idx, base, dtype=np.int64)
    else:
        pos = np.multiply(idx, strides[dim], dtype=np.int64)
        pos += base
    return pos.reshape(-1)


def _scatter_into(out, dim, index, src, value, reduce, include_self=True):
    """Scatter ``src`` (or ``value``) into the contiguous array ``out`` (of ``self``'s shape)."""
    idx = index._data
    if idx.size == 0:
        return
    shape = _as_1d(out.shape)
    d = wrap_dim(dim, out.ndim)
    idx = idx.reshape(_as_1d(idx.shape))
    if (src is not None and reduce == "sum" and include_self and type(out) is np.ndarray and out.dtype in _C_SCATTER_ADD
            and out.flags.c_contiguous and _matches_outside(idx.shape, shape, d)):
        # one pass in C++ over a contiguous block of src shaped like index (an out-of-range index raises the
        # same error, before anything is written)
        block = src._data.reshape(_as_1d(src._data.shape))[tuple(slice(0, n) for n in idx.shape)]
        block = np.array(block, order="C") if np.may_share_memory(block, out) else np.ascontiguousarray(block)
        _C.scatter_add_(out.reshape(shape), d, np.ascontiguousarray(idx), block)
        return
    _check_index_bounds(idx, shape[d], d)
    pos = _scatter_positions(shape, d, idx)
    if src is not None:
        source = src._data.reshape(_as_1d(src._data.shape))
        vals = source[tuple(slice(0, n) for n in idx.shape)].reshape(-1)
    else:
        vals = _array_namespace(out).full(pos.size, _cast_scalar(value, out.dtype), dtype=out.dtype)
    _reduce_at(out.reshape(-1), pos, vals, reduce, include_self)


def _scatter_args(name, src, value):
    """(src tensor or None, value or None) from ``scatter``'s overloads."""
    if src is not None and value is not None:
        raise TypeError(f"{name}(): pass either src or value, not both")
    if src is None and value is None:
        raise TypeError(f"{name}() missing 1 required argument: 'src' or 'value'")
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src
    if value is not None and not _is_number(value):
        raise TypeError(f"{name}(): argument 'value' must be Number, not {type(value).__name__}")
    return src, value


_SCATTER_MODES = {None: None, "add": "sum", "multiply": "prod"}


def _scatter_meta(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of ``input`` with values written at ``index`` along ``dim``: ``out[index[i][j]][j] = src[i][j]`` (dim 0).

    Either ``src`` (a tensor, only its leading ``index.shape`` block is used)
    or ``value`` (a number, also accepted as the 4th positional argument) is
    written. With repeated indices and no ``reduce``, which write wins is
    unspecified (as in PyTorch).

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to scatter along.
        index (Tensor): int32/int64, ``input``'s number of dims, no larger than
            ``src`` and (except in ``dim``) than ``input``.
        src (Tensor, optional): values, of ``input``'s dtype.
        value (Number, optional): one value for every index.
        reduce (str, optional): ``"add"`` or ``"multiply"`` to combine with the
            existing values instead of overwriting.

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype.

    Raises:
        RuntimeError: for mismatched dims, sizes or dtypes, out-of-range
            indices, or another ``reduce``.

    Example:
        >>> import ember
        >>> ember.scatter(ember.zeros(2, 3), 1, ember.tensor([[2], [0]]), ember.tensor([[1.], [2.]]))
        tensor([[0., 0., 1.],
                [2., 0., 0.]])
    """
    src, value = _scatter_args("scatter", src, value)
    if reduce not in _SCATTER_MODES:
        raise RuntimeError("reduce argument must be either add or multiply.")
    _check_gather_scatter("scatter", input, dim, index, src)
    if value is not None:
        check_scalar_fits(value, input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _scatter_cpu(input, dim, index, src=None, *, value=None, reduce=None):
    src, value = _scatter_args("scatter", src, value)
    out = _fresh(input._data)
    _scatter_into(out, dim, index, src, value, _SCATTER_MODES[reduce])
    return out


def _scatter_inplace_cpu(self, dim, index, src=None, *, value=None, reduce=None):
    src, value = _scatter_args("scatter", src, value)
    _write_through(self, lambda out: _scatter_into(out, dim, index, src, value, _SCATTER_MODES[reduce]))


scatter = defop("scatter", _scatter_meta, cpu=_scatter_cpu, has_out=True)
_def_inplace(scatter, _scatter_inplace_cpu)


def _scatter_add_meta(input, dim, index, src):
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim``; repeated indices accumulate.

    ``out[index[i][j]][j] += src[i][j]`` for ``dim=0``. Shapes follow
    :func:`ember.scatter`.

    Raises:
        RuntimeError: as :func:`ember.scatter`.

    Example:
        >>> import ember
        >>> ember.scatter_add(ember.zeros(3), 0, ember.tensor([0, 0, 2]), ember.tensor([1., 2., 3.]))
        tensor([3., 0., 3.])
    """
    _require_tensor("scatter_add", "src", src)
    _check_gather_scatter("scatter_add", input, dim, index, src)
    return MetaArray(input._data.shape, input._data.dtype)


def _scatter_add_cpu(input, dim, index, src):
    out = _fresh(input._data)
    _scatter_into(out, dim, index, src, None, "sum")
    return out


scatter_add = defop("scatter_add", _scatter_add_meta, cpu=_scatter_add_cpu, has_out=True)
_def_inplace(scatter_add, lambda self, dim, index, src: _write_through(
    self, lambda out: _scatter_into(out, dim, index, src, None, "sum")))

_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_meta(input, dim, index, src, reduce, *, include_self=True):
    """A copy of ``input`` with ``src`` reduced into it at ``index`` along ``dim``.

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to scatter along.
        index (Tensor): int32/int64 indices (see :func:`ember.scatter`).
        src (Tensor): values, of ``input``'s dtype.
        reduce (str): ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
        include_self (bool): whether the existing values of ``input`` at the
            scattered positions take part in the reduction.

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype. Positions no index
        points to keep ``input``'s values. Integer means round down.

    Raises:
        RuntimeError: as :func:`ember.scatter`, or for another ``reduce``.
        NotImplementedError: for ``"mean"`` of bool and ``"amax"``/``"amin"``
            of complex tensors (as PyTorch).

    Example:
        >>> import ember
        >>> x = ember.tensor([1., 2., 3.])
        >>> ember.scatter_reduce(x, 0, ember.tensor([0, 0]), ember.tensor([5., 7.]), "amax")
        tensor([7., 2., 3.])
    """
    _require_tensor("scatter_reduce", "src", src)
    if reduce not in _SCATTER_REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    _check_gather_scatter("scatter_reduce", input, dim, index, src)
    _check_reduction_dtype("scatter_gather_tensor_cpu_reduce", reduce, input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _scatter_reduce_cpu(input, dim, index, src, reduce, *, include_self=True):
    out = _fresh(input._data)
    _scatter_into(out, dim, index, src, None, reduce, include_self)
    return out


scatter_reduce = defop("scatter_reduce", _scatter_reduce_meta, cpu=_scatter_reduce_cpu, has_out=True)
_def_inplace(scatter_reduce, lambda self, dim, index, src, reduce, *, include_self=True: _write_through(
    self, lambda out: _scatter_into(out, dim, index, src, None, reduce, include_self)))
