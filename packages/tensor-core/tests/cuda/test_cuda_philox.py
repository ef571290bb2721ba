"""ember's Philox4x32-10 kernels (ember.cuda.kernels.philox) and the GPU dropout built on them.

Tests without the ``cuda`` marker run here on any machine: the numpy reference against the Random123
known-answer vectors, its stream layout and edge cases, the CUDA C source compiled as C++ for the host
(with stand-ins for the CUDA built-ins; skipped without ``g++``) against the reference, and the
arithmetic of dropout's two decompositions. The ``cuda`` tests compare the GPU kernels with the
reference bit for bit and check bernoulli and dropout on cuda: statistics, values, reproducibility under
``ember.manual_seed`` and ``get_rng_state``/``set_rng_state``, and gradients.
"""

import ctypes
import math
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import ember
from ember._ops import nn_dropout
from ember.cuda.kernels import philox

F = ember.nn.functional

# (counter, key) -> output of philox4x32-10, from Random123's kat_vectors
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
MASK_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.int32, np.int64, np.float16,
               ml_dtypes.bfloat16, np.float32, np.float64]
SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 1023, 1025, (3, 5), (0, 4), (17, 61)]
KEYS = [0, 1, 0xDEADBEEF, 2**32, 2**63 - 1, 2**64 - 1]


# --------------------------------------------------------------------------- the numpy reference


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_reference_matches_random123_known_answers(counter, key, expected):
    assert tuple(int(w) for w in philox.philox4x32_10(counter, key)) == expected


def test_reference_is_vectorised_over_counters_and_keys():
    counters = np.array([c for c, _, _ in KNOWN_ANSWERS], np.uint32)
    keys = np.array([k for _, k, _ in KNOWN_ANSWERS], np.uint32)
    out = philox.philox4x32_10(counters, keys)
    assert out.dtype == np.uint32 and out.shape == (3, 4)
    np.testing.assert_array_equal(out, np.array([e for _, _, e in KNOWN_ANSWERS], np.uint32))
    with pytest.raises(ValueError, match="4 words"):
        philox.philox4x32_10([0, 0, 0], [0, 0])


def test_uniform_reference_layout():
    # float32: element i is word i % 4 of block i // 4, (w >> 8) * 2**-24
    words = philox.philox4x32_10([0, 0, 0, 0], [0, 0])
    u = philox.uniform_reference(4, key=0)
    assert u.dtype == np.float32
    np.testing.assert_array_equal(u, (words >> 8).astype(np.float64) / 2**24)
    # block j's counter is (lo(j), hi(j), lo(offset), hi(offset)); the key is (lo(key), hi(key))
    key, offset, j = 0x0123456789ABCDEF, 2**40 + 3, 2
    words = philox.philox4x32_10([j, 0, 3, 2**8], [0x89ABCDEF, 0x01234567])
    u = philox.uniform_reference(11, key=key, offset=offset)
    np.testing.assert_array_equal(u[8:], ((words >> 8).astype(np.float64) / 2**24)[:3])
    # float64: words (2h, 2h + 1) of block i // 2, 53 bits
    d = philox.uniform_reference(3, key=key, offset=offset, dtype=np.float64)
    w = philox.philox4x32_10([1, 0, 3, 2**8], [0x89ABCDEF, 0x01234567]).astype(np.uint64)
    assert d.dtype == np.float64
    assert d[2] == float((int(w[0]) >> 5) * 2**26 + (int(w[1]) >> 6)) / 2**53


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_reference_is_a_prefix_stream_in_range(dtype):
    long = philox.uniform_reference(1000, key=7, dtype=dtype)
    assert long.min() >= 0.0 and long.max() < 1.0
    for n in (0, 1, 2, 3, 5, 999):
        np.testing.assert_array_equal(philox.uniform_reference(n, key=7, dtype=dtype), long[:n])
    np.testing.assert_array_equal(philox.uniform_reference((10, 100), key=7, dtype=dtype), long.reshape(10, 100))
    assert philox.uniform_reference((0, 3), key=7, dtype=dtype).shape == (0, 3)
    assert philox.uniform_reference((), key=7, dtype=dtype).shape == ()
    # other keys and offsets give other streams
    assert not np.array_equal(philox.uniform_reference(1000, key=8, dtype=dtype), long)
    assert not np.array_equal(philox.uniform_reference(1000, key=7, offset=1, dtype=dtype), long)


