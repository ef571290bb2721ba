"""Factorizations: ``linalg.cholesky``/``cholesky_ex``, ``linalg.qr``, the LU family (``lu_factor``/
``lu_factor_ex``, ``lu``, ``lu_unpack``), ``linalg.ldl_factor``/``ldl_factor_ex``, and the top-level
``cholesky`` and ``qr``.

Cholesky runs LAPACK ``potrf`` on the lower triangle through
``numpy.linalg.cholesky`` (batched in C; cuSOLVER ``potrf`` through CuPy on
CUDA). Only the lower triangle of the input is read, as in PyTorch. A matrix
that is not positive-definite makes ``cholesky_ex`` return the order of the
failing leading minor as ``info`` and ``cholesky`` raise
:class:`~ember.linalg.LinAlgError` naming it. QR is Householder (``geqrf``/``orgqr``
through ``numpy.linalg.qr``, batched). LU (``getrf``) and LDL (``sytrf``/``hetrf``)
go through ``scipy.linalg.lapack``, one call per matrix: numpy has no batched
routine for them.
"""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray
from ._array_module import array_namespace
from ._linalg_common import (
    check_float,
    check_matrix,
    check_square,
    lapack_each,
    lapack_info,
    linalg_op,
    prefers_lapack_loop,
    raise_for_info,
    return_type,
    scipy_linalg,
)
from ._registry import COMPOSITE, registry

__all__ = []

METHODS: list[str] = ["cholesky", "qr", "lu"]
ALIASES: dict[str, str] = {}

_INFO = np.dtype(np.int32)


def _not_pd(code):
    return ("The factorization could not be completed because the input is not positive-definite "
            f"(the leading minor of order {code} is not positive-definite).")


def cholesky_arrays(a, upper=False):
    """``(L, info)``: the Cholesky factor of each matrix of ``a`` (lower, or ``L^H`` when ``upper``)."""
    xp = array_namespace(a)
    batch = a.shape[:-2]
    if a.size == 0:
        return xp.zeros(a.shape, a.dtype), xp.zeros(batch, _INFO)
    if prefers_lapack_loop(a):
        # potrf per matrix, at the input's precision. The upper factor U of A^T (a Fortran view of the
        # C-ordered A: no copy) is L^T, so L = U^T comes back C-ordered, also without a copy.
        results = lapack_each("potrf", a, transposed=True, lower=0, clean=1)
        if len(results) == 1:
            L = results[0][0].T.reshape(a.shape)
        else:
            L = np.stack([r[0].T for r in results]).reshape(a.shape)
        info = np.array([max(r[1], 0) for r in results], _INFO).reshape(batch)
        if info.any():
            L = np.where((info != 0)[..., None, None], np.nan, L).astype(a.dtype, copy=False)
        if upper:
            L = np.ascontiguousarray(np.conj(np.swapaxes(L, -1, -2)))
        return L, info
    if xp is not np:  # (numpy and CuPy read the lower triangle, as potrf does)
        from ..cuda.kernels import linalg as cuda_linalg

        fast = cuda_linalg.cholesky(a)  # cuSOLVER directly: tril and NaN for failures done, info on the device
        if fast is not None:
            L, info = fast
            if upper:
                L = xp.ascontiguousarray(xp.conj(xp.swapaxes(L, -1, -2)))
            return L, info
        L, info = _cholesky_cupy(xp, a)
    else:
        try:
            L, info = np.linalg.cholesky(a), np.zeros(batch, _INFO)
        except np.linalg.LinAlgError:
            info = lapack_info("potrf", a, lower=1)
            good = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
            L = np.linalg.cholesky(np.where((info != 0)[..., None, None], good, a))
            L = np.where((info != 0)[..., None, None], np.nan, L).astype(a.dtype, copy=False)
    L = xp.tril(L)
    if upper:
        L = xp.ascontiguousarray(xp.conj(xp.swapaxes(L, -1, -2)))
    return L, info


