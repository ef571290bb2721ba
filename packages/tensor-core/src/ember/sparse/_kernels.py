"""Array-level kernels of sparse tensors: products through scipy.sparse (CPU) or cupyx.scipy.sparse (CUDA).

Everything here takes and returns backend arrays (``numpy.ndarray`` on the CPU, ``cupy.ndarray``
on CUDA) and never records autograd: :mod:`ember.sparse._tensor` and the autograd Function in
``ember.autograd._sparse`` wrap them. scipy and cupyx are imported on first use, so ``import
ember`` does not pay for them.
"""

from __future__ import annotations

import numpy as np

from .._ops._xp import is_device_array

__all__ = ["array_module", "linearize", "unlinearize", "spmm", "csr_offsets", "csr_rows"]

# dtypes scipy's (and cuSPARSE's) products take as they are; others are computed in a wider type
_NATIVE_CPU = {np.dtype(t) for t in ("float32", "float64", "complex64", "complex128", "int32", "int64")}
_NATIVE_CUDA = {np.dtype(t) for t in ("float32", "float64", "complex64", "complex128")}


def array_module(array):
    """numpy for host arrays, cupy for GPU arrays (imported only when one is met)."""
    if is_device_array(array):
        import cupy

        return cupy
    return np


def linearize(indices, sparse_shape):
    """Row-major linear positions of the columns of ``indices`` (int64, (sparse_dim, nnz)) in ``sparse_shape``."""
    xp = array_module(indices)
    linear = xp.zeros(indices.shape[1], dtype=np.int64)
    for d, size in enumerate(sparse_shape):
        linear = linear * size + indices[d]
    return linear


def unlinearize(linear, sparse_shape):
    """The inverse of :func:`linearize`: indices of shape (len(sparse_shape), n)."""
    xp = array_module(linear)
    rows = []
    for size in reversed(sparse_shape):
        rows.append(linear % size)
        linear = linear // size
    if not rows:
        return xp.zeros((0, linear.shape[0]), dtype=np.int64)
    return xp.stack(rows[::-1]).astype(np.int64, copy=False)


def csr_offsets(rows, n_rows):
    """CSR row offsets (``crow_indices``, length ``n_rows + 1``) of sorted row indices."""
    xp = array_module(rows)
    offsets = xp.zeros(n_rows + 1, dtype=np.int64)
    offsets[1:] = xp.cumsum(xp.bincount(rows, minlength=n_rows)[:n_rows])
    return offsets


def csr_rows(crow_indices):
    """The row index of each stored element of a CSR matrix, from its row offsets."""
    xp = array_module(crow_indices)
    nnz = int(crow_indices[-1])
    # element k lies in the row whose end offset is the first one above k (cupy.repeat takes no array counts)
    return xp.searchsorted(crow_indices[1:], xp.arange(nnz, dtype=np.int64), side="right").astype(np.int64)


def _compute_dtype(dtype, native):
    """The dtype a product of ``dtype`` operands is computed in, and whether results are cast back."""
    if dtype in native:
        return dtype
    if dtype.kind in "iub":
        return np.dtype(np.int64) if np.dtype(np.int64) in native else np.dtype(np.float64)
    return np.dtype(np.float32)  # float16, bfloat16: accumulated in float32, rounded once


def spmm(rows, cols, values, dense, n_rows):
    """``S @ dense`` for the 2-D sparse matrix ``S`` of shape ``(n_rows, dense.shape[0])`` given by COO entries.

    Duplicate entries (an uncoalesced ``S``) add up, as in the dense matrix they stand for.

    Args:
        rows, cols: int64 arrays (nnz,), the coordinates of the entries.
        values: array (nnz,), the entries, of ``dense``'s dtype.
        dense: array (k, n).
        n_rows (int): the number of rows of ``S``.

    Returns:
        array (n_rows, n) of ``dense``'s dtype, on ``dense``'s device.
    """
    if is_device_array(dense):
        return _spmm_cuda(rows, cols, values, dense, n_rows)
    import scipy.sparse

    dtype = dense.dtype
    compute = _compute_dtype(dtype, _NATIVE_CPU)
    shape = (n_rows, dense.shape[0])
    if values.shape[0] == 0:
        return np.zeros((n_rows, dense.shape[1]), dtype=dtype)
    # scipy indexes with int32 where the shape allows; the matrix sums duplicate entries
    matrix = scipy.sparse.csr_array((values.astype(compute, copy=False), (rows, cols)), shape=shape)
    result = matrix @ dense.astype(compute, copy=False)
    return np.ascontiguousarray(result, dtype=dtype)


def _spmm_cuda(rows, cols, values, dense, n_rows):
    import cupy

    dtype = dense.dtype
    if values.shape[0] == 0:
        return cupy.zeros((n_rows, dense.shape[1]), dtype=dtype)
    compute = _compute_dtype(dtype, _NATIVE_CUDA)
    if dtype.kind in "iub":
        # cuSPARSE has no integer products: add each entry's scaled row of dense into its output row
        import cupyx

        out = cupy.zeros((n_rows, dense.shape[1]), dtype=np.int64)
        cupyx.scatter_add(out, rows, values.astype(np.int64)[:, None] * dense[cols].astype(np.int64))
        return out.astype(dtype)
    import cupyx.scipy.sparse

    matrix = cupyx.scipy.sparse.coo_matrix(
        (values.astype(compute, copy=False), (rows, cols)), shape=(n_rows, dense.shape[0])
    ).tocsr()  # sums duplicates
    result = matrix @ cupy.ascontiguousarray(dense.astype(compute, copy=False))
    return cupy.ascontiguousarray(result.astype(dtype, copy=False))