def test_uniform_reference_statistics():
    u = philox.uniform_reference(10**6, key=2024).astype(np.float64)
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / u.size)
    counts = np.bincount((u * 16).astype(int), minlength=16)
    expected = u.size / 16
    assert ((counts - expected) ** 2 / expected).sum() < 50  # chi-square, 15 degrees of freedom
    d = philox.uniform_reference(10**5, key=2024, dtype=np.float64)
    assert np.unique(d).size > 99_990 and (d * 2**53 % 2**29 != 0).any()  # the low bits are random too


def test_threshold_compares_p_exactly():
    assert philox.threshold(0.0) == 0 and philox.threshold(1.0) == 2**24 and philox.threshold(0.5) == 2**23
    assert philox.threshold(0.9) == math.ceil(0.9 * 2**24)
    assert philox.threshold(2.0**-30) == 1  # a tiny p keeps exactly the uniform 0
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="probability"):
            philox.threshold(p)


@pytest.mark.parametrize("dtype", MASK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_bernoulli_reference_is_uniform_below_p(dtype):
    u = philox.uniform_reference(4099, key=99, offset=5).astype(np.float64)
    one, zero = np.asarray(1, dtype), np.asarray(0, dtype)
    for p in (0.0, 1.0, 0.1, 0.9, 1 - 1e-9, float(u[17])):
        m = philox.bernoulli_reference(4099, p, dtype, key=99, offset=5)
        assert m.dtype == np.dtype(dtype) and m.shape == (4099,)
        np.testing.assert_array_equal(m, np.where(u < p, one, zero))
    assert philox.bernoulli_reference(4099, float(u[17]), dtype, key=99, offset=5)[17] == 0  # u < p is strict


def test_bernoulli_reference_scaled_values_and_errors():
    m = philox.bernoulli_reference((4, 9), 0.7, np.float32, key=3, value=1 / 0.7)
    assert set(np.unique(m).tolist()) == {0.0, float(np.float32(1 / 0.7))}
    h = philox.bernoulli_reference(9, 0.7, ml_dtypes.bfloat16, key=3, value=1 / 0.7)
    assert h.dtype.name == "bfloat16" and set(np.unique(h.astype(np.float32)).tolist()) <= {
        0.0, float(np.asarray(1 / 0.7, ml_dtypes.bfloat16).astype(np.float32))}
    with pytest.raises(TypeError, match="not supported"):
        philox.bernoulli_reference(3, 0.5, np.complex64, key=0)
    with pytest.raises(ValueError, match="negative dimension"):
        philox.bernoulli_reference((2, -1), 0.5, np.float32, key=0)
    with pytest.raises(ValueError, match="key"):
        philox.uniform_reference(3, key=2**64)
    with pytest.raises(ValueError, match="offset"):
        philox.uniform_reference(3, key=0, offset=-1)
    with pytest.raises(TypeError, match="float32 or float64"):
        philox.uniform_reference(3, key=0, dtype=np.float16)


def test_bernoulli_reference_fraction_within_binomial_bound():
    n, p = 10**6, 0.9
    kept = int(philox.bernoulli_reference(n, p, np.bool_, key=11).sum())
    assert abs(kept - n * p) < 6 * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_dropout_forms_agree(dtype):
    # cuda's unrecorded dropout computes (x * bool_mask) * scale, autograd's x * (mask / keep): the same values
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(4000) * 100, [0.0, -0.0, np.inf, -np.inf, np.nan, 6e4, -6e4]])
    x = ember.tensor(values).to(dtype)
    for p in (0.1, 0.5, 0.3, 0.97):
        keep = 1.0 - p
        bits = ember.tensor(philox.bernoulli_reference(x.shape[0], keep, np.bool_, key=5))
        recorded = x * (bits.to(dtype) / keep)
        fused = (x * bits) * nn_dropout._dropout_scale(dtype, keep)
        assert fused.dtype is dtype
        a, b = recorded.float().numpy(), fused.float().numpy()
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


