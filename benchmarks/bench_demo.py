"""The demo's model (``examples/digits_cnn.py``) against its PyTorch twin.

As a benchmark module (``python benchmarks/run.py -k demo``), one timed call is one
training step of the demo, as its loop runs it::

    optimizer.zero_grad()
    loss = criterion(model(images), labels)   # cross-entropy, label smoothing 0.1
    loss.backward()
    optimizer.step()                          # AdamW
    scheduler.step()                          # OneCycleLR

on a batch of 64 1x8x8 images, with the demo's ``DigitsCNN`` in ember and the same
layers in ``torch.nn`` (:class:`TorchDigitsCNN`), starting from the same weights. The
setup checks once, with dropout switched off (the two libraries draw different dropout
masks), that both compute the same loss on the first two steps and end up with the
same weights; the timed steps then run with dropout on.

As a script, it runs the whole demo in both libraries, one after the other, in this
process, with the same data split, hyperparameters and thread count, and prints the
demo's per-epoch table next to the twin's, then one comparison table (final test
accuracy, wall time, CPU time, training images/s) in Markdown for the closing note::

    python benchmarks/bench_demo.py                     # the demo's defaults
    python benchmarks/bench_demo.py --epochs 3 --threads 1 --markdown /tmp/demo.md

PyTorch (``torch``) is needed for the twin; scikit-learn, tqdm and matplotlib for the demo.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import Workload, import_torch, limit_threads

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "examples") not in sys.path:  # the demo is a script in examples/
    sys.path.insert(0, str(ROOT / "examples"))

_RTOL = 2e-3
_ATOL = 2e-4
_BATCH = 64
_STEPS_PER_EPOCH = 23  # the demo's: ceil(1437 / 64)


# --------------------------------------------------------------------------- the PyTorch twin


def torch_digits_cnn(torch, dropout=0.25):
    """The demo's ``DigitsCNN`` written with ``torch.nn``: the same layers, the same state-dict names."""
    nn = torch.nn

    class TorchDigitsCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 32, 3, padding=1, bias=False),
                nn.BatchNorm2d(32),
                nn.ReLU(inplace=True),
                nn.Conv2d(32, 64, 3, padding=1, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            )
            self.classifier = nn.Sequential(
                nn.Flatten(),
                nn.Dropout(dropout),
                nn.Linear(64 * 4 * 4, 128),
                nn.ReLU(inplace=True),
                nn.Dropout(dropout),
                nn.Linear(128, 10),
            )

        def forward(self, x):
            return self.classifier(self.features(x))

    return TorchDigitsCNN()


def _training_objects(lib, model, lr, weight_decay, label_smoothing, epochs, steps_per_epoch):
    optimizer = lib.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = lib.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, epochs=epochs, steps_per_epoch=steps_per_epoch)
    criterion = lib.nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    return optimizer, scheduler, criterion


def _set_dropout(model, p):
    for module in model.modules():
        if type(module).__name__ == "Dropout":
            module.p = p


# --------------------------------------------------------------------------- the workload


def _step_setup():
    import digits_cnn

    import ember
    import ember.optim  # noqa: F401  (a subpackage: import it before ember.optim.AdamW)

    rng = np.random.default_rng(0)
    images = rng.standard_normal((_BATCH, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, _BATCH).astype(np.int64)

    ember.manual_seed(0)
    ember_model = digits_cnn.DigitsCNN()
    ember_step = _make_step(ember, ember_model, images, labels)
    torch = import_torch()
    if torch is None:
        return ember_step, None
    torch_model = torch_digits_cnn(torch)
    with torch.no_grad():  # the same starting weights (BatchNorm's running statistics included)
        for name, value in ember_model.state_dict().items():
            torch_model.state_dict()[name].copy_(torch.from_numpy(np.array(value.numpy())))
    torch_step = _make_step(torch, torch_model, images, labels)
    _check(ember_step, ember_model, torch_step, torch_model)
    return ember_step, torch_step


def _make_step(lib, model, images, labels):
    optimizer, scheduler, criterion = _training_objects(lib, model, 4e-3, 1e-2, 0.1, 1000, _STEPS_PER_EPOCH)
    x, y = lib.from_numpy(images.copy()), lib.from_numpy(labels.copy())
    model.train()

    def step():
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        return loss

    return step


def _check(ember_step, ember_model, torch_step, torch_model):
    """Without dropout: the same loss on two steps, and the same parameters and buffers after them."""
    _set_dropout(ember_model, 0.0)
    _set_dropout(torch_model, 0.0)
    for i in range(2):
        ours, theirs = ember_step(), torch_step()
        np.testing.assert_allclose(
            float(ours.item()), float(theirs.item()), rtol=_RTOL, atol=_ATOL, err_msg=f"loss of step {i + 1}"
        )
    theirs = torch_model.state_dict()
    for name, value in ember_model.state_dict().items():
        np.testing.assert_allclose(
            np.asarray(value.numpy(), dtype=np.float64),
            theirs[name].double().numpy(),
            rtol=_RTOL,
            atol=_ATOL,
            err_msg=f"{name} after two steps",
        )
    _set_dropout(ember_model, 0.25)
    _set_dropout(torch_model, 0.25)


WORKLOADS = [
    Workload(
        "demo_digits_cnn_step_b64",
        _step_setup,
        threads=2,
        description="one step of the demo (examples/digits_cnn.py): DigitsCNN (2 conv + BatchNorm, max pool, "
        "dropout MLP), cross-entropy with label smoothing, AdamW, OneCycleLR; batch 64 of 1x8x8 float32",
    ),
    Workload(
        "demo_digits_cnn_step_b64_1thread",
        _step_setup,
        threads=1,
        description="the demo's training step above, on one thread",
    ),
]


# --------------------------------------------------------------------------- the whole run, side by side


def train_torch_twin(torch, args, data) -> dict:
    """The demo's training run in PyTorch: same split, batches, schedule and epochs. Returns a summary."""
    from torch.utils.data import DataLoader, TensorDataset

    x_train, y_train, x_test, y_test = data
    torch.manual_seed(args.seed)
    train_loader = DataLoader(
        TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train)),
        batch_size=args.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(args.seed),
    )
    test_loader = DataLoader(TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test)), batch_size=256)
    model = torch_digits_cnn(torch)
    optimizer, scheduler, criterion = _training_objects(
        torch, model, args.lr, args.weight_decay, args.label_smoothing, args.epochs, len(train_loader)
    )
    history, wall_start, cpu_start = [], time.perf_counter(), time.process_time()
    for epoch in range(1, args.epochs + 1):
        model.train()
        start, total_loss = time.perf_counter(), 0.0
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            scheduler.step()
            total_loss += loss.item() * len(labels)
        seconds = time.perf_counter() - start
        model.eval()
        correct, test_loss = 0, 0.0
        with torch.no_grad():
            for images, labels in test_loader:
                logits = model(images)
                test_loss += criterion(logits, labels).item() * len(labels)
                correct += int((logits.argmax(1) == labels).sum())
        row = {
            "epoch": epoch,
            "train_loss": total_loss / len(x_train),
            "test_loss": test_loss / len(x_test),
            "test_accuracy": correct / len(x_test),
            "seconds": seconds,
            "images_per_s": len(x_train) / seconds,
        }
        history.append(row)
        print(
            f"  torch epoch {epoch:>2}: train loss {row['train_loss']:.4f}  test loss {row['test_loss']:.4f}  "
            f"test acc {row['test_accuracy']:.4f}  {seconds:.2f} s  {row['images_per_s']:.0f} img/s",
            flush=True,
        )
    train_seconds = sum(row["seconds"] for row in history)
    return {
        "test_accuracy": history[-1]["test_accuracy"],
        "wall_seconds": time.perf_counter() - wall_start,
        "cpu_seconds": time.process_time() - cpu_start,
        "train_seconds": train_seconds,
        "train_images_per_s": len(x_train) * len(history) / train_seconds,
        "history": history,
    }


