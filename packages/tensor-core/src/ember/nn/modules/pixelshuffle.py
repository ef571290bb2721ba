"""``PixelShuffle`` and ``PixelUnshuffle``, as in ``torch.nn``: sub-pixel rearrangements between
channels and space.

Reference: Shi et al., "Real-Time Single Image and Video Super-Resolution Using an Efficient
Sub-Pixel Convolutional Neural Network" (2016).
"""

from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """Rearrange ``(*, C r^2, H, W)`` into ``(*, C, H r, W r)``, ``r = upscale_factor``.

    Output ``[..., c, h r + i, w r + j]`` is input ``[..., c r^2 + i r + j, h, w]``.

    Args:
        upscale_factor (int): ``r``.

    Raises:
        RuntimeError: the channel count is not divisible by ``r^2`` (raised by the functional op).

    Example:
        >>> import ember
        >>> ember.nn.PixelShuffle(3)(ember.randn(1, 9, 4, 4)).shape
        ember.Size([1, 1, 12, 12])
    """

    __constants__ = ["upscale_factor"]

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """The inverse of :class:`PixelShuffle`: ``(*, C, H r, W r)`` into ``(*, C r^2, H, W)``.

    Args:
        downscale_factor (int): ``r``.

    Example:
        >>> import ember
        >>> ember.nn.PixelUnshuffle(3)(ember.randn(1, 1, 12, 12)).shape
        ember.Size([1, 9, 4, 4])
    """

    __constants__ = ["downscale_factor"]

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"
