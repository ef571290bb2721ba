"""``custom_fwd``/``custom_bwd``: autocast-aware ``forward``/``backward`` of ``autograd.Function``."""

from __future__ import annotations

import functools

from .. import _autocast
from .._autocast import autocast
from .._tensor import Tensor

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available"]


def is_autocast_available(device_type):
    """Whether autocast supports ``device_type`` (``"cpu"`` and ``"cuda"``)."""
    return device_type in _autocast._DEFAULT_DTYPES


def _cast_inputs(value, device_type, dtype):
    if isinstance(value, Tensor):
        if value.device.type == device_type and value.dtype.is_floating_point and value.dtype is not dtype:
            return value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_inputs(v, device_type, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_inputs(v, device_type, dtype) for k, v in value.items()}
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorate a custom ``autograd.Function``'s ``forward`` for autocast regions.

    Args:
        fwd (callable): the ``forward(ctx, *args, **kwargs)`` static method.
        device_type (str): the autocast device type (``"cpu"`` or ``"cuda"``), keyword-only.
        cast_inputs (ember.dtype, optional): when given and autocast is enabled for ``device_type``,
            ``forward`` runs with autocast off and its floating inputs of that device cast to this dtype;
            when None, ``forward`` runs under the surrounding autocast state.

    Returns:
        callable: the wrapped ``forward``; the region's state is kept on ``ctx`` for :func:`custom_bwd`.

    Raises:
        ValueError / RuntimeError: for an unsupported ``device_type``.
    """
    _autocast._check_device_type(device_type, "custom_fwd")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = _autocast.get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = _autocast.is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_on = _autocast.is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if autocast_on:
            with autocast(device_type=device_type, enabled=False):
                return fwd(ctx, *_cast_inputs(args[1:], device_type, cast_inputs),
                           **_cast_inputs(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)

    return forward


def custom_bwd(bwd=None, *, device_type):
    """Decorate a custom ``autograd.Function``'s ``backward``: it runs under the autocast state its
    :func:`custom_fwd`-decorated ``forward`` saw.

    Args:
        bwd (callable): the ``backward(ctx, *grads)`` static method.
        device_type (str): the autocast device type, keyword-only.
    """
    _autocast._check_device_type(device_type, "custom_bwd")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(*args, **kwargs):
        ctx = args[0]
        enabled = getattr(ctx, "_fwd_used_autocast", False)
        dtype = getattr(ctx, "_dtype", None)
        with autocast(device_type=device_type, enabled=enabled, dtype=dtype):
            return bwd(*args, **kwargs)

    return backward
