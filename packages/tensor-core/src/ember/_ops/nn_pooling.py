"""ember.nn.functional: max, average, power-average (lp) and adaptive pooling, in 1, 2 and 3 dims.

* ``max_pool1d``..``max_pool3d`` and ``adaptive_max_pool1d``..``3d`` are
  composites over the prims ``max_pool{n}d_with_indices`` and
  ``adaptive_max_pool{n}d_with_indices``, which return the argmax of every
  window with the maxima (autograd records those and keeps the indices for
  the backward, as PyTorch does). The composites keep CPU kernels of their
  own, so calls without autograd run as before (``max_pool{n}d`` without
  ``return_indices`` skips computing the indices).
* The CPU kernels are C++/OpenMP loops of ``ember._C`` over the ``N * C``
  planes (float32/float64, integers where PyTorch takes them); float16 and
  bfloat16 compute in float32 and cast back.
* The CPU kernels are also the ops' CUDA kernels: they hand CuPy arrays to
  :mod:`ember.cuda.kernels.pooling` (:data:`_device`), so on cuda they run as
  on CPU, composites included.
"""

from __future__ import annotations

import collections
import math
import numbers
import operator

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._nn_common import _E, _F32, _NN, _NN_ONLY, _check_tensor, _fmt, _not_implemented
from ._registry import COMPOSITE, defop, registry
from ._spatial import (
    _F64,
    _FLOATS,
    _I64,
    _INT_TYPES,
    _LETTERS,
    _check_dtype,
    _compute,
    _empty_nonbatch_dim,
    _int_arg,
    _is_int,
    _lift3,
    _memoized,
    _planes,
    _pool_param,
)

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry


