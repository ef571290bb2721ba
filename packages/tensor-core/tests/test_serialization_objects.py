"""ember.save / ember.load of what PyTorch programs checkpoint besides tensors: numpy arrays and
scalars, numbers, strings, bytes, sets, Counters, nested containers; the checks that reject
malformed nodes of those kinds; PyTorch's pickle arguments and safe-globals functions.
(Optimizer and scheduler state dicts: packages/autograd/tests/test_optim_state_serialization.py.)"""

import io
import json
import math
from collections import Counter, OrderedDict

import numpy as np
import pytest

import ember
from ember import serialization
from ember.serialization import SerializationError

BFLOAT16 = np.dtype(ember.bfloat16.numpy_dtype).type  # ml_dtypes.bfloat16, the scalar type


def roundtrip(obj, **load_kwargs):
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    buffer.seek(0)
    return ember.load(buffer, **load_kwargs)


def saved_bytes(obj):
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    return buffer.getvalue()


def edit_structure(data, edit):
    """``data`` re-encoded after ``edit(structure)``, with a fresh header checksum."""
    n = int.from_bytes(data[:8], "little")
    header, payload = json.loads(data[8 : 8 + n]), data[8 + n :]
    structure = json.loads(header["__metadata__"]["ember.structure"])
    edit(structure)
    header["__metadata__"]["ember.structure"] = json.dumps(structure)
    header["__metadata__"]["ember.header_sha256"] = serialization._header_checksum(header)
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + payload


def assert_rejected(data, fragment):
    with pytest.raises(SerializationError, match=fragment):
        ember.load(io.BytesIO(data))


# ---------------------------------------------------------------------------
# numpy arrays

NUMPY_DTYPES = [
    np.bool_,
    np.uint8,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    BFLOAT16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]


def _sample(dtype, shape=(3, 4)):
    rng = np.random.default_rng(0)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def assert_same_array(loaded, original):
    assert type(loaded) is np.ndarray
    assert loaded.dtype == original.dtype and loaded.shape == original.shape
    assert loaded.tobytes() == np.ascontiguousarray(original).tobytes()  # bit-exact, NaN payloads too


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_arrays_roundtrip_exactly(dtype):
    array = _sample(dtype)
    for original in (array, array.T, array[::2, 1::2], array[1], array[0, 0][()], array[:0]):
        original = np.asarray(original)
        loaded = roundtrip({"a": original})["a"]
        assert_same_array(loaded, original)
        assert loaded.flags.writeable and loaded.flags.c_contiguous


def test_numpy_special_values_and_byte_order():
    floats = np.array([np.nan, np.inf, -np.inf, -0.0, 5e-324], dtype=np.float64)
    assert_same_array(roundtrip(floats), floats)
    big_endian = np.arange(6, dtype=">i4").reshape(2, 3)
    loaded = roundtrip(big_endian)
    assert loaded.dtype == np.int32 and loaded.tolist() == big_endian.tolist()
    assert roundtrip(np.zeros((2, 0, 3))).shape == (2, 0, 3)


def test_numpy_arrays_keep_identity_and_not_views():
    base = np.arange(10.0)
    view = base[2:5]
    loaded = roundtrip({"x": base, "again": base, "view": view})
    assert loaded["x"] is loaded["again"]
    assert loaded["view"].tolist() == [2.0, 3.0, 4.0]
    loaded["view"][0] = -1  # views are saved as copies, as pickle does
    assert loaded["x"][2] == 2.0


def test_numpy_array_storage_is_only_the_array():
    big = np.zeros(100_000)
    assert len(saved_bytes(big[:4])) < 2_000  # not the whole base array


def test_numpy_file_is_still_safetensors():
    data = saved_bytes({"w": np.ones((2, 2), dtype=np.float32), "u": np.ones(3, dtype=np.uint32)})
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    assert header["w"]["dtype"] == "F32" and header["w"]["shape"] == [4]
    assert header["u"]["dtype"] == "U8" and header["u"]["shape"] == [12]


def test_numpy_arrays_stay_on_the_host_whatever_map_location_says():
    loaded = roundtrip({"a": np.arange(3), "b": b"xy", "t": ember.ones(2)}, map_location="meta")
    assert loaded["t"].device == ember.device("meta")
    assert loaded["a"].tolist() == [0, 1, 2] and loaded["b"] == b"xy"


