"""The joint forward+backward graph, traced at the registry level over meta tensors.

:func:`trace_joint` runs the function on meta copies of its inputs under
:class:`~ember._inductor.aot.functionalize.FunctionalTracer`, then calls
``ember.autograd.grad`` inside the same trace: the backward formulas are ember ops, so
the backward pass is recorded too. No real kernel runs. The graph is functional (see
``functionalize``): placeholders ``primals_1..primals_n`` then ``tangents_1..tangents_m``,
and one output tuple ``(*forward_outputs, *grads)``.

The forward outputs are, in order, the new values of the inputs the function wrote in
place (so the caller can copy them back), then the tensors among the function's outputs
(flattened as a pytree). Non-tensor outputs are constants of the trace, kept in
:class:`TraceInfo`. A tangent is made for each forward output that is a floating-point
tensor requiring grad; there is one grad per primal (None where the primal does not
require grad or the outputs do not depend on it).
"""

from __future__ import annotations

import dataclasses

import ember
from ember.fx import Graph, GraphModule
from ember.utils._pytree import tree_flatten

from ..exc import InductorError
from .functionalize import FunctionalTracer, is_random_op, meta_copy, reads_values

__all__ = ["trace_joint", "trace_forward", "TraceInfo"]


@dataclasses.dataclass
class TraceInfo:
    """What the runtime needs to know about a traced function besides its graph.

    Attributes:
        num_primals (int): graph inputs that are primals.
        mutated_inputs (tuple[int]): primals written in place; their new values are the first
            forward outputs, in this order.
        outputs (list[tuple]): per flattened output of the function: ``("graph", i)`` (the
            i-th forward output), ``("alias", input_index, chain)`` (a view of an input:
            ``chain`` is a list of ``(op, args, kwargs, index)`` to replay on the real input) or
            ``("constant", value)``.
        out_spec: the pytree spec of the function's output.
        num_fwd_outputs (int): forward outputs of the graph (mutated inputs + tensor outputs).
        tangent_outputs (tuple[int]): the forward outputs that have a tangent, in tangent order.
        fwd_output_requires_grad (tuple[bool]): per forward output, whether it requires grad.
    """

    num_primals: int
    mutated_inputs: tuple
    outputs: list
    out_spec: object
    num_fwd_outputs: int
    tangent_outputs: tuple = ()
    fwd_output_requires_grad: tuple = ()


def _fn_name(fn):
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def _device_of(primals):
    for p in primals:
        if isinstance(p, ember.Tensor) and p.device.type != "meta":
            return p.device
    return ember.device("cpu")


def _meta_primal(p, requires_grad):
    meta = meta_copy(p)
    if requires_grad:
        meta.requires_grad_(True)
    return meta


def _differentiable(t):
    return isinstance(t, ember.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())


def _run(fn, args, tracer, name, phase=""):
    """``fn(*args)`` under ``tracer``; failures to trace on meta tensors become clear InductorErrors."""
    try:
        with tracer.capturing(), tracer:
            return fn(*args)
    except InductorError:
        raise
    except (RuntimeError, TypeError) as exc:
        if "found at least two devices" in str(exc) and "meta" in str(exc):
            # the dispatcher checks devices before the tracer sees the call: a real tensor met a traced one
            raise InductorError(
                f"aot: {name} uses a tensor it does not take as an input (a global, closed-over or newly "
                f"built tensor such as ember.tensor([...])) together with its inputs ({exc}); pass it as an "
                "argument, or build it with device=<an input>.device"
            ) from exc
        if not reads_values(exc):
            raise
        raise InductorError(
            f"aot: tracing {name}{phase} needed the value of a tensor ({exc}); data-dependent Python control "
            "flow (`if x.sum() > 0`, `.item()`, `.tolist()`) and ops whose output shape depends on values "
            "(nonzero, unique, masked_select) cannot be traced ahead of time: compute on tensors "
            "(ember.where) or leave this function uncompiled"
        ) from exc


