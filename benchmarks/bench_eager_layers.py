"""Eager CPU layers of the model suite's slowest rows against PyTorch (issue 23's CPU side).

Each row is one layer's forward and backward (a training step's share of it) on the model suite's sizes,
both libraries on the same weights and inputs, 2 threads:

* ``lstm_fwd_bwd`` / ``gru_fwd_bwd``: ``nn.LSTM``/``nn.GRU(128, 128, num_layers=2, batch_first=True)`` on a
  batch of 8 x 32 steps (``lstm_lm``/``gru_lm``), the loss the sum of the outputs;
* ``erf_1m``: ``ember.erf`` of 1M float32 values (forward only);
* ``layer_norm_fwd_bwd``, ``softmax_fwd_bwd``, ``gelu_fwd_bwd``, ``sdpa_fwd_bwd``, ``sdpa_causal_fwd_bwd``:
  a ViT/GPT-2 block's shapes (batch 4, 65 or 64 tokens, width 64-128, 4 heads), the loss the sum of the output;
* ``depthwise_conv_fwd_bwd``: a MobileNetV2 3x3 depthwise layer (2 x 96 x 16 x 16).

Each setup checks once that both libraries give the same values and input gradients.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch

_THREADS = 2


def _recurrent(kind):
    def setup():
        import ember

        rng = np.random.default_rng(0)
        x = rng.standard_normal((8, 32, 128)).astype(np.float32)
        ember_layer = getattr(ember.nn, kind)(128, 128, num_layers=2, batch_first=True)
        ex = ember.from_numpy(x.copy()).requires_grad_(True)

        def ember_fn():
            out, _ = ember_layer(ex)
            out.sum().backward()
            return out

        torch = import_torch()
        if torch is None:
            return ember_fn, None
        torch_layer = getattr(torch.nn, kind)(128, 128, num_layers=2, batch_first=True)
        with torch.no_grad():
            for name, p in torch_layer.named_parameters():
                p.copy_(torch.from_numpy(getattr(ember_layer, name).detach().numpy().copy()))
        tx = torch.from_numpy(x.copy()).requires_grad_(True)

        def torch_fn():
            out, _ = torch_layer(tx)
            out.sum().backward()
            return out

        np.testing.assert_allclose(ember_fn().detach().numpy(), torch_fn().detach().numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-3, atol=1e-4)
        return ember_fn, torch_fn

    return setup


def _erf():
    import ember

    x = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32) * 2
    ex = ember.from_numpy(x.copy())

    def ember_fn():
        return ember.erf(ex)

    torch = import_torch()
    if torch is None:
        return ember_fn, None
    tx = torch.from_numpy(x.copy())

    def torch_fn():
        return torch.erf(tx)

    np.testing.assert_allclose(ember_fn().numpy(), torch_fn().numpy(), rtol=1e-6, atol=1e-7)
    return ember_fn, torch_fn


def _functional(name, build, shapes):
    """A row of ``build(lib, *tensors)`` forward and backward on float32 inputs of ``shapes`` (all requiring
    grad); the loss is the sum of the output."""

    def setup():
        import ember

        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
        ember_inputs = [ember.from_numpy(a.copy()).requires_grad_(True) for a in arrays]

        def ember_fn():
            out = build(ember, *ember_inputs)
            out.sum().backward()
            return out

        torch = import_torch()
        if torch is None:
            return ember_fn, None
        torch_inputs = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]

        def torch_fn():
            out = build(torch, *torch_inputs)
            out.sum().backward()
            return out

        np.testing.assert_allclose(ember_fn().detach().numpy(), torch_fn().detach().numpy(), rtol=1e-4, atol=1e-5)
        for e, t in zip(ember_inputs, torch_inputs):
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-3, atol=1e-4)
        return ember_fn, torch_fn

    return Workload(name, setup, threads=_THREADS, description=f"{name}: shapes {shapes}")


def _sdpa(causal):
    return lambda lib, q, k, v: lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


WORKLOADS = [
    Workload("lstm_fwd_bwd", _recurrent("LSTM"), threads=_THREADS,
             description="nn.LSTM(128, 128, 2 layers, batch_first) forward + backward, batch 8 x 32 steps"),
    Workload("gru_fwd_bwd", _recurrent("GRU"), threads=_THREADS,
             description="nn.GRU(128, 128, 2 layers, batch_first) forward + backward, batch 8 x 32 steps"),
    Workload("erf_1m", _erf, threads=_THREADS, description="ember.erf of 1M float32 values"),
    _functional("layer_norm_fwd_bwd", lambda lib, x, w, b: lib.nn.functional.layer_norm(x, (64,), w, b),
                [(4, 65, 64), (64,), (64,)]),
    _functional("softmax_fwd_bwd", lambda lib, x: lib.softmax(x, -1), [(16, 65, 65)]),
    _functional("gelu_fwd_bwd", lambda lib, x: lib.nn.functional.gelu(x), [(4, 65, 128)]),
    _functional("sdpa_fwd_bwd", _sdpa(False), [(4, 4, 65, 16)] * 3),
    _functional("sdpa_causal_fwd_bwd", _sdpa(True), [(4, 4, 64, 32)] * 3),
    _functional("depthwise_conv_fwd_bwd", lambda lib, x, w: lib.nn.functional.conv2d(x, w, padding=1, groups=96),
                [(2, 96, 16, 16), (96, 1, 3, 3)]),
]
