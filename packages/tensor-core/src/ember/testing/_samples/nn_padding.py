"""OpInfos of ember._ops.nn_padding: pad.

The references are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._spatial import _args, _errors, _wide, _z


def _ref_pad(x, pad, mode="constant", value=None):
    result = _wide(x) if x.dtype.kind != "b" else x
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        size = result.shape[axis]
        result = np.take(result, np.arange(max(-lo, 0), size - max(-hi, 0)), axis=axis)  # crop first
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        if mode == "constant":
            fill = np.array(0 if value is None else value).astype(x.dtype).astype(result.dtype)
            result = np.pad(result, widths, mode="constant", constant_values=fill)
        else:
            result = np.pad(result, widths, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])
    return result


def _pad_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    scalar = True if dtype is D.bool else 2
    yield SampleInput(make((2, 3)), ((1, 2),), name="constant")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), ((1, 0, -1, 2, 1, 1),), {"value": scalar},
                      name="constant, value, cropping")
    yield SampleInput(make(()), ((),), name="zero-dim")
    yield SampleInput(make((0, 3)), ((1, 1, 1, 1),), name="empty")
    yield SampleInput(make((2, 3, 4)), ((2, 1),), {"mode": "circular"}, name="circular")
    yield SampleInput(make((1, 2, 3, 4)), ((-1, 2, 3, 0),), {"mode": "circular"}, name="circular, cropping")
    if dtype is not D.bool:
        yield SampleInput(make((2, 3, 4)), ((3, 1),), {"mode": "reflect"}, name="reflect")
        yield SampleInput(make((1, 2, 3, 4), noncontiguous=True), ((1, 2, 2, 0),), {"mode": "reflect"},
                          name="reflect 2-d")
        yield SampleInput(make((2, 2, 3, 3)), ((1, 1, 2, 0, 0, 3),), {"mode": "replicate"}, name="replicate 3-d")
        yield SampleInput(make((3, 4)), ((-1, 2),), {"mode": "replicate"}, name="replicate, cropping")


_PAD_ERRORS = _errors(
    (_args(_z(2, 3), (1,)), {}, RuntimeError, "Padding length must be divisible by 2"),
    (_args(_z(2, 3), (1, 1) * 3), {}, RuntimeError, "Padding length should be less than or equal to two times"),
    (_args(_z(2, 3), (1, 1)), {"mode": "wrap"}, NotImplementedError, "Unrecognised padding mode wrap"),
    (_args(_z(2, 3, 4), (4, 1)), {"mode": "reflect"}, RuntimeError, "Padding size should be less than the corresponding"),
    (_args(_z(2, 3, 4), (5, 1)), {"mode": "circular"}, RuntimeError, "wrapping around more than once"),
    (_args(_z(4), (1, 1)), {"mode": "replicate"}, NotImplementedError, "Padding size 2 is not supported for 1D input"),
    (_args(_z(2, 3, 4), (1, 1)), {"mode": "reflect", "value": 1.0}, RuntimeError, "doesn't take in value argument"),
    (_args(_z(2, 3, 4, dtype=D.bool), (1, 1)), {"mode": "reflect"}, NotImplementedError, "not implemented for 'Bool'"),
)


# -- registration -------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("pad", _pad_samples, dtypes=ALL_TYPES_AND_COMPLEX, ref=_ref_pad, error_inputs=_PAD_ERRORS,
           torch_name="nn.functional.pad"),
]

for _info in _INFOS:
    register_opinfo(_info)
del _info
