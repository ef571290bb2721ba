"""``split_module``: cut a GraphModule into partitions, each its own GraphModule.

A callback assigns every node to a partition (any hashable key). Each partition
becomes a submodule ``submod_<key>`` whose inputs are the values it reads from
outside and whose outputs are the values other partitions (or the final output)
read from it; the top-level module calls the submodules in dependency order. This is
how a graph is divided between devices, pipeline stages or backends.
"""

from __future__ import annotations

import operator

from ..graph import Graph
from ..graph_module import GraphModule
from ..node import map_arg

__all__ = ["split_module", "Partition"]


class Partition:
    """The nodes of one partition and what crosses its boundary.

    Attributes:
        name (str): ``submod_<key>``.
        node_names (list[str]): the original nodes in it, in program order.
        inputs (dict[str, None]): names of outside values it reads (ordered).
        outputs (dict[str, None]): names of its values read outside (ordered).
        dependencies (dict[str, None]): partitions it reads from; ``dependents`` those reading it.
    """

    def __init__(self, name):
        self.name = name
        self.submod_name = f"submod_{name}"
        self.node_names = []
        self.inputs = {}
        self.outputs = {}
        self.dependencies = {}
        self.dependents = {}

    def __repr__(self):
        return (
            f"name: {self.name},\n nodes: {self.node_names},\n inputs: {list(self.inputs)},\n"
            f" outputs: {list(self.outputs)},\n dependencies: {list(self.dependencies)}"
        )


def _topological_order(partitions):
    """Partition keys so that every partition comes after those it reads from (stable).

    Raises:
        RuntimeError: if the partitions depend on each other in a cycle.
    """
    remaining = {k: set(p.dependencies) for k, p in partitions.items()}
    order = []
    while remaining:
        ready = [k for k, deps in remaining.items() if not deps]
        if not ready:
            raise RuntimeError(f"split_module: the partitions depend on each other in a cycle: {sorted(remaining)}")
        for k in ready:
            order.append(k)
            del remaining[k]
        for deps in remaining.values():
            deps.difference_update(ready)
    return order


def split_module(m, root_m, split_callback, qualname_map=None, keep_original_order=False):
    """Split ``m`` into submodules by ``split_callback(node) -> key``.

    Args:
        m (GraphModule): the module to split.
        root_m (ember.nn.Module): the module its ``get_attr``/``call_module`` targets live in
            (usually the module ``m`` was traced from, or ``m`` itself).
        split_callback (callable): the partition key of each ``call_*`` node.
        qualname_map (dict or None): filled with ``"submod_k.<name>" -> "<name>"`` for the
            attributes copied into each submodule.
        keep_original_order (bool): accepted for PyTorch compatibility (the order is always
            dependency order, stable by first appearance).

    Returns:
        GraphModule: calls ``submod_<key>`` children, each a GraphModule.

    Raises:
        RuntimeError: if the partitions depend on each other in a cycle.
    """
    partitions = {}
    owner = {}  # node -> partition key
    for node in m.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        key = split_callback(node)
        part = partitions.setdefault(key, Partition(key))
        part.node_names.append(node.name)
        owner[node] = key

    def record_use(value, user_key):
        """``value`` is read by a node of partition ``user_key`` (None: the final output)."""
        source = owner.get(value)
        if source == user_key and user_key is not None:
            return
        if source is not None:
            partitions[source].outputs.setdefault(value.name)
            if user_key is not None:
                partitions[user_key].dependencies.setdefault(source)
                partitions[source].dependents.setdefault(user_key)
        if user_key is not None and value.op != "get_attr":
            partitions[user_key].inputs.setdefault(value.name)

    nodes_by_name = {n.name: n for n in m.graph.nodes}
    for node in m.graph.nodes:
        user_key = owner.get(node)
        if node.op == "output":
            map_arg(node.args, lambda v: record_use(v, None))
        elif user_key is not None:
            map_arg((node.args, node.kwargs), lambda v, k=user_key: record_use(v, k))

    order = _topological_order(partitions)
    base = GraphModule(root_m, m.graph) if not isinstance(root_m, GraphModule) else root_m

    top = Graph()
    env = {}  # original node -> node in the top graph
    for node in m.graph.nodes:
        if node.op == "placeholder":
            env[node] = top.node_copy(node)
    top_module = {}
    for key in order:
        part = partitions[key]
        sub_graph = Graph()
        local = {}
        for name in part.inputs:
            local[nodes_by_name[name]] = sub_graph.placeholder(name)
        for name in part.node_names:
            node = nodes_by_name[name]
            for inp in node.all_input_nodes:
                if inp.op == "get_attr" and inp not in local:
                    local[inp] = sub_graph.node_copy(inp)
                    if qualname_map is not None:
                        qualname_map[f"{part.submod_name}.{inp.target}"] = inp.target
            local[node] = sub_graph.node_copy(node, local.__getitem__)
        outs = [local[nodes_by_name[name]] for name in part.outputs]
        sub_graph.output(outs[0] if len(outs) == 1 else tuple(outs))
        top_module[part.submod_name] = GraphModule(base, sub_graph, part.submod_name)
        call = top.call_module(part.submod_name, tuple(env[nodes_by_name[name]] for name in part.inputs))
        if len(outs) == 1:
            env[nodes_by_name[next(iter(part.outputs))]] = call
        else:
            for i, name in enumerate(part.outputs):
                env[nodes_by_name[name]] = top.create_node("call_function", operator.getitem, (call, i), name=name)
    for node in m.graph.nodes:
        if node.op == "get_attr" and any(u.op == "output" for u in node.users):
            env[node] = top.node_copy(node)
    (output,) = m.graph.find_nodes(op="output")
    top.output(map_arg(output.args[0], lambda n: env[n]))
    for node in top.find_nodes(op="get_attr"):
        top_module[node.target] = _fetch(base, node.target)
    return GraphModule(top_module, top)


def _fetch(module, target):
    obj = module
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj
