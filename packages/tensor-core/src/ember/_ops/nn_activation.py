"""ember.nn.functional: the elementwise activations (``relu``, ``gelu``, ``elu``, ...) and ``glu``.

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from . import _cpu_pointwise
from ._nn_common import (
    _C_FLOATS,
    _E,
    _F32,
    _NN,
    _NN_ONLY,
    _NN_RANDOM,
    _check_floating,
    _check_tensor,
    _composite,
    _compute,
    _contiguous,
    _finish,
    _float_result,
    _int_arg,
    _logsigmoid_np,
    _logsigmoid_values,
    _not_implemented,
    _number,
)
from ._pointwise_helpers import _torch_name, make_inplace
from ._shapes import wrap_dim
from .random import _default_noise

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["relu", "relu_", "hardshrink", "prelu"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


_C_SCALAR_NAMES = {
    "bool": "bool", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double",
}


def _check_scalar_fits(value, dtype):
    """Raise as PyTorch's checked scalar conversion does when ``value`` overflows ``dtype``.

    Integers may wrap into unsigned types from the negative side (-255 fits uint8, as two's
    complement), floats must lie within the type's range.

    Raises:
        RuntimeError: "value cannot be converted to type ... without overflow".
    """
    if dtype.category == D.INTEGRAL:
        info = D.iinfo(dtype)
        if isinstance(value, float):
            bad = not info.min <= value <= info.max
        elif not dtype.is_signed:
            bad = value > info.max or (value < 0 and -value > info.max)
        else:
            bad = not info.min <= value <= info.max
    elif dtype.category == D.FLOATING and dtype is not D.float64:
        bad = math.isfinite(value) and abs(value) > D.finfo(dtype).max
    else:
        bad = False
    if bad:
        raise RuntimeError(f"value cannot be converted to type {_C_SCALAR_NAMES[dtype.name]} without overflow")


def _scalar_as(value, np_dtype):
    """A Python number converted to ``np_dtype`` as a C cast would (integers truncate, then wrap)."""
    if np_dtype.kind in "iu":
        return np.array(int(value)).astype(np_dtype)[()]
    if np_dtype.kind == "b":
        return np.bool_(value)
    return np.array(value).astype(np_dtype)[()]


def _activation_meta(op, input, kernel=None, *, ints=False, complex_ok=False, result=None):
    """Common checks of an activation: ``input`` is a tensor of a supported dtype.

    Args:
        kernel: the name PyTorch's error gives for an unsupported dtype.
        ints: integer dtypes are supported (bool never is, unless handled before).
        complex_ok: complex dtypes are supported.
        result: the output dtype (default: ``input``'s).
    """
    _check_tensor(op, "input", input)
    category = input.dtype.category
    if category == D.COMPLEX and not complex_ok or category < D.FLOATING and not ints:
        raise _not_implemented(kernel or f"{op}_cpu", input.dtype)
    return MetaArray(input._data.shape, (result or input.dtype).numpy_dtype)


def _clamp_meta(op, input):
    """Checks of the clamp-like activations (relu, relu6, hardtanh): integers yes, bool and complex no."""
    _check_tensor(op, "input", input)
    if input.dtype is D.bool:
        if op == "relu":
            raise RuntimeError("Boolean inputs not supported for relu")
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if input.dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    return MetaArray(input._data.shape, input._data.dtype)


def _inplace_result(op_name, input, result, inplace):
    """Decompositions of ops with an ``inplace`` flag: write ``result`` into ``input`` when asked."""
    if inplace:
        return _E.copy_(input, result)
    return result


# -- relu, relu6, hardtanh ---------------------------------------------------------------------------------


def _relu_meta(input, inplace=False):
    """Rectified linear unit: ``max(input, 0)`` elementwise.

    Args:
        input (Tensor): any real dtype but bool.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: for a bool tensor.
        NotImplementedError: for a complex tensor.

    Example:
        >>> import ember
        >>> ember.relu(ember.tensor([-1.0, 0.5, 2.0]))
        tensor([0.0000, 0.5000, 2.0000])
    """
    return _clamp_meta("relu", input)


_relu_into = _cpu_pointwise.unary_into("relu")  # large arrays in C++ (ember._ops._cpu_pointwise)


def _relu_cpu(input, inplace=False):
    if inplace and _relu_into(input._data, input):
        input._bump_version()
        return input
    value = None if inplace else _cpu_pointwise.unary_array("relu", input._data)
    if value is None:
        value = np.maximum(input._data, _scalar_as(0, input._data.dtype))
    return _finish(input, value, inplace)


def _relu_decomp(input, inplace=False):
    if inplace:
        return _E.relu_(input)
    return _E.clamp(input, min=0)


relu = _composite("relu", _relu_meta, cpu=_relu_cpu, decomposition=_relu_decomp, tags=_NN)
relu.cpu_into = _relu_into
make_inplace(relu)


def _relu6_meta(input, inplace=False):
    """``min(max(input, 0), 6)`` elementwise (``hardtanh(input, 0, 6)``).

    Args:
        input (Tensor): any real dtype but bool.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: for a bool tensor.
        NotImplementedError: for a complex tensor.

    Example:
        >>> import ember
        >>> ember.nn.functional.relu6(ember.tensor([-1.0, 3.0, 8.0]))
        tensor([0., 3., 6.])
    """
    return _clamp_meta("relu6", input)


def _relu6_cpu(input, inplace=False):
    dt = input._data.dtype
    return _finish(input, np.clip(input._data, _scalar_as(0, dt), _scalar_as(6, dt)), inplace)


def _relu6_decomp(input, inplace=False):
    return _inplace_result("relu6", input, _E.clamp(input, min=0, max=6), inplace)


relu6 = _composite("relu6", _relu6_meta, cpu=_relu6_cpu, decomposition=_relu6_decomp, tags=_NN_ONLY)


def _hardtanh_meta(input, min_val=-1.0, max_val=1.0, inplace=False):
    """Clamp ``input`` to ``[min_val, max_val]``.

    For integer inputs the limits are converted to the dtype first (truncating).

    Args:
        input (Tensor): any real dtype but bool.
        min_val (float): the lower limit.
        max_val (float): the upper limit.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        ValueError: if ``min_val > max_val``.
        RuntimeError: for a bool tensor, or a uint8 tensor with a negative limit.
        NotImplementedError: for a complex tensor.

    Example:
        >>> import ember
        >>> ember.nn.functional.hardtanh(ember.tensor([-3.0, 0.5, 3.0]))
        tensor([-1.0000,  0.5000,  1.0000])
    """
    min_val = _number("hardtanh", "min_val", min_val, 2)
    max_val = _number("hardtanh", "max_val", max_val, 3)
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    meta = _clamp_meta("hardtanh", input)
    if input.dtype is D.uint8 and (min_val < 0 or max_val < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    return meta


def _hardtanh_cpu(input, min_val=-1.0, max_val=1.0, inplace=False):
    dt = input._data.dtype
    lo, hi = _scalar_as(min_val, dt), _scalar_as(max_val, dt)
    return _finish(input, np.clip(input._data, lo, hi), inplace)


def _hardtanh_decomp(input, min_val=-1.0, max_val=1.0, inplace=False):
    if inplace:
        return _E.hardtanh_(input, min_val, max_val)
    if input.dtype.category < D.FLOATING:
        min_val, max_val = int(min_val), int(max_val)
    return _E.clamp(input, min=min_val, max=max_val)


hardtanh = _composite(
    "hardtanh", _hardtanh_meta, cpu=_hardtanh_cpu, decomposition=_hardtanh_decomp, tags=_NN_ONLY
)
make_inplace(hardtanh)


# -- leaky_relu, prelu, rrelu ------------------------------------------------------------------------------


def _leaky_relu_meta(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, ``negative_slope * input`` elsewhere.

    Args:
        input (Tensor): floating point.
        negative_slope (float): the slope for negative inputs.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for integer, bool and complex tensors.

    Example:
        >>> import ember
        >>> ember.nn.functional.leaky_relu(ember.tensor([-2.0, 3.0]), 0.1)
        tensor([-0.2000,  3.0000])
    """
    _number("leaky_relu", "negative_slope", negative_slope, 2)
    return _activation_meta("leaky_relu", input)


def _leaky(x, slope):
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, x * np.asarray(slope, x.dtype))


