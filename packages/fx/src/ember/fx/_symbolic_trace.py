"""Symbolic tracing: run a module's ``forward`` on :class:`~ember.fx.Proxy` inputs and record a graph.

While :meth:`Tracer.trace` runs, ``ember.nn.Module.__call__`` and ``__getattr__`` are
patched so that calls of leaf modules become ``call_module`` nodes and parameters
become ``get_attr`` nodes; functions registered with :func:`wrap` (and the functions
of ``autowrap_modules``, :mod:`math` by default) are recorded as single calls. Every
patch is undone when tracing ends, even on error.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math

from .graph import Graph, _PyTreeCodeGen, _PyTreeInfo
from .graph_module import GraphModule
from .node import Node, map_aggregate
from .proxy import ParameterProxy, Proxy, TraceError, TracerBase

__all__ = ["Tracer", "symbolic_trace", "wrap", "PH"]


class _PH:
    """Marker for :func:`symbolic_trace`'s ``concrete_args``: this argument stays an input."""

    def __repr__(self):
        return "PH"


#: Use as a value of ``concrete_args`` to keep an argument symbolic.
PH = _PH()

_MISSING = object()

# (id(globals dict), name) -> globals dict, for the functions registered with wrap().
_wrapped_fns_to_patch = {}


def wrap(fn_or_name):
    """Record calls of a module-level function as single ``call_function`` nodes instead of tracing into it.

    Call it at the top level of the module that defines (or imports) the function,
    with the function or its name; it also works as a decorator. Use it for functions
    with control flow on their inputs, or that call ``len()`` on them.

    Example::

        def clamp_rows(x):
            return x if len(x) < 10 else x[:10]

        ember.fx.wrap("clamp_rows")

    Returns:
        ``fn_or_name`` unchanged.

    Raises:
        NotImplementedError: if called inside a function rather than at module level.
        TypeError: for a lambda or something that is neither a function nor a name.
    """
    if callable(fn_or_name):
        name = getattr(fn_or_name, "__name__", None)
        if name is None or name == "<lambda>":
            raise TypeError("ember.fx.wrap: a lambda cannot be wrapped; define the function with def")
    elif isinstance(fn_or_name, str):
        name = fn_or_name
    else:
        raise TypeError(f"ember.fx.wrap: expected a function or a function name, got {type(fn_or_name).__name__}")
    frame = inspect.currentframe().f_back
    if frame is None or frame.f_code.co_name != "<module>":
        raise NotImplementedError("ember.fx.wrap must be called at the top level of a module")
    f_globals = frame.f_globals
    _wrapped_fns_to_patch[(id(f_globals), name)] = f_globals
    return fn_or_name


def _find_proxy(args, kwargs):
    found = []

    def look(a):
        if isinstance(a, Proxy) and not found:
            found.append(a)
        return a

    map_aggregate(args, look)
    map_aggregate(kwargs, look)
    return found[0] if found else None


def _create_wrapped_func(orig_fn):
    @functools.wraps(orig_fn)
    def wrapped(*args, **kwargs):
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            return proxy.tracer.create_proxy("call_function", orig_fn, args, kwargs)
        return orig_fn(*args, **kwargs)

    wrapped.__fx_wrapped__ = orig_fn
    return wrapped


class _Patcher:
    """Records patches of dicts and classes and undoes them in reverse order."""

    def __init__(self):
        self._undo = []
        self._visited = set()

    def patch(self, namespace, name, new_value):
        self._undo.append((namespace, name, namespace.get(name, _MISSING)))
        namespace[name] = new_value

    def patch_method(self, cls, name, new_value):
        self._undo.append((cls, name, cls.__dict__.get(name, _MISSING)))
        setattr(cls, name, new_value)

    def visit_once(self, thing):
        """True the first time ``thing`` is seen."""
        key = id(thing)
        if key in self._visited:
            return False
        self._visited.add(key)
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        while self._undo:
            target, name, old = self._undo.pop()
            if isinstance(target, dict):
                if old is _MISSING:
                    target.pop(name, None)
                else:
                    target[name] = old
            elif old is _MISSING:
                delattr(target, name)
            else:
                setattr(target, name, old)
        return False


def _autowrap_check(patcher, fn_globals, function_ids):
    """Patch the globals of ``fn_globals`` that are autowrapped functions (``math.sqrt`` ...)."""
    if not patcher.visit_once(fn_globals):
        return
    for name, value in list(fn_globals.items()):
        if not name.startswith("_") and callable(value) and id(value) in function_ids:
            patcher.patch(fn_globals, name, _create_wrapped_func(value))


