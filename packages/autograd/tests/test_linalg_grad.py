"""Gradients of ember.linalg beyond the op_db samples.

* the determinant's gradient at singular matrices of every rank, against finite differences and against
  the adjugate (PyTorch once returned wrong values there: its issue 104675);
* gradcheck/gradgradcheck of gauge-invariant functions of the SVD and eigendecompositions, real and
  complex, square and rectangular, and the error PyTorch raises when a loss depends on the gauge;
* the conventions of one-triangle inputs (cholesky, eigh): Hermitian gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck


def _leaf(array, device="cpu"):
    return ember.tensor(array, device=device, requires_grad=True)


def _random(shape, complex_=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    return a + 1j * rng.standard_normal(shape) if complex_ else a


def _mH(t):
    return t.transpose(-2, -1).conj()


def _adjugate(a):
    """The adjugate by cofactors (numpy, float64): the exact gradient of det is its transpose."""
    n = a.shape[0]
    cof = np.zeros_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            cof[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return cof.T


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("rank", [3, 2, 1, 0])
def test_det_gradient_at_rank_deficient_matrices(rank, complex_, device):
    n = 4
    left = _random((n, rank), complex_, rank)
    right = _random((rank, n), complex_, rank + 10)
    a = left @ right if rank else np.zeros((n, n), np.complex128 if complex_ else np.float64)
    A = _leaf(a, device)
    (grad,) = ember.autograd.grad(ember.linalg.det(A).real.sum() if complex_ else ember.linalg.det(A), A)
    expected = np.conj(_adjugate(a)).T  # grad * adj(A)^H, grad = 1
    assert np.isfinite(grad.cpu().numpy()).all()
    np.testing.assert_allclose(grad.cpu().numpy(), expected, atol=1e-10)
    if rank == n - 1:  # the only rank where the gradient is nonzero: finite differences agree too
        assert np.abs(expected).max() > 1e-3
        assert gradcheck(ember.linalg.det, (A,))


def test_det_gradient_mixed_batch_singular_and_regular(device):
    a = np.stack([_random((3, 3), seed=1), np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]])])
    A = _leaf(a, device)
    (grad,) = ember.autograd.grad(ember.linalg.det(A).sum(), A)
    for i in range(2):
        np.testing.assert_allclose(grad[i].cpu().numpy(), _adjugate(a[i]).T, atol=1e-10)
    assert gradcheck(ember.linalg.det, (A,))


def test_det_gradient_when_the_batch_size_equals_the_matrix_size():
    """A (n, n, n) batch: an identity of shape (n, n) would be read as n vectors by solve's vector rule."""
    a = np.eye(3) + 0.1 * _random((3, 3, 3))
    A = _leaf(a)
    (grad,) = ember.autograd.grad(ember.linalg.det(A).sum(), A)
    for i in range(3):
        np.testing.assert_allclose(grad[i].numpy(), _adjugate(a[i]).T, atol=1e-12)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_det_second_derivative(complex_):
    A = _leaf(_random((2, 3, 3), complex_))
    assert gradgradcheck(ember.linalg.det, (A,))
    assert gradgradcheck(lambda a: ember.linalg.slogdet(a).logabsdet, (A,))


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5), (2, 4, 3)], ids=str)
def test_svd_gauge_invariant_gradients(shape, complex_):
    A = _leaf(_random(shape, complex_))

    def invariants(a):
        U, S, Vh = ember.linalg.svd(a, full_matrices=False)
        return S, U @ Vh, U.abs(), (Vh.abs() ** 2).sum(-2)

    assert gradcheck(invariants, (A,))
    assert gradgradcheck(lambda a: ember.linalg.svd(a, full_matrices=False).S, (A,))


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_eigen_gauge_invariant_gradients(complex_):
    A = _leaf(_random((2, 4, 4), complex_))

    def hermitian(a):
        L, V = ember.linalg.eigh(a + _mH(a))
        return L, V.abs(), (V * L.to(V.dtype).unsqueeze(-2)) @ _mH(V)

    def general(a):
        L, V = ember.linalg.eig(a)
        return L, V.abs()

    assert gradcheck(hermitian, (A,))
    assert gradcheck(general, (A,))
    assert gradgradcheck(lambda a: ember.linalg.eigvalsh(a + _mH(a)), (A,))


def test_losses_depending_on_the_phase_raise():
    A = _leaf(_random((3, 3), True))
    U, S, Vh = ember.linalg.svd(A)
    with pytest.raises(RuntimeError, match="svd_backward: The singular vectors in the complex case are specified up to"):
        U.real.sum().backward()
    L, V = ember.linalg.eigh(A + _mH(A))
    with pytest.raises(RuntimeError, match="linalg_eigh_backward: The eigenvectors in the complex case"):
        V.real.sum().backward()
    w, W = ember.linalg.eig(A)
    with pytest.raises(RuntimeError, match="linalg_eig_backward: The eigenvectors in the complex case"):
        W.real.sum().backward()
    # a gauge-invariant loss is fine
    U, S, Vh = ember.linalg.svd(A)
    (U @ Vh).abs().sum().backward()
    assert A.grad is not None and np.isfinite(A.grad.numpy()).all()


def test_one_triangle_inputs_get_hermitian_gradients():
    a = _random((3, 3))
    S = _leaf(a @ a.T + 3 * np.eye(3))
    (g,) = ember.autograd.grad(ember.linalg.cholesky(S).sum(), S)
    np.testing.assert_allclose(g.numpy(), g.numpy().T, atol=1e-12)
    (g,) = ember.autograd.grad(ember.linalg.eigh(S).eigenvectors[:, 0].abs().sum(), S)
    np.testing.assert_allclose(g.numpy(), g.numpy().T, atol=1e-12)


def test_solve_gradient_broadcasts_back():
    A = _leaf(_random((3, 3)) + 3 * np.eye(3))
    B = _leaf(_random((2, 3, 2), seed=1))
    X = ember.linalg.solve(A, B)
    X.sum().backward()
    assert A.grad.shape == (3, 3) and B.grad.shape == (2, 3, 2)
    assert gradcheck(ember.linalg.solve, (A, B))


def test_qr_mode_r_and_complete_tall_refuse_backward():
    A = _leaf(_random((4, 2)))
    with pytest.raises(RuntimeError, match="depends on Q, which is not computed when mode='r'"):
        ember.linalg.qr(A, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        ember.linalg.qr(A, mode="complete").Q.sum().backward()


def test_pinv_gradient_at_repeated_singular_values():
    """The Golub-Pereyra formula needs no distinct singular values (the SVD's gradient would be inf here)."""
    A = _leaf(np.diag([2.0, 2.0, 1.0])[:, :3] @ np.eye(3))
    assert gradcheck(ember.linalg.pinv, (A,))


@pytest.mark.cuda
def test_cuda_gradients_match_cpu():
    a = _random((2, 3, 3)) + 3 * np.eye(3)
    for fn in (ember.linalg.det, ember.linalg.inv, lambda t: ember.linalg.svdvals(t),
               lambda t: ember.linalg.cholesky(t @ _mH(t)), lambda t: ember.linalg.slogdet(t).logabsdet):
        cpu, gpu = _leaf(a), _leaf(a, "cuda")
        (g_cpu,) = ember.autograd.grad(fn(cpu).sum(), cpu)
        (g_gpu,) = ember.autograd.grad(fn(gpu).sum(), gpu)
        np.testing.assert_allclose(g_gpu.cpu().numpy(), g_cpu.numpy(), rtol=1e-8, atol=1e-10)
