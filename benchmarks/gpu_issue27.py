"""Issue 27's GPU speed rows in one table: ember eager / compiled / reduce-overhead next to PyTorch's, one process.

Usage (on the GPU machine, from the repository root)::

    python benchmarks/gpu_issue27.py              # every case of bench_cuda_compile.py
    python benchmarks/gpu_issue27.py -k small     # cases whose name contains a substring
    python benchmarks/gpu_issue27.py --budget 150 # start no case after 150 s (default 180)

Each case of :mod:`bench_cuda_compile` is built for each of its modes and both libraries (building
compiles, checks compiled == eager, warms up and records CUDA graphs; its seconds are the "setup"
column), then timed: calls in a loop ended by one device synchronisation, the best of 5 blocks,
ember and PyTorch interleaved twice. The table gives milliseconds per call, the ratios ember/PyTorch
in the same mode, and for the bandwidth cases GB/s and the percentage of the best copy bandwidth
measured in the same run (the clone case, which runs first). A variant that fails prints its error
in place of a time; the script goes on with the next.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cuda_compile as cases  # noqa: E402
from harness import Skip  # noqa: E402


def measure(fn, sync, *, target=0.25, repeats=5):
    """Seconds per call of ``fn``: the best of ``repeats`` blocks of calls, each ended by ``sync()``."""
    fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    one = max(time.perf_counter() - start, 1e-6)
    inner = max(1, min(500, int(target / repeats / one)))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def _build(case, lib, mode):
    """``(fn, setup seconds)`` or ``(None, error text)``."""
    start = time.perf_counter()
    try:
        fn = case.build(lib, mode)
        cases.sync_of(lib)()
    except Exception as exc:  # noqa: BLE001 - one failing variant must not end the run
        traceback.print_exc(file=sys.stderr)
        return None, f"{type(exc).__name__}: {str(exc)[:80]}"
    return fn, time.perf_counter() - start


def _free(*libs):
    gc.collect()
    if cases.DEVICE == "cpu":
        return
    for lib in libs:
        if lib is not None:
            lib.cuda.empty_cache()


def run_case(case, ember, torch):
    """``{mode: {"ember": (seconds or error, setup), "torch": ...}}`` for ``case``."""
    results = {}
    for mode in case.modes:
        built = {"ember": _build(case, ember, mode)}
        if torch is not None:
            built["torch"] = _build(case, torch, mode)
        libs = {"ember": ember, "torch": torch}
        times = {name: [] for name in built}
        for _ in range(2):  # interleaved: a slow moment of the machine hits both
            for name, (fn, _setup) in built.items():
                if fn is not None:
                    times[name].append(measure(fn, cases.sync_of(libs[name])))
        results[mode] = {
            name: (min(times[name]) if fn is not None else setup, setup if fn is not None else None)
            for name, (fn, setup) in built.items()
        }
        del built
        _free(ember, torch)
    return results


def _ms(value):
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value * 1e3:.3f}"


def _ratio(a, b):
    if isinstance(a, float) and isinstance(b, float) and b > 0:
        return f"{a / b:.2f}"
    return "-"


def print_table(rows, device_name, elapsed):
    print(f"\nissue 27 GPU rows on {device_name} (total {elapsed:.0f} s, setup = compile + checks + warm-up)\n")
    header = ["case", "mode", "ember ms", "torch ms", "ember/torch", "ember GB/s", "% copy", "setup s (e/t)"]
    lines = [header]
    copy_bw = None
    for case, results in rows:
        for mode, sides in results.items():
            e, e_setup = sides.get("ember", (None, None))
            t, t_setup = sides.get("torch", (None, None))
            rate = pct = "-"
            if case.work and isinstance(e, float):
                gbs = case.work / e / 1e9
                if case.name.startswith("cuda_c27_clone"):
                    best = max([case.work / x / 1e9 for x in (e, t) if isinstance(x, float)])
                    copy_bw = best
                rate = f"{gbs:.0f}"
                if copy_bw:
                    pct = f"{100 * gbs / copy_bw:.0f}%"
            setups = "/".join(f"{s:.1f}" if isinstance(s, float) else "-" for s in (e_setup, t_setup))
            lines.append([case.name.replace("cuda_c27_", ""), mode, _ms(e), _ms(t), _ratio(e, t), rate, pct, setups])
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    for k, line in enumerate(lines):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    # the ratios issue 27 sets targets for: compiled vs torch.compile, reduce-overhead vs its twin
    print()
    for case, results in rows:
        for mode in ("compiled", "reduce_overhead"):
            sides = results.get(mode)
            if sides and isinstance(sides.get("ember", (None,))[0], float):
                t = sides.get("torch", (None,))[0]
                print(f"{case.name}: ember {mode} / torch {mode}: {_ratio(sides['ember'][0], t)}")
    if copy_bw:
        print(f"copy bandwidth (best clone): {copy_bw:.0f} GB/s")


def _smoke_sizes():
    """Small sizes on the CPU (``--smoke``): every code path of the script, in seconds, without a GPU."""
    cases.DEVICE = "cpu"
    cases.N = 256
    cases.D_MODEL, cases.NHEAD, cases.FFN = 32, 2, 64
    cases.LARGE_BATCH, cases.LARGE_SEQ, cases.SMALL_BATCH, cases.SMALL_SEQ = 2, 8, 2, 4


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", action="append", default=[], help="run the cases whose name contains this")
    parser.add_argument("--budget", type=float, default=180.0, help="start no case after this many seconds")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU: checks the plumbing only")
    args = parser.parse_args(argv)
    if args.smoke:
        _smoke_sizes()
        import torch

        import ember
    else:
        try:
            ember = cases.ember_cuda()
        except Skip as exc:
            print(f"skipped: no usable GPU for ember ({exc})")
            return 0
        torch = cases.torch_cuda()
    if torch is None:
        print("PyTorch with CUDA is not available: its columns stay empty")
    selected = [c for c in cases.CASES if not args.k or any(k in c.name for k in args.k)]
    start = time.perf_counter()
    rows = []
    for case in selected:
        if time.perf_counter() - start > args.budget:
            print(f"{case.name}: not run (past the {args.budget:.0f} s budget)", flush=True)
            continue
        case_start = time.perf_counter()
        rows.append((case, run_case(case, ember, torch)))
        print(f"{case.name}: done in {time.perf_counter() - case_start:.0f} s", flush=True)
    device_name = "cpu (smoke sizes)" if args.smoke else ember.cuda.get_device_name()
    print_table(rows, device_name, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
