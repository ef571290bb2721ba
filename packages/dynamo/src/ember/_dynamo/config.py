"""Settings of ember-dynamo (module attributes, as ``torch._dynamo.config``).

Change them directly (``ember._dynamo.config.cache_size_limit = 16``) or for a block with
:func:`patch`. :class:`CaptureConfig` is what one capture is told (the translator's input).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field

__all__ = [
    "cache_size_limit",
    "automatic_dynamic_shapes",
    "verify_guards_on_capture",
    "suppress_errors",
    "allow_rnn",
    "patch",
    "CaptureConfig",
]

#: How many cache entries (captures with different guards) one code object may hold. A call
#: that misses every entry after that runs eagerly, with one warning per code object.
cache_size_limit: int = 8

#: With ``dynamic=None``: after a recompile caused only by a tensor's size in some dims, capture
#: again with those dims dynamic (symbolic) instead of one graph per size.
automatic_dynamic_shapes: bool = True

#: Check a fresh capture's guards on the frame it was captured from (a translator bug would
#: otherwise recompile on every call); a failure raises.
verify_guards_on_capture: bool = True

#: An internal error of the capture (a translator bug, not an ``Unsupported`` construct) runs the frame
#: eagerly with a warning instead of raising. Off by default, as in PyTorch: bugs should be seen.
suppress_errors: bool = False

#: Trace ``nn.RNN``/``nn.LSTM``/``nn.GRU`` (unrolled over time). Off by default, as in PyTorch: a
#: recurrent layer runs eagerly at a graph break, since its unrolled graph compiles for minutes.
allow_rnn: bool = False

_SETTINGS = (
    "cache_size_limit", "automatic_dynamic_shapes", "verify_guards_on_capture", "suppress_errors", "allow_rnn",
)


@contextlib.contextmanager
def patch(**settings):
    """Set some settings for the duration of a ``with`` block, then restore them.

    Args:
        **settings: setting name -> value, e.g. ``patch(cache_size_limit=2)``.

    Raises:
        AttributeError: a name that is not a setting of this module.
    """
    module = sys.modules[__name__]
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise AttributeError(f"config.patch: unknown setting(s) {unknown}; the settings are {list(_SETTINGS)}")
    saved = {name: getattr(module, name) for name in settings}
    for name, value in settings.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


@dataclass(frozen=True)
class CaptureConfig:
    """What one capture (``translate``) is told.

    Attributes:
        fullgraph (bool): a graph break is an error (``Unsupported``) instead of a break.
        dynamic (bool or None): ``True``: every tensor size symbolic; ``False``: all static;
            ``None``: static except ``dynamic_dims``.
        dynamic_dims (dict[str, frozenset[int]]): source name (``"L['x']"``) -> dims to make
            symbolic (from :func:`~ember._dynamo.mark_dynamic` and automatic dynamic shapes).
    """

    fullgraph: bool = False
    dynamic: bool | None = None
    dynamic_dims: dict = field(default_factory=dict)
