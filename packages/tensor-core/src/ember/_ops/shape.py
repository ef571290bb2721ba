"""Shape and indexing ops: cat/stack, repeat/tile/flip/roll, gather/scatter, index_*, masks, triangles, meshgrid.

Also the view-returning composites that the view prims of :mod:`ember._ops.views`
don't cover (``movedim``, ``unflatten``, ``broadcast_to``, ``tensor_split``,
``meshgrid``, ``atleast_1d``, ...): each is written over those prims, so it
returns a view wherever PyTorch does.

Scatter-style ops (``scatter``, ``scatter_add``, ``scatter_reduce``,
``index_add``, ``index_reduce``, ``put``) turn their index tensor into flat
positions of a contiguous destination and reduce the values there:
sum-accumulation goes through ``ember._C.index_accumulate`` (C++), the other
reductions through numpy's ``ufunc.at`` (means: sums and ``np.bincount``
counts), so repeated indices cost no Python loop. Index values are data, so their bounds are checked by the
kernels; every other argument check is in the meta functions.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings

import numpy as np

from .. import _C
from .. import _dtype as D
from .._layout import check_strided
from .._meta import MetaArray, contiguous_strides
from .._tensor import Tensor
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._shapes import broadcast_shapes, wrap_dim
from ._xp import array_namespace as _array_namespace  # numpy or CuPy (the CUDA backend)
from ._xp import as_array as _as_array
from ._xp import assign_last as _assign_last
from ._xp import check_bounds as _check_bounds
from ._xp import cuda_runs_cpu_kernel as _cuda_runs_cpu_kernel
from ._xp import keep_last as _keep_last
from ._xp import ufunc_at as _ufunc_at
from ._xp import values_for_checks as _values_for_checks
from .creation import _cast_scalar, check_scalar_fits, clone, copy_, full, zeros
from .indexing import index as index_op
from .indexing import index_put
from .views import (
    _expand_meta,
    _permute_meta,
    _reshape_meta,
    _slice_meta,
    _transpose_meta,
    _view_meta_fn,
    expand,
    narrow,
    permute,
    reshape,
    slice_op,
    transpose,
    unsqueeze,
    view,
)

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = [
    "tensor_split", "unflatten", "ravel", "view_as", "expand_as", "broadcast_to", "movedim", "moveaxis",
    "swapaxes", "swapdims", "repeat", "repeat_interleave", "fliplr", "flipud", "roll", "rot90",
    "index_select", "masked_select", "masked_fill", "masked_fill_", "masked_scatter", "masked_scatter_",
    "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
    "index_add", "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_", "index_reduce",
    "index_reduce_", "take", "take_along_dim", "put", "put_", "nonzero", "argwhere", "tril", "tril_", "triu",
    "triu_", "diag", "diag_embed", "diagflat", "trace",
]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}
#: Methods whose argument parsing differs from the function's (``x.flip(0, 1)``, ``x.tile(2)``);
#: filled in below, next to their ops.
OPERATORS: dict = {}

_LOW_FLOATS = D.numpy_dtype_set((D.float16, D.bfloat16))  # computed in float32, stored back (learns bfloat16 on load)
# dtypes that ember._C.index_accumulate handles
_C_ACCUMULATE = frozenset(
    np.dtype(n) for n in ("float32", "float64", "int64", "int32", "int16", "int8", "uint8", "complex64", "complex128")
)
_INT32_OR_64 = (D.int32, D.int64)
# dtypes whose gather runs in ember._C.gather (any of 1, 2, 4, 8, 16 bytes) and scatter_add in ember._C.scatter_add_
_C_GATHER_KINDS = "biufc"
_C_SCATTER_ADD = frozenset(np.dtype(n) for n in ("float32", "float64"))


# -- argument helpers -----------------------------------------------------------------------


def _require_tensor(op, arg, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _tensor_sequence(op, tensors, arg="tensors"):
    """``tensors`` as a tuple of tensors (a list or tuple is required, as in PyTorch)."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument '{arg}' (position 1) must be tuple of Tensors, not {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument '{arg}', but got {type(t).__name__}")
    return tuple(tensors)


def _varargs_tensors(op, tensors):
    """``f(a, b)`` or ``f([a, b])``: the tensors as a tuple."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    return tuple(tensors)


def _is_number(x):
    return isinstance(x, (bool, int, float, complex, np.number, np.bool_))


def _int_list(op, arg, value):
    """A sequence of ints (``dims``, ``sizes``); PyTorch refuses a bare int for these arguments."""
    if isinstance(value, Tensor) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, not {type(value).__name__}")
    result = []
    for v in value:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(
                f"{op}(): argument '{arg}' must be tuple of ints, but found element of type {type(v).__name__}"
            )
        result.append(v.__index__())
    return tuple(result)


def _int_or_list(value):
    return (value,) if isinstance(value, int) else tuple(int(v) for v in value)


def _sizes(sizes):
    """Varargs sizes ``(2, 3)`` or one sequence ``((2, 3),)`` as a tuple of ints (negatives kept)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    result = []
    for s in sizes:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"sizes must be a tuple of ints, but got an element of type {type(s).__name__}")
        result.append(s.__index__())
    return tuple(result)


def _promote_all(tensors):
    """PyTorch's promotion over tensors that all count as dimensioned (cat, stack)."""
    first = tensors[0]._data.dtype
    for t in tensors:
        if t._data.dtype != first:
            return functools.reduce(D.promote_types, (t.dtype for t in tensors))
    return D.from_numpy_dtype(first)


def _check_index_dtype(index, allowed, message, error=RuntimeError):
    if index.dtype not in allowed:
        raise error(message.format(name=_torch_name(index.dtype)))


def _fresh(array):
    """``array`` as a new C-contiguous array that shares no memory with any input."""
    xp = np if type(array) is np.ndarray else _array_namespace(array)  # CuPy arrays stay on their device
    return xp.array(array, order="C", copy=True)


def _astype(array, np_dtype):
    return array if array.dtype == np_dtype else array.astype(np_dtype)


def _shape_str(shape):
    return str(list(shape))


def _first_out_of_range(idx, low, high):
    """The first value of ``idx`` outside ``[low, high)``, or None."""
    if idx.size == 0:
        return None
    if type(idx) is not np.ndarray:  # CuPy: one reduction, one host read (as PyTorch's device-side assert syncs)
        return _check_bounds(idx, low, high)
    if idx.min() >= low and idx.max() < high:
        return None
    flat = idx.reshape(-1)
    return int(flat[np.flatnonzero((flat < low) | (flat >= high))[0]])


def _data_dependent(op):
    return NotImplementedError(
        f"{op}: the output shape is data-dependent, so a meta tensor can't compute it (run on a device with data)"
    )


def _dims_method(op, arg):
    """A Tensor method taking ``op``'s ``arg`` as varargs too: ``x.flip(0, 1)`` as well as ``x.flip((0, 1))``."""

    def method(self, *values, **kwargs):
        if arg in kwargs:
            return op(self, kwargs.pop(arg), *values, **kwargs)
        if len(values) == 1 and isinstance(values[0], (list, tuple)):
            values = values[0]
        return op(self, tuple(values), **kwargs)

    method.__name__ = method.__qualname__ = op.name
    method.__doc__ = f"``ember.{op.name}(self, {arg})``; the {arg} may also be given as separate ints."
    return method


# -- in-place variants -----------------------------------------------------------------------


def _write_through(self, fill):
    """Run ``fill(array)`` on ``self``'s data (a contiguous copy when the view isn't contiguous)."""
    data = self._data
    if data.flags.c_contiguous:
        fill(data)
        return
    tmp = _fresh(data)
    fill(tmp)
    np.copyto(data, tmp)


def _def_inplace(op, kernel):
    """Register ``op.name + "_"``: ``op`` whose result is written into its first argument.

    ``kernel(self, *args, **kwargs)`` writes into ``self._data`` directly. The
    decomposition (for backends without a kernel) is ``copy_(self, op(...))``.
    """

    def meta(self, *args, **kwargs):
        result = op.meta(self, *args, **kwargs)
        if tuple(result.shape) != tuple(self._data.shape):
            raise RuntimeError(
                f"output with shape {_shape_str(self._data.shape)} doesn't match the broadcast shape "
                f"{_shape_str(result.shape)}"
            )
        return self._data

    def decomposition(self, *args, **kwargs):
        meta(self, *args, **kwargs)
        return copy_(self, op(self, *args, **kwargs))

    meta.__name__ = op.name + "_"
    meta.__doc__ = f"In-place version of :func:`ember.{op.name}`: writes the result into ``self`` and returns it."
    inplace = defop(
        op.name + "_", meta, cpu=kernel, kind="inplace", category=COMPOSITE, decomposition=decomposition, tags=op.tags
    )
    inplace.functional = op
    op.inplace = inplace
    return inplace


def _def_multi_view(name, views, decomposition=None):
    """Register a composite whose outputs view *different* inputs (``broadcast_tensors``, ``meshgrid``, ...).

    Kind "view" would make every output a view of the first argument, so these
    are kind "other" (the function returns the final tensors): ``views``,
    written in view ops, is both the meta function (checks, and the kernel of
    the meta device, where it builds views of meta tensors) and, unless given,
    the decomposition that every other device runs after it.
    """
    return defop(name, views, category=COMPOSITE, kind="other", decomposition=decomposition or views)


# -- cat / stack -------------------------------------------------------------------------------


def _is_legacy_empty(shape):
    return len(shape) == 1 and shape[0] == 0


def _cat_shape(op, shapes, dim):
    """Output shape of concatenating ``shapes`` along ``dim``; 1-D empty shapes are skipped (PyTorch's legacy rule)."""
    kept = [(i, s) for i, s in enumerate(shapes) if not _is_legacy_empty(s)]
    if not kept:
        return (0,)
    first_i, first = kept[0]
    d = wrap_dim(dim, len(first))
    total = 0
    for i, s in kept:
        if len(s) != len(first):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(first)} and {len(s)}")
        for k, (a, b) in enumerate(zip(first, s)):
            if k != d and a != b:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {a} but got size {b} for "
                    f"tensor number {i} in the list."
                )
        total += s[d]
    return tuple(first[:d]) + (total,) + tuple(first[d + 1 :])


def _cat_meta(tensors, dim=0):
    """Concatenate ``tensors`` along ``dim``.

    All tensors must have the same shape except in ``dim``. The result has
    the promoted dtype of all inputs. 1-D tensors with no elements are
    skipped, as in PyTorch (so ``cat([empty(0), x])`` works for any ``x``).

    Args:
        tensors (sequence of Tensor): at least one tensor, none zero-dimensional.
        dim (int): the dimension to concatenate along.

    Returns:
        Tensor: a new tensor.

    Raises:
        ValueError: for an empty sequence.
        RuntimeError: for zero-dim tensors, different numbers of dimensions or
            sizes that differ outside ``dim``.
        IndexError: for an out-of-range ``dim``.

    Example:
        >>> import ember
        >>> ember.cat([ember.tensor([1, 2]), ember.tensor([3.])])
        tensor([1., 2., 3.])
    """
    tensors = _tensor_sequence("cat", tensors)
    if not tensors:
        raise ValueError("cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t._data.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    shape = _cat_shape("cat", [t._data.shape for t in tensors], dim)
    return MetaArray(shape, _promote_all(tensors).numpy_dtype)


def _cat_arrays(arrays, dim, np_dtype):
    kept = [a if a.dtype == np_dtype else a.astype(np_dtype) for a in arrays if a.shape != (0,)]
    if not kept:
        return np.empty((0,), np_dtype)
    d = dim + kept[0].ndim if dim < 0 else dim
    return np.concatenate(kept, axis=d)


def _cat_cpu(tensors, dim=0):
    return _cat_arrays([t._data for t in tensors], dim, _promote_all(tensors).numpy_dtype)


cat = defop("cat", _cat_meta, cpu=_cat_cpu, has_out=True)


def _concat_meta(tensors, dim=0):
    """Alias of :func:`ember.cat`."""
    return _cat_meta(tensors, dim)


def _concat_decomp(tensors, dim=0):
    return cat(tensors, dim)


concat = defop("concat", _concat_meta, category=COMPOSITE, decomposition=_concat_decomp, has_out=True)


def _concatenate_meta(tensors, axis=0):
    """Alias of :func:`ember.cat` (numpy's name, with ``axis`` for ``dim``)."""
    return _cat_meta(tensors, axis)


def _concatenate_decomp(tensors, axis=0):
    return cat(tensors, axis)


concatenate = defop("concatenate", _concatenate_meta, category=COMPOSITE, decomposition=_concatenate_decomp,
                    has_out=True)


def _stack_meta(tensors, dim=0):
    """Stack tensors of equal shape along a new dimension ``dim``.

    Args:
        tensors (sequence of Tensor): at least one tensor, all of the same shape.
        dim (int): where the new dimension goes, in ``[-ndim - 1, ndim]``.

    Returns:
        Tensor: a new tensor of the promoted dtype with one more dimension.

    Raises:
        RuntimeError: for an empty sequence or tensors of different shapes.
        IndexError: for an out-of-range ``dim``.

    Example:
        >>> import ember
        >>> ember.stack([ember.tensor([1, 2]), ember.tensor([3, 4])], dim=1)
        tensor([[1, 3],
                [2, 4]])
    """
    tensors = _tensor_sequence("stack", tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {_shape_str(shape)} at entry 0 and "
                f"{_shape_str(t._data.shape)} at entry {i}"
            )
    d = wrap_dim(dim, len(shape) + 1, scalar_ok=False)
    return MetaArray(tuple(shape[:d]) + (len(tensors),) + tuple(shape[d:]), _promote_all(tensors).numpy_dtype)


def _stack_cpu(tensors, dim=0):
    np_dtype = _promote_all(tensors).numpy_dtype
    d = wrap_dim(dim, tensors[0]._data.ndim + 1, scalar_ok=False)
    return np.stack([_astype(t._data, np_dtype) for t in tensors], axis=d)


def _stack_decomp(tensors, dim=0):
    _stack_meta(tensors, dim)
    d = wrap_dim(dim, tensors[0]._data.ndim + 1, scalar_ok=False)
    return cat([unsqueeze(t, d) for t in tensors], d)


stack = defop("stack", _stack_meta, cpu=_stack_cpu, category=COMPOSITE, decomposition=_stack_decomp, has_out=True)


def _atleast_shape(shape, n):
    """The shape ``atleast_{n}d`` gives (numpy's and PyTorch's rule for 3-D: (n,) -> (1, n, 1))."""
    if len(shape) >= n:
        return tuple(shape)
    if n == 1:
        return (1,)
    if n == 2:
        return (1,) * (2 - len(shape)) + tuple(shape)
    return {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}[len(shape)]


def _stacker(name, ndim, cat_dim, summary, example):
    """hstack / vstack / dstack: ``atleast_{ndim}d`` of each tensor, then cat along ``cat_dim``."""

    def dim_for(shapes):
        if name == "hstack":
            return 0 if len(shapes[0]) == 1 else 1
        return cat_dim

    def meta(tensors):
        tensors = _tensor_sequence(name, tensors)
        if not tensors:
            raise RuntimeError(f"{name} expects a non-empty TensorList")
        shapes = [_atleast_shape(t._data.shape, ndim) for t in tensors]
        return MetaArray(_cat_shape(name, shapes, dim_for(shapes)), _promote_all(tensors).numpy_dtype)

    def cpu(tensors):
        arrays = [t._data.reshape(_atleast_shape(t._data.shape, ndim)) for t in tensors]
        return _cat_arrays(arrays, dim_for([a.shape for a in arrays]), _promote_all(tensors).numpy_dtype)

    def decomposition(tensors):
        meta(tensors)
        parts = [reshape(t, _atleast_shape(t._data.shape, ndim)) for t in tensors]
        return cat(parts, dim_for([p._data.shape for p in parts]))

    meta.__name__ = name
    meta.__doc__ = f"""{summary}

    Args:
        tensors (sequence of Tensor): at least one tensor.

    Returns:
        Tensor: a new tensor of the promoted dtype.

    Raises:
        RuntimeError: for an empty sequence or sizes that don't fit together.

    Example:
        >>> import ember
{example}
    """
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, has_out=True)


