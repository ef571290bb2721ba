"""The one-kernel cuda dropout (``ember.cuda.kernels.dropout``) compiled for the CPU, without a GPU.

The CUDA C is compiled by g++ behind stand-ins for CUDA's built-ins (``threadIdx``, ``__umulhi``, the bit casts;
float16's conversions, PTX on the GPU, become the host's ``_Float16``) and launched block by block, thread by
thread, from the arguments the module passes to ``cupy.RawModule``'s functions; arrays are numpy arrays standing
in for CuPy's. The kernel's output and mask are compared bit for bit with the numpy reference of the same Philox
stream (float32, float16, bfloat16, float64; packed and one-by-one accesses, in place), the reference with the
arithmetic of dropout's decomposition (``(x * bool_mask) * scale`` in ember ops), and the gradient kernel with
``grad * (mask / keep)``. Last, ``nn_dropout``'s cuda branch runs over these stand-ins: values, the autograd
node, in-place dropout and the calls it leaves to the decomposition. Where ``nvcc`` is installed, the float16
source is also compiled for sm_90. ``test_cuda_dropout.py`` runs the kernels on the GPU and compares
``F.dropout`` with the decomposition for the same seed.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import types

import ml_dtypes
import numpy as np
import pytest
from _host_module import HostModule

import ember
from ember._ops import nn_dropout
from ember._tensor import Tensor
from ember.cuda import _runtime
from ember.cuda.kernels import dropout, halves, philox

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile the CUDA C for the CPU")

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.float64)]
EMBER = {"float32": ember.float32, "float16": ember.float16, "bfloat16": ember.bfloat16, "float64": ember.float64}

_SHIM = r"""
#include <cstdint>
#include <cstring>
struct ember_dim3 { unsigned x, y, z; };
static ember_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __align__(n) alignas(n)
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline float __uint_as_float(unsigned bits) { float f; std::memcpy(&f, &bits, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned bits; std::memcpy(&bits, &f, 4); return bits; }
"""

# float16 on the host: the same struct and functions as halves.F16_SOURCE, through g++'s _Float16 (round to
# nearest even, as cvt.rn.f16.f32)
_HOST_F16 = r"""
struct f16 { unsigned short x; };
static inline float to_acc(f16 v) { _Float16 h; std::memcpy(&h, &v.x, 2); return (float)h; }
static inline void put(f16* p, float v) { _Float16 h = (_Float16)v; std::memcpy(&p->x, &h, 2); }
"""

class HostArray(np.ndarray):
    """A numpy array standing in for a CuPy array."""


def _fake_cupy(directory):
    modules = {}

    def raw_module(code, options=()):
        if code not in modules:
            modules[code] = HostModule(code, options, directory, _SHIM, "dropout")
        return modules[code]

    return types.SimpleNamespace(
        ndarray=HostArray,
        empty=lambda shape, dtype: np.empty(shape, dtype).view(HostArray),
        ascontiguousarray=lambda a: np.ascontiguousarray(a).view(HostArray),
        RawModule=raw_module,
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                   Device=lambda index: contextlib.nullcontext()),
    )


@pytest.fixture(scope="module")
def fake_cupy(tmp_path_factory):
    return _fake_cupy(tmp_path_factory.mktemp("dropout_kernels"))


@pytest.fixture
def kernels(monkeypatch, fake_cupy):
    monkeypatch.setattr(_runtime, "_state", {"cupy": fake_cupy, "reason": None})
    monkeypatch.setattr(dropout, "compiled", {})
    monkeypatch.setitem(halves.SOURCES, "f16", _HOST_F16)
    return dropout


def _host(values, offset=0):
    """A HostArray holding ``values``, ``offset`` elements into a 64-byte aligned buffer (1: off the packs)."""
    values = np.asarray(values)
    raw = np.empty(values.nbytes + (offset + 64) * values.itemsize + 64, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset * values.itemsize
    array = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape).view(HostArray)
    array[...] = values
    return array


def _values(dtype, shape, seed=0):
    """Normal values times 100 of ``dtype``, with zeros of both signs, infinities, a NaN, and values near the
    dtype's largest and smallest first."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 100
    info = ml_dtypes.finfo(dtype) if dtype == BF16 else np.finfo(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, float(info.max), -float(info.max),
                        float(info.smallest_subnormal), float(info.tiny) * 3, 1.0])
    flat = x.reshape(-1)
    flat[: min(flat.size, special.size)] = special[: flat.size]
    return x.astype(dtype)


