"""OpInfos of the counting and histogram ops (ember._ops.histograms): bincount, histc, histogram."""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import FLOATING_TYPES, INTEGRAL_TYPES, OpInfo, SampleInput, register_opinfo
from ._common import maker
from ._reduction_helpers import _FLOAT32_64, _errors, _floats, _ints, _of, _quiet, _tensor, _wide

# -- bincount, histc, histogram --------------------------------------------------------------------------


def _bincount_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad, low=0, high=6)
    weights = maker(device, D.float32, False, seed=1)
    yield SampleInput(make((10,)), name="counts", data_dependent=True)
    yield SampleInput(make((10,)), (), {"minlength": 12}, name="minlength", data_dependent=True)
    yield SampleInput(make((6,)), (weights((6,)),), name="float32 weights", data_dependent=True)
    yield SampleInput(make((6,)), (maker(device, D.float64, False)((6,)),), name="float64 weights", data_dependent=True)
    yield SampleInput(make((6,)), (maker(device, D.int32, False)((6,)),), name="int weights: float64",
                      data_dependent=True)
    yield SampleInput(make((0,)), name="empty")  # outputs of known size: meta tensors run it
    yield SampleInput(make((0,)), (), {"minlength": 3}, name="empty, minlength")
    yield SampleInput(make((8,), noncontiguous=True), name="noncontiguous", data_dependent=True)


def _bincount_ref(a, weights=None, minlength=0):
    if weights is None:
        return np.bincount(a, minlength=minlength)
    return np.bincount(a, weights=weights.astype(np.float64), minlength=minlength)


register_opinfo(OpInfo(
    "bincount", _bincount_samples, dtypes=INTEGRAL_TYPES, ref=_bincount_ref, supports_autograd=False,
    error_inputs=_errors(
        (_of([-1, 2]), (), {}, RuntimeError, "bincount only supports 1-d non-negative integral inputs"),
        (_of([[1, 2]]), (), {}, RuntimeError, "bincount only supports 1-d non-negative integral inputs"),
        (_of([1, 2]), (), {"minlength": -1}, RuntimeError, "minlength should be >= 0"),
        (_of([1, 2]), (_of([1.0]),), {}, RuntimeError, "weights should be 1-d and have the same length"),
        (_of([1.0, 2.0]), (), {}, RuntimeError, "integer"),
    ),
))


def _histc_samples(opinfo, device, dtype, requires_grad):
    make = maker(device, dtype, requires_grad)
    yield SampleInput(make((20,)), name="default: 100 bins over the data's range")
    yield SampleInput(make((4, 5)), (7,), name="7 bins")
    yield SampleInput(make((4, 5)), (6, -4, 4), name="range, elements outside")
    yield SampleInput(make((4, 5)), (), {"bins": 5, "min": -9, "max": 9}, name="keywords")
    yield SampleInput(_tensor([2.0, 2.0, 2.0], dtype, device), (4,), name="a single value: widened")
    yield SampleInput(_tensor([0.0, 1.0, 2.0, 3.0], dtype, device), (3, 0, 3), name="edges")
    yield SampleInput(make((0,)), (3,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (5,), name="noncontiguous")


@_quiet
def _histc_ref(a, bins=100, min=0, max=0):
    x = _wide(a).reshape(-1)
    low, high = float(min), float(max)
    if low == high and x.size:
        low, high = float(x.min()), float(x.max())
    if low == high:
        low, high = low - 1, high + 1
    return np.histogram(x, bins=bins, range=(low, high))[0]


_HISTC_HALF = "bins are found in the input's (half) precision as in PyTorch; numpy's float64 bins differ at edges"

register_opinfo(OpInfo(
    "histc", _histc_samples, dtypes=FLOATING_TYPES, ref=_histc_ref, supports_autograd=False,
    skips=(("test_reference_values", D.float16, _HISTC_HALF), ("test_reference_values", D.bfloat16, _HISTC_HALF)),
    error_inputs=_errors(
        (_floats(3), (0,), {}, RuntimeError, "bins must be > 0"),
        (_floats(3), (3, 3, 1), {}, RuntimeError, "max must be larger than min"),
        (_of([1.0, float("inf")]), (3,), {}, RuntimeError, "is not finite"),
        (_ints(3), (3,), {}, RuntimeError, "floating point"),
    ),
))


def _histogram_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad)
    edges = ember.tensor([-9.0, -2.0, 0.0, 0.5, 6.0], dtype=dtype, device=device)
    yield SampleInput(make((20,)), (5,), name="int bins")
    yield SampleInput(make((4, 5)), (4,), {"range": (-5.0, 5.0)}, name="range")
    yield SampleInput(make((4, 5)), (4,), {"weight": make((4, 5)), "density": True}, name="weight, density")
    yield SampleInput(make((4, 5)), (edges,), name="tensor bins")
    yield SampleInput(make((4, 5)), (edges,), {"density": True}, name="tensor bins, density")
    yield SampleInput(_tensor([2.0, 2.0], dtype, device), (3,), name="a single value: widened")
    yield SampleInput(make((0,)), (3,), name="empty")
    yield SampleInput(make((3, 4), noncontiguous=True), (6,), name="noncontiguous")


def _histogram_ref(a, bins=100, *, range=None, weight=None, density=False):
    x = _wide(a).reshape(-1)
    if isinstance(bins, np.ndarray):
        edges = bins.astype(np.float64)
    else:
        if range is None:
            low, high = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
        else:
            low, high = range
        if low == high:
            low, high = low - 0.5, high + 0.5
        edges = np.linspace(low, high, bins + 1)
    w = None if weight is None else weight.reshape(-1).astype(np.float64)
    hist, edges = np.histogram(x, bins=edges, weights=w, density=density)
    return hist, edges


register_opinfo(OpInfo(
    "histogram", _histogram_samples, dtypes=_FLOAT32_64, ref=_histogram_ref, supports_autograd=False,
    error_inputs=_errors(
        (_floats(3), (3,), {"range": (3.0, 1.0)}, RuntimeError, "min should not exceed max"),
        (_floats(3), (_of([0.0, 1.0], D.float64),), {}, RuntimeError, "should have the same dtype"),
        (_of([1.0, float("nan")]), (3,), {}, RuntimeError, "is not finite"),
        (_ints(3), (3,), {}, RuntimeError, "float"),
    ),
))
