"""Find every occurrence of a pattern in a graph and replace it.

A pattern and its replacement are functions (or GraphModules) with the same
parameters; they are traced, and wherever the pattern's computation appears in the
target graph, with any values in place of the pattern's inputs, it is replaced by
the replacement's computation on those values.

Example::

    def pattern(x):
        return ember.relu(x)

    def replacement(x):
        return ember.nn.functional.gelu(x)

    replace_pattern(gm, pattern, replacement)

Matching is structural: a pattern node matches a graph node with the same opcode and
target whose arguments match in turn (literals must be equal, unless
``ignore_literals``). Intermediate values of a match must not be used outside it.
Matches do not overlap; they are found in program order.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, NamedTuple

from .graph import Graph
from .graph_module import GraphModule
from .node import Node

if TYPE_CHECKING:
    import ember.fx

__all__ = ["Match", "ReplacedPatterns", "replace_pattern", "replace_pattern_with_filters", "SubgraphMatcher"]


class Match(NamedTuple):
    """One replaced occurrence: the graph node matched by the pattern's output, and the node map."""

    anchor: ember.fx.Node
    nodes_map: dict


class ReplacedPatterns(NamedTuple):
    """Like :class:`Match`, plus the nodes the replacement inserted."""

    anchor: ember.fx.Node
    nodes_map: dict
    replacements: list


def _as_graph(obj):
    if isinstance(obj, GraphModule):
        return obj.graph, obj
    if isinstance(obj, Graph):
        return obj, None
    from ._symbolic_trace import symbolic_trace

    gm = symbolic_trace(obj)
    return gm.graph, gm


def _returned_nodes(graph):
    (out,) = graph.find_nodes(op="output")
    value = out.args[0]
    items = value if isinstance(value, (tuple, list)) else (value,)
    for v in items:
        if not isinstance(v, Node):
            raise ValueError(f"a pattern must return nodes (or a tuple of nodes), got {v!r}")
    return list(items)


class SubgraphMatcher:
    """Structural matching of a pattern graph inside a target graph (see the module documentation).

    Args:
        pattern (Graph): the pattern.
        ignore_literals (bool): literal arguments match any literal.
        match_placeholder (bool): kept for PyTorch compatibility; placeholders always match anything.
    """

    def __init__(self, pattern, ignore_literals=False, match_placeholder=True, pattern_module=None, module=None):
        self.pattern = pattern
        self.ignore_literals = ignore_literals
        self.pattern_module = pattern_module
        self.module = module
        self.pattern_returns = _returned_nodes(pattern)
        self.pattern_placeholders = pattern.find_nodes(op="placeholder")

    def _module_type(self, owner, target):
        return type(owner.get_submodule(target)) if owner is not None else None

    def _targets_match(self, pn, gn):
        if pn.op in ("call_function", "call_method"):
            return pn.target == gn.target
        if pn.op == "call_module":
            return self._module_type(self.pattern_module, pn.target) is self._module_type(self.module, gn.target)
        return pn.op == "get_attr"

    def _match_arg(self, pa, ga, m):
        if isinstance(pa, Node):
            return self._match_node(pa, ga, m)
        if isinstance(pa, (tuple, list)):
            if not isinstance(ga, (tuple, list)) or len(pa) != len(ga):
                return False
            return all(self._match_arg(p, g, m) for p, g in zip(pa, ga))
        if isinstance(pa, dict):
            if not isinstance(ga, dict) or pa.keys() != ga.keys():
                return False
            return all(self._match_arg(pa[k], ga[k], m) for k in pa)
        if isinstance(ga, Node):
            return False
        if self.ignore_literals:
            return True
        return type(pa) is type(ga) and pa == ga

    def _match_node(self, pn, gn, m):
        if pn in m:
            return m[pn] is gn
        if pn.op == "placeholder":
            if isinstance(gn, Node) and gn in m.values():
                return False
            m[pn] = gn
            return True
        if not isinstance(gn, Node) or gn.op != pn.op or gn in m.values():
            return False
        if not self._targets_match(pn, gn):
            return False
        if len(pn.args) != len(gn.args) or pn.kwargs.keys() != gn.kwargs.keys():
            return False
        m[pn] = gn
        trial = dict(m)
        if self._match_arg(pn.args, gn.args, trial) and self._match_arg(dict(pn.kwargs), dict(gn.kwargs), trial):
            m.update(trial)
            return True
        del m[pn]
        return False

    def _self_contained(self, m):
        """Intermediate matched nodes must have no users outside the match."""
        inside = {gn for pn, gn in m.items() if pn.op != "placeholder"}
        returned = {m[p] for p in self.pattern_returns}
        for pn, gn in m.items():
            if pn.op == "placeholder" or gn in returned:
                continue
            if any(u not in inside for u in gn.users):
                return False
        return True

    def match(self, graph):
        """All non-overlapping matches in ``graph``, in program order.

        Returns:
            list[dict[ember.fx.Node, ember.fx.Node]]: each maps pattern nodes to graph nodes
            (or to values, for placeholders).
        """
        matches = []
        taken = set()
        anchor = self.pattern_returns[-1]
        for gn in graph.nodes:
            if gn.op == "output":
                continue
            m = {}
            if not self._match_node(anchor, gn, m):
                continue
            if not self._match_rest(graph, m, self.pattern_returns[:-1]):
                continue
            if not self._self_contained(m):
                continue
            nodes = {g for p, g in m.items() if p.op != "placeholder"}
            if nodes & taken:
                continue
            taken |= nodes
            matches.append(m)
        return matches

    def _match_rest(self, graph, m, anchors):
        """Match the other returned pattern nodes (not reachable from the last one)."""
        for pn in anchors:
            if pn in m:
                continue
            for gn in graph.nodes:
                trial = dict(m)
                if self._match_node(pn, gn, trial):
                    m.update(trial)
                    break
            else:
                return False
        return True


