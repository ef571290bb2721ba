"""OpInfos of ember._ops.linalg_factor: linalg.cholesky/cholesky_ex, cholesky, linalg.qr, qr, the LU family,
lu_unpack and linalg.ldl_factor/ldl_factor_ex (values against numpy/scipy's LAPACK).

The gradient tests go through ``(A + A^H) / 2`` (:func:`._linalg.hermitian_wrapper`): the op reads one
triangle, and its gradient is PyTorch's, the one with respect to a Hermitian input."""

from __future__ import annotations

import numpy as np

from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._linalg import LINALG_TYPES, SINGLE_TOL, errors, hermitian_pd, hermitian_wrapper, matrices, rectangular

_KINDS = [((), 3, "3x3"), ((2,), 3, "batched"), ((2, 1), 2, "two batch dims"), ((), 1, "1x1"), ((), 0, "0x0"),
          ((0,), 3, "empty batch")]


def _cholesky_samples(opinfo, device, dtype, requires_grad):
    for i, (batch, n, name) in enumerate(_KINDS):
        yield SampleInput(matrices(hermitian_pd, batch, n, device, dtype, requires_grad, seed=i), name=name)
    A = matrices(hermitian_pd, (2,), 3, device, dtype, requires_grad, seed=9)
    yield SampleInput(A, kwargs={"upper": True}, name="upper")


def _cholesky_ref(a, upper=False, check_errors=False):
    L = np.linalg.cholesky(a) if a.size else np.zeros(a.shape, a.dtype)
    return np.conj(np.swapaxes(L, -1, -2)) if upper else L


def _top_cholesky_samples(opinfo, device, dtype, requires_grad):
    for sample in _cholesky_samples(opinfo, device, dtype, requires_grad):
        yield SampleInput(sample.input, (sample.kwargs.get("upper", False),), name=sample.name)


def _errors(fn):
    return errors(
        (lambda t, e: SampleInput(t(2, 3)), RuntimeError,
         rf"{fn}: A must be batches of square matrices, but they are 2 by 3 matrices"),
        (lambda t, e: SampleInput(-e.eye(2).expand(3, 2, 2)), Exception,
         rf"{fn}: \(Batch element 0\): The factorization could not be completed because the input is not "
         r"positive-definite \(the leading minor of order 1 is not positive-definite\)"),
    )


register_opinfo(OpInfo("linalg_cholesky", _cholesky_samples, dtypes=LINALG_TYPES, ref=_cholesky_ref,
                       torch_name="torch.linalg.cholesky", error_inputs=_errors("linalg.cholesky"),
                       tolerances=SINGLE_TOL, gradcheck_wrapper=hermitian_wrapper))
register_opinfo(OpInfo("linalg_cholesky_ex", _cholesky_samples, dtypes=LINALG_TYPES,
                       ref=lambda a, upper=False, check_errors=False: (_cholesky_ref(a, upper),
                                                                        np.zeros(a.shape[:-2], np.int32)),
                       torch_name="torch.linalg.cholesky_ex", tolerances=SINGLE_TOL,
                       gradcheck_wrapper=hermitian_wrapper))
register_opinfo(OpInfo("cholesky", _top_cholesky_samples, dtypes=LINALG_TYPES, ref=_cholesky_ref,
                       error_inputs=_errors("linalg.cholesky"), tolerances=SINGLE_TOL,
                       gradcheck_wrapper=hermitian_wrapper))


# -- QR, LU, LDL -------------------------------------------------------------------------------------

_RECT = [((3, 3), "square"), ((4, 3), "tall"), ((3, 5), "wide"), ((2, 4, 3), "batched"), ((0, 3), "no rows"),
         ((2, 0, 0), "batch of 0x0")]


def _qr_samples(opinfo, device, dtype, requires_grad):
    for i, (shape, name) in enumerate(_RECT):
        A = rectangular(shape, device, dtype, requires_grad, seed=i)
        yield SampleInput(A, name=name)
        if name in ("tall", "wide"):
            yield SampleInput(A, ("r",), name=name + ", mode r")
            yield SampleInput(A, ("complete",), name=name + ", complete")


register_opinfo(OpInfo(
    "linalg_qr", _qr_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.qr", tolerances=SINGLE_TOL,
    skips=(("test_matches_pytorch", None, "Q and R are unique up to signs: compared through Q R in "
                                          "tests/test_linalg.py"),),
    error_inputs=errors((lambda t, e: SampleInput(t(2, 2), ("x",)), RuntimeError,
                         "qr received unrecognized mode 'x' but expected one of 'reduced'")),
))
register_opinfo(OpInfo(
    "qr", lambda o, d, t, r: (SampleInput(s.input, (s.args[0] != "complete",) if s.args else (), name=s.name)
                              for s in _qr_samples(o, d, t, r) if not s.args or s.args[0] != "r"),
    dtypes=LINALG_TYPES, tolerances=SINGLE_TOL,
    skips=(("test_matches_pytorch", None, "Q and R are unique up to signs: compared through Q R"),),
))


def _lu_samples(opinfo, device, dtype, requires_grad):
    for i, (shape, name) in enumerate(_RECT):
        yield SampleInput(rectangular(shape, device, dtype, requires_grad, seed=i), name=name)


