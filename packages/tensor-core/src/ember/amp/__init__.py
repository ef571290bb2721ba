"""Automatic mixed precision: :class:`autocast` regions and :class:`GradScaler` (PyTorch's ``torch.amp``).

Example:
    >>> import ember
    >>> model = ember.nn.Linear(4, 2)
    >>> with ember.amp.autocast("cpu"):
    ...     model(ember.randn(3, 4)).dtype
    ember.bfloat16
"""

from __future__ import annotations

from .._autocast import autocast, is_autocast_enabled
from .autocast_mode import custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler, OptState

__all__ = [
    "autocast", "GradScaler", "OptState", "custom_fwd", "custom_bwd", "is_autocast_available", "is_autocast_enabled",
]
