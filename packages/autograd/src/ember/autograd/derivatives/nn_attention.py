"""Derivatives of ``scaled_dot_product_attention`` and the distances.

See :mod:`ember.autograd.derivatives._nn_common` for the two treatments (formula or decomposition) the
``nn.functional`` ops get.
"""

from __future__ import annotations

import math

import numpy as np

import ember
from ember._ops import registry as _ops
from ember._ops.nn_attention import _short_rows, attention_gradient_arrays, causal_bias

from .._table import derivative, through_decomposition
from ._nn_common import _cpu_float_rows, _cuda_rows

_softmax = _ops["softmax"]
_ROW_DTYPES = (ember.float16, ember.bfloat16, ember.float32, ember.float64)  # those of the fused row kernels


def _sdpa_backward(grad, query, key, value, attn_mask, is_causal, scale, enable_gqa, output_mask):
    # without dropout: the attention weights are recomputed (the kernel returns only the output)
    if attn_mask is None and not output_mask[3] and _cuda_rows(grad, query, key, value) is not None:
        # plain cuda tensors, nothing records: the steps below on the arrays, without dispatching each
        from ember.cuda.kernels import attention

        fused = attention.backward(grad, query, key, value, is_causal, scale, output_mask)
        if fused is not None:
            return fused
    if attn_mask is None and not output_mask[3]:
        fast = _sdpa_backward_cpu(grad, query, key, value, is_causal, scale, output_mask)
        if fast is not None:
            return fast
    rep_k = rep_v = 1
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and value.ndim >= 3:
        rep_k = query.shape[-3] // key.shape[-3]
        rep_v = query.shape[-3] // value.shape[-3]
    k = ember.repeat_interleave(key, rep_k, -3) if rep_k > 1 else key
    v = ember.repeat_interleave(value, rep_v, -3) if rep_v > 1 else value
    e = query.shape[-1]
    seq_l, seq_s = query.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(e) if e else 1.0
    scores = ember.matmul(query, k.transpose(-2, -1)) * scale
    masked = is_causal or attn_mask is not None
    bias = causal_bias(seq_l, seq_s, scores) if is_causal else None
    if bias is not None:  # (cuda) one add instead of the mask's ops; no row is fully masked
        scores = scores + bias
        masked = False
    elif is_causal:
        allowed = ember.tril(ember.ones((seq_l, seq_s), dtype=ember.bool, device=query.device))
        scores = ember.masked_fill(scores, ember.logical_not(allowed), -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype is ember.bool:
            scores = ember.masked_fill(scores, ember.logical_not(attn_mask), -math.inf)
        else:
            scores = scores + attn_mask.to(scores.dtype)
    p = _softmax(scores, -1)
    if masked:
        p = ember.nan_to_num(p, nan=0.0)  # a row with every key masked gives zeros, not NaN
    d_query = d_key = d_value = d_mask = None
    if output_mask[2]:
        d_value = ember.matmul(p.transpose(-2, -1), grad)
        if rep_v > 1:
            d_value = _sum_groups(d_value, rep_v)
    if output_mask[0] or output_mask[1] or output_mask[3]:
        dp = ember.matmul(grad, v.transpose(-2, -1))
        rows = _cuda_rows(p, dp) if p.dtype in _ROW_DTYPES else None
        if rows is not None:  # softmax's backward, p * (dp - sum(dp * p)), as one fused row kernel
            ds = rows.softmax_backward_tensor(dp, p, p.ndim - 1)
        else:
            ds = p * (dp - ember.sum(dp * p, -1, keepdim=True))
        if output_mask[3]:
            d_mask = ds
        if output_mask[0]:
            d_query = ember.matmul(ds, k) * scale
        if output_mask[1]:
            d_key = ember.matmul(ds.transpose(-2, -1), query) * scale
            if rep_k > 1:
                d_key = _sum_groups(d_key, rep_k)
    return d_query, d_key, d_value, d_mask


def _sdpa_backward_cpu(grad, query, key, value, is_causal, scale, output_mask):
    """The gradients for plain CPU float32/float64 tensors of one dtype and one head count (no mask, no
    grouped heads) in a backward that records nothing: ember._C's attention kernel (csrc/attention.cpp) when
    it takes the arrays, else the formula's steps on the numpy arrays (products through numpy's BLAS,
    softmax's backward in one ember._C row kernel); None for every other call. The formula dispatches
    about fifteen ops, each costing more than its arithmetic on a small model's attention."""
    if query.ndim < 2 or key.shape[:-2] != query.shape[:-2] or value.shape[:-2] != query.shape[:-2]:
        return None
    cpu = _cpu_float_rows("softmax_backward", grad, query, key, value)
    if cpu is None or query.numel() == 0 or key.numel() == 0:
        return None
    _C, (g, q, k, v) = cpu
    e = q.shape[-1]
    seq_l, seq_s = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(e) if e else 1.0
    device = query.device
    wrap = ember.Tensor._make
    fused = attention_gradient_arrays(g, q, k, v, scale, is_causal, output_mask)  # csrc/attention.cpp
    if fused is not None:
        return (*(None if d is None else wrap(d, device) for d in fused), None)
    with np.errstate(all="ignore"):
        scores = np.matmul(q, np.swapaxes(k, -1, -2))
        scores *= np.asarray(scale, scores.dtype)
        if is_causal:  # row i sees keys 0..i: never a fully masked row
            np.copyto(scores, np.asarray(-np.inf, scores.dtype), where=~np.tri(seq_l, seq_s, dtype=bool))
        if _short_rows(scores, True):  # the forward kernel's own softmax, so p is the forward's weights
            p = _C.softmax_rows(scores, False)
        else:
            scores -= scores.max(axis=-1, keepdims=True)
            p = np.exp(scores, out=scores)
            p /= p.sum(axis=-1, keepdims=True)
        dq = dk = dv = None
        if output_mask[2]:
            dv = np.matmul(np.swapaxes(p, -1, -2), g)
        if output_mask[0] or output_mask[1]:
            ds = _C.softmax_backward(p, np.ascontiguousarray(np.matmul(g, np.swapaxes(v, -1, -2))), False)
            ds *= np.asarray(scale, ds.dtype)
            if output_mask[0]:
                dq = np.matmul(ds, k)
            if output_mask[1]:
                dk = np.matmul(np.swapaxes(ds, -1, -2), q)
    return (None if dq is None else wrap(dq, device), None if dk is None else wrap(dk, device),
            None if dv is None else wrap(dv, device), None)


def _sum_groups(g, rep):
    """The gradient of ``repeat_interleave(t, rep, -3)``: the ``rep`` copies of each head summed."""
    shape = tuple(g.shape)
    heads = shape[-3] // rep
    return ember.sum(g.reshape(shape[:-3] + (heads, rep) + shape[-2:]), -3)


# With dropout_p > 0 the kernel's dropout mask is lost, and only the decomposition (which draws the same
# mask and keeps it in its graph) can give the gradient; without dropout the formula is faster (about 15%
# on CPU for a causal 4x8x128x64 attention, forward and backward). A table that can send some calls of an
# op with a formula through its decomposition (``decompose_if``) gets both; one that can't gets the
# decomposition for every call.
try:
    derivative(
        "scaled_dot_product_attention",
        joint={("query", "key", "value", "attn_mask"): _sdpa_backward},
        decompose_if=lambda dropout_p: dropout_p > 0,
    )
except ValueError:
    through_decomposition("scaled_dot_product_attention")


def _cosine_similarity_backward(grad, x1, x2, dim, eps, result, output_mask):
    # cos = sum(a * b) / (max(|a|, eps) * max(|b|, eps)); as in PyTorch the clamps carry no gradient
    # (the norms are differentiated as if unclamped) and a zero vector's norm has gradient 0, not NaN
    dtype = result.dtype
    a, b = ember.broadcast_tensors(x1.to(dtype), x2.to(dtype))
    if a.ndim == 0:
        a, b = a.reshape(1), b.reshape(1)
    d = dim % a.ndim
    g = ember.unsqueeze(grad, d) if result.ndim < a.ndim else grad.reshape(1)
    cos = ember.unsqueeze(result, d) if result.ndim < a.ndim else result.reshape(1)

    def clamped_norm(u):
        n = ember.sqrt(ember.sum(u * u, d, keepdim=True))
        # max(|u|, eps) whose gradient is |u|'s, as PyTorch's clamp under no_grad (higher orders too)
        return n, n + (ember.clamp(n, min=eps) - n).detach()

    def one_side(u, w):
        n, nu = clamped_norm(u)
        _, nw = clamped_norm(w)
        unit = u / (n + (n == 0))  # u / |u|, 0 for a zero vector
        return g * (w / nw - cos * unit) / nu

    d1 = one_side(a, b) if output_mask[0] else None
    d2 = one_side(b, a) if output_mask[1] else None
    if x1.ndim == 0:
        d1 = d1.reshape(()) if d1 is not None else None
        d2 = d2.reshape(()) if d2 is not None else None
    return d1, d2


derivative("cosine_similarity", joint={("x1", "x2"): _cosine_similarity_backward})
# PyTorch's pairwise_distance is norm(x1 - x2 + eps); pdist's gradient is its norms' (0 at a zero distance)
through_decomposition("pairwise_distance", "pdist")
