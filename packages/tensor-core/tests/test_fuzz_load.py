"""A few seconds of ``fuzz/run.py`` over every fuzz target, so that ``nox -s tests`` runs the fuzzer briefly.

``nox -s fuzz`` runs it for longer. Each target gets a fixed seed and a bounded number of
inputs, so a run is deterministic (its inputs are the same every time) and bounded in time.
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sys
from pathlib import Path

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[3] / "fuzz"

pytestmark = pytest.mark.skipif(
    not (FUZZ_DIR / "run.py").is_file(), reason="fuzz/ is not in this checkout (tests run from an installed wheel)"
)


def _runner():
    spec = importlib.util.spec_from_file_location("ember_fuzz_run", FUZZ_DIR / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _hard_time_limit(seconds):
    """Fail with TimeoutError after ``seconds`` of wall time; the runner then kills its worker."""

    def expire(signum, frame):
        raise TimeoutError(f"the fuzz run took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _targets():
    if not (FUZZ_DIR / "targets").is_dir():
        return []
    return sorted(p.stem for p in (FUZZ_DIR / "targets").glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("target", _targets())
def test_fuzz_target_briefly(target):
    runner = _runner()
    try:
        runner.import_target(target)
    except ImportError as exc:
        pytest.skip(f"fuzz target {target!r} needs a distribution that is not installed: {exc}")
    # The runner bounds each input, but a worker blocked without using CPU is only judged stuck
    # after many minutes: this bounds the whole test.
    with _hard_time_limit(240):
        results = runner.run(8.0, targets=[target], seed=18, max_inputs=400, time_limit=10.0, quiet=True)
    inputs, failing, messages = results[target]
    assert failing == 0, "\n".join(messages)
    assert inputs > 0, f"the fuzzer ran no input of target {target!r}"


def test_mutations_are_deterministic():
    runner = _runner()
    import random

    seed = runner.join_file(
        {"__metadata__": {"ember.format_version": "1", "ember.structure": '{"root":[1,2]}', "ember.header_sha256": ""}},
        b"",
    )
    first = [runner.mutate(seed, random.Random(5), [seed], None) for _ in range(20)]
    second = [runner.mutate(seed, random.Random(5), [seed], None) for _ in range(20)]
    assert first == second


def test_structure_mutations_recompute_the_checksum():
    runner = _runner()
    import io
    import random

    import ember

    buffer = io.BytesIO()
    ember.save({"w": ember.ones(2), "n": [1, 2, 3]}, buffer)
    data = buffer.getvalue()
    header = runner.split_file(data)[0]
    assert runner.canonical_checksum(header) == header["__metadata__"]["ember.header_sha256"]
    rng = random.Random(3)
    checked = 0
    for _ in range(200):
        mutated = runner.mutate_structure(data, rng)
        parts = runner.split_file(mutated) if mutated else None
        if parts is None:
            continue
        metadata = parts[0].get("__metadata__")
        if isinstance(metadata, dict) and "ember.header_sha256" in metadata:
            try:
                expected = runner.canonical_checksum(parts[0])
            except (TypeError, ValueError):
                continue
            checked += 1
            # Most mutants carry a correct checksum (a few are left wrong on purpose).
            checked -= metadata["ember.header_sha256"] != expected
    assert checked > 100
