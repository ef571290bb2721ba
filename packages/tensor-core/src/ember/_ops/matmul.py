"""Matrix products: matmul and its family (mm, bmm, mv, dot, vdot, inner, outer/ger, chain_matmul) and ``@``.

``matmul`` is the prim: a backend that implements it gets every other matrix
product through their decompositions (``mm``, ``bmm``, ``mv``, ``dot`` are
``matmul`` after their own argument checks; ``addmm`` and friends of
:mod:`ember._ops.addmm` scale and add; ``tensordot`` and ``einsum`` permute and
reshape their operands into batched matrix products).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._matmul_helpers import (
    _FLOAT32,
    _HALF_TYPES,
    _check_mv,
    _check_same_scalar_type,
    _check_tensor,
    _cname,
    _compute_array,
    _matmul_compute,
    _new_array,
    _no_bool,
    _op,
    _outer_compute,
    _tname,
)
from ._registry import COMPOSITE, PRIM, defop
from ._shapes import broadcast_shapes
from .pointwise import mul
from .views import reshape, t, unsqueeze

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


def _check_mm(fn, shape1, shape2, dt1, dt2):
    """PyTorch's checks of a matrix product ``(n x k) @ (k x m)``."""
    if dt1 != dt2:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_cname(dt1)} != {_cname(dt2)}")
    if shape1[1] != shape2[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({shape1[0]}x{shape1[1]} and {shape2[0]}x{shape2[1]})"
        )
    _no_bool(fn, dt1, shape1[0], shape1[1], shape2[1])


def _check_dot(fn, a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"dot : expected both vectors to have same dtype, but found {_tname(a.dtype)} and {_tname(b.dtype)}"
        )
    n, m = a.shape[0], b.shape[0]
    if n != m:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same number of elements, "
            f"but got {n} and {m} elements respectively"
        )
    _no_bool(fn, a.dtype)


def _check_bmm_sizes(batch, k1, k2):
    if k1 != k2:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{batch}, {k1}] but got: [{batch}, {k2}]."
        )


def _matmul_arrays(a, b):
    """``a @ b`` on two numpy arrays of one dtype, through BLAS for float and complex dtypes.

    float16 and bfloat16 compute in float32 and round once.
    """
    dt = a.dtype
    if dt in _HALF_TYPES:
        return _matmul_compute(a.astype(_FLOAT32), b.astype(_FLOAT32)).astype(dt)
    return _matmul_compute(a, b)


# -- matmul: the prim --------------------------------------------------------------------


def _matmul_shape(a, b):
    """Output shape and dtype of ``a @ b`` (numpy arrays or meta arrays), after PyTorch's checks."""
    da, db = a.ndim, b.ndim
    if da == 2 and db == 2:
        _check_mm("matmul", a.shape, b.shape, a.dtype, b.dtype)
        return (a.shape[0], b.shape[1]), a.dtype
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        _check_dot("matmul", a, b)
        return (), a.dtype
    if db == 1:  # a matrix (or a batch of them, folded into rows) times a vector
        rows = math.prod(a.shape[:-1])
        _check_mv("matmul", rows, a.shape[-1], b.shape[0], a.dtype, b.dtype)
        return a.shape[:-1], a.dtype
    if da == 1:
        if db == 2:
            _check_mm("matmul", (1, a.shape[0]), b.shape, a.dtype, b.dtype)
            return (b.shape[1],), a.dtype
    elif db == 2:  # a batch of matrices times one matrix: folded into one product
        _check_mm("matmul", (math.prod(a.shape[:-1]), a.shape[-1]), b.shape, a.dtype, b.dtype)
        return a.shape[:-1] + (b.shape[1],), a.dtype
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape = batch + (a.shape[-2:-1] if da > 1 else ()) + (b.shape[-1],)
    _check_bmm_sizes(math.prod(batch), a.shape[-1], b.shape[-2])
    if da == 1:  # a vector times a batch: PyTorch folds it into a matrix-vector product
        _check_mv("matmul", math.prod(shape), a.shape[0], a.shape[0], b.dtype, a.dtype)
        return shape, a.dtype
    return shape, _bmm_dtype("matmul", a.dtype, b.dtype, shape, a.shape[-1])


