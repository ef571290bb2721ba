"""Derivatives of the spectral decompositions (``ember._ops.linalg_eigen``).

SVD ``A = U diag(S) V^H`` (thin, ``k = min(m, n)``), with ``E_ij = s_j^2 - s_i^2``
(1 on the diagonal) and ``skew(M) = M - M^H``::

    gA = U [ (skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS) + i Im diag(U^H gU) / S ] V^H
         + (I - U U^H) gU S^{-1} V^H + U S^{-1} gV^H (I - V V^H)

Hermitian eigenproblem ``A = V diag(L) V^H``, with ``E_ij = L_j - L_i``::

    gA = V [ diag(gL) + (V^H gV) / E ] V^H, made Hermitian (the op reads one triangle).

General eigenproblem ``A V = V diag(L)`` with unit-norm columns, ``E_ij = conj(L_j - L_i)``::

    gA = V^{-H} [ diag(gL) + (V^H gV - V^H V Re diag(V^H gV)) / E ] V^H

Singular vectors and eigenvectors are defined up to a phase per column; a
loss that depends on it has no gradient, and the backward raises PyTorch's
error (the imaginary part of the diagonal of ``U^H gU + V^H gV``, resp.
``V^H gV``, must vanish). Repeated values make ``E`` vanish: the gradient of
the vectors is then infinite, as in PyTorch; the values alone
(``svdvals``, ``eigvalsh``, ``eigvals``) stay differentiable.
"""

from __future__ import annotations

import ember

from .._table import derivative, through_decomposition
from ._helpers import may_contribute, mH

_SVD_GAUGE = (
    "svd_backward: The singular vectors in the complex case are specified up to multiplication by e^{i phi}. "
    "The specified loss function depends on this phase term, making it ill-defined."
)
_EIGH_GAUGE = (
    "linalg_eigh_backward: The eigenvectors in the complex case are specified up to multiplication by e^{i phi}. "
    "The specified loss function depends on this quantity, so it is ill-defined."
)
_EIG_GAUGE = (
    "linalg_eig_backward: The eigenvectors in the complex case are specified up to multiplication by e^{i phi}. "
    "The specified loss function depends on this quantity, so it is ill-defined."
)


def _diag(M):
    return M.diagonal(dim1=-2, dim2=-1)


def _with_unit_diagonal(E):
    n = E.shape[-1]
    eye = ember.eye(n, dtype=ember.bool, device=E.device)
    return ember.where(eye, ember.ones((), dtype=E.dtype, device=E.device), E)


def _check_gauge(imag_diag, message):
    """Raise ``message`` when the loss moves with the phase of the vectors (a nonzero imaginary diagonal)."""
    with ember.no_grad():
        if imag_diag.numel() and bool((imag_diag.abs() > 1e-6 * (1 + imag_diag.abs().amax())).any()):
            raise RuntimeError(message)


def _is_zero(t):
    return t is None


