"""The Wishart distribution."""

from __future__ import annotations

import math
import numbers

import ember

from . import constraints
from .exp_family import ExponentialFamily
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property

__all__ = ["Wishart"]


def _mvlgamma(a, p):
    r"""The log multivariate gamma function,
    :math:`\log\Gamma_p(a) = \tfrac{p(p-1)}{4}\log\pi + \sum_{j<p} \log\Gamma(a - j/2)`."""
    offsets = ember.arange(p, dtype=a.dtype, device=a.device) * 0.5
    return p * (p - 1) / 4 * math.log(math.pi) + ember.lgamma(a.unsqueeze(-1) - offsets).sum(-1)


def _mvdigamma(a, p):
    """The derivative of :func:`_mvlgamma` in ``a``: a sum of digammas."""
    offsets = ember.arange(p, dtype=a.dtype, device=a.device) * 0.5
    return ember.digamma(a.unsqueeze(-1) - offsets).sum(-1)


class Wishart(ExponentialFamily):
    r"""The Wishart distribution of positive definite p x p matrices with ``df`` degrees of freedom and scale
    matrix :math:`\Sigma`: :math:`p(X) \propto |X|^{(\nu - p - 1)/2} e^{-\mathrm{tr}(\Sigma^{-1} X)/2}`, the
    distribution of :math:`\sum_{i \le \nu} x_i x_i^T` for :math:`x_i \sim N(0, \Sigma)`.

    Give exactly one of ``covariance_matrix`` (:math:`\Sigma`), ``precision_matrix`` and ``scale_tril``.
    ``rsample`` uses the Bartlett decomposition (chi-squared diagonal through the reparameterised gamma).

    Args:
        df (float or Tensor): :math:`\nu > p - 1`, of the batch shape.
        covariance_matrix (Tensor, optional): positive definite, ``(..., p, p)``.
        precision_matrix (Tensor, optional): positive definite, ``(..., p, p)``.
        scale_tril (Tensor, optional): lower triangular with positive diagonal, ``(..., p, p)``.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).

    Raises:
        ValueError: if not exactly one matrix is given, or a matrix is not at least 2-D.
    """

    arg_constraints = {
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
        "df": constraints.greater_than(0),
    }
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = given[0]
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = param.shape[:-2]
            self.df = ember.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = ember.broadcast_shapes(param.shape[:-2], df.shape)
            self.df = df.expand(batch_shape)
        event_shape = param.shape[-2:]
        p = event_shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        matrix_shape = tuple(batch_shape) + tuple(event_shape)
        if scale_tril is not None:
            self.scale_tril = param.expand(matrix_shape)
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(matrix_shape)
            self._unbroadcasted_scale_tril = ember.linalg.cholesky(covariance_matrix)
        else:
            self.precision_matrix = param.expand(matrix_shape)
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self.arg_constraints = {**type(self).arg_constraints, "df": constraints.greater_than(p - 1)}
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = ember.Size(batch_shape)
        matrix_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        new.arg_constraints = self.arg_constraints
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        return ember.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    def _df(self):
        """df with two trailing unit dimensions, to scale matrices."""
        return self.df.reshape(tuple(self.df.shape) + (1, 1))

    @property
    def mean(self):
        return self._df() * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self._event_shape[-1] - 1
        factor = ember.where(factor > 0, factor, math.nan)
        return factor.reshape(tuple(factor.shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        cov = self.covariance_matrix
        diag = cov.diagonal(dim1=-2, dim2=-1)
        return self._df() * (cov.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett(self, sample_shape):
        """The Bartlett factor A (lower triangular): chi(df - i) on the diagonal, standard normals below."""
        p = self._event_shape[-1]
        shape = tuple(sample_shape) + tuple(self._batch_shape)
        dtype, device = self._unbroadcasted_scale_tril.dtype, self._unbroadcasted_scale_tril.device
        dof = self.df.expand(shape).unsqueeze(-1) - ember.arange(p, dtype=dtype, device=device)
        chi2 = 2.0 * ember._standard_gamma(0.5 * dof)
        noise = ember.randn(shape + (p, p), dtype=dtype, device=device).tril(-1)
        return noise + ember.diag_embed(chi2.sqrt())

    def rsample(self, sample_shape=()):
        A = self._bartlett(ember.Size(sample_shape))
        LA = self._unbroadcasted_scale_tril @ A
        return LA @ LA.mT

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        half_log_det_scale = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        log_det_value = ember.linalg.slogdet(value).logabsdet
        trace = (ember.cholesky_solve(value, self._unbroadcasted_scale_tril)).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (
            -0.5 * nu * p * math.log(2.0)
            - nu * half_log_det_scale
            - _mvlgamma(0.5 * nu, p)
            + 0.5 * (nu - p - 1) * log_det_value
            - 0.5 * trace
        )

    def entropy(self):
        nu, p = self.df, self._event_shape[-1]
        half_log_det_scale = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        # E[log |X|] = mvdigamma(nu / 2) + p log 2 + log |Sigma|, and E[tr(Sigma^-1 X)] = nu p
        expected_log_det = _mvdigamma(0.5 * nu, p) + p * math.log(2.0) + 2 * half_log_det_scale
        return (
            0.5 * nu * p * math.log(2.0)
            + nu * half_log_det_scale
            + _mvlgamma(0.5 * nu, p)
            - 0.5 * (nu - p - 1) * expected_log_det
            + 0.5 * nu * p
        )

    @property
    def _natural_params(self):
        nu = self._df()
        return -0.5 * self.precision_matrix, 0.5 * (nu - self._event_shape[-1] - 1)

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        nu = 2 * y + p + 1
        nu_scalar = nu.reshape(nu.shape[:-2])
        return nu_scalar * (-ember.linalg.slogdet(-2 * x).logabsdet + p * math.log(2.0)) * 0.5 + _mvlgamma(
            0.5 * nu_scalar, p
        )
