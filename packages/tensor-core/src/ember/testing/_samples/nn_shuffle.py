"""OpInfos of ember._ops.nn_shuffle: pixel_shuffle, pixel_unshuffle and channel_shuffle.

The references are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import itertools

import numpy as np

from .._opinfo import ALL_TYPES_AND_COMPLEX, OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._spatial import _args, _errors, _z


def _ref_pixel_shuffle(x, r):
    c, h, w = x.shape[-3:]
    out = np.zeros(x.shape[:-3] + (c // (r * r), h * r, w * r), x.dtype)
    for ch, i, j in itertools.product(range(c // (r * r)), range(r), range(r)):
        out[..., ch, i::r, j::r] = x[..., ch * r * r + i * r + j, :, :]
    return out


def _ref_channel_shuffle(x, groups):
    out = np.empty_like(x)
    per_group = x.shape[1] // groups
    for g, j in itertools.product(range(groups), range(per_group)):
        out[:, j * groups + g] = x[:, g * per_group + j]
    return out


def _ref_pixel_unshuffle(x, r):
    c, h, w = x.shape[-3:]
    out = np.zeros(x.shape[:-3] + (c * r * r, h // r, w // r), x.dtype)
    for ch, i, j in itertools.product(range(c), range(r), range(r)):
        out[..., ch * r * r + i * r + j, :, :] = x[..., ch, i::r, j::r]
    return out


def _shuffle_samples(up):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        if up:
            yield SampleInput(make((2, 8, 2, 3)), (2,), name="r=2")
            yield SampleInput(make((9, 2, 1), noncontiguous=True), (3,), name="unbatched, r=3")
            yield SampleInput(make((2, 1, 4, 2, 2)), (2,), name="extra batch dims")
        else:
            yield SampleInput(make((2, 2, 4, 6)), (2,), name="r=2")
            yield SampleInput(make((1, 6, 3), noncontiguous=True), (3,), name="unbatched, r=3")
        yield SampleInput(make((2, 3, 2, 2)), (1,), name="r=1")

    return gen


def _channel_shuffle_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 6, 3)), (3,), name="1-D, groups=3")
    yield SampleInput(make((1, 8, 2, 3), noncontiguous=True), (2,), name="2-D, groups=2")
    yield SampleInput(make((2, 4, 1, 2, 2)), (4,), name="3-D, groups=C")
    yield SampleInput(make((2, 5, 3)), (1,), name="groups=1")


_PIXEL_SHUFFLE_ERRORS = _errors(
    (_args(_z(2, 3), 2), {}, RuntimeError, "pixel_shuffle expects input to have at least 3 dimensions"),
    (_args(_z(2, 3, 2, 2), 2), {}, RuntimeError, "divisible by the square of upscale_factor"),
    (_args(_z(2, 4, 2, 2), 0), {}, RuntimeError, "pixel_shuffle expects a positive upscale_factor"),
    (_args(_z(2, 4, 2, 2), 2.0), {}, TypeError, "must be int"),
)


_CHANNEL_SHUFFLE_ERRORS = _errors(
    (_args(_z(2, 4), 2), {}, RuntimeError, "channel_shuffle expects input with > 2 dims"),
    (_args(_z(2, 4, 3), 0), {}, RuntimeError, "Number of groups to divide channels in must be positive"),
    (_args(_z(2, 3, 3), 2), {}, RuntimeError, "Number of channels must be divisible by groups. Got 3 channels"),
    (_args(_z(2, 4, 3), 2.0), {}, TypeError, "must be int"),
)


_PIXEL_UNSHUFFLE_ERRORS = _errors(
    (_args(_z(2, 3), 1), {}, RuntimeError, "pixel_unshuffle expects input to have at least 3 dimensions"),
    (_args(_z(2, 3, 5, 4), 2), {}, RuntimeError, "expects height to be divisible by downscale_factor"),
    (_args(_z(2, 3, 4, 5), 2), {}, RuntimeError, "expects width to be divisible by downscale_factor"),
    (_args(_z(2, 3, 4, 4), -1), {}, RuntimeError, "pixel_unshuffle expects a positive downscale_factor"),
)


# -- registration -------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("pixel_shuffle", _shuffle_samples(True), dtypes=ALL_TYPES_AND_COMPLEX, ref=_ref_pixel_shuffle,
           error_inputs=_PIXEL_SHUFFLE_ERRORS, torch_name="nn.functional.pixel_shuffle"),
    OpInfo("pixel_unshuffle", _shuffle_samples(False), dtypes=ALL_TYPES_AND_COMPLEX, ref=_ref_pixel_unshuffle,
           error_inputs=_PIXEL_UNSHUFFLE_ERRORS, torch_name="nn.functional.pixel_unshuffle"),
    OpInfo("channel_shuffle", _channel_shuffle_samples, dtypes=ALL_TYPES_AND_COMPLEX, ref=_ref_channel_shuffle,
           error_inputs=_CHANNEL_SHUFFLE_ERRORS, torch_name="nn.functional.channel_shuffle"),
]

for _info in _INFOS:
    register_opinfo(_info)
del _info
