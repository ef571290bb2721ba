"""Unary pointwise math: ``neg``, ``abs``, ``sign``, exponentials, logarithms, trigonometric and
hyperbolic functions, special functions (``erf``, ``lgamma``, ``digamma``, ``polygamma``, ``i0``),
rounding (``floor``, ``ceil``, ``trunc``, ``round``, ``frac``), ``logit``, ``nan_to_num`` and the
complex parts (``angle``, ``conj``).

Most entries are one line through :mod:`ember._ops._pointwise_helpers` (``unary``): name, numpy
or scipy.special function, result dtype rule and the dtypes PyTorch accepts.
"""

from __future__ import annotations

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._array_module import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._pointwise_helpers import (
    FLOATING,
    NO_BOOL,
    NO_COMPLEX,
    check_tensor,
    compute_dtype,
    make_inplace,
    not_implemented,
    unary,
    unary_doc,
)
from ._pointwise_helpers import is_int_scalar as _is_int_scalar
from ._registry import COMPOSITE, defop, registry
from ._special_functions import special as _special

__all__ = []

_FIRST_OP = len(registry)  # the ops registered from here on are this module's (see METHODS at the end)


# -- unary ops ---------------------------------------------------------------------------


_FLOAT_NOTE = "Integer and bool inputs give the default float dtype."
_NO_COMPLEX_RAISES = "NotImplementedError: for complex inputs."


def _check_neg(input):
    if input.dtype is D.bool:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )


def _check_abs_inplace(self):
    if self.dtype.is_complex:
        raise RuntimeError("In-place abs is not supported for complex tensors.")


neg = unary("neg", np.negative, check=_check_neg, doc=unary_doc(
    "Elementwise ``-input``.", "[1, -2]", "tensor([-1,  2])", name="neg",
    raises="RuntimeError: for bool tensors (use ``logical_not``)."))
abs = unary("abs", np.abs, result="real", supported=NO_BOOL, inplace_check=_check_abs_inplace, doc=unary_doc(  # noqa: A001
    "Elementwise absolute value; for complex inputs the modulus, a real tensor.", "[-1.5, 2.0]",
    "tensor([1.5000, 2.0000])", name="abs", raises="NotImplementedError: for bool tensors."))


def _sign_np(x):
    if x.dtype == np.bool_:
        return x.copy()
    value = _as_array(np.sign(x))
    if x.dtype.kind == "f":  # PyTorch's sign of NaN is 0
        np.copyto(value, 0, where=np.isnan(value))
    return value


def _check_sign(input):
    if input.dtype.is_complex:
        raise NotImplementedError(
            "Unlike NumPy, ember.sign is not intended to support complex numbers. Please use ember.sgn instead."
        )


def _sgn_np(x):
    if x.dtype.kind != "c":
        return _sign_np(x)
    modulus = np.abs(x)
    return np.where(modulus == 0, 0, x / np.where(modulus == 0, 1, modulus))


sign = unary("sign", _sign_np, check=_check_sign, upcast=True, doc=unary_doc(
    "Elementwise sign: -1, 0 or 1 (0 for NaN); bool stays bool.", "[-2.5, 0.0, 3.0]", "tensor([-1.,  0.,  1.])",
    name="sign", raises="NotImplementedError: for complex tensors (use :func:`ember.sgn`)."))
sgn = unary("sgn", _sgn_np, upcast=True, doc=unary_doc(
    "Elementwise sign extended to complex numbers: ``input / abs(input)`` (0 where ``input`` is 0).",
    "[3+4j, 0j]", "tensor([0.6000+0.8000j, 0.0000+0.0000j])", name="sgn"))


def _rsqrt_np(x):
    return np.reciprocal(np.sqrt(x))


def _sigmoid_np(x):
    # 1 / (1 + exp(-x)) in place: exact in the tails (exp(-x) overflowing to inf gives 0)
    value = np.negative(x, out=np.empty_like(x))
    np.exp(value, out=value)
    value += 1
    return np.reciprocal(value, out=value)


