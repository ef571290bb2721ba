"""Derivatives of the matrix products (``ember._ops.matmul``, ``addmm``, ``tensor_products``, ``einsum``, ...).

The gradients of a product ``a @ b`` are products again: ``grad @ b^H`` for
``a`` and ``a^H @ grad`` for ``b`` (``^H``: conjugate transpose, a plain
transpose view for real tensors), so the ops with fused kernels (``matmul``,
``mm``, ``bmm``, ``mv``, ``addmm``, ...) get formulas that cost two matrix
products. The rest (``tensordot``, ``einsum``, ``kron``, ...) permute and
reshape their operands into ``matmul`` calls in their decompositions, whose
recorded backward is as fast as a formula would be.

In-place variants (``addmm_``, ...) need no entry: autograd records them as
their functional op followed by a copy.
"""

from __future__ import annotations

import ember

from .._table import derivative, through_decomposition
from ._helpers import conj, mH, scale

# -- matmul: every 1-D / 2-D / batched case ----------------------------------------------------------


def _matmul_input(grad, input, other):
    """Gradient of ``input`` in ``input @ other``; the engine sums broadcast batch dims away."""
    da, db = input.dim(), other.dim()
    if db == 1:
        if da == 1:  # dot product: a 0-d grad
            return grad * conj(other)
        return grad.unsqueeze(-1) * conj(other)  # (..., n) x (k,) -> (..., n, k)
    if da == 1:  # (k,) @ (..., k, m): the vector is the row of a 1-row matrix
        g = ember.matmul(grad.unsqueeze(-2), mH(other)).squeeze(-2)  # (..., k)
        return g if g.dim() == 1 else g.reshape(-1, g.shape[-1]).sum(0)
    return ember.matmul(grad, mH(other))


def _matmul_other(grad, input, other):
    """Gradient of ``other`` in ``input @ other``."""
    da, db = input.dim(), other.dim()
    if da == 1:
        if db == 1:
            return grad * conj(input)
        return conj(input).unsqueeze(-1) * grad.unsqueeze(-2)  # (k,) x (..., m) -> (..., k, m)
    if db == 1:  # (..., n, k) @ (k,): one vector-matrix product over all rows
        k = input.shape[-1]
        return ember.matmul(grad.reshape(-1), conj(input).reshape(-1, k))
    if db == 2 and da > 2:  # a batch times one matrix: fold the batch into rows, one product
        k = input.shape[-1]
        return ember.matmul(mH(input.reshape(-1, k)), grad.reshape(-1, grad.shape[-1]))
    return ember.matmul(mH(input), grad)


derivative("matmul", input=_matmul_input, other=_matmul_other)

derivative(
    "mm",
    input=lambda grad, mat2: ember.mm(grad, mH(mat2)),
    mat2=lambda grad, input: ember.mm(mH(input), grad),
)


def _sparse_mm_mat2(grad, input, transpose):
    """``S^H @ grad``: the op again, transposed (the sparse ``input``, a graph's opaque input, gets no gradient)."""
    if input.is_complex():
        raise NotImplementedError("the gradient of _sparse_mm (a sparse product inside a compiled graph) is "
                                  "not supported for complex tensors; run the product outside the graph")
    from ember.sparse._graph import sparse_mm

    return sparse_mm(input, grad, not transpose)


# the sparse @ dense product of a graph (ember.sparse._graph); eager products record SparseDenseMM instead
derivative("_sparse_mm", mat2=_sparse_mm_mat2, nondiff=("input",))
derivative(
    "bmm",
    input=lambda grad, mat2: ember.bmm(grad, mH(mat2)),
    mat2=lambda grad, input: ember.bmm(mH(input), grad),
)
derivative(
    "mv",
    input=lambda grad, vec: grad.unsqueeze(-1) * conj(vec),
    vec=lambda grad, input: ember.mv(mH(input), grad),
)
derivative(
    "dot",
    input=lambda grad, tensor: grad * conj(tensor),
    tensor=lambda grad, input: grad * conj(input),
)
# vdot(a, b) = sum(conj(a) * b): antiholomorphic in a, holomorphic in b
derivative(
    "vdot",
    input=lambda grad, other: conj(grad) * other,
    other=lambda grad, input: grad * input,
)

