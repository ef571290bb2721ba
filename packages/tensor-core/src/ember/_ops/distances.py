"""Pairwise distances: cdist."""

from __future__ import annotations

import math

import numpy as np

from .._meta import MetaArray
from .._tensor import Tensor
from ._matmul_helpers import _HALF_TYPES, _check_same_scalar_type, _check_tensor, _op, _tname
from ._registry import COMPOSITE, defop
from ._shapes import broadcast_shapes
from .matmul import matmul
from .pointwise import mul, sub
from .views import transpose, unsqueeze

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def _cdist_meta(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between each row of ``x1`` and each row of ``x2``, batched with broadcasting.

    Args:
        x1 (Tensor): ``(*B1, P, M)``, float32 or float64.
        x2 (Tensor): ``(*B2, R, M)``, the same dtype; ``B1`` and ``B2`` broadcast.
        p (float): the norm, ``p >= 0`` (``0`` counts differing coordinates, ``inf`` takes the largest difference).
        compute_mode (str): for ``p = 2``: ``"use_mm_for_euclid_dist_if_necessary"`` (a matrix product when
            ``P > 25`` or ``R > 25``), ``"use_mm_for_euclid_dist"`` (always) or
            ``"donot_use_mm_for_euclid_dist"`` (never). The matrix product is faster and less exact.

    Returns:
        Tensor: ``(*broadcast(B1, B2), P, R)``.

    Raises:
        RuntimeError: for tensors of fewer than 2 dims, different numbers of columns, non-float or different
            dtypes, or a negative ``p``.
        NotImplementedError: for float16 and bfloat16, as in PyTorch on CPU.
        ValueError: for an unknown ``compute_mode``.

    Example:
        >>> import ember
        >>> ember.cdist(ember.tensor([[0., 0.], [1., 1.]]), ember.tensor([[3., 4.]]))
        tensor([[5.0000],
                [3.6056]])
    """
    _check_tensor("cdist", "x1", 1, x1)
    _check_tensor("cdist", "x2", 2, x2)
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    a, b = x1._data, x2._data
    for name, x in (("X1", a), ("X2", b)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} X2: {b.shape[-1]}")
    for name, x in (("X1", a), ("X2", b)):
        if x.dtype.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_tname(x.dtype)}")
    _check_same_scalar_type(a.dtype, b.dtype)
    if a.dtype in _HALF_TYPES:
        raise NotImplementedError(f"\"cdist\" not implemented for '{_tname(a.dtype)}'")
    if isinstance(p, Tensor):
        p = p.item()
    if not isinstance(p, (int, float, np.number)) or isinstance(p, (complex, np.complexfloating)):
        raise TypeError(f"cdist(): argument 'p' must be float, not {type(p).__name__}")
    if not p >= 0:  # NaN too
        raise RuntimeError("cdist only supports non-negative p values")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return MetaArray(batch + (a.shape[-2], b.shape[-2]), a.dtype)


def _cdist_uses_mm(p, compute_mode, rows1, rows2):
    if p != 2:
        return False
    if compute_mode == "use_mm_for_euclid_dist":
        return True
    return compute_mode == "use_mm_for_euclid_dist_if_necessary" and (rows1 > 25 or rows2 > 25)


def _cdist_cpu(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    a, b = x1._data, x2._data
    if isinstance(p, Tensor):
        p = p.item()
    dtype = a.dtype
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    (rows1, cols), rows2 = a.shape[-2:], b.shape[-2]
    out_shape = batch + (rows1, rows2)
    if rows1 == 0 or rows2 == 0 or cols == 0 or 0 in batch:
        return np.zeros(out_shape, dtype)
    a = np.broadcast_to(a, batch + (rows1, cols))
    b = np.broadcast_to(b, batch + (rows2, cols))
    with np.errstate(all="ignore"):
        if _cdist_uses_mm(p, compute_mode, rows1, rows2):
            # |x - y|^2 = |x|^2 + |y|^2 - 2 x.y as one product of padded matrices
            norm1 = np.einsum("...i,...i->...", a, a)[..., None]
            norm2 = np.einsum("...i,...i->...", b, b)[..., None]
            left = np.concatenate([-2 * a, norm1, np.ones_like(norm1)], axis=-1)
            right = np.concatenate([b, np.ones_like(norm2), norm2], axis=-1)
            result = np.matmul(left, np.swapaxes(right, -1, -2))
            np.maximum(result, 0, out=result)
            return np.sqrt(result, out=result)
        diff = np.abs(a[..., :, None, :] - b[..., None, :, :])
        if p == 0:
            return np.count_nonzero(diff, axis=-1).astype(dtype)
        if p == 1:
            return diff.sum(axis=-1)
        if p == 2:
            return np.sqrt(np.einsum("...i,...i->...", diff, diff))
        if math.isinf(p):
            return diff.max(axis=-1)
        return np.power(np.power(diff, p).sum(axis=-1), 1.0 / p).astype(dtype, copy=False)


def _cdist_decomp(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    meta = _cdist_meta(x1, x2, p, compute_mode)
    if isinstance(p, Tensor):
        p = p.item()
    sum_, sqrt = _op("sum"), _op("sqrt")
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    if _cdist_uses_mm(p, compute_mode, rows1, rows2) and min(meta.shape + (x1.shape[-1],)) > 0:
        norm1 = sum_(mul(x1, x1), -1, keepdim=True)
        norm2 = sum_(mul(x2, x2), -1, keepdim=True)
        left = _op("cat")([mul(x1, -2), norm1, _op("ones_like")(norm1)], -1)
        right = _op("cat")([x2, _op("ones_like")(norm2), norm2], -1)
        return sqrt(_op("clamp")(matmul(left, transpose(right, -1, -2)), min=0))
    diff = _op("abs")(sub(unsqueeze(x1, -2), unsqueeze(x2, -3)))
    if p == 0:
        result = sum_(_op("ne")(diff, 0), -1).to(x1.dtype)
    elif p == 1:
        result = sum_(diff, -1)
    elif p == 2:
        result = sqrt(sum_(mul(diff, diff), -1))
    elif math.isinf(p):
        result = _op("amax")(diff, -1) if diff.shape[-1] else sum_(diff, -1)
    else:
        result = _op("pow")(sum_(_op("pow")(diff, p), -1), 1.0 / p)
    return _op("expand")(result, *meta.shape) if tuple(result.shape) != meta.shape else result


cdist = defop("cdist", _cdist_meta, cpu=_cdist_cpu, category=COMPOSITE, decomposition=_cdist_decomp)
