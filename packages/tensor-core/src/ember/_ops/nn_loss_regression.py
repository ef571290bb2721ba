"""ember.nn.functional: the elementwise regression losses.

``mse_loss``, ``l1_loss``, ``smooth_l1_loss`` and ``huber_loss``.

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules and :mod:`ember._ops._loss_common`
for the checks shared by the loss modules.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._loss_common import _check_loss_tensors
from ._nn_common import (
    _E,
    _NN_ONLY,
    _check_optional_tensor,
    _common_dtype,
    _composite,
    _compute,
    _compute_dtype,
    _kernel_reduction,
    _loss_shape,
    _not_implemented,
    _number,
    _reduce,
    _reduce_np,
    _reduction,
    _size,
)
from ._pointwise_helpers import _torch_name
from ._shapes import broadcast_shapes

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


def _warn_target_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({_size(target.shape)}) that is different to the input size ({_size(input.shape)}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=5,
        )


def _check_weight_shape(input, weight):
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")


def _regression_meta(op, kernel, input, target, size_average, reduce, reduction, weight=None, *, float_only=True,
                     real_result=False):
    """Checks and result of the elementwise regression losses (mse, l1, smooth_l1, huber)."""
    _check_loss_tensors(op, ("input", input), ("target", target))
    _check_optional_tensor(op, "weight", weight, 6)
    reduction = _reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    _check_weight_shape(input, weight)
    dtype = _common_dtype(input, target)
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    if float_only and dtype.category != D.FLOATING:
        raise _not_implemented(kernel, dtype)
    if real_result:
        dtype = dtype.to_real()
        if dtype.category < D.FLOATING and reduction == "mean":
            raise RuntimeError(
                "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
                f"Got: {_torch_name(dtype)}"
            )
    if weight is not None:
        dtype = D.promote_types(dtype, weight.dtype)
    return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype), reduction, dtype


def _weighted_reduce_np(loss, weight, reduction, out_dtype, *, divide_by_weight):
    if weight is not None:
        loss = loss * _compute(weight._data)
    if weight is not None and reduction == "mean" and divide_by_weight:
        with np.errstate(all="ignore"):
            return np.asarray(loss.sum() / _compute(weight._data).sum()).astype(out_dtype)
    return _reduce_np(loss, reduction, out_dtype)


def _weighted_reduce(loss, weight, reduction, *, divide_by_weight):
    if weight is not None:
        loss = loss * weight
        if reduction == "mean" and divide_by_weight:
            return _E.sum(loss) / _E.sum(weight)
    return _reduce(loss, reduction)


def _mse_loss_meta(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error: ``(input - target) ** 2``, reduced.

    Args:
        input (Tensor): floating point.
        target (Tensor): broadcastable with ``input`` (a different size warns).
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        weight (Tensor, optional): per-element weights, shaped like ``input``; ``'mean'`` then divides
            by their sum.

    Returns:
        Tensor: the loss (0-dim unless ``reduction='none'``).

    Raises:
        ValueError: for an unknown reduction or a weight of another shape.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.mse_loss(ember.tensor([1.0, 2.0]), ember.tensor([0.0, 0.0]))
        tensor(2.5000)
    """
    return _regression_meta("mse_loss", "mse_cpu", input, target, size_average, reduce, reduction, weight)[0]


def _mse_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _, reduction, dtype = _regression_meta("mse_loss", "mse_cpu", input, target, size_average, reduce, reduction,
                                           weight)
    work = dtype.numpy_dtype if weight is None else _common_dtype(input, target).numpy_dtype
    d = np.subtract(_compute(input._data, work), _compute(target._data, work))
    return _weighted_reduce_np(d * d, weight, reduction, dtype.numpy_dtype, divide_by_weight=True)


def _mse_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    return _weighted_reduce(d * d, weight, reduction, divide_by_weight=True)


mse_loss = _composite("mse_loss", _mse_loss_meta, cpu=_mse_loss_cpu, decomposition=_mse_loss_decomp, tags=_NN_ONLY)


