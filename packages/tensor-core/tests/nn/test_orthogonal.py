"""nn.utils.parametrizations.orthogonal: Q^H Q = I for every map and shape, the maps against scipy
(expm, solve, QR), gradients against finite differences, assignment, state_dict keys, errors."""

import numpy as np
import pytest
import scipy.linalg

import ember
from ember import nn
from ember.nn.utils import parametrize
from ember.nn.utils._orthogonal import _householder_product, _matrix_exp, _solve_positive_real
from ember.nn.utils.parametrizations import orthogonal

MAPS = ["matrix_exp", "cayley", "householder"]
SHAPES = [(5, 3), (3, 5), (4, 4), (2, 4, 3)]


def _holder(shape, dtype=ember.float64, seed=0):
    ember.manual_seed(seed)
    m = nn.Module()
    m.weight = nn.Parameter(ember.randn(*shape, dtype=dtype))
    return m


def _gram_error(w):
    """max |Q^H Q - I| over the smaller side (orthonormal columns, or rows for wide matrices)."""
    a = w.detach().numpy()
    if a.shape[-2] < a.shape[-1]:
        a = np.swapaxes(a, -1, -2)
    gram = np.swapaxes(a, -1, -2).conj() @ a
    return np.abs(gram - np.eye(a.shape[-1])).max()


def _set_original(m, x):
    with ember.no_grad():
        m.parametrizations.weight.original.copy_(ember.tensor(x))


def _free_parameter(rng, shape, orthogonal_map):
    x = rng.standard_normal(shape) * 0.4
    if orthogonal_map == "householder":  # the diagonal holds the column signs
        d = np.sign(rng.standard_normal(shape[:-2] + (min(shape[-2:]),)))
        idx = np.arange(min(shape[-2:]))
        x[..., idx, idx] = d
    return x


@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("use_trivialization", [True, False])
def test_weight_is_orthogonal_before_and_after_moving(orthogonal_map, shape, use_trivialization):
    m = orthogonal(_holder(shape), orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    assert m.weight.shape == shape
    assert _gram_error(m.weight) < 1e-12
    _set_original(m, _free_parameter(np.random.default_rng(1), shape, orthogonal_map))
    assert _gram_error(m.weight) < 1e-12


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley"])
def test_trivialization_keeps_the_orthonormalized_weight(orthogonal_map):
    m = _holder((5, 3))
    w0 = m.weight.detach().numpy().copy()
    orthogonal(m, orthogonal_map=orthogonal_map)
    q, r = np.linalg.qr(w0)
    q = q * np.sign(np.diag(r))  # the QR with a positive R diagonal
    np.testing.assert_allclose(m.weight.detach().numpy(), q, atol=1e-12)
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), -np.eye(5, 3))
    assert m.parametrizations.weight[0].base.shape == (5, 5)


def test_an_orthogonal_weight_is_kept_exactly():
    q = scipy.linalg.expm(np.triu(np.arange(16.0).reshape(4, 4) / 10, 1) - np.triu(np.arange(16.0).reshape(4, 4) / 10, 1).T)
    m = nn.Module()
    m.weight = nn.Parameter(ember.tensor(q))
    orthogonal(m)
    np.testing.assert_allclose(m.weight.detach().numpy(), q, atol=1e-14)


def test_maps_against_scipy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 4))
    a = x - np.swapaxes(x, -1, -2)
    for scale in (0.1, 3.0, 40.0):  # 40: several squarings
        got = _matrix_exp(ember.tensor(a * scale)).numpy()
        np.testing.assert_allclose(got, np.stack([scipy.linalg.expm(b * scale) for b in a]), atol=1e-10 * scale)
    m = np.eye(4) - 0.5 * a
    b = rng.standard_normal((2, 4, 3))
    np.testing.assert_allclose(_solve_positive_real(ember.tensor(m), ember.tensor(b)).numpy(), np.linalg.solve(m, b),
                               atol=1e-12)


def test_householder_product_against_reflections():
    rng = np.random.default_rng(3)
    v = np.tril(rng.standard_normal((5, 3)), -1)
    tau = rng.standard_normal(3)
    expected = np.eye(5)
    for i in range(3):
        vi = v[:, i].copy()
        vi[i] = 1.0
        expected = expected @ (np.eye(5) - tau[i] * np.outer(vi, vi))
    got = _householder_product(ember.tensor(v), ember.tensor(tau)).numpy()
    np.testing.assert_allclose(got, expected[:, :3], atol=1e-13)


