"""ember.optim.lr_scheduler: learning-rate sequences against hand-computed values, state dicts, errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ember
from ember import optim
from ember.optim import lr_scheduler as sched


def _opt(lr=1.0, cls=optim.SGD, **kwargs):
    return cls([ember.zeros(1, requires_grad=True)], lr=lr, **kwargs)


def _lrs(opt, scheduler, n, metric=None):
    """The lr in effect for epochs 0..n-1 (read before each scheduler step)."""
    out = []
    for i in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        if metric is None:
            scheduler.step()
        else:
            scheduler.step(metric[i])
    return out


def test_step_lr():
    opt = _opt(1.0)
    s = sched.StepLR(opt, step_size=3, gamma=0.5)
    np.testing.assert_allclose(_lrs(opt, s, 8), [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25])
    assert s.get_last_lr() == [0.25]  # epoch 8: 0.5 ** (8 // 3)
    assert s.last_epoch == 8


def test_multistep_lr_repeated_milestone():
    opt = _opt(1.0)
    s = sched.MultiStepLR(opt, milestones=[2, 4, 4], gamma=0.1)
    np.testing.assert_allclose(_lrs(opt, s, 6), [1, 1, 0.1, 0.1, 0.001, 0.001])


def test_lambda_lr_per_group():
    p, q = ember.zeros(1, requires_grad=True), ember.zeros(1, requires_grad=True)
    opt = optim.SGD([{"params": [p]}, {"params": [q], "lr": 2.0}], lr=1.0)
    s = sched.LambdaLR(opt, [lambda e: 0.5**e, lambda e: 1.0 / (e + 1)])
    seq = []
    for _ in range(4):
        seq.append([g["lr"] for g in opt.param_groups])
        opt.step()
        s.step()
    np.testing.assert_allclose(seq, [[1, 2], [0.5, 1], [0.25, 2 / 3], [0.125, 0.5]])
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        sched.LambdaLR(opt, [lambda e: 1.0])


def test_multiplicative_lr():
    opt = _opt(1.0)
    s = sched.MultiplicativeLR(opt, lambda e: 0.9)
    np.testing.assert_allclose(_lrs(opt, s, 4), [1, 0.9, 0.81, 0.729])


def test_constant_lr():
    opt = _opt(0.9)
    s = sched.ConstantLR(opt, factor=0.5, total_iters=3)
    np.testing.assert_allclose(_lrs(opt, s, 5), [0.45, 0.45, 0.45, 0.9, 0.9])


def test_linear_lr():
    opt = _opt(1.0)
    s = sched.LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=3)
    np.testing.assert_allclose(_lrs(opt, s, 6), [0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="Starting multiplicative factor expected to be greater than 0"):
        sched.LinearLR(_opt(), start_factor=0)


def test_exponential_lr():
    opt = _opt(2.0)
    s = sched.ExponentialLR(opt, gamma=0.5)
    np.testing.assert_allclose(_lrs(opt, s, 4), [2, 1, 0.5, 0.25])


def test_polynomial_lr():
    opt = _opt(1.0)
    s = sched.PolynomialLR(opt, total_iters=4, power=2.0)
    expected = [(1 - min(t, 4) / 4) ** 2 for t in range(6)]
    np.testing.assert_allclose(_lrs(opt, s, 6), expected, atol=1e-15)


def test_cosine_annealing_lr_including_past_t_max():
    opt = _opt(1.0)
    s = sched.CosineAnnealingLR(opt, T_max=5, eta_min=0.1)
    expected = [0.1 + 0.9 * (1 + math.cos(math.pi * t / 5)) / 2 for t in range(12)]
    np.testing.assert_allclose(_lrs(opt, s, 12), expected, rtol=1e-12, atol=1e-15)


def test_cosine_annealing_warm_restarts():
    opt = _opt(1.0)
    s = sched.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.0)
    # periods of 2, 4, 8: T_cur = 0,1 | 0,1,2,3 | 0,...
    t_cur = [0, 1, 0, 1, 2, 3, 0, 1]
    t_i = [2, 2, 4, 4, 4, 4, 8, 8]
    expected = [(1 + math.cos(math.pi * c / i)) / 2 for c, i in zip(t_cur, t_i)]
    np.testing.assert_allclose(_lrs(opt, s, 8), expected, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="Expected positive integer T_0, but got 0"):
        sched.CosineAnnealingWarmRestarts(_opt(), T_0=0)


def test_one_cycle_lr_and_momentum():
    opt = _opt(1.0, momentum=0.9)
    s = sched.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.3)
    # phase 1: steps 0..2 (end_step = 3 - 1 = 2) from 0.04 to 1.0; phase 2: steps 2..9 to 0.04 / 1e4.
    initial, peak, low = 1.0 / 25, 1.0, 1.0 / 25 / 1e4

    def cos(start, end, pct):
        return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)

    expected_lr, expected_mom = [], []
    for t in range(10):
        if t <= 2:
            expected_lr.append(cos(initial, peak, t / 2))
            expected_mom.append(cos(0.95, 0.85, t / 2))
        else:
            expected_lr.append(cos(peak, low, (t - 2) / 7))
            expected_mom.append(cos(0.85, 0.95, (t - 2) / 7))
    lrs, moms = [], []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
        opt.step()
        if len(lrs) < 10:
            s.step()
    np.testing.assert_allclose(lrs, expected_lr, rtol=1e-12)
    np.testing.assert_allclose(moms, expected_mom, rtol=1e-12)
    s.step()
    with pytest.raises(ValueError, match="Tried to step 11 times. The specified number of total steps is 10"):
        s.step()


def test_one_cycle_lr_linear_adam_beta1():
    opt = _opt(1.0, cls=optim.Adam)
    sched.OneCycleLR(opt, max_lr=0.5, total_steps=4, anneal_strategy="linear")
    assert opt.param_groups[0]["lr"] == pytest.approx(0.02)
    assert opt.param_groups[0]["betas"] == (0.95, 0.999)
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        sched.OneCycleLR(_opt(), max_lr=1.0)


def test_reduce_lr_on_plateau():
    opt = _opt(1.0)
    s = sched.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1, cooldown=1, min_lr=0.2)
    metrics = [10, 9, 9, 9, 9, 9, 9, 9, 9, 9]
    # bad epochs from index 2; reduction when num_bad_epochs > 1 (after index 3), then cooldown of 1.
    lrs = _lrs(opt, s, 10, metric=metrics)
    assert lrs == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25]
    assert opt.param_groups[0]["lr"] == 0.2  # clamped at min_lr
    assert s.get_last_lr() == [0.2]
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        sched.ReduceLROnPlateau(_opt(), factor=1.0)
    with pytest.raises(ValueError, match="mode foo is unknown!"):
        sched.ReduceLROnPlateau(_opt(), mode="foo")


def test_reduce_lr_on_plateau_max_abs():
    opt = _opt(1.0)
    s = sched.ReduceLROnPlateau(opt, mode="max", threshold=0.5, threshold_mode="abs", patience=0)
    s.step(1.0)
    s.step(1.4)  # not better by more than 0.5: reduce
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    s.step(2.1)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    assert s.best == 2.1


def test_sequential_lr():
    opt = _opt(1.0)
    warm = sched.LinearLR(opt, start_factor=0.5, total_iters=2)
    decay = sched.ExponentialLR(opt, gamma=0.5)
    s = sched.SequentialLR(opt, [warm, decay], milestones=[3])
    np.testing.assert_allclose(_lrs(opt, s, 6), [0.5, 0.75, 1.0, 1.0, 0.5, 0.25])
    with pytest.raises(ValueError, match="expects number of schedulers provided to be one more"):
        sched.SequentialLR(opt, [warm, decay], milestones=[])


def test_chained_scheduler():
    opt = _opt(1.0)
    a = sched.ConstantLR(opt, factor=0.1, total_iters=2)
    b = sched.ExponentialLR(opt, gamma=0.9)
    s = sched.ChainedScheduler([a, b])
    np.testing.assert_allclose(_lrs(opt, s, 4), [0.1, 0.09, 0.81, 0.729])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        sched.ChainedScheduler([sched.ReduceLROnPlateau(opt)])


def test_state_dict_round_trip():
    opt = _opt(1.0)
    s = sched.StepLR(opt, step_size=2, gamma=0.5)
    _lrs(opt, s, 3)
    sd = s.state_dict()
    assert "optimizer" not in sd
    assert sd["last_epoch"] == 3 and sd["base_lrs"] == [1.0] and sd["step_size"] == 2
    opt2 = _opt(1.0)
    s2 = sched.StepLR(opt2, step_size=7, gamma=0.1)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    np.testing.assert_allclose(_lrs(opt2, s2, 4), _lrs(opt, s, 4))


def test_state_dict_through_save_load(tmp_path):
    opt = _opt(1.0)
    s = sched.CosineAnnealingLR(opt, T_max=10)
    _lrs(opt, s, 3)
    ember.save(s.state_dict(), tmp_path / "s.safetensors")
    loaded = ember.load(tmp_path / "s.safetensors")
    assert loaded == s.state_dict()


def test_resume_needs_initial_lr():
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        sched.StepLR(_opt(), step_size=1, last_epoch=3)
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        sched.StepLR([], step_size=1)


def test_warns_when_scheduler_steps_before_optimizer():
    opt = _opt(1.0)
    s = sched.StepLR(opt, step_size=1)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
        s.step()
    opt = _opt(1.0)
    s = sched.StepLR(opt, step_size=1)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.step()
