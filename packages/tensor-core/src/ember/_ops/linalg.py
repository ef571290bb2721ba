"""Linear algebra in the core namespace: matmul and its family, einsum, tensordot, kron, cross, cdist.

``matmul`` is the prim: a backend that implements it gets every other op of
this module through their decompositions (``mm``, ``bmm``, ``mv``, ``dot`` are
``matmul`` after their own argument checks; ``addmm`` and friends scale and
add; ``tensordot`` and ``einsum`` permute and reshape their operands into
batched matrix products). The CPU kernels hand float and complex products to
BLAS through ``numpy.matmul`` without copying inputs numpy can use as they
are; float16 and bfloat16 compute in float32 and round once at the end.

Argument checks follow PyTorch (error types and the shapes/dtypes in the
messages), including its dtype rules: the matrix products need operands of
one dtype and refuse bool; ``outer``, ``addr`` and ``kron`` promote.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import warnings

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._blas_threads import matmul as _blas_matmul
from ._float_errors import quiet
from ._pointwise_helpers import _torch_name, make_inplace, operand
from ._registry import COMPOSITE, PRIM, defop, registry
from ._shapes import broadcast_shapes, wrap_dim
from ._xp import array_namespace as _array_namespace
from ._xp import as_array as _as_array  # numpy or CuPy arrays (the CUDA backend)
from .pointwise import add, mul, sub
from .views import diagonal, narrow, permute, reshape, select, t, transpose, unsqueeze

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = [
    "matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger",
    "addmm", "addmm_", "addmv", "addmv_", "addbmm", "addbmm_", "baddbmm", "baddbmm_", "addr", "addr_",
    "kron", "cross",
]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}

_FROM_NP = D.from_numpy_dtype
_FLOAT32 = np.dtype(np.float32)
_HALF_TYPES = D.numpy_dtype_set((D.float16, D.bfloat16))  # (learns bfloat16 when ml_dtypes loads)

# C++ spellings of the dtypes, as PyTorch's "expected m1 and m2 to have the same dtype" messages print them.
_C_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
    "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double",
    "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}


def _op(name):
    """The registry op ``name``, looked up when a decomposition runs (ops of later families)."""
    return registry[name]


# -- argument checks shared by the meta functions ------------------------------------------


def _check_tensor(fn, arg, position, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be Tensor, not {type(x).__name__}")


def _tname(np_dtype):
    """PyTorch's scalar-type name (``Float``) of a numpy dtype."""
    return _torch_name(_FROM_NP(np_dtype))


def _cname(np_dtype):
    return _C_NAMES[_FROM_NP(np_dtype).name]


def _no_bool(fn, np_dtype, *sizes):
    """PyTorch has no bool kernels for matrix products; an empty product (a size of 0) needs none."""
    if np_dtype.kind == "b" and 0 not in sizes:
        raise NotImplementedError(f"\"{fn}\" not implemented for 'Bool'")


def _check_mm(fn, shape1, shape2, dt1, dt2):
    """PyTorch's checks of a matrix product ``(n x k) @ (k x m)``."""
    if dt1 != dt2:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_cname(dt1)} != {_cname(dt2)}")
    if shape1[1] != shape2[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({shape1[0]}x{shape1[1]} and {shape2[0]}x{shape2[1]})"
        )
    _no_bool(fn, dt1, shape1[0], shape1[1], shape2[1])


def _check_mv(fn, rows, cols, vec_len, mat_dt, vec_dt, input_dt=None, input_len=None):
    """PyTorch's checks of a matrix-vector product (``addmv`` names the input too)."""
    input_dt = vec_dt if input_dt is None else input_dt
    if not (input_dt == mat_dt == vec_dt):
        raise RuntimeError(
            f"addmv input tensors must have the same dtype, but got {_tname(input_dt)}, {_tname(mat_dt)}, and "
            f"{_tname(vec_dt)}"
        )
    input_len = rows if input_len is None else input_len
    if cols != vec_len or input_len not in (rows, 1):
        raise RuntimeError(f"size mismatch, got input ({input_len}), mat ({rows}x{cols}), vec ({vec_len})")
    _no_bool(fn, mat_dt, rows, cols)


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


def _check_same_scalar_type(dt1, dt2):
    if dt1 != dt2:
        raise RuntimeError(f"expected scalar type {_tname(dt1)} but found {_tname(dt2)}")


def _check_expandable(shape, target):
    """PyTorch's ``expand`` checks: ``shape`` (an ``input`` argument) must broadcast to ``target``."""
    shape, target = tuple(shape), tuple(target)
    if len(shape) > len(target):
        raise RuntimeError(
            f"expand(tensor of shape {list(shape)}, size={list(target)}): the number of sizes provided "
            f"({len(target)}) must be greater or equal to the number of dimensions in the tensor ({len(shape)})"
        )
    lead = len(target) - len(shape)
    for i, n in enumerate(shape):
        if n != 1 and n != target[lead + i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({target[lead + i]}) must match the existing size ({n}) at "
                f"non-singleton dimension {lead + i}.  Target sizes: {list(target)}.  Tensor sizes: {list(shape)}"
            )


def _check_scalar(fn, name, value, dtype):
    """``beta``/``alpha`` of the add-multiply ops: a number that the result dtype can take."""
    if isinstance(value, Tensor):
        value = value.item()
    if not isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        raise TypeError(f"{fn}(): argument '{name}' must be Number, not {type(value).__name__}")
    if isinstance(value, (complex, np.complexfloating)) and not dtype.is_complex and value.imag != 0:
        raise RuntimeError(f"value cannot be converted to type {_C_NAMES[dtype.name]} without overflow")
    return value


def _check_addr_scalar(name, value, dtype):
    """``addr``'s stricter rule (as PyTorch's pointwise ``add``): bool only for bool results, no floats for ints."""
    if isinstance(value, (bool, np.bool_)):
        if dtype is not D.bool:
            raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
    elif isinstance(value, (float, np.floating)) and dtype.category < D.FLOATING:
        raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point number.")


def _scalar_as(value, dtype):
    """``beta``/``alpha`` as the result dtype takes it: truncated for integers, truth value for bool."""
    if isinstance(value, Tensor):
        value = value.item()
    if dtype is D.bool:
        return bool(value)
    if dtype.category == D.INTEGRAL:
        return int(value.real) if isinstance(value, complex) else int(value)
    if not dtype.is_complex and isinstance(value, (complex, np.complexfloating)):
        return float(value.real)
    return value


# -- numpy kernels -----------------------------------------------------------------------


