"""The backward engine and the public API around it: ``Tensor.backward``, ``ember.autograd.grad``.

Values are checked against hand-computed numpy results, so these tests need
no PyTorch. What is covered: leaves and non-leaves, ``requires_grad``
propagation, accumulation into ``.grad``, every argument of ``backward`` and
``grad``, the errors (in PyTorch's words), higher-order gradients, the graph's
structure (``next_functions``, node names), very deep graphs (no recursion,
freed without the cycle collector) and reentrant backward.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import ember
from ember.autograd.graph import AccumulateGrad, Node


def _leaf(values, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype, requires_grad=True)


def _np(t):
    return t.detach().numpy()


@pytest.fixture
def no_cycle_collector():
    """Run a test with the cycle collector off, so only reference counting frees objects."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------- leaves and propagation


class TestLeaves:
    def test_leaf_and_non_leaf(self):
        x = _leaf([1.0, 2.0])
        y = x * 2
        assert x.is_leaf and x.grad_fn is None and x.requires_grad
        assert not y.is_leaf and y.grad_fn is not None and y.requires_grad
        c = ember.tensor([1.0, 2.0])
        assert c.is_leaf and not c.requires_grad

    def test_requires_grad_propagates_from_any_input(self):
        a = ember.tensor([1.0, 2.0])
        b = _leaf([3.0, 4.0], dtype=ember.float32)
        assert not (a * a).requires_grad
        out = a * b
        assert out.requires_grad and not out.is_leaf
        assert (a + b).requires_grad and (b.exp() + a).requires_grad

    def test_detach_cuts_the_graph(self):
        x = _leaf([1.0, 2.0])
        d = (x * 2).detach()
        assert not d.requires_grad and d.is_leaf and d.grad_fn is None
        np.testing.assert_array_equal(_np(d), [2.0, 4.0])

    def test_requires_grad_of_non_leaf_cannot_be_cleared(self):
        y = _leaf([1.0]) * 2
        with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
            y.requires_grad_(False)

    def test_integer_tensors_cannot_require_grad(self):
        with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype can require"):
            ember.tensor([1, 2]).requires_grad_()

    def test_gradient_of_leaf_keeps_dtype(self):
        x = _leaf([1.0, 2.0], dtype=ember.float32)
        (x * x).backward(ember.ones(2))
        assert x.grad.dtype == ember.float32
        np.testing.assert_allclose(_np(x.grad), [2.0, 4.0])

    def test_broadcast_input_gets_gradient_of_its_own_shape(self):
        x = _leaf([[1.0], [2.0]])  # (2, 1)
        w = _leaf([1.0, 10.0, 100.0])  # (3,)
        y = x * w  # (2, 3)
        y.backward(ember.ones(2, 3, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [[111.0], [111.0]])
        np.testing.assert_allclose(_np(w.grad), [3.0, 3.0, 3.0])


# ---------------------------------------------------------------- backward


class TestBackward:
    def test_scalar_backward(self):
        x = _leaf([1.0, 2.0, 3.0])
        (x * x).sum().backward()
        np.testing.assert_allclose(_np(x.grad), [2.0, 4.0, 6.0])

    def test_vector_jacobian_product(self):
        x = _leaf([1.0, 2.0, 3.0])
        y = x.exp() * x  # dy/dx = e^x (1 + x)
        v = ember.tensor([1.0, -1.0, 0.5], dtype=ember.float64)
        y.backward(v)
        xs = np.array([1.0, 2.0, 3.0])
        np.testing.assert_allclose(_np(x.grad), [1.0, -1.0, 0.5] * np.exp(xs) * (1 + xs))

    def test_gradient_accumulates_over_two_backward_calls(self):
        x = _leaf([1.0, 2.0])
        (x * 3).backward(ember.ones(2, dtype=ember.float64))
        first = x.grad
        (x * x).backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [3.0 + 2.0, 3.0 + 4.0])
        # accumulated in place, as PyTorch does outside create_graph
        assert x.grad is first

    def test_accumulation_after_create_graph_is_in_place(self):
        # as PyTorch's AccumulateGrad: with grad mode off, .grad is added to in place even when it is a graph
        x = _leaf([1.0, 2.0])
        (x * x * x).backward(ember.ones(2, dtype=ember.float64), create_graph=True)
        first = x.grad
        assert first.requires_grad
        (x * 2).backward(ember.ones(2, dtype=ember.float64))
        assert x.grad is first
        np.testing.assert_allclose(_np(x.grad), [3.0 + 2.0, 12.0 + 2.0])

    def test_accumulation_under_create_graph_is_out_of_place(self):
        x = _leaf([1.0, 2.0])
        (x * 3).backward(ember.ones(2, dtype=ember.float64))
        first = x.grad
        (x * x).backward(ember.ones(2, dtype=ember.float64), create_graph=True)
        assert x.grad is not first and x.grad.requires_grad
        np.testing.assert_allclose(_np(first), [3.0, 3.0])
        np.testing.assert_allclose(_np(x.grad), [5.0, 7.0])

    def test_grad_can_be_reset(self):
        x = _leaf([1.0, 2.0])
        (x * 3).backward(ember.ones(2, dtype=ember.float64))
        x.grad = None
        (x * 5).backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [5.0, 5.0])

    def test_given_gradient_is_not_aliased_by_grad(self):
        x = _leaf([1.0, 2.0])
        g = ember.tensor([1.0, 1.0], dtype=ember.float64)
        x.clone().backward(g)  # clone's backward passes g through unchanged
        assert x.grad is not g
        g.add_(10.0)
        np.testing.assert_allclose(_np(x.grad), [1.0, 1.0])

    def test_diamond_sums_both_paths(self):
        x = _leaf([2.0])
        y = x * 3
        z = y * y + y.exp()  # dz/dx = (2y + e^y) * 3
        calls = []
        y.grad_fn.register_prehook(lambda grads: calls.append(1))
        z.backward(ember.ones(1, dtype=ember.float64))
        assert calls == [1]  # y's node ran once, with the sum of both gradients
        np.testing.assert_allclose(_np(x.grad), [(2 * 6.0 + np.exp(6.0)) * 3])

    def test_same_leaf_used_twice_in_one_op(self):
        x = _leaf([3.0])
        (x * x).backward(ember.ones(1, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [6.0])

    def test_retain_graph_allows_second_backward(self):
        x = _leaf([1.0, 2.0])
        y = x.exp() * x
        y.backward(ember.ones(2, dtype=ember.float64), retain_graph=True)
        y.backward(ember.ones(2, dtype=ember.float64))
        xs = np.array([1.0, 2.0])
        np.testing.assert_allclose(_np(x.grad), 2 * np.exp(xs) * (1 + xs))

    def test_second_backward_on_freed_graph_raises(self):
        x = _leaf([1.0, 2.0])
        y = x * x
        y.backward(ember.ones(2, dtype=ember.float64))
        with pytest.raises(RuntimeError, match=r"Trying to backward through the graph a second time"):
            y.backward(ember.ones(2, dtype=ember.float64))

    def test_freed_graph_message_names_retain_graph(self):
        x = _leaf([1.0])
        y = x.exp()
        y.backward(ember.ones(1, dtype=ember.float64))
        with pytest.raises(RuntimeError) as info:
            y.backward(ember.ones(1, dtype=ember.float64))
        assert "Specify retain_graph=True" in str(info.value)

    def test_backward_through_nodes_that_saved_nothing_twice(self):
        # add saves nothing, so (as in PyTorch) a second backward through it is fine
        x = _leaf([1.0, 2.0])
        y = x + 1
        y.backward(ember.ones(2, dtype=ember.float64))
        y.backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])

    def test_non_scalar_without_gradient_raises(self):
        y = _leaf([1.0, 2.0]) * 2
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
            y.backward()

    def test_output_not_requiring_grad_raises(self):
        with pytest.raises(
            RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"
        ):
            ember.tensor(1.0).backward()

    def test_gradient_of_wrong_shape_raises(self):
        y = _leaf([1.0, 2.0]) * 2
        with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of"):
            y.backward(ember.ones(3, dtype=ember.float64))

    def test_inputs_restricts_accumulation(self):
        x = _leaf([1.0, 2.0])
        w = _leaf([3.0, 4.0])
        (x * w).backward(ember.ones(2, dtype=ember.float64), inputs=[w])
        assert x.grad is None
        np.testing.assert_allclose(_np(w.grad), [1.0, 2.0])

    def test_inputs_may_be_a_single_tensor(self):
        x = _leaf([1.0, 2.0])
        w = _leaf([3.0, 4.0])
        (x * w).backward(ember.ones(2, dtype=ember.float64), inputs=x)
        assert w.grad is None
        np.testing.assert_allclose(_np(x.grad), [3.0, 4.0])

    def test_inputs_non_leaf_gets_grad(self):
        x = _leaf([1.0, 2.0])
        y = x * 2
        (y * y).backward(ember.ones(2, dtype=ember.float64), inputs=[y])
        np.testing.assert_allclose(_np(y.grad), [4.0, 8.0])
        assert x.grad is None

    def test_empty_inputs_raises(self):
        y = _leaf([1.0]) * 2
        with pytest.raises(RuntimeError, match="cannot be empty"):
            ember.autograd.backward([y], [ember.ones(1, dtype=ember.float64)], inputs=[])

    def test_several_roots(self):
        x = _leaf([1.0, 2.0])
        y1 = x * 2
        y2 = x * x
        ember.autograd.backward(
            [y1, y2], [ember.ones(2, dtype=ember.float64), ember.tensor([1.0, 10.0], dtype=ember.float64)]
        )
        np.testing.assert_allclose(_np(x.grad), [2.0 + 2.0, 2.0 + 40.0])

    def test_create_graph_makes_grad_differentiable(self):
        x = _leaf([1.0, 2.0])
        (x * x * x).backward(ember.ones(2, dtype=ember.float64), create_graph=True)
        g = x.grad  # 3x^2
        assert g.requires_grad and g.grad_fn is not None
        np.testing.assert_allclose(_np(g), [3.0, 12.0])
        second = ember.autograd.grad(g, x, ember.ones(2, dtype=ember.float64))[0]
        np.testing.assert_allclose(_np(second), [6.0, 12.0])

    def test_backward_of_view_root(self):
        x = _leaf([[1.0, 2.0], [3.0, 4.0]])
        y = (x * 2).view(4)
        y.backward(ember.tensor([1.0, 2.0, 3.0, 4.0], dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [[2.0, 4.0], [6.0, 8.0]])


# ---------------------------------------------------------------- ember.autograd.grad


class TestGrad:
    def test_returns_tuple_and_does_not_touch_dot_grad(self):
        x = _leaf([1.0, 2.0])
        w = _leaf([3.0, 4.0])
        gx, gw = ember.autograd.grad(x * w, [x, w], ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(gx), [3.0, 4.0])
        np.testing.assert_allclose(_np(gw), [1.0, 2.0])
        assert x.grad is None and w.grad is None

    def test_single_input_gives_one_tuple(self):
        x = _leaf(2.0)
        result = ember.autograd.grad(x * x, x)
        assert isinstance(result, tuple) and len(result) == 1
        assert result[0].item() == pytest.approx(4.0)

    def test_with_respect_to_non_leaf(self):
        x = _leaf([1.0, 2.0])
        y = x.exp()
        z = y * y
        (gy,) = ember.autograd.grad(z, y, ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(gy), 2 * np.exp([1.0, 2.0]))

    def test_unused_input_raises(self):
        x = _leaf([1.0])
        unused = _leaf([1.0])
        with pytest.raises(
            RuntimeError, match="The differentiated Tensor at index 1 appears to not have been used in the graph"
        ):
            ember.autograd.grad(x * 2, [x, unused], ember.ones(1, dtype=ember.float64))

    def test_allow_unused_gives_none(self):
        x = _leaf([1.0])
        unused = _leaf([1.0])
        gx, gu = ember.autograd.grad(x * 2, [x, unused], ember.ones(1, dtype=ember.float64), allow_unused=True)
        np.testing.assert_allclose(_np(gx), [2.0])
        assert gu is None

    def test_materialize_grads_gives_zeros(self):
        x = _leaf([1.0])
        unused = _leaf([[1.0, 2.0]])
        gx, gu = ember.autograd.grad(x * 2, [x, unused], ember.ones(1, dtype=ember.float64), materialize_grads=True)
        np.testing.assert_allclose(_np(gx), [2.0])
        assert tuple(gu.shape) == (1, 2)
        np.testing.assert_array_equal(_np(gu), [[0.0, 0.0]])

    def test_materialize_grads_with_allow_unused_false_raises(self):
        x = _leaf([1.0])
        with pytest.raises(ValueError, match="allow_unused"):
            ember.autograd.grad(
                x * 2, [x], ember.ones(1, dtype=ember.float64), allow_unused=False, materialize_grads=True
            )

    def test_input_not_requiring_grad_raises(self):
        x = _leaf([1.0])
        c = ember.tensor([1.0], dtype=ember.float64)
        with pytest.raises(RuntimeError, match="does not require grad"):
            ember.autograd.grad(x * c, [c], ember.ones(1, dtype=ember.float64))

    def test_grad_frees_graph_unless_retained(self):
        x = _leaf([1.0, 2.0])
        y = x * x
        ember.autograd.grad(y, x, ember.ones(2, dtype=ember.float64), retain_graph=True)
        ember.autograd.grad(y, x, ember.ones(2, dtype=ember.float64))
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            ember.autograd.grad(y, x, ember.ones(2, dtype=ember.float64))

    def test_grad_stops_at_inputs(self):
        # the graph behind the requested inputs need not run
        x = _leaf([1.0])
        y = x * 2
        calls = []
        y.grad_fn.register_prehook(lambda grads: calls.append(1))
        (gy,) = ember.autograd.grad(y * y, y, ember.ones(1, dtype=ember.float64))
        np.testing.assert_allclose(_np(gy), [4.0])
        assert calls == []

    def test_several_outputs_and_grad_outputs(self):
        x = _leaf([1.0, 2.0])
        (g,) = ember.autograd.grad(
            [x * 2, x * x], [x], [ember.ones(2, dtype=ember.float64), ember.tensor([3.0, 3.0], dtype=ember.float64)]
        )
        np.testing.assert_allclose(_np(g), [2.0 + 6.0, 2.0 + 12.0])

    def test_is_grads_batched_gives_one_gradient_per_row(self):
        x = _leaf([1.0, 2.0, 3.0])
        rows = ember.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], dtype=ember.float64)
        (g,) = ember.autograd.grad(x * x, x, rows, is_grads_batched=True)  # rows of the Jacobian diag(2x)
        np.testing.assert_allclose(_np(g), [[2.0, 0.0, 0.0], [0.0, 8.0, 0.0]])


