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
* submodule classes must be ``ember.nn`` layers (not containers or bases), called with literal
  arguments on the meta device; each of their tensors is then replaced by one of the file's, of
  the same kind and shape, so a load allocates no more than the file's tensors hold;
* ``get_attr`` targets must be tensors and ``call_module`` targets modules of the rebuilt
  module, reached through registered members, and the generated code's attribute lookups must
  reach those same members (so a target cannot name ``forward.__globals__``, or a child named
  ``to_folder`` stand for the GraphModule method);
* every name the generated code spells (nodes, parameters, keywords) is an identifier that reads
  as itself and hides no name the code uses; placeholder defaults are constants.

A file that names anything else is refused with :class:`ember.serialization.SerializationError`
naming the node and the target. The cost: graphs calling user functions (``ember.fx.wrap``),
user-defined leaf modules or layers whose ``repr`` does not rebuild them cannot be saved
this way; :func:`ember.save` raises ``TypeError`` for them when saving, not when loading.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import operator
from collections import Counter

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


# -- limits of what a file may ask of the loader -------------------------------------------------------

_MAX_NESTING = 32  # containers inside an argument, submodules inside submodules
_MAX_NAME_LENGTH = 1000  # node, parameter, keyword, tensor and submodule names
_MAX_INT = 2**63 - 1  # sizes are int64 everywhere

_OPCODES = ("placeholder", "get_attr", "call_module", "call_method", "call_function", "output")
_ARITY = {  # (fewest, most) positional arguments per opcode
    "placeholder": (0, 1),  # the default value
    "get_attr": (0, 0),
    "call_module": (0, math.inf),
    "call_method": (1, math.inf),  # the receiver first
    "call_function": (0, math.inf),
    "output": (1, 1),
}
_TENSOR_KINDS = ("parameter", "buffer", "buffer_non_persistent", "tensor")

# ember.nn classes the saver never writes as a layer record: those holding submodules (their repr spans
# lines), some of whose constructors loop over a count from their arguments (Transformer's
# num_encoder_layers), and base classes, whose arguments are not their subclasses' (RNNBase takes the mode
# first, so its num_layers is not where the check of RNN/LSTM/GRU's looks).
_NOT_LAYER_RECORDS = frozenset(
    {
        "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "DataParallel",
        "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
        "TransformerDecoderLayer", "MultiheadAttention", "AdaptiveLogSoftmaxWithLoss", "RNNBase", "RNNCellBase",
    }
)  # fmt: skip

# Builtins generated code may spell whatever the graph calls: complex(re, im) constants, slice(...)
# arguments, getattr(self, "0") paths. A parameter of forward must not take their names.
_BUILTINS_IN_CODE = frozenset({"complex", "slice", "getattr"})

_PARAMETER_KINDS = {
    0: inspect.Parameter.POSITIONAL_OR_KEYWORD,
    1: inspect.Parameter.VAR_POSITIONAL,
    2: inspect.Parameter.VAR_KEYWORD,
}
_HAS_DEFAULT = object()  # stands for a placeholder's default when checking forward's signature


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
        # vars(), not getattr: ember.__getattr__ would import the distribution a name like "optim" maps to.
        value = vars(ember if head == "ember" else F).get(attr)
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
        rebuilt = _construct(cls, args, kwargs)  # on the meta device: only the shapes are compared
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


def _encode(gm, prefix=""):
    import ember

    from ._to_folder import _tensors

    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = gm
            for atom in node.target.split("."):
                value = getattr(value, atom, None)
            if not isinstance(value, ember.Tensor):
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


# -- loading -----------------------------------------------------------------------------------------
#
# What a file can make the loader do, and what it cannot (docs/internals.rst, "Loading a GraphModule"):
# every field is type-checked; every name that the generated code spells (node names, parameter names,
# keyword names) is checked to be a plain identifier that changes no other name's meaning; layers are
# built on the meta device and take their tensors from the file, so the memory a load allocates is
# that of the file's own tensors.


