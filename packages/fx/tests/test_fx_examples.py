"""The models of ``examples/`` trace to GraphModules that compute what the originals compute."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.fx import GraphModule, TraceError, Tracer, symbolic_trace
from ember.fx.passes.shape_prop import ShapeProp

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

char_transformer = pytest.importorskip("char_transformer", reason="examples/ is not in this checkout")
digits_cnn = pytest.importorskip("digits_cnn", reason="examples/ is not in this checkout")


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def test_digits_cnn():
    ember.manual_seed(0)
    model = digits_cnn.DigitsCNN().eval()
    gm = symbolic_trace(model)
    assert len(gm.graph.find_nodes(op="call_module")) == 13
    x = ember.randn(4, 1, 8, 8)
    _close(gm(x), model(x))
    ShapeProp(gm).propagate(x)
    assert gm.graph.find_nodes(op="output")[0].meta["tensor_meta"].shape == (4, 10)


def test_digits_cnn_training_mode_updates_same_buffers():
    ember.manual_seed(0)
    model = digits_cnn.DigitsCNN(dropout=0.0)
    reference = copy.deepcopy(model)
    gm = symbolic_trace(model)
    x = ember.randn(6, 1, 8, 8)
    _close(gm(x), reference(x))
    _close(model.features[1].running_mean, reference.features[1].running_mean)


class _GuardsHold(Tracer):
    """Assume every Python-level check on a traced value passes the way it does on valid inputs.

    CharTransformer.forward rejects sequences longer than its context with an ``if``;
    for inputs within the context the branch is not taken, so the graph is valid for them.
    """

    def to_bool(self, obj):
        return False


def test_char_transformer():
    ember.manual_seed(0)
    model = char_transformer.CharTransformer(vocab_size=11, context=8, d_model=16, nhead=2, num_layers=2,
                                             dim_feedforward=32, dropout=0.0).eval()  # fmt: skip
    with pytest.raises(TraceError, match="control flow"):
        symbolic_trace(model)
    gm = GraphModule(model, _GuardsHold().trace(model))
    assert "arange = ember.arange(getitem, device = getattr_2)" in gm.code
    for length in (8, 5):  # the sequence length stays symbolic
        ids = ember.randint(0, 11, (3, length))
        _close(gm(ids), model(ids))
