"""Derivatives of ``ember._ops.linalg_misc``.

``pinv``: the Golub-Pereyra formula (``derivatives/linalg_solve.py``), from the
result itself, finite at repeated singular values. ``matrix_exp``: the
gradient is the upper-right block of ``exp([[A^H, G], [0, A^H]])`` (Najfeld
and Havel, 1995), itself a matrix exponential, so second derivatives follow.
The composites (``matrix_power``, ``cond``, ``multi_dot``, ``householder_product``,
``tensorinv``, ``tensorsolve``, ``vander``, ``vecdot``, ``cross``, ``diagonal``,
the trapezoid rules, ...) record their decompositions; ``matrix_rank`` is an
integer count.
"""

from __future__ import annotations

import ember

from .._table import derivative, through_decomposition
from ._helpers import mH
from .linalg_solve import pinv_backward


def _matrix_exp_backward(grad, A):
    n = A.shape[-1]
    Ah = mH(A)
    top = ember.cat([Ah, grad], -1)
    bottom = ember.cat([ember.zeros_like(A), Ah], -1)
    return ember.linalg.matrix_exp(ember.cat([top, bottom], -2))[..., :n, n:]


derivative("linalg_pinv", A=lambda grad, A, result: pinv_backward(grad, A, result))
derivative("linalg_matrix_exp", A=_matrix_exp_backward)
through_decomposition(
    "pinverse", "matrix_exp", "linalg_matrix_power", "matrix_power", "linalg_matrix_rank", "linalg_cond",
    "linalg_multi_dot", "linalg_householder_product", "orgqr", "linalg_tensorinv", "linalg_tensorsolve",
    "linalg_vander", "vander", "linalg_vecdot", "linalg_cross", "linalg_diagonal", "trapezoid", "trapz",
    "cumulative_trapezoid",
)
