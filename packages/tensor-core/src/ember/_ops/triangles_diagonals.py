"""Triangles and diagonals: tril/triu, tril_indices/triu_indices, diag, diag_embed, diagflat and trace."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._layout import check_strided
from .._meta import MetaArray
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop
from ._shape_helpers import _INT32_OR_64, _LOW_FLOATS, _def_inplace, _fresh, _require_tensor
from ._shapes import wrap_dim
from .creation import clone, copy_, zeros
from .masks import masked_fill
from .views import reshape, unsqueeze

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["tril", "tril_", "triu", "triu_", "diag", "diag_embed", "diagflat", "trace"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- triangles ----------------------------------------------------------------------------------------


def _triangle_mask(shape, diagonal, lower):
    """Bool matrix of the kept elements: ``col - row <= diagonal`` (lower) or ``>= diagonal`` (upper)."""
    rows, cols = shape[-2:]
    if lower:
        return np.tri(rows, cols, diagonal, dtype=bool)
    return ~np.tri(rows, cols, diagonal - 1, dtype=bool)


def _triangle(name, lower):
    side, keep = ("lower", "on and below") if lower else ("upper", "on and above")

    def meta(input, diagonal=0):
        _require_tensor(name, "input", input)
        if input._data.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        if isinstance(diagonal, bool) or not isinstance(diagonal, (int, np.integer)):
            raise TypeError(f"{name}(): argument 'diagonal' must be int, not {type(diagonal).__name__}")
        return MetaArray(input._data.shape, input._data.dtype)

    def cpu(input, diagonal=0):
        data = input._data
        return np.where(_triangle_mask(data.shape, diagonal, lower), data, np.zeros((), data.dtype))

    def inplace(self, diagonal=0):
        np.copyto(self._data, np.zeros((), self._data.dtype), where=~_triangle_mask(self._data.shape, diagonal, lower))

    def decomposition(input, diagonal=0):
        meta(input, diagonal)
        from .comparison import gt, lt
        from .creation import arange
        from .pointwise import sub

        rows, cols = input._data.shape[-2:]
        offset = sub(unsqueeze(arange(cols, device=input.device), 0), unsqueeze(arange(rows, device=input.device), 1))
        dropped = gt(offset, diagonal) if lower else lt(offset, diagonal)
        return masked_fill(input, dropped, 0)

    example = ("tensor([[1., 0.],\n                [1., 1.]])" if lower
               else "tensor([[1., 1.],\n                [0., 1.]])")
    meta.__name__ = name
    meta.__doc__ = f"""The {side} triangle of the matrices in ``input``; elements {keep} a diagonal are kept.

    The other elements are zeroed. Works on the last two dims (batches of
    matrices too). ``diagonal`` 0 is the main diagonal, > 0 above it, < 0 below.

    Args:
        input (Tensor): at least 2-D.
        diagonal (int): which diagonal bounds the triangle.

    Raises:
        RuntimeError: for fewer than 2 dims.

    Example:
        >>> import ember
        >>> ember.{name}(ember.ones(2, 2))
        {example}
    """
    op = defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, has_out=True)
    _def_inplace(op, inplace)
    return op


tril = _triangle("tril", True)
triu = _triangle("triu", False)


def _triangle_count(row, col, offset):
    """How many (i, j) of a ``row`` x ``col`` matrix have ``j - i <= offset``, by arithmetic (no mask: the
    meta function of ``tril_indices(2**32, 2**32)`` must not allocate)."""
    row, col, offset = int(row), int(col), int(offset)
    # row i holds min(max(i + offset + 1, 0), col) such elements: none before row `first`, all `col` from row `full`
    first = min(max(-offset, 0), row)
    full = min(max(col - offset - 1, first), row)
    ramp = (full - first) * (first + full - 1 + 2 * (offset + 1)) // 2
    return ramp + (row - full) * col


def _tri_indices(name, lower):
    side = "lower" if lower else "upper"
    def meta(row, col, offset=0, *, dtype=None, device=None, layout=None, requires_grad=False, pin_memory=False):
        check_strided(name, layout)
        for arg, value in (("row", row), ("col", col), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name}(): argument '{arg}' must be int, not {type(value).__name__}")
        if row < 0:
            raise RuntimeError(f"row must be non-negative, got{row}")
        if col < 0:
            raise RuntimeError(f"col must be non-negative, got{col}")
        dtype = D.int64 if dtype is None else dtype
        if not isinstance(dtype, D.dtype):
            raise TypeError(f"dtype must be an ember.dtype, not {type(dtype).__name__}")
        if dtype not in _INT32_OR_64:
            raise NotImplementedError(f'"{name}" not implemented for \'{_torch_name(dtype)}\'')
        count = _triangle_count(row, col, offset) if lower else row * col - _triangle_count(row, col, offset - 1)
        return MetaArray((2, count), dtype.numpy_dtype)

    def cpu(row, col, offset=0, *, dtype=None, device=None, layout=None, requires_grad=False, pin_memory=False):
        np_dtype = (D.int64 if dtype is None else dtype).numpy_dtype
        if not row or not col:
            return np.empty((2, 0), np_dtype)
        rows, cols = np.nonzero(_triangle_mask((row, col), offset, lower))
        return np.stack([rows, cols]).astype(np_dtype)

    example = ("tensor([[0, 1, 1, 2, 2, 2],\n                [0, 0, 1, 0, 1, 2]])" if lower
               else "tensor([[0, 0, 0, 1, 1, 2],\n                [0, 1, 2, 1, 2, 2]])")
    meta.__name__ = name
    meta.__doc__ = f"""The (row, column) indices of the {side} triangle of a ``row`` x ``col`` matrix, (2 x N).

    The same elements as :func:`ember.{name[:4]}` keeps, in row-major order.

    Args:
        row (int): number of rows.
        col (int): number of columns.
        offset (int): the bounding diagonal (0 main, > 0 above, < 0 below).
        dtype (ember.dtype, optional): int64 (default) or int32.
        device (ember.device or str, optional): where to allocate.

    Raises:
        RuntimeError: for negative ``row`` or ``col``.
        NotImplementedError: for dtypes other than int32 and int64.

    Example:
        >>> import ember
        >>> ember.{name}(3, 3)
        {example}
    """
    return defop(name, meta, cpu=cpu, tags=("factory",))


tril_indices = _tri_indices("tril_indices", True)
triu_indices = _tri_indices("triu_indices", False)


# -- diagonals and trace ---------------------------------------------------------------------------------


def _diag_meta(input, diagonal=0):
    """A 1-D ``input`` as a diagonal of a square matrix, or a copy of a diagonal of a 2-D ``input``.

    Args:
        input (Tensor): 1-D or 2-D.
        diagonal (int): 0 the main diagonal, > 0 above it, < 0 below.

    Returns:
        Tensor: 2-D of size ``n + |diagonal|`` for a 1-D input of size ``n``;
        1-D for a 2-D input.

    Raises:
        RuntimeError: for other numbers of dims.

    Example:
        >>> import ember
        >>> ember.diag(ember.tensor([1, 2]))
        tensor([[1, 0],
                [0, 2]])
    """
    _require_tensor("diag", "input", input)
    ndim = input._data.ndim
    if ndim not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {ndim}D")
    if ndim == 1:
        n = input._data.shape[0] + abs(diagonal)
        return MetaArray((n, n), input._data.dtype)
    rows, cols = input._data.shape
    length = max(0, min(rows, cols - diagonal)) if diagonal >= 0 else max(0, min(rows + diagonal, cols))
    return MetaArray((length,), input._data.dtype)


def _diag_cpu(input, diagonal=0):
    data = input._data
    if data.ndim == 1:
        return np.diag(data, diagonal)
    return _fresh(np.diagonal(data, diagonal))


def _diag_decomp(input, diagonal=0):
    _diag_meta(input, diagonal)
    if input._data.ndim == 1:
        return diag_embed(input, diagonal)
    from .views import diagonal as diagonal_view

    return clone(diagonal_view(input, diagonal))


diag = defop("diag", _diag_meta, cpu=_diag_cpu, category=COMPOSITE, decomposition=_diag_decomp, has_out=True)


def _diag_embed_plan(input, offset, dim1, dim2):
    _require_tensor("diag_embed", "input", input)
    ndim = input._data.ndim + 1
    d1, d2 = wrap_dim(dim1, ndim, scalar_ok=False), wrap_dim(dim2, ndim, scalar_ok=False)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    shape = input._data.shape
    n = shape[-1] + abs(offset)
    rest = iter(shape[:-1])
    out_shape = tuple(n if k in (d1, d2) else next(rest) for k in range(ndim))
    return d1, d2, out_shape


def _diag_embed_meta(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose diagonals (over dims ``dim1`` and ``dim2``) hold the last dim of ``input``; zero elsewhere.

    The inverse of :func:`ember.diagonal` for the same ``offset``, ``dim1``, ``dim2``.

    Args:
        input (Tensor): at least 1-D; its last dim becomes the diagonals.
        offset (int): which diagonal (0 main, > 0 above, < 0 below).
        dim1, dim2 (int): the dims of the new matrices (in the output's dims).

    Returns:
        Tensor: one more dim than ``input``.

    Raises:
        RuntimeError: if ``dim1`` and ``dim2`` are the same dim.
        IndexError: for out-of-range dims.

    Example:
        >>> import ember
        >>> ember.diag_embed(ember.tensor([[1, 2]]))
        tensor([[[1, 0],
                 [0, 2]]])
    """
    _, _, out_shape = _diag_embed_plan(input, offset, dim1, dim2)
    return MetaArray(out_shape, input._data.dtype)


