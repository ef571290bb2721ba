"""View ops: results share the input's storage.

A view op is defined by its meta function alone: it returns the view's shape,
strides and storage offset (a :class:`~ember._meta.MetaArray`), and each
backend builds the view from the storage with its one strided-view primitive
(:meth:`ember._device.Backend.strided_view`). So a new backend gets every
view op for free, and meta, CPU and CUDA can never disagree on strides.

The commonest calls of ``view``, ``transpose`` and ``permute`` also have view
kernels (``Op.view_kernels``, at the end of the permutations section): the
array's own method, which gives the meta function's strides for exactly the
calls it takes, without its Python work.
"""

from __future__ import annotations

import math
import operator

from .. import _dtype as D
from .._meta import MetaArray, contiguous_strides
from .._tensor import Size, Tensor
from ._registry import COMPOSITE, defop
from ._shapes import infer_size, normalize_size, wrap_dim

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS = [
    "view", "reshape", "as_strided", "transpose", "permute", "t", "unsqueeze", "squeeze", "expand", "select",
    "narrow", "split", "chunk", "unbind", "diagonal", "unfold", "flatten", "detach",
]
ALIASES = {"swapaxes": "transpose", "swapdims": "transpose"}


def _view_meta(input, shape, strides, offset=None, dtype=None):
    if offset is None:
        offset = input.storage_offset()
    elif 0 in shape and offset and input._device.type != "meta":
        offset = _clamp_empty_offset(input, offset)
    return MetaArray(shape, input._data.dtype if dtype is None else dtype, strides, offset)


def _clamp_empty_offset(input, offset):
    """An empty view's offset, kept inside the storage so that backends can place it.

    PyTorch lets an empty view point past the end of its storage (``x[5:]`` of a
    3-element ``x`` has offset 3 there, and a select of an empty tensor may go
    further); a backend array can't, so such offsets stop at the storage's end.
    """
    from .._storage import storage_of

    return min(offset, storage_of(input).nbytes // input._data.dtype.itemsize)


def _defview(name, meta, **kw):
    return defop(name, meta, kind="view", **kw)


# -- view / reshape -------------------------------------------------------------------


def _view_strides(old_shape, old_strides, new_shape):
    """Strides for viewing (old_shape, old_strides) as new_shape without copying, or None.

    Walks the old dims in chunks that are contiguous with each other and maps
    each chunk onto the new dims whose product matches it.
    """
    numel = math.prod(old_shape)
    if numel == 0:
        return contiguous_strides(new_shape)
    if not old_shape:  # a zero-dim tensor is viewed as one element of stride 1
        old_shape, old_strides = (1,), (1,)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1] if old_strides else 1
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        # end of a contiguous chunk of old dims?
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1 and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def _view_meta_fn(input, *shape):
    """A view of ``input`` with a new shape (one size may be -1); no data is copied.

    ``view(dtype)`` instead reads the same bytes as another dtype; with a
    different element size the last dimension (which must have stride 1)
    shrinks or grows by the size ratio.

    Raises:
        RuntimeError: if the shape does not hold ``input.numel()`` elements, or if
            ``input``'s strides don't allow the view (use :func:`ember.reshape` then).

    Example:
        >>> import ember
        >>> ember.arange(6).view(2, 3)
        tensor([[0, 1, 2],
                [3, 4, 5]])
    """
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        return _view_dtype_meta(input, shape[0])
    data = input._data
    new_shape = infer_size(_raw_shape(shape, "view", "size"), data.size)
    strides = _view_strides(data.shape, input.stride(), new_shape)
    if strides is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans across "
            "two contiguous subspaces). Use .reshape(...) instead."
        )
    return _view_meta(input, new_shape, strides)


