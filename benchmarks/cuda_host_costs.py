"""Host time per op on the GPU, ember next to PyTorch: where a small model's step goes (issue 24).

    python benchmarks/cuda_host_costs.py [--device cuda] [--calls 200] [--profile FILE] [-k NAME ...]

Each case is one op call on the tiny GPT's shapes (batch 3, sequence 16, 32 wide, 2 heads). A block queues
``--calls`` calls without waiting for the device and is timed until the loop ends (the host's time: these
kernels take the GPU a few microseconds, less than the host needs to issue them); the device is synchronised
between blocks. The table lists the minimum per call over 7 blocks, ember's and PyTorch's interleaved, and
their ratio. ``--profile FILE`` writes cProfile's top functions of ember's calls of each case to FILE.
``--device cpu`` runs the same cases on the CPU (a check of this script on a machine without a GPU).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

B, T, C, H = 3, 16, 32, 2


def _inputs(lib, device):
    rng = np.random.default_rng(0)

    def t(*shape, grad=False):
        x = lib.tensor(rng.standard_normal(shape).astype(np.float32), device=device)
        return x.requires_grad_(True) if grad else x

    v = {
        "x": t(B, T, C), "y": t(B, T, C), "pos": t(T, C), "w": t(3 * C, C), "w_up": t(4 * C, C),
        "q": t(B, H, T, C // H), "k": t(B, H, T, C // H), "scores": t(B, H, T, T),
        "ln_w": t(C), "logits": t(B * T, 65),
        "xg": t(B, T, C, grad=True), "wg": t(3 * C, C, grad=True), "ln_wg": t(C, grad=True),
        "a16": t(16), "b16": t(16),
        "idx": lib.tensor(rng.integers(0, 65, (B, T)), device=device),
        "tgt": lib.tensor(np.where(rng.random(B * T) < 0.1, -1, rng.integers(0, 65, B * T)), device=device),
        "emb": t(65, C),
    }
    v["qkv"] = lib.nn.functional.linear(v["x"], v["w"])
    v["xt"] = v["q"].transpose(1, 2)
    return v


def _cases(lib):
    F = lib.nn.functional
    return {
        "add_16": lambda v: v["a16"] + v["b16"],
        "add": lambda v: v["x"] + v["y"],
        "add_broadcast": lambda v: v["x"] + v["pos"],
        "mul_scalar": lambda v: v["x"] * 0.5,
        "view": lambda v: v["x"].view(B, T, H, C // H),
        "transpose": lambda v: v["q"].transpose(1, 2),
        "split3": lambda v: v["qkv"].split(C, dim=2),
        "contiguous_of_transposed": lambda v: v["xt"].contiguous(),
        "linear_96": lambda v: F.linear(v["x"], v["w"]),
        "matmul_4d": lambda v: v["q"] @ v["k"].transpose(-2, -1),
        "layer_norm": lambda v: F.layer_norm(v["x"], (C,), v["ln_w"], None, 1e-5),
        "softmax": lambda v: F.softmax(v["scores"], dim=-1),
        "gelu": lambda v: F.gelu(v["x"]),
        "sdpa_causal": lambda v: F.scaled_dot_product_attention(v["q"], v["k"], v["k"], is_causal=True),
        "embedding": lambda v: F.embedding(v["idx"], v["emb"]),
        "cross_entropy_ignore": lambda v: F.cross_entropy(v["logits"], v["tgt"], ignore_index=-1),
        "sum_dim": lambda v: v["x"].sum(dim=-1),
        "arange": lambda v: lib.arange(0, T, dtype=lib.long, device=v["x"].device),
        "zeros_like": lambda v: lib.zeros_like(v["x"]),
        "recorded_linear": lambda v: F.linear(v["xg"], v["wg"]),
        "recorded_add": lambda v: v["xg"] + v["x"],
        "recorded_layer_norm": lambda v: F.layer_norm(v["xg"], (C,), v["ln_wg"], None, 1e-5),
        "recorded_view": lambda v: v["xg"].view(B * T, C),
        "fwd_bwd_linear_sum": lambda v: F.linear(v["xg"], v["wg"]).sum().backward(),
    }


def _primitives(ember):
    """Host costs of the pieces a cuda op is made of (CuPy, cuBLAS, ember's wrappers), per call: what the
    per-op table above spends its time on."""
    import cupy as cp

    from ember.cuda import _backend, _bf16
    from ember.cuda.kernels import pointwise

    a = cp.ones(16, np.float32)
    t = ember.ones(16, device="cuda")
    q = cp.ones((B, H, T, C // H), np.float32)
    kt = cp.ones((B, H, T, C // H), np.float32).swapaxes(-1, -2)
    x2, w2 = cp.ones((B * T, C), np.float32), cp.ones((3 * C, C), np.float32)
    pool = cp.get_default_memory_pool()
    storage = ember.ones(B, T, C, device="cuda")
    from ember._storage import storage_of

    st = storage_of(storage)
    add_fast = pointwise.FAST_OPS["add"]
    cases = {
        "cupy.ndarray(16) (hooked allocator)": lambda: cp.ndarray((16,), np.float32),
        "pool.malloc(64) (no hook)": lambda: pool.malloc(64),
        "cupy elementwise a + a": lambda: a + a,
        "ember add fast function (alloc + launch)": lambda: add_fast(t, t),
        "ember t + t (dispatch)": lambda: t + t,
        "ember strided_view": lambda: _backend.strided_view(st, (B, T, H, C // H), (T * C, C, C // H, 1), 0,
                                                             np.dtype(np.float32)),
        "cupy.matmul batched (q @ k^T)": lambda: cp.matmul(q, kt),
        "_bf16.matmul batched direct (q @ k^T)": lambda: _bf16.matmul(q, kt),
        "_bf16.product_2d (48x32 @ 32x96)": lambda: _bf16.product_2d(x2, w2.T),
        "cupy.matmul 2-D (48x32 @ 32x96)": lambda: cp.matmul(x2, w2.T),
    }

    print(f"\n{'primitive':<44}{'us per call':>12}")
    for name, fn in cases.items():
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"{name:<44}failed: {type(exc).__name__}: {exc}")
            continue
        best = float("inf")
        for _ in range(7):
            cp.cuda.runtime.deviceSynchronize()
            start = time.perf_counter()
            for _ in range(200):
                fn()
            best = min(best, (time.perf_counter() - start) / 200)
        cp.cuda.runtime.deviceSynchronize()
        print(f"{name:<44}{best * 1e6:>12.2f}", flush=True)


def _cholesky_probe(ember, torch, n=256):
    """Where ``linalg.cholesky`` of an n x n float32 SPD matrix spends its time on the GPU: the whole op (which
    reads ``info``), cuSOLVER's ``potrf`` alone (legacy 32-bit API and, where CuPy has it, the 64-bit ``Xpotrf``
    that PyTorch calls), each followed by a synchronisation; PyTorch's ``cholesky`` and ``cholesky_ex``."""
    import cupy as cp
    from cupy_backends.cuda.libs import cusolver

    rng = np.random.default_rng(0)
    m = rng.standard_normal((n, n)).astype(np.float32)
    spd = m @ m.T + n * np.eye(n, dtype=np.float32)
    a = ember.tensor(spd, device="cuda")
    work = cp.asarray(spd)
    handle = cp.cuda.device.get_cusolver_handle()
    size = cusolver.spotrf_bufferSize(handle, 1, n, work.data.ptr, n)
    buffer = cp.empty(size, np.float32)
    info = cp.empty(1, np.int32)
    sync = cp.cuda.runtime.deviceSynchronize

    def potrf():
        w = work.copy()
        cusolver.spotrf(handle, 1, n, w.data.ptr, n, buffer.data.ptr, size, info.data.ptr)
        sync()

    cases = {"ember.linalg.cholesky (reads info)": lambda: (ember.linalg.cholesky(a), ember.cuda.synchronize()),
             "ember.linalg.cholesky_ex": lambda: (ember.linalg.cholesky_ex(a), ember.cuda.synchronize()),
             "copy + cusolver spotrf (legacy API)": potrf}
    if hasattr(cusolver, "xpotrf") and hasattr(cusolver, "xpotrf_bufferSize"):
        try:
            params = cusolver.createParams()
            dev_size, host_size = cusolver.xpotrf_bufferSize(handle, params, 1, n, 0, work.data.ptr, n, 0)
            dev_buf, host_buf = cp.empty(max(dev_size, 1), np.int8), np.empty(max(host_size, 1), np.int8)

            def xpotrf():
                w = work.copy()
                cusolver.xpotrf(handle, params, 1, n, 0, w.data.ptr, n, 0, dev_buf.data.ptr, dev_size,
                                host_buf.ctypes.data, host_size, info.data.ptr)
                sync()

            cases["copy + cusolver Xpotrf (64-bit API)"] = xpotrf
        except Exception as exc:  # noqa: BLE001 - the other rows still run
            print(f"Xpotrf not measured: {type(exc).__name__}: {exc}")
    if torch is not None:
        ta = torch.tensor(spd, device="cuda")
        cases["torch.linalg.cholesky"] = lambda: (torch.linalg.cholesky(ta), torch.cuda.synchronize())
        cases["torch.linalg.cholesky_ex"] = lambda: (torch.linalg.cholesky_ex(ta), torch.cuda.synchronize())
    print(f"\n{'cholesky ' + str(n):<44}{'us per call':>12}")
    for name, fn in cases.items():
        fn()
        best = float("inf")
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(20):
                fn()
            best = min(best, (time.perf_counter() - start) / 20)
        print(f"{name:<44}{best * 1e6:>12.2f}", flush=True)


