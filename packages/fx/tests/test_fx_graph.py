"""The Graph IR: building, editing, copying, checking, printing and generating code."""

from __future__ import annotations

import copy
import operator

import numpy as np
import pytest

import ember
from ember import fx
from ember.fx import Graph, GraphModule, Node
from ember.fx.immutable_collections import immutable_dict, immutable_list


def _linear_graph():
    """x -> relu -> add 1 -> output, built by hand."""
    g = Graph()
    x = g.placeholder("x")
    r = g.call_function(ember.relu, (x,))
    a = g.call_function(operator.add, (r, 1))
    g.output(a)
    return g, x, r, a


def _run(g, *args):
    return GraphModule(ember.nn.Module(), g)(*args)


def test_build_and_run_by_hand():
    g, x, r, a = _linear_graph()
    assert [n.op for n in g.nodes] == ["placeholder", "call_function", "call_function", "output"]
    assert [n.name for n in g.nodes] == ["x", "relu", "add", "output"]
    t = ember.tensor([-1.0, 2.0])
    np.testing.assert_array_equal(_run(g, t).numpy(), [1.0, 3.0])


def test_users_and_inputs_follow_edits():
    g, x, r, a = _linear_graph()
    assert list(x.users) == [r] and r.all_input_nodes == [x]
    a.args = (x, r)
    assert list(x.users) == [r, a] and a.all_input_nodes == [x, r]
    a.update_arg(0, r)
    assert list(x.users) == [r] and a.all_input_nodes == [r]
    a.update_kwarg("alpha", x)
    assert a.kwargs == {"alpha": x} and a in x.users
    a.kwargs = {}
    assert a not in x.users


def test_args_are_immutable_containers():
    g = Graph()
    x = g.placeholder("x")
    n = g.call_function(ember.cat, ([x, x],), {"dim": 0})
    assert isinstance(n.args[0], immutable_list) and isinstance(n.kwargs, immutable_dict)
    with pytest.raises(TypeError, match="immutable"):
        n.args[0].append(x)
    with pytest.raises(TypeError, match="immutable"):
        n.kwargs["dim"] = 1
    assert list(x.users) == [n]  # a list holding x twice still makes one user entry


def test_update_arg_out_of_range():
    g, x, r, a = _linear_graph()
    with pytest.raises(IndexError, match="index 5 out of range"):
        a.update_arg(5, x)


def test_replace_all_uses_with_and_erase():
    g, x, r, a = _linear_graph()
    with g.inserting_after(r):
        s = g.call_function(ember.sigmoid, (x,))
    changed = r.replace_all_uses_with(s)
    assert changed == [a] and a.args[0] is s and not r.users
    g.erase_node(r)
    g.lint()
    t = ember.tensor([0.0, 1.0])
    np.testing.assert_allclose(_run(g, t).numpy(), 1 / (1 + np.exp(-t.numpy())) + 1, rtol=1e-6)


def test_replace_all_uses_with_filter_and_meta():
    g = Graph()
    x = g.placeholder("x")
    r = g.call_function(ember.relu, (x,))
    u1 = g.call_function(ember.neg, (r,))
    u2 = g.call_function(ember.exp, (r,))
    g.output((u1, u2))
    r.meta["tag"] = 1
    with g.inserting_before(u1):
        t = g.call_function(ember.tanh, (x,))
    changed = r.replace_all_uses_with(t, delete_user_cb=lambda u: u is u2, propagate_meta=True)
    assert changed == [u2] and u1.args == (r,) and u2.args == (t,)
    assert t.meta == {"tag": 1}
    with pytest.raises(ValueError, match="already has meta"):
        r.replace_all_uses_with(t, propagate_meta=True)


def test_replace_input_with():
    g, x, r, a = _linear_graph()
    y = g.placeholder("y")
    a.replace_input_with(r, y)
    assert a.args == (y, 1) and a not in r.users and a in y.users


def test_erase_node_with_users_raises():
    g, x, r, a = _linear_graph()
    with pytest.raises(RuntimeError, match=r"Tried to erase Node relu but it still had 1 users in the graph"):
        g.erase_node(r)


def test_inserting_before_after_keep_creation_order():
    g, x, r, a = _linear_graph()
    with g.inserting_after(x):
        n1 = g.call_function(ember.exp, (x,))
        n2 = g.call_function(ember.neg, (n1,))
    with g.inserting_before(a):
        n3 = g.call_function(ember.abs, (r,))
    assert [n.name for n in g.nodes] == ["x", "exp", "neg", "relu", "abs_1", "add", "output"]
    assert n2.prev is n1 and n1.next is n2 and n3.next is a
    g.lint()


