"""Creation functions, conversions and the Python protocols of Tensor.

Values are checked against numpy, or against values derived once from PyTorch
and hardcoded here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember


@pytest.fixture
def restore_default_dtype():
    previous = ember.get_default_dtype()
    yield
    ember.set_default_dtype(previous)


def assert_tensor(t, expected, dtype):
    """``t`` has ``dtype`` and the values (and shape) of the array-like ``expected``."""
    assert isinstance(t, ember.Tensor)
    assert t.dtype is dtype, (t.dtype, dtype)
    expected = np.asarray(expected)
    assert tuple(t.shape) == expected.shape
    np.testing.assert_array_equal(t.numpy(), expected)


# -- tensor(): dtype inference ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "dtype"),
    [
        ([1, 2, 3], ember.int64),
        ([1.0, 2], ember.float32),
        ([True, False], ember.bool),
        ([True, 2], ember.int64),
        ([1, 2.5], ember.float32),
        ([1j, 2], ember.complex64),
        ([1.5, 1j], ember.complex64),
        (3, ember.int64),
        (3.5, ember.float32),
        (True, ember.bool),
        (2 + 1j, ember.complex64),
        ([], ember.float32),
        ([[], []], ember.float32),
        ((1, 2), ember.int64),
        ([[1, 2], (3, 4)], ember.int64),
        # numpy scalars keep their dtype, and promote with the rest
        (np.int16(2), ember.int16),
        (np.float64(2.5), ember.float64),
        (np.float32(1.5), ember.float32),
        (np.bool_(True), ember.bool),
        (np.complex128(1j), ember.complex128),
        ([np.int32(1)], ember.int32),
        ([np.float64(1.5)], ember.float64),
        ([1, np.float64(2.5)], ember.float64),
        ([np.int32(1), 2], ember.int64),
        ([np.float16(1), 2.5], ember.float32),
        ([np.float64(1.5), 1j], ember.complex128),
        ([[1], [np.float32(2)]], ember.float32),
        # numpy arrays keep theirs
        (np.array([1, 2], dtype=np.int32), ember.int32),
        (np.array([1, 2], dtype=np.uint8), ember.uint8),
        (np.array([1.0], dtype=np.float16), ember.float16),
        (np.array([1.0]), ember.float64),
    ],
)
def test_tensor_dtype_inference(data, dtype):
    t = ember.tensor(data)
    assert t.dtype is dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data, dtype=dtype.numpy_dtype))


def test_tensor_from_tensors_keeps_their_dtype():
    t = ember.tensor([ember.tensor(1, dtype=ember.int32), ember.tensor(2, dtype=ember.int32)])
    assert_tensor(t, [1, 2], ember.int32)
    assert_tensor(ember.tensor([ember.tensor(1), ember.tensor(2.5)]), [1.0, 2.5], ember.float32)
    src = ember.tensor([1, 2], dtype=ember.int16)
    copy = ember.tensor(src)
    assert_tensor(copy, [1, 2], ember.int16)
    copy[0] = 9
    assert src[0].item() == 1  # tensor() always copies


def test_tensor_copies_numpy_data():
    a = np.arange(3)
    t = ember.tensor(a)
    a[0] = 100
    assert t.tolist() == [0, 1, 2]
    assert not np.shares_memory(t.numpy(), a)


def test_tensor_with_dtype_converts():
    assert_tensor(ember.tensor([1.7, -1.7, 2.5], dtype=ember.int64), [1, -1, 2], ember.int64)  # truncation
    assert_tensor(ember.tensor([1, 2], dtype=ember.float64), [1.0, 2.0], ember.float64)
    assert_tensor(ember.tensor([0.0, 0.5], dtype=ember.bool), [False, True], ember.bool)
    assert_tensor(ember.tensor(np.array([300]), dtype=ember.uint8), [44], ember.uint8)  # wraps like a C cast
    assert_tensor(ember.tensor(1 + 2j, dtype=ember.complex128), 1 + 2j, ember.complex128)


@pytest.mark.parametrize(
    ("data", "exc"),
    [
        ([[1, 2], [3]], ValueError),  # ragged
        ([2**63], ValueError),  # overflows int64
        ([2**64], ValueError),
        ([None], TypeError),
        (object(), TypeError),
    ],
)
def test_tensor_rejects_bad_data(data, exc):
    with pytest.raises(exc):
        ember.tensor(data)


def test_tensor_rejects_non_dtype():
    with pytest.raises(TypeError):
        ember.tensor([1], dtype="float32")


def test_tensor_uses_default_dtype(restore_default_dtype):
    ember.set_default_dtype(ember.float64)
    assert ember.tensor([1.5, 2]).dtype is ember.float64
    assert ember.tensor([1j]).dtype is ember.complex128
    assert ember.tensor([]).dtype is ember.float64
    assert ember.tensor([np.float32(1.0)]).dtype is ember.float32


# -- from_numpy -------------------------------------------------------------------------------


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(6.0).reshape(2, 3)
    t = ember.from_numpy(a)
    assert t.dtype is ember.float64
    assert t.shape == (2, 3)
    assert t.stride() == (3, 1) and t.storage_offset() == 0
    assert t.data_ptr() == a.__array_interface__["data"][0]
    a[0, 1] = 100.0
    assert t[0, 1].item() == 100.0
    t[1, 2] = -5.0
    assert a[1, 2] == -5.0
    t.add_(1)
    np.testing.assert_array_equal(a, np.array([[1.0, 101.0, 3.0], [4.0, 5.0, -4.0]]))
    assert np.shares_memory(t.numpy(), a)


def test_from_numpy_keeps_strides_of_views():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = ember.from_numpy(a[:, ::2])
    assert t.stride() == (4, 2)
    np.testing.assert_array_equal(t.numpy(), a[:, ::2])
    tt = ember.from_numpy(a.T)
    assert tt.stride() == (1, 4)
    assert not tt.is_contiguous()
    tt[0, 2] = 99
    assert a[2, 0] == 99


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32,
                                   np.float64, np.complex64, np.complex128])
def test_from_numpy_dtypes(dtype):
    a = np.zeros(3, dtype=dtype)
    t = ember.from_numpy(a)
    assert t.dtype.numpy_dtype == np.dtype(dtype)


def test_from_numpy_zero_dim():
    t = ember.from_numpy(np.array(3.5))
    assert t.shape == () and t.item() == 3.5


def test_from_numpy_rejects_negative_strides():
    a = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match="negative"):
        ember.from_numpy(a[:, ::-1])
    with pytest.raises(ValueError, match="negative"):
        ember.from_numpy(a[::-1])


@pytest.mark.parametrize(
    "array",
    [np.zeros(2, np.uint16), np.zeros(2, np.uint32), np.zeros(2, np.uint64), np.array(["a"]), np.array([None]),
     np.zeros(2, "datetime64[s]")],
    ids=["uint16", "uint32", "uint64", "str", "object", "datetime"],
)
def test_from_numpy_rejects_unsupported_dtypes(array):
    with pytest.raises(TypeError):
        ember.from_numpy(array)


def test_from_numpy_rejects_non_native_byte_order_and_non_arrays():
    with pytest.raises(ValueError):
        ember.from_numpy(np.zeros(2, ">f4"))
    with pytest.raises(TypeError):
        ember.from_numpy([1, 2])


# -- as_tensor / asarray --------------------------------------------------------------------------


def test_as_tensor_shares_numpy_memory_when_dtype_matches():
    a = np.arange(3.0)
    t = ember.as_tensor(a)
    a[0] = 7.0
    assert t[0].item() == 7.0
    c = ember.as_tensor(a, dtype=ember.float32)  # conversion: a copy
    a[0] = 8.0
    assert c[0].item() == 7.0
    assert c.dtype is ember.float32


def test_as_tensor_of_tensor():
    x = ember.ones(3)
    assert ember.as_tensor(x) is x
    assert ember.as_tensor(x, dtype=ember.float32) is x
    y = ember.as_tensor(x, dtype=ember.float64)
    assert y is not x and y.dtype is ember.float64
    assert ember.as_tensor([1, 2]).dtype is ember.int64
    assert_tensor(ember.as_tensor([1.5, 2]), [1.5, 2.0], ember.float32)


def test_as_tensor_copies_what_it_cannot_share():
    a = np.arange(6.0).reshape(2, 3)
    for make in (ember.as_tensor, ember.asarray, ember.tensor):
        t = make(a[:, ::-1])  # negative strides: a copy with positive ones
        assert t.stride() == (3, 1)
        np.testing.assert_array_equal(t.numpy(), a[:, ::-1])
        assert not np.shares_memory(t.numpy(), a)
        b = make(np.arange(3, dtype=">f4"))  # another byte order: converted
        assert b.dtype is ember.float32 and b.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError):
        ember.asarray(a[::-1], copy=False)


def test_asarray_copy_semantics():
    x = ember.ones(3)
    assert ember.asarray(x) is x
    y = ember.asarray(x, copy=True)
    assert y is not x and y.data_ptr() != x.data_ptr()
    y[0] = 5
    assert x[0].item() == 1.0
    with pytest.raises(ValueError):
        ember.asarray(x, dtype=ember.float64, copy=False)

    a = np.arange(3.0)
    t = ember.asarray(a)
    a[1] = 9.0
    assert t[1].item() == 9.0
    assert ember.asarray(a, copy=False).data_ptr() == a.__array_interface__["data"][0]
    c = ember.asarray(a, copy=True)
    a[1] = 10.0
    assert c[1].item() == 9.0
    with pytest.raises(ValueError):
        ember.asarray(a, dtype=ember.float32, copy=False)
    with pytest.raises(ValueError):
        ember.asarray([1, 2], copy=False)

    assert ember.asarray([1, 2]).dtype is ember.int64
    assert ember.asarray([1.0, 2]).dtype is ember.float32
    assert ember.asarray(3.5).shape == ()


def test_asarray_requires_grad():
    x = ember.ones(2)
    y = ember.asarray(x, requires_grad=True)
    assert y is x and y.requires_grad


# -- factories --------------------------------------------------------------------------------


@pytest.mark.parametrize("factory, value", [(ember.zeros, 0), (ember.ones, 1)])
def test_zeros_ones(factory, value):
    assert_tensor(factory(2, 3), np.full((2, 3), value, np.float32), ember.float32)
    assert_tensor(factory((2, 3)), np.full((2, 3), value, np.float32), ember.float32)
    assert_tensor(factory([4]), np.full(4, value, np.float32), ember.float32)
    assert_tensor(factory(ember.Size([1, 2])), np.full((1, 2), value, np.float32), ember.float32)
    assert_tensor(factory(2, dtype=ember.int32), np.full(2, value, np.int32), ember.int32)
    assert_tensor(factory(2, dtype=ember.bool), np.full(2, bool(value)), ember.bool)
    assert_tensor(factory(()), np.array(value, np.float32), ember.float32)
    assert_tensor(factory(0, 3), np.zeros((0, 3), np.float32), ember.float32)
    with pytest.raises(RuntimeError):
        factory(-1)
    with pytest.raises(RuntimeError):
        factory(2, -3)
    with pytest.raises(TypeError):
        factory(2.5)
    with pytest.raises(TypeError):
        factory(2, dtype="float32")


def test_empty():
    t = ember.empty(2, 3)
    assert t.shape == (2, 3) and t.dtype is ember.float32 and t.is_contiguous()
    assert ember.empty(4, dtype=ember.int16).dtype is ember.int16
    s = ember.empty_strided((2, 3), (1, 2))
    assert s.shape == (2, 3) and s.stride() == (1, 2)


@pytest.mark.parametrize(
    ("size", "fill", "kwargs", "dtype", "expected"),
    [
        ((2, 2), 7, {}, ember.int64, np.full((2, 2), 7)),
        ((2,), 1.5, {}, ember.float32, [1.5, 1.5]),
        ((2,), True, {}, ember.bool, [True, True]),
        ((2,), 1j, {}, ember.complex64, [1j, 1j]),
        ((2,), 3, {"dtype": ember.float32}, ember.float32, [3.0, 3.0]),
        ((2,), -1, {"dtype": ember.uint8}, ember.uint8, [255, 255]),
        ((2,), 2.7, {"dtype": ember.int32}, ember.int32, [2, 2]),
        ((), 5, {}, ember.int64, 5),
        ([3], ember.tensor(2.5), {}, ember.float32, [2.5, 2.5, 2.5]),
    ],
)
def test_full(size, fill, kwargs, dtype, expected):
    assert_tensor(ember.full(size, fill, **kwargs), expected, dtype)


def test_eye():
    assert_tensor(ember.eye(3), np.eye(3, dtype=np.float32), ember.float32)
    assert_tensor(ember.eye(2, 3), np.eye(2, 3, dtype=np.float32), ember.float32)
    assert_tensor(ember.eye(3, 2), np.eye(3, 2, dtype=np.float32), ember.float32)
    assert_tensor(ember.eye(2, dtype=ember.int64), np.eye(2, dtype=np.int64), ember.int64)
    assert_tensor(ember.eye(0), np.zeros((0, 0), np.float32), ember.float32)
    with pytest.raises(RuntimeError):
        ember.eye(-1)
    with pytest.raises(RuntimeError):
        ember.eye(2, -1)


# Expected values and dtypes derived from torch.arange.
@pytest.mark.parametrize(
    ("args", "kwargs", "dtype", "expected"),
    [
        ((5,), {}, ember.int64, [0, 1, 2, 3, 4]),
        ((1, 4), {}, ember.int64, [1, 2, 3]),
        ((0, 10, 3), {}, ember.int64, [0, 3, 6, 9]),
        ((5, 0, -1), {}, ember.int64, [5, 4, 3, 2, 1]),
        ((5, 0, -2), {}, ember.int64, [5, 3, 1]),
        ((10, 0, -3), {}, ember.int64, [10, 7, 4, 1]),
        ((1, 1), {}, ember.int64, []),
        ((0, 1, 0.25), {}, ember.float32, [0.0, 0.25, 0.5, 0.75]),
        ((0.0, 1.0), {}, ember.float32, [0.0]),
        ((1.5,), {}, ember.float32, [0.0, 1.0]),
        ((-1.5, 1.5, 0.5), {}, ember.float32, [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0]),
        ((1.0, 0.0, -0.25), {}, ember.float32, [1.0, 0.75, 0.5, 0.25]),
        ((3,), {"dtype": ember.float32}, ember.float32, [0.0, 1.0, 2.0]),
        ((0, 5), {"dtype": ember.uint8}, ember.uint8, [0, 1, 2, 3, 4]),
        ((0.5, 3), {"dtype": ember.int64}, ember.int64, [0, 1, 2]),
        ((3,), {"dtype": ember.float64}, ember.float64, [0.0, 1.0, 2.0]),
        ((2**53, 2**53 + 3), {}, ember.int64, [2**53, 2**53 + 1, 2**53 + 2]),
    ],
)
def test_arange(args, kwargs, dtype, expected):
    assert_tensor(ember.arange(*args, **kwargs), np.array(expected, dtype=dtype.numpy_dtype), dtype)


def test_arange_lengths_match_numpy():
    for start, end, step in [(0, 1, 0.1), (0, 1, 0.3), (-3.2, 4.1, 0.7), (2, -2, -0.4), (0, 100, 7)]:
        t = ember.arange(start, end, step, dtype=ember.float64)
        np.testing.assert_allclose(t.numpy(), np.arange(start, end, step), rtol=0, atol=1e-12)


def test_arange_of_zero_dim_tensors():
    assert_tensor(ember.arange(ember.tensor(3)), [0, 1, 2], ember.int64)


@pytest.mark.parametrize(
    "args", [(0, 1, 0), (0, 5, -1), (5, 0, 1), (0, float("inf")), (float("nan"), 1.0)], ids=str
)
def test_arange_errors(args):
    with pytest.raises(RuntimeError):
        ember.arange(*args)


@pytest.mark.parametrize(
    ("args", "kwargs", "dtype", "expected"),
    [
        ((0, 1, 5), {}, ember.float32, [0.0, 0.25, 0.5, 0.75, 1.0]),
        ((1, 0, 3), {}, ember.float32, [1.0, 0.5, 0.0]),
        ((-1, 1, 0), {}, ember.float32, []),
        ((3, 5, 1), {}, ember.float32, [3.0]),
        ((0, 10, 3), {"dtype": ember.int64}, ember.int64, [0, 5, 10]),
        # torch: the bounds become integers first, then the points are truncated
        ((0, 5, 4), {"dtype": ember.int32}, ember.int32, [0, 1, 3, 5]),
        ((0, -5, 4), {"dtype": ember.int32}, ember.int32, [0, -1, -3, -5]),
        ((-96.69, 62.65, 5), {"dtype": ember.int64}, ember.int64, [-96, -56, -17, 22, 62]),
        ((0j, 1 + 1j, 3), {}, ember.complex64, [0j, 0.5 + 0.5j, 1 + 1j]),
        ((ember.tensor(0.0), ember.tensor(2.0), 3), {}, ember.float32, [0.0, 1.0, 2.0]),
    ],
)
def test_linspace(args, kwargs, dtype, expected):
    assert_tensor(ember.linspace(*args, **kwargs), np.array(expected, dtype=dtype.numpy_dtype), dtype)


@pytest.mark.parametrize(("start", "end", "steps"), [(-3.0, 7.5, 11), (10.0, -10.0, 7), (0.1, 0.2, 33), (-96.69, 62.65, 18)])
def test_linspace_matches_numpy(start, end, steps):
    t = ember.linspace(start, end, steps, dtype=ember.float64)
    np.testing.assert_allclose(t.numpy(), np.linspace(start, end, steps), rtol=1e-14, atol=1e-13)
    assert t[0].item() == start and t[-1].item() == end  # both ends exact


def test_linspace_errors():
    with pytest.raises(RuntimeError):
        ember.linspace(0, 1, -1)


def test_logspace():
    assert_tensor(ember.logspace(0, 2, 3), np.array([1.0, 10.0, 100.0], np.float32), ember.float32)
    assert_tensor(ember.logspace(0, 3, 4, base=2), np.array([1.0, 2.0, 4.0, 8.0], np.float32), ember.float32)
    assert_tensor(ember.logspace(0, 2, 3, dtype=ember.int64), [1, 10, 100], ember.int64)
    assert_tensor(ember.logspace(0, 2, 0), np.zeros(0, np.float32), ember.float32)
    t = ember.logspace(-1.5, 2.25, 9, base=3.0, dtype=ember.float64)
    np.testing.assert_allclose(t.numpy(), np.logspace(-1.5, 2.25, 9, base=3.0), rtol=1e-13)


def test_complex_and_polar():
    re, im = ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0])
    assert_tensor(ember.complex(re, im), np.array([1 + 3j, 2 + 4j], np.complex64), ember.complex64)
    re64, im64 = re.double(), im.double()
    assert_tensor(ember.complex(re64, im64), np.array([1 + 3j, 2 + 4j]), ember.complex128)
    assert_tensor(
        ember.complex(ember.tensor([1.0]), ember.tensor([[1.0], [2.0]])), np.array([[1 + 1j], [1 + 2j]], np.complex64),
        ember.complex64,
    )
    with pytest.raises(RuntimeError):
        ember.complex(ember.tensor([1, 2]), ember.tensor([3, 4]))
    with pytest.raises(RuntimeError):
        ember.complex(re, im64)

    r, theta = np.array([1.0, 2.0, 0.5]), np.array([0.0, np.pi / 2, -2.0])
    p = ember.polar(ember.tensor(r, dtype=ember.float64), ember.tensor(theta, dtype=ember.float64))
    assert p.dtype is ember.complex128
    np.testing.assert_allclose(p.numpy(), r * np.exp(1j * theta), rtol=1e-15, atol=1e-15)
    p32 = ember.polar(ember.tensor(r, dtype=ember.float32), ember.tensor(theta, dtype=ember.float32))
    assert p32.dtype is ember.complex64
    np.testing.assert_allclose(p32.numpy(), r * np.exp(1j * theta), rtol=1e-6, atol=1e-6)


# -- *_like and new_* ---------------------------------------------------------------------------


def test_like_factories():
    x = ember.ones(2, 3, dtype=ember.int32)
    assert_tensor(ember.zeros_like(x), np.zeros((2, 3), np.int32), ember.int32)
    assert_tensor(ember.ones_like(x), np.ones((2, 3), np.int32), ember.int32)
    assert_tensor(ember.ones_like(x, dtype=ember.float64), np.ones((2, 3)), ember.float64)
    assert_tensor(ember.full_like(x, 2.7), np.full((2, 3), 2, np.int32), ember.int32)
    assert_tensor(ember.full_like(x, 5, dtype=ember.float32), np.full((2, 3), 5, np.float32), ember.float32)
    e = ember.empty_like(x)
    assert e.shape == (2, 3) and e.dtype is ember.int32
    t = ember.zeros_like(ember.ones(3).t())  # zero-dim-safe on 1-d
    assert t.shape == (3,)
    z = ember.zeros_like(ember.ones(2, requires_grad=True))
    assert not z.requires_grad
    assert ember.zeros_like(ember.ones(2), requires_grad=True).requires_grad


_DEVICES = ["cpu", "meta"]
_DETERMINISTIC_LIKE = [
    ("empty_like", (), None),
    ("zeros_like", (), 0.0),
    ("ones_like", (), 1.0),
    ("full_like", (2.5,), 2.5),
]


@pytest.mark.parametrize("name, extra, fill", _DETERMINISTIC_LIKE)
@pytest.mark.parametrize("target", [None, *_DEVICES])
@pytest.mark.parametrize("source", _DEVICES)
def test_like_factories_honour_device_and_dtype(source, target, name, extra, fill):
    # device= wins over the input's device, dtype= over its dtype (PyTorch's rule); None keeps the input's
    x = ember.ones(2, 3, device=source)
    out = getattr(ember, name)(x, *extra, device=target, dtype=ember.float64)
    assert out.device == ember.device(target or source)
    assert out.shape == (2, 3) and out.dtype is ember.float64
    if out.device.type == "cpu" and fill is not None:
        np.testing.assert_array_equal(out.numpy(), np.full((2, 3), fill, np.float64))
    kept = getattr(ember, name)(x, *extra, device=target)
    assert kept.device == out.device and kept.dtype is ember.float32


@pytest.mark.parametrize("name, extra", [("rand_like", ()), ("randn_like", ()), ("randint_like", (7,))])
@pytest.mark.parametrize("target", [None, *_DEVICES])
@pytest.mark.parametrize("source", _DEVICES)
def test_random_like_factories_honour_device(source, target, name, extra):
    x = ember.ones(4, 5, device=source)
    ember.manual_seed(3)
    out = getattr(ember, name)(x, *extra, device=target, dtype=ember.float64)
    assert out.device == ember.device(target or source)
    assert out.shape == (4, 5) and out.dtype is ember.float64
    if out.device.type == "cpu":
        # the same draws as the plain factory on the same seed
        factory = {"rand_like": ember.rand, "randn_like": ember.randn}.get(name)
        ember.manual_seed(3)
        if factory is None:
            expected = ember.randint(7, (4, 5), dtype=ember.float64)
        else:
            expected = factory(4, 5, dtype=ember.float64)
        np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_like_factory_to_cpu_keeps_requires_grad_argument():
    x = ember.ones(2, device="meta", requires_grad=True)
    out = ember.zeros_like(x, device="cpu", requires_grad=True)
    assert out.device.type == "cpu" and out.requires_grad and out.is_leaf
    assert out.tolist() == [0.0, 0.0]
    assert not ember.zeros_like(x, device="cpu").requires_grad


@pytest.mark.parity
@pytest.mark.parametrize("name", ["empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"])
@pytest.mark.parametrize("target", [None, *_DEVICES])
@pytest.mark.parametrize("source", _DEVICES)
def test_like_factories_device_parity_with_torch(source, target, name):
    torch = pytest.importorskip("torch", reason="torch is the oracle of this parity test")
    extra = (1.5,) if name == "full_like" else ()
    expected = getattr(torch, name)(torch.ones(2, 3, device=source), *extra, device=target, dtype=torch.float64)
    got = getattr(ember, name)(ember.ones(2, 3, device=source), *extra, device=target, dtype=ember.float64)
    assert got.device.type == expected.device.type
    assert tuple(got.shape) == tuple(expected.shape) and str(got.dtype) == str(expected.dtype).replace("torch", "ember")
    if name in ("zeros_like", "ones_like", "full_like") and got.device.type == "cpu":
        np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_new_methods():
    x = ember.ones(2, dtype=ember.int32)
    assert_tensor(x.new_zeros(3), [0, 0, 0], ember.int32)
    assert_tensor(x.new_zeros((2, 2)), np.zeros((2, 2), np.int32), ember.int32)
    assert_tensor(x.new_ones(2, 2), np.ones((2, 2), np.int32), ember.int32)
    assert_tensor(x.new_zeros(2, dtype=ember.float32), [0.0, 0.0], ember.float32)
    assert x.new_empty(4).shape == (4,) and x.new_empty(4).dtype is ember.int32
    d = ember.ones(2, dtype=ember.float64)
    assert_tensor(d.new_full((2,), 3), [3.0, 3.0], ember.float64)
    assert_tensor(d.new_tensor([1, 2]), [1.0, 2.0], ember.float64)
    assert_tensor(d.new_tensor([1, 2], dtype=ember.int16), [1, 2], ember.int16)
    assert d.new_ones(1, requires_grad=True).requires_grad


# -- conversions --------------------------------------------------------------------------------


# Expected values derived from torch.Tensor.to.
@pytest.mark.parametrize(
    ("data", "src", "dst", "expected"),
    [
        ([1.7, -1.7, 2.5, -0.5], ember.float32, ember.int64, [1, -1, 2, 0]),
        ([1.7, -1.7, 2.5], ember.float64, ember.int8, [1, -1, 2]),
        ([3.99, -3.99], ember.float16, ember.int32, [3, -3]),
        ([2.5], ember.bfloat16, ember.int32, [2]),
        ([1 + 2j, -2.5 - 1j], ember.complex64, ember.float32, [1.0, -2.5]),
        ([1j, 2.7 - 1j], ember.complex128, ember.int64, [0, 2]),
        ([1j, 0j, 2 + 0j], ember.complex64, ember.bool, [True, False, True]),
        ([0.0, 1.5, -0.0, float("nan")], ember.float32, ember.bool, [False, True, False, True]),
        ([300, -1, 255], ember.int64, ember.uint8, [44, 255, 255]),
        ([200], ember.int64, ember.int8, [-56]),
        ([True, False], ember.bool, ember.float32, [1.0, 0.0]),
        ([1.5, 0.0], ember.float32, ember.complex64, [1.5 + 0j, 0j]),
        ([70000.0], ember.float32, ember.float16, [float("inf")]),
        ([1, 2], ember.int64, ember.float64, [1.0, 2.0]),
    ],
)
def test_to_dtype(data, src, dst, expected):
    x = ember.tensor(data, dtype=src)
    y = x.to(dst)
    assert_tensor(y, np.array(expected, dtype=dst.numpy_dtype), dst)
    assert y.data_ptr() != x.data_ptr()


def test_to_forms():
    x = ember.tensor([1.5, 2.5])
    assert x.to(ember.float32) is x
    assert x.to("cpu") is x
    assert x.to(x) is x
    c = x.to(ember.float32, copy=True)
    assert c is not x and c.data_ptr() != x.data_ptr()
    assert_tensor(x.to("cpu", ember.float64), [1.5, 2.5], ember.float64)
    assert_tensor(x.to(dtype=ember.float16), np.array([1.5, 2.5], np.float16), ember.float16)
    assert_tensor(x.to(device="cpu", dtype=ember.int32), [1, 2], ember.int32)
    assert_tensor(x.to(ember.tensor([1], dtype=ember.int32)), [1, 2], ember.int32)
    assert_tensor(x.double(), [1.5, 2.5], ember.float64)
    assert_tensor(x.int(), [1, 2], ember.int32)
    assert_tensor(x.long(), [1, 2], ember.int64)
    assert_tensor(x.short(), [1, 2], ember.int16)
    assert_tensor(x.char(), [1, 2], ember.int8)
    assert_tensor(x.byte(), [1, 2], ember.uint8)
    assert_tensor(x.bool(), [True, True], ember.bool)
    assert_tensor(x.half(), np.array([1.5, 2.5], np.float16), ember.float16)
    assert x.bfloat16().dtype is ember.bfloat16 and x.bfloat16().tolist() == [1.5, 2.5]
    assert_tensor(x.cfloat(), np.array([1.5, 2.5], np.complex64), ember.complex64)
    assert x.float() is x
    assert_tensor(x.type(ember.int64), [1, 2], ember.int64)
    assert x.type() == "ember.FloatTensor"
    assert_tensor(x.type_as(ember.tensor([1])), [1, 2], ember.int64)
    with pytest.raises(TypeError):
        x.to(1.5)


# -- Python protocols -------------------------------------------------------------------------


def test_item():
    assert ember.tensor([2.5]).item() == 2.5
    assert type(ember.tensor([2.5]).item()) is float
    assert type(ember.tensor([2]).item()) is int
    assert ember.tensor(True).item() is True
    assert ember.tensor([1j]).item() == 1j
    assert type(ember.tensor(1.5, dtype=ember.bfloat16).item()) is float
    assert ember.tensor([[[7]]]).item() == 7
    with pytest.raises(RuntimeError, match="2 elements"):
        ember.tensor([1, 2]).item()
    with pytest.raises(RuntimeError, match="0 elements"):
        ember.tensor([]).item()


def test_tolist():
    assert ember.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert ember.tensor(3).tolist() == 3
    assert ember.tensor([True]).tolist() == [True]
    assert ember.tensor([]).tolist() == []
    values = ember.arange(6).view(2, 3).t().tolist()
    assert values == [[0, 3], [1, 4], [2, 5]]
    assert all(type(v) is int for row in values for v in row)


def test_numpy_shares_memory():
    x = ember.arange(4.0)
    a = x.numpy()
    assert np.shares_memory(a, x.numpy())
    a[0] = 10.0
    assert x[0].item() == 10.0
    v = x[1:3]
    assert np.shares_memory(v.numpy(), a)
    with pytest.raises(RuntimeError):
        ember.ones(2, requires_grad=True).numpy()
    np.testing.assert_array_equal(ember.ones(2, requires_grad=True).numpy(force=True), [1.0, 1.0])
    np.testing.assert_array_equal(ember.ones(2, requires_grad=True).detach().numpy(), [1.0, 1.0])


def test_array_protocol():
    x = ember.arange(3)
    a = np.asarray(x)
    assert a.dtype == np.int64 and a.tolist() == [0, 1, 2]
    assert np.shares_memory(a, x.numpy())
    b = np.asarray(ember.arange(3.0), dtype=np.int32)
    assert b.dtype == np.int32
    np.testing.assert_array_equal(np.array(x, copy=True), [0, 1, 2])
    assert not np.shares_memory(np.array(x, copy=True), x.numpy())
    assert np.add(ember.tensor([1, 2]), 1).tolist() == [2, 3]


def test_len_and_iter():
    assert len(ember.zeros(3, 2)) == 3
    with pytest.raises(TypeError):
        len(ember.tensor(1))
    rows = list(ember.tensor([[1, 2], [3, 4]]))
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4]]
    with pytest.raises(TypeError):
        iter(ember.tensor(1))
    # iteration yields views
    x = ember.zeros(2, 2)
    for row in x:
        row[0] = 7.0
    assert x.tolist() == [[7.0, 0.0], [7.0, 0.0]]


def test_bool():
    assert bool(ember.tensor([1])) is True
    assert bool(ember.tensor([0])) is False
    assert bool(ember.tensor(2.5)) is True
    assert bool(ember.tensor([[0.0]])) is False
    with pytest.raises(RuntimeError, match="more than one"):
        bool(ember.tensor([1, 2]))
    with pytest.raises(RuntimeError):
        bool(ember.tensor([]))
    assert (1 if ember.tensor(3) else 0) == 1


def test_scalar_conversions():
    assert int(ember.tensor(2.7)) == 2
    assert float(ember.tensor(2)) == 2.0
    assert complex(ember.tensor(1.0)) == 1 + 0j


def test_format():
    assert format(ember.tensor(2.5), ".2f") == "2.50"
    assert format(ember.tensor(3), "d") == "3"
    assert f"{ember.tensor(1.5)}" == "1.5"
    assert f"{ember.tensor(2):>5}" == "    2"
    assert f"{ember.tensor(7, dtype=ember.int8):03d}" == "007"


def test_index():
    assert [10, 20, 30][ember.tensor(1)] == 20
    assert [10, 20, 30][ember.tensor([1])] == 20
    assert range(10)[ember.tensor(3, dtype=ember.int8)] == 3
    assert "abc"[ember.tensor(2, dtype=ember.int32)] == "c"
    assert [1, 2, 3][ember.tensor(0) : ember.tensor(2)] == [1, 2]
    with pytest.raises(TypeError):
        [10, 20][ember.tensor(1.0)]
    with pytest.raises(TypeError):
        [10, 20][ember.tensor([1, 0])]


def test_dlpack_round_trip_through_numpy():
    t = ember.arange(6).view(2, 3)
    n = np.from_dlpack(t)
    assert n.shape == (2, 3) and n.dtype == np.int64
    n[0, 0] = 100
    assert t[0, 0].item() == 100  # shares memory
    t[1, 2] = -1
    assert n[1, 2] == -1

    view = ember.arange(6.0).view(2, 3)[:, 1:]
    nv = np.from_dlpack(view)
    assert nv.tolist() == [[1.0, 2.0], [4.0, 5.0]]
    assert nv.strides == (12, 4)  # float32, bytes

    c = np.arange(4.0)
    e = ember.from_dlpack(c)
    assert e.dtype is ember.float64
    c[0] = 5.0
    assert e[0].item() == 5.0
    e[1] = 6.0
    assert c[1] == 6.0

    back = ember.from_dlpack(np.from_dlpack(t))
    assert back.data_ptr() == t.data_ptr()
    assert back.tolist() == t.tolist()

    x = ember.ones(2)
    assert ember.from_dlpack(x) is x
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(TypeError):
        ember.from_dlpack([1, 2])


def test_dlpack_refuses_tensors_that_require_grad():
    with pytest.raises(BufferError, match="require gradient"):
        np.from_dlpack(ember.ones(2, requires_grad=True))


# -- requires_grad rules ------------------------------------------------------------------------


def test_requires_grad_rules():
    assert ember.zeros(2, requires_grad=True).requires_grad
    assert ember.tensor([1.0, 2], requires_grad=True).requires_grad
    assert ember.zeros(2, dtype=ember.complex64).requires_grad_().requires_grad
    assert ember.zeros(2, dtype=ember.float16).requires_grad_().requires_grad
    for dtype in (ember.int64, ember.int32, ember.uint8, ember.bool):
        with pytest.raises(RuntimeError, match="floating point"):
            ember.zeros(2, dtype=dtype).requires_grad_()
        with pytest.raises(RuntimeError):
            ember.zeros(2, dtype=dtype, requires_grad=True)
        t = ember.zeros(2, dtype=dtype)
        with pytest.raises(RuntimeError):
            t.requires_grad = True
        assert not t.requires_grad
    with pytest.raises(RuntimeError):
        ember.tensor([1, 2], requires_grad=True)
    x = ember.ones(2, requires_grad=True)
    assert x.is_leaf and x.grad is None and x.grad_fn is None
    assert not x.detach().requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad
    assert ember.ones(2).requires_grad is False


def test_hash_is_identity():
    a, b = ember.ones(1), ember.ones(1)
    assert hash(a) == object.__hash__(a)
    assert len({a, b}) == 2
    assert {a: 1}[a] == 1
    assert b not in {a: 1}
    assert hash(a[0]) != hash(a[0]) or a[0] is a[0]  # views are new objects


def test_tensor_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        ember.Tensor([1, 2])


def test_metadata_of_a_new_tensor():
    t = ember.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3
    assert t.numel() == 24 and ember.numel(t) == 24
    assert t.stride() == (12, 4, 1) and t.stride(0) == 12 and t.stride(-1) == 1
    assert t.storage_offset() == 0
    assert t.is_contiguous()
    assert t.device == ember.device("cpu") and t.device.type == "cpu"
    assert t.element_size() == 4
    assert repr(t.shape) == "ember.Size([2, 3, 4])"
    with pytest.raises(IndexError):
        t.size(3)
    with pytest.raises(IndexError):
        t.stride(-4)
    assert math.prod(t.shape) == t.numel()
