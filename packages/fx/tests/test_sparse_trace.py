"""FX symbolic tracing of modules that multiply by a sparse buffer (a graph convolution)."""

import numpy as np

import ember
import ember.fx


class _GraphConv(ember.nn.Module):
    def __init__(self, adjacency):
        super().__init__()
        self.register_buffer("adjacency", adjacency)
        self.linear = ember.nn.Linear(3, 2)

    def forward(self, x):
        return ember.sparse.mm(self.adjacency, self.linear(x)).relu()


def test_sparse_product_is_recorded_and_replays():
    adjacency = ember.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]).to_sparse()
    module = _GraphConv(adjacency)
    traced = ember.fx.symbolic_trace(module)
    targets = [node.target for node in traced.graph.nodes if node.op == "call_function"]
    assert ember.mm in targets  # ember.sparse.mm of a Proxy records the registry op
    x = ember.randn(3, 3)
    expected = np.maximum(adjacency.to_dense().numpy() @ module.linear(x).detach().numpy(), 0.0)
    np.testing.assert_allclose(traced(x).detach().numpy(), expected, rtol=1e-6)