def test_prepend_append_move_nodes():
    g, x, r, a = _linear_graph()
    y = g.placeholder("y")  # created after output: lint must reject, then we move it
    with pytest.raises(RuntimeError, match="output node must be the last"):
        g.lint()
    x.append(y)
    g.lint()
    assert [n.name for n in g.nodes] == ["x", "y", "relu", "add", "output"]
    with pytest.raises(ValueError, match="before itself"):
        y.prepend(y)


def test_lint_catches_use_before_definition():
    g, x, r, a = _linear_graph()
    a.prepend(r)  # fine
    r.prepend(a)  # add now comes before the relu it reads
    with pytest.raises(RuntimeError, match="used before it is defined"):
        g.lint()


def test_lint_checks_targets_of_owning_module():
    g = Graph()
    x = g.placeholder("x")
    w = g.get_attr("nope.weight")
    g.output(g.call_function(operator.add, (x, w)))
    g.lint()  # without an owning module, targets are not checked
    g.owning_module = ember.nn.Module()
    with pytest.raises(RuntimeError, match="nonexistent attribute nope of root"):
        g.lint()


def test_node_validation():
    g = Graph()
    with pytest.raises(ValueError, match="op must be one of"):
        g.create_node("call_thing", "x")
    with pytest.raises(ValueError, match="must be a str"):
        g.create_node("call_method", ember.relu)
    with pytest.raises(ValueError, match="must be callable"):
        g.create_node("call_function", "relu")
    other = Graph().placeholder("z")
    with pytest.raises(ValueError, match="belongs to another graph"):
        g.call_function(ember.relu, (other,))


def test_unique_names():
    g = Graph()
    x = g.placeholder("x")
    names = [g.call_function(ember.relu, (x,)).name for _ in range(3)]
    assert names == ["relu", "relu_1", "relu_2"]
    # builtins and keywords are not used as names (they would shadow what generated code calls)
    assert g.call_function(getattr, (x, "shape")).name == "getattr_1"
    assert g.call_function(ember.sum, (x,)).name == "sum_1"
    assert g.create_node("call_function", ember.relu, (x,), name="class").name == "class_1"


def test_find_nodes():
    g, x, r, a = _linear_graph()
    assert g.find_nodes(op="placeholder") == [x]
    assert g.find_nodes(op="call_function", target=ember.relu) == [r]
    assert g.find_nodes(op="call_function") == [r, a]
    assert g.find_nodes(op="call_module") == []


def test_node_list_len_reverse_and_erase_while_iterating():
    g, x, r, a = _linear_graph()
    assert len(g.nodes) == 4
    assert [n.name for n in reversed(g.nodes)] == ["output", "add", "relu", "x"]
    for n in g.nodes:
        if n.op == "output":
            g.erase_node(n)
    assert len(g.nodes) == 3


def test_eliminate_dead_code_keeps_impure():
    g = Graph()
    x = g.placeholder("x")
    dead = g.call_function(ember.exp, (x,))
    g.call_function(ember.neg, (dead,))
    inplace = g.call_function(ember.add.inplace, (x, 1))
    g.call_method("mul_", (x, 2))
    live = g.call_function(ember.relu, (x,))
    g.output(live)
    assert g.eliminate_dead_code()
    assert [n.name for n in g.nodes] == ["x", "add_", "mul_", "relu", "output"]
    assert inplace in x.users
    assert not g.eliminate_dead_code()


def test_eliminate_dead_code_custom_impurity():
    g, x, r, a = _linear_graph()
    g.call_function(ember.exp, (x,))
    g.eliminate_dead_code(is_impure_node=lambda n: n.op in ("placeholder", "output") or n.target is ember.exp)
    assert [n.name for n in g.nodes] == ["x", "relu", "add", "output", "exp"]


def test_node_copy_and_graph_copy():
    g, x, r, a = _linear_graph()
    r.meta["k"] = "v"
    g2 = Graph()
    y = g2.placeholder("y")
    out = g2.graph_copy(g, {x: y})
    g2.output(out)
    assert [n.name for n in g2.nodes] == ["y", "relu", "add", "output"]
    assert g2.find_nodes(op="call_function", target=ember.relu)[0].meta == {"k": "v"}
    value, out_node = Graph().graph_copy(g, {}, return_output_node=True)
    assert out_node.op == "output" and value.name == "add"
    t = ember.tensor([-3.0, 3.0])
    np.testing.assert_array_equal(_run(g2, t).numpy(), [1.0, 4.0])


