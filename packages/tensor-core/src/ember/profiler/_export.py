"""Writing profiling results to files: Chrome's trace format and flame-graph stacks."""

from __future__ import annotations

import json
import os
import tempfile

__all__ = ["export_chrome_trace", "export_stacks", "write_atomically"]


def write_atomically(path, text):
    """Write ``text`` to ``path`` through a temporary file in the same folder, then rename it:
    a reader never sees half a file."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def chrome_trace(events, origin_us=0.0):
    """The Trace Event Format object (chrome://tracing, Perfetto) of ``events``: one complete ("X")
    event per call, on the recording thread, and one per timed CUDA call on a "cuda" track."""
    pid = os.getpid()
    trace = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "ember"}},
    ]
    threads = set()
    for event in events:
        threads.add(event.thread)
        record = {
            "ph": "X", "cat": "user_annotation" if event.is_user_annotation else "cpu_op", "name": event.name,
            "pid": pid, "tid": event.thread, "ts": origin_us + event.time_range.start,
            "dur": event.time_range.elapsed_us(), "args": {"External id": event.id},
        }
        if event.input_shapes:
            record["args"]["Input Dims"] = event.input_shapes
        if event.stack:
            record["args"]["Call stack"] = ";".join(event.stack)
        trace.append(record)
        if event.device_time:
            trace.append({
                "ph": "X", "cat": "kernel", "name": event.name, "pid": pid, "tid": "cuda",
                "ts": origin_us + event.time_range.start, "dur": event.device_time,
                "args": {"External id": event.id},
            })
    for thread in sorted(threads):
        name = {"name": f"thread {thread}"}
        trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": thread, "args": name})
    return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": trace}


def export_chrome_trace(events, path, origin_us=0.0):
    """Write ``events`` to ``path`` as Chrome trace JSON, atomically."""
    write_atomically(path, json.dumps(chrome_trace(events, origin_us)))


_METRICS = ("self_cpu_time_total", "self_cuda_time_total", "self_device_time_total")


def export_stacks(events, path, metric="self_cpu_time_total"):
    """Write one line per event recorded with a stack: its frames outermost first, then the op, joined by
    ``;``, a space and the metric in whole microseconds (the input of flamegraph.pl and speedscope).

    Raises:
        ValueError: for a metric other than self CPU or CUDA time.
    """
    if metric not in _METRICS:
        raise ValueError(f"export_stacks: metric must be one of {_METRICS}, got {metric!r}")
    lines = []
    for event in events:
        if event.stack:
            value = int(getattr(event, metric.replace("cuda", "device")))
            frames = ";".join(reversed(event.stack))
            lines.append(f"{frames};{event.name} {value}\n")
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
