"""Inverses and linear solves: ``linalg.inv``/``inv_ex``, ``linalg.solve``/``solve_ex``,
``linalg.solve_triangular`` and the top-level ``inverse``.

``inv`` and ``solve`` factor ``A = P L U`` (LAPACK ``getrf``) and solve with it
(``getrs``/``gesv``) through ``numpy.linalg``, batched in C; cuSOLVER through CuPy
on CUDA. A singular matrix (an exact zero pivot) makes the ``_ex`` variants
return its ``info`` (the 1-based index of the zero pivot) and the others raise
:class:`~ember.linalg.LinAlgError` naming the batch element, as PyTorch does.
Triangular solves use BLAS ``trsm`` (through ``scipy.linalg.blas``), one call
per matrix (numpy has no batched triangular solve).
"""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray
from ._array_module import array_namespace
from ._linalg_common import (
    check_float,
    check_matrix,
    check_same_dtype,
    check_square,
    finite_info,
    lapack_info,
    linalg_op,
    raise_for_info,
    return_type,
    scipy_linalg,
)
from ._registry import COMPOSITE, registry
from ._shapes import broadcast_shapes

__all__ = []

METHODS: list[str] = ["inverse"]
ALIASES: dict[str, str] = {}

_INFO = np.dtype(np.int32)


def _singular_inv(code):
    return (f"The diagonal element {code} is zero, the inversion could not be completed because the input "
            "matrix is singular.")


def _singular_solve(code):
    return "The solver failed because the input matrix is singular."


def _run_lu_routine(fn, a, *arrays):
    """``(result, info)`` of numpy's batched LU routine ``fn`` (``inv``, ``solve``) on ``a``.

    numpy raises for the whole batch when one matrix is singular: then each matrix's ``getrf`` info is
    computed, and the singular ones get NaN results (their result is undefined, as in PyTorch).
    CuPy reports nothing: a matrix whose result is not finite gets info 1.
    """
    xp = array_namespace(a)
    batch = a.shape[:-2]
    if a.size == 0 or (arrays and arrays[0].size == 0):
        out = fn(a, *arrays) if a.size or a.shape[-1] == 0 else None
        if out is None:
            out = xp.empty(_solve_shape(a.shape, arrays[0].shape) if arrays else a.shape, a.dtype)
        return out, xp.zeros(batch, _INFO)
    if xp is not np:
        out = fn(a, *arrays)
        return out, finite_info(out if out.ndim == a.ndim else out[..., None])
    try:
        return fn(a, *arrays), np.zeros(batch, _INFO)
    except np.linalg.LinAlgError:
        info = lapack_info("getrf", a)
        good = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
        out = fn(np.where((info != 0)[..., None, None], good, a), *arrays)
        bad = (info != 0).reshape(info.shape + (1,) * (out.ndim - info.ndim))
        return np.where(bad, np.nan, out).astype(a.dtype, copy=False), info


def _solve_shape(a_shape, b_shape):
    return np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + b_shape[-2:]


# -- inv ---------------------------------------------------------------------------------------------


def _inv_meta(A):
    """Inverse of a square matrix or of each matrix of a batch.

    LU factorization with partial pivoting, then inversion (LAPACK ``getrf`` + ``getri`` through
    ``numpy.linalg.inv``; cuSOLVER on CUDA). To solve ``A X = B``, :func:`ember.linalg.solve` is faster and
    more accurate.

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.

    Returns:
        Tensor: ``(*, n, n)``, ``A``'s dtype.

    Raises:
        RuntimeError: if ``A`` has fewer than two dims, is not square, or has another dtype.
        ember.linalg.LinAlgError: if a matrix is singular ("(Batch element k): The diagonal element i is
            zero...").

    Example:
        >>> import ember
        >>> ember.linalg.inv(ember.tensor([[2., 0.], [0., 4.]]))
        tensor([[0.5000, 0.0000],
                [0.0000, 0.2500]])
    """
    dtype = check_square("linalg.inv", A)
    return MetaArray(A._data.shape, dtype)


def _inv_with_info(a):
    xp = array_namespace(a)
    return _run_lu_routine(xp.linalg.inv, a)


def _inv_cpu(A):
    out, info = _inv_with_info(A._data)
    raise_for_info("linalg.inv", info, A._data.shape[:-2], _singular_inv)
    return out


linalg_inv = linalg_op("linalg_inv", _inv_meta, _inv_cpu)

_inv_ex_result = return_type("linalg_inv_ex", ["inverse", "info"])


