"""ember.nn.functional: loss functions (regression, classification, margin, ranking and CTC losses).

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules.
"""

from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from .. import _C
from .. import _dtype as D
from .._grad_mode import no_grad
from .._meta import MetaArray
from .._tensor import Tensor
from ._float_errors import quiet
from ._nn_common import (
    _C_FLOATS,
    _E,
    _NN,
    _NN_ONLY,
    _REDUCTIONS,
    _check_floating,
    _check_negatable,
    _check_optional_tensor,
    _check_tensor,
    _common_dtype,
    _composite,
    _compute,
    _compute_dtype,
    _contiguous,
    _difference,
    _distance_dtype,
    _float_result,
    _fmt,
    _kernel_reduction,
    _legacy_reduction,
    _logsigmoid_np,
    _logsigmoid_values,
    _loss_shape,
    _matmul_np,
    _not_implemented,
    _number,
    _pairwise_distance_meta,
    _pairwise_distance_np,
    _reduce,
    _reduce_np,
    _reduction,
    _size,
    _wrapping_diff,
)
from ._pointwise_helpers import _torch_name
from ._shapes import broadcast_shapes

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# =====================================================================================================
# Losses
# =====================================================================================================


def _warn_target_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({_size(target.shape)}) that is different to the input size ({_size(input.shape)}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=5,
        )


def _check_loss_tensors(op, *named):
    for position, (name, value) in enumerate(named, 1):
        _check_tensor(op, name, value, position)


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


