"""ONNX rules for shape ops (views, joins, splits) and tensor creation.

Sizes may be :class:`~._dynamic.SymInt` where they depend on dynamic axes; ``g.i64``
turns a list of them into a runtime tensor, so ``reshape(x, 16, 8, 8)`` traced with a
dynamic batch becomes ``Reshape(x, Concat([16], Mul(batch, [4]), [8]))``. Sizes these
rules read from example shapes go through ``g.size``, which knows the dynamic ones too.
"""

from __future__ import annotations

import numpy as np

from ._builder import numpy_dtype
from ._dynamic import SymInt
from ._rules_pointwise import operand
from ._table import RuleTable

TABLE = RuleTable("shape")

_INT64_MAX = 2**63 - 1


def sizes_arg(sizes):
    """``(2, 3)`` from ``reshape``-style size arguments: ``(2, 3)``, ``((2, 3),)`` or ``([2, 3],)``."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return tuple(sizes)


def axis(dim, rank):
    return int(dim) % rank if rank else 0


def _is_literal_zero(v):
    return not isinstance(v, SymInt) and int(v) == 0


@TABLE.register("reshape", "view")
def _reshape(g, input, shape, **_):
    shape = sizes_arg(shape)
    # ONNX reads a 0 in the target as "copy this input axis" unless allowzero is set
    allowzero = 1 if any(_is_literal_zero(v) for v in shape) else None
    return g.op("Reshape", input, g.i64(shape), allowzero=allowzero)


@TABLE.register("view_as")
def _view_as(g, input, other, **_):
    return g.op("Reshape", input, g.op("Shape", other))


def _reshape_around(g, x, start, end, middle):
    """Reshape ``x`` keeping axes ``< start`` and ``> end`` and replacing ``start..end`` by ``middle`` (a value)."""
    pieces = []
    if start > 0:
        pieces.append(g.op("Shape", x, start=0, end=start))
    pieces.append(middle)
    if end + 1 < g.rank(x):
        pieces.append(g.op("Shape", x, start=end + 1))
    target = pieces[0] if len(pieces) == 1 else g.op("Concat", *pieces, axis=0)
    return g.op("Reshape", x, target)


@TABLE.register("flatten")
def _flatten(g, input, start_dim=0, end_dim=-1, **_):
    rank = g.rank(input)
    if rank == 0:
        return g.op("Reshape", input, g.i64([1]))
    start, end = axis(start_dim, rank), axis(end_dim, rank)
    if start == end:
        return g.op("Identity", input)
    return _reshape_around(g, input, start, end, g.i64([-1]))


@TABLE.register("unflatten")
def _unflatten(g, input, dim, sizes, **_):
    d = axis(dim, g.rank(input))
    return _reshape_around(g, input, d, d, g.i64(sizes))


@TABLE.register("transpose")
def _transpose(g, input, dim0, dim1, **_):
    rank = g.rank(input)
    if rank < 2:
        return g.op("Identity", input)
    perm = list(range(rank))
    a, b = axis(dim0, rank), axis(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return g.op("Transpose", input, perm=perm)


@TABLE.register("t")
def _t(g, input, **_):
    return _transpose(g, input, 0, 1)


@TABLE.register("permute")
def _permute(g, input, dims, **_):
    rank = g.rank(input)
    return g.op("Transpose", input, perm=[axis(d, rank) for d in sizes_arg(dims)])


@TABLE.register("unsqueeze")
def _unsqueeze(g, input, dim, **_):
    return g.op("Unsqueeze", input, g.i64([axis(dim, g.rank(input) + 1)]))


@TABLE.register("squeeze")
def _squeeze(g, input, dim=None, **_):
    shape = g.meta(input).shape
    if dim is None:
        dims = [i for i, n in enumerate(shape) if n == 1]
    else:
        dims = [axis(d, len(shape)) for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
        dims = [d for d in dims if shape[d] == 1]  # squeezing an axis of another size does nothing
    for d in dims:
        if isinstance(g.size(input, d), SymInt):
            g.unsupported(
                f"axis {d} is squeezed because it has size 1 in the example, but it is dynamic; "
                "give that axis another size in the example inputs"
            )
    if not dims:
        return g.op("Identity", input)
    return g.op("Squeeze", input, g.i64(dims))


@TABLE.register("expand")
def _expand(g, input, sizes, **_):
    # -1 keeps the axis: a 1 in ONNX's broadcasting Expand does the same
    sizes = [1 if not isinstance(s, SymInt) and int(s) == -1 else s for s in sizes_arg(sizes)]
    return g.op("Expand", input, g.i64(sizes))


@TABLE.register("expand_as")
def _expand_as(g, input, other, **_):
    return g.op("Expand", input, g.op("Shape", other))


@TABLE.register("select")
def _select(g, input, dim, index, **_):
    return g.op("Gather", input, g.i64_scalar(index), axis=axis(dim, g.rank(input)))


@TABLE.register("slice")
def _slice(g, input, dim=0, start=None, end=None, step=1, **_):
    start = 0 if start is None else start
    end = _INT64_MAX if end is None else end
    d = axis(dim, g.rank(input))
    return g.op("Slice", input, g.i64([start]), g.i64([end]), g.i64([d]), g.i64([step]))


@TABLE.register("narrow")
def _narrow(g, input, dim, start, length, **_):
    if isinstance(start, str):
        g.unsupported("a tensor start")
    d = axis(dim, g.rank(input))
    begin = g.i64([start])
    end = g.op("Add", begin, g.i64([length]))
    return g.op("Slice", input, begin, end, g.i64([d]))


def _split_by_sizes(g, input, d):
    """Split ``input`` along ``d`` into the pieces the node's example outputs have."""
    outs = g.out if isinstance(g.out, tuple) else (g.out,)
    sizes = [g.out_size(k, d) for k in range(len(outs))]
    if len(sizes) == 1:
        return [g.op("Identity", input)]
    return g.op("Split", input, g.i64(sizes), axis=d, outputs=len(sizes))