def _inv_ex_meta(A, *, check_errors=False):
    """Inverse of each matrix of ``A``, and LAPACK's ``info`` instead of an error for singular matrices.

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.
        check_errors (bool): raise :class:`~ember.linalg.LinAlgError` for a singular matrix, as
            :func:`ember.linalg.inv` does.

    Returns:
        (Tensor, Tensor): ``inverse`` (``(*, n, n)``; undefined for singular matrices) and ``info``
        (``(*)``, int32: 0 on success, ``i`` when the ``i``-th pivot of the LU factorization is zero).
    """
    dtype = check_square("linalg.inv_ex", A)
    shape = A._data.shape
    return MetaArray(shape, dtype), MetaArray(shape[:-2], _INFO)


def _inv_ex_cpu(A, *, check_errors=False):
    out, info = _inv_with_info(A._data)
    if check_errors:
        raise_for_info("linalg.inv_ex", info, A._data.shape[:-2], _singular_inv)
    return out, info


linalg_inv_ex = linalg_op("linalg_inv_ex", _inv_ex_meta, _inv_ex_cpu, return_type=_inv_ex_result, has_out=False)


def _inverse_meta(input):
    """Inverse of ``input`` (``(*, n, n)``): :func:`ember.linalg.inv` under PyTorch's older name."""
    return _inv_meta(input)


inverse = linalg_op("inverse", _inverse_meta, _inv_cpu, category=COMPOSITE, public=True,
                    decomposition=lambda input: registry["linalg_inv"](input))


# -- solve -------------------------------------------------------------------------------------------


def _is_vector_rhs(a_shape, b_shape):
    """PyTorch's rule: ``B`` is a (batch of) vector(s) when 1-D, or when its shape is ``A``'s without the last dim."""
    return len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1 and tuple(b_shape) == tuple(a_shape[:-1]))


def _check_solve(fn, A, B, left):
    check_square(fn, A)
    check_float(fn, B)
    check_same_dtype(fn, A, B)
    a, b = A._data.shape, B._data.shape
    vector = _is_vector_rhs(a, b)
    n = a[-1]
    if vector:
        rows, cols = (b[-1], 1) if left else (1, b[-1])
        ok = b[-1] == n
    else:
        if len(b) < 2:
            raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
        rows, cols = b[-2:]
        ok = (rows if left else cols) == n
    if not ok:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {eq} ({n}x{n} and {rows}x{cols})")
    if vector:
        shape = broadcast_shapes(a[:-2], b[:-1]) + (n,)
    else:
        shape = broadcast_shapes(a[:-2], b[:-2]) + b[-2:]
    return vector, shape


def _solve_meta(A, B, *, left=True):
    """Solve ``A X = B`` (``left=True``) or ``X A = B`` for ``X``, batched with broadcasting.

    LU factorization with partial pivoting and triangular solves (LAPACK ``gesv`` through
    ``numpy.linalg.solve``; cuSOLVER ``getrf``/``getrs`` on CUDA).

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.
        B (Tensor): ``(*, n, k)``, or a (batch of) vector(s): ``(n,)`` or ``A.shape[:-1]``. Same dtype as ``A``.
        left (bool): solve ``A X = B`` if True, ``X A = B`` otherwise.

    Returns:
        Tensor: ``X``, the broadcast batch shape of ``A`` and ``B`` and ``B``'s matrix (or vector) shape.

    Raises:
        RuntimeError: for shapes that don't fit the equation, different dtypes, or non-float dtypes.
        ember.linalg.LinAlgError: if a matrix of ``A`` is singular.

    Example:
        >>> import ember
        >>> ember.linalg.solve(ember.tensor([[2., 0.], [0., 4.]]), ember.tensor([2., 2.]))
        tensor([1.0000, 0.5000])
    """
    _, shape = _check_solve("linalg.solve", A, B, left)
    return MetaArray(shape, A._data.dtype)


def _solve_arrays(a, b, left):
    """``(X, info)`` for ``A X = B`` (or ``X A = B``) on arrays, with PyTorch's vector rule."""
    xp = array_namespace(a, b)
    vector = _is_vector_rhs(a.shape, b.shape)
    if vector:
        b = b[..., None]
    if not left:  # X A = B  <=>  A^T X^T = B^T
        a, b = xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a_batch = a.shape[:-2]
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    x, info = _run_lu_routine(xp.linalg.solve, a, b)
    info = _info_of_A(info, a_batch)
    if not left:
        x = xp.swapaxes(x, -1, -2)
    if vector:
        x = x[..., 0]
    return xp.ascontiguousarray(x), info


def _info_of_A(info, a_batch):
    """``info`` of the broadcast batch cut down to ``A``'s own batch shape (PyTorch's ``info`` shape)."""
    lead = info.ndim - len(a_batch)
    index = (0,) * lead + tuple(slice(0, 1) if n == 1 else slice(None) for n in a_batch)
    return info[index]


def _solve_cpu(A, B, *, left=True):
    x, info = _solve_arrays(A._data, B._data, left)
    raise_for_info("torch.linalg.solve", info, A._data.shape[:-2], _singular_solve)
    return x


linalg_solve = linalg_op("linalg_solve", _solve_meta, _solve_cpu)

