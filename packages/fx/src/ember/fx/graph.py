"""``Graph``: the FX intermediate representation, a list of :class:`~ember.fx.Node` in program order.

A graph is a straight-line Python function: placeholders (its inputs), then
calls, then one ``output`` node. It can be printed, checked (:meth:`Graph.lint`),
edited (insertion points, :meth:`Graph.erase_node`, :meth:`Node.replace_all_uses_with`)
and turned back into Python source (:meth:`Graph.python_code`), which is what
:class:`~ember.fx.GraphModule` runs.

Example:
    >>> import ember
    >>> from ember.fx import Graph
    >>> g = Graph()
    >>> x = g.placeholder("x")
    >>> y = g.call_function(ember.relu, (x,))
    >>> _ = g.output(y)
    >>> print(g.python_code("self").src.strip())
    def forward(self, x):
        relu = ember.relu(x)
        return relu
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import inspect
import keyword
import math
import operator
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import NamedTuple

from ._names import Namespace, op_path, qualified_name, snake_case
from .node import Node, map_arg

__all__ = ["Graph", "PythonCode", "CodeGen"]

# operator.<fn> -> infix template; generated code reads like the traced code did.
_INFIX = {
    operator.add: "{} + {}",
    operator.sub: "{} - {}",
    operator.mul: "{} * {}",
    operator.truediv: "{} / {}",
    operator.floordiv: "{} // {}",
    operator.mod: "{} % {}",
    operator.pow: "{} ** {}",
    operator.matmul: "{} @ {}",
    operator.and_: "{} & {}",
    operator.or_: "{} | {}",
    operator.xor: "{} ^ {}",
    operator.lshift: "{} << {}",
    operator.rshift: "{} >> {}",
    operator.eq: "{} == {}",
    operator.ne: "{} != {}",
    operator.lt: "{} < {}",
    operator.le: "{} <= {}",
    operator.gt: "{} > {}",
    operator.ge: "{} >= {}",
    operator.neg: "-{}",
    operator.pos: "+{}",
    operator.invert: "~{}",
}


@dataclass
class PythonCode:
    """Source generated from a graph.

    Attributes:
        src (str): the text of ``def forward(self, ...): ...``.
        globals (dict): the names the source refers to (``ember``, helper callables).
    """

    src: str
    globals: dict = field(default_factory=dict)


class CodeGen:
    """How a graph's inputs and outputs meet the generated ``forward``: one parameter per
    placeholder, the output value returned as it is.

    :class:`~ember.fx.Interpreter` calls :meth:`process_inputs` and :meth:`process_outputs`
    so that running a graph node by node takes and returns what ``forward`` does.
    """

    def process_inputs(self, *args):
        """The placeholder values for a call with ``args``."""
        return list(args)

    def process_outputs(self, outputs):
        """What the call returns, given the output node's value."""
        return outputs

    def signature(self, emitter, placeholders):
        """The parameters of ``forward`` after the root module's."""
        params = []
        for node in placeholders:
            param = node.target
            if node.args:
                param += f" = {emitter.arg(node.args[0])}"
            params.append(param)
        return params

    def prologue(self, emitter, placeholders):
        """Lines that bind the placeholder nodes' names from the parameters."""
        lines = []
        for node in placeholders:
            bare = node.target.lstrip("*")
            if node.name != bare:
                lines.append(f"{node.name} = {bare}")
        return lines

    def return_expr(self, emitter, value):
        """The returned expression for the output node's argument ``value``."""
        return emitter.arg(value)


class _PyTreeInfo(NamedTuple):
    """The original parameter names and the input/output structures of a pytree-flattened graph."""

    orig_args: list
    in_spec: object  # TreeSpec of the tuple of all inputs
    out_spec: object  # TreeSpec of the returned value, or None to return the output as is