# ---------------------------------------------------------------- higher order


class TestHigherOrder:
    def test_hessian_vector_product_of_cube(self):
        x = _leaf([1.0, -2.0, 3.0])
        y = (x**3).sum()
        (g,) = ember.autograd.grad(y, x, create_graph=True)  # 3 x^2
        v = ember.tensor([1.0, 0.5, -1.0], dtype=ember.float64)
        (hv,) = ember.autograd.grad(g, x, v)  # diag(6 x) v
        np.testing.assert_allclose(_np(g), [3.0, 12.0, 27.0])
        np.testing.assert_allclose(_np(hv), 6 * np.array([1.0, -2.0, 3.0]) * [1.0, 0.5, -1.0])

    def test_third_derivative(self):
        x = _leaf([2.0])
        y = x * x * x * x  # x^4
        (g1,) = ember.autograd.grad(y, x, create_graph=True)
        (g2,) = ember.autograd.grad(g1, x, create_graph=True)
        (g3,) = ember.autograd.grad(g2, x)
        np.testing.assert_allclose([_np(g1)[0], _np(g2)[0], _np(g3)[0]], [4 * 8.0, 12 * 4.0, 24 * 2.0])

    def test_gradient_penalty(self):
        # P(w) = |d/dx sum(exp(w x))|^2 = sum((w e^{wx})^2); dP/dw = 2 g e^{wx} (1 + w x)
        xs = np.array([0.5, -1.0, 2.0])
        ws = np.array([1.5, 0.25, -0.5])
        x = _leaf(xs)
        w = _leaf(ws)
        f = (w * x).exp().sum()
        (gx,) = ember.autograd.grad(f, x, create_graph=True)
        penalty = (gx * gx).sum()
        penalty.backward()
        g = ws * np.exp(ws * xs)
        np.testing.assert_allclose(_np(w.grad), 2 * g * np.exp(ws * xs) * (1 + ws * xs))
        # and d/dx of the penalty: 2 g * w^2 e^{wx}
        np.testing.assert_allclose(_np(x.grad), 2 * g * ws**2 * np.exp(ws * xs))

    def test_grad_without_create_graph_is_constant(self):
        x = _leaf([1.0])
        (g,) = ember.autograd.grad(x * x, x, ember.ones(1, dtype=ember.float64))
        assert not g.requires_grad and g.grad_fn is None


