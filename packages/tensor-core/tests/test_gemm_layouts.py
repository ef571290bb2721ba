"""The cuBLAS call layouts of ember.cuda._bf16 (bfloat16/float32/float64 GEMMs), checked on the CPU.

cuBLAS is column-major; ``_bf16`` passes row-major CuPy arrays as transposed problems with leading
dimensions and transpose flags chosen from their strides. Here a stand-in for ``cublas.gemmEx`` /
``gemmStridedBatchedEx`` reads the operands from memory exactly as cuBLAS would (column-major, ``ld``,
batch strides) and computes in numpy, so every layout decision runs without a GPU; the GPU tests
(tests/cuda/test_cuda_gemm.py, test_cuda_tensors.py) check the real library.
"""

import contextlib
import ctypes
import sys
import types

import ml_dtypes
import numpy as np
import pytest

from ember.cuda import _bf16

BF16 = np.dtype(ml_dtypes.bfloat16)
_TYPES = {14: BF16, 0: np.dtype(np.float32), 1: np.dtype(np.float64)}


class _HostArray(np.ndarray):
    """A numpy array with CuPy's ``.data.ptr`` and ``.device`` (a no-op context)."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)

    @property
    def device(self):
        return contextlib.nullcontext()

    @property
    def _c_contiguous(self):
        return self.flags.c_contiguous


def _ndarray(shape, dtype, memptr=None):
    """``cupy.ndarray(shape, dtype[, memptr])``: new memory (NaN-filled), or a C-contiguous view of ``memptr``'s."""
    if memptr is None:
        return _wrap(np.full(shape, np.nan, dtype))
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    return np.ndarray(shape, dtype, buffer=(ctypes.c_char * size).from_address(memptr.ptr)).view(_HostArray)


def _wrap(x):
    return np.asarray(x).view(_HostArray)


def _column_major(ptr, dtype, rows, cols, ld):
    """The (rows, cols) column-major matrix with leading dimension ``ld`` at address ``ptr``."""
    size = ((cols - 1) * ld + rows) * dtype.itemsize if rows and cols else 0
    flat = np.frombuffer((ctypes.c_char * max(size, 1)).from_address(ptr), dtype=dtype)
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (dtype.itemsize, ld * dtype.itemsize))


def _gemm_strided(handle, ta, tb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b,
                  beta, c, c_type, ldc, stride_c, count, compute, algo):
    assert compute in (68, 70)
    wide = np.float64 if compute == 70 else np.float32
    scalar = ctypes.c_double if compute == 70 else ctypes.c_float
    al, be = scalar.from_address(alpha).value, scalar.from_address(beta).value
    ta_dtype, tb_dtype, tc_dtype = _TYPES[a_type], _TYPES[b_type], _TYPES[c_type]
    for i in range(count):
        ra, ca = (m, k) if ta == 0 else (k, m)
        rb, cb = (k, n) if tb == 0 else (n, k)
        assert lda >= max(1, ra) and ldb >= max(1, rb) and ldc >= max(1, m)
        left = _column_major(a + i * stride_a * ta_dtype.itemsize, ta_dtype, ra, ca, lda).astype(wide)
        right = _column_major(b + i * stride_b * tb_dtype.itemsize, tb_dtype, rb, cb, ldb).astype(wide)
        left, right = (left if ta == 0 else left.T), (right if tb == 0 else right.T)
        out = _column_major(c + i * stride_c * tc_dtype.itemsize, tc_dtype, m, n, ldc)
        acc = al * (left @ right)
        if be != 0:
            acc = acc + be * out.astype(wide)
        out[...] = acc.astype(tc_dtype)


def _gemm(handle, ta, tb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc, compute, algo):
    _gemm_strided(handle, ta, tb, m, n, k, alpha, a, a_type, lda, 0, b, b_type, ldb, 0, beta, c, c_type, ldc, 0, 1,
                  compute, algo)


@pytest.fixture
def host_cublas(monkeypatch):
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.cublas = types.SimpleNamespace(gemmEx=_gemm, gemmStridedBatchedEx=_gemm_strided,
                                        setStream=lambda handle, stream: None)
    for name in ("cupy_backends", "cupy_backends.cuda"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name) or types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs", libs)
    fake_cupy = types.SimpleNamespace(
        empty=lambda shape, dtype: _wrap(np.full(shape, np.nan, dtype)),
        ndarray=_ndarray,
        ascontiguousarray=lambda x: _wrap(np.ascontiguousarray(x)),
        broadcast_to=lambda x, shape: _wrap(np.broadcast_to(x, shape)),
        matmul=np.matmul,
        cuda=types.SimpleNamespace(device=types.SimpleNamespace(get_cublas_handle=lambda: 0),
                                   get_current_stream=lambda: types.SimpleNamespace(ptr=0)),
    )
    monkeypatch.setattr(_bf16, "cupy_module", lambda: fake_cupy)
    monkeypatch.setattr(_bf16, "_cublas_module", None)  # imported once: from the stand-in above


