"""ember.linalg beyond the op_db samples: reconstruction identities, errors naming the batch element,
``info`` of the ``_ex`` variants, ill-conditioned and empty inputs, and the namespace.

Values of the decompositions whose factors are unique only up to signs or phases (QR, SVD, eigh, eig)
are checked through what they reconstruct; op_db's generic tests compare the rest with numpy/scipy.
Runs on the backend under test (``device`` fixture: cpu, or cuda on the GPU machine).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

DTYPES = [ember.float32, ember.float64, ember.complex64, ember.complex128]
TOL = {ember.float32: 1e-4, ember.complex64: 1e-4, ember.float64: 1e-10, ember.complex128: 1e-10}


def _random(shape, dtype, device, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if dtype.is_complex:
        a = a + 1j * rng.standard_normal(shape)
    return ember.tensor(a.astype(dtype.numpy_dtype), device=device)


def _mH(t):
    return t.transpose(-2, -1).conj()


def _close(a, b, dtype):
    tol = TOL[dtype]
    np.testing.assert_allclose(a.cpu().numpy(), np.asarray(b.cpu().numpy() if isinstance(b, ember.Tensor) else b),
                               rtol=tol * 10, atol=tol * 10)


SHAPES = [(3, 3), (5, 3), (3, 5), (2, 4, 4), (2, 1, 3, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_qr_reconstructs(shape, dtype, device):
    A = _random(shape, dtype, device)
    for mode in ("reduced", "complete"):
        Q, R = ember.linalg.qr(A, mode=mode)
        _close(Q @ R, A, dtype)
        k = Q.shape[-1]
        _close(_mH(Q) @ Q, ember.eye(k, dtype=dtype, device=device).expand(*Q.shape[:-2], k, k), dtype)
        _close(R, R.triu(), dtype)
    _close(ember.linalg.qr(A, mode="r").R, ember.linalg.qr(A).R, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_svd_reconstructs(shape, dtype, device):
    A = _random(shape, dtype, device)
    U, S, Vh = ember.linalg.svd(A, full_matrices=False)
    _close((U * S.to(dtype).unsqueeze(-2)) @ Vh, A, dtype)
    assert bool((S[..., :-1] >= S[..., 1:]).all()) and bool((S >= 0).all())
    Uf, Sf, Vhf = ember.linalg.svd(A)
    m, n = shape[-2:]
    assert Uf.shape[-2:] == (m, m) and Vhf.shape[-2:] == (n, n)
    _close(_mH(Uf) @ Uf, ember.eye(m, dtype=dtype, device=device).expand(*Uf.shape), dtype)
    _close(ember.linalg.svdvals(A), S, dtype)
    U2, S2, V2 = ember.svd(A)  # torch.svd: V, not V^H
    _close((U2 * S2.to(dtype).unsqueeze(-2)) @ _mH(V2), A, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_eigh_and_eig_reconstruct(dtype, device):
    A = _random((2, 4, 4), dtype, device)
    H = A + _mH(A)
    L, V = ember.linalg.eigh(H)
    _close((V * L.to(dtype).unsqueeze(-2)) @ _mH(V), H, dtype)
    assert bool((L[..., :-1] <= L[..., 1:]).all())
    _close(ember.linalg.eigvalsh(H), L, dtype)
    _close(ember.linalg.eigh(H.triu(), UPLO="U").eigenvalues, L, dtype)  # reads the upper triangle only
    w, W = ember.linalg.eig(A)
    complex_dtype = ember.complex64 if dtype in (ember.float32, ember.complex64) else ember.complex128
    assert w.dtype is complex_dtype and W.dtype is complex_dtype
    _close(A.to(complex_dtype) @ W, W * w.unsqueeze(-2), dtype)
    _close(ember.linalg.eigvals(A), w, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 5), (2, 3, 3)], ids=str)
def test_lu_reconstructs(shape, dtype, device):
    A = _random(shape, dtype, device)
    P, L, U = ember.linalg.lu(A)
    _close(P @ L @ U, A, dtype)
    LU, pivots = ember.linalg.lu_factor(A)
    assert pivots.dtype is ember.int32
    P2, L2, U2 = ember.lu_unpack(LU, pivots)
    _close(P2 @ L2 @ U2, A, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_cholesky_and_solvers(dtype, device):
    A = _random((2, 4, 4), dtype, device)
    S = A @ _mH(A) + 4 * ember.eye(4, dtype=dtype, device=device)
    L = ember.linalg.cholesky(S)
    _close(L @ _mH(L), S, dtype)
    U = ember.linalg.cholesky(S, upper=True)
    _close(_mH(U) @ U, S, dtype)
    B = _random((2, 4, 3), dtype, device, seed=1)
    X = ember.linalg.solve(S, B)
    _close(S @ X, B, dtype)
    _close(ember.cholesky_solve(B, L), X, dtype)
    _close(ember.linalg.lu_solve(*ember.linalg.lu_factor(S), B), X, dtype)
    LD, piv = ember.linalg.ldl_factor(S, hermitian=dtype.is_complex)
    _close(ember.linalg.ldl_solve(LD, piv, B, hermitian=dtype.is_complex), X, dtype)
    _close(ember.linalg.inv(S) @ S, ember.eye(4, dtype=dtype, device=device).expand(2, 4, 4), dtype)
    _close(ember.cholesky_inverse(L), ember.linalg.inv(S), dtype)
    Xt = ember.linalg.solve_triangular(L, B, upper=False)
    _close(L @ Xt, B, dtype)


def test_solve_from_the_right_and_its_shape_errors(device):
    A = _random((2, 3, 3), ember.float64, device)
    B = _random((2, 4, 3), ember.float64, device, seed=1)
    X = ember.linalg.solve(A, B, left=False)
    _close(X @ A, B, ember.float64)
    # a vector B has no X A = B form, whatever its length (PyTorch's rule and message)
    for b in (ember.ones(3, dtype=ember.float64, device=device), ember.ones(2, 3, dtype=ember.float64, device=device)):
        with pytest.raises(RuntimeError, match=r"linalg.solve: Incompatible shapes of A and B for the equation "
                                               r"XA = B \(3x3 and 3x1\)"):
            ember.linalg.solve(A, b, left=False)
    with pytest.raises(RuntimeError, match=r"equation AX = B \(3x3 and 4x3\)"):
        ember.linalg.solve(A, B)


def test_ill_conditioned_det_and_solve_match_numpy(device):
    rng = np.random.default_rng(3)
    q1, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    q2, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    a = (q1 * np.logspace(0, -12, 6)) @ q2  # condition number 1e12
    b = rng.standard_normal((6, 2))
    A, B = ember.tensor(a, device=device), ember.tensor(b, device=device)
    # det's relative condition number is up to cond(A) * eps (2e-4 here): the CPU runs numpy's LAPACK and agrees
    # to rounding; cuSOLVER's LU (another blocking) legitimately differs within that bound (1.4e-6 seen on an H100)
    det_rtol = 1e-6 if device == "cpu" else 2e-4
    np.testing.assert_allclose(ember.linalg.det(A).cpu().numpy(), np.linalg.det(a), rtol=det_rtol)
    # (logabsdet's absolute error is det's relative error)
    np.testing.assert_allclose(ember.linalg.slogdet(A).logabsdet.cpu().numpy(), np.linalg.slogdet(a)[1],
                               rtol=1e-12 if device == "cpu" else 0, atol=0 if device == "cpu" else det_rtol)
    # backward stable: the residual is at LAPACK's own level (eps * ||A|| * ||x||, x of size 1e12)
    ours = a @ ember.linalg.solve(A, B).cpu().numpy() - b
    theirs = a @ np.linalg.solve(a, b) - b
    assert np.abs(ours).max() <= 10 * np.abs(theirs).max() + 1e-12
    assert ember.linalg.matrix_rank(A).item() == 6
    assert ember.linalg.matrix_rank(A, rtol=1e-6).item() == 3
    np.testing.assert_allclose(ember.linalg.cond(A).cpu().numpy(), np.linalg.cond(a), rtol=1e-3)


def test_errors_name_the_failing_batch_element(device):
    A = ember.eye(3, dtype=ember.float64, device=device).repeat(4, 1, 1)
    A[2] = 0
    with pytest.raises(ember.linalg.LinAlgError, match=r"linalg.inv: \(Batch element 2\): The diagonal element 1 is"):
        ember.linalg.inv(A)
    with pytest.raises(RuntimeError, match=r"\(Batch element 2\): The solver failed because the input matrix is "):
        ember.linalg.solve(A, ember.ones(4, 3, 1, dtype=ember.float64, device=device))
    S = ember.eye(3, dtype=ember.float64, device=device).repeat(2, 1, 1)
    S[1, 1, 1] = -1
    with pytest.raises(ember.linalg.LinAlgError, match=r"\(Batch element 1\): .*leading minor of order 2 is not "
                                                       "positive-definite"):
        ember.linalg.cholesky(S)
    assert issubclass(ember.linalg.LinAlgError, RuntimeError)
    # a single matrix: no batch prefix
    with pytest.raises(ember.linalg.LinAlgError, match=r"^linalg.inv: The diagonal element 1 is zero"):
        ember.linalg.inv(ember.zeros(2, 2, dtype=ember.float64, device=device))


def test_ex_variants_report_info(device):
    A = ember.eye(3, dtype=ember.float64, device=device).repeat(3, 1, 1)
    A[1, 2, 2] = 0
    inverse, info = ember.linalg.inv_ex(A)
    assert info.dtype is ember.int32 and info.cpu().tolist() == [0, 3, 0]
    np.testing.assert_allclose(inverse[0].cpu().numpy(), np.eye(3))
    assert ember.linalg.solve_ex(A, ember.ones(3, 3, dtype=ember.float64, device=device)).info.cpu().tolist() == [0, 3, 0]
    with pytest.raises(ember.linalg.LinAlgError, match=r"\(Batch element 1\)"):
        ember.linalg.inv_ex(A, check_errors=True)
    S = A.clone()
    S[1, 2, 2] = -1
    L, info = ember.linalg.cholesky_ex(S)
    assert info.cpu().tolist() == [0, 3, 0]
    assert ember.linalg.lu_factor_ex(A).info.cpu().tolist() == [0, 3, 0]


@pytest.mark.parametrize("name", ["det", "slogdet", "inv", "cholesky", "svdvals", "eigvalsh", "matrix_exp"])
def test_empty_batches_and_matrices(name, device):
    fn = getattr(ember.linalg, name)
    for shape in [(0, 3, 3), (2, 0, 0), (0, 0)]:
        A = ember.zeros(shape, dtype=ember.float64, device=device)
        if name == "cholesky" and shape[-1]:
            continue
        out = fn(A)
        outs = out if isinstance(out, tuple) else (out,)
        meta = fn(A.to("meta"))
        metas = meta if isinstance(meta, tuple) else (meta,)
        for o, m in zip(outs, metas):
            assert tuple(o.shape) == tuple(m.shape)
    assert ember.linalg.det(ember.zeros(2, 0, 0, device=device)).cpu().tolist() == [1.0, 1.0]


def test_namespace_matches_pytorchs_function_list():
    names = {
        "norm", "vector_norm", "matrix_norm", "diagonal", "det", "slogdet", "cond", "matrix_rank", "cholesky",
        "cholesky_ex", "qr", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "eig", "eigvals", "eigh", "eigvalsh",
        "svd", "svdvals", "solve", "solve_ex", "solve_triangular", "lstsq", "inv", "inv_ex", "pinv", "matrix_exp",
        "matrix_power", "cross", "multi_dot", "householder_product", "tensorinv", "tensorsolve", "vander", "vecdot",
        "ldl_factor", "ldl_factor_ex", "ldl_solve", "matmul", "LinAlgError",
    }
    assert names <= set(ember.linalg.__all__)
    for name in ("det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_solve", "cholesky_inverse", "svd", "qr",
                 "lu_unpack", "lu_solve", "pinverse", "matrix_exp", "matrix_power", "trapezoid", "trapz",
                 "cumulative_trapezoid", "vander", "triangular_solve", "orgqr"):
        assert callable(getattr(ember, name)), name
    assert not hasattr(ember, "linalg_det")  # the registry names stay inside ember.linalg
    A = ember.eye(2)
    assert A.det().item() == 1.0 and A.inverse().shape == (2, 2) and A.matrix_power(3).shape == (2, 2)


def test_svd_driver_is_cuda_only():
    with pytest.raises(RuntimeError, match="only supported on CUDA inputs"):
        ember.linalg.svd(ember.eye(2), driver="gesvd")


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.complex128], ids=lambda d: d.name)
def test_cuda_matches_cpu(dtype):
    """Each op on CuPy arrays (cuSOLVER/cuBLAS) agrees with the CPU's LAPACK."""
    A = _random((3, 4, 4), dtype, "cpu")
    S = A @ _mH(A) + 4 * ember.eye(4, dtype=dtype)
    B = _random((3, 4, 2), dtype, "cpu", seed=1)
    cases = {
        "det": lambda a, s, b: ember.linalg.det(a),
        "slogdet": lambda a, s, b: ember.linalg.slogdet(a).logabsdet,
        "inv": lambda a, s, b: ember.linalg.inv(a),
        "solve": lambda a, s, b: ember.linalg.solve(a, b),
        "cholesky": lambda a, s, b: ember.linalg.cholesky(s),
        "svdvals": lambda a, s, b: ember.linalg.svdvals(a),
        "eigvalsh": lambda a, s, b: ember.linalg.eigvalsh(s),
        "pinv": lambda a, s, b: ember.linalg.pinv(a),
        "lu_solve": lambda a, s, b: ember.linalg.lu_solve(*ember.linalg.lu_factor(a), b),
        "solve_triangular": lambda a, s, b: ember.linalg.solve_triangular(s, b, upper=True),
        "matrix_exp": lambda a, s, b: ember.linalg.matrix_exp(a / 4),
        "vector_norm": lambda a, s, b: ember.linalg.vector_norm(a, 3, dim=(-2, -1)),
        "matrix_norm": lambda a, s, b: ember.linalg.matrix_norm(a, "nuc"),
        "qr_r_abs": lambda a, s, b: ember.linalg.qr(a).R.abs(),
    }
    for name, fn in cases.items():
        expected = fn(A, S, B)
        got = fn(A.to("cuda"), S.to("cuda"), B.to("cuda"))
        assert got.device.type == "cuda", name
        _close(got.cpu(), expected, dtype)
    Ad = A.to("cuda")
    Ad[1] = 0
    with pytest.raises(ember.linalg.LinAlgError, match=r"\(Batch element 1\)"):
        ember.linalg.inv(Ad)
    assert ember.linalg.inv_ex(Ad).info.cpu().tolist()[1] != 0