def _leaky_relu_cpu(input, negative_slope=0.01, inplace=False):
    slope = _number("leaky_relu", "negative_slope", negative_slope, 2)
    return _finish(input, _leaky(_compute(input._data), slope), inplace)


def _leaky_relu_decomp(input, negative_slope=0.01, inplace=False):
    if inplace:
        return _E.leaky_relu_(input, negative_slope)
    return _E.where(input > 0, input, input * negative_slope)


leaky_relu = _composite(
    "leaky_relu", _leaky_relu_meta, cpu=_leaky_relu_cpu, decomposition=_leaky_relu_decomp,
    tags=_NN_ONLY,
)
make_inplace(leaky_relu)


def _prelu_meta(input, weight):
    """Leaky ReLU with a learned slope per channel: ``max(0, x) + weight * min(0, x)``.

    Args:
        input (Tensor): floating point, channels in dim 1 (a 0-dim or 1-D input has one channel).
        weight (Tensor): the slopes: one element, or one per channel (0-dim or 1-D), of ``input``'s dtype.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: if ``weight`` has more than one dim, a number of elements that is neither
            1 nor the channel count, or another dtype.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.prelu(ember.tensor([[-1.0, -1.0], [2.0, 2.0]]), ember.tensor([0.1, 0.5]))
        tensor([[-0.1000, -0.5000],
                [ 2.0000,  2.0000]])
    """
    _check_tensor("prelu", "input", input)
    _check_tensor("prelu", "weight", weight, 2)
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    count = weight.numel()
    if count != 1 and count != channels:
        raise RuntimeError(
            "Mismatch of parameter numbers and input channel size. Found parameter numbers = "
            f"{count} and channel size = {channels}."
        )
    if input.dtype is not weight.dtype:
        raise RuntimeError(
            f"prelu: Type promoting not supported. Got {_torch_name(input.dtype)} and {_torch_name(weight.dtype)}"
        )
    _check_floating("prelu_cpu", input)
    return MetaArray(input._data.shape, input._data.dtype)