_scipy_erf = _special("erf")
_C_ERF_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_HAS_C_ERF = hasattr(_C, "erf")  # an ember._C built before csrc/erf.cpp lacks it


def _erf_np(x):
    # ember._C.erf (csrc/erf.cpp: vectorised, threaded, float32 within an ulp) for float32/float64 numpy
    # arrays; scipy.special.erf for the rest (CuPy arrays go to cupyx there)
    if type(x) is np.ndarray and x.dtype in _C_ERF_DTYPES and _HAS_C_ERF:
        return _C.erf(x if x.flags.c_contiguous else x.copy())
    return _scipy_erf(x)


def _sinc_np(x):
    if type(x) is np.ndarray:
        return np.sinc(x)
    # GPU arrays: CuPy's sinc is 1 at NaN and +-inf, where numpy's is NaN (sin of a non-finite number)
    return np.where(np.isfinite(x), np.sinc(x), np.nan)  # the caller casts to the result dtype


# (name, numpy function, summary, example input, example output, supported input dtypes)
_FLOAT_UNARY = [
    ("exp", np.exp, "Elementwise exponential ``e ** input``.", "[0., 1.]", "tensor([1.0000, 2.7183])", None),
    ("exp2", np.exp2, "Elementwise ``2 ** input``.", "[0., 3.]", "tensor([1., 8.])", None),
    ("expm1", np.expm1, "Elementwise ``exp(input) - 1``, accurate near zero.", "[0., 1.]",
     "tensor([0.0000, 1.7183])", None),
    ("log", np.log, "Elementwise natural logarithm (NaN below zero, -inf at zero).", "[1., 4.]",
     "tensor([0.0000, 1.3863])", None),
    ("log2", np.log2, "Elementwise base-2 logarithm.", "[1., 8.]", "tensor([0., 3.])", None),
    ("log10", np.log10, "Elementwise base-10 logarithm.", "[2., 50.]", "tensor([0.3010, 1.6990])", None),
    ("log1p", np.log1p, "Elementwise ``log(1 + input)``, accurate near zero.", "[0., 1.]",
     "tensor([0.0000, 0.6931])", None),
    ("sqrt", np.sqrt, "Elementwise square root (NaN below zero for real inputs).", "[4., 9.]",
     "tensor([2., 3.])", None),
    ("rsqrt", _rsqrt_np, "Elementwise reciprocal square root ``1 / sqrt(input)``.", "[4., 16.]",
     "tensor([0.5000, 0.2500])", None),
    ("reciprocal", np.reciprocal, "Elementwise ``1 / input``.", "[2, 4]", "tensor([0.5000, 0.2500])", None),
    ("sin", np.sin, "Elementwise sine (radians).", "[0., 1.5708]", "tensor([0., 1.])", None),
    ("cos", np.cos, "Elementwise cosine (radians).", "[0., 3.1416]", "tensor([ 1., -1.])", None),
    ("tan", np.tan, "Elementwise tangent (radians).", "[0., 0.7854]", "tensor([0.0000, 1.0000])", None),
    ("asin", np.arcsin, "Elementwise inverse sine.", "[0., 1.]", "tensor([0.0000, 1.5708])", None),
    ("acos", np.arccos, "Elementwise inverse cosine.", "[1., 0.]", "tensor([0.0000, 1.5708])", None),
    ("atan", np.arctan, "Elementwise inverse tangent.", "[0., 1.]", "tensor([0.0000, 0.7854])", None),
    ("sinh", np.sinh, "Elementwise hyperbolic sine.", "[0., 1.]", "tensor([0.0000, 1.1752])", None),
    ("cosh", np.cosh, "Elementwise hyperbolic cosine.", "[0., 1.]", "tensor([1.0000, 1.5431])", None),
    ("tanh", np.tanh, "Elementwise hyperbolic tangent.", "[0., 1.]", "tensor([0.0000, 0.7616])", None),
    ("asinh", np.arcsinh, "Elementwise inverse hyperbolic sine.", "[0., 1.]", "tensor([0.0000, 0.8814])", None),
    ("acosh", np.arccosh, "Elementwise inverse hyperbolic cosine (NaN below 1).", "[1., 2.]",
     "tensor([0.0000, 1.3170])", None),
    ("atanh", np.arctanh, "Elementwise inverse hyperbolic tangent.", "[0., 0.5]", "tensor([0.0000, 0.5493])", None),
    ("sigmoid", _sigmoid_np, "Elementwise logistic sigmoid ``1 / (1 + exp(-input))``.", "[0., 2.]",
     "tensor([0.5000, 0.8808])", None),
    ("erf", _erf_np, "Elementwise error function.", "[0., 1.]", "tensor([0.0000, 0.8427])", NO_COMPLEX),
    ("erfc", _special("erfc"), "Elementwise complementary error function ``1 - erf(input)``.", "[0., 1.]",
     "tensor([1.0000, 0.1573])", NO_COMPLEX),
    ("erfinv", _special("erfinv"), "Elementwise inverse error function (±inf at ±1, NaN outside [-1, 1]).", "[0., 0.5]",
     "tensor([0.0000, 0.4769])", NO_COMPLEX),
    ("lgamma", _special("gammaln"), "Elementwise ``log(abs(gamma(input)))``.", "[1., 5.]", "tensor([0.0000, 3.1781])",
     NO_COMPLEX),
    ("digamma", _special("psi"), "Elementwise digamma function, the derivative of ``lgamma``.", "[1., 2.]",
     "tensor([-0.5772,  0.4228])", NO_COMPLEX),
    ("i0", _special("i0"), "Elementwise modified Bessel function of the first kind, order 0.", "[0., 1.]",
     "tensor([1.0000, 1.2661])", NO_COMPLEX),
    ("sinc", _sinc_np, "Elementwise normalized sinc ``sin(pi x) / (pi x)`` (1 at 0).", "[0., 0.5]",
     "tensor([1.0000, 0.6366])", None),
]

