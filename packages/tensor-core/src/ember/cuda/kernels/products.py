"""Matrix products on the GPU in the fewest host steps: ``matmul`` and ``linear`` of 2-D float32/float64/float16.

A small training step is bound by host time: PyTorch runs a whole ``linear`` in about 24 µs of host time
on the H200's machine, while ember's path through the meta function, the decomposition (``matmul`` then a
broadcast ``add``) and ``cupy.matmul`` took about 90 µs. The functions here are
the ops' checked cuda kernels (see :meth:`ember._ops._registry.Op.register_checked_kernel`): they check the
few things the common call needs (tensors of one float dtype, 2-D matrices whose inner dims agree, on the
current GPU) and call cuBLAS directly (:func:`ember.cuda._bf16.product_2d`); ``linear`` then adds its bias with one
small kernel (:func:`ember.cuda.kernels.columns.add_to_rows`), the same additions as its decomposition's
``add``. Anything else returns None and takes the op's usual path, with its meta function's checks and
error messages.
"""

from __future__ import annotations

import math

import numpy as np

from ..._tensor import Tensor
from .. import _bf16
from .._runtime import cupy_module
from . import _arrays, columns

__all__ = ["register", "matmul", "linear", "linear_backward"]

# float16 too: autocast's matrix products on cuda (cuBLAS on tensor cores, float32 accumulation; the generic
# path computed them as float32 GEMMs between casts)
_FLOATS = _bf16.FLOAT_GEMM_DTYPES | {np.dtype(np.float16)}
_INT_MAX = 2**31 - 1


def _contiguous_view(a, shape):
    """C-contiguous CuPy array ``a`` with another shape of as many elements: a view made directly (CuPy's
    ``reshape`` costs a few microseconds of host time more, and a linear layer makes several)."""
    return a if a.shape == shape else _arrays.array_type()(shape, a.dtype, a.data)


def _matrix(t, dtype):
    """``t``'s CuPy array if ``t`` is a tensor holding a matrix of ``dtype`` on the current GPU, else None."""
    if not isinstance(t, Tensor):
        return None
    data = t._data
    if type(data) is not _arrays.array_type() or data.dtype != dtype or data.ndim != 2:
        return None
    return data if _arrays.on_current_gpu(data) else None


def _sizes_fit(*sizes):
    return 0 not in sizes and max(sizes) <= _INT_MAX


def matmul(*args):
    """Checked cuda kernel of ``matmul(input, other)``: the product of two float32/float64/float16 matrices, or of
    two stacks of them with the same batch dims (attention's ``q @ k.transpose(-2, -1)``: one strided-batched
    cuBLAS call, transposed views read in place), or of a stack and one matrix (one GEMM over the stacked rows)."""
    if len(args) != 2 or not isinstance(args[0], Tensor):
        return None
    dtype = args[0]._data.dtype
    if dtype not in _FLOATS:
        return None
    a, b = _matrix(args[0], dtype), _matrix(args[1], dtype)
    if a is None or b is None:
        return _stacked(args[0], args[1], dtype)
    if a.shape[1] != b.shape[0] or not _sizes_fit(a.shape[0], a.shape[1], b.shape[1]):
        return None
    return _bf16.product_2d(a, b)


def _stacked(input, other, dtype):
    """:func:`matmul` of stacks: ``input`` (*B, M, K) and ``other`` (*B, K, N) or (K, N) of ``dtype`` on the current
    GPU, with no broadcasting between batch dims; None for any other call."""
    if not isinstance(other, Tensor):
        return None
    a, b = input._data, other._data
    array_type = _arrays.array_type()
    if type(a) is not array_type or type(b) is not array_type or b.dtype != dtype or a.ndim < 3 or b.ndim < 2:
        return None
    if (b.ndim > 2 and a.shape[:-2] != b.shape[:-2]) or a.shape[-1] != b.shape[-2]:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = a.shape[:-2]
    rows = math.prod(batch) * m if b.ndim == 2 else m
    if not _sizes_fit(rows, k, n, math.prod(batch)) or not _arrays.on_current_gpu(a, b):
        return None
    out = _arrays.array_type()(batch + (m, n), dtype)
    return _bf16.product_into(out, a, b)


