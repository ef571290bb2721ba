"""``Node``: one operation of a :class:`~ember.fx.Graph`.

A node has an opcode (``op``), a ``target`` and arguments. The opcodes are:

* ``placeholder``: a function input; ``target`` is the parameter name, ``args``
  holds the default value, if any;
* ``get_attr``: fetches a parameter, buffer or attribute of the module by its
  qualified name (``target``, e.g. ``"layer1.weight"``);
* ``call_function``: calls ``target`` (an ember op or any Python callable);
* ``call_method``: calls the method named ``target`` on ``args[0]``;
* ``call_module``: calls the submodule whose qualified name is ``target``;
* ``output``: the value returned, ``args[0]``.

Arguments are nested tuples, lists, dicts, slices and plain values whose leaves
may be other nodes; a node records which nodes it reads (:attr:`Node.all_input_nodes`)
and which nodes read it (:attr:`Node.users`), so rewiring stays consistent.
"""

from __future__ import annotations

import builtins
import operator
from typing import NamedTuple

from .immutable_collections import immutable_dict, immutable_list

__all__ = ["Node", "map_arg", "map_aggregate", "Argument", "Target", "ArgsKwargsPair"]

Argument = object  # documentation alias: a nested structure whose leaves may be nodes
Target = object  # a str (qualified name / method name) or a callable

_OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output", "root")

# Calls that change state or have effects outside their results; dead code elimination keeps them.
_SIDE_EFFECT_FUNCTIONS = {operator.setitem, builtins.print}


class ArgsKwargsPair(NamedTuple):
    """Positional and keyword arguments of a call (see :meth:`Node.normalized_arguments`)."""

    args: tuple
    kwargs: dict


