"""Counters of the compiler's work in this process, for tests and benchmarks.

``compilation_count()`` counts the graphs ``compile_fx`` compiled: a sweep of input sizes over a
function compiled with dynamic shapes should add at most two (the first size, then one compile with
symbolic sizes; see :mod:`ember._inductor.dynamic`). Importing this module imports nothing else (a
warm process that loads compiled graphs from the plan cache never imports SymPy).
"""

from __future__ import annotations

__all__ = ["compilation_count", "count_compilation", "reset"]

_COUNTS = {"total": 0, "dynamic": 0, "static": 0, "fallback": 0}


def count_compilation(kind):
    """Count one compilation of ``kind``: ``"static"`` (for the sizes of the example inputs),
    ``"dynamic"`` (with symbolic sizes), or ``"fallback"`` (a dynamic compile that fell back to fixed
    sizes; the static compile that follows is counted too)."""
    _COUNTS[kind] += 1
    if kind != "fallback":
        _COUNTS["total"] += 1


def compilation_count(kind="total"):
    """How many graphs ``compile_fx`` compiled in this process: ``kind`` is ``"total"`` (static plus
    dynamic), ``"static"``, ``"dynamic"`` or ``"fallback"``. Tests read the difference around a sweep."""
    if kind not in _COUNTS:
        raise ValueError(f"compilation_count: kind must be one of {sorted(_COUNTS)}, got {kind!r}")
    return _COUNTS[kind]


def reset():
    """Set every counter to zero."""
    for k in _COUNTS:
        _COUNTS[k] = 0