def _blas_ready(a):
    """``a`` itself when numpy's matmul can hand its matrices to BLAS as they are, else a C-contiguous copy.

    numpy falls back to a slow loop for matrices whose last two strides are
    neither row- nor column-major (e.g. every other column); a copy is far
    cheaper than that loop.
    """
    if a.ndim < 2:
        return a
    flags = a.flags
    if flags.c_contiguous or flags.f_contiguous:
        return a
    item = a.itemsize
    s0, s1 = a.strides[-2], a.strides[-1]
    n0, n1 = a.shape[-2], a.shape[-1]
    if (s1 == item and s0 >= n1 * item) or (s0 == item and s1 >= n0 * item):
        return a
    return a.copy(order="C")  # np.ascontiguousarray would pull a CuPy array to the host


def _new_array(r):
    """A numpy result as an ndarray that owns its memory (numpy returns scalars for 0-d products)."""
    return r if type(r) is np.ndarray else _as_array(r)


def _matmul_arrays(a, b):
    """``a @ b`` on two numpy arrays of one dtype, through BLAS for float and complex dtypes.

    float16 and bfloat16 compute in float32 and round once.
    """
    dt = a.dtype
    if dt in _HALF_TYPES:
        return _matmul_compute(a.astype(_FLOAT32), b.astype(_FLOAT32)).astype(dt)
    return _matmul_compute(a, b)


def _matmul_compute(a, b):
    """``a @ b`` on arrays already in a dtype the kernels compute in (not the half types).

    A batch of matrices times one matrix (or vector) is folded into a single
    product, ``(B*n, k) @ (k, m)``: one large BLAS call instead of B small ones.
    """
    if a.ndim > 2 and b.ndim <= 2:
        lead = a.shape[:-1]
        folded = _matmul_compute(a.reshape(math.prod(lead), a.shape[-1]), b)
        return folded.reshape(lead + b.shape[1:])
    if a.dtype.kind in "iu":
        return _int_matmul(a, b)
    return _new_array(_blas_matmul(_blas_ready(a), _blas_ready(b)))  # small products on one BLAS thread


_EXACT_IN_FLOAT64 = 2**53
_SMALL_PRODUCT = 1 << 15  # multiply-adds below which numpy's integer loop is as fast as a detour through BLAS


def _int_matmul(a, b):
    """Integer ``a @ b``: through float64 BLAS when every partial sum is exact there, else numpy's integer loop.

    numpy's integer matmul is an unblocked loop, tens of times slower than
    BLAS. When ``k * max|a| * max|b| < 2**53`` the float64 product is exact,
    and converting it back wraps around like C integers (and PyTorch) do.
    """
    k = a.shape[-1]
    if k == 0 or a.size * (b.shape[-1] if b.ndim > 1 else 1) < _SMALL_PRODUCT:
        return _new_array(np.matmul(a, b))
    bound = _abs_max(a) * _abs_max(b) * k
    if bound >= _EXACT_IN_FLOAT64:
        return _new_array(np.matmul(a, b))
    product = _new_array(np.matmul(a.astype(np.float64), b.astype(np.float64)))
    return product.astype(np.int64).astype(a.dtype, copy=False)


def _abs_max(a):
    if a.size == 0:
        return 0
    return max(abs(int(a.max())), abs(int(a.min())))


def _compute_array(a, np_dtype):
    """``a`` in the dtype that the kernels compute ``np_dtype`` results in (float32 for the half types)."""
    target = _FLOAT32 if np_dtype in _HALF_TYPES else np_dtype
    return a if a.dtype == target else a.astype(target)


def _blend(product, input, beta, alpha, np_dtype):
    """``beta * input + alpha * product`` in place of ``product`` (a fresh array), as ``np_dtype``.

    ``beta == 0`` ignores ``input`` entirely (NaN in it does not propagate), as in PyTorch.
    """
    dtype = _FROM_NP(np_dtype)
    beta, alpha = _scalar_as(beta, dtype), _scalar_as(alpha, dtype)
    work = product.dtype
    if product.ndim == 0:  # a numpy scalar: make it writable (CuPy's 0-d arrays already are)
        product = _array_namespace(product).array(product)
    if alpha != 1:
        np.multiply(product, operand(alpha, work), out=product, casting="unsafe")
    if beta != 0:
        inp = _compute_array(input._data, np_dtype)
        if beta != 1:
            inp = np.multiply(inp, operand(beta, work), dtype=work)
        np.add(product, inp, out=product, casting="unsafe")
    return product.astype(np_dtype, copy=False)


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


mm = defop("mm", _mm_meta, cpu=_matmul_cpu, category=COMPOSITE, decomposition=_mm_decomp, has_out=True)


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


bmm = defop("bmm", _bmm_meta, cpu=_matmul_cpu, category=COMPOSITE, decomposition=_bmm_decomp, has_out=True)


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


mv = defop("mv", _mv_meta, cpu=_matmul_cpu, category=COMPOSITE, decomposition=_mv_decomp, has_out=True)


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


dot = defop("dot", _dot_meta, cpu=_matmul_cpu, category=COMPOSITE, decomposition=_dot_decomp, has_out=True)


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


def _outer_compute(a, b, np_dtype):
    """The outer product of two vectors in the compute dtype of ``np_dtype`` results."""
    a, b = _compute_array(a, np_dtype), _compute_array(b, np_dtype)
    return np.multiply(a[:, None], b[None, :])


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


# -- addmm, addmv, addbmm, baddbmm, addr -------------------------------------------------------


def _blend_decomp(input, product, beta, alpha):
    """``beta * input + alpha * product`` in ember ops (``product`` has the result's shape and dtype)."""
    dtype = product.dtype
    beta, alpha = _scalar_as(beta, dtype), _scalar_as(alpha, dtype)
    if alpha != 1:
        product = mul(product, alpha)
    if beta == 0:
        return product
    return add(product, input if beta == 1 else mul(input, beta))


