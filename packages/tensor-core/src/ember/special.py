"""Special functions (PyTorch's ``torch.special``, after ``scipy.special``).

The functions that ember has as ``ember.<name>`` ops (``erf``, ``digamma``, ``i0``, ``logit``, ``xlogy``,
``softmax``, ...) are the same ops here; the others are registry ops ``special_<name>`` (see
:mod:`ember._ops.special`). Every one is a registry op, so it runs on CPU, CUDA (CuPy) and meta tensors,
records in FX graphs, and is differentiable under ember-autograd where PyTorch's is (the Bessel
functions other than ``i0``/``i0e``/``i1``/``i1e``, ``airy_ai`` and the orthogonal polynomials are not:
their outputs never require grad, as in PyTorch).

Example:
    >>> import ember
    >>> ember.special.erfcx(ember.tensor([0.0, 10.0]))
    tensor([1.0000, 0.0561])
    >>> ember.special.ndtri(ember.tensor([0.5, 0.975]))
    tensor([0.0000, 1.9600])
"""

from __future__ import annotations

from ._ops import registry as _registry

__all__ = [
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc",
    "gammaln", "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e",
    "laguerre_polynomial_l", "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
    "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "multigammaln",
    "ndtr", "ndtri", "polygamma", "psi", "round", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "sinc", "softmax", "spherical_bessel_j0", "xlog1py", "xlogy", "zeta",
]

# -- the ember ops under their torch.special names ---------------------------------------------------------

digamma = psi = _registry["digamma"]
erf = _registry["erf"]
erfc = _registry["erfc"]
erfinv = _registry["erfinv"]
exp2 = _registry["exp2"]
expit = _registry["sigmoid"]
expm1 = _registry["expm1"]
gammaln = _registry["lgamma"]
i0 = _registry["i0"]
log1p = _registry["log1p"]
logit = _registry["logit"]
logsumexp = _registry["logsumexp"]
polygamma = _registry["polygamma"]
round = _registry["round"]  # noqa: A001 - torch.special.round
sinc = _registry["sinc"]
xlogy = _registry["xlogy"]


def softmax(input, dim, *, dtype=None):
    """Softmax along ``dim``: ``exp(input) / exp(input).sum(dim, keepdim=True)`` (see :func:`ember.softmax`).

    Args:
        input (Tensor): the input.
        dim (int): the dimension to normalise along.
        dtype (ember.dtype, optional): cast the input to it first.

    Returns:
        Tensor: of ``input``'s shape.
    """
    return _registry["softmax"](input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """``log(softmax(input, dim))``, computed stably (see :func:`ember.log_softmax`).

    Args:
        input (Tensor): the input.
        dim (int): the dimension to normalise along.
        dtype (ember.dtype, optional): cast the input to it first.

    Returns:
        Tensor: of ``input``'s shape.
    """
    return _registry["log_softmax"](input, dim, dtype=dtype)


# -- the ops of ember._ops.special ------------------------------------------------------------------------

airy_ai = _registry["special_airy_ai"]
bessel_j0 = _registry["special_bessel_j0"]
bessel_j1 = _registry["special_bessel_j1"]
bessel_y0 = _registry["special_bessel_y0"]
bessel_y1 = _registry["special_bessel_y1"]
modified_bessel_i0 = _registry["special_modified_bessel_i0"]
modified_bessel_i1 = _registry["special_modified_bessel_i1"]
modified_bessel_k0 = _registry["special_modified_bessel_k0"]
modified_bessel_k1 = _registry["special_modified_bessel_k1"]
scaled_modified_bessel_k0 = _registry["special_scaled_modified_bessel_k0"]
scaled_modified_bessel_k1 = _registry["special_scaled_modified_bessel_k1"]
spherical_bessel_j0 = _registry["special_spherical_bessel_j0"]
entr = _registry["special_entr"]
erfcx = _registry["special_erfcx"]
i0e = _registry["special_i0e"]
i1 = _registry["special_i1"]
i1e = _registry["special_i1e"]
ndtr = _registry["special_ndtr"]
ndtri = _registry["special_ndtri"]
log_ndtr = _registry["special_log_ndtr"]
xlog1py = _registry["special_xlog1py"]
zeta = _registry["special_zeta"]
gammainc = _registry["special_gammainc"]
gammaincc = _registry["special_gammaincc"]
multigammaln = _registry["special_multigammaln"]


def _polynomial(name):
    """``ember.special.<name>(input, n, *, out=None)``: the registry op ``special_<name>(input, other)``."""
    op = _registry[f"special_{name}"]

    def polynomial(input, n, *, out=None):
        if out is not None:
            return op(input, n, out=out)
        return op(input, n)

    polynomial.__name__ = polynomial.__qualname__ = name
    polynomial.__doc__ = op.__doc__
    return polynomial


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t")
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u")
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v")
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w")
hermite_polynomial_h = _polynomial("hermite_polynomial_h")
hermite_polynomial_he = _polynomial("hermite_polynomial_he")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l")
legendre_polynomial_p = _polynomial("legendre_polynomial_p")
