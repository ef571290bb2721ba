"""The threaded strided copy with dtype conversion (``ember._C.copy_into``, csrc/copy.cpp).

Every pair of the dtypes it converts, in every layout (contiguous, transposed, permuted, strided,
flipped, broadcast), against numpy's astype; then the ops that use it for large tensors: contiguous(),
clone(), to(dtype) and copy_. One and two threads.
"""

import ml_dtypes
import numpy as np
import pytest

import ember
from ember import _C
from ember._ops._strided_copy import COPY_MIN_ELEMENTS

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16, ml_dtypes.bfloat16, np.float32,
          np.float64]
DTYPE_IDS = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _values(shape, dtype, seed=0):
    """Values every dtype holds, with fractions (for the float -> int truncation) and zeros (for bool)."""
    rng = np.random.default_rng(seed)
    v = rng.integers(-100, 100, shape) + rng.choice([0.0, 0.25, 0.5, 0.75], shape)
    v[rng.random(shape) < 0.1] = 0
    dtype = np.dtype(dtype)
    if dtype.kind == "u":
        v = np.abs(v)
    elif dtype.kind in "iub" or dtype == np.bool_:
        v = np.trunc(v)
    return v.astype(dtype)


def _layouts(a):
    """(name, array) pairs: ``a``'s values, or a view of them, in several memory layouts."""
    yield "contiguous", a
    yield "transposed", a.T
    yield "permuted", a.reshape(8, a.shape[0] // 8, a.shape[1]).transpose(2, 0, 1)
    # attention heads (B, H, T, D) -> (B, T, H, D): runs of D elements over three outer dims
    yield "heads", a.reshape(2, a.shape[0] // 2, 10, a.shape[1] // 10).transpose(0, 2, 1, 3)
    yield "strided", a[::2, 1::3]
    yield "flipped", a[::-1, ::-1]
    yield "broadcast", np.broadcast_to(a[:1], a.shape)
    yield "column", a[:, 5]


def _expected(src, dtype):
    if np.dtype(dtype) == np.bool_:
        return src != 0
    with np.errstate(invalid="ignore"):  # negative floats to uint8: numpy warns, and wraps as the kernel does
        return src.astype(dtype)


def _numpy_varies(src_dtype, dst_dtype):
    """The conversions whose numpy result depends on the ml_dtypes version (the kernel leaves them to numpy):
    bfloat16 -> integers out of range (0 or wrapped) and float64 -> bfloat16 (rounded once or twice)."""
    src, dst = np.dtype(src_dtype), np.dtype(dst_dtype)
    bf16 = np.dtype(ml_dtypes.bfloat16)
    return (src == bf16 and dst.kind in "iu") or (src == np.float64 and dst == bf16)


@pytest.mark.parametrize("src_dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dst_dtype", DTYPES, ids=DTYPE_IDS)
def test_every_dtype_pair_and_layout_matches_numpy(threads, src_dtype, dst_dtype):
    a = _values((256, 300), src_dtype, seed=1)
    for name, src in _layouts(a):
        dst = np.empty(src.shape, dst_dtype)
        if _numpy_varies(src_dtype, dst_dtype):  # left to numpy's astype
            assert not _C.copy_into(dst, src), name
            continue
        assert _C.copy_into(dst, src), name
        want = _expected(src, dst_dtype)
        np.testing.assert_array_equal(dst.view(np.uint8), np.ascontiguousarray(want).view(np.uint8), err_msg=name)


@pytest.mark.parametrize("dst_dtype", [ml_dtypes.bfloat16, np.float16, np.float32], ids=["bfloat16", "float16", "f32"])
@pytest.mark.parametrize("src_dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_float_rounding_nan_inf_and_overflow(threads, src_dtype, dst_dtype):
    rng = np.random.default_rng(2)
    with np.errstate(over="ignore"):  # float32 source: some of these overflow to inf, on purpose
        a = (rng.standard_normal(70_000) * np.exp2(rng.integers(-140, 140, 70_000))).astype(src_dtype)
        a[:8] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e39, -1e39]
    if src_dtype == np.float64:  # halfway between two bfloat16 values, just above: one rounding only
        a[8] = 1 + 2**-8 + 2**-30
    dst = np.empty(a.shape, dst_dtype)
    if _numpy_varies(src_dtype, dst_dtype):
        assert not _C.copy_into(dst, a)
        return
    assert _C.copy_into(dst, a)
    with np.errstate(all="ignore"):
        want = a.astype(dst_dtype)
    nan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(dst.astype(np.float64)), nan)
    np.testing.assert_array_equal(dst[~nan].view(np.uint16 if dst.itemsize == 2 else np.uint32),
                                  want[~nan].view(np.uint16 if dst.itemsize == 2 else np.uint32))
    np.testing.assert_array_equal(np.signbit(dst[:2].astype(np.float32)), [False, True])  # NaN keeps its sign


def test_float32_to_bfloat16_is_bit_exact_on_a_long_run(threads):
    # A contiguous array is one run, cut into pieces for the threads; the vectorised rounding loop
    # (AVX2 or baseline) must give ml_dtypes' bits: nearest even, NaN quiet with its sign, infinities,
    # signed zeros, subnormals, values that round up into the next binade or overflow to infinity.
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**32, 300_001, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7F800000, 0xFF800000,
                         0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x3F808000, 0x3F818000, 0x3F80FFFF,
                         0x7F7FFFFF, 0xFF7F8000, 0x7F7F7FFF], np.uint32)
    bits[:specials.size] = specials
    x = bits.view(np.float32)
    out = np.empty(x.shape, ml_dtypes.bfloat16)
    assert _C.copy_into(out, x)
    with np.errstate(invalid="ignore"):  # (numpy warns about the NaNs)
        want = x.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    t = ember.from_numpy(x).to(ember.bfloat16)
    np.testing.assert_array_equal(t.numpy().view(np.uint16), out.view(np.uint16))


