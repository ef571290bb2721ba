"""Kullback-Leibler divergences ``KL(p || q)`` between distributions, dispatched on both types.

:func:`register_kl` adds a pairwise implementation; :func:`kl_divergence` picks the most specific
registered pair for ``(type(p), type(q))`` by their method resolution orders (warning when two pairs
are equally specific), as PyTorch does.

Example:
    >>> import ember
    >>> from ember.distributions import Normal, kl_divergence
    >>> round(kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item(), 4)
    0.5
"""

from __future__ import annotations

import math
import warnings

import ember

from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import _EULER, Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal, _batch_lowrank_logdet, _batch_lowrank_mahalanobis
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .pareto import Pareto
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import _sum_rightmost

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY = {}  # (type_p, type_q) -> fn: the registered pairs
_KL_MEMOIZE = {}  # (type_p, type_q) -> fn: dispatch results, cleared on registration


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as the KL divergence of instances of ``type_p`` from ``type_q``.

    Args:
        type_p (type): a subclass of :class:`Distribution`.
        type_q (type): a subclass of :class:`Distribution`.

    Raises:
        TypeError: if either is not a Distribution subclass.

    Example:
        >>> from ember.distributions import Normal, register_kl
        >>> @register_kl(Normal, Normal)
        ... def kl_normal_normal(p, q):
        ...     ...  # doctest: +SKIP
    """
    if not isinstance(type_p, type) or not issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) or not issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()  # a new pair can change what earlier look-ups pick
        return fun

    return decorator


def _dispatch_kl(type_p, type_q):
    """The most specific registered implementation for ``(type_p, type_q)`` (NotImplemented if none).

    Each registered pair that applies is ranked by how far up each argument's MRO its types sit. The pair
    closest for ``p`` (ties broken by ``q``) should also be the closest for ``q`` (ties broken by ``p``);
    when they differ neither is more specific, and the first is used with a warning.
    """
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    ranked = [
        (mro_p.index(super_p), mro_q.index(super_q), super_p, super_q)
        for super_p, super_q in _KL_REGISTRY
        if issubclass(type_p, super_p) and issubclass(type_q, super_q)
    ]
    if not ranked:
        return NotImplemented
    by_p = min(ranked, key=lambda r: (r[0], r[1]))
    by_q = min(ranked, key=lambda r: (r[1], r[0]))
    chosen = _KL_REGISTRY[by_p[2], by_p[3]]
    if chosen is not _KL_REGISTRY[by_q[2], by_q[3]]:
        warnings.warn(
            f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
            f"Please register_kl({by_p[2].__name__}, {by_q[3].__name__})",
            RuntimeWarning,
            stacklevel=3,
        )
    return chosen


def _infinite_like(tensor):
    """A tensor of infinities like ``tensor``."""
    return ember.full_like(tensor, math.inf)


def _x_log_x(tensor):
    return tensor * tensor.log()


def _frobenius_sq(matrices):
    """The squared Frobenius norm ``tr(X X^T)`` of each matrix of a batch."""
    return matrices.pow(2).sum((-2, -1))


def _lowrank_parts(d):
    """The unbroadcasted ``(W, D, L_C)`` of a LowRankMultivariateNormal: factor, diagonal, capacitance Cholesky."""
    return d._unbroadcasted_cov_factor, d._unbroadcasted_cov_diag, d._capacitance_tril


def _woodbury_correction(q):
    r"""``A`` with :math:`\Sigma_q^{-1} = D_q^{-1} - A^T A` (Woodbury): :math:`A = L_C^{-1} W_q^T D_q^{-1}`."""
    W, D, L_C = _lowrank_parts(q)
    return ember.linalg.solve_triangular(L_C, W.mT / D.unsqueeze(-2), upper=False)


def _log_det(d):
    """log det of a (LowRank)MultivariateNormal's covariance."""
    if isinstance(d, LowRankMultivariateNormal):
        return _batch_lowrank_logdet(*_lowrank_parts(d))
    return 2 * d._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _mahalanobis_q(q, diff):
    """``diff^T Sigma_q^{-1} diff`` for a (LowRank)MultivariateNormal ``q``."""
    if isinstance(q, LowRankMultivariateNormal):
        W, D, L_C = _lowrank_parts(q)
        return _batch_lowrank_mahalanobis(W, D, diff, L_C)
    return _batch_mahalanobis(q._unbroadcasted_scale_tril, diff)


