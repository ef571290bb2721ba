"""The engine's two loops agree: the compiled one (``ember._C.run_graph``) and its Python reference.

Each graph below runs once through each loop (``_engine.python_loop()`` switches to the Python
one); the leaves' gradients must be bit-identical and the nodes must run in the same order
(recorded by a node class's ``apply`` wrapper: a change of order changes the sums' rounding, and
the order is what PyTorch users see in hooks). The gradients are also checked against numpy, so
a fault shared by both loops fails too. Graphs: a long chain (the benchmark's), a diamond, one
leaf used by many ops, several roots, a multi-output op with an unused output, a branch with no
gradient, hooks (node, tensor and leaf hooks), a custom Function, retain_graph twice, an error
raised inside a backward, and reentrant backward.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import _engine
from ember.autograd._formula_node import FormulaNode

pytestmark = pytest.mark.skipif(_engine._native_run is None, reason="ember._C was built without run_graph")


def _leaves(seed=0, n=3, size=5):
    rng = np.random.default_rng(seed)
    return [ember.tensor(rng.standard_normal(size), requires_grad=True) for _ in range(n)]


def _run_both(build, monkeypatch):
    """Run ``build(leaves)`` (which calls backward) with each loop; return the compiled loop's grads and node
    order, having compared them with the Python loop's."""
    original = FormulaNode.apply
    original_release = FormulaNode._apply_release
    runs = []
    for reference in (False, True):
        order = []

        def apply(self, grads, order=order):
            order.append(self.name())
            return original(self, grads)

        def apply_release(self, grads, release=True, order=order):
            # the compiled loop's one call for apply and _release (apply itself calls it with release False)
            if release and grads is not None:
                order.append(self.name())
            return original_release(self, grads, release)

        monkeypatch.setattr(FormulaNode, "apply", apply)
        monkeypatch.setattr(FormulaNode, "_apply_release", apply_release)
        leaves = _leaves()
        if reference:
            with _engine.python_loop():
                extra = build(leaves)
        else:
            extra = build(leaves)
        monkeypatch.setattr(FormulaNode, "apply", original)
        monkeypatch.setattr(FormulaNode, "_apply_release", original_release)
        runs.append(([None if x.grad is None else x.grad.numpy().copy() for x in leaves], order, extra))
    (native_grads, native_order, native_extra), (python_grads, python_order, python_extra) = runs
    assert native_order == python_order
    assert native_extra == python_extra
    for a, b in zip(native_grads, python_grads):
        if a is None or b is None:
            assert a is None and b is None
        else:
            np.testing.assert_array_equal(a, b)
    return native_grads, native_order


def test_native_loop_is_used():
    calls = []
    native = _engine._native_run

    def spy(*args):
        calls.append(args)
        return native(*args)

    _engine._native_run = spy
    try:
        x = ember.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
    finally:
        _engine._native_run = native
    assert len(calls) == 1
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])


def test_chain(monkeypatch):
    def build(leaves):
        x, c, _ = leaves
        c = c.detach()
        y = x
        for i in range(60):
            y = [lambda y: y * c, lambda y: y + x, lambda y: y.sin(), lambda y: y.exp(), lambda y: y.tanh()][i % 5](y)
        y.sum().backward()

    grads, order = _run_both(build, monkeypatch)
    assert order[0] == "SumBackward0" and len(order) == 61
    # numpy reference of the same chain and its gradient (forward-mode by hand, element-wise)
    x, c, _ = (v.detach().numpy() for v in _leaves())
    y, dy = x.copy(), np.ones_like(x)
    for i in range(60):
        k = i % 5
        if k == 0:
            y, dy = y * c, dy * c
        elif k == 1:
            y, dy = y + x, dy + 1
        elif k == 2:
            y, dy = np.sin(y), dy * np.cos(y)
        elif k == 3:
            y, dy = np.exp(y), dy * np.exp(y)
        else:
            y, dy = np.tanh(y), dy * (1 - np.tanh(y) ** 2)
    np.testing.assert_allclose(grads[0], dy, rtol=1e-10)


