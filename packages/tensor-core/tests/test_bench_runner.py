"""The benchmark runner (benchmarks/run.py) writes a well-formed table.

These tests run the runner on tiny fake workloads; they check the plumbing and
the arithmetic of the report, never the speed of anything.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
BENCH_DIR = REPO_ROOT / "benchmarks"
HEADER = "| workload | ember time | PyTorch time | ratio (ember / PyTorch) | threads | machine |"
UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}

if not (BENCH_DIR / "run.py").is_file():
    pytest.skip("benchmarks/ is not in this checkout", allow_module_level=True)


@pytest.fixture(scope="module")
def runner():
    """benchmarks/run.py imported as a module (it puts benchmarks/ on sys.path for `harness`)."""
    saved = list(sys.path)
    name = "ember_bench_runner_under_test"
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(name, None)
    sys.path[:] = saved


def write_fake_benchmarks(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "bench_fake.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return directory


FAKE_TWO_WORKLOADS = """
    from types import SimpleNamespace

    def _busy(n):
        def fn():
            return sum(range(n))
        return fn

    def _setup_small():
        return _busy(10), _busy(20)

    def _setup_large():
        return _busy(200), _busy(100)

    WORKLOADS = [
        SimpleNamespace(name="fake_small", setup=_setup_small, threads=1, description="small fake"),
        SimpleNamespace(name="fake_large", setup=_setup_large, threads=2, description="large fake"),
    ]
"""


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of each data row of the (single) results table in ``markdown``."""
    lines = markdown.splitlines()
    start = lines.index(HEADER)  # ValueError (test failure) if the header is not exactly right
    assert re.fullmatch(r"\|(-+:?\|)+", lines[start + 1]), lines[start + 1]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def seconds(cell: str) -> float:
    value, unit = cell.split(" ")
    return float(value) * UNITS[unit]


def test_quick_run_writes_one_row_per_workload_with_numeric_ratio(runner, tmp_path):
    bench_dir = write_fake_benchmarks(tmp_path / "bench", FAKE_TWO_WORKLOADS)
    out = tmp_path / "BENCHMARKS.md"
    rc = runner.main(["--quick", "--bench-dir", str(bench_dir), "--output", str(out), "--no-plot"])
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    rows = table_rows(text)
    assert [row[0] for row in rows] == ["fake_small", "fake_large"]
    for row, threads in zip(rows, ["1", "2"]):
        assert len(row) == 6
        ember_s, torch_s, ratio = seconds(row[1]), seconds(row[2]), float(row[3])
        assert ember_s > 0 and torch_s > 0 and ratio > 0
        # Each time is printed with 3 significant figures: the ratio agrees within rounding.
        assert ratio == pytest.approx(ember_s / torch_s, rel=0.02)
        assert row[4] == threads
        assert "cores" in row[5]
    assert "Quick mode" in text
    assert "## Machine" in text


def test_filter_selects_by_substring(runner, tmp_path):
    bench_dir = write_fake_benchmarks(tmp_path / "bench", FAKE_TWO_WORKLOADS)
    out = tmp_path / "BENCHMARKS.md"
    rc = runner.main(["--quick", "-k", "LARGE", "--bench-dir", str(bench_dir), "--output", str(out), "--no-plot"])
    assert rc == 0
    assert [row[0] for row in table_rows(out.read_text(encoding="utf-8"))] == ["fake_large"]
    assert runner.main(["--quick", "-k", "nothing-matches", "--bench-dir", str(bench_dir), "--no-plot"]) == 2


def test_filtered_run_without_output_writes_nothing(runner, tmp_path, monkeypatch):
    bench_dir = write_fake_benchmarks(tmp_path / "bench", FAKE_TWO_WORKLOADS)
    monkeypatch.setattr(runner, "ROOT", tmp_path)  # where a full run would write BENCHMARKS.md
    png = tmp_path / "ratios.png"
    assert runner.main(["--quick", "-k", "LARGE", "--bench-dir", str(bench_dir), "--plot", str(png)]) == 0
    assert not (tmp_path / "BENCHMARKS.md").exists() and not png.exists()
    assert runner.main(["--quick", "--bench-dir", str(bench_dir), "--no-plot"]) == 0
    assert [row[0] for row in table_rows((tmp_path / "BENCHMARKS.md").read_text(encoding="utf-8"))] == [
        "fake_small",
        "fake_large",
    ]


def test_reported_values_come_from_the_timer(runner, tmp_path):
    # Injected timer: each fake callable returns the time it should be reported with.
    bench_dir = write_fake_benchmarks(
        tmp_path / "bench",
        """
        from types import SimpleNamespace

        WORKLOADS = [
            SimpleNamespace(name="twice_as_slow", setup=lambda: (lambda: 4.12e-6, lambda: 2.06e-6), threads=1),
            SimpleNamespace(name="faster", setup=lambda: (lambda: 1.5e-3, lambda: 6.0e-3), threads=4),
            SimpleNamespace(name="no_torch", setup=lambda: (lambda: 2.5e-8, None), threads=1),
        ]
        """,
    )
    out = tmp_path / "BENCHMARKS.md"
    json_path = tmp_path / "results.json"
    rc = runner.main(
        ["--bench-dir", str(bench_dir), "--output", str(out), "--no-plot", "--json", str(json_path)],
        time_fn=lambda fn, **_: fn(),
    )
    assert rc == 0
    rows = table_rows(out.read_text(encoding="utf-8"))
    assert [row[:5] for row in rows] == [
        ["twice_as_slow", "4.12 µs", "2.06 µs", "2.00", "1"],
        ["faster", "1.5 ms", "6 ms", "0.25", "4"],
        ["no_torch", "25 ns", "—", "—", "1"],
    ]
    import json

    results = {r["name"]: r for r in json.loads(json_path.read_text(encoding="utf-8"))["results"]}
    assert results["faster"]["ratio"] == pytest.approx(0.25)
    assert results["no_torch"]["ratio"] is None