# ---------------------------------------------------------------- graph structure


class TestGraphStructure:
    def test_next_functions_and_names(self):
        x = _leaf([1.0, 2.0])
        y = _leaf([3.0, 4.0])
        c = ember.tensor([1.0, 1.0], dtype=ember.float64)
        out = (x * y + c).exp()
        exp_node = out.grad_fn
        assert exp_node.name() == "ExpBackward0"
        assert isinstance(exp_node, Node)
        ((add_node, nr),) = exp_node.next_functions
        assert nr == 0 and add_node.name() == "AddBackward0"
        (mul_node, _), (none_node, _) = add_node.next_functions
        assert none_node is None  # c does not require grad
        assert mul_node.name() == "MulBackward0"
        (acc_x, nx), (acc_y, ny) = mul_node.next_functions
        assert isinstance(acc_x, AccumulateGrad) and isinstance(acc_y, AccumulateGrad)
        assert acc_x.variable is x and acc_y.variable is y and nx == ny == 0
        assert acc_x.next_functions == ()
        assert acc_x.name() == "ember::autograd::AccumulateGrad"
        assert type(acc_x).__name__ == "AccumulateGrad"

    def test_accumulate_grad_node_is_shared(self):
        x = _leaf([1.0])
        a = (x * 2).grad_fn.next_functions[0][0]
        b = (x + 2).grad_fn.next_functions[0][0]
        assert a is b

    def test_output_nr_of_multi_output_node(self):
        x = _leaf([[1.0, 2.0], [3.0, 4.0]])
        parts = (x * 1).unbind(0)
        assert parts[0].grad_fn is parts[1].grad_fn
        assert [p._output_nr for p in parts] == [0, 1]

    def test_node_metadata_is_a_dict(self):
        node = (_leaf([1.0]) * 2).grad_fn
        node.metadata["tag"] = 1
        assert node.metadata == {"tag": 1}