def _channel_view(w, ndim):
    """A per-channel numpy array ``w`` shaped to broadcast against dim 1 of an ``ndim``-dim array."""
    if ndim >= 2 and w.size > 1:
        return w.reshape((-1,) + (1,) * (ndim - 2))
    return w.reshape(())


def _prelu_cpu(input, weight):
    x = _compute(input._data)
    w = _channel_view(_compute(weight._data), x.ndim)
    return _finish(input, np.where(x > 0, x, x * w))


def _prelu_decomp(input, weight):
    if input.ndim >= 2 and weight.numel() > 1:
        weight = weight.reshape((-1,) + (1,) * (input.ndim - 2))
    else:
        weight = weight.reshape(())
    return _E.where(input > 0, input, input * weight)


prelu = _composite("prelu", _prelu_meta, cpu=_prelu_cpu, decomposition=_prelu_decomp, tags=_NN)


def _rrelu_meta(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU (Xu et al., "Empirical Evaluation of Rectified Activations", 2015).

    In training every non-positive element is multiplied by a slope drawn
    uniformly from ``[lower, upper]`` (from :data:`ember.default_generator`);
    otherwise the slope is the fixed ``(lower + upper) / 2``.

    Args:
        input (Tensor): floating point.
        lower (float): lower bound of the slope.
        upper (float): upper bound of the slope.
        training (bool): draw random slopes.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: if ``lower > upper``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.rrelu(ember.tensor([-1.0, 2.0]), 0.1, 0.3)
        tensor([-0.2000,  2.0000])
    """
    lower = _number("rrelu", "lower", lower, 2)
    upper = _number("rrelu", "upper", upper, 3)
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    return _activation_meta("rrelu", input, "rrelu_with_noise_out_cpu" if training else "leaky_relu_cpu")


def _rrelu_cpu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    x = _compute(input._data)
    if not training:
        return _finish(input, _leaky(x, (lower + upper) / 2), inplace)
    slopes = lower + (upper - lower) * _default_noise(x).random(x.shape)
    with np.errstate(all="ignore"):
        return _finish(input, np.where(x > 0, x, x * slopes.astype(x.dtype)), inplace)


def _rrelu_decomp(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    if not training:
        slope = (lower + upper) / 2
        return _E.leaky_relu_(input, slope) if inplace else _E.leaky_relu(input, slope)
    u = _E.rand_like(input, dtype=D.float64)
    slopes = (u * (upper - lower) + lower).to(input.dtype)
    return _inplace_result("rrelu", input, _E.where(input > 0, input, input * slopes), inplace)


rrelu = _composite(
    "rrelu", _rrelu_meta, cpu=_rrelu_cpu, decomposition=_rrelu_decomp, tags=_NN_RANDOM
)
make_inplace(rrelu)


# -- exponential-linear family -------------------------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _elu_np(x, alpha, scale=1.0, input_scale=1.0):
    with np.errstate(all="ignore"):
        neg = np.expm1(x * np.asarray(input_scale, x.dtype)) * np.asarray(alpha * scale, x.dtype)
        pos = x * np.asarray(scale, x.dtype) if scale != 1.0 else x
        return np.where(x > 0, pos, neg)


def _elu_decomp_values(input, alpha, scale=1.0, input_scale=1.0):
    neg = _E.expm1(input * input_scale) * (alpha * scale)
    return _E.where(input > 0, input * scale if scale != 1.0 else input, neg)


def _elu_meta(input, alpha=1.0, inplace=False):
    """Exponential linear unit (Clevert et al., 2015): ``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``.

    Args:
        input (Tensor): floating point.
        alpha (float): the saturation value for negative inputs.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.elu(ember.tensor([-1.0, 2.0]))
        tensor([-0.6321,  2.0000])
    """
    _number("elu", "alpha", alpha, 2)
    return _activation_meta("elu", input)


def _elu_cpu(input, alpha=1.0, inplace=False):
    return _finish(input, _elu_np(_compute(input._data), alpha), inplace)


def _elu_decomp(input, alpha=1.0, inplace=False):
    if inplace:
        return _E.elu_(input, alpha)
    return _elu_decomp_values(input, alpha)


elu = _composite("elu", _elu_meta, cpu=_elu_cpu, decomposition=_elu_decomp, tags=_NN_ONLY)
make_inplace(elu)


def _selu_meta(input, inplace=False):
    """Scaled ELU (Klambauer et al., "Self-Normalizing Neural Networks", 2017).

    ``scale * (x if x > 0 else alpha * (exp(x) - 1))`` with ``alpha = 1.6732632423543772`` and
    ``scale = 1.0507009873554805``.

    Args:
        input (Tensor): floating point.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.selu(ember.tensor([-1.0, 1.0]))
        tensor([-1.1113,  1.0507])
    """
    return _activation_meta("selu", input, "elu_cpu")


def _selu_cpu(input, inplace=False):
    return _finish(input, _elu_np(_compute(input._data), _SELU_ALPHA, _SELU_SCALE), inplace)


def _selu_decomp(input, inplace=False):
    if inplace:
        return _E.selu_(input)
    return _elu_decomp_values(input, _SELU_ALPHA, _SELU_SCALE)


selu = _composite("selu", _selu_meta, cpu=_selu_cpu, decomposition=_selu_decomp, tags=_NN)
make_inplace(selu)


def _celu_meta(input, alpha=1.0, inplace=False):
    """Continuously differentiable ELU (Barron, 2017): ``x`` if ``x > 0`` else ``alpha * (exp(x / alpha) - 1)``.

    Args:
        input (Tensor): floating point.
        alpha (float): nonzero saturation value.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: if ``alpha == 0``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.celu(ember.tensor([-1.0, 1.0]), alpha=2.0)
        tensor([-0.7869,  1.0000])
    """
    alpha = _number("celu", "alpha", alpha, 2)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _activation_meta("celu", input, "elu_cpu")


def _celu_cpu(input, alpha=1.0, inplace=False):
    return _finish(input, _elu_np(_compute(input._data), alpha, 1.0, 1.0 / alpha), inplace)


def _celu_decomp(input, alpha=1.0, inplace=False):
    if inplace:
        return _E.celu_(input, alpha)
    return _elu_decomp_values(input, alpha, 1.0, 1.0 / alpha)


celu = _composite("celu", _celu_meta, cpu=_celu_cpu, decomposition=_celu_decomp, tags=_NN)
make_inplace(celu)


# -- smooth gates: gelu, silu, mish, softplus, logsigmoid ---------------------------------------------------


def _gelu_meta(input, approximate="none"):
    """Gaussian error linear unit (Hendrycks and Gimpel, 2016): ``x * Phi(x)``.

    ``Phi`` is the standard normal CDF, ``0.5 * (1 + erf(x / sqrt(2)))``; with
    ``approximate='tanh'`` it is ``0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.

    Args:
        input (Tensor): floating point.
        approximate (str): ``'none'`` or ``'tanh'``.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: for another ``approximate``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.gelu(ember.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.1587,  0.0000,  0.8413])
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _activation_meta("gelu", input, "GeluKernelImpl")


