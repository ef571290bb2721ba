"""Normalisation layers other than batch norm: ``LayerNorm``, ``GroupNorm``, ``RMSNorm``,
``LocalResponseNorm`` and ``InstanceNorm1d/2d/3d``, as in ``torch.nn``."""

from __future__ import annotations

import numbers
import warnings

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._utils import _options_repr
from .batchnorm import _NormBase
from .module import Module

__all__ = [
    "LayerNorm",
    "GroupNorm",
    "RMSNorm",
    "LocalResponseNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
]


def _as_shape(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """Layer norm over the trailing ``normalized_shape`` dims.

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias`` (biased variance over the last
    ``len(normalized_shape)`` dims).

    Args:
        normalized_shape (int or tuple): the trailing shape to normalise over.
        eps (float): added to the variance. Default 1e-5.
        elementwise_affine (bool): learn ``weight`` (init 1) and ``bias`` (init 0) of shape
            ``normalized_shape``. Default ``True``.
        bias (bool): learn the bias (with ``elementwise_affine``). Default ``True``.

    Shape: input ``(*, *normalized_shape)``, output the same.

    Reference: Ba et al., "Layer Normalization" (2016).
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        placement = {"device": device, "dtype": dtype}
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(ember.empty(self.normalized_shape, **placement))
            if bias:
                self.bias = Parameter(ember.empty(self.normalized_shape, **placement))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """``weight`` to 1, ``bias`` to 0."""
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        affine = _options_repr(self, ("eps", "elementwise_affine"))
        return f"{self.normalized_shape}, {affine}, bias={self.bias is not None}"


class GroupNorm(Module):
    """Group norm: channels split into ``num_groups`` groups, each normalised over its channels
    and spatial dims; per-channel affine.

    Args:
        num_groups (int): must divide ``num_channels``.
        num_channels (int): ``C``.
        eps (float): default 1e-5.
        affine (bool): learn per-channel ``weight`` (init 1) and ``bias`` (init 0). Default ``True``.
        bias (bool, keyword-only): with ``affine``, learn the bias. Default ``True``.

    Shape: input ``(N, C, *)``, output the same.

    Raises:
        ValueError: ``num_channels`` is not divisible by ``num_groups``.

    Reference: Wu & He, "Group Normalization" (2018).
    """

    __constants__ = ["num_groups", "num_channels", "eps", "affine"]

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        placement = {"device": device, "dtype": dtype}
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if self.affine:
            self.weight = Parameter(ember.empty(num_channels, **placement))
            if bias:
                self.bias = Parameter(ember.empty(num_channels, **placement))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """``weight`` to 1, ``bias`` to 0."""
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        options = _options_repr(self, ("eps", "affine"))
        return f"{self.num_groups}, {self.num_channels}, {options}, bias={self.bias is not None}"


class RMSNorm(Module):
    """Root-mean-square norm: ``y = x / sqrt(mean(x**2) + eps) * weight`` over the trailing
    ``normalized_shape`` dims.

    Args:
        normalized_shape (int or tuple): the trailing shape.
        eps (float, optional): default ``None`` (the dtype's machine epsilon, as PyTorch).
        elementwise_affine (bool): learn ``weight`` (init 1). Default ``True``.

    Reference: Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019).
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        placement = {"device": device, "dtype": dtype}
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(ember.empty(self.normalized_shape, **placement))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        """``weight`` to 1."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, {_options_repr(self, ('eps', 'elementwise_affine'))}"


class LocalResponseNorm(Module):
    """Local response norm across channels:
    ``b_c = a_c / (k + alpha / n * sum_{c' near c} a_{c'}**2) ** beta``.

    Args:
        size (int): neighbouring channels summed over. alpha (float): default 1e-4.
        beta (float): default 0.75. k (float): default 1.

    Shape: input ``(N, C, *)``, output the same.

    Reference: Krizhevsky et al., "ImageNet Classification with Deep Convolutional Neural
    Networks" (2012).
    """

    __constants__ = ["size", "alpha", "beta", "k"]

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, {_options_repr(self, ('alpha', 'beta', 'k'))}"


class _InstanceNorm(_NormBase):
    _no_batch_dim = 0
    _valid_dims = ()

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=False,
        track_running_stats=False,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype, bias=bias
        )

    def _check_input_dim(self, input):
        if input.dim() not in self._valid_dims:
            expected = " or ".join(f"{d}D" for d in self._valid_dims)
            raise ValueError(f"expected {expected} input (got {input.dim()}D input)")

    def _apply_instance_norm(self, input):
        return F.instance_norm(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features"
                    f" ({self.num_features}), but got: {input.shape[feature_dim]}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. "
                "You can silence this warning by not passing in num_features, "
                "which is not used because affine=False",
                stacklevel=2,
            )
        if input.dim() == self._no_batch_dim:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over ``(N, C, L)`` or ``(C, L)``: each (sample, channel) normalised over ``L``.

    Args as :class:`BatchNorm1d`, but ``affine=False`` and ``track_running_stats=False`` by default.

    Reference: Ulyanov et al., "Instance Normalization: The Missing Ingredient for Fast
    Stylization" (2016).
    """

    _no_batch_dim = 2
    _valid_dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over ``(N, C, H, W)`` or ``(C, H, W)``; arguments as :class:`InstanceNorm1d`."""

    _no_batch_dim = 3
    _valid_dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over ``(N, C, D, H, W)`` or ``(C, D, H, W)``; arguments as :class:`InstanceNorm1d`."""

    _no_batch_dim = 4
    _valid_dims = (4, 5)
