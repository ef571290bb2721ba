"""Partitioners: split a joint forward+backward graph into a forward and a backward graph.

A joint graph (:func:`~ember._inductor.aot.joint.trace_joint`) has placeholders
``primals_*`` then ``tangents_*`` and returns ``(*forward_outputs, *grads)``. A
partitioner decides which values cross from the forward to the backward:

* :func:`default_partition` saves every forward value the backward reads.
* :func:`min_cut_rematerialization_partition` saves fewer bytes: cheap pointwise and view
  ops whose inputs are saved anyway are recomputed in the backward instead of stored, and
  the choice of what to save is a minimum cut of a flow network (see its docstring).

Both return ``(fw_gm, bw_gm)``: ``fw_gm(*primals) -> (*forward_outputs, *saved)`` and
``bw_gm(*saved, *tangents) -> grads`` (one per primal, None allowed), and attach a
:class:`PartitionInfo` as ``fw_gm.partition_info`` (also on ``bw_gm``), whose text is
written to the ``partition`` debug stage under ``EMBER_COMPILE_DEBUG=1``.

**Random ops are never recomputed** (:func:`is_random`): recomputing ``bernoulli`` in the
backward would draw a different dropout mask. Their outputs are saved, and every random
node stays in the forward graph even when nothing reads it, so the compiled forward draws
what eager mode draws (``aot/rng.py``).
"""

from __future__ import annotations

import dataclasses
import operator

import numpy as np

from ember.fx import Graph, GraphModule

from .. import debug
from ..exc import InductorError

__all__ = [
    "default_partition",
    "min_cut_rematerialization_partition",
    "is_random",
    "is_recomputable",
    "PartitionInfo",
]


def is_random(op):
    """Whether ``op`` draws from a random generator: a registry op tagged ``"random"``.

    The registry tags every op that draws (``rand``, ``randn``, ``bernoulli``, ``dropout``,
    ``rrelu``, the in-place ``uniform_``, ...); anything else (``operator.getitem``) is not random.

    Example:
        >>> import ember
        >>> from ember._inductor.aot.partitioners import is_random
        >>> is_random(ember._ops.registry["bernoulli"]), is_random(ember._ops.registry["mul"])
        (True, False)
    """
    return "random" in getattr(op, "tags", ())


# Ops outside the pointwise/view/factory families that are as cheap to recompute as to load.
_CHEAP_DATA_MOVEMENT = frozenset({"clone", "_to_copy", "cat", "pad", "flip", "complex", "polar"})


def is_recomputable(op):
    """Whether the min-cut partitioner may recompute ``op`` in the backward instead of saving it.

    Recomputable: pointwise ops, views, ``operator.getitem``, non-random factories and cheap data
    movement (``cat``, ``pad``, ``clone``, casts). Never: random ops (a second draw differs),
    extern compute (matmul, convolution, linalg, fft: expensive), reductions and scans
    (recomputing repeats a full pass over their input, and their outputs are small to save),
    sorting and data-dependent ops.
    """
    if op is operator.getitem:
        return True
    if is_random(op):
        return False
    tags = getattr(op, "tags", ())
    name = getattr(op, "name", None)
    return "pointwise" in tags or "factory" in tags or getattr(op, "kind", None) == "view" or (
        name in _CHEAP_DATA_MOVEMENT
    )


@dataclasses.dataclass
class PartitionInfo:
    """What a partitioner decided, for tests and the debug output.

    Attributes:
        partitioner (str): ``"default"`` or ``"min_cut"``.
        saved (list[str]): names of the values the forward saves, in ``bw_gm``'s input order.
        saved_bytes (int): their total size (primals count 0: the caller keeps them alive).
        recomputed (list[str]): forward nodes the backward computes again.
        forward_nodes (int): call nodes in the forward graph.
        backward_nodes (int): call nodes in the backward graph.
    """

    partitioner: str
    saved: list
    saved_bytes: int
    recomputed: list
    forward_nodes: int
    backward_nodes: int

    def __str__(self):
        lines = [
            f"partitioner: {self.partitioner}",
            f"forward: {self.forward_nodes} nodes, backward: {self.backward_nodes} nodes",
            f"saved ({len(self.saved)} values, {self.saved_bytes} bytes, primals not counted):",
        ]
        lines += [f"  {name}" for name in self.saved]
        lines.append(f"recomputed in the backward ({len(self.recomputed)}):")
        lines += [f"  {name}" for name in self.recomputed]
        return "\n".join(lines)


