"""Shared pieces of the ``ember.linalg`` op modules (``linalg_<concept>.py``).

* :class:`LinAlgError`, raised by the factorizations and solvers when LAPACK (or
  cuSOLVER) reports a singular or non-positive-definite input, naming the batch
  element, as PyTorch words it;
* the argument checks every linalg meta function shares (float or complex
  dtype, at least two dims, square matrices), with PyTorch's messages;
* :func:`linalg_op`, which registers an op with its CPU kernel and the same
  kernel for CUDA: kernels are written once against the array namespace
  (``numpy.linalg`` forwards to ``cupy.linalg`` for CuPy arrays through
  ``__array_function__``; :func:`scipy_linalg` picks ``scipy.linalg`` or
  ``cupyx.scipy.linalg``);
* :func:`lapack_info`, the per-matrix LAPACK ``info`` codes of a batch, computed
  only on the failure path (numpy's batched routines raise for the whole batch
  without saying which matrix failed).

Registry names follow ATen (``linalg_det``, ``linalg_inv_ex``...). They carry the
tags ``"submodule"`` and ``"linalg"``: they are exported as ``ember.linalg.<name>``, not at the top
level, where PyTorch keeps its own aliases (``ember.det``, ``ember.inverse``).
"""

from __future__ import annotations

import collections
import functools
import inspect

import numpy as np

from .. import _dtype as D
from ._array_module import array_namespace, is_device_array
from ._pointwise_helpers import _torch_name
from ._registry import _MORE_TENSOR_PARAMETERS, PRIM, defop

__all__ = [
    "LinAlgError", "FLOAT_TYPES", "linalg_op", "return_type", "check_float", "check_matrix", "check_square",
    "check_same_dtype", "real_dtype", "batch_label", "raise_for_info", "lapack_info", "scipy_linalg", "eye_like",
    "finite_info", "prefers_lapack_loop", "lapack_each",
]


class LinAlgError(RuntimeError):
    """A linear-algebra routine failed on its input (singular, not positive-definite, no convergence).

    A subclass of :class:`RuntimeError`, as ``torch.linalg.LinAlgError``. The message names the failing
    matrix of a batch ("(Batch element 3): ...").
    """


LinAlgError.__module__ = "ember.linalg"

#: The numpy dtypes linalg factorizations take.
FLOAT_TYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
_REAL = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
LINALG_TAG = "linalg"

#: The tensor parameters of linalg ops, named as in PyTorch's linalg signatures (``A``, ``B``, ``LU``...):
#: they are not in the registry's ``TENSOR_PARAMETERS`` (``x``/``y``/``b`` mean other things elsewhere), so
#: :func:`linalg_op` declares them for each op it registers. The dispatcher then refuses a list or tuple
#: there, and names the argument for a number, with PyTorch's TypeError, before any meta function reads
#: ``._data`` of it.
_TENSOR_NAMES = frozenset({"A", "B", "L", "LD", "LU", "LU_data", "LU_pivots", "pivots", "tau", "b", "x", "y"})


def linalg_op(name, meta, cpu, *, cuda=True, category=PRIM, decomposition=None, has_out=True, return_type=None,
              public=False):
    """Register a linalg op; ``cpu`` is also its CUDA kernel unless ``cuda`` is False or another callable.

    ``public=True`` exports it as ``ember.<name>`` too (PyTorch's top-level aliases); otherwise it is tagged
    ``"linalg"`` and lives in ``ember.linalg`` only.
    """
    tensor_names = [p for p in inspect.signature(meta).parameters if p in _TENSOR_NAMES]
    if tensor_names:  # before the op is built: Op.tensor_parameters reads this table on first use
        _MORE_TENSOR_PARAMETERS[name] = (*_MORE_TENSOR_PARAMETERS.get(name, ()), *tensor_names)
    op = defop(name, meta, cpu=cpu, category=category, decomposition=decomposition, has_out=has_out,
               tags=() if public else ("submodule", LINALG_TAG), return_type=return_type)
    if cuda is True and cpu is not None:
        op.register_kernel("cuda", cpu)
    elif callable(cuda):
        op.register_kernel("cuda", cuda)
    return op


def return_type(name, fields):
    """The namedtuple ``ember.return_types.<name>`` with ``fields``."""
    cls = collections.namedtuple(name, fields)
    cls.__module__ = "ember.return_types"
    return cls


def check_float(fn, A, what="input"):
    """Refuse integer, bool and half dtypes as PyTorch does ("Expected a floating point or complex tensor")."""
    dtype = A._data.dtype
    if dtype not in FLOAT_TYPES:
        name = _torch_name(D.from_numpy_dtype(dtype))
        if dtype.kind in "fc":  # float16/bfloat16: PyTorch names the dtype as unsupported
            raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got {name}")
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as {what}. Got {name}")
    return dtype


def check_matrix(fn, A, name="A"):
    """``A`` must have at least two dims (a matrix or a batch of them)."""
    if A._data.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor {name} must have at least 2 dimensions.")


