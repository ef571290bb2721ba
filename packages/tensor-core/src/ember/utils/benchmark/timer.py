"""``Timer``: time a statement the way ``timeit`` does, with replicates, thread control and labels.

Built on :class:`timeit.Timer` (which compiles ``setup`` and a loop of ``stmt``
into one function and turns garbage collection off while timing), with the
differences PyTorch's benchmark timer makes:

* every measurement runs with ``num_threads`` intra-op threads (ember's kernels
  and numpy's BLAS), one by default, and restores the previous settings;
* the result is a :class:`~ember.utils.benchmark.Measurement` of many blocks,
  summarised by its median and IQR, not one number;
* ``label``, ``sub_label``, ``description`` and ``env`` travel with the result so
  that :class:`~ember.utils.benchmark.Compare` can lay out a table;
* :meth:`Timer.collect_callgrind` counts instructions instead of seconds.
"""

from __future__ import annotations

import enum
import statistics
import textwrap
import timeit
from collections.abc import Callable
from typing import Any

from ._threads import set_ember_threads
from .measurement import Measurement, TaskSpec

__all__ = ["Timer", "Language", "synchronize_device"]

#: The largest block size tried (PyTorch's cap too); only a statement that takes almost no time reaches it.
_MAX_BLOCK_SIZE = 2**31 - 1


class Language(enum.Enum):
    """The language of ``stmt``. Ember has no C++ front end, so only ``PYTHON`` can be timed."""

    PYTHON = 0
    CPP = 1


def synchronize_device() -> None:
    """Wait for the work queued on accelerators; called just before every clock reading.

    A no-op while ember computes on the CPU only (its CPU ops finish before they
    return). This is the one place the CUDA backend must fill in (issue 8):
    device kernels run asynchronously, so without a synchronisation a timed
    block would measure the launches, not the work.
    """


def _synchronized(timer: Callable[[], float]) -> Callable[[], float]:
    """``timer`` preceded by :func:`synchronize_device`, so that each reading includes pending device work."""

    def read_clock() -> float:
        synchronize_device()
        return timer()

    return read_clock


def _clean_code(code: str) -> str:
    """Dedent ``code`` and drop the blank first line and trailing space of a triple-quoted string."""
    code = textwrap.dedent(code)
    if code.startswith("\n"):
        code = code[1:]
    return code.rstrip()


def _parse_language(language: Language | str) -> Language:
    if language in (Language.PYTHON, "py", "python"):
        return Language.PYTHON
    if language in (Language.CPP, "cpp", "c++"):
        raise NotImplementedError(
            "Timer: language='c++' is not supported: ember has no C++ front end to compile a statement "
            "against. Time the Python call instead."
        )
    raise ValueError(f"Invalid language `{language}`.")


