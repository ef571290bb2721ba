"""Derivatives of the FFT prims (``ember._ops.fft``); the public transforms go through their decompositions.

Every transform is linear, so each gradient is the adjoint transform applied to ``grad``. A DFT with
normalisation ``norm`` and the opposite-direction DFT with the *dual* norm (``"backward"`` <->
``"forward"``, ``"ortho"`` unchanged) carry the same scale, and the unscaled inverse DFT is the
conjugate transpose of the unscaled forward one, so:

* ``_fft_c2c``: the gradient is ``_fft_c2c`` in the other direction with the dual norm.
* ``_fft_c2r`` (a one-sided spectrum ``w`` of ``m = n // 2 + 1`` bins to ``n`` reals): the output is
  ``Re(sum_k a_k w_k exp(2 pi i jk/n))`` with ``a_k = 2`` for the bins that stand for two
  (``1 <= k < n - k``) and ``1`` for the zero and Nyquist bins. Its gradient is therefore the
  one-sided forward transform of ``grad`` with those bins doubled (the Hermitian weighting).
* ``_fft_r2c`` with ``onesided``: ``Re(F^H P^T grad)`` for ``P`` keeping the first ``m`` bins; a
  c2r transform of ``grad`` with the doubled bins halved computes exactly that (the halving undoes
  the doubling that c2r applies to bins it takes for two). Without ``onesided`` it is the real
  part of the inverse c2c transform.

These formulas are written in ember ops (the prims themselves), so second derivatives work; gradcheck
and gradgradcheck in float64/complex128 check them (``tests/test_fft_grad.py``).
"""

from __future__ import annotations

import ember
from ember._ops import _dispatch
from ember._ops.fft import DUAL_NORM, TRANSFORMS

from .._table import derivative, through_decomposition


def _wrapped(dims, ndim):
    return tuple(d % ndim for d in dims)


#: Weight vectors already built, by (n, bins, doubled, dtype, device): constants that backward passes of
#: the same sizes share (about a third of a short transform's backward went into rebuilding them).
_WEIGHTS = {}
_WEIGHTS_KEPT = 64


def _bin_weights(n, bins, doubled, like, dim, ndim):
    """A real tensor broadcasting along ``dim`` of a tensor of ``ndim`` dims: ``doubled`` on the bins
    ``1 <= k < n - k`` of ``bins``, 1 elsewhere."""
    dtype = like.dtype.to_real() if like.is_complex() else like.dtype
    key = (n, bins, doubled, dtype, like.device)
    weights = _WEIGHTS.get(key)
    if weights is None:
        paired = (n - 1) // 2  # bins 1 .. paired stand for two (k and n - k)
        parts = [ember.ones(1, dtype=dtype, device=like.device),
                 ember.full((paired,), doubled, dtype=dtype, device=like.device),
                 ember.ones(bins - 1 - paired, dtype=dtype, device=like.device)]
        weights = ember.cat(parts)
        # only real tensors are kept: under a dispatch mode (fake tensors, tracing) they are rebuilt each time
        if type(weights) is ember.Tensor and not _dispatch.ops_intercepted() and like.device.type != "meta":
            if len(_WEIGHTS) >= _WEIGHTS_KEPT:
                _WEIGHTS.clear()
            _WEIGHTS[key] = weights
    return weights.reshape((bins,) + (1,) * (ndim - 1 - dim)) if dim != ndim - 1 else weights


def _c2c_grad(grad, dim, norm, forward):
    return ember._ops.fft._fft_c2c(grad, dim, DUAL_NORM[norm], not forward)


def _on_cuda_unrecorded(grad):
    """Whether ``grad`` is a plain cuda tensor in a backward pass that records nothing: the gradients below
    may then run on its array (the same values, fewer dispatches and copies)."""
    return (type(grad) is ember.Tensor and grad._device.type == "cuda" and not _dispatch.state.grad_enabled
            and not _dispatch.ops_intercepted())


def _r2c_grad(grad, input, dim, norm, onesided):
    ndim = input.dim()
    dims = _wrapped(dim, ndim)
    if not onesided:
        return ember.real(ember._ops.fft._fft_c2c(grad, dims, DUAL_NORM[norm], False))
    n = input.shape[dims[-1]]
    bins = grad.shape[dims[-1]]
    weights = _bin_weights(n, bins, 0.5, grad, dims[-1], ndim)
    if _on_cuda_unrecorded(grad):
        # the product is a new array that cuFFT's c2r may overwrite: no copy of it, no dispatch
        from ember.cuda.kernels import fft_plans

        halved = grad._data * weights._data
        out = fft_plans.transform(halved, dims, DUAL_NORM[norm], "c2r", last_dim_size=n, overwrite_x=True)
        if out is not None:
            return ember.Tensor._make(out, grad._device)
    halved = grad * weights
    return ember._ops.fft._fft_c2r(halved, dims, DUAL_NORM[norm], n)


def _c2r_grad(grad, dim, norm, last_dim_size):
    ndim = grad.dim()
    dims = _wrapped(dim, ndim)
    spectrum = ember._ops.fft._fft_r2c(grad, dims, DUAL_NORM[norm], True)
    bins = spectrum.shape[dims[-1]]
    weights = _bin_weights(last_dim_size, bins, 2.0, grad, dims[-1], ndim)
    if _on_cuda_unrecorded(grad) and type(spectrum) is ember.Tensor and spectrum._data.dtype.kind == "c":
        # the spectrum is a new array: weighted in place (the same products), no dispatch
        data = spectrum._data
        data *= weights._data
        return spectrum
    return spectrum * weights


# stft's framing prims are linear and each other's adjoint
derivative("_stft_frames", input=lambda grad, input, hop_length, pad, pad_mode: ember._ops.fft._stft_frames_backward(
    grad, input.shape[1], hop_length, pad, pad_mode))
derivative("_stft_frames_backward", frames=lambda grad, frames, hop_length, pad, pad_mode: ember._ops.fft._stft_frames(
    grad, frames.shape[2], hop_length, pad, pad_mode))
derivative("_fft_c2c", input=_c2c_grad)
derivative("_fft_r2c", input=_r2c_grad)
derivative("_fft_c2r", input=_c2r_grad)

# the public transforms: resize (narrow/pad), conj and one prim, whose recorded backward is the formula above
through_decomposition(*(op.name for op in TRANSFORMS.values()))
