"""Convolution layers: ``Conv1d/2d/3d`` and ``ConvTranspose1d/2d/3d``, as in ``torch.nn``.

Weights are laid out ``(out_channels, in_channels // groups, *kernel_size)`` for convolutions and
``(in_channels, out_channels // groups, *kernel_size)`` for transposed convolutions, and
initialised like PyTorch: ``kaiming_uniform_(a=sqrt(5))`` and a bias from
U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
"""

from __future__ import annotations

import math

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._utils import _pair, _reverse_repeat_tuple, _single, _triple
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_VALID_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}
_VALID_PADDING_STRINGS = {"same", "valid"}


def _f_pad_amounts(padding, kernel_size, dilation):
    """Padding as ``F.pad`` takes it: last spatial dim first, ``(left, right)`` per dim.

    ``"same"`` puts the odd element of an odd total on the right; ``"valid"`` pads nothing.
    """
    if not isinstance(padding, str):
        return list(_reverse_repeat_tuple(padding, 2))
    amounts = []
    for size, rate in zip(reversed(kernel_size), reversed(dilation)):
        total = rate * (size - 1) if padding == "same" else 0
        amounts += [total // 2, total - total // 2]
    return amounts


class _ConvNd(Module):
    """Shared constructor, initialisation and repr of the convolution modules."""

    __constants__ = [
        "stride",
        "padding",
        "dilation",
        "groups",
        "padding_mode",
        "output_padding",
        "in_channels",
        "out_channels",
        "kernel_size",
    ]

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        bias,
        padding_mode,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in _VALID_PADDING_STRINGS:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {_VALID_PADDING_STRINGS}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _VALID_PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {_VALID_PADDING_MODES}, but got padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # PyTorch's attribute name for the padding in F.pad's order (used by the non-"zeros" modes).
        self._reversed_padding_repeated_twice = _f_pad_amounts(padding, kernel_size, dilation)
        # A transposed convolution maps in_channels to out_channels the other way round.
        channels = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(ember.empty((*channels, *kernel_size), device=device, dtype=dtype))
        bias_tensor = Parameter(ember.empty(out_channels, device=device, dtype=dtype)) if bias else None
        self.register_parameter("bias", bias_tensor)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw the weight (``kaiming_uniform_(a=sqrt(5))``) and bias (U(±1/sqrt(fan_in)))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is None:
            return
        fan_in = init._calculate_fan_in_and_fan_out(self.weight)[0]
        if fan_in > 0:
            init.uniform_(self.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))

    def extra_repr(self):
        parts = [f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"]
        # Tuple options are shown when some entry differs from its default (0 or 1).
        for name, neutral in (("padding", 0), ("dilation", 1), ("output_padding", 0)):
            value = getattr(self, name)
            if value != (neutral,) * len(value):
                parts.append(f"{name}={value}")
        if self.groups != 1:
            parts.append(f"groups={self.groups}")
        if self.bias is None:
            parts.append("bias=False")
        if self.padding_mode != "zeros":
            parts.append(f"padding_mode={self.padding_mode}")
        return ", ".join(parts)


class _ConvForward(_ConvNd):
    """``forward`` of ConvNd: pads with ``F.pad`` first for the non-"zeros" padding modes."""

    _conv = None  # the functional conv (F.conv1d/2d/3d)
    _tuple = None  # _single/_pair/_triple

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        t = type(self)._tuple
        super().__init__(
            in_channels,
            out_channels,
            t(kernel_size),
            t(stride),
            padding if isinstance(padding, str) else t(padding),
            t(dilation),
            False,
            t(0),
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )

    def _conv_forward(self, input, weight, bias):
        conv = type(self)._conv
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, type(self)._tuple(0), self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_ConvForward):
    """1-D convolution over an input ``(N, C_in, L)`` or ``(C_in, L)``.

    Args:
        in_channels (int), out_channels (int): channel counts.
        kernel_size (int or tuple): kernel length.
        stride (int or tuple): default 1.
        padding (int, tuple or str): zero-padding on both sides, or ``'valid'``/``'same'``
            (``'same'`` needs stride 1). Default 0.
        dilation (int or tuple): default 1.
        groups (int): blocked connections from input to output channels. Default 1.
        bias (bool): learn a bias. Default ``True``.
        padding_mode (str): ``'zeros'``, ``'reflect'``, ``'replicate'`` or ``'circular'``.

    Shape: output ``(N, C_out, L_out)``, L_out = floor((L + 2p - d(k-1) - 1) / s + 1).

    Raises:
        ValueError: bad ``groups``, padding string, or ``padding_mode``.
    """

    _conv = staticmethod(F.conv1d)
    _tuple = staticmethod(_single)