def map_aggregate(a, fn):
    """Apply ``fn`` to every leaf of the nested structure ``a`` (tuples, lists, dicts, slices).

    Containers are rebuilt with the same type (named tuples included; lists and dicts
    come back as :class:`immutable_list` / :class:`immutable_dict`).
    """
    if isinstance(a, tuple):
        items = [map_aggregate(e, fn) for e in a]
        return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
    if isinstance(a, list):
        return immutable_list(map_aggregate(e, fn) for e in a)
    if isinstance(a, dict):
        return immutable_dict((k, map_aggregate(v, fn)) for k, v in a.items())
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a, fn):
    """Apply ``fn`` to every :class:`Node` inside the nested argument ``a``.

    Raises:
        TypeError: if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"map_arg: fn must be callable, got {type(fn).__name__}")
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _type_repr(t):
    """A short printable name for a type annotation."""
    if t is None:
        return ""
    if isinstance(t, type):
        return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    return repr(t)


def _target_repr(target):
    """How a target reads in ``format_node`` and tables: ``ember.relu``, ``operator.add``, a name."""
    if isinstance(target, str):
        return target
    from ._names import qualified_name

    return qualified_name(target)


class Node:
    """One operation of a graph (see the module documentation for the opcodes).

    Nodes are created by :class:`~ember.fx.Graph` methods (``graph.call_function(...)``,
    ``graph.create_node(...)``), never directly.

    Attributes:
        graph (Graph): the graph that owns the node.
        name (str): its unique name, also the variable name in generated code.
        op (str): the opcode.
        target: what it calls or reads (see the module documentation).
        users (dict[ember.fx.Node, None]): the nodes that use this one as an argument (ordered).
        type: an optional type annotation of the value, printed in the generated code.
        meta (dict): free-form data passes attach (``"tensor_meta"``, ``"stack_trace"``, ...).
    """

    def __init__(self, graph, name, op, target, args, kwargs, return_type=None):
        if op not in _OPCODES:
            raise ValueError(f"Node: op must be one of {_OPCODES}, got {op!r}")
        if op in ("call_method", "call_module", "get_attr", "placeholder") and not isinstance(target, str):
            raise ValueError(f"Node {name}: target of a {op} node must be a str, got {type(target).__name__}")
        if op == "call_function" and not callable(target):
            raise ValueError(f"Node {name}: target of a call_function node must be callable, got {target!r}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes = {}
        self.users = {}
        self.type = return_type
        self._prev = self
        self._next = self
        self._erased = False
        self.meta = {}
        self._args = ()
        self._kwargs = immutable_dict()
        self._update_args_kwargs(args, kwargs)

    # -- the linked list -------------------------------------------------------------------------

    @property
    def next(self):
        """The node after this one in the graph (the graph's root sentinel after the last)."""
        return self._next

    @property
    def prev(self):
        """The node before this one in the graph."""
        return self._prev

    def prepend(self, x):
        """Move node ``x`` (of the same graph) to just before this node.

        Raises:
            ValueError: if ``x`` belongs to another graph or is this node.
        """
        if x.graph is not self.graph:
            raise ValueError("Node.prepend: the node to move belongs to another graph")
        if x is self:
            raise ValueError("Node.prepend: cannot put a node before itself")
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x):
        """Move node ``x`` (of the same graph) to just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self):
        p, n = self._prev, self._next
        p._next, n._prev = n, p
        self._prev = self._next = self

    # -- arguments -------------------------------------------------------------------------------

    @property
    def args(self):
        """The positional arguments (a tuple); assigning updates the users of the nodes involved."""
        return self._args

    @args.setter
    def args(self, a):
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self):
        """The keyword arguments (a read-only dict); assigning updates users like :attr:`args`."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k):
        self._update_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self):
        """The distinct nodes this node reads, in order of first appearance in args then kwargs."""
        return list(self._input_nodes)

    def update_arg(self, idx, arg):
        """Set positional argument ``idx`` to ``arg``.

        Raises:
            IndexError: if ``idx`` is out of range.
        """
        args = list(self._args)
        if not -len(args) <= idx < len(args):
            raise IndexError(f"Node.update_arg: index {idx} out of range for a node with {len(args)} args")
        args[idx] = arg
        self.args = tuple(args)

    def insert_arg(self, idx, arg):
        """Insert ``arg`` as positional argument ``idx``."""
        args = list(self._args)
        args.insert(idx, arg)
        self.args = tuple(args)

    def update_kwarg(self, key, arg):
        """Set keyword argument ``key`` to ``arg``."""
        self.kwargs = {**self._kwargs, key: arg}

    def _update_args_kwargs(self, new_args, new_kwargs):
        if not isinstance(new_args, tuple):
            raise TypeError(f"Node {self.name}: args must be a tuple, got {type(new_args).__name__}")
        if not isinstance(new_kwargs, dict):
            raise TypeError(f"Node {self.name}: kwargs must be a dict, got {type(new_kwargs).__name__}")
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._input_nodes = {}
        found = self._input_nodes

        def record(n):
            if n.graph is not self.graph and self.op != "root":
                raise ValueError(f"Node {self.name}: argument {n.name} belongs to another graph")
            found.setdefault(n)
            return n

        self._args = map_arg(new_args, record)
        self._kwargs = map_arg(new_kwargs, record)
        for n in found:
            n.users.setdefault(self)

    def replace_all_uses_with(self, replace_with, delete_user_cb=lambda user: True, *, propagate_meta=False):
        """Make every user of this node use ``replace_with`` instead.

        Args:
            replace_with (ember.fx.Node): the node to use instead.
            delete_user_cb (callable): ``user -> bool``; only users for which it is true change.
            propagate_meta (bool): copy this node's ``meta`` into ``replace_with`` (which must have none).

        Returns:
            list[ember.fx.Node]: the users that changed.

        Raises:
            ValueError: if ``propagate_meta`` and ``replace_with`` already has meta.
        """
        if propagate_meta:
            if replace_with.meta:
                raise ValueError("replace_all_uses_with(propagate_meta=True): the replacement node already has meta")
            replace_with.meta.update(self.meta)
        changed = [u for u in list(self.users) if delete_user_cb(u)]
        for user in changed:
            user.replace_input_with(self, replace_with)
        return changed

    def replace_input_with(self, old_input, new_input):
        """Replace every occurrence of node ``old_input`` in this node's arguments by ``new_input``."""

        def swap(n):
            return new_input if n is old_input else n

        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    # -- properties ------------------------------------------------------------------------------

    @property
    def stack_trace(self):
        """The Python stack of the traced call that created this node (``meta["stack_trace"]``), or None."""
        return self.meta.get("stack_trace")

    @stack_trace.setter
    def stack_trace(self, trace):
        self.meta["stack_trace"] = trace

    def is_impure(self):
        """Whether removing this node, even unused, could change the program (dead code elimination keeps it).

        Placeholders and the output are impure, as are in-place ember ops, ``setitem``,
        calls to modules marked ``_is_impure`` and methods ending in ``_`` (in-place by convention).
        """
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            if self.target in _SIDE_EFFECT_FUNCTIONS:
                return True
            return getattr(self.target, "kind", None) == "inplace" or "random" in getattr(self.target, "tags", ())
        if self.op == "call_method":
            return self.target.endswith("_") and not self.target.endswith("__")
        if self.op == "call_module":
            owner = self.graph.owning_module
            if owner is None:
                return False
            try:
                module = owner.get_submodule(self.target)
            except AttributeError:
                return False
            return bool(getattr(module, "_is_impure", False))
        return False

    def normalized_arguments(self, root=None, arg_types=None, kwarg_types=None, normalize_to_only_use_kwargs=False):
        """This call's arguments bound to the callee's signature, defaults filled in.

        Works for ``call_function`` nodes of ember ops (their registry signature) and of
        Python functions, and for ``call_module`` nodes (the module's ``forward``; needs
        ``root``, the module the target is looked up in).

        Args:
            root (ember.nn.Module or None): for ``call_module`` nodes.
            arg_types, kwarg_types: accepted for PyTorch compatibility (unused: ember ops
                have one signature each).
            normalize_to_only_use_kwargs (bool): return every argument as a keyword.

        Returns:
            ArgsKwargsPair or None: ``(args, kwargs)``, or None when the signature is unknown
            or the arguments do not fit it.
        """
        import inspect

        if self.op == "call_function":
            fn = self.target
        elif self.op == "call_module" and root is not None:
            fn = root.get_submodule(self.target).forward
        else:
            return None
        try:
            # An ember op binds to its call signature (``out=`` is the dispatcher's, not the op's).
            sig = getattr(fn, "_call_signature", None) or inspect.signature(fn)
            bound = sig.bind(*self.args, **self.kwargs)
        except (TypeError, ValueError):
            return None
        bound.apply_defaults()
        if normalize_to_only_use_kwargs:
            return ArgsKwargsPair((), dict(bound.arguments))
        return ArgsKwargsPair(tuple(bound.args), dict(bound.kwargs))

    # -- printing --------------------------------------------------------------------------------

    def _pretty(self, a, prefix="%"):
        if isinstance(a, Node):
            return f"{prefix}{a.name}"
        if isinstance(a, tuple):
            inner = ", ".join(self._pretty(e, prefix) for e in a)
            return f"({inner},)" if len(a) == 1 else f"({inner})"
        if isinstance(a, list):
            return "[" + ", ".join(self._pretty(e, prefix) for e in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{k}: {self._pretty(v, prefix)}" for k, v in a.items()) + "}"
        if isinstance(a, slice):
            parts = (self._pretty(a.start, prefix), self._pretty(a.stop, prefix), self._pretty(a.step, prefix))
            return f"slice({', '.join(parts)})"
        return a if isinstance(a, str) else repr(a)  # strings print bare, as in PyTorch

    def format_node(self, placeholder_names=None, maybe_return_typename=None):
        """One readable line describing this node, as printed by ``print(graph)``.

        Args:
            placeholder_names (list[str] or None): when given, a placeholder appends its
                name here and returns None instead (used to print a signature).
            maybe_return_typename (list[str] or None): when given, the output node stores
                its type annotation here.

        Returns:
            str or None
        """
        if self.op == "placeholder":
            if placeholder_names is not None:
                default = f"={self._pretty(self.args[0])}" if self.args else ""
                placeholder_names.append(f"{self.target}{default}")
                return None
            default = f"(default={self._pretty(self.args[0])})" if self.args else ""
            typ = f" : {_type_repr(self.type)}" if self.type is not None else ""
            return f"%{self.name}{typ} : [num_users={len(self.users)}] = placeholder[target={self.target}]{default}"
        if self.op == "get_attr":
            typ = f"{_type_repr(self.type)} " if self.type is not None else ""
            return f"%{self.name} : {typ}[num_users={len(self.users)}] = get_attr[target={self.target}]"
        if self.op == "output":
            if self.type is not None and maybe_return_typename is not None:
                maybe_return_typename[0] = f" -> {_type_repr(self.type)}"
            return f"return {self._pretty(self.args[0], prefix='')}"
        typ = f"{_type_repr(self.type)} " if self.type is not None else ""
        return (
            f"%{self.name} : {typ}[num_users={len(self.users)}] = {self.op}[target={_target_repr(self.target)}]"
            f"(args = {self._pretty(self.args)}, kwargs = {self._pretty(self.kwargs)})"
        )

    def __repr__(self):
        return self.name

    # Nodes are hashed by identity: two nodes with the same arguments are still two values.
    __hash__ = object.__hash__

    def __getstate__(self):
        return dict(self.__dict__)

    def __setstate__(self, state):
        self.__dict__.update(state)
