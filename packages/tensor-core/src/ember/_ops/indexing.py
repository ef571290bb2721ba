"""Advanced indexing prims: ``index`` (gather by index tensors) and ``index_put_``.

``indices`` is a list with one entry per leading dimension of ``input``:
``None`` keeps the dimension whole, an integer tensor picks positions, a bool
tensor is a mask over as many dimensions as it has. Index tensors broadcast
together; the result dims they produce go where the first of them stands when
they are adjacent, and in front otherwise (numpy's and PyTorch's rule).
"""

from __future__ import annotations

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._array_module import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from ._array_module import check_bounds as _check_bounds
from ._array_module import is_device_array as _is_device_array
from ._array_module import keep_last as _keep_last
from ._array_module import ufunc_at as _ufunc_at
from ._array_module import values_for_checks as _values_for_checks
from ._registry import defop
from ._shapes import broadcast_shapes

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = ["index_put_", "index_put"]

# dtypes that ember._C.index_accumulate handles; others fall back to np.add.at.
_C_ACCUMULATE_DTYPES = {"float32", "float64", "int64", "int32", "int16", "int8", "uint8", "complex64", "complex128"}
_INDEX_DTYPES = (D.int64, D.int32, D.uint8, D.bool)  # as PyTorch: long, int, byte (a mask) or bool


def _expand_masks(input, indices):
    """Check ``indices``; return (dims consumed, list of (dim, shape of its index)) for meta."""
    if len(indices) > input._data.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input._data.ndim} (got {len(indices)})")
    entries, dim = [], 0
    for idx in indices:
        if idx is None:
            dim += 1
            continue
        if not isinstance(idx, Tensor):
            raise TypeError(f"index: expected a list of Tensors or None, got {type(idx).__name__}")
        if idx.dtype not in _INDEX_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if idx.dtype in (D.bool, D.uint8):
            mask_shape = idx._data.shape
            target = input._data.shape[dim : dim + len(mask_shape)]
            if len(target) < len(mask_shape) or any(m != s for m, s in zip(mask_shape, target)):
                bad = next((i for i, (m, s) in enumerate(zip(mask_shape, target)) if m != s), len(target))
                raise IndexError(
                    f"The shape of the mask {list(mask_shape)} at index {bad} does not match the shape of the indexed "
                    f"tensor {list(input._data.shape)} at index {dim + bad}"
                )
            if idx.device.type == "meta":
                raise NotImplementedError("boolean-mask indexing of a meta tensor has a data-dependent shape")
            count = _count_true(_values_for_checks(idx))
            entries.append((dim, (count,), len(mask_shape)))
            dim += len(mask_shape)
        else:
            entries.append((dim, idx._data.shape, 1))
            dim += 1
    return entries


def _count_true(mask):
    """The number of True values of ``mask`` (a GPU array is counted there; reading the count waits for it)."""
    if type(mask) is np.ndarray:
        return int(np.count_nonzero(mask))
    from ..cuda._sync import host_sync

    return host_sync("boolean-mask indexing (a result's size is the mask's count)",
                     lambda: int(np.count_nonzero(mask)))


def _one_value_mask(input, indices, values):
    """``(dim, mask)`` when ``indices`` are Nones and one bool/uint8 mask whose shape matches ``input``'s dims from
    ``dim`` on, and ``values`` has one element that broadcasts to the result (a number, or a tensor of at most the
    result's dims); else None. Such a write needs no count of the mask (no host read on the GPU): every selected
    position gets the one value, as ``masked_fill_`` (PyTorch's index_put_ takes the same route)."""
    masks = [i for i, idx in enumerate(indices) if idx is not None]
    if len(masks) != 1 or len(indices) > input._data.ndim:
        return None
    dim = masks[0]
    mask = indices[dim]
    if not isinstance(mask, Tensor) or mask.dtype not in (D.bool, D.uint8) or mask.device.type == "meta":
        return None
    shape, mask_shape = input._data.shape, mask._data.shape
    if tuple(shape[dim:dim + len(mask_shape)]) != tuple(mask_shape):
        return None  # the general path raises the mask-shape error
    if isinstance(values, Tensor):
        result_ndim = len(shape) - len(mask_shape) + 1
        if values._data.size != 1 or values._data.ndim > result_ndim:
            return None
    return dim, mask


