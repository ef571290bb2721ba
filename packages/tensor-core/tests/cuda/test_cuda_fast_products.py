"""The checked cuda kernels of ``matmul``, ``linear`` and ``sum`` (ember.cuda.kernels.products/reductions).

Oracles: the CPU results (products within GEMM rounding), the generic cuda path (``sum``: the same bits),
and the meta functions' errors for the calls the entries decline.
"""

import contextlib

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember._ops._registry import get as get_op

pytestmark = pytest.mark.cuda

TOL = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.fixture(scope="module")
def fast():
    ember.cuda.init()
    from ember.cuda import kernels
    from ember.cuda.kernels import products, reductions

    kernels.register()
    return products, reductions


@contextlib.contextmanager
def without_entry(name):
    op = get_op(name)
    entry = op.checked_kernels.pop("cuda")
    try:
        yield
    finally:
        op.register_checked_kernel("cuda", entry)


def host(t):
    return t.detach().cpu().numpy()


def pair(rng, dtype, *shape):
    x = rng.standard_normal(shape).astype(dtype)
    return ember.from_numpy(x), ember.from_numpy(x).to("cuda")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_entry_matches_cpu_for_every_layout(fast, dtype):
    products, _ = fast
    rng = np.random.default_rng(0)
    for m, k, n in [(5, 7, 3), (128, 784, 512), (1, 9, 1), (33, 1, 17)]:
        a_cpu, a = pair(rng, dtype, m, k)
        b_cpu, b = pair(rng, dtype, n, k)
        for left, right, left_cpu, right_cpu in [(a, b.t(), a_cpu, b_cpu.t()),
                                                 (a.t().contiguous().t(), b.t(), a_cpu, b_cpu.t())]:
            assert products.matmul(left, right) is not None  # the entry takes these calls
            got = ember.matmul(left, right)
            assert got.device.type == "cuda" and got.dtype == left.dtype and got.shape == (m, n)
            want = left_cpu.double() @ right_cpu.double()  # float32 sums of k terms of size ~sqrt(k): err ~ k eps
            np.testing.assert_allclose(host(got), want.numpy(), rtol=TOL[dtype], atol=TOL[dtype] * k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_entry_takes_stacks_with_equal_batch_dims(fast, dtype):
    """Attention's products: (B, H, T, d) @ (B, H, T, d).transpose(-2, -1), weights @ values, their gradients'
    transposed operands, a non-mergeable batch layout (copied), and a stack times one matrix."""
    products, _ = fast
    rng = np.random.default_rng(1)
    q_cpu, q = pair(rng, dtype, 3, 2, 16, 8)
    k_cpu, k = pair(rng, dtype, 3, 2, 16, 8)
    w_cpu, w = pair(rng, dtype, 3, 2, 16, 16)
    x_cpu, x = pair(rng, dtype, 3, 16, 2, 8)
    m_cpu, m = pair(rng, dtype, 8, 5)
    cases = [
        (q, k.transpose(-2, -1), q_cpu, k_cpu.transpose(-2, -1)),
        (w, k, w_cpu, k_cpu),
        (w.transpose(-2, -1), q, w_cpu.transpose(-2, -1), q_cpu),
        (q.transpose(-2, -1), w, q_cpu.transpose(-2, -1), w_cpu),
        (x.transpose(1, 2), k.transpose(-2, -1), x_cpu.transpose(1, 2), k_cpu.transpose(-2, -1)),
        (q, m, q_cpu, m_cpu),
        (q.transpose(-2, -1).contiguous().transpose(-2, -1), m, q_cpu, m_cpu),
    ]
    for left, right, left_cpu, right_cpu in cases:
        assert products.matmul(left, right) is not None  # the entry takes these calls
        got = ember.matmul(left, right)
        want = left_cpu.double() @ right_cpu.double()
        assert got.device.type == "cuda" and got.dtype == left.dtype and got.shape == want.shape
        np.testing.assert_allclose(host(got), want.numpy(), rtol=TOL[dtype], atol=TOL[dtype] * 16)
    # broadcast batch dims are the usual path's
    assert products.matmul(q, ember.ones(1, 2, 8, 4, device="cuda", dtype=q.dtype)) is None
    assert products.matmul(ember.ones(4, 2, 3, device="cuda"), ember.ones(5, 3, 2, device="cuda")) is None


def test_matmul_entry_declines_what_it_does_not_compute(fast):
    products, _ = fast
    a = ember.ones(3, 4, device="cuda")
    assert products.matmul(a, ember.ones(5, 2, device="cuda")) is None  # inner dims differ
    assert products.matmul(a, ember.ones(4, device="cuda")) is None  # a vector
    assert products.matmul(a, ember.ones(4, 2, device="cuda", dtype=ember.float64)) is None  # mixed dtypes
    assert products.matmul(a.to(ember.int64), ember.ones(4, 2, device="cuda", dtype=ember.int64)) is None
    assert products.matmul(ember.ones(0, 4, device="cuda"), ember.ones(4, 2, device="cuda")) is None
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        ember.matmul(a, ember.ones(5, 2, device="cuda"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_entry_matches_cpu_values_and_gradients(fast, dtype, with_bias):
    products, _ = fast
    rng = np.random.default_rng(1)
    for lead in [(128,), (4, 6), (1,)]:
        x_cpu, x = pair(rng, dtype, *lead, 33)
        w_cpu, w = pair(rng, dtype, 17, 33)
        b_cpu, b = pair(rng, dtype, 17) if with_bias else (None, None)
        assert products.linear(x, w, b) is not None
        for t in (x, w, b, x_cpu, w_cpu, b_cpu):
            if t is not None:
                t.requires_grad_(True)
        got, want = F.linear(x, w, b), F.linear(x_cpu, w_cpu, b_cpu)
        assert got.shape == want.shape == (*lead, 17)
        np.testing.assert_allclose(host(got), want.detach().numpy(), rtol=TOL[dtype], atol=TOL[dtype])
        seed = rng.standard_normal(want.shape).astype(dtype)
        got.backward(ember.from_numpy(seed).to("cuda"))
        want.backward(ember.from_numpy(seed))
        for ours, theirs in ((x, x_cpu), (w, w_cpu), (b, b_cpu)):
            if ours is not None:
                np.testing.assert_allclose(host(ours.grad), theirs.grad.numpy(), rtol=1e-4, atol=TOL[dtype] * 10)


def test_linear_entry_declines_and_the_meta_function_reports(fast):
    products, _ = fast
    x, w = ember.ones(3, 4, device="cuda"), ember.ones(5, 4, device="cuda")
    assert products.linear(x, w, ember.ones(4, device="cuda")) is None  # a bias of the wrong length
    assert products.linear(ember.ones(4, device="cuda"), w) is None  # a 1-D input
    assert products.linear(x, ember.ones(4, device="cuda")) is None  # a 1-D weight
    assert products.linear(x.t().contiguous().t().unsqueeze(0).expand(2, 3, 4), w) is None  # strided leading dims
    with pytest.raises(RuntimeError):
        F.linear(x, ember.ones(5, 3, device="cuda"))
    # the declined calls still compute (through the decomposition)
    np.testing.assert_array_equal(host(F.linear(ember.ones(4, device="cuda"), w)), np.full(5, 4.0, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_entry_gives_the_generic_paths_bits(fast, dtype):
    _, reductions = fast
    rng = np.random.default_rng(2)
    x = ember.from_numpy(rng.standard_normal((64, 33, 5)).astype(dtype)).to("cuda")
    calls = [(x,), (x, -1, True), (x, (2, 0), False), (x, [1], True), (x[:, 1:7], 1), (x[:, 1:7], 0)]
    for args in calls:
        assert reductions.sum_dims(*args) is not None
        got = host(ember.sum(*args))
        with without_entry("sum"):
            want = host(ember.sum(*args))
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_sum_entry_declines_and_the_meta_function_reports(fast):
    _, reductions = fast
    x = ember.ones(3, 4, device="cuda")
    for args in [(x, 2), (x, [0, 0]), (x, []), (x, 0, 1), (x.to(ember.int64), 0), (ember.ones((), device="cuda"),)]:
        assert reductions.sum_dims(*args) is None
    with pytest.raises(IndexError):
        ember.sum(x, 2)
    with pytest.raises(RuntimeError):
        ember.sum(x, [0, 0])
    assert ember.sum(x.to(ember.int64), 0).tolist() == [3, 3, 3, 3]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_over_leading_dims_are_products_with_ones(fast, dtype):
    # bias gradients: sums over the leading dims of a C-contiguous tensor go to cuBLAS (ones @ x), another
    # summation order than CuPy's reduction: compared with float64 sums on the CPU
    _, reductions = fast
    rng = np.random.default_rng(3)
    for shape, dims in [((64, 33, 5), 0), ((64, 33, 5), [0]), ((64, 33, 5), [1, 0]), ((16384, 96), 0), ((1, 7), 0)]:
        host_x = rng.standard_normal(shape).astype(dtype)
        x = ember.from_numpy(host_x).to("cuda")
        for keepdim in (False, True):
            lead = (dims,) if isinstance(dims, int) else tuple(dims)
            want = host_x.astype(np.float64).sum(axis=lead, keepdims=keepdim)
            got = ember.sum(x, dims, keepdim)
            assert got.shape == want.shape and got.dtype == x.dtype
            rows = int(np.prod([shape[d] for d in lead]))
            np.testing.assert_allclose(host(got), want, rtol=0, atol=TOL[dtype] * rows)
    assert reductions._leading_sum(x._data, 1, False).shape == (7,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_backward_gives_the_formulas_values(fast, dtype):
    # the fused backward of a pass that records nothing: the same cuBLAS calls and column sums as the
    # formulas' matmul / transpose / sum ops, so the same bits; declined calls return None
    products, _ = fast
    rng = np.random.default_rng(4)
    for lead in [(128,), (4, 6)]:
        g = ember.from_numpy(rng.standard_normal((*lead, 17)).astype(dtype)).to("cuda")
        x = ember.from_numpy(rng.standard_normal((*lead, 33)).astype(dtype)).to("cuda")
        w = ember.from_numpy(rng.standard_normal((17, 33)).astype(dtype)).to("cuda")
        dx, dw, db = products.linear_backward(g, x, w, (True, True, True))
        g2, x2 = g.reshape(-1, 17), x.reshape(-1, 33)
        np.testing.assert_array_equal(host(dx), host(ember.matmul(g2, w).reshape(x.shape)))
        np.testing.assert_array_equal(host(dw), host(ember.matmul(g2.t(), x2)))
        np.testing.assert_array_equal(host(db), host(ember.sum(g2, [0])))
        assert products.linear_backward(g, x, w, (False, True, False))[0::2] == (None, None)
    assert products.linear_backward(g, x, w.to(ember.float16), (True, True, True)) is None
    assert products.linear_backward(g.cpu(), x.cpu(), w.cpu(), (True, True, True)) is None


def test_float16_linear_and_matmul_take_cublas_and_match_float32(fast):
    # autocast's products on cuda: float16 operands, float32 accumulation, one rounding (the generic path
    # computed a float32 GEMM between casts: the same values up to the order of the sums)
    products, _ = fast
    rng = np.random.default_rng(3)
    x32 = rng.standard_normal((128, 784)).astype(np.float16).astype(np.float32)
    w32 = (rng.standard_normal((512, 784)) / 28).astype(np.float16).astype(np.float32)
    b32 = rng.standard_normal(512).astype(np.float16).astype(np.float32)
    x, w, b = (ember.from_numpy(a.astype(np.float16)).to("cuda") for a in (x32, w32, b32))
    assert products.linear(x, w, b) is not None and products.matmul(x, w.t()) is not None
    product = x32.astype(np.float64) @ w32.T.astype(np.float64)
    got = host(F.linear(x, w, b))
    assert got.dtype == np.float16
    # the product rounded to float16, then the bias added in float32 and rounded again
    want = (product.astype(np.float16).astype(np.float32) + b32).astype(np.float16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(host(ember.matmul(x, w.t())).astype(np.float32), product.astype(np.float16),
                               rtol=2e-3, atol=2e-3)
    # gradients through linear_backward's float16 path
    for t in (x, w, b):
        t.requires_grad_(True)
    seed = rng.standard_normal((128, 512)).astype(np.float16)
    F.linear(x, w, b).backward(ember.from_numpy(seed).to("cuda"))
    s64 = seed.astype(np.float64)
    np.testing.assert_allclose(host(x.grad).astype(np.float64), s64 @ w32, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(host(w.grad).astype(np.float64), s64.T @ x32, rtol=1e-2, atol=5e-2)
    np.testing.assert_allclose(host(b.grad).astype(np.float64), s64.sum(0), rtol=1e-2, atol=1e-2)


def test_float16_autocast_step_matches_float32_within_half_precision(fast):
    rng = np.random.default_rng(4)
    x = ember.from_numpy(rng.standard_normal((64, 32)).astype(np.float32)).to("cuda")
    model = ember.nn.Sequential(ember.nn.Linear(32, 16), ember.nn.ReLU(), ember.nn.Linear(16, 4)).to("cuda")
    with ember.autocast("cuda"):
        out = model(x)
    assert out.dtype == ember.float16
    want = model(x)
    np.testing.assert_allclose(host(out).astype(np.float32), host(want), rtol=1e-2, atol=1e-2)