def _trace(fn, primals, *, joint, decompositions=None, tangents_like=None):
    """Trace ``fn(*primals)``; return ``(GraphModule, TraceInfo)``. See :func:`trace_joint`."""
    name = _fn_name(fn)
    for i, p in enumerate(primals):
        if not isinstance(p, ember.Tensor):
            raise TypeError(f"aot: primals must be tensors, but primals[{i}] of {name} is {type(p).__name__}")
    graph = Graph()
    root = ember.nn.Module()
    device = _device_of(primals)
    # with autograd in the trace, decompositions wait for the functional joint graph (see _decompose)
    tracer = FunctionalTracer(graph, root, None if joint else decompositions, device=device, fn_name=name)
    metas = []
    for i, p in enumerate(primals):
        meta = _meta_primal(p, joint and _differentiable(p))
        tracer.add_input(meta, graph.placeholder(f"primals_{i + 1}"))
        metas.append(meta)
    last_placeholder = list(graph.nodes)[-1] if metas else None

    if joint:
        with ember.enable_grad():
            out = _run(fn, metas, tracer, name)
    else:
        with ember.no_grad():
            out = _run(fn, metas, tracer, name)

    leaves, out_spec = tree_flatten(out)
    # a written input's new value is differentiable only when the write recorded history: a
    # leaf that requires grad can only be written under no_grad, and eager mode then gives it
    # no gradient through that write (it must not get a zero one)
    mutated = tuple(r.input_index for r in tracer.inputs if r.version > 0)
    fwd_nodes = [tracer.inputs[i].value for i in mutated]
    fwd_tensors = [metas[i] for i in mutated]
    outputs = []
    for leaf in leaves:
        if isinstance(leaf, ember.Tensor):
            alias = tracer.input_alias(leaf)
            position = len(fwd_nodes)
            fwd_nodes.append(tracer.node_of(leaf))
            fwd_tensors.append(leaf)
            if alias is not None and _replayable(alias[1]):
                outputs.append(("alias", alias[0], alias[1], position))
            else:
                outputs.append(("graph", position))
        else:
            outputs.append(("constant", leaf))

    info = TraceInfo(
        num_primals=len(primals),
        mutated_inputs=mutated,
        outputs=outputs,
        out_spec=out_spec,
        num_fwd_outputs=len(fwd_nodes),
        fwd_output_requires_grad=tuple(
            _differentiable(t) and (k >= len(mutated) or t.grad_fn is not None) for k, t in enumerate(fwd_tensors)
        ),
    )
    result = list(fwd_nodes)
    if joint:
        result += _trace_backward(graph, tracer, metas, fwd_tensors, info, last_placeholder, tangents_like, name)
    graph.output(tuple(result))
    if joint and decompositions:  # traced again: this graph needs no module (whose code would be generated)
        _eliminate_dead_code(graph)
        return _decompose(graph, root, info, decompositions, device, name), info
    return _finish(root, graph, info), info


def _eliminate_dead_code(graph):
    # random ops stay even when unused: eager mode draws their numbers (aot/rng.py)
    graph.eliminate_dead_code(
        is_impure_node=lambda n: n.op in ("placeholder", "output")
        or (n.op == "call_function" and is_random_op(n.target))
    )


def _finish(root, graph, info):
    _eliminate_dead_code(graph)
    gm = GraphModule(root, graph)
    gm.num_fwd_outputs = info.num_fwd_outputs
    gm.aot_info = info
    return gm


def _decompose(joint_graph, joint_root, info, decompositions, device, name):
    """Trace the functional joint graph again, without autograd, applying ``decompositions``.

    Decomposing while autograd records would change what autograd saves: ``relu(x,
    inplace=True)`` decomposed to ``maximum(x, 0)`` saves ``x``, which the in-place write then
    changes, an error eager mode never raises (its ``relu`` formula reads the result). So
    the joint graph is traced with the ops' own formulas, then decomposed here, as a graph
    of values: nothing in it is written in place. ``joint_root`` holds the joint graph's constants
    (its ``get_attr`` targets, plain attribute names).
    """
    graph = Graph()
    root = ember.nn.Module()
    tracer = FunctionalTracer(graph, root, decompositions, device=device, fn_name=name)
    env = {}
    for node in joint_graph.nodes:
        if node.op == "placeholder":
            env[node] = meta_copy(node.meta["val"])
            tracer.add_input(env[node], graph.placeholder(node.name))
        elif node.op == "get_attr":  # a real constant: traced as its meta copy (the graph keeps the real one)
            env[node] = tracer._meta_arg(getattr(joint_root, node.target))

    def run():
        for node in joint_graph.nodes:
            if node.op == "call_function":
                args = _map_nodes(node.args, env)
                kwargs = _map_nodes(node.kwargs, env)
                env[node] = node.target(*args, **kwargs)
            elif node.op == "output":
                return _map_nodes(node.args[0], env)
        raise InductorError(f"aot: the joint graph of {name} has no output")

    with ember.no_grad():
        outs = _run(run, (), tracer, name)
    graph.output(tuple(tracer.node_of(o) if isinstance(o, ember.Tensor) else o for o in outs))
    return _finish(root, graph, info)


def _map_nodes(value, env):
    """``value`` (node arguments) with every node replaced by its value in ``env``."""
    from ember.fx import Node

    if isinstance(value, Node):
        return env[value]
    if isinstance(value, list):  # fx's immutable lists become plain ones, which the dispatcher scans
        return [_map_nodes(v, env) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_map_nodes(v, env) for v in value)
    if isinstance(value, dict):
        return {k: _map_nodes(v, env) for k, v in value.items()}
    return value


