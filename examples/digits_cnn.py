"""Train a small convolutional network on the UCI handwritten digits with ember.

This is what ``nox -s demo`` runs. It is written the way a PyTorch user writes a
training script, with ``ember`` in place of ``torch``:

* the 1,797 8x8 images that ship inside scikit-learn (``sklearn.datasets.load_digits``,
  no download), split once into 1,437 training and 360 test images (stratified, fixed
  seed), served by an ``ember.utils.data.Dataset`` and ``DataLoader``;
* a CNN with ``Conv2d``, ``BatchNorm2d``, ``MaxPool2d`` and ``Dropout``;
* ``AdamW`` with a ``OneCycleLR`` schedule and cross-entropy with label smoothing;
* ``ember.manual_seed`` and a seeded ``ember.Generator`` for the shuffling, so a run
  is reproducible to the bit;
* a checkpoint each epoch (model, optimizer, scheduler, epoch, both random number
  generators), written atomically, that ``--resume`` continues from exactly: a run of
  6 epochs and a run stopped after 3 (``--stop-after 3``) then resumed end with the
  same weights, bit for bit;
* a progress bar (tqdm), a per-epoch table, and in ``--output``: the loss and accuracy
  curves (``curves.png``), the confusion matrix (``confusion_matrix.png``) and a JSON
  summary (``summary.json``).

It runs on one thread by default (``--threads``): the model is so small that splitting
its kernels across two cores costs more than it saves. ``--device cuda`` trains on a GPU
(through CuPy): the loaders hand out batches in pinned memory, copied to the GPU
asynchronously, and a checkpoint written on one device resumes on the other.

Run it with ``nox -s demo`` or ``python examples/digits_cnn.py --help``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from example_utils import DefaultsHelpFormatter, atomic_write, pick_device, thread_limits

import ember
import ember.nn as nn
import ember.optim as optim
from ember.utils.data import DataLoader, Dataset

CLASSES = 10
CHECKPOINT = "checkpoint.ember"


# --------------------------------------------------------------------------- data


def load_split(test_fraction: float = 0.2, split_seed: int = 0):
    """The digits as ``(train_images, train_labels, test_images, test_labels)`` numpy arrays.

    Images are float32 of shape (N, 1, 8, 8), standardised with the training set's
    mean and standard deviation; labels are int64 in [0, 10). The split is stratified
    and fixed by ``split_seed`` (not by ``--seed``), so every run is scored on the
    same 360 test images.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = digits.images.astype(np.float32)[:, None] / 16.0  # pixel values are 0..16
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=test_fraction, stratify=labels, random_state=split_seed
    )
    mean, std = x_train.mean(), x_train.std()
    return (x_train - mean) / std, y_train, (x_test - mean) / std, y_test


class DigitsDataset(Dataset):
    """One split of the digits: item ``i`` is ``(image, label)``, a (1, 8, 8) float32 tensor and an int."""

    def __init__(self, images: np.ndarray, labels: np.ndarray):
        if len(images) != len(labels):
            raise ValueError(f"DigitsDataset: {len(images)} images but {len(labels)} labels")
        self.images = ember.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
        self.labels = labels.tolist()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.images[index], self.labels[index]


