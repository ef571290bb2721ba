"""Derivatives of the normalization ops.

See :mod:`ember.autograd.derivatives._nn_common` for the two treatments (formula or decomposition) the
``nn.functional`` ops get.
"""

from __future__ import annotations

import math

import numpy as np

import ember

from .._table import derivative, through_decomposition
from ._helpers import conj
from ._nn_common import _cpu_arrays, _cpu_float_rows, _cuda_rows

_HALF = (ember.float16, ember.bfloat16)


def _upcast(t):
    """``t`` in float32 when it is float16/bfloat16: statistics are computed there, as the kernels do."""
    return t.to(ember.float32) if t is not None and t.dtype in _HALF else t


def _normalized_backward(g, xhat, invstd, dims):
    """The gradient of ``x`` through ``xhat = (x - mean(x)) * invstd(x)`` (statistics over ``dims``).

    ``g`` is the gradient of ``xhat``: ``invstd * (g - mean(g) - xhat * mean(g * xhat))``.
    """
    return (g - ember.mean(g, dims, keepdim=True) - xhat * ember.mean(g * xhat, dims, keepdim=True)) * invstd


def _standardize(x, dims, eps):
    """``(xhat, invstd)`` of ``x`` over ``dims`` (biased variance), dims kept."""
    var, mean = ember.var_mean(x, dims, correction=0, keepdim=True)
    invstd = ember.rsqrt(var + eps)
    return (x - mean) * invstd, invstd


def _channel_view(p, ndim):
    """A per-channel ``(C,)`` tensor shaped to broadcast along dim 1 of ``ndim`` dims."""
    return p.reshape((-1,) + (1,) * (ndim - 2))


def _channel_norm_backward(grad, input, mean, var, weight, eps, stat_dims, output_mask):
    """Shared by batch_norm and instance_norm: ``(d input, d weight, d bias)``.

    ``mean``/``var`` are running statistics (then the input's own are not used), or None for the
    statistics of the input over ``stat_dims``.
    """
    ndim = input.ndim
    x, g = _upcast(input), _upcast(grad)
    param_dims = [0] + list(range(2, ndim))
    if mean is None:
        xhat, invstd = _standardize(x, stat_dims, eps)
    else:
        invstd = _channel_view(ember.rsqrt(_upcast(var).to(x.dtype) + eps), ndim)
        xhat = (x - _channel_view(_upcast(mean).to(x.dtype), ndim)) * invstd
    d_input = d_weight = d_bias = None
    if output_mask[2]:
        d_bias = ember.sum(g, param_dims)
    if output_mask[1]:
        d_weight = ember.sum(g * xhat, param_dims)
    if output_mask[0]:
        gx = g if weight is None else g * _channel_view(_upcast(weight).to(x.dtype), ndim)
        d_input = gx * invstd if mean is not None else _normalized_backward(gx, xhat, invstd, stat_dims)
    return d_input, d_weight, d_bias


def _batch_norm_backward(grad, input, running_mean, running_var, weight, training, eps, output_mask):
    if input.numel() == 0:
        return ember.zeros_like(input), _zeros_param(weight), _zeros_param(weight)
    if training:
        fast = _batch_norm_backward_cpu(grad, input, weight, eps, output_mask)
        if fast is not None:
            return fast
        stat_dims = [0] + list(range(2, input.ndim))
        return _channel_norm_backward(grad, input, None, None, weight, eps, stat_dims, output_mask)
    return _channel_norm_backward(grad, input, running_mean, running_var, weight, eps, None, output_mask)


def _batch_norm_backward_cpu(grad, input, weight, eps, output_mask):
    """The training-mode gradients in one ember._C kernel (three passes over the input where the formula makes
    about a dozen), for float32/float64 CPU tensors of one dtype in a backward that records nothing; None
    for every other call (the formula then runs)."""
    arrays = _cpu_arrays(grad, input, weight)
    if arrays is None:
        return None
    g, x, w = arrays
    if x.dtype not in _C_FLOATS or g.dtype != x.dtype or (w is not None and w.dtype != x.dtype) or input.ndim < 2:
        return None
    if not x.flags.c_contiguous:
        return None
    d_input, d_weight, d_bias = ember._C.batch_norm_backward(
        x, np.ascontiguousarray(g), None if w is None else np.ascontiguousarray(w), float(eps), bool(output_mask[0])
    )
    device = input.device
    return (
        ember.Tensor._make(d_input, device) if output_mask[0] else None,
        ember.Tensor._make(d_weight, device) if output_mask[1] else None,
        ember.Tensor._make(d_bias, device) if output_mask[2] else None,
    )


_C_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _instance_norm_backward(grad, input, running_mean, running_var, weight, use_input_stats, eps, output_mask):
    if input.numel() == 0:
        return ember.zeros_like(input), _zeros_param(weight), _zeros_param(weight)
    if use_input_stats:
        stat_dims = list(range(2, input.ndim))
        return _channel_norm_backward(grad, input, None, None, weight, eps, stat_dims, output_mask)
    return _channel_norm_backward(grad, input, running_mean, running_var, weight, eps, None, output_mask)


def _zeros_param(weight):
    return None if weight is None else ember.zeros_like(weight)


