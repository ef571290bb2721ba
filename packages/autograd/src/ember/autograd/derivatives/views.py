"""Derivatives of the view ops (``ember._ops.views``).

The gradient of a view is the gradient of the elements it shows, put back
where they sit in the input. For permutations and size-1 dims that is the
inverse view of ``grad``; for views that pick a region (``select``,
``slice``, ``diagonal``) it is zeros of the input's shape with ``grad``
written into the same region of them; for views whose elements may repeat
(``expand``, ``unfold`` with overlapping windows, ``as_strided``) the
gradients of repeated elements add up. The region is always taken from a
fresh contiguous buffer, never from the input, so non-contiguous inputs need
no special case.
"""

from __future__ import annotations

import numpy as np

import ember
from ember._ops import registry
from ember._ops._dispatch import ops_intercepted
from ember._ops._dispatch import state as _dispatch_state

from .._table import derivative, nondifferentiable, through_decomposition
from ._helpers import as_strided_backward, metadata_only, scatter_into_zeros, wrap_dim

_slice = registry["slice"]

nondifferentiable("detach")

# Composite views whose decomposition is a chain of the view prims below: their
# recorded backward is exactly what a hand-written formula would do.
through_decomposition("reshape", "t", "narrow", "flatten", "real", "imag")


def _view_backward(grad, input_meta, shape):
    if len(shape) == 1 and isinstance(shape[0], ember.dtype):
        # PyTorch's view(dtype) has no gradient (its output never requires grad).
        return None
    target = tuple(input_meta.shape)
    if not _dispatch_state.grad_enabled and not ops_intercepted() and type(grad) is ember.Tensor:
        # grad.reshape(target) of a row-major gradient, when nothing records it: the array's own reshape is the
        # same view, without three dispatcher layers (Flatten's backward in every classifier step)
        data = grad._data
        if (type(data) is np.ndarray or grad._device.type == "cuda") and data.flags.c_contiguous:
            return ember.Tensor._make_view(data.reshape(target), grad)
    return grad.reshape(target)


derivative("view", input=metadata_only(_view_backward))


def _as_strided_backward(grad, input_meta, size, stride, storage_offset):
    base_offset = input_meta.storage_offset()
    offset = base_offset if storage_offset is None else int(storage_offset)
    size = (size,) if isinstance(size, int) else tuple(size)
    stride = (stride,) if isinstance(stride, int) else tuple(stride)
    return as_strided_backward(grad, tuple(input_meta.shape), input_meta.stride(), base_offset, size, stride, offset)


derivative("as_strided", input=metadata_only(_as_strided_backward))
derivative("transpose", input=lambda grad, dim0, dim1: grad.transpose(dim0, dim1))


def _permute_backward(grad, dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    ndim = grad.dim()
    inverse = [0] * ndim
    for i, d in enumerate(dims):
        inverse[wrap_dim(d, ndim)] = i
    return grad.permute(inverse)


derivative("permute", input=_permute_backward)
# grad has the inserted dim, so unsqueeze's dim (wrapped against input.dim() + 1) names it in grad too.
derivative("unsqueeze", input=lambda grad, dim: grad.squeeze(dim))
# Only size-1 dims were removed, so the reshape is always a view of grad.
derivative("squeeze", input=metadata_only(lambda grad, input_meta: grad.reshape(input_meta.shape)))
# The engine sums a gradient over the dims that broadcasting expanded (see _engine), which is expand's backward.
derivative("expand", input=lambda grad: grad)
derivative(
    "select",
    input=metadata_only(
        lambda grad, input_meta, dim, index: scatter_into_zeros(grad, input_meta.shape, lambda z: z.select(dim, index))
    ),
)
derivative(
    "slice",
    input=metadata_only(
        lambda grad, input_meta, dim, start, end, step: scatter_into_zeros(
            grad, input_meta.shape, lambda z: _slice(z, dim, start, end, step)
        )
    ),
)
derivative(
    "diagonal",
    input=metadata_only(
        lambda grad, input_meta, offset, dim1, dim2: scatter_into_zeros(
            grad, input_meta.shape, lambda z: z.diagonal(offset, dim1, dim2)
        )
    ),
)


def _unfold_backward(grad, input_meta, dimension, size, step):
    shape = tuple(input_meta.shape)
    if not shape:  # a 0-dim input shows its element at most once
        return grad.sum().reshape(())
    if step >= size:  # windows don't overlap: write grad back through the same view
        return scatter_into_zeros(grad, shape, lambda z: z.unfold(dimension, size, step))
    d = wrap_dim(dimension, len(shape))
    count = grad.shape[d]
    # element j of window i is input element i * step + j along d; windows overlap, so their gradients add up
    positions = (
        ember.arange(count, device=grad.device).unsqueeze(1) * step + ember.arange(size, device=grad.device)
    ).reshape(-1)
    g = grad.movedim(-1, d + 1)
    g = g.reshape(shape[:d] + (count * size,) + shape[d + 1 :])
    return grad.new_zeros(shape).index_add(d, positions, g)


derivative("unfold", input=metadata_only(_unfold_backward))
derivative("view_as_real", input=lambda grad: ember.view_as_complex(grad.contiguous()))
derivative("view_as_complex", input=lambda grad: ember.view_as_real(grad))

# Multi-output views: one node for all pieces, whose backward joins the pieces' gradients
# (missing ones are zeros) instead of one zero-filled input-sized buffer per piece.
derivative("split", tensor=lambda grads, dim: ember.cat(grads, dim))
derivative("chunk", input=lambda grads, dim: ember.cat(grads, dim))
derivative("unbind", input=lambda grads, dim: ember.stack(grads, dim))
