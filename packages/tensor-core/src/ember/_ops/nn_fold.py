"""ember.nn.functional.unfold (im2col) and fold (col2im).

``F.unfold`` is registered as ``im2col``, since ``unfold`` is already the registry's name of
``Tensor.unfold`` (a view op); see :data:`NN_FUNCTIONAL_ALIASES`. im2col is a strided window view of the
padded input, copied once; fold is ember._C's col2im over the planes (the scatter-add that transposed
convolution shares). On the cuda device they run the kernels of :mod:`ember.cuda.kernels.conv`.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._nn_common import _NN_ONLY, _check_tensor, _fmt
from ._registry import defop
from ._spatial import _FLOATS, _check_dtype, _compute, _int_tuple, _memoized
from .nn_conv import _col2im, _im2col_windows

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: ``ember.nn.functional`` names that differ from the registry name: public name -> op name.
NN_FUNCTIONAL_ALIASES: dict[str, str] = {"unfold": "im2col"}


# -- unfold (im2col) and fold (col2im) -----------------------------------------------------------------

_FOLD_TYPES = (D.bool, *_FLOATS, D.complex64, D.complex128)


def _pair_param(name, value):
    values = _int_tuple("unfold", name, value, 2)
    if len(values) == 1:
        return values * 2
    if len(values) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(values)}")
    return values


def _block_params(kernel_size, dilation, padding, stride):
    k = _pair_param("kernel_size", kernel_size)
    d = _pair_param("dilation", dilation)
    p = _pair_param("padding", padding)
    s = _pair_param("stride", stride)
    if k[0] <= 0 or k[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {k[0]} kernel_width: "
                           f"{k[1]}")
    if d[0] <= 0 or d[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {d[0]} dilation_width: "
                           f"{d[1]}")
    if p[0] < 0 or p[1] < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} pad_width: {p[1]}")
    if s[0] <= 0 or s[1] <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {s[0]} stride_width: {s[1]}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    return tuple((size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))


@_memoized
def _im2col_plan(input, kernel_size, dilation, padding, stride):
    _check_tensor("unfold", "input", input)
    k, d, p, s = _block_params(kernel_size, dilation, padding, stride)
    shape = input._data.shape
    if len(shape) not in (3, 4) or 0 in shape[len(shape) - 3:]:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {_fmt(shape)}")
    _check_dtype("im2col_out_cpu", input, _FOLD_TYPES)
    blocks = _blocks(shape[-2:], k, d, p, s)
    if blocks[0] < 1 or blocks[1] < 1:
        raise RuntimeError(f"Given input with spatial size ({shape[-2]}, {shape[-1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), calculated shape of the array of "
                           f"sliding blocks as ({blocks[0]}, {blocks[1]}), but its components must be at least one.")
    out = (shape[-3] * k[0] * k[1], blocks[0] * blocks[1])
    return k, d, p, s, blocks, (out if len(shape) == 3 else (shape[0], *out))


def _im2col_meta(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks of a batched image into columns: PyTorch's ``F.unfold`` (im2col).

    Exported as ``ember.nn.functional.unfold``; the registry calls it ``im2col``
    because ``unfold`` is :meth:`Tensor.unfold` (a view op).

    Args:
        input (Tensor): (N, C, H, W) or unbatched (C, H, W); bool, floating or complex.
        kernel_size (int or tuple[int, int]): block size.
        dilation (int or tuple[int, int]): spacing of block elements. Default 1.
        padding (int or tuple[int, int]): zeros on both sides of H and W. Default 0.
        stride (int or tuple[int, int]): step between blocks. Default 1.

    Returns:
        Tensor: (N, C * kH * kW, L) (unbatched: (C * kH * kW, L)), where L counts the
        blocks; row ``c * kH * kW + i * kW + j`` holds element (i, j) of every block of channel c.

    Raises:
        RuntimeError: for wrong dims or empty non-batch dims, bad parameters, or no block fitting.
        NotImplementedError: for integer dtypes.

    Example:
        >>> import ember
        >>> x = ember.arange(9.).reshape(1, 1, 3, 3)
        >>> ember.nn.functional.unfold(x, 2)
        tensor([[[0., 1., 3., 4.],
                 [1., 2., 4., 5.],
                 [3., 4., 6., 7.],
                 [4., 5., 7., 8.]]])
    """
    return MetaArray(_im2col_plan(input, kernel_size, dilation, padding, stride)[-1], input._data.dtype)


