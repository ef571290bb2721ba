"""ember.save / ember.load: round trips, storage sharing, atomic writes and hostile files.

The functions are imported from ``ember.serialization`` so that these tests do
not depend on ``ember/__init__.py`` re-exporting them.
"""

from __future__ import annotations

import doctest
import io
import json
import math
import os
import pickle
import stat
from collections import OrderedDict, defaultdict, namedtuple
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy

import ember
from ember import serialization
from ember._device import _BACKENDS, Backend
from ember._dtype import ALL_DTYPES
from ember.serialization import SerializationError, load, save
from ember.utils.backend_registration import register_backend

# ---------------------------------------------------------------------------
# helpers


class _HostCopyBackend(Backend):
    """A device whose arrays are numpy copies: stands in for CUDA in tests that need a second device."""

    def from_numpy(self, array, index):
        return np.array(array, copy=True)

    def to_numpy(self, array):
        return np.array(array, copy=True)

    def strided_view(self, storage, shape, strides, offset, dtype):
        itemsize = dtype.itemsize
        return np.ndarray(
            shape, dtype, buffer=storage.base, offset=offset * itemsize, strides=tuple(s * itemsize for s in strides)
        )


TEST_DEVICE = "sertest"
if TEST_DEVICE not in _BACKENDS:
    register_backend(TEST_DEVICE, _HostCopyBackend(), generate_methods=False)


def random_array(dtype, shape, seed=0):
    """Values of every kind a dtype holds (NaN, inf, extremes included for floats and ints)."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    np_dtype = dtype.numpy_dtype
    if dtype is ember.bool:
        flat = rng.random(n) > 0.5
    elif dtype.is_complex:
        flat = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np_dtype)
        if n >= 2:
            flat[0] = complex(math.nan, math.inf)
    elif dtype.is_floating_point:
        flat = rng.standard_normal(n).astype(np_dtype)
        if n >= 3:
            flat[:3] = np.array([math.nan, -math.inf, -0.0]).astype(np_dtype)
    else:
        info = np.iinfo(np_dtype)
        flat = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=np_dtype)
        if n >= 2:
            flat[:2] = [info.min, info.max]
    return np.ascontiguousarray(flat.reshape(shape))


def as_bytes(array):
    return np.ascontiguousarray(array).view(np.uint8).tobytes()


def roundtrip(obj, **load_kwargs):
    buffer = io.BytesIO()
    save(obj, buffer)
    buffer.seek(0)
    return load(buffer, **load_kwargs)


def saved_bytes(obj):
    buffer = io.BytesIO()
    save(obj, buffer)
    return buffer.getvalue()


def split_file(data):
    """(header dict, data bytes) of a saved file."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def build_file(header, data=b"", *, checksum=True, header_text=None):
    """A file from ``header`` and ``data``; ember headers get a fresh checksum unless told not to."""
    if checksum and "ember.structure" in header.get("__metadata__", {}):
        header["__metadata__"]["ember.header_sha256"] = serialization._header_checksum(header)
    text = header_text if header_text is not None else json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


def edit_structure(data, edit):
    """Re-encode a saved file after ``edit(structure)`` changes its structure (checksum recomputed)."""
    header, payload = split_file(data)
    structure = json.loads(header["__metadata__"]["ember.structure"])
    edit(structure)
    header["__metadata__"]["ember.structure"] = json.dumps(structure)
    return build_file(header, payload)


def load_bytes(data, **kwargs):
    return load(io.BytesIO(data), **kwargs)


def assert_same_structure(loaded, original):
    """Equal values and identical types, recursively; tensors compared byte for byte."""
    assert type(loaded) is type(original) or (isinstance(original, ember.Tensor) and type(loaded) is ember.Tensor)
    if isinstance(original, ember.Tensor):
        assert loaded.dtype is original.dtype
        assert loaded.shape == original.shape
        assert loaded.stride() == original.stride()
        assert loaded.storage_offset() == original.storage_offset()
        assert loaded.requires_grad == original.requires_grad
        if original.device.type != "meta":
            assert as_bytes(loaded._host_array()) == as_bytes(original._host_array())
    elif isinstance(original, (dict, OrderedDict)):
        assert list(loaded.keys()) == list(original.keys())
        for lk, ok in zip(loaded.keys(), original.keys()):
            assert type(lk) is type(ok)
        for key in original:
            assert_same_structure(loaded[key], original[key])
    elif isinstance(original, (list, tuple)):
        assert len(loaded) == len(original)
        for a, b in zip(loaded, original):
            assert_same_structure(a, b)
    elif isinstance(original, float) and math.isnan(original):
        assert math.isnan(loaded)
    elif isinstance(original, float):
        assert loaded == original and math.copysign(1, loaded) == math.copysign(1, original)
    elif isinstance(original, complex):
        assert as_bytes(np.array(loaded)) == as_bytes(np.array(original))
    else:
        assert loaded == original


def small_state():
    base = ember.from_numpy(np.arange(24, dtype=np.float32).reshape(4, 6))
    return {
        "weight": base,
        "weight_t": base.t(),
        "bias": ember.from_numpy(np.array([1.5, -2.0], dtype=np.float64)),
        "step": 7,
        "names": ("a", "b"),
    }


# ---------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_roundtrip_every_dtype_is_byte_exact(dtype):
    original = random_array(dtype, (3, 5), seed=1)
    t = ember.from_numpy(original)
    loaded = roundtrip({"x": t})["x"]
    assert loaded.dtype is dtype
    assert loaded.shape == (3, 5)
    assert loaded.stride() == (5, 1)
    assert loaded.device == ember.device("cpu")
    assert loaded.numpy().dtype == original.dtype
    assert as_bytes(loaded.numpy()) == as_bytes(original)
    if dtype is ember.bfloat16:  # numpy's NaN-aware comparison does not know bfloat16
        np.testing.assert_array_equal(loaded.numpy().astype(np.float32), original.astype(np.float32))
    elif dtype is not ember.bool:
        np.testing.assert_array_equal(loaded.numpy(), original)  # NaN positions equal too


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_bare_tensor_roundtrip(dtype):
    t = ember.from_numpy(random_array(dtype, (4,), seed=2))
    loaded = roundtrip(t)
    assert isinstance(loaded, ember.Tensor)
    assert_same_structure(loaded, t)