def _gaussian_kl(p, q, trace):
    """``KL(p || q)`` of two multivariate normals from ``trace = tr(Sigma_q^-1 Sigma_p)``:
    ``(log det Sigma_q - log det Sigma_p + trace + mahalanobis - k) / 2``."""
    k = p.event_shape[0]
    return 0.5 * (_log_det(q) - _log_det(p) + trace + _mahalanobis_q(q, q.loc - p.loc) - k)


def _solve_lower(L, B):
    """``L^-1 B`` for lower-triangular ``L``, broadcasting their batch dimensions."""
    batch = tuple(ember.broadcast_shapes(L.shape[:-2], B.shape[:-2]))
    L = L.expand(batch + tuple(L.shape[-2:]))
    B = B.expand(batch + tuple(B.shape[-2:]))
    return ember.linalg.solve_triangular(L, B, upper=False)


def kl_divergence(p, q):
    r"""The Kullback-Leibler divergence :math:`KL(p \| q) = \int p(x) \log(p(x) / q(x)) dx`.

    Args:
        p (Distribution): the first distribution.
        q (Distribution): the second, of a compatible batch shape.

    Returns:
        Tensor: divergences of shape ``batch_shape``.

    Raises:
        NotImplementedError: if no implementation is registered for the pair of types.
    """
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type {q.__class__.__name__}"
        )
    return fun(p, q)


