"""Models: the demo's CNN and the char transformer from ``examples/``, and small standard ones (MLP,
attention blocks, LSTM/GRU loops, a GPT block, a ResNet block, normalisation layers, a mixture of experts)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import ember
import ember.nn as nn
import ember.nn.functional as F

from ._entry import Theme

_ROOT = Path(__file__).resolve().parents[4]
for _folder in ("examples", "benchmarks"):
    if str(_ROOT / _folder) not in sys.path:
        sys.path.insert(0, str(_ROOT / _folder))

import char_transformer  # noqa: E402 - examples/ on the path first
import digits_cnn  # noqa: E402
import gpt_model  # noqa: E402 - benchmarks/

theme = Theme("models")


class MLP(nn.Module):
    def __init__(self, sizes=(8, 16, 16, 4)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


@theme.module(lambda g: g.randn(5, 8), trains=True)
def mlp():
    return MLP()


@theme.module(lambda g: g.randn(4, 1, 8, 8), trains=True, tol=(1e-4, 1e-5))
def digits_cnn_train_mode():
    """The demo's model (``nox -s demo``) in training mode: batch statistics; dropout 0 so it is deterministic."""
    return digits_cnn.DigitsCNN(dropout=0.0)


@theme.module(lambda g: g.randn(4, 1, 8, 8), trains=True, tol=(1e-4, 1e-5))
def digits_cnn_eval():
    return digits_cnn.DigitsCNN().eval()


@theme.module(lambda g: g.randint(20, 2, 6), trains=True, tol=(1e-4, 1e-5))
def char_transformer_eval():
    """examples/char_transformer.py's model, small: nn.TransformerEncoder with a causal mask."""
    return char_transformer.CharTransformer(20, 8, d_model=16, nhead=2, num_layers=1, dim_feedforward=32).eval()


class SelfAttention(nn.Module):
    """Multi-head self-attention through ``F.scaled_dot_product_attention``."""

    def __init__(self, dim=16, heads=4, causal=True):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


@theme.module(lambda g: g.randn(2, 5, 16), trains=True, tol=(1e-4, 1e-5))
def sdpa_attention_block():
    return SelfAttention()


class ManualAttention(nn.Module):
    """Attention written out: scores, a causal mask from ``tril``, softmax, weighted sum."""

    def __init__(self, dim=8):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        t = x.size(1)
        scores = self.q(x) @ self.k(x).transpose(-2, -1) / math.sqrt(x.size(-1))
        mask = ember.tril(ember.ones(t, t)).bool()
        scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(-1) @ self.v(x)


@theme.module(lambda g: g.randn(2, 4, 8), trains=True, tol=(1e-4, 1e-5))
def manual_causal_attention():
    return ManualAttention()


@theme.module(lambda g: g.randn(2, 5, 8), trains=True, tol=(1e-4, 1e-5))
def multihead_attention_module():
    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x):
            out, weights = self.mha(x, x, x, need_weights=True)
            return out, weights

    return Wrap()


class LSTMCellLoop(nn.Module):
    """``nn.LSTMCell`` unrolled over time in Python, collecting the hidden states."""

    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(4, 6)
        self.head = nn.Linear(6, 2)

    def forward(self, seq):
        h = ember.zeros(seq.size(1), 6)
        c = ember.zeros(seq.size(1), 6)
        outs = []
        for x in seq:
            h, c = self.cell(x, (h, c))
            outs.append(self.head(h))
        return ember.stack(outs)


@theme.module(lambda g: g.randn(5, 3, 4), trains=True, tol=(1e-4, 1e-5))
def lstm_cell_loop():
    return LSTMCellLoop()


class HandLSTM(nn.Module):
    """An LSTM written with one gate matrix and ``chunk``, as tutorials do."""

    def __init__(self, inp=3, hidden=4):
        super().__init__()
        self.hidden = hidden
        self.gates = nn.Linear(inp + hidden, 4 * hidden)

    def forward(self, seq):
        b = seq.shape[0]
        h = seq.new_zeros(b, self.hidden)
        c = seq.new_zeros(b, self.hidden)
        for t in range(seq.shape[1]):
            i, f, g, o = self.gates(ember.cat([seq[:, t], h], dim=1)).chunk(4, 1)
            c = ember.sigmoid(f) * c + ember.sigmoid(i) * ember.tanh(g)
            h = ember.sigmoid(o) * ember.tanh(c)
        return h


@theme.module(lambda g: g.randn(2, 5, 3), trains=True, tol=(1e-4, 1e-5))
def handwritten_lstm():
    return HandLSTM()


@theme.module(lambda g: g.randn(2, 4, 3), trains=True, tol=(1e-4, 1e-5))
def gru_module():
    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(3, 5, batch_first=True)

        def forward(self, x):
            out, h = self.gru(x)
            return out.sum(1) + h[0]

    return Wrap()


