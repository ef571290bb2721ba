"""The emission step of export: a :class:`~._capture.CapturedGraph` -> an ``onnx.ModelProto``.

Walks the captured graph once. Placeholders become graph inputs (dynamic axes get
their ``dim_param``), ``get_attr`` tensors become initializers (or inputs, with
``export_params=False``), and each op node is handed to its rule from
:data:`._rules.RULES` with its arguments bound by name. The outputs are renamed to
``output_names`` through ``Identity`` nodes.
"""

from __future__ import annotations

import operator

from ._builder import GraphBuilder, UnsupportedOperatorError, onnx_dtype
from ._capture import describe
from ._rules import RULES, rule_for

__all__ = ["emit", "check_supported"]


def _op_name(target):
    return getattr(target, "name", None) or getattr(target, "__name__", repr(target))


def check_supported(captured):
    """Raise :class:`UnsupportedOperatorError` listing every node whose op has no ONNX rule."""
    missing = []
    for node in captured.graph_module.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem and rule_for(node.target) is None:
            missing.append(node)
        elif node.op in ("call_module", "call_method"):
            missing.append(node)
    if not missing:
        return
    lines = [f"  {_op_name(n.target)!r} ({describe(n)})" for n in missing]
    first = missing[0]
    raise UnsupportedOperatorError(
        "ember.onnx.export: no ONNX rule for these ops:\n"
        + "\n".join(lines)
        + "\n(ember.onnx.supported_ops() lists the ops that export; rewrite the model with those, "
        "or add a rule to ember.onnx's rule tables)",
        op=_op_name(first.target),
        node=first.name,
        location=first.meta.get("location"),
    )


def _value_info(name, meta, dim_names):
    """A ValueInfoProto for ``name``; axes in ``dim_names`` (axis -> str) are symbolic."""
    from onnx import helper

    shape = [dim_names.get(axis, size) for axis, size in enumerate(meta.shape)]
    return helper.make_tensor_value_info(name, onnx_dtype(meta.dtype), shape)


def _map_nodes(value, env):
    """``value`` with FX nodes replaced by their ONNX value names."""
    if hasattr(value, "op") and hasattr(value, "name") and hasattr(value, "users"):
        return env[value]
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(_map_nodes(v, env) for v in value)
    return value


def _output_dim_names(captured, j, output_name, declared):
    """Output ``j``'s symbolic axes: axis -> dim_param, from its fitted sizes and ``dynamic_axes``."""
    names = {}
    for axis, expr in captured.output_axes[j].items():
        if expr is None:
            names[axis] = f"{output_name}_dim_{axis}"
            continue
        simple = expr.offset == 0 and expr.coeff == 1 and len(expr.powers) == 1 and expr.powers[0][1] == 1
        names[axis] = expr.powers[0][0] if simple else str(expr)
    rank = len(captured.outputs[j].meta["tensor_meta"].shape)
    if declared is None:
        return names
    if isinstance(declared, dict):
        items = [(axis, str(n)) for axis, n in declared.items()]
    elif isinstance(declared, (list, tuple)):
        items = [(axis, f"{output_name}_dynamic_axes_{k + 1}") for k, axis in enumerate(declared)]
    else:
        raise TypeError(
            f"dynamic_axes[{output_name!r}] must be a dict {{axis: name}} or a list of axes, got {declared!r}"
        )
    for axis, name in items:
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise ValueError(
                f"dynamic_axes[{output_name!r}]: axis {axis!r} is out of range for an output of rank {rank}"
            )
        if isinstance(declared, dict) or axis % rank not in names:
            names[axis % rank] = name
    return names