def _addmm_meta(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``, with ``input`` broadcast to the product's shape.

    With ``beta=0`` the input is ignored (NaN in it does not propagate). For
    integer tensors ``beta`` and ``alpha`` are truncated to integers, as in PyTorch.

    Args:
        input (Tensor): broadcastable to ``(n, m)``.
        mat1 (Tensor): ``(n, k)``.
        mat2 (Tensor): ``(k, m)``; all three of one dtype.
        beta (Number): multiplier of ``input``.
        alpha (Number): multiplier of the product.

    Returns:
        Tensor: ``(n, m)``.

    Raises:
        RuntimeError: for operands that are not matrices, sizes that don't match, an input that does not
            broadcast, or different dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> m = ember.tensor([[1., 2.], [3., 4.]])
        >>> ember.addmm(ember.tensor([10., 20.]), m, m, beta=0.5, alpha=2)
        tensor([[19., 30.],
                [35., 54.]])
    """
    for i, (name, x) in enumerate((("input", input), ("mat1", mat1), ("mat2", mat2))):
        _check_tensor("addmm", name, i + 1, x)
    a, b, c = input._data, mat1._data, mat2._data
    for name, x in (("mat1", b), ("mat2", c)):
        if x.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {x.ndim}-D tensor")
    if b.shape[1] != c.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({b.shape[0]}x{b.shape[1]} and {c.shape[0]}x{c.shape[1]})"
        )
    return _added_product_meta("addmm", a, b, c, (b.shape[0], c.shape[1]), beta, alpha)


def _added_product_meta(name, a, m1, m2, shape, beta, alpha):
    """The checks addmm and addbmm share once shapes are known: one dtype, ``a`` expandable, valid scalars."""
    if a.dtype != m2.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_tname(a.dtype)} and {_tname(m2.dtype)}")
    if m1.dtype != m2.dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_tname(m1.dtype)} and {_tname(m2.dtype)}")
    _check_expandable(a.shape, shape)
    _no_bool(name, m2.dtype)
    dtype = _FROM_NP(m2.dtype)
    _check_scalar(name, "beta", beta, dtype)
    _check_scalar(name, "alpha", alpha, dtype)
    return MetaArray(shape, m2.dtype)


def _addmm_cpu(input, mat1, mat2, *, beta=1, alpha=1):
    np_dtype = mat2._data.dtype
    product = _matmul_compute(_compute_array(mat1._data, np_dtype), _compute_array(mat2._data, np_dtype))
    return _blend(product, input, beta, alpha, np_dtype)


def _addmm_decomp(input, mat1, mat2, *, beta=1, alpha=1):
    _addmm_meta(input, mat1, mat2, beta=beta, alpha=alpha)
    return _blend_decomp(input, matmul(mat1, mat2), beta, alpha)


addmm = defop("addmm", _addmm_meta, cpu=_addmm_cpu, category=COMPOSITE, decomposition=_addmm_decomp, has_out=True)
make_inplace(addmm)


def _addmv_meta(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``, with ``input`` broadcast to ``(n,)``.

    Args:
        input (Tensor): ``(n,)``, ``(1,)`` or 0-d.
        mat (Tensor): ``(n, m)``.
        vec (Tensor): ``(m,)``; all three of one dtype.
        beta (Number): multiplier of ``input`` (0 ignores it).
        alpha (Number): multiplier of the product.

    Returns:
        Tensor: ``(n,)``.

    Raises:
        RuntimeError: for other shapes or different dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.addmv(ember.tensor([1., 1.]), ember.tensor([[1., 2.], [3., 4.]]), ember.tensor([1., 1.]), alpha=2)
        tensor([ 7., 15.])
    """
    for i, (name, x) in enumerate((("input", input), ("mat", mat), ("vec", vec))):
        _check_tensor("addmv", name, i + 1, x)
    a, m, v = input._data, mat._data, vec._data
    if m.ndim != 2 or v.ndim != 1 or a.ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {a.ndim}, {m.ndim}, {v.ndim}")
    input_len = a.shape[0] if a.ndim else 1
    _check_mv("addmv", m.shape[0], m.shape[1], v.shape[0], m.dtype, v.dtype, a.dtype, input_len)
    dtype = _FROM_NP(m.dtype)
    _check_scalar("addmv", "beta", beta, dtype)
    _check_scalar("addmv", "alpha", alpha, dtype)
    return MetaArray((m.shape[0],), m.dtype)


def _addmv_cpu(input, mat, vec, *, beta=1, alpha=1):
    np_dtype = mat._data.dtype
    product = _matmul_compute(_compute_array(mat._data, np_dtype), _compute_array(vec._data, np_dtype))
    return _blend(product, input, beta, alpha, np_dtype)


def _addmv_decomp(input, mat, vec, *, beta=1, alpha=1):
    _addmv_meta(input, mat, vec, beta=beta, alpha=alpha)
    return _blend_decomp(input, matmul(mat, vec), beta, alpha)


addmv = defop("addmv", _addmv_meta, cpu=_addmv_cpu, category=COMPOSITE, decomposition=_addmv_decomp, has_out=True)
make_inplace(addmv)


def _check_batches(fn, batch1, batch2):
    for name, x in (("batch1", batch1), ("batch2", batch2)):
        if x.ndim < 3:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-x.ndim}, {x.ndim - 1}], but got 2)"
            )
        if x.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")


