"""Adam/AdamW with ``fused=True`` (``ember._C.fused_adam_``) and the ``fused=None`` default.

Oracles: the single-tensor loop (``foreach=False``; the fused trajectory must stay within a few ulp of it,
at 1 and 2 threads), and PyTorch's fused Adam (parity).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import optim

# 0-d, sizes that are no multiple of a vector width, and ones the kernel splits over threads (the fixture's 1024)
SHAPES = [(), (1,), (7,), (5, 13), (3, 11, 3), (1_027,), (40_003,)]
MAX_ULP = 4

CASES = [
    ("Adam", {}),
    ("Adam", {"weight_decay": 0.1}),
    ("Adam", {"amsgrad": True, "maximize": True, "weight_decay": 0.05}),
    ("Adam", {"betas": (0.3, 0.4), "eps": 1e-3}),  # lerp weights >= 0.5: lerp's other formula
    ("AdamW", {}),
    ("AdamW", {"weight_decay": 0.3, "amsgrad": True}),
    ("AdamW", {"maximize": True, "lr": 0.05}),
]
IDS = [f"{name}-{'-'.join(map(str, kwargs)) or 'default'}" for name, kwargs in CASES]


@pytest.fixture
def threads(request, monkeypatch):
    """``request.param`` threads, with the kernel splitting parameters from 1024 elements (not 2**22)."""
    import ember.optim.adam as adam_module

    monkeypatch.setattr(adam_module, "_FUSED_MIN_PARALLEL", 1024)
    old = ember.get_num_threads()
    ember.set_num_threads(request.param)
    yield request.param
    ember.set_num_threads(old)


def _trajectory(name, kwargs, dtype, shapes=SHAPES, steps=20, complex_=False, **options):
    """Parameters and state after ``steps`` steps with seeded gradients, as numpy arrays."""
    rng = np.random.default_rng(11)

    def sample(shape):
        x = rng.standard_normal(shape)
        return x + 1j * rng.standard_normal(shape) if complex_ else x

    params = [ember.tensor(sample(s), dtype=dtype, requires_grad=True) for s in shapes]
    opt = getattr(optim, name)(params, **kwargs, **options)
    for _ in range(steps):
        for p in params:
            p.grad = ember.tensor(sample(p.shape), dtype=dtype)
        opt.step()
    state = [{k: v.numpy().copy() for k, v in opt.state[p].items()} for p in params]
    return [p.detach().numpy().copy() for p in params], state


def _assert_close(a, b):
    if np.iscomplexobj(a):
        a, b = a.view(a.real.dtype), b.view(b.real.dtype)
    np.testing.assert_array_max_ulp(a, b, maxulp=MAX_ULP)


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=["float32", "float64"])
@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=IDS)
def test_fused_trajectory_matches_the_single_tensor_loop(name, kwargs, dtype, threads):
    fused, fused_state = _trajectory(name, kwargs, dtype, fused=True)
    single, single_state = _trajectory(name, kwargs, dtype, foreach=False)
    for a, b in zip(fused, single):
        assert a.dtype == b.dtype and a.shape == b.shape
        _assert_close(a, b)
    for sa, sb in zip(fused_state, single_state):
        assert sorted(sa) == sorted(sb)
        for key in sa:
            if key == "step":
                assert sa[key] == sb[key] == 20
            else:
                _assert_close(sa[key], sb[key])


@pytest.mark.parametrize("dtype", [ember.complex64, ember.complex128], ids=["complex64", "complex128"])
def test_complex_parameters_are_updated_as_real_pairs(dtype):
    kwargs = {"amsgrad": True, "weight_decay": 0.1}
    fused, fused_state = _trajectory("Adam", kwargs, dtype, shapes=[(3,), (4, 5)], complex_=True, fused=True)
    single, single_state = _trajectory("Adam", kwargs, dtype, shapes=[(3,), (4, 5)], complex_=True, foreach=False)
    for a, b in zip(fused, single):
        assert a.dtype == b.dtype
        _assert_close(a, b)
    for sa, sb in zip(fused_state, single_state):
        _assert_close(sa["max_exp_avg_sq"], sb["max_exp_avg_sq"])


def test_one_step_by_hand():
    # step 1 with zero state: m = 0.1 g, v = 0.001 g^2, theta -= lr * m / (1 - 0.9) / (sqrt(v / (1 - 0.999)) + eps)
    p = ember.tensor([1.0, -2.0, 0.5], dtype=ember.float64, requires_grad=True)
    g = np.array([0.5, -4.0, 0.0])
    p.grad = ember.tensor(g, dtype=ember.float64)
    optim.Adam([p], lr=0.1, eps=1e-8, fused=True).step()
    expected = np.array([1.0, -2.0, 0.5]) - 0.1 * g / (np.abs(g) + 1e-8)
    np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-12, atol=1e-15)


def test_non_contiguous_and_float16_parameters_take_the_single_tensor_loop():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 6))
    grads = [rng.standard_normal((6, 4)) for _ in range(5)]
    half = rng.standard_normal(5)
    results = []
    for options in ({"fused": True}, {"foreach": False}):
        p = ember.tensor(base, dtype=ember.float32).t().requires_grad_()  # a transposed (non-contiguous) leaf
        q = ember.tensor(half, dtype=ember.float16, requires_grad=True)
        opt = optim.Adam([p, q], lr=0.1, **options)
        for g in grads:
            p.grad = ember.tensor(g, dtype=ember.float32)
            q.grad = ember.tensor(g[0, :5] if g.shape[1] >= 5 else g[:5, 0], dtype=ember.float16)
            opt.step()
        assert not p.is_contiguous()  # the fallback was exercised
        results.append((p.detach().numpy().copy(), q.detach().numpy().copy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_step_bumps_the_version_counters():
    p = ember.ones(3, requires_grad=True)
    p.grad = ember.ones(3)
    opt = optim.Adam([p], fused=True, amsgrad=True)
    opt.step()
    before = {k: v._version for k, v in opt.state[p].items()}
    version = p._version
    opt.step()
    assert p._version > version
    for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"):
        assert opt.state[p][key]._version > before[key]


def test_state_dict_layout_and_resuming():
    rng = np.random.default_rng(2)
    init = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(6)]

    def make(**options):
        p = ember.tensor(init, requires_grad=True)
        return p, optim.AdamW([p], lr=0.01, amsgrad=True, **options)

    p, opt = make(fused=True)
    q, ref = make(foreach=False)
    for i, g in enumerate(grads):
        if i == 3:  # resume the fused run in a new optimizer from its state dict
            sd, ref_sd = opt.state_dict(), ref.state_dict()
            for key, value in ref_sd["state"][0].items():  # the single-tensor loop's layout
                assert sd["state"][0][key].shape == value.shape and sd["state"][0][key].dtype == value.dtype
            assert sorted(sd["state"][0]) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
            assert sd["state"][0]["step"].item() == 3 and sd["param_groups"][0]["fused"] is True
            opt = optim.AdamW([p], lr=0.01, amsgrad=True, fused=True)
            opt.load_state_dict(sd)
        p.grad = ember.tensor(g)
        q.grad = ember.tensor(g)
        opt.step()
        ref.step()
    np.testing.assert_array_max_ulp(p.detach().numpy(), q.detach().numpy(), maxulp=MAX_ULP)
    assert opt.state[p]["step"].item() == 6


def _spy(monkeypatch, name):
    import ember.optim.adam as adam_module

    calls = []
    original = getattr(adam_module, name)

    def spy(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(adam_module, name, spy)
    return calls


def test_default_picks_the_fused_step_for_plain_cpu_float_tensors(monkeypatch):
    fused = _spy(monkeypatch, "_fused_adam")
    multi = _spy(monkeypatch, "_multi_tensor_adam")
    single = _spy(monkeypatch, "_single_tensor_adam")
    p = ember.nn.Parameter(ember.ones(3))
    p.grad = ember.ones(3)
    optim.Adam([p]).step()
    optim.AdamW([p]).step()
    assert fused == ["_fused_adam"] * 2 and multi == single == []
    optim.Adam([p], foreach=True).step()  # an explicit foreach keeps it
    assert multi == ["_multi_tensor_adam"]
    q = ember.ones(3, dtype=ember.float16, requires_grad=True)  # not a kernel dtype: foreach's default
    q.grad = ember.ones(3, dtype=ember.float16)
    optim.Adam([q]).step()
    assert multi == ["_multi_tensor_adam"] * 2
    x = ember.ones(3, requires_grad=True).clone()
    x.grad = ember.ones(3)
    optim.Adam([x], differentiable=True).step()
    assert single == ["_single_tensor_adam"] and fused == ["_fused_adam"] * 2


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_fused_errors(name):
    p = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
        getattr(optim, name)([p], fused=True, differentiable=True)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        getattr(optim, name)([p], fused=True, foreach=True)
    getattr(optim, name)([p], fused=True)  # accepted


def test_functional_adam_refuses_grad_scale_and_differentiable():
    p, g = ember.ones(2), ember.ones(2)
    state = [ember.zeros(2), ember.zeros(2)]
    common = {"amsgrad": False, "beta1": 0.9, "beta2": 0.999, "lr": 0.1, "weight_decay": 0.0, "eps": 1e-8,
              "maximize": False}
    with pytest.raises(RuntimeError, match="grad_scale and found_inf are not supported"):
        optim.adam.adam([p], [g], [state[0]], [state[1]], [], [ember.tensor(0.0)], fused=True,
                        grad_scale=ember.tensor(1.0), **common)
    with pytest.raises(RuntimeError, match="Adam with fused=True does not support differentiable=True"):
        optim.adam._fused_adam([p], [g], [state[0]], [state[1]], [], [ember.tensor(0.0)], differentiable=True,
                               decoupled_weight_decay=False, **common)
    np.testing.assert_array_equal(p.numpy(), [1.0, 1.0])  # nothing was written


@pytest.mark.parity
@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=IDS)
def test_fused_matches_torch_fused(name, kwargs):
    import torch

    rng = np.random.default_rng(5)
    shapes = [(3, 4), (5,), (), (1000,)]
    init = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(20)]
    results = []
    for lib in (ember, torch):
        params = [lib.tensor(v.copy(), dtype=lib.float64, requires_grad=True) for v in init]
        opt = getattr(lib.optim, name)(params, fused=True, **kwargs)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = lib.tensor(g, dtype=lib.float64)
            opt.step()
        results.append([p.detach().numpy().copy() for p in params])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
