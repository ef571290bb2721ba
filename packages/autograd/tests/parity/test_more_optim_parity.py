"""ember.optim against torch.optim for Adamax, NAdam, RAdam, Adadelta, Rprop, LBFGS, CyclicLR and swa_utils.

Identical initial weights and data on both libraries (float64); after 20 steps the parameters,
learning rates and optimizer state (same state_dict layout) must agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ember

# the parity helpers of ember-core's tests: the device under test, the pinned torch version
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tensor-core" / "tests" / "parity"))
from _parity_device import EMBER_DEVICE, IS_PINNED_TORCH, ON_GPU, TORCH_DEVICE  # noqa: E402


def _device(lib):
    """The device ``lib`` (ember or torch) runs on in these comparisons."""
    return EMBER_DEVICE if lib is ember else TORCH_DEVICE

STEPS = 20
RNG = np.random.default_rng(1)
W0 = RNG.standard_normal((3, 4))
B0 = RNG.standard_normal(3)
X = RNG.standard_normal((8, 4))
Y = RNG.standard_normal((8, 3))


def _np(v):
    return v.detach().cpu().numpy() if hasattr(v, "detach") else v


def _run(lib, opt_name, opt_kwargs, sched_name=None, sched_kwargs=None, groups=False):
    dev = _device(lib)
    w = lib.tensor(W0.copy(), dtype=lib.float64, device=dev, requires_grad=True)
    b = lib.tensor(B0.copy(), dtype=lib.float64, device=dev, requires_grad=True)
    x = lib.tensor(X, dtype=lib.float64, device=dev)
    y = lib.tensor(Y, dtype=lib.float64, device=dev)
    params = [{"params": [w]}, {"params": [b], "lr": opt_kwargs.get("lr", 0.01) * 0.5}] if groups else [w, b]
    opt = getattr(lib.optim, opt_name)(params, **opt_kwargs)
    scheduler = None
    if sched_name is not None:
        if sched_name == "SWALR":
            scheduler = lib.optim.swa_utils.SWALR(opt, **sched_kwargs)
        else:
            scheduler = getattr(lib.optim.lr_scheduler, sched_name)(opt, **(sched_kwargs or {}))
    lrs, momenta = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = ((x @ w.t() + b - y) ** 2).mean()
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        lrs.append([g["lr"] for g in opt.param_groups])
        momenta.append([g["betas"][0] if "betas" in g else g.get("momentum", 0.0) for g in opt.param_groups])
    sd = opt.state_dict()
    state = {k: {n: _np(v) for n, v in s.items()} for k, s in sd["state"].items()}
    groups_sd = [{k: v for k, v in g.items()} for g in sd["param_groups"]]
    return _np(w), _np(b), np.array(lrs), state, np.array(momenta), groups_sd


def _compare(e, t):
    np.testing.assert_allclose(e[0], t[0], rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(e[1], t[1], rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(e[2], t[2], rtol=1e-12)
    assert e[3].keys() == t[3].keys()
    for k in e[3]:
        assert list(e[3][k].keys()) == list(t[3][k].keys())
        for n in e[3][k]:
            np.testing.assert_allclose(np.asarray(e[3][k][n]), np.asarray(t[3][k][n]), rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(e[4], t[4], rtol=1e-12)
    assert e[5] == t[5]


OPTIMIZERS = [
    ("Adamax", {"lr": 0.05}),
    ("Adamax", {"lr": 0.05, "betas": (0.8, 0.95), "weight_decay": 0.1, "maximize": False}),
    ("Adamax", {"lr": 0.01, "maximize": True}),
    ("NAdam", {"lr": 0.05}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.05}),
    ("RAdam", {"lr": 0.05, "betas": (0.9, 0.9), "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.05}),
    ("Rprop", {"lr": 0.05}),
    ("Rprop", {"lr": 0.02, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.1)}),
    ("Rprop", {"lr": 0.01, "maximize": True}),
]


@pytest.mark.parametrize(("name", "kwargs"), OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMIZERS)])
@pytest.mark.parametrize("groups", [False, True], ids=["one-group", "two-groups"])
def test_optimizer_parity(name, kwargs, groups):
    _compare(_run(ember, name, kwargs, groups=groups), _run(torch, name, kwargs, groups=groups))


SCHEDULERS = [
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4}),
    (
        "CyclicLR",
        {"base_lr": [0.01, 0.02], "max_lr": 0.1, "step_size_up": 3, "step_size_down": 5, "mode": "triangular2"},
    ),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "mode": "exp_range", "gamma": 0.9}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "scale_fn": lambda x: 0.5**x}),
    (
        "CyclicLR",
        {
            "base_lr": 0.01,
            "max_lr": 0.1,
            "step_size_up": 2,
            "scale_fn": lambda x: 1 / (1 + x),
            "scale_mode": "iterations",
        },
    ),
    ("SWALR", {"swa_lr": 0.01, "anneal_epochs": 5}),
    ("SWALR", {"swa_lr": [0.01, 0.005], "anneal_epochs": 3, "anneal_strategy": "linear"}),
    ("SWALR", {"swa_lr": 0.2, "anneal_epochs": 0}),
]


@pytest.mark.parametrize(("name", "kwargs"), SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULERS)])
@pytest.mark.parametrize("opt", [("SGD", {"lr": 0.05, "momentum": 0.9}), ("Adam", {"lr": 0.05})], ids=["SGD", "Adam"])
def test_scheduler_parity(name, kwargs, opt):
    _compare(
        _run(ember, opt[0], opt[1], name, kwargs, groups=True),
        _run(torch, opt[0], opt[1], name, kwargs, groups=True),
    )


def test_cyclic_lr_without_momentum_cycling():
    kwargs = {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4, "cycle_momentum": False}
    _compare(
        _run(ember, "Adagrad", {"lr": 0.1}, "CyclicLR", kwargs),
        _run(torch, "Adagrad", {"lr": 0.1}, "CyclicLR", kwargs),
    )


def test_cyclic_lr_state_dict_keys_match():
    def sd(lib):
        w = lib.zeros(2, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
        s = lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=3, mode="exp_range", gamma=0.9)
        for _ in range(4):
            opt.step()
            s.step()
        return s.state_dict()

    e, t = sd(ember), sd(torch)
    assert set(e) == set(t)
    for k in ("last_epoch", "_step_count", "base_lrs", "max_lrs", "total_size", "step_ratio", "scale_mode", "_last_lr"):
        assert e[k] == t[k]


# ---------------------------------------------------------------------- LBFGS


def _rosenbrock(lib, p):
    return (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2


A = RNG.standard_normal((5, 5))
Q = A @ A.T + 0.5 * np.eye(5)
C = RNG.standard_normal(5)


def _quadratic(lib, p):
    q = lib.tensor(Q, dtype=lib.float64, device=p.device)
    c = lib.tensor(C, dtype=lib.float64, device=p.device)
    return 0.5 * (p @ (q @ p)) - (c * p).sum()


def _lbfgs_run(lib, fn, x0, kwargs, steps=STEPS):
    p = lib.tensor(np.asarray(x0, dtype=np.float64), device=_device(lib), requires_grad=True)
    opt = lib.optim.LBFGS([p], **kwargs)

    def closure():
        opt.zero_grad()
        loss = fn(lib, p)
        loss.backward()
        return loss

    losses = [float(opt.step(closure).detach()) for _ in range(steps)]
    return _np(p), np.array(losses), opt.state_dict()


#: Losses near the minimum (about 1e-5) differ in the last bits between PyTorch releases and between
#: CPU and GPU reductions: tight on the pinned torch on CPU, looser elsewhere.
#: Why the absolute tolerances carry the rosenbrock cases (issue 19's "1.7e-5 relative against an rtol of
#: 1e-6"): neither side is wrong. Near Rosenbrock's minimum the loss (~1.5e-10 after rosenbrock-sw-h3's
#: steps) is a difference of nearly equal numbers, so its relative value is at rounding level: PyTorch run
#: against itself from a start moved by one ulp changes its own losses by ~2e-5 relative and the small
#: entries of ``d`` by ~6e-5 (test_rosenbrock_losses_are_at_rounding_level checks this), while ember and
#: PyTorch agree on the parameters to 2e-10. A relative tolerance of 1e-6 there measures float64 rounding
#: order (summation order of a reduction, fused multiply-adds), not the optimizer; the atol does.
LBFGS_ATOL = 1e-10 if IS_PINNED_TORCH and not ON_GPU else 1e-8
#: the state's vectors: a strong-Wolfe search on the GPU's reductions drifts by a few 1e-8 in small entries
LBFGS_STATE_ATOL = 1e-7 if ON_GPU else 1e-8
#: the state's relative tolerance: GPU reductions sum in another order, and a strong-Wolfe search carries the
#: difference through its steps (H_diag 1.7e-5 and old_dirs 3.4e-5 off on the H200)
LBFGS_STATE_RTOL = 1e-4 if ON_GPU else 1e-5

LBFGS_CASES = [
    ("quadratic", _quadratic, np.ones(5), {"lr": 0.5, "max_iter": 3}),
    ("quadratic-sw", _quadratic, np.ones(5), {"max_iter": 4, "line_search_fn": "strong_wolfe"}),
    ("quadratic-history2", _quadratic, np.ones(5), {"lr": 0.3, "max_iter": 5, "history_size": 2}),
    ("rosenbrock", _rosenbrock, [-1.5, 2.0], {"lr": 0.05, "max_iter": 5}),
    ("rosenbrock-sw", _rosenbrock, [-1.5, 2.0], {"max_iter": 5, "line_search_fn": "strong_wolfe"}),
    (
        "rosenbrock-sw-h3",
        _rosenbrock,
        [-1.2, 1.0],
        {"max_iter": 3, "history_size": 3, "line_search_fn": "strong_wolfe"},
    ),
]


@pytest.mark.parametrize(("fn", "x0", "kwargs"), [c[1:] for c in LBFGS_CASES], ids=[c[0] for c in LBFGS_CASES])
def test_lbfgs_parity(fn, x0, kwargs):
    pe, le, sde = _lbfgs_run(ember, fn, x0, kwargs)
    pt, lt, sdt = _lbfgs_run(torch, fn, x0, kwargs)
    np.testing.assert_allclose(pe, pt, rtol=1e-6, atol=LBFGS_ATOL)
    np.testing.assert_allclose(le, lt, rtol=1e-6, atol=LBFGS_ATOL)
    assert sde["param_groups"] == sdt["param_groups"]
    assert sde["state"].keys() == sdt["state"].keys()
    se, st = sde["state"][0], sdt["state"][0]
    assert list(se.keys()) == list(st.keys())
    assert se["func_evals"] == st["func_evals"]
    assert se["n_iter"] == st["n_iter"]
    for key in ("d", "prev_flat_grad"):
        np.testing.assert_allclose(_np(se[key]), _np(st[key]), rtol=LBFGS_STATE_RTOL, atol=LBFGS_STATE_ATOL)
    for key in ("t", "H_diag", "prev_loss"):
        np.testing.assert_allclose(float(se[key]), float(st[key]), rtol=LBFGS_STATE_RTOL, atol=1e-12)
    for key in ("old_dirs", "old_stps", "ro"):
        assert len(se[key]) == len(st[key])
        for a, b in zip(se[key], st[key]):
            np.testing.assert_allclose(_np(a), _np(b), rtol=LBFGS_STATE_RTOL, atol=LBFGS_STATE_ATOL)


# ---------------------------------------------------------------------- swa_utils


def _model(lib):
    model = lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.BatchNorm1d(5), lib.nn.ReLU(), lib.nn.Linear(5, 3))
    model = model.double()
    rng = np.random.default_rng(7)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    return model


def _avg_run(lib, avg_kind, use_buffers):
    dev = _device(lib)
    model = _model(lib).to(dev)
    sw = lib.optim.swa_utils
    kwargs = {"use_buffers": use_buffers}
    if avg_kind == "ema_multi":
        kwargs["multi_avg_fn"] = sw.get_ema_multi_avg_fn(0.9)
    elif avg_kind == "ema":
        kwargs["avg_fn"] = sw.get_ema_avg_fn(0.8)
    elif avg_kind == "swa_fn":
        kwargs["avg_fn"] = sw.get_swa_avg_fn()
    elif avg_kind == "swa_multi":
        kwargs["multi_avg_fn"] = sw.get_swa_multi_avg_fn()
    averaged = sw.AveragedModel(model, **kwargs)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    sched = sw.SWALR(opt, swa_lr=0.02, anneal_epochs=4)
    x = lib.tensor(X, dtype=lib.float64, device=dev)
    y = lib.tensor(Y, dtype=lib.float64, device=dev)
    for _ in range(STEPS):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        sched.step()
        averaged.update_parameters(model)
    loader = [(x[:4], y[:4]), (x[4:], y[4:])]
    sw.update_bn(loader, averaged)
    out = _np(averaged(x))
    return {k: _np(v) for k, v in averaged.state_dict().items()}, out


# torch's get_swa_multi_avg_fn fails on integer buffers (addcdiv integer division), so no swa_multi + buffers.
AVG_CASES = [(k, False) for k in ("swa", "ema_multi", "ema", "swa_fn", "swa_multi")] + [
    (k, True) for k in ("swa", "ema_multi", "ema", "swa_fn")
]


@pytest.mark.parametrize(("avg_kind", "use_buffers"), AVG_CASES, ids=[f"{k}-{b}" for k, b in AVG_CASES])
def test_averaged_model_parity(avg_kind, use_buffers):
    if use_buffers and ON_GPU and not IS_PINNED_TORCH:
        pytest.skip(f"torch {torch.__version__}'s averaged model adds its integer buffers (BatchNorm's "
                    "num_batches_tracked) with addcdiv, which its CUDA build refuses; the parity suite pins 2.13.0")
    e, eo = _avg_run(ember, avg_kind, use_buffers)
    t, to = _avg_run(torch, avg_kind, use_buffers)
    assert list(e.keys()) == list(t.keys())
    for k in e:
        np.testing.assert_allclose(np.asarray(e[k]), np.asarray(t[k]), rtol=1e-6, atol=1e-10, err_msg=k)
    np.testing.assert_allclose(eo, to, rtol=1e-6, atol=1e-10)


def test_rosenbrock_losses_are_at_rounding_level():
    """The reason the LBFGS parity leans on atol for rosenbrock (see LBFGS_ATOL): PyTorch against itself,
    from a start one ulp away, differs by more than an rtol of 1e-6 in its final losses, yet by less than
    the atol; ember sits as close to PyTorch as PyTorch to itself."""
    _, fn, x0, kwargs = next(c for c in LBFGS_CASES if c[0] == "rosenbrock-sw-h3")
    moved = np.asarray(x0, dtype=np.float64) * (1 + 2e-16)  # one ulp of the entries 1.0 and -1.2
    _, lt, _ = _lbfgs_run(torch, fn, x0, kwargs)
    _, lm, _ = _lbfgs_run(torch, fn, moved, kwargs)
    _, le, _ = _lbfgs_run(ember, fn, x0, kwargs)
    assert abs(lm[-1] - lt[-1]) / abs(lt[-1]) > 1e-6  # rounding alone exceeds the rtol at the last loss
    np.testing.assert_allclose(lm[-1], lt[-1], rtol=0, atol=LBFGS_ATOL)
    np.testing.assert_allclose(le[-1], lt[-1], rtol=0, atol=LBFGS_ATOL)
