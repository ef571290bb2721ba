"""Fast CUDA kernels compiled for the CPU, without a GPU: the pointwise kernels (``ember.cuda.kernels.pointwise``)
and the fused list op of ``_foreach_add_``/``_foreach_sub_`` (``ember.cuda.kernels.foreach_kernels``).

The generated CUDA C is compiled by g++ behind a few definitions of CUDA's built-ins (``threadIdx``,
``__int_as_float``, ``__align__``) and launched block by block, thread by thread, from the same arguments the
fast functions pass to ``cupy.RawModule``; arrays are numpy arrays standing in for CuPy's (``.data.ptr`` is
the host address). Results are compared with numpy's, bit for bit: the packed kernel, its tail, the
one-element kernel for misaligned pointers, and an operand repeated along the other (``x + bias`` over
leading dims); the list op's kernel, given its by-value table of pointers, against the per-tensor ops. The cuda
tests (``test_cuda_fast_kernels.py``) run the same kernels on the GPU.
"""

from __future__ import annotations

import ctypes
import shutil
import types

import numpy as np
import pytest
from _host_module import HostModule

import ember
from ember._dtype import bfloat16
from ember._tensor import Tensor

BF16 = bfloat16.numpy_dtype

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile the CUDA C for the CPU")

_SHIM = r"""
#include <cmath>
#include <cstring>
#include <cstdint>
struct ember_dim3 { unsigned x, y, z; };
static ember_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __align__(n) alignas(n)
static inline float __int_as_float(int bits) { float f; std::memcpy(&f, &bits, 4); return f; }
static inline double __longlong_as_double(long long bits) { double d; std::memcpy(&d, &bits, 8); return d; }
static inline float __uint_as_float(unsigned bits) { float f; std::memcpy(&f, &bits, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned bits; std::memcpy(&bits, &f, 4); return bits; }
"""

class _Pointer:
    def __init__(self, ptr):
        self.ptr, self.device_id = ptr, 0


class HostArray(np.ndarray):
    """A numpy array with the two attributes of a CuPy array the fast functions read."""

    @property
    def data(self):
        return _Pointer(self.ctypes.data)

    @property
    def _c_contiguous(self):
        return self.flags.c_contiguous


class _Device:
    def __init__(self, index):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _fake_cupy(directory):
    runtime = types.SimpleNamespace(getDevice=lambda: 0)
    cuda = types.SimpleNamespace(runtime=runtime, Device=_Device)
    return types.SimpleNamespace(RawModule=lambda code, options=(): HostModule(code, options, directory, _SHIM, "pointwise"), cuda=cuda)


@pytest.fixture
def pointwise(monkeypatch, tmp_path_factory):
    from ember.cuda.kernels import pointwise

    directory = tmp_path_factory.mktemp("pointwise_kernels")
    monkeypatch.setattr(pointwise, "_cp", _fake_cupy(directory))
    monkeypatch.setattr(pointwise, "_ndarray", HostArray)
    monkeypatch.setattr(pointwise, "_usable", lambda a: a._c_contiguous)
    monkeypatch.setattr(pointwise, "compiled", {})
    monkeypatch.setattr(pointwise, "THREADS", 32)  # fewer emulated threads per block
    monkeypatch.setattr(pointwise, "_BF16", BF16)  # (register() sets it on the GPU)
    monkeypatch.setitem(pointwise._CTYPE, BF16, "bf16")
    return pointwise


def _tensor(values, offset=0):
    """A plain tensor over a HostArray holding ``values``; ``offset`` elements into a larger buffer (a pointer
    off the 16-byte packs, for the one-element kernel)."""
    values = np.asarray(values)
    buffer = np.empty(values.size + offset, values.dtype).view(HostArray)
    array = buffer[offset:].reshape(values.shape)
    array[...] = values
    return Tensor._make(array, ember.device("cpu"))


def _bits_equal(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind == "f":
        width = np.uint32 if got.dtype == np.float32 else np.uint64
        nan = np.isnan(expected)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(np.asarray(got)[~nan].view(width), expected[~nan].view(width))
    else:
        np.testing.assert_array_equal(np.asarray(got), expected)


_NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "gt": np.greater,
          "le": np.less_equal}

