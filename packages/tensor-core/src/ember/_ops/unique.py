"""unique and unique_consecutive."""

from __future__ import annotations

import math

import numpy as np

from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._pointwise_helpers import _torch_name
from ._reduction_helpers import _I64, _SORT, _check_meta_data_dependent, _check_tensor, _one_dim, _upcast
from ._registry import defop
from ._shapes import wrap_dim

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["unique", "unique_consecutive"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


def _unique_check(name, input, dim, return_inverse, return_counts):
    """Check the arguments of unique/unique_consecutive; the outputs' metadata when they don't depend on values.

    Only an empty input has outputs of known sizes; otherwise meta tensors can't run the op.
    """
    _check_tensor(name, input)
    if input.dtype.is_complex:
        raise RuntimeError(f"{name}(): not implemented for {_torch_name(input.dtype)} inputs")
    data = input._data
    if dim is not None:
        if data.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        d = _one_dim(name, dim, data.ndim)
        if data.size == 0 and data.shape[d] != 0:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    if data.size:
        _check_meta_data_dependent(name, input)
        return None
    if dim is None:
        values, inverse = MetaArray((0,), data.dtype), MetaArray(data.shape, _I64)
    else:
        values, inverse = MetaArray(data.shape, data.dtype), MetaArray((0,), _I64)
    return _unique_outputs(values, inverse, MetaArray((0,), _I64), return_inverse, return_counts)


def _unique_meta(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of ``input`` (or distinct slices along ``dim``), sorted.

    Args:
        input (Tensor): a real or bool tensor.
        sorted (bool): accepted; the result is always sorted (as PyTorch's CPU kernel).
        return_inverse (bool): also return, for each element (slice), the index of its value in the result.
        return_counts (bool): also return how often each distinct value occurs.
        dim (int, optional): compare whole slices along this dim instead of elements.

    Returns:
        Tensor, or a tuple ``(output, inverse)``, ``(output, counts)`` or ``(output, inverse, counts)``.
        Each NaN is distinct from every other value.

    Raises:
        RuntimeError: for complex inputs.
        NotImplementedError: on the meta device, unless ``input`` is empty (the output size depends on the
            values).

    Example:
        >>> import ember
        >>> ember.unique(ember.tensor([3, 1, 3, 2]), return_counts=True)
        (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    return _unique_check("unique", input, dim, return_inverse, return_counts)


def _unique_outputs(values, inverse, counts, return_inverse, return_counts):
    if not (return_inverse or return_counts):
        return values
    result = (values,)
    if return_inverse:
        result += (inverse,)
    if return_counts:
        result += (counts,)
    return result


def _unique_cpu(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    data = input._data
    xp = _array_namespace(data)
    if dim is None:
        flat = _upcast(data.reshape(-1))
        order = np.argsort(flat, kind="stable")
        ordered = flat[order]
        starts = xp.ones(ordered.size, dtype=bool)
        starts[1:] = ordered[1:] != ordered[:-1]  # NaN != NaN: each NaN stays distinct
        values = ordered[starts].astype(data.dtype)
        group = np.cumsum(starts) - 1
        inverse = xp.empty(flat.size, dtype=_I64)
        inverse[order] = group
        counts = np.diff(np.append(np.flatnonzero(starts), flat.size)).astype(_I64)
        return _unique_outputs(values, inverse.reshape(data.shape), counts, return_inverse, return_counts)
    d = wrap_dim(dim, data.ndim)
    slices = np.moveaxis(data, d, 0)
    n = slices.shape[0]
    rows = _upcast(slices.reshape(n, math.prod(slices.shape[1:])))
    if n == 0:
        return _unique_outputs(np.moveaxis(slices, 0, d).copy(), xp.empty(0, _I64), xp.empty(0, _I64),
                               return_inverse, return_counts)
    order = _lexsort_rows(rows) if rows.shape[1] else xp.arange(n)  # lexicographic, stable
    ordered = rows[order]
    starts = xp.ones(n, dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    group = np.cumsum(starts) - 1
    inverse = xp.empty(n, dtype=_I64)
    inverse[order] = group
    counts = np.diff(np.append(np.flatnonzero(starts), n)).astype(_I64)
    values = np.moveaxis(slices[order[starts]], 0, d)
    return _unique_outputs(xp.ascontiguousarray(values), inverse, counts, return_inverse, return_counts)


def _lexsort_rows(rows):
    """The stable order that sorts the rows of a 2-D array lexicographically (first column most significant)."""
    if type(rows) is np.ndarray:
        return np.lexsort(rows.T[::-1])
    # CuPy: stable argsorts from the last column to the first (its lexsort is less general)
    xp = _array_namespace(rows)
    order = xp.arange(rows.shape[0])
    for column in range(rows.shape[1] - 1, -1, -1):
        order = order[xp.argsort(rows[order, column], kind="stable")]
    return order


unique = defop("unique", _unique_meta, cpu=_unique_cpu, tags=_SORT)


def _unique_consecutive_meta(input, return_inverse=False, return_counts=False, dim=None):
    """``input`` with each run of equal consecutive elements (or slices along ``dim``) kept once.

    Args:
        input (Tensor): a real or bool tensor.
        return_inverse (bool): also return, for each element (slice), the index of its run.
        return_counts (bool): also return each run's length.
        dim (int, optional): compare whole slices along this dim instead of elements (of the flattened input).

    Returns:
        Tensor, or a tuple with the inverse and/or the counts, as :func:`ember.unique`.

    Raises:
        RuntimeError: for complex inputs.
        NotImplementedError: on the meta device, unless ``input`` is empty (the output size depends on the
            values).

    Example:
        >>> import ember
        >>> ember.unique_consecutive(ember.tensor([1, 1, 2, 2, 1]))
        tensor([1, 2, 1])
    """
    return _unique_check("unique_consecutive", input, dim, return_inverse, return_counts)


def _unique_consecutive_cpu(input, return_inverse=False, return_counts=False, dim=None):
    data = input._data
    xp = _array_namespace(data)
    if dim is None:
        flat = data.reshape(-1)
        starts = xp.ones(flat.size, dtype=bool)
        starts[1:] = flat[1:] != flat[:-1]
        group = np.cumsum(starts, dtype=_I64) - 1
        counts = np.diff(np.append(np.flatnonzero(starts), flat.size)).astype(_I64)
        return _unique_outputs(flat[starts], group.reshape(data.shape), counts, return_inverse, return_counts)
    d = wrap_dim(dim, data.ndim)
    slices = np.moveaxis(data, d, 0)
    n = slices.shape[0]
    rows = slices.reshape(n, math.prod(slices.shape[1:]))
    starts = xp.ones(n, dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    group = np.cumsum(starts, dtype=_I64) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), n)).astype(_I64)
    values = xp.ascontiguousarray(np.moveaxis(slices[starts], 0, d))
    return _unique_outputs(values, group, counts, return_inverse, return_counts)


unique_consecutive = defop("unique_consecutive", _unique_consecutive_meta, cpu=_unique_consecutive_cpu, tags=_SORT)
