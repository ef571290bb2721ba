"""Derivatives of the pointwise ops (``ember._ops.pointwise``, ``unary_math``, ``comparison``, ``binary_math``...).

Every formula returns the gradient of one argument as PyTorch defines it: the
conjugate Wirtinger derivative for complex inputs (``grad * conj(f'(x))`` for
a holomorphic ``f``), and PyTorch's chosen value at points where the function
is not differentiable (0 for ``abs`` at 0, half the gradient to each side of a
``maximum`` tie, the full gradient at a ``clamp`` boundary, ...). The engine
sums each gradient over broadcast dimensions and casts it to its input's dtype
(real part for real inputs), so formulas do neither.

What a formula reads is what autograd saves. Formulas read the op's output
(``result``) where PyTorch saves it too (``exp``, ``tanh``, ``sigmoid``,
``sqrt``, ...): that saves recomputation, and an in-place write into an output
raises in the same places as in PyTorch (``erfinv`` reads its output too, where
PyTorch computes ``erfinv`` again). Formulas read inputs otherwise, and an
in-place variant (``x.exp_()``) then keeps a copy of ``x``; every in-place op of
this family is differentiated through its functional op's entry.
"""

from __future__ import annotations

import cmath
import math

import ember
from ember._ops import registry

from .._table import derivative, nondifferentiable, through_decomposition
from ._helpers import conj

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_HALF_SQRT_PI = 0.5 * math.sqrt(math.pi)
_tanh_backward = registry["tanh_backward"]
_sigmoid_backward = registry["sigmoid_backward"]


def _zeros(grad):
    """The gradient of a piecewise-constant op (``floor``, ``sign``, ...): zeros, as PyTorch gives."""
    return ember.zeros_like(grad)


def _is_tensor(x):
    return isinstance(x, ember.Tensor)


# -- add, sub, mul, div and the remainders -----------------------------------------------------------

derivative(
    "add",
    input=lambda grad: grad,
    other=lambda grad, alpha: grad if alpha == 1 else grad * conj(alpha),
)
derivative(
    "sub",
    input=lambda grad: grad,
    other=lambda grad, alpha: -grad if alpha == 1 else grad * (-conj(alpha)),
)
derivative(
    "mul",
    input=lambda grad, other: grad * conj(other),
    other=lambda grad, input: grad * conj(input),
)


def _div_input(grad, other, rounding_mode):
    if rounding_mode is not None:
        return _zeros(grad)  # a rounded quotient is piecewise constant
    return grad / conj(other)


def _div_other(grad, input, other, rounding_mode):
    if rounding_mode is not None:
        return _zeros(grad)
    # d(a / b)/db = -a / b**2, written as -(a / b) / b so that a = b = large does not overflow
    return -grad * conj(input / other / other)


derivative("div", input=_div_input, other=_div_other)
# floor_divide is div(rounding_mode="floor"): piecewise constant in both arguments (PyTorch raises
# "not implemented"; the zero gradient of the same function under div is the consistent answer).
derivative("floor_divide", input=_zeros, other=_zeros)
# remainder(a, b) = a - floor(a / b) * b and fmod(a, b) = a - trunc(a / b) * b, with the rounded
# quotient piecewise constant.
derivative(
    "remainder",
    input=lambda grad: grad,
    other=lambda grad, input, other: -grad * ember.div(input, other, rounding_mode="floor"),
)
derivative(
    "fmod",
    input=lambda grad: grad,
    other=lambda grad, input, other: -grad * ember.div(input, other, rounding_mode="trunc"),
)

# -- unary math ---------------------------------------------------------------------------------------

derivative("neg", input=lambda grad: -grad)
# abs: grad * sgn(x) for real and complex alike (0 at 0, as PyTorch's subgradient).
derivative("abs", input=lambda grad, input: grad * ember.sgn(input))
derivative("sign", input=_zeros)


def _sgn_input(grad, input, result):
    """sgn(z) = z / |z| is not holomorphic: its gradient is (g - sgn(z)**2 * conj(g)) / (2 |z|), 0 at 0."""
    if not input.is_complex():
        return _zeros(grad)  # real sgn is sign, piecewise constant
    modulus = ember.abs(input)
    value = (grad - result * result * conj(grad)) / (2 * modulus)
    return ember.where(modulus == 0, 0, value)


derivative("sgn", input=_sgn_input)

