"""A character-level transformer language model, trained with ember on the Python standard library's docstrings.

``nox -s demo -- --task text`` runs it. The text is the documentation strings of a fixed
list of standard-library modules (:data:`MODULES`: the module's docstring, then those of
its public functions and classes, in name order), so it ships with every Python and
needs no download; its SHA-256 is printed and saved, because another Python version has
slightly different docstrings. The last 10% of the text is held out for validation (scored in disjoint windows).

The model is a GPT-style decoder written with ember's stock modules: token and position
embeddings (``nn.Embedding``), a ``nn.TransformerEncoder`` of pre-norm layers run with a
causal mask (``nn.Transformer.generate_square_subsequent_mask``), a final ``LayerNorm``
and a linear head over the characters. It trains with ``AdamW``, a linear warm-up into
cosine decay (``SequentialLR`` of ``LinearLR`` and ``CosineAnnealingLR``) and gradient
clipping, then prints a few lines sampled from it with ``ember.multinomial``. That
exercises attention, embeddings, layer norm and long backward graphs on real data.

Outputs in ``--output``: ``summary.json`` (losses, timings, the corpus hash),
``samples.txt``, ``loss.png`` and ``model.ember`` (the trained weights, written atomically).

``--device cuda`` trains on a GPU (through CuPy). Run it with ``python examples/char_transformer.py --help``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import math
import sys
import time
from pathlib import Path

from example_utils import DefaultsHelpFormatter, atomic_write, pick_device, thread_limits

import ember
import ember.nn as nn
import ember.nn.functional as F
import ember.optim as optim
from ember.utils.data import DataLoader, Dataset

#: The modules whose docstrings make the corpus (56,318 characters, 91 distinct, on Python 3.11.7).
MODULES = (
    "argparse",
    "bisect",
    "collections",
    "contextlib",
    "fractions",
    "functools",
    "heapq",
    "json",
    "pathlib",
    "random",
    "statistics",
    "string",
    "textwrap",
)


# --------------------------------------------------------------------------- data


def docstring_corpus(modules=MODULES) -> str:
    """The docstrings of ``modules`` and their public functions and classes, each once, blank-line separated."""
    seen, parts = set(), []
    for module_name in modules:
        module = importlib.import_module(module_name)
        names = sorted(name for name in dir(module) if not name.startswith("_"))
        objects = [module] + [getattr(module, name) for name in names]
        for obj in objects:
            if obj is not module and not (inspect.isroutine(obj) or inspect.isclass(obj)):
                continue  # constants' docstrings are their type's
            if obj is not module and getattr(obj, "__module__", None) != module_name:
                continue  # re-exported from elsewhere
            doc = inspect.getdoc(obj)
            if doc and doc not in seen:
                seen.add(doc)
                parts.append(doc)
    return "\n\n".join(parts) + "\n"


class CharVocab:
    """The characters of a text, sorted; ``encode`` maps a string to ids, ``decode`` back."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {ch: i for i, ch in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> ember.Tensor:
        return ember.tensor([self.index[ch] for ch in text], dtype=ember.int64)

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)


class NextCharDataset(Dataset):
    """Windows of ``context`` characters and their next characters.

    Item ``i`` is ``(ids[s:s+context], ids[s+1:s+context+1])`` with ``s = i * stride``:
    every window with ``stride=1`` (training), disjoint windows with ``stride=context``
    (validation, so that each character is scored once).
    """

    def __init__(self, ids: ember.Tensor, context: int, stride: int = 1):
        if ids.numel() <= context:
            raise ValueError(f"NextCharDataset: need more than context={context} characters, got {ids.numel()}")
        self.ids = ids
        self.context = context
        self.stride = stride

    def __len__(self) -> int:
        return (self.ids.numel() - self.context - 1) // self.stride + 1

    def __getitem__(self, index: int):
        if not 0 <= index < len(self):  # slicing past the end would quietly give short windows
            raise IndexError(f"NextCharDataset: index {index} out of range for {len(self)} windows")
        start = index * self.stride
        window = self.ids[start : start + self.context + 1]
        return window[:-1], window[1:]


# --------------------------------------------------------------------------- model


