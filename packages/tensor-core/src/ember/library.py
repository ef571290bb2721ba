"""User-defined operators (PyTorch's ``torch.library``): entries of ember's op registry.

A custom op is an :class:`~ember._ops.Op` like the built-in ones, named ``"namespace::name"``. Its
kernels are the user's Python functions (one per device type, or one for all), its meta function runs
the registered *fake* implementation on meta tensors, and with ember-autograd installed its backward
is an entry of the derivative table built from :func:`register_autograd`'s ``setup_context`` and
``backward``. So a custom op works on every device it has a kernel for, on meta tensors (shape
inference, FX), under autograd, and under dispatch modes (``make_fx`` records it as one node).

Example::

    import numpy as np
    import ember
    from ember import Tensor

    @ember.library.custom_op("mylib::numpy_sin", mutates_args=())
    def numpy_sin(x: Tensor) -> Tensor:
        return ember.from_numpy(np.sin(x.numpy()))

    @numpy_sin.register_fake
    def _(x):
        return ember.empty_like(x)

    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos()

    numpy_sin.register_autograd(backward, setup_context=setup_context)
    ember.ops.mylib.numpy_sin(ember.randn(3))  # the same op
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing

from ._ops import _registry
from ._ops._registry import Op, registry
from ._tensor import Tensor

__all__ = [
    "CustomOpDef", "Library", "custom_op", "define", "impl", "register_autograd", "register_fake",
    "register_kernel",
]

#: Every custom op by its qualified name ("mylib::foo").
_CUSTOM_OPS: dict[str, CustomOpDef] = {}

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ALL_DEVICES = None  # a kernel registered for device_types=None serves every device type
_DISPATCH_KEYS = {"cpu": "cpu", "cuda": "cuda", "meta": "meta"}
_COMPOSITE_KEYS = ("", "compositeexplicitautograd", "compositeimplicitautograd", "default")


def _split_name(qualname):
    """``"ns::name"`` -> ``("ns", "name")``.

    Raises:
        ValueError: without a namespace, or when either part is not an identifier.
    """
    if not isinstance(qualname, str) or "::" not in qualname:
        raise ValueError(
            f"Expected there to be a namespace in {qualname}, i.e. The operator name should look something like "
            "ns::foo"
        )
    namespace, name = qualname.split("::", 1)
    if not _NAME.match(namespace) or not _NAME.match(name):
        raise ValueError(f"The namespace and name of a custom op must be identifiers, got {qualname!r}")
    return namespace, name


# -- which parameters take tensors ---------------------------------------------------------------------------


def _is_tensor_annotation(annotation):
    """Whether a parameter annotation (an object or a string) holds tensors: Tensor, Optional[Tensor], list[Tensor]."""
    if annotation is Tensor:
        return True
    if isinstance(annotation, str):
        return re.search(r"\bTensor\b", annotation) is not None
    return any(_is_tensor_annotation(a) for a in typing.get_args(annotation))


def _infer_tensor_parameters(fn, signature):
    """The names of ``fn``'s tensor parameters, from its annotations (required, as PyTorch's infer_schema)."""
    names = []
    for parameter in signature.parameters.values():
        if parameter.annotation is inspect.Parameter.empty:
            raise ValueError(
                f"infer_schema(func): Parameter {parameter.name} must have a type annotation. "
                f"Got func with signature {signature})"
            )
        if _is_tensor_annotation(parameter.annotation):
            names.append(parameter.name)
    return tuple(names)


# -- schema strings (Library.define) --------------------------------------------------------------------------

_DEFAULTS = {"True": True, "False": False, "None": None}


def _parse_default(text):
    text = text.strip()
    if text in _DEFAULTS:
        return _DEFAULTS[text]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip("\"'")


def _parse_schema(schema):
    """``"foo(Tensor x, int n=2, *, float s=1.0) -> Tensor"`` -> ``(name, Signature, tensor names, mutated names)``.

    Raises:
        ValueError: if the schema does not read as ``name(arguments) -> returns``.
    """
    match = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\((.*)\)\s*->\s*(.+?)\s*$", schema)
    if match is None:
        raise ValueError(f"Could not parse the schema {schema!r}: expected 'name(arguments) -> returns'")
    name, arguments, _ = match.groups()
    parameters, tensors, mutated = [], [], []
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    for item in (a.strip() for a in arguments.split(",")):
        if not item:
            continue
        if item == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        declaration, _, default = item.partition("=")
        parts = declaration.split()
        if len(parts) != 2:
            raise ValueError(f"Could not parse the argument {item!r} of the schema {schema!r}")
        type_text, arg_name = parts
        if "Tensor" in type_text:
            tensors.append(arg_name)
        if "!" in type_text:
            mutated.append(arg_name)
        value = _parse_default(default) if default else inspect.Parameter.empty
        parameters.append(inspect.Parameter(arg_name, kind, default=value))
    return name, inspect.Signature(parameters), tuple(tensors), tuple(mutated)


# -- the op ----------------------------------------------------------------------------------------------------


class _Context:
    """The ``ctx`` of :func:`register_autograd`'s ``setup_context`` and ``backward``."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


