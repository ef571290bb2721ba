"""ember.compile end to end with the real translator: values, recompiles, graph breaks, modules, explain."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo
from ember._dynamo.exc import Unsupported
from ember._dynamo.testing import EagerAndRecordGraphs

pytestmark = pytest.mark.usefixtures("fresh_caches")  # conftest.py: empty compile caches for every test


def values(t):
    return np.asarray(t.detach())


def straight(x, y):
    z = x * y + 1
    return z.sin().sum(0), z


def test_straight_line_function_equals_eager_and_hits_after_the_first_call():
    counter = EagerAndRecordGraphs()
    f = ember.compile(straight, backend=counter)
    x, y = ember.randn(4, 3), ember.randn(4, 3)
    for _ in range(3):
        got, want = f(x, y), straight(x, y)
        for a, b in zip(got, want):
            np.testing.assert_allclose(values(a), values(b), rtol=1e-6)
    assert len(counter.graphs) == 1 and len(f._cache.entries) == 1


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda x: x.double(), "dtype mismatch"),
        (lambda x: x.clone().requires_grad_(), "requires_grad"),
        (lambda x: ember.randn(4, 4), "size mismatch at index 1"),
    ],
    ids=["dtype", "requires_grad", "size"],
)
def test_one_tensor_change_is_one_recompile(change, reason):
    counter = EagerAndRecordGraphs()
    f = ember.compile(straight, backend=counter)
    x = ember.randn(4, 3)
    f(x, x)
    other = change(x)
    f(other, other)
    f(other, other)
    f(x, x)
    assert len(counter.graphs) == 2
    assert len(f._cache.recompile_reasons) == 1 and reason in f._cache.recompile_reasons[0]


def scale_by(x, k):
    return x * k


def test_a_python_constant_argument_is_guarded():
    counter = EagerAndRecordGraphs()
    f = ember.compile(scale_by, backend=counter)
    x = ember.ones(2)
    np.testing.assert_array_equal(values(f(x, 2)), [2.0, 2.0])
    np.testing.assert_array_equal(values(f(x, 3)), [3.0, 3.0])
    f(x, 2)
    assert len(counter.graphs) == 2


def with_print(x):
    y = x.sin()
    print("a graph break")
    return y.cos()


def test_a_graph_break_runs_the_rest_in_a_resume_function(capsys):
    counter = EagerAndRecordGraphs()
    f = ember.compile(with_print, backend=counter)
    x = ember.randn(3)
    np.testing.assert_allclose(values(f(x)), values(x.sin().cos()), rtol=1e-6)
    np.testing.assert_allclose(values(f(x)), values(x.sin().cos()), rtol=1e-6)
    assert capsys.readouterr().out == "a graph break\n" * 2  # the print runs natively on every call
    assert len(counter.graphs) == 2  # before and after the break, each captured once


def test_explain_lists_the_break_with_its_source_line(capsys):
    out = dynamo.explain(with_print)(ember.randn(3))
    assert out.graph_count == 2 and out.graph_break_count == 1
    (reason,) = out.break_reasons
    assert "print" in reason.reason
    frame = reason.user_stack[0]
    assert frame.filename == __file__ and 'print("a graph break")' in frame.line
    assert [len(ops) for ops in out.ops_per_graph] == [1, 1]
    assert "Graph Break Count: 1" in str(out)


def test_fullgraph_refuses_the_break_with_reason_and_line():
    f = ember.compile(with_print, backend="eager", fullgraph=True)
    with pytest.raises(Unsupported, match="print") as info:
        f(ember.randn(3))
    assert 'print("a graph break")' in str(info.value)


class Block(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(3, 3)
        self.norm = ember.nn.LayerNorm(3)

    def forward(self, x):
        return self.norm(self.fc(x).relu() + x)


def test_optimized_module_trains_like_eager():
    ember.manual_seed(0)
    eager = Block()
    ember.manual_seed(0)
    compiled_model = Block()
    opt = ember.compile(compiled_model, backend="eager", fullgraph=True)
    x = ember.randn(5, 3)
    for model in (eager, opt):
        model(x).pow(2).sum().backward()
    for (name, a), (_, b) in zip(eager.named_parameters(), compiled_model.named_parameters()):
        np.testing.assert_allclose(values(b.grad), values(a.grad), rtol=1e-5, err_msg=name)
    assert len(opt._compiled_call._cache.entries) == 1


def test_module_training_flag_is_guarded():
    counter = EagerAndRecordGraphs()
    model = ember.nn.Sequential(ember.nn.Linear(2, 2), ember.nn.Dropout(0.5))
    opt = ember.compile(model, backend=counter)
    x = ember.randn(3, 2)
    opt.eval()
    np.testing.assert_allclose(values(opt(x)), values(model(x)), rtol=1e-6)
    opt.train()
    opt(x)
    opt.eval()
    opt(x)
    assert len(counter.graphs) == 2


def test_forward_hooks_run_in_the_compiled_call():
    model = ember.nn.Linear(2, 2)
    model.register_forward_hook(lambda module, args, out: out * 10)
    counter = EagerAndRecordGraphs()
    opt = ember.compile(model, backend=counter, fullgraph=True)
    x = ember.randn(1, 2)
    np.testing.assert_allclose(values(opt(x)), values(model(x)), rtol=1e-6)
    (gm,) = counter.graphs  # captured, hook included: not run eagerly
    assert any(getattr(n.target, "name", "") == "mul" for n in gm.graph.nodes), gm.graph


def test_module_compile_in_place_end_to_end():
    ember.manual_seed(0)
    model = Block()
    x = ember.randn(2, 3)
    expected = values(model(x))
    model.compile(backend="eager")
    np.testing.assert_allclose(values(model(x)), expected, rtol=1e-6)
    assert len(model._compiled_call_impl._cache.entries) == 1


def test_aot_eager_backend_end_to_end():
    pytest.importorskip("ember._inductor", reason="ember-inductor is not installed")
    f = ember.compile(straight, backend="aot_eager", fullgraph=True)  # captured, not run eagerly
    x = ember.randn(4, 3, requires_grad=True)
    y = ember.randn(4, 3)
    out, _ = f(x, y)
    out.sum().backward()
    x2 = x.detach().clone().requires_grad_()
    straight(x2, y)[0].sum().backward()
    np.testing.assert_allclose(values(x.grad), values(x2.grad), rtol=1e-5)


inner = ember.compile(lambda x: x.sin(), backend="eager")


def calls_compiled(x):
    return inner(x) + 1


def test_a_compiled_function_called_inside_one_is_inlined():
    out = dynamo.explain(calls_compiled)(ember.randn(3))
    assert out.graph_count == 1 and out.graph_break_count == 0 and out.op_count == 2


@ember.compiler.disable
def disabled_helper(x):
    return x.cos()


def calls_disabled(x):
    return disabled_helper(x.sin()) + 1


def test_a_disabled_function_is_a_graph_break():
    out = dynamo.explain(calls_disabled)(ember.randn(3))
    assert out.graph_break_count == 1 and out.graph_count == 2
    assert out.break_reasons[0].user_stack[0].filename == __file__  # at the call, not inside the wrapper


def test_nested_and_disabled_calls_give_the_eager_values():
    x = ember.randn(3)
    f = ember.compile(calls_compiled, backend="eager")
    np.testing.assert_allclose(values(f(x)), values(x.sin() + 1), rtol=1e-6)
    g = ember.compile(calls_disabled, backend="eager")
    np.testing.assert_allclose(values(g(x)), values(x.sin().cos() + 1), rtol=1e-6)


def test_deepcopy_of_compiled_modules_compiles_the_copy():
    import copy

    x = ember.randn(1, 2)
    opt = ember.compile(ember.nn.Linear(2, 2), backend="eager")
    opt(x)
    dup = copy.deepcopy(opt)
    assert dup._orig_mod is not opt._orig_mod and dup._compiled_call._orig_fn.__self__ is dup._orig_mod
    with ember.no_grad():
        dup._orig_mod.weight.add_(1.0)  # the copy's weights, not the original's, are read
    np.testing.assert_allclose(values(dup(x)), values(dup._orig_mod(x)), rtol=1e-6)
    assert not np.allclose(values(dup(x)), values(opt(x)))
    model = ember.nn.Linear(2, 2)
    model.compile(backend="eager")
    twin = copy.deepcopy(model)
    assert twin._compiled_call_impl._orig_fn.__self__ is twin
    np.testing.assert_allclose(values(twin(x)), values(model(x)), rtol=1e-6)


def test_a_cache_entry_does_not_keep_the_first_call_tensors_alive():
    import gc
    import weakref

    f = ember.compile(straight, backend="eager")
    x, y = ember.randn(4, 3), ember.randn(4, 3)
    f(x, y)
    refs = [weakref.ref(x), weakref.ref(y)]
    del x, y
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert len(f._cache.entries) == 1
