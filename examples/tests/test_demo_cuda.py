"""The demos on the cuda device (``--device cuda``): they train, reach the CPU run's accuracy, and their
checkpoints move between devices. Marked ``cuda``: they run with ``EMBER_TEST_BACKEND=cuda`` on a machine
with a GPU and skip elsewhere."""

from __future__ import annotations

import char_transformer  # scripts in examples/, importable through conftest.py
import digits_cnn
import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda


def test_one_epoch_of_digits_on_cuda_matches_the_cpu_accuracy(tmp_path):
    common = ["--epochs", "1", "--no-plots"]
    gpu = digits_cnn.main([*common, "--device", "cuda", "--output", str(tmp_path / "cuda")])
    cpu = digits_cnn.main([*common, "--device", "cpu", "--output", str(tmp_path / "cpu")])
    assert gpu["device"] == "cuda" and gpu["epochs_done"] == 1
    # Same weights and batches; only the dropout masks differ (the GPU has its own generator).
    assert gpu["test_accuracy"] > 0.85, gpu["final"]
    assert abs(gpu["test_accuracy"] - cpu["test_accuracy"]) <= 0.05, (gpu["final"], cpu["final"])
    assert abs(gpu["final"]["train_loss"] - cpu["final"]["train_loss"]) < 0.1
    assert np.array(gpu["confusion_matrix"]).sum() == 360
    checkpoint = ember.load(tmp_path / "cuda" / "checkpoint.ember")
    assert all(t.device.type == "cuda" for t in checkpoint["model"].values())
    assert "cuda_rng_state" in checkpoint


def test_digits_on_cuda_resumes_like_a_straight_run(tmp_path):
    common = ["--epochs", "2", "--no-plots", "--limit", "320", "--device", "cuda"]
    digits_cnn.main([*common, "--output", str(tmp_path / "straight")])
    digits_cnn.main([*common, "--stop-after", "1", "--output", str(tmp_path / "resumed")])
    digits_cnn.main(
        [*common, "--resume", str(tmp_path / "resumed" / "checkpoint.ember"), "--output", str(tmp_path / "resumed")]
    )
    straight = ember.load(tmp_path / "straight" / "checkpoint.ember", map_location="cpu")
    resumed = ember.load(tmp_path / "resumed" / "checkpoint.ember", map_location="cpu")
    for name, value in straight["model"].items():
        # GPU kernels may add in another order from run to run (atomics): equal up to rounding
        np.testing.assert_allclose(resumed["model"][name].numpy(), value.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_array_equal(resumed["cuda_rng_state"].numpy(), straight["cuda_rng_state"].numpy())


def test_a_cuda_checkpoint_resumes_on_cpu(tmp_path):
    small = ["--epochs", "2", "--no-plots", "--limit", "128"]
    digits_cnn.main([*small, "--device", "cuda", "--stop-after", "1", "--output", str(tmp_path)])
    summary = digits_cnn.main([*small, "--device", "cpu", "--resume", str(tmp_path / "checkpoint.ember")])
    assert summary["epochs_done"] == 2 and summary["device"] == "cpu"
    state = ember.load(tmp_path / "checkpoint.ember")
    assert all(t.device.type == "cpu" for t in state["model"].values())


def test_char_transformer_trains_on_cuda(tmp_path):
    tiny = [
        "--limit",
        "6000",
        "--context",
        "32",
        "--d-model",
        "32",
        "--heads",
        "2",
        "--layers",
        "1",
        "--batch-size",
        "16",
        "--lr",
        "1e-2",
        "--warmup",
        "5",
        "--eval-every",
        "20",
        "--sample-chars",
        "30",
        "--steps",
        "40",
        "--no-plots",
    ]
    gpu = char_transformer.main([*tiny, "--device", "cuda", "--output", str(tmp_path / "cuda")])
    cpu = char_transformer.main([*tiny, "--device", "cpu", "--output", str(tmp_path / "cpu")])
    assert gpu["device"] == "cuda"
    assert gpu["initial_val_loss"] == pytest.approx(cpu["initial_val_loss"], rel=1e-4)
    # no dropout by default: the whole run follows the CPU run up to float rounding
    assert gpu["final_val_loss"] == pytest.approx(cpu["final_val_loss"], rel=2e-3)
    assert gpu["final_val_loss"] < gpu["initial_val_loss"]
    assert all(s.startswith(p) for s, p in zip(gpu["samples"], ["Return ", "The ", "If "], strict=True))