derivative("exp", input=lambda grad, result: grad * conj(result))
derivative("exp2", input=lambda grad, result: grad * (conj(result) * _LN2))
derivative("expm1", input=lambda grad, result: grad * (conj(result) + 1))
derivative("log", input=lambda grad, input: grad / conj(input))
derivative("log2", input=lambda grad, input: grad / (conj(input) * _LN2))
derivative("log10", input=lambda grad, input: grad / (conj(input) * _LN10))
derivative("log1p", input=lambda grad, input: grad / (conj(input) + 1))
derivative("sqrt", input=lambda grad, result: grad / (2 * conj(result)))  # inf at 0, as PyTorch
derivative("rsqrt", input=lambda grad, result: grad * (-0.5 * conj(result * result * result)))
derivative("reciprocal", input=lambda grad, result: grad * (-conj(result * result)))
derivative("square", input=lambda grad, input: grad * (2 * conj(input)))

derivative("sin", input=lambda grad, input: grad * conj(ember.cos(input)))
derivative("cos", input=lambda grad, input: grad * (-conj(ember.sin(input))))
derivative("tan", input=lambda grad, result: grad * (1 + conj(result * result)))
derivative("asin", input=lambda grad, input: grad * conj(ember.rsqrt(1 - input * input)))
derivative("acos", input=lambda grad, input: grad * (-conj(ember.rsqrt(1 - input * input))))
derivative("atan", input=lambda grad, input: grad / (conj(input * input) + 1))
derivative("sinh", input=lambda grad, input: grad * conj(ember.cosh(input)))
derivative("cosh", input=lambda grad, input: grad * conj(ember.sinh(input)))
# tanh and sigmoid: one op (PyTorch's tanh_backward / sigmoid_backward) instead of three, as PyTorch does
derivative("tanh", input=lambda grad, result: _tanh_backward(grad, result))
derivative("asinh", input=lambda grad, input: grad * conj(ember.rsqrt(input * input + 1)))


def _acosh_input(grad, input):
    if input.is_complex():
        # sqrt(z*z - 1) is not sqrt(z + 1) * sqrt(z - 1) off the real axis: keep the two factors
        return grad * conj(ember.rsqrt(input + 1) * ember.rsqrt(input - 1))
    return grad * ember.rsqrt(input * input - 1)


derivative("acosh", input=_acosh_input)
derivative("atanh", input=lambda grad, input: grad / (1 - conj(input * input)))
derivative("sigmoid", input=lambda grad, result: _sigmoid_backward(grad, result))
# tanh_backward(g, y) = g * conj(1 - y**2) is holomorphic in g and antiholomorphic in y: the gradient of y is
# conj(grad) times the derivative in conj(y), -2 g conj(y) (likewise for sigmoid_backward's g * conj(y - y**2))
derivative(
    "tanh_backward",
    grad_output=lambda grad, output: _tanh_backward(grad, conj(output)),
    output=lambda grad, grad_output, output: conj(grad) * (-2 * grad_output * conj(output)),
)
derivative(
    "sigmoid_backward",
    grad_output=lambda grad, output: _sigmoid_backward(grad, conj(output)),
    output=lambda grad, grad_output, output: conj(grad) * (grad_output * (1 - 2 * conj(output))),
)

derivative("erf", input=lambda grad, input: grad * (_TWO_OVER_SQRT_PI * ember.exp(-(input * input))))
derivative("erfc", input=lambda grad, input: grad * (-_TWO_OVER_SQRT_PI * ember.exp(-(input * input))))
# d erfinv(x)/dx = sqrt(pi)/2 * exp(erfinv(x)**2): read from the output instead of computing erfinv again.
derivative("erfinv", input=lambda grad, result: grad * (_HALF_SQRT_PI * ember.exp(result * result)))
derivative("lgamma", input=lambda grad, input: grad * ember.digamma(input))
derivative("digamma", input=lambda grad, input: grad * ember.polygamma(1, input))
derivative("polygamma", input=lambda grad, n, input: grad * ember.polygamma(n + 1, input))

# Chebyshev coefficients of exp(-x) I1(x) / x on [0, 8] (argument x/2 - 2) and of exp(-x) sqrt(x) I1(x)
# on [8, inf) (argument 32/x - 2), from the Cephes Math Library (S. L. Moshier, i1.c), highest order first.
_I1_SMALL = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
    -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
    4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
    -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
    -1.76416518357834055153e-1, 2.52587186443633654823e-1,
)  # fmt: skip
_I1_LARGE = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
    -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)  # fmt: skip