def _bmm_dtype(fn, dt1, dt2, out_shape, k):
    """The dtype of a batched product after PyTorch's checks, which an empty product skips (taking the second
    operand's dtype)."""
    if 0 in out_shape or k == 0:
        return dt2
    _check_same_scalar_type(dt1, dt2)
    _no_bool(fn, dt1)
    return dt1


def _matmul_meta(input, other):
    """Matrix product of two tensors, with PyTorch's (and numpy's) broadcasting rules.

    * 1-D and 1-D: the dot product, a 0-d tensor;
    * 2-D and 2-D: the matrix product;
    * 1-D first: a 1 is prepended to its shape for the product and removed after; 1-D second: appended and removed;
    * more than 2 dims on either side: a batch of matrix products, the batch dims (all but the last two)
      broadcasting against each other.

    Args:
        input (Tensor): the first operand, at least 1-D.
        other (Tensor): the second operand, at least 1-D, of the same dtype.

    Returns:
        Tensor: the product, of the operands' dtype.

    Raises:
        RuntimeError: for 0-d operands, operands of different dtypes, sizes that cannot be multiplied
            (naming them) or batch dims that do not broadcast.
        NotImplementedError: for bool tensors, as in PyTorch.
        TypeError: if an argument is not a tensor.

    Example:
        >>> import ember
        >>> a = ember.tensor([[1., 2.], [3., 4.]])
        >>> ember.matmul(a, ember.tensor([1., 1.]))
        tensor([3., 7.])
        >>> (a @ a).tolist()
        [[7.0, 10.0], [15.0, 22.0]]
        >>> ember.matmul(ember.ones(5, 1, 2, 3), ember.ones(4, 3, 6)).shape
        ember.Size([5, 4, 2, 6])
    """
    if type(input) is Tensor and type(other) is Tensor:
        a, b = input._data, other._data
        if a.ndim == 2 and b.ndim == 2 and a.dtype is b.dtype and a.shape[1] == b.shape[0] and a.dtype.kind != "b":
            return MetaArray((a.shape[0], b.shape[1]), a.dtype)  # the common case, checked inline
    _check_tensor("matmul", "input", 1, input)
    _check_tensor("matmul", "other", 2, other)
    return MetaArray(*_matmul_shape(input._data, other._data))


def _matmul_cpu(input, other):
    a, b = input._data, other._data
    if a.dtype != b.dtype:  # an empty batched product of mixed dtypes: PyTorch gives the second one's
        return _array_namespace(a).zeros(_matmul_shape(a, b)[0], b.dtype)
    return _matmul_arrays(a, b)


matmul = defop("matmul", _matmul_meta, cpu=_matmul_cpu, category=PRIM, has_out=True)


# mm/bmm/mv/dot compute as matmul; each kernel keeps its op's parameter names, which keyword calls
# (ember.mm(a, mat2=b)) pass through
def _mm_cpu(input, mat2):
    return _matmul_cpu(input, mat2)


def _mv_cpu(input, vec):
    return _matmul_cpu(input, vec)


def _dot_cpu(input, tensor):
    return _matmul_cpu(input, tensor)


# -- mm, bmm, mv, dot, vdot, inner, outer ---------------------------------------------------


def _mm_meta(input, mat2):
    """Matrix product of two 2-D tensors (no broadcasting: see :func:`ember.matmul` for that).

    Args:
        input (Tensor): ``(n, k)``.
        mat2 (Tensor): ``(k, m)``, of the same dtype.

    Returns:
        Tensor: ``(n, m)``.

    Raises:
        RuntimeError: if an operand is not 2-D, for different dtypes, or when the sizes don't match.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.mm(ember.tensor([[1, 2], [3, 4]]), ember.tensor([[1, 0], [0, 2]]))
        tensor([[1, 4],
                [3, 8]])
    """
    _check_tensor("mm", "input", 1, input)
    _check_tensor("mm", "mat2", 2, mat2)
    a, b = input._data, mat2._data
    if a.ndim != 2:
        raise RuntimeError(f"self must be a matrix, got {a.ndim}-D tensor")
    if b.ndim != 2:
        raise RuntimeError(f"mat2 must be a matrix, got {b.ndim}-D tensor")
    _check_mm("mm", a.shape, b.shape, a.dtype, b.dtype)
    return MetaArray((a.shape[0], b.shape[1]), a.dtype)


def _mm_decomp(input, mat2):
    _mm_meta(input, mat2)  # a decomposition runs without the meta function: check here
    return matmul(input, mat2)


