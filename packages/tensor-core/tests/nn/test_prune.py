"""nn.utils.prune: masks against numpy's selection of the smallest entries / channels, the
module layout (``<name>_orig``, ``<name>_mask``, the pre-hook), iterative pruning, removal,
gradients through the mask, and the errors for bad amounts."""

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn.utils import prune


def _linear(weight):
    m = nn.Linear(weight.shape[1], weight.shape[0])
    with ember.no_grad():
        m.weight.copy_(ember.tensor(weight))
    return m


def _weights(shape=(6, 5), seed=0):
    # distinct magnitudes, so the smallest k are unique
    values = np.random.RandomState(seed).permutation(np.prod(shape)).astype(np.float32) + 1
    signs = np.where(np.random.RandomState(seed + 1).rand(*shape) < 0.5, -1, 1)
    return (values.reshape(shape) * signs).astype(np.float32)


def test_l1_unstructured_masks_the_smallest_magnitudes():
    w = _weights()
    m = prune.l1_unstructured(_linear(w), "weight", amount=0.3)
    k = round(0.3 * w.size)
    expected = np.ones(w.size, np.float32)
    expected[np.argsort(np.abs(w).ravel())[:k]] = 0
    np.testing.assert_array_equal(m.weight_mask.numpy().ravel(), expected)
    np.testing.assert_array_equal(m.weight.detach().numpy(), w * expected.reshape(w.shape))
    assert sorted(name for name, _ in m.named_parameters()) == ["bias", "weight_orig"]
    assert sorted(m.state_dict()) == ["bias", "weight_mask", "weight_orig"]
    assert prune.is_pruned(m) and not prune.is_pruned(nn.Linear(2, 2))


def test_iterative_pruning_counts_a_fraction_of_what_remains():
    w = _weights()
    m = prune.l1_unstructured(_linear(w), "weight", amount=10)
    prune.l1_unstructured(m, "weight", amount=0.5)
    # 10 pruned, then half of the remaining 20: 20 pruned in all, the smallest ones
    expected = np.ones(w.size, np.float32)
    expected[np.argsort(np.abs(w).ravel())[:20]] = 0
    np.testing.assert_array_equal(m.weight_mask.numpy().ravel(), expected)
    hooks = [h for h in m._forward_pre_hooks.values() if isinstance(h, prune.BasePruningMethod)]
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == 2


@pytest.mark.parametrize("n", [1, 2, float("inf")])
def test_ln_structured_removes_the_channels_of_smallest_norm(n):
    w = _weights((6, 5), seed=3)
    m = prune.ln_structured(_linear(w), "weight", amount=2, n=n, dim=0)
    norms = np.linalg.norm(w, ord=n, axis=1)
    expected = np.ones_like(w)
    expected[np.argsort(norms)[:2]] = 0
    np.testing.assert_array_equal(m.weight_mask.numpy(), expected)
    # then along the other dim, among all columns (none is wholly pruned yet), ranked by the
    # weight as pruned so far
    prune.ln_structured(m, "weight", amount=0.4, n=1, dim=1)
    column_norms = np.abs(w * expected).sum(0)
    expected[:, np.argsort(column_norms)[:2]] = 0
    np.testing.assert_array_equal(m.weight_mask.numpy(), expected)


def test_random_methods_prune_the_requested_count():
    ember.manual_seed(0)
    m = prune.random_unstructured(_linear(_weights()), "weight", amount=0.5)
    assert int((m.weight_mask == 0).sum()) == 15
    m = prune.random_structured(_linear(_weights()), "weight", amount=2, dim=1)
    column_zero = (m.weight_mask.numpy() == 0).all(0)
    assert column_zero.sum() == 2 and set(np.unique(m.weight_mask.numpy())) == {0.0, 1.0}


def test_gradients_reach_orig_only_where_kept_and_forward_uses_the_mask():
    w = _weights()
    m = prune.l1_unstructured(_linear(w), "weight", amount=0.4)
    x = np.random.RandomState(5).randn(3, 5).astype(np.float32)
    out = m(ember.tensor(x))
    mask = m.weight_mask.numpy()
    np.testing.assert_allclose(out.detach().numpy(), x @ (w * mask).T + m.bias.detach().numpy(), rtol=1e-5)
    out.sum().backward()
    np.testing.assert_allclose(m.weight_orig.grad.numpy(), np.broadcast_to(x.sum(0), w.shape) * mask, rtol=1e-5)


def test_remove_makes_pruning_permanent():
    w = _weights()
    m = _linear(w)
    orig = m.weight
    prune.l1_unstructured(m, "weight", amount=0.5)
    prune.remove(m, "weight")
    assert m.weight is orig and isinstance(m.weight, nn.Parameter)
    assert sorted(m.state_dict()) == ["bias", "weight"] and not prune.is_pruned(m)
    assert int((m.weight == 0).sum()) == 15
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(m, "weight")


def test_global_unstructured_ranks_all_parameters_together():
    a, b = _weights((4, 3), seed=1), _weights((2, 4), seed=2) * 0.01
    ma, mb = _linear(a), _linear(b)
    prune.global_unstructured([(ma, "weight"), (mb, "weight")], prune.L1Unstructured, amount=0.5)
    flat = np.concatenate([np.abs(a).ravel(), np.abs(b).ravel()])
    expected = np.ones_like(flat)
    expected[np.argsort(flat)[:10]] = 0
    got = np.concatenate([ma.weight_mask.numpy().ravel(), mb.weight_mask.numpy().ravel()])
    np.testing.assert_array_equal(got, expected)
    assert (mb.weight_mask.numpy() == 0).all()  # the small layer loses everything
    with pytest.raises(TypeError, match="unstructured"):
        prune.global_unstructured([(ma, "bias")], prune.LnStructured, amount=1, n=2, dim=0)


def test_custom_mask_and_importance_scores():
    w = _weights()
    mask = (np.arange(w.size).reshape(w.shape) % 2).astype(np.float32)
    m = prune.custom_from_mask(_linear(w), "weight", ember.tensor(mask))
    np.testing.assert_array_equal(m.weight.detach().numpy(), w * mask)
    scores = np.arange(w.size, dtype=np.float32).reshape(w.shape)
    m = prune.l1_unstructured(_linear(w), "weight", amount=3, importance_scores=ember.tensor(scores))
    np.testing.assert_array_equal(m.weight_mask.numpy().ravel()[:4], [0, 0, 0, 1])
    with pytest.raises(ValueError, match="importance_scores"):
        prune.l1_unstructured(_linear(w), "weight", amount=1, importance_scores=ember.ones(2))


@pytest.mark.parametrize(("amount", "error"), [(1.5, ValueError), (-1, ValueError), ("x", TypeError), (31, ValueError), (True, TypeError)])
def test_bad_amounts_are_refused(amount, error):
    with pytest.raises(error, match="amount"):
        prune.l1_unstructured(_linear(_weights()), "weight", amount=amount)


def test_prune_method_on_a_plain_tensor():
    w = _weights((3, 4))
    out = prune.L1Unstructured(amount=2).prune(ember.tensor(w))
    expected = w.copy().ravel()
    expected[np.argsort(np.abs(w).ravel())[:2]] = 0
    np.testing.assert_array_equal(out.numpy().ravel(), expected)
