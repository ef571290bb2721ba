"""Custom :class:`ember.autograd.Function`: both styles and everything ``ctx`` offers."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import ember
from ember.autograd import Function, once_differentiable


def _leaf(values=(1.0, 2.0)):
    return ember.tensor(list(values), dtype=ember.float64, requires_grad=True)


def _ones(n=2):
    return ember.ones(n, dtype=ember.float64)


class Cube(Function):
    """x**3 with ctx-first forward; backward written in ember ops (differentiable)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x


class ScaleSetup(Function):
    """y = x * k, in the forward + setup_context style."""

    @staticmethod
    def forward(x, k):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, k = inputs
        ctx.k = k

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.k, None


class TestStyles:
    def test_ctx_style(self):
        x = _leaf([2.0, -1.0])
        y = Cube.apply(x)
        assert y.tolist() == [8.0, -1.0]
        assert y.requires_grad and y.grad_fn.name() == "CubeBackward"
        assert type(y.grad_fn).__name__ == "CubeBackward"
        y.backward(_ones())
        assert x.grad.tolist() == [12.0, 3.0]

    def test_setup_context_style(self):
        x = _leaf([2.0, -1.0])
        y = ScaleSetup.apply(x, 4.0)
        assert y.tolist() == [8.0, -4.0]
        y.backward(_ones())
        assert x.grad.tolist() == [4.0, 4.0]

    def test_next_functions_point_at_tensor_inputs(self):
        x = _leaf()
        y = ScaleSetup.apply(x * 2, 3.0)
        ((mul, nr),) = y.grad_fn.next_functions
        assert mul.name() == "MulBackward0" and nr == 0

    def test_forward_runs_without_recording(self):
        recorded = []

        class Probe(Function):
            @staticmethod
            def forward(ctx, x):
                inner = x * 2
                recorded.append((ember.is_grad_enabled(), inner.requires_grad))
                return inner

            @staticmethod
            def backward(ctx, grad):
                return grad * 2

        Probe.apply(_leaf())
        assert recorded == [(False, False)]

    def test_no_input_requiring_grad_records_nothing(self):
        y = Cube.apply(ember.tensor([2.0], dtype=ember.float64))
        assert not y.requires_grad and y.grad_fn is None

    def test_under_no_grad_records_nothing(self):
        with ember.no_grad():
            y = Cube.apply(_leaf())
        assert not y.requires_grad

    def test_cannot_instantiate(self):
        with pytest.raises(RuntimeError, match="apply"):
            Cube()

    def test_keyword_and_non_tensor_arguments(self):
        x = _leaf()
        y = ScaleSetup.apply(x, k=5.0)
        y.backward(_ones())
        assert x.grad.tolist() == [5.0, 5.0]

    def test_multiple_outputs(self):
        class SinCos(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2, x * x

            @staticmethod
            def backward(ctx, g1, g2):
                (x,) = ctx.saved_tensors
                return g1 * 2 + g2 * 2 * x

        x = _leaf([1.0, 3.0])
        a, b = SinCos.apply(x)
        assert a.grad_fn is b.grad_fn
        (a + b).backward(_ones())
        assert x.grad.tolist() == [4.0, 8.0]

    def test_input_returned_as_is_becomes_new_tensor(self):
        class Identity(Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad * 5

        x = _leaf()
        y = Identity.apply(x)
        assert y is not x and x.is_leaf and y.grad_fn is not None
        y.backward(_ones())
        assert x.grad.tolist() == [5.0, 5.0]


class TestContext:
    def test_needs_input_grad(self):
        seen = []

        class Probe(Function):
            @staticmethod
            def forward(ctx, a, b, k):
                seen.append(ctx.needs_input_grad)
                return a * b * k

            @staticmethod
            def backward(ctx, grad):
                return None, None, None

        a = _leaf()
        b = ember.tensor([1.0, 1.0], dtype=ember.float64)
        Probe.apply(a, b, 2.0)
        Probe.apply(b, a, 2.0)
        assert seen == [(True, False, False), (False, True, False)]

    def test_save_for_backward_inputs_outputs_and_none(self):
        class ExpLike(Function):
            @staticmethod
            def forward(ctx, x):
                out = x.exp()
                ctx.save_for_backward(None, out, x)
                return out

            @staticmethod
            def backward(ctx, grad):
                nothing, out, x = ctx.saved_tensors
                assert nothing is None
                return grad * out

        x = _leaf([0.0, 1.0])
        ExpLike.apply(x).backward(_ones())
        np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0]))

    def test_save_for_backward_rejects_non_tensors(self):
        class Bad(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x * 2

        with pytest.raises(TypeError, match="save_for_backward can only save tensors"):
            Bad.apply(_leaf())

    def test_saved_output_does_not_keep_graph_alive(self):
        class ExpLike(Function):
            @staticmethod
            def forward(ctx, x):
                out = x.exp()
                ctx.save_for_backward(out)
                return out

            @staticmethod
            def backward(ctx, grad):
                (out,) = ctx.saved_tensors
                return grad * out

        gc.collect()
        gc.disable()
        try:
            y = ExpLike.apply(_leaf())
            node = weakref.ref(y.grad_fn)
            del y
            assert node() is None
        finally:
            gc.enable()

    def test_saved_tensors_after_backward_raise(self):
        x = _leaf()
        y = Cube.apply(x)
        y.backward(_ones())
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            _ = y.grad_fn.saved_tensors

    def test_saved_tensor_modified_in_place_raises(self):
        x = _leaf()
        h = x * 1
        y = Cube.apply(h)
        h.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward(_ones())

    def test_mark_dirty(self):
        class AddOneInPlace(Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1.0)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad * 2

        x = _leaf()
        h = x * 1
        out = AddOneInPlace.apply(h)
        assert out is h
        assert h.tolist() == [2.0, 3.0]
        assert h.grad_fn.name() == "AddOneInPlaceBackward"
        h.backward(_ones())
        assert x.grad.tolist() == [2.0, 2.0]

    def test_mark_dirty_on_leaf_raises(self):
        class AddOneInPlace(Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1.0)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad

        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            AddOneInPlace.apply(_leaf())

    def test_mark_non_differentiable(self):
        received = []

        class ValuesAndIndex(Function):
            @staticmethod
            def forward(ctx, x):
                index = ember.tensor([1.0, 0.0], dtype=ember.float64)
                ctx.mark_non_differentiable(index)
                return x * 2, index

            @staticmethod
            def backward(ctx, g_values, g_index):
                received.append(g_index.tolist())
                return g_values * 2

        x = _leaf()
        values, index = ValuesAndIndex.apply(x)
        assert values.requires_grad and not index.requires_grad
        values.backward(_ones())
        assert received == [[0.0, 0.0]]  # materialized as zeros
        assert x.grad.tolist() == [2.0, 2.0]

    def test_integer_output_gets_integer_zeros(self):
        received = []

        class WithIndex(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, ember.tensor([1, 0])

            @staticmethod
            def backward(ctx, g_values, g_index):
                received.append((g_index.dtype, g_index.tolist()))
                return g_values * 2

        x = _leaf()
        values, index = WithIndex.apply(x)
        assert not index.requires_grad
        values.backward(_ones())
        assert received == [(ember.int64, [0, 0])]

    def test_setup_context_sees_keyword_and_default_arguments_positionally(self):
        seen = []

        class Scale(Function):
            @staticmethod
            def forward(x, k, offset=1.0):
                return x * k + offset

            @staticmethod
            def setup_context(ctx, inputs, output):
                seen.append(len(inputs))
                ctx.k = inputs[1]

            @staticmethod
            def backward(ctx, grad):
                return grad * ctx.k, None, None

        x = _leaf()
        y = Scale.apply(x, k=4.0)
        assert seen == [3] and y.tolist() == [5.0, 9.0]
        y.backward(_ones())
        assert x.grad.tolist() == [4.0, 4.0]

    @pytest.mark.parametrize("materialize", [True, False])
    def test_set_materialize_grads(self, materialize):
        received = []

        class Two(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                received.append(None if g2 is None else g2.tolist())
                return g1 * 2 if g2 is None else g1 * 2 + g2 * 3

        x = _leaf()
        first, _ = Two.apply(x)
        first.backward(_ones())
        assert received == [[0.0, 0.0] if materialize else None]
        assert x.grad.tolist() == [2.0, 2.0]

    def test_attributes_on_ctx(self):
        class Keep(Function):
            @staticmethod
            def forward(ctx, x, scale):
                ctx.scale = scale
                ctx.shape = tuple(x.shape)
                return x * scale

            @staticmethod
            def backward(ctx, grad):
                assert ctx.shape == (2,)
                return grad * ctx.scale, None

        x = _leaf()
        Keep.apply(x, 7.0).backward(_ones())
        assert x.grad.tolist() == [7.0, 7.0]


class TestBackwardResults:
    def test_wrong_number_of_gradients(self):
        class TooMany(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad, grad

        class TooFew(Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, grad):
                return grad

        with pytest.raises(RuntimeError, match=r"function TooManyBackward returned an incorrect number of gradients "):
            TooMany.apply(_leaf()).backward(_ones())
        with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients \(expected 2, got 1\)"):
            TooFew.apply(_leaf(), 2.0).backward(_ones())

    def test_extra_none_gradients_are_allowed(self):
        class ExtraNone(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad * 2, None

        x = _leaf()
        ExtraNone.apply(x).backward(_ones())
        assert x.grad.tolist() == [2.0, 2.0]

    def test_gradient_for_non_tensor_input_raises(self):
        class Bad(Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, grad):
                return grad, grad

        with pytest.raises(RuntimeError, match="returned a gradient different than None at position 2"):
            Bad.apply(_leaf(), 2.0).backward(_ones())

    def test_gradient_of_wrong_shape_raises(self):
        class Bad(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return ember.ones(3, dtype=ember.float64)

        with pytest.raises(
            RuntimeError, match=r"returned an invalid gradient at index 0 - got \[3\] but expected shape"
        ):
            Bad.apply(_leaf()).backward(_ones())

    def test_broadcastable_gradient_is_summed(self):
        class Bcast(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return ember.ones(3, 2, dtype=ember.float64)

        x = _leaf()
        Bcast.apply(x).backward(_ones())
        assert x.grad.tolist() == [3.0, 3.0]

    def test_gradient_for_input_not_requiring_grad_is_dropped(self):
        class Both(Function):
            @staticmethod
            def forward(ctx, a, b):
                return a * b

            @staticmethod
            def backward(ctx, grad):
                return grad * 10, grad * 20

        a = _leaf()
        b = ember.tensor([1.0, 1.0], dtype=ember.float64)
        Both.apply(a, b).backward(_ones())
        assert a.grad.tolist() == [10.0, 10.0] and b.grad is None


class TestHigherOrder:
    def test_double_backward_through_differentiable_backward(self):
        x = _leaf([2.0, -1.0])
        (g,) = ember.autograd.grad(Cube.apply(x), x, _ones(), create_graph=True)  # 3x^2
        assert g.requires_grad
        (gg,) = ember.autograd.grad(g, x, _ones())  # 6x
        assert gg.tolist() == [12.0, -6.0]

    def test_gradgradcheck(self):
        x = _leaf([0.5, -1.5])
        assert ember.autograd.gradcheck(Cube.apply, (x,))
        assert ember.autograd.gradgradcheck(Cube.apply, (x,))

    def test_once_differentiable_first_order_works(self):
        class Double(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            @once_differentiable
            def backward(ctx, grad):
                assert not ember.is_grad_enabled()
                return grad * 2

        x = _leaf()
        Double.apply(x).backward(_ones())
        assert x.grad.tolist() == [2.0, 2.0]

    def test_once_differentiable_errors_on_double_backward(self):
        class Double(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            @once_differentiable
            def backward(ctx, grad):
                return grad * 2

        x = _leaf()
        y = Double.apply(x)
        z = y * y  # the gradient reaching Double's backward (2y) requires grad under create_graph
        (g,) = ember.autograd.grad(z, x, _ones(), create_graph=True)
        assert g.requires_grad
        assert g.tolist() == [8.0, 16.0]
        with pytest.raises(
            RuntimeError, match="trying to differentiate twice a function that was marked with @once_differentiable"
        ):
            ember.autograd.grad(g, x, _ones())

    def test_once_differentiable_without_graph_gradients_gives_constant(self):
        class Double(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            @once_differentiable
            def backward(ctx, grad):
                return grad * 2

        x = _leaf()
        (g,) = ember.autograd.grad(Double.apply(x), x, _ones(), create_graph=True)
        assert not g.requires_grad  # the incoming gradient (ones) needs no grad, as in PyTorch
