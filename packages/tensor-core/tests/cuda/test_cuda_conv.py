"""Convolution, transposed convolution, im2col (unfold) and fold on cuda, against CPU.

The CUDA kernels of these ops (``ember.cuda.kernels.conv``: ``_xp_conv_forward`` and friends) use only the
array namespace of their inputs. The tests without the ``cuda`` marker run those same kernels on numpy
arrays here and compare them with the CPU kernels (``ember._C``), forward and through autograd, and run the
CUDA C of the fast float path (``cuda_conv._FAST_CUDA``) compiled for the CPU by g++; the ``cuda`` tests
compare cuda results and gradients with CPU ones.
"""

import itertools

import numpy as np
import pytest

import ember
import ember.autograd
from ember._ops import _spatial, nn_conv
from ember._ops._registry import registry
from ember.cuda.kernels import conv as cuda_conv
from ember.cuda.kernels import conv_fast

F = ember.nn.functional

_CONV_OPS = ("convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "im2col", "fold")
_XP_KERNELS = cuda_conv.kernels()  # the ops' CUDA kernels, which run on numpy arrays too
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
        monkeypatch.setitem(op.kernels, "cpu", _XP_KERNELS[name])


# -- the namespace-generic kernels on numpy arrays (run everywhere) -------------------------------------------


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.complex64, ember.int64], ids=str)
@pytest.mark.parametrize("case", _CASES, ids=_IDS)
def test_xp_kernels_match_cpu_kernels_on_numpy(case, dtype):
    expected, _ = _run_case(case, dtype, "cpu")
    x, w = _make(case[1], dtype, 1), _make(case[2], dtype, 2)
    out_channels = case[2][1] * case[4].get("groups", 1) if case[0].startswith("conv_transpose") else case[2][0]
    b = _make((out_channels,), dtype, 3) if case[3] else None
    got = _XP_KERNELS[case[0]](x, w, b, **case[4])
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
        got = cuda_conv._im2col_cuda(x, **kwargs)
        np.testing.assert_array_equal(got, cols.numpy())
        folded = F.fold(cols, shape[-2:], **kwargs)
        got = cuda_conv._fold_cuda(cols, shape[-2:], **kwargs)
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
        got = cuda_conv._xp_conv_forward(x, w, *args)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        wt = rng.integers(-3, 3, (4, 6 // groups, *(3, 2, 2)[:n])).astype(np.float32)
        op = (stride - 1,) * n
        args = (None, (stride,) * n, (pad,) * n, op, (dilation,) * n, groups)
        expected = nn_conv._conv_transpose_forward(x.astype(np.float32), wt, *args)
        got = cuda_conv._xp_conv_transpose_forward(x.astype(np.float32), wt, *args)
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


# -- the one-launch im2col/col2im CuPy kernels (cuda_conv._FUSED_CUDA, off by default) -------------------------


@pytest.mark.cuda
@pytest.mark.parametrize("case", _CASES, ids=_IDS)
def test_fused_cuda_kernels_match_cpu(case, monkeypatch):
    """With the fused kernels on: forward in four dtypes and float64 gradients (swapped views: weight gradients)."""
    monkeypatch.setattr(cuda_conv, "_FUSED_CUDA", True)
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
    monkeypatch.setattr(cuda_conv, "_FUSED_CUDA", True)
    for shape, kwargs in (((2, 3, 6, 5), {"kernel_size": 2}),
                          ((3, 6, 7), {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": 2})):
        x = _make(shape, ember.float32, 5) > 0 if dtype is ember.bool else _make(shape, dtype, 5)
        cols = F.unfold(x, **kwargs)
        _check(F.fold(cols.cuda(), shape[-2:], **kwargs), F.fold(cols, shape[-2:], **kwargs), dtype)
        # the same columns, stored transposed (a non-contiguous input)
        strided = cols.cuda().transpose(-1, -2).contiguous().transpose(-1, -2)
        _check(F.fold(strided, shape[-2:], **kwargs), F.fold(cols, shape[-2:], **kwargs), dtype)


# -- the fast path of float convolutions (cuda_conv._FAST_CUDA, on by default) ---------------------------------
# Forward: one im2col RawKernel, one GEMM, one layout-and-bias RawKernel. Backward (the derivative of
# ``convolution`` in a backward pass that records nothing, groups 1): rows of the output gradient and the bias
# gradient in one launch, im2col and a GEMM for the weight, a GEMM and col2im for the input.

# (input shape, weight shape, bias, stride, padding, dilation, groups)
_FAST_CASES = [
    ((64, 1, 8, 8), (32, 1, 3, 3), True, 1, 1, 1, 1),  # the GPU training benchmark's CNN
    ((64, 32, 8, 8), (64, 32, 3, 3), True, 1, 1, 1, 1),
    ((3, 4, 9, 8), (6, 4, 3, 3), True, 2, 1, 1, 1),  # stride 2
    ((2, 4, 9, 9), (6, 4, 3, 3), False, 1, 2, 2, 1),  # dilation 2
    ((2, 4, 8, 7), (6, 2, 3, 2), True, (2, 1), (1, 0), (1, 2), 2),  # groups 2 (fast forward, generic backward)
    ((2, 3, 6, 5), (5, 3, 3, 3), True, 1, 0, 1, 1),  # no padding
    ((2, 4, 5, 5), (3, 4, 1, 1), False, 1, 0, 1, 1),  # 1x1
    ((2, 3, 7, 6), (4, 3, 4, 3), True, 3, 2, 1, 1),  # stride 3, kernel wider than the stride
    ((2, 4, 9), (6, 4, 3), True, 2, 1, 1, 1),  # 1-D
    ((2, 2, 5, 4, 4), (3, 2, 2, 3, 2), True, (1, 2, 1), 1, 1, 1),  # 3-D
]
_FAST_IDS = [f"fast-{i}" for i in range(len(_FAST_CASES))]


def _fast_case(case, dtype, device):
    x_shape, w_shape, with_bias, stride, padding, dilation, groups = case
    x = _make(x_shape, dtype, 1, device).requires_grad_(True)
    w = (_make(w_shape, dtype, 2, device) * 0.3).requires_grad_(True)
    b = _make((w_shape[0],), dtype, 3, device).requires_grad_(True) if with_bias else None
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(x_shape)]
    out = conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return out, [t for t in (x, w, b) if t is not None]


def _spy(monkeypatch, name):
    """Count the calls of cuda_conv.<name> that return a result (not None: the fast path took the call)."""
    taken = []
    original = getattr(cuda_conv, name)

    def spy(*args):
        result = original(*args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(cuda_conv, name, spy)
    return taken


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=str)
@pytest.mark.parametrize("case", _FAST_CASES, ids=_FAST_IDS)
def test_fast_conv_matches_cpu_and_the_generic_path(case, dtype, monkeypatch):
    """Output and gradients (input, weight, bias) of the fast path against CPU and against the generic CUDA path
    (the xp kernels and the derivative formulas: ``_FAST_CUDA`` off)."""
    forward = _spy(monkeypatch, "_fast_conv_forward")
    backward = _spy(monkeypatch, "_fast_conv_backward")
    results = {}
    for label, device, fast in (("cpu", "cpu", True), ("fast", "cuda", True), ("generic", "cuda", False)):
        monkeypatch.setattr(cuda_conv, "_FAST_CUDA", fast)
        out, leaves = _fast_case(case, dtype, device)
        g = _make(tuple(out.shape), dtype, 4, device)
        results[label] = (out, *ember.autograd.grad(out, leaves, g))
        if label == "fast":
            assert forward and all(forward), "the fast forward did not take the call"
            assert all(backward) and len(backward) == (case[-1] == 1), "the fused backward did not take the call"
    for label in ("fast", "generic"):
        for got, expected in zip(results[label], results["cpu"]):
            assert got.device.type == "cuda" and got.is_contiguous()
            # GEMMs sum in another order on each device: an entry that cancels (0.47 from terms near 50) is off
            # by the rounding of the terms, so the absolute tolerance follows the largest value
            rtol, atol = _TOL[dtype]
            scale = max(1.0, float(np.abs(_host(expected)).max(initial=0.0)))
            assert got.dtype is expected.dtype and tuple(got.shape) == tuple(expected.shape)
            np.testing.assert_allclose(_host(got), _host(expected), rtol=rtol, atol=atol * scale)


@pytest.mark.cuda
def test_fast_conv_takes_strided_inputs_and_expanded_gradients():
    """A sliced (strided) input and weight, and the expanded output gradient of ``out.sum()``, against CPU."""
    results = []
    for device in ("cpu", "cuda"):
        base = _make((3, 4, 9, 16), ember.float32, 1, device).requires_grad_(True)
        wide = _make((8, 6, 3, 3), ember.float32, 2, device).requires_grad_(True)
        x, w = base[:, :, :, ::2], wide[:5, 1:5]  # strided views: the kernels read them in place
        out = F.conv2d(x.transpose(2, 3), w, padding=1, stride=(1, 2))
        results.append((out, *ember.autograd.grad(out.sum(), [base, wide])))
    for got, expected in zip(results[1], results[0]):
        _check(got, expected, ember.float32)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16], ids=str)
def test_fast_conv_forward_of_half_types_matches_cpu(dtype):
    for case in _FAST_CASES[:5]:
        with ember.no_grad():
            expected = _fast_case(case, dtype, "cpu")[0]
            got = _fast_case(case, dtype, "cuda")[0]
        _check(got, expected, dtype)


@pytest.mark.cuda
def test_conv_double_backward_takes_the_formulas():
    """With create_graph the derivative records its formulas (the fused backward records nothing): the first
    gradients equal the fused ones and the second derivative matches CPU."""
    case = _FAST_CASES[2]
    results = []
    for device in ("cpu", "cuda"):
        out, (x, w, b) = _fast_case(case, ember.float64, device)
        fused = ember.autograd.grad((out * out).sum(), [x, w], retain_graph=True)
        gx, gw = ember.autograd.grad((out * out).sum(), [x, w], create_graph=True)
        for a, e in zip((gx, gw), fused):
            _check(a.detach(), e, ember.float64)
        results.append(ember.autograd.grad((gx * gx).sum() + (gw * gw).sum(), [x, w, b]))
    for got, expected in zip(results[1], results[0]):
        _check(got, expected, ember.float64)


# -- the fast path's host side, run here: plans, declines, keys, and the CUDA kernels compiled for the CPU -------


def test_fast_plans_decline_what_the_kernels_do_not_compute():
    f32 = np.dtype(np.float32)
    args = ((2, 3, 5, 5), (300, 100, 20, 4), f32, (4, 3, 3, 3), f32, f32, (1, 1), (1, 1), (1, 1), (1, 1), 1)
    assert conv_fast._fast_forward_plan(*args) is not None
    for i, value in ((2, np.dtype(np.int64)), (2, np.dtype(np.complex64)), (4, np.dtype(np.float64)),
                     (5, np.dtype(np.float64)), (0, (0, 3, 5, 5)), (3, (0, 3, 3, 3))):
        changed = list(args)
        changed[i] = value
        if i == 2:
            changed[4] = changed[5] = value
        assert conv_fast._fast_forward_plan(*changed) is None, (i, value)
    assert conv_fast._fast_forward_plan(*args[:6], (1, 1), (0, 0), (0, 0), (3, 3), 1) is None  # no output position
    back = ((2, 4, 5, 5), (2, 3, 5, 5), (300, 100, 20, 4), f32, f32, (4, 3, 3, 3), f32, (1, 1), (1, 1), (1, 1))
    assert conv_fast._fast_backward_plan(*back) is not None
    assert conv_fast._fast_backward_plan(*back[:3], np.dtype(np.float16), *back[4:]) is None
    assert conv_fast._fast_backward_plan(*back[:4], np.dtype(np.float64), *back[5:]) is None
    # 64-bit indexing only past int32's reach (with room for a grid-stride loop's last step)
    assert conv_fast._fast_index(10, 2**30)[0] is False and conv_fast._fast_index(2**31)[1] is np.int64
    x = _make((2, 3, 5, 5), ember.float32, 1)
    w = _make((4, 3, 3, 3), ember.float32, 2)
    y = _make((2, 4, 5, 5), ember.float32, 3)
    assert cuda_conv.convolution_backward_cuda(y, x, w, (1, 1), (1, 1), (1, 1), 1, (True, True, True)) is None


def test_plan_keys_keep_types_apart():
    """``_key`` of plain tuples/lists: values and their types (True is not 1), and element by element otherwise."""
    key = _spatial._key
    assert key([1, 1]) == key([1, 1]) and key([1, 1]) != key((1, 1))
    assert key([1, 1]) != key([True, 1]) and key([1, 2]) != key([1.0, 2])
    a, b = ember.ones(2, 3), ember.zeros(2, 3)
    assert key([a, 1]) == key([b, 1]) and key([a, 1]) != key([ember.ones(3, 2), 1])
    assert key([[1, 2], 3]) != key([(1, 2), 3])
    x, w = a.reshape(1, 1, 2, 3), ember.ones(1, 1, 1, 1)
    nn_conv._convolution_plan(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    with pytest.raises(TypeError, match="stride"):  # the memoised plan still checks a bool where an int was
        nn_conv._convolution_plan(x, w, None, [True, 1], [0, 0], [1, 1], False, [0, 0], 1)


# The fast path's CUDA C, compiled for the CPU by g++: a block's threads run one after another (as OS threads
# meeting at a std::barrier for a kernel that calls __syncthreads), launched through ctypes with CuPy's argument
# conventions (an array by the address of its first element, numpy scalars by value, a one-element numpy array
# of a void dtype by value: a copy of its bytes, which must be as many as the parameter's C type has). The host
# code runs on numpy arrays that take CuPy's place (a subclass with CuPy's ``_c_contiguous``; new arrays filled
# with NaN, so an element a kernel leaves unwritten shows).

_EMULATION_SHIM = r"""
#include <barrier>
#include <thread>
#include <vector>
struct ember_dim3 { unsigned x, y, z; };
static thread_local ember_dim3 threadIdx, blockIdx;
static ember_dim3 blockDim, gridDim;
static thread_local std::barrier<>* ember_barrier = nullptr;
#define __global__
#define __restrict__ __restrict
#define __shared__ static
inline void __syncthreads() { ember_barrier->arrive_and_wait(); }
"""
_EMULATION_LAUNCHER = r"""
extern "C" void launch_NAME(unsigned gx, unsigned bx, void** args) {
    gridDim = {gx, 1, 1};
    blockDim = {bx, 1, 1};
    for (unsigned b = 0; b < gx; ++b) {
        std::barrier<> bar(bx);
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < bx; ++t) {
            auto run = [&, b, t]() {
                blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; ember_barrier = &bar;
                NAME(ARGS);
            };
            if (SYNCS) threads.emplace_back(run); else run();
        }
        for (auto& thread : threads) thread.join();
    }
}
extern "C" size_t argsize_NAME(int k) {
    static const size_t sizes[] = {SIZES};
    return sizes[k];
}
"""


class _HostArray(np.ndarray):
    @property
    def _c_contiguous(self):
        return self.flags.c_contiguous


class _EmulatedModule:
    """``cupy.RawModule`` for the CPU: ``get_function(name)((grid,), (block,), args)``."""

    def __init__(self, code, directory):
        import ctypes
        import hashlib
        import re
        import subprocess

        launchers = []
        self.arity = {}
        for match in re.finditer(r'extern "C" __global__ void (\w+)\((.*?)\)\s*\{', code, re.S):
            name, params = match.group(1), [p.strip() for p in match.group(2).split(",")]
            end = code.find('extern "C"', match.end())
            syncs = "__syncthreads" in code[match.end():end if end >= 0 else len(code)]
            # each argument read through a pointer to its declared type (the declaration less its name)
            declared = [re.sub(r"\s*\b\w+$", "", p.replace("__restrict__", "")) for p in params]
            args = [f"*({t}*)args[{k}]" for k, t in enumerate(declared)]
            sizes = ", ".join(f"sizeof({t})" for t in declared)
            launchers.append(_EMULATION_LAUNCHER.replace("NAME", name).replace("ARGS", ", ".join(args))
                             .replace("SYNCS", "true" if syncs else "false").replace("SIZES", sizes))
            self.arity[name] = len(params)
        source = _EMULATION_SHIM + code + "".join(launchers)
        path = directory / f"conv_{hashlib.sha1(source.encode()).hexdigest()[:12]}"
        path.with_suffix(".cpp").write_text(source)
        subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", str(path.with_suffix(".cpp")),
                        "-o", str(path.with_suffix(".so"))], check=True, capture_output=True)
        self.lib = ctypes.CDLL(str(path.with_suffix(".so")))

    def get_function(self, name):
        import ctypes

        launch = getattr(self.lib, f"launch_{name}")
        argsize = getattr(self.lib, f"argsize_{name}")
        argsize.restype = ctypes.c_size_t
        types = {np.int32: ctypes.c_int32, np.int64: ctypes.c_int64}

        def value(k, a):
            """(the argument's bytes as the kernel reads them, what keeps them alive)"""
            if isinstance(a, np.ndarray) and a.dtype.kind == "V":  # a struct by value: a copy of its bytes
                assert a.size == 1 and a.nbytes == argsize(k), (name, k, a.nbytes, argsize(k))
                copy = np.array(a, copy=True)
                return copy.ctypes.data, copy
            v = ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else types[type(a)](a)
            assert ctypes.sizeof(v) == argsize(k), (name, k)
            return ctypes.addressof(v), v

        def call(grid, block, args):
            assert len(args) == self.arity[name] and len(grid) == len(block) == 1
            values = [value(k, a) for k, a in enumerate(args)]
            pointers = (ctypes.c_void_p * len(values))(*[address for address, _ in values])
            launch(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), pointers)

        return call


