"""The C++ the code generator writes: loops, pragmas, types, index printing and build errors."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

import ember
from ember._inductor import ir
from ember._inductor.codegen import cpp
from ember._inductor.codegen.wrapper import compile_graph
from ember._inductor.exc import CppCompileError
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close


def test_index_printing():
    i0, i1 = ir.index_vars(2)
    assert cpp.cindex(sympy.Integer(5)) == "5"
    assert cpp.cindex(sympy.Integer(2**40)) == "INT64_C(1099511627776)"
    assert cpp.cindex(3 * i0 + i1) in ("(i1 + (3 * i0))", "((3 * i0) + i1)")
    assert cpp.cindex(ir.FloorDiv(i0, 4)) == "(i0 / 4)"
    assert cpp.cindex(ir.ModIndex(i0, 4)) == "(i0 % 4)"
    assert cpp.cindex(sympy.Max(i0 - 2, 0)) in ("std::max<int64_t>(0, (-2 + i0))", "std::max<int64_t>((-2 + i0), 0)")


def test_constants():
    assert cpp.constant(0.5, ember.float32) == "0.5f"
    assert cpp.constant(0.5, ember.float64) == "0.5"
    assert cpp.constant(float("inf"), ember.float32) == "std::numeric_limits<float>::infinity()"
    assert cpp.constant(float("-inf"), ember.float64) == "-std::numeric_limits<double>::infinity()"
    assert cpp.constant(float("nan"), ember.float32) == "std::numeric_limits<float>::quiet_NaN()"
    assert cpp.constant(True, ember.bool) == "true"
    assert cpp.constant(7, ember.int32) == "static_cast<int32_t>(INT64_C(7))"


def test_types():
    assert cpp.ctype(ember.float16) == "uint16_t" and cpp.value_ctype(ember.float16) == "float"
    assert cpp.ctype(ember.bfloat16) == "uint16_t"
    assert cpp.ctype(ember.int64) == "int64_t" and cpp.ctype(ember.bool) == "bool"


def test_small_kernels_stay_on_one_thread_and_large_ones_fork():
    small = ember.randn(4, 8)
    large = ember.randn(64, 1024)
    src_small = compile_graph(make_fx(lambda t: t * 2)(small), [small]).source
    src_large = compile_graph(make_fx(lambda t: t * 2)(large), [large]).source
    assert "omp parallel" not in src_small and "#pragma omp simd" in src_small
    assert "#pragma omp parallel for num_threads(nthreads)" in src_large


def test_segments_of_little_work_run_on_one_thread():
    # 65,536 elements: the kernel would fork, but not its segment (waking the worker costs more);
    # 2**20 elements: the segment keeps ember's thread count
    mid, big = ember.randn(64, 1024), ember.randn(1024, 1024)
    assert cpp.segment_work([]) == 0 and 65536 < cpp.SEGMENT_PARALLEL_WORK <= big.numel()
    compiled_mid = compile_graph(make_fx(lambda t: t * 2)(mid), [mid])
    compiled_big = compile_graph(make_fx(lambda t: t * 2)(big), [big])
    assert "nthreads = 1;" in compiled_mid.source and "#pragma omp parallel for" in compiled_mid.source
    assert "nthreads = 1;" not in compiled_big.source
    np.testing.assert_array_equal(compiled_mid(mid).numpy(), mid.numpy() * 2)
    np.testing.assert_array_equal(compiled_big(big).numpy(), big.numpy() * 2)


def test_row_reductions_vectorise_their_inner_loop():
    x = ember.randn(128, 512)
    source = compile_graph(make_fx(lambda t: t.sum(1))(x), [x]).source
    assert "#pragma omp simd reduction(+:" in source
    assert "#pragma omp parallel for num_threads(nthreads)" in source


def test_reductions_over_leading_dims_interchange_their_loops():
    from ember.testing import assert_close

    x = ember.randn(300, 600)
    y = ember.randn(4, 30, 70)

    def fn(t, y):
        return t.sum(0), ember.amax(t * 2, 0), y.sum((0, 1)), y.sum(1), t.sum(1)

    compiled = compile_graph(make_fx(fn)(x, y), [x, y])
    assert compiled.source.count("for (int64_t xb = 0;") == 3  # the column sums; t.sum(1) is a row sum
    for got, want in zip(compiled(x, y), fn(x, y)):
        assert_close(got, want, rtol=1e-4, atol=1e-4)



def test_column_sums_with_per_row_statistics_split_into_blocks_for_the_threads():
    # layer_norm's weight gradient: sum over rows of g * (x - mean_row) * rstd_row. The per-row values
    # are the same for every column of a block, so the loops are still interchanged; 256 columns split
    # into four blocks of 64 (one block of 256 ran on one thread)
    x, g = ember.randn(2048, 256), ember.randn(2048, 256)
    mean, rstd = ember.randn(2048, 1), ember.rand(2048, 1) + 0.5

    def fn(x, g, mean, rstd):
        xhat = (x - mean) * rstd
        return (g * xhat).sum(0), g.sum(0)

    compiled = compile_graph(make_fx(fn)(x, g, mean, rstd), [x, g, mean, rstd])
    assert compiled.source.count("for (int64_t xb = 0; xb < 256; xb += 64)") == 1
    for got, want in zip(compiled(x, g, mean, rstd), fn(x, g, mean, rstd)):
        assert_close(got, want, rtol=1e-4, atol=1e-3)

def test_half_types_are_stored_as_uint16_and_computed_in_float():
    x = ember.randn(4, 4).to(ember.float16)
    source = compile_graph(make_fx(lambda t: t * 2)(x), [x]).source
    assert "const uint16_t* __restrict arg0_1" in source
    assert "ember_h2f(arg0_1[" in source and "ember_f2h(" in source


def test_a_compile_error_surfaces_as_cpp_compile_error(monkeypatch, fresh_cache):
    # fresh_cache: with the shared cache, an earlier compile of this graph would be loaded, not generated
    x = ember.randn(3)
    gm = make_fx(lambda t: ember.exp(t) + 3)(x)
    original = cpp.op_code

    def broken(e, args):
        return "this is not C++" if e.name == "add" else original(e, args)

    monkeypatch.setattr(cpp, "op_code", broken)
    with pytest.raises(CppCompileError) as info:
        compile_graph(gm, [x])
    assert "this is not C++" in open(info.value.source_path).read()
    assert info.value.output


def test_integer_division_by_zero_raises_like_eager():
    a = ember.tensor([5, 3])
    b = ember.tensor([1, 2])

    def fn(a, b):
        return ember.floor_divide(a, b), ember.remainder(a, b), ember.fmod(a, b), a.float() / b

    compiled = compile_graph(make_fx(fn)(a, b), [a, b])
    assert "ember_floordiv<int64_t>" in compiled.source
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, ember.tensor([0, 2]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(a, ember.tensor([0, 2]))
    got = compiled(a, b)  # the flag is the call's own: nothing left over from the failed call
    assert [t.tolist() for t in got] == [t.tolist() for t in fn(a, b)]


def test_division_by_zero_flag_is_per_call_across_threads():
    """Threads running one compiled graph, some dividing by zero: only those calls raise (the flag
    was once one per library, so a call could take or clear another thread's error)."""
    import threading

    a, good, bad = ember.arange(1, 20001), ember.full((20000,), 3), ember.ones(20000, dtype=ember.int64)
    compiled = compile_graph(make_fx(lambda a, b: ember.floor_divide(a, b) + 1)(a, good), [a, good])
    bad[12345] = 0
    want = (ember.floor_divide(a, good) + 1).tolist()
    outcomes = {}

    def worker(k):
        results = []
        for _ in range(40):
            try:
                out = compiled(a, bad if k % 2 else good)
                results.append("ok" if out.tolist() == want else "wrong")
            except RuntimeError as e:
                results.append("raised" if "ZeroDivisionError" in str(e) else repr(e))
        outcomes[k] = results

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, results in outcomes.items():
        assert set(results) == ({"raised"} if k % 2 else {"ok"}), (k, results)


@pytest.mark.parametrize("dtype", [ember.int8, ember.int16, ember.int32, ember.int64])
def test_integer_min_divided_by_minus_one_wraps_like_eager(dtype):
    """MIN // -1 overflows: undefined in C++ (a trap on x86); eager and numpy wrap to MIN, MIN % -1 is 0."""
    np = pytest.importorskip("numpy")
    lo = int(np.iinfo(str(dtype).split(".")[-1]).min)
    a = ember.tensor([lo, lo + 1, 7, -7, lo], dtype=dtype)
    b = ember.tensor([-1, -1, -1, 2, 1], dtype=dtype)

    def fn(a, b):
        return (ember.floor_divide(a, b), ember.remainder(a, b), ember.fmod(a, b),
                ember.div(a, b, rounding_mode="trunc"), ember.div(a, b, rounding_mode="floor"))

    compiled = compile_graph(make_fx(fn)(a, b), [a, b])
    got = compiled(a, b)
    want = fn(a, b)
    # the oracle: numpy's wrapping floor division and remainder
    with np.errstate(over="ignore"):
        assert want[0].tolist() == (a.numpy() // b.numpy()).tolist()
        assert want[1].tolist() == (a.numpy() % b.numpy()).tolist()
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        assert g.tolist() == w.tolist()


def test_copies_fused_into_a_split_full_reduction_get_their_own_loops():
    """A large full reduction (split in chunks) with multi-dim copies fused in horizontally: the copies
    run as loop nests (the C++ once used their y0.. indices undeclared, a compile error)."""

    def fn(a, b):
        return a.sin().sum() / 3, b.permute(2, 0, 1), (b * 2).transpose(0, 1)

    a, b = ember.randn(64, 128, 256), ember.randn(3, 4, 5)
    compiled = compile_graph(make_fx(fn)(a, b), [a, b])
    assert len([s for s in compiled.scheduler.steps if hasattr(s, "nodes")]) == 1  # one (scalar) kernel
    for got, want in zip(compiled(a, b), fn(a, b), strict=True):
        assert_close(got, want, rtol=1e-4, atol=1e-4)
