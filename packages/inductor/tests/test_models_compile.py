"""Whole models trained 20 SGD steps compiled (compile_fx) and eager: the same losses.

Each model is built twice from the same seed; one copy trains eagerly, the other
through ``compile_fx`` (forward and loss in one compiled graph, the backward
compiled by aot, the SGD step eager). Before every step both sides seed the
generator alike, so dropout draws the same masks (under ``config.fallback_random=True``
compiled random ops are calls of the eager op, in program order: a rule of ``aot/rng.py``;
the default computes the masks in the kernels, tested by test_inkernel_random.py). After 20 steps
the two loss curves and the final weights must agree.

Models: the demo's CNN (``examples/digits_cnn.py``: conv, batch norm, max pool,
dropout), an MLP, a ``TransformerEncoderLayer`` with dropout, and a tiny GPT
(``benchmarks/gpt_model.py``: embeddings, causal attention, GELU MLP, tied head).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

import ember
import ember.nn as nn
import ember.optim
from ember._inductor import config
from ember._inductor.compile_fx import compile_fx
from ember.testing import assert_close

REPO = Path(__file__).resolve().parents[3]
STEPS = 20


def _import_file(path: Path, name: str):
    """Import a script of the repository (examples/, benchmarks/) by its path."""
    folder = str(path.parent)
    added = folder not in sys.path
    if added:  # the demo imports its neighbour example_utils
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        if added:
            sys.path.remove(folder)


class _WithLoss(nn.Module):
    """``model`` and its loss as one module: ``forward(x, target) -> loss``."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, x, target):
        return self.loss_fn(self.model(x), target)


def _train(build, batch, *, compiled, lr=0.05):
    ember.manual_seed(0)
    model = build()
    model.train()
    optimizer = ember.optim.SGD(model.parameters(), lr=lr)
    x, target = batch
    step = compile_fx(model, [x, target], name=type(model).__name__) if compiled else model
    losses = []
    for i in range(STEPS):
        ember.manual_seed(1000 + i)  # the same dropout masks on both sides
        optimizer.zero_grad()
        loss = step(x, target)
        loss = loss[0] if isinstance(loss, (tuple, list)) else loss
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
    return losses, model, step.fallbacks if compiled else []


def _check_same_training(build, batch, rtol=1e-4, atol=1e-5):
    with config.patch(fallback_on_compile_error=False, fallback_random=True):  # eager's dropout masks
        compiled_losses, compiled_model, fallbacks = _train(build, batch, compiled=True)
    # a graph that silently ran eagerly (a known limit falls back even with the flag off) would
    # make the comparison below pass for the wrong reason
    assert fallbacks == [], f"part of the model ran eagerly: {fallbacks}"
    eager_losses, eager_model, _ = _train(build, batch, compiled=False)
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=rtol, atol=atol)
    assert eager_losses[-1] < eager_losses[0], "the eager model did not learn: the comparison would mean little"
    for (name, p), (_, q) in zip(compiled_model.named_parameters(), eager_model.named_parameters()):
        assert_close(p.detach(), q.detach(), rtol=rtol * 10, atol=atol * 10, msg=f"{name} after {STEPS} steps")
    for (name, p), (_, q) in zip(compiled_model.named_buffers(), eager_model.named_buffers()):
        assert_close(p, q, rtol=rtol * 10, atol=atol * 10, msg=f"buffer {name} after {STEPS} steps")


def _rng():
    return np.random.default_rng(0)


def _classification_batch(shape, classes):
    gen = _rng()
    x = ember.tensor(gen.standard_normal(shape).astype(np.float32))
    target = ember.tensor(gen.integers(0, classes, shape[0]).astype(np.int64))
    return x, target


def test_demo_cnn():
    demo = _import_file(REPO / "examples" / "digits_cnn.py", "_ember_demo_digits_cnn")

    def build():
        return _WithLoss(demo.DigitsCNN(), nn.CrossEntropyLoss())

    _check_same_training(build, _classification_batch((16, 1, 8, 8), 10))


def test_mlp():
    def build():
        mlp = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 5))
        return _WithLoss(mlp, nn.CrossEntropyLoss())

    _check_same_training(build, _classification_batch((32, 20), 5))


class _EncoderRegression(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.layer(x)).squeeze(-1)


def test_transformer_encoder_layer_with_dropout():
    gen = _rng()
    x = ember.tensor(gen.standard_normal((4, 10, 32)).astype(np.float32))
    target = ember.tensor(gen.standard_normal((4, 10)).astype(np.float32))

    def build():
        return _WithLoss(_EncoderRegression(), nn.MSELoss())

    _check_same_training(build, (x, target))


def test_tiny_gpt():
    gpt_model = _import_file(REPO / "benchmarks" / "gpt_model.py", "_ember_bench_gpt_model")
    cfg = gpt_model.GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=32, batch_size=3, dropout=0.1)
    gen = _rng()
    idx = ember.tensor(gen.integers(0, cfg.vocab_size, (cfg.batch_size, cfg.block_size)).astype(np.int64))
    targets = ember.tensor(gen.integers(0, cfg.vocab_size, (cfg.batch_size, cfg.block_size)).astype(np.int64))

    class GPTLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt = gpt_model.build_gpt(ember, cfg)

        def forward(self, idx, targets):
            return self.gpt(idx, targets)[1]

    _check_same_training(GPTLoss, (idx, targets))
