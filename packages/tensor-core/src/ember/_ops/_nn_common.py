"""Helpers shared by the op modules of ``ember.nn.functional``.

Used by the ``nn_*`` op modules (activations, softmax, dropout, linear maps, normalization,
embeddings, attention and the losses).

Every op of those modules is a **composite**: its ``decomposition`` is written in other
ember ops (so a backend with the prims gets it for free, and autograd and the
compiler can see through it), and most also carry a fused numpy CPU kernel
that computes the whole thing in one pass over the data. The ops that
PyTorch also exposes as ``torch.<name>`` are tagged ``"nn.functional"`` (:data:`_NN`, and
become ``ember.<name>`` too); the others are tagged ``"nn.functional_only"`` (:data:`_NN_ONLY`).
Ops that draw random numbers (the dropout family, ``rrelu`` in training,
``gumbel_softmax``) are tagged ``"random"`` and use :data:`ember.default_generator`
through ember's random ops.

Conventions shared by the kernels:

* float16 and bfloat16 inputs are computed in float32 and cast back, as
  PyTorch's CPU kernels accumulate them;
* ops with PyTorch's ``inplace`` flag write the result into ``input`` when it
  is true (the decomposition calls the op's in-place variant, or ``copy_``);
* value-dependent checks (a class index out of range, a probability outside
  [0, 1]) are made by the kernels, the others by the meta functions.

Decompositions look their ops up in the registry when they run
(``_E.exp(x)`` is ``registry["exp"](x)``), so these modules do not depend on
the import order of the op families. This module registers no ops.
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._blas_threads import matmul as _blas_matmul
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop, registry
from ._shapes import broadcast_shapes

__all__ = []  # private helpers of the nn.functional op modules


_NN = ("nn.functional",)  # PyTorch has torch.<name> too
_NN_ONLY = ("nn.functional_only",)  # only torch.nn.functional.<name>
_NN_RANDOM = ("nn.functional", "random")
_NN_ONLY_RANDOM = ("nn.functional_only", "random")

_HALF_TYPES = D.numpy_dtype_set((D.float16, D.bfloat16))  # (learns bfloat16 when ml_dtypes loads)
_F32 = np.dtype(np.float32)
# dtypes that the C++ kernels of ember._C (csrc/nn_kernels.cpp) compute in
_C_FLOATS = (_F32, np.dtype(np.float64))


class _OpTable:
    """``_E.name`` is the registry op ``name``, looked up when a decomposition runs."""

    def __getattr__(self, name):
        try:
            return registry[name]
        except KeyError:
            raise NotImplementedError(f"this decomposition needs the op {name!r}, which is not registered") from None


_E = _OpTable()


def _composite(name, meta, *, cpu, decomposition, tags, has_out=False):
    """Register a composite op with its fused CPU kernel (the dispatcher runs ``meta`` before either)."""
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=tags, has_out=has_out)


# -- argument checks -----------------------------------------------------------------------------------


def _check_tensor(op, name, value, position=1):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not {type(value).__name__}")


def _check_optional_tensor(op, name, value, position):
    if value is not None:
        _check_tensor(op, name, value, position)


def _number(op, name, value, position):
    """``value`` as a Python number (0-dim tensors count).

    Raises:
        TypeError: if it is not a real number.
    """
    if isinstance(value, Tensor) and value.ndim == 0:
        return value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Number, not {type(value).__name__}")
    return value


def _int_arg(op, name, value, position):
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be int, not {type(value).__name__}")
    return operator.index(value)


def _not_implemented(kernel, dtype):
    """PyTorch's error for a kernel without a loop for ``dtype``."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{_torch_name(dtype)}\'')


def _check_floating(kernel, *tensors):
    """Raise NotImplementedError (as PyTorch) unless every tensor is floating-point."""
    for t in tensors:
        if t is not None and t.dtype.category != D.FLOATING:
            raise _not_implemented(kernel, t.dtype)


