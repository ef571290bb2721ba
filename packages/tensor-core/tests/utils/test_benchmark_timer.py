"""Timer on an injected fake clock: block sizing, stopping rules, thread control and argument checks.

The statement ``clock.tick()`` advances a fake clock by a fixed step, so every
time the Timer reads is known exactly. The step is a power of two so that sums
of steps are exact in floating point and the block counts below are exact.
"""

from __future__ import annotations

import math

import pytest
import threadpoolctl

import ember
from ember.utils.benchmark import Language, Timer
from ember.utils.benchmark import timer as timer_module

STEP = 2.0**-20  # seconds per tick, about 0.95 us


class FakeClock:
    """A clock that only moves when ``tick()`` is called; each tick lasts the next of ``steps`` (cycled)."""

    def __init__(self, steps=(STEP,)):
        self.now = 0.0
        self.steps = list(steps)
        self.ticks = 0

    def __call__(self):
        return self.now

    def tick(self):
        self.now += self.steps[self.ticks % len(self.steps)]
        self.ticks += 1


def fake_timer(clock, **kwargs):
    return Timer("clock.tick()", timer=clock, globals={"clock": clock}, **kwargs)


def test_timeit_warms_up_then_times_number_runs():
    clock = FakeClock()
    m = fake_timer(clock).timeit(number=1000)
    assert clock.ticks == 10 + 1000  # warm-up of number // 100 runs first
    assert m.number_per_run == 1000
    assert m.raw_times == [1000 * STEP]
    assert m.median == STEP


def test_timeit_warm_up_is_at_least_two_runs():
    clock = FakeClock()
    fake_timer(clock).timeit(number=5)
    assert clock.ticks == 2 + 5


def test_blocked_autorange_block_size_and_block_count():
    # The clock's cost (an empty block) reads as the 1 ns floor. Block size: 1 run (0.95 us) has relative
    # overhead 1e-3, 10 runs 1.05e-4, 100 runs pass that test but last 95 us < min_run_time / 1000 = 200 us,
    # so 1000 runs. Blocks of 1000 * STEP until their total reaches 0.2 s: ceil(0.2 / (1000 * STEP)) = 210.
    calls = []
    clock = FakeClock()
    m = fake_timer(clock).blocked_autorange(callback=lambda number, t: calls.append((number, t)), min_run_time=0.2)
    assert m.number_per_run == 1000
    assert len(m.raw_times) == math.ceil(0.2 / (1000 * STEP)) == 210
    assert set(m.raw_times) == {1000 * STEP}
    assert m.median == STEP and m.iqr == 0.0
    assert calls == [(1000, 1000 * STEP)] * 210


def test_blocked_autorange_single_slow_block_is_enough():
    # One tick lasts 1 s, more than min_run_time: the block size stays 1 and one block is measured.
    clock = FakeClock(steps=(1.0,))
    m = fake_timer(clock).blocked_autorange(min_run_time=0.2)
    assert m.number_per_run == 1
    assert m.raw_times == [1.0]


def test_adaptive_autorange_stops_when_spread_is_small():
    # Block size for the 0.05 s budget: 100 runs (95 us >= 50 us). No spread, so it stops at the first block
    # count that has both more than 3 blocks and min_run_time of time: ceil(0.01 / (100 * STEP)) = 105.
    clock = FakeClock()
    m = fake_timer(clock).adaptive_autorange(min_run_time=0.01)
    assert m.number_per_run == 100
    assert len(m.raw_times) == math.ceil(0.01 / (100 * STEP))


def test_adaptive_autorange_gives_up_at_max_run_time():
    # 130 fast ticks then 70 slow (1000x) ones, repeated: a 200-tick period, so consecutive 100-run blocks hold
    # 0, 30 or 70 slow ticks and the spread never falls below 1%. Only max_run_time stops the loop.
    steps = [STEP] * 130 + [1000 * STEP] * 70
    clock = FakeClock(steps=steps)
    m = fake_timer(clock).adaptive_autorange(threshold=0.01, min_run_time=0.01, max_run_time=0.5)
    assert not m.meets_confidence(0.01)
    total = sum(m.raw_times)
    assert 0.5 < total < 0.5 + max(m.raw_times) + 1e-9  # stopped by the first block past max_run_time