# --------------------------------------------------------------------------- the CUDA C on the host

_HOST_PRELUDE = r"""
#include <cstdint>
struct dim3_ { unsigned x = 0, y = 0, z = 0; };
static dim3_ threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __align__(n) alignas(n)
inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a * b) >> 32); }
"""
_HOST_KERNELS = {
    "ember_philox_uniform_f32": "float", "ember_philox_uniform_f64": "double",
    "ember_philox_bernoulli_1": "unsigned char", "ember_philox_bernoulli_2": "unsigned short",
    "ember_philox_bernoulli_4": "unsigned int", "ember_philox_bernoulli_8": "unsigned long long",
}


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    """The CUDA source compiled for the host: ``run(name, out, key, offset[, threshold, value])``."""
    if shutil.which("g++") is None:
        pytest.skip("no g++ to compile the CUDA source for the host")
    launchers = []
    for name, ctype in _HOST_KERNELS.items():
        extra = ", unsigned int t, unsigned long long v" if "bernoulli" in name else ""
        call_extra = f", t, ({ctype})v" if "bernoulli" in name else ""
        launchers.append(
            f'extern "C" void run_{name}(void* out, long long n, unsigned long long key, unsigned long long offset'
            f"{extra}, unsigned grid) {{\n  gridDim.x = grid; blockDim.x = 256;\n"
            "  for (unsigned b = 0; b < grid; ++b) for (unsigned t_ = 0; t_ < 256; ++t_) {\n"
            f"    blockIdx.x = b; threadIdx.x = t_; {name}(({ctype}*)out, n, key, offset{call_extra}); }}\n}}\n"
        )
    directory = tmp_path_factory.mktemp("philox_host")
    source = directory / "philox_host.cpp"
    source.write_text(_HOST_PRELUDE + philox.SOURCE + "\n".join(launchers))
    library = directory / "philox_host.so"
    result = subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-Wno-unknown-pragmas", "-o",
                             str(library), str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[:3000]
    lib = ctypes.CDLL(str(library))

    def run(name, out, key, offset, t=0, value=0):
        n = out.size
        threads = -(-n // (2 if name.endswith("f64") else 4))  # one Philox block per thread
        grid = -(-threads // 256)
        args = [ctypes.c_void_p(out.ctypes.data), ctypes.c_longlong(n), ctypes.c_ulonglong(key),
                ctypes.c_ulonglong(offset)]
        if "bernoulli" in name:
            args += [ctypes.c_uint(t), ctypes.c_ulonglong(value)]
        getattr(lib, f"run_{name}")(*args, ctypes.c_uint(grid))
        return out

    return run


def _aligned_empty(n, dtype):
    """An array of ``n`` elements at a 64-byte boundary (as device allocations are), and 64 guard bytes."""
    dtype = np.dtype(dtype)
    raw = np.full(n * dtype.itemsize + 128, 0xAB, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw, raw[start:start + n * dtype.itemsize].view(dtype), start + n * dtype.itemsize


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("offset", [0, 2**32 + 5, 2**64 - 1])
def test_cuda_source_on_the_host_matches_reference(host_kernels, key, offset):
    for n in [0, 1, 2, 3, 4, 5, 7, 8, 9, 1023, 1025, 4 * 256 * 2 + 3]:
        for name, dtype in (("ember_philox_uniform_f32", np.float32), ("ember_philox_uniform_f64", np.float64)):
            raw, out, end = _aligned_empty(n, dtype)
            host_kernels(name, out, key, offset)
            np.testing.assert_array_equal(out, philox.uniform_reference(n, key, offset, dtype))
            assert (raw[end:] == 0xAB).all()
        u = philox.uniform_reference(n, key, offset).astype(np.float64)
        for i, dtype in enumerate(MASK_DTYPES):
            dtype = np.dtype(dtype)
            p = float(u[-1]) if n and i % 3 == 0 else (0.1, 0.9, 0.5, 1.0, 0.0)[i % 5]
            value = 1 / 0.9 if dtype.kind == "f" or dtype.name == "bfloat16" else 1
            expected = philox.bernoulli_reference(n, p, dtype, key, offset, value)
            raw, out, end = _aligned_empty(n, dtype)
            word = np.asarray(value, dtype).view(f"u{dtype.itemsize}")[()]
            host_kernels(f"ember_philox_bernoulli_{dtype.itemsize}", out, key, offset, philox.threshold(p), int(word))
            np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))
            assert (raw[end:] == 0xAB).all()


# --------------------------------------------------------------------------- on the GPU


@pytest.fixture
def cp():
    ember.cuda.init()
    from ember.cuda._runtime import cupy_module

    return cupy_module()


def _noise_key():
    """The key the next default-generator draw on the current GPU will use (the state is put back)."""
    from ember.cuda.random import device_rng

    state = ember.cuda.get_rng_state()
    key = device_rng().key()
    ember.cuda.set_rng_state(state)
    return key


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_uniform_matches_reference(cp, dtype):
    for key in KEYS:
        for offset in (0, 2**32 + 5, 2**64 - 1):
            for size in SIZES + ([(1000, 1001)] if key == KEYS[2] else []):
                got = philox.uniform(size, key, offset, dtype)
                assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous
                np.testing.assert_array_equal(cp.asnumpy(got), philox.uniform_reference(size, key, offset, dtype))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", MASK_DTYPES, ids=lambda d: np.dtype(d).name)
def test_gpu_bernoulli_matches_reference_and_uniform_below_p(cp, dtype):
    dtype = np.dtype(dtype)
    for key in KEYS[:4]:
        for size in SIZES + ([(1000, 1001)] if key == KEYS[2] else []):
            u = philox.uniform(size, key, 3)
            for p in (0.0, 1.0, 0.1, 0.9, float(u.ravel()[-1]) if u.size else 0.5):
                m = philox.bernoulli(size, p, dtype, key, 3)
                host = cp.asnumpy(m.view(np.uint16)).view(dtype) if dtype.name == "bfloat16" else cp.asnumpy(m)
                expected = philox.bernoulli_reference(size, p, dtype, key, 3)
                np.testing.assert_array_equal(host.view(np.uint8), expected.view(np.uint8))
                # the mask is the GPU's own uniforms compared with p, element for element
                below = cp.asnumpy(u.astype(cp.float64) < p)
                np.testing.assert_array_equal(host.astype(np.float32) != 0, below)


@pytest.mark.cuda
def test_gpu_scaled_mask(cp):
    m = philox.bernoulli((300, 7), 0.8, np.float32, 17, 0, value=1 / 0.8)
    np.testing.assert_array_equal(cp.asnumpy(m), philox.bernoulli_reference((300, 7), 0.8, np.float32, 17, 0, 1 / 0.8))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.bool,
                                   ember.int64, ember.uint8])
