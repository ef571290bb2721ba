"""Gradients of ember.special's own ops: gradcheck (float64 finite differences) at chosen points, second
derivatives, PyTorch's values at the non-smooth points, and the errors and non-differentiable outputs that
PyTorch has (zeta's and the incomplete gamma functions' first argument; the Bessel functions, ``airy_ai``
and the orthogonal polynomials).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sp

import ember
import ember.special as S
from ember.autograd import gradcheck, gradgradcheck


def _leaf(values):
    return ember.tensor(values, dtype=ember.float64, requires_grad=True)


_REAL = [-6.0, -1.3, -0.2, 0.4, 1.7, 5.5]
_POSITIVE = [0.05, 0.4, 1.0, 2.5, 7.0]
_UNIT = [0.01, 0.2, 0.5, 0.77, 0.999]

CASES = [
    ("entr", lambda x: S.entr(x), _POSITIVE),
    ("erfcx", lambda x: S.erfcx(x), _REAL + [12.0, 40.0]),
    ("i0e", lambda x: S.i0e(x), _REAL),
    ("i1", lambda x: S.i1(x), _REAL),
    ("i1e", lambda x: S.i1e(x), _REAL),
    ("ndtr", lambda x: S.ndtr(x), _REAL),
    ("ndtri", lambda x: S.ndtri(x), _UNIT),
    ("log_ndtr", lambda x: S.log_ndtr(x), _REAL + [-20.0, -35.0]),
    ("multigammaln p=1", lambda x: S.multigammaln(x + 2, 1), _POSITIVE),
    ("multigammaln p=4", lambda x: S.multigammaln(x + 2, 4), _POSITIVE),
    ("xlog1py input", lambda x: S.xlog1py(x, ember.tensor([0.5, -0.3, 2.0, 9.0, 0.1], dtype=ember.float64)),
     _POSITIVE),
    ("xlog1py other", lambda y: S.xlog1py(ember.tensor([0.5, -0.3, 2.0, 9.0, 0.0], dtype=ember.float64), y),
     _POSITIVE),
    ("zeta other", lambda q: S.zeta(ember.tensor([1.5, 2.0, 3.0, 4.5, 9.0], dtype=ember.float64), q), _POSITIVE),
    ("zeta other, number x", lambda q: S.zeta(2.5, q), _POSITIVE),
    ("gammainc other", lambda x: S.gammainc(ember.tensor([0.5, 1.0, 2.0, 3.5, 6.0], dtype=ember.float64), x),
     _POSITIVE),
    ("gammaincc other", lambda x: S.gammaincc(ember.tensor([0.5, 1.0, 2.0, 3.5, 6.0], dtype=ember.float64), x),
     _POSITIVE),
]


@pytest.mark.parametrize("name, fn, values", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(name, fn, values):
    assert gradcheck(fn, (_leaf(values),))


@pytest.mark.parametrize("name, fn, values", CASES, ids=[c[0] for c in CASES])
def test_gradgradcheck(name, fn, values):
    assert gradgradcheck(fn, (_leaf(values),))


def _grad(fn, values):
    x = _leaf(values)
    (g,) = ember.autograd.grad(fn(x).sum(), x)
    return g.numpy()


def test_derivatives_against_closed_forms():
    x = np.array(_REAL)
    np.testing.assert_allclose(_grad(S.erfcx, _REAL), 2 * x * sp.erfcx(x) - 2 / math.sqrt(math.pi), rtol=1e-12)
    np.testing.assert_allclose(_grad(S.i1, _REAL), sp.ivp(1, x), rtol=1e-12)
    np.testing.assert_allclose(_grad(S.ndtr, _REAL), np.exp(-x * x / 2) / math.sqrt(2 * math.pi), rtol=1e-12)
    a = np.array([0.5, 1.0, 2.0, 3.5, 6.0])
    p = np.array(_POSITIVE)
    density = np.exp((a - 1) * np.log(p) - p - sp.gammaln(a))
    np.testing.assert_allclose(_grad(lambda t: S.gammainc(ember.tensor(a), t), _POSITIVE), density, rtol=1e-12)
    np.testing.assert_allclose(_grad(lambda t: S.zeta(3.0, t), _POSITIVE), -3.0 * sp.zeta(4.0, p), rtol=1e-12)


def test_values_at_the_non_smooth_points():
    # i1'(0) = i1e'(0) = 1/2 (the formula's 0/0 replaced by its limit)
    np.testing.assert_allclose(_grad(S.i1, [0.0]), [0.5])
    np.testing.assert_allclose(_grad(S.i1e, [0.0]), [0.5])
    # entr: +inf at 0, NaN below 0 (PyTorch's values)
    g = _grad(S.entr, [0.0, -1.0, 2.0])
    assert g[0] == math.inf and math.isnan(g[1]) and g[2] == pytest.approx(-(math.log(2.0) + 1))
    # xlog1py: the input's gradient is 0 where input == 0 and other <= -1; the other's 0 / 0 is NaN
    x, y = _leaf([0.0, 0.0, 2.0]), _leaf([-1.0, -2.0, 1.0])
    gx, gy = ember.autograd.grad(S.xlog1py(x, y).sum(), (x, y))
    np.testing.assert_allclose(gx.numpy(), [0.0, 0.0, math.log(2.0)])
    assert math.isnan(gy[0].item()) and gy[1].item() == 0.0 and gy[2].item() == 1.0


@pytest.mark.parametrize("call, message", [
    (lambda a, b: S.zeta(a, b), "the derivative for 'zeta' is not implemented."),
    (lambda a, b: S.gammainc(a, b), "the derivative for 'igamma: input' is not implemented."),
    (lambda a, b: S.gammaincc(a, b), "the derivative for 'igammac: input' is not implemented."),
])
def test_first_argument_gradient_raises_as_pytorch(call, message):
    a, b = _leaf([2.0, 3.0]), _leaf([1.0, 2.0])
    out = call(a, b)
    assert out.requires_grad
    with pytest.raises(NotImplementedError, match=message):
        out.sum().backward()
    # with respect to the second argument only, there is no error
    (g,) = ember.autograd.grad(call(a.detach(), b).sum(), b)
    assert np.isfinite(g.numpy()).all()


NOT_DIFFERENTIABLE = [
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
    "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
]
POLYNOMIALS = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p",
]


@pytest.mark.parametrize("name", NOT_DIFFERENTIABLE + POLYNOMIALS)
def test_non_differentiable_outputs_as_pytorch(name):
    x = _leaf([0.3, 1.2])
    out = getattr(S, name)(x) if name in NOT_DIFFERENTIABLE else getattr(S, name)(x, _leaf([2.0, 3.0]))
    assert not out.requires_grad and out.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        out.sum().backward()
