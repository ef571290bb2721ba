"""Helpers shared by the matrix-product op modules (matmul, addmm, tensor_products, distances, einsum).

PyTorch's argument checks for the products (error types and the shapes/dtypes
in the messages, with its dtype rules: the matrix products need operands of
one dtype and refuse bool; ``outer``, ``addr`` and ``kron`` promote), and the
numpy kernels: float and complex products go to BLAS through ``numpy.matmul``
without copying inputs numpy can use as they are; float16 and bfloat16
compute in float32 and round once at the end.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ._array_module import as_array as _as_array
from ._blas_threads import matmul as _blas_matmul
from ._pointwise_helpers import _torch_name
from ._registry import registry

_FROM_NP = D.from_numpy_dtype
_FLOAT32 = np.dtype(np.float32)
_HALF_TYPES = D.numpy_dtype_set((D.float16, D.bfloat16))  # (learns bfloat16 when ml_dtypes loads)

# C++ spellings of the dtypes, as PyTorch's "expected m1 and m2 to have the same dtype" messages print them.
_C_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
    "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double",
    "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}


def _op(name):
    """The registry op ``name``, looked up when a decomposition runs (ops of later families)."""
    return registry[name]


# -- argument checks shared by the meta functions ------------------------------------------


def _check_tensor(fn, arg, position, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be Tensor, not {type(x).__name__}")


def _tname(np_dtype):
    """PyTorch's scalar-type name (``Float``) of a numpy dtype."""
    return _torch_name(_FROM_NP(np_dtype))


def _cname(np_dtype):
    return _C_NAMES[_FROM_NP(np_dtype).name]


def _no_bool(fn, np_dtype, *sizes):
    """PyTorch has no bool kernels for matrix products; an empty product (a size of 0) needs none."""
    if np_dtype.kind == "b" and 0 not in sizes:
        raise NotImplementedError(f"\"{fn}\" not implemented for 'Bool'")


def _check_mv(fn, rows, cols, vec_len, mat_dt, vec_dt, input_dt=None, input_len=None):
    """PyTorch's checks of a matrix-vector product (``addmv`` names the input too)."""
    input_dt = vec_dt if input_dt is None else input_dt
    if not (input_dt == mat_dt == vec_dt):
        raise RuntimeError(
            f"addmv input tensors must have the same dtype, but got {_tname(input_dt)}, {_tname(mat_dt)}, and "
            f"{_tname(vec_dt)}"
        )
    input_len = rows if input_len is None else input_len
    if cols != vec_len or input_len not in (rows, 1):
        raise RuntimeError(f"size mismatch, got input ({input_len}), mat ({rows}x{cols}), vec ({vec_len})")
    _no_bool(fn, mat_dt, rows, cols)


def _check_same_scalar_type(dt1, dt2):
    if dt1 != dt2:
        raise RuntimeError(f"expected scalar type {_tname(dt1)} but found {_tname(dt2)}")


# -- numpy kernels -----------------------------------------------------------------------


def _blas_ready(a):
    """``a`` itself when numpy's matmul can hand its matrices to BLAS as they are, else a C-contiguous copy.

    numpy falls back to a slow loop for matrices whose last two strides are
    neither row- nor column-major (e.g. every other column); a copy is far
    cheaper than that loop.
    """
    if a.ndim < 2:
        return a
    flags = a.flags
    if flags.c_contiguous or flags.f_contiguous:
        return a
    item = a.itemsize
    s0, s1 = a.strides[-2], a.strides[-1]
    n0, n1 = a.shape[-2], a.shape[-1]
    if (s1 == item and s0 >= n1 * item) or (s0 == item and s1 >= n0 * item):
        return a
    return a.copy(order="C")  # np.ascontiguousarray would pull a CuPy array to the host


def _new_array(r):
    """A numpy result as an ndarray that owns its memory (numpy returns scalars for 0-d products)."""
    return r if type(r) is np.ndarray else _as_array(r)


def _matmul_compute(a, b):
    """``a @ b`` on arrays already in a dtype the kernels compute in (not the half types).

    A batch of matrices times one matrix (or vector) is folded into a single
    product, ``(B*n, k) @ (k, m)``: one large BLAS call instead of B small ones.
    """
    if a.ndim > 2 and b.ndim <= 2:
        lead = a.shape[:-1]
        folded = _matmul_compute(a.reshape(math.prod(lead), a.shape[-1]), b)
        return folded.reshape(lead + b.shape[1:])
    if a.dtype.kind in "iu":
        return _int_matmul(a, b)
    return _new_array(_blas_matmul(_blas_ready(a), _blas_ready(b)))  # small products on one BLAS thread


_EXACT_IN_FLOAT64 = 2**53
_SMALL_PRODUCT = 1 << 15  # multiply-adds below which numpy's integer loop is as fast as a detour through BLAS


def _int_matmul(a, b):
    """Integer ``a @ b``: through float64 BLAS when every partial sum is exact there, else numpy's integer loop.

    numpy's integer matmul is an unblocked loop, tens of times slower than
    BLAS. When ``k * max|a| * max|b| < 2**53`` the float64 product is exact,
    and converting it back wraps around like C integers (and PyTorch) do.
    """
    k = a.shape[-1]
    if k == 0 or a.size * (b.shape[-1] if b.ndim > 1 else 1) < _SMALL_PRODUCT:
        return _new_array(np.matmul(a, b))
    bound = _abs_max(a) * _abs_max(b) * k
    if bound >= _EXACT_IN_FLOAT64:
        return _new_array(np.matmul(a, b))
    product = _new_array(np.matmul(a.astype(np.float64), b.astype(np.float64)))
    return product.astype(np.int64).astype(a.dtype, copy=False)


def _abs_max(a):
    if a.size == 0:
        return 0
    return max(abs(int(a.max())), abs(int(a.min())))


def _compute_array(a, np_dtype):
    """``a`` in the dtype that the kernels compute ``np_dtype`` results in (float32 for the half types)."""
    target = _FLOAT32 if np_dtype in _HALF_TYPES else np_dtype
    return a if a.dtype == target else a.astype(target)


# -- kernels shared by several product op modules ----------------------------------------------------


def _outer_compute(a, b, np_dtype):
    """The outer product of two vectors in the compute dtype of ``np_dtype`` results."""
    a, b = _compute_array(a, np_dtype), _compute_array(b, np_dtype)
    return np.multiply(a[:, None], b[None, :])
def _round_to(x, np_dtype):
    """``x`` (float32) rounded to ``np_dtype``'s precision, kept in float32."""
    return x.astype(np_dtype).astype(_FLOAT32)
