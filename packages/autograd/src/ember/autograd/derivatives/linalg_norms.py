"""Derivatives of the norms (``ember._ops.linalg_norms``).

``vector_norm`` has a formula per order, with PyTorch's values at the kinks:
a zero gradient where the norm is 0 (``ord > 0``), the gradient of ``inf``
and ``-inf`` norms shared evenly among the entries that reach the extreme, and
zero for ``ord = 0``. For complex ``x``, ``|x|``'s gradient is ``sgn(x)``.
``matrix_norm`` and ``norm`` go through their decompositions (vector norms,
sums, extremes and ``svdvals``).
"""

from __future__ import annotations

import math

import ember
from ember._ops.linalg_norms import norm_dims

from .._table import derivative, through_decomposition


def _restore(t, dims, keepdim):
    """``t`` with the reduced ``dims`` back as size-1 dims (for broadcasting against the input)."""
    if not keepdim:
        for d in sorted(dims):
            t = t.unsqueeze(d)
    return t


def vector_norm_backward(grad, x, result, ord, dim, keepdim, dtype):
    if dtype is not None and dtype != x.dtype:
        x = x.to(dtype)
    dims = norm_dims("linalg.vector_norm", dim, x.dim())
    grad, norm = _restore(grad, dims, keepdim), _restore(result, dims, keepdim)
    if ord == 0:
        return ember.zeros_like(x)
    real = x.abs()
    direction = ember.sgn(x)
    if math.isinf(ord):
        hits = (real == norm).to(real.dtype)
        share = hits / hits.sum(dims, keepdim=True)
        return grad * direction * share
    if ord == 1:
        return grad * direction
    zero = norm == 0
    safe = ember.where(zero, ember.ones_like(norm), norm)
    if ord == 2:
        scale = grad / safe
        return ember.where(zero, 0.0, scale) * x
    # d/dx (sum |x|^p)^(1/p) = sgn(x) |x|^(p-1) / norm^(p-1)
    ratio = real.pow(ord - 1) / safe.pow(ord - 1)
    out = grad * direction * ratio
    return ember.where(zero | ((real == 0) & (ord < 1)), 0.0, out)


derivative("linalg_vector_norm", x=vector_norm_backward)
through_decomposition("linalg_matrix_norm", "linalg_norm")
