"""Hooks: tensor hooks, ``retain_grad``, post-accumulate hooks, node hooks and saved-tensor hooks."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks


def _leaf(values=(1.0, 2.0)):
    return ember.tensor(list(values), dtype=ember.float64, requires_grad=True)


def _ones(n=2):
    return ember.ones(n, dtype=ember.float64)


# ---------------------------------------------------------------- Tensor.register_hook


class TestTensorHooks:
    def test_leaf_hook_sees_and_replaces_gradient(self):
        x = _leaf()
        seen = []

        def hook(g):
            seen.append(g.tolist())
            return g * 10

        x.register_hook(hook)
        (x * 3).backward(_ones())
        assert seen == [[3.0, 3.0]]
        assert x.grad.tolist() == [30.0, 30.0]

    def test_hook_returning_none_keeps_gradient(self):
        x = _leaf()
        x.register_hook(lambda g: None)
        (x * 3).backward(_ones())
        assert x.grad.tolist() == [3.0, 3.0]

    def test_non_leaf_hook_changes_what_flows_on(self):
        x = _leaf()
        y = x * 3
        y.register_hook(lambda g: g * 2)
        (y * y).backward(_ones())  # dL/dy = 2y = [6, 12], doubled, times 3
        assert x.grad.tolist() == [36.0, 72.0]
        with pytest.warns(UserWarning, match="not a leaf Tensor"):  # PyTorch warns on a non-leaf's .grad too
            assert y.grad is None  # hooks do not retain

    def test_hooks_run_in_registration_order_and_chain(self):
        x = _leaf()
        seen = []

        def first(g):
            seen.append(("first", g.tolist()))
            return g * 2

        def second(g):
            seen.append(("second", g.tolist()))
            return g + 1

        x.register_hook(first)
        x.register_hook(second)
        (x * 3).backward(_ones())
        assert seen == [("first", [3.0, 3.0]), ("second", [6.0, 6.0])]
        assert x.grad.tolist() == [7.0, 7.0]

    def test_handle_remove(self):
        x = _leaf()
        calls = []
        handle = x.register_hook(lambda g: calls.append(1))
        other = x.register_hook(lambda g: g * 2)
        handle.remove()
        handle.remove()  # idempotent
        (x * 3).backward(_ones())
        assert calls == []
        assert x.grad.tolist() == [6.0, 6.0]
        other.remove()
        x.grad = None
        (x * 3).backward(_ones())
        assert x.grad.tolist() == [3.0, 3.0]

    def test_handle_as_context_manager(self):
        x = _leaf()
        with x.register_hook(lambda g: g * 0):
            (x * 3).backward(_ones())
        assert x.grad.tolist() == [0.0, 0.0]
        (x * 3).backward(_ones())
        assert x.grad.tolist() == [3.0, 3.0]

    def test_non_leaf_hook_on_one_output_of_multi_output_node(self):
        x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ember.float64, requires_grad=True)
        a, b = (x * 1).unbind(0)
        b.register_hook(lambda g: g * 100)
        (a + b).backward(_ones())
        assert x.grad.tolist() == [[1.0, 1.0], [100.0, 100.0]]

    def test_leaf_hook_applies_to_autograd_grad(self):
        x = _leaf()
        x.register_hook(lambda g: g * 10)
        (g,) = ember.autograd.grad(x * x, x, _ones())
        assert g.tolist() == [20.0, 40.0]

    def test_non_leaf_hook_applies_to_captured_gradient(self):
        x = _leaf()
        y = x * 2
        y.register_hook(lambda g: g + 1)
        (g,) = ember.autograd.grad(y * y, y, _ones())
        assert g.tolist() == [5.0, 9.0]

    def test_tensor_hook_runs_before_node_prehook(self):
        x = _leaf()
        y = x * 3
        seen = []
        y.grad_fn.register_prehook(lambda grads: seen.append(("node", grads[0].tolist())))

        def tensor_hook(g):
            seen.append(("tensor", g.tolist()))
            return g * 2

        y.register_hook(tensor_hook)
        y.backward(_ones())
        assert seen == [("tensor", [1.0, 1.0]), ("node", [2.0, 2.0])]
        assert x.grad.tolist() == [6.0, 6.0]

    def test_hook_on_tensor_not_requiring_grad_raises(self):
        with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
            ember.tensor([1.0]).register_hook(lambda g: g)


# ---------------------------------------------------------------- retain_grad


class TestRetainGrad:
    def test_non_leaf_keeps_grad(self):
        x = _leaf()
        y = x * 3
        y.retain_grad()
        assert y.retains_grad and not x.retains_grad
        (y * y).backward(_ones())
        assert y.grad.tolist() == [6.0, 12.0]
        assert x.grad.tolist() == [18.0, 36.0]

    def test_accumulates_over_backward_calls(self):
        x = _leaf()
        y = x * 3
        y.retain_grad()
        y.backward(_ones(), retain_graph=True)
        y.backward(_ones())
        assert y.grad.tolist() == [2.0, 2.0]

    @pytest.mark.parametrize("retain_first", [True, False])
    def test_sees_gradient_after_tensor_hooks_in_any_order(self, retain_first):
        # PyTorch runs retain_grad after the tensor's other hooks, whatever the registration order
        x = _leaf()
        y = x * 3
        if retain_first:
            y.retain_grad()
            y.register_hook(lambda g: g * 10)
        else:
            y.register_hook(lambda g: g * 10)
            y.retain_grad()
        (y * y).backward(_ones())
        assert y.grad.tolist() == [60.0, 120.0]
        assert x.grad.tolist() == [180.0, 360.0]

    def test_on_leaf_is_a_no_op(self):
        x = _leaf()
        x.retain_grad()
        (x * 2).backward(_ones())
        assert x.grad.tolist() == [2.0, 2.0]

    def test_without_requires_grad_raises(self):
        with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
            ember.tensor([1.0]).retain_grad()

    def test_retained_grad_is_not_a_graph_without_create_graph(self):
        x = _leaf()
        y = x * 3
        y.retain_grad()
        (y * y).backward(_ones())
        assert not y.grad.requires_grad


# ---------------------------------------------------------------- post-accumulate hooks


class TestPostAccumulateGradHook:
    def test_called_with_the_tensor_after_accumulation(self):
        x = _leaf()
        seen = []
        x.register_hook(lambda g: seen.append(("pre", g.tolist())))
        x.register_post_accumulate_grad_hook(lambda t: seen.append(("post", t is x, t.grad.tolist())))
        (x * 3).backward(_ones())
        assert seen == [("pre", [3.0, 3.0]), ("post", True, [3.0, 3.0])]
        (x * 3).backward(_ones())
        assert seen[-1] == ("post", True, [6.0, 6.0])

    def test_not_called_by_autograd_grad(self):
        x = _leaf()
        calls = []
        x.register_post_accumulate_grad_hook(lambda t: calls.append(1))
        ember.autograd.grad(x * 3, x, _ones())
        assert calls == []

    def test_can_step_the_parameter(self):
        # the optimizer-in-backward pattern: update the leaf in place as soon as its gradient is ready
        x = _leaf()

        def sgd(t):
            with ember.no_grad():
                t.sub_(t.grad * 0.5)
            t.grad = None

        x.register_post_accumulate_grad_hook(sgd)
        (x * x).backward(_ones())
        assert x.tolist() == [0.0, 0.0]
        assert x.grad is None

    def test_remove(self):
        x = _leaf()
        calls = []
        handle = x.register_post_accumulate_grad_hook(lambda t: calls.append(1))
        handle.remove()
        (x * 3).backward(_ones())
        assert calls == []

    def test_non_leaf_raises(self):
        y = _leaf() * 2
        with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
            y.register_post_accumulate_grad_hook(lambda t: None)

    def test_without_requires_grad_raises(self):
        with pytest.raises(RuntimeError, match="doesn't require gradient"):
            ember.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)


# ---------------------------------------------------------------- node hooks


class TestNodeHooks:
    def test_prehook_sees_and_replaces_grad_outputs(self):
        x = _leaf()
        y = x * 3
        seen = []

        def pre(grad_outputs):
            seen.append([g.tolist() for g in grad_outputs])
            return (grad_outputs[0] * 2,)

        y.grad_fn.register_prehook(pre)
        y.backward(_ones())
        assert seen == [[[1.0, 1.0]]]
        assert x.grad.tolist() == [6.0, 6.0]

    def test_hook_sees_inputs_and_outputs_and_replaces_inputs(self):
        x = _leaf()
        y = x * 3  # the Python scalar 3 gets no gradient: None, as in PyTorch
        seen = []

        def post(grad_inputs, grad_outputs):
            seen.append(([None if g is None else g.tolist() for g in grad_inputs], [g.tolist() for g in grad_outputs]))
            return (grad_inputs[0] + 100, *grad_inputs[1:])

        y.grad_fn.register_hook(post)
        y.backward(_ones())
        assert seen == [([[3.0, 3.0], None], [[1.0, 1.0]])]
        assert x.grad.tolist() == [103.0, 103.0]

    def test_hook_returning_none_keeps_result(self):
        x = _leaf()
        y = x * 3
        y.grad_fn.register_hook(lambda gi, go: None)
        y.grad_fn.register_prehook(lambda go: None)
        y.backward(_ones())
        assert x.grad.tolist() == [3.0, 3.0]

    def test_order_and_remove(self):
        x = _leaf()
        y = x * 3
        order = []
        a = y.grad_fn.register_prehook(lambda go: order.append("pre-a"))
        y.grad_fn.register_prehook(lambda go: order.append("pre-b"))
        y.grad_fn.register_hook(lambda gi, go: order.append("post"))
        y.backward(_ones(), retain_graph=True)
        assert order == ["pre-a", "pre-b", "post"]
        a.remove()
        order.clear()
        y.backward(_ones())
        assert order == ["pre-b", "post"]

    def test_prehook_of_leaf_accumulator_is_not_needed_for_tensor_hooks(self):
        # a hook on a node deep in the graph runs once per backward
        x = _leaf()
        y = x.exp()
        z = y * y
        calls = []
        y.grad_fn.register_hook(lambda gi, go: calls.append(gi[0].tolist()))
        z.backward(_ones())
        np.testing.assert_allclose(calls[0], 2 * np.exp([2.0, 4.0]))
        assert len(calls) == 1


# ---------------------------------------------------------------- saved-tensor hooks


class TestSavedTensorsHooks:
    def test_pack_and_unpack_are_called_with_the_right_values(self):
        packed = []
        unpacked = []

        def pack(t):
            packed.append(t.detach().tolist())
            return ("boxed", t.detach().numpy().copy())

        def unpack(box):
            tag, array = box
            assert tag == "boxed"
            unpacked.append(array.tolist())
            return ember.tensor(array)

        x = _leaf()
        with saved_tensors_hooks(pack, unpack):
            y = x.exp()  # saves its result
            z = y * x  # saves y and x
        ex = np.exp([1.0, 2.0]).tolist()
        assert sorted(packed) == sorted([ex, ex, [1.0, 2.0]])
        assert unpacked == []
        z.backward(_ones())
        assert sorted(unpacked) == sorted(packed)
        # d/dx (x e^x) = e^x (1 + x)
        np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]) * [2.0, 3.0])

    def test_hooks_apply_only_inside_the_block(self):
        calls = []
        x = _leaf()
        with saved_tensors_hooks(lambda t: calls.append("pack") or t, lambda t: calls.append("unpack") or t):
            y = x * x
        z = y * y
        z.backward(_ones())
        assert calls == ["pack", "pack", "unpack", "unpack"]
        assert x.grad.tolist() == [4.0, 32.0]

    def test_innermost_hooks_win(self):
        outer, inner = [], []
        x = _leaf()
        with saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
            with saved_tensors_hooks(lambda t: inner.append(1) or t, lambda t: t):
                y = x * x
        y.backward(_ones())
        assert inner == [1, 1] and outer == []

    def test_unpack_may_change_values(self):
        # what unpack returns is what the formula reads
        x = _leaf()
        with saved_tensors_hooks(lambda t: t.detach(), lambda t: t * 0 + 10):
            y = x * ember.tensor([5.0, 5.0], dtype=ember.float64)
        y.backward(_ones())
        assert x.grad.tolist() == [10.0, 10.0]

    def test_save_on_cpu(self):
        x = _leaf()
        with save_on_cpu():
            y = x.exp() * x
        y.backward(_ones())
        np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]) * [2.0, 3.0])

    def test_disable_saved_tensors_hooks(self):
        with disable_saved_tensors_hooks("no hooks here"):
            with pytest.raises(RuntimeError, match="no hooks here"):
                with saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
        with saved_tensors_hooks(lambda t: t, lambda t: t):  # allowed again outside
            pass

    def test_custom_function_saved_tensors_use_hooks(self):
        class Square(ember.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * 2 * x

        calls = []
        x = _leaf()
        with saved_tensors_hooks(lambda t: calls.append("pack") or t, lambda t: calls.append("unpack") or t):
            y = Square.apply(x)
        y.backward(_ones())
        assert calls == ["pack", "unpack"]
        assert x.grad.tolist() == [2.0, 4.0]
