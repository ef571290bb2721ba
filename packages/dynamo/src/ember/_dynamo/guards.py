"""Guards: the conditions under which a captured graph may be reused.

The translator records a :class:`Guard` for everything the capture depended on: the type of an
argument, a tensor's dtype/device/shape/strides/requires_grad, the value of a Python constant it
read, the identity of a global or a module, a module's ``training`` flag, the grad mode. A cache
entry is valid for a call exactly when all of its guards hold.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .source import Source

__all__ = ["GuardKind", "Guard", "TensorSpec"]


class GuardKind(str, enum.Enum):
    """What a guard checks about the value at its source."""

    TYPE_MATCH = "TYPE_MATCH"  # type(v) is expected
    ID_MATCH = "ID_MATCH"  # v is expected (modules, functions, objects read from globals)
    EQUALS_MATCH = "EQUALS_MATCH"  # type(v) is type(expected) and v == expected (constants read)
    LEN_MATCH = "LEN_MATCH"  # len(v) == expected (lists, tuples, dicts whose items were read)
    DICT_KEYS = "DICT_KEYS"  # list(v.keys()) == expected (key order matters, as for iteration)
    TENSOR_MATCH = "TENSOR_MATCH"  # expected is a TensorSpec
    MODULE_TRAINING = "MODULE_TRAINING"  # v.training == expected
    GRAD_MODE = "GRAD_MODE"  # ember.is_grad_enabled() == expected (source is None)
    IS_NONE = "IS_NONE"  # v is None
    NOT_NONE = "NOT_NONE"  # v is not None


@dataclass(frozen=True)
class TensorSpec:
    """What TENSOR_MATCH checks: ``shape``/``stride`` entries that are None are dynamic (any size)."""

    dtype: Any
    device: Any
    shape: tuple
    stride: tuple
    requires_grad: bool


@dataclass(frozen=True)
class Guard:
    """One condition: ``kind`` applied to the value at ``source`` (None for global state)."""

    source: Source | None
    kind: GuardKind
    expected: Any = None

    def __str__(self) -> str:
        where = self.source.name() if self.source is not None else "<global state>"
        return f"{self.kind.value}({where}, {self.expected!r})"