def test_bernoulli_default_generator_is_one_fused_mask(cp, dtype):
    ember.manual_seed(3)
    key = _noise_key()
    got = ember.bernoulli(ember.empty(33, 65, dtype=dtype, device="cuda"), 0.3)
    assert got.dtype is dtype and got.device.type == "cuda"
    expected = philox.bernoulli_reference((33, 65), 0.3, dtype.numpy_dtype, key)
    np.testing.assert_array_equal(got.cpu().numpy().view(np.uint8), expected.view(np.uint8))
    # the same draws as the uniforms a kernel gets from the default generator
    from ember.cuda.random import device_rng

    ember.manual_seed(3)
    u = device_rng().random((33, 65))
    np.testing.assert_array_equal(expected != 0, cp.asnumpy(u.astype(cp.float64) < 0.3))


@pytest.mark.cuda
def test_device_noise_reproducible_and_distributions(cp):
    from ember.cuda.random import device_rng

    ember.manual_seed(11)
    a = cp.asnumpy(device_rng().random(5000))
    b = cp.asnumpy(device_rng().random(5000))
    ember.manual_seed(11)
    np.testing.assert_array_equal(cp.asnumpy(device_rng().random(5000)), a)
    assert not np.array_equal(a, b)
    state = ember.cuda.get_rng_state()
    c = cp.asnumpy(device_rng().random(7, np.float64))
    ember.cuda.set_rng_state(state)
    np.testing.assert_array_equal(cp.asnumpy(device_rng().random(7, np.float64)), c)
    assert device_rng().random().shape == ()
    e = cp.asnumpy(device_rng().standard_exponential((400, 500)))
    assert e.dtype == np.float64 and e.min() >= 0 and abs(e.mean() - 1) < 0.01 and abs(e.var() - 1) < 0.03
    z = cp.asnumpy(device_rng().standard_normal((400, 500), np.float32))
    assert z.dtype == np.float32 and abs(z.mean()) < 0.01 and abs(z.var() - 1) < 0.02
    with pytest.raises(TypeError):
        device_rng().random(3, np.float16)


