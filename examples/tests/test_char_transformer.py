"""The character-level transformer on a slice of its corpus: the loss falls and the files appear."""

from __future__ import annotations

import json
import math

import char_transformer  # a script in examples/, importable through conftest.py
import numpy as np
import pytest

import ember

TINY = ["--limit", "6000", "--context", "32", "--d-model", "32", "--heads", "2", "--layers", "1",
        "--batch-size", "16", "--lr", "1e-2", "--warmup", "5", "--eval-every", "20",
        "--sample-chars", "30"]


def test_a_few_steps_lower_the_loss_and_write_outputs(tmp_path):
    summary = char_transformer.main(["--steps", "40", "--output", str(tmp_path), *TINY])
    first, last = summary["log"][0], summary["log"][-1]
    assert last["train_loss"] < first["train_loss"]
    assert summary["final_val_loss"] < summary["initial_val_loss"]
    # below the loss of guessing uniformly among the characters
    assert summary["final_val_loss"] < summary["uniform_loss"]
    for name in ("model.ember", "samples.txt", "loss.png", "summary.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert json.loads((tmp_path / "summary.json").read_text())["corpus_chars"] == 6000
    assert len(summary["samples"]) == 3 and all(s.startswith(p) for s, p in
                                                zip(summary["samples"], ["Return ", "The ", "If "], strict=True))


def test_causal_mask_hides_the_future():
    ember.manual_seed(0)
    model = char_transformer.CharTransformer(vocab_size=11, context=8, d_model=16, nhead=2, num_layers=1,
                                             dim_feedforward=32, dropout=0.0).eval()
    ids = ember.randint(0, 11, (2, 8))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 11  # change only positions 5..7
    before, after = model(ids).detach().numpy(), model(changed).detach().numpy()
    np.testing.assert_array_equal(before[:, :5], after[:, :5])  # earlier positions cannot see the change
    assert not np.allclose(before[:, 5:], after[:, 5:])


def test_corpus_is_the_docstrings_and_round_trips():
    text = char_transformer.docstring_corpus(["textwrap"])
    import textwrap

    assert text.startswith(textwrap.__doc__.strip()[:40])
    assert textwrap.dedent.__doc__.strip().splitlines()[0] in text
    vocab = char_transformer.CharVocab(text)
    assert vocab.decode(vocab.encode(text[:500]).tolist()) == text[:500]
    assert len(vocab) == len(set(text)) and math.isfinite(len(vocab))


def test_validation_windows_cover_each_character_once():
    ids = ember.arange(10)
    windows = char_transformer.NextCharDataset(ids, context=3, stride=3)
    items = [windows[i] for i in range(len(windows))]
    assert [inputs.tolist() for inputs, _ in items] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert [targets.tolist() for _, targets in items] == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    every = char_transformer.NextCharDataset(ids, context=3)
    assert len(every) == 7 and every[6][1].tolist() == [7, 8, 9]
    with pytest.raises(IndexError, match="index 7 out of range for 7 windows"):
        every[7]
