"""Measurement statistics, warnings, merging and printing, on hand-made times (no clock involved)."""

from __future__ import annotations

import pytest

from ember.utils.benchmark import Measurement, TaskSpec, select_unit, trim_sigfig, unit_to_english

SPEC = TaskSpec(stmt="x + y", setup="pass", label="add", sub_label="float32", description="n=8", num_threads=2)


def make(raw_times, number_per_run=1, spec=SPEC):
    return Measurement(number_per_run=number_per_run, raw_times=list(raw_times), task_spec=spec)


def test_times_are_per_run():
    m = make([10.0, 20.0, 40.0], number_per_run=10)
    assert m.times == [1.0, 2.0, 4.0]
    assert m.raw_times == [10.0, 20.0, 40.0]


def test_median_mean_and_iqr_odd_count():
    # Sorted per-run times 1..5: quartiles fall on points 2 and 4.
    m = make([50, 10, 40, 20, 30], number_per_run=10)
    assert m.median == pytest.approx(3.0)
    assert m.mean == pytest.approx(3.0)
    assert m.iqr == pytest.approx(2.0)


def test_quartiles_interpolate_linearly_between_points():
    # Sorted [1, 2, 3, 10]: the 25th percentile sits 3/4 of the way from 1 to 2, the 75th 1/4 of the way from 3 to 10.
    m = make([10, 3, 2, 1])
    assert m.median == pytest.approx(2.5)
    assert m.mean == pytest.approx(4.0)
    assert m.iqr == pytest.approx((3 + 0.25 * 7) - (1 + 0.75 * 1))


@pytest.mark.parametrize(
    ("seconds", "figures"),
    [
        (1e-6, 1),  # no spread: the interval is the 25 ns floor; log10(1e-6 / 25e-9) = 1.6
        (1e-5, 2),  # log10(400) = 2.6
        (1e-4, 3),  # log10(4000) = 3.6
        (1e-2, 4),  # log10(4e5) = 5.6, capped at 4
        (1e-8, 1),  # below the floor: log10(0.4) < 0, raised to 1
    ],
)
def test_significant_figures_without_spread(seconds, figures):
    assert make([seconds] * 6).significant_figures == figures


def test_significant_figures_from_the_middle_half():
    # n = 4: the middle half is sorted points 1 and 2, here 0.999 ms and 1.001 ms.
    # Their population std is 1e-6 s; the interval 1.645 * 1e-6 / sqrt(2) = 1.163e-6 s;
    # log10(1e-3 / 1.163e-6) = 2.93 -> 2 figures. The outer points (0.5 ms, 5 ms) do not count.
    m = make([0.5e-3, 0.999e-3, 1.001e-3, 5e-3])
    assert m.significant_figures == 2
    wide = make([0.5e-3, 0.8e-3, 1.2e-3, 5e-3])  # interval 0.2326 ms: log10(4.3) = 0.6 -> floored to 0, raised to 1
    assert wide.significant_figures == 1


@pytest.mark.parametrize(
    ("times", "warns", "cause"),
    [
        ([1, 19.5, 20, 21, 30], False, None),  # IQR 1.5 / median 20 = 7.5%
        ([1, 19, 20, 21, 30], True, "system fluctuation"),  # exactly 10%: not below the threshold
        ([1, 17, 20, 21.5, 30], True, "system fluctuation"),  # 22.5%
        ([1, 17, 20, 22, 30], True, "environmental influence"),  # exactly 25%: the gross threshold
    ],
)
def test_warning_thresholds(times, warns, cause):
    m = make(times)
    assert m.has_warnings is warns
    assert m.meets_confidence(0.1) is not warns
    text = repr(m)
    if warns:
        percent = 100 * m.iqr / m.median
        assert f"WARNING: Interquartile range is {percent:.1f}% of the median measurement." in text
        assert cause in text
    else:
        assert "WARNING" not in text


