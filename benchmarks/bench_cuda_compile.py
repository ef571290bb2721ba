"""GPU rows of issue 27: ember's compiler on cuda next to PyTorch eager and ``torch.compile``, in one process.

Run with ``python benchmarks/run.py --device cuda -k cuda_c27`` (rows of ``BENCHMARKS_CUDA.md``), or all of
them in one table, eager and compiled side by side, with ``python benchmarks/gpu_issue27.py``. Without
CuPy or a GPU every row is skipped; without a CUDA build of PyTorch its column stays empty.

The cases (each one row per mode: ``eager`` pairs ember eager with PyTorch eager, ``compiled`` pairs
``ember.compile`` with ``torch.compile``, ``reduce_overhead`` pairs their ``mode="reduce-overhead"``):

* ``cuda_c27_clone_8192_f32``: ``x.clone()`` of an (8192, 8192) float32 tensor: the device's copy
  bandwidth (bytes read plus written), the reference of the next two rows;
* ``cuda_c27_pointwise_8192_f32``: ``gelu(x * 0.5 + 1) * sigmoid(x)`` on (8192, 8192) float32: eager runs
  five kernels, a compiler one (one read, one write);
* ``cuda_c27_layer_norm_8192_f32``: ``layer_norm(x, (8192,), weight, bias)`` on (8192, 8192) float32;
* ``cuda_c27_transformer_small_step``: the step below on 4 sequences of 32, dropout 0 (a graph with
  random ops runs without CUDA graphs): a step bound by launches, where ``reduce-overhead`` (CUDA graphs)
  matters;
* ``cuda_c27_transformer_step_{f32,bf16}``: one SGD training step of
  ``nn.TransformerEncoderLayer(768, 12, 3072)`` (default dropout 0.1, batch_first) on 32 sequences of 512,
  the loss ``(out * out).mean()`` compiled with the layer; bfloat16 by ``.to(bfloat16)`` of the layer
  and the input (no autocast).

Each case checks its compiled callable against the eager one once before anything is timed (the
outputs; for ember's training steps the loss of the first step from the same seed, hence the same
dropout masks, which ``torch.compile`` does not promise).
"""

from __future__ import annotations

import numpy as np
from bench_cuda import _ember_cuda as ember_cuda  # ember with its cuda device ready, or Skip
from harness import NotRun, Workload, import_torch

#: The device the cases run on ("cpu" only for ``gpu_issue27.py --smoke``, a plumbing check with small sizes).
DEVICE = "cuda"
N = 8192
D_MODEL, NHEAD, FFN = 768, 12, 3072
LARGE_BATCH, LARGE_SEQ = 32, 512
SMALL_BATCH, SMALL_SEQ = 4, 32
LR = 1e-3

#: mode -> (ember.compile / torch.compile keyword arguments), None for eager.
MODES = {"eager": None, "compiled": {}, "reduce_overhead": {"mode": "reduce-overhead"}}


# --------------------------------------------------------------------------- libraries


def torch_cuda():
    """``torch`` when it sees a GPU, else None (TF32 off: float32 means float32 on both sides)."""
    torch = import_torch()
    if torch is None or not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def sync_of(lib):
    if DEVICE == "cpu":
        return lambda: None
    return lib.cuda.synchronize


def _compile(lib, fn, mode):
    kwargs = MODES[mode]
    if kwargs is None:
        return fn
    return lib.compile(fn, dynamic=False, **kwargs)


def _host_numpy(t):
    t = t.detach()
    if "bfloat16" in str(t.dtype):
        t = t.float()
    return t.cpu().numpy()


# --------------------------------------------------------------------------- cases


class Case:
    """One benchmark: ``build(lib, mode) -> fn`` (a zero-argument callable doing the work once, without a
    device synchronisation), the modes it has, and the bytes one call moves (0: no bandwidth column)."""

    def __init__(self, name, build, modes, work=0.0, description=""):
        self.name = name
        self.build = build
        self.modes = modes
        self.work = work
        self.description = description


