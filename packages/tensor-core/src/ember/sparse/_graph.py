"""Sparse tensors in captured graphs: the ``_sparse_mm`` registry op and meta stand-ins of sparse inputs.

A sparse COO/CSR tensor enters a graph (``ember.compile``) as an opaque input: the graph never reads
its indices or values, it only hands the whole tensor to ``_sparse_mm``, the one sparse op a graph
holds (``S @ dense`` or ``S^T @ dense``, a dense result; PyTorch's ``aten._sparse_mm``). Tracing runs
on a *meta* sparse tensor (:func:`meta_like`): the layout, shape, dtype and device of the real one,
with meta indices and values, so ``_sparse_mm``'s meta function gives the dense result's shape. The
graph does not depend on the number of stored elements, so another tensor with another ``nnz`` runs
the same graph.

Which ops reach ``_sparse_mm``: ``ember.sparse.mm``, ``ember.mm``, ``ember.matmul``/``@`` and
``ember.addmm`` with a sparse 2-D operand (:func:`ember.sparse._functions.sparse_dense_mm`). Any other
op on a meta sparse tensor raises ``NotImplementedError`` (:func:`refuse_traced`), which the graph
capture turns into a graph break naming the op.
"""

from __future__ import annotations

from .._meta import MetaArray
from .._ops._registry import defop
from .._tensor import Tensor
from . import _kernels
from ._tensor import SparseTensor

__all__ = ["sparse_mm", "meta_like", "is_traced", "traced_product", "refuse_traced"]

#: Registry ops that take a meta sparse tensor inside a graph (the products, which end in ``_sparse_mm``).
TRACED_OPS = frozenset({"_sparse_mm", "mm", "matmul", "addmm"})


def is_traced(sparse):
    """Whether ``sparse`` is a meta stand-in (a graph input being traced) rather than a tensor with data."""
    return sparse._device.type == "meta"


def meta_like(real):
    """A meta sparse tensor standing for ``real`` while a graph is traced.

    Args:
        real (SparseTensor): a 2-D or larger sparse COO or CSR tensor that does not require grad.

    Returns:
        SparseTensor: the same layout, shape, dtype and ``nnz`` (the last only as an example: the
        graph must not depend on it), with meta indices and values.
    """
    from .. import empty

    values = empty(tuple(real._values_t.shape), dtype=real.dtype, device="meta")
    shape = tuple(real._data.shape)
    if real.is_sparse:
        indices = empty(tuple(real._indices_t.shape), dtype=real._indices_t.dtype, device="meta")
        return SparseTensor._coo(indices, values, shape, coalesced=real._coalesced)
    crow = empty(tuple(real._crow.shape), dtype=real._crow.dtype, device="meta")
    col = empty(tuple(real._col.shape), dtype=real._col.dtype, device="meta")
    return SparseTensor._csr(crow, col, values, shape)


def refuse_traced(name):
    """The error for op ``name`` on a meta sparse tensor (one a graph is being traced with)."""
    return NotImplementedError(
        f"ember.{name} on a sparse tensor is not supported inside a compiled graph: a sparse input is opaque "
        "there, and only sparse @ dense products (ember.sparse.mm, ember.mm, ember.matmul, ember.addmm) "
        "take it; call this op outside the compiled function"
    )


def _check(input, mat2, transpose):
    if not isinstance(input, SparseTensor):
        raise RuntimeError(f"_sparse_mm: input must be a sparse tensor, got a {type(input).__name__} of layout "
                           f"{getattr(input, 'layout', None)}")
    if not isinstance(mat2, Tensor) or isinstance(mat2, SparseTensor):
        raise RuntimeError("_sparse_mm: mat2 must be a strided (dense) tensor")
    shape, other = input._data.shape, mat2._data.shape
    if len(shape) != 2 or input.dense_dim() != 0 or len(other) != 2:
        raise RuntimeError(f"_sparse_mm: expected a 2-D sparse matrix and a 2-D dense one, got shapes "
                           f"{list(shape)} (dense_dim={input.dense_dim()}) and {list(other)}")
    n, m = (shape[1], shape[0]) if transpose else shape
    if m != other[0]:
        raise RuntimeError(f"_sparse_mm: mat1 and mat2 shapes cannot be multiplied ({n}x{m} and "
                           f"{other[0]}x{other[1]})")
    if input.dtype is not mat2.dtype:
        raise RuntimeError(f"_sparse_mm: expected mat1 and mat2 to have the same dtype, but got: "
                           f"{input.dtype} != {mat2.dtype}")
    return n, other[1]


def _sparse_mm_meta(input, mat2, transpose=False):
    """``input @ mat2`` (``input^T @ mat2`` with ``transpose``) for a sparse matrix ``input`` and a dense ``mat2``.

    Args:
        input (Tensor): sparse COO or CSR ``(n, m)`` (``(m, n)`` with ``transpose``), no dense dimensions.
        mat2 (Tensor): strided ``(m, p)``, of ``input``'s dtype.
        transpose (bool): multiply by the transpose of ``input``.

    Returns:
        Tensor: strided ``(n, p)``, contiguous.

    Raises:
        RuntimeError: for a strided ``input``, a sparse ``mat2``, shapes that cannot be multiplied, two dtypes.
    """
    return MetaArray(_check(input, mat2, transpose), mat2._data.dtype)


def _sparse_mm_cpu(input, mat2, transpose=False):
    from ._functions import _pattern

    return _kernels.spmm(_pattern(input), input._values_t._data, mat2._data, transpose)


sparse_mm = defop("_sparse_mm", _sparse_mm_meta, cpu=_sparse_mm_cpu)


def traced_product(sparse, dense, transpose=False):
    """``_sparse_mm`` of a meta sparse tensor, below the ``__ember_function__`` layer (which would send it
    back to the sparse implementations): the recording mode of a capture sees and records the call."""
    from .._ops._dispatch import run_below_overrides

    _check(sparse, dense, transpose)
    return run_below_overrides(sparse_mm, (sparse, dense, transpose), {})
