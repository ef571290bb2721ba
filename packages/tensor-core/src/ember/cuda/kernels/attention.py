"""``scaled_dot_product_attention`` on CUDA tensors without dispatching its steps (forward and gradient).

Without a mask or dropout, attention's decomposition (``ember._ops.nn_attention``) is five or six ops per call
(the query scaled, two matrix products, the causal bias added, the fused softmax) and its gradient formula
(``ember.autograd.derivatives.nn_attention``) about a dozen, each paying the dispatcher's host time. Here the
same steps run on the CuPy arrays with the kernels those ops reach (the fast pointwise kernels, cuBLAS'
strided-batched GEMM through :func:`ember.cuda._bf16.product_into`, the row kernels), in the same order, so the
values are the ops' bit for bit:

* :func:`forward` is the op's ``cuda`` kernel (after its meta function): for other calls (a mask, dropout,
  grouped heads, other dtypes or layouts) it runs the decomposition, as before;
* :func:`backward` is called by the gradient formula for plain cuda tensors in a backward pass that records
  nothing; None sends it back to the formula's ops.
"""

from __future__ import annotations

import math

import numpy as np

from ..._tensor import Tensor
from .. import _bf16
from .._runtime import cupy_module
from . import _arrays, pointwise, products, rows

__all__ = ["forward", "backward", "register"]

_FLOATS = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def _arrays_of(query, key, value):
    """The CuPy arrays of ``query``, ``key`` and ``value`` when the fused steps take them: plain cuda tensors of
    one float32/float64 dtype on the current GPU, at least 3-D, the same batch dims (no broadcasting, no grouped
    heads), matching head widths and key/value lengths, nothing empty; else None."""
    array_type = _arrays.array_type()
    if type(query) is not Tensor or type(key) is not Tensor or type(value) is not Tensor or array_type is None:
        return None
    q, k, v = query._data, key._data, value._data
    if type(q) is not array_type or type(k) is not array_type or type(v) is not array_type:
        return None
    if q.dtype not in _FLOATS or k.dtype != q.dtype or v.dtype != q.dtype or q.ndim < 3:
        return None
    if k.ndim != q.ndim or v.ndim != q.ndim or k.shape[:-2] != q.shape[:-2] or v.shape[:-2] != q.shape[:-2]:
        return None
    if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2] or 0 in q.shape or 0 in k.shape or 0 in v.shape:
        return None
    return (q, k, v) if _arrays.on_current_gpu(q, k, v) else None


def _scale_of(scale, e):
    return (1.0 / math.sqrt(e) if e else 1.0) if scale is None else scale


def _times(a, s):
    """``a * s`` for a float Python number ``s``: the fast pointwise kernel ``mul`` as the op runs it."""
    operand = pointwise._scalar_operand(s, a.dtype)
    if operand is None:
        return None
    out = pointwise._ndarray(a.shape, a.dtype)
    return pointwise._launch(pointwise._compile("mul", a.dtype, "as", a.dtype), (a, operand), (a,), out, a.size)


def _product(a, b):
    """``a @ b`` for stacks with equal batch dims, as the checked ``matmul`` kernel computes it (None where that
    kernel declines: sizes beyond cuBLAS' 32-bit ones)."""
    batch = a.shape[:-2]
    if not products._sizes_fit(a.shape[-2], a.shape[-1], b.shape[-1], math.prod(batch)):
        return None
    out = cupy_module().ndarray(batch + (a.shape[-2], b.shape[-1]), a.dtype)
    return _bf16.product_into(out, a, b)


def _with_causal_bias(scores, query):
    """``scores + causal_bias`` as the decomposition and the formula add it (the cached bias, the repeated-operand
    add kernel); None when there is no cached bias (then the ops run)."""
    from ..._ops.nn_attention import causal_bias

    bias = causal_bias(scores.shape[-2], scores.shape[-1], query)
    if bias is None:
        return None
    return pointwise._broadcast_binary("add", scores, bias._data, False)


def forward(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """The attention output's CuPy array for the calls the fused steps take (no mask, no dropout), else None.

    Runs where the op's kernel runs (below autograd and the dispatch modes)."""
    if attn_mask is not None or dropout_p != 0 or type(is_causal) is not bool:
        return None
    arrays = _arrays_of(query, key, value)
    if arrays is None:
        return None
    q, k, v = arrays
    # the decomposition: matmul(query * scale, key^T) (+ causal bias), softmax, matmul with value. The scaled
    # query is the op (a strided query takes the generic multiply, whose result layout the product then reads).
    qs = (query * _scale_of(scale, q.shape[-1]))._data
    scores = _product(qs, k.swapaxes(-1, -2))
    if scores is not None and is_causal:
        scores = _with_causal_bias(scores, query)
    if scores is None:
        return None
    return _product(rows.softmax_forward(scores, -1), v)


def backward(grad, query, key, value, is_causal, scale, output_mask):
    """``(d query, d key, d value, None)`` tensors of the gradient formula without a mask or grouped heads (the
    attention weights recomputed, as the formula does), or None for the calls the fused steps do not take."""
    arrays = _arrays_of(query, key, value)
    if arrays is None or type(grad) is not Tensor or type(grad._data) is not _arrays.array_type():
        return None
    q, k, v = arrays
    g = grad._data
    if g.dtype != q.dtype or g.shape != q.shape[:-1] + (v.shape[-1],):
        return None
    s = _scale_of(scale, q.shape[-1])
    # the formula: scores = matmul(query, key^T) * scale (+ causal bias); p = softmax(scores)
    scores = _product(q, k.swapaxes(-1, -2))
    scores = None if scores is None else _times(scores, s)
    if scores is not None and is_causal:
        scores = _with_causal_bias(scores, query)
    if scores is None:
        return None
    p = rows.softmax_forward(scores, -1)
    d_query = d_key = d_value = None
    if output_mask[2]:
        d_value = _product(p.swapaxes(-1, -2), g)
    if output_mask[0] or output_mask[1]:
        dp = _product(g, v.swapaxes(-1, -2))
        if dp is None:
            return None
        ds = rows.softmax_backward(dp, p, p.ndim - 1)
        if output_mask[0]:
            d_query = _product(ds, k)
            d_query = None if d_query is None else _times(d_query, s)
        if output_mask[1]:
            d_key = _product(ds.swapaxes(-1, -2), q)
            d_key = None if d_key is None else _times(d_key, s)
    if any(m and r is None for m, r in zip(output_mask, (d_query, d_key, d_value))):
        return None  # a step declined: the formula's ops give every gradient
    device = query._device
    wrap = lambda a: None if a is None else Tensor._make(a, device)  # noqa: E731
    return wrap(d_query), wrap(d_key), wrap(d_value), None


def register():
    """Install :func:`forward` in front of attention's cuda path (its decomposition) (idempotent)."""
    from ..._ops._registry import registry

    op = registry["scaled_dot_product_attention"]
    if "cuda" in op.kernels:
        return
    decomposition = op.decomposition

    def kernel(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        out = forward(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        if out is not None:
            return out
        return decomposition(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                             scale=scale, enable_gqa=enable_gqa)

    kernel.__name__ = "scaled_dot_product_attention_cuda"
    op.register_kernel("cuda", kernel)
