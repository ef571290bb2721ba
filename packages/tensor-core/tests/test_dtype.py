"""dtypes and PyTorch's type-promotion rules.

Expected values were derived once from PyTorch (``torch.promote_types``,
``torch.result_type``, ``torch.finfo``) and are hardcoded here: these tests
do not need torch.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import ember

NAMES = [
    "bool", "uint8", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
]
DTYPES = [getattr(ember, n) for n in NAMES]

# Short names for the promotion table below.
_S = {
    "b": "bool", "u8": "uint8", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128",
}

# PROMOTION[i][j] == promote_types(DTYPES[i], DTYPES[j]), derived from torch.promote_types.
#            b      u8     i8     i16    i32    i64    f16    bf16   f32    f64    c64    c128
PROMOTION = [
    ["b",    "u8",  "i8",  "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "c64", "c128"],  # bool
    ["u8",   "u8",  "i16", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "c64", "c128"],  # uint8
    ["i8",   "i16", "i8",  "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "c64", "c128"],  # int8
    ["i16",  "i16", "i16", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "c64", "c128"],  # int16
    ["i32",  "i32", "i32", "i32", "i32", "i64", "f16", "bf16", "f32", "f64", "c64", "c128"],  # int32
    ["i64",  "i64", "i64", "i64", "i64", "i64", "f16", "bf16", "f32", "f64", "c64", "c128"],  # int64
    ["f16",  "f16", "f16", "f16", "f16", "f16", "f16", "f32",  "f32", "f64", "c64", "c128"],  # float16
    ["bf16", "bf16", "bf16", "bf16", "bf16", "bf16", "f32", "bf16", "f32", "f64", "c64", "c128"],  # bfloat16
    ["f32",  "f32", "f32", "f32", "f32", "f32", "f32", "f32",  "f32", "f64", "c64", "c128"],  # float32
    ["f64",  "f64", "f64", "f64", "f64", "f64", "f64", "f64",  "f64", "f64", "c128", "c128"],  # float64
    ["c64",  "c64", "c64", "c64", "c64", "c64", "c64", "c64",  "c64", "c128", "c64", "c128"],  # complex64
    ["c128", "c128", "c128", "c128", "c128", "c128", "c128", "c128", "c128", "c128", "c128", "c128"],  # complex128
]


@pytest.fixture
def restore_default_dtype():
    previous = ember.get_default_dtype()
    yield
    ember.set_default_dtype(previous)


def _t(dtype, dim=True):
    """A tensor of ``dtype`` with one dimension, or zero-dim when ``dim`` is False."""
    return ember.zeros((2,) if dim else (), dtype=dtype)


# -- promote_types -----------------------------------------------------------------------


def test_promotion_table_is_square():
    assert len(PROMOTION) == 12 and all(len(row) == 12 for row in PROMOTION)


@pytest.mark.parametrize("i", range(12), ids=NAMES)
def test_promote_types_table(i):
    a = DTYPES[i]
    got = [ember.promote_types(a, b).name for b in DTYPES]
    assert got == [_S[s] for s in PROMOTION[i]]


def test_promote_types_is_symmetric():
    for a in DTYPES:
        for b in DTYPES:
            assert ember.promote_types(a, b) is ember.promote_types(b, a)


def test_promote_types_doc_example():
    assert ember.promote_types(ember.uint8, ember.int8) is ember.int16
    assert ember.promote_types(ember.float16, ember.bfloat16) is ember.float32
    assert ember.promote_types(ember.complex64, ember.float64) is ember.complex128


# -- result_type -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "scalar", "expected"),
    [
        (ember.int32, 1.5, ember.float32),
        (ember.uint8, 1000, ember.uint8),
        (ember.uint8, -1, ember.uint8),
        (ember.int8, 1, ember.int8),
        (ember.int16, 1.0, ember.float32),
        (ember.float16, 1.5, ember.float16),
        (ember.bfloat16, 2, ember.bfloat16),
        (ember.float16, 1, ember.float16),
        (ember.bool, True, ember.bool),
        (ember.bool, 1, ember.int64),
        (ember.bool, 1.5, ember.float32),
        (ember.bool, 1j, ember.complex64),
        (ember.float64, 1j, ember.complex128),
        (ember.float32, 1j, ember.complex64),
        (ember.bfloat16, 1j, ember.complex64),
        (ember.int64, 1j, ember.complex64),
        (ember.int32, 1j, ember.complex64),
        (ember.complex64, 1.5, ember.complex64),
        (ember.complex128, 1, ember.complex128),
        (ember.int64, True, ember.int64),
        (ember.float64, 1, ember.float64),
    ],
)
def test_result_type_tensor_and_python_scalar(dtype, scalar, expected):
    for dim in (True, False):
        assert ember.result_type(_t(dtype, dim), scalar) is expected
        assert ember.result_type(scalar, _t(dtype, dim)) is expected


@pytest.mark.parametrize(
    ("a", "a_dim", "b", "b_dim", "expected"),
    [
        (ember.int32, True, ember.float64, False, ember.float64),
        (ember.int64, True, ember.float64, False, ember.float64),
        (ember.uint8, True, ember.int64, False, ember.uint8),
        (ember.int8, True, ember.int64, False, ember.int8),
        (ember.float16, True, ember.float64, False, ember.float16),
        (ember.bfloat16, True, ember.float32, False, ember.bfloat16),
        (ember.float32, True, ember.complex128, False, ember.complex64),
        (ember.float64, True, ember.complex64, False, ember.complex128),
        (ember.int32, True, ember.complex128, False, ember.complex128),
        (ember.bool, True, ember.int32, False, ember.int32),
        (ember.bool, True, ember.float64, False, ember.float64),
        # two zero-dim tensors promote like dimensioned ones
        (ember.int32, False, ember.float64, False, ember.float64),
        (ember.uint8, False, ember.int8, False, ember.int16),
        (ember.float16, False, ember.bfloat16, False, ember.float32),
        # two dimensioned tensors: the table
        (ember.uint8, True, ember.int8, True, ember.int16),
        (ember.float16, True, ember.float64, True, ember.float64),
    ],
)
def test_result_type_zero_dim_tensors(a, a_dim, b, b_dim, expected):
    assert ember.result_type(_t(a, a_dim), _t(b, b_dim)) is expected
    assert ember.result_type(_t(b, b_dim), _t(a, a_dim)) is expected


def test_result_type_zero_dim_tensor_and_scalar():
    # a zero-dim tensor outranks a Python scalar of the same category
    assert ember.result_type(_t(ember.int32, False), 5) is ember.int32
    assert ember.result_type(_t(ember.int32, False), 5.0) is ember.float32
    assert ember.result_type(_t(ember.float64, False), 5.0) is ember.float64
    assert ember.result_type(_t(ember.float64, False), 1j) is ember.complex128


def test_result_type_matches_arithmetic():
    x = ember.tensor([1, 2], dtype=ember.int32)
    assert (x + 1.5).dtype is ember.float32
    assert (ember.tensor([1, 2], dtype=ember.uint8) + 1000).dtype is ember.uint8
    assert (x + ember.tensor(2.0, dtype=ember.float64)).dtype is ember.float64
    assert (ember.ones(2, dtype=ember.float16) * ember.tensor(2.0, dtype=ember.float64)).dtype is ember.float16
    assert (ember.ones(2, dtype=ember.float64) * 1j).dtype is ember.complex128
    assert (ember.tensor([True, False]) + True).dtype is ember.bool


def test_uint8_scalar_wraps_like_a_c_cast():
    # 1000 does not promote uint8; it is wrapped (1000 % 256 == 232)
    x = ember.tensor([1, 2], dtype=ember.uint8)
    np.testing.assert_array_equal((x + 1000).numpy(), np.array([233, 234], np.uint8))


# -- default dtype ----------------------------------------------------------------------


def test_default_dtype_is_float32():
    assert ember.get_default_dtype() is ember.float32


def test_set_default_dtype_changes_inference(restore_default_dtype):
    ember.set_default_dtype(ember.float64)
    assert ember.get_default_dtype() is ember.float64
    assert ember.tensor([1.5]).dtype is ember.float64
    assert ember.tensor(1.5).dtype is ember.float64
    assert ember.tensor(1j).dtype is ember.complex128
    assert ember.tensor([1, 2]).dtype is ember.int64  # ints are unaffected
    assert ember.zeros(2).dtype is ember.float64
    assert ember.full((2,), 1.5).dtype is ember.float64
    assert ember.arange(0.0, 1.0).dtype is ember.float64
    assert ember.linspace(0, 1, 3).dtype is ember.float64
    assert ember.result_type(_t(ember.int32), 1.5) is ember.float64
    assert (ember.tensor([1, 2]) / 2).dtype is ember.float64
    # float tensors keep their own dtype
    assert ember.result_type(_t(ember.float32), 1.5) is ember.float32


def test_set_default_dtype_float16(restore_default_dtype):
    ember.set_default_dtype(ember.float16)
    assert ember.tensor([1.5]).dtype is ember.float16
    assert ember.ones(1).dtype is ember.float16


def test_default_dtype_restored_by_fixture():
    # runs after the tests above in file order: the fixture put float32 back
    assert ember.get_default_dtype() is ember.float32
    assert ember.tensor([1.5]).dtype is ember.float32


@pytest.mark.parametrize("bad", [ember.int32, ember.bool, ember.complex64, "float64", None])
def test_set_default_dtype_rejects_non_float(bad, restore_default_dtype):
    with pytest.raises(TypeError):
        ember.set_default_dtype(bad)
    assert ember.get_default_dtype() is ember.float32


# -- can_cast ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "dst", "expected"),
    [
        (ember.float64, ember.int32, False),
        (ember.float32, ember.int64, False),
        (ember.complex64, ember.float64, False),
        (ember.int32, ember.bool, False),
        (ember.uint8, ember.bool, False),
        (ember.float16, ember.bool, False),
        (ember.bool, ember.bool, True),
        (ember.bool, ember.uint8, True),
        (ember.int64, ember.int8, True),  # same category, narrower: allowed
        (ember.int8, ember.uint8, True),
        (ember.int64, ember.float16, True),
        (ember.float64, ember.float16, True),
        (ember.float64, ember.complex64, True),
        (ember.complex128, ember.complex64, True),
        (ember.bool, ember.complex128, True),
    ],
)
def test_can_cast(src, dst, expected):
    assert ember.can_cast(src, dst) is expected


def test_can_cast_full_table():
    # Derived from torch.can_cast: allowed iff the category does not go down.
    order = {"bool": 0, "uint8": 1, "int8": 1, "int16": 1, "int32": 1, "int64": 1,
             "float16": 2, "bfloat16": 2, "float32": 2, "float64": 2, "complex64": 3, "complex128": 3}
    for a in DTYPES:
        for b in DTYPES:
            assert ember.can_cast(a, b) is (order[a.name] <= order[b.name]), (a, b)


# -- finfo / iinfo ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "bits", "eps", "max_", "tiny", "resolution", "name"),
    [
        (ember.float16, 16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001, "float16"),
        (ember.bfloat16, 16, 0.0078125, 3.3895313892515355e38, 1.1754943508222875e-38, 0.01, "bfloat16"),
        (ember.float32, 32, 1.1920928955078125e-07, 3.4028234663852886e38, 1.1754943508222875e-38, 1e-06, "float32"),
        (ember.float64, 64, 2.220446049250313e-16, 1.7976931348623157e308, 2.2250738585072014e-308, 1e-15, "float64"),
        (ember.complex64, 32, 1.1920928955078125e-07, 3.4028234663852886e38, 1.1754943508222875e-38, 1e-06, "float32"),
        (ember.complex128, 64, 2.220446049250313e-16, 1.7976931348623157e308, 2.2250738585072014e-308, 1e-15, "float64"),
    ],
)
def test_finfo(dtype, bits, eps, max_, tiny, resolution, name):
    info = ember.finfo(dtype)
    assert info.bits == bits
    assert info.eps == eps
    assert info.max == max_
    assert info.min == -max_
    assert info.tiny == tiny
    assert info.smallest_normal == tiny
    assert math.isclose(info.resolution, resolution)
    assert info.dtype == name
    assert isinstance(info.eps, float) and isinstance(info.max, float)


def test_finfo_default_is_default_dtype(restore_default_dtype):
    assert ember.finfo().dtype == "float32"
    ember.set_default_dtype(ember.float64)
    assert ember.finfo().bits == 64


@pytest.mark.parametrize("dtype", [ember.int32, ember.bool, ember.uint8])
def test_finfo_rejects_non_float(dtype):
    with pytest.raises(TypeError):
        ember.finfo(dtype)


@pytest.mark.parametrize(
    ("dtype", "bits", "lo", "hi"),
    [
        (ember.uint8, 8, 0, 255),
        (ember.int8, 8, -128, 127),
        (ember.int16, 16, -32768, 32767),
        (ember.int32, 32, -2147483648, 2147483647),
        (ember.int64, 64, -9223372036854775808, 9223372036854775807),
    ],
)
def test_iinfo(dtype, bits, lo, hi):
    info = ember.iinfo(dtype)
    assert (info.bits, info.min, info.max, info.dtype) == (bits, lo, hi, dtype.name)
    assert type(info.min) is int and type(info.max) is int


@pytest.mark.parametrize("dtype", [ember.bool, ember.float32, ember.complex64])
def test_iinfo_rejects_non_integer(dtype):
    with pytest.raises(TypeError):
        ember.iinfo(dtype)


# -- dtype properties --------------------------------------------------------------------


ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2, "bfloat16": 2,
            "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}
FLOATING = {"float16", "bfloat16", "float32", "float64"}
COMPLEX = {"complex64", "complex128"}


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES)
def test_dtype_properties(dtype):
    assert dtype.itemsize == ITEMSIZE[dtype.name]
    assert dtype.is_floating_point is (dtype.name in FLOATING)
    assert dtype.is_complex is (dtype.name in COMPLEX)
    assert dtype.is_signed is (dtype.name not in ("bool", "uint8"))
    assert repr(dtype) == f"ember.{dtype.name}"
    t = ember.zeros(3, dtype=dtype)
    assert t.dtype is dtype
    assert t.element_size() == dtype.itemsize
    assert t.itemsize == dtype.itemsize
    assert t.nbytes == 3 * dtype.itemsize
    assert t.is_floating_point() is (dtype.name in FLOATING)
    assert t.is_complex() is (dtype.name in COMPLEX)
    assert ember.is_floating_point(t) is (dtype.name in FLOATING)
    assert ember.is_complex(t) is (dtype.name in COMPLEX)


def test_dtype_aliases():
    assert ember.half is ember.float16
    assert ember.float is ember.float32
    assert ember.double is ember.float64
    assert ember.short is ember.int16
    assert ember.int is ember.int32
    assert ember.long is ember.int64
    assert ember.cfloat is ember.complex64
    assert ember.cdouble is ember.complex128


def test_bfloat16_is_stored_with_ml_dtypes():
    assert ember.bfloat16.numpy_dtype == np.dtype(ml_dtypes.bfloat16)
    t = ember.tensor([1.0, 2.5, 3.0], dtype=ember.bfloat16)
    assert t.numpy().dtype == np.dtype(ml_dtypes.bfloat16)
    assert t.tolist() == [1.0, 2.5, 3.0]
    # bfloat16 keeps 8 bits of mantissa: 1 + 2**-8 rounds to 1
    assert ember.tensor(1 + 2**-8, dtype=ember.bfloat16).item() == 1.0


def test_dtype_to_real_and_complex():
    assert ember.complex64.to_real() is ember.float32
    assert ember.complex128.to_real() is ember.float64
    assert ember.float32.to_complex() is ember.complex64
    assert ember.float64.to_complex() is ember.complex128
    with pytest.raises(RuntimeError):
        ember.int32.to_complex()


def test_numpy_dtype_name_is_numpys_name():
    import numpy as np

    from ember._dtype import ALL_DTYPES, numpy_dtype_name

    for d in ALL_DTYPES:
        assert numpy_dtype_name(d.numpy_dtype) == d.numpy_dtype.name
    assert numpy_dtype_name(np.dtype(np.uint16)) == "uint16"  # no ember counterpart: numpy's own
