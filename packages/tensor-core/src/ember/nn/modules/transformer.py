"""Transformer layers: ``TransformerEncoderLayer``, ``TransformerDecoderLayer``, ``TransformerEncoder``,
``TransformerDecoder`` and ``Transformer``, as in ``torch.nn``.

PyTorch's inference fast paths (nested tensors, fused encoder layer) are not reproduced: the
computation always takes the reference path, which gives the same values except that PyTorch's
nested-tensor path writes zeros at padded positions of an encoder output.

Reference: Vaswani et al., "Attention Is All You Need" (2017), https://arxiv.org/abs/1706.03762;
Xiong et al., "On Layer Normalization in the Transformer Architecture" (2020) for ``norm_first``.
"""

from __future__ import annotations

import copy

import ember

from .. import functional as F
from .. import init
from .._mha_functional import _canonical_mask, _none_or_dtype
from .activation import GELU, ReLU
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = [
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
]


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """``(sz, sz)`` float mask: ``-inf`` above the diagonal, 0 on and below it."""
    return ember.triu(ember.full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _sequence_length(x, batch_first):
    """Length of the sequence dimension of ``(S, E)``, ``(S, N, E)`` or, batch first, ``(N, S, E)``."""
    if x.dim() == 2:
        return x.size(0)
    return x.size(1) if batch_first else x.size(0)


def _stack_copies(layer, count):
    """``count`` independent deep copies of ``layer``: each layer of a stack has its own weights."""
    return ModuleList(copy.deepcopy(layer) for _ in range(count))


def _activation_from_name(name):
    known = {"relu": F.relu, "gelu": F.gelu}
    if name not in known:
        raise RuntimeError(f"activation should be relu/gelu, not {name}")
    return known[name]


def _activation_code(activation):
    """PyTorch's ``activation_relu_or_gelu`` attribute: 1 for ReLU, 2 for GELU, 0 otherwise. PyTorch's
    fused kernels read it; ember has none, but the attribute is public, so it is kept."""
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    if activation is F.gelu or isinstance(activation, GELU):
        return 2
    return 0


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """``is_causal`` when given; otherwise whether ``mask`` equals the square subsequent mask of ``size``
    (default ``mask.size(-2)``). Layers can then skip building a mask they already know.

    While ``ember.compile`` traces, a mask is not compared (``False``): the comparison reads tensor values
    into Python, a graph break, and the answer is only a hint, the mask being applied either way (same values).
    """
    if is_causal is not None or mask is None:
        return is_causal is True
    if ember.compiler.is_compiling():
        return False
    n = mask.size(-2) if size is None else size
    if tuple(mask.size()) != (n, n):
        return False
    reference = _generate_square_subsequent_mask(n, device=mask.device, dtype=mask.dtype)
    return bool((mask == reference).all())


def _add_layer_blocks(layer, n_blocks, d_model, dim_feedforward, dropout, layer_norm_eps, bias, placement):
    """Give an encoder/decoder layer its feed-forward network (``linear1``, ``dropout``, ``linear2``)
    and one ``norm{i}``/``dropout{i}`` per residual block, in the order their state-dict keys have."""
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias, **placement)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias, **placement)
    for i in range(1, n_blocks + 1):
        setattr(layer, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **placement))
    for i in range(1, n_blocks + 1):
        setattr(layer, f"dropout{i}", Dropout(dropout))


def _residual(x, block, norm, norm_first):
    """One residual block: pre-norm ``x + block(norm(x))`` or post-norm ``norm(x + block(x))``."""
    if norm_first:
        return x + block(norm(x))
    return norm(x + block(x))


