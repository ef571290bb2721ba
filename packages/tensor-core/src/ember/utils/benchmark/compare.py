"""``Compare``: lay many measurements out as tables, for the terminal or for Markdown.

One table per ``label``. Rows are grouped by ``num_threads`` (a ``N threads:``
rule opens each group), then named by ``sub_label`` (or the statement), with the
``env`` in front when the measurements come from several environments. Columns
are the ``description``\\ s. A cell is the median time, all cells of a table in
one unit. Replicates (equal task specs) are pooled first with
:meth:`Measurement.merge`.
"""

from __future__ import annotations

import collections
import enum
import math
from collections.abc import Iterable, Sequence

from ._units import select_unit, trim_sigfig, unit_to_english
from .measurement import Measurement

__all__ = ["Colorize", "Compare"]

# ANSI terminal colours for colorize(): best, within 10% of best, 2x and 5x slower than best.
_BEST = "\033[92m\033[1m"
_GOOD = "\033[34m\033[1m"
_BAD = "\033[2m\033[91m"
_VERY_BAD = "\033[31m\033[1m"
_RESET = "\033[0m"


class Colorize(enum.Enum):
    """How :class:`Compare` colours cells: not at all, against the best of the column, or of the row."""

    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


RowKey = tuple  # (num_threads, env, row name)


class _Table:
    """The cells of one label's table, before any text is produced."""

    def __init__(self, results: Sequence[Measurement], trim: bool, highlight_warnings: bool):
        self.label = results[0].label
        self.unit, self.scale = select_unit(min(m.median for m in results))
        self.columns = list(dict.fromkeys(m.description for m in results))
        keys = list(dict.fromkeys((m.num_threads, m.env, m.as_row_name) for m in results))
        # Group rows by thread count; within a count keep the order in which rows first appeared.
        self.rows: list[RowKey] = sorted(keys, key=lambda key: key[0])
        self.cells: dict[tuple[RowKey, str | None], Measurement] = {
            ((m.num_threads, m.env, m.as_row_name), m.description): m for m in results
        }
        self.show_env = len({m.env for m in results}) > 1
        self.highlight = highlight_warnings and any(m.has_warnings for m in results)
        self.decimals = self._decimals(results) if trim else 1

    def _decimals(self, results: Sequence[Measurement]) -> int:
        """Decimal places that keep every cell within its significant figures (the fewest any cell needs)."""
        needed = []
        for m in results:
            value = m.median / self.scale
            leading = math.ceil(math.log10(value)) if value > 0 else 1
            needed.append(max(m.significant_figures - leading, 0))
        return min(needed)

    def value_text(self, m: Measurement, trim: bool) -> str:
        value = m.median / self.scale
        if trim:
            value = trim_sigfig(value, m.significant_figures)
        text = f"{value:.{self.decimals}f}"
        if self.highlight and m.has_warnings:
            text += f" (! {100 * m.iqr / m.median:.0f}%)"
        return text

    def row_text(self, row: RowKey) -> str:
        _, env, name = row
        return f"({env}) {name}" if self.show_env else name

    def best(self, row: RowKey, column: str | None, colorize: Colorize) -> float | None:
        """The median a cell is compared with when colouring: the row's or the thread group's column minimum."""
        if colorize == Colorize.ROWWISE:
            medians = [self.cells[(row, c)].median for c in self.columns if (row, c) in self.cells]
        elif colorize == Colorize.COLUMNWISE:
            same_threads = [r for r in self.rows if r[0] == row[0]]
            medians = [self.cells[(r, column)].median for r in same_threads if (r, column) in self.cells]
        else:
            return None
        return min(medians) if medians else None


def _colour(text: str, value: float, best: float) -> str:
    if value <= best * 1.01 or value <= best + 100e-9:
        return _BEST + text + _RESET
    if value <= best * 1.1:
        return _GOOD + text + _RESET
    if value >= best * 5:
        return _VERY_BAD + text + _RESET
    if value >= best * 2:
        return _BAD + text + _RESET
    return text


