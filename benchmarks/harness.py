"""What a benchmark module needs: the ``Workload`` record, the timing function, thread control.

A benchmark module is a file ``benchmarks/bench_*.py`` that defines ``WORKLOADS``,
a list of :class:`Workload`. ``benchmarks/run.py`` finds the modules, times each
workload's ember and PyTorch callables in the same process, and writes the table.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import timeit
from collections.abc import Callable, Iterator
from dataclasses import dataclass

Fn = Callable[[], object]


@dataclass(frozen=True)
class Workload:
    """One row of the benchmark table.

    Attributes:
        name: Unique, filterable with ``run.py -k``; e.g. ``"add_1elem_f32"``.
        setup: Called once, untimed. Builds the inputs and returns
            ``(ember_fn, torch_fn)``: two zero-argument callables doing the same
            work, ``torch_fn`` being ``None`` when PyTorch is not importable.
        threads: Intra-op thread count for both libraries during the measurement.
        description: One line for the table's notes.
    """

    name: str
    setup: Callable[[], tuple[Fn, Fn | None]]
    threads: int = 1
    description: str = ""


def import_torch():
    """``torch`` if it is importable here, else ``None`` (PyTorch is optional)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def time_call(fn: Fn, *, min_time: float = 0.05, repeats: int = 25) -> float:
    """Median wall time of one ``fn()`` call, in seconds.

    ``fn`` runs in batches sized so that one batch takes about ``min_time``
    seconds (the first, calibrating batches double as warm-up); the result is the
    median over ``repeats`` batches of the time per call, which shrugs off the
    outliers a shared machine produces. Garbage collection is off while timing
    (``timeit``'s default), as in PyTorch's benchmark timer.

    This is the one place that measures time: the benchmark-utilities issue swaps
    it for ``ember.utils.benchmark.Timer(...).blocked_autorange().median``.
    """
    timer = timeit.Timer(fn)
    number, elapsed = 1, timer.timeit(1)
    while elapsed < min_time / 10 and number < 10**8:
        number *= 10
        elapsed = timer.timeit(number)
    number = max(1, round(number * min_time / max(elapsed, 1e-12)))
    return statistics.median(t / number for t in timer.repeat(repeat=repeats, number=number))


@contextlib.contextmanager
def limit_threads(threads: int) -> Iterator[None]:
    """Run the body with ``threads`` intra-op threads in numpy/BLAS/OpenMP, PyTorch and ember.

    Each library's previous setting is restored on exit. Libraries that are not
    loaded (or a missing ``threadpoolctl``) are left alone.
    """
    with contextlib.ExitStack() as stack:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            stack.enter_context(threadpool_limits(limits=threads))
        torch = sys.modules.get("torch")
        if torch is not None:
            previous = torch.get_num_threads()
            torch.set_num_threads(threads)
            stack.callback(torch.set_num_threads, previous)
        ember = sys.modules.get("ember")
        if ember is not None and hasattr(ember, "set_num_threads") and hasattr(ember, "get_num_threads"):
            previous_ember = ember.get_num_threads()
            ember.set_num_threads(threads)
            stack.callback(ember.set_num_threads, previous_ember)
        yield
