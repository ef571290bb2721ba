"""The :class:`ExponentialFamily` base class: entropy from the log-normaliser through autograd."""

from __future__ import annotations

import ember

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """A distribution of the exponential family, ``p(x; theta) = exp(<t(x), theta> - F(theta) + k(x))``.

    Subclasses give ``_natural_params`` (theta), ``_log_normalizer`` (F) and ``_mean_carrier_measure``
    (E[k(x)]); then the entropy follows from the Bregman divergence of F (Nielsen and Nock, "Entropies
    and cross-entropies of exponential families", 2010), with F's gradient taken by autograd, and so does
    the KL divergence between two members of one family.
    """

    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        """``F(theta) - <theta, grad F(theta)> - E[k(x)]``, of shape ``batch_shape``."""
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with ember.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = ember.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(self._batch_shape + (-1,)).sum(-1)
        return result
