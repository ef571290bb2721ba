"""``ember.cuda.amp``: PyTorch's older cuda-only names of :mod:`ember.amp`."""

from __future__ import annotations

import functools

from .. import _dtype
from .._autocast import autocast as _autocast
from ..amp import GradScaler as _GradScaler
from ..amp import custom_bwd as _custom_bwd
from ..amp import custom_fwd as _custom_fwd

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_autocast):
    """``ember.autocast("cuda", ...)``: an autocast region for cuda tensors (float16 by default)."""

    def __init__(self, enabled=True, dtype=_dtype.float16, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``ember.amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``ember.amp.custom_fwd(device_type="cuda")``."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``ember.amp.custom_bwd(device_type="cuda")``."""
    if bwd is None:
        return custom_bwd
    return _custom_bwd(bwd, device_type="cuda")
