"""Variance and standard deviation: var, std, var_mean and std_mean."""

from __future__ import annotations

import builtins

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._reduction_helpers import (
    _REDUCTION,
    _axis,
    _c_reduce,
    _check_tensor,
    _count,
    _dims,
    _finish,
    _op,
    _out_shape,
    _upcast,
)
from ._registry import COMPOSITE, defop
from .sums import mean

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["std", "var"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- var, std, var_mean, std_mean ----------------------------------------------------------------------


def _var_args(name, input, dim, unbiased, correction):
    """Resolve the overloads ``(input, unbiased)``, ``(input, dim, unbiased)`` and ``correction=``."""
    _check_tensor(name, input)
    if isinstance(dim, bool):  # var(input, unbiased)
        if unbiased is not None:
            raise TypeError(f"{name}(): got two values for 'unbiased'")
        unbiased, dim = dim, None
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}(): pass either 'unbiased' or 'correction', not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    elif not isinstance(correction, (int, float)) or isinstance(correction, bool):
        raise TypeError(f"{name}(): argument 'correction' must be a number, not {type(correction).__name__}")
    if input.dtype.category < D.FLOATING:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    return _dims(name, dim, input._data.ndim), correction


def _var_meta(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim``: ``sum(|x - mean|^2) / max(0, N - correction)``.

    Args:
        input (Tensor): floating or complex.
        dim (int or tuple of ints, optional): the dims to reduce; all by default.
            ``var(input, False)`` is the old ``unbiased`` overload.
        unbiased (bool, optional): ``False`` means ``correction=0``; the default is ``correction=1``.
        keepdim (bool): keep the reduced dims with size 1.
        correction (int or float, optional): Bessel's correction (1 by default).

    Returns:
        Tensor: a real tensor (complex inputs give their real dtype); NaN where ``N <= correction``.

    Raises:
        RuntimeError: for integer or bool inputs.
        TypeError: if both ``unbiased`` and ``correction`` are given.

    Example:
        >>> import ember
        >>> ember.var(ember.tensor([1., 2., 3., 4.]))
        tensor(1.6667)
        >>> ember.var(ember.tensor([1., 2., 3., 4.]), correction=0)
        tensor(1.2500)
    """
    dims, _ = _var_args("var", input, dim, unbiased, correction)
    data = input._data
    return MetaArray(_out_shape(data.shape, dims, keepdim), input.dtype.to_real().numpy_dtype)


def _moments(input, dims, keepdim, correction):
    """(variance, mean) over ``dims`` in the computation dtype.

    Large real inputs go to ember._C.var_dims (two passes in float64, see csrc/reduce.cpp); the rest to
    numpy (mean, then the mean of squared deviations).
    """
    # (_c_reduce declines small, empty and complex inputs)
    result = _c_reduce(lambda x, first, last: _C.var_dims(x, first, last, float(correction), False),
                       input._data, dims, keepdim)
    if result is not None:
        return result
    data = _upcast(input._data)
    axis = _axis(data, dims)
    n = _count(data.shape, dims)
    with np.errstate(all="ignore"):
        mean = np.true_divide(np.sum(data, axis=axis, keepdims=True), n, dtype=data.dtype)
        dev = data - mean
        sq = dev.real * dev.real + dev.imag * dev.imag if dev.dtype.kind == "c" else dev * dev
        var = np.true_divide(np.sum(sq, axis=axis, keepdims=keepdim), builtins.max(0, n - correction), dtype=sq.dtype)
    if not keepdim:
        mean = mean.reshape(var.shape)
    return var, mean


def _var_cpu(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dims, correction = _var_args("var", input, dim, unbiased, correction)
    var, _ = _moments(input, dims, keepdim, correction)
    return _finish(var, input.dtype.to_real().numpy_dtype)


var = defop("var", _var_meta, cpu=_var_cpu, has_out=True, tags=_REDUCTION)


def _std_meta(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over ``dim``: the square root of :func:`ember.var` (same arguments).

    Example:
        >>> import ember
        >>> ember.std(ember.tensor([[1., 3.], [2., 2.]]), dim=1)
        tensor([1.4142, 0.0000])
    """
    dims, _ = _var_args("std", input, dim, unbiased, correction)
    data = input._data
    return MetaArray(_out_shape(data.shape, dims, keepdim), input.dtype.to_real().numpy_dtype)


def _std_cpu(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dims, correction = _var_args("std", input, dim, unbiased, correction)
    var, _ = _moments(input, dims, keepdim, correction)
    return _finish(np.sqrt(var), input.dtype.to_real().numpy_dtype)


def _std_decomp(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _std_meta(input, dim, unbiased, keepdim, correction=correction)
    return _op("sqrt")(var(input, dim, unbiased, keepdim, correction=correction))


std = defop("std", _std_meta, cpu=_std_cpu, category=COMPOSITE, decomposition=_std_decomp, has_out=True,
            tags=_REDUCTION)


def _moments_op(name, take_sqrt):
    def meta(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        dims, _ = _var_args(name, input, dim, unbiased, correction)
        shape = _out_shape(input._data.shape, dims, keepdim)
        return MetaArray(shape, input.dtype.to_real().numpy_dtype), MetaArray(shape, input._data.dtype)

    def cpu(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        dims, correction = _var_args(name, input, dim, unbiased, correction)
        var_, mean_ = _moments(input, dims, keepdim, correction)
        if take_sqrt:
            var_ = np.sqrt(var_)
        return _finish(var_, input.dtype.to_real().numpy_dtype), _finish(mean_, input._data.dtype)

    def decomposition(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        meta(input, dim, unbiased, keepdim, correction=correction)
        spread = (std if take_sqrt else var)(input, dim, unbiased, keepdim, correction=correction)
        if isinstance(dim, bool):
            dim = None
        return spread, mean(input, dim, keepdim)

    what = "standard deviation" if take_sqrt else "variance"
    meta.__name__ = name
    meta.__doc__ = f"""The {what} and the mean of ``input`` over ``dim``, computed together.

    Takes the arguments of :func:`ember.{"std" if take_sqrt else "var"}`.

    Returns:
        tuple[Tensor, Tensor]: ``({"std" if take_sqrt else "var"}, mean)``; the first is real, the mean keeps
        ``input``'s dtype.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1., 2., 3., 4.]), correction=0)
        (tensor({"1.1180" if take_sqrt else "1.2500"}), tensor(2.5000))
    """
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_REDUCTION)


var_mean = _moments_op("var_mean", take_sqrt=False)
std_mean = _moments_op("std_mean", take_sqrt=True)
