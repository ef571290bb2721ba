"""Common subexpression elimination: one node for each distinct pure computation.

Two ``call_function``/``call_method`` nodes with the same target and the same arguments
(after earlier merges) compute the same value; the later one is replaced by the
earlier one. Impure nodes (in-place ops, ``setitem``, random ops) and module calls
(a module may keep state) are never merged.
"""

from __future__ import annotations

from typing import NamedTuple

from ..node import Node, map_arg

__all__ = ["CSEPass", "PassResult"]


class PassResult(NamedTuple):
    """What a pass returns: the (edited) module and whether it changed."""

    graph_module: object
    modified: bool


def _hashable(a):
    """A hashable key for an argument structure; raises TypeError for unhashable literals."""
    if isinstance(a, Node):
        return ("node", id(a))
    if isinstance(a, (tuple, list)):
        return (type(a).__name__, tuple(_hashable(v) for v in a))
    if isinstance(a, dict):
        return ("dict", tuple((k, _hashable(v)) for k, v in a.items()))
    if isinstance(a, slice):
        return ("slice", _hashable(a.start), _hashable(a.stop), _hashable(a.step))
    hash(a)
    return (type(a).__name__, a)


class CSEPass:
    """Merge duplicate pure computations of a GraphModule (edited in place).

    Args:
        banned_ops (iterable or None): targets never merged, in addition to impure nodes.

    Example::

        result = CSEPass()(gm)
        result.modified  # True if some node was merged
    """

    def __init__(self, banned_ops=None):
        self.banned_ops = set(banned_ops or ())

    def __call__(self, graph_module):
        graph = graph_module.graph
        seen = {}
        replaced = {}
        modified = False
        for node in list(graph.nodes):
            if node.op not in ("call_function", "call_method") or node.is_impure() or node.target in self.banned_ops:
                continue
            args = map_arg(node.args, lambda n: replaced.get(n, n))
            kwargs = map_arg(node.kwargs, lambda n: replaced.get(n, n))
            try:
                key = (node.op, node.target, _hashable(args), _hashable(kwargs))
            except TypeError:
                continue  # an unhashable literal argument: leave the node alone
            earlier = seen.get(key)
            if earlier is None:
                seen[key] = node
                continue
            node.replace_all_uses_with(earlier)
            graph.erase_node(node)
            replaced[node] = earlier
            modified = True
        if modified:
            graph_module.recompile()
        return PassResult(graph_module, modified)
