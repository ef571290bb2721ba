"""logsumexp and norm."""

from __future__ import annotations

import math

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._array_module import as_array as _as_array
from ._array_module import cuda_runs_cpu_kernel as _cuda_runs_cpu_kernel
from ._pointwise_helpers import _torch_name
from ._reduction_helpers import (
    _LOW_FLOATS,
    _REDUCTION,
    _axis,
    _c_reduce,
    _check_dtype_arg,
    _check_tensor,
    _count,
    _dims,
    _finish,
    _op,
    _out_shape,
    _upcast,
)
from ._registry import COMPOSITE, defop
from .extrema import _C_ABS_MAX, _C_ABS_MIN, _c_extreme, amax, amin
from .sums import sum

__all__ = []

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["norm", "logsumexp"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# -- logsumexp, norm -------------------------------------------------------------------------------------


def _logsumexp_meta(input, dim, keepdim=False):
    """``log(sum(exp(input), dim))``, computed stably (the largest value is factored out).

    Args:
        input (Tensor): any dtype; integer and bool inputs give the default float dtype.
        dim (int or tuple of ints): the dims to reduce.
        keepdim (bool): keep the reduced dims with size 1.

    Returns:
        Tensor: ``-inf`` for an empty reduction.

    Example:
        >>> import ember
        >>> ember.logsumexp(ember.tensor([[0., 0.], [1., 1.]]), dim=1)
        tensor([0.6931, 1.6931])
    """
    _check_tensor("logsumexp", input)
    data = input._data
    dims = _dims("logsumexp", dim, data.ndim)
    out = input.dtype if input.dtype.category >= D.FLOATING else D.get_default_dtype()
    return MetaArray(_out_shape(data.shape, dims, keepdim), out.numpy_dtype)


def _logsumexp_cpu(input, dim, keepdim=False):
    data = input._data
    dims = _dims("logsumexp", dim, data.ndim)
    out = input.dtype if input.dtype.category >= D.FLOATING else D.get_default_dtype()
    x = _upcast(data.astype(out.numpy_dtype) if data.dtype != out.numpy_dtype else data)
    axis = _axis(x, dims)
    with np.errstate(all="ignore"):
        shift = np.max(x.real, axis=axis, keepdims=True, initial=-np.inf)
        shift = np.where(np.isfinite(shift), shift, 0).astype(x.real.dtype)
        total = np.sum(np.exp(x - shift), axis=axis, keepdims=keepdim)
        result = np.log(total) + (shift if keepdim else shift.reshape(total.shape))
    return _finish(result, out.numpy_dtype)


def _logsumexp_decomp(input, dim, keepdim=False):
    _logsumexp_meta(input, dim, keepdim)
    if input.dtype.category < D.FLOATING:
        input = input.to(D.get_default_dtype())
    shape = tuple(input.shape)
    dims = _dims("logsumexp", dim, input.ndim)
    if _count(shape, dims) == 0:  # an empty sum: log(0)
        return _op("full")(_out_shape(shape, dims, keepdim), -math.inf, dtype=input.dtype, device=input.device)
    shift = amax(_op("real")(input) if input.dtype.is_complex else input, dim, True)
    shift = _op("where")(_op("isfinite")(shift), shift, 0)
    total = sum(_op("exp")(_op("sub")(input, shift)), dim, keepdim)
    if not keepdim:
        shift = _op("reshape")(shift, _out_shape(shape, dims, False))
    return _op("add")(_op("log")(total), shift)


logsumexp = defop("logsumexp", _logsumexp_meta, cpu=_logsumexp_cpu, category=COMPOSITE,
                  decomposition=_logsumexp_decomp, has_out=True, tags=_REDUCTION)


def _norm_plan(input, p, dim, keepdim, dtype):
    """Check ``norm``'s arguments; return ("vector", ord, dims) or ("nuclear", None, dims), and the result dtype."""
    _check_tensor("norm", input)
    _check_dtype_arg("norm", dtype)
    ndim = input._data.ndim
    if isinstance(dim, (tuple, list)):
        dim_list = list(dim)
    elif dim is None:
        dim_list = None
    else:
        dim_list = [dim]
    if isinstance(p, str):
        if p == "fro" and (dim_list is None or len(dim_list) <= 2):
            kind, ord_ = "vector", 2.0
        elif p in ("fro", "nuc"):
            kind, ord_ = ("nuclear" if p == "nuc" else "frobenius"), None
        else:
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    else:
        if p is None:
            p = 2.0
        if not isinstance(p, (int, float)) or isinstance(p, bool):
            raise TypeError(f"norm(): argument 'p' must be a number or a string, not {type(p).__name__}")
        kind, ord_ = "vector", float(p)
    if kind == "vector":
        out = _vector_norm_dtype(input, dtype)
        dims = _dims("norm", dim_list, ndim)
        shape = input._data.shape
        if ord_ < 0 or ord_ == math.inf:
            if input._data.size == 0 and dim_list in (None, []):
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {_fmt_ord(ord_)} norm on an empty tensor because the "
                    "operation does not have an identity"
                )
            for d in dims:
                if shape and shape[d] == 0:
                    raise RuntimeError(
                        f"linalg.vector_norm cannot compute the {_fmt_ord(ord_)} norm on the dimension {d} because "
                        "this dimension is empty and the operation does not have an identity"
                    )
        return kind, ord_, dims, out
    # matrix norms: over exactly two dims
    if ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    dims_given = list(range(ndim)) if dim_list is None else dim_list
    if len(dims_given) != 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got " + " ".join(str(d) for d in dims_given))
    dims = _dims("norm", dims_given, ndim)
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(
            f"linalg.matrix_norm: Expected a floating point or complex tensor as input. Got {_torch_name(input.dtype)}"
        )
    if input.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"linalg.matrix_norm: Low precision dtypes not supported. Got {_torch_name(input.dtype)}")
    out = _vector_norm_dtype(input, dtype)
    return kind, ord_, dims, out


