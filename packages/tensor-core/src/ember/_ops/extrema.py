"""Extrema: amax, amin, max, min, aminmax, argmax and argmin."""

from __future__ import annotations

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import as_array as _as_array
from ._reduction_helpers import (
    _I64,
    _REDUCTION,
    _axis,
    _c_input,
    _c_reduce,
    _check_nonempty_dims,
    _check_tensor,
    _dims,
    _finish,
    _one_dim,
    _op,
    _out_shape,
    _return_type,
    _upcast,
)
from ._registry import COMPOSITE, defop
from ._shapes import wrap_dim

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["max", "min", "amax", "amin", "aminmax", "argmax", "argmin"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


def _check_not_complex(name, input):
    if input.dtype.is_complex:
        raise RuntimeError(f"{name}(): does not support complex input")


# -- amax, amin, max, min, aminmax, argmax, argmin -------------------------------------------------------


def _check_full_nonempty(name, input):
    if input._data.size == 0:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
            "with the 'dim' argument."
        )


def _extreme_meta(name):
    def meta(input, dim=(), keepdim=False):
        _check_tensor(name, input)
        _check_not_complex(name, input)
        data = input._data
        dims = _dims(name, dim, data.ndim)
        if dim is None or (isinstance(dim, (tuple, list)) and not dim):
            _check_full_nonempty(name, input)
        _check_nonempty_dims(name, data.shape, dims)
        return MetaArray(_out_shape(data.shape, dims, keepdim), data.dtype)

    meta.__name__ = name
    word = "largest" if name == "amax" else "smallest"
    meta.__doc__ = f"""The {word} element of ``input`` over ``dim`` (every dim by default); NaN propagates.

    Args:
        input (Tensor): a real or bool tensor.
        dim (int or tuple of ints): the dims to reduce; ``()`` (the default) reduces all.
        keepdim (bool): keep the reduced dims with size 1.

    Returns:
        Tensor: of ``input``'s dtype.

    Raises:
        RuntimeError: for complex inputs, or a full reduction of an empty tensor.
        IndexError: when a reduced dim has size 0.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([[1, 5], [4, 2]]), dim=1)
        tensor([{"5, 4" if name == "amax" else "1, 2"}])
    """
    return meta


# ember._C.extreme_dims kinds
_C_MAX, _C_MIN, _C_ABS_MAX, _C_ABS_MIN = 0, 1, 2, 3


def _c_extreme(data, dims, keepdim, kind):
    """amax (kind 0), amin (1), max |x| (2) or min |x| (3) over ``dims`` by ember._C, or None (numpy's turn)."""
    return _c_reduce(lambda x, first, last: _C.extreme_dims(x, first, last, False, kind), data, dims, keepdim)


def _c_arg_extreme(data, dim, keepdim, is_max):
    """(values, int64 indices) of the max/min along ``dim`` by ember._C (``dim`` None: of the flattened
    array, keepdim giving all-ones dims), or None (numpy's turn)."""
    if dim is None:
        flat = _c_input(data)
        if flat is None:
            return None
        result = _C.arg_extreme_dim(flat.reshape(-1), 0, False, is_max)
        if result is None:
            return None
        shape = (1,) * data.ndim if keepdim else ()
        return result[0].reshape(shape), result[1].reshape(shape)
    return _c_reduce(lambda x, first, last: _C.arg_extreme_dim(x, first, False, is_max), data, (dim,), keepdim)


def _extreme_cpu(np_fn, name):
    kind = _C_MAX if name == "amax" else _C_MIN

    def cpu(input, dim=(), keepdim=False):
        data = input._data
        dims = _dims(name, dim, data.ndim)
        result = _c_extreme(data, dims, keepdim, kind)
        if result is None:
            result = np_fn(_upcast(data), axis=_axis(data, dims), keepdims=keepdim)
        return _finish(result, data.dtype)

    return cpu


amax = defop("amax", _extreme_meta("amax"), cpu=_extreme_cpu(np.max, "amax"), has_out=True, tags=_REDUCTION)
amin = defop("amin", _extreme_meta("amin"), cpu=_extreme_cpu(np.min, "amin"), has_out=True, tags=_REDUCTION)


