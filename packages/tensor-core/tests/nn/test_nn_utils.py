"""ember.nn.utils: gradient clipping, parameter/vector conversion, parametrize, weight/spectral norm, fusion.

Values are checked against hand computations or numpy."""

import copy
import math

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn.utils import parametrizations, parametrize


def _param_with_grad(values, grad):
    p = nn.Parameter(ember.tensor(values))
    p.grad = ember.tensor(grad)
    return p


# -- clip_grad --------------------------------------------------------------------------------------


def test_clip_grad_norm_hand_computed_l2():
    p1 = _param_with_grad([0.0, 0.0], [3.0, 0.0])
    p2 = _param_with_grad([[0.0, 0.0]], [[0.0, 4.0]])
    total = nn.utils.clip_grad_norm_([p1, p2], max_norm=1.0)
    assert total.shape == ()
    assert float(total) == pytest.approx(5.0)
    coef = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(p1.grad.numpy(), [3.0 * coef, 0.0], rtol=1e-6)
    np.testing.assert_allclose(p2.grad.numpy(), [[0.0, 4.0 * coef]], rtol=1e-6)


def test_clip_grad_norm_no_scaling_below_max():
    p = _param_with_grad([0.0, 0.0], [0.3, 0.4])
    total = nn.utils.clip_grad_norm_(p, max_norm=10.0)
    assert float(total) == pytest.approx(0.5)
    np.testing.assert_allclose(p.grad.numpy(), [0.3, 0.4], rtol=1e-6)


@pytest.mark.parametrize("norm_type, expected", [(1.0, 10.0), (float("inf"), 4.0), (3.0, (1 + 8 + 27 + 64) ** (1 / 3))])
def test_clip_grad_norm_other_norms(norm_type, expected):
    p1 = _param_with_grad([0.0, 0.0], [1.0, -2.0])
    p2 = _param_with_grad([0.0, 0.0], [3.0, -4.0])
    total = nn.utils.clip_grad_norm_([p1, p2], max_norm=2.0, norm_type=norm_type)
    assert float(total) == pytest.approx(expected, rel=1e-5)
    coef = min(2.0 / (expected + 1e-6), 1.0)
    np.testing.assert_allclose(p2.grad.numpy(), [3.0 * coef, -4.0 * coef], rtol=1e-5)


def test_clip_grad_norm_skips_none_grads_and_empty():
    p = nn.Parameter(ember.ones(3))
    q = _param_with_grad([0.0], [2.0])
    assert float(nn.utils.clip_grad_norm_([p, q], 1.0)) == pytest.approx(2.0)
    assert p.grad is None
    assert float(nn.utils.clip_grad_norm_([], 1.0)) == 0.0
    with pytest.warns(UserWarning, match="empty generator"):
        nn.utils.clip_grad_norm_((x for x in []), 1.0)


