"""The forward-mode (jvp) rule table, keyed by the registry's ops, beside the derivative table.

A rule ``rule(op, primals, tangents, result)`` gets the call's arguments normalised to the op's
signature twice: ``primals`` (plain values) and ``tangents`` (for each argument, its tangent or
None), plus the op's ``result`` on the primals, and returns the result's tangent. Groups:

* **linear** ops (views, shape ops, ``add``, ``cat``, ``sum``, ``where``, indexing, pooling that
  averages, casts): the tangent is the op applied to the tangents (zeros for arguments without one);
* **bilinear** ops (``mul``, ``matmul``, ``convolution``): the product rule;
* **elementwise** functions with their derivative written out (``exp``, ``sin``, ``tanh``, ...).

Ops without a rule (:mod:`ember.autograd.forward_ad`): a composite op runs its decomposition on the
dual tensors; any other op that has a derivative in :mod:`ember.autograd._table` gets its tangent
from the backward formulas by the double-vjp identity (exact: ``u -> J^T u`` is linear, and its vjp
with cotangent ``t`` is ``J t``); ops without derivatives give outputs without tangents.
"""

from __future__ import annotations

import math

import ember
from ember._ops._registry import registry
from ember._tensor import Tensor

__all__ = ["JVP_RULES", "register_jvp"]

#: op -> jvp rule
JVP_RULES: dict = {}


def register_jvp(names, rule):
    """Register ``rule`` for the ops named in ``names``.

    Raises:
        ValueError: no such op, or the op already has a rule.
    """
    for name in names:
        op = registry.get(name)
        if op is None:
            raise ValueError(f"no op named {name!r} to register a jvp rule for")
        if op in JVP_RULES:
            raise ValueError(f"op {name} already has a jvp rule")
        JVP_RULES[op] = rule


def _differentiable(value):
    return isinstance(value, Tensor) and (value.is_floating_point() or value.is_complex())


def _tangent_or_zero(primal, tangent):
    if tangent is not None:
        return tangent
    if _differentiable(primal):
        return ember.zeros_like(primal)
    return primal


def _map_args(primals, tangents, fn):
    """Apply ``fn(primal, tangent)`` to each argument, looking inside lists and tuples (cat's tensors)."""
    out = []
    for p, t in zip(primals, tangents):
        if isinstance(p, (list, tuple)) and not isinstance(p, Tensor):
            ts = t if isinstance(t, (list, tuple)) else [None] * len(p)
            out.append(type(p)(fn(a, b) for a, b in zip(p, ts)))
        else:
            out.append(fn(p, t))
    return out


def _linear(op, primals, tangents, result):
    """Ops linear in their differentiable tensor arguments: the op of the tangents."""
    args, kwargs = primals
    targs, tkwargs = tangents
    new_args = _map_args(args, targs, _tangent_or_zero)
    new_kwargs = {k: _tangent_or_zero(v, tkwargs.get(k)) for k, v in kwargs.items()}
    return op(*new_args, **new_kwargs)


def _linear_first(op, primals, tangents, result):
    """Ops linear in their first argument only (the others are indices or sizes)."""
    args, kwargs = primals
    return op(tangents[0][0], *args[1:], **kwargs)


def _pad(op, primals, tangents, result):
    args, kwargs = primals
    mode = args[2] if len(args) > 2 else "constant"
    rest = list(args[1:])
    if mode == "constant" and len(rest) > 2:
        rest[2] = 0.0  # the padding value is constant: its tangent is zero
    return op(tangents[0][0], *rest, **kwargs)


def _to_copy(op, primals, tangents, result):
    args, kwargs = primals
    dtype = kwargs.get("dtype")
    t = tangents[0][0]
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        return None
    return op(t, **kwargs)


def _add_sub(op, primals, tangents, result):
    """``x + alpha * y`` (or minus): constants, numbers among them, have no tangent."""
    args, kwargs = primals
    tx, ty = tangents[0][0], tangents[0][1]
    alpha = kwargs.get("alpha", 1)
    if ty is not None:
        ty = ty * alpha if alpha != 1 else ty
        if op.name == "sub":
            ty = -ty
    if tx is None:
        return ty.expand_as(result) if ty is not None else None
    return tx.expand_as(result) if ty is None else tx + ty


def _where(op, primals, tangents, result):
    args, _ = primals
    cond = args[0]
    tx = _tangent_or_zero(args[1], tangents[0][1]) if isinstance(args[1], Tensor) else None
    ty = _tangent_or_zero(args[2], tangents[0][2]) if isinstance(args[2], Tensor) else None
    zero = ember.zeros_like(result)
    return ember.where(cond, zero if tx is None else tx, zero if ty is None else ty)


def _mul(op, primals, tangents, result):
    x, y = primals[0][0], primals[0][1]
    tx, ty = tangents[0][0], tangents[0][1]
    out = None
    if tx is not None:
        out = tx * y
    if ty is not None:
        out = x * ty if out is None else out + x * ty
    return out


