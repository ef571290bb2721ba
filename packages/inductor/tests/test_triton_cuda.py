"""Generated Triton kernels on a GPU: compiled == eager for cuda tensors (the lead runs these on the GPU machine).

The same cases as test_triton_interpret.py (which runs them through Triton's interpreter in CI), compiled
for the device: every IR op against numpy (libdevice), every reduction type in its persistent, looped
and split forms, pointwise/softmax/layer_norm and half types, op_db forward, and the autotuner's warm
start from its file. Every test is marked ``cuda``.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from _triton_cases import (
    OP_CASES,
    REDUCTIONS,
    VARIANTS,
    check,
    check_layer_norm_grads,
    cuda_device,
    flat_tensors,
    run_op,
    sample_function,
)

import ember
from ember._inductor import config
from ember.testing import assert_close, op_db

pytestmark = pytest.mark.cuda


@pytest.fixture(autouse=True)
def _strict():
    with config.patch(fallback_on_compile_error=False, triton_on_cpu=False):
        yield


@pytest.mark.cuda
@pytest.mark.parametrize("rtype", sorted(REDUCTIONS))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cuda_reductions(rtype, variant):
    dev = cuda_device()
    rows, length = VARIANTS[variant]
    x = ember.randn(rows, length).to(dev)
    check(REDUCTIONS[rtype], x, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_cuda_pointwise_softmax_layer_norm_and_half():
    dev = cuda_device()
    x, y = ember.randn(64, 300).to(dev), ember.randn(300).to(dev)
    check(lambda a, b: ember.sigmoid(a) * b + ember.tanh(a - 1), x, y)
    check(lambda a: a.t() * 2, x)
    check(lambda a: ember.softmax(a, -1), x)
    check(lambda a: ember.nn.functional.layer_norm(a, (300,)), x, rtol=1e-4, atol=1e-4)
    for dtype in (ember.float16, ember.bfloat16):
        check(lambda a: (a * 2 + 1).sum(1), x.to(dtype), rtol=2e-2, atol=2e-1)


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_cuda_ir_op(name):
    dev = cuda_device()
    oracle, arrays, out_dtype = OP_CASES[name]
    if name == "erfinv":
        pytest.importorskip("scipy", reason="erfinv's oracle is scipy.special.erfinv")
    n = min(len(a) for a in arrays)
    arrays = [np.ascontiguousarray(a[:n]) for a in arrays]
    got = run_op(name, arrays, out_dtype, device=dev)
    with np.errstate(all="ignore"):
        want = np.asarray(oracle(*arrays)).astype(got.dtype)
    # libdevice on the GPU: within a few ulp of numpy
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-5,
                               err_msg=name)


@pytest.mark.cuda
def test_cuda_layer_norm_backward():
    dev = cuda_device()
    check_layer_norm_grads(ember.randn(32, 200, device=dev, requires_grad=True),
                           ember.randn(200, device=dev, requires_grad=True), out_atol=1e-4, x_atol=1e-3)


@pytest.mark.cuda
def test_cuda_autotune_choice_is_written_and_reused(tmp_path):
    from ember._inductor.runtime import triton_graph, triton_launch
    from ember.fx.experimental.proxy_tensor import make_fx

    dev = cuda_device()
    x = ember.randn(256, 1000, device=dev)
    with config.patch(cache_dir=str(tmp_path)):
        gm = make_fx(lambda a: (a.exp().sum(1),))(x)
        first = triton_graph.compile_graph_triton(gm, [x])
        assert_close(first(x)[0], x.exp().sum(1), rtol=1e-4, atol=1e-3)
        assert first.autotuner.benchmarked >= 1
        assert first.autotuner.path.exists()
        triton_launch._loaded.clear()  # as a second process: the module and the choice from disk
        second = triton_graph.compile_graph_triton(gm, [x])
        assert_close(second(x)[0], x.exp().sum(1), rtol=1e-4, atol=1e-3)
        assert second.autotuner.benchmarked == 0


def _opdb_names():
    return [n for n in sorted(op_db) if ember.float32 in op_db[n].dtypes]


@pytest.mark.cuda
@pytest.mark.parametrize("name", _opdb_names())
def test_cuda_opdb_forward(name):
    dev = cuda_device()
    info = op_db[name]
    sample = next(iter(info.sample_inputs(info, "cuda", ember.float32, False)), None)
    if sample is None:
        pytest.skip(f"{name} has no float32 sample")
    op_call, tensors = sample_function(info, sample)
    if not tensors or any(t.device.type != dev.type for t in tensors):
        pytest.skip("the sample has no cuda tensor")

    def fn(*inputs):
        return tuple(flat_tensors(op_call(*inputs)))

    random = "random" in getattr(info.op, "tags", ())
    if random:
        ember.manual_seed(zlib.crc32(name.encode()))
    try:
        want = fn(*tensors)
    except TypeError as exc:
        pytest.skip(f"the op returns a {exc}, not tensors")
    from ember._inductor.compile_fx import compile_fx
    from ember.fx.experimental.proxy_tensor import make_fx

    with config.patch(fallback_random=True):  # random ops draw eager's numbers (compiled on the first call)
        compiled = compile_fx(make_fx(fn)(*tensors), list(tensors), name=name)
        if random:
            ember.manual_seed(zlib.crc32(name.encode()))
        got = compiled(*tensors)
    tol = info.tolerance(ember.float32) or (None, None)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        if not (name.startswith("empty") or name.startswith("new_empty")):
            assert_close(g, w, rtol=tol[0], atol=tol[1], equal_nan=True)


def _opdb_grad_names():
    return [n for n in sorted(op_db) if ember.float32 in op_db[n].dtypes and op_db[n].supports_autograd]


@pytest.mark.cuda
@pytest.mark.parametrize("name", _opdb_grad_names())
def test_cuda_opdb_backward(name):
    """Compiled forward + backward on cuda (aot autograd, Triton kernels) against eager cuda autograd: the
    gradients of every float input of the first float32 sample that eager can differentiate."""
    cuda_device()
    info = op_db[name]
    if "random" in getattr(info.op, "tags", ()):
        pytest.skip("random op: its gradient depends on the draw (the forward test covers fallback_random)")
    sample = next(iter(info.sample_inputs(info, "cuda", ember.float32, True)), None)
    if sample is None:
        pytest.skip(f"{name} has no float32 sample")
    op_call, tensors = sample_function(info, sample)
    if not tensors or any(t.device.type != "cuda" for t in tensors):
        pytest.skip("the sample has no cuda tensor")
    leaves = [t.detach().requires_grad_(t.is_floating_point()) for t in tensors]

    def fn(*inputs):
        return tuple(flat_tensors(op_call(*inputs)))

    try:
        want = fn(*leaves)
    except TypeError as exc:
        pytest.skip(f"the op returns a {exc}, not tensors")
    except NotImplementedError as exc:
        pytest.skip(f"eager has no derivative for an input: {exc}")
    diff = [w for w in want if w.requires_grad]
    wrt = [t for t in leaves if t.requires_grad]
    if not diff or not wrt:
        pytest.skip("no output of the sample requires grad")
    cotangents = [ember.randn(*w.shape, dtype=w.dtype, device="cuda") for w in diff]
    try:
        want_grads = ember.autograd.grad(diff, wrt, cotangents, allow_unused=True)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"eager has no gradient for this sample ({type(exc).__name__}: {exc})")
    from ember._inductor.compile_fx import compile_fx
    from ember.fx.experimental.proxy_tensor import make_fx

    compiled = compile_fx(make_fx(fn)(*leaves), list(leaves), name=name)
    got = compiled(*leaves)
    got_grads = ember.autograd.grad([g for g, w in zip(got, want) if w.requires_grad], wrt, cotangents,
                                    allow_unused=True)
    tol = info.tolerance(ember.float32) or (1e-4, 1e-5)
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        if w is None:
            assert g is None or not bool(g.abs().sum()), f"grad {i}: eager has none"
            continue
        assert g is not None, f"grad {i}: None, eager has one"
        assert_close(g, w, rtol=max(tol[0] or 0, 1e-4), atol=max(tol[1] or 0, 1e-5), equal_nan=True)