def _view_dtype_meta(input, dtype):
    """``input.view(dtype)``: the same bytes read as ``dtype``; the last dim scales with the itemsize ratio."""
    old, new = input._data.dtype.itemsize, dtype.itemsize
    shape, strides, offset = list(input._data.shape), list(input.stride()), input.storage_offset()
    if old == new:
        return _view_meta(input, tuple(shape), tuple(strides), offset, dtype.numpy_dtype)
    if input._data.ndim == 0 or strides[-1] != 1:
        raise RuntimeError(
            f"self.stride(-1) must be 1 to view {input.dtype} as {dtype} (different element sizes), "
            f"but got {strides[-1] if strides else 'a 0-dim tensor'}"
        )
    if new > old:
        ratio = new // old
        if shape[-1] % ratio or offset % ratio or any(s % ratio for s in strides[:-1]):
            raise RuntimeError(
                f"self.size(-1) ({shape[-1]}), the storage offset and the other strides must be divisible by {ratio} "
                f"to view {input.dtype} as {dtype} (different element sizes)"
            )
        shape[-1] //= ratio
        strides = [s // ratio for s in strides[:-1]] + [1]
        offset //= ratio
    else:
        ratio = old // new
        shape[-1] *= ratio
        strides = [s * ratio for s in strides[:-1]] + [1]
        offset *= ratio
    return _view_meta(input, tuple(shape), tuple(strides), offset, dtype.numpy_dtype)


def _raw_shape(shape, op="reshape", arg="shape"):
    """A shape given as ints or one sequence of ints, as a tuple of ints (integers and anything with
    ``__index__``: numpy integers, one-element integer tensors).

    Raises:
        TypeError: for another element (a float), in PyTorch's words for ``op``'s argument ``arg``.
    """
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    try:
        return tuple(map(operator.index, shape))
    except TypeError:
        pos, bad = next((i, v) for i, v in enumerate(shape) if not hasattr(type(v), "__index__"))
        raise TypeError(f"{op}(): argument '{arg}' failed to unpack the object at pos {pos + 1} with error "
                        f'"type must be tuple of ints,but got {type(bad).__name__}"') from None


view = _defview("view", _view_meta_fn)


def _reshape_decomp(input, *shape):
    if input._device.type in view.view_kernels and _row_major_array(input._data) and _int_sizes(shape) is not None:
        return view(input, *shape)  # always a view (its kernel's case); an unfit size raises as here
    new_shape = infer_size(_raw_shape(shape), input._data.size)
    if _view_strides(input._data.shape, input.stride(), new_shape) is not None:
        return view(input, new_shape)
    from .creation import clone, contiguous_format

    return view(clone(input, memory_format=contiguous_format), new_shape)


def _reshape_meta(input, *shape):
    """``input`` with a new shape: a view when the strides allow, a copy otherwise.

    Raises:
        RuntimeError: if the shape does not hold ``input.numel()`` elements.
    """
    new_shape = infer_size(_raw_shape(shape), input._data.size)
    strides = _view_strides(input._data.shape, input.stride(), new_shape)
    if strides is None:
        return MetaArray(new_shape, input._data.dtype)
    return _view_meta(input, new_shape, strides)


reshape = defop("reshape", _reshape_meta, category=COMPOSITE, kind="view", decomposition=_reshape_decomp)
reshape.decomposition_checks = True  # infer_size raises what the meta would; view checks the rest


def _as_strided_meta(input, size, stride, storage_offset=None):
    """A view of ``input``'s storage with the given sizes, strides (elements) and offset.

    Raises:
        RuntimeError: if the view would reach outside the storage, or sizes and
            strides differ in length.
    """
    size = normalize_size((size,))
    stride = tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(stride)} vs {len(size)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    offset = input.storage_offset() if storage_offset is None else int(storage_offset)
    if math.prod(size) > 0:
        from .._storage import storage_of

        need = (offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))) * input._data.dtype.itemsize
        have = storage_of(input).nbytes
        if need > have:
            raise RuntimeError(
                f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and itemsize "
                f"{input._data.dtype.itemsize} requiring a storage size of {need} are out of bounds for storage of "
                f"size {have}"
            )
    return _view_meta(input, size, stride, offset)


