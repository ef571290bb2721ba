"""AdaptiveLogSoftmaxWithLoss against a numpy reference of the adaptive softmax (head + clusters)."""

import numpy as np
import pytest

import ember
from ember import nn


def _log_softmax(x):
    x = x - x.max(1, keepdims=True)
    return x - np.log(np.exp(x).sum(1, keepdims=True))


def _reference_log_prob(m, x):
    """Full (N, n_classes) log-probabilities from the module's weights, in numpy (float64)."""
    w = {k: v.detach().numpy().astype(np.float64) for k, v in m.state_dict().items()}
    head = x @ w["head.weight"].T + (w["head.bias"] if "head.bias" in w else 0.0)
    head = _log_softmax(head)
    blocks = [head[:, : m.shortlist_size]]
    for i in range(m.n_clusters):
        cluster = _log_softmax((x @ w[f"tail.{i}.0.weight"].T) @ w[f"tail.{i}.1.weight"].T)
        blocks.append(cluster + head[:, m.shortlist_size + i : m.shortlist_size + i + 1])
    return np.concatenate(blocks, axis=1)


@pytest.mark.parametrize("cutoffs, head_bias", [([4], False), ([2, 5, 9], True)])
def test_outputs_log_prob_and_predict_match_numpy(cutoffs, head_bias):
    ember.manual_seed(0)
    m = nn.AdaptiveLogSoftmaxWithLoss(16, 12, cutoffs, div_value=2.0, head_bias=head_bias)
    first_cluster = (cutoffs + [12])[1] - cutoffs[0]
    assert [tuple(p.shape) for p in m.tail[0].parameters()] == [(8, 16), (first_cluster, 8)]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, 16)).astype(np.float32)
    target = rng.integers(0, 12, size=9)
    ref = _reference_log_prob(m, x.astype(np.float64))
    out = m(ember.from_numpy(x), ember.from_numpy(target))
    np.testing.assert_allclose(out.output.detach().numpy(), ref[np.arange(9), target], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(float(out.loss), -ref[np.arange(9), target].mean(), rtol=1e-5)
    np.testing.assert_allclose(m.log_prob(ember.from_numpy(x)).detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.exp(ref).sum(1), 1.0, rtol=1e-10)  # the reference is a distribution
    np.testing.assert_array_equal(m.predict(ember.from_numpy(x)).numpy(), ref.argmax(1))
    single = m(ember.from_numpy(x[3]), ember.tensor(int(target[3])))
    assert single.output.shape == () and np.isclose(float(single.output), ref[3, target[3]], rtol=1e-5)


def test_gradients_reach_head_and_used_clusters_only():
    m = nn.AdaptiveLogSoftmaxWithLoss(16, 8, [2, 5])
    x = ember.randn(3, 16)
    m(x, ember.tensor([0, 1, 3])).loss.backward()  # no target in the second cluster [5, 8)
    assert m.head.weight.grad is not None and m.tail[0][0].weight.grad is not None
    assert m.tail[1][0].weight.grad is None


def test_state_dict_keys_and_errors():
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0)
    assert list(m.state_dict()) == ["head.weight", "tail.0.0.weight", "tail.0.1.weight", "tail.1.0.weight",
                                    "tail.1.1.weight"]
    for bad in ([], [6, 3], [0, 3], [3, 10], [3, 3], [2.5]):
        with pytest.raises(ValueError, match="cutoffs should be"):
            nn.AdaptiveLogSoftmaxWithLoss(8, 10, bad)
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\], but values in range \[0, 12\]"):
        m(ember.randn(2, 8), ember.tensor([0, 12]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        m(ember.randn(3, 8), ember.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="multi-target not supported"):
        m(ember.randn(2, 8), ember.zeros(2, 1, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="0D target tensor expects 1D input"):
        m(ember.randn(2, 8), ember.tensor(1))