def _binary_cross_entropy_meta(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Binary cross entropy of probabilities: ``-w * (t * log(x) + (1 - t) * log(1 - x))``.

    Each log is clamped to ``>= -100`` so that a probability of exactly 0 or 1 gives a finite loss.

    Args:
        input (Tensor): probabilities in [0, 1], floating point.
        target (Tensor): same shape and dtype as ``input``.
        weight (Tensor, optional): broadcastable to ``input``'s shape.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss, of ``input``'s dtype.

    Raises:
        ValueError: if ``target``'s shape differs from ``input``'s, or for an unknown reduction.
        RuntimeError: for another target dtype, a weight that does not broadcast, or input values outside [0, 1].
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.binary_cross_entropy(ember.tensor([0.5, 0.9]), ember.tensor([1.0, 1.0]))
        tensor(0.3993)
    """
    _check_loss_tensors("binary_cross_entropy", ("input", input), ("target", target))
    _check_optional_tensor("binary_cross_entropy", "weight", weight, 3)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({_size(target.shape)}) that is different to the input size ({_size(input.shape)}) "
            "is deprecated. Please ensure they have the same size."
        )
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {_torch_name(target.dtype)} but expected {_torch_name(input.dtype)}")
    if weight is not None:
        source, targetshape = tuple(weight.shape), tuple(input.shape)
        if len(source) > len(targetshape) or broadcast_shapes(source, targetshape) != targetshape:
            raise RuntimeError(
                f"Attempting to broadcast a dimension of length {source[-1] if source else 0} at -1! Mismatching "
                f"argument at index 1 had {_size(source)}; but expected shape should be broadcastable to "
                f"{_fmt(targetshape)}"
            )
    _check_floating("binary_cross_entropy", input)
    return MetaArray(_loss_shape(input.shape, reduction), input._data.dtype)


def _binary_cross_entropy_cpu(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    x, t = _compute(input._data), _compute(target._data)
    if x.size and not ((x >= 0) & (x <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(all="ignore"):
        log_x = np.maximum(np.log(x), np.asarray(-100, x.dtype))
        log_1mx = np.maximum(np.log1p(-x), np.asarray(-100, x.dtype))
        loss = -(t * log_x + (1 - t) * log_1mx)
    if weight is not None:
        loss = loss * _compute(weight._data).astype(loss.dtype, copy=False)
    return _reduce_np(loss, reduction, input._data.dtype)


def _any_off_cpu(flags):
    """Whether bool tensor ``flags`` (not on CPU) has a True element: the value checks of the fused CPU kernels,
    for the decompositions other devices run. Reading the answer waits for the device: these are
    data-dependent errors, as the index checks of ``gather`` (PyTorch's CUDA kernels assert on the device).
    On CPU it is False without a look: the fused kernels check there, and the decompositions stay as fast."""
    return flags._device.type != "cpu" and bool(_E.any(flags))


def _binary_cross_entropy_decomp(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    if input._device.type != "cpu" and _any_off_cpu(_E.logical_not((input >= 0) & (input <= 1))):
        raise RuntimeError("all elements of input should be between 0 and 1")
    log_x = _E.clamp(_E.log(input), min=-100)
    log_1mx = _E.clamp(_E.log1p(-input), min=-100)
    loss = -(target * log_x + (1 - target) * log_1mx)
    if weight is not None:
        loss = loss * weight.to(loss.dtype)
    return _reduce(loss, reduction)


binary_cross_entropy = _composite(
    "binary_cross_entropy", _binary_cross_entropy_meta, cpu=_binary_cross_entropy_cpu,
    decomposition=_binary_cross_entropy_decomp, tags=_NN_ONLY,
)


def _bce_logits_meta(input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
    """Binary cross entropy of logits, computed stably:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * log(1 + exp(-x))``, times ``weight``.

    Args:
        input (Tensor): logits, floating point.
        target (Tensor): probabilities, same shape as ``input``, floating point.
        weight (Tensor, optional): broadcastable to ``input``.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        pos_weight (Tensor, optional): weight of the positive class, broadcastable to ``input``
            (usually one per class, along the last dim).

    Returns:
        Tensor: the loss, of the promoted dtype of ``input`` and ``target``.

    Raises:
        ValueError: if ``target``'s shape differs from ``input``'s, or for an unknown reduction.
        RuntimeError: for a non-floating target or weights that don't broadcast.

    Example:
        >>> import ember
        >>> ember.binary_cross_entropy_with_logits(ember.tensor([0.0, 2.0]), ember.tensor([1.0, 1.0]))
        tensor(0.4100)
    """
    _check_loss_tensors("binary_cross_entropy_with_logits", ("input", input), ("target", target))
    _check_optional_tensor("binary_cross_entropy_with_logits", "weight", weight, 3)
    _check_optional_tensor("binary_cross_entropy_with_logits", "pos_weight", pos_weight, 7)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({_size(target.shape)}) must be the same as input size ({_size(input.shape)})")
    dtype = _common_dtype(input, target)
    if target.dtype.category != D.FLOATING:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_torch_name(target.dtype)}")
    shape = tuple(input.shape)
    for w in (pos_weight, weight):
        if w is not None:
            shape = broadcast_shapes(tuple(w.shape), shape)
    _check_floating("log_sigmoid_cpu", input)
    return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype)


def _bce_logits_cpu(input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
    meta = _bce_logits_meta(input, target, weight, None, None, _kernel_reduction(size_average, reduce, reduction),
                            pos_weight)
    reduction = _kernel_reduction(size_average, reduce, reduction)
    work = _compute_dtype(meta.dtype)
    x, t = _compute(input._data, work), _compute(target._data, work)
    with np.errstate(all="ignore"):
        soft = np.maximum(-x, np.asarray(0, work)) + np.log1p(np.exp(-np.abs(x)))  # log(1 + exp(-x))
        if pos_weight is not None:
            soft = soft * ((_compute(pos_weight._data, work) - 1) * t + 1)
        loss = (1 - t) * x + soft
        if weight is not None:
            loss = loss * _compute(weight._data, work)
    return _reduce_np(loss, reduction, meta.dtype)


def _bce_logits_decomp(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                       pos_weight=None):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    soft = -_logsigmoid_values(input)
    if pos_weight is not None:
        soft = soft * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input + soft
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


binary_cross_entropy_with_logits = _composite(
    "binary_cross_entropy_with_logits", _bce_logits_meta, cpu=_bce_logits_cpu, decomposition=_bce_logits_decomp,
    tags=_NN,
)


_KL_REDUCTIONS = ("none", "batchmean", "sum", "mean")


def _kl_div_meta(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence ``target * (log(target) - input)`` (``input`` holds log-probabilities).

    With ``log_target`` the target holds log-probabilities too: ``exp(target) * (target - input)``.
    ``reduction='batchmean'`` divides the sum by the batch size (``input.size(0)``), which is
    the mathematical KL divergence; ``'mean'`` averages over every element (and warns).

    Args:
        input (Tensor): log-probabilities, floating point.
        target (Tensor): probabilities (or log-probabilities), broadcastable with ``input``.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'batchmean'``, ``'sum'`` or ``'mean'``.
        log_target (bool): whether ``target`` holds log-probabilities.

    Returns:
        Tensor: the divergence.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for integer, bool or complex inputs.

    Example:
        >>> import ember
        >>> p = ember.tensor([0.5, 0.5])
        >>> ember.kl_div(ember.log(ember.tensor([0.25, 0.75])), p, reduction="sum")
        tensor(0.1438)
    """
    _check_loss_tensors("kl_div", ("input", input), ("target", target))
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in _KL_REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size.'batchmean' divides "
            "only by the batch size, and aligns with the KL div math definition.'mean' will be changed to behave the "
            "same as 'batchmean' in the next major release.", UserWarning, stacklevel=4,
        )
    for t in (input, target):
        if t.dtype.category < D.FLOATING:
            raise RuntimeError("kl_div: Integral inputs not supported.")
        if t.dtype.is_complex:
            raise RuntimeError("kl_div: Complex inputs not supported.")
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    dtype = _common_dtype(input, target)
    return MetaArray(shape if reduction == "none" else (), dtype.numpy_dtype)


def _kl_div_cpu(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    dtype = _common_dtype(input, target).numpy_dtype
    x, t = _compute(input._data, dtype), _compute(target._data, dtype)
    with np.errstate(all="ignore"):
        if log_target:
            loss = np.exp(t) * (t - x)
        else:
            from scipy.special import xlogy

            loss = xlogy(t, t) - t * x
    if reduction == "batchmean":
        total = loss.sum()
        if input.ndim:
            with np.errstate(all="ignore"):
                total = total / np.asarray(input.shape[0], total.dtype)
        return np.asarray(total).astype(dtype)
    return _reduce_np(np.asarray(loss), reduction, dtype)


def _kl_div_decomp(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    if log_target:
        loss = _E.exp(target) * (target - input)
    else:
        loss = _E.xlogy(target, target) - target * input
    if reduction == "batchmean":
        total = _E.sum(loss)
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


kl_div = _composite("kl_div", _kl_div_meta, cpu=_kl_div_cpu, decomposition=_kl_div_decomp, tags=_NN)


def _poisson_nll_loss_meta(input, target, log_input=True, full=False, size_average=None, eps=1e-08, reduce=None,
                           reduction="mean"):
    """Negative log-likelihood of a Poisson distribution: ``exp(input) - target * input``.

    Without ``log_input``, ``input`` is the rate itself: ``input - target * log(input + eps)``.
    With ``full``, Stirling's approximation of ``log(target!)`` is added where ``target > 1``.

    Args:
        input (Tensor): the log-rate (or rate).
        target (Tensor): counts, broadcastable with ``input``.
        log_input (bool): whether ``input`` is the log of the rate.
        full (bool): add the Stirling term.
        size_average (bool, optional): deprecated (see ``reduction``).
        eps (float): keeps the log finite when ``log_input`` is False.
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss; integer inputs give the default float dtype.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for bool inputs.

    Example:
        >>> import ember
        >>> ember.poisson_nll_loss(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 2.0]), reduction="none")
        tensor([1.0000, 0.7183])
    """
    _check_loss_tensors("poisson_nll_loss", ("input", input), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    dtype = _common_dtype(input, target)
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )
    if full and dtype.is_complex:
        raise _not_implemented("le_cpu", dtype)
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    return MetaArray(_loss_shape(shape, reduction), _float_result(dtype).numpy_dtype)


def _poisson_nll_loss_cpu(input, target, log_input=True, full=False, size_average=None, eps=1e-08, reduce=None,
                          reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    meta = _poisson_nll_loss_meta(input, target, log_input, full, None, eps, None, reduction)
    work = _compute_dtype(meta.dtype)
    x, t = _compute(input._data, work), _compute(target._data, work)
    with np.errstate(all="ignore"):
        if log_input:
            loss = np.exp(x) - t * x
        else:
            loss = x - t * np.log(x + np.asarray(eps, work))
        if full:
            stirling = t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
            loss = loss + np.where(t > 1, stirling, 0).astype(loss.dtype)
    return _reduce_np(np.asarray(loss), reduction, meta.dtype)


def _poisson_nll_loss_decomp(input, target, log_input=True, full=False, size_average=None, eps=1e-08, reduce=None,
                             reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    if log_input:
        loss = _E.exp(input) - target * input
    else:
        loss = input - target * _E.log(input + eps)
    if full:
        stirling = target * _E.log(target) - target + 0.5 * _E.log(2 * math.pi * target)
        loss = loss + _E.where(target > 1, stirling, _E.zeros_like(stirling))
    return _reduce(loss, reduction)


poisson_nll_loss = _composite(
    "poisson_nll_loss", _poisson_nll_loss_meta, cpu=_poisson_nll_loss_cpu, decomposition=_poisson_nll_loss_decomp,
    tags=_NN,
)


def _gaussian_var_shape(input, var):
    """The shape ``var`` is used with (a trailing 1 added for one variance per sample).

    Raises:
        ValueError: if ``var`` fits neither heteroscedastic nor homoscedastic use.
    """
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape == ishape:
        return vshape
    if ishape[:-1] == vshape:
        return vshape + (1,)
    if ishape[:-1] == vshape[:-1] and vshape and vshape[-1] == 1:
        return vshape
    raise ValueError("var is of incorrect size")


def _gaussian_nll_loss_meta(input, target, var, full=False, eps=1e-06, reduction="mean"):
    """Negative log-likelihood of a Gaussian: ``0.5 * (log(var) + (input - target)**2 / var)``.

    ``var`` is clamped to ``>= eps`` first; ``full`` adds ``0.5 * log(2 * pi)``.

    Args:
        input (Tensor): the predicted means, floating point.
        target (Tensor): the observations, broadcastable with ``input``.
        var (Tensor or float): the predicted variances: shaped like ``input``, or like it without the last
            dim (or with 1 there), or one number; ``>= 0``.
        full (bool): add the constant term.
        eps (float): lower bound of the variance.
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for a ``var`` of the wrong size or with negative entries, or an unknown reduction.

    Example:
        >>> import ember
        >>> ember.nn.functional.gaussian_nll_loss(ember.tensor([1.0]), ember.tensor([3.0]), ember.tensor([4.0]))
        tensor(1.1931)
    """
    _check_loss_tensors("gaussian_nll_loss", ("input", input), ("target", target))
    if isinstance(var, Tensor):
        vshape = _gaussian_var_shape(input, var)
        dtype = _common_dtype(input, target, var)
        if var.device.type != "meta" and var.numel() and bool((var._host_array() < 0).any()):
            raise ValueError("var has negative entry/entries")
    else:
        if _number("gaussian_nll_loss", "var", var, 3) < 0:
            raise ValueError("var has negative entry/entries")
        vshape = ()
        dtype = _common_dtype(input, target)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    if dtype.category != D.FLOATING:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_torch_name(dtype)}")
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape), vshape)
    return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype)


def _gaussian_nll_loss_cpu(input, target, var, full=False, eps=1e-06, reduction="mean"):
    meta = _gaussian_nll_loss_meta(input, target, var, full, eps, reduction)
    work = _compute_dtype(meta.dtype)
    x, t = _compute(input._data, work), _compute(target._data, work)
    if isinstance(var, Tensor):
        v = _compute(var._data, work).reshape(_gaussian_var_shape(input, var))
    else:
        v = np.asarray(var, work)
    with np.errstate(all="ignore"):
        v = np.maximum(v, np.asarray(eps, work))
        d = x - t
        loss = np.asarray(0.5, work) * (np.log(v) + d * d / v)
        if full:
            loss = loss + np.asarray(0.5 * math.log(2 * math.pi), work)
    return _reduce_np(np.asarray(loss), reduction, meta.dtype)


def _gaussian_nll_loss_decomp(input, target, var, full=False, eps=1e-06, reduction="mean"):
    if isinstance(var, Tensor):
        var = var.reshape(_gaussian_var_shape(input, var))
        with no_grad():
            clamped = _E.clamp(var, min=eps)
        var = var + (clamped - var).detach()  # the clamp carries no gradient, as in PyTorch
    else:
        var = max(float(var), eps)
    d = input - target
    loss = (_E.log(var if isinstance(var, Tensor) else _E.full_like(d, var)) + d * d / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


gaussian_nll_loss = _composite(
    "gaussian_nll_loss", _gaussian_nll_loss_meta, cpu=_gaussian_nll_loss_cpu, decomposition=_gaussian_nll_loss_decomp,
    tags=_NN_ONLY,
)


def _margin_ranking_loss_meta(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """Ranking hinge loss: ``max(0, -target * (input1 - input2) + margin)``.

    Args:
        input1 (Tensor): scores of the first items.
        input2 (Tensor): scores of the second items.
        target (Tensor): 1 where ``input1`` should rank higher, -1 where ``input2`` should.
            The three tensors must have the same number of dims and broadcast together.
        margin (float): the required gap.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss; integer inputs give the default float dtype.

    Raises:
        RuntimeError: for tensors of different numbers of dims, bool or complex inputs.
        ValueError: for an unknown reduction.

    Example:
        >>> import ember
        >>> ember.margin_ranking_loss(ember.tensor([1.0, 0.0]), ember.tensor([0.0, 1.0]), ember.tensor([1.0, 1.0]))
        tensor(0.5000)
    """
    _check_loss_tensors("margin_ranking_loss", ("input1", input1), ("input2", input2), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(
            "margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: "
            f"{_size(input1.shape)}, input2: {_size(input2.shape)}, target: {_size(target.shape)} "
        )
    dtype = _common_dtype(input1, input2, target)
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    if dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    shape = broadcast_shapes(tuple(input1.shape), tuple(input2.shape), tuple(target.shape))
    return MetaArray(_loss_shape(shape, reduction), _float_result(dtype).numpy_dtype)


def _margin_ranking_loss_cpu(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    common = _common_dtype(input1, input2, target)
    out = _float_result(common).numpy_dtype
    work = _compute_dtype(out)
    if common.category < D.FLOATING:  # integer arithmetic first (wrapping), as PyTorch computes it
        diff = _wrapping_diff(input1, input2)
        scores = np.multiply(np.negative(target._data), diff, dtype=common.numpy_dtype).astype(work)
    else:
        a, b, t = (_compute(x._data, work) for x in (input1, input2, target))
        scores = -t * (a - b)
    loss = np.maximum(scores + np.asarray(margin, work), np.asarray(0, work))
    return _reduce_np(loss, _kernel_reduction(size_average, reduce, reduction), out)


def _margin_ranking_loss_decomp(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    return _reduce(_E.clamp(-target * (input1 - input2) + float(margin), min=0), reduction)


margin_ranking_loss = _composite(
    "margin_ranking_loss", _margin_ranking_loss_meta, cpu=_margin_ranking_loss_cpu,
    decomposition=_margin_ranking_loss_decomp, tags=_NN,
)


def _hinge_embedding_loss_meta(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """Hinge embedding loss: ``input`` where ``target == 1``, ``max(0, margin - input)`` where ``target == -1``.

    (Elements whose target is neither get both terms, as in PyTorch.)

    Args:
        input (Tensor): distances, floating point.
        target (Tensor): 1 or -1, broadcastable to ``input``'s shape.
        margin (float): the margin for dissimilar pairs.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss, of ``input``'s dtype.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for bool or complex inputs, or integer inputs with ``'mean'``.

    Example:
        >>> import ember
        >>> ember.hinge_embedding_loss(ember.tensor([0.3, 0.3]), ember.tensor([1.0, -1.0]), reduction="none")
        tensor([0.3000, 0.7000])
    """
    _check_loss_tensors("hinge_embedding_loss", ("input", input), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    if input.dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    if input.dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    if input.dtype.category < D.FLOATING and reduction == "mean":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {_torch_name(input.dtype)}"
        )
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _hinge_embedding_loss_cpu(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    x = input._data
    work = _compute_dtype(x.dtype) if input.dtype.is_floating_point else np.dtype(np.float64)
    xf, t = x.astype(work, copy=False), target._data
    with np.errstate(all="ignore"):
        clamp = np.maximum(np.asarray(margin, work) - xf, np.asarray(0, work))
        loss = np.where(t != 1, clamp, 0) + np.where(t != -1, xf, 0)
    return _reduce_np(loss.astype(work, copy=False), _kernel_reduction(size_average, reduce, reduction), x.dtype)


def _hinge_embedding_loss_decomp(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    zeros = _E.zeros_like(input)
    clamp = _E.clamp(margin - input, min=0)
    loss = _E.where(target != 1, clamp, zeros) + _E.where(target != -1, input, zeros)
    return _reduce(loss, reduction)


hinge_embedding_loss = _composite(
    "hinge_embedding_loss", _hinge_embedding_loss_meta, cpu=_hinge_embedding_loss_cpu,
    decomposition=_hinge_embedding_loss_decomp, tags=_NN,
)


def _soft_margin_loss_meta(input, target, size_average=None, reduce=None, reduction="mean"):
    """Two-class logistic loss: ``log(1 + exp(-target * input))``.

    Args:
        input (Tensor): scores, floating point or complex.
        target (Tensor): 1 or -1, broadcastable to ``input``'s shape (not beyond it).
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss, of ``input``'s dtype.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for integer or bool inputs, or a target that would enlarge ``input``.

    Example:
        >>> import ember
        >>> ember.nn.functional.soft_margin_loss(ember.tensor([0.0, 2.0]), ember.tensor([1.0, -1.0]))
        tensor(1.4100)
    """
    _check_loss_tensors("soft_margin_loss", ("input", input), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    _check_negatable(target)
    full = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    if full != tuple(input.shape):
        raise RuntimeError(f"output with shape {_fmt(input.shape)} doesn't match the broadcast shape {_fmt(full)}")
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_torch_name(input.dtype)}")
    return MetaArray(_loss_shape(input.shape, reduction), input._data.dtype)


def _soft_margin_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean"):
    x = input._data
    work = _compute_dtype(x.dtype)
    xf, t = x.astype(work, copy=False), _compute(target._data, work)
    with np.errstate(all="ignore"):
        z = -t * xf
        if np.iscomplexobj(z):
            loss = np.log1p(np.exp(z))
        else:
            loss = np.logaddexp(np.asarray(0, z.dtype), z) if z.dtype != np.float16 else np.log1p(np.exp(z))
    loss = np.asarray(loss).astype(work, copy=False)
    return _reduce_np(loss, _kernel_reduction(size_average, reduce, reduction), x.dtype)


def _soft_margin_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    return _reduce(_E.log1p(_E.exp(-target * input)).to(input.dtype), reduction)


soft_margin_loss = _composite(
    "soft_margin_loss", _soft_margin_loss_meta, cpu=_soft_margin_loss_cpu, decomposition=_soft_margin_loss_decomp,
    tags=_NN_ONLY,
)


def _check_margin_input(op, input, kernel):
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or (input.ndim == 1 and input.shape[0] == 0):
        raise RuntimeError(
            f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {_fmt(input.shape)}"
        )
    if input.dtype not in (D.float32, D.float64):
        raise _not_implemented(kernel, input.dtype)


def _multilabel_margin_loss_meta(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: for each target class ``j`` and each non-target class ``i``,
    ``max(0, 1 - (x[j] - x[i]))``, summed and divided by the number of classes.

    Each row of ``target`` lists the target classes, ended by the first ``-1``.

    Args:
        input (Tensor): ``(C,)`` or ``(N, C)`` scores, float32 or float64.
        target (Tensor): int64 of ``input``'s shape: class indices, then -1 padding.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: ``(N,)`` (0-dim for a 1-D input) with ``'none'``, else 0-dim. A NaN score in a
        term of the sum makes the loss NaN (PyTorch's CPU kernel drops such terms; its
        decomposition keeps them); pairs outside the sum never count, whatever their value.

    Raises:
        RuntimeError: for shapes or dtypes that don't fit, or a target out of range.
        ValueError: for an unknown reduction.

    Example:
        >>> import ember
        >>> ember.nn.functional.multilabel_margin_loss(ember.tensor([[0.1, 0.2, 0.4, 0.8]]),
        ...                                            ember.tensor([[3, 0, -1, 1]]))
        tensor(0.8500)
    """
    _check_loss_tensors("multilabel_margin_loss", ("input", input), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    _check_margin_input("multilabel_margin_loss", input, "multilabel_margin_loss_forward_out_frame")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {_fmt(target.shape)} for input of size: {_fmt(input.shape)}")
    if target.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {_torch_name(target.dtype)}")
    shape = (input.shape[0],) if input.ndim == 2 else ()
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _multilabel_margin_np(x, y):
    """Per-sample multilabel margin losses of (N, C) scores ``x`` and targets ``y``."""
    n, c = x.shape
    if n == 0 or c == 0:
        return np.zeros((n,), x.dtype)
    valid = np.cumprod(y != -1, axis=1).astype(bool)
    if np.any(valid & ((y < 0) | (y >= c))):
        raise RuntimeError("argument #2 'target' is out of range")
    safe = np.where(valid, y, 0)
    is_target = np.zeros((n, c), bool)
    rows = np.broadcast_to(np.arange(n)[:, None], y.shape)
    is_target[rows[valid], safe[valid]] = True
    picked = np.take_along_axis(x, safe, axis=1)  # (N, C): score of the j-th target
    with np.errstate(invalid="ignore"):  # an infinite score meets itself: inf - inf, in a pair left out below
        hinge = np.maximum(1 - picked[:, :, None] + x[:, None, :], 0)  # NaN scores stay NaN
    # pairs outside the sum contribute nothing, whatever their value (NaN * 0 would be NaN)
    hinge = np.where(valid[:, :, None] & ~is_target[:, None, :], hinge, 0)
    return hinge.sum(axis=(1, 2)) / c


def _multilabel_margin_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean"):
    x = input._data
    x2 = x.reshape(1, -1) if x.ndim < 2 else x
    y2 = target._data.reshape(x2.shape)
    loss = _multilabel_margin_np(x2, y2)
    if x.ndim < 2:
        loss = loss.reshape(())
    return _reduce_np(loss, _kernel_reduction(size_average, reduce, reduction), x.dtype)


def _multilabel_margin_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    x = input.reshape(1, -1) if input.ndim < 2 else input
    y = target.reshape(tuple(x.shape))
    c = x.shape[1]
    valid = _E.cumprod((y != -1).to(D.int64), 1).to(D.bool)
    if y._device.type != "cpu" and _any_off_cpu(valid & ((y < 0) | (y >= c))):
        raise RuntimeError("argument #2 'target' is out of range")
    safe = _E.where(valid, y, _E.zeros_like(y))
    hits = _E.scatter_add(_E.zeros_like(y), 1, safe, valid.to(D.int64))
    is_target = hits > 0
    picked = _E.gather(x, 1, safe)
    hinge = _E.clamp(1 - _E.unsqueeze(picked, 2) + _E.unsqueeze(x, 1), min=0)
    mask = _E.logical_and(_E.unsqueeze(valid, 2), _E.unsqueeze(_E.logical_not(is_target), 1))
    # a where, not a product: a pair outside the sum adds nothing even when its hinge is NaN (inf - inf)
    loss = _E.sum(_E.where(mask, hinge, _E.zeros_like(hinge)), [1, 2]) / c
    if input.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


multilabel_margin_loss = _composite(
    "multilabel_margin_loss", _multilabel_margin_loss_meta, cpu=_multilabel_margin_loss_cpu,
    decomposition=_multilabel_margin_loss_decomp, tags=_NN_ONLY,
)


def _multilabel_soft_margin_loss_meta(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Multi-label one-versus-all logistic loss, averaged over the classes (the last dim).

    ``-(t * logsigmoid(x) + (1 - t) * logsigmoid(-x))``, times ``weight``, averaged over the
    last dim, then reduced over the rest.

    Args:
        input (Tensor): ``(*, C)`` scores, floating point.
        target (Tensor): 0/1 labels broadcastable with ``input``.
        weight (Tensor, optional): per-class weights, broadcastable.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: ``input``'s shape without the last dim with ``'none'``, else 0-dim.

    Raises:
        ValueError: for an unknown reduction.
        IndexError: for a 0-dim input.
        NotImplementedError: if the common dtype is not floating point.

    Example:
        >>> import ember
        >>> ember.nn.functional.multilabel_soft_margin_loss(ember.tensor([[0.0, 2.0]]), ember.tensor([[1.0, 0.0]]))
        tensor(1.4100)
    """
    _check_loss_tensors("multilabel_soft_margin_loss", ("input", input), ("target", target))
    _check_optional_tensor("multilabel_soft_margin_loss", "weight", weight, 3)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape),
                             () if weight is None else tuple(weight.shape))
    if input.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    dtype = _common_dtype(input, target, weight)
    if dtype.category != D.FLOATING:
        raise _not_implemented("log_sigmoid_cpu", dtype)
    return MetaArray(_loss_shape(shape[:-1], reduction), dtype.numpy_dtype)


def _multilabel_soft_margin_loss_cpu(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    out = _common_dtype(input, target, weight).numpy_dtype
    work = _compute_dtype(out)
    x, t = _compute(input._data, work), _compute(target._data, work)
    loss = -(t * _logsigmoid_np(x) + (1 - t) * _logsigmoid_np(-x))
    if weight is not None:
        loss = loss * _compute(weight._data, work)
    loss = loss.sum(axis=-1) / np.asarray(input.shape[-1], work)
    return _reduce_np(np.asarray(loss), _kernel_reduction(size_average, reduce, reduction), out)


def _multilabel_soft_margin_loss_decomp(input, target, weight=None, size_average=None, reduce=None,
                                        reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    loss = -(target * _logsigmoid_values(input) + (1 - target) * _logsigmoid_values(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(_E.sum(loss, -1) / input.shape[-1], reduction)


multilabel_soft_margin_loss = _composite(
    "multilabel_soft_margin_loss", _multilabel_soft_margin_loss_meta, cpu=_multilabel_soft_margin_loss_cpu,
    decomposition=_multilabel_soft_margin_loss_decomp, tags=_NN_ONLY,
)


def _multi_margin_loss_meta(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                            reduction="mean"):
    """Multi-class hinge loss: ``sum over i != y of max(0, margin - x[y] + x[i]) ** p * weight[y] / C``.

    Args:
        input (Tensor): ``(C,)`` or ``(N, C)`` scores, float32 or float64.
        target (Tensor): int64 class indices, ``(N,)`` (or one for a 1-D input).
        p (int): 1 or 2.
        margin (float): the margin.
        weight (Tensor, optional): ``(C,)`` class weights of ``input``'s dtype.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss, per sample with ``'none'``. A NaN score in a term of the sum makes the
        loss NaN (PyTorch's CPU kernel drops such terms; its decomposition keeps them); the
        target's own term never counts, whatever its value.

    Raises:
        ValueError: for ``p`` other than 1 and 2, a weight that is not 1-D, or an unknown reduction.
        RuntimeError: for shapes or dtypes that don't fit, or a target out of range.

    Example:
        >>> import ember
        >>> ember.nn.functional.multi_margin_loss(ember.tensor([[0.1, 0.2, 0.4, 0.8]]), ember.tensor([3]))
        tensor(0.3250)
    """
    _check_loss_tensors("multi_margin_loss", ("input", input), ("target", target))
    _check_optional_tensor("multi_margin_loss", "weight", weight, 5)
    reduction = _reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    _check_margin_input("multi_margin_loss", input, "multi_margin_loss_cpu_kernel")
    c = input.shape[-1] if input.ndim else 1
    n = input.shape[0] if input.ndim == 2 else 1
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples (batch "
            f"size). Expected target size [{n}], but got {_fmt(target.shape)}. Input has shape {_fmt(input.shape)}."
        )
    if target.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {_torch_name(target.dtype)}")
    if weight is not None:
        if weight.numel() != c:
            raise RuntimeError(f"inconsistent weight size, expected {c} but got {_fmt(weight.shape)}")
        if weight.dtype is not input.dtype:
            raise RuntimeError(
                f"expected scalar type {_torch_name(input.dtype)} but found {_torch_name(weight.dtype)}"
            )
    shape = (n,) if input.ndim == 2 else tuple(target.shape)
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _multi_margin_loss_cpu(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                           reduction="mean"):
    x = input._data
    x2 = x.reshape(-1, x.shape[-1] if x.ndim else 1)
    y = target._data.reshape(-1)
    c = x2.shape[1]
    if y.size and (y.min() < 0 or y.max() >= c):
        raise RuntimeError("target out of range")
    picked = np.take_along_axis(x2, y[:, None], axis=1)
    with np.errstate(invalid="ignore"):  # an infinite target score meets itself: inf - inf, set to 0 below
        hinge = np.maximum(np.asarray(margin, x.dtype) - picked + x2, 0)  # NaN scores stay NaN
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight._data[y][:, None]
    hinge[np.arange(y.size), y] = 0
    loss = hinge.sum(axis=1) / np.asarray(c, x.dtype)
    loss = loss.reshape(_multi_margin_loss_meta(input, target, p, margin, weight, reduction="none").shape)
    return _reduce_np(loss, _kernel_reduction(size_average, reduce, reduction), x.dtype)


def _multi_margin_loss_decomp(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                              reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    x = input.reshape(-1, input.shape[-1] if input.ndim else 1)
    y = target.reshape(-1, 1)
    c = x.shape[1]
    if y._device.type != "cpu" and _any_off_cpu((y < 0) | (y >= c)):
        raise RuntimeError("target out of range")
    picked = _E.gather(x, 1, y)
    hinge = _E.clamp(margin - picked + x, min=0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * _E.index_select(weight, 0, y.reshape(-1)).reshape(-1, 1)
    is_target = _E.scatter(_E.zeros_like(hinge), 1, y, 1.0) > 0
    # a where, not a product: the target's own term adds nothing even when it is NaN (inf - inf)
    loss = _E.sum(_E.where(is_target, _E.zeros_like(hinge), hinge), 1) / c
    shape = (x.shape[0],) if input.ndim == 2 else tuple(target.shape)
    return _reduce(loss.reshape(shape), reduction)


multi_margin_loss = _composite(
    "multi_margin_loss", _multi_margin_loss_meta, cpu=_multi_margin_loss_cpu, decomposition=_multi_margin_loss_decomp,
    tags=_NN_ONLY,
)


_COSINE_EPSILON = 1e-12


def _cosine_embedding_loss_meta(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """Cosine embedding loss: ``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)``
    where ``target == -1``.

    Args:
        input1 (Tensor): ``(N, D)`` or ``(D,)``.
        input2 (Tensor): same shape as ``input1``.
        target (Tensor): ``(N,)`` (or 0-dim for 1-D inputs) of 1 and -1.
        margin (float): the margin for dissimilar pairs.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss; integer and bool inputs give the default float dtype.

    Raises:
        RuntimeError: for inputs whose number of dims doesn't fit the target's, or complex inputs.
        ValueError: for an unknown reduction.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1.0, 0.0], [1.0, 0.0]])
        >>> y = ember.tensor([[0.0, 1.0], [1.0, 1.0]])
        >>> ember.cosine_embedding_loss(x, y, ember.tensor([1.0, -1.0]), reduction="none")
        tensor([1.0000, 0.7071])
    """
    _check_loss_tensors("cosine_embedding_loss", ("input1", input1), ("input2", input2), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if target.ndim == 1 and not (input1.ndim == 2 and input2.ndim == 2):
        raise RuntimeError(
            "1D target tensor expects 2D input tensors, but found inputs with sizes "
            f"{_fmt(input1.shape)} and {_fmt(input2.shape)}."
        )
    if target.ndim == 0 and not (input1.ndim == 1 and input2.ndim == 1):
        raise RuntimeError(
            "0D target tensor expects 1D input tensors, but found inputs with sizes "
            f"{_fmt(input1.shape)} and {_fmt(input2.shape)}."
        )
    vec = broadcast_shapes(tuple(input1.shape), tuple(input2.shape))
    shape = broadcast_shapes(vec[:-1], tuple(target.shape))
    dtype = _common_dtype(input1, input2)
    if dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    return MetaArray(_loss_shape(shape, reduction), _float_result(dtype).numpy_dtype)


def _cosine_embedding_loss_cpu(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    common = _common_dtype(input1, input2)
    out = _float_result(common).numpy_dtype
    work = _compute_dtype(out)
    t = target._data
    eps = np.asarray(_COSINE_EPSILON, out).astype(work)  # 0 in float16, as PyTorch adds it in that dtype
    with np.errstate(all="ignore"):
        if common.category < D.FLOATING:  # products in the integer dtype (wrapping), sums in int64
            a, b = input1._data.astype(common.numpy_dtype), input2._data.astype(common.numpy_dtype)

            def dot(u, v):
                return np.sum(np.multiply(u, v), axis=-1, dtype=np.int64).astype(work)
        else:
            a, b = _compute(input1._data, work), _compute(input2._data, work)

            def dot(u, v):
                return np.sum(u * v, axis=-1)
        prod = dot(a, b)
        mag = (dot(a, a) + eps) * (dot(b, b) + eps)
        cos = prod / np.sqrt(mag)
        loss = np.where(t == 1, 1 - cos, 0) + np.where(t == -1, np.maximum(cos - np.asarray(margin, work), 0), 0)
    return _reduce_np(np.asarray(loss, work), _kernel_reduction(size_average, reduce, reduction), out)


def _cosine_embedding_loss_decomp(input1, input2, target, margin=0, size_average=None, reduce=None,
                                  reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    a, b = input1, input2
    prod = _E.sum(a * b, -1)
    mag = (_E.sum(a * a, -1) + _COSINE_EPSILON) * (_E.sum(b * b, -1) + _COSINE_EPSILON)
    cos = prod / _E.sqrt(mag)
    zeros = _E.zeros_like(cos)
    loss = _E.where(target == 1, 1 - cos, zeros) + _E.where(target == -1, _E.clamp(cos - margin, min=0), zeros)
    return _reduce(loss, reduction)


cosine_embedding_loss = _composite(
    "cosine_embedding_loss", _cosine_embedding_loss_meta, cpu=_cosine_embedding_loss_cpu,
    decomposition=_cosine_embedding_loss_decomp, tags=_NN,
)


def _triplet_margin_loss_meta(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, size_average=None,
                              reduce=None, reduction="mean"):
    """Triplet loss (Schroff et al., "FaceNet", 2015): ``max(0, margin + d(a, p) - d(a, n))``.

    ``d`` is :func:`ember.pairwise_distance` with ``p`` and ``eps``; with ``swap``
    (Balntas et al., 2016) ``d(a, n)`` is replaced by ``min(d(a, n), d(p, n))``.

    Args:
        anchor (Tensor): ``(N, D)`` or ``(D,)``.
        positive (Tensor): same number of dims, broadcastable.
        negative (Tensor): same number of dims, broadcastable.
        margin (float): ``> 0``.
        p (float): the norm's exponent.
        eps (float): added to the differences.
        swap (bool): use the distance swap.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for ``margin <= 0`` or an unknown reduction.
        RuntimeError: for tensors with different numbers of dims, or bool inputs.

    Example:
        >>> import ember
        >>> a, pos, neg = ember.tensor([[0.0, 0.0]]), ember.tensor([[0.0, 1.0]]), ember.tensor([[0.0, 1.5]])
        >>> ember.triplet_margin_loss(a, pos, neg, eps=0.0)
        tensor(0.5000)
    """
    _check_loss_tensors("triplet_margin_loss", ("anchor", anchor), ("positive", positive), ("negative", negative))
    reduction = _reduction(size_average, reduce, reduction)
    margin = _number("triplet_margin_loss", "margin", margin, 4)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but "
            f"got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative {negative.ndim}D inputs"
        )
    d_pos = _pairwise_distance_meta(anchor, positive, p, eps)
    d_neg = _pairwise_distance_meta(anchor, negative, p, eps)
    shape = broadcast_shapes(d_pos.shape, d_neg.shape)
    if swap:
        shape = broadcast_shapes(shape, _pairwise_distance_meta(positive, negative, p, eps).shape)
    dtype = _float_result(_distance_dtype("triplet_margin_loss", anchor, positive, negative)).to_real()
    return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype)


def _triplet_margin_loss_cpu(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, size_average=None,
                             reduce=None, reduction="mean"):
    work = _compute_dtype(_float_result(_distance_dtype("", anchor, positive, negative)).numpy_dtype)
    d_pos = _pairwise_distance_np(_difference(anchor, positive, work), p, eps)
    d_neg = _pairwise_distance_np(_difference(anchor, negative, work), p, eps)
    if swap:
        d_neg = np.minimum(d_neg, _pairwise_distance_np(_difference(positive, negative, work), p, eps))
    loss = np.maximum(np.asarray(margin, d_pos.dtype) + d_pos - d_neg, 0)
    out = _triplet_margin_loss_meta(anchor, positive, negative, margin, p, eps, swap, reduction="none")
    return _reduce_np(np.asarray(loss).reshape(out.shape), _kernel_reduction(size_average, reduce, reduction),
                      out.dtype)


def _triplet_margin_loss_decomp(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                                size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d_pos = _E.pairwise_distance(anchor, positive, p, eps)
    d_neg = _E.pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _E.minimum(d_neg, _E.pairwise_distance(positive, negative, p, eps))
    return _reduce(_E.clamp(margin + d_pos - d_neg, min=0), reduction)


triplet_margin_loss = _composite(
    "triplet_margin_loss", _triplet_margin_loss_meta, cpu=_triplet_margin_loss_cpu,
    decomposition=_triplet_margin_loss_decomp, tags=_NN,
)


# -- class-index losses: nll_loss, cross_entropy -----------------------------------------------------------


def _nll_checks(op, input, target, weight):
    """Shape and dtype checks of nll_loss with class-index targets; returns the 'none' output shape."""
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if input.ndim >= 2 and target.ndim >= 1 and input.shape[0] != target.shape[0]:
        raise ValueError(
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({target.shape[0]})."
        )
    if input.ndim <= 2:
        if target.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if input.ndim == 1:
            if target.ndim == 1 and target.shape[0] != 1:
                raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {target.shape[0]}")
            shape = ()
        else:
            if target.ndim == 0:
                raise RuntimeError(f"size mismatch (got input: {_fmt(input.shape)}, target: {_fmt(target.shape)})")
            shape = (input.shape[0],)
    else:
        expected = (input.shape[0],) + tuple(input.shape[2:])
        if input.ndim == 4 and target.ndim != 3:
            raise RuntimeError(
                f"only batches of spatial targets supported (3D tensors) but got targets of dimension: {target.ndim}"
            )
        if tuple(target.shape) != expected:
            raise RuntimeError(f"Expected target size {_fmt(expected)}, got {_fmt(target.shape)}")
        shape = expected
    if target.dtype not in (D.int64, D.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_torch_name(target.dtype)}")
    classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
    if weight is not None:
        if weight.numel() != classes:
            prefix = "cross_entropy: " if op == "cross_entropy" else ""
            raise RuntimeError(
                f"{prefix}weight tensor should be defined either for all {classes} classes or no classes but got "
                f"weight tensor of shape: {_fmt(weight.shape)}"
            )
    return shape


def _nll_dtype_checks(input, weight, kernel):
    _check_floating(kernel, input)
    if weight is not None and weight.dtype is not input.dtype:
        raise RuntimeError(f"expected scalar type {_torch_name(input.dtype)} but found {_torch_name(weight.dtype)}")


def _nll_loss_meta(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class indices: ``-weight[t] * input[n, t]`` for each target ``t``.

    ``input`` holds log-probabilities, classes in dim 1 (``(N, C)``, ``(N, C, d1, ...)``) or dim 0
    (``(C,)``). Targets equal to ``ignore_index`` contribute 0; ``'mean'`` divides by the sum of the
    weights of the other targets.

    Args:
        input (Tensor): log-probabilities, floating point.
        target (Tensor): int64 (or uint8) class indices, ``(N,)``, ``(N, d1, ...)`` or 0-dim.
        weight (Tensor, optional): ``(C,)`` class weights of ``input``'s dtype.
        size_average (bool, optional): deprecated (see ``reduction``).
        ignore_index (int): a target value to leave out.
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: ``target``'s shape with ``'none'``, else 0-dim.

    Raises:
        ValueError: for a 0-dim input, batch sizes that differ, or an unknown reduction.
        RuntimeError: for target shapes or dtypes that don't fit, or a weight of the wrong size or dtype.
        IndexError: for a target outside ``[0, C)`` (checked on the values).

    Example:
        >>> import ember
        >>> logp = ember.log(ember.tensor([[0.5, 0.5], [0.9, 0.1]]))
        >>> ember.nn.functional.nll_loss(logp, ember.tensor([0, 0]))
        tensor(0.3993)
    """
    _check_loss_tensors("nll_loss", ("input", input), ("target", target))
    _check_optional_tensor("nll_loss", "weight", weight, 3)
    reduction = _reduction(size_average, reduce, reduction)
    shape = _nll_checks("nll_loss", input, target, weight)
    _nll_dtype_checks(input, weight, "nll_loss_out_frame" if input.ndim <= 2 else "nll_loss2d_forward_out_frame")
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _class_last_np(x):
    """``x`` with its class dim (1, or 0 for 1-D) moved last and the rest flattened: ``(M, C)``."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _picked_and_weights(target, weight, ignore_index, classes, dtype):
    """Flat targets made safe, their weights (0 where ignored) and the ignore mask (numpy)."""
    t = target._data.reshape(-1).astype(np.int64)
    ignore = t == ignore_index
    bad = ~ignore & ((t < 0) | (t >= classes))
    if bad.any():
        raise IndexError(f"Target {t[bad][0]} is out of bounds.")
    safe = np.where(ignore, 0, t)
    w = np.ones(t.shape, dtype) if weight is None else _compute(weight._data).astype(dtype, copy=False)[safe]
    w = np.where(ignore, np.asarray(0, dtype), w)
    return safe, w, ignore


def _nll_np(logp, target, weight, ignore_index, reduction, shape):
    """nll_loss on a numpy ``(M, C)`` array of log-probabilities (class dim last)."""
    safe, w, ignore = _picked_and_weights(target, weight, ignore_index, logp.shape[1], logp.dtype)
    picked = logp[np.arange(safe.size), safe] if safe.size else np.zeros(0, logp.dtype)
    return _nll_from_picked(picked, w, ignore, reduction, shape, logp.dtype)


def _nll_from_picked(picked, w, ignore, reduction, shape, dtype):
    """nll_loss from the picked log-probabilities, the target weights (0 where ignored) and the ignore mask."""
    with np.errstate(all="ignore"):
        loss = np.where(ignore, np.asarray(0, dtype), -picked * w)
        if reduction == "none":
            return loss.reshape(shape)
        if reduction == "sum":
            return np.asarray(loss.sum(), dtype)
        return np.asarray(loss.sum() / w.sum(), dtype)


def _nll_loss_cpu(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    shape = _nll_checks("nll_loss", input, target, weight)
    logp = _class_last_np(_compute(input._data))
    return _nll_np(logp, target, weight, ignore_index, reduction, shape).astype(input._data.dtype, copy=False)


def _class_last(x):
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    return _E.movedim(x, 1, -1).reshape(-1, x.shape[1])


def _nll_values(logp, target, weight, ignore_index, reduction):
    """nll_loss in ember ops (decompositions)."""
    shape = _nll_checks("nll_loss", logp, target, weight)
    x = _class_last(logp)
    t = target.reshape(-1).to(D.int64)
    keep = t != ignore_index
    if t._device.type != "cpu":
        bad = keep & ((t < 0) | (t >= x.shape[1]))
        if _any_off_cpu(bad):
            raise IndexError(f"Target {int(t[bad][0].item())} is out of bounds.")
    safe = _E.where(keep, t, _E.zeros_like(t))
    picked = _E.gather(x, 1, safe.reshape(-1, 1)).reshape(-1)
    w = _E.ones_like(picked) if weight is None else _E.index_select(weight, 0, safe)
    w = w * keep.to(w.dtype)
    loss = -picked * w
    loss = _E.where(keep, loss, _E.zeros_like(loss))
    if reduction == "none":
        return loss.reshape(shape)
    if reduction == "sum":
        return _E.sum(loss)
    return _E.sum(loss) / _E.sum(w)


def _nll_loss_decomp(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                     reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    return _nll_values(input, target, weight, ignore_index, reduction)


nll_loss = _composite("nll_loss", _nll_loss_meta, cpu=_nll_loss_cpu, decomposition=_nll_loss_decomp, tags=_NN_ONLY)


def _cross_entropy_meta(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                        reduction="mean", label_smoothing=0.0):
    """Cross entropy between the softmax of ``input`` (logits, classes in dim 1) and ``target``.

    ``target`` holds class indices (int64; ``nll_loss(log_softmax(input, 1), target)``, with
    ``weight``, ``ignore_index`` and ``'mean'`` as in :func:`nll_loss`) or, when it has
    ``input``'s shape, class probabilities (floating point; ``-sum(weight * target * log_softmax)``
    over the classes, ``'mean'`` dividing by the number of samples). ``label_smoothing``
    (Szegedy et al., 2016) mixes the target with the uniform distribution:
    ``(1 - eps) * target + eps / C``.

    Args:
        input (Tensor): logits ``(N, C)``, ``(N, C, d1, ...)`` or ``(C,)``, floating point.
        target (Tensor): class indices ``(N,)``/``(N, d1, ...)``/0-dim, or probabilities shaped like ``input``.
        weight (Tensor, optional): ``(C,)`` class weights.
        size_average (bool, optional): deprecated (see ``reduction``).
        ignore_index (int): a target index to leave out (class-index targets only).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        label_smoothing (float): the smoothing amount, at most 1.

    Returns:
        Tensor: per-sample losses with ``'none'``, else 0-dim.

    Raises:
        ValueError: for a 0-dim input, batch sizes that differ, or an unknown reduction.
        RuntimeError: for targets that don't fit, ``label_smoothing > 1``, ``ignore_index`` with probability
            targets, or a weight of the wrong size or dtype.
        IndexError: for a class index outside ``[0, C)``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> logits = ember.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        >>> ember.nn.functional.cross_entropy(logits, ember.tensor([0, 2]))
        tensor(0.6691)
    """
    _check_loss_tensors("cross_entropy", ("input", input), ("target", target))
    _check_optional_tensor("cross_entropy", "weight", weight, 3)
    reduction = _reduction(size_average, reduce, reduction)
    label_smoothing = _number("cross_entropy", "label_smoothing", label_smoothing, 8)
    if tuple(target.shape) == tuple(input.shape):
        if target.dtype.category != D.FLOATING:
            raise RuntimeError(
                f"Expected floating point type for target with class probabilities, got {_torch_name(target.dtype)}"
            )
        if ignore_index != -100:
            raise RuntimeError("ignore_index is not supported for floating point target")
        if label_smoothing > 1.0:
            raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
        _check_floating("log_softmax_lastdim_kernel_impl", input)
        classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
        if weight is not None and weight.numel() != classes:
            raise RuntimeError(
                f"cross_entropy: weight tensor should be defined either for all {classes} classes or no classes but "
                f"got weight tensor of shape: {_fmt(weight.shape)}"
            )
        shape = tuple(input.shape[:1]) + tuple(input.shape[2:]) if input.ndim >= 2 else ()
        dtype = _common_dtype(input, target, weight)
        return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype)
    shape = _nll_checks("cross_entropy", input, target, weight)
    _check_floating("log_softmax_lastdim_kernel_impl", input)
    _nll_dtype_checks(input, weight, "nll_loss_out_frame")
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _row_logsumexp(x):
    """``log(sum(exp(x)))`` of each row of a numpy ``(M, C)`` array, computed stably: ``(M,)``."""
    with np.errstate(all="ignore"):
        if x.shape[1] == 0:
            return np.full(x.shape[0], -np.inf, x.dtype)
        top = x.max(axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, np.asarray(0, x.dtype))
        total = np.exp(x - top).sum(axis=1, keepdims=True)
        return (np.log(total) + top).reshape(-1)


def _log_softmax_rows(x):
    """``(log_softmax(x), logsumexp)`` of a numpy ``(M, C)`` array along its rows."""
    with np.errstate(all="ignore"):
        top = x.max(axis=1, keepdims=True) if x.shape[1] else np.zeros((x.shape[0], 1), x.dtype)
        top = np.where(np.isfinite(top), top, 0)
        shifted = x - top
        lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        shifted -= lse
        return shifted


_C_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}  # ember._C.cross_entropy's reduction codes


def _cross_entropy_cpu(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                       reduction="mean", label_smoothing=0.0):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    meta = _cross_entropy_meta(input, target, weight, None, ignore_index, None, reduction, label_smoothing)
    out_dtype = meta.dtype
    work = _compute_dtype(out_dtype)
    x = _class_last_np(_compute(input._data, work))
    classes = x.shape[1]
    w = None if weight is None else _compute(weight._data, work)
    if tuple(target.shape) == tuple(input.shape):
        logp = _log_softmax_rows(x)
        t = _class_last_np(_compute(target._data, work))
        if label_smoothing > 0:
            t = t * np.asarray(1 - label_smoothing, work) + np.asarray(label_smoothing / classes, work)
        prod = logp * t
        if w is not None:
            prod *= w
        with np.errstate(all="ignore"):
            loss = -prod.sum(axis=1)
            if reduction == "none":
                shape = tuple(input.shape[:1]) + tuple(input.shape[2:]) if input.ndim >= 2 else ()
                return loss.reshape(shape).astype(out_dtype, copy=False)
            if reduction == "sum":
                return np.asarray(loss.sum()).astype(out_dtype)
            return np.asarray(loss.sum() / np.asarray(x.shape[0], work)).astype(out_dtype)
    # class indices: only the log-sum-exp of each row and the picked logits are needed, not log_softmax itself
    shape = _nll_checks("cross_entropy", input, target, weight)
    if work in _C_FLOATS:
        loss = _C.cross_entropy(
            _contiguous(x), _contiguous(target._data.reshape(-1).astype(np.int64, copy=False)),
            None if w is None else _contiguous(w.reshape(-1)), int(ignore_index), float(label_smoothing),
            _C_REDUCTIONS[reduction],
        )
        loss = loss.reshape(shape) if reduction == "none" else loss
        # (a float16 sum past 65504 is inf, silently as in PyTorch)
        return quiet(lambda: loss.astype(out_dtype, copy=False))
    safe, wt, ignore = _picked_and_weights(target, weight, ignore_index, classes, work)
    lse = _row_logsumexp(x)
    picked = (x[np.arange(safe.size), safe] - lse) if safe.size else np.zeros(0, work)
    nll = _nll_from_picked(picked, wt, ignore, reduction, shape, work)
    if label_smoothing <= 0:
        return nll.astype(out_dtype, copy=False)
    with np.errstate(all="ignore"):
        if w is not None:  # sum_c w_c * log_softmax_c = x @ w - lse * sum(w)
            smooth = -(_matmul_np(x, w) - lse * w.sum())
        else:
            smooth = -(x.sum(axis=1) - lse * classes)
        smooth = np.where(ignore, np.asarray(0, work), smooth)
        if reduction == "none":
            smooth_total = smooth.reshape(shape)
        elif reduction == "sum":
            smooth_total = smooth.sum()
        else:
            smooth_total = smooth.sum() / (wt.sum() if w is not None else np.asarray((~ignore).sum(), work))
        out = nll * np.asarray(1 - label_smoothing, work) + smooth_total * np.asarray(label_smoothing / classes, work)
    return np.asarray(out).astype(out_dtype, copy=False)


def _cross_entropy_decomp(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                          reduction="mean", label_smoothing=0.0):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    class_dim = 1 if input.ndim >= 2 else 0
    classes = input.shape[class_dim]
    w_shape = [1] * input.ndim
    w_shape[class_dim] = classes
    if tuple(target.shape) == tuple(input.shape):
        dtype = _common_dtype(input, target, weight)
        logp = _E.log_softmax(input.to(dtype), class_dim)
        t = target.to(dtype)
        if label_smoothing > 0:
            t = t * (1 - label_smoothing) + label_smoothing / classes
        prod = logp * t
        if weight is not None:
            prod = prod * weight.to(dtype).reshape(w_shape)
        loss = -_E.sum(prod, class_dim)
        if reduction == "mean":
            return _E.sum(loss) / (input.numel() // classes if classes else 0)
        return _reduce(loss, reduction)
    logp = _E.log_softmax(input, class_dim)
    nll = _nll_values(logp, target, weight, ignore_index, reduction)
    if label_smoothing <= 0:
        return nll
    keep = target != ignore_index
    smooth = -_E.sum(logp * weight.reshape(w_shape), class_dim) if weight is not None else -_E.sum(logp, class_dim)
    smooth = _E.where(keep, smooth, _E.zeros_like(smooth))
    if reduction == "sum":
        smooth = _E.sum(smooth)
    elif reduction == "mean":
        if weight is not None:
            safe = _E.where(keep, target, _E.zeros_like(target)).reshape(-1)
            denominator = _E.sum(_E.index_select(weight, 0, safe) * keep.reshape(-1).to(weight.dtype))
        else:
            denominator = _E.sum(keep.to(smooth.dtype))
        smooth = _E.sum(smooth) / denominator
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / classes)


cross_entropy = _composite(
    "cross_entropy", _cross_entropy_meta, cpu=_cross_entropy_cpu, decomposition=_cross_entropy_decomp, tags=_NN_ONLY
)


# -- ctc_loss ------------------------------------------------------------------------------------------


def _lengths(name, value, batch):
    """``input_lengths``/``target_lengths`` as a numpy int64 array of ``batch`` entries (tensor or sequence).

    Raises:
        RuntimeError: for non-integer lengths or the wrong count.
    """
    if isinstance(value, Tensor):
        if value.dtype.category != D.INTEGRAL:
            raise RuntimeError(f"{name} must be integral")
        if value.device.type == "meta":
            return None
        array = value._host_array().astype(np.int64).reshape(-1)
    else:
        try:
            array = np.array([operator.index(v) for v in value], dtype=np.int64)
        except TypeError:
            raise RuntimeError(f"{name} must be integral") from None
    if array.size != batch:
        raise RuntimeError(f"{name} must be of size batch_size")
    return array


def _ctc_checks(log_probs, targets, input_lengths, target_lengths, blank, reduction):
    """Shape and value checks of ctc_loss; returns ``(batch, input_lengths, target_lengths)`` (numpy or None)."""
    _check_loss_tensors("ctc_loss", ("log_probs", log_probs), ("targets", targets))
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D or 3-D, got {log_probs.ndim}-D")
    batched = log_probs.ndim == 3
    batch = log_probs.shape[1] if batched else 1
    steps, classes = log_probs.shape[0], log_probs.shape[-1]
    if log_probs.dtype not in (D.float32, D.float64):
        raise _not_implemented("ctc_loss_cpu", log_probs.dtype)
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    in_len = _lengths("input_lengths", input_lengths, batch)
    tg_len = _lengths("target_lengths", target_lengths, batch)
    if in_len is not None:
        if in_len.size and in_len.min() < 0:
            raise RuntimeError(
                f"Expected input_lengths to have value at least 0, but got value {in_len.min()} (while checking "
                "arguments for ctc_loss_allocate_outputs)"
            )
        if in_len.size and in_len.max() > steps:
            raise RuntimeError(
                f"Expected input_lengths to have value at most {steps}, but got value {in_len.max()} (while checking "
                "arguments for ctc_loss_allocate_outputs)"
            )
    if tg_len is not None:
        if tg_len.size and tg_len.min() < 0:
            raise RuntimeError(
                f"Expected target_lengths to have value at least 0, but got value {tg_len.min()} (while checking "
                "arguments for ctc_loss_allocate_outputs)"
            )
        padded = targets.ndim == 2 and batched
        need = int(tg_len.max()) if padded and tg_len.size else int(tg_len.sum())
        have = targets.shape[1] if padded else targets.numel()
        if need > have:
            dim = 1 if padded else 0
            raise RuntimeError(
                f"Expected tensor to have size at least {need} at dimension {dim}, but got size {have} for argument "
                "#2 'targets' (while checking arguments for ctc_loss_allocate_outputs)"
            )
    return batch, in_len, tg_len


def _ctc_loss_meta(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification loss (Graves et al., 2006).

    The negative log-probability of each target sequence summed over all its
    alignments with the input frames, computed by the forward algorithm in log
    space (vectorised over the batch). ``'mean'`` divides each loss by its target
    length (at least 1) before averaging over the batch.

    Args:
        log_probs (Tensor): ``(T, N, C)`` or ``(T, C)`` log-probabilities (``log_softmax`` output),
            float32 or float64.
        targets (Tensor): class indices (never ``blank``): padded ``(N, S)``, or the concatenation of the
            ``N`` targets, 1-D.
        input_lengths (Tensor or sequence of int): ``(N,)`` frames used per sample, ``<= T``.
        target_lengths (Tensor or sequence of int): ``(N,)`` target lengths.
        blank (int): the blank class.
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        zero_infinity (bool): replace infinite losses (impossible alignments) by 0.

    Returns:
        Tensor: ``(N,)`` with ``'none'`` (0-dim for an unbatched input), else 0-dim.

    Raises:
        RuntimeError: for lengths out of range or of the wrong count, or ``blank`` outside ``[0, C)``.
        ValueError: for an unknown reduction.
        NotImplementedError: for dtypes other than float32 and float64.

    Example:
        >>> import ember
        >>> log_probs = ember.log(ember.full((2, 1, 2), 0.5))
        >>> ember.ctc_loss(log_probs, ember.tensor([[1]]), [2], [1], reduction="sum")
        tensor(0.2877)
    """
    batch, _, _ = _ctc_checks(log_probs, targets, input_lengths, target_lengths, blank, reduction)
    shape = (batch,) if log_probs.ndim == 3 else ()
    return MetaArray(_loss_shape(shape, reduction), log_probs._data.dtype)


def _ctc_padded_targets(targets, tg_len, batched):
    """Targets as a padded ``(N, S)`` int64 numpy array."""
    t = targets._data.astype(np.int64)
    if batched and t.ndim == 2:
        return t
    flat = t.reshape(-1)
    width = int(tg_len.max()) if tg_len.size else 0
    out = np.zeros((tg_len.size, width), np.int64)
    starts = np.concatenate([[0], np.cumsum(tg_len)[:-1]])
    for n, (s, length) in enumerate(zip(starts, tg_len)):  # one slice per sample, not per element
        out[n, :length] = flat[s:s + length]
    return out


def _logsumexp3(a, b, c):
    top = np.maximum(np.maximum(a, b), c)
    safe = np.where(np.isneginf(top), 0, top)
    with np.errstate(all="ignore"):
        return safe + np.log(np.exp(a - safe) + np.exp(b - safe) + np.exp(c - safe))


def _ctc_loss_cpu(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    batch, in_len, tg_len = _ctc_checks(log_probs, targets, input_lengths, target_lengths, blank, reduction)
    batched = log_probs.ndim == 3
    lp = log_probs._data.astype(np.float64)
    if not batched:
        lp = lp[:, None, :]
    steps, _, classes = lp.shape
    tgt = _ctc_padded_targets(targets, tg_len, batched)
    width = tgt.shape[1]
    states = 2 * width + 1
    if width and np.any((tgt < 0) | (tgt >= classes)):
        raise RuntimeError(f"ctc_loss: target labels must be in [0, {classes})")
    ext = np.full((batch, states), blank, np.int64)
    ext[:, 1::2] = tgt
    skip = np.zeros((batch, states), bool)
    if states > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    neg_inf = np.full((batch, 1), -np.inf)
    alpha = np.full((batch, states), -np.inf)
    if steps:
        first = np.take_along_axis(lp[0], ext, axis=1)
        alpha[:, 0] = first[:, 0]
        if states > 1:
            alpha[:, 1] = np.where(tg_len > 0, first[:, 1], -np.inf)
    for t in range(1, steps):
        emit = np.take_along_axis(lp[t], ext, axis=1)
        prev1 = np.concatenate([neg_inf, alpha[:, :-1]], axis=1)
        prev2 = np.concatenate([neg_inf, neg_inf, alpha[:, :-2]], axis=1)[:, :states]
        prev2 = np.where(skip, prev2, -np.inf)
        new = _logsumexp3(alpha, prev1, prev2) + emit
        alpha = np.where((t < in_len)[:, None], new, alpha)
    rows = np.arange(batch)
    end_blank = alpha[rows, 2 * tg_len]
    end_label = np.where(tg_len > 0, alpha[rows, np.maximum(2 * tg_len - 1, 0)], -np.inf)
    loss = -np.logaddexp(end_blank, end_label)
    empty = in_len == 0
    loss = np.where(empty, np.where(tg_len == 0, -0.0, np.inf), loss)
    if zero_infinity:
        loss = np.where(np.isinf(loss), 0.0, loss)
    dtype = log_probs._data.dtype
    if reduction == "mean":
        return np.asarray((loss / np.maximum(tg_len, 1)).mean() if batch else np.nan).astype(dtype)
    if reduction == "sum":
        return np.asarray(loss.sum()).astype(dtype)
    return (loss if batched else loss.reshape(())).astype(dtype)


def _ctc_loss_decomp(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
                     zero_infinity=False):
    from .._creation import tensor as as_tensor

    batched = log_probs.ndim == 3
    lp = log_probs if batched else _E.unsqueeze(log_probs, 1)
    steps, batch, _ = lp.shape
    device = lp.device
    def as_lengths(value):
        return value if isinstance(value, Tensor) else as_tensor(list(value), device=device)

    lengths_in, lengths_tg = as_lengths(input_lengths), as_lengths(target_lengths)
    lengths_in, lengths_tg = lengths_in.reshape(-1).to(D.int64), lengths_tg.reshape(-1).to(D.int64)
    # padded (N, S) targets, blank beyond each length
    if batched and targets.ndim == 2:
        width = targets.shape[1]
        positions = _E.arange(width, device=device)
        in_range = positions.reshape(1, -1) < lengths_tg.reshape(-1, 1)
        labels = targets.to(D.int64)
    else:
        flat = targets.reshape(-1).to(D.int64)
        width = int(_E.amax(lengths_tg).item()) if batch else 0
        positions = _E.arange(width, device=device)
        in_range = positions.reshape(1, -1) < lengths_tg.reshape(-1, 1)
        starts = _E.cumsum(lengths_tg, 0) - lengths_tg
        index = starts.reshape(-1, 1) + positions.reshape(1, -1)
        index = _E.where(in_range, index, _E.zeros_like(index))
        labels = _E.index_select(flat, 0, index.reshape(-1)).reshape(batch, width) if flat.numel() else \
            _E.zeros((batch, width), dtype=D.int64, device=device)
    labels = _E.where(in_range, labels, _E.full_like(labels, blank))
    # the extended label sequence: blank, l1, blank, l2, ..., blank
    blanks = _E.full_like(labels, blank)
    ext = _E.cat([_E.stack([blanks, labels], 2).reshape(batch, 2 * width),
                  _E.full((batch, 1), blank, dtype=D.int64, device=device)], 1)
    states = 2 * width + 1
    skip = _E.cat([_E.zeros((batch, min(2, states)), dtype=D.bool, device=device),
                   _E.logical_and(ext[:, 2:] != blank, ext[:, 2:] != ext[:, :-2])], 1)
    neg = _E.full((batch, 1), -math.inf, dtype=lp.dtype, device=device)
    first = _E.gather(lp[0], 1, ext)
    state = _E.arange(states, device=device).reshape(1, -1)
    start = _E.logical_or(state == 0, _E.logical_and(state == 1, (lengths_tg > 0).reshape(-1, 1)))
    alpha = _E.where(start, first, _E.full_like(first, -math.inf))
    for t in range(1, steps):
        emit = _E.gather(lp[t], 1, ext)
        prev1 = _E.cat([neg, alpha[:, :-1]], 1)
        prev2 = _E.cat([neg, neg, alpha[:, :-2]], 1)[:, :states]
        prev2 = _E.where(skip, prev2, _E.full_like(prev2, -math.inf))
        new = _E.logsumexp(_E.stack([alpha, prev1, prev2]), 0) + emit
        alpha = _E.where((lengths_in > t).reshape(-1, 1), new, alpha)
    end_blank = _E.gather(alpha, 1, (lengths_tg * 2).reshape(-1, 1)).reshape(-1)
    end_label = _E.gather(alpha, 1, _E.clamp(lengths_tg * 2 - 1, min=0).reshape(-1, 1)).reshape(-1)
    end_label = _E.where(lengths_tg > 0, end_label, _E.full_like(end_label, -math.inf))
    loss = -_E.logaddexp(end_blank, end_label)
    impossible = _E.where(lengths_tg == 0, _E.zeros_like(loss), _E.full_like(loss, math.inf))
    loss = _E.where(lengths_in == 0, impossible, loss)
    if zero_infinity:
        loss = _E.where(_E.isinf(loss), _E.zeros_like(loss), loss)
    if reduction == "mean":
        return _E.mean(loss / _E.clamp(lengths_tg, min=1).to(loss.dtype))
    if reduction == "sum":
        return _E.sum(loss)
    return loss if batched else loss.reshape(())


ctc_loss = _composite("ctc_loss", _ctc_loss_meta, cpu=_ctc_loss_cpu, decomposition=_ctc_loss_decomp, tags=_NN)
