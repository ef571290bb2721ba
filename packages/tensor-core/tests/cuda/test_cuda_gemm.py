"""float32/float64 products on cuda (CuPy's matmul, and the direct cuBLAS call of ember.cuda._bf16 that
DIRECT_GEMM switches on) against each other and against the CPU: shapes, transposed and strided operands,
batches, 1-D operands."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda

_TOL = {ember.float32: dict(rtol=1e-4, atol=2e-4), ember.float64: dict(rtol=1e-10, atol=1e-10)}  # sums of up to 784 terms


def _pair(shape_a, shape_b, dtype, rng):
    a = ember.from_numpy(rng.standard_normal(shape_a)).to(dtype)
    b = ember.from_numpy(rng.standard_normal(shape_b)).to(dtype)
    return a, b


_SHAPES = [((5, 7), (7, 3)), ((128, 784), (784, 512)), ((1, 9), (9, 1)), ((4, 6), (6,)), ((6,), (6, 4)),
           ((6,), (6,)), ((3, 4, 5), (5, 2)), ((3, 4, 5), (3, 5, 2)), ((2, 1, 4, 5), (3, 5, 2)), ((0, 4), (4, 3)),
           ((4, 0), (0, 3)), ((2, 3, 0), (2, 0, 5))]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("shapes", _SHAPES, ids=str)
def test_matmul_matches_cpu_and_cupy(shapes, dtype):
    import cupy

    from ember.cuda import _bf16

    a, b = _pair(*shapes, dtype, np.random.default_rng(0))
    expected = ember.matmul(a, b)
    got = ember.matmul(a.cuda(), b.cuda())
    assert got.dtype is dtype and got.shape == expected.shape and got.device.type == "cuda"
    np.testing.assert_allclose(got.cpu().numpy(), expected.numpy(), **_TOL[dtype])
    direct = _bf16.matmul(a.cuda()._data, b.cuda()._data) if a.numel() and b.numel() else None
    if direct is not None:
        np.testing.assert_allclose(cupy.asnumpy(direct), cupy.asnumpy(cupy.matmul(a.cuda()._data, b.cuda()._data)),
                                   **_TOL[dtype])


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_transposed_strided_and_flipped_operands(dtype):
    rng = np.random.default_rng(1)
    x = ember.from_numpy(rng.standard_normal((64, 48))).to(dtype)
    w = ember.from_numpy(rng.standard_normal((32, 48))).to(dtype)
    big = ember.from_numpy(rng.standard_normal((10, 64, 96))).to(dtype)
    cases = [(x, w.t()), (x.t(), x), (x[::2], w.t()), (big[:, :, ::2], x.t()[:, :40].t()[:48]),
             (x.flip(0), w.t()), (big.transpose(1, 2)[:, :48], x[:, :48].t()[:48])]
    for left, right in cases:
        if left.shape[-1] != right.shape[-2]:
            continue
        got = ember.matmul(left.cuda(), right.cuda())
        np.testing.assert_allclose(got.cpu().numpy(), ember.matmul(left, right).numpy(), **_TOL[dtype])


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_addmm_and_baddbmm_fold_beta_into_cublas(dtype):
    rng = np.random.default_rng(2)
    inp = ember.from_numpy(rng.standard_normal((5, 3))).to(dtype)
    m1, m2 = _pair((5, 4), (4, 3), dtype, rng)
    for beta, alpha in ((1, 1), (0.5, 2.0), (0, 1)):
        got = ember.addmm(inp.cuda(), m1.cuda(), m2.cuda(), beta=beta, alpha=alpha)
        np.testing.assert_allclose(got.cpu().numpy(), ember.addmm(inp, m1, m2, beta=beta, alpha=alpha).numpy(),
                                   **_TOL[dtype])
    bias = ember.from_numpy(rng.standard_normal(3)).to(dtype)  # broadcast input
    np.testing.assert_allclose(ember.addmm(bias.cuda(), m1.cuda(), m2.cuda()).cpu().numpy(),
                               ember.addmm(bias, m1, m2).numpy(), **_TOL[dtype])
    nan = ember.full((5, 3), float("nan"), dtype=dtype)  # beta == 0 ignores input, NaN included
    assert not ember.addmm(nan.cuda(), m1.cuda(), m2.cuda(), beta=0).isnan().any().item()
    b_in = ember.from_numpy(rng.standard_normal((2, 5, 3))).to(dtype)
    b1, b2 = _pair((2, 5, 4), (2, 4, 3), dtype, rng)
    np.testing.assert_allclose(ember.baddbmm(b_in.cuda(), b1.cuda(), b2.cuda(), beta=0.5).cpu().numpy(),
                               ember.baddbmm(b_in, b1, b2, beta=0.5).numpy(), **_TOL[dtype])


def test_direct_gemm_on_and_off_agree(monkeypatch):
    from ember.cuda import _bf16

    a, b = _pair((8, 5), (5, 4), ember.float32, np.random.default_rng(3))
    monkeypatch.setattr(_bf16, "DIRECT_GEMM", True)
    on = ember.matmul(a.cuda(), b.cuda()).cpu().numpy()
    monkeypatch.setattr(_bf16, "DIRECT_GEMM", False)
    off = ember.matmul(a.cuda(), b.cuda()).cpu().numpy()
    np.testing.assert_allclose(on, off, rtol=1e-4, atol=1e-4)


def test_linear_training_gradients_match_cpu():
    rng = np.random.default_rng(4)
    lin = ember.nn.Linear(784, 512)
    x = ember.from_numpy(rng.standard_normal((128, 784)).astype(np.float32))
    lin_cuda = ember.nn.Linear(784, 512).cuda()
    lin_cuda.load_state_dict(lin.state_dict())
    lin(x).square().sum().backward()
    lin_cuda(x.cuda()).square().sum().backward()
    for p, q in zip(lin.parameters(), lin_cuda.parameters()):
        np.testing.assert_allclose(q.grad.cpu().numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-3)