def _diag_embed_cpu(input, offset=0, dim1=-2, dim2=-1):
    d1, d2, out_shape = _diag_embed_plan(input, offset, dim1, dim2)
    data = input._data
    n = out_shape[d1]
    work = np.zeros(data.shape[:-1] + (n, n), data.dtype)
    ar = np.arange(data.shape[-1])
    work[..., ar + max(-offset, 0), ar + max(offset, 0)] = data
    return _fresh(np.moveaxis(work, (-2, -1), (d1, d2)))


def _diag_embed_decomp(input, offset=0, dim1=-2, dim2=-1):
    d1, d2, out_shape = _diag_embed_plan(input, offset, dim1, dim2)
    from .views import diagonal as diagonal_view

    out = zeros(out_shape, dtype=input.dtype, device=input.device)
    copy_(diagonal_view(out, offset, d1, d2), input)
    return out


diag_embed = defop("diag_embed", _diag_embed_meta, cpu=_diag_embed_cpu, category=COMPOSITE,
                   decomposition=_diag_embed_decomp)


def _diagflat_meta(input, offset=0):
    """``input`` flattened, placed on the ``offset``-th diagonal of a square matrix.

    Example:
        >>> import ember
        >>> ember.diagflat(ember.tensor([[1, 2]]))
        tensor([[1, 0],
                [0, 2]])
    """
    _require_tensor("diagflat", "input", input)
    n = math.prod(input._data.shape) + abs(offset)
    return MetaArray((n, n), input._data.dtype)