_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# Chebyshev fit of erfc (Press et al., "Numerical Recipes", 3rd ed., section 6.2.2): fractional error < 1.2e-7,
# i.e. float32 precision, in ~20 vectorised passes (scipy's erf is a scalar loop, ~25x slower on float32).
_ERFC_COEFFS = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
                -0.82215223, 0.17087277)


def _normal_cdf_f32(x):
    """``Phi(x) = 0.5 * erfc(-x / sqrt(2))`` for a float32 numpy array, accurate in relative terms in the tails."""
    if x.ndim == 0:
        return _normal_cdf_f32(x.reshape(1)).reshape(())
    dt = x.dtype
    z = np.abs(x)
    z *= np.asarray(_SQRT_HALF, dt)
    t = np.multiply(z, np.asarray(0.5, dt))
    t += 1
    np.reciprocal(t, out=t)
    poly = np.multiply(t, np.asarray(_ERFC_COEFFS[-1], dt))
    for c in _ERFC_COEFFS[-2:0:-1]:
        poly += np.asarray(c, dt)
        poly *= t
    poly += np.asarray(_ERFC_COEFFS[0], dt)
    z *= z
    poly -= z
    np.exp(poly, out=poly)
    poly *= t  # erfc(|x| / sqrt(2))
    poly *= np.asarray(0.5, dt)  # Phi(-|x|)
    # Phi(x) = Phi(-|x|) where x <= 0, 1 - Phi(-|x|) where x > 0, blended arithmetically (a masked
    # numpy loop mispredicts its branch on mixed signs and runs ~10x slower); few temporaries, as
    # every fresh array costs page faults
    np.multiply(poly, np.asarray(-2, dt), out=z)
    z += 1
    np.multiply(z, x > 0, out=z)
    poly += z
    return poly


