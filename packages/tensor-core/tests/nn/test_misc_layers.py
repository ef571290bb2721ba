"""Padding, pixel shuffle, upsampling, distance, fold/unfold, channel shuffle, max-unpool, LP-pool
and Lazy modules against numpy references; BatchNorm loading of pre-version-2 state dicts."""

import io
import math

import numpy as np
import pytest

import ember
import ember.nn as nn


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run(m, *arrays):
    return m(*(ember.from_numpy(a.copy()) for a in arrays)).detach().numpy()


# -- padding -----------------------------------------------------------------------------------------


def _np_pad_width(padding, ndim):
    """F.pad order (last dim first, (left, right) pairs) -> np.pad's per-dimension pairs."""
    pairs = [(padding[2 * i], padding[2 * i + 1]) for i in range(len(padding) // 2)]
    return [(0, 0)] * (ndim - len(pairs)) + pairs[::-1]


@pytest.mark.parametrize(
    "cls, padding, np_mode, shape",
    [
        (nn.ReflectionPad1d, (3, 1), "reflect", (2, 3, 5)),
        (nn.ReflectionPad2d, (1, 2, 2, 0), "reflect", (2, 3, 4, 5)),
        (nn.ReflectionPad3d, (1, 1, 2, 0, 1, 2), "reflect", (1, 2, 3, 4, 5)),
        (nn.ReplicationPad1d, (3, 1), "edge", (3, 5)),
        (nn.ReplicationPad2d, (1, 2, 3, 0), "edge", (2, 3, 4, 5)),
        (nn.ReplicationPad3d, (2, 0, 1, 1, 0, 2), "edge", (1, 2, 3, 4, 5)),
        (nn.CircularPad1d, (2, 1), "wrap", (2, 3, 5)),
        (nn.CircularPad2d, (1, 2, 2, 1), "wrap", (3, 4, 5)),
        (nn.CircularPad3d, (1, 0, 0, 1, 2, 1), "wrap", (1, 2, 3, 4, 5)),
        (nn.ZeroPad1d, (2, 3), "constant", (2, 3, 5)),
        (nn.ZeroPad2d, (1, 0, 2, 1), "constant", (2, 3, 4, 5)),
        (nn.ZeroPad3d, (1, 1, 0, 2, 1, 0), "constant", (1, 2, 3, 4, 5)),
    ],
)
def test_padding_matches_numpy_pad(cls, padding, np_mode, shape):
    x = _x(shape)
    out = _run(cls(padding), x)
    np.testing.assert_array_equal(out, np.pad(x, _np_pad_width(padding, x.ndim), mode=np_mode))


def test_padding_int_pads_every_side_and_constant_value():
    x = _x((2, 3, 4))
    m = nn.ConstantPad2d(2, 3.5)
    assert m.padding == (2, 2, 2, 2) and m.value == 3.5
    np.testing.assert_array_equal(_run(m, x), np.pad(x, [(0, 0), (2, 2), (2, 2)], constant_values=3.5))
    assert nn.ZeroPad3d(1).padding == (1,) * 6 and nn.ReflectionPad1d(4).padding == (4, 4)
    assert nn.ConstantPad3d(1, 0.5)(ember.zeros(1, 1, 1, 1)).sum().item() == pytest.approx(0.5 * 26)


def test_constant_pad_negative_padding_crops():
    x = _x((2, 3, 6))
    np.testing.assert_array_equal(
        _run(nn.ConstantPad1d((-1, 2), 7.0), x), np.pad(x[..., 1:], [(0, 0)] * 2 + [(0, 2)], constant_values=7.0)
    )


def test_padding_repr():
    assert repr(nn.ZeroPad2d((1, 0, 2, 1))) == "ZeroPad2d((1, 0, 2, 1))"
    assert repr(nn.ConstantPad1d(2, 1.5)) == "ConstantPad1d(padding=(2, 2), value=1.5)"
    assert repr(nn.CircularPad1d(1)) == "CircularPad1d((1, 1))"


def test_circular_pad_checks_input_dims():
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D input\)"):
        nn.CircularPad2d(1)(ember.zeros(3, 4))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.CircularPad1d(1)(ember.zeros(1, 2, 3, 4))


# -- pixel shuffle -----------------------------------------------------------------------------------


def _np_pixel_shuffle(x, r):
    *b, c, h, w = x.shape
    y = x.reshape(*b, c // (r * r), r, r, h, w)
    n = len(b)
    y = y.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return y.reshape(*b, c // (r * r), h * r, w * r)


def test_pixel_shuffle_and_unshuffle_match_numpy():
    x = _x((2, 18, 3, 4))
    out = _run(nn.PixelShuffle(3), x)
    np.testing.assert_array_equal(out, _np_pixel_shuffle(x, 3))
    assert out[0, 1, 4, 5] == x[0, 1 * 9 + 1 * 3 + 2, 1, 1]  # [c, h r + i, w r + j] = [c r^2 + i r + j, h, w]
    np.testing.assert_array_equal(_run(nn.PixelUnshuffle(3), out), x)
    np.testing.assert_array_equal(_run(nn.PixelShuffle(2), _x((8, 2, 3))), _np_pixel_shuffle(_x((8, 2, 3)), 2))
    assert repr(nn.PixelShuffle(3)) == "PixelShuffle(upscale_factor=3)"
    assert repr(nn.PixelUnshuffle(2)) == "PixelUnshuffle(downscale_factor=2)"


# -- upsampling --------------------------------------------------------------------------------------


def _np_bilinear_align_corners(x, out_h, out_w):
    _, _, h, w = x.shape
    ys = np.linspace(0, h - 1, out_h)
    xs = np.linspace(0, w - 1, out_w)
    y0 = np.clip(np.floor(ys).astype(int), 0, h - 1)
    x0 = np.clip(np.floor(xs).astype(int), 0, w - 1)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    wy, wx = (ys - y0)[:, None], (xs - x0)[None, :]
    top = x[..., y0, :][..., x0] * (1 - wx) + x[..., y0, :][..., x1] * wx
    bottom = x[..., y1, :][..., x0] * (1 - wx) + x[..., y1, :][..., x1] * wx
    return top * (1 - wy) + bottom * wy


def test_upsample_nearest_repeats():
    x = _x((2, 3, 3, 4))
    expected = x.repeat(2, axis=2).repeat(2, axis=3)
    np.testing.assert_array_equal(_run(nn.Upsample(scale_factor=2), x), expected)
    np.testing.assert_array_equal(_run(nn.UpsamplingNearest2d(scale_factor=2), x), expected)
    np.testing.assert_array_equal(_run(nn.UpsamplingNearest2d(size=(6, 8)), x), expected)
    x1 = _x((2, 3, 4))
    np.testing.assert_array_equal(_run(nn.Upsample(scale_factor=3), x1), x1.repeat(3, axis=2))


def test_upsample_bilinear_align_corners_matches_numpy():
    x = _x((2, 3, 3, 4))
    np.testing.assert_allclose(
        _run(nn.UpsamplingBilinear2d(size=(5, 7)), x), _np_bilinear_align_corners(x, 5, 7), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        _run(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), x),
        _np_bilinear_align_corners(x, 6, 8),
        rtol=1e-5,
        atol=1e-6,
    )


def test_upsample_linear_half_pixel_matches_numpy_interp():
    x = _x((1, 2, 5))
    out = _run(nn.Upsample(scale_factor=2, mode="linear"), x)
    src = np.clip((np.arange(10) + 0.5) / 2 - 0.5, 0, None)  # align_corners=False source coordinates
    expected = np.stack([[np.interp(src, np.arange(5), row) for row in ch] for ch in x])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_upsample_attributes_and_repr():
    m = nn.Upsample(scale_factor=2)
    assert m.scale_factor == 2.0 and isinstance(m.scale_factor, float) and m.name == "Upsample"
    assert nn.Upsample(scale_factor=(2, 3)).scale_factor == (2.0, 3.0)
    assert repr(m) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.Upsample(size=(4, 5), mode="bicubic")) == "Upsample(size=(4, 5), mode='bicubic')"
    b = nn.UpsamplingBilinear2d(scale_factor=2)
    assert b.mode == "bilinear" and b.align_corners is True
    with pytest.raises(ValueError):
        nn.Upsample()(ember.zeros(1, 1, 2, 2))


# -- distances ---------------------------------------------------------------------------------------


def test_cosine_similarity_matches_numpy():
    a, b = _x((4, 5), 1), _x((4, 5), 2)
    dot = (a * b).sum(1)
    expected = dot / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-8)
    np.testing.assert_allclose(_run(nn.CosineSimilarity(), a, b), expected, rtol=1e-5)
    expected0 = (a * b).sum(0) / (np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0))
    np.testing.assert_allclose(_run(nn.CosineSimilarity(dim=0), a, b), expected0, rtol=1e-5)
    # eps bounds the norms' product: zero vectors give 0, not nan.
    assert _run(nn.CosineSimilarity(dim=0), np.zeros(3, np.float32), np.ones(3, np.float32)) == 0


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, math.inf])
def test_pairwise_distance_matches_numpy(p):
    a, b = _x((4, 5), 1), _x((4, 5), 2)
    diff = a - b + 1e-6
    expected = np.linalg.norm(diff, ord=p, axis=1)
    np.testing.assert_allclose(_run(nn.PairwiseDistance(p=p), a, b), expected, rtol=1e-5)
    out = _run(nn.PairwiseDistance(p=p, keepdim=True), a, b)
    assert out.shape == (4, 1)
    m = nn.PairwiseDistance(p=p, eps=0.1)
    assert m.norm == p and m.eps == 0.1
    np.testing.assert_allclose(_run(m, a, b), np.linalg.norm(a - b + 0.1, ord=p, axis=1), rtol=1e-5)