# float32 needs only the terms above its precision (the series' tail, as Cephes' single-precision i1f.c)
_I1_SMALL_F32 = _I1_SMALL[-17:]
_I1_LARGE_F32 = _I1_LARGE[-7:]


def _chebyshev(y, coefficients):
    """Clenshaw's evaluation of ``sum c_k T_k(y/2)`` (Cephes' ``chbevl``), in ember ops."""
    b0, b1, b2 = coefficients[0], 0.0, 0.0
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = y * b1 + (c - b2) if not _is_tensor(b2) else ember.addcmul(c - b2, y, b1)
    return 0.5 * (b0 - b2)


def i1(x):
    """The modified Bessel function of the first kind of order 1, ``I1(x)``, of a real tensor, in ember ops.

    It is the derivative of ``ember.i0``. Ember has no ``i1`` op, so this evaluates
    Cephes' two Chebyshev expansions (``|x| <= 8`` and ``|x| > 8``) with ember ops,
    which keeps the gradient of ``i0`` differentiable again. Each branch is evaluated
    at a safe stand-in point where the other one applies, so no inf or NaN of an
    unused branch reaches a second derivative.

    Args:
        x (Tensor): real values (float16 and bfloat16 compute in float32).

    Returns:
        Tensor: ``I1(x)``, odd in ``x``; of ``x``'s dtype, or float32 for float16/bfloat16.
    """
    if x.dtype in (ember.float16, ember.bfloat16):
        x = x.float()
    small_coeffs, large_coeffs = (_I1_SMALL, _I1_LARGE) if x.dtype == ember.float64 else (_I1_SMALL_F32, _I1_LARGE_F32)
    z = ember.abs(x)
    small = z <= 8.0
    x_small = ember.where(small, x, 0.0)
    z_large = ember.where(small, 8.0, z)
    # exp(-|x|) I1(x): x times a series in |x| near 0 (so that its derivative at 0 is right, 1/2), and
    # sign(x) times a series in 1/|x| beyond 8
    near = _chebyshev(ember.abs(x_small) * 0.5 - 2.0, small_coeffs) * x_small
    far = _chebyshev(32.0 / z_large - 2.0, large_coeffs) * ember.rsqrt(z_large) * ember.sign(x)
    return ember.where(small, near, far) * ember.exp(z)


derivative("i0", input=lambda grad, input: grad * i1(input))


def _sinc_input(grad, input):
    """d/dx sin(pi x)/(pi x) = (pi x cos(pi x) - sin(pi x)) / (pi x**2); 0 at x = 0 (an extremum).

    At 0 the formula is 0/0: it is evaluated at a stand-in point there (no NaN for a
    second derivative to pick up), and replaced by its linear term ``-pi**2 x / 3``,
    which is 0 at 0 and has the right derivative (PyTorch's second derivative is NaN).
    """
    at_zero = input == 0
    x = ember.where(at_zero, 1.0, input)
    pi_x = x * math.pi
    value = grad * conj((pi_x * ember.cos(pi_x) - ember.sin(pi_x)) / (x * pi_x))
    return ember.where(at_zero, grad * conj(input * (-(math.pi**2) / 3.0)), value)


derivative("sinc", input=_sinc_input)
derivative("deg2rad", input=lambda grad: grad * (math.pi / 180.0))
derivative("rad2deg", input=lambda grad: grad * (180.0 / math.pi))
derivative("floor", input=_zeros)
derivative("ceil", input=_zeros)
derivative("trunc", input=_zeros)
derivative("round", input=_zeros)
derivative("frac", input=lambda grad: grad)


def _logit_input(grad, input, eps):
    """1 / (x (1 - x)) inside the domain; outside it NaN (no eps) or 0 (eps: the input was clamped there)."""
    value = grad / (input * (1 - input))
    if eps is None:
        return ember.where((input >= 0) & (input <= 1), value, math.nan)
    return ember.where((input >= eps) & (input <= 1 - eps), value, 0)


derivative("logit", input=_logit_input)
derivative("nan_to_num", input=lambda grad, input: ember.where(ember.isfinite(input), grad, 0))


def _angle_input(grad, input):
    """angle(z) = atan2(Im z, Re z): its gradient is i z grad / |z|**2 (0 at 0); real inputs: 0."""
    if not input.is_complex():
        return _zeros(grad)
    value = (grad / ember.abs(input).square()) * input * 1j
    return ember.where(input == 0, 0, value)


derivative("angle", input=_angle_input)
derivative("conj_physical", input=lambda grad: conj(grad))
through_decomposition("conj")

# -- binary math ----------------------------------------------------------------------------------------


