"""View-returning composites that the view prims of :mod:`ember._ops.views` don't cover.

``tensor_split``, ``unflatten``, ``ravel``, ``view_as``, ``expand_as``,
``broadcast_to``, ``broadcast_tensors``, ``movedim``/``moveaxis``,
``swapaxes``/``swapdims`` and ``atleast_1d``/``2d``/``3d``: each is written over
those prims, so it returns a view wherever PyTorch does.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._shape_helpers import (
    _atleast_shape,
    _data_dependent,
    _def_multi_view,
    _int_list,
    _int_or_list,
    _require_tensor,
    _varargs_tensors,
)
from ._shapes import broadcast_shapes, wrap_dim
from .views import (
    _expand_meta,
    _permute_meta,
    _reshape_meta,
    _slice_meta,
    _transpose_meta,
    _view_meta_fn,
    expand,
    permute,
    reshape,
    slice_op,
    transpose,
    view,
)

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = [
    "tensor_split", "unflatten", "ravel", "view_as", "expand_as", "broadcast_to", "movedim", "moveaxis", "swapaxes",
    "swapdims"
]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


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


def _like_other(name, shape_meta, shape_op, doc):
    """view_as or expand_as: ``shape_op(input, other.shape)``, whose meta is ``shape_meta``."""

    def meta(input, other):
        _require_tensor(name, "other", other)
        return shape_meta(input, tuple(other._data.shape))

    def decomposition(input, other):
        _require_tensor(name, "other", other)
        return shape_op(input, tuple(other._data.shape))

    meta.__name__, meta.__doc__ = f"_{name}_meta", doc
    return defop(name, meta, category=COMPOSITE, kind="view", decomposition=decomposition)


view_as = _like_other("view_as", _view_meta_fn, view, """``input.view(other.shape)``: a view of ``input`` with
    ``other``'s shape.

    Raises:
        RuntimeError: as :func:`ember.view`.
    """)


# -- broadcasting and moving dims ----------------------------------------------------------------


expand_as = _like_other("expand_as", _expand_meta, expand, """``input.expand(other.shape)``: a broadcast view of
    ``input`` with ``other``'s shape.

    Raises:
        RuntimeError: if ``input`` doesn't broadcast to ``other``'s shape.
    """)


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