# (shape of the first operand, shape of the second): one repeated along the other, or equal shapes
_SHAPES = [
    ((3, 16, 32), (16, 32)),  # x + positions
    ((3, 2, 16, 16), (16, 16)),  # scores + causal bias
    ((16, 32), (3, 16, 32)),  # the repeated operand first
    ((4, 5, 7), (1, 7)),  # a leading 1, and a repeat that is not a whole number of packs
    ((4, 5, 7), ()),  # a zero-dim tensor
    ((5, 3), (5, 3)),  # equal shapes
    ((1027,), (1027,)),  # the packed kernel's tail
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(_NUMPY))
def test_binary_kernels_match_numpy(pointwise, name, dtype):
    rng = np.random.default_rng(0)
    for shape_a, shape_b in _SHAPES:
        a = (rng.standard_normal(shape_a) * 3).astype(dtype)
        b = (rng.standard_normal(shape_b) * 3).astype(dtype)
        if a.size:
            a.reshape(-1)[:4] = [0.0, -0.0, np.inf, np.nan][: a.size]
        with np.errstate(all="ignore"):
            expected = _NUMPY[name](a, b)
        for offset in (0, 1):  # aligned (packed kernel) and misaligned (one element per thread)
            got = pointwise.FAST_OPS[name](_tensor(a, offset), _tensor(b, offset))
            assert got is not None, (name, shape_a, shape_b)
            _bits_equal(got, expected)


def _bf16_values(rng, shape):
    """bfloat16 values with zeros of both signs, infinities and a NaN first."""
    x = (rng.standard_normal(shape) * 3).astype(BF16)
    if x.size:
        x.reshape(-1)[:4] = np.array([0.0, -0.0, np.inf, np.nan][: x.size], np.float32).astype(BF16)
    return x


def _ulps_apart(got, expected):
    """|got - expected| in units of bfloat16's last place (NaNs must match; equal infinities are 0 apart)."""
    got, expected = np.asarray(got).astype(np.float32), np.asarray(expected).astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    same = (got == expected) | nan
    with np.errstate(invalid="ignore"):  # (infinities and NaNs give NaN here, which `same` covers)
        ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
        return np.where(same, 0.0, np.abs(got - expected) / np.where(np.isfinite(ulp), ulp, np.inf))


@pytest.mark.parametrize("name", sorted(_NUMPY))
def test_bfloat16_binary_kernels_round_the_float32_result_once(pointwise, name):
    """bfloat16 operands are widened to float32, combined, and rounded once: numpy's float32 result rounded to
    bfloat16, bit for bit (comparisons: numpy's on the float32 values)."""
    rng = np.random.default_rng(1)
    for shape_a, shape_b in _SHAPES:
        a, b = _bf16_values(rng, shape_a), _bf16_values(rng, shape_b)
        with np.errstate(all="ignore"):
            wide = _NUMPY[name](a.astype(np.float32), b.astype(np.float32))
        expected = wide if wide.dtype == np.bool_ else wide.astype(BF16)
        for offset in (0, 1):
            got = pointwise.FAST_OPS[name](_tensor(a, offset), _tensor(b, offset))
            assert got is not None and got.dtype == expected.dtype, (name, shape_a, shape_b)
            if expected.dtype == np.bool_:
                np.testing.assert_array_equal(np.asarray(got), expected)
            else:
                nan = np.isnan(expected.astype(np.float32))
                np.testing.assert_array_equal(np.isnan(np.asarray(got).astype(np.float32)), nan)
                np.testing.assert_array_equal(np.asarray(got).view(np.uint16)[~nan], expected.view(np.uint16)[~nan])


_UNARY_F32 = {
    "exp": np.exp, "tanh": np.tanh, "neg": np.negative, "relu": lambda x: np.maximum(x, np.float32(0)),
    "sigmoid": lambda x: np.float32(1) / (np.exp(-x) + np.float32(1)),
}


