"""Derivatives of the shape and index ops (``ember._ops.joining``, ``masks``, ...).

Moving data around moves gradients back the other way: the backward of a
gather is a scatter-add, that of a scatter a gather, that of a fill zeros
where the fill went. Formulas are given where they save work over the op's
decomposition (one node instead of a chain, no copies the forward did not
need); the other composites are differentiated through their decomposition.
In-place variants (``masked_fill_``, ``scatter_``, ``index_add_``, ...) are
recorded as their functional op (see ``_record``), so they need no entry.
"""

from __future__ import annotations

import ember

from .._table import derivative, nondifferentiable, through_decomposition
from ._helpers import conj, metadata_only, scale, scatter_into_zeros, wrap_dim

nondifferentiable("nonzero", "argwhere", "tril_indices", "triu_indices")

# Aliases and compositions of cat and the view prims; views of several inputs ("other" kind).
through_decomposition(
    "concat",
    "concatenate",
    "hstack",
    "vstack",
    "dstack",
    "column_stack",
    "tensor_split",
    "unflatten",
    "ravel",
    "view_as",
    "expand_as",
    "broadcast_to",
    "broadcast_tensors",
    "movedim",
    "moveaxis",
    "swapaxes",
    "swapdims",
    "meshgrid",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
)
# Compositions of views, expand, index and gather whose recorded backward costs what a formula would.
through_decomposition(
    "repeat",
    "tile",
    "repeat_interleave",
    "fliplr",
    "flipud",
    "index_reduce",
    "take",
    "take_along_dim",
    "put",
    "diag",
    "diagflat",
    "trace",
    "cartesian_prod",
    "combinations",
)


# -- cat / stack / block_diag ---------------------------------------------------------------------------


def _cat_backward(grad, tensors_meta, dim):
    # 1-D empty tensors take no part in cat (PyTorch's legacy rule): their gradient is empty too
    kept = [t for t in tensors_meta if tuple(t.shape) != (0,)]
    if not kept:
        return [grad.new_zeros((0,)) for _ in tensors_meta]
    d = wrap_dim(dim, kept[0].dim())
    grads = []
    start = 0
    for t in tensors_meta:
        if tuple(t.shape) == (0,):
            grads.append(grad.new_zeros((0,)))
            continue
        n = t.shape[d]
        grads.append(grad.narrow(d, start, n))
        start += n
    return grads


derivative("cat", tensors=metadata_only(_cat_backward))
# grad has the stacked dim, so stack's dim (wrapped against the inputs' dim() + 1) names it in grad too.
derivative("stack", tensors=lambda grad, dim: grad.unbind(dim))


def _block_diag_backward(grad, tensors_meta):
    grads = []
    row = col = 0
    for t in tensors_meta:
        shape = tuple(t.shape)
        h, w = (1, 1) if not shape else (1, shape[0]) if len(shape) == 1 else shape
        grads.append(grad[row : row + h, col : col + w].reshape(shape))
        row += h
        col += w
    return grads


derivative("block_diag", tensors=metadata_only(_block_diag_backward))


# -- flip / roll / rot90 -----------------------------------------------------------------------------


def _negated(shifts):
    return -shifts if isinstance(shifts, int) else [-s for s in shifts]


derivative("flip", input=lambda grad, dims: grad.flip(dims))
derivative("roll", input=lambda grad, shifts, dims: ember.roll(grad, _negated(shifts), dims))
derivative("rot90", input=lambda grad, k, dims: ember.rot90(grad, -k, dims))
derivative("tril", input=lambda grad, diagonal: grad.tril(diagonal))
derivative("triu", input=lambda grad, diagonal: grad.triu(diagonal))
# diag_embed writes its input's last dim on a diagonal: the gradient reads that diagonal back.
derivative("diag_embed", input=lambda grad, offset, dim1, dim2: grad.diagonal(offset, dim1, dim2))


# -- index_select / masks -------------------------------------------------------------------------------


def _index_select_backward(grad, input_meta, dim, index):
    if not input_meta.dim():  # index_select of a 0-dim tensor is a copy of it
        return grad
    return grad.new_zeros(tuple(input_meta.shape)).index_add(dim, index.reshape(-1), grad)


derivative("index_select", input=metadata_only(_index_select_backward), nondiff=("index",))


def _masked_select_backward(grad, input_meta, mask):
    # the gradient of the broadcast input; the engine sums it back to input's shape
    shape = ember.broadcast_shapes(tuple(input_meta.shape), tuple(mask.shape))
    return grad.new_zeros(shape).masked_scatter(mask, grad)


derivative("masked_select", input=metadata_only(_masked_select_backward), nondiff=("mask",))
derivative(
    "masked_fill",
    input=lambda grad, mask: grad.masked_fill(mask, 0),
    value=lambda grad, mask: grad.masked_fill(ember.logical_not(mask), 0).sum(),
    nondiff=("mask",),
)


def _masked_scatter_source_backward(grad, mask, source_meta):
    # source's leading elements went to the True positions, in order; the rest were not used
    picked = grad.masked_select(mask)
    missing = source_meta.numel() - picked.numel()
    if missing > 0:
        picked = ember.cat([picked, picked.new_zeros((missing,))])
    return picked.reshape(tuple(source_meta.shape))


derivative(
    "masked_scatter",
    input=lambda grad, mask: grad.masked_fill(mask, 0),
    source=metadata_only(_masked_scatter_source_backward),
    nondiff=("mask",),
)


# -- gather / scatter --------------------------------------------------------------------------------