def test_every_clock_reading_is_preceded_by_a_device_synchronisation(monkeypatch):
    calls = []
    monkeypatch.setattr(timer_module, "synchronize_device", lambda: calls.append(None))
    clock = FakeClock()
    fake_timer(clock).timeit(number=100)
    assert len(calls) == 4  # start and stop of the warm-up block and of the timed block


def _thread_counts():
    """(ember's intra-op threads, {threadpoolctl API: threads})."""
    pools = {info["internal_api"]: info["num_threads"] for info in threadpoolctl.threadpool_info()}
    return ember.get_num_threads(), pools


@pytest.fixture
def two_threads():
    """Start every test from 2 threads everywhere (and put back what was there)."""
    previous = ember.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=2):
        ember.set_num_threads(2)
        yield
        ember.set_num_threads(previous)


@pytest.mark.parametrize("num_threads", [1, 3])
@pytest.mark.parametrize("method", ["timeit", "blocked_autorange", "adaptive_autorange"])
def test_num_threads_is_applied_during_the_measurement_and_restored(two_threads, num_threads, method):
    seen = []
    timer = Timer("seen.append(counts())", globals={"seen": seen, "counts": _thread_counts}, num_threads=num_threads)
    before = _thread_counts()
    kwargs = {"timeit": {"number": 3}, "blocked_autorange": {"min_run_time": 1e-3}}.get(
        method, {"min_run_time": 1e-3, "max_run_time": 1e-2}
    )
    getattr(timer, method)(**kwargs)
    assert seen, "the statement never ran"
    for ember_threads, pools in seen:
        assert ember_threads == num_threads
        assert pools and set(pools.values()) == {num_threads}, pools  # numpy's BLAS (and OpenMP) too
    assert _thread_counts() == before
    assert before[0] == 2


def test_num_threads_restored_when_the_statement_raises(two_threads):
    before = _thread_counts()
    with pytest.raises(ZeroDivisionError):
        Timer("1 / 0", num_threads=1).timeit(number=1)
    assert _thread_counts() == before


def test_setup_runs_once_and_ember_is_a_global():
    log = []
    timer = Timer("x + x", setup="log.append(1); x = ember.ones(3)", globals={"log": log})
    m = timer.timeit(number=10)
    assert log == [1, 1]  # once for the warm-up block, once for the timed block (as timeit does)
    assert m.median > 0


def test_statement_is_dedented_and_recorded():
    timer = Timer(
        """
        y = 1
        y += 1
        """,
        label="lbl",
        sub_label="sub",
        description="desc",
        env="env",
        num_threads=2,
    )
    m = timer.timeit(number=2)
    assert m.stmt == "y = 1\ny += 1"
    assert (m.label, m.sub_label, m.description, m.env, m.num_threads) == ("lbl", "sub", "desc", "env", 2)


def test_repeat_and_autorange_point_to_blocked_autorange():
    timer = Timer()
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        timer.repeat()
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        timer.autorange()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"stmt": lambda: None}, ValueError, "only a `str` stmt"),
        ({"global_setup": "#include <x>"}, ValueError, "global_setup is C\\+\\+ only"),
        ({"language": "fortran"}, ValueError, "Invalid language `fortran`"),
        ({"language": "c++"}, NotImplementedError, "c\\+\\+"),
        ({"language": Language.CPP}, NotImplementedError, "c\\+\\+"),
        ({"num_threads": 0}, ValueError, "num_threads must be a positive integer, got 0"),
        ({"num_threads": 1.5}, ValueError, "num_threads must be a positive integer, got 1.5"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        Timer(**kwargs)


def test_python_language_spellings():
    for language in ("python", "py", Language.PYTHON):
        assert Timer("pass", language=language).timeit(number=1).number_per_run == 1
