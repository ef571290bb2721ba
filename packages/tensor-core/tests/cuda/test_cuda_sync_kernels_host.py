"""Host side of the kernels that keep a training step on the GPU (``ember.cuda.kernels.multi_tensor``'s
``clip_grad_norm_`` and ``ember.cuda.kernels.embedding``), without a GPU (these tests run on every machine).

CuPy is replaced by a stand-in whose arrays are numpy arrays (a device address is the numpy data address) and
whose kernels run in numpy what the CUDA source computes, from the arguments the launch passes (the by-value
pointer tables included), so the tables, the launch split over many tensors, the chunking and the results
are checked against numpy. The CUDA source itself is compiled and run by the cuda tests
(``test_cuda_sync_gpu.py``).
"""

from __future__ import annotations

import contextlib
import re

import numpy as np
import pytest

from ember.cuda import _async_errors
from ember.cuda.kernels import embedding, multi_tensor

_MEMORY = {}  # address -> the numpy array starting there


class FakeArray:
    """What the kernels' host code reads of a CuPy array, over a numpy array."""

    def __init__(self, host):
        self.host = host
        _MEMORY[host.ctypes.data] = host

    dtype = property(lambda self: self.host.dtype)
    shape = property(lambda self: self.host.shape)
    size = property(lambda self: self.host.size)
    ndim = property(lambda self: self.host.ndim)
    flags = property(lambda self: self.host.flags)
    _c_contiguous = property(lambda self: self.host.flags.c_contiguous)

    @property
    def data(self):
        return type("Pointer", (), {"ptr": self.host.ctypes.data, "device_id": 0})()

    def fill(self, value):
        self.host.fill(value)

    def get(self):
        return self.host.copy()

    def __getitem__(self, key):
        return FakeArray(self.host[key])


def _array(address, dtype, count):
    base = _MEMORY[int(address)]
    return base.reshape(-1).view(dtype)[:count]


def _table(table, n):
    words = table.view(np.uint64)
    return [int(w) for w in words[:n]], [int(w) for w in words[n:2 * n + 1]]