def _bits_equal(got, expected):
    """Equal bit for bit, but for NaN payloads (their positions must match)."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    wide = expected.astype(np.float64)
    nan = np.isnan(wide)
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    word = f"u{expected.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(word)[~nan], expected.view(word)[~nan])


def _scale(dtype, keep):
    return nn_dropout._dropout_scale(EMBER[dtype.name], keep)


SIZES = [0, 1, 3, 4, 5, 7, 8, 1023, 1025, (17, 61)]


# --------------------------------------------------------------------------- the kernels against the reference


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_forward_matches_reference_of_the_same_philox_stream(kernels, dtype):
    for key in (0, 0xDEADBEEF, 2**63 - 1):
        for size in SIZES:
            x = _values(dtype, size, seed=key % 7)
            u = philox.uniform_reference(size, key).reshape(-1)
            edge = (float(u[-1]),) if u.size else ()  # the last element's own uniform: u < keep is strict
            for keep in (0.9, 0.5, 0.1, *edge):
                scale = _scale(dtype, keep)
                expected, expected_mask = kernels.reference(x, keep, scale, key)
                for offset in (0, 1):  # packed accesses, and one by one off the packs
                    out, mask = kernels.forward(_host(x, offset), keep, scale, key, with_mask=True)
                    _bits_equal(out, expected)
                    assert mask.dtype == np.bool_ and mask.shape == x.shape
                    np.testing.assert_array_equal(mask, expected_mask)
                out, mask = kernels.forward(_host(x), keep, scale, key)
                assert mask is None
                _bits_equal(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_reference_is_the_decomposition_on_the_bernoulli_mask(dtype):
    # the reference's mask is ember.bernoulli's for the same key (philox.bernoulli), and its values are the
    # decomposition's arithmetic, (x * bool_mask) * scale in ember ops, and autograd's x * (mask / keep)
    x = _values(dtype, (33, 65))
    t = Tensor._make(x)
    for keep in (0.9, 0.5, 0.1, 0.7):
        scale = _scale(dtype, keep)
        out, mask = dropout.reference(x, keep, scale, key=123)
        np.testing.assert_array_equal(mask, philox.bernoulli_reference(x.shape, keep, np.bool_, 123))
        bits = Tensor._make(mask)
        _bits_equal(((t * bits) * scale).numpy(), out)
        recorded = t * (bits.to(EMBER[dtype.name]) / keep)
        _bits_equal(recorded.numpy(), out)
        kept = mask & np.isfinite(x.astype(np.float64))
        with np.errstate(over="ignore"):  # kept: x * scale rounded once (exact in float64 for the narrower dtypes)
            assert np.all(out[kept].astype(np.float64) == (x[kept].astype(np.float64) * scale).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_forward_in_place(kernels, dtype):
    x = _values(dtype, 1027)
    expected, _ = dropout.reference(x, 0.8, _scale(dtype, 0.8), key=9)
    for offset in (0, 1):
        host = _host(x, offset)
        out, _ = kernels.forward(host, 0.8, _scale(dtype, 0.8), 9, out=host)
        assert out is host
        _bits_equal(host, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_backward_is_grad_times_mask_over_keep(kernels, dtype):
    keep = 0.75
    scale = _scale(dtype, keep)
    for size in SIZES:
        g = _values(dtype, size, seed=3)
        _, mask = dropout.reference(g, keep, scale, key=77)
        expected = (Tensor._make(g) * (Tensor._make(mask).to(EMBER[dtype.name]) / keep)).numpy()
        for offset in (0, 1):
            _bits_equal(kernels.backward(_host(g, offset), _host(mask, offset), scale), expected)
    # a gradient that is not contiguous (sum's expanded ones, a transpose) is copied first
    g = _values(dtype, (40, 30), seed=4)
    _, mask = dropout.reference(g.T, keep, scale, key=5)
    expected = (Tensor._make(np.ascontiguousarray(g.T)) * (Tensor._make(mask).to(EMBER[dtype.name]) / keep)).numpy()
    _bits_equal(kernels.backward(_host(g).T, _host(mask), scale), expected)


def test_argument_checks(kernels):
    with pytest.raises(TypeError, match="C-contiguous cupy array"):
        kernels.forward(_host(np.ones((4, 6), np.float32)).T, 0.5, 2.0, 0)
    with pytest.raises(TypeError, match="C-contiguous cupy array"):
        kernels.forward(_host(np.ones(4, np.int32)), 0.5, 2.0, 0)
    with pytest.raises(TypeError, match="C-contiguous cupy array"):
        kernels.forward(np.ones(4, np.float32), 0.5, 2.0, 0)  # not the GPU's array type
    with pytest.raises(TypeError, match="out must be"):
        kernels.forward(_host(np.ones(4, np.float32)), 0.5, 2.0, 0, out=_host(np.ones(4, np.float16)))
    with pytest.raises(ValueError, match="probability"):
        kernels.forward(_host(np.ones(4, np.float32)), 1.5, 2.0, 0)
    with pytest.raises(ValueError, match="key"):
        kernels.forward(_host(np.ones(4, np.float32)), 0.5, 2.0, -1)
    with pytest.raises(TypeError, match="mask bool"):
        kernels.backward(_host(np.ones(4, np.float32)), _host(np.ones(4, np.uint8)), 2.0)
    assert kernels.supported(_host(np.ones((2, 3), BF16))) and not kernels.supported(_host(np.ones(3, np.int64)))


# --------------------------------------------------------------------------- nn_dropout's cuda branch


@pytest.fixture
def branch(kernels, monkeypatch):
    """nn_dropout's cuda branch over the stand-ins: tensors over HostArrays take it (their device is the CPU's;
    the branch reads only the array), each draw's key is the next of a counter from 1000."""
    keys = iter(range(1000, 2000))
    monkeypatch.setattr(nn_dropout, "_cuda_noise_key", lambda input: next(keys))
    return nn_dropout