def _addbmm_meta(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``: batched products summed over the batch.

    Args:
        input (Tensor): broadcastable to ``(n, p)``.
        batch1 (Tensor): ``(b, n, m)``.
        batch2 (Tensor): ``(b, m, p)``; all three of one dtype.
        beta (Number): multiplier of ``input`` (0 ignores it).
        alpha (Number): multiplier of the summed products.

    Returns:
        Tensor: ``(n, p)``.

    Raises:
        RuntimeError: for batch counts or sizes that don't match, or different dtypes.
        IndexError: for batch operands of fewer than 3 dims.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.addbmm(ember.zeros(2, 2), ember.ones(3, 2, 4), ember.ones(3, 4, 2))
        tensor([[12., 12.],
                [12., 12.]])
    """
    for i, (name, x) in enumerate((("input", input), ("batch1", batch1), ("batch2", batch2))):
        _check_tensor("addbmm", name, i + 1, x)
    a, b1, b2 = input._data, batch1._data, batch2._data
    _check_batches("addbmm", b1, b2)
    if b1.shape[0] != b2.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {b1.shape[0]} and {b2.shape[0]}")
    if b1.shape[2] != b2.shape[1]:
        raise RuntimeError(
            f"Incompatible matrix sizes for bmm ({b1.shape[1]}x{b1.shape[2]} and {b2.shape[1]}x{b2.shape[2]})"
        )
    return _added_product_meta("addbmm", a, b1, b2, (b1.shape[1], b2.shape[2]), beta, alpha)


def _addbmm_cpu(input, batch1, batch2, *, beta=1, alpha=1):
    np_dtype = batch1._data.dtype
    b1, b2 = _compute_array(batch1._data, np_dtype), _compute_array(batch2._data, np_dtype)
    if np_dtype in _HALF_TYPES:
        return _addbmm_half(input, b1, b2, beta, alpha, np_dtype)
    nb, n, m = b1.shape
    p = b2.shape[2]
    # sum_b b1[b] @ b2[b] is one product: (n, b*m) @ (b*m, p)
    left = np.ascontiguousarray(b1.transpose(1, 0, 2)).reshape(n, nb * m)
    right = b2.reshape(nb * m, p)
    return _blend(_matmul_compute(left, right), input, beta, alpha, np_dtype)


def _addbmm_half(input, b1, b2, beta, alpha, np_dtype):
    """addbmm for float16/bfloat16 as PyTorch rounds it: the result is accumulated one batch at a time."""
    dtype = _FROM_NP(np_dtype)
    beta, alpha = _scalar_as(beta, dtype), _scalar_as(alpha, dtype)
    shape = (b1.shape[1], b2.shape[2])
    if beta == 0:
        result = np.zeros(shape, _FLOAT32)
    else:
        result = _round_to(np.broadcast_to(_compute_array(input._data, np_dtype) * _FLOAT32.type(beta), shape).copy(),
                           np_dtype)
    for i in range(b1.shape[0]):
        result = _round_to(result + _FLOAT32.type(alpha) * _matmul_compute(b1[i], b2[i]), np_dtype)
    return result.astype(np_dtype)


def _addbmm_decomp(input, batch1, batch2, *, beta=1, alpha=1):
    _addbmm_meta(input, batch1, batch2, beta=beta, alpha=alpha)
    nb, n, m = batch1.shape
    p = batch2.shape[2]
    left = reshape(permute(batch1, 1, 0, 2), (n, nb * m))
    product = matmul(left, reshape(batch2, (nb * m, p)))
    return _blend_decomp(input, product, beta, alpha)


addbmm = defop("addbmm", _addbmm_meta, cpu=_addbmm_cpu, category=COMPOSITE, decomposition=_addbmm_decomp,
               has_out=True)
make_inplace(addbmm)


def _baddbmm_meta(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``, with ``input`` broadcast to ``(b, n, p)``.

    Args:
        input (Tensor): broadcastable to ``(b, n, p)``.
        batch1 (Tensor): ``(b, n, m)``.
        batch2 (Tensor): ``(b, m, p)``; all three of one dtype.
        beta (Number): multiplier of ``input`` (0 ignores it).
        alpha (Number): multiplier of the products.

    Returns:
        Tensor: ``(b, n, p)``.

    Raises:
        RuntimeError: for operands that are not 3-D, sizes that don't match, or different dtypes.
        NotImplementedError: for bool tensors.

    Example:
        >>> import ember
        >>> ember.baddbmm(ember.ones(2, 1, 1), ember.ones(2, 1, 3), ember.ones(2, 3, 1), alpha=2).flatten()
        tensor([7., 7.])
    """
    for i, (name, x) in enumerate((("input", input), ("batch1", batch1), ("batch2", batch2))):
        _check_tensor("baddbmm", name, i + 1, x)
    a, b1, b2 = input._data, batch1._data, batch2._data
    for name, x in (("batch1", b1), ("batch2", b2)):
        if x.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if b1.shape[0] != b2.shape[0] or b1.shape[2] != b2.shape[1]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{b1.shape[0]}, {b1.shape[2]}] but got: "
            f"[{b2.shape[0]}, {b2.shape[1]}]."
        )
    if not (a.dtype == b1.dtype == b2.dtype):
        raise RuntimeError(
            f"Input dtypes must be the same, got: input {_cname(a.dtype)}, batch1: {_cname(b1.dtype)}, "
            f"batch2: {_cname(b2.dtype)}"
        )
    shape = (b1.shape[0], b1.shape[1], b2.shape[2])
    _check_expandable(a.shape, shape)
    _no_bool("baddbmm", b1.dtype)
    dtype = _FROM_NP(b1.dtype)
    _check_scalar("baddbmm", "beta", beta, dtype)
    _check_scalar("baddbmm", "alpha", alpha, dtype)
    return MetaArray(shape, b1.dtype)


def _baddbmm_cpu(input, batch1, batch2, *, beta=1, alpha=1):
    np_dtype = batch1._data.dtype
    b1, b2 = _compute_array(batch1._data, np_dtype), _compute_array(batch2._data, np_dtype)
    return _blend(_matmul_compute(b1, b2), input, beta, alpha, np_dtype)


def _baddbmm_decomp(input, batch1, batch2, *, beta=1, alpha=1):
    _baddbmm_meta(input, batch1, batch2, beta=beta, alpha=alpha)
    return _blend_decomp(input, matmul(batch1, batch2), beta, alpha)


baddbmm = defop("baddbmm", _baddbmm_meta, cpu=_baddbmm_cpu, category=COMPOSITE, decomposition=_baddbmm_decomp,
                has_out=True)
make_inplace(baddbmm)


