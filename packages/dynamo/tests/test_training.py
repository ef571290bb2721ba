"""Training through ``ember.compile(model, fullgraph=True)`` gives eager's losses (issue 26, Checks).

Two models, each trained 20 steps from the same weights on the same seeded batches, once eagerly and once
compiled (one whole graph per model: ``fullgraph=True``), with the "eager" backend (a counting user
backend that runs the captured graph) and with "aot_eager":

* the demo's CNN (``examples/digits_cnn.py``, what ``nox -s demo`` trains): convolutions, batch norm in
  training mode (running statistics updated in the graph), max pool, dropout, cross-entropy, AdamW;
* a nanoGPT-style GPT (``benchmarks/gpt_model.py``): token and position embeddings, causal
  self-attention through ``F.scaled_dot_product_attention``, a GELU MLP, LayerNorm, the head tied to the
  token embedding, cross-entropy with ignored targets, gradient clipping and AdamW.

The losses of every step, the final parameters and buffers must match, and the model must be captured
once (no recompile over the 20 steps).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.nn.functional as F

dynamo = pytest.importorskip("ember._dynamo", reason="ember-dynamo is not installed")

_ROOT = Path(__file__).resolve().parents[3]
for _folder in ("examples", "benchmarks"):
    if str(_ROOT / _folder) not in sys.path:
        sys.path.insert(0, str(_ROOT / _folder))

import digits_cnn  # noqa: E402 - examples/ on the path first
import gpt_model  # noqa: E402 - benchmarks/

from ember._dynamo.testing import EagerAndRecordGraphs  # noqa: E402 - after the skip above

STEPS = 20
GPT_CONFIG = gpt_model.GPTConfig(vocab_size=33, block_size=8, n_layer=2, n_head=2, n_embd=16, batch_size=4)


pytestmark = pytest.mark.usefixtures("fresh_caches")  # conftest.py: empty compile caches for every test


def _cnn_batches():
    """Four fixed batches in turn, so the model can fit them and the loss falls."""
    rng = np.random.default_rng(0)
    batches = [
        (ember.tensor(rng.standard_normal((8, 1, 8, 8)).astype("float32")), ember.tensor(rng.integers(0, 10, 8)))
        for _ in range(4)
    ]
    return [batches[step % 4] for step in range(STEPS)]


def _train_cnn(compile_fn, dropout=0.0):
    ember.manual_seed(0)
    model = digits_cnn.DigitsCNN(dropout=dropout)
    runner = compile_fn(model) if compile_fn else model
    optimizer = ember.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    ember.manual_seed(1)
    for images, labels in _cnn_batches():
        loss = F.cross_entropy(runner(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, model.state_dict()


def _gpt_batches():
    """Two fixed batches in turn (token ids from the seeded generator of gpt_model.batch)."""
    batches = []
    for seed in range(2):
        x, y = gpt_model.batch(GPT_CONFIG, seed=seed)
        batches.append((ember.from_numpy(x), ember.from_numpy(y)))
    return [batches[step % 2] for step in range(STEPS)]


def _train_gpt(compile_fn):
    ember.manual_seed(0)
    model = gpt_model.build_gpt(ember, GPT_CONFIG)
    runner = compile_fn(model) if compile_fn else model
    optimizer = gpt_model.make_optimizer(ember, model, lr=1e-2)
    losses = []
    for x, y in _gpt_batches():
        _, loss = runner(x, y)
        loss.backward()
        ember.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, model.state_dict()


def _assert_same_training(expected, actual, rtol):
    (eager_losses, eager_state), (losses, state) = expected, actual
    np.testing.assert_allclose(losses, eager_losses, rtol=rtol, atol=1e-6, err_msg="losses per step")
    assert list(state) == list(eager_state)
    for name in eager_state:
        np.testing.assert_allclose(state[name].numpy(), eager_state[name].numpy(), rtol=rtol, atol=1e-5, err_msg=name)


def _compile_with(backend):
    return lambda model: ember.compile(model, backend=backend, fullgraph=True)


@pytest.mark.parametrize("train", [_train_cnn, _train_gpt], ids=["demo_cnn", "gpt"])
def test_compiled_training_matches_eager_with_one_graph(train):
    backend = EagerAndRecordGraphs()
    eager = train(None)
    compiled = train(_compile_with(backend))
    _assert_same_training(eager, compiled, rtol=1e-5)
    assert len(backend.graphs) == 1, f"{len(backend.graphs)} graphs compiled over {STEPS} steps"
    assert eager[0][-1] < eager[0][0]  # the model learns: the comparison is not of constant losses


@pytest.mark.parametrize("train", [_train_cnn, _train_gpt], ids=["demo_cnn", "gpt"])
def test_compiled_training_matches_eager_aot_eager(train):
    _assert_same_training(train(None), train(_compile_with("aot_eager")), rtol=1e-4)


def test_demo_cnn_with_dropout_draws_the_same_masks():
    """Dropout in the graph draws from the global generator as eager does, in the same order."""
    _assert_same_training(_train_cnn(None, dropout=0.25), _train_cnn(_compile_with("eager"), dropout=0.25), rtol=1e-5)


def test_module_compile_in_place_trains_like_eager():
    """``model.compile(...)`` (in place, the model object stays the same) trains the GPT as eager does."""
    backend = EagerAndRecordGraphs()

    def compile_in_place(model):
        model.compile(backend=backend, fullgraph=True)
        return model

    _assert_same_training(_train_gpt(None), _train_gpt(compile_in_place), rtol=1e-5)
    assert len(backend.graphs) == 1