def _tensor(values, requires_grad=False, offset=0):
    t = Tensor._make(_host(values, offset))
    return t.requires_grad_(True) if requires_grad else t


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_branch_without_grad_gives_the_reference(branch, dtype):
    x = _values(dtype, (9, 130))
    keep = 0.9
    y = branch._cuda_fused_dropout(_tensor(x), keep, False, branch._elementwise_noise)
    expected, _ = dropout.reference(x, keep, _scale(dtype, keep), key=1000)
    assert y.dtype is EMBER[dtype.name] and y.grad_fn is None
    _bits_equal(y.numpy(), expected)
    # in place: into the input's own storage, its version bumped
    t = _tensor(x)
    version = t._version
    assert branch._cuda_fused_dropout(t, keep, True, branch._elementwise_noise) is t
    assert t._version > version
    _bits_equal(t.numpy(), dropout.reference(x, keep, _scale(dtype, keep), key=1001)[0])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_branch_records_one_node_whose_backward_is_the_mask_over_keep(branch, dtype):
    x = _values(dtype, (9, 130)).astype(np.float64)
    x[~np.isfinite(x)] = 1.0  # finite inputs, so that every gradient entry is defined
    x = x.astype(dtype)
    keep = 0.8
    scale = _scale(dtype, keep)
    t = _tensor(x, requires_grad=True)
    y = branch._cuda_fused_dropout(t, keep, False, branch._elementwise_noise)
    assert type(y.grad_fn).__name__ == "FusedDropoutBackward"
    expected, mask = dropout.reference(x, keep, scale, key=1000)
    _bits_equal(y.detach().numpy(), expected)
    g = _values(dtype, (9, 130), seed=8)
    y.backward(Tensor._make(g))
    over_keep = (Tensor._make(mask).to(EMBER[dtype.name]) / keep)
    _bits_equal(t.grad.numpy(), (Tensor._make(g) * over_keep).numpy())
    # a backward that records (create_graph) runs ember ops on the mask: the same values, differentiable in grad
    t2 = _tensor(x, requires_grad=True)
    y2 = branch._cuda_fused_dropout(t2, keep, False, branch._elementwise_noise)
    g2 = Tensor._make(g).requires_grad_(True)
    (dx,) = ember.autograd.grad(y2, t2, g2, create_graph=True)
    assert dx.requires_grad
    _bits_equal(dx.detach().numpy(), (Tensor._make(g) * (Tensor._make(
        dropout.reference(x, keep, scale, key=1001)[1]).to(EMBER[dtype.name]) / keep)).numpy())