def test_deepcopy_graph_is_independent():
    g, x, r, a = _linear_graph()
    g2 = copy.deepcopy(g)
    g2.erase_node(g2.find_nodes(op="output")[0])
    assert len(g.nodes) == 4 and len(g2.nodes) == 3
    assert all(n.graph is g2 for n in g2.nodes)


def test_str_and_format_node():
    g, x, r, a = _linear_graph()
    text = str(g)
    assert text.splitlines()[0] == "graph():"
    assert "%relu : [num_users=1] = call_function[target=ember.relu](args = (%x,), kwargs = {})" in text
    assert "%add : [num_users=1] = call_function[target=operator.add](args = (%relu, 1), kwargs = {})" in text
    assert text.splitlines()[-1].strip() == "return add"
    names = []
    assert x.format_node(placeholder_names=names) is None and names == ["x"]


def test_print_tabular_plain_text(capsys):
    g, x, r, a = _linear_graph()
    g.print_tabular()
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert out[4].split()[:3] == ["call_function", "add", "operator.add"]
    assert len(out) == 2 + 4  # header, rule, one row per node


def test_python_code_text_and_round_trip():
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y", default_value=2)
    n1 = g.call_function(operator.mul, (x, y))
    n2 = g.call_function(operator.getitem, (n1, (slice(None), slice(1, None, 2))))
    n3 = g.call_method("sum", (n2,), {"dim": 0})
    n4 = g.call_function(ember.zeros, ((2,),), {"dtype": ember.float64})
    n5 = g.call_function(operator.pow, (n3, -1))
    g.output((n5, [n4], {"k": float("inf")}))
    code = g.python_code("self")
    assert code.src == (
        "def forward(self, x, y = 2):\n"
        "    mul = x * y\n"
        "    getitem = mul[:, 1::2]\n"
        "    sum_1 = getitem.sum(dim = 0)\n"
        "    zeros = ember.zeros((2,), dtype = ember.float64)\n"
        "    pow_1 = sum_1 ** (-1)\n"
        "    return (pow_1, [zeros], {'k': inf})\n"
    )
    namespace = dict(code.globals)
    exec(code.src, namespace)  # noqa: S102 - our own generated code
    t = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    p, (z,), d = namespace["forward"](None, t)
    np.testing.assert_allclose(p.numpy(), 1 / np.array([14.0]))
    assert z.dtype is ember.float64 and d == {"k": float("inf")}


def test_verbose_python_code_comments():
    g, *_ = _linear_graph()
    src = g.python_code("self", verbose=True).src
    assert "relu = ember.relu(x)  # call_function[ember.relu]" in src


def test_placeholder_renamed_when_name_is_reserved():
    g = Graph()
    x = g.placeholder("input")
    g.output(g.call_function(ember.neg, (x,)))
    src = g.python_code("self").src
    assert src.startswith("def forward(self, input):\n    input_1 = input\n")
    np.testing.assert_array_equal(_run(g, ember.ones(2)).numpy(), [-1.0, -1.0])


def test_node_is_identity_hashed():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(ember.relu, (x,))
    b = g.call_function(ember.relu, (x,))
    assert isinstance(a, Node) and len({a, b}) == 2 and repr(a) == "relu"


def test_map_arg():
    g, x, r, a = _linear_graph()
    out = fx.map_arg((x, [r, 3], {"k": a}), lambda n: n.name)
    assert out == ("x", ["relu", 3], {"k": "add"})
    with pytest.raises(TypeError, match="must be callable"):
        fx.map_arg(x, None)


def test_normalized_arguments():
    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(2, 2)

        def forward(self, x):
            return ember.sum(self.lin(x), 0, keepdim=True).softmax(-1)

    m = M()
    gm = fx.symbolic_trace(m)
    nodes = {n.name: n for n in gm.graph.nodes}
    lin, total = nodes["lin"], nodes["sum_1"]
    assert total.normalized_arguments(m) == ((lin, 0, True), {"dtype": None})
    assert total.normalized_arguments(m, normalize_to_only_use_kwargs=True) == (
        (),
        {"input": lin, "dim": 0, "keepdim": True, "dtype": None},
    )
    assert lin.normalized_arguments(m, normalize_to_only_use_kwargs=True).kwargs == {"input": nodes["x"]}
    assert lin.normalized_arguments(None) is None  # a module call needs the root
    assert nodes["softmax"].normalized_arguments(m) is None  # methods are not normalised
    g = Graph()
    bad = g.call_function(ember.relu, (g.placeholder("x"), 1, 2, 3))
    assert bad.normalized_arguments() is None  # does not fit the signature