def _addr_meta(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``, with type promotion and ``input`` broadcast to ``(n, m)``.

    For bool results this is ``(beta and input) or (alpha and outer)``.

    Args:
        input (Tensor): broadcastable to ``(n, m)``.
        vec1 (Tensor): ``(n,)``.
        vec2 (Tensor): ``(m,)``.
        beta (Number): multiplier of ``input`` (0 ignores it); not a float for integer results, not a bool
            for non-bool results.
        alpha (Number): multiplier of the outer product; the same rules.

    Returns:
        Tensor: ``(n, m)``, of the promoted dtype of the three tensors.

    Raises:
        RuntimeError: if a vector is not 1-D, the input does not broadcast, or ``beta``/``alpha`` don't suit
            the result dtype.

    Example:
        >>> import ember
        >>> ember.addr(ember.zeros(2, 2), ember.tensor([1., 2.]), ember.tensor([3., 4.]), alpha=2)
        tensor([[ 6.,  8.],
                [12., 16.]])
    """
    for i, (name, x) in enumerate((("input", input), ("vec1", vec1), ("vec2", vec2))):
        _check_tensor("addr", name, i + 1, x)
    for name, x in (("vec1", vec1), ("vec2", vec2)):
        if x._data.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {x._data.ndim}-D")
    dtype = D.result_type_of((input, vec1, vec2))
    shape = (vec1._data.shape[0], vec2._data.shape[0])
    _check_expandable(input._data.shape, shape)
    _check_scalar("addr", "beta", beta, dtype)
    _check_scalar("addr", "alpha", alpha, dtype)
    _check_addr_scalar("beta", beta, dtype)
    _check_addr_scalar("alpha", alpha, dtype)
    return MetaArray(shape, dtype.numpy_dtype)


def _addr_cpu(input, vec1, vec2, *, beta=1, alpha=1):
    dtype = D.result_type_of((input, vec1, vec2))
    np_dtype = dtype.numpy_dtype
    product = _outer_compute(vec1._data, vec2._data, np_dtype)
    if dtype is D.bool:
        beta, alpha = bool(_scalar_as(beta, dtype)), bool(_scalar_as(alpha, dtype))
        result = product if alpha else np.zeros_like(product)
        if beta:
            result = np.logical_or(result, input._data)
        return np.ascontiguousarray(result)
    return _blend(product, input, beta, alpha, np_dtype)


def _addr_decomp(input, vec1, vec2, *, beta=1, alpha=1):
    meta = _addr_meta(input, vec1, vec2, beta=beta, alpha=alpha)
    dtype = _FROM_NP(meta.dtype)
    product = outer(vec1, vec2)
    if product.dtype is not dtype:
        product = product.to(dtype)
    return _blend_decomp(input, product, beta, alpha)


addr = defop("addr", _addr_meta, cpu=_addr_cpu, category=COMPOSITE, decomposition=_addr_decomp, has_out=True)
make_inplace(addr)


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


def _round_to(x, np_dtype):
    """``x`` (float32) rounded to ``np_dtype``'s precision, kept in float32."""
    return x.astype(np_dtype).astype(_FLOAT32)


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

_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def _cdist_meta(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between each row of ``x1`` and each row of ``x2``, batched with broadcasting.

    Args:
        x1 (Tensor): ``(*B1, P, M)``, float32 or float64.
        x2 (Tensor): ``(*B2, R, M)``, the same dtype; ``B1`` and ``B2`` broadcast.
        p (float): the norm, ``p >= 0`` (``0`` counts differing coordinates, ``inf`` takes the largest difference).
        compute_mode (str): for ``p = 2``: ``"use_mm_for_euclid_dist_if_necessary"`` (a matrix product when
            ``P > 25`` or ``R > 25``), ``"use_mm_for_euclid_dist"`` (always) or
            ``"donot_use_mm_for_euclid_dist"`` (never). The matrix product is faster and less exact.

    Returns:
        Tensor: ``(*broadcast(B1, B2), P, R)``.

    Raises:
        RuntimeError: for tensors of fewer than 2 dims, different numbers of columns, non-float or different
            dtypes, or a negative ``p``.
        NotImplementedError: for float16 and bfloat16, as in PyTorch on CPU.
        ValueError: for an unknown ``compute_mode``.

    Example:
        >>> import ember
        >>> ember.cdist(ember.tensor([[0., 0.], [1., 1.]]), ember.tensor([[3., 4.]]))
        tensor([[5.0000],
                [3.6056]])
    """
    _check_tensor("cdist", "x1", 1, x1)
    _check_tensor("cdist", "x2", 2, x2)
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    a, b = x1._data, x2._data
    for name, x in (("X1", a), ("X2", b)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} X2: {b.shape[-1]}")
    for name, x in (("X1", a), ("X2", b)):
        if x.dtype.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_tname(x.dtype)}")
    _check_same_scalar_type(a.dtype, b.dtype)
    if a.dtype in _HALF_TYPES:
        raise NotImplementedError(f"\"cdist\" not implemented for '{_tname(a.dtype)}'")
    if isinstance(p, Tensor):
        p = p.item()
    if not isinstance(p, (int, float, np.number)) or isinstance(p, (complex, np.complexfloating)):
        raise TypeError(f"cdist(): argument 'p' must be float, not {type(p).__name__}")
    if not p >= 0:  # NaN too
        raise RuntimeError("cdist only supports non-negative p values")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return MetaArray(batch + (a.shape[-2], b.shape[-2]), a.dtype)


def _cdist_uses_mm(p, compute_mode, rows1, rows2):
    if p != 2:
        return False
    if compute_mode == "use_mm_for_euclid_dist":
        return True
    return compute_mode == "use_mm_for_euclid_dist_if_necessary" and (rows1 > 25 or rows2 > 25)


def _cdist_cpu(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    a, b = x1._data, x2._data
    if isinstance(p, Tensor):
        p = p.item()
    dtype = a.dtype
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    (rows1, cols), rows2 = a.shape[-2:], b.shape[-2]
    out_shape = batch + (rows1, rows2)
    if rows1 == 0 or rows2 == 0 or cols == 0 or 0 in batch:
        return np.zeros(out_shape, dtype)
    a = np.broadcast_to(a, batch + (rows1, cols))
    b = np.broadcast_to(b, batch + (rows2, cols))
    with np.errstate(all="ignore"):
        if _cdist_uses_mm(p, compute_mode, rows1, rows2):
            # |x - y|^2 = |x|^2 + |y|^2 - 2 x.y as one product of padded matrices
            norm1 = np.einsum("...i,...i->...", a, a)[..., None]
            norm2 = np.einsum("...i,...i->...", b, b)[..., None]
            left = np.concatenate([-2 * a, norm1, np.ones_like(norm1)], axis=-1)
            right = np.concatenate([b, np.ones_like(norm2), norm2], axis=-1)
            result = np.matmul(left, np.swapaxes(right, -1, -2))
            np.maximum(result, 0, out=result)
            return np.sqrt(result, out=result)
        diff = np.abs(a[..., :, None, :] - b[..., None, :, :])
        if p == 0:
            return np.count_nonzero(diff, axis=-1).astype(dtype)
        if p == 1:
            return diff.sum(axis=-1)
        if p == 2:
            return np.sqrt(np.einsum("...i,...i->...", diff, diff))
        if math.isinf(p):
            return diff.max(axis=-1)
        return np.power(np.power(diff, p).sum(axis=-1), 1.0 / p).astype(dtype, copy=False)


def _cdist_decomp(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    meta = _cdist_meta(x1, x2, p, compute_mode)
    if isinstance(p, Tensor):
        p = p.item()
    sum_, sqrt = _op("sum"), _op("sqrt")
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    if _cdist_uses_mm(p, compute_mode, rows1, rows2) and min(meta.shape + (x1.shape[-1],)) > 0:
        norm1 = sum_(mul(x1, x1), -1, keepdim=True)
        norm2 = sum_(mul(x2, x2), -1, keepdim=True)
        left = _op("cat")([mul(x1, -2), norm1, _op("ones_like")(norm1)], -1)
        right = _op("cat")([x2, _op("ones_like")(norm2), norm2], -1)
        return sqrt(_op("clamp")(matmul(left, transpose(right, -1, -2)), min=0))
    diff = _op("abs")(sub(unsqueeze(x1, -2), unsqueeze(x2, -3)))
    if p == 0:
        result = sum_(_op("ne")(diff, 0), -1).to(x1.dtype)
    elif p == 1:
        result = sum_(diff, -1)
    elif p == 2:
        result = sqrt(sum_(mul(diff, diff), -1))
    elif math.isinf(p):
        result = _op("amax")(diff, -1) if diff.shape[-1] else sum_(diff, -1)
    else:
        result = _op("pow")(sum_(_op("pow")(diff, p), -1), 1.0 / p)
    return _op("expand")(result, *meta.shape) if tuple(result.shape) != meta.shape else result


cdist = defop("cdist", _cdist_meta, cpu=_cdist_cpu, category=COMPOSITE, decomposition=_cdist_decomp)


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


# -- einsum --------------------------------------------------------------------------------

_ELLIPSIS = "..."


def _parse_term(term, offset, what):
    """Labels of one term of an equation: letters, and ``_ELLIPSIS`` for ``...``; spaces are skipped."""
    labels = []
    dots = 0
    ellipsis = False
    for i, ch in enumerate(term):
        if ch == ".":
            if ellipsis:
                raise RuntimeError(f"einsum(): found '.' for {what} for which an ellipsis was already found")
            dots += 1
            if dots == 3:
                labels.append(_ELLIPSIS)
                ellipsis, dots = True, 0
            continue
        if dots:
            raise RuntimeError(f"einsum(): found '.' for {what} that is not part of any ellipsis")
        if ch == " ":
            continue
        if not ("a" <= ch <= "z" or "A" <= ch <= "Z"):
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {offset + i} in the equation string, subscripts must be "
                "in [a-zA-Z]"
            )
        labels.append(ch)
    if dots:
        raise RuntimeError(f"einsum(): found '.' for {what} that is not part of any ellipsis")
    return tuple(labels)


@functools.lru_cache(maxsize=512)
def _parse_equation(equation):
    """``(input terms, output term or None)`` of an einsum equation (None: implicit output)."""
    lhs, arrow, rhs = equation.partition("->")
    terms = []
    offset = 0
    for i, term in enumerate(lhs.split(",")):
        terms.append(_parse_term(term, offset, f"operand {i}"))
        offset += len(term) + 1
    output = None
    if arrow:
        output = _parse_term(rhs, len(lhs) + 2, "output")
        seen = set()
        for label in output:
            if label in seen and label != _ELLIPSIS:
                raise RuntimeError(f"einsum(): output subscript {label} appears more than once in the output")
            seen.add(label)
        used = {label for term in terms for label in term}
        for label in output:
            if label != _ELLIPSIS and label not in used:
                raise RuntimeError(
                    f"einsum(): output subscript {label} does not appear in the equation for any input operand"
                )
    return tuple(terms), output


def _sublist_equation(args):
    """The equation of the sublist form ``einsum(op1, [0, 1], op2, [1, 2], [0, 2])`` and its operands."""

    def term(sublist):
        parts = []
        for s in sublist:
            if s is Ellipsis:
                parts.append("...")
            elif isinstance(s, int) and 0 <= s < 52:
                parts.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
            else:
                raise ValueError(
                    f"einsum(): subscript in subscript list is not within the valid range [0, 52), got {s}"
                )
        return "".join(parts)

    operands = list(args[0::2])
    sublists = list(args[1::2])
    output = None
    if len(operands) > len(sublists):  # a trailing output sublist
        output = operands.pop()
        if isinstance(output, Tensor):
            raise RuntimeError("einsum(): missing subscript list for the last operand")
    equation = ",".join(term(s) for s in sublists)
    if output is not None:
        equation += "->" + term(output)
    return equation, tuple(operands)


def _einsum_args(equation, operands):
    """Normalise the call forms (varargs, one list of operands, sublists) to ``(equation, operands)``."""
    if isinstance(equation, Tensor):
        return _sublist_equation((equation,) + tuple(operands))
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got {type(x).__name__}")
    return equation, operands


class _EinsumPlan:
    """What einsum computes for one equation and one set of operand shapes and dtypes.

    Attributes:
        terms (list[tuple]): per operand, a label per dim, ellipsis dims as ``("...", k)`` (k counts from the
            left of the broadcast ellipsis).
        output (tuple): the output's labels, in order.
        sizes (dict): label -> size (after broadcasting).
        squeeze (list[tuple[int]]): per operand, the dims of size 1 that broadcast against a larger size.
        dtype (ember.dtype): the result dtype.
        shape (tuple[int]): the result shape.
        np_terms (list[str]): per operand, one letter per dim left after squeezing (ellipsis dims get letters
            the equation does not use).
        np_output (str): the output's letters.
    """

    __slots__ = ("terms", "output", "sizes", "squeeze", "dtype", "shape", "np_terms", "np_output")


def _sum_dtype(dtype):
    return D.int64 if dtype.category <= D.INTEGRAL else dtype


def _einsum_result_dtype(sizes_per_op, dtypes, output):
    """The result dtype, following PyTorch's left-to-right evaluation.

    One operand: labels left out of the output are summed with ``sum``, which
    turns bool and integer tensors into int64. Several operands: a label left
    out of the output is summed (with ``sum``) in the last operand where its
    size is not 1 when the running result does not have it, contracted with a
    matrix product (``bmm``/``dot``, which need one dtype and refuse bool) when
    it does, and squeezed wherever its size is 1. A contraction with an empty
    side gives zeros of the operand's dtype without those checks; operands
    without a contracted label multiply, with type promotion.
    """
    out = set(output)
    if len(sizes_per_op) == 1:
        return _sum_dtype(dtypes[0]) if any(label not in out for label in sizes_per_op[0]) else dtypes[0]
    last = {}
    for i, sizes in enumerate(sizes_per_op):
        for label, size in sizes.items():
            if size != 1:
                last[label] = i
    result = result_dtype = None
    for i, (sizes, op_dtype) in enumerate(zip(sizes_per_op, dtypes)):
        kept, contracted, summed = {}, [], []
        for label, size in sizes.items():
            last_op = last.get(label, -1)
            if label in out or last_op > i:
                kept[label] = size
            elif last_op == i:  # size != 1 here, and needed nowhere later
                if result is None or result.get(label, 1) == 1:
                    summed.append(label)
                else:
                    contracted.append(label)
            # else: size 1, squeezed away
        if summed:
            op_dtype = _sum_dtype(op_dtype)
        if result is None:
            result, result_dtype = kept, op_dtype
            continue
        if contracted:
            empty = 0 in result.values() or 0 in kept.values() or any(sizes[label] == 0 for label in contracted)
            if empty:
                result_dtype = op_dtype
            elif result_dtype is D.bool:
                raise NotImplementedError("\"einsum\" not implemented for 'Bool'")
            elif result_dtype is not op_dtype:
                raise RuntimeError(
                    f"expected scalar type {_torch_name(result_dtype)} but found {_torch_name(op_dtype)}"
                )
        else:
            result_dtype = D.promote_types(result_dtype, op_dtype)
        for label in contracted + summed:
            result.pop(label, None)
        for label, size in kept.items():
            if result.get(label, 1) == 1:
                result[label] = size
    return result_dtype


@functools.lru_cache(maxsize=512)
def _einsum_plan(equation, shapes, dtypes):
    """The :class:`_EinsumPlan` of ``equation`` on operands of ``shapes`` and ``dtypes``, after PyTorch's checks."""
    terms, output = _parse_equation(equation)
    if not shapes:
        raise RuntimeError("einsum(): must provide at least one operand")
    if len(terms) > len(shapes):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    # expand ellipses into labels of their own, aligned on the right
    ell_ndim = 0
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        n_labels = len(term) - (_ELLIPSIS in term)
        if _ELLIPSIS in term:
            if n_labels > len(shape):
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({n_labels}) is more than the number of "
                    f"dimensions ({len(shape)}) for operand {i}"
                )
            ell_ndim = max(ell_ndim, len(shape) - n_labels)
        elif n_labels != len(shape):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({n_labels}) does not match the number of "
                f"dimensions ({len(shape)}) for operand {i} and no ellipsis was given"
            )
    full_terms = []
    for term, shape in zip(terms, shapes):
        labels = []
        for label in term:
            if label == _ELLIPSIS:
                covered = len(shape) - (len(term) - 1)
                labels.extend((_ELLIPSIS, ell_ndim - covered + k) for k in range(covered))
            else:
                labels.append(label)
        full_terms.append(tuple(labels))
    # sizes: repeated labels of one operand must agree; across operands they broadcast
    sizes = {}
    sizes_per_op = []
    for i, (labels, shape) in enumerate(zip(full_terms, shapes)):
        own = {}
        for label, n in zip(labels, shape):
            if label in own and own[label] != n:
                raise RuntimeError(
                    f"einsum(): subscript {label} is repeated for operand {i} but the sizes don't match, "
                    f"{own[label]} != {n}"
                )
            own[label] = n
        for label, n in own.items():
            seen = sizes.get(label)
            if seen is None or seen == 1:
                sizes[label] = n
            elif n != 1 and n != seen:
                if isinstance(label, tuple):
                    raise RuntimeError(
                        "einsum(): operands do not broadcast with remapped shapes (original->remapped): "
                        + " ".join(str(list(s)) for s in shapes)
                    )
                raise RuntimeError(
                    f"einsum(): subscript {label} has size {n} for operand {i} which does not broadcast with "
                    f"previously seen size {seen}"
                )
        sizes_per_op.append(own)
    # the output: given, or the ellipsis dims then the labels used once, in alphabetical order
    ellipsis_labels = [(_ELLIPSIS, k) for k in range(ell_ndim)]
    if output is None:
        counts = {}
        for term in terms:
            for label in term:
                counts[label] = counts.get(label, 0) + 1
        out = ellipsis_labels + sorted(label for label, c in counts.items() if c == 1 and label != _ELLIPSIS)
    else:
        out = []
        for label in output:
            out.extend(ellipsis_labels if label == _ELLIPSIS else [label])
    plan = _EinsumPlan()
    plan.terms, plan.output, plan.sizes = full_terms, tuple(out), sizes
    plan.shape = tuple(sizes.get(label, 1) for label in out)
    plan.dtype = _einsum_result_dtype(sizes_per_op, [_FROM_NP(d) for d in dtypes], out)
    # numpy's equation: one letter per label; size-1 dims that broadcast are squeezed away
    letters = {}
    free = iter(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in sizes)
    for label in sizes:
        if isinstance(label, str):
            letters[label] = label
        else:
            letter = next(free, None)
            if letter is None:
                raise RuntimeError(
                    "einsum(): too many subscripts in the equation (at most 52 labels, ellipsis dims included)"
                )
            letters[label] = letter
    plan.squeeze, plan.np_terms = [], []
    for labels, shape in zip(full_terms, shapes):
        squeeze = tuple(d for d, (label, n) in enumerate(zip(labels, shape)) if n == 1 and sizes[label] != 1)
        plan.squeeze.append(squeeze)
        plan.np_terms.append("".join(letters[label] for d, label in enumerate(labels) if d not in squeeze))
    plan.np_output = "".join(letters[label] for label in out)
    return plan