def _cholesky_cupy(xp, a):
    """``(L, info)`` on CUDA. A failed cuSOLVER ``potrf`` may leave finite values, so failure is read from its
    ``devInfo`` (CuPy raises for the batch under ``errstate(linalg="raise")``); then each matrix's LAPACK code
    comes from a host copy (the failure path only), and the failed matrices' factors are NaN, as on CPU."""
    import cupyx

    try:
        with cupyx.errstate(linalg="raise"):
            return xp.linalg.cholesky(a), xp.zeros(a.shape[:-2], _INFO)
    except np.linalg.LinAlgError:
        pass
    info = xp.asarray(lapack_info("potrf", a.get(), lower=1))
    bad = (info != 0)[..., None, None]
    L = xp.linalg.cholesky(xp.where(bad, xp.eye(a.shape[-1], dtype=a.dtype), a))
    return xp.where(bad, xp.nan, L).astype(a.dtype, copy=False), info


def _cholesky_meta(A, *, upper=False):
    """Cholesky factor ``L`` of a Hermitian positive-definite matrix: ``A = L L^H``, ``L`` lower triangular.

    Only the lower triangle of ``A`` is read. LAPACK ``potrf`` through ``numpy.linalg.cholesky`` (cuSOLVER
    on CUDA), batched.

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128, Hermitian positive-definite.
        upper (bool): return ``U = L^H`` (upper triangular, ``A = U^H U``) instead.

    Returns:
        Tensor: ``(*, n, n)``, ``A``'s dtype.

    Raises:
        RuntimeError: if ``A`` is not a (batch of) square float or complex matrices.
        ember.linalg.LinAlgError: if a matrix is not positive-definite ("(Batch element k): The
            factorization could not be completed... the leading minor of order i is not positive-definite").

    Example:
        >>> import ember
        >>> ember.linalg.cholesky(ember.tensor([[4., 2.], [2., 2.]]))
        tensor([[2., 0.],
                [1., 1.]])
    """
    dtype = check_square("linalg.cholesky", A)
    return MetaArray(A._data.shape, dtype)


def _cholesky_cpu(A, *, upper=False):
    L, info = cholesky_arrays(A._data, upper)
    raise_for_info("linalg.cholesky", info, A._data.shape[:-2], _not_pd)
    return L


linalg_cholesky = linalg_op("linalg_cholesky", _cholesky_meta, _cholesky_cpu)

_cholesky_ex_result = return_type("linalg_cholesky_ex", ["L", "info"])


def _cholesky_ex_meta(A, *, upper=False, check_errors=False):
    """:func:`ember.linalg.cholesky` returning LAPACK's ``info`` instead of raising.

    Returns:
        (Tensor, Tensor): ``L`` (undefined for matrices that are not positive-definite) and ``info``
        (``(*)``, int32: 0 on success, ``i`` when the leading minor of order ``i`` is not positive-definite).
    """
    dtype = check_square("linalg.cholesky_ex", A)
    shape = A._data.shape
    return MetaArray(shape, dtype), MetaArray(shape[:-2], _INFO)


def _cholesky_ex_cpu(A, *, upper=False, check_errors=False):
    L, info = cholesky_arrays(A._data, upper)
    if check_errors:
        raise_for_info("linalg.cholesky_ex", info, A._data.shape[:-2], _not_pd)
    return L, info


linalg_cholesky_ex = linalg_op("linalg_cholesky_ex", _cholesky_ex_meta, _cholesky_ex_cpu,
                               return_type=_cholesky_ex_result, has_out=False)


def _top_cholesky_meta(input, upper=False):
    """Cholesky factor of ``input`` (``(*, n, n)``): :func:`ember.linalg.cholesky` under PyTorch's older name
    (``upper`` positional too)."""
    return _cholesky_meta(input, upper=upper)


cholesky = linalg_op("cholesky", _top_cholesky_meta, lambda input, upper=False: _cholesky_cpu(input, upper=upper),
                     category=COMPOSITE, public=True,
                     decomposition=lambda input, upper=False: registry["linalg_cholesky"](input, upper=upper))


# -- QR ----------------------------------------------------------------------------------------------

_QR_MODES = ("reduced", "complete", "r")
_qr_result = return_type("linalg_qr", ["Q", "R"])


def _qr_shapes(shape, mode):
    *batch, m, n = shape
    k = min(m, n)
    if mode == "complete":
        return (*batch, m, m), (*batch, m, n)
    if mode == "r":
        return (0,), (*batch, k, n)
    return (*batch, m, k), (*batch, k, n)


