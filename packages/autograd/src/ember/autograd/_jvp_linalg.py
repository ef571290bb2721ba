"""Forward-mode (jvp) rules for the linear-algebra ops and ``cumprod``: the matrix-calculus pushforwards.

The formulas are the standard forward-mode results (M. B. Giles, "An extended collection of matrix
derivative results for forward and reverse mode algorithmic differentiation", 2008; for the spectral
and QR factorisations also Walter and Lehmann, "Algorithmic differentiation of linear algebra
functions", 2012). Each one is the exact pushforward whose adjoint is the op's backward formula in
``derivatives/linalg_*.py``, with the same conventions, so ``jvp`` and the double-vjp identity agree:

* ops that read one triangle of a Hermitian input (``eigh``, ``eigvalsh``, ``cholesky``) see the
  Hermitian part of the tangent, as their gradients are Hermitian;
* singular vectors and eigenvectors are fixed up to a phase per column: the tangent keeps
  ``Im diag(U^H dU) = Im diag(V^H dV) = 0`` except ``U``'s, which carries ``i Im diag(U^H dA V) / S``
  (``svd``); ``Im diag(V^H dV) = 0`` (``eigh``); ``Re diag(V^H dV) = 0`` (``eig``, unit-norm columns);
* ``svd(full_matrices=True)`` of a non-square matrix: the extra columns of ``U`` (rows of ``Vh``) are
  not determined by ``A`` and get a zero tangent, as they get no gradient.

Rules compute what depends on the primal once (an inverse, an adjugate, a factorisation) and then only
products with the tangent, so ``jacfwd`` (which batches the tangents) pays for the factorisation once.
They are registered by :func:`fill` from :mod:`ember.autograd._jvp_rules`.
"""

from __future__ import annotations

import ember
from ember._shape_only import ShapeOnlyArray

from .derivatives._helpers import mH as _mH

#: filled by :func:`fill` (the _jvp_rules module imports this one, so no import cycle at load time)
FALLBACK = None


def _re(t):
    return t.real if t.is_complex() else t


def _diag(t):
    return t.diagonal(0, -2, -1)


def _first(result):
    return result[0] if isinstance(result, tuple) else result


def _like_result(result, tangent):
    """``(tangent, None, ...)`` for an op returning a tuple (the ``_ex`` variants), else ``tangent``."""
    return (tangent, *([None] * (len(result) - 1))) if isinstance(result, tuple) else tangent


def _hermitian_part(t):
    return (t + _mH(t)) * 0.5


def _off_diagonal_quotient(numerator, values):
    """``numerator_ij / (values_j - values_i)`` off the diagonal, zero on it (the spectral gaps)."""
    gaps = values.unsqueeze(-2) - values.unsqueeze(-1)
    eye = ember.eye(values.shape[-1], dtype=ember.bool, device=values.device)
    gaps = ember.where(eye, ember.ones((), dtype=gaps.dtype, device=gaps.device), gaps)
    quotient = numerator / gaps.to(numerator.dtype)
    return ember.where(eye, ember.zeros((), dtype=quotient.dtype, device=quotient.device), quotient)


# -- determinants, inverse, solves ---------------------------------------------------------------------


def _values_readable(t):
    """False for a tensor whose values no kernel may read (a vmap sample): no Python branch on them then."""
    return not isinstance(t._data, ShapeOnlyArray)


def _det(op, primals, tangents, result):
    """``d det A = tr(adj(A) dA)``: ``adj(A)^H`` as the backward forms it (``conj(det) A^-H`` by one solve, or
    through the SVD where ``A`` is singular or nearly so, exact at any rank), then a contraction per tangent.

    Inside vmap (values that cannot be read, so no branch on them) both forms are computed and the
    choice is made per matrix by ``where``.
    """
    from .derivatives.linalg_det import _losing_precision, adjugate_h, det_backward

    (a,), _ = primals
    t = tangents[0][0]
    if a.shape[-1] == 0:
        return ember.zeros_like(result)
    if _values_readable(a):
        adj_h = det_backward(ember.ones_like(result), a, result)
    else:
        eye = ember.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(a.shape)
        inverse_h, info = ember.linalg.solve_ex(_mH(a), eye)
        through_inverse = result.conj().unsqueeze(-1).unsqueeze(-1) * inverse_h if a.is_complex() else \
            result.unsqueeze(-1).unsqueeze(-1) * inverse_h
        bad = _losing_precision(a, inverse_h, info).unsqueeze(-1).unsqueeze(-1)
        adj_h = ember.where(bad, adjugate_h(a), through_inverse)
    return (adj_h.conj() * t).sum((-2, -1)) if a.is_complex() else (adj_h * t).sum((-2, -1))


