"""ember.nn.functional.grid_sample and affine_grid.

grid_sample's bilinear and nearest modes of float32/float64 run ember._C's kernel on CPU (one CUDA kernel
on the cuda device, :mod:`ember.cuda.kernels.grid_sample`); bicubic and half-precision coordinates take
the vectorised code over the input's array namespace. affine_grid is vectorised numpy.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _C
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._nn_common import _HALF_TYPES, _NN_ONLY, _check_tensor, _fmt
from ._pointwise_helpers import _torch_name
from ._registry import defop
from ._spatial import _FLOATS, _check_dtype, _compute, _int_tuple, _lift3, _memoized
from .nn_interpolate import _cubic_weights

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry


# -- grid_sample / affine_grid -----------------------------------------------------------------------

_GRID_MODES = ("bilinear", "nearest", "bicubic")
_GRID_PADDINGS = ("zeros", "border", "reflection")
_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


@_memoized
def _grid_sample_plan(input, grid, mode, padding_mode, align_corners):
    _check_tensor("grid_sample", "input", input, 1)
    _check_tensor("grid_sample", "grid", grid, 2)
    if mode not in _GRID_MODES:
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in _GRID_PADDINGS:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=4)
        align_corners = False
    x_shape, g_shape = input._data.shape, grid._data.shape
    if grid.dtype is not input.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{_torch_name(input.dtype)} and grid has {_torch_name(grid.dtype)}")
    if len(x_shape) not in (4, 5) or len(g_shape) != len(x_shape) or x_shape[0] != g_shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {_fmt(x_shape)} and grid with sizes {_fmt(g_shape)}")
    n = len(x_shape) - 2
    if g_shape[-1] != n:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {n} in last dimension, but got grid with "
                           f"sizes {_fmt(g_shape)}")
    for i in range(2, len(x_shape)):
        if x_shape[i] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {_fmt(x_shape)} with dimension {i} being empty")
    if mode == "bicubic" and n != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    _check_dtype(f"grid_sampler_{n}d_cpu_kernel_impl", input, _FLOATS)
    return n, bool(align_corners), (x_shape[0], x_shape[1], *g_shape[1:-1])


def _grid_sample_meta(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` at the normalised coordinates of ``grid``: PyTorch's ``F.grid_sample``.

    ``grid[n, ..., :]`` holds (x, y) (or (x, y, z)) in [-1, 1], x along W: -1 is
    the left edge (``align_corners=False``) or the centre of the left pixel
    (``align_corners=True``).

    Args:
        input (Tensor): (N, C, H, W) or (N, C, D, H, W); floating, non-empty spatial dims.
        grid (Tensor): (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3), same dtype.
        mode (str): ``"bilinear"`` (trilinear for 5-D), ``"nearest"`` (ties to even) or
            ``"bicubic"`` (4-D only). Default ``"bilinear"``.
        padding_mode (str): values outside the input: ``"zeros"``, ``"border"``
            (clamp coordinates) or ``"reflection"`` (mirror them). Default ``"zeros"``.
        align_corners (bool, optional): see above; None means False, with PyTorch's warning.

    Returns:
        Tensor: (N, C, H_out, W_out) or (N, C, D_out, H_out, W_out).

    Raises:
        ValueError: for an unknown mode or padding mode.
        RuntimeError: for mismatched dims, batch sizes, dtypes or coordinate counts,
            empty spatial dims, or bicubic on 5-D input.
        NotImplementedError: for non-floating dtypes.

    Example:
        >>> import ember
        >>> x = ember.tensor([[[[1., 2.], [3., 4.]]]])
        >>> grid = ember.tensor([[[[-1., -1.], [0., 0.], [1., 1.]]]])
        >>> ember.nn.functional.grid_sample(x, grid, align_corners=True)
        tensor([[[[1.0000, 2.5000, 4.0000]]]])
    """
    out = _grid_sample_plan(input, grid, mode, padding_mode, align_corners)[-1]
    return MetaArray(out, input._data.dtype)


def _reflect(coord, twice_low, twice_high):
    """Mirror coordinates into [twice_low / 2, twice_high / 2] (PyTorch's ``reflect_coordinates``)."""
    xp = _array_namespace(coord)
    if twice_low == twice_high:
        return xp.zeros_like(coord)
    low = coord.dtype.type(twice_low / 2)
    span = coord.dtype.type((twice_high - twice_low) / 2)
    coord = xp.abs(coord - low)
    extra = xp.fmod(coord, span)
    flips = xp.floor(coord / span)
    return xp.where(flips % 2 == 0, extra + low, span - extra + low)