def _fmt_ord(ord_):
    if ord_ in (math.inf, -math.inf):
        return "inf" if ord_ > 0 else "-inf"
    return f"{ord_:g}"


def _vector_norm_dtype(input, dtype):
    if input.dtype.category < D.FLOATING:
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {_torch_name(input.dtype)}"
        )
    if dtype is None:
        return input.dtype.to_real()
    if dtype.category < D.FLOATING:
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be floating point or complex, but got {_torch_name(dtype)}"
        )
    if input.dtype.is_complex and not dtype.is_complex:
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be complex for complex inputs, but got {_torch_name(dtype)}"
        )
    if D.promote_types(input.dtype, dtype) is not dtype:
        raise RuntimeError(
            f"linalg.vector_norm: the dtype of the input ({_torch_name(input.dtype)}) should be convertible without "
            f"narrowing to the specified dtype ({_torch_name(dtype)})"
        )
    return dtype.to_real()


def _norm_meta(input, p="fro", dim=None, keepdim=False, *, dtype=None):
    """The vector or matrix norm of ``input`` (PyTorch's ``torch.norm``).

    * ``p`` a number (or ``None`` = 2): the vector p-norm over ``dim`` (every element by default):
      ``sum(|x|^p)^(1/p)``; ``inf``/``-inf`` give ``max``/``min(|x|)``, ``0`` the count of nonzeros.
    * ``p="fro"``: the Frobenius norm (the 2-norm of the elements) over up to two dims.
    * ``p="nuc"``: the nuclear norm (sum of singular values) over two dims (all of a 2-D input).

    Args:
        input (Tensor): floating or complex.
        p (int, float, inf, "fro" or "nuc"): the order.
        dim (int or tuple of ints, optional): the dims to reduce.
        keepdim (bool): keep the reduced dims with size 1.
        dtype (ember.dtype, optional): compute in this dtype (no narrowing of ``input``'s dtype).

    Returns:
        Tensor: real (complex inputs give their real dtype).

    Raises:
        RuntimeError: for integer or bool inputs, an unknown order, a matrix norm over other than two dims,
            or an ``inf``/negative norm of an empty reduction.

    Example:
        >>> import ember
        >>> ember.norm(ember.tensor([3., 4.]))
        tensor(5.)
        >>> ember.norm(ember.tensor([[1., -2.], [3., 0.]]), p=1, dim=1)
        tensor([3., 3.])
    """
    kind, _, dims, out = _norm_plan(input, p, dim, keepdim, dtype)
    return MetaArray(_out_shape(input._data.shape, dims, keepdim), out.numpy_dtype)