def _pool_output_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling output size of one dim; ``ceil_mode`` windows must start inside the input or left padding."""
    numerator = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = numerator // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _check_pool_input(op, n, shape):
    """Whether the input is unbatched; raises unless it has n+1 or n+2 dims with non-empty non-batch dims."""
    if len(shape) not in (n + 1, n + 2) or 0 in shape[len(shape) - n - 1:]:
        raise RuntimeError(f"{op}: Expected {n + 1}D or {n + 2}D (batch mode) tensor with optional 0 dim batch size "
                           f"for input, but got: {_fmt(shape)}")
    return len(shape) == n + 1


@_memoized
def _window_plan(op, n, input, kernel_size, stride, padding, dilation, ceil_mode, *, positions=(2, 3, 4, 5)):
    """Check a pooling window; return (kernel, stride, padding, dilation, out spatial sizes, unbatched)."""
    _check_tensor(op, "input", input)
    shape = input._data.shape
    unbatched = _check_pool_input(op, n, shape)
    k = _pool_param(op, "kernel_size", kernel_size, positions[0], n)
    s = _pool_param(op, "stride", stride, positions[1], n, optional=True) or k
    p = _pool_param(op, "padding", padding, positions[2], n)
    d = (1,) * n if dilation is None else _pool_param(op, "dilation", dilation, positions[3], n)
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: kernel_size must be greater than zero, but got kernel_size={_fmt(k)}")
    if any(v <= 0 for v in s):
        raise RuntimeError("stride should not be zero")
    if any(v < 0 for v in p):
        raise RuntimeError(f"pad must be non-negative, but got pad: {min(p)}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation={_fmt(d)}")
    for i in range(n):
        if p[i] > k[i] // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation={d[i]}")
    spatial = shape[len(shape) - n:]
    out = tuple(_pool_output_size(spatial[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(n))
    if any(o < 1 for o in out):
        channels = shape[-n - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (channels, *spatial)))}). Calculated output size: "
                           f"({'x'.join(map(str, (channels, *out)))}). Output size is too small")
    return k, s, p, d, out, unbatched


def _max_pool_run(x, n, k, s, p, d, out, with_indices):
    """Max pooling of numpy x (…, *spatial): values, or (values, int64 flat indices per plane)."""
    lead = x.shape[:x.ndim - n]
    planes = _planes(_compute(x), n)
    result = _C.max_pool(planes, _lift3(out, 1), _lift3(k, 1), _lift3(s, 1), _lift3(p, 0), _lift3(d, 1),
                         with_indices)
    if with_indices:
        values, indices = result
        return values.reshape((*lead, *out)).astype(x.dtype, copy=False), indices.reshape((*lead, *out))
    return result.reshape((*lead, *out)).astype(x.dtype, copy=False)


def _pool_return_type(name):
    """The namedtuple ``(values, indices)`` of a ``*_with_indices`` op (``ember.return_types.<name>``)."""
    cls = collections.namedtuple(name, ["values", "indices"])
    cls.__module__ = "ember.return_types"
    return cls


#: The CUDA kernels of pooling (:mod:`ember.cuda.kernels.pooling`), installed by its ``register()`` when the
#: CUDA backend initialises; the CPU kernels below hand it the arrays that are not numpy's (CuPy).
_device = None


def _max_pool_any(x, n, k, s, p, d, out, with_indices):
    """Max pooling: ember._C for numpy arrays, the CUDA kernels for others (CuPy)."""
    if type(x) is np.ndarray:
        return _max_pool_run(x, n, k, s, p, d, out, with_indices)
    return _device.max_pool(x, n, k, s, p, d, out, with_indices)


def _avg_pool_any(x, n, k, s, p, out, count_include_pad, divisor_override):
    """Average pooling: ember._C for numpy arrays, the CUDA kernels for others (CuPy)."""
    if type(x) is np.ndarray:
        return _avg_pool_run(x, n, k, s, p, out, count_include_pad, divisor_override)
    return _device._avg_pool_xp(x, n, k, s, p, out, count_include_pad, divisor_override)


def _make_max_pool(n):
    """``max_pool{n}d_with_indices`` (the prim) and ``max_pool{n}d`` (a composite over it), as in PyTorch.

    The prim returns the argmax of every window with the maxima, so autograd saves
    the indices at forward time and its backward is one scatter, with no second
    pooling pass. ``max_pool{n}d`` keeps a fused kernel of its own, which skips the
    indices where nobody asks for them (inference); under autograd it is recorded
    as its decomposition, the prim.
    """
    name = f"max_pool{n}d"
    with_name = f"{name}_with_indices"
    letters = _LETTERS[n]
    spatial = ", ".join(letters)

    @_memoized
    def plan(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
        k, s, p, d, out, unbatched = _window_plan(name, n, input, kernel_size, stride, padding, dilation, ceil_mode)
        allowed = (*_INT_TYPES, *_FLOATS) if (return_indices or n > 1) else _FLOATS
        _check_dtype(f"{name}_impl" if n == 1 else name, input, allowed)
        return k, s, p, d, input._data.shape[:input._data.ndim - n] + out

    def with_meta(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        shape = plan(input, kernel_size, stride, padding, dilation, ceil_mode, True)[-1]
        return MetaArray(shape, input._data.dtype), MetaArray(shape, _I64)

    def with_cpu(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        k, s, p, d, shape = plan(input, kernel_size, stride, padding, dilation, ceil_mode, True)
        return _max_pool_any(input._data, n, k, s, p, d, shape[len(shape) - n:], True)

    def meta(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        shape = plan(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)[-1]
        values = MetaArray(shape, input._data.dtype)
        return (values, MetaArray(shape, _I64)) if return_indices else values

    def cpu(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        k, s, p, d, shape = plan(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
        return _max_pool_any(input._data, n, k, s, p, d, shape[len(shape) - n:], bool(return_indices))

    def decomposition(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        values, indices = getattr(_E, with_name)(input, kernel_size, stride, padding, dilation, ceil_mode)
        return (values, indices) if return_indices else values

    args_doc = """
        kernel_size (int or tuple[int]): window size.
        stride (int or tuple[int], optional): window step; default ``kernel_size``.
        padding (int or tuple[int]): implicit -inf padding on both sides, at most half the kernel. Default 0.
        dilation (int or tuple[int]): spacing of window elements. Default 1.
        ceil_mode (bool): round the output size up (windows must start inside the
            input or the left padding). Default False."""
    out_doc = """``(…, *out)`` with
        ``out = (in + 2 * padding - dilation * (k - 1) - 1) // stride + 1`` (rounded up
        with ``ceil_mode``)"""
    raises_doc = """
    Raises:
        RuntimeError: for wrong dims, bad parameters or an output size below 1.
        NotImplementedError: for bool and complex inputs.