hstack = _stacker(
    "hstack", 1, 1,
    "Concatenate horizontally: along dim 0 for 1-D tensors, dim 1 otherwise (0-D tensors count as 1-D).",
    "        >>> ember.hstack([ember.tensor([1, 2]), ember.tensor([3])])\n        tensor([1, 2, 3])",
)
vstack = _stacker(
    "vstack", 2, 0, "Concatenate vertically (along dim 0) after making every tensor at least 2-D.",
    "        >>> ember.vstack([ember.tensor([1, 2]), ember.tensor([3, 4])])\n"
    "        tensor([[1, 2],\n                [3, 4]])",
)
dstack = _stacker(
    "dstack", 3, 2, "Concatenate depthwise (along dim 2) after making every tensor at least 3-D.",
    "        >>> ember.dstack([ember.tensor([1, 2]), ember.tensor([3, 4])]).shape\n        ember.Size([1, 2, 2])",
)


def _column_shape(shape):
    return (math.prod(shape), 1) if len(shape) <= 1 else tuple(shape)


def _column_stack_meta(tensors):
    """Stack tensors as columns: 0-D and 1-D tensors become columns, then everything is concatenated along dim 1.

    Args:
        tensors (sequence of Tensor): at least one tensor.

    Returns:
        Tensor: a new 2-D (or higher) tensor of the promoted dtype.

    Raises:
        RuntimeError: for an empty sequence or row counts that differ.

    Example:
        >>> import ember
        >>> ember.column_stack([ember.tensor([1, 2]), ember.tensor([3, 4])])
        tensor([[1, 3],
                [2, 4]])
    """
    tensors = _tensor_sequence("column_stack", tensors)
    if not tensors:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    shapes = [_column_shape(t._data.shape) for t in tensors]
    return MetaArray(_cat_shape("column_stack", shapes, 1), _promote_all(tensors).numpy_dtype)


def _column_stack_cpu(tensors):
    arrays = [t._data.reshape(_column_shape(t._data.shape)) for t in tensors]
    return _cat_arrays(arrays, 1, _promote_all(tensors).numpy_dtype)


def _column_stack_decomp(tensors):
    _column_stack_meta(tensors)
    return cat([reshape(t, _column_shape(t._data.shape)) for t in tensors], 1)


column_stack = defop("column_stack", _column_stack_meta, cpu=_column_stack_cpu, category=COMPOSITE,
                     decomposition=_column_stack_decomp, has_out=True)


# -- split / flatten views -----------------------------------------------------------------------


def _tensor_split_bounds(input, indices_or_sections, dim):
    """(dim, [(start, end), ...]) of the pieces, as Python slice bounds (clamped, negatives wrap)."""
    if input._data.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = wrap_dim(dim, input._data.ndim)
    size = input._data.shape[d]
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype is not D.int64:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                f"{_torch_name(spec.dtype)}"
            )
        if spec._data.ndim > 1:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional "
                f"tensor, but got a tensor with {spec._data.ndim} dims"
            )
        if spec.device.type == "meta":
            raise _data_dependent("tensor_split with a tensor of indices or sections")
        values = spec._host_array()
        spec = int(values) if values.ndim == 0 else [int(v) for v in values]
    if isinstance(spec, bool) or not isinstance(spec, (int, np.integer, list, tuple)):
        raise TypeError(
            "tensor_split(): argument 'indices_or_sections' must be int, tuple of ints or Tensor, not "
            f"{type(spec).__name__}"
        )
    if isinstance(spec, (int, np.integer)):
        sections = int(spec)
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        base, extra = divmod(size, sections)
        bounds, start = [], 0
        for i in range(sections):
            length = base + (1 if i < extra else 0)
            bounds.append((start, start + length))
            start += length
        return d, bounds
    points = [int(p) for p in spec]
    starts = [0, *points]
    ends = [*points, None]
    return d, list(zip(starts, ends))


def _tensor_split_meta(input, indices_or_sections, dim=0):
    """Split ``input`` along ``dim`` into views, by a number of sections or at indices (numpy's ``array_split``).

    Args:
        input (Tensor): at least 1-D.
        indices_or_sections (int, sequence of int, or Tensor): ``n`` gives ``n``
            pieces of sizes differing by at most one (the first ones larger);
            a sequence of indices gives the pieces between them (slice rules:
            negative indices count from the end, out-of-range ones clamp). A
            zero-dim int64 tensor counts as ``n``, a 1-D one as indices.
        dim (int): the dimension to split.

    Returns:
        tuple[Tensor]: views of ``input``.

    Raises:
        RuntimeError: for a zero-dim ``input``, a non-positive number of sections,
            or an index tensor that is not int64 or has more than one dimension.

    Example:
        >>> import ember
        >>> ember.tensor_split(ember.arange(7), 3)
        (tensor([0, 1, 2]), tensor([3, 4]), tensor([5, 6]))
    """
    _require_tensor("tensor_split", "input", input)
    d, bounds = _tensor_split_bounds(input, indices_or_sections, dim)
    return tuple(_slice_meta(input, d, start, end) for start, end in bounds)


def _tensor_split_decomp(input, indices_or_sections, dim=0):
    _require_tensor("tensor_split", "input", input)
    d, bounds = _tensor_split_bounds(input, indices_or_sections, dim)
    return tuple(slice_op(input, d, start, end) for start, end in bounds)


tensor_split = defop("tensor_split", _tensor_split_meta, category=COMPOSITE, kind="view",
                     decomposition=_tensor_split_decomp)


