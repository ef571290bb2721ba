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

# Run by each child: the import's wall time, as one JSON line.
_CHILD = """
import json, time
start = time.perf_counter()
import {module}
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds}}))
"""


def _child_env():
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # cached bytecode, as after any pip install
    return env


def _run_child(code):
    """The JSON line that ``code`` prints last, run in a new interpreter.

    Raises:
        RuntimeError: if the child fails, with its stderr.
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_child_env(), timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"a fresh Python process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def import_in_fresh_process(module):
    """The seconds ``import module`` took in a new interpreter."""
    return _run_child(_CHILD.format(module=module))["seconds"]


def median_import_seconds(module, repeats):
    """The median over ``repeats`` fresh processes of ``import module``'s time (after one untimed process)."""
    import_in_fresh_process(module)
    return statistics.median(import_in_fresh_process(module) for _ in range(repeats))


# Run once by the setup: what the row's `import ember` includes.
_CHECK = """
import json, sys
import ember
from ember._entry_points import entry_points
extensions = [point.value for point in entry_points("ember.extensions")]
print(json.dumps({"extensions": extensions, "loaded": ember._extensions.loaded_extensions(),
                  "ml_dtypes": "ml_dtypes" in sys.modules}))
"""


def _import_setup():
    # the row means "ember with every installed extension, without ml_dtypes": check both once
    found = _run_child(_CHECK)
    if not {"ember.autograd", "ember.fx"} <= set(found["extensions"]):
        raise RuntimeError(f"ember-autograd and ember-fx should be installed (extensions: {found['extensions']})")
    if sorted(found["extensions"]) != sorted(found["loaded"]):
        raise RuntimeError(f"`import ember` loaded {found['loaded']} of the extensions {found['extensions']}")
    if found["ml_dtypes"]:
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
