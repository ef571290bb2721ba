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