def _unflatten_shape(input, dim, sizes):
    _require_tensor("unflatten", "input", input)
    if input._data.ndim == 0:
        raise RuntimeError("unflatten: cannot unflatten a zero-dimensional tensor")
    d = wrap_dim(dim, input._data.ndim)
    sizes = _int_list("unflatten", "sizes", sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    size = input._data.shape[d]
    known = math.prod(s for s in sizes if s != -1)
    inferred = [i for i, s in enumerate(sizes) if s == -1]
    ok = len(inferred) <= 1 and all(s >= -1 for s in sizes)
    if ok and inferred:
        ok = known != 0 and size % known == 0
        if ok:
            sizes = tuple(size // known if s == -1 else s for s in sizes)
    elif ok:
        ok = known == size
    if not ok:
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {d} ({size}) in the "
            "input tensor"
        )
    shape = input._data.shape
    return tuple(shape[:d]) + tuple(sizes) + tuple(shape[d + 1 :])


def _unflatten_meta(input, dim, sizes):
    """A view of ``input`` with dimension ``dim`` split into ``sizes`` (one of them may be -1).

    Args:
        input (Tensor): at least 1-D.
        dim (int): the dimension to split.
        sizes (sequence of int): the new sizes; their product must be ``input.size(dim)``.

    Raises:
        RuntimeError: if ``sizes`` is empty or doesn't multiply up to the dimension's size.

    Example:
        >>> import ember
        >>> ember.arange(6).unflatten(0, (2, 3))
        tensor([[0, 1, 2],
                [3, 4, 5]])
    """
    return _view_meta_fn(input, _unflatten_shape(input, dim, sizes))


def _unflatten_decomp(input, dim, sizes):
    return view(input, _unflatten_shape(input, dim, sizes))


unflatten = defop("unflatten", _unflatten_meta, category=COMPOSITE, kind="view", decomposition=_unflatten_decomp)


def _ravel_meta(input):
    """``input`` flattened to 1-D: a view when the strides allow, a contiguous copy otherwise.

    Example:
        >>> import ember
        >>> ember.ravel(ember.tensor([[1, 2], [3, 4]]))
        tensor([1, 2, 3, 4])
    """
    _require_tensor("ravel", "input", input)
    return _reshape_meta(input, (-1,))


def _ravel_decomp(input):
    _require_tensor("ravel", "input", input)
    return reshape(input, -1)


ravel = defop("ravel", _ravel_meta, category=COMPOSITE, kind="view", decomposition=_ravel_decomp)


def _view_as_meta(input, other):
    """``input.view(other.shape)``: a view of ``input`` with ``other``'s shape.

    Raises:
        RuntimeError: as :func:`ember.view`.
    """
    _require_tensor("view_as", "other", other)
    return _view_meta_fn(input, tuple(other._data.shape))


def _view_as_decomp(input, other):
    _require_tensor("view_as", "other", other)
    return view(input, tuple(other._data.shape))


view_as = defop("view_as", _view_as_meta, category=COMPOSITE, kind="view", decomposition=_view_as_decomp)


# -- broadcasting and moving dims ----------------------------------------------------------------


def _expand_as_meta(input, other):
    """``input.expand(other.shape)``: a broadcast view of ``input`` with ``other``'s shape.

    Raises:
        RuntimeError: if ``input`` doesn't broadcast to ``other``'s shape.
    """
    _require_tensor("expand_as", "other", other)
    return _expand_meta(input, tuple(other._data.shape))


def _expand_as_decomp(input, other):
    _require_tensor("expand_as", "other", other)
    return expand(input, tuple(other._data.shape))


expand_as = defop("expand_as", _expand_as_meta, category=COMPOSITE, kind="view", decomposition=_expand_as_decomp)


def _broadcast_to_meta(input, size):
    """A view of ``input`` broadcast to ``size`` (-1 keeps a size), like :meth:`Tensor.expand`.

    Args:
        input (Tensor): the tensor.
        size (sequence of int): the target shape.

    Raises:
        RuntimeError: if ``input`` doesn't broadcast to ``size``.

    Example:
        >>> import ember
        >>> ember.broadcast_to(ember.tensor([1, 2]), (2, 2))
        tensor([[1, 2],
                [1, 2]])
    """
    _require_tensor("broadcast_to", "input", input)
    return _expand_meta(input, _int_list("broadcast_to", "size", size))


def _broadcast_to_decomp(input, size):
    _require_tensor("broadcast_to", "input", input)
    return expand(input, _int_list("broadcast_to", "size", size))


broadcast_to = defop("broadcast_to", _broadcast_to_meta, category=COMPOSITE, kind="view",
                     decomposition=_broadcast_to_decomp)


def _check_tensor_args(name, tensors):
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected Tensor as element {i} in argument 0, but got {type(t).__name__}")


def _broadcast_tensors(*tensors):
    """Broadcast tensors to their common shape, as views.

    Args:
        *tensors (Tensor): any number of tensors.

    Returns:
        tuple[Tensor]: one view per input, all of the broadcast shape.

    Raises:
        RuntimeError: if the shapes don't broadcast together.

    Example:
        >>> import ember
        >>> a, b = ember.broadcast_tensors(ember.tensor([[1], [2]]), ember.tensor([3, 4, 5]))
        >>> a.shape, b.shape
        (ember.Size([2, 3]), ember.Size([2, 3]))
    """
    _check_tensor_args("broadcast_tensors", tensors)
    shape = broadcast_shapes(*(t._data.shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


broadcast_tensors = _def_multi_view("broadcast_tensors", _broadcast_tensors)


def _movedim_perm(name, input, source, destination):
    ndim = input._data.ndim
    src = [wrap_dim(s, ndim) for s in _int_or_list(source)]
    dst = [wrap_dim(d, ndim) for d in _int_or_list(destination)]
    if len(src) != len(dst):
        raise RuntimeError(
            f"{name}: Invalid source or destination dims: source ({list(_int_or_list(source))} dims) should contain "
            f"the same number of dims as destination ({list(_int_or_list(destination))} dims)"
        )
    if len(set(src)) != len(src):
        raise RuntimeError(f"{name}: repeated dim in `source` ({list(_int_or_list(source))})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"{name}: repeated dim in `destination` ({list(_int_or_list(destination))})")
    if ndim == 0:
        return ()
    order = [n for n in range(ndim) if n not in src]
    for dest, s in sorted(zip(dst, src)):
        order.insert(dest, s)
    return tuple(order)


def _movedim_meta(input, source, destination):
    """A view of ``input`` with the dims in ``source`` moved to the positions in ``destination``.

    The other dims keep their order.

    Args:
        input (Tensor): the tensor.
        source (int or sequence of int): dims to move.
        destination (int or sequence of int): where they go (same length).

    Raises:
        RuntimeError: for repeated dims or lengths that differ.
        IndexError: for out-of-range dims.

    Example:
        >>> import ember
        >>> ember.movedim(ember.zeros(2, 3, 4), 0, -1).shape
        ember.Size([3, 4, 2])
    """
    return _permute_meta(input, _movedim_perm("movedim", input, source, destination))


def _movedim_decomp(input, source, destination):
    return permute(input, _movedim_perm("movedim", input, source, destination))


movedim = defop("movedim", _movedim_meta, category=COMPOSITE, kind="view", decomposition=_movedim_decomp)


def _moveaxis_meta(input, source, destination):
    """Alias of :func:`ember.movedim` (numpy's name)."""
    return _permute_meta(input, _movedim_perm("movedim", input, source, destination))


moveaxis = defop("moveaxis", _moveaxis_meta, category=COMPOSITE, kind="view", decomposition=_movedim_decomp)


def _swapaxes_meta(input, axis0, axis1):
    """Alias of :func:`ember.transpose` (numpy's name and argument names)."""
    return _transpose_meta(input, axis0, axis1)


def _swapaxes_decomp(input, axis0, axis1):
    return transpose(input, axis0, axis1)


swapaxes = defop("swapaxes", _swapaxes_meta, category=COMPOSITE, kind="view", decomposition=_swapaxes_decomp)


def _swapdims_meta(input, dim0, dim1):
    """Alias of :func:`ember.transpose`."""
    return _transpose_meta(input, dim0, dim1)


def _swapdims_decomp(input, dim0, dim1):
    return transpose(input, dim0, dim1)


swapdims = defop("swapdims", _swapdims_meta, category=COMPOSITE, kind="view", decomposition=_swapdims_decomp)


# -- repeat / tile / repeat_interleave ---------------------------------------------------------------


def _repeat_shape(input, repeats):
    shape = input._data.shape
    if len(repeats) < len(shape):
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    padded = (1,) * (len(repeats) - len(shape)) + tuple(shape)
    result = tuple(p * r for p, r in zip(padded, repeats))
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(result)}: {list(result)}")
    return padded, result


def _repeat_meta(input, *sizes):
    """``input`` repeated ``sizes[i]`` times along each dim (``Tensor.repeat``; numpy's ``tile``).

    When ``sizes`` has more entries than ``input`` has dims, ``input`` is
    treated as having leading size-1 dims.

    Args:
        input (Tensor): the tensor.
        *sizes (int or sequence of int): repetitions per dimension.

    Raises:
        RuntimeError: for fewer sizes than dims, or negative sizes.

    Example:
        >>> import ember
        >>> ember.tensor([1, 2]).repeat(2, 2)
        tensor([[1, 2, 1, 2],
                [1, 2, 1, 2]])
    """
    _require_tensor("repeat", "input", input)
    _, result = _repeat_shape(input, _sizes(sizes))
    return MetaArray(result, input._data.dtype)


def _repeat_cpu(input, *sizes):
    repeats = _sizes(sizes)
    padded, _ = _repeat_shape(input, repeats)
    return _fresh(np.tile(input._data.reshape(padded), repeats))


def _repeat_decomp(input, *sizes):
    repeats = _sizes(sizes)
    padded, result = _repeat_shape(input, repeats)
    # view as (1, s0, 1, s1, ...), broadcast to (r0, s0, r1, s1, ...), then merge the pairs (a copy)
    interleaved = tuple(x for s in padded for x in (1, s))
    expanded = tuple(x for r, s in zip(repeats, padded) for x in (r, s))
    return reshape(expand(reshape(input, interleaved), expanded), result)


repeat = defop("repeat", _repeat_meta, cpu=_repeat_cpu, category=COMPOSITE, decomposition=_repeat_decomp)


def _tile_repeats(input, dims):
    dims = _int_list("tile", "dims", dims)
    return (1,) * (input._data.ndim - len(dims)) + dims


def _tile_meta(input, dims):
    """``input`` repeated ``dims[i]`` times along each dimension (numpy's ``tile``).

    Fewer ``dims`` than dimensions are padded with leading 1s; more ``dims``
    add leading dimensions to ``input``.

    Args:
        input (Tensor): the tensor.
        dims (sequence of int): repetitions per dimension.

    Raises:
        RuntimeError: for negative repetitions.

    Example:
        >>> import ember
        >>> ember.tile(ember.tensor([1, 2]), (2,))
        tensor([1, 2, 1, 2])
    """
    _require_tensor("tile", "input", input)
    return _repeat_meta(input, _tile_repeats(input, dims))


def _tile_cpu(input, dims):
    return _repeat_cpu(input, _tile_repeats(input, dims))


def _tile_decomp(input, dims):
    _require_tensor("tile", "input", input)
    return repeat(input, _tile_repeats(input, dims))


tile = defop("tile", _tile_meta, cpu=_tile_cpu, category=COMPOSITE, decomposition=_tile_decomp)
OPERATORS["tile"] = _dims_method(tile, "dims")


def _repeats_values(repeats):
    """The host values of a repeats tensor (int32/int64, 0-D or 1-D)."""
    return repeats._host_array().astype(np.int64, copy=False)


def _repeat_interleave_plan(input, repeats, dim, output_size):
    """(axis of the flattened-or-not input, output length along it or None when data-dependent)."""
    if repeats is None:  # repeat_interleave(repeats): input holds the repeats
        if input._data.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if input.dtype not in _INT32_OR_64:
            raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for \'{_torch_name(input.dtype)}\'')
        return 0, _repeats_total(input, None, output_size)
    ndim = input._data.ndim
    if dim is None:
        d, size = 0, math.prod(input._data.shape)
    else:
        d = wrap_dim(dim, ndim)
        size = input._data.shape[d] if ndim else 1
    if isinstance(repeats, Tensor):
        if repeats._data.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.dtype not in _INT32_OR_64:
            raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for \'{_torch_name(repeats.dtype)}\'')
        count = math.prod(repeats._data.shape)
        if count == 1:
            if repeats.device.type == "meta":
                raise _data_dependent("repeat_interleave with a tensor of repeats")
            repeats = int(_repeats_values(repeats).reshape(-1)[0])
        else:
            if count != size:
                raise RuntimeError(
                    "repeats must have the same size as input along dim, but got repeats.size(0) = "
                    f"{count} and input.size({d}) = {size}"
                )
            return d, _repeats_total(repeats, size, output_size)
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)):
        raise TypeError(f"repeat_interleave(): argument 'repeats' must be int or Tensor, not {type(repeats).__name__}")
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    total = size * int(repeats)
    if output_size is not None and output_size != total:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {total} but got {output_size}")
    return d, total


def _repeats_total(repeats, size, output_size):
    if repeats.device.type == "meta":
        if output_size is None:
            raise _data_dependent("repeat_interleave with a tensor of repeats")
        return output_size
    values = _repeats_values(repeats)
    if values.size and values.min() < 0:
        raise RuntimeError("repeats can not be negative")
    total = int(values.sum())
    if output_size is not None and output_size != total:
        raise RuntimeError("allocated size does not match required size")
    return total


