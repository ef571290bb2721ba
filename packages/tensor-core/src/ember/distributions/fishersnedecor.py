"""The Fisher-Snedecor (F) distribution."""

from __future__ import annotations

import math
import numbers

import ember

from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import broadcast_all

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    r"""The F distribution of ``df1`` and ``df2`` degrees of freedom: the ratio ``(X1 / df1) / (X2 / df2)`` of
    two independent chi-squared variables; drawn as a ratio of gammas.

    Args:
        df1 (float or Tensor): numerator degrees of freedom, > 0.
        df2 (float or Tensor): denominator degrees of freedom, > 0; broadcasts with ``df1``.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        # Gamma(df / 2, df / 2) is Chi2(df) / df
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1 * 0.5)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2 * 0.5)
        if isinstance(df1, numbers.Number) and isinstance(df2, numbers.Number):
            batch_shape = ember.Size()
        else:
            batch_shape = self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = ember.Size(batch_shape)
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        super(FisherSnedecor, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return ember.where(self.df2 > 2, self.df2 / (self.df2 - 2), math.nan)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return ember.where(self.df1 > 2, mode, math.nan)

    @property
    def variance(self):
        d1, d2 = self.df1, self.df2
        var = 2 * d2.pow(2) * (d1 + d2 - 2) / (d1 * (d2 - 2).pow(2) * (d2 - 4))
        return ember.where(d2 > 4, var, math.nan)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = ember.finfo(x2.dtype).tiny
        x2.detach().clamp_(min=tiny)  # keep the ratio finite without recording the clamp
        y = x1 / x2
        y.detach().clamp_(min=tiny)
        return y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        half1, half2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        log_norm = (half1 + half2).lgamma() - half1.lgamma() - half2.lgamma()
        return (
            log_norm
            + half1 * ratio.log()
            + (half1 - 1) * ember.log(value)
            - (half1 + half2) * ember.log1p(ratio * value)
        )
