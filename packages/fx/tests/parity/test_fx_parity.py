"""The graphs ember.fx records equal torch.fx's for the same models (opcodes, targets by name, node names)."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest
import torch
import torch.fx

import ember
from ember import fx


def _target_name(target):
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None) or getattr(target, "name", None)
    return {"__getitem__": "getitem"}.get(name, name)


def _signature(graph):
    return [(n.op, _target_name(n.target), n.name) for n in graph.nodes]


def _both(build):
    """``build(lib, nn, F)`` with torch and with ember: the same model in each."""
    return build(torch, torch.nn, torch.nn.functional), build(ember, ember.nn, ember.nn.functional)


def mlp(lib, nn, F):  # noqa: N803 - F as in both libraries
    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x))) * 0.5 + 1

    return MLP()


def cnn(lib, nn, F):  # noqa: N803
    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            h = self.features(x)
            h = F.adaptive_avg_pool2d(h, 1)
            return F.log_softmax(self.fc(lib.flatten(h, 1)), dim=-1)

    return CNN()


def residual(lib, nn, F):  # noqa: N803
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
            self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
            self.scale = nn.Parameter(lib.ones(1))

        def forward(self, x):
            h = F.relu(self.conv1(x))
            h = self.conv2(h) * self.scale
            return F.relu(h + x)

    return Block()


def attention(lib, nn, F):  # noqa: N803
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)
            self.proj = nn.Linear(8, 8)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            q = q.view(b, t, 2, 4).transpose(1, 2)
            k = k.view(b, t, 2, 4).transpose(1, 2)
            v = v.view(b, t, 2, 4).transpose(1, 2)
            att = lib.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            return self.proj(y)

    return Attention()


def shapes(lib, nn, F):  # noqa: N803
    class Shapes(nn.Module):
        def forward(self, x, y):
            n = x.size(0)
            z = lib.cat([x, y], dim=1)[:, 1:]
            return z.sum(dim=1).view(n, 1) - y.mean()

    return Shapes()


MODELS = {"mlp": mlp, "cnn": cnn, "residual": residual, "attention": attention, "shapes": shapes}
INPUTS = {
    "mlp": [(5, 8)],
    "cnn": [(2, 3, 8, 8)],
    "residual": [(2, 4, 5, 5)],
    "attention": [(2, 3, 8)],
    "shapes": [(3, 4), (3, 2)],
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_same_graph_as_torch_fx(name):
    torch_model, ember_model = _both(MODELS[name])
    torch_gm = torch.fx.symbolic_trace(torch_model)
    ember_gm = fx.symbolic_trace(ember_model)
    assert len(ember_gm.graph.nodes) == len(torch_gm.graph.nodes)
    assert _signature(ember_gm.graph) == _signature(torch_gm.graph)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_same_outputs_as_torch_with_shared_weights(name):
    torch_model, ember_model = _both(MODELS[name])
    torch_model.eval()
    ember_model.eval()
    ember_model.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()})
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in INPUTS[name]]
    want = torch.fx.symbolic_trace(torch_model)(*[torch.tensor(a) for a in arrays]).detach().numpy()
    got = fx.symbolic_trace(ember_model)(*[ember.tensor(a) for a in arrays]).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_sequential_placeholder_naming_matches():
    torch_gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))
    ember_gm = fx.symbolic_trace(ember.nn.Sequential(ember.nn.Linear(2, 2), ember.nn.ReLU()))
    assert _signature(ember_gm.graph) == _signature(torch_gm.graph)


def test_trace_error_types_match():
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(torch.fx.proxy.TraceError):
        torch.fx.symbolic_trace(branchy)
    with pytest.raises(fx.TraceError):
        fx.symbolic_trace(branchy)
    assert issubclass(fx.TraceError, ValueError) and issubclass(torch.fx.proxy.TraceError, ValueError)


def test_operator_targets_are_the_same_functions():
    torch_gm = torch.fx.symbolic_trace(lambda x: -(x[0] + 1) @ x)
    ember_gm = fx.symbolic_trace(lambda x: -(x[0] + 1) @ x)
    torch_targets = [n.target for n in torch_gm.graph.nodes if n.op == "call_function"]
    ember_targets = [n.target for n in ember_gm.graph.nodes if n.op == "call_function"]
    assert ember_targets == torch_targets == [operator.getitem, operator.add, operator.neg, operator.matmul]


@pytest.mark.parametrize("name", ["attention", "shapes"])
def test_printed_graph_matches_torch(name):
    torch_model, ember_model = _both(MODELS[name])
    want = str(torch.fx.symbolic_trace(torch_model).graph)
    got = str(fx.symbolic_trace(ember_model).graph)
    want = want.replace("torch.", "ember.")
    assert got == want


def test_structured_inputs_and_outputs_match_torch_fx():
    """Pytree inputs/outputs: same placeholders (one per leaf), nodes, and output structure as torch.fx."""

    def build(lib):
        def f(batch, pair, k):
            y = lib.relu(batch["x"]) * k + pair[1][0]
            return {"y": y, "rest": (pair[0].sum(), [batch["z"] - 1])}

        return f

    def with_ph(ph):
        return {"batch": {"x": ph, "z": ph}, "pair": (ph, [ph])}

    theirs = torch.fx.symbolic_trace(build(torch), concrete_args=with_ph(torch.fx.PH))
    ours = fx.symbolic_trace(build(ember), concrete_args=with_ph(fx.PH))
    assert _signature(ours.graph) == _signature(theirs.graph)
    assert repr(ours._out_spec) == repr(theirs._out_spec)
    assert ours._in_spec.num_leaves == theirs._in_spec.num_leaves
    x, z, p0, p1, k = (np.random.default_rng(i).standard_normal(3).astype(np.float32) for i in range(5))

    def call(gm, lib):
        return gm({"x": lib.tensor(x), "z": lib.tensor(z)}, (lib.tensor(p0), [lib.tensor(p1)]), lib.tensor(k))

    out_t, out_e = call(theirs, torch), call(ours, ember)
    np.testing.assert_allclose(out_e["y"].detach().numpy(), out_t["y"].detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(out_e["rest"][1][0].numpy(), out_t["rest"][1][0].numpy(), rtol=1e-6)