def _repeat_interleave_meta(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (or each slice along ``dim``) of ``input`` ``repeats`` times, keeping their order.

    With ``repeats`` omitted, ``input`` is a 1-D integer tensor of repeat
    counts and the result is ``arange(len(input))`` repeated by them.

    Args:
        input (Tensor): the tensor.
        repeats (int or Tensor, optional): one count for all, or one per slice
            along ``dim`` (an int32/int64 tensor; one element broadcasts).
        dim (int, optional): the dimension to repeat along; None flattens
            ``input`` first.
        output_size (int, optional): the total length along ``dim``, if known
            (saves reading ``repeats``; must be right).

    Returns:
        Tensor: a new tensor (1-D when ``dim`` is None).

    Raises:
        RuntimeError: for negative repeats, a repeats tensor whose length
            differs from the dimension, or a wrong ``output_size``.

    Example:
        >>> import ember
        >>> ember.repeat_interleave(ember.tensor([[1, 2], [3, 4]]), ember.tensor([1, 2]), dim=0)
        tensor([[1, 2],
                [3, 4],
                [3, 4]])
    """
    _require_tensor("repeat_interleave", "input", input)
    d, total = _repeat_interleave_plan(input, repeats, dim, output_size)
    if repeats is None or dim is None or input._data.ndim == 0:
        return MetaArray((total,), input._data.dtype)
    shape = list(input._data.shape)
    shape[d] = total
    return MetaArray(tuple(shape), input._data.dtype)


def _repeat_interleave_cpu(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:
        counts = _repeats_values(input)
        return np.repeat(np.arange(counts.size, dtype=input._data.dtype), counts)
    data = input._data
    if dim is None or data.ndim == 0:
        data, d = data.reshape(-1), 0
    else:
        d = wrap_dim(dim, data.ndim)
    if isinstance(repeats, Tensor):
        counts = _repeats_values(repeats).reshape(-1)
        counts = int(counts[0]) if counts.size == 1 else counts
    else:
        counts = int(repeats)
    return _fresh(np.repeat(data, counts, axis=d))


def _repeat_interleave_decomp(input, repeats=None, dim=None, *, output_size=None):
    from .._creation import tensor

    d, _ = _repeat_interleave_plan(input, repeats, dim, output_size)
    if repeats is None:
        counts = _repeats_values(input)
        return tensor(np.repeat(np.arange(counts.size), counts), dtype=input.dtype, device=input.device)
    source = reshape(input, -1) if dim is None or input._data.ndim == 0 else input
    if isinstance(repeats, Tensor) and math.prod(repeats._data.shape) != 1:
        positions = repeat_interleave(repeats, output_size=output_size)
        return index_select(source, d, positions.to(D.int64))
    count = int(_repeats_values(repeats).reshape(-1)[0]) if isinstance(repeats, Tensor) else int(repeats)
    shape = tuple(source._data.shape)
    # (.., n, ..) -> (.., n, 1, ..) -> (.., n, count, ..) -> (.., n * count, ..)
    expanded = expand(unsqueeze(source, d + 1), shape[: d + 1] + (count,) + shape[d + 1 :])
    return reshape(expanded, shape[:d] + (shape[d] * count,) + shape[d + 1 :])


repeat_interleave = defop("repeat_interleave", _repeat_interleave_meta, cpu=_repeat_interleave_cpu,
                          category=COMPOSITE, decomposition=_repeat_interleave_decomp)


# -- flip / roll / rot90 -----------------------------------------------------------------------------


def _flip_dims(name, input, dims):
    ndim = input._data.ndim
    wrapped = [wrap_dim(d, ndim) for d in _int_list(name, "dims", dims)]
    seen = set()
    for d in wrapped:
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return tuple(wrapped) if ndim else ()


def _flip_meta(input, dims):
    """``input`` with the order of elements reversed along each dim in ``dims`` (a copy).

    Args:
        input (Tensor): the tensor.
        dims (sequence of int): dims to reverse.

    Raises:
        RuntimeError: if a dim appears twice.
        IndexError: for out-of-range dims.

    Example:
        >>> import ember
        >>> ember.flip(ember.tensor([[1, 2], [3, 4]]), (1,))
        tensor([[2, 1],
                [4, 3]])
    """
    _require_tensor("flip", "input", input)
    _flip_dims("flip", input, dims)
    return MetaArray(input._data.shape, input._data.dtype)


def _flip_cpu(input, dims):
    return _fresh(np.flip(input._data, axis=_flip_dims("flip", input, dims)))


flip = defop("flip", _flip_meta, cpu=_flip_cpu)


OPERATORS["flip"] = _dims_method(flip, "dims")


def _fliplr_meta(input):
    """``input`` reversed along dim 1 (left/right); needs at least 2 dims.

    Raises:
        RuntimeError: for tensors of fewer than 2 dims.
    """
    _require_tensor("fliplr", "input", input)
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return MetaArray(input._data.shape, input._data.dtype)


def _fliplr_decomp(input):
    _fliplr_meta(input)
    return flip(input, (1,))


fliplr = defop("fliplr", _fliplr_meta, cpu=lambda input: _fresh(input._data[:, ::-1]), category=COMPOSITE,
               decomposition=_fliplr_decomp)


def _flipud_meta(input):
    """``input`` reversed along dim 0 (up/down); needs at least 1 dim.

    Raises:
        RuntimeError: for zero-dim tensors.
    """
    _require_tensor("flipud", "input", input)
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return MetaArray(input._data.shape, input._data.dtype)


def _flipud_decomp(input):
    _flipud_meta(input)
    return flip(input, (0,))


flipud = defop("flipud", _flipud_meta, cpu=lambda input: _fresh(input._data[::-1]), category=COMPOSITE,
               decomposition=_flipud_decomp)


def _roll_plan(input, shifts, dims):
    shifts = _int_or_list(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return shifts, None
    dims = _int_or_list(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    return shifts, tuple(wrap_dim(d, input._data.ndim, scalar_ok=False) for d in dims)


def _roll_meta(input, shifts, dims=None):
    """``input`` rolled: elements shifted by ``shifts`` along ``dims``, wrapping around (a copy).

    Args:
        input (Tensor): the tensor.
        shifts (int or sequence of int): shift per dim (negative rolls backwards).
        dims (int or sequence of int, optional): the dims; None rolls the
            flattened tensor and restores its shape.

    Raises:
        RuntimeError: if ``shifts`` and ``dims`` differ in length.
        IndexError: for out-of-range dims.

    Example:
        >>> import ember
        >>> ember.roll(ember.tensor([1, 2, 3, 4]), 1)
        tensor([4, 1, 2, 3])
    """
    _require_tensor("roll", "input", input)
    _roll_plan(input, shifts, dims)
    return MetaArray(input._data.shape, input._data.dtype)


def _roll_cpu(input, shifts, dims=None):
    shifts, dims = _roll_plan(input, shifts, dims)
    if dims is None:
        return _fresh(np.roll(input._data.reshape(-1), shifts[0]).reshape(input._data.shape))
    return _fresh(np.roll(input._data, shifts, axis=dims))


def _roll_decomp(input, shifts, dims=None):
    shifts, dims = _roll_plan(input, shifts, dims)
    if dims is None:
        return view(_roll_decomp(reshape(input, -1), shifts, 0), tuple(input._data.shape))
    result = input
    for shift, d in zip(shifts, dims):
        size = result._data.shape[d]
        if size == 0 or shift % size == 0:
            continue
        s = shift % size
        result = cat([narrow(result, d, size - s, s), narrow(result, d, 0, size - s)], d)
    return result if result is not input else clone(input)


roll = defop("roll", _roll_meta, cpu=_roll_cpu, category=COMPOSITE, decomposition=_roll_decomp)


def _rot90_plan(input, k, dims):
    dims = _int_list("rot90", "dims", dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    ndim = input._data.ndim
    if ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {ndim}")
    d0, d1 = wrap_dim(dims[0], ndim), wrap_dim(dims[1], ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    return int(k) % 4, d0, d1


def _rot90_meta(input, k=1, dims=(0, 1)):
    """``input`` rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first dim toward the second.

    Args:
        input (Tensor): at least 2-D.
        k (int): number of quarter turns (negative turns the other way).
        dims (sequence of two int): the plane.

    Raises:
        RuntimeError: for fewer than 2 dims, ``dims`` not of length 2, or equal dims.

    Example:
        >>> import ember
        >>> ember.rot90(ember.tensor([[1, 2], [3, 4]]))
        tensor([[2, 4],
                [1, 3]])
    """
    _require_tensor("rot90", "input", input)
    k, d0, d1 = _rot90_plan(input, k, dims)
    shape = list(input._data.shape)
    if k % 2 == 0:
        return MetaArray(tuple(shape), input._data.dtype)
    # an odd turn is a transposed view of a flipped copy (PyTorch's layout too)
    strides = list(contiguous_strides(shape))
    shape[d0], shape[d1] = shape[d1], shape[d0]
    strides[d0], strides[d1] = strides[d1], strides[d0]
    return MetaArray(tuple(shape), input._data.dtype, tuple(strides))


def _rot90_cpu(input, k=1, dims=(0, 1)):
    k, d0, d1 = _rot90_plan(input, k, dims)
    data = input._data
    if k == 0:
        return _fresh(data)
    if k == 2:
        return _fresh(np.flip(data, (d0, d1)))
    return np.swapaxes(_fresh(np.flip(data, d1 if k == 1 else d0)), d0, d1)


def _rot90_decomp(input, k=1, dims=(0, 1)):
    k, d0, d1 = _rot90_plan(input, k, dims)
    if k == 1:
        return clone(transpose(flip(input, (d1,)), d0, d1))
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return clone(transpose(flip(input, (d0,)), d0, d1))
    return clone(input)


rot90 = defop("rot90", _rot90_meta, cpu=_rot90_cpu, category=COMPOSITE, decomposition=_rot90_decomp)


# -- index_select / masks --------------------------------------------------------------------------


def _index_select_check(input, dim, index):
    _require_tensor("index_select", "input", input)
    _require_tensor("index_select", "index", index)
    d = wrap_dim(dim, input._data.ndim)
    _check_index_dtype(index, _INT32_OR_64, "index_select(): Expected dtype int32 or int64 for index")
    if index._data.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    count = math.prod(index._data.shape)
    if input._data.ndim == 0 and count != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {count} value(s)")
    return d, count


def _index_select_meta(input, dim, index):
    """The slices of ``input`` along ``dim`` at the positions in ``index``, in that order (a copy).

    Args:
        input (Tensor): the tensor.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D, int32 or int64, values in ``[0, input.size(dim))``.

    Returns:
        Tensor: ``input``'s shape with ``dim`` of size ``index.numel()``.

    Raises:
        RuntimeError: for a non-integer ``index``.
        IndexError: for an index of more than one dim or out-of-range values.

    Example:
        >>> import ember
        >>> ember.index_select(ember.tensor([[1, 2], [3, 4], [5, 6]]), 0, ember.tensor([2, 0]))
        tensor([[5, 6],
                [1, 2]])
    """
    d, count = _index_select_check(input, dim, index)
    if input._data.ndim == 0:
        return MetaArray((), input._data.dtype)
    shape = list(input._data.shape)
    shape[d] = count
    return MetaArray(tuple(shape), input._data.dtype)


def _index_select_cpu(input, dim, index):
    data = input._data
    idx = index._data.reshape(-1)
    size = data.shape[wrap_dim(dim, data.ndim)] if data.ndim else 1
    if _first_out_of_range(idx, 0, size) is not None:
        raise IndexError("index out of range in self")
    if data.ndim == 0:
        return _fresh(data)
    return np.take(data, idx, axis=wrap_dim(dim, data.ndim))


def _index_select_decomp(input, dim, index):
    d, _ = _index_select_check(input, dim, index)
    if input._data.ndim == 0:
        return clone(input)
    return index_op(input, [None] * d + [reshape(index, -1)])


index_select = defop("index_select", _index_select_meta, cpu=_index_select_cpu, category=COMPOSITE,
                     decomposition=_index_select_decomp, has_out=True)


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


def _check_fill_value(op, value, dtype):
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(
                f"{op} only supports a 0-dimensional value tensor, but got tensor with {value._data.ndim} dimension(s)."
            )
    elif _is_number(value):
        check_scalar_fits(value, dtype)
    else:
        raise TypeError(f"{op}(): argument 'value' must be Number or Tensor, not {type(value).__name__}")


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


def _fill_tensor(value, input):
    """``value`` (a number or zero-dim tensor) as a zero-dim tensor of ``input``'s dtype and device."""
    if isinstance(value, Tensor):
        return value.to(input.dtype)
    return full((), value, dtype=input.dtype, device=input.device)


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


# -- reductions at positions (shared by scatter, index_add/reduce, put) ----------------------------

_UFUNCS = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
_BOOL_UFUNCS = {"sum": np.logical_or, "prod": np.logical_and, "amax": np.logical_or, "amin": np.logical_and}


def _reduce_identity(reduce, dtype):
    """The value a position starts from when its old value is excluded (``include_self=False``)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == np.bool_:
        return reduce == "amin"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    return -np.inf if reduce == "amax" else np.inf


def _reduce_at(flat, pos, vals, reduce, include_self=True):
    """Reduce ``vals`` into the 1-D contiguous array ``flat`` at flat positions ``pos``.

    ``reduce`` is None (assignment; the last write wins), "sum", "prod",
    "mean", "amax" or "amin". Without ``include_self`` the old value of a
    position that receives values takes no part. float16/bfloat16 reduce in
    float32; integer means round toward minus infinity, as in PyTorch; NaN
    propagates through amax/amin.
    """
    if pos.size == 0:
        return
    dtype = flat.dtype
    if reduce is None:
        if type(flat) is np.ndarray:
            flat[pos] = vals
        else:  # CuPy: repeated positions keep their last value, as numpy's sequential writes do
            _assign_last(flat, pos, vals)
        return
    if dtype in _LOW_FLOATS:
        work = flat.astype(np.float32)
        _reduce_at(work, pos, vals.astype(np.float32), reduce, include_self)
        flat[...] = work.astype(dtype)
        return
    xp = _array_namespace(flat)
    vals = xp.ascontiguousarray(_astype(vals, dtype))
    pos = xp.ascontiguousarray(pos, dtype=np.int64)
    if reduce == "mean":
        total = xp.zeros(flat.size, dtype)
        _accumulate(total, pos, vals)
        count = np.bincount(pos, minlength=flat.size)
        hit = np.flatnonzero(count)
        total, count = total[hit], count[hit]
        if include_self:
            total += flat[hit]
            count += 1
        with np.errstate(all="ignore"):
            flat[hit] = np.floor_divide(total.astype(np.int64), count) if dtype.kind in "iu" else total / count
        return
    if not include_self:
        flat[pos] = _reduce_identity(reduce, dtype)
    if reduce == "sum":
        _accumulate(flat, pos, vals)
        return
    with np.errstate(all="ignore"):  # NaN propagates through amax/amin silently, as in PyTorch
        # numpy's ufunc.at; on CuPy, _xp.ufunc_at gives the same results for every ufunc and dtype
        _ufunc_at((_BOOL_UFUNCS if dtype == np.bool_ else _UFUNCS)[reduce], flat, pos, vals)


def _accumulate(flat, pos, vals):
    """``flat[pos] += vals`` with repeats adding up (``or`` for bool)."""
    if type(flat) is np.ndarray and flat.dtype in _C_ACCUMULATE:
        _C.index_accumulate(flat, pos, vals)
    elif flat.dtype == np.bool_:
        _ufunc_at(np.logical_or, flat, pos, vals)
    else:
        _ufunc_at(np.add, flat, pos, vals)


# -- gather / scatter ------------------------------------------------------------------------------


def _as_1d(shape):
    return tuple(shape) if len(shape) else (1,)


def _check_gather_scatter(name, input, dim, index, src=None):
    """Shared checks of gather and the scatter family; returns the wrapped dim."""
    _require_tensor(name, "input", input)
    _require_tensor(name, "index", index)
    d = wrap_dim(dim, input._data.ndim)
    family = "gather" if name == "gather" else "scatter"
    _check_index_dtype(index, _INT32_OR_64, f"{family}(): Expected dtype int32/int64 for index")
    if src is not None and src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if math.prod(index._data.shape) == 0:
        return d
    ishape, sshape = _as_1d(index._data.shape), _as_1d(input._data.shape)
    what = "input" if name == "gather" else "self"
    if len(ishape) != len(sshape):
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {what} tensor")
    if src is not None and len(_as_1d(src._data.shape)) != len(ishape):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    for k, (i, s) in enumerate(zip(ishape, sshape)):
        if k != d and i > s:
            if name == "gather":
                raise RuntimeError(
                    f"Size does not match at dimension {k} expected index {_shape_str(index._data.shape)} to be no "
                    f"larger than self {_shape_str(input._data.shape)} apart from dimension {d}"
                )
            raise RuntimeError(_scatter_size_message(index, input, d, src))
    if src is not None and any(i > s for i, s in zip(ishape, _as_1d(src._data.shape))):
        raise RuntimeError(_scatter_size_message(index, input, d, src))
    return d


def _scatter_size_message(index, input, d, src):
    message = (f"Expected index {_shape_str(index._data.shape)} to be no larger than self "
               f"{_shape_str(input._data.shape)} apart from dimension {d}")
    if src is not None:
        message += f" and to be no larger size than src {_shape_str(src._data.shape)}"
    return message


def _check_index_bounds(idx, size, dim):
    bad = _first_out_of_range(idx, 0, size)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _gather_meta(input, dim, index, *, sparse_grad=False):
    """Values of ``input`` along ``dim`` at ``index``: ``out[i][j] = input[index[i][j]][j]`` for ``dim=0``.

    Args:
        input (Tensor): the source.
        dim (int): the dimension to gather along.
        index (Tensor): int32/int64 with ``input``'s number of dims, no larger
            than ``input`` in the other dims; values in ``[0, input.size(dim))``.
        sparse_grad (bool): accepted for compatibility (gradients are dense).

    Returns:
        Tensor: of ``index``'s shape and ``input``'s dtype.

    Raises:
        RuntimeError: for a non-integer index, mismatched dims or sizes, or
            out-of-range index values.

    Example:
        >>> import ember
        >>> ember.gather(ember.tensor([[1, 2], [3, 4]]), 1, ember.tensor([[0, 0], [1, 0]]))
        tensor([[1, 1],
                [4, 3]])
    """
    _check_gather_scatter("gather", input, dim, index)
    return MetaArray(index._data.shape, input._data.dtype)


def _gather_cpu(input, dim, index, *, sparse_grad=False):
    data = input._data
    idx = index._data
    xp = _array_namespace(data)
    if idx.size == 0:
        return xp.empty(idx.shape, data.dtype)
    d = wrap_dim(dim, data.ndim)
    data = data.reshape(_as_1d(data.shape))
    idx = idx.reshape(_as_1d(idx.shape))
    if xp is np and data.dtype.kind in _C_GATHER_KINDS and _matches_outside(idx.shape, data.shape, d):
        # one pass in C++ (which checks the indices, with the same error)
        return _C.gather(np.ascontiguousarray(data), d, np.ascontiguousarray(idx)).reshape(index._data.shape)
    _check_index_bounds(idx, data.shape[d], d)
    # flat positions into the (contiguous) input, then one take: much faster than take_along_axis
    flat = xp.ascontiguousarray(data).reshape(-1)
    return flat.take(_scatter_positions(data.shape, d, idx)).reshape(index._data.shape)


gather = defop("gather", _gather_meta, cpu=_gather_cpu, has_out=True)


def _matches_outside(ishape, shape, dim):
    """Whether the index shape ``ishape`` equals ``shape`` in every dim but ``dim`` (what the C++ kernels take)."""
    return all(i == s for k, (i, s) in enumerate(zip(ishape, shape)) if k != dim)


def _scatter_positions(shape, dim, idx):
    """Flat positions in a contiguous array of ``shape`` of the elements that ``idx`` addresses along ``dim``."""
    strides = contiguous_strides(shape)
    ndim = len(shape)
    # the offsets of the other dims form a small broadcastable array: one pass over idx remains
    xp = _array_namespace(idx)
    base = xp.zeros((1,) * ndim, dtype=np.int64)
    for k, n in enumerate(idx.shape):
        if k != dim and n > 1:
            base = base + (xp.arange(n, dtype=np.int64) * strides[k]).reshape((n,) + (1,) * (ndim - k - 1))
    if strides[dim] == 1:
        pos = np.add(idx, base, dtype=np.int64)
    else:
        pos = np.multiply(idx, strides[dim], dtype=np.int64)
        pos += base
    return pos.reshape(-1)


def _scatter_into(out, dim, index, src, value, reduce, include_self=True):
    """Scatter ``src`` (or ``value``) into the contiguous array ``out`` (of ``self``'s shape)."""
    idx = index._data
    if idx.size == 0:
        return
    shape = _as_1d(out.shape)
    d = wrap_dim(dim, out.ndim)
    idx = idx.reshape(_as_1d(idx.shape))
    if (src is not None and reduce == "sum" and include_self and type(out) is np.ndarray and out.dtype in _C_SCATTER_ADD
            and out.flags.c_contiguous and _matches_outside(idx.shape, shape, d)):
        # one pass in C++ over a contiguous block of src shaped like index (an out-of-range index raises the
        # same error, before anything is written)
        block = src._data.reshape(_as_1d(src._data.shape))[tuple(slice(0, n) for n in idx.shape)]
        block = np.array(block, order="C") if np.may_share_memory(block, out) else np.ascontiguousarray(block)
        _C.scatter_add_(out.reshape(shape), d, np.ascontiguousarray(idx), block)
        return
    _check_index_bounds(idx, shape[d], d)
    pos = _scatter_positions(shape, d, idx)
    if src is not None:
        source = src._data.reshape(_as_1d(src._data.shape))
        vals = source[tuple(slice(0, n) for n in idx.shape)].reshape(-1)
    else:
        vals = _array_namespace(out).full(pos.size, _cast_scalar(value, out.dtype), dtype=out.dtype)
    _reduce_at(out.reshape(-1), pos, vals, reduce, include_self)


def _scatter_args(name, src, value):
    """(src tensor or None, value or None) from ``scatter``'s overloads."""
    if src is not None and value is not None:
        raise TypeError(f"{name}(): pass either src or value, not both")
    if src is None and value is None:
        raise TypeError(f"{name}() missing 1 required argument: 'src' or 'value'")
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src
    if value is not None and not _is_number(value):
        raise TypeError(f"{name}(): argument 'value' must be Number, not {type(value).__name__}")
    return src, value


_SCATTER_MODES = {None: None, "add": "sum", "multiply": "prod"}


def _scatter_meta(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of ``input`` with values written at ``index`` along ``dim``: ``out[index[i][j]][j] = src[i][j]`` (dim 0).

    Either ``src`` (a tensor, only its leading ``index.shape`` block is used)
    or ``value`` (a number, also accepted as the 4th positional argument) is
    written. With repeated indices and no ``reduce``, which write wins is
    unspecified (as in PyTorch).

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to scatter along.
        index (Tensor): int32/int64, ``input``'s number of dims, no larger than
            ``src`` and (except in ``dim``) than ``input``.
        src (Tensor, optional): values, of ``input``'s dtype.
        value (Number, optional): one value for every index.
        reduce (str, optional): ``"add"`` or ``"multiply"`` to combine with the
            existing values instead of overwriting.

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype.

    Raises:
        RuntimeError: for mismatched dims, sizes or dtypes, out-of-range
            indices, or another ``reduce``.

    Example:
        >>> import ember
        >>> ember.scatter(ember.zeros(2, 3), 1, ember.tensor([[2], [0]]), ember.tensor([[1.], [2.]]))
        tensor([[0., 0., 1.],
                [2., 0., 0.]])
    """
    src, value = _scatter_args("scatter", src, value)
    if reduce not in _SCATTER_MODES:
        raise RuntimeError("reduce argument must be either add or multiply.")
    _check_gather_scatter("scatter", input, dim, index, src)
    if value is not None:
        check_scalar_fits(value, input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _scatter_cpu(input, dim, index, src=None, *, value=None, reduce=None):
    src, value = _scatter_args("scatter", src, value)
    out = _fresh(input._data)
    _scatter_into(out, dim, index, src, value, _SCATTER_MODES[reduce])
    return out


def _scatter_inplace_cpu(self, dim, index, src=None, *, value=None, reduce=None):
    src, value = _scatter_args("scatter", src, value)
    _write_through(self, lambda out: _scatter_into(out, dim, index, src, value, _SCATTER_MODES[reduce]))


scatter = defop("scatter", _scatter_meta, cpu=_scatter_cpu, has_out=True)
_def_inplace(scatter, _scatter_inplace_cpu)


def _scatter_add_meta(input, dim, index, src):
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim``; repeated indices accumulate.

    ``out[index[i][j]][j] += src[i][j]`` for ``dim=0``. Shapes follow
    :func:`ember.scatter`.

    Raises:
        RuntimeError: as :func:`ember.scatter`.

    Example:
        >>> import ember
        >>> ember.scatter_add(ember.zeros(3), 0, ember.tensor([0, 0, 2]), ember.tensor([1., 2., 3.]))
        tensor([3., 0., 3.])
    """
    _require_tensor("scatter_add", "src", src)
    _check_gather_scatter("scatter_add", input, dim, index, src)
    return MetaArray(input._data.shape, input._data.dtype)


def _scatter_add_cpu(input, dim, index, src):
    out = _fresh(input._data)
    _scatter_into(out, dim, index, src, None, "sum")
    return out


scatter_add = defop("scatter_add", _scatter_add_meta, cpu=_scatter_add_cpu, has_out=True)
_def_inplace(scatter_add, lambda self, dim, index, src: _write_through(
    self, lambda out: _scatter_into(out, dim, index, src, None, "sum")))

_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _check_reduction_dtype(op, reduce, dtype):
    if reduce == "mean" and dtype is D.bool:
        raise NotImplementedError(f'"{op}_mean" not implemented for \'Bool\'')
    if reduce in ("amax", "amin") and dtype.is_complex:
        raise NotImplementedError(f'"{op}_{reduce}" not implemented for \'{_torch_name(dtype)}\'')


def _scatter_reduce_meta(input, dim, index, src, reduce, *, include_self=True):
    """A copy of ``input`` with ``src`` reduced into it at ``index`` along ``dim``.

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to scatter along.
        index (Tensor): int32/int64 indices (see :func:`ember.scatter`).
        src (Tensor): values, of ``input``'s dtype.
        reduce (str): ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
        include_self (bool): whether the existing values of ``input`` at the
            scattered positions take part in the reduction.

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype. Positions no index
        points to keep ``input``'s values. Integer means round down.

    Raises:
        RuntimeError: as :func:`ember.scatter`, or for another ``reduce``.
        NotImplementedError: for ``"mean"`` of bool and ``"amax"``/``"amin"``
            of complex tensors (as PyTorch).

    Example:
        >>> import ember
        >>> x = ember.tensor([1., 2., 3.])
        >>> ember.scatter_reduce(x, 0, ember.tensor([0, 0]), ember.tensor([5., 7.]), "amax")
        tensor([7., 2., 3.])
    """
    _require_tensor("scatter_reduce", "src", src)
    if reduce not in _SCATTER_REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    _check_gather_scatter("scatter_reduce", input, dim, index, src)
    _check_reduction_dtype("scatter_gather_tensor_cpu_reduce", reduce, input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _scatter_reduce_cpu(input, dim, index, src, reduce, *, include_self=True):
    out = _fresh(input._data)
    _scatter_into(out, dim, index, src, None, reduce, include_self)
    return out


scatter_reduce = defop("scatter_reduce", _scatter_reduce_meta, cpu=_scatter_reduce_cpu, has_out=True)
_def_inplace(scatter_reduce, lambda self, dim, index, src, reduce, *, include_self=True: _write_through(
    self, lambda out: _scatter_into(out, dim, index, src, None, reduce, include_self)))


# -- index_add / index_copy / index_fill / index_reduce ----------------------------------------------


def _check_index_source(op, input, dim, index, source, *, long_only=False, vector_message=None):
    """Shared checks of index_add/index_copy/index_reduce; returns the wrapped dim."""
    _require_tensor(op, "input", input)
    _require_tensor(op, "index", index)
    _require_tensor(op, "source", source)
    ndim = input._data.ndim
    d = wrap_dim(dim, ndim)
    if index._data.ndim > 1:
        raise IndexError(vector_message.format(ndim=index._data.ndim, name=_torch_name(index.dtype),
                                               shape=_shape_str(index._data.shape)))
    count = math.prod(index._data.shape)
    if source.dtype is not input.dtype:
        raise RuntimeError(
            f"{op}_(): self ({_torch_name(input.dtype)}) and source ({_torch_name(source.dtype)}) must have the "
            "same scalar type"
        )
    sshape, ishape = source._data.shape, input._data.shape
    if len(sshape) != ndim or any(a != b for k, (a, b) in enumerate(zip(ishape, sshape)) if k != d):
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
            f"{_shape_str(ishape)} source.shape = {_shape_str(sshape)}"
        )
    source_count = sshape[d] if len(sshape) else 1
    if count != source_count:
        raise RuntimeError(
            f"{op}_(): Number of indices ({count}) should be equal to source.size(dim): ({source_count}), for dim: {d}"
        )
    return d


def _index_positions(shape, dim, idx):
    """Flat positions in a contiguous array of ``shape`` of ``out[(..., idx[j], ...)]`` along ``dim``, in
    the row-major order of a source of shape ``shape[:dim] + (len(idx),) + shape[dim + 1:]``."""
    pre, size, post = math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1 :])
    # (pre, post) offsets of the other dims plus (n,) offsets along dim: one pass over the result
    xp = _array_namespace(idx)
    others = xp.arange(pre, dtype=np.int64)[:, None] * (size * post) + xp.arange(post, dtype=np.int64)
    along = np.multiply(idx, post, dtype=np.int64)
    return np.add(others[:, None, :], along[None, :, None]).reshape(-1)


def _index_add_meta(input, dim, index, source, *, alpha=1):
    """A copy of ``input`` with ``alpha * source`` added to the slices at ``index`` along ``dim``.

    Repeated indices accumulate.

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D, int32/int64, values in ``[0, input.size(dim))``.
        source (Tensor): of ``input``'s dtype and shape except ``dim``, whose size
            is ``index.numel()``.
        alpha (Number): multiplier of ``source`` (converted to ``input``'s dtype).

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype.

    Raises:
        RuntimeError: for mismatched dtypes or shapes, a non-integer index or
            out-of-range index values.
        IndexError: for an index of more than one dim.

    Example:
        >>> import ember
        >>> ember.index_add(ember.zeros(3, 2), 0, ember.tensor([0, 0]), ember.ones(2, 2), alpha=2)
        tensor([[4., 4.],
                [0., 0.],
                [0., 0.]])
    """
    _require_tensor("index_add", "index", index)
    _check_index_dtype(index, _INT32_OR_64, "index_add_(): Expected dtype int32/int64 for index but got: {name}")
    _check_index_source("index_add", input, dim, index, source, vector_message=(
        "index_add_(): Index is supposed to be a vector, but got dim: {ndim} with type: {name} and size: {shape}"))
    if not _is_number(alpha):
        raise TypeError(f"index_add(): argument 'alpha' must be Number, not {type(alpha).__name__}")
    check_scalar_fits(alpha, input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _index_reduce_into(out, dim, index, source, reduce, include_self=True, alpha=None):
    idx = index._data.reshape(-1)
    if idx.size == 0:
        return
    shape = _as_1d(out.shape)
    d = wrap_dim(dim, out.ndim)
    _check_index_bounds_for(reduce, idx, shape[d], d)
    pos = _index_positions(shape, d, idx)
    vals = source._data.reshape(-1)
    if alpha is not None and not (type(alpha) in (int, bool) and alpha == 1):
        if out.dtype == np.bool_:
            vals = vals & bool(alpha)
        else:
            compute = np.dtype(np.float32) if out.dtype in _LOW_FLOATS else out.dtype
            vals = np.multiply(_astype(vals, compute), _cast_scalar(alpha, compute)).astype(out.dtype)
    _reduce_at(out.reshape(-1), pos, vals, reduce, include_self)


def _check_index_bounds_for(reduce, idx, size, dim):
    if reduce == "sum":  # index_add
        _check_index_bounds(idx, size, dim)
    elif _first_out_of_range(idx, 0, size) is not None:
        raise IndexError("index out of range in self")


def _index_add_cpu(input, dim, index, source, *, alpha=1):
    out = _fresh(input._data)
    _index_reduce_into(out, dim, index, source, "sum", alpha=alpha)
    return out


def _index_add_decomp(input, dim, index, source, *, alpha=1):
    _index_add_meta(input, dim, index, source, alpha=alpha)
    from .pointwise import mul

    if input.dtype.category == D.INTEGRAL:
        alpha = int(alpha)  # PyTorch converts alpha to the dtype first
    values = source if alpha == 1 else mul(source, alpha)
    positions = reshape(index, -1).to(D.int64)
    if input._data.ndim == 0:
        return reshape(index_put(reshape(input, 1), [positions], reshape(values, -1), True), ())
    d = wrap_dim(dim, input._data.ndim)
    return index_put(input, [None] * d + [positions], values, True)


index_add = defop("index_add", _index_add_meta, cpu=_index_add_cpu, category=COMPOSITE,
                  decomposition=_index_add_decomp, has_out=True)
_def_inplace(index_add, lambda self, dim, index, source, *, alpha=1: _write_through(
    self, lambda out: _index_reduce_into(out, dim, index, source, "sum", alpha=alpha)))


def _index_copy_meta(input, dim, index, source):
    """A copy of ``input`` with the slices at ``index`` along ``dim`` replaced by those of ``source``.

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D int64, values in ``[0, input.size(dim))``.
        source (Tensor): of ``input``'s dtype; its slices along ``dim`` have
            ``input``'s slice shape, and there are ``index.numel()`` of them.

    Returns:
        Tensor: a new tensor. With repeated indices the last slice wins.

    Raises:
        RuntimeError: for a non-int64 index or mismatched dtypes or shapes.
        IndexError: for an index of more than one dim, a count that differs
            from ``source``'s or out-of-range index values.

    Example:
        >>> import ember
        >>> ember.index_copy(ember.zeros(3), 0, ember.tensor([2, 0]), ember.tensor([1., 2.]))
        tensor([2., 0., 1.])
    """
    _require_tensor("index_copy", "input", input)
    _require_tensor("index_copy", "index", index)
    _require_tensor("index_copy", "source", source)
    d = wrap_dim(dim, input._data.ndim)
    if index._data.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index._data.ndim})")
    count = math.prod(index._data.shape)
    sshape, ishape = source._data.shape, input._data.shape
    source_count = sshape[d] if len(sshape) > d else 1
    if count != source_count:
        raise IndexError(
            f"index_copy_(): Number of indices ({count}) should be equal to source.size(dim) ({source_count})"
        )
    _check_index_dtype(index, (D.int64,), "index_copy_(): Expected a long tensor for index, but got {name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(
            "index_copy_(): self and source expected to have the same dtype, but got (self) "
            f"{_torch_name(input.dtype)} and (source) {_torch_name(source.dtype)}"
        )
    self_slice = [s for k, s in enumerate(ishape) if k != d]
    source_slice = [s for k, s in enumerate(sshape) if k != d]
    if len(ishape) and self_slice != source_slice:
        k = next((k for k, (a, b) in enumerate(zip(self_slice, source_slice)) if a != b), len(self_slice))
        dest = self_slice[k] if k < len(self_slice) else 1
        src = source_slice[k] if k < len(source_slice) else 1
        raise RuntimeError(
            "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: "
            f"{dest} at dimension {k + (k >= d)} and source slice shape: {src} at dimension {k}."
        )
    return MetaArray(ishape, input._data.dtype)


