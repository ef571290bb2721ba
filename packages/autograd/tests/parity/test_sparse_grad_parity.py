"""Gradients through sparse tensors against PyTorch's, and a 2-layer GCN trained side by side with PyTorch.

ember runs on the backend's device (``_parity_device`` of ember-core's parity tests); PyTorch on the CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tensor-core" / "tests" / "parity"))
from _parity_device import EMBER_DEVICE  # noqa: E402

import ember  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*[Ss]parse")  # PyTorch's beta/invariant-check notices

INDICES = [[0, 1, 1, 2, 0, 3], [2, 0, 2, 1, 2, 3]]  # (0, 2) twice: uncoalesced
SHAPE = (4, 5)


def _e(array, requires_grad=False):
    return ember.tensor(array, device=EMBER_DEVICE, requires_grad=requires_grad)


def _t(array, requires_grad=False):
    return torch.tensor(array, requires_grad=requires_grad)


def _np(x):
    if isinstance(x, torch.Tensor):
        return (x.to_dense() if x.layout != torch.strided else x).detach().cpu().numpy()
    return (x.to_dense() if x.layout is not ember.strided else x).detach().cpu().numpy()


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("coalesced", [False, True])
def test_sparse_mm_gradients_match(side, coalesced):
    rng = np.random.default_rng(0)
    values = rng.standard_normal(6)
    dense = rng.standard_normal((5, 3) if side == "left" else (2, 4))
    upstream = rng.standard_normal((4, 3) if side == "left" else (2, 5))
    es = ember.sparse_coo_tensor(INDICES, _e(values), SHAPE)
    ts = torch.sparse_coo_tensor(torch.tensor(INDICES), _t(values), SHAPE)
    if coalesced:
        es, ts = es.coalesce(), ts.coalesce()
    es.requires_grad_()
    ts.requires_grad_()
    ed, td = _e(dense, True), _t(dense, True)
    if side == "left":
        eo, to = ember.sparse.mm(es, ed), torch.sparse.mm(ts, td)
    else:
        eo, to = ember.sparse.mm(ed, es), torch.sparse.mm(td, ts)
    eo.backward(_e(upstream))
    to.backward(_t(upstream))
    assert es.grad.layout is ember.sparse_coo and ts.grad.layout == torch.sparse_coo
    np.testing.assert_allclose(_np(es.grad), _np(ts.grad), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(ed.grad), _np(td.grad), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("log", [False, True])
def test_sparse_softmax_gradients_match(log):
    rng = np.random.default_rng(1)
    values, upstream = rng.standard_normal(6), rng.standard_normal(SHAPE)
    ev, tv = _e(values, True), _t(values, True)
    es = ember.sparse_coo_tensor(INDICES, ev, SHAPE)
    ts = torch.sparse_coo_tensor(torch.tensor(INDICES), tv, SHAPE)
    efn, tfn = (ember.sparse.log_softmax, torch.sparse.log_softmax) if log else \
        (ember.sparse.softmax, torch.sparse.softmax)
    (efn(es, 1).to_dense() * _e(upstream)).sum().backward()
    (tfn(ts, 1).to_dense() * _t(upstream)).sum().backward()
    np.testing.assert_allclose(_np(ev.grad), _np(tv.grad), rtol=1e-10, atol=1e-12)


def test_to_dense_and_to_sparse_gradients_match():
    rng = np.random.default_rng(2)
    x, upstream = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    x[0, 1] = x[2, 2] = 0.0
    ex, tx = _e(x, True), _t(x, True)
    (ex.to_sparse().to_dense() * _e(upstream)).sum().backward()
    (tx.to_sparse().to_dense() * _t(upstream)).sum().backward()
    np.testing.assert_allclose(_np(ex.grad), _np(tx.grad), rtol=1e-12)
    es = ember.sparse_coo_tensor(INDICES, _e(rng.standard_normal(6)), SHAPE).requires_grad_()
    ts = torch.sparse_coo_tensor(torch.tensor(INDICES), _t(es._values().detach().cpu().numpy()), SHAPE)
    ts.requires_grad_()
    weights = rng.standard_normal(SHAPE)
    (es.to_dense() * _e(weights)).sum().backward()
    (ts.to_dense() * _t(weights)).sum().backward()
    np.testing.assert_allclose(_np(es.grad), _np(ts.grad), rtol=1e-12)


# -- a graph convolutional network (Kipf & Welling, 2017), trained side by side ------------------


def _graph(n_nodes=14, n_edges=30, seed=3):
    """The symmetric normalised adjacency D^-1/2 (A + I) D^-1/2 of a random undirected graph, as COO parts."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n_nodes, n_edges), rng.integers(0, n_nodes, n_edges)
    adjacency = np.zeros((n_nodes, n_nodes))
    adjacency[src, dst] = adjacency[dst, src] = 1.0
    adjacency += np.eye(n_nodes)
    adjacency = np.minimum(adjacency, 1.0)
    degree = adjacency.sum(1)
    normalised = adjacency / np.sqrt(degree[:, None] * degree[None, :])
    rows, cols = np.nonzero(normalised)
    return np.stack([rows, cols]), normalised[rows, cols], n_nodes


