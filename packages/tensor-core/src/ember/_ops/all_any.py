"""Truth reductions: all, any and count_nonzero."""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray
from ._reduction_helpers import _BFLOAT16, _F32, _I64, _REDUCTION, _axis, _check_tensor, _dims, _finish, _op, _out_shape
from ._registry import COMPOSITE, defop
from .sums import sum

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["all", "any", "count_nonzero"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- all, any, count_nonzero ---------------------------------------------------------------------------


def _logical_reduction(name, np_fn):
    def meta(input, dim=None, keepdim=False):
        _check_tensor(name, input)
        data = input._data
        dims = _dims(name, dim, data.ndim, empty_means_all=False)
        out = data.dtype if data.dtype == np.uint8 else np.dtype(np.bool_)
        return MetaArray(_out_shape(data.shape, dims, keepdim), out)

    def cpu(input, dim=None, keepdim=False):
        data = input._data
        dims = _dims(name, dim, data.ndim, empty_means_all=False)
        out = data.dtype if data.dtype == np.uint8 else np.dtype(np.bool_)
        if data.dtype in _BFLOAT16:
            data = data.astype(_F32)
        if not dims:
            return (data != 0).astype(out)
        return _finish(np_fn(data, axis=_axis(data, dims), keepdims=keepdim), out)

    meta.__name__ = name
    meta.__doc__ = f"""Whether {name} elements over ``dim`` are nonzero (over all dims by default).

    Args:
        input (Tensor): any dtype.
        dim (int or tuple of ints, optional): the dims to reduce; an empty tuple reduces none.
        keepdim (bool): keep the reduced dims with size 1.

    Returns:
        Tensor: bool, or uint8 for a uint8 input (as in PyTorch). ``all`` of nothing is True, ``any`` False.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([[True, False], [True, True]]), dim=1)
        tensor([{"False,  True" if name == "all" else "True, True"}])
    """
    return defop(name, meta, cpu=cpu, has_out=True, tags=_REDUCTION)


all = _logical_reduction("all", np.all)  # noqa: A001
any = _logical_reduction("any", np.any)  # noqa: A001


def _count_nonzero_meta(input, dim=None):
    """Number of nonzero elements over ``dim`` (all dims by default).

    Args:
        input (Tensor): any dtype.
        dim (int or tuple of ints, optional): the dims to reduce; ``None`` or ``()`` reduce all.

    Returns:
        Tensor: int64 counts.

    Example:
        >>> import ember
        >>> ember.count_nonzero(ember.tensor([[0, 1, 2], [0, 0, 3]]), dim=1)
        tensor([2, 1])
    """
    _check_tensor("count_nonzero", input)
    data = input._data
    dims = _dims("count_nonzero", dim, data.ndim)
    return MetaArray(_out_shape(data.shape, dims, False), _I64)


def _count_nonzero_cpu(input, dim=None):
    data = input._data
    dims = _dims("count_nonzero", dim, data.ndim)
    if data.dtype in _BFLOAT16:
        data = data.astype(_F32)
    return _finish(np.count_nonzero(data, axis=_axis(data, dims)), _I64)


def _count_nonzero_decomp(input, dim=None):
    _count_nonzero_meta(input, dim)
    return sum(_op("ne")(input, 0), dim)


count_nonzero = defop("count_nonzero", _count_nonzero_meta, cpu=_count_nonzero_cpu, category=COMPOSITE,
                      decomposition=_count_nonzero_decomp, tags=_REDUCTION)
