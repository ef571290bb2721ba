"""The optimizers' foreach (multi-tensor) paths, fused and differentiable options, and clip_grad's foreach.

Oracles: the single-tensor loop (the foreach trajectory must have its exact bits), finite differences
(differentiable=True), and PyTorch's foreach path (parity).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import optim
from ember.nn.utils import clip_grad_norm_, clip_grad_value_

SHAPES = [(3, 4), (5,), (2, 3, 2), ()]

CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.5, "maximize": True}),
    ("Adam", {}),
    ("Adam", {"amsgrad": True, "weight_decay": 0.1, "maximize": True}),
    ("AdamW", {"amsgrad": True}),
    ("AdamW", {"weight_decay": 0.3}),
    ("Adamax", {}),
    ("Adamax", {"weight_decay": 0.1, "maximize": True}),
    ("NAdam", {"weight_decay": 0.1}),
    ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("RAdam", {}),
    ("RAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("Adagrad", {}),
    ("Adagrad", {"lr_decay": 0.1, "weight_decay": 0.1, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"weight_decay": 0.1, "maximize": True}),
    ("RMSprop", {}),
    ("RMSprop", {"centered": True, "momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"momentum": 0.5, "maximize": True}),
    ("Rprop", {}),
    ("Rprop", {"maximize": True}),
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CASES)]


def _trajectory(name, kwargs, foreach, complex_param=False, steps=7, dtype=np.float32):
    """Parameters after ``steps`` steps on fixed random gradients; parameter 1 gets no gradient at step 2."""
    rng = np.random.default_rng(0)
    params = [ember.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in SHAPES]
    if complex_param:
        z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
        params.append(ember.tensor(z.astype(np.complex64), requires_grad=True))
    opt = getattr(optim, name)(params, foreach=foreach, **kwargs)
    for step in range(steps):
        for j, p in enumerate(params):
            if step == 2 and j == 1:
                p.grad = None
                continue
            g = rng.standard_normal(p.shape)
            if p.is_complex():
                g = g + 1j * rng.standard_normal(p.shape)
            p.grad = ember.tensor(g.astype(p.detach().numpy().dtype))
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


@pytest.mark.parametrize("complex_param", [False, True])
@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=IDS)
def test_foreach_trajectory_has_the_single_tensor_bits(name, kwargs, complex_param):
    single, single_opt = _trajectory(name, kwargs, False, complex_param)
    multi, multi_opt = _trajectory(name, kwargs, True, complex_param)
    for a, b in zip(single, multi):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(single, _trajectory(name, kwargs, True, steps=6)[0]))
    state_single, state_multi = single_opt.state_dict()["state"], multi_opt.state_dict()["state"]
    assert state_single.keys() == state_multi.keys()
    for k in state_single:
        for key, value in state_single[k].items():
            other = state_multi[k][key]
            if isinstance(value, ember.Tensor):
                np.testing.assert_array_equal(value.numpy(), other.numpy())


@pytest.mark.parametrize(("name", "kwargs"), CASES[:1] + CASES[4:5] + CASES[14:15], ids=["SGD", "Adam", "Adagrad"])
def test_float64_trajectories_agree_too(name, kwargs):
    single = _trajectory(name, kwargs, False, dtype=np.float64)[0]
    multi = _trajectory(name, kwargs, True, dtype=np.float64)[0]
    for a, b in zip(single, multi):
        np.testing.assert_array_equal(a, b)


def _spy(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def test_foreach_none_picks_the_multi_tensor_path_for_plain_tensors(monkeypatch):
    import ember.optim.adam as adam_module

    multi = _spy(monkeypatch, adam_module, "_multi_tensor_adam")
    single = _spy(monkeypatch, adam_module, "_single_tensor_adam")
    p = ember.nn.Parameter(ember.ones(3))
    p.grad = ember.ones(3)
    optim.Adam([p], fused=False).step()  # fused=None would pick the fused step (test_fused_adam.py)
    assert multi == ["_multi_tensor_adam"] and single == []
    optim.Adam([p], foreach=False).step()
    assert single == ["_single_tensor_adam"]
    x = ember.ones(3, requires_grad=True).clone()
    x.grad = ember.ones(3)
    optim.Adam([x], differentiable=True).step()  # differentiable: the single-tensor loop
    assert single == ["_single_tensor_adam"] * 2 and multi == ["_multi_tensor_adam"]


@pytest.mark.parametrize("name", ["SGD", "Adagrad"])  # Adam and AdamW have a fused step: test_fused_adam.py
def test_fused_true_raises_and_false_or_none_are_accepted(name):
    p = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="`fused=True` is not implemented in ember"):
        getattr(optim, name)([p], lr=0.1, fused=True)
    with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
        getattr(optim, name)([p], lr=0.1, fused=True, differentiable=True)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        getattr(optim, name)([p], lr=0.1, fused=True, foreach=True)
    for fused in (None, False):
        getattr(optim, name)([p], lr=0.1, fused=fused)


def test_foreach_true_with_differentiable_is_refused():
    x = ember.ones(2, requires_grad=True).clone()
    x.grad = ember.ones(2)
    with pytest.raises(AssertionError, match="_foreach ops don't support autograd"):
        optim.Adam([x], foreach=True, differentiable=True).step()


# -- differentiable=True: the step is recorded; gradients through unrolled steps match finite differences

A = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
W0 = np.array([0.7, -1.2, 0.4])
DIFFERENTIABLE = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"lr": 0.1}),
    ("Adam", {"lr": 0.1, "amsgrad": True, "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.1, "weight_decay": 0.2}),
    ("Adamax", {"lr": 0.1}),
    ("NAdam", {"lr": 0.1}),
    ("RAdam", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1}),
    ("Adadelta", {"lr": 0.5}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}),
    ("Rprop", {"lr": 0.1}),
]


def _loss(x):
    return (x @ ember.tensor(A) @ x) * 0.5 + ember.sin(x).sum()


def _unrolled(name, kwargs, w, steps, differentiable):
    """The loss after ``steps`` steps from ``w``, with each step's gradient taken at the current point."""
    x = w.clone() if differentiable else w.detach().clone()
    opt = getattr(optim, name)([x], differentiable=differentiable, **kwargs)
    for _ in range(steps):
        if differentiable:
            # differentiate at a clone: the gradient's graph keeps it, and the step then updates x in place
            point = x.clone()
            (grad,) = ember.autograd.grad(_loss(point), point, create_graph=True)
        else:
            point = x.detach().requires_grad_(True)
            with ember.enable_grad():
                (grad,) = ember.autograd.grad(_loss(point), point)
        x.grad = grad
        opt.step()
    return _loss(x)


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize(("name", "kwargs"), DIFFERENTIABLE, ids=[f"{n}-{i}" for i, (n, _) in
                                                                  enumerate(DIFFERENTIABLE)])