def _solve(op, primals, tangents, result):
    """``linalg.solve`` (and ``solve_ex``), ``A X = B`` (``X A = B`` on the right): ``dX = A^-1 (dB - dA X)``.

    A rule of the composite's own (not its decomposition, which reads ``info`` to raise for a singular
    matrix, a read that vmap refuses). ``A^-1`` is formed once and each tangent costs one product.
    """
    (a, b), kwargs = primals
    t_a, t_b = tangents[0]
    left = kwargs.get("left", True)
    x = _first(result)
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    if vector:
        x = x.unsqueeze(-1) if left else x.unsqueeze(-2)
        t_b = None if t_b is None else (t_b.unsqueeze(-1) if left else t_b.unsqueeze(-2))
    rhs = t_b
    if t_a is not None:
        term = -(t_a @ x) if left else -(x @ t_a)
        rhs = term if rhs is None else rhs + term
    # A^-1 once (the composite's kernel keeps no factorisation), then one product per tangent: under jacfwd
    # the tangents are a vmap batch, and a product with an unbatched matrix is one GEMM where a solve would
    # factor or substitute per sample
    inverse = ember.linalg.inv(a)
    d_x = inverse @ rhs if left else rhs @ inverse
    if vector:
        d_x = d_x.squeeze(-1) if left else d_x.squeeze(-2)
    return _like_result(result, d_x)


def _trace_inverse_times(a, t):
    """``tr(A^-1 dA)`` with ``A^-1`` formed once from the primal (a contraction per tangent)."""
    inverse = ember.linalg.inv(a)
    return (inverse.mT * t).sum((-2, -1))


def _slogdet(op, primals, tangents, result):
    """``d log|det A| = Re tr(A^-1 dA)``; a complex determinant's phase moves by ``i Im tr(A^-1 dA)``."""
    (a,), _ = primals
    sign, logabsdet = result
    if a.shape[-1] == 0:
        return ember.zeros_like(sign), ember.zeros_like(logabsdet)
    change = _trace_inverse_times(a, tangents[0][0])
    if not a.is_complex():
        return ember.zeros_like(sign), change
    return sign * (1j * change.imag), change.real


def _linalg_inv(op, primals, tangents, result):
    """``d(A^-1) = -A^-1 dA A^-1``."""
    inverse = _first(result)
    return _like_result(result, -(inverse @ tangents[0][0] @ inverse))


def _cholesky(op, primals, tangents, result):
    """``dL = L Phi(L^-1 sym(dA) L^-H)``, ``Phi`` the lower triangle with the diagonal halved (``dU = dL^H``
    when ``upper``); ``sym`` the Hermitian part, as the backward's gradient is Hermitian."""
    (a,), kwargs = primals
    upper = kwargs.get("upper", False)
    factor = _first(result)
    lower = _mH(factor) if upper else factor
    t = _hermitian_part(tangents[0][0])
    left = ember.linalg.solve_triangular(lower, t, upper=False)  # L^-1 dA
    middle = ember.linalg.solve_triangular(lower, _mH(left), upper=False)  # L^-1 dA L^-H (Hermitian)
    phi = middle.tril() - 0.5 * ember.diag_embed(_diag(middle))
    out = lower @ phi
    return _like_result(result, _mH(out) if upper else out)


def _lu_apply_inverse(p, lower, upper, rhs, left, adjoint):
    """``A^-1 R`` (``A^-H R``, ``R A^-1``, ``R A^-H``) for ``A = P L U`` by two triangular solves.

    Not ``lu_solve`` itself: its pivots have a rank of their own, and vmap runs such a call per sample
    (``jacfwd`` batches ``R`` only); triangular solves batch as one call.
    """
    solve = ember.linalg.solve_triangular
    if left and not adjoint:  # U^-1 L^-1 P^T R
        return solve(upper, solve(lower, p.mT @ rhs, upper=False, unitriangular=True), upper=True)
    if left:  # A^H = U^H L^H P^T: P L^-H U^-H R
        return p @ solve(_mH(lower), solve(_mH(upper), rhs, upper=False), upper=True, unitriangular=True)
    if not adjoint:  # R U^-1 L^-1 P^T
        inner = solve(upper, rhs, upper=True, left=False)
        return solve(lower, inner, upper=False, left=False, unitriangular=True) @ p.mT
    inner = solve(_mH(lower), rhs @ p, upper=True, left=False, unitriangular=True)  # R P L^-H U^-H
    return solve(_mH(upper), inner, upper=False, left=False)


