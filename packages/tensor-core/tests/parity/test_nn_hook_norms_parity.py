"""The hook-based nn.utils.weight_norm / spectral_norm (and remove_*) against torch's: the same
state_dict keys, values and metadata, forward outputs over several training/eval steps (power
iteration included), gradients, and the weight left by removal."""

import warnings

import numpy as np
import pytest
import torch

import ember
from ember import nn

pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore::FutureWarning")]

MAKERS = {
    "Linear": (lambda L: L.Linear(3, 4), (2, 5, 3)),
    "Conv2d": (lambda L: L.Conv2d(2, 3, 2), (2, 2, 5, 5)),
    "ConvTranspose2d": (lambda L: L.ConvTranspose2d(2, 3, 2), (2, 2, 4, 4)),
}


def _e(t):
    return ember.tensor(t.detach().numpy())


def _pair(kind):
    make, shape = MAKERS[kind]
    torch.manual_seed(0)
    t, e = make(torch.nn), make(nn)
    e.load_state_dict({k: _e(v) for k, v in t.state_dict().items()})
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return t, e, x


def _assert_same_state(t, e):
    ts, es = t.state_dict(), e.state_dict()
    assert list(es) == list(ts)
    for k in ts:
        np.testing.assert_allclose(es[k].numpy(), ts[k].numpy(), atol=1e-6, err_msg=k)


def _assert_same_grads(t, e):
    eg = dict(e.named_parameters())
    for name, p in t.named_parameters():
        np.testing.assert_allclose(eg[name].grad.numpy(), p.grad.numpy(), atol=1e-4, rtol=1e-4, err_msg=name)


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_hooks_parity(kind, dim):
    t, e, x = _pair(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.nn.utils.weight_norm(t, dim=dim)
    with pytest.warns(FutureWarning, match="deprecated in favor of"):
        nn.utils.weight_norm(e, dim=dim)
    _assert_same_state(t, e)
    yt, ye = t(torch.from_numpy(x)), e(ember.tensor(x))
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), atol=1e-5)
    yt.square().sum().backward()
    ye.square().sum().backward()
    _assert_same_grads(t, e)
    torch.nn.utils.remove_weight_norm(t)
    nn.utils.remove_weight_norm(e)
    _assert_same_state(t, e)


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("training", [True, False])
def test_spectral_norm_hooks_parity(kind, training):
    t, e, x = _pair(kind)
    torch.nn.utils.spectral_norm(t, n_power_iterations=2)
    nn.utils.spectral_norm(e, n_power_iterations=2)
    e.load_state_dict({k: _e(v) for k, v in t.state_dict().items()})  # the same random u, v
    t.train(training)
    e.train(training)
    for _ in range(3):
        yt, ye = t(torch.from_numpy(x)), e(ember.tensor(x))
        np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), atol=1e-5)
    yt.square().sum().backward()
    ye.square().sum().backward()
    _assert_same_grads(t, e)
    _assert_same_state(t, e)
    assert e.state_dict()._metadata[""]["spectral_norm"] == t.state_dict()._metadata[""]["spectral_norm"]
    torch.nn.utils.remove_spectral_norm(t)
    nn.utils.remove_spectral_norm(e)
    _assert_same_state(t, e)


def test_hook_norm_errors_parity():
    for remove in ("remove_weight_norm", "remove_spectral_norm"):
        with pytest.raises(ValueError) as te:
            getattr(torch.nn.utils, remove)(torch.nn.Linear(2, 2))
        with pytest.raises(ValueError) as ee:
            getattr(nn.utils, remove)(nn.Linear(2, 2))
        assert str(ee.value) == str(te.value)
    for apply in ("weight_norm", "spectral_norm"):
        with pytest.raises(RuntimeError) as te:
            getattr(torch.nn.utils, apply)(getattr(torch.nn.utils, apply)(torch.nn.Linear(2, 2)))
        with pytest.raises(RuntimeError) as ee:
            getattr(nn.utils, apply)(getattr(nn.utils, apply)(nn.Linear(2, 2)))
        assert str(ee.value) == str(te.value)
