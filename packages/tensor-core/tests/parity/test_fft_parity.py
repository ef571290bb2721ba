"""ember.fft, stft/istft and the window functions against torch.fft, torch.stft/istft and torch's windows:
values, shapes, dtypes and error types. (Gradients: packages/autograd/tests/parity/test_fft_grad_parity.py.)

ember runs on the backend's device (``_parity_device``); PyTorch on the CPU, the reference.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _parity_device import EMBER_DEVICE

import ember

pytestmark = pytest.mark.filterwarnings("ignore:.*(window was not provided|return_complex=False|shorter than)")

RNG = np.random.default_rng(3)
ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
TWO_D = ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2")
N_D = ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")
REAL_INPUT = ("rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn")


def _values(shape, complex_):
    values = RNG.standard_normal(shape)
    return values + 1j * RNG.standard_normal(shape) if complex_ else values


def _both(values, dtype=None):
    e = ember.tensor(values, device=EMBER_DEVICE)
    t = torch.tensor(values)
    if dtype is not None:
        e, t = e.to(getattr(ember, dtype)), t.to(getattr(torch, dtype))
    return e, t


def _same(ours, theirs, rtol=1e-7, atol=1e-7):
    theirs = theirs.resolve_conj()
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.cpu().numpy(), theirs.numpy(), rtol=rtol, atol=atol)


ARGUMENTS_1D = [{}, {"n": 5}, {"n": 13, "dim": 0}, {"dim": -2, "norm": "ortho"}, {"norm": "forward"}]
ARGUMENTS_2D = [{}, {"s": (3, 9)}, {"dim": (0, 2), "norm": "ortho"}, {"s": (-1, 4), "norm": "forward"}]
ARGUMENTS_ND = [{}, {"s": (4, 3)}, {"dim": (2, 0)}, {"s": (5,), "dim": 1, "norm": "ortho"}, {"norm": "forward"}]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "int64"])
@pytest.mark.parametrize("name, kwargs", [(n, k) for n in ONE_D for k in ARGUMENTS_1D]
                         + [(n, k) for n in TWO_D for k in ARGUMENTS_2D]
                         + [(n, k) for n in N_D for k in ARGUMENTS_ND])
def test_transforms_match_pytorch(name, kwargs, dtype):
    if name in REAL_INPUT and dtype.startswith("complex"):
        pytest.skip("real-input transform (the error is compared in test_errors_match_pytorch)")
    values = _values((3, 6, 7), dtype.startswith("complex"))
    if dtype == "int64":
        values = np.round(values * 4)
    e, t = _both(values, dtype)
    single = dtype in ("float32", "complex64", "int64")
    _same(getattr(ember.fft, name)(e, **kwargs), getattr(torch.fft, name)(t, **kwargs),
          rtol=1e-4 if single else 1e-9, atol=1e-3 if single else 1e-9)


@pytest.mark.parametrize("n", [0, 1, 5, 8])
def test_frequencies_and_shifts_match_pytorch(n):
    for fn in ("fftfreq", "rfftfreq"):
        _same(getattr(ember.fft, fn)(n, 0.5), getattr(torch.fft, fn)(n, 0.5))
    values = _values((n, 3), False)
    e, t = _both(values)
    for fn in ("fftshift", "ifftshift"):
        _same(getattr(ember.fft, fn)(e), getattr(torch.fft, fn)(t))
        _same(getattr(ember.fft, fn)(e, dim=0), getattr(torch.fft, fn)(t, dim=0))


ERROR_CALLS = [
    ("fft", (4, 6), "float32", {"norm": "bad"}),
    ("fft", (4, 6), "float32", {"n": 0}),
    ("fft", (4, 6), "float32", {"dim": 2}),
    ("fft", (4, 6), "float16", {}),
    ("rfft", (4, 6), "bfloat16", {}),
    ("rfft", (4, 6), "complex64", {}),
    ("ihfft2", (4, 6), "complex64", {}),
    ("fftn", (4, 6), "float32", {"s": (2, 2), "dim": (0,)}),
    ("fftn", (4, 6), "float32", {"dim": (0, 0)}),
    ("fftn", (4, 6), "float32", {"s": (2, 3, 4)}),
    ("irfft", (1,), "complex64", {}),
    ("fft2", (4,), "float32", {}),
    ("fft", (), "float32", {}),
]


@pytest.mark.parametrize("name, shape, dtype, kwargs", ERROR_CALLS)
def test_errors_match_pytorch(name, shape, dtype, kwargs):
    e, t = _both(np.ones(shape), dtype)
    with pytest.raises(Exception) as theirs:
        getattr(torch.fft, name)(t, **kwargs)
    with pytest.raises(type(theirs.value)) as ours:
        getattr(ember.fft, name)(e, **kwargs)
    if "Invalid" in str(theirs.value) or "unique" in str(theirs.value):
        assert str(theirs.value).split("\n")[0] in str(ours.value)


# -- windows -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("n", [0, 1, 2, 10, 33])
@pytest.mark.parametrize("name, extra", [("hann_window", {}), ("hamming_window", {}), ("blackman_window", {}),
                                         ("bartlett_window", {}), ("kaiser_window", {}),
                                         ("kaiser_window", {"beta": 4.0}),
                                         ("hamming_window", {"alpha": 0.6, "beta": 0.4})])
def test_legacy_windows_match_pytorch(name, extra, n, periodic):
    for dtype in ("float32", "float64"):
        ours = getattr(ember, name)(n, periodic, dtype=getattr(ember, dtype), device=EMBER_DEVICE, **extra)
        theirs = getattr(torch, name)(n, periodic, dtype=getattr(torch, dtype), **extra)
        _same(ours, theirs, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("name, extra", [("hann", {}), ("hamming", {}), ("blackman", {}), ("bartlett", {}),
                                         ("cosine", {}), ("nuttall", {}), ("gaussian", {"std": 2.0}),
                                         ("kaiser", {"beta": 6.0}), ("general_hamming", {"alpha": 0.6}),
                                         ("general_cosine", {"a": [0.4, 0.4, 0.2]}), ("exponential", {"tau": 3.0})])
def test_signal_windows_match_pytorch(name, extra, sym):
    for n in (0, 1, 9, 16):
        ours = getattr(ember.signal.windows, name)(n, sym=sym, dtype=ember.float64, device=EMBER_DEVICE, **extra)
        theirs = getattr(torch.signal.windows, name)(n, sym=sym, dtype=torch.float64, **extra)
        _same(ours, theirs, rtol=1e-10, atol=1e-10)


# -- stft / istft --------------------------------------------------------------------------------------------

STFT_CALLS = [
    dict(n_fft=64, hop_length=16),
    dict(n_fft=64, hop_length=16, center=False),
    dict(n_fft=50, hop_length=13, win_length=40, pad_mode="constant"),
    dict(n_fft=32, normalized=True),
    dict(n_fft=32, onesided=False),
    dict(n_fft=64, hop_length=20, pad_mode="replicate"),
    dict(n_fft=50, hop_length=9, win_length=33, center=False, align_to_window=True),
    dict(n_fft=32, hop_length=8, center=False, align_to_window=False),
]


@pytest.mark.parametrize("window", ["hann", "none"])
@pytest.mark.parametrize("kwargs", STFT_CALLS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
@pytest.mark.parametrize("shape", [(300,), (2, 300)])
def test_stft_matches_pytorch(shape, kwargs, window):
    e, t = _both(_values(shape, False))
    win = kwargs.get("win_length", kwargs["n_fft"])
    ew = ember.hann_window(win, dtype=ember.float64, device=EMBER_DEVICE) if window == "hann" else None
    tw = torch.hann_window(win, dtype=torch.float64) if window == "hann" else None
    ours = ember.stft(e, window=ew, return_complex=True, **kwargs)
    theirs = torch.stft(t, window=tw, return_complex=True, **kwargs)
    _same(ours, theirs, rtol=1e-9, atol=1e-9)
    _same(ember.stft(e, window=ew, return_complex=False, **kwargs),
          torch.stft(t, window=tw, return_complex=False, **kwargs), rtol=1e-9, atol=1e-9)


def test_stft_of_complex_input_matches_pytorch():
    e, t = _both(_values((2, 200), True))
    _same(ember.stft(e, 32, 8), torch.stft(t, 32, 8, return_complex=True), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("length", [None, 280, 320])
@pytest.mark.parametrize("kwargs", [dict(n_fft=64, hop_length=16), dict(n_fft=50, hop_length=10, win_length=40),
                                    dict(n_fft=32, hop_length=8, normalized=True)],
                         ids=["64/16", "50/10/40", "normalized"])
def test_istft_matches_pytorch(kwargs, length):
    values = _values((2, 300), False)
    win = kwargs.get("win_length", kwargs["n_fft"])
    spectrum = torch.stft(torch.tensor(values), window=torch.hann_window(win, dtype=torch.float64),
                          return_complex=True, **kwargs)
    e = ember.tensor(spectrum.numpy(), device=EMBER_DEVICE)
    ours = ember.istft(e, window=ember.hann_window(win, dtype=ember.float64, device=EMBER_DEVICE), length=length,
                       **kwargs)
    theirs = torch.istft(spectrum, window=torch.hann_window(win, dtype=torch.float64), length=length, **kwargs)
    _same(ours, theirs, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.stft(x, 16),
    lambda lib, x: lib.stft(x.reshape(1, 2, 50), 16, return_complex=True),
    lambda lib, x: lib.stft(x, 16, hop_length=0, return_complex=True),
    lambda lib, x: lib.stft(x, 200, center=False, return_complex=True),
    lambda lib, x: lib.stft(x, 16, win_length=20, return_complex=True),
    lambda lib, x: lib.istft(x, 16),
    lambda lib, x: lib.hann_window(-1),
    lambda lib, x: lib.hann_window(4, dtype=lib.int64),
])
def test_spectral_errors_match_pytorch(call):
    with pytest.raises(Exception) as theirs:
        call(torch, torch.ones(100))
    with pytest.raises(type(theirs.value)):
        call(ember, ember.ones(100, device=EMBER_DEVICE))