as_strided = _defview("as_strided", _as_strided_meta)


# -- permutations -------------------------------------------------------------------


def _transpose_meta(input, dim0, dim1):
    """A view of ``input`` with dimensions ``dim0`` and ``dim1`` swapped.

    Raises:
        IndexError: for out-of-range dims.

    Example:
        >>> import ember
        >>> ember.zeros(2, 3).transpose(0, 1).shape
        ember.Size([3, 2])
    """
    ndim = input._data.ndim
    d0, d1 = wrap_dim(dim0, ndim), wrap_dim(dim1, ndim)
    shape, strides = list(input._data.shape), list(input.stride())
    if ndim:
        shape[d0], shape[d1] = shape[d1], shape[d0]
        strides[d0], strides[d1] = strides[d1], strides[d0]
    return _view_meta(input, tuple(shape), tuple(strides))


transpose = _defview("transpose", _transpose_meta)


def _permute_meta(input, *dims):
    """A view of ``input`` with its dimensions reordered as ``dims``.

    Raises:
        RuntimeError: if ``dims`` is not a permutation of the dimensions.
    """
    ndim = input._data.ndim
    dims = _raw_shape(dims, "permute", "dims")
    if len(dims) != ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired "
            f"ordering of dimensions i.e. input.dim() = {ndim} is not equal to len(dims) = {len(dims)}"
        )
    wrapped = [wrap_dim(d, ndim) for d in dims]
    if len(set(wrapped)) != ndim:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    shape, strides = input._data.shape, input.stride()
    return _view_meta(input, tuple(shape[d] for d in wrapped), tuple(strides[d] for d in wrapped))


permute = _defview("permute", _permute_meta)


# -- view kernels: the common calls without the meta function -------------------------------
# A view op's meta function computes the view's strides in Python (about 10 us of a view's 15); the
# backend arrays compute the same strides themselves for the common calls. Each kernel below takes the
# calls whose result it knows equals the meta function's (tests/test_view_kernels.py compares shapes,
# strides, offsets and storage over random layouts), and declines (None) the rest, errors included:
# the meta function then raises PyTorch's message.


def _int_sizes(sizes):
    """``sizes`` (varargs, or one tuple, list or Size of them) as a tuple of plain ints, or None."""
    if len(sizes) == 1 and type(sizes[0]) in (tuple, list, Size):
        sizes = sizes[0]
    for s in sizes:
        if type(s) is not int:
            return None
    return tuple(sizes)


def _row_major_array(data):
    """Whether backend array ``data`` (numpy or CuPy) is non-empty and row-major without dims of size 1: any
    shape of as many elements views it with row-major strides. (Size-1 dims may carry any stride, which the
    meta function keeps and the arrays' contiguity flags ignore.)"""
    return type(data) is not MetaArray and data.size != 0 and 1 not in data.shape and data.flags.c_contiguous


def _view_kernel(input, *shape):
    """``view`` of a :func:`_row_major_array`: the array's own reshape, whose row-major strides are the meta
    function's."""
    data = input._data
    sizes = _int_sizes(shape)
    if sizes is None or not _row_major_array(data):
        return None
    try:
        return data.reshape(sizes)
    except ValueError:  # a size that does not fit: the meta function says so in PyTorch's words
        return None


def _transpose_kernel(input, dim0, dim1):
    """``transpose`` of a non-empty array over int dims in range: the array's ``swapaxes``."""
    data = input._data
    ndim = data.ndim
    if type(dim0) is not int or type(dim1) is not int or type(data) is MetaArray or data.size == 0 or not (
        -ndim <= dim0 < ndim and -ndim <= dim1 < ndim
    ):
        return None
    return data.swapaxes(dim0, dim1)


def _permute_kernel(input, *dims):
    """``permute`` of a non-empty array by a permutation of its dims (ints): the array's ``transpose``."""
    data = input._data
    order = _int_sizes(dims)
    if order is None or type(data) is MetaArray or len(order) != data.ndim or data.size == 0:
        return None
    try:
        return data.transpose(order)
    except (ValueError, IndexError):  # a dim out of range or repeated: the meta function's message
        return None


