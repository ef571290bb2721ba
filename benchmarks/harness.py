"""What a benchmark module needs: the ``Workload`` record, the timing function, thread control.

A benchmark module is a file ``benchmarks/bench_*.py`` that defines ``WORKLOADS``,
a list of :class:`Workload`. ``benchmarks/run.py`` finds the modules, times each
workload's ember and PyTorch callables in the same process, and writes the table.
Timing is ``ember.utils.benchmark.Timer``'s (:func:`time_call`).

GPU workloads (``device="cuda"``, ``benchmarks/bench_cuda.py``) run only with
``run.py --device cuda``; their callables synchronise the device themselves, a
setup raises :class:`Skip` where there is no GPU, and a side that cannot run the
work hands back a :class:`NotRun` in place of its callable.
"""

from __future__ import annotations

import contextlib
import sys
import timeit
from collections.abc import Callable, Iterator
from dataclasses import dataclass

Fn = Callable[[], object]

#: Seconds of timed blocks per callable (``Timer.blocked_autorange``'s ``min_run_time``).
MIN_RUN_TIME = 0.5


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
        device: ``"cpu"`` (the default suite, ``BENCHMARKS.md``) or ``"cuda"`` (only with
            ``run.py --device cuda``, written to ``BENCHMARKS_CUDA.md``).
        inner: How many operations one call of a callable performs; the reported time is
            per operation (a loop of 100 small launches and one synchronisation, say).
        work: The amount of work of one operation in ``unit``'s numerator (bytes moved for
            ``"GB/s"``, floating-point operations for ``"TFLOP/s"``); 0 for no rate column.
        unit: ``"GB/s"``, ``"TFLOP/s"`` or ``""``.
        self_timed: The callables time themselves: ``run.py`` calls each once as ``fn(quick)``
            and reports the seconds it returns (work a Timer loop can't repeat in one process,
            such as ``import ember`` in fresh processes; ``quick`` asks for fewer repeats).
    """

    name: str
    setup: Callable[[], tuple[Fn, Fn | None]]
    threads: int = 1
    description: str = ""
    device: str = "cpu"
    inner: int = 1
    work: float = 0.0
    unit: str = ""
    self_timed: bool = False


#: How each rate unit scales work per second.
RATE_SCALE = {"GB/s": 1e9, "TFLOP/s": 1e12}


class Skip(Exception):
    """Raised by a workload's setup when this machine cannot run it at all (no GPU): the row is skipped."""


class NotRun:
    """Stands in for one library's callable when that library cannot do the work; ``reason`` says why."""

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self):
        return f"NotRun({self.reason!r})"


def import_torch():
    """``torch`` if it is importable here, else ``None`` (PyTorch is optional)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def time_call(
    fn: Fn, *, threads: int = 1, min_run_time: float = MIN_RUN_TIME, timer: Callable[[], float] = timeit.default_timer
) -> float:
    """Median seconds per ``fn()`` call, measured by ``ember.utils.benchmark.Timer``.

    ``Timer.blocked_autorange`` picks a block size that makes the clock's cost
    negligible (the first, calibrating blocks double as warm-up), then times
    blocks of calls for ``min_run_time`` seconds in all, with garbage collection
    off and ``threads`` intra-op threads in ember's kernels and numpy's BLAS
    (PyTorch's own pool is set by :func:`limit_threads`). The median over the
    blocks shrugs off the ones a shared machine slows down. ``timer`` is the clock
    (tests inject a fake one).
    """
    from ember.utils.benchmark import Timer

    timed = Timer("fn()", timer=timer, globals={"fn": fn}, num_threads=threads)
    return timed.blocked_autorange(min_run_time=min_run_time).median


@contextlib.contextmanager
def limit_threads(threads: int) -> Iterator[None]:
    """Run the body with ``threads`` intra-op threads in numpy/BLAS/OpenMP, PyTorch and ember.

    Each library's previous setting is restored on exit. Libraries that are not
    loaded (or a missing ``threadpoolctl``) are left alone. :func:`time_call`'s
    Timer sets ember's and numpy's count again while it measures (``num_threads``);
    PyTorch's pool is the one only this function sets.
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
