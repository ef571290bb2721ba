"""Inverses and linear solves: ``linalg.inv``/``inv_ex``, ``linalg.solve``/``solve_ex``,
``linalg.solve_triangular``, ``linalg.lu_solve``, ``linalg.ldl_solve``, ``linalg.lstsq`` and the top-level
``inverse``, ``lu_solve``, ``cholesky_solve``, ``cholesky_inverse``, ``triangular_solve``.

``inv`` and ``solve`` factor ``A = P L U`` (LAPACK ``getrf``) and solve with it
(``getrs``/``gesv``) through ``numpy.linalg``, batched in C; cuSOLVER through CuPy
on CUDA. A singular matrix (an exact zero pivot) makes the ``_ex`` variants
return its ``info`` (the 1-based index of the zero pivot) and the others raise
:class:`~ember.linalg.LinAlgError` naming the batch element, as PyTorch does.
Triangular solves use BLAS ``trsm`` (through ``scipy.linalg.blas``), one call
per matrix (numpy has no batched triangular solve).
"""

from __future__ import annotations

import warnings

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
    real_dtype,
    return_type,
    scipy_linalg,
)
from ._registry import COMPOSITE, registry
from ._shapes import broadcast_shapes

__all__ = []

METHODS: list[str] = ["inverse", "lu_solve", "cholesky_solve", "cholesky_inverse", "triangular_solve"]
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
        info = finite_info(out if out.ndim == a.ndim else out[..., None])
        if bool(info.any()):  # failure path: LAPACK's code (the first zero pivot) from a per-matrix getrf
            info = xp.where(info != 0, _getrf_info(a), 0).astype(_INFO)
        return out, info
    try:
        return fn(a, *arrays), np.zeros(batch, _INFO)
    except np.linalg.LinAlgError:
        info = lapack_info("getrf", a)
        good = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
        out = fn(np.where((info != 0)[..., None, None], good, a), *arrays)
        bad = (info != 0).reshape(info.shape + (1,) * (out.ndim - info.ndim))
        return np.where(bad, np.nan, out).astype(a.dtype, copy=False), info


def _getrf_info(a):
    """The ``getrf`` info of each matrix of a CuPy batch ``a``: the 1-based index of the first zero diagonal
    entry of ``U``, 0 if none (cuSOLVER's batched inverse and solve report no per-matrix codes)."""
    from .linalg_factor import lu_factor_arrays

    with warnings.catch_warnings():  # cupyx's lu_factor warns for each singular matrix
        warnings.simplefilter("ignore", RuntimeWarning)
        return lu_factor_arrays(a)[2]


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
    if vector:  # a column: X A = B has no vector form (PyTorch refuses it too)
        rows, cols = b[-1], 1
        ok = left and b[-1] == n
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
        B (Tensor): ``(*, n, k)`` (``(*, k, n)`` when ``left=False``), or with ``left=True`` a (batch of)
            vector(s): ``(n,)`` or ``A.shape[:-1]``. Same dtype as ``A``.
        left (bool): solve ``A X = B`` if True, ``X A = B`` otherwise.

    Returns:
        Tensor: ``X``, the broadcast batch shape of ``A`` and ``B`` and ``B``'s matrix (or vector) shape.

    Raises:
        RuntimeError: for shapes that don't fit the equation (a vector ``B`` with ``left=False`` among them),
            different dtypes, or non-float dtypes.
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
    x, info = _cuda_solve(a, b) if xp is not np else (None, None)
    if x is None:
        x, info = _run_lu_routine(xp.linalg.solve, a, b)
    info = _info_of_A(info, a_batch)
    if not left:
        x = xp.swapaxes(x, -1, -2)
    if vector:
        x = x[..., 0]
    return xp.ascontiguousarray(x), info


