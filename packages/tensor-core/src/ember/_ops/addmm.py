"""Products added to an input: addmm, addmv, addbmm, baddbmm and addr (``beta * input + alpha * product``)."""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace
from ._matmul_helpers import (
    _C_NAMES,
    _FLOAT32,
    _FROM_NP,
    _HALF_TYPES,
    _check_mv,
    _check_tensor,
    _cname,
    _compute_array,
    _matmul_compute,
    _no_bool,
    _outer_compute,
    _round_to,
    _tname,
)
from ._pointwise_helpers import make_inplace, operand
from ._registry import COMPOSITE, defop
from .matmul import matmul, outer
from .pointwise import add, mul
from .views import permute, reshape

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["addmm", "addmm_", "addmv", "addmv_", "addbmm", "addbmm_", "baddbmm", "baddbmm_", "addr", "addr_"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


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


def _blended_product(input, left, right, beta, alpha):
    """``beta * input + alpha * (left @ right)`` as an array: the CPU kernel of addmm, addmv and baddbmm
    (their metas have checked that ``left`` and ``right`` share one dtype)."""
    np_dtype = right._data.dtype
    product = _matmul_compute(_compute_array(left._data, np_dtype), _compute_array(right._data, np_dtype))
    return _blend(product, input, beta, alpha, np_dtype)


def _addmm_cpu(input, mat1, mat2, *, beta=1, alpha=1):
    return _blended_product(input, mat1, mat2, beta, alpha)


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
    return _blended_product(input, mat, vec, beta, alpha)


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
    return _blended_product(input, batch1, batch2, beta, alpha)


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