class CharTransformer(nn.Module):
    """A decoder-only transformer over characters.

    Input (N, T) int64 character ids with T <= ``context``; output (N, T, vocab_size)
    logits, where position t sees only positions <= t (causal mask).
    """

    def __init__(self, vocab_size, context, d_model=128, nhead=4, num_layers=2, dim_feedforward=512, dropout=0.1):
        super().__init__()
        self.context = context
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(context, d_model)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, activation="gelu", batch_first=True, norm_first=True
        )
        # enable_nested_tensor only matters for padding masks, which a language model has none of
        self.blocks = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        # -inf above the diagonal: position t attends to positions 0..t
        self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(context), persistent=False)

    def forward(self, ids):
        length = ids.shape[1]
        if length > self.context:
            raise ValueError(f"CharTransformer: sequence length {length} is longer than context={self.context}")
        positions = ember.arange(length, device=ids.device)
        x = self.dropout(self.token_embedding(ids) + self.position_embedding(positions))
        x = self.blocks(x, mask=self.causal_mask[:length, :length], is_causal=True)
        return self.head(self.norm(x))


@ember.no_grad()
def sample(model, vocab, prompt: str, length: int, temperature: float = 0.8, generator=None) -> str:
    """Continue ``prompt`` by ``length`` characters drawn one at a time from the model's softmax."""
    model.eval()
    ids = vocab.encode(prompt).unsqueeze(0).to(model.head.weight.device)
    for _ in range(length):
        logits = model(ids[:, -model.context :])[:, -1] / temperature
        # drawn on the host from a CPU generator (one row of probabilities per character), so a run on
        # any device samples the characters a CPU run would from the same probabilities
        probs = F.softmax(logits, dim=-1).cpu()
        next_id = ember.multinomial(probs, 1, generator=generator).to(ids.device)
        ids = ember.cat([ids, next_id], dim=1)
    return vocab.decode(ids[0].tolist())


@ember.no_grad()
def evaluate(model, loader) -> float:
    """Mean cross-entropy (nats per character) of ``model`` over ``loader``."""
    model.eval()
    total, count = 0.0, 0
    device = model.head.weight.device
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        total += F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum").item()
        count += targets.numel()
    return total / count


# --------------------------------------------------------------------------- command line and outputs


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train a character-level transformer on the Python standard library's docstrings with ember.",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per step")
    parser.add_argument("--context", type=int, default=64, help="characters per sequence")
    parser.add_argument("--d-model", type=int, default=128, help="embedding width")
    parser.add_argument("--layers", type=int, default=2, help="transformer layers")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument("--dropout", type=float, default=0.0, help="dropout of the embeddings and the layers")
    parser.add_argument("--lr", type=float, default=5e-3, help="peak learning rate")
    parser.add_argument("--warmup", type=int, default=30, help="warm-up steps (linear, then cosine decay)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights, dropout, batches and samples")
    parser.add_argument("--eval-every", type=int, default=50, help="steps between progress lines")
    parser.add_argument("--sample-chars", type=int, default=240, help="characters to sample at the end")
    parser.add_argument("--limit", type=int, metavar="N", help="use only the first N characters of the corpus")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads of ember and of numpy's BLAS (1 is fastest for this small model on 2 busy cores)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="device to train on: cpu, or cuda (cuda:N for another GPU; needs CuPy and a GPU)",
    )
    parser.add_argument("--output", type=Path, default=Path("runs/char_transformer"), help="folder for the outputs")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plot")
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size", "context", "d_model", "layers", "heads", "eval_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.d_model % args.heads:
        parser.error(f"--d-model ({args.d_model}) must be divisible by --heads ({args.heads})")
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup must be in [0, --steps), got {args.warmup} with --steps {args.steps}")
    return args


