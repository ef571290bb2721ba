"""Every optimizer's and LR scheduler's state_dict() survives ember.save / ember.load exactly:
loading it into fresh objects gives the same next steps as the originals (no pickle involved)."""

import io
import math

import pytest

import ember
import ember.optim as optim
from ember.optim import lr_scheduler, swa_utils


def roundtrip(obj):
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    buffer.seek(0)
    return ember.load(buffer)


def make_model():
    ember.manual_seed(0)
    return ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.Tanh(), ember.nn.Linear(4, 1))


def train_step(model, opt, x):
    def closure():
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        return loss

    opt.step(closure)


def assert_same_state(loaded, original, where="state"):
    """Equal values with identical types, recursively; tensors bit for bit."""
    assert type(loaded) is type(original), f"{where}: {type(loaded)} != {type(original)}"
    if isinstance(original, ember.Tensor):
        assert loaded.dtype is original.dtype and loaded.shape == original.shape, where
        assert loaded.detach().numpy().tobytes() == original.detach().numpy().tobytes(), where
    elif isinstance(original, dict):
        assert list(loaded) == list(original), where
        for key in original:
            assert_same_state(loaded[key], original[key], f"{where}[{key!r}]")
    elif isinstance(original, (list, tuple)):
        assert len(loaded) == len(original), where
        for i, (a, b) in enumerate(zip(loaded, original)):
            assert_same_state(a, b, f"{where}[{i}]")
    elif isinstance(original, float) and math.isnan(original):
        assert math.isnan(loaded), where
    else:
        assert loaded == original, where


OPTIMIZERS = {
    "SGD": dict(lr=0.1, momentum=0.9, nesterov=True),
    "Adam": dict(lr=0.01, amsgrad=True),
    "AdamW": dict(lr=0.01),
    "Adamax": dict(lr=0.01),
    "NAdam": dict(lr=0.01),
    "RAdam": dict(lr=0.01),
    "Adagrad": dict(lr=0.1),
    "Adadelta": dict(lr=1.0),
    "RMSprop": dict(lr=0.01, momentum=0.5, centered=True),
    "Rprop": dict(lr=0.01),
    "LBFGS": dict(lr=0.5, history_size=3),
}


def test_every_optimizer_is_listed():
    classes = {
        n for n in dir(optim) if isinstance(getattr(optim, n), type) and issubclass(getattr(optim, n), optim.Optimizer)
    }
    assert classes - {"Optimizer"} == set(OPTIMIZERS)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_state_roundtrip_gives_the_same_next_steps(name):
    x = ember.randn(8, 3, generator=ember.Generator().manual_seed(1))
    model = make_model()
    opt = getattr(optim, name)(model.parameters(), **OPTIMIZERS[name])
    for _ in range(3):
        train_step(model, opt, x)

    saved = roundtrip({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3})
    assert_same_state(saved["optimizer"], opt.state_dict())

    resumed = make_model()
    resumed.load_state_dict(saved["model"])
    resumed_opt = getattr(optim, name)(resumed.parameters(), **OPTIMIZERS[name])
    resumed_opt.load_state_dict(saved["optimizer"])
    for _ in range(2):
        train_step(model, opt, x)
        train_step(resumed, resumed_opt, x)
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


def _schedulers():
    """name -> factory(optimizer); together they cover every scheduler class in ember.optim.lr_scheduler."""
    return {
        "StepLR": lambda o: lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
        "MultiStepLR": lambda o: lr_scheduler.MultiStepLR(o, milestones=[1, 3, 3], gamma=0.5),
        "ConstantLR": lambda o: lr_scheduler.ConstantLR(o, factor=0.5, total_iters=3),
        "LinearLR": lambda o: lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=4),
        "ExponentialLR": lambda o: lr_scheduler.ExponentialLR(o, gamma=0.9),
        "PolynomialLR": lambda o: lr_scheduler.PolynomialLR(o, total_iters=6, power=2.0),
        "CosineAnnealingLR": lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.001),
        "CosineAnnealingWarmRestarts": lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2),
        "CyclicLR": lambda o: lr_scheduler.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="exp_range"),
        "OneCycleLR": lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=10),
        "LambdaLR": lambda o: lr_scheduler.LambdaLR(o, lr_lambda=lambda e: 0.9**e),
        "MultiplicativeLR": lambda o: lr_scheduler.MultiplicativeLR(o, lr_lambda=lambda e: 0.95),
        "ReduceLROnPlateau": lambda o: lr_scheduler.ReduceLROnPlateau(o, patience=0, factor=0.5),
        "SequentialLR": lambda o: lr_scheduler.SequentialLR(
            o,
            schedulers=[lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2), lr_scheduler.ExponentialLR(o, 0.9)],
            milestones=[2],
        ),
        "SWALR": lambda o: swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=3),
        "ChainedScheduler": lambda o: lr_scheduler.ChainedScheduler(
            [lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2), lr_scheduler.ExponentialLR(o, 0.9)]
        ),
    }


def test_every_scheduler_is_listed():
    abstract = {"LRScheduler", "Optimizer", "Counter", "Tensor"}
    classes = {n for n in dir(lr_scheduler) if isinstance(getattr(lr_scheduler, n), type) and n[0].isupper()}
    assert classes - abstract == set(_schedulers()) - {"SWALR"}  # SWALR lives in swa_utils


def _step(scheduler, opt, losses, i):
    opt.step()
    if isinstance(scheduler, lr_scheduler.ReduceLROnPlateau):
        scheduler.step(losses[i])
    else:
        scheduler.step()


@pytest.mark.parametrize("name", list(_schedulers()))
def test_scheduler_state_roundtrip_gives_the_same_next_lrs(name):
    factory = _schedulers()[name]
    cycle_momentum = {"momentum": 0.9} if name in ("CyclicLR", "OneCycleLR") else {}
    losses = [1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25]

    def fresh():
        opt = optim.SGD([ember.nn.Parameter(ember.ones(2))], lr=0.1, **cycle_momentum)
        return opt, factory(opt)

    opt, scheduler = fresh()
    for i in range(3):
        _step(scheduler, opt, losses, i)
    saved = roundtrip({"optimizer": opt.state_dict(), "scheduler": scheduler.state_dict()})
    assert_same_state(saved["scheduler"], scheduler.state_dict())

    resumed_opt, resumed = fresh()
    resumed_opt.load_state_dict(saved["optimizer"])
    resumed.load_state_dict(saved["scheduler"])
    for i in range(3, 8):
        _step(scheduler, opt, losses, i)
        _step(resumed, resumed_opt, losses, i)
        assert [g["lr"] for g in resumed_opt.param_groups] == [g["lr"] for g in opt.param_groups], i
