"""ember.nn.functional.interpolate and the upsample ops: nearest, (bi/tri)linear, bicubic and area resampling.

The separable passes are C++/OpenMP loops of ``ember._C`` over the planes (float32/float64; float16 and
bfloat16 compute in float32); index arithmetic and uint8 resampling are vectorised numpy. The kernels
compute over their input's array namespace, so they are also the ops' CUDA kernels (on CuPy arrays).
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._nn_common import _E, _F32, _NN_ONLY, _check_tensor, _fmt, _not_implemented
from ._registry import COMPOSITE, defop
from ._spatial import _C_FLOAT, _F64, _FLOATS, _LETTERS, _is_int, _memoized
from .nn_pooling import _adaptive_avg, _adaptive_plan

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry


# -- interpolate / upsample ------------------------------------------------------------------------------

_INTERP_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_MODE_DIMS = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
_UINT8_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")


@_memoized
def _interpolate_plan(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    """Check an interpolate call as PyTorch's ``F.interpolate`` does.

    Returns (mode, spatial dims, output sizes, scale factors or None, align_corners, antialias).
    """
    _check_tensor("interpolate", "input", input)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    shape = input._data.shape
    n = len(shape) - 2
    scales = None
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (tuple, list)):
            if len(size) != n:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(shape[2:])} and output size of {size}. Please "
                                 "provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            if not all(_is_int(v) for v in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, "
                                f"int], but got size with types {[type(v) for v in size]}")
            out = tuple(operator.index(v) for v in size)
        else:
            if not _is_int(size):
                raise TypeError(f"interpolate(): size must be an int or a tuple of ints, not {type(size).__name__}")
            out = (operator.index(size),) * max(n, 0)
    elif scale_factor is not None:
        out = None
        if isinstance(scale_factor, (tuple, list)):
            if len(scale_factor) != n:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(shape[2:])} and scale_factor of shape "
                                 f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 "scale_factor in (s1, s2, ...,sK) format.")
            scales = tuple(scale_factor)
        else:
            scales = (scale_factor,) * max(n, 0)
        for v in scales:
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError(f"interpolate(): scale_factor must be a float or a tuple of floats, not "
                                f"{type(v).__name__}")
        scales = tuple(float(v) for v in scales)
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out is None:
        recompute_scale_factor = True
    if recompute_scale_factor and scales is not None:
        out = tuple(int(shape[2 + i] * scales[i]) for i in range(n))
        scales = None
    if antialias and not (mode in ("bilinear", "bicubic") and len(shape) == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D "
                         "tensor as input")
    if mode in _MODE_DIMS and len(shape) in (3, 4, 5) and len(shape) != _MODE_DIMS[mode]:
        if mode != "bicubic":
            raise NotImplementedError(f"Got {len(shape)}D input, but {mode} mode needs {_MODE_DIMS[mode]}D input")
    if mode not in _INTERP_MODES or len(shape) not in (3, 4, 5) or (mode == "bicubic" and len(shape) != 4):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {len(shape)}D) for "
                                  "the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | "
                                  f"nearest-exact (got {mode})")
    if out is None:
        out = tuple(math.floor(shape[2 + i] * scales[i]) for i in range(n))
    if mode == "area":
        kernel = f"adaptive_avg_pool{n}d"
        _adaptive_plan(kernel, n, input, out)
        return mode, n, out, None, None, False
    if 0 in shape[1:2]:
        raise RuntimeError(f"Non-empty {n + 2}D data tensor expected but got a tensor with sizes {_fmt(shape)}")
    spatial = shape[2:]
    if any(v <= 0 for v in spatial) or any(v <= 0 for v in out):
        names = _LETTERS[n] if n > 1 else ("W",)
        given = ", ".join(f"{c}: {v}" for c, v in zip(names, spatial))
        wanted = ", ".join(f"{c}: {v}" for c, v in zip(names, out))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({given}) output "
                           f"({wanted})")
    allowed = (D.uint8, *_FLOATS) if mode in _UINT8_MODES else _FLOATS
    if antialias and input.dtype in (D.float16, D.bfloat16):
        raise _not_implemented("compute_index_ranges_weights", input.dtype)
    if input.dtype not in allowed:
        kind = {"nearest-exact": "_upsample_nearest_exact", "linear": "upsample_linear"}.get(mode, f"upsample_{mode}")
        raise _not_implemented(f"{kind}{n}d", input.dtype)
    return mode, n, out, scales, align_corners, bool(antialias)


def _interpolate_meta(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                      recompute_scale_factor=None, antialias=False):
    """Resize ``input`` ``(N, C, *spatial)`` by interpolation: PyTorch's ``F.interpolate``.

    Args:
        input (Tensor): (N, C, L), (N, C, H, W) or (N, C, D, H, W); floating
            (uint8 too for nearest, nearest-exact, bilinear and bicubic).
        size (int or tuple[int], optional): the output's spatial size.
        scale_factor (float or tuple[float], optional): multiplier of the spatial
            size (output ``floor(in * scale_factor)``); exactly one of ``size`` and
            ``scale_factor``.
        mode (str): ``"nearest"`` (PyTorch's legacy ``floor(out_index * in / out)``),
            ``"nearest-exact"`` (pixel centres), ``"linear"`` (3-D input),
            ``"bilinear"``/``"bicubic"`` (4-D), ``"trilinear"`` (5-D) or ``"area"``
            (adaptive average pooling). Default ``"nearest"``.
        align_corners (bool, optional): for the linear and cubic modes: map corner
            pixel centres onto each other (True) or pixel edges (False, the default).
        recompute_scale_factor (bool, optional): compute the output size from
            ``scale_factor``, then sample with the ratio of sizes instead of
            ``scale_factor``.
        antialias (bool): low-pass filter when downsampling (bilinear, bicubic, 4-D; not
            float16/bfloat16, as in PyTorch). Default False.

    Returns:
        Tensor: ``(N, C, *output_size)``, of ``input``'s dtype (uint8 rounds and saturates).

    Raises:
        ValueError: for both or neither of ``size``/``scale_factor``, lengths that do
            not match the spatial dims, ``align_corners`` with a non-interpolating mode,
            or ``antialias`` with another mode.
        NotImplementedError: for a mode that doesn't fit the input's dims, an unknown
            mode, or an unsupported dtype.
        RuntimeError: for empty input or output sizes.

    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 2., 4.]]])
        >>> ember.nn.functional.interpolate(x, scale_factor=2)
        tensor([[[1., 1., 2., 2., 4., 4.]]])
        >>> ember.nn.functional.interpolate(x, size=5, mode="linear", align_corners=True)
        tensor([[[1.0000, 1.5000, 2.0000, 3.0000, 4.0000]]])
    """
    mode, n, out, *_ = _interpolate_plan(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                                         antialias)
    return MetaArray(input._data.shape[:2] + out, input._data.dtype)


def _source_scale(in_size, out_size, align_corners, scale, ct):
    """PyTorch's ``area_pixel_compute_scale`` in the compute type ``ct``."""
    if align_corners:
        return ct.type(in_size - 1) / ct.type(out_size - 1) if out_size > 1 else ct.type(0)
    if scale is not None and scale > 0:
        return ct.type(1.0 / scale)
    return ct.type(in_size) / ct.type(out_size)


