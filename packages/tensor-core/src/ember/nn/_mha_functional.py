"""``ember.nn.functional.multi_head_attention_forward``: multi-head attention as one function of
its inputs and weights, as in PyTorch. :class:`ember.nn.MultiheadAttention` holds the weights and
calls it.

The steps (in-projection, learned key/value biases, a zero attention position, mask canonicalisation
and merging, scaled dot-product attention per head, out-projection) follow PyTorch's order, so that
with the same weights both agree on outputs, attention weights and gradients. This is a Python
composition of registry ops (like PyTorch's, it is not an op of its own): autograd, FX and dispatch
modes see the ops it calls.

Reference: Vaswani et al., "Attention Is All You Need" (2017), https://arxiv.org/abs/1706.03762.
"""

from __future__ import annotations

import math
import warnings

import ember

from ..overrides import handle_ember_function, has_ember_function
from . import functional as F

__all__ = ["multi_head_attention_forward"]


# =====================================================================================================
# Masks
# =====================================================================================================


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool mask (True = masked) as an additive float mask of ``target_type`` (-inf where True);
    a float mask unchanged.

    Raises:
        AssertionError: the mask is neither bool nor floating point.
    """
    if mask is None:
        return None
    mask_dtype = mask.dtype
    mask_is_float = mask.is_floating_point()
    if mask_dtype is not ember.bool and not mask_is_float:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask_dtype is not other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both instead.",
            stacklevel=3,
        )
    if not mask_is_float:
        mask = ember.zeros_like(mask, dtype=target_type).masked_fill_(mask, float("-inf"))
    return mask


def _none_or_dtype(input):
    if input is None:
        return None
    if isinstance(input, ember.Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or ember.Tensor")


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Checks the ranks of the inputs; returns whether they are batched (3-D ``query``)."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key` and `value` to be 3-D"
                f" but found {key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D"
                f" but found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(
                "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                f" but found {attn_mask.dim()}-D tensor instead"
            )
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D"
                f" but found {key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D"
                f" but found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(
                    "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                    f" but found {attn_mask.dim()}-D tensor instead"
                )
            if attn_mask.dim() == 3:
                expected_shape = (num_heads, query.shape[0], key.shape[0])
                if tuple(attn_mask.shape) != expected_shape:
                    raise AssertionError(
                        f"Expected `attn_mask` shape to be {expected_shape} but got {attn_mask.shape}"
                    )
        return False
    raise AssertionError(
        f"query should be unbatched 2D or batched 3D tensor but received {query.dim()}-D query tensor"
    )


# =====================================================================================================
# Functional forward
# =====================================================================================================


def _in_projection_packed(q, k, v, w, b=None):
    """``q W_q^T + b_q``, ``k W_k^T + b_k``, ``v W_v^T + b_v`` with ``w = [W_q; W_k; W_v]`` stacked on dim 0."""
    E = q.size(-1)
    if k is v and q is k:
        proj = F.linear(q, w, b)
        proj = proj.unflatten(-1, (3, E))
        return proj[..., 0, :], proj[..., 1, :], proj[..., 2, :]
    w_q, w_k, w_v = w.chunk(3)
    b_q = b_k = b_v = None
    if b is not None:
        b_q, b_k, b_v = b.chunk(3)
    return F.linear(q, w_q, b_q), F.linear(k, w_k, b_k), F.linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
    """Separate projections of query, key and value (``kdim``/``vdim`` different from ``embed_dim``)."""
    Eq, Ek, Ev = q.size(-1), k.size(-1), v.size(-1)
    for name, w, shape in (("query", w_q, (Eq, Eq)), ("key", w_k, (Eq, Ek)), ("value", w_v, (Eq, Ev))):
        if tuple(w.shape) != shape:
            raise AssertionError(f"expecting {name} weights shape of {shape}, but got {w.shape}")
    for name, bias in (("query", b_q), ("key", b_k), ("value", b_v)):
        if bias is not None and tuple(bias.shape) != (Eq,):
            raise AssertionError(f"expecting {name} bias shape of {(Eq,)}, but got {bias.shape}")
    return F.linear(q, w_q, b_q), F.linear(k, w_k, b_k), F.linear(v, w_v, b_v)


def multi_head_attention_forward(
    query,
    key,
    value,
    embed_dim_to_check,
    num_heads,
    in_proj_weight,
    in_proj_bias,
    bias_k,
    bias_v,
    add_zero_attn,
    dropout_p,
    out_proj_weight,
    out_proj_bias,
    training=True,
    key_padding_mask=None,
    need_weights=True,
    attn_mask=None,
    use_separate_proj_weight=False,
    q_proj_weight=None,
    k_proj_weight=None,
    v_proj_weight=None,
    static_k=None,
    static_v=None,
    average_attn_weights=True,
    is_causal=False,
):
    r"""Multi-head attention of sequence-first inputs with explicitly given weights.

    ``softmax(Q_h K_h^T / sqrt(E / H) + mask) V_h`` for each head ``h``, with
    ``Q = query W_q^T + b_q`` (``K``, ``V`` likewise) split into ``H`` heads of ``E / H`` features,
    the heads concatenated and projected by ``out_proj_weight``/``out_proj_bias``. This is the
    forward of :class:`ember.nn.MultiheadAttention`, which transposes batch-first inputs first.

    Args:
        query (Tensor): ``(L, N, E)``, or ``(L, E)`` unbatched (``L`` target length, ``N`` batch,
            ``E`` = ``embed_dim_to_check``).
        key (Tensor): ``(S, N, Ek)`` or ``(S, Ek)`` (``S`` source length).
        value (Tensor): ``(S, N, Ev)`` or ``(S, Ev)``.
        embed_dim_to_check (int): the expected ``E``; a different ``query.shape[-1]`` raises.
        num_heads (int): ``H``; must divide ``E``.
        in_proj_weight (Tensor, optional): ``(3E, E)``, ``[W_q; W_k; W_v]``; unused (may be ``None``)
            with ``use_separate_proj_weight``.
        in_proj_bias (Tensor, optional): ``(3E,)``, ``[b_q; b_k; b_v]``, or ``None``.
        bias_k, bias_v (Tensor, optional): ``(1, 1, E)`` appended to the projected key and value
            as one more source position (both or neither).
        add_zero_attn (bool): append a zero key and value position.
        dropout_p (float): dropout probability on the attention weights (when ``training``).
        out_proj_weight (Tensor): ``(E, E)``.
        out_proj_bias (Tensor, optional): ``(E,)`` or ``None``.
        training (bool): apply dropout. Default ``True``.
        key_padding_mask (Tensor, optional): ``(N, S)`` or ``(S,)``; bool (``True`` = ignore that key)
            or float (added to the scores).
        need_weights (bool): also return the attention weights. Default ``True``.
        attn_mask (Tensor, optional): ``(L, S)`` or ``(N * H, L, S)``; bool (``True`` = not allowed)
            or float (added to the scores).
        use_separate_proj_weight (bool): project with ``q_proj_weight`` ``(E, E)``,
            ``k_proj_weight`` ``(E, Ek)`` and ``v_proj_weight`` ``(E, Ev)`` instead of
            ``in_proj_weight``. Default ``False``.
        q_proj_weight, k_proj_weight, v_proj_weight (Tensor, optional): see above.
        static_k, static_v (Tensor, optional): ``(N * H, S, E / H)``, used instead of the projected
            key/value.
        average_attn_weights (bool): average the returned weights over heads. Default ``True``.
        is_causal (bool): hint that ``attn_mask`` is the causal mask; it is still required.

    Returns:
        tuple: ``(attn_output, attn_output_weights)``: ``(L, N, E)`` (``(L, E)`` unbatched); the
        weights ``(N, L, S)`` (``(N, H, L, S)`` with ``average_attn_weights=False``, no ``N`` when
        unbatched) when ``need_weights``, else ``None``. Same dtype as ``query``.

    Raises:
        AssertionError: inputs of mismatched ranks or shapes, a wrong ``embed_dim_to_check``,
            ``E`` not divisible by ``num_heads``, a missing projection weight, or a mask that is
            neither bool nor floating point (the error types PyTorch uses).
        RuntimeError: ``is_causal`` without ``attn_mask``; an ``attn_mask`` of the wrong shape.

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, https://arxiv.org/abs/1706.03762

    Example:
        >>> import ember
        >>> import ember.nn.functional as F
        >>> E, H = 4, 2
        >>> x = ember.randn(3, 1, E)  # (L, N, E)
        >>> out, w = F.multi_head_attention_forward(
        ...     x, x, x, E, H, ember.randn(3 * E, E), None, None, None, False, 0.0,
        ...     ember.eye(E), None)
        >>> out.shape, w.shape, bool(w.sum(-1).allclose(ember.ones(1, 3)))
        (ember.Size([3, 1, 4]), ember.Size([1, 3, 3]), True)
    """
    tensors = (query, key, value, in_proj_weight, in_proj_bias, bias_k, bias_v, out_proj_weight, out_proj_bias)
    if has_ember_function(tensors):
        # Tensor subclasses and proxies see this call as one function, as in PyTorch.
        return handle_ember_function(
            multi_head_attention_forward,
            [t for t in tensors if has_ember_function((t,))],
            (query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v,
             add_zero_attn, dropout_p, out_proj_weight, out_proj_bias),
            dict(
                training=training, key_padding_mask=key_padding_mask, need_weights=need_weights,
                attn_mask=attn_mask, use_separate_proj_weight=use_separate_proj_weight,
                q_proj_weight=q_proj_weight, k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight,
                static_k=static_k, static_v=static_v, average_attn_weights=average_attn_weights,
                is_causal=is_causal,
            ),
        )
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:  # compute as a batch of one
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    target_len, batch, embed_dim = query.shape
    rows = batch * num_heads  # heads are folded into the batch dimension: (rows, length, head_dim)

    key_padding_mask, attn_mask, is_causal = _prepare_masks(
        query, key_padding_mask, attn_mask, is_causal, need_weights
    )
    head_dim = _check_embedding(query, key, value, embed_dim_to_check, num_heads, use_separate_proj_weight)
    if (query is key is value and not use_separate_proj_weight and in_proj_weight is not None
            and bias_k is None and bias_v is None and not add_zero_attn and static_k is None and static_v is None
            and key_padding_mask is None and not need_weights):
        out = _packed_self_attention(
            query, in_proj_weight, in_proj_bias, num_heads,
            _attn_mask_as_3d(attn_mask, target_len, target_len, rows), dropout_p if training else 0.0, is_causal,
            out_proj_weight, out_proj_bias,
        )
        return (out if is_batched else out.squeeze(1)), None
    q, k, v = _project(
        query, key, value, in_proj_weight, in_proj_bias, use_separate_proj_weight,
        (q_proj_weight, k_proj_weight, v_proj_weight),
    )
    attn_mask = _attn_mask_as_3d(attn_mask, target_len, key.shape[0], rows)

    if bias_k is not None or bias_v is not None:
        _check_bias_kv(bias_k, bias_v, static_k, static_v)
        k = ember.cat([k, bias_k.repeat(1, batch, 1)])
        v = ember.cat([v, bias_v.repeat(1, batch, 1)])
        attn_mask, key_padding_mask = _pad_one_position(attn_mask), _pad_one_position(key_padding_mask)

    q = q.reshape(target_len, rows, head_dim).transpose(0, 1)
    k = _key_or_value_heads(k, static_k, "static_k", rows, head_dim)
    v = _key_or_value_heads(v, static_v, "static_v", rows, head_dim)

    if add_zero_attn:
        zeros = (rows, 1, head_dim)
        k = ember.cat([k, ember.zeros(zeros, dtype=k.dtype, device=k.device)], dim=1)
        v = ember.cat([v, ember.zeros(zeros, dtype=v.dtype, device=v.device)], dim=1)
        attn_mask, key_padding_mask = _pad_one_position(attn_mask), _pad_one_position(key_padding_mask)

    if key_padding_mask is not None:
        padding = _padding_mask_per_head(key_padding_mask, batch, num_heads, k.size(1))
        attn_mask = padding if attn_mask is None else attn_mask + padding

    dropout_p = dropout_p if training else 0.0
    if need_weights:
        heads_out, weights = _attention_with_weights(q, k, v, attn_mask, dropout_p, is_causal)
        # (rows, L, head_dim) -> (L, rows, head_dim) -> (L * N, E): heads side by side per position
        merged = heads_out.transpose(0, 1).reshape(target_len * batch, embed_dim)
        weights = weights.reshape(batch, num_heads, target_len, k.size(1))
        if average_attn_weights:
            weights = weights.mean(dim=1)
    else:
        heads_out = _fused_attention(q, k, v, attn_mask, dropout_p, is_causal, batch, num_heads)
        # (N, H, L, head_dim) -> (L, N, H, head_dim) -> (L * N, E)
        merged = heads_out.permute(2, 0, 1, 3).reshape(batch * target_len, embed_dim)
        weights = None
    out = F.linear(merged, out_proj_weight, out_proj_bias)
    out = out.reshape(target_len, batch, out.size(1))
    if not is_batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights


def _prepare_masks(query, key_padding_mask, attn_mask, is_causal, need_weights):
    """Both masks as additive float masks; returns ``(key_padding_mask, attn_mask, is_causal)``.

    With the causal hint, no padding mask and no weights requested, the mask is dropped and the
    fused attention builds the causal mask itself.
    """
    key_padding_mask = _canonical_mask(
        key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask), "attn_mask", query.dtype
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. "
            "You may use the Transformer module method "
            "`generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        return key_padding_mask, None, is_causal
    attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
    # Once padding is merged into the mask, it is no longer purely causal.
    return key_padding_mask, attn_mask, is_causal and key_padding_mask is None


def _check_embedding(query, key, value, embed_dim_to_check, num_heads, use_separate_proj_weight):
    """Check the feature sizes; returns the per-head size ``E / H``."""
    embed_dim = query.shape[-1]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    if embed_dim % num_heads != 0:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        # key and value may have different feature sizes (kdim, vdim), but the same positions.
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}"
            )
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
    return embed_dim // num_heads


def _project(query, key, value, in_proj_weight, in_proj_bias, separate, separate_weights):
    """The in-projection: one packed ``(3E, E)`` weight, or three separate ones."""
    if not separate:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        return _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    for name, weight in zip("qkv", separate_weights):
        if weight is None:
            raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
    biases = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
    return _in_projection(query, key, value, *separate_weights, *biases)


def _attn_mask_as_3d(attn_mask, target_len, source_len, rows):
    """Check ``attn_mask``'s shape; a 2-D mask becomes ``(1, L, S)`` (broadcast over batch and heads)."""
    if attn_mask is None:
        return None
    if attn_mask.dim() == 2:
        expected = (target_len, source_len)
        if tuple(attn_mask.shape) != expected:
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be {expected}.")
        return attn_mask.unsqueeze(0)
    if attn_mask.dim() == 3:
        expected = (rows, target_len, source_len)
        if tuple(attn_mask.shape) != expected:
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be {expected}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")


