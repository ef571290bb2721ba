"""Determinants: ``linalg.det``, ``linalg.slogdet`` and the top-level ``det``, ``slogdet``, ``logdet``.

Both prims compute an LU factorization with partial pivoting (LAPACK ``getrf``
through ``numpy.linalg.det``/``slogdet``, batched in C; cuSOLVER through CuPy)
and multiply its diagonal. ``logdet`` is a composite of ``slogdet``.
The derivatives (ember-autograd, ``derivatives/linalg_det.py``) stay finite
and right at singular matrices (PyTorch's issue 104675): they go through the
SVD there instead of the inverse.
"""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray
from ._array_module import array_namespace
from ._array_module import as_array as _as_array
from ._linalg_common import check_square, linalg_op, real_dtype, return_type
from ._registry import COMPOSITE, registry

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["det", "logdet", "slogdet"]
ALIASES: dict[str, str] = {}


def _det_meta(A):
    """Determinant of a square matrix or of each matrix of a batch.

    Computed from an LU factorization with partial pivoting (LAPACK ``getrf``; cuSOLVER on CUDA).

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.

    Returns:
        Tensor: ``(*)``, ``A``'s dtype. The determinant of a ``0 x 0`` matrix is 1.

    Raises:
        RuntimeError: if ``A`` has fewer than two dims, is not square, or has another dtype.

    Example:
        >>> import ember
        >>> ember.linalg.det(ember.tensor([[2., 0.], [0., 3.]]))
        tensor(6.)
    """
    dtype = check_square("linalg.det", A)
    return MetaArray(A._data.shape[:-2], dtype)


def _det_cpu(A):
    a = A._data
    xp = array_namespace(a)
    if a.shape[-1] == 0:
        return xp.ones(a.shape[:-2], a.dtype)
    return _as_array(xp.linalg.det(a)).astype(a.dtype, copy=False)


linalg_det = linalg_op("linalg_det", _det_meta, _det_cpu)

_slogdet_result = return_type("linalg_slogdet", ["sign", "logabsdet"])


def _slogdet_meta(A):
    """Sign (or phase) and log of the absolute value of the determinant: ``det = sign * exp(logabsdet)``.

    More accurate than ``log(det(A))`` for matrices whose determinant under- or overflows. Computed from
    an LU factorization with partial pivoting (LAPACK ``getrf``; cuSOLVER on CUDA).

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.

    Returns:
        (Tensor, Tensor): ``sign`` (``(*)``, ``A``'s dtype: -1, 0 or 1 for real input, a unit complex number
        for complex input; 0 for a singular matrix) and ``logabsdet`` (``(*)``, real; ``-inf`` when singular).

    Raises:
        RuntimeError: if ``A`` has fewer than two dims, is not square, or has another dtype.

    Example:
        >>> import ember
        >>> ember.linalg.slogdet(ember.tensor([[-2., 0.], [0., 3.]])).logabsdet
        tensor(1.7918)
    """
    dtype = check_square("linalg.slogdet", A)
    batch = A._data.shape[:-2]
    return MetaArray(batch, dtype), MetaArray(batch, real_dtype(dtype))


def _slogdet_cpu(A):
    a = A._data
    xp = array_namespace(a)
    if a.shape[-1] == 0:
        return xp.ones(a.shape[:-2], a.dtype), xp.zeros(a.shape[:-2], real_dtype(a.dtype))
    sign, logabsdet = xp.linalg.slogdet(a)
    return _as_array(sign).astype(a.dtype, copy=False), _as_array(logabsdet).astype(real_dtype(a.dtype), copy=False)


linalg_slogdet = linalg_op("linalg_slogdet", _slogdet_meta, _slogdet_cpu, return_type=_slogdet_result)


# -- top-level aliases -----------------------------------------------------------------------------------


def _top_det_meta(input):
    """Determinant of ``input`` (``(*, n, n)``): ``ember.linalg.det`` under PyTorch's older name."""
    return _det_meta(input)


det = linalg_op("det", _top_det_meta, _det_cpu, category=COMPOSITE, has_out=False, public=True,
                decomposition=lambda input: registry["linalg_det"](input))

_top_slogdet_result = return_type("slogdet", ["sign", "logabsdet"])


def _top_slogdet_meta(input):
    """``(sign, logabsdet)`` of ``input``'s determinant: ``ember.linalg.slogdet`` under its older name."""
    return _slogdet_meta(input)


def _top_slogdet_decomp(input):
    sign, logabsdet = registry["linalg_slogdet"](input)
    return _top_slogdet_result(sign, logabsdet)


slogdet = linalg_op("slogdet", _top_slogdet_meta, _slogdet_cpu, category=COMPOSITE, public=True,
                    decomposition=_top_slogdet_decomp, return_type=_top_slogdet_result)


def _logdet_meta(input):
    """Natural log of the determinant of ``input`` (``(*, n, n)``).

    For real input the result is NaN where the determinant is negative and ``-inf`` where it is 0; for
    complex input it is the complex logarithm ``logabsdet + i * angle(det)``. Computed through
    :func:`ember.linalg.slogdet`.

    Raises:
        RuntimeError: if ``input`` has fewer than two dims, is not square, or is not float or complex.

    Example:
        >>> import ember
        >>> ember.logdet(ember.tensor([[2., 0.], [0., 3.]]))
        tensor(1.7918)
    """
    dtype = check_square("logdet", input)
    return MetaArray(input._data.shape[:-2], dtype)


def _logdet_cpu(input):
    sign, logabsdet = _slogdet_cpu(input)
    xp = array_namespace(sign)
    if sign.dtype.kind == "c":
        return _as_array(logabsdet + 1j * xp.angle(sign)).astype(sign.dtype, copy=False)
    return _as_array(xp.where(sign < 0, np.nan, logabsdet)).astype(sign.dtype, copy=False)


def _logdet_decomp(input):
    sign, logabsdet = registry["linalg_slogdet"](input)
    if sign.is_complex():
        return logabsdet + 1j * registry["angle"](sign)
    return registry["where"](sign < 0, float("nan"), logabsdet)


logdet = linalg_op("logdet", _logdet_meta, _logdet_cpu, category=COMPOSITE, has_out=False, public=True,
                   decomposition=_logdet_decomp)
