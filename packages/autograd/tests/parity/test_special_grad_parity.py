"""Gradients of ember.special against torch.special (run with ``nox -s parity``): first derivatives on
grids that include the non-smooth points (0 for ``i1``/``i1e``/``entr``, ``x == 0`` for ``xlog1py``),
second derivatives, and which arguments raise or give outputs that do not require grad.

op_db's generic gradient parity test compares every differentiable ``special_*`` op on its samples.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_GRID = [-7.0, -2.5, -0.3, 0.0, 0.2, 1.0, 3.7, 9.0]
_POSITIVE = [0.0, 0.05, 0.5, 1.0, 4.0, 12.0]
_UNIT = [0.001, 0.1, 0.5, 0.9, 0.999]

UNARY = [("entr", _POSITIVE + [-1.0]), ("erfcx", _GRID), ("i0e", _GRID), ("i1", _GRID), ("i1e", _GRID),
         ("ndtr", _GRID), ("ndtri", _UNIT), ("log_ndtr", _GRID + [-30.0]), ("expit", _GRID), ("gammaln", _UNIT),
         ("psi", _UNIT), ("erf", _GRID), ("erfinv", [-0.9, 0.0, 0.5]), ("sinc", _GRID), ("logit", _UNIT)]


def _grads(lib, fn, values, order=1):
    x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
    (g,) = lib.autograd.grad(fn(lib, x).sum(), x, create_graph=order > 1)
    if order > 1:
        (g,) = lib.autograd.grad(g.sum(), x)
    return g.detach().numpy()


@pytest.mark.parametrize("name, values", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("order", [1, 2])
def test_unary_gradients(name, values, order):
    def fn(lib, x):
        return getattr(lib.special, name)(x)

    if order == 2 and name in ("entr", "sinc"):
        values = [v for v in values if v > 0]  # (PyTorch's second derivatives at 0 / below 0 are NaN)
    np.testing.assert_allclose(_grads(ember, fn, values, order), _grads(torch, fn, values, order),
                               rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("fn", [
    lambda lib, x: lib.special.xlog1py(x, lib.tensor([-1.0, -2.0, 0.5, 3.0, 0.0, -0.5], dtype=lib.float64)),
    lambda lib, y: lib.special.xlog1py(lib.tensor([0.0, 0.0, 2.0, -1.0, 0.5, 3.0], dtype=lib.float64), y),
    lambda lib, q: lib.special.zeta(lib.tensor([1.5, 2.0, 3.0, 4.5, 9.0, 2.0], dtype=lib.float64), q),
    lambda lib, x: lib.special.gammainc(lib.tensor([0.5, 1.0, 2.0, 3.5, 6.0, 1.0], dtype=lib.float64), x),
    lambda lib, x: lib.special.gammaincc(lib.tensor([0.5, 1.0, 2.0, 3.5, 6.0, 1.0], dtype=lib.float64), x),
    lambda lib, a: lib.special.multigammaln(a + 3, 3),
])
def test_binary_gradients(fn):
    values = [0.1, 0.5, 1.0, 2.5, 7.0, 0.0]
    np.testing.assert_allclose(_grads(ember, fn, values), _grads(torch, fn, values), rtol=1e-9, atol=1e-12,
                               equal_nan=True)


@pytest.mark.parametrize("name", ["zeta", "gammainc", "gammaincc"])
def test_first_argument_raises_in_both(name):
    for lib in (torch, ember):
        a = lib.tensor([2.0, 3.0], dtype=lib.float64, requires_grad=True)
        out = getattr(lib.special, name)(a, lib.tensor([1.0, 2.0], dtype=lib.float64))
        assert out.requires_grad
        with pytest.raises(NotImplementedError, match="the derivative for '.*' is not implemented"):
            out.sum().backward()


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.special.bessel_j0(x), lambda lib, x: lib.special.modified_bessel_k1(x),
    lambda lib, x: lib.special.airy_ai(x), lambda lib, x: lib.special.spherical_bessel_j0(x),
    lambda lib, x: lib.special.scaled_modified_bessel_k0(x),
    lambda lib, x: lib.special.chebyshev_polynomial_t(x, 3), lambda lib, x: lib.special.laguerre_polynomial_l(x, x),
])
def test_non_differentiable_in_both(call):
    for lib in (torch, ember):
        x = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
        assert not call(lib, x).requires_grad
