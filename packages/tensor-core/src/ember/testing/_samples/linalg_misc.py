"""OpInfos of ember._ops.linalg_misc: pinv, matrix_exp, matrix_power, matrix_rank, cond, multi_dot,
householder_product, tensorinv/tensorsolve, vander, vecdot, cross, diagonal and the trapezoid rules."""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._linalg import (
    LINALG_TYPES,
    SINGLE_TOL,
    errors,
    hermitian,
    matrices,
    rectangular,
    singular,
    well_conditioned,
)

_REAL_AND_COMPLEX = (D.float32, D.float64, D.complex64, D.complex128)


def _A(device, dtype, requires_grad):
    return lambda shape, seed=0: rectangular(shape, device, dtype, requires_grad, seed)


def _pinv_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput(A((4, 3)), name="tall")
    yield SampleInput(A((3, 5), 1), name="wide")
    yield SampleInput(A((2, 3, 3), 2), name="batched")
    yield SampleInput(A((4, 3), 3), kwargs={"rtol": 0.5}, name="rtol drops singular values")
    yield SampleInput(A((4, 3), 4), kwargs={"atol": 1e-3}, name="atol")
    yield SampleInput(A((0, 3)), name="empty")


def _pinv_ref(a, atol=None, rtol=None, hermitian=False):
    *batch, m, n = a.shape
    if a.size == 0:
        return np.zeros((*batch, n, m), a.dtype)
    U, s, Vh = np.linalg.svd(a, full_matrices=False)
    if atol is None and rtol is None:
        atol, rtol = 0.0, np.finfo(s.dtype).eps * max(m, n)
    tol = np.maximum(atol or 0.0, (rtol or 0.0) * s.max(-1, keepdims=True))
    inv = np.where(s > tol, 1 / np.where(s > tol, s, 1), 0)
    return (np.conj(np.swapaxes(Vh, -1, -2)) * inv[..., None, :]) @ np.conj(np.swapaxes(U, -1, -2))


register_opinfo(OpInfo("linalg_pinv", _pinv_samples, dtypes=LINALG_TYPES, ref=_pinv_ref, torch_name="torch.linalg.pinv",
                       tolerances=SINGLE_TOL))


def _pinv_hermitian_samples(opinfo, device, dtype, requires_grad):
    yield SampleInput(matrices(hermitian, (2,), 3, device, dtype, requires_grad), kwargs={"hermitian": True},
                      name="hermitian")


register_opinfo(OpInfo("pinverse", lambda o, d, t, r: (SampleInput(s.input, name=s.name) for s in
                                                       _pinv_samples(o, d, t, r) if not s.kwargs),
                       dtypes=LINALG_TYPES, ref=lambda a, rcond=1e-15: _pinv_ref(a, rtol=rcond),
                       tolerances=SINGLE_TOL))


def _square_samples(opinfo, device, dtype, requires_grad):
    for i, (batch, n, name) in enumerate([((), 3, "3x3"), ((2,), 3, "batched"), ((), 1, "1x1"), ((), 0, "0x0")]):
        yield SampleInput(matrices(well_conditioned, batch, n, device, dtype, requires_grad, seed=i) / 3, name=name)


def _expm_ref(a):
    import scipy.linalg

    return scipy.linalg.expm(a) if a.size else np.zeros(a.shape, a.dtype)


register_opinfo(OpInfo("linalg_matrix_exp", _square_samples, dtypes=LINALG_TYPES, ref=_expm_ref,
                       torch_name="torch.linalg.matrix_exp", tolerances={D.float32: (1e-4, 1e-4),
                                                                          D.complex64: (1e-4, 1e-4)}))
register_opinfo(OpInfo("matrix_exp", _square_samples, dtypes=LINALG_TYPES, ref=_expm_ref,
                       tolerances={D.float32: (1e-4, 1e-4), D.complex64: (1e-4, 1e-4)}))


