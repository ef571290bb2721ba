"""The demo's PyTorch twin in benchmarks/bench_demo.py computes what the demo computes."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench_demo():
    """``benchmarks/bench_demo.py`` as a module (it imports ``harness`` from its own folder)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("bench_demo")
    finally:
        sys.path.remove(str(BENCHMARKS))
        sys.modules.pop("bench_demo", None)


@pytest.mark.parity
def test_twin_matches_the_demo_step_for_step(bench_demo):
    # the setup compares both libraries' losses on two steps and every weight and BatchNorm
    # statistic after them, raising AssertionError on a mismatch
    with bench_demo.limit_threads(1):  # both libraries: two threads only fight on a small shared machine
        ember_step, torch_step = bench_demo._step_setup()
        assert torch_step is not None
        assert 0.0 < float(torch_step().item()) < 10.0


@pytest.mark.parity
def test_twin_has_the_demo_layers(bench_demo):
    import torch
    from digits_cnn import DigitsCNN  # a script in examples/, importable through conftest.py

    ours = {name: tuple(value.shape) for name, value in DigitsCNN().state_dict().items()}
    theirs = {name: tuple(value.shape) for name, value in bench_demo.torch_digits_cnn(torch).state_dict().items()}
    assert ours == theirs


def test_comparison_table_lists_every_epoch_and_both_libraries(bench_demo):
    row = {"epoch": 1, "train_loss": 1.0, "test_loss": 0.5, "test_accuracy": 0.9, "seconds": 2.0, "images_per_s": 700}
    ours = {"history": [row, {**row, "epoch": 2}], "test_accuracy": 0.9, "train_seconds": 4.0, "wall_seconds": 5.0,
            "cpu_seconds": 4.5, "train_images_per_s": 700}
    theirs = {**ours, "train_seconds": 2.0}
    table = bench_demo.comparison_markdown(ours, theirs, threads=1)
    assert "| 2 | 1.0000 | 0.5000 | 0.9000 | 2.00 | 700 |" in table
    assert "| PyTorch twin | 0.9000 | 2.0 | 5.0 | 4.5 | 700 |" in table
    assert "2.0x PyTorch's" in table
