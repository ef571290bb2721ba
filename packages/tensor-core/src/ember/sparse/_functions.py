"""What sparse tensors compute: products with dense matrices, sums, softmax, elementwise ops on the values.

Everything is written on a sparse tensor's parts: products call the array kernels of
:mod:`ember.sparse._kernels` (through the autograd Function of ember-autograd when a gradient is
needed); the rest is written in ember ops over the values, so autograd differentiates it as it
differentiates any dense code, and gradients reach the values.
"""

from __future__ import annotations

import numpy as np

from .._extensions import require
from .._layout import sparse_coo, sparse_csr
from .._ops._dispatch import state
from .._ops._shapes import wrap_dim
from .._tensor import Tensor
from . import _kernels
from ._tensor import SparseTensor, coalesce, to_dense

__all__ = [
    "sparse_dense_mm", "dense_sparse_mm", "sparse_sparse_mm", "matmul", "addmm", "sparse_sum", "softmax",
    "map_values", "add", "mul", "transpose", "permute",
]


def _name_of(x):
    return f"a sparse {x.layout.name} tensor" if isinstance(x, SparseTensor) else f"a {x.ndim}-D tensor"


def _check_matrix_operands(name, a, b):
    for x, which in ((a, "mat1"), (b, "mat2")):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: {which} must be a tensor, got {type(x).__name__}")
        if x._data.ndim != 2:
            raise RuntimeError(f"{name}: {which} must be a matrix, got {_name_of(x)} of shape {list(x.shape)}")
        if isinstance(x, SparseTensor) and x.dense_dim() != 0:
            raise RuntimeError(f"{name}: a hybrid sparse {which} (dense_dim={x.dense_dim()}) is not supported")
    if a._data.shape[1] != b._data.shape[0]:
        raise RuntimeError(
            f"{name}: mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]})"
        )
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{name}: expected mat1 and mat2 to have the same dtype, but got: {a.dtype} != {b.dtype}")
    if a.device != b.device:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {a.device} and "
            f"{b.device}! (when checking argument for op {name})"
        )


def _product(pattern, values, dense, transpose=False):
    """``S @ dense`` (``S^T @ dense`` with ``transpose``) for the matrix of ``pattern``; records autograd
    when needed."""
    if state.grad_enabled and (values._requires_grad or dense._requires_grad):
        try:
            from ember.autograd._sparse import SparseDenseMM
        except ImportError:
            require("gradients of sparse products", "ember-autograd")
        return SparseDenseMM.apply(pattern, values, dense, transpose)
    return Tensor._make(_kernels.spmm(pattern, values._data, dense._data, transpose), dense._device)


def _pattern(sparse):
    """The :class:`~ember.sparse._kernels.Pattern` of a 2-D sparse matrix, kept on it while its indices are
    unchanged (an in-place write to them bumps their version)."""
    parts = (sparse._crow, sparse._col) if sparse._layout is sparse_csr else (sparse._indices_t,)
    key = tuple((id(p), p._version) for p in parts)
    cached = sparse.__dict__.get("_pattern_cache")
    if cached is not None and cached[0] == key:
        return cached[1]
    shape = tuple(sparse._data.shape[:2])
    if sparse._layout is sparse_csr:
        offsets = sparse._crow._data
        rows, cols = _kernels.csr_rows(offsets), sparse._col._data
    else:
        indices = sparse._indices_t._data
        rows, cols = indices[0], indices[1]
        offsets = _kernels.csr_offsets(rows, shape[0]) if sparse._coalesced else None
    pattern = _kernels.Pattern(rows, cols, shape, offsets)
    sparse._pattern_cache = (key, pattern, parts)  # parts: keeps the ids in the key alive
    return pattern


def sparse_dense_mm(sparse, dense, name="mm"):
    """``sparse @ dense`` (2-D sparse, 2-D dense) as a dense tensor; differentiable wrt both values and ``dense``."""
    _check_matrix_operands(name, sparse, dense)
    if sparse._device.type == "meta":  # a graph input being traced: one opaque op (ember.sparse._graph)
        from ._graph import traced_product

        return traced_product(sparse, dense)
    return _product(_pattern(sparse), sparse._values_t, dense)


def dense_sparse_mm(dense, sparse, name="mm"):
    """``dense @ sparse`` as a dense tensor: ``(sparse^T @ dense^T)^T``."""
    _check_matrix_operands(name, dense, sparse)
    if sparse._device.type == "meta":
        from ._graph import traced_product

        return traced_product(sparse, dense.mT, transpose=True).mT
    return _product(_pattern(sparse), sparse._values_t, dense.mT, transpose=True).mT


