"""The von Mises distribution on the circle."""

from __future__ import annotations

import math

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]


def _log_i0(x):
    """log I0(x) = log i0e(x) + x: finite for every concentration."""
    return ember.log(ember.special.i0e(x)) + x


def _rejection_sample(loc, concentration, proposal_r, out):
    """Fill ``out`` (float64) with von Mises angles by Best and Fisher's wrapped-Cauchy rejection sampler
    (Best and Fisher, "Efficient simulation of the von Mises distribution", Applied Statistics 1979)."""
    pending = ember.ones(out.shape, dtype=ember.bool, device=out.device)
    while bool(pending.any()):
        u1, u2, u3 = ember.rand((3, *out.shape), dtype=out.dtype, device=out.device).unbind(0)
        z = ember.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((ember.log(c / u2) + 1 - c) >= 0)
        angle = ember.sign(u3 - 0.5) * ember.acos(f.clamp(-1.0, 1.0))
        take = accept & pending
        out = ember.where(take, angle, out)
        pending = pending & ~accept
    return (out + math.pi + loc).remainder(2 * math.pi) - math.pi


class VonMises(Distribution):
    r"""The von Mises (circular normal) distribution of angles:
    :math:`p(x) = e^{\kappa \cos(x - \mu)} / (2\pi I_0(\kappa))` on :math:`[-\pi, \pi)`.

    Args:
        loc (float or Tensor): the mean angle :math:`\mu` (radians).
        concentration (float or Tensor): :math:`\kappa > 0`; broadcasts with ``loc``.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        batch_shape = self.loc.shape
        super().__init__(batch_shape, ember.Size(), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = ember.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(VonMises, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        kappa = self.concentration
        return kappa * ember.cos(value - self.loc) - math.log(2 * math.pi) - _log_i0(kappa)

    @lazy_property
    def _proposal_r(self):
        # r = (1 + rho^2) / (2 rho), rho = (tau - sqrt(2 tau)) / (2 kappa), tau = 1 + sqrt(1 + 4 kappa^2); rho is
        # rewritten without the cancellation of tau - sqrt(2 tau) at small kappa
        kappa = self.concentration.double()
        s = ember.sqrt(1 + 4 * kappa * kappa)
        tau = 1 + s
        rho = 2 * kappa * tau / ((s + 1) * (tau + ember.sqrt(2 * tau)))
        return (1 + rho * rho) / (2 * rho)

    def sample(self, sample_shape=()):
        """Draw angles in [-pi, pi) (rejection sampling in float64; not reparameterised)."""
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            out = ember.zeros(shape, dtype=ember.float64, device=self.loc.device)
            kappa = self.concentration.double().expand(shape)
            r = self._proposal_r.expand(shape)
            x = _rejection_sample(self.loc.double(), kappa, r, out)
            return x.to(self.loc.dtype)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        kappa = self.concentration
        return 1 - ember.special.i1e(kappa) / ember.special.i0e(kappa)
