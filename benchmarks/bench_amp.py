"""Mixed precision against PyTorch (issue 22): an autocast bfloat16 MLP training step on the cpu.

One timed call is a whole step with a GradScaler, as an AMP training loop runs it::

    optimizer.zero_grad()
    with autocast("cpu"):                       # bfloat16 linear layers, float32 cross_entropy
        loss = cross_entropy(model(x), target)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()

for an MLP 784-512-512-10 (``Linear``, ``ReLU``) on a batch of 128 with SGD, the same weights and batch
in both libraries; the target is at most 1.0x PyTorch. The setup checks once that both compute the same
first loss (to bfloat16's precision). The float16 cuda step is ``cuda_amp_mlp_f16_train_step`` in
``bench_cuda.py``.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch

_SIZES = (784, 512, 512, 10)
_BATCH = 128


def amp_step_pair(device="cpu", torch=None, sync=None, sizes=_SIZES, batch=_BATCH):
    """``(ember_step, torch_step)``: one AMP training step each, on ``device``, from the same weights.

    Shared with ``bench_cuda.py`` (float16 on cuda). ``torch`` is the PyTorch module to compare with
    (None: no PyTorch column); ``sync(lib)``, when given, runs after each step (a device synchronisation).
    """
    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal((b, a)) / np.sqrt(a)).astype(np.float32) for a, b in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)

    def build(lib, lib_device):
        layers = []
        for i, w in enumerate(weights):
            linear = lib.nn.Linear(w.shape[1], w.shape[0])
            with lib.no_grad():
                linear.weight.copy_(lib.tensor(w))
                linear.bias.zero_()
            layers += [linear, lib.nn.ReLU()] if i < len(weights) - 1 else [linear]
        model = lib.nn.Sequential(*layers).to(lib_device)
        opt = lib.optim.SGD(model.parameters(), lr=1e-3)
        scaler = lib.amp.GradScaler(device, init_scale=1024.0)
        inputs, targets = lib.tensor(x).to(lib_device), lib.tensor(y).to(lib_device)

        def step():
            opt.zero_grad()
            with lib.autocast(device):
                loss = lib.nn.functional.cross_entropy(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            if sync is not None:
                sync(lib)
            return loss

        return step

    import ember

    ember_step = build(ember, device)
    torch_step = None if torch is None else build(torch, device)
    if torch_step is not None:
        got, want = float(ember_step().item()), float(torch_step().item())
        if not np.isclose(got, want, rtol=2e-2, atol=2e-2):
            raise AssertionError(f"amp MLP step: ember's first loss {got} differs from torch's {want}")
    return ember_step, torch_step


def _setup():
    return amp_step_pair("cpu", import_torch())


WORKLOADS = [
    Workload(
        "amp_mlp_bf16_train_step_b128",
        _setup,
        threads=1,
        description="one autocast(cpu, bfloat16) SGD step with GradScaler: MLP 784-512-512-10, batch 128",
    ),
]
