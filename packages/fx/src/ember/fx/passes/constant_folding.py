"""Constant folding: compute once what depends only on the module's attributes.

A node whose inputs all come from ``get_attr`` nodes (directly or through other such
nodes) has the same value on every call, e.g. ``self.weight.t()`` or a mask built
from a buffer. :func:`fold_constants` evaluates those subgraphs now, stores each
result as an attribute ``_folded_attr_<N>`` and replaces the subgraph by one
``get_attr``. The values are those of the attributes at folding time: fold for
inference, after training.
"""

from __future__ import annotations

from ..interpreter import Interpreter

__all__ = ["fold_constants"]


def _is_constant(node, constant):
    if node.op == "get_attr":
        return True
    if node.op not in ("call_function", "call_method") or node.is_impure():
        return False
    inputs = node.all_input_nodes
    return bool(inputs) and all(constant.get(n, False) for n in inputs)


def fold_constants(gm):
    """Fold the constant subgraphs of ``gm`` in place (see the module documentation).

    Returns:
        int: the number of folded values (new attributes).
    """
    graph = gm.graph
    constant = {}
    for node in graph.nodes:
        constant[node] = _is_constant(node, constant)
    # Fold the last constant node of each chain: one read by something that is not constant.
    to_fold = [n for n in graph.nodes if constant[n] and n.op != "get_attr" and any(not constant[u] for u in n.users)]
    if not to_fold:
        return 0
    interp = Interpreter(gm, garbage_collect_values=False)
    interp.env = {}
    for node in graph.nodes:
        if constant[node]:
            interp.env[node] = interp.run_node(node)
    for i, node in enumerate(to_fold):
        name = f"_folded_attr_{i}"
        while hasattr(gm, name):
            name += "_"
        value = interp.env[node]
        setattr(gm, name, value.detach() if hasattr(value, "detach") else value)
        with graph.inserting_before(node):
            replacement = graph.get_attr(name)
        node.replace_all_uses_with(replacement)
    graph.eliminate_dead_code()
    gm.recompile()
    gm.delete_all_unused_submodules()
    return len(to_fold)
