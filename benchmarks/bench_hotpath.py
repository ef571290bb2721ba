"""The dispatcher's hot path: ``a + b`` on float32 CPU tensors, from one element to a million.

At one element the time is almost all framework overhead (argument handling,
dispatch, output allocation), which ARCHITECTURE.md section 3 budgets: at most
2.5x PyTorch's time for the same call. At a million elements it is memory
bandwidth, where ember (numpy) and PyTorch should be close.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch


def _add_setup(n: int):
    """A setup for ``a + b`` on two contiguous float32 CPU tensors of ``n`` elements."""

    def setup():
        import ember

        rng = np.random.default_rng(0)
        a_np = rng.standard_normal(n).astype(np.float32)
        b_np = rng.standard_normal(n).astype(np.float32)
        a = ember.from_numpy(a_np.copy())
        b = ember.from_numpy(b_np.copy())

        def ember_fn():
            return a + b

        # Same work in both libraries, checked once before timing.
        np.testing.assert_allclose(np.asarray(ember_fn()), a_np + b_np, rtol=1e-6)

        torch = import_torch()
        torch_fn = None
        if torch is not None:
            ta = torch.from_numpy(a_np.copy())
            tb = torch.from_numpy(b_np.copy())

            def torch_fn():
                return ta + tb

        return ember_fn, torch_fn

    return setup


def _add_workload(name: str, n: int) -> Workload:
    return Workload(name, _add_setup(n), threads=1, description=f"`a + b`, two {n:,}-element float32 CPU tensors")


WORKLOADS = [
    _add_workload("add_1elem_f32", 1),
    _add_workload("add_1000_f32", 1000),
    _add_workload("add_1M_f32", 1_000_000),
]
