"""Backends for tests that count or keep what ``ember.compile`` captured (as ``torch._dynamo.testing``).

Example::

    >>> import ember
    >>> from ember._dynamo.testing import CompileCounter
    >>> counter = CompileCounter()
    >>> f = ember.compile(lambda x: x.sin() + 1, backend=counter)
    >>> _ = f(ember.ones(2)); _ = f(ember.ones(2))
    >>> counter.frame_count, counter.op_count
    (1, 2)
"""

from __future__ import annotations

__all__ = ["CompileCounter", "CompileCounterWithBackend", "EagerAndRecordGraphs"]


def _op_count(gm) -> int:
    return sum(1 for node in gm.graph.nodes if node.op == "call_function")


class CompileCounter:
    """A backend that counts the graphs it is given (``frame_count``) and their ops (``op_count``),
    then runs each as captured."""

    def __init__(self):
        self.clear()

    def clear(self):
        """Reset both counts to zero."""
        self.frame_count = 0
        self.op_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += _op_count(gm)
        return gm.forward


class CompileCounterWithBackend(CompileCounter):
    """:class:`CompileCounter` that hands each graph on to another backend (a name or a callable).

    Args:
        backend (str or callable): where the graphs go after being counted.
    """

    def __init__(self, backend):
        super().__init__()
        from .backends import lookup_backend

        self.backend = lookup_backend(backend)
        self.graphs = []

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        self.graphs.append(gm)
        return self.backend(gm, example_inputs)


class EagerAndRecordGraphs:
    """A backend that keeps every graph it is given (``graphs``) and runs it as captured."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward
