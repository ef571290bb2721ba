"""Logical and bitwise ops: ``logical_not/and/or/xor``, ``bitwise_not/and/or/xor`` and the shifts,
with the operators ``&``, ``|``, ``^``, ``<<`` and ``>>``.
"""

from __future__ import annotations

import numpy as np

from .._device import get_backend
from .._tensor import Tensor
from ._pointwise_helpers import (
    INTEGRAL,
    INTEGRAL_AND_BOOL,
    binary,
    operator_methods,
    unary,
    unary_doc,
)
from ._registry import registry

__all__ = []

_FIRST_OP = len(registry)  # the ops registered from here on are this module's (see METHODS at the end)


# -- logical and bitwise ops --------------------------------------------------------------

logical_not = unary("logical_not", np.logical_not, result="bool", doc=unary_doc(
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

bitwise_not = unary("bitwise_not", np.invert, supported=INTEGRAL_AND_BOOL, doc=unary_doc(
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


#: Operators of this module (``&``, ``|``, ``^``, ``<<``, ``>>`` and their reflected and in-place forms);
#: ``__invert__`` (ember._tensor_methods) uses ``bitwise_not``.
OPERATORS = {}
for _symbol, _op in (("and", bitwise_and), ("or", bitwise_or), ("xor", bitwise_xor), ("lshift", bitwise_left_shift),
                     ("rshift", bitwise_right_shift)):
    OPERATORS.update(operator_methods(_symbol, _op))


#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = [name for name in list(registry)[_FIRST_OP:]]

del _symbol, _op
