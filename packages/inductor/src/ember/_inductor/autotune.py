"""Block-size and warp choice for generated Triton kernels.

Each kernel kind has a small set of configs (``XBLOCK``, ``RBLOCK``, ``num_warps``) built from its sizes
(:func:`configs`). On a GPU, the first launch of a kernel for a size runs every config a few times
(CUDA events around the launches) and keeps the fastest; the winner is written to a JSON file next to the
kernel's cached module (``k<hash>.py`` -> ``k<hash>.autotune.json``), so a second process starts warm
without benchmarking.

Under Triton's interpreter (``TRITON_INTERPRET=1``) nothing is benchmarked (timings of the interpreter
say nothing about a GPU): the first config is used. The first configs are the interpreter-friendly ones
(large blocks: the interpreter's cost is per program, not per element).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

__all__ = ["configs", "Autotuner", "next_power_of_2"]

#: Elements of one [XBLOCK, RBLOCK] tile at most (registers per program).
MAX_TILE = 8192


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for ``n <= 1``)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def configs(kind: str, xnumel: int, rnumel: int | None) -> list[dict]:
    """The candidate configs of a kernel of ``kind`` over ``xnumel`` rows of ``rnumel`` elements.

    Args:
        kind (str): ``"pointwise"``, ``"persistent"``, ``"looped"``, ``"split"`` or ``"split_combine"``.
        xnumel (int): outputs (pointwise) or rows (reductions).
        rnumel (int or None): the longest row extent (None for pointwise).

    Returns:
        list[dict]: configs, the interpreter's choice first.
    """
    x = max(int(xnumel), 1)
    if kind == "pointwise":
        top = min(next_power_of_2(x), 1024)
        out = [{"XBLOCK": top, "num_warps": 4}]
        for xb, w in ((1024, 4), (512, 4), (256, 4), (128, 4), (1024, 8)):
            if xb <= max(top, 128):
                out.append({"XBLOCK": xb, "num_warps": w})
        return _unique(out)
    if kind == "split_combine":
        from .codegen.triton import SPLIT

        return [{"XBLOCK": 1, "RBLOCK": SPLIT, "num_warps": 2}]
    r = max(int(rnumel or 1), 1)
    if kind == "persistent":
        rb = next_power_of_2(r)
        xb = max(1, min(next_power_of_2(x), MAX_TILE // rb, 64))
        out = [{"XBLOCK": xb, "RBLOCK": rb, "num_warps": 4 if rb <= 512 else 8}]
        for xb2 in (1, 2, 8, 32):
            if xb2 * rb <= MAX_TILE and xb2 <= next_power_of_2(x):
                out.append({"XBLOCK": xb2, "RBLOCK": rb, "num_warps": 4 if rb * xb2 <= 1024 else 8})
        return _unique(out)
    if kind == "split":
        return _unique([{"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8}, {"XBLOCK": 1, "RBLOCK": 1024, "num_warps": 4},
                        {"XBLOCK": 1, "RBLOCK": 512, "num_warps": 4}])
    # looped
    out = [{"XBLOCK": 1, "RBLOCK": min(2048, next_power_of_2(r)), "num_warps": 8}]
    for xb, rb, w in ((1, 1024, 4), (8, 256, 4), (64, 64, 8), (1, 512, 4)):
        if xb <= next_power_of_2(x):
            out.append({"XBLOCK": xb, "RBLOCK": rb, "num_warps": w})
    return _unique(out)


def _unique(items):
    out = []
    for c in items:
        if c not in out:
            out.append(c)
    return out


class Autotuner:
    """The chosen config per (kernel, sizes) of one cached Triton module.

    Args:
        module_file (str or Path): the module's cached ``.py``; winners go to ``<stem>.autotune.json``.
        benchmark (bool): time the configs (GPU); False takes the first config (interpreter).
    """

    def __init__(self, module_file, benchmark):
        self.path = Path(module_file).with_suffix(".autotune.json")
        self.benchmark = benchmark
        self._lock = threading.Lock()
        self._chosen = self._read()
        self.benchmarked = 0  # kernels timed by this object (tests read it)

    def _read(self):
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def _write(self):
        from .codecache import _write_atomic

        _write_atomic(self.path, json.dumps(self._chosen, indent=1, sort_keys=True))

    def choose(self, kernel, xnumel, rnumel, run):
        """The config for ``kernel`` at these sizes; ``run(cfg)`` launches it once (for timing).

        Returns:
            dict: the config (from the file, the first one, or the fastest measured).
        """
        key = f"{kernel.name}:{xnumel}:{rnumel}"
        with self._lock:
            found = self._chosen.get(key)
        if found is not None:
            return found
        candidates = configs(kernel.kind, xnumel, rnumel)
        if not self.benchmark or len(candidates) == 1:
            best = candidates[0]
        else:  # pragma: no cover - needs a GPU
            best = min(candidates, key=lambda cfg: _time(run, cfg))
            self.benchmarked += 1
        with self._lock:
            self._chosen[key] = best
            if self.benchmark:
                self._write()
        return best


def _time(run, cfg, repeat=5):  # pragma: no cover - needs a GPU
    """The median time (ms) of ``run(cfg)`` on the current CuPy stream (after one warm-up launch)."""
    import cupy

    try:
        run(cfg)
    except Exception:  # noqa: BLE001 - a config the device cannot run (too many registers...) is skipped
        return float("inf")
    stream = cupy.cuda.get_current_stream()
    times = []
    for _ in range(repeat):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        run(cfg)
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return sorted(times)[len(times) // 2]
