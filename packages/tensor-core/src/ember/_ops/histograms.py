"""Counting and histograms: bincount, histc and histogram."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import _dtype as D
from .._alloc import check_sizes
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._pointwise_helpers import _torch_name
from ._reduction_helpers import (
    _F32,
    _F64,
    _I64,
    _REDUCTION,
    _check_int,
    _check_meta_data_dependent,
    _check_tensor,
    _data_for_checks,
    _return_type,
)
from ._registry import defop

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["bincount", "histc", "histogram"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- bincount, histc, histogram --------------------------------------------------------------------------


def _bincount_dtype(weights):
    if weights is None:
        return _I64
    return _F32 if weights.dtype is D.float32 else _F64


def _bincount_meta(input, weights=None, minlength=0):
    """Count each value of a 1-D non-negative integer tensor: ``result[v]`` = occurrences of ``v``.

    Args:
        input (Tensor): 1-D, integer (not bool), values ``>= 0``.
        weights (Tensor, optional): 1-D, ``input``'s length; sum these instead of counting 1s.
        minlength (int): the smallest length of the result.

    Returns:
        Tensor: of length ``max(max(input) + 1, minlength)``; int64 counts, or with ``weights`` float32
        (float32 weights) or float64 (any other).

    Raises:
        RuntimeError: for other shapes or dtypes, negative values or ``minlength``, or mismatched ``weights``.
        NotImplementedError: on the meta device, unless ``input`` is empty (the output size depends on the
            values).

    Example:
        >>> import ember
        >>> ember.bincount(ember.tensor([0, 2, 2, 3]))
        tensor([1, 0, 2, 1])
    """
    _check_tensor("bincount", input)
    minlength = _check_int("bincount", minlength, "minlength")
    if input.dtype.category != D.INTEGRAL:
        raise RuntimeError(f"bincount(): expected an integer input, got {_torch_name(input.dtype)}")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None:
        _check_tensor("bincount", weights, "weights", 2)
        if weights.ndim != 1 or weights.shape[0] != input.shape[0]:
            raise RuntimeError("weights should be 1-d and have the same length as input")
    if input._data.size == 0:
        return MetaArray((minlength,), _bincount_dtype(weights))
    _check_meta_data_dependent("bincount", input)
    if _data_for_checks(input).min() < 0:  # (CuPy: one reduction, one host read)
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    return None


def _bincount_cpu(input, weights=None, minlength=0):
    data = input._data
    # the length depends on the data, so the meta function cannot check it: refuse one past int64 here
    check_sizes((builtins.max(minlength, int(data.max()) + 1 if data.size else 0),), _F64)
    if weights is None:
        return np.bincount(data, minlength=minlength).astype(_I64, copy=False)
    w = weights._data
    w = w.real if w.dtype.kind == "c" else w
    out = _bincount_dtype(weights)
    return np.bincount(data, weights=w.astype(_F64), minlength=minlength).astype(out)


bincount = defop("bincount", _bincount_meta, cpu=_bincount_cpu, tags=_REDUCTION)


def _histc_meta(input, bins=100, min=0, max=0):
    """Histogram of ``input``'s elements in ``bins`` equal-width bins over ``[min, max]``.

    With ``min == max`` (the default) the data's own minimum and maximum are used (widened by 1 on
    each side if they are equal). Elements outside the range are ignored; the last bin includes ``max``.

    Args:
        input (Tensor): floating point.
        bins (int): the number of bins.
        min, max (float): the range.

    Returns:
        Tensor: the counts, of ``input``'s dtype, shape ``(bins,)``.

    Raises:
        RuntimeError: for ``bins <= 0``, ``min > max``, a non-finite range, or a non-floating input.

    Example:
        >>> import ember
        >>> ember.histc(ember.tensor([1., 2., 1.]), bins=4, min=0, max=3)
        tensor([0., 2., 1., 0.])
    """
    _check_tensor("histc", input)
    bins = _check_int("histc", bins, "bins")
    if input.dtype.category != D.FLOATING:
        raise RuntimeError(f"histc(): expected a floating point input, got {_torch_name(input.dtype)}")
    if bins <= 0:
        raise RuntimeError(f"ember.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("ember.histc: max must be larger than min")
    if min == max and input.device.type != "meta":
        _histc_range(_data_for_checks(input), min, max)
    elif not (math.isfinite(min) and math.isfinite(max)):
        raise RuntimeError(f"ember.histc: range of [{min}, {max}] is not finite")
    return MetaArray((bins,), input._data.dtype)


def _histc_range(data, low, high):
    """(low, high) for histc: the data's range when they are equal, widened when it is a point."""
    if low == high and data.size:
        low, high = np.min(data).item(), np.max(data).item()
    if low == high:
        low, high = low - 1, high + 1
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"ember.histc: range of [{low}, {high}] is not finite")
    return low, high


