"""Sequence models of the ember.compile model suite: recurrent and transformer language models.

Each model is written once against ``lib`` (``ember`` or ``torch``), as a user of that library would write it,
and registered with :func:`registry.register`. Dropout is 0 everywhere so that compiled and eager runs can be
compared value for value; sizes are shrunk so that an eager CPU training step stays around 100 ms on 2 cores.
"""

from __future__ import annotations

import functools
import math

from registry import ModelSpec, register

VOCAB = 256  # a byte-level vocabulary: large enough for a real head, small enough for the CPU


def _tokens(lib, rng, device, batch, length, vocab=VOCAB):
    return lib.tensor(rng.integers(0, vocab, size=(batch, length)), dtype=lib.long, device=device)


def _next_token_loss(lib, logits, tokens):
    """Cross-entropy of the logits at positions 0..T-2 against the tokens at 1..T-1."""
    F = lib.nn.functional
    vocab = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].reshape(-1))


# ----------------------------------------------------------------------------------------------------------
# LSTM and GRU language models (the word-language-model example's architecture)
# ----------------------------------------------------------------------------------------------------------


def build_rnn_lm(lib, cell="LSTM", width=128, layers=2, tied=True, vocab=VOCAB, **_):
    """An embedding, a ``layers``-deep LSTM or GRU (batch first), and a linear head (tied to the embedding)."""
    nn = lib.nn

    class RNNLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, width)
            self.rnn = getattr(nn, cell)(width, width, num_layers=layers, batch_first=True)
            self.decoder = nn.Linear(width, vocab)
            if tied:
                self.decoder.weight = self.encoder.weight
            self.init_weights()

        def init_weights(self):
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            if not tied:
                nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, tokens):
            emb = self.encoder(tokens)
            output, _hidden = self.rnn(emb)
            return self.decoder(output)

    return RNNLanguageModel()


def _lm_inputs(lib, rng, device, batch=8, length=32, vocab=VOCAB, **_):
    return (_tokens(lib, rng, device, batch, length, vocab),)


def _lm_loss(lib, output, inputs):
    return _next_token_loss(lib, output, inputs[0])


register(
    ModelSpec(
        name="lstm_lm",
        domain="sequence",
        build=functools.partial(build_rnn_lm, cell="LSTM", tied=True),
        inputs=_lm_inputs,
        loss=_lm_loss,
        notes="word_language_model-style LSTM LM: 2 layers of 128 (not 650-1500), vocabulary 256, tied head; "
        "batch 8 x 32 tokens; ember.compile and torch.compile run the nn.LSTM eagerly by default (allow_rnn)",
        cuda_scale={"width": 512, "vocab": 8192, "batch": 32, "length": 64},
    )
)

register(
    ModelSpec(
        name="gru_lm",
        domain="sequence",
        build=functools.partial(build_rnn_lm, cell="GRU", tied=False),
        inputs=_lm_inputs,
        loss=_lm_loss,
        notes="GRU LM: 2 layers of 128, vocabulary 256, untied head; batch 8 x 32 tokens; the nn.GRU runs "
        "eagerly under both compilers by default (allow_rnn)",
        cuda_scale={"width": 512, "vocab": 8192, "batch": 32, "length": 64},
    )
)


# ----------------------------------------------------------------------------------------------------------
# Transformer encoder-decoder (nn.Transformer, "Attention is all you need" shrunk)
# ----------------------------------------------------------------------------------------------------------


def build_seq2seq(lib, d_model=64, nhead=4, layers=2, ff=128, max_len=64, vocab=VOCAB, **_):
    """Source and target embeddings scaled by sqrt(d_model) plus sinusoidal positions, ``nn.Transformer``
    (post-norm, batch first), a causal target mask, and a linear generator over the vocabulary."""
    nn = lib.nn

    def sinusoids(length, width):
        position = lib.arange(length, dtype=lib.float32).unsqueeze(1)
        rate = lib.exp(lib.arange(0, width, 2, dtype=lib.float32) * (-math.log(10000.0) / width))
        table = lib.zeros(length, width)
        table[:, 0::2] = lib.sin(position * rate)
        table[:, 1::2] = lib.cos(position * rate)
        return table

    class Seq2SeqTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_embed = nn.Embedding(vocab, d_model)
            self.tgt_embed = nn.Embedding(vocab, d_model)
            self.register_buffer("positions", sinusoids(max_len, d_model), persistent=False)
            self.transformer = nn.Transformer(
                d_model=d_model,
                nhead=nhead,
                num_encoder_layers=layers,
                num_decoder_layers=layers,
                dim_feedforward=ff,
                dropout=0.0,
                batch_first=True,
            )
            self.generator = nn.Linear(d_model, vocab)

        def embed(self, table, tokens):
            return table(tokens) * math.sqrt(d_model) + self.positions[: tokens.size(1)]

        def forward(self, src, tgt):
            tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device)
            out = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt), tgt_mask=tgt_mask)
            return self.generator(out)

    return Seq2SeqTransformer()


