"""ember-inductor against PyTorch: eager and compiled, the rows of issue 25's Speed section.

Three workloads, each timed twice (two table rows): ember eager against PyTorch
eager, and ember compiled (``ember._inductor.compile_fx.compile_fx``) against
``torch.compile`` (Inductor, its default backend):

* ``pointwise``: ``gelu(a + b) * 0.5 + sigmoid(a)`` on 4096x1024 float32;
* ``norm``: ``relu(layer_norm(x, (1024,))).sum(dim=-1)`` on 4096x1024 float32;
* ``encoder``: one SGD training step (zero_grad, forward, mean-square loss, backward,
  step) of ``TransformerEncoderLayer(256, 4, 1024)`` (batch_first, dropout 0.1) on a
  batch of 16 sequences of 128; the layer and its loss are one compiled module, the
  optimizer step runs eagerly on both sides.

Compilation itself is two more rows (``Workload.self_timed``): the encoder step's
compile time from an empty cache (cold) and from the cache a previous process left
on disk (warm), each in a fresh process: the time from the compile call to the end
of the first training step, less one steady step.

Each setup checks once that the compiled function gives the eager answer (the
compiled training step: the same loss on the first steps) before anything is timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from harness import NotRun, Workload, import_torch

SHAPE = (4096, 1024)
ENCODER = {"d_model": 256, "nhead": 4, "dim_feedforward": 1024, "batch": 16, "seq": 128}
LR = 0.01
THREADS = 2


def _arrays(*shapes, seed=0):
    gen = np.random.default_rng(seed)
    return [gen.standard_normal(shape).astype(np.float32) for shape in shapes]


# --------------------------------------------------------------------------- the functions


def _pointwise(lib):
    F = lib.nn.functional

    def fn(a, b):
        return F.gelu(a + b) * 0.5 + lib.sigmoid(a)

    return fn


def _norm(lib):
    F = lib.nn.functional

    def fn(x):
        return F.relu(F.layer_norm(x, (SHAPE[1],))).sum(dim=-1)

    return fn


def _ember_compiled(fn, inputs):
    from ember._inductor.compile_fx import compile_fx
    from ember.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(fn)(*inputs)
    compiled = compile_fx(gm, list(inputs))
    if compiled.fallbacks:
        raise RuntimeError(f"ember-inductor ran graphs eagerly: {compiled.fallbacks}")
    got, want = compiled(*inputs), fn(*inputs)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
    return compiled


def _function_setup(make_fn, shapes, compiled):
    def setup():
        import ember

        arrays = _arrays(*shapes)
        ember_inputs = [ember.from_numpy(a.copy()) for a in arrays]
        ember_fn = make_fn(ember)
        if compiled:
            ember_fn = _ember_compiled(ember_fn, ember_inputs)
        torch = import_torch()
        torch_call = None
        if torch is not None:
            torch_inputs = [torch.from_numpy(a.copy()) for a in arrays]
            torch_fn = make_fn(torch)
            if compiled:
                torch_fn = _torch_compiled(torch, torch_fn, torch_inputs)
            if isinstance(torch_fn, NotRun):
                torch_call = torch_fn
            else:

                def torch_call():
                    return torch_fn(*torch_inputs)

        def ember_call():
            return ember_fn(*ember_inputs)

        return ember_call, torch_call

    return setup


def _torch_compiled(torch, fn, inputs):
    try:
        compiled = torch.compile(fn)
        compiled(*inputs)
    except Exception as exc:  # no C++ compiler for Inductor, say
        return NotRun(f"torch.compile failed here: {type(exc).__name__}: {exc}")
    return compiled


# --------------------------------------------------------------------------- the encoder training step


def _encoder_parts(lib, arrays):
    """``(step, module)``: one SGD step of the encoder layer (+ mean-square loss) for ``lib``."""
    nn = lib.nn
    lib.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        ENCODER["d_model"], ENCODER["nhead"], ENCODER["dim_feedforward"], dropout=0.1, batch_first=True
    )

    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x, target):
            return (self.layer(x) - target).pow(2).mean()

    module = WithLoss()
    with lib.no_grad():  # the same weights on both sides
        for p, w in zip(module.parameters(), arrays["weights"], strict=True):
            p.copy_(lib.from_numpy(w.copy()))
    module.train()
    return module


def _encoder_arrays():
    import ember

    layer = ember.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    gen = np.random.default_rng(0)
    weights = []
    for name, p in layer.named_parameters():
        shape = tuple(p.shape)
        if len(shape) > 1:  # matrices scaled by fan_in ** -0.5
            w = gen.standard_normal(shape) * shape[-1] ** -0.5
        else:  # biases near 0, layer-norm weights near 1
            is_norm_weight = name.startswith("norm") and name.endswith("weight")
            w = gen.standard_normal(shape) * 0.02 + (1.0 if is_norm_weight else 0.0)
        weights.append(w.astype(np.float32))
    x, target = _arrays((ENCODER["batch"], ENCODER["seq"], ENCODER["d_model"]), (16, 128, 256), seed=1)
    return {"weights": weights, "x": x, "target": target}


def _stepper(lib, module, run):
    optimizer = lib.optim.SGD(module.parameters(), lr=LR)

    def step(x, target):
        optimizer.zero_grad()
        loss = run(x, target)
        loss = loss[0] if isinstance(loss, (tuple, list)) else loss
        loss.backward()
        optimizer.step()
        return loss

    return step


def _encoder_setup(compiled):
    def setup():
        import ember
        import ember.optim  # noqa: F401

        arrays = _encoder_arrays()
        module = _encoder_parts(ember, arrays)
        x, target = ember.from_numpy(arrays["x"].copy()), ember.from_numpy(arrays["target"].copy())
        run = module
        if compiled:
            from ember._inductor import config
            from ember._inductor.compile_fx import compile_fx

            # the check compares the dropout masks too: a compile that keeps eager's draws
            with config.patch(fallback_random=True):
                checked = compile_fx(module, [x, target])
                _check_compiled_step(ember, arrays, checked, module)
            if checked.fallbacks:
                raise RuntimeError(f"ember-inductor ran graphs eagerly: {checked.fallbacks}")
            # timed: the default, masks computed in the kernels (fused with their consumers), as torch.compile's
            run = compile_fx(module, [x, target])
            _check_finite_step(ember, x, target, run, module)
            if run.fallbacks:
                raise RuntimeError(f"ember-inductor ran graphs eagerly: {run.fallbacks}")
        ember_step = _stepper(ember, module, run)
        torch = import_torch()
        torch_call = None
        if torch is not None:
            tmodule = _encoder_parts(torch, arrays)
            tx, ttarget = torch.from_numpy(arrays["x"].copy()), torch.from_numpy(arrays["target"].copy())
            trun = tmodule
            if compiled:
                trun = _torch_compiled(torch, tmodule, [tx, ttarget])
            if isinstance(trun, NotRun):
                torch_call = trun
            else:
                torch_step = _stepper(torch, tmodule, trun)

                def torch_call():
                    return torch_step(tx, ttarget)

        def ember_call():
            return ember_step(x, target)

        return ember_call, torch_call

    return setup


def _check_compiled_step(ember, arrays, compiled, module):
    """The compiled module's loss and gradients equal eager's (same dropout draws: ``compiled`` was compiled
    under ``config.fallback_random=True``), checked once."""
    x, target = ember.from_numpy(arrays["x"].copy()), ember.from_numpy(arrays["target"].copy())
    params = list(module.parameters())
    ember.manual_seed(5)
    loss_c = compiled(x, target)
    loss_c = loss_c[0] if isinstance(loss_c, (tuple, list)) else loss_c
    grads_c = ember.autograd.grad(loss_c, params)
    ember.manual_seed(5)
    loss_e = module(x, target)
    grads_e = ember.autograd.grad(loss_e, params)
    np.testing.assert_allclose(float(loss_c.item()), float(loss_e.item()), rtol=1e-4)
    for gc, ge in zip(grads_c, grads_e):
        np.testing.assert_allclose(np.asarray(gc), np.asarray(ge), rtol=1e-3, atol=1e-5)


def _check_finite_step(ember, x, target, compiled, module):
    """The timed compile (random numbers drawn in the kernels: other masks than eager's) gives a finite loss
    and gradients; its first call compiles it, outside the timing."""
    loss = compiled(x, target)
    loss = loss[0] if isinstance(loss, (tuple, list)) else loss
    grads = ember.autograd.grad(loss, list(module.parameters()))
    if not np.isfinite(float(loss.item())) or not all(np.isfinite(np.asarray(g)).all() for g in grads):
        raise RuntimeError("the compiled encoder step with in-kernel random numbers is not finite")


# --------------------------------------------------------------------------- compile time, in fresh processes

_COMPILE_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {bench_dir!r})
import bench_inductor as B
lib_name = {lib!r}
if lib_name == "ember":
    import ember as lib
    import ember.optim
    lib.set_num_threads({threads})
else:
    import torch as lib
    lib.set_num_threads({threads})
arrays = B._encoder_arrays()
module = B._encoder_parts(lib, arrays)
x, target = lib.from_numpy(arrays["x"].copy()), lib.from_numpy(arrays["target"].copy())
start = time.perf_counter()
if lib_name == "ember":
    from ember._inductor.compile_fx import compile_fx
    run = compile_fx(module, [x, target])
else:
    run = lib.compile(module)
step = B._stepper(lib, module, run)
step(x, target)
first = time.perf_counter() - start
steady = []
for _ in range(3):
    t = time.perf_counter()
    step(x, target)
    steady.append(time.perf_counter() - t)
print(json.dumps({{"seconds": first - sorted(steady)[1]}}))
"""


def _compile_seconds(lib, cache):
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["EMBER_INDUCTOR_CACHE_DIR" if lib == "ember" else "TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    code = _COMPILE_CHILD.format(bench_dir=str(Path(__file__).resolve().parent), lib=lib, threads=THREADS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{lib} compile-time child failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def _compile_time_setup(warm):
    def setup():
        def timer(lib):
            def measure(quick):
                with tempfile.TemporaryDirectory(prefix=f"bench-inductor-{lib}-") as cache:
                    seconds = _compile_seconds(lib, cache)  # cold: an empty cache
                    if warm:  # a second process finds the first one's artefacts on disk
                        seconds = _compile_seconds(lib, cache)
                    return seconds

            return measure

        torch_fn = timer("torch") if import_torch() is not None else None
        return timer("ember"), torch_fn

    return setup


_ENCODER_TEXT = (
    "TransformerEncoderLayer(256, 4, 1024, batch_first, dropout 0.1) + mean-square loss, batch 16 x seq 128, "
    "one SGD step (zero_grad, forward, backward, step)"
)

WORKLOADS = [
    Workload(
        "inductor_pointwise_eager",
        _function_setup(_pointwise, [SHAPE, SHAPE], compiled=False),
        threads=THREADS,
        description="gelu(a + b) * 0.5 + sigmoid(a), 4096x1024 float32: ember eager vs PyTorch eager",
    ),
    Workload(
        "inductor_pointwise_compiled",
        _function_setup(_pointwise, [SHAPE, SHAPE], compiled=True),
        threads=THREADS,
        description="gelu(a + b) * 0.5 + sigmoid(a), 4096x1024 float32: ember compile_fx vs torch.compile",
    ),
    Workload(
        "inductor_norm_eager",
        _function_setup(_norm, [SHAPE], compiled=False),
        threads=THREADS,
        description="relu(layer_norm(x)).sum(-1), 4096x1024 float32: ember eager vs PyTorch eager",
    ),
    Workload(
        "inductor_norm_compiled",
        _function_setup(_norm, [SHAPE], compiled=True),
        threads=THREADS,
        description="relu(layer_norm(x)).sum(-1), 4096x1024 float32: ember compile_fx vs torch.compile",
    ),
    Workload(
        "inductor_encoder_step_eager",
        _encoder_setup(compiled=False),
        threads=THREADS,
        description=f"{_ENCODER_TEXT}: ember eager vs PyTorch eager",
    ),
    Workload(
        "inductor_encoder_step_compiled",
        _encoder_setup(compiled=True),
        threads=THREADS,
        description=f"{_ENCODER_TEXT}: ember compile_fx vs torch.compile",
    ),
    Workload(
        "inductor_encoder_compile_cold",
        _compile_time_setup(warm=False),
        threads=THREADS,
        description="compile time of the encoder step from an empty cache, fresh process (compile + first step "
        "- one steady step): ember compile_fx vs torch.compile",
        self_timed=True,
    ),
    Workload(
        "inductor_encoder_compile_warm",
        _compile_time_setup(warm=True),
        threads=THREADS,
        description="compile time of the encoder step from the disk cache a previous process left, fresh process: "
        "ember compile_fx vs torch.compile",
        self_timed=True,
    ),
]
