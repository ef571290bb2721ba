"""OpInfos of the pointwise ops.

Sample generators cover, for every dtype: zero-dim, 1-d, 3-d, empty,
non-contiguous and transposed inputs, broadcasting, Python scalars on the
sides PyTorch accepts them, a second operand of another dtype (promotion),
and the values that matter for the op (NaN and infinities, zeros, halves for
rounding, a domain such as ``(-1, 1)`` for ``asin``). References compute in
float64/complex128 from numpy/scipy.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import scipy.special as sp

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, op_db, register_opinfo
from ._common import maker, scalar_for

_ALL = ALL_TYPES_AND_COMPLEX
_NO_BOOL = tuple(d for d in _ALL if d is not D.bool)
_NO_COMPLEX = tuple(d for d in _ALL if not d.is_complex)
_REAL_NO_BOOL = tuple(d for d in _NO_COMPLEX if d is not D.bool)
_FLOATING = (D.float16, D.bfloat16, D.float32, D.float64)
_FLOATING_AND_COMPLEX = _FLOATING + (D.complex64, D.complex128)
_INTEGRAL = (D.uint8, D.int8, D.int16, D.int32, D.int64)
_INTEGRAL_AND_BOOL = (D.bool,) + _INTEGRAL

_NAN, _INF = float("nan"), float("inf")

#: Whether binary ops get samples with a Python number as ``input`` (``ember.pow(2, t)``). Off while
#: tests/test_ops.py::test_inplace_variant takes every sample's ``input`` as the in-place target.
SCALAR_INPUT_SAMPLES = True


# -- sample generators -------------------------------------------------------------------------


def _range(dtype, low, high):
    """``(low, high)`` adjusted to the dtype: integer ranges are rounded inward, uint8 starts at 0."""
    if dtype.category == D.INTEGRAL:
        low = None if low is None else int(np.ceil(low))
        high = None if high is None else int(np.floor(high))
        if dtype is D.uint8:
            low = 0 if low is None else max(low, 0)
            high = 9 if high is None else high
        if low is not None and high is not None and high < low:
            high = low
    return low, high


def _specials(values, dtype, device):
    """A tensor of ``values`` (NaN, infinities, ...) of ``dtype``."""
    import ember

    return ember.tensor(values, dtype=dtype, device=device)


def _special_values(dtype, complex_specials=True):
    """NaN, infinities, signed zeros and ordinary values in the dtype, or None for integer/bool dtypes.

    Complex NaN/infinity values are left out unless ``complex_specials``: the math functions'
    special cases differ between libraries there (and a finite part next to an infinite one
    can't be compared with a tolerance).
    """
    import ember

    if dtype.category < D.FLOATING or (dtype.is_complex and not complex_specials):
        return None
    values = [_NAN, _INF, -_INF, 0.0, -0.0, 1.5, -2.5]
    if dtype.is_complex:
        values = [complex(_NAN, 1), complex(1, _INF), complex(-_INF, 0), 0j, 1.5 - 2j, complex(2, _NAN), -2.5 + 1j]
    return ember.tensor(values, dtype=dtype)


def unary_samples(opinfo, device, dtype, requires_grad, *, low=None, high=None, exclude_zero=False, specials=False,
                  complex_specials=False):
    """Shapes every unary op should handle (values in ``[low, high]``), and NaN/inf values when ``specials``."""
    low, high = _range(dtype, low, high)
    make = maker(device, dtype, requires_grad, low=low, high=high, exclude_zero=exclude_zero)
    yield SampleInput(make(()), name="zero-dim")
    yield SampleInput(make((5,)), name="1-d")
    yield SampleInput(make((2, 3, 4)), name="3-d")
    yield SampleInput(make((0, 2)), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), name="transposed view")
    if specials and _special_values(dtype, complex_specials) is not None:
        yield SampleInput(_special_values(dtype, complex_specials).to(device), name="nan and inf")


def _unary(**kwargs):
    return lambda *a: unary_samples(*a, **kwargs)


def binary_samples(opinfo, device, dtype, requires_grad, *, exclude_zero=False, low=None, high=None,
                   scalars="both", other_low=None, other_high=None, mixed=True):
    """Shapes every broadcasting binary op should handle.

    Args:
        scalars: where Python numbers may stand: ``"both"``, ``"other"`` or ``"none"``.
        exclude_zero: no zeros in the second operand (divisors).
        other_low, other_high: the second operand's range (default: ``low``, ``high``).
        mixed: add a sample whose second operand has another dtype (promotion).
    """
    low, high = _range(dtype, low, high)
    o_low, o_high = _range(dtype, low if other_low is None else other_low, high if other_high is None else other_high)
    make = maker(device, dtype, requires_grad, low=low, high=high)
    make_other = maker(device, dtype, requires_grad, seed=1, low=o_low, high=o_high, exclude_zero=exclude_zero)
    yield SampleInput(make(()), (make_other(()),), name="zero-dim")
    yield SampleInput(make((5,)), (make_other((5,)),), name="1-d")
    yield SampleInput(make((2, 3)), (make_other((2, 3)),), name="2-d")
    yield SampleInput(make((2, 1, 3)), (make_other((4, 3)),), name="broadcast")
    yield SampleInput(make((0, 3)), (make_other((3,)),), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (make_other((3, 4), noncontiguous=True),), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (make_other((3, 4)),), name="transposed view")
    yield SampleInput(make((3,)), (make_other(()),), name="zero-dim other")
    if scalars != "none":
        yield SampleInput(make((3,)), (_scalar(dtype, o_low, o_high),), name="python scalar")
    if scalars == "both" and SCALAR_INPUT_SAMPLES:
        yield SampleInput(_scalar(dtype, low, high), (make_other((3,)),), name="python scalar input")
    if mixed:
        other_dtype = D.float64 if dtype.category < D.FLOATING else D.int32
        make_mixed = maker(device, other_dtype, False, seed=2, low=o_low, high=o_high, exclude_zero=exclude_zero)
        yield SampleInput(make((2, 3)), (make_mixed((2, 3)),), name="mixed dtypes")


def _binary(**kwargs):
    return lambda *a: binary_samples(*a, **kwargs)


def _scalar(dtype, low, high):
    """A Python number of the dtype's category inside ``[low, high]`` when given."""
    value = scalar_for(dtype)
    if dtype is D.bool or dtype.is_complex:
        return value
    if low is not None and value < low:
        value = type(value)(low) if dtype.category == D.INTEGRAL else low + 0.25
    if high is not None and value > high:
        value = type(value)(high) if dtype.category == D.INTEGRAL else high - 0.25
    return value


# -- references ----------------------------------------------------------------------------------

_WIDE = {"b": np.float64, "i": np.float64, "u": np.float64, "f": np.float64, "c": np.complex128}


def _wide(x):
    """``x`` (an array) in float64/complex128, for references of float-valued ops."""
    if isinstance(x, np.ndarray):
        if x.dtype.name == "bfloat16":
            return x.astype(np.float64)
        return x.astype(_WIDE[x.dtype.kind])
    return x


def _wide_floats(x):
    """Floating/complex arrays widened to float64/complex128; integer and bool arrays unchanged."""
    if isinstance(x, np.ndarray) and (x.dtype.kind in "fc" or x.dtype.name == "bfloat16"):
        return _wide(x)
    return x


def _float_ref(fn):
    """A reference computing ``fn`` in float64/complex128 (the op's result is float-valued)."""

    def ref(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*(_wide(a) for a in args), **kwargs)

    return ref


def _same_ref(fn):
    """A reference keeping integer dtypes (integer arithmetic) and widening floats."""

    def ref(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*(_wide_floats(a) for a in args), **kwargs)

    return ref


def _np_int_dtype(*args):
    """The dtype numpy computes ``args`` in, for references of integer ops."""
    return np.result_type(*args)


# -- error inputs ---------------------------------------------------------------------------------


def _errors(*cases):
    """``cases``: ``(make_args, error, regex)`` where ``make_args(ember, device)`` returns ``(input, args, kwargs)``."""

    def gen(opinfo, device):
        import ember

        for make_args, error, regex in cases:
            input, args, kwargs = make_args(ember, device)
            yield ErrorInput(SampleInput(input, args, kwargs), error, regex)

    return gen


def _t(ember, device, values, dtype=None):
    return ember.tensor(values, dtype=dtype, device=device)


def _unary_dtype_error(dtype, regex="not implemented for"):
    return (lambda e, d: (_t(e, d, [1, 0], dtype), (), {}), NotImplementedError, regex)


_BROADCAST_ERROR = (lambda e, d: (e.ones(2, 3, device=d), (e.ones(4, device=d),), {}), RuntimeError,
                    r"size of tensor a \(3\) must match the size of tensor b \(4\)")
_TEXT_ERROR = (lambda e, d: (e.ones(2, device=d), ("text",), {}), TypeError, "must be Tensor")
_NOT_A_TENSOR = (lambda e, d: ([1.0, 2.0], (), {}), TypeError, "must be Tensor")


def _scalar_other_error(regex="must be Tensor, not float"):
    return (lambda e, d: (e.ones(2, device=d), (2.0,), {}), TypeError, regex)


def _scalar_input_error(regex="must be Tensor, not float"):
    return (lambda e, d: (2.0, (e.ones(2, device=d),), {}), TypeError, regex)


def _binary_dtype_error(dtype):
    return (lambda e, d: (_t(e, d, [1, 0], dtype), (_t(e, d, [1, 1], dtype),), {}), NotImplementedError,
            "not implemented for")


# -- the table --------------------------------------------------------------------------------------


def _add_errors(opinfo, device):
    import ember

    yield from _errors(_BROADCAST_ERROR, (lambda e, d: (e.ones(2, device=d), ("text",), {}), TypeError,
                                          "must be Tensor or Number"))(opinfo, device)
    ints = ember.tensor([1, 2], device=device)
    yield ErrorInput(SampleInput(ints, (ints,), {"alpha": 0.5}), RuntimeError, "alpha must not be a floating point")


def _sub_errors(opinfo, device):
    import ember

    yield from _add_errors(opinfo, device)
    flags = ember.tensor([True, False], device=device)
    yield ErrorInput(SampleInput(flags, (flags,)), RuntimeError, "Subtraction, the `-` operator, with two bool tensors")


def _alpha_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad)
    if dtype is not D.bool:
        make = maker(device, dtype, requires_grad, seed=1)
        alpha = 2 if dtype.category == D.INTEGRAL else 0.5
        yield SampleInput(make((2, 3)), (make((3,)),), {"alpha": alpha}, name="alpha")


