"""Interpreter (node-by-node execution, per-opcode overrides) and Transformer (graph to graph)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F  # noqa: N812 - PyTorch's alias
from ember.fx import Graph, GraphModule, Interpreter, Proxy, Transformer, symbolic_trace


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)
        self.register_buffer("offset", ember.full((2,), 0.5))

    def forward(self, x):
        h = ember.relu(self.bn(self.conv(x)))
        h = h.mean(dim=(2, 3))
        return ember.sigmoid(self.fc(h)) + self.offset


def _net():
    ember.manual_seed(0)
    net = Net().eval()
    with ember.no_grad():  # non-trivial running statistics, so folding BN is a real test
        net.bn.running_mean.copy_(ember.randn(4) * 0.1)
        net.bn.running_var.copy_(ember.rand(4) + 0.5)
        net.bn.weight.copy_(ember.randn(4))
        net.bn.bias.copy_(ember.randn(4))
    return net


def test_interpreter_matches_module():
    net = _net()
    gm = symbolic_trace(net)
    x = ember.randn(2, 3, 5, 5)
    _close(Interpreter(gm).run(x), net(x))


def test_interpreter_overrides_per_opcode():
    class SwapSigmoid(Interpreter):
        def call_function(self, target, args, kwargs):
            if target is ember.sigmoid:
                return ember.tanh(*args, **kwargs)
            return super().call_function(target, args, kwargs)

    net = _net()
    gm = symbolic_trace(net)
    x = ember.randn(2, 3, 5, 5)
    h = ember.relu(net.bn(net.conv(x))).mean(dim=(2, 3))
    _close(SwapSigmoid(gm).run(x), ember.tanh(net.fc(h)) + 0.5)


def test_run_node_sees_every_node_and_env_is_collected():
    seen = []

    class Record(Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            seen.append((n.name, tuple(result.shape) if isinstance(result, ember.Tensor) else None))
            return result

    gm = symbolic_trace(_net())
    interp = Record(gm)
    interp.run(ember.randn(2, 3, 5, 5))
    assert [s[0] for s in seen] == [n.name for n in gm.graph.nodes]
    assert dict(seen)["conv"] == (2, 4, 5, 5) and dict(seen)["mean"] == (2, 4)
    # values are dropped after their last use: only the output survives in env
    assert [n.op for n in interp.env] == ["output"]
    keep = Record(gm, garbage_collect_values=False)
    keep.run(ember.randn(2, 3, 5, 5))
    assert len(keep.env) == len(gm.graph.nodes)


def test_boxed_run_clears_the_input_list():
    gm = symbolic_trace(lambda x, y: x * y)
    args = [ember.full((2,), 3.0), ember.full((2,), 4.0)]
    out = Interpreter(gm).boxed_run(args)
    assert args == [] and out.tolist() == [12.0, 12.0]


def test_initial_env_and_missing_inputs():
    gm = symbolic_trace(lambda x, y: ember.relu(x) + y)
    relu = gm.graph.find_nodes(op="call_function", target=ember.relu)[0]
    interp = Interpreter(gm)
    out = interp.run(ember.full((1,), -5.0), ember.ones(1), initial_env={relu: ember.full((1,), 10.0)})
    assert out.tolist() == [11.0]
    with pytest.raises(RuntimeError, match="Expected positional argument for parameter y"):
        Interpreter(gm).run(ember.ones(1))


def test_placeholder_default_used_when_inputs_run_out():
    gm = symbolic_trace(lambda x, k=4.0: x * k)
    assert Interpreter(gm).run(ember.ones(1)).tolist() == [4.0]


def test_error_mentions_the_node():
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_method("view", (x, 5)))
    gm = GraphModule(nn.Module(), g)
    with pytest.raises(RuntimeError) as info:
        Interpreter(gm).run(ember.ones(4))
    assert any("While executing %view" in note for note in getattr(info.value, "__notes__", []))


def test_fetch_attr_errors():
    gm = symbolic_trace(_net())
    interp = Interpreter(gm)
    assert interp.fetch_attr("bn.running_mean") is gm.bn.running_mean
    with pytest.raises(RuntimeError, match="nonexistent target bn.nope"):
        interp.fetch_attr("bn.nope")


def test_transformer_identity_copies_graph():
    net = _net()
    gm = symbolic_trace(net)
    new = Transformer(gm).transform()
    assert [(n.op, n.target) for n in new.graph.nodes] == [(n.op, n.target) for n in gm.graph.nodes]
    assert new.conv is gm.conv
    x = ember.randn(1, 3, 4, 4)
    _close(new(x), net(x))


def test_transformer_swaps_relu_for_gelu():
    class ReluToGelu(Transformer):
        def call_function(self, target, args, kwargs):
            if target is ember.relu:
                target = F.gelu
            return super().call_function(target, args, kwargs)

    net = _net()
    new = ReluToGelu(symbolic_trace(net)).transform()
    assert not new.graph.find_nodes(op="call_function", target=ember.relu)
    assert "ember.nn.functional.gelu(bn)" in new.code
    x = ember.randn(2, 3, 5, 5)
    h = F.gelu(net.bn(net.conv(x))).mean(dim=(2, 3))
    _close(new(x), ember.sigmoid(net.fc(h)) + 0.5)


def test_transformer_inserts_calls_with_proxies():
    class ScaleOutputs(Transformer):
        """Multiply every Linear output by 2, recording new nodes through the proxy."""

        def call_module(self, target, args, kwargs):
            out = super().call_module(target, args, kwargs)
            if isinstance(self.fetch_attr(target), nn.Linear):
                assert isinstance(out, Proxy)
                return out * 2
            return out

    net = _net()
    new = ScaleOutputs(symbolic_trace(net)).transform()
    assert "mul = fc * 2" in new.code
    x = ember.randn(2, 3, 5, 5)
    h = ember.relu(net.bn(net.conv(x))).mean(dim=(2, 3))
    _close(new(x), ember.sigmoid(net.fc(h) * 2) + 0.5)


def _fuse_conv_bn_weights(conv, bn):
    """Fold eval-mode BatchNorm into the preceding convolution's weight and bias."""
    scale = bn.weight / ember.sqrt(bn.running_var + bn.eps)
    weight = conv.weight * scale.reshape(-1, 1, 1, 1)
    bias = conv.bias if conv.bias is not None else ember.zeros_like(bn.running_mean)
    bias = (bias - bn.running_mean) * scale + bn.bias
    fused = copy.deepcopy(conv)
    with ember.no_grad():
        fused.weight.copy_(weight)
        fused.bias.copy_(bias)
    return fused


def fuse_conv_bn(gm):
    """Replace every conv -> bn pair of call_module nodes by one fused conv (inference only)."""
    modules = dict(gm.named_modules())
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(modules[node.target], nn.BatchNorm2d):
            continue
        conv_node = node.args[0]
        if conv_node.op != "call_module" or not isinstance(modules[conv_node.target], nn.Conv2d):
            continue
        if len(conv_node.users) > 1:
            continue
        fused = _fuse_conv_bn_weights(modules[conv_node.target], modules[node.target])
        gm.add_submodule(conv_node.target, fused)
        node.replace_all_uses_with(conv_node)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    gm.delete_all_unused_submodules()
    return gm


def test_fuse_conv_bn():
    net = _net()
    gm = fuse_conv_bn(symbolic_trace(net))
    assert not any(isinstance(m, nn.BatchNorm2d) for m in gm.modules())
    assert [n.target for n in gm.graph.find_nodes(op="call_module")] == ["conv", "fc"]
    assert "relu = ember.relu(conv)" in gm.code
    x = ember.randn(3, 3, 6, 6)
    _close(gm(x), net(x), tol=1e-4)