def _index_copy_into(out, dim, index, source):
    idx = index._data.reshape(-1)
    if idx.size == 0:
        return
    target = out.reshape(_as_1d(out.shape))
    d = wrap_dim(dim, out.ndim)
    size = target.shape[d]
    bad = _first_out_of_range(idx, 0, size)
    if bad is not None:
        raise IndexError(f"index_copy_(): index {bad} is out of bounds for dimension {d} with size {size}")
    src = np.moveaxis(source._data.reshape(target.shape[:d] + (idx.size,) + target.shape[d + 1 :]), d, 0)
    if type(idx) is not np.ndarray:  # CuPy: of repeated indices only the last slice is written (numpy's result)
        keep = _keep_last(idx)
        idx, src = idx[keep], src[keep]
    np.moveaxis(target, d, 0)[idx] = src


def _index_copy_cpu(input, dim, index, source):
    out = _fresh(input._data)
    _index_copy_into(out, dim, index, source)
    return out


def _index_copy_decomp(input, dim, index, source):
    _index_copy_meta(input, dim, index, source)
    d = wrap_dim(dim, input._data.ndim)
    if input._data.ndim == 0:
        return index_put(reshape(input, 1), [reshape(index, -1)], reshape(source, -1)).reshape(())
    return index_put(input, [None] * d + [reshape(index, -1)], source)


