"""Functions of ``ember.linalg`` built on the factorizations, and PyTorch's top-level aliases of them.

* ``linalg.pinv`` (prim: SVD, or ``eigh`` when ``hermitian``, with PyTorch's ``atol``/``rtol``
  threshold; its derivative is the Golub-Pereyra formula, not the SVD's) and ``pinverse``;
* ``linalg.matrix_exp`` (prim: ``scipy.linalg.expm``, scaling and squaring with Pade
  approximants, batched) and ``matrix_exp``;
* composites, differentiated through their decompositions: ``matrix_rank``, ``cond``,
  ``matrix_power`` (repeated squaring), ``multi_dot`` (``chain_matmul``'s optimal order),
  ``householder_product``, ``tensorinv``, ``tensorsolve``, ``vander``, ``vecdot``, ``cross``,
  ``diagonal``, and the top-level ``matrix_power``, ``vander``, ``trapezoid``/``trapz``/
  ``cumulative_trapezoid``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace
from ._linalg_common import check_float, check_matrix, check_square, linalg_op, real_dtype
from ._registry import COMPOSITE, registry
from ._shapes import broadcast_shapes, wrap_dim

__all__ = []

METHODS: list[str] = ["pinverse", "matrix_exp", "matrix_power"]
ALIASES: dict[str, str] = {}


def _op(name):
    return registry[name]


def _mH(t):
    return _op("conj")(_op("transpose")(t, -2, -1))


# -- pinv --------------------------------------------------------------------------------------------


def _pinv_tolerances(atol, rtol, m, n, dtype):
    """PyTorch's rule: with neither given, ``rtol = eps * max(m, n)``; with ``atol`` alone, ``rtol = 0``."""
    if atol is None and rtol is None:
        return 0.0, np.finfo(real_dtype(dtype)).eps * max(m, n)
    return (0.0 if atol is None else atol), (0.0 if rtol is None else rtol)


def _check_tol(fn, name, value):
    if value is not None and not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}(): argument '{name}' must be a float (tensor tolerances are not supported), "
                        f"not {type(value).__name__}")


def _pinv_meta(A, *, atol=None, rtol=None, hermitian=False):
    """Moore-Penrose pseudo-inverse, batched: ``V diag(1/s) U^H`` over the singular values ``s`` above
    ``max(atol, rtol * s_max)``.

    LAPACK ``gesdd`` (``eigh``'s ``syevd``/``heevd`` when ``hermitian``) through ``numpy.linalg``.

    Args:
        A (Tensor): ``(*, m, n)``, float32, float64, complex64 or complex128.
        atol (float, optional): absolute threshold.
        rtol (float, optional): relative threshold (default ``eps * max(m, n)`` when neither is given, 0 when
            only ``atol`` is).
        hermitian (bool): ``A`` is Hermitian (only its lower triangle is read); uses ``eigh``.

    Returns:
        Tensor: ``(*, n, m)``.

    Raises:
        RuntimeError: for fewer than two dims or a non-float dtype.

    Example:
        >>> import ember
        >>> ember.linalg.pinv(ember.tensor([[2., 0.], [0., 0.]]))
        tensor([[0.5000, 0.0000],
                [0.0000, 0.0000]])
    """
    fn = "linalg.pinv"
    check_matrix(fn, A)
    dtype = check_float(fn, A)
    _check_tol("linalg_pinv", "atol", atol)
    _check_tol("linalg_pinv", "rtol", rtol)
    if hermitian:
        check_square(fn, A)
    *batch, m, n = A._data.shape
    return MetaArray((*batch, n, m), dtype)