def _cases(make):
    return [
        (make(5, 7), make(7, 3)), (make(7, 5).T, make(7, 3)), (make(5, 7), make(3, 7).T), (make(7, 5).T, make(3, 7).T),
        (make(5, 14)[:, ::2], make(7, 3)), (make(10, 7)[::2], make(7, 6)[:, 1:4]), (make(7), make(7, 3)),
        (make(5, 7), make(7)), (make(7), make(7)), (make(2, 3, 5, 7), make(7, 4)), (make(4, 5, 7), make(4, 7, 3)),
        (make(4, 5, 7), make(1, 7, 3)), (make(2, 1, 5, 7), make(3, 7, 2)),
        (make(4, 7, 5).transpose(0, 2, 1), make(4, 3, 7).transpose(0, 2, 1)), (make(1, 7), make(7, 1)),
        (make(0, 7), make(7, 3)), (make(5, 0), make(0, 3)), (make(4, 5, 7)[:, :, ::2], make(4, 4, 3)),
        (make(7, 5)[::-1], make(5, 2)),
    ]


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_float_products_read_operands_as_cublas_does(host_cublas, dtype, tol):
    rng = np.random.default_rng(0)
    for a, b in _cases(lambda *s: rng.standard_normal(s).astype(dtype)):
        got = np.asarray(_bf16.matmul(_wrap(a), _wrap(b)))
        want = np.matmul(a, b)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    inp, a, b = (rng.standard_normal(s).astype(dtype) for s in ((3,), (5, 7), (7, 3)))
    got = np.asarray(_bf16.added_product(_wrap(inp), _wrap(a), _wrap(b), 0.5, 2.0))
    np.testing.assert_allclose(got, 0.5 * inp + 2.0 * (a @ b), rtol=tol, atol=tol)


def test_bfloat16_products_round_once_from_float32(host_cublas):
    rng = np.random.default_rng(1)
    for a, b in _cases(lambda *s: rng.standard_normal(s).astype(BF16)):
        got = np.asarray(_bf16.matmul(_wrap(a), _wrap(b)))
        want = (a.astype(np.float32) @ b.astype(np.float32)).astype(BF16)
        assert got.dtype == BF16 and got.shape == want.shape
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_fast_products_read_operands_as_cublas_does(host_cublas, dtype, tol):
    # product_2d (the checked cuda kernels' cuBLAS call) on every 2-D layout _describe reads
    rng = np.random.default_rng(2)
    make = lambda *s: rng.standard_normal(s).astype(dtype)  # noqa: E731
    for a, b in [c for c in _cases(make) if c[0].ndim == 2 and c[1].ndim == 2 and 0 not in c[0].shape + c[1].shape]:
        got = np.asarray(_bf16.product_2d(_wrap(a), _wrap(b)))
        assert got.dtype == dtype and got.shape == (a.shape[0], b.shape[1])
        np.testing.assert_allclose(got, a @ b, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_stacked_products_of_the_matmul_entry(host_cublas, monkeypatch, dtype, tol):
    # ember.cuda.kernels.products.matmul on stacks (attention's q @ k^T, weights @ v, their gradients' transposed
    # operands, a stack times one matrix): the strided-batched call reads them as cuBLAS would
    import ember
    from ember._tensor import Tensor
    from ember.cuda.kernels import _arrays, products

    monkeypatch.setattr(_arrays, "_state", {"ndarray": _HostArray, "one_gpu": True, "device": None})
    rng = np.random.default_rng(3)
    make = lambda *s: rng.standard_normal(s).astype(dtype)  # noqa: E731
    q, k, w, x, m = make(3, 2, 16, 8), make(3, 2, 16, 8), make(3, 2, 16, 16), make(3, 16, 2, 8), make(8, 5)
    cases = [(q, k.swapaxes(-1, -2)), (w, k), (w.swapaxes(-1, -2), q), (x.swapaxes(1, 2), k.swapaxes(-1, -2)),
             (q, m), (q.swapaxes(-1, -2), w[..., :, :8])]
    cpu = ember.device("cpu")
    for a, b in cases:
        got = products.matmul(Tensor._make(_wrap(a), cpu), Tensor._make(_wrap(b), cpu))
        want = np.matmul(a, b)
        assert got is not None and got.dtype == dtype and got.shape == want.shape and got.flags.c_contiguous
        np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)
    # broadcasting between batch dims, or mismatched inner dims: declined (the usual path raises or broadcasts)
    assert products.matmul(Tensor._make(_wrap(q), cpu), Tensor._make(_wrap(make(1, 2, 8, 4)), cpu)) is None
    assert products.matmul(Tensor._make(_wrap(q), cpu), Tensor._make(_wrap(make(3, 2, 9, 4)), cpu)) is None
