"""ember.optim optimizers: 20-step trajectories on a quadratic against numpy update rules, state dicts, hooks, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import optim

A = np.array([1.0, 3.0, 0.5, 2.0])
B = np.array([0.5, -1.0, 2.0, 0.0])
X0 = np.array([1.0, -2.0, 0.5, 3.0])
STEPS = 20


def _grad(x):
    """Gradient of f(x) = 0.5 * sum(a x^2) - sum(b x)."""
    return A * x - B


def _ember_run(cls, kwargs, steps=STEPS):
    x = ember.tensor(X0.copy(), dtype=ember.float64, requires_grad=True)
    a = ember.tensor(A, dtype=ember.float64)
    b = ember.tensor(B, dtype=ember.float64)
    opt = cls([x], **kwargs)
    traj = []
    for _ in range(steps):
        opt.zero_grad()
        loss = 0.5 * (a * x * x).sum() - (b * x).sum()
        loss.backward()
        opt.step()
        traj.append(x.detach().numpy().copy())
    return np.array(traj), opt, x


def _np_sgd(lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    x, buf, out = X0.copy(), None, []
    for _ in range(STEPS):
        g = _grad(x)
        g = -g if maximize else g
        g = g + weight_decay * x
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        x = x - lr * g
        out.append(x.copy())
    return np.array(out)


def _np_adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False, decoupled=False):
    x, m, v, vmax, out = X0.copy(), np.zeros(4), np.zeros(4), np.zeros(4), []
    b1, b2 = betas
    for t in range(1, STEPS + 1):
        g = _grad(x)
        g = -g if maximize else g
        if decoupled:
            x = x * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * x
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vhat = v
        if amsgrad:
            vmax = np.maximum(vmax, v)
            vhat = vmax
        x = x - lr / (1 - b1**t) * m / (np.sqrt(vhat) / math.sqrt(1 - b2**t) + eps)
        out.append(x.copy())
    return np.array(out)


def _np_rmsprop(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, maximize=False):
    x, sq, gavg, buf, out = X0.copy(), np.zeros(4), np.zeros(4), np.zeros(4), []
    for _ in range(STEPS):
        g = _grad(x)
        g = -g if maximize else g
        g = g + weight_decay * x
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            gavg = alpha * gavg + (1 - alpha) * g
            avg = np.sqrt(sq - gavg * gavg) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            x = x - lr * buf
        else:
            x = x - lr * g / avg
        out.append(x.copy())
    return np.array(out)


def _np_adagrad(lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10, maximize=False):
    x, s, out = X0.copy(), np.full(4, initial_accumulator_value), []
    for t in range(1, STEPS + 1):
        g = _grad(x)
        g = -g if maximize else g
        g = g + weight_decay * x
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        x = x - clr * g / (np.sqrt(s) + eps)
        out.append(x.copy())
    return np.array(out)


CASES = [
    (optim.SGD, {"lr": 0.1}, lambda: _np_sgd(0.1)),
    (optim.SGD, {"lr": 0.05, "momentum": 0.9}, lambda: _np_sgd(0.05, momentum=0.9)),
    (
        optim.SGD,
        {"lr": 0.05, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.1},
        lambda: _np_sgd(0.05, momentum=0.8, dampening=0.3, weight_decay=0.1),
    ),
    (optim.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True}, lambda: _np_sgd(0.05, momentum=0.9, nesterov=True)),
    (optim.SGD, {"lr": 0.01, "maximize": True}, lambda: _np_sgd(0.01, maximize=True)),
    (optim.Adam, {"lr": 0.1}, lambda: _np_adam(0.1)),
    (
        optim.Adam,
        {"lr": 0.1, "betas": (0.8, 0.99), "weight_decay": 0.1, "amsgrad": True},
        lambda: _np_adam(0.1, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True),
    ),
    (optim.Adam, {"lr": 0.05, "maximize": True}, lambda: _np_adam(0.05, maximize=True)),
    (optim.AdamW, {"lr": 0.1}, lambda: _np_adam(0.1, weight_decay=1e-2, decoupled=True)),
    (
        optim.AdamW,
        {"lr": 0.1, "weight_decay": 0.3, "amsgrad": True},
        lambda: _np_adam(0.1, weight_decay=0.3, amsgrad=True, decoupled=True),
    ),
    (optim.RMSprop, {"lr": 0.01}, lambda: _np_rmsprop(0.01)),
    (
        optim.RMSprop,
        {"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1},
        lambda: _np_rmsprop(0.01, centered=True, momentum=0.5, weight_decay=0.1),
    ),
    (optim.RMSprop, {"lr": 0.01, "alpha": 0.9, "maximize": True}, lambda: _np_rmsprop(0.01, alpha=0.9, maximize=True)),
    (optim.Adagrad, {"lr": 0.1}, lambda: _np_adagrad(0.1)),
    (
        optim.Adagrad,
        {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.5},
        lambda: _np_adagrad(0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5),
    ),
]


@pytest.mark.parametrize(("cls", "kwargs", "ref"), CASES, ids=[f"{c.__name__}-{k}" for c, k, _ in CASES])
def test_trajectory_matches_numpy(cls, kwargs, ref):
    traj, _, _ = _ember_run(cls, kwargs)
    np.testing.assert_allclose(traj, ref(), rtol=1e-10, atol=1e-12)


def test_sgd_minimizes_quadratic():
    traj, _, _ = _ember_run(optim.SGD, {"lr": 0.2, "momentum": 0.5}, steps=200)
    np.testing.assert_allclose(traj[-1], B / A, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (optim.SGD, {"lr": 0.05, "momentum": 0.9}),
        (optim.Adam, {"lr": 0.1, "amsgrad": True}),
        (optim.AdamW, {"lr": 0.1}),
        (optim.RMSprop, {"lr": 0.01, "centered": True, "momentum": 0.5}),
        (optim.Adagrad, {"lr": 0.1, "lr_decay": 0.01}),
    ],
)
def test_state_dict_round_trip_through_save_load(cls, kwargs, tmp_path):
    # Run 10 steps, save the optimizer, load it into a fresh one on a copy of the params, run 10 more:
    # the result must equal 20 uninterrupted steps.
    full, _, _ = _ember_run(cls, kwargs, steps=20)
    _, opt, x = _ember_run(cls, kwargs, steps=10)
    path = tmp_path / "opt.safetensors"
    ember.save(opt.state_dict(), path)
    loaded = ember.load(path)

    assert sorted(loaded) == ["param_groups", "state"]
    assert list(loaded["state"]) == [0]
    assert loaded["param_groups"][0]["params"] == [0]
    for key, value in opt.state_dict()["state"][0].items():
        np.testing.assert_array_equal(loaded["state"][0][key].numpy(), value.numpy())

    x2 = ember.tensor(x.detach().numpy().copy(), dtype=ember.float64, requires_grad=True)
    opt2 = cls([x2], **{**kwargs, "lr": 123.0})  # the loaded lr must win
    opt2.load_state_dict(loaded)
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    assert opt2.param_groups[0]["params"][0] is x2
    a = ember.tensor(A, dtype=ember.float64)
    b = ember.tensor(B, dtype=ember.float64)
    for _ in range(10):
        opt2.zero_grad()
        (0.5 * (a * x2 * x2).sum() - (b * x2).sum()).backward()
        opt2.step()
    np.testing.assert_allclose(x2.detach().numpy(), full[-1], rtol=1e-12)


def test_adam_state_layout():
    _, opt, _ = _ember_run(optim.Adam, {"lr": 0.1, "amsgrad": True}, steps=3)
    sd = opt.state_dict()
    state = sd["state"][0]
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    assert isinstance(state["step"], ember.Tensor)
    assert state["step"].dim() == 0
    assert state["step"].item() == 3.0
    assert state["step"].dtype == ember.float32  # default dtype float32 -> float32 step, as PyTorch
    group = sd["param_groups"][0]
    assert group["betas"] == (0.9, 0.999)
    assert group["decoupled_weight_decay"] is False
    assert group["params"] == [0]


def test_state_dict_indices_across_groups():
    ps = [ember.zeros(2, requires_grad=True) for _ in range(3)]
    opt = optim.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.5}], lr=0.1, momentum=0.9)
    ps[2].grad = ember.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert list(sd["state"]) == [2]  # only the parameter with a gradient has state
    assert sd["param_groups"][1]["lr"] == 0.5
    assert sd["param_groups"][0]["lr"] == 0.1
    np.testing.assert_array_equal(sd["state"][2]["momentum_buffer"].numpy(), [1.0, 1.0])


def test_load_state_dict_errors():
    p = ember.zeros(2, requires_grad=True)
    q = ember.zeros(2, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    two = optim.SGD([{"params": [p]}, {"params": [q]}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(two.state_dict())
    bigger = optim.SGD([p, q], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(bigger.state_dict())


def test_load_state_dict_casts_to_param_dtype():
    p = ember.zeros(2, dtype=ember.float64, requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    sd = {
        "state": {0: {"step": ember.tensor(2.0), "exp_avg": ember.ones(2), "exp_avg_sq": ember.ones(2)}},
        "param_groups": [dict(opt.state_dict()["param_groups"][0])],
    }
    opt.load_state_dict(sd)
    assert opt.state[p]["exp_avg"].dtype == ember.float64
    assert opt.state[p]["step"].dtype == ember.float32  # step keeps its dtype


def test_param_group_errors():
    p = ember.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts, but got ember.Tensor"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors, but one of the params is int"):
        optim.SGD([1], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([p * 2], lr=0.1)
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(TypeError, match="ordering of tensors in sets will change"):
        opt.add_param_group({"params": {ember.zeros(1, requires_grad=True)}})
    with pytest.raises(TypeError, match="param_group must be a dict, but got <class 'list'>"):
        opt.add_param_group([ember.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [p]})
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([p, p], lr=0.1)


def test_add_param_group_uses_defaults():
    p = ember.zeros(2, requires_grad=True)
    q = ember.zeros(2, requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": q, "lr": 0.01})
    assert len(opt.param_groups[1]["params"]) == 1
    assert opt.param_groups[1]["params"][0] is q
    assert opt.param_groups[1]["lr"] == 0.01
    assert opt.param_groups[1]["momentum"] == 0.9


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": -1.0}, "Invalid learning rate: -1.0"),
        ({"lr": 0.1, "momentum": -0.5}, "Invalid momentum value: -0.5"),
        ({"lr": 0.1, "weight_decay": -1}, "Invalid weight_decay value: -1"),
        ({"lr": 0.1, "nesterov": True}, "Nesterov momentum requires a momentum and zero dampening"),
    ],
)
def test_sgd_argument_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        optim.SGD([ember.zeros(1, requires_grad=True)], **kwargs)


def test_adam_argument_errors():
    p = [ember.zeros(1, requires_grad=True)]
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon value: -1"):
        optim.Adam(p, eps=-1)
    with pytest.raises(ValueError, match="betas must be either both floats or both Tensors"):
        optim.Adam(p, betas=(0.9, ember.tensor(0.99)))


def test_zero_grad():
    p = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None


def test_step_skips_params_without_grad_and_runs_without_grad():
    p = ember.tensor([1.0, 2.0], requires_grad=True)
    q = ember.tensor([3.0], requires_grad=True)
    opt = optim.Adam([p, q], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    np.testing.assert_array_equal(q.detach().numpy(), [3.0])
    assert q not in opt.state
    assert p.grad_fn is None and p.is_leaf


def test_closure_returns_loss():
    p = ember.tensor([2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with ember.no_grad():
        loss = opt.step(closure)  # the closure runs with grad enabled
    assert loss.item() == 4.0
    np.testing.assert_allclose(p.detach().numpy(), [1.0])


def test_step_hooks():
    p = ember.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.5)
    calls = []
    h1 = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", o is opt, p.item())))
    h2 = opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", o is opt, p.item())))
    g = optim.register_optimizer_step_post_hook(lambda o, args, kwargs: calls.append(("global", o is opt)))
    p.grad = ember.tensor([1.0])
    opt.step()
    assert calls == [("pre", True, 1.0), ("post", True, 0.5), ("global", True)]
    h1.remove()
    h2.remove()
    g.remove()
    opt.step()
    assert len(calls) == 3


def test_step_and_zero_grad_are_labelled_in_a_profile():
    # PyTorch's labels, around the whole step (its hooks and the parameter updates inside)
    from ember import profiler

    p = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    opt.register_step_pre_hook(lambda o, args, kwargs: [ember.ones(1) * 3] and None)
    p.grad = ember.tensor([1.0, -1.0])
    with profiler.profile() as prof:
        opt.step()
        opt.zero_grad()
    step = next(e for e in prof.events() if e.name == "Optimizer.step#Adam.step")
    names = set()
    stack = list(step.cpu_children)
    while stack:
        event = stack.pop()
        names.add(event.name)
        stack.extend(event.cpu_children)
    assert "aten::mul" in names  # the hook's op
    assert any(name.startswith("aten::") and name != "aten::mul" for name in names)  # the update's ops
    assert [e.name for e in prof.events() if e.cpu_parent is None] == ["Optimizer.step#Adam.step",
                                                                       "Optimizer.zero_grad#Adam.zero_grad"]
    assert p.grad is None
    opt.step()  # outside a profiler: no span, nothing recorded


def test_step_pre_hook_can_replace_arguments():
    p = ember.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.5)
    seen = []

    def closure():
        seen.append(True)
        return ember.tensor(7.0)

    opt.register_step_pre_hook(lambda o, args, kwargs: ((args[0],), {"closure": closure}))
    p.grad = ember.tensor([1.0])
    assert opt.step().item() == 7.0
    assert seen == [True]
    opt.register_step_pre_hook(lambda o, args, kwargs: 3)
    with pytest.raises(RuntimeError, match="must return None or a tuple of"):
        opt.step()


def test_repr():
    opt = optim.SGD([ember.zeros(1, requires_grad=True)], lr=0.1)
    assert repr(opt) == (
        "SGD (\nParameter Group 0\n    dampening: 0\n    differentiable: False\n    foreach: None\n"
        "    fused: None\n    lr: 0.1\n    maximize: False\n    momentum: 0\n    nesterov: False\n"
        "    weight_decay: 0\n)"
    )


def test_adagrad_state_created_in_constructor():
    p = ember.zeros(3, requires_grad=True)
    opt = optim.Adagrad([p], initial_accumulator_value=0.25)
    np.testing.assert_array_equal(opt.state[p]["sum"].numpy(), [0.25] * 3)
    assert opt.state[p]["step"].item() == 0.0


def test_float32_params():
    x = ember.tensor(X0.astype(np.float32), requires_grad=True)
    opt = optim.Adam([x], lr=0.1)
    a = ember.tensor(A.astype(np.float32))
    b = ember.tensor(B.astype(np.float32))
    for _ in range(STEPS):
        opt.zero_grad()
        (0.5 * (a * x * x).sum() - (b * x).sum()).backward()
        opt.step()
    assert x.dtype == ember.float32
    np.testing.assert_allclose(x.detach().numpy(), _np_adam(0.1)[-1], rtol=1e-4, atol=1e-5)
