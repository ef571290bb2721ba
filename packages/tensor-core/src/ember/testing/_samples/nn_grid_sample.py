"""OpInfos of ember._ops.nn_grid_sample: grid_sample and affine_grid.

The references are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._spatial import _FLOATS, _args, _errors, _wide, _z
from .nn_interpolate import _cubic


def _ref_grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    n = x.ndim - 2
    # PyTorch computes float16/bfloat16 coordinates in that dtype: round after every step as it does
    half = grid.dtype.itemsize == 2

    def rnd(v):
        return float(np.array(v).astype(grid.dtype)) if half else v

    x, grid = _wide(x), _wide(grid)
    spatial = x.shape[2:]
    out_spatial = grid.shape[1:-1]
    result = np.zeros(x.shape[:2] + out_spatial)

    def coordinate(c, size):
        if align_corners:
            return rnd(rnd(rnd(c + 1) / 2) * (size - 1))
        return rnd(rnd(rnd(rnd(c + 1) * size) - 1) / 2)

    def padded(c, size):
        if padding_mode == "border":
            return min(max(c, 0.0), size - 1.0)
        if padding_mode == "reflection":
            low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
            span = high - low
            if span <= 0:
                return 0.0
            c = abs(c - low)
            flips, extra = divmod(c, span)
            c = low + extra if int(flips) % 2 == 0 else high - extra
            return min(max(c, 0.0), size - 1.0)
        return c

    def value(nb, idx):
        if all(0 <= idx[i] < spatial[i] for i in range(n)):
            return x[(nb, slice(None), *idx)]
        return 0.0

    for nb in range(x.shape[0]):
        for o in np.ndindex(*out_spatial):
            point = grid[(nb, *o)]
            coords = [coordinate(point[n - 1 - i], spatial[i]) for i in range(n)]
            if mode == "bicubic":
                base = [math.floor(c) for c in coords]
                acc = 0.0
                for taps in itertools.product(range(-1, 3), repeat=n):
                    weight = np.prod([_cubic(coords[i] - base[i] - taps[i], -0.75) for i in range(n)])
                    idx = [int(padded(float(base[i] + taps[i]), spatial[i])) for i in range(n)]
                    acc = acc + weight * value(nb, idx)
            else:
                coords = [padded(c, spatial[i]) for i, c in enumerate(coords)]
                if mode == "nearest":
                    acc = value(nb, [int(np.rint(c)) for c in coords])
                else:
                    acc = 0.0
                    base = [math.floor(c) for c in coords]
                    for corner in itertools.product(range(2), repeat=n):
                        weight = np.prod([(coords[i] - base[i]) if corner[i] else (1 - coords[i] + base[i])
                                          for i in range(n)])
                        acc = acc + weight * value(nb, [base[i] + corner[i] for i in range(n)])
            result[(nb, slice(None), *o)] = acc
    return result


def _ref_affine_grid(theta, size, align_corners=None):
    n = len(size) - 2
    spatial = size[2:]

    def base(steps):
        if steps <= 1:
            return np.zeros(1)
        r = np.linspace(-1, 1, steps)
        return r if align_corners else r * (steps - 1) / steps

    axes = [base(spatial[n - 1 - i]) for i in range(n)]  # x along the last dim
    points = np.stack(list(np.meshgrid(*reversed(axes), indexing="ij"))[::-1] + [np.ones(spatial)], axis=-1)
    return np.einsum("...j,nij->n...i", points, _wide(theta))


def _grid_sample_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    grid2 = ember.tensor([[[[-1.0, -1.0], [0.25, 0.5], [1.2, -0.3]], [[0.0, 0.0], [-0.9, 1.5], [0.7, 0.1]]]] * 2,
                         dtype=dtype, device=device)
    grid3 = ember.tensor([[[[[-1.0, -1.0, 0.0], [0.25, 0.5, -0.75]], [[1.2, -0.3, 0.5], [0.0, 0.25, 1.4]]]]],
                         dtype=dtype, device=device)
    yield SampleInput(make((2, 3, 4, 5)), (grid2,), {"align_corners": False}, name="bilinear")
    yield SampleInput(make((2, 2, 4, 5), noncontiguous=True), (grid2,),
                      {"mode": "nearest", "padding_mode": "border", "align_corners": True}, name="nearest, border")
    yield SampleInput(make((2, 2, 4, 5)), (grid2,), {"mode": "bicubic", "padding_mode": "reflection",
                                                     "align_corners": False}, name="bicubic, reflection")
    yield SampleInput(make((2, 2, 3, 4)), (grid2,), {"padding_mode": "reflection", "align_corners": True},
                      name="bilinear, reflection, align_corners")
    yield SampleInput(make((1, 2, 3, 4, 3)), (grid3,), {"padding_mode": "border", "align_corners": False},
                      name="trilinear 3-d")


def _affine_grid_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-1, high=1)
    yield SampleInput(make((2, 2, 3)), ((2, 3, 4, 5),), {"align_corners": False}, name="2-d")
    if dtype in (D.float32, D.float64):  # PyTorch fails on a unit size in float16/bfloat16 ("tensor_cpu")
        yield SampleInput(make((1, 2, 3)), ((1, 1, 1, 3),), {"align_corners": True}, name="2-d, a unit size")
    yield SampleInput(make((2, 3, 4)), ((2, 1, 2, 3, 4),), {"align_corners": True}, name="3-d")


_GRID_SAMPLE_ERRORS = _errors(
    (_args(_z(2, 3, 4, 4), _z(2, 3, 3, 2)), {"mode": "cubic", "align_corners": False}, ValueError,
     "expected mode to be 'bilinear', 'nearest' or 'bicubic'"),
    (_args(_z(2, 3, 4, 4), _z(2, 3, 3, 2)), {"padding_mode": "wrap", "align_corners": False}, ValueError,
     "expected padding_mode to be 'zeros', 'border', or 'reflection'"),
    (_args(_z(2, 3, 4, 4), _z(1, 3, 3, 2)), {"align_corners": False}, RuntimeError, "same batch size"),
    (_args(_z(2, 3, 4, 4), _z(2, 3, 3, 3)), {"align_corners": False}, RuntimeError, "to have size 2 in last dimension"),
    (_args(_z(1, 3, 4, 4, 4), _z(1, 2, 2, 2, 3)), {"mode": "bicubic", "align_corners": False}, RuntimeError,
     "bicubic interpolation only supports 4D input"),
    (_args(_z(2, 3, 4, 4, dtype=D.int64), _z(2, 3, 3, 2, dtype=D.int64)), {"align_corners": False}, NotImplementedError,
     "not implemented for 'Long'"),
)


_AFFINE_GRID_ERRORS = _errors(
    (_args(_z(2, 2, 3, dtype=D.int64), (2, 3, 4, 5)), {"align_corners": False}, ValueError,
     "Expected theta to have floating point type"),
    (_args(_z(2, 3, 4), (2, 3, 4, 5)), {"align_corners": False}, ValueError, "Expected a batch of 2D affine matrices"),
    (_args(_z(2, 2, 3), (2, 3, 4)), {"align_corners": False}, NotImplementedError, "affine_grid only supports 4D and 5D"),
    (_args(_z(2, 2, 3), (2, 3, 0, 4)), {"align_corners": False}, ValueError, "Expected non-zero, positive output size"),
)


# -- registration -------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("grid_sample", _grid_sample_samples, dtypes=_FLOATS, ref=_ref_grid_sample, error_inputs=_GRID_SAMPLE_ERRORS,
           torch_name="nn.functional.grid_sample",
           # bfloat16 coordinates (as PyTorch computes them) move sample points by up to 1/64 pixel
           tolerances={D.float32: (1e-5, 1e-5), D.float16: (4e-3, 2e-2), D.bfloat16: (5e-2, 0.4)}),
    OpInfo("affine_grid", _affine_grid_samples, dtypes=_FLOATS, ref=_ref_affine_grid, error_inputs=_AFFINE_GRID_ERRORS,
           torch_name="nn.functional.affine_grid", tolerances={D.float32: (1e-5, 1e-6)}),
]

for _info in _INFOS:
    register_opinfo(_info)
del _info
