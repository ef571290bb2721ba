"""Multi-head attention: ``MultiheadAttention``, as in ``torch.nn``.

The module holds the projection weights; its forward is
:func:`ember.nn.functional.multi_head_attention_forward` (``ember/nn/_mha_functional.py``).

Reference: Vaswani et al., "Attention Is All You Need" (2017), https://arxiv.org/abs/1706.03762.
"""

from __future__ import annotations

import ember

from .. import functional as F
from .. import init
from .._mha_functional import _canonical_mask, _none_or_dtype
from ..parameter import Parameter
from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention"]


class NonDynamicallyQuantizableLinear(Linear):
    """A :class:`Linear` under another name (PyTorch's type of ``MultiheadAttention.out_proj``,
    which keeps quantisation tools from swapping it); the same parameters and forward."""


# =====================================================================================================
# Module
# =====================================================================================================


def _sequence_first(query, key, value):
    """``(N, L, E)`` inputs as ``(L, N, E)``. Inputs that are the same tensor stay the same tensor,
    so that self-attention still takes the single packed projection."""
    transposed = {}
    for x in (query, key, value):
        if id(x) not in transposed:
            transposed[id(x)] = x.transpose(1, 0)
    return transposed[id(query)], transposed[id(key)], transposed[id(value)]


