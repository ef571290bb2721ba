"""Side effects on Python state seen while tracing, replayed after the graph runs.

The translator never mutates the user's objects while tracing: attribute stores, list/dict
mutations of objects that came from the frame and global stores are recorded here (and later
reads in the same capture see the new values through :meth:`SideEffects.attr_override`).
:meth:`SideEffects.finish` turns them into :class:`SideEffect` objects that the runtime applies,
in order, with ``effect.apply(graph_outputs, frame_locals, frame_globals)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .reconstruct import Reconstruct

__all__ = ["SideEffect", "SetAttr", "ReplaceList", "ReplaceDict", "StoreGlobal", "CallAfterGraph", "SideEffects"]


class SideEffect:
    """One mutation of Python state to replay after the graph."""

    def apply(self, graph_outputs, frame_locals, frame_globals):
        raise NotImplementedError


@dataclass(frozen=True)
class SetAttr(SideEffect):
    """``target.name = value``."""

    target: Reconstruct
    name: str
    value: Reconstruct

    def apply(self, graph_outputs, frame_locals, frame_globals):
        args = (graph_outputs, frame_locals, frame_globals)
        setattr(self.target.build(*args), self.name, self.value.build(*args))


@dataclass(frozen=True)
class ReplaceList(SideEffect):
    """``target[:] = items``: the list's final contents (append/pop/setitem... all end here)."""

    target: Reconstruct
    items: tuple

    def apply(self, graph_outputs, frame_locals, frame_globals):
        args = (graph_outputs, frame_locals, frame_globals)
        self.target.build(*args)[:] = [item.build(*args) for item in self.items]


@dataclass(frozen=True)
class ReplaceDict(SideEffect):
    """The dict's final contents, in order."""

    target: Reconstruct
    keys: tuple
    values: tuple

    def apply(self, graph_outputs, frame_locals, frame_globals):
        args = (graph_outputs, frame_locals, frame_globals)
        d = self.target.build(*args)
        values = [v.build(*args) for v in self.values]
        d.clear()
        d.update(zip(self.keys, values))


@dataclass(frozen=True)
class StoreGlobal(SideEffect):
    """``global name; name = value`` in the compiled function's module."""

    name: str
    value: Reconstruct

    def apply(self, graph_outputs, frame_locals, frame_globals):
        frame_globals[self.name] = self.value.build(graph_outputs, frame_locals, frame_globals)


@dataclass(frozen=True)
class CallAfterGraph(SideEffect):
    """``target()``: leaving an autocast region that a continuation entered for real."""

    target: Reconstruct

    def apply(self, graph_outputs, frame_locals, frame_globals):
        self.target.build(graph_outputs, frame_locals, frame_globals)()


class SideEffects:
    """The mutations of one capture, in the order they first happened."""

    def __init__(self):
        self._containers = {}  # id -> container tracker with a source (mutated)
        self._attrs = {}  # (id(obj), name) -> (owner tracker, obj, value tracker)
        self._globals = {}  # name -> value tracker
        self._calls = {}  # ("x", position) -> tracker of an object to call after the graph
        self._order = []  # keys into the four tables, first-mutation order

    def mutated_container(self, var):
        """A list/dict tracker was mutated: if it came from the frame, write its contents back."""
        reason = getattr(var, "read_only", None)
        if reason is not None:  # a snapshot (an object's __dict__): the write would not reach the object
            from .exc import Unsupported

            raise Unsupported(reason)
        if var.source is None:
            return
        key = ("c", id(var))
        if key not in self._containers:
            self._containers[key] = var
            self._order.append(key)

    def store_attr(self, owner, obj, name, value):
        key = ("a", id(obj), name)
        if key not in self._attrs:
            self._order.append(key)
        self._attrs[key] = (owner, obj, value)

    def attr_override(self, obj, name):
        """The tracker stored into ``obj.name`` earlier in this capture, or None."""
        entry = self._attrs.get(("a", id(obj), name))
        return entry[2] if entry is not None and entry[1] is obj else None

    def store_global(self, name, value):
        key = ("g", name)
        if key not in self._globals:
            self._order.append(key)
        self._globals[key] = value

    def global_override(self, name):
        return self._globals.get(("g", name))

    def call_after_graph(self, var):
        """Call the object ``var`` tracks after the graph (it has a source: it came from the frame)."""
        key = ("x", len(self._order))
        self._calls[key] = var
        self._order.append(key)

    def __len__(self):
        return len(self._order)

    def finish(self, out):
        """The :class:`SideEffect` list (values reconstructed against the graph outputs ``out``)."""
        from .variables.containers import DictVariable

        effects = []
        for key in self._order:
            if key[0] == "c":
                var = self._containers[key]
                target = var.reconstruct(out)
                if isinstance(var, DictVariable):
                    keys = tuple(var.items)
                    effects.append(ReplaceDict(target, keys, tuple(v.reconstruct(out) for v in var.items.values())))
                else:
                    effects.append(ReplaceList(target, tuple(v.reconstruct(out) for v in var.items)))
            elif key[0] == "a":
                owner, _, value = self._attrs[key]
                effects.append(SetAttr(owner.reconstruct(out), key[2], value.reconstruct(out)))
            elif key[0] == "x":
                effects.append(CallAfterGraph(self._calls[key].reconstruct(out)))
            else:
                effects.append(StoreGlobal(key[1], self._globals[key].reconstruct(out)))
        return effects