# -- the joint graph, classified ------------------------------------------------------------


def _is_tangent(node):
    return node.op == "placeholder" and node.name.startswith("tangents")


def _is_primal(node):
    return node.op == "placeholder" and not _is_tangent(node)


def _is_call(node):
    return node.op == "call_function"


def _nbytes(node):
    """Bytes of ``node``'s value, from ``meta["val"]``; None for a tuple (not savable as one value)."""
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        return None
    if val is None or not hasattr(val, "element_size"):
        return 8  # a Python number or an unknown value: one word
    return int(val.numel()) * int(val.element_size())


class _Joint:
    """The joint graph split into its parts.

    Attributes:
        nodes (list[Node]): every node in graph order.
        primals, tangents (list[Node]): the placeholders.
        fwd_outputs, grads (list): the output tuple's two parts (grads may hold None).
        forward (set[Node]): nodes the forward graph computes: ancestors of the forward outputs and
            of every random node (a draw eager mode makes must run even if unread), plus the
            ``getitem``s of multi-output forward nodes.
        backward (list[Node]): the other call and get_attr nodes, in graph order.
        needed (list[Node]): forward nodes the backward reads (or returns as a grad), in graph order.
    """

    def __init__(self, joint_gm, num_fwd_outputs):
        self.gm = joint_gm
        self.nodes = list(joint_gm.graph.nodes)
        output = self.nodes[-1]
        if output.op != "output":
            raise InductorError("partition: the joint graph has no output node")
        outs = output.args[0]
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if not 0 <= num_fwd_outputs <= len(outs):
            raise ValueError(
                f"partition: num_fwd_outputs={num_fwd_outputs} but the joint graph has {len(outs)} outputs"
            )
        self.fwd_outputs = outs[:num_fwd_outputs]
        self.grads = outs[num_fwd_outputs:]
        self.primals = [n for n in self.nodes if _is_primal(n)]
        self.tangents = [n for n in self.nodes if _is_tangent(n)]
        self.forward = self._forward_set()
        self.backward = [n for n in self.nodes if n.op in ("call_function", "get_attr") and n not in self.forward]
        self.needed = self._needed()

    def _forward_set(self):
        roots = [n for n in self.fwd_outputs if n is not None and hasattr(n, "op")]
        roots += [n for n in self.nodes if _is_call(n) and is_random(n.target)]
        forward = set(self.primals)
        stack = list(roots)
        while stack:
            node = stack.pop()
            if node in forward:
                continue
            if _is_tangent(node):
                raise InductorError(f"partition: forward value {node.name} depends on a tangent")
            forward.add(node)
            stack.extend(node.all_input_nodes)
        for node in self.nodes:  # a multi-output forward op's outputs are forward values
            if _is_call(node) and node.target is operator.getitem and node.args[0] in forward:
                forward.add(node)
        return forward

    def _needed(self):
        needed = set()
        for node in self.backward:
            needed.update(a for a in node.all_input_nodes if a in self.forward)
        needed.update(g for g in self.grads if g is not None and g in self.forward)
        # constants (get_attr) are not saved: the backward graph reads the attribute itself
        return [n for n in self.nodes if n in needed and n.op != "get_attr"]


# -- building the two graphs ----------------------------------------------------------------


def _copy_get_attr(graph, env, node):
    if node not in env:
        env[node] = graph.node_copy(node)
    return env[node]