def _check_bias_kv(bias_k, bias_v, static_k, static_v):
    if bias_v is None:
        raise AssertionError("bias_k is set but bias_v is None")
    if bias_k is None:
        raise AssertionError("bias_v is set but bias_k is None")
    if static_k is not None:
        raise AssertionError("bias cannot be added to static key.")
    if static_v is not None:
        raise AssertionError("bias cannot be added to static value.")


def _pad_one_position(mask):
    """Extend a mask by one source position (0: attended) for an appended key/value."""
    return None if mask is None else F.pad(mask, (0, 1))


def _key_or_value_heads(projected, static, static_name, rows, head_dim):
    """``(S, N, E)`` split into heads as ``(rows, S, head_dim)``, or the given ``static_k``/``static_v``."""
    if static is None:
        return projected.reshape(projected.shape[0], rows, head_dim).transpose(0, 1)
    for dim, expected in ((0, rows), (2, head_dim)):
        if static.size(dim) != expected:
            raise AssertionError(f"expecting {static_name}.size({dim}) of {expected}, but got {static.size(dim)}")
    return static


def _padding_mask_per_head(key_padding_mask, batch, num_heads, source_len):
    """``(N, S)`` padding mask repeated for every head as ``(N * H, 1, S)``, to add to the scores."""
    if key_padding_mask.shape[0] != batch:
        raise AssertionError(f"Expected key_padded_mask.shape[0] to be {batch}, but got {key_padding_mask.shape[0]}")
    if key_padding_mask.shape[1] != source_len:
        raise AssertionError(
            f"Expected key_padded_mask.shape[1] to be {source_len}, but got {key_padding_mask.shape[1]}"
        )
    per_head = key_padding_mask.reshape(batch, 1, 1, source_len).expand(-1, num_heads, -1, -1)
    return per_head.reshape(batch * num_heads, 1, source_len)


