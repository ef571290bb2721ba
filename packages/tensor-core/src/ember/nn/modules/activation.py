"""Activation modules, one per ``ember.nn.functional`` activation, as in ``torch.nn``.

Each module stores its hyper-parameters and calls the functional op in ``forward``; the ones with
``inplace`` in PyTorch take it here too. Shape: input ``(*)``, output the same shape (``GLU``
halves ``dim``).
"""

from __future__ import annotations

import ember

from .. import functional as F
from ..parameter import Parameter
from .module import Module

__all__ = [
    "Threshold",
    "ReLU",
    "RReLU",
    "Hardtanh",
    "ReLU6",
    "Sigmoid",
    "Hardsigmoid",
    "Tanh",
    "SiLU",
    "Mish",
    "Hardswish",
    "ELU",
    "CELU",
    "SELU",
    "GLU",
    "GELU",
    "Hardshrink",
    "LeakyReLU",
    "LogSigmoid",
    "Softplus",
    "Softshrink",
    "PReLU",
    "Softsign",
    "Tanhshrink",
    "Softmin",
    "Softmax",
    "Softmax2d",
    "LogSoftmax",
]


def _inplace_str(inplace, leading=""):
    return f"{leading}inplace=True" if inplace else ""


class _InplaceActivation(Module):
    """An activation whose only argument is ``inplace``: ``forward`` calls ``_function(input, inplace)``."""

    __constants__ = ["inplace"]
    _function = None  # set by each subclass (a staticmethod of ember.nn.functional)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return self._function(input, self.inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace)


class Threshold(Module):
    """``y = x if x > threshold else value``.

    Args:
        threshold (float): the threshold. value (float): the replacement.
        inplace (bool): overwrite the input. Default ``False``.
    """

    __constants__ = ["threshold", "value", "inplace"]

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace_str(self.inplace, ', ')}"


class ReLU(_InplaceActivation):
    """``y = max(0, x)``. Args: inplace (bool): overwrite the input. Default ``False``.

    Example:
        >>> import ember
        >>> ember.nn.ReLU()(ember.tensor([-1.0, 2.0]))
        tensor([0., 2.])
    """

    _function = staticmethod(F.relu)


class RReLU(Module):
    """Randomized leaky ReLU: negative slope ~ U(lower, upper) in training, ``(lower + upper) / 2``
    in eval.

    Reference: Xu et al., "Empirical Evaluation of Rectified Activations in Convolutional Network"
    (2015).
    """

    __constants__ = ["lower", "upper", "inplace"]

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace_str(self.inplace, ', ')}"


