"""Regression tests for the graph breaks the model suite (benchmarks/models, issue 28) found in ember's own
module code: checks that read tensor values into Python (nn.Transformer's causal-mask detection, a
distribution's argument validation) are skipped while ember.compile traces, so these models capture one
graph with ``fullgraph=True``; eager code keeps them. Each compiled result is compared with eager ember's."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo


@pytest.fixture(autouse=True)
def _fresh_cache():
    dynamo.reset()
    yield
    dynamo.reset()


def _close(got, want):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)


# -- nn.Transformer with a causal target mask ----------------------------------------------------------------


def _transformer():
    ember.manual_seed(0)
    return ember.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                dim_feedforward=32, dropout=0.0, batch_first=True)


def test_transformer_with_a_causal_mask_is_one_graph():
    model, src, tgt = _transformer(), ember.randn(2, 5, 16), ember.randn(2, 4, 16)
    mask = ember.nn.Transformer.generate_square_subsequent_mask(4)
    out = dynamo.explain(model)(src, tgt, tgt_mask=mask)
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_transformer_with_a_causal_mask_fullgraph_matches_eager(backend):
    model, src, tgt = _transformer(), ember.randn(2, 5, 16), ember.randn(2, 4, 16)
    mask = ember.nn.Transformer.generate_square_subsequent_mask(4)
    compiled = ember.compile(model, backend=backend, fullgraph=True)
    _close(compiled(src, tgt, tgt_mask=mask), model(src, tgt, tgt_mask=mask))
    # a mask that is not causal gives other values, and the compiled model follows it (no causal shortcut)
    other = ember.zeros(4, 4)
    _close(compiled(src, tgt, tgt_mask=other), model(src, tgt, tgt_mask=other))
    assert not np.allclose(model(src, tgt, tgt_mask=other).detach().numpy(),
                           model(src, tgt, tgt_mask=mask).detach().numpy())


def test_causal_mask_detection_still_runs_eagerly():
    from ember.nn.modules.transformer import _detect_is_causal_mask

    mask = ember.nn.Transformer.generate_square_subsequent_mask(4)
    assert _detect_is_causal_mask(mask) is True
    assert _detect_is_causal_mask(ember.zeros(4, 4)) is False


# -- distributions: argument and sample validation ----------------------------------------------------------


def _policy():
    ember.manual_seed(0)
    return ember.nn.Linear(8, 4)


def _act(layer, obs):
    distribution = ember.distributions.Categorical(logits=layer(obs))
    action = distribution.sample()
    return action, distribution.log_prob(action), distribution.entropy()


def test_categorical_policy_is_one_graph():
    layer, obs = _policy(), ember.randn(16, 8)
    out = dynamo.explain(lambda x: _act(layer, x))(obs)
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_categorical_policy_fullgraph_matches_eager(backend):
    layer, obs = _policy(), ember.randn(16, 8)
    ember.manual_seed(3)
    want = _act(layer, obs)
    compiled = ember.compile(lambda x: _act(layer, x), backend=backend, fullgraph=True)
    ember.manual_seed(3)
    got = compiled(obs)
    assert np.array_equal(got[0].numpy(), want[0].numpy())  # the same samples from the same seed
    _close(got[1], want[1])
    _close(got[2], want[2])


def _normal_log_prob(loc, scale, value):
    return ember.distributions.Normal(loc, scale, validate_args=True).log_prob(value)


def test_normal_log_prob_with_validation_fullgraph_matches_eager():
    loc, scale, value = ember.randn(5), ember.rand(5) + 0.5, ember.randn(5)
    compiled = ember.compile(_normal_log_prob, backend="eager", fullgraph=True)
    _close(compiled(loc, scale, value), _normal_log_prob(loc, scale, value))


def test_validation_still_runs_eagerly_after_a_compile():
    # torch.compile turns distribution validation off for the whole process; ember keeps it for eager code
    compiled = ember.compile(_normal_log_prob, backend="eager", fullgraph=True)
    compiled(ember.zeros(3), ember.ones(3), ember.zeros(3))
    with pytest.raises(ValueError, match="scale"):
        _normal_log_prob(ember.zeros(3), -ember.ones(3), ember.zeros(3))
    with pytest.raises(ValueError, match="support"):
        ember.distributions.Categorical(logits=ember.zeros(4), validate_args=True).log_prob(ember.tensor(7))
    with pytest.raises(ValueError, match="low>= high"):
        ember.distributions.Uniform(ember.ones(2), ember.zeros(2), validate_args=True)