def _matrix_power_samples(opinfo, device, dtype, requires_grad):
    for sample in _square_samples(opinfo, device, dtype, requires_grad):
        for n in (0, 1, 3, -2):
            if n < 0 and sample.input.shape[-1] == 0:
                continue
            yield SampleInput(sample.input, (n,), name=f"{sample.name}, n={n}")


def _matrix_power_ref(a, n):
    return np.linalg.matrix_power(a, n) if a.size else np.zeros(a.shape, a.dtype)


register_opinfo(OpInfo("linalg_matrix_power", _matrix_power_samples, dtypes=LINALG_TYPES, ref=_matrix_power_ref,
                       torch_name="torch.linalg.matrix_power", tolerances=SINGLE_TOL,
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 3), (2,)), RuntimeError,
                                            "linalg.matrix_power: A must be batches of square matrices"))))
register_opinfo(OpInfo("matrix_power", _matrix_power_samples, dtypes=LINALG_TYPES, ref=_matrix_power_ref,
                       tolerances=SINGLE_TOL))


def _rank_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput(A((4, 3)), name="full rank")
    yield SampleInput(matrices(singular, (2,), 4, device, dtype, requires_grad), name="rank-deficient")
    yield SampleInput(A((3, 3)), kwargs={"rtol": 0.9}, name="rtol")
    yield SampleInput(matrices(hermitian, (), 3, device, dtype, requires_grad), kwargs={"hermitian": True},
                      name="hermitian")
    yield SampleInput(A((0, 3)), name="empty")


def _rank_ref(a, atol=None, rtol=None, hermitian=False):
    if a.size == 0:
        return np.zeros(a.shape[:-2], np.int64)
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    if atol is None and rtol is None:
        atol, rtol = 0.0, np.finfo(s.dtype).eps * max(a.shape[-2:])
    tol = np.maximum(atol or 0.0, (rtol or 0.0) * s.max(-1, keepdims=True))
    return (s > tol).sum(-1)


register_opinfo(OpInfo("linalg_matrix_rank", _rank_samples, dtypes=LINALG_TYPES, ref=_rank_ref,
                       torch_name="torch.linalg.matrix_rank", supports_autograd=False))


def _cond_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    for i, p in enumerate((None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf)):
        yield SampleInput(A((3, 3), i), (p,) if p is not None else (), name=f"p={p}")
    yield SampleInput(A((4, 3)), name="rectangular")
    yield SampleInput(A((2, 3, 3)), (1,), name="batched, p=1")


def _cond_ref(a, p=None):
    return np.linalg.cond(a, p)


register_opinfo(OpInfo("linalg_cond", _cond_samples, dtypes=LINALG_TYPES, ref=_cond_ref, torch_name="torch.linalg.cond",
                       tolerances={D.float32: (1e-3, 1e-3), D.complex64: (1e-3, 1e-3)},
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 2), (3,)), RuntimeError,
                                            "linalg.cond got an invalid norm type: 3"))))


def _multi_dot_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput([A((2, 3)), A((3, 4), 1)], name="two")
    yield SampleInput([A((2, 3)), A((3, 5), 1), A((5, 2), 2), A((2, 4), 3)], name="four")
    yield SampleInput([A((3,)), A((3, 4), 1), A((4,), 2)], name="vectors at both ends")
    yield SampleInput([A((3,)), A((3, 2), 1)], name="row vector")


def _multi_dot_ref(tensors):
    return np.linalg.multi_dot(tensors)


register_opinfo(OpInfo("linalg_multi_dot", _multi_dot_samples, dtypes=LINALG_TYPES, ref=_multi_dot_ref,
                       torch_name="torch.linalg.multi_dot", tolerances=SINGLE_TOL,
                       error_inputs=errors((lambda t, e: SampleInput([t(2, 3)]), RuntimeError,
                                            r"multi_dot\(\): expected at least 2 tensors but got 1"),
                                           (lambda t, e: SampleInput([t(2, 3), t(4, 2)]), RuntimeError,
                                            r"tensors 0 and 1 with shapes \[2, 3\] and \[4, 2\] cannot be "
                                            "multiplied"))))


