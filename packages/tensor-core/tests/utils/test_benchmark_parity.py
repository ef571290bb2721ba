"""Measurement statistics against torch.utils.benchmark's Measurement built from the same raw times."""

from __future__ import annotations

import numpy as np
import pytest

from ember.utils.benchmark import Measurement, TaskSpec, trim_sigfig

pytestmark = pytest.mark.parity


def torch_benchmark():
    from torch.utils.benchmark.utils import common  # lazily: only parity runs have torch

    return common


def both(raw_times, number_per_run, **labels):
    common = torch_benchmark()
    ours = Measurement(number_per_run, list(raw_times), TaskSpec(stmt="f()", setup="pass", **labels))
    theirs = common.Measurement(number_per_run, list(raw_times), common.TaskSpec(stmt="f()", setup="pass", **labels))
    return ours, theirs


def cases():
    """Raw times of several shapes: tight, skewed by slow outliers, bimodal, tiny, few points."""
    rng = np.random.default_rng(7)
    yield "tight", 1e-3 * (1 + 0.001 * rng.standard_normal(50)), 100
    yield "outliers", np.concatenate([2e-5 * (1 + 0.01 * rng.random(40)), 2e-4 * rng.random(8)]), 10
    yield "bimodal", np.concatenate([np.full(20, 1e-4), np.full(20, 1.6e-4)]) * (1 + 0.01 * rng.random(40)), 1000
    yield "nanoseconds", 3e-6 * (1 + 0.2 * rng.random(30)), 1000
    yield "three points", np.array([1e-3, 3e-3, 2e-3]), 1
    yield "one point", np.array([0.5]), 7
    for seed in range(6):
        r = np.random.default_rng(seed)
        n = int(r.integers(4, 200))
        yield (
            f"random {seed}",
            10.0 ** r.uniform(-7, 0) * (1 + r.exponential(r.uniform(0.01, 0.5), n)),
            int(r.integers(1, 10000)),
        )


@pytest.mark.parametrize(("name", "raw_times", "number"), list(cases()), ids=[c[0] for c in cases()])
def test_statistics_match_torch(name, raw_times, number):
    ours, theirs = both(raw_times, number)
    np.testing.assert_allclose(ours.times, theirs.times, rtol=1e-12)
    assert ours.median == pytest.approx(theirs.median, rel=1e-9)
    assert ours.mean == pytest.approx(theirs.mean, rel=1e-9)
    assert ours.iqr == pytest.approx(theirs.iqr, rel=1e-9, abs=1e-15)
    assert ours.significant_figures == theirs.significant_figures
    assert ours.has_warnings == theirs.has_warnings
    for threshold in (0.01, 0.1, 0.25):
        assert ours.meets_confidence(threshold) == theirs.meets_confidence(threshold)


def test_merge_matches_torch():
    common = torch_benchmark()
    specs = [dict(label="a"), dict(label="b", sub_label="s"), dict(label="a")]
    raw = [[1.0, 2.0, 3.0], [4.0], [5.0, 6.0]]
    numbers = [2, 4, 8]
    ours = Measurement.merge(Measurement(n, r, TaskSpec("f()", "pass", **s)) for n, r, s in zip(numbers, raw, specs))
    theirs = common.Measurement.merge(
        common.Measurement(n, r, common.TaskSpec("f()", "pass", **s)) for n, r, s in zip(numbers, raw, specs)
    )
    assert [m.label for m in ours] == [m.label for m in theirs]
    for a, b in zip(ours, theirs):
        assert a.number_per_run == b.number_per_run
        np.testing.assert_allclose(a.raw_times, b.raw_times)


def test_repr_numbers_match_torch():
    # The same median, IQR and counts lines (the first line, an object address, differs).
    ours, theirs = both([5e-3, 1e-3, 4e-3, 2e-3, 3e-3], 1000, label="add", sub_label="f32", description="n=8")
    assert repr(ours).splitlines()[1:] == repr(theirs).splitlines()[1:]


@pytest.mark.parametrize(("x", "n"), [(3.14159, 2), (1234.5, 2), (0.0123456, 3), (987654.0, 1), (2.5e-7, 2)])
def test_trim_sigfig_matches_torch(x, n):
    assert trim_sigfig(x, n) == pytest.approx(torch_benchmark().trim_sigfig(x, n), rel=1e-6)
