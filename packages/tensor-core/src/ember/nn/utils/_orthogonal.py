"""``orthogonal``: a parametrization whose value is always an orthogonal (or unitary) matrix.

A free parameter ``X`` of the weight's shape ``(*, n, k)`` is mapped onto matrices with orthonormal
columns (rows when ``n < k``) by one of three maps, each built from ember ops so that autograd
differentiates through it:

- ``"matrix_exp"``: the exponential of the skew-Hermitian ``A = L - L^H`` (``L`` the lower triangle
  of ``X``, zero-padded to ``n x n``), by scaling and squaring of a Taylor polynomial;
- ``"cayley"``: the Cayley transform ``(I - A/2)^{-1} (I + A/2)`` of the same ``A``;
- ``"householder"``: the product of the ``k`` Householder reflections whose vectors are the strictly
  lower triangle of ``X`` (as LAPACK's ``geqrf`` stores them), each column scaled by the sign stored
  on the diagonal of ``X`` (real weights only).

With ``use_trivialization`` (the default) the parametrization keeps a buffer ``base``, an ``n x n``
orthogonal matrix, and returns ``base @ map(X)``: assigning an orthogonal matrix ``Q`` stores ``Q``
(completed to ``n x n``) as ``base`` and resets ``X`` to ``-I``, which every map sends to ``I``.

References:
    Lezcano-Casado & Martinez-Rubio, "Cheap Orthogonal Constraints in Neural Networks: A Simple
    Parametrization of the Orthogonal and Unitary Group", ICML 2019, https://arxiv.org/abs/1901.08428
    (the trivialization); Lezcano-Casado, "Trivializations for Gradient-Based Optimization on
    Manifolds", NeurIPS 2019, https://arxiv.org/abs/1909.09501; Higham, "The Scaling and Squaring
    Method for the Matrix Exponential Revisited", SIAM J. Matrix Anal. Appl. 26(4), 2005.
"""

from __future__ import annotations

import math

import ember

from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal"]

_MAPS = ("matrix_exp", "cayley", "householder")

# Taylor terms after scaling ||A|| below 1/2: the remainder 0.5**19 / 19! is below float64's epsilon.
_TAYLOR_TERMS = 18


def _adjoint(x):
    """The conjugate transpose of the last two dims (the transpose for real tensors)."""
    xt = x.transpose(-2, -1)
    return xt.conj() if xt.is_complex() else xt


def _eye_like(x, n):
    """The ``n x n`` identity in ``x``'s dtype and device (broadcasts against batches)."""
    return ember.eye(n, dtype=x.dtype, device=x.device)


def _matrix_exp(a):
    """``exp(a)`` of square matrices ``(*, n, n)``: scale by ``2**-s`` until the largest column
    1-norm is at most 1/2, sum the Taylor series (Horner form), square ``s`` times."""
    n = a.shape[-1]
    norm = float(a.detach().abs().sum(-2).max()) if a.numel() else 0.0
    squarings = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
    scaled = a / (2.0**squarings)
    identity = _eye_like(a, n)
    result = identity
    for j in range(_TAYLOR_TERMS, 0, -1):  # I + S/1 (I + S/2 (I + ... (I + S/m)))
        result = identity + (scaled @ result) / j
    for _ in range(squarings):
        result = result @ result
    return result


def _solve_positive_real(m, b):
    """``m^{-1} b`` for ``m`` ``(*, n, n)`` whose Hermitian part is positive definite, such as
    ``I - A/2`` with ``A`` skew-Hermitian: Gauss-Jordan elimination without pivoting, which is
    stable for such matrices (every pivot has a positive real part)."""
    n = m.shape[-1]
    rows_m = list(m.unbind(-2))
    rows_b = list(b.unbind(-2))
    for j in range(n):
        pivot = rows_m[j][..., j : j + 1]
        rows_m[j] = rows_m[j] / pivot
        rows_b[j] = rows_b[j] / pivot
        for i in range(n):
            if i != j:
                factor = rows_m[i][..., j : j + 1]
                rows_m[i] = rows_m[i] - factor * rows_m[j]
                rows_b[i] = rows_b[i] - factor * rows_b[j]
    return ember.stack(rows_b, dim=-2)


