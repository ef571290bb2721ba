"""OpInfos of tril/triu, tril_indices/triu_indices, diag, diag_embed, diagflat and trace."""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES_AND_COMPLEX, ErrorInput, OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._shape_helpers import _ember, _errors, _t, _wide

_ALL = ALL_TYPES_AND_COMPLEX
_NO_BOOL = tuple(d for d in _ALL if d is not D.bool)


# -- triangles, diagonals -----------------------------------------------------------------------------------


def _tri_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), name="main")
    yield SampleInput(make((3, 4), noncontiguous=True), (1,), name="above")
    yield SampleInput(make((4, 3)), (-1,), name="below")
    yield SampleInput(make((2, 3, 3)).transpose(1, 2), (0,), name="batched, transposed")
    yield SampleInput(make((3, 3)), (-5,), name="past the corner")
    yield SampleInput(make((0, 3)), name="empty")


_tri_errors = _errors((_t(3), (), {}, RuntimeError, "input tensor must have at least 2 dimensions"))


def _tri_indices_samples(opinfo, device, dtype, requires_grad):
    for args in ((3, 3), (3, 4, 1), (4, 3, -1), (0, 3), (3, 4, 10), (3, 4, -10)):
        yield SampleInput(args[0], args[1:], {"dtype": dtype, "device": device}, name=f"{args}")


def _tri_indices_ref(lower):
    def ref(row, col, offset=0, dtype=None, device=None):
        keep = np.tri(row, col, offset, dtype=bool) if lower else ~np.tri(row, col, offset - 1, dtype=bool)
        return np.stack(np.nonzero(keep)).astype(dtype.numpy_dtype).reshape(2, -1)

    return ref


def _tri_indices_errors(opinfo, device):
    ember = _ember()
    yield ErrorInput(SampleInput(-1, (4,), {"device": device}), RuntimeError, "row must be non-negative")
    yield ErrorInput(SampleInput(3, (-4,), {"device": device}), RuntimeError, "col must be non-negative")
    yield ErrorInput(SampleInput(3, (4,), {"dtype": ember.float32, "device": device}), NotImplementedError,
                     "not implemented for 'Float'")


def _diag_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3,)), name="vector")
    yield SampleInput(make((3,), noncontiguous=True), (2,), name="vector above")
    yield SampleInput(make((3,)), (-1,), name="vector below")
    yield SampleInput(make((3, 4)), name="matrix")
    yield SampleInput(make((3, 4), noncontiguous=True), (1,), name="matrix above")
    yield SampleInput(make((4, 3)).t(), (-2,), name="matrix below, transposed")
    yield SampleInput(make((3, 4)), (5,), name="past the corner")
    yield SampleInput(make((0,)), name="empty vector")


_diag_errors = _errors(
    (_t(), (), {}, RuntimeError, "Supports 1D or 2D tensors. Got 0D"),
    (_t(2, 3, 4), (), {}, RuntimeError, "Supports 1D or 2D tensors. Got 3D"),
)


def _diag_embed_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 3)), name="default")
    yield SampleInput(make((2, 3), noncontiguous=True), (1, 0, 2), name="offset, dims")
    yield SampleInput(make((2, 3)), (-1, 2, 0), name="negative offset, swapped dims")
    yield SampleInput(make((3,)), name="vector")
    yield SampleInput(make((2, 0)), name="empty")


def _diag_embed_ref(a, offset=0, dim1=-2, dim2=-1):
    n = a.shape[-1] + abs(offset)
    out = np.zeros(a.shape[:-1] + (n, n), a.dtype)
    for i in range(a.shape[-1]):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = a[..., i]
    ndim = a.ndim + 1
    return np.moveaxis(out, (-2, -1), (dim1 % ndim, dim2 % ndim))


_diag_embed_errors = _errors(
    (_t(2, 3), (0, 0, 0), {}, RuntimeError, "diagonal dimensions cannot be identical"),
    (_t(2, 3), (0, 0, 3), {}, IndexError, "Dimension out of range"),
)


def _diagflat_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2, 2)), name="matrix")
    yield SampleInput(make((3,), noncontiguous=True), (1,), name="vector above")
    yield SampleInput(make(()), (-2,), name="zero-dim below")


def _trace_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3, 4)), name="wide")
    yield SampleInput(make((4, 3), noncontiguous=True), name="noncontiguous")
    yield SampleInput(make((3, 3)).t(), name="transposed")
    yield SampleInput(make((0, 3)), name="empty")


def _trace_ref(a):
    return np.trace(_wide(a))


_trace_errors = _errors(
    (_t(3), (), {}, RuntimeError, "expected a matrix"),
    (lambda e, d: (e.zeros(2, 2, dtype=e.bool, device=d), ()), (), {}, NotImplementedError,
     "not implemented for 'Bool'"),
)


# -- registration ---------------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("tril", _tri_samples, ref=lambda a, diagonal=0: np.tril(a, diagonal), error_inputs=_tri_errors),
    OpInfo("triu", _tri_samples, ref=lambda a, diagonal=0: np.triu(a, diagonal), error_inputs=_tri_errors),
    OpInfo("tril_indices", _tri_indices_samples, dtypes=(D.int32, D.int64), ref=_tri_indices_ref(True),
           error_inputs=_tri_indices_errors, supports_autograd=False),
    OpInfo("triu_indices", _tri_indices_samples, dtypes=(D.int32, D.int64), ref=_tri_indices_ref(False),
           error_inputs=_tri_indices_errors, supports_autograd=False),
    OpInfo("diag", _diag_samples, ref=lambda a, diagonal=0: np.diag(a, diagonal), error_inputs=_diag_errors),
    OpInfo("diag_embed", _diag_embed_samples, ref=_diag_embed_ref, error_inputs=_diag_embed_errors),
    OpInfo("diagflat", _diagflat_samples, ref=lambda a, offset=0: np.diagflat(a, offset)),
    OpInfo("trace", _trace_samples, dtypes=_NO_BOOL, ref=_trace_ref, error_inputs=_trace_errors),
]

for _info in _INFOS:
    register_opinfo(_info)
