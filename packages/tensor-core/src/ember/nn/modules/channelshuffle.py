"""``ChannelShuffle``, as in ``torch.nn``.

Reference: Zhang et al., "ShuffleNet: An Extremely Efficient Convolutional Neural Network for
Mobile Devices" (2017).
"""

from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["ChannelShuffle"]


def _channel_shuffle(input, groups):
    """``(N, g * k, *)`` -> view ``(N, g, k, *)`` -> transpose the group axes -> ``(N, k * g, *)``.

    Used when ``ember.nn.functional`` has no ``channel_shuffle`` op; the same values as PyTorch's.
    """
    if input.dim() <= 2:
        raise RuntimeError(
            f"channel_shuffle expects input to have at least 3 dimensions, but got input with sizes {list(input.shape)}"
        )
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    c = input.shape[1]
    if c % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    n, rest = input.shape[0], tuple(input.shape[2:])
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


class ChannelShuffle(Module):
    """Split the channels of ``(N, C, *)`` into ``groups`` groups and interleave them:
    output channel ``j * groups + i`` is input channel ``i * (C / groups) + j``.

    Args:
        groups (int): the number of groups; must divide ``C``.

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
        fn = getattr(F, "channel_shuffle", None)
        if fn is not None:
            return fn(input, self.groups)
        return _channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
