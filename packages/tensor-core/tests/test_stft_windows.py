"""ember.stft / ember.istft against a numpy reference, their round trip, and the window functions
(ember.*_window, ember.signal.windows) against scipy.signal.windows."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal.windows as W

import ember
from ember.testing import assert_close

RNG = np.random.default_rng(0)

# -- windows ---------------------------------------------------------------------------------------------

SIGNAL_WINDOWS = {  # ember.signal.windows name -> (scipy function, keyword arguments)
    "hann": (W.hann, {}),
    "hamming": (W.hamming, {}),
    "blackman": (W.blackman, {}),
    "bartlett": (W.bartlett, {}),
    "cosine": (W.cosine, {}),
    "nuttall": (W.nuttall, {}),
    "gaussian": (W.gaussian, {"std": 1.7}),
    "kaiser": (W.kaiser, {"beta": 5.0}),
    "general_hamming": (W.general_hamming, {"alpha": 0.6}),
    "general_cosine": (W.general_cosine, {"a": [0.5, 0.3, 0.2]}),
    "exponential": (W.exponential, {"tau": 2.5}),
}
_SCIPY_NAMES = {"std": "std", "beta": "beta", "alpha": "alpha", "a": "a", "tau": "tau"}


@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("M", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("name", sorted(SIGNAL_WINDOWS))
def test_signal_windows_match_scipy(name, M, sym):
    scipy_fn, kwargs = SIGNAL_WINDOWS[name]
    ours = getattr(ember.signal.windows, name)(M, sym=sym, dtype=ember.float64, **kwargs)
    positional = [kwargs[k] for k in ("a", "alpha", "beta", "std") if k in kwargs]  # scipy takes them positionally
    rest = {k: v for k, v in kwargs.items() if k not in ("a", "alpha", "beta", "std")}
    expected = scipy_fn(M, *positional, sym=sym, **rest)
    assert ours.dtype is ember.float64 and tuple(ours.shape) == (M,)
    assert_close(ours, expected, rtol=1e-12, atol=1e-12)


def test_signal_window_options_and_errors():
    w = ember.signal.windows.hann(5, dtype=ember.float32, requires_grad=True)
    assert w.dtype is ember.float32 and w.requires_grad
    assert ember.signal.windows.kaiser(4, device="meta").device.type == "meta"
    assert_close(ember.signal.windows.exponential(6, center=1.0, sym=False, dtype=ember.float64),
                 W.exponential(6, center=1.0, sym=False))
    with pytest.raises(ValueError, match="requires non-negative window length, got M=-1"):
        ember.signal.windows.hann(-1)
    with pytest.raises(ValueError, match="expects float32 or float64 dtypes"):
        ember.signal.windows.hann(4, dtype=ember.int32)
    with pytest.raises(ValueError, match="Standard deviation must be positive"):
        ember.signal.windows.gaussian(4, std=0.0)
    with pytest.raises(ValueError, match="Center must be None for symmetric windows"):
        ember.signal.windows.exponential(4, center=1.0)
    with pytest.raises(ValueError, match="Tau must be positive"):
        ember.signal.windows.exponential(4, tau=0.0)
    with pytest.raises(ValueError, match="beta must be non-negative"):
        ember.signal.windows.kaiser(4, beta=-1.0)


LEGACY = {
    "hann_window": lambda n, sym: W.hann(n, sym=sym),
    "hamming_window": lambda n, sym: W.hamming(n, sym=sym),
    "blackman_window": lambda n, sym: W.blackman(n, sym=sym),
    "bartlett_window": lambda n, sym: W.bartlett(n, sym=sym),
    "kaiser_window": lambda n, sym: W.kaiser(n, 12.0, sym=sym),
}


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("n", [0, 1, 2, 9, 64])
@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_windows_match_scipy(name, n, periodic):
    ours = getattr(ember, name)(n, periodic, dtype=ember.float64)
    assert_close(ours, LEGACY[name](n, not periodic), rtol=1e-12, atol=1e-12)


def test_legacy_window_options_and_errors():
    assert ember.hann_window(8).dtype is ember.float32
    assert ember.hann_window(8, dtype=ember.float16).dtype is ember.float16  # any floating dtype, as PyTorch
    assert_close(ember.hamming_window(6, alpha=0.5, beta=0.5, dtype=ember.float64), W.hann(6, sym=False))
    assert_close(ember.kaiser_window(6, beta=3.0, dtype=ember.float64), W.kaiser(6, 3.0, sym=False))
    assert ember.blackman_window(4, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="hann_window expects floating point dtypes"):
        ember.hann_window(4, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="requires non-negative window_length, got window_length=-1"):
        ember.bartlett_window(-1)


# -- stft -------------------------------------------------------------------------------------------------


def _stft_reference(x, n_fft, hop, window, center=True, pad_mode="reflect", normalized=False, onesided=True):
    """The STFT in numpy: pad, frame, window, FFT; ``(..., freq, frames)``."""
    if center:
        pad = [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)]
        x = np.pad(x, pad, mode={"reflect": "reflect", "constant": "constant", "replicate": "edge",
                                 "circular": "wrap"}[pad_mode])
    count = 1 + (x.shape[-1] - n_fft) // hop
    frames = np.stack([x[..., t * hop: t * hop + n_fft] for t in range(count)], axis=-2) * window
    spectrum = np.fft.rfft(frames) if onesided else np.fft.fft(frames)
    if normalized:
        spectrum = spectrum / np.sqrt(n_fft)
    return np.swapaxes(spectrum, -1, -2)


@pytest.mark.parametrize("center, pad_mode", [(True, "reflect"), (True, "constant"), (True, "replicate"),
                                              (True, "circular"), (False, "reflect")])
@pytest.mark.parametrize("normalized", [False, True])
def test_stft_matches_numpy(center, pad_mode, normalized):
    x = RNG.standard_normal((2, 300))
    window = W.hann(64, sym=False)
    ours = ember.stft(ember.tensor(x), 64, 16, window=ember.tensor(window), center=center, pad_mode=pad_mode,
                      normalized=normalized, return_complex=True)
    expected = _stft_reference(x, 64, 16, window, center, pad_mode, normalized)
    assert tuple(ours.shape) == expected.shape
    assert_close(ours, expected, rtol=1e-10, atol=1e-10)


def test_stft_options():
    x = RNG.standard_normal(200)
    t = ember.tensor(x)
    # defaults: hop n_fft // 4, rectangular window of n_fft
    assert_close(ember.stft(t, 32, return_complex=True), _stft_reference(x, 32, 8, np.ones(32)))
    # a shorter window is centred in n_fft zeros
    window = W.hamming(20, sym=False)
    padded = np.pad(window, (6, 6))
    assert_close(ember.stft(t, 32, 10, 20, ember.tensor(window), return_complex=True),
                 _stft_reference(x, 32, 10, padded))
    # two-sided, and the real-valued (..., 2) form
    assert_close(ember.stft(t, 32, 8, onesided=False, return_complex=True),
                 _stft_reference(x, 32, 8, np.ones(32), onesided=False))
    as_real = ember.stft(t, 32, 8, return_complex=False)
    assert as_real.shape[-1] == 2 and as_real.dtype is ember.float64
    # complex input is two-sided
    z = x + 1j * RNG.standard_normal(200)
    assert_close(ember.stft(ember.tensor(z), 32, 8), _stft_reference(z, 32, 8, np.ones(32), onesided=False))
    # the Tensor method
    assert_close(t.stft(32, 8, return_complex=True), ember.stft(t, 32, 8, return_complex=True))
    # float32 in, complex64 out
    assert ember.stft(t.float(), 32, return_complex=True).dtype is ember.complex64


@pytest.mark.parametrize("n_fft, hop, win_length", [(32, 10, 20), (32, 7, 21), (16, 4, 16)])
def test_stft_align_to_window(n_fft, hop, win_length):
    # frame t's window starts on sample t * hop: the signal framed with win_length-long frames, each windowed
    # and zero-padded to n_fft where the window sits ((n_fft - win_length) // 2 zeros first)
    x = RNG.standard_normal((2, 150))
    window = W.hann(win_length, sym=False)
    left = (n_fft - win_length) // 2
    count = 1 + (150 - win_length) // hop
    frames = np.stack([x[:, t * hop: t * hop + win_length] * window for t in range(count)], axis=-2)
    expected = np.swapaxes(np.fft.rfft(np.pad(frames, [(0, 0), (0, 0), (left, n_fft - win_length - left)])), -1, -2)
    t = ember.tensor(x, requires_grad=True)
    for source in (t.detach(), t):  # the one-pass numpy path, and the recorded ops
        ours = ember.stft(source, n_fft, hop, win_length, ember.tensor(window), center=False,
                          return_complex=True, align_to_window=True)
        assert tuple(ours.shape) == expected.shape
        assert_close(ours.detach(), expected, rtol=1e-10, atol=1e-10)
    ours.abs().sum().backward()
    assert t.grad.shape == t.shape


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("kwargs", [dict(n_fft=64, hop_length=16), dict(n_fft=50, hop_length=7, win_length=30),
                                    dict(n_fft=32, center=False, normalized=True),
                                    dict(n_fft=32, pad_mode="circular", onesided=False)])
def test_fused_cpu_path_equals_the_op_path(kwargs, dtype):
    # without grad, stft computes in one numpy pass; with grad, through ops that autograd records
    x = ember.tensor(RNG.standard_normal((2, 300)) + (1j * RNG.standard_normal((2, 300)) if dtype[0] == "c" else 0),
                     dtype=getattr(ember, dtype))
    win = kwargs.get("win_length", kwargs["n_fft"])
    window = ember.hann_window(win, dtype=ember.float64)
    fused = ember.stft(x, window=window, return_complex=True, **kwargs)
    recorded = ember.stft(x.clone().requires_grad_(), window=window, return_complex=True, **kwargs)
    assert recorded.grad_fn is not None and fused.grad_fn is None
    assert fused.dtype is recorded.dtype and fused.shape == recorded.shape
    assert_close(fused, recorded.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pad_mode", ["reflect", "replicate", "circular", "constant"])
def test_frame_prim_matches_numpy(pad_mode):
    x = RNG.standard_normal((2, 50))
    frames = ember._ops.fft._stft_frames(ember.tensor(x), 16, 6, 8, pad_mode)
    padded = np.pad(x, [(0, 0), (8, 8)], mode={"reflect": "reflect", "constant": "constant", "replicate": "edge",
                                               "circular": "wrap"}[pad_mode])
    expected = np.stack([padded[:, t * 6: t * 6 + 16] for t in range(1 + (66 - 16) // 6)], axis=1)
    assert_close(frames, expected)
    meta = ember._ops.fft._stft_frames(ember.empty(2, 50, device="meta"), 16, 6, 8, pad_mode)
    assert meta.shape == frames.shape
    with pytest.raises(RuntimeError, match="pad_mode must be one of"):
        ember._ops.fft._stft_frames(ember.tensor(x), 16, 6, 8, "bad")
    assert ember.stft(ember.ones(100, device="meta"), 16, return_complex=True).shape == (9, 26)


def test_stft_errors():
    x = ember.ones(100)
    with pytest.raises(RuntimeError, match="requires the return_complex parameter"):
        ember.stft(x, 16)
    with pytest.raises(RuntimeError, match="expected a 1D or 2D tensor"):
        ember.stft(ember.ones(2, 3, 100), 16, return_complex=True)
    with pytest.raises(RuntimeError, match="expected hop_length > 0"):
        ember.stft(x, 16, hop_length=0, return_complex=True)
    with pytest.raises(RuntimeError, match="expected 0 < n_fft"):
        ember.stft(x, 200, center=False, return_complex=True)
    with pytest.raises(RuntimeError, match="expected 0 < win_length <= n_fft"):
        ember.stft(x, 16, win_length=20, return_complex=True)
    with pytest.raises(RuntimeError, match="expected a 1D window tensor of size equal to win_length=16"):
        ember.stft(x, 16, window=ember.ones(5), return_complex=True)
    with pytest.raises(RuntimeError, match="Cannot have onesided output"):
        ember.stft(x.to(ember.complex64), 16, onesided=True, return_complex=True)
    for align in (True, False):  # PyTorch refuses either value with center=True
        with pytest.raises(RuntimeError, match="align_to_window should only be set when center = false"):
            ember.stft(x, 16, return_complex=True, align_to_window=align)
    with pytest.raises(RuntimeError, match="expected 0 < n_fft"):  # checked on the signal before alignment
        ember.stft(ember.ones(12), 16, 1, 10, center=False, return_complex=True, align_to_window=True)


# -- istft ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_fft, hop, win_length", [(64, 16, 64), (64, 32, 64), (50, 12, 50), (64, 16, 48)])
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("normalized", [False, True])
def test_istft_inverts_stft(n_fft, hop, win_length, center, normalized):
    x = RNG.standard_normal((3, 400))
    t = ember.tensor(x)
    window = ember.hann_window(win_length, dtype=ember.float64)
    if not center:  # the first and last samples get only the window's zero ends: use a window without zeros
        window = ember.tensor(W.tukey(win_length, 0.5, sym=False) + 0.1)
    spectrum = ember.stft(t, n_fft, hop, win_length, window, center=center, normalized=normalized,
                          return_complex=True)
    if not center and win_length < n_fft:  # the zero-padded window leaves the first samples uncovered
        with pytest.raises(RuntimeError, match="window overlap add min"):
            ember.istft(spectrum, n_fft, hop, win_length, window, center=False, normalized=normalized)
        return
    back = ember.istft(spectrum, n_fft, hop, win_length, window, center=center, normalized=normalized,
                       length=400 if center else None)
    covered = back.shape[-1]
    assert_close(back, x[:, :covered], rtol=1e-9, atol=1e-9)
    if center:
        assert covered == 400


def test_istft_options():
    x = RNG.standard_normal(256) + 1j * RNG.standard_normal(256)
    window = ember.hann_window(32, dtype=ember.float64)
    spectrum = ember.stft(ember.tensor(x), 32, 8, window=window)  # two-sided
    back = ember.istft(spectrum, 32, 8, window=window, length=256, return_complex=True)
    assert back.dtype is ember.complex128
    assert_close(back, x, rtol=1e-9, atol=1e-9)
    # a longer length pads with zeros; the Tensor method; single precision
    real = ember.tensor(RNG.standard_normal(100), dtype=ember.float32)
    s = ember.stft(real, 16, 4, window=ember.hann_window(16), return_complex=True)
    longer = s.istft(16, 4, window=ember.hann_window(16), length=120)
    assert longer.dtype is ember.float32 and longer.shape == (120,)
    assert_close(longer[:100], real, rtol=1e-5, atol=1e-5)
    # the frames cover 16 + 4 * 25 = 116 samples, 108 after the centring offset of 8; the rest is zeros
    assert float(longer[100:108].abs().max()) > 0 and float(longer[108:].abs().max()) == 0.0


def test_istft_errors():
    spectrum = ember.ones(9, 26, dtype=ember.complex64)
    with pytest.raises(RuntimeError, match="requires a complex-valued input tensor"):
        ember.istft(ember.ones(9, 26), 16)
    with pytest.raises(RuntimeError, match="window overlap add min"):
        ember.istft(spectrum, 16, window=ember.zeros(16))
    with pytest.raises(RuntimeError, match="expected the frequency dimension"):
        ember.istft(spectrum, 16, onesided=False)
    with pytest.raises(RuntimeError, match="expected a 1D window tensor"):
        ember.istft(spectrum, 16, window=ember.ones(5))
