"""``ember.autocast`` regions inside compiled code are traced (issue 22): the graph holds the region's
casts as ``_to_copy`` nodes, so every backend gives eager autocast's dtypes, values and gradients."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo
import ember.nn as nn

BACKENDS = ["eager", "aot_eager", "inductor"]
pytestmark = pytest.mark.usefixtures("fresh_caches")


def _same(got, want, rtol=1e-5, atol=1e-6):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, rtol, atol)
        return
    if not isinstance(want, ember.Tensor):
        assert got == want
        return
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.detach().float().numpy(), want.detach().float().numpy(), rtol=rtol, atol=atol)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            h = self.fc1(x).relu()
            logits = self.fc2(h)
            loss = ember.nn.functional.cross_entropy(logits, ember.zeros(x.shape[0], dtype=ember.int64))
        return logits, loss


def _cast_nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and "_to_copy" in str(n.target)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_region_is_one_graph_with_its_casts(backend):
    ember.manual_seed(0)
    net = Net()
    ref = copy.deepcopy(net)
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return dynamo.lookup_backend(backend)(gm, example_inputs)

    x = ember.randn(5, 8)
    got = ember.compile(net, backend=keep, fullgraph=True)(x)
    want = ref(x)
    assert got[0].dtype == ember.bfloat16 and got[1].dtype == ember.float32  # cross_entropy runs in float32
    _same(got, want)
    got[1].backward()
    want[1].backward()
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        assert p.grad.dtype == ember.float32, name
        _same(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert len(graphs) == 1 and len(_cast_nodes(graphs[0])) >= 4  # x, two weights, two biases, logits back
    assert not ember.is_autocast_enabled("cpu")


def _break_inside(x, w):
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = x @ w
        scale = y.float().abs().max().item()  # a graph break inside the region
        z = (y @ w.t()) / scale  # after the break: still inside the region
    return y, z


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_a_region_resumes_inside_it(backend):
    x, w = ember.randn(4, 6), ember.randn(6, 6)
    want = _break_inside(x, w)
    compiled = ember.compile(_break_inside, backend=backend)
    got = compiled(x, w)
    assert got[1].dtype == ember.bfloat16
    _same(got, want)
    assert not ember.is_autocast_enabled("cpu")  # the region the resumed code entered was left
    _same(compiled(x, w), want)
    explained = dynamo.explain(_break_inside)(x, w)
    assert explained.graph_count == 2 and explained.graph_break_count == 1


def _nested(x, w):
    with ember.autocast("cpu", dtype=ember.bfloat16):
        low = x @ w
        with ember.autocast("cpu", enabled=False):
            full = x @ w
            inner = ember.is_autocast_enabled("cpu")
        again = x @ w
        outer = ember.is_autocast_enabled("cpu")
    return low, full, again, inner, outer, x @ w


def test_nested_regions_and_queries():
    x, w = ember.randn(3, 5), ember.randn(5, 2)
    want = _nested(x, w)
    got = ember.compile(_nested, backend="eager", fullgraph=True)(x, w)
    assert [t.dtype for t in got if isinstance(t, ember.Tensor)] == [
        ember.bfloat16, ember.float32, ember.bfloat16, ember.float32
    ]
    assert got[3] is False and got[4] is True
    _same(got, want)


class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    @ember.autocast("cpu", dtype=ember.bfloat16)
    def forward(self, x):
        return self.fc(x)


REGION = ember.autocast("cpu", dtype=ember.bfloat16)  # a region object made outside the function


def _global_region(x, w):
    with REGION:
        return x @ w


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_decorator_and_a_region_object_made_outside(backend):
    ember.manual_seed(0)
    net = Decorated()
    x = ember.randn(2, 4)
    got = ember.compile(net, backend=backend, fullgraph=True)(x)
    assert got.dtype == ember.bfloat16
    _same(got, net(x))
    w = ember.randn(4, 3)
    got = ember.compile(_global_region, backend=backend, fullgraph=True)(x, w)
    assert got.dtype == ember.bfloat16
    _same(got, _global_region(x, w))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_function_called_inside_a_region_records_the_casts(backend):
    # the region is entered outside: guarded, and the casts are in the graph, so a compiler that
    # does not run ops through the dispatcher still gives autocast's dtypes
    def f(x, w):
        return (x @ w).relu() + 1

    x, w = ember.randn(4, 4), ember.randn(4, 4)
    compiled = ember.compile(f, backend=backend)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        want = f(x, w)
        got = compiled(x, w)
    assert got.dtype == ember.bfloat16
    _same(got, want)
    _same(compiled(x, w), f(x, w))  # outside the region: its own entry, float32


def test_grad_scaler_training_compiled_equals_eager():
    # the AMP recipe (a region in the step, GradScaler around backward/step) with a compiled model
    def train(compiled):
        ember.manual_seed(0)
        net = Net()
        model = ember.compile(net, backend="aot_eager") if compiled else net
        opt = ember.optim.SGD(net.parameters(), lr=0.1)
        scaler = ember.amp.GradScaler("cpu", init_scale=2.0**8)
        losses = []
        for step in range(5):
            x = ember.randn(6, 8, generator=ember.Generator().manual_seed(step))
            _, loss = model(x)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
        return losses, [p.detach().clone() for p in net.parameters()]

    (want, want_params), (got, got_params) = train(False), train(True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_params, want_params):
        _same(g, w, rtol=1e-5, atol=1e-6)


def test_region_arguments_are_checked_as_in_eager():
    def f(x):
        with ember.autocast(device_type=3):
            return x * 2

    with pytest.raises(Exception, match="device_type"):
        ember.compile(f, backend="eager", fullgraph=True)(ember.randn(2))