register_opinfo(OpInfo("add", _alpha_samples, ref=lambda a, b, alpha=1: np.add(a, np.multiply(b, alpha)),
                       error_inputs=_add_errors))
register_opinfo(OpInfo("sub", _alpha_samples, dtypes=_NO_BOOL,
                       ref=lambda a, b, alpha=1: np.subtract(a, np.multiply(b, alpha)), error_inputs=_sub_errors))
register_opinfo(OpInfo("mul", binary_samples, ref=_same_ref(np.multiply), error_inputs=_errors(
    _BROADCAST_ERROR, (lambda e, d: (e.ones(2, device=d), ("text",), {}), TypeError, "must be Tensor or Number"))))


def _div_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, exclude_zero=True)
    if dtype in _REAL_NO_BOOL:
        make = maker(device, dtype, requires_grad, seed=3)
        make_other = maker(device, dtype, requires_grad, seed=4, exclude_zero=True)
        for mode in ("trunc", "floor"):
            yield SampleInput(make((2, 3)), (make_other((2, 3)),), {"rounding_mode": mode}, name=mode)
            divisor = 3 if dtype is D.uint8 else -3 if dtype.category == D.INTEGRAL else -2.5
            yield SampleInput(make((4,)), (divisor,), {"rounding_mode": mode}, name=f"{mode} scalar")
        yield SampleInput(make((3,)), (make_other((3,)),), {"rounding_mode": None}, name="rounding_mode None")


def _trunc_divide_ref(a, b):
    if np.result_type(a, b).kind in "iu":
        quotient = np.floor_divide(a, b)
        return quotient + ((np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0)))
    return np.trunc(np.true_divide(a, b))


def _div_ref(a, b, rounding_mode=None):
    if rounding_mode is None:
        return _float_ref(np.true_divide)(a, b)
    if rounding_mode == "floor":
        return _same_ref(np.floor_divide)(a, b)
    return _same_ref(_trunc_divide_ref)(a, b)


_DIV_ERRORS = (
    _BROADCAST_ERROR,
    (lambda e, d: (e.ones(2, device=d), (2,), {"rounding_mode": "round"}), RuntimeError,
     "expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"),
    (lambda e, d: (_t(e, d, [True]), (_t(e, d, [True]),), {"rounding_mode": "floor"}), NotImplementedError,
     "not implemented for 'Bool'"),
    (lambda e, d: (_t(e, d, [1j]), (_t(e, d, [1j]),), {"rounding_mode": "trunc"}), NotImplementedError,
     "not implemented for 'ComplexFloat'"),
    (lambda e, d: (_t(e, d, [1, 2]), (0,), {"rounding_mode": "trunc"}), RuntimeError, "ZeroDivisionError"),
)
register_opinfo(OpInfo("div", _div_samples, ref=_div_ref, error_inputs=_errors(*_DIV_ERRORS)))

_INT_DIVISION_ERRORS = (
    _BROADCAST_ERROR,
    _binary_dtype_error(D.bool),
    _binary_dtype_error(D.complex64),
    (lambda e, d: (_t(e, d, [1, 2]), (_t(e, d, [1, 0]),), {}), RuntimeError, "ZeroDivisionError"),
)
def _floor_divide_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, exclude_zero=True)
    if dtype in _FLOATING:
        # Python's convention, where floor(a / b) is not it: 1 // 0.1 is 9, inf // 3 is NaN, -1 // inf is -1
        a = _specials([1.0, 5.5, -0.3, _INF, -1.0, 1.0, -_INF], dtype, device)
        b = _specials([0.1, 0.1, 0.1, 3.0, _INF, -_INF, -2.0], dtype, device)
        yield SampleInput(a, (b,), name="python convention")


register_opinfo(OpInfo("floor_divide", _floor_divide_samples, dtypes=_REAL_NO_BOOL,
                       ref=_same_ref(np.floor_divide), error_inputs=_errors(*_INT_DIVISION_ERRORS)))
register_opinfo(OpInfo("remainder", _binary(exclude_zero=True), dtypes=_REAL_NO_BOOL,
                       ref=_same_ref(np.remainder), error_inputs=_errors(*_INT_DIVISION_ERRORS)))
register_opinfo(OpInfo("fmod", _binary(exclude_zero=True, scalars="other"), dtypes=_REAL_NO_BOOL,
                       ref=_same_ref(np.fmod),
                       error_inputs=_errors(*_INT_DIVISION_ERRORS, _scalar_input_error("must be Tensor, not float"))))


# comparisons

def _comparison_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, scalars="other")
    make = maker(device, dtype, requires_grad)
    x = make((6,))
    yield SampleInput(x, (x.clone(),), name="equal values")
    if _special_values(dtype) is not None:
        specials = _special_values(dtype).to(device)
        yield SampleInput(specials, (specials.clone(),), name="nan and inf")
        yield SampleInput(specials[1:], (specials[:-1],), name="nan and inf, shifted")


