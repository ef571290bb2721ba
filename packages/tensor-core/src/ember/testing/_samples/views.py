"""OpInfos of the view ops (and their composites)."""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, COMPLEX_TYPES, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker

_FLOAT_ONLY = (D.float32, D.float64, D.float16)


def _samples(*calls):
    """Turn ``(shape, args, kwargs, name[, noncontiguous])`` tuples into a sample generator."""

    def gen(opinfo, device, dtype, requires_grad):
        make = maker(device, dtype, requires_grad)
        for call in calls:
            shape, args, kwargs, name, *rest = call
            yield SampleInput(make(shape, noncontiguous=bool(rest and rest[0])), args, kwargs, name)

    return gen


def _errors(*cases):
    def gen(opinfo, device):
        import ember

        for shape, args, kwargs, error, regex in cases:
            yield ErrorInput(SampleInput(ember.zeros(shape, device=device), args, kwargs), error, regex)

    return gen


def _view_ref(a, *shape):
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return np.reshape(a, shape)


def _slice_ref(a, dim=0, start=None, end=None, step=1):
    key = [slice(None)] * a.ndim
    key[dim] = slice(start, end, step)
    return a[tuple(key)]


def _split_ref(a, split, dim=0):
    if isinstance(split, int):
        points = list(range(split, a.shape[dim], split))
    else:
        points = list(np.cumsum(split)[:-1])
    return tuple(np.split(a, points, axis=dim))


def _expand_ref(a, *sizes):
    sizes = tuple(a.shape[i - (len(sizes) - a.ndim)] if s == -1 else s for i, s in enumerate(sizes))
    return np.broadcast_to(a, sizes)


def _unfold_ref(a, dim, size, step):
    windows = np.lib.stride_tricks.sliding_window_view(a, size, axis=dim)
    key = [slice(None)] * windows.ndim
    key[dim] = slice(None, None, step)
    return windows[tuple(key)]


def _squeeze_ref(a, dim=None):
    if dim is None:
        return np.squeeze(a)
    dims = dim if isinstance(dim, tuple) else (dim,)
    dims = tuple(d % a.ndim for d in dims if a.shape[d] == 1)
    return np.squeeze(a, axis=dims) if dims else a


def _narrow_ref(a, dim, start, length):
    start = start % a.shape[dim] if start < 0 else start
    return _slice_ref(a, dim, start, start + length)


