"""OpInfos of ember._ops.linalg_norms: linalg.vector_norm, linalg.matrix_norm, linalg.norm.
References: numpy (``numpy.linalg.norm`` for the matrix norms)."""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._linalg import LINALG_TYPES, SINGLE_TOL, errors, rectangular

_VECTOR_TYPES = (D.float16, D.bfloat16, *LINALG_TYPES)


def _vector_samples(opinfo, device, dtype, requires_grad):
    def x(shape, seed=0):
        return rectangular(shape, device, dtype, requires_grad, seed)

    yield SampleInput(x((5,)), name="vector")
    yield SampleInput(x((2, 3)), name="all elements")
    for i, ord in enumerate((1, 3, 0.5, math.inf, -math.inf)):
        yield SampleInput(x((2, 3), i), (ord,), {"dim": 1}, name=f"ord={ord}")
    yield SampleInput(x((2, 3, 4)), (2, (0, 2), True), name="two dims, keepdim")
    yield SampleInput(x((2, 3)), (0,), {"dim": 0}, name="ord=0")
    yield SampleInput(x(()), name="0-d")
    yield SampleInput(x((2, 0)), (2, 1), name="empty dim")
    if dtype in (D.float32, D.complex64):
        yield SampleInput(x((3,)), kwargs={"dtype": D.float64 if dtype is D.float32 else D.complex128},
                          name="dtype")


def _vector_ref(x, ord=2, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.astype(dtype.numpy_dtype)
    a = np.abs(x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.complex128))
    axis = tuple(range(x.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    if ord == math.inf:
        r = a.max(axis=axis, keepdims=keepdim)
    elif ord == -math.inf:
        r = a.min(axis=axis, keepdims=keepdim)
    elif ord == 0:
        r = (a != 0).sum(axis=axis, keepdims=keepdim).astype(np.float64)
    else:
        r = (a**ord).sum(axis=axis, keepdims=keepdim) ** (1 / ord)
    return np.asarray(r)


register_opinfo(OpInfo(
    "linalg_vector_norm", _vector_samples, dtypes=_VECTOR_TYPES, ref=_vector_ref, torch_name="torch.linalg.vector_norm",
    tolerances=SINGLE_TOL,
    error_inputs=errors(
        (lambda t, e: SampleInput(t(2, dtype=e.int64)), RuntimeError,
         "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long"),
        (lambda t, e: SampleInput(t(2, 0), (math.inf, 1)), RuntimeError,
         "linalg.vector_norm cannot compute the inf norm on the dimension 1"),
        (lambda t, e: SampleInput(t(2, 3), (2, (0, 0))), RuntimeError, "dim 0 appears multiple times"),
        (lambda t, e: SampleInput(t(2, 3), kwargs={"dtype": e.int64}), RuntimeError,
         "linalg.vector_norm: dtype should be floating point or complex, but got Long"),
    ),
))

_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _matrix_samples(opinfo, device, dtype, requires_grad):
    def A(shape, seed=0):
        return rectangular(shape, device, dtype, requires_grad, seed)

    for i, ord in enumerate(_MATRIX_ORDS):
        yield SampleInput(A((3, 4), i), (ord,), name=f"ord={ord}")
    yield SampleInput(A((2, 3, 2)), ("fro", (0, 2), True), name="dims, keepdim")
    yield SampleInput(A((2, 3, 3)), (2,), name="batched 2-norm")
    yield SampleInput(A((2, 4, 3)), (-1, (2, 1)), name="dims reversed")
    yield SampleInput(A((0, 3)), (1,), name="no rows")


def _matrix_ref(a, ord="fro", dim=(-2, -1), keepdim=False, dtype=None):
    if a.size == 0:
        shape = [1 if i in (dim[0] % a.ndim, dim[1] % a.ndim) else n for i, n in enumerate(a.shape)]
        r = np.zeros(shape)
        return r if keepdim else r.squeeze(tuple(d % a.ndim for d in dim))
    return np.linalg.norm(a, ord, axis=tuple(dim), keepdims=keepdim)


register_opinfo(OpInfo(
    "linalg_matrix_norm", _matrix_samples, dtypes=LINALG_TYPES, ref=_matrix_ref, torch_name="torch.linalg.matrix_norm",
    tolerances=SINGLE_TOL,
    error_inputs=errors(
        (lambda t, e: SampleInput(t(2)), RuntimeError, "linalg.matrix_norm: The input tensor A must have at least 2"),
        (lambda t, e: SampleInput(t(2, 2), (3,)), RuntimeError, "linalg.matrix_norm: Order 3 not supported"),
        (lambda t, e: SampleInput(t(2, 2), ("abc",)), RuntimeError, "linalg.matrix_norm: Order abc not supported"),
        (lambda t, e: SampleInput(t(2, 2), ("fro", (0, 0))), RuntimeError, r"dims must be different. Got \(0, 0\)"),
    ),
))


def _norm_samples(opinfo, device, dtype, requires_grad):
    def A(shape, seed=0):
        return rectangular(shape, device, dtype, requires_grad, seed)

    yield SampleInput(A((2, 3, 2)), name="default: all elements")
    yield SampleInput(A((4,)), (3,), name="vector, ord 3")
    yield SampleInput(A((3, 4)), ("nuc",), name="matrix, nuc")
    yield SampleInput(A((3, 4)), (math.inf,), name="matrix, inf")
    yield SampleInput(A((2, 3, 4)), (1, 2), name="dim int")
    yield SampleInput(A((2, 3, 4)), (None, (0, 1), True), name="dims pair, keepdim")


def _norm_ref(a, ord=None, dim=None, keepdim=False, dtype=None):
    if dim is None and ord is None:
        return _vector_ref(a, 2, None, keepdim)
    if isinstance(dim, int) or (dim is None and a.ndim == 1):
        return _vector_ref(a, 2 if ord is None else ord, dim, keepdim)
    return _matrix_ref(a, "fro" if ord is None else ord, (-2, -1) if dim is None else dim, keepdim)


register_opinfo(OpInfo(
    "linalg_norm", _norm_samples, dtypes=LINALG_TYPES, ref=_norm_ref, torch_name="torch.linalg.norm",
    tolerances=SINGLE_TOL,
    error_inputs=errors(
        (lambda t, e: SampleInput(t(2, 2, 2), (2,)), RuntimeError,
         "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D"),
        (lambda t, e: SampleInput(t(2, 2), ("fro", 0)), RuntimeError, "linalg.matrix_norm: dim must be a 2-tuple. Got 0"),
    ),
))
