"""Reconstruct objects: how to build a Python value after the captured graph has run.

The translator describes the frame's return value (or, at a graph break, the values on the stack
and the live locals) as a small tree of :class:`Reconstruct` nodes: a graph output, a constant, a
value read from the frame again, or a container/object built from other nodes.  The runtime calls
``build(graph_outputs, frame_locals, frame_globals)``; no bytecode is involved.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

from .source import Source

__all__ = [
    "Reconstruct", "GraphOutput", "Constant", "FromSource", "BuildTuple", "BuildList", "BuildDict",
    "BuildSet", "BuildNamedTuple", "BuildObject", "BuildIterator", "BuildFunction", "BuildCell",
    "BuildBoundMethod", "BuildSlice", "GradModeExit", "AutocastExit", "AutocastRestorer", "GetAttr",
    "BuildCall", "Shared", "ReleaseShared",
]


class Reconstruct:
    """Base class: ``build`` returns the value."""

    def build(self, graph_outputs, frame_locals, frame_globals):
        raise NotImplementedError


def _build_all(items, outs, loc, glob):
    return [item.build(outs, loc, glob) for item in items]


@dataclass(frozen=True)
class GraphOutput(Reconstruct):
    """The ``index``-th output of the captured graph."""

    index: int

    def build(self, graph_outputs, frame_locals, frame_globals):
        return graph_outputs[self.index]


@dataclass(frozen=True)
class Constant(Reconstruct):
    """A value fixed at capture time (an int, a str, None, a dtype, a function object...)."""

    value: Any

    def build(self, graph_outputs, frame_locals, frame_globals):
        return self.value


@dataclass(frozen=True)
class FromSource(Reconstruct):
    """A value the frame already had (an argument, a global, a module attribute): read it again."""

    source: Source

    def build(self, graph_outputs, frame_locals, frame_globals):
        return self.source.read(frame_locals, frame_globals)


@dataclass(frozen=True)
class BuildTuple(Reconstruct):
    """A tuple of built items."""

    items: tuple

    def build(self, graph_outputs, frame_locals, frame_globals):
        return tuple(_build_all(self.items, graph_outputs, frame_locals, frame_globals))


@dataclass(frozen=True)
class BuildList(Reconstruct):
    """A new list of built items."""

    items: tuple

    def build(self, graph_outputs, frame_locals, frame_globals):
        return _build_all(self.items, graph_outputs, frame_locals, frame_globals)


@dataclass(frozen=True)
class BuildSet(Reconstruct):
    """A set of built items."""

    items: tuple

    def build(self, graph_outputs, frame_locals, frame_globals):
        return set(_build_all(self.items, graph_outputs, frame_locals, frame_globals))


@dataclass(frozen=True)
class BuildDict(Reconstruct):
    """A dict (or ``cls``, e.g. an OrderedDict) with constant ``keys`` and built ``values``."""

    keys: tuple
    values: tuple
    cls: type = dict
    default_factory: Reconstruct | None = None  # a collections.defaultdict's

    def build(self, graph_outputs, frame_locals, frame_globals):
        values = _build_all(self.values, graph_outputs, frame_locals, frame_globals)
        if self.default_factory is not None:
            factory = self.default_factory.build(graph_outputs, frame_locals, frame_globals)
            return self.cls(factory, zip(self.keys, values))
        return self.cls(zip(self.keys, values))


@dataclass(frozen=True)
class BuildNamedTuple(Reconstruct):
    """An instance of namedtuple class ``cls`` from built items."""

    cls: type
    items: tuple

    def build(self, graph_outputs, frame_locals, frame_globals):
        return self.cls(*_build_all(self.items, graph_outputs, frame_locals, frame_globals))


@dataclass(frozen=True)
class BuildObject(Reconstruct):
    """An instance of a user class created inside the frame: ``object.__new__(cls)`` then its attributes."""

    cls: type
    names: tuple
    values: tuple

    def build(self, graph_outputs, frame_locals, frame_globals):
        obj = object.__new__(self.cls)
        for name, value in zip(self.names, _build_all(self.values, graph_outputs, frame_locals, frame_globals)):
            object.__setattr__(obj, name, value)
        return obj


@dataclass(frozen=True)
class BuildIterator(Reconstruct):
    """An iterator over the items it has not produced yet."""

    items: tuple

    def build(self, graph_outputs, frame_locals, frame_globals):
        return iter(_build_all(self.items, graph_outputs, frame_locals, frame_globals))


@dataclass(frozen=True)
class BuildSlice(Reconstruct):
    """``slice(start, stop, step)`` from built parts."""

    start: Reconstruct
    stop: Reconstruct
    step: Reconstruct

    def build(self, graph_outputs, frame_locals, frame_globals):
        return slice(*_build_all((self.start, self.stop, self.step), graph_outputs, frame_locals, frame_globals))


@dataclass(frozen=True)
class BuildCell(Reconstruct):
    """A new cell holding the built contents (or an empty cell)."""

    contents: Reconstruct | None  # None: an empty cell

    def build(self, graph_outputs, frame_locals, frame_globals):
        if self.contents is None:
            return types.CellType()
        return types.CellType(self.contents.build(graph_outputs, frame_locals, frame_globals))


@dataclass(frozen=True)
class BuildFunction(Reconstruct):
    """A function made inside the frame (a closure or lambda)."""

    code: types.CodeType
    globals_: dict
    name: str
    defaults: Reconstruct | None
    kwdefaults: Reconstruct | None
    closure: tuple  # of BuildCell (shared cells are built once per build)

    def build(self, graph_outputs, frame_locals, frame_globals):
        args = (graph_outputs, frame_locals, frame_globals)
        defaults = self.defaults.build(*args) if self.defaults is not None else None
        closure = tuple(cell.build(*args) for cell in self.closure) or None
        fn = types.FunctionType(self.code, self.globals_, self.name, defaults, closure)
        if self.kwdefaults is not None:
            fn.__kwdefaults__ = self.kwdefaults.build(*args)
        return fn


@dataclass(frozen=True)
class BuildBoundMethod(Reconstruct):
    """``function`` bound to ``obj`` (a ``types.MethodType``)."""

    function: Reconstruct
    obj: Reconstruct

    def build(self, graph_outputs, frame_locals, frame_globals):
        args = (graph_outputs, frame_locals, frame_globals)
        return types.MethodType(self.function.build(*args), self.obj.build(*args))


class _GradModeRestorer:
    """The ``__exit__`` of a grad-mode ``with`` block that a graph break cut through: calling it (with
    the exception triple, as the ``with`` statement does) puts the grad mode back."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, *exc_info):
        import ember

        ember.set_grad_enabled(self.previous)
        return False