class FakeFunction:
    """One kernel of the CUDA source, computed in numpy from the launch's arguments."""

    def __init__(self, name, defines, launches):
        self.name, self.defines, self.launches = name, defines, launches
        self.dtype = {"float": np.float32, "double": np.float64}.get(defines.get("T"))

    def __call__(self, grid, block, args):
        self.launches.append(self.name)
        getattr(self, self.name)(grid, block, *args)

    def ember_sumsq(self, grid, block, table, n, total, partials, base):
        n, total, base = int(n), int(total), int(base)
        chunk = int(self.defines["CHUNK"])
        assert table.itemsize == 8 * (2 * int(self.defines["MAX_TENSORS"]) + 1) and table.size == 1
        pointers, offsets = _table(table, n)
        assert offsets[0] == 0 and offsets[-1] == total and grid == ((total + chunk - 1) // chunk,)
        flat = np.concatenate([_array(p, self.dtype, offsets[k + 1] - offsets[k]) for k, p in enumerate(pointers)])
        for b in range(grid[0]):
            values = flat[b * chunk:(b + 1) * chunk].astype(np.float64)
            partials.host[base + b] = (values * values).sum()

    def ember_clip_coef(self, grid, block, partials, count, max_norm, norm, coef):
        t = self.dtype
        total = t(np.sqrt(partials.host[: int(count)].sum()))
        norm.host[...] = total
        coef.host[...] = min(t(max_norm) / (total + t(1e-6)), t(1))

    def ember_scale(self, grid, block, table, n, total, coef):
        pointers, offsets = _table(table, int(n))
        for k, p in enumerate(pointers):
            g = _array(p, self.dtype, offsets[k + 1] - offsets[k])
            g *= coef.host[()]

    def ember_embedding_forward(self, grid, block, weight, index, out, n, width, rows, bad):
        idx = index.host.reshape(-1).astype(np.int64)
        ok = (idx >= 0) & (idx < int(rows))
        out.host.reshape(-1, int(width))[...] = np.where(ok[:, None], weight.host[np.where(ok, idx, 0)], 0)
        if not ok.all():
            bad.host[0] = 1

    def ember_embedding_backward(self, grid, block, grad, index, out, n, width, rows, padding):
        idx = index.host.reshape(-1).astype(np.int64)
        keep = (idx >= 0) & (idx < int(rows)) & (idx != int(padding))
        np.add.at(out.host, idx[keep], grad.host.reshape(-1, int(width))[keep])


class FakeCupy:
    """The parts of ``cupy`` these modules call."""

    def __init__(self):
        self.launches = []
        runtime = type("Runtime", (), {"getDevice": staticmethod(lambda: 0)})
        self.cuda = type("Cuda", (), {"runtime": runtime, "Device": staticmethod(lambda i=0: contextlib.nullcontext())})

    def _defines(self, code):
        return dict(re.findall(r"#define (\w+) (.+)", code))

    def RawModule(self, code):  # noqa: N802 - CuPy's name
        defines = self._defines(code)
        return type("Module", (), {"get_function": lambda _, name: FakeFunction(name, defines, self.launches)})()

    def RawKernel(self, code, name):  # noqa: N802 - CuPy's name
        return FakeFunction(name, self._defines(code), self.launches)

    def ndarray(self, shape, dtype):
        return FakeArray(np.full(shape, np.nan if np.dtype(dtype).kind == "f" else 7, dtype))

    def zeros(self, shape, dtype):
        return FakeArray(np.zeros(shape, dtype))

    def ascontiguousarray(self, a):
        return FakeArray(np.ascontiguousarray(a.host))


@pytest.fixture
def cupy(monkeypatch):
    fake = FakeCupy()
    for module in (multi_tensor, embedding):
        monkeypatch.setattr(module, "cupy_module", lambda: fake)
    monkeypatch.setattr(multi_tensor, "_modules", {})
    monkeypatch.setattr(embedding, "_kernels", {})
    monkeypatch.setattr(embedding, "_flags", {})
    monkeypatch.setattr(_async_errors, "_pending", {})
    yield fake
    _MEMORY.clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("count, max_norm", [(3, 1.0), (3, 1e9), (205, 1.0)])  # 205: two launches of each kernel
def test_clip_grad_norm_kernels_match_numpy(cupy, dtype, count, max_norm):
    rng = np.random.default_rng(count)
    sizes = rng.integers(0, 40000, size=count) if count > 3 else [40000, 1, 17000]
    hosts = [rng.standard_normal(int(s)).astype(dtype) for s in sizes]
    expected_norm = np.sqrt(sum((h.astype(np.float64) ** 2).sum() for h in hosts))
    originals = [h.copy() for h in hosts]
    arrays = [FakeArray(h) for h in hosts]
    assert multi_tensor.supported(arrays)
    norm = multi_tensor.clip_grad_norm_(arrays, max_norm)
    np.testing.assert_allclose(norm.host, expected_norm, rtol=1e-6)
    assert norm.dtype == dtype
    coef = min(max_norm / (expected_norm + 1e-6), 1.0)
    for h, o in zip(hosts, originals):
        np.testing.assert_allclose(h, o * coef, rtol=1e-6)
    launches = 2 if count > multi_tensor._MAX_TENSORS else 1
    assert cupy.launches == ["ember_sumsq"] * launches + ["ember_clip_coef"] + ["ember_scale"] * launches


def test_clip_grad_norm_of_empty_gradients_is_zero(cupy):
    arrays = [FakeArray(np.zeros(0, np.float32))]
    norm = multi_tensor.clip_grad_norm_(arrays, 1.0)
    assert norm.host == 0


def test_clip_grad_norm_takes_only_one_float_dtype_contiguous():
    a = FakeArray(np.ones(4, np.float32))
    assert not multi_tensor.supported([])
    assert not multi_tensor.supported([a, FakeArray(np.ones(4, np.float64))])
    assert not multi_tensor.supported([FakeArray(np.ones(4, np.float16))])
    assert not multi_tensor.supported([FakeArray(np.ones((4, 4), np.float32)[:, ::2])])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint8])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_embedding_forward_matches_take(cupy, dtype, index_dtype):
    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((9, 5)) * 10).astype(dtype)
    index = rng.integers(0, 9, size=(3, 4)).astype(index_dtype)
    out = embedding.forward(FakeArray(weight), FakeArray(index))
    np.testing.assert_array_equal(out.host, weight[index])
    _async_errors.raise_pending()  # nothing out of range