def _cuda_solve(a, b):
    """``(X, info)`` on CUDA through cuBLAS ``getrfBatched`` + ``getrsBatched`` (the whole batch in two calls,
    ``info`` left on the device for the caller's single read), or ``(None, None)`` for calls they don't take."""
    from ..cuda.kernels import linalg as cuda_linalg

    factors = cuda_linalg.lu_factor_batched(a)
    if factors is None:
        return None, None
    lu, pivots, info = factors
    x = cuda_linalg.lu_solve_batched(lu, pivots, b, 0)
    return (None, None) if x is None else (x, info)


def _info_of_A(info, a_batch):
    """``info`` of the broadcast batch cut down to ``A``'s own batch shape (PyTorch's ``info`` shape)."""
    lead = info.ndim - len(a_batch)
    index = (0,) * lead + tuple(slice(0, 1) if n == 1 else slice(None) for n in a_batch)
    # the Ellipsis keeps a 0-d array where numpy would give a scalar; the copy makes the cut row-major, as
    # the meta functions say (a slice of a broadcast batch keeps that batch's strides)
    return info[(*index, Ellipsis)].copy()


def _solve_cpu(A, B, *, left=True):
    x, info = _solve_arrays(A._data, B._data, left)
    raise_for_info("torch.linalg.solve", info, A._data.shape[:-2], _singular_solve)
    return x


def _solve_lu_meta(A, B, *, left=True):
    """``(X, LU, pivots, info)``: :func:`solve` that also returns ``A``'s LU factorization (``getrf``), which
    the derivative reuses (one ``getrs`` instead of a second factorization), as ATen's ``linalg_solve_ex``."""
    _, shape = _check_solve("linalg.solve", A, B, left)
    a = A._data.shape
    return (MetaArray(shape, A._data.dtype), MetaArray(a, A._data.dtype), MetaArray(a[:-1], _INFO),
            MetaArray(a[:-2], _INFO))


def _solve_lu_cpu(A, B, *, left=True):
    from .linalg_factor import lu_factor_arrays

    a, b = A._data, B._data
    vector = _is_vector_rhs(a.shape, b.shape)
    LU, pivots, info = lu_factor_arrays(a, exact_singular=False)  # solves only: CUDA may batch the factorization
    if vector:
        b = b[..., None] if left else b[..., None, :]
    x = lu_solve_arrays(LU, pivots, b, left)
    if vector:
        x = x[..., 0] if left else x[..., 0, :]
    return array_namespace(x).ascontiguousarray(x), LU, pivots, info


_linalg_solve_lu = linalg_op("_linalg_solve_lu", _solve_lu_meta, _solve_lu_cpu, has_out=False)


def _solve_decomp(A, B, *, left=True):
    X, _, _, info = registry["_linalg_solve_lu"](A, B, left=left)
    raise_for_info("torch.linalg.solve", info._data, A.shape[:-2], _singular_solve)
    return X


# The registry op is a composite: its kernel (numpy's batched gesv) runs when nothing records gradients;
# under autograd the decomposition keeps the LU factorization for the backward.
linalg_solve = linalg_op("linalg_solve", _solve_meta, _solve_cpu, category=COMPOSITE, decomposition=_solve_decomp)

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


def _solve_ex_decomp(A, B, *, left=True, check_errors=False):
    X, _, _, info = registry["_linalg_solve_lu"](A, B, left=left)
    if check_errors:
        raise_for_info("torch.linalg.solve_ex", info._data, A.shape[:-2], _singular_solve)
    return _solve_ex_result(X, info)


linalg_solve_ex = linalg_op("linalg_solve_ex", _solve_ex_meta, _solve_ex_cpu, return_type=_solve_ex_result,
                            has_out=False, category=COMPOSITE, decomposition=_solve_ex_decomp)


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
    if xp is not np:
        from ..cuda.kernels import linalg as cuda_linalg

        fast = cuda_linalg.triangular_solve(a, b, upper, left, unitriangular)  # cuBLAS trsm(Batched)
        if fast is not None:
            return fast
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


# -- solves with a factorization -----------------------------------------------------------------------


def _broadcast_pair(fn, a_batch, b_batch):
    try:
        return broadcast_shapes(a_batch, b_batch)
    except RuntimeError:
        raise RuntimeError(f"{fn}: the batch dims of the factorization {list(a_batch)} and of B {list(b_batch)} "
                           "do not broadcast") from None


