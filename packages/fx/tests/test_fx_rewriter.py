"""subgraph_rewriter: matching patterns structurally and replacing them."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F  # noqa: N812 - PyTorch's alias
from ember.fx import subgraph_rewriter, symbolic_trace
from ember.fx.subgraph_rewriter import Match, replace_pattern, replace_pattern_with_filters


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        h = ember.relu(self.a(x))
        h = ember.relu(self.b(h)) + x
        return ember.relu(h)


def test_swap_relu_for_gelu_everywhere():
    ember.manual_seed(0)
    m = Block()
    gm = symbolic_trace(m)
    matches = replace_pattern(gm, lambda x: ember.relu(x), lambda x: F.gelu(x))
    assert len(matches) == 3 and all(isinstance(mt, Match) for mt in matches)
    assert [mt.anchor.name for mt in matches] == ["relu", "relu_1", "relu_2"]
    assert not gm.graph.find_nodes(op="call_function", target=ember.relu)
    gm.graph.lint()
    x = ember.randn(3, 4)
    _close(gm(x), F.gelu(F.gelu(m.b(F.gelu(m.a(x)))) + x))


def test_multi_node_pattern_with_literal():
    def f(x, y):
        a = ember.sigmoid(x) * 2
        b = ember.sigmoid(y) * 3  # different literal: not a match
        return a + b

    def pattern(x):
        return ember.sigmoid(x) * 2

    def replacement(x):
        return ember.tanh(x) + 1

    gm = symbolic_trace(f)
    matches = replace_pattern(gm, pattern, replacement)
    assert len(matches) == 1
    nodes_map = {p.name: g.name for p, g in matches[0].nodes_map.items()}
    assert nodes_map == {"x": "x", "sigmoid": "sigmoid", "mul": "mul"}
    x, y = ember.randn(3), ember.randn(3)
    _close(gm(x, y), ember.tanh(x) + 1 + ember.sigmoid(y) * 3)


def test_ignore_literals_and_filters():
    def f(x, y):
        return ember.sigmoid(x) * 2 + ember.sigmoid(y) * 3

    gm = symbolic_trace(f)
    results = replace_pattern_with_filters(
        gm, lambda x: ember.sigmoid(x) * 2, lambda x: ember.tanh(x), ignore_literals=True
    )
    assert len(results) == 2 and all(r.replacements for r in results)
    assert [n.target for n in results[0].replacements] == [ember.tanh]
    x, y = ember.randn(3), ember.randn(3)
    _close(gm(x, y), ember.tanh(x) + ember.tanh(y))

    gm2 = symbolic_trace(f)

    def only_y(match, original_graph, pattern_graph):
        return match.placeholder_nodes[0].name == "y"

    results = replace_pattern_with_filters(
        gm2, lambda x: ember.sigmoid(x) * 2, lambda x: ember.tanh(x), [only_y], ignore_literals=True
    )
    assert len(results) == 1
    _close(gm2(x, y), ember.sigmoid(x) * 2 + ember.tanh(y))


def test_intermediate_with_outside_user_is_not_replaced():
    def f(x):
        s = ember.sigmoid(x)
        return s * 2, s  # s escapes the pattern

    gm = symbolic_trace(f)
    assert replace_pattern(gm, lambda x: ember.sigmoid(x) * 2, lambda x: ember.tanh(x)) == []
    x = ember.randn(3)
    out = gm(x)
    _close(out[0], ember.sigmoid(x) * 2)


def test_pattern_with_two_inputs_and_methods():
    def f(a, b, c):
        return (a @ b).relu() + (b @ c).relu()

    def pattern(x, y):
        return (x @ y).relu()

    def replacement(x, y):
        return ember.clamp(ember.matmul(x, y), min=0.0)

    gm = symbolic_trace(f)
    assert len(replace_pattern(gm, pattern, replacement)) == 2
    assert gm.code.count("ember.clamp(") == 2
    a, b, c = ember.randn(3, 3), ember.randn(3, 3), ember.randn(3, 3)
    _close(gm(a, b, c), f(a, b, c), tol=1e-5)


def test_same_placeholder_must_match_same_value():
    def f(x, y):
        return x * x + x * y

    gm = symbolic_trace(f)
    matches = replace_pattern(gm, lambda a: a * a, lambda a: a.square())
    assert len(matches) == 1
    x, y = ember.randn(3), ember.randn(3)
    _close(gm(x, y), x * x + x * y)
    assert "square" in gm.code and gm.code.count(" * ") == 1


def test_overlapping_matches_do_not_overlap():
    gm = symbolic_trace(lambda x: ember.neg(ember.neg(ember.neg(x))))
    matches = replace_pattern(gm, lambda x: ember.neg(ember.neg(x)), lambda x: x + 0)
    assert len(matches) == 1
    x = ember.randn(2)
    _close(gm(x), -x)


def test_replacement_arity_mismatch():
    gm = symbolic_trace(lambda x: ember.relu(x))
    with pytest.raises(ValueError, match="the pattern has 1 inputs but the replacement has 2"):
        replace_pattern(gm, lambda x: ember.relu(x), lambda x, y: x + y)


def test_module_namespace_export():
    assert subgraph_rewriter.replace_pattern is replace_pattern


def test_chained_matches_read_the_earlier_replacement():
    gm = symbolic_trace(lambda x: ember.relu(ember.relu(ember.relu(x))))
    matches = replace_pattern(gm, lambda x: ember.relu(x), lambda x: ember.tanh(x))
    assert len(matches) == 3
    gm.graph.lint()
    assert gm.code.count("ember.tanh(") == 3 and "relu" not in gm.code
    x = ember.randn(5)
    _close(gm(x), ember.tanh(ember.tanh(ember.tanh(x))))