VIEW_INFOS = [
    OpInfo("view", _samples(((2, 6), (3, 4), {}, "2-d"), ((2, 6), (-1,), {}, "flatten with -1"),
                            ((), (1, 1), {}, "zero-dim"), ((0, 4), (2, 0, 2), {}, "empty"),
                            ((4, 6), (2, 2, -1), {}, "split dims")),
           ref=_view_ref, torch_name="Tensor.view",
           error_inputs=_errors(((2, 3), (4,), {}, RuntimeError, "shape '\\[4\\]' is invalid for input of size 6"))),
    OpInfo("reshape", _samples(((2, 6), (3, 4), {}, "contiguous"), ((3, 4), (-1,), {}, "noncontiguous copy", True)),
           ref=_view_ref, torch_name="Tensor.reshape"),
    OpInfo("transpose", _samples(((2, 3, 4), (0, 2), {}, "3-d"), ((2, 3), (-1, -2), {}, "negative dims"), ((), (0, -1), {}, "zero-dim")),
           ref=lambda a, d0, d1: np.swapaxes(a, d0, d1) if a.ndim else a,
           error_inputs=_errors(((2, 3), (0, 2), {}, IndexError, "Dimension out of range"))),
    OpInfo("permute", _samples(((2, 3, 4), (2, 0, 1), {}, "3-d"), ((2, 3), ((1, 0),), {}, "tuple dims")),
           ref=lambda a, *dims: np.transpose(a, dims[0] if len(dims) == 1 else dims), torch_name="Tensor.permute",
           error_inputs=_errors(((2, 3), (0, 0), {}, RuntimeError, "duplicate dims"))),
    OpInfo("t", _samples(((2, 3), (), {}, "2-d"), ((4,), (), {}, "1-d")), ref=lambda a: a.T,
           error_inputs=_errors(((2, 3, 4), (), {}, RuntimeError, "t\\(\\) expects a tensor with <= 2 dimensions"))),
    OpInfo("unsqueeze", _samples(((2, 3), (0,), {}, "front"), ((2, 3), (-1,), {}, "back"), ((), (0,), {}, "zero-dim")),
           ref=lambda a, d: np.expand_dims(a, d),
           error_inputs=_errors(((2, 3), (3,), {}, IndexError, "Dimension out of range"))),
    OpInfo("squeeze", _samples(((2, 1, 3, 1), (), {}, "all"), ((2, 1, 3), (1,), {}, "dim"), ((2, 1, 1), ((1, 2),), {}, "tuple"),
                               ((2, 3), (0,), {}, "not size 1")),
           ref=_squeeze_ref),
    OpInfo("expand", _samples(((3, 1), (3, 4), {}, "broadcast"), ((3,), (2, -1), {}, "new dim"), ((), (2, 2), {}, "zero-dim")),
           ref=_expand_ref, torch_name="Tensor.expand",
           error_inputs=_errors(((3, 2), (3, 4), {}, RuntimeError, "must match the existing size"))),
    OpInfo("select", _samples(((3, 4), (0, 1), {}, "row"), ((3, 4), (1, -1), {}, "negative index")),
           ref=lambda a, d, i: np.take(a, i, axis=d),
           error_inputs=_errors(((3, 4), (0, 3), {}, IndexError, "index 3 is out of bounds for dimension 0 with size 3"))),
    OpInfo("slice", _samples(((6, 4), (0, 1, 5, 2), {}, "step"), ((6, 4), (1, -3, None), {}, "negative start"),
                             ((6, 4), (0, 10, 20), {}, "past the end")),
           ref=_slice_ref, torch_fn=lambda a, dim=0, start=None, end=None, step=1: a[(slice(None),) * dim + (slice(start, end, step),)]),
    OpInfo("narrow", _samples(((5, 4), (0, 1, 3), {}, "narrow"), ((5, 4), (1, -2, 2), {}, "negative start")), ref=_narrow_ref,
           error_inputs=_errors(((5, 4), (0, 3, 3), {}, RuntimeError, "exceeds dimension size"))),
    OpInfo("split", _samples(((7, 2), (3,), {}, "int"), ((7, 2), ([2, 5],), {}, "sizes"), ((2, 6), (2, 1), {}, "dim 1")),
           ref=_split_ref,
           error_inputs=_errors(((7, 2), ([2, 2],), {}, RuntimeError, "split_with_sizes expects split_sizes to sum exactly to 7"))),
    OpInfo("chunk", _samples(((7, 2), (3,), {}, "uneven"), ((6, 2), (2, 1), {}, "dim 1")),
           ref=lambda a, n, dim=0: tuple(np.array_split(a, range(-(-a.shape[dim] // n), a.shape[dim], -(-a.shape[dim] // n)), axis=dim))),
    OpInfo("unbind", _samples(((3, 2), (), {}, "dim 0"), ((3, 2), (1,), {}, "dim 1")),
           ref=lambda a, dim=0: tuple(np.moveaxis(a, dim, 0))),
    OpInfo("diagonal", _samples(((4, 5), (), {}, "main"), ((4, 5), (1,), {}, "above"), ((4, 5), (-2,), {}, "below"),
                                ((2, 3, 4), (0, 0, 2), {}, "3-d")),
           ref=lambda a, offset=0, dim1=0, dim2=1: np.diagonal(a, offset, dim1, dim2)),
    OpInfo("unfold", _samples(((7,), (0, 3, 2), {}, "1-d"), ((2, 6), (1, 2, 2), {}, "2-d")), ref=_unfold_ref,
           torch_name="Tensor.unfold",
           error_inputs=_errors(((3,), (0, 4, 1), {}, RuntimeError, "maximum size for tensor at dimension 0 is 3"))),
    OpInfo("flatten", _samples(((2, 3, 4), (), {}, "all"), ((2, 3, 4), (1,), {}, "from 1"), ((), (), {}, "zero-dim")),
           ref=lambda a, start_dim=0, end_dim=-1: a.reshape(a.shape[:start_dim] + (-1,)) if a.ndim else a.reshape(1)),
    OpInfo("as_strided", _samples(((4, 4), ((2, 2), (4, 1), 1), {}, "block")),
           ref=lambda a, size, stride, offset=0: np.lib.stride_tricks.as_strided(
               a.reshape(-1)[offset:], size, tuple(s * a.itemsize for s in stride)),
           error_inputs=_errors(((2, 2), ((3, 3), (1, 1)), {}, RuntimeError, "out of bounds for storage"))),
    OpInfo("detach", _samples(((2, 3), (), {}, "2-d")), ref=lambda a: a, supports_autograd=False),
    OpInfo("view_as_real", _samples(((2, 3), (), {}, "2-d"), ((3, 2), (), {}, "noncontiguous", True)), dtypes=COMPLEX_TYPES,
           ref=lambda a: np.stack([a.real, a.imag], axis=-1)),
    OpInfo("view_as_complex", _samples(((3, 2), (), {}, "pairs")), dtypes=(D.float32, D.float64),
           ref=lambda a: a[..., 0] + 1j * a[..., 1]),
    OpInfo("real", _samples(((2, 3), (), {}, "2-d")), dtypes=ALL_TYPES_AND_COMPLEX, ref=np.real),
    OpInfo("imag", _samples(((2, 3), (), {}, "2-d")), dtypes=COMPLEX_TYPES, ref=np.imag),
]

for _info in VIEW_INFOS:
    register_opinfo(_info)
del _FLOAT_ONLY
