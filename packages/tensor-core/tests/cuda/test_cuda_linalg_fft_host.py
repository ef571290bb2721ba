"""ember.cuda.kernels.linalg and .fft_plans without a GPU: numpy stands in for CuPy and the libraries.

The modules call cuBLAS, cuSOLVER and cuFFT with raw device pointers on row-major arrays, while the
libraries read column-major matrices; each function's docstring says which transposed problem it hands
them. Here a stand-in of CuPy (a numpy subclass whose ``.data.ptr`` is the host address) and of the
bindings (each routine reads and writes the column-major matrices at those addresses, computed by
scipy/numpy) check that reasoning on every machine: the results must be LAPACK's and numpy's. The same
functions on the GPU are tested in ``test_cuda_linalg_fast.py`` and ``test_cuda_fft.py``.
"""

from __future__ import annotations

import collections
import ctypes
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
import scipy.linalg as sl

from ember.cuda.kernels import fft_plans
from ember.cuda.kernels import linalg as kernels

_TYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _memory(ptr, count, dtype):
    dtype = np.dtype(dtype)
    return np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(ptr), dtype=dtype)


def _column_major(ptr, rows, cols, ld, dtype):
    """A writable view of the column-major ``rows x cols`` matrix at ``ptr`` (leading dimension ``ld``)."""
    return _memory(ptr, ld * cols, dtype).reshape(cols, ld).T[:rows, :]


def _pointers(ptr, count):
    return [int(p) for p in _memory(ptr, count, np.uint64)]