def _histc_cpu(input, bins=100, min=0, max=0):
    data = input._data
    low, high = _histc_range(data, min, max)
    dtype = data.dtype
    x = data.reshape(-1)
    edges = np.linspace(low, high, bins + 1).astype(dtype)
    left, right = edges[0], edges[-1]
    with np.errstate(all="ignore"):
        inside = (x >= left) & (x <= right)
        x = x[inside]
        # the bin by linear interpolation in the input's dtype, as PyTorch's histc
        pos = ((x - left) * dtype.type(bins) / (right - left)).astype(np.float64).astype(_I64)
    pos = np.minimum(pos, bins - 1)
    return np.bincount(pos, minlength=bins).astype(dtype)


histc = defop("histc", _histc_meta, cpu=_histc_cpu, has_out=True, tags=_REDUCTION)

_histogram_type = _return_type("histogram", ["hist", "bin_edges"])


def _histogram_meta(input, bins=100, *, range=None, weight=None, density=False):
    """Histogram of ``input``'s elements: a namedtuple ``(hist, bin_edges)``.

    Args:
        input (Tensor): float32 or float64.
        bins (int or Tensor): the number of equal-width bins, or the increasing bin edges (1-D, ``input``'s
            dtype). Each bin includes its left edge; the last also its right edge.
        range (tuple of float, optional): ``(min, max)`` for integer ``bins``; the data's range by default.
        weight (Tensor, optional): ``input``'s shape; sum these instead of counting 1s.
        density (bool): normalise so that the histogram integrates to 1.

    Returns:
        tuple[Tensor, Tensor]: ``(hist, bin_edges)`` of ``input``'s dtype.

    Raises:
        RuntimeError: for other dtypes, ``bins <= 0``, ``min > max``, a non-finite range, or edges or
            weights of another dtype or shape.

    Example:
        >>> import ember
        >>> ember.histogram(ember.tensor([1., 2., 1.]), bins=2, range=(0., 2.))
        histogram(hist=tensor([0., 3.]), bin_edges=tensor([0., 1., 2.]))
    """
    _check_tensor("histogram", input)
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"histogram(): expected a float or double input, got {_torch_name(input.dtype)}")
    if isinstance(bins, Tensor):
        if bins.dtype is not input.dtype:
            raise RuntimeError(
                "ember.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
                f"dtype {input.dtype.name} and bins for dimension 0 with dtype {bins.dtype.name}"
            )
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise RuntimeError("ember.histogramdd: bins tensor should have one dimension and at least 1 element")
        n_bins = bins.shape[0] - 1
    else:
        n_bins = _check_int("histogram", bins, "bins")
        if n_bins <= 0:
            raise RuntimeError(f"ember.histogramdd(): bins must be > 0, but got {n_bins} for dimension 0")
        if range is not None:
            low, high = range
            if low > high:
                raise RuntimeError(
                    f"ember.histogramdd: min should not exceed max, but got min {low} max {high} for dimension 0"
                )
            if not (math.isfinite(low) and math.isfinite(high)):
                raise RuntimeError(f"ember.histogramdd: dimension 0's range [{low}, {high}] is not finite")
        elif input.device.type != "meta":
            _histogram_range(_data_for_checks(input), None)
    if weight is not None:
        _check_tensor("histogram", weight, "weight")
        if tuple(weight.shape) != tuple(input.shape) or weight.dtype is not input.dtype:
            raise RuntimeError("ember.histogramdd: weight should have the same shape and dtype as input")
    dtype = input._data.dtype
    return MetaArray((n_bins,), dtype), MetaArray((n_bins + 1,), dtype)


def _histogram_range(data, range):
    if range is not None:
        low, high = float(range[0]), float(range[1])
    elif data.size:
        low, high = np.min(data).item(), np.max(data).item()
    else:
        low, high = 0.0, 1.0
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"ember.histogramdd: dimension 0's range [{low}, {high}] is not finite")
    if low == high:
        low, high = low - 0.5, high + 0.5
    return low, high


def _histogram_cpu(input, bins=100, *, range=None, weight=None, density=False):
    data = input._data
    dtype = data.dtype
    if isinstance(bins, Tensor):
        edges = bins._data.astype(dtype, copy=True)
    else:
        low, high = _histogram_range(data, range)
        edges = np.linspace(low, high, bins + 1).astype(dtype)
        if type(data) is not np.ndarray:  # computed on the host from the range (numbers), as on CPU
            edges = _array_namespace(data).asarray(edges)
    n_bins = edges.size - 1
    x = data.reshape(-1)
    w = None if weight is None else weight._data.reshape(-1)
    inside = (x >= edges[0]) & (x <= edges[-1])
    x = x[inside]
    pos = np.minimum(np.searchsorted(edges, x, side="right") - 1, n_bins - 1)
    hist = np.bincount(pos, weights=None if w is None else w[inside], minlength=n_bins).astype(dtype)
    if density:
        with np.errstate(all="ignore"):
            hist = hist / (hist.sum() * np.diff(edges))
    return hist.astype(dtype, copy=False), edges


histogram = defop("histogram", _histogram_meta, cpu=_histogram_cpu, has_out=True, tags=_REDUCTION,
                  return_type=_histogram_type)