def _im2col_cpu(input, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s, blocks, out = _im2col_plan(input, kernel_size, dilation, padding, stride)
    x = input._data
    if x.ndim == 3:
        x = x[None]
    windows = _im2col_windows(x, k, s, p, p, d, blocks)
    return np.array(windows, order="C").reshape(out)


im2col = defop("im2col", _im2col_meta, cpu=_im2col_cpu, tags=_NN_ONLY)


@_memoized
def _fold_plan(input, output_size, kernel_size, dilation, padding, stride):
    _check_tensor("fold", "input", input)
    out_size = _pair_param("output_size", output_size)
    k, d, p, s = _block_params(kernel_size, dilation, padding, stride)
    shape = input._data.shape
    if len(shape) not in (2, 3) or 0 in shape[len(shape) - 2:]:
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {_fmt(shape)}")
    _check_dtype("col2im_out_cpu", input, _FOLD_TYPES)
    rows, length = shape[-2:]
    if rows % (k[0] * k[1]):
        raise RuntimeError(f"Expected size of input's dimension {len(shape) - 2} to be divisible by the product of "
                           f"kernel_size, but got input.size({len(shape) - 2})={rows} and "
                           f"kernel_size=({k[0]}, {k[1]}).")
    blocks = _blocks(out_size, k, d, p, s)
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"Given output_size=({out_size[0]}, {out_size[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), expected "
                           f"size of input's dimension {len(shape) - 1} to match the calculated number of sliding "
                           f"blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size({len(shape) - 1})={length}.")
    if blocks[0] < 1 or blocks[1] < 1:
        raise RuntimeError(f"Given output_size=({out_size[0]}, {out_size[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), calculated "
                           f"shape of the array of sliding blocks as ({blocks[0]}, {blocks[1]}), but its components "
                           "must be at least one.")
    channels = rows // (k[0] * k[1])
    out = (channels, *out_size)
    return k, d, p, s, blocks, out_size, (out if len(shape) == 2 else (shape[0], *out))


def _fold_meta(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum columns of sliding blocks back into a batched image: PyTorch's ``F.fold`` (col2im).

    The adjoint of :func:`ember.nn.functional.unfold`: overlapping block elements add up.

    Args:
        input (Tensor): (N, C * kH * kW, L) or unbatched (C * kH * kW, L); bool, floating or complex.
        output_size (int or tuple[int, int]): (H, W) of the image.
        kernel_size (int or tuple[int, int]): block size.
        dilation, padding, stride (int or tuple[int, int]): as for ``unfold``.

    Returns:
        Tensor: (N, C, H, W) (unbatched: (C, H, W)).

    Raises:
        RuntimeError: for wrong dims, a row count not divisible by kH * kW, or an L
            that is not the number of blocks of ``output_size``.
        NotImplementedError: for integer dtypes.

    Example:
        >>> import ember
        >>> cols = ember.ones(1, 4, 4)
        >>> ember.nn.functional.fold(cols, (3, 3), 2)
        tensor([[[[1., 2., 1.],
                  [2., 4., 2.],
                  [1., 2., 1.]]]])
    """
    return MetaArray(_fold_plan(input, output_size, kernel_size, dilation, padding, stride)[-1], input._data.dtype)


def _fold_cpu(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s, blocks, out_size, out = _fold_plan(input, output_size, kernel_size, dilation, padding, stride)
    x = _compute(input._data)
    planes = math.prod(out[:-2])
    result = _col2im(x.reshape(planes, k[0] * k[1], blocks[0] * blocks[1]), planes, out_size, k, blocks, s, p, d)
    return result.reshape(out).astype(input._data.dtype, copy=False)


fold = defop("fold", _fold_meta, cpu=_fold_cpu, tags=_NN_ONLY)
