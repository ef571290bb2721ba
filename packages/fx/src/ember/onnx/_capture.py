"""The capture step of export: a module and example inputs -> an FX graph of registry ops.

:func:`capture` is independent of ONNX: it records the model with
:func:`~ember.fx.experimental.proxy_tensor.dispatch_trace`'s machinery (each node is a
call of an :class:`ember._ops._registry.Op`, its arguments bound to the op's
signature), names the tensors the graph reads (parameters and buffers by their
``state_dict`` names), records each node's example shape and dtype and where in the
user's code it was made, and, for dynamic axes, which integer arguments are sizes
(:mod:`._dynamic`). Emitters (ONNX here, mobile later) read the
:class:`CapturedGraph` it returns.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from dataclasses import dataclass, field

from ember.fx.experimental.proxy_tensor import ProxyDispatchMode
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule

from ._dynamic import DynamicAxis, SymInt, fit, trial_sizes

__all__ = ["CapturedGraph", "TensorMeta", "capture", "CaptureError"]


class CaptureError(RuntimeError):
    """The model could not be captured as one graph valid for every size of its dynamic axes."""


@dataclass(frozen=True)
class TensorMeta:
    """The example shape and dtype of a graph value."""

    shape: tuple
    dtype: object  # ember.dtype


@dataclass
class CapturedGraph:
    """A model recorded as a graph of registry ops.

    Attributes:
        graph_module (GraphModule): the graph; its placeholders are the flat tensor
            inputs, in order; ``node.meta["tensor_meta"]`` is a :class:`TensorMeta` (or a
            tuple of them for ops with several outputs); ``node.meta["location"]`` is
            ``"file:line in function"`` of the user code that made the node, when known.
        input_names (list[str]): one name per placeholder.
        inputs (list[ember.Tensor]): the example inputs.
        outputs (list): the flat outputs' nodes (the graph's output is a tuple of them).
        attributes (dict[str, tuple[str, ember.Tensor, bool]]): for each ``get_attr``
            target, its public name (the ``state_dict`` key for parameters and buffers),
            the tensor, and whether it is a parameter or buffer of the model.
        axes (list[DynamicAxis]): the dynamic axes.
        input_axes (dict[int, dict[int, str]]): input index -> {axis: axis name}.
        sym_args (dict[str, tuple[tuple, dict]]): for each node with size-dependent
            integer arguments (by node name), its args and kwargs with those integers
            replaced by :class:`~._dynamic.SymInt`.
        output_axes (list[dict[int, DimExpr | None]]): per flat output, its size-dependent axes
            (None where the size is not a function :mod:`._dynamic` can fit).
    """

    graph_module: GraphModule
    input_names: list
    inputs: list
    outputs: list
    attributes: dict
    axes: list = field(default_factory=list)
    input_axes: dict = field(default_factory=dict)
    sym_args: dict = field(default_factory=dict)
    output_axes: list = field(default_factory=list)


def _ember_dirs():
    import ember

    return tuple(os.path.join(os.path.realpath(p), "") for p in ember.__path__)


def _user_location(ember_dirs):
    """``file:line in function`` of the innermost frame outside the ember packages, or None."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = os.path.realpath(frame.f_code.co_filename)
        if not filename.startswith(ember_dirs):
            return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return None


def describe(node):
    """``node 'name', in module 'path' (Class), at file:line in fn`` from what capture recorded."""
    text = f"node {node.name!r}"
    if node.meta.get("module"):
        text += f", in module {node.meta['module']}"
    if node.meta.get("location"):
        text += f", at {node.meta['location']}"
    return text


@contextlib.contextmanager
def _module_scopes(model, stack):
    """Keep ``stack`` holding ``'path' (Class)`` of the submodules of ``model`` whose forward is running."""

    def leave(module, args, output):
        stack.pop()  # returns None: a forward hook's non-None result would replace the output

    handles = []
    if hasattr(model, "named_modules"):
        for name, module in model.named_modules():
            label = f"{name or '<root>'!r} ({type(module).__name__})"
            handles.append(module.register_forward_pre_hook(lambda m, a, label=label: stack.append(label)))
            handles.append(module.register_forward_hook(leave, always_call=True))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