def _comparison_errors(name, ordered):
    cases = [_BROADCAST_ERROR, (lambda e, d: (e.ones(2, device=d), ("text",), {}), TypeError, "must be Tensor or Number"),
             _scalar_input_error()]
    if ordered:
        cases.append(_binary_dtype_error(D.complex64))
        cases.append((lambda e, d: (e.ones(2, device=d), (1j,), {}), NotImplementedError, "ComplexFloat"))
    return _errors(*cases)


_COMPARISONS = (("eq", np.equal, False), ("ne", np.not_equal, False), ("lt", np.less, True),
                ("le", np.less_equal, True), ("gt", np.greater, True), ("ge", np.greater_equal, True))
for _name, _fn, _ordered in _COMPARISONS:
    register_opinfo(OpInfo(_name, _comparison_samples, dtypes=_NO_COMPLEX if _ordered else _ALL, ref=_same_ref(_fn),
                           error_inputs=_comparison_errors(_name, _ordered), supports_autograd=False))


# unary math


def _neg_errors(opinfo, device):
    import ember

    yield ErrorInput(SampleInput(ember.tensor([True], device=device)), RuntimeError, "Negation, the `-` operator")
    yield ErrorInput(SampleInput([1.0]), TypeError, "must be Tensor")


register_opinfo(OpInfo("neg", _unary(specials=True), dtypes=_NO_BOOL, ref=np.negative, error_inputs=_neg_errors))


def _abs_errors(opinfo, device):
    import ember

    yield ErrorInput(SampleInput(ember.tensor([True], device=device)), NotImplementedError, "not implemented for 'Bool'")


_ABS_INPLACE = "PyTorch refuses in-place abs of complex tensors (the modulus is real), though the result type casts"
register_opinfo(OpInfo("abs", _unary(specials=True), dtypes=_NO_BOOL, ref=_same_ref(np.abs), error_inputs=_abs_errors,
                       skips=tuple(("test_inplace_variant", d, _ABS_INPLACE) for d in (D.complex64, D.complex128))))

# (name, ref, sample kwargs, dtypes, tolerances)
_FLOAT_UNARY = [
    ("exp", np.exp, {}, _ALL),
    ("exp2", np.exp2, {}, _ALL),
    ("expm1", np.expm1, {}, _ALL),
    ("log", np.log, {"low": 0.1}, _ALL),
    ("log2", np.log2, {"low": 0.1}, _ALL),
    ("log10", np.log10, {"low": 0.1}, _ALL),
    ("log1p", np.log1p, {"low": -0.9}, _ALL),
    ("sqrt", np.sqrt, {"low": 0.1}, _ALL),
    ("rsqrt", lambda x: 1 / np.sqrt(x), {"low": 0.1}, _ALL),
    ("reciprocal", np.reciprocal, {"exclude_zero": True}, _ALL),
    ("sin", np.sin, {}, _ALL),
    ("cos", np.cos, {}, _ALL),
    ("tan", np.tan, {"low": -1.4, "high": 1.4}, _ALL),
    ("asin", np.arcsin, {"low": -1, "high": 1}, _ALL),
    ("acos", np.arccos, {"low": -1, "high": 1}, _ALL),
    ("atan", np.arctan, {}, _ALL),
    ("sinh", np.sinh, {}, _ALL),
    ("cosh", np.cosh, {}, _ALL),
    ("tanh", np.tanh, {}, _ALL),
    ("asinh", np.arcsinh, {}, _ALL),
    ("acosh", np.arccosh, {"low": 1, "high": 9}, _ALL),
    ("atanh", np.arctanh, {"low": -0.95, "high": 0.95}, _ALL),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), {}, _ALL),
    ("erf", sp.erf, {"low": -3, "high": 3}, _NO_COMPLEX),
    ("erfc", sp.erfc, {"low": -3, "high": 3}, _NO_COMPLEX),
    ("erfinv", sp.erfinv, {"low": -0.95, "high": 0.95}, _NO_COMPLEX),
    ("lgamma", sp.gammaln, {"low": 0.1, "high": 9}, _NO_COMPLEX),
    ("digamma", sp.psi, {"low": 0.1, "high": 9}, _NO_COMPLEX),
    ("i0", sp.i0, {}, _NO_COMPLEX),
    ("sinc", np.sinc, {}, _ALL),
]
# complex64 results of functions whose argument is scaled first (pi * z) carry a few ulps more error
_FLOAT_UNARY_TOLERANCES = {"sinc": {D.complex64: (1e-5, 1e-5)}}
for _name, _fn, _kwargs, _dtypes in _FLOAT_UNARY:
    _cases = [_NOT_A_TENSOR]
    if _dtypes is _NO_COMPLEX:
        _cases.append(_unary_dtype_error(D.complex64, "not implemented for 'ComplexFloat'"))
    register_opinfo(OpInfo(_name, _unary(specials=True, **_kwargs), dtypes=_dtypes, ref=_float_ref(_fn),
                           error_inputs=_errors(*_cases), tolerances=_FLOAT_UNARY_TOLERANCES.get(_name, {})))



def _output_backward_ref(factor):
    """The reference of ``tanh_backward``/``sigmoid_backward``: ``g * conj(factor(y))``."""
    return _float_ref(lambda g, y: g * np.conjugate(factor(y)))


# gradients from an output in tanh's range (-1, 1) / sigmoid's (0, 1); two tensors, as in PyTorch (whose
# ATen op refuses a number with a schema RuntimeError, where ember's TypeError names the argument: not listed)
for _name, _factor, _low in (("tanh_backward", lambda y: 1 - y * y, -1), ("sigmoid_backward", lambda y: y - y * y, 0)):
    register_opinfo(OpInfo(_name, _binary(scalars="none", other_low=_low, other_high=1, mixed=False),
                           dtypes=_FLOATING_AND_COMPLEX, ref=_output_backward_ref(_factor),
                           torch_name=f"ops.aten.{_name}",
                           error_inputs=_errors(_BROADCAST_ERROR, _binary_dtype_error(D.int64),
                                                _binary_dtype_error(D.bool))))


def _threshold_backward_samples(opinfo, device, dtype, requires_grad):
    """``binary_samples``' tensor pairs with a threshold: 0 (relu's), and 1 for a second look."""
    for i, sample in enumerate(binary_samples(opinfo, device, dtype, requires_grad, scalars="none")):
        yield SampleInput(sample.input, (*sample.args, 1 if i % 2 else 0), name=sample.name)


def _threshold_backward_ref(g, y, threshold):
    with np.errstate(all="ignore"):
        g, y = _wide_floats(g), _wide_floats(y)
        return np.where(y <= threshold, np.zeros((), np.result_type(g, y)), g)


register_opinfo(OpInfo("threshold_backward", _threshold_backward_samples, dtypes=_REAL_NO_BOOL,
                       ref=_threshold_backward_ref, torch_name="ops.aten.threshold_backward",
                       error_inputs=_errors(
                           (lambda e, d: (e.ones(2, 3, device=d), (e.ones(4, device=d), 0), {}), RuntimeError,
                            r"size of tensor a \(3\) must match the size of tensor b \(4\)"),
                           (lambda e, d: (e.ones(2, dtype=e.complex64, device=d),
                                          (e.ones(2, dtype=e.complex64, device=d), 0), {}),
                            NotImplementedError, "not implemented for 'ComplexFloat'"))))


def _square_ref(x):
    return np.square(x.astype(np.int64) if x.dtype == np.bool_ else _wide_floats(x))


register_opinfo(OpInfo("square", _unary(specials=True), ref=_square_ref))
register_opinfo(OpInfo("deg2rad", _unary(specials=True), dtypes=_NO_COMPLEX, ref=_float_ref(np.deg2rad),
                       error_inputs=_errors((lambda e, d: (_t(e, d, [1j]), (), {}), RuntimeError,
                                             "deg2rad is not supported for complex tensors"))))