class CustomOpDef:
    """A custom op made by :func:`custom_op` or :meth:`Library.define` (PyTorch's ``CustomOpDef``).

    Calling it calls the registry op (:attr:`op`), through the dispatcher.

    Attributes:
        name (str): the qualified name, ``"namespace::name"``.
        op (ember._ops.Op): the registry entry.
        tensor_parameters (tuple[str]): the parameters that take tensors.
        mutates_args (tuple[str] or "unknown"): the parameters whose tensors the kernels write into.
    """

    def __init__(self, qualname, signature, tensor_parameters, mutates_args, returns_nothing, doc=None):
        self.name = qualname
        self._namespace, self._opname = _split_name(qualname)
        self._signature = signature
        self.tensor_parameters = tensor_parameters
        self.mutates_args = mutates_args
        self._fake = None
        self._kernels = {}  # device type (or None: every device) -> the user's function
        self._autograd = None
        self.op = self._make_op(returns_nothing, doc)
        _register_missing_autograd(self)

    def __repr__(self):
        return f"<CustomOpDef({self.name})>"

    def __call__(self, *args, **kwargs):
        return self.op(*args, **kwargs)

    # -- the registry entry

    def _make_op(self, returns_nothing, doc):
        definition = self

        def meta(*args, **kwargs):
            return definition._run_fake(args, kwargs)

        meta.__signature__ = self._signature
        meta.__name__ = meta.__qualname__ = self._opname
        meta.__doc__ = doc
        op = Op(self.name, meta, kind="other" if returns_nothing else "function", doc=doc, tags=("custom",))
        _forget_op(self.name)  # a redefinition replaces the op, as torch.library does: drop the old one's entries
        registry[self.name] = op
        return op

    def _run_fake(self, args, kwargs):
        """The meta function: the fake implementation on meta tensors; nothing to check for other devices."""
        if not _holds_meta_tensor(args, kwargs):
            return None
        if self._fake is None:
            raise RuntimeError(
                f"There was no fake impl registered for {self!r}. This is necessary for ember.compile/export/fx "
                f"tracing to work. Please use `{self._opname}.register_fake` to add an fake impl."
            )
        return _arrays_of(self._fake(*args, **kwargs))

    def _kernel_for(self, device_type):
        def kernel(*args, **kwargs):
            fn = self._kernels.get(device_type) or self._kernels.get(_ALL_DEVICES)
            from ._grad_mode import no_grad

            with no_grad():  # the user's kernel runs below autograd, on tensors that do not require grad
                result = fn(*_detached(args), **{k: _detached_value(v) for k, v in kwargs.items()})
            self._bump_mutated(args, kwargs)
            if self.op.kind == "other":
                return result
            return _arrays_of(result)

        return kernel

    def _bump_mutated(self, args, kwargs):
        if not self.mutates_args or self.mutates_args == "unknown":
            return
        bound = self._signature.bind(*args, **kwargs)
        for name in self.mutates_args:
            value = bound.arguments.get(name)
            for t in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(t, Tensor):
                    t._bump_version()

    def _set_kernel(self, device_types, fn):
        types = (device_types,) if device_types is None or isinstance(device_types, str) else tuple(device_types)
        for device_type in types:
            self._kernels[device_type] = fn
            targets = ("cpu", "cuda") if device_type is None else (device_type,)
            for target in targets:
                if target != "meta":
                    self.op.kernels[target] = self._kernel_for(target)

    # -- PyTorch's CustomOpDef methods

    def register_kernel(self, device_types, fn=None):
        """Register ``fn`` as the kernel for ``device_types`` ("cpu", "cuda", a list, or None for every device);
        usable as a decorator."""

        def add(f):
            self._set_kernel(device_types, f)
            return f

        return add if fn is None else add(fn)

    def register_fake(self, fn=None):
        """Register the fake (meta) implementation: it gets meta tensors and returns new ones of the outputs'
        shapes and dtypes (``ember.empty_like(x)``); usable as a decorator."""

        def add(f):
            self._fake = f
            return f

        return add if fn is None else add(fn)

    def register_autograd(self, backward, *, setup_context=None):
        """Register the backward: ``setup_context(ctx, inputs, output)`` saves what ``backward(ctx, *grads)``
        needs; ``backward`` returns one gradient (or None) per input of the op."""
        self._autograd = (backward, setup_context)
        _register_autograd_entry(self)


