"""The digits demo on a slice of the data: it learns, writes its files, and resumes bit for bit."""

from __future__ import annotations

import importlib.util
import json
import math

import digits_cnn  # a script in examples/, importable through conftest.py
import numpy as np
import pytest

import ember

# 320 training images in batches of 64: five steps an epoch
SMALL = ["--limit", "320", "--batch-size", "64"]


def test_short_run_learns_and_writes_outputs(tmp_path):
    summary = digits_cnn.main(["--epochs", "2", "--output", str(tmp_path), *SMALL])
    first, second = summary["history"]
    assert second["train_loss"] < first["train_loss"]
    assert second["test_loss"] < first["test_loss"]
    assert summary["test_accuracy"] > 0.5  # chance is 0.1
    for name in ("checkpoint.ember", "curves.png", "confusion_matrix.png", "summary.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["epochs_done"] == 2 and written["test_accuracy"] == summary["test_accuracy"]
    matrix = np.array(written["confusion_matrix"])
    assert matrix.shape == (10, 10) and matrix.sum() == 360  # the whole test split is scored
    assert math.isclose(np.trace(matrix) / matrix.sum(), summary["test_accuracy"])
    # no temporary files are left behind by the atomic writes
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["checkpoint.ember", "curves.png", "confusion_matrix.png", "summary.json"]
    )
    checkpoint = ember.load(tmp_path / "checkpoint.ember")
    assert checkpoint["epoch"] == 2 and set(checkpoint) >= {"model", "optimizer", "scheduler", "rng_state"}


def _weights(path):
    state = ember.load(path)
    return state, {name: tensor.numpy() for name, tensor in state["model"].items()}


def test_resume_continues_bit_for_bit(tmp_path):
    common = ["--epochs", "2", "--no-plots", *SMALL]
    digits_cnn.main([*common, "--output", str(tmp_path / "straight")])
    digits_cnn.main([*common, "--stop-after", "1", "--output", str(tmp_path / "resumed")])
    digits_cnn.main([*common, "--resume", str(tmp_path / "resumed" / "checkpoint.ember"),
                     "--output", str(tmp_path / "resumed")])

    straight, straight_weights = _weights(tmp_path / "straight" / "checkpoint.ember")
    resumed, resumed_weights = _weights(tmp_path / "resumed" / "checkpoint.ember")
    assert straight_weights.keys() == resumed_weights.keys()
    for name in straight_weights:  # BatchNorm's running statistics included
        assert np.array_equal(straight_weights[name], resumed_weights[name]), name
    for a, b in zip(straight["optimizer"]["state"].values(), resumed["optimizer"]["state"].values(), strict=True):
        assert np.array_equal(a["exp_avg_sq"].numpy(), b["exp_avg_sq"].numpy())
    assert np.array_equal(straight["rng_state"].numpy(), resumed["rng_state"].numpy())
    assert [row["test_loss"] for row in straight["history"]] == [row["test_loss"] for row in resumed["history"]]


def test_resume_refuses_a_different_schedule(tmp_path):
    one_batch = ["--limit", "64", "--no-plots", "--output", str(tmp_path)]
    digits_cnn.main(["--epochs", "2", "--stop-after", "1", *one_batch])
    with pytest.raises(SystemExit, match="pass --epochs 2 to continue it"):
        digits_cnn.main(["--epochs", "3", "--resume", str(tmp_path / "checkpoint.ember"), *one_batch])


@pytest.mark.skipif(
    getattr(ember, "cuda", None) is not None and ember.cuda.is_available(), reason="a CUDA device is available here"
)
def test_cuda_device_says_it_is_not_available(tmp_path):
    with pytest.raises(SystemExit, match="--device cuda"):
        digits_cnn.main(["--device", "cuda", "--output", str(tmp_path)])


@pytest.mark.skipif(
    importlib.util.find_spec("ember._dynamo") is not None, reason="ember-dynamo is installed: --compile compiles"
)
def test_compile_says_it_is_not_available(tmp_path):
    with pytest.raises(SystemExit, match="--compile: .*not available"):
        digits_cnn.main(["--compile", "--epochs", "1", "--output", str(tmp_path), *SMALL])


@pytest.mark.parametrize("flag", ["--epochs", "--batch-size", "--limit"])
def test_bad_counts_are_rejected(flag, capsys):
    with pytest.raises(SystemExit):
        digits_cnn.parse_args([flag, "0"])
    assert f"{flag} must be at least 1, got 0" in capsys.readouterr().err
