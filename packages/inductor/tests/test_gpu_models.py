"""Models trained on the GPU through ``ember.compile`` (default mode and ``mode="reduce-overhead"``) vs eager.

Issue 27's model checks: the demo's CNN (``examples/digits_cnn.py``), a ``TransformerEncoderLayer`` and the
GPT model of ``benchmarks/gpt_model.py`` train 20 SGD steps on cuda three ways - eagerly, compiled, and
compiled under CUDA graphs - from the same weights and batch; the loss curves must agree within
``rtol=1e-3, atol=1e-4`` (Triton's pointwise math and reduction order differ from CuPy's in the last bits,
and 20 steps carry that drift; cuBLAS computes the matrix products on every side). The reduce-overhead run
must also have replayed CUDA graphs (a graph that silently ran without them would pass for the wrong
reason), and a few checks exercise the capture itself: outputs of a previous replay raise when touched,
and a new batch size records a new graph.

Dropout is 0 here: a graph with random ops runs without CUDA graphs by design (see
runtime/cudagraphs.py). Every test is marked ``cuda`` (skipped without a GPU); sizes are small so that the
file runs in well under a minute on an H100 once Triton's kernels are compiled.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from _triton_cases import cuda_device

import ember
import ember.nn as nn
from ember._inductor import config
from ember._inductor.runtime import cudagraphs

pytestmark = pytest.mark.cuda

REPO = Path(__file__).resolve().parents[3]
STEPS = 20
RTOL, ATOL = 1e-3, 1e-4


@pytest.fixture(autouse=True)
def _strict():
    with config.patch(fallback_on_compile_error=False, triton_on_cpu=False):
        yield


def _import_file(path: Path, name: str):
    """Import a script of the repository (examples/, benchmarks/) by its path."""
    folder = str(path.parent)
    added = folder not in sys.path
    if added:  # the demo imports its neighbour example_utils
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
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


def _train(build, batch, device, mode, lr=0.05):
    """20 SGD steps of ``build()`` on ``device``: eagerly (``mode`` None) or through ``ember.compile``."""
    ember.manual_seed(0)
    model = build().to(device)
    model.train()
    optimizer = ember.optim.SGD(model.parameters(), lr=lr)
    x, target = (t.to(device) for t in batch)
    step = model if mode is None else ember.compile(model, mode=mode)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = step(x, target)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
    return losses


def _check(build, batch):
    device = cuda_device()
    eager = _train(build, batch, device, None)
    assert eager[-1] < eager[0], "the eager model did not learn: the comparison would mean little"
    compiled = _train(build, batch, device, "default")
    np.testing.assert_allclose(compiled, eager, rtol=RTOL, atol=ATOL, err_msg="mode='default'")
    before = cudagraphs.counters["replays"]
    cudagraphs.skip_reasons.clear()
    graphed = _train(build, batch, device, "reduce-overhead")
    np.testing.assert_allclose(graphed, eager, rtol=RTOL, atol=ATOL, err_msg="mode='reduce-overhead'")
    replays = cudagraphs.counters["replays"] - before
    # forward and backward launch their graph on every step after the first (the warm-up); step 2 records
    assert replays >= 2 * (STEPS - 1), f"{replays} replays; calls ran without CUDA graphs: {dict(cudagraphs.skip_reasons)}"


def _classification_batch(shape, classes):
    gen = np.random.default_rng(0)
    x = ember.tensor(gen.standard_normal(shape).astype(np.float32))
    target = ember.tensor(gen.integers(0, classes, shape[0]).astype(np.int64))
    return x, target


def test_demo_cnn_oncuda_device():
    demo = _import_file(REPO / "examples" / "digits_cnn.py", "_ember_demo_digits_cnn_gpu")
    _check(lambda: _WithLoss(demo.DigitsCNN(dropout=0.0), nn.CrossEntropyLoss()),
           _classification_batch((32, 1, 8, 8), 10))


class _EncoderRegression(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                                batch_first=True)
        self.head = nn.Linear(64, 1)

    def forward(self, x):
        return self.head(self.layer(x)).squeeze(-1)


def test_transformer_encoder_layer_oncuda_device():
    gen = np.random.default_rng(0)
    x = ember.tensor(gen.standard_normal((8, 16, 64)).astype(np.float32))
    target = ember.tensor(gen.standard_normal((8, 16)).astype(np.float32))
    _check(lambda: _WithLoss(_EncoderRegression(), nn.MSELoss()), (x, target))


def test_gpt_oncuda_device():
    gpt_model = _import_file(REPO / "benchmarks" / "gpt_model.py", "_ember_bench_gpt_model_gpu")
    cfg = gpt_model.GPTConfig(vocab_size=65, block_size=32, n_layer=2, n_head=2, n_embd=64, batch_size=4)
    x, y = gpt_model.batch(cfg)

    class GPTLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt = gpt_model.build_gpt(ember, cfg)

        def forward(self, idx, targets):
            return self.gpt(idx, targets)[1]

    _check(GPTLoss, (ember.tensor(x), ember.tensor(y)))


def test_reduce_overhead_outputs_and_shapes_oncuda_device():
    device = cuda_device()

    def f(x):
        return (x.sin() * 2).relu() + 1

    compiled = ember.compile(f, mode="reduce-overhead", dynamic=False)
    before = dict(cudagraphs.counters)
    x = ember.randn(64, 32, device=device)
    outs = [compiled(x) for _ in range(3)]  # warm-up, recording, replay
    expected = f(x)
    np.testing.assert_allclose(outs[-1].cpu().numpy(), expected.cpu().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="cudagraph_mark_step_begin"):
        outs[1] + 1  # overwritten by the third call
    kept = compiled(x).clone()  # a clone outlives the next replay
    y = ember.randn(64, 32, device=device)
    np.testing.assert_allclose(compiled(y).cpu().numpy(), f(y).cpu().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(kept.cpu().numpy(), expected.cpu().numpy(), rtol=1e-5, atol=1e-6)
    assert cudagraphs.counters["recordings"] - before.get("recordings", 0) == 1
    z = ember.randn(16, 32, device=device)  # a new size: compiled again, a new recording
    for _ in range(3):
        out = compiled(z)
    np.testing.assert_allclose(out.cpu().numpy(), f(z).cpu().numpy(), rtol=1e-5, atol=1e-6)
    assert cudagraphs.counters["recordings"] - before.get("recordings", 0) == 2


def test_reduce_overhead_index_bounds_checked_after_replays_oncuda_device():
    """An extern ``index`` inside a recorded graph: its bounds check can't read the GPU during the capture, so it
    is recorded, and a replay with an index out of range raises IndexError at the next synchronizing call."""
    device = cuda_device()
    table = ember.randn(10, 4, device=device)

    def f(t, i):
        return t[i] * 2

    compiled = ember.compile(f, mode="reduce-overhead", dynamic=False)
    before = cudagraphs.counters["replays"]
    good = ember.tensor([1, 2, 3], device=device)
    for _ in range(3):  # warm-up, recording, replay
        out = compiled(table, good)
    np.testing.assert_allclose(out.cpu().numpy(), table.cpu().numpy()[[1, 2, 3]] * 2)
    assert cudagraphs.counters["replays"] - before >= 1, dict(cudagraphs.skip_reasons)
    compiled(table, ember.tensor([1, 20, 3], device=device))
    with pytest.raises(IndexError, match="CUDA graph replay"):
        ember.cuda.synchronize()
    out = compiled(table, good)  # the flag was reset by the read: a good call passes again
    np.testing.assert_allclose(out.cpu().numpy(), table.cpu().numpy()[[1, 2, 3]] * 2)
