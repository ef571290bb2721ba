"""The derivative of sparse @ dense products (used by :mod:`ember.sparse` when a gradient is needed).

``S @ D`` for a sparse matrix ``S`` given by its index pattern and ``values`` is recorded as one
node. Its backward, for the output gradient ``G``:

* wrt ``D``: ``S^H @ G``, itself a sparse product (the same Function, transposed, on the same
  cached pattern), so double backward works;
* wrt ``values``: the gradient of ``S`` restricted to its pattern, as ``torch.sparse.mm`` gives:
  ``grad_values[k] = sum_j G[rows[k], j] * conj(D[cols[k], j])``.

Both are written in ember ops (``index_select``, ``mul``, ``sum``), so they are differentiable.
"""

from __future__ import annotations

from ember._tensor import Tensor
from ember.sparse._kernels import spmm

from .function import Function

__all__ = ["SparseDenseMM"]


class SparseDenseMM(Function):
    """``S @ dense`` (``S^T @ dense`` with ``transpose``) for the sparse matrix ``S`` of ``pattern``
    (:class:`ember.sparse._kernels.Pattern`) with ``values``; a dense result."""

    @staticmethod
    def forward(ctx, pattern, values, dense, transpose=False):
        ctx.save_for_backward(values, dense)
        ctx.pattern, ctx.transpose = pattern, transpose
        out = spmm(pattern, values._data, dense._data, transpose)
        return Tensor._make(out, dense._device)

    @staticmethod
    def backward(ctx, grad):
        values, dense = ctx.saved_tensors
        pattern, transpose = ctx.pattern, ctx.transpose
        grad_values = grad_dense = None
        if ctx.needs_input_grad[1]:
            rows = Tensor._make(pattern.rows, dense._device)
            cols = Tensor._make(pattern.cols, dense._device)
            out_index, in_index = (cols, rows) if transpose else (rows, cols)
            other = dense.index_select(0, in_index)
            if other.is_complex():
                other = other.conj()
            grad_values = (grad.index_select(0, out_index) * other).sum(-1)
        if ctx.needs_input_grad[2]:
            adjoint = values.conj() if values.is_complex() else values
            grad_dense = SparseDenseMM.apply(pattern, adjoint, grad, not transpose)
        return None, grad_values, grad_dense, None