def test_clip_grad_norm_nonfinite():
    p = _param_with_grad([0.0, 0.0], [float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    total = nn.utils.clip_grad_norm_([p], 1.0)  # default: scale by the non-finite norm anyway
    assert math.isinf(float(total))


def test_clip_grad_norm_does_not_record_graph():
    w = nn.Parameter(ember.tensor([1.0, 2.0]))
    (w * w).sum().backward()
    total = nn.utils.clip_grad_norm_([w], 1.0)
    assert not total.requires_grad
    np.testing.assert_allclose(w.grad.numpy(), np.array([2.0, 4.0]) / (math.sqrt(20) + 1e-6), rtol=1e-6)


def test_get_total_norm_and_clip_grads_with_norm():
    grads = [ember.tensor([1.0, 2.0]), ember.tensor([2.0])]
    total = nn.utils.get_total_norm(grads)
    assert float(total) == pytest.approx(3.0)
    p = _param_with_grad([0.0, 0.0], [1.0, 2.0])
    nn.utils.clip_grads_with_norm_([p], 1.5, total)
    np.testing.assert_allclose(p.grad.numpy(), np.array([1.0, 2.0]) * 1.5 / (3.0 + 1e-6), rtol=1e-6)


def test_clip_grad_value():
    p = _param_with_grad([0.0] * 4, [-3.0, -0.5, 0.2, 7.0])
    q = nn.Parameter(ember.ones(1))
    assert nn.utils.clip_grad_value_([p, q], clip_value=1.0) is None
    np.testing.assert_allclose(p.grad.numpy(), [-1.0, -0.5, 0.2, 1.0])
    assert q.grad is None


def test_clip_grad_norm_deprecated_alias():
    p = _param_with_grad([0.0], [4.0])
    with pytest.warns(FutureWarning):
        total = nn.utils.clip_grad_norm([p], 1.0)
    assert float(total) == pytest.approx(4.0)


# -- convert_parameters ------------------------------------------------------------------------------


def test_parameters_to_vector_and_back():
    m = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(m.parameters())
    expected = np.concatenate([m.weight.detach().numpy().ravel(), m.bias.detach().numpy()])
    np.testing.assert_array_equal(vec.detach().numpy(), expected)
    new = ember.arange(8, dtype=ember.float32)
    weight = m.weight
    nn.utils.vector_to_parameters(new, m.parameters())
    assert m.weight is weight
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(m.bias.detach().numpy(), [6.0, 7.0])
    np.testing.assert_array_equal(nn.utils.parameters_to_vector(m.parameters()).detach().numpy(), np.arange(8))


def test_parameters_to_vector_is_differentiable():
    a = nn.Parameter(ember.tensor([1.0, 2.0]))
    b = nn.Parameter(ember.tensor([[3.0]]))
    (nn.utils.parameters_to_vector([a, b]) * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(b.grad.numpy(), [[3.0]])


def test_vector_to_parameters_type_error():
    with pytest.raises(TypeError, match="expected ember.Tensor, but got"):
        nn.utils.vector_to_parameters([1.0, 2.0], [nn.Parameter(ember.ones(2))])


# -- parametrize -------------------------------------------------------------------------------------


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class Double(nn.Module):
    def forward(self, X):
        return 2 * X

    def right_inverse(self, X):
        return X / 2


class SplitSum(nn.Module):
    """Parametrized by two tensors: forward(a, b) = a + b, right_inverse(X) = (X, 0)."""

    def forward(self, a, b):
        return a + b

    def right_inverse(self, X):
        return X.clone(), ember.zeros_like(X)


def test_register_parametrization_forward_and_grads():
    m = nn.Linear(3, 3)
    w0 = m.weight.detach().numpy().copy()
    original = m.weight
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear"
    assert isinstance(m, nn.Linear)
    assert parametrize.type_before_parametrizations(m) is nn.Linear
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert m.parametrizations.weight.original is original
    sym = np.triu(w0) + np.triu(w0, 1).T
    np.testing.assert_allclose(m.weight.detach().numpy(), sym)
    x = ember.randn(4, 3)
    out = m(x)
    np.testing.assert_allclose(out.detach().numpy(), x.numpy() @ sym.T + m.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    # d(sum(x @ W_sym.T))/dW_sym[i, j] = sum_n x[n, j]; folded onto the upper triangle.
    g = np.tile(x.numpy().sum(0), (3, 1))
    expected = np.triu(g) + np.triu(g.T, 1)
    np.testing.assert_allclose(original.grad.numpy(), expected, rtol=1e-5)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert "weight" not in dict(m.named_parameters())
    assert "parametrizations.weight.original" in dict(m.named_parameters())


def test_right_inverse_on_register_and_assignment():
    m = nn.Linear(2, 2)
    w0 = m.weight.detach().numpy().copy()
    parametrize.register_parametrization(m, "weight", Double())
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), w0 / 2, rtol=1e-6)
    np.testing.assert_allclose(m.weight.detach().numpy(), w0, rtol=1e-6)
    m.weight = ember.tensor([[2.0, 4.0], [6.0, 8.0]])
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(m.weight.detach().numpy(), [[2.0, 4.0], [6.0, 8.0]])


def test_right_inverse_returning_tuple():
    m = nn.Linear(2, 3)
    w0 = m.weight.detach().numpy().copy()
    parametrize.register_parametrization(m, "weight", SplitSum())
    plist = m.parametrizations.weight
    assert not plist.is_tensor and plist.ntensors == 2
    assert not hasattr(plist, "original")
    assert isinstance(plist.original0, nn.Parameter) and isinstance(plist.original1, nn.Parameter)
    np.testing.assert_allclose(plist.original0.detach().numpy(), w0)
    np.testing.assert_array_equal(plist.original1.detach().numpy(), np.zeros((3, 2)))
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    m(ember.ones(1, 2)).sum().backward()
    np.testing.assert_array_equal(plist.original1.grad.numpy(), np.ones((3, 2)))
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear
    np.testing.assert_allclose(m.weight.detach().numpy(), w0)


def test_chained_parametrizations_and_removal():
    m = nn.Linear(3, 3)
    w0 = m.weight.detach().numpy().copy()
    original = m.weight
    parametrize.register_parametrization(m, "weight", Symmetric())
    parametrize.register_parametrization(m, "weight", Double())
    assert len(m.parametrizations.weight) == 2
    sym = np.triu(w0) + np.triu(w0, 1).T
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * sym, rtol=1e-6)
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=True)
    assert type(m) is nn.Linear
    assert not hasattr(m, "parametrizations")
    assert m.weight is original  # the same Parameter object, now holding the parametrized value
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * sym, rtol=1e-6)
    assert list(m.state_dict()) == ["bias", "weight"]  # re-registered last, as in PyTorch


