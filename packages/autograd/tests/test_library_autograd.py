"""ember.library's custom ops under autograd: register_autograd plugs into the derivative table
(gradcheck against finite differences, ``ctx.needs_input_grad``, non-tensor arguments, second derivatives
when the backward is written in ember ops), PyTorch's error before a backward is registered, and
``Library.impl(..., "CompositeImplicitAutograd")`` differentiated through the ember ops it calls.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember import Tensor
from ember._ops import registry
from ember.autograd import gradcheck, gradgradcheck
from ember.library import Library, custom_op

_COUNTER = itertools.count()


@pytest.fixture(autouse=True)
def _remove_new_ops():
    before = set(registry)
    yield
    for name in set(registry) - before:
        ember.library._delete_op(name)


def _name(prefix):
    return f"embergrad::{prefix}{next(_COUNTER)}"


def _numpy_sin():
    @custom_op(_name("numpy_sin"), mutates_args=())
    def numpy_sin(x: Tensor) -> Tensor:
        return ember.from_numpy(np.sin(x.numpy()))

    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos()

    numpy_sin.register_autograd(backward, setup_context=setup_context)
    return numpy_sin


def test_gradcheck_of_a_numpy_kernel():
    op = _numpy_sin()
    x = ember.randn(4, 3, dtype=ember.float64, requires_grad=True)
    assert gradcheck(op, (x,))
    assert gradgradcheck(op, (x,))  # the backward is written in ember ops: differentiable again
    y = op(x)
    assert y.grad_fn is not None
    (g,) = ember.autograd.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), np.cos(x.detach().numpy()), rtol=1e-14)


def test_several_inputs_non_tensor_arguments_and_needs_input_grad():
    seen = []

    @custom_op(_name("scaled_add"), mutates_args=())
    def scaled_add(a: Tensor, b: Tensor, alpha: float) -> Tensor:
        return ember.from_numpy(a.numpy() + alpha * b.numpy())

    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[2]

    def backward(ctx, grad):
        seen.append(ctx.needs_input_grad)
        return grad, grad * ctx.alpha, None

    ember.library.register_autograd(scaled_add, backward, setup_context=setup_context)
    a = ember.randn(3, dtype=ember.float64, requires_grad=True)
    b = ember.randn(3, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda a, b: scaled_add(a, b, 2.5), (a, b))
    seen.clear()
    (gb,) = ember.autograd.grad(scaled_add(a.detach(), b, 0.5).sum(), b)
    np.testing.assert_allclose(gb.numpy(), [0.5, 0.5, 0.5])
    assert seen == [(False, True, False)]


def test_several_outputs():
    @custom_op(_name("sin_cos"), mutates_args=())
    def sin_cos(x: Tensor) -> tuple[Tensor, Tensor]:
        return ember.from_numpy(np.sin(x.numpy())), ember.from_numpy(np.cos(x.numpy()))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*output)

    def backward(ctx, grad_sin, grad_cos):
        s, c = ctx.saved_tensors
        return grad_sin * c - grad_cos * s

    sin_cos.register_autograd(backward, setup_context=setup_context)
    x = ember.randn(5, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda t: sin_cos(t), (x,))


def test_backward_without_a_registered_formula_raises_as_pytorch():
    @custom_op(_name("plain"), mutates_args=())
    def plain(x: Tensor) -> Tensor:
        return ember.from_numpy(x.numpy() * 2)

    x = ember.ones(2, requires_grad=True)
    y = plain(x)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="no autograd formula was registered. Please use register_autograd"):
        y.sum().backward()
    # registering afterwards replaces the error (and the dispatcher's cached recorder)
    plain.register_autograd(lambda ctx, grad: grad * 2)
    (g,) = ember.autograd.grad(plain(x).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0])


def test_wrong_number_of_gradients():
    @custom_op(_name("two_in"), mutates_args=())
    def two_in(a: Tensor, b: Tensor) -> Tensor:
        return ember.from_numpy(a.numpy() * b.numpy())

    two_in.register_autograd(lambda ctx, grad: grad)
    a = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="backward returned 1 gradients, expected 2"):
        two_in(a, ember.ones(2)).sum().backward()


def test_composite_implicit_autograd_impl():
    ns = f"emberlibgrad{next(_COUNTER)}"
    lib = Library(ns, "DEF")
    lib.define("linear(Tensor x, Tensor w) -> Tensor")
    lib.impl("linear", lambda x, w: (x @ w).tanh(), "CompositeImplicitAutograd")
    op = getattr(ember.ops, ns).linear
    x = ember.randn(2, 3, dtype=ember.float64, requires_grad=True)
    w = ember.randn(3, 4, dtype=ember.float64, requires_grad=True)
    assert gradcheck(op, (x, w))
    lib._destroy()
    assert not hasattr(getattr(ember.ops, ns), "linear")
