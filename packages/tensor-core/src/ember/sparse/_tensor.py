"""Sparse tensors: :class:`SparseTensor`, a :class:`ember.Tensor` that stores only its specified elements.

A sparse COO tensor of shape ``sparse_shape + dense_shape`` holds

* ``indices``: an int64 tensor of shape ``(sparse_dim, nnz)``, the coordinates of the stored
  elements in the sparse dimensions;
* ``values``: an ember tensor of shape ``(nnz, *dense_shape)``, the stored elements.

A sparse CSR tensor (2 sparse dimensions) holds ``crow_indices`` (``n_rows + 1`` row offsets),
``col_indices`` (``nnz``) and ``values``. Values are ordinary ember tensors, so autograd flows
through them: a sparse tensor's ``requires_grad``, ``grad_fn`` and ``is_leaf`` are its values',
and a sparse leaf's ``.grad`` is a sparse tensor with the leaf's pattern built from its values'
gradient. Every op reaches a sparse tensor through ``__ember_function__``
(:mod:`ember.sparse._dispatch`), which runs the sparse implementation or raises; a sparse tensor's
backend array is a placeholder that refuses every use, so no dense kernel can read it by mistake.
"""

from __future__ import annotations

import math

import numpy as np

from .._device import canonical_device
from .._dtype import dtype as _dtype_cls
from .._dtype import int64
from .._layout import sparse_coo, sparse_csr
from .._ops._dispatch import state
from .._shape_only import ShapeOnlyArray
from .._tensor import Tensor
from . import _kernels

__all__ = ["SparseTensor", "sparse_coo_tensor", "sparse_csr_tensor", "dense_to_sparse", "coalesce", "to_dense"]


class _NoStridedData(ShapeOnlyArray):
    """The backend array of a sparse tensor: shape and dtype only; any other use raises.

    Dense kernels that meet a sparse tensor despite the dispatcher (they cannot through the public
    API) fail here instead of computing with it.
    """

    __slots__ = ()

    def _refuse(self, what):
        if what == "__array__":
            raise TypeError("can't convert a sparse tensor to a numpy array; use Tensor.to_dense() first")
        raise RuntimeError(
            f"a sparse tensor has no strided data (attribute {what!r} of its array was read); "
            "call .to_dense() first"
        )


