"""Fuzz target: ``ember.load`` of GraphModules (ember-fx's extension type of ``ember.save``).

Seeds are GraphModules traced from a variety of models: an MLP, a CNN with BatchNorm, an
LSTM and a bidirectional GRU, attention through ``F.multi_head_attention_forward`` on a
MultiheadAttention's parameters, forward parameters with defaults and keyword-only ones,
structured (pytree) inputs, ``get_attr``/``call_method``/``call_function`` nodes with keyword
arguments, slices and constants, and nested GraphModules from ``split_module``.

Besides the runner's byte and JSON mutations, :func:`mutate` edits the GraphModule record
itself as an attacker would (names that are keywords or ``self``, placeholder defaults that
name variables, huge constructor sizes, swapped opcodes and targets, tensor records
retargeted), so that most inputs get past the generic checks into ember-fx's loader.
"""

from __future__ import annotations

import io
import json
import math
import random
import tokenize
import unicodedata

import ember
import ember.fx  # noqa: F401 - ImportError here makes the runner skip this target
import ember.nn as nn
import ember.nn.functional as F  # noqa: N812 - PyTorch's alias
from ember import serialization

NAME = "graph_module"


def _save(gm) -> bytes:
    buffer = io.BytesIO()
    ember.save(gm, buffer)
    return buffer.getvalue()


class _MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 3), nn.LogSoftmax(dim=-1))

    def forward(self, x):
        return self.body(x)


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
        self.pad = nn.ConstantPad2d((1, 1, 0, 0), 0.5)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")

    def forward(self, x):
        h = self.pool(ember.relu(self.bn(self.conv(self.pad(x)))))
        return self.head(self.up(h))


class _Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4, padding_idx=0)
        self.lstm = nn.LSTM(4, 6, num_layers=2, batch_first=True)
        self.gru = nn.GRU(6, 3, bidirectional=True)
        self.norm = nn.LayerNorm(6)

    def forward(self, tokens):
        out, (h, c) = self.lstm(self.embed(tokens))
        out = self.norm(out)
        out2, _ = self.gru(out.transpose(0, 1))
        return out2.sum(dim=0) + h[-1].mean() + c.std()


class _Attention(nn.Module):
    """A MultiheadAttention's parameters used through the functional form (the layer itself is a leaf
    holding a submodule, which a layer record cannot describe)."""

    def __init__(self):
        super().__init__()
        mha = nn.MultiheadAttention(8, 2)
        self.in_proj_weight = mha.in_proj_weight
        self.in_proj_bias = mha.in_proj_bias
        self.out_proj = nn.Linear(8, 8)

    def forward(self, q, k, v):
        out, weights = F.multi_head_attention_forward(
            q, k, v, 8, 2, self.in_proj_weight, self.in_proj_bias, None, None, False, 0.0,
            self.out_proj.weight, self.out_proj.bias, training=False, need_weights=True,
        )  # fmt: skip
        return out, weights


class _Calls(nn.Module):
    """get_attr, call_method, call_function with kwargs, slices, constants, defaults, keyword-only."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(ember.tensor([2.0, -1.0, 0.5]))
        self.register_buffer("shift", ember.tensor([0.5, 0.25, 0.0]))
        self.register_buffer("steps", ember.tensor(3), persistent=False)

    def forward(self, x, alpha: float = 2.0, *, flag=None, dims=(0,)):
        y = x.view(-1, 3).permute(1, 0).contiguous().t()
        y = ember.clamp(y * self.scale + self.shift, min=-5.0, max=5.0)
        y = y[:, 1:3] if flag is None else y
        z = y.sum(dim=1, keepdim=True) / math.sqrt(x.shape[-1]) + alpha
        return ember.cat([z, z.neg()], dim=-1).flip(dims=dims), x.dim(), self.steps + 1


def _traced():
    from ember.fx import PH, Tracer, symbolic_trace
    from ember.fx.passes.split_module import split_module

    ember.manual_seed(0)
    yield symbolic_trace(_MLP().eval())
    yield symbolic_trace(_CNN())
    yield symbolic_trace(_Recurrent().eval())
    yield symbolic_trace(_Attention())
    yield symbolic_trace(_Calls())
    yield symbolic_trace(_Calls(), concrete_args={"flag": None})
    # structured inputs: one placeholder per PH leaf, the generated forward takes the structure
    yield symbolic_trace(
        lambda batch, k=3: batch["x"] * k + batch["y"][0], concrete_args={"batch": {"x": PH, "y": [PH]}}
    )
    mlp = symbolic_trace(_MLP())
    yield split_module(mlp, mlp, lambda node: 0 if "body_0" in node.name else 1)

    class _NoLeaves(Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, nn.Linear)

    from ember.fx import GraphModule

    root = _MLP()  # traced into its ReLU, Dropout and LogSoftmax: functional calls with keyword arguments

    yield GraphModule(root, _NoLeaves().trace(root))


def seeds() -> list[bytes]:
    return [_save(gm) for gm in _traced()]


def load(data: bytes) -> None:
    loaded = ember.load(io.BytesIO(data))
    if isinstance(loaded, ember.fx.GraphModule):
        # What a user does next must not fail on a loaded module: show it, list its state.
        _ = loaded.code, repr(loaded), str(loaded.graph), loaded.print_readable(print_output=False)
        for _name, tensor in loaded.state_dict().items():
            _ = tensor.shape, tensor.dtype
        _check_invariants(loaded)


def _check_invariants(gm):
    """What a loaded module's code can reach: an AssertionError here is a finding (an escape, not a crash)."""
    for module in gm.modules():
        if not isinstance(module, ember.fx.GraphModule):
            continue
        # Every name in the code reads as itself (Python would read a full-width "self" as self).
        for token in tokenize.generate_tokens(io.StringIO(module.code).readline):
            if token.type == tokenize.NAME and unicodedata.normalize("NFKC", token.string) != token.string:
                raise AssertionError(f"the generated code spells {token.string!r}, which Python reads differently")
        # Every target, looked up as the code does, is a tensor (get_attr) or a module (call_module).
        for node in module.graph.nodes:
            if node.op in ("get_attr", "call_module"):
                value = module
                for atom in node.target.split("."):
                    value = getattr(value, atom)
                expected = ember.Tensor if node.op == "get_attr" else nn.Module
                if not isinstance(value, expected):
                    raise AssertionError(f"{node.op} {node.target!r} reads a {type(value).__name__}")


