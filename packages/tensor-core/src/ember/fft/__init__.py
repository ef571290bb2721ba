"""Discrete Fourier transforms (PyTorch's ``torch.fft``, NumPy's ``numpy.fft``).

The transforms are registry ops (``fft_fft``, ``fft_rfft2``, ...: composites of the three prims of
:mod:`ember._ops.fft`), so they run on every device, on meta tensors, under autograd and in FX
graphs. :func:`fftfreq`, :func:`rfftfreq`, :func:`fftshift` and :func:`ifftshift` are built from
``arange`` and ``roll``.

Normalisation (``norm``): ``"backward"`` (the default) leaves the forward transforms unscaled and
scales the inverse ones by ``1/n``; ``"ortho"`` scales both by ``1/sqrt(n)``; ``"forward"`` scales the
forward transforms by ``1/n`` and leaves the inverse ones unscaled.

Example:
    >>> import ember
    >>> x = ember.tensor([1.0, 2.0, 3.0, 4.0])
    >>> ember.fft.irfft(ember.fft.rfft(x), n=4)
    tensor([1., 2., 3., 4.])
"""

from __future__ import annotations

from .. import _dtype as D
from .._ops.fft import TRANSFORMS as _TRANSFORMS

__all__ = [
    "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn",
    "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
    "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn",
    "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]

fft = _TRANSFORMS["fft"]
ifft = _TRANSFORMS["ifft"]
fft2 = _TRANSFORMS["fft2"]
ifft2 = _TRANSFORMS["ifft2"]
fftn = _TRANSFORMS["fftn"]
ifftn = _TRANSFORMS["ifftn"]
rfft = _TRANSFORMS["rfft"]
irfft = _TRANSFORMS["irfft"]
rfft2 = _TRANSFORMS["rfft2"]
irfft2 = _TRANSFORMS["irfft2"]
rfftn = _TRANSFORMS["rfftn"]
irfftn = _TRANSFORMS["irfftn"]
hfft = _TRANSFORMS["hfft"]
ihfft = _TRANSFORMS["ihfft"]
hfft2 = _TRANSFORMS["hfft2"]
ihfft2 = _TRANSFORMS["ihfft2"]
hfftn = _TRANSFORMS["hfftn"]
ihfftn = _TRANSFORMS["ihfftn"]


def _frequencies(name, n, count, d, out, dtype, layout, device, requires_grad):
    """``arange(count) / (d * n)`` with the upper half wrapped to negative frequencies when ``count == n``."""
    import ember

    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"{name}(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    if dtype is None:
        dtype = D.get_default_dtype()
    if dtype.category < D.FLOATING:
        raise RuntimeError(f"{name} expects a floating point or complex dtype, got {dtype}")
    index = ember.arange(count, dtype=ember.int64, device=device)
    if count == n:  # fftfreq: bins from (n + 1) // 2 on stand for negative frequencies
        index = ember.where(index < (n + 1) // 2, index, index - n)
    result = index.to(dtype) / (d * n)  # n == 0: rfftfreq's one bin is 0/0 = nan, as in PyTorch
    if out is not None:
        from types import SimpleNamespace

        from .._ops._out import write_out

        return write_out(SimpleNamespace(name=name, return_type=None), out, result)
    return result.requires_grad_(requires_grad) if requires_grad else result


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point :func:`fft`: ``[0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d*n)``.

    Args:
        n (int): the signal length (non-negative).
        d (float): the sample spacing (the inverse of the sampling rate).
        out (Tensor, optional): the output tensor.
        dtype (ember.dtype, optional): a floating dtype (default: the default dtype).
        layout: accepted for PyTorch compatibility (strided only).
        device (ember.device, optional): where to create it.
        requires_grad (bool): whether the result requires grad.

    Returns:
        Tensor: shape ``(n,)``.

    Raises:
        RuntimeError: for a negative ``n`` or a non-floating ``dtype``.

    Example:
        >>> import ember
        >>> ember.fft.fftfreq(4)
        tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    return _frequencies("fftfreq", n, n, d, out, dtype, layout, device, requires_grad)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point :func:`rfft`: ``[0, 1, ..., n//2] / (d*n)``.

    Args:
        n (int): the signal length (non-negative).
        d (float): the sample spacing.
        out (Tensor, optional): the output tensor.
        dtype (ember.dtype, optional): a floating dtype (default: the default dtype).
        layout: accepted for PyTorch compatibility (strided only).
        device (ember.device, optional): where to create it.
        requires_grad (bool): whether the result requires grad.

    Returns:
        Tensor: shape ``(n // 2 + 1,)`` (for ``n == 0``, one NaN, as PyTorch gives).

    Raises:
        RuntimeError: for a negative ``n`` or a non-floating ``dtype``.

    Example:
        >>> import ember
        >>> ember.fft.rfftfreq(4)
        tensor([0.0000, 0.2500, 0.5000])
    """
    count = n // 2 + 1 if isinstance(n, int) and n >= 0 else n  # a negative n is reported by _frequencies
    return _frequencies("rfftfreq", n, count, d, out, dtype, layout, device, requires_grad)


def _shift_dims(input, dim):
    if dim is None:
        return tuple(range(input.dim()))
    return (dim,) if isinstance(dim, int) else tuple(dim)


def fftshift(input, dim=None):
    """Move the zero-frequency bin of an :func:`fft` output to the centre of ``dim``.

    A roll by ``n // 2`` along each dim of ``dim``, as ``numpy.fft.fftshift``.

    Args:
        input (Tensor): a spectrum in :func:`fft` order.
        dim (int or sequence[int], optional): the dims to shift (default: all).

    Returns:
        Tensor: ``input``'s shape and dtype.

    Raises:
        IndexError: for a dim out of range.

    Example:
        >>> import ember
        >>> ember.fft.fftshift(ember.fft.fftfreq(5))
        tensor([-0.4000, -0.2000,  0.0000,  0.2000,  0.4000])
    """
    import ember

    dims = _shift_dims(input, dim)
    if not dims:
        return input.clone()
    return ember.roll(input, [input.shape[d] // 2 for d in dims], list(dims))


def ifftshift(input, dim=None):
    """The inverse of :func:`fftshift`: a roll by ``-(n // 2)`` along each dim of ``dim``.

    Args:
        input (Tensor): a centred spectrum.
        dim (int or sequence[int], optional): the dims to shift (default: all).

    Returns:
        Tensor: ``input``'s shape and dtype.

    Raises:
        IndexError: for a dim out of range.

    Example:
        >>> import ember
        >>> ember.fft.ifftshift(ember.fft.fftshift(ember.arange(5)))
        tensor([0, 1, 2, 3, 4])
    """
    import ember

    dims = _shift_dims(input, dim)
    if not dims:
        return input.clone()
    return ember.roll(input, [-(input.shape[d] // 2) for d in dims], list(dims))
