"""stft's framing and its adjoint on CUDA arrays, one kernel each (``_stft_frames`` / ``_stft_frames_backward``).

The generic code pads by concatenation, takes a strided view and copies it (framing: three to four
launches), and adds the frames back block by block, then folds the padding back (overlap-add: about ten
launches). On the GPU a short signal's stft is bound by launches, so each direction is one
``ElementwiseKernel`` here:

* :func:`frames`: one thread per frame sample reads the padded signal's sample through the padding's
  index map (``reflect``, ``replicate``, ``circular`` or ``constant``), optionally times the window
  (``stft``'s fused path without autograd);
* :func:`overlap_add`: one thread per signal sample sums every frame sample that was read from it: the
  sample's own padded position and, under ``reflect``, its mirror images in the two pads (``constant``
  pads read no sample). Other modes return None (the generic code runs).

The sums run in frame order; the generic code's block order may differ in the last bit. CuPy is
imported on the first call only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["frames", "overlap_add", "MODES"]

#: The padding modes and their numbers in the kernels.
MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}
_TYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))

# The index map of the padding: padded position p of a signal of `length` samples padded by `pad` on both
# sides reads sample s = p - pad when 0 <= s < length; outside, by mode (constant reads nothing: -1).
_SOURCE = """
__device__ long long ember_stft_source(long long s, long long length, int mode) {
    if (s >= 0 && s < length) return s;
    if (mode == 1) return s < 0 ? -s : 2 * (length - 1) - s;
    if (mode == 2) return s < 0 ? 0 : length - 1;
    if (mode == 3) return s < 0 ? s + length : s - length;
    return -1;
}
"""

_FRAMES_BODY = """
const long long k = i % n_fft;
const long long t = (i / n_fft) % count;
const long long b = i / (n_fft * count);
const long long s = ember_stft_source(t * hop + k - pad, length, mode);
T value = s < 0 ? T(0) : x[b * length + s];
out = weighted ? value * T(w[k]) : value;
"""

_OVERLAP_ADD_BODY = """
const long long j = i % length;
const long long b = i / length;
long long positions[3];
int found = 0;
positions[found++] = j + pad;
if (reflect) {
    if (j >= 1 && j <= pad) positions[found++] = pad - j;
    if (j >= length - 1 - pad && j <= length - 2) positions[found++] = 2 * length + pad - 2 - j;
}
T total = T(0);
for (int f = 0; f < found; ++f) {
    const long long q = positions[f];
    long long last = q / hop;
    if (last > count - 1) last = count - 1;
    const long long reach = q - n_fft + 1;
    const long long first = reach <= 0 ? 0 : (reach + hop - 1) / hop;
    for (long long t = first; t <= last; ++t) total += frames[(b * count + t) * n_fft + (q - t * hop)];
}
out = total;
"""

_kernels = {}


def _kernel(name):
    kernel = _kernels.get(name)
    if kernel is None:
        import cupy

        if name == "frames":
            kernel = cupy.ElementwiseKernel(
                "raw T x, raw W w, int64 length, int64 count, int64 n_fft, int64 hop, int64 pad, int32 mode, "
                "bool weighted", "T out", _FRAMES_BODY, "ember_stft_frames", preamble=_SOURCE)
        else:
            kernel = cupy.ElementwiseKernel(
                "raw T frames, int64 length, int64 count, int64 n_fft, int64 hop, int64 pad, bool reflect",
                "T out", _OVERLAP_ADD_BODY, "ember_stft_overlap_add")
        _kernels[name] = kernel
    return kernel


def frames(x, n_fft, hop_length, pad, pad_mode, window=None):
    """The frames ``(B, n_frames, n_fft)`` (row-major) of the signals ``x`` (``(B, L)``) padded by ``pad``.

    Args:
        x: a CuPy array, float32/float64/complex64/complex128.
        n_fft, hop_length, pad (int): as ``_stft_frames`` takes them (already checked by its meta function).
        pad_mode (str): one of :data:`MODES`.
        window: an optional real CuPy array ``(n_fft,)`` of ``x``'s precision, multiplied into each frame.

    Returns:
        The frames in ``x``'s dtype, or None for what it does not take (dtype, mode, a window of another
        precision).
    """
    import cupy

    if x.dtype not in _TYPES or pad_mode not in MODES or x.ndim != 2:
        return None
    real = np.dtype(x.dtype.char.lower())
    if window is not None and (window.dtype != real or window.shape != (n_fft,)):
        return None
    x = cupy.ascontiguousarray(x)
    batch, length = x.shape
    count = 1 + (length + 2 * pad - n_fft) // hop_length
    out = cupy.empty((batch, count, n_fft), x.dtype)
    if out.size == 0:
        return out
    weights = window if window is not None else cupy.ones(1, real)
    weights = cupy.ascontiguousarray(weights)
    _kernel("frames")(x, weights, length, count, n_fft, hop_length, pad, MODES[pad_mode], window is not None, out)
    return out


def overlap_add(frames, length, hop_length, pad, pad_mode):
    """The adjoint of :func:`frames` without a window: ``(B, length)``, each sample the sum of the frame samples
    read from it. None for modes other than ``reflect`` and ``constant`` or other dtypes."""
    import cupy

    if frames.dtype not in _TYPES or pad_mode not in ("reflect", "constant") or frames.ndim != 3:
        return None
    frames = cupy.ascontiguousarray(frames)
    batch, count, n_fft = frames.shape
    out = cupy.empty((batch, length), frames.dtype)
    if out.size == 0:
        return out
    if count == 0:
        out.fill(0)
        return out
    _kernel("overlap_add")(frames, length, count, n_fft, hop_length, pad, pad_mode == "reflect" and pad > 0, out)
    return out