class SparseTensor(Tensor):
    """A sparse COO or CSR tensor (``layout`` ``ember.sparse_coo`` or ``ember.sparse_csr``).

    Make one with :func:`ember.sparse_coo_tensor`, :func:`ember.sparse_csr_tensor`,
    :meth:`Tensor.to_sparse` or :meth:`Tensor.to_sparse_csr`, not with this class.
    """

    _indices_t = None  # COO: int64 (sparse_dim, nnz)
    _crow = None  # CSR: int64 (n_rows + 1,)
    _col = None  # CSR: int64 (nnz,)
    _coalesced = False
    _grad_cache = None  # (values' grad it was built from, its version, the sparse grad)

    @classmethod
    def _coo(cls, indices, values, shape, coalesced=False):
        """A COO tensor from checked parts (no validation here)."""
        t = object.__new__(cls)
        t._layout = sparse_coo
        t._indices_t = indices
        t._values_t = values
        t._coalesced = bool(coalesced)
        t._data = _NoStridedData(shape, values._data.dtype)
        t._device = values._device
        return t

    @classmethod
    def _csr(cls, crow, col, values, shape):
        """A CSR tensor from checked parts (no validation here)."""
        t = object.__new__(cls)
        t._layout = sparse_csr
        t._crow = crow
        t._col = col
        t._values_t = values
        t._data = _NoStridedData(shape, values._data.dtype)
        t._device = values._device
        return t

    def _with_values(self, values, map_indices=None):
        """The same pattern with other values (same dense shape); ``map_indices`` (e.g. a clone or a
        device move) is applied to each index tensor when given."""
        shape = tuple(self._data.shape)
        if self._layout is sparse_csr:
            crow, col = (self._crow, self._col) if map_indices is None else (map_indices(self._crow),
                                                                              map_indices(self._col))
            return SparseTensor._csr(crow, col, values, shape)
        indices = self._indices_t if map_indices is None else map_indices(self._indices_t)
        return SparseTensor._coo(indices, values, shape, self._coalesced)

    # -- metadata ------------------------------------------------------------------

    @property
    def layout(self):
        return self._layout

    @property
    def is_sparse(self):
        return self._layout is sparse_coo

    @property
    def is_sparse_csr(self):
        return self._layout is sparse_csr

    def sparse_dim(self):
        """The number of sparse dimensions (leading dimensions addressed by the indices)."""
        return 2 if self._layout is sparse_csr else self._indices_t._data.shape[0]

    def dense_dim(self):
        """The number of dense dimensions (trailing dimensions of each stored value)."""
        return self._values_t._data.ndim - 1

    def _nnz(self):
        """The number of stored elements (duplicates included for an uncoalesced COO tensor)."""
        return self._values_t._data.shape[0]

    def is_coalesced(self):
        """Whether a COO tensor's indices are sorted (row-major) and unique.

        Raises:
            RuntimeError: for a CSR tensor (as PyTorch).
        """
        self._require_coo("is_coalesced")
        return self._coalesced

    def _require_coo(self, name):
        if self._layout is not sparse_coo:
            raise RuntimeError(f"{name} expected sparse coordinate tensor layout but got {self._layout}")

    def _require_csr(self, name):
        if self._layout is not sparse_csr:
            raise RuntimeError(f"{name} expected sparse CSR tensor layout but got {self._layout}")

    def indices(self):
        """The int64 indices ``(sparse_dim, nnz)`` of a coalesced COO tensor.

        Raises:
            RuntimeError: if the tensor is not coalesced (call :meth:`coalesce`), or not COO.
        """
        self._require_coo("indices")
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._indices_t

    def values(self):
        """The stored values ``(nnz, *dense_shape)`` (of a coalesced tensor, if COO); autograd flows through them.

        Raises:
            RuntimeError: for an uncoalesced COO tensor (call :meth:`coalesce`).
        """
        if self._layout is sparse_coo and not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._values_t

    def _indices(self):
        self._require_coo("_indices")
        return self._indices_t

    def _values(self):
        return self._values_t

    def crow_indices(self):
        """The CSR row offsets, int64 of shape ``(n_rows + 1,)``."""
        self._require_csr("crow_indices")
        return self._crow

    def col_indices(self):
        """The CSR column indices, int64 of shape ``(nnz,)``."""
        self._require_csr("col_indices")
        return self._col

    def _coo_indices(self):
        """COO indices of either layout (a CSR tensor's rows expanded from its offsets)."""
        if self._layout is sparse_coo:
            return self._indices_t
        rows = _kernels.csr_rows(self._crow._data)
        return Tensor._make(_kernels.array_module(rows).stack([rows, self._col._data]), self._device)

    # -- conversions ----------------------------------------------------------------

    def coalesce(self):
        """This COO tensor with sorted, unique indices (duplicates summed); differentiable.

        Raises:
            RuntimeError: for a CSR tensor.
        """
        self._require_coo("coalesce")
        return coalesce(self)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense (strided) tensor this sparse tensor stands for; differentiable."""
        dense = to_dense(self)
        return dense if dtype is None else dense.to(dtype)

    def to_sparse(self, *args, layout=None, sparse_dim=None, blocksize=None, dense_dim=None):
        """This tensor in ``layout`` (COO by default)."""
        if args:
            sparse_dim = args[0]
        if layout is None or layout is sparse_coo:
            if sparse_dim is not None and sparse_dim != self.sparse_dim():
                raise RuntimeError(
                    f"to_sparse: conversion from a sparse tensor with sparse_dim={self.sparse_dim()} to "
                    f"sparse_dim={sparse_dim} is not supported; use .to_dense().to_sparse({sparse_dim})"
                )
            return self.to_sparse_coo()
        if layout is sparse_csr:
            return self.to_sparse_csr()
        raise RuntimeError(f"to_sparse: unsupported layout {layout}")

    def to_sparse_coo(self):
        """This tensor as a COO tensor (itself if it is one)."""
        if self._layout is sparse_coo:
            return self
        indices = self._coo_indices()
        return SparseTensor._coo(indices, self._values_t, tuple(self._data.shape),
                                 coalesced=_is_sorted_unique(indices._data, self._data.shape[:2]))

    def to_sparse_csr(self, dense_dim=None):
        """This tensor as a CSR tensor (2 sparse dimensions; a COO tensor is coalesced first).

        Raises:
            RuntimeError: if the tensor does not have exactly 2 sparse dimensions.
        """
        if self._layout is sparse_csr:
            return self
        if self.sparse_dim() != 2:
            raise RuntimeError(
                f"to_sparse_csr: expected a COO tensor with 2 sparse dimensions, got {self.sparse_dim()}"
            )
        c = coalesce(self)
        rows = c._indices_t._data[0]
        crow = Tensor._make(_kernels.csr_offsets(rows, self._data.shape[0]), self._device)
        col = Tensor._make(c._indices_t._data[1].copy(), self._device)
        return SparseTensor._csr(crow, col, c._values_t, tuple(self._data.shape))

    # -- autograd: through the values ---------------------------------------------------

    @property
    def _requires_grad(self):
        return self._values_t._requires_grad

    @property
    def requires_grad(self):
        return self._values_t._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        """Set whether autograd records operations on this tensor (on its values); returns ``self``."""
        self._values_t.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self):
        return self._values_t.grad_fn

    @property
    def is_leaf(self):
        return self._values_t.is_leaf

    @property
    def grad(self):
        """The gradient of a sparse leaf: a sparse tensor on the leaf's (coalesced) pattern, or None."""
        values_grad = self._values_t._grad
        if values_grad is None:
            return None
        cached = self._grad_cache  # the same object while the values' gradient is unchanged (accumulation
        # into it in place bumps its version)
        if cached is not None and cached[0] is values_grad and cached[1] == values_grad._version:
            return cached[2]
        result = _grad_on_pattern(self, values_grad)
        self._grad_cache = (values_grad, values_grad._version, result)
        return result

    @grad.setter
    def grad(self, value):
        if value is None:
            self._values_t._grad = None
            self._grad_cache = None
            return
        raise RuntimeError("assigning .grad of a sparse tensor is only supported with None")

    @grad.deleter
    def grad(self):
        self.grad = None

    def register_hook(self, hook):
        raise NotImplementedError("register_hook is not supported on sparse tensors; hook the values instead")

    def retain_grad(self):
        raise NotImplementedError("retain_grad is not supported on sparse tensors")

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        raise RuntimeError("backward of a sparse tensor is not supported; reduce it to a dense tensor first "
                           "(ember.sparse.sum or .to_dense())")

    # -- what a sparse tensor has not -------------------------------------------------

    def _no_strided(self, what):
        raise RuntimeError(f"{what} is not supported on sparse tensors (layout {self._layout}); "
                           "call .to_dense() first")

    def stride(self, dim=None):
        self._no_strided("stride()")

    def storage_offset(self):
        self._no_strided("storage_offset()")

    def untyped_storage(self):
        self._no_strided("untyped_storage()")

    def data_ptr(self):
        self._no_strided("data_ptr()")

    def is_contiguous(self, memory_format=None):
        self._no_strided("is_contiguous()")

    def contiguous(self, memory_format=None):
        return self

    def numpy(self, *, force=False):
        raise TypeError(f"can't convert a {self._layout.name} tensor to numpy; use Tensor.to_dense() first")

    def _host_array(self):
        self._no_strided("reading the elements")

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self.to_dense().item()

    def tolist(self):
        self._no_strided("tolist()")

    def __iter__(self):
        self._no_strided("iteration")

    def __bool__(self):
        return bool(self.item())

    def __dlpack__(self, stream=None, **kwargs):
        self._no_strided("__dlpack__")

    def __dlpack_device__(self):
        self._no_strided("__dlpack_device__")

    def as_subclass(self, cls):
        self._no_strided("as_subclass")

    def _set_data(self, array, storage=None):
        self._no_strided("setting .data")

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = self._with_values(self._values_t.__deepcopy__(memo), map_indices=Tensor.clone)
        memo[id(self)] = result
        return result

    def __repr__(self, *, tensor_contents=None):
        from ._printing import sparse_repr

        return sparse_repr(self)

    # -- every op goes to the sparse implementations ----------------------------------------

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        if any(not issubclass(t, Tensor) for t in types):
            return NotImplemented  # an FX Proxy (or another tensor-like) among the arguments records the call
        from ._dispatch import run_sparse

        return run_sparse(func, args, kwargs or {})


