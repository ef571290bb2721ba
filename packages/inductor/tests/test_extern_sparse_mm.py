"""A sparse graph input through ember-inductor (issue 28, the GCN of the model suite): the placeholder is an
:class:`~ember._inductor.ir.OpaqueInput`, ``_sparse_mm`` an extern call (never loops), forward and backward;
a forward that saves the sparse input for backward returns it as is. Oracle: the eager model."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo
from ember._dynamo.testing import CompileCounterWithBackend
from ember._inductor import config
from ember._inductor.codegen import plan_cache
from ember._inductor.codegen.wrapper import compile_graph
from ember.testing import assert_close


@pytest.fixture(autouse=True)
def strict():
    """A compiler failure raises instead of running eagerly; each test starts from empty dynamo caches."""
    dynamo.reset()
    with config.patch(fallback_on_compile_error=False):
        yield
    dynamo.reset()


def _adjacency(n, density, seed):
    """``D^-1/2 (A + I) D^-1/2`` of a random graph, as a coalesced COO tensor (as the suite's GCN)."""
    rng = np.random.default_rng(seed)
    dense = (rng.random((n, n)) < density).astype(np.float32)
    dense = np.maximum(dense, dense.T)
    np.fill_diagonal(dense, 1.0)
    scale = 1.0 / np.sqrt(dense.sum(1))
    return ember.tensor(dense * scale[:, None] * scale[None, :]).to_sparse().coalesce()


class GraphConvolution(ember.nn.Module):
    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.linear = ember.nn.Linear(fan_in, fan_out, bias=False)
        self.bias = ember.nn.Parameter(ember.randn(fan_out))

    def forward(self, x, adjacency):
        return ember.sparse.mm(adjacency, self.linear(x)) + self.bias


class GCN(ember.nn.Module):
    """Two graph convolutions ``A @ (H W) + b``, relu between (benchmarks/models/other.py's GCN)."""

    def __init__(self):
        super().__init__()
        self.convs = ember.nn.ModuleList([GraphConvolution(6, 8), GraphConvolution(8, 3)])

    def forward(self, x, adjacency):
        x = self.convs[0](x, adjacency).relu()
        return self.convs[1](x, adjacency)


def _step(model, x, adjacency):
    model.zero_grad()
    out = model(x, adjacency)
    (out * ember.arange(out.numel()).reshape(out.shape).cos()).sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def test_a_gcn_compiles_fullgraph_with_eager_values_and_gradients():
    ember.manual_seed(0)
    model = GCN()
    counter = CompileCounterWithBackend("inductor")
    compiled = ember.compile(model, backend=counter, fullgraph=True)
    x = ember.randn(16, 6)
    for seed in (1, 2):  # another adjacency (another nnz) runs the same compiled graphs
        adjacency = _adjacency(16, 0.2 * seed, seed)
        got, got_grads = _step(compiled, x, adjacency)
        want, want_grads = _step(model, x, adjacency)
        assert_close(got, want, rtol=1e-5, atol=1e-5)
        for g, w in zip(got_grads, want_grads):
            assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert counter.frame_count == 1


def _sparse_graph():
    def f(a, x):
        return (ember.sparse.mm(a, x) * 2.0).relu()

    from ember._dynamo.testing import EagerAndRecordGraphs

    recorder = EagerAndRecordGraphs()
    adjacency, x = _adjacency(9, 0.3, 3), ember.randn(9, 4)
    ember.compile(f, backend=recorder, fullgraph=True)(adjacency, x)
    return recorder.graphs[0], adjacency, x, f


def test_the_sparse_product_is_an_extern_call_on_an_opaque_input(tmp_path):
    gm, adjacency, x, f = _sparse_graph()
    with config.patch(cache_dir=str(tmp_path)):
        compiled = compile_graph(gm, [adjacency, x])
        graph = compiled.graph
        assert [type(b).__name__ for b in graph.opaque_inputs] == ["OpaqueInput"] and graph.inputs[0] is None
        externs = [b for b in graph.buffers if type(b).__name__ == "ExternKernel"]
        assert [k.op.name for k in externs] == ["_sparse_mm"]
        other = _adjacency(9, 0.6, 4)
        assert_close(compiled(adjacency, x)[0], f(adjacency, x))
        assert_close(compiled(other, x)[0], f(other, x))
        # the run plan, stored as JSON, names the sparse input: a warm start loads it and runs
        key = plan_cache.key(gm, [adjacency, x])
        assert key is not None and plan_cache.read(key) is not None
        warm = compile_graph(gm, [adjacency, x])
        assert_close(warm(other, x)[0], f(other, x))