def _check_qr_mode(mode):
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")


def _qr_meta(A, mode="reduced"):
    """QR decomposition ``A = Q R``: ``Q`` with orthonormal columns, ``R`` upper triangular, batched.

    Householder reflections (LAPACK ``geqrf`` + ``orgqr``/``ungqr`` through ``numpy.linalg.qr``; cuSOLVER
    through CuPy on CUDA). ``R``'s diagonal may be negative (LAPACK's convention, as PyTorch's).

    Args:
        A (Tensor): ``(*, m, n)``, float32, float64, complex64 or complex128.
        mode (str): ``"reduced"`` (``Q`` ``(*, m, k)``, ``R`` ``(*, k, n)``, ``k = min(m, n)``), ``"complete"``
            (``Q`` ``(*, m, m)``, ``R`` ``(*, m, n)``) or ``"r"`` (``R`` only; ``Q`` is an empty tensor).

    Returns:
        (Tensor, Tensor): ``Q`` and ``R``.

    Raises:
        RuntimeError: for fewer than two dims, a non-float dtype or an unknown ``mode``.

    Example:
        >>> import ember
        >>> Q, R = ember.linalg.qr(ember.tensor([[3., 1.], [4., 2.]]))
        >>> ember.allclose(Q @ R, ember.tensor([[3., 1.], [4., 2.]]))
        True
    """
    fn = "linalg.qr"
    check_matrix(fn, A)
    dtype = check_float(fn, A)
    _check_qr_mode(mode)
    q, r = _qr_shapes(A._data.shape, mode)
    return MetaArray(q, dtype), MetaArray(r, dtype)


def qr_arrays(a, mode="reduced"):
    xp = array_namespace(a)
    q_shape, r_shape = _qr_shapes(a.shape, mode)
    if a.size == 0:
        R = xp.zeros(r_shape, a.dtype)
        Q = xp.zeros(q_shape, a.dtype)
        if mode != "r" and q_shape[-1]:
            Q = xp.broadcast_to(xp.eye(q_shape[-2], q_shape[-1], dtype=a.dtype), q_shape).copy()
        return Q, R
    if mode == "r":
        R = xp.linalg.qr(a, mode="r")
        return xp.zeros((0,), a.dtype), xp.ascontiguousarray(R.astype(a.dtype, copy=False))
    Q, R = xp.linalg.qr(a, mode=mode)
    return Q.astype(a.dtype, copy=False), R.astype(a.dtype, copy=False)


def _qr_cpu(A, mode="reduced"):
    return qr_arrays(A._data, mode)


linalg_qr = linalg_op("linalg_qr", _qr_meta, _qr_cpu, return_type=_qr_result)

_top_qr_result = return_type("qr", ["Q", "R"])


def _top_qr_meta(input, some=True):
    """``(Q, R)`` of ``input``: PyTorch's older ``torch.qr`` (``some=True``: reduced, False: complete)."""
    return _qr_meta(input, "reduced" if some else "complete")


def _top_qr_decomp(input, some=True):
    Q, R = registry["linalg_qr"](input, "reduced" if some else "complete")
    return _top_qr_result(Q, R)


qr = linalg_op("qr", _top_qr_meta, None, category=COMPOSITE, public=True, decomposition=_top_qr_decomp,
               return_type=_top_qr_result)


# -- LU ----------------------------------------------------------------------------------------------

