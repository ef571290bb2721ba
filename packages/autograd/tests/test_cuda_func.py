"""ember.func on the ``cuda`` device: vmap, per-sample gradients, jacobians and forward AD against the CPU.

Each test runs on CPU (the oracle) and on the GPU and checks that results stay on the device.
They need a GPU (``@pytest.mark.cuda``) and skip elsewhere, with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
import ember.nn as nn
from ember.func import debug, functional_call, grad, hessian, jacfwd, jacrev, vmap
from ember.testing import assert_close

pytestmark = pytest.mark.cuda


def _both(*shape, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape)
    return ember.tensor(values), ember.tensor(values, device="cuda")


def _check(cpu, gpu):
    assert gpu.device.type == "cuda"
    assert_close(gpu.cpu(), cpu, rtol=1e-6, atol=1e-8)


def test_vmap_and_jacobians_on_cuda():
    (x, xg), (w, wg) = _both(4, 5), _both(3, 5, seed=1)

    def f(t, w):
        return nn.functional.linear(t, w).tanh().softmax(-1)

    with debug.fallbacks() as report:
        _check(vmap(f, in_dims=(0, None))(x, w), vmap(f, in_dims=(0, None))(xg, wg))
        _check(jacrev(f)(x[0], w), jacrev(f)(xg[0], wg))
        _check(jacfwd(f)(x[0], w), jacfwd(f)(xg[0], wg))
        g = lambda t: (t.sin() * t).sum() * t.sum()  # noqa: E731
        _check(hessian(g)(x[0]), hessian(g)(xg[0]))
    assert dict(report) == {}


def test_per_sample_cnn_gradients_on_cuda():
    ember.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3)).double()
    params = {k: v.detach() for k, v in net.named_parameters()}
    net_g = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3)).double().to("cuda")
    params_g = {k: v.to("cuda") for k, v in params.items()}
    (x, xg) = _both(5, 1, 6, 6)
    y = ember.tensor([0, 2, 1, 1, 0])

    def loss(model):
        return lambda p, xi, yi: nn.functional.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])

    cpu = vmap(grad(loss(net)), in_dims=(None, 0, 0))(params, x, y)
    gpu = vmap(grad(loss(net_g)), in_dims=(None, 0, 0))(params_g, xg, y.to("cuda"))
    for name in params:
        _check(cpu[name], gpu[name])


def test_forward_ad_on_cuda():
    (x, xg), (v, vg) = _both(6), _both(6, seed=2)
    results = []
    for t, tangent in ((x, v), (xg, vg)):
        with fwAD.dual_level():
            out = (fwAD.make_dual(t, tangent).exp() * t.cos()).cumsum(0)
            results.append(fwAD.unpack_dual(out).tangent)
    _check(results[0], results[1])


def test_randomness_on_cuda():
    x = ember.ones(4, 100, device="cuda")
    out = vmap(lambda t: nn.functional.dropout(t, 0.5), randomness="different")(x)
    assert out.device.type == "cuda" and not bool((out[0] == out[1]).all().cpu())


def test_forward_mode_rules_and_sliced_hessian_on_cuda():
    (x, xg), (v, vg) = _both(2, 6), _both(2, 6, seed=3)

    def f(t):
        return t.sort(-1)[0].amax(0) + t.var(1).sum() + ember.maximum(t, t.flip(1)).clamp(-1, 1)[0]

    with debug.jvp_fallbacks() as report:
        (out, tangent), (out_g, tangent_g) = ember.func.jvp(f, (x,), (v,)), ember.func.jvp(f, (xg,), (vg,))
        _check(jacfwd(f)(x), jacfwd(f)(xg))
    assert dict(report) == {}
    _check(out, out_g)
    _check(tangent, tangent_g)
    with debug.fallbacks() as loops:  # slicing the input: CopySlices' double backward stays batched
        _check(hessian(lambda t: (t[:, 1:] ** 3).sum())(x), hessian(lambda t: (t[:, 1:] ** 3).sum())(xg))
    assert dict(loops) == {}