def _seq2seq_inputs(lib, rng, device, batch=8, src_len=24, tgt_len=20, vocab=VOCAB, **_):
    return _tokens(lib, rng, device, batch, src_len, vocab), _tokens(lib, rng, device, batch, tgt_len, vocab)


def _seq2seq_loss(lib, output, inputs):
    return _next_token_loss(lib, output, inputs[1])


register(
    ModelSpec(
        name="transformer_seq2seq",
        domain="sequence",
        build=build_seq2seq,
        inputs=_seq2seq_inputs,
        loss=_seq2seq_loss,
        notes="nn.Transformer encoder-decoder: d_model 64, 4 heads, 2+2 layers, FFN 128 (base: 512/8/6+6/2048); "
        "vocabulary 256; batch 8, source 24, target 20 tokens",
        cuda_scale={"d_model": 512, "nhead": 8, "layers": 6, "ff": 2048, "max_len": 128, "vocab": 8192,
                    "batch": 32, "src_len": 64, "tgt_len": 64},
    )
)


# ----------------------------------------------------------------------------------------------------------
# GPT-2 (pre-LN decoder, causal scaled_dot_product_attention, tanh GELU, tied head)
# ----------------------------------------------------------------------------------------------------------


def build_gpt2(lib, n_layer=2, n_head=4, n_embd=128, block_size=64, vocab=VOCAB, **_):
    """GPT-2's architecture (Radford et al. 2019) with fewer and narrower layers."""
    nn = lib.nn
    F = lib.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            q = q.view(b, t, n_head, c // n_head).transpose(1, 2)
            k = k.view(b, t, n_head, c // n_head).transpose(1, 2)
            v = v.view(b, t, n_head, c // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.lm_head.weight = self.wte.weight
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):  # residual projections, scaled by depth as GPT-2 does
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))
                elif p.dim() >= 2:
                    nn.init.normal_(p, mean=0.0, std=0.02)

        def forward(self, idx):
            t = idx.size(1)
            pos = lib.arange(0, t, dtype=lib.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT2()


def _gpt2_inputs(lib, rng, device, batch=4, length=64, vocab=VOCAB, **_):
    return (_tokens(lib, rng, device, batch, length, vocab),)


register(
    ModelSpec(
        name="gpt2_small",
        domain="sequence",
        build=build_gpt2,
        inputs=_gpt2_inputs,
        loss=_lm_loss,
        notes="GPT-2 small's architecture with 2 layers, 4 heads, width 128 (not 12/12/768), vocabulary 256, "
        "context 64; batch 4 x 64 tokens",
        cuda_scale={"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 256, "vocab": 8192,
                    "batch": 8, "length": 256},
    )
)


# ----------------------------------------------------------------------------------------------------------
# BERT (post-LN encoder, token-type embeddings, padding mask, MLM head)
# ----------------------------------------------------------------------------------------------------------


def build_bert(lib, n_layer=2, n_head=4, hidden=128, intermediate=512, max_positions=64, type_vocab=2, vocab=VOCAB,
               **_):
    """BERT-base's architecture (Devlin et al. 2019) with fewer and narrower layers, and the masked-LM head."""
    nn = lib.nn
    F = lib.nn.functional

    class Embeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, hidden)
            self.position_embeddings = nn.Embedding(max_positions, hidden)
            self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, input_ids, token_type_ids):
            positions = lib.arange(input_ids.size(1), device=input_ids.device).unsqueeze(0)
            x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
            return self.LayerNorm(x + self.token_type_embeddings(token_type_ids))

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.head_size = hidden // n_head

        def split_heads(self, x):
            b, t, _ = x.size()
            return x.view(b, t, n_head, self.head_size).permute(0, 2, 1, 3)

        def forward(self, x, additive_mask):
            q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))
            scores = lib.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size) + additive_mask
            context = lib.matmul(F.softmax(scores, dim=-1), v)
            b, _, t, _ = context.size()
            return context.permute(0, 2, 1, 3).contiguous().view(b, t, hidden)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = SelfAttention()
            self.attention_output = nn.Linear(hidden, hidden)
            self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.intermediate = nn.Linear(hidden, intermediate)
            self.output = nn.Linear(intermediate, hidden)
            self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x, additive_mask):
            x = self.attention_norm(x + self.attention_output(self.attention(x, additive_mask)))
            return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))

    class MLMHead(nn.Module):
        def __init__(self, word_embeddings):
            super().__init__()
            self.dense = nn.Linear(hidden, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
            self.decoder = nn.Linear(hidden, vocab, bias=False)
            self.decoder.weight = word_embeddings.weight
            self.bias = nn.Parameter(lib.zeros(vocab))

        def forward(self, x):
            return self.decoder(self.LayerNorm(F.gelu(self.dense(x)))) + self.bias

    class BertForMaskedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = Embeddings()
            self.layers = nn.ModuleList([Layer() for _ in range(n_layer)])
            self.cls = MLMHead(self.embeddings.word_embeddings)
            self.apply(self._init)

        def _init(self, module):
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

        def forward(self, input_ids, token_type_ids, attention_mask):
            # (B, T) 1 = attend, 0 = padding -> (B, 1, 1, T) additive mask
            additive_mask = (1.0 - attention_mask[:, None, None, :].to(lib.float32)) * -10000.0
            x = self.embeddings(input_ids, token_type_ids)
            for layer in self.layers:
                x = layer(x, additive_mask)
            return self.cls(x)

    return BertForMaskedLM()


def _bert_inputs(lib, rng, device, batch=4, length=64, vocab=VOCAB, **_):
    ids = rng.integers(0, vocab, size=(batch, length))
    types = (lib.arange(length) >= length // 2).long().expand(batch, length).contiguous()  # sentence A then B
    lengths = rng.integers(length // 2, length + 1, size=batch)
    mask = (lib.arange(length).unsqueeze(0) < lib.tensor(lengths).unsqueeze(1)).long()  # padded tails
    return lib.tensor(ids, dtype=lib.long, device=device), types.to(device), mask.to(device)


def _bert_loss(lib, output, inputs):
    """Masked-LM loss: every 7th position is scored against its token (the inputs are not masked: enough to
    train the head, and the same on both sides)."""
    ids = inputs[0]
    selected = output[:, ::7]
    return lib.nn.functional.cross_entropy(selected.reshape(-1, selected.size(-1)), ids[:, ::7].reshape(-1))


register(
    ModelSpec(
        name="bert_base",
        domain="sequence",
        build=build_bert,
        inputs=_bert_inputs,
        loss=_bert_loss,
        notes="BERT-base's architecture with 2 layers, 4 heads, hidden 128, FFN 512 (not 12/12/768/3072), "
        "vocabulary 256, 64 positions; batch 4 x 64 with padded tails; loss on every 7th position",
        cuda_scale={"n_layer": 12, "n_head": 12, "hidden": 768, "intermediate": 3072, "max_positions": 128,
                    "vocab": 8192, "batch": 16, "length": 128},
    )
)


# ----------------------------------------------------------------------------------------------------------
# Character transformer (examples/char_transformer.py's model)
# ----------------------------------------------------------------------------------------------------------


def build_char_transformer(
    lib, vocab_size=96, context=64, d_model=128, nhead=4, num_layers=2, dim_feedforward=512, **_
):
    """examples/char_transformer.py's CharTransformer: stock pre-norm ``nn.TransformerEncoder`` with a causal
    mask buffer, GELU, a final LayerNorm and a linear head (dropout 0 here)."""
    nn = lib.nn

    class CharTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.context = context
            self.token_embedding = nn.Embedding(vocab_size, d_model)
            self.position_embedding = nn.Embedding(context, d_model)
            layer = nn.TransformerEncoderLayer(
                d_model, nhead, dim_feedforward, 0.0, activation="gelu", batch_first=True, norm_first=True
            )
            self.blocks = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab_size)
            mask = nn.Transformer.generate_square_subsequent_mask(context)
            self.register_buffer("causal_mask", mask, persistent=False)

        def forward(self, ids):
            length = ids.shape[1]
            if length > self.context:
                raise ValueError(f"sequence length {length} is longer than context={self.context}")
            positions = lib.arange(length, device=ids.device)
            x = self.token_embedding(ids) + self.position_embedding(positions)
            x = self.blocks(x, mask=self.causal_mask[:length, :length], is_causal=True)
            return self.head(self.norm(x))

    return CharTransformer()


def _char_inputs(lib, rng, device, batch=8, length=64, vocab_size=96, **_):
    return (_tokens(lib, rng, device, batch, length, vocab_size),)


register(
    ModelSpec(
        name="char_transformer",
        domain="sequence",
        build=build_char_transformer,
        inputs=_char_inputs,
        loss=_lm_loss,
        notes="examples/char_transformer.py's model (2 pre-norm nn.TransformerEncoder layers of 128, 4 heads, "
        "context 64), dropout 0; batch 8 x 64 characters",
        cuda_scale={"context": 256, "d_model": 384, "nhead": 6, "num_layers": 6, "dim_feedforward": 1536,
                    "batch": 32, "length": 256},
    )
)