# -- same family -----------------------------------------------------------------------------------------


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (ember.nn.functional.softplus(-q.logits) - ember.nn.functional.softplus(-p.logits))
    t1[q.probs == 0] = math.inf
    t1[p.probs == 0] = 0
    t2 = (1 - p.probs) * (ember.nn.functional.softplus(q.logits) - ember.nn.functional.softplus(p.logits))
    t2[q.probs == 1] = math.inf
    t2[p.probs == 1] = 0
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + (sum_params_p).lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + (sum_params_q).lgamma()
    t3 = (p.concentration1 - q.concentration1) * ember.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * ember.digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * ember.digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    # n_p [p log(p/q) + (1-p) log((1-p)/(1-q))] for equal counts; infinite when p has more trials than q
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    inf_idxs = p.total_count > q.total_count
    kl[inf_idxs] = _infinite_like(kl[inf_idxs])
    return kl


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t[(q.probs == 0).expand_as(t)] = math.inf
    t[(p.probs == 0).expand_as(t)] = 0
    return t.sum(-1)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    # Chyzak and Nielsen, "A closed-form formula for the Kullback-Leibler divergence between Cauchy
    # distributions", 2019
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    # log B(q) - log B(p) + sum (a_p - a_q)(digamma(a_p) - digamma(sum a_p))
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = sum_p_concentration.lgamma() - sum_q_concentration.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p_concentration.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    t1 = -rate_ratio.log()
    return t1 + rate_ratio - 1


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log-normaliser between the natural parameters (same family only)."""
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot be computed using "
            "Bregman divergences"
        )
    p_nparams = [np_.detach().requires_grad_() for np_ in p._natural_params]
    q_nparams = q._natural_params
    with ember.enable_grad():
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = ember.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        term = (qnp - pnp) * g
        result -= _sum_rightmost(term, len(q.event_shape))
    return result


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * ember.log(p.rate / q.rate)
    t2 = ember.lgamma(q.concentration) - ember.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * ember.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _EULER
    t3 = ember.exp(ct2 + (1 + ct1).lgamma() - ct3)
    return t1 + t2 + t3 - (1 + _EULER)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - ember.log1p(-q.probs) / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    # From http://www.mast.queensu.ca/~communications/Papers/gil-msc11.pdf
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * ember.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


def _check_event_shapes(p, q, name_p, name_q):
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError(
            f"KL-divergence between two {name_p} and {name_q} with different event shapes cannot be computed"
        )


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    _check_event_shapes(p, q, "Low Rank Multivariate Normals", "Low Rank Multivariate Normals")
    # Sigma_p = W_p W_p^T + D_p and Sigma_q^-1 = D_q^-1 - A^T A: four traces, none forming a k x k matrix
    W_p, D_p, _ = _lowrank_parts(p)
    D_q = q._unbroadcasted_cov_diag
    A = _woodbury_correction(q)
    trace = (
        (D_p / D_q).sum(-1)
        + _frobenius_sq(W_p / D_q.sqrt().unsqueeze(-1))
        - _frobenius_sq(A * D_p.sqrt().unsqueeze(-2))
        - _frobenius_sq(A @ W_p)
    )
    return _gaussian_kl(p, q, trace)


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    _check_event_shapes(p, q, "(Low Rank) Multivariate Normals", "")
    # Sigma_p = L_p L_p^T and Sigma_q^-1 = D_q^-1 - A^T A
    L_p = p._unbroadcasted_scale_tril
    D_q = q._unbroadcasted_cov_diag
    A = _woodbury_correction(q)
    trace = _frobenius_sq(L_p / D_q.sqrt().unsqueeze(-1)) - _frobenius_sq(A @ L_p)
    return _gaussian_kl(p, q, trace)


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    _check_event_shapes(p, q, "(Low Rank) Multivariate Normals", "")
    # tr(Sigma_q^-1 Sigma_p) = ||L_q^-1 W_p||^2 + ||L_q^-1 D_p^(1/2)||^2
    W_p, D_p, _ = _lowrank_parts(p)
    L_q = q._unbroadcasted_scale_tril
    trace = _frobenius_sq(_solve_lower(L_q, W_p)) + _frobenius_sq(_solve_lower(L_q, ember.diag_embed(D_p.sqrt())))
    return _gaussian_kl(p, q, trace)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    _check_event_shapes(p, q, "Multivariate Normals", "Multivariate Normals")
    # tr(Sigma_q^-1 Sigma_p) = ||L_q^-1 L_p||^2
    trace = _frobenius_sq(_solve_lower(q._unbroadcasted_scale_tril, p._unbroadcasted_scale_tril))
    return _gaussian_kl(p, q, trace)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    # From http://www.mast.queensu.ca/~communications/Papers/gil-msc11.pdf
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * scale_ratio.log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    result[p.support.lower_bound < q.support.lower_bound] = math.inf
    return result


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions with different transforms is not implemented")
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise NotImplementedError("KL between TransformedDistributions with different event shapes is not implemented")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    result[(q.low > p.low) | (q.high < p.high)] = math.inf
    return result


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims is not implemented")
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


# -- different families: closed forms -------------------------------------------------------------------------


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma())
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    E_beta = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (E_beta * (1 - E_beta) / (p.concentration1 + p.concentration0 + 1) + E_beta.pow(2)) * 0.5
    t4 = q.loc * E_beta
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    result[(q.low > p.support.lower_bound) | (q.high < p.support.upper_bound)] = math.inf
    return result


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * ember.log(ratio)
    return t1 + ratio + q.concentration.lgamma() + q.concentration * _EULER - (1 + _EULER)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = ember.exp(loc_scale_ratio) * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * ember.log(rate_sqr * var_normal * 2 * math.pi)
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma() - p.concentration
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = ember.exp(loc_scale_ratio) * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration) - loc_scale_ratio
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * ember.log(beta_sqr * var_normal * 2 * math.pi) - p.concentration - p.concentration.lgamma()
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (p.concentration - 1) * p.concentration.digamma() + (t2 - t3 + t4) / var_normal


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * ember.log(2 * scale_sqr_var_ratio / math.pi)
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = ember.exp(-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio)
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = ember.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * ember.exp(-0.5 * loc_diff_scale_ratio.pow(2))
    t3 = loc_diff * ember.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    common_term = p.high - p.low
    t1 = ember.log(common_term)
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common_term) / common_term
    t4 = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    result = t3 + t4 - t1 - t2
    result[(p.high > q.support.upper_bound) | (p.low < q.support.lower_bound)] = math.inf
    return result


@register_kl(Uniform, Exponential)
def _kl_uniform_exponetial(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    result[p.low < q.support.lower_bound] = math.inf
    return result


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t4 = q.rate * (p.high + p.low) / 2
    result = -t1 + t2 + t3 + t4
    result[p.low < q.support.lower_bound] = math.inf
    return result


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * (ember.exp(-high_loc_diff) - ember.exp(-low_loc_diff))
    return t1 - t2


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = (common_term).pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


# -- continuous Bernoulli and Pareto against other families ----------------------------------------------------
# KL(p || q) = -H(p) - E_p[log q(x)]; for a continuous Bernoulli q, log q(x) = x logit(lambda) + log(1 - lambda)
# + log C(lambda) is linear in x, so only p's mean enters.


def _expected_log_cont_bern(q, mean_p):
    return mean_p * q.logits + ember.log1p(-q.probs) + q._cont_bern_log_norm()


def _expected_log_normal(q, mean_p, var_p):
    return -0.5 * ember.log(2 * math.pi * q.scale.pow(2)) - (var_p + (mean_p - q.loc).pow(2)) / (2 * q.scale.pow(2))


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    log_p_terms = ember.log1p(-p.probs) + p._cont_bern_log_norm()
    return p.mean * (p.logits - q.logits) + log_p_terms - ember.log1p(-q.probs) - q._cont_bern_log_norm()


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - _expected_log_cont_bern(q, p.mean)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - _expected_log_cont_bern(q, p.mean)
    return ember.where((p.low < 0) | (p.high > 1), math.inf, result)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - ember.log(q.rate) + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    return -p.entropy() - _expected_log_normal(q, p.mean, p.variance)


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + ember.log(q.high - q.low)
    return ember.where((q.low > 0) | (q.high < 1), math.inf, result)


def _pareto_log_moment(p):
    """E[log x] of a Pareto: log scale + 1 / alpha."""
    return p.scale.log() + p.alpha.reciprocal()


def _pareto_mean(p):
    """E[x] of a Pareto (inf for alpha <= 1)."""
    return ember.where(p.alpha > 1, p.alpha * p.scale / (p.alpha - 1), math.inf)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * _pareto_mean(p)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    expected_log_q = (
        q.concentration * q.rate.log()
        + (q.concentration - 1) * _pareto_log_moment(p)
        - q.rate * _pareto_mean(p)
        - q.concentration.lgamma()
    )
    return -p.entropy() - expected_log_q


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    a = p.alpha
    var = ember.where(a > 2, p.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2)), math.inf)
    return -p.entropy() - _expected_log_normal(q, _pareto_mean(p), var)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    expected_log_x = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    result = -width.log() - q.alpha.log() - q.alpha * q.scale.log() + (q.alpha + 1) * expected_log_x
    return ember.where(p.low < q.support.lower_bound, math.inf, result)


# -- different families whose divergence is infinite (q has no mass where p has) -----------------------------


def _register_infinite(type_p, type_q, like):
    @register_kl(type_p, type_q)
    def _infinite(p, q):
        return _infinite_like(like(p))

    _infinite.__name__ = f"_kl_{type_p.__name__.lower()}_{type_q.__name__.lower()}_infinite"
    return _infinite


for _p, _q, _like in [
    (ContinuousBernoulli, Pareto, lambda p: p.probs),
    (Exponential, ContinuousBernoulli, lambda p: p.rate),
    (Gamma, ContinuousBernoulli, lambda p: p.concentration),
    (Gumbel, ContinuousBernoulli, lambda p: p.loc),
    (Laplace, ContinuousBernoulli, lambda p: p.loc),
    (Normal, ContinuousBernoulli, lambda p: p.loc),
    (Pareto, ContinuousBernoulli, lambda p: p.scale),
    (Pareto, Beta, lambda p: p.scale),
    (Pareto, Uniform, lambda p: p.scale),
    (Beta, Pareto, lambda p: p.concentration1),
    (Exponential, Pareto, lambda p: p.rate),
    (Gamma, Pareto, lambda p: p.concentration),
    (Normal, Pareto, lambda p: p.loc),
    (Laplace, Pareto, lambda p: p.loc),
    (Gumbel, Pareto, lambda p: p.loc),
    (Cauchy, Pareto, lambda p: p.loc),
    (Poisson, Bernoulli, lambda p: p.rate),
    (Poisson, Binomial, lambda p: p.rate),
    (Normal, Exponential, lambda p: p.loc),
    (Normal, Gamma, lambda p: p.loc),
    (Normal, Beta, lambda p: p.loc),
    (Normal, Uniform, lambda p: p.loc),
    (Laplace, Exponential, lambda p: p.loc),
    (Laplace, Gamma, lambda p: p.loc),
    (Laplace, Beta, lambda p: p.loc),
    (Laplace, Uniform, lambda p: p.loc),
    (Gumbel, Exponential, lambda p: p.loc),
    (Gumbel, Gamma, lambda p: p.loc),
    (Gumbel, Beta, lambda p: p.loc),
    (Gumbel, Uniform, lambda p: p.loc),
    (Exponential, Beta, lambda p: p.rate),
    (Exponential, Uniform, lambda p: p.rate),
    (Gamma, Beta, lambda p: p.concentration),
    (Gamma, Uniform, lambda p: p.concentration),
]:
    _register_infinite(_p, _q, _like)
