"""The fused CPU recurrence (ember/nn/modules/_rnn_fused.py) against the step-by-step reference ops.

Each case runs a module twice on the same weights and inputs, once with the fused path and once with it
switched off (``fused_direction`` answering None), and compares outputs, final states and every gradient in
float64; it also asserts which path ran. Double backward and retained graphs go through the fused node too.
"""

import numpy as np
import pytest

import ember
import ember.nn as enn
from ember.nn.modules import _rnn_fused, rnn

RNG = np.random.default_rng(7)

CASES = [
    ("RNN", dict(nonlinearity="tanh", num_layers=2)),
    ("RNN", dict(nonlinearity="relu", bidirectional=True)),
    ("LSTM", dict(num_layers=2, batch_first=True)),
    ("LSTM", dict(bidirectional=True, bias=False)),
    ("GRU", dict(num_layers=2, bidirectional=True)),
    ("GRU", dict(batch_first=True, bias=False)),
]


@pytest.fixture
def calls(monkeypatch):
    """Counts the directions the fused path computed."""
    counter = {"fused": 0}
    original = _rnn_fused.fused_direction

    def spy(*args):
        result = original(*args)
        counter["fused"] += result is not None
        return result

    monkeypatch.setattr(rnn, "fused_direction", spy)
    return counter


def _reference(monkeypatch):
    monkeypatch.setattr(rnn, "fused_direction", lambda *args: None)


def _module(name, kwargs, dtype=ember.float64):
    ember.manual_seed(0)
    return getattr(enn, name)(5, 6, **kwargs).to(dtype)


def _run(module, x, hx, weights):
    """Outputs, and the gradients of sum(w * output) for the input, the states and every parameter."""
    x = x.detach().requires_grad_(True)
    hx = None if hx is None else tuple(h.detach().requires_grad_(True) for h in hx)
    module.zero_grad(set_to_none=True)
    state = None if hx is None else (hx if isinstance(module, enn.LSTM) else hx[0])
    out, hidden = module(x, state)
    flat = [out] + (list(hidden) if isinstance(hidden, tuple) else [hidden])
    loss = sum((t * w).sum() for t, w in zip(flat, weights))
    loss.backward()
    grads = [x.grad] + ([] if hx is None else [h.grad for h in hx]) + [p.grad for p in module.parameters()]
    return [t.detach().numpy() for t in flat], [None if g is None else g.numpy() for g in grads]


def _inputs(name, kwargs, batch=3, steps=7):
    shape = (batch, steps, 5) if kwargs.get("batch_first") else (steps, batch, 5)
    x = ember.tensor(RNG.standard_normal(shape))
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    hx = tuple(ember.tensor(RNG.standard_normal((layers, batch, 6))) for _ in range(2 if name == "LSTM" else 1))
    return x, hx


