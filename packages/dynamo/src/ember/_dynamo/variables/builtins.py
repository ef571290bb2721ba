"""Python's builtins (``len``, ``isinstance``, ``range``, ``zip``, ``min``...) and methods of constants."""

from __future__ import annotations

import builtins
import itertools
import operator

from ..exc import Unsupported
from ..reconstruct import Constant
from .base import KnownObjectVariable, VariableTracker
from .constant import ConstantVariable

__all__ = ["BuiltinVariable", "ConstantMethodVariable"]

# Builtins that compute a value from their arguments and nothing else: folded on constants, and
# called on the meta examples when a tensor is involved (ember's dunder methods record the ops).
_PURE = {
    abs, all, any, bool, chr, complex, divmod, float, format, hash, int, max, min, ord, pow, repr, round,
    sorted, str, sum, frozenset,
}
_REFUSED = {
    print: "print() is a side effect outside the graph",
    input: "input() while tracing",
    open: "open() while tracing",
    exec: "exec() while tracing",
    eval: "eval() while tracing",
    globals: "globals() while tracing",
    locals: "locals() while tracing",
    vars: "vars() while tracing",
    breakpoint: "breakpoint() while tracing",
}


def _class_of(tx, v):
    """The Python class (or tuple of classes) a tracker stands for, for isinstance/issubclass."""
    from .containers import BaseListVariable

    if isinstance(v, BaseListVariable):
        return tuple(_class_of(tx, item) for item in v.items)
    if v.is_constant():
        return v.as_constant()
    raise Unsupported(f"isinstance() with {v.describe()} as the class")