def test_remove_parametrizations_leave_unparametrized():
    m = nn.Linear(2, 2)
    w0 = m.weight.detach().numpy().copy()
    parametrize.register_parametrization(m, "weight", Double())
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_allclose(m.weight.detach().numpy(), w0 / 2, rtol=1e-6)
    assert isinstance(m.weight, nn.Parameter)


def test_parametrize_buffer_and_two_tensors():
    m = nn.Linear(2, 2)
    m.register_buffer("scale", ember.tensor([1.0, -1.0]))
    parametrize.register_parametrization(m, "scale", Double())
    parametrize.register_parametrization(m, "bias", Double())
    assert "parametrizations.scale.original" in m.state_dict()
    assert "parametrizations.scale.original" in dict(m.named_buffers())
    np.testing.assert_allclose(m.scale.numpy(), [1.0, -1.0])
    parametrize.remove_parametrizations(m, "scale")
    assert type(m).__name__ == "ParametrizedLinear"  # bias still parametrized
    assert "scale" in dict(m.named_buffers())
    parametrize.remove_parametrizations(m, "bias")
    assert type(m) is nn.Linear


def test_parametrize_errors():
    m = nn.Linear(2, 3)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
        parametrize.register_parametrization(m, "nope", Double())

    class Flatten(nn.Module):
        def forward(self, X):
            return X.reshape(-1)

    with pytest.raises(ValueError, match="may not change the shape"):
        parametrize.register_parametrization(m, "weight", Flatten())
    assert type(m) is nn.Linear  # failed registration leaves the module unchanged
    parametrize.register_parametrization(m, "weight", Flatten(), unsafe=True)
    assert m.weight.shape == (6,)
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        parametrize.remove_parametrizations(m, "bias")
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = ember.zeros(6)