for _name, _fn, _summary, _x, _y, _supported in _FLOAT_UNARY:
    globals()[_name] = unary(
        _name, _fn, result="float", upcast=True, supported=_supported,
        doc=unary_doc(_summary, _x, _y, name=_name, note=_FLOAT_NOTE,
                  raises=_NO_COMPLEX_RAISES if _supported is not None else ""),
    )


def _square_np(x):
    return np.square(x.astype(np.int64) if x.dtype == np.bool_ else x)


def _square_dtype(dtype):
    return D.int64 if dtype is D.bool else dtype


square = unary("square", _square_np, result=_square_dtype, upcast=True, doc=unary_doc(
    "Elementwise ``input * input``; bool inputs give int64.", "[2, -3]", "tensor([4, 9])", name="square"))


def _check_not_complex(name):
    def check(input):
        if input.dtype.is_complex:
            raise RuntimeError(f"{name} is not supported for complex tensors.")

    return check


deg2rad = unary("deg2rad", np.deg2rad, result="float", upcast=True, check=_check_not_complex("deg2rad"), doc=unary_doc(
    "Elementwise conversion from degrees to radians.", "[180., 90.]", "tensor([3.1416, 1.5708])", name="deg2rad",
    note=_FLOAT_NOTE, raises="RuntimeError: for complex inputs."))
rad2deg = unary("rad2deg", np.rad2deg, result="float", upcast=True, check=_check_not_complex("rad2deg"), doc=unary_doc(
    "Elementwise conversion from radians to degrees.", "[3.1416, 1.5708]", "tensor([180.0004,  90.0002])",
    name="rad2deg", note=_FLOAT_NOTE, raises="RuntimeError: for complex inputs."))


def _check_rounding(name):
    def check(input):
        if input.dtype.is_complex:
            raise NotImplementedError(f"{name} is not supported for complex inputs")

    return check


