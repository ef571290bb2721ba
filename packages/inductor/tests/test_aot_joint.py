"""The joint forward+backward graph: its placeholders, outputs, node metadata and gradients."""

from __future__ import annotations

import operator

import pytest

import ember
from ember._inductor.aot import trace_forward, trace_joint
from ember._inductor.exc import InductorError
from ember._ops import registry
from ember.testing import assert_close


def _placeholders(gm):
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


def _outputs(gm):
    return list(next(n for n in gm.graph.nodes if n.op == "output").args[0])


def test_placeholders_outputs_and_values():
    def f(x, w):
        return (x @ w).tanh(), (x * 3).sum()

    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(4, 2)  # no grad: None in the grads
    gm = trace_joint(f, [x, w])
    assert _placeholders(gm) == ["primals_1", "primals_2", "tangents_1", "tangents_2"]
    assert gm.num_fwd_outputs == 2
    outs = _outputs(gm)
    assert len(outs) == 2 + 2 and outs[3] is None
    for node in gm.graph.nodes:
        if node.op != "output":
            assert "val" in node.meta, node.name
            vals = node.meta["val"] if isinstance(node.meta["val"], tuple) else (node.meta["val"],)
            assert all(v.device.type == "meta" for v in vals if isinstance(v, ember.Tensor))
    # the graph computes eager mode's values and vector-Jacobian products
    t1, t2 = ember.randn(3, 2), ember.randn(())
    y, s, gx, gw = gm(x.detach(), w, t1, t2)
    want_y, want_s = f(x, w)
    assert_close(y, want_y)
    assert_close(s, want_s)
    (want_gx,) = ember.autograd.grad((want_y, want_s), x, grad_outputs=(t1, t2))
    assert_close(gx, want_gx)
    assert gw is None


def test_outputs_that_do_not_require_grad_get_no_tangent():
    def f(x):
        return x.sin(), x.argmax(), x.detach() * 2

    gm = trace_joint(f, [ember.randn(4, requires_grad=True)])
    assert _placeholders(gm) == ["primals_1", "tangents_1"]
    assert gm.aot_info.tangent_outputs == (0,)
    assert gm.aot_info.fwd_output_requires_grad == (True, False, False)


def test_meta_vals_have_the_real_strides():
    gm = trace_joint(lambda x: x.t().contiguous() * 2, [ember.randn(3, 5, requires_grad=True)])
    transpose = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target.name in ("t", "transpose"))
    assert tuple(transpose.meta["val"].stride()) == (1, 5)


def test_no_real_kernel_runs():
    calls = []

    def f(x):
        calls.append(x.device.type)
        return x.exp()

    trace_joint(f, [ember.randn(3, requires_grad=True)])
    assert calls == ["meta"]


def test_tangents_like_is_checked():
    with pytest.raises(ValueError, match="tangents_like has 2 tensors"):
        trace_joint(lambda x: x * 2, [ember.randn(3, requires_grad=True)], [ember.randn(3), ember.randn(3)])
    with pytest.raises(ValueError, match=r"tangents_like\[0\] has shape \(4,\)"):
        trace_joint(lambda x: x * 2, [ember.randn(3, requires_grad=True)], [ember.randn(4)])


def test_primals_must_be_tensors():
    with pytest.raises(TypeError, match=r"primals\[1\]"):
        trace_joint(lambda x, y: x * y, [ember.randn(3), 2.0])


def test_decomposition_table_is_applied():
    def gelu_as_tanh(input, approximate="none"):
        return input * 0.5 * (1 + (input * 0.7978845608 * (1 + 0.044715 * input * input)).tanh())

    gm = trace_joint(
        lambda x: ember.nn.functional.gelu(x), [ember.randn(3, requires_grad=True)],
        decompositions={registry["gelu"]: gelu_as_tanh},
    )
    targets = {n.target.name for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem}
    assert "gelu" not in targets and "tanh" in targets


