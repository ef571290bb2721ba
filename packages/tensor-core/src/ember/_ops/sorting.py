"""Sorting: sort, argsort, msort, topk and kthvalue (``sort`` is always stable)."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._pointwise_helpers import _torch_name
from ._reduction_helpers import (
    _I64,
    _SORT,
    _check_int,
    _check_nonempty_dims,
    _check_tensor,
    _one_dim,
    _op,
    _out_shape,
    _return_type,
    _select_rows,
    _sort_order,
    _to_last,
    _upcast,
)
from ._registry import COMPOSITE, defop
from ._shapes import wrap_dim

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["sort", "argsort", "msort", "topk", "kthvalue"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- sorting: sort, argsort, msort, topk, kthvalue -------------------------------------------------------

_sort_type = _return_type("sort", ["values", "indices"])
_topk_type = _return_type("topk", ["values", "indices"])
_kthvalue_type = _return_type("kthvalue", ["values", "indices"])


def _check_sortable(name, input):
    if input.dtype.is_complex:
        raise RuntimeError(f"{name}(): sort does not support complex dtypes")


def _sort_meta(input, dim=-1, descending=False, *, stable=False):
    """Sort ``input`` along ``dim``; a namedtuple ``(values, indices)``.

    The sort is always stable (equal values keep their order, ``stable`` is accepted for PyTorch
    compatibility). NaN sorts as the largest value: last ascending, first descending.

    Args:
        input (Tensor): a real or bool tensor.
        dim (int): the dim to sort along (the last by default).
        descending (bool): largest first.
        stable (bool): accepted; every sort is stable.

    Returns:
        tuple[Tensor, Tensor]: ``(values, indices)``, indices int64 into ``dim``.

    Raises:
        RuntimeError: for complex inputs.

    Example:
        >>> import ember
        >>> ember.sort(ember.tensor([3., 1., 2.]), descending=True)
        sort(values=tensor([3., 2., 1.]), indices=tensor([0, 2, 1]))
    """
    _check_tensor("sort", input)
    _check_sortable("sort", input)
    data = input._data
    _one_dim("sort", dim, data.ndim)
    return MetaArray(data.shape, data.dtype), MetaArray(data.shape, _I64)


def _sort_cpu(input, dim=-1, descending=False, *, stable=False):
    data = input._data
    if data.ndim == 0:
        return data.copy(), np.zeros((), _I64)
    d = wrap_dim(dim, data.ndim)
    order = _sort_order(data, d, descending)
    return np.take_along_axis(data, order, axis=d), order


sort = defop("sort", _sort_meta, cpu=_sort_cpu, has_out=True, tags=_SORT, return_type=_sort_type)


def _argsort_meta(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort ``input`` along ``dim`` (``sort(...).indices``; always stable).

    Example:
        >>> import ember
        >>> ember.argsort(ember.tensor([3., 1., 2.]))
        tensor([1, 2, 0])
    """
    _check_tensor("argsort", input)
    _check_sortable("argsort", input)
    data = input._data
    _one_dim("argsort", dim, data.ndim)
    return MetaArray(data.shape, _I64)


def _argsort_cpu(input, dim=-1, descending=False, *, stable=False):
    data = input._data
    if data.ndim == 0:
        return np.zeros((), _I64)
    return _sort_order(data, wrap_dim(dim, data.ndim), descending)


def _argsort_decomp(input, dim=-1, descending=False, *, stable=False):
    _argsort_meta(input, dim, descending, stable=stable)
    return sort(input, dim, descending, stable=stable)[1]


argsort = defop("argsort", _argsort_meta, cpu=_argsort_cpu, category=COMPOSITE, decomposition=_argsort_decomp,
                tags=_SORT)


def _msort_meta(input):
    """``input`` sorted along its first dim (``sort(input, dim=0).values``).

    Example:
        >>> import ember
        >>> ember.msort(ember.tensor([[3, 1], [2, 4]]))
        tensor([[2, 1],
                [3, 4]])
    """
    _check_tensor("msort", input)
    _check_sortable("msort", input)
    return MetaArray(input._data.shape, input._data.dtype)


def _msort_cpu(input):
    return _sort_cpu(input, 0)[0]


def _msort_decomp(input):
    _msort_meta(input)
    return sort(input, 0)[0]


msort = defop("msort", _msort_meta, cpu=_msort_cpu, category=COMPOSITE, decomposition=_msort_decomp, has_out=True,
              tags=_SORT)


def _dim_size(data, d):
    return data.shape[d] if data.ndim else 1