# -- fold / unfold -----------------------------------------------------------------------------------


def _np_unfold(x, k, d, p, s):
    n, c, h, w = x.shape
    xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = np.zeros((n, c, k[0], k[1], oh, ow), x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            cols[:, :, i, j] = xp[:, :, i * d[0] : i * d[0] + s[0] * oh : s[0], j * d[1] : j * d[1] + s[1] * ow : s[1]]
    return cols.reshape(n, c * k[0] * k[1], oh * ow)


def _np_fold(cols, out_size, k, d, p, s):
    n, ck, _ = cols.shape
    c = ck // (k[0] * k[1])
    h, w = out_size
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = cols.reshape(n, c, k[0], k[1], oh, ow)
    out = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]), cols.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            out[:, :, i * d[0] : i * d[0] + s[0] * oh : s[0], j * d[1] : j * d[1] + s[1] * ow : s[1]] += cols[
                :, :, i, j
            ]
    return out[:, :, p[0] : p[0] + h, p[1] : p[1] + w]


@pytest.mark.parametrize(
    "k, d, p, s, hw",
    [
        ((2, 3), (1, 1), (0, 0), (1, 1), (4, 5)),
        ((2, 2), (2, 1), (1, 0), (2, 1), (5, 6)),
        ((3, 3), (1, 1), (1, 1), (2, 2), (5, 5)),
    ],
)
def test_unfold_and_fold_match_numpy(k, d, p, s, hw):
    x = _x((2, 3, *hw))
    cols = _run(nn.Unfold(k, dilation=d, padding=p, stride=s), x)
    np.testing.assert_allclose(cols, _np_unfold(x, k, d, p, s), rtol=1e-6)
    folded = _run(nn.Fold(hw, k, dilation=d, padding=p, stride=s), cols)
    np.testing.assert_allclose(folded, _np_fold(cols, hw, k, d, p, s), rtol=1e-5, atol=1e-6)


