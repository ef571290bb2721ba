"""Sources: where a value the translator saw comes from, so it can be read again at run time.

Every value that enters a captured graph as an input, and every Python value a guard checks, is
described by a :class:`Source`: ``L['x']`` (an argument or local of the compiled frame),
``G['scale']`` (a global), ``L['self'].fc.weight`` (an attribute chain). A source prints as a
Python expression over the two dicts ``L`` (the frame's locals) and ``G`` (its globals); the guard
compiler pastes those expressions into one generated check function, and :meth:`Source.read`
evaluates the same path directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Source",
    "LocalSource",
    "GlobalSource",
    "ClosureSource",
    "AttrSource",
    "GetItemSource",
    "ConstantSource",
    "ImportSource",
    "IteratorItemSource",
    "HookCountSource",
    "HasAttrSource",
    "hook_count",
    "SameObjectSource",
    "iterator_state",
]


class Source:
    """Base class: a path from the frame's locals/globals to a value."""

    def name(self) -> str:
        """The path as a Python expression over ``L`` (frame locals) and ``G`` (globals)."""
        raise NotImplementedError

    def read(self, frame_locals: dict, frame_globals: dict) -> Any:
        """Follow the path in a live frame (``frame_locals``/``frame_globals``) and return the value."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()


@dataclass(frozen=True)
class LocalSource(Source):
    """An argument or local variable of the compiled frame: ``L['x']``."""

    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def read(self, frame_locals, frame_globals):
        return frame_locals[self.local_name]


@dataclass(frozen=True)
class GlobalSource(Source):
    """A module-level name of the compiled function's globals: ``G['x']``."""

    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def read(self, frame_locals, frame_globals):
        return frame_globals[self.global_name]


@dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of a free variable's cell; the frame's locals dict holds the cell contents
    under the variable's name (the runtime puts them there), so it reads like a local."""

    var_name: str

    def name(self) -> str:
        return f"L[{self.var_name!r}]"

    def read(self, frame_locals, frame_globals):
        return frame_locals[self.var_name]


@dataclass(frozen=True)
class AttrSource(Source):
    """``base.attr``."""

    base: Source
    attr: str

    def name(self) -> str:
        if self.attr.isidentifier():
            return f"{self.base.name()}.{self.attr}"
        return f"getattr({self.base.name()}, {self.attr!r})"

    def read(self, frame_locals, frame_globals):
        return getattr(self.base.read(frame_locals, frame_globals), self.attr)


@dataclass(frozen=True)
class TypeSource(Source):
    """``type(base)`` (class attributes read through ``type(self).attr`` are guarded through it)."""

    base: Source

    def name(self) -> str:
        return f"type({self.base.name()})"

    def read(self, frame_locals, frame_globals):
        return type(self.base.read(frame_locals, frame_globals))


@dataclass(frozen=True)
class GetItemSource(Source):
    """``base[index]`` (a list/tuple position or a dict key that is a Python constant)."""

    base: Source
    index: Any

    def name(self) -> str:
        return f"{self.base.name()}[{self.index!r}]"

    def read(self, frame_locals, frame_globals):
        return self.base.read(frame_locals, frame_globals)[self.index]


@dataclass(frozen=True)
class ConstantSource(Source):
    """A value fixed at capture time (never guarded: it cannot change)."""

    value: Any

    def name(self) -> str:
        return repr(self.value)

    def read(self, frame_locals, frame_globals):
        return self.value


@dataclass(frozen=True)
class ImportSource(Source):
    """An imported module, by name: the globals of a function inlined from another module are read
    through it (``ImportSource('pkg.layers')`` then an :class:`AttrSource`)."""

    module_name: str

    def name(self) -> str:
        return f"__import__('sys').modules[{self.module_name!r}]"

    def read(self, frame_locals, frame_globals):
        import sys

        return sys.modules[self.module_name]


def iterator_state(it):
    """``(sequence, position)`` of a list/tuple/range iterator, read without advancing it."""
    reduced = it.__reduce__()
    sequence = reduced[1][0]
    position = reduced[2] if len(reduced) > 2 else len(sequence)
    return sequence, position


def iterator_item(it, offset):
    """The item ``offset`` places after the current position of iterator ``it`` (not advancing it)."""
    sequence, position = iterator_state(it)
    return sequence[position + offset]


def iterator_remaining(it):
    """How many items iterator ``it`` has left."""
    sequence, position = iterator_state(it)
    return len(sequence) - position


@dataclass(frozen=True)
class IteratorItemSource(Source):
    """An item a list/tuple/range iterator has not produced yet (a loop's iterator handed to a
    continuation after a graph break): ``offset`` places after its current position; ``offset=None``
    reads how many items are left."""

    base: Source
    offset: int | None

    def name(self) -> str:
        fn = "iterator_remaining" if self.offset is None else "iterator_item"
        extra = "" if self.offset is None else f", {self.offset}"
        return f"__import__('ember._dynamo.source', fromlist=['{fn}']).{fn}({self.base.name()}{extra})"

    def read(self, frame_locals, frame_globals):
        it = self.base.read(frame_locals, frame_globals)
        return iterator_remaining(it) if self.offset is None else iterator_item(it, self.offset)


@dataclass(frozen=True)
class HookCountSource(Source):
    """What calling a module runs besides its class's forward: -1 when the instance overrides ``forward``
    (``m.forward = f``), else how many forward hooks and pre-hooks it has. One guard on it makes a hook
    added later, or a forward assigned on this instance later, recompile."""

    module: Source

    def name(self) -> str:
        m = self.module.name()
        return f"(-1 if 'forward' in {m}.__dict__ else len({m}._forward_pre_hooks) + len({m}._forward_hooks))"

    def read(self, frame_locals, frame_globals):
        return hook_count(self.module.read(frame_locals, frame_globals))


def hook_count(module) -> int:
    """:class:`HookCountSource`'s value for ``module``."""
    if "forward" in module.__dict__:
        return -1
    return len(module._forward_pre_hooks) + len(module._forward_hooks)


@dataclass(frozen=True)
class HasAttrSource(Source):
    """Whether ``base`` has attribute ``attr`` (``hasattr``): guarded when traced code asked, so an
    attribute set on the first call (a lazily registered buffer) recompiles the next one."""

    base: Source
    attr: str

    def name(self) -> str:
        return f"hasattr({self.base.name()}, {self.attr!r})"

    def read(self, frame_locals, frame_globals):
        return hasattr(self.base.read(frame_locals, frame_globals), self.attr)


@dataclass(frozen=True)
class SameObjectSource(Source):
    """Whether two sources hold the same object (``a is b``): a tensor seen through two paths (an
    argument passed twice, a tied weight) is one graph input only while this stays true."""

    first: Source
    second: Source

    def name(self) -> str:
        return f"({self.first.name()} is {self.second.name()})"

    def read(self, frame_locals, frame_globals):
        return self.first.read(frame_locals, frame_globals) is self.second.read(frame_locals, frame_globals)
