"""The LKJ distribution over Cholesky factors of correlation matrices."""

from __future__ import annotations

import math

import ember

from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all
from .wishart import _mvlgamma

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    r"""The LKJ distribution (Lewandowski, Kurowicka and Joe, "Generating random correlation matrices based on
    vines and extended onion method", J. Multivariate Analysis 2009) of the lower Cholesky factor ``L`` of a
    ``dim`` x ``dim`` correlation matrix ``R = L L^T``, with :math:`p(R) \propto \det(R)^{\eta - 1}`; in terms
    of ``L``, :math:`p(L) \propto \prod_{k \ge 1} L_{kk}^{2(\eta - 1) + d - k - 1}` (rows counted from 0).

    Samples come from the onion method: row ``k`` of ``L`` is ``[sqrt(y) u, sqrt(1 - y)]`` with ``u`` uniform on
    the unit sphere of R^k and :math:`y \sim \mathrm{Beta}(k/2, \eta + (d - 1 - k)/2)`.

    Args:
        dim (int): the matrix size, >= 2.
        concentration (float or Tensor): :math:`\eta > 0` (1 is uniform over correlation matrices).
        validate_args (bool, optional): check arguments (see :class:`Distribution`).

    Raises:
        ValueError: if ``dim < 2``.
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = ember.Size((dim, dim))
        self._beta = self._row_betas()
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def _row_betas(self):
        """Beta(k/2, eta + (d - 1 - k)/2) for rows k = 0..d-1 (row 0 is the fixed [1, 0, ...]; its Beta is unused)."""
        k = ember.arange(self.dim, dtype=self.concentration.dtype, device=self.concentration.device)
        conc1 = (0.5 * k).clamp(min=0.5)
        conc0 = self.concentration.unsqueeze(-1) + 0.5 * (self.dim - 1 - k)
        return Beta(conc1, conc0.clamp(min=ember.finfo(conc0.dtype).tiny), validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = ember.Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)  # (..., d, 1): one Beta draw per row
            y[..., 0, :] = 0.0
            # uniform directions: normalised Gaussians restricted to the strictly lower triangle
            g = ember.randn(shape, dtype=y.dtype, device=y.device).tril(-1)
            norms = ember.linalg.vector_norm(g, dim=-1, keepdim=True).clamp(min=ember.finfo(y.dtype).tiny)
            off_diagonal = y.sqrt() * (g / norms)
            diagonal = (1 - off_diagonal.pow(2).sum(-1)).clamp(min=ember.finfo(y.dtype).tiny).sqrt()
            return off_diagonal + ember.diag_embed(diagonal)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        d = self.dim
        k = ember.arange(1, d, dtype=value.dtype, device=value.device)
        exponents = 2 * (self.concentration.unsqueeze(-1) - 1) + d - k - 1
        log_diag = value.diagonal(dim1=-2, dim2=-1)[..., 1:].log()
        unnormalised = (exponents * log_diag).sum(-1)
        # log of the normaliser: (d-1)/2 log(pi) + log Gamma_{d-1}(alpha - 1/2) - (d-1) log Gamma(alpha),
        # alpha = eta + (d-1)/2 (for d = 2 it is log B(1/2, eta), the integral of (1 - r^2)^(eta - 1))
        alpha = self.concentration + 0.5 * (d - 1)
        log_norm = 0.5 * (d - 1) * math.log(math.pi) + _mvlgamma(alpha - 0.5, d - 1) - (d - 1) * ember.lgamma(alpha)
        return unnormalised - log_norm
