"""Gradients of ember.fft, stft and istft against PyTorch's, for the same inputs and output gradients."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.parity,
              pytest.mark.filterwarnings("ignore:.*(window was not provided|shorter than)")]

CALLS = {
    "fft": lambda lib, x: lib.fft.fft(x, n=9),
    "ifft ortho": lambda lib, x: lib.fft.ifft(x, dim=0, norm="ortho"),
    "fft2 trim": lambda lib, x: lib.fft.fft2(x, s=(3, 4)),
    "ifftn forward": lambda lib, x: lib.fft.ifftn(x, norm="forward"),
    "rfft": lambda lib, x: lib.fft.rfft(x),
    "rfft odd": lambda lib, x: lib.fft.rfft(x, n=7),
    "rfftn pad": lambda lib, x: lib.fft.rfftn(x, s=(5, 8), norm="ortho"),
    "ihfft": lambda lib, x: lib.fft.ihfft(x),
    "ihfft2": lambda lib, x: lib.fft.ihfft2(x, norm="forward"),
    "irfft even": lambda lib, x: lib.fft.irfft(x, n=10),
    "irfft odd": lambda lib, x: lib.fft.irfft(x, n=9),
    "irfft2": lambda lib, x: lib.fft.irfft2(x),
    "hfft": lambda lib, x: lib.fft.hfft(x, norm="ortho"),
    "hfftn": lambda lib, x: lib.fft.hfftn(x, s=(4, 7)),
}
REAL_ONLY = {"rfft", "rfft odd", "rfftn pad", "ihfft", "ihfft2"}


def _run(lib, call, values, seed_grad):
    x = lib.tensor(values, requires_grad=True)
    y = call(lib, x)
    grad = np.random.default_rng(seed_grad).standard_normal(tuple(y.shape))
    if y.is_complex():
        grad = grad + 1j * np.random.default_rng(seed_grad + 1).standard_normal(tuple(y.shape))
    (dx,) = (ember if lib is ember else torch).autograd.grad(y, x, lib.tensor(grad))
    return np.asarray(dx.detach().resolve_conj().numpy() if lib is torch else dx.numpy())


@pytest.mark.parametrize("complex_input", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_fft_gradients_match_pytorch(name, complex_input):
    if complex_input and name in REAL_ONLY:
        pytest.skip("a real-input transform")
    rng = np.random.default_rng(5)
    values = rng.standard_normal((4, 6))
    if complex_input:
        values = values + 1j * rng.standard_normal((4, 6))
    ours = _run(ember, CALLS[name], values, 11)
    theirs = _run(torch, CALLS[name], values, 11)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


def test_stft_istft_gradients_match_pytorch():
    rng = np.random.default_rng(2)
    signal = rng.standard_normal((2, 120))
    results = []
    for lib in (ember, torch):
        x = lib.tensor(signal, requires_grad=True)
        window = lib.hann_window(32, dtype=lib.float64).requires_grad_()
        spectrum = lib.stft(x, 32, 8, window=window, return_complex=True)
        mixed = spectrum * lib.tensor(np.linspace(0.5, 1.5, spectrum.shape[-1]))
        back = lib.istft(mixed, 32, 8, window=window, length=120)
        loss = (back * lib.tensor(np.cos(np.arange(120.0)))).sum() + (spectrum.abs() ** 2).sum() * 1e-3
        loss.backward()
        results.append((x.grad.numpy(), window.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)
