"""ember.nn.functional: normalization (batch, instance, layer, group, RMS and local response norm, ``normalize``).

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import _C
from .. import _dtype as D
from .._grad_mode import no_grad
from .._meta import MetaArray
from ._nn_common import (
    _C_FLOATS,
    _E,
    _NN,
    _NN_ONLY,
    _check_floating,
    _check_optional_tensor,
    _check_tensor,
    _composite,
    _compute,
    _contiguous,
    _fmt,
    _int_arg,
    _not_implemented,
    _number,
    _size,
    _upcast,
    _vector_norm_np,
)
from ._pointwise_helpers import _torch_name
from ._registry import registry
from ._shapes import wrap_dim
from .sums import _c_sum

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


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


def _update_running_np(stat, new, momentum, bump=True):
    """``stat = (1 - momentum) * stat + momentum * new`` in place (numpy ``new``), bumping ``stat``'s version.

    ``bump=False`` leaves the version alone, as PyTorch's batch_norm does: its backward keeps the
    running statistics (for evaluation mode), and a module applied twice in one training step
    must not make the first call's backward see them as modified.
    """
    data = stat._data
    updated = _compute(data).reshape(-1) * (1 - momentum) + new.reshape(-1) * momentum
    np.copyto(data, updated.reshape(data.shape).astype(data.dtype, copy=False), casting="unsafe")
    if bump:
        stat._bump_version()


def _normalize_np(centered, offset, var, eps, weight, bias, ndim):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` along dim 1, computed in place in ``centered``.

    ``centered`` is ``x - m`` for a per-channel ``m`` (a float array the caller no longer needs) and
    ``offset`` (``(C,)`` or None) is ``mean - m``: the correction of a rounded mean. The deviations are
    scaled rather than ``x`` itself: ``x * scale + (bias - mean * scale)`` subtracts two terms of size
    ``|mean| / std`` (150 for a channel of mean 3 and spread 0.02), so their rounding lands in the output
    that much amplified: enough to move a ReLU's input across 0 (one such flip left MobileNetV2's eager
    training gradients ~1% off). The per-channel scale and shift are computed in float64 and rounded once.
    """
    scale = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    if weight is not None:
        scale = scale * _compute(weight).astype(np.float64)
    shift = np.zeros_like(scale) if bias is None else _compute(bias).astype(np.float64).reshape(scale.shape)
    if offset is not None:
        shift -= offset * scale  # (float64)
    centered *= _param_view(scale.astype(centered.dtype), ndim)
    if bias is not None or offset is not None:
        centered += _param_view(shift.astype(centered.dtype), ndim)
    return centered


