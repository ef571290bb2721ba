"""Lists, tuples, named tuples, dicts and sets of trackers."""

from __future__ import annotations

from ..exc import Unsupported
from ..reconstruct import BuildDict, BuildList, BuildNamedTuple, BuildSet, BuildTuple, Constant, FromSource
from .base import MethodOf, VariableTracker
from .constant import ConstantVariable

__all__ = [
    "BaseListVariable", "ListVariable", "TupleVariable", "NamedTupleVariable", "DictVariable", "SetVariable",
    "SliceVariable",
]


def _constant_key(tx, key):
    if isinstance(key, SliceVariable):
        return key.as_constant()  # a slice with symbolic sizes: their values, guarded
    if not key.is_constant():
        raise Unsupported(f"a container key that is not a Python constant ({key.describe()})")
    return key.as_constant()


class BaseListVariable(VariableTracker):
    """A sequence of trackers (``items``)."""

    python_cls = list

    def __init__(self, items, source=None):
        super().__init__(source)
        self.items = list(items)

    def describe(self):
        return f"{self.python_cls.__name__} of {len(self.items)}"

    def python_type(self):
        return self.python_cls

    def is_constant(self):
        return all(item.is_constant() for item in self.items)

    def as_constant(self):
        return self.python_cls(item.as_constant() for item in self.items)

    def as_python(self, tx):
        return self.python_cls(item.as_python(tx) for item in self.items)

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return list(self.items)

    def length(self, tx):
        return len(self.items)

    def getitem(self, tx, key):
        index = _constant_key(tx, key)
        if isinstance(index, slice):
            return ListVariable(self.items[index]) if self.python_cls is list else TupleVariable(self.items[index])
        try:
            return self.items[index]
        except (IndexError, TypeError) as e:
            from .exceptions import raise_observed

            raise_observed(type(e), str(e))

    def getattr(self, tx, name):
        if not hasattr(self.python_cls, name):
            raise Unsupported(f"{self.python_cls.__name__} has no attribute {name!r}")
        return MethodOf(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "index" or name == "count":
            values = [item.as_constant() for item in self.items] if self.is_constant() else None
            if values is None or not all(a.is_constant() for a in args):
                raise Unsupported(f"{self.python_cls.__name__}.{name} over values that are not constants")
            return ConstantVariable(getattr(values, name)(*[a.as_constant() for a in args]))
        if name == "__contains__":
            return ConstantVariable(args[0].as_constant() in self.as_constant())
        raise Unsupported(f"{self.python_cls.__name__}.{name}() while tracing")

    def reconstruct(self, out):
        if self.source is not None:
            return FromSource(self.source)
        if self.python_cls is list:
            return out.shared(self, lambda: BuildList(tuple(item.reconstruct(out) for item in self.items)))
        return BuildTuple(tuple(item.reconstruct(out) for item in self.items))


class TupleVariable(BaseListVariable):
    """A tuple whose items are trackers."""

    python_cls = tuple


class NamedTupleVariable(BaseListVariable):
    """An instance of a ``collections.namedtuple``/``typing.NamedTuple`` class (also ember's return types)."""

    def __init__(self, cls, items, source=None):
        super().__init__(items, source)
        self.cls = cls

    @property
    def python_cls(self):
        return self.cls

    def as_constant(self):
        return self.cls(*[item.as_constant() for item in self.items])

    def as_python(self, tx):
        return self.cls(*[item.as_python(tx) for item in self.items])

    def getattr(self, tx, name):
        fields = self.cls._fields
        if name in fields:
            return self.items[fields.index(name)]
        return super().getattr(tx, name)

    def reconstruct(self, out):
        if self.source is not None:
            return FromSource(self.source)
        return BuildNamedTuple(self.cls, tuple(item.reconstruct(out) for item in self.items))


class ListVariable(BaseListVariable):
    """A list; mutations of a list that came from the frame are written back after the graph."""

    python_cls = list

    def _mutated(self, tx):
        tx.output.side_effects.mutated_container(self)

    def setitem(self, tx, key, value):
        index = _constant_key(tx, key)
        if isinstance(index, slice):
            self.items[index] = value.unpack(tx)
        else:
            self.items[index] = value
        self._mutated(tx)

    def delitem(self, tx, key):
        del self.items[_constant_key(tx, key)]
        self._mutated(tx)

    def call_method(self, tx, name, args, kwargs):
        handler = getattr(self, f"_list_{name}", None)
        if handler is None:
            return super().call_method(tx, name, args, kwargs)
        result = handler(tx, *args, **kwargs)
        if name not in ("copy",):
            self._mutated(tx)
        return result if result is not None else ConstantVariable(None)

    def _list_append(self, tx, value):
        self.items.append(value)

    def _list_extend(self, tx, values):
        self.items.extend(values.unpack(tx))

    def _list_insert(self, tx, index, value):
        self.items.insert(index.as_constant(), value)

    def _list_pop(self, tx, index=None):
        return self.items.pop(-1 if index is None else index.as_constant())

    def _list_clear(self, tx):
        self.items.clear()

    def _list_reverse(self, tx):
        self.items.reverse()

    def _list_copy(self, tx):
        return ListVariable(self.items)

    def _list_remove(self, tx, value):
        target = value.as_constant()
        for i, item in enumerate(self.items):
            if item.is_constant() and item.as_constant() == target:
                del self.items[i]
                return None
        raise Unsupported("list.remove(x): x not in list (or not comparable while tracing)")

    def _list_sort(self, tx, key=None, reverse=None):
        if key is not None:
            raise Unsupported("list.sort(key=...) while tracing")
        values = sorted(self.as_constant(), reverse=bool(reverse.as_constant()) if reverse else False)
        self.items = [ConstantVariable(v) for v in values]


class DictVariable(VariableTracker):
    """A dict with constant keys (insertion order kept); ``cls`` may be an OrderedDict/defaultdict-free subclass."""

    def __init__(self, items, source=None, cls=dict, default_factory=None):
        super().__init__(source)
        self.items = dict(items)  # constant key -> tracker
        self.cls = cls
        self.default_factory = default_factory  # a tracker, for a collections.defaultdict

    def describe(self):
        return f"dict of {len(self.items)}"

    def python_type(self):
        return self.cls

    def as_python(self, tx):
        return self.cls((k, v.as_python(tx)) for k, v in self.items.items())

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return [ConstantVariable(k) for k in self.items]

    def length(self, tx):
        return len(self.items)

    def getitem(self, tx, key):
        k = _constant_key(tx, key)
        if k not in self.items:
            if self.default_factory is not None:  # defaultdict: d[k] inserts factory()
                self.setitem(tx, key, self.default_factory.call(tx, [], {}))
                return self.items[k]
            from .exceptions import raise_observed

            raise_observed(KeyError, k)
        return self.items[k]

    def setitem(self, tx, key, value):
        self.items[_constant_key(tx, key)] = value
        tx.output.side_effects.mutated_container(self)

    def delitem(self, tx, key):
        del self.items[_constant_key(tx, key)]
        tx.output.side_effects.mutated_container(self)

    def getattr(self, tx, name):
        if not hasattr(dict, name):
            raise Unsupported(f"dict has no attribute {name!r}")
        return MethodOf(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "keys":
            return ListVariable([ConstantVariable(k) for k in self.items])
        if name == "values":
            return ListVariable(list(self.items.values()))
        if name == "items":
            return ListVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.items.items()])
        if name == "get":
            k = _constant_key(tx, args[0])
            return self.items.get(k, args[1] if len(args) > 1 else ConstantVariable(None))
        if name == "__contains__":
            return ConstantVariable(_constant_key(tx, args[0]) in self.items)
        if name == "copy":
            return DictVariable(self.items, cls=self.cls, default_factory=self.default_factory)
        if name in ("update", "pop", "setdefault", "clear", "__setitem__", "__delitem__"):
            result = self._mutate(tx, name, args, kwargs)
            tx.output.side_effects.mutated_container(self)
            return result
        raise Unsupported(f"dict.{name}() while tracing")

    def _mutate(self, tx, name, args, kwargs):
        if name == "update":
            for arg in args:
                other = arg.items if isinstance(arg, DictVariable) else dict(
                    (_constant_key(tx, kv.unpack(tx)[0]), kv.unpack(tx)[1]) for kv in arg.unpack(tx)
                )
                self.items.update(other)
            self.items.update(kwargs)
            return ConstantVariable(None)
        if name == "pop":
            k = _constant_key(tx, args[0])
            if k in self.items:
                return self.items.pop(k)
            if len(args) > 1:
                return args[1]
            raise Unsupported(f"KeyError {k!r} while tracing")
        if name == "setdefault":
            k = _constant_key(tx, args[0])
            return self.items.setdefault(k, args[1] if len(args) > 1 else ConstantVariable(None))
        if name == "clear":
            self.items.clear()
            return ConstantVariable(None)
        if name == "__setitem__":
            self.items[_constant_key(tx, args[0])] = args[1]
            return ConstantVariable(None)
        del self.items[_constant_key(tx, args[0])]
        return ConstantVariable(None)

    def reconstruct(self, out):
        if self.source is not None:
            return FromSource(self.source)
        def make():
            keys = tuple(self.items)
            factory = self.default_factory.reconstruct(out) if self.default_factory is not None else None
            return BuildDict(keys, tuple(v.reconstruct(out) for v in self.items.values()), self.cls, factory)

        return out.shared(self, make)