def test_cached():
    calls = []

    class Counting(nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 1.0

    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", Counting())
    calls.clear()
    _ = (m.weight, m.weight)
    assert len(calls) == 2
    with parametrize.cached():
        a = m.weight
        b = m.weight
        with parametrize.cached():
            c = m.weight
    assert a is b is c
    assert len(calls) == 3
    _ = m.weight
    assert len(calls) == 4


def test_parametrized_module_state_dict_round_trip_and_deepcopy():
    m = parametrize.register_parametrization(nn.Linear(3, 3), "weight", Symmetric())
    m2 = parametrize.register_parametrization(nn.Linear(3, 3), "weight", Symmetric())
    result = m2.load_state_dict(m.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(m2.weight.detach().numpy(), m.weight.detach().numpy())
    m3 = copy.deepcopy(m)
    assert type(m3).__name__ == "ParametrizedLinear"
    np.testing.assert_array_equal(m3.weight.detach().numpy(), m.weight.detach().numpy())
    assert m3.parametrizations.weight.original is not m.parametrizations.weight.original


def test_parametrization_follows_train_eval():
    m = nn.Linear(2, 2).eval()
    p = Double()
    parametrize.register_parametrization(m, "weight", p)
    assert not p.training
    m.train()
    assert p.training


# -- weight_norm / spectral_norm -----------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_values(dim):
    m = nn.Conv1d(3, 4, 2)
    w = m.weight.detach().numpy().copy()
    parametrizations.weight_norm(m, dim=dim)
    g = m.parametrizations.weight.original0
    v = m.parametrizations.weight.original1
    if dim is None:
        expected_g = np.linalg.norm(w)
        assert g.shape == ()
    else:
        axes = tuple(d for d in range(3) if d != dim)
        expected_g = np.sqrt((w**2).sum(axis=axes, keepdims=True))
        assert tuple(g.shape) == expected_g.shape
    np.testing.assert_allclose(g.detach().numpy(), expected_g, rtol=1e-5)
    np.testing.assert_allclose(v.detach().numpy(), w)
    np.testing.assert_allclose(m.weight.detach().numpy(), w, rtol=1e-5, atol=1e-6)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    with ember.no_grad():
        g.mul_(2.0)
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w, rtol=1e-5, atol=1e-6)


def test_weight_norm_gradients():
    m = parametrizations.weight_norm(nn.Linear(3, 2, bias=False))
    g = m.parametrizations.weight.original0
    v = m.parametrizations.weight.original1
    x = ember.randn(5, 3)
    m(x).sum().backward()
    # w = g * v / |v| (rows); d/dg_i = sum_n x_n . v_i / |v_i|
    vn = v.detach().numpy()
    norms = np.linalg.norm(vn, axis=1, keepdims=True)
    s = x.numpy().sum(0)
    np.testing.assert_allclose(g.grad.numpy(), (vn / norms) @ s[:, None], rtol=1e-5)
    gn = g.detach().numpy()
    unit = vn / norms
    expected_v = gn / norms * (s[None, :] - unit * (unit @ s)[:, None])
    np.testing.assert_allclose(v.grad.numpy(), expected_v, rtol=1e-4, atol=1e-6)


def test_weight_norm_loads_old_g_v_keys():
    m = parametrizations.weight_norm(nn.Linear(3, 2))
    old = {
        "weight_g": ember.full((2, 1), 2.0),
        "weight_v": ember.tensor([[3.0, 0.0, 4.0], [0.0, 1.0, 0.0]]),
        "bias": ember.zeros(2),
    }
    m.load_state_dict(old)
    np.testing.assert_allclose(m.weight.detach().numpy(), [[1.2, 0.0, 1.6], [0.0, 2.0, 0.0]], rtol=1e-6)


def test_spectral_norm_values():
    ember.manual_seed(0)
    m = nn.Linear(6, 4)
    w = m.weight.detach().numpy().copy()
    parametrizations.spectral_norm(m, n_power_iterations=20)
    assert list(m.state_dict()) == [
        "bias",
        "parametrizations.weight.original",
        "parametrizations.weight.0._u",
        "parametrizations.weight.0._v",
    ]
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    np.testing.assert_allclose(m.weight.detach().numpy(), w / sigma, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0], 1.0, rtol=1e-4)
    u = m.parametrizations.weight[0]._u.numpy()
    assert np.linalg.norm(u) == pytest.approx(1.0, rel=1e-5)
    # eval: no power iteration, sigma = u^T W v with the stored vectors
    m.eval()
    u0 = m.parametrizations.weight[0]._u.numpy().copy()
    v0 = m.parametrizations.weight[0]._v.numpy().copy()
    out = m.weight.detach().numpy()
    np.testing.assert_allclose(out, w / (u0 @ w @ v0), rtol=1e-6)
    np.testing.assert_array_equal(m.parametrizations.weight[0]._u.numpy(), u0)


