"""Reductions and copies of a 4096x4096 float32 tensor against PyTorch, on 1 and 2 threads (issue 23).

sum, mean, amax, var and argmax over each dim; contiguous() of the transpose; to(bfloat16) of 16M
float32 (the ``copy_*`` rows: bench_pointwise.py may time the same conversion as a pointwise op).
Target: at most 1.0x PyTorch's time on 1 thread, and the 2-thread time at most 0.6x the 1-thread
time. Each setup checks once that both libraries give the same values before anything is timed.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch

N = 4096


def _matrix():
    return np.random.default_rng(0).standard_normal((N, N)).astype(np.float32)


def _setup(build, check):
    """A setup from ``build(lib, x) -> fn``, run for ember and torch on the same 4096x4096 matrix."""

    def setup():
        import ember

        data = _matrix()
        ember_fn = build(ember, ember.from_numpy(data))
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            torch_fn = build(torch, torch.from_numpy(data))
            check(ember_fn(), torch_fn())
        return ember_fn, torch_fn

    return setup


def _close(ours, theirs):
    theirs = theirs.float() if theirs.dtype.is_floating_point else theirs
    ours = ours.float() if ours.dtype.is_floating_point else ours
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


def _equal(ours, theirs):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def _reduction(op, dim):
    def build(lib, x):
        if op == "argmax":
            return lambda: x.argmax(dim)
        return lambda: getattr(x, op)(dim)

    return build


WORKLOADS = []
for _threads in (1, 2):
    for _op in ("sum", "mean", "amax", "var", "argmax"):
        for _dim in (0, 1):
            WORKLOADS.append(Workload(
                f"{_op}_dim{_dim}_4096x4096_f32_t{_threads}",
                _setup(_reduction(_op, _dim), _equal if _op in ("amax", "argmax") else _close),
                threads=_threads,
                description=f"x.{_op}({_dim}), x 4096x4096 float32",
                work=N * N * 4, unit="GB/s",
            ))
    WORKLOADS.append(Workload(
        f"copy_contiguous_transpose_4096x4096_f32_t{_threads}",
        _setup(lambda lib, x: (lambda: x.t().contiguous()), _equal),
        threads=_threads,
        description="x.t().contiguous(), x 4096x4096 float32",
        work=N * N * 8, unit="GB/s",
    ))
    WORKLOADS.append(Workload(
        f"copy_to_bfloat16_16M_f32_t{_threads}",
        _setup(lambda lib, x: (lambda: x.to(lib.bfloat16)), _close),
        threads=_threads,
        description="x.to(bfloat16), x 4096x4096 (16M) float32",
        work=N * N * 6, unit="GB/s",
    ))
