"""Derivatives of the spatial ops of ``ember.nn.functional`` (``ember._ops.nn_conv``, ``nn_pooling`` and the rest).

Every backward here is built from ember ops, most of them the same spatial
ops run in the other direction, so that gradients are differentiable again:

* ``convolution``: the input gradient is a convolution of ``grad`` by the
  flipped kernel (stride 1) or a transposed convolution; the weight gradient
  is one convolution of the input with ``grad`` (batch and channels swapped,
  stride and dilation swapped), which the core runs as one matrix product.
  On CUDA tensors, a backward pass that records nothing (no ``create_graph``)
  runs the fused backward of :mod:`ember.cuda.kernels.conv` instead
  (``convolution_backward_cuda``: two GEMMs and three kernel launches for all three gradients);
* pooling: max pools are recorded as their ``*_with_indices`` prims, whose
  backward scatters ``grad`` to the argmax of each window that the forward
  returned (``scatter_add``); average pools spread it over each window (a transposed
  convolution by a kernel of ones, or a broadcast for non-overlapping windows);
* ``pad``, ``interpolate``: ``index_add`` of ``grad`` along each dim, at the
  positions (and with the weights) the forward read;
* ``im2col``/``fold`` and ``pixel_shuffle``/``pixel_unshuffle`` are each
  other's adjoints.

Index arrays and interpolation weights depend only on shapes and arguments;
they come from the core's own planning functions, so they match the forward exactly.
"""

from __future__ import annotations

import math

import numpy as np

import ember
from ember._ops import nn_grid_sample, nn_interpolate, nn_padding, nn_pooling
from ember._ops._dispatch import state as _dispatch_state
from ember.cuda.kernels import conv as _cuda_conv

from .._table import derivative, through_decomposition

_FLOAT64 = np.dtype(np.float64)


# -- small helpers -------------------------------------------------------------------------------------


_INT_ONLY = frozenset((int,))


def _tup(value, n):
    """A convolution parameter (an int, or a sequence of 1 or ``n`` ints) as a tuple of ``n`` ints."""
    if type(value) is tuple and len(value) == n and _INT_ONLY.issuperset(map(type, value)):
        return value  # what conv{n}d's decomposition records: its plan's tuples (the loop below copies them)
    if isinstance(value, ember.Tensor):
        value = value.tolist()
    if isinstance(value, (tuple, list)):
        value = tuple(int(v) for v in value)
        return value * n if len(value) == 1 else value
    return (int(value),) * n


def _narrow_to(t, sizes, first=2):
    """``t`` cut down to ``sizes`` in the dims from ``first`` on (keeping the start); no op where it fits."""
    for i, size in enumerate(sizes):
        if t.shape[first + i] != size:
            t = t.narrow(first + i, 0, size)
    return t


def _const(array, like):
    """A constant tensor (indices, weights) from a numpy array, on ``like``'s device."""
    return ember.tensor(np.ascontiguousarray(array), device=like.device)


def _compute_dtype(t):
    """The dtype resampling gradients are computed in: float32 for float16/bfloat16, else ``t``'s."""
    return ember.float32 if t.dtype in (ember.float16, ember.bfloat16) else t.dtype


# -- convolution ----------------------------------------------------------------------------------------


