"""Spectral decompositions: ``linalg.svd``/``svdvals``, ``linalg.eigh``/``eigvalsh``, ``linalg.eig``/``eigvals``.

CPU: LAPACK through ``numpy.linalg`` (batched in C): ``gesdd`` for the SVD,
``syevd``/``heevd`` for Hermitian eigenproblems, ``geev`` for general ones.
CUDA: cuSOLVER through CuPy (``gesvdj``/``gesvd``, ``syevj``; ``eig`` through
``cupy.linalg.eig`` where the installed CuPy has it). Eigenvectors and singular
vectors are defined up to a sign (a phase for complex input); the derivatives
follow PyTorch's conventions and raise when a loss depends on that phase.
"""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray, contiguous_strides
from ._array_module import array_namespace
from ._linalg_common import (
    LinAlgError,
    check_float,
    check_matrix,
    check_square,
    lapack_each,
    linalg_op,
    prefers_lapack_loop,
    real_dtype,
    return_type,
)
from ._registry import COMPOSITE, registry

__all__ = []

METHODS: list[str] = ["svd"]
ALIASES: dict[str, str] = {}

_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
_SVD_DRIVERS = ("gesvd", "gesvdj", "gesvda")


def _complex_dtype(np_dtype):
    return _COMPLEX.get(np_dtype, np_dtype)


def _no_convergence(fn, exc):
    return LinAlgError(f"{fn}: The algorithm failed to converge because the input matrix is ill-conditioned or "
                       f"has too many repeated singular values ({exc}).")


# -- svd ---------------------------------------------------------------------------------------------

_svd_result = return_type("linalg_svd", ["U", "S", "Vh"])


def _svd_shapes(shape, full_matrices):
    *batch, m, n = shape
    batch = tuple(batch)
    k = min(m, n)
    u_cols, v_rows = (m, n) if full_matrices else (k, k)
    return batch + (m, u_cols), batch + (k,), batch + (v_rows, n)


def _column_major_strides(shape):
    """Strides of a batch of column-major matrices: PyTorch's layout for ``svd``'s ``U`` and ``Vh`` (LAPACK
    writes them so), e.g. ``(16, 1, 4)`` for ``(2, 4, 4)``. Empty tensors report row-major strides, as
    ember's (and PyTorch's) empty tensors do whatever their layout."""
    if 0 in shape:
        return contiguous_strides(shape)
    swapped = contiguous_strides((*shape[:-2], shape[-1], shape[-2]))
    return (*swapped[:-2], swapped[-1], swapped[-2])


def _column_major(a):
    """``a`` laid out as a batch of column-major matrices (no copy when it already is)."""
    if a.size == 0:  # an empty tensor reports row-major strides whatever its layout
        return a
    expected = tuple(s * a.dtype.itemsize for s in _column_major_strides(a.shape))
    if tuple(a.strides) == expected:
        return a
    # a fresh array rather than ascontiguousarray of the transpose, which keeps the strides of size-1
    # dims that numpy ignores in its contiguity test (gesdd's (3, 1) U has strides (8, 8))
    xp = array_namespace(a)
    out = xp.swapaxes(xp.empty((*a.shape[:-2], a.shape[-1], a.shape[-2]), a.dtype), -1, -2)
    out[...] = a
    return out