derivative(
    "gather",
    input=metadata_only(
        lambda grad, input_meta, dim, index: grad.new_zeros(tuple(input_meta.shape)).scatter_add(dim, index, grad)
    ),
    nondiff=("index",),
)


def _gathered(grad, dim, index, src_meta):
    """The gradient of scatter's ``src``: ``grad`` read at ``index``, zero where src is larger than index."""
    g = grad.gather(dim, index)
    if tuple(g.shape) != tuple(src_meta.shape):  # only the leading block of src shaped like index was used
        block = tuple(slice(0, n) for n in g.shape)
        g = scatter_into_zeros(g, src_meta.shape, lambda z: z[block])
    return g


def _scatter_input_backward(grad, dim, index, reduce):
    if reduce == "add":  # scatter_add
        return grad
    _check_scatter_reduce(reduce)
    return grad.scatter(dim, index, 0)  # the written positions no longer depend on input


def _scatter_src_backward(grad, dim, index, src_meta, reduce):
    _check_scatter_reduce(reduce)
    return _gathered(grad, dim, index, src_meta)


def _check_scatter_reduce(reduce):
    # multiply would need input, src and the result saved for every scatter; scatter_reduce("prod") has them
    if reduce == "multiply":
        raise RuntimeError(
            "the derivative of scatter with reduce='multiply' is not implemented; use scatter_reduce(..., 'prod')"
        )


derivative("scatter", input=_scatter_input_backward, src=metadata_only(_scatter_src_backward), nondiff=("index",))
derivative("scatter_add", input=lambda grad: grad, src=metadata_only(_gathered), nondiff=("index",))


def _scatter_reduce_backward(grad, input, dim, index, src, reduce, include_self, result, output_mask):
    """Gradients of ``scatter_reduce`` for ``input`` and ``src`` (PyTorch's conventions).

    * sum: ``grad`` for input, ``grad`` gathered for src;
    * mean: both divided by the number of values averaged at the position;
    * prod: the product of the other values at the position, computed without
      dividing by zero (a single zero among the values gets the product of the
      others; with several zeros every gradient is zero);
    * amax/amin: the gradient goes to the values equal to the result, split
      evenly among ties.

    With ``include_self=False`` the positions that received values don't
    depend on input, so their input gradient is zero.
    """
    if reduce == "sum":
        grad_input = grad
        grad_src = grad.gather(dim, index)
    elif reduce == "mean":
        count = ember.ones_like(grad) if include_self else ember.zeros_like(grad)
        count = count.scatter_add(dim, index, ember.ones_like(src))
        count = count.masked_fill(count == 0, 1)
        grad_input = grad / count
        grad_src = grad_input.gather(dim, index)
    elif reduce == "prod":
        # input's gradient: the product of the others, as the product with input's zeros replaced by 1
        input_zero = input == 0
        masked_input = input.masked_fill(input_zero, 1)
        others = masked_input.scatter_reduce(dim, index, src, "prod", include_self=include_self) / masked_input
        grad_input = grad * conj(others)
        src_zero = src == 0
        zeros_there = ember.zeros_like(grad).scatter_add(dim, index, src_zero.to(grad.dtype)).gather(dim, index)
        single_zero = ember.logical_and(src_zero, zeros_there == 1)
        # a src value that is the only zero of its position: the product of the others, recomputed without it
        without = input.scatter_reduce(dim, index, src.masked_fill(single_zero, 1), "prod", include_self=include_self)
        by_product = (grad * conj(without)).gather(dim, index)
        by_division = (grad * conj(result)).gather(dim, index) / conj(src.masked_fill(src_zero, 1))
        grad_src = ember.where(single_zero, by_product, by_division)
    elif reduce in ("amax", "amin"):
        value = result.gather(dim, index)
        input_hits = input == result
        src_hits = src == value
        ties = input_hits.to(grad.dtype).scatter_add(dim, index, src_hits.to(grad.dtype))
        share = grad / ties
        grad_input = share * input_hits.to(grad.dtype)
        grad_src = share.gather(dim, index) * src_hits.to(grad.dtype)
    else:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if not include_self:
        grad_input = grad_input.scatter(dim, index, 0)
    return grad_input, grad_src


derivative("scatter_reduce", joint={("input", "src"): _scatter_reduce_backward}, nondiff=("index",))


# -- index_add / index_copy / index_fill ---------------------------------------------------------------


derivative(
    "index_add",
    input=lambda grad: grad,
    source=lambda grad, dim, index, alpha: scale(grad.index_select(dim, index.reshape(-1)), alpha),
    nondiff=("index",),
)
derivative(
    "index_copy",
    input=lambda grad, dim, index: grad.index_fill(dim, index, 0),
    # reshaped: a 0-dim input's source may be 0-dim or hold one element in one dim
    source=metadata_only(
        lambda grad, dim, index, source_meta: grad.index_select(dim, index.reshape(-1)).reshape(
            tuple(source_meta.shape)
        )
    ),
    nondiff=("index",),
)


def _index_fill_value_backward(grad, dim, index):
    # every filled position counts once, however often (and however signed) the index names it
    if grad.device.type != "cpu":
        # no unique() (its output size depends on the data): a 0/1 mask of the filled positions instead
        return (grad * ember.zeros_like(grad).index_fill(dim, index, 1)).sum()
    size = grad.shape[wrap_dim(dim, grad.dim())] if grad.dim() else 1
    positions = ember.unique(ember.remainder(index.reshape(-1), size))
    return grad.index_select(dim, positions).sum()


derivative(
    "index_fill",
    input=lambda grad, dim, index: grad.index_fill(dim, index, 0),
    value=_index_fill_value_backward,
    nondiff=("index",),
)
