"""Derivative of ``interpolate`` (``ember._ops.nn_interpolate``): ``index_add`` of ``grad`` along each dim, at
the positions and with the weights the forward read (from the forward's own plan and taps); the upsample
ops are differentiated through their decomposition."""

from __future__ import annotations

import numpy as np

import ember
from ember._ops import nn_interpolate as _core  # the forward's plans

from .._table import derivative, through_decomposition
from ._spatial import _FLOAT64, _compute_dtype, _const
from .nn_pooling import _adaptive_avg_adjoint

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
    mode, n, out, scales, align_corners, antialias = _core._interpolate_plan(
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
            idx = _core._nearest_index(in_sizes[i], out[i], scale, mode == "nearest-exact")
            g = _take_adjoint(g, 2 + i, idx, in_sizes[i])
        return g
    cubic = mode == "bicubic"
    ct = _FLOAT64 if input._data.dtype == _FLOAT64 else np.dtype(np.float32)
    for i in range(n):
        scale = scales[i] if scales is not None else None
        if antialias:
            idx, w = _core._separable_taps(in_sizes[i], out[i], scale, align_corners, cubic, True)
        else:
            idx, w = _core._interp_taps(in_sizes[i], out[i], scale, align_corners, cubic, ct)
        g = _taps_adjoint(g, 2 + i, idx, w, in_sizes[i])
    return g


derivative("interpolate", input=_interpolate_grad)
through_decomposition("upsample", "upsample_nearest", "upsample_bilinear")
