"""Derivatives of the ``nn.functional`` ops: activations, normalization, embedding, attention and losses.

Every op of these families is a composite with a fused CPU kernel, so each
gets one of two treatments:

* a **formula**, where it beats recording the decomposition: the fused
  kernel keeps running forward (one pass instead of the decomposition's
  chain of ops), and backward is a few ops instead of the reverse of that
  chain. Formulas also fix the gradient at points where a decomposition
  built from ``clamp``/``abs`` would give another value than PyTorch
  (``logsigmoid``, ``hardsigmoid``, ``binary_cross_entropy_with_logits`` at
  0), or NaN where PyTorch gives a finite value (``cosine_similarity`` of a
  zero vector);
* **through the decomposition**, where PyTorch's own op is a composite of
  the same ops (``softsign``, ``l1_loss``, ``kl_div``, ``margin_ranking_loss``,
  ...), so recording it gives PyTorch's gradient by construction, and where
  the kernel draws random numbers it does not hand back (the dropout family,
  ``rrelu`` in training, ``gumbel_softmax``, attention with dropout): the
  decomposition draws the same numbers from the same generator, and its
  graph keeps the mask.

Normalization formulas recompute the statistics from the saved input (the
kernels return only the output); running statistics are never
differentiated. Hot formulas (``relu``, ``leaky_relu``, ``threshold``, the
hard gates) multiply by a boolean mask rather than calling ``where``: numpy's
``where`` mispredicts its branch on a mask of mixed signs and runs about 20
times slower than a multiplication.
"""

from __future__ import annotations

import math

import ember
from ember._ops import registry as _ops
from ember._ops._dispatch import state as _dispatch_state
from ember._ops._nn_common import _kernel_reduction

from .._table import derivative, nondifferentiable, through_decomposition
from ._helpers import conj

_softmax = _ops["softmax"]
_log_softmax = _ops["log_softmax"]
_softplus = _ops["softplus"]
_logsigmoid = _ops["logsigmoid"]
_one_hot = _ops["one_hot"]

_HALF = (ember.float16, ember.bfloat16)
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_KAPPA = 0.044715
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_BCE_EPSILON = 1e-12  # PyTorch's floor on x * (1 - x) in binary_cross_entropy's gradient


def _upcast(t):
    """``t`` in float32 when it is float16/bfloat16: statistics are computed there, as the kernels do."""
    return t.to(ember.float32) if t is not None and t.dtype in _HALF else t


# =====================================================================================================
# Activations
# =====================================================================================================

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


def _cuda_rows(t):
    """ember.cuda.kernels.rows when ``t`` is a CUDA tensor and the backward pass records nothing (no
    ``create_graph``): its fused backward kernels then replace the formulas' chains of ops."""
    if t.device.type != "cuda" or _dispatch_state.grad_enabled:
        return None
    from ember.cuda.kernels import rows

    return rows


def _softmax_input(grad, result, dim):
    d = _softmax_dim(result.ndim, dim)
    rows = _cuda_rows(result)
    if rows is not None:
        return rows.softmax_backward_tensor(grad, result, d)
    return result * (grad - ember.sum(grad * result, d, keepdim=True))


def _log_softmax_input(grad, result, dim):
    d = _softmax_dim(result.ndim, dim)
    rows = _cuda_rows(result)
    if rows is not None:
        return rows.softmax_backward_tensor(grad, result, d, log=True)
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
    return (
        _linear_input(grad, weight) if output_mask[0] else None,
        _linear_weight(grad, input, weight) if output_mask[1] else None,
        _linear_bias(grad, bias_meta) if output_mask[2] else None,
    )


derivative("linear", joint={("input", "weight", "bias"): _linear_grads})
# PyTorch's bilinear is a composite of matmuls and products too (through _trilinear)
through_decomposition("bilinear")


# =====================================================================================================
# Normalization
# =====================================================================================================


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
        stat_dims = [0] + list(range(2, input.ndim))
        return _channel_norm_backward(grad, input, None, None, weight, eps, stat_dims, output_mask)
    return _channel_norm_backward(grad, input, running_mean, running_var, weight, eps, None, output_mask)


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
    rows = _cuda_rows(input)
    if rows is not None:
        return rows.layer_norm_backward_tensor(grad, input, normalized_shape, weight, eps, output_mask)
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


# =====================================================================================================
# Embedding
# =====================================================================================================