def _gelu_cpu(input, approximate="none"):
    from scipy.special import ndtr

    x = _compute(input._data)
    dt = x.dtype
    if dt in _C_FLOATS:
        return _finish(input, _C.gelu(_contiguous(x), approximate == "tanh"))
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            inner = np.asarray(x * x)
            inner *= np.asarray(0.044715, dt)
            inner += 1
            inner *= x
            inner *= np.asarray(_SQRT_2_OVER_PI, dt)
            cdf = np.tanh(inner, out=inner)
            cdf += 1
            cdf *= np.asarray(0.5, dt)
        elif dt == _F32:
            cdf = _normal_cdf_f32(np.asarray(x))
        else:
            cdf = np.asarray(ndtr(x))
        cdf *= x
    return _finish(input, cdf)


def _gelu_decomp(input, approximate="none"):
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * _SQRT_2_OVER_PI
        return input * 0.5 * (_E.tanh(inner) + 1)
    return input * 0.5 * (_E.erf(input * _SQRT_HALF) + 1)


gelu = _composite("gelu", _gelu_meta, cpu=_gelu_cpu, decomposition=_gelu_decomp, tags=_NN_ONLY)


def _silu_meta(input, inplace=False):
    """Sigmoid linear unit, also called swish: ``x * sigmoid(x)``.

    Args:
        input (Tensor): floating point or complex.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for integer and bool inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.silu(ember.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.2689,  0.0000,  0.7311])
    """
    return _activation_meta("silu", input, complex_ok=True)


def _silu_cpu(input, inplace=False):
    x = _compute(input._data)
    with np.errstate(all="ignore"):
        denom = np.asarray(np.exp(-x))
        denom += 1
        return _finish(input, np.divide(x, denom, out=denom), inplace)


def _silu_decomp(input, inplace=False):
    return _inplace_result("silu", input, input * _E.sigmoid(input), inplace)


silu = _composite("silu", _silu_meta, cpu=_silu_cpu, decomposition=_silu_decomp, tags=_NN_ONLY)


def _softplus_np(x, beta=1.0, threshold=20.0):
    with np.errstate(all="ignore"):
        bx = x * np.asarray(beta, x.dtype) if beta != 1 else x
        soft = np.logaddexp(bx, np.asarray(0, x.dtype))
        if beta != 1:
            soft /= np.asarray(beta, x.dtype)
        return np.where(bx > threshold, x, soft)


def _mish_meta(input, inplace=False):
    """Mish (Misra, 2019): ``x * tanh(softplus(x))``.

    Args:
        input (Tensor): floating point.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.mish(ember.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.3034,  0.0000,  0.8651])
    """
    return _activation_meta("mish", input)


def _mish_cpu(input, inplace=False):
    x = _compute(input._data)
    with np.errstate(all="ignore"):
        t = np.tanh(np.logaddexp(x, np.asarray(0, x.dtype)))
        t *= x
    return _finish(input, t, inplace)