def emit(captured, *, opset, output_names, dynamic_axes=None, export_params=True, model_doc=""):
    """Build the ONNX model for ``captured``.

    Args:
        captured (CapturedGraph): from :func:`~._capture.capture`.
        opset (int): the default-domain opset version.
        output_names (list[str]): one name per flat output.
        dynamic_axes (dict or None): as in :func:`ember.onnx.export` (only output entries are read here;
            input axes come from ``captured``).
        export_params (bool): store parameters and buffers as initializers (else as graph inputs).
        model_doc (str): the model's doc string.

    Returns:
        onnx.ModelProto

    Raises:
        UnsupportedOperatorError: for an op (or argument) with no ONNX rule.
    """
    import ember
    import onnx
    from onnx import helper

    check_supported(captured)
    dims = {a.name: (captured.input_names[a.input_index], a.axis) for a in captured.axes}
    g = GraphBuilder(opset, dims)
    # the user's names first, so that no value made on the way can take one of them
    for name in [*captured.input_names, *output_names[: len(captured.outputs)]]:
        g.reserve(name)
    env, inputs, params = {}, [], []
    placeholder_index = 0
    for node in captured.graph_module.graph.nodes:
        if node.op == "placeholder":
            name = captured.input_names[placeholder_index]
            meta = node.meta["tensor_meta"]
            inputs.append(_value_info(name, meta, captured.input_axes.get(placeholder_index, {})))
            placeholder_index += 1
        elif node.op == "get_attr":
            public, tensor, is_state = captured.attributes[node.target]
            name = g.fresh(public)
            meta = node.meta["tensor_meta"]
            if is_state and not export_params:
                params.append(_value_info(name, meta, {}))
            else:
                g.initializer(name, tensor.detach().cpu().numpy())
        elif node.op == "call_function":
            name = _emit_call(g, node, env, captured)
            meta = node.meta.get("tensor_meta")
        elif node.op == "output":
            continue
        else:  # check_supported rejected these
            continue
        env[node] = name
        if isinstance(name, str) and meta is not None:
            g.set_meta(name, meta, node.meta.get("sym_shape"))
    outputs = []
    g.current = None
    for j, node in enumerate(captured.outputs):
        name = output_names[j]
        g.nodes.append(helper.make_node("Identity", [env[node]], [name], name=g.fresh(f"Identity_{name}")))
        declared = (dynamic_axes or {}).get(output_names[j])
        outputs.append(_value_info(name, node.meta["tensor_meta"], _output_dim_names(captured, j, name, declared)))
    graph = helper.make_graph(g.nodes, "ember_graph", inputs + params, outputs, initializer=g.initializers)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="ember",
        producer_version=getattr(ember, "__version__", ""),
        ir_version=onnx.helper.find_min_ir_version_for(opsets),
    )
    model.doc_string = model_doc
    return model


def _emit_call(g, node, env, captured):
    """Emit one op node; returns its value name (or list of names for several outputs)."""
    if node.target is operator.getitem:
        source, index = node.args
        return env[source][index]
    g.current = node
    g.out = node.meta.get("tensor_meta")
    args, kwargs = captured.sym_args.get(node.name, (node.args, node.kwargs))
    op = node.target
    # an in-place op (``relu_``) without a rule of its own binds as, and emits like, its functional op
    rule = rule_for(op)
    if op not in RULES and getattr(op, "functional", None) is not None:
        op = op.functional
    try:
        bound = op.signature.bind(*args, **kwargs)
    except TypeError as e:
        g.unsupported(f"its recorded arguments do not fit the op's signature ({e})")
    bound.apply_defaults()
    arguments = {k: _map_nodes(v, env) for k, v in bound.arguments.items()}
    try:
        result = rule(g, **arguments)
    except UnsupportedOperatorError:
        raise
    except Exception as e:
        g.unsupported(f"its ONNX rule failed: {type(e).__name__}: {e}")
    if isinstance(result, (list, tuple)):
        metas = g.out if isinstance(g.out, tuple) else (None,) * len(result)
        for name, meta in zip(result, metas):
            if meta is not None:
                g.set_meta(name, meta)
        return list(result)
    return result
