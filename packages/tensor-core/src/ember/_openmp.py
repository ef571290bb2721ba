"""How long ember's idle OpenMP threads busy-wait, set while ``ember._C`` (and its libgomp) loads.

After each parallel region, GCC's OpenMP runtime (libgomp) keeps its worker threads spinning for
``GOMP_SPINCOUNT`` iterations (300,000 by default) before they sleep, in case another region comes
at once. On an AMD EPYC that is 4-8 ms of a core per region, measured as the process's CPU time
while it sleeps after one ``x + x``. ember's parallel regions are separated by tens of microseconds
of Python (dispatch, autograd), so its workers never went to sleep during a training step: they
held the second core and, on a busy 2-core machine, the demo's step on 2 threads took 2-3x the
time of 1 thread (PyTorch's runtime spins the same way). With a short spin (1,000 iterations,
0.1 ms of idle CPU per region) the step runs about as fast as with ``OMP_WAIT_POLICY=passive``.

libgomp reads its settings once, when it is loaded, so :func:`short_spin_waits` sets
``GOMP_SPINCOUNT`` around the import of ``ember._C`` and removes it afterwards (child processes
don't inherit it). One libgomp serves the whole process (PyTorch's wheel ships a copy with the
same soname, and the loader reuses whichever came first): imported before PyTorch, ember's setting
holds for PyTorch's threads too; imported after it, ember finds libgomp loaded with the default
and the setting has no effect. Users who set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` themselves
keep their choice.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["SPIN_COUNT", "short_spin_waits"]

#: Iterations an idle ember OpenMP thread spins before it sleeps (libgomp's default: 300,000).
SPIN_COUNT = "1000"
_USER_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


@contextlib.contextmanager
def short_spin_waits():
    """Within the block, ``GOMP_SPINCOUNT`` is :data:`SPIN_COUNT` unless the user set a wait policy."""
    if any(name in os.environ for name in _USER_SETTINGS):
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        yield
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)
