"""Mask ops: masked_select, masked_fill, masked_scatter, and nonzero/argwhere (a mask's positions)."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._array_module import values_for_checks as _values_for_checks
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._shape_helpers import (
    _as_1d,
    _check_fill_value,
    _data_dependent,
    _def_inplace,
    _fill_tensor,
    _fresh,
    _require_tensor,
)
from ._shapes import broadcast_shapes
from .creation import _cast_scalar, clone
from .indexing import index as index_op
from .indexing import index_put
from .views import expand, narrow, reshape

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = [
    "masked_select", "masked_fill", "masked_fill_", "masked_scatter", "masked_scatter_", "nonzero", "argwhere"
]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


_mask_values = _values_for_checks  # the mask's array for counting (a GPU array is counted there, one host read)


def _masked_select_meta(input, mask):
    """The elements of ``input`` where the bool ``mask`` is True, as a 1-D tensor (``input`` and ``mask`` broadcast).

    Args:
        input (Tensor): the tensor.
        mask (Tensor): a bool tensor broadcastable with ``input``.

    Returns:
        Tensor: 1-D, in row-major order of the broadcast shape.

    Raises:
        RuntimeError: for a non-bool mask or shapes that don't broadcast.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1, 2], [3, 4]])
        >>> ember.masked_select(x, x > 1)
        tensor([2, 3, 4])
    """
    _require_tensor("masked_select", "input", input)
    _require_tensor("masked_select", "mask", mask)
    if mask.dtype is not D.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(input._data.shape, mask._data.shape)
    if math.prod(shape) == 0:
        return MetaArray((0,), input._data.dtype)
    if mask.device.type == "meta":
        raise _data_dependent("masked_select")
    count = int(np.count_nonzero(_mask_values(mask))) * (math.prod(shape) // max(mask.numel(), 1))
    return MetaArray((count,), input._data.dtype)


def _masked_select_cpu(input, mask):
    shape = broadcast_shapes(input._data.shape, mask._data.shape)
    return np.broadcast_to(input._data, shape)[np.broadcast_to(mask._data, shape)]


def _masked_select_decomp(input, mask):
    _masked_select_meta(input, mask)
    shape = broadcast_shapes(input._data.shape, mask._data.shape)
    return index_op(expand(input, shape), [expand(mask, shape)])


masked_select = defop("masked_select", _masked_select_meta, cpu=_masked_select_cpu, category=COMPOSITE,
                      decomposition=_masked_select_decomp, has_out=True)


def _masked_fill_meta(input, mask, value):
    """``input`` with ``value`` where the bool ``mask`` is True (``input`` and ``mask`` broadcast).

    Args:
        input (Tensor): the tensor.
        mask (Tensor): a bool tensor broadcastable with ``input``.
        value (Number or Tensor): the fill value (a zero-dim tensor is allowed);
            converted to ``input``'s dtype.

    Returns:
        Tensor: a new tensor of ``input``'s dtype and the broadcast shape.

    Raises:
        RuntimeError: for a non-bool mask, a value tensor with dimensions, or a
            value that ``input``'s dtype can't hold.

    Example:
        >>> import ember
        >>> x = ember.tensor([1., 2., 3.])
        >>> ember.masked_fill(x, x > 1, 0.)
        tensor([1., 0., 0.])
    """
    _require_tensor("masked_fill", "input", input)
    _require_tensor("masked_fill", "mask", mask)
    if mask.dtype is not D.bool:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype.name}")
    _check_fill_value("masked_fill_", value, input.dtype)
    return MetaArray(broadcast_shapes(input._data.shape, mask._data.shape), input._data.dtype)


def _masked_fill_cpu(input, mask, value):
    data = input._data
    shape = broadcast_shapes(data.shape, mask._data.shape)
    out = _fresh(np.broadcast_to(data, shape))
    np.copyto(out, _cast_scalar(value, data.dtype), where=mask._data)
    return out


def _masked_fill_decomp(input, mask, value):
    _masked_fill_meta(input, mask, value)
    shape = broadcast_shapes(input._data.shape, mask._data.shape)
    fill = _fill_tensor(value, input)
    if not shape:  # index_put takes no mask over zero dims: go through one element
        return reshape(index_put(reshape(input, 1), [reshape(mask, 1)], fill), ())
    return index_put(clone(expand(input, shape)), [expand(mask, shape)], fill)


masked_fill = defop("masked_fill", _masked_fill_meta, cpu=_masked_fill_cpu, category=COMPOSITE,
                    decomposition=_masked_fill_decomp)


def _masked_fill_inplace_cpu(self, mask, value):
    np.copyto(self._data, _cast_scalar(value, self._data.dtype), where=mask._data)


_def_inplace(masked_fill, _masked_fill_inplace_cpu)


# -- masked_fill on the GPU: a select, never a count -----------------------------------------------------------
# The decomposition writes through index_put with the mask, which needs the mask's count (a host read that waits
# for the GPU, in every causal attention's forward and backward). A fill needs no count: one `where` writes it.


def _device_fill_value(value, data, xp):
    """The fill ``value`` as a 0-d array of ``data``'s dtype on the GPU, or a numpy scalar: a tensor on the GPU
    is cast there (no host read), a number or CPU tensor as the CPU kernel casts it."""
    if isinstance(value, Tensor) and value._device.type != "cpu":
        return value._data.astype(data.dtype, copy=False)
    return _cast_scalar(value, data.dtype)


def _device_mask(mask, xp):
    data = mask._data
    return data if mask._device.type != "cpu" else xp.asarray(data)  # a 0-d CPU mask may join a cuda op


def _as_bits(array):
    """bfloat16 arrays as their uint16 bits (CuPy's select kernels may lack bfloat16; a select moves bits)."""
    return array.view(np.uint16) if array.dtype.name == "bfloat16" else array


def _masked_fill_cuda(input, mask, value):
    data = input._data
    xp = _array_namespace(data)
    fill = _device_fill_value(value, data, xp)
    out = xp.where(_device_mask(mask, xp), _as_bits(fill if hasattr(fill, "view") else np.asarray(fill)),
                   _as_bits(data))
    if out.dtype != _as_bits(data).dtype:  # the fill is of data's dtype: a wider promotion casts back exactly
        out = out.astype(_as_bits(data).dtype)
    return out.view(data.dtype) if out.dtype != data.dtype else out


def _masked_fill_inplace_cuda(self, mask, value):
    data = self._data
    xp = _array_namespace(data)
    fill = _device_fill_value(value, data, xp)
    xp.copyto(_as_bits(data), _as_bits(fill if hasattr(fill, "view") else np.asarray(fill)),
              where=_device_mask(mask, xp))


masked_fill.register_kernel("cuda", _masked_fill_cuda)
masked_fill.inplace.register_kernel("cuda", _masked_fill_inplace_cuda)


def _masked_scatter_meta(input, mask, source):
    """``input`` with the elements where ``mask`` is True replaced, in order, by the first elements of ``source``.

    Args:
        input (Tensor): the tensor.
        mask (Tensor): a bool tensor broadcastable with ``input``.
        source (Tensor): of ``input``'s dtype, with at least as many elements as
            ``mask`` has True entries (read in row-major order).

    Returns:
        Tensor: a new tensor of the broadcast shape.

    Raises:
        RuntimeError: for a non-bool mask, a ``source`` of another dtype, or too
            few elements in ``source``.

    Example:
        >>> import ember
        >>> x = ember.zeros(4)
        >>> ember.masked_scatter(x, ember.tensor([True, False, True, False]), ember.tensor([1., 2., 3.]))
        tensor([1., 0., 2., 0.])
    """
    _require_tensor("masked_scatter", "input", input)
    _require_tensor("masked_scatter", "mask", mask)
    _require_tensor("masked_scatter", "source", source)
    if mask.dtype is not D.bool:
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {_torch_name(mask.dtype)}"
        )
    if source.dtype is not input.dtype:
        raise RuntimeError(
            f"masked_scatter: expected self and source to have same dtypes but got {_torch_name(input.dtype)} and "
            f"{_torch_name(source.dtype)}"
        )
    shape = broadcast_shapes(input._data.shape, mask._data.shape)
    if mask.device.type != "meta":
        count = int(np.count_nonzero(np.broadcast_to(_mask_values(mask), shape)))
        if count > math.prod(source._data.shape):
            raise RuntimeError("Number of elements of source < number of ones in mask")
    return MetaArray(shape, input._data.dtype)