@pytest.fixture(scope="module")
def emulated_xp(tmp_path_factory):
    """A CuPy stand-in whose RawModule runs the CUDA C on the CPU (skips without g++)."""
    import shutil
    import types

    if shutil.which("g++") is None:
        pytest.skip("needs g++ to compile the CUDA kernels for the CPU")
    directory = tmp_path_factory.mktemp("conv_kernels")

    def empty(shape, dtype):
        return np.full(shape, np.nan, dtype).view(_HostArray)

    def matmul(a, b):
        return np.matmul(np.asarray(a), np.asarray(b)).view(_HostArray)

    return types.SimpleNamespace(empty=empty, matmul=matmul, ascontiguousarray=np.ascontiguousarray,
                                 RawModule=lambda code: _EmulatedModule(code, directory))


@pytest.fixture
def emulated(emulated_xp, monkeypatch):
    monkeypatch.setattr(conv_fast, "_fast_device", lambda xp, *arrays: "emulated")  # modules of its own
    monkeypatch.setattr(conv_fast, "_fast_plans", {})
    monkeypatch.setattr(conv_fast, "_FAST_THREADS", 64)  # fewer OS threads for the row kernel's blocks
    return emulated_xp


def _host_views(x):
    """``x`` as it is, transposed in memory, with negative strides, and with gaps (every other element)."""
    flipped = np.ascontiguousarray(x[..., ::-1]).view(_HostArray)[..., ::-1]
    swapped = np.ascontiguousarray(x.swapaxes(0, 1)).view(_HostArray).swapaxes(0, 1)
    wider = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), x.dtype)
    wider[..., ::2] = x
    return x.view(_HostArray), swapped, flipped, wider.view(_HostArray)[..., ::2]


