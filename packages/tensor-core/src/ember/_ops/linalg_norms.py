"""Norms: ``linalg.vector_norm`` (prim), ``linalg.matrix_norm`` and ``linalg.norm`` (composites).

``vector_norm`` reduces ``|x|`` with a sum of powers, a maximum or a count;
``matrix_norm`` is ``vector_norm`` for the Frobenius norm, sums of absolute
values along one dim then a max/min for the 1- and inf-norms, and singular
values (``linalg.svdvals``) for the 2-norm and the nuclear norm; ``norm``
picks one of the two from ``ord`` and ``dim`` as PyTorch does.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import array_namespace
from ._array_module import as_array as _as_array
from ._linalg_common import FLOAT_TYPES, check_float, check_matrix, linalg_op, real_dtype
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, registry
from ._shapes import wrap_dim
from .norms import _c_vector_norm  # the C++ 1-, 2- and inf-norms of large real CPU arrays

__all__ = []

METHODS: list[str] = []
ALIASES: dict[str, str] = {}

_HALF = frozenset(np.dtype(t) for t in (np.float16,))


def _is_half(np_dtype):
    return np_dtype in _HALF or np_dtype.name == "bfloat16"


def norm_dims(fn, dim, ndim):
    """``dim`` (None, an int or a sequence) as a tuple of non-negative dims; None and () mean all dims.

    A 0-dim tensor takes dim 0 or -1, as in PyTorch, but has no axis to reduce: its dims are ``()``
    (numpy refuses ``axis=0`` on a 0-d array; reducing over no axes leaves the one element).
    """
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, numbers.Integral):
        dims = (wrap_dim(int(dim), ndim),)
    else:
        dims = tuple(wrap_dim(int(d), ndim) for d in dim)
        for d in dims:
            if dims.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return dims if ndim > 0 else ()


def _reduced_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _norm_dtype(fn, x, dtype):
    """The dtype ``x`` is converted to before the norm (``dtype`` checked as PyTorch does)."""
    given = x._data.dtype
    if dtype is None:
        return given
    np_dtype = dtype.numpy_dtype
    if np_dtype.kind not in "fc":
        raise RuntimeError(f"{fn}: dtype should be floating point or complex, but got {_torch_name(dtype)}")
    if given.kind == "c" and np_dtype.kind != "c":
        raise RuntimeError(f"{fn}: dtype should be complex for complex inputs, but got {_torch_name(dtype)}")
    if given.kind != "c" and np_dtype.kind == "c":
        raise RuntimeError(f"{fn}: dtype should be real for real inputs, but got {_torch_name(dtype)}")
    return np_dtype


def _check_ord_number(fn, ord):
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise TypeError(f"{fn}(): argument 'ord' must be Number, not {type(ord).__name__}")


# -- vector_norm -----------------------------------------------------------------------------------


def _vector_norm_meta(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ``ord``-norm of ``x`` over ``dim`` (all elements by default).

    ``ord``: ``inf`` is ``max(|x|)``, ``-inf`` ``min(|x|)``, 0 the count of nonzeros, any other number
    ``p`` gives ``sum(|x|**p)**(1/p)``. Computed with numpy (CuPy on CUDA) reductions, in float32 for
    float16/bfloat16 input.

    Args:
        x (Tensor): any shape; float or complex (float16, bfloat16, float32, float64, complex64, complex128).
        ord (float): the order (default 2).
        dim (int or tuple of ints, optional): the dims to reduce; None or ``()`` reduce all.
        keepdim (bool): keep the reduced dims with size 1.
        dtype (ember.dtype, optional): convert ``x`` to this dtype first (real for real ``x``, complex for
            complex ``x``).

    Returns:
        Tensor: real, of ``x``'s (or ``dtype``'s) precision.

    Raises:
        RuntimeError: for integer input, a wrong ``dtype``, a repeated dim, or ``ord`` < 0 or inf over an
            empty dim (no identity).
        IndexError: for a dim out of range.
        TypeError: for a non-number ``ord``.

    Example:
        >>> import ember
        >>> ember.linalg.vector_norm(ember.tensor([3., 4.]))
        tensor(5.)
    """
    fn = "linalg.vector_norm"
    _check_ord_number("linalg_vector_norm", ord)
    given = x._data.dtype
    if given not in FLOAT_TYPES and not _is_half(given):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. "
                           f"Got {_torch_name(D.from_numpy_dtype(given))}")
    np_dtype = _norm_dtype(fn, x, dtype)
    shape = x._data.shape
    dims = norm_dims(fn, dim, len(shape))
    if ord < 0 or math.isinf(ord):
        for d in dims:
            if shape[d] == 0:
                what = "inf" if ord == math.inf else ("-inf" if ord == -math.inf else f"{ord:g}")
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {what} norm on the dimension {d}because this dimension "
                    "is empty and the operation does not have an identity")
    return MetaArray(_reduced_shape(shape, dims, keepdim), real_dtype(np_dtype))