def linear(*args):
    """Checked cuda kernel of ``linear(input, weight[, bias])``: float32/float64/float16, ``input`` (*, K) with
    C-contiguous leading dims, ``weight`` (N, K), ``bias`` (N,) or None."""
    if not 2 <= len(args) <= 3 or not isinstance(args[0], Tensor):
        return None
    x = args[0]._data
    dtype = x.dtype
    if type(x) is not _arrays.array_type() or dtype not in _FLOATS or x.ndim < 2:
        return None
    w = _matrix(args[1], dtype)
    if w is None or w.shape[1] != x.shape[-1]:
        return None
    bias = args[2] if len(args) == 3 else None
    b = None
    if bias is not None:
        if not isinstance(bias, Tensor):
            return None
        b = bias._data
        if type(b) is not _arrays.array_type() or b.dtype != dtype or b.shape != (w.shape[0],):
            return None
    lead = x.shape[:-1]
    if x.ndim > 2:
        if not x._c_contiguous:
            return None
        x = _contiguous_view(x, (math.prod(lead), x.shape[-1]))
    if not _arrays.on_current_gpu(x) or (b is not None and not _arrays.on_current_gpu(b)):
        return None
    if not _sizes_fit(x.shape[0], x.shape[1], w.shape[0]) or (b is not None and not b._c_contiguous):
        return None
    out = _bf16.product_2d(x, w.T)
    if b is not None:
        columns.add_to_rows(out, b)
    return _contiguous_view(out, lead + (w.shape[0],)) if len(lead) > 1 else out


def linear_backward(grad, input, weight, output_mask):
    """The gradients of ``linear(input, weight[, bias])`` on CUDA tensors, for its derivative in a backward
    pass that records nothing: ``grad @ weight``, ``grad.T @ input`` (one cuBLAS call each) and the column
    sums of ``grad``, where the formulas would dispatch two ``matmul``s, a ``transpose`` and a ``sum``.

    Args:
        grad (Tensor): the output gradient (*, N); input (Tensor): (*, K); weight (Tensor): (N, K).
        output_mask (sequence of 3 bool): which of the input, weight and bias gradients to compute.

    Returns:
        ``(d input, d weight, d bias)`` (None where not asked), the same values the formulas give; or None
        for calls it does not take (not float32/float64 CUDA tensors of one dtype on the current GPU,
        non-contiguous ``grad`` or ``input``, a 1-D weight or input, empty or oversized matrices).
    """
    array_type = _arrays.array_type()
    g, x, w = grad._data, input._data, weight._data
    if array_type is None or type(g) is not array_type or type(x) is not array_type or type(w) is not array_type:
        return None
    dtype = g.dtype
    if dtype not in _FLOATS or x.dtype != dtype or w.dtype != dtype or w.ndim != 2 or x.ndim < 2:
        return None
    outs, ins = w.shape
    if g.shape != x.shape[:-1] + (outs,) or x.shape[-1] != ins or not (g._c_contiguous and x._c_contiguous):
        return None
    if not _arrays.on_current_gpu(g, x, w):
        return None
    rows = math.prod(x.shape[:-1])
    if not _sizes_fit(rows, ins, outs):
        return None
    g2, x2 = _contiguous_view(g, (rows, outs)), _contiguous_view(x, (rows, ins))
    grads = (
        _contiguous_view(_bf16.product_2d(g2, w), x.shape) if output_mask[0] else None,
        _bf16.product_2d(g2.T, x2) if output_mask[1] else None,
        columns.column_sums(g2) if output_mask[2] else None,
    )
    device = grad._device
    return tuple(None if a is None else Tensor._make(a, device) for a in grads)


def register():
    """Install the checked cuda kernels of ``matmul`` and ``linear`` (idempotent)."""
    from ..._ops._registry import registry

    _arrays.bind(cupy_module())
    registry["matmul"].register_checked_kernel("cuda", matmul)
    registry["linear"].register_checked_kernel("cuda", linear)
