"""batch_norm's CPU forward on float32 channels whose mean is large against their spread, against float64.

Such channels (a depthwise convolution's output in MobileNetV2: |mean| / std up to ~150) made the old
``x * scale + (bias - mean * scale)`` lose ~10 bits to cancellation: errors of 1e-5 to 4e-5 in outputs of
size ~4, enough to move a following ReLU6's input across 0 and leave the network's gradients ~1% off. The
deviations from the mean are scaled now, so the output is within a few float32 roundings of the exact one.
"""

import numpy as np
import pytest

import ember
import ember.nn.functional as F

SHAPES = [(2, 192, 4, 4), (8, 16, 16, 16), (6, 5, 40)]


def _channels_far_from_zero(shape, seed=0):
    """float32 ``(N, C, *)`` input: channel means in [-3, 3], spread 0.02; float32 weight and bias."""
    rng = np.random.default_rng(seed)
    c = shape[1]
    means = rng.uniform(-3, 3, (1, c) + (1,) * (len(shape) - 2))
    x = (rng.standard_normal(shape) * 0.02 + means).astype(np.float32)
    return x, rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)


def _reference(x, mean, var, w, b):
    """The exact batch_norm of float32 data in float64, with per-channel ``(C,)`` float64 statistics."""
    view = (-1,) + (1,) * (x.ndim - 2)
    x64 = x.astype(np.float64)
    return (x64 - mean.reshape(view)) / np.sqrt(var.reshape(view) + 1e-5) * w.reshape(view) + b.reshape(view)


def _bound(ref):
    """Four float32 roundings of the largest output (the previous formula was 20x-100x over it)."""
    return 4 * np.finfo(np.float32).eps * np.abs(ref).max()


@pytest.mark.parametrize("shape", SHAPES)
def test_training_output_and_statistics(shape):
    x, w, b = _channels_far_from_zero(shape)
    axes = (0,) + tuple(range(2, x.ndim))
    wide = x.astype(np.float64)
    mean, var = wide.mean(axes), wide.var(axes)
    running_mean, running_var = ember.zeros(shape[1]), ember.ones(shape[1])
    out = F.batch_norm(ember.from_numpy(x), running_mean, running_var, ember.from_numpy(w), ember.from_numpy(b),
                       training=True, momentum=0.5)
    ref = _reference(x, mean, var, w, b)
    assert out.dtype == ember.float32
    assert np.abs(out.numpy() - ref).max() <= _bound(ref)
    count = x.size // shape[1]
    np.testing.assert_allclose(running_mean.numpy(), 0.5 * mean, rtol=2e-7)
    np.testing.assert_allclose(running_var.numpy(), 0.5 + 0.5 * var * count / (count - 1), rtol=2e-7)


@pytest.mark.parametrize("shape", SHAPES)
def test_evaluation_output(shape):
    x, w, b = _channels_far_from_zero(shape, seed=1)
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.astype(np.float64).mean(axes).astype(np.float32)
    var = x.astype(np.float64).var(axes).astype(np.float32)
    out = F.batch_norm(ember.from_numpy(x), ember.from_numpy(mean), ember.from_numpy(var), ember.from_numpy(w),
                       ember.from_numpy(b), training=False)
    ref = _reference(x, mean.astype(np.float64), var.astype(np.float64), w, b)
    assert np.abs(out.numpy() - ref).max() <= _bound(ref)


def test_without_affine_parameters_and_in_float64():
    x, _, _ = _channels_far_from_zero((4, 8, 6, 6), seed=2)
    mean, var = x.astype(np.float64).mean((0, 2, 3)), x.astype(np.float64).var((0, 2, 3))
    ones, zeros = np.ones(8), np.zeros(8)
    out = F.batch_norm(ember.from_numpy(x), None, None, training=True).numpy()
    ref = _reference(x, mean, var, ones, zeros)
    assert np.abs(out - ref).max() <= _bound(ref)
    out64 = F.batch_norm(ember.from_numpy(x.astype(np.float64)), None, None, training=True).numpy()
    np.testing.assert_allclose(out64, ref, rtol=0, atol=1e-12)


