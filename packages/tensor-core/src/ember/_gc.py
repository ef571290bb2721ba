"""Pausing Python's cyclic garbage collector around work that allocates many long-lived objects.

A block that creates hundreds of thousands of objects which all stay alive until it ends (a compile's traced
nodes, meta tensors and loop IR; a checkpoint's parsed header) triggers collection after collection, each a walk
of the whole heap that finds nothing to free: a third of a model's compile time in a process that also holds
PyTorch (issue 28), a third of a large checkpoint's load. With the collector off for the block, its cyclic
garbage is freed by the first collection after it.
"""

from __future__ import annotations

import contextlib
import gc

__all__ = ["paused"]


@contextlib.contextmanager
def paused():
    """The cyclic garbage collector off inside the block, back on after it (also after an error); left as it
    is when the caller had turned it off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
