"""Convolution, transposed convolution, im2col (unfold) and fold on cuda, against CPU.

The CUDA kernels of these ops (``ember._ops.nn_conv``: ``_xp_conv_forward`` and friends) use only the
array namespace of their inputs. The tests without the ``cuda`` marker run those same kernels on numpy
arrays here and compare them with the CPU kernels (``ember._C``), forward and through autograd; the
``cuda`` tests compare cuda results and gradients with CPU ones.
"""

import itertools

import numpy as np
import pytest

import ember
import ember.autograd
from ember._ops import nn_conv
from ember._ops._registry import registry

F = ember.nn.functional

_CONV_OPS = ("convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "im2col", "fold")
_TOL = {ember.float16: (1e-2, 1e-2), ember.bfloat16: (1.6e-2, 5e-2), ember.float32: (1e-4, 1e-5), ember.complex64: (1e-4, 1e-5),
        ember.float64: (1e-10, 1e-10), ember.complex128: (1e-10, 1e-10)}


def _make(shape, dtype, seed, device="cpu"):
    rng = np.random.default_rng(seed)
    if dtype.is_floating_point or dtype.is_complex:
        a = rng.standard_normal(shape)
        if dtype.is_complex:
            a = a + 1j * rng.standard_normal(shape)
    else:
        a = rng.integers(-3, 4, shape)
    return ember.tensor(a.astype(dtype.numpy_dtype), device=device)


def _host(t):
    return t.detach().cpu().numpy()


def _check(got, expected, dtype):
    assert got.dtype is expected.dtype and tuple(got.shape) == tuple(expected.shape)
    if dtype in _TOL:
        rtol, atol = _TOL[dtype]
        np.testing.assert_allclose(_host(got), _host(expected), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(_host(got), _host(expected))


# (op, input shape, weight shape, bias?, kwargs): forward and transposed, 1-3 spatial dims
_CASES = [
    ("conv1d", (2, 4, 9), (6, 4, 3), True, {}),
    ("conv1d", (2, 4, 9), (6, 2, 3), False, {"stride": 2, "padding": 1, "groups": 2}),
    ("conv1d", (4, 9), (3, 4, 4), True, {"padding": "same", "dilation": 2}),
    ("conv2d", (3, 4, 8, 7), (6, 4, 3, 3), True, {"padding": 1}),
    ("conv2d", (2, 4, 8, 7), (6, 2, 3, 2), False, {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2),
                                                   "groups": 2}),
    ("conv2d", (2, 3, 6, 6), (6, 1, 3, 3), True, {"padding": 1, "groups": 3}),  # depthwise
    ("conv2d", (2, 4, 5, 5), (3, 4, 1, 1), False, {}),  # 1x1
    ("conv2d", (4, 6, 5), (3, 4, 2, 2), False, {"padding": "same"}),  # unbatched, even kernel
    ("conv3d", (2, 2, 5, 4, 4), (3, 2, 2, 3, 2), True, {"stride": (1, 2, 1), "padding": 1}),
    ("conv3d", (1, 4, 4, 5, 4), (4, 2, 2, 2, 2), False, {"dilation": 2, "padding": (1, 0, 1), "groups": 2}),
    ("conv_transpose1d", (2, 4, 6), (4, 3, 3), True, {"stride": 2, "padding": 1, "output_padding": 1}),
    ("conv_transpose2d", (2, 4, 4, 3), (4, 2, 3, 2), True, {"stride": 2, "padding": 1, "output_padding": 1,
                                                             "groups": 2}),
    ("conv_transpose2d", (4, 3, 3), (4, 2, 3, 3), False, {"dilation": 2, "stride": 2}),  # unbatched
    ("conv_transpose2d", (2, 3, 5, 5), (3, 4, 3, 3), False, {"padding": 1}),
    ("conv_transpose3d", (1, 2, 3, 3, 2), (2, 3, 2, 2, 2), True, {"stride": (2, 1, 2), "output_padding": (1, 0, 0)}),
]
_IDS = [f"{op}-{i}" for i, (op, *_) in enumerate(_CASES)]


def _run_case(case, dtype, device, requires_grad=False):
    op, x_shape, w_shape, with_bias, kwargs = case
    x = _make(x_shape, dtype, 1, device)
    w = _make(w_shape, dtype, 2, device)
    out_channels = w_shape[1] * kwargs.get("groups", 1) if op.startswith("conv_transpose") else w_shape[0]
    b = _make((out_channels,), dtype, 3, device) if with_bias else None
    leaves = [t for t in (x, w, b) if t is not None]
    if requires_grad:
        for t in leaves:
            t.requires_grad_(True)
    return getattr(F, op)(x, w, b, **kwargs), leaves


@pytest.fixture
def xp_kernels_on_cpu(monkeypatch):
    """The CUDA kernels of the convolution ops, installed as their CPU kernels (they run on numpy arrays too)."""
    for name in _CONV_OPS:
        op = registry[name]
        monkeypatch.setitem(op.kernels, "cpu", op.kernels["cuda"])


# -- the namespace-generic kernels on numpy arrays (run everywhere) -------------------------------------------


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.complex64, ember.int64], ids=str)
@pytest.mark.parametrize("case", _CASES, ids=_IDS)
def test_xp_kernels_match_cpu_kernels_on_numpy(case, dtype):
    expected, _ = _run_case(case, dtype, "cpu")
    op = registry[case[0]]
    x, w = _make(case[1], dtype, 1), _make(case[2], dtype, 2)
    out_channels = case[2][1] * case[4].get("groups", 1) if case[0].startswith("conv_transpose") else case[2][0]
    b = _make((out_channels,), dtype, 3) if case[3] else None
    got = op.kernels["cuda"](x, w, b, **case[4])
    assert type(got) is np.ndarray and got.flags.c_contiguous
    _check(ember.tensor(got), expected, dtype)


