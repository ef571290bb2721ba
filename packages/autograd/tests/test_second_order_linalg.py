"""Second derivatives through linear algebra whose backward formulas skip terms for all-zero cotangents.

solve's backward skips its LU term, lstsq's its residuals term and svd's its singular-vector terms when
the cotangent of that output is all zeros. The double-vjp identity behind ``jacfwd(grad(f))`` passes
zero dummy cotangents and differentiates with respect to them, and ``hessian``/``jacrev(jacrev)`` pass
vmap batches that can't be read: the terms must be kept there. Oracle: central finite differences of
the first derivative.
"""

import numpy as np
import pytest

import ember
import ember.func as fn

_A = ember.eye(3, dtype=ember.float64) * 2 + 0.1 * ember.arange(9.0, dtype=ember.float64).reshape(3, 3)
_B = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)

def _svd_vectors(a):
    """A function of the two leading singular pairs' vectors only, invariant under their signs (the gauge)."""
    u, _, vh = ember.linalg.svd(a)
    return ((u[:, :2] @ vh[:2, :]) * _A).sum()


FUNCTIONS = {
    "solve": lambda a: ember.linalg.solve(a, _B).sum(),
    "svdvals": lambda a: ember.linalg.svdvals(a).sum(),
    "svd_vectors": lambda a: _svd_vectors(a),
    "lstsq": lambda a: ember.linalg.lstsq(ember.cat([a, a.T]), ember.cat([_B, _B])).solution.sum(),
}


def _finite_difference_hessian(f, a, eps=1e-5):
    g = fn.grad(f)
    out = np.zeros((*a.shape, *a.shape))
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            e = ember.zeros_like(a)
            e[i, j] = eps
            out[..., i, j] = ((g(a + e) - g(a - e)) / (2 * eps)).numpy()
    return out


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("transform", ["jacfwd_grad", "hessian", "jacrev_jacrev"])
def test_second_derivative_matches_finite_differences(name, transform):
    f = FUNCTIONS[name]
    make = {
        "jacfwd_grad": lambda: fn.jacfwd(fn.grad(f)),
        "hessian": lambda: fn.hessian(f),
        "jacrev_jacrev": lambda: fn.jacrev(fn.jacrev(f)),
    }[transform]
    np.testing.assert_allclose(make()(_A).numpy(), _finite_difference_hessian(f, _A), rtol=1e-5, atol=1e-7)