# --------------------------------------------------------------------------- model


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions with batch norm, a 2x2 max pool, and a two-layer classifier with dropout.

    Input (N, 1, 8, 8) float32, output (N, 10) logits.
    """

    def __init__(self, num_classes: int = CLASSES, dropout: float = 0.25):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False),  # no bias: the batch norm that follows has one
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, padding=1, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(64 * 4 * 4, 128),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(128, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


# --------------------------------------------------------------------------- command line


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train a CNN on the UCI handwritten digits (sklearn's load_digits) with ember.",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--epochs", type=int, default=12, help="epochs of the whole run (the LR schedule spans them)")
    parser.add_argument("--batch-size", type=int, default=64, help="training batch size")
    parser.add_argument("--lr", type=float, default=4e-3, help="peak learning rate of the one-cycle schedule")
    parser.add_argument("--weight-decay", type=float, default=1e-2, help="AdamW's decoupled weight decay")
    parser.add_argument("--label-smoothing", type=float, default=0.1, help="cross-entropy label smoothing")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights, dropout and shuffling")
    parser.add_argument(
        "--device",
        default="cpu",
        help="device to train on: cpu, or cuda (cuda:N for another GPU; needs CuPy and a GPU)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="folder for checkpoint and plots (default: runs/digits_cnn, or the --resume checkpoint's folder)",
    )
    parser.add_argument("--resume", type=Path, metavar="CHECKPOINT", help="continue the run saved in CHECKPOINT")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="compile the model with ember.compile (needs ember-dynamo and ember-inductor, not written yet)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        # measured on 2 shared cores: 2 threads cost ~5x the CPU time of 1 (the kernels are too small to split)
        help="intra-op threads of ember and of numpy's BLAS (1 is fastest for this small model)",
    )
    parser.add_argument(
        "--stop-after", type=int, metavar="EPOCH", help="stop after this epoch, as an interrupted job would"
    )
    parser.add_argument("--limit", type=int, metavar="N", help="use only the first N training images (smoke tests)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size", "threads", "stop_after", "limit"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if not args.lr > 0:
        parser.error(f"--lr must be positive, got {args.lr}")
    if args.resume is not None and not args.resume.is_file():
        parser.error(f"--resume: no checkpoint file at {args.resume}")
    return args


def maybe_compile(model: nn.Module, enabled: bool) -> nn.Module:
    """``ember.compile(model)`` when asked for, or a clear exit when compilation is not available yet."""
    if not enabled:
        return model
    if not hasattr(ember, "compile"):
        raise SystemExit("--compile: this ember has no ember.compile yet; run without --compile")
    try:
        return ember.compile(model)
    except (ImportError, RuntimeError) as exc:  # ember-dynamo is not installed (MissingDistributionError)
        raise SystemExit(
            "--compile: ember.compile is not available yet (its distributions, ember-dynamo and ember-inductor, "
            f"are not built; {type(exc).__name__}); run without --compile"
        ) from exc


# --------------------------------------------------------------------------- training


def train_one_epoch(model, loader, optimizer, scheduler, criterion, device, desc):
    """One pass over ``loader``; returns ``(mean loss, accuracy, seconds)`` of the training batches."""
    from tqdm import tqdm

    model.train()
    total_loss, correct, seen = 0.0, 0, 0
    start = time.perf_counter()
    # disable=None: a bar on a terminal, nothing in a log file or under pytest
    with tqdm(loader, desc=desc, unit="batch", leave=False, disable=None, file=sys.stderr) as bar:
        for images, labels in bar:
            images, labels = _to_device(images, device), _to_device(labels, device)
            optimizer.zero_grad()
            logits = model(images)
            loss = criterion(logits, labels)
            loss.backward()
            optimizer.step()
            scheduler.step()  # OneCycleLR steps once per batch

            batch = labels.shape[0]
            total_loss += loss.item() * batch
            correct += int((logits.argmax(dim=1) == labels).sum().item())
            seen += batch
            elapsed = time.perf_counter() - start
            bar.set_postfix({"loss": f"{loss.item():.4f}", "img/s": f"{seen / elapsed:.0f}"})
    return total_loss / seen, correct / seen, time.perf_counter() - start


@ember.no_grad()
def evaluate(model, loader, criterion, device):
    """``(mean loss, accuracy, predictions)`` of ``model`` over ``loader``, in eval mode."""
    model.eval()
    total_loss, predictions, targets = 0.0, [], []
    for images, labels in loader:
        images, labels = _to_device(images, device), _to_device(labels, device)
        logits = model(images)
        total_loss += criterion(logits, labels).item() * labels.shape[0]
        predictions.append(logits.argmax(dim=1).cpu().numpy())
        targets.append(labels.cpu().numpy())
    predictions, targets = np.concatenate(predictions), np.concatenate(targets)
    return total_loss / len(targets), float((predictions == targets).mean()), predictions


def _to_device(batch, device):
    """``batch`` on ``device``; from the loader's pinned memory the copy to a GPU is asynchronous."""
    return batch.to(device, non_blocking=device.type == "cuda")


# --------------------------------------------------------------------------- checkpoints


def save_checkpoint(path, model, optimizer, scheduler, shuffle_generator, epoch, history, args):
    """Everything a resumed run needs to continue bit for bit.

    ``ember.save`` to a path is atomic: it writes a temporary file in the same folder,
    fsyncs it and ``os.replace``-s it over ``path``, so an interrupted save leaves the
    previous checkpoint intact.
    """
    # on a GPU, dropout draws from that GPU's generator: save it too
    device = next(model.parameters()).device
    state = {
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        # dropout draws from the default generator, the shuffling from its own
        "rng_state": ember.get_rng_state(),
        "shuffle_rng_state": shuffle_generator.get_state(),
        **({"cuda_rng_state": ember.cuda.get_rng_state(device)} if device.type == "cuda" else {}),
        "history": history,
        "config": {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "limit": args.limit},
    }
    ember.save(state, path)


