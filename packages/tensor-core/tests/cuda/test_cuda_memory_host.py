"""The peak bookkeeping of ``ember.cuda.memory`` over a stand-in of CuPy's memory pool (no GPU needed).

The allocator hook reads the pool's reserved bytes only when the allocated bytes reach a new peak; the
reserved peak must still be right when the pool grows at other times, including after ``empty_cache``
gives the cached blocks back.
"""

from __future__ import annotations

import contextlib
import types

import pytest

from ember.cuda import memory


class _Pool:
    """Allocated and reserved byte counts the test sets, as CuPy's pool reports them."""

    def __init__(self):
        self.used, self.total = 0, 0

    def malloc(self, size):
        return ("pointer", size)

    def used_bytes(self):
        return self.used

    def total_bytes(self):
        return self.total

    def free_all_blocks(self):
        self.total = self.used


@pytest.fixture
def pool(monkeypatch):
    pool = _Pool()
    hook = {}
    runtime = types.SimpleNamespace(getDevice=lambda: 0)
    cp = types.SimpleNamespace(
        get_default_memory_pool=lambda: pool,
        get_default_pinned_memory_pool=lambda: types.SimpleNamespace(free_all_blocks=lambda: None),
        cuda=types.SimpleNamespace(runtime=runtime, Device=lambda index: contextlib.nullcontext(),
                                   set_allocator=lambda fn: hook.update(malloc=fn)),
    )
    monkeypatch.setattr(memory, "cupy_module", lambda: cp)
    monkeypatch.setattr(memory, "_peaks", {})
    monkeypatch.setattr(memory, "_index", lambda device: 0)
    memory.install_peak_tracking()
    pool.malloc_hook = hook["malloc"]
    return pool


def test_peaks_through_the_allocator_hook(pool):
    def allocate(used, total):
        pool.used, pool.total = used, total
        assert pool.malloc_hook(16) == ("pointer", 16)

    allocate(100, 200)
    assert memory.max_memory_allocated() == 100 and memory.max_memory_reserved() == 200
    allocate(50, 200)  # frees happened: the peak stays
    assert memory.max_memory_allocated() == 100 and memory.memory_allocated() == 50
    allocate(80, 500)  # the pool grew without a new allocated peak: the hook did not read the reserved bytes
    assert memory.max_memory_reserved() == 500  # the current figure counts
    memory.empty_cache()  # reserved drops to the allocated bytes; its peak was recorded first
    assert memory.memory_reserved() == 80 and memory.max_memory_reserved() == 500
    memory.reset_peak_memory_stats()
    assert memory.max_memory_allocated() == 80 and memory.max_memory_reserved() == 80
    allocate(300, 600)
    assert memory.max_memory_allocated() == 300 and memory.max_memory_reserved() == 600
