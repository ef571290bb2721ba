"""Pointwise ops: the basic arithmetic and comparisons that the tensor needs.

The op-library issue extends this table; each entry is one line through
:mod:`ember._ops._pointwise_helpers`.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._pointwise_helpers import _check_operand, binary, binary_dtype, make_inplace, operand, unary
from ._registry import defop
from ._shapes import broadcast_shapes, shape_of

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = [
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "neg_", "abs", "abs_",
    "eq", "ne", "lt", "le", "gt", "ge", "eq_", "ne_", "lt_", "le_", "gt_", "ge_", "logical_not", "logical_not_",
]
ALIASES = {"subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div", "negative": "neg", "absolute": "abs"}


def _check_alpha(input, other, dtype, alpha):
    if isinstance(alpha, bool):
        if dtype is not D.bool:
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif isinstance(alpha, float) and dtype.category < D.FLOATING:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if dtype is D.bool and not isinstance(alpha, bool) and alpha != 1:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")


def _check_sub(input, other, dtype):
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )


def _add_sub(name, np_fn, sign_word, check=None):
    def meta(input, other, *, alpha=1):
        if type(input) is Tensor and type(other) is Tensor and type(alpha) is int and alpha == 1:
            # Fast path: same dtype, same shape (the common case of a training step).
            a, b = input._data, other._data
            if a.dtype is b.dtype and a.shape == b.shape and a.ndim and (check is None or a.dtype != np.bool_):
                return MetaArray(a.shape, a.dtype)
        _check_operand(name, "input", input)
        _check_operand(name, "other", other)
        dtype = binary_dtype(input, other)
        if check is not None:
            check(input, other, dtype)
        if alpha != 1 or type(alpha) is not int:
            _check_alpha(input, other, dtype, alpha)
        return MetaArray(broadcast_shapes(shape_of(input), shape_of(other)), dtype.numpy_dtype)

    def cpu(input, other, *, alpha=1):
        if type(input) is Tensor and type(other) is Tensor and alpha == 1:
            a, b = input._data, other._data
            if a.dtype is b.dtype and a.ndim and b.ndim:  # no promotion; numpy returns an array
                return np_fn(a, b)
        np_dtype = binary_dtype(input, other).numpy_dtype
        b = operand(other, np_dtype)
        if alpha != 1:
            b = np.multiply(b, operand(alpha, np_dtype), dtype=np_dtype)
        return np.asarray(np_fn(operand(input, np_dtype), b, dtype=np_dtype))

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
    make_inplace(op)
    return op


add = _add_sub("add", np.add, "+")
sub = _add_sub("sub", np.subtract, "-", check=_check_sub)
mul = binary("mul", np.multiply, doc="""Elementwise product ``input * other``, broadcasting, with PyTorch's type promotion.

    Example:
        >>> import ember
        >>> ember.mul(ember.tensor([1, 2]), 3)
        tensor([3, 6])
    """)
div = binary("div", np.true_divide, result="float", doc="""Elementwise true division ``input / other``.

    Integer inputs give the default float dtype.

    Example:
        >>> import ember
        >>> ember.div(ember.tensor([1, 2]), 2)
        tensor([0.5000, 1.0000])
    """)
eq = binary("eq", np.equal, result="bool", doc="Elementwise ``input == other``, as a bool tensor.")
ne = binary("ne", np.not_equal, result="bool", doc="Elementwise ``input != other``, as a bool tensor.")
lt = binary("lt", np.less, result="bool", doc="Elementwise ``input < other``, as a bool tensor.")
le = binary("le", np.less_equal, result="bool", doc="Elementwise ``input <= other``, as a bool tensor.")
gt = binary("gt", np.greater, result="bool", doc="Elementwise ``input > other``, as a bool tensor.")
ge = binary("ge", np.greater_equal, result="bool", doc="Elementwise ``input >= other``, as a bool tensor.")


def _check_neg(input):
    if input.dtype is D.bool:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )


neg = unary("neg", np.negative, doc="Elementwise ``-input``.", check=_check_neg)
abs = unary("abs", np.abs, result="real", doc="Elementwise absolute value (complex: the modulus, a real tensor).")  # noqa: A001
logical_not = unary("logical_not", np.logical_not, result="bool", doc="Elementwise logical NOT, as a bool tensor.")