def _div(op, primals, tangents, result):
    args, kwargs = primals
    if kwargs.get("rounding_mode") is not None:
        return ember.zeros_like(result)
    y = args[1]
    tx, ty = tangents[0][0], tangents[0][1]
    out = None
    if tx is not None:
        out = tx / y
    if ty is not None:
        term = -ty * result / y
        out = term if out is None else out + term
    return out


def _matmul_like(op, primals, tangents, result):
    """Bilinear products: ``op(tx, y) + op(x, ty)``."""
    args, kwargs = primals
    x, y = args[0], args[1]
    tx, ty = tangents[0][0], tangents[0][1]
    out = None
    if tx is not None:
        out = op(tx, y, *args[2:], **kwargs)
    if ty is not None:
        term = op(x, ty, *args[2:], **kwargs)
        out = term if out is None else out + term
    return out


def _convolution(op, primals, tangents, result):
    args, kwargs = primals
    x, w = args[0], args[1]
    tx, tw, tb = tangents[0][0], tangents[0][1], tangents[0][2]
    rest = args[3:]
    out = None
    if tx is not None:
        out = op(tx, w, None, *rest)
    if tw is not None:
        term = op(x, tw, None, *rest)
        out = term if out is None else out + term
    if tb is not None:
        term = tb.reshape(-1, *([1] * (result.ndim - 2)))
        out = term.expand_as(result) if out is None else out + term
    return out


def _pow(op, primals, tangents, result):
    args, _ = primals
    x, y = args[0], args[1]
    tx, ty = tangents[0][0], tangents[0][1]
    out = None
    if tx is not None:
        if isinstance(y, Tensor):
            out = tx * y * ember.where(y == 0, ember.ones_like(result), x ** (y - 1))
        else:
            out = tx * (y * x ** (y - 1)) if y != 0 else ember.zeros_like(result)
    if ty is not None:
        base = x if isinstance(x, Tensor) else ember.full_like(result, x)
        term = ty * result * base.log()
        out = term if out is None else out + term
    return out


def _unary(derivative):
    """Elementwise ``f``: tangent ``t * f'(x)``, with ``derivative(x, result)``."""

    def rule(op, primals, tangents, result):
        t = tangents[0][0]
        if t is None:
            return None
        return t * derivative(primals[0][0], result)

    return rule


_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

_UNARY = {
    "exp": lambda x, r: r,
    "exp2": lambda x, r: r * _LN2,
    "expm1": lambda x, r: r + 1,
    "log": lambda x, r: 1 / x,
    "log2": lambda x, r: 1 / (x * _LN2),
    "log10": lambda x, r: 1 / (x * _LN10),
    "log1p": lambda x, r: 1 / (1 + x),
    "sin": lambda x, r: x.cos(),
    "cos": lambda x, r: -x.sin(),
    "tan": lambda x, r: 1 + r * r,
    "sinh": lambda x, r: x.cosh(),
    "cosh": lambda x, r: x.sinh(),
    "tanh": lambda x, r: 1 - r * r,
    "sigmoid": lambda x, r: r * (1 - r),
    "sqrt": lambda x, r: 0.5 / r,
    "rsqrt": lambda x, r: -0.5 * r * r * r,
    "reciprocal": lambda x, r: -r * r,
    "square": lambda x, r: 2 * x,
    "erf": lambda x, r: _TWO_OVER_SQRT_PI * (-(x * x)).exp(),
    "atan": lambda x, r: 1 / (1 + x * x),
    "asin": lambda x, r: (1 - x * x).rsqrt(),
    "acos": lambda x, r: -(1 - x * x).rsqrt(),
}


def _fill_table():
    register_jvp(
        ["view", "reshape", "expand", "permute", "transpose", "select", "slice", "squeeze", "unsqueeze", "diagonal",
         "unfold", "flip", "clone", "neg", "cat", "sum", "cumsum", "conj", "real", "imag",
         "view_as_real", "view_as_complex", "roll", "complex"],
        _linear,
    )
    register_jvp(["index", "gather", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
                  "adaptive_avg_pool2d", "adaptive_avg_pool3d", "im2col", "fold", "take"], _linear_first)
    register_jvp(["pad"], _pad)
    register_jvp(["_to_copy"], _to_copy)
    register_jvp(["add", "sub"], _add_sub)
    register_jvp(["where"], _where)
    register_jvp(["mul"], _mul)
    register_jvp(["div"], _div)
    register_jvp(["matmul", "mm", "bmm", "mv", "dot"], _matmul_like)
    register_jvp(["convolution"], _convolution)
    register_jvp(["pow"], _pow)
    for name, derivative in _UNARY.items():
        register_jvp([name], _unary(derivative))


_fill_table()
