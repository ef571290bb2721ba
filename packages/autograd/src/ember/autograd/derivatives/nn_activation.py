"""Derivatives of the activations, the softmax and dropout families and the linear maps.

See :mod:`ember.autograd.derivatives._nn_common` for the two treatments (formula or decomposition) the
``nn.functional`` ops get.
"""

from __future__ import annotations

import math

import ember
from ember._ops import registry as _ops
from ember._ops._dispatch import state as _dispatch_state

from .._table import derivative, through_decomposition
from ._helpers import conj
from ._nn_common import _C_FLOATS, _cpu_arrays, _cpu_float_rows, _cuda_rows

_softplus = _ops["softplus"]
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_KAPPA = 0.044715
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


# relu, threshold: the gradient passes where the output is above the threshold (0 at it, as PyTorch)
_threshold_backward = _ops["threshold_backward"]

# relu, threshold: the gradient passes unless the output (input) is at or below the threshold, as PyTorch: one
# op (its threshold_backward), which also passes it where the value is NaN
derivative("relu", input=lambda grad, result: _threshold_backward(grad, result, 0))
derivative("threshold", input=lambda grad, input, threshold: _threshold_backward(grad, input, threshold))
# piecewise constant in self: its gradient is zero wherever it exists
derivative(
    "threshold_backward",
    grad_output=lambda grad, self, threshold: _threshold_backward(grad, self, threshold),
    self=lambda grad, self: ember.zeros_like(self),
)


# hardtanh and relu6 pass the gradient strictly inside the limits (0 at them, as PyTorch); the output is
# inside exactly where the input is, so they read the output (an in-place call needs no copy of the input)
def _hardtanh_input(grad, result, min_val, max_val):
    # blocked at and beyond the limits, as PyTorch's hardtanh_backward: a NaN passes its gradient, and a blocked
    # gradient is 0 even when it is NaN or infinite
    return ember.where(ember.logical_or(result <= min_val, result >= max_val), 0.0, grad)


derivative("hardtanh", input=_hardtanh_input)
derivative("relu6", input=lambda grad, result: _hardtanh_input(grad, result, 0, 6))


def _leaky_relu_input(grad, input, negative_slope):
    # slope + (1 - slope) * [x > 0]: 1 above 0, the slope at and below it
    return grad * ((input > 0) * (1.0 - negative_slope) + negative_slope)


derivative("leaky_relu", input=_leaky_relu_input)


def _elu_backward(grad, input, alpha, scale, input_scale):
    """``scale`` above 0; ``alpha * scale * input_scale * exp(x * input_scale)`` at and below it."""
    # exp of x * [x < 0]: the same values at and below 0, no overflow above, and (as PyTorch's double
    # backward) a zero second derivative at 0
    negative = grad * ember.exp(input * (input < 0) * input_scale) * (alpha * scale * input_scale)
    # the negative branch at and below 0 only, as PyTorch: a NaN input takes the positive one
    return ember.where(input <= 0, negative, grad * scale if scale != 1.0 else grad)


derivative("elu", input=lambda grad, input, alpha: _elu_backward(grad, input, alpha, 1.0, 1.0))
derivative("selu", input=lambda grad, input: _elu_backward(grad, input, _SELU_ALPHA, _SELU_SCALE, 1.0))
derivative("celu", input=lambda grad, input, alpha: _elu_backward(grad, input, alpha, 1.0, 1.0 / alpha))


def _gelu_input(grad, input, approximate):
    if _cuda_rows(grad, input) is not None:  # plain cuda tensors, nothing records: the chain below in one kernel
        from ember.cuda.kernels.pointwise import gelu_backward

        fused = gelu_backward(grad, input, approximate)
        if fused is not None:
            return fused
    cpu = _cpu_float_rows("gelu_backward", grad, input)
    if cpu is not None:  # plain CPU tensors, nothing records: csrc/nn_rows_backward.cpp, one pass
        _C, (g, x) = cpu
        return ember.Tensor._make(_C.gelu_backward(g, x, approximate == "tanh"), input.device)
    x = input
    if approximate == "tanh":
        x_sq = x * x
        inner = (x + x_sq * x * _GELU_KAPPA) * _SQRT_2_OVER_PI
        t = ember.tanh(inner)
        # d/dx [0.5 x (1 + tanh(inner))] = 0.5 (1 + t) + 0.5 x (1 - t^2) inner'
        left = (t + 1) * 0.5
        right = x * 0.5 * (1 - t * t) * ((x_sq * (3 * _GELU_KAPPA) + 1) * _SQRT_2_OVER_PI)
        return grad * (left + right)
    cdf = ember.erf(x * _SQRT_HALF) * 0.5 + 0.5
    pdf = ember.exp(x * x * -0.5) * _INV_SQRT_2PI
    return grad * (cdf + x * pdf)


