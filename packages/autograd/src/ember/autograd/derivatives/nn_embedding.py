"""Derivatives of ``embedding``, ``embedding_bag`` and ``one_hot``.

See :mod:`ember.autograd.derivatives._nn_common` for the two treatments (formula or decomposition) the
``nn.functional`` ops get.
"""

from __future__ import annotations

import ember

from .._table import derivative, nondifferentiable
from ._nn_common import _cuda_rows


def _embedding_weight(grad, input, weight_meta, padding_idx, scale_grad_by_freq):
    num = weight_meta.shape[0]
    if not scale_grad_by_freq and _cuda_rows(grad) is not None:
        # one kernel on the GPU, no host read of the indices' range (ember.cuda.kernels.embedding)
        from ember.cuda.kernels.embedding import weight_grad_tensor

        result = weight_grad_tensor(grad, input, num, padding_idx)
        if result is not None:
            return result
    index = input.reshape(-1)
    rows = grad.reshape(-1, grad.shape[-1])
    if padding_idx is not None:
        pad = padding_idx + num if padding_idx < 0 else padding_idx
        rows = rows * ember.unsqueeze(index != pad, 1)  # the padding row gets no gradient
    if scale_grad_by_freq:
        # each row's gradient is divided by how often its index occurs in the batch
        counts = ember.bincount(index.to(ember.int64), minlength=num)
        rows = rows / ember.unsqueeze(ember.index_select(counts, 0, index), 1).to(rows.dtype)
    zeros = ember.zeros((num, grad.shape[-1]), dtype=grad.dtype, device=grad.device)
    return ember.index_add(zeros, 0, index, rows)


# sparse=True would ask for a sparse gradient; ember has no sparse tensors, so it is dense.
derivative("embedding", weight=_embedding_weight, nondiff=("input",))


def _bag_layout(input, offsets, include_last_offset, padding_idx, num):
    """``(flat indices, bag of each index, kept-index mask or None, number of bags)`` of an embedding_bag call."""
    flat = input.reshape(-1)
    device = input.device
    if input.ndim == 2:
        bags, length = input.shape
        bag_of = ember.arange(bags * length, device=device) // max(length, 1)
    else:
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        positions = ember.arange(flat.shape[0], device=device)
        bag_of = ember.searchsorted(offsets.to(ember.int64), positions, right=True) - 1
    keep = None
    if padding_idx is not None:
        keep = flat != (padding_idx + num if padding_idx < 0 else padding_idx)
    if include_last_offset and input.ndim == 1:
        in_range = bag_of < bags  # indices past the last offset belong to no bag
        keep = in_range if keep is None else ember.logical_and(keep, in_range)
        bag_of = ember.clamp(bag_of, max=max(bags - 1, 0))
    return flat, bag_of, keep, bags


def _embedding_bag_backward(
    grad,
    input,
    weight,
    offsets,
    scale_grad_by_freq,
    mode,
    per_sample_weights,
    include_last_offset,
    padding_idx,
    result,
    output_mask,
):
    num, dim = weight.shape
    flat, bag_of, keep, bags = _bag_layout(input, offsets, include_last_offset, padding_idx, num)
    d_weight = d_psw = None
    if mode == "max":
        if output_mask[0]:
            d_weight = _embedding_bag_max_weight(grad, weight, result, flat, bag_of, keep, bags)
        return d_weight, None
    g_rows = ember.index_select(grad, 0, bag_of)  # each index's bag gradient, (indices, dim)
    if output_mask[1]:
        d_psw = ember.sum(g_rows * ember.index_select(weight, 0, flat), 1)
        if keep is not None:
            d_psw = d_psw * keep
        d_psw = d_psw.reshape(tuple(per_sample_weights.shape))
    if output_mask[0]:
        scale = None
        if mode == "mean":
            ones = ember.ones(flat.shape[0], dtype=grad.dtype, device=grad.device)
            if keep is not None:
                ones = ones * keep
            counts = ember.index_add(ember.zeros(bags, dtype=grad.dtype, device=grad.device), 0, bag_of, ones)
            scale = 1.0 / ember.index_select(ember.clamp(counts, min=1), 0, bag_of)
        elif per_sample_weights is not None:
            scale = per_sample_weights.reshape(-1).to(grad.dtype)
        if keep is not None:
            scale = keep.to(grad.dtype) if scale is None else scale * keep
        if scale_grad_by_freq:
            freq = ember.bincount(flat.to(ember.int64), minlength=num)
            inv = 1.0 / ember.index_select(freq, 0, flat).to(grad.dtype)
            scale = inv if scale is None else scale * inv
        if scale is not None:
            g_rows = g_rows * ember.unsqueeze(scale, 1)
        zeros = ember.zeros((num, dim), dtype=grad.dtype, device=grad.device)
        d_weight = ember.index_add(zeros, 0, flat, g_rows)
    return d_weight, d_psw


def _embedding_bag_max_weight(grad, weight, result, flat, bag_of, keep, bags):
    """The gradient of each bag's maximum goes to the first index of the bag that holds it (per column)."""
    num, dim = weight.shape
    count = flat.shape[0]
    rows = ember.index_select(weight, 0, flat)
    hit = rows == ember.index_select(result, 0, bag_of)
    if keep is not None:
        hit = ember.logical_and(hit, ember.unsqueeze(keep, 1))
    position = ember.arange(count, device=grad.device).reshape(-1, 1).expand(count, dim)
    candidate = ember.where(hit, position, ember.full_like(position, count))
    first = ember.full((bags, dim), count, dtype=ember.int64, device=grad.device)
    first = ember.scatter_reduce(first, 0, ember.unsqueeze(bag_of, 1).expand(count, dim), candidate, "amin")
    found = first < count  # empty bags (and bags of padding only) have no maximum
    row = ember.index_select(flat, 0, ember.clamp(first, max=max(count - 1, 0)).reshape(-1)).reshape(bags, dim)
    column = ember.arange(dim, device=grad.device).reshape(1, -1)
    target = (row * dim + column).reshape(-1)
    g = (grad * found).reshape(-1)
    zeros = ember.zeros(num * dim, dtype=grad.dtype, device=grad.device)
    return ember.index_add(zeros, 0, target, g).reshape(num, dim)


derivative(
    "embedding_bag",
    joint={("weight", "per_sample_weights"): _embedding_bag_backward},
    nondiff=("input", "offsets"),
)
nondifferentiable("one_hot")
