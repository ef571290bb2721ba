"""ember.save / ember.load of GraphModules: round trips as data, and files naming code outside the allow-list."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F  # noqa: N812 - PyTorch's alias
from ember import serialization
from ember.fx import PH, GraphModule, symbolic_trace
from ember.fx.passes.split_module import split_module
from ember.serialization import SerializationError


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def _round_trip(obj):
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    buffer.seek(0)
    return ember.load(buffer)


class Net(nn.Module):
    """Leaf layers, functional ops, methods, getattr, slicing, math, a parameter and a buffer."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.fc = nn.Linear(4, 2)
        self.scale = nn.Parameter(ember.tensor([2.0, -1.0]))
        self.register_buffer("shift", ember.tensor([0.5, 0.25]))

    def forward(self, x):
        h = self.features(x).mean(dim=(2, 3))
        h = F.dropout(h, p=0.0, training=self.training)
        out = self.fc(h[:, :4]) * self.scale + self.shift
        return out.clamp(min=-5.0) / math.sqrt(x.shape[1]) + ember.tensor([1.0, 2.0])


def _model():
    ember.manual_seed(0)
    model = Net().eval()
    with ember.no_grad():
        model.features[1].running_mean.copy_(ember.randn(4))
    return model


def test_round_trip_equals_outputs_and_code(tmp_path):
    model = _model()
    gm = symbolic_trace(model)
    path = tmp_path / "net.safetensors"
    ember.save({"model": gm, "step": 3}, path)
    loaded = ember.load(path)
    assert loaded["step"] == 3
    new = loaded["model"]
    assert isinstance(new, GraphModule) and type(new).__name__ == "Net"
    assert new.code == gm.code and not new.training
    assert new.scale.requires_grad and isinstance(new.scale, nn.Parameter)
    assert dict(new.named_buffers()).keys() == dict(gm.named_buffers()).keys()
    for _ in range(2):
        x = ember.randn(2, 3, 5, 5)
        _close(new(x), model(x))
    # the file is ember's safetensors file: no pickle anywhere
    assert b"pickle" not in path.read_bytes()


def test_round_trip_training_mode_pytree_and_nested_graph_modules():
    def f(batch, k):
        y = ember.relu(batch["x"]) * k
        return {"y": y, "pair": (y.sum(), batch["z"] - 1)}

    gm = symbolic_trace(f, concrete_args={"batch": {"x": PH, "z": PH}})
    new = _round_trip(gm)
    assert new.code == gm.code and new.training
    batch, k = {"x": ember.randn(3), "z": ember.randn(2)}, ember.randn(3)
    out, ref = new(batch, k), f(batch, k)
    _close(out["y"], ref["y"])
    _close(out["pair"][1], ref["pair"][1])

    model = _model()
    gm = symbolic_trace(model)
    counter = iter(range(100))
    split = split_module(gm, model, lambda node: 0 if next(counter) < 6 else 1)
    new = _round_trip(split)
    assert isinstance(new.submod_0, GraphModule) and new.submod_0.code == split.submod_0.code
    x = ember.randn(2, 3, 5, 5)
    _close(new(x), model(x))


def test_unsaveable_graph_modules_fail_when_saving():
    def local_helper(x):
        return x + 1

    from ember.fx import Graph

    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(local_helper, (x,)))
    with pytest.raises(TypeError, match="not in the allow-list"):
        _round_trip(GraphModule(nn.Module(), g))

    class Custom(nn.Module):
        def forward(self, x):
            return x

    class Tracer(ember.fx.Tracer):
        def is_leaf_module(self, m, name):
            return isinstance(m, Custom) or super().is_leaf_module(m, name)

    root = nn.Sequential(Custom())
    gm = GraphModule(root, Tracer().trace(root))
    with pytest.raises(TypeError, match=r"submodule 0 \(Custom\) cannot be saved"):
        _round_trip(gm)


# -- hostile files -----------------------------------------------------------------------------------


def _saved_bytes(gm):
    buffer = io.BytesIO()
    ember.save(gm, buffer)
    return buffer.getvalue()