def _nearest_index(in_size, out_size, scale, exact):
    if not exact and out_size == in_size:
        return np.arange(out_size)
    if not exact and out_size == 2 * in_size:
        return np.arange(out_size) >> 1
    s = _source_scale(in_size, out_size, False, scale, _F32)
    position = np.arange(out_size, dtype=_F32)
    if exact:
        position = position + _F32.type(0.5)
    return np.minimum(np.floor(position * s).astype(np.int64), in_size - 1)


def _cubic_weights(t, a):
    """Weights of the 4 taps at offsets -1..2 around a point ``t`` in [0, 1) past the first (Keys' cubic)."""
    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _interp_taps(in_size, out_size, scale, align_corners, cubic, ct):
    """Indices (out, T) and weights (out, T) of linear (T=2) or cubic (T=4) interpolation along one dim."""
    s = _source_scale(in_size, out_size, align_corners, scale, ct)
    dst = np.arange(out_size, dtype=ct)
    if align_corners:
        src = s * dst
    else:
        src = s * (dst + ct.type(0.5)) - ct.type(0.5)
        if not cubic:
            src = np.maximum(src, ct.type(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0.astype(ct), 0, 1).astype(ct)
    if cubic:
        idx = np.stack([np.clip(i0 - 1 + j, 0, in_size - 1) for j in range(4)], axis=1)
        return idx, np.stack(_cubic_weights(lam, ct.type(-0.75)), axis=1).astype(ct)
    i1 = i0 + (i0 < in_size - 1)
    return np.stack([i0, i1], axis=1), np.stack([1 - lam, lam], axis=1).astype(ct)


def _separable_taps(in_size, out_size, scale, align_corners, cubic, antialias, delta=0.0):
    """Indices and float64 weights (out, T) of PyTorch's separable (PIL-style) resampling along one dim.

    With ``antialias`` the filter widens by the downscaling factor (a low-pass);
    the bicubic filter is Keys' with a = -0.5 then, -0.75 otherwise. Taps outside
    the input are dropped and the rest renormalised. ``delta`` is 0.5 for PyTorch's
    uint8 kernels with ``align_corners``.
    """
    s = float(_source_scale(in_size, out_size, align_corners, scale, _F64))
    interp_size = 4 if cubic else 2
    wide = antialias and s >= 1
    support = interp_size / 2 * s if wide else interp_size / 2
    invscale = 1 / s if wide else 1.0
    taps = int(math.ceil(support)) * 2 + 1
    center = s * (np.arange(out_size) + 0.5 - delta)
    xmin = np.maximum(np.trunc(center - support + 0.5 + delta).astype(np.int64), 0)
    xsize = np.minimum(np.trunc(center + support + 0.5 + delta).astype(np.int64), in_size) - xmin
    j = np.arange(taps)
    x = np.abs((j[None, :] + xmin[:, None] - center[:, None] + 0.5 - delta) * invscale)
    if cubic:
        a = -0.5 if antialias else -0.75
        w = np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1, np.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, 0.0))
    else:
        w = np.maximum(0.0, 1 - x)
    w = np.where(j[None, :] < xsize[:, None], w, 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w)
    idx = np.minimum(xmin[:, None] + j[None, :], in_size - 1)
    return idx, w