class MultiheadAttention(Module):
    r"""Multi-head attention: ``Concat(head_1, ..., head_h) W^O`` with
    ``head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d) + mask) V W_i^V``.

    Args:
        embed_dim (int): model dimension ``E``; split across the heads (``head_dim = E // num_heads``).
        num_heads (int): number of heads; must divide ``embed_dim``.
        dropout (float): dropout on the attention weights (training only). Default 0.
        bias (bool): biases in the in- and out-projections. Default ``True``.
        add_bias_kv (bool): learn ``bias_k``/``bias_v`` ``(1, 1, E)`` appended to key and value as one
            more source position. Default ``False``.
        add_zero_attn (bool): append a zero key/value position after projection. Default ``False``.
        kdim, vdim (int, optional): feature sizes of key and value (default ``embed_dim``). When
            either differs, separate ``q_proj_weight`` ``(E, E)``, ``k_proj_weight`` ``(E, kdim)`` and
            ``v_proj_weight`` ``(E, vdim)`` replace the packed ``in_proj_weight`` ``(3E, E)``.
        batch_first (bool): inputs and outputs are ``(N, L, E)`` instead of ``(L, N, E)``. Default ``False``.
        device, dtype: of the parameters.

    Forward args:
        query ``(L, E)``, ``(L, N, E)`` or ``(N, L, E)``; key ``(S, kdim)``, ...; value ``(S, vdim)``, ...
        key_padding_mask ``(N, S)`` or ``(S,)``: bool (True = ignore this key) or float (added).
        need_weights (bool): also return the attention weights. Default ``True``.
        attn_mask ``(L, S)`` or ``(N*num_heads, L, S)``: bool (True = not allowed) or float (added).
        average_attn_weights (bool): average the returned weights over heads. Default ``True``.
        is_causal (bool): hint that ``attn_mask`` is the causal mask (``attn_mask`` still required).

    Returns:
        ``(attn_output, attn_output_weights)``: output shaped as ``query`` with ``E`` features;
        weights ``(N, L, S)`` (``(N, num_heads, L, S)`` without averaging; no ``N`` when unbatched)
        or ``None`` when ``need_weights=False``.

    Attributes:
        in_proj_weight: xavier_uniform_; in_proj_bias and out_proj.bias: zeros; bias_k/bias_v: xavier_normal_
        (as PyTorch). ``out_proj`` is a :class:`Linear` ``(E, E)``.

    Raises:
        ValueError: ``embed_dim`` or ``num_heads`` is not positive.
        AssertionError: ``embed_dim`` is not divisible by ``num_heads``; inputs of the wrong rank/shape.

    Reference: Vaswani et al., "Attention Is All You Need" (2017).

    Example:
        >>> import ember
        >>> mha = ember.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = ember.randn(3, 5, 8)
        >>> out, w = mha(x, x, x)
        >>> out.shape, w.shape
        (ember.Size([3, 5, 8]), ember.Size([3, 5, 5]))
    """

    __constants__ = ["batch_first"]

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        kdim=None,
        vdim=None,
        batch_first=False,
        device=None,
        dtype=None,
    ):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0,"
                f" got embed_dim={embed_dim} and num_heads={num_heads} instead"
            )
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if embed_dim % num_heads != 0:
            raise AssertionError("embed_dim must be divisible by num_heads")

        def new_parameter(*shape):
            return Parameter(ember.empty(shape, device=device, dtype=dtype))

        # One packed (3E, E) projection when query, key and value share E; three otherwise. The
        # unused names are registered as None so that both layouts have the same attributes.
        packed = self._qkv_same_embed_dim
        projections = {
            "in_proj_weight": (3 * embed_dim, embed_dim),
            "q_proj_weight": (embed_dim, embed_dim),
            "k_proj_weight": (embed_dim, self.kdim),
            "v_proj_weight": (embed_dim, self.vdim),
        }
        order = list(projections) if packed else [*list(projections)[1:], "in_proj_weight"]
        for name in order:
            used = (name == "in_proj_weight") == packed
            self.register_parameter(name, new_parameter(*projections[name]) if used else None)
        self.register_parameter("in_proj_bias", new_parameter(3 * embed_dim) if bias else None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k = new_parameter(1, 1, embed_dim) if add_bias_kv else None
        self.bias_v = new_parameter(1, 1, embed_dim) if add_bias_kv else None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        # Glorot-uniform projections, zero biases, Glorot-normal learned key/value biases.
        for weight in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if weight is not None:
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for learned_bias in (self.bias_k, self.bias_v):
            if learned_bias is not None:
                init.xavier_normal_(learned_bias)

    def __setstate__(self, state):
        state.setdefault("_qkv_same_embed_dim", True)  # objects pickled before the attribute existed
        self.__dict__.update(state)

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        is_batched = query.dim() == 3
        key_padding_mask = _canonical_mask(
            key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask), "attn_mask", query.dtype
        )
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)

        if self.batch_first and is_batched:
            query, key, value = _sequence_first(query, key, value)

        separate = {}
        if not self._qkv_same_embed_dim:
            separate = {
                "use_separate_proj_weight": True,
                "q_proj_weight": self.q_proj_weight,
                "k_proj_weight": self.k_proj_weight,
                "v_proj_weight": self.v_proj_weight,
            }
        attn_output, attn_output_weights = F.multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
            **separate,
        )
        if self.batch_first and is_batched:
            return attn_output.transpose(1, 0), attn_output_weights
        return attn_output, attn_output_weights

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """Combine ``attn_mask`` ``(L, L)`` or ``(N*H, L, L)`` and ``key_padding_mask`` ``(N, L)`` for
        batch-first self-attention on ``query`` ``(N, L, E)``.

        Returns:
            ``(merged_mask, mask_type)``: ``key_padding_mask`` alone with type 1; with ``attn_mask``,
            type 2 and ``attn_mask`` expanded to ``(N, H, L, L)`` (plus the expanded key padding mask
            when both are given); ``(None, None)`` when neither is given.
        """
        if attn_mask is None:
            return (None, None) if key_padding_mask is None else (key_padding_mask, 1)
        batch, length, _ = query.shape
        if attn_mask.dim() == 3:
            merged = attn_mask.reshape(batch, -1, length, length)
        else:
            merged = attn_mask.reshape(1, 1, length, length).expand(batch, self.num_heads, -1, -1)
        if key_padding_mask is not None:
            merged = merged + key_padding_mask.reshape(batch, 1, 1, length).expand(-1, self.num_heads, -1, -1)
        return merged, 2
