"""Matmul templates on a GPU (``mode="max-autotune"``): real benchmarking, the on-disk choice, compiled == eager.

The twins of test_matmul_templates.py (which runs the template through Triton's interpreter in CI): here
the choices are timed on the device, so the template or the extern call may win; the tests that must run
the template's GPU code force its choice (:func:`_template_wins`). Every test is marked ``cuda``.
"""

from __future__ import annotations

import numpy as np
import pytest
from _triton_cases import cuda_device

import ember
import ember.nn.functional as F
from ember._inductor import config, select_algorithm
from ember._inductor.aot.decompositions import inductor_decompositions
from ember._inductor.compile_fx import compile_fx
from ember.fx.experimental.proxy_tensor import make_fx

pytestmark = pytest.mark.cuda


@pytest.fixture(autouse=True)
def _strict():
    with config.patch(fallback_on_compile_error=False, triton_on_cpu=False, max_autotune=True):
        yield


def _np(t):
    return t.detach().float().cpu().numpy().astype(np.float64)


def _graph(fn, *inputs):
    from ember._inductor.runtime import triton_graph

    gm = make_fx(fn, decomposition_table=inductor_decompositions())(*inputs)
    return triton_graph.compile_graph_triton(gm, list(inputs))


def _templates(compiled):
    return [s for s in compiled.steps if getattr(s, "is_template", False)]


def _template_wins(monkeypatch):
    """Time the choices for real but report the template's first config fastest (so its GPU code runs)."""
    real = select_algorithm.benchmark

    def favour_template(problem, template, configs, device):
        timings = real(problem, template, configs, device)
        assert timings["template 0"] < float("inf"), "the template's first config failed on the GPU"
        return {**timings, "template 0": 0.0}

    monkeypatch.setattr(select_algorithm, "benchmark", favour_template)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16])
def test_cuda_linear_bias_relu_template(dtype, fresh_cache, monkeypatch):
    dev = cuda_device()
    _template_wins(monkeypatch)
    x, w, b = (ember.randn(*s).to(dtype).to(dev) for s in ((300, 257), (129, 257), (129,)))
    fn = lambda x, w, b: ember.relu(F.linear(x, w, b))  # noqa: E731
    compiled = _graph(fn, x, w, b)
    (step,) = _templates(compiled)
    assert step.nodes, "the epilogue was not fused"
    got = compiled(x, w, b)
    tol = {ember.float32: 1e-4, ember.float16: 1e-2, ember.bfloat16: 3e-2}[dtype]
    np.testing.assert_allclose(_np(got), _np(fn(x, w, b)), rtol=tol, atol=tol * 10)


@pytest.mark.cuda
def test_cuda_bmm_and_residual_epilogues(fresh_cache, monkeypatch):
    dev = cuda_device()
    _template_wins(monkeypatch)
    a, b = ember.randn(4, 65, 48).half().to(dev), ember.randn(4, 48, 33).half().to(dev)
    got = _graph(lambda a, b: ember.sigmoid(ember.bmm(a, b)) * 2, a, b)(a, b)
    np.testing.assert_allclose(_np(got), _np(ember.sigmoid(ember.bmm(a, b)) * 2), rtol=1e-2, atol=1e-2)
    a, b, r = (ember.randn(*s).to(dev) for s in ((70, 40), (40, 90), (70, 90)))
    got = _graph(lambda a, b, r: ember.tanh(a @ b) + r, a, b, r)(a, b, r)
    np.testing.assert_allclose(_np(got), _np(ember.tanh(a @ b) + r), rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_cuda_first_compile_benchmarks_and_the_second_reads_the_cache(fresh_cache):
    dev = cuda_device()
    x, w, b = (ember.randn(*s).half().to(dev) for s in ((512, 256), (256, 256), (256,)))
    fn = lambda x, w, b: ember.relu(x @ w + b)  # noqa: E731
    before = dict(select_algorithm.stats)
    first = _graph(fn, x, w, b)
    assert select_algorithm.stats["benchmarked"] == before["benchmarked"] + 1
    decisions = [text for rule, text in first.scheduler.decisions if rule == "max_autotune"]
    assert decisions and "benchmarked" in decisions[0]
    assert list(fresh_cache.rglob("*.select.json"))
    second = _graph(fn, x, w, b)
    assert select_algorithm.stats["benchmarked"] == before["benchmarked"] + 1  # nothing timed again
    assert select_algorithm.stats["cache_hits"] == before["cache_hits"] + 1
    assert [s.config for s in _templates(second)] == [s.config for s in _templates(first)]
    np.testing.assert_allclose(_np(second(x, w, b)), _np(fn(x, w, b)), rtol=1e-2, atol=1e-2)


@pytest.mark.cuda
def test_cuda_training_step_forward_and_backward(fresh_cache, monkeypatch):
    dev = cuda_device()
    _template_wins(monkeypatch)
    x = ember.randn(96, 80).to(dev).requires_grad_()
    w = ember.randn(48, 80).to(dev).requires_grad_()
    b = ember.randn(48).to(dev).requires_grad_()
    fn = lambda x, w, b: F.gelu(F.linear(x, w, b))  # noqa: E731
    compiled = compile_fx(make_fx(fn)(x, w, b), [x, w, b])
    assert compiled.fallbacks == []
    g = ember.randn(96, 48).to(dev)
    compiled(x, w, b).backward(g)
    got = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    fn(x, w, b).backward(g)
    for a, e in zip(got, (x.grad, w.grad, b.grad)):
        np.testing.assert_allclose(_np(a), _np(e), rtol=1e-4, atol=1e-3)


@pytest.mark.cuda
def test_cuda_ember_compile_max_autotune_mode(fresh_cache):
    dev = cuda_device()
    model = ember.nn.Sequential(ember.nn.Linear(64, 128), ember.nn.ReLU(), ember.nn.Linear(128, 10)).to(dev)
    x = ember.randn(32, 64).to(dev)
    before = dict(select_algorithm.stats)
    with config.patch(max_autotune=None):
        compiled = ember.compile(model, mode="max-autotune")
        got = compiled(x)
    np.testing.assert_allclose(_np(got), _np(model(x)), rtol=1e-4, atol=1e-4)
    chosen = sum(select_algorithm.stats[k] - before[k] for k in ("benchmarked", "cache_hits"))
    assert chosen >= 2  # both products went through the selection


@pytest.mark.cuda
def test_cuda_default_mode_runs_cublas_then_one_fused_epilogue_kernel():
    dev = cuda_device()
    x, w, b = (ember.randn(*s).to(dev) for s in ((64, 96), (48, 96), (48,)))
    fn = lambda x, w, b: ember.relu(F.linear(x, w, b))  # noqa: E731
    with config.patch(max_autotune=False):
        compiled = _graph(fn, x, w, b)
    assert not _templates(compiled)
    kinds = ["extern" if not isinstance(s, list) else "kernel" for s in compiled.steps]
    assert kinds == ["extern", "kernel"]
    np.testing.assert_allclose(_np(compiled(x, w, b)), _np(fn(x, w, b)), rtol=1e-4, atol=1e-4)