def _arg_extreme_meta(name):
    def meta(input, dim=None, keepdim=False):
        _check_tensor(name, input)
        if input.dtype is D.bool:
            raise RuntimeError(f"{name}(): does not support bool input")
        _check_not_complex(name, input)
        data = input._data
        if dim is None:
            if data.size == 0:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
            return MetaArray((1,) * data.ndim if keepdim else (), _I64)
        d = _one_dim(name, dim, data.ndim)
        _check_nonempty_dims(name, data.shape, (d,))
        return MetaArray(_out_shape(data.shape, (d,), keepdim), _I64)

    meta.__name__ = name
    word = "largest" if name == "argmax" else "smallest"
    meta.__doc__ = f"""Index of the {word} element over ``dim`` (of the flattened tensor if ``dim`` is None).

    The first occurrence wins among equal values; a NaN counts as the {word} value.

    Args:
        input (Tensor): a real (not bool) tensor.
        dim (int, optional): the dim to reduce.
        keepdim (bool): keep the reduced dim(s) with size 1.

    Returns:
        Tensor: int64 indices.

    Raises:
        RuntimeError: for bool or complex inputs.
        IndexError: for an empty reduction.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([[1, 5, 5], [4, 2, 2]]), dim=1)
        tensor([{"1, 0" if name == "argmax" else "0, 1"}])
    """
    return meta


def _arg_extreme_cpu(np_fn, name):
    def cpu(input, dim=None, keepdim=False):
        raw = input._data
        result = _c_arg_extreme(raw, None if dim is None else wrap_dim(dim, raw.ndim), keepdim, name == "argmax")
        if result is not None:
            return result[1]
        data = _upcast(raw)
        if dim is None or data.ndim == 0:
            result = _as_array(np_fn(data)).astype(_I64, copy=False)
            return result.reshape((1,) * data.ndim) if keepdim else result.reshape(())
        d = wrap_dim(dim, data.ndim)
        return _finish(np_fn(data, axis=d, keepdims=keepdim), _I64)

    return cpu


argmax = defop("argmax", _arg_extreme_meta("argmax"), cpu=_arg_extreme_cpu(np.argmax, "argmax"), has_out=True,
               tags=_REDUCTION)
argmin = defop("argmin", _arg_extreme_meta("argmin"), cpu=_arg_extreme_cpu(np.argmin, "argmin"), has_out=True,
               tags=_REDUCTION)

_max_type = _return_type("max", ["values", "indices"])
_min_type = _return_type("min", ["values", "indices"])


def _max_min_meta(name, pointwise):
    def meta(input, dim=None, keepdim=False, *, other=None):
        _check_tensor(name, input)
        if isinstance(dim, Tensor):
            if other is not None:
                raise TypeError(f"{name}(): got two values for 'other'")
            dim, other = None, dim
        if other is not None:
            if keepdim:
                raise TypeError(f"{name}(): 'keepdim' is not an argument of the elementwise form {name}(input, other)")
            return _op(pointwise).meta(input, other)
        _check_not_complex(name, input)
        data = input._data
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): 'keepdim' needs a 'dim'")
            _check_full_nonempty(name, input)
            return MetaArray((), data.dtype)
        d = _one_dim(name, dim, data.ndim)
        _check_nonempty_dims(name, data.shape, (d,))
        shape = _out_shape(data.shape, (d,), keepdim)
        return MetaArray(shape, data.dtype), MetaArray(shape, _I64)

    meta.__name__ = name
    word, arg = ("largest", "argmax") if name == "max" else ("smallest", "argmin")
    meta.__doc__ = f"""The {word} element: over everything, along a ``dim`` with its index, or elementwise.

    Three forms, as in PyTorch:

    * ``{name}(input)``: the {word} element (NaN if any element is NaN);
    * ``{name}(input, dim, keepdim=False)``: a namedtuple ``(values, indices)`` along ``dim``; the index of
      the first occurrence, as :func:`ember.{arg}`;
    * ``{name}(input, other)``: the elementwise {"maximum" if name == "max" else "minimum"} of two tensors.

    Args:
        input (Tensor): a real or bool tensor.
        dim (int, optional): the dim to reduce.
        keepdim (bool): keep the reduced dim with size 1.
        other (Tensor, optional): the second tensor of the elementwise form.

    Raises:
        RuntimeError: for complex inputs, or a full reduction of an empty tensor.
        IndexError: when the reduced dim has size 0.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1., 7.], [4., 2.]])
        >>> ember.{name}(x)
        tensor({"7." if name == "max" else "1."})
        >>> ember.{name}(x, dim=1).indices
        tensor([{"1, 0" if name == "max" else "0, 1"}])
    """
    return meta