# --------------------------------------------------------------------------- mutations


def _split(data):
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    structure = json.loads(header["__metadata__"]["ember.structure"])
    return header, structure, data[8 + n :]


def _join(header, structure, payload):
    header["__metadata__"]["ember.structure"] = json.dumps(structure, separators=(",", ":"))
    header["__metadata__"]["ember.header_sha256"] = serialization._header_checksum(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + payload


def _walk(root):
    """Every dict under ``root`` (iteratively: mutated inputs may nest deeply)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if type(node) is list:
            stack.extend(node)
        elif type(node) is dict:
            yield node
            stack.extend(node.values())


def _is_record(node, kind):
    """Whether ``node`` is ember's JSON dict of a GraphModule record (``kind="graph"``) or of a layer."""
    items = node.get("items") if node.get("t") == "dict" else None
    if type(items) is not list:
        return False
    if kind == "graph":
        return any(type(i) is list and i and i[0] == "graph" for i in items)
    return any(type(i) is list and len(i) == 2 and i[0] == "kind" and i[1] == "layer" for i in items)


def _items(node):
    """The ``[key, value]`` pairs of ember's JSON dict ``node`` (edited in place)."""
    items = node.get("items") if type(node) is dict and node.get("t") == "dict" else None
    return [i for i in items if type(i) is list and len(i) == 2] if type(items) is list else []


def _field(node, key):
    for item in _items(node):
        if item[0] == key:
            return item
    return None


_NAMES = [
    "self", "class", "None", "ember", "inf", "getattr", "len", "x", "_tree_flatten_spec", "__class__",
    "\uff53\uff45\uff4c\uff46", "a b", "", "*x", "**kw", "***x", "x_1", "forward", "training", "lambda", "1x",
    # attributes a GraphModule has and a plain module lacks; a full-width name Python reads as "to_folder"
    "to_folder", "recompile", "meta", "code", "graph", "\uff54\uff4f\uff3f\uff46\uff4f\uff4c\uff44\uff45\uff52",
]  # fmt: skip
_SIZES = [0, -1, 1, 2**31, 4294967300, 10**6, 2**63 - 1, 2**63, 10**30]


def _mutate_node(rng, node):
    fields = _items(node)
    if not fields:
        return
    item = rng.choice(fields)
    key = item[0]
    choice = rng.randrange(6)
    if key in ("name", "target", "op") and choice < 3:
        item[1] = rng.choice(_NAMES + ["placeholder", "get_attr", "call_module", "call_method", "call_function"])
    elif key == "args" and choice < 4:
        options = [
            {"t": "dict", "items": []},
            ["t", [["n", rng.choice(_NAMES)]]],
            ["t", [["f", rng.choice(["builtins.len", "ember.relu", "operator.add", "math.sqrt", "os.system"])]]],
            ["t", [["c", rng.choice([None, 1, 2.5, "s", True])]]],
            ["t", []],
            ["t", [["l", [["c", 1]] * rng.randrange(3)], ["s", [["c", None]] * rng.randrange(4)]]],
        ]
        item[1] = rng.choice(options)
    elif key == "kwargs" and choice < 4:
        item[1] = ["d", [[["c", rng.choice(_NAMES)], ["c", 1]]]]
    else:
        item[1] = rng.choice([None, 0, "x", [], {"t": "dict", "items": []}, ["n", "x"], ["e"]])


def _mutate_layer(rng, record):
    fields = _items(record)
    args = _field(record, "args")
    kwargs = _field(record, "kwargs")
    choice = rng.randrange(5)
    if choice == 0 and args is not None and type(args[1]) is list and args[1]:
        args[1][rng.randrange(len(args[1]))] = rng.choice(_SIZES)
    elif choice == 1 and kwargs is not None:
        key = rng.choice(["num_layers", "in_features", "out_features", "num_features", "hidden_size", "device",
                          "size", "padding", "bidirectional", "dtype", "kernel_size"])  # fmt: skip
        _items(kwargs[1]).append([key, rng.choice(_SIZES + [True, "meta", [1, 2]])])
    elif choice == 2:
        cls = _field(record, "class")
        if cls is not None:
            cls[1] = rng.choice(["Transformer", "LSTM", "Linear", "Sequential", "ParameterList", "Module",
                                 "MultiheadAttention", "BatchNorm1d", "Embedding", "Upsample", "Flatten"])  # fmt: skip
    elif fields:
        rng.choice(fields)[1] = rng.choice(_SIZES + [None, "x", []])


def _rename_child(rng, record, child):
    """Rename a child and every target, tensor and training flag that names it, keeping the file consistent."""
    if type(child) is not list or len(child) != 2 or type(child[0]) is not str:
        return
    old, new = child[0], rng.choice(_NAMES)
    child[0] = new

    def renamed(target):
        head, dot, rest = target.partition(".")
        return new + dot + rest if head == old else target

    graph = _field(record, "graph")
    nodes = _field(graph[1], "nodes") if graph else None
    for node in nodes[1] if nodes and type(nodes[1]) is list else []:
        op, target = _field(node, "op"), _field(node, "target")
        if op and target and op[1] in ("get_attr", "call_module") and type(target[1]) is str:
            target[1] = renamed(target[1])
    for entry in (_field(record, "tensors") or [None, []])[1]:
        if type(entry) is list and entry and type(entry[0]) is str:
            entry[0] = renamed(entry[0])
    for flag in (_field(record, "training") or [None, []])[1]:
        if type(flag) is list and flag and type(flag[0]) is str:
            flag[0] = renamed(flag[0])


# Seeds are a few KB; the runner's own mutations can grow pool entries to megabytes, where parsing and
# re-serializing the header here would take seconds of the per-input time limit.
_MAX_MUTATED_BYTES = 256 * 1024


def mutate(data: bytes, rng: random.Random) -> bytes:
    if len(data) > _MAX_MUTATED_BYTES:
        return data
    try:
        return _mutate(data, rng)
    except Exception:  # noqa: BLE001 - the input (perhaps itself a mutant) has another shape: leave it to the runner
        return data


def _mutate(data, rng):
    header, structure, payload = _split(data)
    records = [node for node in _walk(structure.get("root")) if _is_record(node, "graph")]
    if not records:
        return data
    record = rng.choice(records)
    for _ in range(rng.randrange(1, 4)):
        part = rng.choice(["graph", "graph", "children", "tensors", "training", "pytree"])
        if part in ("graph", "pytree"):
            graph = _field(record, "graph")
            target = _field(graph[1], "nodes" if part == "graph" else "pytree") if graph else None
            if target is None:
                continue
            if part == "pytree" or type(target[1]) is not list or not target[1]:
                target[1] = rng.choice([None, {"t": "dict", "items": []}, [], "x"])
            elif rng.random() < 0.2:  # reorder or duplicate nodes
                nodes = target[1]
                i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
                nodes[i], nodes[j] = nodes[j], nodes[i] if rng.random() < 0.5 else nodes[i]
            else:
                _mutate_node(rng, rng.choice(target[1]))
        elif part == "children":
            children = _field(record, "children")
            if children and type(children[1]) is list and children[1] and rng.random() < 0.3:
                _rename_child(rng, record, rng.choice(children[1]))
                continue
            layers = [node for node in _walk(children[1] if children else None) if _is_record(node, "layer")]
            if layers:
                _mutate_layer(rng, rng.choice(layers))
        elif part == "tensors":
            tensors = _field(record, "tensors")
            if tensors and type(tensors[1]) is list and tensors[1]:
                entry = rng.choice(tensors[1])
                if type(entry) is list and len(entry) == 4:
                    slot = rng.randrange(4)
                    entry[slot] = rng.choice(
                        [rng.choice(_NAMES), "body.0.weight", "parameter", "tensor", "buffer", True, None, 1]
                    )
        else:
            training = _field(record, "training")
            if training:
                training[1] = rng.choice([[["", "x"]], [[["a"], True]], [["nope", True]], None])
    return _join(header, structure, payload)
