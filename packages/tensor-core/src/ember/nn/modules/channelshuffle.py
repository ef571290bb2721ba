"""``ChannelShuffle``, as in ``torch.nn``.

Reference: Zhang et al., "ShuffleNet: An Extremely Efficient Convolutional Neural Network for
Mobile Devices" (2017).
"""

from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Split the channels of ``(N, C, *)`` into ``groups`` groups and interleave them:
    output channel ``j * groups + i`` is input channel ``i * (C / groups) + j``.

    Args:
        groups (int): the number of groups; must divide ``C``.

    Shape:
        input ``(N, C, *)``; output the same shape. See :func:`ember.nn.functional.channel_shuffle`.

    Raises:
        RuntimeError: ``C`` is not divisible by ``groups``, ``groups <= 0``, or the input has fewer
            than 3 dimensions.

    Example:
        >>> import ember
        >>> ember.nn.ChannelShuffle(2)(ember.arange(4.0).reshape(1, 4, 1)).flatten()
        tensor([0., 2., 1., 3.])
    """

    __constants__ = ["groups"]

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
