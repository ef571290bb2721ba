"""compile_fx and the backends: compiled equals eager, forward and backward; fallbacks are logged.

The compiler's own failures must fail these tests, so they run with
``config.fallback_on_compile_error = False`` (the ``strict`` fixture); the
fallback path is tested on purpose with a stubbed compiler core.
"""

from __future__ import annotations

import functools
import logging

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember._inductor import backends, config
from ember._inductor import compile_fx as compile_fx_module
from ember._inductor.compile_fx import compile_fx
from ember._inductor.exc import CppCompileError, LoweringException
from ember.fx import symbolic_trace
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close


@pytest.fixture
def strict():
    """A compiler failure raises instead of running eagerly."""
    with config.patch(fallback_on_compile_error=False):
        yield


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


# --------------------------------------------------------------------------- fallbacks (stubbed core)


def _stub_aot(gm, example_inputs, *, fw_compiler, inference_compiler=None, **_):
    """aot_module_simplified reduced to its inference path: the graph goes straight to the compiler."""
    compiled = (inference_compiler or fw_compiler)(gm, example_inputs)
    return lambda *args: _first(compiled(*args))


@pytest.fixture
def stub_aot(monkeypatch):
    monkeypatch.setattr(compile_fx_module, "_aot_pieces", lambda: (_stub_aot, None, None))


def _failing_core(exc):
    def core(gm, example_inputs):
        raise exc

    return core


def _graph():
    x = ember.randn(4, 3)
    return make_fx(lambda t: ember.tanh(t) + 1)(x), x


@pytest.mark.parametrize("strict_mode", [False, True])
def test_lowering_exception_runs_eagerly_and_logs(stub_aot, monkeypatch, caplog, strict_mode):
    monkeypatch.setattr(compile_fx_module, "_core_compile", _failing_core(LoweringException("no lowering for op foo")))
    gm, x = _graph()
    with config.patch(fallback_on_compile_error=not strict_mode), caplog.at_level(logging.WARNING, "ember._inductor"):
        f = compile_fx(gm, [x])
    # a graph the compiler cannot handle is never an error, whatever the setting
    assert_close(f(x), ember.tanh(x) + 1)
    assert len(f.fallbacks) == 1 and "no lowering for op foo" in f.fallbacks[0]
    records = [r for r in caplog.records if r.name == "ember._inductor"]
    assert records and "no lowering for op foo" in records[0].getMessage()
    assert records[0].levelno == logging.WARNING


def test_compile_error_raises_when_fallback_off(stub_aot, monkeypatch):
    error = CppCompileError("/tmp/k.cpp", ["g++", "k.cpp"], "k.cpp:1: error: expected ';'")
    monkeypatch.setattr(compile_fx_module, "_core_compile", _failing_core(error))
    gm, x = _graph()
    with config.patch(fallback_on_compile_error=False), pytest.raises(CppCompileError, match="expected ';'"):
        compile_fx(gm, [x])


def test_compile_error_falls_back_when_on(stub_aot, monkeypatch, caplog):
    error = CppCompileError("/tmp/k.cpp", ["g++", "k.cpp"], "k.cpp:1: error: expected ';'")
    monkeypatch.setattr(compile_fx_module, "_core_compile", _failing_core(error))
    gm, x = _graph()
    with config.patch(fallback_on_compile_error=True), caplog.at_level(logging.WARNING, "ember._inductor"):
        f = compile_fx(gm, [x])
    assert_close(f(x), ember.tanh(x) + 1)
    assert "CppCompileError" in f.fallbacks[0] and "/tmp/k.cpp" in f.fallbacks[0]
    assert any("expected ';'" in r.getMessage() for r in caplog.records)


