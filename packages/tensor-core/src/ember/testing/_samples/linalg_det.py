"""OpInfos of ember._ops.linalg_det: linalg.det, linalg.slogdet, det, slogdet, logdet.

References: numpy.linalg (the same LAPACK getrf); the samples include
singular and ill-conditioned matrices, where the gradient of det must stay
right (gradcheck at a rank-deficient matrix)."""

from __future__ import annotations

import numpy as np

from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._linalg import (
    LINALG_TYPES,
    SINGLE_TOL,
    errors,
    general,
    ill_conditioned,
    singular,
    square_samples,
    well_conditioned,
)

_KINDS = [
    (general, (), 3, "3x3"),
    (general, (2,), 3, "batched"),
    (general, (2, 1), 2, "two batch dims"),
    (singular, (), 3, "singular (rank 2)"),
    (singular, (2,), 4, "batched singular"),
    (well_conditioned, (), 1, "1x1"),
    (ill_conditioned, (), 4, "ill-conditioned"),
    (general, (), 0, "0x0"),
    (general, (2,), 0, "batch of 0x0"),
    (general, (0,), 3, "empty batch"),
]


def _det_ref(a):
    return np.linalg.det(a) if a.shape[-1] else np.ones(a.shape[:-2], a.dtype)


def _slogdet_ref(a):
    if a.shape[-1] == 0:
        return np.ones(a.shape[:-2], a.dtype), np.zeros(a.shape[:-2])
    sign, logabs = np.linalg.slogdet(a)
    return sign, logabs


def _logdet_ref(a):
    sign, logabs = _slogdet_ref(a)
    if a.dtype.kind == "c":
        return logabs + 1j * np.angle(sign)
    return np.where(sign < 0, np.nan, logabs)


def _square_errors(fn):
    return errors(
        (lambda t, e: SampleInput(t(2, 3)), RuntimeError,
         rf"{fn}: A must be batches of square matrices, but they are 2 by 3 matrices"),
        (lambda t, e: SampleInput(t(3)), RuntimeError, rf"{fn}: The input tensor A must have at least 2 dimensions"),
        (lambda t, e: SampleInput(t(2, 2, dtype=e.int64)), RuntimeError,
         rf"{fn}: Expected a floating point or complex tensor as input. Got Long"),
    )


_SAMPLES = square_samples(_KINDS)
# log|det| of a singular matrix is -inf (numerically: huge), with no gradient: those samples are det's only
_LOG_SAMPLES = square_samples([k for k in _KINDS if k[0] is not singular])
register_opinfo(OpInfo("linalg_det", _SAMPLES, dtypes=LINALG_TYPES, ref=_det_ref, torch_name="torch.linalg.det",
                       error_inputs=_square_errors("linalg.det"), tolerances=SINGLE_TOL))
register_opinfo(OpInfo("det", _SAMPLES, dtypes=LINALG_TYPES, ref=_det_ref, error_inputs=_square_errors("linalg.det"),
                       tolerances=SINGLE_TOL))
register_opinfo(OpInfo("linalg_slogdet", _LOG_SAMPLES, dtypes=LINALG_TYPES, ref=_slogdet_ref,
                       torch_name="torch.linalg.slogdet", error_inputs=_square_errors("linalg.slogdet"),
                       tolerances=SINGLE_TOL))
register_opinfo(OpInfo("slogdet", _LOG_SAMPLES, dtypes=LINALG_TYPES, ref=_slogdet_ref,
                       error_inputs=_square_errors("linalg.slogdet"), tolerances=SINGLE_TOL))
register_opinfo(OpInfo("logdet", _LOG_SAMPLES, dtypes=LINALG_TYPES, ref=_logdet_ref, error_inputs=_square_errors("logdet"),
                       tolerances=SINGLE_TOL))