for _op, _kernel in ((view, _view_kernel), (transpose, _transpose_kernel), (permute, _permute_kernel)):
    for _device_type in ("cpu", "cuda"):  # numpy and CuPy arrays alike
        _op.register_view_kernel(_device_type, _kernel)


def _t_decomp(input):
    _t_meta(input)  # the argument check: a decomposition runs without the meta function
    return transpose(input, 0, 1) if input._data.ndim == 2 else view(input, input._data.shape)


def _t_meta(input):
    """Transpose of a tensor of at most 2 dimensions (0-D and 1-D come back as they are).

    Raises:
        RuntimeError: for tensors of more than 2 dimensions.
    """
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input._data.ndim}D")
    if input._data.ndim == 2:
        return _transpose_meta(input, 0, -1)
    return _view_meta(input, input._data.shape, input.stride())


t = defop("t", _t_meta, category=COMPOSITE, kind="view", decomposition=_t_decomp)


# -- adding and removing size-1 dims; expand -----------------------------------------------


def _unsqueeze_meta(input, dim):
    """A view of ``input`` with a size-1 dimension inserted at ``dim``.

    Raises:
        IndexError: if ``dim`` is outside ``[-input.dim()-1, input.dim()]``.
    """
    ndim = input._data.ndim
    d = wrap_dim(dim, ndim + 1, scalar_ok=False)
    shape, strides = list(input._data.shape), list(input.stride())
    new_stride = strides[d] * shape[d] if d < ndim else 1
    shape.insert(d, 1)
    strides.insert(d, new_stride)
    return _view_meta(input, tuple(shape), tuple(strides))


unsqueeze = _defview("unsqueeze", _unsqueeze_meta)


def _squeeze_meta(input, dim=None):
    """A view of ``input`` without size-1 dimensions (all, or those in ``dim``).

    Dimensions in ``dim`` whose size is not 1 are left alone.

    Raises:
        IndexError: for out-of-range dims.
    """
    ndim = input._data.ndim
    if dim is None:
        dims = set(range(ndim))
    else:
        dims = {wrap_dim(d, ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
    keep = [i for i in range(ndim) if not (i in dims and input._data.shape[i] == 1)]
    strides = input.stride()
    return _view_meta(input, tuple(input._data.shape[i] for i in keep), tuple(strides[i] for i in keep))


squeeze = _defview("squeeze", _squeeze_meta)


def _expand_meta(input, *sizes):
    """A view of ``input`` broadcast to ``sizes`` (-1 keeps a size); new dims are added in front.

    No memory is allocated: expanded dimensions have stride 0.

    Raises:
        RuntimeError: if a non-singleton size would change, or fewer sizes than dims are given.
    """
    sizes = _raw_shape(sizes, "expand", "size")
    shape, strides = input._data.shape, input.stride()
    ndim = input._data.ndim
    if len(sizes) < ndim:
        raise RuntimeError(
            f"expand({input.dtype}{{{list(shape)}}}, size={list(sizes)}): the number of sizes provided "
            f"({len(sizes)}) must be greater or equal to the number of dimensions in the tensor ({ndim})"
        )
    lead = len(sizes) - ndim
    new_shape, new_strides = [], []
    for i, size in enumerate(sizes):
        if i < lead:
            if size < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor ({size}) isn't allowed in a leading, non-existing dimension {i}"
                )
            new_shape.append(size)
            new_strides.append(0)
            continue
        old, old_stride = shape[i - lead], strides[i - lead]
        if size == -1:
            size = old
        if old == size:
            new_shape.append(size)
            new_strides.append(old_stride)
        elif old == 1:
            new_shape.append(size)
            new_strides.append(0)
        else:
            raise RuntimeError(
                f"The expanded size of the tensor ({size}) must match the existing size ({old}) at non-singleton "
                f"dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(shape)}"
            )
    return _view_meta(input, tuple(new_shape), tuple(new_strides))


expand = _defview("expand", _expand_meta)


# -- select / slice / narrow / split --------------------------------------------------


def _select_meta(input, dim, index):
    """The slice of ``input`` at ``index`` along ``dim``, with that dimension removed.

    Raises:
        IndexError: for out-of-range ``dim`` or ``index``.
    """
    ndim = input._data.ndim
    if ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, ndim)
    size = input._data.shape[d]
    index = int(index)
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    if index < 0:
        index += size
    strides = input.stride()
    shape = input._data.shape
    return _view_meta(
        input,
        shape[:d] + shape[d + 1 :],
        strides[:d] + strides[d + 1 :],
        input.storage_offset() + index * strides[d],
    )