def _holds_meta_tensor(args, kwargs):
    for value in (*args, *kwargs.values()):
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(t, Tensor) and t.device.type == "meta":
                return True
    return False


def _detached_value(value):
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, (list, tuple)):
        return type(value)(_detached_value(v) for v in value)
    return value


def _detached(args):
    return tuple(_detached_value(a) for a in args)


def _arrays_of(result):
    """A kernel's or fake's tensors as the backend arrays the dispatcher wraps.

    Raises:
        RuntimeError: if the function returned something other than tensors.
    """
    if isinstance(result, Tensor):
        return result._data
    if isinstance(result, (tuple, list)) and all(isinstance(r, Tensor) for r in result):
        return tuple(r._data for r in result)
    raise RuntimeError(
        f"a custom op's implementation must return a Tensor or a tuple of Tensors, got {type(result).__name__}"
    )


# -- autograd --------------------------------------------------------------------------------------------------


def _table():
    """ember-autograd's derivative table, or None when ember-autograd is not installed."""
    try:
        return importlib.import_module("ember.autograd._table")
    except ImportError:
        return None


def _formula(definition, body):
    """The derivative table's formula for the op's tensor parameters, reading every argument and the outputs.

    One tensor parameter: a plain formula returning its gradient; several: a joint one returning a tuple
    (and reading ``output_mask``). ``body(grads, results, output_mask, values)`` returns the tuple.
    """
    parameters = list(definition._signature.parameters)
    count = len(definition.tensor_parameters)
    if count == 1:

        def formula(grads, results, *values):
            return body(grads, results, (True,), dict(zip(parameters, values)))[0]

        names = ["grads", "results", *parameters]
    else:

        def formula(grads, results, output_mask, *values):
            return body(grads, results, output_mask, dict(zip(parameters, values)))

        names = ["grads", "results", "output_mask", *parameters]
    formula.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    )
    return formula


def _forget_derivative(table, op):
    """Drop ``op``'s table entry and the recorder the dispatcher cached from it (a new one replaces them)."""
    from ._ops._dispatch import autograd_recorders

    table.DERIVATIVES.pop(op, None)
    autograd_recorders.pop(op, None)


def _install(definition, body):
    table = _table()
    if table is None or not definition.tensor_parameters:
        return
    op = definition.op
    _forget_derivative(table, op)
    formula = _formula(definition, body)
    if len(definition.tensor_parameters) == 1:
        table.derivative(op.name, **{definition.tensor_parameters[0]: formula})
    else:
        table.derivative(op.name, joint={definition.tensor_parameters: formula})


def _register_missing_autograd(definition):
    """Until register_autograd: a backward that raises PyTorch's RuntimeError."""

    def body(grads, results, output_mask, values):
        raise RuntimeError(
            f"Trying to backward through {definition._namespace}.{definition._opname}.default but no autograd "
            "formula was registered. Please use register_autograd to add one."
        )

    _install(definition, body)