def _lu_solve_meta(LU, pivots, B, *, left=True, adjoint=False):
    """Solve ``A X = B`` (``X A = B`` if not ``left``; ``A^H`` for ``A`` if ``adjoint``) from ``A``'s LU factorization.

    LAPACK ``getrs`` (``scipy.linalg.lapack``, one call per matrix; CuPy's ``lu_solve`` on CUDA).

    Args:
        LU (Tensor): ``(*, n, n)`` from :func:`lu_factor`.
        pivots (Tensor): ``(*, n)``, int32, from :func:`lu_factor`.
        B (Tensor): ``(*, n, k)`` (``(*, k, n)`` when ``left=False``), ``LU``'s dtype.
        left (bool): solve ``A X = B`` if True, ``X A = B`` otherwise.
        adjoint (bool): solve with ``A^H`` instead of ``A``.

    Returns:
        Tensor: ``X``, the broadcast batch shape and ``B``'s matrix shape.

    Raises:
        RuntimeError: for mismatched shapes or dtypes.
    """
    fn = "linalg.lu_solve"
    check_square(fn, LU, "LU")
    check_matrix(fn, B, "B")
    check_same_dtype(fn, LU, B, ("LU", "B"))
    n = LU._data.shape[-1]
    b = B._data.shape
    if (b[-2] if left else b[-1]) != n:
        side = "rows" if left else "columns"
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {b[-2]}x{b[-1]}): B must have {n} {side}")
    if pivots._data.dtype.kind not in "iu" or tuple(pivots._data.shape) != tuple(LU._data.shape[:-1]):
        raise RuntimeError(f"{fn}: Expected pivots of integer type and shape {list(LU._data.shape[:-1])}, got "
                           f"{list(pivots._data.shape)} of {pivots._data.dtype}")
    batch = _broadcast_pair(fn, LU._data.shape[:-2], b[:-2])
    return MetaArray(batch + b[-2:], LU._data.dtype)


def lu_solve_arrays(lu, pivots, b, left=True, adjoint=False):
    xp = array_namespace(lu, b)
    complex_ = lu.dtype.kind == "c"
    if not left:  # X A = B <=> A^T X^T = B^T (getrs' trans=1); X A^H = B <=> A conj(X)^T = conj(B)^T (trans=0)
        bt = xp.swapaxes(b, -1, -2)
        if adjoint and complex_:
            x = xp.conj(_getrs_batched(lu, pivots, xp.conj(bt), 0))
        else:
            x = _getrs_batched(lu, pivots, bt, 0 if adjoint else 1)
        return xp.ascontiguousarray(xp.swapaxes(x, -1, -2))
    return _getrs_batched(lu, pivots, b, (2 if complex_ else 1) if adjoint else 0)


def _getrs_batched(lu, pivots, b, trans):
    """LAPACK ``getrs`` on each matrix of the broadcast batch: ``op(A) X = B``, ``op`` by ``trans`` (0: ``A``,
    1: ``A^T``, 2: ``A^H``)."""
    xp = array_namespace(lu, b)
    if xp is not np:
        from ..cuda.kernels import linalg as cuda_linalg

        fast = cuda_linalg.lu_solve_batched(lu, pivots, b, trans)  # one cuBLAS getrsBatched for the batch
        if fast is not None:
            return fast
    batch = np.broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    n = lu.shape[-1]
    out = xp.empty(batch + b.shape[-2:], lu.dtype)
    if out.size == 0 or n == 0:
        return out if n else xp.zeros(out.shape, lu.dtype)
    lu = xp.broadcast_to(lu, batch + lu.shape[-2:]).reshape(-1, n, n)
    piv = xp.broadcast_to(pivots, batch + pivots.shape[-1:]).reshape(-1, n)
    bb = xp.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    flat = out.reshape(-1, *b.shape[-2:])
    if xp is np:
        from scipy.linalg import lapack

        getrs = lapack.get_lapack_funcs("getrs", (lu, bb))
        for i in range(len(flat)):  # no batched getrs in numpy
            flat[i] = getrs(lu[i], piv[i] - 1, bb[i], trans=trans)[0]
        return out
    lu_solve = scipy_linalg(xp).lu_solve
    for i in range(len(flat)):
        flat[i] = lu_solve((lu[i], piv[i] - 1), bb[i], trans=trans, check_finite=False)
    return out