class _PyTreeCodeGen(CodeGen):
    """Code generation for a graph with one placeholder per leaf of structured inputs.

    ``forward`` keeps the original parameters (``def forward(self, batch, pair)``), picks the
    leaves out of them along ``in_spec`` (:func:`ember.fx._pytree.tree_flatten_spec`) and, when
    ``out_spec`` is set, rebuilds the returned structure from the output node's flat list.

    Args:
        pytree_info (_PyTreeInfo): the parameter names and specs.
    """

    def __init__(self, pytree_info):
        self.pytree_info = pytree_info

    def process_inputs(self, *args):
        from ._pytree import tree_flatten_spec

        return tree_flatten_spec(tuple(args), self.pytree_info.in_spec)

    def process_outputs(self, outputs):
        from ember.utils._pytree import tree_unflatten

        if self.pytree_info.out_spec is None:
            return outputs
        return tree_unflatten(outputs, self.pytree_info.out_spec)

    def signature(self, emitter, placeholders):
        params = []
        leaves = iter(placeholders)
        seen_default = False
        for name, spec in zip(self.pytree_info.orig_args, self.pytree_info.in_spec.children_specs):
            default = None
            if spec.is_leaf():  # a plain input keeps its default value
                node = next(leaves, None)
                if node is not None and node.args:
                    default = emitter.arg(node.args[0])
            else:
                for _ in range(spec.num_leaves):
                    next(leaves, None)
            if default is not None:
                seen_default = True
                params.append(f"{name} = {default}")
            else:
                if seen_default and "*" not in params:
                    params.append("*")  # a required input after a defaulted one was keyword-only
                params.append(name)
        return params

    def prologue(self, emitter, placeholders):
        from ._pytree import tree_flatten_spec

        if not placeholders:
            return []
        flatten = emitter.add_global("_tree_flatten_spec", tree_flatten_spec)
        spec = emitter.add_global("_in_spec", self.pytree_info.in_spec)
        args = "[" + ", ".join(self.pytree_info.orig_args) + "]"
        targets = ", ".join(n.name for n in placeholders)
        return [f"{targets}, = {flatten}({args}, {spec})"]

    def return_expr(self, emitter, value):
        from ember.utils._pytree import tree_unflatten

        if self.pytree_info.out_spec is None:
            return emitter.arg(value)
        unflatten = emitter.add_global("_tree_unflatten", tree_unflatten)
        spec = emitter.add_global("_out_spec", self.pytree_info.out_spec)
        return f"{unflatten}({emitter.arg(value)}, {spec})"


class _NoDefault:
    """Marks a placeholder without a default value (``inspect.Signature.empty`` also does)."""

    def __repr__(self):
        return "inspect.Signature.empty"


_NO_DEFAULT = _NoDefault()


class _NodeList:
    """The nodes of a graph, iterable forwards and backwards; iteration tolerates erasing the current node."""

    def __init__(self, graph, reverse=False):
        self._graph = graph
        self._reverse = reverse

    def __len__(self):
        return self._graph._len

    def __iter__(self):
        root = self._graph._root
        cur = root._prev if self._reverse else root._next
        while cur is not root:
            nxt = cur._prev if self._reverse else cur._next
            if not cur._erased:
                yield cur
            cur = nxt

    def __reversed__(self):
        return iter(_NodeList(self._graph, not self._reverse))

    def __getitem__(self, i):
        return list(self)[i]

    def __repr__(self):
        return repr(list(self))


class _InsertAfter:
    """Insertion point after ``anchor`` that advances, so nodes created in a row keep their order."""

    def __init__(self, anchor):
        self.anchor = anchor

    def __call__(self, node):
        self.anchor.append(node)
        self.anchor = node


class _InsertPoint(contextlib.AbstractContextManager):
    def __init__(self, graph, insert):
        self.graph = graph
        self.previous = graph._insert
        graph._insert = insert

    def __exit__(self, *exc):
        self.graph._insert = self.previous
        return False


def _name_hint(op, target):
    if op in ("placeholder",):
        return target.lstrip("*")
    if op in ("get_attr", "call_module"):
        return snake_case(target.replace(".", "_"))
    if op == "call_method":
        return target
    if op == "output":
        return "output"
    name = getattr(target, "__name__", None) or type(target).__name__
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]  # operator.__add__ style names read as "add"
    return snake_case(name) or "fn"