def plot_losses(log: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([row["step"] for row in log], [row["train_loss"] for row in log], "o-", label="train (running mean)")
    ax.plot([row["step"] for row in log], [row["val_loss"] for row in log], "o-", label="validation")
    ax.set(xlabel="step", ylabel="cross-entropy (nats per character)", title="ember: char transformer")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    plt.close(fig)


# --------------------------------------------------------------------------- main


def endless(loader):
    """Batches of ``loader``, epoch after epoch (each epoch reshuffled)."""
    while True:
        yield from loader


def main(argv=None) -> dict:
    """Train, sample and write the outputs; returns the summary written to ``summary.json``."""
    args = parse_args(argv)
    with thread_limits(args.threads):
        return run(args)


def run(args: argparse.Namespace) -> dict:
    """:func:`main` after the command line is parsed and the thread counts are set."""
    device = pick_device(args.device)
    args.output.mkdir(parents=True, exist_ok=True)
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    ember.manual_seed(args.seed)

    text = docstring_corpus()
    if args.limit is not None:
        text = text[: args.limit]
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    vocab = CharVocab(text)
    ids = vocab.encode(text)
    split = int(0.9 * len(text))
    train_set = NextCharDataset(ids[:split], args.context)
    val_set = NextCharDataset(ids[split:], args.context, stride=args.context)
    batches = ember.Generator().manual_seed(args.seed)
    pin = device.type == "cuda"  # page-locked batches: asynchronous copies to the GPU
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, shuffle=True, drop_last=True, generator=batches, pin_memory=pin
    )
    val_loader = DataLoader(val_set, batch_size=args.batch_size, pin_memory=pin)

    model = CharTransformer(
        len(vocab), args.context, args.d_model, args.heads, args.layers, 4 * args.d_model, args.dropout
    ).to(device)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    scheduler = optim.lr_scheduler.SequentialLR(
        optimizer,
        [
            optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=max(args.warmup, 1)),
            optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps - args.warmup, eta_min=args.lr / 20),
        ],
        milestones=[args.warmup],
    )
    parameters = sum(p.numel() for p in model.parameters())
    print(f"ember {ember.__version__} | corpus: docstrings of {len(MODULES)} stdlib modules, {len(text):,} chars, "
          f"{len(vocab)} distinct, sha256 {digest[:12]} (Python {sys.version.split()[0]})")
    print(f"model: {args.layers} layers, d_model {args.d_model}, {args.heads} heads, context {args.context}, "
          f"{parameters:,} parameters | device {device} | {ember.get_num_threads()} threads")

    initial_val = evaluate(model, val_loader)
    print(f"{'step':>5}  {'lr':>8}  {'train loss':>10}  {'val loss':>8}  {'chars/s':>7}")
    print(f"{0:>5}  {scheduler.get_last_lr()[0]:>8.2e}  {'':>10}  {initial_val:>8.4f}  {'':>7}", flush=True)
    log, window, train_seconds, tick = [], [], 0.0, time.perf_counter()
    batch_iter = endless(train_loader)
    for step in range(1, args.steps + 1):
        model.train()
        inputs, targets = next(batch_iter)
        non_blocking = device.type == "cuda"
        inputs, targets = inputs.to(device, non_blocking=non_blocking), targets.to(device, non_blocking=non_blocking)
        logits = model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        window.append(loss.item())
        if step % args.eval_every == 0 or step == args.steps:
            seconds = time.perf_counter() - tick
            train_seconds += seconds
            row = {
                "step": step,
                "lr": scheduler.get_last_lr()[0],
                "train_loss": sum(window) / len(window),
                "val_loss": evaluate(model, val_loader),
                "chars_per_s": len(window) * args.batch_size * args.context / seconds,
            }
            log.append(row)
            print(f"{step:>5}  {row['lr']:>8.2e}  {row['train_loss']:>10.4f}  {row['val_loss']:>8.4f}  "
                  f"{row['chars_per_s']:>7.0f}", flush=True)
            window, tick = [], time.perf_counter()

    sampler = ember.Generator().manual_seed(args.seed)
    samples = [sample(model, vocab, prompt, args.sample_chars // 3, generator=sampler)
               for prompt in ("Return ", "The ", "If ")]
    print("\nsamples (temperature 0.8):")
    for text_sample in samples:
        print("  " + text_sample.replace("\n", "\n  "))
        print("  ---")

    ember.save(model.state_dict(), args.output / "model.ember")  # atomic: temp file + os.replace
    atomic_write(args.output / "samples.txt", lambda tmp: Path(tmp).write_text("\n---\n".join(samples) + "\n"))
    if not args.no_plots:
        plot_losses(log, args.output / "loss.png")
    summary = {
        "task": "char_transformer",
        "ember_version": ember.__version__,
        "python_version": sys.version.split()[0],
        "corpus_modules": list(MODULES),
        "corpus_chars": len(text),
        "corpus_sha256": digest,
        "vocab_size": len(vocab),
        "parameters": parameters,
        "device": str(device),
        "threads": ember.get_num_threads(),
        "initial_val_loss": initial_val,
        "final_val_loss": log[-1]["val_loss"],
        "uniform_loss": math.log(len(vocab)),  # what an untrained model scores
        "train_seconds": train_seconds,
        "wall_seconds": time.perf_counter() - wall_start,
        "cpu_seconds": time.process_time() - cpu_start,
        "log": log,
        "samples": samples,
        "args": {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()},
    }
    atomic_write(
        args.output / "summary.json",
        lambda tmp: Path(tmp).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8"),
    )
    print(f"validation loss {initial_val:.3f} -> {summary['final_val_loss']:.3f} nats/char "
          f"(uniform: {summary['uniform_loss']:.3f}) | wall {summary['wall_seconds']:.1f} s "
          f"(cpu {summary['cpu_seconds']:.1f} s) | outputs in {args.output}")
    return summary


if __name__ == "__main__":
    main()
