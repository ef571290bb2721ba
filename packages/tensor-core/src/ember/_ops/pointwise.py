"""Pointwise ops: arithmetic, math functions, comparisons, predicates and bit operations.

Most entries are one line through :mod:`ember._ops._pointwise_helpers`
(``unary``, ``binary``): name, numpy function, result dtype rule and the dtypes
PyTorch accepts. Ops with arguments of their own (``div``'s rounding mode,
``clamp``'s bounds, ``where``, ``isclose``, ...) have their meta function and
kernel written out below. Every meta function checks arguments like PyTorch:
the same error types, and ``NotImplementedError`` for a dtype PyTorch's CPU
kernels refuse.
"""

from __future__ import annotations

import importlib
import math

import numpy as np

from .. import _dtype as D
from .._device import get_backend
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._array_module import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._binary_plan import BinaryRule
from ._float_errors import quiet
from ._pointwise_helpers import (
    FLOATING,
    FLOATING_AND_COMPLEX,
    INTEGRAL,
    INTEGRAL_AND_BOOL,
    NO_BOOL,
    NO_COMPLEX,
    REAL_NO_BOOL,
    _check_operand,
    _torch_name,
    alias,
    binary,
    binary_dtype,
    check_tensor,
    compute_dtype,
    make_inplace,
    not_implemented,
    number_keeps_dtype,
    operand,
    unary,
)
from ._registry import COMPOSITE, defop, registry
from ._shapes import broadcast_shapes, shape_of

__all__ = []

_ALL_NUMPY_DTYPES = D.numpy_dtype_set(D.ALL_DTYPES)
_FIRST_OP = len(registry)  # the ops registered from here on are this module's (see METHODS at the end)
_NUMBER = (bool, int, float, complex, np.number, np.bool_)


def _special(name):
    """scipy.special's function ``name``, imported on first call (scipy.special takes 0.1 s to import).

    On GPU arrays (the CUDA backend) the call goes to :func:`_device_special` instead: scipy.special
    computes on the host only.
    """
    fn = None

    def call(*args):
        nonlocal fn
        if type(args[-1]) is not np.ndarray and _array_namespace(*args) is not np:
            return _device_special(name, *args)
        if fn is None:
            fn = getattr(importlib.import_module("scipy.special"), name)
        return fn(*args)

    call.__name__ = name
    return call


def _device_special(name, *args):
    """scipy.special's ``name`` on GPU arrays, from ``cupyx.scipy.special``, with numpy's (scipy's) values.

    Where CuPy's function differs from scipy's (``i0`` at +-inf) or takes other arguments
    (``polygamma``'s order must be an array there), the difference is made up here.
    """
    special = importlib.import_module("cupyx.scipy.special")
    if name == "polygamma":
        n, x = args
        if n == 0:
            return _device_special("psi", x)
        # psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 (Hurwitz zeta), scipy's own formula
        try:
            factorial = float(math.factorial(n))
        except OverflowError:  # above 170!, as scipy's gamma(n + 1)
            factorial = math.inf
        return (-1.0) ** (n + 1) * factorial * special.zeta(float(n + 1), x)
    value = getattr(special, name)(*args)
    if name == "psi":  # scipy's poles: psi(+-0) = -+inf, NaN at the negative integers and -inf
        x = args[0]
        value = np.where(x == 0, np.copysign(np.inf, -x), value)
        value = np.where((x < 0) & (np.floor(x) == x), np.nan, value)
    if name == "i0":  # scipy's i0 is NaN at +-inf (its Chebyshev expansion gives inf/inf); CuPy's is inf
        value = np.where(np.isinf(args[0]), np.nan, value)
    return value  # of the input's dtype or wider: the callers cast to the result dtype


def _is_int_scalar(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


# -- add, sub, mul, div ---------------------------------------------------------------


def _check_alpha(input, other, dtype, alpha):
    if isinstance(alpha, bool):
        if dtype is not D.bool:
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif isinstance(alpha, float) and dtype.category < D.FLOATING:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if dtype is D.bool and not isinstance(alpha, bool) and alpha != 1:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")


def _is_bool(x):
    return x.dtype is D.bool if isinstance(x, Tensor) else isinstance(x, (bool, np.bool_))


def _check_sub(input, other, dtype):
    input_bool, other_bool = _is_bool(input), _is_bool(other)
    if input_bool and other_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    if input_bool or other_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )


def _add_sub(name, np_fn, sign_word, check=None):
    # the calls without promotion (alpha 1), for the meta function, the kernel and the checked kernel
    # alike (see _binary_plan); sub refuses bools in its check, so their calls take the general path
    rule = BinaryRule(np_fn, direct=_ALL_NUMPY_DTYPES, refused=(D.bool,) if check is not None else ())

    def meta(input, other, *, alpha=1):
        if type(alpha) is int and alpha == 1:
            plan = rule.plan(input, other)
            if plan is not None:
                return MetaArray(plan.shape or shape_of(input if type(input) is Tensor else other), plan.dtype)
        _check_operand(name, "input", input)
        _check_operand(name, "other", other)
        dtype = binary_dtype(input, other)
        if check is not None:
            check(input, other, dtype)
        if alpha != 1 or type(alpha) is not int:
            _check_alpha(input, other, dtype, alpha)
        return MetaArray(broadcast_shapes(shape_of(input), shape_of(other)), dtype.numpy_dtype)

    def cpu(input, other, *, alpha=1):
        if type(alpha) is int and alpha == 1:
            value = rule.direct(input, other)
            if value is not None:
                return value
        # quiet: inf - inf gives NaN and overflow gives inf silently, as in PyTorch
        return quiet(_promoted, input, other, alpha)

    def _promoted(input, other, alpha):
        np_dtype = binary_dtype(input, other).numpy_dtype
        b = operand(other, np_dtype)
        if alpha != 1:
            b = np.multiply(b, operand(alpha, np_dtype), dtype=np_dtype)
        return _as_array(np_fn(operand(input, np_dtype), b, dtype=np_dtype))

    meta.__name__ = name
    meta.__doc__ = f"""Elementwise ``input {sign_word} alpha * other``, broadcasting, with PyTorch's type promotion.

    Args:
        input (Tensor or Number): the first operand.
        other (Tensor or Number): the second operand.
        alpha (Number): multiplier of ``other``; must be an int for integer results.

    Raises:
        RuntimeError: if the shapes don't broadcast or ``alpha`` doesn't suit the dtype.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1., 2.]), ember.tensor([10., 20.]), alpha=2)
        tensor([{"21., 42." if sign_word == "+" else "-19., -38."}])
    """
    op = defop(name, meta, cpu=cpu, has_out=True, tags=("pointwise",))
    op.register_checked_kernel("cpu", rule.direct)  # a call without keywords: alpha is 1
    op.binary_rule = rule
    make_inplace(op)
    return op


add = _add_sub("add", np.add, "+")
sub = _add_sub("sub", np.subtract, "-", check=_check_sub)
mul = binary("mul", np.multiply, doc="""Elementwise product ``input * other``, broadcasting, with type promotion.

    Args:
        input (Tensor or Number): the first factor.
        other (Tensor or Number): the second factor.

    Example:
        >>> import ember
        >>> ember.mul(ember.tensor([1, 2]), 3)
        tensor([3, 6])
    """)


def _zero_division_check(divisor):
    """Integer division by zero is an error in PyTorch (floats give inf/nan)."""
    if not np.all(divisor):
        raise RuntimeError("ZeroDivisionError")


def _trunc_divide_int(a, b):
    """C-style integer division (rounding toward zero) from numpy's floor division."""
    quotient = np.floor_divide(a, b)
    inexact = np.not_equal(np.remainder(a, b), 0)
    return quotient + (inexact & (np.less(a, 0) != np.less(b, 0)))


_F32 = np.dtype(np.float32)
_EXACT_QUOTIENT_LIMIT = 2.0**28
_F32_INTEGER_LIMIT = 2.0**22
_F32_FORMULAS = {"floor": np.floor_divide, "remainder": np.remainder, "fmod": np.fmod}


