"""One-line definitions for pointwise ops: the rule table reads like a list.

``binary(name, np_fn, ...)`` and ``unary(name, np_fn, ...)`` create the op
(meta: broadcasting and PyTorch promotion; CPU kernel: the numpy ufunc) and
its in-place variant ``name_``.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from .creation import copy_
from ._registry import COMPOSITE, defop
from ._shapes import broadcast_shapes

__all__ = ["binary", "unary", "binary_dtype", "operand", "make_inplace"]

_FROM_NP = D.from_numpy_dtype
_EXTENSION_FLOATS = (D.bfloat16.numpy_dtype,)


def binary_dtype(a, b):
    """PyTorch's result dtype of a binary op on ``a`` and ``b`` (tensors or Python numbers)."""
    if type(a) is Tensor and type(b) is Tensor:
        da = a._data.dtype
        if da is b._data.dtype and a._data.ndim and b._data.ndim:
            return _FROM_NP(da)
    return D.result_type_of((a, b))


def operand(x, np_dtype):
    """``x`` as something a numpy ufunc computing in ``np_dtype`` accepts.

    Tensors give their array (cast if the dtype differs); Python integers are
    wrapped into the range of an integer ``np_dtype`` like a C cast, since
    numpy refuses out-of-range Python integers.
    """
    if isinstance(x, Tensor):
        data = x._data
        return data if data.dtype == np_dtype else data.astype(np_dtype)
    if np_dtype.kind in "iu" and isinstance(x, int):
        info = np.iinfo(np_dtype)
        if not info.min <= x <= info.max:
            return np.array(x).astype(np_dtype)[()]
    elif np_dtype in _EXTENSION_FLOATS:  # ml_dtypes' bfloat16 takes no Python scalars in its loops
        return np_dtype.type(x)
    return x


def _shape(x):
    return x._data.shape if isinstance(x, Tensor) else ()


def _check_operand(name, arg, x):
    if not isinstance(x, (Tensor, bool, int, float, complex, np.number, np.bool_)):
        raise TypeError(f"{name}(): argument '{arg}' must be Tensor or Number, not {type(x).__name__}")


def binary(name, np_fn, *, result="promote", doc, out_dtype=None, has_inplace=True, tags=("pointwise",), check=None):
    """Define a broadcasting binary pointwise op ``name(input, other)``.

    Args:
        np_fn: the numpy function computing it, called as ``np_fn(a, b)`` on
            operands converted to the computation dtype.
        result: ``"promote"`` (the promoted dtype), ``"bool"`` (comparisons) or
            ``"float"`` (integers promote to the default float, as true division).
        check: optional extra argument check ``check(input, other, dtype)``.
    """

    def compute_dtype(input, other):
        dtype = binary_dtype(input, other)
        if result == "float" and dtype.category < D.FLOATING:
            dtype = D.get_default_dtype()
        return dtype

    def meta(input, other):
        _check_operand(name, "input", input)
        _check_operand(name, "other", other)
        dtype = compute_dtype(input, other)
        if check is not None:
            check(input, other, dtype)
        out = D.bool if result == "bool" else dtype
        return MetaArray(broadcast_shapes(_shape(input), _shape(other)), out.numpy_dtype)

    def cpu(input, other):
        np_dtype = compute_dtype(input, other).numpy_dtype
        with np.errstate(all="ignore"):  # PyTorch computes inf/nan silently (1/0, 0/0)
            return np.asarray(np_fn(operand(input, np_dtype), operand(other, np_dtype)))

    meta.__name__ = name
    meta.__doc__ = doc
    op = defop(name, meta, cpu=cpu, has_out=True, tags=tags)
    if has_inplace:
        make_inplace(op)
    return op


def unary(name, np_fn, *, doc, result="same", has_inplace=True, tags=("pointwise",), check=None):
    """Define a unary pointwise op ``name(input)``.

    Args:
        result: ``"same"`` (input dtype), ``"float"`` (integers -> default float),
            ``"bool"`` (predicates) or ``"real"`` (complex -> its real dtype, e.g. abs).
    """

    def out_dtype(input):
        dtype = input.dtype
        if result == "float" and dtype.category < D.FLOATING:
            return D.get_default_dtype()
        if result == "bool":
            return D.bool
        if result == "real":
            return dtype.to_real()
        return dtype

    def meta(input):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        if check is not None:
            check(input)
        return MetaArray(input._data.shape, out_dtype(input).numpy_dtype)

    def cpu(input):
        target = out_dtype(input).numpy_dtype
        data = input._data
        if result == "float" and data.dtype != target:
            data = data.astype(target)
        with np.errstate(all="ignore"):
            return np.asarray(np_fn(data)).astype(target, copy=False)

    meta.__name__ = name
    meta.__doc__ = doc
    op = defop(name, meta, cpu=cpu, has_out=True, tags=tags)
    if has_inplace:
        make_inplace(op)
    return op


def make_inplace(op):
    """Register ``op.name + "_"``: compute ``op`` and write the result into the first argument.

    The in-place op checks that the result broadcasts to the first argument's
    shape and that its dtype can be cast to the first argument's dtype
    (PyTorch's rule: an int tensor can't take a float result in place).
    """

    def meta(self, *args, **kwargs):
        result = op.meta(self, *args, **kwargs)
        if tuple(result.shape) != tuple(self._data.shape):
            raise RuntimeError(
                f"output with shape {list(self._data.shape)} doesn't match the broadcast shape {list(result.shape)}"
            )
        result_dtype = _FROM_NP(result.dtype)
        if not D.can_cast(result_dtype, self.dtype):
            raise RuntimeError(f"result type {_torch_name(result_dtype)} can't be cast to the desired output type {_torch_name(self.dtype)}")
        return self._data

    def cpu(self, *args, **kwargs):
        value = op.kernels["cpu"](self, *args, **kwargs)
        np.copyto(self._data, value, casting="unsafe")

    def decomposition(self, *args, **kwargs):
        meta(self, *args, **kwargs)
        return copy_(self, op(self, *args, **kwargs))

    meta.__name__ = op.name + "_"
    meta.__doc__ = f"In-place version of :func:`ember.{op.name}`: writes the result into ``self`` and returns it."
    # Composite: any backend with the functional op and copy_ runs it; CPU has a fused kernel.
    inplace = defop(
        op.name + "_", meta, cpu=cpu, kind="inplace", category=COMPOSITE, decomposition=decomposition, tags=op.tags
    )
    inplace.functional = op
    op.inplace = inplace
    return inplace


_TORCH_NAMES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
    "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}


def _torch_name(dtype):
    """PyTorch's scalar-type name for ``dtype`` (``Float``), as its error messages use."""
    return _TORCH_NAMES[dtype.name]