def _diagflat_decomp(input, offset=0):
    _require_tensor("diagflat", "input", input)
    return diag_embed(reshape(input, -1), offset)


diagflat = defop("diagflat", _diagflat_meta, cpu=lambda input, offset=0: np.diag(input._data.reshape(-1), offset),
                 category=COMPOSITE, decomposition=_diagflat_decomp)


def _trace_dtype(input):
    if input.dtype is D.bool:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    return D.int64 if input.dtype.category == D.INTEGRAL else input.dtype


def _trace_meta(input):
    """The sum of the main diagonal of a 2-D ``input`` (integer inputs sum as int64).

    Raises:
        RuntimeError: for tensors that are not 2-D.
        NotImplementedError: for bool tensors (as PyTorch).

    Example:
        >>> import ember
        >>> ember.trace(ember.tensor([[1, 2], [3, 4]]))
        tensor(5)
    """
    _require_tensor("trace", "input", input)
    if input._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input._data.ndim}")
    return MetaArray((), _trace_dtype(input).numpy_dtype)


def _trace_cpu(input):
    out_dtype = _trace_dtype(input).numpy_dtype
    diagonal = np.diagonal(input._data)
    compute = np.dtype(np.float32) if out_dtype in _LOW_FLOATS else out_dtype
    return np.asarray(diagonal.sum(dtype=compute)).astype(out_dtype)


def _trace_decomp(input):
    _trace_meta(input)
    from . import _registry
    from .views import diagonal as diagonal_view

    return _registry.get("sum")(diagonal_view(input))


trace = defop("trace", _trace_meta, cpu=_trace_cpu, category=COMPOSITE, decomposition=_trace_decomp)
