"""Linear layers: ``Identity``, ``Linear``, ``Bilinear``, as in ``torch.nn``."""

from __future__ import annotations

import math

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """A placeholder that returns its input unchanged; constructor arguments are ignored.

    Shape: input ``(*)``, output ``(*)`` (the same tensor).
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """Affine map ``y = x A^T + b``.

    Args:
        in_features (int): features of the input (its last dimension).
        out_features (int): features of the output.
        bias (bool): learn an additive bias. Default ``True``.
        device, dtype: of the parameters.

    Shape: input ``(*, in_features)``, output ``(*, out_features)``.

    Attributes:
        weight: ``(out_features, in_features)``, initialised U(-1/sqrt(in_features), 1/sqrt(in_features))
            (``kaiming_uniform_`` with ``a=sqrt(5)``, as PyTorch).
        bias: ``(out_features,)``, initialised U(-1/sqrt(in_features), 1/sqrt(in_features)).

    Example:
        >>> import ember
        >>> m = ember.nn.Linear(20, 30)
        >>> m(ember.randn(128, 20)).shape
        ember.Size([128, 30])
    """

    __constants__ = ["in_features", "out_features"]

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        placement = {"device": device, "dtype": dtype}
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty((out_features, in_features), **placement))
        if bias:
            self.bias = Parameter(ember.empty(out_features, **placement))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw ``weight`` and ``bias`` from PyTorch's default distributions."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """Bilinear map ``y = x1^T A x2 + b``.

    Args:
        in1_features (int), in2_features (int): sizes of the two inputs.
        out_features (int): size of the output.
        bias (bool): learn an additive bias. Default ``True``.

    Shape: inputs ``(*, in1_features)`` and ``(*, in2_features)``, output ``(*, out_features)``.

    Attributes:
        weight: ``(out_features, in1_features, in2_features)``; weight and bias are initialised
            U(-1/sqrt(in1_features), 1/sqrt(in1_features)).
    """

    __constants__ = ["in1_features", "in2_features", "out_features"]

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        placement = {"device": device, "dtype": dtype}
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty((out_features, in1_features, in2_features), **placement))
        if bias:
            self.bias = Parameter(ember.empty(out_features, **placement))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw ``weight`` and ``bias`` from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
