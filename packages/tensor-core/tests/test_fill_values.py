"""Fill values must be numbers: ``full``, ``full_like``, ``new_full``, ``fill_`` and ``scalar_tensor``.

``ember.full(shape, None)`` once returned NaN (None became a float NaN in numpy); PyTorch's argument
parser raises TypeError naming the argument. The parity file checks the same calls against PyTorch.
"""

import math

import numpy as np
import pytest

import ember

NOT_NUMBERS = [None, "a", [1.0], (1.0,), {1.0: 2.0}, object()]


def _name(value):
    return type(value).__name__


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=_name)
@pytest.mark.parametrize("dtype", [None, ember.float32, ember.int64, ember.bool], ids=str)
def test_full_refuses_non_numbers(value, dtype):
    with pytest.raises(TypeError, match=rf"^full\(\): argument 'fill_value' \(position 2\) must be Number, not "
                                         rf"{_name(value)}$"):
        ember.full((2, 3), value, dtype=dtype)


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=_name)
def test_full_like_and_new_full_refuse_non_numbers(value):
    x = ember.ones(2, 3)
    with pytest.raises(TypeError, match=rf"^full_like\(\): argument 'fill_value' \(position 2\) must be Number, "
                                         rf"not {_name(value)}$"):
        ember.full_like(x, value)
    with pytest.raises(TypeError, match=rf"^new_full\(\): argument 'fill_value' \(position 2\) must be Number, "
                                         rf"not {_name(value)}$"):
        x.new_full((2,), value)


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=_name)
def test_fill_refuses_non_numbers_and_leaves_the_tensor(value):
    x = ember.ones(3)
    with pytest.raises(TypeError, match=rf"^fill_\(\): argument 'value' \(position 2\) must be Number or Tensor, "
                                         rf"not {_name(value)}$"):
        x.fill_(value)
    np.testing.assert_array_equal(x.numpy(), np.ones(3, np.float32))


def test_scalar_tensor_refuses_none():
    with pytest.raises(TypeError, match=r"^scalar_tensor\(\): argument 's' \(position 1\) must be Number, not NoneType"):
        ember.scalar_tensor(None)


def test_full_refuses_a_tensor_with_dimensions():
    with pytest.raises(TypeError, match=r"must be Number, not Tensor"):
        ember.full((2,), ember.ones(2))


def test_meta_device_refuses_too():
    with pytest.raises(TypeError, match=r"must be Number, not NoneType"):
        ember.full((2,), None, device="meta")


@pytest.mark.parametrize(
    "value, dtype, expected",
    [
        (7, None, np.array([7, 7], np.int64)),
        (2.5, None, np.array([2.5, 2.5], np.float32)),
        (True, None, np.array([True, True])),
        (np.float32(1.5), None, np.array([1.5, 1.5], np.float32)),
        (np.int16(3), ember.float64, np.array([3.0, 3.0])),
        (math.inf, None, np.array([math.inf, math.inf], np.float32)),
        (1 - 2j, None, np.array([1 - 2j, 1 - 2j], np.complex64)),
    ],
)
def test_numbers_still_fill(value, dtype, expected):
    result = ember.full((2,), value, dtype=dtype)
    assert result.dtype.numpy_dtype == expected.dtype
    np.testing.assert_array_equal(result.numpy(), expected)


def test_zero_dim_tensors_count_as_numbers():
    np.testing.assert_array_equal(ember.full((2,), ember.tensor(3.0)).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(ember.full_like(ember.zeros(2), ember.tensor(4.0)).numpy(), [4.0, 4.0])
    x = ember.zeros(2)
    x.fill_(ember.tensor(5))
    np.testing.assert_array_equal(x.numpy(), [5.0, 5.0])
    np.testing.assert_array_equal(ember.scalar_tensor(2).numpy(), np.float32(2.0))
