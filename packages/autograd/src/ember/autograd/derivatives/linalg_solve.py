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
from ember._ops._dispatch import state as _dispatch_state

from .._table import derivative, nondifferentiable, through_decomposition
from ._helpers import may_contribute, mH
from .linalg_factor import _lu_factor_grad


def _inv_backward(grad, result):
    xh = mH(result)
    return -ember.matmul(ember.matmul(xh, grad), xh)


def _inv_ex_backward(grads, results):
    return _inv_backward(grads[0], results[0])


def _is_vector_rhs(A, B):
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve_lu_backward(grads, results, A, B, left, output_mask):
    """``X = A^{-1} B`` with ``A``'s LU factorization kept from the forward: ``gB`` is one ``getrs`` with
    ``A^H``, ``gA = -gB X^H`` (``-X^H gB`` for ``X A = B``)."""
    grad, (X, LU, pivots, _) = grads[0], results
    vector = _is_vector_rhs(A, B)
    if (left and not vector and output_mask[0] and grad._device.type == "cuda" and not _dispatch_state.grad_enabled
            and not may_contribute(grads[1])):
        # a backward pass that records nothing, on the GPU: one getrs and one GEMM on the arrays
        from ember.cuda.kernels import linalg as cuda_linalg

        fast = cuda_linalg.solve_backward(grad, X, LU, pivots)
        if fast is not None:
            return fast
    if vector:
        grad, X = (grad.unsqueeze(-1), X.unsqueeze(-1)) if left else (grad.unsqueeze(-2), X.unsqueeze(-2))
    gB = ember.linalg.lu_solve(LU, pivots, grad, left=left, adjoint=True)
    gA = None
    if output_mask[0]:
        gA = -ember.matmul(gB, mH(X)) if left else -ember.matmul(mH(X), gB)
        gLU = grads[1]
        if may_contribute(gLU):  # LU is an output too: second derivatives reach A through it
            gA = gA + _lu_factor_grad(gLU, LU, pivots)
    if vector:
        gB = gB.squeeze(-1) if left else gB.squeeze(-2)
    return gA, gB


def _triangular_grads(grad, A, result, upper, left, unitriangular, output_mask):
    gB = ember.linalg.solve_triangular(mH(A), grad, upper=not upper, left=left, unitriangular=unitriangular)
    gA = None
    if output_mask[0]:
        gA = -ember.matmul(gB, mH(result)) if left else -ember.matmul(mH(result), gB)
        gA = gA.triu(1 if unitriangular else 0) if upper else gA.tril(-1 if unitriangular else 0)
    return gA, gB


derivative("linalg_inv", A=_inv_backward)
derivative("linalg_inv_ex", A=_inv_ex_backward)
derivative("_linalg_solve_lu", joint={("A", "B"): _solve_lu_backward})
through_decomposition("linalg_solve", "linalg_solve_ex")
derivative("linalg_solve_triangular", joint={("A", "B"): _triangular_grads})
through_decomposition("inverse")


# -- LU solves, least squares ----------------------------------------------------------------------------


def _lu_solve_grads(grad, LU, pivots, B, result, left, adjoint, output_mask):
    gB = ember.linalg.lu_solve(LU, pivots, grad, left=left, adjoint=not adjoint)
    gLU = None
    if output_mask[0]:
        X = result
        if left:
            gA = -ember.matmul(X, mH(gB)) if adjoint else -ember.matmul(gB, mH(X))
        else:
            gA = -ember.matmul(mH(gB), X) if adjoint else -ember.matmul(mH(X), gB)
        # A = P L U: back to the compact LU's strict lower (L) and upper (U) parts
        P, L, U = ember.lu_unpack(LU, pivots)
        pga = ember.matmul(mH(P), gA)
        gLU = ember.matmul(pga, mH(U)).tril(-1) + ember.matmul(mH(L), pga).triu()
    return gLU, gB


derivative("linalg_lu_solve", joint={("LU", "B"): _lu_solve_grads})
through_decomposition("lu_solve", "triangular_solve")


def _hermitian_part_times_factor(S, L, upper):
    """``(S + S^H) L`` (``U (S + S^H)`` when ``upper``): the gradient of ``L`` in ``A = L L^H`` (``U^H U``) from
    ``A``'s gradient ``S``, with ``L`` taken as a full matrix, as PyTorch's formulas have it."""
    H = S + mH(S)
    return ember.matmul(L, H) if upper else ember.matmul(H, L)


def _cholesky_solve_grads(grad, B, L, upper, result, output_mask):
    gB = ember.cholesky_solve(grad, L, upper)
    gL = None
    if output_mask[1]:
        gL = -_hermitian_part_times_factor(ember.matmul(gB, mH(result)), L, upper)
    return gB, gL


def _cholesky_inverse_backward(grad, L, upper, result):
    # A^{-1}'s gradient back to A is -A^{-H} G A^{-H}; then through A = L L^H
    gA = -ember.matmul(ember.matmul(mH(result), grad), mH(result))
    return _hermitian_part_times_factor(gA, L, upper)


derivative("cholesky_solve", joint={("B", "L"): _cholesky_solve_grads})
derivative("cholesky_inverse", L=_cholesky_inverse_backward)
nondifferentiable("linalg_ldl_solve")


def pinv_backward(G, A, P):
    """Gradient of ``A`` from ``G``, the gradient of ``P = pinv(A)`` (Golub and Pereyra, 1973):
    ``-P^H G P^H + (I - A P) G^H P P^H + P^H P G^H (I - P A)``. Finite wherever the rank is locally constant,
    repeated singular values included (unlike a route through the SVD)."""
    Ph, Gh = mH(P), mH(G)
    term = -ember.matmul(ember.matmul(Ph, G), Ph)
    left_null = Gh - ember.matmul(A, ember.matmul(P, Gh))  # (I - A P) G^H
    term = term + ember.matmul(left_null, ember.matmul(P, Ph))
    right_null = Gh - ember.matmul(ember.matmul(Gh, P), A)  # G^H (I - P A)
    return term + ember.matmul(ember.matmul(Ph, P), right_null)


def _lstsq_grads(grads, A, B, results, rcond, driver, output_mask):
    """``solution = pinv(A) B``; ``residuals_j = ||A x_j - b_j||^2`` at the optimum, whose gradients are
    ``2 E diag(g) X^H`` for ``A`` and ``-2 E diag(g)`` for ``B`` (``E = A X - B``; the optimality of ``X``
    removes its own variation)."""
    gX, g_res = grads[0], grads[1]
    X, residuals = results[0], results[1]
    vector = B.dim() == A.dim() - 1
    if vector:
        gX, B, X = gX.unsqueeze(-1), B.unsqueeze(-1), X.unsqueeze(-1)
    P = ember.linalg.pinv(A) if rcond is None else ember.linalg.pinv(A, rtol=rcond)
    gA = pinv_backward(ember.matmul(gX, mH(B)), A, P) if output_mask[0] else None
    gB = ember.matmul(mH(P), gX) if output_mask[1] else None
    if residuals.numel() and may_contribute(g_res):
        g = g_res.unsqueeze(-1) if vector else g_res
        E = ember.matmul(A, X) - B
        weighted = 2 * E * g.to(E.dtype).unsqueeze(-2)
        if gA is not None:
            gA = gA + ember.matmul(weighted, mH(X))
        if gB is not None:
            gB = gB - weighted
    if vector and gB is not None:
        gB = gB.squeeze(-1)
    return gA, gB


derivative("_linalg_lstsq", joint={("A", "B"): _lstsq_grads})
through_decomposition("linalg_lstsq")