class BuiltinVariable(KnownObjectVariable):
    """A builtin function or type; ``call`` dispatches to a ``_call_<name>`` handler or folds constants."""

    def describe(self):
        return f"builtin {getattr(self.value, '__name__', self.value)}"

    def reconstruct(self, out):
        return Constant(self.value)

    def getattr(self, tx, name):
        if self.value is object and name in ("__setattr__", "__new__"):
            return BuiltinMethodVariable(self.value, name)
        if hasattr(self.value, name):
            return tx.output.wrap(getattr(self.value, name), None, guard=False)
        raise Unsupported(f"{self.describe()} has no attribute {name!r}")

    def call(self, tx, args, kwargs):
        fn = self.value
        if fn in _REFUSED:
            raise Unsupported(_REFUSED[fn])
        handler = getattr(self, f"_call_{getattr(fn, '__name__', '')}", None)
        if handler is not None and getattr(builtins, fn.__name__, None) is fn:
            return handler(tx, *args, **kwargs)
        if fn is itertools.chain:
            return self._chain(tx, *args, **kwargs)
        if fn in _PURE:
            return _fold_or_leaf(tx, fn, args, kwargs)
        if isinstance(fn, type) and issubclass(fn, BaseException):
            from .exceptions import ExceptionVariable

            return ExceptionVariable(fn, args)
        raise Unsupported(f"builtin {getattr(fn, '__name__', fn)}() is not supported while tracing")

    # -- facts about values -----------------------------------------------------------------------

    def _call_id(self, tx, obj):
        # used as a dict key inside a helper (``transposed[id(x)]``): the identity of the traced value
        from ..handlers.operators import _identity

        return ConstantVariable(id(_identity(obj)))

    def _call_len(self, tx, obj):
        return ConstantVariable(obj.length(tx))

    def _call_isinstance(self, tx, obj, cls):
        return ConstantVariable(issubclass(obj.python_type(), _class_of(tx, cls)))

    def _call_issubclass(self, tx, sub, cls):
        return ConstantVariable(issubclass(_class_of(tx, sub), _class_of(tx, cls)))

    def _call_type(self, tx, obj):
        from .nn_module import NNModuleVariable
        from .user_objects import UserObjectVariable

        source = getattr(obj, "source", None)
        if source is not None and isinstance(obj, (UserObjectVariable, NNModuleVariable)):
            # ``type(self).attr``: class attributes read through it are guarded (a changed one recompiles)
            from ..source import TypeSource

            return tx.output.wrap(obj.python_type(), TypeSource(source))
        return tx.output.wrap(obj.python_type(), None, guard=False)

    def _call_callable(self, tx, obj):
        from .functions import UserMethodVariable, _InlinableFunction
        from .leaf import LeafCallableVariable

        if isinstance(obj, (_InlinableFunction, UserMethodVariable, LeafCallableVariable, BuiltinVariable)):
            return ConstantVariable(True)
        cls = obj.python_type()
        return ConstantVariable(any("__call__" in klass.__dict__ for klass in cls.__mro__))

    def _call_getattr(self, tx, obj, name, default=None):
        try:
            return obj.getattr(tx, name.as_constant())
        except Unsupported:
            if default is None:
                raise
            _guard_has_attr(tx, obj, name.as_constant(), False)  # the default was used: while it stays absent
            return default

    def _call_hasattr(self, tx, obj, name):
        real, attr = getattr(obj, "value", None), name.as_constant()
        if real is not None and not obj.is_constant() and tx.output.side_effects.attr_override(real, attr) is None:
            found = hasattr(real, attr)  # an object of the frame: ask it, and guard the answer
            _guard_has_attr(tx, obj, attr, found)
            return ConstantVariable(found)
        try:
            obj.getattr(tx, name.as_constant())
        except Unsupported:
            return ConstantVariable(False)
        return ConstantVariable(True)

    def _call_setattr(self, tx, obj, name, value):
        obj.setattr(tx, name.as_constant(), value)
        return ConstantVariable(None)

    def _call_bool(self, tx, obj=None):
        return ConstantVariable(False if obj is None else obj.truth(tx))

    # -- sequences and iteration --------------------------------------------------------------------

    def _call_slice(self, tx, *args):
        parts = list(args) + [ConstantVariable(None)] * (3 - len(args)) if len(args) > 1 else [
            ConstantVariable(None), args[0], ConstantVariable(None)
        ]
        return tx.make_slice(parts)

    def _call_range(self, tx, *args):
        return ConstantVariable(range(*[a.as_constant() for a in args]))

    def _call_iter(self, tx, obj):
        from .iterators import IteratorVariable

        if isinstance(obj, IteratorVariable):
            return obj
        return IteratorVariable(obj.unpack(tx))

    def _call_next(self, tx, it, default=None):
        from .iterators import IteratorVariable

        if not isinstance(it, IteratorVariable):
            raise Unsupported(f"next() of {it.describe()}")
        item = it.next_item()
        if item is None:
            if default is None:
                raise Unsupported("next() of an exhausted iterator (StopIteration) while tracing")
            return default
        return item

    def _call_enumerate(self, tx, iterable, start=None):
        from .containers import TupleVariable
        from .iterators import IteratorVariable

        first = start.as_constant() if start is not None else 0
        items = iterable.unpack(tx)
        return IteratorVariable([TupleVariable([ConstantVariable(first + i), v]) for i, v in enumerate(items)])

    def _call_zip(self, tx, *iterables, strict=None):
        from .containers import TupleVariable
        from .iterators import IteratorVariable

        # pull from iterators one item at a time (a generator may be endless), the others are lists
        sources = [it if isinstance(it, IteratorVariable) else IteratorVariable(it.unpack(tx)) for it in iterables]
        groups = []
        while True:
            items = []
            for source in sources:  # left to right, stopping at the first exhausted one, as zip does
                item = source.next_item()
                if item is None:
                    break
                items.append(item)
            if len(items) < len(sources):
                if strict is not None and strict.as_constant() and (items or any(s.next_item() for s in sources[1:])):
                    raise Unsupported("zip(strict=True) of unequal lengths")
                break
            groups.append(TupleVariable(items))
        return IteratorVariable(groups)

    def _chain(self, tx, *iterables):
        """``itertools.chain(a, b, ...)``: the items of each, in order."""
        from .iterators import IteratorVariable

        return IteratorVariable([item for iterable in iterables for item in iterable.unpack(tx)])

    def _call_reversed(self, tx, seq):
        from .iterators import IteratorVariable

        return IteratorVariable(list(reversed(seq.unpack(tx))))

    def _call_map(self, tx, fn, *iterables):
        from .iterators import IteratorVariable

        lists = [it.unpack(tx) for it in iterables]
        return IteratorVariable([fn.call(tx, list(group), {}) for group in zip(*lists)])

    def _call_filter(self, tx, fn, iterable):
        from .iterators import IteratorVariable

        kept = []
        for item in iterable.unpack(tx):
            identity = fn.is_constant() and fn.as_constant() is None
            if (item if identity else fn.call(tx, [item], {})).truth(tx):
                kept.append(item)
        return IteratorVariable(kept)

    def _call_list(self, tx, iterable=None):
        from .containers import ListVariable

        return ListVariable(iterable.unpack(tx) if iterable is not None else [])

    def _call_tuple(self, tx, iterable=None):
        from .containers import TupleVariable

        return TupleVariable(iterable.unpack(tx) if iterable is not None else [])

    def _call_set(self, tx, iterable=None):
        from .containers import SetVariable

        return SetVariable([v.as_constant() for v in iterable.unpack(tx)] if iterable is not None else [])

    def _call_dict(self, tx, iterable=None, **kwargs):
        from .containers import DictVariable

        d = DictVariable({})
        if iterable is not None:
            d.call_method(tx, "update", [iterable], {})
        d.items.update(kwargs)
        return d

    def _call_sum(self, tx, iterable, start=None):
        items = iterable.unpack(tx)
        total = start if start is not None else ConstantVariable(0)
        for item in items:
            total = tx.binary_op(operator.add, total, item)
        return total

    def _call_any(self, tx, iterable):
        return ConstantVariable(any(item.truth(tx) for item in iterable.unpack(tx)))

    def _call_all(self, tx, iterable):
        return ConstantVariable(all(item.truth(tx) for item in iterable.unpack(tx)))

    def _call_min(self, tx, *args, **kwargs):
        return self._extremum(tx, min, args, kwargs)

    def _call_max(self, tx, *args, **kwargs):
        return self._extremum(tx, max, args, kwargs)

    def _extremum(self, tx, fn, args, kwargs):
        items = args[0].unpack(tx) if len(args) == 1 else list(args)
        if kwargs or not all(item.is_constant() for item in items):
            raise Unsupported(f"{fn.__name__}() of values that are not Python constants (compares tensors in Python)")
        return ConstantVariable(fn(item.as_constant() for item in items))

    def _call_super(self, tx, cls=None, obj=None):
        from .misc import SuperVariable

        if cls is None:
            cls, obj = tx.implicit_super_args()
            return SuperVariable(cls, obj)
        return SuperVariable(cls.as_constant(), obj)