def _tensor_case(make_fn, make_inputs):
    """A case over one function of tensors: ``make_fn(lib)`` and ``make_inputs(lib) -> tuple``."""

    def build(lib, mode):
        inputs = make_inputs(lib)
        fn = make_fn(lib)
        run = _compile(lib, fn, mode)
        if mode != "eager":  # compiled == eager once (this also compiles, warms up and records)
            for _ in range(3):
                got = run(*inputs)
            want = fn(*inputs)
            np.testing.assert_allclose(_host_numpy(got), _host_numpy(want), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{lib.__name__} {mode}")
            del got, want
        return lambda: run(*inputs)

    return build


def _square(lib):
    gen = np.random.default_rng(0)
    x = gen.standard_normal((N, N), dtype=np.float32)
    return (lib.from_numpy(x).to(DEVICE),)


def _clone(lib):
    return lambda x: x.clone()


def _pointwise(lib):
    F = lib.nn.functional

    def pointwise_chain(x):
        return F.gelu(x * 0.5 + 1.0) * lib.sigmoid(x)

    return pointwise_chain


def _layer_norm(lib):
    def layer_norm(x, weight, bias):
        return lib.nn.functional.layer_norm(x, (N,), weight, bias)

    return layer_norm


def _norm_inputs(lib):
    gen = np.random.default_rng(1)
    (x,) = _square(lib)
    w = lib.from_numpy(gen.standard_normal(N, dtype=np.float32)).to(DEVICE)
    b = lib.from_numpy(gen.standard_normal(N, dtype=np.float32)).to(DEVICE)
    return x, w, b


def _layer_with_loss(lib, dropout):
    nn = lib.nn

    class LayerLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(D_MODEL, NHEAD, dim_feedforward=FFN, dropout=dropout,
                                                    batch_first=True)

        def forward(self, x):
            out = self.layer(x)
            return (out * out).mean()

    return LayerLoss()


def _transformer_case(batch, seq, dtype_name, dropout):
    """One SGD step of the encoder layer (and its loss) on ``batch`` sequences of ``seq``."""

    def build(lib, mode):
        gen = np.random.default_rng(0)
        lib.manual_seed(0)
        module = _layer_with_loss(lib, dropout)
        x = lib.from_numpy(gen.standard_normal((batch, seq, D_MODEL), dtype=np.float32))
        dtype = getattr(lib, dtype_name)
        module = module.to(DEVICE).to(dtype)
        x = x.to(DEVICE).to(dtype)
        optimizer = lib.optim.SGD(module.parameters(), lr=LR)
        run = _compile(lib, module, mode)

        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = run(x)
            loss.backward()
            optimizer.step()
            return loss

        if mode != "eager" and lib.__name__ == "ember":  # (torch.compile draws other dropout masks)
            _check_first_step(lib, module, run, x, dtype_name)
        elif mode != "eager":
            for _ in range(3):  # compile, warm up, record
                run(x)
        return step

    return build


def _check_first_step(lib, module, run, x, dtype_name):
    """The compiled loss equals the eager one (same seed, so the same dropout masks); no parameter changes."""
    tol = 2e-2 if dtype_name == "bfloat16" else 1e-3
    for _ in range(3):  # compile, warm up, record
        lib.manual_seed(123)
        got = float(run(x).float().item())
    lib.manual_seed(123)
    want = float(module(x).float().item())
    np.testing.assert_allclose(got, want, rtol=tol, err_msg=f"{lib.__name__} compiled loss")


def _bytes(n):
    return 2.0 * n * 4  # float32: read once, written once


CASES = [
    Case("cuda_c27_clone_8192_f32", _tensor_case(_clone, _square), ("eager",), _bytes(N * N),
         "x.clone(), (8192, 8192) float32: the copy bandwidth"),
    Case("cuda_c27_pointwise_8192_f32", _tensor_case(_pointwise, _square), ("eager", "compiled"), _bytes(N * N),
         "gelu(x * 0.5 + 1) * sigmoid(x), (8192, 8192) float32"),
    Case("cuda_c27_layer_norm_8192_f32", _tensor_case(_layer_norm, _norm_inputs), ("eager", "compiled"),
         _bytes(N * N), "layer_norm over rows of 8192, (8192, 8192) float32"),
    Case("cuda_c27_transformer_small_step", _transformer_case(SMALL_BATCH, SMALL_SEQ, "float32", 0.0),
         ("eager", "compiled", "reduce_overhead"), 0.0,
         "TransformerEncoderLayer(768, 12, 3072) SGD step, 4 x 32, float32, dropout 0"),
    Case("cuda_c27_transformer_step_f32", _transformer_case(LARGE_BATCH, LARGE_SEQ, "float32", 0.1),
         ("eager", "compiled"), 0.0, "TransformerEncoderLayer(768, 12, 3072) SGD step, 32 x 512, float32"),
    Case("cuda_c27_transformer_step_bf16", _transformer_case(LARGE_BATCH, LARGE_SEQ, "bfloat16", 0.1),
         ("eager", "compiled"), 0.0, "TransformerEncoderLayer(768, 12, 3072) SGD step, 32 x 512, bfloat16"),
]


# --------------------------------------------------------------------------- the runner's rows


def _synced(fn, sync):
    def call():
        fn()
        sync()

    return call


def _row_setup(case, mode):
    def setup():
        ember = ember_cuda()
        ember_fn = _synced(case.build(ember, mode), sync_of(ember))
        torch = torch_cuda()
        torch_fn = None
        if torch is not None:
            try:
                torch_fn = _synced(case.build(torch, mode), sync_of(torch))
            except Exception as exc:  # torch.compile without a working Triton, say
                torch_fn = NotRun(f"torch: {type(exc).__name__}: {exc}")
        return ember_fn, torch_fn

    return setup


WORKLOADS = [
    Workload(
        f"{case.name}_{mode}" if len(case.modes) > 1 else case.name,
        _row_setup(case, mode),
        device="cuda",
        description=f"{case.description} ({mode.replace('_', '-')})",
        work=case.work,
        unit="GB/s" if case.work else "",
    )
    for case in CASES
    for mode in case.modes
]