def _topk_meta(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or smallest) elements along ``dim``; a namedtuple ``(values, indices)``.

    NaN counts as the largest value. The result is always in sorted order (``sorted=False`` allows any
    order, so sorted is a valid answer).

    Args:
        input (Tensor): a real (not bool) tensor.
        k (int): how many, ``0 <= k <= input.size(dim)``.
        dim (int): the dim to select along (the last by default).
        largest (bool): the largest (True) or the smallest elements.
        sorted (bool): return them sorted (they always are).

    Raises:
        RuntimeError: for ``k`` out of range, or bool or complex inputs.

    Example:
        >>> import ember
        >>> ember.topk(ember.tensor([1., 5., 3., 4.]), 2)
        topk(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    _check_tensor("topk", input)
    k = _check_int("topk", k, "k")
    if input.dtype is D.bool:
        raise RuntimeError("topk does not support bool dtypes")
    _check_sortable("topk", input)
    data = input._data
    d = _one_dim("topk", dim, data.ndim)
    if not 0 <= k <= _dim_size(data, d):
        raise RuntimeError("selected index k out of range")
    shape = list(data.shape)
    if shape:
        shape[d] = k
    return MetaArray(tuple(shape), data.dtype), MetaArray(tuple(shape), _I64)


def _topk_cpu(input, k, dim=-1, largest=True, sorted=True):
    data = input._data
    if data.ndim == 0:
        return data.copy(), np.zeros((), _I64)
    d = wrap_dim(dim, data.ndim)
    n = data.shape[d]
    if 0 < k < n and n >= 64 and k * 8 <= n:
        # select the k candidates in linear time, then sort only them (in index order first, so that the
        # result is deterministic)
        x = _upcast(data)
        part = np.argpartition(x, n - k if largest else k - 1, axis=d)
        chosen = np.sort(np.take(part, np.arange(n - k, n) if largest else np.arange(k), axis=d), axis=d)
        order = np.take_along_axis(chosen, _sort_order(np.take_along_axis(x, chosen, axis=d), d, largest), axis=d)
    else:
        order = np.take(_sort_order(data, d, largest), np.arange(k), axis=d)
    return np.take_along_axis(data, order, axis=d), order


topk = defop("topk", _topk_meta, cpu=_topk_cpu, has_out=True, tags=_SORT, return_type=_topk_type)


def _kthvalue_meta(input, k, dim=-1, keepdim=False):
    """The ``k``-th smallest element along ``dim`` (``k`` counts from 1) and its index.

    Args:
        input (Tensor): a real (not bool) tensor.
        k (int): ``1 <= k <= input.size(dim)``.
        dim (int): the dim (the last by default).
        keepdim (bool): keep the reduced dim with size 1.

    Returns:
        tuple[Tensor, Tensor]: a namedtuple ``(values, indices)``. Among equal values the index is the
        one a stable sort puts at position ``k``, on every device (NaN counts as the largest value).
        PyTorch leaves that index unspecified: its CPU kernel returns whichever tie its quickselect
        leaves there, and on CUDA any of them, so the indices may differ from PyTorch's at ties;
        the values never do.

    Raises:
        RuntimeError: for ``k`` out of range, or bool or complex inputs.
        IndexError: when ``dim`` has size 0.

    Example:
        >>> import ember
        >>> ember.kthvalue(ember.tensor([4., 1., 3., 2.]), 2)
        kthvalue(values=tensor(2.), indices=tensor(3))
    """
    _check_tensor("kthvalue", input)
    k = _check_int("kthvalue", k, "k")
    if input.dtype is D.bool or input.dtype.is_complex:
        raise RuntimeError(f"kthvalue(): not implemented for {_torch_name(input.dtype)} inputs")
    data = input._data
    d = _one_dim("kthvalue", dim, data.ndim)
    _check_nonempty_dims("kthvalue", data.shape, (d,))
    if not 1 <= k <= _dim_size(data, d):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    shape = _out_shape(data.shape, (d,), keepdim)
    return MetaArray(shape, data.dtype), MetaArray(shape, _I64)


def _kthvalue_cpu(input, k, dim=-1, keepdim=False):
    data = input._data
    if data.ndim == 0:
        return data.copy(), np.zeros((), _I64)
    d = wrap_dim(dim, data.ndim)
    rows = _to_last(data, d)
    lead = rows.shape[:-1]
    rows = rows.reshape(math.prod(lead), rows.shape[-1])
    values, index = _select_rows(rows, np.full(rows.shape[0], k - 1, dtype=_I64))
    values, index = values.reshape(lead), index.reshape(lead)
    if keepdim:
        values, index = np.expand_dims(values, d), np.expand_dims(index, d)
    return values, index


def _kthvalue_decomp(input, k, dim=-1, keepdim=False):
    _kthvalue_meta(input, k, dim, keepdim)
    values, indices = sort(input, dim, stable=True)
    if input.ndim == 0:
        return _kthvalue_type(values, indices)
    d = wrap_dim(dim, input.ndim)
    values, indices = _op("narrow")(values, d, k - 1, 1), _op("narrow")(indices, d, k - 1, 1)
    if not keepdim:
        values, indices = _op("squeeze")(values, d), _op("squeeze")(indices, d)
    return _kthvalue_type(values, indices)


kthvalue = defop("kthvalue", _kthvalue_meta, cpu=_kthvalue_cpu, category=COMPOSITE, decomposition=_kthvalue_decomp,
                 has_out=True, tags=_SORT, return_type=_kthvalue_type)