def sparse_sparse_mm(a, b, name="mm"):
    """``a @ b`` for two sparse matrices, as a coalesced COO tensor (not differentiable)."""
    _check_matrix_operands(name, a, b)
    if state.grad_enabled and (a.requires_grad or b.requires_grad):
        raise NotImplementedError(f"{name}: gradients of sparse @ sparse products are not supported")
    indices, values = _kernels.spspmm(_pattern(a), a._values_t._data, _pattern(b), b._values_t._data)
    device = a._device
    shape = (a._data.shape[0], b._data.shape[1])
    return SparseTensor._coo(Tensor._make(indices, device), Tensor._make(values, device), shape, coalesced=True)


def matmul(a, b, name="matmul"):
    """``a @ b`` where one operand (or both) is sparse: 2-D sparse with 1-D or 2-D dense, or dense 2-D @ sparse."""
    a_sparse, b_sparse = isinstance(a, SparseTensor), isinstance(b, SparseTensor)
    if a_sparse and b_sparse:
        return sparse_sparse_mm(a, b, name)
    if a_sparse:
        if isinstance(b, Tensor) and b._data.ndim == 1 and name == "matmul":
            return sparse_dense_mm(a, b.unsqueeze(-1), name).squeeze(-1)
        return sparse_dense_mm(a, b, name)
    if isinstance(a, Tensor) and a._data.ndim == 1 and name == "matmul":
        return dense_sparse_mm(a.unsqueeze(0), b, name).squeeze(0)
    return dense_sparse_mm(a, b, name)