def _result_shape(input, indices):
    entries = _expand_masks(input, indices)
    shape = input._data.shape
    if not entries:
        return tuple(shape)
    try:
        index_shape = broadcast_shapes(*(e[1] for e in entries))
    except RuntimeError:
        raise IndexError(
            "shape mismatch: indexing tensors could not be broadcast together with shapes "
            + ", ".join(str(list(e[1])) for e in entries)
        ) from None
    first, last = entries[0][0], entries[-1][0] + entries[-1][2]
    covered = sum(e[2] for e in entries)
    adjacent = last - first == covered
    before = tuple(shape[:first])
    after = tuple(shape[last:])
    if adjacent:
        return before + index_shape + after
    # Advanced dims go first; the sliced dims in between keep their order.
    kept = [shape[d] for d in range(len(shape)) if not any(e[0] <= d < e[0] + e[2] for e in entries)]
    return index_shape + tuple(kept)


def _numpy_key(input, indices):
    key = []
    for idx in indices:
        if idx is None:
            key.append(slice(None))
        else:
            data = idx._data
            key.append(data.astype(bool) if idx.dtype is D.uint8 else data)
    return tuple(key)


def _index_meta(input, indices):
    """Gather ``input`` at integer/bool index tensors, one per leading dim (``None`` keeps a dim).

    Raises:
        IndexError: for index tensors of a wrong dtype, masks of a wrong shape,
            index tensors that don't broadcast together, or out-of-range indices.
    """
    return MetaArray(_result_shape(input, indices), input._data.dtype)


def _rephrase_index_error(exc):
    text = str(exc).replace("axis", "dimension")
    return IndexError(text)


def _check_device_key(shape, indices):
    """Raise numpy's IndexError for out-of-range integer indices (CuPy's fancy indexing wraps them silently)."""
    dim = 0
    for idx in indices:
        if idx is None:
            dim += 1
            continue
        if idx.dtype in (D.bool, D.uint8):
            dim += idx._data.ndim
            continue
        size = shape[dim]
        bad = _check_bounds(idx._data, -size, size)  # one reduction and a host read per index tensor
        if bad is not None:
            raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
        dim += 1


def _index_cpu(input, indices):
    if type(input._data) is not np.ndarray:
        _check_device_key(input._data.shape, indices)
    try:
        # row-major, as the meta function says (numpy may lay advanced results out otherwise)
        return _as_array(input._data[_numpy_key(input, indices)], order="C")
    except IndexError as exc:
        raise _rephrase_index_error(exc) from None


index = defop("index", _index_meta, cpu=_index_cpu)


def _index_put_meta(self, indices, values, accumulate=False):
    """Write ``values`` into ``self`` at the positions ``indices`` select (in place).

    ``values`` broadcasts to the shape that ``self[indices]`` would have. With
    ``accumulate=True``, repeated positions add up; otherwise the last write wins.

    Raises:
        IndexError: as :func:`index`.
        RuntimeError: if ``values`` does not broadcast to the indexed shape.
    """
    one_value = _one_value_mask(self, indices, values)  # (no count of the mask needed: see _one_value_mask)
    target = _result_shape(self, indices) if one_value is None else ()
    if isinstance(values, Tensor) and values.dtype is not self.dtype:
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got {self.dtype} for the destination "
            f"and {values.dtype} for the source."
        )
    value_shape = values._data.shape if isinstance(values, Tensor) else ()
    if one_value is None and broadcast_shapes(target, value_shape) != tuple(target):
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(value_shape)} cannot be broadcast to indexing result "
            f"of shape {list(target)}"
        )
    return self._data


def _value_array(values, np_dtype):
    data = values._host_array() if isinstance(values, Tensor) else np.asarray(values)
    return data.astype(np_dtype, copy=False)