class Timer:
    """Time a Python statement: warm-up, blocks of back-to-back runs, a :class:`Measurement` out.

    Args:
        stmt: The code to time (a string; it may span several lines).
        setup: Code run once before timing, e.g. to build the inputs ``stmt`` uses.
        global_setup: C++ only (top-level ``#include`` lines); must be empty for Python.
        timer: The clock, a zero-argument function returning seconds.
        globals: Names ``stmt`` and ``setup`` can use, in addition to ``ember``
            (always available). Copied, so later changes to the dict are not seen.
        label: What is timed, in words (e.g. ``"add"``); the title of a
            :class:`Compare` table.
        sub_label: What tells apart measurements with the same label (e.g.
            ``"float32"``); a row of the table.
        description: What tells apart measurements with the same label and
            sub-label (e.g. ``"n=1024"``); a column of the table.
        env: An environment tag (e.g. a branch name): measurements of different
            ``env`` are never pooled as replicates.
        num_threads: Intra-op threads for ember's kernels and numpy's BLAS/OpenMP
            while timing (restored afterwards). One by default: single-threaded
            time measures the code, not the machine's core count.
        language: ``"python"`` (the only one ember supports).

    Raises:
        ValueError: if ``stmt`` is not a string, ``global_setup`` is given for a
            Python statement, ``language`` is unknown, or ``num_threads`` is not a
            positive integer.
        NotImplementedError: for ``language="c++"``.

    Example:
        >>> import ember
        >>> from ember.utils.benchmark import Timer
        >>> t = Timer("x + y", setup="x = ember.ones(8); y = ember.ones(8)", label="add", sub_label="8 elements")
        >>> m = t.timeit(100)
        >>> m.number_per_run, len(m.times), m.median > 0
        (100, 1, True)
    """

    def __init__(
        self,
        stmt: str = "pass",
        setup: str = "pass",
        global_setup: str = "",
        timer: Callable[[], float] = timeit.default_timer,
        globals: dict[str, Any] | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        env: str | None = None,
        num_threads: int = 1,
        language: Language | str = Language.PYTHON,
    ) -> None:
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        self._language = _parse_language(language)
        if global_setup:
            raise ValueError(
                f"global_setup is C++ only, got `{global_setup}`. Most likely this code can simply be moved to `setup`."
            )
        if isinstance(num_threads, bool) or int(num_threads) != num_threads or num_threads < 1:
            raise ValueError(f"Timer: num_threads must be a positive integer, got {num_threads!r}")
        import ember

        self._globals = dict(globals or {})
        self._globals.setdefault("ember", ember)
        stmt, setup = _clean_code(stmt), _clean_code(setup)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=_synchronized(timer), globals=self._globals)
        self._task_spec = TaskSpec(
            stmt=stmt,
            setup=setup,
            global_setup=global_setup,
            label=label,
            sub_label=sub_label,
            description=description,
            env=env,
            num_threads=int(num_threads),
        )

    # ------------------------------------------------------------------ the clock

    def _timeit(self, number: int) -> float:
        # A clock that did not move still means "some time": never report zero.
        return max(self._timer.timeit(number), 1e-9)

    def _measurement(self, number: int, times: list[float]) -> Measurement:
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    # ------------------------------------------------------------------ timeit-style

    def timeit(self, number: int = 1000000) -> Measurement:
        """Run ``stmt`` ``number`` times back to back and time the whole, like :meth:`timeit.Timer.timeit`.

        A warm-up of ``max(number // 100, 2)`` runs comes first (first calls fill
        caches and allocate lazily).

        Returns:
            A :class:`Measurement` with one raw time and ``number_per_run=number``.
        """
        with set_ember_threads(self._task_spec.num_threads):
            self._timeit(max(number // 100, 2))
            return self._measurement(number, [self._timeit(number)])

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        """Not offered (as in PyTorch): :meth:`blocked_autorange` measures replicates and picks the block size.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback: Callable[[int, float], None] | None = None) -> None:
        """Not offered (as in PyTorch): :meth:`blocked_autorange` sizes blocks and measures replicates.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    # ------------------------------------------------------------------ adaptive measurement

    def _estimate_block_size(self, min_run_time: float) -> int:
        """The number of runs per block: grow tenfold until the clock's own cost is negligible.

        The cost of reading the clock is the median of a few empty blocks. A
        block is big enough when that cost is at most 0.01% of the block's time
        and the block lasts at least a thousandth of ``min_run_time`` (so the
        measurement holds many blocks), or when one block alone exceeds
        ``min_run_time``.
        """
        with set_ember_threads(self._task_spec.num_threads):
            overhead = statistics.median(self._timeit(0) for _ in range(5))
            number = 1
            while True:
                elapsed = self._timeit(number)
                if overhead / elapsed <= 1e-4 and elapsed >= min_run_time / 1000:
                    return number
                if elapsed > min_run_time or number * 10 > _MAX_BLOCK_SIZE:
                    return number
                number *= 10

    def _measurement_loop(
        self,
        number: int,
        enough: Callable[[list[float]], bool],
        min_run_time: float,
        max_run_time: float | None = None,
        callback: Callable[[int, float], None] | None = None,
    ) -> list[float]:
        """Time blocks of ``number`` runs until ``min_run_time`` has passed and ``enough(times)`` holds.

        Stops early, whatever ``enough`` says, once ``max_run_time`` has passed.
        ``callback(number, seconds)`` is called after each block.
        """
        times: list[float] = []
        total = 0.0
        with set_ember_threads(self._task_spec.num_threads):
            while True:
                elapsed = self._timeit(number)
                times.append(elapsed)
                total += elapsed
                if callback is not None:
                    callback(number, elapsed)
                if total >= min_run_time and enough(times):
                    return times
                if max_run_time is not None and total > max_run_time:
                    return times

    def blocked_autorange(
        self, callback: Callable[[int, float], None] | None = None, min_run_time: float = 0.2
    ) -> Measurement:
        """Time blocks of runs for at least ``min_run_time`` seconds in all, with a block size that hides the clock.

        First the block size is chosen (see the rule below), then blocks are
        timed until their total reaches ``min_run_time``::

            setup
            block_size = smallest power of 10 whose block takes >= min_run_time / 1000
                         and >= 10,000x the cost of reading the clock
            while total < min_run_time:
                start = timer(); stmt, block_size times; total += timer() - start

        Small blocks give many replicates (good statistics); large blocks amortise
        the clock reading (and, on GPUs, the synchronisation) so that it does not
        bias the time. The rule balances the two.

        Args:
            callback: Called as ``callback(block_size, seconds)`` after each block.
            min_run_time: Seconds of timed blocks to collect.

        Returns:
            A :class:`Measurement` with one raw time per block.
        """
        number = self._estimate_block_size(min_run_time)
        times = self._measurement_loop(number, lambda _: True, min_run_time, callback=callback)
        return self._measurement(number, times)

    def adaptive_autorange(
        self,
        threshold: float = 0.1,
        *,
        min_run_time: float = 0.01,
        max_run_time: float = 10.0,
        callback: Callable[[int, float], None] | None = None,
    ) -> Measurement:
        """Like :meth:`blocked_autorange`, but keep timing until the spread is small.

        Blocks (sized as in :meth:`blocked_autorange` for a 0.05 s budget) are
        timed until there are more than 3 of them, their total is at least
        ``min_run_time`` and ``iqr / median < threshold`` -- or until their total
        exceeds ``max_run_time``, whichever comes first.

        Args:
            threshold: The relative spread (IQR over median) to reach.
            min_run_time: Seconds of timing before the spread is checked.
            max_run_time: Seconds of timing after which to stop regardless.
            callback: Called as ``callback(block_size, seconds)`` after each block.

        Returns:
            A :class:`Measurement` with one raw time per block.
        """
        number = self._estimate_block_size(min_run_time=0.05)

        def spread_is_small(times: list[float]) -> bool:
            return len(times) > 3 and self._measurement(number, times).meets_confidence(threshold)

        times = self._measurement_loop(number, spread_is_small, min_run_time, max_run_time, callback=callback)
        return self._measurement(number, times)

    # ------------------------------------------------------------------ instruction counts

    def collect_callgrind(
        self,
        number: int = 100,
        *,
        repeats: int | None = None,
        collect_baseline: bool = True,
        retain_out_file: bool = False,
    ):
        """Count the instructions ``number`` runs of ``stmt`` execute, with Valgrind's Callgrind.

        Wall times on a shared machine are noisy; instruction counts are (nearly)
        deterministic, so they show small changes that timing cannot. ``setup``
        and ``stmt`` run in a fresh Python process under ``valgrind
        --tool=callgrind``, so ``globals`` may only hold values that survive being
        written as Python literals (``bool``, ``int``, ``float``, ``complex``,
        ``str``, ``bytes``, ``None``); build tensors in ``setup``. See
        :mod:`ember.utils.benchmark.callgrind` for how the counted region is chosen.

        Args:
            number: Runs of ``stmt`` counted in each measurement.
            repeats: How many measurements to take (each its own stats object);
                ``None`` for one, returned alone rather than in a tuple.
            collect_baseline: Also count an empty loop of ``number`` runs, to show
                what the loop itself costs (``CallgrindStats.baseline_exclusive_stats``).
            retain_out_file: Keep the raw Callgrind output text in
                ``CallgrindStats.stmt_callgrind_out``.

        Returns:
            A :class:`~ember.utils.benchmark.CallgrindStats` (``repeats=None``) or
            a tuple of ``repeats`` of them.

        Raises:
            OSError: if ``valgrind`` or ``callgrind_annotate`` is not on ``PATH``,
                or the profiled process fails.
            ValueError: if ``repeats`` is below 1 or a global cannot be sent to the
                profiled process.
        """
        import ember

        from .callgrind import collect_callgrind

        if repeats is not None and repeats < 1:
            raise ValueError("If specified, `repeats` must be >= 1")
        self._timeit(1)  # fail here, with a normal traceback, if the statement is broken
        # What the caller passed: not the ember module (the profiled process imports its own) nor the
        # __builtins__ that exec() put into the dict.
        user_globals = {
            k: v for k, v in self._globals.items() if k != "__builtins__" and not (k == "ember" and v is ember)
        }
        results = collect_callgrind(
            self._task_spec,
            user_globals,
            number=number,
            repeats=repeats or 1,
            collect_baseline=collect_baseline,
            retain_out_file=retain_out_file,
        )
        return results[0] if repeats is None else results