class Conv2d(_ConvForward):
    """2-D convolution over an input ``(N, C_in, H, W)`` or ``(C_in, H, W)``.

    Arguments as :class:`Conv1d`, with ints or 2-tuples for the spatial ones.

    Shape: output ``(N, C_out, H_out, W_out)``, per dim floor((X + 2p - d(k-1) - 1) / s + 1).

    Example:
        >>> import ember
        >>> m = ember.nn.Conv2d(16, 33, 3, stride=2)
        >>> m(ember.randn(20, 16, 50, 100)).shape
        ember.Size([20, 33, 24, 49])
    """

    _conv = staticmethod(F.conv2d)
    _tuple = staticmethod(_pair)


class Conv3d(_ConvForward):
    """3-D convolution over an input ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``.

    Arguments as :class:`Conv1d`, with ints or 3-tuples for the spatial ones.
    """

    _conv = staticmethod(F.conv3d)
    _tuple = staticmethod(_triple)


class _ConvTransposeNd(_ConvNd):
    """Transposed convolution: constructor, ``output_size`` handling and ``forward``."""

    _conv = None
    _tuple = None
    _num_spatial_dims = 0

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        t = type(self)._tuple
        super().__init__(
            in_channels,
            out_channels,
            t(kernel_size),
            t(stride),
            t(padding),
            t(dilation),
            True,
            t(output_padding),
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )

    def _output_padding(self, input, output_size, stride, padding, kernel_size, num_spatial_dims, dilation=None):
        """The ``output_padding`` that makes the output ``output_size`` (the module's own when None).

        Without output padding, spatial dim ``d`` has size ``(n - 1) * stride - 2 * padding +
        dilation * (kernel - 1) + 1``; every size up to ``stride - 1`` larger is reachable.
        """
        if output_size is None:
            return _single(self.output_padding)
        leading = input.dim() - num_spatial_dims  # (N, C) or just (C)
        requested = list(output_size)
        if len(requested) == leading + num_spatial_dims:
            requested = requested[leading:]  # a full shape was given: keep the spatial part
        if len(requested) != num_spatial_dims:
            raise ValueError(
                f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, output_size must have "
                f"{num_spatial_dims} or {leading + num_spatial_dims} elements (got {len(requested)})"
            )
        dilation = dilation if dilation is not None else (1,) * num_spatial_dims
        smallest = [
            (input.shape[leading + d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel_size[d] - 1) + 1
            for d in range(num_spatial_dims)
        ]
        largest = [size + step - 1 for size, step in zip(smallest, stride)]
        if any(not lo <= size <= hi for size, lo, hi in zip(requested, smallest, largest)):
            raise ValueError(
                f"requested an output size of {requested}, but valid sizes range "
                f"from {smallest} to {largest} (for an input of {input.shape[2:]})"
            )
        return [size - lo for size, lo in zip(requested, smallest)]

    def forward(self, input, output_size=None):
        """Args: input ``(N, C_in, *spatial)``; output_size (optional): the exact output shape, which
        picks ``output_padding`` (as in PyTorch)."""
        n = type(self)._num_spatial_dims
        output_padding = self._output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, n, self.dilation
        )
        return type(self)._conv(
            input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution ("deconvolution") over ``(N, C_in, L)``.

    Args:
        in_channels, out_channels, kernel_size, stride, padding, groups, bias, dilation: as
            :class:`Conv1d` (``padding`` removes ``dilation * (kernel_size - 1) - padding`` ...
            as in PyTorch); padding_mode must be ``'zeros'``.
        output_padding (int or tuple): extra size added to one side of the output. Default 0.

    Shape: L_out = (L - 1)s - 2p + d(k - 1) + output_padding + 1.
    """

    _conv = staticmethod(F.conv_transpose1d)
    _tuple = staticmethod(_single)
    _num_spatial_dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over ``(N, C_in, H, W)``; arguments as :class:`ConvTranspose1d`."""

    _conv = staticmethod(F.conv_transpose2d)
    _tuple = staticmethod(_pair)
    _num_spatial_dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over ``(N, C_in, D, H, W)``; arguments as :class:`ConvTranspose1d`."""

    _conv = staticmethod(F.conv_transpose3d)
    _tuple = staticmethod(_triple)
    _num_spatial_dims = 3
