"""Products of whole tensors: tensordot, kron and cross."""

from __future__ import annotations

import math
import os
import sys
import warnings

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._float_errors import quiet
from ._matmul_helpers import (
    _HALF_TYPES,
    _check_same_scalar_type,
    _check_tensor,
    _compute_array,
    _matmul_compute,
    _no_bool,
    _op,
    _round_to,
)
from ._registry import COMPOSITE, defop
from ._shapes import broadcast_shapes, wrap_dim
from .matmul import matmul
from .pointwise import mul, sub
from .views import narrow, permute, reshape

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["kron", "cross"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- tensordot, kron, cross, cdist, chain_matmul --------------------------------------------------


def _tensordot_dims(a, b, dims):
    """``dims`` as two lists of non-negative dims of ``a`` and ``b``, after PyTorch's checks."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, bool) or not isinstance(dims, (int, list, tuple)):
        raise RuntimeError(
            "tensordot expects dims to be int or tuple[list[int], list[int]] or list[list[int]] containing two "
            f"lists, but got dims={dims}"
        )
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        given_a, given_b = list(range(-dims, 0)), list(range(dims))
    else:
        if len(dims) != 2:
            raise ValueError(f"not enough values to unpack (expected 2, got {len(dims)})")
        da, db = dims
        if isinstance(da, int) or isinstance(db, int):
            raise TypeError("tensordot(): argument 'dims_self' (position 3) must be tuple of ints, not int")
        given_a, given_b = list(da), list(db)
        if len(given_a) != len(given_b):
            raise RuntimeError("both dimension lists should have same length")
    dims_a = [wrap_dim(d, a.ndim) for d in given_a]
    dims_b = [wrap_dim(d, b.ndim) for d in given_b]
    for dims_x in (dims_a, dims_b):
        for d in dims_x:
            if dims_x.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    for ga, gb, d1, d2 in zip(given_a, given_b, dims_a, dims_b):
        s1, s2 = a.shape[d1], b.shape[d2]
        if s1 != s2 and s1 != 1 and s2 != 1:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {s1} in dim {ga} and second has size {s2} "
                f"in dim {gb}"
            )
    return dims_a, dims_b


def _tensordot_meta(a, b, dims=2):
    """Contraction of ``a`` and ``b`` over the given dimensions (a generalised matrix product).

    Args:
        a (Tensor): the first operand.
        b (Tensor): the second operand, of the same dtype.
        dims (int or tuple[list[int], list[int]]): an int ``d`` contracts the last ``d`` dims of ``a`` with the
            first ``d`` of ``b``; two lists name the dims to contract pairwise. Contracted sizes must match
            (or be 1).

    Returns:
        Tensor: the free dims of ``a`` followed by the free dims of ``b``.

    Raises:
        RuntimeError: for bad ``dims``, sizes that don't match or different dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.tensordot(ember.ones(3, 4, 5), ember.ones(4, 5, 2), dims=2).shape
        ember.Size([3, 2])
        >>> ember.tensordot(ember.ones(3, 4), ember.ones(4, 3), dims=([0], [1])).shape
        ember.Size([4, 4])
    """
    _check_tensor("tensordot", "a", 1, a)
    _check_tensor("tensordot", "b", 2, b)
    x, y = a._data, b._data
    if x.dtype != y.dtype:
        raise RuntimeError("both inputs should have same dtype")
    dims_a, dims_b = _tensordot_dims(x, y, dims)
    shape = tuple(n for i, n in enumerate(x.shape) if i not in dims_a)
    shape += tuple(n for i, n in enumerate(y.shape) if i not in dims_b)
    _no_bool("tensordot", x.dtype, *shape, *(x.shape[d] for d in dims_a))
    return MetaArray(shape, x.dtype)


def _tensordot_cpu(a, b, dims=2):
    x, y = a._data, b._data
    dims_a, dims_b = _tensordot_dims(x, y, dims)
    np_dtype = x.dtype
    x, y = _compute_array(x, np_dtype), _compute_array(y, np_dtype)
    # a contracted size of 1 against a larger one: sum the other side over that dim first
    for da, db in zip(dims_a, dims_b):
        if x.shape[da] != y.shape[db]:
            if x.shape[da] == 1:
                y = y.sum(axis=db, keepdims=True, dtype=y.dtype)
            else:
                x = x.sum(axis=da, keepdims=True, dtype=x.dtype)
    free_a = [i for i in range(x.ndim) if i not in dims_a]
    free_b = [i for i in range(y.ndim) if i not in dims_b]
    k = math.prod(x.shape[d] for d in dims_a)
    left = x.transpose(free_a + dims_a).reshape(math.prod(x.shape[i] for i in free_a), k)
    right = y.transpose(dims_b + free_b).reshape(k, math.prod(y.shape[i] for i in free_b))
    out_shape = tuple(x.shape[i] for i in free_a) + tuple(y.shape[i] for i in free_b)
    return _matmul_compute(left, right).reshape(out_shape).astype(np_dtype, copy=False)


def _tensordot_decomp(a, b, dims=2):
    meta = _tensordot_meta(a, b, dims)
    dims_a, dims_b = _tensordot_dims(a._data, b._data, dims)
    sum_ = _op("sum")
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            if a.shape[da] == 1:
                b = sum_(b, db, keepdim=True, dtype=b.dtype)
            else:
                a = sum_(a, da, keepdim=True, dtype=a.dtype)
    free_a = [i for i in range(a.ndim) if i not in dims_a]
    free_b = [i for i in range(b.ndim) if i not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    left = reshape(permute(a, *(free_a + dims_a)), (math.prod(a.shape[i] for i in free_a), k))
    right = reshape(permute(b, *(dims_b + free_b)), (k, math.prod(b.shape[i] for i in free_b)))
    return reshape(matmul(left, right), meta.shape)


tensordot = defop("tensordot", _tensordot_meta, cpu=_tensordot_cpu, category=COMPOSITE,
                  decomposition=_tensordot_decomp, has_out=True)


def _kron_shapes(input, other):
    a, b = input._data.shape, other._data.shape
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    return a, b, tuple(x * y for x, y in zip(a, b))


def _kron_meta(input, other):
    """Kronecker product: every element of ``input`` scales a copy of ``other``, with type promotion.

    The operands are aligned on their trailing dims (the shorter shape is padded with leading 1s);
    the result's size in each dim is the product of the two sizes.

    Args:
        input (Tensor): the first operand.
        other (Tensor): the second operand.

    Returns:
        Tensor: shape ``[a_i * b_i]``, of the promoted dtype.

    Example:
        >>> import ember
        >>> ember.kron(ember.tensor([1, 2]), ember.tensor([1, 10]))
        tensor([ 1, 10,  2, 20])
    """
    _check_tensor("kron", "input", 1, input)
    _check_tensor("kron", "other", 2, other)
    return MetaArray(_kron_shapes(input, other)[2], _kron_dtype(input, other).numpy_dtype)


def _kron_dtype(input, other):
    """PyTorch promotes the two dtypes fully (a 0-d operand is reshaped first, so it counts as a dimensioned one)."""
    return D.promote_types(input.dtype, other.dtype)


def _interleaved(shape_a, shape_b):
    """Shapes that put ``a``'s dims at even and ``b``'s at odd positions, for a broadcasting product."""
    return (tuple(s for n in shape_a for s in (n, 1)), tuple(s for n in shape_b for s in (1, n)))


def _kron_cpu(input, other):
    np_dtype = _kron_dtype(input, other).numpy_dtype
    a_shape, b_shape, out_shape = _kron_shapes(input, other)
    ia, ib = _interleaved(a_shape, b_shape)
    a = _compute_array(input._data, np_dtype).reshape(ia)
    b = _compute_array(other._data, np_dtype).reshape(ib)
    return np.asarray(np.multiply(a, b)).reshape(out_shape).astype(np_dtype, copy=False)  # 0-d: numpy scalar


def _kron_decomp(input, other):
    _kron_meta(input, other)
    a_shape, b_shape, out_shape = _kron_shapes(input, other)
    ia, ib = _interleaved(a_shape, b_shape)
    return reshape(mul(reshape(input, ia), reshape(other, ib)), out_shape)


kron = defop("kron", _kron_meta, cpu=_kron_cpu, category=COMPOSITE, decomposition=_kron_decomp, has_out=True)


def _cross_dim(input, other, dim):
    """The dim ``cross`` works along (PyTorch's default: the first of ``input``'s dims of size 3)."""
    a, b = input._data, other._data
    if dim is None:
        warnings.warn(
            "Using ember.cross without specifying the dim arg is deprecated: the default (the first dim of size 3) "
            "will change to dim=-1, as linalg.cross has it. Pass dim explicitly.",
            UserWarning,
            stacklevel=_caller_stacklevel(),
        )
        dim = _default_cross_dim(a.shape)
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = wrap_dim(dim, a.ndim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[d]} and {b.shape[d]}"
        )
    return d


def _caller_stacklevel():
    """The ``stacklevel`` of the first frame outside the ember package, seen from the function calling this."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _default_cross_dim(shape):
    for i, n in enumerate(shape):
        if n == 3:
            return i
    raise RuntimeError("no dimension of size 3 in input")


def _cross_meta(input, other, dim=None):
    """Cross product of 3-vectors along ``dim``, broadcasting the other dims.

    Args:
        input (Tensor): size 3 along ``dim``.
        other (Tensor): the same number of dims and the same dtype; size 3 along ``dim``.
        dim (int, optional): the dim holding the vectors. When omitted, the first dim of ``input`` of size 3
            (PyTorch's deprecated default, with a warning; ``linalg.cross`` defaults to -1).

    Returns:
        Tensor: the broadcast shape of the operands.

    Raises:
        RuntimeError: if the size along ``dim`` is not 3, the number of dims differs, the other dims don't
            broadcast, or the dtypes differ.
        IndexError: for an out-of-range ``dim``.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.cross(ember.tensor([1., 0., 0.]), ember.tensor([0., 1., 0.]), dim=0)
        tensor([0., 0., 1.])
    """
    _check_tensor("cross", "input", 1, input)
    _check_tensor("cross", "other", 2, other)
    _cross_dim(input, other, dim)
    a, b = input._data, other._data
    shape = broadcast_shapes(a.shape, b.shape)
    _check_same_scalar_type(a.dtype, b.dtype)
    _no_bool("cross", a.dtype)
    return MetaArray(shape, a.dtype)


def _cross_cpu(input, other, dim=None):
    # integer products wrap and float ones overflow to inf, silently as in PyTorch
    return quiet(_cross_kernel, input, other, dim)


def _cross_kernel(input, other, dim):
    a, b = input._data, other._data
    # the meta function checked the arguments (and warned about a missing dim)
    d = _default_cross_dim(a.shape) if dim is None else wrap_dim(dim, a.ndim)
    np_dtype = a.dtype
    half = np_dtype in _HALF_TYPES
    a, b = _compute_array(a, np_dtype), _compute_array(b, np_dtype)
    a0, a1, a2 = (np.take(a, i, axis=d) for i in range(3))
    b0, b1, b2 = (np.take(b, i, axis=d) for i in range(3))

    def diff(x, y, z, w):
        p, q = x * y, z * w
        if half:  # each product rounds to the half type, as PyTorch's elementwise kernel does
            p, q = _round_to(p, np_dtype), _round_to(q, np_dtype)
        return p - q

    parts = (diff(a1, b2, a2, b1), diff(a2, b0, a0, b2), diff(a0, b1, a1, b0))
    return np.stack(parts, axis=d).astype(np_dtype, copy=False)


def _cross_decomp(input, other, dim=None):
    _cross_meta(input, other, dim)
    d = _default_cross_dim(input.shape) if dim is None else wrap_dim(dim, input.ndim)
    a = [narrow(input, d, i, 1) for i in range(3)]
    b = [narrow(other, d, i, 1) for i in range(3)]
    parts = [
        sub(mul(a[1], b[2]), mul(a[2], b[1])),
        sub(mul(a[2], b[0]), mul(a[0], b[2])),
        sub(mul(a[0], b[1]), mul(a[1], b[0])),
    ]
    return _op("cat")(parts, d)


cross = defop("cross", _cross_meta, cpu=_cross_cpu, category=COMPOSITE, decomposition=_cross_decomp,
              has_out=True)