def test_aot_failure_runs_whole_graph_eagerly(monkeypatch, caplog):
    def broken_aot(*args, **kwargs):
        raise RuntimeError("trace failed here")

    monkeypatch.setattr(compile_fx_module, "_aot_pieces", lambda: (broken_aot, None, None))
    gm, x = _graph()
    with config.patch(fallback_on_compile_error=True), caplog.at_level(logging.WARNING, "ember._inductor"):
        f = compile_fx(gm, [x])
    assert_close(_first(f(x)), ember.tanh(x) + 1)
    assert "trace failed here" in f.fallbacks[0]
    with config.patch(fallback_on_compile_error=False), pytest.raises(RuntimeError, match="trace failed here"):
        compile_fx(gm, [x])


def test_data_dependent_trace_is_a_known_limit(caplog, strict):
    # aot cannot trace nonzero (its output shape depends on values): eager, logged, even when strict
    def fn(x):
        return ember.nonzero(x > 0).sum() + x.sum()

    x = ember.randn(5)
    gm = make_fx(fn)(x)
    with caplog.at_level(logging.WARNING, "ember._inductor"):
        f = compile_fx(gm, [x])
    assert_close(_first(f(x)), fn(x))
    assert len(f.fallbacks) == 1 and "nonzero" in f.fallbacks[0]
    assert any("nonzero" in r.getMessage() for r in caplog.records if r.name == "ember._inductor")


def test_known_limits_are_inductor_errors_but_not_compile_errors():
    from ember._inductor.compile_fx import is_known_limit
    from ember._inductor.exc import InductorError

    assert is_known_limit(LoweringException("x")) and is_known_limit(InductorError("aot: data-dependent"))
    assert not is_known_limit(CppCompileError("a.cpp", ["g++"], "error"))
    assert not is_known_limit(RuntimeError("a bug"))


def test_fallback_reason_in_debug_output(stub_aot, monkeypatch, tmp_path):
    monkeypatch.setattr(compile_fx_module, "_core_compile", _failing_core(LoweringException("no lowering for op foo")))
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    monkeypatch.setenv("EMBER_COMPILE_DEBUG_DIR", str(tmp_path))
    gm, x = _graph()
    compile_fx(gm, [x], name="tanh_plus_one")
    files = sorted(p.name for p in (tmp_path / "tanh_plus_one").iterdir())
    assert files[0] == "01_fx_graph.txt" and files[1] == "02_inference_graph.txt"
    assert files[-1].endswith("_inference_fallback.txt")
    assert "no lowering for op foo" in (tmp_path / "tanh_plus_one" / files[-1]).read_text()


# --------------------------------------------------------------------------- backends registry


def test_backend_registry():
    assert {"eager", "aot_eager", "inductor"} <= set(backends.list_backends())
    assert backends.lookup_backend("eager") is backends.eager
    my = lambda gm, inputs: gm.forward  # noqa: E731
    assert backends.lookup_backend(my) is my
    with pytest.raises(ValueError, match="unknown backend 'nope'.*eager"):
        backends.lookup_backend("nope")
    with pytest.raises(ValueError, match="already registered"):
        backends.register_backend(my, name="eager")
    with pytest.raises(TypeError, match="callable"):
        backends.register_backend(3, name="three")


def test_register_backend_decorator(monkeypatch):
    monkeypatch.setattr(backends, "_BACKENDS", dict(backends._BACKENDS))

    @backends.register_backend(name="doubling_test_backend")
    def doubling(gm, example_inputs):
        return lambda *args: gm(*args) * 2

    gm, x = _graph()
    f = backends.lookup_backend("doubling_test_backend")(gm, [x])
    assert_close(f(x), (ember.tanh(x) + 1) * 2)


def test_eager_backend():
    gm, x = _graph()
    assert_close(backends.lookup_backend("eager")(gm, [x])(x), ember.tanh(x) + 1)


# --------------------------------------------------------------------------- the real pipeline


def _pointwise(a, b):
    return ember.nn.functional.gelu(a + b) * 0.5 + ember.sigmoid(a)


def _softmax_mix(a, b):
    return (ember.softmax(a, dim=-1) * b).sum(dim=1) + a.mean()


def _matmul_chain(a, b):
    return ember.relu(a @ b.t()).exp().sum(dim=0)


def _views(a, b):
    return (a.t().reshape(-1)[::2] * 3 + b.reshape(-1)[1::2]).view(2, -1)