class SetVariable(VariableTracker):
    """A set of Python constants."""

    def __init__(self, values, source=None):
        super().__init__(source)
        self.values = set(values)

    def describe(self):
        return f"set of {len(self.values)}"

    def python_type(self):
        return set

    def is_constant(self):
        return True

    def as_constant(self):
        return set(self.values)

    def truth(self, tx):
        return bool(self.values)

    def unpack(self, tx):
        return [ConstantVariable(v) for v in self.values]

    def getattr(self, tx, name):
        return MethodOf(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name in ("add", "discard", "remove", "update", "clear"):
            if self.source is not None:
                raise Unsupported(f"set.{name}() on a set from outside the compiled function")
            getattr(self.values, name)(*[a.as_constant() for a in args])
            return ConstantVariable(None)
        method = getattr(set, name, None)
        if method is None:
            raise Unsupported(f"set has no attribute {name!r}")
        result = method(self.values, *[a.as_constant() for a in args])
        return SetVariable(result) if isinstance(result, set) else ConstantVariable(result)

    def reconstruct(self, out):
        if self.source is not None:
            return FromSource(self.source)
        return out.shared(self, lambda: BuildSet(tuple(Constant(v) for v in self.values)))


class SliceVariable(VariableTracker):
    """``slice(start, stop, step)`` whose parts may be trackers (a constant slice is a ConstantVariable)."""

    def __init__(self, parts):
        super().__init__()
        self.parts = parts

    def as_python(self, tx):
        return slice(*[p.as_python(tx) for p in self.parts])

    def as_constant(self):
        if not all(p.is_constant() for p in self.parts):
            return super().as_constant()
        return slice(*[p.as_constant() for p in self.parts])