@pytest.mark.parametrize("name,kwargs", CASES)
@pytest.mark.parametrize("with_state", [False, True])
def test_fused_equals_reference(name, kwargs, with_state, calls, monkeypatch):
    module = _module(name, kwargs)
    x, hx = _inputs(name, kwargs)
    hx = hx if with_state else None
    with ember.no_grad():
        out, hidden = module(x, None if hx is None else (hx if name == "LSTM" else hx[0]))
    flat = [out] + (list(hidden) if isinstance(hidden, tuple) else [hidden])
    weights = [ember.tensor(RNG.standard_normal(tuple(t.shape))) for t in flat]
    directions = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    fused_values, fused_grads = _run(module, x, hx, weights)
    assert calls["fused"] == 2 * directions  # the no-grad forward and the recorded one
    _reference(monkeypatch)
    ref_values, ref_grads = _run(module, x, hx, weights)
    for a, b in zip(fused_values, ref_values):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused_grads, ref_grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_no_grad_forward_matches_reference(monkeypatch):
    module = _module("LSTM", dict(num_layers=2), dtype=ember.float32)
    x = ember.tensor(RNG.standard_normal((9, 4, 5)), dtype=ember.float32)
    with ember.no_grad():
        fused, (h, c) = module(x)
        _reference(monkeypatch)
        ref, (h_ref, c_ref) = module(x)
    for a, b in ((fused, ref), (h, h_ref), (c, c_ref)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_packed_equal_lengths_fused_unequal_reference(calls):
    from ember.nn.utils.rnn import pack_padded_sequence

    module = _module("GRU", {})
    x = ember.tensor(RNG.standard_normal((4, 3, 5)))
    module(pack_padded_sequence(x, [4, 4, 4]))
    assert calls["fused"] == 1
    module(pack_padded_sequence(x, [4, 3, 2]))
    assert calls["fused"] == 1  # shrinking batches take the reference


def test_projection_and_float16_take_the_reference(calls):
    _module("LSTM", dict(proj_size=3))(ember.randn(3, 2, 5, dtype=ember.float64))
    _module("GRU", {}, dtype=ember.float16)(ember.randn(3, 2, 5, dtype=ember.float16))
    assert calls["fused"] == 0


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_double_backward_matches_reference(name, calls, monkeypatch):
    module = _module(name, {})
    x0 = ember.tensor(RNG.standard_normal((4, 2, 5)))

    def second_order():
        x = x0.detach().requires_grad_(True)
        out, _ = module(x)
        (g,) = ember.autograd.grad((out**2).sum(), [x], create_graph=True)
        (gg,) = ember.autograd.grad((g**2).sum(), [x])
        return g.detach().numpy(), gg.numpy()

    fused = second_order()
    assert calls["fused"] == 1
    _reference(monkeypatch)
    ref = second_order()
    for a, b in zip(fused, ref):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_retained_graph_backward_twice():
    module = _module("LSTM", {})
    x = ember.tensor(RNG.standard_normal((5, 2, 5)), requires_grad=True)
    out, _ = module(x)
    out.sum().backward(retain_graph=True)
    first = x.grad.clone()
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first.numpy(), rtol=1e-12)


def test_gradient_matches_finite_differences():
    module = _module("GRU", dict(bidirectional=True))
    x = ember.tensor(RNG.standard_normal((4, 2, 5)), requires_grad=True)
    out, h = module(x)
    (out.sum() + (h * h).sum()).backward()
    analytic = x.grad.numpy()
    base = x.detach().numpy()
    numeric = np.empty_like(base)
    eps = 1e-6
    with ember.no_grad():
        for index in np.ndindex(base.shape):
            values = []
            for sign in (1, -1):
                shifted = base.copy()
                shifted[index] += sign * eps
                o, hh = module(ember.tensor(shifted))
                values.append(float(o.sum() + (hh * hh).sum()))
            numeric[index] = (values[0] - values[1]) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode, gates", [("LSTM", 4), ("GRU", 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
def test_sequence_kernels_equal_the_python_loop(mode, gates, dtype, reverse, monkeypatch):
    """The C++ time loops (_C.lstm_/gru_forward_sequence and their backward) give the Python loop's bits: the same
    gemm and gate kernels in the same order (batch > 1: numpy's matmul of one row is a gemv instead)."""
    if _rnn_fused._gemm(np.dtype(dtype)) is None:
        pytest.skip("numpy's cblas gemm was not found: the Python loop is the only one")
    steps, batch, hidden = 6, 3, 8
    gi = RNG.standard_normal((steps, batch, gates * hidden)).astype(dtype)
    h0, c0 = (RNG.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
    c0 = c0 if mode == "LSTM" else None
    w_hh = (0.3 * RNG.standard_normal((gates * hidden, hidden))).astype(dtype)
    b_hh = RNG.standard_normal(gates * hidden).astype(dtype)
    d_out = RNG.standard_normal((steps, batch, hidden)).astype(dtype)
    d_hn, d_cn = (RNG.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
    d_cn = d_cn if mode == "LSTM" else None

    def run():
        work = _rnn_fused._forward(mode, gi, h0, c0, w_hh, b_hh, reverse, keep=True)
        grads = _rnn_fused._backward(mode, work, d_out, d_hn, d_cn, h0, c0, w_hh, reverse)
        kept = [work[k] for k in sorted(work)]
        return kept + [g for g in grads if g is not None]

    fused = run()
    monkeypatch.setattr(_rnn_fused, "_gemm", lambda dtype: None)
    looped = run()
    assert len(fused) == len(looped)
    for a, b in zip(fused, looped):
        np.testing.assert_array_equal(a, b)
