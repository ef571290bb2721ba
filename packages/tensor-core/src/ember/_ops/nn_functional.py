"""ember.nn.functional: activations, dropout, normalization, embedding, attention, distances and losses.

Every op here is a **composite**: its ``decomposition`` is written in other
ember ops (so a backend with the prims gets it for free, and autograd and the
compiler can see through it), and most also carry a fused numpy CPU kernel
that computes the whole thing in one pass over the data. The ops that
PyTorch also exposes as ``torch.<name>`` are tagged ``"nn.functional"`` (and
become ``ember.<name>`` too); the others are tagged ``"nn.functional_only"``.
Ops that draw random numbers (the dropout family, ``rrelu`` in training,
``gumbel_softmax``) are tagged ``"random"`` and use :data:`ember.default_generator`
through ember's random ops.

Conventions shared by the kernels:

* float16 and bfloat16 inputs are computed in float32 and cast back, as
  PyTorch's CPU kernels accumulate them;
* ops with PyTorch's ``inplace`` flag write the result into ``input`` when it
  is true (the decomposition calls the op's in-place variant, or ``copy_``);
* value-dependent checks (a class index out of range, a probability outside
  [0, 1]) are made by the kernels, the others by the meta functions.

Decompositions look their ops up in the registry when they run
(``_E.exp(x)`` is ``registry["exp"](x)``), so this module does not depend on
the import order of the op families.
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from .. import _C
from .. import _dtype as D
from .._grad_mode import no_grad
from .._meta import MetaArray
from .._tensor import Tensor
from ._pointwise_helpers import _torch_name, make_inplace
from ._registry import COMPOSITE, defop, registry
from ._shapes import broadcast_shapes, wrap_dim
from .random import _numpy_rng

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["relu", "relu_", "softmax", "log_softmax", "hardshrink", "prelu"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}

_NN = ("nn.functional",)  # PyTorch has torch.<name> too
_NN_ONLY = ("nn.functional_only",)  # only torch.nn.functional.<name>
_NN_RANDOM = ("nn.functional", "random")
_NN_ONLY_RANDOM = ("nn.functional_only", "random")

_HALF_TYPES = (np.dtype(np.float16), D.bfloat16.numpy_dtype)
_F32 = np.dtype(np.float32)
# dtypes that the C++ kernels of ember._C (csrc/nn_kernels.cpp) compute in
_C_FLOATS = (_F32, np.dtype(np.float64))


class _OpTable:
    """``_E.name`` is the registry op ``name``, looked up when a decomposition runs."""

    def __getattr__(self, name):
        try:
            return registry[name]
        except KeyError:
            raise NotImplementedError(f"this decomposition needs the op {name!r}, which is not registered") from None


_E = _OpTable()


def _composite(name, meta, *, cpu, decomposition, tags, has_out=False):
    """Register a composite op with its fused CPU kernel (the dispatcher runs ``meta`` before either)."""
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=tags, has_out=has_out)


# -- argument checks -----------------------------------------------------------------------------------


def _check_tensor(op, name, value, position=1):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not {type(value).__name__}")


def _check_optional_tensor(op, name, value, position):
    if value is not None:
        _check_tensor(op, name, value, position)


def _number(op, name, value, position):
    """``value`` as a Python number (0-dim tensors count).

    Raises:
        TypeError: if it is not a real number.
    """
    if isinstance(value, Tensor) and value.ndim == 0:
        return value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Number, not {type(value).__name__}")
    return value


def _int_arg(op, name, value, position):
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be int, not {type(value).__name__}")
    return operator.index(value)


def _not_implemented(kernel, dtype):
    """PyTorch's error for a kernel without a loop for ``dtype``."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{_torch_name(dtype)}\'')


def _check_floating(kernel, *tensors):
    """Raise NotImplementedError (as PyTorch) unless every tensor is floating-point."""
    for t in tensors:
        if t is not None and t.dtype.category != D.FLOATING:
            raise _not_implemented(kernel, t.dtype)


def _float_result(dtype):
    """The dtype of float-only math on ``dtype``: integers and bool give the default float."""
    return dtype if dtype.category >= D.FLOATING else D.get_default_dtype()


def _fmt(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _size(shape):
    return "ember.Size([" + ", ".join(str(s) for s in shape) + "])"


# -- numpy helpers ------------------------------------------------------------------------------------


def _compute(data, dtype=None):
    """``data`` in the dtype a kernel computes in: float32 for float16/bfloat16, else unchanged (or ``dtype``)."""
    if dtype is not None and data.dtype != dtype:
        data = data.astype(dtype)
    if data.dtype in _HALF_TYPES:
        return data.astype(_F32)
    return data


def _compute_dtype(np_dtype):
    return _F32 if np_dtype in _HALF_TYPES else np_dtype


def _contiguous(data):
    """``data`` itself when C-contiguous, else a C-contiguous copy (0-dim stays 0-dim, unlike np.ascontiguousarray)."""
    return data if data.flags.c_contiguous else np.array(data, order="C")


def _finish(input, values, inplace=False):
    """The kernel result: ``values`` cast to ``input``'s dtype, or written into ``input`` when ``inplace``.

    In place, the kernel returns ``input`` itself, which the dispatcher passes through.
    """
    data = input._data
    if inplace:
        np.copyto(data, values, casting="unsafe")
        input._bump_version()
        return input
    return np.asarray(values).astype(data.dtype, copy=False)


def _reduce_np(loss, reduction, out_dtype):
    """Apply a loss reduction to a numpy array and cast to ``out_dtype``."""
    if reduction == "mean":
        loss = np.asarray(loss.mean() if loss.size else np.nan, dtype=loss.dtype)
    elif reduction == "sum":
        loss = np.asarray(loss.sum(), dtype=loss.dtype)
    return np.asarray(loss).astype(out_dtype, copy=False)


def _upcast(x):
    """``x`` in float32 when it is float16/bfloat16 (decompositions compute reductions there, as kernels do)."""
    return x.to(D.float32) if x.dtype in (D.float16, D.bfloat16) else x


def _reduce(loss, reduction):
    """Apply a loss reduction with ember ops (decompositions)."""
    if reduction == "mean":
        return _E.mean(loss)
    if reduction == "sum":
        return _E.sum(loss)
    return loss


# -- loss arguments -------------------------------------------------------------------------------------


_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce):
    """The ``reduction`` string meant by the deprecated ``size_average``/``reduce`` flags."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        result = "none"
    elif size_average:
        result = "mean"
    else:
        result = "sum"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{result}' instead.",
        UserWarning, stacklevel=4,
    )
    return result


def _reduction(size_average, reduce, reduction, allowed=_REDUCTIONS):
    """The effective reduction of a loss call.

    Raises:
        ValueError: for an unknown reduction.
    """
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _kernel_reduction(size_average, reduce, reduction):
    """The reduction a kernel applies (the meta function has checked and warned already)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def _loss_shape(shape, reduction):
    return tuple(shape) if reduction == "none" else ()


# =====================================================================================================
# Activations
# =====================================================================================================


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


def _relu_cpu(input, inplace=False):
    return _finish(input, np.maximum(input._data, _scalar_as(0, input._data.dtype)), inplace)


def _relu_decomp(input, inplace=False):
    if inplace:
        return _E.relu_(input)
    return _E.clamp(input, min=0)


relu = _composite("relu", _relu_meta, cpu=_relu_cpu, decomposition=_relu_decomp, tags=_NN)
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
    slopes = lower + (upper - lower) * _numpy_rng(None).random(x.shape)
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


def _logsigmoid_np(x):
    with np.errstate(all="ignore"):
        out = np.asarray(np.exp(-np.abs(x)))
        np.log1p(out, out=out)
        return np.minimum(x, np.asarray(0, x.dtype)) - out


def _logsigmoid_cpu(input):
    return _finish(input, _logsigmoid_np(_compute(input._data)))


def _logsigmoid_values(input):
    return _E.clamp(input, max=0) - _E.log1p(_E.exp(-_E.abs(input)))


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
    _check_tensor("softsign", "input", input)
    if input.dtype is D.bool:
        raise _not_implemented("abs_cpu", input.dtype)
    return MetaArray(input._data.shape, _float_result(input.dtype).numpy_dtype)


def _softsign_cpu(input):
    out = _float_result(input.dtype).numpy_dtype
    x = _compute(input._data, out)
    with np.errstate(all="ignore"):
        denom = np.abs(x).astype(x.dtype)
        denom += 1
        return (x / denom).astype(out, copy=False)


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
    _check_tensor("tanhshrink", "input", input)
    if input.dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )
    return MetaArray(input._data.shape, _float_result(input.dtype).numpy_dtype)


def _tanhshrink_cpu(input):
    out = _float_result(input.dtype).numpy_dtype
    x = _compute(input._data, out)
    with np.errstate(all="ignore"):
        return (x - np.tanh(x)).astype(out, copy=False)


tanhshrink = _composite(
    "tanhshrink", _tanhshrink_meta, cpu=_tanhshrink_cpu,
    decomposition=lambda input: input - _E.tanh(input), tags=_NN_ONLY,
)


def _threshold_meta(input, threshold, value, inplace=False):
    """``x`` where ``x > threshold``, else ``value``.

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
    return _finish(input, np.where(data > th, data, val), inplace)


def _threshold_decomp(input, threshold, value, inplace=False):
    if inplace:
        return _E.threshold_(input, threshold, value)
    if input.dtype.category < D.FLOATING:
        threshold, value = int(threshold), int(value)
    return _E.where(input > threshold, input, _E.full_like(input, value))


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


# =====================================================================================================
# Softmax family
# =====================================================================================================


def _implicit_softmax_dim(ndim, op):
    warnings.warn(
        f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X as an argument.",
        UserWarning, stacklevel=5,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_args(op, input, dim, _stacklevel, dtype, *, warn=True):
    """Checked ``(dim, dtype)`` of a softmax-like call; ``dtype`` is the computation and result dtype."""
    _check_tensor(op, "input", input)
    if isinstance(_stacklevel, D.dtype) and dtype is None:  # torch.softmax(input, dim, dtype) positionally
        dtype = _stacklevel
    if dtype is not None and not isinstance(dtype, D.dtype):
        raise TypeError(f"{op}(): argument 'dtype' must be ember.dtype, not {type(dtype).__name__}")
    if dim is None:
        dim = _implicit_softmax_dim(input.ndim, op) if warn else (0 if input.ndim in (0, 1, 3) else 1)
    dim = wrap_dim(_int_arg(op, "dim", dim, 2), input.ndim)
    out = input.dtype if dtype is None else dtype
    if out.category != D.FLOATING:
        last = dim == input.ndim - 1 or input.ndim == 0
        kernel = "softmax_lastdim_kernel_impl" if last else "softmax_kernel_impl"
        if op == "log_softmax":
            kernel = "log_" + kernel
        raise _not_implemented(kernel, out)
    return dim, out


def _softmax_np(x, axis, log=False):
    """Softmax (or log-softmax) of the float array ``x`` along ``axis``, in ``x``'s dtype."""
    if x.ndim == 0:
        return _softmax_np(x.reshape(1), 0, log).reshape(())
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    if x.dtype in _C_FLOATS:
        return _C.softmax(_contiguous(x), axis % x.ndim, log)
    with np.errstate(all="ignore"):
        shifted = x - x.max(axis=axis, keepdims=True)
        if log:
            total = np.exp(shifted).sum(axis=axis, keepdims=True)
            shifted -= np.log(total)
            return shifted
        np.exp(shifted, out=shifted)
        shifted /= shifted.sum(axis=axis, keepdims=True)
        return shifted


def _softmax_meta(input, dim=None, _stacklevel=3, dtype=None):
    """Softmax along ``dim``: ``exp(x) / sum(exp(x))``, computed stably (the maximum is subtracted first).

    Args:
        input (Tensor): the logits.
        dim (int): the dimension the result sums to 1 along (an implicit choice is deprecated and warns).
        _stacklevel (int): ignored (PyTorch's warning plumbing); a dtype here is taken as ``dtype``.
        dtype (ember.dtype, optional): cast ``input`` to this floating dtype first; the result has it.

    Returns:
        Tensor: same shape as ``input``; dtype ``dtype`` or ``input``'s.

    Raises:
        NotImplementedError: if the computation dtype is not floating point.
        IndexError: if ``dim`` is out of range.

    Example:
        >>> import ember
        >>> ember.softmax(ember.tensor([1.0, 2.0, 3.0]), dim=0)
        tensor([0.0900, 0.2447, 0.6652])
    """
    _, out = _softmax_args("softmax", input, dim, _stacklevel, dtype)
    return MetaArray(input._data.shape, out.numpy_dtype)


def _softmax_cpu(input, dim=None, _stacklevel=3, dtype=None):
    dim, out = _softmax_args("softmax", input, dim, _stacklevel, dtype, warn=False)
    return _softmax_np(_compute(input._data, out.numpy_dtype), dim).astype(out.numpy_dtype, copy=False)


def _softmax_values(x, dim, log=False):
    dtype = x.dtype
    x = _upcast(x)
    shifted = x - _E.amax(x, dim, keepdim=True)
    if log:
        return (shifted - _E.log(_E.sum(_E.exp(shifted), dim, keepdim=True))).to(dtype)
    e = _E.exp(shifted)
    return (e / _E.sum(e, dim, keepdim=True)).to(dtype)


def _softmax_decomp(input, dim=None, _stacklevel=3, dtype=None):
    dim, out = _softmax_args("softmax", input, dim, _stacklevel, dtype, warn=False)
    return _softmax_values(input.to(out), dim)


softmax = _composite(
    "softmax", _softmax_meta, cpu=_softmax_cpu, decomposition=_softmax_decomp, tags=_NN
)


def _log_softmax_meta(input, dim=None, _stacklevel=3, dtype=None):
    """Log of the softmax along ``dim``: ``x - logsumexp(x)``, computed stably.

    Args:
        input (Tensor): the logits.
        dim (int): the dimension to normalize along (an implicit choice is deprecated and warns).
        _stacklevel (int): ignored (PyTorch's warning plumbing); a dtype here is taken as ``dtype``.
        dtype (ember.dtype, optional): cast ``input`` to this floating dtype first; the result has it.

    Returns:
        Tensor: same shape as ``input``; dtype ``dtype`` or ``input``'s.

    Raises:
        NotImplementedError: if the computation dtype is not floating point.
        IndexError: if ``dim`` is out of range.

    Example:
        >>> import ember
        >>> ember.log_softmax(ember.tensor([1.0, 2.0, 3.0]), dim=0)
        tensor([-2.4076, -1.4076, -0.4076])
    """
    _, out = _softmax_args("log_softmax", input, dim, _stacklevel, dtype)
    return MetaArray(input._data.shape, out.numpy_dtype)


def _log_softmax_cpu(input, dim=None, _stacklevel=3, dtype=None):
    dim, out = _softmax_args("log_softmax", input, dim, _stacklevel, dtype, warn=False)
    return _softmax_np(_compute(input._data, out.numpy_dtype), dim, log=True).astype(out.numpy_dtype, copy=False)


def _log_softmax_decomp(input, dim=None, _stacklevel=3, dtype=None):
    dim, out = _softmax_args("log_softmax", input, dim, _stacklevel, dtype, warn=False)
    return _softmax_values(input.to(out), dim, log=True)


log_softmax = _composite(
    "log_softmax", _log_softmax_meta, cpu=_log_softmax_cpu, decomposition=_log_softmax_decomp,
    tags=_NN,
)


def _check_negatable(input):
    if isinstance(input, Tensor) and input.dtype is D.bool:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )


def _softmin_meta(input, dim=None, _stacklevel=3, dtype=None):
    """Softmax of ``-input`` along ``dim``: small values get large weights.

    Args:
        input (Tensor): any dtype but bool (``-input`` is taken in ``input``'s dtype).
        dim (int): the dimension the result sums to 1 along.
        _stacklevel (int): ignored (PyTorch's warning plumbing).
        dtype (ember.dtype, optional): cast ``-input`` to this floating dtype first; the result has it.

    Returns:
        Tensor: same shape as ``input``.

    Raises:
        RuntimeError: for a bool tensor.
        NotImplementedError: if the computation dtype is not floating point.

    Example:
        >>> import ember
        >>> ember.nn.functional.softmin(ember.tensor([1.0, 2.0, 3.0]), dim=0)
        tensor([0.6652, 0.2447, 0.0900])
    """
    _check_negatable(input)
    _, out = _softmax_args("softmin", input, dim, _stacklevel, dtype)
    return MetaArray(input._data.shape, out.numpy_dtype)


def _softmin_cpu(input, dim=None, _stacklevel=3, dtype=None):
    dim, out = _softmax_args("softmin", input, dim, _stacklevel, dtype, warn=False)
    return _softmax_np(_compute(np.negative(input._data), out.numpy_dtype), dim).astype(out.numpy_dtype, copy=False)


def _softmin_decomp(input, dim=None, _stacklevel=3, dtype=None):
    dim, out = _softmax_args("softmin", input, dim, _stacklevel, dtype, warn=False)
    return _softmax_values((-input).to(out), dim)


softmin = _composite(
    "softmin", _softmin_meta, cpu=_softmin_cpu, decomposition=_softmin_decomp, tags=_NN_ONLY
)


