"""Dynamic shapes in kernels (issue 27), C++ path: a sweep of sizes compiles the inductor backend twice.

The first size compiles with static sizes; the second marks the changed dim dynamic (automatic dynamic
shapes), and that compile's kernels take the size as an argument, so every later size runs without
compiling. Compilations are counted by ``ember._inductor.metrics``; outputs and gradients are compared
with eager mode at every size. The Triton twins are test_dynamic_kernels_triton.py (interpreter) and
test_dynamic_kernels_cuda.py.
"""

from __future__ import annotations

import pytest
from _dynamic_cases import (
    assert_twice,
    close,
    cnn_sweep,
    compile_dynamic,
    counts,
    mlp_sweep,
    sequence_sweep,
    since,
    transformer_sweep,
)

import ember
import ember._inductor.dynamic_compile as dynamic_compile
from ember import nn
from ember._dynamo.symbolic import PerShapeCompiled
from ember._inductor import config, dynamic, metrics


@pytest.fixture(autouse=True)
def _strict():
    ember._dynamo.reset()
    with config.patch(fallback_on_compile_error=False, triton_on_cpu=False):
        yield
    ember._dynamo.reset()


def test_mlp_batch_sweep_compiles_twice():
    assert_twice(mlp_sweep())


def test_cnn_block_batch_sweep_compiles_twice():
    assert_twice(cnn_sweep())


def test_transformer_layer_batch_sweep_compiles_twice():
    assert_twice(transformer_sweep())


def test_sequence_length_sweep_compiles_twice():
    assert_twice(sequence_sweep())


def test_odd_sizes_and_size_one():
    """Odd sizes after even ones reuse the dynamic compile (no kernel here needs divisibility); size 1
    is specialised by the capture (a new static compile), and every answer is right."""
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    compiled = ember.compile(model, backend="inductor")
    start = counts()
    for b in (8, 16, 24, 7, 9, 1, 13):
        x = ember.randn(b, 8)
        close(compiled(x), model(x), 1e-5)
    assert since(start) == (2, 1), dynamic_compile.last_fallback_reason


# ---------------------------------------------------------------------------------------------
# the generated code takes sizes as arguments; assumptions


