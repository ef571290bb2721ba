"""Short-time Fourier transforms and PyTorch's legacy window functions.

``ember.stft``/``ember.istft`` (and the Tensor methods) are written in ember ops: the padded frames
(the prim ``_stft_frames``), a window product and one FFT prim (``_fft_r2c``, ``_fft_c2c`` or
``_fft_c2r`` of :mod:`ember._ops.fft`); the inverse overlap-adds its frames with ``fold``. So they run
on every device and are differentiable through the ops' derivatives. Without autograd recording,
``stft`` on the CPU computes the same values in one numpy pass, and on CUDA in a few CuPy calls and one
cuFFT plan (no dispatches).

The windows ``hann_window``, ``hamming_window``, ``blackman_window``, ``bartlett_window`` and
``kaiser_window`` take PyTorch's ``periodic`` flag (default ``True``: the first ``N`` points of the
symmetric window of ``N + 1``), and any floating dtype.
"""

from __future__ import annotations

import functools

import numpy as np

from . import _dtype as D
from ._tensor import Tensor
from .signal import windows as _windows

__all__ = [
    "stft", "istft", "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window",
    "install_methods",
]


# -- legacy windows ------------------------------------------------------------------------------------


def _legacy_window(name, window_length, periodic, dtype, device, requires_grad, values_of):
    """PyTorch's checks, then ``values_of(points)`` (float64, ``points >= 2``) rounded once to ``dtype``.

    Raises:
        RuntimeError: for a negative length or a non-floating dtype, as PyTorch words them.
    """
    import ember

    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    dtype = D.get_default_dtype() if dtype is None else dtype
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if window_length <= 1:
        values = np.ones(window_length)
    else:
        values = values_of(window_length + 1 if periodic else window_length)[:window_length]
    if device is not None and not values.flags.writeable:  # cached values: a GPU copy may be cached too
        window = _cached_device_window(values, values.base, dtype, device, requires_grad)
        if window is not None:
            return window
    return ember.tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


_DEVICE_WINDOWS = {}  # (id of cached values, length, dtype, device) -> (cached values, device array)
_DEVICE_WINDOWS_KEPT = 32


def _cached_device_window(values, cached, dtype, device, requires_grad):
    """A new cuda tensor holding ``values`` (a slice of ``cached``, a read-only array of :func:`_cached_cosine_sum`)
    in ``dtype``,
    by one device-to-device copy of a cached upload, or None off cuda or under a dispatch mode.

    ``stft`` callers make the same window at every call; its upload from the host (the rounding to ``dtype``,
    CuPy's transfer) cost more host time than a short transform's launch."""
    from ._device import canonical_device
    from ._ops import _dispatch

    if _dispatch.ops_intercepted() or cached is None:
        return None
    where = canonical_device(device)
    if where.type != "cuda":
        return None
    key = (id(cached), len(values), dtype, where)
    entry = _DEVICE_WINDOWS.get(key)
    if entry is None or entry[0] is not cached:
        import ember

        if len(_DEVICE_WINDOWS) >= _DEVICE_WINDOWS_KEPT:
            _DEVICE_WINDOWS.clear()
        # the cached values are kept with their upload, so that their id stays theirs
        entry = _DEVICE_WINDOWS[key] = (cached, ember.tensor(values, dtype=dtype, device=where)._data)
    source = entry[1]
    copy = type(source)(source.shape, source.dtype)
    if source.size:
        copy.data.copy_from_device_async(source.data, source.nbytes)
    window = Tensor._make(copy, where)
    return window.requires_grad_(True) if requires_grad else window


def _cosine_terms(a):
    if all(type(c) in (int, float) for c in a):  # plain numbers: the values are cached
        key = tuple(a)
        return lambda points: _cached_cosine_sum(points, key)
    return lambda points: _windows._cosine_sum(points, a)