class _RecordingMode(ProxyDispatchMode):
    """:class:`ProxyDispatchMode` that also records each value's example metadata and where the user's code made it.

    Args:
        graph, root: as for :class:`ProxyDispatchMode`.
        modules (list[str]): the stack of running submodules (see :func:`_module_scopes`).
        decompositions (dict[Op, callable] or None): ops recorded through their decomposition.
    """

    def __init__(self, graph, root, modules, decompositions=None):
        super().__init__(graph, root, decompositions)
        self._ember_dirs = _ember_dirs()
        self._modules = modules

    def track(self, tensor, node):
        super().track(tensor, node)
        node.meta["tensor_meta"] = TensorMeta(tuple(tensor.shape), tensor.dtype)

    def _track_result(self, result, node):
        if isinstance(result, (tuple, list)):
            node.meta["tensor_meta"] = tuple(
                TensorMeta(tuple(t.shape), t.dtype) if hasattr(t, "shape") else None for t in result
            )
        super()._track_result(result, node)

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        last = next(reversed(self.graph.nodes), None)
        result = super().__ember_dispatch__(func, types, args, kwargs)
        location = _user_location(self._ember_dirs)
        module = self._modules[-1] if self._modules else None
        for node in reversed(self.graph.nodes):
            if node is last or "location" in node.meta:
                break
            node.meta["location"] = location
            node.meta["module"] = module
        return result


def _trace(fn, tensors, model=None, decompositions=None):
    """Record ``fn(*tensors)`` (which returns a flat tuple of tensors) as a GraphModule."""
    from ember.nn import Module

    root = Module()
    graph = Graph()
    modules = []
    mode = _RecordingMode(graph, root, modules, decompositions)
    for i, t in enumerate(tensors):
        mode.track(t, graph.placeholder(f"arg{i}_1"))
    with _module_scopes(model, modules), mode:
        out = fn(*tensors)
    graph.output(tuple(mode.node_of(t) for t in out))
    # ops whose results only steered Python control flow (a mask checked for causality, say) are dead here
    graph.eliminate_dead_code()
    return GraphModule(root, graph)


def _flat_call(model, args, kwargs):
    """``(fn, tensors)``: ``fn(*tensors)`` calls the model on the flat tensor inputs and returns a flat tuple."""
    import ember
    from ember.utils._pytree import tree_flatten, tree_leaves, tree_unflatten

    leaves, spec = tree_flatten((tuple(args), dict(kwargs)))
    slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, ember.Tensor)]

    def fn(*tensors):
        filled = list(leaves)
        for i, t in zip(slots, tensors):
            filled[i] = t
        call_args, call_kwargs = tree_unflatten(filled, spec)
        out = model(*call_args, **call_kwargs)
        flat = [v for v in tree_leaves(out) if v is not None]
        for v in flat:
            if not isinstance(v, ember.Tensor):
                raise CaptureError(f"the model returned a {type(v).__name__} ({v!r}); only tensors can be exported")
        return tuple(flat)

    return fn, [leaves[i] for i in slots]


def _resize(tensor, axis, size):
    """``tensor`` with ``axis`` resized to ``size`` by repeating its entries (values stay valid indices)."""
    import ember

    index = ember.arange(size, device=tensor.device) % tensor.shape[axis]
    return ember.index_select(tensor, axis, index)


def _attributes(gm, model):
    """get_attr target -> (public name, tensor, is_state) using the model's parameter and buffer names."""
    names = {}
    if hasattr(model, "named_parameters") and hasattr(model, "named_buffers"):
        for name, t in list(model.named_buffers()) + list(model.named_parameters()):
            names.setdefault(id(t), name)
    out = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            t = getattr(gm, node.target)
            name = names.get(id(t))
            out[node.target] = (name or node.target, t, name is not None)
    return out


def _structure(gm):
    """The nodes of ``gm``'s graph as comparable tuples, with integers replaced by a marker."""

    def shape_of(x):
        if isinstance(x, (tuple, list)):
            return tuple(shape_of(v) for v in x)
        if isinstance(x, dict):
            return tuple((k, shape_of(v)) for k, v in x.items())
        if isinstance(x, int) and not isinstance(x, bool):
            return int
        if hasattr(x, "op") and hasattr(x, "name"):  # a Node
            return ("node", x.name)
        return x

    return [(n.op, n.target, shape_of(n.args), shape_of(n.kwargs)) for n in gm.graph.nodes]


def _ints(x, path=()):
    """``(path, value)`` for every integer inside nested args."""
    if isinstance(x, (tuple, list)):
        for i, v in enumerate(x):
            yield from _ints(v, (*path, i))
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _ints(v, (*path, k))
    elif isinstance(x, int) and not isinstance(x, bool):
        yield path, x


