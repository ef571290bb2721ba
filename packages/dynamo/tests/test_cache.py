"""The cache and recompiles, with a stand-in translator (fake_capture.py) so only the runtime is tested.

Each guard-relevant change of a call makes exactly one recompile, whose reason names the guard;
unchanged calls never recompile; the size limit warns once and runs eagerly; reset forgets.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from fake_capture import FakeTranslator

import ember
import ember._dynamo as dynamo
from ember._dynamo import config, frames
from ember._dynamo.guards import Guard, GuardKind
from ember._dynamo.source import GlobalSource

SCALE = 2.0


def fn(x, y, n=2):
    return (x + y) * n


def close(a, b):
    np.testing.assert_allclose(np.asarray(a.detach()), np.asarray(b.detach()), rtol=1e-6)


def test_hits_never_recompile(fake):
    f = ember.compile(fn, backend="eager")
    x, y = ember.randn(3), ember.randn(3)
    for _ in range(5):
        close(f(x, y), fn(x, y))
    close(f(ember.ones(3), ember.zeros(3)), fn(ember.ones(3), ember.zeros(3)))  # new values, same specs
    assert fake.calls == 1


@pytest.mark.parametrize(
    ("first", "second", "reason"),
    [
        ((ember.randn(3), ember.randn(3)), (ember.randn(3).double(), ember.randn(3)), "dtype mismatch"),
        ((ember.randn(3), ember.randn(3)), (ember.randn(3), ember.randn(3), 3), "L['n'] == 2 failed: got 3"),
        ((ember.randn(3), ember.randn(3)), (ember.randn(3), 1.5), "type(L['y']) changed"),
        (
            (ember.randn(3), ember.randn(3)),
            (ember.randn(3).requires_grad_(), ember.randn(3)),
            "requires_grad mismatch",
        ),
    ],
    ids=["dtype", "constant", "type", "requires_grad"],
)
def test_one_change_makes_exactly_one_recompile_with_its_reason(fake, first, second, reason):
    f = ember.compile(fn, backend="eager")
    f(*first)
    assert fake.calls == 1
    for _ in range(3):
        close(f(*second), fn(*second))
    assert fake.calls == 2
    assert len(f._cache.recompile_reasons) == 1 and reason in f._cache.recompile_reasons[0]
    f(*first)  # the first entry still matches
    assert fake.calls == 2


def test_grad_mode_change_recompiles_once(fake):
    f = ember.compile(fn, backend="eager")
    x, y = ember.randn(3), ember.randn(3)
    f(x, y)
    with ember.no_grad():
        f(x, y)
        f(x, y)
    f(x, y)
    assert fake.calls == 2 and "grad mode" in f._cache.recompile_reasons[0]


def test_a_global_guard_recompiles_when_the_global_changes(monkeypatch, fake):
    fake.extra_guards.append(lambda frame_locals: Guard(GlobalSource("SCALE"), GuardKind.EQUALS_MATCH, SCALE))
    f = ember.compile(fn, backend="eager")
    x = ember.randn(3)
    f(x, x)
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    f(x, x)
    f(x, x)
    assert fake.calls == 2 and "G['SCALE'] == 2.0 failed: got 3.0" in f._cache.recompile_reasons[0]


def test_automatic_dynamic_after_a_size_recompile(fake):
    f = ember.compile(fn, backend="eager")
    f(ember.randn(3), ember.randn(3))
    assert fake.configs[0].dynamic_dims == {}
    f(ember.randn(4), ember.randn(4))  # a size-only change: the next capture makes dim 0 dynamic
    assert fake.configs[1].dynamic_dims == {"L['x']": frozenset({0}), "L['y']": frozenset({0})}
    assert "size mismatch at index 0" in f._cache.recompile_reasons[0]
    for n in (5, 6, 7):  # the fake translator honours the dims: no more recompiles
        close(f(ember.ones(n), ember.ones(n)), fn(ember.ones(n), ember.ones(n)))
    assert fake.calls == 2


def test_dynamic_false_keeps_one_graph_per_size(fake):
    f = ember.compile(fn, backend="eager", dynamic=False)
    for n in (3, 4, 5):
        f(ember.randn(n), ember.randn(n))
    assert fake.calls == 3 and all(c.dynamic_dims == {} for c in fake.configs)
    assert all(c.dynamic is False for c in fake.configs)


def test_mark_dynamic_is_passed_to_the_capture(fake):
    x = ember.randn(3, 2)
    dynamo.mark_dynamic(x, 0)
    f = ember.compile(fn, backend="eager")
    f(x, ember.randn(3, 2))
    assert fake.configs[0].dynamic_dims == {"L['x']": frozenset({0})}
    with pytest.raises(IndexError, match="out of range"):
        dynamo.mark_dynamic(x, 2)
    dynamo.mark_static(x)
    assert x._dynamo_dynamic_indices == set()


def test_cache_size_limit_warns_once_then_runs_eagerly(fake):
    f = ember.compile(fn, backend="eager")
    x = ember.randn(2)
    with config.patch(cache_size_limit=2), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(6):
            close(f(x, x, n), fn(x, x, n))  # each n is a new constant: a new entry until the limit
        assert fake.calls == 2
        assert len([w for w in caught if "cache_size_limit" in str(w.message)]) == 1
        close(f(x, x, 0), fn(x, x, 0))  # entries made before the limit still hit
        assert fake.calls == 2


def test_reset_forgets_every_entry(fake):
    f = ember.compile(fn, backend="eager")
    x = ember.randn(2)
    f(x, x)
    dynamo.reset()
    assert f._cache.entries == []
    f(x, x)
    assert fake.calls == 2


def test_most_recent_hit_is_checked_first(fake):
    f = ember.compile(fn, backend="eager")
    a, b = ember.randn(2), ember.randn(3)
    f(a, a)
    f(b, b, 3)
    first = f._cache.entries[0]
    f(a, a)  # hits the older entry: it moves to the front
    assert f._cache.entries[0] is not first
    f._cache.lookup(f._settings, f._bind(a, a), {})
    assert len(f._cache.entries) == 2 and fake.calls == 2


def test_two_compiles_of_one_function_keep_separate_entries(fake):
    f1 = ember.compile(fn, backend="eager")
    f2 = ember.compile(fn, backend="eager")
    x = ember.randn(2)
    f1(x, x)
    f2(x, x)
    assert fake.calls == 2 and f1._cache is f2._cache and len(f1._cache.entries) == 2


def test_unsupported_frame_runs_eagerly_until_reset(monkeypatch):
    from ember._dynamo.exc import Unsupported

    calls = []

    def refuse(fn, frame_locals, config):
        calls.append(1)
        raise Unsupported("the stand-in refuses")

    monkeypatch.setattr(frames, "_translate", refuse)
    dynamo.reset()
    f = ember.compile(fn, backend="eager")
    x = ember.randn(2)
    close(f(x, x), fn(x, x))
    close(f(x, x), fn(x, x))
    assert len(calls) == 1 and f._cache.eager_reason == "the stand-in refuses"
    full = ember.compile(fn, backend="eager", fullgraph=True)
    dynamo.reset()
    with pytest.raises(Unsupported, match="refuses"):
        full(x, x)
    dynamo.reset()


def test_side_effects_are_applied_after_the_graph(fake, monkeypatch):
    applied = []

    class Effect:
        def apply(self, outs, frame_locals, frame_globals):
            applied.append((len(outs), sorted(frame_locals)))

    original = FakeTranslator.__call__

    def with_effect(self, fn, frame_locals, config):
        captured = original(self, fn, frame_locals, config)
        captured.side_effects = [Effect()]
        return captured

    monkeypatch.setattr(FakeTranslator, "__call__", with_effect)
    f = ember.compile(fn, backend="eager")
    x = ember.randn(2)
    f(x, x)
    f(x, x)
    assert applied == [(1, ["n", "x", "y"])] * 2


def test_guards_of_a_fresh_capture_must_hold_on_its_frame(fake):
    fake.extra_guards.append(Guard(GlobalSource("SCALE"), GuardKind.EQUALS_MATCH, 99.0))
    f = ember.compile(fn, backend="eager")
    with pytest.raises(RuntimeError, match="internal error.*G\\['SCALE'\\] == 99.0 failed"):
        f(ember.randn(2), ember.randn(2))


def test_closures_are_read_at_call_time(fake):
    factor = 3

    def g(x):
        return x * factor

    f = ember.compile(g, backend="eager")
    assert f._bind(ember.ones(1))["factor"] == 3
    close(f(ember.ones(2)), ember.full((2,), 3.0))


def test_an_internal_capture_error_raises_unless_suppressed(monkeypatch):
    def broken(fn, frame_locals, config):
        raise KeyError("translator bug")

    monkeypatch.setattr(frames, "_translate", broken)
    dynamo.reset()
    f = ember.compile(fn, backend="eager")
    x = ember.randn(2)
    with pytest.raises(KeyError, match="translator bug"):
        f(x, x)
    with config.patch(suppress_errors=True), pytest.warns(UserWarning, match="running it eagerly"):
        close(f(x, x), fn(x, x))
    assert "internal error" in f._cache.eager_reason
    dynamo.reset()