register_opinfo(OpInfo("rad2deg", _unary(specials=True), dtypes=_NO_COMPLEX, ref=_float_ref(np.rad2deg),
                       error_inputs=_errors((lambda e, d: (_t(e, d, [1j]), (), {}), RuntimeError,
                                             "rad2deg is not supported for complex tensors"))))


def _sign_ref(x):
    if x.dtype == np.bool_:
        return x
    x = _wide_floats(x)
    return np.where(np.isnan(x), 0, np.sign(x)) if x.dtype.kind == "f" else np.sign(x)


def _sgn_ref(x):
    if x.dtype.kind != "c":
        return _sign_ref(x)
    x = _wide(x)
    modulus = np.abs(x)
    return np.where(modulus == 0, 0, x / np.where(modulus == 0, 1, modulus))


register_opinfo(OpInfo("sign", _unary(specials=True), dtypes=_NO_COMPLEX, ref=_sign_ref, error_inputs=_errors(
    (lambda e, d: (_t(e, d, [1j]), (), {}), NotImplementedError, "sgn"))))
register_opinfo(OpInfo("sgn", _unary(specials=True), ref=_sgn_ref))


def _rounding_samples(opinfo, device, dtype, requires_grad):
    yield from unary_samples(opinfo, device, dtype, requires_grad, specials=True)
    if dtype.category == D.FLOATING:
        import ember

        halves = ember.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.25, -3.75], dtype=dtype, device=device)
        yield SampleInput(halves, name="halves")


_ROUNDING_ERRORS = (_unary_dtype_error(D.bool, "not implemented for 'Bool'"),
                    _unary_dtype_error(D.complex64, "not supported for complex inputs"), _NOT_A_TENSOR)
register_opinfo(OpInfo("floor", _rounding_samples, dtypes=_REAL_NO_BOOL, ref=_same_ref(np.floor),
                       error_inputs=_errors(*_ROUNDING_ERRORS)))
register_opinfo(OpInfo("ceil", _rounding_samples, dtypes=_REAL_NO_BOOL, ref=_same_ref(np.ceil),
                       error_inputs=_errors(*_ROUNDING_ERRORS)))
register_opinfo(OpInfo("trunc", _rounding_samples, dtypes=_REAL_NO_BOOL, ref=_same_ref(np.trunc),
                       error_inputs=_errors(*_ROUNDING_ERRORS)))
register_opinfo(OpInfo("frac", _rounding_samples, dtypes=_FLOATING, ref=_same_ref(lambda x: x - np.trunc(x)),
                       error_inputs=_errors(_unary_dtype_error(D.int64, "not implemented for 'Long'"),
                                            _unary_dtype_error(D.complex64, "ComplexFloat"))))


def _round_samples(opinfo, device, dtype, requires_grad):
    yield from _rounding_samples(opinfo, device, dtype, requires_grad)
    if dtype.category == D.FLOATING:
        make = maker(device, dtype, requires_grad, low=-200, high=200)
        for decimals in (1, 2, -1):
            yield SampleInput(make((2, 3)), (), {"decimals": decimals}, name=f"decimals={decimals}")


def _round_ref(x, decimals=0):
    if x.dtype.kind in "iu":
        return x
    wide = _wide(x)
    if decimals >= 0:
        return np.rint(wide * 10.0 ** decimals) / 10.0 ** decimals
    return np.rint(wide / 10.0 ** -decimals) * 10.0 ** -decimals


register_opinfo(OpInfo("round", _round_samples, dtypes=_REAL_NO_BOOL, ref=_round_ref, error_inputs=_errors(
    *_ROUNDING_ERRORS,
    (lambda e, d: (_t(e, d, [1, 2]), (), {"decimals": 1}), NotImplementedError, "not implemented for 'Long'"),
    (lambda e, d: (_t(e, d, [1.5]), (), {"decimals": 1.5}), TypeError, "decimals"),
)))


def _logit_samples(opinfo, device, dtype, requires_grad):
    low, high = (0, 1) if dtype.category < D.FLOATING else (0.05, 0.95)
    yield from unary_samples(opinfo, device, dtype, requires_grad, low=low, high=high)
    if dtype.category < D.FLOATING:
        return
    edges = _specials([0.0, 0.1, 0.5, 0.95, 1.0, -0.5, 1.5, _NAN], dtype, device)
    yield SampleInput(edges, name="edges and outside [0, 1]")
    yield SampleInput(edges, (0.2,), name="eps=0.2")
    yield SampleInput(edges, (), {"eps": 0.0}, name="eps=0")
    yield SampleInput(edges, (), {"eps": 0.75}, name="eps > 0.5")


def _logit_ref(x, eps=None):
    x = _wide(x)
    if eps is not None:
        x = np.where(x < eps, eps, np.where(x > 1 - eps, 1 - eps, x))
    with np.errstate(all="ignore"):
        return np.log(x / (1 - x))


register_opinfo(OpInfo("logit", _logit_samples, dtypes=_NO_COMPLEX, ref=_logit_ref, error_inputs=_errors(
    _unary_dtype_error(D.complex64, "ComplexFloat"), _NOT_A_TENSOR)))


def _polygamma_samples(opinfo, device, dtype, requires_grad):
    low, high = _range(dtype, 0.5, 9)
    make = maker(device, dtype, requires_grad, low=low, high=high)
    for n in (0, 1, 2, 3):
        yield SampleInput(n, (make((2, 3)),), name=f"n={n}")
    yield SampleInput(1, (make(()),), name="zero-dim")
    yield SampleInput(2, (make((0, 2)),), name="empty")
    yield SampleInput(1, (make((3, 4), noncontiguous=True),), name="noncontiguous")
    yield SampleInput(1, (make((4, 3)).t(),), name="transposed view")


def _polygamma_ref(n, x):
    x = _wide(x)
    return sp.psi(x) if n == 0 else sp.polygamma(n, x)


register_opinfo(OpInfo(
    "polygamma", _polygamma_samples, dtypes=_NO_COMPLEX, ref=_polygamma_ref,
    error_inputs=_errors(
        (lambda e, d: (-1, (e.ones(2, device=d),), {}), RuntimeError, "does not support negative n"),
        (lambda e, d: (1.5, (e.ones(2, device=d),), {}), TypeError, "must be int, not float"),
        (lambda e, d: (1, (_t(e, d, [1j]),), {}), NotImplementedError, "ComplexFloat"),
    ),
    tolerances={D.float32: (1e-5, 1e-5)},
    skips=(("test_inplace_variant", None,
            "the in-place form is x.polygamma_(n): self is polygamma's second argument, not the sample's input"),),
))


def _nan_to_num_samples(opinfo, device, dtype, requires_grad):
    yield from unary_samples(opinfo, device, dtype, requires_grad, specials=True, complex_specials=True)
    specials = _special_values(dtype)
    if specials is not None:
        specials = specials.to(device)
        yield SampleInput(specials, (1.5,), name="nan=1.5")
        yield SampleInput(specials, (), {"nan": -1.0, "posinf": 100.0, "neginf": -100.0}, name="all replacements")
        yield SampleInput(specials, (), {"posinf": 1e300}, name="posinf beyond the dtype")
    else:
        yield SampleInput(maker(device, dtype, requires_grad)((3,)), (), {"nan": 2.0, "posinf": 1e30},
                          name="integer input")