class _Array(np.ndarray):
    """CuPy's ndarray as the modules use it: ``.data.ptr`` and ``._c_contiguous``."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data, device_id=0)

    @property
    def _c_contiguous(self):
        return self.flags.c_contiguous


_Array.__module__ = "cupy"


def _wrap(fn):
    def call(*args, **kwargs):
        args = [np.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        return np.asarray(fn(*args, **kwargs)).view(_Array)

    return call


def _cupy():
    cp = types.ModuleType("cupy")
    for name in ("arange", "empty", "empty_like", "zeros", "ones", "array", "ascontiguousarray", "broadcast_to",
                 "diagonal", "argmax", "where", "conj", "swapaxes", "concatenate", "repeat"):
        setattr(cp, name, _wrap(getattr(np, name)))
    cp.ndarray, cp.uintp = _Array, np.uintp
    cp.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0),
        device=types.SimpleNamespace(get_cublas_handle=lambda: 1, get_cusolver_handle=lambda: 2))

    cp.matmul = _wrap(np.matmul)
    cp.ElementwiseKernel = lambda params, out, body, name: _KERNELS[name]()
    return cp


def _tril_or_nan(factor, info, n, bad, out):  # the factor is column-major
    lower = np.tril(np.swapaxes(np.asarray(factor).reshape(-1, n, n), -1, -2))
    lower[np.asarray(info).reshape(-1) != 0] = bad
    out[...] = lower.reshape(out.shape)


def _first_zero_pivot(factors, n, info):
    zero = np.diagonal(np.asarray(factors).reshape(-1, n, n), axis1=-2, axis2=-1) == 0
    info[...] = np.where(zero.any(axis=-1), np.argmax(zero, axis=-1) + 1, 0)


def _halved_tril(m, n, out):
    lower = np.tril(np.asarray(m))
    idx = np.arange(n)
    lower[..., idx, idx] *= 0.5
    out[...] = lower


# the module's kernels by their documented meaning
_KERNELS = {"ember_cholesky_tril_or_nan_cm": lambda: _tril_or_nan, "ember_lu_first_zero_pivot": lambda: _first_zero_pivot,
            "ember_cholesky_halved_tril": lambda: _halved_tril}


def _cublas():
    lib = types.ModuleType("cublas")

    def getrf(t):
        def run(handle, n, a, lda, pivots, info, count):
            piv, codes = _memory(pivots, count * n, np.int32).reshape(count, n), _memory(info, count, np.int32)
            for i, p in enumerate(_pointers(a, count)):
                m = _column_major(p, n, n, lda, _TYPES[t])
                lu, pv = sl.lu_factor(m.copy(), check_finite=False)
                m[...], piv[i] = lu, pv + 1
                zero = np.diagonal(lu) == 0
                codes[i] = np.argmax(zero) + 1 if zero.any() else 0
        return run

    def getrs(t):
        def run(handle, trans, n, k, a, lda, pivots, b, ldb, info, count):
            piv = _memory(pivots, count * n, np.int32).reshape(count, n)
            for i, (pa, pb) in enumerate(zip(_pointers(a, count), _pointers(b, count))):
                rhs = _column_major(pb, n, k, ldb, _TYPES[t])
                rhs[...] = sl.lu_solve((_column_major(pa, n, n, lda, _TYPES[t]).copy(), piv[i] - 1), rhs.copy(),
                                       trans=trans)
            _memory(info, 1, np.int32)[0] = 0
        return run

    def solve(t, side, uplo, trans, diag, m, n, alpha, pa, lda, pb, ldb):
        assert trans == 0
        b = _column_major(pb, m, n, ldb, _TYPES[t])
        size = m if side == 0 else n
        a = _column_major(pa, size, size, lda, _TYPES[t]).copy()
        scaled = _memory(alpha, 1, _TYPES[t])[0] * b
        kwargs = dict(lower=uplo == 0, unit_diagonal=bool(diag))
        b[...] = sl.solve_triangular(a, scaled, **kwargs) if side == 0 else \
            sl.solve_triangular(a, scaled.T, trans="T", **kwargs).T  # X A = B <=> A^T X^T = B^T

    for t in _TYPES:
        setattr(lib, t + "getrfBatched", getrf(t))
        setattr(lib, t + "getrsBatched", getrs(t))
        setattr(lib, t + "trsm", lambda *a, t=t: solve(t, *a[1:]))
        setattr(lib, t + "trsmBatched", lambda *a, t=t: [solve(t, *a[1:8], pa, a[9], pb, a[11])
                                                         for pa, pb in zip(_pointers(a[8], a[12]),
                                                                           _pointers(a[10], a[12]))])
    return lib


def _cusolver():
    lib = types.ModuleType("cusolver")

    def potrf_one(t, uplo, n, p, lda):
        m = _column_major(p, n, n, lda, _TYPES[t])
        part = np.triu if uplo == 1 else np.tril
        h = part(m) + np.conj(part(m, 1 if uplo == 1 else -1)).T  # the Hermitian matrix of that triangle
        for order in range(1, n + 1):
            if np.linalg.eigvalsh(h[:order, :order]).min() <= 0:
                return order
        lower = np.linalg.cholesky(h)
        rows, cols = np.triu_indices(n) if uplo == 1 else np.tril_indices(n)
        m[rows, cols] = (np.conj(lower).T if uplo == 1 else lower)[rows, cols]
        return 0

    def gesvdj(t, econ, m, n, a, lda, s, u, ldu, v, ldv, info):
        u_, s_, vh = np.linalg.svd(_column_major(a, m, n, lda, _TYPES[t]).copy(), full_matrices=not econ)
        k = min(m, n)
        _memory(s, k, np.dtype(_TYPES[t]).char.lower())[:] = s_
        _column_major(u, m, k if econ else m, ldu, _TYPES[t])[...] = u_
        _column_major(v, n, k if econ else n, ldv, _TYPES[t])[...] = np.conj(vh).T  # V, not V^H
        _memory(info, 1, np.int32)[0] = 0

    for t in _TYPES:
        setattr(lib, t + "potrf_bufferSize", lambda *a: 8)
        setattr(lib, t + "potrf", lambda h, uplo, n, a, lda, w, lw, info, t=t:
                _memory(info, 1, np.int32).__setitem__(0, potrf_one(t, uplo, n, a, lda)))
        setattr(lib, t + "potrfBatched", lambda h, uplo, n, a, lda, info, count, t=t: [
            _memory(info, count, np.int32).__setitem__(i, potrf_one(t, uplo, n, p, lda))
            for i, p in enumerate(_pointers(a, count))])
        setattr(lib, t + "gesvdj_bufferSize", lambda *a: 8)
        setattr(lib, t + "gesvdj", lambda h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, w, lw, info, p, t=t:
                gesvdj(t, econ, m, n, a, lda, s, u, ldu, v, ldv, info))
    lib.createGesvdjInfo = lambda: 3
    return lib


class _Plan:
    """cuFFT's plan many by its documented meaning: ``batch`` row-major signals of ``inembed``, unnormalised."""

    def __init__(self, shape, inembed, istride, idist, onembed, ostride, odist, kind, batch, order, axis, size):
        assert istride == ostride == 1 and idist == np.prod(inembed) and odist == np.prod(onembed)
        self.shape, self.inembed, self.onembed, self.kind, self.batch = tuple(shape), inembed, onembed, kind, batch

    def fft(self, a, out, direction):
        assert a.flags.c_contiguous and out.flags.c_contiguous
        x = np.asarray(a).reshape(self.batch, *self.inembed)
        axes = tuple(range(1, len(self.shape) + 1))
        count = int(np.prod(self.shape))
        if self.kind in (0x29, 0x69):
            y = np.fft.fftn(x, axes=axes) if direction == -1 else np.fft.ifftn(x, axes=axes) * count
        elif self.kind in (0x2A, 0x6A):
            y = np.fft.rfftn(x, axes=axes)
        else:
            y = np.fft.irfftn(x, s=self.shape, axes=axes) * count
            x[...] = np.nan  # cuFFT's c2r overwrites its input
        np.asarray(out).reshape(self.batch, *self.onembed)[...] = y


