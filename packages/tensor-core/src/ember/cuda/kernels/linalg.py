"""cuBLAS and cuSOLVER called directly for the linalg kernels on CUDA arrays (issue 20's speed rows).

``cupy.linalg`` and ``cupyx.scipy.linalg`` check ``info`` on the host, allocate workspaces per call and
wrap every call in several Python layers; the batched LU routines of ``cupyx.scipy.linalg`` (``lu_factor``,
``lu_solve``, ``solve_triangular``) take one matrix at a time, so ember looped over a batch in Python.
The functions here take CuPy arrays and return CuPy arrays, never wait for the GPU, and keep their
workspaces per (device, routine, dtype, sizes):

* :func:`lu_factor_batched`: cuBLAS ``getrfBatched`` (square real matrices, a batch in one call);
* :func:`lu_solve_batched`: cuBLAS ``getrsBatched`` with those factors (``op(A) X = B``);
* :func:`triangular_solve`: cuBLAS ``trsm`` (one matrix) or ``trsmBatched``;
* :func:`cholesky`: cuSOLVER ``potrf`` (one matrix, cached workspace) or ``potrfBatched``; ``info`` stays
  on the device (the non-``_ex`` op reads it once, as PyTorch does); :func:`cholesky_backward`, its
  gradient for a backward pass that records nothing (a GEMM, two in-place ``trsm`` and three kernels);
* :func:`svd`: cuSOLVER ``gesvdj`` (Jacobi, PyTorch's default CUDA driver), one call per matrix;
* :func:`det_backward` and :func:`solve_backward`: the determinant's and the solve's gradients through those
  routines, for a backward pass that records nothing.

Layout: cuBLAS and cuSOLVER read matrices column-major, ember's arrays are row-major. A row-major
``(r, c)`` matrix is the column-major ``(c, r)`` matrix of its transpose; each function says how it uses
that (a transposed problem, or one transposed copy). Every function returns None for what it does not
take (dtypes other than float32/float64/complex64/complex128, sizes beyond int32), and the caller keeps
its previous path for those.

CuPy is imported on the first call only: importing this module needs no GPU.
"""

from __future__ import annotations

import collections
import math

import numpy as np

__all__ = ["lu_factor_batched", "lu_solve_batched", "triangular_solve", "cholesky", "cholesky_backward", "svd",
           "det_backward", "solve_backward", "supported"]

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", np.dtype(np.complex64): "c",
           np.dtype(np.complex128): "z"}
_REAL = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
_INT32 = np.dtype(np.int32)
_INT_MAX = 2**31 - 1

# cuBLAS/cuSOLVER enums (cublas_api.h, cusolver_common.h)
_OP_N = 0
_FILL_LOWER, _FILL_UPPER = 0, 1
_DIAG_NON_UNIT, _DIAG_UNIT = 0, 1
_SIDE_LEFT, _SIDE_RIGHT = 0, 1
_EIG_MODE_VECTOR = 1

#: The largest matrix the batched cuBLAS LU takes: beyond it one cuSOLVER ``getrf`` per matrix is faster.
BATCHED_LU_MAX = 128


def supported(*arrays):
    """Whether every array is a CuPy array of one dtype these routines take, with int32-sized dims, on the
    current GPU (where the libraries' handles run)."""
    dtype = arrays[0].dtype
    if dtype not in _PREFIX:
        return False
    device = None
    for a in arrays:
        if a.dtype != dtype or type(a).__module__.split(".")[0] != "cupy" or a.ndim < 2:
            return False
        if max(a.shape[-2:]) > _INT_MAX or a.size > _INT_MAX:
            return False
        device = _device() if device is None else device
        if a.data.device_id != device:
            return False
    return True


# -- plumbing ----------------------------------------------------------------------------------------


def _cp():
    import cupy

    return cupy


def _libs():
    from cupy_backends.cuda.libs import cublas, cusolver

    return cublas, cusolver


def _cublas_handle():
    return _cp().cuda.device.get_cublas_handle()