def test_diamond_shared_leaf_and_several_roots(monkeypatch):
    def build(leaves):
        a, b, c = leaves
        h = a * b
        left, right = h.sin(), h.cos()
        top = left * right + a
        out1 = (top * c).sum()
        out2 = (h * h).sum()
        ember.autograd.backward([out1, out2, out1])

    grads, _ = _run_both(build, monkeypatch)
    a, b, c = (v.detach().numpy() for v in _leaves())
    h = a * b
    # d/dh of sin(h)cos(h)*c (twice: out1 is a root twice) + h^2
    dh = 2 * c * np.cos(2 * h) + 2 * h
    np.testing.assert_allclose(grads[0], dh * b + 2 * c, rtol=1e-12)
    np.testing.assert_allclose(grads[1], dh * a, rtol=1e-12)
    np.testing.assert_allclose(grads[2], 2 * np.sin(h) * np.cos(h) + 2 * a, rtol=1e-12)


def test_multi_output_unused_output_and_no_gradient_branch(monkeypatch):
    def build(leaves):
        a, b, _ = leaves
        first, second = ember.split(a * 2, [2, 3])
        unused = second.exp()  # noqa: F841 (a branch that is not part of the loss)
        kept = b.detach() * 3  # no gradient flows to b through it
        (first.sum() * kept.sum() + (b * 0).sum()).backward()

    grads, _ = _run_both(build, monkeypatch)
    a, b, _ = (v.detach().numpy() for v in _leaves())
    np.testing.assert_allclose(grads[0], np.concatenate([np.full(2, 2 * 3 * b.sum()), np.zeros(3)]), rtol=1e-14)
    np.testing.assert_array_equal(grads[1], np.zeros(5))
    assert grads[2] is None


def test_hooks_and_custom_function(monkeypatch):
    class Square(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    def build(leaves):
        a, b, _ = leaves
        seen = []
        a.register_hook(lambda g: g * 10)
        h = Square.apply(a) + b
        h.register_hook(lambda g: seen.append("tensor") or g)
        node = (h * h).grad_fn
        node.register_hook(lambda gi, go: seen.append("node") or None)
        node.register_prehook(lambda go: seen.append("pre") or None)
        (h * h).sum().backward()
        return seen

    grads, _ = _run_both(build, monkeypatch)
    a, b, _ = (v.detach().numpy() for v in _leaves())
    h = a * a + b
    np.testing.assert_allclose(grads[0], 10 * 2 * h * 2 * a, rtol=1e-12)
    np.testing.assert_allclose(grads[1], 2 * h, rtol=1e-12)


def test_retain_graph_twice_and_accumulation(monkeypatch):
    def build(leaves):
        a, _, _ = leaves
        loss = (a.exp() * a).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()

    grads, _ = _run_both(build, monkeypatch)
    a = _leaves()[0].detach().numpy()
    np.testing.assert_allclose(grads[0], 2 * (np.exp(a) * a + np.exp(a)), rtol=1e-12)


def test_error_in_backward_propagates(monkeypatch):
    class Fails(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise ValueError("backward failed on purpose")

    def build(leaves):
        a, _, _ = leaves
        with pytest.raises(ValueError, match="on purpose"):
            (Fails.apply(a.sin()) * 2).sum().backward()
        (a * 3).sum().backward()  # the engine is usable after the error

    grads, _ = _run_both(build, monkeypatch)
    np.testing.assert_array_equal(grads[0], np.full(5, 3.0))


def test_reentrant_backward(monkeypatch):
    class Inner(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with ember.enable_grad():
                y = x.detach().requires_grad_(True)
                (y.sin().sum()).backward()  # a backward inside a backward
            return g * y.grad

    def build(leaves):
        a, _, _ = leaves
        (Inner.apply(a) * 2).sum().backward()

    grads, _ = _run_both(build, monkeypatch)
    a = _leaves()[0].detach().numpy()
    np.testing.assert_allclose(grads[0], 2 * np.cos(a), rtol=1e-12)
