"""Run Ember's benchmark suite: ember and PyTorch on the same work, one table out.

Finds every ``bench_*.py`` beside this file (each defines ``WORKLOADS``, a list of
``harness.Workload``), times each workload's ember and PyTorch callables in this
one process, and writes a Markdown table (``BENCHMARKS.md`` at the repository
root) with the machine it ran on, plus a bar chart of the ratios
(``benchmarks/ratios.png``, when matplotlib is installed).

Usage::

    python benchmarks/run.py                 # everything (nox -s bench)
    python benchmarks/run.py -k add_1elem    # workloads whose name contains a substring
    python benchmarks/run.py --quick         # few, short repeats: checks the plumbing only
    python benchmarks/run.py --clock thread  # CPU time of the thread for 1-thread rows (busy machines)
    python benchmarks/run.py --list          # names only
    python benchmarks/run.py --device cuda   # the GPU workloads (bench_cuda.py) -> BENCHMARKS_CUDA.md

Times are medians per call measured by ``ember.utils.benchmark.Timer`` (see
``harness.time_call``); the ratio is ember's time divided by PyTorch's, so 1.00 is
parity and lower is better for ember. The terminal gets the same numbers as an
``ember.utils.benchmark.Compare`` table. Benchmarks never gate CI: the exit status
is non-zero only when a workload fails to run.

``--device cuda`` runs the GPU workloads instead (``Workload.device == "cuda"``),
on the wall clock, and writes ``BENCHMARKS_CUDA.md`` (and ``benchmarks/ratios_cuda.png``),
so a GPU run never replaces the CPU table. Its rows also give rates (GB/s,
TFLOP/s) where the workload states its work. Without a GPU they are skipped.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(BENCH_DIR) not in sys.path:  # bench modules import `harness` from here
    sys.path.insert(0, str(BENCH_DIR))

from harness import RATE_SCALE, NotRun, Skip, limit_threads, time_call  # noqa: E402

TABLE_HEADER = "| workload | ember time | PyTorch time | ratio (ember / PyTorch) | threads | machine |"
TABLE_RULE = "|---|---:|---:|---:|---:|---|"
CUDA_TABLE_HEADER = (
    "| workload | ember time | PyTorch time | ratio (ember / PyTorch) | ember rate | PyTorch rate | GPU |"
)
CUDA_TABLE_RULE = "|---|---:|---:|---:|---:|---:|---|"
DEVICES = ("cpu", "cuda")
MISSING = "—"


@dataclass
class Result:
    """The measurement of one workload (seconds per call; ``None`` where not measured)."""

    name: str
    threads: int
    description: str
    ember_s: float | None
    torch_s: float | None
    error: str | None = None
    skipped: str | None = None  # why the row was not measured at all (no GPU here)
    note: str | None = None  # why one side was not measured (a NotRun's reason)
    work: float = 0.0  # per operation, in the numerator of ``unit``
    unit: str = ""

    @property
    def ratio(self) -> float | None:
        if self.ember_s is None or self.torch_s is None or self.torch_s <= 0:
            return None
        return self.ember_s / self.torch_s

    def rate(self, seconds: float | None) -> float | None:
        """``work / seconds`` in ``unit`` (GB/s, TFLOP/s), or None without a rate."""
        if not self.work or not self.unit or seconds is None or seconds <= 0:
            return None
        return self.work / seconds / RATE_SCALE[self.unit]


# --------------------------------------------------------------------------- discovery


def discover(bench_dir: Path) -> list:
    """Every workload of every ``bench_*.py`` in ``bench_dir``, in file then list order."""
    workloads = []
    seen: dict[str, Path] = {}
    for path in sorted(bench_dir.glob("bench_*.py")):
        spec = importlib.util.spec_from_file_location(f"ember_benchmarks.{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as a normal import would (dataclasses need it)
        spec.loader.exec_module(module)
        if not hasattr(module, "WORKLOADS"):
            raise SystemExit(f"{path} defines no WORKLOADS list")
        for workload in module.WORKLOADS:
            if workload.name in seen:
                raise SystemExit(f"workload {workload.name!r} is defined twice: in {seen[workload.name]} and {path}")
            seen[workload.name] = path
            workloads.append(workload)
    return workloads


def select(workloads: Sequence, patterns: Sequence[str], device: str = "cpu") -> list:
    """The workloads of ``device`` whose name contains any of ``patterns`` (case-insensitive); all if none."""
    workloads = [w for w in workloads if getattr(w, "device", "cpu") == device]
    if not patterns:
        return list(workloads)
    lowered = [p.lower() for p in patterns]
    return [w for w in workloads if any(p in w.name.lower() for p in lowered)]


# --------------------------------------------------------------------------- measuring

TimeFn = Callable[..., float]


CLOCKS = ("wall", "thread")


def measure(
    workload,
    *,
    quick: bool = False,
    time_fn: TimeFn = time_call,
    clock: str = "wall",
    min_run_time: float | None = None,
) -> Result:
    """Set up ``workload`` and time its ember and PyTorch callables, one after the other.

    ``time_fn(fn, threads=..., **timing)`` returns seconds per call; the default,
    ``harness.time_call``, sets ember's and numpy's thread count itself, and
    :func:`limit_threads` sets PyTorch's. With ``clock="thread"``, single-threaded
    workloads are timed with ``time.thread_time`` (CPU time of this thread, which
    other processes on a busy machine do not inflate); multi-threaded ones keep
    the wall clock, since their work runs on other threads too, and so do GPU
    workloads. ``min_run_time`` overrides the timer's budget per callable. A
    ``Workload.inner`` above 1 divides the times (operations per call). A ``Workload.self_timed``
    workload's callables are called once, as ``fn(quick)``, and return the seconds they measured
    themselves (the clock and the timer's budget don't apply).
    """
    threads = int(getattr(workload, "threads", 1))
    description = getattr(workload, "description", "")
    on_gpu = getattr(workload, "device", "cpu") != "cpu"
    inner = int(getattr(workload, "inner", 1))
    self_timed = bool(getattr(workload, "self_timed", False))
    rate = {"work": float(getattr(workload, "work", 0.0)), "unit": getattr(workload, "unit", "")}
    timing = {"min_run_time": 1e-3} if quick else {}
    if min_run_time is not None and not quick:
        timing["min_run_time"] = min_run_time
    if clock == "thread" and threads == 1 and not on_gpu:  # GPU work runs off this thread: wall clock only
        timing["timer"] = time.thread_time
    notes = []

    def timed(fn):
        if fn is None:
            return None
        if isinstance(fn, NotRun):
            notes.append(fn.reason)
            return None
        if self_timed:  # it measures itself (fresh processes, say): its answer is the time
            return fn(quick) / inner
        return time_fn(fn, threads=threads, **timing) / inner

    try:
        ember_fn, torch_fn = workload.setup()
        with limit_threads(threads):
            ember_s = timed(ember_fn)
            torch_s = timed(torch_fn)
    except Skip as exc:
        return Result(workload.name, threads, description, None, None, skipped=str(exc), **rate)
    except Exception as exc:  # report the failure in the table, keep going with the others
        return Result(workload.name, threads, description, None, None, error=f"{type(exc).__name__}: {exc}", **rate)
    return Result(workload.name, threads, description, ember_s, torch_s, note="; ".join(notes) or None, **rate)


def run(
    workloads: Sequence,
    *,
    quick: bool = False,
    time_fn: TimeFn = time_call,
    progress: bool = True,
    clock: str = "wall",
    min_run_time: float | None = None,
) -> list[Result]:
    """Measure every workload, reporting each as it finishes (a tqdm bar on a terminal)."""
    bar = None
    if progress and sys.stderr.isatty():
        try:
            from tqdm import tqdm
        except ImportError:
            pass
        else:
            bar = tqdm(total=len(workloads), desc="benchmarks", unit="workload", file=sys.stderr)
    results = []
    for workload in workloads:
        if bar is not None:
            bar.set_postfix_str(workload.name)
        result = measure(workload, quick=quick, time_fn=time_fn, clock=clock, min_run_time=min_run_time)
        results.append(result)
        line = _summary_line(result)
        if bar is not None:
            bar.write(line, file=sys.stderr)
            bar.update(1)
        elif progress:
            print(line, file=sys.stderr)
    if bar is not None:
        bar.close()
    return results


def _summary_line(result: Result) -> str:
    if result.error is not None:
        return f"{result.name}: FAILED ({result.error})"
    if result.skipped is not None:
        return f"{result.name}: skipped ({result.skipped})"
    line = (
        f"{result.name}: ember {format_seconds(result.ember_s)}, PyTorch {format_seconds(result.torch_s)}, "
        f"ratio {format_ratio(result.ratio)}"
    )
    if result.unit:
        line += (
            f", ember {format_rate(result.rate(result.ember_s), result.unit)}, "
            f"PyTorch {format_rate(result.rate(result.torch_s), result.unit)}"
        )
    if result.note:
        line += f" [{result.note}]"
    return line


def compare_table(results: Sequence[Result]):
    """The results as an ``ember.utils.benchmark.Compare``: a row per workload, grouped by thread count,
    with ember and PyTorch columns (failed or unmeasured cells are left empty)."""
    from ember.utils.benchmark import Compare, Measurement, TaskSpec

    measurements = []
    for r in results:
        for library, seconds in (("ember", r.ember_s), ("PyTorch", r.torch_s)):
            if seconds is not None:
                spec = TaskSpec(
                    stmt=r.name,
                    setup="pass",
                    label="ember vs PyTorch",
                    sub_label=r.name,
                    description=library,
                    num_threads=r.threads,
                )
                measurements.append(Measurement(number_per_run=1, raw_times=[seconds], task_spec=spec))
    return Compare(measurements)


# --------------------------------------------------------------------------- machine


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _host_lines(info: dict[str, str]) -> list[str]:
    """The Machine section's lines on the host: CPU, OS and software versions (with the source commit)."""
    return [
        f"- CPU: {info['cpu']} ({info['logical_cores']} logical cores, {info['usable_cores']} usable)",
        f"- OS: {info['os']}",
        f"- Python {info['python']}, numpy {info['numpy']}, ember-core {info['ember-core']} "
        f"(source commit {info.get('commit', 'unknown')}), torch {info['torch']}",
    ]


