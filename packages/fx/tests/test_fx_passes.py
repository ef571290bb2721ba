"""Other passes: the Graphviz drawer, CSE, constant folding, split_module, FakeTensorProp, annotate."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.fx import Graph, GraphModule, symbolic_trace
from ember.fx.annotate import annotate
from ember.fx.passes.constant_folding import fold_constants
from ember.fx.passes.cse_pass import CSEPass
from ember.fx.passes.fake_tensor_prop import FakeTensorProp
from ember.fx.passes.graph_drawer import FxGraphDrawer
from ember.fx.passes.shape_prop import ShapeProp
from ember.fx.passes.split_module import split_module


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.bias = nn.Parameter(ember.zeros(2))

    def forward(self, x):
        return ember.relu(self.fc(x) + self.bias) * (x.sum() > 0)


def _boxes_and_edges(text):
    boxes = re.findall(r'^    "(\w+)" \[label="(.*)", style=filled, fillcolor=(\w+)\];$', text, re.M)
    edges = re.findall(r'^    "(\w+)" -> "(\w+)";$', text, re.M)
    return boxes, edges


def test_dot_text_has_one_box_per_node_and_one_edge_per_use():
    gm = symbolic_trace(_Net())
    text = FxGraphDrawer(gm, "net").get_dot_graph().to_string()
    assert text.startswith('digraph "net" {\n') and text.endswith("}\n")
    boxes, edges = _boxes_and_edges(text)
    assert [b[0] for b in boxes] == [n.name for n in gm.graph.nodes]
    expected_edges = {(n.name, u.name) for n in gm.graph.nodes for u in n.users}
    assert set(edges) == expected_edges and len(edges) == len(expected_edges)
    colors = {name: color for name, _, color in boxes}
    assert colors["fc"] == "LightGrey" and colors["relu"] == "PaleTurquoise" and colors["bias"] == "LemonChiffon1"
    fc_label = dict((b[0], b[1]) for b in boxes)["fc"]
    assert "target=fc (Linear)" in fc_label and "op_code=call_module" in fc_label


def test_record_labels_are_escaped_and_show_shapes():
    gm = symbolic_trace(_Net())
    ShapeProp(gm).propagate(ember.randn(4, 3))
    text = FxGraphDrawer(gm, "net").get_dot_graph().to_string()
    labels = dict((b[0], b[1]) for b in _boxes_and_edges(text)[0])
    assert "shape=(4, 2), dtype=ember.float32" in labels["relu"]
    assert labels["sum_1"].startswith("{sum_1\\l|op_code=call_method\\l|")
    assert "kwargs" not in labels["sum_1"] and "args=('_',)" in labels["sum_1"]


def test_escape_record_characters():
    from ember.fx.passes.graph_drawer import _escape

    # | { } < > " separate fields or end the label in DOT records
    assert _escape('a|b{c}<d>"e\nf') == 'a\\|b\\{c\\}\\<d\\>\\"e\\nf'


def test_ignore_getattr():
    gm = symbolic_trace(_Net())
    text = FxGraphDrawer(gm, "net", ignore_parameters_and_buffers=True).get_dot_graph().to_string()
    names = [b[0] for b in _boxes_and_edges(text)[0]]
    assert "bias" not in names and "fc" in names
    assert "bias" not in [e[0] for e in _boxes_and_edges(text)[1]]


def test_render_needs_graphviz(tmp_path):
    dot = FxGraphDrawer(symbolic_trace(nn.Sequential(nn.ReLU())), "g").get_dot_graph()
    dot.write(tmp_path / "g.dot")
    assert (tmp_path / "g.dot").read_text() == dot.to_string()
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="Graphviz 'dot' program"):
            dot.create_svg()
    else:
        assert b"<svg" in dot.create_svg()


def test_cse_merges_pure_duplicates_only():
    def f(x):
        a = ember.relu(x) + ember.relu(x)
        b = x.sum(dim=0) * x.sum(dim=0) + x.sum(dim=1).sum()
        c = ember.rand_like(x) - ember.rand_like(x)  # random: never merged
        y = x.clone()
        y.add_(1)
        y.add_(1)  # in-place: never merged
        return a, b, c, y

    gm = symbolic_trace(f)
    before = len(gm.graph.nodes)
    result = CSEPass()(gm)
    assert result.modified and result.graph_module is gm
    assert len(gm.graph.nodes) == before - 2  # one relu, one x.sum(dim=0)
    assert gm.code.count("ember.relu(") == 1 and gm.code.count("sum(dim = 0)") == 1
    assert gm.code.count("ember.rand_like(") == 2 and gm.code.count(".add_(1)") == 2
    x = ember.randn(3, 3)
    a, b, c, y = gm(x)
    assert float(c.abs().sum()) > 0  # two different draws
    _close(a, 2 * ember.relu(x))
    _close(b, x.sum(dim=0) ** 2 + x.sum())
    _close(y, x + 2)
    assert not CSEPass()(gm).modified


def test_cse_respects_banned_ops_and_kwargs():
    gm = symbolic_trace(lambda x: ember.sum(x, dim=0) + ember.sum(x, dim=1) + ember.exp(x) + ember.exp(x))
    assert CSEPass(banned_ops={ember.exp})(gm).modified is False  # different dims, exp banned
    assert gm.code.count("ember.exp(") == 2


def test_constant_folding():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.randn(4, 4))
            self.register_buffer("scale", ember.full((4,), 2.0))

        def forward(self, x):
            w = (self.w.t() * self.scale).relu()  # depends on attributes only
            return x @ w + self.scale

    ember.manual_seed(0)
    m = M()
    gm = symbolic_trace(m)
    assert fold_constants(gm) == 1
    assert [n.op for n in gm.graph.nodes] == [
        "placeholder",
        "get_attr",
        "call_function",
        "get_attr",
        "call_function",
        "output",
    ]
    assert "_folded_attr_0 = self._folded_attr_0" in gm.code and "relu" not in gm.code
    _close(gm._folded_attr_0, (m.w.t() * m.scale).relu())
    x = ember.randn(3, 4)
    _close(gm(x), m(x))
    assert fold_constants(gm) == 0


def test_split_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)
            self.w = nn.Parameter(ember.ones(4))

        def forward(self, x, y):
            h = ember.relu(self.a(x)) + y
            g = self.b(h) * self.w
            return g + h, self.w

    ember.manual_seed(0)
    m = M()
    gm = symbolic_trace(m)
    order = [n.name for n in gm.graph.nodes]
    qualnames = {}
    split = split_module(gm, m, lambda n: 0 if order.index(n.name) < order.index("b") else 1, qualnames)
    assert [n.target for n in split.graph.find_nodes(op="call_module")] == ["submod_0", "submod_1"]
    assert [n.name for n in split.submod_0.graph.find_nodes(op="placeholder")] == ["x", "y"]
    assert [n.name for n in split.submod_1.graph.find_nodes(op="placeholder")] == ["add"]
    assert qualnames == {"submod_1.w": "w"}
    assert split.submod_0.a is m.a and split.submod_1.w is m.w
    x, y = ember.randn(2, 4), ember.randn(2, 4)
    out, w = split(x, y)
    _close(out, m(x, y)[0])
    assert w is m.w


def test_split_module_several_outputs_and_cycle_error():
    def f(x):
        a = x + 1
        b = x * 2
        c = a - b
        return c, a

    gm = symbolic_trace(f)
    parts = {"add": 0, "mul": 0, "sub": 1}
    split = split_module(gm, gm, lambda n: parts[n.name])
    assert "add = submod_0[0]" in split.code and "mul = submod_0[1]" in split.code  # two outputs
    x = ember.randn(3)
    c, a = split(x)
    _close(c, (x + 1) - x * 2)
    _close(a, x + 1)


def test_split_module_cycle_error():
    def f(x):
        a = x + 1  # partition 0
        b = a * 2  # partition 1 reads partition 0
        return b - a  # partition 0 reads partition 1: a cycle

    gm = symbolic_trace(f)
    with pytest.raises(RuntimeError, match="cycle"):
        split_module(gm, gm, lambda n: {"add": 0, "mul": 1, "sub": 0}[n.name])


def test_fake_tensor_prop_stores_meta_values():
    gm = symbolic_trace(nn.Sequential(nn.Linear(3, 5), nn.ReLU()))
    FakeTensorProp(gm).propagate(ember.randn(2, 3))
    vals = [n.meta["val"] for n in gm.graph.nodes]
    assert all(v.device.type == "meta" for v in vals)
    assert [tuple(v.shape) for v in vals] == [(2, 3), (2, 5), (2, 5), (2, 5)]


def test_annotate_sets_the_node_type():
    def f(x):
        y = annotate(x + 1, ember.Tensor)
        return y * 2

    gm = symbolic_trace(f)
    (add,) = gm.graph.find_nodes(op="call_function", target=__import__("operator").add)
    assert add.type is ember.Tensor and "ember._tensor.Tensor" in str(gm.graph)
    assert annotate(3, int) == 3
    g = Graph()
    from ember.fx import Proxy

    p = Proxy(g.placeholder("x", type_expr=int))
    with pytest.raises(RuntimeError, match="already had a type"):
        annotate(p, float)
    assert isinstance(GraphModule(nn.Module(), g), GraphModule)


def test_print_readable_nests_split_submodules():
    gm = symbolic_trace(lambda x: (x + 1) * 2)
    split = split_module(gm, gm, lambda n: 0 if n.name == "add" else 1)
    text = split.print_readable(print_output=False)
    assert text.startswith("class GraphModule(ember.nn.Module):\n    class submod_0(ember.nn.Module):\n")
    assert "        def forward(self, x):\n            add = x + 1\n            return add\n" in text
    assert "    class submod_1(ember.nn.Module):" in text and text.rstrip().endswith("return submod_1")
