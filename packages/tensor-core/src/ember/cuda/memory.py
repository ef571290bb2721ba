"""GPU memory statistics (``ember.cuda.memory_allocated`` and friends) over CuPy's memory pool.

Ember's CUDA tensors are allocated from CuPy's default memory pool (a caching
allocator, as PyTorch's): *allocated* bytes are those held by live arrays,
*reserved* bytes also count the cached blocks the pool keeps for reuse.
CuPy keeps no peak figures, so the backend installs an allocator that
updates the peaks after each allocation (:func:`install_peak_tracking`).
"""

from __future__ import annotations

from ._runtime import cupy_module

__all__ = [
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
    "reset_peak_memory_stats", "empty_cache", "mem_get_info", "memory_summary", "install_peak_tracking",
]

_peaks = {}  # device index -> [peak allocated, peak reserved]


def _index(device):
    from . import _device_index

    return _device_index(device)


def _pool_figures(index):
    cp = cupy_module()
    pool = cp.get_default_memory_pool()
    with cp.cuda.Device(index):
        return pool.used_bytes(), pool.total_bytes()


def install_peak_tracking():
    """Route CuPy's allocations through the default pool with peak bookkeeping (once per process).

    Every allocation of a cuda op passes here, so the hook does the least it can: the reserved figure is read
    only when the allocated one reaches a new peak. The pool's reserved bytes grow at other times too (a block
    that no cached one fits), and shrink only when blocks go back to the driver: :func:`empty_cache` records
    the reserved figure first, and the peak functions take the larger of the record and the current figure.
    (CuPy also frees its cached blocks and retries when an allocation fails; a reserved peak reached just
    before that is the one figure that can be missed.)
    """
    cp = cupy_module()
    pool = cp.get_default_memory_pool()
    get_device = cp.cuda.runtime.getDevice
    pool_malloc, used_bytes, total_bytes = pool.malloc, pool.used_bytes, pool.total_bytes
    peaks = _peaks

    def malloc(size):
        pointer = pool_malloc(size)
        used = used_bytes()
        peak = peaks.get(get_device())
        if peak is None or used > peak[0]:
            _new_peak(get_device(), used, total_bytes())
        return pointer

    cp.cuda.set_allocator(malloc)


def _new_peak(index, used, total):
    peak = _peaks.get(index)
    if peak is None:
        peak = _peaks[index] = [0, 0]
    if used > peak[0]:
        peak[0] = used
    if total > peak[1]:
        peak[1] = total


def memory_allocated(device=None):
    """Bytes of GPU memory held by live tensors (CuPy arrays) on ``device``."""
    return _pool_figures(_index(device))[0]


def memory_reserved(device=None):
    """Bytes of GPU memory the caching allocator holds on ``device`` (live plus cached)."""
    return _pool_figures(_index(device))[1]


def _peak(device, which):
    index = _index(device)
    current = _pool_figures(index)[which]
    peak = _peaks.get(index)
    return max(current, peak[which]) if peak is not None else current


def max_memory_allocated(device=None):
    """The most bytes held by live tensors on ``device`` since the start or :func:`reset_peak_memory_stats`."""
    return _peak(device, 0)


def max_memory_reserved(device=None):
    """The most bytes the caching allocator held on ``device`` since the start or the last reset."""
    return _peak(device, 1)


def reset_peak_memory_stats(device=None):
    """Start the peaks of :func:`max_memory_allocated`/:func:`max_memory_reserved` from the current figures."""
    index = _index(device)
    _peaks[index] = list(_pool_figures(index))


def empty_cache():
    """Give the cached, unused blocks of the caching allocator back to the driver."""
    cp = cupy_module()
    index = cp.cuda.runtime.getDevice()
    used, total = _pool_figures(index)
    _new_peak(index, used, total)  # the reserved figure drops now: its peak is recorded first
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


def mem_get_info(device=None):
    """``(free, total)`` bytes of ``device``'s memory, as the driver reports them."""
    cp = cupy_module()
    with cp.cuda.Device(_index(device)):
        free, total = cp.cuda.runtime.memGetInfo()
    return int(free), int(total)


def memory_stats(device=None):
    """A dict of the allocator's figures: ``allocated_bytes.all.current``/``.peak``,
    ``reserved_bytes.all.current``/``.peak`` (PyTorch's key names)."""
    index = _index(device)
    allocated, reserved = _pool_figures(index)
    return {
        "allocated_bytes.all.current": allocated,
        "allocated_bytes.all.peak": max_memory_allocated(index),
        "reserved_bytes.all.current": reserved,
        "reserved_bytes.all.peak": max_memory_reserved(index),
    }


def _format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device=None, abbreviated=False):
    """A readable table of the allocator's figures for ``device``."""
    index = _index(device)
    stats = memory_stats(index)
    free, total = mem_get_info(index)
    rows = [
        ("Allocated memory", stats["allocated_bytes.all.current"], stats["allocated_bytes.all.peak"]),
        ("Reserved memory", stats["reserved_bytes.all.current"], stats["reserved_bytes.all.peak"]),
    ]
    lines = [
        f"ember.cuda memory summary, device cuda:{index} ({_format_bytes(free)} free of {_format_bytes(total)})",
        f"{'Metric':<20}{'Current':>14}{'Peak':>14}",
    ]
    lines += [f"{name:<20}{_format_bytes(cur):>14}{_format_bytes(peak):>14}" for name, cur, peak in rows]
    return "\n".join(lines)