@TABLE.register("chunk")
def _chunk(g, input, chunks, dim=0, **_):
    return _split_by_sizes(g, input, axis(dim, g.rank(input)))


@TABLE.register("split")
def _split(g, tensor, split_size_or_sections, dim=0, **_):
    return _split_by_sizes(g, tensor, axis(dim, g.rank(tensor)))


@TABLE.register("unbind")
def _unbind(g, input, dim=0, **_):
    d = axis(dim, g.rank(input))
    count = len(g.out)
    pieces = (
        [g.op("Identity", input)] if count == 1 else g.op("Split", input, g.i64([1] * count), axis=d, outputs=count)
    )
    return [g.op("Squeeze", p, g.i64([d])) for p in pieces]


@TABLE.register("flip")
def _flip(g, input, dims, **_):
    rank = g.rank(input)
    dims = [axis(d, rank) for d in (dims if isinstance(dims, (tuple, list)) else [dims])]
    if not dims:
        return g.op("Identity", input)
    n = len(dims)
    # a step of -1 from the last element to before the first
    return g.op("Slice", input, g.i64([-1] * n), g.i64([-_INT64_MAX] * n), g.i64(dims), g.i64([-1] * n))


@TABLE.register("gather")
def _gather(g, input, dim, index, **_):
    return g.op("GatherElements", input, index, axis=axis(dim, g.rank(input)))


@TABLE.register("cat")
def _cat(g, tensors, dim=0, **_):
    dtype = g.out.dtype
    # ember (like PyTorch) skips 1-D empty tensors in cat
    tensors = [t for t in tensors if g.meta(t).shape != (0,)] or list(tensors[:1])
    rank = g.rank(tensors[0])
    return g.op("Concat", *[g.cast(t, dtype) for t in tensors], axis=axis(dim, rank))


@TABLE.register("stack")
def _stack(g, tensors, dim=0, **_):
    dtype = g.out.dtype
    d = axis(dim, g.rank(tensors[0]) + 1)
    parts = [g.op("Unsqueeze", g.cast(t, dtype), g.i64([d])) for t in tensors]
    return g.op("Concat", *parts, axis=d)


@TABLE.register("index_select")
def _index_select(g, input, dim, index, **_):
    return g.op("Gather", input, index, axis=axis(dim, g.rank(input)))


@TABLE.register("repeat")
def _repeat(g, input, sizes, **_):
    sizes = sizes_arg(sizes)
    extra = len(sizes) - g.rank(input)
    x = g.op("Unsqueeze", input, g.i64(list(range(extra)))) if extra > 0 else input
    return g.op("Tile", x, g.i64(sizes))


@TABLE.register("tril", "triu")
def _trilu(g, input, diagonal=0, **_):
    upper = 1 if g.current.target.name == "triu" else 0
    return g.op("Trilu", input, g.i64_scalar(diagonal), upper=upper)


@TABLE.register("pad")
def _pad(g, input, pad, mode="constant", value=None, **_):
    modes = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
    if mode not in modes or (mode == "circular" and g.opset < 19):
        g.unsupported(f"mode={mode!r}" + (" needs opset_version >= 19" if mode == "circular" else ""))
    rank = g.rank(input)
    begins, ends = [0] * rank, [0] * rank
    # ember's pad lists (left, right) pairs from the last axis backwards
    for k in range(len(pad) // 2):
        begins[rank - 1 - k], ends[rank - 1 - k] = pad[2 * k], pad[2 * k + 1]
    fill = None if mode != "constant" else g.scalar(0 if value is None else value, g.out.dtype)
    return g.op("Pad", input, g.i64(begins + ends), fill, mode=modes[mode])


# -- creation -------------------------------------------------------------------------------------


def _filled(g, shape, fill_value):
    """A tensor of the node's output dtype and runtime ``shape`` (a value) filled with ``fill_value``."""
    from onnx import numpy_helper

    value = numpy_helper.from_array(np.array([fill_value], dtype=numpy_dtype(g.out.dtype)))
    return g.op("ConstantOfShape", shape, value=value)


@TABLE.register("zeros")
def _zeros(g, size, **_):
    return _filled(g, g.i64(sizes_arg(size)), 0)


@TABLE.register("ones")
def _ones(g, size, **_):
    return _filled(g, g.i64(sizes_arg(size)), 1)


@TABLE.register("full")
def _full(g, size, fill_value, **_):
    return _filled(g, g.i64(sizes_arg(size)), fill_value)


@TABLE.register("zeros_like")
def _zeros_like(g, input, **_):
    return _filled(g, g.op("Shape", input), 0)


@TABLE.register("ones_like")
def _ones_like(g, input, **_):
    return _filled(g, g.op("Shape", input), 1)


@TABLE.register("full_like")
def _full_like(g, input, fill_value, **_):
    return _filled(g, g.op("Shape", input), fill_value)


@TABLE.register("arange")
def _arange(g, start, end=None, step=1, **_):
    if end is None:
        start, end = 0, start
    dtype = g.out.dtype

    def bound(v):
        if isinstance(v, SymInt):
            return g.cast_scalar(g.i64_scalar(v), dtype)
        return operand(g, v, dtype)

    return g.op("Range", bound(start), bound(end), bound(step))
