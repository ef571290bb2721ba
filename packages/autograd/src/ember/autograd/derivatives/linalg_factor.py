"""Derivatives of the factorizations (``ember._ops.linalg_factor``): Cholesky, QR, LU.

Cholesky (``A = L L^H``): with ``Phi(M)`` the lower triangle of ``M`` with its
diagonal halved, ``gA = sym(L^{-H} Phi(L^H gL) L^{-1})``, ``sym(S) = (S + S^H) / 2``
(Murray, "Differentiation of the Cholesky decomposition", 2016). The gradient
is Hermitian, PyTorch's convention, although the op reads only the lower
triangle: it is the gradient with respect to a Hermitian input. Two
triangular solves, no inverse.

QR (``m >= n``, reduced): ``gA = (gQ + Q copyltu(M)) R^{-H}`` with
``M = R gR^H - gQ^H Q``; wide matrices split ``A = Q [R1 R2]``. LU (``A = P L U``):
``gA = P L^{-H} [tril(L^H gL, -1) + triu(gU U^H)] U^{-H}`` for square matrices,
and the extra coupling of the rectangular blocks for tall and wide ones. LDL has
no derivative (as in PyTorch).
"""

from __future__ import annotations

import ember
from ember._ops._dispatch import state as _dispatch_state
from ember.cuda.kernels import linalg as _cuda_linalg

from .._table import derivative, nondifferentiable, through_decomposition
from ._helpers import mH


def cholesky_backward(grad, L, upper):
    if not _dispatch_state.grad_enabled and L.device.type == "cuda":
        # a backward pass that records nothing (no create_graph): the same formula straight on cuBLAS (one
        # GEMM, two trsm, three kernels) instead of a dozen dispatched ops; None for calls it does not take
        fast = _cuda_linalg.cholesky_backward(grad, L, upper)
        if fast is not None:
            return fast
    if upper:  # U = L^H
        L, grad = mH(L), mH(grad)
    M = ember.matmul(mH(L), grad)
    phi = M.tril() - 0.5 * ember.diag_embed(M.diagonal(dim1=-2, dim2=-1))
    X = ember.linalg.solve_triangular(mH(L), phi, upper=True)
    S = ember.linalg.solve_triangular(L, X, upper=False, left=False)
    return 0.5 * (S + mH(S))


derivative("linalg_cholesky", A=lambda grad, result, upper: cholesky_backward(grad, result, upper))
derivative("linalg_cholesky_ex", A=lambda grads, results, upper: cholesky_backward(grads[0], results[0], upper))
through_decomposition("cholesky")


# -- QR ----------------------------------------------------------------------------------------------


def _copyltu(M):
    """The Hermitian matrix with ``M``'s strict lower triangle mirrored above and ``M``'s real diagonal."""
    lower = M.tril(-1)
    return lower + mH(lower) + ember.diag_embed(M.diagonal(dim1=-2, dim2=-1).real.to(M.dtype))


def _qr_backward_tall(gQ, gR, Q, R):
    """``A = Q R`` with ``m >= n`` (reduced): ``gA = (gQ + Q copyltu(M)) R^{-H}``, ``M = R gR^H - gQ^H Q``."""
    M = ember.matmul(R, mH(gR)) - ember.matmul(mH(gQ), Q)
    b = gQ + ember.matmul(Q, _copyltu(M))
    return ember.linalg.solve_triangular(mH(R), b, upper=False, left=False)


def qr_backward(grads, results, A, mode):
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                           "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    m, n = A.shape[-2], A.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    gQ, gR = grads
    Q, R = results
    if m >= n:
        return _qr_backward_tall(gQ, gR, Q, R)
    # wide: A = Q [R1 R2] with R1 square; A's last n - m columns Y = Q R2
    Y = A[..., :, m:]
    gR1, gR2 = gR[..., :, :m], gR[..., :, m:]
    gX = _qr_backward_tall(gQ + ember.matmul(Y, mH(gR2)), gR1, Q, R[..., :, :m])
    return ember.cat([gX, ember.matmul(Q, gR2)], -1)