class Compare:
    """A table of many :class:`Measurement`\\ s: one per label, rows by sub-label and threads, columns by description.

    Args:
        results: The measurements to show.

    Raises:
        ValueError: if an element of ``results`` is not a :class:`Measurement`.

    Example:
        >>> from ember.utils.benchmark import Compare, Measurement, TaskSpec
        >>> def m(sub_label, description, seconds):
        ...     spec = TaskSpec("f(x)", "pass", label="f", sub_label=sub_label, description=description)
        ...     return Measurement(1, [seconds], spec)
        >>> print(Compare([m("float", "n=1", 1e-6), m("float", "n=8", 2e-6), m("int", "n=1", 3e-6)]))
        [----------- f -----------]
                     |  n=1  |  n=8
        1 threads: ----------------
              float  |  1.0  |  2.0
              int    |  3.0  |
        <BLANKLINE>
        Times are in microseconds (us).
        <BLANKLINE>
    """

    def __init__(self, results: Iterable[Measurement]) -> None:
        self._results: list[Measurement] = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def extend_results(self, results: Iterable[Measurement]) -> None:
        """Add more measurements to the table.

        Raises:
            ValueError: if an element is not a :class:`Measurement`.
        """
        results = list(results)
        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
        self._results.extend(results)

    def trim_significant_figures(self) -> None:
        """Show each time only to the significant figures its spread supports (see
        :attr:`Measurement.significant_figures`)."""
        self._trim_significant_figures = True

    def colorize(self, rowwise: bool = False) -> None:
        """Colour each cell by how it compares with the best of its column (default) or of its row.

        Green is the best (within 1%), blue within 10%, red at least twice, bold red at least five times
        slower. The Markdown output marks the best cells in bold instead.
        """
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self) -> None:
        """Append ``(! XX%)`` (IQR as a percentage of the median) to the cells with a high spread."""
        self._highlight_warnings = True

    def print(self) -> None:
        """Print the tables."""
        print(str(self))

    def __str__(self) -> str:
        return "\n".join(self._render_terminal(t) for t in self._tables())

    def markdown(self) -> str:
        """The tables as Markdown: a ``###`` heading per label, a pipe table, and the unit.

        An extension of PyTorch's API, for reports such as ``BENCHMARKS.md``.
        Rows are named ``sub_label`` (``(env) sub_label`` when there are several
        environments) with the thread count in its own column.
        """
        return "\n".join(self._render_markdown(t) for t in self._tables())

    # ------------------------------------------------------------------ building

    def _tables(self) -> list[_Table]:
        by_label: dict[str | None, list[Measurement]] = collections.defaultdict(list)
        for m in Measurement.merge(self._results):
            by_label[m.label].append(m)
        return [_Table(group, self._trim_significant_figures, self._highlight_warnings) for group in by_label.values()]

    def _cell(self, table: _Table, row: RowKey, column: str | None, *, markdown: bool, width: int = 0) -> str:
        """One cell's text (centred in ``width`` for the terminal), coloured or bolded by :meth:`colorize`."""
        m = table.cells.get((row, column))
        text = "" if m is None else table.value_text(m, self._trim_significant_figures)
        best = None if m is None else table.best(row, column, self._colorize)
        if markdown:
            return f"**{text}**" if best is not None and m.median <= best * 1.01 else text
        text = text.center(width)
        return text if best is None else _colour(text, m.median, best)

    def _render_terminal(self, table: _Table) -> str:
        env_width = max(len(env) for _, env, _ in table.rows) + 2 if table.show_env else 0
        names = [
            "  " + (f"({env})" if table.show_env else "").ljust(env_width + 4) + name for _, env, name in table.rows
        ]
        header = [""] + [str(c) if c is not None else "" for c in table.columns]
        values = [[self._cell(table, row, c, markdown=False) for c in table.columns] for row in table.rows]
        widths = [max(len(text) for text in [header[0], *names])]
        widths += [max([len(header[i + 1])] + [len(v[i]) for v in values]) for i in range(len(table.columns))]
        heading = "  |  ".join(h.center(w) for h, w in zip(header, widths))
        lines = [heading]
        previous_threads = None
        for row, name in zip(table.rows, names):
            if row[0] != previous_threads:  # a rule opens each group of rows with the same thread count
                lines.append(f"{row[0]} threads: ".ljust(len(heading), "-"))
                previous_threads = row[0]
            cells = [self._cell(table, row, c, markdown=False, width=w) for c, w in zip(table.columns, widths[1:])]
            lines.append("  |  ".join([name.ljust(widths[0]), *cells]).rstrip())
        title = f" {table.label or ''} ".center(len(heading) - 2, "-")
        footer = [f"Times are in {unit_to_english(table.unit)}s ({table.unit})."]
        if table.highlight:
            footer.append("(! XX%) Measurement has high variance, where XX is the IQR / median * 100.")
        return "\n".join([f"[{title}]", *lines, "", *footer]) + "\n"

    def _render_markdown(self, table: _Table) -> str:
        names = [str(c) if c is not None else "" for c in table.columns]
        lines = [
            f"### {table.label or 'Results'}",
            "",
            "| | threads | " + " | ".join(names) + " |",
            "|---|---:|" + "---:|" * len(names),
        ]
        for row in table.rows:
            cells = [self._cell(table, row, c, markdown=True) for c in table.columns]
            lines.append(f"| {table.row_text(row)} | {row[0]} | " + " | ".join(cells) + " |")
        lines += ["", f"Times are in {unit_to_english(table.unit)}s ({table.unit})."]
        if table.highlight:
            lines.append("(! XX%) Measurement has high variance, where XX is the IQR / median * 100.")
        return "\n".join(lines) + "\n"
