"""The sparse-related methods of dense tensors (``to_sparse``, ``to_dense``, ``indices``, ...).

:class:`~ember.sparse._tensor.SparseTensor` defines its own versions; :func:`install` gives
:class:`ember.Tensor` the dense ones, as PyTorch has them on every tensor: conversions to a sparse
layout, ``to_dense`` returning the tensor itself, and PyTorch's errors for the parts a dense
tensor has not.
"""

from __future__ import annotations

from .._layout import sparse_coo, sparse_csr, strided
from .._tensor import Tensor
from ._tensor import SparseTensor, dense_to_sparse

__all__ = ["install"]


def to_sparse(self, *args, layout=None, sparse_dim=None, blocksize=None, dense_dim=None):
    """This tensor as a sparse tensor: COO (``to_sparse(sparse_dim)``) or ``layout=ember.sparse_csr``.

    Args:
        sparse_dim (int, optional): how many leading dimensions are sparse (default: all).
        layout (ember.layout, optional): ``ember.sparse_coo`` (default) or ``ember.sparse_csr``.

    Returns:
        SparseTensor: the nonzero elements, coalesced; differentiable wrt this tensor.

    Example:
        >>> import ember
        >>> ember.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse().indices()
        tensor([[0, 1],
                [1, 0]])
    """
    if len(args) > 1:
        raise TypeError(f"to_sparse() takes at most 1 positional argument ({len(args)} given)")
    if args:
        sparse_dim = args[0]
    if layout is None or layout is sparse_coo:
        return dense_to_sparse(self, sparse_dim)
    if layout is sparse_csr:
        return to_sparse_csr(self)
    raise RuntimeError(f"to_sparse: unsupported layout {layout}")


def to_sparse_coo(self):
    """This tensor as a sparse COO tensor of its nonzero elements (every dimension sparse)."""
    return dense_to_sparse(self)


def to_sparse_csr(self, dense_dim=None):
    """This 2-D tensor as a sparse CSR tensor of its nonzero elements.

    Raises:
        RuntimeError: if the tensor is not 2-D.
    """
    if self.ndim != 2 or dense_dim:
        raise RuntimeError(f"to_sparse_csr: expected a 2-D tensor, got {self.ndim}-D (dense_dim={dense_dim})")
    return dense_to_sparse(self).to_sparse_csr()


def to_dense(self, dtype=None, *, masked_grad=None):
    """A strided tensor is already dense: itself (converted to ``dtype`` if given)."""
    return self if dtype is None else self.to(dtype)


def sparse_dim(self):
    """0 for a strided tensor (the number of sparse dimensions)."""
    return 0


def dense_dim(self):
    """The number of dimensions, for a strided tensor (all are dense)."""
    return self.ndim


def _layout_only(name, kind):
    """A dense tensor's ``name`` method: PyTorch's error, as the method exists only for ``kind`` tensors."""

    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected {kind} tensor layout but got {strided}")

    method.__name__ = name
    method.__doc__ = f"Only for {kind} tensors (see :class:`ember.sparse.SparseTensor`); raises on {strided}."
    return method


def _nnz(self):
    raise RuntimeError(f"_nnz expected a sparse tensor but got layout {strided}")


def install():
    """Give :class:`ember.Tensor` the sparse-related methods (dense versions; SparseTensor overrides them)."""
    for fn in (to_sparse, to_sparse_coo, to_sparse_csr, to_dense, sparse_dim, dense_dim, _nnz):
        setattr(Tensor, fn.__name__, fn)
    for name in ("coalesce", "is_coalesced", "indices", "values", "_indices", "_values"):
        setattr(Tensor, name, _layout_only(name, "sparse coordinate"))
    for name in ("crow_indices", "col_indices"):
        setattr(Tensor, name, _layout_only(name, "sparse CSR"))
    # SparseTensor defines all of these itself; check it still does (its attribute wins over Tensor's)
    for name in ("to_sparse", "to_dense", "coalesce", "indices", "values", "_indices", "_values", "_nnz"):
        if SparseTensor.__dict__.get(name) is None:
            raise RuntimeError(f"SparseTensor lacks its own {name}")