def _replace(x, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(x, dict):
        return {**x, head: _replace(x[head], rest, value)}
    items = list(x)
    items[head] = _replace(items[head], rest, value)
    return type(x)(items) if not hasattr(x, "_fields") else type(x)(*items)


def _parse_axes(dynamic_axes, input_names, tensors):
    """Validate ``dynamic_axes`` for the inputs: (list[DynamicAxis], {input index: {axis: name}})."""
    axes, by_input = {}, {}
    for i, name in enumerate(input_names):
        spec = dynamic_axes.get(name)
        if spec is None:
            continue
        rank = tensors[i].dim()
        if isinstance(spec, dict):
            items = list(spec.items())
        elif isinstance(spec, (list, tuple)):
            items = [(a, f"{name}_dynamic_axes_{k + 1}") for k, a in enumerate(spec)]
        else:
            raise TypeError(f"dynamic_axes[{name!r}] must be a dict {{axis: name}} or a list of axes, got {spec!r}")
        for axis, axis_name in items:
            if not isinstance(axis, int) or not -rank <= axis < rank:
                raise ValueError(f"dynamic_axes[{name!r}]: axis {axis!r} is out of range for an input of rank {rank}")
            axis %= rank
            size = tensors[i].shape[axis]
            known = axes.get(axis_name)
            if known is None:
                axes[axis_name] = DynamicAxis(str(axis_name), i, axis, size)
            elif known.size != size:
                raise ValueError(
                    f"dynamic_axes: axis {axis_name!r} has size {known.size} in input "
                    f"{input_names[known.input_index]!r} but {size} in input {name!r}"
                )
            by_input.setdefault(i, {})[axis] = str(axis_name)
    return list(axes.values()), by_input


def capture(model, args, kwargs=None, *, input_names=None, dynamic_axes=None, decompositions=None):
    """Record ``model(*args, **kwargs)`` as a graph of registry ops.

    Args:
        model (callable): an ``ember.nn.Module`` (or any callable taking tensors).
        args (tuple): example positional arguments; tensors anywhere inside (tuples,
            lists, dicts) become graph inputs, other values are fixed.
        kwargs (dict or None): example keyword arguments, treated like ``args``.
        input_names (list[str] or None): names of the flat tensor inputs; default
            ``arg0, arg1, ...``.
        dynamic_axes (dict[str, dict[int, str] | list[int]] or None): for inputs (by
            name), the axes whose size may change.
        decompositions (dict[Op, callable] or None): ops to record through their
            decomposition (the ops it calls) instead of as one node; an emitter passes
            the composite ops it has no rule for.

    Returns:
        CapturedGraph: see its attributes.

    Raises:
        CaptureError: if the model returns non-tensors, or its graph changes shape with
            a dynamic axis in a way that cannot be expressed (an unrolled loop over a
            dynamic length, a size that is not a product of axes).
        ValueError: for bad ``input_names`` or ``dynamic_axes``.
    """
    fn, tensors = _flat_call(model, args, kwargs or {})
    if input_names is None:
        input_names = [f"arg{i}" for i in range(len(tensors))]
    if len(input_names) != len(tensors):
        raise ValueError(f"input_names has {len(input_names)} names but the model takes {len(tensors)} tensor inputs")
    trace = functools.partial(_trace, model=model, decompositions=decompositions)
    gm = trace(fn, tensors)
    output_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    captured = CapturedGraph(
        graph_module=gm,
        input_names=list(input_names),
        inputs=list(tensors),
        outputs=list(output_node.args[0]),
        attributes=_attributes(gm, model),
    )
    captured.axes, captured.input_axes = _parse_axes(dynamic_axes or {}, input_names, tensors)
    captured.output_axes = [{} for _ in captured.outputs]
    if captured.axes:
        _find_sym_ints(captured, fn, tensors, trace)
    return captured


def _retrace(fn, tensors, trace, captured, sizes):
    """Trace again with the dynamic axes resized to ``sizes`` and check the graph has the same structure."""
    resized = []
    for i, t in enumerate(tensors):
        for axis, name in captured.input_axes.get(i, {}).items():
            t = _resize(t, axis, sizes[name])
        resized.append(t)
    where = ", ".join(f"{k}={v}" for k, v in sizes.items())
    try:
        gm = trace(fn, resized)
    except Exception as e:
        raise CaptureError(
            f"re-tracing the model with dynamic axes resized ({where}) to find size-dependent values failed: "
            f"{type(e).__name__}: {e}"
        ) from e
    base, other = _structure(captured.graph_module), _structure(gm)
    for i, (a, b) in enumerate(zip(base, other)):
        if a != b:
            node = list(captured.graph_module.graph.nodes)[i]
            raise CaptureError(
                f"the graph changes with the dynamic axes ({where}) at {describe(node)}: its ops or their "
                "non-size arguments depend on those sizes (a Python loop over a dynamic axis, say); "
                "export with that axis static"
            )
    if len(base) != len(other):
        raise CaptureError(
            f"the graph has {len(base)} nodes at the example sizes but {len(other)} with dynamic axes resized "
            f"({where}): it depends on those sizes (a Python loop over a dynamic axis, say); "
            "export with that axis static"
        )
    for node, new in zip(captured.graph_module.graph.nodes, gm.graph.nodes):
        if node.op == "get_attr":
            a, b = getattr(captured.graph_module, node.target), getattr(gm, new.target)
            if tuple(a.shape) != tuple(b.shape):
                raise CaptureError(
                    f"the constant {node.target!r} has shape {tuple(a.shape)} at the example sizes but "
                    f"{tuple(b.shape)} with dynamic axes resized ({where}): a tensor was built outside the traced "
                    f"ops from a size ({describe(node)})"
                )
    return gm


def _find_sym_ints(captured, fn, tensors, trace):
    """Fill ``captured.sym_args`` and ``captured.output_axes`` from traces at other sizes."""
    names = [a.name for a in captured.axes]
    base_sizes = {a.name: a.size for a in captured.axes}
    single_sizes, verify_sizes = {}, {}
    for a in captured.axes:
        single_sizes[a.name], verify_sizes[a.name] = trial_sizes(a.size)
    singles = [_retrace(fn, tensors, trace, captured, {**base_sizes, n: single_sizes[n]}) for n in names]
    verify = _retrace(fn, tensors, trace, captured, verify_sizes)
    node_lists = [list(g.graph.nodes) for g in (*singles, verify)]

    def fitted(base_value, values, describe):
        expr = fit(base_value, values[:-1], values[-1], names, base_sizes, single_sizes, verify_sizes)
        if expr is None:
            raise CaptureError(
                f"{describe} takes the values {[base_value, *values]} for the dynamic axis sizes "
                f"{[base_sizes, *({**base_sizes, n: single_sizes[n]} for n in names), verify_sizes]}; "
                "it is neither a product of dynamic axes nor an affine function of one"
            )
        return expr

    def fitted_or_none(base_value, values):
        return fit(base_value, values[:-1], values[-1], names, base_sizes, single_sizes, verify_sizes)

    for k, node in enumerate(captured.graph_module.graph.nodes):
        others = [nodes[k] for nodes in node_lists]
        args, kwargs = node.args, dict(node.kwargs)
        changed = False
        for path, value in _ints((node.args, node.kwargs)):
            values = [_lookup((o.args, o.kwargs), path) for o in others]
            if all(v == value for v in values):
                continue
            expr = fitted(value, values, f"argument {path} of {describe(node)}")
            args, kwargs = _replace((args, kwargs), path, SymInt(value, expr))
            changed = True
        if changed:
            captured.sym_args[node.name] = (args, kwargs)
        meta = node.meta.get("tensor_meta")
        if meta is not None:
            metas = [o.meta["tensor_meta"] for o in others]
            if isinstance(meta, tuple):
                shapes = [_sym_shape(m, [ms[i] for ms in metas], fitted_or_none) for i, m in enumerate(meta)]
                if any(s is not None for s in shapes):
                    node.meta["sym_shape"] = tuple(s or (m.shape if m else None) for s, m in zip(shapes, meta))
            else:
                shape = _sym_shape(meta, metas, fitted_or_none)
                if shape is not None:
                    node.meta["sym_shape"] = shape
    for j, node in enumerate(captured.outputs):
        # None for an axis that changes in another way: it gets a symbolic name of its own
        shape = node.meta.get("sym_shape") or ()
        captured.output_axes[j] = {axis: size.expr for axis, size in enumerate(shape) if isinstance(size, SymInt)}


def _sym_shape(meta, others, fit_one):
    """The shape of ``meta`` with the axes that differ in ``others`` (the other traces' metas) as SymInt, or None."""
    if meta is None or any(o is None or len(o.shape) != len(meta.shape) for o in others):
        return None
    shape, dynamic = [], False
    for axis, size in enumerate(meta.shape):
        values = [o.shape[axis] for o in others]
        if all(v == size for v in values):
            shape.append(size)
        else:
            shape.append(SymInt(size, fit_one(size, values)))
            dynamic = True
    return tuple(shape) if dynamic else None


def _lookup(x, path):
    for key in path:
        x = x[key]
    return x