def _lu_factor_ref(a):
    import scipy.linalg

    *batch, m, n = a.shape
    k = min(m, n)
    LU = np.zeros(a.shape, a.dtype)
    piv = np.tile(np.arange(1, k + 1, dtype=np.int32), (*batch, 1))
    if a.size:
        for idx in np.ndindex(*batch):
            lu, p, _ = scipy.linalg.lapack.get_lapack_funcs("getrf", (a,))(a[idx])
            LU[idx], piv[idx] = lu, p + 1
    return LU, piv


def _lu_ref(a):
    import scipy.linalg

    *batch, m, n = a.shape
    k = min(m, n)
    P, L, U = np.zeros((*batch, m, m), a.dtype), np.zeros((*batch, m, k), a.dtype), np.zeros((*batch, k, n), a.dtype)
    for idx in np.ndindex(*batch):
        if a.size:
            P[idx], L[idx], U[idx] = scipy.linalg.lu(a[idx])
        else:
            P[idx], L[idx] = np.eye(m), np.eye(m, k)
    return P, L, U


register_opinfo(OpInfo("linalg_lu_factor_ex", _lu_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.lu_factor_ex",
                       tolerances=SINGLE_TOL, ref=lambda a: (*_lu_factor_ref(a), np.zeros(a.shape[:-2], np.int32)),
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 2), kwargs={"pivot": False}), RuntimeError,
                                            "LU without pivoting is not implemented on the"))))
register_opinfo(OpInfo("linalg_lu_factor", _lu_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.lu_factor",
                       tolerances=SINGLE_TOL, ref=_lu_factor_ref,
                       error_inputs=errors((lambda t, e: SampleInput(e.zeros(2, 2)), RuntimeError,
                                            r"torch.linalg.lu_factor: U\[1,1\] is zero and using it on lu_solve"))))
register_opinfo(OpInfo("linalg_lu", _lu_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.lu",
                       tolerances=SINGLE_TOL, ref=_lu_ref))


def _lu_unpack_samples(opinfo, device, dtype, requires_grad):
    import ember

    for sample in _lu_samples(opinfo, device, dtype, False):
        LU, piv = ember.linalg.lu_factor_ex(sample.input)[:2]
        yield SampleInput(LU.detach().requires_grad_(requires_grad), (piv,), name=sample.name)
    LU, piv = ember.linalg.lu_factor_ex(rectangular((3, 3), device, dtype, False))[:2]
    yield SampleInput(LU.requires_grad_(requires_grad), (piv, True, False), name="no pivots")


register_opinfo(OpInfo("lu_unpack", _lu_unpack_samples, dtypes=LINALG_TYPES, tolerances=SINGLE_TOL,
                       ref=lambda LU, piv, unpack_data=True, unpack_pivots=True: _lu_unpack_ref(LU, piv, unpack_data,
                                                                                                 unpack_pivots)))


def _lu_unpack_ref(LU, piv, unpack_data=True, unpack_pivots=True):
    *batch, m, n = LU.shape
    k = min(m, n)
    L = np.tril(LU[..., :, :k], -1) + np.eye(m, k)
    U = np.triu(LU[..., :k, :])
    P = np.zeros((*batch, m, m), LU.dtype)
    for idx in np.ndindex(*batch):
        perm = np.arange(m)
        for j, p in enumerate(piv[idx] - 1):
            perm[[j, p]] = perm[[p, j]]
        P[idx][perm, np.arange(m)] = 1
    empty = np.zeros((0,), LU.dtype)
    return (P if unpack_pivots else empty, L.astype(LU.dtype) if unpack_data else empty,
            U if unpack_data else empty)


def _ldl_samples(opinfo, device, dtype, requires_grad):
    from ._linalg import hermitian

    for i, (batch, n, name) in enumerate([((), 3, "3x3"), ((2,), 3, "batched"), ((), 0, "0x0")]):
        A = matrices(hermitian, batch, n, device, dtype, False, seed=i)
        yield SampleInput(A, kwargs={"hermitian": dtype.is_complex}, name=name)


register_opinfo(OpInfo("linalg_ldl_factor_ex", _ldl_samples, dtypes=LINALG_TYPES, supports_autograd=False,
                       torch_name="torch.linalg.ldl_factor_ex", tolerances=SINGLE_TOL))
register_opinfo(OpInfo("linalg_ldl_factor", _ldl_samples, dtypes=LINALG_TYPES, supports_autograd=False,
                       torch_name="torch.linalg.ldl_factor", tolerances=SINGLE_TOL))


def _top_lu_samples(opinfo, device, dtype, requires_grad):
    for sample in _lu_samples(opinfo, device, dtype, requires_grad):
        yield SampleInput(sample.input, name=sample.name)
    yield SampleInput(rectangular((2, 3, 3), device, dtype, requires_grad), (True, True), name="get_infos")


def _top_lu_ref(a, pivot=True, get_infos=False):
    LU, piv = _lu_factor_ref(a)
    return (LU, piv, np.zeros(a.shape[:-2], np.int32)) if get_infos else (LU, piv)


register_opinfo(OpInfo("lu", _top_lu_samples, dtypes=LINALG_TYPES, ref=_top_lu_ref, tolerances=SINGLE_TOL))
