"""The GPT training step of ``benchmarks/gpt_model.py`` (issue 24): on the CPU its loss and gradients equal
PyTorch's for the same weights and batch (parity), and on the GPU a step after the warm-up runs under
``ember.cuda.set_sync_debug_mode("error")``: nothing in forward, backward, ``clip_grad_norm_``, fused AdamW
or ``zero_grad(set_to_none=True)`` waits for the device.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import ember

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import gpt_model  # noqa: E402 - benchmarks/ on the path first

_TINY = gpt_model.TINY


def _ember_model(device="cpu", seed=0):
    ember.manual_seed(seed)
    return gpt_model.build_gpt(ember, _TINY).to(device)


def _batch(device="cpu"):
    x, y = gpt_model.batch(_TINY)
    return ember.tensor(x, device=device), ember.tensor(y, device=device)


def test_the_model_has_the_gpt_structure():
    model = _ember_model()
    c = _TINY
    per_block = 2 * c.n_embd + 3 * c.n_embd**2 + c.n_embd**2 + 8 * c.n_embd**2  # norms, qkv, proj, MLP
    expected = c.vocab_size * c.n_embd + c.block_size * c.n_embd + c.n_layer * per_block + c.n_embd
    assert sum(p.numel() for p in model.parameters()) == expected  # the head shares the token embedding
    assert model.head.weight is model.tokens.weight
    logits, loss = model(*_batch())
    assert tuple(logits.shape) == (c.batch_size, c.block_size, c.vocab_size)
    assert abs(loss.item() - np.log(c.vocab_size)) < 0.1  # small initial weights: about uniform predictions


def test_ignored_targets_leave_the_loss_mean():
    model = _ember_model()
    x, y = _batch()
    with ember.no_grad():
        logits, loss = model(x, y)
        flat, target = logits.reshape(-1, _TINY.vocab_size), y.reshape(-1)
        keep = (target != -1).numpy()
        logp = ember.log_softmax(flat, -1).numpy()
        expected = -logp[np.arange(target.numel())[keep], target.numpy()[keep]].mean()
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-5)


@pytest.mark.parity
def test_loss_gradients_and_steps_match_pytorch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = gpt_model.build_gpt(torch, _TINY)
    ours = _ember_model()
    gpt_model.copy_parameters(theirs, ours, ember, ember.from_numpy)
    x, y = gpt_model.batch(_TINY)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    ex, ey = ember.from_numpy(x), ember.from_numpy(y)

    loss, torch_loss = gpt_model.forward_loss(ours, ex, ey), gpt_model.forward_loss(theirs, tx, ty)
    np.testing.assert_allclose(loss.item(), torch_loss.item(), rtol=1e-6)
    loss.backward()
    torch_loss.backward()
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    ours.zero_grad(set_to_none=True)
    theirs.zero_grad(set_to_none=True)

    opt, torch_opt = gpt_model.make_optimizer(ember, ours), gpt_model.make_optimizer(torch, theirs)
    for step in range(3):
        loss = gpt_model.train_step(ember, ours, opt, ex, ey)
        torch_loss = gpt_model.train_step(torch, theirs, torch_opt, tx, ty)
        np.testing.assert_allclose(loss.item(), torch_loss.item(), rtol=1e-5, err_msg=f"step {step}")
        assert all(p.grad is None for p in ours.parameters())
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.parametrize("config", ["tiny", "small"])
def test_a_training_step_on_cuda_does_not_synchronize(config):
    cfg = _TINY if config == "tiny" else gpt_model.GPTConfig(n_layer=2, block_size=64, batch_size=2)
    ember.manual_seed(0)
    cpu_model = gpt_model.build_gpt(ember, cfg)
    model = gpt_model.build_gpt(ember, cfg).to("cuda")
    gpt_model.copy_parameters(cpu_model, model, ember, lambda a: ember.from_numpy(a).to("cuda"))
    x_np, y_np = gpt_model.batch(cfg)
    x, y = ember.tensor(x_np, device="cuda"), ember.tensor(y_np, device="cuda")
    opt = gpt_model.make_optimizer(ember, model, fused=True)
    cpu_opt = gpt_model.make_optimizer(ember, cpu_model)
    cx, cy = ember.tensor(x_np), ember.tensor(y_np)
    losses = [gpt_model.train_step(ember, model, opt, x, y)]  # the warm-up step
    ember.cuda.synchronize()
    ember.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            losses.append(gpt_model.train_step(ember, model, opt, x, y))
    finally:
        ember.cuda.set_sync_debug_mode("default")
    expected = [gpt_model.train_step(ember, cpu_model, cpu_opt, cx, cy).item() for _ in range(3)]
    np.testing.assert_allclose([loss.item() for loss in losses], expected, rtol=1e-4)
