"""Small trackers: the NULL of call sequences, grad-mode context managers, ``super()``."""

from __future__ import annotations

from ..exc import Unsupported
from ..reconstruct import Constant, GradModeExit
from .base import VariableTracker
from .constant import ConstantVariable

__all__ = ["NullVariable", "GradModeVariable", "GradModeExitVariable", "SuperVariable"]


class NullVariable(VariableTracker):
    """The NULL that CPython pushes before a callable that is not a bound method."""

    def describe(self):
        return "NULL"

    def reconstruct(self, out):
        from ..resume import NULL  # the break function's prologue turns it back into a real NULL

        return Constant(NULL)


class GradModeVariable(VariableTracker):
    """``ember.no_grad()``/``enable_grad()``/``set_grad_enabled(mode)``: a context manager that sets grad mode.

    ``set_grad_enabled(mode)`` also sets it at once when called (``immediate``), as in PyTorch.
    """

    def __init__(self, target, previous, immediate=False):
        super().__init__()
        self.target = target
        self.previous = previous
        self.immediate = immediate

    def describe(self):
        return f"grad mode context ({self.target})"

    def enter(self, tx):
        """BEFORE_WITH: set the mode; the exit callable restores the mode seen now."""
        previous = self.previous if self.immediate else tx.output.grad_enabled
        tx.output.set_grad_enabled(self.target)
        return GradModeExitVariable(previous, self.target)

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            self.enter(tx)
            return ConstantVariable(None)
        if name == "__exit__":
            tx.output.set_grad_enabled(self.previous)
            return ConstantVariable(False)
        raise Unsupported(f"grad mode context method {name}")


class GradModeExitVariable(VariableTracker):
    """The ``__exit__`` that BEFORE_WITH pushed for a grad-mode block: calling it restores ``previous``."""

    def __init__(self, previous, inside):
        super().__init__()
        self.previous = previous
        self.inside = inside

    def describe(self):
        return "grad mode __exit__"

    def call(self, tx, args, kwargs):
        tx.output.set_grad_enabled(self.previous)
        return ConstantVariable(False)

    def reconstruct(self, out):
        return GradModeExit(self.previous, self.inside)


class SuperVariable(VariableTracker):
    """``super(cls, obj)``: attribute look-up starts after ``cls`` in ``type(obj)``'s MRO."""

    def __init__(self, cls, obj):
        super().__init__()
        self.cls = cls
        self.obj = obj

    def describe(self):
        return f"super({self.cls.__name__})"

    def getattr(self, tx, name):
        from .user_objects import class_attribute

        mro = self.obj.python_type().__mro__
        start = mro.index(self.cls) + 1
        for klass in mro[start:]:
            if name in klass.__dict__:
                return class_attribute(tx, klass.__dict__[name], self.obj, klass, name)
        raise Unsupported(f"super().{name}: not found")