index_copy = defop("index_copy", _index_copy_meta, cpu=_index_copy_cpu, category=COMPOSITE,
                   decomposition=_index_copy_decomp, has_out=True)
_def_inplace(index_copy, lambda self, dim, index, source: _write_through(
    self, lambda out: _index_copy_into(out, dim, index, source)))


def _index_fill_meta(input, dim, index, value):
    """A copy of ``input`` with the slices at ``index`` along ``dim`` set to ``value``.

    Args:
        input (Tensor): the tensor.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D int64; negative values count from the end.
        value (Number or Tensor): the fill value (a zero-dim tensor is allowed).

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype.

    Raises:
        IndexError: for a non-int64 index or out-of-range index values.
        RuntimeError: for an index of more than one dim, a value tensor with
            dimensions, or a value the dtype can't hold.

    Example:
        >>> import ember
        >>> ember.index_fill(ember.zeros(2, 3), 1, ember.tensor([0, 2]), -1.)
        tensor([[-1.,  0., -1.],
                [-1.,  0., -1.]])
    """
    _require_tensor("index_fill", "input", input)
    _require_tensor("index_fill", "index", index)
    wrap_dim(dim, input._data.ndim)
    _check_index_dtype(index, (D.int64,), "index_fill_(): Expected dtype int64 for index.", IndexError)
    if index._data.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if isinstance(value, (complex, np.complexfloating)) and not input.dtype.is_complex:
        raise RuntimeError("index_fill_(): Converting complex Scalar to non-complex type is not supported")
    _check_fill_value("index_fill_", value, input.dtype)
    return MetaArray(input._data.shape, input._data.dtype)


def _index_fill_into(out, dim, index, value):
    idx = index._data.reshape(-1)
    if idx.size == 0:
        return
    target = out.reshape(_as_1d(out.shape))
    d = wrap_dim(dim, out.ndim)
    size = target.shape[d]
    bad = _first_out_of_range(idx, -size, size)
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    np.moveaxis(target, d, 0)[idx] = _cast_scalar(value, out.dtype)


def _index_fill_cpu(input, dim, index, value):
    out = _fresh(input._data)
    _index_fill_into(out, dim, index, value)
    return out


def _index_fill_decomp(input, dim, index, value):
    _index_fill_meta(input, dim, index, value)
    d = wrap_dim(dim, input._data.ndim)
    fill = _fill_tensor(value, input)
    if input._data.ndim == 0:
        return index_put(reshape(input, 1), [reshape(index, -1)], fill).reshape(())
    return index_put(input, [None] * d + [reshape(index, -1)], fill)


index_fill = defop("index_fill", _index_fill_meta, cpu=_index_fill_cpu, category=COMPOSITE,
                   decomposition=_index_fill_decomp)
_def_inplace(index_fill, lambda self, dim, index, value: _write_through(
    self, lambda out: _index_fill_into(out, dim, index, value)))

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _index_reduce_meta(input, dim, index, source, reduce, *, include_self=True):
    """A copy of ``input`` with the slices of ``source`` reduced into the slices at ``index`` along ``dim``.

    Args:
        input (Tensor): the destination.
        dim (int): the dimension to index.
        index (Tensor): 0-D or 1-D, int32/int64, values in ``[0, input.size(dim))``.
        source (Tensor): as in :func:`ember.index_add`.
        reduce (str): ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
        include_self (bool): whether ``input``'s values at the indexed slices
            take part in the reduction.

    Returns:
        Tensor: a new tensor of ``input``'s shape and dtype. Integer means round down.

    Raises:
        RuntimeError: for another ``reduce``, mismatched dtypes or shapes, or a
            non-integer index.
        IndexError: for an index of more than one dim or out-of-range values.
        NotImplementedError: for ``"mean"`` of bool and ``"amax"``/``"amin"`` of
            complex tensors, and ``include_self=False`` with bool or complex
            tensors (as PyTorch).

    Example:
        >>> import ember
        >>> x = ember.ones(3)
        >>> ember.index_reduce(x, 0, ember.tensor([0, 0, 2]), ember.tensor([2., 3., 4.]), "prod")
        tensor([6., 1., 4.])
    """
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    _require_tensor("index_reduce", "index", index)
    _check_index_dtype(index, _INT32_OR_64, "index_reduce_(): Expected dtype int32/int64 for index but got: {name}")
    _check_index_source("index_reduce", input, dim, index, source, vector_message=(
        "index_reduce_(): Index is supposed to be a vector, but got dim: {ndim} with type: {name} and size: {shape}"))
    _check_reduction_dtype("index_reduce_func_cpu", reduce, input.dtype)
    if not include_self and (input.dtype is D.bool or input.dtype.is_complex):
        # PyTorch's CPU kernel has no such variant; refusing keeps the dtype coverage identical
        raise NotImplementedError(
            f'"index_reduce_func_exclude_input_init" not implemented for \'{_torch_name(input.dtype)}\''
        )
    return MetaArray(input._data.shape, input._data.dtype)


def _index_reduce_cpu(input, dim, index, source, reduce, *, include_self=True):
    out = _fresh(input._data)
    _index_reduce_into(out, dim, index, source, reduce, include_self)
    return out


def _index_reduce_decomp(input, dim, index, source, reduce, *, include_self=True):
    _index_reduce_meta(input, dim, index, source, reduce, include_self=include_self)
    if input._data.ndim == 0:
        return reshape(scatter_reduce(reshape(input, 1), 0, reshape(index, -1), reshape(source, -1), reduce,
                                      include_self=include_self), ())
    d = wrap_dim(dim, input._data.ndim)
    shape = [1] * input._data.ndim
    shape[d] = -1
    positions = expand(reshape(index, shape), tuple(source._data.shape))
    return scatter_reduce(input, d, positions, source, reduce, include_self=include_self)


index_reduce = defop("index_reduce", _index_reduce_meta, cpu=_index_reduce_cpu, category=COMPOSITE,
                     decomposition=_index_reduce_decomp, has_out=True)
_def_inplace(index_reduce, lambda self, dim, index, source, reduce, *, include_self=True: _write_through(
    self, lambda out: _index_reduce_into(out, dim, index, source, reduce, include_self)))


# -- take / take_along_dim / put ---------------------------------------------------------------------


def _take_meta(input, index):
    """The elements of ``input``, seen as 1-D, at ``index``; the result has ``index``'s shape.

    Args:
        input (Tensor): the tensor (read in row-major order).
        index (Tensor): int64 positions in ``[-input.numel(), input.numel())``.

    Raises:
        RuntimeError: for a non-int64 index.
        IndexError: for out-of-range positions.

    Example:
        >>> import ember
        >>> ember.take(ember.tensor([[1, 2], [3, 4]]), ember.tensor([0, -1]))
        tensor([1, 4])
    """
    _require_tensor("take", "input", input)
    _require_tensor("take", "index", index)
    _check_index_dtype(index, (D.int64,), "take(): Expected a long tensor for index, but got {name}")
    return MetaArray(index._data.shape, input._data.dtype)


def _flat_bounds(op, idx, numel):
    if numel == 0 and idx.size:
        raise IndexError(f"{op}(): tried to take from an empty tensor")
    bad = _first_out_of_range(idx, -numel, numel)
    if bad is not None:
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {numel} elements.")


def _take_cpu(input, index):
    data = input._data
    idx = index._data
    _flat_bounds("take", idx, data.size)
    return _as_array(data.reshape(-1)[idx])


def _take_decomp(input, index):
    _take_meta(input, index)
    return index_op(reshape(input, -1), [index])


take = defop("take", _take_meta, cpu=_take_cpu, category=COMPOSITE, decomposition=_take_decomp, has_out=True)


def _take_along_dim_plan(input, indices, dim):
    _require_tensor("take_along_dim", "input", input)
    _require_tensor("take_along_dim", "indices", indices)
    _check_index_dtype(indices, (D.int64,), "ember.take_along_dim(): dtype of indices should be Long but got {name}")
    if dim is None:
        return None, None, None
    ndim = input._data.ndim
    d = wrap_dim(dim, ndim)
    if indices._data.ndim != ndim:
        raise RuntimeError(
            "ember.take_along_dim(): input and indices should have the same number of dimensions, but got "
            f"{ndim} dimensions for input, and {indices._data.ndim} dimensions for indices"
        )
    ishape, jshape = list(input._data.shape), list(indices._data.shape)
    ishape[d] = jshape[d] = 1
    common = list(broadcast_shapes(tuple(ishape), tuple(jshape)))
    input_shape = common.copy()
    input_shape[d] = input._data.shape[d]
    index_shape = common.copy()
    index_shape[d] = indices._data.shape[d]
    return d, tuple(input_shape), tuple(index_shape)