@pytest.fixture
def stand_in(monkeypatch):
    cp = _cupy()
    cufft = types.SimpleNamespace(PlanNd=_Plan)
    cp.cuda.cufft = cufft
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.cublas, libs.cusolver = _cublas(), _cusolver()
    for name, module in (("cupy", cp), ("cupy.cuda", cp.cuda), ("cupy.cuda.cufft", cufft),
                         ("cupy_backends", types.ModuleType("cupy_backends")),
                         ("cupy_backends.cuda", types.ModuleType("cupy_backends.cuda")),
                         ("cupy_backends.cuda.libs", libs), ("cupy_backends.cuda.libs.cublas", libs.cublas),
                         ("cupy_backends.cuda.libs.cusolver", libs.cusolver)):
        monkeypatch.setitem(sys.modules, name, module)
    # empty caches for the stand-ins, the real ones back afterwards: real CuPy objects (a GPU machine runs
    # both test files in one process) and stand-in ones must never meet
    for module, name, empty in ((kernels, "_WORKSPACES", {}), (kernels, "_GESVDJ_PARAMS", {}),
                                (kernels, "_TRIL_OR_NAN", None), (kernels, "_FIRST_ZERO_PIVOT", None), (kernels, "_HALVED_TRIL", None),
                                (kernels, "_POINTERS", collections.OrderedDict()),
                                (fft_plans, "_plans", collections.OrderedDict())):
        monkeypatch.setattr(module, name, empty)
    return lambda a: np.ascontiguousarray(a).view(_Array)


DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _make(rng, dtype, *shape):
    values = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


