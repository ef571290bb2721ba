"""Sparse tensors (PyTorch's ``torch.sparse``): COO and CSR layouts, products with dense matrices.

A sparse tensor is an :class:`ember.Tensor` (``isinstance`` holds) whose ``layout`` is
``ember.sparse_coo`` or ``ember.sparse_csr``; it stores only its specified elements. Create one
with :func:`ember.sparse_coo_tensor`, :func:`ember.sparse_csr_tensor` or
:meth:`ember.Tensor.to_sparse`. Products with dense matrices (``ember.sparse.mm``, ``ember.mm``,
``ember.matmul``, ``@``) run through scipy.sparse on the CPU and cupyx.scipy.sparse on CUDA, and
are differentiable wrt the dense operand and the sparse operand's values, which is what graph
neural networks need. Ops without a sparse implementation raise ``NotImplementedError`` naming
the op; call ``.to_dense()`` first. See docs/internals.rst, "Sparse tensors".

Example:
    >>> import ember
    >>> adj = ember.sparse_coo_tensor([[0, 1, 1], [1, 0, 2]], [1.0, 1.0, 1.0], (2, 3))
    >>> ember.sparse.mm(adj, ember.ones(3, 2))
    tensor([[1., 1.],
            [2., 2.]])
"""

from __future__ import annotations

from .._tensor import Tensor
from . import _functions
from . import _graph  # noqa: F401 - registers _sparse_mm, the sparse product of captured graphs
from ._tensor import SparseTensor, sparse_coo_tensor, sparse_csr_tensor  # noqa: F401 - ember re-exports them

__all__ = ["SparseTensor", "mm", "spmm", "addmm", "sum", "softmax", "log_softmax"]


def _foreign(*args):
    """Whether an argument is a tensor-like that is no ember tensor (an FX Proxy while tracing)."""
    return any(not isinstance(a, Tensor) and hasattr(type(a), "__ember_function__") for a in args)


def _check_sparse(name, x, argument):
    if not isinstance(x, SparseTensor):
        raise RuntimeError(f"ember.sparse.{name}: {argument} must be a sparse tensor, got "
                           f"{'a strided tensor' if hasattr(x, 'shape') else type(x).__name__}")


def mm(mat1, mat2, reduce=None):
    """Matrix product with a sparse operand: ``sparse @ dense`` or ``dense @ sparse`` (a dense result), or
    ``sparse @ sparse`` (a sparse result).

    Gradients: wrt a dense operand, the full gradient; wrt the sparse operand, a sparse gradient with
    its pattern (as ``torch.sparse.mm``): a sparse leaf's ``.grad`` holds, at each specified position,
    the derivative of the output with respect to that element.

    Args:
        mat1 (Tensor): ``(n, m)``, sparse COO/CSR or dense.
        mat2 (Tensor): ``(m, p)``, dense or sparse, of ``mat1``'s dtype and device.
        reduce (str, optional): only ``None`` or ``"sum"`` (the plain product) are supported.

    Returns:
        Tensor: ``(n, p)``, dense unless both operands are sparse (two dense operands: ``ember.mm``).

    Raises:
        RuntimeError: for mismatched shapes, dtypes or devices, hybrid sparse operands.

    Example:
        >>> import ember
        >>> s = ember.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
        >>> ember.sparse.mm(s, ember.tensor([[1.0], [10.0]]))
        tensor([[20.],
                [ 1.]])
    """
    if reduce not in (None, "sum"):
        raise NotImplementedError(f"ember.sparse.mm: reduce={reduce!r} is not supported (only 'sum')")
    if _foreign(mat1, mat2) or not (isinstance(mat1, SparseTensor) or isinstance(mat2, SparseTensor)):
        from .. import mm as op  # the registry op: FX records it; two strided operands are a plain product

        return op(mat1, mat2)
    return _functions.matmul(mat1, mat2, "mm")


def spmm(input, mat2):
    """``input @ mat2`` for a sparse ``input`` and dense ``mat2`` (PyTorch's ``torch.spmm``); see :func:`mm`."""
    return mm(input, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``beta * mat + alpha * (mat1 @ mat2)`` for a sparse ``mat1`` and dense ``mat`` and ``mat2``.

    Args:
        mat (Tensor): dense, broadcastable to ``(n, p)``.
        mat1 (Tensor): sparse ``(n, m)``.
        mat2 (Tensor): dense ``(m, p)``.
        beta, alpha (number): scales; with ``beta=0`` ``mat``'s values are ignored.

    Returns:
        Tensor: dense ``(n, p)``.
    """
    if _foreign(mat, mat1, mat2) or not isinstance(mat1, SparseTensor):
        from .. import addmm as op  # the registry op: FX records it; strided operands are a plain addmm

        return op(mat, mat1, mat2, beta=beta, alpha=alpha)
    return _functions.addmm(mat, mat1, mat2, beta=beta, alpha=alpha)


def sum(input, dim=None, dtype=None):  # noqa: A001 - PyTorch's name (torch.sparse.sum)
    """Sum of a sparse tensor over all dimensions or over ``dim``.

    Args:
        input (SparseTensor): the tensor.
        dim (int or tuple of int, optional): dimensions to sum over (default: all).
        dtype (ember.dtype, optional): the values are converted to it first.

    Returns:
        Tensor: a 0-dim dense tensor for a full sum; a dense tensor when every sparse dimension is
        summed; otherwise a coalesced sparse tensor of the remaining dimensions.

    Example:
        >>> import ember
        >>> s = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
        >>> ember.sparse.sum(s)
        tensor(12.)
        >>> ember.sparse.sum(s, 1).to_dense()
        tensor([3., 9.])
    """
    _check_sparse("sum", input, "input")
    return _functions.sparse_sum(input, dim, False, dtype)


def softmax(input, dim, *, dtype=None):
    """Softmax over ``dim`` of the specified elements only (unspecified ones count as ``-inf``).

    Args:
        input (SparseTensor): the tensor.
        dim (int): the dimension along which the values of each slice sum to 1.
        dtype (ember.dtype, optional): the values are converted to it first.

    Returns:
        SparseTensor: the coalesced pattern of ``input`` with the probabilities as values.

    Example:
        >>> import ember
        >>> s = ember.sparse_coo_tensor([[0, 0, 1], [0, 2, 1]], [0.0, 0.0, 5.0], (2, 3))
        >>> ember.sparse.softmax(s, 1).to_dense()
        tensor([[0.5000, 0.0000, 0.5000],
                [0.0000, 1.0000, 0.0000]])
    """
    _check_sparse("softmax", input, "input")
    return _functions.softmax(input, dim, dtype, log=False)


def log_softmax(input, dim, *, dtype=None):
    """Log-softmax over ``dim`` of the specified elements only; see :func:`softmax`."""
    _check_sparse("log_softmax", input, "input")
    return _functions.softmax(input, dim, dtype, log=True)


def _install():
    """Give dense tensors the sparse methods (``to_sparse``, ``to_dense``, ...) and teach ember.save sparse
    tensors; ``ember/__init__`` calls it once."""
    from . import _methods, _serialization

    _methods.install()
    _serialization.register()

