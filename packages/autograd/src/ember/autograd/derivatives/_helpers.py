"""Small helpers shared by the formulas (written in ember ops, so they are differentiable too)."""

from __future__ import annotations

import ember
from ember._tensor import Tensor

__all__ = ["conj", "zeros_like_grad", "unsqueeze_to", "expand_reduced"]


def conj(t):
    """``t.conj()`` for complex tensors; ``t`` itself for real ones (no op recorded)."""
    if type(t) is Tensor:  # the common case, without the dtype property: this runs in most formulas
        return ember.conj_physical(t) if t._data.dtype.kind == "c" else t
    if isinstance(t, ember.Tensor) and t.is_complex():
        return ember.conj_physical(t)
    if isinstance(t, complex):
        return t.conjugate()
    return t


def zeros_like_grad(t):
    """Zeros shaped like ``t`` (the gradient of a piecewise-constant op)."""
    return ember.zeros_like(t)


def unsqueeze_to(g, dims, ndim):
    """Re-insert reduced dimensions ``dims`` (wrapped, any order) into ``g`` of a ``keepdim=False`` reduction."""
    for d in sorted(dims):
        g = g.unsqueeze(d)
    return g


def expand_reduced(g, input, dim, keepdim):
    """The gradient of a reduction over ``dim`` broadcast back to ``input``'s shape."""
    ndim = input.dim()
    if dim is None:
        dims = list(range(ndim))
    elif isinstance(dim, int):
        dims = [dim % max(ndim, 1)]
    else:
        dims = [d % max(ndim, 1) for d in dim]
    if not keepdim and ndim > 0:
        g = unsqueeze_to(g, dims, ndim)
    return g.expand(input.shape)


# -- helpers of the linalg and nn_conv formulas -------------------------------------------------------


def mH(t):
    """The conjugate transpose of the last two dims (a transpose view for real tensors)."""
    t = t.transpose(-2, -1)
    return ember.conj_physical(t) if t.is_complex() else t


def scale(g, s):
    """``g * conj(s)`` for a Python or 0-d scalar ``s``; ``g`` itself for ``s == 1`` (no op recorded)."""
    if isinstance(s, ember.Tensor):
        s = s.item()
    if s == 1:
        return g
    if isinstance(s, complex) and not g.is_complex():
        s = s.real
    return g * conj(s)


__all__ += ["mH", "scale"]


# -- helpers of the view, shape and indexing formulas -------------------------------------------------


def wrap_dim(dim, ndim):
    """``dim`` in ``[0, ndim)`` (a 0-dim tensor counts as 1-dim, as in the ops' own checks)."""
    return dim % max(ndim, 1)


def scatter_into_zeros(grad, shape, region):
    """Zeros of ``shape`` with ``grad`` written into ``region(zeros)``, a non-overlapping view of them.

    The backward of a view that picks a region (``select``, ``slice``, ``diagonal``): the
    region is taken from a fresh contiguous buffer, so the input's strides don't matter.
    The write is an in-place copy into a view, so it is recorded (through ``CopySlices``)
    when the backward itself is differentiated.
    """
    zeros = grad.new_zeros(tuple(shape))
    region(zeros).copy_(grad)
    return zeros


def storage_may_overlap(shape, strides):
    """Whether a strided layout may show one storage element at two positions (a conservative test).

    Sorted by stride, each dim must step past everything the smaller dims reach; a
    layout that passes cannot overlap (stride-0 dims of size > 1 always fail).
    """
    span = 0
    for stride, size in sorted((st, n) for n, st in zip(shape, strides) if n > 1):
        if stride <= span:
            return True
        span += (size - 1) * stride
    return False


def _storage_extent(shape, strides, offset):
    """The number of storage elements a non-empty strided layout reaches from storage position 0."""
    return offset + 1 + sum((n - 1) * st for n, st in zip(shape, strides))