def _atan2(grad, input, other, output_mask):
    """d atan2(y, x) = (x dy - y dx) / (x**2 + y**2); 0 at the origin (PyTorch's value there)."""
    squared = input * input + other * other
    scale = ember.where(squared == 0, 0, grad / squared)
    return (scale * other if output_mask[0] else None, scale * -input if output_mask[1] else None)


derivative("atan2", joint={("input", "other"): _atan2})


def _xlogy_input(grad, input, other):
    """log(y), except 0 where x == 0 and y <= 0 (x log y is 0 there but not differentiable: PyTorch's choice)."""
    value = ember.xlogy(grad, other)
    if not _is_tensor(other):
        return value if other > 0 else ember.where(input == 0, 0, value)
    return ember.where((input == 0) & (other <= 0), 0, value)


derivative("xlogy", input=_xlogy_input, other=lambda grad, input, other: grad * input / other)


def _maximum(grad, input, other, output_mask):
    # a tie sends half of the gradient to each side; a NaN on either side passes it to both
    split = ember.where(input == other, grad * 0.5, grad)
    return (
        ember.where(input < other, 0, split) if output_mask[0] else None,
        ember.where(input > other, 0, split) if output_mask[1] else None,
    )


def _minimum(grad, input, other, output_mask):
    split = ember.where(input == other, grad * 0.5, grad)
    return (
        ember.where(input > other, 0, split) if output_mask[0] else None,
        ember.where(input < other, 0, split) if output_mask[1] else None,
    )


def _fmax(grad, input, other, output_mask):
    # the result is input where input >= other or other is NaN (a tie goes to input)
    takes_input = (input >= other) | ember.isnan(other)
    return (
        ember.where(takes_input, grad, 0) if output_mask[0] else None,
        ember.where(takes_input, 0, grad) if output_mask[1] else None,
    )


def _fmin(grad, input, other, output_mask):
    takes_input = (input <= other) | ember.isnan(other)
    return (
        ember.where(takes_input, grad, 0) if output_mask[0] else None,
        ember.where(takes_input, 0, grad) if output_mask[1] else None,
    )


derivative("maximum", joint={("input", "other"): _maximum})
derivative("minimum", joint={("input", "other"): _minimum})
derivative("fmax", joint={("input", "other"): _fmax})
derivative("fmin", joint={("input", "other"): _fmin})
derivative(
    "hypot",
    input=lambda grad, input, result: grad * input / result,
    other=lambda grad, other, result: grad * other / result,
)
derivative(
    "logaddexp",
    input=lambda grad, input, other: grad / conj(1 + ember.exp(other - input)),
    other=lambda grad, input, other: grad / conj(1 + ember.exp(input - other)),
)
derivative(
    "logaddexp2",
    input=lambda grad, input, other: grad / (1 + ember.exp2(other - input)),
    other=lambda grad, input, other: grad / (1 + ember.exp2(input - other)),
)


def _copysign_input(grad, input, result):
    # result / input is +-1 (the sign flip); at input == 0 the gradient is 0, as PyTorch's
    return grad * ember.where(input == 0, 0, result / input)


derivative("copysign", input=_copysign_input, other=_zeros)
# heaviside is a step in input (zero gradient); it equals values exactly where input == 0. PyTorch has
# no derivative for it; this is the exact one.
derivative(
    "heaviside",
    input=_zeros,
    values=lambda grad, input: ember.where(input == 0, grad, 0),
)

# -- pow and float_power ------------------------------------------------------------------------------------


def _pow_base(grad, input, exponent, power):
    """The gradient of ``power(input, exponent)`` for the base: ``exponent * input ** (exponent - 1)``."""
    if not _is_tensor(exponent):
        if exponent == 0:
            return _zeros(grad)
        if exponent == 2 and power is ember.pow:
            return grad * (2 * conj(input))  # x**2, the common case: no pow
        return grad * conj(exponent * power(input, exponent - 1))
    # a zero exponent gives 0 even where input ** -1 is inf (input = 0)
    value = grad * conj(exponent * power(input, exponent - 1))
    return ember.where(exponent == 0, 0, value)


def _log_of_base(base, dtype):
    """log(base) for the exponent's gradient, in the result's dtype (complex log of negative bases there)."""
    if not _is_tensor(base):
        if isinstance(base, complex) or (dtype.is_complex and base < 0):
            return cmath.log(base) if base != 0 else -math.inf
        if base > 0:
            return math.log(base)
        return -math.inf if base == 0 else math.nan
    if base.dtype != dtype:
        base = base.to(dtype)
    return ember.log(base)