def test_composites_autograd_decomposes_are_traced_through():
    # dropout's backward multiplies by the mask its decomposition made: the mask must be a graph
    # value, never a constant of the trace
    gm = trace_joint(lambda x: ember.nn.functional.dropout(x, 0.5), [ember.randn(4, requires_grad=True)])
    assert not [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert "bernoulli" in {n.target.name for n in gm.graph.nodes if n.op == "call_function"}


def test_factories_record_the_real_device():
    gm = trace_forward(lambda x: x + ember.ones(3, device=x.device) + ember.zeros(3), [ember.randn(3)])
    for node in gm.graph.nodes:
        if node.op == "call_function" and "device" in node.kwargs:
            assert node.kwargs["device"] in (None, ember.device("cpu"))
    assert_close(gm(ember.zeros(3))[0], ember.ones(3))


def test_data_dependent_control_flow_names_the_function():
    def needs_values(x):
        return x * x.max().item()

    with pytest.raises(InductorError, match="needs_values"):
        trace_joint(needs_values, [ember.randn(3)])


def test_real_constants_become_graph_attributes():
    table = ember.tensor(2.5)

    def f(x):
        return x * table

    gm = trace_forward(f, [ember.randn(3)])
    (attr,) = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert getattr(gm, attr.target) is table
    assert_close(gm(ember.ones(3))[0], ember.full((3,), 2.5))


def test_constants_built_from_data_in_backward_formulas():
    # the pooling gradients build their weights with ember.tensor(array, device=grad.device): on meta
    # during the trace, a graph constant on the real device in the graph
    def f(x):
        return ember.nn.functional.adaptive_avg_pool1d(x, 3) * 2

    x = ember.randn(2, 7, requires_grad=True)
    gm = trace_joint(f, [x])
    constants = [getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"]
    assert constants and all(c.device.type == "cpu" for c in constants)
    tangent = ember.randn(2, 3)
    _out, grad = gm(x.detach(), tangent)
    (want,) = ember.autograd.grad(f(x), x, tangent)
    assert_close(grad, want)


def test_value_reading_backward_formula_is_named_in_the_error():
    with pytest.raises(InductorError, match="backward pass"):
        trace_joint(lambda x: x.prod(), [ember.randn(3, requires_grad=True)])


def test_decompositions_do_not_change_what_autograd_saves():
    # relu(x, inplace=True) decomposed to maximum(x, 0) while autograd records would save x, which
    # the in-place write then changes; the joint graph is decomposed after autograd ran instead
    def relu_as_maximum(input, inplace=False):
        return ember.maximum(input, ember.zeros((), dtype=input.dtype, device=input.device))

    def f(x, w):
        h = x @ w
        ember.nn.functional.relu(h, inplace=True)
        return (h * 2).sum()

    x, w = ember.randn(4, 3), ember.randn(3, 5, requires_grad=True)
    gm = trace_joint(f, [x, w], decompositions={registry["relu"]: relu_as_maximum})
    targets = {n.target.name for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem}
    assert "relu" not in targets and "maximum" in targets
    tangent = ember.tensor(1.5)
    _out, _none, grad = gm(x, w.detach(), tangent)
    (want,) = ember.autograd.grad(f(x, w), w, tangent)
    assert_close(grad, want)


def test_factories_naming_the_real_device_are_traced_on_meta():
    def f(x):
        return x + ember.arange(3, dtype=x.dtype, device="cpu") + ember.ones(3).to("cpu")

    gm = trace_forward(f, [ember.zeros(3)])
    assert_close(gm(ember.zeros(3))[0], ember.arange(3.0) + 1)


def test_decomposed_joint_graph_with_list_arguments():
    a, b = ember.randn(2, 3, requires_grad=True), ember.randn(4, 3, requires_grad=True)
    gm = trace_joint(lambda a, b: ember.cat([a, b]).exp(), [a, b])
    decomposed = trace_joint(
        lambda a, b: ember.cat([a, b]).exp(), [a, b],
        decompositions={registry["exp"]: lambda input: ember.pow(2.718281828459045, input)},
    )
    tangent = ember.randn(6, 3)
    for graph in (gm, decomposed):
        out, ga, gb = graph(a.detach(), b.detach(), tangent)
        want = ember.cat([a, b]).exp()
        assert_close(out, want, rtol=1e-5, atol=1e-6)
        want_ga, want_gb = ember.autograd.grad(want, (a, b), tangent)
        assert_close(ga, want_ga, rtol=1e-5, atol=1e-6)
        assert_close(gb, want_gb, rtol=1e-5, atol=1e-6)


def test_decomposition_needing_values_keeps_the_op_whole():
    def needs_values(A, b, *, left=True):
        if A.sum().item() > 1e9:  # reads a value: impossible on meta
            raise ValueError("never")
        return ember.linalg.solve(A, b)

    A = ember.randn(3, 3) + 3 * ember.eye(3)
    b = ember.randn(3)
    gm = trace_forward(lambda A, b: ember.linalg.solve(A, b) * 2, [A, b],
                       decompositions={registry["linalg_solve"]: needs_values})
    assert "linalg_solve" in {n.target.name for n in gm.graph.nodes if n.op == "call_function"}
    assert_close(gm(A, b)[0], ember.linalg.solve(A, b) * 2)