def _check_python_name(name, where, what):
    """``name`` must read as itself in generated code: an identifier, unchanged by NFKC, not a keyword."""
    from .graph import _reads_as_itself  # Python reads "ｓｅｌｆ" as "self"

    if not (type(name) is str and 0 < len(name) <= _MAX_NAME_LENGTH and _reads_as_itself(name)):
        raise _error(f"{where}: {what} {name!r:.60} is not an identifier that reads as itself (no keyword, NFKC form)")


def _check_constructor_literal(value, where, depth=0):
    """Constructor arguments are the literals a layer's one-line repr holds: numbers, strings, tuples, lists."""
    kind = type(value)
    if kind in (list, tuple) and depth < 4:
        for item in value:
            _check_constructor_literal(item, where, depth + 1)
    elif kind is int and abs(value) > _MAX_INT:
        raise _error(f"{where}: constructor argument {value} is out of the int64 range")
    elif kind not in (type(None), bool, int, float, complex, str):
        raise _error(f"{where}: constructor argument of type {kind.__name__} is not a literal")


def _default_literal(value, where, depth=0):
    """A placeholder's default must be a constant (no node, no callable): it is evaluated when forward is defined."""
    import ember

    if type(value) in (tuple, list):
        for item in value:
            _default_literal(item, where, depth + 1)
    elif type(value) is dict:
        for key, item in value.items():
            _default_literal(key, where, depth + 1)
            _default_literal(item, where, depth + 1)
    elif type(value) is slice:
        for item in (value.start, value.stop, value.step):
            _default_literal(item, where, depth + 1)
    else:
        constants = (type(None), bool, int, float, complex, str, ember.dtype, ember.device, ember.Size, ember.Tensor)
        if value is not Ellipsis and not isinstance(value, constants):
            raise _error(f"{where}: a placeholder default must be a constant, not a {type(value).__name__}")


def _takes_device(cls):
    """Whether ``cls(..., device="meta")`` builds the layer without allocating its tensors."""
    import ember.nn as nn

    if issubclass(cls, nn.RNNBase):  # RNN, LSTM, GRU take (*args, **kwargs)
        return True
    try:
        return "device" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def _construct(cls, args, kwargs):
    """``cls(*args, **kwargs)``, on the meta device when the class takes one: no memory, no initialisation."""
    if _takes_device(cls):
        kwargs = {**kwargs, "device": "meta"}
    return cls(*args, **kwargs)


def _state_of(module):
    """``{field: (kind, shape)}`` of the tensors a module holds directly, as :func:`_to_folder._tensors` names them."""
    import ember

    state = {}
    for name, p in module._parameters.items():
        if p is not None:
            state[name] = ("parameter", tuple(p.shape))
    for name, b in module._buffers.items():
        if b is not None:
            kind = "buffer_non_persistent" if name in module._non_persistent_buffers_set else "buffer"
            state[name] = (kind, tuple(b.shape))
    for name, value in vars(module).items():
        if isinstance(value, ember.Tensor):
            state[name] = ("tensor", tuple(value.shape))
    return state


