"""2-D depthwise convolution gradients from ember._C (csrc/depthwise.cpp) against the convolution formulas.

A backward that records nothing on plain CPU float32/float64 tensors takes the kernels; a ``create_graph``
backward records, so it takes the formulas (grouped and transposed convolutions, which the convolution op
itself may hand to the same kernels). A float64 formula is the oracle for float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _grads(x, w, b, g, kwargs, create_graph):
    leaves = [ember.tensor(a, requires_grad=True) for a in (x, w, b)]
    out = F.conv2d(*leaves, groups=x.shape[1], **kwargs)
    grads = ember.autograd.grad(out, leaves, ember.tensor(g), create_graph=create_graph)
    if create_graph:  # the formulas ran: the input and weight gradients are recorded, differentiable again
        assert grads[0].grad_fn is not None and grads[1].grad_fn is not None
    return [t.detach().numpy() for t in grads]


CASES = [
    ((2, 6, 9, 9), (3, 3), dict(padding=1)),
    ((2, 5, 16, 16), (3, 3), dict(stride=2, padding=1)),
    ((1, 4, 11, 7), (5, 5), dict(stride=(2, 1), padding=2)),
    ((3, 3, 10, 12), (3, 3), dict(padding=2, dilation=2)),
    ((2, 4, 8, 8), (3, 1), dict(stride=(1, 3))),
    ((1, 2, 3, 3), (5, 5), dict(padding=1)),  # taps that never meet the input
]


@pytest.mark.parametrize("x_shape,kernel,kwargs", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_depthwise_gradients_match_the_formulas(x_shape, kernel, kwargs, dtype, monkeypatch):
    rng = np.random.default_rng(0)
    C = x_shape[1]
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal((C, 1, *kernel)).astype(dtype)
    b = rng.standard_normal(C).astype(dtype)
    out_shape = F.conv2d(ember.tensor(x), ember.tensor(w), groups=C, **kwargs).shape
    g = rng.standard_normal(tuple(out_shape)).astype(dtype)
    calls = []
    for name in ("depthwise_weight_grad", "depthwise_input_grad"):
        kernel_fn = getattr(ember._C, name)
        monkeypatch.setattr(ember._C, name, lambda *a, _k=kernel_fn: calls.append(1) or _k(*a))
    fast = _grads(x, w, b, g, kwargs, False)
    assert len(calls) >= 2  # both kernels (a forward of a kernel larger than its output may run one too)
    formula = _grads(x, w, b, g, kwargs, True)
    # (the formulas' own convolutions may run these kernels too: the weight gradient's, of a batch of one, and
    # the strided input gradient's transposed convolution, as an AOT-traced backward runs them)
    exact = _grads(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), g.astype(np.float64), kwargs,
                   True)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for ours, theirs, oracle in zip(fast, formula, exact):
        assert ours.dtype == dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, oracle.astype(dtype), **tol)
        np.testing.assert_allclose(ours, theirs, **tol)


def test_channel_multiplier_takes_the_formula(monkeypatch):
    monkeypatch.setattr(ember._C, "depthwise_weight_grad", None)  # would raise if called
    x = ember.randn(2, 3, 8, 8, requires_grad=True)
    w = ember.randn(6, 1, 3, 3, requires_grad=True)
    F.conv2d(x, w, groups=3).sum().backward()
    assert x.grad is not None and w.grad is not None


def test_thread_count_does_not_change_the_result():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 64, 32, 32)).astype(np.float32)
    w = rng.standard_normal((64, 1, 3, 3)).astype(np.float32)
    b = np.zeros(64, np.float32)
    g = rng.standard_normal((4, 64, 32, 32)).astype(np.float32)
    previous = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = _grads(x, w, b, g, dict(padding=1), False)
        ember.set_num_threads(2)
        two = _grads(x, w, b, g, dict(padding=1), False)
    finally:
        ember.set_num_threads(previous)
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)
