"""Compare's tables: grouping by label, sub-label, description and threads; units, trimming, warnings, colours."""

from __future__ import annotations

import re

import pytest

from ember.utils.benchmark import Compare, Measurement, TaskSpec

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def make(times, *, label="add", sub_label="float", description="n=1", num_threads=1, env=None, stmt="a + b"):
    spec = TaskSpec(
        stmt=stmt,
        setup="pass",
        label=label,
        sub_label=sub_label,
        description=description,
        num_threads=num_threads,
        env=env,
    )
    return Measurement(number_per_run=1, raw_times=list(times), task_spec=spec)


def cells(text: str) -> list[list[str]]:
    """The ``|``-separated cells of each table line of terminal output (colours stripped)."""
    return [[c.strip() for c in ANSI.sub("", line).split("|")] for line in text.splitlines() if "|" in line]


RESULTS = [
    make([1.0e-6, 1.2e-6, 1.1e-6], description="n=1"),
    make([2.0e-6], description="n=8"),
    make([3.0e-6], sub_label="int", description="n=1"),
    make([5.0e-6], description="n=1", num_threads=4),
    make([2.5e-3], label="mul", sub_label="float", description="n=1"),
]


def test_one_table_per_label_with_rows_columns_and_thread_groups():
    text = str(Compare(RESULTS))
    add, mul = text.split("\n[")
    assert add.splitlines()[0].startswith("[") and " add " in add.splitlines()[0]
    assert cells(add) == [
        ["", "n=1", "n=8"],
        ["float", "1.1", "2.0"],  # median of 1.0, 1.1, 1.2 us, one decimal
        ["int", "3.0", ""],
        ["float", "5.0", ""],
    ]
    lines = add.splitlines()
    assert lines.index(next(x for x in lines if x.startswith("1 threads: "))) < lines.index(
        next(x for x in lines if x.startswith("4 threads: "))
    )
    assert "Times are in microseconds (us)." in add
    assert cells(mul) == [["", "n=1"], ["float", "2.5"]]
    assert "Times are in milliseconds (ms)." in mul


def test_replicates_are_merged_before_the_table_is_built():
    compare = Compare([make([1e-6, 3e-6]), make([2e-6])])  # same task spec: one cell, median of the three
    assert cells(str(compare)) == [["", "n=1"], ["float", "2.0"]]


def test_row_names_fall_back_to_the_statement_and_envs_are_shown():
    compare = Compare([make([1e-3], sub_label=None, env="main"), make([2e-3], sub_label=None, env="branch")])
    assert cells(str(compare))[1:] == [["(main)      a + b", "1.0"], ["(branch)    a + b", "2.0"]]


def test_trim_significant_figures():
    # One time each, so no spread: 25 ns is the uncertainty. 1234.5 us supports 4 figures (shown as 1234),
    # 1.2345 us only 1 (log10(1.2345e-6 / 25e-9) = 1.7): the column keeps the fewest decimals any cell needs (0).
    compare = Compare([make([1234.5e-6], sub_label="big"), make([1.2345e-6], sub_label="small")])
    compare.trim_significant_figures()
    assert cells(str(compare))[1:] == [["big", "1234"], ["small", "1"]]


def test_highlight_warnings_marks_noisy_cells_only():
    noisy = make([1e-6, 1e-6, 2e-6, 3e-6, 3e-6], sub_label="noisy")  # IQR 2 us over median 2 us: 100%
    steady = make([1e-6] * 5, sub_label="steady")
    compare = Compare([noisy, steady])
    assert "(!" not in str(compare)
    compare.highlight_warnings()
    text = str(compare)
    assert cells(text)[1:] == [["noisy", "2.0 (! 100%)"], ["steady", "1.0"]]
    assert "(! XX%) Measurement has high variance" in text


@pytest.mark.parametrize("rowwise", [False, True])
def test_colorize(rowwise):
    best, close, slow = "\x1b[92m", "\x1b[34m", "\x1b[31m"
    results = [
        make([10.0e-6], sub_label="a", description="x"),
        make([10.5e-6], sub_label="b", description="x"),  # 5% (and more than 100 ns) slower: "close"
        make([60.0e-6], sub_label="a", description="y"),  # 6x: "very bad"
        make([10.0e-6], sub_label="b", description="y"),
    ]
    compare = Compare(results)
    assert "\x1b[" not in str(compare)
    compare.colorize(rowwise=rowwise)
    rows = [line for line in str(compare).splitlines() if line.lstrip().startswith(("a ", "b "))]
    a_row, b_row = rows
    a_x, a_y = a_row.split("|")[1:]
    b_x, b_y = b_row.split("|")[1:]
    if rowwise:  # against the row's best: a's best is x, b's best is y
        assert best in a_x and slow in a_y and close in b_x and best in b_y
    else:  # against the column's best: x's best is a, y's best is b
        assert best in a_x and close in b_x and slow in a_y and best in b_y


def test_markdown_table():
    compare = Compare(RESULTS)
    compare.colorize()
    text = compare.markdown()
    assert text.splitlines()[:8] == [
        "### add",
        "",
        "| | threads | n=1 | n=8 |",
        "|---|---:|---:|---:|",
        "| float | 1 | **1.1** | **2.0** |",
        "| int | 1 | 3.0 |  |",
        "| float | 4 | **5.0** |  |",
        "",
    ]
    assert "Times are in microseconds (us)." in text
    assert "### mul" in text and "| float | 1 | **2.5** |" in text


def test_print_and_extend_results(capsys):
    compare = Compare([make([1e-6])])
    compare.extend_results([make([2e-6], sub_label="int")])
    compare.print()
    out = capsys.readouterr().out
    assert [row[0] for row in cells(out)[1:]] == ["float", "int"]
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        Compare([1.0])