_solve_ex_result = return_type("linalg_solve_ex", ["result", "info"])


def _solve_ex_meta(A, B, *, left=True, check_errors=False):
    """:func:`ember.linalg.solve` returning LAPACK's ``info`` for each matrix instead of raising.

    Returns:
        (Tensor, Tensor): ``result`` (as :func:`~ember.linalg.solve`; undefined for singular matrices) and
        ``info`` (int32, ``A``'s batch shape: 0 on success, ``i`` when the ``i``-th pivot is zero).
    """
    _, shape = _check_solve("linalg.solve_ex", A, B, left)
    return MetaArray(shape, A._data.dtype), MetaArray(A._data.shape[:-2], _INFO)


def _solve_ex_cpu(A, B, *, left=True, check_errors=False):
    x, info = _solve_arrays(A._data, B._data, left)
    if check_errors:
        raise_for_info("torch.linalg.solve_ex", info, A._data.shape[:-2], _singular_solve)
    return x, info


linalg_solve_ex = linalg_op("linalg_solve_ex", _solve_ex_meta, _solve_ex_cpu, return_type=_solve_ex_result,
                            has_out=False)


# -- solve_triangular --------------------------------------------------------------------------------


def _solve_triangular_meta(A, B, *, upper, left=True, unitriangular=False):
    """Solve ``A X = B`` (or ``X A = B``) for a triangular ``A``, batched with broadcasting.

    Only the triangle of ``A`` named by ``upper`` is read (and not its diagonal when ``unitriangular``).
    BLAS ``trsm`` (``scipy.linalg.blas``), one call per matrix; cuBLAS ``trsm``
    through ``cupyx.scipy.linalg.solve_triangular`` on CUDA. A zero on the diagonal gives inf/NaN, as in
    PyTorch (no error).

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.
        B (Tensor): ``(*, n, k)`` (``(*, k, n)`` when ``left=False``), ``A``'s dtype.
        upper (bool): whether ``A`` is upper (True) or lower (False) triangular. Keyword-only, required.
        left (bool): solve ``A X = B`` if True, ``X A = B`` otherwise.
        unitriangular (bool): take ``A``'s diagonal to be all ones.

    Returns:
        Tensor: ``X``, the broadcast batch shape and ``B``'s matrix shape.

    Raises:
        RuntimeError: for non-matrix ``B``, mismatched shapes or dtypes.

    Example:
        >>> import ember
        >>> A = ember.tensor([[2., 0.], [1., 1.]])
        >>> ember.linalg.solve_triangular(A, ember.tensor([[2.], [2.]]), upper=False)
        tensor([[1.],
                [1.]])
    """
    fn = "linalg.solve_triangular"
    check_square(fn, A)
    check_matrix(fn, B, "B")
    check_float(fn, B)
    check_same_dtype(fn, A, B)
    a, b = A._data.shape, B._data.shape
    n = a[-1]
    if (b[-2] if left else b[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(
            f"{fn}: Incompatible shapes of A and B for the equation {eq} ({n}x{n} and {b[-2]}x{b[-1]})")
    return MetaArray(broadcast_shapes(a[:-2], b[:-2]) + b[-2:], A._data.dtype)


def solve_triangular_arrays(a, b, upper, left=True, unitriangular=False):
    """``X`` with ``A X = B`` (or ``X A = B``) for triangular ``A`` (arrays; also used by other linalg ops)."""
    xp = array_namespace(a, b)
    if not left:  # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        x = solve_triangular_arrays(xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2), not upper, True, unitriangular)
        return xp.ascontiguousarray(xp.swapaxes(x, -1, -2))
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = xp.empty(batch + b.shape[-2:], np.result_type(a.dtype, b.dtype))
    if out.size == 0:
        return out
    if a.shape[-1] == 0:
        return out
    a = xp.broadcast_to(a, batch + a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    flat = out.reshape(-1, *out.shape[-2:])
    if xp is np:
        # BLAS trsm: unlike LAPACK trtrs it does not refuse a zero on the diagonal (inf/NaN, as PyTorch)
        from scipy.linalg import blas

        trsm = blas.get_blas_funcs("trsm", (a, b))
        for i in range(len(flat)):  # no batched triangular solve in numpy
            flat[i] = trsm(1.0, a[i], b[i], lower=int(not upper), diag=int(unitriangular))
        return out
    solve = scipy_linalg(xp).solve_triangular
    for i in range(len(flat)):
        flat[i] = solve(a[i], b[i], lower=not upper, unit_diagonal=unitriangular, check_finite=False)
    return out


def _solve_triangular_cpu(A, B, *, upper, left=True, unitriangular=False):
    return solve_triangular_arrays(A._data, B._data, upper, left, unitriangular)


linalg_solve_triangular = linalg_op("linalg_solve_triangular", _solve_triangular_meta, _solve_triangular_cpu)
