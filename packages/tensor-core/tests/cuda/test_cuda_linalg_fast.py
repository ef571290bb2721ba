"""ember.linalg on cuda through cuBLAS/cuSOLVER called directly (ember.cuda.kernels.linalg), against the CPU.

Covers the paths issue 20's speed rows take: batched LU (``getrfBatched``/``getrsBatched``) behind
``lu_factor``, ``lu_solve`` and ``solve`` (forward and backward), ``trsm``/``trsmBatched`` behind
``solve_triangular`` (and cholesky's backward), ``potrf``/``potrfBatched`` behind ``cholesky`` and
``gesvdj`` behind ``svd``. Oracles: the CPU results (LAPACK) within float rounding, reconstructions for the
SVD (its vectors are defined up to signs), and each routine called directly to show the fast path ran.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.testing import assert_close

pytestmark = pytest.mark.cuda

DTYPES = [ember.float32, ember.float64, ember.complex64, ember.complex128]


def _tol(dtype):
    return (2e-4, 2e-4) if dtype in (ember.float32, ember.complex64) else (1e-10, 1e-10)


def _make(shape, dtype, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if dtype.is_complex:
        values = values + 1j * rng.standard_normal(shape)
    if shift:
        values = values + shift * np.eye(shape[-1])
    return ember.tensor(values, dtype=dtype)


def _pd(shape, dtype, seed=0):
    a = _make(shape, dtype, seed)
    return a @ a.mT.conj() + shape[-1] * ember.eye(shape[-1], dtype=dtype)


def _kernels():
    ember.cuda.init()
    from ember.cuda.kernels import linalg

    return linalg


def _close(gpu, cpu, dtype, scale=1.0):
    assert gpu.device.type == "cuda"
    rtol, atol = _tol(dtype)
    assert_close(gpu.cpu(), cpu, rtol=rtol * scale, atol=atol * scale)


# -- the routines themselves ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_routines_take_the_common_calls(dtype):
    k = _kernels()
    a = _make((4, 8, 8), dtype, shift=4).cuda()._data
    b = _make((4, 8, 3), dtype, seed=1).cuda()._data
    factors = k.lu_factor_batched(a)
    if dtype.is_complex:  # complex LU keeps cuSOLVER's getrf per matrix (LAPACK's pivots)
        assert factors is None
        factors = ember.linalg.lu_factor(_make((4, 8, 8), dtype, shift=4).cuda())
        factors = (factors[0]._data, factors[1]._data)
    assert k.lu_solve_batched(factors[0], factors[1], b, 0) is not None
    assert k.triangular_solve(a, b, upper=True) is not None
    assert k.cholesky(_pd((3, 6, 6), dtype).cuda()._data) is not None
    assert k.svd(a, False) is not None


def test_routines_decline_what_they_do_not_take():
    k = _kernels()
    half = ember.ones(4, 4, dtype=ember.float16, device="cuda")._data
    wide = ember.ones(3, 4, device="cuda")._data
    big = ember.ones(2, k.BATCHED_LU_MAX + 1, k.BATCHED_LU_MAX + 1, device="cuda")._data
    assert k.lu_factor_batched(half) is None
    assert k.lu_factor_batched(wide) is None  # rectangular: one cuSOLVER getrf per matrix instead
    assert k.lu_factor_batched(big) is None
    assert k.cholesky(ember.ones(0, 3, 3, device="cuda")._data) is None


# -- LU, solve -----------------------------------------------------------------------------------------


def test_solves_factor_the_batch_in_one_call():
    # solve's factorization (forward and the one its gradient reuses) is the batched cuBLAS LU
    from ember._ops.linalg_factor import lu_factor_arrays

    a = _make((6, 9, 9), ember.float64, shift=3)
    fast = lu_factor_arrays(a.cuda()._data, exact_singular=False)
    loop = lu_factor_arrays(a.cuda()._data)
    for got, want in zip(fast, loop):
        np.testing.assert_allclose(got.get(), want.get(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_factor_and_lu_solve_match_cpu(dtype):
    a = _make((5, 7, 7), dtype, shift=3)
    LU, piv = ember.linalg.lu_factor(a.cuda())
    LU_cpu, piv_cpu = ember.linalg.lu_factor(a)
    _close(LU, LU_cpu, dtype)
    assert ember.equal(piv.cpu(), piv_cpu)
    b = _make((5, 7, 2), dtype, seed=2)
    for left in (True, False):
        for adjoint in (False, True):
            rhs = b if left else b.mT
            got = ember.linalg.lu_solve(LU, piv, rhs.cuda(), left=left, adjoint=adjoint)
            want = ember.linalg.lu_solve(LU_cpu, piv_cpu, rhs, left=left, adjoint=adjoint)
            _close(got, want, dtype, scale=10)
    # a batch of factors against one right-hand side (broadcast)
    _close(ember.linalg.lu_solve(LU, piv, b[:1].cuda()), ember.linalg.lu_solve(LU_cpu, piv_cpu, b[:1]), dtype, 10)


def test_lu_factor_ex_reports_the_singular_matrix():
    a = _make((3, 5, 5), ember.float64, shift=2)
    a[1, :, 2] = 0  # column 2 of matrix 1 is zero: U[2, 2] is zero after pivoting
    _, _, info = ember.linalg.lu_factor_ex(a.cuda())
    _, _, info_cpu = ember.linalg.lu_factor_ex(a)
    assert info.cpu().tolist() == info_cpu.tolist()
    assert info.cpu().tolist()[1] != 0 and info.cpu().tolist()[0] == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_forward_and_backward_match_cpu(dtype):
    A = _make((16, 12, 12), dtype, shift=6)
    B = _make((16, 12, 3), dtype, seed=1)
    G = _make((16, 12, 3), dtype, seed=2)
    results = []
    for device in ("cpu", "cuda"):
        a, b = A.to(device).requires_grad_(), B.to(device).requires_grad_()
        x = ember.linalg.solve(a, b)
        ga, gb = ember.autograd.grad(x, (a, b), G.to(device))
        results.append((x.detach(), ga, gb))
    for gpu, cpu in zip(results[1], results[0]):
        _close(gpu, cpu, dtype, scale=10)
    # without autograd: the kernel (getrfBatched + getrsBatched), left and right, vector right-hand sides
    _close(ember.linalg.solve(A.cuda(), B.cuda()), ember.linalg.solve(A, B), dtype, 10)
    _close(ember.linalg.solve(A.cuda(), B.mT.cuda(), left=False), ember.linalg.solve(A, B.mT, left=False), dtype, 10)
    _close(ember.linalg.solve(A.cuda(), B[..., 0].cuda()), ember.linalg.solve(A, B[..., 0]), dtype, 10)


@pytest.mark.parametrize("shape", [(16, 12, 12), (12, 12)])
def test_solve_backward_fast_path_equals_the_formula(shape):
    # without create_graph the backward is ember.cuda.kernels.linalg.solve_backward; with it, the formula's ops
    A = _make(shape, ember.float64, shift=6)
    B = _make(shape[:-1] + (3,), ember.float64, seed=1)
    G = _make(shape[:-1] + (3,), ember.float64, seed=2)
    grads = []
    for create_graph in (False, True):
        a, b = A.cuda().requires_grad_(), B.cuda().requires_grad_()
        ga, gb = ember.autograd.grad(ember.linalg.solve(a, b), (a, b), G.cuda(), create_graph=create_graph)
        grads.append((ga.detach().cpu(), gb.detach().cpu()))
    for fast, formula in zip(*grads):
        assert_close(fast, formula, rtol=1e-12, atol=1e-12)
    from ember._ops._registry import registry
    from ember.cuda.kernels import linalg as cuda_linalg

    x, lu, pivots, _ = registry["_linalg_solve_lu"](A.cuda(), B.cuda())
    assert cuda_linalg.solve_backward(G.cuda(), x, lu, pivots) is not None  # the fast path takes the call


def test_solve_singular_raises_and_solve_ex_reports():
    A = _make((4, 6, 6), ember.float64, shift=3)
    A[2] = 0
    B = _make((4, 6, 1), ember.float64, seed=1)
    with pytest.raises(ember.linalg.LinAlgError, match=r"Batch element 2"):
        ember.linalg.solve(A.cuda(), B.cuda())
    _, info = ember.linalg.solve_ex(A.cuda(), B.cuda())
    assert info.cpu().tolist() == ember.linalg.solve_ex(A, B)[1].tolist()


def test_det_gradient_matches_cpu():
    A = _make((8, 10, 10), ember.float64, shift=2)
    grads = []
    for device in ("cpu", "cuda"):
        a = A.to(device).requires_grad_()
        (g,) = ember.autograd.grad(ember.linalg.det(a).sum(), a)
        grads.append(g.cpu())
    assert_close(grads[1], grads[0], rtol=1e-9, atol=1e-9)


def test_det_backward_fast_path_equals_the_formula_and_singular_batches_take_the_svd():
    # without create_graph the backward is ember.cuda.kernels.linalg.det_backward; with it, the formula's ops
    A = _make((6, 8, 8), ember.float32, shift=2)
    singular = A.clone()
    singular[2, :, 0] = singular[2, :, 1]  # rank-deficient: the fast path declines, the SVD branch takes it
    for matrices in (A, singular):
        grads = []
        for device, create_graph in (("cpu", False), ("cuda", False), ("cuda", True)):
            a = matrices.to(device).requires_grad_()
            (g,) = ember.autograd.grad(ember.linalg.det(a).sum(), a, create_graph=create_graph)
            grads.append(g.detach().cpu())
        assert_close(grads[1], grads[0], rtol=1e-3, atol=1e-4)
        assert_close(grads[2], grads[1], rtol=1e-5, atol=1e-6)
    from ember.cuda.kernels import linalg as cuda_linalg

    a = A.cuda()
    assert cuda_linalg.det_backward(ember.ones(6, device="cuda"), a, ember.linalg.det(a)) is not None


# -- triangular solves ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (3,)])
def test_solve_triangular_matches_cpu(dtype, batch):
    A = _make((*batch, 6, 6), dtype, shift=4)
    for upper in (True, False):
        for left in (True, False):
            for unitriangular in (False, True):
                B = _make((*batch, 6, 2) if left else (*batch, 2, 6), dtype, seed=3)
                kwargs = dict(upper=upper, left=left, unitriangular=unitriangular)
                got = ember.linalg.solve_triangular(A.cuda(), B.cuda(), **kwargs)
                _close(got, ember.linalg.solve_triangular(A, B, **kwargs), dtype, scale=10)
                assert got.is_contiguous()
    # one triangular matrix for a batch of right-hand sides
    B = _make((4, 6, 2), dtype, seed=4)
    _close(ember.linalg.solve_triangular(A.cuda() if not batch else A[0].cuda(), B.cuda(), upper=True),
           ember.linalg.solve_triangular(A if not batch else A[0], B, upper=True), dtype, scale=10)


# -- Cholesky ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (4,)])
def test_cholesky_matches_cpu(dtype, batch):
    A = _pd((*batch, 9, 9), dtype)
    junk = A + _make((*batch, 9, 9), dtype, seed=5).triu(1)  # only the lower triangle is read
    _close(ember.linalg.cholesky(junk.cuda()), ember.linalg.cholesky(junk), dtype, scale=10)
    _close(ember.linalg.cholesky(junk.cuda(), upper=True), ember.linalg.cholesky(junk, upper=True), dtype, scale=10)
    G = _make((*batch, 9, 9), dtype, seed=6)
    grads = []
    for device in ("cpu", "cuda"):
        a = A.to(device).requires_grad_()
        (g,) = ember.autograd.grad(ember.linalg.cholesky(a), a, G.to(device))
        grads.append(g.cpu())
    assert_close(grads[1], grads[0], rtol=_tol(dtype)[0] * 50, atol=_tol(dtype)[1] * 50)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_backward_fast_path_equals_the_formula(upper):
    # without create_graph the backward is ember.cuda.kernels.linalg.cholesky_backward; with it, the formula's
    # ops (which record): both give the CPU's gradient
    A = _pd((3, 7, 7), ember.float64)
    G = _make((3, 7, 7), ember.float64, seed=7)
    grads = []
    for device, create_graph in (("cpu", False), ("cuda", False), ("cuda", True)):
        a = A.to(device).requires_grad_()
        (g,) = ember.autograd.grad(ember.linalg.cholesky(a, upper=upper), a, G.to(device), create_graph=create_graph)
        grads.append(g.detach().cpu())
    assert_close(grads[1], grads[0], rtol=1e-10, atol=1e-10)
    assert_close(grads[2], grads[0], rtol=1e-10, atol=1e-10)


def test_cholesky_failure_info_nan_and_error():
    A = _pd((3, 5, 5), ember.float64)
    A[1] = -ember.eye(5, dtype=ember.float64)
    A[2, 3, 3] = -100.0  # the leading minor of order 4 fails
    L, info = ember.linalg.cholesky_ex(A.cuda())
    L_cpu, info_cpu = ember.linalg.cholesky_ex(A)
    assert info.cpu().tolist() == info_cpu.tolist() == [0, 1, 4]
    assert bool(L.cpu()[1:].isnan().all()) and not bool(L.cpu()[0].isnan().any())
    assert_close(L.cpu()[0], L_cpu[0], rtol=1e-10, atol=1e-10)
    with pytest.raises(ember.linalg.LinAlgError, match=r"Batch element 1.*order 1"):
        ember.linalg.cholesky(A.cuda())


# -- SVD -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 7), (9, 5), (5, 9), (3, 6, 4)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_gesvdj_matches_cpu(dtype, shape, full_matrices):
    A = _make(shape, dtype)
    U, S, Vh = ember.linalg.svd(A.cuda(), full_matrices=full_matrices)
    U_cpu, S_cpu, Vh_cpu = ember.linalg.svd(A, full_matrices=full_matrices)
    assert U.shape == U_cpu.shape and Vh.shape == Vh_cpu.shape
    assert U.stride() == U_cpu.stride() and Vh.stride() == Vh_cpu.stride()  # column-major, as PyTorch
    _close(S, S_cpu, dtype, scale=10)
    k = S.shape[-1]
    U, Vh = U.cpu()[..., :k], Vh.cpu()[..., :k, :]
    rtol, atol = _tol(dtype)
    assert_close((U * S.cpu().to(A.dtype).unsqueeze(-2)) @ Vh, A, rtol=rtol * 20, atol=atol * 20)
    eye = ember.eye(k, dtype=A.dtype).expand(*shape[:-2], k, k)
    assert_close(U.mT.conj() @ U, eye, rtol=rtol * 20, atol=atol * 20)
    assert_close(Vh @ Vh.mT.conj(), eye, rtol=rtol * 20, atol=atol * 20)


def test_svd_gradient_of_invariant_loss_matches_cpu():
    A = _make((12, 12), ember.float64)
    grads = []
    for device in ("cpu", "cuda"):
        a = A.to(device).requires_grad_()
        U, S, Vh = ember.linalg.svd(a, full_matrices=False)
        (g,) = ember.autograd.grad((U @ Vh).sum() + S.sum(), a)
        grads.append(g.cpu())
    assert_close(grads[1], grads[0], rtol=1e-8, atol=1e-8)


def test_svd_driver_gesvd_takes_cupys_routine():
    A = _make((6, 4), ember.float32)
    S = ember.linalg.svd(A.cuda(), full_matrices=False, driver="gesvd").S
    _close(S, ember.linalg.svd(A, full_matrices=False).S, ember.float32, scale=10)


# -- no host synchronisation (ember.cuda.set_sync_debug_mode, issue 24) ----------------------------------


def _without_sync(fn):
    """``fn()`` once (plans, workspaces and kernels made), then again under set_sync_debug_mode("error")."""
    fn()
    ember.cuda.synchronize()
    ember.cuda.set_sync_debug_mode("error")
    try:
        return fn()
    finally:
        ember.cuda.set_sync_debug_mode("default")


def test_batched_routines_do_not_wait_for_the_gpu():
    A = _make((16, 8, 8), ember.float32, shift=4).cuda()
    B = _make((16, 8, 2), ember.float32, seed=1).cuda()
    P = _pd((4, 8, 8), ember.float32).cuda()
    G = _make((4, 8, 8), ember.float32, seed=2).cuda()

    LU, piv = ember.linalg.lu_factor(A)  # (lu_factor itself keeps cuSOLVER's getrf per matrix)

    def run():
        x = ember.linalg.lu_solve(LU, piv, B, adjoint=True)
        y, _ = ember.linalg.solve_ex(A, B)
        z = ember.linalg.solve_triangular(A, B, upper=False, left=True)
        L, _ = ember.linalg.cholesky_ex(P)
        p = P.clone().requires_grad_()
        (gp,) = ember.autograd.grad(ember.linalg.cholesky_ex(p).L, p, G)  # the backward: two trsm
        return x, y, z, L, gp

    x, y, z, L, gp = _without_sync(run)
    _close(x, ember.linalg.lu_solve(*ember.linalg.lu_factor(A.cpu()), B.cpu(), adjoint=True), ember.float32, 10)
    _close(y, ember.linalg.solve(A.cpu(), B.cpu()), ember.float32, 10)
    _close(z, ember.linalg.solve_triangular(A.cpu(), B.cpu(), upper=False), ember.float32, 10)
    _close(L, ember.linalg.cholesky(P.cpu()), ember.float32, 10)
    assert gp.shape == P.shape
