"""Sparse COO/CSR tensors as graph inputs (issue 28, the GCN of the model suite): an opaque placeholder that
only ``_sparse_mm`` takes, guarded on layout, shape, dtype and device but not on its number of stored
elements; other sparse ops break the graph with a reason. Oracle: the same function run eagerly."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo
from ember._dynamo.testing import CompileCounter, CompileCounterWithBackend
from ember.testing import assert_close

pytestmark = pytest.mark.usefixtures("fresh_caches")  # conftest.py: empty compile caches for every test


def _adjacency(n, density, seed, layout="coo"):
    """A random ``(n, n)`` sparse matrix with self-loops (about ``density * n * n`` stored elements)."""
    rng = np.random.default_rng(seed)
    dense = (rng.random((n, n)) < density) * rng.random((n, n))
    np.fill_diagonal(dense, 1.0)
    t = ember.tensor(dense.astype(np.float32))
    return t.to_sparse().coalesce() if layout == "coo" else t.to_sparse_csr()


class GraphConvolution(ember.nn.Module):
    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.linear = ember.nn.Linear(fan_in, fan_out, bias=False)
        self.bias = ember.nn.Parameter(ember.randn(fan_out))

    def forward(self, x, adjacency):
        return ember.sparse.mm(adjacency, self.linear(x)).relu() + self.bias


def _grads(model):
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_gcn_layer_is_one_graph_with_eager_values_and_gradients(layout):
    ember.manual_seed(0)
    model = GraphConvolution(5, 4)
    x, adjacency = ember.randn(10, 5), _adjacency(10, 0.3, seed=1, layout=layout)
    counter = CompileCounterWithBackend("eager")
    compiled = ember.compile(model, backend=counter, fullgraph=True)

    got = compiled(x, adjacency)
    got.sum().backward()
    got_grads = _grads(model)
    model.zero_grad()
    want = model(x, adjacency)
    want.sum().backward()

    assert counter.frame_count == 1
    ops = [n.target for n in counter.graphs[0].graph.nodes if n.op == "call_function"]
    assert any(getattr(op, "name", None) == "_sparse_mm" for op in ops)
    assert_close(got, want)
    for g, w in zip(got_grads, _grads(model)):
        assert_close(g, w)


def test_another_nnz_reuses_the_graph_and_a_dense_tensor_recompiles():
    weight = ember.randn(6, 3)

    def f(x, a):
        return ember.sparse.mm(a, x @ weight)

    counter = CompileCounter()
    compiled = ember.compile(f, backend=counter)
    x = ember.randn(8, 6)
    sparse, denser = _adjacency(8, 0.2, seed=2), _adjacency(8, 0.6, seed=3)
    assert sparse._nnz() != denser._nnz()
    uncoalesced = ember.sparse_coo_tensor(ember.tensor([[0, 0, 7], [1, 1, 2]]), ember.tensor([1.0, 2.0, 3.0]), (8, 8))

    for a in (sparse, denser, uncoalesced):
        assert_close(compiled(x, a), f(x, a))
    assert counter.frame_count == 1  # the graph never reads nnz (nor whether the indices are coalesced)

    dense = denser.to_dense()  # a strided tensor in its place: the guard's layout test fails
    assert_close(compiled(x, dense), f(x, dense))
    assert counter.frame_count == 2
    assert_close(compiled(x, sparse), f(x, sparse))  # both entries stay cached
    assert counter.frame_count == 2


def test_a_sparse_op_other_than_a_product_breaks_the_graph_with_a_reason():
    adjacency = _adjacency(6, 0.3, seed=5)
    x = ember.randn(6, 2)

    def scaled(a, x):
        return ember.sparse.mm(a * 2.0, x).relu()

    def nnz(a, x):
        return x * a._nnz()

    for f in (scaled, nnz):
        assert_close(ember.compile(f, backend="eager")(adjacency, x), f(adjacency, x))
        explained = dynamo.explain(f)(adjacency, x)
        reasons = " ".join(str(r) for r in explained.break_reasons)
        assert "sparse" in reasons, reasons
        with pytest.raises(Exception, match="sparse"):
            ember.compile(f, backend="eager", fullgraph=True)(adjacency, x)


def test_a_sparse_input_that_requires_grad_runs_the_frame_eagerly():
    adjacency = _adjacency(4, 0.5, seed=6).requires_grad_(True)
    x = ember.randn(4, 3)

    def f(a, x):
        return ember.sparse.mm(a, x).sum()

    counter = CompileCounter()
    got = ember.compile(f, backend=counter)(adjacency, x)
    got.backward()
    assert counter.frame_count == 0
    assert_close(got, f(adjacency.detach(), x))
    assert adjacency.grad is not None  # eager's sparse gradient


def test_size_queries_of_a_sparse_input_are_its_own():
    adjacency = _adjacency(5, 0.4, seed=7)
    x = ember.randn(5, 2)

    def f(a, x):
        return ember.sparse.mm(a, x) * a.numel() + a.size(0) + a.sparse_dim() * 10 + a.dense_dim()

    assert_close(ember.compile(f, backend="eager", fullgraph=True)(adjacency, x), f(adjacency, x))
