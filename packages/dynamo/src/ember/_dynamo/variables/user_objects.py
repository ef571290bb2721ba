"""Instances of user classes (existing ones and ones made while tracing), classes, Python modules."""

from __future__ import annotations

import types

from ..exc import Unsupported
from ..reconstruct import BuildObject, Constant, FromSource
from ..source import AttrSource
from .base import KnownObjectVariable, VariableTracker
from .constant import ConstantVariable

__all__ = ["class_attribute", "UserObjectVariable", "NewObjectVariable", "ClassVariable", "PythonModuleVariable"]


def class_attribute(tx, raw, obj, klass, name):
    """The tracker for ``obj.name`` when ``name`` is found as ``raw`` in ``klass.__dict__``."""
    from .functions import UserFunctionVariable, UserMethodVariable

    if isinstance(raw, types.FunctionType):
        # with a source (``obj.name.__func__``), the closure cells it reads are guarded (a class
        # defined in a function and read through its name there)
        source = getattr(obj, "source", None)
        function_source = AttrSource(AttrSource(source, name), "__func__") if source is not None else None
        return UserMethodVariable(UserFunctionVariable(raw, function_source), obj)
    if isinstance(raw, staticmethod):
        return tx.output.wrap(raw.__func__, None)
    if isinstance(raw, classmethod):
        return UserMethodVariable(UserFunctionVariable(raw.__func__), ClassVariable(obj.python_type()))
    if isinstance(raw, property):
        if raw.fget is None:
            raise Unsupported(f"property {name!r} has no getter")
        return tx.inline_call(UserFunctionVariable(raw.fget), [obj], {})
    if raw is object.__init__:  # ``super().__init__()`` reaching object: bound, it takes no arguments
        from .builtins import BoundObjectInit

        return BoundObjectInit()
    getter = getattr(type(raw), "__get__", None)
    if isinstance(getter, types.FunctionType):
        # a descriptor written in Python (a lazy property): its __get__ is inlined
        from .functions import UserFunctionVariable

        descriptor = tx.output.wrap(raw, None, guard=False)
        return tx.inline_call(UserFunctionVariable(getter), [descriptor, obj, ClassVariable(klass)], {})
    if getter is not None:
        raise Unsupported(f"descriptor {klass.__name__}.{name} ({type(raw).__name__}) while tracing")
    # a plain class attribute read through the object (``self.scale``): guarded through the object's path,
    # so ``A.scale = 3.0`` after compiling recompiles
    source = getattr(obj, "source", None)
    return tx.output.wrap(raw, AttrSource(source, name) if source is not None else None)


def _lookup_class(cls, name):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass, klass.__dict__[name]
    return None, None


class _ObjectBase(VariableTracker):
    """Attribute look-up shared by existing and new objects: instance state first, then the class."""

    def instance_attr(self, tx, name):
        """The tracker of an instance attribute, or None."""
        raise NotImplementedError

    def getattr(self, tx, name):
        if name == "__dict__":
            return self.instance_dict(tx)
        cls = self.python_type()
        klass, raw = _lookup_class(cls, name)
        if raw is not None and isinstance(raw, property):
            return class_attribute(tx, raw, self, klass, name)
        found = self.instance_attr(tx, name)
        if found is not None:
            return found
        if raw is not None:
            return class_attribute(tx, raw, self, klass, name)
        if name == "__class__":
            return ClassVariable(cls)
        raise Unsupported(f"{cls.__name__!r} object has no attribute {name!r} (or it is computed by __getattr__)")

    def call(self, tx, args, kwargs):
        return self.getattr(tx, "__call__").call(tx, args, kwargs)

    def instance_dict(self, tx):
        """``obj.__dict__``, for reading (``name in self.__dict__``)."""
        raise Unsupported(f"__dict__ of {self.describe()}")


