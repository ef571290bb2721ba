"""``add``/``sub`` (functional, method and in-place) with a complex ``alpha``: values and gradients as PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.parity

_CALLS = {
    "add": lambda lib, x, y, alpha: lib.add(x, y, alpha=alpha),
    "sub": lambda lib, x, y, alpha: lib.sub(x, y, alpha=alpha),
    "Tensor.sub": lambda lib, x, y, alpha: x.sub(y, alpha=alpha),
    "sub_": lambda lib, x, y, alpha: (x * 1).sub_(y, alpha=alpha),
    "add_": lambda lib, x, y, alpha: (x * 1).add_(y, alpha=alpha),
    "sub, broadcast": lambda lib, x, y, alpha: lib.sub(x, y[:1], alpha=alpha),
}


@pytest.mark.parametrize("call", sorted(_CALLS))
@pytest.mark.parametrize("alpha", [2 - 3j, 1j])
def test_complex_alpha_matches_pytorch(call, alpha):
    rng = np.random.default_rng(7)
    a, b, g = (rng.standard_normal(3) + 1j * rng.standard_normal(3) for _ in range(3))
    results = []
    for lib in (ember, torch):
        x = lib.tensor(a, requires_grad=True)
        y = lib.tensor(b, requires_grad=True)
        out = _CALLS[call](lib, x, y, alpha)
        out.backward(lib.tensor(g if out.shape[0] == 3 else g[:1]))
        results.append([np.asarray(t.detach().numpy()) for t in (out, x.grad, y.grad)])
    for ours, theirs, what in zip(*results, ("value", "grad of input", "grad of other")):
        np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-14, err_msg=what)
