"""Sampling of ember.distributions: sample moments against the analytic ones (a fixed seed, within a few
standard errors), reparameterised gradients against finite differences with common random numbers and
against the analytic implicit gamma gradient, and KL divergences against Monte Carlo estimates."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import ember
import ember.distributions as D

N = 40_000


def _t(x):
    return ember.tensor(np.asarray(x, dtype=np.float64))


def _moment_cases():
    return {
        "Normal": lambda: D.Normal(_t([0.5, -2.0]), _t([1.5, 0.3])),
        "Laplace": lambda: D.Laplace(_t([0.5, -2.0]), _t([1.5, 0.3])),
        "Exponential": lambda: D.Exponential(_t([0.5, 3.0])),
        "Gamma": lambda: D.Gamma(_t([0.3, 4.0]), _t([2.0, 0.5])),
        "Beta": lambda: D.Beta(_t([0.5, 3.0]), _t([2.0, 0.7])),
        "Chi2": lambda: D.Chi2(_t([1.0, 5.0])),
        "Uniform": lambda: D.Uniform(_t([0.0, -3.0]), _t([1.0, 5.0])),
        "Poisson": lambda: D.Poisson(_t([0.3, 40.0])),
        "Binomial": lambda: D.Binomial(_t([10.0, 200.0]), _t([0.3, 0.9])),
        "Bernoulli": lambda: D.Bernoulli(_t([0.2, 0.7])),
        "ContinuousBernoulli": lambda: D.ContinuousBernoulli(_t([0.2, 0.5, 0.9])),
        "Kumaraswamy": lambda: D.Kumaraswamy(_t([0.5, 2.0]), _t([3.0, 1.5])),
        "InverseGamma": lambda: D.InverseGamma(_t([5.0, 7.0]), _t([1.0, 2.0])),
        "FisherSnedecor": lambda: D.FisherSnedecor(_t([6.0, 10.0]), _t([12.0, 20.0])),
        "Geometric": lambda: D.Geometric(_t([0.2, 0.7])),
        "NegativeBinomial": lambda: D.NegativeBinomial(_t([3.0, 0.5]), _t([0.4, 0.2])),
        "LogNormal": lambda: D.LogNormal(_t([0.0, 0.5]), _t([0.5, 0.2])),
        "Gumbel": lambda: D.Gumbel(_t([0.0, 2.0]), _t([1.0, 0.5])),
        "HalfNormal": lambda: D.HalfNormal(_t([1.0, 2.0])),
        "StudentT": lambda: D.StudentT(_t([5.0, 10.0]), _t([1.0, -1.0]), _t([1.0, 2.0])),
        "Weibull": lambda: D.Weibull(_t([1.0, 2.0]), _t([1.5, 3.0])),
        "Pareto": lambda: D.Pareto(_t([1.0, 2.0]), _t([5.0, 6.0])),
        "Dirichlet": lambda: D.Dirichlet(_t([[0.5, 1.0, 2.0], [3.0, 3.0, 0.2]])),
        "Categorical": lambda: D.OneHotCategorical(probs=_t([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])),
        "Multinomial": lambda: D.Multinomial(7, probs=_t([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])),
        "MultivariateNormal": lambda: D.MultivariateNormal(_t([1.0, -1.0]), _t([[2.0, 0.5], [0.5, 1.0]])),
        "Wishart": lambda: D.Wishart(_t([4.5, 7.0]), covariance_matrix=_t([[[2.0, 0.3], [0.3, 1.0]], [[1.0, 0.0], [0.0, 3.0]]])),
        "LowRankMultivariateNormal": lambda: D.LowRankMultivariateNormal(_t([1.0, -1.0, 0.0]), _t([[1.0], [0.5], [-1.0]]), _t([0.5, 1.0, 2.0])),
        "MixtureSameFamily": lambda: D.MixtureSameFamily(D.Categorical(_t([0.3, 0.7])), D.Normal(_t([-2.0, 3.0]), _t([1.0, 0.5]))),
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(_moment_cases()))
def test_sample_moments(name):
    ember.manual_seed(0)
    dist = _moment_cases()[name]()
    x = dist.sample((N,)).double().numpy()
    assert x.shape == (N, *dist.batch_shape, *dist.event_shape)
    mean, var = dist.mean.numpy(), dist.variance.numpy()
    # the mean within 5 standard errors; the variance within 5 standard errors of the sample variance
    # (its variance is (m4 - var^2) / N, estimated from the sample's own fourth moment)
    se = np.sqrt(var / N)
    np.testing.assert_array_less(np.abs(x.mean(0) - mean), 5 * se + 1e-12)
    centred = x - x.mean(0)
    m4 = (centred**4).mean(0)
    se_var = np.sqrt(np.maximum(m4 - var**2, 0) / N)
    np.testing.assert_array_less(np.abs(centred.var(0) - var), 5 * se_var + 1e-12)
    assert bool(dist.support.check(_t(x)).all())


@pytest.mark.parametrize(("dim", "eta"), [(2, 0.5), (3, 1.0), (5, 2.5)])
def test_lkj_cholesky_marginals(dim, eta):
    """Each correlation r of LKJ(eta) has (r + 1)/2 ~ Beta(a, a), a = eta - 1 + dim/2: mean 0, variance 1/(2a+1)."""
    ember.manual_seed(0)
    L = D.LKJCholesky(dim, _t(eta)).sample((N,)).numpy()
    R = L @ np.swapaxes(L, -1, -2)
    np.testing.assert_allclose(np.diagonal(R, axis1=-2, axis2=-1), 1.0, atol=1e-12)
    a = eta - 1 + dim / 2
    var = 1 / (2 * a + 1)
    r = R[:, -1, 0]
    assert abs(r.mean()) < 5 * np.sqrt(var / N)
    se_var = np.sqrt((np.mean(r**4) - var**2) / N)
    assert abs(r.var() - var) < 5 * se_var


# -- reparameterised gradients ---------------------------------------------------------------------------------


def _crn_cases():
    """Families whose rsample is a smooth function of the parameters for fixed noise: (make(params), params)."""
    return {
        "Normal": (lambda p: D.Normal(p[0], p[1]), [[0.5, -1.0], [1.5, 0.3]]),
        "Laplace": (lambda p: D.Laplace(p[0], p[1]), [[0.5, -1.0], [1.5, 0.3]]),
        "Cauchy": (lambda p: D.Cauchy(p[0], p[1]), [[0.5, -1.0], [1.5, 0.3]]),
        "Exponential": (lambda p: D.Exponential(p[0]), [[0.5, 3.0]]),
        "Uniform": (lambda p: D.Uniform(p[0], p[1]), [[0.0, -1.0], [1.0, 2.0]]),
        "LogNormal": (lambda p: D.LogNormal(p[0], p[1]), [[0.1, -0.5], [0.5, 0.3]]),
        "HalfNormal": (lambda p: D.HalfNormal(p[0]), [[0.5, 2.0]]),
        "ContinuousBernoulli": (lambda p: D.ContinuousBernoulli(logits=p[0]), [[0.3, -2.0]]),
        "Kumaraswamy": (lambda p: D.Kumaraswamy(p[0], p[1]), [[0.5, 2.0], [3.0, 1.5]]),
        "Weibull": (lambda p: D.Weibull(p[0], p[1]), [[1.0, 2.0], [1.5, 3.0]]),
        "RelaxedBernoulli": (lambda p: D.RelaxedBernoulli(_t(0.5), logits=p[0]), [[0.3, -1.0]]),
        "RelaxedOneHotCategorical": (lambda p: D.RelaxedOneHotCategorical(_t(0.5), logits=p[0]), [[0.3, -1.0, 2.0]]),
        "MultivariateNormal": (lambda p: D.MultivariateNormal(p[0], scale_tril=p[1].tril()), [[1.0, -1.0], [[1.0, 0.0], [0.5, 2.0]]]),
        "LowRankMultivariateNormal": (lambda p: D.LowRankMultivariateNormal(p[0], p[1], p[2]), [[1.0, 0.0], [[1.0], [0.5]], [0.5, 1.0]]),
    }  # fmt: skip


def _objective(make, params, seed):
    ember.manual_seed(seed)
    x = make(params).rsample((50,))
    weights = ember.linspace(0.5, 1.5, x.numel(), dtype=ember.float64).reshape(x.shape)
    return (x * weights).sum()


@pytest.mark.parametrize("name", sorted(_crn_cases()))
def test_rsample_gradient_finite_differences(name):
    make, raw = _crn_cases()[name]
    params = [_t(p).requires_grad_() for p in raw]
    _objective(make, params, 3).backward()
    h = 1e-6
    for i, p in enumerate(params):
        flat = p.detach().numpy().ravel()
        numeric = np.empty_like(flat)
        for j in range(flat.size):
            up, down = flat.copy(), flat.copy()
            up[j] += h
            down[j] -= h
            f = [
                _objective(make, [_t(v.reshape(p.shape)) if k == i else q.detach() for k, q in enumerate(params)], 3).item()
                for v in (up, down)
            ]
            numeric[j] = (f[0] - f[1]) / (2 * h)
        np.testing.assert_allclose(p.grad.numpy().ravel(), numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 1.0, 2.5, 10.0, 150.0])
def test_standard_gamma_grad_matches_quantile_derivative(alpha):
    """d x / d alpha at fixed u = F(x; alpha) equals the derivative of the quantile function in alpha."""
    u = np.array([0.01, 0.2, 0.5, 0.8, 0.99])
    x = sp.gammaincinv(alpha, u)
    h = 1e-6 * alpha
    expected = (sp.gammaincinv(alpha + h, u) - sp.gammaincinv(alpha - h, u)) / (2 * h)
    actual = ember._standard_gamma_grad(_t(np.full(5, alpha)), _t(x)).numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-5)


def test_gamma_rsample_gradient_through_autograd():
    alpha = _t([0.5, 2.0, 7.0]).requires_grad_()
    ember.manual_seed(1)
    x = ember._standard_gamma(alpha.expand(4, 3))
    x.sum().backward()
    expected = ember._standard_gamma_grad(alpha.detach().expand(4, 3), x.detach()).sum(0)
    np.testing.assert_allclose(alpha.grad.numpy(), expected.numpy(), rtol=1e-12)
    assert bool((alpha.grad > 0).all())  # samples grow with the concentration


@pytest.mark.parametrize(
    ("make", "mean_grad"),
    [
        # d/d(a, b) E[Gamma(a, b)] = (1/b, -a/b^2)
        (lambda a, b: D.Gamma(a, b), lambda a, b: (1 / b, -a / b**2)),
        # d/d(a, b) of a/(a+b) = (b/(a+b)^2, -a/(a+b)^2)
        (lambda a, b: D.Beta(a, b), lambda a, b: (b / (a + b) ** 2, -a / (a + b) ** 2)),
    ],
    ids=["Gamma", "Beta"],
)
def test_implicit_rsample_gradient_is_unbiased(make, mean_grad):
    """The gradient of the sample mean estimates the gradient of the mean (within 5 standard errors)."""
    a, b = 1.7, 2.3
    pa, pb = _t(a).requires_grad_(), _t(b).requires_grad_()
    ember.manual_seed(2)
    n = 20_000
    x = make(pa, pb).rsample((n,))
    ga = ember.autograd.grad(x.sum(), [pa, pb], retain_graph=True)
    per_sample = [ember.autograd.grad(x[i], [pa, pb], retain_graph=True) for i in range(200)]
    spread = np.std([[g.item() for g in gs] for gs in per_sample], axis=0)
    expected = mean_grad(a, b)
    for got, want, s in zip(ga, expected, spread):
        assert abs(got.item() / n - want) < 5 * s / np.sqrt(n) + 1e-9


def test_dirichlet_rsample_gradient_is_unbiased():
    conc = _t([0.8, 1.5, 3.0]).requires_grad_()
    ember.manual_seed(4)
    x = D.Dirichlet(conc).rsample((20_000,))
    (g,) = ember.autograd.grad(x[:, 0].mean(), [conc])
    c = conc.detach().numpy()
    s = c.sum()
    expected = np.array([(s - c[0]) / s**2, -c[0] / s**2, -c[0] / s**2])
    np.testing.assert_allclose(g.numpy(), expected, atol=0.01)


# -- KL divergence against Monte Carlo -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pair",
    [
        (lambda: D.Normal(_t([0.0, 1.0]), _t([1.0, 0.5])), lambda: D.Normal(_t([0.5, 0.0]), _t([2.0, 1.0]))),
        (lambda: D.Gamma(_t([2.0, 0.7]), _t([1.0, 2.0])), lambda: D.Gamma(_t([1.5, 1.0]), _t([0.5, 1.5]))),
        (lambda: D.Beta(_t([2.0, 0.7]), _t([1.0, 2.0])), lambda: D.Normal(_t([0.5, 0.2]), _t([0.4, 0.3]))),
        (lambda: D.Laplace(_t([0.0, 1.0]), _t([1.0, 0.5])), lambda: D.Normal(_t([0.5, 0.0]), _t([2.0, 1.0]))),
        (lambda: D.Exponential(_t([1.0, 0.5])), lambda: D.Gumbel(_t([0.5, 1.0]), _t([2.0, 1.5]))),
        (lambda: D.Dirichlet(_t([[1.0, 2.0, 0.5]])), lambda: D.Dirichlet(_t([[2.0, 2.0, 2.0]]))),
        (lambda: D.Poisson(_t([3.0])), lambda: D.Poisson(_t([5.0]))),
        (
            lambda: D.MultivariateNormal(_t([0.0, 1.0]), _t([[1.0, 0.3], [0.3, 2.0]])),
            lambda: D.LowRankMultivariateNormal(_t([1.0, 0.0]), _t([[1.0], [0.5]]), _t([0.5, 1.0])),
        ),
        (
            lambda: D.Wishart(_t([4.5, 6.0]), covariance_matrix=_t([[[2.0, 0.3], [0.3, 1.0]], [[1.0, 0.0], [0.0, 3.0]]])),
            lambda: D.Wishart(_t([5.5, 4.0]), covariance_matrix=_t([[[1.0, -0.2], [-0.2, 2.0]], [[2.0, 0.5], [0.5, 1.0]]])),
        ),
        (
            lambda: D.ContinuousBernoulli(_t([0.2, 0.5, 0.9])),
            lambda: D.ContinuousBernoulli(_t([0.6, 0.3, 0.4])),
        ),
    ],
    ids=["Normal-Normal", "Gamma-Gamma", "Beta-Normal", "Laplace-Normal", "Exponential-Gumbel", "Dirichlet-Dirichlet",
         "Poisson-Poisson", "MVN-LowRankMVN", "Wishart-Wishart", "ContinuousBernoulli"],  # fmt: skip
)
def test_kl_against_monte_carlo(pair):
    p, q = pair[0](), pair[1]()
    ember.manual_seed(5)
    x = p.sample((100_000,))
    ratio = (p.log_prob(x) - q.log_prob(x)).numpy()
    estimate, se = ratio.mean(0), ratio.std(0) / np.sqrt(len(ratio))
    np.testing.assert_array_less(np.abs(D.kl_divergence(p, q).detach().numpy() - estimate), 5 * se + 1e-9)


def test_kl_uniform_and_continuous_bernoulli_at_the_support_ends():
    """U(0.3, 1) against a continuous Bernoulli, and the reverse with U(0, 1.5): finite (PyTorch 2.13 returns inf
    when the intervals only touch the support's ends); checked against numerical integration."""
    from scipy.integrate import quad

    cb = D.ContinuousBernoulli(_t([0.3]))
    u = D.Uniform(_t([0.3]), _t([1.0]))

    def cb_log_density(x):
        return cb.log_prob(_t([x])).item()

    expected = quad(lambda x: (1 / 0.7) * (np.log(1 / 0.7) - cb_log_density(x)), 0.3, 1.0)[0]
    np.testing.assert_allclose(D.kl_divergence(u, cb).item(), expected, rtol=1e-7)
    wide = D.Uniform(_t([0.0]), _t([1.5]))
    expected = quad(lambda x: np.exp(cb_log_density(x)) * (cb_log_density(x) - np.log(1 / 1.5)), 0.0, 1.0)[0]
    np.testing.assert_allclose(D.kl_divergence(cb, wide).item(), expected, rtol=1e-7)


@pytest.mark.cuda
def test_samplers_on_cuda():
    ember.manual_seed(0)
    for dist, n in (
        (D.Gamma(_t([0.5, 3.0]).cuda(), _t([1.0, 2.0]).cuda()), 50_000),
        (D.Poisson(_t([0.5, 30.0]).cuda()), 50_000),
        (D.Binomial(_t([10.0, 50.0]).cuda(), _t([0.3, 0.8]).cuda()), 50_000),
        (D.Normal(_t([0.0, 3.0]).cuda(), _t([1.0, 2.0]).cuda()), 50_000),
        (D.Categorical(probs=_t([0.2, 0.3, 0.5]).cuda()), 50_000),
        (D.Dirichlet(_t([0.5, 2.0, 1.0]).cuda()), 50_000),
    ):
        x = dist.sample((n,))
        assert x.device.type == "cuda"
        x = x.cpu().double().numpy()
        mean = dist.mean.cpu().numpy() if not isinstance(dist, D.Categorical) else (dist.probs.cpu().numpy() * [0, 1, 2]).sum()
        var = dist.variance.cpu().numpy() if not isinstance(dist, D.Categorical) else (dist.probs.cpu().numpy() * np.array([0, 1, 2]) ** 2).sum() - mean**2
        np.testing.assert_array_less(np.abs(x.mean(0) - mean), 5 * np.sqrt(var / n) + 1e-12)
    alpha = _t([0.5, 2.0]).cuda().requires_grad_()
    D.Gamma(alpha, 1.0).rsample((100,)).sum().backward()
    assert alpha.grad.device.type == "cuda" and bool((alpha.grad > 0).all())