class Hardtanh(Module):
    """``y = clamp(x, min_val, max_val)``.

    Args:
        min_val (float): default -1. max_val (float): default 1. inplace (bool): default ``False``.
        min_value, max_value: deprecated names of ``min_val``/``max_val``.

    Raises:
        ValueError: ``max_val <= min_val``.
    """

    __constants__ = ["min_val", "max_val", "inplace"]

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        if min_value is not None:
            min_val = min_value
        if max_value is not None:
            max_val = max_value
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise ValueError(f"max_val ({self.max_val}) must be greater than min_val ({self.min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_str(self.inplace, ', ')}"


class ReLU6(Hardtanh):
    """``y = min(max(0, x), 6)``. Args: inplace (bool)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace)


class Sigmoid(Module):
    """``y = 1 / (1 + exp(-x))``."""

    def forward(self, input):
        return ember.sigmoid(input)


class Hardsigmoid(_InplaceActivation):
    """``y = clamp(x / 6 + 1 / 2, 0, 1)``. Args: inplace (bool)."""

    _function = staticmethod(F.hardsigmoid)

    def extra_repr(self):
        return ""


class Tanh(Module):
    """``y = tanh(x)``."""

    def forward(self, input):
        return ember.tanh(input)


class SiLU(_InplaceActivation):
    """``y = x * sigmoid(x)`` (swish). Args: inplace (bool).

    Reference: Elfwing et al., "Sigmoid-Weighted Linear Units" (2017).
    """

    _function = staticmethod(F.silu)


class Mish(_InplaceActivation):
    """``y = x * tanh(softplus(x))``. Args: inplace (bool).

    Reference: Misra, "Mish: A Self Regularized Non-Monotonic Neural Activation Function" (2019).
    """

    _function = staticmethod(F.mish)


class Hardswish(_InplaceActivation):
    """``y = x * relu6(x + 3) / 6``. Args: inplace (bool).

    Reference: Howard et al., "Searching for MobileNetV3" (2019).
    """

    _function = staticmethod(F.hardswish)

    def extra_repr(self):
        return ""


class ELU(Module):
    """``y = x if x > 0 else alpha * (exp(x) - 1)``. Args: alpha (float), inplace (bool).

    Reference: Clevert et al., "Fast and Accurate Deep Network Learning by Exponential Linear
    Units" (2015).
    """

    __constants__ = ["alpha", "inplace"]

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_str(self.inplace, ', ')}"


class CELU(Module):
    """``y = max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``. Args: alpha (float), inplace (bool).

    Reference: Barron, "Continuously Differentiable Exponential Linear Units" (2017).
    """

    __constants__ = ["alpha", "inplace"]

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_str(self.inplace, ', ')}"


class SELU(_InplaceActivation):
    """``y = scale * elu(x, alpha)`` with the fixed constants of Klambauer et al.,
    "Self-Normalizing Neural Networks" (2017). Args: inplace (bool)."""

    _function = staticmethod(F.selu)


class GLU(Module):
    """Gated linear unit: ``a * sigmoid(b)`` with ``a, b`` the halves of ``input`` along ``dim``.

    Args: dim (int): default -1. Shape: ``(*, 2N, *)`` to ``(*, N, *)``.

    Reference: Dauphin et al., "Language Modeling with Gated Convolutional Networks" (2016).
    """

    __constants__ = ["dim"]

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class GELU(Module):
    """``y = x * Phi(x)``, or its tanh approximation with ``approximate='tanh'``.

    Args: approximate (str): ``'none'`` (default) or ``'tanh'``.

    Reference: Hendrycks & Gimpel, "Gaussian Error Linear Units (GELUs)" (2016).
    """

    __constants__ = ["approximate"]

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Hardshrink(Module):
    """``y = x if |x| > lambd else 0``. Args: lambd (float): default 0.5."""

    __constants__ = ["lambd"]

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class LeakyReLU(Module):
    """``y = x if x >= 0 else negative_slope * x``. Args: negative_slope (float): default 0.01,
    inplace (bool)."""

    __constants__ = ["inplace", "negative_slope"]

    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{_inplace_str(self.inplace, ', ')}"


class LogSigmoid(Module):
    """``y = log(sigmoid(x))``, computed stably."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softplus(Module):
    """``y = log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``.

    Args: beta (float): default 1. threshold (float): default 20.
    """

    __constants__ = ["beta", "threshold"]

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softshrink(Module):
    """``y = x - lambd if x > lambd; x + lambd if x < -lambd; else 0``. Args: lambd (float)."""

    __constants__ = ["lambd"]

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class PReLU(Module):
    """``y = x if x >= 0 else a * x`` with a learnable slope ``a`` (one, or one per channel).

    Args:
        num_parameters (int): 1 or the number of channels (dim 1 of the input). Default 1.
        init (float): initial slope. Default 0.25.

    Attributes:
        weight: ``(num_parameters,)``, filled with ``init``.

    Reference: He et al., "Delving Deep into Rectifiers" (2015).
    """

    __constants__ = ["num_parameters"]

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        placement = {"device": device, "dtype": dtype}
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = Parameter(ember.empty(num_parameters, **placement))
        self.reset_parameters()

    def reset_parameters(self):
        """Fill ``weight`` with ``init``."""
        with ember.no_grad():
            self.weight.fill_(self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softsign(Module):
    """``y = x / (1 + |x|)``."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """``y = x - tanh(x)``."""

    def forward(self, input):
        return F.tanhshrink(input)


class Softmin(Module):
    """``softmax(-x)`` along ``dim``. Args: dim (int)."""

    __constants__ = ["dim"]

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(Module):
    """``exp(x_i) / sum_j exp(x_j)`` along ``dim`` (rows sum to 1). Args: dim (int).

    Example:
        >>> import ember
        >>> ember.nn.Softmax(dim=0)(ember.tensor([0.0, 0.0]))
        tensor([0.5000, 0.5000])
    """

    __constants__ = ["dim"]

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over channels at each spatial location of ``(N, C, H, W)`` or ``(C, H, W)``.

    Raises:
        ValueError: the input is not 3-D or 4-D.
    """

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3, _stacklevel=5)


class LogSoftmax(Module):
    """``log(softmax(x))`` along ``dim``, computed stably. Args: dim (int)."""

    __constants__ = ["dim"]

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"