def _source_commit() -> str:
    """The git commit of the ember source these benchmarks ran (``unknown`` outside a git checkout)."""
    import subprocess

    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
                              capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, str]:
    """What the numbers depend on: CPU, cores, OS and library versions."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 0
    return {
        "cpu": cpu_model(),
        "logical_cores": str(os.cpu_count()),
        "usable_cores": str(usable),
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "ember-core": _version("ember-core"),
        "commit": _source_commit(),
        "torch": _version("torch"),
    }


def gpu_info() -> dict[str, str]:
    """The GPU the cuda workloads run on and the GPU libraries' versions (empty without a GPU)."""
    try:
        import ember.cuda

        if not ember.cuda.is_available():
            return {}
        props = ember.cuda.get_device_properties(0)
        memory = getattr(props, "total_memory", 0)
        return {
            "gpu": ember.cuda.get_device_name(0),
            "gpu_memory": f"{memory / 2**30:.0f} GiB" if memory else "unknown",
            "cupy": _version("cupy-cuda13x") if _version("cupy-cuda13x") != "not installed" else _version("cupy"),
        }
    except Exception as exc:  # the table still gets written, saying what went wrong
        return {"gpu": f"unknown ({type(exc).__name__}: {exc})"}


def machine_label(info: dict[str, str]) -> str:
    """The short machine description repeated in each table row."""
    return f"{info['cpu']}, {info['usable_cores']} cores"


