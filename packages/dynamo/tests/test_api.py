"""ember.compile's API: decorator forms, arguments, methods, modules, disable, explain (stand-in translator)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo


def values(t):
    return np.asarray(t.detach())


def double_sin(x):
    """Doc of double_sin."""
    return (x * 2).sin()


def test_decorator_forms(fake):
    @ember.compile
    def a(x):
        return x + 1

    @ember.compile(backend="eager")
    def b(x):
        return x + 2

    x = ember.zeros(2)
    np.testing.assert_array_equal(values(b(x)), [2.0, 2.0])
    assert isinstance(b, dynamo.CompiledFunction) and isinstance(a, dynamo.CompiledFunction)
    assert a._settings.backend_name == "inductor" and b._settings.backend_name == "eager"
    assert ember.compile(double_sin, disable=True) is double_sin
    assert dynamo.optimize("eager")(double_sin)._settings.backend_name == "eager"


def test_the_wrapper_looks_like_the_function(fake):
    f = ember.compile(double_sin, backend="eager")
    assert f.__name__ == "double_sin" and f.__doc__ == "Doc of double_sin." and f.__wrapped__ is double_sin
    with pytest.raises(TypeError, match=r"double_sin\(\) missing 1 required positional argument: 'x'"):
        f()
    with pytest.raises(TypeError, match="unexpected keyword argument 'y'"):
        f(ember.ones(1), y=2)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"fullgraph": 1}, TypeError, "fullgraph must be a bool"),
        ({"dynamic": "yes"}, TypeError, "dynamic must be None, True or False"),
        ({"mode": "fastest"}, RuntimeError, "unknown mode 'fastest'"),
        ({"mode": "default", "options": {}}, RuntimeError, "either mode or options"),
        ({"options": [1]}, TypeError, "options must be a dict"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, words):
    with pytest.raises(error, match=words):
        ember.compile(double_sin, backend="eager", **kwargs)


def test_builtins_have_no_bytecode():
    with pytest.raises(TypeError, match="built-in and C functions have no bytecode"):
        ember.compile(len, backend="eager")


def test_methods_and_callable_objects(fake):
    class Scaler:
        def __init__(self, k):
            self.k = k

        @ember.compile(backend="eager")
        def apply(self, x):
            return x * self.k

        def __call__(self, x):
            return x + self.k

    s = Scaler(3.0)
    x = ember.ones(2)
    np.testing.assert_array_equal(values(s.apply(x)), [3.0, 3.0])
    np.testing.assert_array_equal(
        values(ember.compile(s.apply.__func__.__wrapped__.__get__(s), backend="eager")(x)), [3.0, 3.0]
    )
    np.testing.assert_array_equal(values(ember.compile(s, backend="eager")(x)), [4.0, 4.0])
    partial = functools.partial(double_sin)
    with pytest.raises(TypeError, match="ember.compile expects a Python function"):
        ember.compile(partial, backend="eager")


def test_compiling_a_compiled_function_replaces_its_settings(fake):
    f = ember.compile(double_sin, backend="eager")
    g = ember.compile(f, backend="eager", fullgraph=True)
    assert g._orig_fn is double_sin and g._settings.fullgraph


def test_disable_runs_natively_and_stops_nested_compiles(fake):
    inner = ember.compile(double_sin, backend="eager")

    @dynamo.disable
    def outer(x):
        return inner(x) + 1

    x = ember.ones(2)
    np.testing.assert_allclose(values(outer(x)), values(double_sin(x) + 1))
    assert fake.calls == 0  # inner ran eagerly inside a recursively disabled function
    assert dynamo.is_disabled(outer) and ember.compile(outer, backend="eager") is outer

    @ember.compiler.disable(recursive=False)
    def shallow(x):
        return inner(x)

    shallow(x)
    assert fake.calls == 1  # not recursive: the compiled function it calls compiles
    assert not shallow.recursive and dynamo.is_disabled(shallow)
    inner(x)
    assert fake.calls == 1


def test_nested_compiled_functions_compile_separately(fake):
    inner = ember.compile(double_sin, backend="eager")

    def outer(x):
        return inner(x) * 2

    f = ember.compile(outer, backend="eager")
    x = ember.ones(3)
    np.testing.assert_allclose(values(f(x)), values(double_sin(x) * 2))
    # the stand-in translator runs the call natively; the real one inlines inner's original function
    assert fake.calls >= 1


class TwoLayer(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = ember.nn.Linear(3, 4)
        self.fc2 = ember.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def test_optimized_module(fake):
    ember.manual_seed(0)
    model = TwoLayer()
    opt = ember.compile(model, backend="eager")
    assert isinstance(opt, dynamo.OptimizedModule) and isinstance(opt, ember.nn.Module)
    assert opt._orig_mod is model
    assert list(opt.state_dict()) == [f"_orig_mod.{k}" for k in model.state_dict()]
    assert opt.fc1 is model.fc1  # attributes come from the wrapped module
    x = ember.randn(5, 3)
    np.testing.assert_allclose(values(opt(x)), values(model(x)), rtol=1e-6)
    opt.eval()
    assert not model.training
    # each compiled module has its own code object, so its own cache
    other = ember.compile(TwoLayer(), backend="eager")
    assert other._compiled_call._cache is not opt._compiled_call._cache


def test_module_compile_in_place(fake):
    ember.manual_seed(0)
    model = TwoLayer()
    keys = list(model.state_dict())
    x = ember.randn(2, 3)
    expected = values(model(x))
    assert model.compile(backend="eager") is None
    assert type(model) is TwoLayer and list(model.state_dict()) == keys
    np.testing.assert_allclose(values(model(x)), expected, rtol=1e-6)
    model(x)
    assert fake.calls == 1
    with pytest.raises(TypeError, match="unexpected keyword"):
        model.compile(backends="eager")


def test_explain_reports_graphs_and_leaves_the_cache_alone(fake):
    f = ember.compile(double_sin, backend="eager")
    x = ember.ones(2)
    f(x)
    entries = list(f._cache.entries)
    out = dynamo.explain(f)(x)
    assert out.graph_count == 1 and out.graph_break_count == 0 and out.break_reasons == []
    assert out.op_count == 2 and [len(ops) for ops in out.ops_per_graph] == [2]
    assert out.out_guards and "Graph Count: 1" in str(out)
    assert f._cache.entries == entries
    assert dynamo.explain(double_sin, x).graph_count == 1  # the older spelling


def test_is_compiling_is_false_outside_tracing():
    assert dynamo.is_compiling() is False and ember.compiler.is_compiling() is False


def test_ember_compiler_names(fake):
    f = ember.compiler.compile(double_sin, backend="eager")
    assert isinstance(f, dynamo.CompiledFunction) and f._orig_fn is double_sin
    assert ember.compiler.is_exporting() is False and ember.compiler.is_dynamo_compiling() is False
    assert ember.compiler.cudagraph_mark_step_begin() is None
    ember.compiler.reset()
