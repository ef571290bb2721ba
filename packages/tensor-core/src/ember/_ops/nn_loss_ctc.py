"""ember.nn.functional: the connectionist temporal classification loss ``ctc_loss``.

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules and :mod:`ember._ops._loss_common`
for the checks shared by the loss modules.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._loss_common import _check_loss_tensors
from ._nn_common import (
    _E,
    _NN,
    _REDUCTIONS,
    _composite,
    _loss_shape,
    _not_implemented,
)

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


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