def _masked_scatter_into(out, mask, source):
    where = np.broadcast_to(mask._data, out.shape)
    count = int(np.count_nonzero(where))
    out[where] = source._data.reshape(-1)[:count]


def _masked_scatter_cpu(input, mask, source):
    shape = broadcast_shapes(input._data.shape, mask._data.shape)
    out = _fresh(np.broadcast_to(input._data, shape))
    _masked_scatter_into(out, mask, source)
    return out


def _masked_scatter_decomp(input, mask, source):
    _masked_scatter_meta(input, mask, source)
    shape = broadcast_shapes(input._data.shape, mask._data.shape)
    where = expand(mask, shape)
    count = index_op(where, [where])._data.shape[0]
    return index_put(clone(expand(input, shape)), [where], narrow(reshape(source, -1), 0, 0, count))


masked_scatter = defop("masked_scatter", _masked_scatter_meta, cpu=_masked_scatter_cpu, category=COMPOSITE,
                       decomposition=_masked_scatter_decomp)
_def_inplace(masked_scatter, lambda self, mask, source: _masked_scatter_into(self._data, mask, source))


# -- nonzero / argwhere ---------------------------------------------------------------------------------


def _nonzero_count(op, input):
    if math.prod(input._data.shape) == 0:
        return 0
    if input.device.type == "meta":
        raise _data_dependent(op)
    return int(np.count_nonzero(input._host_array()))