def _lu_solve(op, primals, tangents, result):
    """``X = A^-1 B`` (or ``A^-H B``, ``B A^-1``, ``B A^-H``) with ``A = P L U`` from the compact ``LU``:
    ``dX = A^-1 (dB - dA X)`` on the same side, ``dA = P (dL U + L dU)`` from ``LU``'s tangent."""
    (lu, pivots, b), kwargs = primals
    t_lu, _, t_b = tangents[0]
    left, adjoint = kwargs.get("left", True), kwargs.get("adjoint", False)
    x = result
    p, lower, upper = ember.lu_unpack(lu, pivots)
    rhs = t_b
    if t_lu is not None:
        d_a = p @ (t_lu.tril(-1) @ upper + lower @ t_lu.triu())
        if adjoint:
            d_a = _mH(d_a)
        term = -(d_a @ x) if left else -(x @ d_a)
        rhs = term if rhs is None else rhs + term
    return _lu_apply_inverse(p, lower, upper, rhs.expand_as(x), left, adjoint)


def _pinv_tangent(a, p, d_a):
    """Golub and Pereyra (1973): ``dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P``."""
    p_h, d_a_h = _mH(p), _mH(d_a)
    out = -(p @ d_a @ p)
    out = out + (p @ p_h) @ (d_a_h - (d_a_h @ a) @ p)
    return out + (d_a_h - (p @ a) @ d_a_h) @ (p_h @ p)


def _pinv(op, primals, tangents, result):
    (a,), _ = primals
    return _pinv_tangent(a, result, tangents[0][0])


def _lstsq(op, primals, tangents, result):
    """``X = pinv(A) B`` (the backward's model): ``dX = dpinv(A) B + pinv(A) dB``; the residuals
    ``||A x_j - b_j||^2`` move by ``2 Re(e_j^H (dA x_j - db_j))`` at the optimum (``A^H e_j = 0``)."""
    (a, b, rcond), kwargs = primals
    t_a, t_b = tangents[0][0], tangents[0][1]
    x, residuals = result[0], result[1]
    vector = b.ndim == a.ndim - 1
    if vector:
        b, x = b.unsqueeze(-1), x.unsqueeze(-1)
        t_b = None if t_b is None else t_b.unsqueeze(-1)
    p = ember.linalg.pinv(a) if rcond is None else ember.linalg.pinv(a, rtol=rcond)
    d_x, moved = None, None
    if t_a is not None:
        d_x = _pinv_tangent(a, p, t_a) @ b
        moved = t_a @ x
    if t_b is not None:
        d_x = p @ t_b if d_x is None else d_x + p @ t_b
        moved = -t_b if moved is None else moved - t_b
    d_res = None
    if residuals.numel():
        error = a @ x - b
        d_res = 2 * _re(error.conj() * moved if error.is_complex() else error * moved).sum(-2)
        d_res = d_res.reshape(residuals.shape) if vector else d_res
    d_x = d_x.expand(*d_x.shape[:-2], *x.shape[-2:])
    return (d_x.squeeze(-1) if vector else d_x), d_res, None, None


def _matrix_exp(op, primals, tangents, result):
    """``d exp(A)[E]`` is the upper-right block of ``exp([[A, E], [0, A]])`` (Najfeld and Havel, 1995)."""
    (a,), _ = primals
    t = tangents[0][0]
    n = a.shape[-1]
    top = ember.cat([a.expand_as(t), t], -1)
    bottom = ember.cat([ember.zeros_like(t), a.expand_as(t)], -1)
    return op(ember.cat([top, bottom], -2))[..., :n, n:]


# -- spectral decompositions ------------------------------------------------------------------------------


