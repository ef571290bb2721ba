"""threshold_backward (relu's and threshold's gradient) on special values, bit for bit."""

import numpy as np
import pytest

import ember
from ember._ops import registry

threshold_backward = registry["threshold_backward"]
SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e-40, -2.5, 0.5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("threshold", [0, 0.5, -1])
def test_specials_bit_for_bit(dtype, threshold):
    g, y = (a.astype(dtype) for a in np.meshgrid(SPECIALS, SPECIALS))
    result = threshold_backward(ember.from_numpy(g), ember.from_numpy(y), threshold).numpy()
    # PyTorch's rule: 0 (positive zero) where y <= threshold, else the gradient untouched; NaN y passes it
    blocked = y <= dtype(threshold)
    expected = np.where(blocked, dtype(0), g)
    assert result.dtype == dtype
    np.testing.assert_array_equal(result.view(np.uint8), expected.view(np.uint8))
    assert not np.signbit(result[blocked]).any()


def test_broadcasting_promotion_and_integers():
    g = ember.tensor([[1.0, -2.0, 3.0]])
    y = ember.tensor([[0.0], [2.0]], dtype=ember.float64)
    result = threshold_backward(g, y, 1)
    assert result.dtype is ember.float64 and result.shape == (2, 3)
    np.testing.assert_array_equal(result.numpy(), [[0.0, 0.0, 0.0], [1.0, -2.0, 3.0]])
    ints = threshold_backward(ember.tensor([1, 2, 3]), ember.tensor([0, 1, 2]), 1)
    np.testing.assert_array_equal(ints.numpy(), [0, 0, 3])


def test_relu_gradient_passes_at_nan_and_blocks_nonfinite_gradients():
    x = ember.tensor([float("nan"), -1.0, 2.0], requires_grad=True)
    y = ember.relu(x)
    y.backward(ember.tensor([5.0, float("inf"), 7.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 0.0, 7.0])
