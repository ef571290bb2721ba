"""The translator on CUDA tensors: graph inputs keep their device, moves and factories record the real
device, and the captured graph run on the GPU equals eager. Needs a GPU (skipped elsewhere, with the
reason, by conftest's ``cuda`` marker)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember._dynamo.guards import GuardKind
from ember._dynamo.translator import translate

pytestmark = pytest.mark.cuda


def _run(fn, **frame_locals):
    captured = translate(fn, frame_locals, fullgraph=True)
    outs = captured.gm(*[s.read(frame_locals, fn.__globals__) for s in captured.graph_inputs])
    return captured, captured.result.build(outs, frame_locals, fn.__globals__)


def test_cuda_inputs_factories_and_moves_equal_eager():
    x = ember.randn(3, 4, device="cuda")

    def f(x):
        y = x * 2 + ember.ones(4, device=x.device)
        return y.cpu(), y.sum(0).to("cuda"), x.device

    captured, (on_cpu, on_gpu, device) = _run(f, x=x)
    expected = f(x)
    assert on_cpu.device.type == "cpu" and on_gpu.device.type == "cuda" and device == x.device
    np.testing.assert_allclose(on_cpu.numpy(), expected[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(on_gpu.cpu().numpy(), expected[1].cpu().numpy(), rtol=1e-6)
    (spec,) = [g.expected for g in captured.guards if g.kind is GuardKind.TENSOR_MATCH]
    assert spec.device.type == "cuda"


def test_cuda_module_forward_equals_eager():
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).cuda()
    x = ember.randn(5, 4, device="cuda")
    _, out = _run(lambda x: net(x), x=x, net=net)  # a free variable: its cell contents by name
    np.testing.assert_allclose(out.cpu().detach().numpy(), net(x).cpu().detach().numpy(), rtol=1e-5, atol=1e-6)