def _einsum_plan_for(equation, operands):
    return _einsum_plan(equation, tuple(x._data.shape for x in operands), tuple(x._data.dtype for x in operands))


def _einsum_meta(equation, *operands):
    """Einstein summation: products of the operands' elements, summed over the labels missing from the output.

    The equation names each operand's dims with letters (``"ij,jk->ik"`` is a matrix product); ``...``
    stands for any number of leading or middle dims, which broadcast across operands. A label repeated
    within one operand takes its diagonal; labels left out of the output (after ``->``) are summed. Without
    ``->`` the output is the ellipsis dims, then the labels that appear once, in alphabetical order. Sizes
    of a label broadcast (1 against n). The operands may also be given as one list, or in the sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.

    Args:
        equation (str): the subscripts.
        *operands (Tensor): one tensor per term of the equation.

    Returns:
        Tensor: the output dims of the equation. The dtype follows PyTorch: the operands' dtype, except that
        integer and bool sums give int64 as ``ember.sum`` does.

    Raises:
        RuntimeError: for malformed equations, operand counts or ranks that don't match the equation, sizes that
            don't broadcast, or operands of different dtypes where PyTorch multiplies matrices.
        NotImplementedError: for bool operands that need a matrix product.

    Example:
        >>> import ember
        >>> a = ember.tensor([[1., 2.], [3., 4.]])
        >>> ember.einsum("ij,jk->ik", a, a)
        tensor([[ 7., 10.],
                [15., 22.]])
        >>> ember.einsum("ii", a)
        tensor(5.)
        >>> ember.einsum("...ij->...ji", ember.ones(5, 2, 3)).shape
        ember.Size([5, 3, 2])
    """
    equation, operands = _einsum_args(equation, operands)
    plan = _einsum_plan_for(equation, operands)
    return MetaArray(plan.shape, plan.dtype.numpy_dtype)