def _block(fn, v, calls, sync):
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn(v)
    elapsed = time.perf_counter() - start
    sync()
    return elapsed / calls


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("-k", dest="patterns", action="append", default=[])
    args = parser.parse_args(argv)

    import ember

    if args.device == "cuda":
        ember.cuda.init()
        try:
            _primitives(ember) if not args.patterns else None
        except Exception as exc:  # noqa: BLE001 - the per-op table still runs
            print(f"primitives failed: {type(exc).__name__}: {exc}")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and args.device == "cuda" and not torch.cuda.is_available():
        torch = None
    ember.set_num_threads(1)
    if args.device == "cuda" and not args.patterns:
        try:
            _cholesky_probe(ember, torch)
        except Exception as exc:  # noqa: BLE001 - the per-op table still runs
            print(f"cholesky probe failed: {type(exc).__name__}: {exc}")
    sides = [("ember", ember)] + ([("torch", torch)] if torch is not None else [])
    if torch is not None:
        torch.set_num_threads(1)
    syncs = {
        name: (lib.cuda.synchronize if args.device == "cuda" else (lambda: None)) for name, lib in sides
    }
    values = {name: _inputs(lib, args.device) for name, lib in sides}
    cases = {name: _cases(lib) for name, lib in sides}
    selected = [c for c in cases["ember"] if not args.patterns or any(p in c for p in args.patterns)]
    if args.profile is not None:
        args.profile.write_text("")
    print(f"\n{'case':<28}{'ember us':>10}{'torch us':>10}{'ratio':>8}")
    for case in selected:
        best = {}
        for name, _ in sides:
            cases[name][case](values[name])  # warm-up: compile, plan caches
        for _ in range(7):
            for name, _ in sides:
                t = _block(cases[name][case], values[name], args.calls, syncs[name])
                best[name] = min(best.get(name, t), t)
        ours, theirs = best["ember"] * 1e6, best.get("torch")
        theirs = theirs * 1e6 if theirs is not None else None
        ratio = f"{ours / theirs:8.2f}" if theirs else "       -"
        print(f"{case:<28}{ours:>10.2f}{theirs if theirs is not None else float('nan'):>10.2f}{ratio}", flush=True)
        if args.profile is not None:
            profiler = cProfile.Profile()
            fn, v = cases["ember"][case], values["ember"]
            profiler.enable()
            for _ in range(args.calls):
                fn(v)
            profiler.disable()
            syncs["ember"]()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(18)
            with args.profile.open("a") as out:
                out.write(f"\n=== {case}: ember {ours:.2f} us per call\n{text.getvalue()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