FUNCTIONS = [_pointwise, _softmax_mix, _matmul_chain, _views]


def _inputs(requires_grad=False, dtype=ember.float32):
    gen = np.random.default_rng(0)
    a = ember.tensor(gen.standard_normal((6, 4)), dtype=dtype, requires_grad=requires_grad)
    b = ember.tensor(gen.standard_normal((6, 4)), dtype=dtype, requires_grad=requires_grad)
    return a, b


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_functions_forward(fn, strict):
    a, b = _inputs()
    gm = make_fx(fn)(a, b)
    compiled = compile_fx(gm, [a, b])
    assert_close(_first(compiled(a, b)), fn(a, b), rtol=1e-5, atol=1e-6)
    assert compiled.fallbacks == []
    # other values of the same shapes reuse the compiled code
    c, d = a * 2, b - 1
    assert_close(_first(compiled(c, d)), fn(c, d), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_functions_backward(fn, strict):
    a, b = _inputs(requires_grad=True, dtype=ember.float64)
    gm = make_fx(fn)(a, b)
    compiled = compile_fx(gm, [a, b])
    out = _first(compiled(a, b))
    expected = fn(a, b)
    assert_close(out, expected)
    cotangent = ember.randn(*expected.shape, dtype=expected.dtype)
    got = ember.autograd.grad(out, (a, b), cotangent)
    want = ember.autograd.grad(expected, (a, b), cotangent)
    for g, w in zip(got, want):
        assert_close(g, w)
    assert compiled.fallbacks == []  # both graphs compiled (the backward at the first backward)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_aot_decompositions_and_partition_keep_values(fn, strict):
    # compile_fx's aot half (decompositions + min-cut partition) with each graph run eagerly
    a, b = _inputs(requires_grad=True, dtype=ember.float64)
    gm = make_fx(fn)(a, b)
    seen = []

    def inner(graph, inputs):
        seen.append(graph)
        return compile_fx_module._eager_callable(graph)

    compiled = compile_fx(gm, [a, b], inner_compile=inner)
    out = _first(compiled(a, b))
    expected = fn(a, b)
    assert_close(out, expected)
    got = ember.autograd.grad(out.sum(), (a, b))
    want = ember.autograd.grad(expected.sum(), (a, b))
    for g, w in zip(got, want):
        assert_close(g, w)
    assert len(seen) == 2  # a forward and a backward graph


class _SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.norm = nn.LayerNorm(8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(ember.nn.functional.gelu(self.norm(self.fc1(x)))).sum(dim=-1)


def test_module_forward_and_parameter_grads(strict):
    ember.manual_seed(0)
    net = _SmallNet()
    x = ember.randn(5, 4)
    gm = symbolic_trace(net)
    compiled = compile_fx(gm, [x])
    out = _first(compiled(x))
    expected = net(x)
    assert_close(out, expected, rtol=1e-5, atol=1e-6)
    params = list(net.parameters())
    got = ember.autograd.grad(out.sum(), params)
    want = ember.autograd.grad(expected.sum(), params)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert compiled.fallbacks == []


def test_aot_eager_backend_forward_and_backward():
    a, b = _inputs(requires_grad=True, dtype=ember.float64)
    gm = make_fx(_softmax_mix)(a, b)
    f = backends.lookup_backend("aot_eager")(gm, [a, b])
    out = _first(f(a, b))
    expected = _softmax_mix(a, b)
    assert_close(out, expected)
    got = ember.autograd.grad(out.sum(), (a, b))
    want = ember.autograd.grad(expected.sum(), (a, b))
    for g, w in zip(got, want):
        assert_close(g, w)


def test_inductor_backend_is_compile_fx(strict):
    a, b = _inputs()
    gm = make_fx(_pointwise)(a, b)
    f = backends.lookup_backend("inductor")(gm, [a, b])
    assert_close(_first(f(a, b)), _pointwise(a, b), rtol=1e-5, atol=1e-6)
    assert f.fallbacks == []


def test_debug_output_follows_the_pipeline(strict, monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_COMPILE_DEBUG", "1")
    monkeypatch.setenv("EMBER_COMPILE_DEBUG_DIR", str(tmp_path))
    a, b = _inputs(requires_grad=True)
    gm = make_fx(_pointwise)(a, b)
    compiled = compile_fx(gm, [a, b], name="pointwise")
    _first(compiled(a, b)).sum().backward()
    files = sorted(p.name for p in (tmp_path / "pointwise").iterdir())
    assert files[0] == "01_fx_graph.txt"
    stages = [name[3:-4] for name in files]
    # the forward graph is written before the backward graph, and C++ source appears
    assert stages.index("forward_graph") < stages.index("backward_graph")
    assert any("cpp" in stage for stage in stages), stages
    assert "def forward" in (tmp_path / "pointwise" / "01_fx_graph.txt").read_text()


def test_a_plain_function_is_refused_with_a_hint():
    with pytest.raises(TypeError, match="make_fx"):
        compile_fx(lambda t: t * 2, [ember.ones(2)])


def _compiled_graph_of(fn, example):
    from ember._inductor.codegen.wrapper import compile_graph

    gm = make_fx(fn)(example)
    return compile_graph(gm, [example])


def test_an_input_in_another_layout_is_copied_into_the_examples():
    """A saved activation the compiled forward returns dense where the joint graph had a slice
    (nn.GRU's gates, strides (15, 1)) reaches the backward in another layout: same values."""
    fn = lambda x: (x * 2).exp()  # noqa: E731
    compiled = _compiled_graph_of(fn, ember.randn(2, 15)[:, :5])
    x = ember.randn(2, 5)
    assert x.stride() == (5, 1)
    assert_close(compiled(x), fn(x))
    transposed = ember.randn(5, 2).t()
    assert_close(compiled(transposed), fn(transposed))


def test_an_input_for_an_expanded_example_must_be_expanded_too():
    """The kernels read one element along an expanded (stride 0) dimension: a value that does not
    repeat there cannot be copied into that layout, and is refused."""
    compiled = _compiled_graph_of(lambda x: x + 1, ember.randn(2, 1).expand(2, 5))
    with pytest.raises(ValueError, match="strides"):
        compiled(ember.randn(2, 5))


# --------------------------------------------------------------------------- the garbage collector


def test_compile_pauses_the_garbage_collector(strict, monkeypatch):
    """No cyclic collection runs inside a compile (they walked the whole heap: issue 28); the collector
    is on again afterwards, also after a failing compile, and stays off when the caller turned it off."""
    import gc

    aot, decompositions, partition = compile_fx_module._aot_pieces()
    collections, enabled, active = [], [], []

    def record(phase, info):
        if phase == "start" and active:
            collections.append(info["generation"])

    def spied_aot(*args, **kwargs):
        enabled.append(gc.isenabled())
        active.append(True)
        try:
            if kwargs.pop("fail", False):
                raise ValueError("stubbed aot failure")
            return aot(*args, **kwargs)
        finally:
            active.clear()

    monkeypatch.setattr(compile_fx_module, "_aot_pieces", lambda: (spied_aot, decompositions, partition))
    x = ember.randn(16, 16, requires_grad=True)
    gm = make_fx(lambda a: (a.sin() * a).sum())(x)
    gc.callbacks.append(record)
    try:
        compiled = compile_fx(gm, [x])  # thousands of objects: collections would run with gc on
        assert enabled == [False] and collections == [] and gc.isenabled()
        assert_close(compiled(x), (x.sin() * x).sum())
        failing = functools.partial(spied_aot, fail=True)
        monkeypatch.setattr(compile_fx_module, "_aot_pieces", lambda: (failing, decompositions, partition))
        with config.patch(fallback_on_compile_error=True):
            compile_fx(gm, [x])
            assert gc.isenabled()
            gc.disable()
            try:
                compile_fx(gm, [x])
                assert not gc.isenabled()
            finally:
                gc.enable()
    finally:
        gc.callbacks.remove(record)