def _lu_solve_cpu(LU, pivots, B, *, left=True, adjoint=False):
    return lu_solve_arrays(LU._data, pivots._data, B._data, left, adjoint)


linalg_lu_solve = linalg_op("linalg_lu_solve", _lu_solve_meta, _lu_solve_cpu)


def _top_lu_solve_meta(b, LU_data, LU_pivots):
    """``X`` with ``A X = b`` from ``A``'s LU factorization: PyTorch's older ``torch.lu_solve`` (argument order
    ``b, LU_data, LU_pivots``); see :func:`ember.linalg.lu_solve`."""
    return _lu_solve_meta(LU_data, LU_pivots, b)


lu_solve = linalg_op("lu_solve", _top_lu_solve_meta, lambda b, LU_data, LU_pivots: _lu_solve_cpu(LU_data, LU_pivots, b),
                     category=COMPOSITE, public=True,
                     decomposition=lambda b, LU_data, LU_pivots: registry["linalg_lu_solve"](LU_data, LU_pivots, b))


def _cholesky_solve_meta(B, L, upper=False):
    """Solve ``A X = B`` for Hermitian positive-definite ``A = L L^H`` (``U^H U`` if ``upper``) from its factor.

    Two triangular solves (BLAS ``trsm``), batched with broadcasting. PyTorch's ``torch.cholesky_solve``.

    Args:
        B (Tensor): ``(*, n, k)``.
        L (Tensor): ``(*, n, n)``, the Cholesky factor (lower, or upper when ``upper``), ``B``'s dtype.
        upper (bool): whether ``L`` is upper triangular.

    Returns:
        Tensor: ``(*, n, k)``, the broadcast batch shape.

    Raises:
        RuntimeError: for mismatched shapes or dtypes, or non-float input.
    """
    fn = "cholesky_solve"
    check_square(fn, L, "L")
    check_matrix(fn, B, "B")
    check_same_dtype(fn, B, L, ("B", "L"))
    n = L._data.shape[-1]
    if B._data.shape[-2] != n:
        raise RuntimeError(f"{fn}: Incompatible matrix sizes for cholesky_solve: each A matrix is {n} by {n} but each "
                           f"b matrix is {B._data.shape[-2]} by {B._data.shape[-1]}")
    batch = _broadcast_pair(fn, L._data.shape[:-2], B._data.shape[:-2])
    return MetaArray(batch + B._data.shape[-2:], B._data.dtype)


def _cholesky_solve_cpu(B, L, upper=False):
    xp = array_namespace(L._data)
    lower = xp.conj(xp.swapaxes(L._data, -1, -2)) if upper else L._data
    y = solve_triangular_arrays(lower, B._data, upper=False)
    return solve_triangular_arrays(xp.conj(xp.swapaxes(lower, -1, -2)), y, upper=True)


def _cholesky_solve_decomp(B, L, upper=False):
    solve = registry["linalg_solve_triangular"]
    lower = registry["conj"](registry["transpose"](L, -2, -1)) if upper else L
    lower_h = registry["conj"](registry["transpose"](lower, -2, -1))
    return solve(lower_h, solve(lower, B, upper=False), upper=True)


cholesky_solve = linalg_op("cholesky_solve", _cholesky_solve_meta, _cholesky_solve_cpu, category=COMPOSITE,
                           public=True, decomposition=_cholesky_solve_decomp)