def _float32_division(a, b, mode):
    """Floor quotients (``"floor"``) or remainders (``"remainder"``, ``"fmod"``) of float32 values, in float64.

    numpy's fmod-based loops are slow; float64 arithmetic gives the same results
    where ``|a / b| < 2**28`` and ``b`` is finite: the quotient of two 24-bit values
    lies at least ``2**-52`` (relatively) from any integer it is not, so float64's
    rounding can't carry it across one, and ``n * b`` for ``|n| < 2**28`` fits 53
    bits. Floor quotients stop at ``2**22``: above it numpy's and PyTorch's float32
    loops round the quotient their own way. The other elements (division by zero,
    NaN, infinities, huge quotients) take numpy's loop.
    """
    xp = _array_namespace(a, b)
    if xp is not np:
        return _float32_division_xp(xp, a, b, mode)
    a64, b64 = _as_array(a).astype(np.float64, copy=False), _as_array(b).astype(np.float64, copy=False)
    quotient = _as_array(a64 / b64)
    limit = _EXACT_QUOTIENT_LIMIT if mode != "floor" else _F32_INTEGER_LIMIT
    value = np.empty_like(quotient)  # an array even when zero-dim, for the in-place steps
    (np.trunc if mode == "fmod" else np.floor)(quotient, out=value)
    if mode != "floor":
        value *= b64
        np.subtract(a64, value, out=value)
    inexact = ~(np.abs(quotient) < limit) | np.isinf(b64)
    if inexact.any():
        a32, b32 = np.broadcast_arrays(_as_array(a).astype(_F32, copy=False), _as_array(b).astype(_F32, copy=False))
        value[inexact] = _F32_FORMULAS[mode](a32[inexact], b32[inexact])
    return value


def _numpy_divmod_xp(xp, a, b):
    """numpy's float floor quotient and remainder (its ``npy_divmod``, the Python convention), elementwise in
    the operands' float dtype with ``xp``'s ufuncs (the constants are Python numbers, which keep that dtype).

    CuPy's own ``floor_divide``/``remainder`` (``floor(a / b)``, ``a - floor(a / b) * b``) differ from numpy's:
    ``1 // 0.1`` is 10 there (9 in numpy), ``inf // 3`` is inf (NaN), ``-1 // inf`` is -0.0 (-1).
    """
    mod = xp.fmod(a, b)
    div = (a - mod) / b
    shift = (mod != 0) & ((b < 0) != (mod < 0))  # NaN counts as nonzero, as in C
    div = xp.where(shift, div - 1.0, div)
    mod = xp.where(shift, mod + b, xp.where(mod != 0, mod, xp.copysign(0.0, b)))
    floor = xp.floor(div)
    floor = xp.where(div - floor > 0.5, floor + 1.0, floor)
    floor = xp.where(div != 0, floor, xp.copysign(0.0, a / b))
    by_zero = b == 0  # a / b and fmod(a, 0) (NaN), as numpy
    return xp.where(by_zero, a / b, floor), xp.where(by_zero, xp.fmod(a, b), mod)


def _float32_division_xp(xp, a, b, mode):
    """:func:`_float32_division` on GPU arrays (``xp`` is CuPy), without data-dependent host decisions.

    The same float64 arithmetic; the elements it can't do exactly take numpy's float32 formula through
    ``where`` instead of boolean indexing (which would wait for the GPU to count them).
    """
    a64, b64 = xp.asarray(a, dtype=np.float64), xp.asarray(b, dtype=np.float64)
    quotient = a64 / b64
    limit = _EXACT_QUOTIENT_LIMIT if mode != "floor" else _F32_INTEGER_LIMIT
    value = (xp.trunc if mode == "fmod" else xp.floor)(quotient)
    if mode != "floor":
        value = a64 - value * b64
    inexact = ~(xp.abs(quotient) < limit) | xp.isinf(b64)
    a32, b32 = xp.asarray(a, dtype=_F32), xp.asarray(b, dtype=_F32)
    if mode == "fmod":
        fallback = xp.fmod(a32, b32)  # C's fmod, the same in CuPy
    else:
        fallback = _numpy_divmod_xp(xp, a32, b32)[0 if mode == "floor" else 1]
    return xp.where(inexact, fallback, value)


def _integer_or_float32_division(mode, np_fn):
    """``np_fn(a, b)`` with PyTorch's integer division-by-zero error and the fast float32 path of ``mode``.

    Other float dtypes on GPU arrays take numpy's formula (:func:`_numpy_divmod_xp`): CuPy's own
    ``floor_divide``/``remainder`` are ``floor(a / b)`` and ``a - floor(a / b) * b``, which differ from numpy's
    (``1 // 0.1`` is 10 there, 9 in numpy and Python). ``fmod`` is C's in both.
    """

    def divide(a, b):
        kind = np.result_type(a, b)
        if kind.kind in "iu":
            _zero_division_check(b)
        elif kind == _F32:
            return _float32_division(a, b, mode)
        elif mode != "fmod" and kind.kind == "f":
            xp = _array_namespace(a, b)
            if xp is not np:  # both as GPU arrays of the result dtype: a Python-number operand breaks xp.where
                a, b = xp.asarray(a, dtype=kind), xp.asarray(b, dtype=kind)
                return _numpy_divmod_xp(xp, a, b)[0 if mode == "floor" else 1]
        return np_fn(a, b)

    return divide


_floor_divide_np = _integer_or_float32_division("floor", np.floor_divide)


def _trunc_divide_np(a, b):
    kind = np.result_type(a, b)
    if kind.kind in "iu":
        _zero_division_check(b)
        return _trunc_divide_int(a, b)
    return np.trunc(np.true_divide(a, b))  # as PyTorch: the rounded quotient, truncated


_ROUNDING = {"trunc": _trunc_divide_np, "floor": _floor_divide_np}


def _div_dtype(input, other, rounding_mode):
    dtype = binary_dtype(input, other)
    if rounding_mode is None and dtype.category < D.FLOATING:
        return D.get_default_dtype()
    return dtype


def _div_meta(input, other, *, rounding_mode=None):
    """Elementwise division ``input / other``, broadcasting, with PyTorch's type promotion.

    Args:
        input (Tensor or Number): the dividend.
        other (Tensor or Number): the divisor.
        rounding_mode (str, optional): ``None`` (true division: integers give the
            default float dtype), ``"trunc"`` (round toward zero) or ``"floor"``
            (round down); with a rounding mode the result keeps the promoted dtype.

    Returns:
        Tensor: the quotient.

    Raises:
        RuntimeError: for an unknown rounding mode, shapes that don't broadcast, or
            (at run time) an integer division by zero.
        NotImplementedError: for rounding bool or complex values.

    Example:
        >>> import ember
        >>> ember.div(ember.tensor([1, 2]), 2)
        tensor([0.5000, 1.0000])
        >>> ember.div(ember.tensor([-7, 7]), 2, rounding_mode="floor")
        tensor([-4,  3])
    """
    if type(input) is Tensor and type(other) is Tensor and rounding_mode is None:
        a, b = input._data, other._data
        if a.dtype is b.dtype and a.shape == b.shape and a.ndim and a.dtype.kind in "fc":
            return MetaArray(a.shape, a.dtype)
    _check_operand("div", "input", input)
    _check_operand("div", "other", other)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("div(): expected at least one Tensor argument, got two numbers")
    if rounding_mode is not None and rounding_mode not in _ROUNDING:
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    dtype = _div_dtype(input, other, rounding_mode)
    if rounding_mode is not None and dtype not in REAL_NO_BOOL:
        raise not_implemented(f"div_{rounding_mode}", dtype)
    return MetaArray(broadcast_shapes(shape_of(input), shape_of(other)), dtype.numpy_dtype)


def _div_cpu(input, other, *, rounding_mode=None):
    np_dtype = _div_dtype(input, other, rounding_mode).numpy_dtype
    with np.errstate(all="ignore"):
        if rounding_mode is None:
            return _as_array(np.true_divide(operand(input, np_dtype), operand(other, np_dtype)))
        work = compute_dtype(np_dtype)
        value = _ROUNDING[rounding_mode](operand(input, work), operand(other, work))
    return _as_array(value).astype(np_dtype, copy=False)


div = defop("div", _div_meta, cpu=_div_cpu, has_out=True, tags=("pointwise",))
div.result_dtype = lambda input, other, *, rounding_mode=None: _div_dtype(input, other, rounding_mode)
make_inplace(div)

floor_divide = binary("floor_divide", _floor_divide_np, supported=REAL_NO_BOOL, upcast=True, doc="""Elementwise
    ``input // other``: the quotient rounded down, like Python's ``//``.

    Same as ``ember.div(input, other, rounding_mode="floor")``.

    Args:
        input (Tensor or Number): the dividend.
        other (Tensor or Number): the divisor.

    Raises:
        NotImplementedError: for bool or complex values.
        RuntimeError: for an integer division by zero.

    Example:
        >>> import ember
        >>> ember.floor_divide(ember.tensor([-7., 7.]), 2)
        tensor([-4.,  3.])
    """)