# running statistics are buffers the forward updates, never differentiated (as in PyTorch)
derivative(
    "batch_norm",
    joint={("input", "weight", "bias"): _batch_norm_backward},
    nondiff=("running_mean", "running_var"),
)
derivative(
    "instance_norm",
    joint={("input", "weight", "bias"): _instance_norm_backward},
    nondiff=("running_mean", "running_var"),
)


def _layer_norm_backward(grad, input, normalized_shape, weight, eps, output_mask):
    ndim = input.ndim
    k = len(normalized_shape)
    dims = list(range(ndim - k, ndim))
    lead = list(range(ndim - k))
    if input.numel() == 0:
        return ember.zeros_like(input), _zeros_param(weight), _zeros_param(weight)
    rows = _cuda_rows(input, grad, weight)
    if rows is not None:
        return rows.layer_norm_backward_tensor(grad, input, normalized_shape, weight, eps, output_mask)
    fast = _layer_norm_backward_cpu(grad, input, normalized_shape, weight, eps, output_mask)
    if fast is not None:
        return fast
    x, g = _upcast(input), _upcast(grad)
    xhat, invstd = _standardize(x, dims, eps)
    d_input = d_weight = d_bias = None
    if output_mask[2]:
        d_bias = ember.sum(g, lead) if lead else g
    if output_mask[1]:
        d_weight = ember.sum(g * xhat, lead) if lead else g * xhat
    if output_mask[0]:
        gx = g if weight is None else g * _upcast(weight).to(x.dtype)
        d_input = _normalized_backward(gx, xhat, invstd, dims)
    return d_input, d_weight, d_bias


def _layer_norm_backward_cpu(grad, input, normalized_shape, weight, eps, output_mask):
    """The three gradients from csrc/nn_rows_backward.cpp (statistics recomputed in float64, one pass per row
    and the parameters' column sums) for plain CPU float32/float64 tensors of one dtype in a backward that
    records nothing; None for every other call (the formula then runs)."""
    cpu = _cpu_float_rows("layer_norm_backward", input, grad, weight)
    if cpu is None:
        return None
    _C, (x, g, w) = cpu
    n = math.prod(normalized_shape)
    d_input, d_weight, d_bias = _C.layer_norm_backward(
        x.reshape(-1, n), g.reshape(-1, n), None if w is None else w.reshape(n), float(eps),
        bool(output_mask[0]), bool(output_mask[1]) and w is not None, bool(output_mask[2]),
    )
    device, dtype = input.device, x.dtype
    shape = tuple(normalized_shape)
    return (
        None if d_input is None else ember.Tensor._make(d_input.reshape(x.shape), device),
        None if d_weight is None else ember.Tensor._make(d_weight.astype(dtype).reshape(shape), device),
        None if d_bias is None else ember.Tensor._make(d_bias.astype(dtype).reshape(shape), device),
    )


derivative("layer_norm", joint={("input", "weight", "bias"): _layer_norm_backward})


def _group_norm_backward(grad, input, num_groups, weight, eps, output_mask):
    if input.numel() == 0:
        return ember.zeros_like(input), _zeros_param(weight), _zeros_param(weight)
    shape = tuple(input.shape)
    ndim = input.ndim
    n = shape[0]
    x, g = _upcast(input), _upcast(grad)
    xhat, invstd = _standardize(x.reshape(n, num_groups, -1), [2], eps)
    param_dims = [0] + list(range(2, ndim))
    d_input = d_weight = d_bias = None
    if output_mask[2]:
        d_bias = ember.sum(g, param_dims)
    if output_mask[1]:
        d_weight = ember.sum(g * xhat.reshape(shape), param_dims)
    if output_mask[0]:
        gx = g if weight is None else g * _channel_view(_upcast(weight).to(x.dtype), ndim)
        d_input = _normalized_backward(gx.reshape(n, num_groups, -1), xhat, invstd, [2]).reshape(shape)
    return d_input, d_weight, d_bias


derivative("group_norm", joint={("input", "weight", "bias"): _group_norm_backward})


def _rms_norm_backward(grad, input, normalized_shape, weight, eps, output_mask):
    # y = x * r * w with r = (mean(x * x) + eps) ** -1/2 (x * x, not |x|^2, for complex x: holomorphic in x)
    if eps is None:
        eps = ember.finfo(input.dtype).eps
    ndim = input.ndim
    k = len(normalized_shape)
    dims = list(range(ndim - k, ndim))
    lead = list(range(ndim - k))
    if input.numel() == 0:
        return ember.zeros_like(input), _zeros_param(weight)
    x, g = _upcast(input), _upcast(grad)
    r = ember.rsqrt(ember.mean(x * x, dims, keepdim=True) + eps)
    d_input = d_weight = None
    if output_mask[1]:
        gw = g * conj(x * r)
        d_weight = ember.sum(gw, lead) if lead else gw
    if output_mask[0]:
        gx = g if weight is None else g * conj(_upcast(weight))
        rc, xc = conj(r), conj(x)
        # dx = conj(r) * gx - conj(r)^3 * conj(x) * mean(gx * conj(x))
        d_input = rc * (gx - xc * (rc * rc) * ember.mean(gx * xc, dims, keepdim=True))
    return d_input, d_weight


derivative("rms_norm", joint={("input", "weight"): _rms_norm_backward})
# PyTorch's local_response_norm and normalize are these compositions (pool/pow/div, norm/clamp/div)
through_decomposition("local_response_norm", "normalize")
