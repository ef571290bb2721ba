r"""Probability distributions and their sampling, densities and divergences, following
``torch.distributions``.

A :class:`Distribution` has ``batch_shape`` (independent distributions with different parameters)
and ``event_shape`` (one draw's shape). ``sample``/``rsample`` draw tensors of shape
``sample_shape + batch_shape + event_shape``; ``rsample`` is reparameterised, so gradients flow from
a sample to the parameters (the pathwise or score-function-free estimator)::

    >>> import ember
    >>> from ember.distributions import Normal
    >>> loc = ember.zeros(3, requires_grad=True)
    >>> d = Normal(loc, 1.0)
    >>> d.rsample((2,)).shape
    ember.Size([2, 3])

One module per family (``ember.distributions.normal.Normal``, ...), the constraints in
:mod:`ember.distributions.constraints`, transforms in :mod:`ember.distributions.transforms`, and
:func:`kl_divergence` with :func:`register_kl`.
"""

from . import constraints, transforms
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .chi2 import Chi2
from .constraint_registry import biject_to, transform_to
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .fishersnedecor import FisherSnedecor
from .gamma import Gamma
from .generalized_pareto import GeneralizedPareto
from .geometric import Geometric
from .gumbel import Gumbel
from .half_cauchy import HalfCauchy
from .half_normal import HalfNormal
from .independent import Independent
from .inverse_gamma import InverseGamma
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .laplace import Laplace
from .lkj_cholesky import LKJCholesky
from .log_normal import LogNormal
from .logistic_normal import LogisticNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .pareto import Pareto
from .poisson import Poisson
from .relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from .relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical
from .studentT import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import *  # noqa: F403
from .transforms import __all__ as _transforms_all
from .uniform import Uniform
from .von_mises import VonMises
from .weibull import Weibull
from .wishart import Wishart

__all__ = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ContinuousBernoulli", "Dirichlet",
    "Distribution",
    "ExpRelaxedCategorical", "Exponential", "ExponentialFamily", "FisherSnedecor", "InverseGamma", "Kumaraswamy",
    "Gamma", "Geometric", "Gumbel", "HalfCauchy",
    "HalfNormal", "Independent", "Laplace", "LogNormal", "LogitRelaxedBernoulli", "LowRankMultivariateNormal",
    "MixtureSameFamily", "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "RelaxedBernoulli", "RelaxedOneHotCategorical",
    "StudentT", "TransformedDistribution", "Uniform", "Weibull", "biject_to", "constraints", "kl_divergence",
    "register_kl", "transform_to", "transforms", "VonMises", "Wishart", "LKJCholesky", "GeneralizedPareto",
    "LogisticNormal",
]  # fmt: skip
__all__.extend(_transforms_all)