def _l1_loss_meta(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error: ``|input - target|``, reduced (complex inputs give a real loss).

    Args:
        input (Tensor): any dtype but bool; integer inputs can't be averaged.
        target (Tensor): broadcastable with ``input`` (a different size warns).
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        weight (Tensor, optional): per-element weights, shaped like ``input``; ``'mean'`` then divides
            by their sum.

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for an unknown reduction or a weight of another shape.
        RuntimeError: for bool inputs, or integer inputs with ``'mean'``.

    Example:
        >>> import ember
        >>> ember.nn.functional.l1_loss(ember.tensor([1.0, -2.0]), ember.tensor([0.0, 0.0]))
        tensor(1.5000)
    """
    return _regression_meta("l1_loss", "l1_cpu", input, target, size_average, reduce, reduction, weight,
                            float_only=False, real_result=True)[0]


def _l1_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _, reduction, dtype = _regression_meta("l1_loss", "l1_cpu", input, target, size_average, reduce, reduction,
                                           weight, float_only=False, real_result=True)
    work = _compute_dtype(_common_dtype(input, target).numpy_dtype)
    with np.errstate(all="ignore"):
        loss = np.abs(np.subtract(input._data.astype(work), target._data.astype(work)))
    return _weighted_reduce_np(loss, weight, reduction, dtype.numpy_dtype, divide_by_weight=True)


def _l1_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    return _weighted_reduce(_E.abs(input - target), weight, reduction, divide_by_weight=True)


l1_loss = _composite("l1_loss", _l1_loss_meta, cpu=_l1_loss_cpu, decomposition=_l1_loss_decomp, tags=_NN_ONLY)


def _smooth_l1_loss_meta(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1 loss (Girshick, "Fast R-CNN", 2015): quadratic below ``beta``, linear above.

    ``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``, with ``d = input - target``;
    ``beta = 0`` is the L1 loss.

    Args:
        input (Tensor): floating point.
        target (Tensor): broadcastable with ``input`` (a different size warns).
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        beta (float): the threshold, ``>= 0``.

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for a negative ``beta``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.smooth_l1_loss(ember.tensor([0.5, 3.0]), ember.zeros(2), reduction="none")
        tensor([0.1250, 2.5000])
    """
    if _number("smooth_l1_loss", "beta", beta, 6) < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _regression_meta("smooth_l1_loss", "smooth_l1_cpu", input, target, size_average, reduce, reduction)[0]


def _smooth_l1_np(d, beta):
    a = np.abs(d)
    if beta == 0:
        return a
    with np.errstate(all="ignore"):
        return np.where(a < beta, (d * d) * np.asarray(0.5 / beta, d.dtype), a - np.asarray(0.5 * beta, d.dtype))


def _smooth_l1_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _, reduction, dtype = _regression_meta("smooth_l1_loss", "smooth_l1_cpu", input, target, size_average, reduce,
                                           reduction)
    work = dtype.numpy_dtype
    d = np.subtract(_compute(input._data, work), _compute(target._data, work))
    return _reduce_np(_smooth_l1_np(d, beta), reduction, work)


def _smooth_l1_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    a = _E.abs(d)
    loss = a if beta == 0 else _E.where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta)
    return _reduce(loss, reduction)


smooth_l1_loss = _composite(
    "smooth_l1_loss", _smooth_l1_loss_meta, cpu=_smooth_l1_loss_cpu, decomposition=_smooth_l1_loss_decomp,
    tags=_NN_ONLY,
)


def _huber_loss_meta(input, target, reduction="mean", delta=1.0, weight=None):
    """Huber loss (Huber, 1964): ``0.5 * d**2`` where ``|d| <= delta``, else ``delta * (|d| - 0.5 * delta)``.

    Args:
        input (Tensor): floating point.
        target (Tensor): broadcastable with ``input`` (a different size warns).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        delta (float): the threshold, ``> 0``.
        weight (Tensor, optional): per-element weights, shaped like ``input`` (``'mean'`` averages the
            weighted losses).

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for an unknown reduction or a weight of another shape.
        RuntimeError: for ``delta <= 0``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.huber_loss(ember.tensor([0.5, 3.0]), ember.zeros(2), reduction="none")
        tensor([0.1250, 2.5000])
    """
    if _number("huber_loss", "delta", delta, 4) <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _regression_meta("huber_loss", "huber_cpu", input, target, None, None, reduction, weight)[0]


def _huber_loss_cpu(input, target, reduction="mean", delta=1.0, weight=None):
    _, reduction, dtype = _regression_meta("huber_loss", "huber_cpu", input, target, None, None, reduction, weight)
    work = _common_dtype(input, target).numpy_dtype
    d = np.subtract(_compute(input._data, work), _compute(target._data, work))
    a = np.abs(d)
    with np.errstate(all="ignore"):
        loss = np.where(a <= delta, (d * d) * np.asarray(0.5, d.dtype), (a - np.asarray(0.5 * delta, d.dtype))
                        * np.asarray(delta, d.dtype))
    return _weighted_reduce_np(loss, weight, reduction, dtype.numpy_dtype, divide_by_weight=False)


def _huber_loss_decomp(input, target, reduction="mean", delta=1.0, weight=None):
    reduction = _reduction(None, None, reduction)
    d = input - target
    a = _E.abs(d)
    loss = _E.where(a <= delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    return _weighted_reduce(loss, weight, reduction, divide_by_weight=False)


huber_loss = _composite(
    "huber_loss", _huber_loss_meta, cpu=_huber_loss_cpu, decomposition=_huber_loss_decomp, tags=_NN_ONLY
)
