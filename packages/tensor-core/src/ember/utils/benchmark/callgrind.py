"""Instruction counts with Valgrind's Callgrind: run a statement under ``valgrind``, read ``callgrind_annotate``.

Wall time on a shared machine moves by tens of percent from run to run; the
number of instructions a statement executes barely moves, so it shows the cost
of a change that timing cannot resolve. The price is speed: under Callgrind a
program runs some 50 times slower, so few runs are counted.

How the counted region is chosen. A profiled Python process runs the user's
``setup`` and a warm-up normally, then evaluates the timed loop (``for _ in
range(number): stmt``) through the builtin ``eval``. Valgrind is told to count
only inside CPython's C function for ``eval`` (``--collect-atstart=no
--toggle-collect=builtin_eval``) and to write a profile each time that function
returns (``--dump-after=builtin_eval``), so each timed loop (and the empty
baseline loop, last) becomes one profile file: the last ones the process
writes. This needs no compiled helper, but it needs a CPython whose symbols are
not stripped (the usual builds keep them) and a statement that does not itself
call ``eval()`` (that would split the counted region; ``exec`` is fine).

The text format read here is ``callgrind_annotate --show-percs=no``'s: a
``PROGRAM TOTALS`` line, then a table of ``count  file:function`` lines under an
``Ir  file:function`` heading.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from typing import NamedTuple

from .measurement import TaskSpec

__all__ = ["FunctionCount", "FunctionCounts", "CallgrindStats", "parse_callgrind_annotate", "collect_callgrind"]

#: The C function of CPython's builtin ``eval``: counting is on only inside it.
_COUNTED_FUNCTION = "builtin_eval"
#: Types of globals that ``repr`` writes as Python literals, so they can be sent to the profiled process.
_LITERAL_TYPES = (bool, int, float, complex, str, bytes, type(None))
#: CPython functions whose counts vary from run to run with hashing and dictionary layout.
_NOISY_SYMBOLS = ("dictobject.c:lookdict_unicode", "dictobject.c:unicodekeys_lookup_unicode")


class FunctionCount(NamedTuple):
    """Instructions executed in one function (``function`` is Callgrind's ``file:function [object]``)."""

    count: int
    function: str


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class FunctionCounts:
    """Instruction counts per function, largest first: a tuple of :class:`FunctionCount` with arithmetic.

    ``a - b`` gives the per-function difference of two profiles (what a change
    added or removed), ``a + b`` their sum, ``a * k`` scales; functions whose
    count becomes zero are dropped. Indexing and iteration work as on a tuple.

    Attributes:
        inclusive: Whether each count includes the functions it called.
    """

    _data: tuple[FunctionCount, ...]
    inclusive: bool
    truncate_rows: bool = True

    def __iter__(self) -> Iterator[FunctionCount]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, item):
        # (A FunctionCount is itself a tuple, so the test is on the index, not on the result.)
        data = self._data[item]
        return FunctionCounts(data, self.inclusive, truncate_rows=False) if isinstance(item, slice) else data

    def __repr__(self) -> str:
        width = max((len(str(c)) for c, _ in self), default=1)
        lines = [f"  {c:>{width}}  {fn}" for c, fn in self]
        if self.truncate_rows and len(lines) > 18:  # the biggest and the smallest changes are the interesting ones
            lines = lines[:9] + ["...".rjust(width + 2)] + lines[-9:]
        if not self.inclusive:
            lines += ["", f"Total: {self.sum()}"]
        return "\n".join([object.__repr__(self), *lines])

    def __add__(self, other: FunctionCounts) -> FunctionCounts:
        return self._merge(other, 1)

    def __sub__(self, other: FunctionCounts) -> FunctionCounts:
        return self._merge(other, -1)

    def __mul__(self, other: int | float) -> FunctionCounts:
        return self._from_dict({fn: int(c * other) for c, fn in self}, self.inclusive)

    def _merge(self, other: FunctionCounts, sign: int) -> FunctionCounts:
        if self.inclusive != other.inclusive:
            raise ValueError("Cannot merge inclusive and exclusive counts.")
        counts: dict[str, int] = collections.defaultdict(int)
        for c, fn in self:
            counts[fn] += c
        for c, fn in other:
            counts[fn] += sign * c
        return self._from_dict(counts, self.inclusive)

    @staticmethod
    def _from_dict(counts: dict[str, int], inclusive: bool) -> FunctionCounts:
        return FunctionCounts(
            tuple(sorted((FunctionCount(c, fn) for fn, c in counts.items() if c), reverse=True)), inclusive
        )

    def transform(self, map_fn: Callable[[str], str]) -> FunctionCounts:
        """Rename every function with ``map_fn`` (e.g. strip build paths); counts of equal new names add up."""
        counts: dict[str, int] = collections.defaultdict(int)
        for c, fn in self:
            counts[map_fn(fn)] += c
        return self._from_dict(counts, self.inclusive)

    def filter(self, filter_fn: Callable[[str], bool]) -> FunctionCounts:
        """The entries whose function name ``filter_fn`` accepts."""
        return FunctionCounts(tuple(fc for fc in self if filter_fn(fc.function)), self.inclusive)

    def sum(self) -> int:
        """The total instruction count."""
        return sum(c for c, _ in self)

    def denoise(self) -> FunctionCounts:
        """Without CPython's dictionary look-ups of names, whose counts vary from run to run for no reason."""
        return self.filter(lambda fn: not any(noisy in fn for noisy in _NOISY_SYMBOLS))


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class CallgrindStats:
    """The instruction counts of ``number_per_run`` runs of a statement (from :meth:`Timer.collect_callgrind`).

    Attributes:
        task_spec: What was counted.
        number_per_run: Runs of the statement in the counted loop.
        baseline_inclusive_stats, baseline_exclusive_stats: Counts of an empty
            loop of as many runs (empty when no baseline was collected).
        stmt_inclusive_stats, stmt_exclusive_stats: Counts of the statement's loop.
        stmt_callgrind_out: The raw Callgrind output file's text, when kept.
    """

    task_spec: TaskSpec
    number_per_run: int
    baseline_inclusive_stats: FunctionCounts
    baseline_exclusive_stats: FunctionCounts
    stmt_inclusive_stats: FunctionCounts
    stmt_exclusive_stats: FunctionCounts
    stmt_callgrind_out: str | None = None

    def __repr__(self) -> str:
        base = self.baseline_exclusive_stats
        threads = self.task_spec.num_threads
        return "\n".join(
            [
                object.__repr__(self),
                self.task_spec.summarize(),
                f"  {'':>25}All{'':>10}Noisy symbols removed",
                f"    Instructions: {self.counts(denoise=False):>12}{'':>15}{self.counts(denoise=True):>12}",
                f"    Baseline:     {base.sum():>12}{'':>15}{base.denoise().sum():>12}",
                f"{self.number_per_run} runs per measurement, {threads} thread{'s' if threads > 1 else ''}",
            ]
        )

    def stats(self, inclusive: bool = False) -> FunctionCounts:
        """Counts per function. ``inclusive=True`` adds in callees (finds hot spots); the default, exclusive
        counts, cancel cleanly when two profiles are subtracted."""
        return self.stmt_inclusive_stats if inclusive else self.stmt_exclusive_stats

    def counts(self, *, denoise: bool = False) -> int:
        """Total instructions of the ``number_per_run`` runs (see :meth:`FunctionCounts.denoise`)."""
        stats = self.stmt_exclusive_stats
        return (stats.denoise() if denoise else stats).sum()

    def delta(self, other: CallgrindStats, inclusive: bool = False) -> FunctionCounts:
        """Per-function counts of this profile minus ``other``'s: where a change added or saved instructions."""
        return self.stats(inclusive=inclusive) - other.stats(inclusive=inclusive)

    def as_standardized(self) -> CallgrindStats:
        """The same counts with build directories and library names stripped from function names.

        Two builds in different folders name the same function differently;
        standardized names let :meth:`delta` cancel them.
        """

        def strip(stats: FunctionCounts) -> FunctionCounts:
            for pattern, replacement in _STANDARDIZE:
                stats = stats.transform(lambda fn, p=pattern, r=replacement: re.sub(p, r, fn))
            return stats

        return dataclasses.replace(
            self,
            baseline_inclusive_stats=strip(self.baseline_inclusive_stats),
            baseline_exclusive_stats=strip(self.baseline_exclusive_stats),
            stmt_inclusive_stats=strip(self.stmt_inclusive_stats),
            stmt_exclusive_stats=strip(self.stmt_exclusive_stats),
            stmt_callgrind_out=None,
        )