def _mish_decomp(input, inplace=False):
    return _inplace_result("mish", input, input * _E.tanh(_E.softplus(input)), inplace)


mish = _composite("mish", _mish_meta, cpu=_mish_cpu, decomposition=_mish_decomp, tags=_NN_ONLY)


def _softplus_meta(input, beta=1, threshold=20):
    """Smooth approximation of relu: ``log(1 + exp(beta * x)) / beta``.

    Where ``beta * x > threshold`` the result is ``x`` itself, for numerical stability.

    Args:
        input (Tensor): floating point.
        beta (float): sharpness.
        threshold (float): above it (in ``beta * x``) the function is linear.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.softplus(ember.tensor([-1.0, 0.0, 30.0]))
        tensor([ 0.3133,  0.6931, 30.0000])
    """
    _number("softplus", "beta", beta, 2)
    _number("softplus", "threshold", threshold, 3)
    return _activation_meta("softplus", input)


def _softplus_cpu(input, beta=1, threshold=20):
    return _finish(input, _softplus_np(_compute(input._data), beta, threshold))


def _softplus_decomp(input, beta=1, threshold=20):
    scaled = input * beta if beta != 1 else input
    soft = _E.log1p(_E.exp(scaled))
    if beta != 1:
        soft = soft / beta
    return _E.where(scaled > threshold, input, soft)


softplus = _composite(
    "softplus", _softplus_meta, cpu=_softplus_cpu, decomposition=_softplus_decomp, tags=_NN_ONLY
)


def _logsigmoid_meta(input):
    """``log(sigmoid(x))``, computed stably as ``min(x, 0) - log1p(exp(-|x|))``.

    Args:
        input (Tensor): floating point.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.logsigmoid(ember.tensor([-1.0, 0.0, 1.0]))
        tensor([-1.3133, -0.6931, -0.3133])
    """
    return _activation_meta("logsigmoid", input, "log_sigmoid_cpu")


def _logsigmoid_cpu(input):
    return _finish(input, _logsigmoid_np(_compute(input._data)))


logsigmoid = _composite(
    "logsigmoid", _logsigmoid_meta, cpu=_logsigmoid_cpu,
    decomposition=lambda input: _logsigmoid_values(input), tags=_NN_ONLY,
)


# -- hard gates: hardsigmoid, hardswish -----------------------------------------------------------------


def _hardsigmoid_meta(input, inplace=False):
    """Piecewise-linear sigmoid: ``min(max(x + 3, 0), 6) / 6``.

    Args:
        input (Tensor): floating point.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.hardsigmoid(ember.tensor([-4.0, 0.0, 1.5]))
        tensor([0.0000, 0.5000, 0.7500])
    """
    return _activation_meta("hardsigmoid", input)


def _hard_gate(x):
    gate = np.asarray(x + np.asarray(3, x.dtype))
    np.clip(gate, np.asarray(0, x.dtype), np.asarray(6, x.dtype), out=gate)
    gate /= np.asarray(6, x.dtype)
    return gate


def _hardsigmoid_cpu(input, inplace=False):
    return _finish(input, _hard_gate(_compute(input._data)), inplace)


def _hardsigmoid_decomp(input, inplace=False):
    return _inplace_result("hardsigmoid", input, _E.clamp(input + 3, min=0, max=6) / 6, inplace)


hardsigmoid = _composite(
    "hardsigmoid", _hardsigmoid_meta, cpu=_hardsigmoid_cpu, decomposition=_hardsigmoid_decomp,
    tags=_NN_ONLY,
)


def _hardswish_meta(input, inplace=False):
    """Hard swish (Howard et al., "Searching for MobileNetV3", 2019): ``x * min(max(x + 3, 0), 6) / 6``.

    Args:
        input (Tensor): floating point.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.hardswish(ember.tensor([-1.0, 1.0, 4.0]))
        tensor([-0.3333,  0.6667,  4.0000])
    """
    return _activation_meta("hardswish", input)


def _hardswish_cpu(input, inplace=False):
    x = _compute(input._data)
    gate = _hard_gate(x)
    gate *= x
    return _finish(input, gate, inplace)


def _hardswish_decomp(input, inplace=False):
    return _inplace_result("hardswish", input, input * _E.clamp(input + 3, min=0, max=6) / 6, inplace)


hardswish = _composite(
    "hardswish", _hardswish_meta, cpu=_hardswish_cpu, decomposition=_hardswish_decomp,
    tags=_NN_ONLY,
)