def _nan_to_num_ref(x, nan=0.0, posinf=None, neginf=None):
    if x.dtype.kind in "biu":
        return x
    real_dtype = {"complex64": np.float32, "complex128": np.float64}.get(x.dtype.name, x.dtype)
    info = ml_dtypes.finfo(real_dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf

    def fix(v):
        v = v.astype(np.float64)
        return np.where(np.isnan(v), nan, np.where(v == _INF, posinf, np.where(v == -_INF, neginf, v)))

    # a replacement beyond the dtype's range (posinf=1e300 in float16) becomes inf, as in PyTorch
    with np.errstate(over="ignore"):
        if x.dtype.kind == "c":
            return (fix(x.real) + 1j * fix(x.imag)).astype(x.dtype)
        return fix(x).astype(x.dtype)


register_opinfo(OpInfo("nan_to_num", _nan_to_num_samples, ref=_nan_to_num_ref, error_inputs=_errors(_NOT_A_TENSOR)))


def _angle_ref(x):
    if x.dtype.kind == "c":
        return np.angle(_wide(x))
    x = _wide(x)
    return np.where(x < 0, np.pi, np.where(np.isnan(x), _NAN, 0.0))


register_opinfo(OpInfo("angle", _unary(specials=True), ref=_angle_ref))
register_opinfo(OpInfo("conj_physical", _unary(specials=True), ref=np.conjugate))
def _torch_conj(x):
    return x.conj().resolve_conj()  # a PyTorch tensor: its lazy conjugate bit resolved for comparison


register_opinfo(OpInfo("conj", _unary(specials=True), ref=np.conjugate, torch_fn=_torch_conj))


# predicates

def _predicate(name, fn, dtypes=_ALL, errors=()):
    register_opinfo(OpInfo(name, _unary(specials=True, complex_specials=True), dtypes=dtypes, ref=_same_ref(fn),
                           error_inputs=_errors(
        _NOT_A_TENSOR, *errors), supports_autograd=False))


def _isreal_ref(x):
    return np.equal(np.imag(x), 0) if x.dtype.kind == "c" else np.ones(x.shape, bool)


_predicate("isnan", np.isnan)
_predicate("isinf", np.isinf)
_predicate("isfinite", np.isfinite)
_predicate("isreal", _isreal_ref)
_predicate("isposinf", lambda x: np.equal(x, _INF), _NO_COMPLEX, (
    (lambda e, d: (_t(e, d, [1j]), (), {}), RuntimeError, "isposinf does not support complex inputs"),))
_predicate("isneginf", lambda x: np.equal(x, -_INF), _NO_COMPLEX, (
    (lambda e, d: (_t(e, d, [1j]), (), {}), RuntimeError, "isneginf does not support complex inputs"),))


# logical and bitwise

register_opinfo(OpInfo("logical_not", _unary(specials=True), ref=np.logical_not, supports_autograd=False))
for _name, _fn in (("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)):
    register_opinfo(OpInfo(_name, _binary(scalars="none"), ref=_same_ref(_fn), supports_autograd=False,
                           error_inputs=_errors(_BROADCAST_ERROR, _scalar_other_error("must be Tensor, not float"))))

register_opinfo(OpInfo("bitwise_not", _unary(), dtypes=_INTEGRAL_AND_BOOL, ref=np.invert, supports_autograd=False,
                       error_inputs=_errors(_unary_dtype_error(D.float32, "not implemented for 'Float'"))))


def _bitwise_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, mixed=False)
    if dtype.category == D.INTEGRAL:
        make_mixed = maker(device, D.int64, False, seed=2, low=0, high=9)
        yield SampleInput(maker(device, dtype, False)((2, 3)), (make_mixed((2, 3)),), name="mixed dtypes")


def _shift_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    amounts = maker(device, dtype, requires_grad, seed=1, low=0, high=9)
    yield SampleInput(make(()), (amounts(()),), name="zero-dim")
    yield SampleInput(make((2, 3)), (amounts((2, 3)),), name="2-d, shifts up to 9 (past int8's width)")
    yield SampleInput(make((2, 1, 3)), (amounts((4, 3)),), name="broadcast")
    yield SampleInput(make((0, 3)), (amounts((3,)),), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (amounts((3, 4), noncontiguous=True),), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (amounts((3, 4)),), name="transposed view")
    yield SampleInput(make((3,)), (2,), name="python scalar")
    if SCALAR_INPUT_SAMPLES:
        yield SampleInput(3, (amounts((3,)),), name="python scalar input")
    if dtype is not D.uint8:
        yield SampleInput(make((3,)), (-1,), name="negative shift")
    yield SampleInput(make((3,)), (70,), name="shift past 64 bits")


def _shift_ref(np_fn):
    def ref(a, b):
        dtype = _np_int_dtype(a, b)
        a, b = np.asarray(a).astype(dtype), np.asarray(b).astype(np.int64)
        bits = dtype.itemsize * 8
        out_of_range = (b < 0) | (b >= bits)
        shifted = np_fn(a, np.where(out_of_range, 0, b).astype(dtype))
        if np_fn is np.left_shift:
            return np.where(out_of_range, 0, shifted).astype(dtype)
        return np.where(out_of_range, np.where(a < 0, -1, 0), shifted).astype(dtype)

    return ref


_BITWISE_ERRORS = ((lambda e, d: (e.ones(2, 3, dtype=e.int64, device=d), (e.ones(4, dtype=e.int64, device=d),), {}),
                    RuntimeError, "must match the size"),
                   _binary_dtype_error(D.float32),
                   (lambda e, d: (_t(e, d, [1, 2]), (1.5,), {}), NotImplementedError, "not implemented for 'Float'"))
for _name, _fn in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor)):
    register_opinfo(OpInfo(_name, _bitwise_samples, dtypes=_INTEGRAL_AND_BOOL, ref=_fn, supports_autograd=False,
                           error_inputs=_errors(*_BITWISE_ERRORS)))
for _name, _fn in (("bitwise_left_shift", np.left_shift), ("bitwise_right_shift", np.right_shift)):
    register_opinfo(OpInfo(_name, _shift_samples, dtypes=_INTEGRAL, ref=_shift_ref(_fn), supports_autograd=False,
                           error_inputs=_errors(*_BITWISE_ERRORS, _binary_dtype_error(D.bool))))


# binary math

_TENSOR_ONLY_ERRORS = (_BROADCAST_ERROR, _scalar_other_error(), _scalar_input_error())


def _binary_info(name, ref, dtypes, *, samples=None, errors=(), **kwargs):
    register_opinfo(OpInfo(name, samples or _binary(), dtypes=dtypes, ref=ref, error_inputs=_errors(*errors), **kwargs))


_binary_info("atan2", _float_ref(np.arctan2), _NO_COMPLEX, samples=_binary(scalars="none"),
             errors=(*_TENSOR_ONLY_ERRORS, _binary_dtype_error(D.complex64)))


def _xlogy_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, other_low=0.1)
    if dtype.category == D.FLOATING:
        import ember

        x = ember.tensor([0.0, 0.0, 0.0, 2.0, -1.5, 0.0], dtype=dtype, device=device)
        y = _specials([0.0, _NAN, -1.0, 0.0, _INF, _INF], dtype, device)
        yield SampleInput(x, (y,), name="zeros and specials")


_binary_info("xlogy", _float_ref(sp.xlogy), _NO_COMPLEX, samples=_xlogy_samples,
             errors=(_BROADCAST_ERROR, _binary_dtype_error(D.complex64)))


def _nan_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, scalars="none")
    if dtype.category == D.FLOATING:
        a = _specials([1.0, _NAN, 3.0, _NAN, -_INF], dtype, device)
        b = _specials([2.0, 2.0, _NAN, _NAN, 0.0], dtype, device)
        yield SampleInput(a, (b,), name="nan")


_MINMAX_ERRORS = _TENSOR_ONLY_ERRORS
for _name, _fn in (("maximum", np.maximum), ("minimum", np.minimum), ("fmax", np.fmax), ("fmin", np.fmin)):
    _binary_info(_name, _same_ref(_fn), _NO_COMPLEX, samples=_nan_samples, errors=(
        *_MINMAX_ERRORS,
        (lambda e, d, n=_name: (_t(e, d, [1j]), (_t(e, d, [1j]),), {}), RuntimeError,
         f"{_name} not implemented for complex tensors")))

_binary_info("hypot", _same_ref(np.hypot), _FLOATING, samples=_binary(scalars="none"),
             errors=(*_TENSOR_ONLY_ERRORS, _binary_dtype_error(D.int64), _binary_dtype_error(D.complex64)))