def _cusolver_handle():
    return _cp().cuda.device.get_cusolver_handle()


_ONES = {}  # dtype -> (host array holding 1, its address): trsm's alpha, read by cuBLAS from host memory


def _host_one(dtype):
    entry = _ONES.get(dtype)
    if entry is None:
        one = np.ones(1, dtype)
        entry = _ONES[dtype] = (one, one.ctypes.data)
    return entry[1]


_POINTERS = collections.OrderedDict()  # (device, first address, step, count) -> device array of the addresses
_POINTERS_KEPT = 64


def _pointers(a):
    """A device array of the addresses of each matrix of the C-contiguous batch ``a`` (``(B, r, c)``).

    The arrays are cached by (device, first address, step, count): CuPy's pool hands the same addresses out
    again, and an address table depends on nothing else, so a repeated call launches nothing. The cache
    also keeps each table alive until its library call is queued (a temporary's memory would go back to
    the pool as soon as ``.data.ptr`` is read, and the next table of the same call could reuse it)."""
    cp = _cp()
    count = a.shape[0]
    step = a.shape[1] * a.shape[2] * a.itemsize
    start = a.data.ptr
    key = (a.data.device_id, start, step, count)
    table = _POINTERS.get(key)
    if table is not None:
        _POINTERS.move_to_end(key)
        return table
    table = cp.arange(start, start + step * count, step, dtype=cp.uintp)
    _POINTERS[key] = table
    if len(_POINTERS) > _POINTERS_KEPT:
        _POINTERS.popitem(last=False)
    return table


def _flat(a):
    """``a`` as a fresh C-contiguous ``(B, r, c)`` batch this module may overwrite."""
    cp = _cp()
    r, c = a.shape[-2:]
    return cp.array(a.reshape(-1, r, c) if a._c_contiguous else a, order="C", copy=True).reshape(-1, r, c)


_WORKSPACES = {}  # (device, routine, dtype, sizes) -> (device workspace, its size in elements)


def _workspace(key, elements, dtype):
    """A cached device buffer of ``elements`` of ``dtype`` for the routine of ``key`` (kernels on one stream
    run in order, so successive calls may share it)."""
    entry = _WORKSPACES.get(key)
    if entry is None:
        cp = _cp()
        entry = _WORKSPACES[key] = (cp.empty(max(int(elements), 1), dtype), int(elements))
    return entry


def _device():
    return _cp().cuda.runtime.getDevice()


# -- LU ----------------------------------------------------------------------------------------------


def lu_factor_batched(a):
    """``(LU, pivots, info)`` of each square matrix of ``a`` (``(*, n, n)``) in one cuBLAS ``getrfBatched``.

    ``LU`` is row-major, ``L`` (unit diagonal implied) below the diagonal and ``U`` on and above it, as
    LAPACK's ``getrf`` gives; ``pivots`` are 1-based int32 row swaps; ``info`` (int32, on the device) is the
    1-based index of the first exactly-zero diagonal entry of ``U``, 0 if none. None for calls it does not
    take (not square, empty, larger than :data:`BATCHED_LU_MAX`, complex: the batched cuBLAS LU may pivot
    complex matrices by ``|z|`` where LAPACK, and so the CPU, takes ``|re| + |im|``, which would change the
    factors; complex matrices keep one cuSOLVER ``getrf`` per matrix).
    """
    if not supported(a) or a.dtype.kind == "c" or a.shape[-1] != a.shape[-2] or a.size == 0:
        return None
    if a.shape[-1] > BATCHED_LU_MAX:
        return None
    cp = _cp()
    cublas, _ = _libs()
    batch, n = a.shape[:-2], a.shape[-1]
    # getrf factors what it reads: the column-major copy of each matrix (a transposed copy of the rows)
    work = _flat(cp.swapaxes(a, -1, -2))
    count = work.shape[0]
    pivots = cp.empty((count, n), _INT32)
    dev_info = cp.empty(count, _INT32)
    getrf = getattr(cublas, _PREFIX[a.dtype] + "getrfBatched")
    work_ptrs = _pointers(work)  # kept alive until the call is queued (see _pointers)
    getrf(_cublas_handle(), n, work_ptrs.data.ptr, n, pivots.data.ptr, dev_info.data.ptr, count)
    LU = cp.ascontiguousarray(cp.swapaxes(work, -1, -2)).reshape(a.shape)
    # LAPACK's info, the first exactly-zero pivot, in one kernel (cuBLAS documents its own as "a zero
    # pivot", not which one)
    info = cp.empty(count, _INT32)
    _first_zero_pivot_kernel()(work, n, info)
    return LU, pivots.reshape(*batch, n), info.reshape(batch)


