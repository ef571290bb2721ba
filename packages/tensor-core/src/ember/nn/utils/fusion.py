"""Fold an eval-mode BatchNorm into the preceding convolution or linear layer, PyTorch's ``torch.nn.utils.fusion``.

With ``s = bn.weight / sqrt(running_var + eps)`` the fused layer computes ``W' = W * s`` (per output
channel) and ``b' = (b - running_mean) * s + bn.bias``, so ``fused(x) == bn(conv(x))`` in eval mode.
"""

from __future__ import annotations

import copy

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """Fuse a convolution module and a BatchNorm module into a new convolution module.

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
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused_conv = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused_conv.weight, fused_conv.bias = fuse_conv_bn_weights(
        fused_conv.weight, fused_conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, transpose
    )
    return fused_conv


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """Fuse convolution parameters and BatchNorm parameters into new convolution parameters.

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

    conv_weight_dtype = conv_w.dtype
    conv_bias_dtype = conv_b.dtype if conv_b is not None else conv_weight_dtype
    if conv_b is None:
        conv_b = zeros_like(bn_rm)
    if bn_w is None:
        bn_w = ones_like(bn_rm)
    if bn_b is None:
        bn_b = zeros_like(bn_rm)
    bn_var_rsqrt = rsqrt(bn_rv + bn_eps)
    if transpose:
        shape = [1, -1] + [1] * (len(conv_w.shape) - 2)
    else:
        shape = [-1, 1] + [1] * (len(conv_w.shape) - 2)
    fused_conv_w = (conv_w * (bn_w * bn_var_rsqrt).reshape(shape)).to(dtype=conv_weight_dtype)
    fused_conv_b = ((conv_b - bn_rm) * bn_var_rsqrt * bn_w + bn_b).to(dtype=conv_bias_dtype)
    return Parameter(fused_conv_w, conv_w.requires_grad), Parameter(fused_conv_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """Fuse a Linear module and a BatchNorm module into a new Linear module.

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
    fused_linear = copy.deepcopy(linear)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            f"To fuse, linear.out_features == bn.num_features or bn.num_features == 1, "
            f"got linear.out_features={linear.out_features} and bn.num_features={bn.num_features}"
        )
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused_linear.weight, fused_linear.bias = fuse_linear_bn_weights(
        fused_linear.weight, fused_linear.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused_linear


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """Fuse Linear parameters and BatchNorm parameters into new Linear parameters.

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

    linear_weight_dtype = linear_w.dtype
    linear_bias_dtype = linear_b.dtype if linear_b is not None else linear_weight_dtype
    if linear_b is None:
        linear_b = zeros_like(bn_rm)
    bn_scale = bn_w * rsqrt(bn_rv + bn_eps)
    fused_w = linear_w * bn_scale.unsqueeze(-1).to(dtype=linear_weight_dtype)
    fused_b = ((linear_b - bn_rm) * bn_scale + bn_b).to(dtype=linear_bias_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
