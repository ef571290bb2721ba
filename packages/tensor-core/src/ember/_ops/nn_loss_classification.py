"""ember.nn.functional: the classification losses (``binary_cross_entropy``, ``binary_cross_entropy_with_logits``,
``nll_loss``, ``cross_entropy``).

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules and :mod:`ember._ops._loss_common`
for the checks shared by the loss modules.
"""

from __future__ import annotations

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._float_errors import quiet
from ._loss_common import _any_off_cpu, _check_loss_tensors
from ._nn_common import (
    _E,
    _NN,
    _NN_ONLY,
    _check_floating,
    _check_optional_tensor,
    _common_dtype,
    _composite,
    _compute,
    _compute_dtype,
    _contiguous,
    _fmt,
    _kernel_reduction,
    _logsigmoid_values,
    _loss_shape,
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


def _class_last(x, moveaxis):
    """``x`` with its class dim (1, or 0 for 1-D) moved last and the rest flattened: ``(M, C)``.

    ``x`` is a numpy/CuPy array (``moveaxis=np.moveaxis``, the kernels) or a tensor (``_E.movedim``, the
    decompositions)."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    return moveaxis(x, 1, -1).reshape(-1, x.shape[1])


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
    logp = _class_last(_compute(input._data), np.moveaxis)
    return _nll_np(logp, target, weight, ignore_index, reduction, shape).astype(input._data.dtype, copy=False)


def _nll_values(logp, target, weight, ignore_index, reduction):
    """nll_loss in ember ops (decompositions)."""
    shape = _nll_checks("nll_loss", logp, target, weight)
    x = _class_last(logp, _E.movedim)
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
    x = _class_last(_compute(input._data, work), np.moveaxis)
    classes = x.shape[1]
    w = None if weight is None else _compute(weight._data, work)
    if tuple(target.shape) == tuple(input.shape):
        logp = _log_softmax_rows(x)
        t = _class_last(_compute(target._data, work), np.moveaxis)
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
    # ``work`` is float32 or float64 here, the dtypes of the C kernel: the meta accepts floating inputs only
    # and float16/bfloat16 compute in float32.
    loss = _C.cross_entropy(
        _contiguous(x), _contiguous(target._data.reshape(-1).astype(np.int64, copy=False)),
        None if w is None else _contiguous(w.reshape(-1)), int(ignore_index), float(label_smoothing),
        _C_REDUCTIONS[reduction],
    )
    loss = loss.reshape(shape) if reduction == "none" else loss
    # (a float16 sum past 65504 is inf, silently as in PyTorch)
    return quiet(lambda: loss.astype(out_dtype, copy=False))


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
