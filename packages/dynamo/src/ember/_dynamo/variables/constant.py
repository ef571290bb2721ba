"""Python constants: numbers, strings, None, dtypes, devices, sizes, slices, ranges."""

from __future__ import annotations

from ..exc import Unsupported
from ..reconstruct import Constant, FromSource
from .base import VariableTracker

__all__ = ["ConstantVariable", "is_constant_value"]

_SCALARS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis), type(NotImplemented))


def _constant_leaf_types():
    import ember

    return (ember.dtype, ember.device, type(ember.strided))


def is_constant_value(value):
    """Whether ``value`` is an immutable Python value the translator may fold (recursively for tuples)."""
    if isinstance(value, _SCALARS) or isinstance(value, _constant_leaf_types()):
        return True
    if isinstance(value, (range, slice)):
        return True
    if type(value) is tuple or type(value).__name__ == "Size":
        return all(is_constant_value(v) for v in value)
    if isinstance(value, frozenset):
        return all(is_constant_value(v) for v in value)
    return False


class ConstantVariable(VariableTracker):
    """An immutable value known while tracing; operations on constants are computed right away.

    A constant read from the frame carries ``on_use``, the guard to record the first time its value
    matters (a constant only passed through to the result or a call is rebuilt from its source and
    needs no guard: a float returned by ``.item()`` before a break does not recompile each call).
    """

    def __init__(self, value, source=None, on_use=None):
        super().__init__(source)
        self.value = value
        self.on_use = on_use

    def describe(self):
        return f"constant {self.value!r}"

    def python_type(self):
        return type(self.as_constant())  # (a type check is a use: it records the guard)

    def is_constant(self):
        return True

    def as_constant(self):
        if self.on_use is not None:
            on_use, self.on_use = self.on_use, None
            on_use()
        return self.value

    def truth(self, tx):
        return bool(self.as_constant())

    def unpack(self, tx):
        try:
            items = list(self.as_constant())
        except TypeError:
            raise Unsupported(f"iterating over {self.describe()}") from None
        return [ConstantVariable(v) for v in items]

    def getitem(self, tx, key):
        return ConstantVariable(self.as_constant()[key.as_constant()])

    def getattr(self, tx, name):
        try:
            attr = getattr(self.as_constant(), name)
        except AttributeError as e:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}") from e
        if callable(attr):
            from .builtins import ConstantMethodVariable

            return ConstantMethodVariable(self.value, name)
        return ConstantVariable(attr)

    def reconstruct(self, out):
        if self.on_use is not None and self.source is not None:
            return FromSource(self.source)  # never used while tracing: read it again, unguarded
        return Constant(self.value)