def _rounding(name, np_fn, summary, example, output):
    return unary(name, lambda x: x.copy() if x.dtype.kind in "iu" else np_fn(x), supported=NO_BOOL, upcast=True,
                 check=_check_rounding(name), doc=unary_doc(
                     summary, example, output, name=name, note="Integer inputs are returned unchanged (as a copy).",
                     raises="NotImplementedError: for bool or complex inputs."))


floor = _rounding("floor", np.floor, "Elementwise floor: the largest integer not greater than ``input``.",
                  "[-1.5, 1.5]", "tensor([-2.,  1.])")
ceil = _rounding("ceil", np.ceil, "Elementwise ceiling: the smallest integer not less than ``input``.",
                 "[-1.5, 1.5]", "tensor([-1.,  2.])")
trunc = _rounding("trunc", np.trunc, "Elementwise truncation toward zero.", "[-1.5, 1.5]", "tensor([-1.,  1.])")
frac = unary("frac", lambda x: x - np.trunc(x), supported=FLOATING, upcast=True, doc=unary_doc(
    "Elementwise fractional part ``input - trunc(input)``, with the sign of ``input``.", "[-1.5, 2.25]",
    "tensor([-0.5000,  0.2500])", name="frac", raises="NotImplementedError: for non-floating inputs."))


def _round_meta(input, *, decimals=0):
    """Elementwise rounding to ``decimals`` decimal places, halves to even (as ``numpy.round``).

    Args:
        input (Tensor): the input.
        decimals (int): decimal places to keep; negative values round to tens, hundreds, ...

    Returns:
        Tensor: the rounded values, of the input's dtype.

    Raises:
        NotImplementedError: for bool or complex inputs, and for integer inputs with ``decimals != 0``.
        TypeError: if ``decimals`` is not an int.

    Example:
        >>> import ember
        >>> ember.round(ember.tensor([0.5, 1.5, 2.5]))
        tensor([0., 2., 2.])
        >>> ember.round(ember.tensor([1.2345, 123.0]), decimals=2)
        tensor([  1.2300, 123.0000])
    """
    check_tensor("round", "input", 1, input)
    if not _is_int_scalar(decimals):
        raise TypeError(f"round(): argument 'decimals' must be int, not {type(decimals).__name__}")
    dtype = input.dtype
    if dtype is D.bool or (decimals != 0 and dtype.category == D.INTEGRAL):
        raise not_implemented("round", dtype)
    if dtype.is_complex:
        raise NotImplementedError("round is not supported for complex inputs")
    return MetaArray(input._data.shape, input._data.dtype)


def _round_cpu(input, *, decimals=0):
    data = input._data
    if data.dtype.kind in "iu":
        return data.copy()
    work = compute_dtype(data.dtype)
    x = data.astype(work)
    with np.errstate(all="ignore"):
        if decimals == 0:
            value = np.rint(x)
        elif decimals > 0:
            scale = work.type(10) ** decimals
            value = np.rint(x * scale) / scale
        else:
            scale = work.type(10) ** -decimals
            value = np.rint(x / scale) * scale
    return _as_array(value).astype(data.dtype, copy=False)


round = defop("round", _round_meta, cpu=_round_cpu, has_out=True, tags=("pointwise",))  # noqa: A001
make_inplace(round)


def _logit_meta(input, eps=None):
    """Elementwise log-odds ``log(input / (1 - input))``.

    Args:
        input (Tensor): probabilities.
        eps (float, optional): when given, ``input`` is first clamped to ``[eps, 1 - eps]``.

    Returns:
        Tensor: the log-odds; integer and bool inputs give the default float dtype.

    Raises:
        NotImplementedError: for complex inputs.

    Example:
        >>> import ember
        >>> ember.logit(ember.tensor([0.5, 0.75]))
        tensor([0.0000, 1.0986])
        >>> ember.logit(ember.tensor([0.0, 1.0]), eps=0.1)
        tensor([-2.1972,  2.1972])
    """
    check_tensor("logit", "input", 1, input)
    if eps is not None and not isinstance(eps, (int, float, np.number)):
        raise TypeError(f"logit(): argument 'eps' must be float, not {type(eps).__name__}")
    dtype = input.dtype
    if dtype.is_complex:
        raise not_implemented("logit", dtype)
    return MetaArray(input._data.shape, (D.get_default_dtype() if dtype.category < D.FLOATING else dtype).numpy_dtype)