class BuiltinMethodVariable(VariableTracker):
    """``object.__setattr__`` and friends, as used by dataclasses and frozen classes."""

    def __init__(self, owner, name):
        super().__init__()
        self.owner = owner
        self.name = name

    def call(self, tx, args, kwargs):
        if self.name == "__setattr__":
            obj, name, value = args
            obj.setattr(tx, name.as_constant(), value)
            return ConstantVariable(None)
        raise Unsupported(f"object.{self.name}() while tracing")


class BoundObjectInit(VariableTracker):
    """``object.__init__`` bound to an instance (``super().__init__()`` at the top of a hierarchy): does
    nothing, and refuses arguments as Python does."""

    def describe(self):
        return "object.__init__"

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise Unsupported("object.__init__() takes exactly one argument (the instance to initialize)")
        return ConstantVariable(None)


def _fold_or_leaf(tx, fn, args, kwargs):
    """Fold a pure builtin over constants, or run it on meta examples (recording ops) otherwise."""
    if all(a.is_constant() for a in args) and all(v.is_constant() for v in kwargs.values()):
        values = [a.as_constant() for a in args]
        return ConstantVariable(fn(*values, **{k: v.as_constant() for k, v in kwargs.items()}))
    from .tensor import TensorVariable

    if fn in (int, float, bool, complex) and any(isinstance(a, TensorVariable) for a in args):
        raise Unsupported(f"{fn.__name__}(tensor) reads a tensor's value into Python (data-dependent)")
    return tx.output.leaf_call(tx, fn, args, kwargs)


class ConstantMethodVariable(VariableTracker):
    """A method of a constant (``"a,b".split``, ``(1, 2).index``): called on constant arguments."""

    def __init__(self, value, name):
        super().__init__()
        self.value = value
        self.name = name

    def describe(self):
        return f"method {type(self.value).__name__}.{self.name}"

    def call(self, tx, args, kwargs):
        if not (all(a.is_constant() for a in args) and all(v.is_constant() for v in kwargs.values())):
            raise Unsupported(f"{self.describe()}() with arguments that are not constants")
        keywords = {k: v.as_constant() for k, v in kwargs.items()}
        result = getattr(self.value, self.name)(*[a.as_constant() for a in args], **keywords)
        return tx.output.wrap(result, None, guard=False)


def _guard_has_attr(tx, obj, attr, found):
    """Guard that ``obj`` (when it has a source) still has, or still lacks, attribute ``attr``."""
    source = getattr(obj, "source", None)
    if source is None:
        return
    from ..guards import GuardKind
    from ..source import HasAttrSource

    tx.output.add_guard(HasAttrSource(source, attr), GuardKind.EQUALS_MATCH, found)