def _norm_cpu(input, p="fro", dim=None, keepdim=False, *, dtype=None):
    kind, ord_, dims, out = _norm_plan(input, p, dim, keepdim, dtype)
    data = input._data
    if dtype is not None and data.dtype != dtype.numpy_dtype:
        data = data.astype(dtype.numpy_dtype)
    data = _upcast(data)
    if kind == "nuclear":
        return _finish(_nuclear_norm(data, dims, keepdim), out.numpy_dtype)
    result = _c_vector_norm(data, ord_, dims, keepdim)
    if result is not None:
        return _finish(result, out.numpy_dtype)
    axis = _axis(data, dims)
    if ord_ == 2.0 and data.dtype.kind == "f":
        with np.errstate(all="ignore"):
            if len(dims) == data.ndim and data.flags.c_contiguous:  # every element: one BLAS dot product
                flat = data.reshape(-1)
                total = _as_array(np.dot(flat, flat))
                result = np.sqrt(total.reshape((1,) * data.ndim) if keepdim else total)
            elif type(data) is np.ndarray:
                result = np.sqrt(np.add.reduce(data * data, axis=axis, keepdims=keepdim))
            else:  # CuPy (its ufuncs' reduce method is not general)
                result = np.sqrt(np.sum(data * data, axis=axis, keepdims=keepdim))
        return _finish(result, out.numpy_dtype)
    x = np.abs(data)
    with np.errstate(all="ignore"):
        if ord_ == 2.0:
            result = np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdim))
        elif ord_ == 1.0:
            result = np.sum(x, axis=axis, keepdims=keepdim)
        elif ord_ == math.inf:
            result = np.max(x, axis=axis, keepdims=keepdim)
        elif ord_ == -math.inf:
            result = np.min(x, axis=axis, keepdims=keepdim)
        elif ord_ == 0.0:
            result = np.sum(x != 0, axis=axis, keepdims=keepdim, dtype=x.dtype)
        else:
            result = np.power(np.sum(np.power(x, ord_), axis=axis, keepdims=keepdim), 1.0 / ord_)
    return _finish(result, out.numpy_dtype)


def _c_vector_norm(data, ord_, dims, keepdim):
    """The 1-, 2-, inf- or -inf-norm of real ``data`` over ``dims`` by ember._C, or None (numpy's turn).

    The 1- and 2-norms accumulate in float64; the inf-norms are exact. Small and empty inputs are left to numpy
    (``_c_reduce`` declines them).
    """
    if data.dtype.kind != "f" and data.dtype not in _LOW_FLOATS:
        return None
    if ord_ in (1.0, 2.0):
        p = int(ord_)
        return _c_reduce(lambda x, first, last: _C.norm_dims(x, first, last, p, False), data, dims, keepdim)
    if ord_ in (math.inf, -math.inf):
        return _c_extreme(data, dims, keepdim, _C_ABS_MAX if ord_ > 0 else _C_ABS_MIN)
    return None


def _nuclear_norm(data, dims, keepdim):
    d0, d1 = dims
    moved = np.moveaxis(data, (d0, d1), (-2, -1))
    xp = _array_namespace(data)
    if moved.size == 0:
        result = xp.zeros(moved.shape[:-2], dtype=moved.real.dtype)
    else:
        result = xp.linalg.svd(moved, compute_uv=False).sum(-1)
    if keepdim:
        result = np.expand_dims(result, (d0, d1))
    return result


def _norm_decomp(input, p="fro", dim=None, keepdim=False, *, dtype=None):
    kind, ord_, dims, out = _norm_plan(input, p, dim, keepdim, dtype)
    if kind == "nuclear":
        raise NotImplementedError("norm(p='nuc') needs singular values; no decomposition into ember ops")
    if dtype is not None:
        input = input.to(dtype)
    x = _op("abs")(input)
    if ord_ == math.inf:
        return amax(x, dims, keepdim)
    if ord_ == -math.inf:
        return amin(x, dims, keepdim)
    if ord_ == 0.0:
        return sum(_op("ne")(x, 0), dims, keepdim, dtype=out)
    if ord_ == 1.0:
        return sum(x, dims, keepdim)
    return _op("pow")(sum(_op("pow")(x, ord_), dims, keepdim), 1.0 / ord_)


norm = defop("norm", _norm_meta, cpu=_norm_cpu, category=COMPOSITE, decomposition=_norm_decomp, has_out=True,
             tags=_REDUCTION)
_cuda_runs_cpu_kernel(norm)  # the nuclear norm needs singular values (xp.linalg.svd), which no ember op gives