"""
    meta.__name__ = name
    meta.__doc__ = f"""{n}-D max pooling over (N, C, {spatial}) or unbatched (C, {spatial}) inputs.

    Args:
        input (Tensor): floating or integer (integers only with ``return_indices``
            for 1-D pooling, as in PyTorch).{args_doc}
        return_indices (bool): also return the argmax of every window. Default False.

    Returns:
        Tensor, or (Tensor, Tensor): the maxima, {out_doc}; with ``return_indices`` also int64 indices into each
        flattened input plane (what :func:`max_unpool{n}d` takes). NaN wins a window.
{raises_doc}"""
    with_meta.__name__ = with_name
    with_meta.__doc__ = f"""{n}-D max pooling that also returns the argmax of every window.

    ``max_pool{n}d(..., return_indices=True)``, as its own op: ``max_pool{n}d`` is
    defined by it, and autograd records it, keeping the indices for the backward.

    Args:
        input (Tensor): floating or integer, (N, C, {spatial}) or unbatched (C, {spatial}).{args_doc}

    Returns:
        (Tensor, Tensor): ``(values, indices)``: the maxima, {out_doc}, and int64 indices into each flattened
        input plane. NaN wins a window.
{raises_doc}"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2., 0.], [3., 4., 8., 7.]]])
        >>> ember.nn.functional.max_pool2d(x, 2, return_indices=True)
        (tensor([[[5., 8.]]]), tensor([[[1, 6]]]))
"""
        with_meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2., 0.], [3., 4., 8., 7.]]])
        >>> values, indices = ember.nn.functional.max_pool2d_with_indices(x, 2)
        >>> indices
        tensor([[[1, 6]]])
"""
    op = defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_NN)
    # PyTorch has torch.max_pool1d_with_indices, but max_pool2d/3d_with_indices only in torch.nn.functional
    defop(with_name, with_meta, cpu=with_cpu, tags=_NN if n == 1 else _NN_ONLY,
          return_type=_pool_return_type(with_name))
    return op


max_pool1d = _make_max_pool(1)
max_pool2d = _make_max_pool(2)
max_pool3d = _make_max_pool(3)


_AVG_TYPES = {1: (D.int64, *_FLOATS), 2: (D.int64, *_FLOATS), 3: (D.int64, D.float32, D.float64)}
_AVG_KERNELS = {1: "avg_pool2d", 2: "avg_pool2d", 3: "avg_pool3d_out_frame"}


def _avg_pool_run(x, n, k, s, p, out, count_include_pad, divisor_override):
    lead = x.shape[:x.ndim - n]
    planes = _planes(_compute(x), n)
    result = _C.avg_pool(planes, _lift3(out, 1), _lift3(k, 1), _lift3(s, 1), _lift3(p, 0), bool(count_include_pad),
                         0 if divisor_override is None else divisor_override)
    return result.reshape((*lead, *out)).astype(x.dtype, copy=False)


def _make_avg_pool(n):
    name = f"avg_pool{n}d"
    spatial = ", ".join(_LETTERS[n])

    @_memoized
    def plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        k, s, p, _, out, _ = _window_plan(name, n, input, kernel_size, stride, padding, None, ceil_mode)
        if divisor_override is not None:
            divisor_override = _int_arg(name, "divisor_override", divisor_override, 7)
            if divisor_override == 0:
                raise RuntimeError("divisor must be not zero")
        _check_dtype(_AVG_KERNELS[n], input, _AVG_TYPES[n])
        return k, s, p, out, divisor_override, input._data.shape[:input._data.ndim - n] + out

    if n == 1:
        def meta(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
            shape = plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)[-1]
            return MetaArray(shape, input._data.dtype)

        def cpu(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
            k, s, p, out, _, _ = plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)
            return _avg_pool_any(input._data, n, k, s, p, out, count_include_pad, None)
    else:
        def meta(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
            shape = plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)[-1]
            return MetaArray(shape, input._data.dtype)

        def cpu(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
            k, s, p, out, div, _ = plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                        divisor_override)
            return _avg_pool_any(input._data, n, k, s, p, out, count_include_pad, div)

    divisor_doc = "" if n == 1 else """
        divisor_override (int, optional): divide every window sum by this instead. Default None."""
    types = "int64 or floating" if n < 3 else "int64, float32 or float64"
    meta.__name__ = name
    meta.__doc__ = f"""{n}-D average pooling over (N, C, {spatial}) or unbatched (C, {spatial}) inputs.

    Args:
        input (Tensor): {types} (int64 sums divide truncating toward zero).
        kernel_size (int or tuple[int]): window size.
        stride (int or tuple[int], optional): window step; default ``kernel_size``.
        padding (int or tuple[int]): implicit zero padding on both sides, at most half the kernel. Default 0.
        ceil_mode (bool): round the output size up. Default False.
        count_include_pad (bool): count padding zeros in the divisor. Default True.{divisor_doc}

    Returns:
        Tensor: ``(…, *out)``, ``out = (in + 2 * padding - k) // stride + 1`` (rounded up with ``ceil_mode``).

    Raises:
        RuntimeError: for wrong dims, bad parameters, a zero divisor or an output size below 1.
        NotImplementedError: for other dtypes.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2., 0.], [3., 4., 8., 7.]]])
        >>> ember.nn.functional.avg_pool2d(x, 2)
        tensor([[[3.2500, 4.2500]]])
"""
    return defop(name, meta, cpu=cpu, tags=_NN if n == 1 else _NN_ONLY)


