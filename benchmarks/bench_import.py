"""Start-up cost: ``import ember`` against ``import torch``, each in fresh Python processes.

An import can only be timed once per process, so this workload times itself
(``Workload.self_timed``): it starts :data:`REPEATS` fresh interpreters one after the
other, each of which times its own import statement with ``time.perf_counter`` (the
interpreter's own start-up, the same for both, is left out), and reports the median.
Bytecode is cached, as on a user's machine: an untimed process runs first (writing any
missing ``.pyc`` files and warming the file cache), and ``PYTHONDONTWRITEBYTECODE`` is
removed from the children's environment. ``import ember`` includes every installed
extension distribution (ember-autograd, ember-fx), which it loads through the
``ember.extensions`` entry points; the target is at most 0.3 s on the project's 2-core
machine (issue 17).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys

from harness import Workload

#: Fresh processes per library in a full run (the reported time is their median).
REPEATS = 7
QUICK_REPEATS = 1

# Run by each child: the import's wall time, and what it brought in, as one JSON line.
_CHILD = """
import json, sys, time
start = time.perf_counter()
import {module}
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "modules": sorted(sys.modules)}}))
"""


def _child_env():
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # cached bytecode, as after any pip install
    return env


def import_in_fresh_process(module):
    """``(seconds, modules)``: the time ``import module`` took in a new interpreter, and ``sys.modules`` after.

    Raises:
        RuntimeError: if the child fails, with its stderr.
    """
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(module=module)],
        capture_output=True, text=True, env=_child_env(), timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"`import {module}` failed in a fresh process:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["seconds"], result["modules"]


def median_import_seconds(module, repeats):
    """The median over ``repeats`` fresh processes of ``import module``'s time (after one untimed process)."""
    import_in_fresh_process(module)
    return statistics.median(import_in_fresh_process(module)[0] for _ in range(repeats))


def _import_setup():
    _, modules = import_in_fresh_process("ember")
    # the row means "ember with its extensions, and without ml_dtypes": check both once
    missing = {"ember.autograd", "ember.optim", "ember.fx"}.difference(modules)
    if missing:
        raise RuntimeError(f"`import ember` did not load {sorted(missing)}: install ember-autograd and ember-fx")
    if "ml_dtypes" in modules:
        raise RuntimeError("`import ember` imported ml_dtypes, which it should leave until bfloat16 is used")

    def ember_fn(quick):
        return median_import_seconds("ember", QUICK_REPEATS if quick else REPEATS)

    def torch_fn(quick):
        return median_import_seconds("torch", QUICK_REPEATS if quick else REPEATS)

    # (PyTorch is looked up without being imported here: its import is what the row measures)
    return ember_fn, torch_fn if importlib.util.find_spec("torch") is not None else None


WORKLOADS = [
    Workload(
        "import_ember",
        _import_setup,
        threads=1,
        description=(
            f"`import ember` (with ember-autograd and ember-fx) vs `import torch`: median of {REPEATS} fresh "
            "processes, each timing its import statement, bytecode cached"
        ),
        self_timed=True,
    ),
]
