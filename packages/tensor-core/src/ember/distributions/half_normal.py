"""The half-normal distribution."""

from __future__ import annotations

import math

from . import constraints
from ._folded import _FoldedAtZero
from .normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(_FoldedAtZero):
    r"""The distribution of ``|X|`` for ``X ~ Normal(0, scale)``: :math:`p(x) = 2 \phi(x / \sigma) / \sigma`, x >= 0.

    Args:
        scale (float or Tensor): the scale :math:`\sigma > 0`.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        super().__init__(Normal(0, scale, validate_args=False), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._folded_log_prob(value)