def test_relu6_gradient_through_batch_norm_matches_float64():
    # the failure this guards against: a batch_norm output within ~1e-5 of 0 whose float32 sign was wrong, so
    # ReLU6 passed (or stopped) a gradient that the exact computation did not. Each channel's bias is chosen so
    # that one output is exactly +-3e-6 (up to the bias' float32 rounding, 1.2e-7).
    x, w, _ = _channels_far_from_zero((2, 192, 4, 4), seed=3)
    wide = x.astype(np.float64)
    xhat = (wide[0, :, 1, 1] - wide.mean((0, 2, 3))) / np.sqrt(wide.var((0, 2, 3)) + 1e-5)
    sign = np.where(np.arange(192) % 2 == 0, 1.0, -1.0)
    b = (-w * xhat + sign * 3e-6).astype(np.float32)
    g = np.random.default_rng(4).standard_normal(x.shape)
    grads = []
    for dtype in (ember.float32, ember.float64):
        xt = ember.from_numpy(x).to(dtype).requires_grad_(True)
        y = F.batch_norm(xt, None, None, ember.from_numpy(w).to(dtype), ember.from_numpy(b).to(dtype), training=True)
        assert ((y.detach()[0, :, 1, 1].numpy() > 0) == (sign > 0)).all()
        (F.relu6(y) * ember.from_numpy(g).to(dtype)).sum().backward()
        grads.append(xt.grad.numpy().astype(np.float64))
    err = np.linalg.norm(grads[0] - grads[1]) / np.linalg.norm(grads[1])
    assert err < 1e-5


@pytest.mark.parametrize("shape", SHAPES + [(2, 480, 2, 2), (1, 8, 64, 64)])
@pytest.mark.parametrize("affine", [True, False])
def test_training_kernel_matches_the_numpy_path(shape, affine, monkeypatch):
    # ember._C.batch_norm_forward_train (one call) against the numpy arithmetic it replaces, and both
    # against float64: outputs and the running statistics they leave
    from ember._ops import nn_norm

    x, w, b = _channels_far_from_zero(shape, seed=3)
    results = []
    for kernel in (True, False):
        if not kernel:
            monkeypatch.setattr(nn_norm, "_batch_norm_train_c", lambda *a: None)
        rm, rv = ember.zeros(shape[1]), ember.ones(shape[1])
        args = (ember.tensor(w), ember.tensor(b)) if affine else (None, None)
        y = F.batch_norm(ember.tensor(x), rm, rv, *args, training=True, momentum=0.5).numpy()
        results.append((y, rm.numpy(), rv.numpy()))
    axes = (0,) + tuple(range(2, x.ndim))
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axis=axes), x64.var(axis=axes)
    exact = _reference(x, mean, var, w if affine else np.ones_like(w), b if affine else np.zeros_like(b))
    count = x.size // shape[1]
    for y, rm, rv in results:
        np.testing.assert_allclose(y, exact, rtol=0, atol=2e-5)
        np.testing.assert_allclose(rm, 0.5 * mean, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(rv, 0.5 + 0.5 * var * count / (count - 1), rtol=1e-5)
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=0, atol=2e-5)


def test_training_kernel_refuses_what_it_cannot_read():
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="contiguous"):
        ember._C.batch_norm_forward_train(x.transpose(0, 2, 1), None, None, 1e-5)
    with pytest.raises(ValueError, match="weight"):
        ember._C.batch_norm_forward_train(x, np.ones(2, np.float32), None, 1e-5)
    with pytest.raises(ValueError, match="bias"):
        ember._C.batch_norm_forward_train(x, None, np.ones(3, np.float64), 1e-5)
