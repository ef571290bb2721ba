"""Factorizations: ``linalg.cholesky``/``cholesky_ex`` and the top-level ``cholesky``.

Cholesky runs LAPACK ``potrf`` on the lower triangle through
``numpy.linalg.cholesky`` (batched in C; cuSOLVER ``potrf`` through CuPy on
CUDA). Only the lower triangle of the input is read, as in PyTorch. A matrix
that is not positive-definite makes ``cholesky_ex`` return the order of the
failing leading minor as ``info`` and ``cholesky`` raise
:class:`~ember.linalg.LinAlgError` naming it.
"""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray
from ._array_module import array_namespace
from ._linalg_common import check_square, finite_info, lapack_info, linalg_op, raise_for_info, return_type
from ._registry import COMPOSITE, registry

__all__ = []

METHODS: list[str] = ["cholesky"]
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
    # numpy and CuPy read the lower triangle; keep it Hermitian so numpy's checks see what LAPACK would
    if xp is not np:
        L = xp.linalg.cholesky(a)
        info = finite_info(L)
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