def vector_norm_arrays(a, ord, dims, keepdim):
    """The ``ord``-norm of ``a`` over ``dims`` (arrays; the result is real)."""
    xp = array_namespace(a)
    out_dtype = real_dtype(a.dtype)
    r = _c_vector_norm(a, float(ord), tuple(sorted(dims)), keepdim)
    if r is not None:
        return r.astype(out_dtype, copy=False)
    if _is_half(a.dtype):
        a = a.astype(np.float32)
    m = xp.abs(a)
    # a 0-dim tensor has one virtual dim (dim 0 or -1), which numpy and CuPy reductions refuse: reduce all
    dims = tuple(dims) if a.ndim else None
    if ord == 2:
        r = xp.sqrt(xp.sum(m * m, axis=dims, keepdims=keepdim))
    elif ord == math.inf:
        r = xp.max(m, axis=dims, keepdims=keepdim)
    elif ord == -math.inf:
        r = xp.min(m, axis=dims, keepdims=keepdim)
    elif ord == 0:
        r = xp.sum(m != 0, axis=dims, keepdims=keepdim).astype(m.dtype)
    elif ord == 1:
        r = xp.sum(m, axis=dims, keepdims=keepdim)
    else:
        r = xp.sum(m**ord, axis=dims, keepdims=keepdim) ** (1.0 / ord)
    return _as_array(r).astype(out_dtype, copy=False)