def _register_autograd_entry(definition):
    backward, setup_context = definition._autograd
    parameters = list(definition._signature.parameters)

    def body(grads, results, output_mask, values):
        mask = dict(zip(definition.tensor_parameters, output_mask))
        ctx = _Context(tuple(mask.get(name, False) for name in parameters))
        inputs = tuple(values[name] for name in parameters)
        output = results[0] if len(results) == 1 else tuple(results)
        if setup_context is not None:
            setup_context(ctx=ctx, inputs=inputs, output=output)
        gradients = backward(ctx, *grads)
        if not isinstance(gradients, (tuple, list)):
            gradients = (gradients,)
        if len(gradients) != len(parameters):
            raise RuntimeError(
                f"{definition.name}: backward returned {len(gradients)} gradients, expected {len(parameters)} "
                "(one per input, None for the inputs without one)"
            )
        by_name = dict(zip(parameters, gradients))
        return tuple(by_name[name] if mask[name] else None for name in definition.tensor_parameters)

    _install(definition, body)


def _delete_op(qualname):
    """Remove custom op ``qualname`` from the registry, ``ember.ops`` and the derivative table (tests use it: a
    registry-wide test must not meet the ops another test defined)."""
    definition = _CUSTOM_OPS.pop(qualname, None)
    op = registry.get(qualname)
    if op is None or (definition is not None and definition.op is not op):
        return
    _forget_op(qualname)


def _forget_op(qualname):
    """Drop the registry's op ``qualname`` (if any) and its entries in ember-autograd's tables."""
    op = registry.pop(qualname, None)
    table = _table()
    if op is not None and table is not None:
        _forget_derivative(table, op)
        table.THROUGH_DECOMPOSITION.discard(op)
        table.NONDIFFERENTIABLE.discard(op)


# -- the public functions --------------------------------------------------------------------------------------


