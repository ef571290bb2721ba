"""Derivatives of ``affine_grid`` and ``grid_sample`` (``ember._ops.nn_grid_sample``), built from ember ops."""

from __future__ import annotations

import math

import numpy as np

import ember
from ember._ops import nn_grid_sample as _core  # the forward's plans

from .._table import derivative
from ._spatial import _const

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
        base[..., i] = _core._affine_base(spatial[n - 1 - i], bool(align_corners), ct).reshape(shape)
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
    n, align_corners, _ = _core._grid_sample_plan(input, grid, mode, padding_mode, align_corners)
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