def _cholesky_inverse_meta(L, upper=False):
    """Inverse of ``A = L L^H`` (``U^H U`` if ``upper``) from its Cholesky factor ``L`` (``(*, n, n)``).

    Two triangular solves against the identity (BLAS ``trsm``). PyTorch's ``torch.cholesky_inverse``.

    Raises:
        RuntimeError: for non-square or non-float input.
    """
    dtype = check_square("cholesky_inverse", L, "L")
    return MetaArray(L._data.shape, dtype)


def _identity_like(L):
    return registry["eye"](L.shape[-1], dtype=L.dtype, device=L.device)


def _cholesky_inverse_decomp(L, upper=False):
    return registry["cholesky_solve"](registry["expand"](_identity_like(L), L.shape), L, upper)


def _cholesky_inverse_cpu(L, upper=False):
    xp = array_namespace(L._data)
    n = L._data.shape[-1]
    eye = xp.broadcast_to(xp.eye(n, dtype=L._data.dtype), L._data.shape)

    class _Arr:  # the kernel of cholesky_solve reads ``._data``
        def __init__(self, data):
            self._data = data

    return _cholesky_solve_cpu(_Arr(eye), L, upper)


cholesky_inverse = linalg_op("cholesky_inverse", _cholesky_inverse_meta, _cholesky_inverse_cpu, category=COMPOSITE,
                             public=True, decomposition=_cholesky_inverse_decomp)

_triangular_solve_result = return_type("triangular_solve", ["solution", "cloned_coefficient"])


def _triangular_solve_meta(b, A, upper=True, transpose=False, unitriangular=False):
    """PyTorch's older ``torch.triangular_solve``: ``(X, A.clone())`` with ``A X = b`` (``A^T X = b`` if
    ``transpose``). See :func:`ember.linalg.solve_triangular`.

    Raises:
        RuntimeError: for mismatched shapes or dtypes.
    """
    fn = "triangular_solve"
    check_square(fn, A)
    check_matrix(fn, b, "b")
    check_same_dtype(fn, b, A, ("b", "A"))
    n = A._data.shape[-1]
    if b._data.shape[-2] != n:
        raise RuntimeError(f"{fn}: Incompatible matrix sizes for triangular_solve: each A matrix is {n} by {n} but "
                           f"each b matrix is {b._data.shape[-2]} by {b._data.shape[-1]}")
    batch = _broadcast_pair(fn, A._data.shape[:-2], b._data.shape[:-2])
    return MetaArray(batch + b._data.shape[-2:], b._data.dtype), MetaArray(batch + A._data.shape[-2:], A._data.dtype)


def _triangular_solve_decomp(b, A, upper=True, transpose=False, unitriangular=False):
    coefficient = registry["transpose"](A, -2, -1) if transpose else A
    x = registry["linalg_solve_triangular"](coefficient, b, upper=upper != transpose, unitriangular=unitriangular)
    batch = x.shape[:-2]
    return _triangular_solve_result(x, registry["clone"](registry["expand"](A, (*batch, *A.shape[-2:]))))


triangular_solve = linalg_op("triangular_solve", _triangular_solve_meta, None, category=COMPOSITE, public=True,
                             decomposition=_triangular_solve_decomp, return_type=_triangular_solve_result)


def _ldl_solve_meta(LD, pivots, B, *, hermitian=False):
    """Solve ``A X = B`` from :func:`ldl_factor`'s ``(LD, pivots)``: LAPACK ``sytrs``/``hetrs``, one call per
    matrix (the CUDA device copies to the host). Not differentiable, as in PyTorch.

    Returns:
        Tensor: ``(*, n, k)``.

    Raises:
        RuntimeError: for mismatched shapes or dtypes.
    """
    fn = "torch.linalg.ldl_solve"
    check_square(fn, LD, "LD")
    check_matrix(fn, B, "B")
    check_same_dtype(fn, LD, B, ("LD", "B"))
    if B._data.shape[-2] != LD._data.shape[-1]:
        raise RuntimeError(f"{fn}: Incompatible shapes of LD and B: {list(LD._data.shape)} and {list(B._data.shape)}")
    batch = _broadcast_pair(fn, LD._data.shape[:-2], B._data.shape[:-2])
    return MetaArray(batch + B._data.shape[-2:], B._data.dtype)