# ---------------------------------------------------------------------------
# construction


def _as_index_tensor(indices, device, name):
    from .. import as_tensor

    if isinstance(indices, SparseTensor):
        raise TypeError(f"{name} must be a dense tensor of integers, got a sparse tensor")
    if not isinstance(indices, Tensor):  # lists (empty ones too) are read as int64, as PyTorch does
        return as_tensor(indices, dtype=int64, device=device)
    t = as_tensor(indices, device=device)
    if t.dtype.name not in ("int64", "int32", "int16", "int8", "uint8"):
        raise RuntimeError(f"{name} must be an int64 tensor, got {t.dtype}")
    if t.dtype is not int64:
        t = t.to(int64)
    return t.detach()


def _as_values(values, dtype, device):
    """The values tensor a sparse tensor holds: a new tensor object (its requires_grad is the sparse tensor's)
    that shares ``values``' memory, and keeps its autograd history when ``values`` requires grad."""
    from .. import as_tensor

    if isinstance(values, SparseTensor):
        raise TypeError("values must be a dense tensor, got a sparse tensor")
    if not isinstance(values, Tensor):
        values = as_tensor(values, dtype=dtype, device=device)
    else:
        if dtype is not None and dtype is not values.dtype or device is not None and \
                canonical_device(device) != values.device:
            values = values.to(dtype=dtype, device=device)
    if values._requires_grad and state.grad_enabled:
        return values.view(values.shape)  # a differentiable alias: gradients reach the caller's tensor
    return values.detach()