class Graph:
    """A program as a list of nodes (see the module documentation).

    Args:
        owning_module (ember.nn.Module or None): the module whose attributes the
            ``get_attr``/``call_module`` nodes name, used by :meth:`lint` and dead code elimination.
        tracer_cls: the tracer class that built it, or None.
    """

    def __init__(self, owning_module=None, tracer_cls=None):
        self._root = Node(self, "", "root", "", (), {})
        self._insert = self._root.prepend
        self._len = 0
        self._namespace = Namespace()
        self.owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._codegen = CodeGen()

    def set_codegen(self, codegen):
        """Use ``codegen`` (a :class:`CodeGen`) for the signature and the return of the generated code."""
        self._codegen = codegen

    def process_inputs(self, *args):
        """The placeholder values for a call of the generated ``forward`` with ``args``."""
        return self._codegen.process_inputs(*args)

    def process_outputs(self, out):
        """What the generated ``forward`` returns for the output node's value ``out``."""
        return self._codegen.process_outputs(out)

    @property
    def nodes(self):
        """The nodes in program order (supports ``len`` and ``reversed``)."""
        return _NodeList(self)

    def find_nodes(self, *, op, target=None, sort=True):
        """The nodes with opcode ``op`` (and ``target``, when given), in program order.

        ``sort`` is accepted for PyTorch compatibility; the result is always in program order.
        """
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    # -- creating nodes ----------------------------------------------------------------------------

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        """Create a node at the current insertion point (the end, unless inside ``inserting_*``).

        Args:
            op (str): the opcode.
            target: the target (see :class:`Node`).
            args (tuple or None): positional arguments; nodes among them must belong to this graph.
            kwargs (dict or None): keyword arguments, likewise.
            name (str or None): a name hint; the node gets a unique name derived from it.
            type_expr: an optional type annotation.

        Raises:
            ValueError: for an unknown opcode or a target of the wrong kind.
        """
        args = () if args is None else tuple(args)
        kwargs = {} if kwargs is None else dict(kwargs)
        candidate = name if name is not None else _name_hint(op, target)
        node = Node(self, self._namespace.create_name(candidate), op, target, args, kwargs, type_expr)
        self._insert(node)
        self._len += 1
        return node

    def placeholder(self, name, type_expr=None, default_value=_NO_DEFAULT):
        """An input named ``name``; ``default_value`` makes it optional in the generated signature.

        Leaving ``default_value`` out (or passing ``inspect.Signature.empty``, as in PyTorch)
        makes the input required.
        """
        no_default = default_value is _NO_DEFAULT or default_value is inspect.Signature.empty
        args = () if no_default else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name, type_expr=None):
        """A read of the owning module's attribute ``qualified_name`` (``"layer.weight"``)."""
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name, args=None, kwargs=None, type_expr=None):
        """A call of the submodule ``module_name`` (a qualified name)."""
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name, args=None, kwargs=None, type_expr=None):
        """A call ``args[0].method_name(*args[1:], **kwargs)``."""
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function, args=None, kwargs=None, type_expr=None):
        """A call of ``the_function`` (an ember op or any callable)."""
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def output(self, result, type_expr=None):
        """The ``output`` node returning ``result`` (a node or nested structure of nodes)."""
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def inserting_before(self, n=None):
        """Context manager: nodes created inside go just before ``n`` (the first node if None)."""
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise ValueError("inserting_before: the node belongs to another graph")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n=None):
        """Context manager: nodes created inside go just after ``n``, in creation order (the end if None)."""
        if n is None:
            return self.inserting_before(self._root)
        if n.graph is not self:
            raise ValueError("inserting_after: the node belongs to another graph")
        return _InsertPoint(self, _InsertAfter(n))

    # -- editing -----------------------------------------------------------------------------------

    def erase_node(self, to_erase):
        """Remove ``to_erase`` from the graph.

        Raises:
            RuntimeError: if other nodes still use it.
            ValueError: if it belongs to another graph.
        """
        if to_erase.graph is not self:
            raise ValueError(f"erase_node: node {to_erase} belongs to another graph")
        if to_erase._erased:
            return
        if to_erase.users:
            raise RuntimeError(
                f"Tried to erase Node {to_erase} but it still had {len(to_erase.users)} users in the graph: "
                f"{list(to_erase.users)}!"
            )
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        to_erase._update_args_kwargs((), {})

    def node_copy(self, node, arg_transform=lambda x: x):
        """Copy ``node`` (of another graph) into this one at the insertion point.

        Args:
            node (ember.fx.Node): the node to copy.
            arg_transform (callable): maps each node among its arguments to a node of this graph.

        Returns:
            ember.fx.Node: the copy (same opcode, target, name hint, type and a shallow copy of ``meta``).
        """
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        result = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        result.meta = copy.copy(node.meta)
        return result

    def graph_copy(self, g, val_map, return_output_node=False):
        """Copy every node of graph ``g`` except its output into this graph.

        Args:
            g (Graph): the source graph.
            val_map (dict[ember.fx.Node, ember.fx.Node]): filled with source node -> copy; entries present
                beforehand are used instead of copying (to substitute inputs).
            return_output_node (bool): also return the source output node.

        Returns:
            The copied output value (nodes of this graph), or ``(value, output_node)``.
        """
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                rv = map_arg(node.args[0], lambda n: val_map[n])
                return (rv, node) if return_output_node else rv
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return (None, None) if return_output_node else None

    def __getstate__(self):
        # The owning module is not part of a graph's value (and would make pickling cyclic).
        state = dict(self.__dict__)
        state["owning_module"] = None
        state["_insert"] = self._root.prepend
        return state

    def __deepcopy__(self, memo):
        memo = memo if memo is not None else {}
        g = Graph(tracer_cls=self._tracer_cls)
        g._codegen = copy.deepcopy(self._codegen, memo)
        output_vals = g.graph_copy(self, {}, return_output_node=True)
        value, out = output_vals
        if out is not None:
            g.output(value, type_expr=out.type).meta = copy.copy(out.meta)
        return g

    def eliminate_dead_code(self, is_impure_node=None):
        """Erase nodes whose value is unused and that have no side effect.

        Args:
            is_impure_node (callable or None): ``node -> bool``, overrides :meth:`ember.fx.Node.is_impure`.

        Returns:
            bool: whether anything was erased.
        """
        impure = is_impure_node if is_impure_node is not None else Node.is_impure
        changed = False
        for node in reversed(self.nodes):
            if not node.users and not impure(node):
                self.erase_node(node)
                changed = True
        return changed

    def lint(self):
        """Check that the graph is well formed.

        Checks: every node belongs to this graph, names are unique, arguments are defined
        before use, users lists agree with arguments, exactly one output node and it is last,
        and (with an owning module) that ``get_attr``/``call_module`` targets exist.

        Raises:
            RuntimeError: describing the first problem found.
        """
        seen = set()
        names = set()
        outputs = 0
        nodes = list(self.nodes)
        for node in nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node {node} does not belong to this graph")
            if node.name in names:
                raise RuntimeError(f"Node name {node.name!r} is used twice")
            names.add(node.name)
            for inp in node.all_input_nodes:
                if inp.graph is not self:
                    raise RuntimeError(f"Argument {inp} of node {node} belongs to another graph")
                if inp not in seen:
                    raise RuntimeError(f"Argument {inp} of node {node} is used before it is defined (or was erased)")
                if node not in inp.users:
                    raise RuntimeError(f"Node {node} reads {inp} but is missing from {inp}.users")
            for user in node.users:
                if node not in user._input_nodes:
                    raise RuntimeError(f"{user} is listed among the users of {node} but does not read it")
            if node.op == "output":
                outputs += 1
            seen.add(node)
        if outputs > 1:
            raise RuntimeError(f"The graph has {outputs} output nodes; it must have at most one")
        if outputs == 1 and nodes[-1].op != "output":
            raise RuntimeError("The output node must be the last node of the graph")
        if self.owning_module is not None:
            self._lint_targets(nodes)

    def _lint_targets(self, nodes):
        for node in nodes:
            if node.op not in ("get_attr", "call_module"):
                continue
            obj = self.owning_module
            for i, atom in enumerate(node.target.split(".")):
                if not hasattr(obj, atom):
                    seen = ".".join(node.target.split(".")[:i])
                    raise RuntimeError(
                        f"Node {node} target {node.target} references nonexistent attribute {atom} of {seen or 'root'}"
                    )
                obj = getattr(obj, atom)
            if node.op == "call_module" and not callable(obj):
                raise RuntimeError(f"Node {node} target {node.target} is not a module")

    # -- printing and code generation --------------------------------------------------------------

    def __str__(self):
        return_type = [""]
        lines = []
        for node in self.nodes:
            line = node.format_node(None, return_type)
            if line is not None:
                lines.append(f"    {line}")
        return f"graph(){return_type[0]}:\n" + "\n".join(lines)

    def __repr__(self):
        return self.__str__()

    def print_tabular(self):
        """Print the nodes as a table (opcode, name, target, args, kwargs).

        Uses ``tabulate`` when it is installed, plain aligned text otherwise.
        """
        rows = [
            [n.op, n.name, qualified_name(n.target) if n.op == "call_function" else n.target, n.args, n.kwargs]
            for n in self.nodes
        ]
        headers = ["opcode", "name", "target", "args", "kwargs"]
        try:
            from tabulate import tabulate
        except ImportError:
            cells = [headers] + [[str(c) for c in r] for r in rows]
            widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
            fmt = "  ".join(f"{{:<{w}}}" for w in widths)
            lines = [fmt.format(*headers).rstrip(), fmt.format(*("-" * w for w in widths))]
            lines += [fmt.format(*row).rstrip() for row in cells[1:]]
            print("\n".join(lines))
        else:
            print(tabulate(rows, headers=headers))

    def python_code(self, root_module, *, verbose=False):
        """Python source for this graph: ``def forward(<root_module>, <inputs>): ...``.

        Args:
            root_module (str): the name of the first parameter, through which attributes
                and submodules are reached (``"self"``).
            verbose (bool): annotate each line with the node's opcode and target.

        Returns:
            PythonCode: the source and the globals it needs.
        """
        return _CodeGen(self, root_module, verbose).generate()