class Transformer(Module):
    """Encoder-decoder transformer: ``decoder(tgt, encoder(src))``.

    Args:
        d_model (int): feature size of ``src``/``tgt``. Default 512.
        nhead (int): attention heads. Default 8.
        num_encoder_layers, num_decoder_layers (int): default 6 each.
        dim_feedforward (int): hidden size of the feed-forward blocks. Default 2048.
        dropout (float): default 0.1.
        activation (str or callable): ``"relu"``, ``"gelu"`` or a unary callable. Default ``F.relu``.
        custom_encoder, custom_decoder (Module, optional): used instead of the default stacks.
        layer_norm_eps (float): default 1e-5.
        batch_first (bool): ``(N, S, E)`` instead of ``(S, N, E)``. Default ``False``.
        norm_first (bool): pre-norm layers. Default ``False``.
        bias (bool): biases in the linear and norm layers. Default ``True``.
        device, dtype: of the parameters.

    Shape (forward): src ``(S, N, E)``, tgt ``(T, N, E)`` (batch first when ``batch_first``; unbatched
    ``(S, E)``/``(T, E)`` too); src_mask ``(S, S)`` or ``(N*nhead, S, S)``; tgt_mask ``(T, T)`` or
    ``(N*nhead, T, T)``; memory_mask ``(T, S)``; *_key_padding_mask ``(N, S)``/``(N, T)``.
    Output ``(T, N, E)``.

    Every parameter with more than one dimension is re-initialised with ``xavier_uniform_``.

    Raises:
        RuntimeError: batch sizes of ``src`` and ``tgt`` differ, or their feature size is not ``d_model``.

    Example:
        >>> import ember
        >>> model = ember.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
        ...                              dim_feedforward=16)
        >>> model(ember.rand(5, 3, 8), ember.rand(4, 3, 8)).shape
        ember.Size([4, 3, 8])
    """

    def __init__(
        self,
        d_model=512,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        dropout=0.1,
        activation=F.relu,
        custom_encoder=None,
        custom_decoder=None,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        placement = {"device": device, "dtype": dtype}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first)
        if custom_encoder is None:
            layer = TransformerEncoderLayer(*layer_args, bias, **placement)
            final_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **placement)
            custom_encoder = TransformerEncoder(layer, num_encoder_layers, final_norm)
        self.encoder = custom_encoder
        if custom_decoder is None:
            layer = TransformerDecoderLayer(*layer_args, bias, **placement)
            final_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **placement)
            custom_decoder = TransformerDecoder(layer, num_decoder_layers, final_norm)
        self.decoder = custom_decoder
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        self._check_inputs(src, tgt)
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    def _check_inputs(self, src, tgt):
        if src.dim() == 3:  # unbatched inputs have no batch dimension to compare
            batch_dim = 0 if self.batch_first else 1
            if src.size(batch_dim) != tgt.size(batch_dim):
                raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A causal mask for a sequence of length ``sz``: a float ``(sz, sz)`` tensor with ``-inf``
        above the diagonal (masked) and ``0.0`` on and below it (attended). ``dtype`` defaults to
        the default float dtype."""
        return _generate_square_subsequent_mask(sz, dtype=dtype, device=device)

    def _reset_parameters(self):
        # Weight matrices only; biases and norm scales keep their layer's initialisation.
        for weight in self.parameters():
            if weight.dim() > 1:
                init.xavier_uniform_(weight)


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer``, then ``norm`` if given.

    Args:
        encoder_layer (TransformerEncoderLayer): the layer to clone.
        num_layers (int): number of layers.
        norm (Module, optional): applied to the output of the last layer.
        enable_nested_tensor (bool): accepted for compatibility and stored; ember has no nested-tensor
            fast path, so ``use_nested_tensor`` is always ``False``.
        mask_check (bool): accepted for compatibility.

    Shape: src ``(S, N, E)`` (``(N, S, E)`` with batch-first layers, or ``(S, E)``); mask ``(S, S)`` or
    ``(N*nhead, S, S)``; src_key_padding_mask ``(N, S)``. Output as ``src``.
    """

    __constants__ = ["norm"]

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _stack_copies(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = False  # no nested-tensor path in ember: every input takes the dense path
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """Pass ``src`` through the layers. ``is_causal=None`` detects whether ``mask`` is the
        square subsequent mask; bool masks are True where attention is not allowed."""
        src_key_padding_mask = _canonical_mask(
            src_key_padding_mask, "src_key_padding_mask", _none_or_dtype(mask), "mask", src.dtype
        )
        mask = _canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        seq_len = _sequence_length(src, self.layers[0].self_attn.batch_first)
        is_causal = _detect_is_causal_mask(mask, is_causal, seq_len)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer``, then ``norm`` if given.

    Shape: tgt ``(T, N, E)``, memory ``(S, N, E)`` (batch first with batch-first layers); tgt_mask
    ``(T, T)``; memory_mask ``(T, S)``; tgt/memory key padding masks ``(N, T)``/``(N, S)``.
    Output as ``tgt``.
    """

    __constants__ = ["norm"]

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _stack_copies(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        """Pass ``tgt`` (attending to ``memory``) through the layers; ``tgt_is_causal=None`` detects
        whether ``tgt_mask`` is the square subsequent mask."""
        seq_len = _sequence_length(tgt, self.layers[0].self_attn.batch_first)
        masks = {
            "tgt_mask": tgt_mask,
            "memory_mask": memory_mask,
            "tgt_key_padding_mask": tgt_key_padding_mask,
            "memory_key_padding_mask": memory_key_padding_mask,
            "tgt_is_causal": _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len),
            "memory_is_causal": memory_is_causal,
        }
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, **masks)
        return x if self.norm is None else self.norm(x)


class TransformerEncoderLayer(Module):
    """Self-attention block then feed-forward block, each with dropout, a residual and a layer norm.

    Post-norm (default): ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``.
    Pre-norm (``norm_first``): ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``.
    ``ff(x) = dropout2(linear2(dropout(activation(linear1(x)))))``.

    Args:
        d_model (int), nhead (int), dim_feedforward (int, default 2048), dropout (float, default 0.1),
        activation (``"relu"``, ``"gelu"`` or a unary callable; default ``F.relu``),
        layer_norm_eps (float, default 1e-5), batch_first (bool, default ``False``),
        norm_first (bool, default ``False``), bias (bool, default ``True``), device, dtype.

    Shape: src ``(S, N, E)``, ``(N, S, E)`` with ``batch_first``, or ``(S, E)``; output the same.

    Raises:
        RuntimeError: ``activation`` is a string other than ``"relu"``/``"gelu"``.
    """

    __constants__ = ["norm_first"]

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation=F.relu,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        placement = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **placement
        )
        _add_layer_blocks(self, 2, d_model, dim_feedforward, dropout, layer_norm_eps, bias, placement)
        self.norm_first = norm_first
        if isinstance(activation, str):
            activation = _activation_from_name(activation)
        self.activation_relu_or_gelu = _activation_code(activation)
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """``src_mask`` ``(S, S)`` or ``(N*nhead, S, S)`` and ``src_key_padding_mask`` ``(N, S)``: bool
        (True = not allowed) or float (added). ``is_causal`` hints that ``src_mask`` is causal."""
        src_key_padding_mask = _canonical_mask(
            src_key_padding_mask, "src_key_padding_mask", _none_or_dtype(src_mask), "src_mask", src.dtype
        )
        src_mask = _canonical_mask(src_mask, "src_mask", None, "", src.dtype, check_other=False)

        def attend(h):
            return self._self_attention(h, src_mask, src_key_padding_mask, is_causal)

        x = _residual(src, attend, self.norm1, self.norm_first)
        return _residual(x, self._feed_forward, self.norm2, self.norm_first)

    def _self_attention(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )
        return self.dropout1(out)

    def _feed_forward(self, x):
        hidden = self.dropout(self.activation(self.linear1(x)))
        return self.dropout2(self.linear2(hidden))


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over ``memory`` and feed-forward blocks, each with dropout, a
    residual and a layer norm (``norm1``, ``norm2``, ``norm3``; before each block with ``norm_first``).

    Args: as :class:`TransformerEncoderLayer`.

    Shape: tgt ``(T, N, E)``, memory ``(S, N, E)`` (batch first with ``batch_first``; unbatched
    ``(T, E)``/``(S, E)``); output as ``tgt``.

    Raises:
        RuntimeError: ``activation`` is a string other than ``"relu"``/``"gelu"``.
    """

    __constants__ = ["norm_first"]

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation=F.relu,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        placement = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **placement
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **placement
        )
        _add_layer_blocks(self, 3, d_model, dim_feedforward, dropout, layer_norm_eps, bias, placement)
        self.norm_first = norm_first
        self.activation = _activation_from_name(activation) if isinstance(activation, str) else activation

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=False,
        memory_is_causal=False,
    ):
        """Masks as :meth:`MultiheadAttention.forward`: ``tgt_mask`` ``(T, T)``, ``memory_mask`` ``(T, S)``,
        ``tgt_key_padding_mask`` ``(N, T)``, ``memory_key_padding_mask`` ``(N, S)``."""

        def attend_self(h):
            return self._self_attention(h, tgt_mask, tgt_key_padding_mask, tgt_is_causal)

        def attend_memory(h):
            return self._cross_attention(h, memory, memory_mask, memory_key_padding_mask, memory_is_causal)

        x = _residual(tgt, attend_self, self.norm1, self.norm_first)
        x = _residual(x, attend_memory, self.norm2, self.norm_first)
        return _residual(x, self._feed_forward, self.norm3, self.norm_first)

    def _self_attention(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal, need_weights=False
        )
        return self.dropout1(out)

    def _cross_attention(self, x, memory, attn_mask, key_padding_mask, is_causal):
        out, _ = self.multihead_attn(
            x, memory, memory, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
            need_weights=False,
        )
        return self.dropout2(out)

    def _feed_forward(self, x):
        hidden = self.dropout(self.activation(self.linear1(x)))
        return self.dropout3(self.linear2(hidden))