class UserObjectVariable(_ObjectBase):
    """An object of a user class that the frame can reach (``L['cfg']``, ``G['state']``)."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def describe(self):
        return f"{type(self.value).__name__} object"

    def python_type(self):
        return type(self.value)

    def as_python(self, tx):
        return self.value

    def instance_attr(self, tx, name):
        override = tx.output.side_effects.attr_override(self.value, name)
        if override is not None:
            return override
        state = getattr(self.value, "__dict__", {})
        if name in state:
            return tx.output.wrap(state[name], AttrSource(self.source, name) if self.source else None)
        return None

    def setattr(self, tx, name, value):
        tx.output.side_effects.store_attr(self, self.value, name, value)

    def instance_dict(self, tx):
        from ..guards import GuardKind
        from .containers import DictVariable

        state = getattr(self.value, "__dict__", None)
        if state is None or self.source is None:
            return super().instance_dict(tx)
        tx.output.add_guard(AttrSource(self.source, "__dict__"), GuardKind.DICT_KEYS, list(state))
        view = DictVariable({name: self.instance_attr(tx, name) for name in state})
        view.read_only = "writing through __dict__ of an object (not traced)"
        return view

    def truth(self, tx):
        cls = type(self.value)
        if hasattr(cls, "__bool__") or hasattr(cls, "__len__"):
            raise Unsupported(f"bool() of a {cls.__name__} object with __bool__/__len__")
        return True

    def reconstruct(self, out):
        return FromSource(self.source) if self.source is not None else Constant(self.value)


class NewObjectVariable(_ObjectBase):
    """An object of a user class created while tracing (``Point(x, y)``, a dataclass): its attributes are trackers."""

    def __init__(self, cls):
        super().__init__()
        self.cls = cls
        self.attrs = {}

    def describe(self):
        return f"new {self.cls.__name__} object"

    def python_type(self):
        return self.cls

    def instance_attr(self, tx, name):
        return self.attrs.get(name)

    def setattr(self, tx, name, value):
        self.attrs[name] = value

    def instance_dict(self, tx):
        from .containers import DictVariable

        view = DictVariable(dict(self.attrs))
        view.read_only = "writing through __dict__ of an object made while tracing"
        return view

    def delattr(self, tx, name):
        if name not in self.attrs:
            raise Unsupported(f"del of missing attribute {name!r}")
        del self.attrs[name]

    def truth(self, tx):
        return True

    def reconstruct(self, out):
        def make():
            names = tuple(self.attrs)
            return BuildObject(self.cls, names, tuple(self.attrs[n].reconstruct(out) for n in names))

        return out.shared(self, make)


def _is_namedtuple_class(cls):
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


class ClassVariable(KnownObjectVariable):
    """A class (user classes; ember's are leaf callables): calling it makes an instance."""

    def describe(self):
        return f"class {self.value.__name__}"

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__"):
            return ConstantVariable(getattr(self.value, name))
        klass, raw = _lookup_class(self.value, name)
        if raw is None:
            raise Unsupported(f"class {self.value.__name__} has no attribute {name!r}")
        if isinstance(raw, classmethod):
            from .functions import UserFunctionVariable, UserMethodVariable

            return UserMethodVariable(UserFunctionVariable(raw.__func__), self)
        if isinstance(raw, staticmethod):
            raw = raw.__func__
        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.output.wrap(raw, source)

    def call(self, tx, args, kwargs):
        cls = self.value
        if _is_namedtuple_class(cls):
            from .containers import NamedTupleVariable
            from .functions import bind_arguments

            defaults = [tx.output.wrap(cls._field_defaults[f], None) for f in cls._fields if f in cls._field_defaults]
            code = cls.__new__.__code__ if isinstance(cls.__new__, types.FunctionType) else None
            if code is None:
                raise Unsupported(f"named tuple class {cls.__name__} without a Python __new__")
            bound = bind_arguments(code, "__new__", defaults, {}, [self, *args], kwargs)
            return NamedTupleVariable(cls, [bound[f] for f in cls._fields])
        import collections
        import functools

        if cls is functools.partial:
            from .functions import PartialVariable

            if not args:
                raise Unsupported("functools.partial() without a function")
            return PartialVariable(args[0], args[1:], kwargs)
        if cls is collections.defaultdict:
            from .containers import DictVariable

            if len(args) > 1 or kwargs:
                raise Unsupported("collections.defaultdict() with initial items while tracing")
            return DictVariable({}, cls=collections.defaultdict, default_factory=args[0] if args else None)
        if cls is collections.OrderedDict:
            from .builtins import BuiltinVariable
            from .containers import DictVariable

            built = BuiltinVariable(dict).call(tx, args, kwargs)
            return DictVariable(built.items, cls=collections.OrderedDict)
        if issubclass(cls, BaseException):
            from .exceptions import ExceptionVariable

            if kwargs:
                raise Unsupported(f"creating exception {cls.__name__} with keyword arguments")
            return ExceptionVariable(cls, args)
        if cls.__new__ is not object.__new__ or type(cls) is not type:
            raise Unsupported(f"creating a {cls.__name__} (a custom __new__ or metaclass)")
        import ember

        if issubclass(cls, ember.nn.Module):
            raise Unsupported(f"creating a module ({cls.__name__}) inside a compiled function")
        obj = NewObjectVariable(cls)
        init = cls.__init__
        if init is object.__init__:
            if args or kwargs:
                raise Unsupported(f"{cls.__name__}() takes no arguments")
            return obj
        if not isinstance(init, types.FunctionType):
            raise Unsupported(f"{cls.__name__}.__init__ is not a Python function")
        from .functions import UserFunctionVariable

        tx.inline_call(UserFunctionVariable(init), [obj, *args], kwargs)
        return obj

    def reconstruct(self, out):
        return FromSource(self.source) if self.source is not None else Constant(self.value)


class PythonModuleVariable(VariableTracker):
    """An imported module (``math``, a user module); ``ember``'s own modules are trusted (no guards on
    their attributes)."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def describe(self):
        return f"module {self.value.__name__}"

    def python_type(self):
        return types.ModuleType

    def getattr(self, tx, name):
        if not hasattr(self.value, name):
            raise Unsupported(f"module {self.value.__name__!r} has no attribute {name!r}")
        value = getattr(self.value, name)
        trusted = self.value.__name__.split(".")[0] in ("ember", "math", "operator", "functools", "itertools", "typing")
        source = AttrSource(self.source, name) if self.source is not None else None
        if trusted and not isinstance(value, types.ModuleType):
            if source is not None and callable(value):
                # one identity guard per library function read: patching it (``F.gelu = ...``, as
                # ``mock.patch`` does) recompiles; the function's own internals stay unguarded
                from ..guards import GuardKind

                tx.output.add_guard(source, GuardKind.ID_MATCH, value)
            return tx.output.wrap(value, source, guard=False)
        return tx.output.wrap(value, source)

    def as_python(self, tx):
        return self.value

    def is_constant(self):
        return False

    def reconstruct(self, out):
        return FromSource(self.source) if self.source is not None else Constant(self.value)

