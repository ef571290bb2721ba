"""ember.fft and stft against PyTorch on the CPU: the workloads issue 20 names.

* ``fft_64x4096_c64``: a batched 1-D FFT (64 rows of 4096 complex64 points);
* ``fft2_512x512_c64``: a 2-D FFT of one 512x512 complex64 image;
* ``rfft_2^20_f32``: the real FFT of 2^20 float32 samples;
* ``stft_16khz_1s``: ``stft`` of one second of 16 kHz float32 audio (25 ms Hann windows every 10 ms:
  n_fft 400, hop 160, the usual speech front end).

Each has a forward row and a ``_fwd_bwd`` row (the transform, then the input's gradient for a fixed
output gradient through ``autograd.grad``). Target: at most 1.3x PyTorch's time. Each setup checks once
that both libraries give the same values before anything is timed.
"""

from __future__ import annotations

import numpy as np
from harness import Workload, import_torch


def _pair(build, backward):
    """A setup from ``build(lib, arrays) -> (fn, input)``: forward only, or forward plus the input gradient."""

    def setup():
        import ember

        rng = np.random.default_rng(0)
        arrays = {}
        ember_fn = _timed(ember, build, arrays, rng, backward)
        torch = import_torch()
        torch_fn = None
        if torch is not None:
            torch_fn = _timed(torch, build, arrays, rng, backward)
            ours, theirs = np.asarray(ember_fn()), torch_fn().resolve_conj().numpy()
            scale = max(1.0, float(np.abs(theirs).max()))
            np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-4 * scale)
        return ember_fn, torch_fn

    return setup


def _timed(lib, build, arrays, rng, backward):
    fn, x = build(lib, arrays, rng)
    if not backward:
        return lambda: fn(x)
    x.requires_grad_(True)
    y = fn(x)
    if "g" not in arrays:
        arrays["g"] = (rng.standard_normal(tuple(y.shape)) + (1j * rng.standard_normal(tuple(y.shape))
                                                                if y.is_complex() else 0)).astype(
            np.complex64 if y.is_complex() else np.float32)
    g = lib.from_numpy(arrays["g"])

    def forward_backward():
        (dx,) = lib.autograd.grad(fn(x), x, g)
        return dx

    return forward_backward


def _input(arrays, rng, shape, complex_):
    if "x" not in arrays:
        values = rng.standard_normal(shape)
        if complex_:
            values = values + 1j * rng.standard_normal(shape)
        arrays["x"] = values.astype(np.complex64 if complex_ else np.float32)
    return arrays["x"]


def fft_batched(lib, arrays, rng):
    return (lambda x: lib.fft.fft(x)), lib.from_numpy(_input(arrays, rng, (64, 4096), True)).clone()


def fft2_image(lib, arrays, rng):
    return (lambda x: lib.fft.fft2(x)), lib.from_numpy(_input(arrays, rng, (512, 512), True)).clone()


def rfft_long(lib, arrays, rng):
    return (lambda x: lib.fft.rfft(x)), lib.from_numpy(_input(arrays, rng, (1 << 20,), False)).clone()


def stft_audio(lib, arrays, rng):
    window = lib.hann_window(400)
    return (lambda x: lib.stft(x, 400, 160, window=window, return_complex=True)), \
        lib.from_numpy(_input(arrays, rng, (16000,), False)).clone()


_CASES = [
    ("fft_64x4096_c64", fft_batched, "ember.fft.fft over the last dim of 64x4096 complex64"),
    ("fft2_512x512_c64", fft2_image, "ember.fft.fft2 of a 512x512 complex64 image"),
    ("rfft_2^20_f32", rfft_long, "ember.fft.rfft of 2^20 float32 samples"),
    ("stft_16khz_1s", stft_audio, "ember.stft of 16000 float32 samples, n_fft 400, hop 160, Hann window"),
]

WORKLOADS = []
for _name, _build, _description in _CASES:
    WORKLOADS.append(Workload(_name, _pair(_build, False), description=_description))
    WORKLOADS.append(Workload(f"{_name}_fwd_bwd", _pair(_build, True),
                              description=f"{_description}, then the input's gradient (autograd.grad)"))