def _attention_with_weights(q, k, v, attn_mask, dropout_p, is_causal):
    """Explicit attention on ``(rows, L, head_dim)`` heads; returns ``(output, weights)``, the
    weights ``(rows, L, S)`` after dropout."""
    if is_causal and attn_mask is None:
        raise AssertionError("FIXME: is_causal not implemented for need_weights")
    # Scale q rather than the scores: the same values PyTorch computes, so results agree closely.
    q = q * math.sqrt(1.0 / float(q.shape[-1]))
    keys_t = k.transpose(-2, -1)
    scores = ember.bmm(q, keys_t) if attn_mask is None else ember.baddbmm(attn_mask, q, keys_t)
    weights = F.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return ember.bmm(weights, v), weights


def _mask_by_head(attn_mask, batch, num_heads, source_len):
    """A ``(1, L, S)`` or ``(N * H, L, S)`` additive mask as ``(1, 1, L, S)`` or ``(N, H, L, S)``, the
    layout ``scaled_dot_product_attention`` broadcasts over ``(N, H, L, head_dim)`` heads; None stays None."""
    if attn_mask is None:
        return None
    if attn_mask.dim() == 3 and attn_mask.size(0) == 1:
        return attn_mask.unsqueeze(0)  # (1, 1, L, S): one mask for all batches and heads
    return attn_mask.reshape(batch, num_heads, -1, source_len)