select = _defview("select", _select_meta)


def _slice_meta(input, dim=0, start=None, end=None, step=1):
    """Elements ``start:end:step`` of ``input`` along ``dim`` (Python slice semantics, clamped).

    Raises:
        ValueError: if ``step`` is not positive.
        IndexError: for an out-of-range ``dim``.
    """
    ndim = input._data.ndim
    if ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, ndim)
    if step <= 0:
        raise ValueError("step must be greater than zero")
    size = input._data.shape[d]
    start, end, _ = slice(start, end, 1).indices(size)
    length = max(0, (end - start + step - 1) // step)
    shape, strides = list(input._data.shape), list(input.stride())
    shape[d] = length
    offset = input.storage_offset() + start * strides[d]  # also when empty, as PyTorch
    strides[d] *= step
    return _view_meta(input, tuple(shape), tuple(strides), offset)


slice_op = _defview("slice", _slice_meta)


def _narrow_decomp(input, dim, start, length):
    _narrow_meta(input, dim, start, length)  # the argument checks
    d = wrap_dim(dim, input._data.ndim)
    size = input._data.shape[d]
    start = int(start)
    if start < 0:
        start += size
    return slice_op(input, d, start, start + int(length))


def _narrow_meta(input, dim, start, length):
    """The ``length`` elements of ``input`` from ``start`` along ``dim``, as a view.

    Raises:
        IndexError: for an out-of-range ``start`` or ``dim``.
        RuntimeError: if ``start + length`` exceeds the dimension's size.
    """
    if input._data.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, input._data.ndim)
    size = input._data.shape[d]
    start, length = int(start), int(length)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _slice_meta(input, d, start, start + length)


narrow = defop("narrow", _narrow_meta, category=COMPOSITE, kind="view", decomposition=_narrow_decomp)


