"""Derivatives of ``im2col``/``fold`` (``ember._ops.nn_fold``): each is the other's adjoint."""

from __future__ import annotations

import ember

from .._table import derivative

# -- im2col / fold: each other's adjoint ----------------------------------------------------------------

derivative(
    "im2col",
    input=lambda grad, input, kernel_size, dilation, padding, stride: ember.nn.functional.fold(
        grad, input.shape[-2:], kernel_size, dilation, padding, stride
    ),
)
derivative(
    "fold",
    input=lambda grad, kernel_size, dilation, padding, stride: ember.nn.functional.unfold(
        grad, kernel_size, dilation, padding, stride
    ),
)
