"""Functionalization: mutations become functional ops, inputs are written back, as eager mode has them."""

from __future__ import annotations

import copy

import pytest

import ember
from ember._inductor.aot import aot_function, aot_module, trace_forward, trace_joint
from ember._inductor.exc import InductorError
from ember.testing import assert_close


def identity(gm, example_inputs):
    return gm


def _inplace_targets(gm):
    return [n.target.name for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "kind", "") == "inplace"]


def _run_both(fn, *args):
    """``fn`` compiled (identity compilers) and eager on separate clones; returns both results and inputs."""
    compiled_args = [a.clone() if isinstance(a, ember.Tensor) else a for a in args]
    eager_args = [a.clone() if isinstance(a, ember.Tensor) else a for a in args]
    got = aot_function(fn, identity)(*compiled_args)
    want = fn(*eager_args)
    return got, want, compiled_args, eager_args


def test_inplace_on_intermediate_is_functional():
    def f(x):
        y = x * 2
        y.add_(1)
        y.relu_()
        return y

    gm = trace_forward(f, [ember.randn(3, 4)])
    assert _inplace_targets(gm) == []
    got, want, _, _ = _run_both(f, ember.randn(3, 4))
    assert_close(got, want)


def test_write_to_input_is_copied_back_to_the_caller():
    def f(x, y):
        x.mul_(2)
        return x + y

    x, y = ember.randn(5), ember.randn(5)
    got, want, (cx, _), (ex, _) = _run_both(f, x, y)
    assert_close(got, want)
    assert_close(cx, ex)  # the caller's tensor holds the new value
    assert_close(cx, x * 2)
    gm = trace_forward(f, [x, y])
    assert _inplace_targets(gm) == []
    assert gm.aot_info.mutated_inputs == (0,)


def test_write_through_a_view_of_an_input():
    def f(x):
        x[0].add_(1)
        x[:, 1].mul_(3)
        return x.sum(0)

    x = ember.randn(3, 4)
    got, want, (cx,), (ex,) = _run_both(f, x)
    assert_close(got, want)
    assert_close(cx, ex)
    assert not ember.equal(cx, x)


def test_view_read_after_its_base_was_written():
    def f(x):
        y = x.clone()
        row = y[1]
        y.fill_(2.0)  # row sees the write
        y[0, 0] = 7.0
        return row * 1, y

    got, want, _, _ = _run_both(f, ember.randn(2, 3))
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


def test_output_that_is_a_view_of_an_input_is_a_view():
    def f(x):
        return x.t(), x[1], x

    x = ember.randn(3, 4)
    t, row, same = aot_function(f, identity)(x)
    assert same is x
    assert_close(t, x.t())
    x.add_(1)  # later writes to the input show through the outputs, as in eager mode
    assert_close(t, x.t())
    assert_close(row, x[1])


def test_view_output_of_a_written_input():
    def f(x):
        x.add_(1)
        return x[0]

    x = ember.zeros(2, 3)
    row = aot_function(f, identity)(x)
    assert_close(row, ember.ones(3))
    x.fill_(5)
    assert_close(row, ember.full((3,), 5.0))


def test_copy_casts_and_broadcasts():
    def f(x, src):
        x.copy_(src)
        return x * 1

    x = ember.zeros(2, 3, dtype=ember.float32)
    src = ember.arange(3, dtype=ember.float64)
    got, want, (cx, _), (ex, _) = _run_both(f, x, src)
    assert_close(got, want)
    assert cx.dtype == ember.float32
    assert_close(cx, ex)


def test_fill_zero_index_put_and_out():
    def f(x, idx, v):
        a = x.clone()
        a.zero_()
        a.index_put_((idx,), v)
        b = ember.empty_like(x)
        ember.add(x, 1, out=b)
        c = x.clone()
        c.fill_(v.sum())
        d = ember.nn.functional.relu(x.clone() - 0.5, inplace=True)
        return a, b, c, d

    x = ember.randn(4, 2)
    idx = ember.tensor([0, 2])
    v = ember.randn(2, 2)
    got, want, _, _ = _run_both(f, x, idx, v)
    for g, w in zip(got, want):
        assert_close(g, w)
    assert _inplace_targets(trace_forward(f, [x, idx, v])) == []


