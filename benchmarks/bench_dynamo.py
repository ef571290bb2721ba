"""ember-dynamo against PyTorch's dynamo: the cost of a cache hit, and the time to capture a GPT.

* ``dynamo_guard_hit_10op``: calling a compiled 10-op function of small tensors (8 floats) whose
  cache hits, with a backend that runs nothing (it returns the outputs seen at capture): what is
  timed is the compiled-call machinery alone - binding the arguments, the guard check, reading the
  graph inputs, building the result. ``torch.compile`` gets the same backend.
* ``dynamo_guard_check_10op``: the guard check of that function's cache entry alone (ember's
  generated check function against PyTorch's C++ guard manager, called from Python).
* ``dynamo_hit_10op_eager_backend``: the same call with the ``"eager"`` backend on both sides (the
  graph's ten kernels run too), and with the default ``"inductor"`` backend on both sides.
* ``dynamo_capture_gpt_tiny``: capture (tracing) time of the TINY GPT of ``gpt_model.py``
  (forward + loss, ``fullgraph=True``, ``"eager"`` backend): the first call after ``reset()`` minus
  one steady call, the minimum over a few repeats, next to ``torch.compile``'s (dynamo's) time for
  the same model.
"""

from __future__ import annotations

import time

import numpy as np
from harness import NotRun, Workload, import_torch

SMALL = 8
REPEATS = 5


def _ten_ops(x, y):
    a = x + y
    b = a * x
    c = b - y
    d = c.sin()
    e = d.cos()
    f = e * 2.0
    g = f + 1.0
    h = g.relu()
    i = h.exp()
    return i.sum()


def _frozen_backend(gm, example_inputs):
    """A backend that runs nothing: it returns the graph's outputs on the example inputs, every call."""
    outs = gm(*example_inputs)
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    return lambda *args: outs


def _hit_setup(backend):
    def setup():
        import ember

        gen = np.random.default_rng(0)
        arrays = [gen.standard_normal(SMALL).astype(np.float32) for _ in range(2)]
        ex, ey = (ember.from_numpy(a.copy()) for a in arrays)
        ember._dynamo.reset()
        efn = ember.compile(_ten_ops, backend=backend if backend != "frozen" else _frozen_backend, fullgraph=True)
        np.testing.assert_allclose(float(efn(ex, ey)), float(_ten_ops(ex, ey)), rtol=1e-5)
        if len(efn._cache.entries) != 1:
            raise RuntimeError("the compiled function should have one cache entry")
        fallbacks = getattr(efn._cache.entries[0].compiled, "fallbacks", None)
        if fallbacks:  # the row would time eager kernels, not the compiled graph
            raise RuntimeError(f"ember-inductor ran the graph eagerly: {fallbacks}")

        def ember_call():
            return efn(ex, ey)

        torch = import_torch()
        torch_call = None
        if torch is not None:
            tx, ty = (torch.from_numpy(a.copy()) for a in arrays)
            torch._dynamo.reset()
            tfn = torch.compile(_ten_ops, backend=backend if backend != "frozen" else _frozen_backend, fullgraph=True)
            try:
                tfn(tx, ty)
            except Exception as exc:
                torch_call = NotRun(f"torch.compile failed here: {type(exc).__name__}: {exc}")
            else:

                def torch_call():
                    return tfn(tx, ty)

        return ember_call, torch_call

    return setup


