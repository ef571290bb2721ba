"""nn.utils.prune against torch.nn.utils.prune: the same masks for the deterministic methods,
alone and combined, the same state-dict keys, forward values and gradients, and removal."""

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as tprune

import ember
from ember.nn.utils import prune as eprune

pytestmark = pytest.mark.parity

STEPS = {
    "l1": [("l1_unstructured", {"amount": 0.3})],
    "l1_twice": [("l1_unstructured", {"amount": 0.3}), ("l1_unstructured", {"amount": 4})],
    "ln_rows_then_l1": [("ln_structured", {"amount": 1, "n": 2, "dim": 0}), ("l1_unstructured", {"amount": 0.5})],
    "ln_both_dims": [("ln_structured", {"amount": 0.5, "n": 1, "dim": 0}), ("ln_structured", {"amount": 2, "n": float("inf"), "dim": 1})],
    "identity_then_l1": [("identity", {}), ("l1_unstructured", {"amount": 7})],
}


def _pair(seed=0):
    torch.manual_seed(seed)
    t = torch.nn.Conv2d(3, 4, 2)
    e = ember.nn.Conv2d(3, 4, 2)
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return e, t


@pytest.mark.parametrize("steps", sorted(STEPS))
def test_masks_forward_and_gradients_match(steps):
    e, t = _pair()
    for name, kwargs in STEPS[steps]:
        getattr(eprune, name)(e, "weight", **kwargs)
        getattr(tprune, name)(t, "weight", **kwargs)
    assert sorted(e.state_dict()) == sorted(t.state_dict())
    np.testing.assert_array_equal(e.weight_mask.numpy(), t.weight_mask.numpy())
    x = np.random.RandomState(1).randn(2, 3, 5, 5).astype(np.float32)
    eo, to = e(ember.tensor(x)), t(torch.tensor(x))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    eo.square().sum().backward()
    to.square().sum().backward()
    np.testing.assert_allclose(e.weight_orig.grad.numpy(), t.weight_orig.grad.numpy(), rtol=1e-4, atol=1e-5)
    eprune.remove(e, "weight")
    tprune.remove(t, "weight")
    np.testing.assert_array_equal(e.weight.detach().numpy(), t.weight.detach().numpy())


def test_global_unstructured_matches():
    (e1, t1), (e2, t2) = _pair(0), _pair(1)
    eprune.global_unstructured([(e1, "weight"), (e2, "bias")], eprune.L1Unstructured, amount=0.4)
    tprune.global_unstructured([(t1, "weight"), (t2, "bias")], tprune.L1Unstructured, amount=0.4)
    np.testing.assert_array_equal(e1.weight_mask.numpy(), t1.weight_mask.numpy())
    np.testing.assert_array_equal(e2.bias_mask.numpy(), t2.bias_mask.numpy())