def _svd_meta(A, full_matrices=True, *, driver=None):
    """Singular value decomposition ``A = U diag(S) Vh``, batched.

    LAPACK ``gesdd`` (divide and conquer) through ``numpy.linalg.svd`` (or per matrix through
    ``scipy.linalg.lapack`` for single precision and small batches) on CPU; on CUDA cuSOLVER ``gesvdj``
    (Jacobi, PyTorch's default there; one call per matrix), or CuPy's routine for ``driver="gesvd"``/
    ``"gesvda"`` and where the Jacobi sweeps do not converge. Singular values are real, non-negative and
    in descending order. Singular vectors are unique up to a sign (real) or a phase (complex) per pair:
    gradients through them are defined only for losses that don't depend on it (PyTorch's rule).

    Args:
        A (Tensor): ``(*, m, n)``, float32, float64, complex64 or complex128.
        full_matrices (bool): ``U`` is ``(*, m, m)`` and ``Vh`` ``(*, n, n)`` if True; ``(*, m, k)`` and
            ``(*, k, n)`` with ``k = min(m, n)`` if False.
        driver (str, optional): CUDA only, as in PyTorch: ``None``/``"gesvdj"`` run gesvdj, the others
            CuPy's routine.

    Returns:
        (Tensor, Tensor, Tensor): ``U``, ``S`` (``(*, k)``, real), ``Vh``; ``U`` and ``Vh`` are batches of
        column-major matrices (``U.mT`` is contiguous), as in PyTorch.

    Raises:
        RuntimeError: for fewer than two dims, a non-float dtype, or ``driver`` on a non-CUDA tensor.
        ember.linalg.LinAlgError: if the algorithm does not converge.

    Example:
        >>> import ember
        >>> ember.linalg.svd(ember.tensor([[3., 0.], [0., -4.]])).S
        tensor([4., 3.])
    """
    fn = "linalg.svd"
    check_matrix(fn, A)
    dtype = check_float(fn, A)
    if driver is not None:
        if A.device.type != "cuda":
            raise RuntimeError(
                "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend.")
        if driver not in _SVD_DRIVERS:
            raise RuntimeError(f"torch.linalg.svd: driver must be one of {', '.join(_SVD_DRIVERS)}. Got {driver}")
    u, s, v = _svd_shapes(A._data.shape, full_matrices)
    return (MetaArray(u, dtype, _column_major_strides(u)), MetaArray(s, real_dtype(dtype)),
            MetaArray(v, dtype, _column_major_strides(v)))


def svd_arrays(a, full_matrices=False, compute_uv=True):
    """``(U, S, Vh)`` (or ``S`` alone) of the batch ``a`` (arrays)."""
    xp = array_namespace(a)
    *batch, m, n = a.shape
    if a.size == 0:
        u, s, v = _svd_shapes(a.shape, full_matrices)
        S = xp.zeros(s, real_dtype(a.dtype))
        if not compute_uv:
            return S
        U = xp.broadcast_to(xp.eye(u[-2], u[-1], dtype=a.dtype), u).copy()
        Vh = xp.broadcast_to(xp.eye(v[-2], v[-1], dtype=a.dtype), v).copy()
        return U, S, Vh
    if prefers_lapack_loop(a, small_batch=8):  # gesdd per matrix, at the input's precision
        results = lapack_each("gesdd", a, compute_uv=int(compute_uv), full_matrices=int(full_matrices))
        if any(r[-1] > 0 for r in results):
            raise _no_convergence("linalg.svd", "gesdd did not converge")
        u_shape, s_shape, v_shape = _svd_shapes(a.shape, full_matrices)
        S = np.stack([r[1] for r in results]).reshape(s_shape).astype(real_dtype(a.dtype), copy=False)
        if not compute_uv:
            return S
        U = np.stack([r[0] for r in results]).reshape(u_shape)
        Vh = np.stack([r[2] for r in results]).reshape(v_shape)
        return U.astype(a.dtype, copy=False), S, Vh.astype(a.dtype, copy=False)
    try:
        if not compute_uv:
            return xp.linalg.svd(a, compute_uv=False).astype(real_dtype(a.dtype), copy=False)
        U, S, Vh = xp.linalg.svd(a, full_matrices=full_matrices)
    except np.linalg.LinAlgError as exc:
        raise _no_convergence("linalg.svd", exc) from None
    return U.astype(a.dtype, copy=False), S.astype(real_dtype(a.dtype), copy=False), Vh.astype(a.dtype, copy=False)


