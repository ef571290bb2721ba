"""The continuous Bernoulli distribution."""

from __future__ import annotations

import math
import numbers

import ember
import ember.nn.functional as F

from . import constraints
from .exp_family import ExponentialFamily
from .utils import _expand_probs_or_logits, broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    r"""The continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem and Cunningham, "The continuous Bernoulli:
    fixing a pervasive error in variational autoencoders", NeurIPS 2019):
    :math:`p(x) = C(\lambda) \lambda^x (1 - \lambda)^{1 - x}` with
    :math:`C(\lambda) = 2\,\mathrm{atanh}(1 - 2\lambda) / (1 - 2\lambda)` (2 at :math:`\lambda = 1/2`).

    In effect a truncated exponential on [0, 1] with rate ``logits``. Within ``lims`` of 1/2 the formulas that
    divide by ``1 - 2 lambda`` are replaced by their Taylor series.

    Args:
        probs (float or Tensor, optional): :math:`\lambda` in [0, 1].
        logits (float or Tensor, optional): :math:`\log(\lambda / (1 - \lambda))`.
        lims (tuple[float, float]): the interval around 1/2 where the Taylor series are used.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).

    Raises:
        ValueError: if both or neither of ``probs`` and ``logits`` are given.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
            # checked here, before the clamp below would move invalid values into the unit interval
            validate = self._validate_args if validate_args is None else validate_args
            if validate and not bool(constraints.unit_interval.check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = ember.Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        batch_shape = ember.Size(batch_shape)
        new._lims = self._lims
        _expand_probs_or_logits(self, new, batch_shape)
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs >= self._lims[1])

    def _cut_probs(self):
        # probs where the closed forms are stable, a harmless stand-in elsewhere (so that neither branch of
        # the where() below produces nan, whose gradient would leak through it)
        return ember.where(self._outside_unstable_region(), self.probs, ember.full_like(self.probs, self._lims[0]))

    def _cont_bern_log_norm(self):
        """log C(lambda)."""
        cut = self._cut_probs()
        cut_below_half = ember.where(cut <= 0.5, cut, ember.zeros_like(cut))
        cut_above_half = ember.where(cut >= 0.5, cut, ember.ones_like(cut))
        # log |2 atanh(1 - 2 lambda)| - log |1 - 2 lambda|, with each log1p taken where it is accurate
        stable = ember.log(ember.abs(ember.log1p(-cut) - ember.log(cut))) - ember.where(
            cut <= 0.5, ember.log1p(-2.0 * cut_below_half), ember.log(2.0 * cut_above_half - 1.0)
        )
        x = self.probs - 0.5
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x * x) * x * x
        return ember.where(self._outside_unstable_region(), stable, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        stable = cut / (2.0 * cut - 1.0) + 1.0 / (ember.log1p(-cut) - ember.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x * x) * x
        return ember.where(self._outside_unstable_region(), stable, taylor)

    @property
    def stddev(self):
        return ember.sqrt(self.variance)

    @property
    def variance(self):
        cut = self._cut_probs()
        stable = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / (ember.log1p(-cut) - ember.log(cut)).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ember.where(self._outside_unstable_region(), stable, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return self._param.size()

    def sample(self, sample_shape=()):
        with ember.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = ember.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        stable = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = ember.where(self._outside_unstable_region(), stable, value)
        return ember.where(
            value <= 0.0, ember.zeros_like(value), ember.where(value >= 1.0, ember.ones_like(value), unbounded)
        )

    def icdf(self, value):
        cut = self._cut_probs()
        stable = (ember.log1p(-cut + value * (2.0 * cut - 1.0)) - ember.log1p(-cut)) / (
            ember.log(cut) - ember.log1p(-cut)
        )
        return ember.where(self._outside_unstable_region(), stable, value)

    def entropy(self):
        # -E[log p(x)] = -(E[x] logit(lambda) + log(1 - lambda) + log C(lambda))
        log_probs0 = ember.log1p(-self.probs)
        log_probs1 = ember.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """log((e^x - 1) / x), the log-normaliser in the natural parameter (a Taylor series near 0)."""
        near_zero = (x > -0.01) & (x < 0.01)
        safe = ember.where(near_zero, ember.ones_like(x), x)
        y = ember.abs(safe)
        stable = y + ember.log(-ember.expm1(-y)) - ember.log(y) + ember.clamp(safe, max=0.0)
        taylor = 0.5 * x + x * x / 24.0 - x.pow(4) / 2880.0
        return ember.where(near_zero, taylor, stable)