def test_fold_sums_overlaps_and_repr():
    # Fold(Unfold(ones)) counts how many blocks cover each pixel.
    ones = ember.ones(1, 1, 3, 3)
    counts = nn.Fold(3, 2)(nn.Unfold(2)(ones)).numpy()[0, 0]
    np.testing.assert_array_equal(counts, [[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    assert repr(nn.Fold(3, 2)) == "Fold(output_size=3, kernel_size=2, dilation=1, padding=0, stride=1)"
    assert repr(nn.Unfold((2, 3), stride=2)) == "Unfold(kernel_size=(2, 3), dilation=1, padding=0, stride=2)"


# -- channel shuffle ---------------------------------------------------------------------------------


def test_channel_shuffle_matches_numpy():
    x = _x((2, 6, 3, 2))
    expected = x.reshape(2, 3, 2, 3, 2).transpose(0, 2, 1, 3, 4).reshape(2, 6, 3, 2)
    np.testing.assert_array_equal(_run(nn.ChannelShuffle(3), x), expected)
    np.testing.assert_array_equal(
        nn.ChannelShuffle(2)(ember.arange(6.0).reshape(1, 6, 1)).numpy().ravel(), [0, 3, 1, 4, 2, 5]
    )
    assert repr(nn.ChannelShuffle(2)) == "ChannelShuffle(groups=2)"
    with pytest.raises(RuntimeError, match="divisible by groups"):
        nn.ChannelShuffle(4)(ember.zeros(1, 6, 2))


def test_channel_shuffle_functional_gradient_and_errors():
    x = ember.arange(12.0).reshape(1, 6, 2).requires_grad_()
    y = nn.functional.channel_shuffle(x, 2)
    assert y.grad_fn is not None
    np.testing.assert_array_equal(ember.channel_shuffle(x.detach(), 2).numpy(), y.detach().numpy())
    np.testing.assert_array_equal(nn.functional.native_channel_shuffle(x.detach(), 2).numpy(), y.detach().numpy())
    weights = np.arange(12.0, dtype=np.float32).reshape(1, 6, 2)
    (y * ember.from_numpy(weights)).sum().backward()
    # output channel j * groups + g is input channel g * 3 + j: the gradient is the weights unshuffled
    perm = [0, 3, 1, 4, 2, 5]
    expected = np.empty_like(weights)
    expected[:, perm] = weights
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    with pytest.raises(RuntimeError, match=r"channel_shuffle expects input with > 2 dims, but got input with sizes \[2, 6\]"):
        nn.ChannelShuffle(2)(ember.zeros(2, 6))
    with pytest.raises(RuntimeError, match="Number of groups to divide channels in must be positive. Value of groups:0"):
        nn.ChannelShuffle(0)(ember.zeros(1, 6, 2))


# -- max unpool / LP pool ----------------------------------------------------------------------------


def test_max_unpool2d_scatters_to_the_pooled_positions():
    x = _x((2, 3, 4, 6))
    pooled, idx = nn.MaxPool2d(2, return_indices=True)(ember.from_numpy(x))
    out = nn.MaxUnpool2d(2)(pooled, idx).numpy()
    expected = np.zeros_like(x)
    blocks = x.reshape(2, 3, 2, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 2, 3, 4)
    arg = blocks.argmax(-1)
    for n in range(2):
        for c in range(3):
            for i in range(2):
                for j in range(3):
                    di, dj = divmod(arg[n, c, i, j], 2)
                    expected[n, c, 2 * i + di, 2 * j + dj] = x[n, c, 2 * i + di, 2 * j + dj]
    np.testing.assert_array_equal(out, expected)
    m = nn.MaxUnpool2d(3, stride=2, padding=1)
    assert (m.kernel_size, m.stride, m.padding) == ((3, 3), (2, 2), (1, 1))
    assert repr(m) == "MaxUnpool2d(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))"


def test_max_unpool1d_and_output_size():
    x = ember.tensor([[[1.0, 5.0, 3.0, 2.0, 7.0]]])
    pooled, idx = nn.MaxPool1d(2, return_indices=True)(x)
    np.testing.assert_array_equal(nn.MaxUnpool1d(2)(pooled, idx).numpy(), [[[0, 5, 3, 0]]])
    np.testing.assert_array_equal(nn.MaxUnpool1d(2)(pooled, idx, output_size=[5]).numpy(), [[[0, 5, 3, 0, 0]]])
    assert nn.MaxUnpool3d(2).stride == (2, 2, 2)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5])
def test_lp_pool_matches_numpy(p):
    x = np.abs(_x((2, 3, 4, 6))) + 0.1
    out = _run(nn.LPPool2d(p, 2), x)
    blocks = x.reshape(2, 3, 2, 2, 3, 2)
    np.testing.assert_allclose(out, (blocks**p).sum(axis=(3, 5)) ** (1 / p), rtol=1e-4)
    x1 = np.abs(_x((2, 3, 9))) + 0.1
    out1 = _run(nn.LPPool1d(p, 3, stride=2), x1)
    windows = np.stack([x1[..., i : i + 3] for i in range(0, 7, 2)], axis=-2)
    np.testing.assert_allclose(out1, (windows**p).sum(-1) ** (1 / p), rtol=1e-4)
    assert repr(nn.LPPool1d(p, 3, stride=2)) == f"LPPool1d(norm_type={p}, kernel_size=3, stride=2, ceil_mode=False)"


# -- lazy modules ------------------------------------------------------------------------------------


def test_lazy_linear_materializes_on_first_forward():
    ember.manual_seed(0)
    m = nn.LazyLinear(4)
    assert isinstance(m.weight, nn.UninitializedParameter) and m.in_features == 0
    assert m.has_uninitialized_params()
    assert repr(m) == "LazyLinear(in_features=0, out_features=4, bias=True)"
    x = _x((5, 3))
    out = _run(m, x)
    assert type(m) is nn.Linear and m.in_features == 3
    assert type(m.weight) is nn.Parameter and tuple(m.weight.shape) == (4, 3) and m.weight.requires_grad
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5, atol=1e-6)
    assert np.abs(w).max() <= 1 / math.sqrt(3) and np.abs(w).max() > 0
    assert not m._forward_pre_hooks and not m._load_state_dict_pre_hooks


