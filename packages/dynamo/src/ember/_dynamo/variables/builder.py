"""Wrap a real Python value the frame can reach (with its source) into a tracker, recording the
guards that the capture now depends on."""

from __future__ import annotations

import collections
import itertools
import types

from ..exc import Unsupported
from ..guards import GuardKind
from ..source import AttrSource, GetItemSource
from .builtins import BuiltinVariable
from .constant import ConstantVariable, is_constant_value
from .containers import DictVariable, ListVariable, NamedTupleVariable, SetVariable, TupleVariable
from .functions import UserFunctionVariable, UserMethodVariable
from .leaf import LeafCallableVariable, is_ember_callable, is_pure_library_callable
from .nn_module import NNModuleVariable
from .user_objects import ClassVariable, PythonModuleVariable, UserObjectVariable

__all__ = ["wrap_value"]


def _item_source(source, index):
    return GetItemSource(source, index) if source is not None else None


def wrap_value(output, value, source, guard=True):
    """The tracker for ``value`` read at ``source`` (None: a value with no run-time path, a constant of
    the capture). With ``guard``, the facts the tracker relies on become guards."""
    import ember

    add = output.add_guard if (guard and source is not None) else (lambda *a: None)
    if isinstance(value, ember.Tensor):
        return output.tensor_input(value, source)
    if value is None:
        if guard and source is not None:
            return ConstantVariable(None, source, on_use=lambda: add(source, GuardKind.IS_NONE, None))
        return ConstantVariable(None, source)
    if guard and output.wants_dynamic_int(value, source):
        return output.int_input(value, source)
    if is_constant_value(value) and type(value) is not tuple:
        if guard and source is not None:
            return ConstantVariable(value, source, on_use=lambda: add(source, GuardKind.EQUALS_MATCH, value))
        return ConstantVariable(value, source)
    if isinstance(value, ember.nn.Module):
        add(source, GuardKind.ID_MATCH, value)
        return NNModuleVariable(value, source)
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        add(source, GuardKind.TYPE_MATCH, type(value))
        items = [wrap_value(output, v, _item_source(source, i), guard) for i, v in enumerate(value)]
        return NamedTupleVariable(type(value), items, source)
    if type(value) in (tuple, list):
        add(source, GuardKind.TYPE_MATCH, type(value))
        add(source, GuardKind.LEN_MATCH, len(value))
        items = [wrap_value(output, v, _item_source(source, i), guard) for i, v in enumerate(value)]
        return (TupleVariable if type(value) is tuple else ListVariable)(items, source)
    if type(value) in (dict, collections.OrderedDict, collections.defaultdict) or _plain_dict_subclass(type(value)):
        if not all(is_constant_value(k) for k in value):
            return UserObjectVariable(value, source)
        add(source, GuardKind.TYPE_MATCH, type(value))
        add(source, GuardKind.DICT_KEYS, list(value.keys()))
        items = {k: wrap_value(output, v, _item_source(source, k), guard) for k, v in value.items()}
        factory = getattr(value, "default_factory", None)
        if factory is not None:
            factory = wrap_value(output, factory, AttrSource(source, "default_factory") if source else None, guard)
        return DictVariable(items, source, cls=type(value), default_factory=factory)
    if type(value) is set and all(is_constant_value(v) for v in value):
        add(source, GuardKind.EQUALS_MATCH, set(value))
        return SetVariable(value, source)
    if isinstance(value, types.ModuleType):
        add(source, GuardKind.ID_MATCH, value)
        return PythonModuleVariable(value, source)
    special = _wrap_special(output, value, source, guard, add)
    if special is not None:
        return special
    if isinstance(value, types.MethodType):
        if source is not None:
            add(AttrSource(source, "__func__"), GuardKind.ID_MATCH, value.__func__)
        owner = wrap_value(output, value.__self__, AttrSource(source, "__self__") if source else None, guard)
        if isinstance(value.__self__, (type, types.ModuleType)) and is_ember_callable(value.__func__):
            return LeafCallableVariable(value, source)  # a classmethod of ember's (ember.Tensor.new...)
        if isinstance(value.__func__, types.FunctionType):
            # a method of an object with state (an optimizer's step): inlined, never run while tracing
            return UserMethodVariable(UserFunctionVariable(value.__func__), owner, source)
        raise Unsupported(f"bound method {value.__func__!r} of a {type(value.__self__).__name__} object")
    if is_ember_callable(value) or is_pure_library_callable(value):
        add(source, GuardKind.ID_MATCH, value)
        return LeafCallableVariable(value, source)
    if isinstance(value, types.FunctionType):
        add(source, GuardKind.ID_MATCH, value)
        return UserFunctionVariable(value, source)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)) or (
        isinstance(value, type) and value in _BUILTIN_TYPES
    ):
        add(source, GuardKind.ID_MATCH, value)
        return BuiltinVariable(value, source)
    if isinstance(value, type):
        add(source, GuardKind.ID_MATCH, value)
        return ClassVariable(value, source)
    add(source, GuardKind.TYPE_MATCH, type(value))
    return UserObjectVariable(value, source)