def _einsum_cpu(equation, *operands):
    equation, operands = _einsum_args(equation, operands)
    plan = _einsum_plan_for(equation, operands)
    np_dtype = plan.dtype.numpy_dtype
    arrays = []
    for x, squeeze in zip(operands, plan.squeeze):
        a = _compute_array(x._data, np_dtype)
        if squeeze:
            a = a.reshape(tuple(n for d, n in enumerate(a.shape) if d not in squeeze))
        arrays.append(a)
    if len(arrays) == 1:
        result = np.einsum(f"{plan.np_terms[0]}->{plan.np_output}", arrays[0])
    else:
        result = _einsum_pairwise(arrays, plan.np_terms, plan.np_output)
    result = np.asarray(result)
    if result.base is not None or not result.flags.c_contiguous:  # a view of an operand, or a permuted result
        result = np.array(result, order="C")
    return result.astype(np_dtype, copy=False)


def _einsum_pairwise(arrays, terms, output):
    """Contract operands left to right (as PyTorch does), each pair as one batched matrix product.

    ``terms`` and ``output`` are strings of letters; a letter repeated within a
    term takes the diagonal. Letters needed neither later nor in the output
    are summed as early as possible.
    """
    items = []
    for a, term in zip(arrays, terms):
        unique = "".join(dict.fromkeys(term))
        if unique != term:
            a = np.einsum(f"{term}->{unique}", a)
        items.append((a, unique))
    out = set(output)

    def needed(after):
        keep = set(out)
        for _, term in items[after:]:
            keep.update(term)
        return keep

    x, xl = _sum_out_array(*items[0], needed(1))
    for i in range(1, len(items)):
        keep = needed(i + 1)
        y, yl = _sum_out_array(*items[i], keep | set(xl))
        x, xl = _contract_arrays(x, xl, y, yl, keep)
    x, xl = _sum_out_array(x, xl, out)
    return x.transpose([xl.index(c) for c in output])


