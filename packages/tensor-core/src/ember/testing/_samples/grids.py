"""OpInfos of meshgrid, cartesian_prod and combinations."""

from __future__ import annotations

import itertools

import numpy as np

from .._opinfo import OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._shape_helpers import _errors, _t, _with

# -- meshgrid / cartesian_prod / combinations / block_diag / atleast ---------------------------------------------


def _meshgrid_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((3,)), (make((2,)),), {"indexing": "ij"}, name="ij")
    yield SampleInput(make((3,)), (make((2,), noncontiguous=True),), {"indexing": "xy"}, name="xy")
    yield SampleInput(make((3,)), (make(()), make((4,))), {"indexing": "xy"}, name="three, zero-dim")
    yield SampleInput(make((2,)), (), {"indexing": "ij"}, name="one")
    yield SampleInput(make((0,)), (make((2,)),), {"indexing": "ij"}, name="empty")


def _meshgrid_ref(*arrays, indexing="ij"):
    return tuple(np.meshgrid(*arrays, indexing=indexing))


_meshgrid_errors = _errors(
    (_with(_t(3), lambda e, d: e.zeros(2, dtype=e.int64, device=d)), (), {"indexing": "ij"}, RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
    (_with(_t(3), lambda e, d: e.zeros(2, 2, device=d)), (), {"indexing": "ij"}, RuntimeError,
     "Expected 0D or 1D tensor"),
    (_with(_t(3), lambda e, d: e.zeros(2, device=d)), (), {"indexing": "foo"}, RuntimeError,
     "indexing must be one of"),
)


def _cartesian_prod_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((2,)), (make((3,)),), name="two")
    yield SampleInput(make((2,), noncontiguous=True), (make((1,)), make((3,))), name="three")
    yield SampleInput(make((3,)), (), name="one")
    yield SampleInput(make((2,)), (make((0,)),), name="empty")


def _cartesian_prod_ref(*arrays):
    if len(arrays) == 1:
        return arrays[0]
    rows = list(itertools.product(*(a.tolist() for a in arrays)))
    return np.array(rows, dtype=arrays[0].dtype).reshape(len(rows), len(arrays))


_cartesian_prod_errors = _errors(
    (_with(_t(3), lambda e, d: e.zeros(2, 2, device=d)), (), {}, RuntimeError, "Expect a 1D vector"),
    (_with(_t(3), lambda e, d: e.zeros(2, dtype=e.int64, device=d)), (), {}, RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
)


def _combinations_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((4,)), name="pairs")
    yield SampleInput(make((4,), noncontiguous=True), (3,), name="triples")
    yield SampleInput(make((3,)), (2, True), name="with replacement")
    yield SampleInput(make((3,)), (4,), name="r > n")
    yield SampleInput(make((3,)), (0,), name="r = 0")
    yield SampleInput(make((0,)), name="empty")


def _combinations_ref(a, r=2, with_replacement=False):
    if r == 0:
        return np.empty((0,), a.dtype)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = [list(c) for c in pick(a.tolist(), r)]
    return np.array(rows, dtype=a.dtype).reshape(len(rows), r)


_combinations_errors = _errors(
    (_t(2, 2), (), {}, RuntimeError, "Expect a 1D vector"),
    (_t(3), (-1,), {}, RuntimeError, "Expect a non-negative number"),
)


# -- registration ---------------------------------------------------------------------------------------------

_INFOS = [
    OpInfo("meshgrid", _meshgrid_samples, ref=_meshgrid_ref, error_inputs=_meshgrid_errors),
    OpInfo("cartesian_prod", _cartesian_prod_samples, ref=_cartesian_prod_ref, error_inputs=_cartesian_prod_errors),
    OpInfo("combinations", _combinations_samples, ref=_combinations_ref, error_inputs=_combinations_errors),
]

for _info in _INFOS:
    register_opinfo(_info)
