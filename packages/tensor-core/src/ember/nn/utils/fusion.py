"""Fold an eval-mode BatchNorm into the preceding convolution or linear layer, PyTorch's ``torch.nn.utils.fusion``.

With ``s = bn.weight / sqrt(running_var + eps)`` the fused layer computes ``W' = W * s`` (per output
channel) and ``b' = (b - running_mean) * s + bn.bias``, so ``fused(x) == bn(conv(x))`` in eval mode.
"""

from __future__ import annotations

import copy

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` that computes ``bn(conv(x))`` in one step (inference only).

    Args:
        conv (ember.nn.modules.conv._ConvNd): a convolution (``ConvNd`` or, with ``transpose=True``,
            ``ConvTransposeNd``) in eval mode. It is deep-copied, not modified.
        bn (ember.nn.modules.batchnorm._BatchNorm): a BatchNorm in eval mode with running statistics.
        transpose (bool, optional): the weight is laid out ``(in, out, ...)`` as in transposed
            convolutions. Default: ``False``.

    Returns:
        the fused convolution module (same class as ``conv``, with a bias).

    Raises:
        AssertionError: if either module is in training mode or ``bn`` has no running statistics
            (PyTorch's exception type).

    Example:
        >>> import ember
        >>> from ember import nn
        >>> conv, bn = nn.Conv2d(2, 3, 3).eval(), nn.BatchNorm2d(3).eval()
        >>> x = ember.randn(1, 2, 5, 5)
        >>> fused = nn.utils.fuse_conv_bn_eval(conv, bn)
        >>> bool(((fused(x) - bn(conv(x))).abs() < 1e-5).all())
        True
    """
    _check_fusable(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, *_bn_statistics(bn), transpose)
    return fused


def _check_fusable(layer, bn):
    # Fusion bakes the running statistics into the layer: only valid when bn no longer updates them.
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")


def _bn_statistics(bn):
    return bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The weight and bias of a convolution with the BatchNorm that follows it folded in.

    Args:
        conv_w (Tensor): convolution weight, ``(out, in/groups, *kernel)`` (``(in, out/groups, *kernel)``
            if ``transpose``).
        conv_b (Tensor, optional): convolution bias ``(out,)``; ``None`` counts as zeros.
        bn_rm (Tensor): BatchNorm running mean ``(out,)``.
        bn_rv (Tensor): BatchNorm running variance ``(out,)``.
        bn_eps (float): BatchNorm epsilon.
        bn_w (Tensor, optional): BatchNorm weight; ``None`` counts as ones.
        bn_b (Tensor, optional): BatchNorm bias; ``None`` counts as zeros.
        transpose (bool, optional): scale dimension 1 of the weight instead of 0. Default: ``False``.

    Returns:
        tuple[Parameter, Parameter]: the fused weight (dtype of ``conv_w``) and bias (dtype of ``conv_b``,
        or of ``conv_w`` when there was no bias).
    """
    from ... import ones_like, rsqrt, zeros_like
    from ..parameter import Parameter

    # bn(conv(x)) = (conv(x) - mean) * gamma / sqrt(var + eps) + beta: scale each output channel of the
    # weight by gamma / sqrt(var + eps), and shift the bias to match.
    weight_dtype = conv_w.dtype
    bias_dtype = weight_dtype if conv_b is None else conv_b.dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    gamma = ones_like(bn_rm) if bn_w is None else bn_w
    beta = zeros_like(bn_rm) if bn_b is None else bn_b
    inv_std = rsqrt(bn_rv + bn_eps)
    # Output channels are dim 0 of a convolution weight, dim 1 of a transposed one.
    per_channel = [1] * conv_w.dim()
    per_channel[1 if transpose else 0] = -1
    weight = (conv_w * (gamma * inv_std).reshape(per_channel)).to(dtype=weight_dtype)
    bias = ((conv_b - bn_rm) * inv_std * gamma + beta).to(dtype=bias_dtype)
    return Parameter(weight, conv_w.requires_grad), Parameter(bias, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` that computes ``bn(linear(x))`` in one step (inference only).

    Args:
        linear (ember.nn.Linear): a Linear module in eval mode (deep-copied, not modified).
        bn (ember.nn.modules.batchnorm._BatchNorm): a BatchNorm in eval mode with running statistics,
            with ``num_features`` equal to ``linear.out_features`` or 1.

    Returns:
        ember.nn.Linear: the fused module.

    Raises:
        AssertionError: if either module is in training mode, the feature counts do not match, or
            ``bn`` has no running statistics (PyTorch's exception type).
    """
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    # A single-feature BatchNorm broadcasts over all of the linear layer's outputs.
    if bn.num_features not in (linear.out_features, 1):
        raise AssertionError(
            f"To fuse, linear.out_features == bn.num_features or bn.num_features == 1, "
            f"got linear.out_features={linear.out_features} and bn.num_features={bn.num_features}"
        )
    _check_fusable(linear, bn)
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, *_bn_statistics(bn))
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias of a Linear layer with the BatchNorm that follows it folded in.

    Args:
        linear_w (Tensor): Linear weight ``(out, in)``.
        linear_b (Tensor, optional): Linear bias ``(out,)``; ``None`` counts as zeros.
        bn_rm (Tensor): BatchNorm running mean.
        bn_rv (Tensor): BatchNorm running variance.
        bn_eps (float): BatchNorm epsilon.
        bn_w (Tensor): BatchNorm weight.
        bn_b (Tensor): BatchNorm bias.

    Returns:
        tuple[Parameter, Parameter]: the fused weight and bias.
    """
    from ... import rsqrt, zeros_like
    from ..parameter import Parameter

    bias_dtype = linear_w.dtype if linear_b is None else linear_b.dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * rsqrt(bn_rv + bn_eps)  # per output feature
    weight = linear_w * scale.unsqueeze(-1).to(dtype=linear_w.dtype)
    bias = ((linear_b - bn_rm) * scale + bn_b).to(dtype=bias_dtype)
    return Parameter(weight, linear_w.requires_grad), Parameter(bias, linear_b.requires_grad)