mm = defop("mm", _mm_meta, cpu=_mm_cpu, category=COMPOSITE, decomposition=_mm_decomp, has_out=True)


def _bmm_meta(input, mat2):
    """Batched matrix product of two 3-D tensors with the same batch size (no broadcasting).

    Args:
        input (Tensor): ``(b, n, k)``.
        mat2 (Tensor): ``(b, k, m)``, of the same dtype.

    Returns:
        Tensor: ``(b, n, m)``.

    Raises:
        RuntimeError: if an operand is not 3-D, for different dtypes or sizes that don't match.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.bmm(ember.ones(2, 3, 4), ember.ones(2, 4, 5)).shape
        ember.Size([2, 3, 5])
    """
    _check_tensor("bmm", "input", 1, input)
    _check_tensor("bmm", "mat2", 2, mat2)
    a, b = input._data, mat2._data
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, {a.shape[2]}] but got: "
            f"[{b.shape[0]}, {b.shape[1]}]."
        )
    shape = (a.shape[0], a.shape[1], b.shape[2])
    return MetaArray(shape, _bmm_dtype("bmm", a.dtype, b.dtype, shape, a.shape[2]))


def _bmm_decomp(input, mat2):
    _bmm_meta(input, mat2)
    return matmul(input, mat2)


bmm = defop("bmm", _bmm_meta, cpu=_mm_cpu, category=COMPOSITE, decomposition=_bmm_decomp, has_out=True)


def _mv_meta(input, vec):
    """Product of a matrix and a vector.

    Args:
        input (Tensor): ``(n, m)``.
        vec (Tensor): ``(m,)``, of the same dtype.

    Returns:
        Tensor: ``(n,)``.

    Raises:
        RuntimeError: for other shapes or different dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.mv(ember.tensor([[1., 2.], [3., 4.]]), ember.tensor([1., -1.]))
        tensor([-1., -1.])
    """
    _check_tensor("mv", "input", 1, input)
    _check_tensor("mv", "vec", 2, vec)
    a, v = input._data, vec._data
    if a.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {v.ndim}")
    _check_mv("mv", a.shape[0], a.shape[1], v.shape[0], a.dtype, v.dtype)
    return MetaArray((a.shape[0],), a.dtype)


def _mv_decomp(input, vec):
    _mv_meta(input, vec)
    return matmul(input, vec)


mv = defop("mv", _mv_meta, cpu=_mv_cpu, category=COMPOSITE, decomposition=_mv_decomp, has_out=True)


def _dot_meta(input, tensor):
    """Dot product of two 1-D tensors of the same size and dtype (no conjugation: see :func:`ember.vdot`).

    Args:
        input (Tensor): ``(n,)``.
        tensor (Tensor): ``(n,)``.

    Returns:
        Tensor: a 0-d tensor.

    Raises:
        RuntimeError: for tensors that are not 1-D, of different sizes or dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.dot(ember.tensor([2, 3]), ember.tensor([2, 1]))
        tensor(7)
    """
    _check_tensor("dot", "input", 1, input)
    _check_tensor("dot", "tensor", 2, tensor)
    _check_dot("dot", input._data, tensor._data)
    return MetaArray((), input._data.dtype)


def _dot_decomp(input, tensor):
    _dot_meta(input, tensor)
    return matmul(input, tensor)


dot = defop("dot", _dot_meta, cpu=_dot_cpu, category=COMPOSITE, decomposition=_dot_decomp, has_out=True)


def _vdot_meta(input, other):
    """Dot product of two 1-D tensors, conjugating the first: ``sum(conj(input) * other)``.

    Args:
        input (Tensor): ``(n,)``.
        other (Tensor): ``(n,)``, of the same dtype.

    Returns:
        Tensor: a 0-d tensor.

    Raises:
        RuntimeError: for tensors that are not 1-D, of different sizes or dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.vdot(ember.tensor([1 + 2j]), ember.tensor([3 + 1j]))
        tensor(5.-5.j)
    """
    _check_tensor("vdot", "input", 1, input)
    _check_tensor("vdot", "other", 2, other)
    _check_dot("vdot", input._data, other._data)
    return MetaArray((), input._data.dtype)


def _vdot_cpu(input, other):
    a = input._data
    if a.dtype.kind == "c":
        a = np.conj(a)
    return _matmul_arrays(a, other._data)


