"""aot_function / aot_module / aot_module_simplified with identity compilers, against eager mode."""

from __future__ import annotations

import copy
import math

import pytest

import ember
import ember.nn.functional as F
from ember._inductor.aot import aot_function, aot_module, aot_module_simplified
from ember._inductor.aot.partitioners import default_partition
from ember._inductor.exc import InductorError
from ember.testing import assert_close


class Counting:
    """An identity compiler that counts its calls and keeps the graphs it got."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        for node, example in zip([n for n in gm.graph.nodes if n.op == "placeholder"], example_inputs):
            assert example.device.type == "meta"
            assert tuple(example.shape) == tuple(node.meta["val"].shape)
        return gm


def _check_module(make, *inputs, atol=1e-5):
    """Values and every parameter's gradient of ``make()`` compiled equal eager mode's."""
    ember.manual_seed(0)
    net = make()
    ref = copy.deepcopy(net)
    fw, bw = Counting(), Counting()
    compiled = aot_module(net, fw, bw)
    got = compiled(*inputs)
    want = ref(*inputs)
    assert_close(got, want)
    got.square().sum().backward()
    want.square().sum().backward()
    for (name, p), (_, q) in zip(net.named_parameters(), ref.named_parameters()):
        assert_close(p.grad, q.grad, msg=name, rtol=1e-4, atol=atol)
    assert len(fw.graphs) == 1 and len(bw.graphs) == 1
    return fw.graphs[0], bw.graphs[0]


def test_mlp():
    def make():
        return ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.Tanh(), ember.nn.Linear(16, 4))

    fw, bw = _check_module(make, ember.randn(5, 8))
    for gm in (fw, bw):
        assert not [n for n in gm.graph.nodes if n.op == "call_function" and n.target.kind == "inplace"]


def test_conv_batch_norm():
    def make():
        return ember.nn.Sequential(
            ember.nn.Conv2d(3, 4, 3, padding=1), ember.nn.BatchNorm2d(4), ember.nn.ReLU(), ember.nn.MaxPool2d(2)
        )

    # the conv bias feeds batch norm, so its exact gradient is 0: both sides give rounding noise of a
    # sum of 128 terms of size ~1 (eager's one-kernel batch-norm backward sums in another order)
    _check_module(make, ember.randn(2, 3, 8, 8), atol=1e-4)


def test_layer_norm_gelu():
    def make():
        return ember.nn.Sequential(ember.nn.Linear(6, 6), ember.nn.LayerNorm(6), ember.nn.GELU())

    _check_module(make, ember.randn(3, 4, 6))


class Attention(ember.nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = ember.nn.Linear(dim, 3 * dim)
        self.proj = ember.nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        causal = ember.ones(t, t, dtype=ember.bool, device=x.device).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(out)


def test_small_attention():
    _check_module(Attention, ember.randn(2, 5, 8))


def test_function_values_and_gradients_of_every_input():
    def f(x, w, b):
        return F.linear(x, w, b).sigmoid() * x.sum(), (x * 2).exp()

    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(5, 4, requires_grad=True)
    b = ember.randn(5, requires_grad=True)
    compiled = aot_function(f, lambda gm, ex: gm)
    got = compiled(x, w, b)
    want = f(x, w, b)
    for g, e in zip(got, want):
        assert_close(g, e)
    got_grads = ember.autograd.grad(got[0].sum() + got[1].sum(), (x, w, b))
    want_grads = ember.autograd.grad(want[0].sum() + want[1].sum(), (x, w, b))
    for g, e in zip(got_grads, want_grads):
        assert_close(g, e)


def test_cache_does_not_retrace_for_the_same_signature():
    fw, bw = Counting(), Counting()
    compiled = aot_function(lambda x, y: (x * y).sum(), fw, bw)
    x = ember.randn(3, requires_grad=True)
    for _ in range(3):
        compiled(x, ember.randn(3)).backward()
    assert len(fw.graphs) == 1 and len(bw.graphs) == 1
    assert len(compiled.cache) == 1
    compiled(ember.randn(4, requires_grad=True), ember.randn(4))  # new shape: a new entry
    assert len(fw.graphs) == 2
    compiled(x.detach(), ember.randn(3))  # no grad needed: the inference path
    assert len(fw.graphs) == 3 and len(bw.graphs) == 2
    with ember.no_grad():
        compiled(x, ember.randn(3))  # grad mode is part of the signature
    assert len(fw.graphs) == 4 and len(compiled.cache) == 4


def test_signature_tells_every_specialised_property_apart():
    # what the cache key reads from plain tensors' fields must change where the properties change
    from ember._inductor.aot.api import _signature

    base = ember.randn(4, 6)
    variants = [base, ember.randn(4, 6).double(), ember.randn(6, 4).t(), ember.randn(4, 7),
                ember.randn(4, 6, requires_grad=True), ember.nn.Parameter(ember.randn(4, 6), requires_grad=False)]
    keys = [_signature([t], True) for t in variants]
    assert keys[0] != keys[1] and keys[0] != keys[2] and keys[0] != keys[3] and keys[0] != keys[4]
    assert keys[5] == keys[0]  # a Parameter of the same spec: the same graphs
    props = [(tuple(t.shape), t.stride(), t.dtype, t.requires_grad) for t in variants]
    assert len(set(keys)) == len(set(props))
    assert _signature([base], False) != keys[0]


def test_inference_path_compiles_only_the_forward():
    fw, bw, inference = Counting(), Counting(), Counting()
    compiled = aot_function(lambda x: x.relu() + 1, fw, bw, inference_compiler=inference)
    x = ember.randn(4)
    assert_close(compiled(x), x.relu() + 1)
    assert len(inference.graphs) == 1 and not fw.graphs and not bw.graphs
    (gm,) = inference.graphs
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["primals_1"]


def test_non_differentiable_and_integer_inputs():
    def f(x, w, index, scale):
        return (x[index] * w).sum() * scale, index * 2

    x = ember.randn(5, 3)  # no grad
    w = ember.randn(3, requires_grad=True)
    index = ember.tensor([0, 3, 3])
    compiled = aot_function(f, lambda gm, ex: gm)
    out, doubled = compiled(x, w, index, 0.5)
    assert doubled.dtype == ember.int64 and not doubled.requires_grad
    assert_close(doubled, index * 2)
    (g,) = ember.autograd.grad(out, w)
    w2 = w.detach().requires_grad_(True)
    (g2,) = ember.autograd.grad(f(x, w2, index, 0.5)[0], w2)
    assert_close(g, g2)
    compiled(x, w, index, 2.0)  # another value of a non-tensor argument: another trace
    assert len(compiled.cache) == 2


def test_parameter_written_under_no_grad_gets_no_gradient():
    # eager mode gives a leaf written under no_grad, and read only under no_grad, no .grad at
    # all; a zero gradient would make optimizers with weight decay or momentum move it
    def f(w, b, x):
        with ember.no_grad():
            t = x @ w
            w.mul_(0.9)
        return ((x @ b) * t).sum()

    ember.manual_seed(0)
    w, b, x = ember.randn(4, 4, requires_grad=True), ember.randn(4, 4, requires_grad=True), ember.randn(3, 4)
    w_ref, b_ref = w.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    aot_function(f, lambda gm, ex: gm)(w, b, x).backward()
    f(w_ref, b_ref, x).backward()
    assert w.grad is None and w_ref.grad is None
    assert_close(w, w_ref)
    assert_close(b.grad, b_ref.grad)


@pytest.mark.parametrize(
    "act",
    ["LeakyReLU", "Hardswish", "ELU", "ReLU", "SiLU", "Hardtanh", "ReLU6", "SELU", "CELU", "Mish", "Hardsigmoid"],
)
def test_inplace_activation_on_an_intermediate_trains(act):
    # ``nn.X(inplace=True)`` after a layer (DCGAN's LeakyReLU, MobileNetV3's Hardswish): the joint trace
    # must not overwrite the value the activation's gradient reads
    def make():
        return ember.nn.Sequential(ember.nn.Linear(4, 5), getattr(ember.nn, act)(inplace=True), ember.nn.Linear(5, 3))

    _check_module(make, ember.randn(6, 4))


def test_outputs_that_alias_inputs_keep_gradients():
    def f(x, y):
        return x.t(), x, y * 2

    x = ember.randn(2, 3, requires_grad=True)
    y = ember.randn(2, requires_grad=True)
    t, same, doubled = aot_function(f, lambda gm, ex: gm)(x, y)
    assert same is x
    (t.sum() * 3 + doubled.sum()).backward()
    assert_close(x.grad, ember.full((2, 3), 3.0))
    assert_close(y.grad, ember.full((2,), 2.0))


def test_pytree_inputs_outputs_and_constants():
    def f(inputs, *, scale):
        return {"sum": (inputs["a"] + inputs["b"]) * scale, "shape": inputs["a"].shape, "name": "x"}

    a, b = ember.randn(2, 2, requires_grad=True), ember.randn(2, 2)
    out = aot_function(f, lambda gm, ex: gm)({"a": a, "b": b}, scale=3.0)
    assert out["shape"] == (2, 2) and out["name"] == "x"
    assert_close(out["sum"], (a + b) * 3)
    out["sum"].sum().backward()
    assert_close(a.grad, ember.full((2, 2), 3.0))


def test_data_dependent_control_flow_is_a_clear_error():
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(InductorError, match="branchy.*data-dependent"):
        aot_function(branchy, lambda gm, ex: gm)(ember.randn(3))


def test_default_partition_splits_forward_and_backward():
    from ember._inductor.aot import trace_joint

    x = ember.randn(3, requires_grad=True)
    joint = trace_joint(lambda x: (x.sin() * x).sum(), [x])
    fw, bw = default_partition(joint, [], num_fwd_outputs=joint.num_fwd_outputs)
    fw_out = fw(x.detach())
    assert_close(fw_out[0], (x.sin() * x).sum())
    grads = bw(*fw_out[1:], ember.tensor(1.0))
    assert_close(grads[0], x.cos() * x + x.sin())
    assert not [n for n in fw.graph.nodes if n.op == "placeholder" and n.name.startswith("tangents")]


def test_aot_module_simplified_on_a_traced_graph_module():
    from ember.fx import symbolic_trace

    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU(), ember.nn.Linear(4, 2))
    gm = symbolic_trace(net)
    x = ember.randn(3, 4)
    fw = Counting()
    forward = aot_module_simplified(gm, [x], fw_compiler=fw, bw_compiler=lambda g, ex: g)
    assert len(fw.graphs) == 1  # compiled for the example inputs at once
    out = forward(x)
    assert_close(out, net(x))
    out.sum().backward()
    assert len(fw.graphs) == 1
    grads = [p.grad for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    net(x).sum().backward()
    for g, p in zip(grads, net.parameters()):
        assert_close(g, p.grad)


def test_module_recompiles_per_train_eval_mode():
    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.Dropout(0.5))
    compiled = aot_module(net, lambda gm, ex: gm)
    x = ember.randn(8, 4)
    compiled(x)
    net.eval()
    assert_close(compiled(x), net(x))


def test_joint_graph_is_a_debug_stage(monkeypatch, tmp_path):
    from ember._inductor import debug

    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    monkeypatch.setenv("EMBER_COMPILE_DEBUG_DIR", str(tmp_path))
    with debug.compiling("stage_check"):
        aot_function(lambda x: x.cos().sum(), lambda gm, ex: gm)(ember.randn(3, requires_grad=True))
    files = sorted(p.name for p in (tmp_path / "stage_check").iterdir())
    assert files[0] == "01_joint_graph.txt", files
    text = (tmp_path / "stage_check" / files[0]).read_text()
    assert "primals_1" in text and "tangents_1" in text


def test_repeated_outputs_and_views_of_outputs():
    def f(x):
        y = x.sin()
        return y, y, y.t()

    x = ember.randn(2, 3, requires_grad=True)
    a, b, c = aot_function(f, lambda gm, ex: gm)(x)
    (a.sum() + 2 * b.sum() + 3 * c.sum()).backward()
    assert_close(x.grad, 6 * x.detach().cos())
