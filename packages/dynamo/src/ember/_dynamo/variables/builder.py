"""Wrap a real Python value the frame can reach (with its source) into a tracker, recording the
guards that the capture now depends on."""

from __future__ import annotations

import types

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
    if type(value) is dict or (isinstance(value, dict) and type(value).__module__ == "collections"):
        if not all(is_constant_value(k) for k in value):
            return UserObjectVariable(value, source)
        add(source, GuardKind.TYPE_MATCH, type(value))
        add(source, GuardKind.DICT_KEYS, list(value.keys()))
        items = {k: wrap_value(output, v, _item_source(source, k), guard) for k, v in value.items()}
        return DictVariable(items, source, cls=type(value))
    if type(value) is set and all(is_constant_value(v) for v in value):
        add(source, GuardKind.EQUALS_MATCH, set(value))
        return SetVariable(value, source)
    if isinstance(value, types.ModuleType):
        add(source, GuardKind.ID_MATCH, value)
        return PythonModuleVariable(value, source)
    if isinstance(value, types.MethodType):
        if source is not None:
            add(AttrSource(source, "__func__"), GuardKind.ID_MATCH, value.__func__)
        owner = wrap_value(output, value.__self__, AttrSource(source, "__self__") if source else None, guard)
        if isinstance(value.__func__, types.FunctionType) and not is_ember_callable(value.__func__):
            return UserMethodVariable(UserFunctionVariable(value.__func__), owner, source)
        return LeafCallableVariable(value, source)
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


_BUILTIN_TYPES = {int, float, bool, str, list, tuple, dict, set, frozenset, range, enumerate, zip, reversed,
                  map, filter, slice, type, object, super, complex, bytes}
