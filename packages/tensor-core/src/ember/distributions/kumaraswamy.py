"""The Kumaraswamy distribution."""

from __future__ import annotations

import math

import ember

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all

__all__ = ["Kumaraswamy"]

_EULER = 0.57721566490153286060


def _moment(a, b, n):
    """E[X^n] = b B(1 + n/a, b), through log-gammas."""
    arg = 1 + n / a
    return ember.exp(ember.log(b) + ember.lgamma(arg) + ember.lgamma(b) - ember.lgamma(arg + b))


class Kumaraswamy(TransformedDistribution):
    r"""The Kumaraswamy distribution on (0, 1): :math:`p(x) = a b x^{a-1} (1 - x^a)^{b-1}`, a beta-like
    family with a closed-form CDF; drawn as ``(1 - U^{1/b})^{1/a}`` of a uniform ``U``.

    Args:
        concentration1 (float or Tensor): :math:`a > 0`.
        concentration0 (float or Tensor): :math:`b > 0`; broadcasts with ``concentration1``.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        finfo = ember.finfo(self.concentration0.dtype)
        base = Uniform(
            ember.full_like(self.concentration0, 0.0), ember.full_like(self.concentration0, 1.0),
            validate_args=validate_args,
        )  # fmt: skip
        transforms = [
            PowerTransform(exponent=self.concentration0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        self._tiny = finfo.tiny
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        new._tiny = self._tiny
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        # ((a - 1) / (a b - 1)) ** (1 / a) where a >= 1 and b >= 1; no interior mode otherwise
        log_mode = (ember.log(a - 1) - ember.log(a * b - 1)) / a
        return ember.where((a < 1) | (b < 1), math.nan, log_mode.exp())

    @property
    def variance(self):
        a, b = self.concentration1, self.concentration0
        return _moment(a, b, 2) - self.mean.pow(2)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        harmonic_b = ember.digamma(b + 1) + _EULER  # the b-th harmonic number
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * harmonic_b - ember.log(a * b)