def test_joint_graph_of_inplace_code_is_functional_and_differentiates():
    def f(x, w):
        y = x @ w
        y.mul_(2)
        z = y * 3  # relu would save its output, which eager mode refuses to let z[0].add_ change
        z[0].add_(1)
        return z.relu().sum()

    x, w = ember.randn(3, 4), ember.randn(4, 5, requires_grad=True)
    gm = trace_joint(f, [x, w])
    assert _inplace_targets(gm) == []
    out = aot_function(f, identity)(x, w)
    (g,) = ember.autograd.grad(out, w)
    w2 = w.detach().clone().requires_grad_(True)
    (g2,) = ember.autograd.grad(f(x, w2), w2)
    assert_close(out, f(x, w2))
    assert_close(g, g2)


def test_batch_norm_running_statistics_are_updated_in_training():
    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4), ember.nn.ReLU())
    ref = copy.deepcopy(net)
    compiled = aot_module(net, identity)
    for _ in range(2):
        x = ember.randn(2, 3, 6, 6)
        got, want = compiled(x), ref(x)
        assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
    for (name, b), (_, rb) in zip(net.named_buffers(), ref.named_buffers()):
        assert_close(b, rb, msg=name)
    assert int(net[1].num_batches_tracked) == 2
    for (name, p), (_, rp) in zip(net.named_parameters(), ref.named_parameters()):
        assert_close(p.grad, rp.grad, msg=name)
    net.eval()
    ref.eval()
    x = ember.randn(2, 3, 6, 6)
    assert_close(compiled(x), ref(x))


def test_write_to_a_closed_over_tensor_is_refused():
    state = ember.zeros(3)
    scalar = ember.zeros(())

    def f(x):
        state.add_(x)
        return x * 2

    def g(x):
        scalar.add_(x.sum())  # a zero-dim CPU tensor may meet traced tensors: the write is what is refused
        return x * 2

    with pytest.raises(InductorError, match="does not take as an input"):
        trace_forward(f, [ember.randn(3)])
    with pytest.raises(InductorError, match="writes in place into a tensor it does not take as an input"):
        trace_forward(g, [ember.randn(3)])


def test_inplace_random_op_is_refused_with_a_clear_error():
    def f(x):
        y = ember.empty_like(x)
        y.uniform_()
        return x + y

    with pytest.raises(InductorError, match="in-place random op uniform_"):
        trace_forward(f, [ember.randn(3)])


def test_written_input_that_overlaps_another_input_is_refused():
    def f(x, y):
        x.add_(1)
        return y * 2

    compiled = aot_function(f, identity)
    a, b = ember.zeros(2, 3), ember.zeros(3)
    assert_close(compiled(a, b), ember.zeros(3))  # separate tensors: fine
    with pytest.raises(InductorError, match="input 0 is written in place and shares memory with input 1"):
        compiled(a, a[0])
    with pytest.raises(InductorError, match="input 0 is written in place and shares memory with input 1"):
        compiled(b[1:], b)  # the written one a view of the other


def test_two_written_inputs_that_overlap_are_refused():
    def f(x, y, z):
        x.add_(1)
        y.mul_(2)
        return z + 1

    compiled = aot_function(f, identity)
    a, c = ember.zeros(4), ember.zeros(2)
    with pytest.raises(InductorError, match="input 0 is written in place and shares memory with input 1"):
        compiled(a[:2], a[2:], c)
    with pytest.raises(InductorError, match="input 1 is written in place and shares memory with input 2"):
        compiled(c.clone(), a[:2], a)


def test_saved_input_is_not_changed_by_the_write_back():
    # a partition that saves the written input x and recomputes x + 1 in the backward (as a
    # rematerializing partitioner may): the backward must see the value x had at the call
    from ember.fx import Graph, GraphModule

    def f(x, w):
        x.add_(1)
        return (x * w).sum()

    def remat_partition(joint, joint_inputs, *, num_fwd_outputs):
        graph = Graph()
        x, w = graph.placeholder("x"), graph.placeholder("w")
        new_x = graph.call_function(ember._ops.registry["add"], (x, 1))
        product = graph.call_function(ember._ops.registry["mul"], (new_x, w))
        graph.output((new_x, graph.call_function(ember._ops.registry["sum"], (product,)), x))
        bw = Graph()
        saved_x, tangent = bw.placeholder("x"), bw.placeholder("tangents_1")
        again = bw.call_function(ember._ops.registry["add"], (saved_x, 1))
        bw.output((None, bw.call_function(ember._ops.registry["mul"], (again, tangent))))
        root = ember.nn.Module()
        return GraphModule(root, graph), GraphModule(root, bw)

    x = ember.zeros(3)
    w = ember.randn(3, requires_grad=True)
    out = aot_function(f, identity, partition_fn=remat_partition)(x, w)
    assert_close(x, ember.ones(3))  # written back
    (grad,) = ember.autograd.grad(out, w)
    assert_close(grad, ember.ones(3))  # x + 1 from the saved x (0), not from the written-back x (1)


