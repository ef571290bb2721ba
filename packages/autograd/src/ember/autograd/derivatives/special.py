"""Derivatives of ``ember.special``'s own ops (:mod:`ember._ops.special`).

The functions PyTorch differentiates get formulas, written in ember ops (so they differentiate again):
``entr``, ``erfcx``, ``i0e``, ``i1``, ``i1e``, ``ndtr``, ``ndtri``, ``log_ndtr``, ``xlog1py``,
``multigammaln``, ``zeta`` (with respect to the shift ``other`` only) and ``gammainc``/``gammaincc``
(with respect to ``other`` only). As in PyTorch, the gradient of ``zeta``'s and of the incomplete gamma
functions' first argument raises ``NotImplementedError`` at backward time, and the Bessel functions
``bessel_*``, ``modified_bessel_*``, ``scaled_modified_bessel_*``, ``spherical_bessel_j0``, ``airy_ai``
and the orthogonal polynomials are not differentiable: their outputs never require grad.
"""

from __future__ import annotations

import math

import ember
from ember._ops import registry

from .._table import derivative, nondifferentiable

_SQRT_2PI = math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

_i0e = registry["special_i0e"]
_i1e = registry["special_i1e"]
_xlog1py = registry["special_xlog1py"]
_zeta = registry["special_zeta"]


def _is_tensor(x):
    return isinstance(x, ember.Tensor)


def _not_implemented(name):
    """A formula that raises at backward time, with PyTorch's message."""

    def formula():
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")

    return formula


def _nonzero(x):
    """``x`` with its zeros replaced by 1: a safe divisor where the caller replaces the value at 0."""
    return ember.where(x == 0, 1.0, x)


# -- unary functions --------------------------------------------------------------------------------------

# d(-x log x) = -(log x + 1): +inf at 0, NaN below 0, as PyTorch
derivative("special_entr", input=lambda grad, input: grad * -(ember.log(input) + 1))
# d erfcx(x) = 2 x erfcx(x) - 2 / sqrt(pi)
derivative("special_erfcx", input=lambda grad, input, result: grad * (2 * input * result - _TWO_OVER_SQRT_PI))
# d [exp(-|x|) I0(x)] = exp(-|x|) I1(x) - sign(x) exp(-|x|) I0(x)
derivative("special_i0e", input=lambda grad, input, result: grad * (_i1e(input) - ember.sign(input) * result))


def _i1_input(grad, input, result):
    """I1'(x) = I0(x) - I1(x) / x, 1/2 at 0."""
    value = ember.i0(input) - result / _nonzero(input)
    return grad * ember.where(input == 0, 0.5, value)


def _i1e_input(grad, input, result):
    """d [exp(-|x|) I1(x)] = exp(-|x|) I0(x) - exp(-|x|) I1(x) (sign(x) + 1/x), 1/2 at 0."""
    value = _i0e(input) - result * (ember.sign(input) + 1 / _nonzero(input))
    return grad * ember.where(input == 0, 0.5, value)


derivative("special_i1", input=_i1_input)
derivative("special_i1e", input=_i1e_input)
# the normal density exp(-x**2 / 2) / sqrt(2 pi)
derivative("special_ndtr", input=lambda grad, input: grad * (ember.exp(input * input * -0.5) / _SQRT_2PI))
# 1 / density(ndtri(p)), read from the output
derivative("special_ndtri", input=lambda grad, result: grad * (_SQRT_2PI * ember.exp(result * result * 0.5)))
# density(x) / ndtr(x) = exp(-x**2 / 2 - log_ndtr(x)) / sqrt(2 pi): no underflow to 0/0 in the left tail
derivative(
    "special_log_ndtr",
    input=lambda grad, input, result: grad * (ember.exp(input * input * -0.5 - result) / _SQRT_2PI),
)


def _multigammaln_input(grad, input, p):
    """d log Gamma_p(a) / da = sum_{j < p} digamma(a - j / 2)."""
    total = ember.digamma(input)
    for j in range(1, p):
        total = total + ember.digamma(input - j / 2)
    return grad * total


derivative("special_multigammaln", input=_multigammaln_input)


# -- binary functions -------------------------------------------------------------------------------------


def _xlog1py_input(grad, input, other):
    """log1p(y), but 0 where x == 0 and y <= -1 (as xlogy's gradient at x == 0, y <= 0: PyTorch's choice)."""
    value = _xlog1py(grad, other)
    if not _is_tensor(other):
        return value if other > -1 else ember.where(input == 0, 0, value)
    return ember.where((input == 0) & (other <= -1), 0, value)


derivative(
    "special_xlog1py",
    input=_xlog1py_input,
    other=lambda grad, input, other: grad * input / (other + 1),
)
# d zeta(x, q) / dq = -x zeta(x + 1, q); PyTorch has no derivative in x
derivative(
    "special_zeta",
    input=_not_implemented("zeta"),
    other=lambda grad, input, other: grad * (-input * _zeta(input + 1, other)),
)


def _gamma_density(a, x):
    """x**(a - 1) exp(-x) / Gamma(a): d P(a, x) / dx."""
    return ember.exp((a - 1) * ember.log(x) - x - ember.lgamma(a))


derivative(
    "special_gammainc",
    input=_not_implemented("igamma: input"),
    other=lambda grad, input, other: grad * _gamma_density(input, other),
)
derivative(
    "special_gammaincc",
    input=_not_implemented("igammac: input"),
    other=lambda grad, input, other: grad * -_gamma_density(input, other),
)

# -- not differentiable in PyTorch ------------------------------------------------------------------------

nondifferentiable(
    "special_airy_ai",
    "special_bessel_j0",
    "special_bessel_j1",
    "special_bessel_y0",
    "special_bessel_y1",
    "special_modified_bessel_i0",
    "special_modified_bessel_i1",
    "special_modified_bessel_k0",
    "special_modified_bessel_k1",
    "special_scaled_modified_bessel_k0",
    "special_scaled_modified_bessel_k1",
    "special_spherical_bessel_j0",
    "special_chebyshev_polynomial_t",
    "special_chebyshev_polynomial_u",
    "special_chebyshev_polynomial_v",
    "special_chebyshev_polynomial_w",
    "special_shifted_chebyshev_polynomial_t",
    "special_shifted_chebyshev_polynomial_u",
    "special_shifted_chebyshev_polynomial_v",
    "special_shifted_chebyshev_polynomial_w",
    "special_hermite_polynomial_h",
    "special_hermite_polynomial_he",
    "special_laguerre_polynomial_l",
    "special_legendre_polynomial_p",
)
