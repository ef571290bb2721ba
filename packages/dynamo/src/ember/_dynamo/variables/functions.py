"""User functions, closures, bound methods and cells: calls to them are inlined."""

from __future__ import annotations

import inspect
import types

from ..exc import Unsupported
from ..guards import GuardKind
from ..reconstruct import BuildBoundMethod, BuildCell, BuildFunction, BuildTuple, Constant, FromSource
from ..source import AttrSource, GetItemSource
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import DictVariable, TupleVariable

__all__ = ["CellVariable", "UserFunctionVariable", "NestedFunctionVariable", "UserMethodVariable", "bind_arguments"]


class CellVariable(VariableTracker):
    """A closure cell: ``contents`` is a tracker, or None while the cell is empty.

    A cell of a real closure (``pending``: its value and source) is wrapped when first read, so
    that unused free variables add no guards; storing into such a cell is not supported (it would
    change a cell that other functions share).
    """

    def __init__(self, contents=None, source=None, pending=None):
        super().__init__(source)
        self.contents = contents
        self.pending = pending  # (value, source) of a real cell not read yet
        self.real = pending is not None

    def describe(self):
        return "cell"

    def get(self, tx):
        if self.pending is not None:
            value, source = self.pending
            self.pending = None
            self.contents = tx.output.wrap(value, source)
        if self.contents is None:
            raise Unsupported("reading a free variable that is not bound yet")
        return self.contents

    def set(self, tx, value):
        if self.real:
            raise Unsupported("assigning a nonlocal variable of a function outside the compiled code")
        self.contents = value

    def reconstruct(self, out):
        if self.real:
            raise Unsupported("a closure over a cell of a function outside the compiled code, live after the graph")
        def make():
            return BuildCell(self.contents.reconstruct(out) if self.contents is not None else None)

        return out.shared(self, make)


def bind_arguments(code, name, defaults, kwdefaults, args, kwargs):
    """Bind trackers to ``code``'s parameters as a call would: returns ``{name: tracker}``.

    ``*args``/``**kwargs`` parameters become a TupleVariable/DictVariable; a wrong call raises
    Unsupported with Python's own TypeError message.
    """
    if not all(n.isidentifier() for n in code.co_varnames[: code.co_argcount]):
        # a 3.11 comprehension's implicit ``.0`` parameter (inspect cannot bind it by name)
        if kwargs or len(args) != code.co_argcount:
            raise Unsupported(f"calling {name}() with {len(args)} arguments")
        return dict(zip(code.co_varnames, args))
    cells = tuple(types.CellType() for _ in code.co_freevars) or None
    shape = types.FunctionType(code, {}, name, tuple(defaults) or None, cells)
    if kwdefaults:
        shape.__kwdefaults__ = dict(kwdefaults)
    try:
        bound = inspect.signature(shape).bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported(f"calling {name}(): {e}") from None
    bound.apply_defaults()
    result = {}
    for param in inspect.signature(shape).parameters.values():
        value = bound.arguments[param.name]
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            value = TupleVariable(list(value))
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            value = DictVariable(dict(value))
        result[param.name] = value
    return result


class _InlinableFunction(VariableTracker):
    """What inlining needs: code, globals, closure cells, defaults."""

    def python_type(self):
        return types.FunctionType

    def call(self, tx, args, kwargs):
        return tx.inline_call(self, args, kwargs)

    def bound_locals(self, tx, args, kwargs):
        defaults, kwdefaults = self.get_defaults(tx), self.get_kwdefaults(tx)
        return bind_arguments(self.get_code(), self.fn_name(), defaults, kwdefaults, args, kwargs)

    def getattr(self, tx, name):
        if name == "__name__":
            return ConstantVariable(self.fn_name())
        if name == "__get__":
            raise Unsupported("__get__ of a function while tracing")
        raise Unsupported(f"attribute {name!r} of function {self.fn_name()}")


class UserFunctionVariable(_InlinableFunction):
    """A Python function that exists outside the traced code (a global, an attribute, an argument)."""

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def describe(self):
        return f"function {self.fn.__qualname__}"

    def is_constant(self):
        return False

    def as_python(self, tx):
        return self.fn

    def get_code(self):
        return self.fn.__code__

    def fn_name(self):
        return self.fn.__name__

    def get_globals(self):
        return self.fn.__globals__

    def get_closure_cells(self, tx):
        if not self.fn.__closure__:
            return []
        cells = []
        closure_source = AttrSource(self.source, "__closure__") if self.source is not None else None
        for i, cell in enumerate(self.fn.__closure__):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell (a name bound later in the enclosing function)
                cells.append(CellVariable(None))
                continue
            source = AttrSource(GetItemSource(closure_source, i), "cell_contents") if closure_source else None
            cells.append(CellVariable(pending=(contents, source)))
        return cells

    # Defaults are read through the function (``fn.__defaults__[i]``) when it has a source: the values
    # used are guarded (an edit of ``fn.__kwdefaults__`` recompiles) and a mutable default the traced
    # code changes (``acc=[]`` appended to) is the real object, whose change is replayed.
    def get_defaults(self, tx):
        self._guard_attr_identity(tx, "__defaults__")
        return [tx.output.wrap(v, self._default_source("__defaults__", i))
                for i, v in enumerate(self.fn.__defaults__ or ())]

    def get_kwdefaults(self, tx):
        self._guard_attr_identity(tx, "__kwdefaults__")
        return {k: tx.output.wrap(v, self._default_source("__kwdefaults__", k))
                for k, v in (self.fn.__kwdefaults__ or {}).items()}

    def _default_source(self, table, key):
        return GetItemSource(AttrSource(self.source, table), key) if self.source is not None else None

    def _guard_attr_identity(self, tx, name):
        # one guard per inlined function: ``fn.__defaults__ = (...)`` after a capture recompiles
        value = getattr(self.fn, name)
        if value is not None and self.source is not None:
            tx.output.add_guard(AttrSource(self.source, name), GuardKind.ID_MATCH, value)

    def reconstruct(self, out):
        return FromSource(self.source) if self.source is not None else Constant(self.fn)