def test_gradient_through_unrolled_steps_matches_finite_differences(name, kwargs, steps):
    w = ember.tensor(W0, requires_grad=True)
    (grad,) = ember.autograd.grad(_unrolled(name, kwargs, w, steps, True), w)
    h = 1e-6
    expected = []
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        plus = _unrolled(name, kwargs, ember.tensor(W0 + e), steps, False).item()
        minus = _unrolled(name, kwargs, ember.tensor(W0 - e), steps, False).item()
        expected.append((plus - minus) / (2 * h))
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-6, atol=1e-8)
    assert np.abs(grad.numpy()).max() > 1e-3  # the update depends on w: a gradient that can be wrong


@pytest.mark.parametrize(("name", "kwargs"), [
    ("SGD", {}), ("SGD", {"momentum": 0.9}), ("Adam", {}), ("Adam", {"amsgrad": True}), ("AdamW", {"weight_decay": 0.1}),
])
def test_hypergradient_for_a_tensor_lr_matches_finite_differences(name, kwargs):
    lr = ember.tensor(0.1, dtype=ember.float64, requires_grad=True)
    w = ember.tensor(W0, requires_grad=True)
    (grad,) = ember.autograd.grad(_unrolled(name, dict(kwargs, lr=lr), w, 2, True), lr)
    h = 1e-6
    plus = _unrolled(name, dict(kwargs, lr=0.1 + h), ember.tensor(W0), 2, False).item()
    minus = _unrolled(name, dict(kwargs, lr=0.1 - h), ember.tensor(W0), 2, False).item()
    np.testing.assert_allclose(grad.item(), (plus - minus) / (2 * h), rtol=1e-6)
    assert abs(grad.item()) > 1e-2


