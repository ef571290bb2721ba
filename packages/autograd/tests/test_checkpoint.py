"""``ember.utils.checkpoint``: recomputed activations give the gradients of a plain backward, in less memory."""

from __future__ import annotations

import contextlib
import gc
import weakref

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd.graph import saved_tensors_hooks
from ember.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential, set_checkpoint_early_stop

VARIANTS = [pytest.param(False, id="non_reentrant"), pytest.param(True, id="reentrant")]


def _tensor(values, requires_grad=True):
    return ember.tensor(values, dtype=ember.float64, requires_grad=requires_grad)


def _params():
    rng = np.random.default_rng(0)
    w1 = _tensor(rng.standard_normal((4, 5)))
    w2 = _tensor(rng.standard_normal((5, 3)))
    return w1, w2


def _block(x, w1, w2):
    h = (x @ w1).tanh()
    h = h * h.exp()
    return (h @ w2).sin()


def _grads(fn, tensors):
    for t in tensors:
        t.grad = None
    out = fn()
    out.sum().backward()
    return out.detach().numpy(), [t.grad.numpy().copy() for t in tensors]


@pytest.fixture
def no_cycle_collector():
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class TestGradients:
    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    def test_equal_to_plain_backward(self, use_reentrant):
        w1, w2 = _params()
        x = _tensor(np.random.default_rng(1).standard_normal((2, 4)))
        plain_out, plain = _grads(lambda: _block(x, w1, w2), [x, w1, w2])
        out, ckpt = _grads(lambda: checkpoint(_block, x, w1, w2, use_reentrant=use_reentrant), [x, w1, w2])
        np.testing.assert_allclose(out, plain_out)
        for a, b in zip(ckpt, plain):
            np.testing.assert_allclose(a, b, rtol=1e-12)

    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    def test_parameters_used_inside_get_gradients(self, use_reentrant):
        # the weights are not arguments of the checkpointed function, only captured by it
        w1, w2 = _params()
        x = _tensor(np.ones((2, 4)))
        _, plain = _grads(lambda: _block(x, w1, w2), [x, w1, w2])
        _, ckpt = _grads(lambda: checkpoint(lambda t: _block(t, w1, w2), x, use_reentrant=use_reentrant), [x, w1, w2])
        for a, b in zip(ckpt, plain):
            np.testing.assert_allclose(a, b, rtol=1e-12)

    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    def test_several_outputs_and_non_tensor_arguments(self, use_reentrant):
        def fn(a, scale, b):
            return (a * b).exp() * scale, a * a

        a = _tensor([0.5, -1.0])
        b = _tensor([2.0, 3.0])
        y, z = checkpoint(fn, a, 3.0, b, use_reentrant=use_reentrant)
        (y.sum() + z.sum()).backward()
        ab = np.array([0.5, -1.0]) * [2.0, 3.0]
        np.testing.assert_allclose(a.grad.numpy(), 3 * np.exp(ab) * [2.0, 3.0] + 2 * np.array([0.5, -1.0]))
        np.testing.assert_allclose(b.grad.numpy(), 3 * np.exp(ab) * [0.5, -1.0])

    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    def test_checkpoint_of_intermediate_and_chained(self, use_reentrant):
        x = _tensor([0.1, 0.2, 0.3])
        h = x * 2
        for _ in range(3):
            h = checkpoint(lambda t: (t * 0.5).exp(), h, use_reentrant=use_reentrant)
        h.sum().backward()
        expected = _tensor([0.1, 0.2, 0.3])
        e = expected * 2
        for _ in range(3):
            e = (e * 0.5).exp()
        e.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), expected.grad.numpy(), rtol=1e-12)

    def test_non_reentrant_supports_grad_and_inputs(self):
        w1, w2 = _params()
        x = _tensor(np.ones((2, 4)))
        (gx_plain, gw_plain) = ember.autograd.grad(_block(x, w1, w2).sum(), [x, w1])
        (gx, gw) = ember.autograd.grad(checkpoint(_block, x, w1, w2, use_reentrant=False).sum(), [x, w1])
        np.testing.assert_allclose(gx.numpy(), gx_plain.numpy(), rtol=1e-12)
        np.testing.assert_allclose(gw.numpy(), gw_plain.numpy(), rtol=1e-12)
        checkpoint(_block, x, w1, w2, use_reentrant=False).sum().backward(inputs=[w2])
        assert x.grad is None and w1.grad is None and w2.grad is not None

    def test_non_reentrant_keyword_arguments(self):
        x = _tensor([1.0, 2.0])
        y = checkpoint(lambda a, *, k: (a * k).exp(), x, k=0.5, use_reentrant=False)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 0.5 * np.exp([0.5, 1.0]))

    def test_non_reentrant_retain_graph_recomputes_each_backward(self):
        calls = []

        def fn(t):
            calls.append(1)
            return t.exp() * t

        x = _tensor([1.0, 2.0])
        y = checkpoint(fn, x, use_reentrant=False).sum()
        y.backward(retain_graph=True)
        y.backward()
        assert len(calls) == 3  # forward, then one recomputation per backward
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]) * [2.0, 3.0])

    def test_reentrant_rejects_grad_and_inputs(self):
        x = _tensor([1.0, 2.0])
        y = checkpoint(lambda t: t.exp(), x, use_reentrant=True).sum()
        with pytest.raises(RuntimeError, match="incompatible with .grad\\(\\) or passing an `inputs` parameter"):
            ember.autograd.grad(y, x)
        y = checkpoint(lambda t: t.exp(), x, use_reentrant=True).sum()
        with pytest.raises(RuntimeError, match="use_reentrant=False"):
            y.backward(inputs=[x])

    def test_reentrant_rejects_keyword_arguments(self):
        with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
            checkpoint(lambda a, k: a * k, _tensor([1.0]), k=2.0, use_reentrant=True)

    def test_reentrant_warns_when_no_input_requires_grad(self):
        w = _tensor([2.0])
        x = _tensor([1.0], requires_grad=False)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            y = checkpoint(lambda t: t * w, x, use_reentrant=True)
        assert not y.requires_grad  # PyTorch's reentrant pitfall: w's gradient is lost

    def test_non_reentrant_with_no_input_requiring_grad_still_reaches_parameters(self):
        w = _tensor([2.0])
        x = _tensor([3.0], requires_grad=False)
        checkpoint(lambda t: (t * w).exp(), x, use_reentrant=False).backward()
        np.testing.assert_allclose(w.grad.numpy(), [3 * np.exp(6.0)])

    def test_use_reentrant_omitted_warns(self):
        x = _tensor([1.0])
        with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
            y = checkpoint(lambda t: t * 2, x)
        y.backward()
        assert x.grad.tolist() == [2.0]

    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    def test_under_no_grad_just_runs(self, use_reentrant):
        x = _tensor([1.0, 2.0])
        with ember.no_grad():
            y = checkpoint(lambda t: t.exp(), x, use_reentrant=use_reentrant)
        assert not y.requires_grad
        np.testing.assert_allclose(y.numpy(), np.exp([1.0, 2.0]))

    def test_nested_non_reentrant(self):
        def inner(t):
            return (t * 1.5).exp()

        def outer(t):
            return checkpoint(inner, t * t, use_reentrant=False) * t

        x = _tensor([0.3, -0.2])
        checkpoint(outer, x, use_reentrant=False).sum().backward()
        xs = np.array([0.3, -0.2])
        # d/dx [exp(1.5 x^2) x] = exp(1.5 x^2) (3 x^2 + 1)
        np.testing.assert_allclose(x.grad.numpy(), np.exp(1.5 * xs**2) * (3 * xs**2 + 1))

    # the outer forward runs without grad, so the inner checkpoint sees no input requiring grad (PyTorch warns too)
    @pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True")
    def test_nested_reentrant(self):
        def inner(t):
            return (t * 1.5).exp()

        def outer(t):
            return checkpoint(inner, t * t, use_reentrant=True) * t

        x = _tensor([0.3, -0.2])
        checkpoint(outer, x, use_reentrant=True).sum().backward()
        xs = np.array([0.3, -0.2])
        np.testing.assert_allclose(x.grad.numpy(), np.exp(1.5 * xs**2) * (3 * xs**2 + 1))

    def test_input_modified_in_place_after_forward_raises(self):
        x = _tensor([1.0, 2.0])
        h = x * 1
        y = checkpoint(lambda t: t.exp(), h, use_reentrant=False)
        h.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


