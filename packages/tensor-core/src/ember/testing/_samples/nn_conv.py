"""OpInfos of ember._ops.nn_conv: convolution, conv{1,2,3}d and conv_transpose{1,2,3}d.

The references are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._spatial import _FLOATS, _SUM_TOLERANCES, _args, _errors, _tup, _wide, _z

_INTS = (D.uint8, D.int8, D.int16, D.int32, D.int64)
_CONV_TYPES = tuple(d for d in ALL_TYPES_AND_COMPLEX if d is not D.bool)

_CONV_TYPES = tuple(d for d in ALL_TYPES_AND_COMPLEX if d is not D.bool)
_CONV_TRANSPOSE_TYPES = (D.int64, *_FLOATS, D.complex64, D.complex128)


def _ref_conv(n):
    def ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
        unbatched = x.ndim == n + 1
        x, w = _wide(x), _wide(w)
        if unbatched:
            x = x[None]
        k = w.shape[2:]
        s, d = _tup(stride, n), _tup(dilation, n)
        if padding == "valid":
            lo = hi = (0,) * n
        elif padding == "same":
            lo = tuple(d[i] * (k[i] - 1) // 2 for i in range(n))
            hi = tuple(d[i] * (k[i] - 1) - lo[i] for i in range(n))
        else:
            lo = hi = _tup(padding, n)
        xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)))
        out = tuple((xp.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n))
        out_channels, cpg = w.shape[:2]
        opg = out_channels // groups
        result = np.zeros((x.shape[0], out_channels, *out), np.result_type(x, w))
        for o in range(out_channels):
            g = o // opg
            for offset in np.ndindex(*k):
                window = tuple(slice(offset[i] * d[i], offset[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i]) for i in range(n))
                patch = xp[(slice(None), slice(g * cpg, (g + 1) * cpg), *window)]
                result[:, o] += np.tensordot(w[(o, slice(None), *offset)], patch, axes=([0], [1]))
        if b is not None:
            result += _wide(b).reshape((-1,) + (1,) * n)
        return result[0] if unbatched else result

    return ref


def _ref_conv_transpose(n):
    def ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        unbatched = x.ndim == n + 1
        x, w = _wide(x), _wide(w)
        if unbatched:
            x = x[None]
        s, p, op, d = _tup(stride, n), _tup(padding, n), _tup(output_padding, n), _tup(dilation, n)
        cin, opg = w.shape[:2]
        cpg = cin // groups
        k, blocks = w.shape[2:], x.shape[2:]
        out = tuple((blocks[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(n))
        full = tuple(max((blocks[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1, p[i] + out[i]) for i in range(n))
        buffer = np.zeros((x.shape[0], opg * groups, *full), np.result_type(x, w))
        for c in range(cin):
            g = c // cpg
            for o in range(opg):
                for offset in np.ndindex(*k):
                    target = tuple(slice(offset[i] * d[i], offset[i] * d[i] + (blocks[i] - 1) * s[i] + 1, s[i])
                                   for i in range(n))
                    buffer[(slice(None), g * opg + o, *target)] += x[:, c] * w[(c, o, *offset)]
        result = buffer[(slice(None), slice(None), *(slice(p[i], p[i] + out[i]) for i in range(n)))]
        if b is not None:
            result = result + _wide(b).reshape((-1,) + (1,) * n)
        return result[0] if unbatched else result

    return ref


def _ref_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    n = w.ndim - 2
    if transposed:
        return _ref_conv_transpose(n)(x, w, b, stride, padding, output_padding, groups, dilation)
    return _ref_conv(n)(x, w, b, stride, padding, dilation, groups)


def _conv_samples(n):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad, low=-3, high=3)
        spatial = (6, 5, 4)[:n]
        k = (3, 2, 2)[:n]
        dilated = dtype not in _INTS or dtype is D.int64  # PyTorch has no dilated kernel for the small integers
        yield SampleInput(make((2, 4, *spatial)), (make((6, 4, *k)), make((6,))), name="bias")
        yield SampleInput(make((2, 4, *spatial), noncontiguous=True), (make((6, 2, *k)),),
                          {"stride": 2, "padding": 1, "groups": 2}, name="groups, stride, padding, noncontiguous")
        yield SampleInput(make((4, *spatial)), (make((3, 4, *k)),), {"padding": "same"}, name="unbatched, same")
        yield SampleInput(make((1, 3, *spatial)), (make((3, 1, *(2,) * n)),),
                          {"padding": "same" if dilated else "valid", "groups": 3}, name="depthwise, even kernel")
        if dilated:
            yield SampleInput(make((1, 2, *spatial)), (make((2, 2, *(2,) * n)), None),
                              {"dilation": 2, "padding": (1,) * n}, name="dilation")
        yield SampleInput(make((0, 2, *spatial)), (make((3, 2, *k)),), name="empty batch")
        yield SampleInput(make((1, 2, *spatial)), (make((3, 2, *(1,) * n)),), {"padding": "valid"}, name="1x1")
        if n == 2:
            x = make((2, 5, 4, 3)).transpose(2, 3)
            yield SampleInput(x, (make((2, 5, 2, 2)),), {"stride": (1, 2)}, name="transposed view")

    return gen


def _conv_transpose_samples(n):
    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad, low=-3, high=3)
        spatial = (4, 3, 3)[:n]
        k = (3, 2, 2)[:n]
        yield SampleInput(make((2, 4, *spatial)), (make((4, 3, *k)), make((3,))), name="bias")
        yield SampleInput(make((2, 4, *spatial), noncontiguous=True), (make((4, 2, *k)),),
                          {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
                          name="groups, stride, output_padding")
        yield SampleInput(make((4, *spatial)), (make((4, 2, *k)),), {"dilation": 2, "stride": (2,) * n},
                          name="unbatched, dilation")
        yield SampleInput(make((0, 2, *spatial)), (make((2, 3, *k)),), name="empty batch")

    return gen


def _convolution_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=-3, high=3)
    yield SampleInput(make((2, 4, 5)), (make((6, 2, 3)), make((6,)), [2], [1], [1], False, [0], 2), name="1-d")
    yield SampleInput(make((1, 2, 4, 5)), (make((3, 2, 2, 3)), None, [1, 2], [0, 1], [1, 1], False, [0, 0], 1),
                      name="2-d")
    if dtype in _CONV_TRANSPOSE_TYPES:
        yield SampleInput(make((1, 2, 3, 3)), (make((2, 3, 2, 2)), make((3,)), [2, 2], [1, 0], [1, 1], True, [1, 0], 1),
                          name="transposed")


_CONV_ERRORS = _errors(
    (_args(_z(2, 4, 5, 5), _z(6, 3, 3, 3)), {}, RuntimeError, "expected input\\[2, 4, 5, 5\\] to have 3 channels"),
    (_args(_z(5, 5), _z(6, 4, 3, 3)), {}, RuntimeError, "Expected 3D \\(unbatched\\) or 4D \\(batched\\) input"),
    (_args(_z(1, 4, 2, 2), _z(6, 4, 3, 3)), {}, RuntimeError, "Kernel size can't be greater than actual input size"),
    (_args(_z(1, 4, 5, 5), _z(6, 2, 3, 3)), {"groups": 4}, RuntimeError, "expected weight to be divisible by 4"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3)), {"stride": 0}, RuntimeError, "non-positive stride is not supported"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3)), {"padding": "same", "stride": 2}, RuntimeError,
     "padding='same' is not supported for strided convolutions"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3)), {"padding": "full"}, RuntimeError, "Invalid padding string: 'full'"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3), _z(5)), {}, RuntimeError, "expected bias to be 1-dimensional with 6"),
    (_args(_z(1, 4, 5, 5, dtype=D.float64), _z(6, 4, 3, 3)), {}, RuntimeError, "should be the same"),
    (_args(_z(1, 4, 5, 5, dtype=D.bool), _z(6, 4, 3, 3, dtype=D.bool)), {}, NotImplementedError,
     "not implemented for 'Bool'"),
)


_CONV_TRANSPOSE_ERRORS = _errors(
    (_args(_z(2, 4, 5, 5), _z(3, 3, 3, 3)), {}, RuntimeError, "Given transposed=1, weight of size \\[3, 3, 3, 3\\]"),
    (_args(_z(2, 4, 5, 5), _z(4, 3, 3, 3)), {"output_padding": 1}, RuntimeError,
     "output padding must be smaller than either stride or dilation"),
    (_args(_z(2, 4, 5, 5), _z(4, 3, 3, 3)), {"groups": 3}, RuntimeError, "expected weight to be divisible by 3"),
    (_args(_z(2, 4, 5, 5), _z(4, 3, 3, 3), _z(4)), {}, RuntimeError, "expected bias to be 1-dimensional with 3"),
    (_args(_z(2, 4, 5, 5, dtype=D.int32), _z(4, 3, 3, 3, dtype=D.int32)), {}, NotImplementedError,
     "not implemented for 'Int'"),
)


_CONVOLUTION_ERRORS = _errors(
    (_args(_z(4, 5, 5), _z(6, 4, 3, 3), None, [1], [0], [1], False, [0], 1), {}, RuntimeError,
     "Expected 4-dimensional input for 4-dimensional weight"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3), None, [1, 2, 3], [0], [1], False, [0], 1), {}, RuntimeError,
     "expected stride to be a single integer value or a list of 2 values"),
    (_args(_z(1, 4, 5, 5), _z(6, 4, 3, 3), None, [1], [0], [1], False, [0], 0), {}, RuntimeError,
     "non-positive groups is not supported"),
)


# -- registration -------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("convolution", _convolution_samples, dtypes=(*_INTS, *_FLOATS), ref=_ref_convolution,
           error_inputs=_CONVOLUTION_ERRORS, tolerances=_SUM_TOLERANCES),
]

for _n in (1, 2, 3):
    _INFOS += [
        OpInfo(f"conv{_n}d", _conv_samples(_n), dtypes=_CONV_TYPES, ref=_ref_conv(_n), tolerances=_SUM_TOLERANCES,
               error_inputs=_CONV_ERRORS if _n == 2 else lambda opinfo, device: iter(()),
               torch_name=f"nn.functional.conv{_n}d"),
        OpInfo(f"conv_transpose{_n}d", _conv_transpose_samples(_n), dtypes=_CONV_TRANSPOSE_TYPES,
               ref=_ref_conv_transpose(_n), tolerances=_SUM_TOLERANCES,
               error_inputs=_CONV_TRANSPOSE_ERRORS if _n == 2 else lambda opinfo, device: iter(()),
               torch_name=f"nn.functional.conv_transpose{_n}d"),
    ]

for _info in _INFOS:
    register_opinfo(_info)
del _info, _n