def _build(joint, saved, recomputed, partitioner):
    """``(fw_gm, bw_gm)`` that save ``saved`` and recompute ``recomputed`` (both lists of nodes)."""
    fw = Graph()
    env = {}

    def fw_arg(n):
        return _copy_get_attr(fw, env, n) if n.op == "get_attr" else env[n]

    for node in joint.nodes:
        if node in joint.forward and node.op != "get_attr":
            env[node] = fw.node_copy(node, fw_arg)
    fw.output(tuple(fw_arg(n) if n is not None else None for n in joint.fwd_outputs) + tuple(env[n] for n in saved))

    bw = Graph()
    benv = {}

    def bw_arg(n):
        return _copy_get_attr(bw, benv, n) if n.op == "get_attr" else benv[n]

    for node in saved:
        benv[node] = bw.placeholder(node.name)
        benv[node].meta.update(node.meta)
    for node in joint.tangents:
        benv[node] = bw.node_copy(node)
    recomputed = set(recomputed)
    to_run = recomputed.union(joint.backward)
    for node in joint.nodes:
        if node in to_run and node.op != "get_attr":
            benv[node] = bw.node_copy(node, bw_arg)
    bw.output(tuple(bw_arg(g) if g is not None else None for g in joint.grads))

    fw_gm, bw_gm = GraphModule(joint.gm, fw), GraphModule(joint.gm, bw)
    info = PartitionInfo(
        partitioner=partitioner,
        saved=[n.name for n in saved],
        saved_bytes=sum(_nbytes(n) or 0 for n in saved if not _is_primal(n)),
        recomputed=[n.name for n in joint.nodes if n in recomputed],
        forward_nodes=sum(1 for n in fw.nodes if _is_call(n)),
        backward_nodes=sum(1 for n in bw.nodes if _is_call(n)),
    )
    fw_gm.partition_info = bw_gm.partition_info = info
    debug.stage("partition", lambda: (f"{info}\n\nforward graph:\n{fw_gm.code.strip()}\n\n"
                                 f"backward graph:\n{bw_gm.code.strip()}\n"))
    return fw_gm, bw_gm


# -- the partitioners -----------------------------------------------------------------------


def default_partition(joint_gm, joint_inputs, *, num_fwd_outputs):
    """Split ``joint_gm`` saving every forward value the backward reads.

    The forward graph computes the forward outputs (and every random op); every other node
    goes to the backward graph, which receives each forward value it reads as a saved input.

    Args:
        joint_gm (GraphModule): placeholders ``primals_*`` then ``tangents_*``, output
            ``(*forward_outputs, *grads)``, nodes with ``meta["val"]``.
        joint_inputs (list): example values of the placeholders (unused: sizes come from
            ``meta["val"]``; kept for the partitioner interface).
        num_fwd_outputs (int): how many leading outputs are forward outputs.

    Returns:
        tuple[GraphModule, GraphModule]: ``fw_gm(*primals) -> (*forward_outputs, *saved)`` and
        ``bw_gm(*saved, *tangents) -> grads``.

    Raises:
        ValueError: if ``num_fwd_outputs`` exceeds the number of outputs.
        InductorError: if a forward output depends on a tangent.
    """
    joint = _Joint(joint_gm, num_fwd_outputs)
    return _build(joint, joint.needed, [], "default")


# Finite capacities are scaled so that their sum stays below _FINITE_LIMIT, and "infinite" edges
# get _INF, which no cut made of finite edges reaches.
_INF = int(np.iinfo(np.int32).max)
_FINITE_LIMIT = 2**30