def _logaddexp_ref(a, b):
    a, b = _wide(a), _wide(b)
    if np.result_type(a, b).kind != "c":
        return np.logaddexp(a, b)
    a, b = np.broadcast_arrays(a, b)
    big = np.where(a.real >= b.real, a, b)
    small = np.where(a.real >= b.real, b, a)
    return big + np.log1p(np.exp(small - big))


_binary_info("logaddexp", _logaddexp_ref, _FLOATING_AND_COMPLEX, samples=_binary(scalars="none"),
             errors=(*_TENSOR_ONLY_ERRORS, _binary_dtype_error(D.int64)))
_binary_info("logaddexp2", _same_ref(np.logaddexp2), _FLOATING, samples=_binary(scalars="none"),
             errors=(*_TENSOR_ONLY_ERRORS, _binary_dtype_error(D.int64), _binary_dtype_error(D.complex64)))
_binary_info("copysign", _float_ref(np.copysign), _NO_COMPLEX, samples=_binary(scalars="other"),
             errors=(_BROADCAST_ERROR, _scalar_input_error(), _binary_dtype_error(D.complex64)))


def _heaviside_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, scalars="none", mixed=False)
    if dtype.category == D.FLOATING:
        import ember

        x = ember.tensor([-1.5, 0.0, -0.0, 2.0, _INF, -_INF], dtype=dtype, device=device)
        yield SampleInput(x, (ember.tensor([0.5], dtype=dtype, device=device),), name="zeros")


def _heaviside_ref(x, values):
    x, values = _wide_floats(x), _wide_floats(values)
    return np.where(x == 0, values, x > 0)


_binary_info("heaviside", _heaviside_ref, _NO_COMPLEX, samples=_heaviside_samples, errors=(
    *_TENSOR_ONLY_ERRORS,
    (lambda e, d: (_t(e, d, [1.0]), (_t(e, d, [1]),), {}), RuntimeError, "different dtypes"),
    (lambda e, d: (_t(e, d, [1j]), (_t(e, d, [1j]),), {}), RuntimeError, "complex tensors"),
))


# pow, float_power

def _pow_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, other_low=0, other_high=3, mixed=False)
    import ember

    make = maker(device, dtype, requires_grad, seed=3)
    if dtype.category == D.INTEGRAL:
        exponents = maker(device, dtype, requires_grad, seed=4, low=-3 if dtype is not D.uint8 else 0, high=3)
        bases = [1, -1, 2, 0, -2, 1, -1, 3] if dtype is not D.uint8 else [1, 0, 2, 3, 1, 0, 2, 3]
        yield SampleInput(ember.tensor(bases, dtype=dtype, device=device), (exponents((8,)),),
                          name="negative integer exponents")
    else:
        yield SampleInput(make((2, 3), low=0.1), (0.5,), name="square root")
        yield SampleInput(make((2, 3), exclude_zero=True), (-1,), name="negative integer exponent")
        yield SampleInput(make((2, 3)), (make((2, 3), low=-2, high=2),), name="negative bases, real exponents")
    if SCALAR_INPUT_SAMPLES:
        yield SampleInput(2, (maker(device, dtype, requires_grad, seed=5, low=0, high=5)((4,)),), name="scalar base 2")
    mixed = D.float64 if dtype.category < D.FLOATING else D.int32
    yield SampleInput(make((2, 3)), (maker(device, mixed, False, seed=6, low=0, high=3)((2, 3)),), name="mixed dtypes")


def _pow_ref(a, b):
    a, b = _wide_floats(a), _wide_floats(b)
    dtype = np.result_type(a, b)
    if dtype is not None and dtype.kind in "iu" and np.any(np.asarray(b) < 0):
        a, b = np.broadcast_arrays(np.asarray(a, dtype), np.asarray(b, dtype))
        negative = b < 0
        value = np.power(a, np.where(negative, 0, b))
        special = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
        return np.where(negative, special, value).astype(dtype)
    with np.errstate(all="ignore"):
        return _same_ref(np.power)(a, b)


_POW_ERRORS = (
    _BROADCAST_ERROR,
    _binary_dtype_error(D.bool),
    (lambda e, d: (_t(e, d, [1, 2]), (-1,), {}), RuntimeError, "Integers to negative integer powers are not allowed"),
    (lambda e, d: (e.ones(2, device=d), ("text",), {}), TypeError, "must be Tensor or Number"),
)
register_opinfo(OpInfo("pow", _pow_samples, dtypes=_NO_BOOL, ref=_pow_ref, error_inputs=_errors(*_POW_ERRORS)))


def _float_power_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, other_low=-2, other_high=3)
    make = maker(device, dtype, requires_grad, seed=3, exclude_zero=True)
    yield SampleInput(make((3,)), (-2,), name="negative integer exponent")
    yield SampleInput(make((3,)), (0.5j,), name="complex exponent")


def _float_power_ref(a, b):
    def widen(x):
        if isinstance(x, np.ndarray):
            return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
        return complex(x) if isinstance(x, complex) else float(x)

    with np.errstate(all="ignore"):
        return np.power(widen(a), widen(b))


_FLOAT_POWER_INPLACE = "float_power_ needs a float64/complex128 tensor: PyTorch refuses other dtypes even where casts allow"
register_opinfo(OpInfo("float_power", _float_power_samples, ref=_float_power_ref, error_inputs=_errors(
    _BROADCAST_ERROR, (lambda e, d: (e.ones(2, device=d), ("text",), {}), TypeError, "must be Tensor or Number")),
    skips=tuple(("test_inplace_variant", d, _FLOAT_POWER_INPLACE) for d in _ALL if d not in (D.float64, D.complex128))))


# clamp, lerp, addcmul, addcdiv, where

def _clamp_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    bounds = maker(device, dtype, requires_grad, seed=1)
    if dtype is not D.bool:
        low, high = (-3, 4) if dtype is not D.uint8 else (2, 6)
        yield SampleInput(make(()), (low, high), name="zero-dim, number bounds")
        yield SampleInput(make((5,)), (low,), name="min only")
        yield SampleInput(make((2, 3, 4)), (), {"max": high}, name="max only")
        yield SampleInput(make((0, 2)), (low, high), name="empty")
        yield SampleInput(make((3, 4), noncontiguous=True), (), {"min": low, "max": high}, name="noncontiguous")
        yield SampleInput(make((4, 3)).t(), (high, low), name="min > max")
        yield SampleInput(make((3,)), (0.5,), name="float bound")
    else:
        yield SampleInput(make((5,)), (0,), name="int bound on bool")
    if dtype is not D.bool:  # PyTorch takes one bound only for bool tensors
        yield SampleInput(make((2, 3)), (bounds((2, 3)), bounds((3,))), name="tensor bounds")
    yield SampleInput(make((2, 3)), (None, bounds(())), name="zero-dim tensor max")
    yield SampleInput(make((3,)), (bounds((2, 1)),), name="broadcasting min")
    if dtype.category == D.FLOATING:
        x = _specials([_NAN, 1.0, -_INF, _INF, 0.5], dtype, device)
        yield SampleInput(x, (0.0, 1.0), name="nan and inf")
        yield SampleInput(x, (_NAN,), name="nan bound")


def _clamp_ref(x, min=None, max=None):  # noqa: A002
    x, low, high = _wide_floats(x), _wide_floats(min), _wide_floats(max)
    if x.dtype == np.bool_ and (low is None or not isinstance(low, np.ndarray) or low.dtype != np.bool_):
        x = x.astype(np.int64)
    if low is not None:
        x = np.maximum(x, low)
    if high is not None:
        x = np.minimum(x, high)
    return x