def check_square(fn, A, name="A"):
    """``A`` must be a (batch of) square matrices; also checks the dtype. Returns the numpy dtype."""
    check_matrix(fn, A, name)
    rows, cols = A._data.shape[-2:]
    if rows != cols:
        raise RuntimeError(f"{fn}: {name} must be batches of square matrices, but they are {rows} by {cols} matrices")
    return check_float(fn, A)


def check_same_dtype(fn, A, B, names=("A", "B")):
    a, b = A._data.dtype, B._data.dtype
    if a != b:
        ta, tb = _torch_name(D.from_numpy_dtype(a)), _torch_name(D.from_numpy_dtype(b))
        raise RuntimeError(
            f"{fn}: Expected {names[0]} and {names[1]} to have the same dtype, but found {names[0]} of type {ta} "
            f"and {names[1]} of type {tb} instead"
        )


def real_dtype(np_dtype):
    """The real dtype of the same precision (float64 for complex128)."""
    return _REAL.get(np_dtype, np_dtype)


def batch_label(batch_shape, flat_index):
    """PyTorch's "(Batch element k): " prefix for a failing matrix of a batch, "" for a single matrix."""
    return f"(Batch element {flat_index}): " if len(batch_shape) else ""


def raise_for_info(fn, info, batch_shape, describe, error=LinAlgError):
    """Raise ``error`` (:class:`LinAlgError`) for the first nonzero entry of ``info`` (an array of LAPACK codes).

    ``describe(code)`` words the failure of one matrix (PyTorch's text, without the batch prefix).
    """
    flat = np.asarray(info.get() if is_device_array(info) else info).reshape(-1)
    bad = np.flatnonzero(flat)
    if bad.size:
        k = int(bad[0])
        raise error(f"{fn}: {batch_label(batch_shape, k)}{describe(int(flat[k]))}")


def lapack_info(routine, a, **kwargs):
    """The LAPACK ``info`` of ``routine`` (``"getrf"``, ``"potrf"``) on each matrix of the batch ``a``.

    Loops over the batch in Python: it runs only after a batched numpy routine refused the batch, to find
    which matrices fail and why, as PyTorch reports it.
    """
    from scipy.linalg import lapack

    a = np.asarray(a)
    batch = a.shape[:-2]
    mats = a.reshape(-1, *a.shape[-2:])
    fn = lapack.get_lapack_funcs(routine, (mats,))
    info = np.zeros(len(mats), np.int32)
    for i, m in enumerate(mats):
        info[i] = fn(m, **kwargs)[-1]
    return info.reshape(batch)


def finite_info(result, code=1):
    """``info`` from the results of a routine that does not report failures (cuSOLVER through CuPy, whose
    results are NaN/inf for a singular matrix): ``code`` where a matrix's result is not all finite."""
    xp = array_namespace(result)
    ok = xp.isfinite(result).reshape(*result.shape[:-2], -1).all(axis=-1)
    return xp.where(ok, 0, code).astype(np.int32)


def scipy_linalg(xp):
    """``scipy.linalg`` for numpy arrays, ``cupyx.scipy.linalg`` for CuPy ones."""
    if xp is np:
        import scipy.linalg

        return scipy.linalg
    import cupyx.scipy.linalg

    return cupyx.scipy.linalg


def eye_like(xp, n, dtype, batch=()):
    """An ``n x n`` identity broadcast to ``batch`` (read-only view)."""
    return xp.broadcast_to(xp.eye(n, dtype=dtype), (*batch, n, n))


_SINGLE = frozenset(np.dtype(t) for t in (np.float32, np.complex64))


def prefers_lapack_loop(a, small_batch=4):
    """Whether to call LAPACK once per matrix through ``scipy.linalg.lapack`` rather than numpy's batched
    gufunc: numpy computes float32/complex64 in double precision (twice the time, then a cast back) and
    copies each matrix to Fortran order first, which costs more than a Python loop over a few matrices."""
    if type(a) is not np.ndarray or a.size == 0:
        return False
    count = a.size // (a.shape[-1] * a.shape[-2])
    return a.dtype in _SINGLE or count <= small_batch


@functools.cache
def lapack_routine(routine, dtype):
    """scipy's wrapper of LAPACK ``routine`` (``"potrf"``) for ``dtype`` (looked up once per pair)."""
    from scipy.linalg import lapack

    return lapack.get_lapack_funcs(routine, dtype=dtype)


def lapack_each(routine, a, transposed=False, **kwargs):
    """``routine`` (a LAPACK name without its type prefix, ``"potrf"``) on each matrix of ``a``: the list of
    its per-matrix result tuples, in the batch's row-major order. ``transposed`` hands LAPACK each matrix's
    transpose, a Fortran-ordered view of a C-ordered matrix (no copy to Fortran order)."""
    fn = lapack_routine(routine, a.dtype)
    mats = a.reshape(-1, *a.shape[-2:])
    if transposed:
        return [fn(m.T, **kwargs) for m in mats]
    return [fn(m, **kwargs) for m in mats]
