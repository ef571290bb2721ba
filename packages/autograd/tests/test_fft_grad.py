"""Gradients of ember.fft, stft and istft: gradcheck and gradgradcheck in float64/complex128.

The op_db samples (tests/test_ops_grad.py) check every transform once per dtype; these add every norm,
trimming and zero-padding, odd and even c2r sizes (the Hermitian weighting of the zero and Nyquist
bins), the prims directly, and stft/istft with window gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.fft as F
from ember.autograd import gradcheck, gradgradcheck

NORMS = (None, "ortho", "forward")
C2C = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn")
R2C = ("rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn")
C2R = ("irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn")


def _input(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if dtype.is_complex:
        values = values + 1j * rng.standard_normal(shape)
    return ember.tensor(values, dtype=dtype, requires_grad=True)


def _size_kwargs(name, size):
    if size is None:
        return {}
    return {"n": size[-1]} if name[-1] not in "2n" else {"s": size}


@pytest.mark.parametrize("size", [None, (2, 3), (4, 7)], ids=["same", "trim", "pad"])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", C2C + R2C + C2R)
def test_transforms_gradcheck(name, norm, size):
    kwargs = {"norm": norm, **_size_kwargs(name, size)}
    fn = getattr(F, name)
    dtypes = (ember.float64,) if name in R2C else (ember.float64, ember.complex128)
    for dtype in dtypes:
        x = _input((3, 5), dtype)
        assert gradcheck(lambda t: fn(t, **kwargs), (x,))
        if norm == "ortho" and size == (4, 7):  # second derivatives: the formulas are the prims again
            assert gradgradcheck(lambda t: fn(t, **kwargs), (x,))


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 8])
def test_c2r_weighting_at_every_parity(n):
    # n even has a Nyquist bin, n odd none; n = 1, 2 have no paired bins at all
    x = _input((3, n // 2 + 1), ember.complex128)
    assert gradcheck(lambda t: F.irfft(t, n=n), (x,))
    assert gradcheck(lambda t: F.hfft(t, n=n, norm="ortho"), (x,))
    r = _input((3, n), ember.float64)
    assert gradcheck(lambda t: F.rfft(t), (r,))
    assert gradcheck(lambda t: F.ihfft(t, norm="forward"), (r,))


def test_prims_directly():
    fft = ember._ops.fft
    z = _input((3, 4, 5), ember.complex128)
    r = _input((3, 4, 5), ember.float64)
    for norm in ("backward", "ortho", "forward"):
        assert gradgradcheck(lambda t: fft._fft_c2c(t, (0, 2), norm, False), (z,))
        assert gradgradcheck(lambda t: fft._fft_r2c(t, (2, 0), norm, True), (r,))
        assert gradgradcheck(lambda t: fft._fft_r2c(t, (1,), norm, False), (r,))
        assert gradgradcheck(lambda t: fft._fft_c2r(t[:, :, :3], (0, 2), norm, 5), (z,))


def test_gradient_of_a_real_loss_matches_the_closed_form():
    # L = sum |fft(x)|^2 = n * sum x^2 (Parseval), so dL/dx = 2 n x
    x = _input((16,), ember.float64)
    (F.fft(x).abs() ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 16 * x.detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("center, normalized", [(True, False), (False, True)])
def test_stft_gradcheck(center, normalized):
    x = _input((2, 40), ember.float64)
    window = ember.hann_window(16, dtype=ember.float64).requires_grad_()

    def spectrum(x, w):
        return ember.stft(x, 16, 4, window=w, center=center, normalized=normalized, return_complex=True)

    assert gradcheck(spectrum, (x, window))
    assert gradgradcheck(spectrum, (x, window))
    z = _input((40,), ember.complex128)
    assert gradcheck(lambda t: ember.stft(t, 16, 5, win_length=12, return_complex=True), (z,))


def test_istft_gradcheck():
    window = ember.hann_window(16, dtype=ember.float64)
    x = ember.tensor(np.random.default_rng(1).standard_normal(40))
    spectrum = ember.stft(x, 16, 4, window=window, return_complex=True).requires_grad_()
    w = window.clone().requires_grad_()

    def inverse(s, w):
        return ember.istft(s, 16, 4, window=w, length=40)

    assert gradcheck(inverse, (spectrum, w))
    assert gradgradcheck(inverse, (spectrum, w))


@pytest.mark.parametrize("pad_mode", ["reflect", "replicate", "circular", "constant"])
@pytest.mark.parametrize("length, n_fft, hop, pad", [(40, 16, 4, 8), (37, 10, 3, 5), (30, 12, 5, 0), (25, 8, 7, 4)])
def test_stft_frame_prims_are_each_others_adjoint(pad_mode, length, n_fft, hop, pad):
    fft = ember._ops.fft
    x = _input((2, length), ember.float64)
    assert gradcheck(lambda t: fft._stft_frames(t, n_fft, hop, pad, pad_mode), (x,))
    assert gradgradcheck(lambda t: fft._stft_frames(t, n_fft, hop, pad, pad_mode), (x,))
    frames = fft._stft_frames(x.detach(), n_fft, hop, pad, pad_mode)
    g = _input(tuple(frames.shape), ember.complex128)
    assert gradcheck(lambda t: fft._stft_frames_backward(t, length, hop, pad, pad_mode), (g,))
    # <frames(x), g> == <x, frames_backward(g)>: the adjoint identity, exactly
    lhs = (frames * g.detach()).sum()
    rhs = (x.detach() * fft._stft_frames_backward(g.detach(), length, hop, pad, pad_mode)).sum()
    assert abs(complex(lhs.item()) - complex(rhs.item())) < 1e-9