# ---------------------------------------------------------------- deep graphs, memory


class TestDeepGraphs:
    N = 50_000

    def test_backward_through_50000_ops(self):
        x = _leaf([1.0, 2.0])
        y = x
        for _ in range(self.N):
            y = y + 1.0
        y = y * 3
        y.backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [3.0, 3.0])
        np.testing.assert_allclose(_np(y), (np.array([1.0, 2.0]) + self.N) * 3)

    def test_grad_through_50000_ops(self):
        x = _leaf([1.0])
        y = x
        for _ in range(self.N):
            y = y * 1.0
        (g,) = ember.autograd.grad(y, x, ember.ones(1, dtype=ember.float64))
        np.testing.assert_allclose(_np(g), [1.0])

    def test_deep_graph_is_freed_without_cycle_collector(self, no_cycle_collector):
        x = _leaf([1.0])
        y = x.exp()
        first = weakref.ref(y.grad_fn)
        for _ in range(self.N):
            y = y * 1.0
        last = weakref.ref(y.grad_fn)
        del y
        assert last() is None and first() is None

    def test_deep_graph_freed_after_backward(self, no_cycle_collector):
        x = _leaf([1.0])
        y = x
        for _ in range(self.N):
            y = y * 1.0
        node = weakref.ref(y.grad_fn)
        y.backward(ember.ones(1, dtype=ember.float64))
        del y
        assert node() is None