avg_pool1d = _make_avg_pool(1)
avg_pool2d = _make_avg_pool(2)
avg_pool3d = _make_avg_pool(3)


@_memoized
def _adaptive_plan(op, n, input, output_size):
    _check_tensor(op, "input", input)
    shape = input._data.shape
    if len(shape) not in (n + 1, n + 2):
        raise RuntimeError(f"{op}(): Expected {n + 1}D or {n + 2}D tensor, but got {_fmt(shape)}")
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != n:
            raise RuntimeError(f"{op}: output_size must be {n}")
        sizes = tuple(shape[len(shape) - n + i] if v is None else v for i, v in enumerate(output_size))
    else:
        sizes = (output_size,) * n
    for v in sizes:
        if not _is_int(v):
            raise TypeError(f"{op}(): argument 'output_size' must be tuple of ints, but found element of type "
                            f"{type(v).__name__}")
    sizes = tuple(operator.index(v) for v in sizes)
    if any(v < 0 for v in sizes):
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to 0 but received "
                           f"{{{', '.join(map(str, sizes))}}}")
    empty = _empty_nonbatch_dim(shape, n)
    if empty is not None:
        raise RuntimeError(f"{op}(): Expected input to have non-zero size for non-batch dimensions, but input "
                           f"has sizes {_fmt(shape)} with dimension {empty} being empty")
    _check_dtype(op, input, _FLOATS)
    return sizes, shape[:len(shape) - n] + sizes


def _adaptive_avg(x, n, sizes, shape):
    """Adaptive average pooling of x (…, *spatial) to ``sizes``; ``shape`` is the result's."""
    if type(x) is not np.ndarray:
        return _device._adaptive_avg_xp(x, n, sizes, shape)
    result = _C.adaptive_avg_pool(_planes(_compute(x), n), _lift3(sizes, 1))
    return result.reshape(shape).astype(x.dtype, copy=False)


def _make_adaptive_avg_pool(n):
    name = f"adaptive_avg_pool{n}d"
    spatial = ", ".join(_LETTERS[n])

    def meta(input, output_size):
        return MetaArray(_adaptive_plan(name, n, input, output_size)[1], input._data.dtype)

    def cpu(input, output_size):
        sizes, shape = _adaptive_plan(name, n, input, output_size)
        return _adaptive_avg(input._data, n, sizes, shape)

    meta.__name__ = name
    meta.__doc__ = f"""{n}-D adaptive average pooling to a given output size, over (N, C, {spatial}) or (C, {spatial}).

    Output cell ``i`` of a dim of size ``n -> m`` averages input cells
    ``floor(i * n / m)`` to ``ceil((i + 1) * n / m) - 1``.

    Args:
        input (Tensor): floating, with non-empty non-batch dims.
        output_size (int or tuple[int or None]): the output's spatial size; None keeps an input size.

    Returns:
        Tensor: ``(…, *output_size)``.

    Raises:
        RuntimeError: for wrong dims, empty non-batch dims or negative sizes.
        NotImplementedError: for non-floating dtypes.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2.], [3., 4., 9.]]])
        >>> ember.nn.functional.adaptive_avg_pool2d(x, (1, 2))
        tensor([[[3.2500, 5.0000]]])
"""
    return defop(name, meta, cpu=cpu, tags=_NN if n == 1 else _NN_ONLY)