def test_cpp_kernels_take_sizes_as_arguments():
    x = ember.randn(12, 40)
    compiled = compile_dynamic(lambda t: ((t.sin() * 2).sum(1), t.exp()), [x], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    source = compiled.graphs[0].source
    assert "const int64_t s0 = (int64_t)(intptr_t)bufs[" in source
    assert "< s0;" in source and "< 12;" not in source  # the loop over rows runs to the size argument
    assert "480" not in source  # nor is the hint's element count baked in anywhere
    for rows in (12, 3, 29, 64):
        y = ember.randn(rows, 40)
        assert compiled.accepts((y,))
        s, e = compiled(y)
        close(s, (y.sin() * 2).sum(1), 1e-5)
        close(e, y.exp(), 1e-6)
    assert not compiled.accepts((ember.randn(12, 41),))  # a static dim changed
    assert not compiled.accepts((ember.randn(1, 40),))  # sizes 0 and 1 are specialised
    assert not compiled.accepts((ember.randn(12, 40, dtype=ember.float64),))


def test_mean_and_view_sizes_become_expressions():
    x = ember.randn(6, 8, 4)

    def fn(t):
        return t.reshape(t.shape[0] * 8, 4).mean(0), t.mean(), t.view(-1).cumsum(0), t / t.shape[0]

    compiled = compile_dynamic(fn, [x], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    for rows in (6, 2, 11, 40):
        y = ember.randn(rows, 8, 4)
        for got, want in zip(compiled(y), fn(y)):
            close(got, want, 1e-5)


def test_assumption_broken_is_refused():
    """A size the compiled code relies on a relation of (``s0 // 16`` is exact) is refused by ``accepts``
    (the caller then compiles again) when the relation fails."""
    x = ember.randn(3, 64)

    def fn(t):
        return t.view(3, t.shape[1] // 16, 16).softmax(-1).view(3, t.shape[1]) * 2

    compiled = compile_dynamic(fn, [x], [1])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    assert "Eq(ModIndex(s0, 16), 0)" in compiled.assumptions
    for cols in (64, 80, 160):
        y = ember.randn(3, cols)
        assert compiled.accepts((y,))
        close(compiled(y)[0], fn(y), 1e-5)
    assert not compiled.accepts((ember.randn(3, 72),))
    # the low probe (size 2) cannot take the view: sizes are checked from the hint up
    assert "s0 >= 64" in compiled.assumptions and not compiled.accepts((ember.randn(3, 48),))


def test_sizes_are_accepted_between_the_checked_ones():
    """``t.diagonal()`` of an ``(s0, 8)`` matrix is ``min(s0, 8)`` long: 8 at every probe from the hint
    up, 2 at the low probe. The compile accepts only sizes from the hint to its largest probe (a size
    below the threshold is refused, and ember.compile compiles again: right on both sides)."""
    def fn(t):
        return t.diagonal() * 2, t.sum(0)

    compiled = compile_dynamic(fn, [ember.randn(32, 8)], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    assert compiled.accepts((ember.randn(40, 8),)) and not compiled.accepts((ember.randn(5, 8),))
    ember._dynamo.reset()
    through_dynamo = ember.compile(fn, backend="inductor")
    for n in (32, 24, 5, 40, 3):
        y = ember.randn(n, 8)
        for got, want in zip(through_dynamo(y), fn(y)):
            close(got, want, 1e-5)


def test_graph_that_cannot_be_dynamic_falls_back_per_shape():
    """A graph with a size that has no expression of the form ``c*m + b`` (here ``n*n + n``) compiles
    for fixed sizes: counted as a fallback, and every size still right."""
    start = metrics.compilation_count("fallback")

    def fn(t):
        n = t.shape[0]
        return ember.arange(n * n + n, dtype=ember.float32).sum() + t.sum()

    compiled = ember.compile(fn, backend="inductor")
    for rows in (3, 5, 7):
        y = ember.randn(rows)
        close(compiled(y), fn(y), 1e-3)
    assert metrics.compilation_count("fallback") - start >= 1
    assert "no expression" in dynamic_compile.last_fallback_reason


def test_per_shape_compiled_asks_general_compiles_first():
    calls = []

    class General:
        def __init__(self, n):
            self.n = n

        def accepts(self, inputs):
            return inputs[0].shape[0] % self.n == 0

        def __call__(self, x):
            return ("general", self.n)

    def compile(inputs):
        calls.append(inputs[0].shape[0])
        return General(inputs[0].shape[0])

    per_shape = PerShapeCompiled(compile, [ember.zeros(4)])
    assert per_shape(ember.zeros(8)) == ("general", 4)
    assert per_shape(ember.zeros(6)) == ("general", 6)  # 6 % 4: compiled again
    assert per_shape(ember.zeros(12)) == ("general", 6)  # the newest compile is asked first
    assert calls == [4, 6] and per_shape.compiles == 2


def test_fitting_sizes_over_three_traces():
    import sympy

    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    spec = dynamic.DynamicDims((((0, s0), (1, s1)),), {s0: 4, s1: 6})
    u = dynamic.Unifier(spec)
    p = dynamic.probe_points(spec)
    value = [3 * p[k][s0] * p[k][s1] + 1 for k in range(dynamic.RUNS)]
    assert u.fit(value) == 3 * s0 * s1 + 1
    assert u.fit([p[k][s1] // 2 for k in range(dynamic.RUNS)]) == dynamic.ir.FloorDiv(s1, 2)
    assert u.assumptions == [sympy.Eq(dynamic.ir.ModIndex(s1, 2), 0)]
    with pytest.raises(dynamic.NotDynamic):
        u.fit([p[k][s0] ** 3 for k in range(dynamic.RUNS)])
    mean = u.number(tuple(1.0 / (8 * p[k][s0]) for k in range(dynamic.RUNS)))
    assert mean.form == "reciprocal" and mean.expr == 8 * s0
    running = u.number(tuple(0.1 * (5 * p[k][s1]) / (5 * p[k][s1] - 1) for k in range(dynamic.RUNS)))
    assert running.form == "bessel" and running.expr == 5 * s1 and running.at(30) == 0.1 * 30 / 29


def test_batch_and_sequence_dynamic_together():
    """Two symbols (batch and sequence length) in one transformer layer: one compile, forward and
    backward right at every pair (the attention's ``4*s1**2`` strides and ``s0*s1`` rows)."""
    import copy

    ember.manual_seed(0)
    model = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    eager = copy.deepcopy(model)
    compiled = ember.compile(model, backend="inductor")
    start = counts()
    for b, t in [(2, 8), (3, 5), (4, 12), (5, 7), (2, 16), (6, 3)]:
        x = ember.randn(b, t, 32)
        ember._dynamo.mark_dynamic(x, 0)
        ember._dynamo.mark_dynamic(x, 1)
        out, ref = compiled(x), eager(x)
        close(out, ref, 2e-4)
        out.sum().backward()
        ref.sum().backward()
        for p, q in zip(model.parameters(), eager.parameters()):
            close(p.grad, q.grad, 2e-4)
        model.zero_grad()
        eager.zero_grad()
    assert since(start) == (0, 1), dynamic_compile.last_fallback_reason


def test_probe_factors_tell_monomials_apart():
    """No two monomials of degree <= 3 over the probe factors have their three values on one line (a
    value of one would fit ``c*m + b`` of the other: a wrong size)."""
    from fractions import Fraction
    from itertools import combinations_with_replacement

    run1, run2 = dynamic._FACTORS[1], dynamic._FACTORS[2]
    ratios = []
    for degree in (1, 2, 3):
        for combo in combinations_with_replacement(range(len(run1)), degree):
            a = b = 1
            for g in combo:
                a, b = a * run1[g], b * run2[g]
            ratios.append(Fraction(b - 1, a - 1))
    assert len(set(ratios)) == len(ratios)


def test_gpt_sequence_length_sweep_compiles_twice():
    """The benchmark GPT (2 layers): loss and gradients at 10 sequence lengths, two compilations."""
    import copy
    import sys
    from pathlib import Path

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from gpt_model import GPTConfig, build_gpt

    ember.manual_seed(0)
    model = build_gpt(ember, GPTConfig(vocab_size=65, block_size=64, n_layer=2, n_head=2, n_embd=32))
    eager = copy.deepcopy(model)
    compiled = ember.compile(model, backend="inductor")
    rng = np.random.default_rng(0)
    start = counts()
    for t in (16, 24, 32, 20, 40, 9, 64, 33, 48, 12):
        x = ember.tensor(rng.integers(0, 65, size=(3, t)))
        y = ember.tensor(rng.integers(0, 65, size=(3, t)))
        loss, ref = compiled(x, y)[1], eager(x, y)[1]
        close(loss, ref, 1e-5)
        loss.backward()
        ref.backward()
        for p, q in zip(model.parameters(), eager.parameters()):
            close(p.grad, q.grad, 1e-4)
        model.zero_grad()
        eager.zero_grad()
    assert_twice(since(start))


def test_size_returned_as_int_across_a_graph_break():
    def f(x):
        n = x.shape[0]
        y = (x * 2).sum(0) * n
        print("a graph break")  # n is live across the break: the first graph returns it as an int
        return y, n

    compiled = ember.compile(f, backend="inductor")
    start = counts()
    for rows in (3, 4, 5, 9, 4):
        x = ember.randn(rows, 2)
        ember._dynamo.mark_dynamic(x, 0)
        (got, n), (want, m) = compiled(x), f(x)
        assert n == m == rows
        close(got, want, 1e-5)
    assert since(start) == (0, 1), dynamic_compile.last_fallback_reason


#: One op in OPDB_FRACTION (by a hash of its name) runs through the op_db sweep below (each op compiles).
OPDB_FRACTION = 4
_RANDOM_OPS = ("bernoulli", "multinomial", "normal", "poisson", "empty_like", "empty")


def _opdb_names():
    import zlib

    from ember.testing import op_db

    return [name for name in sorted(op_db) if zlib.crc32(name.encode()) % OPDB_FRACTION == 0
            and "dropout" not in name and "rand" not in name and name not in _RANDOM_OPS]


@pytest.mark.parametrize("name", _opdb_names())
def test_opdb_first_sample_at_three_sizes(name):
    """op_db's first float32 sample with its leading dim dynamic, then grown by 1 and 3 (every tensor
    argument of that size): compiled equals eager at each size, whether the compile was dynamic or not."""
    from _triton_cases import flat_tensors, sample_function

    from ember.testing import assert_close, op_db

    info = op_db[name]
    if ember.float32 not in info.dtypes:
        pytest.skip("no float32")
    sample = next(iter(info.sample_inputs(info, "cpu", ember.float32, False)), None)
    if sample is None or sample.data_dependent:
        pytest.skip("no sample whose shapes meta tensors can compute")
    fn, tensors = sample_function(info, sample)
    if not tensors or not tensors[0].dim() or tensors[0].shape[0] < 2 or not tensors[0].is_contiguous():
        pytest.skip("the first tensor has no leading dim of size >= 2 to make dynamic")
    n = tensors[0].shape[0]
    rtol, atol = info.tolerance(ember.float32) or (1e-5, 1e-5)
    compiled = ember.compile(fn, backend="inductor")
    for k in (0, 1, 3):
        grown = [ember.cat([t] + [t[:1]] * k, 0) if t.dim() and t.shape[0] == n and t.is_contiguous() else t
                 for t in tensors]
        try:
            expected = flat_tensors(fn(*grown))
        except Exception:  # noqa: BLE001 - the op does not take these sizes (a square matrix, say)
            break
        for t in grown:
            if t.dim() and t.shape[0] == n + k:
                ember._dynamo.mark_dynamic(t, 0)
        for got, want in zip(flat_tensors(compiled(*grown)), expected):
            assert_close(got, want, rtol=max(rtol, 1e-4), atol=max(atol, 1e-4), equal_nan=True)


def test_outputs_that_are_views_of_inputs():
    """A returned view of an input is rebuilt on the caller's tensor with its view arguments (sizes)
    evaluated per call."""
    x = ember.randn(4, 6)

    def fn(t):
        return t.view(t.shape[0] * 2, 3), t.transpose(0, 1), t.sin()

    compiled = compile_dynamic(fn, [x], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    for rows in (4, 7, 2):
        y = ember.randn(rows, 6)
        got = compiled(y)
        for g, w in zip(got, fn(y)):
            close(g, w, 1e-6)
        assert got[0].data_ptr() == y.data_ptr()  # a view of the input, as eager returns


def test_slice_with_a_static_bound_of_a_dynamic_dim():
    """``t[:10]`` has length 10 at every traced size (all longer than 10), so the compiled code assumes
    ``10 <= s0``; ``t[:1000]`` has the dim's length, assuming ``1000 > s0``. Sizes across either bound are
    refused (the caller compiles again), and ember.compile stays right on both sides."""
    def fn(t):
        return t[:10] * 2, t[-4:].sum(), t[:1000] + 1

    compiled = compile_dynamic(fn, [ember.randn(32)], [0])
    assert callable(compiled.accepts), dynamic_compile.last_fallback_reason
    assert {"10 <= s0", "1000 > s0"} <= set(compiled.assumptions), compiled.assumptions
    assert compiled.accepts((ember.randn(40),)) and compiled.accepts((ember.randn(200),))
    assert not compiled.accepts((ember.randn(5),)) and not compiled.accepts((ember.randn(1200),))
    ember._dynamo.reset()
    through_dynamo = ember.compile(fn, backend="inductor")
    for n in (32, 24, 5, 1200, 40):
        y = ember.randn(n)
        for got, want in zip(through_dynamo(y), fn(y)):
            close(got, want, 1e-5)


def test_a_graph_without_the_dynamic_size_runs_at_every_size():
    """The backward of ``sin(t.sum() * w)`` for ``w`` reads only scalars and ``w``: a graph of the dynamic
    compile with no dynamic input (the compile's bounds on ``s0`` are checked by ``accepts``)."""
    w = ember.randn(4, requires_grad=True)

    def fn(t, v):
        return (t.sum() * v).sin()

    compiled = ember.compile(fn, backend="inductor")
    start = counts()
    for n in (3, 5, 8, 6):
        t = ember.randn(n, 4)
        (g,) = ember.autograd.grad(compiled(t, w).sum(), [w])
        (r,) = ember.autograd.grad(fn(t, w).sum(), [w])
        close(g, r, 1e-5)
    assert since(start) == (1, 1), dynamic_compile.last_fallback_reason