def test_nested_structure_keeps_types_and_values():
    obj = {
        "model": OrderedDict([("layer.weight", ember.ones(2, 2)), ("layer.bias", ember.zeros(2))]),
        "optimizer": {
            "state": {0: {"step": 3, "exp_avg": ember.full((2,), 0.5)}, 1: {"step": 3}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1], "amsgrad": False}],
        },
        "scalars": [0, -1, 2**62, -(2**100), 0.1, -0.0, math.inf, -math.inf, math.nan, 1e-310, True, False, None],
        "complex": [1 + 2j, complex(math.nan, -math.inf), -0j],
        "strings": ["", "plain", "ünïcödé ☃", 'quote " and \\ backslash', "\x00control\n"],
        "tuples": ((), (1,), ((2, 3), [4])),
        "keys": {1: "int", "1": "str", 2.5: "float", None: "none", (1, "a"): "tuple"},
        "bool_keys": {True: "true", False: "false"},
        "dtypes": [ember.float32, ember.bfloat16, ember.complex128, ember.bool],
        "devices": [ember.device("cpu"), ember.device("meta"), ember.device("cuda", 1), ember.device(TEST_DEVICE, 0)],
        "size": ember.Size([2, 3]),
        "empty": {"dict": {}, "list": [], "odict": OrderedDict()},
    }
    loaded = roundtrip(obj)
    assert_same_structure(loaded, obj)
    assert type(loaded["model"]) is OrderedDict
    assert type(loaded["optimizer"]["param_groups"][0]["betas"]) is tuple
    assert list(loaded["optimizer"]["state"]) == [0, 1]
    assert type(loaded["size"]) is ember.Size
    assert loaded["dtypes"][1] is ember.bfloat16
    assert loaded["devices"][2] == ember.device("cuda:1")


@pytest.mark.parametrize("value", [None, 0, 1.25, "text", True, 3j, ember.int8, ember.device("cpu"), [], (), {}])
def test_top_level_non_tensor_values(value):
    assert_same_structure(roundtrip(value), value)


def test_same_tensor_twice_loads_as_one_object():
    t = ember.ones(3)
    loaded = roundtrip({"a": t, "b": [t, (t,)]})
    assert loaded["a"] is loaded["b"][0] is loaded["b"][1][0]


def test_tensor_subclass_is_saved_as_plain_tensor():
    class MyTensor(ember.Tensor):
        pass

    t = ember.ones(2).as_subclass(MyTensor)
    loaded = roundtrip(t)
    assert type(loaded) is ember.Tensor
    assert loaded.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------------------
# storage sharing and layouts


def test_views_share_storage_after_load_with_same_strides_and_offsets():
    base = ember.from_numpy(np.arange(24, dtype=np.float32).reshape(4, 6))
    views = {
        "base": base,
        "t": base.t(),
        "slice": base[1:, ::2],
        "row": base[2],
        "col": base[:, 3],
        "diag": base.diagonal(),
        "unfold": base.unfold(1, 2, 2),
        "expand": base[0].expand(3, 6),
        "narrow": base.narrow(1, 2, 3),
        "empty_tail": base.view(-1)[24:],
    }
    loaded = roundtrip(views)
    storage = loaded["base"].untyped_storage()
    for name, original in views.items():
        got = loaded[name]
        assert got.untyped_storage() is storage, name
        assert got.shape == original.shape, name
        assert got.stride() == original.stride(), name
        assert got.storage_offset() == original.storage_offset(), name
        np.testing.assert_array_equal(got.numpy(), original.numpy(), err_msg=name)
    # writes through one view are visible through every other
    loaded["slice"][0, 1] = -100.0  # element (1, 2) of base
    assert loaded["base"][1, 2].item() == -100.0
    assert loaded["t"][2, 1].item() == -100.0
    assert loaded["narrow"][1, 0].item() == -100.0
    loaded["row"][:] = 9.0
    assert loaded["col"][2].item() == 9.0
    assert loaded["diag"][2].item() == 9.0
    assert loaded["base"]._version == loaded["row"]._version > 0


def test_views_without_their_base_keep_the_whole_storage():
    base = ember.from_numpy(np.arange(12, dtype=np.int64).reshape(3, 4))
    a, b = base[:, 1], base[2, ::3]
    loaded = roundtrip([a, b])
    assert loaded[0].untyped_storage() is loaded[1].untyped_storage()
    assert loaded[0].untyped_storage().nbytes == 12 * 8
    assert loaded[0].tolist() == [1, 5, 9] and loaded[1].tolist() == [8, 11]
    assert loaded[0].storage_offset() == 1 and loaded[1].storage_offset() == 8
    loaded[0][2] = 100  # element 9
    assert loaded[1].tolist() == [8, 11]
    loaded[1][0] = -5  # element 8
    assert loaded[0].tolist() == [1, 5, 100]


def test_unrelated_tensors_do_not_share_storage():
    loaded = roundtrip([ember.ones(2), ember.ones(2)])
    assert loaded[0].untyped_storage() is not loaded[1].untyped_storage()
    loaded[0][0] = 5.0
    assert loaded[1].tolist() == [1.0, 1.0]


def test_complex_storage_with_real_views():
    c = ember.tensor([1 + 2j, 3 - 4j, -5j], dtype=ember.complex128)
    loaded = roundtrip({"c": c, "re": c.real, "im": c.imag, "pairs": ember.view_as_real(c)})
    assert loaded["re"].untyped_storage() is loaded["c"].untyped_storage()
    assert loaded["im"].storage_offset() == 1 and loaded["im"].stride() == (2,)
    assert loaded["pairs"].shape == (3, 2)
    loaded["im"][0] = 7.0
    assert loaded["c"][0].item() == 1 + 7j


def test_non_contiguous_tensor_values():
    original = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    t = ember.from_numpy(original).permute(2, 0, 1)[1:, :, ::2]
    loaded = roundtrip(t)
    assert not loaded.is_contiguous()
    assert loaded.stride() == t.stride()
    np.testing.assert_array_equal(loaded.numpy(), original.transpose(2, 0, 1)[1:, :, ::2])