_lu_factor_ex_result = return_type("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_lu_factor_result = return_type("linalg_lu_factor", ["LU", "pivots"])
_lu_result = return_type("linalg_lu", ["P", "L", "U"])


def _check_pivot(fn, A, pivot):
    # PyTorch has it on CUDA (cuSOLVER); CuPy's lu_factor always pivots, so ember has it nowhere yet
    if not pivot:
        where = "the CPU" if A.device.type == "cpu" else f"the {A.device.type} device"
        raise RuntimeError(f"{fn}: LU without pivoting is not implemented on {where}")


def lu_factor_arrays(a, exact_singular=True):
    """``(LU, pivots, info)`` of each matrix of ``a`` (LAPACK ``getrf``, one call per matrix; pivots
    1-based int32, as LAPACK and PyTorch have them).

    ``exact_singular=False`` lets CUDA factor a batch of real square matrices in one cuBLAS call
    (:func:`ember.cuda.kernels.linalg.lu_factor_batched`) for callers that only solve with the factors
    (``solve``): the batched routine's factors of a singular matrix past its zero pivot are not
    documented to be LAPACK's, which ``lu_factor`` returns."""
    xp = array_namespace(a)
    if not exact_singular and xp is not np:
        from ..cuda.kernels import linalg as cuda_linalg

        fast = cuda_linalg.lu_factor_batched(a)  # the whole batch in one cuBLAS call, no host read
        if fast is not None:
            return fast
    *batch, m, n = a.shape
    k = min(m, n)
    LU = xp.empty(a.shape, a.dtype)
    pivots = xp.empty((*batch, k), _INFO)
    info = xp.zeros(tuple(batch), _INFO)
    if a.size == 0:
        return LU, (xp.broadcast_to(xp.arange(1, k + 1, dtype=_INFO), pivots.shape).copy()), info
    mats = a.reshape(-1, m, n)
    lu_flat, piv_flat, info_flat = LU.reshape(-1, m, n), pivots.reshape(-1, k), info.reshape(-1)
    if xp is np:
        from scipy.linalg import lapack

        getrf = lapack.get_lapack_funcs("getrf", (mats,))
        for i, mat in enumerate(mats):  # no batched getrf in numpy
            lu, piv, code = getrf(mat)
            lu_flat[i], piv_flat[i], info_flat[i] = lu, piv + 1, code
        return LU, pivots, info
    lu_factor = scipy_linalg(xp).lu_factor
    for i, mat in enumerate(mats):
        lu, piv = lu_factor(mat, check_finite=False)
        lu_flat[i], piv_flat[i] = lu, piv + 1
    diag = xp.diagonal(LU, axis1=-2, axis2=-1)
    zero = diag == 0
    first = xp.argmax(zero, axis=-1).astype(_INFO) + 1
    return LU, pivots, xp.where(zero.any(axis=-1), first, 0).astype(_INFO)


def _lu_factor_ex_meta(A, *, pivot=True, check_errors=False):
    """LU factorization with partial pivoting in LAPACK's compact form, with ``info`` instead of errors.

    LAPACK ``getrf`` (``scipy.linalg.lapack``, one call per matrix; cuSOLVER through CuPy on CUDA).

    Args:
        A (Tensor): ``(*, m, n)``, float32, float64, complex64 or complex128.
        pivot (bool): must be True (PyTorch's CPU refuses False too; its CUDA build has it, ember's not yet).
        check_errors (bool): raise for a zero pivot.

    Returns:
        (Tensor, Tensor, Tensor): ``LU`` (``(*, m, n)``: ``L`` below the diagonal with an implicit unit
        diagonal, ``U`` on and above it), ``pivots`` (``(*, min(m, n))``, int32, 1-based row swaps) and
        ``info`` (``(*)``, int32: ``i`` when ``U[i-1, i-1]`` is exactly zero).

    Raises:
        RuntimeError: for fewer than two dims, a non-float dtype, or ``pivot=False`` on the CPU.
    """
    fn = "linalg.lu_factor_ex"
    check_matrix(fn, A)
    dtype = check_float(fn, A)
    _check_pivot(fn, A, pivot)
    *batch, m, n = A._data.shape
    return MetaArray(A._data.shape, dtype), MetaArray((*batch, min(m, n)), _INFO), MetaArray(tuple(batch), _INFO)


def _lu_factor_ex_cpu(A, *, pivot=True, check_errors=False):
    LU, pivots, info = lu_factor_arrays(A._data)
    if check_errors:
        raise_for_info("linalg.lu_factor_ex", info, A._data.shape[:-2],
                       lambda code: f"The factorization could not be completed because the input is singular "
                                    f"(U[{code},{code}] is zero).")
    return LU, pivots, info


linalg_lu_factor_ex = linalg_op("linalg_lu_factor_ex", _lu_factor_ex_meta, _lu_factor_ex_cpu,
                                return_type=_lu_factor_ex_result, has_out=False)


def _lu_factor_meta(A, *, pivot=True):
    """:func:`lu_factor_ex` without ``info``: raises when a pivot is exactly zero (``lu_solve`` would divide by it).

    Returns:
        (Tensor, Tensor): ``LU`` and ``pivots`` (see :func:`lu_factor_ex`).

    Raises:
        RuntimeError: "torch.linalg.lu_factor: U[i,i] is zero and using it on lu_solve would result in a
            division by zero...", and as :func:`lu_factor_ex`.

    Example:
        >>> import ember
        >>> LU, pivots = ember.linalg.lu_factor(ember.tensor([[1., 2.], [3., 4.]]))
        >>> pivots
        tensor([2, 2], dtype=ember.int32)
    """
    LU, pivots, _ = _lu_factor_ex_meta(A, pivot=pivot)
    return LU, pivots


def _lu_factor_cpu(A, *, pivot=True):
    LU, pivots, info = lu_factor_arrays(A._data)
    raise_for_info("torch.linalg.lu_factor", info, (),
                   lambda code: f"U[{code},{code}] is zero and using it on lu_solve would result in a division by "
                                "zero. If you still want to perform the factorization, consider calling "
                                "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)", error=RuntimeError)
    return LU, pivots


linalg_lu_factor = linalg_op("linalg_lu_factor", _lu_factor_meta, _lu_factor_cpu, return_type=_lu_factor_result)


def permutation_from_pivots(pivots, m, dtype, xp):
    """The permutation matrices ``P`` (``(*, m, m)``) with ``A = P L U`` for LAPACK's 1-based ``pivots``."""
    batch = pivots.shape[:-1]
    count = int(np.prod(batch)) if batch else 1
    flat = pivots.reshape(count, pivots.shape[-1]) - 1
    perms = xp.broadcast_to(xp.arange(m), (flat.shape[0], m)).copy()
    rows = xp.arange(flat.shape[0])
    host = flat.get() if hasattr(flat, "get") else flat
    for j in range(host.shape[-1]):  # apply the swaps in order (k steps, each over the whole batch)
        target = xp.asarray(host[:, j])
        a, b = perms[rows, j].copy(), perms[rows, target].copy()
        perms[rows, j], perms[rows, target] = b, a
    P = xp.zeros((flat.shape[0], m, m), dtype)
    # row perms[i] of A is row i of L U, so P[perms[i], i] = 1
    P[rows[:, None], perms, xp.arange(m)[None, :]] = 1
    return P.reshape(*batch, m, m)


def lu_unpack_arrays(LU, pivots, unpack_data=True, unpack_pivots=True):
    xp = array_namespace(LU)
    *batch, m, n = LU.shape
    k = min(m, n)
    if unpack_data:
        L = xp.tril(LU[..., :, :k], -1) + xp.eye(m, k, dtype=LU.dtype)
        U = xp.triu(LU[..., :k, :])
    else:
        L, U = xp.zeros((0,), LU.dtype), xp.zeros((0,), LU.dtype)
    P = permutation_from_pivots(pivots, m, LU.dtype, xp) if unpack_pivots else xp.zeros((0,), LU.dtype)
    return P, xp.ascontiguousarray(L), xp.ascontiguousarray(U)


def _lu_meta(A, *, pivot=True):
    """LU decomposition with partial pivoting ``A = P L U``, batched.

    LAPACK ``getrf`` (one call per matrix), then unpacked: ``P`` a permutation matrix, ``L`` unit lower
    triangular (trapezoidal), ``U`` upper triangular (trapezoidal). Singular matrices factor too.

    Args:
        A (Tensor): ``(*, m, n)``, float32, float64, complex64 or complex128.
        pivot (bool): must be True (as on PyTorch's CPU).

    Returns:
        (Tensor, Tensor, Tensor): ``P`` (``(*, m, m)``), ``L`` (``(*, m, k)``), ``U`` (``(*, k, n)``),
        ``k = min(m, n)``, all of ``A``'s dtype.

    Raises:
        RuntimeError: for fewer than two dims, a non-float dtype or ``pivot=False`` on the CPU.

    Example:
        >>> import ember
        >>> P, L, U = ember.linalg.lu(ember.tensor([[1., 2.], [3., 4.]]))
        >>> L
        tensor([[1.0000, 0.0000],
                [0.3333, 1.0000]])
    """
    fn = "linalg.lu"
    check_matrix(fn, A)
    dtype = check_float(fn, A)
    _check_pivot(fn, A, pivot)
    *batch, m, n = A._data.shape
    k = min(m, n)
    return MetaArray((*batch, m, m), dtype), MetaArray((*batch, m, k), dtype), MetaArray((*batch, k, n), dtype)


def _lu_cpu(A, *, pivot=True):
    LU, pivots, _ = lu_factor_arrays(A._data)
    return lu_unpack_arrays(LU, pivots)


# P is a constant of the factorization (PyTorch's P does not require grad): the registry ops are composites
# over prims whose P they return detached (the prim kernels run directly when nothing records gradients).
_linalg_lu = linalg_op("_linalg_lu", _lu_meta, _lu_cpu, return_type=_lu_result)


def _lu_decomp(A, *, pivot=True):
    P, L, U = registry["_linalg_lu"](A, pivot=pivot)
    return _lu_result(registry["detach"](P), L, U)


linalg_lu = linalg_op("linalg_lu", _lu_meta, _lu_cpu, return_type=_lu_result, category=COMPOSITE,
                      decomposition=_lu_decomp)

_lu_unpack_result = return_type("lu_unpack", ["P", "L", "U"])


def _lu_unpack_meta(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """``(P, L, U)`` from :func:`ember.linalg.lu_factor`'s compact ``LU`` and 1-based ``pivots``.

    Args:
        LU_data (Tensor): ``(*, m, n)``.
        LU_pivots (Tensor): ``(*, min(m, n))``, int32 (or int64).
        unpack_data (bool): return ``L`` and ``U`` (else empty tensors).
        unpack_pivots (bool): return ``P`` (else an empty tensor).

    Returns:
        (Tensor, Tensor, Tensor): ``P`` ``(*, m, m)``, ``L`` ``(*, m, k)``, ``U`` ``(*, k, n)``.

    Raises:
        RuntimeError: for a non-integer ``LU_pivots`` or mismatched shapes.
    """
    fn = "lu_unpack"
    check_matrix(fn, LU_data, "LU_data")
    dtype = LU_data._data.dtype
    piv = LU_pivots._data
    if piv.dtype.kind not in "iu":
        raise RuntimeError(f"{fn}: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype. "
                           f"Got {piv.dtype}")
    *batch, m, n = LU_data._data.shape
    k = min(m, n)
    if tuple(piv.shape) != (*batch, k):
        raise RuntimeError(f"{fn}: Expected LU_pivots.size(-1) == min(m, n) and batch dims of LU_data; got pivots "
                           f"of shape {list(piv.shape)} for LU_data of shape {list(LU_data._data.shape)}")
    P = MetaArray((*batch, m, m) if unpack_pivots else (0,), dtype)
    L = MetaArray((*batch, m, k) if unpack_data else (0,), dtype)
    U = MetaArray((*batch, k, n) if unpack_data else (0,), dtype)
    return P, L, U


def _lu_unpack_cpu(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    return lu_unpack_arrays(LU_data._data, LU_pivots._data, unpack_data, unpack_pivots)


_lu_unpack = linalg_op("_lu_unpack", _lu_unpack_meta, _lu_unpack_cpu, return_type=_lu_unpack_result)


def _lu_unpack_decomp(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    P, L, U = registry["_lu_unpack"](LU_data, LU_pivots, unpack_data, unpack_pivots)
    return _lu_unpack_result(registry["detach"](P), L, U)


lu_unpack = linalg_op("lu_unpack", _lu_unpack_meta, _lu_unpack_cpu, public=True, return_type=_lu_unpack_result,
                      category=COMPOSITE, decomposition=_lu_unpack_decomp)


# -- LDL^T (Bunch-Kaufman) ---------------------------------------------------------------------------

_ldl_ex_result = return_type("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
_ldl_result = return_type("linalg_ldl_factor", ["LD", "pivots"])


def ldl_factor_arrays(a, hermitian):
    """``(LD, pivots, info)`` by LAPACK ``sytrf``/``hetrf`` (lower), one call per matrix (CPU only)."""
    from scipy.linalg import lapack

    xp = array_namespace(a)
    host = a.get() if xp is not np else a
    *batch, n, _ = host.shape
    LD = np.zeros(host.shape, host.dtype)
    pivots = np.zeros((*batch, n), _INFO)
    info = np.zeros(tuple(batch), _INFO)
    if host.size:
        name = "hetrf" if hermitian and host.dtype.kind == "c" else "sytrf"
        fn = lapack.get_lapack_funcs(name, (host,))
        for i, mat in enumerate(host.reshape(-1, n, n)):
            ld, piv, code = fn(mat, lower=1)
            LD.reshape(-1, n, n)[i] = np.tril(ld)
            pivots.reshape(-1, n)[i] = piv
            info.reshape(-1)[i] = code
    if xp is not np:
        return xp.asarray(LD), xp.asarray(pivots), xp.asarray(info)
    return LD, pivots, info


def _ldl_factor_ex_meta(A, *, hermitian=False, check_errors=False):
    """``A = L D L^T`` (``L D L^H`` when ``hermitian``) with Bunch-Kaufman pivoting, in LAPACK's compact form.

    LAPACK ``sytrf``/``hetrf`` on the lower triangle (``scipy.linalg.lapack``, one call per matrix; the CUDA
    device copies to the host). Not differentiable (as in PyTorch).

    Args:
        A (Tensor): ``(*, n, n)`` symmetric (or Hermitian), float32, float64, complex64 or complex128.
        hermitian (bool): factor as Hermitian (complex input).
        check_errors (bool): raise when ``D`` is singular.

    Returns:
        (Tensor, Tensor, Tensor): ``LD`` (``(*, n, n)``), ``pivots`` (``(*, n)``, int32, LAPACK's encoding)
        and ``info`` (``(*)``, int32).
    """
    dtype = check_square("linalg.ldl_factor_ex", A)
    shape = A._data.shape
    return MetaArray(shape, dtype), MetaArray(shape[:-1], _INFO), MetaArray(shape[:-2], _INFO)


def _ldl_factor_ex_cpu(A, *, hermitian=False, check_errors=False):
    LD, pivots, info = ldl_factor_arrays(A._data, hermitian)
    if check_errors:
        raise_for_info("torch.linalg.ldl_factor_ex", info, A._data.shape[:-2],
                       lambda code: f"The factorization could not be completed because the input is singular "
                                    f"(D[{code},{code}] is zero).")
    return LD, pivots, info


linalg_ldl_factor_ex = linalg_op("linalg_ldl_factor_ex", _ldl_factor_ex_meta, _ldl_factor_ex_cpu,
                                 return_type=_ldl_ex_result, has_out=False)


def _ldl_factor_meta(A, *, hermitian=False):
    """:func:`ldl_factor_ex` without ``info`` (raises for a singular ``D``). Returns ``(LD, pivots)``."""
    LD, pivots, _ = _ldl_factor_ex_meta(A, hermitian=hermitian)
    return LD, pivots


def _ldl_factor_cpu(A, *, hermitian=False):
    LD, pivots, info = _ldl_factor_ex_cpu(A, hermitian=hermitian, check_errors=False)
    raise_for_info("torch.linalg.ldl_factor", info, A._data.shape[:-2],
                   lambda code: f"The factorization could not be completed because the input is singular "
                                f"(D[{code},{code}] is zero).")
    return LD, pivots


linalg_ldl_factor = linalg_op("linalg_ldl_factor", _ldl_factor_meta, _ldl_factor_cpu, return_type=_ldl_result)


def _top_lu_meta(A, pivot=True, get_infos=False):
    """PyTorch's older ``torch.lu``: ``(LU, pivots)`` of :func:`ember.linalg.lu_factor_ex`, with ``infos``
    as a third output when ``get_infos`` (otherwise a zero pivot raises, as ``lu_factor`` does).

    Returns:
        tuple: ``(LU, pivots)`` or ``(LU, pivots, infos)``.
    """
    LU, pivots, info = _lu_factor_ex_meta(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def _top_lu_decomp(A, pivot=True, get_infos=False):
    LU, pivots, info = registry["linalg_lu_factor_ex"](A, pivot=pivot, check_errors=not get_infos)
    return (LU, pivots, info) if get_infos else (LU, pivots)


lu = linalg_op("lu", _top_lu_meta, None, category=COMPOSITE, public=True, has_out=False, decomposition=_top_lu_decomp)