def _float_result(dtype):
    """The dtype of float-only math on ``dtype``: integers and bool give the default float."""
    return dtype if dtype.category >= D.FLOATING else D.get_default_dtype()


def _fmt(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _size(shape):
    return "ember.Size([" + ", ".join(str(s) for s in shape) + "])"


# -- numpy helpers ------------------------------------------------------------------------------------


def _compute(data, dtype=None):
    """``data`` in the dtype a kernel computes in: float32 for float16/bfloat16, else unchanged (or ``dtype``)."""
    if dtype is not None and data.dtype != dtype:
        data = data.astype(dtype)
    if data.dtype in _HALF_TYPES:
        return data.astype(_F32)
    return data


def _compute_dtype(np_dtype):
    return _F32 if np_dtype in _HALF_TYPES else np_dtype


def _contiguous(data):
    """``data`` itself when C-contiguous, else a C-contiguous copy (0-dim stays 0-dim, unlike np.ascontiguousarray)."""
    return data if data.flags.c_contiguous else np.array(data, order="C")


def _finish(input, values, inplace=False):
    """The kernel result: ``values`` cast to ``input``'s dtype, or written into ``input`` when ``inplace``.

    In place, the kernel returns ``input`` itself, which the dispatcher passes through.
    """
    data = input._data
    if inplace:
        np.copyto(data, values, casting="unsafe")
        input._bump_version()
        return input
    return np.asarray(values).astype(data.dtype, copy=False)


def _reduce_np(loss, reduction, out_dtype):
    """Apply a loss reduction to a numpy array and cast to ``out_dtype``."""
    if reduction == "mean":
        loss = np.asarray(loss.mean() if loss.size else np.nan, dtype=loss.dtype)
    elif reduction == "sum":
        loss = np.asarray(loss.sum(), dtype=loss.dtype)
    return np.asarray(loss).astype(out_dtype, copy=False)


def _upcast(x):
    """``x`` in float32 when it is float16/bfloat16 (decompositions compute reductions there, as kernels do)."""
    return x.to(D.float32) if x.dtype in (D.float16, D.bfloat16) else x


def _reduce(loss, reduction):
    """Apply a loss reduction with ember ops (decompositions)."""
    if reduction == "mean":
        return _E.mean(loss)
    if reduction == "sum":
        return _E.sum(loss)
    return loss


# -- loss arguments -------------------------------------------------------------------------------------


_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce):
    """The ``reduction`` string meant by the deprecated ``size_average``/``reduce`` flags."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        result = "none"
    elif size_average:
        result = "mean"
    else:
        result = "sum"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{result}' instead.",
        UserWarning, stacklevel=4,
    )
    return result


def _reduction(size_average, reduce, reduction, allowed=_REDUCTIONS):
    """The effective reduction of a loss call.

    Raises:
        ValueError: for an unknown reduction.
    """
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _kernel_reduction(size_average, reduce, reduction):
    """The reduction a kernel applies (the meta function has checked and warned already)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def _loss_shape(shape, reduction):
    return tuple(shape) if reduction == "none" else ()


def _logsigmoid_np(x):
    with np.errstate(all="ignore"):
        out = np.asarray(np.exp(-np.abs(x)))
        np.log1p(out, out=out)
        return np.minimum(x, np.asarray(0, x.dtype)) - out


def _logsigmoid_values(input):
    return _E.clamp(input, max=0) - _E.log1p(_E.exp(-_E.abs(input)))


def _check_negatable(input):
    if isinstance(input, Tensor) and input.dtype is D.bool:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )


# =====================================================================================================
# Linear maps
# =====================================================================================================

_C_TYPE_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
    "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double",
    "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}


def _matmul_np(a, b):
    """``a @ b`` for numpy arrays, in float32 for float16/bfloat16 (numpy has no BLAS for them).

    Small products run on one BLAS thread (see ``_blas_threads``).
    """
    if a.dtype in _HALF_TYPES:
        return _blas_matmul(a.astype(_F32), b.astype(_F32)).astype(a.dtype)
    return _blas_matmul(a, b)


