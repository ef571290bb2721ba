"""ember._C's gradient kernels (csrc/nn_backward.cpp) against the formulas they stand in for.

A backward that records nothing on plain CPU tensors runs batch_norm's training-mode gradients and the
max pools' input gradient in one kernel each, and ``threshold_backward`` (relu's backward) runs its C++
kernel on contiguous float arrays. Each test computes the same gradients through the formula (a
``create_graph=True`` backward records, so it takes the formulas) or numpy, and compares them; float64
oracles check the float32 kernels' accuracy.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember._ops.pointwise_backward import _threshold_backward_np, threshold_backward


def _grads(fn, inputs, grad_out, create_graph):
    leaves = [ember.tensor(a, requires_grad=True) for a in inputs]
    out = fn(*leaves)
    grads = ember.autograd.grad(out, leaves, ember.tensor(grad_out), create_graph=create_graph)
    return [g.detach().numpy() for g in grads]


def _kernel_and_formula(fn, inputs, grad_out, monkeypatch, kernel_name):
    """The gradients without and with ``create_graph``; asserts that only the first called the kernel."""
    calls = []
    kernel = getattr(ember._C, kernel_name)
    monkeypatch.setattr(ember._C, kernel_name, lambda *a: calls.append(1) or kernel(*a))
    fast = _grads(fn, inputs, grad_out, False)
    assert calls, f"the backward did not call ember._C.{kernel_name}"
    calls.clear()
    formula = _grads(fn, inputs, grad_out, True)
    assert not calls, f"a recording backward called ember._C.{kernel_name}"
    return fast, formula


# -- batch_norm ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(64, 32, 8, 8), (5, 3, 7), (16, 4), (2, 3, 2, 3, 4), (1, 3, 2, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_backward_kernel_matches_the_formula(shape, dtype, monkeypatch):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)
    b = rng.standard_normal(shape[1]).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)

    def bn(x, w, b):
        return F.batch_norm(x, None, None, w, b, training=True, eps=1e-3)

    kernel, formula = _kernel_and_formula(bn, [x, w, b], g, monkeypatch, "batch_norm_backward")
    # float64 formula as the oracle for the float32 kernel
    exact = _grads(bn, [a.astype(np.float64) for a in (x, w, b)], g.astype(np.float64), True)
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-10}
    for ours, theirs, oracle in zip(kernel, formula, exact):
        assert ours.dtype == dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, **tol)
        np.testing.assert_allclose(ours, oracle, **tol)


def test_batch_norm_backward_kernel_without_weight_and_with_a_non_contiguous_grad():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4, 5)).astype(np.float32)
    g = rng.standard_normal((6, 5, 4)).astype(np.float32)

    def run(create_graph):
        leaf = ember.tensor(x, requires_grad=True)
        out = F.batch_norm(leaf, None, None, None, None, training=True)
        grad_out = ember.tensor(g).transpose(1, 2)  # a transposed (non-contiguous) output gradient
        return ember.autograd.grad(out, leaf, grad_out, create_graph=create_graph)[0].detach().numpy()

    np.testing.assert_allclose(run(False), run(True), rtol=1e-5, atol=1e-5)


def test_batch_norm_module_step_uses_the_kernel_and_keeps_running_stats():
    # a BatchNorm2d module in training: gradients of input, weight and bias as the formula gives them
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 3, 4, 4)).astype(np.float32)
    results = []
    for create_graph in (False, True):
        ember.manual_seed(0)
        bn = ember.nn.BatchNorm2d(3)
        leaf = ember.tensor(x, requires_grad=True)
        (bn(leaf) ** 2).sum().backward(create_graph=create_graph)
        results.append([t.detach().numpy() for t in (leaf.grad, bn.weight.grad, bn.bias.grad, bn.running_mean)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_batch_norm_backward_kernel_refuses_bad_arrays():
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="differ"):
        ember._C.batch_norm_backward(x, np.zeros((2, 3, 4), np.float64), None, 1e-5, True)
    with pytest.raises(ValueError, match="contiguous"):
        ember._C.batch_norm_backward(x.transpose(0, 2, 1), x.transpose(0, 2, 1), None, 1e-5, True)
    with pytest.raises(ValueError, match="weight"):
        ember._C.batch_norm_backward(x, x, np.zeros(2, np.float32), 1e-5, True)


# -- max pooling --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pool, shape, kwargs",
    [
        (F.max_pool2d, (4, 6, 8, 8), {"kernel_size": 2}),
        # windows that tile the input: a recording backward takes the gather form (a where, no scatter),
        # with the rows and columns of a floor-mode remainder left at zero
        (F.max_pool2d, (2, 3, 9, 7), {"kernel_size": 2}),
        (F.max_pool2d, (2, 3, 9, 8), {"kernel_size": (3, 2)}),
        (F.max_pool1d, (2, 3, 11), {"kernel_size": 2}),
        (F.max_pool3d, (1, 2, 4, 5, 6), {"kernel_size": 2}),
        (F.max_pool2d, (1, 2, 7, 7), {"kernel_size": 2, "ceil_mode": True}),  # a window past the edge: scatter
        (F.max_pool2d, (3, 7, 9), {"kernel_size": 3, "stride": 1, "padding": 1}),  # overlapping windows
        (F.max_pool1d, (2, 3, 10), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
        (F.max_pool3d, (1, 2, 4, 5, 6), {"kernel_size": 2, "stride": (1, 2, 2)}),
        (F.adaptive_max_pool2d, (2, 3, 7, 5), {"output_size": (3, 2)}),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_backward_kernel_matches_the_formula(pool, shape, kwargs, dtype, monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[::7] = x.flat[0]  # ties: the forward's indices decide
    out_shape = pool(ember.tensor(x), **kwargs).shape
    g = rng.standard_normal(tuple(out_shape)).astype(dtype)
    (kernel,), (formula,) = _kernel_and_formula(lambda t: pool(t, **kwargs), [x], g, monkeypatch, "max_pool_backward")
    np.testing.assert_array_equal(kernel, formula)


def test_max_pool_backward_kernel_refuses_indices_outside_the_plane():
    g = np.ones((2, 3), np.float32)
    with pytest.raises(IndexError, match="outside"):
        ember._C.max_pool_backward(g, np.array([[0, 1, 2], [0, 9, 1]]), 4)
    np.testing.assert_array_equal(
        ember._C.max_pool_backward(g, np.array([[0, 0, 2], [3, 3, 3]]), 4), [[2, 0, 1, 0], [0, 0, 0, 3]]
    )


# -- threshold_backward -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threshold", [0.0, 0, -1.5, 0.25, float("nan")])
def test_threshold_backward_kernel_matches_numpy(dtype, threshold):
    rng = np.random.default_rng(4)
    y = rng.standard_normal((3, 1000)).astype(dtype)
    y[0, :6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.25]
    g = rng.standard_normal((3, 1000)).astype(dtype)
    g[1, :3] = [np.nan, np.inf, -0.0]
    got = threshold_backward(ember.tensor(g), ember.tensor(y), threshold).numpy()
    with np.errstate(all="ignore"):
        want = _threshold_backward_np(g, y, threshold)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # bit for bit: +0.0 where blocked


def test_threshold_backward_non_contiguous_inputs_take_numpy():
    y = np.arange(-6.0, 6.0).reshape(3, 4)
    g = ember.ones(4, 3, dtype=ember.float64).T  # a transposed view
    assert not g.is_contiguous()
    got = threshold_backward(g, ember.tensor(y), 0.0)
    np.testing.assert_array_equal(got.numpy(), (y > 0).astype(np.float64))


# -- cross_entropy ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignored", [False, True])
def test_cross_entropy_backward_fast_path_matches_the_formula_and_torch(dtype, reduction, ignored, monkeypatch):
    # (N, C) logits with class indices: the numpy fast path gives the formula's bits; torch is the oracle
    torch = pytest.importorskip("torch")
    from ember.autograd.derivatives import nn_loss

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((37, 11)) * 3).astype(dtype)
    target = rng.integers(0, 11, 37)
    if ignored:
        target[::5] = -100
    grad_out = np.asarray(1.5, dtype) if reduction != "none" else rng.standard_normal(37).astype(dtype)
    calls = []
    fast_path = nn_loss._cross_entropy_input_cpu
    monkeypatch.setattr(nn_loss, "_cross_entropy_input_cpu", lambda *a: calls.append(1) or fast_path(*a))

    def fn(logits):
        return F.cross_entropy(logits, ember.tensor(target), reduction=reduction)

    fast = _grads(fn, [x], grad_out, False)[0]
    assert calls, "the backward did not take the fast path"
    np.testing.assert_array_equal(fast, _grads(fn, [x], grad_out, True)[0])
    xt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.cross_entropy(xt, torch.tensor(target), reduction=reduction).backward(torch.tensor(grad_out))
    np.testing.assert_allclose(fast, xt.grad.numpy(), rtol=1e-5, atol=1e-6)


# -- linear -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 5), (3, 7, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_backward_fast_path_matches_the_formula_and_torch(dtype, shape, bias, monkeypatch):
    # the products on the arrays give the formulas' bits (the same matmul array function); torch is the oracle
    torch = pytest.importorskip("torch")
    from ember.autograd.derivatives import nn_activation

    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(shape).astype(dtype), rng.standard_normal((6, 5)).astype(dtype)]
    if bias:
        arrays.append(rng.standard_normal(6).astype(dtype))
    grad_out = rng.standard_normal(shape[:-1] + (6,)).astype(dtype)
    calls = []
    fast_path = nn_activation._linear_grads_cpu
    monkeypatch.setattr(nn_activation, "_linear_grads_cpu", lambda *a: calls.append(1) or fast_path(*a))

    fast = _grads(F.linear, arrays, grad_out, False)
    assert calls, "the backward did not take the fast path"
    for got, formula in zip(fast, _grads(F.linear, arrays, grad_out, True)):
        np.testing.assert_array_equal(got, formula)
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    torch.nn.functional.linear(*leaves).backward(torch.tensor(grad_out))
    for got, leaf in zip(fast, leaves):
        np.testing.assert_allclose(got, leaf.grad.numpy(), rtol=1e-5, atol=1e-5)