_STANDARDIZE = (
    (r"^.+/(Python|Objects|Modules|Parser|Include)/", r"\1/"),  # CPython's source tree, wherever it was built
    (r"^.+/(csrc/)", r"\1"),  # ember's C++ sources
    (r"\s\[.+\]$", ""),  # the shared object that holds the function
)


# --------------------------------------------------------------------------- parsing

_TOTAL_LINE = re.compile(r"^\s*([0-9,]+)\s+PROGRAM TOTALS")
_TABLE_HEADING = re.compile(r"^\s*Ir\s+file:function\s*$")
_ENTRY_LINE = re.compile(r"^\s*([0-9,]+)\s+(\S.*)$")


def parse_callgrind_annotate(text: str, inclusive: bool) -> FunctionCounts:
    """The per-function counts in the text ``callgrind_annotate --show-percs=no`` printed.

    Entries whose count equals the program total are dropped: when a process
    writes several profiles, Callgrind charges each whole profile to the
    outermost frames (``main``, ``__libc_start_main``...), which did none of
    the work.

    Raises:
        ValueError: if the text has no ``PROGRAM TOTALS`` line or no function table.
    """
    total = None
    entries: list[FunctionCount] = []
    state = "total"  # then "heading", then "table"
    for line in text.splitlines():
        if state == "total":
            match = _TOTAL_LINE.match(line)
            if match:
                total, state = int(match.group(1).replace(",", "")), "heading"
        elif state == "heading":
            if _TABLE_HEADING.match(line):
                state = "table"
        else:
            if re.fullmatch(r"-+", line.strip()) and not entries:
                continue  # the rule under the heading
            match = _ENTRY_LINE.match(line)
            if match is None:
                break  # a blank line or the next section ends the table
            count = int(match.group(1).replace(",", ""))
            if count != total:
                entries.append(FunctionCount(count, match.group(2).strip()))
    if state != "table":
        missing = "a PROGRAM TOTALS line" if state == "total" else "an 'Ir  file:function' table"
        raise ValueError(f"parse_callgrind_annotate: the callgrind_annotate output has no {missing}")
    return FunctionCounts(tuple(sorted(entries, reverse=True)), inclusive=inclusive)