derivative("linalg_qr", A=qr_backward)
through_decomposition("qr")


# -- LU ----------------------------------------------------------------------------------------------


def _square_lu_backward(L, U, gL, gU):
    """``gA'`` of ``A' = L U`` (square, no permutation): ``L^{-H} [tril(L^H gL, -1) + triu(gU U^H)] U^{-H}``."""
    inner = ember.matmul(mH(L), gL).tril(-1) + ember.matmul(gU, mH(U)).triu()
    X = ember.linalg.solve_triangular(mH(L), inner, upper=True, unitriangular=True)
    return ember.linalg.solve_triangular(mH(U), X, upper=False, left=False)


def lu_backward(P, L, U, gL, gU):
    """Gradient of ``A = P L U`` (any shape) from the gradients of ``L`` and ``U``."""
    m, n = L.shape[-2], U.shape[-1]
    if m == n:
        return ember.matmul(P, _square_lu_backward(L, U, gL, gU))
    if m < n:  # A = P L [U1 U2]: U2 = L^{-1} P^T A2 also moves with L
        U1, U2 = U[..., :, :m], U[..., :, m:]
        gU1, gU2 = gU[..., :, :m], gU[..., :, m:]
        gA2 = ember.linalg.solve_triangular(mH(L), gU2, upper=True, unitriangular=True)
        gL_total = gL - ember.matmul(gA2, mH(U2))
        gA1 = _square_lu_backward(L, U1, gL_total, gU1)
        return ember.matmul(P, ember.cat([gA1, gA2], -1))
    # A = P [L1; L2] U: L2 = A2 U^{-1} also moves with U
    L1, L2 = L[..., :n, :], L[..., n:, :]
    gL1, gL2 = gL[..., :n, :], gL[..., n:, :]
    gA2 = ember.linalg.solve_triangular(mH(U), gL2, upper=False, left=False)
    gU_total = gU - ember.matmul(mH(L2), gA2)
    gA1 = _square_lu_backward(L1, U, gL1, gU_total)
    return ember.matmul(P, ember.cat([gA1, gA2], -2))


def _lu_factor_grad(gLU, LU, pivots):
    P, L, U = ember.lu_unpack(LU, pivots)
    k = min(LU.shape[-2], LU.shape[-1])
    gL = gLU[..., :, :k].tril(-1)
    gU = gLU[..., :k, :].triu()
    return lu_backward(P, L, U, gL, gU)


derivative("linalg_lu_factor_ex", A=lambda grads, results: _lu_factor_grad(grads[0], results[0], results[1]))
derivative("linalg_lu_factor", A=lambda grads, results: _lu_factor_grad(grads[0], results[0], results[1]))
derivative("_linalg_lu", A=lambda grads, results: lu_backward(results[0], results[1], results[2], grads[1], grads[2]))
through_decomposition("linalg_lu", "lu_unpack", "lu")


def _lu_unpack_backward(grads, LU_data, unpack_data):
    """``L`` and ``U`` are the strict lower and the upper part of ``LU``: their gradients go back there."""
    if not unpack_data:
        return ember.zeros_like(LU_data)
    _, gL, gU = grads
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    g = ember.zeros_like(LU_data)
    lower = ember.cat([gL.tril(-1), ember.zeros((*gL.shape[:-1], n - k), dtype=g.dtype, device=g.device)], -1)
    upper = ember.cat([gU.triu(), ember.zeros((*gU.shape[:-2], m - k, n), dtype=g.dtype, device=g.device)], -2)
    return g + lower + upper


derivative("_lu_unpack", LU_data=_lu_unpack_backward)
nondifferentiable("linalg_ldl_factor", "linalg_ldl_factor_ex")