def _guard_check_setup():
    """The guard check of the 10-op function's one cache entry, alone: ember's generated function
    against PyTorch's guard manager (``guard_manager.check(f_locals)``)."""

    def setup():
        import ember

        gen = np.random.default_rng(0)
        arrays = [gen.standard_normal(SMALL).astype(np.float32) for _ in range(2)]
        ex, ey = (ember.from_numpy(a.copy()) for a in arrays)
        ember._dynamo.reset()
        efn = ember.compile(_ten_ops, backend=_frozen_backend, fullgraph=True)
        efn(ex, ey)
        (entry,) = efn._cache.entries
        frame_locals, frame_globals = efn._bind(ex, ey), efn._globals
        if not entry.check(frame_locals, frame_globals):
            raise RuntimeError("the guards of the entry should hold")

        def ember_call():
            return entry.check(frame_locals, frame_globals)

        torch = import_torch()
        torch_call = None
        if torch is not None:
            tx, ty = (torch.from_numpy(a.copy()) for a in arrays)
            torch._dynamo.reset()
            tfn = torch.compile(_ten_ops, backend=_frozen_backend, fullgraph=True)
            try:
                tfn(tx, ty)
                from torch._dynamo.eval_frame import _debug_get_cache_entry_list

                (tentry,) = _debug_get_cache_entry_list(_ten_ops.__code__)
                manager, tlocals = tentry.guard_manager, {"x": tx, "y": ty}
                if not manager.check(tlocals):
                    raise RuntimeError("PyTorch's guards should hold")
            except Exception as exc:  # a PyTorch without these internals
                torch_call = NotRun(f"PyTorch's guard manager is not reachable here: {type(exc).__name__}: {exc}")
            else:

                def torch_call():
                    return manager.check(tlocals)

        return ember_call, torch_call

    return setup


def _gpt_capture_seconds(lib, reset, quick):
    """Min over repeats of (first call after reset - one steady call) for the TINY GPT's loss."""
    from gpt_model import TINY, batch, build_gpt

    lib.manual_seed(0)
    model = build_gpt(lib, TINY)
    x, y = (lib.from_numpy(a) for a in batch(TINY))
    want = float(model(x, y)[1])
    best = float("inf")
    for _ in range(2 if quick else REPEATS):
        reset()
        compiled = lib.compile(model, backend="eager", fullgraph=True)
        start = time.perf_counter()
        _, loss = compiled(x, y)
        first = time.perf_counter() - start
        np.testing.assert_allclose(float(loss), want, rtol=1e-5)  # the capture computes the eager loss
        start = time.perf_counter()
        compiled(x, y)
        steady = time.perf_counter() - start
        best = min(best, first - steady)
    return best


def _capture_setup():
    def setup():
        import ember

        def ember_call(quick):
            return _gpt_capture_seconds(ember, ember._dynamo.reset, quick)

        torch = import_torch()
        torch_call = None
        if torch is not None:

            def torch_call(quick):
                return _gpt_capture_seconds(torch, torch._dynamo.reset, quick)

        return ember_call, torch_call

    return setup


WORKLOADS = [
    Workload(
        "dynamo_guard_hit_10op",
        _hit_setup("frozen"),
        threads=1,
        description="call of a compiled 10-op function of two 8-float tensors whose cache hits, backend running "
        "nothing (binding + guards + inputs + result): ember.compile vs torch.compile",
    ),
    Workload(
        "dynamo_guard_check_10op",
        _guard_check_setup(),
        threads=1,
        description="the guard check alone of that function's cache entry (two tensors, grad mode): ember's "
        "generated function vs PyTorch's guard manager",
    ),
    Workload(
        "dynamo_hit_10op_eager_backend",
        _hit_setup("eager"),
        threads=1,
        description="the same call with the 'eager' backend (the ten kernels run): ember.compile vs torch.compile",
    ),
    Workload(
        "dynamo_hit_10op_inductor",
        _hit_setup("inductor"),
        threads=1,
        description="the same call with the default backend (ember-inductor's compiled C++ vs PyTorch's "
        "Inductor): ember.compile vs torch.compile",
    ),
    Workload(
        "dynamo_capture_gpt_tiny",
        _capture_setup(),
        threads=1,
        description="capture time of the TINY GPT's forward + loss (first call after reset - a steady call, "
        "fullgraph, 'eager' backend): ember-dynamo vs PyTorch's dynamo",
        self_timed=True,
    ),
]
