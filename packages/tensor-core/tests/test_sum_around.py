"""Sums over the dims around one kept block (``grad.sum((0, 2, 3))``, a convolution's bias gradient).

csrc/reduce.cpp's ``sum_around`` sums each contiguous run after the kept block as a row and accumulates the
runs' totals per kept element, with no transposed copy; ``ember._ops.sums`` calls it for large C-contiguous
inputs whose reduced dims are all the others around one block, with runs of at least ``_AROUND_MIN_RUN``
elements. Checked against numpy in float64 (within the bound of the other sum tests), for keepdim, every
dtype it takes, one and two threads and every instruction set the CPU runs, and bit for bit across thread
counts.
"""

import numpy as np
import pytest

import ember
from ember import _C
from ember._ops import sums

SHAPES_DIMS = [
    ((64, 32, 8, 8), (0, 2, 3)),  # a conv bias gradient
    ((3, 5, 7, 40), (0, 3)),  # kept block of two dims
    ((2, 9, 300), (0, 2)),
    ((4, 1, 2, 33, 17), (0, 1, 4)),  # runs of 17 elements
]


@pytest.fixture(params=_C.supported_reduce_isas())
def isa(request):
    previous = _C.set_reduce_isa(request.param)
    yield request.param
    _C.set_reduce_isa(previous)


def _data(shape, dtype):
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return (rng.standard_normal(shape) + 0.5).astype(dtype)


@pytest.mark.parametrize("shape, dims", SHAPES_DIMS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_sum_and_mean_around_a_kept_block_match_numpy(isa, threads, shape, dims, dtype, monkeypatch):
    a = _data(shape, dtype)
    calls = []
    kernel = _C.sum_around
    monkeypatch.setattr(_C, "sum_around", lambda *args: calls.append(args[1:]) or kernel(*args))
    x = ember.from_numpy(a)
    for keepdim in (False, True):
        got = x.sum(dims, keepdim).numpy()
        if dtype == np.int64:
            np.testing.assert_array_equal(got, a.sum(dims, keepdims=keepdim))
            continue
        want = a.astype(np.float64).sum(dims, keepdims=keepdim)
        bound = 64 * np.finfo(dtype).eps * np.abs(a.astype(np.float64)).sum(dims, keepdims=keepdim)
        assert got.dtype == dtype and got.shape == want.shape and np.all(np.abs(got - want) <= bound)
        mean = x.mean(dims, keepdim).numpy()
        count = a.size // want.size
        assert mean.dtype == dtype and np.all(np.abs(mean - want / count) <= bound / count + np.spacing(mean))
    assert calls and all(c == calls[0] for c in calls)  # the kernel ran, on the kept block


def test_sum_around_is_bit_identical_across_thread_counts():
    a = _data((64, 64, 8, 8), np.float32)
    results = []
    for n in (1, 2):
        previous = _C.get_num_threads()
        _C.set_num_threads(n)
        try:
            results.append(_C.sum_around(a, 1, 1))
        finally:
            _C.set_num_threads(previous)
    np.testing.assert_array_equal(results[0], results[1])


def test_other_layouts_and_short_runs_keep_the_reordering_path(monkeypatch):
    monkeypatch.setattr(_C, "sum_around", lambda *args: pytest.fail("sum_around called"))
    a = _data((64, 32, 4, 3), np.float32)  # runs of 12 elements: below _AROUND_MIN_RUN
    np.testing.assert_allclose(ember.from_numpy(a).sum((0, 2, 3)).numpy(), a.sum((0, 2, 3)), rtol=1e-5)
    t = ember.from_numpy(_data((8, 64, 40), np.float32)).transpose(0, 2)  # not C-contiguous
    np.testing.assert_allclose(t.sum((0, 2)).numpy(), t.numpy().sum((0, 2)), rtol=1e-5)
    assert sums._kept_block(np.zeros((64, 8, 8, 8)), (0, 1, 3)) is None  # runs of 8 elements
    assert sums._kept_block(np.zeros((64, 8, 8, 32)), (0, 2, 3)) == (1, 1)
    assert sums._kept_block(np.zeros((64, 8, 8, 32)), (0, 1, 2)) is None  # the last dim is kept
    assert sums._kept_block(np.zeros((64, 8, 8, 32)), (0, 3)) == (1, 2)


def test_sum_around_refuses_other_arrays():
    assert _C.sum_around(np.zeros((4, 5, 6), np.float16), 1, 1) is None
    assert _C.sum_around(np.zeros((4, 5, 6)).transpose(2, 1, 0), 1, 1) is None
    with pytest.raises(ValueError, match="out of range"):
        _C.sum_around(np.zeros((4, 5)), 1, 2)


def test_batch_norm_statistics_of_a_large_input(monkeypatch):
    # training-mode batch_norm's mean and variance over (0, 2, 3) of a contiguous float32 input come from one
    # C++ call (batch_norm_forward_train, the same corrected two-pass arithmetic), not three sum_around calls
    calls = []
    kernel, train = _C.sum_around, _C.batch_norm_forward_train
    monkeypatch.setattr(_C, "sum_around", lambda *args: calls.append("sum_around") or kernel(*args))
    monkeypatch.setattr(_C, "batch_norm_forward_train", lambda *args: calls.append("train") or train(*args))
    a = _data((64, 32, 8, 8), np.float32) * 3
    running_mean, running_var = ember.zeros(32), ember.ones(32)
    out = ember.nn.functional.batch_norm(ember.from_numpy(a), running_mean, running_var, training=True, momentum=0.5)
    wide = a.astype(np.float64)
    mean, var = wide.mean((0, 2, 3)), wide.var((0, 2, 3))
    want = (wide - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(running_mean.numpy(), 0.5 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(running_var.numpy(), 0.5 + 0.5 * var * a.size / 32 / (a.size / 32 - 1), rtol=1e-5)
    assert calls == ["train"]
