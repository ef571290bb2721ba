"""The engine's behaviour and error messages against PyTorch's (run with ``nox -s parity``).

The same program runs on both libraries (``lib`` is ``ember`` or ``torch``);
values must agree and errors must carry the same words.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ember

# the parity helpers of ember-core's tests: the pinned torch version
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tensor-core" / "tests" / "parity"))
from _parity_device import IS_PINNED_TORCH, PINNED_TORCH  # noqa: E402


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the message is what is compared
        return type(exc).__name__, str(exc)
    return None


def _leaf(lib, values):
    return lib.tensor(values, dtype=lib.float64, requires_grad=True)


# ---------------------------------------------------------------- error messages


def _second_backward(lib):
    y = (_leaf(lib, [1.0, 2.0]) * 2).exp().sum()
    y.backward()
    y.backward()


def _non_scalar(lib):
    (_leaf(lib, [1.0, 2.0]) * 2).backward()


def _no_grad_output(lib):
    lib.tensor(1.0).backward()


def _unused_input(lib):
    x = _leaf(lib, [1.0])
    lib.autograd.grad((x * 2).sum(), [x, _leaf(lib, [2.0])])


def _leaf_inplace(lib):
    _leaf(lib, [1.0]).add_(1.0)


def _wrong_number(lib):
    class TooMany(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    TooMany.apply(_leaf(lib, [1.0])).sum().backward()


def _wrong_shape(lib):
    class BadShape(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return lib.ones(3, dtype=lib.float64)

    BadShape.apply(_leaf(lib, [1.0, 2.0])).sum().backward()


def _hook_without_grad(lib):
    lib.tensor([1.0]).register_hook(lambda g: g)


def _retain_without_grad(lib):
    lib.tensor([1.0]).retain_grad()


def _post_hook_non_leaf(lib):
    (_leaf(lib, [1.0]) * 2).register_post_accumulate_grad_hook(lambda t: None)


def _empty_inputs(lib):
    lib.autograd.backward([(_leaf(lib, [1.0]) * 2).sum()], inputs=[])


def _requires_grad_of_non_leaf(lib):
    (_leaf(lib, [1.0]) * 2).requires_grad_(False)


def _once_differentiable_twice(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, grad):
            return grad * 2

    x = _leaf(lib, [1.0])
    y = Double.apply(x)
    (g,) = lib.autograd.grad((y * y).sum(), x, create_graph=True)
    g.sum().backward()


@pytest.mark.parametrize(
    "program",
    [
        _second_backward,
        _non_scalar,
        _no_grad_output,
        _unused_input,
        _leaf_inplace,
        _wrong_number,
        _wrong_shape,
        _hook_without_grad,
        _retain_without_grad,
        _post_hook_non_leaf,
        _requires_grad_of_non_leaf,
        _once_differentiable_twice,
    ],
)
def test_same_error(program):
    expected = _error(lambda: program(torch))
    got = _error(lambda: program(ember))
    assert expected is not None and got is not None
    assert got[0] == expected[0]
    # ember may add context after PyTorch's sentence (e.g. which function was marked once_differentiable)
    same_words = got[1].replace("ember", "torch").startswith(expected[1])
    if not same_words and not IS_PINNED_TORCH:
        pytest.skip(f"torch {torch.__version__} words it {expected[1]!r}; ember follows torch {PINNED_TORCH}")
    assert same_words, (got[1], expected[1])


def test_empty_inputs_error():
    expected = _error(lambda: _empty_inputs(torch))
    got = _error(lambda: _empty_inputs(ember))
    assert got == expected


def test_modified_saved_tensor_error_has_the_same_versions():
    def program(lib):
        x = _leaf(lib, [1.0, 2.0])
        y = x * 1
        z = y.exp() * y
        y.add_(1.0)
        y.mul_(2.0)
        z.sum().backward()

    expected = _error(lambda: program(torch))[1]
    got = _error(lambda: program(ember))[1]
    tail = "is at version 2; expected version 0 instead."
    assert "modified by an inplace operation" in expected and "modified by an inplace operation" in got
    assert tail in expected and tail in got


# ---------------------------------------------------------------- values


def _values(lib, program):
    return [np.asarray(t.detach().numpy()) if t is not None else None for t in program(lib)]


def _hvp(lib):
    x = _leaf(lib, [1.0, -2.0, 3.0])
    (g,) = lib.autograd.grad((x**3).sum(), x, create_graph=True)
    v = lib.tensor([1.0, 0.5, -1.0], dtype=lib.float64)
    return (g, *lib.autograd.grad(g, x, v))


def _penalty(lib):
    x = _leaf(lib, [0.5, -1.0, 2.0])
    w = _leaf(lib, [1.5, 0.25, -0.5])
    (gx,) = lib.autograd.grad((w * x).exp().sum(), x, create_graph=True)
    (gx * gx).sum().backward()
    return x.grad, w.grad


def _hooks(lib):
    x = _leaf(lib, [1.0, 2.0])
    y = x * 3
    y.retain_grad()
    y.register_hook(lambda g: g * 10)
    y.grad_fn.register_prehook(lambda go: (go[0] + 1,))
    x.register_hook(lambda g: g - 1)
    (y * y).sum().backward()
    return x.grad, y.grad


def _allow_unused(lib):
    x = _leaf(lib, [1.0, 2.0])
    u = _leaf(lib, [[1.0]])
    return lib.autograd.grad((x * x).sum(), [x, u], materialize_grads=True)


def _inputs(lib):
    x = _leaf(lib, [1.0, 2.0])
    w = _leaf(lib, [3.0, 4.0])
    y = x * w
    (y * y).sum().backward(inputs=[y, w])
    return y.grad, w.grad, x.grad


def _accumulate(lib):
    x = _leaf(lib, [1.0, 2.0])
    (x.exp() * x).sum().backward(create_graph=True)
    g = x.grad
    (x * x).sum().backward()
    return g, x.grad


@pytest.mark.parametrize("program", [_hvp, _penalty, _hooks, _allow_unused, _inputs, _accumulate])
@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_same_values(program):
    expected = _values(torch, program)
    got = _values(ember, program)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_same_gradients_as_torch(use_reentrant):
    import torch.utils.checkpoint as torch_checkpoint

    import ember.utils.checkpoint as ember_checkpoint

    def run(lib, ckpt):
        rng = np.random.default_rng(0)
        x = _leaf(lib, rng.standard_normal((3, 4)))
        w = _leaf(lib, rng.standard_normal((4, 2)))
        y = ckpt.checkpoint(lambda t: ((t @ w).tanh() * 2).exp(), x, use_reentrant=use_reentrant)
        y.sum().backward()
        return x.grad.numpy(), w.grad.numpy()

    for a, b in zip(run(ember, ember_checkpoint), run(torch, torch_checkpoint)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