def _patch_wrapped_functions(patcher):
    for (_, name), f_globals in _wrapped_fns_to_patch.items():
        orig = f_globals.get(name, _MISSING)
        if orig is _MISSING:
            orig = getattr(builtins, name, _MISSING)
        if orig is _MISSING:
            raise NameError(f"ember.fx.wrap: {name!r} is not defined in the module that registered it")
        if getattr(orig, "__fx_wrapped__", None) is None:
            patcher.patch(f_globals, name, _create_wrapped_func(orig))


class Tracer(TracerBase):
    """Builds a :class:`~ember.fx.Graph` by running code on proxies (see :func:`symbolic_trace`).

    Subclass it to change what is traced into: :meth:`is_leaf_module` decides which
    modules stay single ``call_module`` nodes; :meth:`create_arg`, :meth:`call_module`
    and :meth:`getattr` are the other customisation points.

    Args:
        autowrap_modules (tuple of modules): their public functions are recorded as
            single calls wherever the traced code uses them by a global name (``math``).
        autowrap_functions (tuple of callables): functions recorded likewise.
        param_shapes_constant (bool): parameters' ``shape``/``size()``/``dim()`` give
            their real values instead of recording nodes.
    """

    #: Proxy buffers read as module attributes too. Off by default, as in PyTorch: then code
    #: computed from a buffer alone (``self.mask.sum()``) runs once while tracing and its
    #: result is stored as a constant; set it to True to record that code instead.
    proxy_buffer_attributes = False

    def __init__(self, autowrap_modules=(math,), autowrap_functions=(), param_shapes_constant=False):
        super().__init__()
        self._autowrap_function_ids = {
            id(value)
            for module in autowrap_modules
            for name, value in vars(module).items()
            if not name.startswith("_") and callable(value)
        }
        self._autowrap_function_ids.update(id(f) for f in autowrap_functions)
        # The modules themselves are patched too, so `math.sqrt(x)` is recorded like `sqrt(x)`.
        self._autowrap_search = list(autowrap_modules)
        self.param_shapes_constant = param_shapes_constant
        self.submodule_paths = None
        self.root = None
        self.tensor_attrs = {}

    # -- customisation points ----------------------------------------------------------------------

    def is_leaf_module(self, m, module_qualified_name):
        """Whether module ``m`` is recorded as one ``call_module`` node instead of traced into.

        By default ember's own layers (``ember.nn``; ``Sequential`` excepted) are leaves,
        user-defined modules are not.
        """
        import ember.nn as nn

        module_name = type(m).__module__ or ""
        return (module_name.startswith("ember.nn") or module_name.startswith("ember.ao.nn")) and not isinstance(
            m, nn.Sequential
        )

    def path_of_module(self, mod):
        """The qualified name of submodule ``mod`` in the root module.

        Raises:
            NameError: if ``mod`` is not a submodule of the root.
        """
        if self.submodule_paths is None:
            self.submodule_paths = {}
            for name, m in self.root.named_modules(remove_duplicate=False):
                self.submodule_paths.setdefault(id(m), name)
        path = self.submodule_paths.get(id(mod))
        if path is None:
            raise NameError(f"module {type(mod).__name__} is not installed as a submodule of the traced module")
        return path

    def call_module(self, m, forward, args, kwargs):
        """Handle a call of module ``m``: a ``call_module`` node for a leaf, else trace into ``forward``."""
        module_qualified_name = self.path_of_module(m)
        if not self.is_leaf_module(m, module_qualified_name):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", module_qualified_name, args, kwargs)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        """Handle a module attribute read during tracing.

        Parameters (and buffers, with :attr:`proxy_buffer_attributes`) become ``get_attr``
        proxies, so code computed from them is recorded rather than evaluated once.
        """
        import ember
        from ember.nn import Parameter

        if isinstance(attr_val, Parameter):
            members = self.root.named_parameters()
        elif self.proxy_buffer_attributes and isinstance(attr_val, ember.Tensor):
            members = self.root.named_buffers()
        else:
            return attr_val
        for name, value in members:
            if value is attr_val:
                if name not in parameter_proxy_cache:
                    if self.param_shapes_constant:
                        node = self.create_node("get_attr", name, (), {})
                        parameter_proxy_cache[name] = ParameterProxy(self, node, name, value)
                    else:
                        parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
                return parameter_proxy_cache[name]
        return attr_val

    def create_arg(self, a):
        """Like :meth:`TracerBase.create_arg`, plus: parameters and tensor attributes of the root
        become ``get_attr`` nodes, and other tensors are stored on the root as
        ``_tensor_constant<N>`` and read with ``get_attr``.

        Raises:
            NameError: for a parameter that is not one of the root's.
        """
        import ember
        from ember.nn import Module, Parameter

        if isinstance(a, Parameter):
            for name, param in self.root.named_parameters():
                if a is param:
                    return self.create_node("get_attr", name, (), {})
            raise NameError("parameter is not a member of this module")
        if isinstance(a, ember.Tensor):
            name = self.tensor_attrs.get(id(a))
            if name is None:
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                name = f"_tensor_constant{i}"
                setattr(self.root, name, a)
                self.tensor_attrs[id(a)] = name
            return self.create_node("get_attr", name, (), {})
        if isinstance(a, Module):
            raise NotImplementedError(
                f"a module ({type(a).__name__}) cannot be an argument in a graph; call it instead of passing it"
            )
        return super().create_arg(a)

    # -- tracing -----------------------------------------------------------------------------------

    def _collect_tensor_attrs(self, module, prefix):
        for name, value in vars(module).items():
            if isinstance(value, _tensor_type()):
                self.tensor_attrs.setdefault(id(value), f"{prefix}{name}")
        for name, buf in module._buffers.items():
            if buf is not None:
                self.tensor_attrs.setdefault(id(buf), f"{prefix}{name}")
        for name, param in module._parameters.items():
            if param is not None:
                self.tensor_attrs.setdefault(id(param), f"{prefix}{name}")
        for name, child in module._modules.items():
            if child is not None:
                self._collect_tensor_attrs(child, f"{prefix}{name}.")

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        """Placeholders for ``root_fn``'s parameters; returns ``(args, kwargs)`` to call it with.

        Raises:
            TraceError: for ``*args``/``**kwargs`` parameters or unknown names in ``concrete_args``.
        """
        params = list(inspect.signature(root_fn).parameters.values())
        if is_module:
            params = params[1:]
        names = [p.name for p in params]
        if concrete_args is None:
            concrete_args = {}
        elif isinstance(concrete_args, (tuple, list)):
            concrete_args = dict(zip(names, concrete_args))
        unknown = set(concrete_args) - set(names)
        if unknown:
            raise TraceError(f"concrete_args names {sorted(unknown)} are not parameters of {root_fn.__qualname__}")
        args, kwargs = [], {}
        structured = []  # per parameter: what the in_spec sees (placeholder proxies in its structure)
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError(
                    f"cannot trace {root_fn.__qualname__}: its parameter {'*' * (p.kind == p.VAR_POSITIONAL)}"
                    f"{'**' * (p.kind == p.VAR_KEYWORD)}{p.name} has no fixed arity; give it explicit parameters"
                )
            if p.name in concrete_args and concrete_args[p.name] is not PH:
                value = concrete_args[p.name]
                if _contains_ph(value):
                    # A structure with symbolic leaves: one placeholder per leaf (PyTorch's pytree
                    # inputs); the PH leaves are traced, the others stay fixed to their value.
                    value, leaves = self._placeholder_leaves(p.name, value)
                    structured.append(leaves)
                else:
                    structured.append(self.create_node("placeholder", p.name, (value,), {}))
            else:
                default = () if p.default is inspect.Parameter.empty else (p.default,)
                annotation = None if p.annotation is inspect.Parameter.empty else p.annotation
                value = self.create_proxy("placeholder", p.name, default, {}, type_expr=annotation)
                structured.append(value)
            if p.kind is p.KEYWORD_ONLY:
                kwargs[p.name] = value
            else:
                args.append(value)
        self._pytree_inputs = None
        if any(not isinstance(v, (Proxy, Node)) for v in structured):
            from ember.utils._pytree import tree_structure

            in_spec = tree_structure(tuple(structured))
            self._pytree_inputs = _PyTreeInfo([p.name for p in params], in_spec, None)
        return args, kwargs

    def _placeholder_leaves(self, name, value):
        """``value`` with each PH leaf a new placeholder proxy, and the structure of all the placeholders."""
        from ember.utils._pytree import tree_flatten, tree_unflatten

        leaves, spec = tree_flatten(value, is_leaf=lambda x: x is PH)
        # The parameter's own name must stay free: forward(self, <name>) takes the structure.
        self.graph._namespace.mark_used(name)
        traced, nodes = [], []
        for i, leaf in enumerate(leaves):
            proxy = self.create_proxy("placeholder", f"{name}_{i + 1}", (), {})
            nodes.append(proxy)
            traced.append(proxy if leaf is PH else leaf)
        return tree_unflatten(traced, spec), tree_unflatten(nodes, spec)

    def trace(self, root, concrete_args=None):
        """Trace ``root`` (a module or a function) into a graph.

        Args:
            root (ember.nn.Module or callable): what to trace.
            concrete_args (dict or None): inputs to fix to a value (the code is specialised to
                it: Python control flow on it is allowed); :data:`PH` keeps one symbolic. A
                structured value (nested dicts, tuples, lists: ``{"x": PH, "flag": True}``) gets
                one placeholder per leaf: the PH leaves are traced, the others fixed to their
                value. The generated ``forward`` then takes the same structures (it picks the
                leaves out along the recorded ``in_spec``) and returns the traced function's
                structure (``out_spec``), as PyTorch's pytree code generation does.

        Returns:
            Graph: the recorded graph. ``self.root`` is the module its names refer to.

        Raises:
            TraceError: when the code needs a concrete value from a traced one (see :class:`TraceError`).
        """
        from ember.nn import Module

        if isinstance(root, Module):
            self.root = root
            fn = type(root).forward
            bound_self = [root]
        else:
            self.root = Module()
            fn = root
            bound_self = []
        self.graph = Graph(tracer_cls=type(self))
        self._pytree_inputs = None
        self.tensor_attrs = {}
        self.submodule_paths = None
        self._collect_tensor_attrs(self.root, "")
        fn_globals = getattr(inspect.unwrap(fn), "__globals__", {})
        parameter_proxy_cache = {}
        tracer = self

        orig_getattr = Module.__getattr__
        orig_call = Module.__call__

        def module_getattr_wrapper(mod, attr):
            return tracer.getattr(attr, orig_getattr(mod, attr), parameter_proxy_cache)

        def module_call_wrapper(mod, *args, **kwargs):
            def forward(*args, **kwargs):
                return orig_call(mod, *args, **kwargs)

            forward_fn = getattr(type(mod), "forward", None)
            _autowrap_check(patcher, getattr(forward_fn, "__globals__", {}), tracer._autowrap_function_ids)
            return tracer.call_module(mod, forward, args, kwargs)

        try:
            with _Patcher() as patcher:
                args, kwargs = self.create_args_for_root(fn, bool(bound_self), concrete_args)
                patcher.patch_method(Module, "__getattr__", module_getattr_wrapper)
                patcher.patch_method(Module, "__call__", module_call_wrapper)
                _patch_wrapped_functions(patcher)
                _autowrap_check(patcher, fn_globals, self._autowrap_function_ids)
                for module in self._autowrap_search:
                    _autowrap_check(patcher, module.__dict__, self._autowrap_function_ids)
                result = fn(*bound_self, *args, **kwargs)
                return_type = getattr(fn, "__annotations__", {}).get("return")
                if self._pytree_inputs is not None:
                    from ember.utils._pytree import tree_flatten

                    result, out_spec = tree_flatten(result)
                    self.graph.set_codegen(_PyTreeCodeGen(self._pytree_inputs._replace(out_spec=out_spec)))
                self.create_node("output", "output", (self.create_arg(result),), {}, type_expr=return_type)
        finally:
            self.submodule_paths = None
        return self.graph


def _contains_ph(value):
    found = []
    map_aggregate(value, lambda v: found.append(v is PH))
    return any(found)


def _tensor_type():
    import ember

    return ember.Tensor


def symbolic_trace(root, concrete_args=None):
    """Trace a module or function into a :class:`~ember.fx.GraphModule`.

    The code runs once on :class:`~ember.fx.Proxy` inputs; every ember op, method call,
    operator and leaf-module call it makes is recorded. Python control flow on values
    that do not depend on the inputs runs normally (and is specialised away).

    Args:
        root (ember.nn.Module or callable): what to trace.
        concrete_args (dict or None): arguments fixed to values (e.g. a flag), see :meth:`Tracer.trace`.

    Returns:
        GraphModule: a module with the same parameters whose ``forward`` is generated from the graph.

    Raises:
        TraceError: when the code needs a concrete value from a traced one (control flow,
            ``len``, iteration); the message explains how to make it traceable.

    Example:
        >>> import ember
        >>> from ember.fx import symbolic_trace
        >>> gm = symbolic_trace(ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU()))
        >>> print(gm.code.strip())
        def forward(self, input):
            input_1 = input
            _0 = getattr(self, '0')(input_1)
            _1 = getattr(self, '1')(_0)
            return _1
    """
    from ember.nn import Module

    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else getattr(root, "__name__", "GraphModule")
    return GraphModule(tracer.root, graph, name)
