"""Array-level kernels of sparse tensors: products through scipy.sparse (CPU) or cupyx.scipy.sparse (CUDA).

Everything here takes and returns backend arrays (``numpy.ndarray`` on the CPU, ``cupy.ndarray``
on CUDA) and never records autograd: :mod:`ember.sparse._tensor` and the autograd Function in
``ember.autograd._sparse`` wrap them. scipy and cupyx are imported on first use, so ``import
ember`` does not pay for them.
"""

from __future__ import annotations

import numpy as np

from .._ops._array_module import is_device_array

__all__ = ["Pattern", "array_module", "linearize", "unlinearize", "spmm", "spspmm", "csr_offsets", "csr_rows"]

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


class Pattern:
    """The index structure of a 2-D sparse matrix, shared by the products that use it.

    Attributes:
        rows, cols: int64 backend arrays (nnz,), the coordinates of the entries.
        shape (tuple[int, int]): the matrix's shape.
        offsets: CSR row offsets (n_rows + 1,) when the entries are sorted by row and unique (a
            coalesced COO or a CSR matrix), else None (duplicates are then summed by each product).
    """

    __slots__ = ("rows", "cols", "shape", "offsets", "_device_matrix")

    def __init__(self, rows, cols, shape, offsets=None):
        self.rows, self.cols, self.shape, self.offsets = rows, cols, tuple(shape), offsets
        self._device_matrix = {}  # compute dtype -> cupyx csr_matrix (built once: its checks synchronize)


def spmm(pattern, values, dense, transpose=False):
    """``S @ dense`` (or ``S^T @ dense``) for the sparse matrix ``S`` of ``pattern`` with ``values``.

    Duplicate entries (an uncoalesced ``S``) add up, as in the dense matrix they stand for.

    Args:
        pattern (Pattern): the matrix's indices, shape ``(n, m)``.
        values: array (nnz,), the entries, of ``dense``'s dtype.
        dense: array ``(m, p)``, or ``(n, p)`` with ``transpose``.
        transpose (bool): multiply by ``S^T`` instead of ``S``.

    Returns:
        array ``(n, p)`` (``(m, p)`` with ``transpose``) of ``dense``'s dtype, on ``dense``'s device.
    """
    n_out = pattern.shape[1] if transpose else pattern.shape[0]
    if values.shape[0] == 0:
        return array_module(dense).zeros((n_out, dense.shape[1]), dtype=dense.dtype)
    if is_device_array(dense):
        return _spmm_cuda(pattern, values, dense, transpose, n_out)
    import scipy.sparse

    dtype = dense.dtype
    compute = _compute_dtype(dtype, _NATIVE_CPU)
    data = values.astype(compute, copy=False)
    if pattern.offsets is not None:
        matrix = scipy.sparse.csr_array((data, pattern.cols, pattern.offsets), shape=pattern.shape)
    else:  # built through COO, which sums duplicate entries
        matrix = scipy.sparse.csr_array((data, (pattern.rows, pattern.cols)), shape=pattern.shape)
    if transpose:
        matrix = matrix.T  # a CSC view of the same arrays, no copy
    result = matrix @ dense.astype(compute, copy=False)
    return np.ascontiguousarray(result, dtype=dtype)


def _spmm_cuda(pattern, values, dense, transpose, n_out):
    import copy

    import cupy

    dtype = dense.dtype
    rows, cols = (pattern.cols, pattern.rows) if transpose else (pattern.rows, pattern.cols)
    if dtype.kind in "iub":
        # cuSPARSE has no integer products: add each entry's scaled row of dense into its output row
        out = cupy.zeros((n_out, dense.shape[1]), dtype=np.int64)
        cupy.add.at(out, rows, values.astype(np.int64)[:, None] * dense[cols].astype(np.int64))
        return out.astype(dtype)
    import cupyx.cusparse
    import cupyx.scipy.sparse

    compute = _compute_dtype(dtype, _NATIVE_CUDA)
    data = values.astype(compute, copy=False)
    operand = cupy.asfortranarray(dense.astype(compute, copy=False))
    if pattern.offsets is None:
        shape = pattern.shape[::-1] if transpose else pattern.shape
        matrix = cupyx.scipy.sparse.coo_matrix((data, (rows, cols)), shape=shape).tocsr()  # sums duplicates
        result = cupyx.cusparse.spmm(matrix, operand)
    else:
        base = pattern._device_matrix.get(compute)
        if base is None:
            base = cupyx.scipy.sparse.csr_matrix((data, pattern.cols, pattern.offsets), shape=pattern.shape)
            base.has_canonical_format  # noqa: B018 - computed (one synchronization) and kept on the matrix
            pattern._device_matrix[compute] = base
        matrix = copy.copy(base)  # the same index arrays and flags with this call's values
        matrix.data = data
        result = cupyx.cusparse.spmm(matrix, operand, transa=transpose)
    return cupy.ascontiguousarray(result.astype(dtype, copy=False))


def spspmm(a, a_values, b, b_values):
    """The product of two sparse matrices (patterns ``a``, ``b`` with their values), as coalesced COO parts.

    Returns:
        (indices, values): int64 ``(2, nnz)`` sorted row-major and unique, and the values, of
        ``a_values``' dtype; entries the product computes are kept even where they cancel to zero.
    """
    dtype = a_values.dtype
    if is_device_array(a_values):
        import cupy
        import cupyx.scipy.sparse as library

        xp, native = cupy, _NATIVE_CUDA
    else:
        import scipy.sparse as library

        xp, native = np, _NATIVE_CPU
    compute = _compute_dtype(dtype, native)
    left = library.coo_matrix((a_values.astype(compute), (a.rows, a.cols)), shape=a.shape).tocsr()
    right = library.coo_matrix((b_values.astype(compute), (b.rows, b.cols)), shape=b.shape).tocsr()
    product = (left @ right).tocoo()
    product.sum_duplicates()  # sorts row-major, as a coalesced COO tensor
    indices = xp.stack([product.row.astype(np.int64), product.col.astype(np.int64)])
    return indices, product.data.astype(dtype)
