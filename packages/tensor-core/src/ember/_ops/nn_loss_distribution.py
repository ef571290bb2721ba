"""ember.nn.functional: the losses of a target under a predicted distribution (``kl_div``, ``poisson_nll_loss``,
``gaussian_nll_loss``).

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules and :mod:`ember._ops._loss_common`
for the checks shared by the loss modules.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype as D
from .._grad_mode import no_grad
from .._meta import MetaArray
from .._tensor import Tensor
from ._loss_common import _check_loss_tensors
from ._nn_common import (
    _E,
    _NN,
    _NN_ONLY,
    _REDUCTIONS,
    _common_dtype,
    _composite,
    _compute,
    _compute_dtype,
    _float_result,
    _kernel_reduction,
    _legacy_reduction,
    _loss_shape,
    _not_implemented,
    _number,
    _reduce,
    _reduce_np,
    _reduction,
)
from ._pointwise_helpers import _torch_name
from ._shapes import broadcast_shapes

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


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
