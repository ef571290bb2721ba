"""The model suite at three batch sizes through ``ember.compile``: dynamic-shape kernels end to end.

For each model of ``benchmarks/models`` (eval mode, so dropout draws nothing), one training step
(forward, the suite's loss, backward) at batch sizes 2, 3 and 5, compiled and eager; prints whether the
loss and gradients agree and how many graphs compiled: ``static=1 dynamic=1`` is the first size, then
one compile with symbolic sizes that serves the rest (issue 27). A ``fallback`` names why a graph could
not be compiled with symbolic sizes. ``actor_critic`` samples actions in its forward (compiled and eager
draw differently): its comparison is not meaningful.

Run: ``python benchmarks/dynamic_models_sweep.py [model names...]``.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))

BATCHES = (2, 3, 5)


def _relative(a, b):
    return float((a - b).abs().max()) / (float(b.abs().max()) + 1e-6)


def sweep(spec, scale):
    """``(results, (static, dynamic, fallback) compilations, seconds)`` for one model."""
    import ember
    from ember._inductor import metrics

    kw = scale
    ember.manual_seed(0)
    model = spec.build(ember, **kw)
    model.eval()
    eager = copy.deepcopy(model)
    ember._dynamo.reset()
    compiled = ember.compile(model)
    kinds = ("static", "dynamic", "fallback")
    before = [metrics.compilation_count(k) for k in kinds]
    results = []
    start = time.perf_counter()
    for b in BATCHES:
        inputs = spec.inputs(ember, np.random.default_rng(b), "cpu", **{**kw, "batch": b})
        loss = spec.loss(ember, compiled(*inputs), inputs)
        ref = spec.loss(ember, eager(*inputs), inputs)
        loss.backward()
        ref.backward()
        err = _relative(loss.detach(), ref.detach())
        gerr = max((_relative(p.grad, q.grad) for p, q in zip(model.parameters(), eager.parameters())
                    if q.grad is not None), default=0.0)
        model.zero_grad()
        eager.zero_grad()
        results.append(f"b{b}:" + ("ok" if err < 1e-3 and gerr < 1e-2 else f"BAD(loss {err:.1e}, grad {gerr:.1e})"))
    counts = tuple(metrics.compilation_count(k) - n for k, n in zip(kinds, before))
    return results, counts, time.perf_counter() - start


def main():
    from registry import load_all, sizes

    import ember
    import ember._inductor.dynamic_compile as dynamic_compile

    ember.set_num_threads(1)
    models = load_all()
    for name in sys.argv[1:] or list(models):
        spec = models[name]
        dynamic_compile.last_fallback_reason = None
        try:
            results, (static, dynamic, fallback), seconds = sweep(spec, sizes(spec, "cpu"))
        except Exception as exc:  # noqa: BLE001 - report and go on with the next model
            print(f"{name:22} error: {type(exc).__name__}: {str(exc)[:150]}", flush=True)
            continue
        reason = dynamic_compile.last_fallback_reason if fallback else ""
        print(f"{name:22} {' '.join(results):30} static={static} dynamic={dynamic} fallback={fallback} "
              f"{seconds:5.1f}s {reason or ''}", flush=True)


if __name__ == "__main__":
    main()
