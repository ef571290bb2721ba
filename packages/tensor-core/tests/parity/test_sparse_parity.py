"""Sparse tensors against PyTorch's (torch.sparse): construction, conversions, products, reductions, printing.

ember runs on the backend's device (``_parity_device``); PyTorch runs on the CPU, the reference.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _parity_device import EMBER_DEVICE, require_pinned_torch

import ember

pytestmark = pytest.mark.filterwarnings("ignore:.*[Ss]parse")  # PyTorch's beta/invariant-check notices

INDICES = [[0, 1, 1, 2, 0, 3], [2, 0, 2, 1, 2, 3]]  # (0, 2) twice: uncoalesced
SHAPE = (4, 5)


def _pair(dtype=np.float64, seed=0, indices=INDICES, shape=SHAPE):
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(len(indices[0])) * 3).astype(dtype)
    e = ember.sparse_coo_tensor(indices, ember.tensor(values, device=EMBER_DEVICE), shape)
    t = torch.sparse_coo_tensor(torch.tensor(indices), torch.from_numpy(values), shape)
    return e, t


def _np(x):
    if isinstance(x, torch.Tensor):
        return (x.to_dense() if x.layout != torch.strided else x).detach().cpu().numpy()
    return (x.to_dense() if x.layout is not ember.strided else x).detach().cpu().numpy()


def _close(e, t, rtol=1e-10, atol=1e-12):
    assert (e.layout is not ember.strided) == (t.layout != torch.strided), (e.layout, t.layout)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol)


def test_coalesce_matches():
    e, t = _pair()
    assert e.is_coalesced() == t.is_coalesced()
    ec, tc = e.coalesce(), t.coalesce()
    np.testing.assert_array_equal(ec.indices().cpu().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(ec.values().cpu().numpy(), tc.values().numpy(), rtol=1e-12)
    assert ec._nnz() == tc._nnz() and ec.sparse_dim() == tc.sparse_dim() and ec.dense_dim() == tc.dense_dim()


@pytest.mark.parametrize("sparse_dim", [None, 1])
def test_to_sparse_matches(sparse_dim):
    x = np.array([[0.0, 1.5, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, -1.0]])
    e = ember.tensor(x, device=EMBER_DEVICE).to_sparse(sparse_dim) if sparse_dim else \
        ember.tensor(x, device=EMBER_DEVICE).to_sparse()
    t = torch.from_numpy(x).to_sparse(sparse_dim) if sparse_dim else torch.from_numpy(x).to_sparse()
    np.testing.assert_array_equal(e.indices().cpu().numpy(), t.indices().numpy())
    np.testing.assert_array_equal(e.values().cpu().numpy(), t.values().numpy())
    assert e.is_coalesced() == t.is_coalesced()


def test_to_sparse_csr_matches():
    e, t = _pair()
    ec, tc = e.to_sparse_csr(), t.coalesce().to_sparse_csr()
    for a, b in ((ec.crow_indices(), tc.crow_indices()), (ec.col_indices(), tc.col_indices()),
                 (ec.values(), tc.values())):
        np.testing.assert_allclose(a.cpu().numpy(), b.numpy(), rtol=1e-12)
    _close(ec.to_sparse_coo(), tc.to_sparse_coo())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_match(dtype):
    e, t = _pair(dtype)
    rng = np.random.default_rng(1)
    right = (rng.standard_normal((5, 3))).astype(dtype)
    left = (rng.standard_normal((2, 4))).astype(dtype)
    er, tr = ember.tensor(right, device=EMBER_DEVICE), torch.from_numpy(right)
    el, tl = ember.tensor(left, device=EMBER_DEVICE), torch.from_numpy(left)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else {}
    _close(ember.sparse.mm(e, er), torch.sparse.mm(t, tr), **tol)
    _close(ember.mm(e, er), torch.mm(t, tr), **tol)
    _close(e @ er, t @ tr, **tol)
    _close(ember.spmm(e, er), torch.spmm(t, tr), **tol)
    _close(ember.sparse.mm(el, e), torch.sparse.mm(tl, t), **tol)
    _close(ember.matmul(e, er[:, 0]), torch.matmul(t, tr[:, 0]), **tol)
    _close(ember.sparse.mm(e.to_sparse_csr(), er), torch.sparse.mm(t.coalesce().to_sparse_csr(), tr), **tol)
    bias = rng.standard_normal((4, 3)).astype(dtype)
    _close(ember.sparse.addmm(ember.tensor(bias, device=EMBER_DEVICE), e, er, beta=0.5, alpha=2.0),
           torch.sparse.addmm(torch.from_numpy(bias), t, tr, beta=0.5, alpha=2.0), **tol)
    _close(ember.sparse.mm(e, e.t()), torch.sparse.mm(t, t.t()), **tol)


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_sum_matches(dim):
    e, t = _pair()
    if dim is None:
        _close(ember.sparse.sum(e), torch.sparse.sum(t))
        _close(e.sum(), t.sum())
    else:
        _close(ember.sparse.sum(e, dim), torch.sparse.sum(t, dim))


def test_sum_of_hybrid_matches():
    rng = np.random.default_rng(2)
    values = rng.standard_normal((6, 2))
    e = ember.sparse_coo_tensor(INDICES, ember.tensor(values, device=EMBER_DEVICE), (4, 5, 2))
    t = torch.sparse_coo_tensor(torch.tensor(INDICES), torch.from_numpy(values), (4, 5, 2))
    for dim in (0, 2, (0, 2), (0, 1)):
        _close(ember.sparse.sum(e, dim), torch.sparse.sum(t, dim))


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_matches(dim, log):
    e, t = _pair()
    if log:
        _close(ember.sparse.log_softmax(e, dim), torch.sparse.log_softmax(t, dim))
    else:
        _close(ember.sparse.softmax(e, dim), torch.sparse.softmax(t, dim))


def test_elementwise_matches():
    e, t = _pair()
    dense = np.random.default_rng(3).standard_normal(SHAPE)
    ed, td = ember.tensor(dense, device=EMBER_DEVICE), torch.from_numpy(dense)
    pairs = [
        (e * 2.5, t * 2.5), (e / 4, t / 4), (-e, -t), (e + e, t + t), (e - e * 2, t - t * 2),
        (ed + e, td + t), (e * ed, t * td), (e.t(), t.t()), (e.transpose(0, 1), t.transpose(0, 1)),
        (ember.abs(e), torch.abs(t)), (e.coalesce() * e.coalesce(), t.coalesce() * t.coalesce()),
        (e.detach(), t.detach()), (e.clone(), t.clone()),
    ]
    for a, b in pairs:
        _close(a, b)


def test_add_sparse_dense_error_matches():
    e, t = _pair()
    with pytest.raises(RuntimeError) as torch_error:
        t + torch.zeros(SHAPE, dtype=torch.float64)
    with pytest.raises(RuntimeError) as ember_error:
        e + ember.zeros(SHAPE, dtype=ember.float64, device=EMBER_DEVICE)
    assert str(ember_error.value) == str(torch_error.value)


def test_uncoalesced_values_error_matches():
    e, t = _pair()
    with pytest.raises(RuntimeError) as torch_error:
        t.values()
    with pytest.raises(RuntimeError) as ember_error:
        e.values()
    assert str(ember_error.value) == str(torch_error.value)


def test_repr_matches():
    require_pinned_torch("sparse tensor reprs")
    if EMBER_DEVICE != "cpu":
        pytest.skip("reprs are compared on the CPU (PyTorch runs on the CPU here)")
    cases = []
    for dtype, requires_grad in ((np.float32, False), (np.float64, True), (np.int64, False)):
        values = np.array([3, 4, 5], dtype=dtype)
        indices = [[0, 1, 1], [2, 0, 2]]
        cases.append((
            ember.sparse_coo_tensor(indices, values, (2, 3), requires_grad=requires_grad),
            torch.sparse_coo_tensor(torch.tensor(indices), torch.from_numpy(values), (2, 3),
                                    requires_grad=requires_grad),
        ))
    e, t = cases[0]
    cases.append((e.to_sparse_csr(), t.to_sparse_csr()))
    cases.append((
        ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64), ember.zeros(0), (2, 3)),
        torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (2, 3)),
    ))
    for e, t in cases:
        # PyTorch's lines are one character shorter ("torch." against "ember."), which can move a wrap
        assert repr(e).replace("ember.", "torch.") == repr(t)


def test_layout_names_match():
    assert repr(ember.sparse_coo).replace("ember", "torch") == repr(torch.sparse_coo)
    assert repr(ember.sparse_csr).replace("ember", "torch") == repr(torch.sparse_csr)
    assert repr(ember.strided).replace("ember", "torch") == repr(torch.strided)
    assert ember.zeros(1).layout is ember.strided and torch.zeros(1).layout is torch.strided
