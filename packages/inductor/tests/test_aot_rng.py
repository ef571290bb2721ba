"""Random ops in compiled graphs: eager mode's numbers for the same seed, masks saved for the backward."""

from __future__ import annotations

import pytest

import ember
import ember.nn.functional as F
from ember._inductor.aot import aot_function, trace_joint
from ember._inductor.aot.rng import check_backward_draws_nothing, random_nodes
from ember._inductor.exc import InductorError
from ember.testing import assert_close


def identity(gm, example_inputs):
    return gm


class Keep:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm


def _dropout_net(x, w):
    h = F.dropout(x @ w, p=0.5)
    return F.dropout(h.relu(), p=0.5).sum()


def test_compiled_dropout_gives_eager_values_and_gradients():
    x = ember.randn(6, 5)
    w = ember.randn(5, 7, requires_grad=True)
    fw, bw = Keep(), Keep()
    compiled = aot_function(_dropout_net, fw, bw)
    for seed in (0, 1, 2):  # the first call traces; later ones reuse the compiled graphs
        ember.manual_seed(seed)
        got = compiled(x, w)
        (got_grad,) = ember.autograd.grad(got, w)
        ember.manual_seed(seed)
        want = _dropout_net(x, w)
        (want_grad,) = ember.autograd.grad(want, w)
        assert_close(got, want)
        assert_close(got_grad, want_grad)
        # the generator is left where eager mode leaves it
        ember.manual_seed(seed)
        compiled(x, w)
        after_compiled = ember.rand(4)
        ember.manual_seed(seed)
        _dropout_net(x, w)
        assert_close(after_compiled, ember.rand(4))
    assert len(fw.graphs) == 1
    assert len(random_nodes(fw.graphs[0])) == 2
    assert random_nodes(bw.graphs[0]) == []


def test_tracing_draws_no_numbers():
    inputs = [ember.randn(6, 5), ember.randn(5, 7, requires_grad=True)]
    ember.manual_seed(7)
    trace_joint(_dropout_net, inputs)
    traced_then = ember.rand(3)
    ember.manual_seed(7)
    assert_close(traced_then, ember.rand(3))


def test_unused_draws_are_kept():
    def f(x):
        ember.rand(3)  # unused, but it moves the generator in eager mode
        return x + ember.rand(3)

    compiled = aot_function(f, identity)
    x = ember.zeros(3)
    ember.manual_seed(3)
    got = compiled(x)
    ember.manual_seed(3)
    assert_close(got, f(x))


def test_backward_with_a_random_op_is_refused():
    gm = trace_joint(lambda x: x * ember.rand(3), [ember.randn(3, requires_grad=True)])
    check_backward_draws_nothing(trace_joint(lambda x: x.sin(), [ember.randn(3, requires_grad=True)]))
    with pytest.raises(InductorError, match=r"random ops \(.*rand\)"):
        check_backward_draws_nothing(gm)


def test_transformer_layer_with_dropout_matches_eager():
    import copy

    from ember._inductor.aot import aot_module

    ember.manual_seed(0)
    layer = ember.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
    ref = copy.deepcopy(layer)
    compiled = aot_module(layer, identity)
    x = ember.randn(2, 5, 16)
    ember.manual_seed(1)
    got = compiled(x)
    got.square().sum().backward()
    ember.manual_seed(1)
    want = ref(x)
    want.square().sum().backward()
    assert_close(got, want)
    for (name, p), (_, q) in zip(layer.named_parameters(), ref.named_parameters()):
        assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("p", [0.8, 0.25])
def test_stochastic_depth_bernoulli_inplace_gives_eager_values(p):
    # torchvision's StochasticDepth: ``empty(...).bernoulli_(p).div_(p)``; recorded as bernoulli(x, p)
    def f(x):
        noise = ember.empty([x.shape[0], 1], dtype=x.dtype).bernoulli_(p).div_(p)
        return (x * noise).tanh()

    x = ember.randn(64, 3, requires_grad=True)
    compiled = aot_function(f, lambda gm, ex: gm)
    for seed in (0, 1):
        ember.manual_seed(seed)
        want = f(x)
        (want_grad,) = ember.autograd.grad(want.sum(), x)
        ember.manual_seed(seed)
        got = compiled(x)
        (got_grad,) = ember.autograd.grad(got.sum(), x)
        assert ember.equal(got, want) and ember.equal(got_grad, want_grad)
        assert 0 < float((got == 0).float().mean()) < 1  # some rows dropped, some kept


def test_bernoulli_inplace_with_a_tensor_probability_is_refused():
    def f(x, probs):
        return ember.empty_like(x).bernoulli_(probs) * x

    with pytest.raises(InductorError, match="in-place random op bernoulli_"):
        aot_function(f, lambda gm, ex: gm)(ember.randn(3), ember.full((3,), 0.5))