@theme.module(lambda g: g.randn(2, 4, 3), trains=True, tol=(1e-4, 1e-5))
def lstm_module():
    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 5, num_layers=2, batch_first=True)

        def forward(self, x):
            out, (h, c) = self.lstm(x)
            return out, h, c

    return Wrap()


class GPTBlock(nn.Module):
    """A nanoGPT block: pre-norm causal self-attention and a GELU MLP, both residual."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


@theme.module(lambda g: g.randn(2, 6, 16), trains=True, tol=(1e-4, 1e-5))
def gpt_block():
    return GPTBlock()


class GPTWithLoss(nn.Module):
    """benchmarks/gpt_model.py's tiny GPT (tied weights, sdpa), returning only the loss."""

    def __init__(self):
        super().__init__()
        self.gpt = gpt_model.build_gpt(
            ember, gpt_model.GPTConfig(vocab_size=17, block_size=8, n_layer=1, n_head=2, n_embd=8, batch_size=2)
        )

    def forward(self, idx, targets):
        return self.gpt(idx, targets)[1]


@theme.module(lambda g: (g.randint(17, 2, 8), g.randint(17, 2, 8)), trains=True, tol=(1e-4, 1e-5))
def tiny_gpt_loss():
    return GPTWithLoss()


class BasicBlock(nn.Module):
    """A ResNet basic block with a projection shortcut when the width changes."""

    def __init__(self, cin=3, cout=4, stride=2):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


@theme.module(lambda g: g.randn(2, 3, 6, 6), trains=True, tol=(1e-4, 1e-5))
def resnet_basic_block():
    return BasicBlock()


@theme.module(lambda g: g.randn(2, 5, 8), trains=True, tol=(1e-4, 1e-5))
def transformer_encoder_layer():
    return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(6, 3), nn.ReLU())
        self.dec = nn.Sequential(nn.Linear(3, 6), nn.Sigmoid())

    def forward(self, x):
        recon = self.dec(self.enc(x))
        return F.mse_loss(recon, x), recon


@theme.module(lambda g: g.rand(4, 6), trains=True)
def autoencoder_with_loss():
    return AutoEncoder()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = MLP((6, 8, 3))

    def forward(self, x, labels=None):
        logits = self.body(x)
        if labels is None:
            return logits
        return F.cross_entropy(logits, labels, label_smoothing=0.1)


@theme.module(lambda g: (g.randn(5, 6), g.randint(3, 5)), trains=True)
def classifier_with_labels():
    return Classifier()


class MixtureOfExperts(nn.Module):
    """Dense mixture: every expert runs, weighted by a softmax gate (a Python loop over experts)."""

    def __init__(self, dim=4, experts=3):
        super().__init__()
        self.gate = nn.Linear(dim, experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))

    def forward(self, x):
        weights = self.gate(x).softmax(-1)
        out = 0
        for i, expert in enumerate(self.experts):
            out = out + weights[..., i : i + 1] * expert(x)
        return out


@theme.module(lambda g: g.randn(3, 4), trains=True)
def dense_mixture_of_experts():
    return MixtureOfExperts()


class RMSNorm(nn.Module):
    def __init__(self, dim=6, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(ember.ones(dim))

    def forward(self, x):
        return x * ember.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


@theme.module(lambda g: g.randn(2, 3, 6), trains=True)
def rms_norm():
    return RMSNorm()


def _rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return ember.cat([-b, a], dim=-1)


class Rotary(nn.Module):
    """Rotary position embeddings applied to a (B, T, D) input; the cos/sin tables are buffers."""

    def __init__(self, dim=8, length=5):
        super().__init__()
        inv = 1.0 / (10000 ** (ember.arange(0, dim, 2).float() / dim))
        angles = ember.outer(ember.arange(length).float(), inv)
        emb = ember.cat([angles, angles], dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, x):
        t = x.shape[1]
        return x * self.cos[:t] + _rotate_half(x) * self.sin[:t]


@theme.module(lambda g: g.randn(2, 5, 8), trains=True)
def rotary_embedding():
    return Rotary()


class TemporalConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3, padding=1)
        self.norm = nn.GroupNorm(2, 4)

    def forward(self, x):
        return F.silu(self.norm(self.conv(x))).mean(-1)


@theme.module(lambda g: g.randn(2, 3, 7), trains=True)
def temporal_conv_groupnorm():
    return TemporalConv()


class BagOfEmbeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.proj = nn.Linear(4, 2)

    def forward(self, ids):
        return self.proj(self.emb(ids).mean(1))


@theme.module(lambda g: g.randint(10, 3, 5), trains=True)
def embedding_mean_pool():
    return BagOfEmbeddings()


class LayerNormByHand(nn.Module):
    def __init__(self, dim=5):
        super().__init__()
        self.gamma = nn.Parameter(ember.ones(dim))
        self.beta = nn.Parameter(ember.zeros(dim))

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / ember.sqrt(var + 1e-5) * self.gamma + self.beta


@theme.module(lambda g: g.randn(3, 5), trains=True)
def layer_norm_by_hand():
    return LayerNormByHand()
