"""ember.nn.functional: pixel_shuffle, pixel_unshuffle and channel_shuffle.

All three are permutations of the input's elements: composites whose decompositions are a reshape, a
transpose and a contiguous copy, with a vectorised CPU kernel each (channel_shuffle's is also its CUDA
kernel; pixel_shuffle/pixel_unshuffle keep their decompositions on cuda: one strided copy there, where
the CPU kernel's r * r row copies would be r * r kernel launches).
"""

from __future__ import annotations

from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._nn_common import _E, _NN, _check_tensor, _fmt
from ._registry import COMPOSITE, defop
from ._spatial import _int_arg, _memoized

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: ``ember.nn.functional`` names that differ from the registry name: public name -> op name.
NN_FUNCTIONAL_ALIASES: dict[str, str] = {"native_channel_shuffle": "channel_shuffle"}


# -- pixel_shuffle / pixel_unshuffle -------------------------------------------------------------------


@_memoized
def _shuffle_plan(op, input, factor, up):
    _check_tensor(op, "input", input)
    factor = _int_arg(op, "upscale_factor" if up else "downscale_factor", factor, 2)
    shape = input._data.shape
    if len(shape) < 3:
        raise RuntimeError(f"{op} expects input to have at least 3 dimensions, but got input with {len(shape)} "
                           "dimension(s)")
    if factor <= 0:
        raise RuntimeError(f"{op} expects a positive {'upscale' if up else 'downscale'}_factor, but got {factor}")
    c, h, w = shape[-3:]
    if up:
        if c % (factor * factor):
            raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                               f"of upscale_factor, but input.size(-3)={c} is not divisible by {factor * factor}")
        return factor, (*shape[:-3], c // (factor * factor), h * factor, w * factor)
    if h % factor:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {factor}")
    if w % factor:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {factor}")
    return factor, (*shape[:-3], c * factor * factor, h // factor, w // factor)


def _pixel_shuffle_meta(input, upscale_factor):
    """Rearrange ``(*, C * r * r, H, W)`` into ``(*, C, H * r, W * r)``: sub-pixel convolution's shuffle.

    Output ``[..., c, h * r + i, w * r + j]`` is input ``[..., c * r * r + i * r + j, h, w]``.

    Args:
        input (Tensor): at least 3-D, channels (dim -3) divisible by ``r * r``; any dtype.
        upscale_factor (int): ``r``, positive.

    Returns:
        Tensor: ``(*, C, H * r, W * r)``.

    Raises:
        RuntimeError: for fewer than 3 dims, a non-positive factor or indivisible channels.
        TypeError: for a non-integer factor.

    Example:
        >>> import ember
        >>> ember.nn.functional.pixel_shuffle(ember.arange(4).reshape(4, 1, 1), 2)
        tensor([[[0, 1],
                 [2, 3]]])
    """
    return MetaArray(_shuffle_plan("pixel_shuffle", input, upscale_factor, True)[1], input._data.dtype)


def _pixel_shuffle_cpu(input, upscale_factor):
    r, out = _shuffle_plan("pixel_shuffle", input, upscale_factor, True)
    x = input._data
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    result = _array_namespace(x).empty((*lead, c // (r * r), h, r, w, r), x.dtype)
    for i in range(r):  # r * r strided copies with whole rows inside (numpy's copy of the transpose loops r at a time)
        for j in range(r):
            result[..., i, :, j] = y[..., i, j, :, :]
    return result.reshape(out)


def _pixel_shuffle_decomp(input, upscale_factor):
    r, out = _shuffle_plan("pixel_shuffle", input, upscale_factor, True)
    lead, (c, h, w) = input.shape[:-3], input.shape[-3:]
    k = len(lead)
    y = _E.reshape(input, (*lead, c // (r * r), r, r, h, w))
    y = _E.permute(y, (*range(k), k, k + 3, k + 1, k + 4, k + 2))
    return _E.reshape(_E.clone(y, memory_format=_contiguous()), out)


def _contiguous():
    from .creation import contiguous_format

    return contiguous_format


pixel_shuffle = defop("pixel_shuffle", _pixel_shuffle_meta, cpu=_pixel_shuffle_cpu, category=COMPOSITE,
                      decomposition=_pixel_shuffle_decomp, tags=_NN)


def _pixel_unshuffle_meta(input, downscale_factor):
    """Rearrange ``(*, C, H * r, W * r)`` into ``(*, C * r * r, H, W)``: the inverse of :func:`pixel_shuffle`.

    Args:
        input (Tensor): at least 3-D, H and W divisible by ``r``; any dtype.
        downscale_factor (int): ``r``, positive.

    Returns:
        Tensor: ``(*, C * r * r, H, W)``, empty inputs included (PyTorch's CPU kernel hands an empty
        input back unchanged: ``(0, 4, 4, 4)`` stays ``(0, 4, 4, 4)`` where its meta function and
        ember give ``(0, 16, 2, 2)`` for a factor of 2).

    Raises:
        RuntimeError: for fewer than 3 dims, a non-positive factor or indivisible H or W.
        TypeError: for a non-integer factor.

    Example:
        >>> import ember
        >>> ember.nn.functional.pixel_unshuffle(ember.arange(4).reshape(1, 2, 2), 2).flatten()
        tensor([0, 1, 2, 3])
    """
    return MetaArray(_shuffle_plan("pixel_unshuffle", input, downscale_factor, False)[1], input._data.dtype)


def _pixel_unshuffle_cpu(input, downscale_factor):
    r, out = _shuffle_plan("pixel_unshuffle", input, downscale_factor, False)
    x = input._data
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    result = _array_namespace(x).empty((*lead, c, r, r, h // r, w // r), x.dtype)
    for i in range(r):
        for j in range(r):
            result[..., i, j, :, :] = y[..., :, i, :, j]
    return result.reshape(out)


def _pixel_unshuffle_decomp(input, downscale_factor):
    r, out = _shuffle_plan("pixel_unshuffle", input, downscale_factor, False)
    lead, (c, h, w) = input.shape[:-3], input.shape[-3:]
    k = len(lead)
    y = _E.reshape(input, (*lead, c, h // r, r, w // r, r))
    y = _E.permute(y, (*range(k), k, k + 2, k + 4, k + 1, k + 3))
    return _E.reshape(_E.clone(y, memory_format=_contiguous()), out)


pixel_unshuffle = defop("pixel_unshuffle", _pixel_unshuffle_meta, cpu=_pixel_unshuffle_cpu, category=COMPOSITE,
                        decomposition=_pixel_unshuffle_decomp, tags=_NN)


# -- channel_shuffle ------------------------------------------------------------------------------------


@_memoized
def _channel_shuffle_plan(input, groups):
    """Check ``channel_shuffle``'s arguments; the number of channels per group."""
    _check_tensor("channel_shuffle", "input", input)
    groups = _int_arg("channel_shuffle", "groups", groups, 2)
    shape = input._data.shape
    if len(shape) <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {_fmt(shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if shape[1] % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {shape[1]} channels and {groups} "
                           "groups.")
    return groups, shape[1] // groups


def _channel_shuffle_meta(input, groups):
    """Interleave the channel groups of ``(N, C, *)``: ShuffleNet's channel shuffle.

    The channels, read as a ``(groups, C / groups)`` grid, are transposed: output channel
    ``j * groups + g`` is input channel ``g * (C / groups) + j``.

    Args:
        input (Tensor): ``(N, C, *)``, at least 3-D, ``C`` divisible by ``groups``; any dtype.
        groups (int): the number of groups, positive.

    Returns:
        Tensor: the same shape and dtype as ``input``.

    Raises:
        RuntimeError: for fewer than 3 dims, a non-positive ``groups`` or ``C`` not divisible by it.
        TypeError: for a non-integer ``groups``.

    References:
        Zhang et al., "ShuffleNet: An Extremely Efficient Convolutional Neural Network for Mobile
        Devices", CVPR 2018, https://arxiv.org/abs/1707.01083

    Example:
        >>> import ember
        >>> ember.nn.functional.channel_shuffle(ember.arange(6).reshape(1, 6, 1), 2).flatten()
        tensor([0, 3, 1, 4, 2, 5])
    """
    _channel_shuffle_plan(input, groups)
    return MetaArray(input._data.shape, input._data.dtype)


def _channel_shuffle_cpu(input, groups):
    g, k = _channel_shuffle_plan(input, groups)
    x = input._data
    n, rest = x.shape[0], x.shape[2:]
    return _array_namespace(x).ascontiguousarray(x.reshape(n, g, k, *rest).swapaxes(1, 2)).reshape(x.shape)


def _channel_shuffle_decomp(input, groups):
    g, k = _channel_shuffle_plan(input, groups)
    n, rest = input.shape[0], tuple(input.shape[2:])
    y = _E.transpose(_E.reshape(input, (n, g, k, *rest)), 1, 2)
    return _E.reshape(_E.clone(y, memory_format=_contiguous()), tuple(input.shape))


channel_shuffle = defop("channel_shuffle", _channel_shuffle_meta, cpu=_channel_shuffle_cpu, category=COMPOSITE,
                        decomposition=_channel_shuffle_decomp, tags=_NN)


# channel_shuffle's CPU kernel computes over its input's namespace: registered for "cuda", it runs there as on
# CPU (pixel_shuffle/pixel_unshuffle keep their decompositions on cuda).
channel_shuffle.register_kernel("cuda", channel_shuffle.kernels["cpu"])
