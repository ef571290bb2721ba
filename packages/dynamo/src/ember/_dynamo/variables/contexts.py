"""``@contextlib.contextmanager`` functions: the generator runs up to its ``yield`` on entry and on from
there at exit, in a child translator that keeps its state between the two."""

from __future__ import annotations

import contextlib

from ..exc import ObservedException, Unsupported
from .base import VariableTracker
from .constant import ConstantVariable

__all__ = [
    "ContextManagerFunctionVariable", "GeneratorContextVariable", "GeneratorContextExit", "is_contextmanager_function",
]


@contextlib.contextmanager
def _probe():
    yield


_HELPER_CODE = _probe.__code__  # every function that contextmanager returns runs this code


def is_contextmanager_function(value):
    """Whether ``value`` is what ``@contextlib.contextmanager`` made of a generator function."""
    return getattr(value, "__code__", None) is _HELPER_CODE and hasattr(value, "__wrapped__")


class ContextManagerFunctionVariable(VariableTracker):
    """The decorated function: calling it makes a :class:`GeneratorContextVariable`."""

    def __init__(self, generator_fn, source=None):
        super().__init__(source)
        self.generator_fn = generator_fn  # a tracker of the undecorated generator function

    def describe(self):
        return f"context manager {self.generator_fn.describe()}"

    def call(self, tx, args, kwargs):
        return GeneratorContextVariable(self.generator_fn, args, kwargs)


class GeneratorContextVariable(VariableTracker):
    """A ``with`` target made by a contextmanager function (not entered yet, or suspended at its yield)."""

    def __init__(self, generator_fn, args, kwargs):
        super().__init__()
        self.generator_fn = generator_fn
        self.args = args
        self.kwargs = kwargs
        self.frame = None  # the child translator, suspended at the yield

    def describe(self):
        return f"with-block of {self.generator_fn.describe()}"

    def enter(self, tx):
        self.frame = tx.inline_suspended(self.generator_fn, self.args, self.kwargs)
        value = self.frame.run_to_yield()
        if value is None:
            raise Unsupported("a contextmanager generator that did not yield")
        return value

    def exit(self, tx, exception=None):
        """Resume the generator after its yield (raising ``exception`` there, if any); returns whether
        the exception is suppressed."""
        frame = self.frame
        if frame is None:
            raise Unsupported("exit of a context manager that was not entered")
        if exception is None:
            frame.push(ConstantVariable(None))
        elif not frame.handle_observed(ObservedException(exception)):
            return False
        if frame.run_to_yield() is not None:
            raise Unsupported("a contextmanager generator that yielded twice")
        return exception is not None


class GeneratorContextExit(VariableTracker):
    """The ``__exit__`` that BEFORE_WITH pushed for a contextmanager block."""

    def __init__(self, context):
        super().__init__()
        self.context = context

    def describe(self):
        return "contextmanager __exit__"

    def call(self, tx, args, kwargs):
        raised = args[1] if len(args) > 1 else None
        exception = None if raised is None or (raised.is_constant() and raised.as_constant() is None) else raised
        return ConstantVariable(self.context.exit(tx, exception))
