"""scaled_dot_product_attention's fused cuda steps (ember.cuda.kernels.attention): the bits of the decomposition
(forward) and of the gradient formula's ops (backward), which run when the fused steps are switched off."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember._ops._registry import get as get_op

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def attention():
    ember.cuda.init()
    from ember.cuda.kernels import attention

    return attention


def _bits_equal(a, b):
    a, b = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    assert a.shape == b.shape and a.dtype == b.dtype
    width = np.uint32 if a.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(a.view(width), b.view(width))


def _inputs(dtype, layout, seed=0):
    """q, k, v of (B, H, T, E): contiguous, or GPT's layout (a (B, T, H, E) tensor transposed)."""
    rng = np.random.default_rng(seed)
    b, h, t, e = 3, 2, 16, 8

    def make():
        if layout == "contiguous":
            x = rng.standard_normal((b, h, t, e)).astype(dtype)
            return ember.tensor(x, device="cuda")
        x = rng.standard_normal((b, t, h, e)).astype(dtype)
        return ember.tensor(x, device="cuda").transpose(1, 2)

    return make(), make(), make()


def _without_fused(monkeypatch, attention):
    op = get_op("scaled_dot_product_attention")
    monkeypatch.setitem(op.kernels, "cuda", lambda *a, **k: op.decomposition(*a, **k))
    monkeypatch.setattr(attention, "backward", lambda *args: None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "gpt"])
@pytest.mark.parametrize("is_causal", [True, False])
def test_fused_attention_gives_the_ops_bits(attention, monkeypatch, dtype, layout, is_causal):
    q, k, v = _inputs(dtype, layout)
    g = ember.tensor(np.random.default_rng(1).standard_normal((3, 2, 16, 8)).astype(dtype), device="cuda")

    def run(scale=None, grads=(True, True, True)):
        leaves = [x.detach().requires_grad_(w) for x, w in zip((q, k, v), grads)]
        out = F.scaled_dot_product_attention(*leaves, is_causal=is_causal, scale=scale)
        wanted = [x for x, w in zip(leaves, grads) if w]
        return (out, *ember.autograd.grad(out, wanted, g))

    assert attention.forward(q, k, v, is_causal=is_causal) is not None  # the fused steps take these calls
    cases = [(None, (True, True, True)), (0.3, (True, False, True)), (None, (False, True, False))]
    fused = [run(scale, grads) for scale, grads in cases]
    with monkeypatch.context() as m:
        _without_fused(m, attention)
        unfused = [run(scale, grads) for scale, grads in cases]
    for got, want in zip(fused, unfused):
        for a, b in zip(got, want):
            _bits_equal(a, b)


def test_calls_the_fused_steps_decline(attention):
    q, k, v = _inputs(np.float32, "contiguous")
    mask = ember.ones(16, 16, dtype=ember.bool, device="cuda")
    assert attention.forward(q, k, v, attn_mask=mask) is None
    assert attention.forward(q, k, v, dropout_p=0.1) is None
    assert attention.forward(q, k[:, :1], v[:, :1]) is None  # grouped heads broadcast
    assert attention.forward(q.half(), k.half(), v.half()) is None
    # those calls still give the decomposition's values
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    want = F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu(), attn_mask=mask.cpu())
    np.testing.assert_allclose(out.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
