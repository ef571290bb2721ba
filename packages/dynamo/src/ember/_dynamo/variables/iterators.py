"""Iterators over a finite list of trackers (``iter(list)``, ``enumerate``, ``zip``, ``range``...)."""

from __future__ import annotations

from ..exc import Unsupported
from ..reconstruct import BuildIterator
from .base import VariableTracker
from .constant import ConstantVariable

#: A generator inlined while tracing that yields more items than this is refused.
MAX_ITEMS = 10_000

__all__ = ["IteratorVariable"]


class IteratorVariable(VariableTracker):
    """An iterator: ``items`` are all it will produce, ``position`` how many it has produced."""

    def __init__(self, items, generator=None):
        super().__init__()
        self.items = list(items)
        self.position = 0
        self.generator = generator  # a suspended generator frame that makes the items on demand

    def _pull(self):
        """Run the generator to its next yield; False once it has returned."""
        if self.generator is None:
            return False
        value = self.generator.run_to_yield()
        if value is None:
            self.generator = None
            return False
        self.generator.push(ConstantVariable(None))  # what next() sends in, for when it resumes
        self.items.append(value)
        if len(self.items) > MAX_ITEMS:
            raise Unsupported(f"a generator yielded more than {MAX_ITEMS} items while tracing")
        return True

    def describe(self):
        return f"iterator at {self.position} of {len(self.items)}"

    def python_type(self):
        return type(iter([]))

    def next_item(self):
        """The next tracker, or None when exhausted."""
        if self.position >= len(self.items) and not self._pull():
            return None
        item = self.items[self.position]
        self.position += 1
        return item

    def unpack(self, tx):
        while self._pull():
            pass
        rest = self.items[self.position:]
        self.position = len(self.items)
        return rest

    def reconstruct(self, out):
        if self.generator is not None:
            raise Unsupported("a generator being iterated is live after the graph (it cannot be rebuilt)")
        def make():
            return BuildIterator(tuple(item.reconstruct(out) for item in self.items[self.position:]))

        return out.shared(self, make)