def test_zero_dim_and_empty_tensors():
    obj = {
        "scalar": ember.tensor(3.5),
        "int_scalar": ember.tensor(-7),
        "empty": ember.empty(0, 3),
        "empty_int": ember.zeros(0, dtype=ember.int64),
        "empty_slice": ember.ones(4)[2:2],
    }
    loaded = roundtrip(obj)
    assert_same_structure(loaded, obj)
    assert loaded["scalar"].shape == () and loaded["scalar"].item() == 3.5
    assert loaded["int_scalar"].item() == -7
    assert loaded["empty"].shape == (0, 3) and loaded["empty"].numel() == 0


def test_requires_grad_flag():
    w = ember.ones(2, 3, requires_grad=True)
    loaded = roundtrip(
        {"w": w, "i": ember.ones(2, dtype=ember.int64), "c": ember.zeros(2, dtype=ember.complex64).requires_grad_()}
    )
    assert loaded["w"].requires_grad and loaded["w"].is_leaf
    assert not loaded["i"].requires_grad
    assert loaded["c"].requires_grad


def test_meta_tensors_keep_metadata_without_data():
    m = ember.empty(4, 6, device="meta", dtype=ember.float16)
    view = m.t()
    data = saved_bytes({"m": m, "view": view, "real": ember.ones(1)})
    header, _ = split_file(data)
    assert set(header) == {"__metadata__", "real"}  # no data entry for meta tensors
    loaded = load_bytes(data)
    for name, original in (("m", m), ("view", view)):
        assert loaded[name].device == ember.device("meta")
        assert loaded[name].dtype is ember.float16
        assert loaded[name].shape == original.shape
        assert loaded[name].stride() == original.stride()
    # meta tensors stay meta whatever map_location says
    assert load_bytes(data, map_location="cpu")["m"].device == ember.device("meta")


# ---------------------------------------------------------------------------
# devices and map_location


def _device_state():
    base = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=TEST_DEVICE)
    return {"base": base, "t": base.t(), "cpu": ember.tensor([1, 2, 3])}


def test_non_cpu_tensors_load_on_their_device_by_default():
    loaded = roundtrip(_device_state())
    assert loaded["base"].device == ember.device(TEST_DEVICE, 0)
    assert loaded["cpu"].device == ember.device("cpu")
    assert loaded["t"].untyped_storage() is loaded["base"].untyped_storage()
    assert loaded["t"].stride() == (1, 3)
    np.testing.assert_array_equal(loaded["t"]._host_array(), [[1, 4], [2, 5], [3, 6]])


@pytest.mark.parametrize(
    "map_location",
    [
        "cpu",
        ember.device("cpu"),
        {f"{TEST_DEVICE}:0": "cpu"},
        {ember.device(TEST_DEVICE, 0): ember.device("cpu")},
        lambda location: "cpu" if location.startswith(TEST_DEVICE) else None,
    ],
    ids=["str", "device", "dict", "dict-of-devices", "callable"],
)
def test_map_location_moves_to_cpu(map_location):
    loaded = roundtrip(_device_state(), map_location=map_location)
    assert loaded["base"].device == ember.device("cpu")
    assert loaded["t"].untyped_storage() is loaded["base"].untyped_storage()
    np.testing.assert_array_equal(loaded["t"].numpy(), [[1, 4], [2, 5], [3, 6]])
    assert loaded["cpu"].device == ember.device("cpu")


def test_map_location_to_another_device_keeps_sharing():
    state = {"a": ember.arange(6, dtype=ember.float32), "b": None}
    state["b"] = state["a"][1::2]
    loaded = roundtrip(state, map_location=TEST_DEVICE)
    assert loaded["a"].device == ember.device(TEST_DEVICE, 0)
    assert loaded["b"].untyped_storage() is loaded["a"].untyped_storage()
    np.testing.assert_array_equal(loaded["b"]._host_array(), [1, 3, 5])


def test_map_location_dict_leaves_unlisted_devices_alone():
    loaded = roundtrip(_device_state(), map_location={"cuda:0": "cpu"})
    assert loaded["base"].device == ember.device(TEST_DEVICE, 0)


def test_map_location_to_meta_drops_data():
    loaded = roundtrip(_device_state(), map_location="meta")
    assert loaded["base"].device == ember.device("meta")
    assert loaded["t"].stride() == (1, 3) and loaded["t"].shape == (3, 2)


def test_unavailable_saved_device_needs_map_location(monkeypatch):
    def to_cuda(structure):
        structure["storages"]["x"]["device"] = "cuda:0"

    # the file names a device this process can't use: make CUDA unavailable where it is not already
    monkeypatch.setattr(_BACKENDS["cuda"], "is_available", lambda: False)
    data = edit_structure(saved_bytes({"x": ember.ones(2)}), to_cuda)
    with pytest.raises(SerializationError, match=r"saved on 'cuda:0'.*map_location"):
        load_bytes(data)
    for map_location in ("cpu", {"cuda:0": "cpu"}, lambda loc: "cpu"):
        assert load_bytes(data, map_location=map_location)["x"].tolist() == [1.0, 1.0]


def test_bad_map_location_type():
    with pytest.raises(TypeError, match="map_location"):
        roundtrip({"x": ember.ones(1)}, map_location=3.5)


def test_weights_only_is_accepted():
    for value in (True, False, None):
        assert roundtrip({"x": 1}, weights_only=value) == {"x": 1}


# ---------------------------------------------------------------------------
# paths and file objects


def test_str_and_pathlike_paths(tmp_path):
    state = small_state()
    save(state, str(tmp_path / "a.safetensors"))
    save(state, tmp_path / "b.safetensors")
    for name in ("a.safetensors", "b.safetensors"):
        assert_same_structure(load(tmp_path / name), state)
        assert_same_structure(load(str(tmp_path / name)), state)
    assert sorted(os.listdir(tmp_path)) == ["a.safetensors", "b.safetensors"]


def test_open_file_objects(tmp_path):
    state = small_state()
    path = tmp_path / "c.safetensors"
    with open(path, "wb") as fh:
        save(state, fh)
    with open(path, "rb") as fh:
        assert_same_structure(load(fh), state)
    with open(path, "rb", buffering=0) as fh:  # raw file: short reads possible
        assert_same_structure(load(fh), state)