class _GCN:
    """Two graph convolutions: relu(A @ X @ W1) then A @ H @ W2, in either library."""

    def __init__(self, lib, adjacency, weights):
        self.lib, self.adjacency = lib, adjacency
        self.weights = [lib.tensor(w, requires_grad=True) if lib is torch else
                        ember.tensor(w, device=EMBER_DEVICE, requires_grad=True) for w in weights]

    def loss(self, x, labels):
        lib = self.lib
        w1, w2 = self.weights
        hidden = lib.nn.functional.relu(lib.sparse.mm(self.adjacency, x @ w1))
        logits = lib.sparse.mm(self.adjacency, hidden @ w2)
        return lib.nn.functional.cross_entropy(logits, labels)


@pytest.mark.parametrize("learn_edges", [False, True])
def test_gcn_training_matches_pytorch(learn_edges):
    indices, values, n = _graph()
    rng = np.random.default_rng(4)
    features = rng.standard_normal((n, 6))
    labels = rng.integers(0, 3, n)
    weights = [rng.standard_normal((6, 8)) * 0.5, rng.standard_normal((8, 3)) * 0.5]
    e_adj = ember.sparse_coo_tensor(indices, _e(values), (n, n))
    t_adj = torch.sparse_coo_tensor(torch.tensor(indices), _t(values), (n, n)).coalesce()
    if learn_edges:  # edge weights as parameters: their gradient is sparse, on the graph's pattern
        e_adj.requires_grad_()
        t_adj.requires_grad_()
    e_model, t_model = _GCN(ember, e_adj, weights), _GCN(torch, t_adj, weights)
    e_x, t_x = _e(features), _t(features)
    e_y, t_y = ember.tensor(labels, device=EMBER_DEVICE), torch.tensor(labels)
    e_opt = ember.optim.Adam(e_model.weights, lr=0.05)
    t_opt = torch.optim.Adam(t_model.weights, lr=0.05)
    losses = []
    for _ in range(5):
        e_opt.zero_grad()
        t_opt.zero_grad()
        e_loss, t_loss = e_model.loss(e_x, e_y), t_model.loss(t_x, t_y)
        e_loss.backward()
        t_loss.backward()
        np.testing.assert_allclose(e_loss.item(), t_loss.item(), rtol=1e-10)
        for ew, tw in zip(e_model.weights, t_model.weights):
            np.testing.assert_allclose(_np(ew.grad), _np(tw.grad), rtol=1e-8, atol=1e-12)
        if learn_edges:
            assert e_adj.grad.is_sparse
            np.testing.assert_allclose(_np(e_adj.grad), _np(t_adj.grad), rtol=1e-8, atol=1e-12)
            e_adj.grad = None
            t_adj.grad = None
        e_opt.step()
        t_opt.step()
        losses.append(e_loss.item())
    assert losses[-1] < losses[0]  # it trains