def pinv_arrays(a, atol=None, rtol=None, hermitian=False):
    xp = array_namespace(a)
    *batch, m, n = a.shape
    if a.size == 0:
        return xp.zeros((*batch, n, m), a.dtype)
    atol, rtol = _pinv_tolerances(atol, rtol, m, n, a.dtype)
    if hermitian:
        w, V = xp.linalg.eigh(a)
        s = xp.abs(w)
        tol = xp.maximum(atol, rtol * s.max(axis=-1, keepdims=True))
        inv = xp.where(s > tol, 1 / xp.where(s > tol, w, 1), 0).astype(a.dtype)
        return xp.matmul(V * inv[..., None, :], xp.conj(xp.swapaxes(V, -1, -2))).astype(a.dtype, copy=False)
    U, s, Vh = xp.linalg.svd(a, full_matrices=False)
    tol = xp.maximum(atol, rtol * s.max(axis=-1, keepdims=True))
    inv = xp.where(s > tol, 1 / xp.where(s > tol, s, 1), 0).astype(a.dtype)
    V, Uh = xp.conj(xp.swapaxes(Vh, -1, -2)), xp.conj(xp.swapaxes(U, -1, -2))
    return xp.matmul(V * inv[..., None, :], Uh).astype(a.dtype, copy=False)


def _pinv_cpu(A, *, atol=None, rtol=None, hermitian=False):
    return pinv_arrays(A._data, atol, rtol, hermitian)


linalg_pinv = linalg_op("linalg_pinv", _pinv_meta, _pinv_cpu)


def _pinverse_meta(input, rcond=1e-15):
    """Pseudo-inverse with PyTorch's older interface: singular values below ``rcond * s_max`` are dropped.
    See :func:`ember.linalg.pinv`."""
    return _pinv_meta(input)


pinverse = linalg_op("pinverse", _pinverse_meta, None, category=COMPOSITE, public=True,
                     decomposition=lambda input, rcond=1e-15: _op("linalg_pinv")(input, rtol=rcond))


# -- matrix_exp ----------------------------------------------------------------------------------------


def _matrix_exp_meta(A):
    """Matrix exponential ``sum_k A^k / k!``, batched.

    Scaling and squaring with Pade approximants (Al-Mohy and Higham, 2009) through ``scipy.linalg.expm``
    (``cupyx.scipy.linalg.expm`` on CUDA).

    Args:
        A (Tensor): ``(*, n, n)``, float32, float64, complex64 or complex128.

    Returns:
        Tensor: ``(*, n, n)``.

    Raises:
        RuntimeError: for non-square or non-float input.

    Example:
        >>> import ember
        >>> ember.linalg.matrix_exp(ember.zeros(2, 2))
        tensor([[1., 0.],
                [0., 1.]])
    """
    dtype = check_square("linalg.matrix_exp", A)
    return MetaArray(A._data.shape, dtype)


def _matrix_exp_cpu(A):
    a = A._data
    xp = array_namespace(a)
    if a.size == 0:
        return xp.zeros(a.shape, a.dtype)
    if xp is np:
        import scipy.linalg

        return np.ascontiguousarray(scipy.linalg.expm(a)).astype(a.dtype, copy=False)
    import cupyx.scipy.linalg

    flat = a.reshape(-1, *a.shape[-2:])
    out = xp.stack([cupyx.scipy.linalg.expm(m) for m in flat]) if len(flat) else xp.zeros(flat.shape, a.dtype)
    return out.reshape(a.shape).astype(a.dtype, copy=False)


linalg_matrix_exp = linalg_op("linalg_matrix_exp", _matrix_exp_meta, _matrix_exp_cpu)


def _top_matrix_exp_meta(input):
    """Matrix exponential of ``input`` (``(*, n, n)``): :func:`ember.linalg.matrix_exp` at the top level."""
    return _matrix_exp_meta(input)


matrix_exp = linalg_op("matrix_exp", _top_matrix_exp_meta, _matrix_exp_cpu, category=COMPOSITE, public=True,
                       has_out=False, decomposition=lambda input: _op("linalg_matrix_exp")(input))


# -- matrix_power --------------------------------------------------------------------------------------


