"""``make_fx``: trace a function at the op-registry level, below ``__ember_function__`` and autograd.

Symbolic tracing (:func:`ember.fx.symbolic_trace`) records the Python-level calls a
module makes. ``make_fx`` instead runs the function on real tensors inside a dispatch
mode (:mod:`ember.utils._python_dispatch`) and records every op call that reaches the
dispatcher, with arguments normalised to the op's signature. Because dispatch modes sit
above autograd, a function that computes gradients (``ember.autograd.grad``) is traced
with its backward pass: the derivative formulas are ember ops too. This is the
foundation of ahead-of-time autograd and the compiler.

Each value is tracked by the identity of the tensor that carries it: the graph is
specialised to the control flow taken on the example inputs (as in PyTorch's
``make_fx`` with ``tracing_mode="real"``).

Example:
    >>> import ember
    >>> from ember.fx.experimental.proxy_tensor import make_fx
    >>> gm = make_fx(lambda x: ember.relu(x) * 2)(ember.randn(3))
    >>> print(gm.code.strip())
    def forward(self, arg0_1):
        relu = ember.relu(arg0_1, False)
        mul = ember.mul(relu, 2)
        return mul
"""

from __future__ import annotations

from ember.utils._python_dispatch import DispatchMode

from ..graph import Graph
from ..graph_module import GraphModule

__all__ = ["make_fx", "ProxyDispatchMode", "dispatch_trace"]


def _tensor_cls():
    import ember

    return ember.Tensor


class ProxyDispatchMode(DispatchMode):
    """A dispatch mode that runs each op and appends a node for it to :attr:`graph`.

    Args:
        graph (Graph): where nodes go.
        root (ember.nn.Module): holds tensor constants (``_tensor_constant<N>``) the function uses.
        decomposition_table (dict[Op, callable] or None): ops to replace by a Python
            decomposition, whose own op calls are then recorded.
    """

    def __init__(self, graph, root, decomposition_table=None):
        self.graph = graph
        self.root = root
        self.decomposition_table = decomposition_table or {}
        self._nodes = {}  # id(tensor) -> (tensor, node); the tensor is kept so its id stays unique
        # id(backend array) -> (array, node): autograd saves aliases of outputs (new Tensor objects
        # over the same array); they carry the same value, so they map to the same node.
        self._by_data = {}
        self._constants = 0

    #: Whether reading a tensor's value into Python while tracing is an error (make_fx: yes, as in
    #: PyTorch; ONNX capture keeps the real-mode specialisation, e.g. a causal-mask check).
    refuse_value_reads = False

    def refuse_value_read(self, what):
        """A tensor's value read into Python while tracing (``if x.sum() > 0``, ``x.max().item()``) would be
        baked into the graph as a constant: refuse it when :attr:`refuse_value_reads` is set."""
        if not self.refuse_value_reads:
            return
        raise RuntimeError(
            f"make_fx: the traced function read a tensor's value ({what}), e.g. for Python control flow; "
            "the graph would silently keep the value seen while tracing. Compute it with tensor ops "
            "(ember.where), pass it as an argument, or capture the function in pieces"
        )

    def track(self, tensor, node):
        """Make ``node`` the producer of ``tensor``."""
        self._nodes[id(tensor)] = (tensor, node)
        self._by_data[id(tensor._data)] = (tensor._data, node)

    def node_of(self, value):
        """The node for a tensor, recording it as a constant the first time an untracked one is seen."""
        entry = self._nodes.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        entry = self._by_data.get(id(value._data))
        if entry is not None and entry[0] is value._data:
            return entry[1]
        name = f"_tensor_constant{self._constants}"
        self._constants += 1
        setattr(self.root, name, value)
        node = self.graph.get_attr(name)
        self.track(value, node)
        return node

    def _to_arg(self, a):
        tensor = _tensor_cls()
        if isinstance(a, tensor):
            return self.node_of(a)
        if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
            return type(a)(self._to_arg(v) for v in a)
        return a

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        decomposition = self.decomposition_table.get(func)
        if decomposition is not None:
            with self:  # record what the decomposition calls
                return decomposition(*args, **kwargs)
        result = func(*args, **kwargs)
        node = self.graph.call_function(
            func, tuple(self._to_arg(a) for a in args), {k: self._to_arg(v) for k, v in kwargs.items()}
        )
        self._track_result(result, node)
        return result

    def _track_result(self, result, node):
        tensor = _tensor_cls()
        if isinstance(result, tensor):
            self.track(result, node)
        elif isinstance(result, (tuple, list)):
            import operator

            for i, item in enumerate(result):
                if isinstance(item, tensor):
                    self.track(item, self.graph.call_function(operator.getitem, (node, i)))


def dispatch_trace(f, args, decomposition_table=None, refuse_value_reads=False):
    """Run ``f(*args)`` under :class:`ProxyDispatchMode` and return the recorded GraphModule."""
    tensor = _tensor_cls()
    from ember.nn import Module

    root = Module()
    graph = Graph()
    mode = ProxyDispatchMode(graph, root, decomposition_table)
    mode.refuse_value_reads = refuse_value_reads
    for i, a in enumerate(args):
        node = graph.placeholder(f"arg{i}_1")
        if isinstance(a, tensor):
            mode.track(a, node)
    with mode:
        out = f(*args)

    def to_output(v):
        if isinstance(v, tensor):
            return mode.node_of(v)
        if isinstance(v, tuple) and hasattr(v, "_fields"):  # a named tuple (sort, topk, ...) takes fields positionally
            return type(v)(*(to_output(x) for x in v))
        if isinstance(v, (tuple, list)):
            return type(v)(to_output(x) for x in v)
        if isinstance(v, dict):
            return {k: to_output(x) for k, x in v.items()}
        return v

    graph.output(to_output(out))
    return GraphModule(root, graph)


def make_fx(f, decomposition_table=None, tracing_mode="real", pre_dispatch=False):
    """Wrap ``f`` so that calling the wrapper with example inputs returns its op-level graph.

    Args:
        f (callable): the function to trace; its tensor inputs are positional.
        decomposition_table (dict[Op, callable] or None): ops to decompose while tracing
            (e.g. ``{op: op.decomposition}`` for a composite op, to get its prims).
        tracing_mode (str): ``"real"`` (run on the given tensors) or ``"fake"`` (run on
            meta copies: shapes only, no arithmetic).
        pre_dispatch (bool): accepted for PyTorch compatibility; must be False.

    Returns:
        callable: ``wrapped(*args) -> GraphModule``; the graph's placeholders are
        ``arg0_1, arg1_1, ...``, one per argument.

    Raises:
        ValueError: for an unsupported ``tracing_mode`` or ``pre_dispatch=True``.
        RuntimeError: (from the returned function) when ``f`` reads a tensor's value into Python
            while it is traced (``if x.sum() > 0``, ``x.max().item()``, ``float(x)``), as PyTorch's
            make_fx does: the graph would otherwise keep the value seen while tracing.
    """
    if tracing_mode not in ("real", "fake"):
        raise ValueError(f"make_fx: tracing_mode must be 'real' or 'fake', got {tracing_mode!r}")
    if pre_dispatch:
        raise ValueError("make_fx: pre_dispatch=True is not supported by ember.fx")

    def wrapped(*args):
        if tracing_mode == "fake":
            from ..passes.shape_prop import _to_meta

            args = tuple(_to_meta(a) for a in args)
        return dispatch_trace(f, args, decomposition_table, refuse_value_reads=True)

    return wrapped
