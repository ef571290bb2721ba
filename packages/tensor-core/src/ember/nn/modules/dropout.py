"""Dropout layers: ``Dropout``, ``Dropout1d/2d/3d``, ``AlphaDropout``, ``FeatureAlphaDropout``,
as in ``torch.nn``. They are the identity in eval mode (``module.eval()``)."""

from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    __constants__ = ["p", "inplace"]
    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability ``p`` in training and scale the rest by ``1 / (1 - p)``.

    Args:
        p (float): drop probability in [0, 1]. Default 0.5.
        inplace (bool): overwrite the input. Default ``False``.

    Raises:
        ValueError: ``p`` outside [0, 1].

    Reference: Srivastava et al., "Dropout: A Simple Way to Prevent Neural Networks from
    Overfitting" (2014).
    """

    _fn = staticmethod(F.dropout)


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p``; arguments as
    :class:`Dropout`."""

    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``(N, C, H, W)`` or ``(C, H, W)`` with probability ``p``; arguments as
    :class:`Dropout`. Reference: Tompson et al., "Efficient Object Localization Using
    Convolutional Networks" (2015)."""

    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` with probability ``p``."""

    _fn = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    """Dropout that keeps the SELU self-normalising property (zero mean, unit variance).

    Reference: Klambauer et al., "Self-Normalizing Neural Networks" (2017).
    """

    _fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels; see :class:`AlphaDropout`."""

    _fn = staticmethod(F.feature_alpha_dropout)