@functools.lru_cache(maxsize=32)
def _cached_cosine_sum(points, a):
    """The float64 values of a cosine-sum window (read-only; ``ember.tensor`` copies them): ``stft`` callers
    make the same window at every call, and its numpy arithmetic cost more than a short transform's launch."""
    values = _windows._cosine_sum(points, a)
    values.flags.writeable = False
    return values


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window ``0.5 - 0.5 cos(2 pi n / (N - 1))``, periodic by default.

    Args:
        window_length (int): the window size (non-negative; 0 gives an empty window, 1 a single 1).
        periodic (bool): ``True``: the first ``window_length`` points of the symmetric window of
            ``window_length + 1`` points (for :func:`stft`); ``False``: the symmetric window.
        dtype (ember.dtype, optional): a floating dtype (default: the default dtype).
        layout: accepted for PyTorch compatibility (strided only).
        device (ember.device, optional): where to create it.
        requires_grad (bool): whether the result requires grad.

    Returns:
        Tensor: shape ``(window_length,)``.

    Raises:
        RuntimeError: for a negative length or a non-floating dtype.

    Example:
        >>> import ember
        >>> ember.hann_window(4)
        tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    return _legacy_window("hann_window", window_length, periodic, dtype, device, requires_grad,
                          _cosine_terms((0.5, 0.5)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """The Hamming window ``alpha - beta cos(2 pi n / (N - 1))``, periodic by default.

    Args:
        alpha (float), beta (float): the coefficients. Other arguments as in :func:`hann_window`.

    Returns:
        Tensor: shape ``(window_length,)``.

    Raises:
        RuntimeError: for a negative length or a non-floating dtype.
    """
    return _legacy_window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                          _cosine_terms((alpha, beta)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window ``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``, periodic by default.

    Arguments, returns and errors as in :func:`hann_window`.
    """
    return _legacy_window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                          _cosine_terms((0.42, 0.5, 0.08)))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The Bartlett (triangular) window ``1 - |2n / (N - 1) - 1|``, periodic by default.

    Arguments, returns and errors as in :func:`hann_window`.
    """

    def values(points):
        return 1.0 - np.abs(2.0 * np.arange(points) / (points - 1) - 1.0)

    return _legacy_window("bartlett_window", window_length, periodic, dtype, device, requires_grad, values)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """The Kaiser window ``I0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / I0(beta)``, periodic by default.

    Args:
        beta (float): the shape parameter. Other arguments as in :func:`hann_window`.

    Returns:
        Tensor: shape ``(window_length,)``.

    Raises:
        RuntimeError: for a negative length or a non-floating dtype.
    """
    return _legacy_window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                          lambda points: _windows.kaiser_values(points, beta))


# -- stft ----------------------------------------------------------------------------------------------


def _describe(name, input, n_fft, hop_length, win_length):
    return f"{name}(Tensor{list(input.shape)}, n_fft={n_fft}, hop_length={hop_length}, win_length={win_length})"


def _full_window(window, n_fft, win_length, like):
    """The window, padded with zeros on both sides to ``n_fft`` points (centred, as PyTorch does)."""
    import ember

    if window is None:
        window = ember.ones(win_length, dtype=like.dtype.to_real() if like.is_complex() else like.dtype,
                            device=like.device)
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = ember.nn.functional.pad(window, (left, n_fft - win_length - left))
    return window


def _check_window(where, window, win_length):
    if window is not None and (window.dim() != 1 or window.shape[0] != win_length):
        raise RuntimeError(
            f"{where} : expected a 1D window tensor of size equal to win_length={win_length}, "
            f"but got window with size {list(window.shape)}"
        )


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None, align_to_window=None):
    """The short-time Fourier transform: the DFT of windowed frames of ``input``.

    Frame ``t`` holds samples ``t * hop_length .. t * hop_length + n_fft - 1`` (of the input padded by
    ``n_fft // 2`` on both sides when ``center``), multiplied by ``window``;
    ``result[..., f, t] = sum_k frame_t[k] window[k] exp(-2 pi i f k / n_fft)``.

    Args:
        input (Tensor): ``(L,)`` or ``(B, L)``, real (float32/float64) or complex.
        n_fft (int): the frame (FFT) size, ``0 < n_fft <= L`` (after padding).
        hop_length (int, optional): the step between frames (default ``n_fft // 4``).
        win_length (int, optional): the window size, ``<= n_fft`` (default ``n_fft``); a shorter window is
            zero-padded on both sides to ``n_fft``.
        window (Tensor, optional): ``(win_length,)``; default a rectangular window of ones.
        center (bool): pad ``input`` by ``n_fft // 2`` on both sides, so frame ``t`` is centred on sample
            ``t * hop_length``.
        pad_mode (str): the padding for ``center``: ``"reflect"`` (default), ``"constant"``,
            ``"replicate"`` or ``"circular"``.
        normalized (bool): scale by ``n_fft ** -0.5`` (the ``"ortho"`` norm).
        onesided (bool, optional): keep the ``n_fft // 2 + 1`` non-redundant bins (default: ``True`` for
            real input and window; complex ones refuse it).
        return_complex (bool): a complex result (required for real inputs, as in PyTorch); ``False``
            returns ``view_as_real`` of it (a trailing dim of 2, deprecated in PyTorch).
        align_to_window (bool, optional): only with ``center=False``: frame ``t`` starts so that the window
            (zero-padded to ``n_fft``) begins at sample ``t * hop_length``, that is, the input is zero-padded
            by ``(n_fft - win_length) // 2`` on the left and the rest of ``n_fft - win_length`` on the right,
            giving ``1 + (L - win_length) // hop_length`` frames. ``False``/``None``: frames start at
            ``t * hop_length``.

    Returns:
        Tensor: ``(B?, n_freqs, n_frames)`` complex (or ``(..., 2)`` real), with ``n_freqs`` =
        ``n_fft // 2 + 1`` when one-sided, else ``n_fft``, and ``n_frames = 1 + (L' - n_fft) // hop_length``
        for the padded length ``L'``.

    Raises:
        RuntimeError: without ``return_complex`` for real inputs; ``align_to_window`` given with ``center``;
            for input that is not 1-D or 2-D, a non-positive hop, ``n_fft`` out of range, a bad ``win_length``
            or window size, or ``onesided`` with complex input or window.

    Example:
        >>> import ember
        >>> ember.stft(ember.ones(8), 4, hop_length=2, return_complex=True, center=False).shape
        ember.Size([3, 3])
    """
    import ember


    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    complex_input = input.is_complex() or (window is not None and window.is_complex())
    if return_complex is None:
        if not complex_input:
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real inputs, and will further require "
                "that return_complex=True in a future PyTorch release."
            )
        return_complex = True
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    where = _describe("stft", input, n_fft, hop_length, win_length)
    if input.dim() not in (1, 2):
        raise RuntimeError(f"{where} : expected a 1D or 2D tensor")
    half = n_fft // 2 if center else 0
    length = input.shape[-1] + 2 * half
    if not 0 < n_fft <= length:
        raise RuntimeError(f"{where} : expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop_length <= 0:
        raise RuntimeError(f"{where} : expected hop_length > 0, but got hop_length={hop_length}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"{where} : expected 0 < win_length <= n_fft, but got win_length={win_length}")
    _check_window(where, window, win_length)
    if align_to_window and win_length < n_fft:
        # The window sits (n_fft - win_length) // 2 samples into each frame; starting every frame that much
        # earlier (zeros before the signal) puts the window's first sample on t * hop_length.
        left = (n_fft - win_length) // 2
        input = ember.nn.functional.pad(input, (left, n_fft - win_length - left))
    onesided = not complex_input if onesided is None else onesided
    if onesided and complex_input:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    if _fused_cpu_call(input, window, half, pad_mode):
        spectrum = _stft_cpu(input, window, n_fft, hop_length, win_length, half, pad_mode, norm, onesided)
    elif _fused_cuda_call(input, window, half, pad_mode):
        spectrum = _stft_cuda(input, window, n_fft, hop_length, win_length, half, pad_mode, norm, onesided)
    else:
        spectrum = _stft_ops(input, window, n_fft, hop_length, win_length, half, pad_mode, norm, onesided)
    return spectrum if return_complex else ember.view_as_real(spectrum)


_FUSED_TYPES = (D.float32, D.float64, D.complex64, D.complex128)  # numpy promotes these as ember does
_FUSED_PAD_MODES = ("reflect", "constant", "replicate", "circular")


def _fused_cpu_call(x, window, half, pad_mode):
    """Whether ``stft`` may compute in one numpy pass: plain CPU tensors that autograd does not record,
    no dispatch mode active, and a padding numpy does as ``F.pad`` does (reflection needs
    ``half < length``: ``F.pad`` refuses more, ``numpy.pad`` would reflect again)."""
    from ._ops import _dispatch

    if type(x) is not Tensor or x.device.type != "cpu" or _dispatch.ops_intercepted() or x.dtype not in _FUSED_TYPES:
        return False
    if window is not None and (type(window) is not Tensor or window.device.type != "cpu"
                               or window.dtype not in _FUSED_TYPES or window.dim() != 1):
        return False
    recorded = _dispatch.state.grad_enabled and (x.requires_grad or (window is not None and window.requires_grad))
    return not recorded and pad_mode in _FUSED_PAD_MODES and (half == 0 or half < x.shape[-1])


def _fused_cuda_call(x, window, half, pad_mode):
    """:func:`_fused_cpu_call`'s conditions for CUDA tensors (input and window on one cuda device)."""
    from ._ops import _dispatch

    if type(x) is not Tensor or x.device.type != "cuda" or _dispatch.ops_intercepted() or x.dtype not in _FUSED_TYPES:
        return False
    if window is not None and (type(window) is not Tensor or window.device != x.device or window.is_complex()
                               or window.dtype not in _FUSED_TYPES or window.dim() != 1):
        return False
    recorded = _dispatch.state.grad_enabled and (x.requires_grad or (window is not None and window.requires_grad))
    return not recorded and pad_mode in _FUSED_PAD_MODES and (half == 0 or half < x.shape[-1])


def _stft_cuda(input, window, n_fft, hop_length, win_length, half, pad_mode, norm, onesided):
    """``stft`` on CuPy arrays without the ops' dispatches (issue 20's ``cuda_stft`` row): the padded, windowed
    frames in one kernel (:mod:`ember.cuda.kernels.stft_frames`; for a window of another precision, the
    padded signal's frames as a strided view times the window) and one cuFFT call through ember's plan
    cache (:mod:`ember.cuda.kernels.fft_plans`). The op path's values (the cuda tests compare both)."""
    import cupy

    from .cuda.kernels import stft_frames

    data = input._data.reshape(-1, input.shape[-1])
    weighted = _gathered_frames(stft_frames, data, window, n_fft, hop_length, win_length, half, pad_mode)
    if weighted is not None:
        return _cuda_spectrum(weighted, input, norm, onesided)
    if half:
        if pad_mode == "reflect":
            left, right = data[:, half:0:-1], data[:, -2:-half - 2:-1]
        elif pad_mode == "replicate":
            left, right = cupy.repeat(data[:, :1], half, 1), cupy.repeat(data[:, -1:], half, 1)
        elif pad_mode == "circular":
            left, right = data[:, -half:], data[:, :half]
        else:
            left = right = cupy.zeros((data.shape[0], half), data.dtype)
        data = cupy.concatenate((left, data, right), axis=1)
    elif not data.flags.c_contiguous:
        data = cupy.ascontiguousarray(data)
    count = 1 + (data.shape[1] - n_fft) // hop_length
    step = data.strides[1]
    frames = cupy.lib.stride_tricks.as_strided(data, (data.shape[0], count, n_fft),
                                               (data.strides[0], hop_length * step, step))
    dtype = data.dtype if window is None else np.result_type(data.dtype.char.lower(), window._data.dtype)
    if dtype.kind == "c":
        dtype = np.dtype(dtype.char.lower())
    if window is None and win_length == n_fft:
        weighted = cupy.ascontiguousarray(frames)  # a rectangular window: the frames themselves
    else:
        weights = window._data.astype(dtype, copy=False) if window is not None else cupy.ones(win_length, dtype)
        if win_length < n_fft:
            left = (n_fft - win_length) // 2
            weights = cupy.concatenate((cupy.zeros(left, dtype), weights, cupy.zeros(n_fft - win_length - left, dtype)))
        weighted = frames * weights  # reads the strided frames, writes them row-major: one kernel
    return _cuda_spectrum(weighted, input, norm, onesided)


def _gathered_frames(stft_frames, data, window, n_fft, hop_length, win_length, half, pad_mode):
    """The padded, windowed frames in one gather kernel (:mod:`ember.cuda.kernels.stft_frames`) when the window
    has the signal's precision, else None."""
    import cupy

    real = np.dtype(data.dtype.char.lower())
    weights = None
    if window is not None or win_length != n_fft:
        weights = window._data if window is not None else cupy.ones(win_length, real)
        if weights.dtype != real:
            return None
        if win_length < n_fft:
            left = (n_fft - win_length) // 2
            weights = cupy.concatenate((cupy.zeros(left, real), weights, cupy.zeros(n_fft - win_length - left, real)))
    return stft_frames.frames(data, n_fft, hop_length, half, pad_mode, weights)


def _cuda_spectrum(weighted, input, norm, onesided):
    """``stft``'s transform of the windowed frames ``(B, n_frames, n_fft)`` on CUDA: ``(B?, n_freqs, n_frames)``."""
    from ._ops.fft import _backend, _cuda_plans

    family = "c2c" if weighted.dtype.kind == "c" else "r2c"
    spectrum = None
    if family == "c2c" or onesided:
        spectrum = _cuda_plans().transform(weighted, (2,), norm, family, True)
    if spectrum is None:
        backend = _backend(weighted)
        spectrum = backend.c2c(weighted, (2,), norm, True) if family == "c2c" else backend.r2c(weighted, (2,), norm,
                                                                                                onesided)
    spectrum = spectrum.transpose(0, 2, 1)  # (B, n_freqs, n_frames), a view as on the op path
    return Tensor._make(spectrum[0] if input.dim() == 1 else spectrum, input._device)


def _stft_ops(input, window, n_fft, hop_length, win_length, half, pad_mode, norm, onesided):
    """``stft`` in ember ops, which autograd records: ``(B?, n_freqs, n_frames)``.

    Three ops: the padded frames (``_stft_frames``, whose derivative is one overlap-add kernel), the
    window product and one FFT prim.
    """
    from ._ops.fft import _fft_c2c, _fft_r2c, _stft_frames

    signals = input.unsqueeze(0) if input.dim() == 1 else input
    frames = _stft_frames(signals, n_fft, hop_length, half, pad_mode)  # (B, n_frames, n_fft)
    frames = frames * _full_window(window, n_fft, win_length, input)
    if frames.is_complex():
        spectrum = _fft_c2c(frames, (-1,), norm, True)
    else:
        spectrum = _fft_r2c(frames, (-1,), norm, onesided)
    spectrum = spectrum.transpose(-1, -2)
    return spectrum.squeeze(0) if input.dim() == 1 else spectrum


def _pad_last(data, half, mode):
    """``data`` (2-D) padded by ``half`` on both ends of its last dim as ``F.pad`` pads (``half < length``)."""
    if mode == "reflect":
        left, right = data[:, half:0:-1], data[:, -2:-half - 2:-1]
    elif mode == "replicate":
        left, right = np.repeat(data[:, :1], half, 1), np.repeat(data[:, -1:], half, 1)
    elif mode == "circular":
        left, right = data[:, -half:], data[:, :half]
    else:
        left = right = np.zeros((data.shape[0], half), data.dtype)
    return np.concatenate((left, data, right), axis=1)


def _stft_cpu(input, window, n_fft, hop_length, win_length, half, pad_mode, norm, onesided):
    """``stft``'s padding, frames, window product and FFT in numpy and one FFT backend call: the op path's
    values (tests compare both) without its ~10 dispatches, which dominate a short signal's transform."""
    import ember

    from ._ops.fft import _backend

    data = input._data.reshape(-1, input.shape[-1])
    if half:
        data = _pad_last(data, half, pad_mode)
    frames = np.lib.stride_tricks.sliding_window_view(data, n_fft, axis=-1)[:, ::hop_length]
    dtype = data.dtype if window is None else np.result_type(data.dtype.char.lower(), window._data.dtype)
    if dtype.kind == "c":
        dtype = np.dtype(dtype.char.lower())
    if window is None and win_length == n_fft:
        weighted = frames.copy()  # a rectangular window: the frames themselves
    else:
        weights = np.zeros(n_fft, dtype)
        left = (n_fft - win_length) // 2
        weights[left:left + win_length] = 1 if window is None else window._data
        weighted = frames * weights
    backend = _backend(weighted)
    if weighted.dtype.kind == "c":
        spectrum = backend.c2c(weighted, (2,), norm, True)
    else:
        spectrum = backend.r2c(weighted, (2,), norm, onesided)
    spectrum = spectrum.transpose(0, 2, 1)  # (B, n_freqs, n_frames), a view as on the op path
    return ember.from_numpy(spectrum[0] if input.dim() == 1 else spectrum)


def _overlap_add(frames, hop_length):
    """Frames ``(B, n_frames, n)`` added at offsets ``t * hop_length``: ``(B, n + hop_length * (n_frames - 1))``."""
    import ember

    batch, count, n = frames.shape
    length = n + hop_length * (count - 1)
    if frames.is_complex():  # fold takes real tensors: the two parts separately
        return ember.complex(_overlap_add(frames.real, hop_length), _overlap_add(frames.imag, hop_length))
    columns = frames.transpose(1, 2)  # (B, n, n_frames): fold's columns of (1 x n) blocks
    return ember.nn.functional.fold(columns, (1, length), (1, n), stride=(1, hop_length)).reshape(batch, length)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """The inverse short-time Fourier transform: frames from :func:`stft`'s output, overlap-added.

    Each frame's inverse DFT is multiplied by the window, the frames are added at their offsets and
    the sum is divided by the overlap-added squared window (the least-squares estimate of Griffin and
    Lim, 1984), so ``istft(stft(x, ...), ...)`` gives ``x`` back for a window whose squared overlap-add
    never vanishes (the NOLA condition).

    Args:
        input (Tensor): complex ``(B?, n_freqs, n_frames)``, as :func:`stft` returns it.
        n_fft, hop_length, win_length, window, center, normalized: as given to :func:`stft`.
        onesided (bool, optional): whether ``input`` holds ``n_fft // 2 + 1`` bins (default: when
            ``n_freqs != n_fft``).
        length (int, optional): the output length (trimmed or zero-padded to it).
        return_complex (bool): a complex output (needs ``onesided=False``); otherwise a real one.

    Returns:
        Tensor: ``(B?, length)``, real (float32 for complex64 input) unless ``return_complex``.

    Raises:
        RuntimeError: for a real input, a wrong number of bins, bad sizes, or a window whose squared
            overlap-add vanishes somewhere ("window overlap add min").

    Example:
        >>> import ember
        >>> x = ember.arange(16.0)
        >>> w = ember.hann_window(8)
        >>> y = ember.istft(ember.stft(x, 8, 2, window=w, return_complex=True), 8, 2, window=w, length=16)
        >>> bool(ember.allclose(x, y, atol=1e-4))
        True
    """
    import ember

    from ._ops.fft import _fft_c2c, _fft_c2r

    if not isinstance(input, Tensor):
        raise TypeError(f"istft(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.is_complex():
        raise RuntimeError(
            "istft requires a complex-valued input tensor matching the output from stft with return_complex=True."
        )
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    where = _describe("istft", input, n_fft, hop_length, win_length)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"{where} : expected a tensor with 2 or 3 dimensions of complex dtype")
    if not 0 < hop_length <= win_length:
        raise RuntimeError(f"{where} : expected 0 < hop_length <= win_length")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"{where} : expected 0 < win_length <= n_fft")
    _check_window(where, window, win_length)
    bins = input.shape[-2]
    onesided = bins != n_fft if onesided is None else onesided
    expected = n_fft // 2 + 1 if onesided else n_fft
    if bins != expected:
        kind = "one-sided" if onesided else "two-sided"
        raise RuntimeError(f"{where} : expected the frequency dimension (-2) of a {kind} input to be {expected}, "
                           f"but got {bins}")
    if return_complex and onesided:
        raise RuntimeError("istft: cannot have a one-sided input with return_complex=True (a complex output needs "
                           "all n_fft bins)")
    x = input.unsqueeze(0) if input.dim() == 2 else input
    frames = x.transpose(-1, -2)  # (B, n_frames, n_freqs)
    norm = "ortho" if normalized else "backward"
    if onesided:
        frames = _fft_c2r(frames, (-1,), norm, n_fft)
    else:
        frames = _fft_c2c(frames, (-1,), norm, False)
        if not return_complex:
            frames = frames.real
    real_dtype = input.dtype.to_real()
    full = _full_window(window, n_fft, win_length, ember.empty(0, dtype=real_dtype, device=input.device))
    frames = frames * full
    signal = _overlap_add(frames, hop_length)
    count = frames.shape[1]
    squared = full.abs() ** 2 if full.is_complex() else full * full
    envelope = _overlap_add(squared.expand(1, count, n_fft), hop_length)[0]
    start = n_fft // 2 if center else 0
    end = signal.shape[-1] - (n_fft // 2 if center else 0)
    if length is not None:
        end = start + length
    end = min(end, signal.shape[-1])
    signal = signal[:, start:end]
    envelope = envelope[start:end]
    if envelope.numel() and float(envelope.abs().min()) < 1e-11:
        raise RuntimeError(f"{where} : window overlap add min: the squared window's overlap-add vanishes "
                           "(the NOLA condition fails)")
    signal = signal / envelope
    if length is not None and signal.shape[-1] < length:
        signal = ember.nn.functional.pad(signal, (0, length - signal.shape[-1]))
    return signal.squeeze(0) if input.dim() == 2 else signal


def install_methods():
    """Add ``Tensor.stft`` and ``Tensor.istft`` (called once by ``import ember``)."""
    Tensor.stft = stft
    Tensor.istft = istft