_remainder_np = _integer_or_float32_division("remainder", np.remainder)
_fmod_np = _integer_or_float32_division("fmod", np.fmod)


remainder = binary("remainder", _remainder_np, supported=REAL_NO_BOOL, upcast=True, doc="""Elementwise
    Python-style modulus ``input % other``: the result has the sign of ``other``.

    Args:
        input (Tensor or Number): the dividend.
        other (Tensor or Number): the divisor.

    Raises:
        NotImplementedError: for bool or complex values.
        RuntimeError: for an integer division by zero.

    Example:
        >>> import ember
        >>> ember.remainder(ember.tensor([-3, 3]), 2)
        tensor([1, 1])
    """)
fmod = binary("fmod", _fmod_np, supported=REAL_NO_BOOL, scalars="other", upcast=True, doc="""Elementwise C-style
    remainder of ``input / other``: the result has the sign of ``input``.

    Args:
        input (Tensor): the dividend.
        other (Tensor or Number): the divisor.

    Raises:
        NotImplementedError: for bool or complex values.
        RuntimeError: for an integer division by zero.

    Example:
        >>> import ember
        >>> ember.fmod(ember.tensor([-3, 3]), 2)
        tensor([-1,  1])
    """)


# -- comparisons ------------------------------------------------------------------------


def _comparison(name, np_fn, symbol, output, supported=None):
    raises = "\n        NotImplementedError: for complex operands (no order)." if supported is not None else ""
    return binary(name, np_fn, result="bool", scalars="other", supported=supported, doc=f"""Elementwise
    ``input {symbol} other``, as a bool tensor (operands compared in their promoted dtype).

    Args:
        input (Tensor): the first operand.
        other (Tensor or Number): the second operand.

    Raises:
        RuntimeError: if the shapes don't broadcast.{raises}

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([1, 2, 3]), 2)
        {output}
    """)


eq = _comparison("eq", np.equal, "==", "tensor([False,  True, False])")
ne = _comparison("ne", np.not_equal, "!=", "tensor([ True, False,  True])")
lt = _comparison("lt", np.less, "<", "tensor([ True, False, False])", NO_COMPLEX)
le = _comparison("le", np.less_equal, "<=", "tensor([ True,  True, False])", NO_COMPLEX)
gt = _comparison("gt", np.greater, ">", "tensor([False, False,  True])", NO_COMPLEX)
ge = _comparison("ge", np.greater_equal, ">=", "tensor([False,  True,  True])", NO_COMPLEX)


# -- unary ops ---------------------------------------------------------------------------


def _udoc(summary, example_input, example_output, *, name, note="", raises=""):
    """The docstring of a unary op: summary, Args, Returns, optional Raises, and an example."""
    raises = f"\n\n    Raises:\n        {raises}" if raises else ""
    note = f"\n\n    {note}" if note else ""
    return f"""{summary}{note}

    Args:
        input (Tensor): the input.

    Returns:
        Tensor: the result, of the input's shape.{raises}

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor({example_input}))
        {example_output}
    """


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


neg = unary("neg", np.negative, check=_check_neg, doc=_udoc(
    "Elementwise ``-input``.", "[1, -2]", "tensor([-1,  2])", name="neg",
    raises="RuntimeError: for bool tensors (use ``logical_not``)."))
