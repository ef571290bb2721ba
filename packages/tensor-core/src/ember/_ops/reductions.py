"""Reductions, scans, sorting, searching, unique and histograms."""

from __future__ import annotations

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}
