"""Derivatives of the creation and copy ops (``ember._ops.creation``)."""

from __future__ import annotations

from .._table import derivative

derivative("clone", input=lambda grad: grad)
derivative("_to_copy", input=lambda grad: grad)
