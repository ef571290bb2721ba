"""What was measured (:class:`TaskSpec`) and the times measured (:class:`Measurement`), with their statistics.

A measurement is a list of ``raw_times``, each the wall time of one block of
``number_per_run`` back-to-back runs of the statement. Statistics are taken over
the per-run times (``raw_time / number_per_run``): the median and the
interquartile range (IQR) rather than the mean and standard deviation, because
the noise of a shared machine is one-sided (a run is slowed down, never sped up)
and a few slowed blocks must not move the summary.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import textwrap
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._units import select_unit

__all__ = ["TaskSpec", "Measurement"]

#: Compare never shows more digits than this, however tight the measurement.
_MAX_SIGNIFICANT_FIGURES = 4
#: The confidence interval is never taken below 25 ns: below that, timer resolution dominates.
_MIN_CONFIDENCE_INTERVAL = 25e-9
#: IQR / median above which a measurement carries a warning ...
_IQR_WARN_THRESHOLD = 0.1
#: ... and above which the warning says the environment, not the code, is being measured.
_IQR_GROSS_WARN_THRESHOLD = 0.25
#: z value of a two-sided 90% normal interval; the IQR holds enough points for z to stand in for t.
_Z_90 = 1.645


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """The description of a timed task: the code and the labels :class:`Compare` groups by.

    Two measurements of equal task specs are replicates of one another
    (:meth:`Measurement.merge` pools them). The fields are those of
    :class:`~ember.utils.benchmark.Timer`'s constructor, less ``timer`` and ``globals``.
    """

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """The label (or the statement, when it is one line), followed by the sub-label if there is one."""
        suffix = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + suffix
        if "\n" not in self.stmt:
            return self.stmt + suffix
        heading = f"stmt: ({self.sub_label})" if self.sub_label else "stmt:"
        return heading + "\n" + textwrap.indent(self.stmt, "  ")

    def setup_str(self) -> str:
        """``setup: ...`` for a printed summary; empty when the setup does nothing."""
        if not self.setup or self.setup == "pass":
            return ""
        if "\n" in self.setup:
            return "setup:\n" + textwrap.indent(self.setup, "  ")
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """The lines that head a printed :class:`Measurement`: title, description and setup."""
        sections = [s for s in (self.title, self.description or "", self.setup_str()) if s]
        # A multi-line section is followed by a blank line so that the next one stands apart.
        return "\n".join(s + "\n" if "\n" in s else s for s in sections)


@dataclasses.dataclass(repr=False)
class Measurement:
    """The times of one or more blocks of runs of a statement, and their statistics.

    Args:
        number_per_run: How many times the statement ran back to back in each timed block.
        raw_times: Seconds per block (one entry per block).
        task_spec: What was timed (:class:`TaskSpec`).
        metadata: Anything the caller wants to keep with the result; never read here.

    The fields of ``task_spec`` (``stmt``, ``label``, ``sub_label``,
    ``description``, ``num_threads``, ...) are readable as attributes of the
    measurement itself.

    Example:
        >>> from ember.utils.benchmark import Measurement, TaskSpec
        >>> m = Measurement(number_per_run=10, raw_times=[1e-5, 2e-5, 3e-5, 4e-5, 5e-5],
        ...                 task_spec=TaskSpec(stmt="x + y", setup="pass"))
        >>> m.median, round(m.iqr, 12)
        (3e-06, 2e-06)
    """

    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict[Any, Any] | None = None

    def __post_init__(self) -> None:
        if int(self.number_per_run) < 1:
            raise ValueError(f"Measurement: number_per_run must be at least 1, got {self.number_per_run}")
        self.raw_times = [float(t) for t in self.raw_times]
        self._stats: dict[str, float] | None = None

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: forward the task spec's fields.
        if name in _TASK_SPEC_FIELDS:
            return getattr(self.task_spec, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    # ------------------------------------------------------------------ statistics

    @property
    def times(self) -> list[float]:
        """Seconds per run of the statement, one entry per block (``raw_times / number_per_run``)."""
        return [t / self.number_per_run for t in self.raw_times]

    def _statistics(self) -> dict[str, float]:
        """Median, mean and quartiles of :attr:`times`, computed once (the times never change)."""
        if self._stats is None:
            if not self.raw_times:
                raise ValueError("Measurement: no times were recorded, so there are no statistics")
            times = np.sort(np.asarray(self.times, dtype=np.float64))
            # Linear interpolation between order statistics (numpy's and PyTorch's default quantile).
            p25, median, p75 = np.quantile(times, [0.25, 0.5, 0.75])
            self._stats = {"median": float(median), "mean": float(times.mean()), "p25": float(p25), "p75": float(p75)}
            self._sorted_times = tuple(float(t) for t in times)
        return self._stats

    @property
    def median(self) -> float:
        """Median seconds per run."""
        return self._statistics()["median"]

    @property
    def mean(self) -> float:
        """Mean seconds per run (sensitive to outliers; prefer :attr:`median`)."""
        return self._statistics()["mean"]

    @property
    def iqr(self) -> float:
        """The interquartile range of the seconds per run, the 75th minus the 25th percentile."""
        stats = self._statistics()
        return stats["p75"] - stats["p25"]

    @property
    def significant_figures(self) -> int:
        """How many significant figures of :attr:`median` the spread of the times supports, from 1 to 4.

        A rough estimate for display (:meth:`Compare.trim_significant_figures`),
        not a statistical test: the standard error of the middle half of the
        sorted times (population standard deviation over ``sqrt(n)``), widened to
        a 90% interval (z = 1.645) and floored at 25 ns, gives the interval ``ci``;
        the median then has ``floor(log10(median / ci))`` trustworthy digits.
        """
        median = self.median
        n = len(self._sorted_times)
        middle = np.asarray(self._sorted_times[n // 4 : math.ceil(3 * n / 4)], dtype=np.float64)
        std = float(middle.std()) if middle.size else 0.0
        ci = max(_Z_90 * std / math.sqrt(max(middle.size, 1)), _MIN_CONFIDENCE_INTERVAL)
        digits = math.floor(math.log10(median / ci)) if median > 0 else 1
        return min(max(digits, 1), _MAX_SIGNIFICANT_FIGURES)

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        """Whether the relative spread ``iqr / median`` is below ``threshold``."""
        return self.iqr / self.median < threshold

    @property
    def _warnings(self) -> tuple[str, ...]:
        if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            cause = "This suggests significant environmental influence."
        elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
            cause = "This could indicate system fluctuation."
        else:
            return ()
        percent = 100 * self.iqr / self.median
        return (f"  WARNING: Interquartile range is {percent:.1f}% of the median measurement.\n           {cause}",)

    @property
    def has_warnings(self) -> bool:
        """Whether the spread is suspicious, that is ``iqr / median`` is 0.1 or more (see :meth:`meets_confidence`)."""
        return bool(self._warnings)

    # ------------------------------------------------------------------ labels

    @property
    def title(self) -> str:
        """The task spec's title (label or statement, and sub-label)."""
        return self.task_spec.title

    @property
    def env(self) -> str:
        """The environment tag, or ``"Unspecified env"``."""
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self) -> str:
        """The row heading :class:`Compare` shows, the sub-label or else the statement."""
        return self.task_spec.sub_label or self.task_spec.stmt or "[Unknown]"

    # ------------------------------------------------------------------ printing

    def __repr__(self) -> str:
        """Title, median, IQR, counts and any warning, in the layout PyTorch's benchmark prints."""
        median = self.median
        n = len(self._sorted_times)
        unit, scale = select_unit(median)
        stats = self._statistics()
        threads = self.task_spec.num_threads
        lines = [object.__repr__(self), self.task_spec.summarize()]
        lines.append(f"  {'Median: ' if n > 1 else ''}{median / scale:.2f} {unit}")
        if n >= 4:  # quartiles of fewer points say little
            lines.append(
                f"  IQR:    {self.iqr / scale:.2f} {unit} ({stats['p25'] / scale:.2f} to {stats['p75'] / scale:.2f})"
            )
        per = " per measurement," if n > 1 else ","
        lines.append(
            f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs{per} "
            f"{threads} thread{'s' if threads > 1 else ''}"
        )
        lines.extend(self._warnings)
        return "\n".join(lines)

    # ------------------------------------------------------------------ replicates

    @staticmethod
    def merge(measurements: Iterable[Measurement]) -> list[Measurement]:
        """Pool replicates: one measurement per distinct task spec, in first-seen order.

        Each merged measurement holds the per-run times of its replicates
        (``number_per_run=1``, since replicates may have used different block
        sizes) and no metadata (replicates may disagree on it).
        """
        groups: dict[TaskSpec, list[float]] = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].extend(m.times)
        return [Measurement(number_per_run=1, raw_times=times, task_spec=spec) for spec, times in groups.items()]


_TASK_SPEC_FIELDS = frozenset(field.name for field in dataclasses.fields(TaskSpec))