def test_meets_confidence_uses_the_given_threshold():
    m = make([1, 19, 20, 21, 30])  # relative IQR 0.1
    assert not m.meets_confidence(0.1)
    assert m.meets_confidence(0.11)


def test_merge_pools_replicates_per_task_spec_in_first_seen_order():
    other = TaskSpec(stmt="x * y", setup="pass", label="mul")
    a = Measurement(2, [2.0, 4.0], SPEC, metadata={"run": 1})
    b = Measurement(4, [4.0], other)
    c = Measurement(1, [3.0], SPEC, metadata={"run": 2})
    merged = Measurement.merge([a, b, c])
    assert [m.task_spec for m in merged] == [SPEC, other]
    assert merged[0].number_per_run == 1
    assert merged[0].raw_times == [1.0, 2.0, 3.0]  # per-run times of a, then c
    assert merged[0].metadata is None
    assert merged[1].raw_times == [1.0]


def test_task_spec_fields_are_attributes_of_the_measurement():
    m = make([1.0])
    assert (m.stmt, m.label, m.sub_label, m.description, m.num_threads) == ("x + y", "add", "float32", "n=8", 2)
    assert m.env == "Unspecified env"
    assert m.title == "add: float32"
    assert m.as_row_name == "float32"
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        m.nonsense  # noqa: B018


def test_repr_of_many_blocks():
    m = make([5e-3, 1e-3, 4e-3, 2e-3, 3e-3], number_per_run=1000)
    lines = repr(m).splitlines()
    assert lines[0].startswith("<ember.utils.benchmark.measurement.Measurement object at 0x")
    assert lines[1:] == [
        "add: float32",
        "n=8",
        "  Median: 3.00 us",
        "  IQR:    2.00 us (2.00 to 4.00)",
        "  5 measurements, 1000 runs per measurement, 2 threads",
        "  WARNING: Interquartile range is 66.7% of the median measurement.",
        "           This suggests significant environmental influence.",
    ]


def test_repr_of_one_block_has_no_iqr():
    spec = TaskSpec(stmt="f()", setup="x = 1\ny = 2", num_threads=1)
    lines = repr(make([2.5e-3], number_per_run=10, spec=spec)).splitlines()
    assert lines[1:] == ["f()", "setup:", "  x = 1", "  y = 2", "", "  250.00 us", "  1 measurement, 10 runs, 1 thread"]


def test_empty_measurement_and_bad_block_size():
    with pytest.raises(ValueError, match="no times"):
        make([]).median  # noqa: B018
    with pytest.raises(ValueError, match="number_per_run"):
        make([1.0], number_per_run=0)


@pytest.mark.parametrize(
    ("t", "unit"), [(3.0, "s"), (0.5, "ms"), (1e-3, "ms"), (9.99e-4, "us"), (2e-6, "us"), (7e-9, "ns"), (1e-12, "ns")]
)
def test_select_unit(t, unit):
    assert select_unit(t) == (unit, {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit])


def test_trim_sigfig_and_unit_names():
    assert trim_sigfig(3.14159, 2) == pytest.approx(3.1)
    assert trim_sigfig(1234.5, 2) == pytest.approx(1200.0)
    assert trim_sigfig(0.0123456, 3) == pytest.approx(0.0123)
    assert trim_sigfig(0.0, 3) == 0.0
    with pytest.raises(ValueError, match="significant figures"):
        trim_sigfig(1.0, 0)
    assert unit_to_english("us") == "microsecond"


def test_measurements_survive_pickling():
    # Saved results are compared across runs and machines, so a Measurement must pickle.
    import pickle

    m = make([5, 1, 4, 2, 3], number_per_run=10)
    m.median  # noqa: B018 - the cached statistics must not break pickling either
    copy = pickle.loads(pickle.dumps(m))
    assert copy.raw_times == m.raw_times and copy.task_spec == SPEC
    assert (copy.median, copy.iqr, copy.label) == (0.3, pytest.approx(0.2), "add")
