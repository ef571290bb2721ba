"""Convolution gradients where the sums are empty (issue 18): no input channels, no samples.

``conv2d(x, w, b)`` with ``w`` of shape ``(C_out, 0, k, k)`` is the bias; its gradients are
empty for ``x`` and ``w`` and the summed output gradient for ``b``. The adjoint convolutions the
general formula runs refuse zero channels, so these calls take their own branch.
"""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


@pytest.mark.parametrize("n", [1, 2, 3])
def test_convolution_without_input_channels_has_gradients(n):
    conv = getattr(F, f"conv{n}d")
    x = ember.ones(2, 0, *(5,) * n, requires_grad=True)
    w = ember.ones(3, 0, *(2,) * n, requires_grad=True)
    bias = ember.tensor([1.5, -2.0, 0.25], requires_grad=True)
    out = conv(x, w, bias)
    (out * ember.arange(1.0, 4.0).reshape(1, 3, *(1,) * n)).sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape
    # d/db_c of sum(c_weight * out) = c_weight * (positions per channel) * batch
    np.testing.assert_array_equal(bias.grad.numpy(), np.array([1.0, 2.0, 3.0], np.float32) * 2 * 4**n)


def test_convolution_of_an_empty_batch_has_zero_weight_gradient():
    x = ember.ones(0, 3, 5, 5, requires_grad=True)
    w = ember.ones(4, 3, 2, 2, requires_grad=True)
    bias = ember.ones(4, requires_grad=True)
    F.conv2d(x, w, bias).sum().backward()
    assert x.grad.shape == (0, 3, 5, 5)
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros((4, 3, 2, 2), np.float32))
    np.testing.assert_array_equal(bias.grad.numpy(), np.zeros(4, np.float32))
