"""``Proxy``: the stand-in value that records operations into a graph while tracing.

A proxy wraps a :class:`~ember.fx.Node`. Whatever the traced code does with it
becomes a new node:

* ember ops (``ember.relu(p)``, ``F.linear(p, w)``) reach :meth:`Proxy.__ember_function__`
  (ember's ``__torch_function__``) and become ``call_function`` nodes of the op;
* Python operators (``p + 1``, ``p[0]``, ``p @ w``) become ``call_function`` nodes of
  :mod:`operator` functions;
* attributes (``p.shape``) become ``getattr`` calls, and method calls (``p.view(2, 3)``)
  become ``call_method`` nodes.

What a proxy cannot do is give Python a concrete value: ``bool(p)``, ``len(p)``,
``for v in p`` and using it as an index raise :class:`TraceError`, which explains how to
make the code traceable.
"""

from __future__ import annotations

import dis
import inspect
import operator
import traceback

from .graph import Graph
from .node import Node, map_aggregate

__all__ = ["Proxy", "Attribute", "ParameterProxy", "TraceError", "TracerBase", "GraphAppendingTracer"]


class TraceError(ValueError):
    """Traced code needed a concrete value that a :class:`Proxy` cannot provide."""


_HOW_TO_FIX = (
    "To trace this code: pass the value as a concrete argument "
    "(symbolic_trace(module, concrete_args={...})), move the code into a function marked "
    "with ember.fx.wrap (it is then recorded as one call without being traced into), or make "
    "the module that contains it a leaf (override Tracer.is_leaf_module)."
)


class TracerBase:
    """What a :class:`Proxy` needs from the tracer: creating nodes and proxies in :attr:`graph`.

    Attributes:
        graph (Graph): the graph being built.
        record_stack_traces (bool): store the user's stack in each node's ``meta["stack_trace"]``.
    """

    graph: Graph
    record_stack_traces = False

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        """Create a node in :attr:`graph` (override to attach metadata to every node)."""
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node):
        """Wrap ``node`` in a :class:`Proxy`."""
        return Proxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        """Create a node from arguments that may hold proxies, and return a proxy of it.

        Args:
            kind (str): the opcode.
            target: the target.
            args (tuple): positional arguments; proxies and other values are converted
                with :meth:`create_arg`.
            kwargs (dict): keyword arguments, likewise.
            name (str or None): a name hint.
            proxy_factory_fn (callable or None): ``node -> Proxy`` to build the proxy.
        """
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        if self.record_stack_traces and not node.stack_trace:
            node.stack_trace = "".join(traceback.format_list(_user_frames()))
        return proxy_factory_fn(node) if proxy_factory_fn is not None else self.proxy(node)

    def create_arg(self, a):
        """Turn a value into something a node can hold: proxies become their nodes.

        Raises:
            NotImplementedError: for a value that cannot appear in a graph.
        """
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, Node):
            return a
        if isinstance(a, tuple):
            items = [self.create_arg(e) for e in a]
            return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
        if isinstance(a, list):
            return [self.create_arg(e) for e in a]
        if isinstance(a, dict):
            out = {}
            for k, v in a.items():
                if isinstance(k, (Proxy, Node)):
                    raise NotImplementedError(f"Keys of a dict argument cannot be traced values (got {k})")
                out[k] = self.create_arg(v)
            return out
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if a is None or a is Ellipsis or isinstance(a, (bool, int, float, complex, str, bytes)):
            return a
        if _is_plain_constant(a):
            return a
        raise NotImplementedError(f"argument of type {type(a).__name__} cannot be put into a graph: {a!r}")

    def to_bool(self, obj):
        """Called for ``bool(proxy)``: raises :class:`TraceError` (override to decide a value)."""
        raise TraceError(
            f"symbolically traced variables cannot be used as inputs to control flow: bool() was called on "
            f"{obj} (an `if`, `while`, `and`/`or`/`not` or `assert` on a traced value). {_HOW_TO_FIX}"
        )

    def iter(self, obj):
        """Called for ``iter(proxy)`` where the number of items is unknown: raises :class:`TraceError`."""
        raise TraceError(
            f"Proxy object cannot be iterated: {obj} (a `for` loop or `*` unpacking over a traced value, whose "
            f"length is unknown while tracing). Unpack a fixed number of items (a, b = x), index it (x[0]) "
            f"or split it with an op (x.unbind(0)). {_HOW_TO_FIX}"
        )

    def keys(self, obj):
        """Called for ``**proxy``: records ``obj.keys()``."""
        return Attribute(obj, "keys")()


def _is_plain_constant(a):
    import ember

    return isinstance(a, (ember.dtype, ember.device, type)) or callable(a)


def _user_frames():
    """The stack frames outside ember.fx (the user's code) for ``stack_trace``."""
    frames = traceback.extract_stack()
    return [f for f in frames if "/ember/fx/" not in f.filename.replace("\\", "/")][-8:]


