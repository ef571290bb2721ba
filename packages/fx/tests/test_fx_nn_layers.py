"""Every ``ember.nn`` layer, traced as a leaf and traced into, gives the original's outputs."""

from __future__ import annotations

import numpy as np
import pytest
from _fx_layer_cases import CASES, build, flatten

import ember.nn as nn
from ember.fx import GraphModule, TraceError, Tracer, symbolic_trace

# Layers whose forward branches on traced values (input.dim(), shape comparisons), exactly
# as their PyTorch counterparts do: they can only be traced as leaves. The message must
# still be the explanatory TraceError. The attention layers call a Python helper that
# needs a real tensor (dtype checks), so they fail with that helper's error.
NOT_TRACEABLE_INTO = {
    "ConvTranspose1d": TraceError,
    "ConvTranspose2d": TraceError,
    "BatchNorm1d": TraceError,
    "BatchNorm2d": TraceError,
    "InstanceNorm2d": TraceError,
    "CircularPad2d": TraceError,
    "Softmax2d": TraceError,
    "RNN": TraceError,
    "LSTM": TraceError,
    "GRU": TraceError,
    "RNNCell": TraceError,
    "LSTMCell": TraceError,
    "GRUCell": TraceError,
    "MultiheadAttention": RuntimeError,
    "TransformerEncoderLayer": RuntimeError,
    "TransformerDecoderLayer": RuntimeError,
}


class _TraceEverything(Tracer):
    def is_leaf_module(self, m, qualname):
        return False


def _assert_same(out, ref):
    got, want = flatten(out), flatten(ref)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype is w.dtype
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(n for n, (_, specs) in CASES.items() if len(specs) == 1))
def test_layer_in_sequential_as_leaf(name):
    module, inputs = build(name)
    wrapper = nn.Sequential(module)
    gm = symbolic_trace(wrapper)
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    assert [(n.op, n.target) for n in calls] == [("call_module", "0")]
    assert "_0 = getattr(self, '0')(input_1)" in gm.code
    _assert_same(gm(*inputs), module(*inputs))


def _multi_input_wrapper(module, n):
    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, a, b=None, c=None):
            args = [a, b, c][:n]
            return self.inner(*args)

    return Wrap()


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_in_user_module_as_leaf(name):
    module, inputs = build(name)
    wrapper = _multi_input_wrapper(module, len(inputs))
    gm = symbolic_trace(wrapper)
    assert [n.target for n in gm.graph.find_nodes(op="call_module")] == ["inner"]
    _assert_same(gm(*inputs), module(*inputs))


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_traced_into(name):
    module, inputs = build(name)
    expected_error = NOT_TRACEABLE_INTO.get(name)
    if expected_error is not None:
        with pytest.raises(expected_error) as info:
            _TraceEverything().trace(module)
        if expected_error is TraceError:
            assert "concrete_args" in str(info.value)
        return
    graph = _TraceEverything().trace(module)
    assert not graph.find_nodes(op="call_module")
    assert graph.find_nodes(op="call_function") or graph.find_nodes(op="call_method") or name == "Identity"
    gm = GraphModule(module, graph)
    _assert_same(gm(*inputs), module(*inputs))