@pytest.mark.cuda
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_statistics_and_values(cp, p):
    x = ember.randn(1000, 1003, device="cuda")
    y = F.dropout(x, p)
    xs, ys = x.cpu().numpy(), y.cpu().numpy()
    kept = ys != 0
    n, keep = xs.size, 1.0 - p
    assert abs(int(kept.sum()) - n * keep) < 6 * math.sqrt(n * p * keep)  # binomial, 6 standard deviations
    scale = np.float32(1) / np.float32(keep)
    np.testing.assert_array_equal(ys[kept], xs[kept] * scale)  # kept: x * (1 / keep) rounded once
    np.testing.assert_allclose(ys[kept], xs[kept] / keep, rtol=2.5e-7)
    assert (ys[~kept] == 0).all()


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float64, ember.float16, ember.bfloat16])
def test_dropout_other_dtypes(cp, dtype):
    x = ember.randn(300, 301, device="cuda").to(dtype)
    y = F.dropout(x, 0.2)
    assert y.dtype is dtype
    ys = y.float().cpu().numpy()
    kept = ys != 0
    assert 0.78 < kept.mean() < 0.82
    scale = nn_dropout._dropout_scale(dtype, 0.8)
    np.testing.assert_array_equal(ys[kept], (x * scale).float().cpu().numpy()[kept])


@pytest.mark.cuda
def test_dropout_reproducible_and_same_with_or_without_grad(cp):
    x = ember.randn(257, 129, device="cuda")
    ember.manual_seed(5)
    a = F.dropout(x, 0.3).cpu().numpy()
    ember.manual_seed(5)
    b = F.dropout(x, 0.3).cpu().numpy()
    np.testing.assert_array_equal(a, b)
    state = ember.cuda.get_rng_state()
    c = F.dropout(x, 0.3).cpu().numpy()
    assert not np.array_equal(b, c)
    ember.cuda.set_rng_state(state)
    np.testing.assert_array_equal(F.dropout(x, 0.3).cpu().numpy(), c)
    # autograd records x * (mask / keep); without grad it is (x * bool_mask) * scale: the same values
    ember.manual_seed(5)
    g = F.dropout(x.detach().requires_grad_(True), 0.3)
    np.testing.assert_array_equal(g.detach().cpu().numpy(), a)


@pytest.mark.cuda
def test_dropout_grad_is_mask_over_keep(cp):
    x = (ember.rand(200, 300, device="cuda") + 0.5).requires_grad_(True)  # no zeros: y != 0 marks the mask
    p = 0.25
    y = F.dropout(x, p)
    g = ember.randn(200, 300, device="cuda")
    y.backward(g)
    mask = (y != 0).detach().cpu().numpy()
    scale = np.float32(1) / np.float32(1 - p)
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.where(mask, g.cpu().numpy() * scale, 0))
    np.testing.assert_array_equal(y.detach().cpu().numpy(), np.where(mask, x.detach().cpu().numpy() * scale, 0))


@pytest.mark.cuda
def test_feature_dropout_on_cuda(cp):
    x = ember.rand(8, 16, 5, 5, device="cuda") + 0.5
    y = F.dropout2d(x, 0.5).cpu().numpy()
    dropped = (y == 0).reshape(8, 16, 25)
    assert (dropped.all(axis=2) | ~dropped.any(axis=2)).all()  # whole channels
    kept = ~dropped.any(axis=2)
    np.testing.assert_array_equal(y.reshape(8, 16, 25)[kept], (x.cpu().numpy() * 2).reshape(8, 16, 25)[kept])
