"""Backends: names, user callables, ember-inductor's aot_eager/inductor, errors (stand-in translator)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo
from ember._dynamo import backends
from ember._extensions import MissingDistributionError


def fn(x, w):
    return (x @ w).relu().sum(1) * 0.5


def inputs():
    return ember.randn(4, 3), ember.randn(3, 5)


def test_list_backends_names_the_builtin_ones():
    names = dynamo.list_backends()
    assert names == sorted(names) and "eager" in names
    assert ("inductor" in names) == (backends._inductor_backends() is not None)
    assert ember.compiler.list_backends() == names


def test_a_user_backend_gets_the_graph_and_real_example_inputs(fake):
    seen = []

    def my_backend(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    x, w = inputs()
    f = ember.compile(fn, backend=my_backend)
    np.testing.assert_allclose(np.asarray(f(x, w)), np.asarray(fn(x, w)), rtol=1e-6)
    f(x, w)
    ((gm, example),) = seen
    assert isinstance(gm, ember.fx.GraphModule)
    assert example[0] is x and example[1] is w
    assert len([n for n in gm.graph.nodes if n.op == "placeholder"]) == 2


def test_the_garbage_collector_is_off_during_a_capture_and_on_after(fake):
    """A capture and its backend run with Python's cyclic collector off (its full collections walked the
    whole heap: issue 28); it is on again after the call, and a caller's own choice is left alone."""
    import gc

    states = []

    def my_backend(gm, example_inputs):
        states.append(gc.isenabled())
        return gm.forward

    x, w = inputs()
    f = ember.compile(fn, backend=my_backend)
    np.testing.assert_allclose(np.asarray(f(x, w)), np.asarray(fn(x, w)), rtol=1e-6)
    assert states == [False] and gc.isenabled()
    gc.disable()
    try:
        ember.compile(fn, backend=my_backend)(x, w)
        assert states == [False, False] and not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("name", ["eager", "aot_eager", "inductor"])
def test_named_backends_equal_eager(fake, name):
    if name != "eager" and backends._inductor_backends() is None:
        pytest.skip("ember-inductor is not installed")
    x, w = inputs()
    f = ember.compile(fn, backend=name)
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(f(x, w)), np.asarray(fn(x, w)), rtol=1e-5, atol=1e-6)
    assert fake.calls == 1


def test_inductor_backends_without_ember_inductor_name_the_distribution(monkeypatch):
    monkeypatch.setattr(backends, "_inductor_backends", lambda: None)
    assert "inductor" not in dynamo.list_backends()
    for name in ("inductor", "aot_eager"):
        with pytest.raises(MissingDistributionError, match="ember-inductor"):
            ember.compile(fn, backend=name)
    with pytest.raises(MissingDistributionError, match="ember-inductor"):
        ember.compile(fn)  # the default backend


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'nope'; the backends are \[.*'eager'"):
        ember.compile(fn, backend="nope")
    with pytest.raises(TypeError, match="backend must be a str or a callable"):
        ember.compile(fn, backend=3)


def test_register_backend_by_name(fake):
    calls = []

    @backends.register_backend(name="test_counting_backend")
    def counting(gm, example_inputs):
        calls.append(1)
        return gm.forward

    try:
        assert "test_counting_backend" in dynamo.list_backends()
        with pytest.raises(ValueError, match="already registered"):
            backends.register_backend(counting, name="test_counting_backend")
        f = ember.compile(fn, backend="test_counting_backend")
        f(*inputs())
        assert calls == [1]
    finally:
        backends._BACKENDS.pop("test_counting_backend")


def test_a_failing_backend_raises_backend_compiler_failed(fake):
    def broken(gm, example_inputs):
        raise ValueError("no luck")

    f = ember.compile(fn, backend=broken)
    with pytest.raises(dynamo.BackendCompilerFailed, match="backend='broken' raised:\nValueError: no luck") as info:
        f(*inputs())
    assert isinstance(info.value.inner_exception, ValueError)


def test_a_graph_without_ops_skips_the_backend(fake):
    calls = []

    def backend(gm, example_inputs):
        calls.append(1)
        return gm.forward

    f = ember.compile(lambda x: x, backend=backend)
    x = ember.randn(2)
    assert f(x) is x
    assert calls == []


def test_inductor_options_are_checked_at_compile_time():
    if backends._inductor_backends() is None:
        pytest.skip("ember-inductor is not installed")
    with pytest.raises(RuntimeError, match="unknown inductor option"):
        ember.compile(fn, options={"no_such_option": 1})


def test_eager_backend_drops_only_default_arguments():
    from ember.fx.experimental.proxy_tensor import make_fx

    def g(x, y):
        return ember.add(x, y, alpha=1).sum(0, keepdim=False) + ember.add(x, y, alpha=2).sum(0, keepdim=True)

    x, y = ember.randn(3, 2), ember.randn(3, 2)
    gm = make_fx(g)(x, y)
    run = backends.eager(gm, [x, y])
    calls = {
        (n.target.__name__, n.args[1:], tuple(n.kwargs.items())) for n in gm.graph.nodes if n.op == "call_function"
    }
    assert ("add", (), ()) not in calls  # the positional y is kept, alpha=1 dropped
    kept = [n for n in gm.graph.nodes if n.op == "call_function" and n.target.__name__ == "add"]
    assert [dict(n.kwargs) for n in kept[:2]] == [{}, {"alpha": 2}]
    sums = [n for n in gm.graph.nodes if n.op == "call_function" and n.target.__name__ == "sum"]
    assert [n.args[1:] for n in sums] == [(0,), (0, True)]  # keepdim=False is the default, True is not
    np.testing.assert_allclose(np.asarray(run(x, y)), np.asarray(g(x, y)), rtol=1e-6)


def test_testing_backends_count_and_record(fake):
    from ember._dynamo.testing import CompileCounter, CompileCounterWithBackend, EagerAndRecordGraphs

    x, w = inputs()
    for backend in (CompileCounter(), CompileCounterWithBackend("eager"), EagerAndRecordGraphs()):
        dynamo.reset()
        f = ember.compile(fn, backend=backend)
        for _ in range(2):
            np.testing.assert_allclose(np.asarray(f(x, w)), np.asarray(fn(x, w)), rtol=1e-6)
        if isinstance(backend, CompileCounter):
            assert backend.frame_count == 1 and backend.op_count == 4  # matmul, relu, sum, mul
        if not isinstance(backend, CompileCounter) or isinstance(backend, CompileCounterWithBackend):
            assert len(backend.graphs) == 1
