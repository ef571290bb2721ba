"""OpInfos of ember._ops.linalg_eigen: linalg.svd/svdvals, linalg.eigh/eigvalsh, linalg.eig/eigvals, svd.

Singular vectors and eigenvectors are unique up to a sign or phase, so their values are checked through
reconstructions (tests/test_linalg.py), not against numpy's, and the gradient tests see gauge-invariant
quantities (the wrappers below, as PyTorch's OpInfos do)."""

from __future__ import annotations

import numpy as np

from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._linalg import LINALG_TYPES, SINGLE_TOL, errors, hermitian, hermitian_wrapper, matrices, mH, rectangular

_GAUGE = "vectors are defined up to a phase: compared through reconstructions in tests/test_linalg.py"


def _rect_samples(opinfo, device, dtype, requires_grad):
    def A(shape, seed=0):
        return rectangular(shape, device, dtype, requires_grad, seed)

    yield SampleInput(A((3, 3)), name="square")
    yield SampleInput(A((4, 3), 1), name="tall")
    yield SampleInput(A((3, 5), 2), name="wide")
    yield SampleInput(A((2, 3, 2), 3), name="batched")
    yield SampleInput(A((0, 3)), name="no rows")
    yield SampleInput(A((2, 0, 0)), name="batch of 0x0")


def _svd_samples(opinfo, device, dtype, requires_grad):
    for sample in _rect_samples(opinfo, device, dtype, requires_grad):
        yield SampleInput(sample.input, (False,), name=sample.name + ", reduced")
        if sample.name in ("tall", "square"):
            yield SampleInput(sample.input, name=sample.name + ", full_matrices")


def _svd_wrapper(op, A, *args, **kwargs):
    """Gauge-invariant outputs of the SVD: S, U V^H (first k columns) and |U|."""
    U, S, Vh = op(A, *args, **kwargs)
    k = S.shape[-1]
    U, Vh = U[..., :k], Vh[..., :k, :]
    return S, U @ Vh, U.abs()


def _top_svd_wrapper(op, A, *args, **kwargs):
    U, S, V = op(A, *args, **kwargs)
    k = S.shape[-1]
    U, V = U[..., :k], V[..., :k]
    return S, U @ mH(V), V.abs()


register_opinfo(OpInfo("linalg_svd", _svd_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.svd",
                       gradcheck_wrapper=_svd_wrapper, tolerances=SINGLE_TOL,
                       skips=(("test_matches_pytorch", None, _GAUGE),),
                       error_inputs=errors((lambda t, e: SampleInput(t(3)), RuntimeError,
                                            "linalg.svd: The input tensor A must have at least 2 dimensions"),
                                           (lambda t, e: SampleInput(t(2, 2).cpu(), kwargs={"driver": "gesvd"}),  # (CUDA takes driver=)
                                            RuntimeError, "keyword argument `driver=` is only supported on CUDA"))))
register_opinfo(OpInfo("svd", lambda o, d, t, r: (SampleInput(s.input, name=s.name) for s in _rect_samples(o, d, t, r)),
                       dtypes=LINALG_TYPES, gradcheck_wrapper=_top_svd_wrapper, tolerances=SINGLE_TOL,
                       skips=(("test_matches_pytorch", None, _GAUGE),)))
register_opinfo(OpInfo("linalg_svdvals", _rect_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.svdvals",
                       ref=lambda a: np.linalg.svd(a, compute_uv=False) if a.size else
                       np.zeros((*a.shape[:-2], min(a.shape[-2:]))), tolerances=SINGLE_TOL))


def _hermitian_samples(opinfo, device, dtype, requires_grad):
    for i, (batch, n, name) in enumerate([((), 3, "3x3"), ((2,), 3, "batched"), ((), 1, "1x1"), ((), 0, "0x0")]):
        yield SampleInput(matrices(hermitian, batch, n, device, dtype, requires_grad, seed=i), name=name)
    yield SampleInput(matrices(hermitian, (2,), 3, device, dtype, requires_grad, seed=7), ("U",), name="UPLO=U")


def _eigh_wrapper(op, A, *args, **kwargs):
    L, V = hermitian_wrapper(op, A, *args, **kwargs)
    return L, V.abs()


register_opinfo(OpInfo("linalg_eigh", _hermitian_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.eigh",
                       gradcheck_wrapper=_eigh_wrapper, tolerances=SINGLE_TOL,
                       skips=(("test_matches_pytorch", None, _GAUGE),),
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 2), ("X",)), RuntimeError,
                                            "Expected UPLO argument to be 'L' or 'U', but got X"))))
register_opinfo(OpInfo("linalg_eigvalsh", _hermitian_samples, dtypes=LINALG_TYPES,
                       torch_name="torch.linalg.eigvalsh", gradcheck_wrapper=hermitian_wrapper, tolerances=SINGLE_TOL,
                       ref=lambda a, UPLO="L": np.linalg.eigvalsh(a, UPLO) if a.size else np.zeros(a.shape[:-1])))


def _general_samples(opinfo, device, dtype, requires_grad):
    for i, (batch, n, name) in enumerate([((), 3, "3x3"), ((2,), 3, "batched"), ((), 1, "1x1"), ((), 0, "0x0")]):
        yield SampleInput(rectangular((*batch, n, n), device, dtype, requires_grad, seed=i), name=name)


def _eig_wrapper(op, A, *args, **kwargs):
    L, V = op(A, *args, **kwargs)
    return L, V.abs()


register_opinfo(OpInfo("linalg_eig", _general_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.eig",
                       gradcheck_wrapper=_eig_wrapper, tolerances=SINGLE_TOL,
                       skips=(("test_matches_pytorch", None, _GAUGE),),
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 3)), RuntimeError,
                                            "linalg.eig: A must be batches of square matrices"))))
register_opinfo(OpInfo("linalg_eigvals", _general_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.eigvals",
                       tolerances=SINGLE_TOL,
                       ref=lambda a: np.linalg.eigvals(a) if a.size else np.zeros(a.shape[:-1], np.complex128)))