def _pad_coordinates(coord, size, padding_mode, align_corners):
    """Source coordinates after ``border`` or ``reflection`` padding (``zeros`` leaves them)."""
    if padding_mode == "border":
        return coord.clip(0, size - 1)
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        return coord.clip(0, size - 1)
    return coord


#: The CUDA kernel of grid sampling (:mod:`ember.cuda.kernels.grid_sample`), installed by its ``register()`` when
#: the CUDA backend initialises; ``_grid_sample_cpu`` hands it CuPy arrays.
_device = None


def _grid_sample_cpu(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    n, align_corners, out = _grid_sample_plan(input, grid, mode, padding_mode, align_corners)
    x = _compute(input._data)
    N, C = x.shape[:2]
    spatial = x.shape[2:]
    # PyTorch computes float16/bfloat16 coordinates in that dtype; so do we, to pick the same pixels
    half_coordinates = input._data.dtype in _HALF_TYPES
    xp = _array_namespace(x)
    if mode != "bicubic" and not half_coordinates and (xp is np or _device._GRID_SAMPLE_RAW_KERNEL):
        x5 = xp.ascontiguousarray(x).reshape((N, C, *_lift3(spatial, 1)))
        points = xp.ascontiguousarray(_compute(grid._data).reshape(N, -1, n))
        mode_code, padding_code = 0 if mode == "bilinear" else 1, _GRID_PADDINGS.index(padding_mode)
        if xp is np:
            result = _C.grid_sample(x5, points, mode_code, padding_code, align_corners)
        else:
            result = _device._grid_sample_device(xp, x5, points, mode_code, padding_code, align_corners)
        return result.reshape(out).astype(input._data.dtype, copy=False)
    points = grid._data.reshape(N, -1, n)
    if not half_coordinates:
        points = _compute(points)
    flat = x.reshape(N, C, -1)
    ct = points.dtype.type

    # coords[i]: source coordinate along spatial dim i (D, H, W order); grid component n - 1 - i
    coords = []
    for i in range(n):
        size = spatial[i]
        c = points[..., n - 1 - i]
        if align_corners:
            c = (c + ct(1)) / ct(2) * ct(size - 1)
        else:
            c = ((c + ct(1)) * ct(size) - ct(1)) / ct(2)
        coords.append(c)

    def gather(indices, weight):
        """weight * input at integer coordinates (zero outside), for every channel: (N, C, M)."""
        inside = xp.ones(indices[0].shape, bool)
        flat_index = xp.zeros(indices[0].shape, np.int64)
        for i in range(n):
            idx = indices[i]
            inside &= (idx >= 0) & (idx < spatial[i])
            flat_index = flat_index * spatial[i] + idx.clip(0, spatial[i] - 1)
        every_channel = xp.broadcast_to(flat_index[:, None, :], flat.shape[:2] + flat_index.shape[1:])
        values = xp.take_along_axis(flat, every_channel, axis=2)
        # an outside tap's value is 0, but its weight still multiplies it: a non-finite coordinate's NaN weight
        # gives NaN, as PyTorch 2.13's bilinear and bicubic do (ember._C's bilinear kernel, and the CUDA one
        # that mirrors it, give 0 there instead)
        return xp.where(inside[:, None, :], values, 0) * weight.astype(x.dtype)[:, None, :]

    def index(c):
        """Integer coordinates, with non-finite ones outside."""
        c = c.astype(np.float64)
        return xp.where(xp.isfinite(c), c, -2).astype(np.int64)

    result = xp.zeros((N, C, points.shape[1]), x.dtype)
    with np.errstate(all="ignore"):
        if mode == "bicubic":
            base = [np.floor(c) for c in coords]
            weights = [_cubic_weights(c - b, ct(-0.75)) for c, b in zip(coords, base)]
            for a in range(4):
                for b in range(4):
                    idx = [index(_pad_coordinates(base[i] - ct(1) + ct(t), spatial[i], padding_mode, align_corners))
                           for i, t in zip(range(2), (a, b))]
                    result += gather(idx, weights[0][a] * weights[1][b])
        else:
            coords = [_pad_coordinates(c, spatial[i], padding_mode, align_corners) for i, c in enumerate(coords)]
            if mode == "nearest":
                result += gather([index(xp.rint(c)) for c in coords], xp.ones(coords[0].shape, x.dtype))
            else:
                low = [np.floor(c) for c in coords]
                frac = [(c - f).astype(x.dtype) for c, f in zip(coords, low)]
                low = [index(f) for f in low]
                for corner in np.ndindex(*(2,) * n):
                    weight = xp.ones(low[0].shape, x.dtype)
                    for i in range(n):
                        weight = weight * (frac[i] if corner[i] else x.dtype.type(1) - frac[i])
                    result += gather([low[i] + corner[i] for i in range(n)], weight)
    return result.reshape(out).astype(input._data.dtype, copy=False)


grid_sample = defop("grid_sample", _grid_sample_meta, cpu=_grid_sample_cpu, tags=_NN_ONLY)


@_memoized
def _affine_grid_plan(theta, size, align_corners):
    _check_tensor("affine_grid", "theta", theta, 1)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=4)
        align_corners = False
    size = _int_tuple("affine_grid", "size", size, 2)
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got ember.{theta.dtype.name}")
    shape = theta._data.shape
    if len(size) == 4:
        if len(shape) != 3 or shape[-2:] != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"ember.Size({list(shape)}).")
    elif len(size) == 5:
        if len(shape) != 3 or shape[-2:] != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"ember.Size({list(shape)}).")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if not (align_corners and min(size[2:]) == 1) and min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if shape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, "
                           f"{shape[2]}] but got: [{shape[0]}, {shape[2]}].")
    n = len(size) - 2
    return n, bool(align_corners), (size[0], *size[2:], n)