def test_lazy_parameter_cannot_be_used_before_forward():
    m = nn.LazyLinear(4)
    with pytest.raises(ValueError, match="uninitialized parameter"):
        m.weight + 1
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        _ = m.weight.shape


def test_lazy_state_dict_before_and_after_forward_round_trips_through_save():
    m = nn.LazyConv2d(6, 3, groups=2, bias=True)
    sd = m.state_dict()
    assert list(sd) == ["weight", "bias"] and all(nn.parameter.is_lazy(v) for v in sd.values())
    m(ember.randn(1, 4, 5, 5))
    assert type(m) is nn.Conv2d and m.in_channels == 4 and tuple(m.weight.shape) == (6, 2, 3, 3)
    buf = io.BytesIO()
    ember.save(m.state_dict(), buf)
    buf.seek(0)
    fresh = nn.LazyConv2d(6, 3, groups=2)
    fresh.load_state_dict(ember.load(buf))
    assert tuple(fresh.weight.shape) == (6, 2, 3, 3) and not fresh.has_uninitialized_params()
    np.testing.assert_array_equal(fresh.weight.detach().numpy(), m.weight.detach().numpy())
    x = ember.randn(2, 4, 5, 5)
    np.testing.assert_allclose(fresh(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    assert type(fresh) is nn.Conv2d


@pytest.mark.parametrize(
    "lazy, x_shape, weight_shape",
    [
        (lambda: nn.LazyConv1d(5, 3), (2, 4, 8), (5, 4, 3)),
        (lambda: nn.LazyConv1d(5, 3), (4, 8), (5, 4, 3)),  # unbatched
        (lambda: nn.LazyConv3d(2, 2), (1, 3, 4, 4, 4), (2, 3, 2, 2, 2)),
        (lambda: nn.LazyConvTranspose1d(5, 3), (2, 4, 8), (4, 5, 3)),
        (lambda: nn.LazyConvTranspose2d(6, 2, groups=2), (1, 4, 3, 3), (4, 3, 2, 2)),
        (lambda: nn.LazyConvTranspose3d(2, 2), (1, 3, 2, 2, 2), (3, 2, 2, 2, 2)),
    ],
)
def test_lazy_conv_weight_shapes(lazy, x_shape, weight_shape):
    m = lazy()
    m(ember.randn(*x_shape))
    assert tuple(m.weight.shape) == weight_shape and m.in_channels == x_shape[-len(weight_shape) + 1]
    assert not type(m).__name__.startswith("Lazy")


def test_lazy_conv_errors():
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d"):
        nn.LazyConv2d(4, 3)(ember.randn(3, 5))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(ember.randn(1, 3, 5, 5))


def test_lazy_batchnorm_materializes_running_stats():
    m = nn.LazyBatchNorm2d(momentum=0.5)
    assert nn.parameter.is_lazy(m.running_mean) and m.num_batches_tracked.item() == 0
    x = _x((4, 3, 2, 2)) * 2 + 1
    out = _run(m, x)
    assert type(m) is nn.BatchNorm2d and m.num_features == 3
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    expected = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m.running_mean.numpy(), 0.5 * mean, rtol=1e-5)
    np.testing.assert_allclose(m.running_var.numpy(), 0.5 + 0.5 * x.var(axis=(0, 2, 3), ddof=1), rtol=1e-5)
    assert m.num_batches_tracked.item() == 1
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    nostats = nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    nostats(ember.randn(4, 5))
    assert type(nostats) is nn.BatchNorm1d and list(nostats.state_dict()) == []
    with pytest.raises(ValueError, match=r"expected 5D input \(got 4D input\)"):
        nn.LazyBatchNorm3d()(ember.randn(2, 3, 4, 4))


# -- BatchNorm: state dicts older than version 2 -----------------------------------------------------


def test_batchnorm_loads_state_dict_without_num_batches_tracked():
    src = nn.BatchNorm1d(3)
    src(ember.randn(4, 3))
    sd = src.state_dict()
    del sd["num_batches_tracked"]
    sd._metadata[""]["version"] = 1
    dst = nn.BatchNorm1d(3)
    result = dst.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst.num_batches_tracked.item() == 0
    np.testing.assert_array_equal(dst.running_mean.numpy(), src.running_mean.numpy())
    # A plain dict (no version metadata) is treated as old too; inside a container the prefix applies.
    net = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    plain = {k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    assert net.load_state_dict(plain).missing_keys == []


def test_batchnorm_version_2_state_dict_still_requires_num_batches_tracked():
    sd = nn.BatchNorm1d(3).state_dict()
    del sd["num_batches_tracked"]
    assert sd._metadata[""]["version"] == 2
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "num_batches_tracked"'):
        nn.BatchNorm1d(3).load_state_dict(sd)