def _ldl_solve_cpu(LD, pivots, B, *, hermitian=False):
    from scipy.linalg import lapack

    xp = array_namespace(LD._data, B._data)
    ld, piv, b = (x.get() if xp is not np else x for x in (LD._data, pivots._data, B._data))
    batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    n = ld.shape[-1]
    out = np.zeros(batch + b.shape[-2:], b.dtype)
    if out.size and n:
        ld = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape(-1, n, n)
        piv = np.broadcast_to(piv, batch + piv.shape[-1:]).reshape(-1, n)
        bb = np.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
        name = "hetrs" if hermitian and ld.dtype.kind == "c" else "sytrs"
        fn = lapack.get_lapack_funcs(name, (ld, bb))
        flat = out.reshape(-1, *b.shape[-2:])
        for i in range(len(flat)):
            flat[i] = fn(ld[i], piv[i], bb[i], lower=1)[0]
    return xp.asarray(out) if xp is not np else out


linalg_ldl_solve = linalg_op("linalg_ldl_solve", _ldl_solve_meta, _ldl_solve_cpu)


# -- least squares -----------------------------------------------------------------------------------

_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")
_lstsq_result = return_type("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _lstsq_plan(fn, A, B, driver):
    check_matrix(fn, A)
    check_float(fn, A)
    check_same_dtype(fn, A, B)
    if driver is not None and driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    a, b = A._data.shape, B._data.shape
    vector = len(b) == len(a) - 1
    bm = b + (1,) if vector else b
    if bm[-2] != a[-2]:
        raise RuntimeError(f"{fn}: input.size(-2) should match other.size(-2). Got {a[-2]} and {bm[-2]}")
    batch = broadcast_shapes(a[:-2], bm[:-2])
    return vector, batch, a[-2], a[-1], bm[-1], driver or "gelsy"


def _lstsq_meta(A, B, rcond=None, *, driver=None):
    """Least-squares solution ``X`` minimising ``||A X - B||`` (the minimum-norm one for rank-deficient ``A``).

    LAPACK through ``scipy.linalg.lstsq`` (one call per matrix: numpy has no batched least squares):
    ``"gelsy"`` (complete orthogonal factorization, the CPU default, as PyTorch's), ``"gelsd"`` (SVD,
    divide and conquer), ``"gelss"`` (SVD) or ``"gels"`` (QR; full-rank ``A`` only).

    Args:
        A (Tensor): ``(*, m, n)``, float32, float64, complex64 or complex128.
        B (Tensor): ``(*, m, k)``, or ``(*, m)`` for vectors; ``A``'s dtype. Batch dims broadcast.
        rcond (float, optional): singular values below ``rcond * s_max`` count as zero (default: machine
            epsilon times ``max(m, n)``).
        driver (str, optional): the LAPACK driver.

    Returns:
        (Tensor, Tensor, Tensor, Tensor): ``solution`` (``(*, n, k)``), ``residuals`` (squared residual norms
        ``(*, k)`` when ``m > n``, every matrix has full rank and the driver is not ``gelsy``; else empty),
        ``rank`` (int64 ``(*)``; empty for ``gels``) and ``singular_values`` (``(*, min(m, n))`` for
        ``gelsd``/``gelss``; else empty).

    Raises:
        RuntimeError: for mismatched shapes or dtypes, or an unknown driver.

    Example:
        >>> import ember
        >>> A = ember.tensor([[1., 0.], [0., 1.], [1., 1.]])
        >>> ember.linalg.lstsq(A, ember.tensor([[1.], [1.], [2.]])).solution
        tensor([[1.0000],
                [1.0000]])
    """
    vector, batch, m, n, k, driver = _lstsq_plan("torch.linalg.lstsq", A, B, driver)
    dtype = A._data.dtype
    real = real_dtype(dtype)
    x = batch + ((n,) if vector else (n, k))
    # residuals' shape depends on the ranks (data): the meta function assumes full rank
    residuals = (batch + (() if vector else (k,))) if (m > n and driver != "gelsy") else (0,)
    rank = batch if driver != "gels" else (0,)
    sv = batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return MetaArray(x, dtype), MetaArray(residuals, real), MetaArray(rank, np.dtype(np.int64)), MetaArray(sv, real)


def lstsq_arrays(a, b, rcond, driver, vector):
    import scipy.linalg

    xp = array_namespace(a, b)
    a, b = (x.get() if xp is not np else x for x in (a, b))
    if vector:
        b = b[..., None]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m, n = a.shape[-2:]
    k = b.shape[-1]
    eps = np.finfo(real_dtype(a.dtype)).eps
    cond = eps * max(m, n) if rcond is None else rcond
    x = np.zeros(batch + (n, k), a.dtype)
    ranks = np.full(batch, min(m, n), np.int64)
    svals = np.zeros(batch + (min(m, n),), real_dtype(a.dtype))
    if x.size and m and n:
        aa = np.broadcast_to(a, batch + (m, n)).reshape(-1, m, n)
        bb = np.broadcast_to(b, batch + (m, k)).reshape(-1, m, k)
        lapack_driver = "gelsy" if driver == "gels" else driver
        for i in range(aa.shape[0]):
            sol, _, rank, sv = scipy.linalg.lstsq(aa[i], bb[i], cond=cond, lapack_driver=lapack_driver,
                                                  check_finite=False)
            x.reshape(-1, n, k)[i] = sol
            ranks.reshape(-1)[i] = rank
            if sv is not None and driver in ("gelsd", "gelss"):
                svals.reshape(-1, min(m, n))[i] = sv
    if m > n and driver != "gelsy" and (ranks == n).all():
        residual = np.matmul(np.broadcast_to(a, batch + (m, n)), x) - np.broadcast_to(b, batch + (m, k))
        residuals = (np.abs(residual) ** 2).sum(axis=-2).astype(real_dtype(a.dtype))
        if vector:
            residuals = residuals[..., 0]
    else:
        residuals = np.zeros((0,), real_dtype(a.dtype))
    rank = ranks if driver != "gels" else np.zeros((0,), np.int64)
    sv = svals if driver in ("gelsd", "gelss") else np.zeros((0,), real_dtype(a.dtype))
    if vector:
        x = x[..., 0]
    out = (x, residuals, rank, sv)
    return tuple(xp.asarray(o) for o in out) if xp is not np else out


def _lstsq_cpu(A, B, rcond=None, *, driver=None):
    vector, _, _, _, _, driver = _lstsq_plan("torch.linalg.lstsq", A, B, driver)
    return lstsq_arrays(A._data, B._data, rcond, driver, vector)


def _lstsq_cuda(A, B, rcond=None, *, driver=None):
    # cuSOLVER has only QR-based least squares for tall full-rank matrices (PyTorch's "gels" on CUDA); the
    # LAPACK drivers run on the host copy, as ldl does
    return _lstsq_cpu(A, B, rcond, driver=driver)


# The registry op is a composite over the prim ``_linalg_lstsq``: PyTorch differentiates ``solution`` and
# ``residuals`` but not ``singular_values``, which the composite returns detached (the prim's kernel runs
# directly when nothing records gradients).
_linalg_lstsq = linalg_op("_linalg_lstsq", _lstsq_meta, _lstsq_cpu, cuda=_lstsq_cuda, return_type=_lstsq_result,
                          has_out=False)


def _lstsq_decomp(A, B, rcond=None, *, driver=None):
    solution, residuals, rank, singular_values = registry["_linalg_lstsq"](A, B, rcond, driver=driver)
    return _lstsq_result(solution, residuals, rank, registry["detach"](singular_values))


linalg_lstsq = linalg_op("linalg_lstsq", _lstsq_meta, _lstsq_cpu, cuda=_lstsq_cuda, return_type=_lstsq_result,
                         has_out=False, category=COMPOSITE, decomposition=_lstsq_decomp)