def _matrix_power_meta(A, n):
    """``A`` to the integer power ``n`` (the identity for 0, powers of ``inv(A)`` for negative ``n``), batched.

    Repeated squaring: ``O(log |n|)`` matrix products.

    Args:
        A (Tensor): ``(*, m, m)``; any dtype for ``n >= 0``, float or complex for ``n < 0``.
        n (int): the exponent.

    Returns:
        Tensor: ``(*, m, m)``.

    Raises:
        RuntimeError: for non-square input, or ``n < 0`` with a non-float dtype.
        ember.linalg.LinAlgError: for ``n < 0`` and a singular matrix.
    """
    fn = "linalg.matrix_power"
    check_matrix(fn, A)
    rows, cols = A._data.shape[-2:]
    if rows != cols:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are {rows} by {cols} matrices")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"linalg_matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        check_float(fn, A)
    return MetaArray(A._data.shape, A._data.dtype)


def _matrix_power_decomp(A, n):
    _matrix_power_meta(A, n)
    if n == 0:  # the identity, still a function of A (its gradient is zero, as in PyTorch)
        eye = _op("eye")(A.shape[-1], dtype=A.dtype, device=A.device)
        never = _op("zeros")(A.shape, dtype=D.bool, device=A.device)
        return _op("where")(never, A, eye)
    if n < 0:
        A, n = _op("linalg_inv")(A), -n
    result, square = None, A
    while n:  # binary exponentiation: the set bits of n pick the squares to multiply
        if n & 1:
            result = square if result is None else _op("matmul")(result, square)
        n >>= 1
        if n:
            square = _op("matmul")(square, square)
    return result if result is not A else _op("clone")(A)


linalg_matrix_power = linalg_op("linalg_matrix_power", _matrix_power_meta, None, category=COMPOSITE,
                                decomposition=_matrix_power_decomp)


def _top_matrix_power_meta(input, n):
    """``input`` (``(*, m, m)``) to the integer power ``n``: :func:`ember.linalg.matrix_power` at the top level."""
    return _matrix_power_meta(input, n)


matrix_power = linalg_op("matrix_power", _top_matrix_power_meta, None, category=COMPOSITE, public=True,
                         decomposition=lambda input, n: _matrix_power_decomp(input, n))


# -- rank and condition number ---------------------------------------------------------------------------


def _matrix_rank_meta(A, *, atol=None, rtol=None, hermitian=False):
    """Numerical rank: the number of singular values (``|eigenvalues|`` if ``hermitian``) above
    ``max(atol, rtol * s_max)``; default ``rtol = eps * max(m, n)`` (PyTorch's rule, as :func:`pinv`).

    Args:
        A (Tensor): ``(*, m, n)``, float or complex.

    Returns:
        Tensor: ``(*)``, int64. Not differentiable.

    Raises:
        RuntimeError: for fewer than two dims or a non-float dtype.
    """
    fn = "linalg.matrix_rank"
    check_matrix(fn, A)
    check_float(fn, A)
    if hermitian:
        check_square(fn, A)
    return MetaArray(A._data.shape[:-2], np.dtype(np.int64))


def _matrix_rank_decomp(A, *, atol=None, rtol=None, hermitian=False):
    _matrix_rank_meta(A, atol=atol, rtol=rtol, hermitian=hermitian)
    m, n = A.shape[-2:]
    atol, rtol = _pinv_tolerances(atol, rtol, m, n, A._data.dtype)
    if hermitian:
        s = _op("abs")(_op("linalg_eigvalsh")(A))
    else:
        s = _op("linalg_svdvals")(A)
    if s.shape[-1] == 0:
        return _op("zeros")(A.shape[:-2], dtype=D.int64, device=A.device)
    tol = _op("clamp")(_op("amax")(s, -1, True) * rtol, min=atol)
    return _op("sum")(_op("gt")(s, tol), -1)


linalg_matrix_rank = linalg_op("linalg_matrix_rank", _matrix_rank_meta, None, category=COMPOSITE,
                               decomposition=_matrix_rank_decomp)