_FIRST_ZERO_PIVOT_BODY = """
int found = 0;
for (long long k = 0; k < n; ++k) {
    if (factors[i * n * n + k * n + k] == T(0)) { found = (int)k + 1; break; }
}
info = found;
"""
_FIRST_ZERO_PIVOT = None


def _first_zero_pivot_kernel():
    """One thread per matrix of a ``(B, n, n)`` batch: the 1-based index of its first zero diagonal entry."""
    global _FIRST_ZERO_PIVOT
    if _FIRST_ZERO_PIVOT is None:
        _FIRST_ZERO_PIVOT = _cp().ElementwiseKernel(
            "raw T factors, int64 n",
            "int32 info",
            _FIRST_ZERO_PIVOT_BODY,
            "ember_lu_first_zero_pivot",
        )
    return _FIRST_ZERO_PIVOT


def lu_solve_batched(lu, pivots, b, trans):
    """``X`` with ``op(A) X = B`` from ``A``'s :func:`lu_factor_batched` factors, in one cuBLAS ``getrsBatched``.

    Args:
        lu: ``(*, n, n)`` row-major LU factors; pivots: ``(*, n)`` 1-based int32; b: ``(*, n, k)``, ``lu``'s
            dtype; batch dims broadcast.
        trans (int): 0 for ``A``, 1 for ``A^T``, 2 for ``A^H`` (LAPACK's and cuBLAS' codes).

    Returns:
        ``(*, n, k)`` C-contiguous, or None for calls it does not take.
    """
    if not supported(lu, b) or lu.shape[-1] != lu.shape[-2] or b.shape[-2] != lu.shape[-1]:
        return None
    cp = _cp()
    cublas, _ = _libs()
    n, k = b.shape[-2:]
    batch = np.broadcast_shapes(lu.shape[:-2], b.shape[:-2], pivots.shape[:-1])
    if n == 0 or k == 0 or math.prod(batch) == 0:
        return None
    # getrs reads the column-major factors: a transposed copy of the row-major LU; B column-major too
    factors = _flat(cp.swapaxes(cp.broadcast_to(lu, batch + (n, n)), -1, -2))
    piv = cp.ascontiguousarray(cp.broadcast_to(pivots, batch + (n,)), dtype=_INT32)
    rhs = _flat(cp.swapaxes(cp.broadcast_to(b, batch + (n, k)), -1, -2))  # (B, k, n): column-major (n, k)
    count = factors.shape[0]
    host_info = np.zeros(1, _INT32)
    getrs = getattr(cublas, _PREFIX[lu.dtype] + "getrsBatched")
    factor_ptrs, rhs_ptrs = _pointers(factors), _pointers(rhs)
    getrs(_cublas_handle(), trans, n, k, factor_ptrs.data.ptr, n, piv.data.ptr, rhs_ptrs.data.ptr, n,
          host_info.ctypes.data, count)
    if host_info[0] < 0:  # a parameter error, found on the host before any launch
        raise RuntimeError(f"cuBLAS getrsBatched: parameter {-int(host_info[0])} had an illegal value")
    return cp.ascontiguousarray(cp.swapaxes(rhs, -1, -2)).reshape(batch + (n, k))


# -- triangular solves -------------------------------------------------------------------------------


