"""The derivative of sparse @ dense products (used by :mod:`ember.sparse` when a gradient is needed).

``S @ D`` for a sparse matrix ``S`` given by COO entries (``rows``, ``cols``, ``values``) is
recorded as one node. Its backward, for the output gradient ``G``:

* wrt ``D``: ``S^H @ G``, itself a sparse product (the same Function with rows and columns
  swapped), so double backward works;
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
    """``S @ dense`` for the COO matrix ``S`` = (rows, cols, values) with ``n_rows`` rows; a dense result."""

    @staticmethod
    def forward(ctx, rows, cols, values, dense, n_rows):
        ctx.save_for_backward(rows, cols, values, dense)
        out = spmm(rows._data, cols._data, values._data, dense._data, n_rows)
        return Tensor._make(out, dense._device)

    @staticmethod
    def backward(ctx, grad):
        rows, cols, values, dense = ctx.saved_tensors
        grad_values = grad_dense = None
        if ctx.needs_input_grad[2]:
            other = dense.index_select(0, cols)
            if other.is_complex():
                other = other.conj()
            grad_values = (grad.index_select(0, rows) * other).sum(-1)
        if ctx.needs_input_grad[3]:
            adjoint = values.conj() if values.is_complex() else values
            grad_dense = SparseDenseMM.apply(cols, rows, adjoint, grad, dense.shape[0])
        return None, None, grad_values, grad_dense, None
