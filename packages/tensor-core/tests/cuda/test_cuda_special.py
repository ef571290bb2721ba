"""ember.special on cuda (cupyx.scipy.special, or the host's scipy where CuPy lacks a function) against the
CPU values; the CPU tests are tests/test_special.py. Every test needs a GPU (``@pytest.mark.cuda``).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.special as S

pytestmark = pytest.mark.cuda

_GRID = np.concatenate([np.linspace(-8.0, 8.0, 33), [0.0, 30.0, -30.0, float("inf"), -float("inf"), float("nan")]])
_POSITIVE = np.concatenate([np.linspace(0.0, 12.0, 25), [1e-6, 200.0, -1.0, float("nan")]])
_UNIT = np.linspace(0.0, 1.0, 21)

UNARY = [("airy_ai", _GRID), ("bessel_j0", _GRID), ("bessel_j1", _GRID), ("bessel_y0", _POSITIVE),
         ("bessel_y1", _POSITIVE), ("modified_bessel_i0", _GRID), ("modified_bessel_i1", _GRID),
         ("modified_bessel_k0", _POSITIVE), ("modified_bessel_k1", _POSITIVE), ("scaled_modified_bessel_k0", _POSITIVE),
         ("scaled_modified_bessel_k1", _POSITIVE), ("spherical_bessel_j0", _GRID), ("entr", _GRID), ("erfcx", _GRID),
         ("i0e", _GRID), ("i1", _GRID), ("i1e", _GRID), ("ndtr", _GRID), ("ndtri", _UNIT), ("log_ndtr", _GRID)]


@pytest.mark.parametrize("name, grid", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_unary_matches_cpu(name, grid, dtype):
    x = ember.tensor(grid, dtype=dtype)
    expected = getattr(S, name)(x)
    actual = getattr(S, name)(x.cuda())
    assert actual.device.type == "cuda" and actual.dtype == dtype
    rtol = 1e-5 if dtype is ember.float32 else 1e-10
    np.testing.assert_allclose(actual.cpu().numpy(), expected.numpy(), rtol=rtol, atol=1e-30, equal_nan=True)


@pytest.mark.parametrize("name", ["i0e", "i1e", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_scaled_bessel_at_large_arguments(name, dtype):
    # exp(-+|x|) * f(x) overflows to 0 * inf = NaN above |x| ~ 90 (float32) or ~ 710 (float64): scipy's values
    x = ember.tensor([95.0, 200.0, 800.0, 5000.0, 1e30], dtype=dtype)
    expected = getattr(S, name)(x)
    assert not np.isnan(expected.numpy()).any()
    actual = getattr(S, name)(x.cuda())
    np.testing.assert_allclose(actual.cpu().numpy(), expected.numpy(), rtol=1e-6, atol=0)


@pytest.mark.parametrize("name, a, b", [
    ("xlog1py", [0.0, 0.5, 2.0, -1.5], [-1.0, 0.0, 3.0, 0.5]),
    ("zeta", [1.5, 2.0, 4.0, 9.0], [0.5, 1.0, 2.5, 40.0]),
    ("gammainc", [0.1, 1.0, 3.5, 40.0], [0.0, 1.0, 4.0, 60.0]),
    ("gammaincc", [0.1, 1.0, 3.5, 40.0], [0.0, 1.0, 4.0, 60.0]),
    ("chebyshev_polynomial_t", [-0.9, 0.3, 1.0, 2.0], [0.0, 3.0, 5.0, 7.0]),
    ("hermite_polynomial_h", [-0.9, 0.3, 1.0, 2.0], [0.0, 3.0, 5.0, 7.0]),
    ("laguerre_polynomial_l", [-0.9, 0.3, 1.0, 2.0], [0.0, 3.0, 5.0, 7.0]),
])
def test_binary_matches_cpu(name, a, b):
    a, b = ember.tensor(a, dtype=ember.float64), ember.tensor(b, dtype=ember.float64)
    expected = getattr(S, name)(a, b)
    actual = getattr(S, name)(a.cuda(), b.cuda())
    np.testing.assert_allclose(actual.cpu().numpy(), expected.numpy(), rtol=1e-10, atol=1e-300, equal_nan=True)


def test_multigammaln_and_gradients_on_cuda():
    a = ember.tensor([2.5, 4.0, 9.0], dtype=ember.float64)
    np.testing.assert_allclose(S.multigammaln(a.cuda(), 3).cpu().numpy(), S.multigammaln(a, 3).numpy(), rtol=1e-10)
    x = ember.tensor([-2.0, 0.0, 1.5], dtype=ember.float64, device="cuda", requires_grad=True)
    (g,) = ember.autograd.grad(S.i1e(x).sum() + S.erfcx(x).sum(), x)
    xc = x.detach().cpu().requires_grad_()
    (gc,) = ember.autograd.grad(S.i1e(xc).sum() + S.erfcx(xc).sum(), xc)
    np.testing.assert_allclose(g.cpu().numpy(), gc.numpy(), rtol=1e-10)