def _logit_cpu(input, eps=None):
    dtype = input.dtype
    target = (D.get_default_dtype() if dtype.category < D.FLOATING else dtype).numpy_dtype
    x = input._data.astype(compute_dtype(target))
    with np.errstate(all="ignore"):
        if eps is not None:
            low, high = eps, 1 - eps
            x = np.where(x < low, low, np.where(x > high, high, x)).astype(x.dtype, copy=False)
        return _as_array(np.log(x / (1 - x))).astype(target, copy=False)


logit = defop("logit", _logit_meta, cpu=_logit_cpu, has_out=True, tags=("pointwise",))
make_inplace(logit)


def _polygamma_meta(n, input):
    """Elementwise ``n``-th derivative of the digamma function (``polygamma(0, x)`` is ``digamma(x)``).

    Args:
        n (int): the order of the derivative, at least 0.
        input (Tensor): the points.

    Returns:
        Tensor: the values; integer and bool inputs give the default float dtype.

    Raises:
        TypeError: if ``n`` is not an int.
        RuntimeError: if ``n`` is negative.
        NotImplementedError: for complex inputs.

    Example:
        >>> import ember
        >>> ember.polygamma(1, ember.tensor([1.0, 2.0]))
        tensor([1.6449, 0.6449])
    """
    if not _is_int_scalar(n):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    check_tensor("polygamma", "input", 2, input)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    dtype = input.dtype
    if dtype.is_complex:
        raise not_implemented("polygamma", dtype)
    return MetaArray(input._data.shape, (D.get_default_dtype() if dtype.category < D.FLOATING else dtype).numpy_dtype)


_psi, _polygamma = _special("psi"), _special("polygamma")


def _polygamma_cpu(n, input):
    dtype = input.dtype
    target = (D.get_default_dtype() if dtype.category < D.FLOATING else dtype).numpy_dtype
    x = input._data.astype(compute_dtype(target))
    with np.errstate(all="ignore"):
        value = _psi(x) if n == 0 else _polygamma(n, x)
    return _as_array(value).astype(target, copy=False)


polygamma = defop("polygamma", _polygamma_meta, cpu=_polygamma_cpu, has_out=True, tags=("pointwise",))
make_inplace(polygamma, self_index=1)  # x.polygamma_(n) computes polygamma(n, x)


def _nan_to_num_meta(input, nan=0.0, posinf=None, neginf=None):
    """Replace NaN, positive and negative infinity by finite numbers, elementwise.

    Args:
        input (Tensor): the input.
        nan (float): the value for NaN.
        posinf (float, optional): the value for +inf (default: the dtype's largest finite value).
        neginf (float, optional): the value for -inf (default: the dtype's lowest finite value).

    Returns:
        Tensor: of the input's dtype; integer and bool inputs come back unchanged (as a copy).
        Complex inputs have their real and imaginary parts replaced separately.

    Example:
        >>> import ember
        >>> ember.nan_to_num(ember.tensor([float("nan"), float("inf"), -1.0]), posinf=100.0)
        tensor([  0., 100.,  -1.])
    """
    check_tensor("nan_to_num", "input", 1, input)
    for name, value in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if value is not None and not isinstance(value, (int, float, np.number)):
            raise TypeError(f"nan_to_num(): argument '{name}' must be float, not {type(value).__name__}")
    return MetaArray(input._data.shape, input._data.dtype)


def _replace_non_finite(x, nan, posinf, neginf):
    """A copy of the float array ``x`` with NaN and infinities replaced (values cast to x's dtype)."""
    out = _array_namespace(x).array(x, copy=True)  # CuPy arrays stay on their device
    if np.isfinite(x).all():
        return out
    np.copyto(out, nan, where=np.isnan(x), casting="unsafe")
    np.copyto(out, posinf, where=x == np.inf, casting="unsafe")
    np.copyto(out, neginf, where=x == -np.inf, casting="unsafe")
    return out


