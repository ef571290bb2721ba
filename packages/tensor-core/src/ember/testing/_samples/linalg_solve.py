"""OpInfos of ember._ops.linalg_solve: linalg.inv/inv_ex, linalg.solve/solve_ex, linalg.solve_triangular,
inverse. References: numpy.linalg and scipy.linalg.solve_triangular."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._linalg import (
    LINALG_TYPES,
    SINGLE_TOL,
    errors,
    ill_conditioned,
    matrices,
    rectangular,
    square_samples,
    well_conditioned,
)

_KINDS = [
    (well_conditioned, (), 3, "3x3"),
    (well_conditioned, (2,), 3, "batched"),
    (well_conditioned, (2, 1), 2, "two batch dims"),
    (well_conditioned, (), 1, "1x1"),
    (ill_conditioned, (), 4, "ill-conditioned"),
    (well_conditioned, (), 0, "0x0"),
    (well_conditioned, (0,), 3, "empty batch"),
]
_SQUARE = square_samples(_KINDS)


def _inv_ref(a):
    return np.linalg.inv(a) if a.size else np.zeros(a.shape, a.dtype)


def _inv_ex_ref(a, check_errors=False):
    return _inv_ref(a), np.zeros(a.shape[:-2], np.int32)


def _square_errors(fn):
    return errors(
        (lambda t, e: SampleInput(t(2, 3)), RuntimeError,
         rf"{fn}: A must be batches of square matrices, but they are 2 by 3 matrices"),
        (lambda t, e: SampleInput(t(2, 2, dtype=e.int32)), RuntimeError,
         rf"{fn}: Expected a floating point or complex tensor as input. Got Int"),
        (lambda t, e: SampleInput(e.zeros(2, 2, 2)), Exception, rf"{fn}: \(Batch element 0\): The diagonal element 1 "
         "is zero, the inversion could not be completed because the input matrix is singular")
        if fn == "linalg.inv" else (lambda t, e: SampleInput(t(3)), RuntimeError, "at least 2 dimensions"),
    )


register_opinfo(OpInfo("linalg_inv", _SQUARE, dtypes=LINALG_TYPES, ref=_inv_ref, torch_name="torch.linalg.inv",
                       error_inputs=_square_errors("linalg.inv"), tolerances=SINGLE_TOL))
register_opinfo(OpInfo("inverse", _SQUARE, dtypes=LINALG_TYPES, ref=_inv_ref, error_inputs=_square_errors("linalg.inv"),
                       tolerances=SINGLE_TOL))
register_opinfo(OpInfo("linalg_inv_ex", _SQUARE, dtypes=LINALG_TYPES, ref=_inv_ex_ref,
                       torch_name="torch.linalg.inv_ex", error_inputs=_square_errors("linalg.inv_ex"),
                       tolerances=SINGLE_TOL))


def _solve_samples(opinfo, device, dtype, requires_grad):
    def A(batch, n, seed=0, kind=well_conditioned):
        return matrices(kind, batch, n, device, dtype, requires_grad, seed)

    def B(shape, seed=1):
        return rectangular(shape, device, dtype, requires_grad, seed)

    yield SampleInput(A((), 3), (B((3, 2)),), name="matrix")
    yield SampleInput(A((), 3), (B((3,)),), name="vector")
    yield SampleInput(A((2,), 3), (B((2, 3)),), name="batch of vectors")
    yield SampleInput(A((2,), 3), (B((3, 4)),), name="broadcast B")
    yield SampleInput(A((), 3), (B((2, 3, 1)),), name="broadcast A")
    yield SampleInput(A((), 3), (B((2, 3)),), {"left": False}, name="left=False")
    yield SampleInput(A((2, 1), 2), (B((1, 3, 2, 2)),), name="broadcast both")
    yield SampleInput(A((), 4, kind=ill_conditioned), (B((4, 2)),), name="ill-conditioned")
    yield SampleInput(A((), 0), (B((0, 2)),), name="0x0")
    yield SampleInput(A((0,), 3), (B((0, 3, 2)),), name="empty batch")


def _solve_ref(a, b, left=True, check_errors=False):
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if vector:
        b = b[..., None]
    if not left:
        a, b = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    x = np.linalg.solve(a, b) if a.size and b.size else np.zeros(b.shape, b.dtype)
    if not left:
        x = np.swapaxes(x, -1, -2)
    return x[..., 0] if vector else x


def _solve_ex_ref(a, b, left=True, check_errors=False):
    return _solve_ref(a, b, left), np.zeros(a.shape[:-2], np.int32)


def _solve_errors(fn, torch_fn):
    return errors(
        (lambda t, e: SampleInput(t(2, 2), (t(3),)), RuntimeError,
         rf"{fn}: Incompatible shapes of A and B for the equation AX = B \(2x2 and 3x1\)"),
        (lambda t, e: SampleInput(t(2, 2), (t(2, 2, dtype=e.float64),)), RuntimeError,
         rf"{fn}: Expected A and B to have the same dtype, but found A of type Float and B of type Double instead"),
        (lambda t, e: SampleInput(t(2, 3), (t(2),)), RuntimeError, "A must be batches of square matrices"),
        (lambda t, e: SampleInput(t(2, 2, 2) * 0, (t(2, 2, 1),)), Exception,  # (zeros on the device under test)
         rf"{torch_fn}: \(Batch element 0\): The solver failed because the input matrix is singular"),
    )


register_opinfo(OpInfo("linalg_solve", _solve_samples, dtypes=LINALG_TYPES, ref=_solve_ref,
                       torch_name="torch.linalg.solve", error_inputs=_solve_errors("linalg.solve", "torch.linalg.solve"),
                       tolerances=SINGLE_TOL))
register_opinfo(OpInfo("linalg_solve_ex", _solve_samples, dtypes=LINALG_TYPES, ref=_solve_ex_ref,
                       torch_name="torch.linalg.solve_ex",
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 2), (t(3),)), RuntimeError,
                                            "linalg.solve_ex: Incompatible shapes")),
                       tolerances=SINGLE_TOL))


def _triangular_samples(opinfo, device, dtype, requires_grad):
    def A(batch, n, seed=0):
        return matrices(well_conditioned, batch, n, device, dtype, requires_grad, seed)

    def B(shape, seed=1):
        return rectangular(shape, device, dtype, requires_grad, seed)

    yield SampleInput(A((), 3), (B((3, 2)),), {"upper": True}, name="upper")
    yield SampleInput(A((), 3), (B((3, 2)),), {"upper": False}, name="lower")
    yield SampleInput(A((2,), 3), (B((3, 4)),), {"upper": False}, name="batched, broadcast B")
    yield SampleInput(A((), 3), (B((2, 3)),), {"upper": True, "left": False}, name="left=False")
    yield SampleInput(A((), 3), (B((3, 1)),), {"upper": False, "unitriangular": True}, name="unitriangular")
    yield SampleInput(A((), 0), (B((0, 2)),), {"upper": True}, name="0x0")


def _triangular_ref(a, b, upper, left=True, unitriangular=False):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if a.shape[-1] == 0 or b.size == 0:
        return np.zeros(batch + b.shape[-2:], b.dtype)
    a = np.broadcast_to(a, batch + a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    out = []
    for ai, bi in zip(a, b):
        if ai.shape[-1] == 0:
            out.append(np.zeros(bi.shape, bi.dtype))
        elif left:
            out.append(scipy.linalg.solve_triangular(ai, bi, lower=not upper, unit_diagonal=unitriangular))
        else:
            out.append(scipy.linalg.solve_triangular(ai.T, bi.T, lower=upper, unit_diagonal=unitriangular).T)
    return np.stack(out).reshape(batch + b.shape[-2:]) if out else np.zeros(batch + b.shape[-2:], b.dtype)


register_opinfo(OpInfo("linalg_solve_triangular", _triangular_samples, dtypes=LINALG_TYPES, ref=_triangular_ref,
                       torch_name="torch.linalg.solve_triangular", tolerances=SINGLE_TOL,
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 2), (t(3, 1),), {"upper": True}), RuntimeError,
                                            "linalg.solve_triangular: Incompatible shapes of A and B"))))


# -- lu_solve, cholesky_solve/inverse, triangular_solve, ldl_solve, lstsq ---------------------------------


def _lu_solve_samples(opinfo, device, dtype, requires_grad):
    import ember

    cases = [((), 3, (3, 2), {}, "matrix"), ((2,), 3, (3, 2), {}, "batched LU, broadcast B"),
             ((), 3, (2, 3, 1), {}, "broadcast LU"), ((), 3, (3, 2), {"adjoint": True}, "adjoint"),
             ((), 3, (2, 3), {"left": False}, "left=False"),
             ((), 3, (2, 3), {"left": False, "adjoint": True}, "left=False, adjoint"), ((), 0, (0, 2), {}, "0x0")]
    for i, (batch, n, b_shape, kwargs, name) in enumerate(cases):
        A = matrices(well_conditioned, batch, n, device, dtype, False, seed=i)
        LU, piv = ember.linalg.lu_factor(A)
        yield SampleInput(LU.requires_grad_(requires_grad), (piv, rectangular(b_shape, device, dtype, requires_grad, i)),
                          kwargs, name=name)


def _lu_solve_ref(LU, piv, B, left=True, adjoint=False):
    from ember.testing._samples.linalg_factor import _lu_unpack_ref

    P, L, U = _lu_unpack_ref(LU, piv)
    A = P @ L @ U
    if adjoint:
        A = np.conj(np.swapaxes(A, -1, -2))
    return _solve_ref(A, B, left)


register_opinfo(OpInfo("linalg_lu_solve", _lu_solve_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.lu_solve",
                       ref=_lu_solve_ref, tolerances=SINGLE_TOL,
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 2), (t(2, dtype=e.int32), t(3, 1))),
                                            RuntimeError, "linalg.lu_solve: Incompatible shapes"))))
register_opinfo(OpInfo("lu_solve", lambda o, d, t, r: (SampleInput(s.args[1], (s.input, s.args[0]), name=s.name)
                                                       for s in _lu_solve_samples(o, d, t, r) if not s.kwargs),
                       dtypes=LINALG_TYPES, tolerances=SINGLE_TOL,
                       ref=lambda b, LU, piv: _lu_solve_ref(LU, piv, b)))


def _cholesky_solve_samples(opinfo, device, dtype, requires_grad):
    import ember

    from ._linalg import hermitian_pd

    for i, (batch, n, b_shape, upper, name) in enumerate([((), 3, (3, 2), False, "lower"),
                                                          ((2,), 3, (3, 2), True, "upper, batched"),
                                                          ((), 3, (2, 3, 1), False, "broadcast")]):
        S = matrices(hermitian_pd, batch, n, device, dtype, False, seed=i)
        L = ember.linalg.cholesky(S, upper=upper)
        yield SampleInput(rectangular(b_shape, device, dtype, requires_grad, i), (L.requires_grad_(requires_grad),
                                                                                   upper), name=name)


def _cholesky_solve_ref(b, L, upper=False):
    Lh = np.conj(np.swapaxes(L, -1, -2))
    A = Lh @ L if upper else L @ Lh
    return _solve_ref(A, b)


def _triangular_factor_wrapper(op, B, L, upper=False):
    """Gradient tests through the triangle of ``L`` the op reads (PyTorch's OpInfos do the same): PyTorch's
    formula treats ``L`` as a full matrix, which finite differences of the untouched triangle cannot see."""
    return op(B, L.triu() if upper else L.tril(), upper)


def _triangular_factor_wrapper_1(op, L, upper=False):
    return op(L.triu() if upper else L.tril(), upper)


register_opinfo(OpInfo("cholesky_solve", _cholesky_solve_samples, dtypes=LINALG_TYPES, ref=_cholesky_solve_ref,
                       tolerances=SINGLE_TOL, gradcheck_wrapper=_triangular_factor_wrapper))
register_opinfo(OpInfo("cholesky_inverse",
                       lambda o, d, t, r: (SampleInput(s.args[0], (s.args[1],), name=s.name)
                                           for s in _cholesky_solve_samples(o, d, t, r)),
                       dtypes=LINALG_TYPES, tolerances=SINGLE_TOL, gradcheck_wrapper=_triangular_factor_wrapper_1,
                       ref=lambda L, upper=False: np.linalg.inv(
                           np.conj(np.swapaxes(L, -1, -2)) @ L if upper else L @ np.conj(np.swapaxes(L, -1, -2)))))


def _triangular_solve_samples(opinfo, device, dtype, requires_grad):
    for s in _triangular_samples(opinfo, device, dtype, requires_grad):
        if s.kwargs.get("left", True) and s.input.shape[-1]:
            yield SampleInput(s.args[0], (s.input, s.kwargs["upper"]), {"unitriangular": s.kwargs.get("unitriangular",
                                                                                                          False)},
                              name=s.name)
    A = matrices(well_conditioned, (), 3, device, dtype, requires_grad)
    yield SampleInput(rectangular((3, 2), device, dtype, requires_grad), (A,), {"transpose": True}, name="transpose")


def _triangular_solve_ref(b, A, upper=True, transpose=False, unitriangular=False):
    coefficient = np.swapaxes(A, -1, -2) if transpose else A
    x = _triangular_ref(coefficient, b, upper != transpose, True, unitriangular)
    return x, np.broadcast_to(A, x.shape[:-2] + A.shape[-2:])


register_opinfo(OpInfo("triangular_solve", _triangular_solve_samples, dtypes=LINALG_TYPES, ref=_triangular_solve_ref,
                       tolerances=SINGLE_TOL))


def _ldl_solve_samples(opinfo, device, dtype, requires_grad):
    import ember

    from ._linalg import hermitian

    for i, (batch, name) in enumerate([((), "3x3"), ((2,), "batched")]):
        A = matrices(hermitian, batch, 3, device, dtype, False, seed=i)
        LD, piv = ember.linalg.ldl_factor(A, hermitian=dtype.is_complex)
        yield SampleInput(LD, (piv, rectangular((3, 2), device, dtype, False, i)), {"hermitian": dtype.is_complex},
                          name=name)


register_opinfo(OpInfo("linalg_ldl_solve", _ldl_solve_samples, dtypes=LINALG_TYPES, supports_autograd=False,
                       torch_name="torch.linalg.ldl_solve", tolerances=SINGLE_TOL))


def _lstsq_samples(opinfo, device, dtype, requires_grad):
    def A(shape, seed=0):
        return rectangular(shape, device, dtype, requires_grad, seed)

    yield SampleInput(A((5, 3)), (A((5, 2), 1),), name="tall")
    yield SampleInput(A((5, 3)), (A((5,), 1),), name="vector")
    yield SampleInput(A((2, 5, 3)), (A((1, 5, 2), 1),), name="batched, broadcast B")
    yield SampleInput(A((3, 3)), (A((3, 2), 1),), name="square")
    for driver in ("gelsd", "gelss", "gels"):
        yield SampleInput(A((5, 3)), (A((5, 2), 1),), {"driver": driver}, name=f"driver {driver}")
    yield SampleInput(A((3, 5)), (A((3, 2), 1),), {"driver": "gelsd"}, name="wide (minimum norm)")


def _lstsq_ref(a, b, rcond=None, driver=None):
    vector = b.ndim == a.ndim - 1
    bm = b[..., None] if vector else b
    batch = np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    pinv = np.linalg.pinv(np.broadcast_to(a, batch + a.shape[-2:]))
    x = pinv @ np.broadcast_to(bm, batch + bm.shape[-2:])
    driver = driver or "gelsy"
    m, n = a.shape[-2:]
    real = np.finfo(a.dtype).dtype
    if m > n and driver != "gelsy":
        residuals = (np.abs(a @ x - bm) ** 2).sum(-2)
        residuals = residuals[..., 0] if vector else residuals
    else:
        residuals = np.zeros((0,), real)
    rank = np.full(batch, min(m, n), np.int64) if driver != "gels" else np.zeros((0,), np.int64)
    sv = np.linalg.svd(a, compute_uv=False) if driver in ("gelsd", "gelss") else np.zeros((0,), real)
    return (x[..., 0] if vector else x), residuals.astype(real), rank, sv.astype(real)


def _lstsq_wrapper(op, A, B, *args, **kwargs):
    """The differentiable outputs (PyTorch's singular_values do not require grad)."""
    result = op(A, B, *args, **kwargs)
    return result[0], result[1]


register_opinfo(OpInfo("linalg_lstsq", _lstsq_samples, dtypes=LINALG_TYPES, ref=_lstsq_ref,
                       torch_name="torch.linalg.lstsq", tolerances=SINGLE_TOL, gradcheck_wrapper=_lstsq_wrapper,
                       error_inputs=errors((lambda t, e: SampleInput(t(4, 3), (t(4, 2),), {"driver": "xx"}),
                                            RuntimeError, "parameter `driver` should be one of"))))
