"""``Interpreter`` runs a graph node by node; ``Transformer`` turns one graph into another.

Subclass :class:`Interpreter` and override one method per opcode (``call_function``,
``call_module``, ...) or :meth:`Interpreter.run_node` to observe or change execution,
e.g. to record shapes (:class:`~ember.fx.passes.shape_prop.ShapeProp`) or time each node.
:class:`Transformer` runs the same overrides on proxies, so what they return is recorded
into a new graph.
"""

from __future__ import annotations

import copy

from .graph import Graph
from .graph_module import GraphModule
from .node import map_aggregate, map_arg
from .proxy import Proxy, TracerBase

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Execute a GraphModule's graph one node at a time.

    Args:
        module (ember.nn.Module): the module whose attributes ``get_attr`` and
            ``call_module`` nodes read (usually the GraphModule itself).
        garbage_collect_values (bool): drop each value after its last use, to save memory.
        graph (Graph or None): the graph to run (default: ``module.graph``).

    Attributes:
        env (dict[ember.fx.Node, object]): the values computed so far during :meth:`run`.
    """

    def __init__(self, module, garbage_collect_values=True, graph=None):
        self.module = module
        self.submodules = dict(module.named_modules())
        self.graph = graph if graph is not None else module.graph
        self.env = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        self.user_to_last_uses = {}
        if garbage_collect_values:
            seen = set()
            for node in reversed(self.graph.nodes):
                for inp in node.all_input_nodes:
                    if inp not in seen:
                        seen.add(inp)
                        self.user_to_last_uses.setdefault(node, []).append(inp)

    def run(self, *args, initial_env=None, enable_io_processing=True):
        """Run the graph on ``args`` and return what its output node returns.

        Args:
            *args: the inputs, in placeholder order.
            initial_env (dict[ember.fx.Node, object] or None): values to use for some nodes instead of
                computing them.
            enable_io_processing (bool): pass ``args`` through the graph's code generator first
                and its result back through it, so a graph traced with structured inputs
                (one placeholder per leaf) takes and returns the structures, as its
                GraphModule does. With False, ``args`` are the placeholder values.

        Raises:
            RuntimeError: if there are fewer inputs than placeholders without defaults.
        """
        self.env = initial_env if initial_env is not None else {}
        if enable_io_processing:
            args = self.graph.process_inputs(*args)
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as exc:
                if self.extra_traceback and not getattr(exc, "_fx_noted", False):
                    exc._fx_noted = True
                    if hasattr(exc, "add_note"):
                        exc.add_note(f"While executing {node.format_node()}")
                raise
            if self.garbage_collect_values:
                for dead in self.user_to_last_uses.get(node, ()):
                    self.env.pop(dead, None)
            if node.op == "output":
                value = self.env[node]
                return self.graph.process_outputs(value) if enable_io_processing else value
        return None

    def boxed_run(self, args_list):
        """Run with the placeholder values given as a list, which is cleared so they can be freed early."""
        args = list(args_list)
        args_list.clear()
        return self.graph.process_outputs(self.run(*args, enable_io_processing=False))

    def run_node(self, n):
        """Compute node ``n``: fetch its arguments from :attr:`env` and call the opcode's method."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # -- one method per opcode ---------------------------------------------------------------------

    def placeholder(self, target, args, kwargs):
        """The next input; the node's default (``args[0]``) when inputs run out.

        Raises:
            RuntimeError: if there is no input left and no default.
        """
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(
                f"Expected positional argument for parameter {target}, but one was not passed in!"
            ) from None

    def get_attr(self, target, args, kwargs):
        """The module attribute ``target``."""
        return self.fetch_attr(target)

    def call_function(self, target, args, kwargs):
        """``target(*args, **kwargs)``."""
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        """``args[0].<target>(*args[1:], **kwargs)``."""
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target, args, kwargs):
        """Call the submodule ``target``."""
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        """The value the graph returns (``args[0]``)."""
        return args[0]

    # -- helpers -----------------------------------------------------------------------------------

    def fetch_attr(self, target):
        """The attribute of :attr:`module` at qualified name ``target``.

        Raises:
            RuntimeError: naming the missing part of the path.
        """
        obj = self.module
        atoms = target.split(".")
        for i, atom in enumerate(atoms):
            if not hasattr(obj, atom):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(atoms[: i + 1])}")
            obj = getattr(obj, atom)
        return obj

    def fetch_args_kwargs_from_env(self, n):
        """``n``'s arguments with nodes replaced by their values in :attr:`env`."""
        args = self.map_nodes_to_values(n.args, n)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        return args, kwargs

    def map_nodes_to_values(self, args, n):
        """Replace every node inside ``args`` by its value.

        Raises:
            RuntimeError: if a value is missing (a node used before it was computed).
        """

        def load(node):
            if node not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {node}! Run Graph.lint() to diagnose")
            return self.env[node]

        return map_arg(args, load)


class _TransformerTracer(TracerBase):
    """Records into the transformer's new graph; every module stays a leaf."""

    def __init__(self, graph):
        super().__init__()
        self.graph = graph

    def is_leaf_module(self, m, qualname):
        return True


class Transformer(Interpreter):
    """Build a new GraphModule by running a graph on proxies.

    Every opcode method of :class:`Interpreter` receives proxies for the values, so by
    default the new graph is a copy; override ``call_function`` etc. to change what is
    recorded (swap a function, insert a call, drop one).

    Example::

        class ReluToGelu(Transformer):
            def call_function(self, target, args, kwargs):
                if target is ember.relu:
                    target = ember.nn.functional.gelu
                return super().call_function(target, args, kwargs)

        new_gm = ReluToGelu(gm).transform()
    """

    def __init__(self, module):
        super().__init__(module, garbage_collect_values=False)
        self.new_graph = Graph()
        self.new_graph.set_codegen(copy.deepcopy(self.graph._codegen))  # same inputs and outputs
        self.tracer = _TransformerTracer(self.new_graph)
        self.tracer.root = module

    def placeholder(self, target, args, kwargs):
        default = (args[0],) if args else ()
        node = self.new_graph.create_node("placeholder", target, default, {}, name=target.lstrip("*"))
        return Proxy(node, self.tracer)

    def get_attr(self, target, args, kwargs):
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_function(self, target, args, kwargs):
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target, args, kwargs):
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def call_module(self, target, args, kwargs):
        return self.tracer.create_proxy("call_module", target, args, kwargs)

    def run_node(self, n):
        result = super().run_node(n)
        if isinstance(result, Proxy) and result.node.op not in ("placeholder",):
            result.node.meta = {**n.meta, **result.node.meta}
        return result

    def transform(self):
        """Run the transformation and return the new GraphModule (sharing the module's attributes)."""
        result = super().run(enable_io_processing=False)
        if result is not None:

            def strip(a):
                return a.node if isinstance(a, Proxy) else a

            self.new_graph.output(map_aggregate(result, strip))
        return GraphModule(self.module, self.new_graph)