class TestRandomness:
    @staticmethod
    def _dropout_block(t, w):
        return F.dropout((t * w).exp(), p=0.5, training=True) * w

    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    def test_dropout_mask_is_reproduced(self, use_reentrant):
        rng = np.random.default_rng(2)
        x = _tensor(rng.standard_normal(64))
        w = _tensor(rng.standard_normal(64))
        ember.manual_seed(123)
        plain_out, plain = _grads(lambda: self._dropout_block(x, w), [x, w])
        ember.manual_seed(123)
        out, ckpt = _grads(lambda: checkpoint(self._dropout_block, x, w, use_reentrant=use_reentrant), [x, w])
        np.testing.assert_allclose(out, plain_out)
        assert (out == 0).sum() > 10  # dropout did drop
        for a, b in zip(ckpt, plain):
            np.testing.assert_allclose(a, b, rtol=1e-12)

    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    def test_backward_does_not_disturb_the_generator(self, use_reentrant):
        x = _tensor(np.ones(16))
        w = _tensor(np.ones(16))
        ember.manual_seed(5)
        y = checkpoint(self._dropout_block, x, w, use_reentrant=use_reentrant)
        state = ember.get_rng_state()
        y.sum().backward()
        assert ember.get_rng_state().tolist() == state.tolist()

    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    def test_without_preserving_the_state_masks_differ(self, use_reentrant):
        x = _tensor(np.ones(256))
        w = _tensor(np.ones(256))
        ember.manual_seed(7)
        _, plain = _grads(lambda: self._dropout_block(x, w), [x, w])
        ember.manual_seed(7)
        _, ckpt = _grads(
            lambda: checkpoint(self._dropout_block, x, w, use_reentrant=use_reentrant, preserve_rng_state=False),
            [x, w],
        )
        assert not np.allclose(ckpt[0], plain[0])