def _svd_cpu(A, full_matrices=True, *, driver=None):
    # gesdd per matrix returns column-major U and Vh, numpy's batched svd row-major ones: the op returns
    # one layout, PyTorch's, which its meta function promises
    U, S, Vh = svd_arrays(A._data, full_matrices)
    return _column_major(U), S, _column_major(Vh)


def _svd_cuda(A, full_matrices=True, *, driver=None):
    # cuSOLVER gesvdj called directly (PyTorch's default CUDA driver); its info is read once, as PyTorch
    # does, and a batch where the Jacobi sweeps did not converge goes to CuPy's routine (gesvd), as
    # PyTorch's falls back to gesvd
    from ..cuda.kernels import linalg as cuda_linalg

    fast = cuda_linalg.svd(A._data, full_matrices) if driver in (None, "gesvdj") else None
    if fast is not None and not bool(fast[3].any()):
        U, S, Vh, _ = fast
        return _column_major(U), S, _column_major(Vh)
    U, S, Vh = svd_arrays(A._data, full_matrices)
    return _column_major(U), S, _column_major(Vh)


linalg_svd = linalg_op("linalg_svd", _svd_meta, _svd_cpu, cuda=_svd_cuda, return_type=_svd_result)


def _svdvals_meta(A, *, driver=None):
    """Singular values of ``A`` (``(*, m, n)``): ``(*, min(m, n))``, real, descending.

    LAPACK ``gesdd`` without vectors (CPU), cuSOLVER (CUDA). Differentiable everywhere the singular values
    are distinct or the loss is symmetric in them (unlike the vectors of :func:`svd`).

    Raises:
        RuntimeError: for fewer than two dims or a non-float dtype.
    """
    fn = "linalg.svdvals"
    check_matrix(fn, A)
    dtype = check_float(fn, A)
    *batch, m, n = A._data.shape
    return MetaArray((*batch, min(m, n)), real_dtype(dtype))


def _svdvals_cpu(A, *, driver=None):
    return svd_arrays(A._data, compute_uv=False)


linalg_svdvals = linalg_op("linalg_svdvals", _svdvals_meta, _svdvals_cpu)


# -- eigh ------------------------------------------------------------------------------------------

_eigh_result = return_type("linalg_eigh", ["eigenvalues", "eigenvectors"])