def _vector_norm_cpu(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    a = x._data
    np_dtype = _norm_dtype("linalg.vector_norm", x, dtype)
    if np_dtype != a.dtype:
        a = a.astype(np_dtype)
    return vector_norm_arrays(a, ord, norm_dims("linalg.vector_norm", dim, a.ndim), keepdim)


linalg_vector_norm = linalg_op("linalg_vector_norm", _vector_norm_meta, _vector_norm_cpu)


# -- matrix_norm -----------------------------------------------------------------------------------

_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _matrix_dims(fn, A, ord, dim):
    check_matrix(fn, A)
    if isinstance(ord, str):
        if ord not in ("fro", "nuc"):
            raise RuntimeError(f"{fn}: Order {ord} not supported.")
    else:
        _check_ord_number(fn, ord)
        if ord not in _MATRIX_ORDS:
            raise RuntimeError(f"{fn}: Order {ord:g} not supported.")
    if isinstance(dim, numbers.Integral) or len(dim) != 2:
        shown = dim if isinstance(dim, numbers.Integral) else tuple(dim)
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {shown}")
    ndim = A._data.ndim
    d0, d1 = wrap_dim(int(dim[0]), ndim), wrap_dim(int(dim[1]), ndim)
    if d0 == d1:
        raise RuntimeError(f"{fn}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def _matrix_norm_meta(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix ``ord``-norm of ``A`` over the two dims ``dim``.

    ``"fro"``: Frobenius (``vector_norm`` over both dims); ``"nuc"``: the sum of singular values; 2/-2: the
    largest/smallest singular value (LAPACK ``gesdd`` through :func:`ember.linalg.svdvals`); 1/-1: the
    max/min column sum of ``|A|``; inf/-inf: the max/min row sum of ``|A|``.

    Args:
        A (Tensor): at least two dims, float or complex.
        ord (str or float): ``"fro"`` (default), ``"nuc"``, 1, -1, 2, -2, inf or -inf.
        dim (tuple of 2 ints): the matrix dims (default the last two).
        keepdim (bool): keep the reduced dims with size 1.
        dtype (ember.dtype, optional): convert ``A`` to this dtype first.

    Returns:
        Tensor: real.

    Raises:
        RuntimeError: for an unsupported ``ord``, a ``dim`` that is not two different dims, fewer than two
            dims or a non-float dtype.

    Example:
        >>> import ember
        >>> ember.linalg.matrix_norm(ember.tensor([[1., -2.], [3., 4.]]), ord=1)
        tensor(6.)
    """
    fn = "linalg.matrix_norm"
    d0, d1 = _matrix_dims(fn, A, ord, dim)
    check_float(fn, A)
    np_dtype = _norm_dtype(fn, A, dtype)
    return MetaArray(_reduced_shape(A._data.shape, (d0, d1), keepdim), real_dtype(np_dtype))


def _matrix_norm_decomp(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    d0, d1 = _matrix_dims("linalg.matrix_norm", A, ord, dim)
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return registry["linalg_vector_norm"](A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = registry["linalg_svdvals"](registry["movedim"](A, (d0, d1), (-2, -1)))
        if ord == "nuc":
            r = registry["sum"](s, -1)
        elif s.shape[-1] == 0:
            r = registry["sum"](s, -1)  # an empty matrix: 0, as PyTorch
        else:
            r = registry["amax" if ord == 2 else "amin"](s, -1)
        if keepdim:
            lo, hi = sorted((d0, d1))
            r = registry["unsqueeze"](registry["unsqueeze"](r, lo), hi)
        return r
    # 1-norms sum |A| down the columns (over rows, d0) then take the max over d1; inf-norms the other way
    summed, other = (d0, d1) if abs(ord) == 1 else (d1, d0)
    sums = registry["sum"](registry["abs"](A), summed, True)
    if sums.shape[other] == 0:
        r = registry["sum"](sums, other, True)
    else:
        r = registry["amax" if ord > 0 else "amin"](sums, other, True)
    if not keepdim:
        r = registry["squeeze"](r, (d0, d1))
    return r


linalg_matrix_norm = linalg_op("linalg_matrix_norm", _matrix_norm_meta, None, category=COMPOSITE,
                               decomposition=_matrix_norm_decomp)


# -- norm --------------------------------------------------------------------------------------------


def _norm_plan(A, ord, dim):
    """``("vector" | "matrix", dims)`` for ``linalg.norm``'s arguments, with PyTorch's errors."""
    fn = "linalg.norm"
    ndim = A._data.ndim
    if dim is not None:
        dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
        if len(dims) == 1:
            if isinstance(ord, str):
                raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dims[0]}")
            return "vector", dims
        if len(dims) == 2:
            return "matrix", dims
        raise RuntimeError(f"{fn}: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return "vector", None
    if ndim == 1 and not isinstance(ord, str):
        return "vector", None
    if ndim <= 2:  # a string ord on a vector: matrix_norm refuses it
        return "matrix", (-2, -1)
    raise RuntimeError(f"{fn}: If dim is not specified but ord is, the input must be 1D or 2D. Got {ndim}D.")


def _norm_meta(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector or matrix norm of ``A``, chosen from ``ord`` and ``dim`` as in PyTorch.

    * ``dim`` an int (or a 1-tuple): :func:`vector_norm` over it (``ord`` default 2);
    * ``dim`` a 2-tuple: :func:`matrix_norm` over it (``ord`` default ``"fro"``);
    * ``dim`` None: with ``ord`` None the 2-norm of all elements; else ``A`` must be 1-D (a vector norm)
      or 2-D (a matrix norm).

    Args:
        A (Tensor): float or complex.
        ord (str or float, optional): the order (see :func:`vector_norm`, :func:`matrix_norm`).
        dim (int or tuple of ints, optional): the dims to reduce.
        keepdim (bool): keep the reduced dims with size 1.
        dtype (ember.dtype, optional): convert ``A`` to this dtype first.

    Returns:
        Tensor: real.

    Raises:
        RuntimeError: for ``ord``/``dim`` combinations PyTorch refuses, and as :func:`vector_norm` and
            :func:`matrix_norm` do.

    Example:
        >>> import ember
        >>> ember.linalg.norm(ember.tensor([[3., 0.], [0., 4.]]))
        tensor(5.)
    """
    kind, dims = _norm_plan(A, ord, dim)
    if kind == "vector":
        return _vector_norm_meta(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
    return _matrix_norm_meta(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)


def _norm_decomp(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    kind, dims = _norm_plan(A, ord, dim)
    if kind == "vector":
        return registry["linalg_vector_norm"](A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
    return registry["linalg_matrix_norm"](A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)


linalg_norm = linalg_op("linalg_norm", _norm_meta, None, category=COMPOSITE, decomposition=_norm_decomp)
