"""The hook-based nn.utils.weight_norm / spectral_norm and their remove_*: values against numpy
(norms, power iteration, sigma), state_dict keys, eval mode, removal, errors."""

import warnings

import numpy as np
import pytest

import ember
from ember import nn

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_values_and_keys(dim):
    m = nn.Conv1d(2, 3, 2)
    w = m.weight.detach().numpy().copy()
    nn.utils.weight_norm(m, dim=dim)
    assert list(m.state_dict()) == ["bias", "weight_g", "weight_v"]
    if dim is None:
        expected_g = np.linalg.norm(w)
    else:
        axes = tuple(a for a in range(3) if a != dim)
        expected_g = np.sqrt((w**2).sum(axis=axes, keepdims=True))
    np.testing.assert_allclose(m.weight_g.detach().numpy(), expected_g, rtol=1e-6)
    np.testing.assert_array_equal(m.weight_v.detach().numpy(), w)
    with ember.no_grad():  # doubling g doubles the weight on the next forward
        m.weight_g.mul_(2.0)
    x = ember.randn(1, 2, 5)
    np.testing.assert_allclose(m(x).detach().numpy(), nn.functional.conv1d(x, ember.tensor(2 * w), m.bias).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert isinstance(m.weight, ember.Tensor) and "weight" not in dict(m.named_parameters())


def test_weight_norm_gradients_reach_g_and_v():
    m = nn.utils.weight_norm(nn.Linear(3, 2, bias=False))
    v = m.weight_v.detach().numpy()
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    m(ember.tensor(x)).sum().backward()
    # d/dg of sum(x @ (g v/|v|)^T) = sum over batch of x . v/|v| per row
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    np.testing.assert_allclose(m.weight_g.grad.numpy(), (x.sum(0) @ (v / norms).T)[:, None], rtol=1e-5)
    assert m.weight_v.grad is not None and m.weight_v.grad.shape == (2, 3)


def test_remove_weight_norm_restores_a_parameter():
    m = nn.utils.weight_norm(nn.Linear(3, 2))
    with ember.no_grad():
        m.weight_g.mul_(3.0)
    expected = (m.weight_v * (m.weight_g / m.weight_v.norm(dim=1, keepdim=True))).detach().numpy()
    nn.utils.remove_weight_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"] and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(m.weight.detach().numpy(), expected, rtol=1e-6)
    assert not m._forward_pre_hooks
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in Linear"):
        nn.utils.remove_weight_norm(m)


def test_weight_norm_errors_and_warning():
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        m = nn.utils.weight_norm(nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"):
        nn.utils.weight_norm(m)
    with pytest.raises(ValueError, match="can't have uninitialized parameters"):
        nn.utils.weight_norm(nn.LazyLinear(3))


def _power_iteration(w, u, v, steps):
    for _ in range(steps):
        v = w.T @ u
        v /= np.linalg.norm(v)
        u = w @ v
        u /= np.linalg.norm(u)
    return u, v


def test_spectral_norm_matches_numpy_power_iteration():
    m = nn.utils.spectral_norm(nn.Linear(5, 4), n_power_iterations=3)
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert m.state_dict()._metadata[""]["spectral_norm"] == {"weight.version": 1}
    w = m.weight_orig.detach().numpy().astype(np.float64)
    u0 = m.weight_u.numpy().astype(np.float64)
    m(ember.zeros(1, 5))
    u, v = _power_iteration(w, u0, None, 3)
    np.testing.assert_allclose(m.weight_u.numpy(), u, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.weight_v.numpy(), v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.weight.detach().numpy(), w / (u @ w @ v), rtol=1e-5)


def test_spectral_norm_converges_to_the_largest_singular_value():
    m = nn.utils.spectral_norm(nn.Conv2d(3, 4, 3), n_power_iterations=50)
    # singular values 4, 2, 1, 0.5: the power iteration's error shrinks by (2/4)**50, whatever the random start
    rng = np.random.default_rng(0)
    q_left, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    q_right, _ = np.linalg.qr(rng.standard_normal((27, 4)))
    weight = (q_left * np.array([4.0, 2.0, 1.0, 0.5])) @ q_right.T
    with ember.no_grad():
        m.weight_orig.copy_(ember.tensor(weight.reshape(4, 3, 3, 3), dtype=ember.float32))
    m(ember.zeros(1, 3, 3, 3))
    w = m.weight_orig.detach().numpy().reshape(4, -1)
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    np.testing.assert_allclose(m.weight.detach().numpy().reshape(4, -1), w / sigma, rtol=1e-4)


def test_spectral_norm_eval_keeps_vectors_and_transposed_conv_uses_dim_1():
    m = nn.utils.spectral_norm(nn.ConvTranspose2d(2, 5, 2))
    assert m.weight_u.shape == (5,) and m.weight_v.shape == (8,)
    m.eval()
    u = m.weight_u.numpy().copy()
    m(ember.zeros(1, 2, 3, 3))
    np.testing.assert_array_equal(m.weight_u.numpy(), u)


def test_spectral_norm_gradient_flows_to_orig():
    m = nn.utils.spectral_norm(nn.Linear(3, 3))
    m(ember.randn(2, 3)).sum().backward()
    assert m.weight_orig.grad is not None and float(m.weight_orig.grad.abs().sum()) > 0


def test_remove_spectral_norm_and_errors():
    m = nn.utils.spectral_norm(nn.Linear(3, 2))
    m(ember.randn(1, 3))
    expected = m.weight.detach().numpy().copy()
    nn.utils.remove_spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"]
    assert "spectral_norm" not in m.state_dict()._metadata[""]
    np.testing.assert_allclose(m.weight.detach().numpy(), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in Linear"):
        nn.utils.remove_spectral_norm(m)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        nn.utils.spectral_norm(nn.utils.spectral_norm(nn.Linear(2, 2)))
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        nn.utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(KeyError):
        nn.utils.spectral_norm(nn.Linear(2, 2), name="nope")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.utils.spectral_norm(nn.Linear(2, 2))  # not deprecated: no warning
