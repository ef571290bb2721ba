"""The optimizers, learning-rate schedulers and gradient clipping on the cuda device.

Oracle: the same optimizer on CPU. Parameters start from the same values and receive the same
gradients on both devices; after a few steps the GPU parameters and optimizer state must equal
the CPU trajectory within float tolerance, on the single-tensor loop and on the foreach path.
The state must live on the parameters' device (``step`` on the CPU, as in PyTorch), and a
state dict must move between devices.

All tests are marked ``cuda``: they run with ``EMBER_TEST_BACKEND=cuda`` on a machine with a GPU
and skip elsewhere.
"""

from __future__ import annotations

import copy
import io
import math

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember import optim
from ember.optim import lr_scheduler

pytestmark = pytest.mark.cuda

#: The device under test.
DEVICE = "cuda"

SHAPES = [(3, 4), (5,), (2, 3, 2), ()]

CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.5, "maximize": True}),
    ("Adam", {}),
    ("Adam", {"amsgrad": True, "weight_decay": 0.1, "maximize": True}),
    ("Adam", {"lr": 0.01, "decoupled_weight_decay": True, "weight_decay": 0.1}),
    ("AdamW", {}),
    ("AdamW", {"amsgrad": True, "weight_decay": 0.3}),
    ("Adamax", {}),
    ("Adamax", {"weight_decay": 0.1, "maximize": True}),
    ("NAdam", {"weight_decay": 0.1}),
    ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("RAdam", {}),
    ("RAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("Adagrad", {}),
    ("Adagrad", {"lr_decay": 0.1, "weight_decay": 0.1, "initial_accumulator_value": 0.1, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"weight_decay": 0.1, "maximize": True}),
    ("RMSprop", {}),
    ("RMSprop", {"centered": True, "momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"momentum": 0.5, "maximize": True}),
    ("Rprop", {}),
    ("Rprop", {"maximize": True, "etas": (0.3, 1.5)}),
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CASES)]

RTOL, ATOL = 1e-5, 1e-6


def _host(t):
    return t.detach().cpu().numpy()


def _on(t):
    return t.device.type == ember.device(DEVICE).type


def _start(complex_param=False, dtype=np.float32):
    """Initial parameter values (numpy) and a gradient generator shared by both devices."""
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    if complex_param:
        z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
        values.append(z.astype(np.complex64))
    return values


def _gradients(values, steps, seed=1):
    """``steps`` lists of gradients (numpy); parameter 1 gets none at step 2."""
    rng = np.random.default_rng(seed)
    out = []
    for step in range(steps):
        grads = []
        for j, v in enumerate(values):
            g = rng.standard_normal(v.shape)
            if np.iscomplexobj(v):
                g = g + 1j * rng.standard_normal(v.shape)
            grads.append(None if (step == 2 and j == 1) else g.astype(v.dtype))
        out.append(grads)
    return out


def _trajectory(name, kwargs, device, foreach, complex_param=False, steps=6):
    values = _start(complex_param)
    params = [ember.from_numpy(v.copy()).to(device).requires_grad_() for v in values]
    opt = getattr(optim, name)(params, foreach=foreach, **kwargs)
    for grads in _gradients(values, steps):
        for p, g in zip(params, grads):
            p.grad = None if g is None else ember.from_numpy(g.copy()).to(device)
        opt.step()
    return params, opt


def _assert_state_close(gpu_opt, cpu_opt, rtol=RTOL, atol=ATOL):
    gpu_state, cpu_state = gpu_opt.state_dict()["state"], cpu_opt.state_dict()["state"]
    assert gpu_state.keys() == cpu_state.keys()
    for index in cpu_state:
        assert gpu_state[index].keys() == cpu_state[index].keys()
        for key, ref in cpu_state[index].items():
            value = gpu_state[index][key]
            if isinstance(ref, ember.Tensor):
                if key != "step" and ref.dim() > 0:
                    assert _on(value), f"state {index}/{key} is on {value.device}"
                np.testing.assert_allclose(_host(value), _host(ref), rtol=rtol, atol=atol, err_msg=f"{index}/{key}")
            else:
                assert value == pytest.approx(ref, rel=rtol), f"{index}/{key}"


@pytest.mark.parametrize("foreach", [False, True, None], ids=["single", "foreach", "default"])
@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=IDS)
def test_trajectory_matches_cpu(name, kwargs, foreach):
    """``foreach=None`` is the default path: the fused CUDA kernel for Adam/AdamW, foreach for the others."""
    cpu_params, cpu_opt = _trajectory(name, kwargs, "cpu", foreach=False)
    gpu_params, gpu_opt = _trajectory(name, kwargs, DEVICE, foreach=foreach)
    for index, (p, ref) in enumerate(zip(gpu_params, cpu_params)):
        assert _on(p), f"parameter {index} left the device"
        np.testing.assert_allclose(_host(p), _host(ref), rtol=RTOL, atol=ATOL, err_msg=f"parameter {index}")
    _assert_state_close(gpu_opt, cpu_opt)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [c for c in CASES if c[0] in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "NAdam", "RAdam")],
    ids=[i for i, c in zip(IDS, CASES) if c[0] in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "NAdam", "RAdam")],
)
def test_complex_parameters_match_cpu(name, kwargs):
    cpu_params, _ = _trajectory(name, kwargs, "cpu", foreach=False, complex_param=True)
    gpu_params, _ = _trajectory(name, kwargs, DEVICE, foreach=True, complex_param=True)
    for p, ref in zip(gpu_params, cpu_params):
        np.testing.assert_allclose(_host(p), _host(ref), rtol=RTOL, atol=ATOL)


