"""Small trackers: the NULL of call sequences, grad-mode and autocast context managers, ``super()``."""

from __future__ import annotations

from ..exc import Unsupported
from ..reconstruct import AutocastExit, Constant, GradModeExit
from .base import VariableTracker
from .constant import ConstantVariable

__all__ = [
    "NullVariable", "GradModeVariable", "GradModeExitVariable", "AutocastVariable", "AutocastExitVariable",
    "SuperVariable",
]


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


class AutocastVariable(VariableTracker):
    """An ``ember.autocast`` region (``ember.amp.autocast``, ``ember.cuda.amp.autocast``...) entered in
    the traced code: inside it, calls on its device type record the region's casts into the graph
    (:meth:`OutputGraph.autocast_mode`), so the graph runs right without autocast.

    Args:
        region (ember.autocast): the real region object (its device type, dtype and whether enabled;
            arguments checked and warnings given by its constructor, as in eager mode).
    """

    def __init__(self, region):
        super().__init__()
        self.region = region

    def describe(self):
        return f"ember.autocast({self.region.device!r}, {self.region.fast_dtype})"

    def python_type(self):
        return type(self.region)

    def enter(self, tx):
        """BEFORE_WITH: the region in force in the trace; the exit callable puts the previous one back."""
        device = self.region.device
        previous = tx.output.autocast.get(device)
        inside = self.region.fast_dtype if self.region._enabled else None
        tx.output.set_autocast(device, inside)
        return AutocastExitVariable(device, previous, inside, self.region._cache_enabled)

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            self._exit = self.enter(tx)
            return self
        if name == "__exit__":
            exit_ = getattr(self, "_exit", None)
            if exit_ is None:
                raise Unsupported("ember.autocast.__exit__ without __enter__ while tracing")
            return exit_.call(tx, [], {})
        raise Unsupported(f"ember.autocast method {name} while tracing")


class AutocastExitVariable(VariableTracker):
    """The ``__exit__`` of an autocast block: calling it restores the region in force before
    (``previous``: a dtype, or None for none).

    ``restorer`` is the tracker of a real :class:`~ember._dynamo.reconstruct.AutocastRestorer` when the
    region was entered for real (a continuation after a break inside it): the call then also leaves
    the real region, as a side effect after the graph (which runs with autocast suspended: its casts
    are explicit nodes).
    """

    def __init__(self, device, previous, inside, cache_enabled=None, restorer=None):
        super().__init__()
        self.device = device
        self.previous = previous
        self.inside = inside
        self.cache_enabled = cache_enabled
        self.restorer = restorer

    def describe(self):
        return "ember.autocast __exit__"

    def call(self, tx, args, kwargs):
        tx.output.set_autocast(self.device, self.previous)
        if self.restorer is not None:
            tx.output.side_effects.call_after_graph(self.restorer)
        return ConstantVariable(False)

    def reconstruct(self, out):
        if self.restorer is not None:  # entered for real already: hand on the same restorer
            return self.restorer.reconstruct(out)
        return AutocastExit(self.device, self.previous, self.inside, self.cache_enabled)


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