def _channel_mean(x, axes):
    """``x.mean(axis=axes)`` over every dim but the channels (dim 1), summed by ember._C where it applies
    (``sums._c_sum``: no reordering copy; numpy's mean over (0, 2, 3) was 2.6x PyTorch's batch statistics)."""
    total = _c_sum(x, axes, False) if x.dtype in (np.float32, np.float64) else None
    if total is None:
        return x.mean(axis=axes)
    return total / (x.size // x.shape[1])


def _batch_norm_train_c(x, weight, bias, eps):
    """``(output, float64 batch mean, float64 biased variance)`` of training-mode batch_norm from
    ``ember._C.batch_norm_forward_train`` (this module's numpy arithmetic below in one call: 140-370 us of
    numpy calls and temporaries on the model suite's small activations, PyTorch 27-90 us), for a C-contiguous
    float32/float64 ``x`` with parameters of its dtype (or None); None for other calls."""
    if type(x) is not np.ndarray or x.dtype not in (np.float32, np.float64) or x.ndim < 2 or not x.flags.c_contiguous:
        return None  # (a MetaArray while a graph is traced, CuPy arrays: the general path)
    params = []
    for p in (weight, bias):
        a = None if p is None else p._data
        if a is not None and (type(a) is not np.ndarray or a.dtype != x.dtype or a.ndim != 1):
            return None
        params.append(None if a is None else np.ascontiguousarray(a))
    return _C.batch_norm_forward_train(x, params[0], params[1], float(eps))


def _batch_norm_cpu(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                    eps=1e-05):
    data = input._data
    x = _compute(data)
    ndim = x.ndim
    if data.size == 0:
        return np.empty(data.shape, data.dtype)
    with np.errstate(all="ignore"):
        if training and (fast := _batch_norm_train_c(x, weight, bias, eps)) is not None:
            out, batch_mean, var = fast
            if running_mean is not None:
                count = x.size // x.shape[1]
                _update_running_np(running_mean, batch_mean, momentum, bump=False)
                _update_running_np(running_var, var * (count / (count - 1)), momentum, bump=False)
            return out.astype(data.dtype, copy=False)
        if training:
            axes = (0,) + tuple(range(2, ndim))
            mean = _channel_mean(x, axes)
            centered = x - _param_view(mean, ndim)
            # the mean is rounded to x's dtype; the mean of the deviations from it is the correction, and
            # the variance about the corrected mean is their mean square less its square ("corrected
            # two-pass", Chan, Golub and LeVeque 1983)
            offset = _channel_mean(centered, axes).astype(np.float64)
            var = np.maximum(_channel_mean(np.square(centered), axes).astype(np.float64) - offset * offset, 0.0)
            if running_mean is not None:
                count = x.size // x.shape[1]
                _update_running_np(running_mean, mean + offset, momentum, bump=False)
                _update_running_np(running_var, var * (count / (count - 1)), momentum, bump=False)
        else:
            centered = x - _param_view(_compute(running_mean._data).astype(x.dtype, copy=False), ndim)
            offset = None
            var = _compute(running_var._data)
        w = None if weight is None else weight._data
        b = None if bias is None else bias._data
        out = _normalize_np(centered, offset, var, eps, w, b, ndim)
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
    return _channel_affine(out, input, weight, bias)


def _channel_affine(out, input, weight, bias):
    """``out * weight + bias`` with per-channel ``(C,)`` ``weight`` and ``bias`` (either may be None) along
    dim 1, cast to ``input``'s dtype: the common tail of the batch, instance and group norm decompositions."""
    ndim = input.ndim
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
            out = _normalize_np(x - _param_view(mean, x.ndim), None, _compute(running_var._data), eps, None, None,
                                x.ndim)
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
    return _channel_affine((x - mean) * _E.rsqrt(var + eps), input, weight, bias)


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


# Rows of at most this many elements take ember._C.layer_norm_rows (one thread, 64 to 512 wide: 2.5x to 1.5x
# faster than the generic kernel)
_SHORT_ROW = 512
_HAS_LAYER_NORM_ROWS = hasattr(_C, "layer_norm_rows")  # an ember._C built before the row kernels lacks it


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
        if inner <= _SHORT_ROW and _HAS_LAYER_NORM_ROWS:
            # short rows (a small transformer's width): the row kernel of csrc/nn_rows_backward.cpp, without
            # the generic kernel's fixed cost per row
            rows = _C.layer_norm_rows(_contiguous(x).reshape(-1, inner), *params, float(eps))
            return rows.reshape(data.shape).astype(data.dtype, copy=False)
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
    return _channel_affine(((grouped - mean) * _E.rsqrt(var + eps)).reshape(tuple(input.shape)), input, weight, bias)


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


def _channel_window_sums(sq, before, after):
    """``sq`` summed over the channels ``c - before`` to ``c + after`` of each channel ``c`` (dim 1).

    Each offset in the window adds one shifted slice, so the sum is direct: an inf or a huge value
    reaches only the windows that hold it. (Differences of a cumulative sum turned an inf into NaN
    in channels far from it, and let 1e8 cancel its neighbours' squares.) Offsets that see no
    channel are skipped, so a window wider than the tensor costs no more than twice its channels.
    """
    channels = sq.shape[1]
    total = np.zeros_like(sq)
    for offset in range(-min(before, channels - 1), min(after, channels - 1) + 1):
        if offset >= 0:
            total[:, : channels - offset] += sq[:, offset:]
        else:
            total[:, -offset:] += sq[:, : channels + offset]
    return total


def _local_response_norm_cpu(input, size, alpha=0.0001, beta=0.75, k=1.0):
    data = input._data
    if data.size == 0:
        return np.empty(data.shape, data.dtype)
    x = _compute(data)
    with np.errstate(all="ignore"):
        window = _channel_window_sums(np.square(x), size // 2, (size - 1) // 2)
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
    # a direct sum over the window (no cumulative sum: an inf stays in the windows that hold it);
    # windows that lie wholly in the padding add nothing and are skipped
    before = size // 2
    first, stop = max(0, before - channels + 1), min(size, before + channels)
    total = _E.narrow(padded, 1, first, channels)
    for i in range(first + 1, stop):
        total = total + _E.narrow(padded, 1, i, channels)
    div = _E.pow(total * (alpha / size) + k, beta)
    return input / div


local_response_norm = _composite(
    "local_response_norm", _local_response_norm_meta, cpu=_local_response_norm_cpu,
    decomposition=_local_response_norm_decomp, tags=_NN_ONLY,
)


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
