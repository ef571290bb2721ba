"""The chi-squared distribution."""

from __future__ import annotations

import ember

from . import constraints
from .gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    r"""The chi-squared distribution of ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``.

    Args:
        df (float or Tensor): degrees of freedom, > 0.
        validate_args (bool, optional): check arguments (see :class:`Distribution`).
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        df, rate = (df, 0.5) if isinstance(df, ember.Tensor) else (ember.tensor(float(df)), 0.5)
        super().__init__(0.5 * df, rate, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2