def _op_names(gm):
    return [n.target.name for n in gm.graph.nodes if n.op == "call_function" and hasattr(n.target, "name")]


@pytest.mark.parametrize(
    "write",
    [
        lambda t, v: t.select(1, 2).copy_(v[:, 0]),  # select
        lambda t, v: t.select(-1, -1).copy_(v[:, 0]),  # negative dim and index
        lambda t, v: t[1:3].copy_(v[:2]),  # unit-step slice
        lambda t, v: t[:, 2:].copy_(v[:, :3]),  # open-ended slice
        lambda t, v: t.transpose(0, 1)[1].copy_(v[:, 0]),  # transpose then select
        lambda t, v: t.view(4, 5, 1).squeeze(2)[0].copy_(v[0]),  # reshapes
        lambda t, v: t.permute(1, 0)[1:2].copy_(v.t()[:1, :4]),  # permute then slice
    ],
)
def test_write_through_select_slice_and_reshape_views_is_pointwise(write):
    """Writes through select/slice/reshape/permute views scatter with pads and wheres, no index_put."""

    def into_input(x, v):
        write(x, v)
        return x * 1

    def into_zeros(x, v):
        z = ember.zeros(4, 5)
        write(z, v * 2)
        return z + x

    for fn in (into_input, into_zeros):
        x, v = ember.randn(4, 5), ember.randn(4, 5)
        gm = trace_forward(fn, [x, v])
        names = _op_names(gm)
        assert "index_put" not in names
        if fn is into_zeros:  # a write into zeros is a pad alone: no positions, no where
            assert "arange" not in names and "where" not in names
        got, want, compiled_args, eager_args = _run_both(fn, x, v)
        assert_close(got, want)
        assert_close(compiled_args[0], eager_args[0])


def test_write_through_a_strided_slice_still_scatters_by_index():
    def f(x, v):
        x[::2].copy_(v)
        return x * 1

    x, v = ember.randn(6, 3), ember.randn(3, 3)
    assert "index_put" in _op_names(trace_forward(f, [x, v]))
    got, want, compiled_args, eager_args = _run_both(f, x, v)
    assert_close(got, want)
    assert_close(compiled_args[0], eager_args[0])


def test_select_backward_is_a_pad_in_the_joint_graph():
    """autograd's select backward (zeros, then a write into a select of them) becomes a pad, no where."""

    def f(x):
        return (x.select(1, 0) * 2 + x.select(1, 2).exp()).sum()

    x = ember.randn(3, 4, requires_grad=True)
    joint = trace_joint(f, [x], [ember.ones(())])
    names = _op_names(joint)
    assert "index_put" not in names and "where" not in names and names.count("pad") == 2
    got = ember.autograd.grad(aot_function(f, identity)(x), x)[0]
    want = ember.autograd.grad(f(x), x)[0]
    assert_close(got, want)


@pytest.mark.parametrize(
    "name",
    ["pow_", "mul_self", "add_then_pow", "sin_", "exp_on_a_view"],
)
def test_in_place_op_on_an_intermediate_differentiates_as_eager(name):
    """``y = x * 1; y.pow_(2)``: the functional op's backward reads y's value before the write (eager
    autograd clones it first); the joint trace must too, not fail on y's newer version."""
    fns = {
        "pow_": lambda x: (x * 1).pow_(2),
        "mul_self": lambda x: (x * 1).mul_(x),
        "add_then_pow": lambda x: (x * 1).add_(1).pow_(2),
        "sin_": lambda x: (x * 1).sin_(),
        "exp_on_a_view": lambda x: (x * 1)[1:].exp_().sum() + x,
    }
    f = fns[name]
    x = ember.randn(4, dtype=ember.float64, requires_grad=True)
    compiled = aot_function(f, identity)
    got = compiled(x)
    want = f(x)
    assert_close(got, want)
    assert_close(ember.autograd.grad(got.sum(), x)[0], ember.autograd.grad(want.sum(), x)[0])
