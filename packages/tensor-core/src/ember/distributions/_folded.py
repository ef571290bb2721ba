"""What the half-normal and half-Cauchy distributions share: ``|X|`` for ``X`` symmetric about 0."""

from __future__ import annotations

import math

import ember

from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform


class _FoldedAtZero(TransformedDistribution):
    """``|X|`` for a ``base_dist`` symmetric about 0 with a ``scale``: the density doubles on x >= 0."""

    def __init__(self, base_dist, validate_args=None):
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return ember.zeros_like(self.scale)

    def _folded_log_prob(self, value):
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return ember.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)