def comparison_markdown(ours: dict, theirs: dict | None, threads: int) -> str:
    """The closing note's table: the demo's per-epoch table, then ember next to PyTorch.

    Training time sums the epochs' training loops (images/s is per training second); wall
    and CPU time cover the whole run (ember's includes loading the data, the twin's starts
    from the loaded arrays).
    """
    lines = [
        "| epoch | train loss | test loss | test accuracy | seconds | images/s |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ours["history"]:
        lines.append(
            f"| {row['epoch']} | {row['train_loss']:.4f} | {row['test_loss']:.4f} | "
            f"{row['test_accuracy']:.4f} | {row['seconds']:.2f} | {row['images_per_s']:.0f} |"
        )
    lines += [
        "",
        f"| {threads} thread(s) | test accuracy | training time (s) | wall time (s) | CPU time (s) | images/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, summary in (("ember (examples/digits_cnn.py)", ours), ("PyTorch twin", theirs)):
        if summary is None:
            lines.append(f"| {name} | — | — | — | — | — |")
            continue
        lines.append(
            f"| {name} | {summary['test_accuracy']:.4f} | {summary['train_seconds']:.1f} | "
            f"{summary['wall_seconds']:.1f} | {summary['cpu_seconds']:.1f} | {summary['train_images_per_s']:.0f} |"
        )
    if theirs is not None:
        ratio = ours["train_seconds"] / theirs["train_seconds"]
        lines.append(f"\nember's training time is {ratio:.1f}x PyTorch's (same epochs, batches and thread count).")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="The digits demo in ember and in PyTorch, side by side.")
    parser.add_argument("--epochs", type=int, help="epochs (default: the demo's)")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads for both (default: the demo's)")
    parser.add_argument("--markdown", type=Path, help="also write the comparison table to this file")
    parser.add_argument("--json", type=Path, help="also write both summaries to this JSON file")
    args = parser.parse_args(argv)

    import digits_cnn

    threads = args.threads or digits_cnn.parse_args([]).threads
    demo_args = ["--threads", str(threads), "--no-plots"] + (["--epochs", str(args.epochs)] if args.epochs else [])
    with tempfile.TemporaryDirectory() as tmp:
        print(f"== ember: examples/digits_cnn.py {' '.join(demo_args)}", flush=True)
        ours = digits_cnn.main([*demo_args, "--output", tmp])
    settings = digits_cnn.parse_args(demo_args)

    torch = import_torch()
    theirs = None
    if torch is None:
        print("PyTorch is not importable here: no twin to compare with", file=sys.stderr)
    else:
        print(f"== PyTorch {torch.__version__} twin, {threads} threads", flush=True)
        with limit_threads(threads):
            theirs = train_torch_twin(torch, settings, digits_cnn.load_split())
    table = comparison_markdown(ours, theirs, threads)
    print()
    print(table)
    if args.markdown is not None:
        args.markdown.write_text(table, encoding="utf-8")
    if args.json is not None:
        payload = {"ember": ours, "torch": theirs, "threads": threads}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
