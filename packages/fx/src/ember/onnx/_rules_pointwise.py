"""ONNX rules for pointwise ops: unary math, activations, binary arithmetic, comparisons, casts.

ONNX does not promote types, so every rule converts its operands to the dtype ember
computed in (the output's, or the promoted dtype for comparisons) before the node.
"""

from __future__ import annotations

import math

from ._builder import is_floating
from ._dynamic import SymInt
from ._table import RuleTable

TABLE = RuleTable("pointwise")


def _float_unary(onnx_op):
    """A rule for an op that is one ONNX node, computed in the output dtype."""

    def rule(g, input, **_):
        return g.op(onnx_op, g.cast(input, g.out.dtype))

    rule.__name__ = f"_{onnx_op.lower()}"
    return rule


for _name, _onnx in {
    "relu": "Relu",
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "exp": "Exp",
    "log": "Log",
    "sqrt": "Sqrt",
    "neg": "Neg",
    "abs": "Abs",
    "sin": "Sin",
    "cos": "Cos",
    "erf": "Erf",
    "floor": "Floor",
    "ceil": "Ceil",
    "reciprocal": "Reciprocal",
    "sign": "Sign",
    "hardswish": "HardSwish",
    "selu": "Selu",
    "sinh": "Sinh",
    "cosh": "Cosh",
    "tan": "Tan",
    "asin": "Asin",
    "acos": "Acos",
    "atan": "Atan",
    "softsign": "Softsign",
}.items():
    TABLE.add(_name, _float_unary(_onnx))


@TABLE.register("rsqrt")
def _rsqrt(g, input, **_):
    return g.op("Reciprocal", g.op("Sqrt", g.cast(input, g.out.dtype)))


@TABLE.register("square")
def _square(g, input, **_):
    x = g.cast(input, g.out.dtype)
    return g.op("Mul", x, x)


@TABLE.register("log1p")
def _log1p(g, input, **_):
    x = g.cast(input, g.out.dtype)
    return g.op("Log", g.op("Add", x, g.scalar(1, g.out.dtype)))


@TABLE.register("expm1")
def _expm1(g, input, **_):
    x = g.cast(input, g.out.dtype)
    return g.op("Sub", g.op("Exp", x), g.scalar(1, g.out.dtype))


@TABLE.register("isnan")
def _isnan(g, input, **_):
    return g.op("IsNaN", input)


@TABLE.register("isinf")
def _isinf(g, input, **_):
    return g.op("IsInf", input)


@TABLE.register("logical_not")
def _logical_not(g, input, **_):
    return g.op("Not", g.cast(input, g.out.dtype))


@TABLE.register("silu")
def _silu(g, input, **_):
    return g.op("Mul", input, g.op("Sigmoid", input))


@TABLE.register("mish")
def _mish(g, input, **_):
    return g.op("Mul", input, g.op("Tanh", g.op("Softplus", input)))


@TABLE.register("softplus")
def _softplus(g, input, beta=1, threshold=20, **_):
    dtype = g.out.dtype
    scaled = input if beta == 1 else g.op("Mul", input, g.scalar(beta, dtype))
    soft = g.op("Softplus", scaled)
    if beta != 1:
        soft = g.op("Div", soft, g.scalar(beta, dtype))
    # above the threshold ember returns the input itself, as PyTorch does
    return g.op("Where", g.op("Greater", scaled, g.scalar(threshold, dtype)), input, soft)


@TABLE.register("elu")
def _elu(g, input, alpha=1.0, **_):
    return g.op("Elu", input, alpha=float(alpha))


@TABLE.register("leaky_relu")
def _leaky_relu(g, input, negative_slope=0.01, **_):
    return g.op("LeakyRelu", input, alpha=float(negative_slope))


@TABLE.register("hardsigmoid")
def _hardsigmoid(g, input, **_):
    return g.op("HardSigmoid", input, alpha=1.0 / 6.0, beta=0.5)


@TABLE.register("hardtanh")
def _hardtanh(g, input, min_val=-1.0, max_val=1.0, **_):
    dtype = g.out.dtype
    return g.op("Clip", input, g.scalar(min_val, dtype), g.scalar(max_val, dtype))


@TABLE.register("relu6")
def _relu6(g, input, **_):
    dtype = g.out.dtype
    return g.op("Clip", input, g.scalar(0, dtype), g.scalar(6, dtype))