def _eigh(op, primals, tangents, result):
    """``A = V diag(L) V^H``, ``dP = V^H sym(dA) V``: ``dL = Re diag(dP)``, ``dV = V (dP_ij / (L_j - L_i))``
    off the diagonal (``diag(V^H dV) = 0``)."""
    values, vectors = result
    d_p = _mH(vectors) @ _hermitian_part(tangents[0][0]) @ vectors
    return _re(_diag(d_p)), vectors @ _off_diagonal_quotient(d_p, values)


def _eigvalsh(op, primals, tangents, result):
    """``dL_i = Re(v_i^H sym(dA) v_i)``, the eigenvectors from one ``eigh`` of the primal."""
    (a, uplo), _ = primals
    vectors = ember.linalg.eigh(a, uplo)[1]
    moved = _hermitian_part(tangents[0][0]) @ vectors
    return _re((vectors.conj() * moved if vectors.is_complex() else vectors * moved).sum(-2))


def _eig(op, primals, tangents, result):
    """``A V = V diag(L)``, ``dP = V^-1 dA V``: ``dL = diag(dP)``; ``dV = V C`` with ``C_ij = dP_ij / (L_j - L_i)``
    off the diagonal, less ``V`` times ``Re diag(V^H V C)`` so that the columns keep unit norm."""
    values, vectors = result
    d_a = tangents[0][0].to(vectors.dtype)
    d_p = ember.linalg.solve(vectors, d_a @ vectors)
    moved = vectors @ _off_diagonal_quotient(d_p, values)
    keep_norm = (vectors.conj() * moved).sum(-2).real.to(vectors.dtype)
    return _diag(d_p), moved - vectors * keep_norm.unsqueeze(-2)


def _eigvals(op, primals, tangents, result):
    """``dL_i = (V^-1 dA V)_ii``: ``V`` and ``V^-1`` from the primal once, one product per tangent."""
    (a,), _ = primals
    vectors = ember.linalg.eig(a)[1]
    inverse = ember.linalg.inv(vectors)
    d_a = tangents[0][0].to(vectors.dtype)
    return (inverse.mT * (d_a @ vectors)).sum(-2)


def _svd(op, primals, tangents, result):
    """Thin SVD ``A = U S V^H`` (``k = min(m, n)``), ``dP = U^H dA V``, ``E_ij = s_j^2 - s_i^2``:
    ``dS = Re diag(dP)``, ``dU = U (dP S + S dP^H) / E + (I - U U^H) dA V S^-1`` (plus ``i Im diag(dP) / S`` on
    the diagonal for complex ``A``), ``dV = V (S dP + dP^H S) / E + (I - V V^H) dA^H U S^-1``."""
    (a, full_matrices), _ = primals
    u, s, vh = result
    t = tangents[0][0]
    m, n = a.shape[-2], a.shape[-1]
    k = s.shape[-1]
    if k == 0:
        return ember.zeros_like(u), ember.zeros_like(s), ember.zeros_like(vh)
    if full_matrices and m != n:
        u, vh = u[..., :, :k], vh[..., :k, :]
    v = _mH(vh)
    d_p = _mH(u) @ t @ v
    d_s = _re(_diag(d_p))
    s_c = s.to(a.dtype)
    s_row, s_col = s_c.unsqueeze(-2), s_c.unsqueeze(-1)
    d_p_h = _mH(d_p)
    omega_u = _off_diagonal_quotient(d_p * s_row + s_col * d_p_h, s * s)
    omega_v = _off_diagonal_quotient(s_col * d_p + d_p_h * s_row, s * s)
    if a.is_complex():
        omega_u = omega_u + ember.diag_embed((1j * _diag(d_p).imag / s).to(a.dtype))
    d_u, d_v = u @ omega_u, v @ omega_v
    if m > k:  # the part of dA V outside U's column space
        d_u = d_u + (t @ v - u @ d_p) / s_row
    if n > k:
        d_v = d_v + (_mH(t) @ u - v @ d_p_h) / s_row
    d_vh = _mH(d_v)
    if full_matrices and m != n:  # the extra vectors are not determined by A: no tangent, as no gradient
        pad = ember.nn.functional.pad
        d_u, d_vh = pad(d_u, (0, m - k)), pad(d_vh, (0, 0, 0, n - k))
    return d_u, d_s, d_vh