def _householder_product(v, tau):
    """The first ``k`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T``, where ``v_i`` is column
    ``i`` of ``v`` ``(*, n, k)`` below the diagonal with an implicit 1 on it (LAPACK's ``orgqr``)."""
    n, k = v.shape[-2], v.shape[-1]
    q = _eye_like(v, n).expand(*v.shape[:-2], n, n)
    unit = _eye_like(v, n)
    for i in reversed(range(k)):  # apply from the right end so each step is one rank-1 update of q
        vi = _reflector(v, unit, i)
        # q <- H_i q = q - tau_i v_i (v_i^T q)
        q = q - tau[..., i : i + 1, None] * vi.unsqueeze(-1) * (vi.unsqueeze(-2) @ q)
    return q[..., :k]


def _reflector(v, unit, i):
    """Column ``i`` of ``v`` with zeros above row ``i`` and 1 on row ``i``."""
    below = v[..., :, i] * (ember.arange(v.shape[-2], device=v.device) > i).to(v.dtype)
    return below + unit[i]


def _orthonormalize(a):
    """The ``Q`` of ``a = QR`` with ``R``'s diagonal real positive (unique for full column rank),
    by Gram-Schmidt run twice ("twice is enough" for orthogonality to working precision)."""
    columns = []
    for j in range(a.shape[-1]):
        c = a[..., j]
        for _ in range(2):
            for q in columns:
                q_conj = q.conj() if q.is_complex() else q
                c = c - (q_conj * c).sum(-1, keepdim=True) * q
        columns.append(c / c.abs().square().sum(-1, keepdim=True).sqrt())
    return ember.stack(columns, dim=-1)


def _is_orthogonal(q):
    """Whether ``q^H q`` is the identity within ``10 n eps``."""
    n = q.shape[-1]
    atol = 10 * n * ember.finfo(q.dtype).eps
    return bool(ember.allclose(_adjoint(q) @ q, _eye_like(q, n), atol=atol))


def _householder_vectors(q):
    """``X`` with ``householder(X) == orthonormalized q``: Householder QR of ``q`` ``(*, n, k)``, ``n >= k``,
    storing each reflector (first entry scaled to 1) below the diagonal, the sign of ``R``'s
    diagonal on it (so that the reconstruction has a positive ``R`` diagonal) and ``R`` above it."""
    n, k = q.shape[-2], q.shape[-1]
    r = q.clone()
    out = ember.zeros_like(q)
    rows = ember.arange(n, device=q.device)
    for j in range(k):
        x = r[..., :, j] * (rows >= j).to(q.dtype)  # the column from row j down
        x0 = x[..., j]
        sign = ember.where(x0 >= 0, 1.0, -1.0).to(q.dtype)
        beta = -sign * x.norm(dim=-1)  # H x = beta e_j; beta's sign opposite to x0 avoids cancellation
        e_j = (rows == j).to(q.dtype)
        v = (x - beta.unsqueeze(-1) * e_j) / (x0 - beta).unsqueeze(-1)  # v_j = 1
        tau = 2.0 / (v * v).sum(-1)
        r = r - tau[..., None, None] * v.unsqueeze(-1) * (v.unsqueeze(-2) @ r)
        out[..., :, j] = v * (rows > j).to(q.dtype) + ember.sign(beta).unsqueeze(-1) * e_j
    # R's strict upper triangle too (the map ignores it), so X is what LAPACK's geqrf would store.
    return out + r.triu(1)


