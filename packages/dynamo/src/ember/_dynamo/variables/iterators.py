"""Iterators over a finite list of trackers (``iter(list)``, ``enumerate``, ``zip``, ``range``...)."""

from __future__ import annotations

from ..reconstruct import BuildIterator
from .base import VariableTracker

__all__ = ["IteratorVariable"]


class IteratorVariable(VariableTracker):
    """An iterator: ``items`` are all it will produce, ``position`` how many it has produced."""

    def __init__(self, items):
        super().__init__()
        self.items = list(items)
        self.position = 0

    def describe(self):
        return f"iterator at {self.position} of {len(self.items)}"

    def python_type(self):
        return type(iter([]))

    def next_item(self):
        """The next tracker, or None when exhausted."""
        if self.position >= len(self.items):
            return None
        item = self.items[self.position]
        self.position += 1
        return item

    def unpack(self, tx):
        rest = self.items[self.position:]
        self.position = len(self.items)
        return rest

    def reconstruct(self, out):
        def make():
            return BuildIterator(tuple(item.reconstruct(out) for item in self.items[self.position:]))

        return out.shared(self, make)
