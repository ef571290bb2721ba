"""The half-Cauchy distribution."""

from __future__ import annotations

import math

import ember

from . import constraints
from ._folded import _FoldedAtZero
from .cauchy import Cauchy

__all__ = ["HalfCauchy"]


class HalfCauchy(_FoldedAtZero):
    r"""The distribution of ``|X|`` for ``X ~ Cauchy(0, scale)``.

    Args:
        scale (float or Tensor): the scale, > 0.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return ember.full(self._extended_shape(), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = ember.as_tensor(value, dtype=self.base_dist.scale.dtype, device=self.base_dist.scale.device)
        return self._folded_log_prob(value)