def _embedding_weight(grad, input, weight_meta, padding_idx, scale_grad_by_freq):
    num = weight_meta.shape[0]
    index = input.reshape(-1)
    rows = grad.reshape(-1, grad.shape[-1])
    if padding_idx is not None:
        pad = padding_idx + num if padding_idx < 0 else padding_idx
        rows = rows * ember.unsqueeze(index != pad, 1)  # the padding row gets no gradient
    if scale_grad_by_freq:
        # each row's gradient is divided by how often its index occurs in the batch
        counts = ember.bincount(index.to(ember.int64), minlength=num)
        rows = rows / ember.unsqueeze(ember.index_select(counts, 0, index), 1).to(rows.dtype)
    zeros = ember.zeros((num, grad.shape[-1]), dtype=grad.dtype, device=grad.device)
    return ember.index_add(zeros, 0, index, rows)


# sparse=True would ask for a sparse gradient; ember has no sparse tensors, so it is dense.
derivative("embedding", weight=_embedding_weight, nondiff=("input",))


def _bag_layout(input, offsets, include_last_offset, padding_idx, num):
    """``(flat indices, bag of each index, kept-index mask or None, number of bags)`` of an embedding_bag call."""
    flat = input.reshape(-1)
    device = input.device
    if input.ndim == 2:
        bags, length = input.shape
        bag_of = ember.arange(bags * length, device=device) // max(length, 1)
    else:
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        positions = ember.arange(flat.shape[0], device=device)
        bag_of = ember.searchsorted(offsets.to(ember.int64), positions, right=True) - 1
    keep = None
    if padding_idx is not None:
        keep = flat != (padding_idx + num if padding_idx < 0 else padding_idx)
    if include_last_offset and input.ndim == 1:
        in_range = bag_of < bags  # indices past the last offset belong to no bag
        keep = in_range if keep is None else ember.logical_and(keep, in_range)
        bag_of = ember.clamp(bag_of, max=max(bags - 1, 0))
    return flat, bag_of, keep, bags


def _embedding_bag_backward(
    grad,
    input,
    weight,
    offsets,
    scale_grad_by_freq,
    mode,
    per_sample_weights,
    include_last_offset,
    padding_idx,
    result,
    output_mask,
):
    num, dim = weight.shape
    flat, bag_of, keep, bags = _bag_layout(input, offsets, include_last_offset, padding_idx, num)
    d_weight = d_psw = None
    if mode == "max":
        if output_mask[0]:
            d_weight = _embedding_bag_max_weight(grad, weight, result, flat, bag_of, keep, bags)
        return d_weight, None
    g_rows = ember.index_select(grad, 0, bag_of)  # each index's bag gradient, (indices, dim)
    if output_mask[1]:
        d_psw = ember.sum(g_rows * ember.index_select(weight, 0, flat), 1)
        if keep is not None:
            d_psw = d_psw * keep
        d_psw = d_psw.reshape(tuple(per_sample_weights.shape))
    if output_mask[0]:
        scale = None
        if mode == "mean":
            ones = ember.ones(flat.shape[0], dtype=grad.dtype, device=grad.device)
            if keep is not None:
                ones = ones * keep
            counts = ember.index_add(ember.zeros(bags, dtype=grad.dtype, device=grad.device), 0, bag_of, ones)
            scale = 1.0 / ember.index_select(ember.clamp(counts, min=1), 0, bag_of)
        elif per_sample_weights is not None:
            scale = per_sample_weights.reshape(-1).to(grad.dtype)
        if keep is not None:
            scale = keep.to(grad.dtype) if scale is None else scale * keep
        if scale_grad_by_freq:
            freq = ember.bincount(flat.to(ember.int64), minlength=num)
            inv = 1.0 / ember.index_select(freq, 0, flat).to(grad.dtype)
            scale = inv if scale is None else scale * inv
        if scale is not None:
            g_rows = g_rows * ember.unsqueeze(scale, 1)
        zeros = ember.zeros((num, dim), dtype=grad.dtype, device=grad.device)
        d_weight = ember.index_add(zeros, 0, flat, g_rows)
    return d_weight, d_psw


def _embedding_bag_max_weight(grad, weight, result, flat, bag_of, keep, bags):
    """The gradient of each bag's maximum goes to the first index of the bag that holds it (per column)."""
    num, dim = weight.shape
    count = flat.shape[0]
    rows = ember.index_select(weight, 0, flat)
    hit = rows == ember.index_select(result, 0, bag_of)
    if keep is not None:
        hit = ember.logical_and(hit, ember.unsqueeze(keep, 1))
    position = ember.arange(count, device=grad.device).reshape(-1, 1).expand(count, dim)
    candidate = ember.where(hit, position, ember.full_like(position, count))
    first = ember.full((bags, dim), count, dtype=ember.int64, device=grad.device)
    first = ember.scatter_reduce(first, 0, ember.unsqueeze(bag_of, 1).expand(count, dim), candidate, "amin")
    found = first < count  # empty bags (and bags of padding only) have no maximum
    row = ember.index_select(flat, 0, ember.clamp(first, max=max(count - 1, 0)).reshape(-1)).reshape(bags, dim)
    column = ember.arange(dim, device=grad.device).reshape(1, -1)
    target = (row * dim + column).reshape(-1)
    g = (grad * found).reshape(-1)
    zeros = ember.zeros(num * dim, dtype=grad.dtype, device=grad.device)
    return ember.index_add(zeros, 0, target, g).reshape(num, dim)