def _index_put_device(self, key, indices, values, accumulate):
    """index_put_ on a CuPy array: bounds checked as numpy would, repeated positions resolved as numpy does
    (the last value wins; with ``accumulate`` every value adds up, through ``_array_module.ufunc_at``)."""
    data = self._data
    xp = _array_namespace(data)
    if isinstance(values, Tensor):
        vals = values._data if _is_device_array(values._data) else xp.asarray(values._host_array())
    else:
        vals = xp.asarray(np.asarray(values))  # a Python number (an argument, not tensor data)
    vals = vals.astype(data.dtype, copy=False)
    one_value = _one_value_mask(self, indices, values)
    if one_value is not None and not (accumulate and data.dtype.name == "bfloat16"):
        _write_one_value(data, *one_value, vals.reshape(()), accumulate, xp)
        return
    _check_device_key(data.shape, indices)
    masks_only = all(idx is None or idx.dtype in (D.bool, D.uint8) for idx in indices)
    if not accumulate and masks_only:  # masks select each position once: a plain write is exact
        data[key] = vals
        return
    positions = xp.arange(data.size, dtype=np.int64).reshape(data.shape)[key]
    vals = xp.broadcast_to(vals, positions.shape).reshape(-1)
    positions = positions.reshape(-1)
    flat = data.reshape(-1) if data.flags.c_contiguous else xp.ascontiguousarray(data).reshape(-1)
    if accumulate:
        _ufunc_at(np.add, flat, positions, vals)
    else:
        keep = _keep_last(positions)
        flat[positions[keep]] = vals[keep]
    if not data.flags.c_contiguous:
        data[...] = flat.reshape(data.shape)


def _write_one_value(data, dim, mask, value, accumulate, xp):
    """``data[(slice(None),) * dim + (mask,)] = value`` (``+=`` with ``accumulate``) as a select over the mask
    broadcast to ``data``: the GPU never reports how many positions the mask selects (a host read)."""
    where = mask._data if mask._device.type != "cpu" else xp.asarray(mask._data)
    if where.dtype != np.bool_:
        where = where.astype(np.bool_)
    where = where.reshape((1,) * dim + where.shape + (1,) * (data.ndim - dim - where.ndim))
    if accumulate:  # a mask selects each position once: the sum is one addition per position
        value = data + value
    if data.dtype.name == "bfloat16":  # a select moves bits (CuPy's copyto may lack bfloat16)
        data, value = data.view(np.uint16), value.view(np.uint16)
    xp.copyto(data, value, where=where)


def _index_put_cpu(self, indices, values, accumulate=False):
    key = _numpy_key(self, indices)
    data = self._data
    if type(data) is not np.ndarray:
        _index_put_device(self, key, indices, values, accumulate)
        return
    vals = _value_array(values, data.dtype)
    try:
        if not accumulate:
            data[key] = vals
            return
        positions = np.arange(data.size, dtype=np.int64).reshape(data.shape)[key]
    except IndexError as exc:
        raise _rephrase_index_error(exc) from None
    vals = np.ascontiguousarray(np.broadcast_to(vals, positions.shape)).reshape(-1)
    positions = np.ascontiguousarray(positions).reshape(-1)
    if data.flags.c_contiguous and data.dtype.name in _C_ACCUMULATE_DTYPES:
        _C.index_accumulate(data.reshape(-1), positions, vals)
        return
    flat = np.ascontiguousarray(data).reshape(-1)
    np.add.at(flat, positions, vals)
    data[...] = flat.reshape(data.shape)


index_put_ = defop("index_put_", _index_put_meta, cpu=_index_put_cpu, kind="inplace")


def _index_put_decomp(input, indices, values, accumulate=False):
    from .creation import clone

    return index_put_(clone(input), indices, values, accumulate)


def _index_put_fn_meta(input, indices, values, accumulate=False):
    """Out-of-place :func:`index_put_`: a copy of ``input`` with ``values`` written at ``indices``."""
    _index_put_meta(input, indices, values, accumulate)
    return MetaArray(input._data.shape, input._data.dtype)


index_put = defop("index_put", _index_put_fn_meta, category="composite", decomposition=_index_put_decomp)