derivative("gelu", input=_gelu_input)


def _silu_input(grad, input):
    s = ember.sigmoid(input)
    return grad * conj(s * (input * (1 - s) + 1))


derivative("silu", input=_silu_input)


def _mish_input(grad, input):
    s = ember.sigmoid(input)
    t = ember.tanh(_softplus(input))
    return grad * (t + input * s * (1 - t * t))


derivative("mish", input=_mish_input)


def _softplus_input(grad, input, beta, threshold):
    scaled = input * beta if beta != 1 else input
    # linear (gradient exactly 1) where beta * x > threshold, as the forward switches there
    return ember.where(scaled > threshold, grad, grad * ember.sigmoid(scaled))


derivative("softplus", input=_softplus_input)
# d/dx log(sigmoid(x)) = sigmoid(-x): exact at 0 (the decomposition's clamp/abs would give 1, not 0.5)
derivative("logsigmoid", input=lambda grad, input: grad * ember.sigmoid(-input))
# hardsigmoid: 1/6 strictly inside (-3, 3), 0 at and beyond the limits (as PyTorch)
derivative("hardsigmoid", input=lambda grad, input: grad * (ember.abs(input) < 3) * (1.0 / 6.0))


def _hardswish_input(grad, input):
    # 0 at and below -3, x / 3 + 1/2 inside (-3, 3), 1 at and above 3 (PyTorch's choice at the limits)
    inside = ember.abs(input) < 3
    return grad * ((input * (1.0 / 3.0) + 0.5) * inside + (input >= 3))


derivative("hardswish", input=_hardswish_input)


def _shrink_input(grad, input, lambd):
    # 0 inside [-lambd, lambd], the gradient elsewhere (NaN inputs included, as PyTorch)
    return grad * ember.logical_not(ember.abs(input) <= lambd)


derivative("softshrink", input=_shrink_input)
derivative("hardshrink", input=_shrink_input)

# PyTorch's softsign and tanhshrink are these compositions (complex inputs included); prelu's and glu's
# decompositions are a `where` and a product, whose backward is what a formula would compute.
through_decomposition("softsign", "tanhshrink", "prelu", "glu")
# rrelu draws its slopes in training (the decomposition draws the same ones from the default generator
# and keeps them in its graph); in evaluation it is leaky_relu.
through_decomposition("rrelu")


# -- softmax family -------------------------------------------------------------------------------------


def _softmax_dim(ndim, dim):
    """The dimension a softmax-like op normalized along (``dim=None`` is PyTorch's legacy implicit choice)."""
    if dim is None:
        dim = 0 if ndim in (0, 1, 3) else 1
    return dim % max(ndim, 1)


def _softmax_backward_cpu(grad, result, d, log):
    """The gradient from csrc/nn_rows_backward.cpp (one pass over rows) for plain CPU float32/float64 tensors
    normalized along their last dim in a backward that records nothing; None for every other call."""
    if result.ndim == 0 or d != result.ndim - 1 or result.numel() == 0:
        return None
    cpu = _cpu_float_rows("softmax_backward", result, grad)
    if cpu is None:
        return None
    _C, (y, g) = cpu
    return ember.Tensor._make(_C.softmax_backward(y, g, log), result.device)


def _softmax_input(grad, result, dim):
    d = _softmax_dim(result.ndim, dim)
    rows = _cuda_rows(result, grad)
    if rows is not None:
        return rows.softmax_backward_tensor(grad, result, d)
    fast = _softmax_backward_cpu(grad, result, d, False)
    if fast is not None:
        return fast
    return result * (grad - ember.sum(grad * result, d, keepdim=True))


def _log_softmax_input(grad, result, dim):
    d = _softmax_dim(result.ndim, dim)
    rows = _cuda_rows(result, grad)
    if rows is not None:
        return rows.softmax_backward_tensor(grad, result, d, log=True)
    fast = _softmax_backward_cpu(grad, result, d, True)
    if fast is not None:
        return fast
    return grad - ember.exp(result) * ember.sum(grad, d, keepdim=True)


def _softmin_input(grad, result, dim):
    d = _softmax_dim(result.ndim, dim)
    return result * (ember.sum(grad * result, d, keepdim=True) - grad)


derivative("softmax", input=_softmax_input)
derivative("log_softmax", input=_log_softmax_input)
derivative("softmin", input=_softmin_input)
# gumbel_softmax draws its noise in the kernel; the decomposition draws the same noise (the default
# generator's exponential samples) and differentiates softmax (and the straight-through estimator).
through_decomposition("gumbel_softmax")