def _uint8_pass(x, axis, idx, w):
    """One separable pass over uint8 data as PyTorch's uint8 kernels: int16 weights, rounding, saturation."""
    max_weight = float(np.abs(w).max()) if w.size else 0.0
    precision = 0
    while precision < 22 and int(0.5 + max_weight * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    scaled = w * (1 << precision)
    wi = np.where(scaled < 0, scaled - 0.5, scaled + 0.5).astype(np.int64)
    acc = _apply_taps(x.astype(np.int64), axis, idx, wi)
    return np.clip((acc + (1 << (precision - 1) if precision else 0)) >> precision, 0, 255).astype(np.uint8)


def _apply_taps(x, axis, idx, w):
    """Sum over taps t of ``take(x, idx[:, t], axis) * w[:, t]`` (weights broadcast along ``axis``).

    ``idx`` and ``w`` are host (numpy) arrays computed from shapes; for a CuPy ``x`` they are uploaded
    and every tap is gathered in one ``take``, weighted and summed over the tap axis.
    """
    if type(x) is not np.ndarray:
        xp = _array_namespace(x)
        out, taps = idx.shape
        picked = xp.take(x, xp.asarray(idx.reshape(-1)), axis=axis)
        picked = picked.reshape(x.shape[:axis] + (out, taps) + x.shape[axis + 1:])
        weights = xp.asarray(w).reshape((out, taps) + (1,) * (x.ndim - axis - 1))
        return (picked * weights).sum(axis=axis + 1)
    if x.dtype in _C_FLOAT and w.dtype == x.dtype:
        outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
        result = _C.resample_axis(np.ascontiguousarray(x).reshape(outer, x.shape[axis], inner),
                                  np.ascontiguousarray(idx, np.int64), np.ascontiguousarray(w))
        return result.reshape(x.shape[:axis] + (idx.shape[0],) + x.shape[axis + 1:])
    shape = (-1,) + (1,) * (x.ndim - axis - 1)
    result = None
    for t in range(idx.shape[1]):
        term = np.take(x, idx[:, t], axis=axis) * w[:, t].reshape(shape)
        result = term if result is None else result + term
    return result


def _interpolate_cpu(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                     recompute_scale_factor=None, antialias=False):
    mode, n, out, scales, align_corners, antialias = _interpolate_plan(
        input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    x = input._data
    if mode == "area":
        return _adaptive_avg(x, n, out, x.shape[:2] + out)
    xp = _array_namespace(x)
    if x.shape[0] == 0:
        return xp.zeros(x.shape[:2] + out, x.dtype)
    # The passes below allocate per-axis index arrays and partial results before the output. Ask for
    # the output's memory first (untouched, then freed), so an output that cannot exist fails here
    # rather than after a terabyte-sized intermediate that an overcommitting host hands out.
    xp.empty(x.shape[:2] + out, x.dtype)
    if mode in ("nearest", "nearest-exact"):
        for i in range(n):
            scale = scales[i] if scales is not None else None
            index = _nearest_index(x.shape[2 + i], out[i], scale, mode == "nearest-exact")  # host metadata
            x = xp.take(x, index if xp is np else xp.asarray(index), axis=2 + i)
        return x.copy() if x is input._data else x
    cubic = mode == "bicubic"
    if x.dtype == np.uint8:
        delta = 0.5 if align_corners and not antialias else 0.0
        for i in reversed(range(n)):
            scale = scales[i] if scales is not None else None
            if cubic and not antialias:  # PyTorch's uint8 bicubic clamps taps at the border, like the float one
                idx, w = _interp_taps(x.shape[2 + i], out[i], scale, align_corners, True, _F64)
            else:
                idx, w = _separable_taps(x.shape[2 + i], out[i], scale, align_corners, cubic, antialias, delta)
            x = _uint8_pass(x, 2 + i, idx, w)
        return x
    dtype = x.dtype
    ct = _F64 if dtype == _F64 else _F32
    x = x.astype(ct)
    with np.errstate(all="ignore"):
        for i in reversed(range(n)):
            scale = scales[i] if scales is not None else None
            if antialias:
                idx, w = _separable_taps(x.shape[2 + i], out[i], scale, align_corners, cubic, True)
                w = w.astype(ct)
            else:
                idx, w = _interp_taps(x.shape[2 + i], out[i], scale, align_corners, cubic, ct)
            x = _apply_taps(x, 2 + i, idx, w)
    return x.astype(dtype)


interpolate = defop("interpolate", _interpolate_meta, cpu=_interpolate_cpu, tags=_NN_ONLY)


def _upsample_meta(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`ember.nn.functional.interpolate` (warns, as PyTorch's ``F.upsample``).

    Args:
        input, size, scale_factor, mode, align_corners: as for ``interpolate``.

    Returns:
        Tensor: ``interpolate(input, size, scale_factor, mode, align_corners)``.

    Raises:
        ValueError, NotImplementedError, RuntimeError: as ``interpolate``.
    """
    return _interpolate_meta(input, size, scale_factor, mode, align_corners)


def _warn_upsample(name):
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=4)


def _upsample_cpu(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _warn_upsample("upsample")
    return _interpolate_cpu(input, size, scale_factor, mode, align_corners)


def _upsample_decomp(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _warn_upsample("upsample")
    return _E.interpolate(input, size, scale_factor, mode, align_corners)


upsample = defop("upsample", _upsample_meta, cpu=_upsample_cpu, category=COMPOSITE, decomposition=_upsample_decomp,
                 tags=_NN_ONLY)


def _upsample_nearest_meta(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode="nearest")`` (warns, as PyTorch).

    Args:
        input, size, scale_factor: as for ``interpolate``.

    Returns:
        Tensor: the nearest-neighbour resize.

    Raises:
        ValueError, NotImplementedError, RuntimeError: as ``interpolate``.
    """
    return _interpolate_meta(input, size, scale_factor, "nearest")


def _upsample_nearest_cpu(input, size=None, scale_factor=None):
    _warn_upsample("upsample_nearest")
    return _interpolate_cpu(input, size, scale_factor, "nearest")


def _upsample_nearest_decomp(input, size=None, scale_factor=None):
    _warn_upsample("upsample_nearest")
    return _E.interpolate(input, size, scale_factor, "nearest")


upsample_nearest = defop("upsample_nearest", _upsample_nearest_meta, cpu=_upsample_nearest_cpu, category=COMPOSITE,
                         decomposition=_upsample_nearest_decomp, tags=_NN_ONLY)


def _upsample_bilinear_meta(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)`` (warns).

    Args:
        input, size, scale_factor: as for ``interpolate``; ``input`` is 4-D.

    Returns:
        Tensor: the bilinear resize with aligned corners.

    Raises:
        ValueError, NotImplementedError, RuntimeError: as ``interpolate``.
    """
    return _interpolate_meta(input, size, scale_factor, "bilinear", True)


def _upsample_bilinear_cpu(input, size=None, scale_factor=None):
    _warn_upsample("upsample_bilinear")
    return _interpolate_cpu(input, size, scale_factor, "bilinear", True)


def _upsample_bilinear_decomp(input, size=None, scale_factor=None):
    _warn_upsample("upsample_bilinear")
    return _E.interpolate(input, size, scale_factor, "bilinear", True)


upsample_bilinear = defop("upsample_bilinear", _upsample_bilinear_meta, cpu=_upsample_bilinear_cpu,
                          category=COMPOSITE, decomposition=_upsample_bilinear_decomp, tags=_NN_ONLY)



# The CPU kernels compute over their input's namespace (index maps built on the host and uploaded):
# registered for "cuda", they run there as on CPU, composites included.
for _op in (interpolate, upsample, upsample_nearest, upsample_bilinear):
    _op.register_kernel("cuda", _op.kernels["cpu"])
del _op