def test_default_foreach_choice_runs_on_cuda():
    values = _start()
    params = [ember.from_numpy(v.copy()).to(DEVICE).requires_grad_() for v in values]
    opt = optim.Adam(params)
    for p in params:
        p.grad = ember.ones_like(p)
    opt.step()
    assert all(_on(p) for p in params)
    assert all(_on(s["exp_avg"]) for s in opt.state.values())


def test_zero_grad_on_cuda():
    p = ember.ones(3, device=DEVICE, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    p.grad = ember.full((3,), 2.0, device=DEVICE)
    opt.zero_grad(set_to_none=False)
    assert _on(p.grad) and p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


# --------------------------------------------------------------------------- LBFGS


def _rosenbrock(x):
    return ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_matches_cpu(line_search_fn):
    start = np.linspace(-1.2, 1.0, 10)
    results = []
    for device in ("cpu", DEVICE):
        x = ember.tensor(start, dtype=ember.float64, device=device, requires_grad=True)
        opt = optim.LBFGS(
            [x], lr=0.5 if line_search_fn is None else 1.0, max_iter=15, history_size=5, line_search_fn=line_search_fn
        )

        def closure(x=x, opt=opt):
            opt.zero_grad()
            loss = _rosenbrock(x)
            loss.backward()
            return loss

        losses = [float(opt.step(closure)) for _ in range(3)]
        results.append((x, losses, opt))
    (x_cpu, losses_cpu, opt_cpu), (x_gpu, losses_gpu, opt_gpu) = results
    assert _on(x_gpu)
    np.testing.assert_allclose(losses_gpu, losses_cpu, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(_host(x_gpu), _host(x_cpu), rtol=1e-8, atol=1e-12)
    state_gpu, state_cpu = opt_gpu.state[x_gpu], opt_cpu.state[x_cpu]
    assert state_gpu["n_iter"] == state_cpu["n_iter"] and state_gpu["func_evals"] == state_cpu["func_evals"]
    for key in ("d", "prev_flat_grad"):
        assert _on(state_gpu[key]), key


# --------------------------------------------------------------------------- schedulers


SCHEDULERS = [
    ("StepLR", lambda o: lr_scheduler.StepLR(o, 2, gamma=0.5)),
    ("MultiStepLR", lambda o: lr_scheduler.MultiStepLR(o, [1, 3], gamma=0.3)),
    ("ExponentialLR", lambda o: lr_scheduler.ExponentialLR(o, 0.9)),
    ("CosineAnnealingLR", lambda o: lr_scheduler.CosineAnnealingLR(o, 5, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts", lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, 2, T_mult=2)),
    ("OneCycleLR", lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=8)),
    ("CyclicLR", lambda o: lr_scheduler.CyclicLR(o, 0.001, 0.05, step_size_up=2)),
    ("LinearLR", lambda o: lr_scheduler.LinearLR(o, 0.2, total_iters=3)),
    ("PolynomialLR", lambda o: lr_scheduler.PolynomialLR(o, total_iters=5, power=2.0)),
    ("LambdaLR", lambda o: lr_scheduler.LambdaLR(o, lambda e: 0.8**e)),
    (
        "SequentialLR",
        lambda o: lr_scheduler.SequentialLR(
            o, [lr_scheduler.ConstantLR(o, 0.5, total_iters=2), lr_scheduler.ExponentialLR(o, 0.9)], milestones=[2]
        ),
    ),
]


@pytest.mark.parametrize(("name", "make"), SCHEDULERS, ids=[s[0] for s in SCHEDULERS])
def test_scheduled_training_matches_cpu(name, make):
    ember.manual_seed(0)
    base = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    rng = np.random.default_rng(0)
    data = [
        (rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((6, 1)).astype(np.float32))
        for _ in range(8)
    ]
    runs = []
    for device in ("cpu", DEVICE):
        model = copy.deepcopy(base).to(device)
        # CyclicLR cycles momentum by default: give it an optimizer with momentum
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        sched = make(opt)
        lrs, losses = [], []
        for x, y in data:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(ember.from_numpy(x).to(device)), ember.from_numpy(y).to(device))
            loss.backward()
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr()[0])
            losses.append(loss.item())
        runs.append((model, lrs, losses))
    (cpu_model, cpu_lrs, cpu_losses), (gpu_model, gpu_lrs, gpu_losses) = runs
    assert gpu_lrs == cpu_lrs  # host arithmetic only: the same numbers
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5, atol=1e-6)
    for p, ref in zip(gpu_model.parameters(), cpu_model.parameters()):
        np.testing.assert_allclose(_host(p), _host(ref), rtol=1e-5, atol=1e-6)