# -- dropout family -------------------------------------------------------------------------------------
# The kernels draw the mask and do not return it. The decompositions draw the same mask (ember.bernoulli
# compares the default generator's uniform samples with 1 - p, as the kernels do), so recording them
# gives the gradient ``grad * mask / (1 - p)`` with the very mask of the forward.
through_decomposition("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


# -- linear, bilinear ------------------------------------------------------------------------------------


def _linear_input(grad, weight):
    # y = x @ W^T: dx = grad @ conj(W) (grad @ W for a 1-D weight, whose output dim was dropped)
    if weight.ndim == 1:
        return ember.unsqueeze(grad, -1) * conj(weight)
    if grad.ndim > 2:
        lead = tuple(grad.shape[:-1])
        return ember.matmul(grad.reshape(-1, grad.shape[-1]), conj(weight)).reshape(lead + (weight.shape[1],))
    return ember.matmul(grad, conj(weight))


def _linear_weight(grad, input, weight_meta):
    # dW = grad^T @ conj(x), over all leading dims at once (one matmul)
    x = conj(input)
    if weight_meta.ndim == 1:
        if input.ndim == 1:
            return grad * x
        return ember.matmul(grad.reshape(-1), x.reshape(-1, x.shape[-1]))
    if input.ndim == 1:
        return ember.unsqueeze(grad, -1) * x
    if input.ndim > 2:
        return ember.matmul(ember.transpose(grad.reshape(-1, grad.shape[-1]), 0, 1), x.reshape(-1, x.shape[-1]))
    return ember.matmul(ember.transpose(grad, 0, 1), x)


def _linear_bias(grad, bias_meta):
    if bias_meta.ndim == 1 and grad.ndim >= 2 and bias_meta.shape[0] == grad.shape[-1]:
        return ember.sum(grad, list(range(grad.ndim - 1)))
    return grad  # the engine sums over the dims the bias was broadcast along


def _linear_grads(grad, input, weight, bias_meta, output_mask):
    if grad._device.type == "cuda" and not _dispatch_state.grad_enabled:
        # a backward pass that records nothing, on the GPU: two cuBLAS calls and a column-sum kernel
        # straight on the arrays (the same values), without dispatching the formulas' four ops
        from ember.cuda.kernels.products import linear_backward

        grads = linear_backward(grad, input, weight, output_mask)
        if grads is not None:
            return grads
    if grad._device.type == "cpu":
        grads = _linear_grads_cpu(grad, input, weight, bias_meta, output_mask)
        if grads is not None:
            return grads
    return (
        _linear_input(grad, weight) if output_mask[0] else None,
        _linear_weight(grad, input, weight) if output_mask[1] else None,
        _linear_bias(grad, bias_meta) if output_mask[2] else None,
    )


def _linear_grads_cpu(grad, input, weight, bias_meta, output_mask):
    """The formulas' two products on the numpy arrays, through the array function of ember.matmul's CPU kernel
    (so the same values), for plain CPU float32/float64 tensors of one dtype, a 2-D weight and an input of 2 or
    more dims, in a backward that records nothing; the bias's gradient stays the sum op. None for every other
    call. The formulas dispatch about seven ops (reshapes, a transpose, two matmuls), each costing more than its
    arithmetic on a small model's layers (a transformer's step has dozens of linear layers)."""
    arrays = _cpu_arrays(grad, input, weight)
    if arrays is None:
        return None
    g, x, w = arrays
    if g.dtype not in _C_FLOATS or x.dtype != g.dtype or w.dtype != g.dtype or w.ndim != 2 or x.ndim < 2:
        return None
    if g.size == 0 or x.size == 0:  # (numpy cannot infer the -1 of an empty reshape)
        return None
    from ember._ops.matmul import _matmul_arrays

    g2 = g.reshape(-1, g.shape[-1])  # (rows, out): the formulas' reshape (a copy only when grad is not a view)
    device = grad.device
    d_input = d_weight = None
    if output_mask[0]:
        d_input = ember.Tensor._make(_matmul_arrays(g2, w).reshape(x.shape[:-1] + (w.shape[1],)), device)
    if output_mask[1]:
        d_weight = ember.Tensor._make(_matmul_arrays(g2.T, x.reshape(-1, x.shape[-1])), device)
    return d_input, d_weight, _linear_bias(grad, bias_meta) if output_mask[2] else None


derivative("linear", joint={("input", "weight", "bias"): _linear_grads})
# PyTorch's bilinear is a composite of matmuls and products too (through _trilinear)
through_decomposition("bilinear")
