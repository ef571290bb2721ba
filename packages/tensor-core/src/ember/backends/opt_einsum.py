"""The ``opt_einsum`` contraction-order optimiser (``torch.backends.opt_einsum``).

PyTorch asks opt_einsum for the order in which :func:`torch.einsum` contracts three or more
operands. Ember's :func:`ember.einsum` contracts its operands pairwise from left to right and
does not consult opt_einsum; this module reports whether the package is installed and stores
PyTorch's two flags so that programs that set them run:

* ``enabled``: default True when opt_einsum is installed, else False (as in PyTorch);
* ``strategy``: ``"auto"``, ``"greedy"`` or ``"optimal"``; default ``"auto"`` when
  opt_einsum is installed, else None.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

from . import _flags

__all__ = ["is_available", "get_opt_einsum", "flags"]

_STRATEGIES = ("auto", "greedy", "optimal")


def is_available():
    """Whether the ``opt_einsum`` package can be imported."""
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The ``opt_einsum`` module, or None when it is not installed."""
    return importlib.import_module("opt_einsum") if is_available() else None


def _check_strategy(name, value):
    if value not in _STRATEGIES:
        raise ValueError(f"{name} must be one of {', '.join(_STRATEGIES)}, but got {value!r}")
    if not is_available():
        raise ValueError(f"{name} cannot be set: opt_einsum is not installed")
    return value


def _check_enabled(name, value):
    value = _flags.check_bool(name, value)
    if value and not is_available():
        raise ValueError(f"{name} cannot be True: opt_einsum is not installed")
    return value


_AVAILABLE = is_available()
_flags.install(
    __name__,
    {
        "enabled": (_AVAILABLE, _check_enabled),
        "strategy": ("auto" if _AVAILABLE else None, _check_strategy),
    },
)


def flags(enabled=None, strategy=None):
    """Context manager that sets the given flags inside the block and restores them afterwards."""
    return _flags.temporarily(sys.modules[__name__], enabled=enabled, strategy=strategy)
