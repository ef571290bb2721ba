"""GradScaler on cuda (ember.cuda.kernels.grad_scaling): the fused unscale and the scale update on the device
give the list ops' values bit for bit (gradients, flag, scale, growth tracker), and a step's update reads
nothing back."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.cuda.kernels import grad_scaling

pytestmark = pytest.mark.cuda


def _grads(dtype, bad=None, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(dtype) * 1024 for shape in ((3, 5), (70000,), (1,), (4, 4, 4))]
    if bad is not None:
        arrays[1][12345] = bad
    return arrays


def _scaler_step(grad_arrays, fused, monkeypatch, growth_interval=2, steps=3):
    """Grads, flag, scale and tracker after ``steps`` scaler cycles, with or without the fused kernels."""
    if not fused:
        monkeypatch.setattr(grad_scaling, "tensors_unscale_", lambda *a: False)
        monkeypatch.setattr(grad_scaling, "tensors_update_scale_", lambda *a: False)
    params = [ember.zeros(a.shape, dtype=ember.from_numpy(a).dtype, device="cuda", requires_grad=True)
              for a in grad_arrays]
    opt = ember.optim.SGD(params, lr=0.0)
    scaler = ember.amp.GradScaler("cuda", init_scale=1024.0, growth_interval=growth_interval)
    history = []
    for _ in range(steps):
        for p, a in zip(params, grad_arrays):
            p.grad = ember.from_numpy(a.copy()).to("cuda")
        scaler.scale(ember.ones((), device="cuda"))
        scaler.unscale_(opt)
        found = scaler._per_optimizer[id(opt)]["found_inf"]
        scaler.step(opt)
        scaler.update()
        history.append(([p.grad.cpu().numpy() for p in params], float(found.item()), scaler.get_scale(),
                        scaler._get_growth_tracker()))
    return history


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [None, np.inf, -np.inf, np.nan])
def test_fused_unscale_and_update_match_the_list_ops(dtype, bad, monkeypatch):
    arrays = _grads(dtype, bad)
    fused = _scaler_step(arrays, True, monkeypatch)
    with monkeypatch.context() as m:
        plain = _scaler_step(arrays, False, m)
    for (g1, f1, s1, t1), (g2, f2, s2, t2) in zip(fused, plain, strict=True):
        for a, b in zip(g1, g2, strict=True):
            np.testing.assert_array_equal(a, b)
        assert (f1, s1, t1) == (f2, s2, t2)
    assert fused[0][1] == (0.0 if bad is None else 1.0)
    # without a bad gradient the scale grew after two good steps; with one it halved every step
    assert fused[-1][2] == (2048.0 if bad is None else 128.0)


def test_fused_unscale_values():
    arrays = _grads(np.float32, np.inf)
    grads = [ember.from_numpy(a.copy()).to("cuda") for a in arrays]
    inv = ember.full((), 1 / 1024, dtype=ember.float32, device="cuda")
    found = ember.zeros((), dtype=ember.float32, device="cuda")
    assert grad_scaling.tensors_unscale_(grads, inv, found)
    assert found.item() == 1.0
    for g, a in zip(grads, arrays):
        np.testing.assert_array_equal(g.cpu().numpy(), a * np.float32(1 / 1024))


def test_growth_stops_below_float32_overflow():
    scale = ember.full((), 3e38, dtype=ember.float32, device="cuda")
    tracker = ember.zeros((), dtype=ember.int32, device="cuda")
    found = [ember.zeros((), dtype=ember.float32, device="cuda")]
    assert grad_scaling.tensors_update_scale_(scale, tracker, found, 2.0, 0.5, 1)
    assert scale.item() == np.float32(3e38) and tracker.item() == 0


def test_update_reads_nothing_back():
    p = ember.zeros(8, device="cuda", requires_grad=True)
    opt = ember.optim.SGD([p], lr=0.1)
    scaler = ember.amp.GradScaler("cuda")
    for _ in range(2):  # the second cycle under "error": only step's read of the flag may wait
        p.grad = ember.ones(8, device="cuda")
        scaler.scale(p.sum())
        scaler.unscale_(opt)
        scaler.step(opt)
        ember.cuda.set_sync_debug_mode("error")
        try:
            scaler.update()
        finally:
            ember.cuda.set_sync_debug_mode("default")
