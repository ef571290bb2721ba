"""Helpers shared by the distributions: broadcasting parameters, probabilities and logits, lazy properties."""

from __future__ import annotations

import numbers
from functools import update_wrapper

import ember
import ember.nn.functional as F

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits", "tril_matrix_to_vec",
           "vec_to_tril_matrix"]  # fmt: skip


def broadcast_all(*values):
    """Broadcast tensors and numbers to one shape; numbers become tensors of the first tensor's dtype and device
    (the default dtype when all are numbers).

    Raises:
        ValueError: if a value is neither a tensor nor a number.
    """
    if not all(isinstance(v, ember.Tensor) or isinstance(v, numbers.Number) for v in values):
        raise ValueError(
            "Input arguments must all be instances of numbers.Number, ember.Tensor or objects implementing "
            f"__torch_function__, got {[type(v).__name__ for v in values]}"
        )
    if not all(isinstance(v, ember.Tensor) for v in values):
        like = next((v for v in values if isinstance(v, ember.Tensor)), None)
        options = {"dtype": ember.get_default_dtype()} if like is None else {"dtype": like.dtype, "device": like.device}
        values = [v if isinstance(v, ember.Tensor) else ember.tensor(v, **options) for v in values]
    return ember.broadcast_tensors(*values)


def _expand_probs_or_logits(source, new, shape):
    """Give ``new`` the ``probs`` and/or ``logits`` that ``source`` holds, expanded to ``shape``; ``new._param``
    becomes the last one set (the ``expand`` of the distributions parametrised by either)."""
    for name in ("probs", "logits"):
        if name in source.__dict__:
            new._param = getattr(source, name).expand(shape)
            setattr(new, name, new._param)


def _set_count_and_probs_or_logits(dist, total_count, probs, logits):
    """Set ``dist.total_count`` and ``dist.probs`` or ``dist.logits`` (exactly one given), broadcast together,
    the count in the parameter's dtype; return the batch shape (the ``__init__`` of Binomial and
    NegativeBinomial).

    Raises:
        ValueError: unless exactly one of ``probs`` and ``logits`` is given.
    """
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    name, param = ("probs", probs) if probs is not None else ("logits", logits)
    count, param = broadcast_all(total_count, param)
    setattr(dist, name, param)
    dist.total_count = count.type_as(param)
    dist._param = param
    return param.size()


def _standard_normal(shape, dtype, device):
    return ember.randn(shape, dtype=dtype, device=device)


def _sum_rightmost(value, dim):
    """Sum out the ``dim`` rightmost dimensions of ``value``."""
    if dim == 0:
        return value
    return value.reshape(value.shape[: value.dim() - dim] + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    """Probabilities from logits: a sigmoid for binary ones, else a softmax over the last dimension."""
    if is_binary:
        return ember.sigmoid(logits)
    return F.softmax(logits, dim=-1)


def clamp_probs(probs):
    """``probs`` clamped into ``[eps, 1 - eps]`` (eps of its dtype), so that their logs stay finite."""
    eps = ember.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits from probabilities (clamped first): ``log p - log1p(-p)`` for binary ones, else ``log p``."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ember.log(ps_clamped) - ember.log1p(-ps_clamped)
    return ember.log(ps_clamped)


class lazy_property:
    """A property computed on first access and then stored on the instance (under the method's name), so
    that a distribution given ``probs`` computes ``logits`` only when asked (and vice versa)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with ember.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    """What a lazy property reads as on the class: a property, so that documentation tools list it."""

    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def tril_matrix_to_vec(mat, diag=0):
    """The lower triangle (from diagonal ``diag``) of the last two dimensions of ``mat``, row by row, as a vector."""
    n = mat.shape[-1]
    arange = ember.arange(n, device=mat.device)
    tril_mask = arange < arange.view(-1, 1) + (diag + 1)
    return mat[..., tril_mask]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of :func:`tril_matrix_to_vec`: a lower-triangular matrix from its vector of entries.

    Raises:
        ValueError: if ``vec``'s length is not a triangular number for ``diag``.
    """
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    eps = ember.finfo(vec.dtype).eps
    if round(n) - n > eps:
        raise ValueError(
            f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as the lower "
            "triangular part of a square D x D matrix."
        )
    n = round(n)
    mat = vec.new_zeros(vec.shape[:-1] + (n, n))
    arange = ember.arange(n, device=vec.device)
    tril_mask = arange < arange.view(-1, 1) + (diag + 1)
    mat[..., tril_mask] = vec
    return mat