def _node_capacities(joint):
    """Cost of saving each forward node (``None``: cannot be saved as one value)."""
    costs = {}
    for node in joint.forward:
        if node.op == "get_attr":
            continue
        if _is_primal(node):
            costs[node] = 0  # the caller keeps its inputs alive anyway
            continue
        size = _nbytes(node)
        if size is None:
            costs[node] = None
        else:
            # twice the bytes, plus one for a recomputable node: among cuts of equal size, prefer
            # saving what the forward materialises anyway (an extern kernel's output) to saving an
            # intermediate a fused forward kernel would never write.
            costs[node] = 2 * size + (1 if is_recomputable(node.target) else 0)
    return costs


def _solve_min_cut(joint):
    """The forward nodes on the source side of a minimum cut (computed in the forward)."""
    costs = _node_capacities(joint)
    order = [n for n in joint.nodes if n in costs]
    index = {n: i for i, n in enumerate(order)}
    source, sink = 2 * len(order), 2 * len(order) + 1
    finite_total = sum(c for c in costs.values() if c)
    scale = min(1.0, _FINITE_LIMIT / finite_total) if finite_total else 1.0
    edges = {}

    def add(u, v, capacity):
        if capacity > 0:
            edges[(u, v)] = min(_INF, edges.get((u, v), 0) + capacity)

    needed = set(joint.needed)
    for node in order:
        i = index[node]
        node_in, node_out = 2 * i, 2 * i + 1
        cost = costs[node]
        add(node_in, node_out, _INF if cost is None else (max(1, int(cost * scale)) if cost else 0))
        if _is_primal(node) or not _is_call(node) or not is_recomputable(node.target):
            add(source, node_in, _INF)  # computed in the forward: saved if the backward needs it
        if node in needed:
            add(node_out, sink, _INF)
        for user in node.users:
            if user in index:
                add(node_out, 2 * index[user], _INF)
    flow_value, reachable = _max_flow(edges, sink + 1, source, sink)
    if flow_value >= _INF:
        raise InductorError("partition: the min-cut problem has no finite cut (a needed value cannot be saved)")
    return {n for n in order if 2 * index[n] in reachable}


def _max_flow(edges, num_vertices, source, sink):
    """Maximum flow from ``source`` to ``sink`` (Dinic's algorithm) and the source side of the min cut.

    ``edges`` maps ``(u, v)`` to a capacity. Returns ``(flow value, vertices reachable from the source
    in the residual graph)``: the same set for every maximum flow, so the cut does not depend on the
    algorithm. Plain Python: the networks here have a few thousand edges (a few milliseconds), and
    importing ``scipy.sparse.csgraph`` would cost more than solving.
    """
    adjacency = [[] for _ in range(num_vertices)]  # vertex -> ids of its residual edges
    head, capacity = [], []  # edge e and its reverse e ^ 1
    for (u, v), c in edges.items():
        adjacency[u].append(len(head))
        head.append(v)
        capacity.append(c)
        adjacency[v].append(len(head))
        head.append(u)
        capacity.append(0)
    flow = 0
    while True:
        level = _levels(adjacency, head, capacity, source)
        if level[sink] < 0:
            return flow, {v for v in range(num_vertices) if level[v] >= 0}
        cursor = [0] * num_vertices
        while True:
            pushed = _augment(adjacency, head, capacity, level, cursor, source, sink)
            if not pushed:
                break
            flow += pushed


def _levels(adjacency, head, capacity, source):
    """BFS distance from ``source`` along residual edges (-1: unreachable)."""
    level = [-1] * len(adjacency)
    level[source] = 0
    frontier = [source]
    while frontier:
        next_frontier = []
        for u in frontier:
            for e in adjacency[u]:
                v = head[e]
                if capacity[e] > 0 and level[v] < 0:
                    level[v] = level[u] + 1
                    next_frontier.append(v)
        frontier = next_frontier
    return level


