"""The generalized Pareto distribution."""

from __future__ import annotations

import math
import numbers

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    r"""The generalized Pareto distribution of location :math:`\mu`, scale :math:`\sigma` and shape
    :math:`\xi`: with :math:`z = (x - \mu)/\sigma`, :math:`p(x) = (1 + \xi z)^{-1/\xi - 1} / \sigma`
    (:math:`e^{-z}/\sigma` at :math:`\xi = 0`), on :math:`x \ge \mu`, and also :math:`x \le \mu - \sigma/\xi`
    when :math:`\xi < 0`.

    Args:
        loc (float or Tensor): :math:`\mu`.
        scale (float or Tensor): :math:`\sigma > 0`.
        concentration (float or Tensor): :math:`\xi`; the three broadcast to the batch shape.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if all(isinstance(v, numbers.Number) for v in (loc, scale, concentration)):
            batch_shape = ember.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = ember.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _xi_nonzero(self):
        """xi with zeros replaced by 1 (for the branches that divide by it; where() picks the xi = 0 form)."""
        xi = self.concentration
        return ember.where(xi == 0, ember.ones_like(xi), xi)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = ember.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        xi = self.concentration
        safe = self._xi_nonzero()
        tail = ember.where(xi == 0, -z, -(1 + 1 / safe) * ember.log1p(safe * z))
        inside = (z >= 0) & ((xi >= 0) | (z <= -1 / safe))
        return ember.where(inside, tail - ember.log(self.scale), -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = ((value - self.loc) / self.scale).clamp(min=0)
        xi = self.concentration
        safe = self._xi_nonzero()
        log_survival = ember.where(xi == 0, -z, -ember.log1p(safe * z) / safe)
        # beyond the upper end (xi < 0), 1 + xi z <= 0: the CDF is 1
        return ember.where((xi < 0) & (z >= -1 / safe), ember.ones_like(z), -ember.expm1(log_survival))

    def icdf(self, value):
        xi = self.concentration
        safe = self._xi_nonzero()
        log_survival = ember.log1p(-value)
        z = ember.where(xi == 0, -log_survival, ember.expm1(-safe * log_survival) / safe)
        return self.loc + self.scale * z

    @property
    def mean(self):
        xi = self.concentration
        return ember.where(xi < 1, self.loc + self.scale / (1 - xi), math.nan)  # nan where infinite, as PyTorch

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        xi = self.concentration
        return ember.where(xi < 0.5, self.scale.pow(2) / ((1 - xi).pow(2) * (1 - 2 * xi)), math.nan)

    def entropy(self):
        return ember.log(self.scale) + self.concentration + 1

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = ember.where(self.concentration < 0, self.loc - self.scale / self.concentration, math.inf)
        return constraints.interval(self.loc, upper)