def _reads_as_itself(name):
    """Whether ``name`` can be written as ``obj.name``: an identifier that Python's NFKC normalisation
    leaves alone (``obj.ｔｏ＿ｆｏｌｄｅｒ`` would read ``obj.to_folder``)."""
    return name.isidentifier() and not keyword.iskeyword(name) and unicodedata.normalize("NFKC", name) == name


def _attr_path(root, target):
    """``self.layer1.conv`` or ``getattr(self.seq, "0")`` for a qualified name."""
    expr = root
    for atom in target.split("."):
        expr = f"{expr}.{atom}" if _reads_as_itself(atom) else f"getattr({expr}, {atom!r})"
    return expr


class _CodeGen:
    """Turns a graph into the text of a ``forward`` function."""

    def __init__(self, graph, root_module, verbose):
        self.graph = graph
        self.root = root_module
        self.verbose = verbose
        self.globals = {"ember": _import_ember(), "inf": math.inf, "nan": math.nan}
        self.namespace = Namespace()
        for node in graph.nodes:
            self.namespace.mark_used(node.name)
        self.global_names = {}  # id(obj) -> name

    def add_global(self, hint, obj):
        """A global name for ``obj`` in the generated code."""
        name = self.global_names.get(id(obj))
        if name is None:
            if getattr(builtins, hint, None) is obj:
                return hint
            name = self.namespace.create_name(hint)
            self.globals[name] = obj
            self.global_names[id(obj)] = name
        return name

    def function_expr(self, fn):
        from ember._ops import Op

        if isinstance(fn, Op):
            path = op_path(fn)
            if path is not None:
                return path
            return self.add_global(f"_op_{fn.name}", fn)
        name = getattr(fn, "__name__", None)
        if name is not None and getattr(builtins, name, None) is fn:
            return name
        module = getattr(fn, "__module__", None)
        if module in sys.stdlib_module_names and getattr(sys.modules.get(module), name or "", None) is fn:
            # math.sqrt reads better than an opaque global; the module is imported under its own name.
            return f"{self.add_global(module, sys.modules[module])}.{name}"
        return self.add_global(snake_case(name or type(fn).__name__), fn)

    def arg(self, a):
        if isinstance(a, Node):
            return a.name
        if isinstance(a, tuple):
            items = [self.arg(e) for e in a]
            if hasattr(a, "_fields"):
                return f"{self.add_global(type(a).__name__, type(a))}({', '.join(items)})"
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if isinstance(a, list):
            return "[" + ", ".join(self.arg(e) for e in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in a.items()) + "}"
        if isinstance(a, slice):
            return f"slice({self.arg(a.start)}, {self.arg(a.stop)}, {self.arg(a.step)})"
        return self.literal(a)

    def literal(self, a):
        import ember

        if a is None or a is Ellipsis or isinstance(a, (bool, int, str, bytes)):
            return "..." if a is Ellipsis else repr(a)
        if isinstance(a, float):
            if math.isinf(a):
                return "inf" if a > 0 else "-inf"
            return "nan" if math.isnan(a) else repr(a)
        if isinstance(a, complex):
            return f"complex({self.literal(a.real)}, {self.literal(a.imag)})"
        if isinstance(a, ember.dtype):
            return f"ember.{a.name}"
        if isinstance(a, ember.device):
            return f"ember.device({str(a)!r})"
        if isinstance(a, (type, type(len))) or callable(a):
            return self.function_expr(a)
        # Anything else (an enum, a memory format ...) travels as a global, not as its repr.
        return self.add_global(f"_{snake_case(type(a).__name__)}", a)

    def index(self, a):
        """An index expression, with slices written as ``a:b``."""
        if isinstance(a, slice):
            parts = ["" if v is None else self.arg(v) for v in (a.start, a.stop, a.step)]
            return ":".join(parts[:2]) + (f":{parts[2]}" if a.step is not None else "")
        if isinstance(a, tuple) and a:
            inner = ", ".join(self.index(e) for e in a)
            return inner + ("," if len(a) == 1 else "")
        return self.arg(a)

    def operand(self, a):
        s = self.arg(a)
        if isinstance(a, (int, float, complex)) and not isinstance(a, bool) and (s.startswith("-") or "j" in s):
            return f"({s})"
        return s

    def call_args(self, args, kwargs):
        parts = [self.arg(a) for a in args] + [f"{k} = {self.arg(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)

    def emit(self, node):
        op, target, args, kwargs = node.op, node.target, node.args, node.kwargs
        if op == "get_attr":
            return f"{node.name} = {_attr_path(self.root, target)}"
        if op == "call_module":
            return f"{node.name} = {_attr_path(self.root, target)}({self.call_args(args, kwargs)})"
        if op == "call_method":
            receiver = self.operand(args[0])
            return f"{node.name} = {receiver}.{target}({self.call_args(args[1:], kwargs)})"
        if op == "call_function":
            return f"{node.name} = {self.function_call(target, args, kwargs)}"
        raise RuntimeError(f"unknown opcode {op}")

    def function_call(self, target, args, kwargs):
        if not kwargs:
            template = _INFIX.get(target)
            if template is not None and template.count("{}") == len(args):
                return template.format(*(self.operand(a) for a in args))
            if target is operator.getitem and len(args) == 2:
                return f"{self.operand(args[0])}[{self.index(args[1])}]"
            if target is builtins.getattr and len(args) == 2 and isinstance(args[1], str) and _reads_as_itself(args[1]):
                return f"{self.operand(args[0])}.{args[1]}"
        return f"{self.function_expr(target)}({self.call_args(args, kwargs)})"

    def generate(self):
        codegen = self.graph._codegen
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        signature = [self.root, *codegen.signature(self, placeholders)]
        body = codegen.prologue(self, placeholders)
        returned = None
        for node in self.graph.nodes:
            comment = f"  # {node.op}[{qualified_name(node.target)}]" if self.verbose else ""
            if node.op == "placeholder":
                continue
            if node.op == "output":
                returned = f"return {codegen.return_expr(self, node.args[0])}{comment}"
            else:
                body.append(self.emit(node) + comment)
        body.append(returned if returned is not None else "return None")
        src = f"def forward({', '.join(signature)}):\n" + "".join(f"    {line}\n" for line in body)
        return PythonCode(src, self.globals)


def _import_ember():
    import ember

    return ember
