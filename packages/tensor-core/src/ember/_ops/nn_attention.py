"""ember.nn.functional: attention and distances.

``scaled_dot_product_attention``, ``cosine_similarity``, ``pairwise_distance`` and ``pdist``.

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from . import _blas_threads
from ._nn_common import (
    _C_TYPE_NAMES,
    _E,
    _NN,
    _NN_ONLY,
    _check_optional_tensor,
    _check_tensor,
    _common_dtype,
    _composite,
    _compute,
    _compute_dtype,
    _difference,
    _distance_dtype,
    _float_result,
    _fmt,
    _int_arg,
    _not_implemented,
    _number,
    _pairwise_distance_meta,
    _pairwise_distance_np,
    _vector_norm,
    _vector_norm_np,
)
from ._pointwise_helpers import _torch_name
from ._shapes import broadcast_shapes, wrap_dim
from .random import _default_noise

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


# =====================================================================================================
# Attention
# =====================================================================================================


def _sdpa_shapes(query, key, value, attn_mask, is_causal, enable_gqa, dropout_p):
    """Checks of scaled_dot_product_attention; returns the output shape and the key/value head repeats."""
    for name, t, pos in (("query", query, 1), ("key", key, 2), ("value", value, 3)):
        _check_tensor("scaled_dot_product_attention", name, t, pos)
    _check_optional_tensor("scaled_dot_product_attention", "attn_mask", attn_mask, 4)
    qs, ks, vs = query._data.shape, key._data.shape, value._data.shape  # plain tuples: cheaper than .shape
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
            f"{len(qs)} key.dim: {len(ks)} and value.dim: {len(vs)} instead."
        )
    if not query.dtype is key.dtype is value.dtype:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_C_TYPE_NAMES[query.dtype.name]} key.dtype: {_C_TYPE_NAMES[key.dtype.name]} and value.dtype: "
            f"{_C_TYPE_NAMES[value.dtype.name]} instead."
        )
    if attn_mask is not None and attn_mask.dtype not in (D.bool, D.float32, query.dtype):
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
            f"{_C_TYPE_NAMES[attn_mask.dtype.name]} and  query.dtype: {_C_TYPE_NAMES[query.dtype.name]} instead."
        )
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if query.dtype.category != D.FLOATING:
        raise RuntimeError(f"expected scalar type Float but found {_torch_name(query.dtype)}")
    seq_l, e = qs[-2:]
    seq_s, ek = ks[-2:]
    if ek != e:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{math.prod(ks[:-2])}, {e}] "
            f"but got: [{math.prod(ks[:-2])}, {ek}]."
        )
    if vs[-2] != seq_s:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{math.prod(vs[:-2])}, "
            f"{seq_s}] but got: [{math.prod(vs[:-2])}, {vs[-2]}]."
        )
    repeats = (1, 1)
    if qs[:-2] == ks[:-2] == vs[:-2] and attn_mask is None:  # the common call: one batch shape, no mask
        return qs[:-1] + vs[-1:], repeats
    k_batch, v_batch = list(ks[:-2]), list(vs[:-2])
    if enable_gqa and len(qs) >= 3 and len(ks) >= 3 and len(vs) >= 3:
        hq, hk, hv = qs[-3], ks[-3], vs[-3]
        if hq % hk or hq % hv:
            raise RuntimeError(
                "Number of heads in key and value must divide the number of heads in query"
            )
        repeats = (hq // hk, hq // hv)
        k_batch[-1] *= repeats[0]
        v_batch[-1] *= repeats[1]
    batch = broadcast_shapes(qs[:-2], tuple(k_batch), tuple(v_batch))
    if attn_mask is not None:
        scores = batch + (seq_l, seq_s)
        full = broadcast_shapes(scores, tuple(attn_mask.shape))
        if full != scores:
            raise RuntimeError(f"output with shape {_fmt(scores)} doesn't match the broadcast shape {_fmt(full)}")
    return batch + (seq_l, vs[-1]), repeats


def _scaled_dot_product_attention_meta(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                       scale=None, enable_gqa=False):
    """Attention (Vaswani et al., 2017): ``softmax(query @ key.mT * scale + mask) @ value``.

    ``scale`` defaults to ``1 / sqrt(E)``. A bool ``attn_mask`` says which keys
    each query may attend to (True = attend); a float mask is added to the
    scores. ``is_causal`` applies the lower-triangular mask (query ``i``
    attends to keys ``0..i``). A query row with every key masked gives zeros.
    With ``enable_gqa`` key/value may have fewer heads (dim -3) than the query;
    each is repeated to match (grouped-query attention). ``dropout_p > 0``
    drops attention weights at random (from :data:`ember.default_generator`).

    Args:
        query (Tensor): ``(*, L, E)``, floating point.
        key (Tensor): ``(*, S, E)``.
        value (Tensor): ``(*, S, Ev)``.
        attn_mask (Tensor, optional): bool, float32 or the query's dtype, broadcastable to ``(*, L, S)``.
        dropout_p (float): dropout probability of the attention weights.
        is_causal (bool): apply a causal mask (then ``attn_mask`` must be None).
        scale (float, optional): the score scale.
        enable_gqa (bool): allow fewer key/value heads than query heads.

    Returns:
        Tensor: ``(*, L, Ev)``.

    Raises:
        RuntimeError: for mismatched shapes or dtypes, a mask with ``is_causal``, or ``dropout_p`` outside [0, 1].

    Example:
        >>> import ember
        >>> q = k = ember.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> v = ember.tensor([[1.0], [3.0]])
        >>> ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        tensor([[1.0000],
                [2.3395]])
    """
    shape, _ = _sdpa_shapes(query, key, value, attn_mask, is_causal, enable_gqa, dropout_p)
    return MetaArray(shape, query._data.dtype)


def _sdpa_mask_np(attn_mask, is_causal, seq_l, seq_s, dtype):
    """The additive mask (a numpy array, -inf where masked) or None."""
    if is_causal:
        allowed = np.tril(np.ones((seq_l, seq_s), dtype=bool))
        return np.where(allowed, np.asarray(0, dtype), np.asarray(-np.inf, dtype))
    if attn_mask is None:
        return None
    m = attn_mask._data
    if m.dtype == np.bool_:
        return np.where(m, np.asarray(0, dtype), np.asarray(-np.inf, dtype))
    return m.astype(dtype)


_ROW_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _short_rows(scores, unmasked):
    """Whether ``ember._C.softmax_rows`` takes these attention scores: numpy float32/float64 rows of at most
    ``nn_softmax._SHORT_ROW`` keys, none of them fully masked (``unmasked``: no mask, or only the causal one)."""
    from . import nn_softmax

    return (unmasked and type(scores) is np.ndarray and scores.dtype in _ROW_KERNEL_DTYPES
            and scores.shape[-1] <= nn_softmax._SHORT_ROW and nn_softmax._HAS_SOFTMAX_ROWS)


def _fused_gemm(*arrays):
    """``(address, ilp64)`` of numpy's cblas gemm for the dtype of ``arrays`` when ``ember._C``'s attention
    kernels take them: numpy float32/float64 arrays of one dtype, one batch shape and no empty dim (query,
    key, value and the gradient of one call, no broadcasting); None otherwise."""
    first = arrays[0]
    if first.dtype not in _ROW_KERNEL_DTYPES or first.ndim < 2 or not hasattr(_C, "attention_forward"):
        return None
    batch = first.shape[:-2]
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != first.dtype or a.shape[:-2] != batch or 0 in a.shape:
            return None
    return _blas_threads.cblas_gemm(first.dtype)


def attention_arrays(q, k, v, scale, causal):
    """``softmax(scale q k^T) v`` (``causal``: row i sees keys 0..i) of numpy arrays ``(*, L, E)``,
    ``(*, S, E)``, ``(*, S, Ev)`` by ``ember._C.attention_forward`` (csrc/attention.cpp: blocks of query
    rows, numpy's BLAS on one thread, ember's OpenMP threads), or None for arrays it does not take
    (:func:`_fused_gemm`)."""
    gemm = _fused_gemm(q, k, v)
    if gemm is None:
        return None
    return _call_fused(_C.attention_forward, gemm, (q, k, v), (float(scale), bool(causal), _C.get_num_threads()))


def attention_gradient_arrays(g, q, k, v, scale, causal, output_mask):
    """``(dq, dk, dv)`` of :func:`attention_arrays`'s output for its gradient ``g`` (None where
    ``output_mask`` is False) by ``ember._C.attention_backward``, which recomputes the weights from ``q`` and
    ``k`` as the forward computed them; None for arrays it does not take."""
    gemm = _fused_gemm(g, q, k, v)
    if gemm is None or k.shape[-1] != q.shape[-1] or g.shape[-1] != v.shape[-1] or g.shape[-2] != q.shape[-2]:
        return None
    want = tuple(bool(m) for m in output_mask[:3])
    return _call_fused(_C.attention_backward, gemm, (g, q, k, v),
                       (float(scale), bool(causal), *want, _C.get_num_threads()))


def _call_fused(kernel, gemm, arrays, rest):
    """``kernel(*gemm, *arrays, *rest)`` with numpy's BLAS on one thread. The kernel reads each matrix with unit
    column stride and rows at least a row apart (a transposed ``(B, T, H, D)`` head view is read as it is); it
    refuses other layouts with ValueError, and then gets C-contiguous copies."""
    try:
        return _blas_threads.one_thread(kernel, *gemm, *arrays, *rest)
    except ValueError:
        return _blas_threads.one_thread(kernel, *gemm, *(np.ascontiguousarray(a) for a in arrays), *rest)


def _scaled_dot_product_attention_cpu(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                      scale=None, enable_gqa=False):
    shape, (rep_k, rep_v) = _sdpa_shapes(query, key, value, attn_mask, is_causal, enable_gqa, dropout_p)
    q, k, v = _compute(query._data), _compute(key._data), _compute(value._data)
    seq_l, e = q.shape[-2:]
    if scale is None:
        scale = 1.0 / math.sqrt(e) if e else math.inf
    if attn_mask is None and dropout_p == 0 and rep_k == 1 and rep_v == 1:
        out = attention_arrays(q, k, v, scale, is_causal)  # None for arrays it does not take
        if out is not None:
            return out if out.dtype == query._data.dtype else out.astype(query._data.dtype)
    if rep_k > 1:
        k = np.repeat(k, rep_k, axis=-3)
    if rep_v > 1:
        v = np.repeat(v, rep_v, axis=-3)
    seq_s = k.shape[-2]
    with np.errstate(all="ignore"):
        scores = np.matmul(q, np.swapaxes(k, -1, -2))
        scores *= np.asarray(scale if e else 1.0, scores.dtype)
        if is_causal:  # -inf above the diagonal, in place: the bits of adding the 0/-inf mask, 3x faster
            np.copyto(scores, np.asarray(-np.inf, scores.dtype), where=~np.tri(seq_l, seq_s, dtype=bool))
        else:
            mask = _sdpa_mask_np(attn_mask, False, seq_l, seq_s, scores.dtype)
            if mask is not None:
                scores = scores + mask
        if seq_s == 0:
            return np.zeros(shape, query._data.dtype)
        if _short_rows(scores, attn_mask is None):
            # no row fully masked (no mask, or causal): short rows in one C++ pass (csrc/nn_rows_backward.cpp)
            weights = _C.softmax_rows(np.ascontiguousarray(scores), False)
        else:
            top = scores.max(axis=-1, keepdims=True)
            dead = np.isneginf(top)
            weights = np.exp(scores - np.where(dead, 0, top))
            total = weights.sum(axis=-1, keepdims=True)
            weights /= np.where(dead, 1, total)
        if dropout_p > 0:
            keep = _default_noise(weights).random(weights.shape) < 1.0 - dropout_p
            weights = weights * keep / (1.0 - dropout_p) if dropout_p < 1 else weights * 0
        out = np.matmul(weights, v)
    if out.shape == shape and out.dtype == query._data.dtype:
        return out  # a fresh array already: no copy
    return np.broadcast_to(out, shape).astype(query._data.dtype)


_causal_biases = {}  # (device, dtype, L, S) -> the (L, S) causal bias: 0 where a query sees a key, -inf elsewhere


def causal_bias(seq_l, seq_s, scores):
    """The additive causal mask of ``scores``' device and dtype, cached, for the GPU outside dispatch modes
    (traced graphs build theirs from ops); None elsewhere. ``scores + bias`` is exact (``x + 0`` is ``x``), so
    ``softmax(scores + bias)`` equals the masked chain, and with ``is_causal`` no row is fully masked (row ``i``
    sees key 0), so no row needs the chain's fully-masked guard. On the GPU this is two launches (add, the
    fused softmax) where the chain takes about a dozen, each costing host time."""
    from ._dispatch import ops_intercepted

    device = scores._device
    if device.type != "cuda" or ops_intercepted() or not scores.dtype.is_floating_point:
        return None
    key = (device, scores.dtype, seq_l, seq_s)
    bias = _causal_biases.get(key)
    if bias is None:
        allowed = np.tril(np.ones((seq_l, seq_s), dtype=bool))
        values = np.where(allowed, 0.0, -np.inf).astype(scores.dtype.numpy_dtype)
        from .._creation import tensor

        bias = _causal_biases[key] = tensor(values, device=device)
    return bias


def _scaled_dot_product_attention_decomp(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                         scale=None, enable_gqa=False):
    _, (rep_k, rep_v) = _sdpa_shapes(query, key, value, attn_mask, is_causal, enable_gqa, dropout_p)
    if rep_k > 1:
        key = _E.repeat_interleave(key, rep_k, -3)
    if rep_v > 1:
        value = _E.repeat_interleave(value, rep_v, -3)
    seq_l, e = query.shape[-2:]
    seq_s = key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(e) if e else 1.0
    # The (L, S) scores are the big tensors here (12x the query for a 512-token, 64-wide head): scale the
    # query instead of the scores (exact for the default scale of a power-of-4 head width, e.g. 1/8 for 64)
    # and, without a mask, take one softmax op (one fused kernel on cuda, forward and backward).
    scores = _E.matmul(query * scale, key.transpose(-2, -1))
    if not is_causal and attn_mask is None and seq_s:
        weights = _E.softmax(scores, -1)
        if dropout_p > 0:
            weights = _E.dropout(weights, dropout_p, True)
        return _E.matmul(weights, value)
    bias = causal_bias(seq_l, seq_s, scores) if is_causal else None
    if bias is not None:  # no row is fully masked: one add and the fused softmax
        weights = _E.softmax(scores + bias, -1)
        if dropout_p > 0:
            weights = _E.dropout(weights, dropout_p, True)
        return _E.matmul(weights, value)
    if is_causal:
        allowed = _E.tril(_E.ones((seq_l, seq_s), dtype=D.bool, device=query.device))
        scores = _E.masked_fill(scores, _E.logical_not(allowed), -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype is D.bool:
            scores = _E.masked_fill(scores, _E.logical_not(attn_mask), -math.inf)
        else:
            scores = scores + attn_mask.to(scores.dtype)
    top = _E.amax(scores, -1, keepdim=True)
    dead = _E.isneginf(top)
    weights = _E.exp(scores - _E.where(dead, _E.zeros_like(top), top))
    weights = weights / _E.where(dead, _E.ones_like(top), _E.sum(weights, -1, keepdim=True))
    if dropout_p > 0:
        weights = _E.dropout(weights, dropout_p, True)
    return _E.matmul(weights, value)


scaled_dot_product_attention = _composite(
    "scaled_dot_product_attention", _scaled_dot_product_attention_meta, cpu=_scaled_dot_product_attention_cpu,
    decomposition=_scaled_dot_product_attention_decomp, tags=_NN_ONLY,
)


def _cosine_similarity_meta(x1, x2, dim=1, eps=1e-08):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``, after broadcasting.

    ``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps))`` over ``dim``.

    Args:
        x1 (Tensor): floating point.
        x2 (Tensor): broadcastable with ``x1``.
        dim (int): the dimension of the vectors.
        eps (float): lower bound of each norm.

    Returns:
        Tensor: the broadcast shape without ``dim``, of the promoted dtype.

    Raises:
        RuntimeError: if the shapes don't broadcast or the common dtype is not floating point.
        IndexError: if ``dim`` is out of range.

    Example:
        >>> import ember
        >>> ember.cosine_similarity(ember.tensor([[1.0, 0.0]]), ember.tensor([[1.0, 1.0]]))
        tensor([0.7071])
    """
    _check_tensor("cosine_similarity", "x1", x1)
    _check_tensor("cosine_similarity", "x2", x2, 2)
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    d = wrap_dim(_int_arg("cosine_similarity", "dim", dim, 3), len(shape))
    dtype = _common_dtype(x1, x2)
    if dtype.category != D.FLOATING:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is {_torch_name(dtype)}")
    out = tuple(s for i, s in enumerate(shape) if i != d)
    return MetaArray(out, dtype.numpy_dtype)


