"""CUDA tensors: creation, moves between devices, printing, views, and ops compared with CPU."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda


def host(t):
    return t.cpu().numpy()


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda d: ember.zeros(2, 3, device=d), np.zeros((2, 3), np.float32)),
        (lambda d: ember.ones((4,), dtype=ember.int64, device=d), np.ones(4, np.int64)),
        (lambda d: ember.full((2, 2), 7, device=d), np.full((2, 2), 7, np.int64)),
        (lambda d: ember.arange(0, 10, 3, device=d), np.arange(0, 10, 3)),
        (lambda d: ember.linspace(0, 1, 5, device=d), np.linspace(0, 1, 5, dtype=np.float32)),
        (lambda d: ember.eye(3, device=d), np.eye(3, dtype=np.float32)),
        (lambda d: ember.tensor([[1.5, 2.0], [3.0, -1.0]], device=d), np.array([[1.5, 2.0], [3.0, -1.0]], np.float32)),
        (lambda d: ember.tensor(True, device=d), np.array(True)),
    ],
)
def test_creation_on_cuda(make, expected):
    t = make("cuda")
    assert t.device == ember.device("cuda", 0) and t.is_cuda and not t.is_cpu
    assert t.get_device() == 0
    np.testing.assert_array_equal(host(t), expected)
    assert host(t).dtype == expected.dtype


def test_empty_and_empty_strided_shapes():
    e = ember.empty(3, 4, device="cuda")
    assert e.shape == (3, 4) and e.device.type == "cuda"
    s = ember.empty_strided((2, 3), (1, 2), device="cuda")
    assert s.stride() == (1, 2)


def test_to_cuda_cpu_roundtrip_and_dtype():
    x = ember.randn(5, 6)
    y = x.to("cuda")
    assert y.device.type == "cuda" and x.device.type == "cpu"
    np.testing.assert_array_equal(host(y), x.numpy())
    assert x.cuda().device == ember.device("cuda:0")
    assert y.cuda() is y and y.to("cuda:0") is y
    z = y.to(ember.float64)
    assert z.device.type == "cuda" and z.dtype is ember.float64
    np.testing.assert_allclose(host(z), x.numpy().astype(np.float64))
    w = y.to("cpu", ember.int32)
    np.testing.assert_array_equal(w.numpy(), x.numpy().astype(np.int32))
    assert y.double().cpu().dtype is ember.float64


def test_numpy_of_cuda_tensor_raises_pytorch_error():
    y = ember.ones(2, device="cuda")
    with pytest.raises(TypeError, match=r"can't convert cuda.* to numpy. Use Tensor.cpu\(\)"):
        y.numpy()
    assert np.asarray(y).tolist() == [1.0, 1.0]  # __array__ copies, as np.asarray(cuda tensor) would not in torch
    assert y.tolist() == [1.0, 1.0] and ember.tensor(3.5, device="cuda").item() == 3.5


def test_printing_names_the_device():
    text = repr(ember.tensor([1.0, 2.0], device="cuda"))
    assert text == "tensor([1., 2.], device='cuda:0')"


def test_cross_device_op_raises():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.ones(2, device="cuda") + ember.ones(2)
    # a zero-dim CPU tensor may join (as in PyTorch)
    r = ember.ones(2, device="cuda") + ember.tensor(2.0)
    assert r.device.type == "cuda" and host(r).tolist() == [3.0, 3.0]


def test_views_share_storage_and_in_place_writes_show_through():
    base = ember.arange(12, dtype=ember.float32, device="cuda")
    v = base.view(3, 4)
    t = v.t()
    assert t.stride() == (1, 4) and not t.is_contiguous()
    row = v[1]
    row.add_(100)
    assert host(base).tolist() == [0, 1, 2, 3, 104, 105, 106, 107, 8, 9, 10, 11]
    assert base._version == row._version > 0
    np.testing.assert_array_equal(host(t), host(v).T)
    np.testing.assert_array_equal(host(t.contiguous()), host(v).T)
    assert t.contiguous().is_contiguous()
    np.testing.assert_array_equal(host(v[:, 1:3].clone()), host(v)[:, 1:3])
    sl = v[::2, 1]
    assert sl.storage_offset() == 1 and host(sl).tolist() == [1, 9]


def test_copy_between_devices_and_fill():
    a = ember.zeros(3, device="cuda")
    a.copy_(ember.tensor([1, 2, 3]))  # from the CPU, with a dtype conversion
    assert host(a).tolist() == [1.0, 2.0, 3.0]
    b = ember.empty(3)
    b.copy_(a)
    assert b.tolist() == [1.0, 2.0, 3.0]
    a.fill_(4)
    a.zero_()
    assert host(a).tolist() == [0.0, 0.0, 0.0]


_UNARY = ["neg", "abs", "exp", "log1p", "sin", "tanh", "sigmoid", "sqrt", "relu", "floor", "sign"]
# (name, which operands may be Python numbers)
_BINARY = [("add", "both"), ("sub", "both"), ("mul", "both"), ("div", "both"), ("eq", "other"), ("lt", "other"),
           ("maximum", "none"), ("atan2", "none")]
_REDUCE = [("sum", {}), ("mean", {"dim": 1}), ("amax", {"dim": 0}), ("prod", {"dim": 1}), ("std", {}),
           ("argmax", {"dim": 1}), ("logsumexp", {"dim": 1}), ("cumsum", {"dim": 1}), ("var", {"dim": 0})]


@pytest.mark.parametrize("name", _UNARY)
def test_unary_matches_cpu(name):
    x = ember.rand(4, 5) * 3 + 0.1
    expected = getattr(ember, name)(x)
    got = getattr(ember, name)(x.cuda())
    assert got.device.type == "cuda" and got.dtype is expected.dtype
    np.testing.assert_allclose(host(got), expected.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name, scalar", _BINARY, ids=[n for n, _ in _BINARY])
def test_binary_matches_cpu_with_broadcasting_and_scalars(name, scalar):
    a, b = ember.rand(4, 5) + 0.5, ember.rand(5) + 0.5
    fn = getattr(ember, name)
    calls = [(a, b), (a.double(), b)] + {"both": [(a, 2.0), (3, a)], "other": [(a, 2.0)], "none": []}[scalar]
    for args_cpu in calls:
        expected = fn(*args_cpu)
        got = fn(*(x.cuda() if isinstance(x, ember.Tensor) else x for x in args_cpu))
        assert got.dtype is expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(host(got), expected.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name, kwargs", _REDUCE, ids=[n for n, _ in _REDUCE])
def test_reductions_match_cpu(name, kwargs):
    x = ember.rand(6, 7, dtype=ember.float64)
    expected = getattr(ember, name)(x, **kwargs)
    got = getattr(ember, name)(x.cuda(), **kwargs)
    assert got.device.type == "cuda" and got.dtype is expected.dtype
    np.testing.assert_allclose(host(got), expected.numpy(), rtol=1e-10)


def test_matmul_and_softmax_match_cpu():
    a, b = ember.randn(64, 32), ember.randn(32, 16)
    np.testing.assert_allclose(host(a.cuda() @ b.cuda()), (a @ b).numpy(), rtol=1e-4, atol=1e-4)
    s = ember.softmax(a.cuda(), dim=1)
    np.testing.assert_allclose(host(s), ember.softmax(a, dim=1).numpy(), rtol=1e-5, atol=1e-6)


def test_indexing_matches_cpu():
    x = ember.randn(5, 6)
    xc = x.cuda()
    np.testing.assert_array_equal(host(xc[1:4, ::2]), x[1:4, ::2].numpy())
    np.testing.assert_array_equal(host(xc[xc > 0]), x[x > 0].numpy())
    idx = ember.tensor([0, 3, 4])
    np.testing.assert_array_equal(host(xc[idx.cuda()]), x[idx].numpy())


# --------------------------------------------------------------------------- bfloat16 on the GPU
# A cuda bfloat16 tensor holds a CuPy array of ml_dtypes' bfloat16 (CuPy >= 14); the CPU bfloat16 tensor
# of the same values is the oracle.

BF16 = ember.bfloat16


def bits(t):
    """The raw 16-bit patterns of a bfloat16 tensor (on the host)."""
    return t.cpu().numpy().view(np.uint16)


def f32(t):
    return t.cpu().float().numpy()


def assert_bf16_close(got, expected, rtol=1e-2, atol=1e-2):
    assert got.device.type == "cuda" and got.dtype is expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(f32(got), f32(expected), rtol=rtol, atol=atol)


@pytest.mark.parametrize("shape", [(), (1,), (3, 4), (2, 0, 3)])
def test_bfloat16_moves_between_devices_bit_for_bit(shape):
    x = ember.randn(*shape, dtype=BF16) if shape else ember.tensor(-2.71875, dtype=BF16)
    y = x.cuda()
    assert y.dtype is BF16 and y.device.type == "cuda" and y.shape == x.shape
    assert str(y._data.dtype) == "bfloat16"
    np.testing.assert_array_equal(bits(y), x.numpy().view(np.uint16))
    assert y.cpu().shape == x.shape
    z = ember.tensor(1.5, dtype=BF16, device="cuda")  # a 0-dim tensor stays 0-dim (regression)
    assert z.shape == () and z.item() == 1.5


def test_bfloat16_creation_and_conversions_on_cuda():
    assert ember.zeros(2, 3, dtype=BF16, device="cuda").dtype is BF16
    np.testing.assert_array_equal(f32(ember.full((2,), 1.5, dtype=BF16, device="cuda")), [1.5, 1.5])
    np.testing.assert_array_equal(f32(ember.arange(4, dtype=BF16, device="cuda")), [0, 1, 2, 3])
    x = ember.randn(50) * 3
    xc = x.cuda()
    # float32 -> bfloat16 rounds to nearest even, as on CPU
    np.testing.assert_array_equal(bits(xc.bfloat16()), x.bfloat16().numpy().view(np.uint16))
    np.testing.assert_array_equal(xc.bfloat16().float().cpu().numpy(), x.bfloat16().float().numpy())
    assert xc.bfloat16().to(ember.int32).cpu().tolist() == x.bfloat16().to(ember.int32).tolist()
    r = ember.randn(3, 4, dtype=BF16, device="cuda")
    assert r.dtype is BF16 and r.device.type == "cuda"
    assert "dtype=ember.bfloat16" in repr(r) and "device='cuda:0'" in repr(r)


_BF16_UNARY = ["neg", "abs", "exp", "log1p", "sin", "tanh", "sigmoid", "sqrt", "relu", "floor", "ceil", "trunc",
               "round", "sign", "erf", "gelu"]


@pytest.mark.parametrize("name", _BF16_UNARY)
def test_bfloat16_pointwise_matches_cpu(name):
    x = (ember.rand(6, 7) * 4 + 0.05).bfloat16()
    fn = getattr(ember, name, None) or getattr(ember.nn.functional, name)
    assert_bf16_close(fn(x.cuda()), fn(x))


def test_bfloat16_binary_ops_scalars_and_comparisons_match_cpu():
    a, b = ember.randn(4, 5, dtype=BF16), ember.randn(5, dtype=BF16)
    ac, bc = a.cuda(), b.cuda()
    for got, expected in [(ac + bc, a + b), (ac * bc, a * b), (ac / (bc.abs() + 1), a / (b.abs() + 1)),
                          (ac - 1.5, a - 1.5), (2.5 * ac, 2.5 * a), (ac ** 2, a ** 2),
                          (ember.maximum(ac, bc), ember.maximum(a, b)), (ember.clamp(ac, -0.5, 0.5), ember.clamp(a, -0.5, 0.5)),
                          (ember.where(ac > 0, ac, bc), ember.where(a > 0, a, b)),
                          (ember.remainder(ac, 0.75), ember.remainder(a, 0.75)),
                          (ember.floor_divide(ac, 0.75), ember.floor_divide(a, 0.75))]:  # fmt: skip
        assert_bf16_close(got, expected)
    assert ((ac > bc).cpu() == (a > b)).all()
    assert (ac.float() + bc).dtype is ember.float32  # promotion as on CPU


@pytest.mark.parametrize(
    "name, call",
    [
        ("sum", lambda x: x.sum(dim=1)),
        ("mean", lambda x: x.mean()),
        ("amax", lambda x: x.amax(dim=0)),
        ("cumsum", lambda x: ember.cumsum(x, dim=1)),  # CuPy's scan has no bfloat16: float32 detour
        ("cumprod", lambda x: ember.cumprod(x * 0.5 + 1, dim=1)),
        ("sort", lambda x: ember.sort(x, dim=1).values),  # CuPy can't sort bfloat16: float32 detour
        ("topk", lambda x: ember.topk(x, 3, dim=1).values),
        ("median", lambda x: ember.median(x, dim=1).values),
        ("softmax", lambda x: ember.softmax(x, dim=1)),
        ("log_softmax", lambda x: ember.log_softmax(x, dim=1)),
        ("layer_norm", lambda x: ember.nn.functional.layer_norm(x, (7,))),
        ("var", lambda x: x.var(dim=1)),
    ],
)
def test_bfloat16_reductions_and_scans_match_cpu(name, call):
    x = ember.randn(6, 7, dtype=BF16)
    assert_bf16_close(call(x.cuda()), call(x), rtol=2e-2, atol=2e-2)


def test_bfloat16_index_ops_without_cupy_support_run_in_float32_and_write_back():
    # cupy.add.at/scatter_add have no bfloat16: the kernels compute in float32 and round back into
    # the destination
    base = ember.randn(5, 3, dtype=BF16)
    base[4, 2] = float("nan")
    src = ember.randn(4, 3, dtype=BF16)
    idx = ember.tensor([0, 2, 0, 1])
    expected = base.clone().index_add_(0, idx, src)
    dst = base.cuda()
    out = dst.index_add_(0, idx.cuda(), src.cuda())
    assert out is dst and dst.dtype is BF16
    assert_bf16_close(dst, expected)
    np.testing.assert_array_equal(f32(dst)[3:], base.float().numpy()[3:])  # rows 3, 4 untouched (NaN kept)
    scattered = ember.zeros(3, 4, dtype=BF16).scatter_add(1, ember.tensor([[0, 1, 0, 3]] * 3), ember.ones(3, 4,
                                                                                                    dtype=BF16))
    got = ember.zeros(3, 4, dtype=BF16, device="cuda").scatter_add(
        1, ember.tensor([[0, 1, 0, 3]] * 3, device="cuda"), ember.ones(3, 4, dtype=BF16, device="cuda"))
    assert_bf16_close(got, scattered)


def test_bfloat16_inputs_are_not_modified_by_the_float32_detour():
    x = ember.randn(4, 6, dtype=BF16)
    x[0, 0] = float("nan")
    xc = x.cuda()
    before = bits(xc).copy()
    ember.sort(xc, dim=1)
    ember.cumsum(xc, dim=0)
    np.testing.assert_array_equal(bits(xc), before)


# ---- bfloat16 matrix products: cuBLAS GEMM with bfloat16 inputs and float32 accumulation


def _bf16_pair(shape_a, shape_b, seed=0):
    gen = ember.Generator().manual_seed(seed)
    return ember.randn(*shape_a, generator=gen).bfloat16(), ember.randn(*shape_b, generator=gen).bfloat16()


def _product_close(got, a, b, fn):
    """``got`` against ``fn`` in float64 from the same bfloat16 inputs, within bfloat16 rounding."""
    ref = fn(a.double(), b.double()).numpy()
    assert got.dtype is BF16 and got.device.type == "cuda" and tuple(got.shape) == ref.shape
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    np.testing.assert_allclose(f32(got), ref, rtol=1e-2, atol=1e-2 * scale)


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((64, 96), (96, 48)), ((1, 7), (7, 1)), ((7,), (7, 5)), ((5, 7), (7,)), ((7,), (7,)), ((3, 64, 96), (96, 8)),
     ((4, 5, 7), (4, 7, 3)), ((4, 5, 7), (1, 7, 3)), ((2, 1, 5, 7), (3, 7, 2)), ((7,), (4, 7, 3)), ((0, 7), (7, 3)),
     ((5, 0), (0, 3)), ((2, 3, 0), (2, 0, 4))],
)
def test_bfloat16_matmul_shapes_match_cpu(shape_a, shape_b):
    a, b = _bf16_pair(shape_a, shape_b)
    got = a.cuda() @ b.cuda()
    _product_close(got, a, b, ember.matmul)
    assert got.shape == (a @ b).shape


def test_bfloat16_matmul_of_transposed_and_strided_operands():
    a, b = _bf16_pair((96, 64), (48, 96))
    ac, bc = a.cuda(), b.cuda()
    _product_close(ac.t() @ bc.t(), a.t(), b.t(), ember.matmul)  # column-major views: cuBLAS transpose flags
    # neither row- nor column-major: copied to C order first
    _product_close(ac[::2, ::2] @ bc[:, :64:2].t(), a[::2, ::2], b[:, :64:2].t(), ember.matmul)
    batch_a, batch_b = _bf16_pair((4, 32, 16), (4, 32, 8))
    _product_close(batch_a.cuda().transpose(1, 2) @ batch_b.cuda(), batch_a.transpose(1, 2), batch_b, ember.matmul)


def test_bfloat16_mm_bmm_mv_dot_linear_match_cpu():
    a, b = _bf16_pair((33, 65), (65, 17))
    _product_close(ember.mm(a.cuda(), b.cuda()), a, b, ember.mm)
    v = b[:, 0].contiguous()
    _product_close(ember.mv(a.cuda(), v.cuda()), a, v, ember.mv)
    _product_close(ember.dot(v.cuda(), v.cuda()), v, v, ember.dot)
    x, y = _bf16_pair((3, 9, 20), (3, 20, 6))
    _product_close(ember.bmm(x.cuda(), y.cuda()), x, y, ember.bmm)
    inp, w = _bf16_pair((2, 5, 65), (17, 65))
    bias = ember.randn(17).bfloat16()
    got = ember.nn.functional.linear(inp.cuda(), w.cuda(), bias.cuda())
    assert_bf16_close(got, ember.nn.functional.linear(inp, w, bias), rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, 2), (0, 1.5), (1, -1)])
def test_bfloat16_addmm_and_baddbmm_round_once_like_cpu(beta, alpha):
    m1, m2 = _bf16_pair((9, 40), (40, 7))
    inp = ember.randn(7).bfloat16()
    if beta == 0:
        inp[3] = float("nan")  # beta == 0 ignores input, NaN included
    got = ember.addmm(inp.cuda(), m1.cuda(), m2.cuda(), beta=beta, alpha=alpha)
    expected = ember.addmm(inp, m1, m2, beta=beta, alpha=alpha)  # CPU: float32 product, one rounding
    assert not np.isnan(f32(got)).any()
    assert_bf16_close(got, expected, rtol=1e-2, atol=2e-2)
    b1, b2 = _bf16_pair((3, 9, 40), (3, 40, 7), seed=1)
    binp = ember.randn(3, 1, 7).bfloat16()
    got = ember.baddbmm(binp.cuda(), b1.cuda(), b2.cuda(), beta=beta, alpha=alpha)
    assert_bf16_close(got, ember.baddbmm(binp, b1, b2, beta=beta, alpha=alpha), rtol=1e-2, atol=2e-2)


def test_bfloat16_matmul_backward_matches_cpu():
    a, b = _bf16_pair((16, 24), (24, 8))
    ac, bc = a.cuda().requires_grad_(), b.cuda().requires_grad_()
    (ac @ bc).sum().backward()
    ar, br = a.clone().requires_grad_(), b.clone().requires_grad_()
    (ar @ br).sum().backward()
    assert ac.grad.dtype is BF16 and ac.grad.device.type == "cuda"
    assert_bf16_close(ac.grad, ar.grad, rtol=2e-2, atol=5e-2)
    assert_bf16_close(bc.grad, br.grad, rtol=2e-2, atol=5e-2)


def test_bfloat16_matmul_runs_on_the_tensor_cores():
    # cuBLAS' bfloat16 GEMM is over 10x faster than the float32 (non-TF32) product the generic path would
    # run (about 840 vs 51 TFLOP/s for 8192^3 on an H200); 100 TFLOP/s separates the two with room for a
    # busy GPU and smaller GPUs
    n = 4096
    a = ember.randn(n, n, dtype=BF16, device="cuda")
    b = ember.randn(n, n, dtype=BF16, device="cuda")
    for _ in range(2):
        a @ b
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(5):
            a @ b
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 5)
    tflops = 2 * n**3 / (best * 1e-3) / 1e12
    assert tflops > 100, f"bfloat16 matmul at {tflops:.0f} TFLOP/s: not on cuBLAS' bfloat16 GEMM"