def _gumbel_softmax_meta(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """Samples of the Gumbel-softmax distribution (Jang et al., 2016; Maddison et al., 2016).

    ``softmax((logits + g) / tau, dim)`` with ``g`` standard Gumbel noise drawn from
    :data:`ember.default_generator`. With ``hard=True`` the values are the one-hot
    vectors of the argmax (the straight-through estimator: ``y_hard - y + y``).

    Args:
        logits (Tensor): unnormalized log-probabilities; floating point.
        tau (float): the temperature.
        hard (bool): return one-hot samples.
        eps (float): deprecated, no effect (warns when changed).
        dim (int): the category dimension.

    Returns:
        Tensor: same shape and dtype as ``logits``.

    Raises:
        NotImplementedError: for non-floating ``logits``.

    Example:
        >>> import ember
        >>> y = ember.nn.functional.gumbel_softmax(ember.zeros(2, 5), hard=True)
        >>> y.sum(dim=-1)
        tensor([1., 1.])
    """
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", UserWarning, stacklevel=4)
    _check_tensor("gumbel_softmax", "logits", logits)
    dim, _ = _softmax_args("gumbel_softmax", logits, dim, 3, None, warn=False)
    return MetaArray(logits._data.shape, logits._data.dtype)


def _one_hot_argmax_np(y, axis):
    hard = np.zeros_like(y)
    index = np.expand_dims(np.argmax(y, axis=axis), axis)
    np.put_along_axis(hard, index, 1, axis=axis)
    return hard


def _gumbel_softmax_cpu(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    data = logits._data
    dim = wrap_dim(dim, data.ndim)
    noise = _numpy_rng(None).standard_exponential(data.shape).astype(data.dtype)
    x = _compute(data)
    with np.errstate(all="ignore"):
        g = (x - np.log(_compute(noise))) / np.asarray(tau, x.dtype)
    y = _softmax_np(g.astype(data.dtype), dim) if data.dtype in _HALF_TYPES else _softmax_np(g, dim)
    if hard and y.ndim:
        y_hard = _one_hot_argmax_np(y, dim)
        y = (y_hard - y) + y
    return y.astype(data.dtype, copy=False)


def _gumbel_softmax_decomp(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    gumbels = -_E.log(_E.exponential_(_E.empty_like(logits)))
    y = _E.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y
    index = _E.argmax(y, dim, keepdim=True)
    y_hard = _E.scatter(_E.zeros_like(logits), dim, index, 1.0)
    return y_hard - y.detach() + y


gumbel_softmax = _composite(
    "gumbel_softmax", _gumbel_softmax_meta, cpu=_gumbel_softmax_cpu,
    decomposition=_gumbel_softmax_decomp, tags=_NN_ONLY_RANDOM,
)


# =====================================================================================================
# Dropout family
# =====================================================================================================

_SELU_NEG_SATURATION = 1.7580993408473766  # -alpha * scale of SELU: where SELU saturates for large negatives


def _check_dropout_p(p):
    p = _number("dropout", "p", p, 2)
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def _dropout_draws(input, p, training):
    """Whether a dropout call draws random numbers (otherwise it is the identity or a multiplication by 0)."""
    return training and 0 < p < 1 and input.numel() > 0


def _dropout_meta_common(op, input, p, training, noise_shape):
    """Checks shared by the dropout family; ``noise_shape(input)`` gives the mask shape when it draws."""
    p = _check_dropout_p(p)
    if _dropout_draws(input, p, training):
        if input.dtype.is_complex:
            raise _not_implemented("bernoulli_scalar_cpu_", input.dtype)
        if input.dtype.category < D.FLOATING:
            raise RuntimeError(f"result type Float can't be cast to the desired output type {_torch_name(input.dtype)}")
        noise_shape(input)
    return MetaArray(input._data.shape, input._data.dtype)


def _elementwise_noise(input):
    return tuple(input.shape)


def _feature_noise(input):
    """Mask shape of feature (channel-wise) dropout: one draw per (batch, channel)."""
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return tuple(input.shape[:2]) + (1,) * (input.ndim - 2)


def _unbatched_feature_noise(input):
    """Mask shape of feature dropout on an input without a batch dim (dim 0 is the channel)."""
    if input.ndim < 1:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return (input.shape[0],) + (1,) * (input.ndim - 1)


def _dropout_np(input, p, training, inplace, noise_shape, alpha):
    """The dropout kernel: one mask of ``noise_shape`` (broadcast over ``input``) from the default generator."""
    data = input._data
    if not _dropout_draws(input, p, training):
        if training and p == 1 and data.size:
            return _finish(input, data * _scalar_as(0, data.dtype), inplace)
        return data if inplace else data.copy()
    x = _compute(data)
    keep = 1.0 - p
    noise = (_numpy_rng(None).random(noise_shape(input)) < keep).astype(x.dtype)
    with np.errstate(all="ignore"):
        if alpha:
            a = 1.0 / math.sqrt((_SELU_NEG_SATURATION**2 * p + 1) * keep)
            shift = noise - np.asarray(1, x.dtype)
            shift *= np.asarray(_SELU_NEG_SATURATION * a, x.dtype)
            shift += np.asarray(_SELU_NEG_SATURATION * a * p, x.dtype)
            noise *= np.asarray(a, x.dtype)
            out = x * noise
            out += shift
        else:
            noise /= np.asarray(keep, x.dtype)
            out = x * noise
    return _finish(input, out, inplace)


def _dropout_values(input, p, training, inplace, noise_shape, alpha):
    """The dropout decomposition, in ember ops (the mask from ``ember.bernoulli``)."""
    if not _dropout_draws(input, p, training):
        if training and p == 1 and input.numel():
            return _inplace_result("dropout", input, input * 0, inplace)
        return input if inplace else _E.clone(input)
    keep = 1.0 - p
    noise = _E.bernoulli(_E.empty(noise_shape(input), dtype=input.dtype, device=input.device), keep)
    if alpha:
        a = 1.0 / math.sqrt((_SELU_NEG_SATURATION**2 * p + 1) * keep)
        shift = (noise - 1) * (_SELU_NEG_SATURATION * a) + _SELU_NEG_SATURATION * a * p
        out = input * (noise * a) + shift
    else:
        out = input * (noise / keep)
    return _inplace_result("dropout", input, out, inplace)


def _dropout_doc(what, extra="", example=None):
    if example is not None:
        extra += f"""

    Example:
        >>> import ember
        >>> ember.nn.functional.{example}(ember.ones(2, 2, 2), p=0.5, training=False)
        tensor([[[1., 1.],
                 [1., 1.]],
        <BLANKLINE>
                [[1., 1.],
                 [1., 1.]]])"""
    return f"""{what}

    Each kept element is scaled so that the expected value is unchanged; the mask
    is drawn from :data:`ember.default_generator` (through ``ember.bernoulli``).{extra}

    Args:
        input (Tensor): the input; floating point when it draws a mask.
        p (float): probability of zeroing, in ``[0, 1]``.
        training (bool): apply dropout; when False the result is a copy of ``input``.
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        ValueError: if ``p`` is outside ``[0, 1]``.
        RuntimeError: for an integer or bool input when a mask is drawn, or a wrong number of dims.
    """


def _dropout_meta(input, p=0.5, training=True, inplace=False):
    _check_tensor("dropout", "input", input)
    return _dropout_meta_common("dropout", input, p, training, _elementwise_noise)


_dropout_meta.__doc__ = _dropout_doc(
    "Zero each element of ``input`` with probability ``p`` and scale the rest by ``1 / (1 - p)``.",
    """

    Example:
        >>> import ember
        >>> ember.dropout(ember.ones(4), p=0.5, training=False)
        tensor([1., 1., 1., 1.])""",
)



def _dropout1d_noise(input):
    return _feature_noise(input) if input.ndim == 3 else _unbatched_feature_noise(input)


def _dropout1d_meta(input, p=0.5, training=True, inplace=False):
    _check_tensor("dropout1d", "input", input)
    _check_dropout_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d exists to "
            "provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an optional "
            "batch dimension (i.e. 2D or 3D inputs)."
        )
    return _dropout_meta_common("dropout1d", input, p, training, _dropout1d_noise)


_dropout1d_meta.__doc__ = _dropout_doc(
    "Zero whole channels of a ``(N, C, L)`` or ``(C, L)`` input, each with probability ``p``.", example="dropout1d"
)


def _warn_feature_dims(op, ndim, allowed, spatial):
    if ndim not in allowed:
        warnings.warn(
            f"{op}: Received a {ndim}-D input to {op}, which is deprecated and will result in an error in a future "
            f"release. To retain the behavior and silence this warning, please use dropout instead. Note that {op} "
            f"exists to provide channel-wise dropout on inputs with {spatial} spatial dimensions, a channel dimension, "
            f"and an optional batch dimension (i.e. {allowed[0]}D or {allowed[1]}D inputs).",
            UserWarning, stacklevel=4,
        )


def _dropout2d_meta(input, p=0.5, training=True, inplace=False):
    _check_tensor("dropout2d", "input", input)
    _check_dropout_p(p)
    _warn_feature_dims("dropout2d", input.ndim, (3, 4), 2)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior is "
            "desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior will change "
            "in a future release to interpret the input as one without a batch dimension, i.e. shape (C, H, W). To "
            "maintain the 1D channel-wise dropout behavior, please switch to using dropout1d instead.",
            UserWarning, stacklevel=4,
        )
    return _dropout_meta_common("dropout2d", input, p, training, _feature_noise)


_dropout2d_meta.__doc__ = _dropout_doc(
    "Zero whole channels of a ``(N, C, H, W)`` input, each with probability ``p``.",
    "\n\n    A 3-D input is taken as ``(N, C, L)`` (with a warning), as PyTorch does.", example="dropout2d"
)


def _dropout3d_noise(input):
    return _feature_noise(input) if input.ndim == 5 else _unbatched_feature_noise(input)


def _dropout3d_meta(input, p=0.5, training=True, inplace=False):
    _check_tensor("dropout3d", "input", input)
    _check_dropout_p(p)
    _warn_feature_dims("dropout3d", input.ndim, (4, 5), 3)
    return _dropout_meta_common("dropout3d", input, p, training, _dropout3d_noise)


_dropout3d_meta.__doc__ = _dropout_doc(
    "Zero whole channels of a ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input, each with probability ``p``.",
    example="dropout3d",
)


def _alpha_dropout_meta(input, p=0.5, training=False, inplace=False):
    _check_tensor("alpha_dropout", "input", input)
    return _dropout_meta_common("alpha_dropout", input, p, training, _elementwise_noise)


_alpha_dropout_meta.__doc__ = _dropout_doc(
    "Alpha dropout (Klambauer et al., 2017): dropped elements are set to SELU's negative saturation value.",
    "\n\n    An affine map then restores the mean and variance of inputs with zero mean and unit variance.",
    example="alpha_dropout",
)


def _feature_alpha_dropout_meta(input, p=0.5, training=False, inplace=False):
    _check_tensor("feature_alpha_dropout", "input", input)
    return _dropout_meta_common("feature_alpha_dropout", input, p, training, _feature_noise)


_feature_alpha_dropout_meta.__doc__ = _dropout_doc(
    "Alpha dropout of whole channels (dim 1) of ``input``; see :func:`ember.alpha_dropout`.",
    example="feature_alpha_dropout",
)


def _define_dropout(name, meta, noise_shape, alpha, tags):
    training_default = meta.__defaults__[1]

    def cpu(input, p=0.5, training=training_default, inplace=False):
        return _dropout_np(input, p, training, inplace, noise_shape, alpha)

    def decomposition(input, p=0.5, training=training_default, inplace=False):
        return _dropout_values(input, p, training, inplace, noise_shape, alpha)

    return _composite(name, meta, cpu=cpu, decomposition=decomposition, tags=tags)


dropout = _define_dropout("dropout", _dropout_meta, _elementwise_noise, False, _NN_RANDOM)
dropout1d = _define_dropout("dropout1d", _dropout1d_meta, _dropout1d_noise, False, _NN_ONLY_RANDOM)
dropout2d = _define_dropout("dropout2d", _dropout2d_meta, _feature_noise, False, _NN_ONLY_RANDOM)
dropout3d = _define_dropout("dropout3d", _dropout3d_meta, _dropout3d_noise, False, _NN_ONLY_RANDOM)
alpha_dropout = _define_dropout("alpha_dropout", _alpha_dropout_meta, _elementwise_noise, True, _NN_RANDOM)
feature_alpha_dropout = _define_dropout(
    "feature_alpha_dropout", _feature_alpha_dropout_meta, _feature_noise, True, _NN_RANDOM
)


# =====================================================================================================
# Linear maps
# =====================================================================================================

_C_TYPE_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
    "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double",
    "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}


def _matmul_np(a, b):
    """``a @ b`` for numpy arrays, in float32 for float16/bfloat16 (numpy has no BLAS for them)."""
    if a.dtype in _HALF_TYPES:
        return np.matmul(a.astype(_F32), b.astype(_F32)).astype(a.dtype)
    return np.matmul(a, b)


def _linear_meta(input, weight, bias=None):
    """Affine map ``input @ weight.T + bias``.

    Args:
        input (Tensor): ``(*, in_features)``.
        weight (Tensor): ``(out_features, in_features)``, or ``(in_features,)`` for one output
            (that dim is then dropped).
        bias (Tensor, optional): broadcastable to the output shape ``(*, out_features)``.

    Returns:
        Tensor: ``(*, out_features)``, of the common dtype.

    Raises:
        RuntimeError: for mismatched shapes or dtypes, or 0-dim arguments.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1.0, 2.0]])
        >>> ember.nn.functional.linear(x, ember.tensor([[1.0, 0.0], [1.0, 1.0]]), ember.tensor([0.5, -0.5]))
        tensor([[1.5000, 2.5000]])
    """
    _check_tensor("linear", "input", input)
    _check_tensor("linear", "weight", weight, 2)
    _check_optional_tensor("linear", "bias", bias, 3)
    if input.ndim == 0 or weight.ndim == 0:
        raise RuntimeError(
            f"both arguments to linear need to be at least 1D, but they are {input.ndim}D and {weight.ndim}D"
        )
    if weight.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {weight.ndim}D")
    in_features = weight.shape[-1]
    if input.shape[-1] != in_features:
        rows = math.prod(input.shape[:-1])
        out_features = weight.shape[0] if weight.ndim == 2 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{input.shape[-1]} and {in_features}x{out_features})"
        )
    if input.dtype is not weight.dtype:
        raise RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{_C_TYPE_NAMES[input.dtype.name]} != {_C_TYPE_NAMES[weight.dtype.name]}"
        )
    if input.dtype is D.bool:
        raise _not_implemented("addmm_impl_cpu_", input.dtype)
    shape = tuple(input.shape[:-1]) + ((weight.shape[0],) if weight.ndim == 2 else ())
    if bias is not None:
        if bias.dtype is not input.dtype:
            raise RuntimeError(
                f"self and mat2 must have the same dtype, but got {_torch_name(bias.dtype)} and "
                f"{_torch_name(input.dtype)}"
            )
        _check_expands("linear", bias.shape, shape)
    return MetaArray(shape, input._data.dtype)


def _check_expands(op, source, target):
    """Raise as PyTorch's ``expand`` does unless ``source`` broadcasts to exactly ``target``."""
    source, target = tuple(source), tuple(target)
    ok = len(source) <= len(target)
    if ok:
        for s, t in zip(reversed(source), reversed(target)):
            if s != t and s != 1:
                ok = False
                break
    if not ok:
        bad = next((i for i, (s, t) in enumerate(zip(reversed(source), reversed(target))) if s != t and s != 1), 0)
        dim = len(target) - 1 - bad
        raise RuntimeError(
            f"The expanded size of the tensor ({target[dim] if target else 0}) must match the existing size "
            f"({source[len(source) - 1 - bad] if source else 0}) at non-singleton dimension {dim}.  Target sizes: "
            f"{_fmt(target)}.  Tensor sizes: {_fmt(source)}"
        )


def _linear_cpu(input, weight, bias=None):
    x, w = input._data, weight._data
    lead = x.shape[:-1]
    if x.ndim > 2:  # one BLAS call over all leading dims
        x = x.reshape(-1, x.shape[-1])
    out = _matmul_np(x, w.T)
    out = out.reshape(lead + out.shape[1:]) if x.ndim == 2 else out
    if bias is not None:
        out = np.asarray(out)
        if out.ndim == 0:
            out = np.asarray(out + bias._data, dtype=out.dtype)
        else:
            out += bias._data
    return np.asarray(out)


def _linear_decomp(input, weight, bias=None):
    out = _E.matmul(input, weight.t() if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


linear = _composite("linear", _linear_meta, cpu=_linear_cpu, decomposition=_linear_decomp, tags=_NN_ONLY)


def _bilinear_meta(input1, input2, weight, bias=None):
    """Bilinear map ``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``.

    Args:
        input1 (Tensor): ``(*, in1_features)``.
        input2 (Tensor): ``(*, in2_features)``, with the same leading dims as ``input1``.
        weight (Tensor): ``(out_features, in1_features, in2_features)``.
        bias (Tensor, optional): ``(out_features,)``.

    Returns:
        Tensor: ``(*, out_features)``.

    Raises:
        RuntimeError: for mismatched shapes or dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> w = ember.ones(1, 2, 2)
        >>> ember.bilinear(ember.tensor([[1.0, 2.0]]), ember.tensor([[3.0, 4.0]]), w)
        tensor([[21.]])
    """
    for name, t, pos in (("input1", input1, 1), ("input2", input2, 2), ("weight", weight, 3)):
        _check_tensor("bilinear", name, t, pos)
    _check_optional_tensor("bilinear", "bias", bias, 4)
    if not input1.dtype is input2.dtype is weight.dtype or (bias is not None and bias.dtype is not weight.dtype):
        names = f"input1: {_C_TYPE_NAMES[input1.dtype.name]}, input2: {_C_TYPE_NAMES[input2.dtype.name]}, "
        names += f"weight: {_C_TYPE_NAMES[weight.dtype.name]}"
        if bias is not None:
            names += f", bias: {_C_TYPE_NAMES[bias.dtype.name]}"
        raise RuntimeError(f"All tensors must have the same dtype, got {names}")
    if input1.ndim != input2.ndim:
        raise RuntimeError(
            f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}"
        )
    if input1.ndim == 0:
        raise RuntimeError("bilinear(): input dimensions must be at least 1D, got 0D")
    for i in range(input1.ndim - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match at dim {i}: got {input1.shape[i]} and "
                f"{input2.shape[i]}"
            )
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D (out, in1, in2), got {weight.ndim}-D")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but expected {weight.shape[1]}"
        )
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(
            f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but expected {weight.shape[2]}"
        )
    shape = tuple(input1.shape[:-1]) + (weight.shape[0],)
    if bias is not None:
        if bias.ndim == 0:
            raise IndexError("Dimension specified as 0 but tensor has no dimensions")
        if bias.shape[0] != weight.shape[0]:
            raise RuntimeError(
                f"bilinear(): bias size does not match weight size: got {bias.shape[0]} but expected {weight.shape[0]}"
            )
        _check_expands("bilinear", bias.shape, shape)
    if input1.dtype is D.bool:
        raise _not_implemented("bmm", input1.dtype)
    return MetaArray(shape, weight._data.dtype)


def _bilinear_cpu(input1, input2, weight, bias=None):
    x1, x2, w = input1._data, input2._data, weight._data
    out_f, in1, in2 = w.shape
    lead = x1.shape[:-1]
    a = x1.reshape(-1, in1)
    b = x2.reshape(-1, in2)
    # (N, in2) @ (in2, out * in1) -> (N, out, in1), then contract in1 with input1
    t = _matmul_np(b, w.reshape(out_f * in1, in2).T).reshape(-1, out_f, in1)
    if t.dtype in _HALF_TYPES:
        out = np.einsum("noi,ni->no", t.astype(_F32), a.astype(_F32)).astype(t.dtype)
    else:
        out = np.einsum("noi,ni->no", t, a)
    out = out.reshape(lead + (out_f,))
    if bias is not None:
        out += bias._data
    return out


def _bilinear_decomp(input1, input2, weight, bias=None):
    out_f, in1, in2 = weight.shape
    t = _E.matmul(input2, weight.reshape(out_f * in1, in2).t())
    t = t.reshape(tuple(input2.shape[:-1]) + (out_f, in1))
    out = _E.sum(t * _E.unsqueeze(input1, -2), -1).to(weight.dtype)
    return out if bias is None else out + bias


bilinear = _composite("bilinear", _bilinear_meta, cpu=_bilinear_cpu, decomposition=_bilinear_decomp, tags=_NN)


# =====================================================================================================
# Normalization
# =====================================================================================================


def _check_norm_params(input, params):
    """PyTorch's CPU rule for normalization parameters: all of one dtype, the input's, or float32 for half inputs.

    Raises:
        RuntimeError: for mixed dtypes.
    """
    dtypes = {p.dtype for p in params if p is not None}
    if not dtypes:
        return
    if len(dtypes) > 1:
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    (param,) = dtypes
    if param is input.dtype:
        return
    if input.dtype in (D.float16, D.bfloat16):
        if param is not D.float32:
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        return
    raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _param_view(p, ndim):
    """A per-channel numpy array (``(C,)``) shaped ``(C, 1, ..., 1)`` to broadcast against dim 1 of ``ndim`` dims."""
    return p.reshape((-1,) + (1,) * (ndim - 2))


def _tensor_param_view(p, ndim):
    return p.reshape((-1,) + (1,) * (ndim - 2))


def _batch_norm_meta(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                     eps=1e-05):
    """Batch normalization (Ioffe and Szegedy, 2015) over dim 1 (the channels).

    ``(x - mean) / sqrt(var + eps) * weight + bias`` per channel. In training
    the statistics are those of the batch (over every dim but 1, variance
    biased) and ``running_mean``/``running_var`` (when given) are updated in
    place: ``running = (1 - momentum) * running + momentum * batch_stat``, with
    the unbiased variance. Otherwise the running statistics are used.

    Args:
        input (Tensor): ``(N, C, *)``, floating point.
        running_mean (Tensor or None): ``(C,)``.
        running_var (Tensor or None): ``(C,)``.
        weight (Tensor, optional): ``(C,)`` scale.
        bias (Tensor, optional): ``(C,)`` shift.
        training (bool): use and accumulate batch statistics.
        momentum (float): weight of the new statistics in the running ones.
        eps (float): added to the variance.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        ValueError: in training with one value per channel, or only one running statistic.
        RuntimeError: for missing running statistics in evaluation, parameters of the wrong size or dtype.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1.0, 10.0], [3.0, 30.0]])
        >>> ember.batch_norm(x, None, None, training=True)
        tensor([[-1.0000, -1.0000],
                [ 1.0000,  1.0000]])
    """
    _check_tensor("batch_norm", "input", input)
    for name, t, pos in (("running_mean", running_mean, 2), ("running_var", running_var, 3), ("weight", weight, 4),
                         ("bias", bias, 5)):
        _check_optional_tensor("batch_norm", name, t, pos)
    if training:
        if (running_mean is None) != (running_var is None):
            raise ValueError("running_mean and running_var must either both be None or neither be None")
        shape = input.shape
        count = shape[0] * math.prod(shape[2:]) if input.ndim >= 2 else 1
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {_size(shape)}")
    else:
        if running_mean is None:
            raise RuntimeError("running_mean must be defined in evaluation mode")
        if running_var is None:
            raise RuntimeError("running_var must be defined in evaluation mode")
    channels = input.shape[1] if input.ndim >= 2 else 0
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    _check_floating("batch_norm", input)
    if running_mean is not None and running_var is not None and running_mean.dtype is not running_var.dtype:
        raise RuntimeError(
            f"expected scalar type {_torch_name(running_var.dtype)} but found {_torch_name(running_mean.dtype)}"
        )
    _check_norm_params(input, (weight, bias, running_mean, running_var))
    return MetaArray(input._data.shape, input._data.dtype)


def _update_running_np(stat, new, momentum):
    """``stat = (1 - momentum) * stat + momentum * new`` in place (numpy ``new``), bumping ``stat``'s version."""
    data = stat._data
    updated = _compute(data).reshape(-1) * (1 - momentum) + new.reshape(-1) * momentum
    np.copyto(data, updated.reshape(data.shape).astype(data.dtype, copy=False), casting="unsafe")
    stat._bump_version()


