"""ember.fft, stft/istft and the windows on cuda (cuFFT through cupyx.scipy.fft), against the CPU results.

Every test needs a GPU (``@pytest.mark.cuda``); the CPU runs of the same ops are in tests/test_fft.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.fft as F
from ember.testing import assert_close

pytestmark = pytest.mark.cuda

C2C = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn")
R2C = ("rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn")
C2R = ("irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn")
TOL = {ember.complex64: (1e-4, 1e-3), ember.float32: (1e-4, 1e-3)}


def _make(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if dtype.is_complex:
        values = values + 1j * rng.standard_normal(shape)
    return ember.tensor(values, dtype=dtype)


def _close(gpu, cpu, dtype):
    assert gpu.device.type == "cuda"
    rtol, atol = TOL.get(dtype, (1e-9, 1e-9))
    assert_close(gpu.cpu(), cpu, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.complex64, ember.complex128])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name", C2C + R2C + C2R)
def test_transforms_match_cpu(name, norm, dtype):
    if name in R2C and dtype.is_complex:
        pytest.skip("a real-input transform")
    x = _make((3, 10, 7), dtype)
    for kwargs in ({}, {"n": 11} if name[-1] not in "2n" else {"s": (4, 9)}):
        _close(getattr(F, name)(x.cuda(), norm=norm, **kwargs), getattr(F, name)(x, norm=norm, **kwargs), dtype)


def test_batched_large_and_noncontiguous():
    x = _make((64, 4096), ember.complex64)
    _close(F.fft(x.cuda()), F.fft(x), ember.complex64)
    _close(F.fft2(x.cuda()[:, ::4].t()), F.fft2(x[:, ::4].t()), ember.complex64)
    r = _make((1 << 20,), ember.float32)
    _close(F.rfft(r.cuda()), F.rfft(r), ember.float32)
    # the same size again: CuPy's plan cache serves the second call
    _close(F.fft(x.cuda()), F.fft(x), ember.complex64)


def test_empty_and_meta_shapes():
    assert F.fft(ember.ones(0, 4, dtype=ember.complex64, device="cuda")).shape == (0, 4)
    assert F.irfft(ember.ones(0, 3, dtype=ember.complex64, device="cuda")).shape == (0, 4)
    assert F.rfft(ember.ones(0, 4, device="cuda")).shape == (0, 3)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "hfftn", "ihfft2"])
def test_gradients_match_cpu(name):
    dtype = ember.float64 if name in R2C else ember.complex128
    x = _make((4, 6), dtype)
    grads = []
    for device in ("cpu", "cuda"):
        t = x.to(device).requires_grad_()
        y = getattr(F, name)(t)
        g = _make(tuple(y.shape), y.dtype, seed=1).to(device)
        (dx,) = ember.autograd.grad(y, t, g)
        grads.append(dx.cpu())
    assert_close(grads[1], grads[0], rtol=1e-9, atol=1e-9)


def test_stft_istft_on_cuda():
    x = _make((2, 2000), ember.float32)
    window = ember.hann_window(256)
    cpu = ember.stft(x, 256, 64, window=window, return_complex=True)
    gpu = ember.stft(x.cuda(), 256, 64, window=window.cuda(), return_complex=True)
    _close(gpu, cpu, ember.complex64)
    back = ember.istft(gpu, 256, 64, window=window.cuda(), length=2000)
    assert back.device.type == "cuda"
    assert_close(back.cpu(), x, rtol=1e-4, atol=1e-4)
    t = x.cuda().requires_grad_()
    ember.stft(t, 256, 64, window=window.cuda(), return_complex=True).abs().sum().backward()
    assert t.grad.device.type == "cuda" and t.grad.shape == x.shape


def test_windows_and_frequencies_on_cuda():
    assert_close(ember.hann_window(64, device="cuda").cpu(), ember.hann_window(64))
    assert_close(ember.signal.windows.kaiser(33, beta=5.0, device="cuda").cpu(),
                 ember.signal.windows.kaiser(33, beta=5.0))
    assert_close(F.fftfreq(9, 0.1, device="cuda").cpu(), F.fftfreq(9, 0.1))
    assert_close(F.fftshift(F.rfftfreq(8, device="cuda")).cpu(), F.fftshift(F.rfftfreq(8)))


def test_cached_cuda_windows_are_fresh_tensors_with_the_cpu_values():
    # hann/hamming/blackman on cuda copy a cached upload (ember._spectral._cached_device_window)
    for make in (ember.hann_window, ember.hamming_window, ember.blackman_window):
        for dtype in (ember.float32, ember.float64):
            for periodic in (True, False):
                first = make(400, periodic, dtype=dtype, device="cuda")
                assert first.device.type == "cuda" and first.dtype == dtype and not first.requires_grad
                np.testing.assert_array_equal(first.cpu().numpy(), make(400, periodic, dtype=dtype).numpy())
                first.fill_(7.0)  # a new tensor per call: writing one leaves the next untouched
                second = make(400, periodic, dtype=dtype, device="cuda", requires_grad=True)
                assert second.requires_grad and second.is_leaf
                np.testing.assert_array_equal(second.detach().cpu().numpy(), make(400, periodic, dtype=dtype).numpy())
    assert ember.hann_window(1, device="cuda").cpu().tolist() == [1.0]
    assert ember.hann_window(0, device="cuda").shape == (0,)


# -- cuFFT plans called directly (ember.cuda.kernels.fft_plans) ------------------------------------------


def _plans():
    ember.cuda.init()
    from ember.cuda.kernels import fft_plans

    return fft_plans


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_direct_plans_take_trailing_dims_and_match_numpy(norm):
    plans = _plans()
    x = _make((4, 6, 10), ember.complex128)
    data = x.cuda()._data
    for axes, forward in (((2,), True), ((1, 2), False), ((2, 1), True), ((0, 1, 2), False)):
        out = plans.transform(data, axes, norm, "c2c", forward)
        want = (np.fft.fftn if forward else np.fft.ifftn)(x.numpy(), axes=axes, norm=norm)
        np.testing.assert_allclose(out.get(), want, rtol=1e-10, atol=1e-10)
    real = x.real.contiguous().cuda()._data
    out = plans.transform(real, (1, 2), norm, "r2c")
    np.testing.assert_allclose(out.get(), np.fft.rfftn(x.real.numpy(), axes=(1, 2), norm=norm), rtol=1e-10, atol=1e-10)
    half = out.copy()
    back = plans.transform(half, (1, 2), norm, "c2r", last_dim_size=10)
    np.testing.assert_allclose(back.get(), x.real.numpy(), rtol=1e-10, atol=1e-10)
    assert bool((half == out).all())  # cuFFT's c2r overwrites its input: ours transforms a copy
    # not the trailing dims (or not in order for a real transform): the caller's cupyx path
    assert plans.transform(data, (1,), norm, "c2c") is None
    assert plans.transform(real, (2, 1), norm, "r2c") is None


def test_direct_plans_are_cached_and_bounded():
    plans = _plans()
    plans.clear_cache()
    x = _make((3, 16), ember.complex64).cuda()
    F.fft(x)
    F.fft(x)
    assert plans.cache_size() == 1
    for n in range(2, plans.CACHE_CAPACITY + 6):
        F.fft(_make((2, n), ember.complex64).cuda())
    assert plans.cache_size() == plans.CACHE_CAPACITY
    _close(F.fft(x), F.fft(x.cpu()), ember.complex64)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
def test_other_dims_fall_back_and_match_cpu(name):
    dtype = ember.float32 if name == "rfft" else ember.complex64
    x = _make((9, 5, 4), dtype)
    _close(getattr(F, name)(x.cuda(), dim=0), getattr(F, name)(x, dim=0), dtype)
    _close(getattr(F, name)(x.cuda()[:, ::2], dim=1), getattr(F, name)(x[:, ::2], dim=1), dtype)


@pytest.mark.parametrize("pad_mode", ["reflect", "constant", "replicate", "circular"])
@pytest.mark.parametrize("win_length", [None, 48])
@pytest.mark.parametrize("batched", [False, True])
def test_stft_fused_cuda_path_matches_the_op_path(pad_mode, win_length, batched):
    x = _make((2, 700) if batched else (700,), ember.float32).cuda()
    window = ember.hann_window(win_length or 64, device="cuda")
    kwargs = dict(n_fft=64, hop_length=16, win_length=win_length, window=window, pad_mode=pad_mode,
                  return_complex=True)
    fused = ember.stft(x, **kwargs)  # nothing recorded: the fused CuPy path
    recorded = ember.stft(x.clone().requires_grad_(), **kwargs)  # autograd: the three ops
    assert fused.shape == recorded.shape
    _close(fused, recorded.detach().cpu(), ember.complex64)
    _close(fused, ember.stft(x.cpu(), **{**kwargs, "window": window.cpu()}), ember.complex64)
    plain = ember.stft(x, 64, 16, return_complex=True, normalized=True, onesided=False)  # no window, two-sided
    _close(plain, ember.stft(x.cpu(), 64, 16, return_complex=True, normalized=True, onesided=False), ember.complex64)


def test_transforms_and_their_gradients_do_not_wait_for_the_gpu():
    x = _make((8, 64), ember.complex64).cuda()
    r = _make((2, 1000), ember.float32).cuda()
    window = ember.hann_window(128, device="cuda")

    def run():
        outs = [F.fft(x), F.ifft2(x), F.rfft(r), F.irfft(F.rfft(r)), ember.stft(r, 128, 32, window=window,
                                                                               return_complex=True)]
        t = r.clone().requires_grad_()
        spectrum = ember.stft(t, 128, 32, window=window, return_complex=True)
        (g,) = ember.autograd.grad(F.irfft(F.rfft(t)).sum() + spectrum.abs().sum(), t)
        return outs, g

    ember.cuda.init()
    run()
    ember.cuda.synchronize()
    ember.cuda.set_sync_debug_mode("error")
    try:
        outs, g = run()
    finally:
        ember.cuda.set_sync_debug_mode("default")
    _close(outs[0], F.fft(x.cpu()), ember.complex64)
    _close(outs[3], r.cpu(), ember.float32)
    assert g.shape == r.shape


@pytest.mark.parametrize("name", ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "rfft2", "rfftn",
                                  "irfft", "irfft2", "irfftn"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_checked_kernels_of_positional_calls_match_cpu(name, norm):
    # positional calls without n/s reach the transforms' checked cuda kernels (one cuFFT plan, no prim)
    dtype = ember.float64 if name.startswith("rfft") else ember.complex128
    x = _make((3, 6, 10), dtype)
    dim = -1 if name[-1] not in "2n" else ((-2, -1) if name.endswith("2") else None)
    op = getattr(F, name)
    _close(op(x.cuda(), None, dim, norm), op(x, None, dim, norm), dtype)
    _close(op(x.cuda()), op(x), dtype)
    _close(op(x.cuda()[:, ::2]), op(x[:, ::2]), dtype)  # not contiguous: one copy, then the plan


def test_checked_kernels_hand_back_what_they_do_not_take():
    x = _make((4, 6), ember.complex64)
    r = _make((4, 6), ember.float32)
    _close(F.fft(r.cuda()), F.fft(r), ember.float32)  # real input: the composite converts it
    _close(F.fft(x.cuda(), 9), F.fft(x, 9), ember.complex64)  # n: the composite pads
    _close(F.fft(x.cuda(), None, 0), F.fft(x, None, 0), ember.complex64)  # not the trailing dim
    with pytest.raises(RuntimeError, match="Invalid normalization mode"):
        F.fft(x.cuda(), None, -1, "bad")
    with pytest.raises(IndexError):
        F.fft(x.cuda(), None, 2)
    with pytest.raises(RuntimeError, match="expects a real input"):
        F.rfft(x.cuda())


@pytest.mark.parametrize("pad_mode", ["reflect", "constant", "replicate", "circular"])
@pytest.mark.parametrize("hop", [16, 24, 64])
def test_stft_frames_kernels_forward_and_backward_match_cpu(pad_mode, hop):
    # _stft_frames is one gather kernel on cuda, its adjoint one overlap-add kernel (reflect/constant)
    x = _make((2, 300), ember.float64)
    window = ember.hann_window(64, dtype=ember.float64)
    g = None
    grads = []
    for device in ("cpu", "cuda"):
        t = x.to(device).requires_grad_()
        spectrum = ember.stft(t, 64, hop, window=window.to(device), pad_mode=pad_mode, return_complex=True)
        if g is None:
            g = _make(tuple(spectrum.shape), ember.complex128, seed=3)
        (dx,) = ember.autograd.grad(spectrum, t, g.to(device))
        grads.append((spectrum.detach().cpu(), dx.cpu()))
    for gpu, cpu in zip(grads[1], grads[0]):
        assert_close(gpu, cpu, rtol=1e-10, atol=1e-10)