def test_reduce_lr_on_plateau_takes_a_cuda_metric():
    p = ember.zeros(2, device=DEVICE, requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    for _ in range(4):
        sched.step(ember.tensor(3.0, device=DEVICE))  # a loss that does not improve
    assert opt.param_groups[0]["lr"] == 0.5


def test_tensor_learning_rate_on_cuda_params():
    results = []
    for device in ("cpu", DEVICE):
        p = ember.tensor([1.0, -2.0, 3.0], device=device, requires_grad=True)
        opt = optim.Adam([p], lr=ember.tensor(0.01), foreach=False)
        for _ in range(3):
            p.grad = p.detach() * 2
            opt.step()
        results.append(_host(p))
    np.testing.assert_allclose(results[1], results[0], rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------- state dicts across devices


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad", "Rprop"])
def test_state_dict_moves_between_devices(name):
    kwargs = {"lr": 0.05, "momentum": 0.9} if name == "SGD" else {}
    values = _start()
    steps = _gradients(values, 6)

    def run(params, opt, grads):
        for row in grads:
            for p, g in zip(params, row):
                p.grad = None if g is None else ember.from_numpy(g.copy()).to(p.device)
            opt.step()

    # reference: six steps on CPU
    ref = [ember.from_numpy(v.copy()).requires_grad_() for v in values]
    run(ref, getattr(optim, name)(ref, **kwargs), steps)
    # three steps on the GPU, checkpointed through ember.save/load to the CPU, three more there
    gpu = [ember.from_numpy(v.copy()).to(DEVICE).requires_grad_() for v in values]
    gpu_opt = getattr(optim, name)(gpu, **kwargs)
    run(gpu, gpu_opt, steps[:3])
    buffer = io.BytesIO()
    ember.save({"params": [p.detach() for p in gpu], "optimizer": gpu_opt.state_dict()}, buffer)
    buffer.seek(0)
    saved = ember.load(buffer, map_location="cpu")
    cpu = [t.clone().requires_grad_() for t in saved["params"]]
    cpu_opt = getattr(optim, name)(cpu, **kwargs)
    cpu_opt.load_state_dict(saved["optimizer"])
    for state in cpu_opt.state.values():
        for key, value in state.items():
            if isinstance(value, ember.Tensor):
                assert value.device.type == "cpu", key
    run(cpu, cpu_opt, steps[3:])
    for p, r in zip(cpu, ref):
        np.testing.assert_allclose(p.detach().numpy(), r.detach().numpy(), rtol=RTOL, atol=ATOL)
    # and the other way: a CPU state dict loaded into a GPU optimizer is cast to the GPU
    back = [p.detach().clone().to(DEVICE).requires_grad_() for p in cpu]
    back_opt = getattr(optim, name)(back, **kwargs)
    # a copy: state_dict() hands out the live state, and (as in PyTorch) a loaded ``step`` is kept as it is,
    # so without it both optimizers would count their steps in one tensor
    back_opt.load_state_dict(copy.deepcopy(cpu_opt.state_dict()))
    for state in back_opt.state.values():
        for key, value in state.items():
            if isinstance(value, ember.Tensor) and key != "step" and value.dim() > 0:
                assert _on(value), key
    run(back, back_opt, steps[:1])
    run(cpu, cpu_opt, steps[:1])
    for p, r in zip(back, cpu):
        np.testing.assert_allclose(_host(p), r.detach().numpy(), rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------- clipping and SWA


@pytest.mark.parametrize("foreach", [False, True, None])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
def test_clip_grad_norm_on_cuda(norm_type, foreach):
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    results = []
    for device in ("cpu", DEVICE):
        params = [ember.zeros(g.shape, device=device, requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = ember.from_numpy(g.copy()).to(device)
        total = nn.utils.clip_grad_norm_(params, 1.5, norm_type=norm_type, foreach=foreach)
        results.append((total, [p.grad for p in params]))
    (total_cpu, grads_cpu), (total_gpu, grads_gpu) = results
    assert _on(total_gpu)
    np.testing.assert_allclose(_host(total_gpu), _host(total_cpu), rtol=1e-5)
    for g, ref in zip(grads_gpu, grads_cpu):
        assert _on(g)
        np.testing.assert_allclose(_host(g), _host(ref), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_error_if_nonfinite_on_cuda():
    p = ember.zeros(3, device=DEVICE, requires_grad=True)
    p.grad = ember.tensor([1.0, float("nan"), 2.0], device=DEVICE)
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


def test_averaged_model_and_update_bn_on_cuda():
    ember.manual_seed(0)
    base = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    rng = np.random.default_rng(0)
    batches = [ember.from_numpy(rng.standard_normal((5, 3)).astype(np.float32)) for _ in range(3)]
    runs = []
    for device in ("cpu", DEVICE):
        model = copy.deepcopy(base).to(device)
        swa = optim.swa_utils.AveragedModel(model)
        ema = optim.swa_utils.AveragedModel(model, multi_avg_fn=optim.swa_utils.get_ema_multi_avg_fn(0.9))
        for i in range(3):
            with ember.no_grad():
                for p in model.parameters():
                    p.mul_(0.9).add_(0.01 * (i + 1))
            swa.update_parameters(model)
            ema.update_parameters(model)
        optim.swa_utils.update_bn([b.to(device) for b in batches], swa)
        runs.append((swa, ema))
    for cpu_avg, gpu_avg in zip(runs[0], runs[1]):
        # n_averaged lives where PyTorch keeps it: on the CPU unless AveragedModel(device=...) is given
        assert int(gpu_avg.n_averaged.item()) == 3
        assert all(_on(p) for p in gpu_avg.module.parameters())
        for (key, value), (_, ref) in zip(gpu_avg.state_dict().items(), cpu_avg.state_dict().items()):
            np.testing.assert_allclose(_host(value), _host(ref), rtol=1e-5, atol=1e-6, err_msg=key)