def _vdot_decomp(input, other):
    _vdot_meta(input, other)
    if input.dtype.is_complex:
        input = _op("conj_physical")(input)
    return matmul(input, other)


vdot = defop("vdot", _vdot_meta, cpu=_vdot_cpu, category=COMPOSITE, decomposition=_vdot_decomp, has_out=True)


def _inner_meta(input, other):
    """Inner product over the last dimension: ``sum(input[..., i] * other[..., i])`` for every pair of rows.

    A 0-d operand multiplies instead (with type promotion, as :func:`ember.mul`).

    Args:
        input (Tensor): ``(*a, k)`` or 0-d.
        other (Tensor): ``(*b, k)`` or 0-d; the same dtype unless one is 0-d.

    Returns:
        Tensor: ``(*a, *b)``.

    Raises:
        RuntimeError: if the last dimensions differ or the dtypes differ.
        NotImplementedError: for bool tensors (unless one is 0-d).

    Example:
        >>> import ember
        >>> ember.inner(ember.tensor([[1., 2.], [3., 4.]]), ember.tensor([1., 1.]))
        tensor([3., 7.])
    """
    _check_tensor("inner", "input", 1, input)
    _check_tensor("inner", "other", 2, other)
    a, b = input._data, other._data
    if a.ndim == 0 or b.ndim == 0:
        return MetaArray(broadcast_shapes(a.shape, b.shape), D.result_type_of((input, other)).numpy_dtype)
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes {list(a.shape)} and "
            f"{list(b.shape)}"
        )
    shape = a.shape[:-1] + b.shape[:-1]
    _no_bool("inner", a.dtype, a.shape[-1], *shape)
    return MetaArray(shape, a.dtype)


def _inner_cpu(input, other):
    a, b = input._data, other._data
    if a.ndim == 0 or b.ndim == 0:
        np_dtype = D.result_type_of((input, other)).numpy_dtype
        return _new_array(np.multiply(_compute_array(a, np_dtype), _compute_array(b, np_dtype))).astype(np_dtype)
    k = a.shape[-1]
    a2 = a.reshape(math.prod(a.shape[:-1]), k)
    b2 = b.reshape(math.prod(b.shape[:-1]), k)
    return _matmul_arrays(a2, b2.T).reshape(a.shape[:-1] + b.shape[:-1])


def _inner_decomp(input, other):
    meta = _inner_meta(input, other)
    a, b = input._data, other._data
    if a.ndim == 0 or b.ndim == 0:
        return mul(input, other)
    k = a.shape[-1]
    a2 = reshape(input, (math.prod(a.shape[:-1]), k))
    b2 = reshape(other, (math.prod(b.shape[:-1]), k))
    return reshape(matmul(a2, t(b2)), meta.shape)


inner = defop("inner", _inner_meta, cpu=_inner_cpu, category=COMPOSITE, decomposition=_inner_decomp, has_out=True)


def _outer_checks(input, vec2):
    _check_tensor("outer", "input", 1, input)
    _check_tensor("outer", "vec2", 2, vec2)
    for name, x in (("self", input), ("vec2", vec2)):
        if x._data.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {x._data.ndim}-D")
    return D.result_type_of((input, vec2))


def _outer_meta(input, vec2):
    """Outer product of two vectors: ``out[i, j] = input[i] * vec2[j]``, with type promotion.

    Args:
        input (Tensor): ``(n,)``.
        vec2 (Tensor): ``(m,)``.

    Returns:
        Tensor: ``(n, m)``, of the promoted dtype.

    Raises:
        RuntimeError: if an argument is not 1-D.

    Example:
        >>> import ember
        >>> ember.outer(ember.tensor([1, 2]), ember.tensor([1, 10, 100]))
        tensor([[  1,  10, 100],
                [  2,  20, 200]])
    """
    dtype = _outer_checks(input, vec2)
    return MetaArray((input._data.shape[0], vec2._data.shape[0]), dtype.numpy_dtype)


def _outer_arrays(a, b, np_dtype):
    return _outer_compute(a, b, np_dtype).astype(np_dtype, copy=False)


def _outer_cpu(input, vec2):
    np_dtype = D.result_type_of((input, vec2)).numpy_dtype
    return _outer_arrays(input._data, vec2._data, np_dtype)


def _outer_decomp(input, vec2):
    _outer_meta(input, vec2)
    return mul(unsqueeze(input, 1), vec2)