def _svdvals(op, primals, tangents, result):
    """``ds_i = Re(u_i^H dA v_i)``, the singular vectors from one thin SVD of the primal."""
    (a,), _ = primals
    u, _, vh = ember.linalg.svd(a, full_matrices=False)
    moved = tangents[0][0] @ _mH(vh)
    return _re((u.conj() * moved if u.is_complex() else u * moved).sum(-2))


# -- QR and LU ---------------------------------------------------------------------------------------------


def _qr_square_or_tall(q, r, d_a):
    """``A = Q R`` (``m >= n``, reduced): ``C = Q^H dA R^-1``, ``Omega = Q^H dQ`` the skew-Hermitian matrix
    with ``C``'s strict lower triangle (and ``i Im diag(C)``: ``R``'s diagonal stays real), ``dR = (C - Omega) R``,
    ``dQ = dA R^-1 - Q (C - Omega)``."""
    d_a_r = ember.linalg.solve_triangular(r, d_a, upper=True, left=False)  # dA R^-1
    c = _mH(q) @ d_a_r
    lower = c.tril(-1)
    omega = lower - _mH(lower)
    if c.is_complex():
        omega = omega + ember.diag_embed(1j * _diag(c).imag)
    upper = c - omega  # dR R^-1
    return d_a_r - q @ upper, upper @ r


def _qr(op, primals, tangents, result):
    """Wide ``A = Q [R1 R2]``: ``(Q, R1)`` from the square block, ``dR2 = dQ^H A2 + Q^H dA2``."""
    (a, mode), _ = primals
    m, n = a.shape[-2], a.shape[-1]
    if mode == "r" or (mode == "complete" and m > n):
        return FALLBACK  # not differentiable: the double-vjp path raises PyTorch's error
    q, r = result
    t = tangents[0][0]
    if m >= n:
        return _qr_square_or_tall(q, r, t)
    d_q, d_r1 = _qr_square_or_tall(q, r[..., :, :m], t[..., :, :m])
    d_r2 = _mH(d_q) @ a[..., :, m:] + _mH(q) @ t[..., :, m:]
    return d_q, ember.cat([d_r1, d_r2], -1)


def _lu_square(lower, upper, d_a):
    """``A' = L U`` square (``A' = P^T A``): ``F = L^-1 dA' U^-1``, ``dL = L tril(F, -1)``, ``dU = triu(F) U``."""
    left = ember.linalg.solve_triangular(lower, d_a, upper=False, unitriangular=True)
    f = ember.linalg.solve_triangular(upper, left, upper=True, left=False)
    return lower @ f.tril(-1), f.triu() @ upper


def _lu_tangents(p, lower, upper, d_a):
    """``(dL, dU)`` of ``A = P L U`` for any shape: the square block, then ``U``'s extra columns (wide)
    ``dU2 = L^-1 (dA'2 - dL U2)`` or ``L``'s extra rows (tall) ``dL2 = (dA'2 - L2 dU) U^-1``."""
    m, n = lower.shape[-2], upper.shape[-1]
    d_a = p.mT @ d_a
    if m == n:
        return _lu_square(lower, upper, d_a)
    if m < n:
        d_l, d_u1 = _lu_square(lower, upper[..., :, :m], d_a[..., :, :m])
        rest = d_a[..., :, m:] - d_l @ upper[..., :, m:]
        d_u2 = ember.linalg.solve_triangular(lower, rest, upper=False, unitriangular=True)
        return d_l, ember.cat([d_u1, d_u2], -1)
    d_l1, d_u = _lu_square(lower[..., :n, :], upper, d_a[..., :n, :])
    rest = d_a[..., n:, :] - lower[..., n:, :] @ d_u
    d_l2 = ember.linalg.solve_triangular(upper, rest, upper=True, left=False)
    return ember.cat([d_l1, d_l2], -2), d_u


def _linalg_lu(op, primals, tangents, result):
    p, lower, upper = result
    if lower.numel() == 0 or upper.numel() == 0:
        return ember.zeros_like(p), ember.zeros_like(lower), ember.zeros_like(upper)
    d_l, d_u = _lu_tangents(p, lower, upper, tangents[0][0])
    return ember.zeros_like(p), d_l, d_u


