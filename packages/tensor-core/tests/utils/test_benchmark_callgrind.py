"""Instruction counts: the callgrind_annotate parser on a fixed sample, count arithmetic, and (where Valgrind is
installed) one real profile of a small pure-Python statement."""

from __future__ import annotations

import shutil

import pytest

from ember.utils.benchmark import CallgrindStats, FunctionCount, FunctionCounts, TaskSpec, Timer
from ember.utils.benchmark import callgrind as callgrind_module
from ember.utils.benchmark.callgrind import parse_callgrind_annotate

# Trimmed from `callgrind_annotate --inclusive=no --threshold=100 --show-percs=no --auto=no` on a profile of
# `for _ in range(100): sum(xs)` (CPython 3.11). The three 420,135 lines are the outer frames Callgrind charges
# each dumped profile to; they did none of the work.
SAMPLE = """\
--------------------------------------------------------------------------------
Profile data file 'cg.out.7' (creator: callgrind-3.19.0)
--------------------------------------------------------------------------------
I1 cache:
D1 cache:
LL cache:
Timerange: Basic block 13110213 - 13194528
Trigger: --dump-after=builtin_eval
Profiled target:  /usr/bin/python3.11 timed_loop.py (PID 2504, part 7)
Events recorded:  Ir
Events shown:     Ir
Event sort order: Ir
Thresholds:       100
Include dirs:
User annotated:
Auto-annotation:  off

--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
420,135  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir       file:function
--------------------------------------------------------------------------------
420,135  ./csu/../csu/libc-start.c:__libc_start_main@@GLIBC_2.34 [/usr/lib/x86_64-linux-gnu/libc.so.6]
420,135  /build/Python-3.11.7/Modules/main.c:Py_RunMain [/usr/lib/libpython3.11.so.1.0]
420,135  ???:0x0000000004936718 [???]
122,800  /build/Python-3.11.7/Python/bltinmodule.c:builtin_sum
 66,500  /build/Python-3.11.7/Objects/abstract.c:PyIter_Next [/usr/lib/libpython3.11.so.1.0]
 31,172  /build/Python-3.11.7/Objects/dictobject.c:unicodekeys_lookup_unicode [/usr/lib/libpython3.11.so.1.0]
 26,637  /build/Python-3.11.7/Python/ceval.c:_PyEval_EvalFrameDefault'2 [/usr/lib/libpython3.11.so.1.0]
  1,242  /build/Python-3.11.7/Objects/longobject.c:PyLong_AsLongAndOverflow [/usr/lib/libpython3.11.so.1.0]

--------------------------------------------------------------------------------
-- Auto-annotated source: /build/Python-3.11.7/Python/bltinmodule.c
--------------------------------------------------------------------------------
  1,000  some annotated line that is not a function entry
"""

SUM = "/build/Python-3.11.7/Python/bltinmodule.c:builtin_sum"
ITER = "/build/Python-3.11.7/Objects/abstract.c:PyIter_Next [/usr/lib/libpython3.11.so.1.0]"
DICT = "/build/Python-3.11.7/Objects/dictobject.c:unicodekeys_lookup_unicode [/usr/lib/libpython3.11.so.1.0]"
EVAL = "/build/Python-3.11.7/Python/ceval.c:_PyEval_EvalFrameDefault'2 [/usr/lib/libpython3.11.so.1.0]"
LONG = "/build/Python-3.11.7/Objects/longobject.c:PyLong_AsLongAndOverflow [/usr/lib/libpython3.11.so.1.0]"


def test_parser_reads_the_function_table_and_drops_the_outer_frames():
    counts = parse_callgrind_annotate(SAMPLE, inclusive=False)
    assert list(counts) == [
        FunctionCount(122_800, SUM),
        FunctionCount(66_500, ITER),
        FunctionCount(31_172, DICT),
        FunctionCount(26_637, EVAL),
        FunctionCount(1_242, LONG),
    ]
    assert counts.inclusive is False
    assert counts.sum() == 122_800 + 66_500 + 31_172 + 26_637 + 1_242


@pytest.mark.parametrize(
    ("text", "missing"),
    [("nothing here\n", "PROGRAM TOTALS"), ("1,000  PROGRAM TOTALS\n\nno table\n", "file:function")],
)
def test_parser_rejects_other_text(text, missing):
    with pytest.raises(ValueError, match=missing):
        parse_callgrind_annotate(text, inclusive=True)


def counts(*pairs, inclusive=False):
    return FunctionCounts(tuple(FunctionCount(c, fn) for c, fn in pairs), inclusive=inclusive)