def test_several_objects_in_one_stream_and_nonzero_start():
    buffer = io.BytesIO()
    buffer.write(b"prefix")
    save({"first": ember.ones(2)}, buffer)
    save([ember.zeros(3), "second"], buffer)
    buffer.write(b"suffix")
    buffer.seek(6)
    first = load(buffer)
    second = load(buffer)
    assert first["first"].tolist() == [1.0, 1.0]
    assert second[0].tolist() == [0.0, 0.0, 0.0] and second[1] == "second"
    assert buffer.read() == b"suffix"


class _Unseekable(io.RawIOBase):
    """A read-only stream that cannot seek and returns at most a few bytes per read."""

    def __init__(self, data, step=7):
        self._data, self._pos, self._step = data, 0, step

    def readable(self):
        return True

    def seekable(self):
        return False

    def readinto(self, buffer):
        n = min(len(buffer), self._step, len(self._data) - self._pos)
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


def test_unseekable_stream_with_short_reads():
    state = small_state()
    assert_same_structure(load(_Unseekable(saved_bytes(state))), state)


def test_unseekable_truncated_stream():
    data = saved_bytes(small_state())
    for cut in (4, 20, len(data) - 1):
        with pytest.raises(SerializationError, match="truncated"):
            load(_Unseekable(data[:cut]))


def test_small_chunks(monkeypatch):
    monkeypatch.setattr(serialization, "_CHUNK", 5)
    state = small_state()
    buffer = io.BytesIO()
    save(state, buffer)
    assert_same_structure(load(io.BytesIO(buffer.getvalue())), state)
    assert_same_structure(load(_Unseekable(buffer.getvalue(), step=3)), state)


def test_invalid_f_arguments():
    with pytest.raises(TypeError, match="path"):
        save({}, 42)
    with pytest.raises(TypeError, match="path"):
        load(42)


def test_text_mode_files_are_refused(tmp_path):
    with open(tmp_path / "t.txt", "w") as fh, pytest.raises(TypeError, match="binary mode"):
        save({}, fh)
    (tmp_path / "r.txt").write_text("{}")
    with open(tmp_path / "r.txt") as fh, pytest.raises(TypeError, match="binary mode"):
        load(fh)


def test_missing_file_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "absent.safetensors")


# ---------------------------------------------------------------------------
# atomic writes


def _dir_listing(path):
    return sorted(os.listdir(path))