class TestMemory:
    def test_graph_saving_its_output_is_freed_by_refcount(self, no_cycle_collector):
        # exp saves its result: the node must not keep the output alive (no cycle)
        x = _leaf([1.0, 2.0])
        y = x.exp()
        node = weakref.ref(y.grad_fn)
        out = weakref.ref(y)
        del y
        assert node() is None and out() is None

    def test_saved_output_still_usable_for_double_backward(self):
        x = _leaf([1.0])
        y = x.exp()
        (g,) = ember.autograd.grad(y, x, ember.ones(1, dtype=ember.float64), create_graph=True)
        (gg,) = ember.autograd.grad(g, x, ember.ones(1, dtype=ember.float64))
        np.testing.assert_allclose(_np(gg), [np.e])

    def test_saved_tensors_released_by_backward(self, no_cycle_collector):
        x = _leaf([1.0, 2.0])
        y = x * 2
        z = y * y  # saves y (twice)
        saved = weakref.ref(y)
        del y
        assert saved() is not None  # held by z's node for backward
        z.backward(ember.ones(2, dtype=ember.float64))
        assert saved() is None  # backward without retain_graph released it
        np.testing.assert_allclose(_np(x.grad), [8.0, 16.0])

    def test_retain_graph_keeps_saved_tensors(self, no_cycle_collector):
        x = _leaf([1.0, 2.0])
        y = x * 2
        z = y * y
        saved = weakref.ref(y)
        del y
        z.backward(ember.ones(2, dtype=ember.float64), retain_graph=True)
        assert saved() is not None

    def test_retain_grad_does_not_keep_tensor_alive(self, no_cycle_collector):
        x = _leaf([1.0])
        y = x * 2
        y.retain_grad()
        node = weakref.ref(y.grad_fn)
        ref = weakref.ref(y)
        del y
        assert ref() is None and node() is None


