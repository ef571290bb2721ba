"""ember.func jacrev/jacfwd/hessian/jvp/linearize, ember.autograd.functional, per-sample gradients and ensembling."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.autograd.functional as AF
import ember.nn as nn
from ember.func import (
    debug,
    functional_call,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    stack_module_state,
    vmap,
)


def _f64(*shape, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape))


def _numeric_jacobian(f, x, eps=1e-6):
    base = x.numpy().copy()
    out0 = f(x).numpy()
    jac = np.zeros(out0.shape + base.shape)
    for i in np.ndindex(base.shape):
        plus, minus = base.copy(), base.copy()
        plus[i] += eps
        minus[i] -= eps
        jac[(Ellipsis,) + i] = (f(ember.from_numpy(plus)).numpy() - f(ember.from_numpy(minus)).numpy()) / (2 * eps)
    return jac


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if isinstance(a, ember.Tensor) else a),
                               np.asarray(b.detach().numpy() if isinstance(b, ember.Tensor) else b),
                               rtol=tol, atol=tol)


W = _f64(3, 4, seed=5)


def _f(x):
    return (W @ x).tanh() * x.sum()


def _scalar(x):
    return (x.sin() * x).sum() + (x[:2] * x[1:3]).sum()


@pytest.mark.parametrize("transform", [jacrev, jacfwd])
def test_jacobians_match_finite_differences(transform):
    x = _f64(4)
    _close(transform(_f)(x), _numeric_jacobian(_f, x), tol=1e-5)


def test_jacobian_argnums_and_multiple_outputs():
    x, y = _f64(3), _f64(3, seed=1)
    jx, jy = jacrev(lambda a, b: a * b, argnums=(0, 1))(x, y)
    _close(jx, np.diag(y.numpy()))
    _close(jy, np.diag(x.numpy()))
    (j0, j1) = jacrev(lambda a: (a * 2, a.sum()))(x)
    _close(j0, 2 * np.eye(3))
    _close(j1, np.ones(3))


@pytest.mark.parametrize("build", [
    hessian,
    lambda f: jacrev(jacrev(f)),
    lambda f: jacfwd(jacrev(f)),
    lambda f: jacrev(jacfwd(f)),
])
def test_hessians_match_finite_differences_of_the_gradient(build):
    x = _f64(4)
    expected = _numeric_jacobian(lambda t: grad(_scalar)(t), x)
    _close(build(_scalar)(x), expected, tol=1e-5)


def test_jvp_and_linearize():
    x, v = _f64(4), _f64(4, seed=2)
    jac = _numeric_jacobian(_f, x)
    out, jv = jvp(_f, (x,), (v,))
    _close(out, _f(x))
    _close(jv, jac @ v.numpy(), tol=1e-5)
    out, fn = linearize(_f, x)
    _close(fn(v), jac @ v.numpy(), tol=1e-5)


def test_jacobians_are_vectorised():
    x = _f64(4)
    with debug.fallbacks() as report:
        jacrev(_f)(x)
        jacfwd(_f)(x)
        hessian(lambda t: (t.sin() * t).sum() * (t**2).sum())(x)
    assert dict(report) == {}
    with debug.fallbacks() as report:  # slicing the input: CopySlices' double backward is batched too
        got = hessian(_scalar)(x)
    assert dict(report) == {}
    _close(got, _numeric_jacobian(lambda t: grad(_scalar)(t), x), tol=1e-5)
    y = _f64(3, 4)
    with debug.fallbacks() as report:  # a 2-d input, rows and a column sliced, the diagonal of a view
        got = hessian(lambda t: (t[1:, ::2] ** 3).sum() + (t[:, 1] * t[0, :3]).sum() + t[:, :3].diagonal().exp().sum())(y)
    assert dict(report) == {}
    _close(got.reshape(12, 12), _numeric_jacobian(
        lambda t: grad(lambda u: (u[1:, ::2] ** 3).sum() + (u[:, 1] * u[0, :3]).sum()
                       + u[:, :3].diagonal().exp().sum())(t.reshape(3, 4)).reshape(-1), y.reshape(-1)), tol=1e-5)


@pytest.mark.parametrize("vectorize", [False, True])
def test_autograd_functional(vectorize):
    x, v, u = _f64(4), _f64(4, seed=2), _f64(3, seed=3)
    jac = _numeric_jacobian(_f, x)
    _close(AF.jacobian(_f, x, vectorize=vectorize), jac, tol=1e-5)
    hess = _numeric_jacobian(lambda t: grad(_scalar)(t), x)
    _close(AF.hessian(_scalar, x, vectorize=vectorize), hess, tol=1e-5)
    _close(AF.vjp(_f, x, u)[1], jac.T @ u.numpy(), tol=1e-5)
    _close(AF.jvp(_f, x, v)[1], jac @ v.numpy(), tol=1e-5)
    _close(AF.hvp(_scalar, x, v)[1], hess @ v.numpy(), tol=1e-5)
    _close(AF.vhp(_scalar, x, v)[1], v.numpy() @ hess, tol=1e-5)
    if vectorize:
        _close(AF.jacobian(_f, x, vectorize=True, strategy="forward-mode"), jac, tol=1e-5)
        _close(AF.hessian(_scalar, x, vectorize=True, outer_jacobian_strategy="forward-mode"), hess, tol=1e-5)
        two = AF.hessian(lambda a, b: (a * a * b).sum(), (x[:2], x[2:]), vectorize=True,
                         outer_jacobian_strategy="forward-mode")
        a, b = x[:2].numpy(), x[2:].numpy()
        _close(two[0][0], np.diag(2 * b), tol=1e-12)  # d2/da2 of sum(a^2 b)
        _close(two[0][1], np.diag(2 * a), tol=1e-12)
        _close(two[1][1], np.zeros((2, 2)), tol=1e-12)
    else:
        with pytest.raises(NotImplementedError):
            AF.jacobian(_f, x, strategy="forward-mode")


def test_autograd_functional_create_graph_and_strict():
    x = _f64(3).requires_grad_()
    jac = AF.jacobian(lambda t: t**3, x, create_graph=True)
    assert jac.requires_grad
    (g,) = ember.autograd.grad(jac.sum(), x)
    _close(g, 6 * x.detach())
    with pytest.raises(RuntimeError, match="independent"):
        AF.vjp(lambda a, b: a * 2, (x.detach(), x.detach()), ember.ones(3, dtype=ember.float64), strict=True)


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3)
        self.c2 = nn.Conv2d(4, 6, 3)
        self.fc = nn.Linear(6 * 2 * 2, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(nn.functional.relu(self.c1(x)), 2)
        return self.fc(nn.functional.relu(self.c2(x)).flatten(1))


def test_per_sample_gradients_of_a_cnn_match_a_loop():
    ember.manual_seed(0)
    net = _CNN().double()
    params = {k: v.detach() for k, v in net.named_parameters()}
    xs, ys = _f64(5, 1, 10, 10), ember.tensor([1, 3, 0, 9, 3])

    def loss(p, x, y):
        return nn.functional.cross_entropy(functional_call(net, p, (x[None],)), y[None])

    with debug.fallbacks() as report:
        batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
    assert dict(report) == {}
    for i in range(5):
        single = grad(loss)(params, xs[i], ys[i])
        for name in params:
            _close(batched[name][i], single[name], tol=1e-8)


def _digits_cnn():
    """The layers of the demo's DigitsCNN (examples/digits_cnn.py): the per-sample gradient benchmark's model."""
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.25), nn.Linear(16 * 4 * 4, 32), nn.ReLU(inplace=True),
        nn.Dropout(0.25), nn.Linear(32, 10),
    )


def test_per_sample_gradients_of_the_demo_cnn_never_loop():
    # the benchmark's workload (bench_func.py, func_per_sample_grads_cnn_vmap_b64): every op of the forward
    # pass, and of the backward pass the batching rules record, is vectorised
    ember.manual_seed(3)
    net = _digits_cnn().double().eval()
    for module in net.modules():  # running statistics that are not the defaults, so eval-mode batch norm counts
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.copy_(_f64(module.num_features, seed=7) * 0.1)
            module.running_var.copy_(_f64(module.num_features, seed=8).abs() + 0.5)
    params = {k: v.detach() for k, v in net.named_parameters()}
    buffers = {k: v.detach() for k, v in net.named_buffers()}
    xs, ys = _f64(6, 1, 8, 8, seed=5), ember.tensor([1, 3, 0, 9, 3, 7])

    def loss(p, x, y):
        return nn.functional.cross_entropy(functional_call(net, (p, buffers), (x.unsqueeze(0),)), y.unsqueeze(0))

    with debug.fallbacks() as report:
        batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
    assert dict(report) == {}
    for i in range(6):
        single = grad(loss)(params, xs[i], ys[i])
        for name in params:
            _close(batched[name][i], single[name], tol=1e-8)


def test_model_ensembling_with_stack_module_state():
    ember.manual_seed(1)
    models = [nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)) for _ in range(4)]
    params, buffers = stack_module_state(models)
    assert params["0.weight"].shape == (4, 5, 3) and params["0.weight"].requires_grad
    x = ember.randn(6, 3)
    out = vmap(lambda p, b, t: functional_call(models[0], (p, b), (t,)), in_dims=(0, 0, None))(params, buffers, x)
    _close(out, ember.stack([m(x) for m in models]), tol=1e-5)
    with pytest.raises(RuntimeError, match="at least one"):
        stack_module_state([])


def test_functional_call_tie_weights_and_strict():
    lin = nn.Linear(2, 2, bias=False)
    model = nn.Sequential(lin, lin)
    w = ember.eye(2) * 3
    out = functional_call(model, {"0.weight": w}, (ember.ones(1, 2),))
    _close(out, np.full((1, 2), 9.0))
    assert lin.weight is model[0].weight and not bool((lin.weight == w).all())  # restored
    with pytest.raises(ValueError, match="missing"):
        functional_call(model, {"0.weight": w}, (ember.ones(1, 2),), tie_weights=False, strict=True)


@pytest.mark.parametrize("stride, padding, dilation", [(1, 0, 1), (2, 1, 1), (1, 2, 2), ((2, 1), (1, 0), (1, 2))])
def test_per_sample_conv_and_linear_gradients_with_shared_weights(stride, padding, dilation):
    # samples of two images each (N=2 inside the vmap), a bias, a linear layer with several rows per sample
    w, b = _f64(3, 2, 3, 3, seed=1), _f64(3, seed=2)
    lin = _f64(4, 3, seed=3)
    xs = _f64(5, 2, 2, 7, 7, seed=4)

    def loss(w, b, lin, x):
        h = nn.functional.conv2d(x, w, b, stride, padding, dilation).tanh()  # (2, 3, H, W)
        return nn.functional.linear(h.mean((2, 3)), lin).square().sum()

    batched = vmap(grad(loss, argnums=(0, 1, 2)), in_dims=(None, None, None, 0))(w, b, lin, xs)
    for i in range(5):
        single = grad(loss, argnums=(0, 1, 2))(w, b, lin, xs[i])
        for got, expected in zip(batched, single):
            _close(got[i], expected, tol=1e-8)


def test_second_order_through_shared_weight_paths():
    # jacrev of per-sample gradients: the shared-weight products' backward is differentiable
    w, xs = _f64(3, 4, seed=1), _f64(2, 4, seed=2)

    def loss(w, x):
        return nn.functional.linear(x, w).sin().sum()

    hess = jacrev(lambda w: vmap(grad(loss), in_dims=(None, 0))(w, xs).sum(0))(w)
    expected = sum(_numeric_jacobian(lambda t, i=i: grad(loss)(t, xs[i]), w) for i in range(2))
    _close(hess, expected, tol=1e-5)


def test_forward_mode_runs_on_dual_tensors():
    x, v = _f64(4), _f64(4, seed=2)
    with debug.jvp_fallbacks() as report:
        jvp(_f, (x,), (v,))
        jacfwd(_f)(x)
    assert dict(report) == {}  # every op had a jvp rule: no backward pass ran
    with debug.jvp_fallbacks() as report:  # reverse mode inside forward mode: the double-vjp identity
        got = jacfwd(jacrev(_scalar))(x)
    assert dict(report) == {"forward-over-reverse": 1}
    _close(got, _numeric_jacobian(lambda t: grad(_scalar)(t), x), tol=1e-5)


def test_forward_mode_nests():
    xs, ones = _f64(4, 3), ember.ones(3, dtype=ember.float64)

    def f(t):
        return (t.sin() * t.sum()).softmax(0)

    with debug.fallbacks() as loops, debug.jvp_fallbacks() as report:
        batched = vmap(jacfwd(f))(xs)
    assert dict(loops) == {} and dict(report) == {}
    _close(batched, vmap(jacrev(f))(xs), tol=1e-12)
    # reverse over forward, and forward over forward
    _close(grad(lambda t: jvp(f, (t,), (ones,))[1].sum())(xs[0]), grad(lambda t: (jacrev(f)(t) @ ones).sum())(xs[0]),
           tol=1e-12)
    second = jvp(lambda t: jvp(f, (t,), (ones,))[1], (xs[0],), (ones,))[1]
    _close(second, jacrev(jacrev(f))(xs[0]) @ ones @ ones, tol=1e-12)


@pytest.mark.parametrize("weight_shape, rows", [((4,), 2), ((3, 4), 1), ((3, 4), 2), ((3, 4), None)])
def test_per_sample_linear_gradients_with_a_bias(weight_shape, rows):
    # the shared-weight linear path: one row or several a sample, a bias, and a 1-d weight (the matmul path)
    w, b = _f64(*weight_shape, seed=11), _f64(*weight_shape[:-1], seed=12)
    xs = _f64(5, *(() if rows is None else (rows,)), 4, seed=13)

    def loss(w, b, x):
        return nn.functional.linear(x, w, b).sin().sum()

    batched = vmap(grad(loss, argnums=(0, 1)), in_dims=(None, None, 0))(w, b, xs)
    for i in range(5):
        single = grad(loss, argnums=(0, 1))(w, b, xs[i])
        for got, expected in zip(batched, single):
            _close(got[i], expected, tol=1e-10)
