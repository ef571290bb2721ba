"""Keeping freed CPU tensor memory in the process (glibc's malloc settings), set once at import.

A cpu tensor's memory is a numpy array's, which comes from ``malloc``. glibc serves a request of
128 KiB or more with a fresh ``mmap`` and returns it to the system on ``free``; its dynamic
threshold raises that limit after a freed block, but only while one block at a time is alive.
A training step keeps dozens of mid-size activations alive at once, so each was mapped anew on
every step and its first write took a page fault per 4 KiB page: the model suite's GPT-2-style
model took 1,300-1,400 page faults a step (PyTorch 27-150) and 10-15% of its step time went on them.

:func:`keep_freed_memory` sets ``M_MMAP_THRESHOLD`` to 32 MiB (glibc's largest; larger blocks are
still mapped and unmapped) and ``M_TRIM_THRESHOLD`` to 128 MiB (free memory at the heap's top is
returned to the system past that), so mid-size blocks come from the heap and are reused warm, as
PyTorch's caching allocators reuse device memory. The cost: the process keeps, after a peak, up to
about the peak's mid-size memory (what the next step will ask for again).

The settings are process-wide (every ``malloc`` of the process follows them), so they are skipped
when the user has chosen glibc's settings (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_TOP_PAD_`` or ``MALLOC_ARENA_MAX`` in the environment, or another allocator through
``LD_PRELOAD``), when ``EMBER_CPU_KEEP_FREED_MEMORY=0``, and on any C library but glibc.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

#: Blocks from this size on are mapped per allocation (glibc's maximum for the setting on 64-bit).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of the heap beyond this is returned to the system.
TRIM_THRESHOLD = 128 << 20

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX",
                  "LD_PRELOAD")


def _glibc() -> bool:
    """Whether the process runs on glibc (``os.confstr`` answers at once; ``platform.libc_ver`` reads the
    interpreter's file, 11 ms)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # no such name on this system
        return False


def keep_freed_memory() -> bool:
    """Set glibc's thresholds (see the module docstring); True when they were set."""
    if os.environ.get("EMBER_CPU_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if any(name in os.environ for name in _USER_SETTINGS) or not _glibc():
        return False
    try:
        libc = ctypes.CDLL(None)  # the process's own C library
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success; a refused value leaves glibc's default in place
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) & bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