def _split_sizes(input, split_size_or_sections, dim):
    d = wrap_dim(dim, input._data.ndim)
    size = input._data.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and not (step == 0 and size == 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        if step == 0:
            return d, [0]
        n = max(1, -(-size // step))
        return d, [min(step, size - i * step) for i in range(n)]
    sizes = [int(s) for s in split_size_or_sections]
    if sum(sizes) != size or any(s < 0 for s in sizes):
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension {d}), "
            f"but got split_sizes={sizes}"
        )
    return d, sizes


def _split_meta(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces of ``tensor`` along ``dim``.

    Args:
        split_size_or_sections (int or list[int]): the size of each piece (the
            last may be smaller), or the list of piece sizes.

    Raises:
        RuntimeError: if the sizes don't add up to the dimension's size.
    """
    return _split_pieces(_slice_meta, tensor, split_size_or_sections, dim)


def _split_decomp(tensor, split_size_or_sections, dim=0):
    return _split_pieces(slice_op, tensor, split_size_or_sections, dim)


def _split_pieces(slicer, tensor, split_size_or_sections, dim):
    """``slicer(tensor, d, start, stop)`` for each consecutive piece of ``split``: the meta passes
    ``_slice_meta``, the decomposition the ``slice`` op."""
    d, sizes = _split_sizes(tensor, split_size_or_sections, dim)
    pieces, start = [], 0
    for s in sizes:
        pieces.append(slicer(tensor, d, start, start + s))
        start += s
    return tuple(pieces)


split = defop("split", _split_meta, category=COMPOSITE, kind="view", decomposition=_split_decomp)


def _chunk_sizes(input, chunks, dim):
    """The piece sizes of ``chunk``: pieces of ``ceil(size / chunks)``, the last smaller;
    an empty dimension gives ``chunks`` empty pieces, as in PyTorch."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, input._data.ndim)
    size = input._data.shape[d]
    if size == 0:
        return [0] * chunks
    step = -(-size // chunks)
    return [min(step, size - start) for start in range(0, size, step)]


def _chunk_meta(input, chunks, dim=0):
    """Split ``input`` into at most ``chunks`` views of equal size along ``dim`` (the last may be smaller).

    Raises:
        RuntimeError: if ``chunks`` is not positive.
    """
    return _split_meta(input, _chunk_sizes(input, chunks, dim), dim)


def _chunk_decomp(input, chunks, dim=0):
    return split(input, _chunk_sizes(input, chunks, dim), dim)


chunk = defop("chunk", _chunk_meta, category=COMPOSITE, kind="view", decomposition=_chunk_decomp)


def _unbind_meta(input, dim=0):
    """All slices of ``input`` along ``dim``, as a tuple of views without that dimension."""
    d = wrap_dim(dim, input._data.ndim)
    return tuple(_select_meta(input, d, i) for i in range(input._data.shape[d]))


def _unbind_decomp(input, dim=0):
    d = wrap_dim(dim, input._data.ndim)
    return tuple(select(input, d, i) for i in range(input._data.shape[d]))


unbind = defop("unbind", _unbind_meta, category=COMPOSITE, kind="view", decomposition=_unbind_decomp)


# -- diagonal / unfold -------------------------------------------------------------------


def _diagonal_meta(input, offset=0, dim1=0, dim2=1):
    """The diagonal of ``input`` over dims ``dim1`` and ``dim2`` (moved to the last dim), as a view.

    ``offset`` > 0 selects a diagonal above the main one, < 0 below.

    Raises:
        RuntimeError: if ``dim1 == dim2``.
        IndexError: for out-of-range dims.
    """
    ndim = input._data.ndim
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    shape, strides = input._data.shape, input.stride()
    if offset >= 0:
        length = max(0, min(shape[d1], shape[d2] - offset))
        start = offset * strides[d2]
    else:
        length = max(0, min(shape[d1] + offset, shape[d2]))
        start = -offset * strides[d1]
    keep = [i for i in range(ndim) if i not in (d1, d2)]
    new_shape = tuple(shape[i] for i in keep) + (length,)
    new_strides = tuple(strides[i] for i in keep) + (strides[d1] + strides[d2],)
    return _view_meta(input, new_shape, new_strides, input.storage_offset() + (start if length else 0))


diagonal = _defview("diagonal", _diagonal_meta)


def _unfold_meta(input, dimension, size, step):
    """All windows of ``size`` elements along ``dimension`` taken every ``step``, as a new last dim.

    Raises:
        RuntimeError: if ``size`` exceeds the dimension or ``step`` is not positive.
    """
    ndim = input._data.ndim
    d = wrap_dim(dimension, ndim)
    dim_size = input._data.shape[d] if ndim else 1
    if size > dim_size:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {dim_size} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    shape, strides = list(input._data.shape), list(input.stride())
    if ndim == 0:
        return _view_meta(input, (size,), (1,))
    count = (dim_size - size) // step + 1
    shape[d] = count
    new_strides = strides.copy()
    new_strides[d] = strides[d] * step
    return _view_meta(input, tuple(shape) + (size,), tuple(new_strides) + (strides[d],))


unfold = _defview("unfold", _unfold_meta)


# -- complex views ------------------------------------------------------------------------


def _view_as_real_meta(input):
    """A float view of a complex tensor with a trailing dimension of size 2 (real, imaginary).

    Raises:
        RuntimeError: for non-complex tensors.
    """
    if not input.is_complex():
        raise RuntimeError("view_as_real is only supported for complex tensors")
    strides = tuple(2 * s for s in input.stride()) + (1,)
    real = input.dtype.to_real()
    return _view_meta(input, tuple(input._data.shape) + (2,), strides, 2 * input.storage_offset(), real.numpy_dtype)


view_as_real = _defview("view_as_real", _view_as_real_meta)


def _view_as_complex_meta(input):
    """A complex view of a float tensor whose last dimension has size 2 and stride 1.

    Raises:
        RuntimeError: for other dtypes, a last dim not of size 2 and stride 1, or odd strides.
    """
    if input.dtype not in (D.float32, D.float64, D.float16):
        raise RuntimeError(
            "view_as_complex is only supported for float, double and half tensors, but got a tensor of scalar "
            f"type: {input.dtype}"
        )
    shape, strides = input._data.shape, input.stride()
    if not shape or shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if strides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in strides[:-1]) or input.storage_offset() % 2:
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    cdt = input.dtype.to_complex() if input.dtype is not D.float16 else None
    if cdt is None:
        raise RuntimeError("view_as_complex: complex32 is not supported")
    strides = tuple(s // 2 for s in strides[:-1])
    return _view_meta(input, shape[:-1], strides, input.storage_offset() // 2, cdt.numpy_dtype)


view_as_complex = _defview("view_as_complex", _view_as_complex_meta)


def _real_decomp(input):
    return select(view_as_real(input), -1, 0) if input.is_complex() else input


def _real_meta(input):
    """The real part of ``input`` as a view (``input`` itself when it is real)."""
    if input.is_complex():
        return _select_meta(Tensor._make(_view_as_real_meta(input), input.device), -1, 0)
    return _view_meta(input, input._data.shape, input.stride())


real = defop("real", _real_meta, category=COMPOSITE, kind="view", decomposition=_real_decomp)


def _imag_decomp(input):
    _imag_meta(input)
    return select(view_as_real(input), -1, 1)


def _imag_meta(input):
    """The imaginary part of a complex ``input`` as a view.

    Raises:
        RuntimeError: for real tensors.
    """
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _select_meta(Tensor._make(_view_as_real_meta(input), input.device), -1, 1)


imag = defop("imag", _imag_meta, category=COMPOSITE, kind="view", decomposition=_imag_decomp)


def _detach_meta(input):
    """A view of ``input`` that autograd does not track (same storage, ``requires_grad=False``)."""
    return _view_meta(input, input._data.shape, input.stride())


detach = _defview("detach", _detach_meta)


def _flatten_decomp(input, start_dim=0, end_dim=-1):
    # reshape's decomposition itself: one dispatch fewer on a hot path (Flatten before a classifier)
    return _reshape_decomp(input, _flatten_shape(input, start_dim, end_dim))


def _flatten_shape(input, start_dim, end_dim):
    ndim = input._data.ndim
    if ndim == 0:
        return (1,)
    s, e = wrap_dim(start_dim, ndim), wrap_dim(end_dim, ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input._data.shape
    return tuple(shape[:s]) + (math.prod(shape[s : e + 1]),) + tuple(shape[e + 1 :])


def _flatten_meta(input, start_dim=0, end_dim=-1):
    """``input`` with dims ``start_dim``..``end_dim`` merged into one (a view when possible).

    Raises:
        RuntimeError: if ``start_dim`` comes after ``end_dim``.
    """
    return _reshape_meta(input, _flatten_shape(input, start_dim, end_dim))


flatten = defop("flatten", _flatten_meta, category=COMPOSITE, kind="view", decomposition=_flatten_decomp)
flatten.decomposition_checks = True  # _flatten_shape and reshape's decomposition raise what the meta would


def is_view_compatible(input, shape):
    """Whether ``input`` can be viewed as ``shape`` without a copy."""
    return _view_strides(input._data.shape, input.stride(), tuple(shape)) is not None
