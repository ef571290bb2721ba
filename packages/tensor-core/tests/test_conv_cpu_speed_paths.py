"""Values of the AVX2 convolution path (ember._C.conv_avx2) against a float64 numpy reference.

The kernel serves float32 convolutions on CPUs with AVX2 and FMA but no AVX-512: the forward
and, through the autograd formulas (which are convolutions too), the input and weight
gradients. Each tile is forced once (variants 1-3) besides the automatic pick, on 1 and 2
threads; the op-level tests check forward and both gradients through ``ember.nn.functional``.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_nn_kernels import _conv_out, _conv_reference, _lift, _phases, _windows

import ember
from ember import _C
from ember._ops import nn_conv

_NEEDS_AVX2 = pytest.mark.skipif(not _C.conv_avx2_available(), reason="conv_avx2 needs a CPU with AVX2 and FMA")

# (input shape, output channels, kernel, groups, stride, padding, dilation): the demo's two
# convolutions, batch 1, odd sizes, strides and dilations that split the input into phases, groups,
# output channels that are no multiple of a tile's width, 1-D and 3-D.
CASES = [
    ((64, 32, 8, 8), 64, (3, 3), 1, (1, 1), (1, 1), (1, 1)),
    ((64, 1, 8, 8), 32, (3, 3), 1, (1, 1), (1, 1), (1, 1)),
    ((1, 3, 7, 5), 9, (3, 3), 1, (1, 1), (1, 1), (1, 1)),
    ((3, 5, 9, 7), 7, (3, 2), 1, (2, 1), (1, 0), (1, 2)),
    ((2, 6, 11, 10), 20, (3, 3), 2, (2, 3), (2, 1), (2, 1)),
    ((2, 4, 13), 33, (5,), 1, (3,), (2,), (2,)),
    ((2, 4, 5, 6, 7), 18, (2, 3, 2), 2, (1, 2, 1), (1, 0, 1), (1, 1, 2)),
    ((5, 8, 6, 6), 48, (3, 3), 4, (1, 1), (1, 1), (1, 1)),
    ((1, 16, 5, 5), 40, (5, 5), 1, (1, 1), (0, 0), (1, 1)),
    # 1x1 (a BLAS product per sample; its weight gradient one product over a window covering the input)
    ((2, 48, 2, 2), 80, (1, 1), 1, (1, 1), (0, 0), (1, 1)),
    ((3, 7, 5), 9, (1,), 1, (1,), (0,), (1,)),
    ((2, 8, 6, 6), 12, (1, 1), 1, (2, 2), (0, 0), (1, 1)),
]


def _tap(w, o0, o1, k):
    """w[o0:o1, :, *k] in float64: the (output, input channel) matrix of kernel offset k."""
    return w[(slice(o0, o1), slice(None), *k)].astype(np.float64)


def _reference_grads(x, w, gy, groups, stride, padding, dilation):
    """(dL/dx, dL/dw) of L = sum(gy * conv(x, w)), in float64: the adjoints of ``_conv_reference``."""
    n = len(stride)
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    kernel = w.shape[2:]
    out = gy.shape[2:]
    gy = gy.astype(np.float64)
    dxp = np.zeros((x.shape[0], x.shape[1], *(x.shape[2 + i] + 2 * padding[i] for i in range(n))))
    dw = np.zeros(w.shape)
    taps = _windows(x, kernel, stride, padding, dilation)
    for k, window in taps.items():
        index = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + (out[i] - 1) * stride[i] + 1, stride[i])
                      for i in range(n))
        for g in range(groups):
            gg = gy[:, g * og:(g + 1) * og]
            dw[(slice(g * og, (g + 1) * og), slice(None), *k)] = np.einsum(
                "nop,ncp->oc", gg.reshape(*gg.shape[:2], -1), window[:, g * cg:(g + 1) * cg].reshape(*gg.shape[:1], cg, -1))
            dxp[(slice(None), slice(g * cg, (g + 1) * cg), *index)] += np.einsum(
                "no...,oc->nc...", gg, _tap(w, g * og, (g + 1) * og, k))
    dx = dxp[(slice(None), slice(None), *(slice(padding[i], padding[i] + x.shape[2 + i]) for i in range(n)))]
    return dx, dw


@_NEEDS_AVX2
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("variant", range(4), ids=lambda v: f"variant{v}")
def test_conv_avx2_tiles_match_reference(threads, case, variant):
    """Every tile (variants 1-3) and the automatic pick (0), with and without a bias."""
    shape, out_channels, kernel, groups, stride, padding, dilation = case
    rng = np.random.default_rng(21)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1] // groups, *kernel)).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32)
    out = _conv_out(shape, kernel, stride, padding, dilation)
    w5 = w.reshape(w.shape[:2] + tuple(_lift(kernel, 1)))
    for bias in (None, b):
        y = _C.conv_avx2(_phases(x, padding, stride), w5, bias, groups, _lift(stride, 1), _lift(dilation, 1),
                         _lift(out, 1), variant)
        want = _conv_reference(x, w, bias, groups, stride, padding, dilation)
        assert y.dtype == np.float32
        np.testing.assert_allclose(y.reshape(want.shape), want, rtol=1e-5, atol=1e-4)


@_NEEDS_AVX2
def test_conv_avx2_rejects_what_would_be_unsafe():
    x = np.ones((2, 4, 1, 1, 6, 6), np.float32)
    w = np.ones((8, 4, 1, 3, 3), np.float32)
    with pytest.raises(ValueError, match="groups"):
        _C.conv_avx2(x, w, None, 3, [1, 1, 1], [1, 1, 1], [1, 4, 4])
    with pytest.raises(ValueError, match="does not fit"):
        _C.conv_avx2(x, w, None, 1, [1, 1, 1], [1, 1, 1], [1, 5, 5])
    with pytest.raises(ValueError, match="bias"):
        _C.conv_avx2(x, w, np.ones(3, np.float32), 1, [1, 1, 1], [1, 1, 1], [1, 4, 4])
    with pytest.raises(ValueError, match="expected input"):
        _C.conv_avx2(x[0], w, None, 1, [1, 1, 1], [1, 1, 1], [1, 4, 4])


_CONV = {1: ember.nn.functional.conv1d, 2: ember.nn.functional.conv2d, 3: ember.nn.functional.conv3d}


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_forward_and_gradients_match_reference(threads, case, dtype):
    """Through the op and autograd: float32 runs conv_avx2 where it applies, float64 the im2col path."""
    shape, out_channels, kernel, groups, stride, padding, dilation = case
    rng = np.random.default_rng(22)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((out_channels, shape[1] // groups, *kernel)).astype(dtype)
    b = rng.standard_normal(out_channels).astype(dtype)
    gy = rng.standard_normal((shape[0], out_channels, *_conv_out(shape, kernel, stride, padding, dilation)))
    xe = ember.tensor(x, requires_grad=True)
    we = ember.tensor(w, requires_grad=True)
    be = ember.tensor(b, requires_grad=True)
    y = _CONV[len(kernel)](xe, we, be, stride=stride, padding=padding, dilation=dilation, groups=groups)
    (y * ember.tensor(gy.astype(dtype))).sum().backward()
    tol = {"rtol": 1e-5, "atol": 2e-4} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-10}
    np.testing.assert_allclose(y.detach().numpy(), _conv_reference(x, w, b, groups, stride, padding, dilation), **tol)
    dx, dw = _reference_grads(x, w, gy, groups, stride, padding, dilation)
    np.testing.assert_allclose(xe.grad.numpy(), dx, **tol)
    np.testing.assert_allclose(we.grad.numpy(), dw, **{**tol, "atol": tol["atol"] * 10})
    np.testing.assert_allclose(be.grad.numpy(), gy.sum(axis=(0, *range(2, gy.ndim))), **tol)


def test_conv_float16_computes_in_float32():
    rng = np.random.default_rng(23)
    x = rng.standard_normal((2, 8, 5, 5)).astype(np.float16)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float16)
    y = ember.nn.functional.conv2d(ember.tensor(x), ember.tensor(w), padding=1)
    assert y.dtype == ember.float16
    want = _conv_reference(x.astype(np.float32), w.astype(np.float32), None, 1, (1, 1), (1, 1), (1, 1))
    np.testing.assert_allclose(y.numpy().astype(np.float64), want, rtol=2e-3, atol=2e-2)


@_NEEDS_AVX2
def test_demo_shapes_take_the_avx2_path():
    """The op-level tests above check conv_avx2 only if float32 convolutions reach it."""
    if _C.conv_fast_available():
        pytest.skip("AVX-512 CPUs run conv_avx512")
    f32 = np.zeros(1, np.float32)
    assert nn_conv._conv_avx2_fits(f32, 32, 64, 1, 9)  # the demo's second convolution
    assert nn_conv._conv_avx2_fits(f32, 64, 32, 1, 9)  # its input gradient
    assert nn_conv._conv_avx2_fits(f32, 64, 64, 1, 64)  # its weight gradient (an 8 x 8 kernel)
    assert not nn_conv._conv_avx2_fits(f32, 1, 32, 1, 9)  # the first convolution: 9 products per output
    assert not nn_conv._conv_avx2_fits(f32, 1, 1, 6, 9)  # depthwise: the direct kernel
    assert not nn_conv._conv_avx2_fits(np.zeros(1, np.float64), 32, 64, 1, 9)


@_NEEDS_AVX2
def test_conv_avx2_reads_strided_weights(threads):
    """A transposed and flipped weight view (the gradients' kernels) packs as its contiguous copy would."""
    rng = np.random.default_rng(24)
    x = rng.standard_normal((3, 12, 6, 6)).astype(np.float32)
    base = rng.standard_normal((12, 20, 3, 3)).astype(np.float32)
    w = base.swapaxes(0, 1)[:, :, ::-1, ::-1]  # (20, 12, 3, 3), negative strides
    out = _conv_out(x.shape, (3, 3), (1, 1), (1, 1), (1, 1))
    y = _C.conv_avx2(_phases(x, (1, 1), (1, 1)), w.reshape(20, 12, 1, 3, 3), None, 1, [1, 1, 1], [1, 1, 1],
                     _lift(out, 1))
    want = _conv_reference(x, np.ascontiguousarray(w), None, 1, (1, 1), (1, 1), (1, 1))
    np.testing.assert_allclose(y.reshape(want.shape), want, rtol=1e-5, atol=1e-4)


def _max_pool_2x2_reference(planes):
    """(values, flat indices) of 2 x 2 windows of stride 2 over (P, H, W) planes, by the general loop's rules:
    the first maximum of a window (row by row) wins, a NaN wins, and a later NaN replaces an earlier one."""
    P, H, W = planes.shape
    oH, oW = H // 2, W // 2
    values = np.empty((P, oH, oW), planes.dtype)
    indices = np.empty((P, oH, oW), np.int64)
    for p, i, j in np.ndindex(P, oH, oW):
        best, at = None, None
        for h, w in ((2 * i, 2 * j), (2 * i, 2 * j + 1), (2 * i + 1, 2 * j), (2 * i + 1, 2 * j + 1)):
            v = planes[p, h, w]
            if best is None or v > best or (isinstance(v, np.floating) and np.isnan(v)):
                best, at = v, h * W + w
        values[p, i, j], indices[p, i, j] = best, at
    return values, indices


@pytest.mark.parametrize("shape", [(3, 8, 8), (2, 9, 7), (1, 2, 2), (40, 17, 33)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8])
def test_max_pool_2x2_path_matches_the_window_rules(threads, shape, dtype):
    # MaxPool2d(2)'s own loop (csrc/conv.cpp max_pool_2x2_typed): ties, NaNs, odd sizes (a floor-mode
    # remainder row and column), integers; enough planes on the last shape to run the threaded loop
    rng = np.random.default_rng(0)
    planes = rng.integers(-3, 3, shape).astype(dtype)  # few distinct values: many ties
    if np.issubdtype(dtype, np.floating):
        planes.flat[::11] = np.nan
    out = [shape[1] // 2, shape[2] // 2]
    values, indices = _C.max_pool(planes.reshape(shape[0], 1, *shape[1:]), [1, *out], [1, 2, 2], [1, 2, 2],
                                  [0, 0, 0], [1, 1, 1], True)
    ref_values, ref_indices = _max_pool_2x2_reference(planes)
    np.testing.assert_array_equal(values.reshape(ref_values.shape), ref_values)
    np.testing.assert_array_equal(indices.reshape(ref_indices.shape), ref_indices)


# (input shape, kernel, stride, padding, dilation) of one-channel-per-group 2-D convolutions: the padded-plane
# path of ember._C.conv_direct (its 3 x 3 stride-1 sum and its general taps), planes smaller than the kernel
# and the weight-gradient shape (a kernel larger than its output) that the op hands to depthwise_weight_grad.
DEPTHWISE_CASES = [
    ((2, 480, 2, 2), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 6, 9, 7), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 5, 16, 16), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((3, 4, 11, 9), (5, 3), (2, 1), (2, 0), (1, 2)),
    ((1, 3, 3, 3), (5, 5), (1, 1), (1, 1), (1, 1)),
    ((1, 7, 12, 12), (12, 12), (1, 1), (1, 1), (1, 1)),
    ((1, 7, 17, 17), (9, 9), (1, 1), (1, 1), (2, 2)),
]


@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_depthwise_convolution_paths_match_reference(threads, case, dtype):
    shape, kernel, stride, padding, dilation = case
    rng = np.random.default_rng(5)
    C = shape[1]
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((C, 1, *kernel)).astype(dtype)
    y = ember.convolution(ember.tensor(x), ember.tensor(w), None, list(stride), list(padding), list(dilation), False,
                          [0, 0], C).numpy()
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    np.testing.assert_allclose(y, _conv_reference(x, w, None, C, stride, padding, dilation), **tol)


def test_depthwise_padding_taps_stay_skipped_for_non_finite_weights():
    # a padding tap is skipped, not added as w * 0: an infinite weight that meets only padding gives no NaN
    x = np.ones((1, 2, 2, 2), np.float32)
    w = np.ones((2, 1, 3, 3), np.float32)
    w[0, 0, 0, 0] = np.inf  # channel 0's top-left tap meets the input only at the bottom-right output
    y = ember.convolution(ember.tensor(x), ember.tensor(w), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 2).numpy()
    np.testing.assert_array_equal(y[0, 0], [[4, 4], [4, np.inf]])
    np.testing.assert_array_equal(y[0, 1], [[4, 4], [4, 4]])
