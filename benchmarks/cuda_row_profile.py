"""Time and profile chosen GPU benchmark rows: ember next to PyTorch, then where ember's host time goes.

    python benchmarks/cuda_row_profile.py [-k NAME ...] [--calls 30] [--top 30] [--out FILE]

For each ``device="cuda"`` workload of ``bench_*.py`` whose name contains a ``-k`` substring: its setup (a
failing setup prints its traceback and the next row runs), the minimum time per call of ember and of PyTorch
over interleaved blocks (so both see the same machine state), the host synchronisations of one ember call
(``ember.cuda._sync.record``), then cProfile of ``--calls`` ember calls: the functions with the most own
time and the most cumulative time. The profiles go to the file ``--out`` when it is given (the terminal gets
the timings), so a GPU run can bring them back as one file.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402 - benchmarks/ on the path first


def _block(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def _interleaved(ours, theirs, blocks=7):
    """Minimum seconds per call of each callable over ``blocks`` interleaved blocks of about 20 ms."""
    ours()
    if theirs is not None:
        theirs()
    once = max(_block(ours, 1), 1e-6)
    calls = max(1, min(200, int(0.02 / once)))
    best_ours = best_theirs = float("inf")
    for _ in range(blocks):
        best_ours = min(best_ours, _block(ours, calls))
        if theirs is not None:
            best_theirs = min(best_theirs, _block(theirs, calls))
    return best_ours, (best_theirs if theirs is not None else None), calls


def _syncs(ours):
    try:
        from ember.cuda import _sync
    except ImportError:
        return []
    with _sync.record() as reasons:
        ours()
    return list(reasons)


def _profile(ours, calls, top):
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        ours()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("-k", dest="patterns", action="append", default=[])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args(argv)
    workloads = run.select(run.discover(run.BENCH_DIR), args.patterns, "cuda")
    if args.out is not None:
        args.out.write_text("")
    summary = []
    for workload in workloads:
        print(f"\n=== {workload.name}", flush=True)
        try:
            ours, theirs = workload.setup()
        except Exception:  # noqa: BLE001 - report the row's traceback and go on
            traceback.print_exc()
            summary.append(f"{workload.name}: setup failed")
            continue
        best_ours, best_theirs, calls = _interleaved(ours, theirs)
        ratio = f"{best_ours / best_theirs:.2f}" if best_theirs else "-"
        theirs_us = f"{best_theirs * 1e6:.1f}" if best_theirs else "-"
        line = f"{workload.name}: ember {best_ours * 1e6:.1f} us, torch {theirs_us} us, ratio {ratio} ({calls} calls)"
        print(line)
        summary.append(line)
        reasons = _syncs(ours)
        print(f"host synchronisations in one ember call: {len(reasons)}")
        for reason in reasons[:20]:
            print("  ", reason)
        if args.no_profile:
            continue
        text = _profile(ours, args.calls, args.top)
        if args.out is not None:
            with args.out.open("a") as out:
                out.write(f"\n=== {workload.name}\n{line}\n{text}")
        else:
            print(text)
    print("\n=== summary")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