_CLAMP_ERRORS = (
    (lambda e, d: (e.ones(2, device=d), (), {}), RuntimeError, "At least one of 'min' or 'max' must not be None"),
    (lambda e, d: (_t(e, d, [1j]), (0,), {}), NotImplementedError, "clamp is not supported for complex types"),
    (lambda e, d: (_t(e, d, [1, 2]), (0, 1j), {}), NotImplementedError, "clamp is not supported for complex types"),
    (lambda e, d: (e.ones(2, device=d), (0, 1j), {}), RuntimeError, "cannot be converted to type float32"),
    (lambda e, d: (_t(e, d, [True]), (_t(e, d, False), _t(e, d, True)), {}), NotImplementedError,
     "not implemented for 'Bool'"),
    (lambda e, d: (_t(e, d, [True]), (False, True), {}), NotImplementedError, "not implemented for 'Bool'"),
    (lambda e, d: (e.ones(2, device=d), (e.ones(3, device=d),), {}), RuntimeError, "must match the size"),
    (lambda e, d: (e.ones(2, device=d), ("text",), {}), TypeError, "must be Tensor or Number"),
)
register_opinfo(OpInfo("clamp", _clamp_samples, dtypes=_NO_COMPLEX, ref=_clamp_ref,
                       error_inputs=_errors(*_CLAMP_ERRORS)))


def _lerp_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    end = maker(device, dtype, requires_grad, seed=1)
    weights = maker(device, dtype, requires_grad, seed=2, low=-0.5, high=1.5)
    yield SampleInput(make(()), (end(()), 0.3), name="zero-dim")
    yield SampleInput(make((5,)), (end((5,)), 0.7), name="1-d, weight above 0.5")
    yield SampleInput(make((2, 3)), (end((2, 3)), weights((2, 3))), name="tensor weight")
    yield SampleInput(make((2, 1, 3)), (end((4, 3)), weights((3,))), name="broadcast")
    yield SampleInput(make((0, 3)), (end((3,)), 0.5), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (end((3, 4), noncontiguous=True), 1.0), name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (end((3, 4)), weights(())), name="transposed view, zero-dim weight")
    yield SampleInput(make((3,)), (end((3,)), 2), name="integer weight")
    if dtype.is_complex:
        yield SampleInput(make((3,)), (end((3,)), 0.5 + 0.25j), name="complex weight")


def _lerp_ref(start, end, weight):
    start, end, weight = _wide(start), _wide(end), _wide(weight)
    return start + weight * (end - start)


_LERP_ERRORS = (
    (lambda e, d: (e.ones(2, device=d), (e.ones(2, dtype=e.float64, device=d), 0.5), {}), RuntimeError,
     "expected dtype float32 for `end`"),
    (lambda e, d: (e.ones(2, device=d), (e.ones(2, device=d), e.ones(2, dtype=e.float64, device=d)), {}),
     RuntimeError, "for `weight`"),
    (lambda e, d: (_t(e, d, [1, 2]), (_t(e, d, [1, 2]), 0.5), {}), NotImplementedError, "not implemented for 'Long'"),
    (lambda e, d: (e.ones(2, device=d), (e.ones(2, device=d), 0.5j), {}), RuntimeError, "cannot be converted"),
    (lambda e, d: (e.ones(2, device=d), (e.ones(3, device=d), 0.5), {}), RuntimeError, "must match the size"),
)
register_opinfo(OpInfo("lerp", _lerp_samples, dtypes=_FLOATING_AND_COMPLEX, ref=_lerp_ref,
                       error_inputs=_errors(*_LERP_ERRORS), tolerances={D.float32: (1e-5, 1e-5)}))


def _addc_samples(opinfo, device, dtype, requires_grad, *, divide=False):
    make = maker(device, dtype, requires_grad)
    t1 = maker(device, dtype, requires_grad, seed=1)
    t2 = maker(device, dtype, requires_grad, seed=2, exclude_zero=divide)
    value = 2 if dtype.category == D.INTEGRAL else 0.5
    yield SampleInput(make(()), (t1(()), t2(())), name="zero-dim")
    yield SampleInput(make((5,)), (t1((5,)), t2((5,))), name="1-d")
    yield SampleInput(make((2, 3)), (t1((2, 3)), t2((2, 3))), {"value": value}, name="value")
    yield SampleInput(make((2, 1, 3)), (t1((4, 1)), t2((3,))), name="broadcast")
    yield SampleInput(make((0, 3)), (t1((3,)), t2((3,))), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (t1((3, 4), noncontiguous=True), t2((3, 4))),
                      name="noncontiguous")
    yield SampleInput(make((4, 3)).t(), (t1((3, 4)), t2((3, 4))), {"value": value}, name="transposed view")
    if dtype.category == D.INTEGRAL and not divide:
        yield SampleInput(make((3,)), (t1((3,)), t2((3,))), {"value": 1.5}, name="float value truncated")
    if dtype.is_complex:
        yield SampleInput(make((3,)), (t1((3,)), t2((3,))), {"value": 1 - 0.5j}, name="complex value")
    mixed = D.float64 if dtype.category < D.FLOATING else D.float16
    yield SampleInput(make((2, 3)), (maker(device, mixed, False, seed=3, exclude_zero=True)((2, 3)), t2((2, 3))),
                      name="mixed dtypes")


def _addcmul_ref(x, t1, t2, value=1):
    x, t1, t2 = _wide_floats(x), _wide_floats(t1), _wide_floats(t2)
    if np.result_type(x, t1, t2).kind in "iu":
        value = int(value)
    return x + value * t1 * t2


def _addcdiv_ref(x, t1, t2, value=1):
    x, t1, t2 = _wide(x), _wide(t1), _wide(t2)
    return x + value * (t1 / t2)


register_opinfo(OpInfo("addcmul", _addc_samples, dtypes=_NO_BOOL, ref=_addcmul_ref, error_inputs=_errors(
    (lambda e, d: (_t(e, d, [True]), (_t(e, d, [True]), _t(e, d, [True])), {}), NotImplementedError,
     "not implemented for 'Bool'"),
    (lambda e, d: (e.ones(2, device=d), (2.0, e.ones(2, device=d)), {}), TypeError, "must be Tensor"),
    (lambda e, d: (e.ones(2, device=d), (e.ones(2, device=d), e.ones(2, device=d)), {"value": 1j}), RuntimeError,
     "cannot be converted"),
    (lambda e, d: (e.ones(2, device=d), (e.ones(3, device=d), e.ones(2, device=d)), {}), RuntimeError,
     "must match the size"),
)))
register_opinfo(OpInfo("addcdiv", lambda *a: _addc_samples(*a, divide=True), dtypes=_FLOATING_AND_COMPLEX,
                       ref=_addcdiv_ref, error_inputs=_errors(
                           (lambda e, d: (e.ones(2, device=d), (_t(e, d, [1, 2]), _t(e, d, [1, 2])), {}), RuntimeError,
                            "Integer division with addcdiv is no longer supported"),
                           (lambda e, d: (e.ones(2, device=d), (e.ones(2, device=d), 2.0), {}), TypeError,
                            "must be Tensor"),
                       ), tolerances={D.float32: (1e-5, 1e-5)}))


def _where_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    other = maker(device, dtype, requires_grad, seed=1)
    cond = maker(device, D.bool, False, seed=2)
    yield SampleInput(cond(()), (make(()), other(())), name="zero-dim")
    yield SampleInput(cond((5,)), (make((5,)), other((5,))), name="1-d")
    yield SampleInput(cond((2, 1, 3)), (make((4, 3)), other((3,))), name="broadcast")
    yield SampleInput(cond((0, 3)), (make((3,)), other((0, 3))), name="empty")
    yield SampleInput(cond((3, 4), noncontiguous=True), (make((3, 4), noncontiguous=True), other((3, 4))),
                      name="noncontiguous")
    yield SampleInput(cond((3, 4)), (make((4, 3)).t(), other(())), name="transposed view")
    yield SampleInput(cond((3,)), (make((3,)), scalar_for(dtype)), name="python scalar other")
    yield SampleInput(cond((3,)), (scalar_for(dtype), make((3,))), name="python scalar input")
    yield SampleInput(cond((3,)), (scalar_for(dtype), scalar_for(dtype)), name="two python scalars")
    yield SampleInput(cond((3,)), (make((3,)), maker(device, D.float64, False, seed=3)((3,))), name="mixed dtypes")
    yield SampleInput(cond((3,)).to(D.uint8), (make((3,)), other((3,))), name="uint8 condition")