def triangular_solve(a, b, upper, left=True, unitriangular=False, overwrite_b=False):
    """``X`` with ``A X = B`` (``X A = B`` if not ``left``) for triangular ``A``: cuBLAS ``trsm``, batched.

    Only ``A``'s triangle named by ``upper`` is read (not its diagonal if ``unitriangular``); a zero on the
    diagonal gives inf/NaN, as BLAS does. Row-major ``A`` is the column-major ``A^T`` and row-major ``B``
    the column-major ``B^T``, so ``A X = B`` is solved as ``X^T A^T = B^T`` (the right side, the other
    triangle) on the arrays as they are: no transposed copies.

    ``overwrite_b``: ``B`` is a C-contiguous array of the full batch that the caller gives up: the solution
    is written into it (no copy).

    Returns:
        ``(*, r, c)`` (``B``'s matrix shape, the broadcast batch), C-contiguous; or None for calls it does not
        take.
    """
    if not supported(a, b) or a.shape[-1] != a.shape[-2]:
        return None
    cp = _cp()
    cublas, _ = _libs()
    rows, cols = b.shape[-2:]
    n = a.shape[-1]
    if (rows if left else cols) != n:
        return None
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if rows == 0 or cols == 0 or math.prod(batch) == 0:
        return None
    mats = cp.ascontiguousarray(cp.broadcast_to(a, batch + (n, n))).reshape(-1, n, n)
    if overwrite_b and b._c_contiguous and b.shape[:-2] == batch:
        out = b.reshape(-1, rows, cols)
    else:
        out = _flat(cp.broadcast_to(b, batch + (rows, cols)))
    side = _SIDE_RIGHT if left else _SIDE_LEFT
    uplo = _FILL_LOWER if upper else _FILL_UPPER  # the transpose's triangle
    diag = _DIAG_UNIT if unitriangular else _DIAG_NON_UNIT
    handle = _cublas_handle()
    prefix = _PREFIX[a.dtype]
    alpha = _host_one(a.dtype)
    # column-major B^T is (cols, rows) with leading dimension cols
    if out.shape[0] == 1:
        trsm = getattr(cublas, prefix + "trsm")
        trsm(handle, side, uplo, _OP_N, diag, cols, rows, alpha, mats.data.ptr, n, out.data.ptr, cols)
    else:
        trsm = getattr(cublas, prefix + "trsmBatched")
        mat_ptrs, out_ptrs = _pointers(mats), _pointers(out)
        trsm(handle, side, uplo, _OP_N, diag, cols, rows, alpha, mat_ptrs.data.ptr, n, out_ptrs.data.ptr, cols,
             out.shape[0])
    return out.reshape(batch + (rows, cols))


# -- Cholesky ----------------------------------------------------------------------------------------

_HALVED_TRIL_BODY = """
const long long col = i % n;
const long long row = (i / n) % n;
out = col > row ? T(0) : (col == row ? T(0.5) * m[i] : m[i]);
"""
_HALVED_TRIL = None


def _halved_tril_kernel():
    """``tril(M)`` with the diagonal halved, per matrix of a batch, in one kernel (cholesky's backward)."""
    global _HALVED_TRIL
    if _HALVED_TRIL is None:
        _HALVED_TRIL = _cp().ElementwiseKernel(
            "raw T m, int64 n",
            "T out",
            _HALVED_TRIL_BODY,
            "ember_cholesky_halved_tril",
        )
    return _HALVED_TRIL