adaptive_avg_pool1d = _make_adaptive_avg_pool(1)
adaptive_avg_pool2d = _make_adaptive_avg_pool(2)
adaptive_avg_pool3d = _make_adaptive_avg_pool(3)


def _make_adaptive_max_pool(n):
    """``adaptive_max_pool{n}d`` (a composite) over ``adaptive_max_pool{n}d_with_indices`` (the prim).

    As for max pooling: autograd records the prim and keeps its indices for the backward.
    """
    name = f"adaptive_max_pool{n}d"
    with_name = f"{name}_with_indices"
    spatial = ", ".join(_LETTERS[n])

    def run(input, output_size):
        sizes, shape = _adaptive_plan(name, n, input, output_size)
        x = input._data
        if type(x) is not np.ndarray:
            return _device._adaptive_max_xp(x, n, sizes, shape)
        values, indices = _C.adaptive_max_pool(_planes(_compute(x), n), _lift3(sizes, 1))
        return values.reshape(shape).astype(x.dtype, copy=False), indices.reshape(shape)

    def with_meta(input, output_size):
        shape = _adaptive_plan(name, n, input, output_size)[1]
        return MetaArray(shape, input._data.dtype), MetaArray(shape, _I64)

    def meta(input, output_size, return_indices=False):
        values, indices = with_meta(input, output_size)
        return (values, indices) if return_indices else values

    def cpu(input, output_size, return_indices=False):
        values, indices = run(input, output_size)
        return (values, indices) if return_indices else values

    def decomposition(input, output_size, return_indices=False):
        values, indices = getattr(_E, with_name)(input, output_size)
        return (values, indices) if return_indices else values

    args_doc = """
        input (Tensor): floating, with non-empty non-batch dims.
        output_size (int or tuple[int or None]): the output's spatial size; None keeps an input size."""
    raises_doc = """
    Raises:
        RuntimeError: for wrong dims, empty non-batch dims or negative sizes.
        NotImplementedError: for non-floating dtypes.
"""
    meta.__name__ = name
    meta.__doc__ = f"""{n}-D adaptive max pooling to a given output size, over (N, C, {spatial}) or (C, {spatial}).

    Windows are those of ``adaptive_avg_pool{n}d``.

    Args:{args_doc}
        return_indices (bool): also return int64 argmax indices into each flattened input plane. Default False.

    Returns:
        Tensor, or (Tensor, Tensor): ``(…, *output_size)`` maxima (and indices).
{raises_doc}"""
    with_meta.__name__ = with_name
    with_meta.__doc__ = f"""{n}-D adaptive max pooling that also returns the argmax of every window.

    ``adaptive_max_pool{n}d(..., return_indices=True)``, as its own op:
    ``adaptive_max_pool{n}d`` is defined by it, and autograd records it, keeping the
    indices for the backward.

    Args:{args_doc}

    Returns:
        (Tensor, Tensor): ``(values, indices)``, each ``(…, *output_size)``: the maxima and
        int64 indices into each flattened input plane.
{raises_doc}"""
    op = defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_NN if n == 1 else _NN_ONLY)
    defop(with_name, with_meta, cpu=run, tags=_NN_ONLY, return_type=_pool_return_type(with_name))
    return op


adaptive_max_pool1d = _make_adaptive_max_pool(1)
adaptive_max_pool2d = _make_adaptive_max_pool(2)
adaptive_max_pool3d = _make_adaptive_max_pool(3)