def _householder_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput(A((4, 3)), (A((2,), 1),), name="tall")
    yield SampleInput(A((3, 3)), (A((3,), 1),), name="square")
    yield SampleInput(A((2, 4, 2)), (A((2, 2), 1),), name="batched")


def _householder_ref(a, tau):
    *batch, m, n = a.shape
    out = np.zeros(a.shape, a.dtype)
    for idx in np.ndindex(*batch):
        Q = np.eye(m, dtype=a.dtype)
        for i in range(tau.shape[-1]):
            v = np.zeros(m, a.dtype)
            v[i] = 1
            v[i + 1:] = a[idx][i + 1:, i]
            Q = Q @ (np.eye(m) - tau[idx][i] * np.outer(v, v.conj()))
        out[idx] = Q[:, :n]
    return out


register_opinfo(OpInfo("linalg_householder_product", _householder_samples, dtypes=LINALG_TYPES,
                       ref=_householder_ref, torch_name="torch.linalg.householder_product", tolerances=SINGLE_TOL,
                       error_inputs=errors((lambda t, e: SampleInput(t(4, 3), (t(4),)), RuntimeError,
                                            "input.shape\\[-1\\] must be greater than or equal to tau.shape\\[-1\\]"))))
register_opinfo(OpInfo("orgqr", _householder_samples, dtypes=LINALG_TYPES, ref=_householder_ref, tolerances=SINGLE_TOL))


def _tensorinv_samples(opinfo, device, dtype, requires_grad):
    yield SampleInput(matrices(well_conditioned, (), 6, device, dtype, requires_grad).reshape(2, 3, 6), name="ind=2")
    yield SampleInput(matrices(well_conditioned, (), 4, device, dtype, requires_grad, 1).reshape(4, 2, 2), (1,),
                      name="ind=1")


def _tensorinv_ref(a, ind=2):
    return np.linalg.tensorinv(a, ind)


register_opinfo(OpInfo("linalg_tensorinv", _tensorinv_samples, dtypes=LINALG_TYPES, ref=_tensorinv_ref,
                       torch_name="torch.linalg.tensorinv", tolerances=SINGLE_TOL,
                       error_inputs=errors((lambda t, e: SampleInput(t(2, 3), (1,)), RuntimeError,
                                            "Expected self to satisfy the requirement"))))


def _tensorsolve_samples(opinfo, device, dtype, requires_grad):
    A6 = matrices(well_conditioned, (), 6, device, dtype, requires_grad)
    yield SampleInput(A6.reshape(2, 3, 6), (rectangular((2, 3), device, dtype, requires_grad, 1),), name="plain")
    yield SampleInput(A6.reshape(6, 2, 3), (rectangular((2, 3), device, dtype, requires_grad, 1),),
                      {"dims": (0,)}, name="dims")


def _tensorsolve_ref(a, b, dims=None):
    return np.linalg.tensorsolve(a, b, dims)


register_opinfo(OpInfo("linalg_tensorsolve", _tensorsolve_samples, dtypes=LINALG_TYPES, ref=_tensorsolve_ref,
                       torch_name="torch.linalg.tensorsolve", tolerances=SINGLE_TOL))


def _vander_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput(A((4,)), name="1-d")
    yield SampleInput(A((2, 3)), kwargs={"N": 5}, name="batched, N")


def _vander_ref(x, N=None):
    n = x.shape[-1] if N is None else N
    return x[..., None] ** np.arange(n)


register_opinfo(OpInfo("linalg_vander", _vander_samples, dtypes=(D.int64, *LINALG_TYPES), ref=_vander_ref,
                       torch_name="torch.linalg.vander", tolerances=SINGLE_TOL,
                       error_inputs=errors((lambda t, e: SampleInput(t(3), kwargs={"N": 1}), RuntimeError,
                                            "linalg.vander: N must be greater than 1"))))