def _nonzero_meta(input, *, as_tuple=False):
    """Indices of the nonzero elements of ``input``.

    Args:
        input (Tensor): the tensor (a zero-dim one counts as 1-D here when
            ``as_tuple``).
        as_tuple (bool): return one 1-D index tensor per dimension instead of
            one 2-D tensor.

    Returns:
        Tensor or tuple[Tensor]: int64 indices in row-major order, of shape
        ``(count, input.dim())``, or a tuple of ``input.dim()`` tensors of
        shape ``(count,)``.

    Example:
        >>> import ember
        >>> ember.nonzero(ember.tensor([[0, 1], [2, 0]]))
        tensor([[0, 1],
                [1, 0]])
    """
    _require_tensor("nonzero", "input", input)
    count = _nonzero_count("nonzero", input)
    if as_tuple:
        return tuple(MetaArray((count,), np.dtype(np.int64)) for _ in range(max(input._data.ndim, 1)))
    return MetaArray((count, input._data.ndim), np.dtype(np.int64))


def _nonzero_cpu(input, *, as_tuple=False):
    data = input._data
    if as_tuple:
        return tuple(a.astype(np.int64, copy=False) for a in np.nonzero(data.reshape(_as_1d(data.shape))))
    return _array_namespace(data).ascontiguousarray(np.argwhere(data), dtype=np.int64)


nonzero = defop("nonzero", _nonzero_meta, cpu=_nonzero_cpu, has_out=True)


def _argwhere_meta(input):
    """``nonzero(input)``: the indices of the nonzero elements, one row per element.

    Example:
        >>> import ember
        >>> ember.argwhere(ember.tensor([0, 3, 0, 4]))
        tensor([[1],
                [3]])
    """
    _require_tensor("argwhere", "input", input)
    return MetaArray((_nonzero_count("argwhere", input), input._data.ndim), np.dtype(np.int64))


def _argwhere_decomp(input):
    _require_tensor("argwhere", "input", input)
    return nonzero(input)


argwhere = defop("argwhere", _argwhere_meta, cpu=_nonzero_cpu, category=COMPOSITE, decomposition=_argwhere_decomp)
