"""``ember.save``/``ember.load`` of sparse tensors, through ``register_serializable_type``.

A sparse tensor is stored as a tagged dict of its parts (tensors and plain values); loading
rebuilds it with :func:`ember.sparse_coo_tensor` / :func:`ember.sparse_csr_tensor`, so every
check of a new sparse tensor (shapes, index ranges, CSR offsets) runs on the file's data too.
Anything malformed raises, and ``ember.load`` reports it as a ``SerializationError``.
"""

from __future__ import annotations

from .._layout import sparse_csr
from .._tensor import Tensor
from ._tensor import SparseTensor, _is_sorted_unique, sparse_coo_tensor, sparse_csr_tensor

__all__ = ["register", "TYPE_NAME"]

TYPE_NAME = "ember.sparse.SparseTensor"

_COO_KEYS = {"layout", "size", "indices", "values", "coalesced"}
_CSR_KEYS = {"layout", "size", "crow_indices", "col_indices", "values"}


def encode(t):
    """The saveable parts of sparse tensor ``t``."""
    size = [int(s) for s in t.shape]
    if t.layout is sparse_csr:
        return {"layout": "sparse_csr", "size": size, "crow_indices": t._crow, "col_indices": t._col,
                "values": t._values_t}
    return {"layout": "sparse_coo", "size": size, "indices": t._indices_t, "values": t._values_t,
            "coalesced": bool(t._coalesced)}


def _tensor(value, key):
    if not isinstance(value, Tensor) or isinstance(value, SparseTensor):
        raise TypeError(f"sparse tensor record: {key!r} must be a dense tensor, got {type(value).__name__}")
    return value


def decode(value):
    """Rebuild a sparse tensor from :func:`encode`'s parts, checking everything.

    Raises:
        TypeError, ValueError: for a malformed record (ember.load reports them as a SerializationError).
    """
    try:
        return _decode(value)
    except RuntimeError as error:  # the constructors' checks (index ranges, offsets) reject the data
        raise ValueError(f"invalid sparse tensor: {error}") from None


def _decode(value):
    if not isinstance(value, dict):
        raise TypeError(f"sparse tensor record must be a dict, got {type(value).__name__}")
    layout = value.get("layout")
    expected = _COO_KEYS if layout == "sparse_coo" else _CSR_KEYS if layout == "sparse_csr" else None
    if expected is None:
        raise ValueError(f"sparse tensor record has layout {layout!r}; expected 'sparse_coo' or 'sparse_csr'")
    if set(value) != expected:
        raise ValueError(f"sparse tensor record has keys {sorted(value)}; expected {sorted(expected)}")
    size = value["size"]
    if not isinstance(size, list) or not all(type(s) is int and s >= 0 for s in size):
        raise ValueError(f"sparse tensor record has size {size!r}; expected a list of non-negative ints")
    values = _tensor(value["values"], "values")
    requires_grad = values.requires_grad
    values = values.detach()
    if layout == "sparse_csr":
        return sparse_csr_tensor(_tensor(value["crow_indices"], "crow_indices"),
                                 _tensor(value["col_indices"], "col_indices"), values, size,
                                 requires_grad=requires_grad)
    coalesced = value["coalesced"]
    if type(coalesced) is not bool:
        raise ValueError(f"sparse tensor record has coalesced {coalesced!r}; expected true or false")
    indices = _tensor(value["indices"], "indices")
    result = sparse_coo_tensor(indices, values, size, requires_grad=requires_grad)
    if coalesced:
        if not _sorted_unique(result):
            raise ValueError("sparse tensor record says coalesced, but its indices are not sorted and unique")
        result._coalesced = True
    return result


def _sorted_unique(t):
    return _is_sorted_unique(t._indices_t._data, tuple(t.shape)[:t.sparse_dim()])


def register():
    """Register sparse tensors with ember.serialization (once)."""
    from ..serialization import _EXTENSIONS_BY_NAME, register_serializable_type

    if TYPE_NAME not in _EXTENSIONS_BY_NAME:
        register_serializable_type(SparseTensor, TYPE_NAME, encode, decode)
