"""Loop-range-aware index simplification (codegen/cpp.py) and the lowering's clean-ups around extern calls.

* ``simplify_index``: ``Min``/``Max`` clamps and ``FloorDiv``/``ModIndex`` splits that the loop ranges
  decide are resolved, so a padded or reshaped view reads contiguously and its loop vectorises;
* an extern call whose input is ``empty`` (dropout's ``bernoulli(empty(...), p)``) gets a fresh
  uninitialised tensor instead of a buffer a kernel zero-fills;
* computed buffers nothing reads are not computed.
"""

from __future__ import annotations

import re

import numpy as np
import sympy

import ember
from ember._inductor.codegen import cpp
from ember._inductor.codegen.wrapper import compile_graph
from ember._inductor.graph import GraphLowering
from ember._inductor.ir import FloorDiv, ModIndex
from ember.fx.experimental.proxy_tensor import make_fx

x0, x1, x2, x3 = sympy.symbols("x0 x1 x2 x3", integer=True, nonnegative=True)
RANGES = {x0: 128, x1: 16, x2: 4, x3: 64}


def _all_points_equal(a, b, ranges):
    """``a`` and ``b`` agree at every point of ``ranges`` (exhaustive: the ranges are small)."""
    symbols = list(ranges)
    grids = np.meshgrid(*[np.arange(ranges[s]) for s in symbols], indexing="ij")
    points = zip(*(g.ravel().tolist() for g in grids))
    fa, fb = (sympy.lambdify(symbols, e.replace(FloorDiv, lambda p, q: p // q).replace(ModIndex, lambda p, q: p % q),
                             modules=[{"Min": min, "Max": max}, "math"]) for e in (a, b))
    return all(fa(*p) == fb(*p) for p in points)


def test_clamps_the_ranges_decide_are_removed():
    assert cpp.simplify_index(sympy.Min(255, x3), {x3: 256}) == x3
    assert cpp.simplify_index(sympy.Max(0, x3 - 3), {x3: 2}) == 0
    # 255 < x3 is possible when x3 < 300: the clamp stays
    assert cpp.simplify_index(sympy.Min(255, x3), {x3: 300}) == sympy.Min(255, x3)
    # an unknown symbol is left alone
    y = sympy.Symbol("y", integer=True)
    assert cpp.simplify_index(sympy.Min(255, y), {x3: 256}) == sympy.Min(255, y)


def test_div_and_mod_split_off_multiples_of_the_divisor():
    ranges = {x0: 16, x1: 4, x3: 64}
    expr = 768 * FloorDiv(256 * x0 + 64 * x1 + x3, 256) + ModIndex(256 * x0 + 64 * x1 + x3, 256)
    got = cpp.simplify_index(expr, ranges)
    assert got == 768 * x0 + 64 * x1 + x3
    # 256*x1 + x3 with x3 < 256 over 64: x3 // 64 stays, the x1 part leaves the division
    expr = FloorDiv(256 * x1 + x3, 64)
    got = cpp.simplify_index(expr, {x1: 16, x3: 256})
    assert got == 4 * x1 + FloorDiv(x3, 64)
    assert _all_points_equal(expr, got, {x1: 16, x3: 256})


def test_simplified_indices_equal_the_original_everywhere():
    exprs = [
        8192 * FloorDiv(256 * x1 + sympy.Min(255, 4 * x3 + x2), 64) + ModIndex(256 * x1 + sympy.Min(255, 4 * x3 + x2), 64),
        FloorDiv(x0 + 3, 128) + ModIndex(2 * x0 + 6, 4) + sympy.Max(x2 - 1, 0),
        ModIndex(128 * x1 + x0, 128) * 3 + FloorDiv(16 * x2 + x1, 16),
    ]
    for expr in exprs:
        got = cpp.simplify_index(expr, RANGES)
        assert _all_points_equal(expr, got, RANGES), (expr, got)


def _kernels(source):
    return source[len(cpp.PRELUDE):]


def test_the_attention_backward_reads_without_clamps():
    # the packed q/k/v projection of a transformer layer: its backward scatters the three gradients
    # back with pads, whose clamped loads (Min(31, x3) with x3 < 32) kept the loops from vectorising
    from ember._inductor.compile_fx import compile_fx

    ember.manual_seed(0)
    layer = ember.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
    x = ember.randn(4, 8, 32)
    sources = []

    def inner_compile(gm, example_inputs):
        compiled = compile_graph(gm, example_inputs)
        sources.append(_kernels(compiled.source))
        return compiled

    class Loss(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return self.layer(x).pow(2).mean()

    model = Loss()
    compiled = compile_fx(model, [x], inner_compile=inner_compile)
    params = list(model.parameters())
    got = ember.autograd.grad(compiled(x), params)
    want = ember.autograd.grad(model(x), params)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-6)
    assert len(sources) == 2
    clamped_load = re.compile(r"\[[^\]\n]*std::m(in|ax)")
    assert not any(clamped_load.search(source) for source in sources)


def _dropout_like(x):
    mask = ember.bernoulli(ember.empty(x.shape), 0.75)
    return x * mask / 0.75


def test_an_empty_input_of_an_extern_call_is_not_filled():
    x = ember.randn(64, 32)
    gm = make_fx(_dropout_like)(x)
    graph = GraphLowering(gm, [x]).run()
    assert not any(getattr(b, "data", None) is not None and "constant(0.0" in str(b.data) for b in graph.buffers)
    compiled = compile_graph(gm, [x])
    ember.manual_seed(3)
    got = compiled(x)
    ember.manual_seed(3)
    want = _dropout_like(x)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_plan_with_an_empty_argument_reloads(fresh_cache):
    x = ember.randn(16, 8)
    first = compile_graph(make_fx(_dropout_like)(x), [x])
    second = compile_graph(make_fx(_dropout_like)(x), [x])
    assert callable(second._lowered)  # loaded from the plan cache, not lowered again
    assert len(list((fresh_cache / "plans").glob("*.json"))) == 1
    for compiled in (first, second):
        ember.manual_seed(7)
        got = compiled(x)
        ember.manual_seed(7)
        np.testing.assert_array_equal(got.numpy(), _dropout_like(x).numpy())


def test_buffers_nothing_reads_are_not_computed():
    x = ember.randn(4, 4)

    def fn(t):
        unused = ember.exp(t) * 3  # noqa: F841 - traced, never read
        return t + 1

    gm = make_fx(fn)(x)
    graph = GraphLowering(gm, [x]).run()
    assert len(graph.buffers) == 1
    np.testing.assert_array_equal(compile_graph(gm, [x])(x).numpy(), (x + 1).numpy())


def test_merging_attention_heads_splits_the_inner_loop_instead_of_dividing():
    # (batch, head, seq, dim) -> (batch, seq, head * dim): element j of a row reads head j // 16, column
    # j % 16; the inner loop runs as (j // 16, j % 16), so each run of 16 is a contiguous, vectorised read
    x = ember.randn(2, 4, 8, 16)

    def fn(t):
        return (t.permute(0, 2, 1, 3).reshape(2, 8, 64) * 2,)

    compiled = compile_graph(make_fx(fn)(x), [x])
    np.testing.assert_array_equal(compiled(x)[0].numpy(), fn(x)[0].numpy())
    kernels = _kernels(compiled.source)
    assert "const int64_t x2 = 16 * x2o + x2i;" in kernels
    assert not re.search(r"\[[^\]\n]*(/|%) ", kernels), kernels


def test_runs_too_short_to_vectorise_keep_the_division():
    # runs of 5: the inner loop stays whole and divides (split loops of 5 would not vectorise)
    x = ember.randn(2, 3, 5)

    def fn(t):
        return (t.permute(1, 0, 2).reshape(3, 10) * 2,)

    compiled = compile_graph(make_fx(fn)(x), [x])
    np.testing.assert_array_equal(compiled(x)[0].numpy(), fn(x)[0].numpy())
    kernels = _kernels(compiled.source)
    assert "x1o" not in kernels and re.search(r"\[[^\]\n]*(/|%) ", kernels)