@pytest.mark.parametrize("n", [COPY_MIN_ELEMENTS, 3 * 32768 + 5, 200_003])
def test_long_runs_are_shared_by_the_threads(threads, n):
    # One run longer than a thread's piece (and one not a multiple of it): every element converted once.
    x = np.arange(n, dtype=np.float64) * 0.5 - 7
    out = np.full(n, -1, np.float32)
    assert _C.copy_into(out, x)
    np.testing.assert_array_equal(out, x.astype(np.float32))
    rows = np.full((3, n), -1, np.int32)
    assert _C.copy_into(rows, np.broadcast_to(x[::-1], (3, n)))
    np.testing.assert_array_equal(rows, np.broadcast_to(x[::-1], (3, n)).astype(np.int32))


def test_float_to_int_out_of_range_is_numpys_x86_value():
    a = np.array([3e9, -3e9, np.nan, 1e20, 300.75, -129.5, 2.5, -2.5] * 5000, np.float32)
    for dtype in (np.int8, np.uint8, np.int16, np.int32, np.int64):
        dst = np.empty(a.shape, dtype)
        assert _C.copy_into(dst, a)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(dst, a.astype(dtype), err_msg=str(dtype))


def test_refuses_what_it_does_not_handle():
    a = np.ones((200, 200), np.complex64)
    assert not _C.copy_into(np.empty((200, 200), np.complex64), a)
    assert not _C.copy_into(np.empty((200, 200), np.float32), a)
    assert not _C.copy_into(np.empty((200, 100)), np.ones((200, 200)))  # shape
    out = np.empty((200, 400))[:, ::2]  # dst without a unit stride
    assert not _C.copy_into(out, np.ones((200, 200)))
    readonly = np.empty((200, 200))
    readonly.flags.writeable = False
    assert not _C.copy_into(readonly, np.ones((200, 200)))


def test_empty_and_zero_dim():
    assert _C.copy_into(np.empty((0, 5), np.float32), np.empty((0, 5)))
    out = np.empty((), np.int32)
    assert _C.copy_into(out, np.array(7.9))
    assert out == 7


# -- the ops that use it -------------------------------------------------------------------------------


def _big(dtype=np.float32):
    return _values((256, 320), dtype, seed=3)  # 81,920 elements: above COPY_MIN_ELEMENTS


def test_float16_stays_with_numpy(monkeypatch):
    # the kernel converts float16 correctly (above) but slower than numpy's F16C loops: not used for it
    calls = []
    real = _C.copy_into
    monkeypatch.setattr(_C, "copy_into", lambda dst, src: calls.append(dst.dtype) or real(dst, src))
    x = ember.from_numpy(_big())
    np.testing.assert_array_equal(x.to(ember.float16).numpy(), _big().astype(np.float16))
    np.testing.assert_array_equal(x.to(ember.float16).t().contiguous().numpy(), _big().astype(np.float16).T)
    assert calls == []


def test_sizes_reach_the_kernel(monkeypatch):
    calls = []
    real = _C.copy_into
    monkeypatch.setattr(_C, "copy_into", lambda dst, src: calls.append(dst.shape) or real(dst, src))
    x = ember.from_numpy(_big())
    x.t().contiguous()
    x.to(ember.bfloat16)
    assert len(calls) == 2
    ember.ones(4, 4).t().contiguous()  # small: numpy's copy
    assert len(calls) == 2
    assert _big().size >= COPY_MIN_ELEMENTS


def test_contiguous_and_clone(threads):
    a = _big()
    x = ember.from_numpy(a)
    for view in (x.t(), x[::2, 1::3], x.flip(0), x.unsqueeze(0).expand(3, -1, -1).transpose(0, 2)):
        want = view.numpy()
        got = view.contiguous()
        assert got.is_contiguous()
        np.testing.assert_array_equal(got.numpy(), want)
        clone = view.clone()
        np.testing.assert_array_equal(clone.numpy(), want)
        assert clone.data_ptr() != view.data_ptr()
    t = x.t().clone()  # preserve_format: a transposed dense input keeps its strides
    assert t.stride() == x.t().stride()
    np.testing.assert_array_equal(t.numpy(), a.T)


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16, ember.float64, ember.int32, ember.int8, ember.bool,
                                   ember.uint8], ids=str)
def test_to_dtype(threads, dtype):
    a = _big()
    x = ember.from_numpy(a)
    for view in (x, x.t()):
        got = view.to(dtype)
        assert got.dtype is dtype and got.stride() == view.stride()
        want = _expected(view.numpy(), dtype.numpy_dtype)
        np.testing.assert_array_equal(got.numpy(), want)
    back = x.to(dtype).to(ember.float32)
    np.testing.assert_array_equal(back.numpy(), _expected(a, dtype.numpy_dtype).astype(np.float32))


def test_copy_(threads):
    a = _big(np.float64)
    dst = ember.zeros(256, 320, dtype=ember.float32)
    dst.copy_(ember.from_numpy(a).t().t())
    np.testing.assert_array_equal(dst.numpy(), a.astype(np.float32))
    dst.copy_(ember.from_numpy(a[:1]))  # broadcast
    np.testing.assert_array_equal(dst.numpy(), np.broadcast_to(a[:1].astype(np.float32), (256, 320)))
    square = ember.from_numpy(_values((300, 300), np.float32))
    want = square.numpy().T.copy()
    square.copy_(square.t())  # overlapping: numpy's buffered copy
    np.testing.assert_array_equal(square.numpy(), want)