def _resolve(op):
    """A CustomOpDef from itself or its qualified name."""
    if isinstance(op, CustomOpDef):
        return op
    if isinstance(op, Op) and op.name in _CUSTOM_OPS:
        return _CUSTOM_OPS[op.name]
    if isinstance(op, str):
        _split_name(op)
        if op in _CUSTOM_OPS:
            return _CUSTOM_OPS[op]
        raise ValueError(f"no custom op named {op!r}: define it with ember.library.custom_op or Library.define")
    raise TypeError(f"expected a custom op or its 'namespace::name', got {type(op).__name__}")


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Wrap ``fn`` into a custom op named ``name`` (``"namespace::name"``); usable as a decorator.

    Args:
        name (str): the qualified name.
        fn (callable): the implementation, with annotated parameters (``Tensor``, ``int``, ``float``...):
            the annotations say which parameters take tensors.
        mutates_args (Iterable[str] or "unknown"): the parameters whose tensors ``fn`` writes into.
        device_types (str or Sequence[str], optional): the device types ``fn`` serves (default: all).
        schema (str, optional): a schema string (``"(Tensor x, int n) -> Tensor"``) instead of the annotations.

    Returns:
        CustomOpDef: callable like ``fn``; ``ember.ops.<namespace>.<name>`` is the same op.

    Raises:
        ValueError: for a name without a namespace, missing annotations, or ``mutates_args`` naming
            no parameter.
    """

    def wrap(f):
        namespace, opname = _split_name(name)
        signature = inspect.signature(f)
        if schema is not None:
            _, signature, tensors, _ = _parse_schema(f"{opname}{schema}")
        else:
            tensors = _infer_tensor_parameters(f, signature)
        if isinstance(mutates_args, str):
            if mutates_args != "unknown":
                raise ValueError(f"mutates_args must be an iterable of names or 'unknown', got {mutates_args!r}")
            mutated = "unknown"
        else:
            mutated = tuple(mutates_args)
            missing = set(mutated).difference(signature.parameters)
            if missing:
                raise ValueError(
                    f"infer_schema(func): {missing} in mutates_args were not found in the custom op's signature. "
                    "mutates_args should contain the names of all args that the custom op mutates, or just the "
                    f"string 'unknown' if you don't know. Got func with signature {signature})"
                )
        returns = signature.return_annotation
        returns_nothing = returns is None or returns == "None"
        definition = CustomOpDef(name, signature, tensors, mutated, returns_nothing, doc=f.__doc__)
        definition._set_kernel(device_types, f)
        _CUSTOM_OPS[name] = definition
        return definition

    return wrap if fn is None else wrap(fn)


def register_fake(op, fn=None, /):
    """Register the fake implementation of custom op ``op`` (a CustomOpDef or its name); usable as a decorator."""
    return _resolve(op).register_fake(fn)


def register_kernel(op, device_types, fn=None, /):
    """Register ``fn`` as the kernel of custom op ``op`` for ``device_types``; usable as a decorator."""
    return _resolve(op).register_kernel(device_types, fn)


def register_autograd(op, backward, /, *, setup_context=None):
    """Register the backward of custom op ``op`` (see :meth:`CustomOpDef.register_autograd`)."""
    _resolve(op).register_autograd(backward, setup_context=setup_context)


class Library:
    """A namespace of operators to define or implement (PyTorch's ``torch.library.Library``).

    Args:
        ns (str): the namespace.
        kind (str): ``"DEF"`` (define new ops), ``"IMPL"`` (implement existing ones) or ``"FRAGMENT"`` (both).

    Raises:
        ValueError: for another ``kind`` or a namespace that is not an identifier.
    """

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError(f"Unsupported kind: {kind}")
        if not _NAME.match(ns):
            raise ValueError(f"The namespace must be an identifier, got {ns!r}")
        self.ns = ns
        self.kind = kind
        self.dispatch_key = dispatch_key
        self._defined = set()

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})"

    def _destroy(self):
        """Remove the ops this library defined (PyTorch's private ``Library._destroy``)."""
        for qualname in list(_CUSTOM_OPS):
            if qualname.startswith(f"{self.ns}::") and qualname in self._defined:
                _delete_op(qualname)
        self._defined.clear()

    def define(self, schema, alias_analysis="", *, tags=()):
        """Define an op from a schema string ``"name(Tensor x, int n=2) -> Tensor"``; returns its name.

        Raises:
            RuntimeError: in an ``"IMPL"`` library.
            ValueError: if the schema cannot be parsed.
        """
        if self.kind == "IMPL":
            raise RuntimeError("define() is not allowed in a Library of kind 'IMPL'")
        name, signature, tensors, mutated = _parse_schema(schema)
        returns = schema.rsplit("->", 1)[1].strip()
        qualname = f"{self.ns}::{name}"
        _CUSTOM_OPS[qualname] = CustomOpDef(qualname, signature, tensors, mutated, returns == "()")
        self._defined.add(qualname)
        return name

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False):
        """Implement op ``op_name`` (of this namespace, or ``"ns::name"``) for ``dispatch_key``: ``"CPU"``,
        ``"CUDA"``, ``"Meta"`` (the fake), or ``""``/``"CompositeExplicitAutograd"`` (every device).
        ``"CompositeImplicitAutograd"`` and ``"Autograd"`` make ``fn`` the op's decomposition, differentiated
        through the ember ops (or autograd Functions) it calls.

        Raises:
            ValueError: for an unknown op or dispatch key.
        """
        qualname = op_name if "::" in op_name else f"{self.ns}::{op_name}"
        definition = _resolve(qualname)
        key = (dispatch_key or self.dispatch_key).lower()
        if key == "meta":
            definition.register_fake(fn)
        elif key in ("compositeimplicitautograd", "autograd"):
            definition.op.decomposition = fn
            definition.op.category = _registry.COMPOSITE
            table = _table()
            if table is not None:
                _forget_derivative(table, definition.op)
        elif key in _DISPATCH_KEYS:
            definition.register_kernel(_DISPATCH_KEYS[key], fn)
        elif key in _COMPOSITE_KEYS:
            definition.register_kernel(None, fn)
        else:
            raise ValueError(f"unsupported dispatch key {dispatch_key!r} for {qualname}")


def define(qualname, schema, *, lib=None, tags=()):
    """Define op ``qualname`` (``"ns::name"``) with ``schema`` (``"(Tensor x) -> Tensor"``)."""
    namespace, name = _split_name(qualname)
    Library(namespace, "FRAGMENT").define(f"{name}{schema}", tags=tags)
    return _CUSTOM_OPS[qualname]


def impl(qualname, types, func=None, *, lib=None):
    """Register ``func`` as the kernel of ``qualname`` for device ``types`` ("cpu", "cuda", a list or
    "default"); usable as a decorator."""

    def add(f):
        definition = _resolve(qualname)
        for t in (types,) if isinstance(types, str) else tuple(types):
            if t.lower() == "meta":
                definition.register_fake(f)
            else:
                definition.register_kernel(None if t.lower() in _COMPOSITE_KEYS else t.lower(), f)
        return f

    return add if func is None else add(func)