# ---------------------------------------------------------------- reentrant backward


class _InnerBackward(ember.autograd.Function):
    """y = x * x computed in forward; backward runs a second, inner backward to get 2x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with ember.enable_grad():
            inner = x.detach().requires_grad_()
            (inner * inner).backward(grad)
        return inner.grad


class _InnerGrad(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with ember.enable_grad():
            inner = x.detach().requires_grad_()
            return ember.autograd.grad(inner.exp(), inner, grad)[0]


class TestReentrant:
    def test_backward_inside_backward(self):
        x = _leaf([1.0, -3.0])
        y = _InnerBackward.apply(x) * 5
        y.backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [10.0, -30.0])

    def test_grad_inside_backward(self):
        x = _leaf([0.0, 1.0])
        (g,) = ember.autograd.grad(_InnerGrad.apply(x) * 2, x, ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(g), 2 * np.exp([0.0, 1.0]))

    def test_nested_reentrant_twice(self):
        x = _leaf([2.0])
        y = _InnerBackward.apply(_InnerBackward.apply(x))  # x^4
        y.backward(ember.ones(1, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [4 * 8.0])

    def test_grad_mode_restored_after_backward(self):
        x = _leaf([1.0])
        (x * x).backward(ember.ones(1, dtype=ember.float64), create_graph=True)
        assert ember.is_grad_enabled()
        with ember.no_grad():
            (x * 1).detach()
        y = x * x
        y.backward(ember.ones(1, dtype=ember.float64))
        assert ember.is_grad_enabled()


# ---------------------------------------------------------------- in-place ops and saved versions


class TestInplace:
    def test_inplace_on_leaf_requiring_grad_raises(self):
        x = _leaf([1.0, 2.0])
        with pytest.raises(
            RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation."
        ):
            x.add_(1.0)
        with pytest.raises(
            RuntimeError, match="a view of a leaf Variable that requires grad is being used in an in-place"
        ):
            x[0:1].mul_(2.0)

    def test_inplace_on_leaf_allowed_under_no_grad(self):
        x = _leaf([1.0, 2.0])
        with ember.no_grad():
            x.add_(1.0)
        np.testing.assert_array_equal(_np(x), [2.0, 3.0])
        assert x.is_leaf and x.requires_grad

    def test_modified_saved_tensor_raises_with_versions(self):
        x = _leaf([1.0, 2.0])
        y = x * 1
        z = y * y  # saves y at version 0
        y.add_(1.0)
        with pytest.raises(RuntimeError) as info:
            z.backward(ember.ones(2, dtype=ember.float64))
        message = str(info.value)
        assert "modified by an inplace operation" in message
        assert "is at version 1; expected version 0 instead" in message

    def test_modified_saved_output_raises(self):
        x = _leaf([1.0, 2.0])
        y = x.exp()  # saves its output
        y.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward(ember.ones(2, dtype=ember.float64))

    def test_inplace_change_to_unneeded_tensor_is_fine(self):
        # add's formula reads neither input, so changing one in place after the add is not an error
        x = _leaf([1.0, 2.0])
        y = x * 1
        z = y + x
        y.mul_(10.0)
        z.backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])

    def test_inplace_change_to_other_operand_not_saved(self):
        # h * c with c not requiring grad: only c is needed (for h's gradient), so h may change afterwards
        x = _leaf([1.0, 2.0])
        c = ember.tensor([3.0, 4.0], dtype=ember.float64)
        h = x * 1
        z = h * c  # the gradient of h reads c only; h itself is not saved (c needs no grad)
        h.add_(5.0)  # z's graph still refers to h's value before the write
        z.backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [3.0, 4.0])

    def test_inplace_op_records_history(self):
        x = _leaf([1.0, 2.0])
        y = x * 2
        y.mul_(3.0).add_(x)  # y = 7x
        assert y.grad_fn.name() == "AddBackward0"
        y.backward(ember.ones(2, dtype=ember.float64))
        np.testing.assert_allclose(_np(x.grad), [7.0, 7.0])

    def test_inplace_op_reading_its_own_old_value_raises(self):
        # y.mul_(y): the multiplication saved y, which the write then changed (PyTorch raises too)
        x = _leaf([1.0, 2.0])
        y = x * 2
        y.mul_(y)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward(ember.ones(2, dtype=ember.float64))

    def test_version_counter_increments(self):
        x = ember.tensor([1.0, 2.0])
        v = x._version
        x.add_(1.0)
        x.mul_(2.0)
        assert x._version == v + 2
