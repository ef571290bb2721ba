"""Exception objects raised and caught inside the traced code."""

from __future__ import annotations

from ..reconstruct import BuildCall, Constant
from .base import VariableTracker
from .constant import ConstantVariable

__all__ = ["ExceptionVariable", "raise_observed"]


class ExceptionVariable(VariableTracker):
    """An instance of an exception class with its arguments (trackers)."""

    def __init__(self, cls, args):
        super().__init__()
        self.cls = cls
        self.args = list(args)

    def describe(self):
        shown = ", ".join(repr(a.as_constant()) if a.is_constant() else a.describe() for a in self.args)
        return f"{self.cls.__name__}({shown})"

    def python_type(self):
        return self.cls

    def getattr(self, tx, name):
        from .containers import TupleVariable

        if name == "args":
            return TupleVariable(self.args)
        return super().getattr(tx, name)

    def reconstruct(self, out):
        return BuildCall(Constant(self.cls), tuple(a.reconstruct(out) for a in self.args), (), ())


def raise_observed(cls, *args):
    """Raise ``cls(*args)`` (constants) inside the traced code."""
    from ..exc import ObservedException

    raise ObservedException(ExceptionVariable(cls, [ConstantVariable(a) for a in args]))
