"""``MaxUnpool1d/2d/3d`` and ``LPPool1d/2d/3d``, as in ``torch.nn`` (PyTorch keeps them in its
``pooling.py``; here they sit beside :mod:`.pooling`). They hold no parameters."""

from __future__ import annotations

from .. import functional as F
from ._utils import _options_repr, _pair, _single, _triple
from .module import Module

__all__ = ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d"]


class _MaxUnpoolNd(Module):
    _unpool = None
    _tuple = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        to_tuple = type(self)._tuple
        self.kernel_size = to_tuple(kernel_size)
        self.stride = to_tuple(stride if (stride is not None) else kernel_size)
        self.padding = to_tuple(padding)

    def forward(self, input, indices, output_size=None):
        return type(self)._unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool1d`: scatter each value to the position ``indices`` names,
    zeros elsewhere.

    Args:
        kernel_size (int or tuple): the max pooling window size.
        stride (int or tuple, optional): the max pooling stride. Default ``kernel_size``.
        padding (int or tuple): the max pooling padding. Default 0.

    Forward args:
        input: ``(N, C, L_in)`` or ``(C, L_in)``.
        indices: the flat per-channel argmaxes that ``MaxPool1d(return_indices=True)`` returned.
        output_size (sequence, optional): the exact output size, to undo a floor in the pooling's
            output size.

    Shape: ``L_out = (L_in - 1) * stride - 2 * padding + kernel_size`` unless ``output_size`` is given.

    Example:
        >>> import ember
        >>> pool = ember.nn.MaxPool1d(2, stride=2, return_indices=True)
        >>> out, idx = pool(ember.tensor([[[1.0, 2.0, 3.0, 4.0]]]))
        >>> ember.nn.MaxUnpool1d(2, stride=2)(out, idx)
        tensor([[[0., 2., 0., 4.]]])
    """

    _unpool = staticmethod(F.max_unpool1d)
    _tuple = staticmethod(_single)


class MaxUnpool2d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool2d` over ``(N, C, H, W)`` or ``(C, H, W)``; arguments as
    :class:`MaxUnpool1d` (ints or pairs).

    Shape: ``H_out = (H_in - 1) * stride[0] - 2 * padding[0] + kernel_size[0]``, likewise ``W_out``.
    """

    _unpool = staticmethod(F.max_unpool2d)
    _tuple = staticmethod(_pair)


class MaxUnpool3d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool3d` over ``(N, C, D, H, W)`` or ``(C, D, H, W)``; arguments
    as :class:`MaxUnpool1d` (ints or triples)."""

    _unpool = staticmethod(F.max_unpool3d)
    _tuple = staticmethod(_triple)


class _LPPoolNd(Module):
    __constants__ = ["norm_type", "kernel_size", "stride", "ceil_mode"]
    _pool = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return type(self)._pool(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return _options_repr(self, ("norm_type", "kernel_size", "stride", "ceil_mode"))


class LPPool1d(_LPPoolNd):
    """1-D power-average pooling: ``f(X) = (sum_{x in X} x^p)^(1/p)`` over each window.

    ``p = inf`` gives max pooling, ``p = 1`` sum pooling (average pooling times the window size).

    Args:
        norm_type (float): ``p``.
        kernel_size (int): the window size.
        stride (int, optional): Default ``kernel_size``.
        ceil_mode (bool): round the output size up. Default ``False``.

    Shape: ``(N, C, L_in)`` or ``(C, L_in)`` -> ``L_out = floor((L_in - kernel_size) / stride + 1)``.

    Example:
        >>> import ember
        >>> ember.nn.LPPool1d(2, 2)(ember.tensor([[[3.0, 4.0]]]))
        tensor([[[5.]]])
    """

    _pool = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """2-D power-average pooling over ``(N, C, H, W)`` or ``(C, H, W)``; arguments as
    :class:`LPPool1d` (ints or pairs)."""

    _pool = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """3-D power-average pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``; arguments as
    :class:`LPPool1d` (ints or triples)."""

    _pool = staticmethod(F.lp_pool3d)