def _tamper(data, edit):
    """``data`` (a saved file) with its structure edited by ``edit`` and the checksum recomputed,
    as an attacker would."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    structure = json.loads(header["__metadata__"]["ember.structure"])
    edit(structure["root"]["v"])  # the GraphModule record inside its "ext" node
    header["__metadata__"]["ember.structure"] = json.dumps(structure, separators=(",", ":"))
    header["__metadata__"]["ember.header_sha256"] = serialization._header_checksum(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + n :]


def _graph_nodes(root):
    # root is ember's JSON for a dict: {"t": "dict", "items": [[key, value], ...]}
    items = dict((k, v) for k, v in root["items"])
    graph = dict((k, v) for k, v in items["graph"]["items"])
    return graph["nodes"]  # a JSON list of dict nodes


def _node_fields(node):
    return {k: v for k, v in node["items"]}


def _set_node_field(node, key, value):
    for item in node["items"]:
        if item[0] == key:
            item[1] = value


def _load_bytes(data):
    return ember.load(io.BytesIO(data))


def _simple_gm():
    return symbolic_trace(lambda x: ember.relu(x) + x.sum())


def _edit_call(target_json):
    def edit(root):
        for node in _graph_nodes(root):
            if _node_fields(node)["op"] == "call_function":
                _set_node_field(node, "target", target_json)
                return

    return edit


@pytest.mark.parametrize(
    "target",
    ["os.system", "ember.save", "ember.load", "ember.manual_seed", "operator.call", "builtins.eval", "ember.Tensor"],
)
def test_call_target_outside_the_allow_list_is_refused(target):
    data = _tamper(_saved_bytes(_simple_gm()), _edit_call(target))
    with pytest.raises(SerializationError, match=rf"target '{target}' is not in the allow-list"):
        _load_bytes(data)


def test_untouched_file_loads_and_allowed_retarget_loads():
    gm = _simple_gm()
    x = ember.randn(4)
    _close(_load_bytes(_saved_bytes(gm))(x), gm(x))
    retargeted = _load_bytes(_tamper(_saved_bytes(gm), _edit_call("ember.sigmoid")))
    _close(retargeted(x), ember.sigmoid(x) + x.sum())


def test_attribute_walks_and_code_injection_are_refused():
    gm = symbolic_trace(lambda x: x.neg().shape)
    data = _saved_bytes(gm)

    def method(name):
        def edit(root):
            for node in _graph_nodes(root):
                if _node_fields(node)["op"] == "call_method":
                    _set_node_field(node, "target", name)

        return edit

    with pytest.raises(SerializationError, match="method '__class__' is not a public attribute of ember.Tensor"):
        _load_bytes(_tamper(data, method("__class__")))
    with pytest.raises(SerializationError, match="method 'tofile' is not a public attribute"):
        _load_bytes(_tamper(data, method("tofile")))

    def attribute(root):
        for node in _graph_nodes(root):
            fields = _node_fields(node)
            if fields["op"] == "call_function":  # getattr(neg, 'shape')
                fields["args"][1][1][1] = "__globals__"  # ["t", [["n", "neg"], ["c", "shape"]]]

    with pytest.raises(SerializationError, match="attribute '__globals__' is not a public attribute"):
        _load_bytes(_tamper(data, attribute))

    def placeholder(root):
        node = _graph_nodes(root)[0]
        _set_node_field(node, "target", "x):\n    import os\ndef f(y")

    with pytest.raises(SerializationError, match="placeholder target .* is not an identifier"):
        _load_bytes(_tamper(data, placeholder))


def test_layer_outside_ember_nn_and_unknown_extension_are_refused():
    gm = symbolic_trace(nn.Sequential(nn.Linear(2, 2)))
    data = _saved_bytes(gm)

    def layer(root):
        items = dict((k, v) for k, v in root["items"])
        record = items["children"][0][1]  # ["0", {"t": "dict", "items": [...]}]
        for item in record["items"]:
            if item[0] == "class":
                item[1] = "Module.__subclasses__"

    with pytest.raises(SerializationError, match="is not an ember.nn layer; refusing to load"):
        _load_bytes(_tamper(data, layer))

    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    structure = json.loads(header["__metadata__"]["ember.structure"])
    structure["root"]["type"] = "evil.Type"
    header["__metadata__"]["ember.structure"] = json.dumps(structure)
    header["__metadata__"]["ember.header_sha256"] = serialization._header_checksum(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with pytest.raises(SerializationError, match="unknown extension type 'evil.Type'"):
        _load_bytes(len(text).to_bytes(8, "little") + text + data[8 + n :])


def test_get_attr_must_read_a_tensor():
    model = _model()
    data = _saved_bytes(symbolic_trace(model))

    def retarget(root):
        for node in _graph_nodes(root):
            if _node_fields(node)["op"] == "get_attr":
                _set_node_field(node, "target", "forward.__globals__")
                return

    with pytest.raises(SerializationError, match=r"get_attr target 'forward.__globals__' is not reached through submodules"):
        _load_bytes(_tamper(data, retarget))


def test_make_fx_graph_with_backward_ops_round_trips():
    from ember.fx.experimental.proxy_tensor import make_fx

    def loss_and_grad(x, w):
        loss = ((x @ w).tanh() ** 2).mean()
        (g,) = ember.autograd.grad(loss, [w])
        return loss, g

    w = ember.randn(3, 4, requires_grad=True)
    gm = make_fx(loss_and_grad)(ember.randn(5, 3), w)
    new = _round_trip(gm)
    assert new.code == gm.code and "tanh_backward" in new.code
    x, w = ember.randn(5, 3), ember.randn(3, 4)
    # oracle: the gradient by hand, d/dw mean(tanh(xw)^2) = x^T (2 tanh (1 - tanh^2)) / n
    t = np.tanh(x.numpy() @ w.numpy())
    expected = x.numpy().T @ (2 * t * (1 - t**2)) / t.size
    loss, g = new(x, w)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss.item(), (t**2).mean(), rtol=1e-5)