def _fused_attention(q, k, v, attn_mask, dropout_p, is_causal, batch, num_heads):
    """Attention through ``scaled_dot_product_attention`` on ``(N, H, len, head_dim)`` views."""
    attn_mask = _mask_by_head(attn_mask, batch, num_heads, k.size(1))

    def by_head(x):
        return x.reshape(batch, num_heads, x.size(1), x.size(2))

    return F.scaled_dot_product_attention(by_head(q), by_head(k), by_head(v), attn_mask, dropout_p, is_causal)


def _packed_self_attention(x, in_proj_weight, in_proj_bias, num_heads, attn_mask, dropout_p, is_causal,
                           out_proj_weight, out_proj_bias):
    """Self-attention of ``x`` ``(L, N, E)`` with the packed ``(3E, E)`` in-projection, no padding mask and no
    weights returned (a transformer layer's call); returns ``(L, N, E)``. ``attn_mask`` is None, ``(1, L, L)``
    or ``(N * H, L, L)``.

    The same values as the general path in about ten ops instead of twenty-five: the heads of q, k and v are
    strided views of the one projection, ``(L, N, 3, H, head_dim)`` permuted to ``(3, N, H, L, head_dim)``, so
    none is copied into ``(N * H, L, head_dim)`` and reshaped back (on a small model each op's dispatch and
    autograd record cost more than its arithmetic).
    """
    length, batch, embed_dim = x.shape
    proj = F.linear(x, in_proj_weight, in_proj_bias).unflatten(-1, (3, num_heads, embed_dim // num_heads))
    q, k, v = proj.permute(2, 1, 3, 0, 4).unbind(0)
    attn_mask = _mask_by_head(attn_mask, batch, num_heads, length)
    heads_out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    # (N, H, L, head_dim) -> (L, N, H, head_dim) -> (L, N, E): heads side by side per position
    merged = heads_out.permute(2, 0, 1, 3).reshape(length, batch, embed_dim)
    return F.linear(merged, out_proj_weight, out_proj_bias)