def _check_uplo(fn, UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"{fn}: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _eigh_meta(A, UPLO="L"):
    """Eigenvalues (ascending, real) and orthonormal eigenvectors of a Hermitian matrix, batched.

    Only the triangle named by ``UPLO`` is read. LAPACK ``syevd``/``heevd`` through ``numpy.linalg.eigh``;
    cuSOLVER ``syevj``/``heevj`` through CuPy on CUDA. Eigenvectors are unique up to a sign (a phase for
    complex input), and only when the eigenvalues are distinct.

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.
        UPLO (str): ``"L"`` (lower triangle, the default) or ``"U"``.

    Returns:
        (Tensor, Tensor): ``eigenvalues`` (``(*, n)``, real) and ``eigenvectors`` (``(*, n, n)``, ``A``'s
        dtype; column ``i`` belongs to eigenvalue ``i``; column-major, as in PyTorch).

    Raises:
        RuntimeError: for non-square or non-float input, or ``UPLO`` other than "L"/"U".
        ember.linalg.LinAlgError: if the algorithm does not converge.

    Example:
        >>> import ember
        >>> ember.linalg.eigh(ember.tensor([[2., 1.], [1., 2.]])).eigenvalues
        tensor([1., 3.])
    """
    fn = "linalg.eigh"
    dtype = check_square(fn, A)
    _check_uplo(fn, UPLO)
    shape = A._data.shape
    # eigenvectors: a batch of column-major matrices, as in PyTorch (the layout LAPACK writes)
    return MetaArray(shape[:-1], real_dtype(dtype)), MetaArray(shape, dtype, _column_major_strides(shape))


def eigh_arrays(a, UPLO="L", compute_v=True):
    xp = array_namespace(a)
    if a.size == 0:
        w = xp.zeros(a.shape[:-1], real_dtype(a.dtype))
        return (w, xp.zeros(a.shape, a.dtype)) if compute_v else w
    if prefers_lapack_loop(a, small_batch=0):  # syevd/heevd per matrix, at the input's precision
        results = lapack_each("heevd" if a.dtype.kind == "c" else "syevd", a, compute_v=int(compute_v),
                              lower=int(UPLO == "L"))
        if any(r[-1] > 0 for r in results):
            raise LinAlgError("linalg.eigh: The algorithm failed to converge because the input matrix is "
                              "ill-conditioned or has too many repeated eigenvalues.")
        w = np.stack([r[0] for r in results]).reshape(a.shape[:-1]).astype(real_dtype(a.dtype), copy=False)
        if not compute_v:
            return w
        return w, np.stack([r[1] for r in results]).reshape(a.shape).astype(a.dtype, copy=False)
    try:
        if not compute_v:
            return xp.linalg.eigvalsh(a, UPLO=UPLO).astype(real_dtype(a.dtype), copy=False)
        w, v = xp.linalg.eigh(a, UPLO=UPLO)
    except np.linalg.LinAlgError as exc:
        raise LinAlgError(f"linalg.eigh: The algorithm failed to converge because the input matrix is "
                          f"ill-conditioned or has too many repeated eigenvalues ({exc}).") from None
    return w.astype(real_dtype(a.dtype), copy=False), v.astype(a.dtype, copy=False)


def _eigh_cpu(A, UPLO="L"):
    w, v = eigh_arrays(A._data, UPLO)
    return w, _column_major(v)  # syevd per matrix gives this layout, numpy's batched eigh row-major


linalg_eigh = linalg_op("linalg_eigh", _eigh_meta, _eigh_cpu, return_type=_eigh_result)


def _eigvalsh_meta(A, UPLO="L"):
    """Eigenvalues of a Hermitian matrix (``(*, n, n)``): ``(*, n)``, real, ascending.

    LAPACK ``syevd``/``heevd`` without vectors (CPU), cuSOLVER (CUDA). Reads the ``UPLO`` triangle only.

    Raises:
        RuntimeError: for non-square or non-float input, or ``UPLO`` other than "L"/"U".
    """
    fn = "linalg.eigvalsh"
    dtype = check_square(fn, A)
    _check_uplo(fn, UPLO)
    return MetaArray(A._data.shape[:-1], real_dtype(dtype))


def _eigvalsh_cpu(A, UPLO="L"):
    return eigh_arrays(A._data, UPLO, compute_v=False)


linalg_eigvalsh = linalg_op("linalg_eigvalsh", _eigvalsh_meta, _eigvalsh_cpu)


# -- eig ---------------------------------------------------------------------------------------------

_eig_result = return_type("linalg_eig", ["eigenvalues", "eigenvectors"])


def _eig_meta(A):
    """Eigenvalues and eigenvectors of a general square matrix, batched; always complex.

    LAPACK ``geev`` through ``numpy.linalg.eig`` (CPU); ``cupy.linalg.eig`` (cuSOLVER ``geev``) on CUDA.
    Eigenvectors have unit norm and are unique up to a phase: gradients are defined only for losses that
    don't depend on it.

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.

    Returns:
        (Tensor, Tensor): ``eigenvalues`` (``(*, n)``) and ``eigenvectors`` (``(*, n, n)``), complex64 for
        float32/complex64 input, complex128 otherwise.

    Raises:
        RuntimeError: for non-square or non-float input.
        ember.linalg.LinAlgError: if the algorithm does not converge.

    Example:
        >>> import ember
        >>> ember.linalg.eig(ember.tensor([[2., 0.], [0., 3.]])).eigenvalues
        tensor([2.+0.j, 3.+0.j])
    """
    dtype = _complex_dtype(check_square("linalg.eig", A))
    shape = A._data.shape
    return MetaArray(shape[:-1], dtype), MetaArray(shape, dtype)


def eig_arrays(a, compute_v=True):
    xp = array_namespace(a)
    if xp is not np and not hasattr(xp.linalg, "eig"):  # CuPy before 14 has no general eigensolver
        out = eig_arrays(a.get(), compute_v)
        return tuple(xp.asarray(o) for o in out) if compute_v else xp.asarray(out)
    dtype = _complex_dtype(a.dtype)
    if a.size == 0:
        w = xp.zeros(a.shape[:-1], dtype)
        return (w, xp.zeros(a.shape, dtype)) if compute_v else w
    try:
        if not compute_v:
            return xp.linalg.eigvals(a).astype(dtype, copy=False)
        w, v = xp.linalg.eig(a)
    except np.linalg.LinAlgError as exc:
        raise LinAlgError(f"linalg.eig: The algorithm failed to converge ({exc}).") from None
    return w.astype(dtype, copy=False), v.astype(dtype, copy=False)


def _eig_cpu(A):
    return eig_arrays(A._data)


linalg_eig = linalg_op("linalg_eig", _eig_meta, _eig_cpu, return_type=_eig_result)


def _eigvals_meta(A):
    """Eigenvalues of a general square matrix (``(*, n, n)``): ``(*, n)``, complex. LAPACK ``geev``.

    Raises:
        RuntimeError: for non-square or non-float input.
    """
    dtype = _complex_dtype(check_square("linalg.eigvals", A))
    return MetaArray(A._data.shape[:-1], dtype)


def _eigvals_cpu(A):
    return eig_arrays(A._data, compute_v=False)


linalg_eigvals = linalg_op("linalg_eigvals", _eigvals_meta, _eigvals_cpu)


# -- the top-level svd (PyTorch's older interface) ---------------------------------------------------

_top_svd_result = return_type("svd", ["U", "S", "V"])


def _top_svd_meta(input, some=True, compute_uv=True):
    """``(U, S, V)`` with ``input = U diag(S) V^H``: PyTorch's older ``torch.svd``.

    Unlike :func:`ember.linalg.svd` it returns ``V``, not ``V^H``, and ``some=True`` (the default) gives the
    reduced factors. With ``compute_uv=False``, ``U`` and ``V`` are zero-filled. LAPACK ``gesdd``.
    """
    dtype = check_float("svd", input)
    check_matrix("svd", input)
    *batch, m, n = input._data.shape
    k = min(m, n)
    full = not some or not compute_uv  # PyTorch: the zeros of compute_uv=False are (m, m) and (n, n)
    u_shape = (*batch, m, m if full else k)
    v_shape = (*batch, n, n if full else k)
    if not compute_uv:  # zeros, row-major
        return MetaArray(u_shape, dtype), MetaArray((*batch, k), real_dtype(dtype)), MetaArray(v_shape, dtype)
    # U is linalg.svd's, column-major; V is the transpose of linalg.svd's Vh (row-major unless empty)
    vh_strides = _column_major_strides((*batch, v_shape[-1], v_shape[-2]))
    v_strides = (*vh_strides[:-2], vh_strides[-1], vh_strides[-2])
    return (MetaArray(u_shape, dtype, _column_major_strides(u_shape)), MetaArray((*batch, k), real_dtype(dtype)),
            MetaArray(v_shape, dtype, v_strides))


def _top_svd_decomp(input, some=True, compute_uv=True):
    if not compute_uv:
        S = registry["linalg_svdvals"](input)
        u, _, v = _top_svd_meta(input, some, compute_uv)
        zeros = registry["zeros"]
        return _top_svd_result(zeros(u.shape, dtype=input.dtype, device=input.device), S,
                               zeros(v.shape, dtype=input.dtype, device=input.device))
    U, S, Vh = registry["linalg_svd"](input, not some)
    return _top_svd_result(U, S, registry["conj"](registry["transpose"](Vh, -2, -1)))


svd = linalg_op("svd", _top_svd_meta, None, category=COMPOSITE, has_out=False, public=True,
                decomposition=_top_svd_decomp, return_type=_top_svd_result)