class GraphAppendingTracer(TracerBase):
    """A tracer that appends to an existing graph (build nodes with proxies outside of tracing)."""

    def __init__(self, graph):
        super().__init__()
        self.graph = graph


class Proxy:
    """A value being traced: it stands for the output of :attr:`node`.

    Args:
        node (ember.fx.Node): the node it stands for.
        tracer (TracerBase or None): where new nodes go (default: appends to ``node.graph``).
    """

    def __init__(self, node, tracer=None):
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, k):
        # Only reached for names Proxy does not define: an attribute of the traced value.
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return Attribute(self, k)

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self, *args), kwargs)

    def __iter__(self):
        frame = inspect.currentframe().f_back
        count = _unpack_count(frame)
        if count is not None:
            return (self[i] for i in range(count))
        return self.tracer.iter(self)

    def __bool__(self):
        return self.tracer.to_bool(self)

    def __len__(self):
        raise RuntimeError(
            f"'len' is not supported in symbolic tracing by default: len() was called on {self}, whose length "
            f"is unknown while tracing. Use x.shape[0] or x.size(0) instead (recorded in the graph), or "
            f"mark the function that calls len() with ember.fx.wrap. {_HOW_TO_FIX}"
        )

    def __index__(self):
        raise TraceError(
            f"{self} was used as a Python index or size (int needed); its value is unknown while tracing. {_HOW_TO_FIX}"
        )

    def __hash__(self):
        return id(self)

    def __setitem__(self, key, value):
        # In-place write: recorded as operator.setitem, which dead code elimination keeps.
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

    def keys(self):
        return self.tracer.keys(self)

    def __deepcopy__(self, memo):
        raise TraceError(f"{self} cannot be deep-copied while tracing")

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        """Record a call of an ember op that received a proxy as a ``call_function`` node."""
        tracers = set()

        def find(a):
            if isinstance(a, Proxy):
                tracers.add(a.tracer)
            return a

        map_aggregate(args, find)
        map_aggregate(kwargs or {}, find)
        if len(tracers) > 1:
            raise RuntimeError(f"Found proxies from different tracers in the arguments of {func.__name__}")
        (tracer,) = tracers
        return tracer.create_proxy("call_function", func, args, kwargs or {})


def _unpack_count(frame):
    """If the caller is unpacking a fixed number of values (``a, b = proxy``), that number."""
    if frame is None:
        return None
    for inst in dis.get_instructions(frame.f_code):
        if inst.offset == frame.f_lasti:
            if inst.opname == "UNPACK_SEQUENCE":
                return inst.argval
            return None
    return None


class Attribute(Proxy):
    """``proxy.name``: becomes a ``getattr`` node when used as a value, a ``call_method`` when called."""

    def __init__(self, root, attr):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self):
        # Created lazily: `x.view(...)` should record one call_method, not a getattr too.
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root, *args), kwargs)


class ParameterProxy(Proxy):
    """A proxy for a parameter whose shape is treated as a constant (``param_shapes_constant=True``).

    ``shape``, ``size()``, ``dim()``, ``ndim`` and ``numel()`` return the real values
    instead of recording nodes.
    """

    def __init__(self, tracer, node, name, param):
        super().__init__(node, tracer)
        self.param = param
        self.name = name

    def __repr__(self):
        return f"ParameterProxy({self.name})"

    @property
    def shape(self):
        return self.param.shape

    def size(self, dim=None):
        return self.param.size() if dim is None else self.param.size(dim)

    def dim(self):
        return self.param.dim()

    @property
    def ndim(self):
        return self.param.ndim

    def numel(self):
        return self.param.numel()

    def nelement(self):
        return self.param.numel()


def _binary(op_fn):
    def forward(self, other):
        return self.tracer.create_proxy("call_function", op_fn, (self, other), {})

    def reflected(self, other):
        return self.tracer.create_proxy("call_function", op_fn, (other, self), {})

    return forward, reflected


_BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "matmul": operator.matmul,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "lshift": operator.lshift,
    "rshift": operator.rshift,
}
_COMPARE = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "getitem": operator.getitem,
}
_UNARY = {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert, "abs": operator.abs}

for _name, _fn in _BINARY.items():
    _fwd, _refl = _binary(_fn)
    setattr(Proxy, f"__{_name}__", _fwd)
    setattr(Proxy, f"__r{_name}__", _refl)
for _name, _fn in _COMPARE.items():
    setattr(Proxy, f"__{_name}__", _binary(_fn)[0])


def _unary(op_fn):
    def forward(self):
        return self.tracer.create_proxy("call_function", op_fn, (self,), {})

    return forward


for _name, _fn in _UNARY.items():
    setattr(Proxy, f"__{_name}__", _unary(_fn))
Proxy.__hash__ = lambda self: id(self)  # __eq__ is traced, so hashing must not depend on it
