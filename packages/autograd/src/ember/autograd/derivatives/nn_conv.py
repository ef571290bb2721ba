"""Derivatives of convolution (``ember._ops.nn_conv``).

* ``convolution``: the input gradient is a convolution of ``grad`` by the
  flipped kernel (stride 1) or a transposed convolution; the weight gradient
  is one convolution of the input with ``grad`` (batch and channels swapped,
  stride and dilation swapped), which the core runs as one matrix product.
  On CUDA tensors, a backward pass that records nothing (no ``create_graph``)
  runs the fused backward of :mod:`ember.cuda.kernels.conv` instead
  (``convolution_backward_cuda``: two GEMMs and three kernel launches for all three gradients);
* ``conv{1,2,3}d`` and ``conv_transpose{1,2,3}d`` are differentiated through their decomposition.

Every backward is built from ember ops, so gradients are differentiable again.
"""

from __future__ import annotations

import ember
from ember._ops._dispatch import state as _dispatch_state
from ember.cuda.kernels import conv as _cuda_conv

from .._table import derivative, through_decomposition
from ._nn_common import _cpu_float_rows
from ._spatial import _narrow_to, _tup

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
        grads = _depthwise_backward_cpu(grad, input, weight, stride, padding, dilation, groups, output_mask)
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


def _depthwise_backward_cpu(grad, input, weight, stride, padding, dilation, groups, output_mask):
    """A 2-D depthwise convolution's gradients (groups == channels, one output channel each) from
    csrc/depthwise.cpp, for plain CPU float32/float64 tensors in a backward that records nothing; None for
    every other call. The formulas run the weight gradient as a convolution whose kernel is the output
    gradient, 4x PyTorch's whole backward on MobileNet's layers."""
    if weight.dim() != 4 or weight.shape[1] != 1 or groups != weight.shape[0] or input.shape[1] != groups:
        return None
    if input.numel() == 0 or grad.numel() == 0:
        return None
    cpu = _cpu_float_rows("depthwise_weight_grad", grad, input, weight)
    if cpu is None:
        return None
    _C, (gy, x, w) = cpu
    args = (list(stride), list(padding), list(dilation))
    device = input.device
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        grad_input = ember.Tensor._make(_C.depthwise_input_grad(gy, w, list(x.shape[2:]), *args), device)
    if output_mask[1]:
        grad_weight = ember.Tensor._make(_C.depthwise_weight_grad(x, gy, w.shape[2], w.shape[3], *args), device)
    if output_mask[2]:
        grad_bias = grad.sum(0).sum([1, 2])
    return grad_input, grad_weight, grad_bias


derivative("convolution", joint={("input", "weight", "bias"): _convolution_grads})

# conv*d and conv_transpose*d record the convolution prim (plus unsqueeze/pad for unbatched
# inputs and padding='same', and four real convolutions for complex ones)
through_decomposition("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