def _take_along_dim_meta(input, indices, dim=None):
    """Values of ``input`` at ``indices`` along ``dim``, with ``input`` and ``indices`` broadcast in the other dims.

    Like numpy's ``take_along_axis``. With ``dim=None`` both are flattened.

    Args:
        input (Tensor): the tensor.
        indices (Tensor): int64, with ``input``'s number of dims (unless ``dim``
            is None); negative values count from the end of ``dim``.
        dim (int, optional): the dimension to select along.

    Returns:
        Tensor: the broadcast shape, with ``indices``' size in ``dim``.

    Raises:
        RuntimeError: for non-int64 indices, a different number of dims, shapes
            that don't broadcast, or out-of-range indices.

    Example:
        >>> import ember
        >>> x = ember.tensor([[10, 30, 20], [60, 40, 50]])
        >>> ember.take_along_dim(x, ember.tensor([[1], [0]]), dim=1)
        tensor([[30],
                [60]])
    """
    d, _, index_shape = _take_along_dim_plan(input, indices, dim)
    if d is None:
        return MetaArray((math.prod(indices._data.shape),), input._data.dtype)
    return MetaArray(index_shape, input._data.dtype)


def _take_along_dim_cpu(input, indices, dim=None):
    d, input_shape, index_shape = _take_along_dim_plan(input, indices, dim)
    if d is None:
        data, idx, d = input._data.reshape(-1), indices._data.reshape(-1), 0
        _check_index_bounds(idx, data.size, 0)
        return np.take(data, idx)
    data = np.broadcast_to(input._data, input_shape)
    idx = np.broadcast_to(indices._data, index_shape)
    size = input_shape[d]
    bad = _first_out_of_range(idx, -size, size)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    if idx.size and idx.min() < 0:
        idx = np.where(idx < 0, idx + size, idx)
    return _fresh(np.take_along_axis(data, idx, axis=d))


def _take_along_dim_decomp(input, indices, dim=None):
    d, input_shape, index_shape = _take_along_dim_plan(input, indices, dim)
    if d is None:
        return gather(reshape(input, -1), 0, reshape(indices, -1))
    from .pointwise import add, lt, mul

    size = input_shape[d]
    wrapped = add(indices, mul(lt(indices, 0).to(D.int64), size))  # negative indices count from the end
    return gather(expand(input, input_shape), d, expand(wrapped, index_shape))


take_along_dim = defop("take_along_dim", _take_along_dim_meta, cpu=_take_along_dim_cpu, category=COMPOSITE,
                       decomposition=_take_along_dim_decomp, has_out=True)


def _put_meta(input, index, source, accumulate=False):
    """A copy of ``input`` with ``source``'s elements written at the flat positions ``index``.

    ``input`` is seen as 1-D (row-major). With ``accumulate=True``, values add
    up (repeated positions too); otherwise with repeated positions the last
    write wins.

    Args:
        input (Tensor): the destination.
        index (Tensor): int64 positions in ``[-input.numel(), input.numel())``.
        source (Tensor): of ``input``'s dtype, as many elements as ``index``.
        accumulate (bool): add instead of overwriting.

    Raises:
        RuntimeError: for a non-int64 index or another dtype of ``source``.
        IndexError: for counts that differ or out-of-range positions.

    Example:
        >>> import ember
        >>> ember.put(ember.zeros(2, 2), ember.tensor([0, 3, 0]), ember.tensor([1., 2., 3.]), accumulate=True)
        tensor([[4., 0.],
                [0., 2.]])
    """
    _require_tensor("put", "input", input)
    _require_tensor("put", "index", index)
    _require_tensor("put", "source", source)
    _check_index_dtype(index, (D.int64,), "put_(): Expected a long tensor for index, but got {name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(
            "put_(): self and source expected to have the same dtype, but got self.dtype = "
            f"{_torch_name(input.dtype)} and source.dtype = {_torch_name(source.dtype)}"
        )
    n_index, n_source = math.prod(index._data.shape), math.prod(source._data.shape)
    if n_index != n_source:
        raise IndexError(
            "put_(): Expected source and index to have the same number of elements, but got source.numel() = "
            f"{n_source}, index.numel() = {n_index}"
        )
    return MetaArray(input._data.shape, input._data.dtype)


def _put_into(out, index, source, accumulate):
    idx = index._data.reshape(-1)
    if idx.size == 0:
        return
    flat = out.reshape(-1)
    _flat_bounds("put", idx, flat.size)
    if idx.min() < 0:
        idx = np.where(idx < 0, idx + flat.size, idx)
    _reduce_at(flat, idx.astype(np.int64, copy=False), source._data.reshape(-1), "sum" if accumulate else None)


def _put_cpu(input, index, source, accumulate=False):
    out = _fresh(input._data)
    _put_into(out, index, source, accumulate)
    return out


def _put_decomp(input, index, source, accumulate=False):
    _put_meta(input, index, source, accumulate)
    from .pointwise import add, lt, mul

    numel = math.prod(input._data.shape)
    flat_index = reshape(index, -1)
    flat_index = add(flat_index, mul(lt(flat_index, 0).to(D.int64), numel))
    flat = index_put(reshape(input, -1), [flat_index], reshape(source, -1), accumulate)
    return view(flat, tuple(input._data.shape))


put = defop("put", _put_meta, cpu=_put_cpu, category=COMPOSITE, decomposition=_put_decomp)
_def_inplace(put, lambda self, index, source, accumulate=False: _write_through(
    self, lambda out: _put_into(out, index, source, accumulate)))


for _op in (index_select, take, take_along_dim, put, index_add, index_copy, index_fill, index_reduce):
    _cuda_runs_cpu_kernel(_op)  # (their decompositions' index checks are index's, with other errors)
del _op


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


# -- triangles ----------------------------------------------------------------------------------------


def _triangle_mask(shape, diagonal, lower):
    """Bool matrix of the kept elements: ``col - row <= diagonal`` (lower) or ``>= diagonal`` (upper)."""
    rows, cols = shape[-2:]
    if lower:
        return np.tri(rows, cols, diagonal, dtype=bool)
    return ~np.tri(rows, cols, diagonal - 1, dtype=bool)


def _triangle(name, lower):
    side, keep = ("lower", "on and below") if lower else ("upper", "on and above")

    def meta(input, diagonal=0):
        _require_tensor(name, "input", input)
        if input._data.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        if isinstance(diagonal, bool) or not isinstance(diagonal, (int, np.integer)):
            raise TypeError(f"{name}(): argument 'diagonal' must be int, not {type(diagonal).__name__}")
        return MetaArray(input._data.shape, input._data.dtype)

    def cpu(input, diagonal=0):
        data = input._data
        return np.where(_triangle_mask(data.shape, diagonal, lower), data, np.zeros((), data.dtype))

    def inplace(self, diagonal=0):
        np.copyto(self._data, np.zeros((), self._data.dtype), where=~_triangle_mask(self._data.shape, diagonal, lower))

    def decomposition(input, diagonal=0):
        meta(input, diagonal)
        from .creation import arange
        from .pointwise import gt, lt, sub

        rows, cols = input._data.shape[-2:]
        offset = sub(unsqueeze(arange(cols, device=input.device), 0), unsqueeze(arange(rows, device=input.device), 1))
        dropped = gt(offset, diagonal) if lower else lt(offset, diagonal)
        return masked_fill(input, dropped, 0)

    example = ("tensor([[1., 0.],\n                [1., 1.]])" if lower
               else "tensor([[1., 1.],\n                [0., 1.]])")
    meta.__name__ = name
    meta.__doc__ = f"""The {side} triangle of the matrices in ``input``; elements {keep} a diagonal are kept.

    The other elements are zeroed. Works on the last two dims (batches of
    matrices too). ``diagonal`` 0 is the main diagonal, > 0 above it, < 0 below.

    Args:
        input (Tensor): at least 2-D.
        diagonal (int): which diagonal bounds the triangle.

    Raises:
        RuntimeError: for fewer than 2 dims.

    Example:
        >>> import ember
        >>> ember.{name}(ember.ones(2, 2))
        {example}
    """
    op = defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, has_out=True)
    _def_inplace(op, inplace)
    return op


tril = _triangle("tril", True)
triu = _triangle("triu", False)


def _triangle_count(row, col, offset):
    """How many (i, j) of a ``row`` x ``col`` matrix have ``j - i <= offset``, by arithmetic (no mask: the
    meta function of ``tril_indices(2**32, 2**32)`` must not allocate)."""
    row, col, offset = int(row), int(col), int(offset)
    # row i holds min(max(i + offset + 1, 0), col) such elements: none before row `first`, all `col` from row `full`
    first = min(max(-offset, 0), row)
    full = min(max(col - offset - 1, first), row)
    ramp = (full - first) * (first + full - 1 + 2 * (offset + 1)) // 2
    return ramp + (row - full) * col


def _tri_indices(name, lower):
    side = "lower" if lower else "upper"
    def meta(row, col, offset=0, *, dtype=None, device=None, layout=None, requires_grad=False, pin_memory=False):
        check_strided(name, layout)
        for arg, value in (("row", row), ("col", col), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name}(): argument '{arg}' must be int, not {type(value).__name__}")
        if row < 0:
            raise RuntimeError(f"row must be non-negative, got{row}")
        if col < 0:
            raise RuntimeError(f"col must be non-negative, got{col}")
        dtype = D.int64 if dtype is None else dtype
        if not isinstance(dtype, D.dtype):
            raise TypeError(f"dtype must be an ember.dtype, not {type(dtype).__name__}")
        if dtype not in _INT32_OR_64:
            raise NotImplementedError(f'"{name}" not implemented for \'{_torch_name(dtype)}\'')
        count = _triangle_count(row, col, offset) if lower else row * col - _triangle_count(row, col, offset - 1)
        return MetaArray((2, count), dtype.numpy_dtype)

    def cpu(row, col, offset=0, *, dtype=None, device=None, layout=None, requires_grad=False, pin_memory=False):
        np_dtype = (D.int64 if dtype is None else dtype).numpy_dtype
        if not row or not col:
            return np.empty((2, 0), np_dtype)
        rows, cols = np.nonzero(_triangle_mask((row, col), offset, lower))
        return np.stack([rows, cols]).astype(np_dtype)

    example = ("tensor([[0, 1, 1, 2, 2, 2],\n                [0, 0, 1, 0, 1, 2]])" if lower
               else "tensor([[0, 0, 0, 1, 1, 2],\n                [0, 1, 2, 1, 2, 2]])")
    meta.__name__ = name
    meta.__doc__ = f"""The (row, column) indices of the {side} triangle of a ``row`` x ``col`` matrix, (2 x N).

    The same elements as :func:`ember.{name[:4]}` keeps, in row-major order.

    Args:
        row (int): number of rows.
        col (int): number of columns.
        offset (int): the bounding diagonal (0 main, > 0 above, < 0 below).
        dtype (ember.dtype, optional): int64 (default) or int32.
        device (ember.device or str, optional): where to allocate.

    Raises:
        RuntimeError: for negative ``row`` or ``col``.
        NotImplementedError: for dtypes other than int32 and int64.

    Example:
        >>> import ember
        >>> ember.{name}(3, 3)
        {example}
    """
    return defop(name, meta, cpu=cpu, tags=("factory",))


tril_indices = _tri_indices("tril_indices", True)
triu_indices = _tri_indices("triu_indices", False)


# -- diagonals and trace ---------------------------------------------------------------------------------


def _diag_meta(input, diagonal=0):
    """A 1-D ``input`` as a diagonal of a square matrix, or a copy of a diagonal of a 2-D ``input``.

    Args:
        input (Tensor): 1-D or 2-D.
        diagonal (int): 0 the main diagonal, > 0 above it, < 0 below.

    Returns:
        Tensor: 2-D of size ``n + |diagonal|`` for a 1-D input of size ``n``;
        1-D for a 2-D input.

    Raises:
        RuntimeError: for other numbers of dims.

    Example:
        >>> import ember
        >>> ember.diag(ember.tensor([1, 2]))
        tensor([[1, 0],
                [0, 2]])
    """
    _require_tensor("diag", "input", input)
    ndim = input._data.ndim
    if ndim not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {ndim}D")
    if ndim == 1:
        n = input._data.shape[0] + abs(diagonal)
        return MetaArray((n, n), input._data.dtype)
    rows, cols = input._data.shape
    length = max(0, min(rows, cols - diagonal)) if diagonal >= 0 else max(0, min(rows + diagonal, cols))
    return MetaArray((length,), input._data.dtype)


def _diag_cpu(input, diagonal=0):
    data = input._data
    if data.ndim == 1:
        return np.diag(data, diagonal)
    return _fresh(np.diagonal(data, diagonal))


def _diag_decomp(input, diagonal=0):
    _diag_meta(input, diagonal)
    if input._data.ndim == 1:
        return diag_embed(input, diagonal)
    from .views import diagonal as diagonal_view

    return clone(diagonal_view(input, diagonal))


diag = defop("diag", _diag_meta, cpu=_diag_cpu, category=COMPOSITE, decomposition=_diag_decomp, has_out=True)


def _diag_embed_plan(input, offset, dim1, dim2):
    _require_tensor("diag_embed", "input", input)
    ndim = input._data.ndim + 1
    d1, d2 = wrap_dim(dim1, ndim, scalar_ok=False), wrap_dim(dim2, ndim, scalar_ok=False)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    shape = input._data.shape
    n = shape[-1] + abs(offset)
    rest = iter(shape[:-1])
    out_shape = tuple(n if k in (d1, d2) else next(rest) for k in range(ndim))
    return d1, d2, out_shape