def _lu_factor(op, primals, tangents, result):
    """The compact ``LU`` moves by ``tril(dL, -1) + triu(dU)`` (each padded to ``A``'s shape)."""
    lu, pivots = result[0], result[1]
    if lu.numel() == 0:
        return (ember.zeros_like(lu), *([None] * (len(result) - 1)))
    p, lower, upper = ember.lu_unpack(lu, pivots)
    d_l, d_u = _lu_tangents(p, lower, upper, tangents[0][0])
    m, n = lu.shape[-2], lu.shape[-1]
    pad = ember.nn.functional.pad
    d_lu = pad(d_l.tril(-1), (0, n - d_l.shape[-1])) + pad(d_u.triu(), (0, 0, 0, m - d_u.shape[-2]))
    return (d_lu, *([None] * (len(result) - 1)))


def _lu_unpack(op, primals, tangents, result):
    """Linear in ``LU_data``: ``dL`` its strict lower part, ``dU`` its upper part (``P`` is constant)."""
    (lu, pivots, unpack_data, _), _ = primals
    p, lower, upper = result
    t = tangents[0][0]
    if not unpack_data or t is None:
        return ember.zeros_like(p), ember.zeros_like(lower), ember.zeros_like(upper)
    k = min(lu.shape[-2], lu.shape[-1])
    return ember.zeros_like(p), t[..., :, :k].tril(-1), t[..., :k, :].triu()


# -- cumprod --------------------------------------------------------------------------------------------------


def _cumprod(op, primals, tangents, result):
    """``dy_i = sum_{j <= i} t_j prod_{k <= i, k != j} x_k``, exact with zeros in O(n), no branch on the data.

    Before the first zero of a slice, ``dy_i = y_i sum_{j <= i} t_j / x_j``; from the first zero ``z`` on,
    every term but ``j = z`` holds ``x_z = 0``, so ``dy_i = t_z prod_{k < z} x_k prod_{z < k <= i} x_k``
    (zero again after a second zero).
    """
    (x, dim), kwargs = primals
    t = tangents[0][0]
    if kwargs.get("dtype") is not None and kwargs["dtype"] != x.dtype:
        return FALLBACK
    if x.ndim == 0 or x.numel() == 0:
        return t.clone()
    d = dim % x.ndim
    is_zero = x == 0
    zeros_so_far = is_zero.cumsum(d)
    before = zeros_so_far == 0
    head = result * (t / ember.where(before, x, ember.ones_like(x))).cumsum(d)
    first_zero = is_zero & (zeros_so_far == 1)
    t_at_zero = ember.where(first_zero, t, ember.zeros_like(t)).sum(d, keepdim=True)
    prefix = ember.where(before, x, ember.ones_like(x)).prod(d, keepdim=True)
    after = ember.where(before | first_zero, ember.ones_like(x), x).cumprod(d)
    return ember.where(before, head, t_at_zero * prefix * after)


def fill(register_jvp, fallback):
    """Register the rules above (called once by :mod:`ember.autograd._jvp_rules`)."""
    global FALLBACK
    FALLBACK = fallback
    register_jvp(["linalg_det"], _det)
    register_jvp(["linalg_slogdet"], _slogdet)
    register_jvp(["linalg_inv", "linalg_inv_ex"], _linalg_inv)
    register_jvp(["linalg_cholesky", "linalg_cholesky_ex"], _cholesky)
    register_jvp(["linalg_lu_solve"], _lu_solve)
    register_jvp(["linalg_solve", "linalg_solve_ex"], _solve)
    register_jvp(["linalg_pinv"], _pinv)
    register_jvp(["_linalg_lstsq"], _lstsq)
    register_jvp(["linalg_matrix_exp"], _matrix_exp)
    register_jvp(["linalg_eigh"], _eigh)
    register_jvp(["linalg_eigvalsh"], _eigvalsh)
    register_jvp(["linalg_eig"], _eig)
    register_jvp(["linalg_eigvals"], _eigvals)
    register_jvp(["linalg_svd"], _svd)
    register_jvp(["linalg_svdvals"], _svdvals)
    register_jvp(["linalg_qr"], _qr)
    register_jvp(["_linalg_lu"], _linalg_lu)
    register_jvp(["linalg_lu_factor", "linalg_lu_factor_ex"], _lu_factor)
    register_jvp(["_lu_unpack"], _lu_unpack)
    register_jvp(["cumprod"], _cumprod)