def test_differentiable_adam_steps_with_backward_between_them():
    # the reported failure: the second step's lerp_ overwrote exp_avg, which addcdiv's node had kept
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    x = w.clone()
    opt = optim.Adam([x], lr=0.1, differentiable=True)
    for _ in range(3):
        point = x.clone()
        (x.grad,) = ember.autograd.grad((point * point).sum(), point, create_graph=True)
        opt.step()
    (grad,) = ember.autograd.grad(x.sum(), w)
    assert grad.shape == (2,) and np.isfinite(grad.numpy()).all()


# -- clip_grad foreach


def _grads():
    rng = np.random.default_rng(3)
    params = [ember.nn.Parameter(ember.zeros(*s)) for s in SHAPES]
    for p in params:
        p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32) * 3)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_foreach_has_the_loop_bits(norm_type):
    a, b = _grads(), _grads()
    total_a = clip_grad_norm_(a, 1.0, norm_type=norm_type, foreach=False)
    total_b = clip_grad_norm_(b, 1.0, norm_type=norm_type, foreach=True)
    assert total_a.item() == total_b.item()
    flat = np.concatenate([p.grad.numpy().reshape(-1) for p in _grads()])
    np.testing.assert_allclose(total_a.item(), np.linalg.norm(flat, norm_type), rtol=1e-5)
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    clipped = np.concatenate([p.grad.numpy().reshape(-1) for p in b])
    np.testing.assert_allclose(np.linalg.norm(clipped, norm_type), 1.0, rtol=1e-4)


def test_clip_grad_value_foreach():
    a, b = _grads(), _grads()
    clip_grad_value_(a, 0.5, foreach=False)
    clip_grad_value_(b, 0.5, foreach=True)
    for p, q, orig in zip(a, b, _grads()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
        np.testing.assert_array_equal(q.grad.numpy(), np.clip(orig.grad.numpy(), -0.5, 0.5))


# -- parity with PyTorch's foreach path


@pytest.mark.parity
@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=IDS)
def test_foreach_matches_torch_foreach(name, kwargs):
    import torch

    rng = np.random.default_rng(5)
    init = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(10)]
    results = []
    for lib in (ember, torch):
        params = [lib.tensor(v.copy(), dtype=lib.float64, requires_grad=True) for v in init]
        opt = getattr(lib.optim, name)(params, foreach=True, **kwargs)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = lib.tensor(g, dtype=lib.float64)
            opt.step()
        results.append([p.detach().numpy().copy() for p in params])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_list_ops_on_tensors_that_require_grad_are_recorded_per_tensor():
    w = [ember.tensor([1.0, 2.0], requires_grad=True), ember.tensor([[3.0]], requires_grad=True)]
    ys = [t * 1.0 for t in w]  # non-leaf: in-place ops on them are recorded
    ember._foreach_mul_(ys, [ember.tensor([2.0, 3.0]), ember.tensor([[4.0]])])
    ember._foreach_addcmul_(ys, w, w, 0.5)  # + 0.5 * w**2
    loss = sum((y.sum() for y in ys), ember.tensor(0.0))
    grads = ember.autograd.grad(loss, w)
    np.testing.assert_allclose(grads[0].numpy(), [2.0 + 1.0, 3.0 + 2.0])  # d/dw (c * w + 0.5 w^2) = c + w
    np.testing.assert_allclose(grads[1].numpy(), [[4.0 + 3.0]])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        ember._foreach_add_(w, 1.0)