class _Orthogonal(Module):
    """The parametrization module of :func:`orthogonal` (``forward(X) -> Q``, ``right_inverse(Q) -> X``)."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        wide = n < k
        if wide:  # work on the tall transpose
            X = X.transpose(-2, -1)
            n, k = k, n
        if self.orthogonal_map == "householder":
            reflectors = X.tril(-1)
            tau = 2.0 / (1.0 + (reflectors * reflectors).sum(-2))
            # The diagonal holds +-1 column signs; the cast keeps it out of the gradient.
            signs = X.diagonal(dim1=-2, dim2=-1).detach().to(ember.int32).to(X.dtype)
            Q = _householder_product(reflectors, tau) * signs.unsqueeze(-2)
        else:
            lower = X.tril()
            if n != k:
                lower = ember.cat([lower, lower.new_zeros(*lower.shape[:-1], n - k)], dim=-1)
            A = lower - _adjoint(lower)  # skew-Hermitian: exp(A) and cayley(A) are unitary
            if self.orthogonal_map == "matrix_exp":
                Q = _matrix_exp(A)
            else:
                identity = _eye_like(A, n)
                Q = _solve_positive_real(identity - 0.5 * A, identity + 0.5 * A)
            Q = Q[..., :k]
        if getattr(self, "base", None) is not None:
            Q = self.base @ Q
        return Q.transpose(-2, -1) if wide else Q

    def right_inverse(self, Q):
        if tuple(Q.shape) != tuple(self.shape):
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {tuple(self.shape)}. Got a tensor of shape "
                f"{tuple(Q.shape)}."
            )
        original = Q
        n, k = Q.shape[-2], Q.shape[-1]
        wide = n < k
        if wide:
            Q = Q.transpose(-2, -1)
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map != "householder":
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley parametrizations when "
                    "use_trivialization=False."
                )
            X = _householder_vectors(Q)
            return X.transpose(-2, -1) if wide else X
        if n == k:
            base = Q.clone() if _is_orthogonal(Q) else _orthonormalize(Q)
        else:  # complete the columns to an n x n unitary matrix with random directions
            filler = ember.randn(*Q.shape[:-1], n - k, dtype=Q.dtype, device=Q.device)
            base = _orthonormalize(ember.cat([Q, filler], dim=-1))
        self.base = base
        # -I: every map sends it to the identity, so the weight is now base[..., :k] = Q.
        X = ember.zeros_like(original)
        X.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return X


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    r"""Constrain the matrix (or batch of matrices) ``module.<name>`` to be orthogonal (unitary if complex).

    The weight ``W`` ``(*, n, k)`` becomes ``W = Q(X)`` of a free parameter
    ``module.parametrizations.<name>.original`` ``X`` of the same shape, where ``Q(X)`` has
    orthonormal columns (``Q^H Q = I``) when ``n >= k`` and orthonormal rows when ``n < k``. The
    weight's current value is kept, orthonormalized if it is not orthogonal already.

    Args:
        module (Module): the module holding the weight.
        name (str, optional): the weight's name. Default: ``"weight"``.
        orthogonal_map (str, optional): ``"matrix_exp"``, ``"cayley"`` or ``"householder"`` (see
            :mod:`ember.nn.utils._orthogonal`). Default: ``"matrix_exp"`` for square or complex
            weights, ``"householder"`` otherwise.
        use_trivialization (bool, optional): keep an orthogonal ``base`` buffer
            (``parametrizations.<name>.0.base``) and return ``base @ Q(X)``; assigning to the weight
            then works for every map. Without it only ``"householder"`` accepts assignments.
            Default: ``True``.

    Returns:
        Module: ``module``, parametrized.

    Raises:
        ValueError: the module has no tensor ``name``, the tensor has fewer than 2 dims, an unknown
            ``orthogonal_map``, or ``"householder"`` with a complex weight.
        NotImplementedError: assigning to a ``"matrix_exp"``/``"cayley"`` weight without
            ``use_trivialization``.

    References:
        Lezcano-Casado & Martinez-Rubio, "Cheap Orthogonal Constraints in Neural Networks", ICML 2019,
        https://arxiv.org/abs/1901.08428

    Example:
        >>> import ember
        >>> from ember import nn
        >>> m = nn.utils.parametrizations.orthogonal(nn.Linear(3, 5))
        >>> w = m.weight
        >>> bool(ember.allclose(w.T @ w, ember.eye(3), atol=1e-5))
        True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, ember.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". ' f"Got: {orthogonal_map}"
        )
    parametrization = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, parametrization, unsafe=True)
    return module
