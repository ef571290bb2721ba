"""A small GPT language model written once for Ember's benchmarks and tests, over a torch-like module.

:func:`build_gpt` takes the library as an argument (``ember``, or ``torch`` for the comparison), so the two
sides run the same program, as ``import ember as torch`` would: token and position embeddings, a stack of
pre-norm blocks (causal self-attention through ``F.scaled_dot_product_attention(is_causal=True)``, a GELU MLP),
LayerNorm without bias, the output head tied to the token embedding, and cross-entropy with
``ignore_index=-1``. :func:`train_step` is one optimisation step as GPT training programs write it: forward,
backward, ``clip_grad_norm_(1.0)``, AdamW, ``zero_grad(set_to_none=True)``.

Used by ``bench_cuda.py`` (the ``cuda_training_gpt_*`` rows), ``gpt_phases.py`` and the GPT tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["GPTConfig", "TINY", "SMALL", "build_gpt", "make_optimizer", "train_step", "copy_parameters", "batch"]


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of the model (``block_size``: the longest sequence) and of a training batch."""

    vocab_size: int = 65
    block_size: int = 256
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    batch_size: int = 12
    dropout: float = 0.0


#: The 2-layer configuration of issue 24 (a step bound by host time).
TINY = GPTConfig(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=32, batch_size=3)
#: The 6-layer configuration of issue 24 (character-level, about 10.7M parameters).
SMALL = GPTConfig(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384, batch_size=12)


def build_gpt(lib, config):
    """A GPT model of ``config`` built from ``lib`` (``ember`` or ``torch``), on the CPU, initialised as GPT-2
    is (normal with std 0.02, the residual projections scaled by ``1/sqrt(2 * n_layer)``) from ``lib``'s
    default generator.

    ``model(idx, targets)`` takes ``(B, T)`` int64 token indices (and targets, -1 for positions to ignore) and
    returns ``(logits, loss)`` (``loss`` None without targets).
    """
    nn = lib.nn
    F = lib.nn.functional
    if config.n_embd % config.n_head:
        raise ValueError(f"n_embd ({config.n_embd}) must be a multiple of n_head ({config.n_head})")

    class LayerNorm(nn.Module):
        """LayerNorm with a weight and no bias."""

        def __init__(self, width):
            super().__init__()
            self.weight = nn.Parameter(lib.ones(width))

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
            self.proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
            self.proj.residual = True
            self.out_dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            b, t, c = x.size()
            heads = config.n_head
            q, k, v = self.qkv(x).split(c, dim=2)
            # (B, T, C) -> (B, heads, T, C / heads)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            drop = config.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=drop, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(b, t, c)
            return self.out_dropout(self.proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(config.n_embd, 4 * config.n_embd, bias=False)
            self.act = nn.GELU()
            self.down = nn.Linear(4 * config.n_embd, config.n_embd, bias=False)
            self.down.residual = True
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.down(self.act(self.up(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = LayerNorm(config.n_embd)
            self.attn = CausalSelfAttention()
            self.norm2 = LayerNorm(config.n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = config
            self.tokens = nn.Embedding(config.vocab_size, config.n_embd)
            self.positions = nn.Embedding(config.block_size, config.n_embd)
            self.dropout = nn.Dropout(config.dropout)
            self.blocks = nn.ModuleList([Block() for _ in range(config.n_layer)])
            self.norm = LayerNorm(config.n_embd)
            self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.tokens.weight = self.head.weight  # weight tying: one matrix embeds and predicts
            self.apply(self._init)

        def _init(self, module):
            if isinstance(module, (nn.Linear, nn.Embedding)):
                std = 0.02 / math.sqrt(2 * config.n_layer) if getattr(module, "residual", False) else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            if t > config.block_size:
                raise ValueError(f"sequence of {t} tokens, longer than block_size {config.block_size}")
            pos = lib.arange(0, t, dtype=lib.long, device=idx.device)
            x = self.dropout(self.tokens(idx) + self.positions(pos))
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.norm(x))
            if targets is None:
                return logits, None
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

    return GPT()


def make_optimizer(lib, model, fused=None, lr=6e-4):
    """AdamW as GPT training programs set it up: weight decay 0.1 on the matrices only, betas (0.9, 0.95)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    kwargs = {} if fused is None else {"fused": fused}
    return lib.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), **kwargs)


def forward_loss(model, x, y):
    """The forward phase: the loss."""
    return model(x, y)[1]


def train_step(lib, model, optimizer, x, y):
    """One training step (forward, backward, clip the gradient norm to 1, AdamW, drop the gradients); returns
    the loss tensor (not read back: reading it would wait for the device)."""
    loss = forward_loss(model, x, y)
    loss.backward()
    lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def copy_parameters(source, target, lib, to_target):
    """Copy ``source``'s parameters into ``target`` (models of the same structure, possibly of two libraries),
    in order; ``lib`` is ``target``'s library and ``to_target(numpy_array)`` makes a tensor of it on
    ``target``'s device."""
    pairs = list(zip(source.parameters(), target.parameters(), strict=True))
    with lib.no_grad():
        for theirs, ours in pairs:
            values = theirs.detach().cpu().numpy()
            if tuple(values.shape) != tuple(ours.shape):
                raise ValueError(f"parameter shapes differ: {tuple(values.shape)} and {tuple(ours.shape)}")
            ours.copy_(to_target(values))


def batch(config, seed=0, ignored=2):
    """A batch of token indices and targets (numpy int64 ``(batch_size, block_size)``), the targets the next
    tokens, with the first ``ignored`` targets of the first row set to -1 (left out of the loss)."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, config.vocab_size, size=(config.batch_size, config.block_size + 1))
    x, y = tokens[:, :-1].copy(), tokens[:, 1:].copy()
    y[0, :ignored] = -1
    return x, y