def test_complex_weight_is_unitary():
    ember.manual_seed(0)
    m = nn.Module()
    m.weight = nn.Parameter(ember.randn(4, 3, dtype=ember.complex128))
    orthogonal(m)  # complex: matrix_exp by default
    assert m.parametrizations.weight[0].orthogonal_map == "matrix_exp"
    assert _gram_error(m.weight) < 1e-12
    _set_original(m, np.random.default_rng(0).standard_normal((4, 3)) * (0.3 + 0.2j))
    assert _gram_error(m.weight) < 1e-12


@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("use_trivialization", [True, False])
def test_gradients_match_finite_differences(orthogonal_map, use_trivialization):
    shape = (4, 3)
    m = orthogonal(_holder(shape), orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    rng = np.random.default_rng(4)
    x = _free_parameter(rng, shape, orthogonal_map)
    g = rng.standard_normal(shape)
    _set_original(m, x)
    (m.weight * ember.tensor(g)).sum().backward()
    grad = m.parametrizations.weight.original.grad.numpy()

    def loss(xv):
        _set_original(m, xv)
        return float((m.weight.detach() * ember.tensor(g)).sum())

    free = np.ones(shape, bool)
    if orthogonal_map == "householder":  # the sign diagonal is not differentiated
        free[np.arange(3), np.arange(3)] = False
    h = 1e-6
    for idx in zip(*np.nonzero(free)):
        e = np.zeros(shape)
        e[idx] = h
        numeric = (loss(x + e) - loss(x - e)) / (2 * h)
        assert abs(numeric - grad[idx]) < 1e-6, (idx, numeric, grad[idx])
    assert np.all(grad[~free] == 0)


def test_default_map_and_state_dict_keys():
    lin = orthogonal(nn.Linear(3, 5))
    assert lin.parametrizations.weight[0].orthogonal_map == "householder"
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original", "parametrizations.weight.0.base"]
    sq = orthogonal(nn.Linear(4, 4), use_trivialization=False)
    assert sq.parametrizations.weight[0].orthogonal_map == "matrix_exp"
    assert list(sq.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert parametrize.is_parametrized(sq, "weight")


def test_state_dict_round_trip():
    a = orthogonal(nn.Linear(3, 5))
    _set_original(a, np.random.default_rng(5).standard_normal((5, 3)) * 0.2)
    b = orthogonal(nn.Linear(3, 5))
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())


@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_assignment_with_trivialization(orthogonal_map):
    m = orthogonal(_holder((5, 3)), orthogonal_map=orthogonal_map)
    q = scipy.linalg.qr(np.random.default_rng(6).standard_normal((5, 3)), mode="economic")[0]
    m.weight = ember.tensor(q)
    np.testing.assert_allclose(m.weight.detach().numpy(), q, atol=1e-12)


def test_assignment_householder_without_trivialization():
    m = orthogonal(_holder((5, 3)), orthogonal_map="householder", use_trivialization=False)
    a = np.random.default_rng(7).standard_normal((5, 3))
    q, r = np.linalg.qr(a)
    m.weight = ember.tensor(a)  # a non-orthogonal value is orthonormalized (positive R diagonal)
    np.testing.assert_allclose(m.weight.detach().numpy(), q * np.sign(np.diag(r)), atol=1e-12)


def test_errors():
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions"):
        orthogonal(nn.Linear(3, 3), name="bias")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", "cayley", "householder"'):
        orthogonal(nn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'nope'"):
        orthogonal(nn.Linear(3, 3), name="nope")
    with pytest.raises(ValueError, match="householder parametrization does not support complex"):
        orthogonal(nn.Linear(3, 3, dtype=ember.complex64), orthogonal_map="householder")
    m = orthogonal(nn.Linear(3, 3), orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="not possible to assign to the matrix exponential or the Cayley"):
        m.weight = ember.eye(3)
    m = orthogonal(nn.Linear(3, 3))
    with pytest.raises(ValueError, match=r"of shape \(3, 3\). Got a tensor of shape \(2, 3\)"):
        m.weight = ember.zeros(2, 3)


def test_float32_training_step_stays_orthogonal():
    m = orthogonal(nn.Linear(4, 6), orthogonal_map="cayley")
    x = ember.randn(8, 4)
    for _ in range(3):
        m.zero_grad()
        (m(x) ** 2).sum().backward()
        with ember.no_grad():
            m.parametrizations.weight.original.sub_(0.05 * m.parametrizations.weight.original.grad)
    assert m.weight.dtype == ember.float32
    assert _gram_error(m.weight) < 1e-5
