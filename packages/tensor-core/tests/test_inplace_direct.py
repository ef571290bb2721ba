"""In-place pointwise ops that write straight into ``self`` (``make_inplace``'s direct kernels).

Oracle: the functional op on a copy of the old values (the direct kernels must give its exact
bits), numpy for views and overlapping operands.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember._ops._pointwise_helpers import _INTO

RNG = np.random.default_rng(0)
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 3e38, np.inf, -np.inf, np.nan])


def _values(shape, dtype, positive=False):
    a = RNG.standard_normal(shape).astype(dtype)
    if a.size >= SPECIAL.size:
        a.reshape(-1)[: SPECIAL.size] = SPECIAL.astype(dtype)
    return np.abs(a) + 0.5 if positive else a


# (op name, args after self as functions of (shape, dtype), kwargs)
CASES = [
    ("add", lambda s, d: (ember.tensor(_values(s, d)),), {}),
    ("add", lambda s, d: (ember.tensor(_values(s, d)),), {"alpha": -0.3}),
    ("add", lambda s, d: (0.1,), {}),
    ("add", lambda s, d: (3,), {"alpha": 2}),
    ("add", lambda s, d: (ember.tensor(_values((), d)),), {"alpha": 1.5}),
    ("sub", lambda s, d: (ember.tensor(_values(s, d)),), {"alpha": 0.7}),
    ("mul", lambda s, d: (ember.tensor(_values(s, d)),), {}),
    ("mul", lambda s, d: (0.9,), {}),
    ("div", lambda s, d: (ember.tensor(_values(s, d)),), {}),
    ("div", lambda s, d: (7,), {}),
    ("lerp", lambda s, d: (ember.tensor(_values(s, d)), 0.1), {}),
    ("lerp", lambda s, d: (ember.tensor(_values(s, d)), 0.75), {}),
    ("addcmul", lambda s, d: (ember.tensor(_values(s, d)), ember.tensor(_values(s, d))), {"value": -0.25}),
    ("addcmul", lambda s, d: (ember.tensor(_values(s, d)), ember.tensor(_values(s, d))), {}),
    ("addcdiv", lambda s, d: (ember.tensor(_values(s, d)), ember.tensor(_values(s, d, True))), {"value": 0.3}),
    ("clamp", lambda s, d: (), {"min": -0.5, "max": 0.5}),
    ("clamp", lambda s, d: (), {"max": 0}),
    *[(name, lambda s, d: (), {}) for name in ("neg", "abs", "sqrt", "exp", "log", "reciprocal", "tanh", "sin",
                                                 "cos", "relu")],
]


# the functional add/sub (the oracle) warn on inf - inf and overflows of the special values; the result is checked
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("name", "make_args", "kwargs"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_direct_kernel_gives_the_functional_bits(name, make_args, kwargs, dtype):
    shape = (4, 5)
    start = _values(shape, dtype)
    args = make_args(shape, dtype)
    expected = getattr(ember, name)(ember.tensor(start), *args, **kwargs).numpy()
    x = ember.tensor(start.copy())
    data = x._data
    version = x._version
    out = getattr(x, name + "_")(*args, **kwargs)
    assert out is x
    assert x._data is data  # written in place, not replaced
    assert x._version == version + 1
    np.testing.assert_array_equal(x.numpy(), expected)  # NaN == NaN here; same bits otherwise
    assert np.array_equal(np.signbit(x.numpy()), np.signbit(expected))


def test_every_direct_kernel_is_exercised():
    assert {c[0] for c in CASES} == set(_INTO)


def test_write_through_a_strided_view_reaches_the_base():
    base = ember.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    view = base[:, ::2].t()  # non-contiguous, transposed
    old = view.numpy().copy()
    other = ember.tensor(RNG.standard_normal(view.shape).astype(np.float32))
    view.addcmul_(other, other, value=0.5)
    expected_view = old + np.float32(0.5) * other.numpy() * other.numpy()
    np.testing.assert_array_equal(view.numpy(), expected_view)
    np.testing.assert_array_equal(base.numpy()[:, ::2], expected_view.T)
    np.testing.assert_array_equal(base.numpy()[:, 1::2], np.arange(24, dtype=np.float32).reshape(4, 6)[:, 1::2])


def test_overlapping_operand_reads_the_old_values():
    # self and other share memory, shifted by one element: the result must use the values before the write
    base = ember.tensor(np.arange(10, dtype=np.float64))
    old = base.numpy().copy()
    base[1:].add_(base[:-1], alpha=2.0)
    np.testing.assert_array_equal(base.numpy()[1:], old[1:] + 2.0 * old[:-1])
    x = ember.tensor(np.arange(1.0, 7.0))
    x.lerp_(x, 0.3)  # end is self
    np.testing.assert_array_equal(x.numpy(), np.arange(1.0, 7.0))
    y = ember.tensor(np.arange(1.0, 7.0))
    y.addcdiv_(y, y, value=2.0)
    np.testing.assert_array_equal(y.numpy(), np.arange(1.0, 7.0) + 2.0)


def test_broadcast_operand_and_zero_dim_self():
    x = ember.tensor(np.ones((3, 4), np.float32))
    row = ember.tensor(np.arange(4, dtype=np.float32))
    x.mul_(row)
    np.testing.assert_array_equal(x.numpy(), np.tile(np.arange(4, dtype=np.float32), (3, 1)))
    step = ember.tensor(3.0)
    step.add_(1)
    assert step.item() == 4.0 and step._version == 1


def test_other_dtypes_and_the_promotion_error_keep_the_copy_path():
    ints = ember.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ints.add_(1.5)
    ints.add_(ember.tensor([1, 1, 1]), alpha=2)
    assert ints.tolist() == [3, 4, 5]
    half = ember.tensor([1.0, 2.0], dtype=ember.float16)
    half.mul_(ember.tensor([0.5, 0.25], dtype=ember.float16))
    assert half.tolist() == [0.5, 0.5]
    mixed = ember.tensor([1.0, 2.0], dtype=ember.float32)
    mixed.add_(ember.tensor([0.5, 0.25], dtype=ember.float64))  # other dtype: the functional kernel and a cast
    assert mixed.dtype is ember.float32 and mixed.tolist() == [1.5, 2.25]
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ember.ones(3).add_(ember.ones(2, 3))


def test_tensor_weight_lerp_and_rounding_div_fall_back_with_the_same_values():
    start = _values((6,), np.float32)
    end = _values((6,), np.float32)
    weight = np.abs(_values((6,), np.float32)) % 1
    x = ember.tensor(start.copy())
    x.lerp_(ember.tensor(end), ember.tensor(weight))
    expected = ember.lerp(ember.tensor(start), ember.tensor(end), ember.tensor(weight)).numpy()
    np.testing.assert_array_equal(x.numpy(), expected)
    y = ember.tensor(np.array([7.0, -7.0], np.float32))
    y.div_(2, rounding_mode="floor")
    assert y.tolist() == [3.0, -4.0]
