"""Linear algebra in the core namespace: matmul and its family, einsum, tensordot, kron, cross, cdist."""

from __future__ import annotations

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}