# -- shrinkage and friends: softsign, softshrink, hardshrink, tanhshrink, threshold ------------------------


def _softsign_meta(input):
    """``x / (1 + |x|)``; integer inputs give the default float dtype.

    Args:
        input (Tensor): any dtype but bool.

    Returns:
        Tensor: same shape as ``input``.

    Raises:
        NotImplementedError: for a bool tensor.

    Example:
        >>> import ember
        >>> ember.nn.functional.softsign(ember.tensor([-1.0, 3.0]))
        tensor([-0.5000,  0.7500])
    """
    return _float_promoting_meta("softsign", input, _softsign_bool_error)


def _float_promoting_meta(op, input, bool_error):
    """Meta of softsign and tanhshrink: any dtype but bool (``bool_error()`` is what a bool tensor raises),
    integer inputs giving the default float dtype."""
    _check_tensor(op, "input", input)
    if input.dtype is D.bool:
        raise bool_error()
    return MetaArray(input._data.shape, _float_result(input.dtype).numpy_dtype)


def _softsign_bool_error():
    return _not_implemented("abs_cpu", D.bool)


def _float_promoting_cpu(values):
    """The CPU kernel of softsign and tanhshrink: ``values(x)`` on ``input`` in its result dtype (integers give
    the default float), without numpy's floating-point warnings."""

    def cpu(input):
        out = _float_result(input.dtype).numpy_dtype
        x = _compute(input._data, out)
        with np.errstate(all="ignore"):
            return np.asarray(values(x)).astype(out, copy=False)  # 0-d inputs give numpy scalars

    return cpu


def _softsign_values(x):
    denom = np.abs(x).astype(x.dtype)
    denom += 1
    return x / denom


_softsign_cpu = _float_promoting_cpu(_softsign_values)


softsign = _composite(
    "softsign", _softsign_meta, cpu=_softsign_cpu,
    decomposition=lambda input: input / (_E.abs(input) + 1), tags=_NN_ONLY,
)


def _softshrink_meta(input, lambd=0.5):
    """Soft thresholding: ``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0.

    Args:
        input (Tensor): floating point.
        lambd (float): the threshold, ``>= 0``.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: if ``lambd < 0``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.softshrink(ember.tensor([-2.0, 0.3, 2.0]), 1.0)
        tensor([-1.,  0.,  1.])
    """
    lambd = _number("softshrink", "lambd", lambd, 2)
    meta = _activation_meta("softshrink", input, "softshrink_check")
    if not lambd >= 0:
        limit = D.finfo(input.dtype).max
        raise RuntimeError(
            f"lambda must be in range [0, {limit:g}] for input dtype {_torch_name(input.dtype)}, but found {lambd}"
        )
    return meta


def _softshrink_cpu(input, lambd=0.5):
    x = _compute(input._data)
    lam = np.asarray(lambd, x.dtype)
    out = np.where(x > lam, x - lam, np.where(x < -lam, x + lam, np.zeros((), x.dtype)))
    out = np.where(np.isnan(x), x, out)
    return _finish(input, out)


def _softshrink_decomp(input, lambd=0.5):
    shrunk = _E.where(input > lambd, input - lambd, _E.where(input < -lambd, input + lambd, input * 0))
    return _E.where(_E.isnan(input), input, shrunk)


softshrink = _composite(
    "softshrink", _softshrink_meta, cpu=_softshrink_cpu, decomposition=_softshrink_decomp,
    tags=_NN_ONLY,
)


def _hardshrink_meta(input, lambd=0.5):
    """Hard thresholding: 0 where ``-lambd <= x <= lambd``, ``x`` elsewhere.

    Args:
        input (Tensor): floating point.
        lambd (float): the threshold.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.hardshrink(ember.tensor([-2.0, 0.3, 2.0]), 1.0)
        tensor([-2.,  0.,  2.])
    """
    _number("hardshrink", "lambd", lambd, 2)
    return _activation_meta("hardshrink", input)


def _hardshrink_cpu(input, lambd=0.5):
    x = _compute(input._data)
    lam = np.asarray(lambd, x.dtype)
    return _finish(input, np.where((x >= -lam) & (x <= lam), np.zeros((), x.dtype), x))


def _hardshrink_decomp(input, lambd=0.5):
    inside = _E.logical_and(input >= -lambd, input <= lambd)
    return _E.where(inside, input * 0, input)


