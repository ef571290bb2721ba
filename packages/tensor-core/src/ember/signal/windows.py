"""Window functions (PyTorch's ``torch.signal.windows``, SciPy's ``scipy.signal.windows``).

Every function takes the window length ``M`` and ``sym``: ``True`` (the default) gives a symmetric
window, for filter design; ``False`` a periodic one, for spectral analysis (the first ``M`` points
of the symmetric window of ``M + 1`` points). The values are computed in float64 and rounded once
to ``dtype`` (float32 or float64; default: the default dtype), on ``device``.

The legacy ``ember.hann_window``/``hamming_window``/``blackman_window``/``bartlett_window``/
``kaiser_window`` (periodic by default) are in :mod:`ember._spectral`.

Example:
    >>> import ember
    >>> ember.signal.windows.hann(5)
    tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D

__all__ = [
    "bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
    "hamming", "hann", "kaiser", "nuttall",
]


def _check(name, M, dtype):
    """The dtype to create, after PyTorch's checks of ``M`` and ``dtype``.

    Raises:
        ValueError: for a negative ``M`` or a dtype other than float32/float64.
    """
    if not isinstance(M, int) or isinstance(M, bool):
        raise TypeError(f"{name}(): M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    dtype = D.get_default_dtype() if dtype is None else dtype
    if dtype not in (D.float32, D.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return dtype


def _tensor(values, dtype, device, requires_grad):
    import ember

    return ember.tensor(np.asarray(values, dtype=np.float64), dtype=dtype, device=device, requires_grad=requires_grad)


def _extended(M, sym):
    """The number of points to compute: ``M + 1`` for a periodic window (its last point is dropped)."""
    return M if sym or M <= 1 else M + 1


def _window(name, M, sym, dtype, device, requires_grad, values_of):
    """Check, compute ``values_of(points)`` in float64 (points >= 2), keep the first ``M`` values."""
    dtype = _check(name, M, dtype)
    if M <= 1:
        return _tensor(np.ones(M), dtype, device, requires_grad)
    values = values_of(_extended(M, sym))[:M]
    return _tensor(values, dtype, device, requires_grad)


def _cosine_sum(points, a):
    """``sum_k (-1)^k a_k cos(2 pi k n / (points - 1))``, ``n = 0 .. points - 1``."""
    phase = np.linspace(-math.pi, math.pi, points)
    return sum(coefficient * np.cos(k * phase) for k, coefficient in enumerate(a))


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """A generalized cosine window: ``w[n] = sum_k (-1)^k a[k] cos(2 pi k n / (M - 1))``.

    Args:
        M (int): the window length (non-negative; 0 gives an empty window, 1 a single 1).
        a (sequence[float]): the coefficients.
        sym (bool): symmetric (``True``) or periodic window.
        dtype (ember.dtype, optional): float32 or float64 (default: the default dtype).
        layout: accepted for PyTorch compatibility (strided only).
        device (ember.device, optional): where to create it.
        requires_grad (bool): whether the result requires grad.

    Returns:
        Tensor: shape ``(M,)``.

    Raises:
        ValueError: for a negative ``M``, a non-float dtype, or ``a`` that is not a sequence.
    """
    if not isinstance(a, (list, tuple)) and not hasattr(a, "__iter__"):
        raise TypeError(f"Coefficients must be a list/tuple, got {type(a).__name__}")
    coefficients = [float(c) for c in a]
    if not coefficients:
        raise ValueError("Coefficients cannot be empty")
    return _window("general_cosine", M, sym, dtype, device, requires_grad, lambda p: _cosine_sum(p, coefficients))


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """A generalized Hamming window: ``alpha - (1 - alpha) cos(2 pi n / (M - 1))``.

    Args:
        M (int): the window length. alpha (float): the window coefficient. Other arguments as in
            :func:`general_cosine`.

    Returns:
        Tensor: shape ``(M,)``.

    Raises:
        ValueError: for a negative ``M`` or a non-float dtype.
    """
    a = (alpha, 1.0 - alpha)
    return _window("general_hamming", M, sym, dtype, device, requires_grad, lambda p: _cosine_sum(p, a))


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window: ``0.5 - 0.5 cos(2 pi n / (M - 1))``. Arguments as in :func:`general_cosine`.

    Example:
        >>> import ember
        >>> ember.signal.windows.hann(4, sym=False)
        tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    return _window("hann", M, sym, dtype, device, requires_grad, lambda p: _cosine_sum(p, (0.5, 0.5)))


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hamming window: ``0.54 - 0.46 cos(2 pi n / (M - 1))``. Arguments as in :func:`general_cosine`."""
    return _window("hamming", M, sym, dtype, device, requires_grad, lambda p: _cosine_sum(p, (0.54, 0.46)))


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window: ``0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1))``.
    Arguments as in :func:`general_cosine`."""
    return _window("blackman", M, sym, dtype, device, requires_grad, lambda p: _cosine_sum(p, (0.42, 0.5, 0.08)))


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window of Nuttall (1981). Arguments as in :func:`general_cosine`."""
    a = (0.3635819, 0.4891775, 0.1365995, 0.0106411)
    return _window("nuttall", M, sym, dtype, device, requires_grad, lambda p: _cosine_sum(p, a))


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Bartlett (triangular, zero at both ends) window: ``1 - |2n / (M - 1) - 1|``.
    Arguments as in :func:`general_cosine`."""

    def values(points):
        return 1.0 - np.abs(2.0 * np.arange(points) / (points - 1) - 1.0)

    return _window("bartlett", M, sym, dtype, device, requires_grad, values)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The cosine (sine) window: ``sin(pi (n + 0.5) / M)``. Arguments as in :func:`general_cosine`."""
    return _window("cosine", M, sym, dtype, device, requires_grad, lambda p: np.sin(math.pi * (np.arange(p) + 0.5) / p))


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Gaussian window: ``exp(-(n - (M - 1) / 2)^2 / (2 std^2))``.

    Args:
        std (float): the standard deviation, in samples (positive). Other arguments as in
            :func:`general_cosine`.

    Raises:
        ValueError: for ``std <= 0``, a negative ``M`` or a non-float dtype.
    """
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")

    def values(points):
        n = np.arange(points) - (points - 1) / 2.0
        return np.exp(-(n**2) / (2.0 * std * std))

    return _window("gaussian", M, sym, dtype, device, requires_grad, values)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The exponential (Poisson) window: ``exp(-|n - center| / tau)``.

    Args:
        center (float, optional): the window's centre (default: ``(M - 1) / 2``); only for ``sym=False``.
        tau (float): the decay (positive). Other arguments as in :func:`general_cosine`.

    Raises:
        ValueError: for ``tau <= 0``, a ``center`` with ``sym=True``, a negative ``M`` or a non-float dtype.
    """
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")

    def values(points):
        middle = (points - 1) / 2.0 if center is None else center
        return np.exp(-np.abs(np.arange(points) - middle) / tau)

    return _window("exponential", M, sym, dtype, device, requires_grad, values)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Kaiser window: ``I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)``.

    Args:
        beta (float): the shape parameter (non-negative). Other arguments as in :func:`general_cosine`.

    Raises:
        ValueError: for ``beta < 0``, a negative ``M`` or a non-float dtype.
    """
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")

    def values(points):
        return kaiser_values(points, beta)

    return _window("kaiser", M, sym, dtype, device, requires_grad, values)


def kaiser_values(points, beta):
    """The symmetric Kaiser window of ``points`` (>= 2) points, in float64."""
    ratio = 2.0 * np.arange(points) / (points - 1) - 1.0
    return np.i0(beta * np.sqrt(np.clip(1.0 - ratio * ratio, 0.0, None))) / np.i0(beta)