def test_branch_leaves_other_calls_to_the_decomposition(branch, monkeypatch):
    x = np.ones((4, 6, 5), np.float32)
    with monkeypatch.context() as patch:  # while ember.compile traces
        patch.setitem(sys.modules, "ember._dynamo", types.SimpleNamespace(is_compiling=lambda: True))
        assert branch._cuda_fused_dropout(_tensor(x), 0.5, False, branch._elementwise_noise) is None
    assert branch._cuda_fused_dropout(_tensor(x).transpose(0, 1), 0.5, False, branch._elementwise_noise) is None
    assert branch._cuda_fused_dropout(_tensor(x.astype(np.int64)), 0.5, False, branch._elementwise_noise) is None
    assert branch._cuda_fused_dropout(_tensor(x), 0.5, False, branch._feature_noise) is None  # dropout2d's mask
    assert branch._cuda_fused_dropout(Tensor._make(x), 0.5, False, branch._elementwise_noise) is None  # numpy data
    from ember.utils._python_dispatch import TorchDispatchMode

    class Watch(TorchDispatchMode):
        def __ember_dispatch__(self, op, types, args, kwargs):
            return op(*args, **kwargs)

    with Watch():
        assert branch._cuda_fused_dropout(_tensor(x), 0.5, False, branch._elementwise_noise) is None
    assert branch._cuda_fused_dropout(_tensor(x), 0.5, False, branch._elementwise_noise) is not None


def test_branch_runs_under_a_recording_mode(branch):
    # the profiler only observes calls (``observes_only``): the kernel still runs, forward and backward
    from ember._ops._dispatch import run_below_modes, state

    class Recorder:
        observes_only = True
        calls = []

        def __ember_record__(self, op, args, kwargs):
            self.calls.append(op.name)
            return run_below_modes(op, args, kwargs)

    x = _values(np.dtype(np.float32), (5, 40), seed=2)
    x[~np.isfinite(x)] = 0.5
    t = _tensor(x, requires_grad=True)
    state.modes.append(Recorder())
    try:
        y = branch._cuda_fused_dropout(t, 0.6, False, branch._elementwise_noise)
        y.backward(Tensor._make(np.ones_like(x)))
    finally:
        state.modes.pop()
    assert not {"bernoulli", "mul", "div"} & set(Recorder.calls)  # neither form of the decomposition ran
    expected, mask = dropout.reference(x, 0.6, _scale(x.dtype, 0.6), key=1000)
    _bits_equal(y.detach().numpy(), expected)
    _bits_equal(t.grad.numpy(), np.where(mask, np.float32(_scale(x.dtype, 0.6)), np.float32(0)))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile the CUDA C for a GPU")
def test_cuda_source_compiles_for_a_gpu(tmp_path):
    # what NVRTC compiles on the GPU machine, here with nvcc (no GPU needed): the float16 source, whose loads
    # and stores are inline PTX that the host build replaces
    source = tmp_path / "dropout_f16.cu"
    source.write_text(dropout._source("float16"))
    result = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--fmad=false", "-o", str(tmp_path / "dropout.cubin"),
                             str(source)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[:3000]
