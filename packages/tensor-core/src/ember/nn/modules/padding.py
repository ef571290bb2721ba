"""Padding layers, as in ``torch.nn``: ``ZeroPad``, ``ConstantPad``, ``ReflectionPad``,
``ReplicationPad`` and ``CircularPad``, each in 1d/2d/3d.

They hold no parameters; ``forward`` calls :func:`ember.nn.functional.pad` with the stored padding
(F.pad order: last dimension first, ``(left, right)``, then ``(top, bottom)``, then
``(front, back)``). An int ``padding`` pads every side by that amount.
"""

from __future__ import annotations

from .. import functional as F
from ._utils import _ntuple, _pair
from .module import Module

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]

_quadruple = _ntuple(4, "_quadruple")
_sextuple = _ntuple(6, "_sextuple")


class _CircularPadNd(Module):
    __constants__ = ["padding"]

    def _check_input_dim(self, input):
        raise NotImplementedError

    def forward(self, input):
        self._check_input_dim(input)
        return F.pad(input, self.padding, "circular")

    def extra_repr(self):
        return f"{self.padding}"


class CircularPad1d(_CircularPadNd):
    """Pad the last dimension circularly: the start of the input pads the end and vice versa.

    Args:
        padding (int or tuple): ``(left, right)``, or one int for both. Negative values crop.

    Shape: ``(C, W)`` or ``(N, C, W)`` -> ``W_out = W + left + right``.

    Raises:
        ValueError: the input is not 2-D or 3-D.

    Example:
        >>> import ember
        >>> ember.nn.CircularPad1d(1)(ember.arange(3.0).reshape(1, 1, 3))
        tensor([[[2., 0., 1., 2., 0.]]])
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _pair(padding)

    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class CircularPad2d(_CircularPadNd):
    """Pad the last two dimensions circularly.

    Args:
        padding (int or tuple): ``(left, right, top, bottom)``, or one int for all four.

    Shape: ``(C, H, W)`` or ``(N, C, H, W)``; ``H_out = H + top + bottom``, ``W_out = W + left + right``.

    Raises:
        ValueError: the input is not 3-D or 4-D.
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _quadruple(padding)

    def _check_input_dim(self, input):
        if input.dim() != 3 and input.dim() != 4:
            raise ValueError(f"expected 3D or 4D input (got {input.dim()}D input)")


class CircularPad3d(_CircularPadNd):
    """Pad the last three dimensions circularly.

    Args:
        padding (int or tuple): ``(left, right, top, bottom, front, back)``, or one int for all six.

    Shape: ``(C, D, H, W)`` or ``(N, C, D, H, W)``.

    Raises:
        ValueError: the input is not 4-D or 5-D.
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _sextuple(padding)

    def _check_input_dim(self, input):
        if input.dim() != 4 and input.dim() != 5:
            raise ValueError(f"expected 4D or 5D input (got {input.dim()}D input)")


class _ConstantPadNd(Module):
    __constants__ = ["padding", "value"]

    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dimension with the constant ``value``.

    Args:
        padding (int or tuple): ``(left, right)``, or one int for both. Negative values crop.
        value (float): the fill value.

    Shape: ``(C, W)`` or ``(N, C, W)`` -> ``W_out = W + left + right``.

    Example:
        >>> import ember
        >>> ember.nn.ConstantPad1d((1, 2), 3.5)(ember.ones(1, 2))
        tensor([[3.5000, 1.0000, 1.0000, 3.5000, 3.5000]])
    """

    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _pair(padding)


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dimensions with the constant ``value``.

    Args:
        padding (int or tuple): ``(left, right, top, bottom)``, or one int for all four.
        value (float): the fill value.
    """

    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _quadruple(padding)


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dimensions with the constant ``value``.

    Args:
        padding (int or tuple): ``(left, right, top, bottom, front, back)``, or one int for all six.
        value (float): the fill value.
    """

    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _sextuple(padding)


class _ReflectionPadNd(Module):
    __constants__ = ["padding"]

    def forward(self, input):
        return F.pad(input, self.padding, "reflect")

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_ReflectionPadNd):
    """Pad the last dimension with the reflection of the input (the edge value is not repeated).

    Args:
        padding (int or tuple): ``(left, right)``, or one int for both; each must be smaller than
            the padded dimension.

    Shape: ``(C, W)`` or ``(N, C, W)`` -> ``W_out = W + left + right``.

    Example:
        >>> import ember
        >>> ember.nn.ReflectionPad1d(2)(ember.arange(4.0).reshape(1, 1, 4))
        tensor([[[2., 1., 0., 1., 2., 3., 2., 1.]]])
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _pair(padding)


class ReflectionPad2d(_ReflectionPadNd):
    """Pad the last two dimensions by reflection.

    Args:
        padding (int or tuple): ``(left, right, top, bottom)``, or one int for all four.
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _quadruple(padding)


class ReflectionPad3d(_ReflectionPadNd):
    """Pad the last three dimensions by reflection.

    Args:
        padding (int or tuple): ``(left, right, top, bottom, front, back)``, or one int for all six.
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _sextuple(padding)


class _ReplicationPadNd(Module):
    __constants__ = ["padding"]

    def forward(self, input):
        return F.pad(input, self.padding, "replicate")

    def extra_repr(self):
        return f"{self.padding}"


class ReplicationPad1d(_ReplicationPadNd):
    """Pad the last dimension by repeating the edge values.

    Args:
        padding (int or tuple): ``(left, right)``, or one int for both.

    Shape: ``(C, W)`` or ``(N, C, W)`` -> ``W_out = W + left + right``.

    Example:
        >>> import ember
        >>> ember.nn.ReplicationPad1d((2, 1))(ember.arange(3.0).reshape(1, 1, 3))
        tensor([[[0., 0., 0., 1., 2., 2.]]])
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _pair(padding)


class ReplicationPad2d(_ReplicationPadNd):
    """Pad the last two dimensions by repeating the edge values.

    Args:
        padding (int or tuple): ``(left, right, top, bottom)``, or one int for all four.
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _quadruple(padding)


class ReplicationPad3d(_ReplicationPadNd):
    """Pad the last three dimensions by repeating the edge values.

    Args:
        padding (int or tuple): ``(left, right, top, bottom, front, back)``, or one int for all six.
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = _sextuple(padding)


class ZeroPad1d(ConstantPad1d):
    """Pad the last dimension with zeros; ``padding`` as :class:`ConstantPad1d`.

    Example:
        >>> import ember
        >>> ember.nn.ZeroPad1d((1, 0))(ember.ones(1, 2))
        tensor([[0., 1., 1.]])
    """

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dimensions with zeros; ``padding`` ``(left, right, top, bottom)`` or an int."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dimensions with zeros; ``padding`` a 6-tuple or an int."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"
