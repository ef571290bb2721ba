"""Derivatives of the inverses and solvers (``ember._ops.linalg_solve``).

With ``X = A^{-1} B``: ``gB = A^{-H} gX`` (a solve with ``A^H``) and
``gA = -gB X^H``; for ``X A = B`` the same on the other side. ``inv`` is the
case ``B = I``: ``gA = -X^H gX X^H``. Triangular solves keep only the
triangle of ``gA`` that the op reads (without the diagonal when
``unitriangular``). The ``_ex`` variants differentiate their first output;
``info`` has no gradient.
"""

from __future__ import annotations

import ember

from .._table import derivative, through_decomposition
from ._helpers import mH


def _inv_backward(grad, result):
    xh = mH(result)
    return -ember.matmul(ember.matmul(xh, grad), xh)


def _inv_ex_backward(grads, results):
    return _inv_backward(grads[0], results[0])


def _is_vector_rhs(A, B):
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve_grads(grad, A, B, result, left, output_mask):
    vector = _is_vector_rhs(A, B)
    if vector:
        grad, X = grad.unsqueeze(-1), result.unsqueeze(-1)
        if not left:
            grad, X = grad.transpose(-2, -1), X.transpose(-2, -1)
    else:
        X = result
    gB = ember.linalg.solve(mH(A), grad, left=left)
    gA = None
    if output_mask[0]:
        gA = -ember.matmul(gB, mH(X)) if left else -ember.matmul(mH(X), gB)
    if vector:
        gB = gB.squeeze(-1) if left else gB.squeeze(-2)
    return gA, gB


def _solve_backward(grad, A, B, result, left, output_mask):
    return _solve_grads(grad, A, B, result, left, output_mask)


def _solve_ex_backward(grads, results, A, B, left, output_mask):
    return _solve_grads(grads[0], A, B, results[0], left, output_mask)


def _triangular_grads(grad, A, result, upper, left, unitriangular, output_mask):
    gB = ember.linalg.solve_triangular(mH(A), grad, upper=not upper, left=left, unitriangular=unitriangular)
    gA = None
    if output_mask[0]:
        gA = -ember.matmul(gB, mH(result)) if left else -ember.matmul(mH(result), gB)
        gA = gA.triu(1 if unitriangular else 0) if upper else gA.tril(-1 if unitriangular else 0)
    return gA, gB


derivative("linalg_inv", A=_inv_backward)
derivative("linalg_inv_ex", A=_inv_ex_backward)
derivative("linalg_solve", joint={("A", "B"): _solve_backward})
derivative("linalg_solve_ex", joint={("A", "B"): _solve_ex_backward})
derivative("linalg_solve_triangular", joint={("A", "B"): _triangular_grads})
through_decomposition("inverse")
