"""OpInfos of ember._ops.nn_fold: im2col (F.unfold) and fold.

The references are written from the ops' definitions with plain numpy
loops over output positions or kernel offsets (the samples are tiny), in
float64/complex128/int64, independent of the fast kernels they check.
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._spatial import _FLOATS, _SUM_TOLERANCES, _args, _errors, _tup, _wide, _z

_CONV_TRANSPOSE_TYPES = (D.int64, *_FLOATS, D.complex64, D.complex128)
_FOLD_TYPES = (D.bool, *_FLOATS, D.complex64, D.complex128)


def _ref_im2col(x, kernel_size, dilation=1, padding=0, stride=1):
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    k, d, p, s = _tup(kernel_size, 2), _tup(dilation, 2), _tup(padding, 2), _tup(stride, 2)
    xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
    blocks = [(xp.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    rows = []
    for c in range(x.shape[1]):
        for i, j in np.ndindex(*k):
            patch = xp[:, c, i * d[0]: i * d[0] + (blocks[0] - 1) * s[0] + 1: s[0],
                       j * d[1]: j * d[1] + (blocks[1] - 1) * s[1] + 1: s[1]]
            rows.append(patch.reshape(x.shape[0], blocks[0] * blocks[1]))
    result = np.stack(rows, axis=1)
    return result[0] if unbatched else result


def _ref_fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    unbatched = x.ndim == 2
    if unbatched:
        x = x[None]
    out, k = _tup(output_size, 2), _tup(kernel_size, 2)
    d, p, s = _tup(dilation, 2), _tup(padding, 2), _tup(stride, 2)
    blocks = [(out[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    channels = x.shape[1] // (k[0] * k[1])
    acc = x.astype(np.int64) if x.dtype == bool else _wide(x)
    image = np.zeros((x.shape[0], channels, out[0] + 2 * p[0] + s[0] * k[0], out[1] + 2 * p[1] + s[1] * k[1]),
                     acc.dtype)
    cols = acc.reshape(x.shape[0], channels, k[0], k[1], blocks[0], blocks[1])
    for i, j in np.ndindex(*k):
        image[:, :, i * d[0]: i * d[0] + (blocks[0] - 1) * s[0] + 1: s[0],
              j * d[1]: j * d[1] + (blocks[1] - 1) * s[1] + 1: s[1]] += cols[:, :, i, j]
    result = image[:, :, p[0]: p[0] + out[0], p[1]: p[1] + out[1]]
    if x.dtype == bool:
        result = result > 0
    return result[0] if unbatched else result


def _im2col_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3, 4, 5)), (2,), name="2x2")
    yield SampleInput(make((2, 4, 5), noncontiguous=True), ((2, 3),), {"dilation": (1, 2), "padding": 1, "stride": 2},
                      name="unbatched, all parameters")
    yield SampleInput(make((0, 2, 3, 3)), (3,), {"padding": 1}, name="empty batch")


def _fold_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 12, 12)), ((4, 5), 2), name="2x2")
    yield SampleInput(make((8, 6), noncontiguous=True), ((4, 5), (2, 2)), {"padding": 1, "stride": 2, "dilation": (2, 1)},
                      name="unbatched, all parameters")
    yield SampleInput(make((0, 4, 4)), (3, 2), {"padding": 1, "stride": 2}, name="empty batch")


_IM2COL_ERRORS = _errors(
    (_args(_z(1, 2, 3, 5, 5), 2), {}, RuntimeError, "Expected 3D or 4D \\(batch mode\\) tensor"),
    (_args(_z(1, 2, 5, 5), 6), {}, RuntimeError, "calculated shape of the array of sliding blocks as \\(0, 0\\)"),
    (_args(_z(1, 2, 5, 5), 0), {}, RuntimeError, "kernel size should be greater than zero"),
    (_args(_z(1, 2, 5, 5), (2, 2, 2)), {}, RuntimeError, "It is expected kernel_size equals to 2, but got size 3"),
    (_args(_z(1, 2, 5, 5, dtype=D.int64), 2), {}, NotImplementedError, "\"im2col_out_cpu\" not implemented for 'Long'"),
)


_FOLD_ERRORS = _errors(
    (_args(_z(2, 12, 16), (6, 6), 2), {}, RuntimeError, "to match the calculated number of sliding blocks 5 \\* 5 = 25"),
    (_args(_z(2, 13, 16), (5, 5), 2), {}, RuntimeError, "to be divisible by the product of kernel_size"),
    (_args(_z(1, 2, 12, 16), (5, 5), 2), {}, RuntimeError, "Expected 2D or 3D \\(batch mode\\) tensor"),
    (_args(_z(2, 12, 16), (5, 5, 5), 2), {}, RuntimeError, "It is expected output_size equals to 2"),
)


# -- registration -------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("im2col", _im2col_samples, dtypes=_FOLD_TYPES, ref=_ref_im2col, error_inputs=_IM2COL_ERRORS,
           torch_name="nn.functional.unfold"),
    OpInfo("fold", _fold_samples, dtypes=_FOLD_TYPES, ref=_ref_fold, error_inputs=_FOLD_ERRORS,
           torch_name="nn.functional.fold", tolerances=_SUM_TOLERANCES),
]

for _info in _INFOS:
    register_opinfo(_info)
del _info