derivative(
    "embedding_bag",
    joint={("weight", "per_sample_weights"): _embedding_bag_backward},
    nondiff=("input", "offsets"),
)
nondifferentiable("one_hot")


# =====================================================================================================
# Attention and distances
# =====================================================================================================


def _sdpa_backward(grad, query, key, value, attn_mask, is_causal, scale, enable_gqa, output_mask):
    # without dropout: the attention weights are recomputed (the kernel returns only the output)
    rep_k = rep_v = 1
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and value.ndim >= 3:
        rep_k = query.shape[-3] // key.shape[-3]
        rep_v = query.shape[-3] // value.shape[-3]
    k = ember.repeat_interleave(key, rep_k, -3) if rep_k > 1 else key
    v = ember.repeat_interleave(value, rep_v, -3) if rep_v > 1 else value
    e = query.shape[-1]
    seq_l, seq_s = query.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(e) if e else 1.0
    scores = ember.matmul(query, k.transpose(-2, -1)) * scale
    masked = is_causal or attn_mask is not None
    if is_causal:
        allowed = ember.tril(ember.ones((seq_l, seq_s), dtype=ember.bool, device=query.device))
        scores = ember.masked_fill(scores, ember.logical_not(allowed), -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype is ember.bool:
            scores = ember.masked_fill(scores, ember.logical_not(attn_mask), -math.inf)
        else:
            scores = scores + attn_mask.to(scores.dtype)
    p = _softmax(scores, -1)
    if masked:
        p = ember.nan_to_num(p, nan=0.0)  # a row with every key masked gives zeros, not NaN
    d_query = d_key = d_value = d_mask = None
    if output_mask[2]:
        d_value = ember.matmul(p.transpose(-2, -1), grad)
        if rep_v > 1:
            d_value = _sum_groups(d_value, rep_v)
    if output_mask[0] or output_mask[1] or output_mask[3]:
        dp = ember.matmul(grad, v.transpose(-2, -1))
        ds = p * (dp - ember.sum(dp * p, -1, keepdim=True))
        if output_mask[3]:
            d_mask = ds
        if output_mask[0]:
            d_query = ember.matmul(ds, k) * scale
        if output_mask[1]:
            d_key = ember.matmul(ds.transpose(-2, -1), query) * scale
            if rep_k > 1:
                d_key = _sum_groups(d_key, rep_k)
    return d_query, d_key, d_value, d_mask


def _sum_groups(g, rep):
    """The gradient of ``repeat_interleave(t, rep, -3)``: the ``rep`` copies of each head summed."""
    shape = tuple(g.shape)
    heads = shape[-3] // rep
    return ember.sum(g.reshape(shape[:-3] + (heads, rep) + shape[-2:]), -3)


# With dropout_p > 0 the kernel's dropout mask is lost, and only the decomposition (which draws the same
# mask and keeps it in its graph) can give the gradient; without dropout the formula is faster (about 15%
# on CPU for a causal 4x8x128x64 attention, forward and backward). A table that can send some calls of an
# op with a formula through its decomposition (``decompose_if``) gets both; one that can't gets the
# decomposition for every call.
try:
    derivative(
        "scaled_dot_product_attention",
        joint={("query", "key", "value", "attn_mask"): _sdpa_backward},
        decompose_if=lambda dropout_p: dropout_p > 0,
    )
except ValueError:
    through_decomposition("scaled_dot_product_attention")


def _cosine_similarity_backward(grad, x1, x2, dim, eps, result, output_mask):
    # cos = sum(a * b) / (max(|a|, eps) * max(|b|, eps)); as in PyTorch the clamps carry no gradient
    # (the norms are differentiated as if unclamped) and a zero vector's norm has gradient 0, not NaN
    dtype = result.dtype
    a, b = ember.broadcast_tensors(x1.to(dtype), x2.to(dtype))
    if a.ndim == 0:
        a, b = a.reshape(1), b.reshape(1)
    d = dim % a.ndim
    g = ember.unsqueeze(grad, d) if result.ndim < a.ndim else grad.reshape(1)
    cos = ember.unsqueeze(result, d) if result.ndim < a.ndim else result.reshape(1)

    def clamped_norm(u):
        n = ember.sqrt(ember.sum(u * u, d, keepdim=True))
        # max(|u|, eps) whose gradient is |u|'s, as PyTorch's clamp under no_grad (higher orders too)
        return n, n + (ember.clamp(n, min=eps) - n).detach()

    def one_side(u, w):
        n, nu = clamped_norm(u)
        _, nw = clamped_norm(w)
        unit = u / (n + (n == 0))  # u / |u|, 0 for a zero vector
        return g * (w / nw - cos * unit) / nu

    d1 = one_side(a, b) if output_mask[0] else None
    d2 = one_side(b, a) if output_mask[1] else None
    if x1.ndim == 0:
        d1 = d1.reshape(()) if d1 is not None else None
        d2 = d2.reshape(()) if d2 is not None else None
    return d1, d2


derivative("cosine_similarity", joint={("x1", "x2"): _cosine_similarity_backward})
# PyTorch's pairwise_distance is norm(x1 - x2 + eps); pdist's gradient is its norms' (0 at a zero distance)
through_decomposition("pairwise_distance", "pdist")


# =====================================================================================================
# Losses
# =====================================================================================================


def _reduced_grad(grad, reduction, count):
    """The gradient of each loss element: ``grad`` itself ('none'/'sum') or ``grad / count`` ('mean')."""
    if reduction == "mean":
        return grad * (1.0 / count) if count else grad * math.nan
    return grad


def _mse_backward(grad, input, target, size_average, reduce, reduction, weight, output_mask):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    if weight is None:
        g = _reduced_grad(grad, reduction, d.numel()) * 2.0
    elif reduction == "mean":
        g = weight * (grad * 2.0 / ember.sum(weight))
    else:
        g = weight * (grad * 2.0)
    d_input = d * g
    return d_input, (-d_input if output_mask[1] else None)


def _mse_weight_grad(grad, input, target, weight, size_average, reduce, reduction, result):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    if reduction == "mean":  # loss = sum(w d^2) / sum(w): d loss / d w = (d^2 - loss) / sum(w)
        return (d * d - result) * (grad / ember.sum(weight))
    return d * d * grad


derivative("mse_loss", joint={("input", "target"): _mse_backward}, weight=_mse_weight_grad)


def _smooth_l1_backward(grad, input, target, size_average, reduce, reduction, beta, output_mask):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = input - target
    # d / beta inside (-beta, beta), its sign outside (beta = 0: the L1 loss, 0 at d = 0)
    slope = ember.sign(d) if beta == 0 else ember.clamp(d * (1.0 / beta), -1.0, 1.0)
    d_input = slope * _reduced_grad(grad, reduction, d.numel())
    return d_input, (-d_input if output_mask[1] else None)


derivative("smooth_l1_loss", joint={("input", "target"): _smooth_l1_backward})


def _huber_backward(grad, input, target, reduction, delta, weight, output_mask):
    d = input - target
    g = _reduced_grad(grad, reduction, d.numel())
    if weight is not None:
        g = g * weight
    d_input = ember.clamp(d, -delta, delta) * g
    return d_input, (-d_input if output_mask[1] else None)


def _huber_weight(grad, input, target, reduction, delta):
    d = input - target
    a = ember.abs(d)
    loss = ember.where(a <= delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    return loss * _reduced_grad(grad, reduction, d.numel())  # 'mean' averages the weighted losses


derivative("huber_loss", joint={("input", "target"): _huber_backward}, weight=_huber_weight)
# PyTorch's l1_loss is |input - target| reduced (complex inputs included)
through_decomposition("l1_loss")


def _bce_input(grad, input, target, weight, size_average, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    g = _reduced_grad(grad, reduction, input.numel())
    if weight is not None:
        g = g * weight
    # d/dx of -(t log x + (1 - t) log(1 - x)) = (x - t) / (x (1 - x)), the denominator floored as PyTorch does
    return g * (input - target) / ember.clamp((1 - input) * input, min=_BCE_EPSILON)


def _bce_target(grad, input, weight, size_average, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    g = _reduced_grad(grad, reduction, input.numel())
    if weight is not None:
        g = g * weight
    return -ember.logit(input) * g


# weight is not differentiable (PyTorch: "not differentiable with respect to argument 'weight'")
derivative("binary_cross_entropy", input=_bce_input, target=_bce_target)


def _bce_logits_input(grad, input, target, weight, size_average, reduce, reduction, pos_weight):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    s = ember.sigmoid(input)
    if pos_weight is None:
        d = s - target
    else:
        pt = pos_weight * target
        d = (pt + 1 - target) * s - pt
    g = _reduced_grad(grad, reduction, d.numel())
    if weight is not None:
        g = g * weight
    return d * g


def _bce_logits_target(grad, input, weight, size_average, reduce, reduction, pos_weight):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    if pos_weight is None:
        d = -input
    else:
        d = _logsigmoid(-input) - pos_weight * _logsigmoid(input)
    g = _reduced_grad(grad, reduction, d.numel())
    if weight is not None:
        g = g * weight
    return d * g


# weight and pos_weight are not differentiable, as in PyTorch
derivative("binary_cross_entropy_with_logits", input=_bce_logits_input, target=_bce_logits_target)


def _multilabel_soft_margin_backward(grad, input, target, weight, size_average, reduce, reduction, output_mask):
    # loss_n = sum_c w_c * l(x_nc, t_nc) / C with l = -(t logsigmoid(x) + (1 - t) logsigmoid(-x))
    reduction = _kernel_reduction(size_average, reduce, reduction)
    classes = input.shape[-1] if input.ndim else 1
    count = input.numel() // classes if classes else 0
    g = _reduced_grad(grad, reduction, count)
    if reduction == "none" and input.ndim:
        g = ember.unsqueeze(g, -1)
    g = g * (1.0 / classes)
    if weight is not None:
        gw = g * weight
    else:
        gw = g
    d_input = d_target = d_weight = None
    if output_mask[0]:
        d_input = (ember.sigmoid(input) - target) * gw
    if output_mask[1]:
        d_target = -input * gw
    if output_mask[2]:
        d_weight = -(target * _logsigmoid(input) + (1 - target) * _logsigmoid(-input)) * g
    return d_input, d_target, d_weight


derivative(
    "multilabel_soft_margin_loss",
    joint={("input", "target", "weight"): _multilabel_soft_margin_backward},
)

# PyTorch's versions of these are compositions of the same ops (clamp_min, where, pairwise_distance, ...)
through_decomposition(
    "kl_div",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
)


def _soft_margin_input(grad, input, target, size_average, reduce, reduction):
    # d/dx log(1 + exp(-t x)) = -t sigmoid(-t x) (holomorphic in x for complex inputs)
    reduction = _kernel_reduction(size_average, reduce, reduction)
    d = -target * ember.sigmoid(-target * input)
    return conj(d) * _reduced_grad(grad, reduction, d.numel())


# target is not differentiable (PyTorch: "not differentiable with respect to argument 'target'")
derivative("soft_margin_loss", input=_soft_margin_input)


def _per_sample_grad(grad, reduction, count):
    """Each sample's share of the loss gradient, shaped ``(count, 1)`` or 0-dim (it broadcasts over the classes)."""
    if reduction == "none":
        return grad.reshape(-1, 1)
    return _reduced_grad(grad, reduction, count)


# multi_margin_loss and multilabel_margin_loss: PyTorch's kernels count a hinge only where it is strictly
# positive (its gradient is 0 at the hinge), where the decompositions' clamp would pass it.


def _multi_margin_input(grad, input, target, p, margin, weight, size_average, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    classes = input.shape[-1] if input.ndim else 1
    x = input.reshape(-1, classes)
    y = target.reshape(-1).to(ember.int64)
    one_hot = _one_hot(y, classes)
    z = x - ember.gather(x, 1, ember.unsqueeze(y, 1)) + margin  # the hinge of each class i: margin - x_y + x_i
    active = ember.logical_and(z > 0, one_hot == 0)
    h = active * (z * 2) if p == 2 else active.to(x.dtype)
    if weight is not None:
        h = h * ember.unsqueeze(ember.index_select(weight, 0, y), 1)
    h = h * (_per_sample_grad(grad, reduction, x.shape[0]) * (1.0 / classes))
    # each active hinge pushes its class up and the target class down
    return (h - one_hot * ember.sum(h, 1, keepdim=True)).reshape(tuple(input.shape))


derivative("multi_margin_loss", input=_multi_margin_input, nondiff=("target",))


def _multilabel_margin_input(grad, input, target, size_average, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    x = input.reshape(1, -1) if input.ndim < 2 else input
    y = target.reshape(tuple(x.shape)).to(ember.int64)
    classes = x.shape[1]
    valid = ember.cumprod((y != -1).to(ember.int64), 1).to(ember.bool)  # the targets before the first -1
    safe = y * valid
    hits = ember.scatter_add(ember.zeros_like(y), 1, safe, valid.to(ember.int64))
    not_target = hits == 0
    picked = ember.gather(x, 1, safe)  # (N, J): the input at each target
    z = ember.unsqueeze(x, 1) - ember.unsqueeze(picked, 2) + 1  # (N, J, C): 1 - x[y_j] + x_i
    active = ember.logical_and(z > 0, ember.logical_and(ember.unsqueeze(valid, 2), ember.unsqueeze(not_target, 1)))
    g = _per_sample_grad(grad, reduction, x.shape[0]) * (1.0 / classes)
    a = active * (ember.unsqueeze(g, 2) if g.ndim else g)
    # every active (target j, class i) pair pushes class i up and target j down
    d = ember.scatter_add(ember.sum(a, 1), 1, safe, -ember.sum(a, 2))
    return d.reshape(tuple(input.shape))


derivative("multilabel_margin_loss", input=_multilabel_margin_input, nondiff=("target",))


# -- ctc_loss -------------------------------------------------------------------------------------------


def _lengths(value, device):
    if isinstance(value, ember.Tensor):
        return value.reshape(-1).to(ember.int64)
    return ember.tensor([int(v) for v in value], dtype=ember.int64, device=device)


def _masked_log(x):
    """``log(x)`` for ``x >= 0``, whose gradient is 0 (not NaN) where ``x`` is 0 (a state no path reaches)."""
    empty = x == 0
    return ember.where(empty, ember.full_like(x, -math.inf), ember.log(ember.where(empty, ember.ones_like(x), x)))


def _logsumexp3(a, b, c):
    """``log(exp(a) + exp(b) + exp(c))`` elementwise: -inf, with gradient 0, where all three are -inf."""
    top = ember.maximum(ember.maximum(a, b), c)
    safe = ember.where(ember.isneginf(top), ember.zeros_like(top), top)
    return safe + _masked_log(ember.exp(a - safe) + ember.exp(b - safe) + ember.exp(c - safe))


def _ctc_extended_labels(targets, lengths_tg, batch, blank, batched, device):
    """``(ext, skip)``: each target with blanks around its labels ``(N, 2 S + 1)``, and where a state may be
    entered from two states back (a label that differs from the previous label)."""
    if batched and targets.ndim == 2:
        width = targets.shape[1]
        labels = targets.to(ember.int64)
    else:
        flat = targets.reshape(-1).to(ember.int64)
        width = int(ember.amax(lengths_tg).item()) if batch else 0
        positions = ember.arange(width, device=device).reshape(1, -1)
        starts = ember.cumsum(lengths_tg, 0) - lengths_tg
        index = starts.reshape(-1, 1) + positions
        index = index * (positions < lengths_tg.reshape(-1, 1))
        if flat.numel():
            labels = ember.index_select(flat, 0, index.reshape(-1)).reshape(batch, width)
        else:
            labels = ember.zeros((batch, width), dtype=ember.int64, device=device)
    in_range = ember.arange(width, device=device).reshape(1, -1) < lengths_tg.reshape(-1, 1)
    labels = ember.where(in_range, labels, ember.full_like(labels, blank))
    blanks = ember.full_like(labels, blank)
    tail = ember.full((batch, 1), blank, dtype=ember.int64, device=device)
    ext = ember.cat([ember.stack([blanks, labels], 2).reshape(batch, 2 * width), tail], 1)
    states = 2 * width + 1
    head = ember.zeros((batch, min(2, states)), dtype=ember.bool, device=device)
    skip = ember.cat([head, ember.logical_and(ext[:, 2:] != blank, ext[:, 2:] != ext[:, :-2])], 1)
    return ext, skip


def _ctc_backward(grad, log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    """The gradient of CTC's negative log-likelihood, by the forward-backward algorithm in log space.

    ``d nll / d log_probs[t, n, c] = -sum over the states s of label c of alpha_t(s) beta_t(s) / p(t, c) / p``,
    the gradient with respect to ``log_probs`` themselves. (PyTorch's kernel returns ``exp(log_probs)`` plus
    that, the gradient with respect to the logits under a ``log_softmax``; both give the same gradient of
    the logits through ``log_softmax``, which is how ``ctc_loss`` is meant to be used.)
    """
    batched = log_probs.ndim == 3
    lp = log_probs if batched else ember.unsqueeze(log_probs, 1)
    steps, batch, classes = lp.shape
    device = lp.device
    lengths_in, lengths_tg = _lengths(input_lengths, device), _lengths(target_lengths, device)
    ext, skip = _ctc_extended_labels(targets, lengths_tg, batch, blank, batched, device)
    states = ext.shape[1]
    emit = ember.gather(lp, 2, ember.unsqueeze(ext, 0).expand(steps, batch, states))  # (T, N, S)
    minus_inf = ember.full((batch, states), -math.inf, dtype=lp.dtype, device=device)
    pad = ember.full((batch, 2), -math.inf, dtype=lp.dtype, device=device)
    state = ember.arange(states, device=device).reshape(1, -1)
    has_labels = (lengths_tg > 0).reshape(-1, 1)
    # alpha_t(s): the paths through state s at frame t (emissions up to t included)
    start = ember.logical_or(state == 0, ember.logical_and(state == 1, has_labels))
    alpha = ember.where(start, emit[0], minus_inf)
    alphas = [alpha]
    for t in range(1, steps):
        prev1 = ember.cat([pad[:, :1], alpha[:, :-1]], 1)
        prev2 = ember.where(skip, ember.cat([pad, alpha], 1)[:, :states], minus_inf)
        alpha = _logsumexp3(alpha, prev1, prev2) + emit[t]
        alphas.append(alpha)
    alphas = ember.stack(alphas)
    # the log-likelihood, from the two final states at each sample's last frame
    last = ember.clamp(lengths_in - 1, min=0).reshape(1, -1, 1).expand(1, batch, states)
    final = ember.gather(alphas, 0, last).reshape(batch, states)
    end_blank = ember.gather(final, 1, (lengths_tg * 2).reshape(-1, 1)).reshape(-1)
    end_label = ember.gather(final, 1, ember.clamp(lengths_tg * 2 - 1, min=0).reshape(-1, 1)).reshape(-1)
    end_label = ember.where(lengths_tg > 0, end_label, ember.full_like(end_label, -math.inf))
    nll = -ember.logaddexp(end_blank, end_label)
    # beta_t(s): the paths from state s at frame t to the end (emissions from t on included)
    end = ember.logical_or(
        state == (lengths_tg * 2).reshape(-1, 1),
        ember.logical_and(state == (lengths_tg * 2 - 1).reshape(-1, 1), has_labels),
    )
    skip_next = ember.cat([skip[:, 2:], ember.zeros((batch, min(2, states)), dtype=ember.bool, device=device)], 1)
    beta = minus_inf
    betas = [None] * steps
    for t in range(steps - 1, -1, -1):
        next1 = ember.cat([beta[:, 1:], pad[:, :1]], 1)
        next2 = ember.where(skip_next, ember.cat([beta[:, 2:], pad], 1)[:, :states], minus_inf)
        carried = _logsumexp3(beta, next1, next2) + emit[t]
        first = ember.where(end, emit[t], minus_inf)
        beta = ember.where((lengths_in - 1 == t).reshape(-1, 1), first, carried)
        betas[t] = beta
    paths = alphas + ember.stack(betas)  # (T, N, S): log of the paths through (t, s), times p(t, ext[s])
    top = ember.amax(paths, 2, keepdim=True)
    top = ember.where(ember.isneginf(top), ember.zeros_like(top), top)
    index = ember.unsqueeze(ext, 0).expand(steps, batch, states)
    per_class = ember.scatter_add(ember.zeros_like(lp), 2, index, ember.exp(paths - top))
    # each sample's share of the reduced loss
    if reduction == "mean":
        scale = grad / (ember.clamp(lengths_tg, min=1).to(lp.dtype) * batch)
    elif reduction == "sum":
        scale = grad.expand(batch)
    else:
        scale = grad.reshape(batch)
    if zero_infinity:
        infinite = ember.isinf(nll)
        scale = ember.where(infinite, ember.zeros_like(scale), scale)
        nll = ember.where(infinite, ember.zeros_like(nll), nll)
    frames = (ember.arange(steps, device=device).reshape(-1, 1) < lengths_in.reshape(1, -1)).to(lp.dtype)
    weight = ember.unsqueeze(frames * scale.reshape(1, -1), 2)
    d = -ember.exp(_masked_log(per_class) + top + nll.reshape(1, -1, 1) - lp) * weight
    return d if batched else d.reshape(tuple(log_probs.shape))


derivative("ctc_loss", log_probs=_ctc_backward, nondiff=("targets", "input_lengths", "target_lengths"))


# -- nll_loss, cross_entropy -------------------------------------------------------------------------------


def _class_targets(input, target, weight, ignore_index):
    """For class-index targets: ``(class dim, safe targets, per-target weights or None, keep mask)``.

    Ignored targets become class 0 with weight 0 (masked, not branched on: the formula stays one
    graph whatever the targets' values).
    """
    cdim = 1 if input.ndim >= 2 else 0
    keep = target != ignore_index
    safe = target * keep
    per_target = None
    if weight is not None:
        per_target = ember.index_select(weight, 0, safe.reshape(-1)).reshape(tuple(target.shape)) * keep
    return cdim, safe, per_target, keep


def _target_scales(grad, reduction, per_target, keep):
    """The gradient of each target's loss term, shaped like ``target``: ``(unweighted, weighted)``.

    Both are 0 for ignored targets. 'mean' divides by the total weight of the kept targets
    (their count without class weights), as the forward does.
    """
    if reduction == "mean":
        grad = grad / ember.sum(keep if per_target is None else per_target)
    g = grad * keep
    return g, (g if per_target is None else g * per_target)


def _index_of(safe, cdim, input):
    """The targets as an index tensor along the class dim of ``input`` (for gather/scatter)."""
    return ember.unsqueeze(safe, cdim) if input.ndim >= 2 else safe.reshape(1)


def _nll_loss_input(grad, input, target, weight, size_average, ignore_index, reduce, reduction):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    cdim, safe, per_target, keep = _class_targets(input, target, weight, ignore_index)
    _, g = _target_scales(grad, reduction, per_target, keep)
    index = _index_of(safe, cdim, input)
    src = (-g).reshape(tuple(index.shape)).to(input.dtype)
    return ember.scatter(ember.zeros_like(input), cdim, index, src)


derivative("nll_loss", input=_nll_loss_input, nondiff=("target",))


def _cross_entropy_input(grad, input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing):
    reduction = _kernel_reduction(size_average, reduce, reduction)
    cdim = 1 if input.ndim >= 2 else 0
    classes = input.shape[cdim]
    w_shape = [1] * input.ndim
    w_shape[cdim] = classes
    if tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probs_input(grad, input, target, weight, reduction, label_smoothing, cdim, w_shape)
    rows = _cuda_rows(input)
    if rows is not None:
        fused = rows.cross_entropy_backward_tensor(
            grad, input, target, weight, ignore_index, label_smoothing, reduction)
        if fused is not None:
            return fused
    cdim, safe, per_target, keep = _class_targets(input, target, weight, ignore_index)
    p = _softmax(input, cdim)
    one_hot = _one_hot(safe if safe.dtype is ember.int64 else safe.to(ember.int64), classes)
    if input.ndim > 2:
        one_hot = ember.movedim(one_hot, -1, 1)
    eps = label_smoothing
    g, gw = _target_scales(grad, reduction, per_target, keep)
    if input.ndim >= 2:
        weighted = gw is not g
        g = ember.unsqueeze(g, cdim)
        gw = ember.unsqueeze(gw, cdim) if weighted else g
    if eps <= 0:
        # softmax minus the one-hot target, times each target's gradient (its class weight included)
        return (p - one_hot) * gw
    if weight is None:
        # the target smoothed to q = (1 - eps) one_hot + eps / C: softmax minus q
        return (p - one_hot * (1 - eps) - eps / classes) * g
    # (1 - eps) w_t (p - one_hot) from the picked term, (eps / C) (p sum(w) - w) from the smoothing term
    wv = weight.reshape(w_shape).to(p.dtype)
    smooth = (p * ember.sum(weight).to(p.dtype) - wv) * (eps / classes)
    return (p - one_hot) * (gw * (1 - eps)) + smooth * g


def _cross_entropy_probs_input(grad, input, target, weight, reduction, label_smoothing, cdim, w_shape):
    # loss_n = -sum_c w_c q_nc log_softmax(x)_nc: d/dx = p * sum_c(w_c q_c) - w * q
    classes = input.shape[cdim]
    p = _softmax(input.to(grad.dtype), cdim)
    q = target.to(grad.dtype)
    if label_smoothing > 0:
        q = q * (1 - label_smoothing) + label_smoothing / classes
    if weight is not None:
        q = q * weight.reshape(w_shape).to(grad.dtype)
    g = _reduced_grad(grad, reduction, input.numel() // classes if classes else 0)
    if reduction == "none" and input.ndim >= 2:
        g = ember.unsqueeze(g, cdim)
    return (p * ember.sum(q, cdim, keepdim=True) - q) * g


def _cross_entropy_target(grad, input, target, weight, size_average, reduce, reduction, label_smoothing):
    # probability targets only (class indices are integers): d loss / d t = -(1 - eps) w log_softmax(x)
    reduction = _kernel_reduction(size_average, reduce, reduction)
    cdim = 1 if input.ndim >= 2 else 0
    classes = input.shape[cdim]
    logp = _log_softmax(input.to(grad.dtype), cdim)
    if weight is not None:
        w_shape = [1] * input.ndim
        w_shape[cdim] = classes
        logp = logp * weight.reshape(w_shape).to(grad.dtype)
    g = _reduced_grad(grad, reduction, input.numel() // classes if classes else 0)
    if reduction == "none" and input.ndim >= 2:
        g = ember.unsqueeze(g, cdim)
    return logp * (g * -(1.0 - label_smoothing))


derivative("cross_entropy", input=_cross_entropy_input, target=_cross_entropy_target)
