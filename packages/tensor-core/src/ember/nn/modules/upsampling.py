"""Upsampling layers, as in ``torch.nn``: ``Upsample`` (every :func:`ember.nn.functional.interpolate`
mode) and the fixed-mode ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d``."""

from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resize a ``(N, C, L)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)`` input.

    Args:
        size (int or tuple, optional): the output spatial size.
        scale_factor (float or tuple, optional): multiplier of the spatial size (stored as floats).
            Give exactly one of ``size`` and ``scale_factor``.
        mode (str): ``'nearest'``, ``'linear'``, ``'bilinear'``, ``'bicubic'``, ``'trilinear'`` or
            ``'nearest-exact'``. Default ``'nearest'``.
        align_corners (bool, optional): for the linear modes, align the corner pixels' centres of
            input and output. Default ``None`` (``False``).
        recompute_scale_factor (bool, optional): recompute the scale from the rounded output size.

    Raises:
        ValueError: neither or both of ``size``/``scale_factor``, or an unknown mode (from
            ``F.interpolate``).

    Example:
        >>> import ember
        >>> ember.nn.Upsample(scale_factor=2)(ember.tensor([[[[1.0, 2.0]]]]))
        tensor([[[[1., 1., 2., 2.],
                  [1., 1., 2., 2.]]]])
    """

    __constants__ = ["size", "scale_factor", "mode", "align_corners", "name", "recompute_scale_factor"]

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def __setstate__(self, state):
        if "recompute_scale_factor" not in state:
            state["recompute_scale_factor"] = True
        if hasattr(super(), "__setstate__"):
            super().__setstate__(state)
        else:
            self.__dict__.update(state)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = "scale_factor=" + repr(self.scale_factor)
        else:
            info = "size=" + repr(self.size)
        info += ", mode=" + repr(self.mode)
        return info


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of ``(N, C, H, W)``: ``Upsample(size, scale_factor, mode='nearest')``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of ``(N, C, H, W)`` with ``align_corners=True``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
