"""The profiler's overhead on the 100-small-op autograd chain (bench_autograd's), issue 22.

* ``profiler_chain100_16_f32``: the chain forward and backward inside a profiler (ember's and
  PyTorch's, CPU activity, a fresh profile per call), for ``run.py``'s table.

Run as a script, it prints the two ratios the issue budgets, each measured in this process with
interleaved repeats (min of each):

* not profiling, now vs before the hook: the engine of the commit before the profiler
  (``--before <rev>``, loaded beside the current one) against the current engine; the
  dispatcher's non-mode path is unchanged by the hook. Target: under 5%.
* profiling vs not profiling, ember's ratio next to PyTorch's. Target: at most PyTorch's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import timeit
import types
from pathlib import Path

import numpy as np
from harness import Workload, import_torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_autograd import _Chain  # noqa: E402

_CHAIN = _Chain(100, 16)


def _profiled(lib, step):
    profile, cpu = lib.profiler.profile, lib.profiler.ProfilerActivity.CPU

    def run():
        with profile(activities=[cpu]):
            step()

    return run


def _setup():
    import ember
    import ember.nn.functional as ember_F

    arrays = _CHAIN.arrays(np.random.default_rng(0))
    ember_step, _ = _CHAIN(ember, ember_F, arrays)
    torch = import_torch()
    torch_run = None
    if torch is not None:
        torch_step, _ = _CHAIN(torch, torch.nn.functional, arrays)
        torch_run = _profiled(torch, torch_step)
    return _profiled(ember, ember_step), torch_run


WORKLOADS = [
    Workload("profiler_chain100_16_f32", _setup, threads=1,
             description="the autograd chain of 100 small ops, forward + backward, inside a CPU profiler"),
]


def _interleaved(fns, number, repeat, before_each=None):
    """min over ``repeat`` rounds of each function's time per call, the functions taking turns;
    ``before_each[i]()``, when given, runs (untimed) before each round of ``fns[i]``."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            if before_each is not None:
                before_each[i]()
            best[i] = min(best[i], timeit.timeit(fn, number=number) / number)
    return best


def _old_engine_run(rev):
    """``_GraphTask.run`` of ember-autograd's engine at git revision ``rev``, in a module of its own."""
    import ember.autograd._engine as engine

    source = subprocess.run(["git", "show", f"{rev}:packages/autograd/src/ember/autograd/_engine.py"],
                            capture_output=True, text=True, check=True, cwd=Path(__file__).parent).stdout
    module = types.ModuleType("ember.autograd._engine_before")
    module.__package__ = "ember.autograd"
    exec(compile(source, "_engine_before.py", "exec"), module.__dict__)
    return engine, module._GraphTask.run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="4f8c76a~1", help="git revision of the engine without the hook")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--number", type=int, default=20)
    options = parser.parse_args()

    import torch

    import ember

    torch.set_num_threads(1)
    arrays = _CHAIN.arrays(np.random.default_rng(0))
    ember_step, _ = _CHAIN(ember, None, arrays)
    torch_step, _ = _CHAIN(torch, None, arrays)
    engine, old_run = _old_engine_run(options.before)
    new_run = engine._GraphTask.run

    def use(run):
        def install():
            engine._GraphTask.run = run
        return install

    before, after = _interleaved([ember_step, ember_step], options.number, options.repeat,
                                 before_each=[use(old_run), use(new_run)])
    engine._GraphTask.run = new_run
    print(f"not profiling: before {before * 1e6:.1f} us, after {after * 1e6:.1f} us, ratio {after / before:.3f}")

    plain_e, prof_e, plain_t, prof_t = _interleaved(
        [ember_step, _profiled(ember, ember_step), torch_step, _profiled(torch, torch_step)],
        max(options.number // 4, 2), options.repeat)
    print(f"ember: plain {plain_e * 1e6:.1f} us, profiled {prof_e * 1e6:.1f} us, overhead x{prof_e / plain_e:.2f}")
    print(f"torch: plain {plain_t * 1e6:.1f} us, profiled {prof_t * 1e6:.1f} us, overhead x{prof_t / plain_t:.2f}")
    print(f"profiled ember / profiled torch: {prof_e / prof_t:.2f}")


if __name__ == "__main__":
    main()
