"""``add`` and ``sub`` with a complex ``alpha``: the gradient of ``other`` is ``grad * conj(alpha)``
(``-conj(alpha)`` for ``sub``), PyTorch's conjugate Wirtinger convention; finite differences check it."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck


def _complex(seed, n=4):
    rng = np.random.default_rng(seed)
    return ember.tensor(rng.standard_normal(n) + 1j * rng.standard_normal(n), requires_grad=True)


@pytest.mark.parametrize("name", ["add", "sub"])
@pytest.mark.parametrize("alpha", [2 - 3j, 0.5j, -1.5])
def test_gradcheck_with_complex_alpha(name, alpha):
    op = getattr(ember, name)
    x, y = _complex(0), _complex(1)
    assert gradcheck(lambda a, b: op(a, b, alpha=alpha), (x, y))
    assert gradgradcheck(lambda a, b: op(a, b, alpha=alpha), (x, y))


@pytest.mark.parametrize("name, sign", [("add", 1), ("sub", -1)])
def test_other_gradient_is_grad_times_conj_alpha(name, sign):
    alpha = 2 - 3j
    x, y = _complex(2), _complex(3)
    g = np.array([1 - 1j, 0.5 + 2j, -1j, 3.0])
    getattr(ember, name)(x, y, alpha=alpha).backward(ember.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-15)
    np.testing.assert_allclose(y.grad.numpy(), sign * g * np.conj(alpha), rtol=1e-15)