def _nan_to_num_cpu(input, nan=0.0, posinf=None, neginf=None):
    data = input._data
    dtype = input.dtype
    if dtype.category < D.FLOATING:
        return data.copy()
    info = D.finfo(dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    with np.errstate(all="ignore"):
        if dtype.is_complex:
            out = np.empty_like(data)
            out.real = _replace_non_finite(data.real, nan, posinf, neginf)
            out.imag = _replace_non_finite(data.imag, nan, posinf, neginf)
            return out
        return _replace_non_finite(data.astype(compute_dtype(data.dtype)), nan, posinf, neginf).astype(data.dtype,
                                                                                                          copy=False)


nan_to_num = defop("nan_to_num", _nan_to_num_meta, cpu=_nan_to_num_cpu, has_out=True, tags=("pointwise",))
make_inplace(nan_to_num)


def _angle_np(x):
    if x.dtype.kind == "c":
        return np.angle(x)
    # real inputs: pi below zero, else 0 (NaN stays NaN; -0.0 gives 0 as in PyTorch)
    return np.where(np.less(x, 0), np.pi, np.where(np.isnan(x), np.nan, 0.0))


def _angle_dtype(dtype):
    if dtype.is_complex:
        return dtype.to_real()
    return D.get_default_dtype() if dtype.category < D.FLOATING else dtype


angle = unary("angle", _angle_np, result=_angle_dtype, upcast=True, has_inplace=False, doc=unary_doc(
    "Elementwise argument (phase) in radians: of complex numbers, or pi / 0 for negative / other real numbers.",
    "[-1+0j, 1j]", "tensor([3.1416, 1.5708])", name="angle",
    note="Complex inputs give their real dtype; integer and bool inputs the default float dtype."))

conj_physical = unary("conj_physical", np.conjugate, doc=unary_doc(
    "Elementwise complex conjugate, computed into a new tensor (a copy for real inputs).", "[1+2j, 3-1j]",
    "tensor([1.-2.j, 3.+1.j])", name="conj_physical"))


def _conj_meta(input):
    """The complex conjugate of ``input``; real tensors are returned as they are (the same tensor object).

    Ember has no lazy conjugate bit: for complex inputs this computes :func:`ember.conj_physical`.

    Args:
        input (Tensor): the input.

    Returns:
        Tensor: the conjugate (``input`` itself unless it is complex).

    Example:
        >>> import ember
        >>> ember.conj(ember.tensor([1+2j]))
        tensor([1.-2.j])
        >>> x = ember.tensor([1.0])
        >>> ember.conj(x) is x
        True
    """
    check_tensor("conj", "input", 1, input)
    return MetaArray(input._data.shape, input._data.dtype)


def _conj_decomposition(input):
    _conj_meta(input)
    return conj_physical(input) if input.dtype.is_complex else input


conj = defop("conj", _conj_meta, category=COMPOSITE, decomposition=_conj_decomposition, tags=("pointwise",))


def _polygamma_method(self, n):
    """``self.polygamma(n)`` is ``ember.polygamma(n, self)``."""
    return polygamma(n, self)


def _polygamma_inplace_method(self, n):
    """``self.polygamma_(n)``: ``ember.polygamma(n, self)`` written into ``self``."""
    return polygamma.inplace(self, n)


#: ``polygamma``'s methods take ``self`` as the second argument: installed with the operators.
OPERATORS = {"polygamma": _polygamma_method, "polygamma_": _polygamma_inplace_method}


#: Ops of this module that are also Tensor methods (see ember._tensor_methods); polygamma's are OPERATORS.
METHODS = [name for name in list(registry)[_FIRST_OP:] if name not in ("polygamma", "polygamma_")]

del _name, _fn, _summary, _x, _y, _supported