def cholesky_backward(grad, L, upper):
    """The gradient of ``A`` in ``L = cholesky(A)`` (``U`` when ``upper``) for a backward pass that records
    nothing, on CUDA tensors: ember-autograd's formula (``S = L^{-H} Phi(L^H gL) L^{-1}``, returned as
    ``(S + S^H) / 2``) as one GEMM, one kernel for ``Phi`` (the lower triangle, diagonal halved), two cuBLAS
    ``trsm`` writing in place and two launches for the Hermitian part, where the ops would dispatch about
    twelve times.

    Returns:
        The gradient (a Tensor of ``A``'s shape), or None for calls it does not take (then the formula runs).
    """
    from ..._tensor import Tensor

    g, factor = grad._data, L._data
    if type(g) is not type(factor) or not supported(g, factor) or g.shape != factor.shape:
        return None
    if factor.shape[-1] != factor.shape[-2] or factor.size == 0:
        return None
    cp = _cp()
    if upper:  # U = L^H, and its gradient the conjugate transpose
        factor, g = cp.swapaxes(factor, -1, -2).conj(), cp.swapaxes(g, -1, -2).conj()  # views when real
    n = factor.shape[-1]
    factor_h = cp.swapaxes(factor, -1, -2).conj()
    phi = cp.empty(factor.shape, factor.dtype)
    _halved_tril_kernel()(cp.matmul(factor_h, g), n, phi)
    x = triangular_solve(factor_h, phi, upper=True, overwrite_b=True)  # L^H X = Phi
    if x is None:
        return None
    s = triangular_solve(factor, x, upper=False, left=False, overwrite_b=True)  # S L = X
    if s is None:
        return None
    out = s + cp.swapaxes(s, -1, -2).conj()
    out *= 0.5
    return Tensor._make(out, L._device)



# (the factor is column-major: L[row, col] is at col * n + row of its matrix)
_TRIL_OR_NAN_BODY = """
const long long col = i % n;
const long long row = (i / n) % n;
const long long mat = i / (n * n);
out = info[mat] != 0 ? bad : (col > row ? T(0) : factor[mat * n * n + col * n + row]);
"""
_TRIL_OR_NAN = None


def _tril_or_nan_kernel():
    """One kernel: the row-major lower triangle of each column-major factor, or NaN everywhere for a matrix
    whose ``info`` is not 0 (the CPU's values for a failed factorization), without reading ``info`` on the
    host."""
    global _TRIL_OR_NAN
    if _TRIL_OR_NAN is None:
        _TRIL_OR_NAN = _cp().ElementwiseKernel(
            "raw T factor, raw int32 info, int64 n, T bad",
            "T out",
            _TRIL_OR_NAN_BODY,
            "ember_cholesky_tril_or_nan_cm",
        )
    return _TRIL_OR_NAN


def cholesky(a):
    """``(L, info)``: the lower Cholesky factor of each Hermitian positive-definite matrix of ``a``.

    Reads ``a``'s lower triangle. ``a`` is copied transposed, so the copy read column-major is ``a`` itself,
    and cuSOLVER ``potrf`` factors its lower triangle in place (``a = L L^H``), as PyTorch calls it: the
    factorization of the upper triangle of the untransposed copy took twice as long on an H100 (256 x 256
    float32). One kernel then writes ``L`` row-major, zeros above the diagonal. ``info`` (int32, device) is
    LAPACK's: the order of the first leading minor that is not positive-definite, 0 on success; those
    matrices' factors are NaN. None for calls it does not take.
    """
    if not supported(a) or a.shape[-1] != a.shape[-2] or a.size == 0:
        return None
    cp = _cp()
    _, cusolver = _libs()
    batch, n = a.shape[:-2], a.shape[-1]
    work = cp.array(cp.swapaxes(a.reshape(-1, n, n), -1, -2), order="C", copy=True)  # column-major a, ours
    count = work.shape[0]
    handle = _cusolver_handle()
    prefix = _PREFIX[a.dtype]
    info = cp.empty(count, _INT32)
    if count == 1:
        key = (_device(), "potrf", a.dtype, n)
        entry = _WORKSPACES.get(key)
        if entry is None:
            size = getattr(cusolver, prefix + "potrf_bufferSize")(handle, _FILL_LOWER, n, work.data.ptr, n)
            entry = _workspace(key, size, a.dtype)
        buffer, size = entry
        getattr(cusolver, prefix + "potrf")(handle, _FILL_LOWER, n, work.data.ptr, n, buffer.data.ptr, size,
                                            info.data.ptr)
    else:
        work_ptrs = _pointers(work)
        getattr(cusolver, prefix + "potrfBatched")(handle, _FILL_LOWER, n, work_ptrs.data.ptr, n, info.data.ptr,
                                                   count)
    out = cp.empty_like(work)
    bad = np.array(np.nan, a.dtype)[()]
    _tril_or_nan_kernel()(work, info, n, bad, out)
    return out.reshape(a.shape), info.reshape(batch)


