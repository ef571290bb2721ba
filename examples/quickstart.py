"""A short tour of ember's tensors: creation, views, indexing, arithmetic, save/load, printing.

The first thing to read in ``examples/``; the demo's training program,
``digits_cnn.py``, comes next.

Every step checks its own result, so the script doubles as a smoke test: it exits
with an error if ember does not behave as printed. ``nox -s demo`` runs it quietly
before training for that reason.

Run it with ``nox -s demo -- --task tour`` or, with ember-core installed,
``python examples/quickstart.py``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import ember


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 60 - len(title)))


def check(condition: bool, what: str) -> None:
    """Stop the tour with a clear message when ember does not do what the tour says."""
    if not condition:
        raise SystemExit(f"quickstart check failed: {what}")


def creation() -> None:
    section("Creating tensors")
    x = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    print("ember.tensor(...)          ->", x)
    print("shape, dtype, device       ->", x.shape, x.dtype, x.device)
    check(tuple(x.shape) == (2, 3) and x.dtype == ember.float32, "a nested list of floats gives a 2x3 float32 tensor")

    print("ember.zeros(2, 3, dtype=ember.int64) ->", ember.zeros(2, 3, dtype=ember.int64))
    r = ember.arange(0, 10, 3)
    print("ember.arange(0, 10, 3)     ->", r)
    check(r.tolist() == [0, 3, 6, 9] and r.dtype == ember.int64, "arange of ints is int64")
    print("ember.linspace(0, 1, 5)    ->", ember.linspace(0, 1, 5))

    ember.manual_seed(0)
    first = ember.rand(3)
    ember.manual_seed(0)
    again = ember.rand(3)
    print("ember.rand(3) after manual_seed(0), twice ->", first, again)
    check(first.tolist() == again.tolist(), "the same seed gives the same random numbers")

    array = np.arange(4.0)
    shared = ember.from_numpy(array)
    array[0] = 100.0
    print("ember.from_numpy shares memory with numpy ->", shared)
    check(shared[0].item() == 100.0, "from_numpy shares memory")


def views() -> None:
    section("Views share storage")
    base = ember.arange(12.0).view(3, 4)
    column = base[:, 1]  # a view: no copy
    transposed = base.t()
    print("base               ->", base)
    print("base[:, 1]         ->", column, " stride", column.stride(), " offset", column.storage_offset())
    print("base.t().stride()  ->", transposed.stride(), " contiguous:", transposed.is_contiguous())
    check(column.stride() == (4,) and column.storage_offset() == 1, "a column view steps over rows")

    version = base._version
    column[0] = -1.0  # an in-place write through the view ...
    print("after base[:, 1][0] = -1: base ->", base)  # ... is visible in the base
    check(base[0, 1].item() == -1.0 and transposed[1, 0].item() == -1.0, "writes through a view reach every view")
    check(base._version > version, "in-place writes bump the storage's version counter")


def indexing() -> None:
    section("Indexing")
    x = ember.arange(10.0)
    print("x[2:8:2]           ->", x[2:8:2])
    print("x[x > 6]           ->", x[x > 6])
    print("x[[0, 0, 9]]       ->", x[[0, 0, 9]])
    check(x[x > 6].tolist() == [7.0, 8.0, 9.0], "a boolean mask selects elements")

    grid = ember.zeros(3, 4)
    grid[1] = 7.0  # a scalar broadcast over a row
    grid[:, ember.tensor([0, 3])] = ember.tensor([1.0, 2.0])  # a value broadcast over advanced indices
    print("after row and column writes ->", grid)
    expected = np.zeros((3, 4), dtype=np.float32)
    expected[1] = 7.0
    expected[:, [0, 3]] = [1.0, 2.0]
    check(np.array_equal(grid.numpy(), expected), "setitem matches numpy")


def arithmetic() -> None:
    section("Arithmetic and type promotion")
    a = ember.tensor([1.0, 2.0, 3.0])
    b = ember.tensor([[10.0], [20.0]])
    total = a + b  # broadcasting: (3,) with (2, 1) -> (2, 3)
    print("a + b (broadcast)  ->", total)
    check(total.tolist() == [[11.0, 12.0, 13.0], [21.0, 22.0, 23.0]], "broadcasting add")

    ints = ember.tensor([1, 2, 3])
    print("int64 tensor * 2.5 ->", ints * 2.5, "(a Python float makes the result the default float dtype)")
    check((ints * 2.5).dtype == ember.float32, "int tensor times Python float is float32")
    check((ember.tensor([1.0], dtype=ember.float16) + 1.0).dtype == ember.float16, "a Python scalar keeps float16")
    print("promote_types(int32, float16) ->", ember.promote_types(ember.int32, ember.float16))


def save_and_load(directory: Path) -> None:
    section("Saving and loading (no pickle)")
    weights = ember.arange(6.0).view(2, 3)
    state = {"weights": weights, "row": weights[1], "step": 3, "name": "quickstart"}
    path = directory / "state.ember"
    ember.save(state, path)
    loaded = ember.load(path)
    print(f"saved to {path} ({path.stat().st_size} bytes); loaded ->", loaded)
    check(loaded["weights"].tolist() == weights.tolist() and loaded["step"] == 3, "save/load round trip")
    loaded["weights"][1, 0] = -5.0
    check(loaded["row"][0].item() == -5.0, "a view saved with its base still shares storage after loading")


def printing() -> None:
    section("Printing")
    print(ember.arange(2000).view(40, 50))  # large tensors are summarised
    print(ember.ones(2, dtype=ember.float64))  # a dtype other than the default is shown
    ember.set_printoptions(precision=2)
    print(ember.tensor([1 / 3, 2 / 3]))
    ember.set_printoptions(profile="default")  # back to the defaults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--save-dir", type=Path, help="where to write the saved state (default: a temporary folder)")
    args = parser.parse_args()

    print(f"ember {getattr(ember, '__version__', '?')}")
    creation()
    views()
    indexing()
    arithmetic()
    if args.save_dir is not None:
        args.save_dir.mkdir(parents=True, exist_ok=True)
        save_and_load(args.save_dir)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            save_and_load(Path(tmp))
    printing()
    print("\nAll quickstart checks passed.")


if __name__ == "__main__":
    main()
