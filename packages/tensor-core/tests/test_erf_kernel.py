"""ember.erf's CPU kernel (csrc/erf.cpp) against scipy.special.erf.

float32 is computed in float32 arithmetic (a Taylor series below 1, exp(-x^2) times a fitted polynomial above)
and must be within 2 ulp of scipy's float64 erf of the same inputs rounded to float32; float64 calls the C library's erf (within 4 ulp of scipy's Cephes erf: the
two libraries' own errors differ).
"""

import numpy as np
import pytest

import ember

scipy_special = pytest.importorskip("scipy.special")


def _ulps(a, b):
    """Distance in units of the last place of ``b``'s dtype."""
    spacing = np.spacing(np.abs(b).astype(b.dtype))
    return np.abs(a.astype(np.float64) - b.astype(np.float64)) / spacing.astype(np.float64)


def test_float32_within_two_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.standard_normal(200_000) * 2,
        rng.uniform(-5, 5, 200_000),
        np.linspace(-1.2, 1.2, 40_001),  # around the switch between the two approximations
        rng.uniform(-1e-3, 1e-3, 1000),
    ]).astype(np.float32)
    ours = ember.erf(ember.from_numpy(x)).numpy()
    exact = scipy_special.erf(x.astype(np.float64)).astype(np.float32)
    assert ours.dtype == np.float32
    assert _ulps(ours, exact).max() <= 2


def test_float64_matches_scipy():
    x = np.random.default_rng(1).standard_normal(100_000) * 3
    ours = ember.erf(ember.from_numpy(x)).numpy()
    assert _ulps(ours, scipy_special.erf(x)).max() <= 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 4.5, 10.0, -10.0], dtype)
    ours = ember.erf(ember.from_numpy(x)).numpy()
    expected = scipy_special.erf(x.astype(np.float64)).astype(dtype)
    np.testing.assert_allclose(ours, expected, rtol=1e-15, atol=0)
    assert np.signbit(ours[1])  # erf(-0) = -0


def test_layouts_zero_dim_half_and_threads():
    base = ember.randn(64, 300)
    t = base.t()[::2]  # not contiguous
    np.testing.assert_allclose(ember.erf(t).numpy(), scipy_special.erf(t.numpy().astype(np.float64)), rtol=2e-7,
                               atol=1e-7)
    assert ember.erf(ember.tensor(0.5)).shape == ()
    assert float(ember.erf(ember.tensor(0.5))) == pytest.approx(0.5204998778, rel=1e-7)
    assert ember.erf(ember.ones(3, dtype=ember.bfloat16)).dtype == ember.bfloat16
    x = ember.randn(1 << 17)
    previous = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = ember.erf(x).numpy()
        ember.set_num_threads(2)
        two = ember.erf(x).numpy()
    finally:
        ember.set_num_threads(previous)
    np.testing.assert_array_equal(one, two)
