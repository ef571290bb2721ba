"""Derivatives of the pointwise ops (``ember._ops.pointwise``)."""

from __future__ import annotations

import ember

from .._table import derivative
from ._helpers import conj

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
derivative("neg", input=lambda grad: -grad)
derivative("exp", input=lambda grad, result: grad * conj(result))
del ember