outer = defop("outer", _outer_meta, cpu=_outer_cpu, category=COMPOSITE, decomposition=_outer_decomp, has_out=True)


def _ger_meta(input, vec2):
    """Alias of :func:`ember.outer`.

    Example:
        >>> import ember
        >>> ember.ger(ember.tensor([1., 2.]), ember.tensor([3., 4.]))
        tensor([[3., 4.],
                [6., 8.]])
    """
    return _outer_meta(input, vec2)


ger = defop("ger", _ger_meta, cpu=_outer_cpu, category=COMPOSITE, decomposition=_outer_decomp, has_out=True)


def _chain_checks(matrices):
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        raise TypeError(f"expected Tensor as element 0 in argument 0, but got {type(matrices[0]).__name__}")
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if not isinstance(m, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(m).__name__}")
        if m._data.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m._data.ndim}, expected 2 instead.")
    first = matrices[0]._data
    for i, m in enumerate(matrices[1:], 1):
        if m._data.dtype != first.dtype:
            raise RuntimeError(
                f"multi_dot(): all tensors must have be the same dtype but tensor 0 is {_cname(first.dtype)} and "
                f"tensor {i} {_cname(m._data.dtype)}"
            )
    for i in range(len(matrices) - 1):
        s1, s2 = matrices[i]._data.shape, matrices[i + 1]._data.shape
        if s1[1] != s2[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {list(s1)} and {list(s2)} cannot be multiplied"
            )
    if len(matrices) > 1:
        _no_bool("chain_matmul", first.dtype, *(n for m in matrices for n in m._data.shape))


def _chain_meta(*matrices):
    """Product of a chain of 2-D tensors, multiplied in the order that needs the fewest operations.

    Args:
        *matrices (Tensor): ``(d0, d1), (d1, d2), ...``, all of one dtype.

    Returns:
        Tensor: ``(d0, dn)`` (a copy of the matrix when only one is given).

    Raises:
        RuntimeError: for no matrices, tensors that are not 2-D, different dtypes or sizes that don't chain.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.chain_matmul(ember.ones(2, 3), ember.ones(3, 4), ember.ones(4, 1))
        tensor([[12.],
                [12.]])
    """
    _chain_checks(matrices)
    return MetaArray((matrices[0]._data.shape[0], matrices[-1]._data.shape[1]), matrices[0]._data.dtype)


def _chain_order(dims):
    """Split points of the cheapest parenthesisation of matrices with sizes ``dims[i] x dims[i + 1]``."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain_cpu(*matrices):
    arrays = [m._data for m in matrices]
    if len(arrays) == 1:
        return arrays[0].copy()
    if len(arrays) == 2:
        return _matmul_arrays(arrays[0], arrays[1])
    split = _chain_order([arrays[0].shape[0]] + [a.shape[1] for a in arrays])

    def product(i, j):
        if i == j:
            return arrays[i]
        k = split[i][j]
        return _matmul_arrays(product(i, k), product(k + 1, j))

    return product(0, len(arrays) - 1)


def _chain_decomp(*matrices):
    _chain_meta(*matrices)
    if len(matrices) == 1:
        return _op("clone")(matrices[0])
    split = _chain_order([matrices[0].shape[0]] + [m.shape[1] for m in matrices])

    def product(i, j):
        if i == j:
            return matrices[i]
        k = split[i][j]
        return matmul(product(i, k), product(k + 1, j))

    return product(0, len(matrices) - 1)


chain_matmul = defop("chain_matmul", _chain_meta, cpu=_chain_cpu, category=COMPOSITE, decomposition=_chain_decomp,
                     has_out=True)


# -- operators ------------------------------------------------------------------------------


def _matmul_operator(self, other):
    if not isinstance(other, Tensor):
        return NotImplemented
    return matmul(self, other)


def _rmatmul_operator(self, other):
    if not isinstance(other, Tensor):
        return NotImplemented
    return matmul(other, self)


def _imatmul_operator(self, other):
    # PyTorch's ``a @= b`` rebinds ``a`` to a new tensor (it is not an in-place op), and so does ember.
    if not isinstance(other, Tensor):
        return NotImplemented
    return matmul(self, other)


#: Dunder operators of this module (installed by ember._tensor_methods).
OPERATORS = {"__matmul__": _matmul_operator, "__rmatmul__": _rmatmul_operator, "__imatmul__": _imatmul_operator}