@pytest.mark.parametrize("failure", ["mid-write", "fsync", "replace", "interrupt"])
def test_failed_save_leaves_old_file_and_no_temp_file(tmp_path, monkeypatch, failure):
    path = tmp_path / "ckpt.safetensors"
    save({"version": 1, "w": ember.ones(3)}, path)
    before = path.read_bytes()

    if failure in ("mid-write", "interrupt"):
        original = serialization._write_payload
        exc = OSError("disk full") if failure == "mid-write" else KeyboardInterrupt()

        def failing_write(fh, plan):
            fh.write(b"partial data")
            original(fh, plan)
            raise exc

        monkeypatch.setattr(serialization, "_write_payload", failing_write)
    elif failure == "fsync":

        def failing_fsync(fd):
            raise OSError("fsync failed")

        monkeypatch.setattr(serialization.os, "fsync", failing_fsync)
    else:

        def failing_replace(src, dst):
            raise OSError("rename failed")

        monkeypatch.setattr(serialization.os, "replace", failing_replace)

    expected = KeyboardInterrupt if failure == "interrupt" else OSError
    with pytest.raises(expected):
        save({"version": 2, "w": ember.zeros(100)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _dir_listing(tmp_path) == ["ckpt.safetensors"]
    assert load(path)["version"] == 1


def test_unsaveable_object_touches_nothing(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save({"ok": 1}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save({"bad": {1, 2, object()}}, path)
    assert path.read_bytes() == before
    assert _dir_listing(tmp_path) == ["ckpt.safetensors"]


def test_save_replaces_existing_file_and_keeps_its_mode(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save({"v": 1}, path)
    os.chmod(path, 0o640)
    save({"v": 2}, path)
    assert load(path) == {"v": 2}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert _dir_listing(tmp_path) == ["ckpt.safetensors"]


def test_new_file_gets_the_mode_open_would_give(tmp_path):
    reference = tmp_path / "reference"
    with open(reference, "wb"):
        pass
    path = tmp_path / "new.safetensors"
    save({"v": 1}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == stat.S_IMODE(os.stat(reference).st_mode)


def test_save_through_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "real.safetensors"
    save({"v": 1}, target)
    link = tmp_path / "link.safetensors"
    link.symlink_to(target)
    save({"v": 2}, link)
    assert link.is_symlink()
    assert load(target) == {"v": 2}


def test_save_to_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        save({"v": 1}, tmp_path / "missing" / "ckpt.safetensors")


# ---------------------------------------------------------------------------
# safetensors compatibility


def test_file_is_readable_by_safetensors(tmp_path):
    arrays = {d.name: random_array(d, (2, 3), seed=i) for i, d in enumerate(ALL_DTYPES)}
    state = {name: ember.from_numpy(a) for name, a in arrays.items()}
    path = tmp_path / "all.safetensors"
    save(state, path)
    with safetensors.safe_open(str(path), "np") as f:
        assert set(f.keys()) == set(arrays)
        metadata = f.metadata()
        assert metadata["ember.format_version"] == "1"
        assert "ember.structure" in metadata
        for name, original in arrays.items():
            stored = f.get_tensor(name)
            assert stored.ndim == 1  # each storage is stored flat
            assert as_bytes(stored) == as_bytes(original), name
            dtype = ember._dtype.BY_NAME[name]
            if dtype.is_complex:  # stored as (real, imaginary) pairs
                expected = original.view(dtype.to_real().numpy_dtype).reshape(-1)
            else:
                expected = original.reshape(-1)
            assert stored.dtype == expected.dtype, name
            if dtype is ember.bfloat16:
                np.testing.assert_array_equal(stored.astype(np.float32), expected.astype(np.float32))
            elif dtype is not ember.bool:
                np.testing.assert_array_equal(stored, expected, err_msg=name)


def test_bfloat16_with_safetensors_numpy_loader(tmp_path):
    # safetensors' numpy loader resolves "BF16" as np.dtype("bfloat16"), which exists once
    # ml_dtypes is imported (importing ember does that).
    original = np.array([1.0, -2.5, 3.25], dtype=ml_dtypes.bfloat16)
    path = tmp_path / "bf16.safetensors"
    save({"x": ember.from_numpy(original)}, path)
    loaded = safetensors.numpy.load_file(str(path))
    assert loaded["x"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(loaded["x"].astype(np.float32), [1.0, -2.5, 3.25])


def test_storage_dtype_codes():
    c = ember.tensor([1 + 2j], dtype=ember.complex64)
    # a complex storage, alone or with its real views, is stored as (real, imaginary) pairs
    header, _ = split_file(saved_bytes({"c": c, "re": c.real}))
    assert header["c"]["dtype"] == "F32" and header["c"]["shape"] == [2]
    header, _ = split_file(saved_bytes({"c": ember.zeros(2, dtype=ember.complex128)}))
    assert header["c"]["dtype"] == "F64" and header["c"]["shape"] == [4]
    header, _ = split_file(saved_bytes({"b": ember.ones(3, dtype=ember.bool)}))
    assert header["b"]["dtype"] == "BOOL" and header["b"]["shape"] == [3]


def test_storage_viewed_with_two_dtypes_is_stored_as_bytes():
    floats = ember.from_numpy(np.array([1.0, -2.0, 0.5], dtype=np.float32))
    bits = ember.Tensor._make_view(floats.numpy().view(np.int32)[1:], floats)  # no public dtype view op yet
    data = saved_bytes({"floats": floats, "bits": bits})
    header, _ = split_file(data)
    assert header["floats"]["dtype"] == "U8" and header["floats"]["shape"] == [12]
    loaded = load_bytes(data)
    assert loaded["bits"].dtype is ember.int32 and loaded["bits"].storage_offset() == 1
    assert loaded["bits"].untyped_storage() is loaded["floats"].untyped_storage()
    assert loaded["bits"].tolist() == np.array([-2.0, 0.5], dtype=np.float32).view(np.int32).tolist()
    loaded["bits"][0] = int(np.array(3.0, dtype=np.float32).view(np.int32))
    assert loaded["floats"].tolist() == [1.0, 3.0, 0.5]


def test_storage_names_and_safetensors_validation(tmp_path):
    state = {"layer": {"weight": ember.ones(2, 2), "bias": ember.zeros(0)}, "meta": {"__metadata__": ember.ones(1)}}
    state["layer"]["weight_t"] = state["layer"]["weight"].t()
    path = tmp_path / "names.safetensors"
    save(state, path)
    with safetensors.safe_open(str(path), "np") as f:
        assert sorted(f.keys()) == ["layer.bias", "layer.weight", "meta.__metadata__"]
        assert f.get_tensor("layer.bias").shape == (0,)


def test_file_without_tensors_is_valid_safetensors(tmp_path):
    path = tmp_path / "none.safetensors"
    save({"epoch": 3}, path)
    with safetensors.safe_open(str(path), "np") as f:
        assert list(f.keys()) == []
    assert load(path) == {"epoch": 3}


def test_data_is_8_byte_aligned():
    for obj in ({"x": ember.ones(3)}, {"a": 1}, {"long name" * 7: ember.zeros(2, dtype=ember.int8)}):
        data = saved_bytes(obj)
        assert (8 + int.from_bytes(data[:8], "little")) % 8 == 0


def test_plain_safetensors_file_loads_as_dict(tmp_path):
    arrays = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([True, False]),
        "i": np.array([[1, 2]], dtype=np.int16),
        "s": np.array(5.0, dtype=np.float64),
    }
    path = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file(arrays, str(path), metadata={"format": "np"})
    loaded = load(path)
    assert set(loaded) == set(arrays)
    for name, original in arrays.items():
        assert loaded[name].shape == original.shape
        np.testing.assert_array_equal(loaded[name].numpy(), original)
    assert load(path, map_location="meta")["w"].device == ember.device("meta")


# ---------------------------------------------------------------------------
# what cannot be saved


Point = namedtuple("Point", "x y")


@pytest.mark.parametrize(
    "obj, fragment",
    [
        ({"a": {1, 2, object()}}, r"key <object object"),  # set elements must be valid dict keys
        ({"a": [0, np.array([None], dtype=object)]}, r"obj\['a'\]\[1\], a numpy array or scalar of dtype object"),
        ({"a": np.array(["x"])}, r"dtype <U1: only numeric dtypes"),
        ({"a": np.datetime64("2020")}, "datetime64"),
        ({"a": np.longdouble(1.0)}, "float128"),  # no exact home in the format
        ({"a": np.ma.masked_array([1.0])}, "MaskedArray"),  # ndarray subclasses are refused: their type would be lost
        (defaultdict(list), "defaultdict"),
        (Point(1, 2), "Point"),
        ({"a": bytearray(b"bytes")}, "bytearray"),
        ({ember.ones(1): 1}, "key"),
        ({frozenset(): 1}, "key"),
        (lambda: 0, "function"),
    ],
)
def test_unsupported_objects_raise_type_error(obj, fragment):
    with pytest.raises(TypeError, match=fragment):
        saved_bytes(obj)


def test_reference_cycle_raises_value_error():
    a = {"x": 1}
    a["self"] = [a]
    with pytest.raises(ValueError, match="contains itself"):
        saved_bytes(a)


def test_shared_non_cycle_containers_are_fine():
    shared = [1, 2]
    loaded = roundtrip({"a": shared, "b": shared})
    assert loaded == {"a": [1, 2], "b": [1, 2]}


# ---------------------------------------------------------------------------
# damaged and hostile files


def _assert_rejected(data, fragment, **kwargs):
    with pytest.raises(SerializationError, match=fragment) as info:
        load_bytes(data, **kwargs)
    assert isinstance(info.value, RuntimeError)
    return info.value


def test_error_names_the_file(tmp_path):
    path = tmp_path / "broken.safetensors"
    path.write_bytes(b"\x05\x00")
    with pytest.raises(SerializationError, match=r"broken\.safetensors.*truncated"):
        load(path)


def test_truncated_files_at_every_cut_point(tmp_path):
    data = saved_bytes(small_state())
    path = tmp_path / "cut.safetensors"
    for cut in range(len(data)):
        path.write_bytes(data[:cut])
        with pytest.raises(SerializationError, match="truncated|header|JSON"):
            load(path)
        with pytest.raises(SerializationError, match="truncated|header|JSON"):
            load_bytes(data[:cut])


def test_trailing_bytes_after_data_in_a_file(tmp_path):
    path = tmp_path / "long.safetensors"
    path.write_bytes(saved_bytes(small_state()) + b"\x00")
    with pytest.raises(SerializationError, match="1 unexpected bytes"):
        load(path)


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_every_flipped_header_byte_is_detected(mask):
    data = saved_bytes(small_state())
    header_end = 8 + int.from_bytes(data[:8], "little")
    for position in range(header_end):
        damaged = bytearray(data)
        damaged[position] ^= mask
        with pytest.raises(SerializationError):
            load_bytes(bytes(damaged))


def test_flipped_data_bytes_are_not_detected():
    # Documented limitation: only the header is checksummed.
    data = bytearray(saved_bytes({"x": ember.zeros(2, dtype=ember.uint8)}))
    data[-1] ^= 0xFF
    assert load_bytes(bytes(data))["x"].tolist() == [0, 255]


def test_pickle_file_is_rejected_without_running_it(tmp_path):
    ran = []

    class Exploit:
        def __reduce__(self):
            return (ran.append, ("executed",))

    payload = pickle.dumps(Exploit())
    _assert_rejected(payload, "header|truncated|PyTorch checkpoint")
    _assert_rejected(b"PK\x03\x04" + b"\x00" * 100, "header|PyTorch checkpoint")  # a zip (PyTorch's format)
    assert ran == []


@pytest.mark.parametrize(
    "length, fragment",
    [
        (2**64 - 1, "not an ember/safetensors file"),
        (10**9, "not an ember/safetensors file"),
        (0, "too small"),
        (1, "too small"),
        (5000, "larger than the rest"),
    ],
)
def test_bad_header_lengths(length, fragment):
    _assert_rejected(length.to_bytes(8, "little") + b'{"a": 1}' + b" " * 100, fragment)


@pytest.mark.parametrize(
    "text, fragment",
    [
        (b"not json", "does not start with"),
        (b" {}", "does not start with"),
        (b'{"a": ', "not valid JSON"),
        (b"[1, 2]", "does not start with"),
        (b'{"a": NaN}', "not valid JSON"),
        (b'{"a": 1, "a": 2}', "duplicate key"),
        (b'{"\xff": 1}', "UTF-8"),
        (b"{}xyz", "not valid JSON"),
        (b'{"x": ' + b"[" * 100000 + b"]" * 100000 + b"}", "JSON|exactly the fields"),
    ],
)
def test_malformed_header_text(text, fragment):
    _assert_rejected(len(text).to_bytes(8, "little") + text, fragment)


def _entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


@pytest.mark.parametrize(
    "header, data, fragment",
    [
        ({"x": _entry(offsets=(-8, 0))}, b"", r"integers in \[0"),
        ({"x": _entry(offsets=(8, 0))}, b"\x00" * 8, "begin <= end"),
        ({"x": _entry(offsets=(0, 8, 9))}, b"\x00" * 8, "begin <= end"),
        ({"x": _entry(shape=(3,))}, b"\x00" * 8, "needs 12 bytes"),
        ({"x": _entry(shape=(2**62, 2**62))}, b"\x00" * 8, "needs"),
        ({"x": _entry(shape=(-2,))}, b"\x00" * 8, "integers in"),
        ({"x": _entry(shape=(2.0,))}, b"\x00" * 8, "integers in"),
        ({"x": _entry(shape=(True,), offsets=(0, 4))}, b"\x00" * 4, "integers in"),
        ({"x": _entry(shape=[1] * 65, offsets=(0, 4))}, b"\x00" * 4, "at most 64"),
        ({"x": _entry(dtype="U16", shape=(4,))}, b"\x00" * 8, "unknown dtype code 'U16'"),
        ({"x": _entry(dtype="F8_E4M3", shape=(8,))}, b"\x00" * 8, "unknown dtype code"),
        ({"x": _entry(dtype=5)}, b"\x00" * 8, "unknown dtype code"),
        ({"x": {**_entry(), "extra": 1}}, b"\x00" * 8, "exactly the fields"),
        ({"x": [1, 2]}, b"", "exactly the fields"),
        ({"x": _entry(offsets=(0, 8)), "y": _entry(offsets=(4, 12))}, b"\x00" * 12, "overlaps"),
        ({"x": _entry(offsets=(0, 8)), "y": _entry(offsets=(0, 8))}, b"\x00" * 8, "overlaps"),
        ({"x": _entry(offsets=(4, 12))}, b"\x00" * 12, "gap"),
        ({"x": _entry(shape=(2**40,), offsets=(0, 2**42))}, b"\x00" * 8, "truncated"),
        ({"__metadata__": {"a": 1}}, b"", "strings to strings"),
        ({"__metadata__": ["a"]}, b"", "strings to strings"),
    ],
)
def test_hostile_safetensors_entries(header, data, fragment):
    _assert_rejected(build_file(header, data), fragment)


def test_huge_claimed_data_is_not_allocated(tmp_path):
    # 2**60 bytes claimed, 8 present: rejected from the sizes alone (no MemoryError, no allocation).
    header = {"x": _entry(dtype="U8", shape=(2**60,), offsets=(0, 2**60))}
    path = tmp_path / "huge.safetensors"
    path.write_bytes(build_file(header, b"\x00" * 8))
    with pytest.raises(SerializationError, match="truncated"):
        load(path)
    with pytest.raises(SerializationError, match="truncated"):
        load(_Unseekable(build_file(header, b"\x00" * 8)))


def _edit_header(data, edit, *, checksum=True):
    header, payload = split_file(data)
    edit(header)
    return build_file(header, payload, checksum=checksum)


def test_checksum_and_version_checks():
    data = saved_bytes(small_state())

    def change_shape(h):
        h["weight"]["dtype"] = "I32"  # same size: only the checksum notices

    _assert_rejected(_edit_header(data, change_shape, checksum=False), "checksum mismatch")
    assert load_bytes(_edit_header(data, change_shape))["step"] == 7  # with a fresh checksum, it loads

    def drop_checksum(h):
        del h["__metadata__"]["ember.header_sha256"]

    _assert_rejected(_edit_header(data, drop_checksum, checksum=False), "lacks 'ember.header_sha256'")

    def drop_structure(h):
        del h["__metadata__"]["ember.structure"]

    _assert_rejected(_edit_header(data, drop_structure, checksum=False), "lacks 'ember.structure'")

    def future_version(h):
        h["__metadata__"]["ember.format_version"] = "2"

    _assert_rejected(_edit_header(data, future_version), "unsupported ember format version '2'")

    def bad_structure_json(h):
        h["__metadata__"]["ember.structure"] = "{not json"

    _assert_rejected(_edit_header(data, bad_structure_json), "structure in the metadata is not valid JSON")


def _set(path, value):
    def edit(structure):
        node = structure
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


def _root(value):
    return _set(["root"], value)


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (
            _set(["tensors", 0, "storage"], "nonexistent"),
            "refers to storage 'nonexistent', which the file does not contain",
        ),
        (_set(["tensors", 0, "storage"], 3), "which the file does not contain"),
        (_set(["tensors", 0, "dtype"], "float128"), "unknown dtype 'float128'"),
        (_set(["tensors", 0, "shape"], [4, 6, 1]), "lengths differ"),
        (_set(["tensors", 0, "shape"], [5, 6]), "reaches byte 120 of its 96-byte storage"),
        (_set(["tensors", 0, "stride"], [6, -1]), "integers in"),
        (_set(["tensors", 0, "stride"], [2**62, 1]), "reaches byte"),
        (_set(["tensors", 0, "shape"], [2**62, 2**62]), "reaches byte"),
        (_set(["tensors", 0, "storage_offset"], 1), "reaches byte 100"),
        (_set(["tensors", 0, "storage_offset"], -1), "storage_offset -1"),
        (_set(["tensors", 0, "storage_offset"], 1.0), "storage_offset 1.0"),
        (_set(["tensors", 0, "requires_grad"], "yes"), "expected true or false"),
        (_set(["tensors", 0, "extra"], 1), "exactly the fields"),
        (_set(["tensors", 0], [1, 2]), "exactly the fields"),
        (_set(["tensors"], {}), "'tensors' must be a list"),
        (_set(["storages", "ghost"], {"device": "cpu", "nbytes": 0}), "missing from the header: \\['ghost'\\]"),
        (_set(["storages", "weight", "nbytes"], 95), "claims 95 bytes"),
        (_set(["storages", "weight", "device"], 0), "device that is not a string"),
        (_set(["storages", "weight", "device"], "npu:0"), "saved on 'npu:0'"),
        (_set(["storages", "weight", "device"], "cpu:x"), "saved on 'cpu:x'"),
        (_set(["storages"], []), "'storages' must be an object"),
        (_set(["extra"], 1), "exactly the fields storages, tensors and root"),
        (_root({"t": "tensor", "i": 99}), "tensor index 99 out of range"),
        (_root({"t": "tensor", "i": -1}), "out of range"),
        (_root({"t": "tensor", "i": True}), "out of range"),
        (_root({"t": "tensor"}), "exactly the fields t, i"),
        (_root({"t": "pickle", "v": "cos\nsystem"}), "unknown tag 'pickle'"),
        (_root({"t": "__init__"}), "unknown tag"),
        (_root({"no_tag": 1}), "tagged with 't'"),
        (_root({"t": "dict", "items": [[[1], 2]]}), "unhashable"),
        (_root({"t": "dict", "items": [["a", 1], ["a", 2]]}), "repeated"),
        (_root({"t": "dict", "items": [["a"]]}), r"\[key, value\] pair"),
        (_root({"t": "dict", "items": [[{"t": "tensor", "i": 0}, 1]]}), "not a valid key"),
        (_root({"t": "odict", "items": {}}), "'items' must be a list"),
        (_root({"t": "tuple", "v": "abc"}), "must be a list"),
        (_root({"t": "size", "v": [-1]}), "non-negative integers"),
        (_root({"t": "float", "v": "1e5"}), "not one of"),
        (_root({"t": "complex", "re": "1", "im": 0}), "must be numbers"),
        (_root({"t": "dtype", "v": "object"}), "unknown dtype 'object'"),
        (_root({"t": "device", "v": "nowhere:0"}), "invalid device"),
        (_root({"t": "device", "v": 5}), "must be a string"),
        (_root([[[[[[[[[[{"t": "bad"}]]]]]]]]]]), r"root\[0\]\[0\]\[0\]"),
    ],
)
def test_hostile_structures(edit, fragment):
    data = edit_structure(saved_bytes(small_state()), edit)
    _assert_rejected(data, fragment)


def test_header_entry_not_in_structure():
    data = saved_bytes({"x": ember.ones(2)})
    header, payload = split_file(data)
    header["stray"] = _entry(dtype="U8", shape=(1,), offsets=(len(payload), len(payload) + 1))
    _assert_rejected(build_file(header, payload + b"\x00"), r"not described by the structure: \['stray'\]")


def test_requires_grad_on_integer_tensor_is_rejected():
    data = edit_structure(
        saved_bytes({"i": ember.ones(2, dtype=ember.int32)}), _set(["tensors", 0, "requires_grad"], True)
    )
    _assert_rejected(data, "requires grad but has dtype int32")


def test_empty_tensor_offset_past_end_is_rejected():
    data = edit_structure(saved_bytes({"e": ember.ones(4)[4:]}), _set(["tensors", 0, "storage_offset"], 5))
    _assert_rejected(data, "past the end")


def test_deeply_nested_structure_is_rejected_cleanly():
    def deep(structure):
        node = 0
        for _ in range(100_000):
            node = [node]
        structure["root"] = node

    # json.dumps itself would recurse too deeply here, so build the text by hand.
    data = saved_bytes({"x": ember.ones(1)})
    header, payload = split_file(data)
    structure = json.loads(header["__metadata__"]["ember.structure"])
    structure["root"] = "@@ROOT@@"
    text = json.dumps(structure).replace('"@@ROOT@@"', "[" * 100_000 + "0" + "]" * 100_000)
    header["__metadata__"]["ember.structure"] = text
    _assert_rejected(build_file(header, payload), "nested too deeply|not valid JSON")


# ---------------------------------------------------------------------------
# documentation


def test_module_docstring_examples(monkeypatch):
    monkeypatch.setattr(ember, "save", save, raising=False)
    monkeypatch.setattr(ember, "load", load, raising=False)
    failures, tried = doctest.testmod(serialization, optionflags=doctest.ELLIPSIS)
    assert tried > 0
    assert failures == 0


def test_public_names():
    assert set(serialization.__all__) == {"save", "load", "SerializationError"}
    assert issubclass(SerializationError, RuntimeError)
    assert Path(serialization.__file__).name == "serialization.py"


# -- register_serializable_type: the extension hook -------------------------------------------------------


class _Affine:
    """A toy type saved through the hook: y = weight * x + bias."""

    def __init__(self, weight, bias, label):
        self.weight, self.bias, self.label = weight, bias, label


class _AffineChild(_Affine):
    pass


@pytest.fixture
def affine_registered():
    def decode(value):
        if set(value) != {"w", "b", "label"}:
            raise ValueError(f"fields {sorted(value)}")
        return _Affine(value["w"], value["b"], value["label"])

    serialization.register_serializable_type(
        _Affine, "tests.Affine", lambda a: {"w": a.weight, "b": a.bias, "label": a.label}, decode
    )
    yield
    del serialization._EXTENSIONS_BY_TYPE[_Affine]
    del serialization._EXTENSIONS_BY_NAME["tests.Affine"]


def test_extension_type_round_trip(affine_registered, tmp_path):
    weight = ember.arange(6, dtype=ember.float32).reshape(2, 3)
    obj = {"a": _Affine(weight, 1.5, "first"), "b": [_AffineChild(weight.t(), -2.0, "child")]}
    save(obj, tmp_path / "x.safetensors")
    loaded = load(tmp_path / "x.safetensors")
    a, b = loaded["a"], loaded["b"][0]
    assert type(a) is _Affine and type(b) is _Affine  # a subclass is saved as the registered type
    assert a.label == "first" and a.bias == 1.5 and b.bias == -2.0
    assert a.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert b.weight.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert a.weight.untyped_storage() is b.weight.untyped_storage()  # views still share one storage
    structure = json.loads(_read_header(tmp_path / "x.safetensors")["__metadata__"]["ember.structure"])
    assert structure["root"]["items"][0][1]["t"] == "ext"
    assert structure["root"]["items"][0][1]["type"] == "tests.Affine"


def test_extension_type_errors(affine_registered, tmp_path):
    with pytest.raises(ValueError, match="'tests.Affine' is already registered"):
        serialization.register_serializable_type(int, "tests.Affine", str, str)
    with pytest.raises(ValueError, match="is already registered"):
        serialization.register_serializable_type(_Affine, "tests.Other", str, str)
    with pytest.raises(TypeError, match="cls must be a type"):
        serialization.register_serializable_type("x", "tests.X", str, str)
    with pytest.raises(TypeError, match="must be callable"):
        serialization.register_serializable_type(float, "tests.F", 1, str)
    path = tmp_path / "x.safetensors"
    save(_Affine(ember.ones(2), 0.0, "x"), path)
    # a decoder that rejects the value: reported as a SerializationError naming the type
    _rewrite_structure(path, lambda s: s["root"]["v"]["items"].pop())
    with pytest.raises(SerializationError, match=r"cannot rebuild a tests.Affine: fields \['b', 'w'\]"):
        load(path)
    # a type name nobody registered: refused, nothing is imported
    save(_Affine(ember.ones(2), 0.0, "x"), path)
    _rewrite_structure(path, lambda s: s["root"].update(type="os.system"))
    with pytest.raises(SerializationError, match="unknown extension type 'os.system'"):
        load(path)


def _read_header(path):
    data = Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])


def _rewrite_structure(path, edit):
    """Edit the structure of the file at ``path`` and fix its checksum, as a forger would."""
    data = Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    structure = json.loads(header["__metadata__"]["ember.structure"])
    edit(structure)
    header["__metadata__"]["ember.structure"] = json.dumps(structure)
    header["__metadata__"]["ember.header_sha256"] = serialization._header_checksum(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n :])


def test_map_location_callables_of_pytorchs_two_argument_form(tmp_path):
    # torch.load(path, map_location=lambda storage, loc: storage): the common idiom of ported code
    path = tmp_path / "w.ember"
    ember.save({"w": ember.arange(3.0)}, path)
    for fn in (lambda storage, loc: storage, lambda s, loc: s.cpu(), lambda s, loc: s.to("cpu")):
        loaded = ember.load(path, map_location=fn)
        assert loaded["w"].device == ember.device("cpu") and loaded["w"].tolist() == [0.0, 1.0, 2.0]
    seen = []
    ember.load(path, map_location=lambda storage, loc: seen.append((storage.device, loc)))  # None keeps the device
    assert seen == [(ember.device("cpu"), "cpu")]
    assert ember.load(path, map_location=lambda s, loc: s.to("meta"))["w"].device == ember.device("meta")
    with pytest.raises(TypeError, match="must return the storage"):
        ember.load(path, map_location=lambda s, loc: 3)
    assert ember.load(path, map_location=lambda loc: "cpu")["w"].tolist() == [0.0, 1.0, 2.0]  # ember's one-argument form


@pytest.mark.parametrize(
    "start",
    [b"PK\x03\x04\x14\x00\x00\x00", b"\x80\x02\x8a\nl\xfc\x9cF"],  # torch.save's zip archive; its legacy pickle
    ids=["zip", "pickle"],
)
def test_a_pytorch_checkpoint_is_named_with_how_to_convert_it(tmp_path, start):
    path = tmp_path / "model.pt"
    path.write_bytes(start + bytes(200))
    with pytest.raises(ember.SerializationError, match="PyTorch checkpoint .* safetensors.torch.save_file"):
        ember.load(path)
