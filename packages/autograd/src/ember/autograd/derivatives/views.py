"""Derivatives of the view ops (``ember._ops.views``)."""

from __future__ import annotations

from .._table import derivative, nondifferentiable

nondifferentiable("detach")
derivative("view", input=lambda grad, input: grad.reshape(input.shape))
