"""End-to-end fusion on decomposed graphs: the structure of the generated kernels and their values."""

from __future__ import annotations

import pytest

import ember
from ember._inductor import ir
from ember._inductor.aot.decompositions import inductor_decompositions
from ember._inductor.codegen.wrapper import compile_graph
from ember._inductor.scheduler import FusedKernel
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close


def compile_decomposed(fn, *inputs):
    gm = make_fx(fn, decomposition_table=inductor_decompositions())(*inputs)
    return compile_graph(gm, list(inputs))


def gelu_chain(a, b):
    return ember.nn.functional.gelu(a + b) * 0.5 + ember.sigmoid(a)


def test_pointwise_chain_is_one_loop_without_intermediate_buffers():
    a, b = ember.randn(64, 96), ember.randn(64, 96)
    compiled = compile_decomposed(gelu_chain, a, b)
    steps = compiled.scheduler.steps
    assert len(steps) == 1 and isinstance(steps[0], FusedKernel)
    (node,) = steps[0].nodes
    assert {ld.buffer.name for ld in ir.loads(node.body)} == {"arg0_1", "arg1_1"}
    # memory: the two inputs and the output, nothing else
    assert compiled.nslots == 3
    assert compiled.source.count("static void kernel") == 1
    out = compiled(a, b)
    assert_close(out[0] if isinstance(out, tuple) else out, gelu_chain(a, b))


def test_pointwise_chain_on_large_inputs_runs_in_parallel():
    a, b = ember.randn(256, 256), ember.randn(256, 256)
    compiled = compile_decomposed(gelu_chain, a, b)
    assert "#pragma omp parallel for num_threads(nthreads)" in compiled.source
    assert "#pragma omp simd" in compiled.source
    out = compiled(a, b)
    assert_close(out[0] if isinstance(out, tuple) else out, gelu_chain(a, b))


def layer_norm_relu_sum(x, w, b):
    return ember.relu(ember.nn.functional.layer_norm(x, (x.shape[-1],), w, b)).sum(-1)


def test_layer_norm_relu_sum_is_one_kernel_and_matches_eager():
    x, w, b = ember.randn(32, 48), ember.randn(48), ember.randn(48)
    compiled = compile_decomposed(layer_norm_relu_sum, x, w, b)
    kernels = [s for s in compiled.scheduler.steps if isinstance(s, FusedKernel)]
    assert len(kernels) == 1
    assert all(n.local for n in kernels[0].nodes[:-1])  # mean and variance live in registers
    out = compiled(x, w, b)
    assert_close(out[0] if isinstance(out, tuple) else out, layer_norm_relu_sum(x, w, b), rtol=1e-5, atol=1e-4)


def test_softmax_matches_eager():
    x = ember.randn(16, 33)

    def fn(x):
        return ember.softmax(x, -1), ember.log_softmax(x, 0)

    compiled = compile_decomposed(fn, x)
    for got, want in zip(compiled(x), fn(x)):
        assert_close(got, want)


def test_softmax_over_the_last_dim_is_one_kernel_with_an_inner_loop():
    x = ember.randn(16, 40)
    compiled = compile_decomposed(lambda t: (ember.softmax(t, -1),), x)
    (kernel,) = compiled.scheduler.steps
    assert [bool(n.inner_ranges) for n in kernel.nodes] == [False, False, True]
    assert "inner_epilogue" in [rule for rule, _ in compiled.scheduler.decisions]
    assert "y0 < 40" in str(kernel)
    assert_close(compiled(x)[0], ember.softmax(x, -1))


def test_a_large_loop_after_a_scalar_reduction_is_a_kernel_of_its_own():
    # an inner loop of a kernel with one row runs on one thread: a large loop gets its own (parallel) kernel
    from ember._inductor.scheduler import INNER_SERIAL_ELEMENTS

    x = ember.randn(4, INNER_SERIAL_ELEMENTS // 2)
    compiled = compile_decomposed(lambda t: (t / t.sum(),), x)
    kernels = [s for s in compiled.scheduler.steps if isinstance(s, FusedKernel)]
    assert len(kernels) == 2 and not any(n.inner_ranges for k in kernels for n in k.nodes)
    assert kernels[1].ranges and "inner_epilogue" not in [rule for rule, _ in compiled.scheduler.decisions]
    assert_close(compiled(x)[0], x / x.sum(), rtol=1e-5, atol=1e-7)
    small = ember.randn(4, 8)  # a small loop still joins (one launch less)
    compiled = compile_decomposed(lambda t: (t / t.sum(),), small)
    assert "inner_epilogue" in [rule for rule, _ in compiled.scheduler.decisions]
    assert_close(compiled(small)[0], small / small.sum(), rtol=1e-5, atol=1e-7)


def test_extern_matmul_in_the_middle():
    x, w, bias = ember.randn(8, 16), ember.randn(16, 12), ember.randn(12)

    def fn(x, w, bias):
        h = ember.relu(ember.matmul(ember.tanh(x) * 2, w) + bias)
        return (h.sum(0), h * 3)

    compiled = compile_decomposed(fn, x, w, bias)
    names = [type(s).__name__ for s in compiled.scheduler.steps]
    assert names[0] == "FusedKernel" and "ExternKernel" in names and names[-1] == "FusedKernel"
    assert compiled.source.count('extern "C" int segment') == 2
    for got, want in zip(compiled(x, w, bias), fn(x, w, bias)):
        assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_results_do_not_depend_on_the_thread_count(threads):
    from ember._inductor import config

    x = ember.randn(300, 200)
    compiled = compile_decomposed(lambda t: (t.sum(), t.sum(1), ember.exp(t) * 2), x)
    with config.patch(threads=threads):
        got = compiled(x)
    with config.patch(threads=1):
        ref = compiled(x)
    assert all(bool((g == r).all()) for g, r in zip(got, ref))