# -- beta * input + alpha * product ------------------------------------------------------------------


def _input_grad(grad, beta):
    """``beta * input``'s gradient (zeros for ``beta == 0``, which ignores ``input``, as in PyTorch)."""
    return scale(grad, beta)


derivative(
    "addmm",
    input=_input_grad,
    mat1=lambda grad, mat2, alpha: scale(ember.mm(grad, mH(mat2)), alpha),
    mat2=lambda grad, mat1, alpha: scale(ember.mm(mH(mat1), grad), alpha),
)
derivative(
    "addmv",
    input=_input_grad,
    mat=lambda grad, vec, alpha: scale(grad.unsqueeze(-1) * conj(vec), alpha),
    vec=lambda grad, mat, alpha: scale(ember.mv(mH(mat), grad), alpha),
)
derivative(
    "baddbmm",
    input=_input_grad,
    batch1=lambda grad, batch2, alpha: scale(ember.bmm(grad, mH(batch2)), alpha),
    batch2=lambda grad, batch1, alpha: scale(ember.bmm(mH(batch1), grad), alpha),
)
derivative(
    "addbmm",
    input=_input_grad,
    # (n, p) @ (b, p, m) broadcasts to the (b, n, m) gradient of every batch
    batch1=lambda grad, batch2, alpha: scale(ember.matmul(grad, mH(batch2)), alpha),
    batch2=lambda grad, batch1, alpha: scale(ember.matmul(mH(batch1), grad), alpha),
)

# -- cdist: a formula, so that zero distances get a zero gradient (as PyTorch), not NaN --------------


def _cdist_grads(grad, x1, x2, p, result, output_mask):
    if isinstance(p, ember.Tensor):
        p = p.item()
    if p == 0 or x1.shape[-2] == 0 or x2.shape[-2] == 0 or x1.shape[-1] == 0:
        return ember.zeros_like(x1), ember.zeros_like(x2)
    zero = result == 0
    if p == 2:  # as a product, without the (..., P, R, M) differences
        ratio = ember.where(zero, 0.0, grad / ember.where(zero, 1.0, result))
        g1 = g2 = None
        if output_mask[0]:
            g1 = x1 * ratio.sum(-1, keepdim=True) - ember.matmul(ratio, x2)
        if output_mask[1]:
            g2 = x2 * ratio.sum(-2).unsqueeze(-1) - ember.matmul(ratio.mT, x1)
        return g1, g2
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (..., P, R, M)
    g = grad.unsqueeze(-1)
    if p == 1:
        pair = ember.sign(diff) * g
    elif p == float("inf"):
        pair = ember.sign(diff) * (diff.abs() == result.unsqueeze(-1)) * g
    else:
        dist = result.unsqueeze(-1)
        safe = ember.where(dist == 0, 1.0, dist)
        if p < 1:  # |diff| ** (p - 1) is infinite at diff == 0; PyTorch gives those 0
            adiff = diff.abs()
            factor = ember.where(adiff == 0, 0.0, ember.pow(ember.where(adiff == 0, 1.0, adiff), p - 1))
            pair = ember.sign(diff) * factor
        else:
            pair = ember.sign(diff) * ember.pow(diff.abs(), p - 1)
        pair = ember.where(dist == 0, 0.0, pair * g / ember.pow(safe, p - 1))
    g1 = pair.sum(-2) if output_mask[0] else None
    g2 = -pair.sum(-3) if output_mask[1] else None
    return g1, g2


derivative("cdist", joint={("x1", "x2"): _cdist_grads})

# -- composites whose decomposition records matmul (as fast as a formula) -----------------------------

through_decomposition(
    "inner",
    "outer",
    "ger",
    "addr",
    "tensordot",
    "kron",
    "cross",
    "chain_matmul",
    "einsum",
)