def test_failing_workload_is_reported_and_fails_the_run(runner, tmp_path):
    bench_dir = write_fake_benchmarks(
        tmp_path / "bench",
        """
        from types import SimpleNamespace

        def _broken():
            raise RuntimeError("op not implemented yet")

        WORKLOADS = [SimpleNamespace(name="broken", setup=_broken, threads=1)]
        """,
    )
    out = tmp_path / "BENCHMARKS.md"
    rc = runner.main(["--quick", "--bench-dir", str(bench_dir), "--output", str(out), "--no-plot"])
    assert rc == 1
    text = out.read_text(encoding="utf-8")
    assert table_rows(text)[0][:4] == ["broken", "failed", "—", "—"]
    assert "RuntimeError: op not implemented yet" in text


def test_chart_is_a_png(runner, tmp_path):
    pytest.importorskip("matplotlib")
    bench_dir = write_fake_benchmarks(tmp_path / "bench", FAKE_TWO_WORKLOADS)
    out, png = tmp_path / "BENCHMARKS.md", tmp_path / "ratios.png"
    rc = runner.main(["--quick", "--bench-dir", str(bench_dir), "--output", str(out), "--plot", str(png)])
    assert rc == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![" in out.read_text(encoding="utf-8") and "ratios.png" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.5e-9, "1.5 ns"), (2.5e-6, "2.5 µs"), (4.123e-6, "4.12 µs"), (0.0123, "12.3 ms"), (3.0, "3 s"), (None, "—")],
)
def test_format_seconds(runner, value, text):
    assert runner.format_seconds(value) == text


def test_time_call_returns_the_median_seconds_per_call(runner):
    # Each call advances an injected fake clock by 2**-20 s (exact in floating point), so the median per call is
    # exactly that; a real clock would make this test depend on the machine's load.
    clock = {"now": 0.0}

    def fn():
        clock["now"] += 2.0**-20

    assert runner.time_call(fn, min_run_time=1e-3, timer=lambda: clock["now"]) == 2.0**-20


def test_time_call_runs_with_the_workload_thread_count(runner):
    import ember

    previous = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        seen = []
        runner.time_call(lambda: seen.append(ember.get_num_threads()), threads=1, min_run_time=1e-3)
        assert seen and set(seen) == {1}
        assert ember.get_num_threads() == 2
    finally:
        ember.set_num_threads(previous)


def test_time_fn_gets_the_workload_thread_count(runner, tmp_path):
    bench_dir = write_fake_benchmarks(tmp_path / "bench", FAKE_TWO_WORKLOADS)
    seen = []

    def time_fn(fn, *, threads, **timing):
        seen.append((threads, timing))
        return 1e-6

    rc = runner.main(
        ["--quick", "--bench-dir", str(bench_dir), "--output", str(tmp_path / "b.md"), "--no-plot"], time_fn=time_fn
    )
    assert rc == 0
    # fake_small (1 thread) then fake_large (2 threads), ember then PyTorch; quick mode shortens the timing.
    assert seen == [(1, {"min_run_time": 1e-3})] * 2 + [(2, {"min_run_time": 1e-3})] * 2


def test_thread_clock_applies_to_single_threaded_workloads_only(runner, tmp_path):
    import time

    bench_dir = write_fake_benchmarks(tmp_path / "bench", FAKE_TWO_WORKLOADS)
    seen = []

    def time_fn(fn, *, threads, **timing):
        seen.append((threads, timing.get("timer")))
        return 1e-6

    out = tmp_path / "b.md"
    argv = ["--clock", "thread", "--bench-dir", str(bench_dir), "--output", str(out), "--no-plot"]
    assert runner.main(argv, time_fn=time_fn) == 0
    assert seen == [(1, time.thread_time)] * 2 + [(2, None)] * 2
    text = out.read_text(encoding="utf-8")
    assert "--clock thread" in text and "`time.thread_time`" in text


def test_terminal_output_is_a_compare_table(runner, tmp_path, capsys):
    bench_dir = write_fake_benchmarks(
        tmp_path / "bench",
        """
        from types import SimpleNamespace

        WORKLOADS = [
            SimpleNamespace(name="one", setup=lambda: (lambda: 2.0e-6, lambda: 4.0e-6), threads=1),
            SimpleNamespace(name="two", setup=lambda: (lambda: 3.0e-6, None), threads=2),
        ]
        """,
    )
    rc = runner.main(
        ["--bench-dir", str(bench_dir), "--output", str(tmp_path / "b.md"), "--no-plot"],
        time_fn=lambda fn, **_: fn(),
    )
    assert rc == 0
    out = capsys.readouterr().out  # not a terminal here: the Markdown form of the Compare table
    assert "| | threads | ember | PyTorch |" in out
    assert "| one | 1 | **2.0** | 4.0 |" in out
    assert "| two | 2 | **3.0** |  |" in out
    assert "Times are in microseconds (us)." in out


def test_suite_lists_the_hot_path_workloads(runner, capsys):
    assert runner.main(["--list"]) == 0
    names = capsys.readouterr().out.split()
    assert {"add_1elem_f32", "add_1000_f32", "add_1M_f32"} <= set(names)