@pytest.mark.parametrize("name", sorted(_UNARY_F32))
def test_bfloat16_unary_kernels_within_one_ulp_of_float32_rounded(pointwise, name):
    """The activations on bfloat16, computed in float32 (the host's libm may differ from numpy's in float32's last
    bit, which can move the rounded bfloat16 result by one place) and rounded once."""
    rng = np.random.default_rng(2)
    x = _bf16_values(rng, (1027,))
    with np.errstate(all="ignore"):
        expected = _UNARY_F32[name](x.astype(np.float32)).astype(BF16)
    for offset in (0, 1):
        got = pointwise.FAST_OPS[name](_tensor(x, offset))
        assert got is not None and got.dtype == BF16
        assert _ulps_apart(got, expected).max() <= 1


def test_bfloat16_scalar_operand_stays_float32(pointwise):
    """``x + 0.1`` on bfloat16 adds the float32 nearest 0.1 (not 0.1 rounded to bfloat16), then rounds once."""
    x = np.array([1.0, 2.5, -3.0, 100.0], np.float32).astype(BF16)
    got = pointwise.FAST_OPS["add"](_tensor(x), 0.1)
    expected = (x.astype(np.float32) + np.float32(0.1)).astype(BF16)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), expected.view(np.uint16))


def test_shapes_that_do_not_repeat_are_declined(pointwise):
    """Broadcasting in both operands, or over trailing dims, is the generic path's (None here)."""
    add = pointwise.FAST_OPS["add"]
    f32 = np.float32
    for shape_a, shape_b in [((3, 1), (3,)), ((3, 4), (3, 1)), ((16, 1), (3, 16, 32)), ((2, 3), (4, 3))]:
        assert add(_tensor(np.ones(shape_a, f32)), _tensor(np.ones(shape_b, f32))) is None, (shape_a, shape_b)
    # another dtype, a bool mask with a repeated shape
    assert add(_tensor(np.ones((3, 4), f32)), _tensor(np.ones(4, np.float64))) is None
    assert pointwise.FAST_OPS["mul"](_tensor(np.ones((3, 4), f32)), _tensor(np.ones(4, bool))) is None


def test_repeated_operand_layouts_compiled_once(pointwise):
    a = _tensor(np.ones((3, 16, 32), np.float32))
    b = _tensor(np.ones((16, 32), np.float32))
    for _ in range(3):
        pointwise.FAST_OPS["add"](a, b)
        pointwise.FAST_OPS["add"](b, a)
    assert sorted(layout for (kind, _, layout) in pointwise.compiled if kind == "add") == ["ab", "ba"]


@pytest.fixture
def foreach_kernels(monkeypatch, tmp_path_factory):
    from ember.cuda.kernels import foreach_kernels

    directory = tmp_path_factory.mktemp("foreach_kernels")
    monkeypatch.setattr(foreach_kernels, "cupy_module", lambda: _fake_cupy(directory))
    monkeypatch.setattr(foreach_kernels, "_functions", {})
    monkeypatch.setattr(foreach_kernels, "_CHUNK", 64)  # several blocks and tensors split across them
    monkeypatch.setattr(foreach_kernels, "_THREADS", 8)
    return foreach_kernels


def _pair_lists(dtype, shapes, seed):
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal(s) * 3).astype(dtype) for s in shapes]
    ys = [(rng.standard_normal(s) * 3).astype(dtype) for s in shapes]
    xs[0].reshape(-1)[:3] = [np.inf, -0.0, np.nan]
    return xs, ys


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["add", "sub"])
@pytest.mark.parametrize("alpha", [1, -1e-3, 0.3, 2])
def test_foreach_kernel_matches_the_per_tensor_ops(foreach_kernels, monkeypatch, name, alpha, dtype):
    # 7 tensors (one empty, one of a single element) over blocks of 64 elements, and 3 tensors per launch
    monkeypatch.setattr(foreach_kernels, "_MAX_TENSORS", 3)
    monkeypatch.setattr(foreach_kernels, "_TABLE_WORDS", 3 * 3 + 1)
    monkeypatch.setattr(foreach_kernels, "_TABLE_DTYPE", np.dtype((np.void, 8 * 10)))
    shapes = [(5, 40), (0,), (130,), (1,), (3, 3, 3), (64,), (2, 65)]
    xs, ys = _pair_lists(dtype, shapes, 0)
    with np.errstate(all="ignore"):
        scaled = [y * dtype(alpha) for y in ys] if not (type(alpha) is int and alpha == 1) else ys
        expected = [x + s if name == "add" else x - s for x, s in zip(xs, scaled)]
    tensors = [_tensor(x) for x in xs]
    others = [_tensor(y) for y in ys]
    assert foreach_kernels.add_(name, tensors, others, alpha) is True
    for t, want in zip(tensors, expected):
        _bits_equal(np.asarray(t._data), want)


