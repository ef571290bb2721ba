"""A graph break inside a function or module that the capture inlined.

Without frame interception (PEP 523), the call containing the break is handed to the break
function with its callee compiled on its own (``CacheEntry._compiled_callee``): the graph before
the call, the callee's graphs around the break, and the graph after the call are all captured,
as PyTorch captures them. Before, a break anywhere inside a compiled module's forward left the
whole module eager (zero graphs).
"""

from __future__ import annotations

import ember
import ember._dynamo as dynamo
import ember.nn as nn
from ember._dynamo.testing import CompileCounter
from ember.testing import assert_close


class PrintsInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x).relu()
        print("between the two layers")
        return self.b(y).sum()


class BranchesOnValue(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            y = y * 2
        return y


class ThreeBranchingBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.s1, self.s2, self.s3 = BranchesOnValue(), BranchesOnValue(), BranchesOnValue()

    def forward(self, x):
        return self.s3(self.s2(self.s1(x))).relu()


def _helper_with_item(x):
    y = x * 3
    scale = y.abs().max().item()
    return y / scale


def _calls_helper(x):
    return _helper_with_item(x + 1).sin()


def test_print_inside_a_compiled_modules_forward_keeps_both_graphs(capsys):
    ember.manual_seed(0)
    model = PrintsInForward()
    x = ember.randn(2, 4)
    out = dynamo.explain(model)(x)
    assert (out.graph_count, out.graph_break_count, out.op_count) == (2, 1, 4)
    counter = CompileCounter()
    compiled = ember.compile(model, backend=counter)
    for _ in range(3):
        x = ember.randn(2, 4)
        assert_close(compiled(x), model(x))
    assert counter.frame_count == 2 and counter.op_count == 4  # no recompiles on the later calls


def test_breaks_in_nested_submodules_are_each_captured_around():
    ember.manual_seed(0)
    model = ThreeBranchingBlocks()
    x = ember.randn(2, 4)
    out = dynamo.explain(model)(x)
    assert out.graph_break_count == 3  # one per block's branch, each reported once
    assert all("bool() of a tensor" in r.reason for r in out.break_reasons)
    assert out.op_count >= 9  # each block's linear and sum, and the final relu, are in graphs
    compiled = ember.compile(model, backend="eager")
    for _ in range(4):  # new values take the other branches
        x = ember.randn(2, 4)
        assert_close(compiled(x), model(x))


def test_break_inside_an_inlined_function_and_gradients():
    x = ember.randn(5, requires_grad=True)
    out = dynamo.explain(_calls_helper)(x)
    # the caller before the call and after it, the helper before .item() and after it
    assert out.graph_break_count == 1 and out.graph_count == 4
    compiled = ember.compile(_calls_helper, backend="aot_eager")
    got = compiled(x)
    want = _calls_helper(x)
    assert_close(got, want)
    assert_close(ember.autograd.grad(got.sum(), x)[0], ember.autograd.grad(want.sum(), x)[0])