# -- SVD ---------------------------------------------------------------------------------------------

_GESVDJ_PARAMS = {}  # device -> cuSOLVER gesvdjInfo (default tolerance and sweeps, sorted values)


def _gesvdj_params():
    device = _device()
    params = _GESVDJ_PARAMS.get(device)
    if params is None:
        _, cusolver = _libs()
        params = _GESVDJ_PARAMS[device] = cusolver.createGesvdjInfo()
    return params


def svd(a, full_matrices):
    """``(U, S, Vh, info)`` of each matrix of ``a`` through cuSOLVER ``gesvdj`` (one call per matrix).

    gesvdj factors the column-major matrix it reads, ``M = a^T`` (``(n, m)``): ``M = U' S V'^H``, so
    ``a = conj(V') S U'^T``: ``U = conj(V')`` and ``Vh = U'^T``. Its column-major ``V'`` read row-major is
    ``V'^T``, hence ``U`` is the conjugate of that buffer's transpose (a view for real dtypes), and
    ``Vh`` the transpose of the column-major ``U'`` read row-major. ``info`` (int32, device, one per matrix)
    is gesvdj's: positive when the Jacobi sweeps did not converge. None for calls it does not take.
    """
    if not supported(a) or a.size == 0:
        return None
    cp = _cp()
    _, cusolver = _libs()
    *batch, m, n = a.shape
    batch = tuple(batch)
    k = min(m, n)
    econ = 0 if full_matrices else 1
    u_cols = n if full_matrices else k  # U' is (n, u_cols), V' is (m, v_cols), column-major
    v_cols = m if full_matrices else k
    work = _flat(a)  # gesvdj overwrites its input
    count = work.shape[0]
    real = _REAL.get(a.dtype, a.dtype)
    S = cp.empty((count, k), real)
    u_buf = cp.empty((count, u_cols, n), a.dtype)  # column-major (n, u_cols): U'
    v_buf = cp.empty((count, v_cols, m), a.dtype)  # column-major (m, v_cols): V'
    info = cp.empty(count, _INT32)
    handle = _cusolver_handle()
    prefix = _PREFIX[a.dtype]
    params = _gesvdj_params()
    key = (_device(), "gesvdj", a.dtype, m, n, econ)
    entry = _WORKSPACES.get(key)
    if entry is None:
        size = getattr(cusolver, prefix + "gesvdj_bufferSize")(
            handle, _EIG_MODE_VECTOR, econ, n, m, work.data.ptr, n, S.data.ptr, u_buf.data.ptr, n,
            v_buf.data.ptr, m, params)
        entry = _workspace(key, size, a.dtype)
    buffer, size = entry
    gesvdj = getattr(cusolver, prefix + "gesvdj")
    for i in range(count):  # no batched gesvdj beyond 32x32 matrices
        gesvdj(handle, _EIG_MODE_VECTOR, econ, n, m, work[i].data.ptr, n, S[i].data.ptr, u_buf[i].data.ptr, n,
               v_buf[i].data.ptr, m, buffer.data.ptr, size, info[i:].data.ptr, params)
    U = cp.swapaxes(v_buf, -1, -2)  # (count, m, v_cols), column-major
    if a.dtype.kind == "c":
        U = cp.conj(U)
    Vh = u_buf  # (count, u_cols, n): U'^T, row-major
    return (U.reshape(batch + (m, v_cols)), S.reshape(batch + (k,)), Vh.reshape(batch + (u_cols, n)),
            info.reshape(batch))


# -- the determinant's gradient ----------------------------------------------------------------------