def svd_backward(grads, results, A, full_matrices):
    gU, gS, gVh = grads
    U, S, Vh = results
    m, n = A.shape[-2], A.shape[-1]
    k = S.shape[-1]
    if full_matrices and m != n:  # only the first k vectors are determined by A
        U, Vh = U[..., :, :k], Vh[..., :k, :]
        gU, gVh = gU[..., :, :k], gVh[..., :k, :]
    if k == 0:
        return ember.zeros_like(A)
    dtype = A.dtype
    S_c = S.to(dtype)
    ret = ember.diag_embed(gS.to(dtype))
    vectors = may_contribute(gU) or may_contribute(gVh)
    if not vectors:
        return ember.matmul(U * S_c.new_ones(()).to(dtype), ember.matmul(ret, Vh))
    V, gV = mH(Vh), mH(gVh)
    UhgU = ember.matmul(mH(U), gU)
    VhgV = ember.matmul(Vh, gV)
    if A.is_complex():
        _check_gauge((_diag(UhgU) + _diag(VhgV)).imag, _SVD_GAUGE)
    S2 = S * S
    E = _with_unit_diagonal(S2.unsqueeze(-2) - S2.unsqueeze(-1)).to(dtype)
    skew_u, skew_v = UhgU - mH(UhgU), VhgV - mH(VhgV)
    inner = (skew_u * S_c.unsqueeze(-2) + S_c.unsqueeze(-1) * skew_v) / E
    eye = ember.eye(k, dtype=ember.bool, device=A.device)
    inner = ember.where(eye, ember.zeros((), dtype=dtype, device=A.device), inner)
    ret = ret + inner
    if A.is_complex():
        ret = ret + ember.diag_embed(1j * _diag(UhgU).imag / S).to(dtype)
    gA = ember.matmul(U, ember.matmul(ret, Vh))
    if m > k:  # the part of gU outside U's column space
        gA = gA + ember.matmul((gU - ember.matmul(U, UhgU)) / S_c.unsqueeze(-2), Vh)
    if n > k:
        gA = gA + ember.matmul(U, mH((gV - ember.matmul(V, VhgV)) / S_c.unsqueeze(-2)))
    return gA


def svdvals_backward(grad, A):
    U, S, Vh = ember.linalg.svd(A, full_matrices=False)
    return ember.matmul(U * grad.to(A.dtype).unsqueeze(-2), Vh)


def eigh_backward(grads, results, A):
    gL, gV = grads
    L, V = results
    dtype = A.dtype
    VhgV = ember.matmul(mH(V), gV)
    if A.is_complex():
        _check_gauge(_diag(VhgV).imag, _EIGH_GAUGE)
    E = _with_unit_diagonal(L.unsqueeze(-2) - L.unsqueeze(-1)).to(dtype)
    inner = VhgV / E
    n = L.shape[-1]
    eye = ember.eye(n, dtype=ember.bool, device=A.device)
    inner = ember.where(eye, gL.to(dtype).unsqueeze(-1).expand(*gL.shape, n), inner)
    gA = ember.matmul(V, ember.matmul(inner, mH(V)))
    return 0.5 * (gA + mH(gA))


def eigvalsh_backward(grad, A, UPLO):
    _, V = ember.linalg.eigh(A, UPLO)
    return ember.matmul(V * grad.to(A.dtype).unsqueeze(-2), mH(V))


def eig_backward(grads, results, A):
    gL, gV = grads
    L, V = results
    VhgV = ember.matmul(mH(V), gV)
    _check_gauge(_diag(VhgV).imag, _EIG_GAUGE)
    # unit-norm eigenvectors: remove the component of gV that would change their norm
    VhV = ember.matmul(mH(V), V)
    VhgV = VhgV - VhV * _diag(VhgV).real.to(V.dtype).unsqueeze(-2)
    E = _with_unit_diagonal((L.unsqueeze(-2) - L.unsqueeze(-1)).conj())
    inner = VhgV / E
    n = L.shape[-1]
    eye = ember.eye(n, dtype=ember.bool, device=A.device)
    inner = ember.where(eye, gL.unsqueeze(-1).expand(*gL.shape, n), inner)
    gA = ember.linalg.solve(mH(V), ember.matmul(inner, mH(V)))
    return gA if A.is_complex() else gA.real


def eigvals_backward(grad, A, result):
    _, V = ember.linalg.eig(A)
    gA = ember.linalg.solve(mH(V), ember.matmul(ember.diag_embed(grad), mH(V)))
    return gA if A.is_complex() else gA.real


derivative("linalg_svd", A=svd_backward)
derivative("linalg_svdvals", A=svdvals_backward)
derivative("linalg_eigh", A=eigh_backward)
derivative("linalg_eigvalsh", A=eigvalsh_backward)
derivative("linalg_eig", A=eig_backward)
derivative("linalg_eigvals", A=eigvals_backward)
through_decomposition("svd")
