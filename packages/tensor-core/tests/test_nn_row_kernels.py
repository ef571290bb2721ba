"""The short-row forward kernels of csrc/nn_rows_backward.cpp (``ember._C.softmax_rows``, ``layer_norm_rows``)
against float64 numpy, and that ``softmax``/``log_softmax``/``layer_norm`` on short last-dim rows take them."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _softmax64(x, log):
    x = x.astype(np.float64)
    shifted = x - x.max(-1, keepdims=True)
    if log:
        return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    e = np.exp(shifted)
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(16, 65, 65), (3, 7), (5, 1), (2, 1024)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_rows_values(log, shape, dtype, monkeypatch):
    x = (np.random.default_rng(0).standard_normal(shape) * 4).astype(dtype)
    calls = []
    kernel = ember._C.softmax_rows
    monkeypatch.setattr(ember._C, "softmax_rows", lambda *a: calls.append(1) or kernel(*a))
    fn = F.log_softmax if log else F.softmax
    ours = fn(ember.from_numpy(x), -1).numpy()
    assert calls and ours.dtype == dtype
    tol = {"rtol": 1e-6, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-13, "atol": 1e-14}
    np.testing.assert_allclose(ours, _softmax64(x, log), **tol)


def test_softmax_rows_masks_nan_and_long_rows(monkeypatch):
    x = np.array([[0.0, -np.inf, 1.0, -np.inf], [np.nan, 0.0, 1.0, 2.0], [-np.inf] * 4], np.float32)
    y = F.softmax(ember.from_numpy(x), -1).numpy()
    assert y[0, 1] == 0.0 and y[0, 3] == 0.0  # masked entries are exact zeros
    np.testing.assert_allclose(y[0, [0, 2]], _softmax64(np.array([[0.0, 1.0]]), False)[0], rtol=1e-6)
    assert np.isnan(y[1]).all() and np.isnan(y[2]).all()  # a NaN, or a fully masked row: NaN throughout
    monkeypatch.setattr(ember._C, "softmax_rows", None)  # would raise if called
    F.softmax(ember.randn(2, 3000), -1)  # long rows keep the generic kernel
    F.softmax(ember.randn(8, 3), 0)  # so do other dims


@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_rows_values(affine, dtype, monkeypatch):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 65, 64)) * 3 + 2).astype(dtype)
    w = rng.standard_normal(64).astype(dtype) if affine in ("both", "weight") else None
    b = rng.standard_normal(64).astype(dtype) if affine in ("both", "bias") else None
    calls = []
    kernel = ember._C.layer_norm_rows
    monkeypatch.setattr(ember._C, "layer_norm_rows", lambda *a: calls.append(1) or kernel(*a))
    ours = F.layer_norm(ember.from_numpy(x), (64,), None if w is None else ember.from_numpy(w),
                        None if b is None else ember.from_numpy(b), eps=1e-5).numpy()
    assert calls and ours.dtype == dtype
    x64 = x.astype(np.float64)
    expected = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    if w is not None:
        expected = expected * w
    if b is not None:
        expected = expected + b
    tol = {"rtol": 1e-6, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    np.testing.assert_allclose(ours, expected, **tol)


def test_row_kernels_do_not_depend_on_threads():
    x = ember.randn(512, 200)
    previous = ember.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            ember.set_num_threads(threads)
            results.append((F.softmax(x, -1).numpy(), F.layer_norm(x, (200,)).numpy()))
    finally:
        ember.set_num_threads(previous)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