def load_checkpoint(path, model, optimizer, scheduler, shuffle_generator, args):
    """Restore a :func:`save_checkpoint` file into the given objects; returns ``(epoch, history)``.

    The file loads to the CPU first (``map_location``), so a checkpoint written on a GPU resumes on a
    machine without one and vice versa: ``load_state_dict`` copies the values to the model's device and
    the optimizer casts its state to its parameters' device.
    """
    state = ember.load(path, map_location="cpu")
    for key, value in state["config"].items():
        if getattr(args, key) != value:
            flag = "--" + key.replace("_", "-")
            raise SystemExit(
                f"--resume {path}: the checkpoint's run used {flag} {value}, this one {getattr(args, key)}; "
                f"pass {flag} {value} to continue it (the LR schedule and batches depend on it)"
            )
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    ember.set_rng_state(state["rng_state"])
    device = next(model.parameters()).device
    if device.type == "cuda" and "cuda_rng_state" in state:
        ember.cuda.set_rng_state(state["cuda_rng_state"], device)
    shuffle_generator.set_state(state["shuffle_rng_state"])
    return state["epoch"], list(state["history"])


# --------------------------------------------------------------------------- reports


def print_table_header() -> None:
    print(f"{'epoch':>5}  {'lr':>8}  {'train loss':>10}  {'train acc':>9}  {'test loss':>9}  {'test acc':>8}  "
          f"{'seconds':>7}  {'img/s':>6}")


def print_table_row(row: dict) -> None:
    print(f"{row['epoch']:>5}  {row['lr']:>8.2e}  {row['train_loss']:>10.4f}  {row['train_accuracy']:>9.4f}  "
          f"{row['test_loss']:>9.4f}  {row['test_accuracy']:>8.4f}  {row['seconds']:>7.2f}  "
          f"{row['images_per_s']:>6.0f}", flush=True)


