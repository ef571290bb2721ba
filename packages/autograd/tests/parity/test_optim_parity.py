"""ember.optim against torch.optim: 20 steps from identical weights give the same parameters (float64).

Each case runs a small least-squares model (a weight matrix and a bias) with the same data on both
libraries; parameters, learning rates and optimizer state after 20 steps must agree to rtol 1e-5.
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
from _parity_device import EMBER_DEVICE, TORCH_DEVICE  # noqa: E402


def _device(lib):
    """The device ``lib`` (ember or torch) runs on in these comparisons."""
    return EMBER_DEVICE if lib is ember else TORCH_DEVICE

STEPS = 20
RNG = np.random.default_rng(0)
W0 = RNG.standard_normal((3, 4))
B0 = RNG.standard_normal(3)
X = RNG.standard_normal((8, 4))
Y = RNG.standard_normal((8, 3))


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
        scheduler = getattr(lib.optim.lr_scheduler, sched_name)(opt, **(sched_kwargs or {}))
    lrs = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = ((x @ w.t() + b - y) ** 2).mean()
        loss.backward()
        opt.step()
        if scheduler is not None:
            if sched_name == "ReduceLROnPlateau":
                scheduler.step(round(loss.item(), 1))
            else:
                scheduler.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    state = {
        k: {n: (v.detach().cpu().numpy() if hasattr(v, "numpy") else v) for n, v in s.items()}
        for k, s in opt.state_dict()["state"].items()
    }
    return w.detach().cpu().numpy(), b.detach().cpu().numpy(), np.array(lrs), state


def _compare(e, t):
    np.testing.assert_allclose(e[0], t[0], rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(e[1], t[1], rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(e[2], t[2], rtol=1e-12)
    assert e[3].keys() == t[3].keys()
    for k in e[3]:
        assert e[3][k].keys() == t[3][k].keys()
        for n in e[3][k]:
            np.testing.assert_allclose(np.asarray(e[3][k][n]), np.asarray(t[3][k][n]), rtol=1e-5, atol=1e-12)


OPTIMIZERS = [
    ("SGD", {"lr": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "maximize": False}),
    ("SGD", {"lr": 0.01, "maximize": True}),
    ("Adam", {"lr": 0.05}),
    ("Adam", {"lr": 0.05, "betas": (0.8, 0.95), "weight_decay": 0.1, "amsgrad": True}),
    ("Adam", {"lr": 0.05, "maximize": True}),
    ("AdamW", {"lr": 0.05}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.2, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.05}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.01, "initial_accumulator_value": 0.1}),
]


@pytest.mark.parametrize(("name", "kwargs"), OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMIZERS)])
@pytest.mark.parametrize("groups", [False, True], ids=["one-group", "two-groups"])
def test_optimizer_parity(name, kwargs, groups):
    _compare(_run(ember, name, kwargs, groups=groups), _run(torch, name, kwargs, groups=groups))


SCHEDULERS = [
    ("StepLR", {"step_size": 4, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [3, 7, 7, 12], "gamma": 0.5}),
    ("ConstantLR", {"factor": 0.5, "total_iters": 4}),
    ("LinearLR", {"start_factor": 0.2, "end_factor": 0.9, "total_iters": 8}),
    ("ExponentialLR", {"gamma": 0.9}),
    ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.001}),
    ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.001}),
    ("OneCycleLR", {"max_lr": 0.1, "total_steps": 25}),
    ("OneCycleLR", {"max_lr": [0.1, 0.2], "total_steps": 20, "anneal_strategy": "linear", "three_phase": True}),
    ("PolynomialLR", {"total_iters": 12, "power": 2.0}),
    ("ReduceLROnPlateau", {"factor": 0.5, "patience": 1, "threshold": 0.05}),
]


@pytest.mark.parametrize(("name", "kwargs"), SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULERS)])
@pytest.mark.parametrize("opt", [("SGD", {"lr": 0.05, "momentum": 0.9}), ("Adam", {"lr": 0.05})], ids=["SGD", "Adam"])
def test_scheduler_parity(name, kwargs, opt):
    _compare(
        _run(ember, opt[0], opt[1], name, kwargs, groups=True),
        _run(torch, opt[0], opt[1], name, kwargs, groups=True),
    )


def _composed(lib):
    w = lib.tensor(W0.copy(), dtype=lib.float64, requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1)
    S = lib.optim.lr_scheduler
    seq = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=4), S.StepLR(opt, 3, 0.5)], [5])
    lrs = []
    for _ in range(STEPS):
        opt.step()
        seq.step()
        lrs.append(opt.param_groups[0]["lr"])
    opt2 = lib.optim.SGD([w], lr=0.1)
    chain = S.ChainedScheduler([S.LambdaLR(opt2, lambda e: 1 / (1 + e)), S.MultiplicativeLR(opt2, lambda e: 0.95)])
    for _ in range(STEPS):
        opt2.step()
        chain.step()
        lrs.append(opt2.param_groups[0]["lr"])
    return lrs


def test_sequential_and_chained_parity():
    np.testing.assert_allclose(_composed(ember), _composed(torch), rtol=1e-12)


def test_state_dict_layout_matches_torch():
    e = _run(ember, "Adam", {"lr": 0.05, "amsgrad": True}, groups=True)
    t = _run(torch, "Adam", {"lr": 0.05, "amsgrad": True}, groups=True)
    _compare(e, t)

    def groups(lib):
        w = lib.zeros(2, requires_grad=True)
        b = lib.zeros(1, requires_grad=True)
        opt = lib.optim.AdamW([{"params": [w]}, {"params": [b], "lr": 0.5}])
        return opt.state_dict()["param_groups"]

    assert groups(ember) == groups(torch)


def test_torch_state_dict_loads_into_ember():
    # A torch optimizer state dict, tensors converted, continues identically in ember.
    tw = torch.tensor(W0.copy(), requires_grad=True)
    topt = torch.optim.Adam([tw], lr=0.05)
    ew = ember.tensor(W0.copy(), dtype=ember.float64, requires_grad=True)
    eopt = ember.optim.Adam([ew], lr=0.01)
    for _ in range(5):
        topt.zero_grad()
        (tw**2).sum().backward()
        topt.step()
    sd = topt.state_dict()
    converted = {
        "state": {k: {n: ember.tensor(v.numpy()) for n, v in s.items()} for k, s in sd["state"].items()},
        "param_groups": sd["param_groups"],
    }
    with ember.no_grad():
        ew.copy_(ember.tensor(tw.detach().numpy()))
    eopt.load_state_dict(converted)
    for _ in range(5):
        topt.zero_grad()
        (tw**2).sum().backward()
        topt.step()
        eopt.zero_grad()
        (ew**2).sum().backward()
        eopt.step()
    np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), rtol=1e-5)
