"""Dynamic shapes (issue 26): symbolic sizes for dims marked dynamic, automatic dynamic shapes after a
size recompile, relation guards, 0/1 specialisation, and the static fallback. The oracle is the same
function run eagerly."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo
from ember._dynamo.testing import CompileCounter, CompileCounterWithBackend

pytestmark = pytest.mark.usefixtures("fresh_caches")  # conftest.py: empty compile caches for every test


def assert_same(got, want):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
    elif isinstance(want, ember.Tensor):
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    else:
        assert type(got) is type(want) and got == want


def reshape_and_make(x):
    n = x.shape[0]
    y = x.view(n, -1) * 2
    zeros = x.new_zeros(n, 3)
    return y.sum(1) + ember.arange(n).float(), zeros, x.size(1) * n, x.numel()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_mark_dynamic_one_capture_for_five_sizes(backend):
    cnt = CompileCounterWithBackend(backend)
    compiled = ember.compile(reshape_and_make, backend=cnt)
    for n in (3, 4, 5, 6, 9):
        x = ember.randn(n, 4, 2)
        dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x), reshape_and_make(x))
    assert cnt.frame_count == 1


def test_symbolic_sizes_in_the_printed_graph():
    cnt = CompileCounterWithBackend("eager")
    compiled = ember.compile(reshape_and_make, backend=cnt)
    x = ember.randn(3, 4, 2)
    dynamo.mark_dynamic(x, 0)
    compiled(x)
    code = cnt.graphs[0].code
    assert "s0 = arg0_1.size(0)" in code
    assert "ember.view(arg0_1, s0, -1)" in code
    assert "ember.zeros(s0, 3" in code
    assert "4 * s0" in code or "s0 * 4" in code  # x.size(1) * n: an output of the graph
    assert "ember.arange(s0" in code


def test_automatic_dynamic_two_captures_for_four_sizes():
    cnt = CompileCounter()

    def f(x, w):
        return (x @ w).relu().reshape(-1) * x.size(0)

    compiled = ember.compile(f, backend=cnt)
    w = ember.randn(3, 5)
    for n in (3, 4, 5, 6):
        x = ember.randn(n, 3)
        assert_same(compiled(x, w), f(x, w))
    assert cnt.frame_count == 2  # 3: static; 4: the size recompile makes dim 0 dynamic; 5, 6 hit


def test_relation_guard_recompiles_only_when_the_branch_flips():
    cnt = CompileCounter()

    def f(x):
        if x.shape[0] > 4:
            return x.sum(0)
        return x * 2

    compiled = ember.compile(f, backend=cnt)
    counts = []
    for n in (2, 3, 4, 5, 6, 7, 3):
        x = ember.randn(n, 2)
        dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x), f(x))
        counts.append(cnt.frame_count)
    assert counts == [1, 1, 1, 2, 2, 2, 2]


def test_size_one_is_specialised():
    cnt = CompileCounter()

    def f(x):
        return x.reshape(x.shape[0], 4).sum(1)

    compiled = ember.compile(f, backend=cnt)
    for n, expected in ((3, 1), (5, 1), (1, 2), (1, 2), (0, 3), (7, 3)):
        x = ember.randn(n, 2, 2)
        dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x), f(x))
        assert cnt.frame_count == expected, n


def test_marked_size_one_dim_stays_static():
    cnt = CompileCounterWithBackend("eager")

    def f(x):
        return x.view(x.shape[0], -1) + 1

    compiled = ember.compile(f, backend=cnt)
    x = ember.randn(1, 4)
    dynamo.mark_dynamic(x, 0)
    assert_same(compiled(x), f(x))
    assert "size(" not in cnt.graphs[0].code


def test_dynamic_false_captures_once_per_size():
    cnt = CompileCounter()
    compiled = ember.compile(lambda x: x.view(x.shape[0], -1) * 3, backend=cnt, dynamic=False)
    for i, n in enumerate((3, 4, 5, 6)):
        x = ember.randn(n, 2)
        dynamo.mark_dynamic(x, 0)  # ignored with dynamic=False
        assert_same(compiled(x), x.view(n, -1) * 3)
        assert cnt.frame_count == i + 1


def test_dynamic_true_every_dim_and_equal_sizes_stay_equal():
    def f(x, w):
        return x @ w + x.shape[1]

    cnt = CompileCounter()
    compiled = ember.compile(f, backend=cnt, dynamic=True)
    for n, k in ((3, 4), (5, 4), (6, 7), (2, 2), (4, 4)):
        x, w = ember.randn(n, k), ember.randn(k, 11)
        assert_same(compiled(x, w), f(x, w))
    # one graph for every (n, k): k is x.shape[1] and w.shape[0] (equal at capture: guarded equal)
    assert cnt.frame_count == 1

    dynamo.reset()
    cnt = CompileCounter()
    compiled = ember.compile(f, backend=cnt, dynamic=True)
    for n, k, expected in ((4, 4, 1), (6, 6, 1), (5, 4, 2), (3, 7, 2)):
        x, w = ember.randn(n, k), ember.randn(k, 11)
        assert_same(compiled(x, w), f(x, w))
        assert cnt.frame_count == expected  # captured with n == k: that equality is guarded too


def test_size_arithmetic_floordiv_mod_and_a_returned_size():
    cnt = CompileCounterWithBackend("eager")

    def f(x):
        half = x.shape[-1] // 2
        return x.reshape(x.shape[0], half, 2), x.shape[-1] % 3, half - 1

    compiled = ember.compile(f, backend=cnt)
    for n in (4, 6, 8, 10):
        x = ember.randn(2, n)
        dynamo.mark_dynamic(x, 1)
        assert_same(compiled(x), f(x))
    assert cnt.frame_count == 1
    assert "floordiv = s0 // 2" in cnt.graphs[0].code


BIAS = ember.ones(16, 16).tril().view(1, 1, 16, 16)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[:, : x.shape[1] - 1] * 2,
        lambda x: BIAS[:, :, : x.shape[1], : x.shape[1]] * x.sum(),  # a causal mask cut to the length
        lambda x: x[x.shape[0] - 1],
        lambda x: x[1 : x.shape[0] : 2, 1],
    ],
    ids=["slice_stop", "mask_cut", "select", "slice_step_and_select"],
)
def test_tensor_indexing_with_symbolic_bounds_is_one_graph(fn):
    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt)
    for n in (3, 5, 6):
        x = ember.randn(n, 7)
        dynamo.mark_dynamic(x, 0)
        dynamo.mark_dynamic(x, 1)
        assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 1


TABLE = ember.randn(32, 8)  # a fixed-size table (learned positions) cut to a sequence length


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + TABLE[: x.shape[1]],
        lambda x: x + TABLE[-x.shape[1] :],
        lambda x: x + TABLE[2 : x.shape[1] + 2],
    ],
    ids=["head", "tail", "offset"],
)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fixed_table_cut_to_a_dynamic_length_stays_dynamic(fn, backend):
    # the shadow of the length (its hint times a prime) exceeds the table: the slice is guarded to
    # stay inside the table, as PyTorch guards it, instead of turning dynamic shapes off
    cnt = CompileCounterWithBackend(backend)
    compiled = ember.compile(fn, backend=cnt)
    for n in (5, 7, 9, 12, 20, 30):
        x = ember.randn(2, n, 8)
        assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2  # the first size, then one dynamic capture for the rest


def test_table_cut_past_its_end_recompiles_on_the_bound():
    cnt = CompileCounter()

    def f(x):
        return TABLE[: x.shape[0]].sum(0) * x.sum()

    compiled = ember.compile(f, backend=cnt)
    for n in (4, 6, 9):  # dynamic from the second size on, guarded s0 <= 32
        x = ember.randn(n)
        assert_same(compiled(x), f(x))
    assert cnt.frame_count == 2
    x = ember.randn(40)  # the slice clamps at 32: the bound's guard fails, a capture of its own
    assert_same(compiled(x), f(x))
    assert cnt.frame_count == 3
    for n in (3, 8):  # still inside the table: the dynamic entry
        x = ember.randn(n)
        assert_same(compiled(x), f(x))
    assert cnt.frame_count == 3


def test_size_computed_inside_ember_code_falls_back_to_static():
    # indexing with Ellipsis goes through ember's indexing code, which normalises the bounds in Python:
    # the graph would hold the hint's stop, so the capture is static (correct for every size, one capture each)
    cnt = CompileCounter()

    def f(x):
        return x[..., : x.shape[0] - 1] * 2

    compiled = ember.compile(f, backend=cnt)
    for i, n in enumerate((3, 5, 6)):
        x = ember.randn(n, 7)
        dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x), f(x))
        assert cnt.frame_count == i + 1


def test_intermediate_tensor_sizes_are_symbolic():
    cnt = CompileCounterWithBackend("eager")

    def f(x):
        y = ember.cat([x, x], 0)
        return y.view(y.shape[0] // 2, -1), y.size(0)

    compiled = ember.compile(f, backend=cnt)
    for n in (3, 4, 7):
        x = ember.randn(n, 3)
        dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x), f(x))
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_module_with_dynamic_batch(backend):
    pytest.importorskip("ember._inductor")
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.LayerNorm(8), ember.nn.GELU(), ember.nn.Linear(8, 2))
    cnt = CompileCounterWithBackend(backend)
    compiled = ember.compile(model, backend=cnt)
    for batch in (2, 3, 5, 8, 3):
        x = ember.randn(batch, 6)
        assert_same(compiled(x), model(x))
    assert cnt.frame_count == 2


def test_explain_shows_the_size_relations():
    def f(x):
        if x.shape[0] > 2:
            return x.view(x.shape[0] * 2, -1)
        return x

    x = ember.randn(4, 6)
    dynamo.mark_dynamic(x, 0)
    text = str(dynamo.explain(f)(x))
    assert "SHAPE_EXPR" in text
    assert "'s0 > 2'" in text and "s0=L['x'].size(0)" in text
    assert "shape=(None, 6)" in text


def test_recompile_reason_names_the_relation():
    def f(x):
        return x.sum() if x.shape[0] > 4 else x.mean()

    compiled = ember.compile(f, backend="eager")
    x = ember.randn(3)
    dynamo.mark_dynamic(x, 0)
    compiled(x)
    entry = dynamo.cache.cache_for(f.__code__).entries[0]
    y = ember.randn(6)
    reason = entry.check.explain_failure({"x": y}, {})
    assert reason == "size relation s0 <= 4 failed (L['x'].size(0) = 6)"


PATTERNS = {
    # name: (function of x, y with dim 0 dynamic, captures for sizes 3, 4, 6)
    "unpack_size": (lambda x, y: (lambda b, t, c: x.view(b * t, c))(*x.size()), 1),
    "shapes_equal": (lambda x, y: x + 1 if x.shape == y.shape else x - 1, 1),
    "shape_slice": (lambda x, y: x.view(*x.shape[:-1], 2, -1), 1),
    "zeros_of_shape": (lambda x, y: ember.zeros(x.shape) + x, 1),
    "new_empty": (lambda x, y: x.new_empty(x.size()).fill_(2) * x, 1),
    "len_of_shape": (lambda x, y: x * len(x.shape), 1),
    "sqrt_of_static_dim": (lambda x, y: x / math.sqrt(x.size(-1)), 1),
    "range_over_size": (lambda x, y: sum(x[i] for i in range(x.shape[0])), 3),  # range() needs an int
    "expand": (lambda x, y: ember.ones(1, 1, x.shape[2]).expand(x.shape[0], x.shape[1], -1) + x, 1),
    "transpose_contiguous_view": (lambda x, y: x.transpose(0, 1).contiguous().view(x.size(1), -1), 1),
    "mean_by_numel": (lambda x, y: x.sum() / x.numel(), 1),
    "negated_size": (lambda x, y: x.view(-x.shape[0] * -1, -1), 1),
    "size_of_a_cat": (lambda x, y: ember.cat([x, y], 0).view(-1, x.shape[2]).shape[0] * x, 1),
    "shape_is_a_size": (lambda x, y: x * 2 if isinstance(x.shape, ember.Size) else x, 1),
    "shape_numel": (lambda x, y: x.sum() / x.shape.numel(), 1),
    "shape_slice_numel": (lambda x, y: x.view(x.shape[:-1].numel(), -1), 1),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_size_patterns(name):
    fn, captures = PATTERNS[name]
    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt)
    for n in (3, 4, 6):
        x, y = ember.randn(n, 4, 6), ember.randn(n, 4, 6)
        dynamo.mark_dynamic(x, 0)
        dynamo.mark_dynamic(y, 0)
        assert_same(compiled(x, y), fn(x, y))
    assert cnt.frame_count == captures


def test_shape_compared_with_a_constant_tuple_is_a_guard():
    cnt = CompileCounter()

    def f(x):
        return x + 1 if x.shape == (3, 4) else x - 1

    compiled = ember.compile(f, backend=cnt)
    for n, expected in ((3, 1), (5, 2), (6, 2), (3, 2)):
        x = ember.randn(n, 4)
        dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x), f(x))
        assert cnt.frame_count == expected


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_specialising_backends_compile_once_per_shape_inside_one_entry(backend):
    pytest.importorskip("ember._inductor")
    ember.manual_seed(0)  # fixed inputs: the compiled sum's order differs from numpy's within float32 rounding

    def f(x):
        n = x.shape[0]
        y = x.view(n, -1) * 2
        print("a graph break")  # a size live across the break: an int output of the graph
        return y.sum(0) * n, n

    compiled = ember.compile(f, backend=backend)
    for n in (3, 4, 5, 4):
        x = ember.randn(n, 2, 2)
        dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x), f(x))
    entries = dynamo.cache.cache_for(f.__code__).entries
    assert len(entries) == 1
    per_shape = entries[0].compiled
    if backend == "aot_eager":
        assert sorted(per_shape.compiled) == [((3, 2, 2),), ((4, 2, 2),), ((5, 2, 2),)]
    else:  # inductor's kernels take the sizes (issue 27): one compile serves every size, the int output too
        assert per_shape.compiles == 1 and len(per_shape.general) == 1 and not per_shape.compiled


def test_dynamic_true_keeps_parameters_static_and_a_dim_they_fix():
    # the input's feature dim meets a parameter's in F.linear: that dim is found and kept static,
    # the batch dim stays symbolic
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU(), ember.nn.Linear(4, 3))
    cnt = CompileCounterWithBackend("eager")
    compiled = ember.compile(model, backend=cnt, dynamic=True)
    for batch in (2, 4, 5, 9):
        x = ember.randn(batch, 4)
        assert_same(compiled(x), model(x))
    assert cnt.frame_count == 1
    (entry,) = [e for c in dynamo.cache.all_caches() for e in c.entries]
    shapes = sorted(str(g.expected.shape) for g in entry.check.guards if g.kind.value == "TENSOR_MATCH")
    assert shapes == ["(3, 4)", "(3,)", "(4, 4)", "(4,)", "(None, 4)"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_int_argument_becomes_dynamic_after_its_value_changes(backend):
    def f(x, length):
        return x[:, :length] * length + ember.arange(length)

    cnt = CompileCounterWithBackend(backend)
    compiled = ember.compile(f, backend=cnt)
    x = ember.randn(2, 16)
    for length in (3, 4, 5, 7, 9, 12, 16):
        assert_same(compiled(x, length), f(x, length))
    assert cnt.frame_count == 2  # the first value, then one capture with the int symbolic
    assert_same(compiled(x, 1), f(x, 1))  # 0 and 1 are specialised, as sizes are
    assert cnt.frame_count == 3


class _Counter:
    def __init__(self):
        self.steps = 0


def test_an_int_attribute_counter_stays_one_capture():
    # an optimizer's ``_step_count``-like counter: read, incremented, stored back on every call
    counter = _Counter()

    def f(x):
        counter.steps = counter.steps + 1
        return x * counter.steps

    cnt = CompileCounter()
    compiled = ember.compile(f, backend=cnt)
    x = ember.ones(3)
    for expected in range(1, 8):
        assert compiled(x).tolist() == [float(expected)] * 3
    assert counter.steps == 7
    # 0 and 1 are specialised values (a capture each), then one dynamic capture from 2 on
    assert cnt.frame_count == 3


def test_dynamic_false_keeps_ints_static():
    def f(x, k):
        return x * k

    cnt = CompileCounter()
    compiled = ember.compile(f, backend=cnt, dynamic=False)
    for k in (2, 3, 4, 5):
        assert_same(compiled(ember.ones(2), k), f(ember.ones(2), k))
    assert cnt.frame_count == 4


@pytest.mark.parametrize("write", ["setitem", "narrow"])
def test_kv_cache_write_at_a_dynamic_position(write):
    def step(cache, k, pos):
        if write == "setitem":
            cache[:, pos:pos + 1] = k
        else:
            cache.narrow(1, pos, 1).copy_(k)
        return cache[:, :pos + 1].sum(1)

    cnt = CompileCounter()
    compiled = ember.compile(step, backend=cnt)
    cache, want_cache = ember.zeros(1, 16, 4), ember.zeros(1, 16, 4)
    for pos in range(12):
        k = ember.full((1, 1, 4), float(pos + 1))
        assert_same(compiled(cache, k, pos), step(want_cache, k, pos))
    assert_same(cache, want_cache)
    assert cnt.frame_count == 3  # positions 0 and 1 (specialised), then one dynamic capture


def test_dynamic_true_makes_int_arguments_symbolic_from_the_start():
    def f(x, n):
        return x[:, :n] * n

    cnt = CompileCounter()
    compiled = ember.compile(f, backend=cnt, dynamic=True)
    x = ember.randn(3, 16)
    for n in (4, 5, 6, 9):
        assert_same(compiled(x, n), f(x, n))
    assert cnt.frame_count == 1