class NestedFunctionVariable(_InlinableFunction):
    """A function made by MAKE_FUNCTION inside the traced code (a closure, a lambda, a comprehension on 3.11)."""

    def __init__(self, code, f_globals, qualname, defaults=None, kwdefaults=None, closure=None, annotations=None):
        super().__init__()
        self.code = code
        self.f_globals = f_globals
        self.qualname = qualname
        self.defaults = defaults  # TupleVariable or None
        self.kwdefaults = kwdefaults  # DictVariable or None
        self.closure = closure  # TupleVariable of CellVariable or None
        self.annotations = annotations

    def describe(self):
        return f"function {self.qualname}"

    def get_code(self):
        return self.code

    def fn_name(self):
        return self.code.co_name

    def get_globals(self):
        return self.f_globals

    def get_closure_cells(self, tx):
        return list(self.closure.items) if self.closure is not None else []

    def get_defaults(self, tx):
        return list(self.defaults.items) if self.defaults is not None else []

    def get_kwdefaults(self, tx):
        return dict(self.kwdefaults.items) if self.kwdefaults is not None else {}

    def as_python(self, tx):
        """A real function over the examples, for an ember call that takes a callable (it then runs
        untraced inside that call, its ops recorded by the recording mode)."""
        cells = []
        for cell in self.get_closure_cells(tx):
            if cell.pending is None and cell.contents is None:
                cells.append(types.CellType())
            else:
                cells.append(types.CellType(cell.get(tx).as_python(tx)))
        defaults = tuple(d.as_python(tx) for d in self.get_defaults(tx)) or None
        fn = types.FunctionType(self.code, self.f_globals, self.code.co_name, defaults, tuple(cells) or None)
        if self.kwdefaults is not None:
            fn.__kwdefaults__ = {k: v.as_python(tx) for k, v in self.kwdefaults.items.items()}
        return fn

    def reconstruct(self, out):
        return BuildFunction(
            self.code,
            self.f_globals,
            self.code.co_name,
            BuildTuple(tuple(d.reconstruct(out) for d in self.defaults.items)) if self.defaults else None,
            self.kwdefaults.reconstruct(out) if self.kwdefaults else None,
            tuple(c.reconstruct(out) for c in self.closure.items) if self.closure else (),
        )


class UserMethodVariable(VariableTracker):
    """A function bound to an object (``obj.method``): calling it inlines the function with ``obj`` first."""

    def __init__(self, function, obj, source=None):
        super().__init__(source)
        self.function = function  # an _InlinableFunction (or another callable tracker)
        self.obj = obj

    def describe(self):
        return f"bound {self.function.describe()}"

    def python_type(self):
        return types.MethodType

    def call(self, tx, args, kwargs):
        owner = getattr(self.obj, "value", None)
        if getattr(getattr(self.function, "fn", None), "__name__", None) == "forward" and owner is not None:
            from .nn_module import _refuse_rnn

            _refuse_rnn(owner)  # ``lstm.forward`` reached as a bound method (a continuation's stack)
        return self.function.call(tx, [self.obj, *args], kwargs)

    def reconstruct(self, out):
        if self.source is not None:
            return FromSource(self.source)
        return BuildBoundMethod(self.function.reconstruct(out), self.obj.reconstruct(out))


class DisabledFunctionVariable(VariableTracker):
    """A function excluded with ``ember.compiler.disable``: calling it is a graph break."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def describe(self):
        return f"disabled function {getattr(self.value._orig_fn, '__qualname__', self.value)!r}"

    def call(self, tx, args, kwargs):
        raise Unsupported("call to a function disabled with ember.compiler.disable")

    def reconstruct(self, out):
        return FromSource(self.source) if self.source is not None else Constant(self.value)


class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)``: calling it calls ``fn`` with the stored arguments first."""

    def __init__(self, fn, args, kwargs, source=None):
        super().__init__(source)
        self.fn = fn
        self.args = list(args)
        self.kwargs = dict(kwargs)

    def describe(self):
        return f"partial of {self.fn.describe()}"

    def python_type(self):
        import functools

        return functools.partial

    def call(self, tx, args, kwargs):
        return self.fn.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def getattr(self, tx, name):
        from .containers import DictVariable, TupleVariable

        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable(self.kwargs)
        return super().getattr(tx, name)

    def reconstruct(self, out):
        import functools

        from ..reconstruct import BuildCall

        if self.source is not None:
            return FromSource(self.source)
        return BuildCall(
            Constant(functools.partial),
            (self.fn.reconstruct(out), *(a.reconstruct(out) for a in self.args)),
            tuple(self.kwargs),
            tuple(v.reconstruct(out) for v in self.kwargs.values()),
        )