# --------------------------------------------------------------------------- collecting


def _require_tools() -> None:
    missing = [tool for tool in ("valgrind", "callgrind_annotate") if shutil.which(tool) is None]
    if missing:
        raise OSError(
            f"collect_callgrind needs Valgrind's {' and '.join(missing)} on PATH, which this machine lacks. "
            "Install valgrind (e.g. `apt-get install valgrind`), or measure wall time with blocked_autorange."
        )


def _globals_source(user_globals: dict) -> str:
    """``user_globals`` as a Python dict literal, for the script of the profiled process."""
    for name, value in user_globals.items():
        if not isinstance(value, _LITERAL_TYPES):
            raise ValueError(
                f"collect_callgrind: global {name!r} is a {type(value).__name__}, which cannot be sent to the "
                "profiled process (only bool, int, float, complex, str, bytes and None can). Build it in `setup`."
            )
    return "{" + ", ".join(f"{name!r}: {value!r}" for name, value in user_globals.items()) + "}"


def _script(task_spec: TaskSpec, user_globals: dict, number: int, repeats: int, collect_baseline: bool) -> str:
    """The program the profiled process runs: setup, warm-up, then each counted loop in one ``eval``."""
    uses_ember = "ember" in task_spec.stmt or "ember" in task_spec.setup
    loop = f"for _ in range({number}):\n" + textwrap.indent(task_spec.stmt, "    ")
    lines = [
        "import gc",
        # Importing ember costs seconds under Valgrind: only when the code names it.
        *(
            [
                "import ember",
                "import threadpoolctl",
                f"ember.set_num_threads({task_spec.num_threads})",
                f"threadpoolctl.threadpool_limits(limits={task_spec.num_threads})  # numpy's BLAS/OpenMP pools",
            ]
            if uses_ember
            else []
        ),
        f"g = {_globals_source(user_globals)}",
        *(["g['ember'] = ember"] if uses_ember else []),
        f"exec(compile({task_spec.setup!r}, '<setup>', 'exec'), g)",
        f"stmt = compile({task_spec.stmt!r}, '<stmt>', 'exec')",
        f"for _ in range({min(number, 10)}):  # warm-up: first calls fill caches",
        "    exec(stmt, g)",
        f"loop = compile({loop!r}, '<loop>', 'exec')",
        f"baseline = compile('for _ in range({number}):\\n    pass', '<baseline>', 'exec')",
        "gc.collect()",
        f"for _ in range({repeats}):",
        "    eval(loop, g)  # one counted profile each",
        "    gc.collect()",
        *(["eval(baseline, g)"] if collect_baseline else []),
    ]
    return "\n".join(lines) + "\n"


