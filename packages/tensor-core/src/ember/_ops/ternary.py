"""Pointwise ops of three operands: ``clamp`` (bounds), ``lerp`` (an end and a weight),
``addcmul``/``addcdiv`` (two factors and a scale) and ``where`` (a condition).
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from . import _cpu_pointwise
from ._array_module import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._pointwise_helpers import (
    FLOATING_AND_COMPLEX,
    REAL_NO_BOOL,
    _check_operand,
    _torch_name,
    binary_dtype,
    check_tensor,
    compute_dtype,
    make_inplace,
    not_implemented,
    number_keeps_dtype,
    operand,
)
from ._registry import defop, registry
from ._shapes import broadcast_shapes, shape_of

__all__ = []

_NUMBER = (bool, int, float, complex, np.number, np.bool_)
_FIRST_OP = len(registry)  # the ops registered from here on are this module's (see METHODS at the end)


# -- clamp, lerp, addcmul, addcdiv, where ---------------------------------------------------


def _clamp_meta(input, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    """Elementwise clamp of ``input`` into ``[min, max]``: ``minimum(maximum(input, min), max)``.

    Either bound may be a number, a tensor (broadcasting) or None (no bound on
    that side), but not both None. NaN in ``input`` or a bound gives NaN. When
    ``min > max`` every element becomes ``max``. The result dtype is the
    promotion of ``input`` and the bounds.

    Args:
        input (Tensor): the values.
        min (Number or Tensor, optional): the lower bound.
        max (Number or Tensor, optional): the upper bound.

    Returns:
        Tensor: the clamped values.

    Raises:
        RuntimeError: if both bounds are None.
        NotImplementedError: for complex values, or bool values with two bounds or a number bound.

    Example:
        >>> import ember
        >>> ember.clamp(ember.tensor([-2., 0.5, 3.]), min=0., max=1.)
        tensor([0.0000, 0.5000, 1.0000])
        >>> ember.clamp(ember.tensor([1, 5]), max=ember.tensor([2, 3]))
        tensor([1, 3])
    """
    check_tensor("clamp", "input", 1, input)
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
    dtype = input.dtype
    if number_keeps_dtype(dtype, min) and number_keeps_dtype(dtype, max) and dtype in REAL_NO_BOOL:
        return MetaArray(input._data.shape, input._data.dtype)  # fast path: number bounds, no promotion
    if min is not None:
        _check_operand("clamp", "min", min)
    if max is not None:
        _check_operand("clamp", "max", max)
    dtype = D.result_type_of((input, min, max))
    if dtype.is_complex:
        if input.dtype.is_floating_point and not isinstance(min, Tensor) and not isinstance(max, Tensor):
            raise RuntimeError(f"value cannot be converted to type {input.dtype.name} without overflow")
        raise NotImplementedError("clamp is not supported for complex types")
    if dtype is D.bool:  # PyTorch clamps bool tensors by one bool tensor bound only
        if (min is not None and max is not None) or not isinstance(max if min is None else min, Tensor):
            raise not_implemented("clamp", dtype)
    return MetaArray(broadcast_shapes(input._data.shape, shape_of(min), shape_of(max)), dtype.numpy_dtype)


def _clamp_cpu(input, min=None, max=None):  # noqa: A002
    dtype = input.dtype
    if number_keeps_dtype(dtype, min) and number_keeps_dtype(dtype, max):
        np_dtype = input._data.dtype
    else:
        np_dtype = D.result_type_of((input, min, max)).numpy_dtype
    value = _cpu_pointwise.clamp_array(input, min, max, np_dtype)  # large, no promotion: in C++
    if value is not None:
        return value
    work = compute_dtype(np_dtype)
    low = None if min is None else operand(min, work)
    high = None if max is None else operand(max, work)
    x = operand(input, work)
    if type(x) is not np.ndarray:
        # GPU arrays: CuPy's clip takes no None bound and ignores a NaN bound, so spell out numpy's clip
        if low is not None:
            x = np.maximum(x, low)
        if high is not None:
            x = np.minimum(x, high)
        return x.astype(np_dtype, copy=False)
    # numpy's clip is minimum(maximum(x, low), high): NaN anywhere gives NaN, and low > high gives high
    return _as_array(np.clip(x, low, high)).astype(np_dtype, copy=False)


clamp = defop("clamp", _clamp_meta, cpu=_clamp_cpu, has_out=True, tags=("pointwise",))
clamp.result_dtype = lambda input, min=None, max=None: D.result_type_of((input, min, max))
clamp.cpu_into = _cpu_pointwise.clamp_into
make_inplace(clamp)


def _lerp_meta(input, end, weight):
    """Linear interpolation ``input + weight * (end - input)``, elementwise and broadcasting.

    Args:
        input (Tensor): the start points (floating or complex).
        end (Tensor): the end points, of the same dtype as ``input``.
        weight (float or Tensor): the weights; a tensor with dimensions must have
            ``input``'s dtype.

    Returns:
        Tensor: of ``input``'s dtype and the broadcast shape.

    Raises:
        RuntimeError: for mismatched dtypes, or a complex weight with real points.
        NotImplementedError: for integer or bool points.

    Example:
        >>> import ember
        >>> ember.lerp(ember.tensor([0., 10.]), ember.tensor([10., 20.]), 0.25)
        tensor([ 2.5000, 12.5000])
    """
    check_tensor("lerp", "input", 1, input)
    check_tensor("lerp", "end", 2, end)
    if not isinstance(weight, Tensor):
        _check_operand("lerp", "weight", weight)
    dtype = input.dtype
    if end.dtype is not dtype:
        raise RuntimeError(f"expected dtype {dtype.name} for `end` but got dtype {end.dtype.name}")
    if isinstance(weight, Tensor) and weight._data.ndim and weight.dtype is not dtype:
        raise RuntimeError(f"expected dtype {dtype.name} for `weight` but got dtype {weight.dtype.name}")
    if dtype not in FLOATING_AND_COMPLEX:
        raise not_implemented("lerp_kernel_scalar" if not isinstance(weight, Tensor) else "lerp_kernel_tensor", dtype)
    if not dtype.is_complex and (
        isinstance(weight, (complex, np.complexfloating)) or (isinstance(weight, Tensor) and weight.dtype.is_complex)
    ):
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")
    return MetaArray(broadcast_shapes(input._data.shape, end._data.shape, shape_of(weight)), input._data.dtype)


def _lerp_cpu(input, end, weight):
    np_dtype = input._data.dtype
    work = compute_dtype(np_dtype)
    start, stop, w = operand(input, work), operand(end, work), operand(weight, work)
    with np.errstate(all="ignore"):
        diff = _as_array(np.subtract(stop, start))  # of the broadcast shape of start and stop
        # two formulas, each exact at its end point (weight 0 or 1)
        if not isinstance(weight, Tensor):
            if np.abs(w) < 0.5:
                diff *= w
                value = np.add(diff, start, out=diff)
            else:
                diff *= 1 - w
                value = np.subtract(stop, diff, out=diff)
        else:
            value = np.where(np.abs(w) < 0.5, start + w * diff, stop - diff * (1 - w))
    return _as_array(value).astype(np_dtype, copy=False)


lerp = defop("lerp", _lerp_meta, cpu=_lerp_cpu, has_out=True, tags=("pointwise",))
make_inplace(lerp)


def _addc_dtype(name, input, tensor1, tensor2, value):
    check_tensor(name, "input", 1, input)
    check_tensor(name, "tensor1", 2, tensor1)
    check_tensor(name, "tensor2", 3, tensor2)
    if not isinstance(value, _NUMBER):
        raise TypeError(f"{name}(): argument 'value' must be Number, not {type(value).__name__}")
    return D.result_type_of((input, tensor1, tensor2))


def _check_addc_value(value, dtype):
    if isinstance(value, (complex, np.complexfloating)) and not dtype.is_complex:
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")


def _addc_value(value, np_dtype):
    """``value`` converted like PyTorch: truncated to an integer for integer results."""
    if np_dtype.kind in "iu":
        return operand(int(value), np_dtype)
    return operand(value, np_dtype)


def _addcmul_meta(input, tensor1, tensor2, *, value=1):
    """Elementwise ``input + value * tensor1 * tensor2``, broadcasting, with PyTorch's type promotion.

    Args:
        input (Tensor): the tensor added to.
        tensor1 (Tensor): the first factor.
        tensor2 (Tensor): the second factor.
        value (Number): the multiplier (truncated to an integer for integer results).

    Returns:
        Tensor: of the promoted dtype and broadcast shape.

    Raises:
        NotImplementedError: when the promoted dtype is bool.
        RuntimeError: for a complex ``value`` with a real result.

    Example:
        >>> import ember
        >>> ember.addcmul(ember.tensor([1., 1.]), ember.tensor([2., 3.]), ember.tensor([4., 5.]), value=0.5)
        tensor([5.0000, 8.5000])
    """
    dtype = _addc_dtype("addcmul", input, tensor1, tensor2, value)
    if dtype is D.bool:
        raise not_implemented("addcmul", dtype)
    _check_addc_value(value, dtype)
    return MetaArray(broadcast_shapes(input._data.shape, tensor1._data.shape, tensor2._data.shape), dtype.numpy_dtype)


def _addcmul_cpu(input, tensor1, tensor2, *, value=1):
    np_dtype = D.result_type_of((input, tensor1, tensor2)).numpy_dtype
    work = compute_dtype(np_dtype)
    with np.errstate(all="ignore"):
        product = _addc_value(value, work) * operand(tensor1, work) * operand(tensor2, work)
        return _as_array(operand(input, work) + product).astype(np_dtype, copy=False)


addcmul = defop("addcmul", _addcmul_meta, cpu=_addcmul_cpu, has_out=True, tags=("pointwise",))
addcmul.result_dtype = lambda input, tensor1, tensor2, *, value=1: D.result_type_of((input, tensor1, tensor2))
make_inplace(addcmul)


def _addcdiv_meta(input, tensor1, tensor2, *, value=1):
    """Elementwise ``input + value * tensor1 / tensor2``, broadcasting, with PyTorch's type promotion.

    Args:
        input (Tensor): the tensor added to.
        tensor1 (Tensor): the numerators.
        tensor2 (Tensor): the denominators; ``tensor1`` and ``tensor2`` may not both be integer (or bool).
        value (Number): the multiplier.

    Returns:
        Tensor: of the promoted dtype and broadcast shape.

    Raises:
        RuntimeError: when both ``tensor1`` and ``tensor2`` are integer or bool tensors, or for a
            complex ``value`` with a real result.

    Example:
        >>> import ember
        >>> ember.addcdiv(ember.tensor([1., 1.]), ember.tensor([2., 3.]), ember.tensor([4., 6.]), value=2)
        tensor([2., 2.])
    """
    dtype = _addc_dtype("addcdiv", input, tensor1, tensor2, value)
    if tensor1.dtype.category < D.FLOATING and tensor2.dtype.category < D.FLOATING:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a "
            "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
            "(input + value * ember.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes."
        )
    _check_addc_value(value, dtype)
    return MetaArray(broadcast_shapes(input._data.shape, tensor1._data.shape, tensor2._data.shape), dtype.numpy_dtype)


def _addcdiv_cpu(input, tensor1, tensor2, *, value=1):
    np_dtype = D.result_type_of((input, tensor1, tensor2)).numpy_dtype
    work = compute_dtype(np_dtype)
    with np.errstate(all="ignore"):
        quotient = _addc_value(value, work) * (operand(tensor1, work) / operand(tensor2, work))
        return _as_array(operand(input, work) + quotient).astype(np_dtype, copy=False)


addcdiv = defop("addcdiv", _addcdiv_meta, cpu=_addcdiv_cpu, has_out=True, tags=("pointwise",))
make_inplace(addcdiv)


def _where_meta(condition, input, other):
    """Elementwise choice: ``input`` where ``condition`` is True, else ``other``; all three broadcast.

    Args:
        condition (Tensor): a bool (or uint8) tensor.
        input (Tensor or Number): the values where ``condition`` holds.
        other (Tensor or Number): the values elsewhere.

    Returns:
        Tensor: of the promoted dtype of ``input`` and ``other``.

    Raises:
        RuntimeError: if ``condition`` is not a bool tensor, or the shapes don't broadcast.

    Example:
        >>> import ember
        >>> x = ember.tensor([-1.0, 2.0, -3.0])
        >>> ember.where(x > 0, x, 0.0)
        tensor([0., 2., 0.])
    """
    check_tensor("where", "condition", 1, condition)
    if condition.dtype is not D.bool and condition.dtype is not D.uint8:
        raise RuntimeError(
            "where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{_torch_name(condition.dtype)}"
        )
    _check_operand("where", "input", input)
    _check_operand("where", "other", other)
    dtype = binary_dtype(input, other)
    return MetaArray(broadcast_shapes(condition._data.shape, shape_of(input), shape_of(other)), dtype.numpy_dtype)


def _where_cpu(condition, input, other):
    np_dtype = binary_dtype(input, other).numpy_dtype
    if _cpu_pointwise.large(condition, input, other):  # operands of the result's dtype (or numbers): in C++
        shape = broadcast_shapes(condition._data.shape, shape_of(input), shape_of(other))
        value = _cpu_pointwise.where_array(condition, input, other, np_dtype, shape)
        if value is not None:
            return value
    mask = condition._data
    if mask.dtype != np.bool_:
        mask = mask.astype(np.bool_)
    return _as_array(np.where(mask, operand(input, np_dtype), operand(other, np_dtype))).astype(np_dtype, copy=False)


where = defop("where", _where_meta, cpu=_where_cpu, has_out=True, tags=("pointwise",))
where.cpu_into = _cpu_pointwise.where_into


def _where_method(self, condition, other):
    """``self.where(condition, other)`` is ``ember.where(condition, self, other)``."""
    return where(condition, self, other)


#: ``where``'s method takes ``self`` as the second argument: installed with the operators.
OPERATORS = {"where": _where_method}


#: Ops of this module that are also Tensor methods (see ember._tensor_methods); where's is in OPERATORS.
METHODS = [name for name in list(registry)[_FIRST_OP:] if name != "where"]
