"""OpInfos of ember._ops.linalg_factor: linalg.cholesky/cholesky_ex and cholesky.

The gradient tests go through ``(A + A^H) / 2`` (:func:`._linalg.hermitian_wrapper`): the op reads one
triangle, and its gradient is PyTorch's, the one with respect to a Hermitian input."""

from __future__ import annotations

import numpy as np

from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._linalg import LINALG_TYPES, SINGLE_TOL, errors, hermitian_pd, hermitian_wrapper, matrices

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