def _make_lp_pool(n):
    name = f"lp_pool{n}d"
    spatial = ", ".join(_LETTERS[n])

    @_memoized
    def plan(input, norm_type, kernel_size, stride, ceil_mode):
        """(window plan, powered dtype or None for the max path, result dtype, output shape)."""
        _check_tensor(name, "input", input)
        if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real):
            raise TypeError(f"{name}(): argument 'norm_type' must be a real number, not {type(norm_type).__name__}")
        if n == 1 and not _is_int(kernel_size):
            raise TypeError(f"lp_pool1d(): argument 'kernel_size' must be int, not {type(kernel_size).__name__}")
        if math.isinf(norm_type):
            window = _window_plan(f"max_pool{n}d", n, input, kernel_size, stride, 0, 1, ceil_mode)
            if n == 1:
                _check_dtype("max_pool1d_impl", input, _FLOATS)
            else:
                _check_dtype(f"max_pool{n}d", input, (*_INT_TYPES, *_FLOATS))
            return window, None, input.dtype, input._data.shape[:input._data.ndim - n] + window[4]
        if norm_type == 0:
            raise ZeroDivisionError("float division by zero")
        dtype = input.dtype
        if dtype.is_floating_point:
            powered = dtype
        elif isinstance(norm_type, numbers.Integral) and dtype.category <= D.INTEGRAL:
            if norm_type < 0:
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            powered = D.int64 if dtype is D.bool else dtype
        else:
            powered = D.get_default_dtype()
        if powered not in _AVG_TYPES[n]:
            raise _not_implemented(_AVG_KERNELS[n], powered)
        window = _window_plan(f"avg_pool{n}d", n, input, kernel_size, stride, 0, None, ceil_mode)
        result = powered if powered.is_floating_point else D.get_default_dtype()
        return window, powered, result, input._data.shape[:input._data.ndim - n] + window[4]

    def meta(input, norm_type, kernel_size, stride=None, ceil_mode=False):
        _, _, result, shape = plan(input, norm_type, kernel_size, stride, ceil_mode)
        return MetaArray(shape, result.numpy_dtype)

    def cpu(input, norm_type, kernel_size, stride=None, ceil_mode=False):
        (k, s, p, d, out, _), powered, result, _ = plan(input, norm_type, kernel_size, stride, ceil_mode)
        x = input._data
        if powered is None:
            with np.errstate(all="ignore"):
                if norm_type > 0:
                    return _max_pool_any(np.abs(x), n, k, s, p, d, out, False)
                return -_max_pool_any(-np.abs(x), n, k, s, p, d, out, False)
        with np.errstate(all="ignore"):
            if powered.is_floating_point:
                y = np.power(_compute(x.astype(powered.numpy_dtype, copy=False)), norm_type)
            else:
                y = np.power(x.astype(powered.numpy_dtype, copy=False), norm_type)
            avg = _avg_pool_any(y, n, k, s, p, out, True, None)
            compute = _F64 if result is D.float64 else _F32
            avg = avg.astype(compute, copy=False)
            value = np.sign(avg) * np.maximum(np.abs(avg), 0) * compute.type(math.prod(k))
            return np.power(value, compute.type(1.0 / norm_type)).astype(result.numpy_dtype, copy=False)

    meta.__name__ = name
    meta.__doc__ = f"""{n}-D power-average pooling: ``(sum over a window of x ** p) ** (1 / p)``.

    Over (N, C, {spatial}) or unbatched (C, {spatial}) inputs.

    Computed as PyTorch does: ``avg_pool{n}d(x ** p) * prod(kernel_size)`` raised to
    ``1 / p`` (so integer inputs with an integer ``p`` sum truncated averages);
    ``p = inf`` is the max of ``|x|``, ``p = -inf`` minus the max of ``-|x|``.

    Args:
        input (Tensor): floating, int64 or bool (see ``avg_pool{n}d``).
        norm_type (float): the power ``p``, non-zero.
        kernel_size (int or tuple[int]): window size.
        stride (int or tuple[int], optional): window step; default ``kernel_size``.
        ceil_mode (bool): round the output size up. Default False.

    Returns:
        Tensor: ``(…, *out)``; floating inputs keep their dtype, others give the default float.

    Raises:
        ZeroDivisionError: for ``norm_type`` 0.
        RuntimeError: for wrong dims, bad parameters or an output size below 1.
        NotImplementedError: for dtypes ``avg_pool{n}d`` refuses.
"""
    return defop(name, meta, cpu=cpu, tags=_NN_ONLY)


lp_pool1d = _make_lp_pool(1)
lp_pool2d = _make_lp_pool(2)
lp_pool3d = _make_lp_pool(3)


# The CPU kernels take CuPy arrays too (through _device): registered for "cuda", they run there as on CPU,
# composites included (so max_pool{n}d without return_indices skips the indices).
for _name in (f"{kind}{_n}d{suffix}" for _n in (1, 2, 3)
              for kind, suffix in (("max_pool", ""), ("max_pool", "_with_indices"), ("avg_pool", ""),
                                   ("adaptive_avg_pool", ""), ("adaptive_max_pool", ""),
                                   ("adaptive_max_pool", "_with_indices"), ("lp_pool", ""))):
    registry[_name].register_kernel("cuda", registry[_name].kernels["cpu"])
del _name