def det_backward(grad, A, result):
    """The gradient of real ``A`` in ``det(A)`` for a backward pass that records nothing, on CUDA tensors:
    ember-autograd's well-conditioned branch (``grad * det * A^{-T}``, ``A^{-T}`` from one batched LU of
    ``A^T`` and one ``getrs``, as ``linalg.solve_ex`` computes it) and its precision test (the 1-norm
    condition estimate against ``1/sqrt(eps)``, a zero pivot) on the arrays, with one host read for that
    test, where the formula dispatched about fifteen ops.

    Returns:
        The gradient (a Tensor of ``A``'s shape), or None for calls it does not take (complex, empty, larger
        than :data:`BATCHED_LU_MAX`) and for batches with a matrix the inverse cannot serve (then the
        formula's SVD branch runs).
    """
    from ..._ops._dispatch import ops_intercepted
    from ..._tensor import Tensor

    if ops_intercepted() or any(type(t) is not Tensor for t in (grad, A, result)):
        return None
    g, a, r = grad._data, A._data, result._data
    if not supported(a) or a.dtype.kind == "c" or type(g) is not type(a) or type(r) is not type(a):
        return None
    if g.dtype != a.dtype or r.dtype != a.dtype or g.shape != a.shape[:-2] or r.shape != a.shape[:-2]:
        return None
    cp = _cp()
    n = a.shape[-1]
    a_t = cp.swapaxes(a, -1, -2)
    factors = lu_factor_batched(a_t)
    if factors is None:
        return None
    lu, pivots, info = factors
    eye = cp.broadcast_to(cp.eye(n, dtype=a.dtype), a.shape)
    inverse_t = lu_solve_batched(lu, pivots, eye, 0)
    if inverse_t is None:
        return None
    eps = 1.1e-16 if a.dtype == np.float64 else 6e-8
    cond = cp.abs(a).sum(-2).max(-1) * cp.abs(inverse_t).sum(-1).max(-1)
    bad = (info != 0) | ~cp.isfinite(cond) | (cond > eps**-0.5)
    if bool(bad.any()):  # the one host read, as the formula's
        return None
    out = (g * r)[..., None, None] * inverse_t
    return Tensor._make(out, A._device)


# -- the solve's gradient ------------------------------------------------------------------------------


def solve_backward(grad, X, LU, pivots):
    """The gradients of ``A`` and ``B`` in ``X = solve(A, B)`` (``A X = B``, real, ``B`` a batch of matrices) for
    a backward pass that records nothing, on CUDA tensors, from the forward's LU factors: ``gB = A^{-T} gX``
    (one cuBLAS ``getrsBatched`` with ``trans``, as ``linalg.lu_solve(..., adjoint=True)`` runs it) and
    ``gA = -gB X^T`` (one batched GEMM with ``alpha = -1``: the negated product, exactly), where the formula
    dispatched ``lu_solve``, a transpose, ``matmul`` and ``neg``.

    Returns:
        ``(gA, gB)`` as Tensors, or None for calls it does not take.
    """
    from ..._ops._dispatch import ops_intercepted
    from ..._tensor import Tensor
    from .. import _bf16

    if ops_intercepted() or any(type(t) is not Tensor for t in (grad, X, LU, pivots)):
        return None
    g, x, lu, piv = grad._data, X._data, LU._data, pivots._data
    if not supported(g, x, lu) or lu.dtype.kind == "c" or g.shape != x.shape or piv.dtype != _INT32:
        return None
    if lu.dtype not in _bf16._GEMM_TYPES or lu.ndim != x.ndim or lu.shape[:-2] != x.shape[:-2]:
        return None
    gb = lu_solve_batched(lu, piv, g, 1)
    if gb is None:
        return None
    cp = _cp()
    ga = cp.empty(lu.shape, lu.dtype)
    _bf16._product_into(ga, gb, cp.swapaxes(x, -1, -2), alpha=-1.0)
    return Tensor._make(ga, LU._device), Tensor._make(gb, grad._device)
