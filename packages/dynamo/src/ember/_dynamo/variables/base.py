"""The base of all variable trackers: what the translator knows about one Python value."""

from __future__ import annotations

from ..exc import Unsupported
from ..reconstruct import FromSource

__all__ = ["VariableTracker", "KnownObjectVariable", "MethodOf"]


class VariableTracker:
    """A value on the symbolic stack or in a symbolic local.

    Attributes:
        source (Source or None): where the value can be read again at run time; None for values
            made while tracing (they are rebuilt from graph outputs and constants instead).
    """

    def __init__(self, source=None):
        self.source = source

    def describe(self):
        """A short text for error messages."""
        return type(self).__name__

    def __repr__(self):
        return f"<{self.describe()}>"

    # -- Python facts -------------------------------------------------------------------------------

    def python_type(self):
        """The type of the value (used by ``type()``/``isinstance``)."""
        raise Unsupported(f"the type of {self.describe()} is not known while tracing")

    def is_constant(self):
        """Whether the value is a known Python constant."""
        return False

    def as_constant(self):
        """The value, for a constant."""
        raise Unsupported(f"{self.describe()} is not a Python constant")

    def as_python(self, tx):
        """The value handed to a call into ember: meta tensors for tensors, plain values otherwise."""
        if self.is_constant():
            return self.as_constant()
        raise Unsupported(f"{self.describe()} cannot be passed to a function that is not traced")

    def truth(self, tx):
        """``bool(value)``."""
        raise Unsupported(f"bool() of {self.describe()}")

    def unpack(self, tx):
        """The items of a finite iterable, as trackers."""
        raise Unsupported(f"iterating over {self.describe()}")

    def length(self, tx):
        return len(self.unpack(tx))

    # -- operations ----------------------------------------------------------------------------------

    def getattr(self, tx, name):
        """``value.name``."""
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def setattr(self, tx, name, value):
        raise Unsupported(f"setting attribute {name!r} of {self.describe()}")

    def call(self, tx, args, kwargs):
        """``value(*args, **kwargs)`` with trackers."""
        raise Unsupported(f"calling {self.describe()}")

    def call_method(self, tx, name, args, kwargs):
        """``value.name(*args, **kwargs)``; by default the attribute is read and called."""
        return self.getattr(tx, name).call(tx, args, kwargs)

    def getitem(self, tx, key):
        raise Unsupported(f"indexing {self.describe()}")

    # -- after the graph -------------------------------------------------------------------------------

    def reconstruct(self, out):
        """A :class:`~ember._dynamo.reconstruct.Reconstruct` that rebuilds the value after the graph."""
        if self.source is not None:
            return FromSource(self.source)
        raise Unsupported(f"{self.describe()} cannot be rebuilt after the graph (a return value or live at a break)")


class KnownObjectVariable(VariableTracker):
    """A Python object the translator uses as it is (a builtin, an ember callable, a class): a constant.

    Attributes:
        value: the object itself.
    """

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def is_constant(self):
        return True

    def as_constant(self):
        return self.value


class MethodOf(VariableTracker):
    """``obj.name`` for a method implemented by the tracker of ``obj`` (``lst.append``, ``d.items``)."""

    def __init__(self, obj, name):
        super().__init__()
        self.obj = obj
        self.name = name

    def describe(self):
        return f"method {self.name} of {self.obj.describe()}"

    def call(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def reconstruct(self, out):
        from ..reconstruct import GetAttr

        return GetAttr(self.obj.reconstruct(out), self.name)