@pytest.mark.parametrize(
    "value, fragment",
    [
        (np.array(["a", "b"]), "dtype <U1"),
        (np.array([object()], dtype=object), "dtype object"),
        (np.zeros(2, dtype=[("x", "f4"), ("y", "i4")]), "numpy array or scalar of dtype"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime64"),
        (np.longdouble(1.5), "float128"),
        (np.ma.masked_array([1.0]), "MaskedArray"),
        (np.str_("x"), "numpy array or scalar of dtype <U1"),
    ],
)
def test_unsupported_numpy_values(value, fragment):
    with pytest.raises(TypeError, match=fragment):
        ember.save({"v": value}, io.BytesIO())


# ---------------------------------------------------------------------------
# numpy scalars, Python scalars, strings, bytes, sets, Counter


@pytest.mark.parametrize(
    "value",
    [
        np.bool_(True),
        np.int8(-128),
        np.uint8(255),
        np.int64(-(2**63)),
        np.uint64(2**64 - 1),
        np.float16(0.1),
        BFLOAT16(0.1),
        np.float32(1 / 3),
        np.float64(math.pi),
        np.float64("nan"),
        np.float32("-inf"),
        np.complex64(1.5 - 2j),
        np.complex128(complex(math.inf, math.nan)),
    ],
    ids=repr,
)
def test_numpy_scalars_roundtrip_exactly(value):
    loaded = roundtrip([value])[0]
    assert type(loaded) is type(value)
    assert np.asarray(loaded).tobytes() == np.asarray(value).tobytes()


def test_python_values_roundtrip():
    obj = {
        "ints": [0, -1, 2**100, True, False],
        "floats": (0.1, -0.0, math.inf, -math.inf, 1e308),
        "nan": math.nan,
        "complex": complex(1, -math.inf),
        "text": "épochs ✓",
        "bytes": b"\x00\xffraw",
        "empty_bytes": b"",
        "none": None,
        "set": {1, "a", (2, 3), None},
        "frozen": frozenset({1.5}),
        "counter": Counter({"a": 3, "b": 1}),
        "nested": OrderedDict([(1, [{"deep": (np.float32(2.5), np.arange(2))}])]),
    }
    loaded = roundtrip(obj)
    assert loaded["ints"] == obj["ints"] and [type(v) for v in loaded["ints"]] == [int] * 3 + [bool] * 2
    assert loaded["floats"] == obj["floats"] and math.copysign(1, loaded["floats"][1]) == -1
    assert math.isnan(loaded["nan"])
    assert loaded["complex"].real == 1 and loaded["complex"].imag == -math.inf
    for key in ("text", "bytes", "empty_bytes", "none", "set", "frozen", "counter"):
        assert loaded[key] == obj[key] and type(loaded[key]) is type(obj[key]), key
    deep = loaded["nested"][1][0]["deep"]
    assert type(loaded["nested"]) is OrderedDict and type(deep) is tuple
    assert deep[0] == np.float32(2.5) and type(deep[0]) is np.float32
    assert deep[1].tolist() == [0, 1]


def test_set_elements_must_be_key_like():
    with pytest.raises(TypeError, match="cannot save the key"):
        ember.save({"s": {ember.ones(1).dtype, object()}}, io.BytesIO())


# ---------------------------------------------------------------------------
# malformed nodes of the new kinds


def _root_edit(**changes):
    def edit(structure):
        structure["root"]["items"][0][1].update(changes)

    return edit


def test_malformed_ndarray_nodes_are_rejected():
    data = saved_bytes({"a": np.arange(6, dtype=np.int64).reshape(2, 3)})
    assert_rejected(edit_structure(data, _root_edit(dtype="object")), "unsupported numpy dtype 'object'")
    assert_rejected(edit_structure(data, _root_edit(dtype="int32")), "must refer to a contiguous 1-D int32 tensor")
    assert_rejected(edit_structure(data, _root_edit(shape=[4, 3])), "needs 96 bytes, but its tensor holds 48")
    assert_rejected(edit_structure(data, _root_edit(shape=[-1, 3])), "shape must be a list of non-negative")
    assert_rejected(edit_structure(data, _root_edit(shape=[1] * 65)), "at most 64")
    assert_rejected(edit_structure(data, _root_edit(i=5)), "tensor index 5 out of range")
    assert_rejected(edit_structure(data, _root_edit(extra=1)), "must have exactly the fields")


def test_malformed_scalar_bytes_and_set_nodes_are_rejected():
    data = saved_bytes({"a": np.int8(3)})
    assert_rejected(edit_structure(data, _root_edit(v=300)), "out of the range of numpy int8")
    assert_rejected(edit_structure(data, _root_edit(v=1.5)), "numpy int8 scalar cannot hold 1.5")
    assert_rejected(edit_structure(data, _root_edit(dtype="str")), "unsupported numpy dtype")
    data = saved_bytes({"a": b"xyz", "t": ember.ones(2)})

    def bytes_to_float_tensor(structure):
        structure["root"]["items"][0][1]["i"] = structure["root"]["items"][1][1]["i"]

    assert_rejected(edit_structure(data, bytes_to_float_tensor), "1-D uint8 tensor")
    data = saved_bytes({"a": {1, 2}})
    assert_rejected(edit_structure(data, _root_edit(v=[1, 1])), "repeated")
    assert_rejected(edit_structure(data, _root_edit(v=[[1]])), "unhashable")
    assert_rejected(edit_structure(data, _root_edit(v=5)), "'v' must be a list")


# ---------------------------------------------------------------------------
# PyTorch's arguments and safe globals


def test_pytorch_arguments_are_accepted(tmp_path):
    import pickle

    path = tmp_path / "ckpt.pt"
    ember.save({"x": 1}, path, pickle_module=pickle, pickle_protocol=4, _use_new_zipfile_serialization=False)
    assert ember.load(path, map_location="cpu", pickle_module=pickle, weights_only=False, mmap=True) == {"x": 1}
    assert ember.load(path, encoding="latin1") == {"x": 1}


def test_safe_globals_are_recorded_and_change_nothing():
    class Config:
        pass

    s = ember.serialization
    s.clear_safe_globals()
    s.add_safe_globals([Config])
    assert s.get_safe_globals() == [Config]
    with s.safe_globals([int]):
        assert s.get_safe_globals() == [Config, int]
    assert s.get_safe_globals() == [Config]
    s.clear_safe_globals()
    assert s.get_safe_globals() == []
    assert s.get_unsafe_globals_in_checkpoint(io.BytesIO(saved_bytes(1))) == []
    with pytest.raises(TypeError, match="expected a list"):
        s.add_safe_globals(Config)
    with pytest.raises(TypeError):  # registering it does not make an arbitrary class saveable
        ember.save(Config(), io.BytesIO())