@pytest.mark.parametrize("case", _CASES, ids=_IDS)
def test_xp_kernels_gradients_match_cpu_on_numpy(case, request):
    out, leaves = _run_case(case, ember.float64, "cpu", requires_grad=True)
    g = _make(tuple(out.shape), ember.float64, 4)
    expected = ember.autograd.grad(out, leaves, g)
    request.getfixturevalue("xp_kernels_on_cpu")
    out, leaves = _run_case(case, ember.float64, "cpu", requires_grad=True)
    got = ember.autograd.grad(out, leaves, g)
    for a, e in zip(got, expected):
        _check(a, e, ember.float64)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bool, ember.complex64, ember.float16], ids=str)
def test_xp_im2col_and_fold_match_cpu_on_numpy(dtype):
    for shape, kwargs in (((2, 3, 6, 5), {"kernel_size": 2}),
                          ((3, 6, 7), {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": 2}),
                          ((0, 2, 4, 4), {"kernel_size": 3, "padding": 1})):
        x = _make(shape, ember.float32, 5) > 0 if dtype is ember.bool else _make(shape, dtype, 5)
        cols = F.unfold(x, **kwargs)
        got = nn_conv._im2col_cuda(x, **kwargs)
        np.testing.assert_array_equal(got, cols.numpy())
        folded = F.fold(cols, shape[-2:], **kwargs)
        got = nn_conv._fold_cuda(cols, shape[-2:], **kwargs)
        assert got.dtype == folded.numpy().dtype and got.shape == tuple(folded.shape)
        np.testing.assert_allclose(got.astype(np.complex128), folded.numpy().astype(np.complex128), rtol=1e-3,
                                   atol=1e-3)


def test_xp_conv_forward_sweep_matches_cpu_on_numpy():
    """Strides, paddings, dilations, groups, batch sizes (0 included) and dtypes against ember._C's kernels."""
    rng = np.random.default_rng(0)
    for n, dtype, groups, stride, pad, dilation, batch in itertools.product(
            (1, 2, 3), (np.float32, np.int8), (1, 2), (1, 2), (0, 1), (1, 2), (0, 2)):
        if dilation > 1 and dtype is np.int8:
            continue
        x = rng.integers(-3, 3, (batch, 4, *(7, 6, 5)[:n])).astype(dtype)
        w = rng.integers(-3, 3, (6, 4 // groups, *(3, 2, 2)[:n])).astype(dtype)
        b = rng.integers(-3, 3, (6,)).astype(dtype)
        args = (b, (stride,) * n, (pad,) * n, (pad,) * n, (dilation,) * n, groups)
        expected = nn_conv._conv_forward(x, w, *args)
        got = nn_conv._xp_conv_forward(x, w, *args)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        wt = rng.integers(-3, 3, (4, 6 // groups, *(3, 2, 2)[:n])).astype(np.float32)
        op = (stride - 1,) * n
        args = (None, (stride,) * n, (pad,) * n, op, (dilation,) * n, groups)
        expected = nn_conv._conv_transpose_forward(x.astype(np.float32), wt, *args)
        got = nn_conv._xp_conv_transpose_forward(x.astype(np.float32), wt, *args)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# -- cuda against CPU --------------------------------------------------------------------------------------


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16, ember.float32, ember.float64, ember.complex64,
                                   ember.int64, ember.int8], ids=str)
@pytest.mark.parametrize("case", _CASES, ids=_IDS)
def test_conv_forward_matches_cpu(case, dtype):
    op = case[0]
    if dtype is ember.int8 and (op.startswith("conv_transpose") or case[4].get("dilation", 1) != 1):
        pytest.skip("PyTorch (and ember) have no int8 transposed or dilated convolution")
    expected, _ = _run_case(case, dtype, "cpu")
    got, _ = _run_case(case, dtype, "cuda")
    assert got.device.type == "cuda" and got.is_contiguous()
    _check(got, expected, dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=str)
@pytest.mark.parametrize("case", _CASES, ids=_IDS)
def test_conv_gradients_match_cpu(case, dtype):
    results = []
    for device in ("cpu", "cuda"):
        out, leaves = _run_case(case, dtype, device, requires_grad=True)
        g = _make(tuple(out.shape), dtype, 4, device)
        results.append(ember.autograd.grad(out, leaves, g))
    for got, expected in zip(results[1], results[0]):
        assert got.device.type == "cuda"
        _check(got, expected, dtype)


@pytest.mark.cuda
def test_complex_conv_gradients_match_cpu():
    results = []
    for device in ("cpu", "cuda"):
        x = _make((2, 3, 6, 5), ember.complex128, 1, device).requires_grad_(True)
        w = _make((4, 3, 3, 2), ember.complex128, 2, device).requires_grad_(True)
        out = F.conv2d(x, w, stride=(2, 1), padding=1)
        results.append(ember.autograd.grad(out, [x, w], _make(tuple(out.shape), ember.complex128, 4, device)))
    for got, expected in zip(results[1], results[0]):
        _check(got, expected, ember.complex128)


@pytest.mark.cuda
@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_prim_matches_cpu(transposed):
    x = _make((2, 4, 5, 6), ember.float32, 1)
    w = _make((4, 3, 2, 3) if transposed else (6, 2, 2, 3), ember.float32, 2)
    b = _make((6,), ember.float32, 3)
    args = ([2, 1], [1, 0], [1, 2], transposed, [1, 0] if transposed else [0, 0], 2)
    expected = ember.convolution(x, w, b, *args)
    got = ember.convolution(x.cuda(), w.cuda(), b.cuda(), *args)
    _check(got, expected, ember.float32)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.complex64, ember.bool], ids=str)
def test_unfold_and_fold_match_cpu(dtype):
    for shape, kwargs in (((2, 3, 6, 5), {"kernel_size": 2}),
                          ((3, 6, 7), {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": 2}),
                          ((0, 2, 4, 4), {"kernel_size": 3, "padding": 1})):
        x = _make(shape, ember.float32, 5) > 0 if dtype is ember.bool else _make(shape, dtype, 5)
        cols = F.unfold(x, **kwargs)
        got = F.unfold(x.cuda(), **kwargs)
        assert got.device.type == "cuda"
        _check(got, cols, dtype)
        _check(F.fold(cols.cuda(), shape[-2:], **kwargs), F.fold(cols, shape[-2:], **kwargs), dtype)


@pytest.mark.cuda
def test_unfold_and_fold_gradients_match_cpu():
    results = []
    for device in ("cpu", "cuda"):
        x = _make((2, 3, 6, 5), ember.float64, 1, device).requires_grad_(True)
        cols = F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=2)
        y = F.fold(cols * cols, (6, 5), (2, 3), dilation=(1, 2), padding=1, stride=2)
        results.append(ember.autograd.grad(y, [x], _make(tuple(y.shape), ember.float64, 4, device))[0])
    _check(results[1], results[0], ember.float64)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.int64, ember.bool], ids=str)
def test_pad_matches_cpu(dtype):
    from ember.cuda import _backend

    x = _make((2, 3, 5, 4), ember.float32, 1) > 0 if dtype is ember.bool else _make((2, 3, 5, 4), dtype, 1)
    cases = [((1, 2), "constant", None), ((2, 1, -1, 3), "constant", 7), ((1, 2, 2, 0), "reflect", None),
             ((3, 1, 0, 2), "replicate", None), ((2, 2, 1, 3), "circular", None),
             ((-1, 2, 1, -1), "circular", None)]
    for pads, mode, value in cases:
        if dtype is ember.bool and mode != "constant":
            continue
        kwargs = {} if value is None else {"value": value}
        _check(F.pad(x.cuda(), pads, mode, **kwargs), F.pad(x, pads, mode, **kwargs), dtype)
    assert "pad" not in _backend.generic_ops


@pytest.mark.cuda
def test_conv_ops_do_not_take_the_generic_path():
    """Every convolution op has a CUDA kernel of its own: none runs its CPU kernel on CuPy arrays."""
    from ember.cuda import _backend

    case = ("conv2d", (2, 4, 8, 7), (6, 2, 3, 2), False, {"stride": 2, "padding": 1, "groups": 2})
    out, leaves = _run_case(case, ember.float32, "cuda", requires_grad=True)
    ember.autograd.grad(out, leaves, ember.ones_like(out))
    F.fold(F.unfold(leaves[0].detach(), 2), (8, 7), 2)
    assert not set(_CONV_OPS) & _backend.generic_ops


@pytest.mark.cuda
def test_small_cnn_training_step_matches_cpu():
    """Two 3x3 convolutions (32 and 64 channels), as the GPU training benchmark: loss and every gradient."""
    results = []
    for device in ("cpu", "cuda"):
        x = _make((8, 1, 28, 28), ember.float32, 1, device)
        w1 = (_make((32, 1, 3, 3), ember.float32, 2, device) * 0.3).requires_grad_(True)
        b1 = _make((32,), ember.float32, 3, device).requires_grad_(True)
        w2 = (_make((64, 32, 3, 3), ember.float32, 4, device) * 0.05).requires_grad_(True)
        b2 = _make((64,), ember.float32, 5, device).requires_grad_(True)
        h = F.relu(F.conv2d(x, w1, b1, padding=1))
        h = F.relu(F.conv2d(h, w2, b2, stride=2, padding=1))
        loss = (h * h).mean()
        results.append((loss, *ember.autograd.grad(loss, [w1, b1, w2, b2])))
    for got, expected in zip(results[1], results[0]):
        assert got.device.type == "cuda"
        np.testing.assert_allclose(_host(got), _host(expected), rtol=1e-3, atol=1e-5)


# -- the one-launch im2col/col2im CuPy kernels (nn_conv._FUSED_CUDA, off by default) -------------------------


@pytest.mark.cuda
@pytest.mark.parametrize("case", _CASES, ids=_IDS)
def test_fused_cuda_kernels_match_cpu(case, monkeypatch):
    """With the fused kernels on: forward in four dtypes and float64 gradients (swapped views: weight gradients)."""
    monkeypatch.setattr(nn_conv, "_FUSED_CUDA", True)
    for dtype in (ember.float32, ember.float64, ember.complex64, ember.int64):
        expected, _ = _run_case(case, dtype, "cpu")
        got, _ = _run_case(case, dtype, "cuda")
        _check(got, expected, dtype)
    results = []
    for device in ("cpu", "cuda"):
        out, leaves = _run_case(case, ember.float64, device, requires_grad=True)
        results.append(ember.autograd.grad(out, leaves, _make(tuple(out.shape), ember.float64, 4, device)))
    for got, expected in zip(results[1], results[0]):
        _check(got, expected, ember.float64)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.complex64, ember.bool], ids=str)
def test_fused_cuda_fold_matches_cpu(dtype, monkeypatch):
    monkeypatch.setattr(nn_conv, "_FUSED_CUDA", True)
    for shape, kwargs in (((2, 3, 6, 5), {"kernel_size": 2}),
                          ((3, 6, 7), {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": 2})):
        x = _make(shape, ember.float32, 5) > 0 if dtype is ember.bool else _make(shape, dtype, 5)
        cols = F.unfold(x, **kwargs)
        _check(F.fold(cols.cuda(), shape[-2:], **kwargs), F.fold(cols, shape[-2:], **kwargs), dtype)
        # the same columns, stored transposed (a non-contiguous input)
        strided = cols.cuda().transpose(-1, -2).contiguous().transpose(-1, -2)
        _check(F.fold(strided, shape[-2:], **kwargs), F.fold(cols, shape[-2:], **kwargs), dtype)
