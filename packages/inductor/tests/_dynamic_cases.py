"""Shared sweeps of the dynamic-shape kernel tests (C++, Triton's interpreter, cuda): a model trained
at a series of sizes, compiled and eager, with the compilations counted."""

from __future__ import annotations

import copy

import numpy as np

import ember
import ember._inductor.dynamic_compile as dynamic_compile
from ember import nn
from ember._inductor import dynamic

BATCHES = (4, 6, 8, 10, 12, 16, 20, 24, 32, 40)
SEQ_LENS = (8, 9, 12, 16, 20, 24, 31, 32, 40, 48)


def close(a, b, tol=1e-4):
    """``a`` and ``b`` (tensors, on any device) agree within ``tol``."""
    np.testing.assert_allclose(np.asarray(a.detach().cpu().numpy()), np.asarray(b.detach().cpu().numpy()),
                               rtol=tol, atol=tol)


def counts():
    """(static, dynamic) compilations so far."""
    return dynamic.compilation_count("static"), dynamic.compilation_count("dynamic")


def since(start):
    """(static, dynamic) compilations since ``start``."""
    now = counts()
    return now[0] - start[0], now[1] - start[1]


def assert_twice(got):
    """One compile for the first size, one with the dim dynamic: nothing for the other sizes."""
    assert got == (1, 1), (got, dynamic_compile.last_fallback_reason)


def sweep_training(model, make_input, sizes, loss_fn=lambda out: (out * out).mean(), tol=1e-4):
    """Train-step ``model`` compiled and eager at each size; returns (static, dynamic) compilations."""
    eager = copy.deepcopy(model)
    compiled = ember.compile(model, backend="inductor")
    start = counts()
    for size in sizes:
        ember.manual_seed(size)
        x = make_input(size)
        model.zero_grad()
        eager.zero_grad()
        out = compiled(x)
        ref = eager(x)
        close(out, ref, tol)
        loss_fn(out).backward()
        loss_fn(ref).backward()
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            assert p.grad is not None, name
            close(p.grad, q.grad, tol)
    return since(start)


def mlp_sweep(device="cpu", sizes=BATCHES):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8), nn.LayerNorm(8)).to(device)
    return sweep_training(model, lambda b: ember.randn(b, 16, device=device), sizes)


def cnn_sweep(device="cpu", sizes=BATCHES):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 10)).to(device)
    return sweep_training(model, lambda b: ember.randn(b, 3, 8, 8, device=device), sizes)


def transformer_sweep(device="cpu", sizes=BATCHES, seq=6):
    ember.manual_seed(0)
    model = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True).to(device)
    return sweep_training(model, lambda b: ember.randn(b, seq, 16, device=device), sizes, tol=2e-4)


def attention_chain(x, wq, wk, wv, ln):
    q, k, v = x @ wq, x @ wk, x @ wv
    scores = (q @ k.transpose(-2, -1)) / 4.0
    h = scores.softmax(-1) @ v
    return ln(h + x)


def sequence_sweep(device="cpu", sizes=SEQ_LENS):
    """An attention / softmax / layer_norm chain over sequence lengths, forward and backward."""
    ember.manual_seed(0)
    ws = [ember.randn(16, 16, device=device, requires_grad=True) for _ in range(3)]
    ln = nn.LayerNorm(16).to(device)
    compiled = ember.compile(attention_chain, backend="inductor")
    start = counts()
    for n in sizes:
        x = ember.randn(2, n, 16, device=device, requires_grad=True)
        out = compiled(x, *ws, ln)
        ref = attention_chain(x, *ws, ln)
        close(out, ref)
        (g,) = ember.autograd.grad(out.sum(), [x])
        (r,) = ember.autograd.grad(ref.sum(), [x])
        close(g, r)
    return since(start)


def compile_dynamic(fn, example, dims):
    """compile_fx's result for ``fn`` captured by ember-dynamo with ``dims`` of the first input dynamic."""
    from ember._inductor.compile_fx import compile_fx

    results = []

    def backend(gm, example_inputs):
        results.append(compile_fx(gm, example_inputs))
        return results[-1]

    for d in dims:
        ember._dynamo.mark_dynamic(example[0], d)
    ember.compile(fn, backend=backend)(*example)
    assert len(results) == 1
    return results[0]