class TestMemory:
    @staticmethod
    def _count_saved(fn):
        count = [0]

        def pack(t):
            count[0] += 1
            return t

        with saved_tensors_hooks(pack, lambda t: t):
            out = fn()
        return count[0], out

    def test_plain_block_saves_activations(self):
        w1, w2 = _params()
        x = _tensor(np.ones((2, 4)))
        n, _ = self._count_saved(lambda: _block(x, w1, w2))
        assert n >= 6

    def test_non_reentrant_saves_nothing_outside(self):
        w1, w2 = _params()
        x = _tensor(np.ones((2, 4)))
        n, out = self._count_saved(lambda: checkpoint(_block, x, w1, w2, use_reentrant=False))
        assert n == 0
        out.sum().backward()  # and the gradients are still there
        assert x.grad is not None and w2.grad is not None

    def test_reentrant_saves_only_its_inputs(self):
        w1, w2 = _params()
        x = _tensor(np.ones((2, 4)))
        n, out = self._count_saved(lambda: checkpoint(_block, x, w1, w2, use_reentrant=True))
        assert n == 3  # x, w1, w2 themselves, no activation
        out.sum().backward()
        assert w1.grad is not None

    @pytest.mark.parametrize("use_reentrant", [None, *VARIANTS])
    def test_intermediate_activations_are_freed_after_forward(self, use_reentrant, no_cycle_collector):
        refs = []

        def fn(t):
            h1 = t.exp()
            h2 = h1 * h1
            refs.extend([weakref.ref(h1), weakref.ref(h2)])
            return h2.sin()

        x = _tensor(np.linspace(0.0, 1.0, 8))
        if use_reentrant is None:  # the plain block: its activations stay alive for backward
            y = fn(x)
            assert all(r() is not None for r in refs)
        else:
            y = checkpoint(fn, x, use_reentrant=use_reentrant)
            assert all(r() is None for r in refs)
        y.sum().backward()
        xs = np.linspace(0.0, 1.0, 8)
        np.testing.assert_allclose(x.grad.numpy(), np.cos(np.exp(2 * xs)) * 2 * np.exp(2 * xs))

    def test_recomputed_activations_are_released_after_backward(self, no_cycle_collector):
        refs = []

        def fn(t):
            h = t.exp()
            refs.append(weakref.ref(h))
            return h * h

        x = _tensor([1.0, 2.0])
        y = checkpoint(fn, x, use_reentrant=False)
        y.sum().backward()
        assert len(refs) == 2 and all(r() is None for r in refs)