def _replayable(chain):
    """Whether a view chain can be replayed eagerly on the real input (no tensor arguments)."""
    from ember.fx import Node

    def has_node(a):
        if isinstance(a, Node):
            return True
        if isinstance(a, (list, tuple)):
            return any(has_node(v) for v in a)
        if isinstance(a, dict):
            return any(has_node(v) for v in a.values())
        return False

    return not any(has_node(rest) or has_node(kwargs) for _op, rest, kwargs, _i in chain)


def _trace_backward(graph, tracer, metas, fwd_tensors, info, last_placeholder, tangents_like, name):
    """Add tangent placeholders and the recorded ``ember.autograd.grad`` call; return the grad nodes."""
    tangent_outputs = tuple(i for i, t in enumerate(fwd_tensors) if info.fwd_output_requires_grad[i])
    info.tangent_outputs = tangent_outputs
    if tangents_like is not None and len(tangents_like) != len(tangent_outputs):
        raise ValueError(
            f"trace_joint: tangents_like has {len(tangents_like)} tensors but {name} has {len(tangent_outputs)} "
            "outputs that require grad"
        )
    tangents = []
    anchor = last_placeholder
    for k, i in enumerate(tangent_outputs):
        out = fwd_tensors[i]
        like = tangents_like[k] if tangents_like is not None else None
        if like is not None and tuple(like.shape) != tuple(out.shape):
            raise ValueError(
                f"trace_joint: tangents_like[{k}] has shape {tuple(like.shape)}, expected {tuple(out.shape)}"
            )
        tangent = ember.empty(tuple(out.shape), dtype=out.dtype, device="meta")
        if anchor is None:
            ctx = graph.inserting_before(None)
        else:
            ctx = graph.inserting_after(anchor)
        with ctx:
            node = graph.placeholder(f"tangents_{k + 1}")
        anchor = node
        tracer.add_input(tangent, node)
        tangents.append(tangent)
    wanted = [i for i, m in enumerate(metas) if m.requires_grad]
    grads = [None] * len(metas)
    if tangents and wanted:
        outs = [fwd_tensors[i] for i in tangent_outputs]
        with ember.enable_grad():
            found = _run(
                lambda: ember.autograd.grad(
                    outs, [metas[i] for i in wanted], grad_outputs=tangents, allow_unused=True
                ),
                (),
                tracer,
                name,
                " (its backward pass: a derivative formula reads values)",
            )
        for i, g in zip(wanted, found):
            grads[i] = tracer.node_of(g) if g is not None else None
    # the tangent placeholders were registered as inputs too; keep only the primals' roots
    del tracer.inputs[info.num_primals :]
    return grads


def trace_joint(fn, primals, tangents_like=None, *, decompositions=None):
    """Trace ``fn``'s forward and backward into one functional graph, on meta tensors.

    Args:
        fn (callable): ``fn(*primals)`` returns a tensor or a pytree of tensors (and constants).
        primals (sequence[Tensor]): example inputs (real or meta); those that require grad
            (and are floating point) get a gradient.
        tangents_like (sequence[Tensor] or None): example cotangents, one per forward output
            that requires grad (only their shapes are read); by default like the outputs.
        decompositions (dict[Op, callable] or None): ops to decompose while tracing.

    Returns:
        GraphModule: placeholders ``primals_1..n`` then ``tangents_1..m``, output
        ``(*forward_outputs, *grads)``, every node with ``meta["val"]``. It has the attributes
        ``num_fwd_outputs`` (int) and ``aot_info`` (:class:`TraceInfo`).

    Raises:
        InductorError: when ``fn`` reads a tensor's value (data-dependent control flow) or
            writes into a tensor it does not take as an input.
        TypeError: if a primal is not a tensor.

    Example:
        >>> import ember
        >>> from ember._inductor.aot.joint import trace_joint
        >>> gm = trace_joint(lambda x: x.sin(), [ember.randn(3, requires_grad=True)])
        >>> [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        ['primals_1', 'tangents_1']
    """
    gm, _info = _trace(fn, list(primals), joint=True, decompositions=decompositions, tangents_like=tangents_like)
    return gm


def trace_forward(fn, primals, *, decompositions=None):
    """Trace ``fn(*primals)`` without autograd into a functional graph (the inference path).

    Returns:
        GraphModule: placeholders ``primals_1..n``, output ``(*forward_outputs,)`` as in
        :func:`trace_joint`, with ``num_fwd_outputs`` and ``aot_info``.
    """
    gm, _info = _trace(fn, list(primals), joint=False, decompositions=decompositions)
    return gm