def replace_pattern(gm, pattern, replacement):
    """Replace every match of ``pattern`` in ``gm`` by ``replacement``; recompiles ``gm``.

    Args:
        gm (GraphModule): edited in place.
        pattern, replacement (callable or GraphModule): with the same number of inputs
            and outputs.

    Returns:
        list[Match]: the replaced occurrences.
    """
    return [Match(r.anchor, r.nodes_map) for r in _replace(gm, pattern, replacement, (), False)]


def replace_pattern_with_filters(gm, pattern, replacement, match_filters=None, ignore_literals=False):
    """:func:`replace_pattern` with filters: ``filter(match, original_graph, pattern_graph) -> bool``.

    Only matches every filter accepts are replaced. With ``ignore_literals``, literal
    arguments of the pattern match any literal.

    Returns:
        list[ReplacedPatterns]
    """
    return _replace(gm, pattern, replacement, tuple(match_filters or ()), ignore_literals)


def _replace(gm, pattern, replacement, match_filters, ignore_literals):
    pattern_graph, pattern_module = _as_graph(pattern)
    replacement_graph, replacement_module = _as_graph(replacement)
    graph = gm.graph
    matcher = SubgraphMatcher(pattern_graph, ignore_literals, pattern_module=pattern_module, module=gm)
    results = []
    replacement_placeholders = replacement_graph.find_nodes(op="placeholder")
    if len(replacement_placeholders) != len(matcher.pattern_placeholders):
        raise ValueError(
            f"replace_pattern: the pattern has {len(matcher.pattern_placeholders)} inputs but the replacement has "
            f"{len(replacement_placeholders)}"
        )
    substitutions = {}  # a replaced output -> what replaced it (a later match may read it)

    def current(value):
        while isinstance(value, Node) and value in substitutions:
            value = substitutions[value]
        return value

    for m in matcher.match(graph):
        if not all(f(_FilterMatch(m, matcher), graph, pattern_graph) for f in match_filters):
            continue
        returned = [m[p] for p in matcher.pattern_returns]
        last = max(returned, key=_position(graph))
        val_map = {rp: current(m[pp]) for rp, pp in zip(replacement_placeholders, matcher.pattern_placeholders)}
        with graph.inserting_before(last):
            new_value = _copy_replacement(gm, graph, replacement_graph, replacement_module, val_map)
        new_returns = list(new_value) if isinstance(new_value, (tuple, list)) else [new_value]
        if len(new_returns) != len(returned):
            raise ValueError(
                f"replace_pattern: the pattern returns {len(returned)} values but the replacement {len(new_returns)}"
            )
        for old, new in zip(returned, new_returns):
            old.replace_all_uses_with(new)
            substitutions[old] = new
        for pn in reversed(list(pattern_graph.nodes)):
            if pn.op in ("placeholder", "output") or pn not in m:
                continue
            gn = m[pn]
            if not gn.users:
                graph.erase_node(gn)
        inserted = [val_map[n] for n in replacement_graph.nodes if n.op not in ("placeholder", "output")]
        results.append(ReplacedPatterns(returned[0], m, inserted))
    gm.recompile()
    return results


class _FilterMatch(NamedTuple):
    nodes_map: dict
    matcher: object

    @property
    def placeholder_nodes(self):
        return [self.nodes_map[p] for p in self.matcher.pattern_placeholders]

    @property
    def returning_nodes(self):
        return [self.nodes_map[p] for p in self.matcher.pattern_returns]


def _position(graph):
    order = {n: i for i, n in enumerate(graph.nodes)}
    return lambda n: order[n]


def _copy_replacement(gm, graph, replacement_graph, replacement_module, val_map):
    """Copy the replacement's nodes into ``graph``; its attributes/submodules are copied into ``gm``."""
    for node in replacement_graph.nodes:
        if node in val_map:
            continue
        if node.op == "output":
            from .node import map_arg

            return map_arg(node.args[0], lambda n: val_map[n])
        if node.op in ("get_attr", "call_module") and replacement_module is not None:
            value = replacement_module.get_submodule(node.target) if node.op == "call_module" else None
            if node.op == "get_attr":
                obj = replacement_module
                for atom in node.target.split("."):
                    obj = getattr(obj, atom)
                value = obj
            target = _free_attr_name(gm, node.target)
            if node.op == "call_module":
                gm.add_submodule(target, copy.deepcopy(value))
            else:
                setattr(gm, target, value)
            copied = graph.create_node(node.op, target, (), {}, name=node.name)
            copied.args = tuple(_map(node.args, val_map))
            copied.kwargs = dict(_map(node.kwargs, val_map))
            val_map[node] = copied
            continue
        val_map[node] = graph.node_copy(node, lambda n: val_map[n])
    return None


def _map(a, val_map):
    from .node import map_arg

    return map_arg(a, lambda n: val_map[n])


def _free_attr_name(gm, target):
    """``target`` with dots replaced, made unique among ``gm``'s attributes."""
    base = target.replace(".", "_")
    name, i = base, 0
    while hasattr(gm, name):
        i += 1
        name = f"{base}_{i}"
    return name
