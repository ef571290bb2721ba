"""ember.nn.functional.max_unpool1d..max_unpool3d: the values put back at the indices a max pool returned.

Vectorised over the input's array namespace (numpy, or CuPy on the cuda device, where the CPU kernel is
also the CUDA kernel).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._nn_common import _NN_ONLY, _check_tensor, _fmt
from ._pointwise_helpers import _torch_name
from ._registry import defop
from ._spatial import _FLOATS, _LETTERS, _check_dtype, _empty_nonbatch_dim, _int_tuple, _memoized, _pool_param

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry


def _make_max_unpool(n):
    name = f"max_unpool{n}d"
    spatial = ", ".join(_LETTERS[n])

    @_memoized
    def plan(input, indices, kernel_size, stride, padding, output_size):
        _check_tensor(name, "input", input, 1)
        _check_tensor(name, "indices", indices, 2)
        shape = input._data.shape
        if len(shape) not in (n + 1, n + 2):
            raise RuntimeError(f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d Tensor, but got a tensor "
                               f"with {len(shape)} dimensions.")
        k = _pool_param(name, "kernel_size", kernel_size, 3, n)
        s = _pool_param(name, "stride", stride, 4, n, optional=True) or k
        p = _pool_param(name, "padding", padding, 5, n)
        spatial_in = shape[len(shape) - n:]
        default = [(spatial_in[i] - 1) * s[i] + k[i] - 2 * p[i] for i in range(n)]
        if output_size is None:
            out = tuple(default)
        else:
            out = list(_int_tuple(name, "output_size", output_size, 6))
            if len(out) == n + 2:
                out = out[2:]
            if len(out) != n:
                raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a "
                                 f"length of '{len(out)}'")
            for i in range(n):
                low, high = default[i] - s[i], default[i] + s[i]
                if not low < out[i] < high:
                    raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {i} must be between {low} and '
                                     f"{high})")
            out = tuple(out)
        if any(o < 0 for o in out):
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size={_fmt(out)}")
        if indices.dtype is not D.int64:
            raise RuntimeError(f"elements in indices should be type int64 but got: {_torch_name(indices.dtype)}")
        if indices._data.shape != shape:
            raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({_fmt(shape)}) but "
                               f"got indices tensor with shape: {_fmt(indices._data.shape)}")
        empty = _empty_nonbatch_dim(shape, n)
        if empty is not None:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but got "
                               f"{_fmt(shape)} with dimension {empty} being empty.")
        _check_dtype(name, input, _FLOATS)
        return out, shape[:len(shape) - n] + out

    def meta(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        return MetaArray(plan(input, indices, kernel_size, stride, padding, output_size)[1], input._data.dtype)

    def cpu(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        out, shape = plan(input, indices, kernel_size, stride, padding, output_size)
        x = input._data
        lead = x.shape[:x.ndim - n]
        planes, size = math.prod(lead), math.prod(out)
        xp = _array_namespace(x)
        result = xp.zeros((planes, size), x.dtype)
        idx = indices._data.reshape(planes, -1)
        if idx.size:
            bad = (idx < 0) | (idx >= size)
            if bad.any():  # on CUDA this reads back one bool: the argument check PyTorch's CPU kernel makes
                raise RuntimeError(f"Found an invalid max index: {idx[bad][0]} (output volumes are of size "
                                   f"{'x'.join(map(str, out))})")
            if xp is np:
                np.put_along_axis(result, idx, x.reshape(planes, -1), axis=1)
            else:
                result[xp.arange(planes)[:, None], idx] = x.reshape(planes, -1)
        return result.reshape(shape)

    meta.__name__ = name
    meta.__doc__ = f"""Partial inverse of ``max_pool{n}d``: maxima back at their indices, zeros elsewhere.

    Args:
        input (Tensor): (N, C, {spatial}) or (C, {spatial}) pooled values; floating.
        indices (Tensor): int64, same shape: flat indices into each output plane
            (``max_pool{n}d(..., return_indices=True)``'s second output).
        kernel_size (int or tuple[int]): the pooling window.
        stride (int or tuple[int], optional): default ``kernel_size``.
        padding (int or tuple[int]): Default 0.
        output_size (sequence of int, optional): the spatial size (optionally with
            N, C in front), within ``stride`` of the default
            ``(in - 1) * stride + kernel_size - 2 * padding``.

    Returns:
        Tensor: ``(…, *output_size)``.

    Raises:
        ValueError: for an ``output_size`` of a wrong length or out of range.
        RuntimeError: for wrong dims, non-int64 or mismatched indices, or an index
            outside the output plane.
        NotImplementedError: for non-floating dtypes.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2., 0.], [3., 4., 8., 7.]]])
        >>> values, indices = ember.nn.functional.max_pool2d(x, 2, return_indices=True)
        >>> ember.nn.functional.max_unpool2d(values, indices, 2)
        tensor([[[0., 5., 0., 0.],
                 [0., 0., 8., 0.]]])
"""
    return defop(name, meta, cpu=cpu, tags=_NN_ONLY)


max_unpool1d = _make_max_unpool(1)
max_unpool2d = _make_max_unpool(2)
max_unpool3d = _make_max_unpool(3)


# The CPU kernel computes over its input's namespace: registered for "cuda", it runs there as on CPU.
for _op in (max_unpool1d, max_unpool2d, max_unpool3d):
    _op.register_kernel("cuda", _op.kernels["cpu"])
del _op