def _sum_out_array(a, labels, keep):
    axes = tuple(d for d, c in enumerate(labels) if c not in keep)
    if not axes:
        return a, labels
    return a.sum(axis=axes, dtype=a.dtype), "".join(c for c in labels if c in keep)


def _contract_arrays(x, xl, y, yl, keep):
    """Contract two labelled arrays: shared labels not in ``keep`` are summed, the others batch or stay."""
    batch = [c for c in xl if c in yl and c in keep]
    summed = [c for c in xl if c in yl and c not in keep]
    left = [c for c in xl if c not in yl]
    right = [c for c in yl if c not in xl]
    size = dict(zip(xl, x.shape))
    size.update(zip(yl, y.shape))

    def numel(labels):
        return math.prod(size[c] for c in labels)

    B, L, C, R = numel(batch), numel(left), numel(summed), numel(right)
    xp = x.transpose([xl.index(c) for c in batch + left + summed])
    yp = y.transpose([yl.index(c) for c in batch + summed + right])
    if not summed:  # an outer product per batch: broadcasting multiply
        z = np.multiply(xp.reshape(B, L, 1), yp.reshape(B, 1, R))
    elif L == 1 and R == 1:  # dot products per batch
        z = np.einsum("bc,bc->b", xp.reshape(B, C), yp.reshape(B, C))
    else:
        z = _matmul_compute(xp.reshape(B, L, C), yp.reshape(B, C, R))
    labels = batch + left + right
    return z.reshape(tuple(size[c] for c in labels)), "".join(labels)


def _einsum_decomp(equation, *operands):
    equation, operands = _einsum_args(equation, operands)
    plan = _einsum_plan_for(equation, operands)
    dtype = plan.dtype
    sum_ = _op("sum")
    items = []
    for x, labels, squeeze in zip(operands, plan.terms, plan.squeeze):
        for d in reversed(squeeze):
            x = select(x, d, 0)
        labels = [label for d, label in enumerate(labels) if d not in squeeze]
        while len(set(labels)) != len(labels):  # a repeated label: take the diagonal
            label = next(label for label in labels if labels.count(label) > 1)
            d1 = labels.index(label)
            d2 = labels.index(label, d1 + 1)
            x = diagonal(x, 0, d1, d2)
            labels = [lb for i, lb in enumerate(labels) if i not in (d1, d2)] + [label]
        if x.dtype is not dtype:
            x = x.to(dtype)
        items.append((x, labels))
    out = list(plan.output)

    def needed(after):
        keep = set(out)
        for _, labels in items[after:]:
            keep.update(labels)
        return keep

    def sum_out(x, labels, keep):
        dims = [d for d, label in enumerate(labels) if label not in keep]
        if not dims:
            return x, labels
        x = sum_(x, dims)
        return x, [label for label in labels if label in keep]

    x, labels = sum_out(*items[0], needed(1))
    for i in range(1, len(items)):
        keep = needed(i + 1)
        y, ylabels = sum_out(*items[i], keep | set(labels))
        x, labels = _contract(x, labels, y, ylabels, keep)
    x, labels = sum_out(x, labels, set(out))
    if labels != out:
        x = permute(x, *[labels.index(label) for label in out])
    return x if x.dtype is dtype else x.to(dtype)


def _contract(x, xl, y, yl, keep):
    """Contract two labelled tensors as one batched matrix product; labels not in ``keep`` are summed."""
    batch = [label for label in xl if label in yl and label in keep]
    summed = [label for label in xl if label in yl and label not in keep]
    left = [label for label in xl if label not in yl]
    right = [label for label in yl if label not in xl]
    size = {**dict(zip(xl, x.shape)), **dict(zip(yl, y.shape))}

    def numel(labels):
        return math.prod(size[label] for label in labels)

    xp = permute(x, *[xl.index(label) for label in batch + left + summed])
    yp = permute(y, *[yl.index(label) for label in batch + summed + right])
    xp = reshape(xp, (numel(batch), numel(left), numel(summed)))
    yp = reshape(yp, (numel(batch), numel(summed), numel(right)))
    z = reshape(matmul(xp, yp), tuple(size[label] for label in batch + left + right))
    return z, batch + left + right


einsum = defop("einsum", _einsum_meta, cpu=_einsum_cpu, category=COMPOSITE, decomposition=_einsum_decomp)


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