_DICT_METHODS = ("__getitem__", "__setitem__", "__delitem__", "__iter__", "__len__", "__contains__", "__missing__",
                 "keys", "values", "items", "get", "pop", "popitem", "setdefault", "update", "clear", "copy")


def _plain_dict_subclass(cls):
    """Whether ``cls`` subclasses dict (or OrderedDict/defaultdict) without changing how it reads or
    writes items (a hook table ``class HookDict(dict)``): tracked as the dict it is, guarded on its type."""
    if not issubclass(cls, dict) or cls in (dict, collections.OrderedDict, collections.defaultdict):
        return False
    base = next(b for b in cls.__mro__ if b in (collections.OrderedDict, collections.defaultdict, dict))
    return all(getattr(cls, name, None) is getattr(base, name, None) for name in _DICT_METHODS)


_BUILTIN_TYPES = {int, float, bool, str, list, tuple, dict, set, frozenset, range, enumerate, zip, reversed,
                  map, filter, slice, type, object, super, complex, bytes, itertools.chain}


_ITERATOR_TYPES = (type(iter([])), type(iter(())), type(iter(range(0))))


def _wrap_special(output, value, source, guard, add):
    """Compiled/disabled function wrappers, partials and list iterators; None for other values."""
    import functools

    from ..eval_frame import CompiledFunction, DisabledFunction
    from ..reconstruct import AutocastRestorer
    from .contexts import ContextManagerFunctionVariable, is_contextmanager_function
    from .functions import DisabledFunctionVariable, PartialVariable
    from .iterators import IteratorVariable

    if type(value) is AutocastRestorer and source is not None:
        from .misc import AutocastExitVariable

        add(source, GuardKind.TYPE_MATCH, AutocastRestorer)
        restorer = UserObjectVariable(value, source)
        return AutocastExitVariable(value.device, value.previous, value.inside, restorer=restorer)
    if is_contextmanager_function(value):
        add(source, GuardKind.ID_MATCH, value)
        return ContextManagerFunctionVariable(wrap_value(output, value.__wrapped__, None, False), source)
    if isinstance(value, CompiledFunction):  # a compiled function called inside: inline what it compiles
        add(source, GuardKind.ID_MATCH, value)
        return wrap_value(output, value._orig_fn, AttrSource(source, "_orig_fn") if source else None, guard)
    if isinstance(value, DisabledFunction):
        add(source, GuardKind.ID_MATCH, value)
        return DisabledFunctionVariable(value, source)
    if type(value) is functools.partial:
        add(source, GuardKind.TYPE_MATCH, functools.partial)
        fn = wrap_value(output, value.func, AttrSource(source, "func") if source else None, guard)
        args = [wrap_value(output, a, _item_source(AttrSource(source, "args") if source else None, i), guard)
                for i, a in enumerate(value.args)]
        keywords_source = AttrSource(source, "keywords") if source else None
        if keywords_source is not None:
            add(keywords_source, GuardKind.DICT_KEYS, list(value.keywords))
        kwargs = {k: wrap_value(output, v, _item_source(keywords_source, k), guard) for k, v in value.keywords.items()}
        return PartialVariable(fn, args, kwargs, source)
    if type(value) in _ITERATOR_TYPES:
        # a loop's iterator handed to a continuation: its remaining items, read without advancing it
        from ..source import IteratorItemSource, iterator_state

        sequence, position = iterator_state(value)
        remaining = len(sequence) - position
        add(source, GuardKind.TYPE_MATCH, type(value))
        if source is not None:
            add(IteratorItemSource(source, None), GuardKind.EQUALS_MATCH, remaining)
        items = [
            wrap_value(output, sequence[position + i], IteratorItemSource(source, i) if source else None, guard)
            for i in range(remaining)
        ]
        return IteratorVariable(items)
    return None
