"""One-pass variance and layer norm (accuracy on ill-conditioned data, one loop for the two sums), and
softmax computing each exp once."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember._inductor.aot.decompositions import inductor_decompositions
from ember._inductor.codegen.wrapper import compile_graph
from ember._inductor.compile_fx import compile_fx
from ember.fx.experimental.proxy_tensor import make_fx

# (mean, std): far from zero relative to the spread is where sum-of-squares formulas cancel
CONDITIONS = [(1e4, 1e-2), (1e3, 1e-3), (-5e3, 2.0), (0.0, 1.0)]


def _data(mean, std, shape=(8, 1000), outlier=True, dtype=np.float32, seed=0):
    x = mean + std * np.random.default_rng(seed).standard_normal(shape)
    if outlier:  # the first element of each row is the one-pass shift: make it a 50-sigma outlier
        x[:, 0] = mean + 50 * std
    return x.astype(dtype)


def _compiled(fn, *inputs):
    compiled = compile_fx(make_fx(fn)(*inputs), list(inputs))
    assert not compiled.fallbacks
    return compiled


@pytest.mark.parametrize("mean,std", CONDITIONS)
@pytest.mark.parametrize("outlier", [False, True])
def test_float32_var_and_std_match_float64_numpy_on_ill_conditioned_data(mean, std, outlier):
    xn = _data(mean, std, outlier=outlier)
    x = ember.from_numpy(xn)
    wide = xn.astype(np.float64)
    var, std_, var0 = _compiled(lambda t: (ember.var(t, 1), ember.std(t, 1), ember.var(t, 1, correction=0)), x)(x)
    # float32 results: a few float32 roundings off the exact float64 answer (the old two-pass
    # float32 form was 0.6% off at mean 1e4, std 1e-2)
    np.testing.assert_allclose(np.asarray(var), wide.var(axis=1, ddof=1), rtol=2e-6)
    np.testing.assert_allclose(np.asarray(std_), wide.std(axis=1, ddof=1), rtol=2e-6)
    np.testing.assert_allclose(np.asarray(var0), wide.var(axis=1), rtol=2e-6)


@pytest.mark.parametrize("mean,std", CONDITIONS)
def test_float64_var_matches_numpy(mean, std):
    xn = _data(mean, std, dtype=np.float64)
    x = ember.from_numpy(xn)
    got = _compiled(lambda t: ember.var(t, 1), x)(x)
    np.testing.assert_allclose(np.asarray(got), xn.var(axis=1, ddof=1), rtol=1e-9)


def test_var_over_several_dims_keepdim_and_all():
    xn = _data(1e3, 0.5, shape=(3, 40, 50), outlier=False)
    x = ember.from_numpy(xn)
    wide = xn.astype(np.float64)
    a, b, c = _compiled(lambda t: (ember.var(t, (0, 2), keepdim=True), ember.var(t), ember.var(t, -1)), x)(x)
    assert tuple(a.shape) == (1, 40, 1) and tuple(b.shape) == () and tuple(c.shape) == (3, 40)
    np.testing.assert_allclose(np.asarray(a), wide.var(axis=(0, 2), ddof=1, keepdims=True), rtol=2e-6)
    np.testing.assert_allclose(float(b), wide.var(ddof=1), rtol=2e-6)
    np.testing.assert_allclose(np.asarray(c), wide.var(axis=-1, ddof=1), rtol=2e-6)


def test_var_special_values_follow_eager():
    xn = np.array([[1.0, 2.0, np.inf], [np.nan, 1.0, 2.0], [3.0, 3.0, 3.0], [5.0, np.inf, -np.inf]], np.float32)
    x = ember.from_numpy(xn)
    fn = lambda t: (ember.var(t, 1), ember.var(t[:, :1], 1))  # noqa: E731 - one sample: n - 1 == 0
    for got, want in zip(_compiled(fn, x)(x), fn(x), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("mean,std", CONDITIONS)
def test_layer_norm_on_ill_conditioned_rows_matches_float64(mean, std):
    xn = _data(mean, std, shape=(16, 256))
    w = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    x, weight, bias = ember.from_numpy(xn), ember.from_numpy(w), ember.zeros(256)
    got = _compiled(lambda t, w, b: ember.nn.functional.layer_norm(t, (256,), w, b), x, weight, bias)(x, weight, bias)
    wide = xn.astype(np.float64)
    mu, var = wide.mean(axis=1, keepdims=True), wide.var(axis=1, keepdims=True)
    want = (wide - mu) / np.sqrt(var + 1e-5) * w
    # float32 output: x - mean rounds at x's scale, so the error is relative to |mean| / std
    tol = 2e-6 * (1 + abs(mean) / np.sqrt(std * std + 1e-5))
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=tol * np.abs(w).max())


def test_layer_norm_backward_matches_eager():
    x = ember.from_numpy(_data(10.0, 1.0, shape=(4, 32), dtype=np.float64)).requires_grad_()
    w = ember.randn(32, dtype=ember.float64, requires_grad=True)

    def fn(x, w):
        return (ember.nn.functional.layer_norm(x, (32,), w) ** 2).sum()

    from ember._inductor.aot import aot_function
    from ember._inductor.compile_fx import compile_fx_inner

    compiled = aot_function(fn, compile_fx_inner)
    got = ember.autograd.grad(compiled(x, w), (x, w))
    want = ember.autograd.grad(fn(x, w), (x, w))
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g.detach()), np.asarray(e.detach()), rtol=1e-9, atol=1e-9)


def _lowered(fn, *inputs):
    """``fn`` traced with the compiler's decompositions and compiled (no aot, no cache of the plan)."""
    return compile_graph(make_fx(fn, decomposition_table=inductor_decompositions())(*inputs), list(inputs))