def _max_min_cpu(name, pointwise, np_fn, np_arg):
    def cpu(input, dim=None, keepdim=False, *, other=None):
        if isinstance(dim, Tensor):
            dim, other = None, dim
        if other is not None:
            return _op(pointwise).kernels["cpu"](input, other)
        if dim is None:
            raw = input._data
            result = _c_extreme(raw, tuple(range(raw.ndim)), False, _C_MAX if name == "max" else _C_MIN)
            return _finish(np_fn(_upcast(raw)) if result is None else result, raw.dtype)
        data = _upcast(input._data)
        if data.ndim == 0:
            return _finish(data, input._data.dtype).copy(), np.zeros((), _I64)
        d = wrap_dim(dim, data.ndim)
        result = _c_arg_extreme(input._data, d, keepdim, name == "max")
        if result is not None:
            return _finish(result[0], input._data.dtype), result[1]
        values = _finish(np_fn(data, axis=d, keepdims=keepdim), input._data.dtype)
        return values, _finish(np_arg(data, axis=d, keepdims=keepdim), _I64)

    return cpu


def _max_min_decomp(name, pointwise, extreme, arg, meta):
    def decomposition(input, dim=None, keepdim=False, *, other=None):
        meta(input, dim, keepdim, other=other)
        if isinstance(dim, Tensor):
            dim, other = None, dim
        if other is not None:
            return _op(pointwise)(input, other)
        if dim is None:
            return extreme(input)
        source = input if input.dtype is not D.bool else input.to(D.uint8)
        return (_max_type if name == "max" else _min_type)(extreme(input, dim, keepdim), arg(source, dim, keepdim))

    return decomposition


def _max_min_op(name, pointwise, np_fn, np_arg, extreme, arg, return_type):
    meta = _max_min_meta(name, pointwise)
    return defop(
        name, meta, cpu=_max_min_cpu(name, pointwise, np_fn, np_arg), category=COMPOSITE,
        decomposition=_max_min_decomp(name, pointwise, extreme, arg, meta), has_out=True, tags=_REDUCTION,
        return_type=return_type,
    )


max = _max_min_op("max", "maximum", np.max, np.argmax, amax, argmax, _max_type)  # noqa: A001
min = _max_min_op("min", "minimum", np.min, np.argmin, amin, argmin, _min_type)  # noqa: A001

_aminmax_type = _return_type("aminmax", ["min", "max"])


def _aminmax_meta(input, *, dim=None, keepdim=False):
    """The smallest and the largest element over ``dim`` (all by default), computed together.

    Args:
        input (Tensor): a real or bool tensor.
        dim (int, optional): the dim to reduce.
        keepdim (bool): keep the reduced dim(s) with size 1.

    Returns:
        tuple[Tensor, Tensor]: a namedtuple ``(min, max)``.

    Raises:
        RuntimeError: for complex inputs, or a full reduction of an empty tensor.
        IndexError: when the reduced dim has size 0.

    Example:
        >>> import ember
        >>> ember.aminmax(ember.tensor([3, 1, 4]))
        aminmax(min=tensor(1), max=tensor(4))
    """
    _check_tensor("aminmax", input)
    _check_not_complex("aminmax", input)
    data = input._data
    if dim is None:
        if data.size == 0:
            raise RuntimeError(
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
            )
        dims = _dims("aminmax", None, data.ndim)
    else:
        dims = (_one_dim("aminmax", dim, data.ndim),)
        _check_nonempty_dims("aminmax", data.shape, dims)
    shape = _out_shape(data.shape, dims, keepdim)
    return MetaArray(shape, data.dtype), MetaArray(shape, data.dtype)


def _aminmax_cpu(input, *, dim=None, keepdim=False):
    data = input._data
    dims = _dims("aminmax", dim, data.ndim)
    axis = _axis(data, dims)
    up = _upcast(data)
    return (_finish(np.min(up, axis=axis, keepdims=keepdim), data.dtype),
            _finish(np.max(up, axis=axis, keepdims=keepdim), data.dtype))


def _aminmax_decomp(input, *, dim=None, keepdim=False):
    _aminmax_meta(input, dim=dim, keepdim=keepdim)
    dims = () if dim is None else dim
    return _aminmax_type(amin(input, dims, keepdim), amax(input, dims, keepdim))


aminmax = defop("aminmax", _aminmax_meta, cpu=_aminmax_cpu, category=COMPOSITE, decomposition=_aminmax_decomp,
                has_out=True, tags=_REDUCTION, return_type=_aminmax_type)
