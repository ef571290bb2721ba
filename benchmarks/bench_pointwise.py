"""CPU pointwise ops against PyTorch, on 1 and 2 threads (issue 23, ember._C's pointwise kernels).

The seed example of issue 23 (``torch.add(x, y, out=out)``, x 1024x1024, y 1024x1: a column
broadcast written into ``out``); add, mul and where on 1M and 16M float32 elements, contiguous,
transposed (``x.t() + y``, both square) and broadcast (a column added to each row); and
``to(bfloat16)`` of 16M float32; exp, log, tanh, sigmoid and rsqrt of 1M float32. Target: at
most 1.0x PyTorch's time on 1 thread, and the 2-thread time at most 0.6x the 1-thread time on the
large (16M) rows. Each setup checks once that both libraries give the same values (the unary
functions: within float32 rounding) before anything is timed.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch


def _setup(build, arrays):
    """A setup from ``build(lib, *tensors) -> fn``, run for ember and torch on the same numpy arrays."""

    def setup():
        import ember

        data = arrays()
        ember_fn = build(ember, *(ember.from_numpy(a) for a in data))
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            torch_fn = build(torch, *(torch.from_numpy(a.copy()) for a in data))
            ours, theirs = ember_fn(), torch_fn()
            if theirs.dtype == torch.bfloat16:
                ours, theirs = ours.float(), theirs.float()
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        return ember_fn, torch_fn

    return setup


def _float32(*shapes):
    def make():
        rng = np.random.default_rng(0)
        return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]

    return make


def _seed(lib, x, y):
    out = lib.empty(x.shape)
    return lambda: lib.add(x, y, out=out)


_OPS = {
    "add": lambda lib, a, b: (lambda: a + b),
    "mul": lambda lib, a, b: (lambda: a * b),
    "where": lambda lib, a, b: (lambda: lib.where(a > b, a, b)),
}
# layout -> (how the operands look, the shapes of the two arrays for n elements)
_LAYOUTS = {
    "contiguous": (lambda a, b: (a, b), lambda side: [(side * side,), (side * side,)]),
    "transposed": (lambda a, b: (a.t(), b), lambda side: [(side, side), (side, side)]),
    "broadcast": (lambda a, b: (a, b), lambda side: [(side, side), (side, 1)]),
}


def _op(op, layout):
    arrange = _LAYOUTS[layout][0]

    def build(lib, a, b):
        return _OPS[op](lib, *arrange(a, b))

    return build


# unary functions of floating tensors (ember's own float32 code: within a few ulp of PyTorch's, not its bits)
_UNARY = {
    "exp": lambda lib, a: (lambda: lib.exp(a)),
    "log": lambda lib, a: (lambda: lib.log(a)),
    "tanh": lambda lib, a: (lambda: lib.tanh(a)),
    "sigmoid": lambda lib, a: (lambda: lib.sigmoid(a)),
    "rsqrt": lambda lib, a: (lambda: lib.rsqrt(a)),
}


def _unary_setup(name):
    def setup():
        import ember

        # 1M elements: a fresh 16M result costs PyTorch (4 KiB pages) more in page faults than the math
        data = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
        if name in ("log", "rsqrt"):
            data = np.abs(data) + np.float32(0.01)
        ember_fn = _UNARY[name](ember, ember.from_numpy(data))
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            torch_fn = _UNARY[name](torch, torch.from_numpy(data.copy()))
            np.testing.assert_allclose(ember_fn().numpy(), torch_fn().numpy(), rtol=1e-6, atol=1e-30)
        return ember_fn, torch_fn

    return setup


WORKLOADS = []
for _threads in (1, 2):
    for _name in _UNARY:
        WORKLOADS.append(Workload(
            f"pointwise_{_name}_1M_f32_t{_threads}",
            _unary_setup(_name),
            threads=_threads,
            description=f"{_name}(x), x 1024x1024 (1M) float32",
            work=1024 * 1024 * 8, unit="GB/s",
        ))
    WORKLOADS.append(Workload(
        f"pointwise_seed_add_out_1024x1024_col_t{_threads}",
        _setup(_seed, _float32((1024, 1024), (1024, 1))),
        threads=_threads,
        description="torch.add(x, y, out=out), x 1024x1024, y 1024x1 float32 (issue 23's seed)",
        work=1024 * 1024 * 8, unit="GB/s",
    ))
    for _side, _size in ((1024, "1M"), (4096, "16M")):
        for _op_name in _OPS:
            for _layout in _LAYOUTS:
                WORKLOADS.append(Workload(
                    f"pointwise_{_op_name}_{_size}_{_layout}_f32_t{_threads}",
                    _setup(_op(_op_name, _layout), _float32(*_LAYOUTS[_layout][1](_side))),
                    threads=_threads,
                    description=f"{_op_name} of {_size} float32, {_layout}",
                    work=_side * _side * 12, unit="GB/s",
                ))
    WORKLOADS.append(Workload(
        f"pointwise_to_bfloat16_16M_f32_t{_threads}",
        _setup(lambda lib, x: (lambda: x.to(lib.bfloat16)), _float32((4096, 4096))),
        threads=_threads,
        description="x.to(bfloat16), x 4096x4096 (16M) float32",
        work=4096 * 4096 * 6, unit="GB/s",
    ))
