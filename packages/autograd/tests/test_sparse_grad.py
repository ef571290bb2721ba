"""Gradients through sparse tensors (ember.sparse): finite differences (gradcheck) and closed forms."""

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck

INDICES = [[0, 1, 1, 2, 0], [2, 0, 2, 1, 2]]  # (0, 2) appears twice: an uncoalesced matrix
SHAPE = (3, 4)


def _values(seed=0, n=5, dtype=ember.float64):
    rng = np.random.default_rng(seed)
    return ember.tensor(rng.standard_normal(n), dtype=dtype, requires_grad=True)


def _dense(shape, seed=1, dtype=ember.float64):
    rng = np.random.default_rng(seed)
    return ember.tensor(rng.standard_normal(shape), dtype=dtype, requires_grad=True)


def _sparse(values, indices=INDICES, shape=SHAPE):
    return ember.sparse_coo_tensor(indices, values, shape)


def test_sparse_dense_product_gradcheck():
    values, dense = _values(), _dense((4, 3))
    assert gradcheck(lambda v, d: ember.sparse.mm(_sparse(v), d), (values, dense))
    assert gradcheck(lambda v, d: _sparse(v) @ d, (values, dense))
    assert gradcheck(lambda v, d: ember.mm(_sparse(v).to_sparse_csr(), d), (values, dense))


def test_dense_sparse_product_gradcheck():
    values, dense = _values(), _dense((2, 3))
    assert gradcheck(lambda v, d: ember.sparse.mm(d, _sparse(v)), (values, dense))
    assert gradcheck(lambda v, d: ember.matmul(d[0], _sparse(v)), (values, dense))


def test_product_double_backward():
    values, dense = _values(), _dense((4, 2))
    assert gradgradcheck(lambda v, d: ember.sparse.mm(_sparse(v), d), (values, dense))


def test_complex_product_gradcheck():
    rng = np.random.default_rng(2)
    values = ember.tensor(rng.standard_normal(5) + 1j * rng.standard_normal(5), requires_grad=True)
    dense = ember.tensor(rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2)), requires_grad=True)
    assert gradcheck(lambda v, d: ember.sparse.mm(_sparse(v), d), (values, dense))


def test_values_ops_gradcheck():
    values = _values()
    weights = _dense(SHAPE, seed=3).detach()
    checks = [
        lambda v: _sparse(v).to_dense(),
        lambda v: _sparse(v).coalesce().values(),
        lambda v: ember.sparse.softmax(_sparse(v), 1).to_dense(),
        lambda v: ember.sparse.log_softmax(_sparse(v), 0).to_dense(),
        lambda v: ember.sparse.sum(_sparse(v), 0).to_dense(),
        lambda v: ember.sparse.sum(_sparse(v)),
        lambda v: (_sparse(v) * weights).to_dense(),
        lambda v: (_sparse(v) + _sparse(v) * 2).to_dense(),
        lambda v: (weights + _sparse(v)),
        lambda v: _sparse(v).t().to_dense(),
        lambda v: ember.abs(_sparse(v)).to_dense(),
    ]
    for fn in checks:
        assert gradcheck(fn, (values,))


def test_dense_to_sparse_gradcheck():
    x = _dense((3, 2))
    assert gradcheck(lambda t: t.to_sparse().values() * 3, (x,))
    assert gradcheck(lambda t: ember.sparse.mm(t.to_sparse(), ember.ones(2, 2, dtype=ember.float64)), (x,))


def test_sparse_leaf_grad_is_sparse_on_its_pattern():
    dense = _dense((4, 3)).detach()
    leaf = ember.sparse_coo_tensor(INDICES, _values().detach(), SHAPE, requires_grad=True)
    assert leaf.is_leaf and leaf.requires_grad and leaf.grad is None
    out = ember.sparse.mm(leaf, dense)
    assert out.grad_fn is not None
    weights = _dense((3, 3), seed=4).detach()
    (out * weights).sum().backward()
    grad = leaf.grad
    assert grad.is_sparse and grad.shape == SHAPE and grad is leaf.grad
    # d(sum(W * (S @ D)))/dS[i, j] = (W @ D^T)[i, j], at the specified positions (each once)
    full = weights.numpy() @ dense.numpy().T
    mask = np.zeros(SHAPE, dtype=bool)
    mask[tuple(np.array(INDICES))] = True
    np.testing.assert_allclose(grad.to_dense().numpy(), np.where(mask, full, 0.0), rtol=1e-12)
    assert grad._nnz() == int(mask.sum())
    leaf.grad = None
    assert leaf.grad is None


def test_values_with_history_get_gradients():
    values = _values()
    scaled = values * 2
    s = ember.sparse_coo_tensor(INDICES, scaled, SHAPE)
    assert not s.is_leaf and s.requires_grad
    s.to_dense().sum().backward()
    np.testing.assert_allclose(values.grad.numpy(), np.full(5, 2.0))


def test_dense_operand_gradient_matches_transpose_product():
    values = _values().detach()
    dense = _dense((4, 3))
    g = _dense((3, 3), seed=5).detach()
    ember.sparse.mm(_sparse(values), dense).backward(g)
    matrix = _sparse(values).to_dense().numpy()
    np.testing.assert_allclose(dense.grad.numpy(), matrix.T @ g.numpy(), rtol=1e-12)


def test_no_graph_without_grad():
    s = ember.sparse_coo_tensor(INDICES, _values().detach(), SHAPE)
    d = _dense((4, 2))
    with ember.no_grad():
        out = ember.sparse.mm(s, d)
    assert out.grad_fn is None and not out.requires_grad


@pytest.mark.cuda
def test_cuda_product_gradients_match_cpu():
    values, dense = _values(), _dense((4, 3))
    ember.sparse.mm(_sparse(values), dense).pow(2).sum().backward()
    gv, gd = values.grad.numpy(), dense.grad.numpy()
    values_gpu = values.detach().cuda().requires_grad_()
    dense_gpu = dense.detach().cuda().requires_grad_()
    ember.sparse.mm(_sparse(values_gpu), dense_gpu).pow(2).sum().backward()
    np.testing.assert_allclose(values_gpu.grad.cpu().numpy(), gv, rtol=1e-10)
    np.testing.assert_allclose(dense_gpu.grad.cpu().numpy(), gd, rtol=1e-10)


def test_sparse_leaf_gradient_accumulates():
    leaf = ember.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,), dtype=ember.float64, requires_grad=True)
    weights = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)
    (leaf.to_dense() * weights).sum().backward()
    first = leaf.grad
    (leaf.to_dense() * weights).sum().backward()
    np.testing.assert_array_equal(first.to_dense().numpy(), [1.0, 2.0, 0.0])
    np.testing.assert_array_equal(leaf.grad.to_dense().numpy(), [2.0, 4.0, 0.0])