hardshrink = _composite(
    "hardshrink", _hardshrink_meta, cpu=_hardshrink_cpu, decomposition=_hardshrink_decomp,
    tags=_NN,
)


def _tanhshrink_meta(input):
    """``x - tanh(x)``; integer inputs give the default float dtype.

    Args:
        input (Tensor): any dtype but bool.

    Returns:
        Tensor: same shape as ``input``.

    Raises:
        RuntimeError: for a bool tensor.

    Example:
        >>> import ember
        >>> ember.nn.functional.tanhshrink(ember.tensor([-1.0, 2.0]))
        tensor([-0.2384,  1.0360])
    """
    return _float_promoting_meta("tanhshrink", input, _tanhshrink_bool_error)


def _tanhshrink_bool_error():
    return RuntimeError(
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
        "use the `~` or `logical_not()` operator instead."
    )


_tanhshrink_cpu = _float_promoting_cpu(lambda x: x - np.tanh(x))


tanhshrink = _composite(
    "tanhshrink", _tanhshrink_meta, cpu=_tanhshrink_cpu,
    decomposition=lambda input: input - _E.tanh(input), tags=_NN_ONLY,
)


def _threshold_meta(input, threshold, value, inplace=False):
    """``value`` where ``x <= threshold``, else ``x`` (a NaN stays NaN, as in PyTorch).

    ``threshold`` and ``value`` are converted to ``input``'s dtype first (integers truncate).

    Args:
        input (Tensor): integer or floating point.
        threshold (float): the threshold.
        value (float): the replacement for elements ``<= threshold``.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        NotImplementedError: for bool and complex inputs.

    Example:
        >>> import ember
        >>> ember.threshold(ember.tensor([1.0, 2.0, 3.0]), 1.5, -1.0)
        tensor([-1.,  2.,  3.])
    """
    threshold = _number("threshold", "threshold", threshold, 2)
    value = _number("threshold", "value", value, 3)
    _check_tensor("threshold", "input", input)
    if input.dtype is D.bool:
        raise _not_implemented("threshold_cpu", input.dtype)
    meta = _activation_meta("threshold", input, ints=True)
    _check_scalar_fits(threshold, input.dtype)
    _check_scalar_fits(value, input.dtype)
    return meta


def _threshold_cpu(input, threshold, value, inplace=False):
    data = input._data
    th, val = _scalar_as(threshold, data.dtype), _scalar_as(value, data.dtype)
    return _finish(input, np.where(data <= th, val, data), inplace)  # a NaN stays NaN, as in PyTorch


def _threshold_decomp(input, threshold, value, inplace=False):
    if inplace:
        return _E.threshold_(input, threshold, value)
    if input.dtype.category < D.FLOATING:
        threshold, value = int(threshold), int(value)
    return _E.where(input <= threshold, _E.full_like(input, value), input)


threshold = _composite(
    "threshold", _threshold_meta, cpu=_threshold_cpu, decomposition=_threshold_decomp, tags=_NN
)
make_inplace(threshold)


# -- glu -----------------------------------------------------------------------------------------------


def _glu_meta(input, dim=-1):
    """Gated linear unit (Dauphin et al., 2017): ``a * sigmoid(b)`` for the two halves ``a, b`` of ``dim``.

    Args:
        input (Tensor): floating point, with an even size along ``dim``.
        dim (int): the dimension to split.

    Returns:
        Tensor: ``input``'s shape with ``dim`` halved.

    Raises:
        RuntimeError: for a 0-dim input or an odd size along ``dim``.
        IndexError: if ``dim`` is out of range.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.glu(ember.tensor([1.0, 2.0, 0.0, 100.0]))
        tensor([0.5000, 2.0000])
    """
    _check_tensor("glu", "input", input)
    dim = _int_arg("glu", "dim", dim, 2)
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    _check_floating("glu_cpu", input)
    shape = list(input.shape)
    shape[d] //= 2
    return MetaArray(tuple(shape), input._data.dtype)


def _glu_cpu(input, dim=-1):
    x = _compute(input._data)
    a, b = np.split(x, 2, axis=dim)
    with np.errstate(all="ignore"):
        gate = np.asarray(np.exp(-b))
        gate += 1
        return _finish(input, np.divide(a, gate, out=gate))


def _glu_decomp(input, dim=-1):
    a, b = _E.chunk(input, 2, dim)
    return a * _E.sigmoid(b)


glu = _composite("glu", _glu_meta, cpu=_glu_cpu, decomposition=_glu_decomp, tags=_NN_ONLY)