def _diag_embed_meta(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose diagonals (over dims ``dim1`` and ``dim2``) hold the last dim of ``input``; zero elsewhere.

    The inverse of :func:`ember.diagonal` for the same ``offset``, ``dim1``, ``dim2``.

    Args:
        input (Tensor): at least 1-D; its last dim becomes the diagonals.
        offset (int): which diagonal (0 main, > 0 above, < 0 below).
        dim1, dim2 (int): the dims of the new matrices (in the output's dims).

    Returns:
        Tensor: one more dim than ``input``.

    Raises:
        RuntimeError: if ``dim1`` and ``dim2`` are the same dim.
        IndexError: for out-of-range dims.

    Example:
        >>> import ember
        >>> ember.diag_embed(ember.tensor([[1, 2]]))
        tensor([[[1, 0],
                 [0, 2]]])
    """
    _, _, out_shape = _diag_embed_plan(input, offset, dim1, dim2)
    return MetaArray(out_shape, input._data.dtype)


def _diag_embed_cpu(input, offset=0, dim1=-2, dim2=-1):
    d1, d2, out_shape = _diag_embed_plan(input, offset, dim1, dim2)
    data = input._data
    n = out_shape[d1]
    work = np.zeros(data.shape[:-1] + (n, n), data.dtype)
    ar = np.arange(data.shape[-1])
    work[..., ar + max(-offset, 0), ar + max(offset, 0)] = data
    return _fresh(np.moveaxis(work, (-2, -1), (d1, d2)))


def _diag_embed_decomp(input, offset=0, dim1=-2, dim2=-1):
    d1, d2, out_shape = _diag_embed_plan(input, offset, dim1, dim2)
    from .views import diagonal as diagonal_view

    out = zeros(out_shape, dtype=input.dtype, device=input.device)
    copy_(diagonal_view(out, offset, d1, d2), input)
    return out


diag_embed = defop("diag_embed", _diag_embed_meta, cpu=_diag_embed_cpu, category=COMPOSITE,
                   decomposition=_diag_embed_decomp)


def _diagflat_meta(input, offset=0):
    """``input`` flattened, placed on the ``offset``-th diagonal of a square matrix.

    Example:
        >>> import ember
        >>> ember.diagflat(ember.tensor([[1, 2]]))
        tensor([[1, 0],
                [0, 2]])
    """
    _require_tensor("diagflat", "input", input)
    n = math.prod(input._data.shape) + abs(offset)
    return MetaArray((n, n), input._data.dtype)


def _diagflat_decomp(input, offset=0):
    _require_tensor("diagflat", "input", input)
    return diag_embed(reshape(input, -1), offset)


diagflat = defop("diagflat", _diagflat_meta, cpu=lambda input, offset=0: np.diag(input._data.reshape(-1), offset),
                 category=COMPOSITE, decomposition=_diagflat_decomp)


def _trace_dtype(input):
    if input.dtype is D.bool:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    return D.int64 if input.dtype.category == D.INTEGRAL else input.dtype


def _trace_meta(input):
    """The sum of the main diagonal of a 2-D ``input`` (integer inputs sum as int64).

    Raises:
        RuntimeError: for tensors that are not 2-D.
        NotImplementedError: for bool tensors (as PyTorch).

    Example:
        >>> import ember
        >>> ember.trace(ember.tensor([[1, 2], [3, 4]]))
        tensor(5)
    """
    _require_tensor("trace", "input", input)
    if input._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input._data.ndim}")
    return MetaArray((), _trace_dtype(input).numpy_dtype)


def _trace_cpu(input):
    out_dtype = _trace_dtype(input).numpy_dtype
    diagonal = np.diagonal(input._data)
    compute = np.dtype(np.float32) if out_dtype in _LOW_FLOATS else out_dtype
    return np.asarray(diagonal.sum(dtype=compute)).astype(out_dtype)


def _trace_decomp(input):
    _trace_meta(input)
    from . import _registry
    from .views import diagonal as diagonal_view

    return _registry.get("sum")(diagonal_view(input))


trace = defop("trace", _trace_meta, cpu=_trace_cpu, category=COMPOSITE, decomposition=_trace_decomp)


# -- meshgrid / cartesian_prod / combinations / block_diag / atleast ---------------------------------------


def _meshgrid_plan(tensors, indexing):
    """(tensors, indexing, swap): the checked arguments; ``swap`` for "xy" with two or more inputs."""
    tensors = _varargs_tensors("meshgrid", tensors)
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'ember.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in tensors:
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
        if t._data.ndim > 1:
            raise RuntimeError(f"ember.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t._data.ndim}D")
    return tensors, indexing == "xy" and len(tensors) >= 2


def _meshgrid(*tensors, indexing=None):
    """Coordinate grids: one view per 1-D (or 0-D) input, all of shape ``(len(t0), len(t1), ...)``.

    Output ``i`` holds ``tensors[i]``'s values varying along dim ``i``
    (``indexing="ij"``). With ``indexing="xy"`` (numpy's default) the first
    two dims are swapped, so for two inputs the shape is ``(len(t1), len(t0))``.

    Args:
        *tensors (Tensor): 0-D or 1-D tensors of one dtype (or one list of them).
        indexing (str, optional): ``"ij"`` or ``"xy"``; omitting it means
            ``"ij"`` and warns, as in PyTorch.

    Returns:
        tuple[Tensor]: broadcast views of the inputs.

    Raises:
        RuntimeError: for no tensors, mixed dtypes, inputs of more than 1 dim,
            or another ``indexing``.

    Example:
        >>> import ember
        >>> x, y = ember.meshgrid(ember.tensor([1, 2, 3]), ember.tensor([4, 5]), indexing="ij")
        >>> x
        tensor([[1, 1],
                [2, 2],
                [3, 3]])
    """
    tensors, swap = _meshgrid_plan(tensors, indexing)
    order = list(tensors)
    if swap:
        order[0], order[1] = order[1], order[0]
    sizes = tuple(math.prod(t._data.shape) for t in order)
    grids = []
    for i, t in enumerate(order):
        shape = [1] * len(order)
        shape[i] = -1
        grids.append(expand(view(t, tuple(shape)), sizes))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def _meshgrid_decomp(*tensors, indexing=None):
    if indexing is None:
        warnings.warn("ember.meshgrid: pass the indexing argument ('ij' or 'xy'); it defaults to 'ij'.",
                      UserWarning, stacklevel=5)
    return _meshgrid(*tensors, indexing=indexing)


meshgrid = _def_multi_view("meshgrid", _meshgrid, _meshgrid_decomp)


def _cartesian_prod_meta(*tensors):
    """The Cartesian product of 1-D tensors: every combination, one per row (like ``itertools.product``).

    Args:
        *tensors (Tensor): 1-D tensors of one dtype.

    Returns:
        Tensor: of shape ``(prod of lengths, len(tensors))``, or the single
        input's values when one tensor is given.

    Raises:
        RuntimeError: for inputs that are not 1-D, mixed dtypes, or none.

    Example:
        >>> import ember
        >>> ember.cartesian_prod(ember.tensor([1, 2]), ember.tensor([3, 4]))
        tensor([[1, 3],
                [1, 4],
                [2, 3],
                [2, 4]])
    """
    tensors = _varargs_tensors("cartesian_prod", tensors)
    for t in tensors:
        if t._data.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {_shape_str(t._data.shape)}")
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if len(tensors) == 1:
        return MetaArray(tensors[0]._data.shape, tensors[0]._data.dtype)
    if any(t.dtype is not tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    return MetaArray((math.prod(t._data.shape[0] for t in tensors), len(tensors)), tensors[0]._data.dtype)


def _cartesian_prod_cpu(*tensors):
    tensors = _varargs_tensors("cartesian_prod", tensors)
    if len(tensors) == 1:
        return _fresh(tensors[0]._data)
    grids = np.meshgrid(*(t._data for t in tensors), indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1)


def _cartesian_prod_decomp(*tensors):
    _cartesian_prod_meta(*tensors)
    tensors = _varargs_tensors("cartesian_prod", tensors)
    if len(tensors) == 1:
        return clone(tensors[0])
    return stack([reshape(g, -1) for g in meshgrid(*tensors, indexing="ij")], 1)


cartesian_prod = defop("cartesian_prod", _cartesian_prod_meta, cpu=_cartesian_prod_cpu, category=COMPOSITE,
                       decomposition=_cartesian_prod_decomp)


@functools.lru_cache(maxsize=64)
def _combination_indices(n, r, with_replacement):
    """(M, r) int64 positions of the r-combinations of range(n), in lexicographic order (cached, read-only)."""
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    flat = np.fromiter(itertools.chain.from_iterable(pick(range(n), r)), dtype=np.int64)
    result = flat.reshape(-1, r)
    result.setflags(write=False)
    return result


def _combinations_plan(input, r, with_replacement):
    _require_tensor("combinations", "input", input)
    if input._data.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {_shape_str(input._data.shape)}")
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
        raise TypeError(f"combinations(): argument 'r' must be int, not {type(r).__name__}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    n = input._data.shape[0]
    if r == 0:
        return None
    if with_replacement:
        count = math.comb(n + r - 1, r) if n else 0
    else:
        count = math.comb(n, r)
    return count


def _combinations_meta(input, r=2, with_replacement=False):
    """The length-``r`` combinations of the elements of a 1-D tensor, one per row (like ``itertools.combinations``).

    Args:
        input (Tensor): 1-D.
        r (int): elements per combination.
        with_replacement (bool): allow an element to repeat within a combination.

    Returns:
        Tensor: of shape ``(count, r)`` in lexicographic order of positions;
        ``r=0`` gives an empty 1-D tensor.

    Raises:
        RuntimeError: for an input that is not 1-D or a negative ``r``.

    Example:
        >>> import ember
        >>> ember.combinations(ember.tensor([1, 2, 3]))
        tensor([[1, 2],
                [1, 3],
                [2, 3]])
    """
    count = _combinations_plan(input, r, with_replacement)
    if count is None:
        return MetaArray((0,), input._data.dtype)
    return MetaArray((count, r), input._data.dtype)


def _combinations_cpu(input, r=2, with_replacement=False):
    if _combinations_plan(input, r, with_replacement) is None:
        return np.empty((0,), input._data.dtype)
    return input._data[_combination_indices(input._data.shape[0], int(r), bool(with_replacement))]


def _combinations_decomp(input, r=2, with_replacement=False):
    from .._creation import tensor

    if _combinations_plan(input, r, with_replacement) is None:
        return zeros((0,), dtype=input.dtype, device=input.device)
    positions = _combination_indices(input._data.shape[0], int(r), bool(with_replacement))
    return index_op(input, [tensor(positions, device=input.device)])


combinations = defop("combinations", _combinations_meta, cpu=_combinations_cpu, category=COMPOSITE,
                     decomposition=_combinations_decomp)


def _block_shapes(tensors):
    shapes = []
    for i, t in enumerate(tensors):
        ndim = t._data.ndim
        if ndim > 2:
            raise RuntimeError(
                f"ember.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {ndim} dimensions"
            )
        shape = t._data.shape
        shapes.append((1, 1) if ndim == 0 else (1, shape[0]) if ndim == 1 else tuple(shape))
    return shapes


def _block_diag_meta(*tensors):
    """A block-diagonal matrix with the inputs as blocks (0-D -> 1x1, 1-D -> one row), zero elsewhere.

    Args:
        *tensors (Tensor): tensors of at most 2 dims.

    Returns:
        Tensor: 2-D, of the promoted dtype; ``(1, 0)`` for no inputs.

    Raises:
        RuntimeError: for an input of more than 2 dims.

    Example:
        >>> import ember
        >>> ember.block_diag(ember.tensor([[1, 2]]), ember.tensor(3))
        tensor([[1, 2, 0],
                [0, 0, 3]])
    """
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"block_diag(): expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    shapes = _block_shapes(tensors)
    dtype = D.result_type_of(tensors) if tensors else D.get_default_dtype()
    if not tensors:
        return MetaArray((1, 0), dtype.numpy_dtype)
    return MetaArray((sum(s[0] for s in shapes), sum(s[1] for s in shapes)), dtype.numpy_dtype)


def _block_diag_cpu(*tensors):
    meta = _block_diag_meta(*tensors)
    out = np.zeros(meta.shape, meta.dtype)
    row = col = 0
    for t, (h, w) in zip(tensors, _block_shapes(tensors)):
        out[row : row + h, col : col + w] = t._data.reshape(h, w)
        row += h
        col += w
    return out


def _block_diag_decomp(*tensors):
    meta = _block_diag_meta(*tensors)
    device = tensors[0].device if tensors else None
    out = zeros(meta.shape, dtype=D.from_numpy_dtype(meta.dtype), device=device)
    row = col = 0
    for t, (h, w) in zip(tensors, _block_shapes(tensors)):
        block = narrow(narrow(out, 0, row, h), 1, col, w)
        copy_(block, reshape(t, (h, w)))
        row += h
        col += w
    return out


block_diag = defop("block_diag", _block_diag_meta, cpu=_block_diag_cpu, category=COMPOSITE,
                   decomposition=_block_diag_decomp)


def _atleast(n):
    name = f"atleast_{n}d"

    def views(*tensors):
        single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
        tensors = _varargs_tensors(name, tensors)
        results = []
        for t in tensors:
            target = _atleast_shape(t._data.shape, n)
            results.append(t if target == tuple(t._data.shape) else view(t, target))
        return results[0] if single else tuple(results)

    rule = {
        1: "A 0-D tensor becomes shape (1,).",
        2: "0-D becomes (1, 1), 1-D (n,) becomes (1, n).",
        3: "0-D becomes (1, 1, 1), 1-D (n,) becomes (1, n, 1), 2-D (m, n) becomes (m, n, 1).",
    }[n]
    views.__name__ = name
    views.__doc__ = f"""Each input as a view with at least {n} dims (the input itself when it already has them).

    {rule}

    Args:
        *tensors (Tensor): tensors (or one list of them).

    Returns:
        Tensor or tuple[Tensor]: a tensor for one tensor argument, else a tuple.

    Example:
        >>> import ember
        >>> ember.{name}(ember.tensor(1.)).shape
        ember.Size({[1] * n})
    """
    return _def_multi_view(name, views)


atleast_1d = _atleast(1)
atleast_2d = _atleast(2)
atleast_3d = _atleast(3)