def _run(args: list[str], log_path: str) -> subprocess.CompletedProcess:
    # Output goes to a file, not a pipe: a long profile report could fill a pipe and hang the child.
    with open(log_path, "w", encoding="utf-8") as log:
        return subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, check=False)


def _annotate(path: str, inclusive: bool, log_path: str) -> FunctionCounts:
    args = ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100"]
    args += ["--show-percs=no", "--auto=no", path]
    process = _run(args, log_path)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if process.returncode:
        raise OSError(f"callgrind_annotate failed on {path}:\n{text}")
    return parse_callgrind_annotate(text, inclusive=inclusive)


def _profile_parts(out_file: str) -> list[str]:
    """The numbered profile files Callgrind wrote (``out.1``, ``out.2``...), in order."""
    directory, base = os.path.split(out_file)
    numbered = [name for name in os.listdir(directory) if re.fullmatch(re.escape(base) + r"\.\d+", name)]
    return [os.path.join(directory, name) for name in sorted(numbered, key=lambda n: int(n.rsplit(".", 1)[1]))]


def collect_callgrind(
    task_spec: TaskSpec,
    user_globals: dict,
    *,
    number: int,
    repeats: int,
    collect_baseline: bool,
    retain_out_file: bool,
) -> tuple[CallgrindStats, ...]:
    """Profile ``repeats`` loops of ``number`` runs of ``task_spec.stmt`` in a Valgrind process.

    The engine of :meth:`Timer.collect_callgrind`, which documents the arguments.

    Raises:
        OSError: if Valgrind's tools are missing or the profiled process fails.
        RuntimeError: if Callgrind wrote fewer profiles than expected (a
            stripped Python, or a statement calling ``eval``).
    """
    _require_tools()
    with tempfile.TemporaryDirectory(prefix="ember_callgrind_") as work:
        script = os.path.join(work, "timed_loop.py")
        out_file = os.path.join(work, "callgrind.out")
        log = os.path.join(work, "log.txt")
        with open(script, "w", encoding="utf-8") as f:
            f.write(_script(task_spec, user_globals, number, repeats, collect_baseline))
        process = _run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out_file}",
                "--collect-atstart=no",
                f"--toggle-collect={_COUNTED_FUNCTION}",
                f"--dump-after={_COUNTED_FUNCTION}",
                sys.executable,
                script,
            ],
            log,
        )
        if process.returncode:
            with open(log, encoding="utf-8", errors="replace") as f:
                raise OSError(f"Failed to collect callgrind profile (exit status {process.returncode}):\n{f.read()}")
        expected = repeats + int(collect_baseline)
        # Python's start-up may call eval too (site-packages' .pth files): ours are the last profiles written.
        parts = _profile_parts(out_file)
        if len(parts) < expected:
            raise RuntimeError(
                f"collect_callgrind: Callgrind wrote {len(parts)} profiles, expected at least {expected}; "
                f"is {sys.executable} stripped of its symbols (Valgrind must find '{_COUNTED_FUNCTION}')?"
            )
        parts = parts[-expected:]
        stats = [(_annotate(p, True, log), _annotate(p, False, log)) for p in parts]
        if collect_baseline:
            baseline = stats.pop()
        else:
            baseline = (FunctionCounts((), inclusive=True), FunctionCounts((), inclusive=False))
        raw = [_read(p) if retain_out_file else None for p in parts[:repeats]]
    return tuple(
        CallgrindStats(
            task_spec=task_spec,
            number_per_run=number,
            baseline_inclusive_stats=baseline[0],
            baseline_exclusive_stats=baseline[1],
            stmt_inclusive_stats=inclusive,
            stmt_exclusive_stats=exclusive,
            stmt_callgrind_out=text,
        )
        for (inclusive, exclusive), text in zip(stats, raw)
    )


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()