def _check_coo(indices, values, size):
    """Check the parts of a COO tensor against PyTorch's rules; the full size."""
    if indices._data.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if values._data.ndim < 1:
        raise RuntimeError("values must have at least one dimension (nnz), got a zero-dimensional tensor")
    sparse_dim, nnz = indices._data.shape
    if values._data.shape[0] != nnz:
        raise RuntimeError(
            f"indices and values must have the same number of elements, but got {nnz} and {values._data.shape[0]}"
        )
    if indices._device != values._device:
        raise RuntimeError(
            f"device of indices ({indices.device}) must match device of values ({values.device})"
        )
    host = _host(indices._data)
    if size is None:
        sparse_shape = tuple(int(m) + 1 for m in host.max(axis=1)) if nnz else (0,) * sparse_dim
        return sparse_shape + tuple(values._data.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sparse_dim + values._data.ndim - 1:
        raise RuntimeError(
            f"number of dimensions must be sparse_dim ({sparse_dim}) + dense_dim ({values._data.ndim - 1}), "
            f"but got {len(size)}"
        )
    if tuple(values._data.shape[1:]) != size[sparse_dim:]:
        raise RuntimeError(
            f"values has incorrect size, expected {[nnz, *size[sparse_dim:]]}, got {list(values.shape)}"
        )
    if any(s < 0 for s in size):
        raise RuntimeError(f"size must be non-negative, got {list(size)}")
    if nnz:
        low, high = host.min(axis=1), host.max(axis=1)
        for d in range(sparse_dim):
            if low[d] < 0:
                raise RuntimeError(f"found negative index {int(low[d])} for dim {d}")
            if high[d] >= size[d]:
                raise RuntimeError(
                    f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found index {int(high[d])}"
                )
    return size


def _host(array):
    """A host (numpy) copy of a backend array, for checks that read values."""
    return array.get() if hasattr(array, "get") and not isinstance(array, np.ndarray) else np.asarray(array)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor with the given ``values`` at ``indices``.

    Indices are always checked (non-negative and within ``size``), whatever ``check_invariants``
    says, so a malformed tensor cannot reach a kernel.

    Args:
        indices: int tensor (or nested list) of shape ``(sparse_dim, nnz)``: column ``k`` holds the
            coordinates of the ``k``-th value. Duplicates are allowed (they add up).
        values: tensor (or nested list) of shape ``(nnz, *dense_shape)``.
        size (sequence of int, optional): the shape ``sparse_shape + dense_shape``; inferred from the
            largest index of each sparse dimension when omitted.
        dtype (ember.dtype, optional): the values' dtype (default: that of ``values``).
        device (optional): where to put it (default: ``values``' device).
        requires_grad (bool): make the result a leaf that requires grad.
        check_invariants (bool, optional): accepted for PyTorch compatibility (checks always run).
        is_coalesced (bool, optional): declare the indices sorted and unique (trusted, as in PyTorch).

    Returns:
        SparseTensor: layout ``ember.sparse_coo``.

    Raises:
        RuntimeError: for mismatched shapes, non-integer or out-of-range indices.

    Example:
        >>> import ember
        >>> s = ember.sparse_coo_tensor([[0, 1], [2, 0]], [3.0, 4.0], (2, 3))
        >>> s.to_dense()
        tensor([[0., 0., 3.],
                [4., 0., 0.]])
    """
    if dtype is not None and not isinstance(dtype, _dtype_cls):
        raise TypeError(f"sparse_coo_tensor: dtype must be an ember.dtype, got {dtype!r}")
    values = _as_values(values, dtype, device)
    indices = _as_index_tensor(indices, values.device, "indices")
    shape = _check_coo(indices, values, size)
    if requires_grad:
        values = values.detach().requires_grad_(True)
    coalesced = bool(is_coalesced) if is_coalesced is not None else indices._data.shape[1] <= 1
    return SparseTensor._coo(indices, values, shape, coalesced)


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """A sparse CSR matrix: row ``i``'s values are ``values[crow[i]:crow[i+1]]`` in columns ``col[...]``.

    Args:
        crow_indices: int tensor ``(n_rows + 1,)``, non-decreasing row offsets from 0 to nnz.
        col_indices: int tensor ``(nnz,)``, the column of each value.
        values: tensor ``(nnz, *dense_shape)``.
        size (sequence of int, optional): ``(n_rows, n_cols, *dense_shape)``; inferred when omitted.
        dtype, device, requires_grad: as for :func:`sparse_coo_tensor`.

    Returns:
        SparseTensor: layout ``ember.sparse_csr``.

    Raises:
        RuntimeError: for inconsistent offsets, shapes or out-of-range columns.

    Example:
        >>> import ember
        >>> ember.sparse_csr_tensor([0, 1, 2], [2, 0], [3.0, 4.0], (2, 3)).to_dense()
        tensor([[0., 0., 3.],
                [4., 0., 0.]])
    """
    values = _as_values(values, dtype, device)
    crow = _as_index_tensor(crow_indices, values.device, "crow_indices")
    col = _as_index_tensor(col_indices, values.device, "col_indices")
    if crow._data.ndim != 1 or col._data.ndim != 1:
        raise RuntimeError("crow_indices and col_indices must be one-dimensional (batched CSR is not supported)")
    nnz = values._data.shape[0] if values._data.ndim else -1
    if col._data.shape[0] != nnz:
        raise RuntimeError(
            f"col_indices and values must have the same number of elements, got {col._data.shape[0]} and {nnz}"
        )
    crow_host, col_host = _host(crow._data), _host(col._data)
    if crow_host.shape[0] < 1 or crow_host[0] != 0 or crow_host[-1] != nnz or np.any(np.diff(crow_host) < 0):
        raise RuntimeError(
            f"crow_indices must start at 0, end at nnz ({nnz}) and be non-decreasing, got {crow_host.tolist()}"
        )
    n_rows = crow_host.shape[0] - 1
    if size is None:
        size = (n_rows, int(col_host.max()) + 1 if nnz else 0, *values._data.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != 2 + values._data.ndim - 1 or size[0] != n_rows or tuple(values._data.shape[1:]) != size[2:]:
        raise RuntimeError(
            f"size {list(size)} does not match crow_indices ({n_rows} rows) and values {list(values.shape)}"
        )
    if nnz and (col_host.min() < 0 or col_host.max() >= size[1]):
        raise RuntimeError(f"col_indices must be in [0, {size[1]}), got values from {col_host.min()} to "
                           f"{col_host.max()}")
    if requires_grad:
        values = values.detach().requires_grad_(True)
    return SparseTensor._csr(crow, col, values, size)


# ---------------------------------------------------------------------------
# conversions (differentiable through the values)


def _is_sorted_unique(indices, sparse_shape):
    linear = _kernels.linearize(indices, sparse_shape)
    if linear.shape[0] <= 1:
        return True
    return bool((linear[1:] > linear[:-1]).all())


def coalesce(sparse):
    """``sparse`` (COO) with its indices sorted and unique, duplicates' values summed; differentiable."""
    if sparse._coalesced:
        return sparse
    shape = tuple(sparse._data.shape)
    sparse_shape = shape[:sparse.sparse_dim()]
    indices = sparse._indices_t._data
    xp = _kernels.array_module(indices)
    linear = _kernels.linearize(indices, sparse_shape)
    unique, inverse = xp.unique(linear, return_inverse=True)
    device = sparse._device
    values = sparse._values_t
    if unique.shape[0] == linear.shape[0]:  # no duplicates: a permutation
        order = Tensor._make(xp.argsort(linear).astype(np.int64), device)
        new_values = values.index_select(0, order)
    else:
        new_values = values.new_zeros((unique.shape[0], *values.shape[1:])).index_add(
            0, Tensor._make(inverse.reshape(-1).astype(np.int64), device), values
        )
    new_indices = Tensor._make(_kernels.unlinearize(unique, sparse_shape), device)
    return SparseTensor._coo(new_indices, new_values, shape, coalesced=True)


def to_dense(sparse):
    """The strided tensor ``sparse`` stands for (duplicates summed); differentiable through the values."""
    shape = tuple(sparse._data.shape)
    sparse_dim = sparse.sparse_dim()
    indices = sparse._coo_indices()._data
    linear = Tensor._make(_kernels.linearize(indices, shape[:sparse_dim]), sparse._device)
    values = sparse._values_t
    flat = values.new_zeros((math.prod(shape[:sparse_dim]), *shape[sparse_dim:]))
    return flat.index_add(0, linear, values).reshape(shape)


def dense_to_sparse(dense, sparse_dim=None):
    """The COO tensor of ``dense``'s nonzero elements (coalesced); differentiable wrt ``dense``.

    With ``sparse_dim`` below ``dense.ndim``, a value is stored for each position of the leading
    ``sparse_dim`` dimensions where any of its trailing elements is nonzero.
    """
    ndim = dense._data.ndim
    if sparse_dim is None:
        sparse_dim = ndim
    if not 0 < sparse_dim <= ndim:
        raise RuntimeError(f"to_sparse: sparse_dim must be in [1, {ndim}] for a {ndim}-D tensor, got {sparse_dim}")
    if dense._device.type == "meta":
        raise NotImplementedError("to_sparse is not supported on the meta device")
    array = dense._data
    xp = _kernels.array_module(array)
    nonzero = array != 0
    if sparse_dim < ndim:
        nonzero = nonzero.reshape(*array.shape[:sparse_dim], -1).any(axis=-1)
    positions = xp.nonzero(nonzero)
    if positions:
        indices = xp.stack(positions).astype(np.int64)
    else:
        indices = xp.zeros((sparse_dim, 0), dtype=np.int64)
    device = dense._device
    index_tensors = tuple(Tensor._make(indices[d], device) for d in range(sparse_dim))
    values = dense[index_tensors]
    return SparseTensor._coo(Tensor._make(indices, device), values, tuple(array.shape), coalesced=True)


def _grad_on_pattern(sparse, values_grad):
    """A sparse leaf's ``.grad``: its coalesced pattern, each position's gradient (not summed over duplicates:
    every duplicate of a position has that position's gradient)."""
    shape = tuple(sparse._data.shape)
    if sparse._layout is sparse_csr:
        return SparseTensor._csr(sparse._crow, sparse._col, values_grad, shape)
    if sparse._coalesced:
        return SparseTensor._coo(sparse._indices_t, values_grad, shape, coalesced=True)
    sparse_shape = shape[:sparse.sparse_dim()]
    indices = sparse._indices_t._data
    xp = _kernels.array_module(indices)
    linear = _kernels.linearize(indices, sparse_shape)
    unique, first = xp.unique(linear, return_index=True)
    device = sparse._device
    values = values_grad.index_select(0, Tensor._make(first.astype(np.int64), device))
    return SparseTensor._coo(Tensor._make(_kernels.unlinearize(unique, sparse_shape), device), values, shape,
                             coalesced=True)