def _top_vander_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput(A((4,)), name="default")
    yield SampleInput(A((3,)), (5, True), name="N, increasing")
    yield SampleInput(A((3,)), (1,), name="N=1")


register_opinfo(OpInfo("vander", _top_vander_samples, dtypes=LINALG_TYPES, tolerances=SINGLE_TOL,
                       ref=lambda x, N=None, increasing=False: np.vander(x, N, increasing)))


def _vecdot_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput(A((2, 3)), (A((3,), 1),), name="broadcast")
    yield SampleInput(A((3, 2)), (A((3, 2), 1),), {"dim": 0}, name="dim 0")


register_opinfo(OpInfo("linalg_vecdot", _vecdot_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.vecdot",
                       ref=lambda x, y, dim=-1: (np.conj(x) * y).sum(dim), tolerances=SINGLE_TOL))


def _cross_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput(A((2, 3)), (A((1, 3), 1),), name="broadcast")
    yield SampleInput(A((3, 2)), (A((3, 2), 1),), {"dim": 0}, name="dim 0")


register_opinfo(OpInfo("linalg_cross", _cross_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.cross",
                       ref=lambda a, b, dim=-1: np.cross(a, b, axis=dim), tolerances=SINGLE_TOL))


def _diagonal_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    yield SampleInput(A((2, 3, 4)), name="batched")
    yield SampleInput(A((3, 4, 2)), kwargs={"offset": 1, "dim1": 0, "dim2": 1}, name="offset, dims")


register_opinfo(OpInfo("linalg_diagonal", _diagonal_samples, dtypes=LINALG_TYPES, torch_name="torch.linalg.diagonal",
                       ref=lambda a, offset=0, dim1=-2, dim2=-1: np.diagonal(a, offset, dim1, dim2)))


def _trapezoid_samples(opinfo, device, dtype, requires_grad):
    A = _A(device, dtype, requires_grad)
    real = D.float64 if dtype in (D.float64, D.complex128) else D.float32
    yield SampleInput(A((2, 5)), name="unit spacing")
    yield SampleInput(A((2, 5)), kwargs={"dx": 0.5}, name="dx")
    yield SampleInput(A((5, 2)), (rectangular((5,), device, real, requires_grad, 1).cumsum(0),), {"dim": 0},
                      name="x, dim 0")
    yield SampleInput(A((2, 5)), (rectangular((2, 5), device, real, requires_grad, 2),), name="x of y's shape")


def _trapezoid_ref(y, x=None, dx=None, dim=-1):
    if x is None:
        return np.trapezoid(y, dx=1.0 if dx is None else dx, axis=dim)
    return np.trapezoid(y, x, axis=dim)


def _cumulative_trapezoid_ref(y, x=None, dx=None, dim=-1):
    import scipy.integrate

    if x is None:
        return scipy.integrate.cumulative_trapezoid(y, dx=1.0 if dx is None else dx, axis=dim)
    return scipy.integrate.cumulative_trapezoid(y, x, axis=dim)


register_opinfo(OpInfo("trapezoid", _trapezoid_samples, dtypes=_REAL_AND_COMPLEX, ref=_trapezoid_ref,
                       tolerances=SINGLE_TOL))
register_opinfo(OpInfo("trapz", _trapezoid_samples, dtypes=_REAL_AND_COMPLEX, ref=_trapezoid_ref, tolerances=SINGLE_TOL,
                       torch_fn=lambda y, x=None, *, dx=None, dim=-1: __import__("torch").trapz(
                           y, x, dim=dim) if x is not None else __import__("torch").trapz(y, dx=dx or 1, dim=dim)))
register_opinfo(OpInfo("cumulative_trapezoid", _trapezoid_samples, dtypes=_REAL_AND_COMPLEX,
                       ref=_cumulative_trapezoid_ref, tolerances=SINGLE_TOL))