# --------------------------------------------------------------------------- reporting


def format_seconds(seconds: float | None) -> str:
    """``4.12 µs``-style: three significant figures in the largest unit below the value."""
    if seconds is None:
        return MISSING
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_ratio(ratio: float | None) -> str:
    return MISSING if ratio is None else f"{ratio:.2f}"


def format_rate(rate: float | None, unit: str) -> str:
    """``4330 GB/s``-style: three significant figures (at least the integer part)."""
    if rate is None or not unit:
        return MISSING
    return f"{rate:.0f} {unit}" if rate >= 100 else f"{rate:.3g} {unit}"


def markdown(
    results: Sequence[Result],
    info: dict[str, str],
    *,
    quick: bool,
    patterns: Sequence[str],
    plot: str | None,
    clock: str = "wall",
    device: str = "cpu",
) -> str:
    """The whole BENCHMARKS.md text (BENCHMARKS_CUDA.md's for ``device="cuda"``)."""
    if device != "cpu":
        return _markdown_gpu(results, info, quick=quick, patterns=patterns, plot=plot, device=device)
    label = machine_label(info)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    options = [
        *(f"-k {p}" for p in patterns),
        *(["--quick"] if quick else []),
        *([f"--clock {clock}"] if clock != "wall" else []),
    ]
    command = " ".join(["python benchmarks/run.py", *options])
    lines = [
        "# Benchmarks",
        "",
        f"Written by `nox -s bench` (`{command}`) on {when}.",
        "",
        "Each time is the median per call over many timed blocks of calls",
        "(`ember.utils.benchmark.Timer.blocked_autorange`, with the thread count of the row set in ember,",
        "numpy's BLAS and PyTorch); ember and PyTorch are measured one after the other in the same process",
        "on the same inputs. The ratio is ember's time over PyTorch's: 1.00 is parity, lower is better for",
        "ember. These numbers describe one machine at one moment; they never gate CI.",
    ]
    if clock == "thread":
        lines += [
            "",
            "**Clock**: single-threaded rows are CPU time of the measuring thread (`time.thread_time`), which",
            "other processes on a busy machine do not inflate; multi-threaded rows are wall time.",
        ]
    if quick:
        lines += ["", "**Quick mode**: very few repeats; these numbers check the plumbing, not the speed."]
    lines += [
        "",
        "## Machine",
        "",
        *_host_lines(info),
        "",
        "## Results",
        "",
        TABLE_HEADER,
        TABLE_RULE,
    ]
    for r in results:
        ember_cell = "failed" if r.error is not None else format_seconds(r.ember_s)
        cells = [r.name, ember_cell, format_seconds(r.torch_s), format_ratio(r.ratio), str(r.threads), label]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- `{r.name}`: {r.description}" for r in results if r.description]
    notes += [f"- `{r.name}` failed: {r.error}" for r in results if r.error is not None]
    if notes:
        lines += ["", "Workloads:", "", *notes]
    if plot is not None:
        lines += ["", f"![ember / PyTorch time ratio per workload]({plot})"]
    return "\n".join(lines) + "\n"