_COND_ORDS = (None, "fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _cond_meta(A, p=None):
    """Condition number ``||A||_p ||A^{-1}||_p``: the ratio of extreme singular values for ``p`` None, 2 or -2
    (any shape; inf for a singular matrix), matrix norms of ``A`` and ``inv(A)`` for the other orders (square).

    Args:
        A (Tensor): ``(*, m, n)``, float or complex.
        p (None, str or float): ``None``/2, -2, ``"fro"``, ``"nuc"``, 1, -1, inf, -inf.

    Returns:
        Tensor: ``(*)``, real.

    Raises:
        RuntimeError: for an unsupported ``p``, non-square input with a ``p`` that needs the inverse, or a
            non-float dtype.
    """
    fn = "linalg.cond"
    check_matrix(fn, A)
    dtype = check_float(fn, A)
    if p not in _COND_ORDS:
        raise RuntimeError(f"{fn} got an invalid norm type: {p}")
    if p not in (None, 2, -2):
        check_square(fn, A)
    return MetaArray(A._data.shape[:-2], real_dtype(dtype))


def _cond_decomp(A, p=None):
    _cond_meta(A, p)
    if p in (None, 2, -2):
        s = _op("linalg_svdvals")(A)
        big, small = _op("amax")(s, -1), _op("amin")(s, -1)
        return big / small if p != -2 else small / big
    norm = _op("linalg_matrix_norm")
    inverse, info = _op("linalg_inv_ex")(A)
    value = norm(A, p) * norm(inverse, p)
    return _op("where")(info == 0, value, math.inf)


linalg_cond = linalg_op("linalg_cond", _cond_meta, None, category=COMPOSITE, decomposition=_cond_decomp)


# -- products ----------------------------------------------------------------------------------------


def _multi_dot_meta(tensors):
    """The product of two or more matrices in the cheapest order (dynamic programming over the sizes).

    The first tensor may be 1-D (a row vector) and the last 1-D (a column vector); the others are 2-D.

    Args:
        tensors (sequence of Tensor): at least two, of one dtype.

    Returns:
        Tensor: 2-D, or 1-D/0-D when the first and/or last is 1-D.

    Raises:
        RuntimeError: for fewer than two tensors, wrong dims, mismatched sizes or dtypes.
    """
    fn = "multi_dot()"
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"linalg_multi_dot(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    if len(tensors) < 2:
        raise RuntimeError(f"{fn}: expected at least 2 tensors but got {len(tensors)}")
    shapes = [tuple(t._data.shape) for t in tensors]
    first, last = shapes[0], shapes[-1]
    for i, s in enumerate(shapes):
        ok = len(s) == 2 or (len(s) == 1 and i in (0, len(shapes) - 1))
        if not ok:
            if i in (0, len(shapes) - 1):
                raise RuntimeError(f"{fn}: the {'first' if i == 0 else 'last'} tensor must be 1D or 2D but got "
                                   f"{len(s)}D")
            raise RuntimeError(f"{fn}: tensor {i} must be 2D but got {len(s)}D")
    dtype = tensors[0]._data.dtype
    for i, t in enumerate(tensors):
        if t._data.dtype != dtype:
            raise RuntimeError(f"{fn}: all tensors must have be the same dtype but tensor 0 is {dtype} and tensor "
                               f"{i} {t._data.dtype}")
    mats = [(1, first[0]) if len(first) == 1 else first, *shapes[1:-1],
            (last[0], 1) if len(last) == 1 else last]
    for i in range(len(mats) - 1):
        if mats[i][1] != mats[i + 1][0]:
            raise RuntimeError(f"{fn}: tensors {i} and {i + 1} with shapes {list(shapes[i])} and "
                               f"{list(shapes[i + 1])} cannot be multiplied")
    out = (() if len(first) == 1 else (first[0],)) + (() if len(last) == 1 else (last[1],))
    return MetaArray(out, dtype)


def _multi_dot_decomp(tensors):
    _multi_dot_meta(tensors)
    tensors = list(tensors)
    row, col = tensors[0].dim() == 1, tensors[-1].dim() == 1
    if row:
        tensors[0] = _op("unsqueeze")(tensors[0], 0)
    if col:
        tensors[-1] = _op("unsqueeze")(tensors[-1], 1)
    result = _op("chain_matmul")(*tensors) if len(tensors) > 2 else _op("mm")(tensors[0], tensors[1])
    if row:
        result = _op("squeeze")(result, 0)
    if col:
        result = _op("squeeze")(result, -1)
    return result


linalg_multi_dot = linalg_op("linalg_multi_dot", _multi_dot_meta, None, category=COMPOSITE,
                             decomposition=_multi_dot_decomp)


def _householder_meta(A, tau):
    """The product ``H_1 ... H_k`` of Householder reflectors ``H_i = I - tau_i v_i v_i^H`` (the first ``n``
    columns), ``v_i`` the ``i``-th column of ``A`` below the diagonal with a unit on it: LAPACK's
    ``orgqr``/``ungqr`` form of ``Q`` (PyTorch's ``householder_product``/``orgqr``).

    Computed in ember ops (one rank-1 update per reflector), so it is differentiable.

    Args:
        A (Tensor): ``(*, m, n)``, ``m >= n``, float or complex.
        tau (Tensor): ``(*, k)``, ``k <= n``, ``A``'s dtype.

    Returns:
        Tensor: ``(*, m, n)``.

    Raises:
        RuntimeError: for mismatched shapes or dtypes.
    """
    fn = "torch.linalg.householder_product"
    check_matrix(fn, A, "input")
    check_float(fn, A)
    m, n = A._data.shape[-2:]
    k = tau._data.shape[-1] if tau._data.ndim else 0
    if m < n:
        raise RuntimeError(f"{fn}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < k:
        raise RuntimeError(f"{fn}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau._data.ndim != A._data.ndim - 1 or tuple(tau._data.shape[:-1]) != tuple(A._data.shape[:-2]):
        raise RuntimeError(f"{fn}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau._data.shape[:-1])}")
    if tau._data.dtype != A._data.dtype:
        raise RuntimeError(f"{fn}: tau dtype {tau._data.dtype} does not match input dtype {A._data.dtype}")
    return MetaArray(A._data.shape, A._data.dtype)


def _householder_decomp(A, tau):
    _householder_meta(A, tau)
    m, n = A.shape[-2:]
    k = tau.shape[-1]
    eye = _op("eye")(m, n, dtype=A.dtype, device=A.device)
    Q = _op("clone")(_op("expand")(eye, A.shape))
    unit_lower = _op("tril")(A, -1) + _op("eye")(m, n, dtype=A.dtype, device=A.device)
    # Q = H_1 (H_2 (... (H_k I))): apply the reflectors right to left
    for i in reversed(range(k)):
        v = _op("select")(unit_lower, -1, i)
        if i:  # v is zero above row i
            mask = _op("arange")(m, device=A.device) >= i
            v = v * mask
        t = _op("select")(tau, -1, i)
        vhq = _op("matmul")(_op("unsqueeze")(_op("conj")(v), -2), Q)  # (*, 1, n)
        Q = Q - _op("unsqueeze")(_op("unsqueeze")(t, -1), -1) * _op("matmul")(_op("unsqueeze")(v, -1), vhq)
    return Q


linalg_householder_product = linalg_op("linalg_householder_product", _householder_meta, None, category=COMPOSITE,
                                       decomposition=_householder_decomp)


def _orgqr_meta(input, input2):
    """PyTorch's ``torch.orgqr``: :func:`ember.linalg.householder_product`."""
    return _householder_meta(input, input2)


orgqr = linalg_op("orgqr", _orgqr_meta, None, category=COMPOSITE, public=True,
                  decomposition=lambda input, input2: _householder_decomp(input, input2))


# -- tensor inverses and solves -------------------------------------------------------------------------


def _tensorinv_meta(A, ind=2):
    """The inverse of ``A`` as a multilinear map: ``tensordot(tensorinv(A, ind), A, ind)`` is the identity.

    ``A``'s first ``ind`` dims (the output space) and its others (the input space) must have equal products.

    Returns:
        Tensor: shape ``A.shape[ind:] + A.shape[:ind]``.

    Raises:
        RuntimeError: for ``ind <= 0``, unequal products, or (later) a singular reshaped matrix.
    """
    fn = "linalg.tensorinv"
    if not isinstance(ind, numbers.Integral) or ind <= 0:
        raise RuntimeError(f"{fn}: Expected a strictly positive integer for 'ind', but got {ind}")
    shape = tuple(A._data.shape)
    rows, cols = math.prod(shape[:ind]), math.prod(shape[ind:])
    if rows != cols:
        raise RuntimeError(f"{fn}: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    check_float(fn, A)
    return MetaArray(shape[ind:] + shape[:ind], A._data.dtype)


def _tensorinv_decomp(A, ind=2):
    _tensorinv_meta(A, ind)
    shape = tuple(A.shape)
    n = math.prod(shape[:ind])
    inverse = _op("linalg_inv")(_op("reshape")(A, (n, n)))
    return _op("reshape")(inverse, shape[ind:] + shape[:ind])


linalg_tensorinv = linalg_op("linalg_tensorinv", _tensorinv_meta, None, category=COMPOSITE,
                             decomposition=_tensorinv_decomp)


def _tensorsolve_meta(A, B, dims=None):
    """``X`` with ``tensordot(A, X, X.ndim) == B``: the multilinear solve.

    Args:
        A (Tensor): shape ``B.shape + X.shape`` (after moving ``dims`` to the end).
        B (Tensor): ``A``'s dtype.
        dims (tuple of ints, optional): dims of ``A`` moved to the end first.

    Returns:
        Tensor: ``X``, shape ``A.shape[B.ndim:]``.

    Raises:
        RuntimeError: for shapes whose products don't match.
    """
    fn = "linalg.tensorsolve"
    check_float(fn, A)
    a_shape = tuple(A._data.shape)
    if dims is not None:
        dims = [wrap_dim(d, len(a_shape)) for d in dims]
        keep = [i for i in range(len(a_shape)) if i not in dims]
        a_shape = tuple(a_shape[i] for i in keep + dims)
    b_shape = tuple(B._data.shape)
    x_shape = a_shape[len(b_shape):]
    if a_shape[:len(b_shape)] != b_shape or math.prod(x_shape) != math.prod(b_shape):
        raise RuntimeError(f"{fn}: Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {math.prod(x_shape)} != "
                           f"{math.prod(a_shape[:len(b_shape)])}")
    return MetaArray(x_shape, A._data.dtype)


def _tensorsolve_decomp(A, B, dims=None):
    out = _tensorsolve_meta(A, B, dims)
    if dims is not None:
        dims = [wrap_dim(d, A.dim()) for d in dims]
        keep = [i for i in range(A.dim()) if i not in dims]
        A = _op("permute")(A, keep + dims)
    n = B.numel()
    x = _op("linalg_solve")(_op("reshape")(A, (n, n)), _op("reshape")(B, (n,)))
    return _op("reshape")(x, out.shape)


linalg_tensorsolve = linalg_op("linalg_tensorsolve", _tensorsolve_meta, None, category=COMPOSITE,
                               decomposition=_tensorsolve_decomp)


# -- vander, vecdot, cross, diagonal -------------------------------------------------------------------


def _vander_meta(x, *, N=None):
    """Vandermonde matrix ``x[..., i, j] = x[..., i] ** j``, ``j < N`` (default ``x.shape[-1]``), batched.

    Built as a cumulative product (differentiable everywhere, ``x = 0`` included).

    Raises:
        RuntimeError: for a 0-d ``x``, ``N <= 1`` or a bool dtype.
    """
    fn = "linalg.vander"
    if x._data.ndim < 1:
        raise RuntimeError(f"{fn}: x must have at least one dimension.")
    if x._data.dtype == np.bool_:
        raise RuntimeError(f"{fn}: x must not be of bool dtype")
    n = x._data.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError(f"{fn}: N must be greater than 1.")
    return MetaArray(tuple(x._data.shape) + (n,), x._data.dtype)


def _vander_decomp(x, *, N=None):
    out = _vander_meta(x, N=N)
    n = out.shape[-1]
    ones = _op("ones_like")(_op("unsqueeze")(x, -1))
    powers = _op("expand")(_op("unsqueeze")(x, -1), (*x.shape, n - 1))
    return _op("cumprod")(_op("cat")([ones, powers], -1), -1)


linalg_vander = linalg_op("linalg_vander", _vander_meta, None, category=COMPOSITE, decomposition=_vander_decomp)


def _top_vander_meta(x, N=None, increasing=False):
    """PyTorch's ``torch.vander``: powers of the 1-D ``x`` from ``N - 1`` down to 0 (up from 0 if ``increasing``).

    Raises:
        RuntimeError: for ``x`` not 1-D or a negative ``N``.
    """
    if x._data.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._data.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = x._data.dtype
    if dtype.kind in "biu":
        dtype = np.dtype(np.int64)
    return MetaArray((x._data.shape[0], n), dtype)


def _top_vander_decomp(x, N=None, increasing=False):
    out = _top_vander_meta(x, N, increasing)
    n = out.shape[-1]
    if x._data.dtype.kind in "biu":
        x = _op("to")(x, D.int64)
    if n == 0:
        return _op("zeros")((x.shape[0], 0), dtype=x.dtype, device=x.device)
    if n == 1:
        result = _op("ones_like")(_op("unsqueeze")(x, -1))
    else:
        result = _op("linalg_vander")(x, N=n)
    return result if increasing else _op("flip")(result, (-1,))


vander = linalg_op("vander", _top_vander_meta, None, category=COMPOSITE, public=True, has_out=False,
                   decomposition=_top_vander_decomp)


def _vecdot_meta(x, y, *, dim=-1):
    """``sum(conj(x) * y, dim)``: the dot product of vectors along ``dim``, broadcasting the other dims.

    Raises:
        RuntimeError: for shapes that don't broadcast, different sizes along ``dim``, or different dtypes.
    """
    fn = "linalg.vecdot"
    if x._data.dtype != y._data.dtype:
        raise RuntimeError(f"{fn}: Expected x and y to have the same dtype, but found x of type "
                           f"{D.from_numpy_dtype(x._data.dtype).name} and y of type "
                           f"{D.from_numpy_dtype(y._data.dtype).name} instead")
    shape = broadcast_shapes(x._data.shape, y._data.shape)
    d = wrap_dim(dim, len(shape))
    return MetaArray(shape[:d] + shape[d + 1:], x._data.dtype)


def _vecdot_decomp(x, y, *, dim=-1):
    _vecdot_meta(x, y, dim=dim)
    return _op("sum")(_op("conj")(x) * y, dim)


linalg_vecdot = linalg_op("linalg_vecdot", _vecdot_meta, None, category=COMPOSITE, decomposition=_vecdot_decomp)


def _linalg_cross_meta(input, other, *, dim=-1):
    """Cross product of 3-vectors along ``dim`` (default -1), broadcasting: ``ember.cross`` with ``dim``
    required to have size 3 (no deprecated default)."""
    return registry["cross"].meta(input, other, dim)


linalg_cross = linalg_op("linalg_cross", _linalg_cross_meta, None, category=COMPOSITE,
                         decomposition=lambda input, other, *, dim=-1: _op("cross")(input, other, dim))


def _linalg_diagonal_meta(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the matrices of ``A`` (a view): ``ember.diagonal`` with the matrix dims last by default."""
    return registry["diagonal"].meta(A, offset, dim1, dim2)


linalg_diagonal = linalg_op("linalg_diagonal", _linalg_diagonal_meta, None, category=COMPOSITE, has_out=False,
                            decomposition=lambda A, *, offset=0, dim1=-2, dim2=-1: _op("diagonal")(A, offset, dim1,
                                                                                                    dim2))


# -- trapezoid rule ----------------------------------------------------------------------------------


def _trapezoid_args(fn, y, x, dx, dim):
    if x is not None and dx is not None:
        raise RuntimeError(f"{fn}: received both x and dx; give only one")
    ndim = y._data.ndim
    d = wrap_dim(dim, ndim)
    if x is not None and x._data.ndim != 1 and x._data.ndim != ndim:
        raise RuntimeError(f"{fn}: x must be 1-D or have y's number of dims, got {x._data.ndim}-D x and {ndim}-D y")
    if x is not None and x._data.ndim == 1 and x._data.shape[0] != y._data.shape[d]:
        raise RuntimeError(f"{fn}: There must be one `x` value for each sample point")
    return d


def _result_dtype(y, x):
    dtype = y._data.dtype if x is None else np.result_type(y._data.dtype, x._data.dtype)
    return np.dtype(np.float32) if dtype.kind in "biu" else dtype


def _trapezoid_meta(y, x=None, *, dx=None, dim=-1):
    """Integral of ``y`` along ``dim`` by the trapezoid rule, at points ``x`` (1-D, or ``y``'s shape) or with
    spacing ``dx`` (default 1).

    Returns:
        Tensor: ``y``'s shape without ``dim``.

    Raises:
        RuntimeError: for both ``x`` and ``dx``, or an ``x`` that does not fit ``y``.
    """
    d = _trapezoid_args("trapezoid", y, x, dx, dim)
    shape = tuple(y._data.shape)
    return MetaArray(shape[:d] + shape[d + 1:], _result_dtype(y, x))


def _trapezoid_parts(y, x, dx, d):
    n = y.shape[d]
    if y._data.dtype.kind in "biu":
        y = _op("to")(y, D.float32)
    left, right = _op("narrow")(y, d, 0, max(n - 1, 0)), _op("narrow")(y, d, min(1, n), max(n - 1, 0))
    mean = (left + right) / 2
    if x is None:
        return mean * (1.0 if dx is None else dx)
    if x.dim() == 1:
        shape = [1] * y.dim()
        shape[d] = n
        x = _op("reshape")(x, shape)
    widths = _op("diff")(x, 1, d)
    return mean * widths


def _trapezoid_decomp(y, x=None, *, dx=None, dim=-1):
    d = _trapezoid_args("trapezoid", y, x, dx, dim)
    return _op("sum")(_trapezoid_parts(y, x, dx, d), d)


trapezoid = linalg_op("trapezoid", _trapezoid_meta, None, category=COMPOSITE, public=True, has_out=False,
                      decomposition=_trapezoid_decomp)


def _trapz_meta(y, x=None, *, dx=None, dim=-1):
    """PyTorch's older name of :func:`trapezoid` (same arguments)."""
    return _trapezoid_meta(y, x, dx=dx, dim=dim)


trapz = linalg_op("trapz", _trapz_meta, None, category=COMPOSITE, public=True, has_out=False,
                  decomposition=_trapezoid_decomp)


def _cumulative_trapezoid_meta(y, x=None, *, dx=None, dim=-1):
    """Running trapezoid-rule integral of ``y`` along ``dim``: one value fewer than ``y`` has there.

    Raises:
        RuntimeError: as :func:`trapezoid`.
    """
    d = _trapezoid_args("cumulative_trapezoid", y, x, dx, dim)
    shape = list(y._data.shape)
    shape[d] = max(shape[d] - 1, 0)
    return MetaArray(tuple(shape), _result_dtype(y, x))


def _cumulative_trapezoid_decomp(y, x=None, *, dx=None, dim=-1):
    d = _trapezoid_args("cumulative_trapezoid", y, x, dx, dim)
    return _op("cumsum")(_trapezoid_parts(y, x, dx, d), d)


cumulative_trapezoid = linalg_op("cumulative_trapezoid", _cumulative_trapezoid_meta, None, category=COMPOSITE,
                                 public=True, has_out=False, decomposition=_cumulative_trapezoid_decomp)
