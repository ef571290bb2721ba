"""Adamax, NAdam, RAdam, Adadelta, Rprop, LBFGS, CyclicLR and swa_utils against numpy references.

Optimizers: 20-step trajectories on f(x) = 0.5 * sum(a x^2) - sum(b x) against numpy transcriptions
of the papers' update rules. LBFGS: minimises the Rosenbrock function to tolerance. CyclicLR /
SWALR: lr sequences against closed forms. AveragedModel: averages against numpy means/EMAs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import nn, optim
from ember.optim import lr_scheduler, swa_utils

A = np.array([1.0, 3.0, 0.5, 2.0])
B = np.array([0.5, -1.0, 2.0, 0.0])
X0 = np.array([1.0, -2.0, 0.5, 3.0])
STEPS = 20


def _grad(x):
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
    return np.array(traj), opt


def _g(x, weight_decay, maximize, decoupled=False):
    g = _grad(x)
    if maximize:
        g = -g
    if weight_decay and not decoupled:
        g = g + weight_decay * x
    return g


def _np_adamax(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    x, m, u, out = X0.copy(), np.zeros(4), np.zeros(4), []
    for t in range(1, STEPS + 1):
        g = _g(x, weight_decay, maximize)
        m = betas[0] * m + (1 - betas[0]) * g
        u = np.maximum(betas[1] * u, np.abs(g) + eps)
        x = x - lr / (1 - betas[0] ** t) * m / u
        out.append(x.copy())
    return np.array(out)


def _np_nadam(
    lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3, decoupled_weight_decay=False
):
    b1, b2 = betas
    x, m, v, mu_prod, out = X0.copy(), np.zeros(4), np.zeros(4), 1.0, []
    for t in range(1, STEPS + 1):
        g = _g(x, weight_decay, False, decoupled_weight_decay)
        if weight_decay and decoupled_weight_decay:
            x = x * (1 - lr * weight_decay)
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        # state["mu_product"] is a 0-d tensor of the default scalar dtype (float32 here), as in PyTorch.
        mu_prod = float(np.float32(np.float32(mu_prod) * np.float32(mu)))
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2**t)) + eps
        x = x - lr * (1 - mu) / (1 - mu_prod) * g / denom - lr * mu_next / (1 - mu_prod * mu_next) * m / denom
        out.append(x.copy())
    return np.array(out)


def _np_radam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled_weight_decay=False):
    b1, b2 = betas
    x, m, v, out = X0.copy(), np.zeros(4), np.zeros(4), []
    rho_inf = 2 / (1 - b2) - 1
    for t in range(1, STEPS + 1):
        g = _g(x, weight_decay, False, decoupled_weight_decay)
        if weight_decay and decoupled_weight_decay:
            x = x * (1 - lr * weight_decay)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho_t > 5:
            r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            x = x - lr * m_hat * r * math.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
        else:
            x = x - lr * m_hat
        out.append(x.copy())
    return np.array(out)


def _np_adadelta(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    x, v, u, out = X0.copy(), np.zeros(4), np.zeros(4), []
    for _ in range(STEPS):
        g = _g(x, weight_decay, maximize)
        v = rho * v + (1 - rho) * g * g
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        x = x - lr * delta
        out.append(x.copy())
    return np.array(out)


def _np_rprop(lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    x, prev, size, out = X0.copy(), np.zeros(4), np.full(4, lr), []
    for _ in range(STEPS):
        g = _g(x, 0.0, maximize)
        s = np.sign(g * prev)
        size = np.clip(size * np.where(s > 0, etas[1], np.where(s < 0, etas[0], 1.0)), *step_sizes)
        g = np.where(s < 0, 0.0, g)
        x = x - np.sign(g) * size
        prev = g
        out.append(x.copy())
    return np.array(out)


CASES = [
    (optim.Adamax, _np_adamax, {"lr": 0.1}),
    (optim.Adamax, _np_adamax, {"lr": 0.1, "betas": (0.8, 0.9), "weight_decay": 0.1}),
    (optim.Adamax, _np_adamax, {"lr": 0.05, "maximize": True}),
    (optim.NAdam, _np_nadam, {"lr": 0.1}),
    (optim.NAdam, _np_nadam, {"lr": 0.1, "weight_decay": 0.1, "momentum_decay": 0.05}),
    (optim.NAdam, _np_nadam, {"lr": 0.1, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (optim.RAdam, _np_radam, {"lr": 0.1}),
    (optim.RAdam, _np_radam, {"lr": 0.1, "betas": (0.9, 0.9), "weight_decay": 0.1}),
    (optim.RAdam, _np_radam, {"lr": 0.1, "betas": (0.9, 0.9), "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (optim.Adadelta, _np_adadelta, {}),
    (optim.Adadelta, _np_adadelta, {"lr": 0.5, "rho": 0.8, "weight_decay": 0.05, "maximize": True}),
    (optim.Rprop, _np_rprop, {"lr": 0.1}),
    (optim.Rprop, _np_rprop, {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2)}),
    (optim.Rprop, _np_rprop, {"lr": 0.05, "maximize": True}),
]


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_trajectory_matches_numpy(cls, ref, kwargs):
    traj, _ = _ember_run(cls, kwargs)
    np.testing.assert_allclose(traj, ref(**kwargs), rtol=1e-10, atol=1e-12)


def test_radam_uses_both_branches():
    # beta2 = 0.9: rho_t <= 5 for the first steps (plain momentum), > 5 later (rectified).
    rho_inf = 2 / (1 - 0.9) - 1
    rhos = [rho_inf - 2 * t * 0.9**t / (1 - 0.9**t) for t in range(1, STEPS + 1)]
    assert min(rhos) <= 5 < max(rhos)


STATE_KEYS = [
    (optim.Adamax, {"step", "exp_avg", "exp_inf"}),
    (optim.NAdam, {"step", "mu_product", "exp_avg", "exp_avg_sq"}),
    (optim.RAdam, {"step", "exp_avg", "exp_avg_sq"}),
    (optim.Adadelta, {"step", "square_avg", "acc_delta"}),
    (optim.Rprop, {"step", "prev", "step_size"}),
]


@pytest.mark.parametrize(("cls", "keys"), STATE_KEYS, ids=[c[0].__name__ for c in STATE_KEYS])
def test_state_dict_round_trip(cls, keys, tmp_path):
    traj, opt = _ember_run(cls, {}, steps=5)
    sd = opt.state_dict()
    assert set(sd["state"][0]) == keys
    assert float(sd["state"][0]["step"]) == 5.0
    ember.save(sd, tmp_path / "opt.pt")
    loaded = ember.load(tmp_path / "opt.pt")
    # Continue 5 more steps from the loaded state; must equal 10 uninterrupted steps.
    x = ember.tensor(traj[-1], dtype=ember.float64, requires_grad=True)
    opt2 = cls([x])
    opt2.load_state_dict(loaded)
    a, b = ember.tensor(A, dtype=ember.float64), ember.tensor(B, dtype=ember.float64)
    for _ in range(5):
        opt2.zero_grad()
        (0.5 * (a * x * x).sum() - (b * x).sum()).backward()
        opt2.step()
    full, _ = _ember_run(cls, {}, steps=10)
    # Loading casts floating state to the parameter dtype (NAdam's float32 mu_product becomes float64), as in PyTorch.
    np.testing.assert_allclose(x.detach().numpy(), full[-1], rtol=1e-10)


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (optim.Adamax, {"lr": -1.0}, "Invalid learning rate: -1.0"),
        (optim.Adamax, {"betas": (1.0, 0.9)}, "Invalid beta parameter at index 0: 1.0"),
        (optim.NAdam, {"momentum_decay": -0.1}, "Invalid momentum_decay value: -0.1"),
        (optim.RAdam, {"weight_decay": -0.1}, "Invalid weight_decay value: -0.1"),
        (optim.Adadelta, {"rho": 1.5}, "Invalid rho value: 1.5"),
        (optim.Rprop, {"etas": (1.2, 0.5)}, "Invalid eta values: 1.2, 0.5"),
        (optim.LBFGS, {"lr": -0.5}, "Invalid learning rate: -0.5"),
    ],
)
def test_argument_errors(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls([ember.zeros(2, requires_grad=True)], **kwargs)


# ---------------------------------------------------------------------- LBFGS


def _rosenbrock(p):
    return (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2


def _lbfgs(x0, fn, **kwargs):
    p = ember.tensor(np.asarray(x0, dtype=np.float64), requires_grad=True)
    opt = optim.LBFGS([p], **kwargs)
    evals = []

    def closure():
        opt.zero_grad()
        loss = fn(p)
        loss.backward()
        evals.append(loss.item())
        return loss

    return p, opt, closure, evals


@pytest.mark.parametrize(("line_search_fn", "lr"), [(None, 0.3), (None, 1.0), ("strong_wolfe", 1.0)])
def test_lbfgs_minimises_rosenbrock(line_search_fn, lr):
    p, opt, closure, _ = _lbfgs(
        [-1.2, 1.0], _rosenbrock, lr=lr, max_iter=100, tolerance_grad=1e-12, tolerance_change=1e-14,
        line_search_fn=line_search_fn,
    )  # fmt: skip
    for _ in range(20):
        opt.step(closure)
    np.testing.assert_allclose(p.detach().numpy(), [1.0, 1.0], atol=1e-6)
    assert _rosenbrock(p).item() < 1e-13


def test_lbfgs_default_tolerances_stop_early():
    # With the default tolerance_change (1e-9) the iteration stops once g'd > -1e-9: near, not at, the minimum.
    p, opt, closure, evals = _lbfgs([-1.2, 1.0], _rosenbrock, max_iter=100, line_search_fn="strong_wolfe")
    opt.step(closure)
    np.testing.assert_allclose(p.detach().numpy(), [1.0, 1.0], atol=1e-4)
    assert 0 < _rosenbrock(p).item() < 1e-8
    assert len(evals) <= opt.param_groups[0]["max_eval"]
    assert opt.state[p]["func_evals"] == len(evals)
    n_evals = len(evals)
    opt.step(closure)  # a converged state: one more iteration at most
    assert len(evals) - n_evals <= 2


def test_lbfgs_quadratic_exact_in_n_steps():
    # Strong Wolfe L-BFGS on a strictly convex 2-D quadratic: converges to Q^{-1} c.
    Q = np.array([[3.0, 1.0], [1.0, 2.0]])
    c = np.array([1.0, -1.0])
    q, cc = ember.tensor(Q), ember.tensor(c)
    p, opt, closure, _ = _lbfgs(
        [0.0, 0.0], lambda p: 0.5 * (p @ (q @ p)) - (cc * p).sum(), line_search_fn="strong_wolfe"
    )
    opt.step(closure)
    np.testing.assert_allclose(p.detach().numpy(), np.linalg.solve(Q, c), atol=1e-7)


def test_lbfgs_first_iteration_is_scaled_gradient_step():
    # max_iter=1, no line search: x1 = x0 - min(1, 1/|g|_1) * lr * g.
    p, opt, closure, _ = _lbfgs([-1.2, 1.0], _rosenbrock, lr=0.5, max_iter=1)
    opt.step(closure)
    x0 = np.array([-1.2, 1.0])
    g = np.array([-2 * (1 - x0[0]) - 400 * x0[0] * (x0[1] - x0[0] ** 2), 200 * (x0[1] - x0[0] ** 2)])
    np.testing.assert_allclose(p.detach().numpy(), x0 - min(1.0, 1 / np.abs(g).sum()) * 0.5 * g, rtol=1e-12)


def test_lbfgs_state_and_errors():
    p, opt, closure, _ = _lbfgs([-1.2, 1.0], _rosenbrock, max_iter=5, history_size=3)
    for _ in range(3):
        opt.step(closure)
    state = opt.state_dict()["state"][0]
    assert set(state) == {
        "func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss", "al"
    }  # fmt: skip
    assert len(state["old_dirs"]) <= 3 and len(state["al"]) == 3
    assert opt.param_groups[0]["max_eval"] == 6
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        optim.LBFGS(
            [{"params": [ember.zeros(1, requires_grad=True)]}, {"params": [ember.zeros(1, requires_grad=True)]}]
        )
    p, opt, closure, _ = _lbfgs([-1.2, 1.0], _rosenbrock, line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)


def test_lbfgs_stops_at_zero_gradient():
    p, opt, closure, evals = _lbfgs([1.0, 1.0], _rosenbrock)
    opt.step(closure)
    assert len(evals) == 1 and opt.state[p]["n_iter"] == 0


# ---------------------------------------------------------------------- CyclicLR


def _np_cyclic(base, peak, up, down, mode, gamma, n):
    total = up + down
    out = []
    for t in range(n):
        cycle = math.floor(1 + t / total)
        x = 1 + t / total - cycle
        frac = x / (up / total) if x <= up / total else (x - 1) / (up / total - 1)
        scale = {"triangular": 1.0, "triangular2": 1 / 2 ** (cycle - 1), "exp_range": gamma**t}[mode]
        out.append(base + (peak - base) * frac * scale)
    return out


@pytest.mark.parametrize(
    ("mode", "up", "down", "gamma"),
    [("triangular", 4, None, 1.0), ("triangular2", 3, 5, 1.0), ("exp_range", 2, 3, 0.9)],
)
def test_cyclic_lr_sequence(mode, up, down, gamma):
    w = ember.zeros(2, requires_grad=True)
    opt = optim.SGD([w], lr=1.0, momentum=0.9)
    s = lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=up, step_size_down=down, mode=mode, gamma=gamma)
    lrs, moms = [opt.param_groups[0]["lr"]], [opt.param_groups[0]["momentum"]]
    for _ in range(STEPS - 1):
        opt.step()
        s.step()
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
    expected = _np_cyclic(0.01, 0.1, up, down or up, mode, gamma, STEPS)
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
    # Momentum moves opposite to the lr: max_momentum - (lr - base_lr) / (max_lr - base_lr) * (0.9 - 0.8).
    np.testing.assert_allclose(moms, [0.9 - (lr - 0.01) / 0.09 * 0.1 for lr in expected], rtol=1e-12)


def test_cyclic_lr_triangular_values_and_adam_beta1():
    w = ember.zeros(2, requires_grad=True)
    opt = optim.Adam([w], lr=1.0, betas=(0.5, 0.99))
    s = lr_scheduler.CyclicLR(opt, 0.1, 0.5, step_size_up=2, base_momentum=0.85, max_momentum=0.95)
    seq = [opt.param_groups[0]["lr"]]
    for _ in range(5):
        opt.step()
        s.step()
        seq.append(opt.param_groups[0]["lr"])
    np.testing.assert_allclose(seq, [0.1, 0.3, 0.5, 0.3, 0.1, 0.3], rtol=1e-12)
    assert opt.param_groups[0]["betas"] == pytest.approx((0.9, 0.99))


def test_cyclic_lr_errors_and_state_dict():
    w = ember.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        lr_scheduler.CyclicLR(optim.Adagrad([w]), 0.01, 0.1)
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        lr_scheduler.CyclicLR(optim.SGD([w], momentum=0.9), 0.01, 0.1, mode="sawtooth")
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    s = lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=3, mode="exp_range", gamma=0.8)
    for _ in range(4):
        opt.step()
        s.step()
    sd = s.state_dict()
    assert "_scale_fn_ref" not in sd and sd["_scale_fn_custom"] is None
    opt2 = optim.SGD([w], lr=0.1, momentum=0.9)
    s2 = lr_scheduler.CyclicLR(opt2, 0.01, 0.1, step_size_up=3)
    s2.load_state_dict(sd)
    opt.step()
    s.step()
    opt2.step()
    s2.step()
    assert s2.get_last_lr() == s.get_last_lr()


# ---------------------------------------------------------------------- swa_utils


def _np_swalr(lr0, swa_lr, anneal_epochs, strategy, n):
    anneal = (lambda t: (1 - math.cos(math.pi * t)) / 2) if strategy == "cos" else (lambda t: t)
    # Closed form for a lone scheduler: lr_t = swa_lr * alpha_t + lr0 * (1 - alpha_t).
    out = []
    for step in range(n):
        t = max(0, min(1, step / max(1, anneal_epochs)))
        out.append(swa_lr * anneal(t) + lr0 * (1 - anneal(t)))
    return out


@pytest.mark.parametrize(("anneal_epochs", "strategy"), [(5, "cos"), (4, "linear"), (1, "cos")])
def test_swalr_sequence(anneal_epochs, strategy):
    w = ember.zeros(2, requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    s = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(9):
        opt.step()
        s.step()
        lrs.append(opt.param_groups[0]["lr"])
    np.testing.assert_allclose(lrs, _np_swalr(0.5, 0.05, anneal_epochs, strategy, 10), rtol=1e-12)


def test_swalr_errors():
    opt = optim.SGD([ember.zeros(2, requires_grad=True)], lr=0.5)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        swa_utils.SWALR(opt, 0.05, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        swa_utils.SWALR(opt, 0.05, anneal_epochs=-1)


def _snapshots(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((3, 2)), rng.standard_normal(3)) for _ in range(n)]


def _averaged(kind, **kwargs):
    model = nn.Linear(2, 3).double()
    averaged = swa_utils.AveragedModel(model, **kwargs)
    snaps = _snapshots()
    for w, b in snaps:
        with ember.no_grad():
            model.weight.copy_(ember.tensor(w))
            model.bias.copy_(ember.tensor(b))
        averaged.update_parameters(model)
    return averaged, snaps


def test_averaged_model_swa_is_the_mean():
    averaged, snaps = _averaged("swa")
    np.testing.assert_allclose(averaged.module.weight.detach().numpy(), np.mean([w for w, _ in snaps], 0), rtol=1e-12)
    np.testing.assert_allclose(averaged.module.bias.detach().numpy(), np.mean([b for _, b in snaps], 0), rtol=1e-12)
    assert averaged.n_averaged.item() == len(snaps) and averaged.n_averaged.dtype == ember.int64
    for fn in (swa_utils.get_swa_avg_fn(), None):
        other, _ = (
            _averaged("swa", avg_fn=fn) if fn else _averaged("swa", multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
        )
        np.testing.assert_allclose(other.module.weight.detach().numpy(), averaged.module.weight.detach().numpy())


@pytest.mark.parametrize("multi", [False, True])
def test_averaged_model_ema(multi):
    decay = 0.7
    kwargs = (
        {"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(decay)}
        if multi
        else {"avg_fn": swa_utils.get_ema_avg_fn(decay)}
    )
    averaged, snaps = _averaged("ema", **kwargs)
    ema_w, ema_b = snaps[0]
    for w, b in snaps[1:]:
        ema_w = decay * ema_w + (1 - decay) * w
        ema_b = decay * ema_b + (1 - decay) * b
    np.testing.assert_allclose(averaged.module.weight.detach().numpy(), ema_w, rtol=1e-12)
    np.testing.assert_allclose(averaged.module.bias.detach().numpy(), ema_b, rtol=1e-12)
    x = ember.tensor(np.ones((1, 2)))
    np.testing.assert_allclose(averaged(x).detach().numpy(), np.ones((1, 2)) @ ema_w.T + ema_b, rtol=1e-12)


def test_averaged_model_buffers_and_update_bn():
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)).double()
    averaged = swa_utils.AveragedModel(model)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(model, avg_fn=swa_utils.get_swa_avg_fn(), multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match="Invalid decay value"):
        swa_utils.get_ema_multi_avg_fn(1.5)
    rng = np.random.default_rng(3)
    batches = [ember.tensor(rng.standard_normal((4, 2))) for _ in range(3)]
    model.train()
    model(batches[0])
    averaged.update_parameters(model)
    # Without use_buffers the buffers are copied, not averaged.
    np.testing.assert_allclose(averaged.module[1].running_mean.numpy(), model[1].running_mean.numpy())
    assert set(averaged.state_dict()) == {
        "n_averaged", "module.0.weight", "module.0.bias", "module.1.weight", "module.1.bias",
        "module.1.running_mean", "module.1.running_var", "module.1.num_batches_tracked",
    }  # fmt: skip
    averaged.eval()
    swa_utils.update_bn([(b, None) for b in batches], averaged)
    assert not averaged.training and averaged.module[1].momentum == 0.1
    with ember.no_grad():
        h = np.concatenate([averaged.module[0](b).numpy() for b in batches])
        means = [averaged.module[0](b).numpy().mean(0) for b in batches]
        variances = [averaged.module[0](b).numpy().var(0, ddof=1) for b in batches]
    assert h.shape == (12, 3)
    # momentum=None: a cumulative average of the per-batch statistics.
    np.testing.assert_allclose(averaged.module[1].running_mean.numpy(), np.mean(means, 0), rtol=1e-10)
    np.testing.assert_allclose(averaged.module[1].running_var.numpy(), np.mean(variances, 0), rtol=1e-10)