def _pow_exponent(grad, input, exponent, power):
    """The gradient of ``power(input, exponent)`` for the exponent: ``input ** exponent * log(input)``.

    At ``input == 0`` with an exponent ``>= 0`` (real) it is 0, by continuity from
    ``input > 0``; with a negative exponent ``-inf``. The power is computed again
    rather than saved: ``x ** 2`` is common and would otherwise keep its output
    alive (and forbid in-place writes into it) for a gradient that is rarely needed.
    """
    result = power(input, exponent)
    value = grad * conj(result * _log_of_base(input, result.dtype))
    if exponent.is_complex():
        nonnegative = (ember.imag(exponent) == 0) & (ember.real(exponent) >= 0)
    else:
        nonnegative = exponent >= 0
    at_zero = nonnegative & (input == 0) if _is_tensor(input) else (nonnegative if input == 0 else None)
    if at_zero is None:
        return value
    return ember.where(at_zero, 0, value)


derivative(
    "pow",
    input=lambda grad, input, exponent: _pow_base(grad, input, exponent, ember.pow),
    exponent=lambda grad, input, exponent: _pow_exponent(grad, input, exponent, ember.pow),
)
# float_power is pow computed in float64 / complex128: the same formulas, computed there too (the
# engine casts the gradients back to the inputs' dtypes).
derivative(
    "float_power",
    input=lambda grad, input, exponent: _pow_base(grad, input, exponent, ember.float_power),
    exponent=lambda grad, input, exponent: _pow_exponent(grad, input, exponent, ember.float_power),
)

# -- clamp, lerp, addcmul, addcdiv, where ------------------------------------------------------------------


def _clamp_input(grad, input, min, max):  # noqa: A002 - the op's argument names
    """The gradient passes where ``min <= input <= max`` (boundaries included, as PyTorch's subgradient)."""
    if min is not None and max is not None:
        inside = (input >= min) & (input <= max)
    elif min is not None:
        inside = input >= min
    else:
        inside = input <= max
    return ember.where(inside, grad, 0)


def _clamp_bounds(grad, input, min, max, output_mask):  # noqa: A002
    """A bound gets the gradient where the result is that bound: ``max`` wins where ``min > max``."""
    grad_min = grad_max = None
    if output_mask[0]:
        below = input < min
        grad_min = ember.where(below & (min < max) if max is not None else below, grad, 0)
    if output_mask[1]:
        above = input > max
        grad_max = ember.where(above | (max < min) if min is not None else above, grad, 0)
    return grad_min, grad_max


derivative("clamp", input=_clamp_input, joint={("min", "max"): _clamp_bounds})


def _lerp_input(grad, weight):
    if _is_tensor(weight):
        return grad * conj(1 - weight)
    return grad * (1 - conj(weight))


derivative(
    "lerp",
    input=_lerp_input,
    end=lambda grad, weight: grad * conj(weight),
    weight=lambda grad, input, end: grad * conj(end - input),
)


def _scaled(t, value):
    return t if value == 1 else t * value


derivative(
    "addcmul",
    input=lambda grad: grad,
    tensor1=lambda grad, tensor2, value: grad * conj(_scaled(tensor2, value)),
    tensor2=lambda grad, tensor1, value: grad * conj(_scaled(tensor1, value)),
)
derivative(
    "addcdiv",
    input=lambda grad: grad,
    tensor1=lambda grad, tensor2, value: grad * conj(value / tensor2),
    tensor2=lambda grad, tensor1, tensor2, value: -grad * conj(_scaled(tensor1, value) / (tensor2 * tensor2)),
)
derivative(
    "where",
    input=lambda grad, condition: ember.where(condition, grad, 0),
    other=lambda grad, condition: ember.where(condition, 0, grad),
    nondiff=("condition",),
)

# -- ops with bool or integer results -----------------------------------------------------------------------

nondifferentiable(
    "eq", "ne", "lt", "le", "gt", "ge",
    "isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal",
    "logical_not", "logical_and", "logical_or", "logical_xor",
    "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
    "isclose", "allclose", "equal",
    "greater", "greater_equal", "less", "less_equal", "not_equal",
)  # fmt: skip

# -- aliases: differentiated through the op they call -----------------------------------------------------

through_decomposition(
    "absolute", "negative", "subtract", "multiply", "divide", "true_divide", "clip", "arctan2",
    "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "fix",
)  # fmt: skip
