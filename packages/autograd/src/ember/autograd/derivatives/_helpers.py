"""Small helpers shared by the formulas (written in ember ops, so they are differentiable too)."""

from __future__ import annotations

import ember

__all__ = ["conj", "zeros_like_grad", "unsqueeze_to", "expand_reduced"]


def conj(t):
    """``t.conj()`` for complex tensors; ``t`` itself for real ones (no op recorded)."""
    if isinstance(t, ember.Tensor) and t.is_complex():
        return ember.conj_physical(t)
    if isinstance(t, complex):
        return t.conjugate()
    return t


def zeros_like_grad(t):
    """Zeros shaped like ``t`` (the gradient of a piecewise-constant op)."""
    return ember.zeros_like(t)


def unsqueeze_to(g, dims, ndim):
    """Re-insert reduced dimensions ``dims`` (already wrapped, any order) into ``g`` of a ``keepdim=False`` reduction."""
    for d in sorted(dims):
        g = g.unsqueeze(d)
    return g


def expand_reduced(g, input, dim, keepdim):
    """The gradient of a reduction over ``dim`` broadcast back to ``input``'s shape."""
    ndim = input.dim()
    if dim is None:
        dims = list(range(ndim))
    elif isinstance(dim, int):
        dims = [dim % max(ndim, 1)]
    else:
        dims = [d % max(ndim, 1) for d in dim]
    if not keepdim and ndim > 0:
        g = unsqueeze_to(g, dims, ndim)
    return g.expand(input.shape)
