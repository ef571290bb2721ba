"""The capture corpus (issue 26, Checks): every entry compiled equals the same entry run eagerly.

For each of the corpus's entries (``corpus/``: functions and modules grouped by theme):

* run eagerly twice, it is deterministic (so a difference below is the compiler's);
* ``ember.compile(entry, backend="eager")`` and ``backend="aot_eager"`` give the eager result, leave the
  arguments, the global state and the module state as eager leaves them, return the same objects where
  eager returns an argument, and, for entries that train, give the same gradients;
* with ``dynamic=True`` (symbolic sizes) too, the values are eager's, and on inputs of other sizes after
  the first call (automatic dynamic shapes);
* a second identical call compiles nothing again, and calls on new inputs (other seeds: other branches at
  a break) still equal eager;
* ``ember._dynamo.explain`` counts the graph breaks the entry is meant to have (its metadata), each break
  reason names the cause, and graphs are captured around the breaks; ``fullgraph=True`` captures an entry
  meant to be one graph (the "eager" backend's run above), and raises with the reason on an entry meant to
  break;
* entries with a NumPy oracle: the eager value equals NumPy's (the oracle checks the corpus itself);
* over the whole corpus, more than 95% of the ops run execute inside graphs
  (``benchmarks/dynamo_capture_rate.py``), recurrent layers traced (``config.allow_rnn``).

Entries that fail for a known gap of ember-dynamo are listed in ``corpus/known_gaps.py`` with the reason
(strict xfails: when the gap is fixed the test says so; ``EMBER_CORPUS_IGNORE_GAPS=1`` runs them unmarked).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ember

dynamo = pytest.importorskip("ember._dynamo", reason="ember-dynamo is not installed")

# the corpus compiles a helper when imported: after the skip above
from corpus import ENTRIES  # noqa: E402
from corpus._run import assert_same, assert_same_outcome, reported_errors, run  # noqa: E402
from corpus.known_gaps import KNOWN_GAPS, KNOWN_GAPS_BY_VERSION  # noqa: E402

from ember._dynamo.testing import CompileCounter  # noqa: E402

BACKENDS = ("eager", "aot_eager")


@pytest.fixture(autouse=True)
def _trace_recurrent_layers():
    """The corpus measures what the translator can capture: recurrent layers, which ember.compile
    leaves eager by default as PyTorch does (``config.allow_rnn``), are traced here
    (``test_training.py`` tests the default)."""
    from ember._dynamo import config

    with config.patch(allow_rnn=True):
        yield

_GAPS = {**KNOWN_GAPS, **KNOWN_GAPS_BY_VERSION.get(f"{sys.version_info[0]}.{sys.version_info[1]}", {})}
if os.environ.get("EMBER_CORPUS_IGNORE_GAPS"):  # run every entry unmarked, to see which gaps remain
    _GAPS = {}


def _params(test, entries, backends=(None,)):
    params = []
    for entry in entries:
        for backend in backends:
            reason = _GAPS.get((test, entry.name, backend)) or _GAPS.get((test, entry.name, None))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            values = (entry,) if backend is None else (entry, backend)
            ident = entry.name if backend is None else f"{entry.name}-{backend}"
            params.append(pytest.param(*values, id=ident, marks=marks))
    return params


def _compile(backend, **options):
    return lambda target: ember.compile(target, backend=backend, **options)


def test_the_corpus_is_large_and_names_are_unique():
    names = [e.name for e in ENTRIES]
    assert len(names) >= 150
    assert len(set(names)) == len(names)
    assert sum(e.is_module for e in ENTRIES) >= 30
    assert sum(e.breaks > 0 for e in ENTRIES) >= 10


@pytest.mark.parametrize("entry", _params("test_eager_is_deterministic", ENTRIES))
def test_eager_is_deterministic(entry):
    assert_same_outcome(run(entry), run(entry), rtol=0, atol=0)


@pytest.mark.parametrize("entry", _params("test_eager_matches_numpy", [e for e in ENTRIES if e.numpy]))
def test_eager_matches_numpy(entry):
    call = entry.inputs(0)
    expected = entry.numpy(*[a.numpy() if isinstance(a, ember.Tensor) else a for a in call.args])
    np.testing.assert_allclose(entry.make()(*call.args, **call.kwargs).numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("entry, backend", _params("test_compiled_equals_eager", ENTRIES, BACKENDS))
def test_compiled_equals_eager(fresh_caches, entry, backend):
    """With the "eager" backend an entry meant to be one graph compiles with ``fullgraph=True`` (an error if it
    breaks); with "aot_eager", with ``fullgraph=False``."""
    expected = run(entry)
    with reported_errors():
        actual = run(entry, wrap=_compile(backend, fullgraph=backend == "eager" and not entry.breaks))
    assert_same_outcome(expected, actual, *entry.tol)


@pytest.mark.parametrize("entry", _params("test_dynamic_shapes_equal_eager", ENTRIES))
def test_dynamic_shapes_equal_eager(fresh_caches, entry):
    """``dynamic=True``: every size symbolic in the graph (shape-dependent Python decisions become guards);
    the values, state and gradients are still eager's."""
    expected = run(entry)
    with reported_errors():
        actual = run(entry, wrap=_compile("eager", dynamic=True))
    assert_same_outcome(expected, actual, *entry.tol)


