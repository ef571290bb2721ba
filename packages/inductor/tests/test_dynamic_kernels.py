"""Dynamic shapes in kernels (issue 27): a sweep of sizes compiles the inductor backend at most twice.

The first size compiles with static sizes; the second marks the changed dim dynamic (automatic dynamic
shapes), and that compile's kernels take the size as an argument, so every later size runs without
compiling. Compilations are counted by ``ember._inductor.dynamic.compilation_count``; outputs and
gradients are compared with eager mode at every size.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember._inductor.dynamic_compile as dynamic_compile
from ember import nn
from ember._inductor import config, dynamic

BATCHES = (4, 6, 8, 10, 12, 16, 20, 24, 32, 40)
SEQ_LENS = (8, 9, 12, 16, 20, 24, 31, 32, 40, 48)


@pytest.fixture(autouse=True)
def _strict():
    ember._dynamo.reset()
    with config.patch(fallback_on_compile_error=False):
        yield
    ember._dynamo.reset()


def _close(a, b, tol=1e-4):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol=tol, atol=tol)


def _sweep_training(model, make_input, sizes, loss_fn=lambda out: (out * out).mean(), tol=1e-4):
    """Train-step ``model`` compiled and eager at each size; returns the number of compilations."""
    eager = copy.deepcopy(model)
    compiled = ember.compile(model, backend="inductor")
    start = _counts()
    for size in sizes:
        ember.manual_seed(size)
        x = make_input(size)
        model.zero_grad()
        eager.zero_grad()
        out = compiled(x)
        ref = eager(x)
        _close(out, ref, tol)
        loss_fn(out).backward()
        loss_fn(ref).backward()
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            assert p.grad is not None, name
            _close(p.grad, q.grad, tol)
    return _since(start)


def _counts():
    return dynamic.compilation_count("static"), dynamic.compilation_count("dynamic")


def _since(start):
    """(static, dynamic) compilations since ``start``."""
    now = _counts()
    return now[0] - start[0], now[1] - start[1]


def _assert_twice(counts):
    """One compile for the first size, one with the dim dynamic: nothing for the other sizes."""
    assert counts == (1, 1), (counts, dynamic_compile.last_fallback_reason)


def test_mlp_batch_sweep_compiles_twice():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8), nn.LayerNorm(8))
    _assert_twice(_sweep_training(model, lambda b: ember.randn(b, 16), BATCHES))


def test_cnn_block_batch_sweep_compiles_twice():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
    _assert_twice(_sweep_training(model, lambda b: ember.randn(b, 3, 8, 8), BATCHES))


def test_transformer_layer_batch_sweep_compiles_twice():
    ember.manual_seed(0)
    model = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    _assert_twice(_sweep_training(model, lambda b: ember.randn(b, 6, 16), BATCHES, tol=2e-4))


def _attention_chain(x, wq, wk, wv, ln):
    q, k, v = x @ wq, x @ wk, x @ wv
    scores = (q @ k.transpose(-2, -1)) / 4.0
    h = scores.softmax(-1) @ v
    return ln(h + x)


def test_sequence_length_sweep_compiles_twice():
    ember.manual_seed(0)
    ws = [ember.randn(16, 16, requires_grad=True) for _ in range(3)]
    ln = nn.LayerNorm(16)
    compiled = ember.compile(_attention_chain, backend="inductor")
    start = _counts()
    for n in SEQ_LENS:
        x = ember.randn(2, n, 16, requires_grad=True)
        out = compiled(x, *ws, ln)
        ref = _attention_chain(x, *ws, ln)
        _close(out, ref)
        (g,) = ember.autograd.grad(out.sum(), [x])
        (r,) = ember.autograd.grad(ref.sum(), [x])
        _close(g, r)
    _assert_twice(_since(start))


# ---------------------------------------------------------------------------------------------
# the generated code takes sizes as arguments


def _compile_dynamic(fn, example, dims):
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


def test_cpp_kernels_take_sizes_as_arguments():
    x = ember.randn(12, 40)
    compiled = _compile_dynamic(lambda t: ((t.sin() * 2).sum(1), t.exp()), [x], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    source = compiled.graphs[0].source
    assert "const int64_t s0 = (int64_t)(intptr_t)bufs[" in source
    assert "< s0;" in source and "< 12;" not in source  # the loop over rows runs to the size argument
    assert "480" not in source  # nor is the hint's element count baked in anywhere
    for rows in (12, 3, 29, 64):
        y = ember.randn(rows, 40)
        assert compiled.accepts((y,))
        s, e = compiled(y)
        _close(s, (y.sin() * 2).sum(1), 1e-5)
        _close(e, y.exp(), 1e-6)
    assert not compiled.accepts((ember.randn(12, 41),))  # a static dim changed
    assert not compiled.accepts((ember.randn(1, 40),))  # sizes 0 and 1 are specialised


def test_mean_and_view_sizes_become_expressions():
    x = ember.randn(6, 8, 4)
    fn = lambda t: (t.reshape(t.shape[0] * 8, 4).mean(0), t.mean(), t.view(-1).cumsum(0))  # noqa: E731
    compiled = _compile_dynamic(fn, [x], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    for rows in (6, 2, 11, 40):
        y = ember.randn(rows, 8, 4)
        for got, want in zip(compiled(y), fn(y)):
            _close(got, want, 1e-5)


def test_assumption_broken_compiles_again():
    """A decision taken on the hint (here: splitting the inner dim in runs of 16 for a reshape of the heads)
    is assumed for every size; a size that breaks it is refused by ``accepts`` (the caller compiles again)."""
    x = ember.randn(3, 64)
    fn = lambda t: t.view(3, t.shape[1] // 16, 16).softmax(-1).view(3, t.shape[1]) * 2  # noqa: E731
    compiled = _compile_dynamic(fn, [x], [1])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    assert compiled.assumptions, "the compiled code should rely on a divisibility of the size"
    for cols in (32, 48, 160):
        y = ember.randn(3, cols)
        assert compiled.accepts((y,))
        _close(compiled(y)[0], fn(y), 1e-5)
    assert not compiled.accepts((ember.randn(3, 40),))
    print(compiled.assumptions)