def _where_ref(condition, input, other):
    if isinstance(input, np.ndarray) and isinstance(other, np.ndarray) and input.dtype != other.dtype:
        input, other = _wide_floats(input), _wide_floats(other)
    return np.where(condition.astype(bool), input, other)


_WHERE_METHOD = "the method is input.where(condition, other): self is where's second argument, not the sample's input"
register_opinfo(OpInfo("where", _where_samples, ref=_where_ref, skips=(("test_method_variant", None, _WHERE_METHOD),),
                       error_inputs=_errors(
    (lambda e, d: (_t(e, d, [1, 0]), (e.ones(2, device=d), e.zeros(2, device=d)), {}), RuntimeError,
     "where expected condition to be a boolean tensor, but got a tensor with dtype Long"),
    (lambda e, d: (_t(e, d, [True, False]), (e.ones(3, device=d), 0.0), {}), RuntimeError, "must match the size"),
    (lambda e, d: (_t(e, d, [True]), ("text", 0.0), {}), TypeError, "must be Tensor or Number"),
)))


# isclose, allclose, equal

def _close_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    x = make((2, 3))
    if dtype.category >= D.FLOATING:
        noise = maker(device, dtype, False, seed=5, low=-1e-3, high=1e-3)((2, 3))
        near = x + noise * x.abs().to(dtype)
    else:
        near = maker(device, dtype, False, seed=5)((2, 3))
    yield SampleInput(x, (x.clone(),), name="equal")
    yield SampleInput(x, (near,), name="near")
    yield SampleInput(x, (near,), {"rtol": 1e-2, "atol": 1e-3}, name="looser tolerances")
    yield SampleInput(x, (near,), {"rtol": 0.0, "atol": 0.0}, name="zero tolerances")
    yield SampleInput(make(()), (make(()),), name="zero-dim")
    yield SampleInput(make((0, 3)), (make((3,)),), name="empty")
    yield SampleInput(make((2, 1, 3)), (make((4, 3)),), name="broadcast")
    yield SampleInput(make((3, 4), noncontiguous=True), (make((4, 3)).t(),), {"atol": 2}, name="noncontiguous")
    if dtype.category < D.FLOATING:
        yield SampleInput(make((6,)), (make((6,)),), {"rtol": 0.5, "atol": 1}, name="integer tolerances")
    specials = _special_values(dtype)
    if specials is not None:
        specials = specials.to(device)
        yield SampleInput(specials, (specials.clone(),), name="nan and inf")
        yield SampleInput(specials, (specials.clone(),), {"equal_nan": True}, name="equal_nan")


def _isclose_ref(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    # close when equal, or when the wrapped (for integers) difference is finite and within tolerance
    close = np.equal(a, b)
    if equal_nan and a.dtype.kind not in "biu":
        close = close | (np.isnan(_wide(a)) & np.isnan(_wide(b)))
    if rtol == 0 and atol == 0:
        return close
    with np.errstate(invalid="ignore"):  # inf - inf is NaN: not close (equal infinities were found above)
        if a.dtype.kind in "iub":  # PyTorch compares integers in the default float dtype
            wide_a, wide_b = a.astype(np.float32), b.astype(np.float32)
            actual = np.abs(wide_a - wide_b)
            allowed = np.float32(atol) + np.abs(np.float32(rtol) * wide_b)
        else:
            wide_a, wide_b = _wide(a), _wide(b)
            actual = np.abs(wide_a - wide_b)
            allowed = atol + rtol * np.abs(wide_b)
        return close | (np.isfinite(actual) & (actual <= allowed))


_CLOSE_ERRORS = (
    (lambda e, d: (e.ones(2, device=d), (_t(e, d, [1, 1]),), {}), RuntimeError, "Float did not match Long"),
    (lambda e, d: (e.ones(2, device=d), (e.ones(2, device=d),), {"rtol": -1.0}), RuntimeError,
     "rtol must be greater than or equal to zero"),
    (lambda e, d: (e.ones(2, device=d), (e.ones(2, device=d),), {"atol": -1.0}), RuntimeError,
     "atol must be greater than or equal to zero"),
    (lambda e, d: (e.ones(2, device=d), (1.0,), {}), TypeError, "must be Tensor"),
)
_BOOL_RESULT = ("test_reference_values", None,
                "returns a Python bool, not a tensor; values are checked against PyTorch in the parity tests")
_NO_META = ("test_meta_matches_real", None,
            "returns a Python bool that depends on the values: meta tensors can't compute it (they raise)")
register_opinfo(OpInfo("isclose", _close_samples, ref=_isclose_ref, error_inputs=_errors(*_CLOSE_ERRORS),
                       supports_autograd=False))
register_opinfo(OpInfo("allclose", _close_samples, ref=lambda *a, **k: bool(np.all(_isclose_ref(*a, **k))),
                       error_inputs=_errors(*_CLOSE_ERRORS, (
                           lambda e, d: (e.ones(2, device=d), (e.ones(3, device=d),), {}), RuntimeError,
                           "must match the size")),
                       supports_autograd=False, skips=(_BOOL_RESULT, _NO_META)))


def _equal_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    x = make((2, 3))
    yield SampleInput(x, (x.clone(),), name="equal")
    yield SampleInput(x, (make((2, 3)),), name="different values")
    yield SampleInput(x, (x.clone().reshape(3, 2),), name="different shapes")
    yield SampleInput(x, (x[:1],), name="broadcastable shapes are not equal")
    yield SampleInput(make(()), (make(()),), name="zero-dim")
    yield SampleInput(make((0, 3)), (make((0, 3)),), name="empty")
    yield SampleInput(make((4, 3)).t(), (make((4, 3)).t().contiguous(),), name="transposed view")
    other_dtype = D.float64 if dtype is not D.float64 else D.float32
    yield SampleInput(x, (x.to(other_dtype),), name="same values, another dtype")
    specials = _special_values(dtype)
    if specials is not None:
        specials = specials.to(device)
        yield SampleInput(specials, (specials.clone(),), name="nan is not equal to nan")


def _equal_ref(a, b):
    return a.shape == b.shape and bool(np.array_equal(_wide_floats(a), _wide_floats(b)))


register_opinfo(OpInfo("equal", _equal_samples, ref=_equal_ref, error_inputs=_errors(
    (lambda e, d: (e.ones(2, device=d), (1.0,), {}), TypeError, "must be Tensor")), supports_autograd=False,
    skips=(_BOOL_RESULT, _NO_META)))


# aliases: the target's samples under the alias's name (PyTorch has both names)

def _alias_info(alias, target):
    info = op_db[target]
    return dataclasses.replace(info, name=alias, torch_name=None, torch_fn=None)


def _true_divide_samples(opinfo, device, dtype, requires_grad):
    yield from binary_samples(opinfo, device, dtype, requires_grad, exclude_zero=True)


def _register_aliases():
    from ..._ops.pointwise_aliases import ALIAS_OPS

    for alias, target in ALIAS_OPS.items():
        info = _alias_info(alias, target)
        if alias == "true_divide":  # no rounding_mode argument in PyTorch
            info = dataclasses.replace(info, sample_inputs=_true_divide_samples,
                                       error_inputs=_errors(_BROADCAST_ERROR))
        register_opinfo(info)


_register_aliases()