def test_function_counts_arithmetic_and_helpers():
    a = counts((100, "f"), (10, "g"))
    b = counts((40, "f"), (10, "g"), (5, "h"))
    assert list(a - b) == [FunctionCount(60, "f"), FunctionCount(-5, "h")]  # g cancels and is dropped
    assert list(a + b) == [FunctionCount(140, "f"), FunctionCount(20, "g"), FunctionCount(5, "h")]
    assert list(a * 0.5) == [FunctionCount(50, "f"), FunctionCount(5, "g")]
    assert list(b.filter(lambda fn: fn != "f")) == [FunctionCount(10, "g"), FunctionCount(5, "h")]
    assert list(b.transform(lambda fn: "x" if fn in "gh" else fn)) == [FunctionCount(40, "f"), FunctionCount(15, "x")]
    assert a[0] == FunctionCount(100, "f") and len(a[:1]) == 1 and isinstance(a[:1], FunctionCounts)
    with pytest.raises(ValueError, match="inclusive and exclusive"):
        a - counts((1, "f"), inclusive=True)
    assert "Total: 110" in repr(a)


def test_denoise_drops_dictionary_lookups():
    parsed = parse_callgrind_annotate(SAMPLE, inclusive=False)
    assert [fc.function for fc in parsed.denoise()] == [SUM, ITER, EVAL, LONG]


def stats(stmt_counts):
    return CallgrindStats(
        task_spec=TaskSpec(stmt="sum(xs)", setup="pass"),
        number_per_run=100,
        baseline_inclusive_stats=counts(inclusive=True),
        baseline_exclusive_stats=counts((7, "loop")),
        stmt_inclusive_stats=counts((999, "f"), inclusive=True),
        stmt_exclusive_stats=stmt_counts,
    )


def test_callgrind_stats_counts_delta_and_stats():
    parsed = parse_callgrind_annotate(SAMPLE, inclusive=False)
    first = stats(parsed)
    assert first.counts() == parsed.sum()
    assert first.counts(denoise=True) == parsed.sum() - 31_172
    assert first.stats() is parsed and list(first.stats(inclusive=True)) == [FunctionCount(999, "f")]
    second = stats(counts((100_000, SUM), (1_242, LONG)))
    assert list(first.delta(second)) == [
        FunctionCount(66_500, ITER),
        FunctionCount(31_172, DICT),
        FunctionCount(26_637, EVAL),
        FunctionCount(22_800, SUM),
    ]
    text = repr(first)
    assert "sum(xs)" in text and str(parsed.sum()) in text and "100 runs per measurement, 1 thread" in text
    standard = first.as_standardized()
    assert "Python/bltinmodule.c:builtin_sum" in [fc.function for fc in standard.stats()]
    assert "Objects/abstract.c:PyIter_Next" in [fc.function for fc in standard.stats()]


def test_missing_valgrind_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(callgrind_module.shutil, "which", lambda name: None)
    with pytest.raises(OSError, match="valgrind"):
        Timer("sum(xs)", setup="xs = list(range(10))").collect_callgrind(number=10)


def test_bad_arguments():
    with pytest.raises(ValueError, match="repeats"):
        Timer("pass").collect_callgrind(repeats=0)
    if shutil.which("valgrind") and shutil.which("callgrind_annotate"):
        with pytest.raises(ValueError, match="global 'obj' is a object"):
            Timer("obj", globals={"obj": object()}).collect_callgrind(number=1)


@pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None,
    reason="needs Valgrind (valgrind and callgrind_annotate on PATH)",
)
def test_real_profile_scales_with_the_number_of_runs():
    # A pure-Python statement, so the profiled process does not import ember (seconds under Valgrind).
    timer = Timer("sum(xs)", setup="xs = list(range(n))", globals={"n": 200})
    hundred, two_hundred = timer.collect_callgrind(number=100, repeats=2)[0], timer.collect_callgrind(number=200)
    assert isinstance(hundred, CallgrindStats) and hundred.number_per_run == 100
    # Twice the runs, about twice the instructions (the loop's fixed cost is small).
    assert two_hundred.counts(denoise=True) / hundred.counts(denoise=True) == pytest.approx(2.0, rel=0.1)
    # 200 elements summed per run: far more than the empty loop of the baseline.
    assert hundred.counts() > 10 * hundred.baseline_exclusive_stats.sum() > 0
    assert any("builtin_sum" in fc.function for fc in hundred.stats())
    assert any("builtin_sum" in fc.function for fc in two_hundred.delta(hundred))
