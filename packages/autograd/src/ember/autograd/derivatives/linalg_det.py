"""Derivatives of the determinants (``ember._ops.linalg_det``).

``d det(A) = tr(adj(A) dA)``, so the gradient of ``A`` is ``grad * adj(A)^H``
(PyTorch's conjugate-Wirtinger convention). Where ``A`` is well conditioned,
``adj(A)^H = conj(det) * A^{-H}``, one solve. At a singular matrix that product
is 0 * inf, and near one it loses ``cond(A) * eps`` of relative accuracy: where a
condition estimate from that same inverse passes ``1/sqrt(eps)`` (or a pivot is
zero) the adjugate comes from the SVD
``A = U diag(s) V^H``, ``adj(A) = det(U) det(V^H) V diag(prod_{j != i} s_j) U^H``,
which stays finite and exact at any rank (PyTorch once returned wrong values
there: its issue 104675). ``slogdet``'s gradient is ``A^{-H}`` times the
gradient of ``log det``; ``logdet`` and the top-level aliases go through
their decompositions.
"""

from __future__ import annotations

import ember
from ember._ops._dispatch import state as _dispatch_state

from .._table import derivative, through_decomposition
from ._helpers import conj, mH


def _eye_like(A):
    n = A.shape[-1]
    return ember.eye(n, dtype=A.dtype, device=A.device)


def _inverse_h_times(A, g):
    """``g[..., None, None] * A^{-H}``, as one solve (never an explicit inverse)."""
    return ember.linalg.solve(mH(A), g.unsqueeze(-1).unsqueeze(-1) * _eye_like(A))


def _losing_precision(A, inverse_h, info):
    """Which matrices the inverse cannot serve: singular (a zero pivot) or so ill-conditioned that
    ``det * A^{-1}`` keeps fewer than half the digits (a 1-norm condition estimate above ``1/sqrt(eps)``;
    the error of ``det * A^{-1}`` relative to the adjugate grows like ``cond(A) * eps``)."""
    with ember.no_grad():
        eps = 1.1e-16 if A.dtype in (ember.float64, ember.complex128) else 6e-8
        cond = ember.linalg.matrix_norm(A, 1) * ember.linalg.matrix_norm(inverse_h, float("inf"))
        return (info != 0) | ~ember.isfinite(cond) | (cond > eps**-0.5)


def adjugate_h(A):
    """``adj(A)^H`` through the SVD: finite and exact for singular matrices of any rank."""
    U, S, Vh = ember.linalg.svd(A, full_matrices=False)
    n = S.shape[-1]
    eye = ember.eye(n, dtype=ember.bool, device=A.device)
    # prod_{j != i} s_j: the product of each row of S repeated, with its own entry replaced by 1
    others = ember.where(eye, ember.ones((), dtype=S.dtype, device=A.device), S.unsqueeze(-2).expand(*S.shape, n))
    cofactors = others.prod(-1)
    phase = ember.linalg.det(U) * ember.linalg.det(Vh)
    return conj(phase).unsqueeze(-1).unsqueeze(-1) * ember.matmul(U * cofactors.to(U.dtype).unsqueeze(-2), Vh)


def det_backward(grad, A, result):
    """Gradient of ``A`` in ``det(A)``: ``grad * adj(A)^H``, as ``grad * conj(det) * A^{-H}`` (one LU solve)
    where that is accurate, through the SVD where ``A`` is singular or nearly so."""
    if A.shape[-1] == 0:
        return ember.zeros_like(A)
    if A.device.type == "cuda" and not _dispatch_state.grad_enabled:
        # a backward pass that records nothing, on the GPU: the same LU solve and precision test on the arrays
        # (one host read), without dispatching the formula's ops; None sends singular batches to the SVD below
        from ember.cuda.kernels import linalg as cuda_linalg

        fast = cuda_linalg.det_backward(grad, A, result)
        if fast is not None:
            return fast
    # the identity expanded to A's batch: a bare (n, n) identity would read as a batch of vectors when A's
    # batch shape is (n,) (PyTorch's vector rule)
    inverse_h, info = ember.linalg.solve_ex(mH(A), _eye_like(A).expand(A.shape))
    through_inverse = (grad * conj(result)).unsqueeze(-1).unsqueeze(-1) * inverse_h
    bad = _losing_precision(A, inverse_h, info)
    if not bool(bad.any()):
        return through_inverse
    through_svd = grad.unsqueeze(-1).unsqueeze(-1) * adjugate_h(A)
    if bool(bad.all()):
        return through_svd
    return ember.where(bad.unsqueeze(-1).unsqueeze(-1), through_svd, through_inverse)


def _slogdet_backward(grads, results, A):
    """``d logabsdet = Re tr(A^{-1} dA)``; the phase ``sign`` of a complex determinant moves with
    ``Im tr(A^{-1} dA)``: both reach ``A`` through ``A^{-H}``."""
    grad_sign, grad_logabsdet = grads
    sign = results[0]
    if A.shape[-1] == 0:
        return ember.zeros_like(A)
    g = grad_logabsdet.to(A.dtype)
    if A.is_complex():
        g = g + 1j * (conj(sign) * grad_sign).imag
    return _inverse_h_times(A, g)


derivative("linalg_det", A=det_backward)
derivative("linalg_slogdet", A=_slogdet_backward)
through_decomposition("det", "slogdet", "logdet")