def _markdown_gpu(
    results: Sequence[Result],
    info: dict[str, str],
    *,
    quick: bool,
    patterns: Sequence[str],
    plot: str | None,
    device: str,
) -> str:
    """BENCHMARKS_CUDA.md: the GPU rows, with rates, and the GPU they ran on."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    options = [f"--device {device}", *(f"-k {p}" for p in patterns), *(["--quick"] if quick else [])]
    command = " ".join(["python benchmarks/run.py", *options])
    gpu = info.get("gpu", "no GPU")
    lines = [
        "# GPU benchmarks",
        "",
        f"Written by `{command}` on {when}.",
        "",
        "Ember and PyTorch run the same work on the same GPU in one process, one after the other. Every timed",
        "call ends with a device synchronisation (`ember.cuda.synchronize()` / `torch.cuda.synchronize()`), so",
        "the wall time is the GPU's time; rows that time many small operations per call divide by their count.",
        "Each time is the median per operation over timed blocks (`ember.utils.benchmark.Timer.blocked_autorange`).",
        "The ratio is ember's time over PyTorch's: 1.00 is parity, lower is better for ember. Rates are bytes",
        "read and written per second (GB/s, 1e9) or floating-point operations per second (TFLOP/s, 1e12).",
        "These numbers describe one machine at one moment; they never gate CI.",
    ]
    if quick:
        lines += ["", "**Quick mode**: very few repeats; these numbers check the plumbing, not the speed."]
    lines += [
        "",
        "## Machine",
        "",
        f"- GPU: {gpu} ({info.get('gpu_memory', 'unknown memory')}), CuPy {info.get('cupy', 'not installed')}",
        *_host_lines(info),
        "",
        "## Results",
        "",
        CUDA_TABLE_HEADER,
        CUDA_TABLE_RULE,
    ]
    for r in results:
        if r.error is not None:
            ember_cell = "failed"
        elif r.skipped is not None:
            ember_cell = "skipped"
        else:
            ember_cell = format_seconds(r.ember_s)
        cells = [
            r.name,
            ember_cell,
            format_seconds(r.torch_s),
            format_ratio(r.ratio),
            format_rate(r.rate(r.ember_s), r.unit),
            format_rate(r.rate(r.torch_s), r.unit),
            gpu,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- `{r.name}`: {r.description}" for r in results if r.description]
    notes += [f"- `{r.name}`, not measured on one side: {r.note}" for r in results if r.note]
    notes += [f"- `{r.name}` skipped: {r.skipped}" for r in results if r.skipped is not None]
    notes += [f"- `{r.name}` failed: {r.error}" for r in results if r.error is not None]
    if notes:
        lines += ["", "Workloads:", "", *notes]
    if plot is not None:
        lines += ["", f"![ember / PyTorch time ratio per workload]({plot})"]
    return "\n".join(lines) + "\n"


def plot_ratios(results: Sequence[Result], path: Path) -> bool:
    """Draw a bar chart of the ratios to ``path``; ``False`` when there is nothing or no matplotlib."""
    measured = [r for r in results if r.ratio is not None]
    if not measured:
        print("no ember/PyTorch ratios to plot (is torch installed?)", file=sys.stderr)
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart", file=sys.stderr)
        return False
    names = [r.name for r in measured]
    ratios = [r.ratio for r in measured]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(names) + 2), 4.0), layout="constrained")
    colors = ["tab:green" if x <= 1.0 else "tab:orange" for x in ratios]
    bars = ax.bar(names, ratios, color=colors)
    ax.bar_label(bars, labels=[f"{x:.2f}" for x in ratios], padding=2)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--", label="parity with PyTorch")
    ax.set_ylabel("ember time / PyTorch time")
    ax.set_title("Ember vs PyTorch (lower is better for ember)")
    ax.set_ylim(0, max(max(ratios), 1.0) * 1.2)
    ax.legend(loc="upper left")
    ax.tick_params(axis="x", labelrotation=20)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "-k", dest="patterns", action="append", default=[], metavar="NAME", help="only workloads containing NAME"
    )
    parser.add_argument("--quick", action="store_true", help="few short repeats (for tests of this runner)")
    parser.add_argument("--list", action="store_true", help="list the workload names and exit")
    parser.add_argument(
        "--clock",
        choices=CLOCKS,
        default="wall",
        help="'thread': CPU time of the measuring thread for single-threaded workloads (for busy machines)",
    )
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="'cuda': the GPU workloads (bench_cuda.py), written to BENCHMARKS_CUDA.md; skipped without a GPU",
    )
    parser.add_argument(
        "--min-run-time", type=float, default=None, metavar="S", help="seconds of timed blocks per callable"
    )
    parser.add_argument("--bench-dir", type=Path, default=BENCH_DIR, help="where to look for bench_*.py")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="Markdown file to write (default: BENCHMARKS.md for a full run, BENCHMARKS_CUDA.md with "
        "--device cuda; with -k, nothing unless given)",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="bar chart to write (default: benchmarks/ratios.png, benchmarks/ratios_cuda.png with --device cuda)",
    )
    parser.add_argument("--no-plot", action="store_true", help="do not draw the chart")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results as JSON")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, time_fn: TimeFn = time_call) -> int:
    args = parse_args(argv)
    if args.plot is None:
        args.plot = BENCH_DIR / ("ratios.png" if args.device == "cpu" else f"ratios_{args.device}.png")
    workloads = select(discover(args.bench_dir), args.patterns, args.device)
    if args.list:
        for w in workloads:
            print(w.name)
        return 0
    if not workloads:
        print(f"no workload matches {args.patterns} in {args.bench_dir}", file=sys.stderr)
        return 2
    results = run(workloads, quick=args.quick, time_fn=time_fn, clock=args.clock, min_run_time=args.min_run_time)
    if any(r.ember_s is not None or r.torch_s is not None for r in results):
        compare = compare_table(results)
        compare.colorize(rowwise=True)
        print(compare if sys.stdout.isatty() else compare.markdown())
    if args.output is None and args.patterns:  # a partial run must not replace the suite's table with a few rows
        print("-k: results printed only; pass --output FILE to write a table", file=sys.stderr)
    else:
        write_reports(args, results)
    failed = [r.name for r in results if r.error is not None]
    if failed:
        print(f"failed workloads: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def write_reports(args: argparse.Namespace, results: Sequence[Result]) -> None:
    """BENCHMARKS.md (or ``--output``), the ratio chart and the optional JSON."""
    if args.output is None:
        args.output = ROOT / ("BENCHMARKS.md" if args.device == "cpu" else f"BENCHMARKS_{args.device.upper()}.md")
    info = machine_info()
    if args.device != "cpu":
        info.update(gpu_info())
    plot_link = None
    if not args.no_plot and plot_ratios(results, args.plot):
        plot_link = os.path.relpath(args.plot.resolve(), args.output.resolve().parent).replace(os.sep, "/")
    text = markdown(
        results, info, quick=args.quick, patterns=args.patterns, plot=plot_link, clock=args.clock, device=args.device
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}" + (f" and {args.plot}" if plot_link else ""), file=sys.stderr)
    if args.json is not None:
        payload = {
            "machine": info,
            "quick": args.quick,
            "clock": args.clock,
            "device": args.device,
            "results": [
                asdict(r) | {"ratio": r.ratio, "ember_rate": r.rate(r.ember_s), "torch_rate": r.rate(r.torch_s)}
                for r in results
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