class TestRecomputationChecks:
    def test_different_metadata_raises(self):
        calls = []

        def fn(t):
            calls.append(1)
            n = 2 if len(calls) == 1 else 1
            return (t[:n] * t[:n]).sum()

        x = _tensor([1.0, 2.0, 3.0])
        y = checkpoint(fn, x, use_reentrant=False)
        with pytest.raises(CheckpointError, match="different metadata than during the forward pass"):
            y.backward()

    @pytest.mark.parametrize("check", ["default", "none"])
    def test_determinism_check_none_skips_it(self, check):
        # the recomputation computes in float64 what the forward computed in float32: same values, other dtype
        calls = []

        def fn(t):
            calls.append(1)
            h = t.to(ember.float32 if len(calls) == 1 else ember.float64)
            return (h * h).sum()

        x = _tensor([1.0, 2.0, 3.0])
        y = checkpoint(fn, x, use_reentrant=False, determinism_check=check)
        if check == "default":
            with pytest.raises(CheckpointError, match="different metadata"):
                y.backward()
        else:
            y.backward()
            np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])

    def test_fewer_saved_tensors_raises(self):
        calls = []

        def fn(t):
            calls.append(1)
            h = t.exp()
            return h * h if len(calls) == 1 else h + h

        x = _tensor([1.0])
        y = checkpoint(fn, x, use_reentrant=False)
        with pytest.raises(CheckpointError, match="A different number of tensors was saved"):
            y.backward()

    def test_unknown_determinism_check(self):
        with pytest.raises(ValueError, match="determinism_check should be one of"):
            checkpoint(lambda t: t, _tensor([1.0]), use_reentrant=False, determinism_check="strict")

    def test_early_stop(self):
        after_last_save = []

        def fn(t):
            h = t * t
            after_last_save.append(1)
            return h + 1  # add saves nothing

        x = _tensor([1.0])
        checkpoint(fn, x, use_reentrant=False).backward()
        assert len(after_last_save) == 1  # the recomputation stopped after the last saved tensor
        with set_checkpoint_early_stop(False):
            y = checkpoint(fn, x, use_reentrant=False)
        y.backward()
        assert len(after_last_save) == 3
        assert x.grad.tolist() == [4.0]

    def test_context_fn(self):
        entered = []

        @contextlib.contextmanager
        def tag(name):
            entered.append(name)
            yield

        x = _tensor([1.0])
        y = checkpoint(lambda t: t.exp(), x, use_reentrant=False, context_fn=lambda: (tag("fwd"), tag("recompute")))
        assert entered == ["fwd"]
        y.backward()
        assert entered == ["fwd", "recompute"]
        with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
            checkpoint(lambda t: t, x, use_reentrant=True, context_fn=lambda: (tag("a"), tag("b")))


class TestSequential:
    @staticmethod
    def _layers():
        ws = [_tensor(np.random.default_rng(i).standard_normal(3)) for i in range(6)]
        layers = [lambda t, w=w: (t * w).tanh() for w in ws]
        return ws, layers

    @pytest.mark.parametrize("use_reentrant", VARIANTS)
    @pytest.mark.parametrize("segments", [1, 2, 3, 6])
    def test_equal_to_plain(self, use_reentrant, segments):
        ws, layers = self._layers()
        x = _tensor([0.5, -0.5, 1.0])

        def plain():
            h = x
            for f in layers:
                h = f(h)
            return h

        out_plain, g_plain = _grads(plain, [x, *ws])
        out, g = _grads(lambda: checkpoint_sequential(layers, segments, x, use_reentrant=use_reentrant), [x, *ws])
        np.testing.assert_allclose(out, out_plain)
        for a, b in zip(g, g_plain):
            np.testing.assert_allclose(a, b, rtol=1e-12)

    def test_module_with_children(self):
        class Seq:
            def __init__(self, layers):
                self._layers = layers

            def children(self):
                return iter(self._layers)

        ws, layers = self._layers()
        x = _tensor([0.5, -0.5, 1.0])
        y = checkpoint_sequential(Seq(layers), 2, x, use_reentrant=False)
        h = x
        for f in layers:
            h = f(h)
        np.testing.assert_allclose(y.detach().numpy(), h.detach().numpy())

    def test_unexpected_keyword(self):
        with pytest.raises(ValueError, match="Unexpected keyword arguments: foo"):
            checkpoint_sequential([lambda t: t], 1, _tensor([1.0]), use_reentrant=False, foo=1)


def test_missing_autograd_raises_naming_the_distribution(monkeypatch):
    from ember import _extensions

    monkeypatch.setattr(_extensions, "autograd", _extensions._AutogradSlot())
    with pytest.raises(_extensions.MissingDistributionError, match="ember-autograd"):
        checkpoint(lambda t: t, ember.tensor([1.0]), use_reentrant=False)