def as_strided_backward(grad, in_shape, in_strides, in_offset, out_shape, out_strides, out_offset):
    """The gradient of ``input.as_strided(out_shape, out_strides, out_offset)`` for the input's geometry.

    Both layouts address one storage: the gradient of each storage element is the sum of
    the output gradients at the positions that show it (scatter-added into a zero
    buffer as long as the storage range they span), and each input position reads its
    element's gradient from that buffer, split evenly when the input itself shows an
    element several times (an expanded input). Offsets are absolute storage offsets, so
    a base with a nonzero offset works, as do overlapping output windows.
    """
    device = grad.device
    if 0 in tuple(out_shape) or 0 in tuple(in_shape):
        return grad.new_zeros(tuple(in_shape))
    # output dims that repeat one element (stride 0): sum their gradient first
    repeated = [k for k, (n, st) in enumerate(zip(out_shape, out_strides)) if st == 0 and n > 1]
    if repeated:
        grad = ember.sum(grad, repeated, keepdim=True)
        out_shape = tuple(1 if k in repeated else n for k, n in enumerate(out_shape))
    shared = min(in_offset, out_offset)
    in_offset -= shared
    out_offset -= shared
    size = max(_storage_extent(in_shape, in_strides, in_offset), _storage_extent(out_shape, out_strides, out_offset))
    out_overlaps = storage_may_overlap(out_shape, out_strides)
    in_overlaps = storage_may_overlap(in_shape, in_strides)
    storage = grad.new_zeros((size,))
    if out_overlaps or in_overlaps:
        positions = ember.arange(size, device=device)
    if out_overlaps:
        where = positions.as_strided(out_shape, out_strides, out_offset).reshape(-1)
        storage = storage.index_add(0, where, grad.reshape(-1))
    else:
        storage.as_strided(out_shape, out_strides, out_offset).copy_(grad)
    if in_overlaps:
        where = positions.as_strided(in_shape, in_strides, in_offset).reshape(-1)
        count = ember.zeros((size,), dtype=storage.dtype, device=device)
        count = count.index_add(0, where, ember.ones((1,), dtype=storage.dtype, device=device).expand(where.shape))
        storage = storage / count.masked_fill(count == 0, 1)  # elements the input doesn't show: 0, not 0/0
    return storage.as_strided(in_shape, in_strides, in_offset)


__all__ += ["wrap_dim", "scatter_into_zeros", "storage_may_overlap", "as_strided_backward"]


def metadata_only(fn):
    """Formula ``fn`` whose ``<arg>_meta`` parameters read only the metadata of tensor argument ``<arg>``.

    Where the table saves metadata for such parameters (``_table.META_SUFFIX``) ``fn`` is returned as
    it is; otherwise it is given the tensors themselves under their argument names (formulas read
    only ``shape``, ``stride()``, ``storage_offset()``, ``dim()``, ``numel()``, ``dtype`` of them).
    """
    import inspect

    from .. import _table

    suffix = getattr(_table, "META_SUFFIX", None)
    if suffix == "_meta":
        return fn
    sig = inspect.signature(fn)
    params = [
        p.replace(name=p.name[: -len("_meta")]) if p.name.endswith("_meta") else p for p in sig.parameters.values()
    ]

    def reads_tensors(*args):
        return fn(*args)

    reads_tensors.__signature__ = sig.replace(parameters=params)
    reads_tensors.__name__ = getattr(fn, "__name__", "formula")
    return reads_tensors


__all__ += ["metadata_only"]


def may_contribute(cotangent):
    """Whether the terms of a backward formula that ``cotangent`` multiplies must be computed.

    Skipping them for an all-zero cotangent (an output the loss does not use) is a shortcut on its values,
    so it is taken only for a plain tensor with no history. A cotangent that requires grad is itself
    differentiated later (the double-vjp identity behind ``jacfwd(jacrev(f))`` passes zero dummies and
    differentiates with respect to them), and a vmap batch or a dual tensor can't be read: for those the
    terms are kept.
    """
    if cotangent.requires_grad or type(cotangent) is not Tensor:
        return True
    return bool((cotangent != 0).any())


__all__ += ["may_contribute"]
