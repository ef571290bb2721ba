"""Pooling layers: ``MaxPool1d/2d/3d``, ``AvgPool1d/2d/3d``, ``AdaptiveAvgPool1d/2d/3d``,
``AdaptiveMaxPool1d/2d/3d``, as in ``torch.nn``. They hold no parameters; ``forward`` calls the
``ember.nn.functional`` op of the same name with the stored arguments."""

from __future__ import annotations

from .. import functional as F
from ._utils import _options_repr, _single
from .module import Module

__all__ = [
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
]


class _MaxPoolNd(Module):
    __constants__ = ["kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode"]
    _pool = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return type(self)._pool(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self):
        return _options_repr(self, ("kernel_size", "stride", "padding", "dilation", "ceil_mode"))


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)``.

    Args:
        kernel_size: window size. stride: default ``kernel_size``. padding: implicit -inf padding
            on both sides (at most half the kernel). dilation: window element spacing.
        return_indices (bool): also return the flat argmax indices (for ``MaxUnpool``).
        ceil_mode (bool): round the output size up instead of down.

    Shape: L_out = floor((L + 2p - d(k - 1) - 1) / s + 1) (ceil with ``ceil_mode``).
    """

    _pool = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling over ``(N, C, H, W)`` or ``(C, H, W)``; arguments as :class:`MaxPool1d`
    (ints or pairs).

    Example:
        >>> import ember
        >>> ember.nn.MaxPool2d(3, stride=2)(ember.randn(20, 16, 50, 32)).shape
        ember.Size([20, 16, 24, 15])
    """

    _pool = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling over ``(N, C, D, H, W)``; arguments as :class:`MaxPool1d` (ints or triples)."""

    _pool = staticmethod(F.max_pool3d)


class AvgPool1d(Module):
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)``.

    Args:
        kernel_size, stride (default ``kernel_size``), padding: as :class:`MaxPool1d`.
        ceil_mode (bool): round the output size up.
        count_include_pad (bool): count the zero padding in the divisor. Default ``True``.
    """

    __constants__ = ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"]

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    __constants__ = ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"]
    _pool = None

    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return type(self)._pool(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """2-D average pooling over ``(N, C, H, W)`` or ``(C, H, W)``.

    Args:
        kernel_size, stride, padding, ceil_mode, count_include_pad: as :class:`AvgPool1d`.
        divisor_override (int, optional): divide by this instead of the window size.
    """

    _pool = staticmethod(F.avg_pool2d)


class AvgPool3d(_AvgPoolNd):
    """3-D average pooling over ``(N, C, D, H, W)``; arguments as :class:`AvgPool2d`."""

    _pool = staticmethod(F.avg_pool3d)


class _AdaptiveAvgPoolNd(Module):
    __constants__ = ["output_size"]
    _pool = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self)._pool(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """1-D adaptive average pooling to length ``output_size`` over ``(N, C, L)``.

    Output bin ``i`` averages input ``[floor(i L / out), ceil((i + 1) L / out))``.
    """

    _pool = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """2-D adaptive average pooling to ``output_size`` (int, pair, or ``None`` entries keeping the
    input size) over ``(N, C, H, W)``."""

    _pool = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """3-D adaptive average pooling to ``output_size`` over ``(N, C, D, H, W)``."""

    _pool = staticmethod(F.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    __constants__ = ["output_size", "return_indices"]
    _pool = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        return type(self)._pool(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """1-D adaptive max pooling to length ``output_size``; ``return_indices`` also returns argmaxes."""

    _pool = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """2-D adaptive max pooling to ``output_size`` over ``(N, C, H, W)``."""

    _pool = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """3-D adaptive max pooling to ``output_size`` over ``(N, C, D, H, W)``."""

    _pool = staticmethod(F.adaptive_max_pool3d)