@TABLE.register("gelu")
def _gelu(g, input, approximate="none", **_):
    if approximate not in ("none", "tanh"):
        g.unsupported(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    if g.opset >= 20:
        return g.op("Gelu", input, approximate=approximate)
    dtype = g.out.dtype
    half_x = g.op("Mul", input, g.scalar(0.5, dtype))
    if approximate == "none":  # x/2 * (1 + erf(x / sqrt(2)))
        inner = g.op("Erf", g.op("Div", input, g.scalar(math.sqrt(2.0), dtype)))
    else:  # x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
        cube = g.op("Mul", g.op("Mul", input, input), input)
        poly = g.op("Add", input, g.op("Mul", cube, g.scalar(0.044715, dtype)))
        inner = g.op("Tanh", g.op("Mul", poly, g.scalar(math.sqrt(2.0 / math.pi), dtype)))
    return g.op("Mul", half_x, g.op("Add", inner, g.scalar(1.0, dtype)))


# -- binary ----------------------------------------------------------------------------------------


def operand(g, value, dtype):
    """A tensor operand (value name) cast to ``dtype``, or a Python scalar as a 0-d constant of ``dtype``.

    A scalar that is a size of a dynamic axis (``x / x.shape[1]``) is computed from the runtime shape.
    """
    if isinstance(value, str):
        return g.cast(value, dtype)
    if isinstance(value, SymInt):
        return g.cast_scalar(g.i64_scalar(value), dtype)
    return g.scalar(value, dtype)


def common_dtype(g, *values):
    """The dtype ember computes ``values`` (value names and Python scalars) in (``ember.result_type``)."""
    import ember

    def example(v):
        if isinstance(v, str):
            meta = g.meta(v)
            return ember.empty(meta.shape, dtype=meta.dtype, device="meta")
        return v.value if isinstance(v, SymInt) else v

    dtype = ember.result_type(example(values[0]), example(values[1]))
    for v in values[2:]:
        dtype = ember.result_type(ember.empty((), dtype=dtype, device="meta"), example(v))
    return dtype


def _binary(onnx_op):
    def rule(g, input, other, **_):
        dtype = g.out.dtype
        return g.op(onnx_op, operand(g, input, dtype), operand(g, other, dtype))

    rule.__name__ = f"_{onnx_op.lower()}"
    return rule


for _name, _onnx in {"mul": "Mul", "maximum": "Max", "minimum": "Min"}.items():
    TABLE.add(_name, _binary(_onnx))


@TABLE.register("pow")
def _pow(g, input, exponent, **_):
    dtype = g.out.dtype
    return g.op("Pow", operand(g, input, dtype), operand(g, exponent, dtype))


@TABLE.register("threshold")
def _threshold(g, input, threshold, value, **_):
    dtype = g.out.dtype
    return g.op("Where", g.op("Greater", input, g.scalar(threshold, dtype)), input, g.scalar(value, dtype))


@TABLE.register("prelu")
def _prelu(g, input, weight, **_):
    if g.rank(input) >= 2 and g.meta(weight).shape[0] > 1:
        # one slope per channel (axis 1): shape it (C, 1, ..., 1) to broadcast against (N, C, ...)
        weight = g.op("Reshape", weight, g.i64([-1] + [1] * (g.rank(input) - 2)))
    return g.op("PRelu", input, weight)


def _addc(onnx_op):
    def rule(g, input, tensor1, tensor2, value=1, **_):
        dtype = g.out.dtype
        term = g.op(onnx_op, g.cast(tensor1, dtype), g.cast(tensor2, dtype))
        if value != 1:
            term = g.op("Mul", term, g.scalar(value, dtype))
        return g.op("Add", g.cast(input, dtype), term)

    return rule


TABLE.add("addcmul", _addc("Mul"))
TABLE.add("addcdiv", _addc("Div"))


def _add_or_sub(onnx_op):
    def rule(g, input, other, alpha=1, **_):
        dtype = g.out.dtype
        other = operand(g, other, dtype)
        if alpha != 1:
            other = g.op("Mul", other, g.scalar(alpha, dtype))
        return g.op(onnx_op, operand(g, input, dtype), other)

    return rule


TABLE.add("add", _add_or_sub("Add"))
TABLE.add("sub", _add_or_sub("Sub"))


@TABLE.register("div")
def _div(g, input, other, rounding_mode=None, **_):
    dtype = g.out.dtype
    quotient = g.op("Div", operand(g, input, dtype), operand(g, other, dtype))
    if rounding_mode is None:
        return quotient
    if not is_floating(dtype):
        g.unsupported(f"rounding_mode={rounding_mode!r} on integer tensors")
    if rounding_mode == "floor":
        return g.op("Floor", quotient)
    # trunc: floor of |q| with q's sign
    return g.op("Mul", g.op("Sign", quotient), g.op("Floor", g.op("Abs", quotient)))


def _compare(onnx_op, negate=False):
    def rule(g, input, other, **_):
        dtype = common_dtype(g, input, other)
        out = g.op(onnx_op, operand(g, input, dtype), operand(g, other, dtype))
        return g.op("Not", out) if negate else out

    return rule


for _name, _onnx in {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}.items():
    TABLE.add(_name, _compare(_onnx))
TABLE.add("ne", _compare("Equal", negate=True))


def _logical(onnx_op):
    def rule(g, input, other, **_):
        return g.op(onnx_op, operand(g, input, g.out.dtype), operand(g, other, g.out.dtype))

    return rule


TABLE.add("logical_and", _logical("And"))
TABLE.add("logical_or", _logical("Or"))
TABLE.add("logical_xor", _logical("Xor"))


@TABLE.register("where")
def _where(g, condition, input, other, **_):
    import ember

    dtype = g.out.dtype
    return g.op("Where", operand(g, condition, ember.bool), operand(g, input, dtype), operand(g, other, dtype))


@TABLE.register("masked_fill")
def _masked_fill(g, input, mask, value, **_):
    import ember

    dtype = g.out.dtype
    return g.op("Where", operand(g, mask, ember.bool), operand(g, value, dtype), input)


@TABLE.register("clamp")
def _clamp(g, input, min=None, max=None, **_):  # noqa: A002 - ember's argument names
    dtype = g.out.dtype
    x = g.cast(input, dtype)
    if isinstance(min, str):
        x = g.op("Max", x, g.cast(min, dtype))
        min = None
    if isinstance(max, str):
        x = g.op("Min", x, g.cast(max, dtype))
        max = None
    if min is None and max is None:
        return x
    low = None if min is None else g.scalar(min, dtype)
    high = None if max is None else g.scalar(max, dtype)
    return g.op("Clip", x, low, high)


@TABLE.register("_to_copy")
def _to_copy(g, input, **_):
    out = g.cast(input, g.out.dtype)
    return g.op("Identity", out) if out == input else out


@TABLE.register("clone", "detach")
def _identity(g, input, **_):
    return g.op("Identity", input)
