"""Argument and value validation of ember.distributions (PyTorch's errors and messages), and the transforms,
constraints and biject_to/transform_to registries against finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.distributions as D
from ember.distributions import constraints
from ember.distributions import transforms as T


def _t(x):
    return ember.tensor(np.asarray(x, dtype=np.float64))


@pytest.mark.parametrize(
    ("make", "param", "constraint"),
    [
        (lambda: D.Normal(_t([0.0]), _t([-1.0])), "scale", "GreaterThan(lower_bound=0.0)"),
        (lambda: D.Normal(_t([math.nan]), _t([1.0])), "loc", "Real()"),
        (lambda: D.Gamma(_t([0.0]), _t([1.0])), "concentration", "GreaterThan(lower_bound=0.0)"),
        (lambda: D.Bernoulli(probs=_t([1.5])), "probs", "Interval(lower_bound=0.0, upper_bound=1.0)"),
        (lambda: D.Categorical(probs=_t([-0.5, 1.5])), "probs", "Simplex()"),
        (lambda: D.Poisson(_t([-1.0])), "rate", "GreaterThanEq(lower_bound=0.0)"),
        (lambda: D.Binomial(_t([2.5]), _t([0.5])), "total_count", "IntegerGreaterThan(lower_bound=0)"),
        (lambda: D.Dirichlet(_t([1.0, -1.0])), "concentration", "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"),
        (lambda: D.MultivariateNormal(_t([0.0, 0.0]), scale_tril=_t([[1.0, 1.0], [0.0, 1.0]])), "scale_tril", "LowerCholesky()"),
    ],  # fmt: skip
)
def test_bad_parameters_raise(make, param, constraint):
    with pytest.raises(ValueError, match=rf"^Expected parameter {param} \(Tensor of shape") as err:
        make()
    assert f"to satisfy the constraint {constraint}, but found invalid values:" in str(err.value)


def test_validate_args_false_and_default():
    D.Normal(_t([0.0]), _t([-1.0]), validate_args=False)  # no error
    try:
        D.Distribution.set_default_validate_args(False)
        d = D.Normal(_t([0.0]), _t([-1.0]))
        assert not d._validate_args
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(_t([0.0]), _t([-1.0]))
    with pytest.raises(ValueError, match="set_default_validate_args expects a bool"):
        D.Distribution.set_default_validate_args("yes")


@pytest.mark.parametrize(
    ("dist", "value", "support"),
    [
        (D.Gamma(_t([1.0]), _t([1.0])), [-1.0], "GreaterThanEq(lower_bound=0.0)"),
        (D.Beta(_t([1.0]), _t([1.0])), [1.5], "Interval(lower_bound=0.0, upper_bound=1.0)"),
        (D.Poisson(_t([1.0])), [1.5], "IntegerGreaterThan(lower_bound=0)"),
        (D.Categorical(_t([0.5, 0.5])), [2.0], "IntegerInterval(lower_bound=0, upper_bound=1)"),
        (D.Dirichlet(_t([1.0, 1.0])), [0.7, 0.7], "Simplex()"),
    ],
)
def test_values_outside_the_support_raise(dist, value, support):
    with pytest.raises(ValueError, match=r"^Expected value argument \(Tensor of shape") as err:
        dist.log_prob(_t(value))
    assert f"to be within the support ({support}) of the distribution" in str(err.value)


def test_value_shape_and_type_errors():
    d = D.MultivariateNormal(_t([0.0, 0.0]), _t(np.eye(2)))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        d.log_prob(_t([0.0, 0.0, 0.0]))
    n = D.Normal(_t([0.0, 1.0]), 1.0)
    with pytest.raises(ValueError, match="Value is not broadcastable with batch_shape\\+event_shape"):
        n.log_prob(_t([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        n.log_prob(0.0)


def test_constructor_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Bernoulli(probs=_t([0.5]), logits=_t([0.0]))
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional."):
        D.Categorical(probs=_t(0.5))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril"):
        D.MultivariateNormal(_t([0.0]))
    with pytest.raises(ValueError, match="Uniform is not defined when low>= high"):
        D.Uniform(_t([1.0]), _t([0.0]))
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented"):
        D.kl_divergence(D.Poisson(_t([1.0])), D.Cauchy(0.0, 1.0))
    with pytest.raises(NotImplementedError, match="cannot be computed using Bregman divergences"):
        D.kl_divergence(D.Poisson(_t([1.0])), D.Normal(0.0, 1.0))
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        D.Multinomial(_t([2.0]), probs=_t([0.5, 0.5]))
    with pytest.raises(TypeError, match="Distribution subclass"):
        D.register_kl(int, D.Normal)


def test_register_kl_and_ambiguity_warning():
    class MyNormal(D.Normal):
        pass

    calls = []

    @D.register_kl(MyNormal, D.Distribution)
    def _kl_mine_any(p, q):
        calls.append(1)
        return ember.zeros(())

    with pytest.warns(RuntimeWarning, match="Ambiguous kl_divergence"):
        D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 2.0))
    D.kl_divergence(MyNormal(0.0, 1.0), D.Cauchy(0.0, 1.0))
    assert len(calls) == 2


def test_sample_n_warns_and_perplexity():
    d = D.Categorical(_t([0.25, 0.25, 0.25, 0.25]))
    with pytest.warns(UserWarning, match="sample_n will be deprecated"):
        assert tuple(d.sample_n(3).shape) == (3,)
    assert abs(d.perplexity().item() - 4.0) < 1e-12


# -- transforms --------------------------------------------------------------------------------------------------


def _numeric_jacobian(fn, x, h=1e-6):
    x = np.asarray(x, dtype=np.float64)
    cols = []
    for j in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[j] += h
        down.flat[j] -= h
        cols.append((fn(_t(up)).numpy().ravel() - fn(_t(down)).numpy().ravel()) / (2 * h))
    return np.stack(cols, -1)


ELEMENTWISE = [
    T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform(), T.SoftplusTransform(),
    T.AffineTransform(1.0, -2.5), T.AffineTransform(_t([0.5, 1.0, -1.0]), _t([2.0, -0.5, 3.0])),
    T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)]), T.ExpTransform().inv.inv,
]  # fmt: skip


@pytest.mark.parametrize("transform", ELEMENTWISE, ids=lambda t: type(t).__name__)
def test_elementwise_transform_log_det_and_inverse(transform):
    x = np.array([-0.7, 0.2, 1.3])
    y = transform(_t(x))
    np.testing.assert_allclose(transform.inv(y).numpy(), x, rtol=1e-9, atol=1e-12)
    jac = np.diag(_numeric_jacobian(transform, x))
    np.testing.assert_allclose(transform.log_abs_det_jacobian(_t(x), y).numpy(), np.log(np.abs(jac)), rtol=1e-6)
    inverse = transform.inv
    np.testing.assert_allclose(inverse.log_abs_det_jacobian(y, _t(x)).numpy(), -np.log(np.abs(jac)), rtol=1e-6)


def test_power_and_abs_transforms():
    p = T.PowerTransform(_t(2.5))
    x = np.array([0.5, 1.0, 3.0])
    y = p(_t(x))
    np.testing.assert_allclose(y.numpy(), x**2.5)
    np.testing.assert_allclose(p.inv(y).numpy(), x, rtol=1e-12)
    np.testing.assert_allclose(p.log_abs_det_jacobian(_t(x), y).numpy(), np.log(2.5 * x**1.5), rtol=1e-12)
    a = T.AbsTransform()
    np.testing.assert_allclose(a(_t([-2.0, 3.0])).numpy(), [2.0, 3.0])


def test_stick_breaking_transform():
    t = T.StickBreakingTransform()
    x = np.array([0.3, -1.2, 0.8])
    y = t(_t(x))
    assert tuple(y.shape) == (4,) and abs(y.sum().item() - 1) < 1e-12
    np.testing.assert_allclose(t.inv(y).numpy(), x, rtol=1e-9)
    jac = _numeric_jacobian(lambda v: t(v)[:-1], x)
    np.testing.assert_allclose(t.log_abs_det_jacobian(_t(x), y).item(), np.log(abs(np.linalg.det(jac))), rtol=1e-6)
    assert tuple(t.forward_shape((2, 3))) == (2, 4) and tuple(t.inverse_shape((2, 4))) == (2, 3)


def test_matrix_transforms():
    x = np.random.default_rng(0).normal(size=(2, 3, 3))
    L = T.LowerCholeskyTransform()(_t(x))
    assert bool(constraints.lower_cholesky.check(L).all())
    np.testing.assert_allclose(T.LowerCholeskyTransform().inv(L).numpy(), np.tril(x), rtol=1e-12)
    P = T.PositiveDefiniteTransform()(_t(x))
    assert bool(constraints.positive_definite.check(P).all())
    c = T.CorrCholeskyTransform()
    v = np.array([0.3, -0.5, 0.9])
    y = c(_t(v))
    assert bool(constraints.corr_cholesky.check(y).all())
    np.testing.assert_allclose(c.inv(y).numpy(), v, rtol=1e-9)
    r = T.ReshapeTransform((6,), (2, 3))
    assert tuple(r(_t(np.arange(12.0).reshape(2, 6))).shape) == (2, 2, 3)
    with pytest.raises(ValueError, match="different numbers of elements"):
        T.ReshapeTransform((5,), (2, 3))


def test_independent_cat_stack_transforms_and_cache():
    base = T.ExpTransform()
    ind = T.IndependentTransform(base, 1)
    x = _t([[0.1, 0.2], [0.3, -0.4]])
    y = ind(x)
    np.testing.assert_allclose(ind.log_abs_det_jacobian(x, y).numpy(), x.sum(-1).numpy())
    cat = T.CatTransform([T.ExpTransform(), T.AffineTransform(0.0, 2.0)], dim=0, lengths=[1, 1])
    np.testing.assert_allclose(cat(x).numpy(), np.stack([np.exp(x.numpy()[0]), 2 * x.numpy()[1]]))
    stack = T.StackTransform([T.ExpTransform(), T.AffineTransform(0.0, 2.0)], dim=0)
    np.testing.assert_allclose(stack(x).numpy(), cat(x).numpy())
    cached = T.ExpTransform(cache_size=1)
    y = cached(x)
    assert cached.inv(y) is x
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        T.ExpTransform(cache_size=2)


@pytest.mark.parametrize(
    "constraint",
    [constraints.real, constraints.positive, constraints.unit_interval, constraints.simplex,
     constraints.greater_than(2.0), constraints.less_than(-1.0), constraints.interval(-3.0, 5.0),
     constraints.independent(constraints.positive, 1), constraints.corr_cholesky],  # fmt: skip
    ids=repr,
)
def test_biject_to_and_transform_to_land_in_the_constraint(constraint):
    x = _t(np.random.default_rng(1).normal(size=(4, 6)))
    for registry in (D.biject_to, D.transform_to):
        t = registry(constraint)
        y = t(x)
        assert bool(constraint.check(y).all())
    b = D.biject_to(constraint)
    y = b(x)
    if constraint is not constraints.corr_cholesky:
        np.testing.assert_allclose(b.inv(y).numpy(), x.numpy(), rtol=1e-6, atol=1e-8)


def test_transform_to_matrix_constraints_and_unknown():
    x = _t(np.random.default_rng(2).normal(size=(3, 3)))
    assert bool(constraints.lower_cholesky.check(D.transform_to(constraints.lower_cholesky)(x)).all())
    assert bool(constraints.positive_definite.check(D.transform_to(constraints.positive_definite)(x)).all())
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky constraints"):
        D.biject_to(constraints.lower_cholesky)


def test_transformed_distribution_log_prob_matches_change_of_variables():
    base = D.Normal(_t([0.0, 1.0]), _t([1.0, 0.5]))
    d = D.TransformedDistribution(base, [T.ExpTransform(), T.AffineTransform(1.0, 3.0)])
    y = _t([2.0, 5.0])
    x = np.log((y.numpy() - 1.0) / 3.0)
    expected = base.log_prob(_t(x)).numpy() - np.log(3.0 * np.exp(x))
    np.testing.assert_allclose(d.log_prob(y).numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(d.cdf(y).numpy(), base.cdf(_t(x)).numpy(), rtol=1e-12)
    assert repr(d.support) == "Real()"  # the last transform's codomain
    positive = D.TransformedDistribution(base, [T.AffineTransform(1.0, 3.0), T.ExpTransform()])
    assert positive.support.check(_t([0.5, -0.5])).tolist() == [True, False]