def _normalize_np(x, mean, var, eps, weight, bias, ndim):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` with per-channel numpy parameters along dim 1."""
    scale = 1.0 / np.sqrt(var + np.asarray(eps, var.dtype))
    shift = -mean * scale
    if weight is not None:
        w = _compute(weight).astype(scale.dtype, copy=False)
        scale = scale * w
        shift = shift * w
    if bias is not None:
        shift = shift + _compute(bias).astype(shift.dtype, copy=False)
    out = x * _param_view(scale.astype(x.dtype, copy=False), ndim)
    out += _param_view(shift.astype(x.dtype, copy=False), ndim)
    return out


def _batch_norm_cpu(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                    eps=1e-05):
    data = input._data
    x = _compute(data)
    ndim = x.ndim
    if data.size == 0:
        return np.empty(data.shape, data.dtype)
    with np.errstate(all="ignore"):
        if training:
            axes = (0,) + tuple(range(2, ndim))
            mean = x.mean(axis=axes)
            centered = x - _param_view(mean, ndim)
            var = np.square(centered).mean(axis=axes)
            if running_mean is not None:
                count = x.size // x.shape[1]
                _update_running_np(running_mean, mean, momentum)
                _update_running_np(running_var, var * (count / (count - 1)), momentum)
        else:
            mean = _compute(running_mean._data).astype(x.dtype, copy=False)
            var = _compute(running_var._data).astype(x.dtype, copy=False)
        w = None if weight is None else weight._data
        b = None if bias is None else bias._data
        out = _normalize_np(x, mean, var, eps, w, b, ndim)
    return out.astype(data.dtype, copy=False)


def _batch_norm_decomp(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                       eps=1e-05):
    ndim = input.ndim
    if input.numel() == 0:
        return _E.clone(input)
    if training:
        dims = [0] + list(range(2, ndim))
        x = _upcast(input)
        mean = _E.mean(x, dims)
        var = _E.var(x, dims, correction=0)
        if running_mean is not None:
            count = input.numel() // input.shape[1]
            with no_grad():
                _E.copy_(running_mean, running_mean * (1 - momentum) + mean * momentum)
                _E.copy_(running_var, running_var * (1 - momentum) + var * (momentum * count / (count - 1)))
    else:
        mean, var = running_mean, running_var
    return _apply_channel_norm(input, mean, var, eps, weight, bias)


def _apply_channel_norm(input, mean, var, eps, weight, bias):
    """``(input - mean) * rsqrt(var + eps) * weight + bias`` with per-channel ``(C,)`` tensors along dim 1."""
    ndim = input.ndim
    x = _upcast(input)
    out = (x - _tensor_param_view(mean, ndim)) * _tensor_param_view(_E.rsqrt(var + eps), ndim)
    if weight is not None:
        out = out * _tensor_param_view(weight, ndim)
    if bias is not None:
        out = out + _tensor_param_view(bias, ndim)
    return out.to(input.dtype)


batch_norm = _composite(
    "batch_norm", _batch_norm_meta, cpu=_batch_norm_cpu, decomposition=_batch_norm_decomp, tags=_NN
)


def _instance_norm_meta(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                        momentum=0.1, eps=1e-05):
    """Instance normalization (Ulyanov et al., 2016): each ``(sample, channel)`` over its spatial dims.

    With ``use_input_stats`` the statistics are those of each instance, and the
    running statistics (when given) are updated in place with their average over
    the batch; otherwise the running statistics are used.

    Args:
        input (Tensor): ``(N, C, *)``, floating point, with more than one spatial element.
        running_mean (Tensor, optional): ``(C,)``.
        running_var (Tensor, optional): ``(C,)``.
        weight (Tensor, optional): ``(C,)`` scale.
        bias (Tensor, optional): ``(C,)`` shift.
        use_input_stats (bool): normalize with the statistics of each instance.
        momentum (float): weight of the new statistics in the running ones.
        eps (float): added to the variance.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        ValueError: with ``use_input_stats`` and one spatial element.
        RuntimeError: for missing running statistics without ``use_input_stats``, or parameters of a wrong
            size or dtype.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.instance_norm(ember.tensor([[[1.0, 3.0], [0.0, 10.0]]]))
        tensor([[[-1.0000,  1.0000],
                 [-1.0000,  1.0000]]])
    """
    _check_tensor("instance_norm", "input", input)
    for name, t, pos in (("running_mean", running_mean, 2), ("running_var", running_var, 3), ("weight", weight, 4),
                         ("bias", bias, 5)):
        _check_optional_tensor("instance_norm", name, t, pos)
    shape = input.shape
    if use_input_stats:
        if input.ndim < 2 or math.prod(shape[2:]) == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size {_size(shape)}")
    elif running_mean is None or running_var is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    n, c = shape[0], shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {n * c} elements not {n * t.numel()}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {n * c} elements not {n * t.numel()}")
    _check_floating("batch_norm", input)
    _check_norm_params(input, (weight, bias, running_mean, running_var))
    return MetaArray(input._data.shape, input._data.dtype)


def _instance_norm_cpu(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                       momentum=0.1, eps=1e-05):
    data = input._data
    if data.size == 0:
        return np.empty(data.shape, data.dtype)
    x = _compute(data)
    n, c = x.shape[:2]
    axes = tuple(range(2, x.ndim))
    with np.errstate(all="ignore"):
        if use_input_stats:
            mean = x.mean(axis=axes, keepdims=True)
            centered = x - mean
            var = np.square(centered).mean(axis=axes, keepdims=True)
            if running_mean is not None:
                count = x[0, 0].size
                _update_running_np(running_mean, mean.reshape(n, c).mean(axis=0), momentum)
                _update_running_np(running_var, (var.reshape(n, c) * (count / (count - 1))).mean(axis=0), momentum)
            out = centered / np.sqrt(var + np.asarray(eps, x.dtype))
        else:
            mean = _compute(running_mean._data).astype(x.dtype, copy=False)
            var = _compute(running_var._data).astype(x.dtype, copy=False)
            out = _normalize_np(x, mean, var, eps, None, None, x.ndim)
        if weight is not None:
            out *= _param_view(_compute(weight._data).astype(x.dtype, copy=False), x.ndim)
        if bias is not None:
            out += _param_view(_compute(bias._data).astype(x.dtype, copy=False), x.ndim)
    return out.astype(data.dtype, copy=False)


def _instance_norm_decomp(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                          momentum=0.1, eps=1e-05):
    if input.numel() == 0:
        return _E.clone(input)
    if not use_input_stats:
        return _apply_channel_norm(input, running_mean, running_var, eps, weight, bias)
    dims = list(range(2, input.ndim))
    x = _upcast(input)
    mean = _E.mean(x, dims, keepdim=True)
    var = _E.var(x, dims, correction=0, keepdim=True)
    if running_mean is not None:
        n, c = input.shape[:2]
        count = input.numel() // (n * c)
        with no_grad():
            _E.copy_(running_mean, running_mean * (1 - momentum) + _E.mean(mean.reshape(n, c), 0) * momentum)
            unbiased = _E.mean(var.reshape(n, c), 0) * (count / (count - 1))
            _E.copy_(running_var, running_var * (1 - momentum) + unbiased * momentum)
    out = (x - mean) * _E.rsqrt(var + eps)
    if weight is not None:
        out = out * _tensor_param_view(weight, input.ndim)
    if bias is not None:
        out = out + _tensor_param_view(bias, input.ndim)
    return out.to(input.dtype)


instance_norm = _composite(
    "instance_norm", _instance_norm_meta, cpu=_instance_norm_cpu, decomposition=_instance_norm_decomp, tags=_NN
)


def _normalized_shape(op, input, normalized_shape, rms=False):
    """``normalized_shape`` as a tuple, checked against ``input``'s trailing dims."""
    if isinstance(normalized_shape, int) and not isinstance(normalized_shape, bool):
        raise TypeError(
            f"{op}(): argument 'normalized_shape' (position 2) must be tuple of ints, not int"
        )
    if not isinstance(normalized_shape, (tuple, list)) or not all(
        hasattr(type(s), "__index__") and not isinstance(s, bool) for s in normalized_shape
    ):
        raise TypeError(
            f"{op}(): argument 'normalized_shape' (position 2) must be tuple of ints, not "
            f"{type(normalized_shape).__name__}"
        )
    shape = tuple(operator.index(s) for s in normalized_shape)
    if not shape:
        raise RuntimeError(
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got "
            "normalized_shape = []"
        )
    k = len(shape)
    if input.ndim < k or tuple(input.shape[-k:]) != shape:
        star = "[*" if rms else "[*, "
        raise RuntimeError(
            f"Given normalized_shape={_fmt(shape)}, expected input with shape {star}{_fmt(shape)[1:]}, but got input "
            f"of size{_fmt(input.shape)}"
        )
    return shape


def _layer_norm_meta(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Layer normalization (Ba et al., 2016) over the trailing ``normalized_shape`` dims.

    ``(x - mean) / sqrt(var + eps) * weight + bias``, mean and (biased)
    variance taken over the last ``len(normalized_shape)`` dims.

    Args:
        input (Tensor): ``(*, *normalized_shape)``, floating point.
        normalized_shape (tuple[int]): the trailing dims to normalize over.
        weight (Tensor, optional): of shape ``normalized_shape``.
        bias (Tensor, optional): of shape ``normalized_shape``.
        eps (float): added to the variance.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: if the shapes don't match or the parameters have another dtype.
        TypeError: if ``normalized_shape`` is not a sequence of ints.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.layer_norm(ember.tensor([[1.0, 3.0], [2.0, 2.0]]), (2,))
        tensor([[-1.0000,  1.0000],
                [ 0.0000,  0.0000]])
    """
    _check_tensor("layer_norm", "input", input)
    _check_optional_tensor("layer_norm", "weight", weight, 3)
    _check_optional_tensor("layer_norm", "bias", bias, 4)
    shape = _normalized_shape("layer_norm", input, normalized_shape)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{_fmt(t.shape)} and normalized_shape = {_fmt(shape)}"
            )
    _check_floating("LayerNormKernelImpl", input)
    if weight is not None and bias is not None and weight.dtype is not bias.dtype:
        raise RuntimeError(f"expected scalar type {_torch_name(weight.dtype)} but found {_torch_name(bias.dtype)}")
    _check_norm_params(input, (weight, bias))
    return MetaArray(input._data.shape, input._data.dtype)


def _layer_norm_cpu(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    data = input._data
    k = len(normalized_shape)
    inner = math.prod(data.shape[data.ndim - k:])
    if data.size == 0:
        return np.empty(data.shape, data.dtype)
    x = _compute(data)
    if x.dtype in _C_FLOATS:
        params = [
            None if p is None else _contiguous(_compute(p._data).astype(x.dtype, copy=False).reshape(-1))
            for p in (weight, bias)
        ]
        return _C.layer_norm(_contiguous(x), inner, *params, float(eps)).astype(data.dtype, copy=False)
    x = x.reshape(-1, inner)
    with np.errstate(all="ignore"):
        mean = np.add.reduce(x, axis=1, keepdims=True)
        mean /= inner
        out = x - mean
        var = np.einsum("ij,ij->i", out, out).reshape(-1, 1)
        var /= inner
        var += np.asarray(eps, var.dtype)
        np.sqrt(var, out=var)
        np.reciprocal(var, out=var)
        out *= var
        if weight is not None:
            out *= _compute(weight._data).reshape(-1).astype(out.dtype, copy=False)
        if bias is not None:
            out += _compute(bias._data).reshape(-1).astype(out.dtype, copy=False)
    return out.reshape(data.shape).astype(data.dtype, copy=False)


def _layer_norm_decomp(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    dims = list(range(input.ndim - len(normalized_shape), input.ndim))
    if input.numel() == 0:
        return _E.clone(input)
    x = _upcast(input)
    mean = _E.mean(x, dims, keepdim=True)
    var = _E.var(x, dims, correction=0, keepdim=True)
    out = (x - mean) * _E.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.to(input.dtype)


layer_norm = _composite(
    "layer_norm", _layer_norm_meta, cpu=_layer_norm_cpu, decomposition=_layer_norm_decomp, tags=_NN
)


def _group_norm_meta(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Group normalization (Wu and He, 2018): the channels are split into ``num_groups`` groups, each
    normalized (per sample) over its channels and the spatial dims.

    Args:
        input (Tensor): ``(N, C, *)``, floating point, ``C`` divisible by ``num_groups``.
        num_groups (int): the number of groups.
        weight (Tensor, optional): ``(C,)`` scale.
        bias (Tensor, optional): ``(C,)`` shift.
        eps (float): added to the variance.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: for fewer than 2 dims, ``C`` not divisible by ``num_groups``, or parameters of a wrong
            size or dtype.
        ZeroDivisionError: if ``num_groups`` is 0.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.group_norm(ember.tensor([[1.0, 3.0, 0.0, 4.0]]), 2)
        tensor([[-1.0000,  1.0000, -1.0000,  1.0000]])
    """
    _check_tensor("group_norm", "input", input)
    num_groups = _int_arg("group_norm", "num_groups", num_groups, 2)
    _check_optional_tensor("group_norm", "weight", weight, 3)
    _check_optional_tensor("group_norm", "bias", bias, 4)
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    channels = input.shape[1]
    if num_groups == 0:
        raise ZeroDivisionError("integer division or modulo by zero")
    if num_groups < 0 or channels % num_groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input of shape "
            f"{_fmt(input.shape)} and num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != channels):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, but got {name} "
                f"of shape {_fmt(t.shape)} and input of shape {_fmt(input.shape)}"
            )
    _check_floating("GroupNormKernelImpl", input)
    _check_norm_params(input, (weight, bias))
    return MetaArray(input._data.shape, input._data.dtype)


def _group_norm_cpu(input, num_groups, weight=None, bias=None, eps=1e-05):
    data = input._data
    if data.size == 0:
        return np.empty(data.shape, data.dtype)
    x = _compute(data)
    n = x.shape[0]
    c = x.shape[1]
    grouped = x.reshape(n, num_groups, -1)
    with np.errstate(all="ignore"):
        mean = grouped.mean(axis=2, keepdims=True)
        out = grouped - mean
        size = out.shape[2]
        var = np.einsum("ngk,ngk->ng", out, out) / np.asarray(size, x.dtype)
        rstd = 1 / np.sqrt(var + np.asarray(eps, var.dtype))  # (N, G)
        # one scale (and shift) per (sample, channel), applied in one pass each
        scale = np.repeat(rstd, c // num_groups, axis=1)  # (N, C)
        if weight is not None:
            scale = scale * _compute(weight._data).astype(x.dtype, copy=False)
        out = out.reshape(x.shape)
        out *= scale.reshape(scale.shape + (1,) * (x.ndim - 2))
        if bias is not None:
            out += _param_view(_compute(bias._data).astype(x.dtype, copy=False), x.ndim)
    return out.astype(data.dtype, copy=False)


def _group_norm_decomp(input, num_groups, weight=None, bias=None, eps=1e-05):
    if input.numel() == 0:
        return _E.clone(input)
    n = input.shape[0]
    grouped = _upcast(input).reshape(n, num_groups, -1)
    mean = _E.mean(grouped, [2], keepdim=True)
    var = _E.var(grouped, [2], correction=0, keepdim=True)
    out = ((grouped - mean) * _E.rsqrt(var + eps)).reshape(tuple(input.shape))
    if weight is not None:
        out = out * _tensor_param_view(weight, input.ndim)
    if bias is not None:
        out = out + _tensor_param_view(bias, input.ndim)
    return out.to(input.dtype)


group_norm = _composite(
    "group_norm", _group_norm_meta, cpu=_group_norm_cpu, decomposition=_group_norm_decomp, tags=_NN
)


def _rms_norm_meta(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalization (Zhang and Sennrich, 2019) over the trailing ``normalized_shape`` dims.

    ``x / sqrt(mean(x**2) + eps) * weight``; ``eps`` defaults to the machine
    epsilon of ``input``'s dtype.

    Args:
        input (Tensor): ``(*, *normalized_shape)``, floating point or complex.
        normalized_shape (tuple[int]): the trailing dims to normalize over.
        weight (Tensor, optional): of shape ``normalized_shape``.
        eps (float, optional): added to the mean square.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: if the shapes don't match.
        NotImplementedError: for integer and bool inputs.

    Example:
        >>> import ember
        >>> ember.rms_norm(ember.tensor([[3.0, 4.0]]), (2,), eps=0.0)
        tensor([[0.8485, 1.1314]])
    """
    _check_tensor("rms_norm", "input", input)
    _check_optional_tensor("rms_norm", "weight", weight, 3)
    shape = _normalized_shape("rms_norm", input, normalized_shape, rms=True)
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(
            f"Expected weight to be of same shape as normalized_shape, but got weight of shape {_fmt(weight.shape)} "
            f"and normalized_shape = {_fmt(shape)}"
        )
    if input.dtype.category < D.FLOATING:
        raise _not_implemented("rms_norm", input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _rms_norm_cpu(input, normalized_shape, weight=None, eps=None):
    data = input._data
    if eps is None:
        eps = D.finfo(input.dtype).eps
    k = len(normalized_shape)
    axes = tuple(range(data.ndim - k, data.ndim))
    if data.size == 0:
        return np.empty(data.shape, data.dtype)
    x = _compute(data)
    with np.errstate(all="ignore"):
        ms = np.mean(x * x, axis=axes, keepdims=True)
        ms += np.asarray(eps, ms.real.dtype)
        out = x / np.sqrt(ms)
        if weight is not None:
            out = out * _compute(weight._data)
    return out.astype(data.dtype, copy=False)


def _rms_norm_decomp(input, normalized_shape, weight=None, eps=None):
    if eps is None:
        eps = D.finfo(input.dtype).eps
    dims = list(range(input.ndim - len(normalized_shape), input.ndim))
    x = _upcast(input)
    out = x * _E.rsqrt(_E.mean(x * x, dims, keepdim=True) + eps)
    if weight is not None:
        out = out * weight
    return out.to(input.dtype)


rms_norm = _composite("rms_norm", _rms_norm_meta, cpu=_rms_norm_cpu, decomposition=_rms_norm_decomp, tags=_NN)


def _local_response_norm_meta(input, size, alpha=0.0001, beta=0.75, k=1.0):
    """Local response normalization (Krizhevsky et al., 2012) across channels (dim 1).

    ``x / (k + alpha * mean(x**2 over a window of size channels)) ** beta``; the
    window around channel ``c`` covers ``c - size // 2`` to ``c + (size - 1) // 2``,
    padded with zeros (the mean always divides by ``size``).

    Args:
        input (Tensor): ``(N, C, *)`` with at least 3 dims, floating point.
        size (int): channels in the window, ``> 0``.
        alpha (float): multiplicative factor.
        beta (float): exponent.
        k (float): additive factor.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        ValueError: for fewer than 3 dims.
        RuntimeError: if ``size <= 0``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.local_response_norm(ember.ones(1, 2, 1), 2, alpha=1.0, beta=1.0)
        tensor([[[0.6667],
                 [0.5000]]])
    """
    _check_tensor("local_response_norm", "input", input)
    size = _int_arg("local_response_norm", "size", size, 2)
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return MetaArray(input._data.shape, input._data.dtype)
    if size <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {size} kW: 1")
    _check_floating("avg_pool2d", input)
    return MetaArray(input._data.shape, input._data.dtype)


def _local_response_norm_cpu(input, size, alpha=0.0001, beta=0.75, k=1.0):
    data = input._data
    if data.size == 0:
        return np.empty(data.shape, data.dtype)
    x = _compute(data)
    channels = x.shape[1]
    sq = np.square(x)
    before, after = size // 2, (size - 1) // 2
    pad = [(0, 0)] * x.ndim
    pad[1] = (before, after)
    padded = np.pad(sq, pad)
    csum = np.cumsum(padded, axis=1)
    zero = np.zeros_like(np.take(csum, [0], axis=1))
    csum = np.concatenate([zero, csum], axis=1)
    window = np.take(csum, np.arange(size, size + channels), axis=1) - np.take(csum, np.arange(channels), axis=1)
    with np.errstate(all="ignore"):
        div = window * np.asarray(alpha / size, x.dtype)
        div += np.asarray(k, x.dtype)
        div **= np.asarray(beta, x.dtype)
        return (x / div).astype(data.dtype, copy=False)


def _local_response_norm_decomp(input, size, alpha=0.0001, beta=0.75, k=1.0):
    if input.numel() == 0:
        return _E.clone(input)
    channels = input.shape[1]
    sq = input * input
    pad = [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2]
    padded = _E.pad(sq, pad)
    windows = [_E.narrow(padded, 1, i, channels) for i in range(size)]
    total = windows[0]
    for w in windows[1:]:
        total = total + w
    div = _E.pow(total * (alpha / size) + k, beta)
    return input / div


local_response_norm = _composite(
    "local_response_norm", _local_response_norm_meta, cpu=_local_response_norm_cpu,
    decomposition=_local_response_norm_decomp, tags=_NN_ONLY,
)


def _vector_norm_np(x, p, axis, keepdims=True):
    """The ``p``-norm of ``x`` along ``axis`` (real result), as ``linalg.vector_norm``."""
    a = np.abs(x)
    if p == 2:
        return np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))
    if p == 1:
        return np.sum(a, axis=axis, keepdims=keepdims)
    if p == math.inf:
        return np.max(a, axis=axis, keepdims=keepdims, initial=0) if a.size else np.sum(a, axis=axis, keepdims=keepdims)
    if p == -math.inf:
        return np.min(a, axis=axis, keepdims=keepdims)
    if p == 0:
        return np.sum(a != 0, axis=axis, keepdims=keepdims).astype(a.dtype)
    with np.errstate(all="ignore"):
        return np.power(np.sum(np.power(a, p), axis=axis, keepdims=keepdims), 1.0 / p)


def _normalize_meta(input, p=2.0, dim=1, eps=1e-12):
    """``input / max(norm_p(input, dim), eps)``: unit ``p``-norm vectors along ``dim``.

    Args:
        input (Tensor): floating point or complex.
        p (float): the norm's exponent (``inf``, ``-inf`` and 0 included).
        dim (int): the dimension of the vectors.
        eps (float): lower bound of the norm (avoids division by zero).

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        RuntimeError: for integer and bool inputs.
        IndexError: if ``dim`` is out of range.

    Example:
        >>> import ember
        >>> ember.nn.functional.normalize(ember.tensor([[3.0, 4.0]]))
        tensor([[0.6000, 0.8000]])
    """
    _check_tensor("normalize", "input", input)
    _number("normalize", "p", p, 2)
    dim = _int_arg("normalize", "dim", dim, 3)
    wrap_dim(dim, input.ndim)
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{_torch_name(input.dtype)}"
        )
    return MetaArray(input._data.shape, input._data.dtype)


def _normalize_cpu(input, p=2.0, dim=1, eps=1e-12):
    data = input._data
    x = _compute(data)
    axis = wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        x, axis = x.reshape(1), 0
    with np.errstate(all="ignore"):
        norm = _vector_norm_np(x, float(p), axis)
        norm = np.maximum(norm, np.asarray(eps, norm.dtype))
        out = x / norm
    return out.reshape(data.shape).astype(data.dtype, copy=False)


def _normalize_decomp(input, p=2.0, dim=1, eps=1e-12):
    norm = _E.linalg_vector_norm(input, p, dim, keepdim=True) if "linalg_vector_norm" in registry else _E.norm(
        input, p, dim, keepdim=True)
    return input / _E.clamp(norm, min=eps)


normalize = _composite(
    "normalize", _normalize_meta, cpu=_normalize_cpu, decomposition=_normalize_decomp, has_out=True, tags=_NN_ONLY
)


# =====================================================================================================
# Embeddings and one-hot
# =====================================================================================================

_INDEX_TYPES = (D.int32, D.int64)
_TORCH_TENSOR_TYPES = {
    "bool": "BoolTensor", "uint8": "ByteTensor", "int8": "CharTensor", "int16": "ShortTensor", "int32": "IntTensor",
    "int64": "LongTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor", "float32": "FloatTensor",
    "float64": "DoubleTensor", "complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor",
}


def _check_indices(op, name, t, position=1):
    if t.dtype not in _INDEX_TYPES:
        raise RuntimeError(
            f"Expected tensor for argument #{position} '{name}' to have one of the following scalar types: Long, Int; "
            f"but got ember.{_TORCH_TENSOR_TYPES[t.dtype.name]} instead (while checking arguments for {op})"
        )


def _padding_index(padding_idx, num_embeddings):
    """``padding_idx`` made non-negative, or None.

    Raises:
        AssertionError: as PyTorch, if it is out of range (raised explicitly, so ``python -O`` keeps it).
    """
    if padding_idx is None:
        return None
    if padding_idx >= 0:
        if padding_idx >= num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
        return padding_idx
    if padding_idx < -num_embeddings:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx + num_embeddings


def _renorm_rows_np(weight, indices, max_norm, norm_type):
    """Rescale (in place) the rows of ``weight`` used by ``indices`` whose ``norm_type``-norm exceeds ``max_norm``."""
    rows = np.unique(indices.reshape(-1))
    if rows.size == 0:
        return
    data = weight._data
    values = _compute(data[rows])
    norms = _vector_norm_np(values, float(norm_type), 1)
    with np.errstate(all="ignore"):
        scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    data[rows] = (values * scale).astype(data.dtype)
    weight._bump_version()


def _check_index_range(indices, num_embeddings):
    if indices.size and (indices.min() < 0 or indices.max() >= num_embeddings):
        raise IndexError("index out of range in self")


def _embedding_meta(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                    sparse=False):
    """Look up rows of ``weight``: ``weight[input]``.

    With ``max_norm``, the rows that ``input`` uses and whose ``norm_type``-norm
    exceeds ``max_norm`` are first rescaled **in place** in ``weight`` to norm
    ``max_norm`` (as PyTorch does). ``padding_idx`` only matters to gradients
    (that row gets none); ``scale_grad_by_freq`` and ``sparse`` too.

    Args:
        input (Tensor): int64 or int32 indices, any shape.
        weight (Tensor): ``(num_embeddings, embedding_dim)``.
        padding_idx (int, optional): a row index, may be negative.
        max_norm (float, optional): renormalize the used rows to at most this norm.
        norm_type (float): the ``p`` of the norm for ``max_norm``.
        scale_grad_by_freq (bool): gradient option (no effect on values).
        sparse (bool): gradient option (no effect on values).

    Returns:
        Tensor: ``(*input.shape, embedding_dim)`` of ``weight``'s dtype.

    Raises:
        RuntimeError: for non-integer indices or a weight that is not 2-D.
        IndexError: for an index outside ``[0, num_embeddings)``.
        AssertionError: for a ``padding_idx`` out of range (as PyTorch).

    Example:
        >>> import ember
        >>> w = ember.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
        >>> ember.embedding(ember.tensor([2, 1]), w)
        tensor([[3., 4.],
                [1., 2.]])
    """
    _check_tensor("embedding", "input", input)
    _check_tensor("embedding", "weight", weight, 2)
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    _padding_index(padding_idx, weight.shape[0])
    _check_indices("embedding", "indices", input)
    return MetaArray(tuple(input.shape) + (weight.shape[1],), weight._data.dtype)


def _embedding_cpu(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                   sparse=False):
    indices = input._data
    if max_norm is not None:
        _check_index_range(indices, weight.shape[0])
        _renorm_rows_np(weight, indices, max_norm, norm_type)
    data = weight._data
    if data.shape[1] > 1 and data.strides[1] != data.itemsize:  # rows not contiguous: numpy gathers them
        _check_index_range(indices, data.shape[0])
        return np.take(data, indices, axis=0)
    # ember._C.embedding copies whole rows (memcpy, OpenMP over indices) and raises the IndexError of an index
    # out of range itself (np.ascontiguousarray would make a 0-dim index 1-dim)
    return _C.embedding(data, indices if indices.flags.c_contiguous else np.ascontiguousarray(indices))


def _renorm_rows(weight, input, max_norm, norm_type):
    """Decomposition of the ``max_norm`` renormalization, in ember ops (not recorded by autograd)."""
    with no_grad():
        rows = _E.unique(input.reshape(-1))
        values = _E.index_select(weight, 0, rows)
        norms = _vector_norm(values, norm_type, 1, keepdim=True)
        scale = _E.where(norms > max_norm, max_norm / (norms + 1e-7), _E.ones_like(norms))
        _E.index_copy_(weight, 0, rows, (values * scale).to(weight.dtype))


def _embedding_decomp(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                      sparse=False):
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    rows = _E.index_select(weight, 0, input.reshape(-1))
    return rows.reshape(tuple(input.shape) + (weight.shape[1],))


embedding = _composite("embedding", _embedding_meta, cpu=_embedding_cpu, decomposition=_embedding_decomp, tags=_NN)


def _embedding_bag_meta(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                        mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                        padding_idx=None):
    """Sums, means or maxima of bags of embedding rows, without materializing the rows.

    A 2-D ``input`` ``(B, L)`` holds ``B`` bags of ``L`` indices. A 1-D
    ``input`` is the concatenation of the bags, which start at ``offsets``
    (the last bag runs to the end, or, with ``include_last_offset``, the last
    offset marks the end). Indices equal to ``padding_idx`` are left out of
    their bag (and of its count for ``'mean'``); an empty bag gives zeros.

    Args:
        input (Tensor): int64 or int32 indices, 1-D or 2-D.
        weight (Tensor): ``(num_embeddings, embedding_dim)``, floating point.
        offsets (Tensor, optional): start of each bag for a 1-D ``input``; increasing, ``offsets[0] == 0``.
        max_norm (float, optional): renormalize the used rows of ``weight`` in place (see :func:`ember.embedding`).
        norm_type (float): the ``p`` of the norm for ``max_norm``.
        scale_grad_by_freq (bool): gradient option (no effect on values).
        mode (str): ``'sum'``, ``'mean'`` or ``'max'``.
        sparse (bool): gradient option (no effect on values).
        per_sample_weights (Tensor, optional): weights of the indices, shaped like ``input`` (``'sum'`` only).
        include_last_offset (bool): ``offsets`` has one more entry, the end of the last bag.
        padding_idx (int, optional): an index to leave out of the bags.

    Returns:
        Tensor: ``(num_bags, embedding_dim)`` of ``weight``'s dtype.

    Raises:
        ValueError: for inconsistent ``input``/``offsets``/``per_sample_weights`` shapes or an unknown mode.
        NotImplementedError: for ``per_sample_weights`` with a mode other than ``'sum'``.
        RuntimeError: for bad offsets, non-integer indices or a non-floating weight.

    Example:
        >>> import ember
        >>> w = ember.tensor([[1.0, 1.0], [2.0, 4.0], [3.0, 0.0]])
        >>> ember.embedding_bag(ember.tensor([0, 1, 2]), w, ember.tensor([0, 2]), mode="sum")
        tensor([[3., 5.],
                [3., 0.]])
    """
    _check_tensor("embedding_bag", "input", input)
    _check_tensor("embedding_bag", "weight", weight, 2)
    _check_optional_tensor("embedding_bag", "offsets", offsets, 3)
    _check_optional_tensor("embedding_bag", "per_sample_weights", per_sample_weights, 9)
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({_size(per_sample_weights.shape)}) is not None, then it must "
            f"have the same shape as the input ({_size(input.shape)})"
        )
    _padding_index(padding_idx, weight.shape[0])
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length "
                f"sequences. However, found offsets of type {type(offsets)}"
            )
        bags = input.shape[0]
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}'). Please open a feature request on GitHub."
        )
    if input.ndim == 2 and input.shape[1] == 0 and input.shape[0] > 0:
        raise RuntimeError("step must be nonzero")
    _check_indices("embedding_bag", "indices", input)
    if offsets is not None:
        _check_indices("embedding_bag", "offsets", offsets, 3)
    if weight.dtype.category != D.FLOATING:
        raise RuntimeError(
            "Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, BFloat16, "
            f"Float, Double; but got ember.{_TORCH_TENSOR_TYPES[weight.dtype.name]} instead (while checking "
            "arguments for embedding_bag)"
        )
    if per_sample_weights is not None and per_sample_weights.dtype is not weight.dtype:
        raise RuntimeError(
            "Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
            f"'per_sample_weights'; but type ember.{_TORCH_TENSOR_TYPES[weight.dtype.name]} does not equal "
            f"ember.{_TORCH_TENSOR_TYPES[per_sample_weights.dtype.name]} (while checking arguments for embedding_bag)"
        )
    return MetaArray((max(bags, 0), weight.shape[1]), weight._data.dtype)


def _bag_bounds(input, offsets, include_last_offset):
    """``(indices, starts, ends)`` of the bags as numpy arrays (1-D indices, one start/end per bag).

    Raises:
        RuntimeError: for offsets that don't start at 0, decrease, or pass the end of ``input``.
    """
    indices = input._data
    if indices.ndim == 2:
        b, length = indices.shape
        starts = np.arange(b, dtype=np.int64) * length
        return indices.reshape(-1), starts, starts + length
    n = indices.shape[0]
    offs = offsets._data.astype(np.int64)
    if offs.size:
        if offs[0] != 0:
            raise RuntimeError(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
                f"However, got {offs[0]}"
            )
        if offs[-1] > n:
            raise RuntimeError(
                f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {offs[-1]}"
            )
        if np.any(np.diff(offs) < 0):
            raise RuntimeError("embedding_bag: offsets must be non-decreasing")
    if include_last_offset:
        starts, ends = offs[:-1], offs[1:]
    else:
        starts, ends = offs, np.append(offs[1:], n)
    return indices, starts, ends


def _embedding_bag_cpu(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                       mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                       padding_idx=None):
    indices, starts, ends = _bag_bounds(input, offsets, include_last_offset)
    num, dim = weight.shape
    if indices.size and (indices.min() < 0 or indices.max() >= num):
        raise RuntimeError(f"embedding_bag: indices must be in [0, {num}), got {int(indices.max())}")
    if max_norm is not None:
        _renorm_rows_np(weight, indices, max_norm, norm_type)
    w = weight._data
    out_dtype = w.dtype
    bags = starts.shape[0]
    if bags == 0:
        return np.zeros((0, dim), out_dtype)
    rows = _compute(np.take(w, indices, axis=0))
    valid = None
    pad = _padding_index(padding_idx, num)
    if pad is not None:
        valid = indices != pad
    if per_sample_weights is not None:
        rows = rows * _compute(per_sample_weights._data).reshape(-1, 1)
    lengths = ends - starts
    nonempty = lengths > 0
    safe_starts = np.minimum(starts, max(indices.shape[0] - 1, 0))
    if mode == "max":
        if valid is not None:
            rows = np.where(valid[:, None], rows, -np.inf)
        if rows.shape[0] == 0:
            return np.zeros((bags, dim), out_dtype)
        out = np.maximum.reduceat(rows, safe_starts, axis=0)
        out[~nonempty] = 0
        out[np.isneginf(out).all(axis=1) & nonempty] = 0
        return out.astype(out_dtype, copy=False)
    if valid is not None:
        rows = rows * valid[:, None]
    if rows.shape[0] == 0:
        return np.zeros((bags, dim), out_dtype)
    out = np.add.reduceat(rows, safe_starts, axis=0)
    out[~nonempty] = 0
    if mode == "mean":
        counts = lengths if valid is None else np.add.reduceat(valid.astype(np.int64), safe_starts) * nonempty
        with np.errstate(all="ignore"):
            out = np.where(counts[:, None] > 0, out / np.maximum(counts, 1)[:, None].astype(out.dtype), 0)
    return out.astype(out_dtype, copy=False)


def _embedding_bag_decomp(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                          mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                          padding_idx=None):
    num, dim = weight.shape
    flat = input.reshape(-1)
    if input.ndim == 2:
        bags, length = input.shape
        bag_of = _E.arange(bags * length, device=input.device) // length
    else:
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        positions = _E.arange(flat.shape[0], device=input.device)
        bag_of = _E.searchsorted(offsets.to(D.int64), positions, right=True) - 1
    if max_norm is not None:
        _renorm_rows(weight, flat, max_norm, norm_type)
    rows = _E.index_select(weight, 0, flat)
    keep = None
    pad = _padding_index(padding_idx, num)
    if pad is not None:
        keep = flat != pad
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    if include_last_offset and input.ndim == 1 and bags >= 0:
        in_range = bag_of < bags
        keep = in_range if keep is None else _E.logical_and(keep, in_range)
        bag_of = _E.clamp(bag_of, max=max(bags - 1, 0))
    zeros = _E.zeros((bags, dim), dtype=weight.dtype, device=weight.device)
    index = bag_of.reshape(-1, 1).expand(-1, dim) if dim else bag_of.reshape(-1, 1)
    if mode == "max":
        if keep is not None:
            rows = _E.where(keep.reshape(-1, 1), rows, _E.full_like(rows, -math.inf))
        out = _E.scatter_reduce(_E.full_like(zeros, -math.inf), 0, index, rows, "amax")
        return _E.where(_E.isneginf(out), zeros, out)
    if keep is not None:
        rows = rows * keep.reshape(-1, 1).to(rows.dtype)
    total = _E.index_add(zeros, 0, bag_of, rows)
    if mode == "sum":
        return total
    ones = _E.ones(flat.shape[0], dtype=weight.dtype, device=weight.device)
    if keep is not None:
        ones = ones * keep.to(weight.dtype)
    counts = _E.index_add(_E.zeros(bags, dtype=weight.dtype, device=weight.device), 0, bag_of, ones)
    return total / _E.clamp(counts, min=1).reshape(-1, 1)


embedding_bag = _composite(
    "embedding_bag", _embedding_bag_meta, cpu=_embedding_bag_cpu, decomposition=_embedding_bag_decomp, tags=_NN
)


def _one_hot_classes(tensor, num_classes):
    """The number of classes of a one_hot call (data-dependent when ``num_classes == -1``)."""
    if tensor.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return num_classes
    if num_classes == -1:
        if tensor.device.type == "meta":
            raise NotImplementedError(
                "one_hot with num_classes=-1 on a meta tensor has a data-dependent shape; pass num_classes"
            )
        return int(tensor._host_array().max()) + 1
    return num_classes


def _one_hot_meta(tensor, num_classes=-1):
    """One-hot encoding of class indices: ``result[..., c] = 1 if tensor[...] == c else 0``.

    Args:
        tensor (Tensor): int64 class indices, ``>= 0``.
        num_classes (int): the number of classes; ``-1`` takes the largest index + 1 (a data-dependent shape).

    Returns:
        Tensor: ``(*tensor.shape, num_classes)``, int64.

    Raises:
        RuntimeError: for a tensor that is not int64, negative indices, indices ``>= num_classes``, or an empty
            tensor with ``num_classes=-1``.

    Example:
        >>> import ember
        >>> ember.nn.functional.one_hot(ember.tensor([0, 2]), 3)
        tensor([[1, 0, 0],
                [0, 0, 1]])
    """
    _check_tensor("one_hot", "tensor", tensor)
    num_classes = _int_arg("one_hot", "num_classes", num_classes, 2)
    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    classes = _one_hot_classes(tensor, num_classes)
    return MetaArray(tuple(tensor.shape) + (max(classes, 0),), np.dtype(np.int64))


def _one_hot_cpu(tensor, num_classes=-1):
    data = tensor._data
    classes = _one_hot_classes(tensor, num_classes)
    if data.size:
        if data.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if data.max() >= classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (data[..., None] == np.arange(max(classes, 0))).astype(np.int64)


def _one_hot_decomp(tensor, num_classes=-1):
    classes = _one_hot_classes(tensor, num_classes)
    return _E.eq(_E.unsqueeze(tensor, -1), _E.arange(classes, device=tensor.device)).to(D.int64)


one_hot = _composite("one_hot", _one_hot_meta, cpu=_one_hot_cpu, decomposition=_one_hot_decomp, tags=_NN_ONLY)


# =====================================================================================================
# Attention
# =====================================================================================================


def _sdpa_shapes(query, key, value, attn_mask, is_causal, enable_gqa, dropout_p):
    """Checks of scaled_dot_product_attention; returns the output shape and the key/value head repeats."""
    for name, t, pos in (("query", query, 1), ("key", key, 2), ("value", value, 3)):
        _check_tensor("scaled_dot_product_attention", name, t, pos)
    _check_optional_tensor("scaled_dot_product_attention", "attn_mask", attn_mask, 4)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
            f"{query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead."
        )
    if not query.dtype is key.dtype is value.dtype:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_C_TYPE_NAMES[query.dtype.name]} key.dtype: {_C_TYPE_NAMES[key.dtype.name]} and value.dtype: "
            f"{_C_TYPE_NAMES[value.dtype.name]} instead."
        )
    if attn_mask is not None and attn_mask.dtype not in (D.bool, D.float32, query.dtype):
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
            f"{_C_TYPE_NAMES[attn_mask.dtype.name]} and  query.dtype: {_C_TYPE_NAMES[query.dtype.name]} instead."
        )
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if query.dtype.category != D.FLOATING:
        raise RuntimeError(f"expected scalar type Float but found {_torch_name(query.dtype)}")
    seq_l, e = query.shape[-2:]
    seq_s, ek = key.shape[-2:]
    if ek != e:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{math.prod(key.shape[:-2])}, {e}] "
            f"but got: [{math.prod(key.shape[:-2])}, {ek}]."
        )
    if value.shape[-2] != seq_s:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{math.prod(value.shape[:-2])}, "
            f"{seq_s}] but got: [{math.prod(value.shape[:-2])}, {value.shape[-2]}]."
        )
    k_batch, v_batch = list(key.shape[:-2]), list(value.shape[:-2])
    repeats = (1, 1)
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and value.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hq % hk or hq % hv:
            raise RuntimeError(
                "Number of heads in key and value must divide the number of heads in query"
            )
        repeats = (hq // hk, hq // hv)
        k_batch[-1] *= repeats[0]
        v_batch[-1] *= repeats[1]
    batch = broadcast_shapes(tuple(query.shape[:-2]), tuple(k_batch), tuple(v_batch))
    if attn_mask is not None:
        scores = batch + (seq_l, seq_s)
        full = broadcast_shapes(scores, tuple(attn_mask.shape))
        if full != scores:
            raise RuntimeError(f"output with shape {_fmt(scores)} doesn't match the broadcast shape {_fmt(full)}")
    return batch + (seq_l, value.shape[-1]), repeats


def _scaled_dot_product_attention_meta(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                       scale=None, enable_gqa=False):
    """Attention (Vaswani et al., 2017): ``softmax(query @ key.mT * scale + mask) @ value``.

    ``scale`` defaults to ``1 / sqrt(E)``. A bool ``attn_mask`` says which keys
    each query may attend to (True = attend); a float mask is added to the
    scores. ``is_causal`` applies the lower-triangular mask (query ``i``
    attends to keys ``0..i``). A query row with every key masked gives zeros.
    With ``enable_gqa`` key/value may have fewer heads (dim -3) than the query;
    each is repeated to match (grouped-query attention). ``dropout_p > 0``
    drops attention weights at random (from :data:`ember.default_generator`).

    Args:
        query (Tensor): ``(*, L, E)``, floating point.
        key (Tensor): ``(*, S, E)``.
        value (Tensor): ``(*, S, Ev)``.
        attn_mask (Tensor, optional): bool, float32 or the query's dtype, broadcastable to ``(*, L, S)``.
        dropout_p (float): dropout probability of the attention weights.
        is_causal (bool): apply a causal mask (then ``attn_mask`` must be None).
        scale (float, optional): the score scale.
        enable_gqa (bool): allow fewer key/value heads than query heads.

    Returns:
        Tensor: ``(*, L, Ev)``.

    Raises:
        RuntimeError: for mismatched shapes or dtypes, a mask with ``is_causal``, or ``dropout_p`` outside [0, 1].

    Example:
        >>> import ember
        >>> q = k = ember.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> v = ember.tensor([[1.0], [3.0]])
        >>> ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        tensor([[1.0000],
                [2.3395]])
    """
    shape, _ = _sdpa_shapes(query, key, value, attn_mask, is_causal, enable_gqa, dropout_p)
    return MetaArray(shape, query._data.dtype)


def _sdpa_mask_np(attn_mask, is_causal, seq_l, seq_s, dtype):
    """The additive mask (a numpy array, -inf where masked) or None."""
    if is_causal:
        allowed = np.tril(np.ones((seq_l, seq_s), dtype=bool))
        return np.where(allowed, np.asarray(0, dtype), np.asarray(-np.inf, dtype))
    if attn_mask is None:
        return None
    m = attn_mask._data
    if m.dtype == np.bool_:
        return np.where(m, np.asarray(0, dtype), np.asarray(-np.inf, dtype))
    return m.astype(dtype)


def _scaled_dot_product_attention_cpu(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                      scale=None, enable_gqa=False):
    shape, (rep_k, rep_v) = _sdpa_shapes(query, key, value, attn_mask, is_causal, enable_gqa, dropout_p)
    q, k, v = _compute(query._data), _compute(key._data), _compute(value._data)
    if rep_k > 1:
        k = np.repeat(k, rep_k, axis=-3)
    if rep_v > 1:
        v = np.repeat(v, rep_v, axis=-3)
    seq_l, e = q.shape[-2:]
    seq_s = k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(e) if e else math.inf
    with np.errstate(all="ignore"):
        scores = np.matmul(q, np.swapaxes(k, -1, -2))
        scores *= np.asarray(scale if e else 1.0, scores.dtype)
        mask = _sdpa_mask_np(attn_mask, is_causal, seq_l, seq_s, scores.dtype)
        if mask is not None:
            scores = scores + mask
        if seq_s == 0:
            return np.zeros(shape, query._data.dtype)
        top = scores.max(axis=-1, keepdims=True)
        dead = np.isneginf(top)
        weights = np.exp(scores - np.where(dead, 0, top))
        total = weights.sum(axis=-1, keepdims=True)
        weights /= np.where(dead, 1, total)
        if dropout_p > 0:
            keep = _numpy_rng(None).random(weights.shape) < 1.0 - dropout_p
            weights = weights * keep / (1.0 - dropout_p) if dropout_p < 1 else weights * 0
        out = np.matmul(weights, v)
    return np.broadcast_to(out, shape).astype(query._data.dtype)


def _scaled_dot_product_attention_decomp(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                         scale=None, enable_gqa=False):
    _, (rep_k, rep_v) = _sdpa_shapes(query, key, value, attn_mask, is_causal, enable_gqa, dropout_p)
    if rep_k > 1:
        key = _E.repeat_interleave(key, rep_k, -3)
    if rep_v > 1:
        value = _E.repeat_interleave(value, rep_v, -3)
    seq_l, e = query.shape[-2:]
    seq_s = key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(e) if e else 1.0
    scores = _E.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        allowed = _E.tril(_E.ones((seq_l, seq_s), dtype=D.bool, device=query.device))
        scores = _E.masked_fill(scores, _E.logical_not(allowed), -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype is D.bool:
            scores = _E.masked_fill(scores, _E.logical_not(attn_mask), -math.inf)
        else:
            scores = scores + attn_mask.to(scores.dtype)
    top = _E.amax(scores, -1, keepdim=True)
    dead = _E.isneginf(top)
    weights = _E.exp(scores - _E.where(dead, _E.zeros_like(top), top))
    weights = weights / _E.where(dead, _E.ones_like(top), _E.sum(weights, -1, keepdim=True))
    if dropout_p > 0:
        weights = _E.dropout(weights, dropout_p, True)
    return _E.matmul(weights, value)


scaled_dot_product_attention = _composite(
    "scaled_dot_product_attention", _scaled_dot_product_attention_meta, cpu=_scaled_dot_product_attention_cpu,
    decomposition=_scaled_dot_product_attention_decomp, tags=_NN_ONLY,
)


# =====================================================================================================
# Distances
# =====================================================================================================


def _common_dtype(*values):
    return D.result_type_of(tuple(v for v in values if v is not None))


def _cosine_similarity_meta(x1, x2, dim=1, eps=1e-08):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``, after broadcasting.

    ``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps))`` over ``dim``.

    Args:
        x1 (Tensor): floating point.
        x2 (Tensor): broadcastable with ``x1``.
        dim (int): the dimension of the vectors.
        eps (float): lower bound of each norm.

    Returns:
        Tensor: the broadcast shape without ``dim``, of the promoted dtype.

    Raises:
        RuntimeError: if the shapes don't broadcast or the common dtype is not floating point.
        IndexError: if ``dim`` is out of range.

    Example:
        >>> import ember
        >>> ember.cosine_similarity(ember.tensor([[1.0, 0.0]]), ember.tensor([[1.0, 1.0]]))
        tensor([0.7071])
    """
    _check_tensor("cosine_similarity", "x1", x1)
    _check_tensor("cosine_similarity", "x2", x2, 2)
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    d = wrap_dim(_int_arg("cosine_similarity", "dim", dim, 3), len(shape))
    dtype = _common_dtype(x1, x2)
    if dtype.category != D.FLOATING:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is {_torch_name(dtype)}")
    out = tuple(s for i, s in enumerate(shape) if i != d)
    return MetaArray(out, dtype.numpy_dtype)


def _cosine_similarity_cpu(x1, x2, dim=1, eps=1e-08):
    dtype = _common_dtype(x1, x2).numpy_dtype
    a, b = _compute(x1._data, dtype), _compute(x2._data, dtype)
    a, b = np.broadcast_arrays(a, b)
    if a.ndim == 0:
        a, b = a.reshape(1), b.reshape(1)
    axis = wrap_dim(dim, a.ndim)
    eps = np.asarray(eps, dtype).astype(a.dtype)  # as small as the input dtype can hold (0 in float16 for 1e-8)
    with np.errstate(all="ignore"):
        na = np.maximum(np.sqrt(np.sum(a * a, axis=axis, keepdims=True)), eps)
        nb = np.maximum(np.sqrt(np.sum(b * b, axis=axis, keepdims=True)), eps)
        out = np.sum((a / na) * (b / nb), axis=axis)
    return np.asarray(out).reshape(_cosine_similarity_meta(x1, x2, dim, eps).shape).astype(dtype, copy=False)


def _cosine_similarity_decomp(x1, x2, dim=1, eps=1e-08):
    dtype = _common_dtype(x1, x2)
    a, b = _E.broadcast_tensors(x1.to(dtype), x2.to(dtype))
    if a.ndim == 0:
        return (a / _E.clamp(_E.abs(a), min=eps)) * (b / _E.clamp(_E.abs(b), min=eps))
    na = _E.clamp(_E.sqrt(_E.sum(a * a, dim, keepdim=True)), min=eps)
    nb = _E.clamp(_E.sqrt(_E.sum(b * b, dim, keepdim=True)), min=eps)
    return _E.sum((a / na) * (b / nb), dim)


cosine_similarity = _composite(
    "cosine_similarity", _cosine_similarity_meta, cpu=_cosine_similarity_cpu,
    decomposition=_cosine_similarity_decomp, tags=_NN,
)


def _distance_dtype(op, *tensors):
    """The dtype of a p-norm distance: promoted, integers -> default float, complex -> real."""
    dtype = _common_dtype(*tensors)
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    return dtype


def _pairwise_distance_meta(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    """The ``p``-norm distance ``||x1 - x2 + eps||_p`` along the last dim, after broadcasting.

    Args:
        x1 (Tensor): ``(*, D)``.
        x2 (Tensor): broadcastable with ``x1``.
        p (float): the norm's exponent (0, negative and ``inf`` included).
        eps (float): added to the difference (avoids a zero norm).
        keepdim (bool): keep the last dim with size 1.

    Returns:
        Tensor: the broadcast shape without its last dim; integers give the default float
        dtype, complex its real dtype.

    Raises:
        RuntimeError: if the shapes don't broadcast, or for bool inputs.

    Example:
        >>> import ember
        >>> ember.pairwise_distance(ember.tensor([[0.0, 0.0]]), ember.tensor([[3.0, 4.0]]), eps=0.0)
        tensor([5.])
    """
    _check_tensor("pairwise_distance", "x1", x1)
    _check_tensor("pairwise_distance", "x2", x2, 2)
    _number("pairwise_distance", "p", p, 3)
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    dtype = _float_result(_distance_dtype("pairwise_distance", x1, x2)).to_real()
    if not shape:
        return MetaArray((), dtype.numpy_dtype)
    out = shape[:-1] + ((1,) if keepdim else ())
    return MetaArray(out, dtype.numpy_dtype)


def _wrapping_diff(x1, x2):
    """``x1 - x2`` of two tensors in their promoted dtype, integers wrapping as in C (numpy array)."""
    dtype = _common_dtype(x1, x2).numpy_dtype
    with np.errstate(all="ignore"):
        return np.subtract(x1._data, x2._data, dtype=dtype)


def _difference(x1, x2, work):
    """``x1 - x2`` in the float computation dtype ``work`` (integer inputs subtract first, wrapping)."""
    if _common_dtype(x1, x2).category < D.FLOATING:
        return _wrapping_diff(x1, x2).astype(work)
    return np.subtract(_compute(x1._data, work), _compute(x2._data, work))


def _pairwise_distance_np(diff, p, eps):
    """Norms of the last-dim vectors of ``diff + eps`` (a numpy array in the computation dtype)."""
    with np.errstate(all="ignore"):
        diff = np.asarray(diff + np.asarray(eps, diff.dtype))
        if diff.ndim == 0:
            return np.abs(diff) if p != 0 else (diff != 0).astype(np.abs(diff).dtype)
        return _vector_norm_np(diff, float(p), -1, keepdims=False)


def _pairwise_distance_cpu(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    common = _distance_dtype("pairwise_distance", x1, x2)
    work = _compute_dtype(_float_result(common).numpy_dtype)
    out = _pairwise_distance_np(_difference(x1, x2, work), p, eps)
    shape = _pairwise_distance_meta(x1, x2, p, eps, keepdim).shape
    return np.asarray(out).reshape(shape).astype(_float_result(common).to_real().numpy_dtype, copy=False)


def _vector_norm(x, p, dim, keepdim=False):
    if "linalg_vector_norm" in registry:
        return _E.linalg_vector_norm(x, p, dim, keepdim=keepdim)
    return _E.norm(x, p, dim, keepdim=keepdim)


def _pairwise_distance_decomp(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    _distance_dtype("pairwise_distance", x1, x2)
    diff = x1 - x2 + eps  # integers subtract (and wrap) before eps makes them float, as in PyTorch
    if diff.ndim == 0:
        return _vector_norm(diff.reshape(1), p, 0)
    return _vector_norm(diff, p, -1, keepdim)


pairwise_distance = _composite(
    "pairwise_distance", _pairwise_distance_meta, cpu=_pairwise_distance_cpu,
    decomposition=_pairwise_distance_decomp, tags=_NN,
)


def _pdist_meta(input, p=2):
    """The ``p``-norm distances between the rows of ``input``, for each pair ``i < j`` (row-major order).

    Args:
        input (Tensor): ``(N, M)``, float32 or float64.
        p (float): the norm's exponent, ``>= 0`` (``inf`` included).

    Returns:
        Tensor: ``(N * (N - 1) / 2,)``.

    Raises:
        RuntimeError: for a non-2-D input, a negative ``p`` or a dtype that is not floating point.
        NotImplementedError: for float16 and bfloat16.

    Example:
        >>> import ember
        >>> ember.pdist(ember.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
        tensor([5.0000, 1.0000, 4.2426])
    """
    _check_tensor("pdist", "input", input)
    p = _number("pdist", "p", p, 2)
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if input.dtype.category != D.FLOATING:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    if input.dtype in (D.float16, D.bfloat16):
        raise _not_implemented("pdist", input.dtype)
    n = input.shape[0]
    return MetaArray((n * (n - 1) // 2,), input._data.dtype)


def _pdist_cpu(input, p=2):
    x = input._data
    n = x.shape[0]
    i, j = np.triu_indices(n, k=1)
    if i.size == 0:
        return np.zeros((0,), x.dtype)
    out = _vector_norm_np(x[i] - x[j], float(p), 1, keepdims=False)
    return np.asarray(out).astype(x.dtype, copy=False)


def _pdist_decomp(input, p=2):
    n = input.shape[0]
    rows = _E.triu_indices(n, n, 1, device=input.device)
    diff = _E.index_select(input, 0, rows[0]) - _E.index_select(input, 0, rows[1])
    return _vector_norm(diff, p, 1)


pdist = _composite("pdist", _pdist_meta, cpu=_pdist_cpu, decomposition=_pdist_decomp, tags=_NN)


# =====================================================================================================
# Losses
# =====================================================================================================


def _warn_target_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({_size(target.shape)}) that is different to the input size ({_size(input.shape)}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=5,
        )


def _check_loss_tensors(op, *named):
    for position, (name, value) in enumerate(named, 1):
        _check_tensor(op, name, value, position)


def _check_weight_shape(input, weight):
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")


def _regression_meta(op, kernel, input, target, size_average, reduce, reduction, weight=None, *, float_only=True,
                     real_result=False):
    """Checks and result of the elementwise regression losses (mse, l1, smooth_l1, huber)."""
    _check_loss_tensors(op, ("input", input), ("target", target))
    _check_optional_tensor(op, "weight", weight, 6)
    reduction = _reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    _check_weight_shape(input, weight)
    dtype = _common_dtype(input, target)
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    if float_only and dtype.category != D.FLOATING:
        raise _not_implemented(kernel, dtype)
    if real_result:
        dtype = dtype.to_real()
        if dtype.category < D.FLOATING and reduction == "mean":
            raise RuntimeError(
                "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
                f"Got: {_torch_name(dtype)}"
            )
    if weight is not None:
        dtype = D.promote_types(dtype, weight.dtype)
    return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype), reduction, dtype


def _weighted_reduce_np(loss, weight, reduction, out_dtype, *, divide_by_weight):
    if weight is not None:
        loss = loss * _compute(weight._data)
    if weight is not None and reduction == "mean" and divide_by_weight:
        with np.errstate(all="ignore"):
            return np.asarray(loss.sum() / _compute(weight._data).sum()).astype(out_dtype)
    return _reduce_np(loss, reduction, out_dtype)


def _weighted_reduce(loss, weight, reduction, *, divide_by_weight):
    if weight is not None:
        loss = loss * weight
        if reduction == "mean" and divide_by_weight:
            return _E.sum(loss) / _E.sum(weight)
    return _reduce(loss, reduction)


def _mse_loss_meta(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error: ``(input - target) ** 2``, reduced.

    Args:
        input (Tensor): floating point.
        target (Tensor): broadcastable with ``input`` (a different size warns).
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        weight (Tensor, optional): per-element weights, shaped like ``input``; ``'mean'`` then divides
            by their sum.

    Returns:
        Tensor: the loss (0-dim unless ``reduction='none'``).

    Raises:
        ValueError: for an unknown reduction or a weight of another shape.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.mse_loss(ember.tensor([1.0, 2.0]), ember.tensor([0.0, 0.0]))
        tensor(2.5000)
    """
    return _regression_meta("mse_loss", "mse_cpu", input, target, size_average, reduce, reduction, weight)[0]


def _mse_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _, reduction, dtype = _regression_meta("mse_loss", "mse_cpu", input, target, size_average, reduce, reduction,
                                           weight)
    work = dtype.numpy_dtype if weight is None else _common_dtype(input, target).numpy_dtype
    d = np.subtract(_compute(input._data, work), _compute(target._data, work))
    return _weighted_reduce_np(d * d, weight, reduction, dtype.numpy_dtype, divide_by_weight=True)


def _mse_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    return _weighted_reduce(d * d, weight, reduction, divide_by_weight=True)


mse_loss = _composite("mse_loss", _mse_loss_meta, cpu=_mse_loss_cpu, decomposition=_mse_loss_decomp, tags=_NN_ONLY)


def _l1_loss_meta(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error: ``|input - target|``, reduced (complex inputs give a real loss).

    Args:
        input (Tensor): any dtype but bool; integer inputs can't be averaged.
        target (Tensor): broadcastable with ``input`` (a different size warns).
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        weight (Tensor, optional): per-element weights, shaped like ``input``; ``'mean'`` then divides
            by their sum.

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for an unknown reduction or a weight of another shape.
        RuntimeError: for bool inputs, or integer inputs with ``'mean'``.

    Example:
        >>> import ember
        >>> ember.nn.functional.l1_loss(ember.tensor([1.0, -2.0]), ember.tensor([0.0, 0.0]))
        tensor(1.5000)
    """
    return _regression_meta("l1_loss", "l1_cpu", input, target, size_average, reduce, reduction, weight,
                            float_only=False, real_result=True)[0]


def _l1_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _, reduction, dtype = _regression_meta("l1_loss", "l1_cpu", input, target, size_average, reduce, reduction,
                                           weight, float_only=False, real_result=True)
    work = _compute_dtype(_common_dtype(input, target).numpy_dtype)
    with np.errstate(all="ignore"):
        loss = np.abs(np.subtract(input._data.astype(work), target._data.astype(work)))
    return _weighted_reduce_np(loss, weight, reduction, dtype.numpy_dtype, divide_by_weight=True)


def _l1_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    return _weighted_reduce(_E.abs(input - target), weight, reduction, divide_by_weight=True)


l1_loss = _composite("l1_loss", _l1_loss_meta, cpu=_l1_loss_cpu, decomposition=_l1_loss_decomp, tags=_NN_ONLY)


def _smooth_l1_loss_meta(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1 loss (Girshick, "Fast R-CNN", 2015): quadratic below ``beta``, linear above.

    ``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``, with ``d = input - target``;
    ``beta = 0`` is the L1 loss.

    Args:
        input (Tensor): floating point.
        target (Tensor): broadcastable with ``input`` (a different size warns).
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        beta (float): the threshold, ``>= 0``.

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for a negative ``beta``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.smooth_l1_loss(ember.tensor([0.5, 3.0]), ember.zeros(2), reduction="none")
        tensor([0.1250, 2.5000])
    """
    if _number("smooth_l1_loss", "beta", beta, 6) < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _regression_meta("smooth_l1_loss", "smooth_l1_cpu", input, target, size_average, reduce, reduction)[0]


def _smooth_l1_np(d, beta):
    a = np.abs(d)
    if beta == 0:
        return a
    with np.errstate(all="ignore"):
        return np.where(a < beta, (d * d) * np.asarray(0.5 / beta, d.dtype), a - np.asarray(0.5 * beta, d.dtype))


def _smooth_l1_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _, reduction, dtype = _regression_meta("smooth_l1_loss", "smooth_l1_cpu", input, target, size_average, reduce,
                                           reduction)
    work = dtype.numpy_dtype
    d = np.subtract(_compute(input._data, work), _compute(target._data, work))
    return _reduce_np(_smooth_l1_np(d, beta), reduction, work)


def _smooth_l1_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    a = _E.abs(d)
    loss = a if beta == 0 else _E.where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta)
    return _reduce(loss, reduction)


smooth_l1_loss = _composite(
    "smooth_l1_loss", _smooth_l1_loss_meta, cpu=_smooth_l1_loss_cpu, decomposition=_smooth_l1_loss_decomp,
    tags=_NN_ONLY,
)


def _huber_loss_meta(input, target, reduction="mean", delta=1.0, weight=None):
    """Huber loss (Huber, 1964): ``0.5 * d**2`` where ``|d| <= delta``, else ``delta * (|d| - 0.5 * delta)``.

    Args:
        input (Tensor): floating point.
        target (Tensor): broadcastable with ``input`` (a different size warns).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        delta (float): the threshold, ``> 0``.
        weight (Tensor, optional): per-element weights, shaped like ``input`` (``'mean'`` averages the
            weighted losses).

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for an unknown reduction or a weight of another shape.
        RuntimeError: for ``delta <= 0``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.huber_loss(ember.tensor([0.5, 3.0]), ember.zeros(2), reduction="none")
        tensor([0.1250, 2.5000])
    """
    if _number("huber_loss", "delta", delta, 4) <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _regression_meta("huber_loss", "huber_cpu", input, target, None, None, reduction, weight)[0]


def _huber_loss_cpu(input, target, reduction="mean", delta=1.0, weight=None):
    _, reduction, dtype = _regression_meta("huber_loss", "huber_cpu", input, target, None, None, reduction, weight)
    work = _common_dtype(input, target).numpy_dtype
    d = np.subtract(_compute(input._data, work), _compute(target._data, work))
    a = np.abs(d)
    with np.errstate(all="ignore"):
        loss = np.where(a <= delta, (d * d) * np.asarray(0.5, d.dtype), (a - np.asarray(0.5 * delta, d.dtype))
                        * np.asarray(delta, d.dtype))
    return _weighted_reduce_np(loss, weight, reduction, dtype.numpy_dtype, divide_by_weight=False)


def _huber_loss_decomp(input, target, reduction="mean", delta=1.0, weight=None):
    reduction = _reduction(None, None, reduction)
    d = input - target
    a = _E.abs(d)
    loss = _E.where(a <= delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    return _weighted_reduce(loss, weight, reduction, divide_by_weight=False)


huber_loss = _composite(
    "huber_loss", _huber_loss_meta, cpu=_huber_loss_cpu, decomposition=_huber_loss_decomp, tags=_NN_ONLY
)


def _binary_cross_entropy_meta(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Binary cross entropy of probabilities: ``-w * (t * log(x) + (1 - t) * log(1 - x))``.

    Each log is clamped to ``>= -100`` so that a probability of exactly 0 or 1 gives a finite loss.

    Args:
        input (Tensor): probabilities in [0, 1], floating point.
        target (Tensor): same shape and dtype as ``input``.
        weight (Tensor, optional): broadcastable to ``input``'s shape.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss, of ``input``'s dtype.

    Raises:
        ValueError: if ``target``'s shape differs from ``input``'s, or for an unknown reduction.
        RuntimeError: for another target dtype, a weight that does not broadcast, or input values outside [0, 1].
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> ember.nn.functional.binary_cross_entropy(ember.tensor([0.5, 0.9]), ember.tensor([1.0, 1.0]))
        tensor(0.3993)
    """
    _check_loss_tensors("binary_cross_entropy", ("input", input), ("target", target))
    _check_optional_tensor("binary_cross_entropy", "weight", weight, 3)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({_size(target.shape)}) that is different to the input size ({_size(input.shape)}) "
            "is deprecated. Please ensure they have the same size."
        )
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {_torch_name(target.dtype)} but expected {_torch_name(input.dtype)}")
    if weight is not None:
        source, targetshape = tuple(weight.shape), tuple(input.shape)
        if len(source) > len(targetshape) or broadcast_shapes(source, targetshape) != targetshape:
            raise RuntimeError(
                f"Attempting to broadcast a dimension of length {source[-1] if source else 0} at -1! Mismatching "
                f"argument at index 1 had {_size(source)}; but expected shape should be broadcastable to "
                f"{_fmt(targetshape)}"
            )
    _check_floating("binary_cross_entropy", input)
    return MetaArray(_loss_shape(input.shape, reduction), input._data.dtype)


def _binary_cross_entropy_cpu(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    x, t = _compute(input._data), _compute(target._data)
    if x.size and not ((x >= 0) & (x <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(all="ignore"):
        log_x = np.maximum(np.log(x), np.asarray(-100, x.dtype))
        log_1mx = np.maximum(np.log1p(-x), np.asarray(-100, x.dtype))
        loss = -(t * log_x + (1 - t) * log_1mx)
    if weight is not None:
        loss = loss * _compute(weight._data).astype(loss.dtype, copy=False)
    return _reduce_np(loss, reduction, input._data.dtype)


def _binary_cross_entropy_decomp(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    log_x = _E.clamp(_E.log(input), min=-100)
    log_1mx = _E.clamp(_E.log1p(-input), min=-100)
    loss = -(target * log_x + (1 - target) * log_1mx)
    if weight is not None:
        loss = loss * weight.to(loss.dtype)
    return _reduce(loss, reduction)


binary_cross_entropy = _composite(
    "binary_cross_entropy", _binary_cross_entropy_meta, cpu=_binary_cross_entropy_cpu,
    decomposition=_binary_cross_entropy_decomp, tags=_NN_ONLY,
)


def _bce_logits_meta(input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
    """Binary cross entropy of logits, computed stably:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * log(1 + exp(-x))``, times ``weight``.

    Args:
        input (Tensor): logits, floating point.
        target (Tensor): probabilities, same shape as ``input``, floating point.
        weight (Tensor, optional): broadcastable to ``input``.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        pos_weight (Tensor, optional): weight of the positive class, broadcastable to ``input``
            (usually one per class, along the last dim).

    Returns:
        Tensor: the loss, of the promoted dtype of ``input`` and ``target``.

    Raises:
        ValueError: if ``target``'s shape differs from ``input``'s, or for an unknown reduction.
        RuntimeError: for a non-floating target or weights that don't broadcast.

    Example:
        >>> import ember
        >>> ember.binary_cross_entropy_with_logits(ember.tensor([0.0, 2.0]), ember.tensor([1.0, 1.0]))
        tensor(0.4100)
    """
    _check_loss_tensors("binary_cross_entropy_with_logits", ("input", input), ("target", target))
    _check_optional_tensor("binary_cross_entropy_with_logits", "weight", weight, 3)
    _check_optional_tensor("binary_cross_entropy_with_logits", "pos_weight", pos_weight, 7)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({_size(target.shape)}) must be the same as input size ({_size(input.shape)})")
    dtype = _common_dtype(input, target)
    if target.dtype.category != D.FLOATING:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_torch_name(target.dtype)}")
    shape = tuple(input.shape)
    for w in (pos_weight, weight):
        if w is not None:
            shape = broadcast_shapes(tuple(w.shape), shape)
    _check_floating("log_sigmoid_cpu", input)
    return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype)


def _bce_logits_cpu(input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
    meta = _bce_logits_meta(input, target, weight, None, None, _kernel_reduction(size_average, reduce, reduction),
                            pos_weight)
    reduction = _kernel_reduction(size_average, reduce, reduction)
    work = _compute_dtype(meta.dtype)
    x, t = _compute(input._data, work), _compute(target._data, work)
    with np.errstate(all="ignore"):
        soft = np.maximum(-x, np.asarray(0, work)) + np.log1p(np.exp(-np.abs(x)))  # log(1 + exp(-x))
        if pos_weight is not None:
            soft = soft * ((_compute(pos_weight._data, work) - 1) * t + 1)
        loss = (1 - t) * x + soft
        if weight is not None:
            loss = loss * _compute(weight._data, work)
    return _reduce_np(loss, reduction, meta.dtype)


def _bce_logits_decomp(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                       pos_weight=None):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    soft = -_logsigmoid_values(input)
    if pos_weight is not None:
        soft = soft * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input + soft
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


binary_cross_entropy_with_logits = _composite(
    "binary_cross_entropy_with_logits", _bce_logits_meta, cpu=_bce_logits_cpu, decomposition=_bce_logits_decomp,
    tags=_NN,
)


_KL_REDUCTIONS = ("none", "batchmean", "sum", "mean")


def _kl_div_meta(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence ``target * (log(target) - input)`` (``input`` holds log-probabilities).

    With ``log_target`` the target holds log-probabilities too: ``exp(target) * (target - input)``.
    ``reduction='batchmean'`` divides the sum by the batch size (``input.size(0)``), which is
    the mathematical KL divergence; ``'mean'`` averages over every element (and warns).

    Args:
        input (Tensor): log-probabilities, floating point.
        target (Tensor): probabilities (or log-probabilities), broadcastable with ``input``.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'batchmean'``, ``'sum'`` or ``'mean'``.
        log_target (bool): whether ``target`` holds log-probabilities.

    Returns:
        Tensor: the divergence.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for integer, bool or complex inputs.

    Example:
        >>> import ember
        >>> p = ember.tensor([0.5, 0.5])
        >>> ember.kl_div(ember.log(ember.tensor([0.25, 0.75])), p, reduction="sum")
        tensor(0.1438)
    """
    _check_loss_tensors("kl_div", ("input", input), ("target", target))
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in _KL_REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size.'batchmean' divides "
            "only by the batch size, and aligns with the KL div math definition.'mean' will be changed to behave the "
            "same as 'batchmean' in the next major release.", UserWarning, stacklevel=4,
        )
    for t in (input, target):
        if t.dtype.category < D.FLOATING:
            raise RuntimeError("kl_div: Integral inputs not supported.")
        if t.dtype.is_complex:
            raise RuntimeError("kl_div: Complex inputs not supported.")
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    dtype = _common_dtype(input, target)
    return MetaArray(shape if reduction == "none" else (), dtype.numpy_dtype)


def _kl_div_cpu(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    dtype = _common_dtype(input, target).numpy_dtype
    x, t = _compute(input._data, dtype), _compute(target._data, dtype)
    with np.errstate(all="ignore"):
        if log_target:
            loss = np.exp(t) * (t - x)
        else:
            from scipy.special import xlogy

            loss = xlogy(t, t) - t * x
    if reduction == "batchmean":
        total = loss.sum()
        if input.ndim:
            with np.errstate(all="ignore"):
                total = total / np.asarray(input.shape[0], total.dtype)
        return np.asarray(total).astype(dtype)
    return _reduce_np(np.asarray(loss), reduction, dtype)


def _kl_div_decomp(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    if log_target:
        loss = _E.exp(target) * (target - input)
    else:
        loss = _E.xlogy(target, target) - target * input
    if reduction == "batchmean":
        total = _E.sum(loss)
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


kl_div = _composite("kl_div", _kl_div_meta, cpu=_kl_div_cpu, decomposition=_kl_div_decomp, tags=_NN)


def _poisson_nll_loss_meta(input, target, log_input=True, full=False, size_average=None, eps=1e-08, reduce=None,
                           reduction="mean"):
    """Negative log-likelihood of a Poisson distribution: ``exp(input) - target * input``.

    Without ``log_input``, ``input`` is the rate itself: ``input - target * log(input + eps)``.
    With ``full``, Stirling's approximation of ``log(target!)`` is added where ``target > 1``.

    Args:
        input (Tensor): the log-rate (or rate).
        target (Tensor): counts, broadcastable with ``input``.
        log_input (bool): whether ``input`` is the log of the rate.
        full (bool): add the Stirling term.
        size_average (bool, optional): deprecated (see ``reduction``).
        eps (float): keeps the log finite when ``log_input`` is False.
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss; integer inputs give the default float dtype.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for bool inputs.

    Example:
        >>> import ember
        >>> ember.poisson_nll_loss(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 2.0]), reduction="none")
        tensor([1.0000, 0.7183])
    """
    _check_loss_tensors("poisson_nll_loss", ("input", input), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    dtype = _common_dtype(input, target)
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )
    if full and dtype.is_complex:
        raise _not_implemented("le_cpu", dtype)
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    return MetaArray(_loss_shape(shape, reduction), _float_result(dtype).numpy_dtype)


def _poisson_nll_loss_cpu(input, target, log_input=True, full=False, size_average=None, eps=1e-08, reduce=None,
                          reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    meta = _poisson_nll_loss_meta(input, target, log_input, full, None, eps, None, reduction)
    work = _compute_dtype(meta.dtype)
    x, t = _compute(input._data, work), _compute(target._data, work)
    with np.errstate(all="ignore"):
        if log_input:
            loss = np.exp(x) - t * x
        else:
            loss = x - t * np.log(x + np.asarray(eps, work))
        if full:
            stirling = t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
            loss = loss + np.where(t > 1, stirling, 0).astype(loss.dtype)
    return _reduce_np(np.asarray(loss), reduction, meta.dtype)


def _poisson_nll_loss_decomp(input, target, log_input=True, full=False, size_average=None, eps=1e-08, reduce=None,
                             reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    if log_input:
        loss = _E.exp(input) - target * input
    else:
        loss = input - target * _E.log(input + eps)
    if full:
        stirling = target * _E.log(target) - target + 0.5 * _E.log(2 * math.pi * target)
        loss = loss + _E.where(target > 1, stirling, _E.zeros_like(stirling))
    return _reduce(loss, reduction)


poisson_nll_loss = _composite(
    "poisson_nll_loss", _poisson_nll_loss_meta, cpu=_poisson_nll_loss_cpu, decomposition=_poisson_nll_loss_decomp,
    tags=_NN,
)


def _gaussian_var_shape(input, var):
    """The shape ``var`` is used with (a trailing 1 added for one variance per sample).

    Raises:
        ValueError: if ``var`` fits neither heteroscedastic nor homoscedastic use.
    """
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape == ishape:
        return vshape
    if ishape[:-1] == vshape:
        return vshape + (1,)
    if ishape[:-1] == vshape[:-1] and vshape and vshape[-1] == 1:
        return vshape
    raise ValueError("var is of incorrect size")


def _gaussian_nll_loss_meta(input, target, var, full=False, eps=1e-06, reduction="mean"):
    """Negative log-likelihood of a Gaussian: ``0.5 * (log(var) + (input - target)**2 / var)``.

    ``var`` is clamped to ``>= eps`` first; ``full`` adds ``0.5 * log(2 * pi)``.

    Args:
        input (Tensor): the predicted means, floating point.
        target (Tensor): the observations, broadcastable with ``input``.
        var (Tensor or float): the predicted variances: shaped like ``input``, or like it without the last
            dim (or with 1 there), or one number; ``>= 0``.
        full (bool): add the constant term.
        eps (float): lower bound of the variance.
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for a ``var`` of the wrong size or with negative entries, or an unknown reduction.

    Example:
        >>> import ember
        >>> ember.nn.functional.gaussian_nll_loss(ember.tensor([1.0]), ember.tensor([3.0]), ember.tensor([4.0]))
        tensor(1.1931)
    """
    _check_loss_tensors("gaussian_nll_loss", ("input", input), ("target", target))
    if isinstance(var, Tensor):
        vshape = _gaussian_var_shape(input, var)
        dtype = _common_dtype(input, target, var)
        if var.device.type != "meta" and var.numel() and bool((var._host_array() < 0).any()):
            raise ValueError("var has negative entry/entries")
    else:
        if _number("gaussian_nll_loss", "var", var, 3) < 0:
            raise ValueError("var has negative entry/entries")
        vshape = ()
        dtype = _common_dtype(input, target)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    if dtype.category != D.FLOATING:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_torch_name(dtype)}")
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape), vshape)
    return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype)


def _gaussian_nll_loss_cpu(input, target, var, full=False, eps=1e-06, reduction="mean"):
    meta = _gaussian_nll_loss_meta(input, target, var, full, eps, reduction)
    work = _compute_dtype(meta.dtype)
    x, t = _compute(input._data, work), _compute(target._data, work)
    if isinstance(var, Tensor):
        v = _compute(var._data, work).reshape(_gaussian_var_shape(input, var))
    else:
        v = np.asarray(var, work)
    with np.errstate(all="ignore"):
        v = np.maximum(v, np.asarray(eps, work))
        d = x - t
        loss = np.asarray(0.5, work) * (np.log(v) + d * d / v)
        if full:
            loss = loss + np.asarray(0.5 * math.log(2 * math.pi), work)
    return _reduce_np(np.asarray(loss), reduction, meta.dtype)


def _gaussian_nll_loss_decomp(input, target, var, full=False, eps=1e-06, reduction="mean"):
    if isinstance(var, Tensor):
        var = var.reshape(_gaussian_var_shape(input, var))
        with no_grad():
            clamped = _E.clamp(var, min=eps)
        var = var + (clamped - var).detach()  # the clamp carries no gradient, as in PyTorch
    else:
        var = max(float(var), eps)
    d = input - target
    loss = (_E.log(var if isinstance(var, Tensor) else _E.full_like(d, var)) + d * d / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


gaussian_nll_loss = _composite(
    "gaussian_nll_loss", _gaussian_nll_loss_meta, cpu=_gaussian_nll_loss_cpu, decomposition=_gaussian_nll_loss_decomp,
    tags=_NN_ONLY,
)


def _margin_ranking_loss_meta(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """Ranking hinge loss: ``max(0, -target * (input1 - input2) + margin)``.

    Args:
        input1 (Tensor): scores of the first items.
        input2 (Tensor): scores of the second items.
        target (Tensor): 1 where ``input1`` should rank higher, -1 where ``input2`` should.
            The three tensors must have the same number of dims and broadcast together.
        margin (float): the required gap.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss; integer inputs give the default float dtype.

    Raises:
        RuntimeError: for tensors of different numbers of dims, bool or complex inputs.
        ValueError: for an unknown reduction.

    Example:
        >>> import ember
        >>> ember.margin_ranking_loss(ember.tensor([1.0, 0.0]), ember.tensor([0.0, 1.0]), ember.tensor([1.0, 1.0]))
        tensor(0.5000)
    """
    _check_loss_tensors("margin_ranking_loss", ("input1", input1), ("input2", input2), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(
            "margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: "
            f"{_size(input1.shape)}, input2: {_size(input2.shape)}, target: {_size(target.shape)} "
        )
    dtype = _common_dtype(input1, input2, target)
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    if dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    shape = broadcast_shapes(tuple(input1.shape), tuple(input2.shape), tuple(target.shape))
    return MetaArray(_loss_shape(shape, reduction), _float_result(dtype).numpy_dtype)


def _margin_ranking_loss_cpu(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    common = _common_dtype(input1, input2, target)
    out = _float_result(common).numpy_dtype
    work = _compute_dtype(out)
    if common.category < D.FLOATING:  # integer arithmetic first (wrapping), as PyTorch computes it
        diff = _wrapping_diff(input1, input2)
        scores = np.multiply(np.negative(target._data), diff, dtype=common.numpy_dtype).astype(work)
    else:
        a, b, t = (_compute(x._data, work) for x in (input1, input2, target))
        scores = -t * (a - b)
    loss = np.maximum(scores + np.asarray(margin, work), np.asarray(0, work))
    return _reduce_np(loss, _kernel_reduction(size_average, reduce, reduction), out)


def _margin_ranking_loss_decomp(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    return _reduce(_E.clamp(-target * (input1 - input2) + float(margin), min=0), reduction)


margin_ranking_loss = _composite(
    "margin_ranking_loss", _margin_ranking_loss_meta, cpu=_margin_ranking_loss_cpu,
    decomposition=_margin_ranking_loss_decomp, tags=_NN,
)


def _hinge_embedding_loss_meta(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """Hinge embedding loss: ``input`` where ``target == 1``, ``max(0, margin - input)`` where ``target == -1``.

    (Elements whose target is neither get both terms, as in PyTorch.)

    Args:
        input (Tensor): distances, floating point.
        target (Tensor): 1 or -1, broadcastable to ``input``'s shape.
        margin (float): the margin for dissimilar pairs.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss, of ``input``'s dtype.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for bool or complex inputs, or integer inputs with ``'mean'``.

    Example:
        >>> import ember
        >>> ember.hinge_embedding_loss(ember.tensor([0.3, 0.3]), ember.tensor([1.0, -1.0]), reduction="none")
        tensor([0.3000, 0.7000])
    """
    _check_loss_tensors("hinge_embedding_loss", ("input", input), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    if input.dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    if input.dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    if input.dtype.category < D.FLOATING and reduction == "mean":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {_torch_name(input.dtype)}"
        )
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _hinge_embedding_loss_cpu(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    x = input._data
    work = _compute_dtype(x.dtype) if input.dtype.is_floating_point else np.dtype(np.float64)
    xf, t = x.astype(work, copy=False), target._data
    with np.errstate(all="ignore"):
        clamp = np.maximum(np.asarray(margin, work) - xf, np.asarray(0, work))
        loss = np.where(t != 1, clamp, 0) + np.where(t != -1, xf, 0)
    return _reduce_np(loss.astype(work, copy=False), _kernel_reduction(size_average, reduce, reduction), x.dtype)


def _hinge_embedding_loss_decomp(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    zeros = _E.zeros_like(input)
    clamp = _E.clamp(margin - input, min=0)
    loss = _E.where(target != 1, clamp, zeros) + _E.where(target != -1, input, zeros)
    return _reduce(loss, reduction)


hinge_embedding_loss = _composite(
    "hinge_embedding_loss", _hinge_embedding_loss_meta, cpu=_hinge_embedding_loss_cpu,
    decomposition=_hinge_embedding_loss_decomp, tags=_NN,
)


def _soft_margin_loss_meta(input, target, size_average=None, reduce=None, reduction="mean"):
    """Two-class logistic loss: ``log(1 + exp(-target * input))``.

    Args:
        input (Tensor): scores, floating point or complex.
        target (Tensor): 1 or -1, broadcastable to ``input``'s shape (not beyond it).
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss, of ``input``'s dtype.

    Raises:
        ValueError: for an unknown reduction.
        RuntimeError: for integer or bool inputs, or a target that would enlarge ``input``.

    Example:
        >>> import ember
        >>> ember.nn.functional.soft_margin_loss(ember.tensor([0.0, 2.0]), ember.tensor([1.0, -1.0]))
        tensor(1.4100)
    """
    _check_loss_tensors("soft_margin_loss", ("input", input), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    _check_negatable(target)
    full = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    if full != tuple(input.shape):
        raise RuntimeError(f"output with shape {_fmt(input.shape)} doesn't match the broadcast shape {_fmt(full)}")
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_torch_name(input.dtype)}")
    return MetaArray(_loss_shape(input.shape, reduction), input._data.dtype)


def _soft_margin_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean"):
    x = input._data
    work = _compute_dtype(x.dtype)
    xf, t = x.astype(work, copy=False), _compute(target._data, work)
    with np.errstate(all="ignore"):
        z = -t * xf
        if np.iscomplexobj(z):
            loss = np.log1p(np.exp(z))
        else:
            loss = np.logaddexp(np.asarray(0, z.dtype), z) if z.dtype != np.float16 else np.log1p(np.exp(z))
    loss = np.asarray(loss).astype(work, copy=False)
    return _reduce_np(loss, _kernel_reduction(size_average, reduce, reduction), x.dtype)


def _soft_margin_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    return _reduce(_E.log1p(_E.exp(-target * input)).to(input.dtype), reduction)


soft_margin_loss = _composite(
    "soft_margin_loss", _soft_margin_loss_meta, cpu=_soft_margin_loss_cpu, decomposition=_soft_margin_loss_decomp,
    tags=_NN_ONLY,
)


def _check_margin_input(op, input, kernel):
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or (input.ndim == 1 and input.shape[0] == 0):
        raise RuntimeError(
            f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {_fmt(input.shape)}"
        )
    if input.dtype not in (D.float32, D.float64):
        raise _not_implemented(kernel, input.dtype)


def _multilabel_margin_loss_meta(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: for each target class ``j`` and each non-target class ``i``,
    ``max(0, 1 - (x[j] - x[i]))``, summed and divided by the number of classes.

    Each row of ``target`` lists the target classes, ended by the first ``-1``.

    Args:
        input (Tensor): ``(C,)`` or ``(N, C)`` scores, float32 or float64.
        target (Tensor): int64 of ``input``'s shape: class indices, then -1 padding.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: ``(N,)`` (0-dim for a 1-D input) with ``'none'``, else 0-dim.

    Raises:
        RuntimeError: for shapes or dtypes that don't fit, or a target out of range.
        ValueError: for an unknown reduction.

    Example:
        >>> import ember
        >>> ember.nn.functional.multilabel_margin_loss(ember.tensor([[0.1, 0.2, 0.4, 0.8]]),
        ...                                            ember.tensor([[3, 0, -1, 1]]))
        tensor(0.8500)
    """
    _check_loss_tensors("multilabel_margin_loss", ("input", input), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    _check_margin_input("multilabel_margin_loss", input, "multilabel_margin_loss_forward_out_frame")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {_fmt(target.shape)} for input of size: {_fmt(input.shape)}")
    if target.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {_torch_name(target.dtype)}")
    shape = (input.shape[0],) if input.ndim == 2 else ()
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _multilabel_margin_np(x, y):
    """Per-sample multilabel margin losses of (N, C) scores ``x`` and targets ``y``."""
    n, c = x.shape
    if n == 0 or c == 0:
        return np.zeros((n,), x.dtype)
    valid = np.cumprod(y != -1, axis=1).astype(bool)
    if np.any(valid & ((y < 0) | (y >= c))):
        raise RuntimeError("argument #2 'target' is out of range")
    safe = np.where(valid, y, 0)
    is_target = np.zeros((n, c), bool)
    rows = np.broadcast_to(np.arange(n)[:, None], y.shape)
    is_target[rows[valid], safe[valid]] = True
    picked = np.take_along_axis(x, safe, axis=1)  # (N, C): score of the j-th target
    hinge = np.maximum(1 - picked[:, :, None] + x[:, None, :], 0)
    hinge *= valid[:, :, None] & ~is_target[:, None, :]
    return hinge.sum(axis=(1, 2)) / c


def _multilabel_margin_loss_cpu(input, target, size_average=None, reduce=None, reduction="mean"):
    x = input._data
    x2 = x.reshape(1, -1) if x.ndim < 2 else x
    y2 = target._data.reshape(x2.shape)
    loss = _multilabel_margin_np(x2, y2)
    if x.ndim < 2:
        loss = loss.reshape(())
    return _reduce_np(loss, _kernel_reduction(size_average, reduce, reduction), x.dtype)


def _multilabel_margin_loss_decomp(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    x = input.reshape(1, -1) if input.ndim < 2 else input
    y = target.reshape(tuple(x.shape))
    c = x.shape[1]
    valid = _E.cumprod((y != -1).to(D.int64), 1).to(D.bool)
    safe = _E.where(valid, y, _E.zeros_like(y))
    hits = _E.scatter_add(_E.zeros_like(y), 1, safe, valid.to(D.int64))
    is_target = hits > 0
    picked = _E.gather(x, 1, safe)
    hinge = _E.clamp(1 - _E.unsqueeze(picked, 2) + _E.unsqueeze(x, 1), min=0)
    mask = _E.logical_and(_E.unsqueeze(valid, 2), _E.unsqueeze(_E.logical_not(is_target), 1))
    loss = _E.sum(hinge * mask.to(hinge.dtype), [1, 2]) / c
    if input.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


multilabel_margin_loss = _composite(
    "multilabel_margin_loss", _multilabel_margin_loss_meta, cpu=_multilabel_margin_loss_cpu,
    decomposition=_multilabel_margin_loss_decomp, tags=_NN_ONLY,
)


def _multilabel_soft_margin_loss_meta(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Multi-label one-versus-all logistic loss, averaged over the classes (the last dim).

    ``-(t * logsigmoid(x) + (1 - t) * logsigmoid(-x))``, times ``weight``, averaged over the
    last dim, then reduced over the rest.

    Args:
        input (Tensor): ``(*, C)`` scores, floating point.
        target (Tensor): 0/1 labels broadcastable with ``input``.
        weight (Tensor, optional): per-class weights, broadcastable.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: ``input``'s shape without the last dim with ``'none'``, else 0-dim.

    Raises:
        ValueError: for an unknown reduction.
        IndexError: for a 0-dim input.
        NotImplementedError: if the common dtype is not floating point.

    Example:
        >>> import ember
        >>> ember.nn.functional.multilabel_soft_margin_loss(ember.tensor([[0.0, 2.0]]), ember.tensor([[1.0, 0.0]]))
        tensor(1.4100)
    """
    _check_loss_tensors("multilabel_soft_margin_loss", ("input", input), ("target", target))
    _check_optional_tensor("multilabel_soft_margin_loss", "weight", weight, 3)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape),
                             () if weight is None else tuple(weight.shape))
    if input.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    dtype = _common_dtype(input, target, weight)
    if dtype.category != D.FLOATING:
        raise _not_implemented("log_sigmoid_cpu", dtype)
    return MetaArray(_loss_shape(shape[:-1], reduction), dtype.numpy_dtype)


def _multilabel_soft_margin_loss_cpu(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    out = _common_dtype(input, target, weight).numpy_dtype
    work = _compute_dtype(out)
    x, t = _compute(input._data, work), _compute(target._data, work)
    loss = -(t * _logsigmoid_np(x) + (1 - t) * _logsigmoid_np(-x))
    if weight is not None:
        loss = loss * _compute(weight._data, work)
    loss = loss.sum(axis=-1) / np.asarray(input.shape[-1], work)
    return _reduce_np(np.asarray(loss), _kernel_reduction(size_average, reduce, reduction), out)


def _multilabel_soft_margin_loss_decomp(input, target, weight=None, size_average=None, reduce=None,
                                        reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    loss = -(target * _logsigmoid_values(input) + (1 - target) * _logsigmoid_values(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(_E.sum(loss, -1) / input.shape[-1], reduction)


multilabel_soft_margin_loss = _composite(
    "multilabel_soft_margin_loss", _multilabel_soft_margin_loss_meta, cpu=_multilabel_soft_margin_loss_cpu,
    decomposition=_multilabel_soft_margin_loss_decomp, tags=_NN_ONLY,
)


def _multi_margin_loss_meta(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                            reduction="mean"):
    """Multi-class hinge loss: ``sum over i != y of max(0, margin - x[y] + x[i]) ** p * weight[y] / C``.

    Args:
        input (Tensor): ``(C,)`` or ``(N, C)`` scores, float32 or float64.
        target (Tensor): int64 class indices, ``(N,)`` (or one for a 1-D input).
        p (int): 1 or 2.
        margin (float): the margin.
        weight (Tensor, optional): ``(C,)`` class weights of ``input``'s dtype.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss, per sample with ``'none'``.

    Raises:
        ValueError: for ``p`` other than 1 and 2, a weight that is not 1-D, or an unknown reduction.
        RuntimeError: for shapes or dtypes that don't fit, or a target out of range.

    Example:
        >>> import ember
        >>> ember.nn.functional.multi_margin_loss(ember.tensor([[0.1, 0.2, 0.4, 0.8]]), ember.tensor([3]))
        tensor(0.3250)
    """
    _check_loss_tensors("multi_margin_loss", ("input", input), ("target", target))
    _check_optional_tensor("multi_margin_loss", "weight", weight, 5)
    reduction = _reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    _check_margin_input("multi_margin_loss", input, "multi_margin_loss_cpu_kernel")
    c = input.shape[-1] if input.ndim else 1
    n = input.shape[0] if input.ndim == 2 else 1
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples (batch "
            f"size). Expected target size [{n}], but got {_fmt(target.shape)}. Input has shape {_fmt(input.shape)}."
        )
    if target.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {_torch_name(target.dtype)}")
    if weight is not None:
        if weight.numel() != c:
            raise RuntimeError(f"inconsistent weight size, expected {c} but got {_fmt(weight.shape)}")
        if weight.dtype is not input.dtype:
            raise RuntimeError(
                f"expected scalar type {_torch_name(input.dtype)} but found {_torch_name(weight.dtype)}"
            )
    shape = (n,) if input.ndim == 2 else tuple(target.shape)
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _multi_margin_loss_cpu(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                           reduction="mean"):
    x = input._data
    x2 = x.reshape(-1, x.shape[-1] if x.ndim else 1)
    y = target._data.reshape(-1)
    c = x2.shape[1]
    if y.size and (y.min() < 0 or y.max() >= c):
        raise RuntimeError("target out of range")
    picked = np.take_along_axis(x2, y[:, None], axis=1)
    hinge = np.maximum(np.asarray(margin, x.dtype) - picked + x2, 0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight._data[y][:, None]
    hinge[np.arange(y.size), y] = 0
    loss = hinge.sum(axis=1) / np.asarray(c, x.dtype)
    loss = loss.reshape(_multi_margin_loss_meta(input, target, p, margin, weight, reduction="none").shape)
    return _reduce_np(loss, _kernel_reduction(size_average, reduce, reduction), x.dtype)


def _multi_margin_loss_decomp(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                              reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    x = input.reshape(-1, input.shape[-1] if input.ndim else 1)
    y = target.reshape(-1, 1)
    c = x.shape[1]
    picked = _E.gather(x, 1, y)
    hinge = _E.clamp(margin - picked + x, min=0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * _E.index_select(weight, 0, y.reshape(-1)).reshape(-1, 1)
    not_target = _E.scatter(_E.ones_like(hinge), 1, y, 0.0)
    loss = _E.sum(hinge * not_target, 1) / c
    shape = (x.shape[0],) if input.ndim == 2 else tuple(target.shape)
    return _reduce(loss.reshape(shape), reduction)


multi_margin_loss = _composite(
    "multi_margin_loss", _multi_margin_loss_meta, cpu=_multi_margin_loss_cpu, decomposition=_multi_margin_loss_decomp,
    tags=_NN_ONLY,
)


_COSINE_EPSILON = 1e-12


def _cosine_embedding_loss_meta(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """Cosine embedding loss: ``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)``
    where ``target == -1``.

    Args:
        input1 (Tensor): ``(N, D)`` or ``(D,)``.
        input2 (Tensor): same shape as ``input1``.
        target (Tensor): ``(N,)`` (or 0-dim for 1-D inputs) of 1 and -1.
        margin (float): the margin for dissimilar pairs.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss; integer and bool inputs give the default float dtype.

    Raises:
        RuntimeError: for inputs whose number of dims doesn't fit the target's, or complex inputs.
        ValueError: for an unknown reduction.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1.0, 0.0], [1.0, 0.0]])
        >>> y = ember.tensor([[0.0, 1.0], [1.0, 1.0]])
        >>> ember.cosine_embedding_loss(x, y, ember.tensor([1.0, -1.0]), reduction="none")
        tensor([1.0000, 0.7071])
    """
    _check_loss_tensors("cosine_embedding_loss", ("input1", input1), ("input2", input2), ("target", target))
    reduction = _reduction(size_average, reduce, reduction)
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if target.ndim == 1 and not (input1.ndim == 2 and input2.ndim == 2):
        raise RuntimeError(
            "1D target tensor expects 2D input tensors, but found inputs with sizes "
            f"{_fmt(input1.shape)} and {_fmt(input2.shape)}."
        )
    if target.ndim == 0 and not (input1.ndim == 1 and input2.ndim == 1):
        raise RuntimeError(
            "0D target tensor expects 1D input tensors, but found inputs with sizes "
            f"{_fmt(input1.shape)} and {_fmt(input2.shape)}."
        )
    vec = broadcast_shapes(tuple(input1.shape), tuple(input2.shape))
    shape = broadcast_shapes(vec[:-1], tuple(target.shape))
    dtype = _common_dtype(input1, input2)
    if dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    return MetaArray(_loss_shape(shape, reduction), _float_result(dtype).numpy_dtype)


def _cosine_embedding_loss_cpu(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    common = _common_dtype(input1, input2)
    out = _float_result(common).numpy_dtype
    work = _compute_dtype(out)
    t = target._data
    eps = np.asarray(_COSINE_EPSILON, out).astype(work)  # 0 in float16, as PyTorch adds it in that dtype
    with np.errstate(all="ignore"):
        if common.category < D.FLOATING:  # products in the integer dtype (wrapping), sums in int64
            a, b = input1._data.astype(common.numpy_dtype), input2._data.astype(common.numpy_dtype)

            def dot(u, v):
                return np.sum(np.multiply(u, v), axis=-1, dtype=np.int64).astype(work)
        else:
            a, b = _compute(input1._data, work), _compute(input2._data, work)

            def dot(u, v):
                return np.sum(u * v, axis=-1)
        prod = dot(a, b)
        mag = (dot(a, a) + eps) * (dot(b, b) + eps)
        cos = prod / np.sqrt(mag)
        loss = np.where(t == 1, 1 - cos, 0) + np.where(t == -1, np.maximum(cos - np.asarray(margin, work), 0), 0)
    return _reduce_np(np.asarray(loss, work), _kernel_reduction(size_average, reduce, reduction), out)


def _cosine_embedding_loss_decomp(input1, input2, target, margin=0, size_average=None, reduce=None,
                                  reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    a, b = input1, input2
    prod = _E.sum(a * b, -1)
    mag = (_E.sum(a * a, -1) + _COSINE_EPSILON) * (_E.sum(b * b, -1) + _COSINE_EPSILON)
    cos = prod / _E.sqrt(mag)
    zeros = _E.zeros_like(cos)
    loss = _E.where(target == 1, 1 - cos, zeros) + _E.where(target == -1, _E.clamp(cos - margin, min=0), zeros)
    return _reduce(loss, reduction)


cosine_embedding_loss = _composite(
    "cosine_embedding_loss", _cosine_embedding_loss_meta, cpu=_cosine_embedding_loss_cpu,
    decomposition=_cosine_embedding_loss_decomp, tags=_NN,
)


def _triplet_margin_loss_meta(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, size_average=None,
                              reduce=None, reduction="mean"):
    """Triplet loss (Schroff et al., "FaceNet", 2015): ``max(0, margin + d(a, p) - d(a, n))``.

    ``d`` is :func:`ember.pairwise_distance` with ``p`` and ``eps``; with ``swap``
    (Balntas et al., 2016) ``d(a, n)`` is replaced by ``min(d(a, n), d(p, n))``.

    Args:
        anchor (Tensor): ``(N, D)`` or ``(D,)``.
        positive (Tensor): same number of dims, broadcastable.
        negative (Tensor): same number of dims, broadcastable.
        margin (float): ``> 0``.
        p (float): the norm's exponent.
        eps (float): added to the differences.
        swap (bool): use the distance swap.
        size_average (bool, optional): deprecated (see ``reduction``).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: the loss.

    Raises:
        ValueError: for ``margin <= 0`` or an unknown reduction.
        RuntimeError: for tensors with different numbers of dims, or bool inputs.

    Example:
        >>> import ember
        >>> a, pos, neg = ember.tensor([[0.0, 0.0]]), ember.tensor([[0.0, 1.0]]), ember.tensor([[0.0, 1.5]])
        >>> ember.triplet_margin_loss(a, pos, neg, eps=0.0)
        tensor(0.5000)
    """
    _check_loss_tensors("triplet_margin_loss", ("anchor", anchor), ("positive", positive), ("negative", negative))
    reduction = _reduction(size_average, reduce, reduction)
    margin = _number("triplet_margin_loss", "margin", margin, 4)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but "
            f"got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative {negative.ndim}D inputs"
        )
    d_pos = _pairwise_distance_meta(anchor, positive, p, eps)
    d_neg = _pairwise_distance_meta(anchor, negative, p, eps)
    shape = broadcast_shapes(d_pos.shape, d_neg.shape)
    if swap:
        shape = broadcast_shapes(shape, _pairwise_distance_meta(positive, negative, p, eps).shape)
    dtype = _float_result(_distance_dtype("triplet_margin_loss", anchor, positive, negative)).to_real()
    return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype)


def _triplet_margin_loss_cpu(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, size_average=None,
                             reduce=None, reduction="mean"):
    work = _compute_dtype(_float_result(_distance_dtype("", anchor, positive, negative)).numpy_dtype)
    d_pos = _pairwise_distance_np(_difference(anchor, positive, work), p, eps)
    d_neg = _pairwise_distance_np(_difference(anchor, negative, work), p, eps)
    if swap:
        d_neg = np.minimum(d_neg, _pairwise_distance_np(_difference(positive, negative, work), p, eps))
    loss = np.maximum(np.asarray(margin, d_pos.dtype) + d_pos - d_neg, 0)
    out = _triplet_margin_loss_meta(anchor, positive, negative, margin, p, eps, swap, reduction="none")
    return _reduce_np(np.asarray(loss).reshape(out.shape), _kernel_reduction(size_average, reduce, reduction),
                      out.dtype)


def _triplet_margin_loss_decomp(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                                size_average=None, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d_pos = _E.pairwise_distance(anchor, positive, p, eps)
    d_neg = _E.pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _E.minimum(d_neg, _E.pairwise_distance(positive, negative, p, eps))
    return _reduce(_E.clamp(margin + d_pos - d_neg, min=0), reduction)


triplet_margin_loss = _composite(
    "triplet_margin_loss", _triplet_margin_loss_meta, cpu=_triplet_margin_loss_cpu,
    decomposition=_triplet_margin_loss_decomp, tags=_NN,
)


# -- class-index losses: nll_loss, cross_entropy -----------------------------------------------------------


def _nll_checks(op, input, target, weight):
    """Shape and dtype checks of nll_loss with class-index targets; returns the 'none' output shape."""
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if input.ndim >= 2 and target.ndim >= 1 and input.shape[0] != target.shape[0]:
        raise ValueError(
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({target.shape[0]})."
        )
    if input.ndim <= 2:
        if target.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if input.ndim == 1:
            if target.ndim == 1 and target.shape[0] != 1:
                raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {target.shape[0]}")
            shape = ()
        else:
            if target.ndim == 0:
                raise RuntimeError(f"size mismatch (got input: {_fmt(input.shape)}, target: {_fmt(target.shape)})")
            shape = (input.shape[0],)
    else:
        expected = (input.shape[0],) + tuple(input.shape[2:])
        if input.ndim == 4 and target.ndim != 3:
            raise RuntimeError(
                f"only batches of spatial targets supported (3D tensors) but got targets of dimension: {target.ndim}"
            )
        if tuple(target.shape) != expected:
            raise RuntimeError(f"Expected target size {_fmt(expected)}, got {_fmt(target.shape)}")
        shape = expected
    if target.dtype not in (D.int64, D.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_torch_name(target.dtype)}")
    classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
    if weight is not None:
        if weight.numel() != classes:
            prefix = "cross_entropy: " if op == "cross_entropy" else ""
            raise RuntimeError(
                f"{prefix}weight tensor should be defined either for all {classes} classes or no classes but got "
                f"weight tensor of shape: {_fmt(weight.shape)}"
            )
    return shape


def _nll_dtype_checks(input, weight, kernel):
    _check_floating(kernel, input)
    if weight is not None and weight.dtype is not input.dtype:
        raise RuntimeError(f"expected scalar type {_torch_name(input.dtype)} but found {_torch_name(weight.dtype)}")


def _nll_loss_meta(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class indices: ``-weight[t] * input[n, t]`` for each target ``t``.

    ``input`` holds log-probabilities, classes in dim 1 (``(N, C)``, ``(N, C, d1, ...)``) or dim 0
    (``(C,)``). Targets equal to ``ignore_index`` contribute 0; ``'mean'`` divides by the sum of the
    weights of the other targets.

    Args:
        input (Tensor): log-probabilities, floating point.
        target (Tensor): int64 (or uint8) class indices, ``(N,)``, ``(N, d1, ...)`` or 0-dim.
        weight (Tensor, optional): ``(C,)`` class weights of ``input``'s dtype.
        size_average (bool, optional): deprecated (see ``reduction``).
        ignore_index (int): a target value to leave out.
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.

    Returns:
        Tensor: ``target``'s shape with ``'none'``, else 0-dim.

    Raises:
        ValueError: for a 0-dim input, batch sizes that differ, or an unknown reduction.
        RuntimeError: for target shapes or dtypes that don't fit, or a weight of the wrong size or dtype.
        IndexError: for a target outside ``[0, C)`` (checked on the values).

    Example:
        >>> import ember
        >>> logp = ember.log(ember.tensor([[0.5, 0.5], [0.9, 0.1]]))
        >>> ember.nn.functional.nll_loss(logp, ember.tensor([0, 0]))
        tensor(0.3993)
    """
    _check_loss_tensors("nll_loss", ("input", input), ("target", target))
    _check_optional_tensor("nll_loss", "weight", weight, 3)
    reduction = _reduction(size_average, reduce, reduction)
    shape = _nll_checks("nll_loss", input, target, weight)
    _nll_dtype_checks(input, weight, "nll_loss_out_frame" if input.ndim <= 2 else "nll_loss2d_forward_out_frame")
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _class_last_np(x):
    """``x`` with its class dim (1, or 0 for 1-D) moved last and the rest flattened: ``(M, C)``."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _picked_and_weights(target, weight, ignore_index, classes, dtype):
    """Flat targets made safe, their weights (0 where ignored) and the ignore mask (numpy)."""
    t = target._data.reshape(-1).astype(np.int64)
    ignore = t == ignore_index
    bad = ~ignore & ((t < 0) | (t >= classes))
    if bad.any():
        raise IndexError(f"Target {t[bad][0]} is out of bounds.")
    safe = np.where(ignore, 0, t)
    w = np.ones(t.shape, dtype) if weight is None else _compute(weight._data).astype(dtype, copy=False)[safe]
    w = np.where(ignore, np.asarray(0, dtype), w)
    return safe, w, ignore


def _nll_np(logp, target, weight, ignore_index, reduction, shape):
    """nll_loss on a numpy ``(M, C)`` array of log-probabilities (class dim last)."""
    safe, w, ignore = _picked_and_weights(target, weight, ignore_index, logp.shape[1], logp.dtype)
    picked = logp[np.arange(safe.size), safe] if safe.size else np.zeros(0, logp.dtype)
    return _nll_from_picked(picked, w, ignore, reduction, shape, logp.dtype)


def _nll_from_picked(picked, w, ignore, reduction, shape, dtype):
    """nll_loss from the picked log-probabilities, the target weights (0 where ignored) and the ignore mask."""
    with np.errstate(all="ignore"):
        loss = np.where(ignore, np.asarray(0, dtype), -picked * w)
        if reduction == "none":
            return loss.reshape(shape)
        if reduction == "sum":
            return np.asarray(loss.sum(), dtype)
        return np.asarray(loss.sum() / w.sum(), dtype)


def _nll_loss_cpu(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    shape = _nll_checks("nll_loss", input, target, weight)
    logp = _class_last_np(_compute(input._data))
    return _nll_np(logp, target, weight, ignore_index, reduction, shape).astype(input._data.dtype, copy=False)


def _class_last(x):
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    return _E.movedim(x, 1, -1).reshape(-1, x.shape[1])


def _nll_values(logp, target, weight, ignore_index, reduction):
    """nll_loss in ember ops (decompositions)."""
    shape = _nll_checks("nll_loss", logp, target, weight)
    x = _class_last(logp)
    t = target.reshape(-1).to(D.int64)
    keep = t != ignore_index
    safe = _E.where(keep, t, _E.zeros_like(t))
    picked = _E.gather(x, 1, safe.reshape(-1, 1)).reshape(-1)
    w = _E.ones_like(picked) if weight is None else _E.index_select(weight, 0, safe)
    w = w * keep.to(w.dtype)
    loss = -picked * w
    loss = _E.where(keep, loss, _E.zeros_like(loss))
    if reduction == "none":
        return loss.reshape(shape)
    if reduction == "sum":
        return _E.sum(loss)
    return _E.sum(loss) / _E.sum(w)


def _nll_loss_decomp(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                     reduction="mean"):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    return _nll_values(input, target, weight, ignore_index, reduction)


nll_loss = _composite("nll_loss", _nll_loss_meta, cpu=_nll_loss_cpu, decomposition=_nll_loss_decomp, tags=_NN_ONLY)


def _cross_entropy_meta(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                        reduction="mean", label_smoothing=0.0):
    """Cross entropy between the softmax of ``input`` (logits, classes in dim 1) and ``target``.

    ``target`` holds class indices (int64; ``nll_loss(log_softmax(input, 1), target)``, with
    ``weight``, ``ignore_index`` and ``'mean'`` as in :func:`nll_loss`) or, when it has
    ``input``'s shape, class probabilities (floating point; ``-sum(weight * target * log_softmax)``
    over the classes, ``'mean'`` dividing by the number of samples). ``label_smoothing``
    (Szegedy et al., 2016) mixes the target with the uniform distribution:
    ``(1 - eps) * target + eps / C``.

    Args:
        input (Tensor): logits ``(N, C)``, ``(N, C, d1, ...)`` or ``(C,)``, floating point.
        target (Tensor): class indices ``(N,)``/``(N, d1, ...)``/0-dim, or probabilities shaped like ``input``.
        weight (Tensor, optional): ``(C,)`` class weights.
        size_average (bool, optional): deprecated (see ``reduction``).
        ignore_index (int): a target index to leave out (class-index targets only).
        reduce (bool, optional): deprecated (see ``reduction``).
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        label_smoothing (float): the smoothing amount, at most 1.

    Returns:
        Tensor: per-sample losses with ``'none'``, else 0-dim.

    Raises:
        ValueError: for a 0-dim input, batch sizes that differ, or an unknown reduction.
        RuntimeError: for targets that don't fit, ``label_smoothing > 1``, ``ignore_index`` with probability
            targets, or a weight of the wrong size or dtype.
        IndexError: for a class index outside ``[0, C)``.
        NotImplementedError: for non-floating inputs.

    Example:
        >>> import ember
        >>> logits = ember.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        >>> ember.nn.functional.cross_entropy(logits, ember.tensor([0, 2]))
        tensor(0.6691)
    """
    _check_loss_tensors("cross_entropy", ("input", input), ("target", target))
    _check_optional_tensor("cross_entropy", "weight", weight, 3)
    reduction = _reduction(size_average, reduce, reduction)
    label_smoothing = _number("cross_entropy", "label_smoothing", label_smoothing, 8)
    if tuple(target.shape) == tuple(input.shape):
        if target.dtype.category != D.FLOATING:
            raise RuntimeError(
                f"Expected floating point type for target with class probabilities, got {_torch_name(target.dtype)}"
            )
        if ignore_index != -100:
            raise RuntimeError("ignore_index is not supported for floating point target")
        if label_smoothing > 1.0:
            raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
        _check_floating("log_softmax_lastdim_kernel_impl", input)
        classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
        if weight is not None and weight.numel() != classes:
            raise RuntimeError(
                f"cross_entropy: weight tensor should be defined either for all {classes} classes or no classes but "
                f"got weight tensor of shape: {_fmt(weight.shape)}"
            )
        shape = tuple(input.shape[:1]) + tuple(input.shape[2:]) if input.ndim >= 2 else ()
        dtype = _common_dtype(input, target, weight)
        return MetaArray(_loss_shape(shape, reduction), dtype.numpy_dtype)
    shape = _nll_checks("cross_entropy", input, target, weight)
    _check_floating("log_softmax_lastdim_kernel_impl", input)
    _nll_dtype_checks(input, weight, "nll_loss_out_frame")
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    return MetaArray(_loss_shape(shape, reduction), input._data.dtype)


def _row_logsumexp(x):
    """``log(sum(exp(x)))`` of each row of a numpy ``(M, C)`` array, computed stably: ``(M,)``."""
    with np.errstate(all="ignore"):
        if x.shape[1] == 0:
            return np.full(x.shape[0], -np.inf, x.dtype)
        top = x.max(axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, np.asarray(0, x.dtype))
        total = np.exp(x - top).sum(axis=1, keepdims=True)
        return (np.log(total) + top).reshape(-1)


def _log_softmax_rows(x):
    """``(log_softmax(x), logsumexp)`` of a numpy ``(M, C)`` array along its rows."""
    with np.errstate(all="ignore"):
        top = x.max(axis=1, keepdims=True) if x.shape[1] else np.zeros((x.shape[0], 1), x.dtype)
        top = np.where(np.isfinite(top), top, 0)
        shifted = x - top
        lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        shifted -= lse
        return shifted


_C_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}  # ember._C.cross_entropy's reduction codes


def _cross_entropy_cpu(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                       reduction="mean", label_smoothing=0.0):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    meta = _cross_entropy_meta(input, target, weight, None, ignore_index, None, reduction, label_smoothing)
    out_dtype = meta.dtype
    work = _compute_dtype(out_dtype)
    x = _class_last_np(_compute(input._data, work))
    classes = x.shape[1]
    w = None if weight is None else _compute(weight._data, work)
    if tuple(target.shape) == tuple(input.shape):
        logp = _log_softmax_rows(x)
        t = _class_last_np(_compute(target._data, work))
        if label_smoothing > 0:
            t = t * np.asarray(1 - label_smoothing, work) + np.asarray(label_smoothing / classes, work)
        prod = logp * t
        if w is not None:
            prod *= w
        with np.errstate(all="ignore"):
            loss = -prod.sum(axis=1)
            if reduction == "none":
                shape = tuple(input.shape[:1]) + tuple(input.shape[2:]) if input.ndim >= 2 else ()
                return loss.reshape(shape).astype(out_dtype, copy=False)
            if reduction == "sum":
                return np.asarray(loss.sum()).astype(out_dtype)
            return np.asarray(loss.sum() / np.asarray(x.shape[0], work)).astype(out_dtype)
    # class indices: only the log-sum-exp of each row and the picked logits are needed, not log_softmax itself
    shape = _nll_checks("cross_entropy", input, target, weight)
    if work in _C_FLOATS:
        loss = _C.cross_entropy(
            _contiguous(x), _contiguous(target._data.reshape(-1).astype(np.int64, copy=False)),
            None if w is None else _contiguous(w.reshape(-1)), int(ignore_index), float(label_smoothing),
            _C_REDUCTIONS[reduction],
        )
        return (loss.reshape(shape) if reduction == "none" else loss).astype(out_dtype, copy=False)
    safe, wt, ignore = _picked_and_weights(target, weight, ignore_index, classes, work)
    lse = _row_logsumexp(x)
    picked = (x[np.arange(safe.size), safe] - lse) if safe.size else np.zeros(0, work)
    nll = _nll_from_picked(picked, wt, ignore, reduction, shape, work)
    if label_smoothing <= 0:
        return nll.astype(out_dtype, copy=False)
    with np.errstate(all="ignore"):
        if w is not None:  # sum_c w_c * log_softmax_c = x @ w - lse * sum(w)
            smooth = -(_matmul_np(x, w) - lse * w.sum())
        else:
            smooth = -(x.sum(axis=1) - lse * classes)
        smooth = np.where(ignore, np.asarray(0, work), smooth)
        if reduction == "none":
            smooth_total = smooth.reshape(shape)
        elif reduction == "sum":
            smooth_total = smooth.sum()
        else:
            smooth_total = smooth.sum() / (wt.sum() if w is not None else np.asarray((~ignore).sum(), work))
        out = nll * np.asarray(1 - label_smoothing, work) + smooth_total * np.asarray(label_smoothing / classes, work)
    return np.asarray(out).astype(out_dtype, copy=False)


def _cross_entropy_decomp(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                          reduction="mean", label_smoothing=0.0):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    class_dim = 1 if input.ndim >= 2 else 0
    classes = input.shape[class_dim]
    w_shape = [1] * input.ndim
    w_shape[class_dim] = classes
    if tuple(target.shape) == tuple(input.shape):
        dtype = _common_dtype(input, target, weight)
        logp = _E.log_softmax(input.to(dtype), class_dim)
        t = target.to(dtype)
        if label_smoothing > 0:
            t = t * (1 - label_smoothing) + label_smoothing / classes
        prod = logp * t
        if weight is not None:
            prod = prod * weight.to(dtype).reshape(w_shape)
        loss = -_E.sum(prod, class_dim)
        if reduction == "mean":
            return _E.sum(loss) / (input.numel() // classes if classes else 0)
        return _reduce(loss, reduction)
    logp = _E.log_softmax(input, class_dim)
    nll = _nll_values(logp, target, weight, ignore_index, reduction)
    if label_smoothing <= 0:
        return nll
    keep = target != ignore_index
    smooth = -_E.sum(logp * weight.reshape(w_shape), class_dim) if weight is not None else -_E.sum(logp, class_dim)
    smooth = _E.where(keep, smooth, _E.zeros_like(smooth))
    if reduction == "sum":
        smooth = _E.sum(smooth)
    elif reduction == "mean":
        if weight is not None:
            safe = _E.where(keep, target, _E.zeros_like(target)).reshape(-1)
            denominator = _E.sum(_E.index_select(weight, 0, safe) * keep.reshape(-1).to(weight.dtype))
        else:
            denominator = _E.sum(keep.to(smooth.dtype))
        smooth = _E.sum(smooth) / denominator
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / classes)


cross_entropy = _composite(
    "cross_entropy", _cross_entropy_meta, cpu=_cross_entropy_cpu, decomposition=_cross_entropy_decomp, tags=_NN_ONLY
)


# -- ctc_loss ------------------------------------------------------------------------------------------


def _lengths(name, value, batch):
    """``input_lengths``/``target_lengths`` as a numpy int64 array of ``batch`` entries (tensor or sequence).

    Raises:
        RuntimeError: for non-integer lengths or the wrong count.
    """
    if isinstance(value, Tensor):
        if value.dtype.category != D.INTEGRAL:
            raise RuntimeError(f"{name} must be integral")
        if value.device.type == "meta":
            return None
        array = value._host_array().astype(np.int64).reshape(-1)
    else:
        try:
            array = np.array([operator.index(v) for v in value], dtype=np.int64)
        except TypeError:
            raise RuntimeError(f"{name} must be integral") from None
    if array.size != batch:
        raise RuntimeError(f"{name} must be of size batch_size")
    return array


def _ctc_checks(log_probs, targets, input_lengths, target_lengths, blank, reduction):
    """Shape and value checks of ctc_loss; returns ``(batch, input_lengths, target_lengths)`` (numpy or None)."""
    _check_loss_tensors("ctc_loss", ("log_probs", log_probs), ("targets", targets))
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D or 3-D, got {log_probs.ndim}-D")
    batched = log_probs.ndim == 3
    batch = log_probs.shape[1] if batched else 1
    steps, classes = log_probs.shape[0], log_probs.shape[-1]
    if log_probs.dtype not in (D.float32, D.float64):
        raise _not_implemented("ctc_loss_cpu", log_probs.dtype)
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    in_len = _lengths("input_lengths", input_lengths, batch)
    tg_len = _lengths("target_lengths", target_lengths, batch)
    if in_len is not None:
        if in_len.size and in_len.min() < 0:
            raise RuntimeError(
                f"Expected input_lengths to have value at least 0, but got value {in_len.min()} (while checking "
                "arguments for ctc_loss_allocate_outputs)"
            )
        if in_len.size and in_len.max() > steps:
            raise RuntimeError(
                f"Expected input_lengths to have value at most {steps}, but got value {in_len.max()} (while checking "
                "arguments for ctc_loss_allocate_outputs)"
            )
    if tg_len is not None:
        if tg_len.size and tg_len.min() < 0:
            raise RuntimeError(
                f"Expected target_lengths to have value at least 0, but got value {tg_len.min()} (while checking "
                "arguments for ctc_loss_allocate_outputs)"
            )
        padded = targets.ndim == 2 and batched
        need = int(tg_len.max()) if padded and tg_len.size else int(tg_len.sum())
        have = targets.shape[1] if padded else targets.numel()
        if need > have:
            dim = 1 if padded else 0
            raise RuntimeError(
                f"Expected tensor to have size at least {need} at dimension {dim}, but got size {have} for argument "
                "#2 'targets' (while checking arguments for ctc_loss_allocate_outputs)"
            )
    return batch, in_len, tg_len


def _ctc_loss_meta(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification loss (Graves et al., 2006).

    The negative log-probability of each target sequence summed over all its
    alignments with the input frames, computed by the forward algorithm in log
    space (vectorised over the batch). ``'mean'`` divides each loss by its target
    length (at least 1) before averaging over the batch.

    Args:
        log_probs (Tensor): ``(T, N, C)`` or ``(T, C)`` log-probabilities (``log_softmax`` output),
            float32 or float64.
        targets (Tensor): class indices (never ``blank``): padded ``(N, S)``, or the concatenation of the
            ``N`` targets, 1-D.
        input_lengths (Tensor or sequence of int): ``(N,)`` frames used per sample, ``<= T``.
        target_lengths (Tensor or sequence of int): ``(N,)`` target lengths.
        blank (int): the blank class.
        reduction (str): ``'none'``, ``'mean'`` or ``'sum'``.
        zero_infinity (bool): replace infinite losses (impossible alignments) by 0.

    Returns:
        Tensor: ``(N,)`` with ``'none'`` (0-dim for an unbatched input), else 0-dim.

    Raises:
        RuntimeError: for lengths out of range or of the wrong count, or ``blank`` outside ``[0, C)``.
        ValueError: for an unknown reduction.
        NotImplementedError: for dtypes other than float32 and float64.

    Example:
        >>> import ember
        >>> log_probs = ember.log(ember.full((2, 1, 2), 0.5))
        >>> ember.ctc_loss(log_probs, ember.tensor([[1]]), [2], [1], reduction="sum")
        tensor(0.2877)
    """
    batch, _, _ = _ctc_checks(log_probs, targets, input_lengths, target_lengths, blank, reduction)
    shape = (batch,) if log_probs.ndim == 3 else ()
    return MetaArray(_loss_shape(shape, reduction), log_probs._data.dtype)


def _ctc_padded_targets(targets, tg_len, batched):
    """Targets as a padded ``(N, S)`` int64 numpy array."""
    t = targets._data.astype(np.int64)
    if batched and t.ndim == 2:
        return t
    flat = t.reshape(-1)
    width = int(tg_len.max()) if tg_len.size else 0
    out = np.zeros((tg_len.size, width), np.int64)
    starts = np.concatenate([[0], np.cumsum(tg_len)[:-1]])
    for n, (s, length) in enumerate(zip(starts, tg_len)):  # one slice per sample, not per element
        out[n, :length] = flat[s:s + length]
    return out


def _logsumexp3(a, b, c):
    top = np.maximum(np.maximum(a, b), c)
    safe = np.where(np.isneginf(top), 0, top)
    with np.errstate(all="ignore"):
        return safe + np.log(np.exp(a - safe) + np.exp(b - safe) + np.exp(c - safe))


def _ctc_loss_cpu(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    batch, in_len, tg_len = _ctc_checks(log_probs, targets, input_lengths, target_lengths, blank, reduction)
    batched = log_probs.ndim == 3
    lp = log_probs._data.astype(np.float64)
    if not batched:
        lp = lp[:, None, :]
    steps, _, classes = lp.shape
    tgt = _ctc_padded_targets(targets, tg_len, batched)
    width = tgt.shape[1]
    states = 2 * width + 1
    if width and np.any((tgt < 0) | (tgt >= classes)):
        raise RuntimeError(f"ctc_loss: target labels must be in [0, {classes})")
    ext = np.full((batch, states), blank, np.int64)
    ext[:, 1::2] = tgt
    skip = np.zeros((batch, states), bool)
    if states > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    neg_inf = np.full((batch, 1), -np.inf)
    alpha = np.full((batch, states), -np.inf)
    if steps:
        first = np.take_along_axis(lp[0], ext, axis=1)
        alpha[:, 0] = first[:, 0]
        if states > 1:
            alpha[:, 1] = np.where(tg_len > 0, first[:, 1], -np.inf)
    for t in range(1, steps):
        emit = np.take_along_axis(lp[t], ext, axis=1)
        prev1 = np.concatenate([neg_inf, alpha[:, :-1]], axis=1)
        prev2 = np.concatenate([neg_inf, neg_inf, alpha[:, :-2]], axis=1)[:, :states]
        prev2 = np.where(skip, prev2, -np.inf)
        new = _logsumexp3(alpha, prev1, prev2) + emit
        alpha = np.where((t < in_len)[:, None], new, alpha)
    rows = np.arange(batch)
    end_blank = alpha[rows, 2 * tg_len]
    end_label = np.where(tg_len > 0, alpha[rows, np.maximum(2 * tg_len - 1, 0)], -np.inf)
    loss = -np.logaddexp(end_blank, end_label)
    empty = in_len == 0
    loss = np.where(empty, np.where(tg_len == 0, -0.0, np.inf), loss)
    if zero_infinity:
        loss = np.where(np.isinf(loss), 0.0, loss)
    dtype = log_probs._data.dtype
    if reduction == "mean":
        return np.asarray((loss / np.maximum(tg_len, 1)).mean() if batch else np.nan).astype(dtype)
    if reduction == "sum":
        return np.asarray(loss.sum()).astype(dtype)
    return (loss if batched else loss.reshape(())).astype(dtype)


def _ctc_loss_decomp(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
                     zero_infinity=False):
    from .._creation import tensor as as_tensor

    batched = log_probs.ndim == 3
    lp = log_probs if batched else _E.unsqueeze(log_probs, 1)
    steps, batch, _ = lp.shape
    device = lp.device
    def as_lengths(value):
        return value if isinstance(value, Tensor) else as_tensor(list(value), device=device)

    lengths_in, lengths_tg = as_lengths(input_lengths), as_lengths(target_lengths)
    lengths_in, lengths_tg = lengths_in.reshape(-1).to(D.int64), lengths_tg.reshape(-1).to(D.int64)
    # padded (N, S) targets, blank beyond each length
    if batched and targets.ndim == 2:
        width = targets.shape[1]
        positions = _E.arange(width, device=device)
        in_range = positions.reshape(1, -1) < lengths_tg.reshape(-1, 1)
        labels = targets.to(D.int64)
    else:
        flat = targets.reshape(-1).to(D.int64)
        width = int(_E.amax(lengths_tg).item()) if batch else 0
        positions = _E.arange(width, device=device)
        in_range = positions.reshape(1, -1) < lengths_tg.reshape(-1, 1)
        starts = _E.cumsum(lengths_tg, 0) - lengths_tg
        index = starts.reshape(-1, 1) + positions.reshape(1, -1)
        index = _E.where(in_range, index, _E.zeros_like(index))
        labels = _E.index_select(flat, 0, index.reshape(-1)).reshape(batch, width) if flat.numel() else \
            _E.zeros((batch, width), dtype=D.int64, device=device)
    labels = _E.where(in_range, labels, _E.full_like(labels, blank))
    # the extended label sequence: blank, l1, blank, l2, ..., blank
    blanks = _E.full_like(labels, blank)
    ext = _E.cat([_E.stack([blanks, labels], 2).reshape(batch, 2 * width),
                  _E.full((batch, 1), blank, dtype=D.int64, device=device)], 1)
    states = 2 * width + 1
    skip = _E.cat([_E.zeros((batch, min(2, states)), dtype=D.bool, device=device),
                   _E.logical_and(ext[:, 2:] != blank, ext[:, 2:] != ext[:, :-2])], 1)
    neg = _E.full((batch, 1), -math.inf, dtype=lp.dtype, device=device)
    first = _E.gather(lp[0], 1, ext)
    state = _E.arange(states, device=device).reshape(1, -1)
    start = _E.logical_or(state == 0, _E.logical_and(state == 1, (lengths_tg > 0).reshape(-1, 1)))
    alpha = _E.where(start, first, _E.full_like(first, -math.inf))
    for t in range(1, steps):
        emit = _E.gather(lp[t], 1, ext)
        prev1 = _E.cat([neg, alpha[:, :-1]], 1)
        prev2 = _E.cat([neg, neg, alpha[:, :-2]], 1)[:, :states]
        prev2 = _E.where(skip, prev2, _E.full_like(prev2, -math.inf))
        new = _E.logsumexp(_E.stack([alpha, prev1, prev2]), 0) + emit
        alpha = _E.where((lengths_in > t).reshape(-1, 1), new, alpha)
    end_blank = _E.gather(alpha, 1, (lengths_tg * 2).reshape(-1, 1)).reshape(-1)
    end_label = _E.gather(alpha, 1, _E.clamp(lengths_tg * 2 - 1, min=0).reshape(-1, 1)).reshape(-1)
    end_label = _E.where(lengths_tg > 0, end_label, _E.full_like(end_label, -math.inf))
    loss = -_E.logaddexp(end_blank, end_label)
    impossible = _E.where(lengths_tg == 0, _E.zeros_like(loss), _E.full_like(loss, math.inf))
    loss = _E.where(lengths_in == 0, impossible, loss)
    if zero_infinity:
        loss = _E.where(_E.isinf(loss), _E.zeros_like(loss), loss)
    if reduction == "mean":
        return _E.mean(loss / _E.clamp(lengths_tg, min=1).to(loss.dtype))
    if reduction == "sum":
        return _E.sum(loss)
    return loss if batched else loss.reshape(())


ctc_loss = _composite("ctc_loss", _ctc_loss_meta, cpu=_ctc_loss_cpu, decomposition=_ctc_loss_decomp, tags=_NN)
