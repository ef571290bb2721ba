"""``ember.nn.init``: values against closed forms and distribution moments against numpy."""

import math

import numpy as np
import pytest

import ember
from ember.nn import init


def _sample(shape, seed=0):
    ember.manual_seed(seed)
    return ember.empty(*shape)


@pytest.mark.parametrize(
    "name,param,expected",
    [
        ("linear", None, 1.0),
        ("conv2d", None, 1.0),
        ("sigmoid", None, 1.0),
        ("tanh", None, 5.0 / 3),
        ("relu", None, math.sqrt(2.0)),
        ("leaky_relu", None, math.sqrt(2.0 / (1 + 0.01**2))),
        ("leaky_relu", 0.2, math.sqrt(2.0 / 1.04)),
        ("selu", None, 0.75),
    ],
)
def test_calculate_gain(name, param, expected):
    assert init.calculate_gain(name, param) == pytest.approx(expected)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("foo")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_uniform_normal_moments_and_generator():
    w = init.uniform_(_sample((200, 200)), -2.0, 3.0).numpy()
    assert w.min() >= -2.0 and w.max() < 3.0
    assert w.mean() == pytest.approx(0.5, abs=0.03)
    assert w.var() == pytest.approx(25 / 12, rel=0.03)
    w = init.normal_(_sample((200, 200)), 1.0, 2.0).numpy()
    assert w.mean() == pytest.approx(1.0, abs=0.03)
    assert w.std() == pytest.approx(2.0, rel=0.02)
    a = init.normal_(ember.empty(5, 5), generator=ember.Generator().manual_seed(3)).numpy()
    b = init.normal_(ember.empty(5, 5), generator=ember.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(a, b)


def test_constant_ones_zeros_eye():
    w = ember.empty(3, 4)
    np.testing.assert_array_equal(init.constant_(w, 0.3).numpy(), np.full((3, 4), 0.3, np.float32))
    np.testing.assert_array_equal(init.ones_(w).numpy(), np.ones((3, 4)))
    np.testing.assert_array_equal(init.zeros_(w).numpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(init.eye_(w).numpy(), np.eye(3, 4))
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(ember.empty(2, 2, 2))


def test_init_under_no_grad_on_leaf():
    w = ember.empty(3, 4).requires_grad_()
    init.kaiming_uniform_(w)
    assert w.grad_fn is None and w.requires_grad


@pytest.mark.parametrize("groups", [1, 2])
def test_dirac_preserves_input(groups):
    import ember.nn.functional as F

    w = init.dirac_(ember.empty(4, 4 // groups, 3, 3), groups=groups)
    x = ember.randn(1, 4, 5, 5)
    np.testing.assert_allclose(F.conv2d(x, w, padding=1, groups=groups).numpy(), x.numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="3, 4, or 5"):
        init.dirac_(ember.empty(2, 2))


def test_xavier_kaiming_bounds_and_std():
    fan_in, fan_out = 300 * 9, 200 * 9
    w = init.xavier_uniform_(_sample((200, 300, 3, 3)), gain=2.0).numpy()
    a = 2.0 * math.sqrt(6.0 / (fan_in + fan_out))
    assert np.abs(w).max() <= a and np.abs(w).max() > 0.99 * a
    w = init.xavier_normal_(_sample((200, 300, 3, 3))).numpy()
    assert w.std() == pytest.approx(math.sqrt(2.0 / (fan_in + fan_out)), rel=0.02)
    w = init.kaiming_uniform_(_sample((200, 300, 3, 3)), a=math.sqrt(5)).numpy()
    bound = 1 / math.sqrt(fan_in)  # gain sqrt(2/6) * sqrt(3 / fan_in)
    assert np.abs(w).max() <= bound * (1 + 1e-6) and np.abs(w).max() > 0.99 * bound
    w = init.kaiming_normal_(_sample((200, 300, 3, 3)), mode="fan_out", nonlinearity="relu").numpy()
    assert w.std() == pytest.approx(math.sqrt(2.0 / fan_out), rel=0.02)
    with pytest.raises(ValueError, match="Mode fan_foo not supported"):
        init.kaiming_uniform_(ember.empty(3, 3), mode="fan_foo")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(ember.empty(3))


def test_trunc_normal_against_scipy_moments():
    w = init.trunc_normal_(_sample((300, 300)), mean=0.5, std=1.0, a=-1.0, b=2.0).numpy()
    assert w.min() >= -1.0 and w.max() <= 2.0
    # Closed-form mean and variance of N(0.5, 1) truncated to [-1, 2] (alpha=-1.5, beta=1.5: symmetric).
    alpha, beta = -1.5, 1.5
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    z = 0.5 * (math.erf(beta / math.sqrt(2)) - math.erf(alpha / math.sqrt(2)))
    var = 1 + (alpha * phi(alpha) - beta * phi(beta)) / z
    assert w.mean() == pytest.approx(0.5, abs=0.01)
    assert w.var() == pytest.approx(var, rel=0.02)


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (4, 3, 2, 2)])
def test_orthogonal(shape):
    w = init.orthogonal_(ember.empty(*shape), gain=2.0).numpy().reshape(shape[0], -1)
    rows, cols = w.shape
    if rows <= cols:
        np.testing.assert_allclose(w @ w.T, 4 * np.eye(rows), atol=1e-5)
    else:
        np.testing.assert_allclose(w.T @ w, 4 * np.eye(cols), atol=1e-5)


def test_sparse():
    w = init.sparse_(ember.empty(10, 20), sparsity=0.25, std=0.5).numpy()
    np.testing.assert_array_equal((w == 0).sum(axis=0), np.full(20, 3))  # ceil(0.25 * 10)
    assert w[w != 0].std() == pytest.approx(0.5, rel=0.2)


def test_deprecated_alias_warns():
    with pytest.warns(FutureWarning, match="nn.init.uniform_"):
        init.uniform(ember.empty(2))
