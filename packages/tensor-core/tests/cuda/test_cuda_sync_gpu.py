"""set_sync_debug_mode on the GPU: the ops of a training step run under "error" without a host synchronisation,
and the calls that must wait for the GPU (a value read back, a data-dependent shape, ``synchronize()``) are
reported. Each op runs once before (kernels compiled, caches filled), then under "error"; its values are
compared with the CPU's afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F

pytestmark = pytest.mark.cuda


@pytest.fixture(autouse=True)
def _default_mode():
    yield
    ember.cuda.set_sync_debug_mode("default")
    ember.cuda.synchronize()


def _without_sync(make, fn):
    """``fn(*make())`` once to warm up, then again (on new inputs from ``make()``, made before) under
    set_sync_debug_mode("error"); returns the second result. (Making cuda tensors from host data is no
    synchronisation in ember, but PyTorch's blocking uploads are: the inputs are made outside.)"""
    fn(*make())
    args = make()
    ember.cuda.synchronize()
    ember.cuda.set_sync_debug_mode("error")
    try:
        return fn(*args)
    finally:
        ember.cuda.set_sync_debug_mode("default")


def _host(t):
    return t.detach().cpu().numpy()


def test_item_synchronize_and_mask_reads_are_reported():
    x = ember.arange(6.0, device="cuda")
    ember.cuda.set_sync_debug_mode("warn")
    with pytest.warns(UserWarning, match="synchronizing CUDA operation"):
        assert x.sum().item() == 15.0
    ember.cuda.set_sync_debug_mode("error")
    for call in (lambda: x.sum().item(), lambda: x.tolist(), lambda: bool(x[0] > 1), ember.cuda.synchronize,
                 lambda: x[x > 2], lambda: x.nonzero(), lambda: x.cpu()):
        with pytest.raises(RuntimeError, match="synchronizing CUDA operation"):
            call()


def test_cupys_own_waits_are_reported():
    # a wait no ember code declares: CuPy's ndarray.get() reports it through its synchronisation detector
    array = ember.ones(3, device="cuda")._data
    ember.cuda.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="inside CuPy"):
        array.get()


def test_masked_fill_and_one_value_mask_writes_do_not_synchronize():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 5)).astype(np.float32)
    mask_np = rng.random((4, 5)) > 0.5
    rows_np = np.array([True, False, True, True])

    def make(device):
        return (ember.tensor(data, device=device), ember.tensor(mask_np, device=device),
                ember.tensor(rows_np, device=device), ember.tensor([True, False, True, False, False], device=device),
                ember.tensor(2.0, device=device), ember.tensor([-1.0], device=device),
                ember.tensor(0.5, device=device))

    def run(x, mask, rows, cols, two, minus_one, half):
        y = x.masked_fill(mask, -np.inf)
        z = x.clone()
        z.masked_fill_(mask, two)
        z[rows] = 3.0
        z[:, cols] = minus_one
        z.index_put_((rows,), half, accumulate=True)
        return y, z

    gpu = _without_sync(lambda: make("cuda"), run)
    for ours, expected in zip(gpu, run(*make("cpu"))):
        np.testing.assert_array_equal(_host(ours), expected.numpy())


def test_causal_attention_forward_and_backward_do_not_synchronize():
    rng = np.random.default_rng(1)
    q_np, k_np, v_np = (rng.standard_normal((2, 3, 8, 4)).astype(np.float32) for _ in range(3))

    def make(device):
        return [ember.tensor(a, device=device, requires_grad=True) for a in (q_np, k_np, v_np)]

    def run(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        (out * out).sum().backward()
        return out, q.grad, k.grad, v.grad

    gpu = _without_sync(lambda: make("cuda"), run)
    for ours, expected in zip(gpu, run(*make("cpu"))):
        np.testing.assert_allclose(_host(ours), _host(expected), rtol=1e-4, atol=1e-5)


def test_embedding_and_cross_entropy_with_ignored_targets_do_not_synchronize():
    rng = np.random.default_rng(2)
    weight_np = rng.standard_normal((11, 6)).astype(np.float32)
    idx_np = rng.integers(0, 11, size=(3, 5))
    target_np = rng.integers(0, 11, size=15)
    target_np[[0, 4]] = -1

    def make(device):
        return (ember.tensor(weight_np, device=device, requires_grad=True), ember.tensor(idx_np, device=device),
                ember.tensor(target_np, device=device))

    def run(weight, idx, target):
        h = F.embedding(idx, weight)
        logits = h.reshape(15, 6) @ weight.t()
        loss = F.cross_entropy(logits, target, ignore_index=-1)
        loss.backward()
        return loss, weight.grad

    gpu = _without_sync(lambda: make("cuda"), run)
    for ours, expected in zip(gpu, run(*make("cpu"))):
        np.testing.assert_allclose(_host(ours), _host(expected), rtol=1e-5, atol=1e-6)


def test_an_embedding_index_out_of_range_raises_at_the_next_synchronizing_call():
    weight = ember.ones(4, 2, device="cuda")
    out = F.embedding(ember.tensor([0, 4], device="cuda"), weight)  # no wait here
    with pytest.raises(IndexError, match="index out of range in self"):
        out.cpu()
    assert _host(F.embedding(ember.tensor([3], device="cuda"), weight)).tolist() == [[1.0, 1.0]]  # flag reset


def _params(device, seed=3):
    rng = np.random.default_rng(seed)
    params = []
    for shape in ((5, 4), (4,), (3, 2, 2)):
        p = ember.nn.Parameter(ember.tensor(rng.standard_normal(shape).astype(np.float32), device=device))
        p.grad = ember.tensor(rng.standard_normal(shape).astype(np.float32) * 3, device=device)
        params.append(p)
    return params


def test_clip_grad_norm_does_not_synchronize_unless_asked():
    def run(params):
        total = ember.nn.utils.clip_grad_norm_(params, 1.0)
        return [total] + [p.grad for p in params]

    gpu = _without_sync(lambda: (_params("cuda"),), run)
    for ours, expected in zip(gpu, run(_params("cpu"))):
        np.testing.assert_allclose(_host(ours), _host(expected), rtol=1e-5, atol=1e-6)
    params = _params("cuda")
    ember.cuda.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="synchronizing CUDA operation"):  # error_if_nonfinite reads the norm
        ember.nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)


@pytest.mark.parametrize("name, kwargs", [("AdamW", {"fused": True}), ("AdamW", {"foreach": True}),
                                          ("Adam", {"foreach": False}), ("Adam", {})])
def test_optimizer_steps_do_not_synchronize(name, kwargs):
    def make(device):
        params = _params(device)
        grads = [p.grad.clone() for p in params]
        return params, grads, getattr(ember.optim, name)(params, lr=0.1, weight_decay=0.01, **kwargs)

    def run(params, grads, optimizer):
        for _ in range(2):
            for p, g in zip(params, grads):
                p.grad = g.clone()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return params

    gpu = _without_sync(lambda: make("cuda"), run)
    for ours, expected in zip(gpu, run(*make("cpu"))):
        assert ours.grad is None
        np.testing.assert_allclose(_host(ours), _host(expected), rtol=1e-5, atol=1e-6)