def _reduction_loops(source):
    return source.count("for (int64_t r0 = 0;")


def test_the_two_sums_of_a_variance_share_one_loop():
    x = ember.randn(64, 1000)
    compiled = _lowered(lambda t: ember.var(t, 1), x)
    assert _reduction_loops(compiled.source) == 1
    assert "#pragma omp simd reduction(+:" in compiled.source
    assert compiled.source.count("reduction(+:") == 2  # two accumulators on one pragma
    np.testing.assert_allclose(np.asarray(compiled(x)), x.numpy().astype(np.float64).var(axis=1, ddof=1),
                               rtol=2e-6)


def test_layer_norm_reads_each_row_twice_not_three_times():
    """The mean and the variance come from one pass; the second pass normalises (the registry's
    decomposition computed the mean, then the variance from the mean again: three passes)."""
    x = ember.randn(64, 1024)
    fn = lambda t: ember.nn.functional.relu(ember.nn.functional.layer_norm(t, (1024,))).sum(-1)  # noqa: E731
    compiled = _lowered(fn, x)
    assert _reduction_loops(compiled.source) == 2
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(fn(x)), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_computes_each_exp_once(dim):
    """The sum's loop stores each ``exp(x - max)`` in the output; the output's loop divides it in place."""
    x = ember.randn(48, 300)
    fn = lambda t: ember.softmax(t, dim)  # noqa: E731
    compiled = _lowered(fn, x)
    if dim == -1:  # rows: one kernel, exp in the sum's loop only
        assert compiled.source.count("ember_exp<float>(") == 1
    got = compiled(x)
    wide = x.numpy().astype(np.float64)
    e = np.exp(wide - wide.max(axis=dim, keepdims=True))
    np.testing.assert_allclose(np.asarray(got), e / e.sum(axis=dim, keepdims=True), rtol=1e-5, atol=1e-7)


def test_a_summand_is_not_stored_into_a_half_output():
    """bfloat16 outputs would round the stored exp: those keep computing it twice, still correct."""
    x = ember.randn(16, 64).to(ember.bfloat16)
    fn = lambda t: ember.softmax(t, -1)  # noqa: E731
    got = _lowered(fn, x)(x)
    np.testing.assert_allclose(np.asarray(got.float()), np.asarray(fn(x).float()), rtol=1e-2, atol=1e-2)


def test_moments_sum_in_float32_on_gpus_and_float64_on_the_cpu():
    from ember._inductor.aot import decompositions, functionalize

    x32, x64 = ember.empty(2), ember.empty(2, dtype=ember.float64)
    assert decompositions._moments_dtype(x32) == ember.float64  # outside a trace: the cpu
    token = functionalize._traced_device.set(ember.device("cuda"))
    try:
        assert decompositions._moments_dtype(x32) == ember.float32
        assert decompositions._moments_dtype(ember.empty(2, dtype=ember.bfloat16)) == ember.float32
        assert decompositions._moments_dtype(x64) == ember.float64
    finally:
        functionalize._traced_device.reset(token)


def test_float32_moments_are_a_few_ulps_off_on_ordinary_rows():
    # what a GPU graph computes (the sums in float32): layer_norm rows of 8192 with mean 3, std 2
    from ember._inductor.aot import decompositions, functionalize

    xn = _data(3.0, 2.0, shape=(4, 8192), outlier=False)
    token = functionalize._traced_device.set(ember.device("cuda"))
    try:
        out = decompositions._layer_norm(ember.from_numpy(xn), (8192,)).numpy()
    finally:
        functionalize._traced_device.reset(token)
    wide = xn.astype(np.float64)
    want = (wide - wide.mean(1, keepdims=True)) / np.sqrt(wide.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-5)
