"""Activation gradients at NaN and at non-finite gradients: which branch passes, as PyTorch's backward kernels."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F

_SELU_SCALE = 1.0507009873554804934193349852946


@pytest.mark.parametrize(
    "fn, expected",
    [
        (F.relu, 1.0),
        (F.relu6, 1.0),
        (lambda x: F.hardtanh(x, -1.0, 1.0), 1.0),
        (F.elu, 1.0),
        (F.celu, 1.0),
        (F.selu, _SELU_SCALE),
    ],
)
def test_a_nan_input_passes_its_gradient(fn, expected):
    # PyTorch's backward kernels block at and below/beyond the limits (x <= 0, x <= min || x >= max): NaN is neither
    x = ember.tensor([float("nan")], dtype=ember.float64, requires_grad=True)
    fn(x).backward(ember.tensor([1.0], dtype=ember.float64))
    np.testing.assert_allclose(x.grad.numpy(), [expected], rtol=1e-15)


@pytest.mark.parametrize("fn", [F.relu, F.relu6, lambda x: F.hardtanh(x, -1.0, 1.0)])
def test_a_blocked_nonfinite_gradient_gives_zero(fn):
    x = ember.tensor([-2.0, 7.0, 0.5], requires_grad=True)
    y = fn(x)
    y.backward(ember.tensor([float("inf"), float("nan"), 3.0]))
    got = x.grad.numpy()
    assert got[0] == 0.0 and not np.signbit(got[0])
    if fn is F.relu:
        assert np.isnan(got[1])  # relu passes 7.0's gradient (NaN) unchanged
    else:
        assert got[1] == 0.0
    assert got[2] == 3.0  # the element inside the limits passes its gradient


def test_threshold_forward_keeps_nan():
    x = ember.tensor([float("nan"), 0.5, 2.0])
    np.testing.assert_array_equal(F.threshold(x, 1.0, -7.0).numpy(), [np.nan, -7.0, 2.0])
