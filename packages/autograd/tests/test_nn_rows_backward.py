"""ember._C's row gradient kernels (csrc/nn_rows_backward.cpp) against the formulas they stand in for.

A backward that records nothing on plain CPU float32/float64 tensors runs softmax's and log_softmax's (along
the last dim), layer_norm's and gelu's gradients in one kernel each. Each test computes the same gradients
through the formula (a ``create_graph=True`` backward records, so it takes the formulas) and compares; a
float64 formula is the oracle for the float32 kernels.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _grads(fn, inputs, grad_out, create_graph):
    leaves = [ember.tensor(a, requires_grad=True) for a in inputs]
    out = fn(*leaves)
    grads = ember.autograd.grad(out, leaves, ember.tensor(grad_out), create_graph=create_graph)
    return [g.detach().numpy() for g in grads]


def _kernel_formula_oracle(fn, inputs, grad_out, monkeypatch, kernel_name):
    """The gradients without and with ``create_graph`` (asserting only the first called the kernel), and the
    float64 formula's."""
    calls = []
    kernel = getattr(ember._C, kernel_name)
    monkeypatch.setattr(ember._C, kernel_name, lambda *a: calls.append(1) or kernel(*a))
    fast = _grads(fn, inputs, grad_out, False)
    assert calls, f"the backward did not call ember._C.{kernel_name}"
    calls.clear()
    formula = _grads(fn, inputs, grad_out, True)
    assert not calls, f"a recording backward called ember._C.{kernel_name}"
    exact = _grads(fn, [a.astype(np.float64) for a in inputs], grad_out.astype(np.float64), True)
    return fast, formula, exact


def _compare(fast, formula, exact, dtype):
    """The kernel against the float64 formula (tight) and the formula in the same dtype (float32: looser, the
    formula's own rounding, e.g. gelu's tanh form cancelling near -3, is up to ~2e-6 off)."""
    tol = {"rtol": 2e-5, "atol": 2e-6} if dtype == np.float32 else {"rtol": 1e-11, "atol": 1e-12}
    same_dtype = {"rtol": 2e-5, "atol": 1e-5} if dtype == np.float32 else tol
    for ours, theirs, oracle in zip(fast, formula, exact):
        assert ours.dtype == dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, oracle.astype(dtype), **tol)
        np.testing.assert_allclose(ours, theirs, **same_dtype)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(16, 65, 65), (7,), (3, 1), (2, 3, 300)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_backward_kernel(log, shape, dtype, monkeypatch):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    fn = (lambda t: F.log_softmax(t, -1)) if log else (lambda t: F.softmax(t, -1))
    _compare(*_kernel_formula_oracle(fn, [x], g, monkeypatch, "softmax_backward"), dtype)


def test_softmax_backward_other_dims_take_the_formula(monkeypatch):
    monkeypatch.setattr(ember._C, "softmax_backward", None)  # would raise if called
    x = ember.randn(3, 4, requires_grad=True)
    F.softmax(x, 0).sum().backward()
    assert x.grad is not None


@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("shape,normalized", [((4, 65, 64), (64,)), ((5, 3, 7), (3, 7)), ((2, 200), (200,))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_backward_kernel(affine, shape, normalized, dtype, monkeypatch):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(normalized).astype(dtype)
    b = rng.standard_normal(normalized).astype(dtype)
    if affine == "both":
        inputs, fn = [x, w, b], lambda x, w, b: F.layer_norm(x, normalized, w, b, eps=1e-5)
    elif affine == "weight":
        inputs, fn = [x, w], lambda x, w: F.layer_norm(x, normalized, w, None, eps=1e-5)
    else:
        inputs, fn = [x], lambda x: F.layer_norm(x, normalized, None, None, eps=1e-5)
    _compare(*_kernel_formula_oracle(fn, inputs, g, monkeypatch, "layer_norm_backward"), dtype)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_backward_kernel(approximate, dtype, monkeypatch):
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.standard_normal(5000) * 4, [0.0, -0.0, 1e-30, -40.0, 40.0, 3.0, -3.0]]).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    fast, formula, exact = _kernel_formula_oracle(
        lambda t: F.gelu(t, approximate=approximate), [x], g, monkeypatch, "gelu_backward"
    )
    _compare(fast, formula, exact, dtype)


def test_gelu_backward_nan_and_threads(monkeypatch):
    x = np.array([np.nan, 1.0, -2.0] * 20000, np.float32)
    g = np.ones_like(x)
    previous = ember.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            ember.set_num_threads(threads)
            results.append(_grads(F.gelu, [x], g, False)[0])
    finally:
        ember.set_num_threads(previous)
    assert np.isnan(results[0][0]) and np.array_equal(results[0], results[1], equal_nan=True)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape_q,shape_kv", [((2, 4, 9, 8), (2, 4, 9, 8)), ((3, 5, 4), (3, 7, 4)), ((6, 3), (6, 3))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sdpa_backward_cpu_path(causal, shape_q, shape_kv, dtype, monkeypatch):
    rng = np.random.default_rng(3)
    q = rng.standard_normal(shape_q).astype(dtype)
    k = rng.standard_normal(shape_kv).astype(dtype)
    v = rng.standard_normal(shape_kv[:-1] + (5,)).astype(dtype)
    g = rng.standard_normal(shape_q[:-1] + (5,)).astype(dtype)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    _compare(*_kernel_formula_oracle(fn, [q, k, v], g, monkeypatch, "attention_backward"), dtype)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sdpa_backward_numpy_steps_without_the_attention_kernel(causal, dtype, monkeypatch):
    # an ember._C without attention_backward (or a BLAS whose gemm was not found) takes the formula's steps
    # on the numpy arrays, with softmax's backward row kernel
    monkeypatch.delattr(ember._C, "attention_forward")
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((2, 3, 9, 8)).astype(dtype), rng.standard_normal((2, 3, 7, 8)).astype(dtype)
    v, g = rng.standard_normal((2, 3, 7, 5)).astype(dtype), rng.standard_normal((2, 3, 9, 5)).astype(dtype)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    _compare(*_kernel_formula_oracle(fn, [q, k, v], g, monkeypatch, "softmax_backward"), dtype)


def test_sdpa_backward_with_mask_takes_the_formula(monkeypatch):
    monkeypatch.setattr(ember._C, "softmax_backward", None)  # would raise if called
    q, k, v = (ember.randn(2, 3, 4, requires_grad=True) for _ in range(3))
    mask = ember.ones(3, 3, dtype=ember.bool).tril()
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
    assert q.grad is not None
