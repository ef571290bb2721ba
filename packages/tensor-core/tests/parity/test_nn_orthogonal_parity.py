"""nn.utils.parametrizations.orthogonal against torch: the same initial weight (the deterministic
orthonormalization), the same weight and gradients for the same free parameter and base, the same
Householder vectors stored on assignment, and the same state_dict keys."""

import numpy as np
import pytest
import torch

import ember
from ember import nn
from ember.nn.utils.parametrizations import orthogonal

pytestmark = pytest.mark.parity

MAPS = ["matrix_exp", "cayley", "householder"]


def _pair(shape, orthogonal_map, use_trivialization, seed=0):
    torch.manual_seed(seed)
    tm = torch.nn.Module()
    tm.weight = torch.nn.Parameter(torch.randn(*shape, dtype=torch.float64))
    em = nn.Module()
    em.weight = nn.Parameter(ember.tensor(tm.weight.detach().numpy()))
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    orthogonal(em, orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    return tm, em


@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3)])
@pytest.mark.parametrize("use_trivialization", [True, False])
def test_orthogonal_parity(orthogonal_map, shape, use_trivialization):
    tm, em = _pair(shape, orthogonal_map, use_trivialization)
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(), atol=1e-12)

    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape) * 0.4
    if orthogonal_map == "householder":
        k = min(shape[-2:])
        x[..., np.arange(k), np.arange(k)] = np.sign(rng.standard_normal(shape[:-2] + (k,)))
    with torch.no_grad():
        tm.parametrizations.weight.original.copy_(torch.from_numpy(x))
    # the base's completion columns are random: copy torch's (loading the whole state dict)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    g = rng.standard_normal(shape)
    (tm.weight * torch.from_numpy(g)).sum().backward()
    (em.weight * ember.tensor(g)).sum().backward()
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(
        em.parametrizations.weight.original.grad.numpy(), tm.parametrizations.weight.original.grad.numpy(), atol=1e-11
    )


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_householder_assignment_parity(shape):
    tm, em = _pair(shape, "householder", False)
    a = np.random.default_rng(2).standard_normal(shape)
    tm.weight = torch.from_numpy(a)
    em.weight = ember.tensor(a)
    np.testing.assert_allclose(
        em.parametrizations.weight.original.detach().numpy(), tm.parametrizations.weight.original.detach().numpy(),
        atol=1e-12,
    )
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(), atol=1e-12)


def test_complex_orthogonal_parity():
    torch.manual_seed(0)
    tm = torch.nn.Linear(3, 4, dtype=torch.complex128)
    em = nn.Linear(3, 4, dtype=ember.complex128)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    torch.nn.utils.parametrizations.orthogonal(tm)
    orthogonal(em)
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(), atol=1e-12)