def _cosine_similarity_cpu(x1, x2, dim=1, eps=1e-08):
    dtype = _common_dtype(x1, x2).numpy_dtype
    a, b = _compute(x1._data, dtype), _compute(x2._data, dtype)
    a, b = np.broadcast_arrays(a, b)
    if a.ndim == 0:
        a, b = a.reshape(1), b.reshape(1)
    axis = wrap_dim(dim, a.ndim)
    eps = np.asarray(eps, dtype).astype(a.dtype)  # as small as the input dtype can hold (0 in float16 for 1e-8)
    with np.errstate(all="ignore"):
        na = np.maximum(np.sqrt(np.sum(a * a, axis=axis, keepdims=True)), eps)
        nb = np.maximum(np.sqrt(np.sum(b * b, axis=axis, keepdims=True)), eps)
        out = np.sum((a / na) * (b / nb), axis=axis)
    return np.asarray(out).reshape(_cosine_similarity_meta(x1, x2, dim, eps).shape).astype(dtype, copy=False)


def _cosine_similarity_decomp(x1, x2, dim=1, eps=1e-08):
    dtype = _common_dtype(x1, x2)
    a, b = _E.broadcast_tensors(x1.to(dtype), x2.to(dtype))
    if a.ndim == 0:
        return (a / _E.clamp(_E.abs(a), min=eps)) * (b / _E.clamp(_E.abs(b), min=eps))
    na = _E.clamp(_E.sqrt(_E.sum(a * a, dim, keepdim=True)), min=eps)
    nb = _E.clamp(_E.sqrt(_E.sum(b * b, dim, keepdim=True)), min=eps)
    return _E.sum((a / na) * (b / nb), dim)