@dataclass(frozen=True)
class GradModeExit(Reconstruct):
    """At a break inside ``with ember.no_grad():`` (or enable_grad/set_grad_enabled): set grad mode to
    ``inside`` now (the graph restored the caller's mode at its end) and hand back the exit callable
    that the ``with`` statement calls later."""

    previous: bool
    inside: bool

    def build(self, graph_outputs, frame_locals, frame_globals):
        import ember

        ember.set_grad_enabled(self.inside)
        return _GradModeRestorer(self.previous)


class AutocastRestorer:
    """The ``__exit__`` of an ``ember.autocast`` block that a graph break cut through: the region was
    entered for real at the break; calling this (with the exception triple, as the ``with`` statement
    does) leaves it. A continuation that traces the call records it as a side effect instead.

    Attributes:
        device (str): the region's device type.
        previous: the dtype of the region in force before it (None: none), for the tracer.
        inside: the region's dtype (None: a region that disables autocast).
    """

    def __init__(self, region, previous):
        self.region = region
        self.device = region.device
        self.previous = previous
        self.inside = region.fast_dtype if region._enabled else None
        self.done = False

    def __call__(self, *exc_info):
        if not self.done:  # once: a side effect that replays it and the ``with`` statement both call it
            self.done = True
            self.region.__exit__(*(exc_info or (None, None, None)))
        return False


@dataclass(frozen=True)
class AutocastExit(Reconstruct):
    """At a break inside ``with ember.autocast(...):`` entered in the traced code: enter the region for
    real now (the graph before the break held its casts explicitly; the code that runs eagerly after
    the break needs the region itself) and hand back its :class:`AutocastRestorer`, which the ``with``
    statement calls later."""

    device: str
    previous: object  # the dtype in force before the region, or None
    inside: object  # the region's dtype, or None for a region that disables autocast
    cache_enabled: object = None

    def build(self, graph_outputs, frame_locals, frame_globals):
        import ember

        region = ember.autocast(
            self.device, dtype=self.inside, enabled=self.inside is not None, cache_enabled=self.cache_enabled
        )
        region.__enter__()
        return AutocastRestorer(region, self.previous)


@dataclass(frozen=True)
class GetAttr(Reconstruct):
    """``getattr(obj, name)`` (a bound method live at a break, e.g. ``x.item`` about to be called)."""

    obj: Reconstruct
    name: str

    def build(self, graph_outputs, frame_locals, frame_globals):
        return getattr(self.obj.build(graph_outputs, frame_locals, frame_globals), self.name)


@dataclass(frozen=True)
class BuildCall(Reconstruct):
    """``fn(*args, **dict(zip(keys, values)))`` (a ``functools.partial`` made inside the frame)."""

    fn: Reconstruct
    args: tuple
    keys: tuple
    values: tuple

    def build(self, graph_outputs, frame_locals, frame_globals):
        a = (graph_outputs, frame_locals, frame_globals)
        kwargs = dict(zip(self.keys, (v.build(*a) for v in self.values)))
        return self.fn.build(*a)(*(x.build(*a) for x in self.args), **kwargs)


class Shared(Reconstruct):
    """A mutable value made inside the frame that the result reaches more than once (a list that is a
    live local and also the owner of a bound ``append`` on the stack): built once per run of the
    captured graph, so every place gets the same object."""

    def __init__(self, inner):
        self.inner = inner
        self._outs = None  # the graph outputs of the run the value was built for
        self._value = None

    def __repr__(self):
        return f"Shared({self.inner!r})"

    def build(self, graph_outputs, frame_locals, frame_globals):
        if self._outs is not graph_outputs:
            self._value = self.inner.build(graph_outputs, frame_locals, frame_globals)
            self._outs = graph_outputs
        return self._value


class ReleaseShared(Reconstruct):
    """The root of a result that contains :class:`Shared` values: after building (side effects have
    been applied before, with the same objects) it drops their cached objects, so that a cache
    entry holds no tensors of a past run."""

    def __init__(self, inner, shared):
        self.inner = inner
        self.shared = tuple(shared)

    def __repr__(self):
        return f"ReleaseShared({self.inner!r})"

    def build(self, graph_outputs, frame_locals, frame_globals):
        try:
            return self.inner.build(graph_outputs, frame_locals, frame_globals)
        finally:
            for shared in self.shared:
                shared._outs = shared._value = None