def addmm(input, mat1, mat2, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` with a sparse ``mat1`` or ``mat2``; a dense result."""
    if isinstance(input, SparseTensor):
        raise NotImplementedError("addmm: a sparse input (the added matrix) is not supported; pass a dense one")
    product = matmul(mat1, mat2, "addmm")
    if alpha != 1:
        product = product * alpha
    if beta == 0:  # as PyTorch: input's values are ignored (NaNs included), only its shape broadcasts
        from .. import zeros_like

        return product + zeros_like(input)
    return product + (input if beta == 1 else input * beta)


# ---------------------------------------------------------------------------
# reductions


def _dims(dim, ndim, name):
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    normalized = []
    for d in dims:
        if not -ndim <= d < ndim:
            raise IndexError(f"{name}: Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
                             f"but got {d})")
        d = d % ndim
        if d in normalized:
            raise RuntimeError(f"{name}: dim {d} appears multiple times in the list of dims")
        normalized.append(d)
    return sorted(normalized)


def sparse_sum(input, dim=None, keepdim=False, dtype=None):
    """Sum of a sparse tensor's elements, over all dimensions (a 0-dim dense tensor) or over ``dim``.

    Summing every sparse dimension gives a dense tensor; summing some gives a coalesced sparse tensor
    of the remaining ones (as ``torch.sparse.sum``).
    """
    if keepdim:
        raise NotImplementedError("sum of a sparse tensor with keepdim=True is not supported")
    values = input._values_t if dtype is None else input._values_t.to(dtype)
    ndim = input._data.ndim
    dims = _dims(dim, ndim, "sum")
    if dims is None:
        return values.sum()
    sparse_dim = input.sparse_dim()
    if input._layout is sparse_csr:
        input = input.to_sparse_coo()
    summed_dense = [d - sparse_dim + 1 for d in dims if d >= sparse_dim]
    if summed_dense:
        values = values.sum(summed_dense)
    kept = [d for d in range(sparse_dim) if d not in dims]
    if not kept:
        return values.sum(0)
    shape = tuple(input._data.shape)
    new_shape = tuple(shape[d] for d in kept) + tuple(
        shape[d] for d in range(sparse_dim, ndim) if d not in dims
    )
    if len(kept) == sparse_dim:  # only dense dimensions summed: the same pattern
        return SparseTensor._coo(input._indices_t, values, new_shape, input._coalesced)
    indices = Tensor._make(input._indices_t._data[kept], input._device)
    return coalesce(SparseTensor._coo(indices, values, new_shape, coalesced=False))


def softmax(input, dim, dtype=None, log=False):
    """Softmax (or log-softmax) of a sparse tensor over ``dim``, taken over the specified elements only.

    Unspecified elements count as ``-inf``: they get no probability and stay unspecified. The result
    has the (coalesced) pattern of ``input``. Differentiable through the values.
    """
    name = "log_softmax" if log else "softmax"
    if not isinstance(input, SparseTensor):
        raise TypeError(f"ember.sparse.{name}: input must be a sparse tensor, got a dense one; use ember.{name}")
    if input._layout is not sparse_coo:
        return softmax(input.to_sparse_coo(), dim, dtype, log).to_sparse_csr()
    ndim = input._data.ndim
    (dim,) = _dims(dim, ndim, name)
    s = coalesce(input)
    values = s._values_t if dtype is None else s._values_t.to(dtype)
    sparse_dim = s.sparse_dim()
    if dim >= sparse_dim:  # a dense dimension: every element of it is specified
        dense_dim = dim - sparse_dim + 1
        out = values.log_softmax(dense_dim) if log else values.softmax(dense_dim)
        return s._with_values(out)
    shape = tuple(s._data.shape)
    others = [d for d in range(sparse_dim) if d != dim]
    indices = s._indices_t._data
    xp = _kernels.array_module(indices)
    keys = _kernels.linearize(indices[others], tuple(shape[d] for d in others))
    unique, groups = xp.unique(keys, return_inverse=True)
    n_groups = unique.shape[0]
    group = Tensor._make(groups.reshape(-1).astype(np.int64), s._device)
    # the largest value of each group, subtracted for stability (a constant per group: no gradient)
    detached = values.detach()
    expanded = group.reshape(-1, *([1] * (values.ndim - 1))).expand(*values.shape)
    largest = detached.new_full((n_groups, *values.shape[1:]), float("-inf")).scatter_reduce(
        0, expanded, detached, "amax", include_self=True
    )
    shifted = values - largest.index_select(0, group)
    exp = shifted.exp()
    total = exp.new_zeros((n_groups, *values.shape[1:])).index_add(0, group, exp)
    if log:
        out = shifted - total.log().index_select(0, group)
    else:
        out = exp / total.index_select(0, group)
    return s._with_values(out)


# ---------------------------------------------------------------------------
# elementwise


def map_values(input, fn, needs_coalesced):
    """A sparse tensor with the pattern of ``input`` and values ``fn(values)`` (``fn(0) == 0``)."""
    if needs_coalesced and input._layout is sparse_coo:
        input = coalesce(input)
    return input._with_values(fn(input._values_t))


def _is_scalar(x):
    return isinstance(x, (int, float, complex, bool)) or (
        isinstance(x, Tensor) and not isinstance(x, SparseTensor) and x._data.ndim == 0
    )


def mul(input, other):
    """``input * other`` with a sparse operand: by a scalar, by a dense tensor of the same shape, or by a
    sparse tensor (the product is stored where both are specified)."""
    if not isinstance(input, SparseTensor):
        input, other = other, input
    if _is_scalar(other):
        return input._with_values(input._values_t * other)
    if input._layout is sparse_csr:
        return mul(input.to_sparse_coo(), other if not isinstance(other, SparseTensor) else
                   other.to_sparse_coo()).to_sparse_csr()
    if tuple(other.shape) != tuple(input.shape):
        raise RuntimeError(
            f"mul: a sparse tensor of shape {list(input.shape)} multiplies a scalar or a tensor of the same shape, "
            f"got shape {list(other.shape)}"
        )
    s = coalesce(input)
    if isinstance(other, SparseTensor):
        return _intersection_product(s, coalesce(other.to_sparse_coo()))
    sparse_dim = s.sparse_dim()
    if other.dtype is not s.dtype or other.device != s.device:
        raise RuntimeError(f"mul: sparse and dense operands must have one dtype and device, got {s.dtype} on "
                           f"{s.device} and {other.dtype} on {other.device}")
    picked = other[tuple(Tensor._make(s._indices_t._data[d], s._device) for d in range(sparse_dim))]
    return s._with_values(s._values_t * picked)


def _intersection_product(a, b):
    """The product of two coalesced COO tensors of one shape, stored where both are specified."""
    if a.sparse_dim() != b.sparse_dim():
        raise RuntimeError("mul: sparse operands must have the same sparse_dim")
    shape = tuple(a._data.shape)
    sparse_shape = shape[:a.sparse_dim()]
    ka = _kernels.linearize(a._indices_t._data, sparse_shape)
    kb = _kernels.linearize(b._indices_t._data, sparse_shape)
    xp = _kernels.array_module(ka)
    common, ia, ib = xp.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    device = a._device
    va = a._values_t.index_select(0, Tensor._make(ia.astype(np.int64), device))
    vb = b._values_t.index_select(0, Tensor._make(ib.astype(np.int64), device))
    indices = Tensor._make(_kernels.unlinearize(common, sparse_shape), device)
    return SparseTensor._coo(indices, va * vb, shape, coalesced=True)


def add(input, other, alpha=1, subtract=False):
    """``input + alpha * other`` (``-`` with ``subtract``) with a sparse operand.

    sparse + sparse is sparse (coalesced); dense + sparse is dense; sparse + dense raises as in PyTorch.
    """
    name = "sub" if subtract else "add"
    scale = -alpha if subtract else alpha
    if not isinstance(input, SparseTensor):
        if not isinstance(input, Tensor):  # other is the sparse operand here
            raise RuntimeError(f"{name}: a scalar and a sparse tensor cannot be added; use .to_dense() first")
        dense = to_dense(other)
        return input + (dense if scale == 1 else dense * scale)
    if not isinstance(other, SparseTensor):
        raise RuntimeError(f"{name}(sparse, dense) is not supported. Use {name}(dense, sparse) instead.")
    if tuple(input.shape) != tuple(other.shape):
        raise RuntimeError(f"{name}: sparse tensors of shapes {list(input.shape)} and {list(other.shape)} "
                           "cannot be added; they must have the same shape")
    if input.sparse_dim() != other.sparse_dim():
        raise RuntimeError(f"{name}: sparse operands must have the same sparse_dim, got "
                           f"{input.sparse_dim()} and {other.sparse_dim()}")
    if input.dtype is not other.dtype or input.device != other.device:
        raise RuntimeError(f"{name}: sparse operands must have one dtype and device, got {input.dtype} on "
                           f"{input.device} and {other.dtype} on {other.device}")
    csr = input._layout is sparse_csr
    a, b = input.to_sparse_coo(), other.to_sparse_coo()
    from .. import cat

    indices = Tensor._make(
        _kernels.array_module(a._indices_t._data).concatenate([a._indices_t._data, b._indices_t._data], axis=1),
        a._device,
    )
    b_values = b._values_t if scale == 1 else b._values_t * scale
    values = cat([a._values_t, b_values])
    result = coalesce(SparseTensor._coo(indices, values, tuple(a._data.shape), coalesced=False))
    return result.to_sparse_csr() if csr else result


def transpose(input, dim0, dim1):
    """A COO tensor with two dimensions swapped (both sparse, or both dense)."""
    if input._layout is not sparse_coo:
        raise NotImplementedError("transpose of a sparse CSR tensor is not supported; convert it with "
                                  ".to_sparse_coo() first")
    ndim = input._data.ndim
    dim0, dim1 = wrap_dim(dim0, ndim), wrap_dim(dim1, ndim)
    if dim0 == dim1:
        return input
    shape = list(input._data.shape)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    sparse_dim = input.sparse_dim()
    if dim0 < sparse_dim and dim1 < sparse_dim:
        order = list(range(sparse_dim))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        indices = Tensor._make(input._indices_t._data[order], input._device)
        return SparseTensor._coo(indices, input._values_t, tuple(shape), coalesced=False)
    if dim0 >= sparse_dim and dim1 >= sparse_dim:
        values = input._values_t.transpose(dim0 - sparse_dim + 1, dim1 - sparse_dim + 1)
        return SparseTensor._coo(input._indices_t, values, tuple(shape), input._coalesced)
    raise RuntimeError(f"transpose: cannot swap a sparse dimension with a dense one (dims {dim0} and {dim1}, "
                       f"sparse_dim={sparse_dim})")


def permute(input, dims):
    """A COO tensor with its dimensions reordered: sparse dimensions among themselves, dense ones likewise."""
    if input._layout is not sparse_coo:
        raise NotImplementedError("permute of a sparse CSR tensor is not supported; convert it with "
                                  ".to_sparse_coo() first")
    ndim = input._data.ndim
    order = [wrap_dim(d, ndim) for d in dims]
    if sorted(order) != list(range(ndim)):
        raise RuntimeError(f"permute: dims {list(dims)} are not a permutation of the {ndim} dimensions")
    sparse_dim = input.sparse_dim()
    if sorted(order[:sparse_dim]) != list(range(sparse_dim)):
        raise RuntimeError(f"permute: sparse dimensions (the first {sparse_dim}) can only be reordered among "
                           f"themselves, got dims {list(dims)}")
    if order == list(range(ndim)):
        return input
    shape = tuple(input._data.shape[d] for d in order)
    indices = Tensor._make(input._indices_t._data[order[:sparse_dim]], input._device)
    values = input._values_t
    dense_order = [d - sparse_dim + 1 for d in order[sparse_dim:]]
    if dense_order != sorted(dense_order):
        values = values.permute(0, *dense_order)
    coalesced = input._coalesced and order[:sparse_dim] == list(range(sparse_dim))
    return SparseTensor._coo(indices, values, shape, coalesced)

