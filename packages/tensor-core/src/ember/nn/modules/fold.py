"""``Fold`` (col2im) and ``Unfold`` (im2col), as in ``torch.nn``."""

from __future__ import annotations

from .. import functional as F
from ._utils import _options_repr
from .module import Module

__all__ = ["Fold", "Unfold"]


class Fold(Module):
    """Sum sliding local blocks ``(N, C prod(kernel_size), L)`` back into ``(N, C, *output_size)``.

    Overlapping block entries are added. With matching arguments, ``Fold`` is the adjoint of
    :class:`Unfold` (not its inverse).

    Args:
        output_size (int or tuple): spatial shape of the output.
        kernel_size (int or tuple): block size.
        dilation (int or tuple): spacing of a block's elements. Default 1.
        padding (int or tuple): implicit zero padding of the output on both sides. Default 0.
        stride (int or tuple): block stride. Default 1.

    Raises:
        RuntimeError: ``L`` does not match the number of blocks that fit (raised by ``F.fold``).

    Example:
        >>> import ember
        >>> ember.nn.Fold(output_size=(4, 5), kernel_size=(2, 2))(ember.randn(1, 12, 12)).shape
        ember.Size([1, 3, 4, 5])
    """

    __constants__ = ["output_size", "kernel_size", "dilation", "padding", "stride"]

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return _options_repr(self, ("output_size", "kernel_size", "dilation", "padding", "stride"))


class Unfold(Module):
    """Extract sliding local blocks of ``(N, C, *)`` into ``(N, C prod(kernel_size), L)``.

    ``L`` is the number of blocks: ``prod_d floor((size_d + 2 padding_d - dilation_d (kernel_d - 1) - 1)
    / stride_d + 1)``. Only 4-D (batched image) inputs are supported, as in PyTorch.

    Args:
        kernel_size, dilation, padding, stride: as :class:`Fold`.

    Example:
        >>> import ember
        >>> ember.nn.Unfold(kernel_size=(2, 3))(ember.randn(2, 5, 3, 4)).shape
        ember.Size([2, 30, 4])
    """

    __constants__ = ["kernel_size", "dilation", "padding", "stride"]

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return _options_repr(self, ("kernel_size", "dilation", "padding", "stride"))