def _conv_input_grad(grad, weight, in_sizes, stride, padding, dilation, groups):
    """The gradient of a convolution's input: the adjoint convolution applied to ``grad``."""
    n = len(stride)
    kernel = weight.shape[2:]
    if all(s == 1 for s in stride) and all(padding[i] <= dilation[i] * (kernel[i] - 1) for i in range(n)):
        # at stride 1 the adjoint is a plain convolution by the flipped kernel, channels swapped (the
        # forward's cost: the core's fast convolution, no col2im scatter)
        if groups == 1:
            w = weight.transpose(0, 1)
        else:
            opg, cpg = weight.shape[0] // groups, weight.shape[1]
            w = weight.reshape(groups, opg, cpg, *kernel).transpose(1, 2).reshape(groups * cpg, opg, *kernel)
        w = w.flip(list(range(2, 2 + n)))
        pad = [dilation[i] * (kernel[i] - 1) - padding[i] for i in range(n)]
        result = ember.convolution(grad, w, None, [1] * n, pad, list(dilation), False, [0] * n, groups)
        return _narrow_to(result, in_sizes)
    # the transposed convolution; output_padding restores the rows a strided forward skipped at the end
    out_pad = [
        in_sizes[i] - ((grad.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + 1)
        for i in range(n)
    ]
    return ember.convolution(grad, weight, None, list(stride), list(padding), list(dilation), True, out_pad, groups)


def _conv_weight_grad(x, gy, w_shape, stride, padding, dilation, groups):
    """The gradient of the weight ``(O, C / groups, *kernel)`` of ``y = conv(x, weight)``, given ``gy = dL/dy``.

    ``dW[o, c, k] = sum_{n, p} gy[n, o, p] * x[n, c, p * stride + k * dilation - padding]``: a
    convolution of ``x`` with batch and channels swapped (channels become the batch, the batch
    is summed over as channels) by the kernel ``gy``, with stride and dilation exchanged. Its
    output (``kernel`` positions, a few more where the forward dropped trailing rows) is small
    and its kernel large: the core recognises that shape and runs its weight-gradient kernel
    (``ember._C.conv_weight_grad``) on the transposed views, with no copy.
    """
    n = len(stride)
    N, C = x.shape[:2]
    out_channels = gy.shape[1]
    kernel = w_shape[2:]
    spatial_x, spatial_g = x.shape[2:], gy.shape[2:]
    if groups == 1:
        xt = x.transpose(0, 1)
        gt = gy.transpose(0, 1)
    elif groups == C and N > 0:
        # depthwise: one group per (sample, channel), summed over the samples after; this runs the
        # core's direct kernel for thin groups (the swapped form below would be one group of N
        # channels per input channel, tens of times slower there)
        result = ember.convolution(
            x.reshape(1, N * C, *spatial_x),
            gy.reshape(N * out_channels, 1, *spatial_g),
            None,
            list(dilation),
            list(padding),
            list(stride),
            False,
            [0] * n,
            N * C,
        )
        result = _narrow_to(result, kernel).reshape(N, out_channels, *kernel).sum(0)
        return result.unsqueeze(1)
    else:
        # group g's channels land in channels [g * N, (g + 1) * N) of the swapped input,
        # and its outputs in output channels [g * O / groups, ...) of the swapped kernel
        cpg, opg = C // groups, out_channels // groups
        rest = tuple(range(3, 3 + n))
        xt = x.reshape(N, groups, cpg, *spatial_x).permute(2, 1, 0, *rest).reshape(cpg, groups * N, *spatial_x)
        gt = gy.reshape(N, groups, opg, *spatial_g).permute(1, 2, 0, *rest).reshape(groups * opg, N, *spatial_g)
    result = ember.convolution(xt, gt, None, list(dilation), list(padding), list(stride), False, [0] * n, groups)
    result = _narrow_to(result, kernel)  # (C / groups, O, *kernel)
    return result.transpose(0, 1).contiguous()


def _convolution_grads(grad, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask):
    n = weight.dim() - 2
    stride, padding, dilation = _tup(stride, n), _tup(padding, n), _tup(dilation, n)
    if not transposed and not _dispatch_state.grad_enabled:
        # a backward pass that records nothing (no create_graph): on CUDA tensors, the core's fused backward
        # (three kernel launches and two GEMMs where the formulas below run two convolutions, copies and sums);
        # None for CPU tensors and the calls it does not take
        grads = _cuda_conv.convolution_backward_cuda(grad, input, weight, stride, padding, dilation, groups,
                                                     output_mask)
        if grads is not None:
            return grads
    grad_input = grad_weight = grad_bias = None
    if input.numel() == 0 or weight.numel() == 0:
        # empty sums (no samples, no input channels: conv2d(x, w) with w of shape (C_out, 0, k, k) gives
        # the bias): zero gradients, which the adjoint convolutions, refusing zero channels, cannot give
        grad_input = ember.zeros_like(input) if output_mask[0] else None
        grad_weight = ember.zeros_like(weight) if output_mask[1] else None
    elif transposed:
        # y = conv^T(x): the input gradient is the plain convolution of grad, and the weight gradient
        # is that of conv(grad, weight) = x-space, with grad as its input and x as its output gradient
        if output_mask[0]:
            grad_input = ember.convolution(
                grad, weight, None, list(stride), list(padding), list(dilation), False, [0] * n, groups
            )
            grad_input = _narrow_to(grad_input, input.shape[2:])
        if output_mask[1]:
            grad_weight = _conv_weight_grad(grad, input, weight.shape, stride, padding, dilation, groups)
    else:
        if output_mask[0]:
            grad_input = _conv_input_grad(grad, weight, input.shape[2:], stride, padding, dilation, groups)
        if output_mask[1]:
            grad_weight = _conv_weight_grad(input, grad, weight.shape, stride, padding, dilation, groups)
    if output_mask[2]:
        # the batch first (whole rows added at once), then each channel's positions: five times faster
        # than one sum over (0, 2, ...), which walks the short rows of every sample and channel
        grad_bias = grad.sum(0).sum(list(range(1, grad.dim() - 1)))
    return grad_input, grad_weight, grad_bias


derivative("convolution", joint={("input", "weight", "bias"): _convolution_grads})

# conv*d and conv_transpose*d record the convolution prim (plus unsqueeze/pad for unbatched
# inputs and padding='same', and four real convolutions for complex ones)
through_decomposition("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")

# -- pad ------------------------------------------------------------------------------------------------


def _pad_grad(grad, input, pad, mode, value):
    plan, _ = nn_padding._pad_plan(input, pad, mode, value)
    if mode == "constant":
        # the padded border gets no gradient and cropped parts get zeros: padding by the negated amounts
        return ember.nn.functional.pad(grad, [-int(v) for v in pad])
    g = grad
    for d, lo, hi in plan:
        if lo == 0 and hi == 0:
            continue
        size = input.shape[d]
        out = g.shape[d]
        # the forward read input position idx[j] into output position j (as the core's kernel does)
        idx = np.arange(out) - lo
        if mode == "reflect":
            idx = np.abs(idx)
            idx = np.where(idx >= size, 2 * (size - 1) - idx, idx)
        elif mode == "replicate":
            idx = np.clip(idx, 0, size - 1)
        else:
            start, kept = max(-lo, 0), size - max(-lo, 0) - max(-hi, 0)
            idx = start + (np.arange(out) - max(lo, 0)) % max(kept, 1)
        shape = list(g.shape)
        shape[d] = size
        g = ember.zeros(shape, dtype=g.dtype, device=g.device).index_add(d, _const(idx, g), g)
    return g


derivative("pad", input=_pad_grad)

# -- im2col / fold: each other's adjoint ----------------------------------------------------------------

derivative(
    "im2col",
    input=lambda grad, input, kernel_size, dilation, padding, stride: ember.nn.functional.fold(
        grad, input.shape[-2:], kernel_size, dilation, padding, stride
    ),
)
derivative(
    "fold",
    input=lambda grad, kernel_size, dilation, padding, stride: ember.nn.functional.unfold(
        grad, kernel_size, dilation, padding, stride
    ),
)

# -- pixel_shuffle / pixel_unshuffle: each other's inverse (a permutation, so also the adjoint) ----------

derivative(
    "pixel_shuffle", input=lambda grad, upscale_factor: ember.nn.functional.pixel_unshuffle(grad, upscale_factor)
)
derivative(
    "pixel_unshuffle", input=lambda grad, downscale_factor: ember.nn.functional.pixel_shuffle(grad, downscale_factor)
)

# -- channel_shuffle: a permutation of channels; its adjoint is the shuffle with C / groups groups ----------

derivative(
    "channel_shuffle",
    input=lambda grad, groups: ember.nn.functional.channel_shuffle(grad, grad.shape[1] // groups),
)

# -- pooling --------------------------------------------------------------------------------------------


def _window_adjoint(g, in_sizes, kernel, stride, padding):
    """Each window's gradient spread (summed, not divided) over the window's elements: (..., *out) -> (..., *in).

    Windows that reach past the input (padding, ``ceil_mode``) drop the part outside.
    """
    n = len(kernel)
    lead = g.shape[: g.dim() - n]
    out = g.shape[g.dim() - n :]
    if all(stride[i] == kernel[i] and padding[i] == 0 for i in range(n)):
        # non-overlapping windows: a broadcast, then zeros for (or a cut of) the rows the windows missed
        shape, expanded = [], []
        for i in range(n):
            shape += [out[i], 1]
            expanded += [out[i], kernel[i]]
        spread = g.reshape(*lead, *shape).expand(*lead, *expanded).reshape(*lead, *(o * k for o, k in zip(out, kernel)))
        spread = _narrow_to(spread, [min(o * k, s) for o, k, s in zip(out, kernel, in_sizes)], len(lead))
        extra = []
        for i in reversed(range(n)):
            extra += [0, in_sizes[i] - spread.shape[len(lead) + i]]
        return ember.nn.functional.pad(spread, extra) if any(extra) else spread
    planes = g.reshape(-1, 1, *out)
    ones = ember.ones((1, 1, *kernel), dtype=g.dtype, device=g.device)
    full = [(out[i] - 1) * stride[i] - 2 * padding[i] + kernel[i] for i in range(n)]
    out_pad = [max(in_sizes[i] - full[i], 0) for i in range(n)]
    spread = ember.convolution(planes, ones, None, list(stride), list(padding), [1] * n, True, out_pad, 1)
    return _narrow_to(spread, in_sizes).reshape(*lead, *in_sizes)


def _avg_divisors(in_sizes, out, kernel, stride, padding, count_include_pad, divisor_override):
    """``1 / divisor`` of every output cell of an average pool (numpy, shape ``out``), or a number if all agree."""
    if divisor_override is not None:
        return 1.0 / divisor_override
    n = len(kernel)
    per_dim = []
    for i in range(n):
        start = np.arange(out[i]) * stride[i] - padding[i]
        end = np.minimum(start + kernel[i], in_sizes[i] + padding[i])
        if count_include_pad:
            per_dim.append(end - start)
        else:
            per_dim.append(np.minimum(end, in_sizes[i]) - np.maximum(start, 0))
    sizes = per_dim[0].astype(np.float64)
    for d in per_dim[1:]:
        sizes = np.multiply.outer(sizes, d)
    if np.all(sizes == sizes.flat[0]):
        return 1.0 / float(sizes.flat[0])
    return 1.0 / sizes


def _max_pool_with_indices_grad(n):
    """The backward of ``(adaptive_)max_pool{n}d_with_indices``: ``grad`` scattered to the saved argmax."""

    def max_pool_grad(grad, input, results):
        # the indices are the op's second output, saved at forward time: no second pooling pass
        return _scatter_max(grad, results[1], input, n)

    return max_pool_grad


def _make_pool_grads(n):
    spatial_names = f"max_pool{n}d", f"avg_pool{n}d"

    # max_pool{n}d is recorded as max_pool{n}d_with_indices, whose formula reads the indices it returned
    derivative(f"{spatial_names[0]}_with_indices", input=_max_pool_with_indices_grad(n))
    through_decomposition(spatial_names[0])

    if n == 1:

        def avg_pool_grad(grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad):
            return _avg_pool_grad(grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)
    else:

        def avg_pool_grad(grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
            return _avg_pool_grad(
                grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
            )

    def _avg_pool_grad(grad, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        k, s, p, _, out, _ = nn_pooling._window_plan(
            spatial_names[1], n, input, kernel_size, stride, padding, None, ceil_mode
        )
        in_sizes = input.shape[input.dim() - n :]
        inv = _avg_divisors(in_sizes, out, k, s, p, count_include_pad, divisor_override)
        g = grad * (inv if isinstance(inv, float) else _const(inv.astype(grad._data.dtype), grad))
        return _window_adjoint(g, in_sizes, k, s, p)

    derivative(spatial_names[1], input=avg_pool_grad)


def _scatter_max(grad, indices, input, n):
    """``grad`` added at the argmax ``indices`` (flat positions in each input plane)."""
    shape = input.shape
    lead = shape[: len(shape) - n]
    count = math.prod(lead)
    size = math.prod(shape[len(shape) - n :])
    cells = math.prod(grad.shape[grad.dim() - n :])
    flat = ember.zeros((count, size), dtype=grad.dtype, device=grad.device)
    return flat.scatter_add(1, indices.reshape(count, cells), grad.reshape(count, cells)).reshape(shape)


for _n in (1, 2, 3):
    _make_pool_grads(_n)


def _adaptive_windows(in_size, out_size):
    """Start and end of every window of an adaptive pool along one dim (as the core's kernel)."""
    i = np.arange(out_size)
    return (i * in_size) // out_size, -((-(i + 1) * in_size) // out_size)


def _adaptive_avg_adjoint(g, in_sizes):
    """The gradient of adaptive average pooling ``(..., *out) -> (..., *in)``, one spatial dim at a time."""
    n = len(in_sizes)
    for i in range(n):
        d = g.dim() - n + i
        out, size = g.shape[d], in_sizes[i]
        if size % out == 0:  # equal windows that tile the input: a broadcast
            k = size // out
            if k != 1:
                shape = list(g.shape)
                g = (
                    (g / k)
                    .unsqueeze(d + 1)
                    .expand(*shape[: d + 1], k, *shape[d + 1 :])
                    .reshape(*shape[:d], size, *shape[d + 1 :])
                )
            continue
        start, end = _adaptive_windows(size, out)
        matrix = np.zeros((out, size), np.float64)
        for o in range(out):
            matrix[o, start[o] : end[o]] = 1.0 / (end[o] - start[o])
        m = _const(matrix.astype(g._data.dtype), g)
        g = ember.matmul(g.movedim(d, -1), m).movedim(-1, d)
    return g


def _make_adaptive(n):
    def avg_grad(grad, input):
        return _adaptive_avg_adjoint(grad, input.shape[input.dim() - n :])

    derivative(f"adaptive_avg_pool{n}d", input=avg_grad)
    entry = derivative(f"adaptive_max_pool{n}d_with_indices", input=_max_pool_with_indices_grad(n))
    entry.node_name = f"AdaptiveMaxPool{n}DBackward0"  # PyTorch's adaptive_max_pool{n}d returns the indices itself
    through_decomposition(f"adaptive_max_pool{n}d")


for _n in (1, 2, 3):
    _make_adaptive(_n)


def _make_lp_pool(n):
    name = f"lp_pool{n}d"
    avg = getattr(ember.nn.functional, f"avg_pool{n}d")
    maxpool = getattr(ember.nn.functional, f"max_pool{n}d")

    def lp_grad(grad, input, norm_type, kernel_size, stride, ceil_mode):
        p = float(norm_type)
        if math.isinf(p):
            # the max (p = inf) or min (p = -inf) of |x| over each window
            a = input.abs()
            _, indices = maxpool(a if p > 0 else -a, kernel_size, stride, 0, 1, ceil_mode, return_indices=True)
            return _scatter_max(grad, indices, input, n) * ember.sign(input)
        # as PyTorch composes it: (sign(m) * relu(|m|) * K) ** (1 / p), m = avg_pool(x ** p)
        k = _tup(kernel_size, n)
        K = math.prod(k)
        xp = ember.pow(input, p)
        m = avg(xp, kernel_size, stride, 0, ceil_mode)
        v = m * K
        dv = grad * ((1.0 / p) * ember.pow(v, 1.0 / p - 1))
        dm = ember.where(m != 0, dv * K, 0.0)
        dxp = avg_pool_backward(dm, input, kernel_size, stride, ceil_mode)
        return dxp * (p * ember.pow(input, p - 1))

    def avg_pool_backward(g, input, kernel_size, stride, ceil_mode):
        k, s, pad, _, out, _ = nn_pooling._window_plan(f"avg_pool{n}d", n, input, kernel_size, stride, 0, None,
                                                       ceil_mode)
        in_sizes = input.shape[input.dim() - n :]
        inv = _avg_divisors(in_sizes, out, k, s, pad, True, None)
        g = g * (inv if isinstance(inv, float) else _const(inv.astype(g._data.dtype), g))
        return _window_adjoint(g, in_sizes, k, s, pad)

    derivative(name, input=lp_grad)


for _n in (1, 2, 3):
    _make_lp_pool(_n)


def _make_max_unpool(n):
    def unpool_grad(grad, input, indices):
        # out[idx] = x: the gradient reads grad back at the indices
        lead = input.shape[: input.dim() - n]
        count = math.prod(lead)
        cells = math.prod(grad.shape[grad.dim() - n :])
        g = grad.reshape(count, cells).gather(1, indices.reshape(count, math.prod(input.shape[input.dim() - n :])))
        return g.reshape(input.shape)

    derivative(f"max_unpool{n}d", input=unpool_grad, nondiff=("indices",))


for _n in (1, 2, 3):
    _make_max_unpool(_n)

# -- interpolate ----------------------------------------------------------------------------------------


def _take_adjoint(g, dim, idx, size):
    """The adjoint of ``take(x, idx, dim)`` (x of ``size`` along ``dim``): ``grad`` added back at ``idx``."""
    out = len(idx)
    if out == size and np.array_equal(idx, np.arange(size)):
        return g
    if out % size == 0 and np.array_equal(idx, np.arange(out) // (out // size)):
        return g.unflatten(dim, (size, out // size)).sum(dim + 1)  # integer upscale: sum each run
    shape = list(g.shape)
    shape[dim] = size
    return ember.zeros(shape, dtype=g.dtype, device=g.device).index_add(dim, _const(idx, g), g)


def _taps_adjoint(g, dim, idx, w, size):
    """The adjoint of ``sum_t take(x, idx[:, t], dim) * w[:, t]``: one ``index_add`` of every tap."""
    out, taps = idx.shape
    shape = list(g.shape)
    wshape = [1] * g.dim()
    wshape[dim] = out
    wshape.insert(dim + 1, taps)
    weights = _const(w.astype(g._data.dtype), g).reshape(wshape)
    spread = (g.unsqueeze(dim + 1) * weights).reshape(*shape[:dim], out * taps, *shape[dim + 1 :])
    shape[dim] = size
    return ember.zeros(shape, dtype=g.dtype, device=g.device).index_add(dim, _const(idx.reshape(-1), g), spread)


def _interpolate_grad(grad, input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    mode, n, out, scales, align_corners, antialias = nn_interpolate._interpolate_plan(
        input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
    )
    in_sizes = input.shape[2:]
    if mode == "area":
        return _adaptive_avg_adjoint(grad, in_sizes)
    dtype = _compute_dtype(grad)
    g = grad if grad.dtype is dtype else grad.to(dtype)
    if mode in ("nearest", "nearest-exact"):
        for i in range(n):
            scale = scales[i] if scales is not None else None
            idx = nn_interpolate._nearest_index(in_sizes[i], out[i], scale, mode == "nearest-exact")
            g = _take_adjoint(g, 2 + i, idx, in_sizes[i])
        return g
    cubic = mode == "bicubic"
    ct = _FLOAT64 if input._data.dtype == _FLOAT64 else np.dtype(np.float32)
    for i in range(n):
        scale = scales[i] if scales is not None else None
        if antialias:
            idx, w = nn_interpolate._separable_taps(in_sizes[i], out[i], scale, align_corners, cubic, True)
        else:
            idx, w = nn_interpolate._interp_taps(in_sizes[i], out[i], scale, align_corners, cubic, ct)
        g = _taps_adjoint(g, 2 + i, idx, w, in_sizes[i])
    return g


derivative("interpolate", input=_interpolate_grad)
through_decomposition("upsample", "upsample_nearest", "upsample_bilinear")

# -- affine_grid ----------------------------------------------------------------------------------------


def _affine_grid_grad(grad, theta, size, align_corners):
    # grid[n, point] = theta[n] @ (base[point], 1): theta's gradient sums grad^T @ base over the points
    n = len(size) - 2
    spatial = tuple(int(v) for v in size[2:])
    ct = grad._data.dtype
    base = np.ones((*spatial, n + 1), ct)
    for i in range(n):  # component i runs along spatial dim n - 1 - i (x along W)
        shape = [1] * n
        shape[n - 1 - i] = spatial[n - 1 - i]
        base[..., i] = nn_grid_sample._affine_base(spatial[n - 1 - i], bool(align_corners), ct).reshape(shape)
    b = _const(base.reshape(-1, n + 1), grad)
    return ember.matmul(grad.reshape(grad.shape[0], -1, n).transpose(1, 2), b)


derivative("affine_grid", theta=_affine_grid_grad)

# -- grid_sample ----------------------------------------------------------------------------------------


def _clip_with_grad(c, size):
    """Coordinates clipped to [0, size - 1] and their derivative (0 where clipped, at the edges too, as PyTorch)."""
    inside = (c > 0) & (c < size - 1)
    return c.clamp(0, size - 1), inside.to(c.dtype)


def _reflect_with_grad(c, twice_low, twice_high):
    """Coordinates mirrored into [twice_low / 2, twice_high / 2] and their derivative (+1 or -1)."""
    if twice_low == twice_high:
        return ember.zeros_like(c), ember.zeros_like(c)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = c - low
    sign = ember.where(c < 0, -1.0, 1.0).to(c.dtype)
    c = c.abs()
    extra = ember.fmod(c, span)
    even = ember.fmod(ember.floor(c / span), 2) == 0
    return ember.where(even, extra + low, span - extra + low), ember.where(even, sign, -sign)


def _source_coordinates(c, size, padding_mode, align_corners, pad):
    """Unnormalised (and, with ``pad``, padded) source coordinates and d(coordinate) / d(grid)."""
    if align_corners:
        c = (c + 1) * ((size - 1) / 2)
        mult = (size - 1) / 2
    else:
        c = ((c + 1) * size - 1) / 2
        mult = size / 2
    if not pad or padding_mode == "zeros":
        return c, mult
    if padding_mode == "reflection":
        if align_corners:
            c, m = _reflect_with_grad(c, 0, 2 * (size - 1))
        else:
            c, m = _reflect_with_grad(c, -1, 2 * size - 1)
        mult = m * mult
    c, m = _clip_with_grad(c, size)
    return c, m * mult


def _integer(c):
    """Integer coordinates (int64) of float ones that are whole already; non-finite ones go outside (-2)."""
    return ember.where(ember.isfinite(c), c, -2.0).to(ember.int64)


def _pad_tap(c, size, padding_mode, align_corners):
    """Padding applied to an (integer) bicubic tap coordinate, as the forward does."""
    if padding_mode == "border":
        return c.clamp(0, size - 1)
    if padding_mode == "reflection":
        twice = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        return _reflect_with_grad(c, *twice)[0].clamp(0, size - 1)
    return c


def _cubic(t, a=-0.75):
    """Keys' cubic weights of the taps -1..2 around ``t`` in [0, 1), and their derivatives in ``t``."""

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    def near_d(x):
        return (3 * (a + 2) * x - 2 * (a + 3)) * x

    def far_d(x):
        return (3 * a * x - 10 * a) * x + 8 * a

    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    slopes = [far_d(t + 1), near_d(t), -near_d(1 - t), -far_d(2 - t)]
    return weights, slopes


def _grid_sample_grads(grad, input, grid, mode, padding_mode, align_corners, output_mask):
    n, align_corners, _ = nn_grid_sample._grid_sample_plan(input, grid, mode, padding_mode, align_corners)
    N, C = input.shape[:2]
    spatial = input.shape[2:]
    points = grid.reshape(N, -1, n)
    M = points.shape[1]
    g = grad.reshape(N, C, M)
    flat = input.reshape(N, C, -1)
    want_grid = output_mask[1] and mode != "nearest"
    coords, mults = [], []
    for i in range(n):  # spatial dim i (D, H, W order) reads grid component n - 1 - i
        c, m = _source_coordinates(
            points.select(2, n - 1 - i), spatial[i], padding_mode, align_corners, mode != "bicubic"
        )
        coords.append(c)
        mults.append(m)

    taps = []  # (integer coordinate per dim, weight, d(weight)/d(coordinate) per dim or None)
    if mode == "nearest":
        taps.append(([_integer(ember.round(c)) for c in coords], None, None))
    elif mode == "bilinear":
        low = [ember.floor(c) for c in coords]
        frac = [c - f for c, f in zip(coords, low)]
        low = [_integer(f) for f in low]
        for corner in np.ndindex(*(2,) * n):
            factors = [frac[i] if corner[i] else 1 - frac[i] for i in range(n)]
            weight = factors[0]
            for f in factors[1:]:
                weight = weight * f
            slopes = None
            if want_grid:
                slopes = []
                for i in range(n):
                    s = None
                    for j in range(n):
                        if j != i:
                            s = factors[j] if s is None else s * factors[j]
                    s = ember.ones_like(frac[i]) if s is None else s
                    slopes.append(s if corner[i] else -s)
            taps.append(([low[i] + corner[i] for i in range(n)], weight, slopes))
    else:  # bicubic, 2-D
        base = [ember.floor(c) for c in coords]
        cubic = [_cubic(c - b) for c, b in zip(coords, base)]
        for a in range(4):
            for b in range(4):
                idx = [
                    _integer(_pad_tap(base[i] + (t - 1), spatial[i], padding_mode, align_corners))
                    for i, t in zip(range(2), (a, b))
                ]
                (wy, sy), (wx, sx) = cubic
                slopes = [sy[a] * wx[b], wy[a] * sx[b]] if want_grid else None
                taps.append((idx, wy[a] * wx[b], slopes))

    positions, weights = [], []
    grid_grads = [None] * n
    for idx, weight, slopes in taps:
        inside = None
        position = None
        for i in range(n):
            ok = (idx[i] >= 0) & (idx[i] < spatial[i])
            inside = ok if inside is None else inside & ok
            clipped = idx[i].clamp(0, spatial[i] - 1)
            position = clipped if position is None else position * spatial[i] + clipped
        mask = inside.to(input.dtype)
        w = mask if weight is None else weight * mask
        positions.append(position)
        weights.append(w)
        if slopes is not None:
            values = flat.gather(2, position.unsqueeze(1).expand(N, C, M))
            gv = (g * values).sum(1) * mask
            for i in range(n):
                term = gv * slopes[i]
                grid_grads[i] = term if grid_grads[i] is None else grid_grads[i] + term

    grad_input = grad_grid = None
    if output_mask[0]:
        index = ember.cat(positions, 1).unsqueeze(1).expand(N, C, M * len(taps))
        src = ember.cat([g * w.unsqueeze(1) for w in weights], 2)
        zeros = ember.zeros((N, C, math.prod(spatial)), dtype=grad.dtype, device=grad.device)
        grad_input = zeros.scatter_add(2, index, src).reshape(input.shape)
    if output_mask[1]:
        if not want_grid:
            grad_grid = ember.zeros_like(grid)
        else:
            parts = [grid_grads[n - 1 - k] * mults[n - 1 - k] for k in range(n)]
            grad_grid = ember.stack(parts, -1).reshape(grid.shape)
    return grad_input, grad_grid


derivative("grid_sample", joint={("input", "grid"): _grid_sample_grads})