class _Loader:
    """Rebuilds one saved GraphModule (and the GraphModules nested in it) from its decoded record."""

    def __init__(self):
        self.layer_state = {}  # id(layer) -> its tensors' {field: (kind, shape)}, which the file must provide
        self.installed = set()  # (id(owner), field) of every tensor put in place
        self.sources = {}  # id(object put in place) -> (that object, the file's tensor, its kind)
        self.parameters = {}  # id(file tensor) -> (file tensor, its Parameter)
        self.builtins_called = set()  # names of builtins the graph being decoded calls

    # -- the record --------------------------------------------------------------------------------

    def graph_module(self, data, depth=0):
        from ember.nn import Module

        from .graph_module import GraphModule

        if depth > _MAX_NESTING:
            raise _error(f"GraphModules are nested more than {_MAX_NESTING} deep")
        fields = {"format", "class_name", "training", "children", "tensors", "graph"}
        if type(data) is not dict or set(data) != fields:
            raise _error(f"the record must be a dict with exactly the fields {', '.join(sorted(fields))}")
        if type(data["format"]) is not int or data["format"] != FORMAT:
            raise _error(f"unsupported GraphModule format {data['format']!r:.30}; this ember reads {FORMAT}")
        name = data["class_name"]
        # The class name is only displayed (repr, print_readable), never executed; "<lambda>" is common.
        if type(name) is not str or not name.isprintable() or not 0 < len(name) <= 200:
            raise _error("invalid class_name")
        if type(data["training"]) is not list or type(data["tensors"]) is not list:
            raise _error("training and tensors must be lists")
        tensors = [self.tensor_record(item) for item in data["tensors"]]
        carried = Counter(target.rpartition(".")[0] for target, *_ in tensors)  # tensors per owner path
        root = Module()
        built = self.children(root, data["children"], "", carried, depth)
        for target, value, kind, requires_grad in tensors:
            self.install(root, target, value, kind, requires_grad)
        for path, layer in built:
            missing = sorted(f for f in self.layer_state[id(layer)] if (id(layer), f) not in self.installed)
            if missing:
                raise _error(f"submodule {path}: the file has no tensor for {', '.join(missing)[:200]}")
        graph = self.graph(data["graph"], root)
        try:
            gm = GraphModule(root, graph, name)
        except Exception as exc:  # noqa: BLE001 - e.g. a tensor named "meta", which GraphModule sets to a dict
            raise _error(f"cannot build the GraphModule: {type(exc).__name__}: {exc}"[:300]) from None
        _check_reads(gm)
        self.training_flags(gm, data["training"])
        return gm

    def tensor_record(self, item):
        import ember

        if type(item) is not list or len(item) != 4:
            raise _error("a tensor record must be a [target, tensor, kind, requires_grad] list")
        target, value, kind, requires_grad = item
        if type(target) is not str or not 0 < len(target) <= _MAX_NAME_LENGTH:
            raise _error(f"invalid tensor target {target!r:.60}")
        if not isinstance(value, ember.Tensor) or kind not in _TENSOR_KINDS or type(requires_grad) is not bool:
            raise _error(f"tensor record {target!r:.60} is invalid")
        if requires_grad and not (value.is_floating_point() or value.is_complex()):
            raise _error(f"tensor {target!r:.60}: only floating point and complex tensors can require grad")
        if kind == "parameter" and value.layout != ember.strided:
            raise _error(f"tensor {target!r:.60}: a Parameter must be a strided tensor, not {value.layout}")
        return item

    def training_flags(self, gm, flags):
        modules = dict(gm.named_modules())
        for item in flags:
            if type(item) is not list or len(item) != 2 or type(item[0]) is not str or type(item[1]) is not bool:
                raise _error(f"malformed training flag {item!r:.60}")
            if item[0] not in modules:
                raise _error(f"training flag for {item[0]!r:.60}, which is not a submodule")
            modules[item[0]].training = item[1]

    # -- submodules --------------------------------------------------------------------------------

    def children(self, module, children, where, carried, depth):
        """Add the recorded children to ``module``; returns the ``(path, layer)`` pairs built."""
        from ember.nn import Module

        if depth > _MAX_NESTING:
            raise _error(f"{where or 'root'}: submodules are nested more than {_MAX_NESTING} deep")
        if type(children) is not list:
            raise _error(f"{where or 'root'}: children must be a list")
        built = []
        for item in children:
            if type(item) is not list or len(item) != 2 or type(item[0]) is not str or type(item[1]) is not dict:
                raise _error(f"{where or 'root'}: malformed child record")
            name, record = item
            if not 0 < len(name) <= _MAX_NAME_LENGTH or "." in name or hasattr(module, name):
                raise _error(f"{where or 'root'}: invalid or repeated child name {name!r:.60}")
            path = f"{where}{name}"
            kind = record.get("kind")
            if kind == "graph_module" and set(record) == {"kind", "value"}:
                child = self.graph_module(record["value"], depth + 1)
            elif kind == "holder" and set(record) == {"kind", "children"}:
                child = Module()
                built += self.children(child, record["children"], f"{path}.", carried, depth + 1)
            elif kind == "layer":
                child = self.layer(record, path, carried[path])
                built.append((path, child))
            else:
                raise _error(f"submodule {path}: unknown record kind {kind!r:.30}")
            module.add_module(name, child)
        return built

    def layer(self, record, where, carried):
        """An ember.nn layer built on the meta device; the file's tensors replace every tensor it has.

        ``carried`` is the number of tensor records the file has for this layer.
        """
        import ember.nn as nn

        if set(record) != {"kind", "class", "args", "kwargs"}:
            raise _error(f"submodule {where}: malformed layer record")
        name, args, kwargs = record["class"], record["args"], record["kwargs"]
        cls = vars(nn).get(name) if type(name) is str and not name.startswith("_") else None
        if not (isinstance(cls, type) and issubclass(cls, nn.Module) and (cls.__module__ or "").startswith("ember.nn")):
            raise _error(f"submodule {where}: {name!r:.60} is not an ember.nn layer; refusing to load")
        if name in _NOT_LAYER_RECORDS:
            raise _error(
                f"submodule {where}: {name} is never saved as a layer record (it holds submodules or is a base)"
            )
        if type(args) is not list or type(kwargs) is not dict:
            raise _error(f"submodule {where}: malformed constructor arguments")
        for key, value in kwargs.items():
            _check_python_name(key, f"submodule {where}", "keyword")
            if key in ("device", "dtype"):
                raise _error(f"submodule {where}: {key} is not a constructor argument a file may give")
            _check_constructor_literal(value, f"submodule {where}")
        _check_constructor_literal(args, f"submodule {where}")
        if issubclass(cls, nn.RNNBase):
            # The constructor loops over num_layers: bound it by the tensors the file carries for this layer
            # (at least two weights per layer) before looping.
            layers = kwargs.get("num_layers", args[2] if len(args) > 2 else 1)
            if type(layers) is not int or not 1 <= layers <= max(carried // 2, 1):
                raise _error(
                    f"submodule {where}: {name} with num_layers={layers!r:.30} needs more tensors than the "
                    f"{carried} the file carries for it"
                )
        try:
            layer = _construct(cls, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - an allow-listed constructor refusing the file's arguments
            raise _error(f"submodule {where}: {name}(...) failed: {type(exc).__name__}: {exc}"[:300]) from None
        if next(layer.children(), None) is not None:
            raise _error(f"submodule {where}: {name} holds submodules, so it is not saved as a layer")
        self.layer_state[id(layer)] = _state_of(layer)
        return layer

    # -- tensors -----------------------------------------------------------------------------------

    def install(self, root, target, value, kind, requires_grad):
        """Put the file's tensor at ``target``: a layer's own tensors must keep their kind and shape."""
        *path, field = target.split(".")
        owner = root
        for atom in path:
            owner = owner._modules.get(atom)
            if owner is None:
                raise _error(f"tensor {target!r:.60} belongs to a submodule that does not exist")
        _check_python_name(field, f"tensor {target!r:.60}", "field")
        existing = _member(owner, field)
        if existing is not None and id(existing) in self.sources:
            # A nested GraphModule's tensors are listed by it and again by its parents: the same tensor.
            obj, source, source_kind = self.sources[id(existing)]
            if obj is existing and source is value and source_kind == kind:
                return
            raise _error(f"tensor {target!r:.60} is given twice")
        expected = self.layer_state.get(id(owner), {}).get(field)
        if expected is not None:
            if expected != (kind, tuple(value.shape)):
                raise _error(
                    f"tensor {target!r:.60} is a {kind} of shape {list(value.shape)}, but the layer's constructor "
                    f"arguments make it a {expected[0]} of shape {list(expected[1])}"
                )
        elif hasattr(owner, field) or (kind != "tensor" and id(owner) in self.layer_state):
            raise _error(f"tensor {target!r:.60} would replace an attribute of {type(owner).__name__}")
        obj = self.parameter(value, requires_grad) if kind == "parameter" else value
        if kind in ("parameter", "tensor"):
            setattr(owner, field, obj)
        else:
            owner.register_buffer(field, obj, persistent=kind == "buffer")
        self.installed.add((id(owner), field))
        self.sources[id(obj)] = (obj, value, kind)

    def parameter(self, value, requires_grad):
        """One Parameter per file tensor, so that weights tied when saved stay tied."""
        from ember.nn import Parameter

        cached = self.parameters.get(id(value))
        if cached is None or cached[0] is not value:
            try:
                cached = (value, Parameter(value, requires_grad=requires_grad))
            except RuntimeError as exc:  # a tensor subclass that cannot be a Parameter
                raise _error(f"a tensor of type {type(value).__name__} cannot be a Parameter: {exc}") from None
            self.parameters[id(value)] = cached
        elif cached[1].requires_grad != requires_grad:
            raise _error("a tensor saved as two parameters differs in requires_grad")
        return cached[1]

    # -- the graph ---------------------------------------------------------------------------------

    def graph(self, data, root):
        from .graph import Graph

        if type(data) is not dict or set(data) != {"nodes", "pytree"} or type(data["nodes"]) is not list:
            raise _error("the graph must be a dict with exactly the fields nodes and pytree")
        graph = Graph()
        env = {}
        self.builtins_called = set()
        for i, record in enumerate(data["nodes"]):
            node = self.node(graph, i, record, env, root)
            env[node.name] = node
        if data["pytree"] is not None:
            self.pytree(graph, data["pytree"])
        try:
            graph.lint()
        except RuntimeError as exc:
            raise _error(f"the stored graph is not valid: {exc}") from None
        self.check_signature(graph)
        return graph

    def node(self, graph, i, record, env, root):
        if type(record) is not dict or set(record) != {"op", "name", "target", "args", "kwargs"}:
            raise _error(f"node record {i} must have exactly the fields op, name, target, args, kwargs")
        op, name, target = record["op"], record["name"], record["target"]
        if type(name) is not str or len(name) > _MAX_NAME_LENGTH or not name.isidentifier() or name in env:
            raise _error(f"node record {i} has an invalid or repeated name {name!r:.60}")
        where = f"node {name!r}"
        if op not in _OPCODES:
            raise _error(f"{where}: unknown opcode {op!r:.30}")
        if op == "call_function":
            target = _resolve_callable(target, where)
            self.note_builtin(target)
        elif type(target) is not str or not 0 < len(target) <= _MAX_NAME_LENGTH:
            raise _error(f"{where}: the target of a {op} node must be a non-empty string")
        args = self.argument(record["args"], env, where)
        kwargs = self.argument(record["kwargs"], env, where)
        if type(args) is not tuple or type(kwargs) is not dict:
            raise _error(f"{where}: args must be a tuple and kwargs a dict")
        for key in kwargs:
            _check_python_name(key, where, "keyword")
        if op in ("call_module", "call_method") and "self" in kwargs:  # always "multiple values for 'self'"
            raise _error(f"{where}: keyword 'self' clashes with the {'module' if op == 'call_module' else 'receiver'}")
        low, high = _ARITY[op]
        if not low <= len(args) <= high or (op in ("placeholder", "get_attr", "output") and kwargs):
            raise _error(f"{where}: a {op} node cannot take {len(args)} arguments and {len(kwargs)} keywords")
        if op == "call_method":
            _check_attribute_name(target, where, "method")
        elif op == "placeholder":
            if args:
                _default_literal(args[0], where)
        elif op in ("get_attr", "call_module"):
            _check_target(root, target, op, where)
        elif target is builtins.getattr:  # only constant, public Tensor attribute names
            _check_attribute_name(args[1] if len(args) >= 2 else None, where, "attribute")
        node = graph.create_node(op, target, args, kwargs, name=name)
        if node.name != name:
            raise _error(f"{where}: the name collides with a reserved name")
        return node

    def note_builtin(self, fn):
        name = getattr(fn, "__name__", None)
        if type(name) is str and getattr(builtins, name, None) is fn:
            self.builtins_called.add(name)  # generated code calls it by its bare name

    def argument(self, a, env, where, depth=0):
        """A node argument from its tagged form (see :func:`_encode_arg`)."""
        import ember

        if type(a) is not list or not a or type(a[0]) is not str:
            raise _error(f"{where}: malformed argument {a!r:.60}")
        if depth > _MAX_NESTING:
            raise _error(f"{where}: arguments are nested more than {_MAX_NESTING} deep")
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
            items = [self.argument(v, env, where, depth + 1) for v in payload[0]]
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
                key = self.argument(item[0], env, where, depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise _error(f"{where}: unhashable dict key") from None
                result[key] = self.argument(item[1], env, where, depth + 1)
            return result
        if tag == "f" and len(payload) == 1:
            fn = _resolve_callable(payload[0], where)
            self.note_builtin(fn)
            return fn
        raise _error(f"{where}: unknown argument tag {tag!r:.20}")

    def pytree(self, graph, record):
        from ember.utils._pytree import tree_structure, tree_unflatten, treespec_loads

        from .graph import _PyTreeCodeGen, _PyTreeInfo

        if type(record) is not dict or set(record) != {"orig_args", "in_spec", "out_spec"}:
            raise _error("malformed pytree record")
        names = record["orig_args"]
        if type(names) is not list:
            raise _error("the original argument names must be a list")
        if type(record["in_spec"]) is not str or type(record["out_spec"]) not in (str, type(None)):
            raise _error("the input/output structures must be serialized TreeSpecs")
        specs = []
        for text in (record["in_spec"], record["out_spec"]):
            try:
                spec = None if text is None else treespec_loads(text)
                if spec is not None:  # a spec whose context disagrees with its children fails here, not in forward
                    rebuilt = tree_unflatten(list(range(spec.num_leaves)), spec)
                    if tree_structure(rebuilt) != spec:
                        raise ValueError("it does not rebuild its own structure")
            except Exception as exc:  # noqa: BLE001 - treespec_loads runs registered from_dumpable_context hooks
                raise _error(f"bad input/output structure: {type(exc).__name__}: {exc}"[:300]) from None
            specs.append(spec)
        in_spec, out_spec = specs
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if in_spec.type is not tuple or len(in_spec.children_specs) != len(names):
            raise _error("the input structure must be a tuple with one entry per original argument")
        if in_spec.num_leaves != len(placeholders):
            raise _error(f"the input structure has {in_spec.num_leaves} leaves for {len(placeholders)} placeholders")
        graph.set_codegen(_PyTreeCodeGen(_PyTreeInfo(names, in_spec, out_spec)))

    def check_signature(self, graph):
        """The names ``forward``'s signature binds must be valid and must not change what other names mean."""

        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        info = getattr(graph._codegen, "pytree_info", None)
        if info is None:
            params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
            names = {}
            star = False
            for node in placeholders:
                bare = node.target.lstrip("*")
                stars = len(node.target) - len(bare)
                _check_python_name(bare, f"node {node.name!r}", "placeholder target")
                if stars > 2 or (stars == 1 and star):
                    raise _error(f"node {node.name!r}: placeholder target {node.target!r:.60} is not a parameter")
                star = star or stars == 1
                kind = _PARAMETER_KINDS[stars] if stars or not star else inspect.Parameter.KEYWORD_ONLY
                default = _HAS_DEFAULT if node.args else inspect.Parameter.empty
                try:
                    params.append(inspect.Parameter(bare, kind, default=default))
                except ValueError as exc:
                    raise _error(f"node {node.name!r}: placeholder {node.target!r:.60}: {exc}") from None
                names[bare] = node
            try:
                inspect.Signature(params)
            except ValueError as exc:  # duplicates, "self" again, order of kinds and defaults
                raise _error(f"the placeholders do not make a valid signature: {exc}") from None
            by_name = {n.name: n for n in graph.nodes}
            for bare, node in names.items():
                other = by_name.get(bare, node)
                if other is not node:
                    raise _error(f"node {node.name!r}: placeholder target {bare!r} is the name of node {other.name!r}")
        else:
            names = dict.fromkeys(info.orig_args)
            if len(names) != len(info.orig_args):
                raise _error("the original argument names repeat")
            for name in names:
                _check_python_name(name, "pytree record", "original argument name")
        # Names the generated code reads from its globals or builtins: a parameter of that name would hide them.
        try:
            code_globals = graph.python_code("self").globals
        except Exception as exc:  # noqa: BLE001 - the checks above should make this unreachable
            raise _error(f"the stored graph does not make code: {type(exc).__name__}: {exc}"[:300]) from None
        taken = {"self", *code_globals, *self.builtins_called, *_BUILTINS_IN_CODE}
        for name in names:
            if name in taken:
                raise _error(f"parameter name {name!r} is a name the generated code uses (self, a global or a builtin)")


def _member(module, field):
    """The tensor ``module`` holds as ``field`` (parameter, buffer or plain attribute), without running properties."""
    import ember

    value = module._parameters.get(field)
    value = module._buffers.get(field) if value is None else value
    value = vars(module).get(field) if value is None else value
    return value if isinstance(value, ember.Tensor) else None


def _check_target(root, target, op, where):
    """``get_attr`` reads a tensor and ``call_module`` calls a module, reached through submodules only:
    no path to other attributes (``forward.__globals__``) or through a tensor (``weight.T``)."""
    import ember

    *path, field = target.split(".")
    module = root
    for atom in path:
        module = module._modules.get(atom)
        if module is None:
            raise _error(f"{where}: {op} target {target!r:.60} is not reached through submodules; refusing to load")
    if op == "call_module":
        value = module._modules.get(field)
    else:
        value = _member(module, field)
    expected = ember.Tensor if op == "get_attr" else ember.nn.Module
    if not isinstance(value, expected):
        raise _error(
            f"{where}: {op} target {target!r:.60} is a {type(value).__name__}, not a {expected.__name__}; "
            "refusing to load"
        )


def _check_reads(gm):
    """What the generated code reads for a target (attribute lookups) must be the member the target names.

    A GraphModule has attributes a plain module lacks: a child named ``to_folder`` is registered, but
    ``self.to_folder`` is the method, which writes files; a tensor named ``meta`` is replaced by a dict.
    """
    for node in gm.graph.nodes:
        if node.op not in ("get_attr", "call_module"):
            continue
        *path, field = node.target.split(".")
        owner = gm
        for atom in path:
            owner = owner._modules.get(atom) if owner is not None else None
        member = (
            None if owner is None else owner._modules.get(field) if node.op == "call_module" else _member(owner, field)
        )
        read = gm
        try:
            for atom in node.target.split("."):
                read = getattr(read, atom)
        except Exception:  # noqa: BLE001 - a property of the module raising: not the member either
            read = None
        if member is None or read is not member:
            raise _error(
                f"node {node.name!r}: {node.op} target {node.target!r:.60} reads a {type(read).__name__} of the "
                f"GraphModule, not the saved {'module' if node.op == 'call_module' else 'tensor'}; refusing to load"
            )


def _decode(data):
    return _Loader().graph_module(data)


def register():
    """Register GraphModule with :func:`ember.serialization.register_serializable_type` (once)."""
    from ember.serialization import _EXTENSIONS_BY_NAME, register_serializable_type

    from .graph_module import GraphModule

    if TYPE_NAME not in _EXTENSIONS_BY_NAME:
        register_serializable_type(GraphModule, TYPE_NAME, _encode, _decode)