abs = unary("abs", np.abs, result="real", supported=NO_BOOL, inplace_check=_check_abs_inplace, doc=_udoc(  # noqa: A001
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


sign = unary("sign", _sign_np, check=_check_sign, upcast=True, doc=_udoc(
    "Elementwise sign: -1, 0 or 1 (0 for NaN); bool stays bool.", "[-2.5, 0.0, 3.0]", "tensor([-1.,  0.,  1.])",
    name="sign", raises="NotImplementedError: for complex tensors (use :func:`ember.sgn`)."))
sgn = unary("sgn", _sgn_np, upcast=True, doc=_udoc(
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
    ("erf", _special("erf"), "Elementwise error function.", "[0., 1.]", "tensor([0.0000, 0.8427])", NO_COMPLEX),
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
        doc=_udoc(_summary, _x, _y, name=_name, note=_FLOAT_NOTE,
                  raises=_NO_COMPLEX_RAISES if _supported is not None else ""),
    )


def _square_np(x):
    return np.square(x.astype(np.int64) if x.dtype == np.bool_ else x)


def _square_dtype(dtype):
    return D.int64 if dtype is D.bool else dtype


square = unary("square", _square_np, result=_square_dtype, upcast=True, doc=_udoc(
    "Elementwise ``input * input``; bool inputs give int64.", "[2, -3]", "tensor([4, 9])", name="square"))


def _check_not_complex(name):
    def check(input):
        if input.dtype.is_complex:
            raise RuntimeError(f"{name} is not supported for complex tensors.")

    return check


deg2rad = unary("deg2rad", np.deg2rad, result="float", upcast=True, check=_check_not_complex("deg2rad"), doc=_udoc(
    "Elementwise conversion from degrees to radians.", "[180., 90.]", "tensor([3.1416, 1.5708])", name="deg2rad",
    note=_FLOAT_NOTE, raises="RuntimeError: for complex inputs."))
rad2deg = unary("rad2deg", np.rad2deg, result="float", upcast=True, check=_check_not_complex("rad2deg"), doc=_udoc(
    "Elementwise conversion from radians to degrees.", "[3.1416, 1.5708]", "tensor([180.0004,  90.0002])",
    name="rad2deg", note=_FLOAT_NOTE, raises="RuntimeError: for complex inputs."))


def _check_rounding(name):
    def check(input):
        if input.dtype.is_complex:
            raise NotImplementedError(f"{name} is not supported for complex inputs")

    return check


def _rounding(name, np_fn, summary, example, output):
    return unary(name, lambda x: x.copy() if x.dtype.kind in "iu" else np_fn(x), supported=NO_BOOL, upcast=True,
                 check=_check_rounding(name), doc=_udoc(
                     summary, example, output, name=name, note="Integer inputs are returned unchanged (as a copy).",
                     raises="NotImplementedError: for bool or complex inputs."))


floor = _rounding("floor", np.floor, "Elementwise floor: the largest integer not greater than ``input``.",
                  "[-1.5, 1.5]", "tensor([-2.,  1.])")
ceil = _rounding("ceil", np.ceil, "Elementwise ceiling: the smallest integer not less than ``input``.",
                 "[-1.5, 1.5]", "tensor([-1.,  2.])")
trunc = _rounding("trunc", np.trunc, "Elementwise truncation toward zero.", "[-1.5, 1.5]", "tensor([-1.,  1.])")
frac = unary("frac", lambda x: x - np.trunc(x), supported=FLOATING, upcast=True, doc=_udoc(
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


angle = unary("angle", _angle_np, result=_angle_dtype, upcast=True, has_inplace=False, doc=_udoc(
    "Elementwise argument (phase) in radians: of complex numbers, or pi / 0 for negative / other real numbers.",
    "[-1+0j, 1j]", "tensor([3.1416, 1.5708])", name="angle",
    note="Complex inputs give their real dtype; integer and bool inputs the default float dtype."))

conj_physical = unary("conj_physical", np.conjugate, doc=_udoc(
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


# -- predicates ----------------------------------------------------------------------------


def _predicate(name, np_fn, summary, example, output, *, has_out=False, check=None, upcast=False):
    return unary(name, np_fn, result="bool", has_inplace=False, has_out=has_out, check=check, upcast=upcast,
                 doc=_udoc(summary, example, output, name=name,
                           raises="RuntimeError: for complex inputs." if check is not None else ""))


def _check_no_complex_input(name):
    def check(input):
        if input.dtype.is_complex:
            raise RuntimeError(f"{name} does not support complex inputs.")

    return check


_NAN_INF = "[1.0, float('nan'), float('inf'), -float('inf')]"
isnan = _predicate("isnan", np.isnan, "Elementwise test for NaN.", _NAN_INF, "tensor([False,  True, False, False])")
isinf = _predicate("isinf", np.isinf, "Elementwise test for positive or negative infinity.", _NAN_INF,
                   "tensor([False, False,  True,  True])")
isfinite = _predicate("isfinite", np.isfinite, "Elementwise test for finite values (not NaN nor infinite).",
                      _NAN_INF, "tensor([ True, False, False, False])")
isposinf = _predicate("isposinf", lambda x: np.equal(x, np.inf), "Elementwise test for positive infinity.", _NAN_INF,
                      "tensor([False, False,  True, False])", has_out=True, check=_check_no_complex_input("isposinf"),
                      upcast=True)
isneginf = _predicate("isneginf", lambda x: np.equal(x, -np.inf), "Elementwise test for negative infinity.",
                      _NAN_INF, "tensor([False, False, False,  True])", has_out=True,
                      check=_check_no_complex_input("isneginf"), upcast=True)


def _isreal_np(x):
    if x.dtype.kind == "c":
        return np.equal(x.imag, 0)
    return np.ones(x.shape, dtype=np.bool_)


isreal = _predicate("isreal", _isreal_np, "Elementwise test for a zero imaginary part (always True for real dtypes).",
                    "[1+0j, 1+1j]", "tensor([ True, False])")


# -- logical and bitwise ops --------------------------------------------------------------

logical_not = unary("logical_not", np.logical_not, result="bool", doc=_udoc(
    "Elementwise logical NOT (zero is False), as a bool tensor.", "[0, 2]", "tensor([ True, False])",
    name="logical_not"))


def _logical(name, np_fn, word, output):
    return binary(name, np_fn, result="bool", scalars="none", doc=f"""Elementwise logical {word} (zero is False),
    as a bool tensor.

    Args:
        input (Tensor): the first operand.
        other (Tensor): the second operand.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([True, True, False]), ember.tensor([1, 0, 0]))
        {output}
    """)


logical_and = _logical("logical_and", np.logical_and, "AND", "tensor([ True, False, False])")
logical_or = _logical("logical_or", np.logical_or, "OR", "tensor([ True,  True, False])")
logical_xor = _logical("logical_xor", np.logical_xor, "XOR", "tensor([False,  True, False])")


def _truth_values_first(op):
    """Give ``op`` a CUDA kernel: complex operands become their truth values (``x != 0``), then the generic
    CUDA kernel (the CPU kernel on CuPy arrays) runs. CuPy's logical ufuncs take no complex arrays."""

    def kernel(*args):
        args = tuple(
            Tensor._make(a._data != 0, a._device) if type(a) is Tensor and a._data.dtype.kind == "c" else a
            for a in args
        )
        return get_backend("cuda").fallback_kernel(op)(*args)

    kernel.__name__ = f"{op.name}_cuda"
    op.register_kernel("cuda", kernel)


for _op in (logical_not, logical_and, logical_or, logical_xor):
    _truth_values_first(_op)
del _op

bitwise_not = unary("bitwise_not", np.invert, supported=INTEGRAL_AND_BOOL, doc=_udoc(
    "Elementwise bitwise NOT (logical NOT for bool tensors).", "[0, 5, -1]", "tensor([-1, -6,  0])",
    name="bitwise_not", raises="NotImplementedError: for floating and complex inputs."))


def _bitwise(name, np_fn, summary, output, supported=INTEGRAL_AND_BOOL):
    return binary(name, np_fn, supported=supported, doc=f"""{summary}

    Args:
        input (Tensor or Number): the first operand (integer{' or bool' if supported is INTEGRAL_AND_BOOL else ''}).
        other (Tensor or Number): the second operand.

    Raises:
        NotImplementedError: when the promoted dtype is {'not integral or bool' if supported is INTEGRAL_AND_BOOL
                                                         else 'not integral'}.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor([12, -8]), 2)
        {output}
    """)


bitwise_and = _bitwise("bitwise_and", np.bitwise_and, "Elementwise bitwise AND (logical AND for bool).",
                       "tensor([0, 0])")
bitwise_or = _bitwise("bitwise_or", np.bitwise_or, "Elementwise bitwise OR (logical OR for bool).",
                      "tensor([14, -6])")
bitwise_xor = _bitwise("bitwise_xor", np.bitwise_xor, "Elementwise bitwise XOR (logical XOR for bool).",
                       "tensor([14, -6])")
bitwise_left_shift = _bitwise(
    "bitwise_left_shift", np.left_shift,
    "Elementwise ``input << other``; shifts past the width (or negative shifts) give 0.", "tensor([ 48, -32])",
    INTEGRAL)
bitwise_right_shift = _bitwise(
    "bitwise_right_shift", np.right_shift,
    "Elementwise arithmetic ``input >> other``; shifts past the width (or negative shifts) give 0 or -1.",
    "tensor([ 3, -2])", INTEGRAL)


# -- binary math ---------------------------------------------------------------------------


def _bdoc(summary, args, example, output, *, raises=""):
    """The docstring of a binary op."""
    raises = f"\n\n    Raises:\n        {raises}" if raises else ""
    return f"""{summary}

    Args:
        {args}

    Returns:
        Tensor: the result, of the broadcast shape.{raises}

    Example:
        >>> import ember
        >>> ember.{example}
        {output}
    """


_TENSORS_ARGS = "input (Tensor): the first operand.\n        other (Tensor): the second operand."
_SCALAR_ARGS = "input (Tensor or Number): the first operand.\n        other (Tensor or Number): the second operand."


def _check_not_complex_binary(name):
    def check(input, other, dtype):
        if dtype.is_complex:
            raise RuntimeError(f"{name} not implemented for complex tensors.")

    return check


atan2 = binary("atan2", np.arctan2, result="float", supported=NO_COMPLEX, scalars="none", upcast=True, doc=_bdoc(
    "Elementwise angle of the point ``(other, input)``: ``atan(input / other)`` in the right quadrant.",
    _TENSORS_ARGS, "atan2(ember.tensor([1., -1.]), ember.tensor([-1., -1.]))", "tensor([ 2.3562, -2.3562])",
    raises="NotImplementedError: for complex inputs."))
xlogy = binary("xlogy", _special("xlogy"), result="float", supported=NO_COMPLEX, upcast=True, doc=_bdoc(
    "Elementwise ``input * log(other)``, with 0 where ``input`` is 0 (unless ``other`` is NaN).",
    _SCALAR_ARGS, "xlogy(ember.tensor([0., 2.]), ember.tensor([0., 4.]))", "tensor([0.0000, 2.7726])",
    raises="NotImplementedError: for complex inputs."))


def _minmax(name, np_fn, summary, output):
    return binary(name, np_fn, scalars="none", has_inplace=False, check=_check_not_complex_binary(name), doc=_bdoc(
        summary, _TENSORS_ARGS, f"{name}(ember.tensor([1., float('nan'), 3.]), ember.tensor([2., 2., float('nan')]))",
        output, raises="RuntimeError: for complex inputs."))


maximum = _minmax("maximum", np.maximum, "Elementwise maximum; NaN wins.", "tensor([2., nan, nan])")
minimum = _minmax("minimum", np.minimum, "Elementwise minimum; NaN wins.", "tensor([1., nan, nan])")
fmax = _minmax("fmax", np.fmax, "Elementwise maximum ignoring NaN (NaN only where both are NaN).",
               "tensor([2., 2., 3.])")
fmin = _minmax("fmin", np.fmin, "Elementwise minimum ignoring NaN (NaN only where both are NaN).",
               "tensor([1., 2., 3.])")

hypot = binary("hypot", np.hypot, supported=FLOATING, scalars="none", upcast=True, doc=_bdoc(
    "Elementwise ``sqrt(input ** 2 + other ** 2)``, without overflow in the squares.", _TENSORS_ARGS,
    "hypot(ember.tensor([3.]), ember.tensor([4.]))", "tensor([5.])",
    raises="NotImplementedError: unless the promoted dtype is floating."))


def _logaddexp_np(a, b):
    if np.result_type(a, b).kind != "c":
        return np.logaddexp(a, b)
    a, b = np.broadcast_arrays(a, b)
    big = np.where(a.real >= b.real, a, b)
    small = np.where(a.real >= b.real, b, a)
    with np.errstate(all="ignore"):
        value = big + np.log1p(np.exp(small - big))
    # both -inf (real parts): the sum of two zeros is zero, whose log is -inf
    return np.where(np.isneginf(big.real), big, value)


logaddexp = binary("logaddexp", _logaddexp_np, supported=FLOATING_AND_COMPLEX, scalars="none", has_inplace=False,
                   upcast=True, doc=_bdoc(
                       "Elementwise ``log(exp(input) + exp(other))``, computed without overflow.", _TENSORS_ARGS,
                       "logaddexp(ember.tensor([0., 100.]), ember.tensor([0., 100.]))",
                       "tensor([  0.6931, 100.6931])",
                       raises="NotImplementedError: for integer or bool inputs."))
logaddexp2 = binary("logaddexp2", np.logaddexp2, supported=FLOATING, scalars="none", has_inplace=False, upcast=True,
                    doc=_bdoc("Elementwise ``log2(2 ** input + 2 ** other)``, computed without overflow.",
                              _TENSORS_ARGS, "logaddexp2(ember.tensor([0., 3.]), ember.tensor([0., 3.]))",
                              "tensor([1., 4.])", raises="NotImplementedError: for integer, bool or complex inputs."))
copysign = binary("copysign", np.copysign, result="float", supported=NO_COMPLEX, scalars="other", upcast=True,
                  doc=_bdoc("Elementwise magnitude of ``input`` with the sign of ``other``.",
                            "input (Tensor): the magnitudes.\n        other (Tensor or Number): the signs.",
                            "copysign(ember.tensor([1., -2.]), -1.)", "tensor([-1., -2.])",
                            raises="NotImplementedError: for complex inputs."))


def _heaviside_meta(input, values):
    """Elementwise Heaviside step: 0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``.

    Args:
        input (Tensor): the points.
        values (Tensor): the value at 0, of the same dtype as ``input``, broadcasting.

    Returns:
        Tensor: of the common dtype and broadcast shape.

    Raises:
        RuntimeError: for complex tensors or tensors of different dtypes.

    Example:
        >>> import ember
        >>> ember.heaviside(ember.tensor([-1.5, 0.0, 2.0]), ember.tensor([0.5]))
        tensor([0.0000, 0.5000, 1.0000])
    """
    check_tensor("heaviside", "input", 1, input)
    check_tensor("heaviside", "values", 2, values)
    if input.dtype.is_complex or values.dtype.is_complex:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return MetaArray(broadcast_shapes(input._data.shape, values._data.shape), input._data.dtype)


def _heaviside_cpu(input, values):
    x = input._data
    with np.errstate(invalid="ignore"):
        return np.where(x == 0, values._data, x > 0).astype(x.dtype, copy=False)


heaviside = defop("heaviside", _heaviside_meta, cpu=_heaviside_cpu, has_out=True, tags=("pointwise",))
make_inplace(heaviside)


# -- pow, float_power ------------------------------------------------------------------------


def _check_pow_operands(name, input, exponent):
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        _check_operand(name, "input", input)
        raise TypeError(f"{name}(): expected at least one Tensor argument, got two numbers")
    _check_operand(name, "input", input)
    _check_operand(name, "exponent", exponent)


def _pow_meta(input, exponent):
    """Elementwise ``input ** exponent``, broadcasting, with PyTorch's type promotion.

    Either argument may be a Python number. Integer results follow integer
    arithmetic: a negative exponent gives 0 except for bases 1 and -1.

    Args:
        input (Tensor or Number): the base.
        exponent (Tensor or Number): the exponent.

    Returns:
        Tensor: the powers, of the promoted dtype and broadcast shape.

    Raises:
        RuntimeError: for an integer tensor raised to a negative integer number.
        NotImplementedError: when both operands are bool (but a bool tensor to a bool number is itself
            or ones).

    Example:
        >>> import ember
        >>> ember.pow(ember.tensor([1, 2, 3]), 2)
        tensor([1, 4, 9])
        >>> ember.pow(2, ember.tensor([0.5, -1.0]))
        tensor([1.4142, 0.5000])
    """
    if type(input) is Tensor and (type(exponent) is float or type(exponent) is int):  # fast path: tensor ** number
        dtype = binary_dtype(input, exponent)
        if dtype.category >= D.FLOATING or (dtype.category == D.INTEGRAL and exponent >= 0):
            return MetaArray(input._data.shape, dtype.numpy_dtype)
    _check_pow_operands("pow", input, exponent)
    dtype = binary_dtype(input, exponent)
    if dtype is D.bool and not (isinstance(input, Tensor) and isinstance(exponent, (bool, np.bool_))):
        raise not_implemented("pow", dtype)
    if dtype.category == D.INTEGRAL and _is_int_scalar(exponent) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return MetaArray(broadcast_shapes(shape_of(input), shape_of(exponent)), dtype.numpy_dtype)


def _int_pow(base, exponent):
    """Integer powers; a negative exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise."""
    xp = _array_namespace(base, exponent)
    if xp is not np:
        return _int_pow_xp(xp, base, exponent)
    base, exponent = _as_array(base), _as_array(exponent)
    if exponent.dtype.kind == "u" or not np.any(exponent < 0):
        return np.power(base, exponent)
    negative = exponent < 0
    value = np.power(base, np.where(negative, 0, exponent).astype(exponent.dtype))
    odd = np.bitwise_and(exponent, 1).astype(np.bool_)
    special = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0))
    return np.where(negative, special, value)


def _int_pow_xp(xp, base, exponent):
    """:func:`_int_pow` on GPU arrays (``xp`` is CuPy): negative exponents are handled by ``where`` for every
    signed exponent, rather than after asking the GPU whether there are any."""
    base, exponent = xp.asarray(base), xp.asarray(exponent)  # Python numbers become 0-dim arrays, as on CPU
    if exponent.dtype.kind == "u":
        return xp.power(base, exponent)
    negative = exponent < 0
    value = xp.power(base, xp.where(negative, 0, exponent).astype(exponent.dtype))
    odd = xp.bitwise_and(exponent, 1).astype(np.bool_)
    special = xp.where(base == 1, 1, xp.where(base == -1, xp.where(odd, -1, 1), 0))
    return xp.where(negative, special, value)


def _pow_cpu(input, exponent):
    np_dtype = binary_dtype(input, exponent).numpy_dtype
    if np_dtype == np.bool_:  # bool ** True is the tensor, bool ** False is ones
        return input._data.copy() if exponent else _array_namespace(input._data).ones(input._data.shape, np.bool_)
    work = compute_dtype(np_dtype)
    a, b = operand(input, work), operand(exponent, work)
    with np.errstate(all="ignore"):
        value = _int_pow(a, b) if work.kind in "iu" else np.power(a, b)
    return _as_array(value).astype(np_dtype, copy=False)


pow = defop("pow", _pow_meta, cpu=_pow_cpu, has_out=True, tags=("pointwise",))  # noqa: A001
pow.result_dtype = binary_dtype
make_inplace(pow)


def _float_power_dtype(input, exponent):
    for x in (input, exponent):
        if (x.dtype.is_complex if isinstance(x, Tensor) else isinstance(x, (complex, np.complexfloating))):
            return D.complex128
    return D.float64


def _float_power_meta(input, exponent):
    """Elementwise ``input ** exponent`` computed in double precision.

    The result is float64, or complex128 when either operand is complex.

    Args:
        input (Tensor or Number): the base.
        exponent (Tensor or Number): the exponent.

    Returns:
        Tensor: float64 or complex128, of the broadcast shape.

    Example:
        >>> import ember
        >>> ember.float_power(ember.tensor([2, 3]), -1)
        tensor([0.5000, 0.3333], dtype=ember.float64)
    """
    _check_pow_operands("float_power", input, exponent)
    dtype = _float_power_dtype(input, exponent)
    return MetaArray(broadcast_shapes(shape_of(input), shape_of(exponent)), dtype.numpy_dtype)


def _float_power_cpu(input, exponent):
    np_dtype = _float_power_dtype(input, exponent).numpy_dtype
    with np.errstate(all="ignore"):
        return _as_array(np.power(operand(input, np_dtype), operand(exponent, np_dtype))).astype(np_dtype, copy=False)


def _check_float_power_inplace(self, exponent):
    dtype = _float_power_dtype(self, exponent)
    if self.dtype is not dtype:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {_torch_name(self.dtype)} but the operation's result "
            f"requires dtype {_torch_name(dtype)} (a result that can't be cast to the base's dtype in place)"
        )


float_power = defop("float_power", _float_power_meta, cpu=_float_power_cpu, has_out=True, tags=("pointwise",))
make_inplace(float_power, check=_check_float_power_inplace)


# -- clamp, lerp, addcmul, addcdiv, where ---------------------------------------------------


def _clamp_meta(input, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    """Elementwise clamp of ``input`` into ``[min, max]``: ``minimum(maximum(input, min), max)``.

    Either bound may be a number, a tensor (broadcasting) or None (no bound on
    that side), but not both None. NaN in ``input`` or a bound gives NaN. When
    ``min > max`` every element becomes ``max``. The result dtype is the
    promotion of ``input`` and the bounds.

    Args:
        input (Tensor): the values.
        min (Number or Tensor, optional): the lower bound.
        max (Number or Tensor, optional): the upper bound.

    Returns:
        Tensor: the clamped values.

    Raises:
        RuntimeError: if both bounds are None.
        NotImplementedError: for complex values, or bool values with two bounds or a number bound.

    Example:
        >>> import ember
        >>> ember.clamp(ember.tensor([-2., 0.5, 3.]), min=0., max=1.)
        tensor([0.0000, 0.5000, 1.0000])
        >>> ember.clamp(ember.tensor([1, 5]), max=ember.tensor([2, 3]))
        tensor([1, 3])
    """
    check_tensor("clamp", "input", 1, input)
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
    dtype = input.dtype
    if number_keeps_dtype(dtype, min) and number_keeps_dtype(dtype, max) and dtype in REAL_NO_BOOL:
        return MetaArray(input._data.shape, input._data.dtype)  # fast path: number bounds, no promotion
    if min is not None:
        _check_operand("clamp", "min", min)
    if max is not None:
        _check_operand("clamp", "max", max)
    dtype = D.result_type_of((input, min, max))
    if dtype.is_complex:
        if input.dtype.is_floating_point and not isinstance(min, Tensor) and not isinstance(max, Tensor):
            raise RuntimeError(f"value cannot be converted to type {input.dtype.name} without overflow")
        raise NotImplementedError("clamp is not supported for complex types")
    if dtype is D.bool:  # PyTorch clamps bool tensors by one bool tensor bound only
        if (min is not None and max is not None) or not isinstance(max if min is None else min, Tensor):
            raise not_implemented("clamp", dtype)
    return MetaArray(broadcast_shapes(input._data.shape, shape_of(min), shape_of(max)), dtype.numpy_dtype)


def _clamp_cpu(input, min=None, max=None):  # noqa: A002
    dtype = input.dtype
    if number_keeps_dtype(dtype, min) and number_keeps_dtype(dtype, max):
        np_dtype = input._data.dtype
    else:
        np_dtype = D.result_type_of((input, min, max)).numpy_dtype
    work = compute_dtype(np_dtype)
    low = None if min is None else operand(min, work)
    high = None if max is None else operand(max, work)
    x = operand(input, work)
    if type(x) is not np.ndarray:
        # GPU arrays: CuPy's clip takes no None bound and ignores a NaN bound, so spell out numpy's clip
        if low is not None:
            x = np.maximum(x, low)
        if high is not None:
            x = np.minimum(x, high)
        return x.astype(np_dtype, copy=False)
    # numpy's clip is minimum(maximum(x, low), high): NaN anywhere gives NaN, and low > high gives high
    return _as_array(np.clip(x, low, high)).astype(np_dtype, copy=False)


clamp = defop("clamp", _clamp_meta, cpu=_clamp_cpu, has_out=True, tags=("pointwise",))
clamp.result_dtype = lambda input, min=None, max=None: D.result_type_of((input, min, max))
make_inplace(clamp)


def _lerp_meta(input, end, weight):
    """Linear interpolation ``input + weight * (end - input)``, elementwise and broadcasting.

    Args:
        input (Tensor): the start points (floating or complex).
        end (Tensor): the end points, of the same dtype as ``input``.
        weight (float or Tensor): the weights; a tensor with dimensions must have
            ``input``'s dtype.

    Returns:
        Tensor: of ``input``'s dtype and the broadcast shape.

    Raises:
        RuntimeError: for mismatched dtypes, or a complex weight with real points.
        NotImplementedError: for integer or bool points.

    Example:
        >>> import ember
        >>> ember.lerp(ember.tensor([0., 10.]), ember.tensor([10., 20.]), 0.25)
        tensor([ 2.5000, 12.5000])
    """
    check_tensor("lerp", "input", 1, input)
    check_tensor("lerp", "end", 2, end)
    if not isinstance(weight, Tensor):
        _check_operand("lerp", "weight", weight)
    dtype = input.dtype
    if end.dtype is not dtype:
        raise RuntimeError(f"expected dtype {dtype.name} for `end` but got dtype {end.dtype.name}")
    if isinstance(weight, Tensor) and weight._data.ndim and weight.dtype is not dtype:
        raise RuntimeError(f"expected dtype {dtype.name} for `weight` but got dtype {weight.dtype.name}")
    if dtype not in FLOATING_AND_COMPLEX:
        raise not_implemented("lerp_kernel_scalar" if not isinstance(weight, Tensor) else "lerp_kernel_tensor", dtype)
    if not dtype.is_complex and (
        isinstance(weight, (complex, np.complexfloating)) or (isinstance(weight, Tensor) and weight.dtype.is_complex)
    ):
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")
    return MetaArray(broadcast_shapes(input._data.shape, end._data.shape, shape_of(weight)), input._data.dtype)


def _lerp_cpu(input, end, weight):
    np_dtype = input._data.dtype
    work = compute_dtype(np_dtype)
    start, stop, w = operand(input, work), operand(end, work), operand(weight, work)
    with np.errstate(all="ignore"):
        diff = _as_array(np.subtract(stop, start))  # of the broadcast shape of start and stop
        # two formulas, each exact at its end point (weight 0 or 1)
        if not isinstance(weight, Tensor):
            if np.abs(w) < 0.5:
                diff *= w
                value = np.add(diff, start, out=diff)
            else:
                diff *= 1 - w
                value = np.subtract(stop, diff, out=diff)
        else:
            value = np.where(np.abs(w) < 0.5, start + w * diff, stop - diff * (1 - w))
    return _as_array(value).astype(np_dtype, copy=False)


lerp = defop("lerp", _lerp_meta, cpu=_lerp_cpu, has_out=True, tags=("pointwise",))
make_inplace(lerp)


def _addc_dtype(name, input, tensor1, tensor2, value):
    check_tensor(name, "input", 1, input)
    check_tensor(name, "tensor1", 2, tensor1)
    check_tensor(name, "tensor2", 3, tensor2)
    if not isinstance(value, _NUMBER):
        raise TypeError(f"{name}(): argument 'value' must be Number, not {type(value).__name__}")
    return D.result_type_of((input, tensor1, tensor2))


def _check_addc_value(value, dtype):
    if isinstance(value, (complex, np.complexfloating)) and not dtype.is_complex:
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")


def _addc_value(value, np_dtype):
    """``value`` converted like PyTorch: truncated to an integer for integer results."""
    if np_dtype.kind in "iu":
        return operand(int(value), np_dtype)
    return operand(value, np_dtype)


def _addcmul_meta(input, tensor1, tensor2, *, value=1):
    """Elementwise ``input + value * tensor1 * tensor2``, broadcasting, with PyTorch's type promotion.

    Args:
        input (Tensor): the tensor added to.
        tensor1 (Tensor): the first factor.
        tensor2 (Tensor): the second factor.
        value (Number): the multiplier (truncated to an integer for integer results).

    Returns:
        Tensor: of the promoted dtype and broadcast shape.

    Raises:
        NotImplementedError: when the promoted dtype is bool.
        RuntimeError: for a complex ``value`` with a real result.

    Example:
        >>> import ember
        >>> ember.addcmul(ember.tensor([1., 1.]), ember.tensor([2., 3.]), ember.tensor([4., 5.]), value=0.5)
        tensor([5.0000, 8.5000])
    """
    dtype = _addc_dtype("addcmul", input, tensor1, tensor2, value)
    if dtype is D.bool:
        raise not_implemented("addcmul", dtype)
    _check_addc_value(value, dtype)
    return MetaArray(broadcast_shapes(input._data.shape, tensor1._data.shape, tensor2._data.shape), dtype.numpy_dtype)


def _addcmul_cpu(input, tensor1, tensor2, *, value=1):
    np_dtype = D.result_type_of((input, tensor1, tensor2)).numpy_dtype
    work = compute_dtype(np_dtype)
    with np.errstate(all="ignore"):
        product = _addc_value(value, work) * operand(tensor1, work) * operand(tensor2, work)
        return _as_array(operand(input, work) + product).astype(np_dtype, copy=False)


addcmul = defop("addcmul", _addcmul_meta, cpu=_addcmul_cpu, has_out=True, tags=("pointwise",))
addcmul.result_dtype = lambda input, tensor1, tensor2, *, value=1: D.result_type_of((input, tensor1, tensor2))
make_inplace(addcmul)


def _addcdiv_meta(input, tensor1, tensor2, *, value=1):
    """Elementwise ``input + value * tensor1 / tensor2``, broadcasting, with PyTorch's type promotion.

    Args:
        input (Tensor): the tensor added to.
        tensor1 (Tensor): the numerators.
        tensor2 (Tensor): the denominators; ``tensor1`` and ``tensor2`` may not both be integer (or bool).
        value (Number): the multiplier.

    Returns:
        Tensor: of the promoted dtype and broadcast shape.

    Raises:
        RuntimeError: when both ``tensor1`` and ``tensor2`` are integer or bool tensors, or for a
            complex ``value`` with a real result.

    Example:
        >>> import ember
        >>> ember.addcdiv(ember.tensor([1., 1.]), ember.tensor([2., 3.]), ember.tensor([4., 6.]), value=2)
        tensor([2., 2.])
    """
    dtype = _addc_dtype("addcdiv", input, tensor1, tensor2, value)
    if tensor1.dtype.category < D.FLOATING and tensor2.dtype.category < D.FLOATING:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a "
            "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
            "(input + value * ember.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes."
        )
    _check_addc_value(value, dtype)
    return MetaArray(broadcast_shapes(input._data.shape, tensor1._data.shape, tensor2._data.shape), dtype.numpy_dtype)


def _addcdiv_cpu(input, tensor1, tensor2, *, value=1):
    np_dtype = D.result_type_of((input, tensor1, tensor2)).numpy_dtype
    work = compute_dtype(np_dtype)
    with np.errstate(all="ignore"):
        quotient = _addc_value(value, work) * (operand(tensor1, work) / operand(tensor2, work))
        return _as_array(operand(input, work) + quotient).astype(np_dtype, copy=False)


addcdiv = defop("addcdiv", _addcdiv_meta, cpu=_addcdiv_cpu, has_out=True, tags=("pointwise",))
make_inplace(addcdiv)


def _where_meta(condition, input, other):
    """Elementwise choice: ``input`` where ``condition`` is True, else ``other``; all three broadcast.

    Args:
        condition (Tensor): a bool (or uint8) tensor.
        input (Tensor or Number): the values where ``condition`` holds.
        other (Tensor or Number): the values elsewhere.

    Returns:
        Tensor: of the promoted dtype of ``input`` and ``other``.

    Raises:
        RuntimeError: if ``condition`` is not a bool tensor, or the shapes don't broadcast.

    Example:
        >>> import ember
        >>> x = ember.tensor([-1.0, 2.0, -3.0])
        >>> ember.where(x > 0, x, 0.0)
        tensor([0., 2., 0.])
    """
    check_tensor("where", "condition", 1, condition)
    if condition.dtype is not D.bool and condition.dtype is not D.uint8:
        raise RuntimeError(
            "where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{_torch_name(condition.dtype)}"
        )
    _check_operand("where", "input", input)
    _check_operand("where", "other", other)
    dtype = binary_dtype(input, other)
    return MetaArray(broadcast_shapes(condition._data.shape, shape_of(input), shape_of(other)), dtype.numpy_dtype)


def _where_cpu(condition, input, other):
    np_dtype = binary_dtype(input, other).numpy_dtype
    mask = condition._data
    if mask.dtype != np.bool_:
        mask = mask.astype(np.bool_)
    return _as_array(np.where(mask, operand(input, np_dtype), operand(other, np_dtype))).astype(np_dtype, copy=False)


where = defop("where", _where_meta, cpu=_where_cpu, has_out=True, tags=("pointwise",))


# -- isclose, allclose, equal -------------------------------------------------------------------


def _check_close_args(name, input, other, rtol, atol):
    check_tensor(name, "input", 1, input)
    check_tensor(name, "other", 2, other)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{_torch_name(input.dtype)} did not match {_torch_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    return broadcast_shapes(input._data.shape, other._data.shape)


def _isclose_meta(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|``, as a bool tensor.

    Equal values (infinities included) are always close; NaNs are close to each
    other only with ``equal_nan``. Steps compute in the inputs' dtype (integer
    differences wrap as in PyTorch; integer tolerances use the default float).

    Args:
        input (Tensor): the first tensor.
        other (Tensor): the second tensor, of the same dtype, broadcasting.
        rtol (float): the relative tolerance.
        atol (float): the absolute tolerance.
        equal_nan (bool): whether two NaNs are close.

    Returns:
        Tensor: bool, of the broadcast shape.

    Raises:
        RuntimeError: for different dtypes or a negative tolerance.

    Example:
        >>> import ember
        >>> ember.isclose(ember.tensor([1.0, 2.0, float("nan")]), ember.tensor([1.0 + 1e-9, 2.1, float("nan")]))
        tensor([ True, False, False])
    """
    shape = _check_close_args("isclose", input, other, rtol, atol)
    return MetaArray(shape, np.dtype(np.bool_))


def _rounded(value, np_dtype):
    return _as_array(value).astype(np_dtype, copy=False)


def _isclose_np(a, b, dtype, rtol, atol, equal_nan):
    """PyTorch's isclose steps: each one rounded to the inputs' dtype (integers and bool: the default float)."""
    with np.errstate(all="ignore"):
        close = np.equal(a, b)
        if equal_nan and dtype.category >= D.FLOATING:
            close |= np.isnan(a) & np.isnan(b)
        if rtol == 0 and atol == 0:
            return close
        if dtype.category < D.FLOATING:
            a = a.astype(D.get_default_dtype().numpy_dtype)
            b = b.astype(a.dtype)
        np_dtype = a.dtype
        real = dtype.to_real().numpy_dtype if dtype.is_complex else np_dtype
        allowed = _rounded(atol + _rounded(np.abs(_rounded(b * rtol, np_dtype)), real), real)
        actual = _rounded(np.abs(_rounded(a - b, np_dtype)), real)
        close |= np.isfinite(actual) & (actual <= allowed)
    return close


def _isclose_cpu(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _as_array(_isclose_np(input._data, other._data, input.dtype, rtol, atol, equal_nan))


isclose = defop("isclose", _isclose_meta, cpu=_isclose_cpu, tags=("pointwise",))


def _data_dependent(name, *tensors):
    if any(t._device.type == "meta" for t in tensors):
        raise NotImplementedError(f"{name}() of meta tensors: the result is data-dependent (a Python bool)")


def _allclose_meta(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``input`` is close to ``other``: ``isclose(...).all()`` as a Python bool.

    Args:
        input (Tensor): the first tensor.
        other (Tensor): the second tensor, of the same dtype, broadcasting.
        rtol (float): the relative tolerance.
        atol (float): the absolute tolerance.
        equal_nan (bool): whether two NaNs are close.

    Returns:
        bool: True when all elements are close.

    Raises:
        RuntimeError: for different dtypes, a negative tolerance or shapes that don't broadcast.

    Example:
        >>> import ember
        >>> ember.allclose(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.0 + 1e-7]))
        True
    """
    _check_close_args("allclose", input, other, rtol, atol)
    _data_dependent("allclose", input, other)


def _allclose_cpu(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(np.all(_isclose_np(input._data, other._data, input.dtype, rtol, atol, equal_nan)))


allclose = defop("allclose", _allclose_meta, cpu=_allclose_cpu, kind="other", tags=("pointwise",))


def _equal_meta(input, other):
    """Whether ``input`` and ``other`` have the same shape and equal values, as a Python bool.

    Values compare after type promotion (``tensor([1.])`` equals ``tensor([1])``);
    NaN equals nothing.

    Args:
        input (Tensor): the first tensor.
        other (Tensor): the second tensor.

    Returns:
        bool: True when shapes and values agree.

    Example:
        >>> import ember
        >>> ember.equal(ember.tensor([1, 2]), ember.tensor([1.0, 2.0]))
        True
    """
    check_tensor("equal", "input", 1, input)
    check_tensor("equal", "other", 2, other)
    _data_dependent("equal", input, other)


def _equal_cpu(input, other):
    a, b = input._data, other._data
    if a.shape != b.shape:
        return False
    dtype = D.promote_types(input.dtype, other.dtype).numpy_dtype
    work = compute_dtype(dtype)
    return bool(np.array_equal(a.astype(work, copy=False), b.astype(work, copy=False)))


equal = defop("equal", _equal_meta, cpu=_equal_cpu, kind="other", tags=("pointwise",))


# -- aliases ---------------------------------------------------------------------------------------

#: Public aliases PyTorch has (``ember.clip`` is ``ember.clamp``), registered as composite ops.
ALIAS_OPS = {
    "absolute": "abs", "negative": "neg", "subtract": "sub", "multiply": "mul", "divide": "div",
    "true_divide": "div", "clip": "clamp", "arctan2": "atan2", "arcsin": "asin", "arccos": "acos",
    "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "fix": "trunc",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
}
for _alias, _target in ALIAS_OPS.items():
    alias(_alias, registry[_target])


# -- Tensor methods and operators -----------------------------------------------------------------


def _where_method(self, condition, other):
    """``self.where(condition, other)`` is ``ember.where(condition, self, other)``."""
    return where(condition, self, other)


def _polygamma_method(self, n):
    """``self.polygamma(n)`` is ``ember.polygamma(n, self)``."""
    return polygamma(n, self)


def _polygamma_inplace_method(self, n):
    """``self.polygamma_(n)``: ``ember.polygamma(n, self)`` written into ``self``."""
    return polygamma.inplace(self, n)


def _reflected(op):
    def method(self, other):
        return op(other, self)

    return method


def _forward(op):
    def method(self, other):
        return op(self, other)

    return method


def _inplace(op):
    def method(self, other):
        return op.inplace(self, other)

    return method


# -- tanh_backward, sigmoid_backward: the gradients of tanh and sigmoid from their outputs ------------


def _backward_from_output(name, np_fn, formula):
    """Define ``name(grad_output, output)``, PyTorch's ATen op of that name: ``np_fn(grad_output, output)``.

    Autograd's formulas for ``tanh`` and ``sigmoid`` call it: one op instead of
    the three that the formula in other ops would take, on the hot path of
    every backward through them.
    """

    def meta(grad_output, output):
        check_tensor(name, "grad_output", 1, grad_output)
        check_tensor(name, "output", 2, output)
        shape = broadcast_shapes(grad_output._data.shape, output._data.shape)
        dtype = binary_dtype(grad_output, output)
        if dtype not in FLOATING_AND_COMPLEX:
            raise not_implemented(name, dtype)
        return MetaArray(shape, dtype.numpy_dtype)

    def cpu(grad_output, output):
        np_dtype = binary_dtype(grad_output, output).numpy_dtype
        work = compute_dtype(np_dtype)
        value = quiet(np_fn, operand(grad_output, work), operand(output, work))
        return _as_array(value).astype(np_dtype, copy=False)

    def checked_cpu(grad_output, output):
        # the common call: two tensors of one dtype numpy computes in, one shape (meta's checks pass)
        if type(grad_output) is Tensor and type(output) is Tensor:
            g, y = grad_output._data, output._data
            if g.dtype is y.dtype and g.shape == y.shape and g.dtype in _DIRECT_FLOATS:
                return np.asarray(quiet(np_fn, g, y))
        return None

    meta.__name__ = name
    meta.__doc__ = f"""The gradient of ``{name[: -len("_backward")]}`` from its output: ``{formula}``.

    PyTorch's ATen op of the same name (``torch.ops.aten.{name}``; not a public function there
    either). ``conj`` is the identity on real tensors.

    Args:
        grad_output (Tensor): the gradient of the output.
        output (Tensor): the output of ``{name[: -len("_backward")]}``.

    Raises:
        TypeError: if an argument is not a tensor.
        RuntimeError: if the shapes don't broadcast.
        NotImplementedError: for integer and bool dtypes.
    """
    op = defop(name, meta, cpu=cpu, tags=("pointwise",))
    op.register_checked_kernel("cpu", checked_cpu)
    return op


_DIRECT_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def _tanh_backward_np(g, y):
    factor = 1 - y * y
    return g * (np.conjugate(factor) if factor.dtype.kind == "c" else factor)


def _sigmoid_backward_np(g, y):
    factor = y - y * y
    return g * (np.conjugate(factor) if factor.dtype.kind == "c" else factor)


tanh_backward = _backward_from_output("tanh_backward", _tanh_backward_np, "grad_output * conj(1 - output**2)")
sigmoid_backward = _backward_from_output(
    "sigmoid_backward", _sigmoid_backward_np, "grad_output * conj(output - output**2)"
)


# -- threshold_backward: the gradient of threshold and relu ----------------------------------------------


def _threshold_backward_meta(grad_output, self, threshold):
    """The gradient of ``threshold`` (and of ``relu`` from its output): ``grad_output`` where
    ``self > threshold``, else 0.

    PyTorch's ATen op of the same name (``torch.ops.aten.threshold_backward``; not a public function
    there either). As there, an element passes unless ``self <= threshold``: a NaN in ``self`` passes
    its gradient, and a NaN or infinite gradient at a blocked element gives 0, not NaN. ``threshold``
    is rounded to the computation's dtype first.

    Args:
        grad_output (Tensor): the gradient of the output; integer or floating point.
        self (Tensor): the input of ``threshold``, or the output of ``relu``.
        threshold (float): the threshold.

    Returns:
        Tensor: the broadcast shape of the two tensors, in their promoted dtype.

    Raises:
        TypeError: if ``grad_output`` or ``self`` is not a tensor, or ``threshold`` not a real number.
        RuntimeError: if the shapes don't broadcast.
        NotImplementedError: for bool and complex dtypes.
    """
    check_tensor("threshold_backward", "grad_output", 1, grad_output)
    check_tensor("threshold_backward", "self", 2, self)
    if type(threshold) is bool or not isinstance(threshold, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"threshold_backward(): argument 'threshold' (position 3) must be Number, not {type(threshold).__name__}"
        )
    shape = broadcast_shapes(grad_output._data.shape, self._data.shape)
    dtype = binary_dtype(grad_output, self)
    if dtype is D.bool or dtype.category == D.COMPLEX:
        raise not_implemented("threshold_cpu", dtype)  # PyTorch names its CPU kernel
    return MetaArray(shape, dtype.numpy_dtype)


def _threshold_backward_np(g, y, threshold):
    blocked = y <= y.dtype.type(threshold)
    bits = _SAME_SIZE_BITS.get(g.dtype)
    if bits is not None and type(g) is np.ndarray:
        # numpy's where branches per element (about 15x slower than a product on random signs): select by
        # masking the bits instead, all ones where the gradient passes and zero (+0.0) where it is blocked
        keep = np.subtract(blocked, 1, dtype=bits)
        return np.bitwise_and(g.view(bits), keep).view(g.dtype)
    return np.where(blocked, g.dtype.type(0), g)


_SAME_SIZE_BITS = {np.dtype(np.float32): np.dtype(np.uint32), np.dtype(np.float64): np.dtype(np.uint64)}


def _threshold_backward_cpu(grad_output, self, threshold):
    np_dtype = binary_dtype(grad_output, self).numpy_dtype
    work = compute_dtype(np_dtype)
    value = quiet(_threshold_backward_np, operand(grad_output, work), operand(self, work), threshold)
    return _as_array(value).astype(np_dtype, copy=False)


def _threshold_backward_checked_cpu(grad_output, self, threshold):
    # the common call (relu's backward): two tensors of one float dtype and shape, a Python number
    if type(grad_output) is Tensor and type(self) is Tensor and type(threshold) in (int, float):
        g, y = grad_output._data, self._data
        if g.dtype is y.dtype and g.shape == y.shape and g.dtype in _SAME_SIZE_BITS:  # float32/float64
            return np.asarray(quiet(_threshold_backward_np, g, y, threshold))
    return None


threshold_backward = defop("threshold_backward", _threshold_backward_meta, cpu=_threshold_backward_cpu,
                           tags=("pointwise",))
threshold_backward.register_checked_kernel("cpu", _threshold_backward_checked_cpu)

#: Ops of the registry that are neither Tensor methods nor public functions of ``ember`` (as in PyTorch).
_ATEN_ONLY = ("tanh_backward", "sigmoid_backward", "threshold_backward")


#: Operators of this family; ``__invert__`` (ember._tensor_methods) uses ``bitwise_not``. Three
#: ordinary methods are here too because ``self`` is not their first argument: ``where``,
#: ``polygamma`` and ``polygamma_``.
OPERATORS = {"where": _where_method, "polygamma": _polygamma_method, "polygamma_": _polygamma_inplace_method}
for _symbol, _op in (("pow", pow), ("floordiv", floor_divide), ("mod", remainder), ("and", bitwise_and),
                     ("or", bitwise_or), ("xor", bitwise_xor), ("lshift", bitwise_left_shift),
                     ("rshift", bitwise_right_shift)):
    OPERATORS[f"__{_symbol}__"] = _forward(_op)
    OPERATORS[f"__r{_symbol}__"] = _reflected(_op)
    OPERATORS[f"__i{_symbol}__"] = _inplace(_op)

#: Ops of this module that are also Tensor methods (see ember._tensor_methods): all but the aliases
#: (methods through ALIASES below) and the ones whose method takes ``self`` elsewhere (OPERATORS).
METHODS = [
    name for name in list(registry)[_FIRST_OP:]
    if name not in ALIAS_OPS and name not in ("where", "polygamma", "polygamma_") and name not in _ATEN_ONLY
]
#: Tensor method aliases: the public aliases and their in-place forms (``x.clip_``).
ALIASES = dict(ALIAS_OPS)
ALIASES.update({f"{a}_": f"{t}_" for a, t in ALIAS_OPS.items() if f"{t}_" in registry})

del _name, _fn, _summary, _x, _y, _supported, _alias, _target, _symbol, _op