def test_embedding_forward_reports_a_bad_index_at_the_next_synchronizing_call(cupy):
    weight = FakeArray(np.ones((4, 2), np.float32))
    out = embedding.forward(weight, FakeArray(np.array([0, 4])))  # no error yet
    np.testing.assert_array_equal(out.host, [[1, 1], [0, 0]])
    embedding.forward(weight, FakeArray(np.array([1])))  # a later good call keeps the flag
    with pytest.raises(IndexError, match="index out of range in self"):
        _async_errors.raise_pending()
    embedding.forward(weight, FakeArray(np.array([3])))
    _async_errors.raise_pending()  # the flag was reset


def test_embedding_forward_leaves_other_layouts_to_the_generic_path(cupy):
    weight = np.ones((4, 6), np.float32)
    assert embedding.forward(FakeArray(weight[:, ::2]), FakeArray(np.array([0]))) is None
    assert embedding.forward(FakeArray(weight), FakeArray(np.array([0], np.int16))) is None
    assert embedding.forward(FakeArray(np.ones((4, 2), np.complex128)), FakeArray(np.array([0]))) is None


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_weight_grad_matches_index_add(cupy, padding_idx):
    rng = np.random.default_rng(1)
    index = rng.integers(0, 5, size=(4, 3))
    grad = rng.standard_normal((4, 3, 6))
    out = embedding.weight_grad(FakeArray(grad), FakeArray(index), 5, padding_idx)
    expected = np.zeros((5, 6))
    np.add.at(expected, index.reshape(-1), grad.reshape(-1, 6))
    if padding_idx is not None:
        expected[padding_idx] = 0
    np.testing.assert_allclose(out.host, expected, rtol=1e-12)
    assert embedding.weight_grad(FakeArray(grad.astype(np.float16)), FakeArray(index), 5, None) is None


# -- checks recorded into a CUDA graph (numpy arrays stand in for the device words) --------------------------


def test_recorded_check_raises_at_the_next_sync_after_a_failing_replay():
    assert _async_errors.record_check(np.array(True), lambda: IndexError("never")) is False  # no recording open
    with _async_errors.recording_checks() as checks:
        flag = np.array(False)
        assert _async_errors.record_check(flag, lambda: IndexError("index 20 out of range")) is True
    (check,) = checks
    check.clear()  # the runner zeroes the word after the capture
    for replay_flag, raises in ((False, False), (True, True), (False, False)):
        np.logical_or(check.word, np.array(replay_flag), out=check.word)  # what a replay's recorded kernel does
        check.arm()
        if raises:
            with pytest.raises(IndexError, match="index 20 out of range"):
                _async_errors.raise_pending()
            assert not bool(check.word)  # read and reset: the next clean replay raises nothing
        else:
            _async_errors.raise_pending()


def test_nested_recordings_collect_their_own_checks():
    with _async_errors.recording_checks() as outer:
        with _async_errors.recording_checks() as inner:
            _async_errors.record_check(np.array(False), IndexError)
        _async_errors.record_check(np.array(False), IndexError)
    assert len(inner) == 1 and len(outer) == 1