def _tol(dtype):
    return 2e-4 if dtype in (np.float32, np.complex64) else 1e-10


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_lu_and_solves_are_lapacks(stand_in, dtype):
    rng = np.random.default_rng(0)
    a = _make(rng, dtype, 5, 6, 6) + 4 * np.eye(6, dtype=dtype)
    lu, pivots, info = kernels.lu_factor_batched(stand_in(a))
    for i in range(5):
        want_lu, want_pivots = sl.lu_factor(a[i])
        np.testing.assert_allclose(lu[i], want_lu, rtol=_tol(dtype), atol=_tol(dtype))
        np.testing.assert_array_equal(pivots[i], want_pivots + 1)
    assert not np.asarray(info).any()
    singular = a.copy()
    singular[2] = 0
    assert np.asarray(kernels.lu_factor_batched(stand_in(singular))[2]).tolist() == [0, 0, 1, 0, 0]
    b = _make(rng, dtype, 5, 6, 3)
    for trans, op in ((0, lambda m: m), (1, lambda m: m.T), (2, lambda m: m.conj().T)):
        x = kernels.lu_solve_batched(lu, pivots, stand_in(b), trans)
        assert x.flags.c_contiguous
        np.testing.assert_allclose(np.stack([op(m) for m in a]) @ x, b, rtol=10 * _tol(dtype), atol=10 * _tol(dtype))
    x = kernels.lu_solve_batched(lu, pivots, stand_in(b[:1]), 0)  # one right-hand side for the batch
    np.testing.assert_allclose(a @ x, np.broadcast_to(b[:1], b.shape), rtol=10 * _tol(dtype), atol=10 * _tol(dtype))
    assert kernels.lu_factor_batched(stand_in(a.astype(np.complex64))) is None  # LAPACK's complex pivots


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (3,)])
def test_triangular_solves(stand_in, dtype, batch):
    rng = np.random.default_rng(1)
    a = _make(rng, dtype, *batch, 5, 5) + 3 * np.eye(5, dtype=dtype)
    for upper in (True, False):
        for left in (True, False):
            for unit in (False, True):
                b = _make(rng, dtype, *batch, *((5, 2) if left else (2, 5)))
                x = kernels.triangular_solve(stand_in(a), stand_in(b), upper, left, unit)
                t = np.triu(a) if upper else np.tril(a)
                if unit:
                    t[..., range(5), range(5)] = 1
                np.testing.assert_allclose(t @ x if left else x @ t, b, rtol=10 * _tol(dtype), atol=10 * _tol(dtype))
                assert x.flags.c_contiguous


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (3,)])
def test_cholesky_reads_the_lower_triangle(stand_in, dtype, batch):
    rng = np.random.default_rng(2)
    g = _make(rng, dtype, *batch, 6, 6)
    spd = (g @ np.conj(np.swapaxes(g, -1, -2)) + 6 * np.eye(6)).astype(dtype)
    junk = spd + np.triu(_make(rng, dtype, *batch, 6, 6), 1)
    lower, info = kernels.cholesky(stand_in(junk))
    np.testing.assert_allclose(lower, np.linalg.cholesky(spd), rtol=10 * _tol(dtype), atol=10 * _tol(dtype))
    assert not np.asarray(info).any()
    failing = np.stack([spd if not batch else spd[0], -np.eye(6, dtype=dtype)])
    lower, info = kernels.cholesky(stand_in(failing))
    assert np.asarray(info).tolist() == [0, 1]
    assert np.isnan(lower[1]).all() and not np.isnan(lower[0]).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_backward_is_the_formula(stand_in, dtype, upper):
    from ember._tensor import Tensor

    rng = np.random.default_rng(5)
    g = _make(rng, dtype, 2, 5, 5)
    lower = np.linalg.cholesky(g @ np.conj(np.swapaxes(g, -1, -2)) + 5 * np.eye(5)).astype(dtype)
    grad = _make(rng, dtype, 2, 5, 5)
    factor = np.conj(np.swapaxes(lower, -1, -2)) if upper else lower
    got = kernels.cholesky_backward(Tensor._make(stand_in(grad), "device"), Tensor._make(stand_in(factor), "device"),
                                    upper)
    # ember-autograd's formula, in numpy: S = L^{-H} Phi(L^H gL) L^{-1}, gA = (S + S^H) / 2
    gl = np.conj(np.swapaxes(grad, -1, -2)) if upper else grad
    m = np.conj(np.swapaxes(lower, -1, -2)) @ gl
    phi = np.tril(m) - 0.5 * np.einsum("...ii->...i", m)[..., None] * np.eye(5)
    s = np.stack([sl.solve_triangular(np.conj(low.T), p, lower=False) @ np.linalg.inv(low) for low, p in zip(lower, phi)])
    want = 0.5 * (s + np.conj(np.swapaxes(s, -1, -2)))
    np.testing.assert_allclose(np.asarray(got._data), want, rtol=50 * _tol(dtype), atol=50 * _tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det_backward_is_the_formula_and_declines_singular_batches(stand_in, dtype, monkeypatch):
    from ember._tensor import Tensor

    cp = sys.modules["cupy"]
    for name in ("eye", "abs", "isfinite"):
        monkeypatch.setattr(cp, name, getattr(np, name), raising=False)
    rng = np.random.default_rng(6)
    a = (np.eye(6) + 0.1 * rng.standard_normal((4, 6, 6))).astype(dtype)
    det = np.linalg.det(a).astype(dtype)
    grad = rng.standard_normal(4).astype(dtype)
    wrap = lambda x: Tensor._make(stand_in(x), "device")  # noqa: E731
    got = kernels.det_backward(wrap(grad), wrap(a), wrap(det))
    want = (grad * det)[:, None, None] * np.linalg.inv(a).swapaxes(-1, -2)  # grad * det * A^{-T}
    np.testing.assert_allclose(np.asarray(got._data), want, rtol=50 * _tol(dtype), atol=50 * _tol(dtype))
    singular = a.copy()
    singular[1, :, 0] = singular[1, :, 1]  # a rank-deficient matrix: the SVD branch must take the batch
    assert kernels.det_backward(wrap(grad), wrap(singular), wrap(det)) is None
    complex_ = a.astype(np.complex64 if dtype == np.float32 else np.complex128)
    assert kernels.det_backward(wrap(grad.astype(complex_.dtype)), wrap(complex_), wrap(det.astype(complex_.dtype))) is None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (2, 5, 5)])