cosine_similarity = _composite(
    "cosine_similarity", _cosine_similarity_meta, cpu=_cosine_similarity_cpu,
    decomposition=_cosine_similarity_decomp, tags=_NN,
)


def _pairwise_distance_cpu(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    common = _distance_dtype("pairwise_distance", x1, x2)
    work = _compute_dtype(_float_result(common).numpy_dtype)
    out = _pairwise_distance_np(_difference(x1, x2, work), p, eps)
    shape = _pairwise_distance_meta(x1, x2, p, eps, keepdim).shape
    return np.asarray(out).reshape(shape).astype(_float_result(common).to_real().numpy_dtype, copy=False)


def _pairwise_distance_decomp(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    _distance_dtype("pairwise_distance", x1, x2)
    diff = x1 - x2 + eps  # integers subtract (and wrap) before eps makes them float, as in PyTorch
    if diff.ndim == 0:
        return _vector_norm(diff.reshape(1), p, 0)
    return _vector_norm(diff, p, -1, keepdim)


pairwise_distance = _composite(
    "pairwise_distance", _pairwise_distance_meta, cpu=_pairwise_distance_cpu,
    decomposition=_pairwise_distance_decomp, tags=_NN,
)


def _pdist_meta(input, p=2):
    """The ``p``-norm distances between the rows of ``input``, for each pair ``i < j`` (row-major order).

    Args:
        input (Tensor): ``(N, M)``, float32 or float64.
        p (float): the norm's exponent, ``>= 0`` (``inf`` included).

    Returns:
        Tensor: ``(N * (N - 1) / 2,)``.

    Raises:
        RuntimeError: for a non-2-D input, a negative ``p`` or a dtype that is not floating point.
        NotImplementedError: for float16 and bfloat16.

    Example:
        >>> import ember
        >>> ember.pdist(ember.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
        tensor([5.0000, 1.0000, 4.2426])
    """
    _check_tensor("pdist", "input", input)
    p = _number("pdist", "p", p, 2)
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if input.dtype.category != D.FLOATING:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    if input.dtype in (D.float16, D.bfloat16):
        raise _not_implemented("pdist", input.dtype)
    n = input.shape[0]
    return MetaArray((n * (n - 1) // 2,), input._data.dtype)


def _pdist_cpu(input, p=2):
    x = input._data
    n = x.shape[0]
    i, j = np.triu_indices(n, k=1)
    if i.size == 0:
        return np.zeros((0,), x.dtype)
    out = _vector_norm_np(x[i] - x[j], float(p), 1, keepdims=False)
    return np.asarray(out).astype(x.dtype, copy=False)


def _pdist_decomp(input, p=2):
    n = input.shape[0]
    rows = _E.triu_indices(n, n, 1, device=input.device)
    diff = _E.index_select(input, 0, rows[0]) - _E.index_select(input, 0, rows[1])
    return _vector_norm(diff, p, 1)


pdist = _composite("pdist", _pdist_meta, cpu=_pdist_cpu, decomposition=_pdist_decomp, tags=_NN)