def _augment(adjacency, head, capacity, level, cursor, source, sink):
    """Push flow along one shortest residual path (iterative DFS over the level graph); 0 when none is left."""
    path = []
    u = source
    while True:
        if u == sink:
            pushed = min(capacity[e] for e in path)
            for e in path:
                capacity[e] -= pushed
                capacity[e ^ 1] += pushed
            return pushed
        edges = adjacency[u]
        while cursor[u] < len(edges):
            e = edges[cursor[u]]
            if capacity[e] > 0 and level[head[e]] == level[u] + 1:
                break
            cursor[u] += 1
        else:  # a dead end: never enter u again in this phase
            level[u] = -2
            if not path:
                return 0
            u = head[path.pop() ^ 1]
            cursor[u] += 1
            continue
        path.append(edges[cursor[u]])
        u = head[path[-1]]


def min_cut_rematerialization_partition(joint_gm, joint_inputs, *, num_fwd_outputs):
    """Split ``joint_gm`` saving a minimum number of bytes, recomputing cheap ops in the backward.

    Rematerialisation trades compute for memory: a value the backward needs may be saved by
    the forward or recomputed by the backward from other saved values. Choosing what to save
    is a minimum s-t cut (the idea of Checkmate, Jain et al., MLSys 2020, and of the
    AOTAutograd min-cut partitioner write-up):

    * each forward node ``v`` is split into ``v_in -> v_out`` with capacity = the bytes of
      its value (``meta["val"]``): cutting that edge means saving ``v``. Primals cost 0 (the
      caller keeps them alive); a tuple-valued node cannot be saved (its ``getitem``\\ s are).
    * ``u_out -> v_in`` (infinite) for each use inside the forward.
    * source -> ``v_in`` (infinite) for primals and nodes that may not be recomputed
      (:func:`is_recomputable`: matmul, convolution, reductions, random ops, ...): they
      exist on the forward side, and the backward gets them only by a saved value.
    * ``v_out`` -> sink (infinite) for each forward value the backward reads.

    The max flow (:func:`_max_flow`, Dinic's algorithm) equals the cheapest set of saved
    values separating the backward from the forward; the cut is read from the residual graph
    (vertices reachable from the source). Forward nodes past the cut are recomputed in the
    backward from the saved values. Ties go to values the forward materialises anyway.

    Args:
        joint_gm (GraphModule): as for :func:`default_partition`.
        joint_inputs (list): example values of the placeholders (unused: sizes come from
            ``meta["val"]``).
        num_fwd_outputs (int): how many leading outputs are forward outputs.

    Returns:
        tuple[GraphModule, GraphModule]: ``fw_gm(*primals) -> (*forward_outputs, *saved)`` and
        ``bw_gm(*saved, *tangents) -> grads``.

    Raises:
        ValueError: if ``num_fwd_outputs`` exceeds the number of outputs.
        InductorError: if a forward output depends on a tangent.

    Example:
        >>> import ember
        >>> from ember._inductor.aot.partitioners import min_cut_rematerialization_partition
        >>> from ember._inductor.aot.joint import trace_joint
        >>> x = ember.randn(8, 8, requires_grad=True)
        >>> joint = trace_joint(lambda x: x.sin().cos().sum(), [x])
        >>> fw, bw = min_cut_rematerialization_partition(joint, [x, ember.ones(())], num_fwd_outputs=1)
        >>> fw.partition_info.saved  # recompute sin(x) from x rather than save it
        ['primals_1']
    """
    joint = _Joint(joint_gm, num_fwd_outputs)
    source_side = _solve_min_cut(joint)
    # Walk back from what the backward reads: a value on the source side is saved; one past the
    # cut is recomputed, so its inputs are needed in turn.
    saved, recomputed = [], []
    seen = set()
    stack = list(reversed(joint.needed))
    while stack:
        node = stack.pop()
        if node in seen or node.op == "get_attr":
            continue
        seen.add(node)
        if node in source_side:
            saved.append(node)
        else:
            recomputed.append(node)
            stack.extend(node.all_input_nodes)
    order = {n: i for i, n in enumerate(joint.nodes)}
    saved.sort(key=order.__getitem__)
    recomputed.sort(key=order.__getitem__)
    return _build(joint, saved, recomputed, "min_cut")