@pytest.mark.parametrize("full", [False, True])
def test_gesvdj_of_the_transpose_gives_u_s_vh(stand_in, dtype, shape, full):
    a = _make(np.random.default_rng(3), dtype, *shape)
    u, s, vh, info = kernels.svd(stand_in(a), full)
    m, n = shape[-2:]
    k = min(m, n)
    assert u.shape[-2:] == ((m, m) if full else (m, k)) and vh.shape[-2:] == ((n, n) if full else (k, n))
    tol = 10 * _tol(dtype)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, rtol=tol, atol=tol)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=tol, atol=tol)
    gram = np.conj(np.swapaxes(u, -1, -2)) @ u
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(u.shape[-1]), gram.shape), atol=tol)
    assert not np.asarray(info).any()


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_fft_plans_over_trailing_dims(stand_in, norm):
    rng = np.random.default_rng(4)
    x = _make(rng, np.complex128, 3, 8, 6)
    for axes, forward in (((2,), True), ((1, 2), False), ((2, 1), True), ((0, 1, 2), True)):
        got = fft_plans.transform(stand_in(x), axes, norm, "c2c", forward)
        want = (np.fft.fftn if forward else np.fft.ifftn)(x, axes=axes, norm=norm)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    assert fft_plans.transform(stand_in(x), (1,), norm, "c2c") is None
    real = np.ascontiguousarray(x.real)
    np.testing.assert_allclose(fft_plans.transform(stand_in(real)[:, ::2], (1, 2), norm, "r2c"),
                               np.fft.rfftn(real[:, ::2], axes=(1, 2), norm=norm), rtol=1e-10, atol=1e-10)
    half = np.fft.rfftn(real, axes=(1, 2))
    spectrum = stand_in(half)
    got = fft_plans.transform(spectrum, (1, 2), norm, "c2r", last_dim_size=6)
    np.testing.assert_allclose(got, np.fft.irfftn(half, s=(8, 6), axes=(1, 2), norm=norm), rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(spectrum, half)  # the c2r input is left alone
    assert fft_plans.transform(spectrum, (1, 2), norm, "c2r", last_dim_size=9) is None  # 5 bins


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler to run the kernels' bodies on the host")
def test_stft_kernel_bodies_compiled_on_the_host_match_the_generic_code(tmp_path):
    # the CUDA C of ember.cuda.kernels.stft_frames, compiled as C++ (one loop over the thread index i),
    # against the numpy framing and overlap-add of ember._ops.fft
    from ember._ops.fft import _stft_frames_backward_kernel, _stft_frames_kernel
    from ember.cuda.kernels import stft_frames

    program = stft_frames._SOURCE.replace("__device__", "") + """
#include <cstdio>
#include <cstdlib>
typedef double T; typedef double W;
int main(int argc, char** argv) {
  long long length = atoll(argv[1]), n_fft = atoll(argv[2]), hop = atoll(argv[3]), pad = atoll(argv[4]);
  int mode = atoi(argv[5]); bool weighted = argc > 6; long long batch = 2;
  long long count = 1 + (length + 2 * pad - n_fft) / hop;
  T* x = new T[batch * length]; for (long long q = 0; q < batch * length; ++q) x[q] = q * 0.37 - q % 7;
  W* w = new W[n_fft]; for (long long q = 0; q < n_fft; ++q) w[q] = 1.0 + q * 0.01;
  for (long long i = 0; i < batch * count * n_fft; ++i) { T out;
""" + stft_frames._FRAMES_BODY + """
    printf("%.17g\\n", out); }
  T* frames = new T[batch * count * n_fft];
  for (long long q = 0; q < batch * count * n_fft; ++q) frames[q] = q % 11 - 3.5 + q * 0.001;
  bool reflect = mode == 1 && pad > 0;
  for (long long i = 0; i < batch * length; ++i) { T out;
""" + stft_frames._OVERLAP_ADD_BODY + """
    printf("%.17g\\n", out); }
}
"""
    (tmp_path / "kernels.cpp").write_text(program)
    binary = str(tmp_path / "kernels")
    subprocess.run(["g++", "-O1", "-o", binary, str(tmp_path / "kernels.cpp")], check=True)

    class _Input:
        def __init__(self, data):
            self._data = data

    batch = 2
    for length, n_fft, hop, pad in ((50, 16, 4, 8), (50, 16, 5, 8), (40, 12, 12, 6), (30, 10, 3, 0), (20, 8, 3, 4)):
        for name, mode in stft_frames.MODES.items():
            for weighted in (False, True):
                args = [binary, str(length), str(n_fft), str(hop), str(pad), str(mode)] + (["w"] if weighted else [])
                values = np.array(subprocess.run(args, capture_output=True, text=True, check=True).stdout.split(), float)
                q = np.arange(batch * length)
                frames = _stft_frames_kernel(_Input((q * 0.37 - q % 7).reshape(batch, length)), n_fft, hop, pad, name)
                if weighted:
                    frames = frames * (1.0 + np.arange(n_fft) * 0.01)
                np.testing.assert_allclose(values[:frames.size], frames.ravel(), rtol=1e-12, atol=1e-12)
                if name in ("reflect", "constant"):
                    q = np.arange(frames.size)
                    grads = (q % 11 - 3.5 + q * 0.001).reshape(frames.shape)
                    back = _stft_frames_backward_kernel(_Input(grads), length, hop, pad, name)
                    np.testing.assert_allclose(values[frames.size:], back.ravel(), rtol=1e-10, atol=1e-10)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler to run the kernels' bodies on the host")
@pytest.mark.parametrize("ctype, dtype", [("double", np.float64), ("std::complex<double>", np.complex128)])
def test_linalg_kernel_bodies_compiled_on_the_host(tmp_path, ctype, dtype):
    # the CUDA C of ember.cuda.kernels.linalg's three kernels, compiled as C++ (one loop over the thread index
    # i), against numpy: the first zero pivot, the halved lower triangle, the lower triangle or NaN
    program = f"""
#include <complex>
#include <cstdio>
#include <limits>
typedef {ctype} T;
static void put(T v) {{ std::complex<double> c(v); printf("%.17g %.17g\\n", c.real(), c.imag()); }}
int main() {{
  const long long n = 4, count = 3;
  T m[count * n * n];
  for (long long q = 0; q < count * n * n; ++q) m[q] = T(q % 5 - 1.5 + 0.25 * q);
  m[1 * n * n + 2 * n + 2] = T(0); m[2 * n * n + 0] = T(0); m[2 * n * n + 3 * n + 3] = T(0);
  for (long long i = 0; i < count; ++i) {{ const T* factors = m; int info;
{kernels._FIRST_ZERO_PIVOT_BODY}
    printf("%d\\n", info); }}
  for (long long i = 0; i < count * n * n; ++i) {{ T out;
{kernels._HALVED_TRIL_BODY}
    put(out); }}
  int infos[count] = {{0, 2, 0}}; const int* info = infos; const T* factor = m;
  const T bad = T(std::numeric_limits<double>::quiet_NaN());
  for (long long i = 0; i < count * n * n; ++i) {{ T out;
{kernels._TRIL_OR_NAN_BODY}
    put(out); }}
}}
"""
    (tmp_path / "linalg.cpp").write_text(program)
    binary = str(tmp_path / "linalg")
    subprocess.run(["g++", "-O1", "-o", binary, str(tmp_path / "linalg.cpp")], check=True)
    lines = subprocess.run([binary], capture_output=True, text=True, check=True).stdout.split("\n")
    q = np.arange(3 * 16)
    m = (q % 5 - 1.5 + 0.25 * q).astype(dtype).reshape(3, 4, 4)
    m[1, 2, 2] = m[2, 0, 0] = m[2, 3, 3] = 0
    assert [int(v) for v in lines[:3]] == [0, 3, 1]
    values = np.array([complex(float(a), float(b)) for a, b in (line.split() for line in lines[3:3 + 2 * 48])])
    halved = np.tril(m)
    halved[:, range(4), range(4)] *= 0.5
    np.testing.assert_array_equal(values[:48], halved.ravel())
    lower = np.tril(np.swapaxes(m, -1, -2)).astype(np.complex128)  # (the factor is read column-major)
    lower[1] = np.nan
    np.testing.assert_array_equal(values[48:], lower.ravel())
