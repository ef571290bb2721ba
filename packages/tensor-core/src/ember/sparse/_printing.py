"""``repr`` of sparse tensors, in PyTorch's format::

    tensor(indices=tensor([[0, 1],
                           [2, 0]]),
           values=tensor([3., 4.]),
           size=(2, 3), nnz=2, layout=ember.sparse_coo)

The parts are printed as tensors without their dtype; the sparse tensor's own dtype, device and
autograd state follow ``size`` and ``nnz``, wrapped at the print options' ``linewidth``.
"""

from __future__ import annotations

from .. import _dtype
from .._layout import sparse_csr
from .._printing import _OPTIONS, _add_suffixes, _format_values, _grad_fn_name, _host_values

__all__ = ["sparse_repr"]

_INDENT = " " * len("tensor(")


def _part(name, t, column):
    """``name=tensor([...])`` for a part (indices, values) starting at ``column``."""
    prefix = f"{name}=tensor("
    shape = tuple(t.shape)
    if t.numel() == 0:
        size = "" if len(shape) == 1 and name != "values" else f", size={shape}"
        return f"{prefix}[]{size})"
    return prefix + _format_values(_host_values(t.detach()), column + len(prefix), _OPTIONS) + ")"


def sparse_repr(t):
    """The text ``repr(t)`` shows for a sparse COO or CSR tensor ``t``."""
    default_dtype = _dtype.get_default_dtype()
    suffixes = [f"size={tuple(t.shape)}", f"nnz={t._nnz()}"]
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    if t.dtype not in (default_dtype, _dtype.int64, _dtype.bool):
        suffixes.append(f"dtype={t.dtype}")
    suffixes.append(f"layout={t.layout}")
    grad_fn_name = _grad_fn_name(t)
    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    column = len(_INDENT)
    values = _part("values", t._values_t, column)
    if t.layout is sparse_csr:
        head = (
            "tensor(" + _part("crow_indices", t._crow, column) + ",\n"
            + _INDENT + _part("col_indices", t._col, column) + ",\n"
            + _INDENT + values
        )
        return _add_suffixes(head, suffixes, column, _OPTIONS)
    head = (
        "tensor(" + _part("indices", t._indices_t, column) + ",\n"
        + _INDENT + values + ",\n"
        + _INDENT + suffixes[0]
    )
    return _add_suffixes(head, suffixes[1:], column, _OPTIONS)
