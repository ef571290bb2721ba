"""Pointwise arithmetic: ``add``, ``sub``, ``mul``, ``div``, ``floor_divide``, ``remainder``, ``fmod``,
``pow`` and ``float_power``.

The binary ops without options are one line through :mod:`ember._ops._pointwise_helpers`
(``binary``); ``add``/``sub`` (``alpha``), ``div`` (``rounding_mode``) and the powers have
their meta function and kernel written out. Calls without type promotion compute through
the op's plan (:mod:`ember._ops._binary_plan`). Every meta function checks arguments like
PyTorch: the same error types, and ``NotImplementedError`` for a dtype PyTorch's CPU kernels
refuse. The other pointwise families: :mod:`.unary_math`, :mod:`.comparison`,
:mod:`.bitwise_logical`, :mod:`.binary_math`, :mod:`.ternary`, :mod:`.pointwise_backward`
and :mod:`.pointwise_aliases`.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from . import _cpu_pointwise
from ._array_module import array_namespace as _array_namespace
from ._array_module import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._binary_plan import BinaryRule
from ._float_errors import quiet
from ._pointwise_helpers import (
    REAL_NO_BOOL,
    _check_operand,
    _torch_name,
    binary,
    binary_dtype,
    compute_dtype,
    make_inplace,
    not_implemented,
    operand,
    operator_methods,
)
from ._pointwise_helpers import is_int_scalar as _is_int_scalar
from ._registry import defop, registry
from ._shapes import broadcast_shapes, shape_of

__all__ = []

_ALL_NUMPY_DTYPES = D.numpy_dtype_set(D.ALL_DTYPES)
_FIRST_OP = len(registry)  # the ops registered from here on are this module's (see METHODS at the end)


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
    into = _cpu_pointwise.binary_into(rule, rule.native)  # large calls, alpha too, in C++ (out=, in place, below)

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
        elif _cpu_pointwise.large(input, other):  # alpha != 1, no promotion: a + alpha * b in C++
            plan = rule.plan(input, other)
            if plan is not None and plan.direct:
                shape = plan.shape or shape_of(input if type(input) is Tensor else other)
                value = _cpu_pointwise.new_result(into, shape, plan.dtype, input, other, alpha=alpha)
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
    op.cpu_into = into
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


_div_into = _cpu_pointwise.same_dtype_into(_cpu_pointwise.BINARY_OPS[np.true_divide])


def _div_cpu(input, other, *, rounding_mode=None):
    np_dtype = _div_dtype(input, other, rounding_mode).numpy_dtype
    if rounding_mode is None and _cpu_pointwise.large(input, other):  # true division without promotion in C++
        shape = broadcast_shapes(shape_of(input), shape_of(other))
        value = _cpu_pointwise.new_result(_div_into, shape, np_dtype, input, other)
        if value is not None:
            return value
    with np.errstate(all="ignore"):
        if rounding_mode is None:
            return _as_array(np.true_divide(operand(input, np_dtype), operand(other, np_dtype)))
        work = compute_dtype(np_dtype)
        value = _ROUNDING[rounding_mode](operand(input, work), operand(other, work))
    return _as_array(value).astype(np_dtype, copy=False)


div = defop("div", _div_meta, cpu=_div_cpu, has_out=True, tags=("pointwise",))
div.result_dtype = lambda input, other, *, rounding_mode=None: _div_dtype(input, other, rounding_mode)
div.cpu_into = _div_into
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
    """Integer powers; a negative exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise.

    On GPU arrays (``xp`` is CuPy) negative exponents are handled by ``where`` for every signed exponent,
    rather than after asking the GPU whether there are any (a synchronisation).
    """
    xp = _array_namespace(base, exponent)
    if xp is np:
        base, exponent = _as_array(base), _as_array(exponent)
        if exponent.dtype.kind == "u" or not np.any(exponent < 0):
            return np.power(base, exponent)
    else:
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


#: Operators of this module (``**``, ``//``, ``%`` and their reflected and in-place forms).
OPERATORS = {}
for _symbol, _op in (("pow", pow), ("floordiv", floor_divide), ("mod", remainder)):
    OPERATORS.update(operator_methods(_symbol, _op))


#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = list(registry)[_FIRST_OP:]

del _symbol, _op
