"""``ember.multiprocessing``: Python's :mod:`multiprocessing`, with ember tensors shared, not copied.

Everything of :mod:`multiprocessing` is here under the same names (``Process``, ``Queue``,
``SimpleQueue``, ``Pool``, ``get_context``, ``set_start_method``, ...). Importing this module
registers a reducer for ember tensors with multiprocessing's pickler: a CPU tensor put on a
queue (or passed to a process) moves into shared memory and the receiver maps the same memory
(see :mod:`ember.multiprocessing._shared` and the sharing strategies). Only handles cross the
process boundary; the data never goes through pickle.
"""

import multiprocessing as _multiprocessing
import sys as _sys
from multiprocessing import *  # noqa: F401,F403 - PyTorch's module re-exports all of multiprocessing

from ._shared import (
    get_all_sharing_strategies, get_sharing_strategy, init_reductions, is_shared, set_sharing_strategy,
    share_memory_,
)
from .spawn import (
    ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException, spawn, start_processes,
)

__all__ = list(_multiprocessing.__all__) + [
    "get_all_sharing_strategies", "get_sharing_strategy", "set_sharing_strategy", "init_reductions",
    "spawn", "start_processes", "ProcessContext", "ProcessException", "ProcessRaisedException",
    "ProcessExitedException", "share_memory_", "is_shared",
]

# multiprocessing's functions are bound methods of its default context: the same here
_sys.modules[__name__].__dict__.update(
    {name: getattr(_multiprocessing, name) for name in _multiprocessing.__all__ if hasattr(_multiprocessing, name)}
)

init_reductions()