@pytest.mark.parametrize("name", ["add", "sub"])
@pytest.mark.parametrize("alpha", [1, -1e-3, 0.3])
def test_foreach_kernel_on_bfloat16_rounds_the_float32_result_once(foreach_kernels, name, alpha):
    """bfloat16 parameters: ``x + y * alpha`` in float32 (alpha a float32, not rounded to bfloat16), rounded once."""
    shapes = [(5, 40), (0,), (130,), (1,), (2, 65)]
    xs, ys = _pair_lists(np.float32, shapes, 1)
    xs, ys = [x.astype(BF16) for x in xs], [y.astype(BF16) for y in ys]
    with np.errstate(all="ignore"):
        wide = [y.astype(np.float32) * (np.float32(alpha) if alpha != 1 else np.float32(1)) for y in ys]
        expected = [(x.astype(np.float32) + w if name == "add" else x.astype(np.float32) - w).astype(BF16)
                    for x, w in zip(xs, wide)]
    tensors = [_tensor(x) for x in xs]
    assert foreach_kernels.add_(name, tensors, [_tensor(y) for y in ys], alpha) is True
    for t, want in zip(tensors, expected):
        got = np.asarray(t._data)
        nan = np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
        np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def test_foreach_kernel_declines_what_it_does_not_take(foreach_kernels):
    f32 = np.float32
    a, b = _tensor(np.ones((2, 3), f32)), _tensor(np.ones((2, 3), f32))
    assert foreach_kernels.add_("add", [a], [_tensor(np.ones(6, f32))], 1) is False  # another shape
    assert foreach_kernels.add_("add", [a], [_tensor(np.ones((2, 3), np.float64))], 1) is False  # another dtype
    transposed = Tensor._make(np.ones((3, 2), f32).view(HostArray).T, ember.device("cpu"))
    assert foreach_kernels.add_("add", [a], [transposed], 1) is False  # not contiguous
    assert foreach_kernels.add_("add", [_tensor(np.ones(3, np.int32))], [_tensor(np.ones(3, np.int32))], 1) is False
    assert foreach_kernels.add_("add", [a], [b], 2**30) is False  # an int alpha the per-tensor kernel rounds otherwise
    assert foreach_kernels.add_("add", [a], [b], True) is False
    np.testing.assert_array_equal(np.asarray(a._data), np.ones((2, 3), f32))  # nothing written


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_kernel_follows_the_formula(pointwise, approximate, dtype):
    """The fused gelu gradient against ember-autograd's formula on the CPU (the same ops in the same order; the
    host's erf/exp/tanh may differ from numpy's and scipy's in the last bit, so within a few ulp here; the cuda
    tests compare bits with the formula's ops on the GPU)."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(1031) * 3).astype(dtype)
    x[:6] = [0.0, -0.0, 10.0, -10.0, 1e-3, -5.5]
    g = rng.standard_normal(1031).astype(dtype)
    xt = ember.tensor(x, requires_grad=True)
    (want,) = ember.autograd.grad(ember.nn.functional.gelu(xt, approximate=approximate), xt, ember.tensor(g))
    for offset in (0, 1):
        got = pointwise.gelu_backward(_tensor(g, offset), _tensor(x, offset), approximate)
        assert got is not None and got.dtype == want.dtype
        # cdf + x * pdf cancels where the gradient crosses 0: a few ulp of its terms' size, not of the result's
        scale = np.abs(g).astype(np.float64) * (1 + np.abs(x))
        error = np.abs(np.asarray(got._data, np.float64) - want.numpy().astype(np.float64))
        assert np.all(error <= 4 * np.finfo(dtype).eps * scale), np.max(error / scale)
    assert pointwise.gelu_backward(_tensor(g), _tensor(x), "other") is None
    assert pointwise.gelu_backward(_tensor(g[:5]), _tensor(x), "none") is None  # shapes differ


def _memcpy_2d(dst, dpitch, src, spitch, width, height, kind, stream):
    """cudaMemcpy2DAsync on host memory (``kind`` device to device)."""
    assert kind == 3 and width <= dpitch and width <= spitch
    for row in range(height):
        ctypes.memmove(dst + row * dpitch, src + row * spitch, width)


@pytest.fixture
def copies(monkeypatch):
    from ember.cuda.kernels import copies

    runtime = types.SimpleNamespace(memcpy2DAsync=_memcpy_2d)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime,
                                                            get_current_stream=lambda: types.SimpleNamespace(ptr=0)))
    monkeypatch.setattr(copies, "cupy_module", lambda: fake)
    monkeypatch.setattr(copies, "_state", {"ndarray": HostArray, "one_gpu": True, "device": None})
    return copies


def test_cat_kernel_is_numpys_concatenate(copies):
    rng = np.random.default_rng(6)
    cases = [
        ([(3, 16, 32)] * 3, 2),  # a split's gradient (qkv)
        ([(2, 3), (5, 3), (1, 3)], 0),
        ([(2, 3, 4), (2, 1, 4), (2, 2, 4)], 1),
        ([(2, 3, 4), (2, 3, 1)], -1),
        ([(7,)], 0),
    ]
    for shapes, dim in cases:
        for dtype in (np.float32, np.int64, np.float16):
            arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
            got = copies.cat([_tensor(a) for a in arrays], dim)
            assert got is not None and got.flags.c_contiguous
            np.testing.assert_array_equal(np.asarray(got), np.concatenate(arrays, axis=dim))
    # what the usual path does: promotion, empty inputs, strided inputs, other sizes, a bad dim
    f32 = np.ones((2, 3), np.float32)
    assert copies.cat([_tensor(f32), _tensor(f32.astype(np.float64))], 0) is None
    assert copies.cat([_tensor(f32), _tensor(np.ones((0, 3), np.float32))], 0) is None
    assert copies.cat([_tensor(f32), Tensor._make(np.ones((3, 2), np.float32).view(HostArray).T,
                                                   ember.device("cpu"))], 0) is None
    assert copies.cat([_tensor(f32), _tensor(np.ones((2, 4), np.float32))], 0) is None
    assert copies.cat([_tensor(f32)], 2) is None
    assert copies.cat([], 0) is None


def test_gradient_cast_is_astype_when_nothing_records(copies):
    g = _tensor(np.array([1.5, -2.25, 65504.0, 1e-8], np.float32).astype(np.float16))
    with ember.no_grad():
        got = copies.cast(g, np.dtype(np.float32))
    assert got is not None and got.dtype == ember.float32
    np.testing.assert_array_equal(np.asarray(got._data), np.asarray(g._data).astype(np.float32))
    assert copies.cast(g, np.dtype(np.float32)) is None  # grad mode on: the dispatcher's cast (autograd may record)
    with ember.no_grad():
        assert copies.cast(g, np.dtype(np.int32)) is None


def test_float32_bfloat16_conversions_are_astype(pointwise):
    """``convert`` narrows float32 to bfloat16 to nearest even and widens back exactly: numpy's (ml_dtypes') values,
    bit for bit (NaN stays NaN), aligned and misaligned; other dtype pairs are declined."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(1027) * 100).astype(np.float32)
    x[:6] = [0.0, -0.0, np.inf, np.nan, 1.00390625, 3.0e38]  # a tie (rounds to even), a value that overflows to inf
    for offset in (0, 1):
        narrow = pointwise.convert(_tensor(x, offset)._data, BF16)
        want = x.astype(BF16)
        nan = np.isnan(x)
        np.testing.assert_array_equal(np.isnan(np.asarray(narrow).astype(np.float32)), nan)
        np.testing.assert_array_equal(np.asarray(narrow).view(np.uint16)[~nan], want.view(np.uint16)[~nan])
        wide = pointwise.convert(_tensor(want, offset)._data, np.dtype(np.float32))
        np.testing.assert_array_equal(np.asarray(wide)[~nan].view(np.uint32), want.astype(np.float32)[~nan].view(np.uint32))
    assert pointwise.convert(_tensor(x)._data, np.dtype(np.float64)) is None
    assert pointwise.convert(_tensor(x.astype(np.float64))._data, BF16) is None