def _affine_grid_meta(theta, size, align_corners=None):
    """Sampling grids of a batch of affine maps, for :func:`grid_sample`: PyTorch's ``F.affine_grid``.

    Output point ``(x, y[, z])`` of the normalised [-1, 1] output grid maps to
    ``theta @ (x, y[, z], 1)``.

    Args:
        theta (Tensor): (N, 2, 3) for 2-D or (N, 3, 4) for 3-D maps; floating.
        size (sequence of int): the output image size (N, C, H, W) or (N, C, D, H, W).
        align_corners (bool, optional): as in ``grid_sample``; None means False, with PyTorch's warning.

    Returns:
        Tensor: (N, H, W, 2) or (N, D, H, W, 3), of ``theta``'s dtype.

    Raises:
        ValueError: for a non-floating ``theta``, a ``theta`` shape that doesn't fit
            ``size``, or non-positive sizes.
        NotImplementedError: for a ``size`` of length other than 4 or 5.
        RuntimeError: for a batch size that differs from ``theta``'s.

    Example:
        >>> import ember
        >>> theta = ember.tensor([[[1., 0., 0.], [0., 1., 0.]]])
        >>> ember.nn.functional.affine_grid(theta, (1, 1, 1, 2), align_corners=True)
        tensor([[[[-1.,  0.],
                  [ 1.,  0.]]]])
    """
    out = _affine_grid_plan(theta, size, align_corners)[-1]
    return MetaArray(out, theta._data.dtype)


def _affine_base(steps, align_corners, ct):
    """PyTorch's ``linspace_from_neg_one``: the normalised coordinates of ``steps`` pixels."""
    if steps <= 1:
        return np.zeros(1, ct)
    r = np.linspace(-1, 1, steps).astype(ct)
    if not align_corners:
        r = r * ct.type(steps - 1) / ct.type(steps)
    return r


def _affine_grid_cpu(theta, size, align_corners=None):
    n, align_corners, out = _affine_grid_plan(theta, size, align_corners)
    th = _compute(theta._data)
    ct = th.dtype
    spatial = out[1:-1]
    base = np.ones((*spatial, n + 1), ct)
    for i in range(n):  # component i runs along spatial dim n - 1 - i (x along W)
        shape = [1] * n
        shape[n - 1 - i] = spatial[n - 1 - i]
        base[..., i] = _affine_base(spatial[n - 1 - i], align_corners, ct).reshape(shape)
    xp = _array_namespace(th)
    base = base if xp is np else xp.asarray(base)  # built on the host from the size alone (metadata)
    grid = xp.matmul(base.reshape(1, -1, n + 1), th.transpose(0, 2, 1))
    return grid.reshape(out).astype(theta._data.dtype, copy=False)


affine_grid = defop("affine_grid", _affine_grid_meta, cpu=_affine_grid_cpu, tags=_NN_ONLY)


# The CPU kernels compute over their input's namespace (grid_sample's bilinear and nearest modes through
# _device on CuPy arrays): registered for "cuda", they run there as on CPU.
for _op in (grid_sample, affine_grid):
    _op.register_kernel("cuda", _op.kernels["cpu"])
del _op
