"""OpInfos of ember._ops.nn_interpolate: interpolate and the upsample ops.

The references are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._spatial import _FLOATS, _args, _errors, _tup, _wide, _z
from .nn_pooling import _ref_adaptive


def _source_scale(in_size, out_size, align_corners, scale):
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale else in_size / out_size


def _cubic(t, a):
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


def _resample_matrix(in_size, out_size, mode, align_corners, scale, antialias):
    """(out, in) weights of one dimension of ``interpolate``, from the definitions (float64)."""
    m = np.zeros((out_size, in_size))
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(1.0 / scale) if scale else np.float32(in_size) / np.float32(out_size)
        for o in range(out_size):
            position = np.float32(o) + (np.float32(0.5) if mode == "nearest-exact" else np.float32(0))
            m[o, min(int(np.floor(position * s)), in_size - 1)] = 1
        return m
    s = _source_scale(in_size, out_size, align_corners, scale)
    cubic = mode == "bicubic"
    if antialias:
        support = (2 if cubic else 1) * max(s, 1.0)
        for o in range(out_size):
            center = s * (o + 0.5)
            lo, hi = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), in_size)
            for i in range(lo, hi):
                x = (i - center + 0.5) / max(s, 1.0)
                m[o, i] = _cubic(x, -0.5) if cubic else max(0.0, 1 - abs(x))
            m[o] /= m[o].sum()
        return m
    for o in range(out_size):
        src = s * o if align_corners else s * (o + 0.5) - 0.5
        if not cubic:
            src = max(src, 0.0)
            i0 = min(int(np.floor(src)), in_size - 1)
            lam = min(max(src - i0, 0.0), 1.0)
            m[o, i0] += 1 - lam
            m[o, min(i0 + 1, in_size - 1)] += lam
        else:
            i0 = int(np.floor(src))
            t = src - i0
            for j in range(-1, 3):
                m[o, min(max(i0 + j, 0), in_size - 1)] += _cubic(t - j, -0.75)
    return m


def _ref_interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                     antialias=False):
    n = x.ndim - 2
    spatial = x.shape[2:]
    scales = None
    if size is not None:
        out = _tup(size, n)
    else:
        scales = _tup(scale_factor, n)
        out = tuple(math.floor(spatial[i] * scales[i]) for i in range(n))
        if recompute_scale_factor or mode == "area":
            scales = None
    if mode == "area":
        return _ref_adaptive(n, "mean", False)(x, out)
    result = _wide(x).astype(np.float64)
    for i in range(n):
        m = _resample_matrix(spatial[i], out[i], mode, align_corners, scales[i] if scales else None, antialias)
        result = np.moveaxis(np.tensordot(m, np.moveaxis(result, 2 + i, 0), axes=([1], [0])), 0, 2 + i)
    if x.dtype == np.uint8:
        result = np.clip(np.floor(result + 0.5), 0, 255)
    return result


_UINT8_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")


def _interpolate_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=0 if dtype is D.uint8 else -3, high=200 if dtype is D.uint8 else 3)
    cases = [
        ((2, 3, 5), {"scale_factor": 2}, "nearest 1-d"),
        ((1, 2, 4, 5), {"size": (3, 7)}, "nearest 2-d"),
        ((1, 2, 3, 4, 3), {"scale_factor": (1.5, 0.5, 2.0)}, "nearest 3-d"),
        ((1, 2, 5, 4), {"size": (7, 3), "mode": "nearest-exact"}, "nearest-exact"),
        ((2, 2, 5), {"size": 8, "mode": "linear", "align_corners": True}, "linear, align_corners"),
        ((1, 2, 4, 5), {"scale_factor": 1.5, "mode": "bilinear"}, "bilinear, scale_factor"),
        ((1, 2, 5, 4), {"size": (3, 6), "mode": "bilinear", "align_corners": True}, "bilinear, align_corners"),
        ((1, 2, 4, 5), {"size": (6, 3), "mode": "bicubic"}, "bicubic"),
        ((1, 2, 8, 6), {"size": (3, 4), "mode": "bilinear", "antialias": True}, "bilinear, antialias"),
        ((1, 2, 8, 6), {"size": (5, 2), "mode": "bicubic", "antialias": True}, "bicubic, antialias"),
        ((1, 2, 3, 4, 3), {"size": (4, 3, 5), "mode": "trilinear"}, "trilinear"),
        ((1, 2, 5, 7), {"size": (2, 3), "mode": "area"}, "area"),
        ((1, 2, 5), {"scale_factor": 1.7, "mode": "linear", "recompute_scale_factor": True}, "recompute_scale_factor"),
        ((0, 2, 4, 4), {"size": 3, "mode": "bilinear"}, "empty batch"),
    ]
    for shape, kwargs, name in cases:
        if dtype is D.uint8 and kwargs.get("mode", "nearest") not in _UINT8_MODES:
            continue
        if kwargs.get("antialias") and dtype in (D.float16, D.bfloat16):  # PyTorch has no such kernel
            continue
        yield SampleInput(make(shape, noncontiguous=name == "bilinear, scale_factor"), (), kwargs, name=name)


def _upsample_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((1, 2, 3, 4)), (), {"scale_factor": 2}, name="nearest")
    if dtype is not D.uint8 or opinfo.name == "upsample_bilinear":
        yield SampleInput(make((1, 2, 3, 4)), ((5, 6),), name="size")
    if opinfo.name == "upsample":
        yield SampleInput(make((1, 2, 3, 4)), ((5, 6), None, "bilinear", True), name="bilinear")


_INTERPOLATE_ERRORS = _errors(
    (_args(_z(1, 2, 4, 4)), {}, ValueError, "either size or scale_factor should be defined"),
    (_args(_z(1, 2, 4, 4)), {"size": 2, "scale_factor": 2}, ValueError, "only one of size or scale_factor"),
    (_args(_z(1, 2, 4, 4)), {"size": (2, 2, 2)}, ValueError, "Input and output must have the same number of spatial"),
    (_args(_z(1, 2, 4, 4)), {"size": 2, "align_corners": True}, ValueError, "align_corners option can only be set"),
    (_args(_z(1, 2, 4)), {"size": 2, "mode": "bilinear"}, NotImplementedError, "Got 3D input, but bilinear mode needs 4D"),
    (_args(_z(1, 2, 4, 4)), {"size": 2, "antialias": True}, ValueError, "Anti-alias option is restricted"),
    (_args(_z(1, 2, 4, 4)), {"size": 0}, RuntimeError, "Input and output sizes should be greater than 0"),
    (_args(_z(1, 2, 4, dtype=D.uint8)), {"size": 2, "mode": "linear"}, NotImplementedError, "not implemented for 'Byte'"),
    (_args(_z(1, 2, 4, 4, dtype=D.int64)), {"size": 2}, NotImplementedError, "not implemented for 'Long'"),
)


# -- registration -------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("interpolate", _interpolate_samples, dtypes=(D.uint8, *_FLOATS), ref=_ref_interpolate,
           error_inputs=_INTERPOLATE_ERRORS, torch_name="nn.functional.interpolate",
           tolerances={D.float32: (1e-5, 1e-5), D.uint8: (0, 1), D.float16: (4e-3, 1e-2), D.bfloat16: (1.6e-2, 2e-2)}),
    OpInfo("upsample", _upsample_samples, dtypes=(D.uint8, *_FLOATS), ref=_ref_interpolate,
           torch_name="nn.functional.upsample", tolerances={D.float32: (1e-5, 1e-5), D.uint8: (0, 1)}),
    OpInfo("upsample_nearest", _upsample_samples, dtypes=(D.uint8, *_FLOATS),
           ref=lambda x, size=None, scale_factor=None: _ref_interpolate(x, size, scale_factor),
           torch_name="nn.functional.upsample_nearest"),
    OpInfo("upsample_bilinear", _upsample_samples, dtypes=(D.uint8, *_FLOATS),
           ref=lambda x, size=None, scale_factor=None: _ref_interpolate(x, size, scale_factor, "bilinear", True),
           torch_name="nn.functional.upsample_bilinear", tolerances={D.float32: (1e-5, 1e-5), D.uint8: (0, 1)}),
]

for _info in _INFOS:
    register_opinfo(_info)
del _info