def test_spectral_norm_one_step_matches_numpy_and_grads_flow():
    m = nn.Conv2d(2, 3, 2)
    w = m.weight.detach().numpy().copy()
    parametrizations.spectral_norm(m)
    sn = m.parametrizations.weight[0]
    v = sn._v.numpy().copy()
    wm = w.reshape(3, -1)
    u1 = wm @ v
    u1 /= np.linalg.norm(u1)
    v1 = wm.T @ u1
    v1 /= np.linalg.norm(v1)
    out = m.weight  # one training-mode power iteration
    np.testing.assert_allclose(sn._u.numpy(), u1, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out.detach().numpy(), w / (u1 @ wm @ v1), rtol=1e-4)
    m(ember.randn(1, 2, 4, 4)).sum().backward()
    assert m.parametrizations.weight.original.grad.shape == (3, 2, 2, 2)


def test_spectral_norm_dims_and_errors():
    m = parametrizations.spectral_norm(nn.ConvTranspose2d(2, 3, 2))
    assert m.parametrizations.weight[0].dim == 1
    assert m.parametrizations.weight[0]._u.shape == (3,)
    v = parametrizations.spectral_norm(nn.Linear(3, 1), name="bias")
    np.testing.assert_allclose(float(v.bias.abs().sum()), 1.0, rtol=1e-6)  # 1-d: plain normalisation
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'nope'"):
        parametrizations.spectral_norm(nn.Linear(2, 2), name="nope")
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        parametrizations.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        parametrizations.spectral_norm(nn.Linear(2, 2), dim=2)


# -- fusion ---------------------------------------------------------------------------------------------


def _randomize_bn(bn):
    with ember.no_grad():
        bn.running_mean.copy_(ember.randn(bn.num_features))
        bn.running_var.copy_(ember.rand(bn.num_features) + 0.5)
        if bn.weight is not None:
            bn.weight.copy_(ember.randn(bn.num_features))
            bn.bias.copy_(ember.randn(bn.num_features))
    return bn


@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval(bias):
    conv = nn.Conv2d(3, 4, 3, padding=1, bias=bias).eval()
    bn = _randomize_bn(nn.BatchNorm2d(4)).eval()
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    assert type(fused) is nn.Conv2d and fused is not conv
    assert fused.bias is not None
    x = ember.randn(2, 3, 5, 5)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(conv(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    if not bias:
        assert conv.bias is None  # the original is untouched


def test_fuse_conv_transpose_bn_eval():
    conv = nn.ConvTranspose2d(3, 4, 2, stride=2).eval()
    bn = _randomize_bn(nn.BatchNorm2d(4)).eval()
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=True)
    x = ember.randn(2, 3, 3, 3)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(conv(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_fuse_conv_bn_weights_hand_computed():
    w = ember.ones(2, 1, 1, 1)
    b = ember.tensor([1.0, 2.0])
    fw, fb = nn.utils.fuse_conv_bn_weights(
        w,
        b,
        ember.tensor([1.0, 0.0]),
        ember.tensor([3.0, 0.0]),
        1.0,
        ember.tensor([2.0, 1.0]),
        ember.tensor([0.5, 0.0]),
    )
    assert isinstance(fw, nn.Parameter) and isinstance(fb, nn.Parameter)
    np.testing.assert_allclose(fw.detach().numpy().ravel(), [1.0, 1.0])  # 2 / sqrt(4), 1 / sqrt(1)
    np.testing.assert_allclose(fb.detach().numpy(), [(1.0 - 1.0) * 1.0 + 0.5, 2.0])


def test_fuse_linear_bn_eval():
    lin = nn.Linear(5, 3).eval()
    bn = _randomize_bn(nn.BatchNorm1d(3)).eval()
    fused = nn.utils.fuse_linear_bn_eval(lin, bn)
    x = ember.randn(4, 5)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(lin(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        nn.utils.fuse_linear_bn_eval(lin.train(), bn)
    with pytest.raises(AssertionError, match="linear.out_features == bn.num_features"):
        nn.utils.fuse_linear_bn_eval(nn.Linear(5, 2).eval(), bn)


def test_fuse_conv_bn_requires_eval():
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        nn.utils.fuse_conv_bn_eval(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2).eval())
