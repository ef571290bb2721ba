"""ember.nn.functional: the margin, ranking and embedding losses.

``margin_ranking_loss``, ``hinge_embedding_loss``, ``soft_margin_loss``, the multi-label and
multi-class margin losses, ``cosine_embedding_loss`` and ``triplet_margin_loss``.

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules and :mod:`ember._ops._loss_common`
for the checks shared by the loss modules.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._loss_common import _any_off_cpu, _check_loss_tensors
from ._nn_common import (
    _E,
    _NN,
    _NN_ONLY,
    _REDUCTIONS,
    _check_negatable,
    _check_optional_tensor,
    _common_dtype,
    _composite,
    _compute,
    _compute_dtype,
    _difference,
    _distance_dtype,
    _float_result,
    _fmt,
    _kernel_reduction,
    _legacy_reduction,
    _logsigmoid_np,
    _logsigmoid_values,
    _loss_shape,
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
