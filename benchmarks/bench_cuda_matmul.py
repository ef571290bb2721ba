"""GPU rows of ``mode="max-autotune"``: matrix products with a pointwise epilogue, ember next to PyTorch.

Run on the GPU machine with ``python benchmarks/run.py --device cuda -k cuda_mm`` (rows of
``BENCHMARKS_CUDA.md``). Each case has two modes, each pairing ember with PyTorch in the same mode:
``default`` (``ember.compile`` / ``torch.compile``: the extern cuBLAS call, then one fused epilogue
kernel) and ``autotune`` (``mode="max-autotune-no-cudagraphs"`` on both: a Triton template with the
epilogue in its store where it measured faster; CUDA graphs are left out so the rows time the kernels,
not the launches). The cases:

* ``cuda_mm_linear_relu_{f32,bf16}``: ``relu(x @ w.t() + b)``, x (8192, 4096), w (4096, 4096);
* ``cuda_mm_small_linear_gelu_f32``: ``gelu(x @ w.t() + b)``, x (256, 1024), w (1024, 1024): few
  tiles, where the saved round trip of the product and one launch matter most;
* ``cuda_mm_attention_scores_bf16``: ``(q @ k.transpose(-2, -1)) * 0.125``, q and k (16, 12, 512, 64).

TF32 is off in both libraries (float32 means float32). Each build checks compiled == eager once; the
first ``autotune`` build benchmarks and caches its choices (the setup column shows that cost).
``python benchmarks/bench_cuda_matmul.py --smoke`` runs every case once with small sizes on the cpu
through Triton's interpreter (a plumbing check, no timing).
"""

from __future__ import annotations

import numpy as np
from bench_cuda_compile import ember_cuda, torch_cuda
from harness import NotRun, Workload

DEVICE = "cuda"
#: name -> (function maker, input shapes, dtype name)
SHAPES = {
    "linear": ((8192, 4096), (4096, 4096), (4096,)),
    "small_linear": ((256, 1024), (1024, 1024), (1024,)),
    "attention": ((16, 12, 512, 64), (16, 12, 512, 64)),
}
MODES = {"default": {}, "autotune": {"mode": "max-autotune-no-cudagraphs"}}


def _linear_relu(lib):
    def linear_relu(x, w, b):
        return lib.relu(lib.nn.functional.linear(x, w, b))

    return linear_relu


def _linear_gelu(lib):
    def linear_gelu(x, w, b):
        return lib.nn.functional.gelu(lib.nn.functional.linear(x, w, b))

    return linear_gelu


def _scores(lib):
    def attention_scores(q, k):
        return (q @ k.transpose(-2, -1)) * 0.125

    return attention_scores


def _inputs(lib, shapes, dtype_name):
    gen = np.random.default_rng(0)
    dtype = getattr(lib, dtype_name)
    return tuple(lib.from_numpy(gen.standard_normal(s, dtype=np.float32) * 0.1).to(DEVICE).to(dtype) for s in shapes)


def _flops(shapes):
    a, b = shapes[0], shapes[1]
    batch = int(np.prod(a[:-2])) if len(a) > 2 else 1
    m, k = a[-2], a[-1]
    n = b[-2] if len(b) == len(a) and len(a) > 2 else b[0]  # w (n, k) for linear; k (.., n, d) for scores
    return 2.0 * batch * m * n * k


class Case:
    def __init__(self, name, make_fn, shapes, dtype_name, description):
        self.name, self.make_fn, self.shapes, self.dtype_name = name, make_fn, shapes, dtype_name
        self.description = description

    def build(self, lib, mode):
        """A zero-argument callable running the compiled function once (checked against eager first)."""
        inputs = _inputs(lib, self.shapes, self.dtype_name)
        fn = self.make_fn(lib)
        run = lib.compile(fn, dynamic=False, **MODES[mode])
        got, want = run(*inputs), fn(*inputs)
        tol = 3e-2 if self.dtype_name == "bfloat16" else 1e-3
        np.testing.assert_allclose(got.float().cpu().numpy(), want.float().cpu().numpy(), rtol=tol, atol=tol,
                                   err_msg=f"{lib.__name__} {mode}")
        return lambda: run(*inputs)


CASES = [
    Case("cuda_mm_linear_relu_f32", _linear_relu, SHAPES["linear"], "float32",
         "relu(x @ w.t() + b), x (8192, 4096), w (4096, 4096), float32"),
    Case("cuda_mm_linear_relu_bf16", _linear_relu, SHAPES["linear"], "bfloat16",
         "relu(x @ w.t() + b), x (8192, 4096), w (4096, 4096), bfloat16"),
    Case("cuda_mm_small_linear_gelu_f32", _linear_gelu, SHAPES["small_linear"], "float32",
         "gelu(x @ w.t() + b), x (256, 1024), w (1024, 1024), float32"),
    Case("cuda_mm_attention_scores_bf16", _scores, SHAPES["attention"], "bfloat16",
         "(q @ k^T) * 0.125, q and k (16, 12, 512, 64), bfloat16"),
]


def _synced(fn, lib):
    def call():
        fn()
        lib.cuda.synchronize()

    return call


def _row_setup(case, mode):
    def setup():
        ember = ember_cuda()
        ember_fn = _synced(case.build(ember, mode), ember)
        torch = torch_cuda()
        torch_fn = None
        if torch is not None:
            try:
                torch_fn = _synced(case.build(torch, mode), torch)
            except Exception as exc:  # noqa: BLE001 - torch.compile without a working Triton, say
                torch_fn = NotRun(f"torch: {type(exc).__name__}: {exc}")
        return ember_fn, torch_fn

    return setup


WORKLOADS = [
    Workload(f"{case.name}_{mode}", _row_setup(case, mode), device="cuda",
             description=f"{case.description} ({mode})", work=_flops(case.shapes), unit="TFLOP/s")
    for case in CASES
    for mode in MODES
]


def _smoke():
    """Every case once on the cpu through Triton's interpreter, at small sizes (plumbing, not speed)."""
    import os

    os.environ["TRITON_INTERPRET"] = "1"
    import ember
    from ember._inductor import config

    global DEVICE
    DEVICE = "cpu"
    small = {"linear": ((40, 24), (24, 24), (24,)), "small_linear": ((16, 32), (32, 32), (32,)),
             "attention": ((2, 2, 16, 8), (2, 2, 16, 8))}
    for case, key in zip(CASES, ("linear", "linear", "small_linear", "attention")):
        case.shapes = small[key]
        for mode in MODES:
            with config.patch(triton_on_cpu=True):
                case.build(ember, mode)()
            print(f"{case.name} {mode}: ok")


if __name__ == "__main__":
    import sys

    if "--smoke" in sys.argv:
        _smoke()
    else:
        print(__doc__)
