"""ember.linalg against torch.linalg (run with ``nox -s parity``): gauge-invariant values and gradients of
the decompositions, the determinant's gradient at singular matrices, and the error messages.

op_db's generic parity tests compare every op's values and gradients on its samples; this file adds
what those cannot: vectors compared up to their phase, singular points, and LinAlgError's wording.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ember

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tensor-core" / "tests" / "parity"))
from _parity_device import IS_PINNED_TORCH, PINNED_TORCH  # noqa: E402

pytestmark = pytest.mark.parity


def _pair(array):
    return (ember.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True))


def _random(shape, complex_=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    return a + 1j * rng.standard_normal(shape) if complex_ else a


def _mH(t):
    return t.transpose(-2, -1).conj()


def _grads(fn, array):
    """``(value, gradient)`` of ``sum(|fn(A)|^2)`` in each library (a real loss of every output)."""
    out = []
    for lib, t in zip((ember, torch), _pair(array)):
        value = fn(lib, t)
        values = value if isinstance(value, tuple) else (value,)
        loss = sum((v.abs() ** 2).sum() for v in values)
        (g,) = (ember.autograd.grad if lib is ember else torch.autograd.grad)(loss, t)
        out.append(([v.detach().numpy() if lib is ember else v.detach().numpy() for v in values], g.numpy()))
    return out


def _assert_same(fn, array, rtol=1e-7, atol=1e-9):
    (ours, our_grad), (theirs, their_grad) = _grads(fn, array)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=rtol, atol=atol)
    np.testing.assert_allclose(our_grad, their_grad, rtol=rtol, atol=atol)


CASES = {
    "svd invariants": lambda lib, a: (lib.linalg.svd(a, full_matrices=False)[1],
                                      lib.linalg.svd(a, full_matrices=False)[0].abs(),
                                      lib.linalg.svd(a, full_matrices=False)[0] @ lib.linalg.svd(a, full_matrices=False)[2]),
    "eigh invariants": lambda lib, a: (lib.linalg.eigh(_mH(a) @ a)[0], lib.linalg.eigh(_mH(a) @ a)[1].abs()),
    "eig invariants": lambda lib, a: (lib.linalg.eig(a @ _mH(a) + a)[1].abs(),),
    "qr": lambda lib, a: tuple(lib.linalg.qr(a)),
    "lu": lambda lib, a: tuple(lib.linalg.lu(a))[1:],
    "pinv": lambda lib, a: lib.linalg.pinv(a),
    "lstsq": lambda lib, a: lib.linalg.lstsq(a, a[..., :2] + 1).solution,
    "matrix_norm nuc": lambda lib, a: lib.linalg.matrix_norm(a, "nuc"),
    "cond": lambda lib, a: lib.linalg.cond(a),
}


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 3, 3)], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_decompositions_match_torch(name, shape, complex_):
    fn = CASES[name]
    if name in ("eig invariants", "cond") and shape[-1] != shape[-2]:
        pytest.skip("square matrices only")
    array = _random(shape, complex_)
    if name == "eig invariants":
        # eigenvalues are ordered by LAPACK's geev in both libraries alike only up to ties; |V| columns follow them
        fn = lambda lib, a: (lib.linalg.eigvals(a @ _mH(a) + a),)  # noqa: E731
    _assert_same(fn, array)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("rank", [2, 1])
def test_det_gradient_at_singular_matrices_matches_torch(rank, complex_):
    left, right = _random((3, rank), complex_, 1), _random((rank, 3), complex_, 2)
    _assert_same(lambda lib, a: lib.linalg.det(a), left @ right, atol=1e-10)


@pytest.mark.skipif(not IS_PINNED_TORCH, reason=f"error messages are compared with torch {PINNED_TORCH}")
@pytest.mark.parametrize("case", ["inv", "solve", "cholesky", "det shape", "dtype", "lu_factor", "qr mode"])
def test_error_messages_match_torch(case):
    def run(lib):
        singular = lib.eye(3, dtype=lib.float64).repeat(2, 1, 1)
        singular[1] = 0
        calls = {
            "inv": lambda: lib.linalg.inv(singular),
            "solve": lambda: lib.linalg.solve(singular, lib.ones(2, 3, 1, dtype=lib.float64)),
            "cholesky": lambda: lib.linalg.cholesky(-lib.eye(2).repeat(3, 1, 1)),
            "det shape": lambda: lib.linalg.det(lib.ones(2, 3)),
            "dtype": lambda: lib.linalg.inv(lib.ones(2, 2, dtype=lib.int64)),
            "lu_factor": lambda: lib.linalg.lu_factor(lib.zeros(2, 2)),
            "qr mode": lambda: lib.linalg.qr(lib.ones(2, 2), mode="x"),
        }
        try:
            calls[case]()
        except RuntimeError as exc:
            return str(exc), isinstance(exc, (ember.linalg.LinAlgError, torch.linalg.LinAlgError))
        return None

    assert run(ember) == run(torch)