def _vector_norm_np(x, p, axis, keepdims=True):
    """The ``p``-norm of ``x`` along ``axis`` (real result), as ``linalg.vector_norm``."""
    a = np.abs(x)
    if p == 2:
        return np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))
    if p == 1:
        return np.sum(a, axis=axis, keepdims=keepdims)
    if p == math.inf:
        return np.max(a, axis=axis, keepdims=keepdims, initial=0) if a.size else np.sum(a, axis=axis, keepdims=keepdims)
    if p == -math.inf:
        return np.min(a, axis=axis, keepdims=keepdims)
    if p == 0:
        return np.sum(a != 0, axis=axis, keepdims=keepdims).astype(a.dtype)
    with np.errstate(all="ignore"):
        return np.power(np.sum(np.power(a, p), axis=axis, keepdims=keepdims), 1.0 / p)


# =====================================================================================================
# Distances
# =====================================================================================================


def _common_dtype(*values):
    return D.result_type_of(tuple(v for v in values if v is not None))


def _distance_dtype(op, *tensors):
    """The dtype of a p-norm distance: promoted, integers -> default float, complex -> real."""
    dtype = _common_dtype(*tensors)
    if dtype is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
            "operator instead."
        )
    return dtype


def _pairwise_distance_meta(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    """The ``p``-norm distance ``||x1 - x2 + eps||_p`` along the last dim, after broadcasting.

    Args:
        x1 (Tensor): ``(*, D)``.
        x2 (Tensor): broadcastable with ``x1``.
        p (float): the norm's exponent (0, negative and ``inf`` included).
        eps (float): added to the difference (avoids a zero norm).
        keepdim (bool): keep the last dim with size 1.

    Returns:
        Tensor: the broadcast shape without its last dim; integers give the default float
        dtype, complex its real dtype.

    Raises:
        RuntimeError: if the shapes don't broadcast, or for bool inputs.

    Example:
        >>> import ember
        >>> ember.pairwise_distance(ember.tensor([[0.0, 0.0]]), ember.tensor([[3.0, 4.0]]), eps=0.0)
        tensor([5.])
    """
    _check_tensor("pairwise_distance", "x1", x1)
    _check_tensor("pairwise_distance", "x2", x2, 2)
    _number("pairwise_distance", "p", p, 3)
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    dtype = _float_result(_distance_dtype("pairwise_distance", x1, x2)).to_real()
    if not shape:
        return MetaArray((), dtype.numpy_dtype)
    out = shape[:-1] + ((1,) if keepdim else ())
    return MetaArray(out, dtype.numpy_dtype)


def _wrapping_diff(x1, x2):
    """``x1 - x2`` of two tensors in their promoted dtype, integers wrapping as in C (numpy array)."""
    dtype = _common_dtype(x1, x2).numpy_dtype
    with np.errstate(all="ignore"):
        return np.subtract(x1._data, x2._data, dtype=dtype)


def _difference(x1, x2, work):
    """``x1 - x2`` in the float computation dtype ``work`` (integer inputs subtract first, wrapping)."""
    if _common_dtype(x1, x2).category < D.FLOATING:
        return _wrapping_diff(x1, x2).astype(work)
    return np.subtract(_compute(x1._data, work), _compute(x2._data, work))


def _pairwise_distance_np(diff, p, eps):
    """Norms of the last-dim vectors of ``diff + eps`` (a numpy array in the computation dtype)."""
    with np.errstate(all="ignore"):
        diff = np.asarray(diff + np.asarray(eps, diff.dtype))
        if diff.ndim == 0:
            return np.abs(diff) if p != 0 else (diff != 0).astype(np.abs(diff).dtype)
        return _vector_norm_np(diff, float(p), -1, keepdims=False)


def _vector_norm(x, p, dim, keepdim=False):
    if "linalg_vector_norm" in registry:
        return _E.linalg_vector_norm(x, p, dim, keepdim=keepdim)
    return _E.norm(x, p, dim, keepdim=keepdim)