def plot_curves(history: list[dict], path: Path) -> None:
    """Train and test loss (left) and accuracy (right) per epoch."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    epochs = [row["epoch"] for row in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(epochs, [row["train_loss"] for row in history], "o-", label="train")
    left.plot(epochs, [row["test_loss"] for row in history], "o-", label="test")
    left.set(xlabel="epoch", ylabel="cross-entropy (label smoothing)", title="loss")
    right.plot(epochs, [row["train_accuracy"] for row in history], "o-", label="train")
    right.plot(epochs, [row["test_accuracy"] for row in history], "o-", label="test")
    right.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("ember: CNN on the UCI digits")
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    plt.close(fig)


def confusion_matrix(targets: np.ndarray, predictions: np.ndarray) -> np.ndarray:
    """(10, 10) int64 counts: row = true digit, column = predicted digit."""
    matrix = np.zeros((CLASSES, CLASSES), dtype=np.int64)
    np.add.at(matrix, (targets, predictions), 1)
    return matrix


def plot_confusion(matrix: np.ndarray, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5.5))
    image = ax.imshow(matrix, cmap="Blues")
    for (row, col), count in np.ndenumerate(matrix):
        if count:
            color = "white" if count > matrix.max() / 2 else "black"
            ax.text(col, row, str(count), ha="center", va="center", color=color, fontsize=8)
    ax.set(xticks=range(CLASSES), yticks=range(CLASSES), xlabel="predicted digit", ylabel="true digit")
    accuracy = np.trace(matrix) / matrix.sum()
    ax.set_title(f"test confusion matrix (accuracy {accuracy:.4f})")
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    plt.close(fig)


def write_summary(path: Path, summary: dict) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8"))


# --------------------------------------------------------------------------- main


def main(argv=None) -> dict:
    """Train (or resume) and write the reports; returns the summary written to ``summary.json``."""
    args = parse_args(argv)
    with thread_limits(args.threads):
        return run(args)


def run(args: argparse.Namespace) -> dict:
    """:func:`main` after the command line is parsed and the thread counts are set."""
    device = pick_device(args.device)
    if args.output is None:  # a resumed run keeps writing beside its checkpoint
        args.output = args.resume.parent if args.resume is not None else Path("runs/digits_cnn")
    args.output.mkdir(parents=True, exist_ok=True)
    wall_start, cpu_start = time.perf_counter(), time.process_time()

    ember.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load_split()
    if args.limit is not None:
        x_train, y_train = x_train[: args.limit], y_train[: args.limit]
    train_set, test_set = DigitsDataset(x_train, y_train), DigitsDataset(x_test, y_test)
    shuffle_generator = ember.Generator().manual_seed(args.seed)
    pin = device.type == "cuda"  # page-locked batches: asynchronous copies to the GPU
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, shuffle=True, generator=shuffle_generator, pin_memory=pin
    )
    test_loader = DataLoader(test_set, batch_size=256, pin_memory=pin)

    model = DigitsCNN().to(device)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train_loader)
    )
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    start_epoch, history = 0, []
    if args.resume is not None:
        start_epoch, history = load_checkpoint(args.resume, model, optimizer, scheduler, shuffle_generator, args)
        print(f"resumed from {args.resume} after epoch {start_epoch} of {args.epochs}")
    # compile after loading: the checkpoint holds the plain module's state dict
    train_model = maybe_compile(model, args.compile)

    parameters = sum(p.numel() for p in model.parameters())
    print(f"ember {ember.__version__} | {len(train_set)} train / {len(test_set)} test images | "
          f"{parameters:,} parameters | device {device} | {_plural(ember.get_num_threads(), 'thread')}")
    print_table_header()
    for row in history:
        print_table_row(row)

    last_epoch = args.epochs if args.stop_after is None else min(args.epochs, args.stop_after)
    predictions = None
    for epoch in range(start_epoch + 1, last_epoch + 1):
        lr = scheduler.get_last_lr()[0]
        train_loss, train_accuracy, seconds = train_one_epoch(
            train_model, train_loader, optimizer, scheduler, criterion, device, f"epoch {epoch}/{args.epochs}"
        )
        test_loss, test_accuracy, predictions = evaluate(train_model, test_loader, criterion, device)
        row = {
            "epoch": epoch,
            "lr": lr,
            "train_loss": train_loss,
            "train_accuracy": train_accuracy,
            "test_loss": test_loss,
            "test_accuracy": test_accuracy,
            "seconds": seconds,
            "images_per_s": len(train_set) / seconds,
        }
        history.append(row)
        print_table_row(row)
        save_checkpoint(
            args.output / CHECKPOINT, model, optimizer, scheduler, shuffle_generator, epoch, history, args
        )

    if predictions is None:  # nothing left to train: score the checkpoint as it is
        _, _, predictions = evaluate(train_model, test_loader, criterion, device)
    matrix = confusion_matrix(np.asarray(y_test), predictions)
    if not args.no_plots and history:
        plot_curves(history, args.output / "curves.png")
        plot_confusion(matrix, args.output / "confusion_matrix.png")

    train_seconds = sum(row["seconds"] for row in history)
    final = history[-1] if history else {}
    summary = {
        "task": "digits_cnn",
        "ember_version": ember.__version__,
        "device": str(device),
        "threads": ember.get_num_threads(),
        "epochs_done": len(history),
        "epochs": args.epochs,
        "final": final,
        "test_accuracy": final.get("test_accuracy", math.nan),
        "train_images_per_s": sum(len(train_set) for _ in history) / train_seconds if history else math.nan,
        "train_seconds": train_seconds,
        "wall_seconds": time.perf_counter() - wall_start,  # this process only (a resumed run: since resuming)
        "cpu_seconds": time.process_time() - cpu_start,
        "confusion_matrix": matrix.tolist(),
        "history": history,
        "args": {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()},
    }
    write_summary(args.output / "summary.json", summary)
    print(f"test accuracy {summary['test_accuracy']:.4f} | wall {summary['wall_seconds']:.1f} s "
          f"(cpu {summary['cpu_seconds']:.1f} s) | {summary['train_images_per_s']:.0f} train images/s | "
          f"outputs in {args.output}")
    if last_epoch < args.epochs:
        print(f"stopped after epoch {last_epoch} of {args.epochs}; continue with "
              f"--epochs {args.epochs} --resume {args.output / CHECKPOINT}")
    return summary


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


if __name__ == "__main__":
    main()