def _as_tuple(value, n):
    return value if isinstance(value, tuple) else (value,) * n


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_fast_conv_forward_kernels_on_the_cpu(emulated, dtype):
    rng = np.random.default_rng(0)
    for x_shape, w_shape, with_bias, stride, padding, dilation, groups in _FAST_CASES:
        x_shape = (min(x_shape[0], 4), *x_shape[1:])
        n = len(x_shape) - 2
        stride, padding, dilation = (_as_tuple(v, n) for v in (stride, padding, dilation))
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        b = rng.standard_normal(w_shape[:1]).astype(dtype).view(_HostArray) if with_bias else None
        expected = nn_conv._conv_forward(x, w, b, stride, padding, padding, dilation, groups)
        for view in _host_views(x):
            got = cuda_conv._fast_conv_forward(emulated, view, w.view(_HostArray), b, stride, padding, padding,
                                             dilation, groups)
            assert got.dtype == expected.dtype and got.shape == expected.shape and got.flags.c_contiguous
            np.testing.assert_allclose(got, expected, **({np.float16: dict(rtol=1e-2, atol=1e-2),
                                                          np.float32: dict(rtol=1e-4, atol=1e-4)}.get(dtype, {})))
    # 'same' padding of an even kernel: more padding after than before
    x, w = rng.standard_normal((2, 3, 6, 5)).astype(dtype), rng.standard_normal((4, 3, 2, 2)).astype(dtype)
    expected = nn_conv._conv_forward(x, w, None, (1, 1), (0, 0), (1, 1), (1, 1), 1)
    got = cuda_conv._fast_conv_forward(emulated, x.view(_HostArray), w, None, (1, 1), (0, 0), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(got, expected, rtol=1e-2 if dtype is np.float16 else 1e-5, atol=1e-2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_conv_backward_kernels_on_the_cpu(emulated, dtype):
    """The three gradients of the fused backward against CPU autograd (contiguous and strided inputs, an
    expanded output gradient, each output mask)."""
    rng = np.random.default_rng(1)
    for x_shape, w_shape, _, stride, padding, dilation, groups in _FAST_CASES:
        if groups != 1:
            continue
        x_shape = (min(x_shape[0], 4), *x_shape[1:])
        n = len(x_shape) - 2
        stride, padding, dilation = (_as_tuple(v, n) for v in (stride, padding, dilation))
        x = ember.tensor(rng.standard_normal(x_shape).astype(dtype), requires_grad=True)
        w = ember.tensor(rng.standard_normal(w_shape).astype(dtype), requires_grad=True)
        b = ember.tensor(rng.standard_normal(w_shape[:1]).astype(dtype), requires_grad=True)
        out = ember.convolution(x, w, b, list(stride), list(padding), list(dilation), False, [0] * n, 1)
        gy = rng.standard_normal(tuple(out.shape)).astype(dtype)
        gy[1:] = gy[:1]  # equal samples: the expanded gradient below is the same gradient
        expected = [e.numpy() for e in ember.autograd.grad(out, [x, w, b], ember.tensor(gy))]
        expanded = np.broadcast_to(gy[:1], gy.shape).view(_HostArray)
        for view, g, mask in zip(_host_views(x.detach().numpy()), (gy.view(_HostArray), expanded) * 2,
                                 ((True, True, True), (True, False, False), (False, True, True), (True, True, False))):
            got = cuda_conv._fast_conv_backward(emulated, g, view, w.detach().numpy().view(_HostArray), stride, padding,
                                              dilation, mask)
            for a, e, wanted in zip(got, expected, mask):
                if not wanted:
                    assert a is None
                    continue
                assert a.dtype == e.dtype and a.shape == e.shape and a.flags.c_contiguous
                np.testing.assert_allclose(a, e, rtol=1e-4 if dtype is np.float32 else 1e-10,
                                           atol=1e-4 if dtype is np.float32 else 1e-10)


def test_fast_conv_kernels_with_64_bit_indexing_on_the_cpu(emulated, monkeypatch):
    """The kernels' ``long long`` variant (its structs of int64 fields), forced on small arrays: forward and backward
    equal to the 32-bit variant's results bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 9, 8)).view(_HostArray)
    w = rng.standard_normal((6, 4, 3, 2)).view(_HostArray)
    b = rng.standard_normal(6).view(_HostArray)
    gy = rng.standard_normal((3, 6, 5, 9)).view(_HostArray)
    params = ((2, 1), (1, 1), (1, 1), (1, 1))
    results = []
    for limit in (conv_fast._INT32_LIMIT, 0):
        monkeypatch.setattr(conv_fast, "_INT32_LIMIT", limit)
        monkeypatch.setattr(conv_fast, "_fast_plans", {})
        out = cuda_conv._fast_conv_forward(emulated, x, w, b, params[0], params[1], params[1], params[3], 1)
        grads = cuda_conv._fast_conv_backward(emulated, gy, x, w, params[0], params[1], params[3], (True, True, True))
        assert next(iter(conv_fast._fast_plans.values()))[1] == (np.dtype(np.float64), limit == 0)  # (dtype, wide)
        results.append((out, *grads))
    expected = nn_conv._conv_forward(np.asarray(x), np.asarray(w), np.asarray(b), params[0], params[1], params[1],
                                     params[3], 1)
    np.testing.assert_allclose(results[0][0], expected, rtol=1e-12, atol=1e-12)
    for narrow, wide in zip(*results):
        np.testing.assert_array_equal(wide, narrow)


# -- the kernels' by-value structs: the host's packing against the C layout -----------------------------------


def _kernel_structs():
    """kernel name (``conv_fast._FAST_KERNELS``) -> the C type of its struct argument, read from its signature."""
    import re

    structs = {}
    for name in conv_fast._FAST_KERNELS:
        match = re.search(rf"void ember_conv_{name}\((.*?)\)\s*\{{", conv_fast._FAST_SOURCE, re.S)
        struct = re.fullmatch(r"const (\w+) \w+", match.group(1).split(",")[-1].strip())
        assert struct, f"ember_conv_{name}'s last parameter is not a struct by value"
        structs[name] = struct.group(1)
    return structs


@pytest.mark.parametrize("index", [np.int32, np.int64], ids=["int", "long long"])
def test_fast_struct_layouts_match_the_c_structs(index, tmp_path):
    """g++'s layout of each kernel's struct (offsetof of every field, sizeof) is the packing of ``_fast_struct``."""
    import shutil
    import subprocess

    if shutil.which("g++") is None:
        pytest.skip("needs g++ to lay out the kernels' structs")
    prints = []
    for kernel, struct in _kernel_structs().items():
        prints += [f'std::printf("{kernel} {f} %zu\\n", offsetof({struct}, {f}));' for f in conv_fast._FAST_FIELDS[kernel]]
        prints.append(f'std::printf("{kernel} sizeof %zu\\n", sizeof({struct}));')
    ctype = {np.int32: "int", np.int64: "long long"}[index]
    source = (f"#include <cstddef>\n#include <cstdio>\n{_EMULATION_SHIM}\n#define T float\n#define I {ctype}\n"
              f"#define THREADS 64\n{conv_fast._FAST_SOURCE}\nint main() {{\n{chr(10).join(prints)}\n}}\n")
    (tmp_path / "layout.cpp").write_text(source)
    subprocess.run(["g++", "-std=c++20", "-pthread", str(tmp_path / "layout.cpp"), "-o", str(tmp_path / "layout")],
                   check=True, capture_output=True)
    printed = subprocess.run([str(tmp_path / "layout")], check=True, capture_output=True, text=True).stdout
    c_layout = {(kernel, field): int(v) for kernel, field, v in (line.split() for line in printed.splitlines())}
    for kernel in conv_fast._FAST_KERNELS:
        dtype = conv_fast._fast_struct_dtype(kernel, index)
        assert c_layout[kernel, "sizeof"] == dtype.itemsize, kernel
        for field in conv_fast._FAST_FIELDS[kernel]:
            assert c_layout[kernel, field] == dtype.fields[field][1], (kernel, field)
        values = list(range(3, 3 + len(dtype.names)))
        struct = conv_fast._fast_struct(kernel, index, values)
        assert type(struct) is np.ndarray and struct.shape == (1,) and struct.dtype.kind == "V"
        assert struct.nbytes == dtype.itemsize and not struct.flags.writeable
        assert np.array_equal(np.frombuffer(struct.tobytes(), index), values)  # consecutive I words, in order


def test_emulated_kernels_read_the_struct_fields_by_their_offsets(emulated, monkeypatch):
    """Two fields of the C struct swapped (the host packing as before) give a wrong result: the emulation reads
    the struct's bytes at the C layout's offsets."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    args = (None, (2, 1), (1, 0), (1, 0), (1, 1), 1)
    expected = nn_conv._conv_forward(x, w, *args)
    got = cuda_conv._fast_conv_forward(emulated, x.view(_HostArray), w.view(_HostArray), *args)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    declared = "sd, sh, sw, pd, ph, pw, dd, dh, dw, xn"
    assert conv_fast._FAST_SOURCE.count(declared) == 1  # in ConvIm2colArgs
    monkeypatch.setattr(conv_fast, "_FAST_SOURCE", conv_fast._FAST_SOURCE.replace(declared, declared.replace("sh, sw",
                                                                                                          "sw, sh")))
    monkeypatch.setattr(conv_fast, "_fast_modules", {})
    got = cuda_conv._fast_conv_forward(emulated, x.view(_HostArray), w.view(_HostArray), *args)
    assert got.shape == expected.shape and not np.allclose(got, expected, rtol=1e-3, atol=1e-3)


def test_fast_struct_checks_its_values():
    assert conv_fast._fast_struct("grad_rows", np.int64, (2**40, 1, 2)).nbytes == 24
    with pytest.raises(OverflowError):
        conv_fast._fast_struct("grad_rows", np.int32, (2**40, 1, 2))
    with pytest.raises(ValueError, match="fields"):
        conv_fast._fast_struct("grad_rows", np.int32, (1, 2))
