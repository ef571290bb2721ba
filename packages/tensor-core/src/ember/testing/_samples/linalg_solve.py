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
        (lambda t, e: SampleInput(e.zeros(2, 2, 2), (t(2, 2, 1),)), Exception,
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
