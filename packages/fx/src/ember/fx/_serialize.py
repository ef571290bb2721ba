"""``ember.save``/``ember.load`` of a :class:`~ember.fx.GraphModule`, without pickle and without running stored code.

A GraphModule is saved as data (through :func:`ember.serialization.register_serializable_type`):

* its **graph** as a list of nodes: opcode, name, target and arguments. A
  ``call_function`` target is stored as a qualified name (``"ember.relu"``,
  ``"operator.add"``); arguments are tagged values (node references, constants,
  containers);
* its **submodules** as constructor records: an ``ember.nn`` class name and literal
  arguments, read from the layer's one-line ``repr`` when saving and checked to rebuild
  a layer of the same class and state layout; plain holder modules and nested
  GraphModules (from :func:`~ember.fx.passes.split_module.split_module`) recursively;
* its **tensors** (parameters, buffers, tensor attributes) by qualified name, stored by
  :func:`ember.save` itself;
* the pytree input/output structures, if any, as :func:`~ember.utils._pytree.treespec_dumps` text.

Why loading is safe: no stored text is executed, evaluated or imported. Loading rebuilds
the graph with :class:`~ember.fx.Graph` calls, and every name the file gives is resolved
against an allow-list, never by importing:

* ``call_function`` targets (and callables among arguments) must be ember registry ops
  (reached as ``ember.<op>``, ``ember.nn.functional.<op>`` or ``ember._ops.get(name)``),
  the public functions of ``ember.nn.functional``, a few side-effect-free ``ember``
  helpers, the functions of :mod:`operator` and :mod:`math`, or the builtins in
  :data:`SAFE_BUILTINS` (``getattr``, ``len``, ...). ``ember.save``, ``ember.load``,
  ``ember.manual_seed``, ``ember.set_default_dtype`` ... are *not* allowed;
* ``getattr`` with a constant attribute name and ``call_method`` targets must be public
  names (no leading underscore) of :class:`ember.Tensor` methods/attributes, so a graph
  cannot walk from a value to ``__globals__``, ``__subclasses__`` or a file-writing
  method of another type;
* submodule classes must be ``ember.nn`` layers, called with literal arguments;
* ``get_attr`` targets must be tensors and ``call_module`` targets modules of the rebuilt
  module (so a target cannot name ``forward.__globals__`` or another attribute).

A file that names anything else is refused with :class:`ember.serialization.SerializationError`
naming the node and the target. The cost: graphs calling user functions (``ember.fx.wrap``),
user-defined leaf modules or layers whose ``repr`` does not rebuild them cannot be saved
this way; :func:`ember.save` raises ``TypeError`` for them when saving, not when loading.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator

__all__ = ["SAFE_BUILTINS", "register"]

FORMAT = 1
TYPE_NAME = "ember.fx.GraphModule"

#: Builtins a saved graph may call: pure functions of their arguments.
SAFE_BUILTINS = frozenset(
    {
        "getattr", "len", "abs", "min", "max", "sum", "round", "float", "int", "bool", "complex",
        "tuple", "list", "dict", "slice", "range", "isinstance", "divmod", "pow", "all", "any",
    }
)  # fmt: skip

# ember functions that are not registry ops but only compute (no files, global state or randomness).
_SAFE_EMBER_HELPERS = frozenset(
    {
        "can_cast", "promote_types", "result_type", "as_tensor", "asarray", "tensor", "broadcast_shapes",
        "is_tensor", "numel", "is_floating_point", "is_complex", "get_default_dtype", "is_grad_enabled",
    }
)  # fmt: skip


# operator functions that call or look up what their arguments name: they would let a graph reach
# arbitrary attributes (operator.attrgetter("__globals__")) and call them (operator.call).
_UNSAFE_OPERATOR = frozenset({"call", "attrgetter", "methodcaller", "itemgetter"})


def _is_identifier(name):
    return type(name) is str and name.isidentifier()


def _error(what):
    from ember.serialization import SerializationError

    return SerializationError(f"ember.load: GraphModule: {what}")


# -- callables ---------------------------------------------------------------------------------------


def _callable_name(fn, where):
    """The stored name of callable ``fn``, checked against the allow-list when saving."""
    from ember._ops import Op

    from ._names import op_path

    if isinstance(fn, Op):
        return op_path(fn) or f"ember._ops.get:{fn.name}"
    name = getattr(fn, "__name__", None)
    module = {"_operator": "operator"}.get(getattr(fn, "__module__", None), getattr(fn, "__module__", None))
    candidates = []
    if name is not None:
        if getattr(builtins, name, None) is fn:
            candidates.append(f"builtins.{name}")
        if getattr(operator, name, None) is fn:
            candidates.append(f"operator.{name}")
        if getattr(math, name, None) is fn:
            candidates.append(f"math.{name}")
        if module and module.startswith("ember"):
            candidates += [f"ember.nn.functional.{name}", f"ember.{name}"]
    for candidate in candidates:
        try:
            if _resolve_callable(candidate, where) is fn:
                return candidate
        except Exception:  # noqa: BLE001, S112 - not allowed under this name; try the next
            continue
    raise TypeError(
        f"ember.save: GraphModule {where} calls {getattr(fn, '__qualname__', fn)!r}, which is not in the allow-list of "
        "callables a saved graph may name (ember ops, ember.nn.functional, operator, math, safe builtins); "
        "use GraphModule.to_folder for graphs calling your own functions"
    )


def _resolve_callable(name, where):
    """The allowed callable stored as ``name``; raises SerializationError for anything else."""
    import ember
    import ember.nn.functional as F  # noqa: N812 - PyTorch's alias
    from ember import _ops
    from ember._ops import Op

    if type(name) is not str:
        raise _error(f"{where}: a callable must be stored as a string, got {name!r:.60}")
    head, _, attr = name.rpartition(".")
    found = None
    if name.startswith("ember._ops.get:"):
        try:
            found = _ops.get(name.partition(":")[2])
        except (KeyError, ValueError, RuntimeError):
            found = None
    elif head == "builtins" and attr in SAFE_BUILTINS:
        found = getattr(builtins, attr)
    elif head in ("operator", "math") and not attr.startswith("_") and attr not in _UNSAFE_OPERATOR:
        found = getattr(operator if head == "operator" else math, attr, None)
    elif head in ("ember", "ember.nn.functional") and not attr.startswith("_"):
        namespace = ember if head == "ember" else F
        value = getattr(namespace, attr, None)
        if isinstance(value, Op) or (head == "ember.nn.functional" and callable(value)) or attr in _SAFE_EMBER_HELPERS:
            found = value
        if isinstance(value, type) and not isinstance(value, Op):
            found = None  # classes (ember.Tensor, ember.Generator ...) are not call targets
    if found is None or not callable(found):
        raise _error(
            f"{where}: target {name!r:.80} is not in the allow-list (ember ops, ember.nn.functional, operator, "
            "math, safe builtins); refusing to load"
        )
    return found


def _check_attribute_name(name, where, what):
    import ember

    if type(name) is not str or name.startswith("_") or not hasattr(ember.Tensor, name):
        raise _error(f"{where}: {what} {name!r:.80} is not a public attribute of ember.Tensor; refusing to load")


# -- arguments ---------------------------------------------------------------------------------------


def _encode_arg(a, where):
    """A node argument as saveable tagged data: ``[tag, payload...]`` lists."""
    import ember

    from .node import Node

    if isinstance(a, Node):
        return ["n", a.name]
    if a is None or isinstance(a, (bool, int, float, complex, str, ember.dtype, ember.device, ember.Size)):
        return ["c", a]
    if isinstance(a, ember.Tensor):
        return ["c", a]
    if a is Ellipsis:
        return ["e"]
    if isinstance(a, slice):
        return ["s", [_encode_arg(v, where) for v in (a.start, a.stop, a.step)]]
    if isinstance(a, tuple):
        if hasattr(a, "_fields"):
            raise TypeError(f"ember.save: GraphModule {where} has a named tuple argument, which cannot be saved")
        return ["t", [_encode_arg(v, where) for v in a]]
    if isinstance(a, list):
        return ["l", [_encode_arg(v, where) for v in a]]
    if isinstance(a, dict):
        return ["d", [[_encode_arg(k, where), _encode_arg(v, where)] for k, v in a.items()]]
    if callable(a):
        return ["f", _callable_name(a, where)]
    raise TypeError(
        f"ember.save: GraphModule {where} has an argument of type {type(a).__name__}, which cannot be saved"
    )


def _decode_arg(a, env, where):
    import ember

    if type(a) is not list or not a or type(a[0]) is not str:
        raise _error(f"{where}: malformed argument {a!r:.60}")
    tag, payload = a[0], a[1:]
    if tag == "n" and len(payload) == 1:
        node = env.get(payload[0]) if type(payload[0]) is str else None
        if node is None:
            raise _error(f"{where}: refers to node {payload[0]!r:.60}, which is not defined before it")
        return node
    if tag == "c" and len(payload) == 1:
        value = payload[0]
        allowed = (type(None), bool, int, float, complex, str, ember.dtype, ember.device, ember.Size, ember.Tensor)
        if not isinstance(value, allowed):
            raise _error(f"{where}: constant of type {type(value).__name__} is not allowed")
        return value
    if tag == "e" and not payload:
        return Ellipsis
    if tag in ("s", "t", "l") and len(payload) == 1 and type(payload[0]) is list:
        items = [_decode_arg(v, env, where) for v in payload[0]]
        if tag == "s":
            if len(items) != 3:
                raise _error(f"{where}: a slice needs 3 parts")
            return slice(*items)
        return tuple(items) if tag == "t" else items
    if tag == "d" and len(payload) == 1 and type(payload[0]) is list:
        result = {}
        for item in payload[0]:
            if type(item) is not list or len(item) != 2:
                raise _error(f"{where}: malformed dict item")
            key = _decode_arg(item[0], env, where)
            try:
                hash(key)
            except TypeError:
                raise _error(f"{where}: unhashable dict key") from None
            result[key] = _decode_arg(item[1], env, where)
        return result
    if tag == "f" and len(payload) == 1:
        return _resolve_callable(payload[0], where)
    raise _error(f"{where}: unknown argument tag {tag!r:.20}")


# -- the graph ---------------------------------------------------------------------------------------


def _encode_graph(graph):
    from ember.utils._pytree import treespec_dumps

    from .graph import CodeGen, _PyTreeCodeGen

    nodes = []
    for node in graph.nodes:
        where = f"node {node.name!r}"
        if node.op == "call_function":
            target = _callable_name(node.target, where)
        else:
            target = node.target
        nodes.append(
            {
                "op": node.op,
                "name": node.name,
                "target": target,
                "args": _encode_arg(tuple(node.args), where),
                "kwargs": _encode_arg(dict(node.kwargs), where),
            }
        )
    codegen = graph._codegen
    if isinstance(codegen, _PyTreeCodeGen):
        info = codegen.pytree_info
        try:
            specs = [treespec_dumps(info.in_spec), None if info.out_spec is None else treespec_dumps(info.out_spec)]
        except NotImplementedError as exc:
            raise TypeError(f"ember.save: GraphModule input/output structure cannot be saved: {exc}") from None
        pytree = {"orig_args": list(info.orig_args), "in_spec": specs[0], "out_spec": specs[1]}
    elif type(codegen) is CodeGen:
        pytree = None
    else:
        raise TypeError(
            f"ember.save: GraphModule with a custom code generator {type(codegen).__name__} cannot be saved"
        )
    return {"nodes": nodes, "pytree": pytree}


def _decode_graph(data):
    from ember.utils._pytree import treespec_loads

    from .graph import Graph, _PyTreeCodeGen, _PyTreeInfo

    if type(data) is not dict or set(data) != {"nodes", "pytree"} or type(data["nodes"]) is not list:
        raise _error("the graph must be a dict with exactly the fields nodes and pytree")
    graph = Graph()
    env = {}
    for i, record in enumerate(data["nodes"]):
        if type(record) is not dict or set(record) != {"op", "name", "target", "args", "kwargs"}:
            raise _error(f"node record {i} must have exactly the fields op, name, target, args, kwargs")
        op, name, target = record["op"], record["name"], record["target"]
        where = f"node {name!r:.60}"
        if type(name) is not str or not name.isidentifier() or name in env:
            raise _error(f"node record {i} has an invalid or repeated name {name!r:.60}")
        if op == "call_function":
            target = _resolve_callable(target, where)
        elif op in ("placeholder", "get_attr", "call_module", "call_method", "output"):
            if type(target) is not str:
                raise _error(f"{where}: the target of a {op} node must be a string")
            if op == "call_method":
                _check_attribute_name(target, where, "method")
        else:
            raise _error(f"{where}: unknown opcode {op!r:.30}")
        args = _decode_arg(record["args"], env, where)
        kwargs = _decode_arg(record["kwargs"], env, where)
        if type(args) is not tuple or type(kwargs) is not dict or not all(_is_identifier(k) for k in kwargs):
            raise _error(f"{where}: args must be a tuple and kwargs a dict with identifier keys")
        if target is builtins.getattr:  # only constant, public Tensor attribute names
            _check_attribute_name(args[1] if len(args) >= 2 else None, where, "attribute")
        if op == "placeholder" and not target.lstrip("*").isidentifier():
            raise _error(f"{where}: placeholder target {target!r:.60} is not an identifier")
        node = graph.create_node(op, target, args, kwargs, name=name)
        if node.name != name:
            raise _error(f"{where}: the name collides with a reserved name")
        env[name] = node
    pytree = data["pytree"]
    if pytree is not None:
        if type(pytree) is not dict or set(pytree) != {"orig_args", "in_spec", "out_spec"}:
            raise _error("malformed pytree record")
        names = pytree["orig_args"]
        if type(names) is not list or not all(type(n) is str and n.isidentifier() for n in names):
            raise _error("the original argument names must be identifiers")
        try:
            in_spec = treespec_loads(pytree["in_spec"])
            out_spec = None if pytree["out_spec"] is None else treespec_loads(pytree["out_spec"])
        except (TypeError, ValueError) as exc:
            raise _error(f"bad input/output structure: {exc}") from None
        graph.set_codegen(_PyTreeCodeGen(_PyTreeInfo(names, in_spec, out_spec)))
    return graph


# -- submodules --------------------------------------------------------------------------------------


def _literal_from_ast(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_literal_from_ast(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_literal_from_ast(e) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal_from_ast(node.operand)
    if isinstance(node, ast.Name) and node.id in ("inf", "nan"):
        return float(node.id)
    raise ValueError("not a literal")


def _layer_record(module, where):
    """``{"class", "args", "kwargs"}`` rebuilding ``module`` (an ember.nn layer) from its repr."""
    import ember.nn as nn

    cls = type(module)
    text = repr(module)
    failure = TypeError(
        f"ember.save: GraphModule submodule {where} ({cls.__name__}) cannot be saved: only ember.nn layers whose "
        "one-line repr rebuilds them can be (no pickle); make it traceable (not a leaf) or use to_folder"
    )
    if getattr(nn, cls.__name__, None) is not cls or "\n" in text:
        raise failure
    try:
        call = ast.parse(text, mode="eval").body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == cls.__name__):
            raise ValueError("not a call of the class")
        args = [_literal_from_ast(a) for a in call.args]
        kwargs = {k.arg: _literal_from_ast(k.value) for k in call.keywords if k.arg is not None}
        rebuilt = cls(*args, **kwargs)
    except Exception:  # noqa: BLE001 - any failure means the repr does not rebuild it
        raise failure from None
    same = rebuilt.state_dict().keys() == module.state_dict().keys() and all(
        tuple(rebuilt.state_dict()[k].shape) == tuple(v.shape) for k, v in module.state_dict().items()
    )
    if not same:
        raise failure
    return {"kind": "layer", "class": cls.__name__, "args": args, "kwargs": kwargs}


def _encode_children(module, prefix):
    import ember.nn as nn

    from .graph_module import GraphModule

    children = []
    for name, child in module.named_children():
        where = f"{prefix}{name}"
        if isinstance(child, GraphModule):
            record = {"kind": "graph_module", "value": _encode(child, f"{where}.")}
        elif type(child) is nn.Module:
            record = {"kind": "holder", "children": _encode_children(child, f"{where}.")}
        else:
            record = _layer_record(child, where)
        children.append([name, record])
    return children


def _build_layer(record, where):
    import ember.nn as nn

    if set(record) != {"kind", "class", "args", "kwargs"}:
        raise _error(f"submodule {where}: malformed layer record")
    name, args, kwargs = record["class"], record["args"], record["kwargs"]
    cls = getattr(nn, name, None) if type(name) is str and not name.startswith("_") else None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module) and (cls.__module__ or "").startswith("ember.nn")):
        raise _error(f"submodule {where}: {name!r:.60} is not an ember.nn layer; refusing to load")
    if type(args) is not list or type(kwargs) is not dict:
        raise _error(f"submodule {where}: malformed constructor arguments")
    try:
        return cls(*args, **kwargs)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise _error(f"submodule {where}: {name}(...) failed: {exc}") from None


def _decode_children(module, children, where):
    from ember.nn import Module

    if type(children) is not list:
        raise _error(f"{where or 'root'}: children must be a list")
    for item in children:
        if type(item) is not list or len(item) != 2 or type(item[0]) is not str or type(item[1]) is not dict:
            raise _error(f"{where or 'root'}: malformed child record")
        name, record = item
        if not name or "." in name:
            raise _error(f"{where or 'root'}: invalid child name {name!r:.60}")
        path = f"{where}{name}"
        kind = record.get("kind")
        if kind == "graph_module" and set(record) == {"kind", "value"}:
            child = _decode(record["value"])
        elif kind == "holder" and set(record) == {"kind", "children"}:
            child = Module()
            _decode_children(child, record["children"], f"{path}.")
        elif kind == "layer":
            child = _build_layer(record, path)
        else:
            raise _error(f"submodule {path}: unknown record kind {kind!r:.30}")
        module.add_module(name, child)


# -- tensors -----------------------------------------------------------------------------------------


def _install(root, target, value, kind, requires_grad, where):
    import ember
    from ember.nn import Parameter

    *path, field = target.split(".")
    try:
        owner = root.get_submodule(".".join(path))
    except AttributeError:
        raise _error(f"tensor {target!r:.60} belongs to a submodule that does not exist") from None
    if not isinstance(value, ember.Tensor) or not field.isidentifier():
        raise _error(f"tensor record {target!r:.60} is invalid")
    if kind == "parameter":
        setattr(owner, field, Parameter(value, requires_grad=requires_grad))
    elif kind in ("buffer", "buffer_non_persistent"):
        owner.register_buffer(field, value, persistent=kind == "buffer")
    elif kind == "tensor":
        setattr(owner, field, value)
    else:
        raise _error(f"tensor {target!r:.60} has unknown kind {kind!r:.30}")


# -- the GraphModule ---------------------------------------------------------------------------------


def _encode(gm, prefix=""):
    from ._to_folder import _tensors

    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = gm
            for atom in node.target.split("."):
                value = getattr(value, atom, None)
            if not _is_tensor(value):
                raise TypeError(
                    f"ember.save: GraphModule node {node.name!r} reads attribute {node.target!r} of type "
                    f"{type(value).__name__}; only tensor attributes can be saved"
                )
    tensors = _tensors(gm)
    return {
        "format": FORMAT,
        "class_name": type(gm).__name__,
        # per module: split_module, for one, makes GraphModules whose children differ in mode
        "training": [[name, m.training] for name, m in gm.named_modules()],
        "children": _encode_children(gm, prefix),
        "tensors": [[name, t, kind, grad] for name, (t, kind, grad) in tensors.items()],
        "graph": _encode_graph(gm.graph),
    }


def _is_tensor(value):
    import ember

    return isinstance(value, ember.Tensor)


def _decode(data):
    from ember.nn import Module

    from .graph_module import GraphModule

    fields = {"format", "class_name", "training", "children", "tensors", "graph"}
    if type(data) is not dict or set(data) != fields:
        raise _error(f"the record must be a dict with exactly the fields {', '.join(sorted(fields))}")
    if data["format"] != FORMAT:
        raise _error(f"unsupported GraphModule format {data['format']!r:.30}; this ember reads {FORMAT}")
    name = data["class_name"]
    # The class name is only displayed (repr, print_readable), never executed; "<lambda>" is common.
    if type(name) is not str or not name.isprintable() or len(name) > 200 or type(data["training"]) is not list:
        raise _error("invalid class_name or training flags")
    root = Module()
    _decode_children(root, data["children"], "")
    if type(data["tensors"]) is not list:
        raise _error("tensors must be a list")
    for item in data["tensors"]:
        if type(item) is not list or len(item) != 4 or type(item[0]) is not str or type(item[3]) is not bool:
            raise _error("malformed tensor record")
        _install(root, *item, where=item[0])
    graph = _decode_graph(data["graph"])
    try:
        graph.owning_module = root
        graph.lint()
    except RuntimeError as exc:
        raise _error(f"the stored graph is not valid: {exc}") from None
    _check_module_targets(graph, root)
    gm = GraphModule(root, graph, name)
    modules = dict(gm.named_modules())
    for item in data["training"]:
        if type(item) is not list or len(item) != 2 or item[0] not in modules or type(item[1]) is not bool:
            raise _error(f"malformed training flag {item!r:.60}")
        modules[item[0]].training = item[1]
    return gm


def _check_module_targets(graph, root):
    """``get_attr`` must read a tensor and ``call_module`` call a module: no path to other attributes."""
    import ember
    from ember.nn import Module

    for node in graph.nodes:
        if node.op not in ("get_attr", "call_module"):
            continue
        value = root
        for atom in node.target.split("."):
            value = getattr(value, atom)
        expected = ember.Tensor if node.op == "get_attr" else Module
        if not isinstance(value, expected):
            raise _error(
                f"node {node.name!r}: {node.op} target {node.target!r:.60} is a {type(value).__name__}, "
                f"not a {expected.__name__}; refusing to load"
            )


def register():
    """Register GraphModule with :func:`ember.serialization.register_serializable_type` (once)."""
    from ember.serialization import _EXTENSIONS_BY_NAME, register_serializable_type

    from .graph_module import GraphModule

    if TYPE_NAME not in _EXTENSIONS_BY_NAME:
        register_serializable_type(GraphModule, TYPE_NAME, _encode, _decode)
