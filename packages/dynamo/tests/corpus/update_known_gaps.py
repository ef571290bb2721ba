"""Rewrite ``known_gaps.py`` from runs of test_corpus.py without its xfail marks, on one or more Pythons.

Usage (from the repository root)::

    python packages/dynamo/tests/corpus/update_known_gaps.py 3.11=.venv/bin/python \\
        3.12=/tmp/venv312/bin/python 3.13=/tmp/venv313/bin/python

Each interpreter runs ``test_corpus.py`` with ``EMBER_CORPUS_IGNORE_GAPS=1``; every failing test becomes a gap
keyed ``(test, entry, backend or None)`` with a one-line reason made from the failure (graph breaks: their
count and reasons; wrong values: where they differ). Gaps of every version go in ``KNOWN_GAPS``, the others in
``KNOWN_GAPS_BY_VERSION``. Failures from an interpreter whose ``ember._C`` lacks a function the Python code
calls (a C++ change not rebuilt there) are environment problems, left out and counted. Read the result
before committing it: a reason names a symptom, the owner is a guess.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_FILE = HERE.parent / "test_corpus.py"
STALE_BUILD = "module 'ember._C' has no attribute"
#: Text in a failure -> who most likely owns the cause.
OWNERS = (
    ("no graph captured around the breaks", "translator/api"),
    ("BackendCompilerFailed", "inductor aot"),
    ("FOR_ITER", "translator/bytecode"),
    ("resume", "bytecode"),
)


def _owner(text):
    return next((who for key, who in OWNERS if key in text), "translator")


def _reason(test, message):
    text = " ".join(message.replace("corpus._run.CompiledRunError: ", "").partition("Traceback (most")[0].split())
    if test == "test_graph_breaks_as_meant":
        found = re.search(r"breaks: \[(.*?)\]\s*assert (\d+) == (\d+)", text)
        if found:
            text = f"{found.group(2)} graph breaks, meant {found.group(3)}: {found.group(1)}"
    elif text.startswith("AssertionError: Not equal to tolerance"):
        found = re.search(r"atol=\S+ (.*?) Mismatched elements: (\S+ / \S+)", text)
        if found:
            text = f"WRONG RESULT: compiled differs from eager in {found.group(1)} ({found.group(2)} elements)"
    elif "eager has" in text or "expected shape" in text:
        text = "WRONG RESULT: " + text
    text = re.sub(r"\s+at /\S+", "", text.replace("ember._dynamo.exc.", "").replace("ember._dynamo.backends.", ""))
    return f"{_owner(text)}: {text[:200]}"


def gaps_of(python):
    """The failing tests of test_corpus.py under ``python`` (no xfail marks), and how many were left out."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "junit.xml"
        command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", str(TEST_FILE)]
        env = dict(os.environ, EMBER_CORPUS_IGNORE_GAPS="1")
        subprocess.run([*command, f"--junitxml={report}"], env=env, stdout=subprocess.DEVNULL, check=False)
        cases = list(ET.parse(report).getroot().iter("testcase"))
    gaps, stale = {}, 0
    for case in cases:
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        if failure is None:
            continue
        message = failure.get("message") or ""
        named = re.match(r"(\w+)\[(.*)\]", case.get("name"))
        if STALE_BUILD in message or named is None:  # the environment, or a corpus-wide test: a person looks
            stale += STALE_BUILD in message
            if named is None:
                print(f"  not a per-entry test, not recorded: {case.get('name')}: {message[:120]}")
            continue
        test, entry = named.groups()
        backend = None
        for name in ("aot_eager", "eager"):
            if test == "test_compiled_equals_eager" and entry.endswith("-" + name):
                entry, backend = entry[: -len(name) - 1], name
                break
        gaps[(test, entry, backend)] = _reason(test, message)
    return gaps, stale


def _lines(gaps, indent):
    ordered = sorted(gaps, key=lambda key: (key[1], key[0], key[2] or ""))
    return [f"{indent}{key!r}: {gaps[key]!r}," for key in ordered]


def render(per_version):
    common = {k: r for k, r in next(iter(per_version.values())).items() if all(k in g for g in per_version.values())}
    lines = [
        '"""Corpus entries that fail today for a known gap of ember-dynamo (or of a stage below it), with the cause.',
        "",
        "Written by update_known_gaps.py from runs of test_corpus.py without these marks (Python "
        + ", ".join(per_version)
        + "),",
        "then read by a person. Keys are ``(test, entry, backend or None)``; test_corpus.py marks them strict xfails,",
        "so a fixed gap shows as an XPASS failure: run update_known_gaps.py again. :data:`KNOWN_GAPS` holds the gaps",
        "of every version, :data:`KNOWN_GAPS_BY_VERSION` those of one version only.",
        '"""',
        "",
        "KNOWN_GAPS: dict[tuple[str, str, str | None], str] = {",
        *_lines(common, "    "),
        "}",
        "",
        "KNOWN_GAPS_BY_VERSION: dict[str, dict[tuple[str, str, str | None], str]] = {",
    ]
    for version, gaps in per_version.items():
        lines += [
            f"    {version!r}: {{",
            *_lines({k: r for k, r in gaps.items() if k not in common}, "        "),
            "    },",
        ]
    return "\n".join([*lines, "}"]) + "\n"


def main(argv=None):
    pairs = argv if argv is not None else sys.argv[1:]
    if not pairs or any("=" not in p for p in pairs):
        raise SystemExit("usage: update_known_gaps.py VERSION=PYTHON [VERSION=PYTHON ...], e.g. 3.11=.venv/bin/python")
    per_version = {}
    for pair in pairs:
        version, python = pair.split("=", 1)
        per_version[version], stale = gaps_of(python)
        print(f"{version}: {len(per_version[version])} gaps; {stale} failures from a stale ember._C left out")
    (HERE / "known_gaps.py").write_text(render(per_version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
