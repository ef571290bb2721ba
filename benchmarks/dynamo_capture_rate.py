"""The capture rate of ember-dynamo over its corpus: ops captured in graphs / ops run (issue 26, Checks).

For every entry of ``packages/dynamo/tests/corpus`` (realistic functions and modules, some meant to
graph-break), two calls on the same seeded inputs:

* eagerly, under a dispatch mode that counts the registry ops the call runs (the denominator);
* through ``ember.compile(entry, backend=<counting backend>)``: the backend is a user callable that runs
  the captured graph as it is and counts, on each run of a graph, the registry-op nodes it executes
  (the numerator). Ops the compiled function runs outside its graphs (at a graph break, in Python)
  are not counted.

An entry's captured count is capped at its eager count (a graph may hold an op more than eager ran, e.g.
a decomposition; that must not hide a missed op elsewhere). The table has one row per theme and the
total; ``--entries`` adds a row per entry, ``--min-rate 0.95`` exits with status 1 below that rate.

Run it with ``python benchmarks/dynamo_capture_rate.py`` (a few seconds; no PyTorch needed).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import ember
from ember.utils._python_dispatch import DispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "dynamo" / "tests"))
import corpus  # noqa: E402 - the corpus lives with ember-dynamo's tests


class CountOps(DispatchMode):
    """Counts the op calls that reach the dispatcher."""

    def __init__(self):
        self.count = 0

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def _is_registry_op(target):
    from ember._ops._registry import Op

    return isinstance(target, Op)


class CountingBackend:
    """Runs each captured graph as it is; counts graphs and the registry ops executed in them."""

    def __init__(self):
        self.graphs = 0
        self.ops_executed = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        ops = sum(1 for n in gm.graph.nodes if n.op == "call_function" and _is_registry_op(n.target))

        def run(*args):
            self.ops_executed += ops
            return gm.forward(*args)

        return run


@dataclass
class Row:
    name: str
    ops_run: int
    ops_captured: int
    graphs: int
    error: str = ""


def _call(entry, target, counter=None):
    """Call ``target`` on the entry's inputs (made first: their ops are not the call's), inside ``counter``."""
    call = entry.inputs(0)
    if entry.state is not None:
        entry.state[0]()
    ember.manual_seed(0)
    with counter if counter is not None else contextlib.nullcontext():
        return target(*call.args, **call.kwargs)


def measure(entry) -> Row:
    """Ops run eagerly and ops executed inside compiled graphs for one call of ``entry``."""
    import ember._dynamo as dynamo

    target = entry.make()
    counter = CountOps()
    # eagerly, compiled functions it calls included (their tracing would run ops on meta tensors)
    try:
        _call(entry, dynamo.disable(lambda *args, **kwargs: target(*args, **kwargs), recursive=True), counter)
    except Exception as exc:  # the entry itself fails: not a capture question, shown as an error
        return Row(entry.name, 0, 0, 0, f"eager run: {type(exc).__name__}: {exc}".splitlines()[0][:90])
    dynamo.reset()
    backend = CountingBackend()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _call(entry, ember.compile(entry.make(), backend=backend))
    except Exception as exc:  # a failure to compile counts as nothing captured, with the reason shown
        return Row(entry.name, counter.count, 0, backend.graphs, f"{type(exc).__name__}: {exc}".splitlines()[0][:90])
    finally:
        dynamo.reset()
    return Row(entry.name, counter.count, min(backend.ops_executed, counter.count), backend.graphs)


def _rate(run, captured):
    return captured / run if run else 1.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", action="store_true", help="print a row per corpus entry too")
    parser.add_argument("-k", default="", help="only entries whose name contains this text")
    parser.add_argument("--min-rate", type=float, default=None, help="exit with status 1 below this total rate")
    parser.add_argument(
        "--default-rnn-policy", action="store_true",
        help="leave nn.RNN/LSTM/GRU untraced, as ember.compile does by default (config.allow_rnn False); "
        "without it they are traced, so the rate measures what the translator can capture",
    )
    args = parser.parse_args(argv)

    from ember._dynamo import config

    with config.patch(allow_rnn=not args.default_rnn_policy):
        rows = [measure(e) for e in corpus.ENTRIES if args.k in e.name]
    print(f"recurrent layers {'run eagerly (default policy)' if args.default_rnn_policy else 'traced (allow_rnn)'}")
    by_theme = defaultdict(list)
    for row in rows:
        by_theme[row.name.split(".")[0]].append(row)

    header = f"{'theme':<18}{'entries':>8}{'ops run':>9}{'captured':>10}{'rate':>8}{'graphs':>8}{'errors':>8}"
    print(header)
    print("-" * len(header))
    for theme, group in by_theme.items():
        run, captured = sum(r.ops_run for r in group), sum(r.ops_captured for r in group)
        print(
            f"{theme:<18}{len(group):>8}{run:>9}{captured:>10}{_rate(run, captured):>8.1%}"
            f"{sum(r.graphs for r in group):>8}{sum(bool(r.error) for r in group):>8}"
        )
    run, captured = sum(r.ops_run for r in rows), sum(r.ops_captured for r in rows)
    total = _rate(run, captured)
    print("-" * len(header))
    print(
        f"{'total':<18}{len(rows):>8}{run:>9}{captured:>10}{total:>8.1%}"
        f"{sum(r.graphs for r in rows):>8}{sum(bool(r.error) for r in rows):>8}"
    )
    if args.entries:
        print()
        for r in rows:
            note = f"  {r.error}" if r.error else ""
            rate = _rate(r.ops_run, r.ops_captured)
            print(f"{r.name:<55}{r.ops_run:>6}{r.ops_captured:>6}{rate:>8.1%}{r.graphs:>4}{note}")
    if args.min_rate is not None and total < args.min_rate:
        print(f"capture rate {total:.1%} is below {args.min_rate:.1%}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
