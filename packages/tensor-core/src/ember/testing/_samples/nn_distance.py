"""OpInfos of the distances (``cosine_similarity``, ``pairwise_distance``, ``pdist``).

References are written directly from the definitions (in float64, loops where that
is clearer), independently of the kernels; see :mod:`ember.testing._samples._nn_common`.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    SampleInput,
)
from ._common import maker
from ._nn_common import (
    _F32_F64,
    _FLOATS,
    _NO_BOOL,
    _args,
    _errors,
    _f64,
    _nn,
    _t,
    _z,
)


def _cosine_similarity_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)), (make((2, 3)),), name="2-d")
    yield SampleInput(make((2, 3)), (make((3,)),), {"dim": -1}, name="broadcast")
    yield SampleInput(make((4,)), (make((4,)),), {"dim": 0}, name="1-d")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (make((2, 1, 4)),), {"dim": 2, "eps": 1e-3},
                      name="noncontiguous")
    yield SampleInput(make((2, 3)) * 0, (make((2, 3)),), name="zero vectors")
    yield SampleInput(make((0, 3)), (make((0, 3)),), name="empty")


def _cosine_similarity_ref(x1, x2, dim=1, eps=1e-8):
    eps = _eps_in(eps, x1)
    x1, x2 = np.broadcast_arrays(_f64(x1), _f64(x2))
    n1 = np.maximum(np.sqrt((x1 * x1).sum(axis=dim, keepdims=True)), eps)
    n2 = np.maximum(np.sqrt((x2 * x2).sum(axis=dim, keepdims=True)), eps)
    with np.errstate(invalid="ignore", divide="ignore"):  # eps is 0 in float16: zero vectors give nan
        return ((x1 / n1) * (x2 / n2)).sum(axis=dim)


_nn("cosine_similarity", _cosine_similarity_samples, _FLOATS, _cosine_similarity_ref,
    _errors((_args(_z(2, 3), _z(4, 3)), {}, RuntimeError, "must match the size"),
            (_args(_z(3), _z(3)), {}, IndexError, "Dimension out of range"),
            (_args(lambda device: _t(device, [[1, 2]]), lambda device: _t(device, [[1, 2]])), {}, RuntimeError,
             "expected common dtype to be floating point")))


def _pairwise_distance_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    yield SampleInput(make((2, 3)), (make((2, 3)),), name="2-d")
    yield SampleInput(make((2, 3)), (make((3,)),), {"p": 1.0}, name="broadcast, p=1")
    yield SampleInput(make((4,)), (make((4,)),), {"keepdim": True}, name="1-d keepdim")
    yield SampleInput(make(()), (make(()),), name="zero-dim")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (make((2, 3, 4)),), {"p": 3.0, "eps": 0.0},
                      name="noncontiguous, p=3")
    yield SampleInput(make((2, 3)), (make((2, 3)),), {"p": math.inf}, name="inf norm")
    yield SampleInput(make((0, 3)), (make((0, 3)),), name="empty")


def _sub(a, b):
    """``a - b`` in float64, integer inputs subtracted first in their own (wrapping) dtype, as PyTorch does."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        with np.errstate(all="ignore"):
            return np.subtract(a, b).astype(np.float64)
    return _f64(a) - _f64(b)


def _eps_in(eps, x):
    """``eps`` as the input's floating dtype holds it (1e-8 is 0 in float16)."""
    x = np.asarray(x)
    return float(np.asarray(eps).astype(x.dtype)) if x.dtype.kind == "f" else eps


def _pnorm(d, p, axis=-1, keepdims=False):
    a = np.abs(d)
    if p == math.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdims).astype(np.float64)
    return (a**p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


def _pairwise_distance_ref(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    d = _sub(x1, x2) + eps
    if d.ndim == 0:
        return np.abs(d)
    return _pnorm(d, p, -1, keepdim)


_nn("pairwise_distance", _pairwise_distance_samples, _NO_BOOL, _pairwise_distance_ref,
    _errors((_args(_z(2, 3), _z(4)), {}, RuntimeError, "must match the size"),
            (lambda device: (_t(device, [True]), _t(device, [False])), {}, RuntimeError, "Subtraction")),
    tolerances={D.bfloat16: (2e-2, 2e-2)})


def _pdist_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4, 3)), name="4 rows")
    yield SampleInput(make((3, 2)), (1,), name="p=1")
    yield SampleInput(make((3, 5)), (math.inf,), name="inf norm")
    yield SampleInput(make((4, 2), noncontiguous=True), (0.5,), name="noncontiguous, p=0.5")
    yield SampleInput(make((1, 3)), name="one row")
    yield SampleInput(make((3, 0)), name="no columns")


def _pdist_ref(x, p=2):
    x = _f64(x)
    n = x.shape[0]
    return np.array([_pnorm(x[i] - x[j], p) for i in range(n) for j in range(i + 1, n)]).reshape(-1)


_nn("pdist", _pdist_samples, _F32_F64, _pdist_ref,
    _errors((_z(4), {}, RuntimeError, "pdist only supports 2D tensors, got: 1D"),
            (_args(_z(4, 3), -1), {}, RuntimeError, "pdist only supports non-negative p values"),
            (lambda device: (_t(device, [[1, 2]]),), {}, RuntimeError, "pdist only supports floating-point dtypes")))
