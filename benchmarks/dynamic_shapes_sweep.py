"""Dynamic shapes in compiled kernels (issue 27): a sweep of batch sizes, ember next to PyTorch.

Two tables, both libraries in one process, threads pinned:

* **sweep**: wall time of one training step at each of 10 batch sizes, compiles included, and the
  number of compilations: ember with automatic dynamic shapes (kernels that take sizes) and with it
  off (one compile per size), ``torch.compile`` likewise;
* **steady state**: the step time at one size with the dynamic compile against the static compile of
  that size (min of interleaved repeats; the cost of sizes as kernel arguments), and torch's ratio.

Run: ``python benchmarks/dynamic_shapes_sweep.py [--threads 1] [--model mlp|encoder]``.
"""

from __future__ import annotations

import argparse
import copy
import time

BATCHES = (4, 6, 8, 10, 12, 16, 20, 24, 32, 40)


def _model(lib, kind):
    lib.manual_seed(0)
    nn = lib.nn
    if kind == "mlp":
        return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256), nn.LayerNorm(256))
    return nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0, batch_first=True)


def _input(lib, kind, batch):
    return lib.randn(batch, 256) if kind == "mlp" else lib.randn(batch, 32, 128)


def _step(model, x):
    out = model(x)
    (out * out).mean().backward()


def _sweep(lib, kind, dynamic):
    """Seconds for one step at each batch size, compiles included."""
    if lib.__name__ == "torch":
        import torch._dynamo

        torch._dynamo.reset()
        torch._dynamo.config.automatic_dynamic_shapes = dynamic
        compiled = torch.compile(_model(lib, kind))
    else:
        import ember._dynamo

        ember._dynamo.reset()
        ember._dynamo.config.automatic_dynamic_shapes = dynamic
        compiled = ember.compile(_model(lib, kind))
    start = time.perf_counter()
    for b in BATCHES:
        _step(compiled, _input(lib, kind, b))
    return time.perf_counter() - start


def _steady(lib, kind, batch=24, repeat=20):
    """(dynamic step, static step) in ms at ``batch``: min over interleaved repeats."""
    if lib.__name__ == "torch":
        import torch._dynamo as dyn
    else:
        import ember._dynamo as dyn
    dyn.reset()
    dyn.config.automatic_dynamic_shapes = True
    model = _model(lib, kind)
    dynamic = lib.compile(model)
    _step(dynamic, _input(lib, kind, 8))  # static first, then the dynamic compile
    _step(dynamic, _input(lib, kind, 12))
    static = lib.compile(copy.deepcopy(model), dynamic=False)
    x = _input(lib, kind, batch)
    for fn in (dynamic, static):
        _step(fn, x)
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for k, fn in enumerate((dynamic, static)):
            t = time.perf_counter()
            _step(fn, x)
            best[k] = min(best[k], time.perf_counter() - t)
    return best[0] * 1e3, best[1] * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", choices=("mlp", "encoder"), default="mlp")
    parser.add_argument("--skip-torch", action="store_true")
    args = parser.parse_args()

    import ember
    from ember._inductor import metrics

    ember.set_num_threads(args.threads)
    libs = [ember]
    if not args.skip_torch:
        import torch

        torch.set_num_threads(args.threads)
        libs.append(torch)
    print(f"model {args.model}, batches {BATCHES}, {args.threads} thread(s)")
    print(f"{'library':8} {'dynamic':>8} {'sweep s':>9} {'compiles':>9}")
    for lib in libs:
        for dynamic in (True, False):
            before = metrics.compilation_count()
            seconds = _sweep(lib, args.model, dynamic)
            compiles = metrics.compilation_count() - before if lib is ember else "-"
            print(f"{lib.__name__:8} {str(dynamic):>8} {seconds:9.2f} {compiles!s:>9}")
    print(f"{'library':8} {'dynamic ms':>11} {'static ms':>10} {'ratio':>6}")
    for lib in libs:
        dyn, static = _steady(lib, args.model)
        print(f"{lib.__name__:8} {dyn:11.3f} {static:10.3f} {dyn / static:6.2f}")


if __name__ == "__main__":
    main()
