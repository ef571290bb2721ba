"""Phases of the GPT training step on the GPU, ember next to PyTorch (issue 24).

    python benchmarks/gpt_phases.py [--config small|tiny] [--steps 5] [--sync-report]

For each library: the first step's time (kernels compiled or loaded from the disk cache), then the minimum
over ``--steps`` steps of each phase (forward, backward, ``clip_grad_norm_``, the AdamW step, ``zero_grad``),
each phase followed by a device synchronisation, and of the whole step; "queued" is the host's time to
queue a whole step (the time until ``train_step`` returns, before the synchronisation): a step whose
queued time is close to its total is bound by host time, one with a host synchronisation inside can't
queue ahead. ``--sync-report`` lists every host synchronisation of one step after the warm-up
(``ember.cuda._sync.record``), where it comes from, and runs one step under
``ember.cuda.set_sync_debug_mode("error")``. ``--profile FILE`` writes where ember's host time goes to FILE:
the ops of one step with their counts and host times (``ember.profiler``), the ops that took the generic
path (the CPU kernel on CuPy arrays), and cProfile's top functions over ``--steps`` steps. ``--kernels FILE``
writes each library's GPU kernels per step (PyTorch's profiler records every kernel of the process).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpt_model  # noqa: E402 - benchmarks/ on the path first

_PHASES = ("forward", "backward", "clip", "step", "zero_grad")


def _phase_times(lib, parts, steps):
    model, optimizer, x, y = parts
    sync = lib.cuda.synchronize
    best = dict.fromkeys((*_PHASES, "total", "queued"), float("inf"))
    for _ in range(steps):
        sync()
        start = time.perf_counter()
        gpt_model.train_step(lib, model, optimizer, x, y)
        queued = time.perf_counter() - start
        sync()
        best["total"] = min(best["total"], time.perf_counter() - start)
        best["queued"] = min(best["queued"], queued)
        marks = [time.perf_counter()]
        loss = gpt_model.forward_loss(model, x, y)
        sync()
        marks.append(time.perf_counter())
        loss.backward()
        sync()
        marks.append(time.perf_counter())
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        sync()
        marks.append(time.perf_counter())
        optimizer.step()
        sync()
        marks.append(time.perf_counter())
        optimizer.zero_grad(set_to_none=True)
        sync()
        marks.append(time.perf_counter())
        for name, a, b in zip(_PHASES, marks, marks[1:]):
            best[name] = min(best[name], b - a)
    return best


def _first_step(lib, parts):
    start = time.perf_counter()
    gpt_model.train_step(lib, *parts)
    lib.cuda.synchronize()
    return time.perf_counter() - start


def _sync_report(ember, parts):
    from ember.cuda import _sync

    with _sync.record() as reasons:
        gpt_model.train_step(ember, *parts)
    print(f"\nhost synchronisations in one ember step after the warm-up: {len(reasons)}")
    for reason in reasons:
        print("  ", reason)
    ember.cuda.synchronize()
    ember.cuda.set_sync_debug_mode("error")
    try:
        gpt_model.train_step(ember, *parts)
        print('one step under set_sync_debug_mode("error"): no synchronisation')
    except RuntimeError as exc:
        print(f'one step under set_sync_debug_mode("error") raised: {exc}')
    finally:
        ember.cuda.set_sync_debug_mode("default")
    ember.cuda.synchronize()


def _host_profile(ember, parts, steps, path):
    import cProfile
    import io
    import pstats

    import ember.profiler
    from ember.cuda import _backend

    text = io.StringIO()
    _backend.generic_ops.clear()
    with ember.profiler.profile() as prof:
        gpt_model.train_step(ember, *parts)
    ember.cuda.synchronize()
    text.write(f"ops that took the generic path in one step: {sorted(_backend.generic_ops)}\n\n")
    text.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=80))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        gpt_model.train_step(ember, *parts)
    profiler.disable()
    ember.cuda.synchronize()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(70)
    stats.sort_stats("cumulative").print_stats(70)
    Path(path).write_text(text.getvalue())


def _kernel_profile(torch, sides, steps, path):
    """Write the GPU kernels of ``steps`` training steps of each side to ``path``, the longest total first.

    PyTorch's profiler records through CUPTI every kernel of the process, so CuPy's kernels (ember's) are
    listed too; PyTorch is only the recorder here.
    """
    from torch.profiler import ProfilerActivity, profile

    lines = []
    for name, lib, parts in sides:
        gpt_model.train_step(lib, *parts)
        lib.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                gpt_model.train_step(lib, *parts)
            lib.cuda.synchronize()
        rows = []
        for event in prof.key_averages():
            total = getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0)
            if total > 0:
                rows.append((total / steps, event.count // steps, event.key))
        rows.sort(reverse=True)
        device_total = sum(r[0] for r in rows)
        lines.append(f"== {name}: {device_total / 1e3:.3f} ms of kernels per step, {sum(r[1] for r in rows)} kernels")
        lines.extend(f"{us:10.1f} us {count:5d}x  {key[:150]}" for us, count, key in rows[:60])
    Path(path).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:1] + [line for line in lines if line.startswith("==")]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--config", choices=("small", "tiny"), default="small")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--sync-report", action="store_true")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--kernels", default=None, help="write each side's GPU kernels per step to this file")
    args = parser.parse_args(argv)
    config = gpt_model.SMALL if args.config == "small" else gpt_model.TINY

    import bench_cuda

    ember = bench_cuda._ember_cuda()
    torch = None if args.no_torch else bench_cuda._torch_cuda()
    ours, theirs = bench_cuda._gpt_pair(config, ember, torch)
    sides = [("ember", ember, ours)] + ([("torch", torch, theirs)] if theirs is not None else [])
    firsts = {name: _first_step(lib, parts) for name, lib, parts in sides}
    results = {name: _phase_times(lib, parts, args.steps) for name, lib, parts in sides}
    print(f"GPT {config}; {ember.cuda.get_device_name()}; minimum of {args.steps} steps, milliseconds")
    print(f"{'phase':<10}" + "".join(f"{name:>12}" for name, _, _ in sides) + ("       ratio" if theirs else ""))
    for phase in (*_PHASES, "total", "queued"):
        row = [results[name][phase] * 1e3 for name, _, _ in sides]
        ratio = f"{row[0] / row[1]:>11.2f}x" if len(row) == 2 and row[1] > 0 else ""
        print(f"{phase:<10}" + "".join(f"{v:>12.3f}" for v in row) + ratio)
    print("first step (s): " + ", ".join(f"{name} {firsts[name]:.3f}" for name, _, _ in sides))
    if args.sync_report:
        _sync_report(ember, ours)
    if args.profile:
        _host_profile(ember, ours, args.steps, args.profile)
    if args.kernels and torch is not None:
        _kernel_profile(torch, sides, args.steps, args.kernels)


if __name__ == "__main__":
    main()