@pytest.mark.parametrize("entry", _params("test_later_calls", ENTRIES))
def test_later_calls(fresh_caches, entry):
    """Calls on the same inputs again (new tensors of the same kind), then on other values (seeds 1 and 2),
    next to an eager twin called the same way (a module's state carries over on both sides): the second call
    compiles nothing again (unless the entry changes what its guards read, as its metadata says), and every
    call gives eager's values (a value baked into a graph, or a branch at a break taken wrongly, shows here)."""
    backend = CompileCounter()  # counts the graphs it is given, runs each as captured
    eager, compiled = entry.make(), ember.compile(entry.make(), backend=backend)
    graphs = []
    for seed in (0, 0, 1, 2):
        results = []
        for target in (eager, compiled):
            call = entry.inputs(seed)
            if entry.state is not None:
                entry.state[0]()
            ember.manual_seed(seed)
            with ember.no_grad(), reported_errors():
                results.append(target(*call.args, **call.kwargs))
        assert_same(*results, *entry.tol, path=f"result of call {len(graphs)} (seed {seed})")
        graphs.append(backend.frame_count)
    again = graphs[1] - graphs[0]
    assert again == entry.recompiles, f"{again} graph(s) compiled again on an identical call"


@pytest.mark.parametrize("entry", _params("test_other_sizes_after_the_first_call", ENTRIES))
def test_other_sizes_after_the_first_call(fresh_caches, entry):
    """The inputs grow by one and by two rows after the first call: the recompiles (automatic dynamic shapes
    with ``dynamic=None``) give eager's values. Entries whose inputs must keep their sizes are skipped."""
    eager, compiled = entry.make(), ember.compile(entry.make(), backend="eager")
    for grow in (0, 1, 2):
        call = entry.inputs(0, grow)
        if entry.state is not None:
            entry.state[0]()
        try:
            with ember.no_grad():
                expected = eager(*call.args, **call.kwargs)
        except Exception as exc:
            if not grow:
                raise
            pytest.skip(f"the entry's inputs do not take other sizes ({type(exc).__name__} eagerly)")
        call = entry.inputs(0, grow)
        if entry.state is not None:
            entry.state[0]()
        with ember.no_grad(), reported_errors():
            actual = compiled(*call.args, **call.kwargs)
        assert_same(expected, actual, *entry.tol, path=f"result with inputs grown by {grow}")


def _explain(entry):
    call = entry.inputs(0)
    if entry.state is not None:
        entry.state[0]()
    with reported_errors():
        return dynamo.explain(entry.make())(*call.args, **call.kwargs)


def _reason_text(reason):
    return reason if isinstance(reason, str) else getattr(reason, "reason", str(reason))


@pytest.mark.parametrize("entry", _params("test_graph_breaks_as_meant", ENTRIES))
def test_graph_breaks_as_meant(fresh_caches, entry):
    out = _explain(entry)
    reasons = [_reason_text(r) for r in out.break_reasons]
    assert out.graph_break_count == entry.breaks, f"breaks: {reasons}"
    if entry.breaks:  # the tensor work around the break is captured, not the whole frame run eagerly
        assert out.graph_count >= 1, f"no graph captured around the breaks: {reasons}"
        assert all(r.graph_break for r in out.break_reasons), f"a frame ran eagerly as a whole: {reasons}"
    else:
        assert out.graph_count <= 1
    for text in reasons:
        assert entry.reason.lower() in text.lower(), text


@pytest.mark.parametrize("entry", _params("test_fullgraph_refuses_a_break", [e for e in ENTRIES if e.breaks]))
def test_fullgraph_refuses_a_break(fresh_caches, entry):
    call = entry.inputs(0)
    compiled = ember.compile(entry.make(), backend="eager", fullgraph=True)
    with pytest.raises(Exception) as info:
        compiled(*call.args, **call.kwargs)
    assert type(info.value).__module__.startswith("ember._dynamo"), repr(info.value)
    assert entry.reason.lower() in str(info.value).lower()


def _capture_rate_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "dynamo_capture_rate.py"
    spec = importlib.util.spec_from_file_location("dynamo_capture_rate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_capture_rate_over_the_corpus_is_above_95_percent(capsys):
    """benchmarks/dynamo_capture_rate.py: ops executed inside graphs / ops run eagerly, over every entry."""
    script = _capture_rate_script()
    rows = [script.measure(entry) for entry in ENTRIES]
    capsys.readouterr()  # the entries that print
    errors = [f"{r.name}: {r.error}" for r in rows if r.error]
    assert not errors, errors
    run, captured = sum(r.ops_run for r in rows), sum(r.ops_captured for r in rows)
    assert run > 1000  # the corpus runs real tensor work
    assert captured / run > 0.95, f"capture rate {captured / run:.1%}"
