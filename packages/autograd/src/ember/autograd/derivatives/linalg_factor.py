"""Derivatives of the factorizations (``ember._ops.linalg_factor``).

Cholesky (``A = L L^H``): with ``Phi(M)`` the lower triangle of ``M`` with its
diagonal halved, ``gA = sym(L^{-H} Phi(L^H gL) L^{-1})``, ``sym(S) = (S + S^H) / 2``
(Murray, "Differentiation of the Cholesky decomposition", 2016). The gradient
is Hermitian, PyTorch's convention, although the op reads only the lower
triangle: it is the gradient with respect to a Hermitian input. Two
triangular solves, no inverse.
"""

from __future__ import annotations

import ember

from .._table import derivative, through_decomposition
from ._helpers import mH


def cholesky_backward(grad, L, upper):
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
