"""``ember.nn.init``: in-place parameter initialisers, as ``torch.nn.init``.

Every initialiser fills its tensor in place under :class:`ember.no_grad` (initialisation is not
part of the autograd graph) and returns it. The random ones take ``generator=`` (an
:class:`ember.Generator`) and otherwise draw from ember's default generator, so
``ember.manual_seed`` makes them reproducible. Distributions, gains and fan computations follow
``torch.nn.init`` exactly, so a layer initialised here has the same distribution of weights as the
same layer in PyTorch (not the same values: the random streams differ).

Example:
    >>> import ember
    >>> w = ember.empty(3, 5)
    >>> _ = ember.nn.init.kaiming_uniform_(w, a=5 ** 0.5)
    >>> bool((w.abs() <= 1 / 5 ** 0.5).all())
    True
"""

from __future__ import annotations

import math
import warnings

import numpy as np

import ember

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
    # Deprecated aliases, as in PyTorch.
    "uniform",
    "normal",
    "constant",
    "eye",
    "dirac",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "sparse",
]

_LINEAR_FNS = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
)


def calculate_gain(nonlinearity, param=None):
    """Return the recommended gain for a nonlinearity (the ``nn.functional`` name).

    ======================= ==================================================
    nonlinearity            gain
    ======================= ==================================================
    linear / conv* / sigmoid 1
    tanh                    5/3
    relu                    sqrt(2)
    leaky_relu              sqrt(2 / (1 + negative_slope**2)), slope ``param`` (default 0.01)
    selu                    3/4
    ======================= ==================================================

    Args:
        nonlinearity (str): the non-linear function's name.
        param (float, optional): the negative slope of ``leaky_relu``.

    Returns:
        float: the gain.

    Raises:
        ValueError: unknown ``nonlinearity``, or a ``param`` that is not a number.

    Example:
        >>> round(calculate_gain("leaky_relu", 0.2), 4)
        1.3868
    """
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif (not isinstance(param, bool) and isinstance(param, int)) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4  # found empirically, https://github.com/pytorch/pytorch/pull/50664
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill ``tensor`` with values drawn from U(a, b).

    Args:
        tensor (Tensor): any shape, floating point.
        a (float): lower bound. b (float): upper bound.
        generator (ember.Generator, optional): the random stream.

    Returns:
        Tensor: ``tensor``.
    """
    with ember.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill ``tensor`` with values drawn from N(mean, std**2).

    Args:
        tensor (Tensor): any shape, floating point.
        mean (float): the mean. std (float): the standard deviation.
        generator (ember.Generator, optional): the random stream.

    Returns:
        Tensor: ``tensor``.
    """
    with ember.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill ``tensor`` with values from N(mean, std**2) truncated to [a, b].

    Sampled by inverse transform: u ~ U(cdf(a), cdf(b)) mapped through the normal quantile
    function (``erfinv``), then clamped to [a, b] against rounding. Works best when
    ``a <= mean <= b``; warns when ``mean`` is more than 2 std outside [a, b].

    Args:
        tensor (Tensor): any shape, floating point.
        mean (float), std (float): of the untruncated normal.
        a (float), b (float): the cut-offs.
        generator (ember.Generator, optional): the random stream.

    Returns:
        Tensor: ``tensor``.
    """
    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )
    with ember.no_grad():
        low = _norm_cdf((a - mean) / std)
        high = _norm_cdf((b - mean) / std)
        tensor.uniform_(2 * low - 1, 2 * high - 1, generator=generator)
        tensor.erfinv_()
        tensor.mul_(std * math.sqrt(2.0))
        tensor.add_(mean)
        tensor.clamp_(min=a, max=b)
        return tensor


def constant_(tensor, val):
    """Fill ``tensor`` with ``val``. Returns ``tensor``."""
    with ember.no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    """Fill ``tensor`` with 1. Returns ``tensor``."""
    with ember.no_grad():
        return tensor.fill_(1.0)


def zeros_(tensor):
    """Fill ``tensor`` with 0. Returns ``tensor``."""
    with ember.no_grad():
        return tensor.zero_()


def eye_(tensor):
    """Fill the 2-D ``tensor`` with the identity matrix (ones on the main diagonal).

    Raises:
        ValueError: ``tensor`` is not 2-D.
    """
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with ember.no_grad():
        rows, cols = tensor.shape
        tensor.copy_(ember.eye(rows, cols, dtype=tensor.dtype, device=tensor.device))
    return tensor


def dirac_(tensor, groups=1):
    """Fill the {3, 4, 5}-D convolution weight ``tensor`` with the Dirac delta.

    The convolution then preserves as many input channels as possible (per group when
    ``groups > 1``): out channel ``g * (C_out // groups) + d`` copies input channel ``d`` of its group.

    Raises:
        ValueError: ``tensor`` is not 3-, 4- or 5-D, or dim 0 is not divisible by ``groups``.
    """
    dimensions = tensor.dim()
    if dimensions not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    copied = min(per_group, sizes[1])  # channels an identity can carry through each group
    centre = tuple(s // 2 for s in sizes[2:])
    with ember.no_grad():
        tensor.zero_()
        for group in range(groups):
            for channel in range(copied):
                tensor[(group * per_group + channel, channel, *centre)] = 1
    return tensor


def _calculate_fan_in_and_fan_out(tensor):
    """``(fan_in, fan_out)`` of a weight laid out as ``(out, in, *kernel)``."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    # Each output (input) unit of a convolution sees a whole kernel window of every input (output) channel.
    window = math.prod(tensor.shape[2:])
    return tensor.shape[1] * window, tensor.shape[0] * window


def _fan(tensor, mode):
    """``fan_in`` or ``fan_out`` of ``tensor``, as ``mode`` (case-insensitive) names."""
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of {['fan_in', 'fan_out']}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _skip_empty(tensor):
    """Whether ``tensor`` has no elements (then the Kaiming initializers warn and do nothing)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).

    Reference: Glorot & Bengio, "Understanding the difficulty of training deep feedforward
    neural networks" (2010).

    Raises:
        ValueError: ``tensor`` has fewer than 2 dimensions.
    """
    fans = sum(_calculate_fan_in_and_fan_out(tensor))
    bound = math.sqrt(3.0) * (gain * math.sqrt(2.0 / float(fans)))  # sqrt(3) * std of xavier_normal_
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out)).

    Reference: Glorot & Bengio (2010).

    Raises:
        ValueError: ``tensor`` has fewer than 2 dimensions.
    """
    fans = sum(_calculate_fan_in_and_fan_out(tensor))
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fans)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan_mode).

    Args:
        tensor (Tensor): at least 2-D, laid out ``(out, in, *kernel)``.
        a (float): negative slope of the rectifier (only for ``'leaky_relu'``).
        mode (str): ``'fan_in'`` (default) or ``'fan_out'``.
        nonlinearity (str): ``nn.functional`` name, see :func:`calculate_gain`.
        generator (ember.Generator, optional): the random stream.

    Reference: He et al., "Delving deep into rectifiers" (2015).

    Raises:
        ValueError: fewer than 2 dimensions, unknown ``mode`` or ``nonlinearity``.
    """
    if _skip_empty(tensor):
        return tensor
    # U(-b, b) has standard deviation b / sqrt(3): b = sqrt(3) * (the std of kaiming_normal_).
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std**2) with std = gain / sqrt(fan_mode). Arguments as :func:`kaiming_uniform_`.

    Reference: He et al., "Delving deep into rectifiers" (2015).
    """
    if _skip_empty(tensor):
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """Fill ``tensor`` with a (semi-)orthogonal matrix, scaled by ``gain``.

    Trailing dimensions are flattened: the ``(rows, numel // rows)`` view has orthonormal rows
    (``rows <= cols``) or columns. A Gaussian matrix is QR-factorised (numpy, float64) and Q's
    columns are multiplied by ``sign(diag(R))`` so that Q is Haar-distributed.

    References: Saxe et al., "Exact solutions to the nonlinear dynamics of learning in deep
    linear neural networks" (2013); Mezzadri, "How to generate random matrices from the
    classical compact groups" (2007).

    Raises:
        ValueError: ``tensor`` has fewer than 2 dimensions.
    """
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with ember.no_grad():
        # The Gaussian draw happens where the tensor lives (its device's generator, as in PyTorch); the
        # small QR factorisation runs on the host, once per initialisation (.cpu() is a no-op on CPU).
        draw_on = tensor.device if generator is None else generator.device
        gaussian = ember.empty(rows, cols, device=draw_on).normal_(0, 1, generator=generator)
        flattened = gaussian.cpu().numpy().astype(np.float64)
        if rows < cols:
            flattened = flattened.T
        q, r = np.linalg.qr(flattened)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        q = np.ascontiguousarray(q * gain).reshape(tuple(tensor.shape))
        tensor.copy_(ember.from_numpy(q).to(dtype=tensor.dtype, device=tensor.device))
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill the 2-D ``tensor`` as a sparse matrix: N(0, std**2) values with
    ``ceil(sparsity * rows)`` zeros in each column at random rows.

    Reference: Martens, "Deep learning via Hessian-free optimization" (2010).

    Raises:
        ValueError: ``tensor`` is not 2-D.
    """
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros_per_column = math.ceil(sparsity * rows)
    # the row permutations are drawn where the values are (the tensor's device, or the generator's)
    draw_on = tensor.device if generator is None else generator.device
    with ember.no_grad():
        tensor.normal_(0, std, generator=generator)
        for column in range(cols):
            rows_to_zero = ember.randperm(rows, generator=generator, device=draw_on)[:zeros_per_column]
            tensor[rows_to_zero, column] = 0
    return tensor


def _deprecated_alias(initializer):
    """The old name without the trailing underscore: warns (FutureWarning), then calls ``initializer``."""
    current = initializer.__name__
    alias = current.rstrip("_")

    def call_with_warning(*args, **kwargs):
        warnings.warn(
            f"`nn.init.{alias}` is now deprecated in favor of `nn.init.{current}`.", FutureWarning, stacklevel=2
        )
        return initializer(*args, **kwargs)

    call_with_warning.__name__ = alias
    call_with_warning.__doc__ = f"{alias}(...): deprecated, use :func:`ember.nn.init.{current}`."
    return call_with_warning


# The pre-underscore names, kept (with a warning) because old code still calls them.
uniform = _deprecated_alias(uniform_)
normal = _deprecated_alias(normal_)
constant = _deprecated_alias(constant_)
eye = _deprecated_alias(eye_)
dirac = _deprecated_alias(dirac_)
xavier_uniform = _deprecated_alias(xavier_uniform_)
xavier_normal = _deprecated_alias(xavier_normal_)
kaiming_uniform = _deprecated_alias(kaiming_uniform_)
kaiming_normal = _deprecated_alias(kaiming_normal_)
orthogonal = _deprecated_alias(orthogonal_)
sparse = _deprecated_alias(sparse_)
