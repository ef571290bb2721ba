"""Autograd on the ``cuda`` device: the engine, custom Functions and the finite-difference checks.

Every test runs the same computation on CPU and on the GPU and compares the gradients (the CPU
result is the oracle), and checks that gradients stay on the device. They need a GPU
(``@pytest.mark.cuda``) and skip elsewhere, with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import Function, GradcheckError, gradcheck, gradgradcheck
from ember.testing import assert_close

pytestmark = pytest.mark.cuda


def _pair(shape, seed, dtype=ember.float64):
    """The same random values as a CPU leaf and a cuda leaf, both requiring grad."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if dtype.is_complex:
        values = values + 1j * rng.standard_normal(shape)
    cpu = ember.tensor(values, dtype=dtype, requires_grad=True)
    return cpu, ember.tensor(values, dtype=dtype, device="cuda", requires_grad=True)


def _graph(x, w):
    # matmul, broadcasting, a reduction, pointwise ops and a view: the engine's common paths
    h = ember.tanh(x @ w + 0.5)
    return (h * h.sigmoid()).sum(dim=1).pow(2).mean() + h[:, 0].exp().sum()


def test_backward_matches_cpu_and_stays_on_device():
    x_cpu, x_gpu = _pair((4, 3), 0)
    w_cpu, w_gpu = _pair((3, 5), 1)
    _graph(x_cpu, w_cpu).backward()
    loss = _graph(x_gpu, w_gpu)
    assert loss.device.type == "cuda"
    loss.backward()  # the implicit gradient of a scalar output, created on the device
    for cpu, gpu in ((x_cpu, x_gpu), (w_cpu, w_gpu)):
        assert gpu.grad.device.type == "cuda"
        assert_close(gpu.grad.cpu(), cpu.grad)


def test_grads_accumulate_on_device():
    x_cpu, x_gpu = _pair((5,), 2)
    for x in (x_cpu, x_gpu):
        (x * x).sum().backward()
        (3 * x).sum().backward()
    assert x_gpu.grad.device.type == "cuda"
    assert_close(x_gpu.grad.cpu(), x_cpu.grad)
    assert_close(x_gpu.grad.cpu(), 2 * x_cpu.detach() + 3)


def test_grad_with_explicit_grad_outputs_and_create_graph():
    x_cpu, x_gpu = _pair((3, 2), 3, ember.complex128)
    results = []
    for x in (x_cpu, x_gpu):
        y = ember.exp(x) * x.conj()
        v = ember.ones_like(y) * (1 - 2j)
        (g,) = ember.autograd.grad([y], [x], [v], create_graph=True)
        (gg,) = ember.autograd.grad([g.abs().sum()], [x])
        results.append((g.detach(), gg))
    (g_cpu, gg_cpu), (g_gpu, gg_gpu) = results
    assert g_gpu.device.type == "cuda" and gg_gpu.device.type == "cuda"
    assert_close(g_gpu.cpu(), g_cpu)
    assert_close(gg_gpu.cpu(), gg_cpu)


class _Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * grad * x


class _WrongSquare(_Square):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2.5 * grad * x  # off by a quarter


def test_custom_function_on_device():
    x_cpu, x_gpu = _pair((4,), 4)
    _Square.apply(x_cpu).sum().backward()
    _Square.apply(x_gpu).sum().backward()
    assert x_gpu.grad.device.type == "cuda"
    assert_close(x_gpu.grad.cpu(), x_cpu.grad)


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("dtype", [ember.float64, ember.complex128], ids=["float64", "complex128"])
def test_gradcheck_and_gradgradcheck_on_device(fast_mode, dtype):
    _, x = _pair((2, 3), 5, dtype)
    _, w = _pair((3, 2), 6, dtype)

    def fn(a, b):
        return ember.tanh(a @ b), (a * a).sum(0)

    assert gradcheck(fn, (x, w), fast_mode=fast_mode)
    assert gradgradcheck(fn, (x, w), fast_mode=fast_mode)
    assert x.grad is None and w.grad is None  # the checks leave the leaves' .grad alone


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_catches_a_wrong_gradient_on_device(fast_mode):
    _, x = _pair((3,), 7)
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(_WrongSquare.apply, (x,), fast_mode=fast_mode)
    assert gradcheck(_Square.apply, (x,), fast_mode=fast_mode)
