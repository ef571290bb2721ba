"""Products recorded into a CUDA graph (what ``ember.compile(mode="reduce-overhead")`` records): matmul, a stack of
products and a convolution issued while a stream captures run through ``ember.cuda._cublas_capture`` (CuPy's cuBLAS
wrappers refuse a capturing stream), and a replay of the graph gives eager's values (within rounding: cuBLAS may pick
another algorithm for the capture's workspace than for its default one)."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda


def _replayed(fn):
    """``fn()``'s result computed by recording it on a side stream and launching the graph once."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        out = fn()
        graph = stream.end_capture()
    graph.launch(stream)
    stream.synchronize()
    return out


_TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "bfloat16": dict(rtol=1e-2, atol=1e-2),
        "float16": dict(rtol=2e-3, atol=2e-3)}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_products_recorded_while_capturing_give_eager_values(dtype):
    rng = np.random.default_rng(0)
    dt = getattr(ember, dtype)
    a = ember.from_numpy(rng.standard_normal((64, 96)).astype(np.float32)).cuda().to(dt)
    b = ember.from_numpy(rng.standard_normal((96, 48)).astype(np.float32)).cuda().to(dt)
    s = ember.from_numpy(rng.standard_normal((3, 64, 96)).astype(np.float32)).cuda().to(dt)
    t = ember.from_numpy(rng.standard_normal((3, 96, 40)).astype(np.float32)).cuda().to(dt)
    for fn in (lambda: a @ b, lambda: s @ t, lambda: ember.nn.functional.linear(a, b.t()),
               lambda: ember.addmm(a[:, :48], a, b, beta=0.5)):
        expected = fn()
        got = _replayed(fn)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got.float().cpu().numpy(), expected.float().cpu().numpy(), **_TOL[dtype])


def test_convolution_recorded_while_capturing_gives_eager_values():
    """The fast path's GEMM (an ungrouped float32 convolution; grouped ones still call ``cupy.matmul``, so a graph
    with one runs without CUDA graphs)."""
    rng = np.random.default_rng(1)
    x = ember.from_numpy(rng.standard_normal((4, 3, 16, 16)).astype(np.float32)).cuda()
    w = ember.from_numpy(rng.standard_normal((8, 3, 3, 3)).astype(np.float32)).cuda()

    def fn():
        return ember.nn.functional.conv2d(x, w, padding=1)

    np.testing.assert_allclose(_replayed(fn).cpu().numpy(), fn().cpu().numpy(), rtol=1e-5, atol=1e-5)


def test_capture_binding_leaves_eager_calls_on_cupys_wrappers():
    """After a capture, the next eager product binds the handle to its stream again through CuPy (which also
    gives the handle cuBLAS' default workspace back) and computes the same bits."""
    from ember.cuda import _bf16

    a = ember.randn(32, 32, device="cuda")
    before = a @ a
    _replayed(lambda: a @ a)
    assert not _bf16.capturing()
    np.testing.assert_array_equal((a @ a).cpu().numpy(), before.cpu().numpy())
