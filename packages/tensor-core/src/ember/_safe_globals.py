"""PyTorch's allow-list for unpickling (``torch.serialization.add_safe_globals`` and friends).

``torch.load(weights_only=True)`` unpickles with a restricted unpickler, and programs that
save their own classes in checkpoints register those classes with
``torch.serialization.add_safe_globals([MyConfig])`` so loading may construct them.

Ember never unpickles: :func:`ember.load` reads JSON and raw tensor bytes, and the only
objects it rebuilds besides builtin containers, numbers, strings, numpy arrays, dtypes and
devices are those of types registered *in this process* with
:func:`ember.serialization.register_serializable_type`. There is no global a file could name,
so these functions change nothing about loading. They keep the list PyTorch keeps, so that
programs which call them run unchanged and read back what they registered; to make your own
class saveable, register it with ``register_serializable_type``.
"""

from __future__ import annotations

__all__ = [
    "add_safe_globals",
    "get_safe_globals",
    "clear_safe_globals",
    "safe_globals",
    "get_unsafe_globals_in_checkpoint",
]

_SAFE_GLOBALS: list = []


def add_safe_globals(safe_globals):
    """Record ``safe_globals`` (classes or functions, or ``(object, "name")`` pairs) as PyTorch does.

    It has no effect on :func:`ember.load`, which never unpickles (see the module docstring).

    Args:
        safe_globals (list): the objects PyTorch's weights-only unpickler would allow.

    Raises:
        TypeError: if ``safe_globals`` is not a list, as in PyTorch.
    """
    if not isinstance(safe_globals, list):
        raise TypeError(f"add_safe_globals: expected a list of globals, got {type(safe_globals).__name__}")
    _SAFE_GLOBALS.extend(safe_globals)


def get_safe_globals():
    """The objects recorded by :func:`add_safe_globals` (they have no effect in ember)."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals():
    """Forget every object recorded by :func:`add_safe_globals`."""
    _SAFE_GLOBALS.clear()


class safe_globals:
    """Context manager recording ``safe_globals`` for the block (no effect in ember; see the module docstring).

    Example:
        >>> import ember
        >>> class Config:
        ...     pass
        >>> with ember.serialization.safe_globals([Config]):
        ...     Config in ember.serialization.get_safe_globals()
        True
        >>> Config in ember.serialization.get_safe_globals()
        False
    """

    def __init__(self, safe_globals):
        if not isinstance(safe_globals, list):
            raise TypeError(f"safe_globals: expected a list of globals, got {type(safe_globals).__name__}")
        self.safe_globals = safe_globals
        self._saved = None

    def __enter__(self):
        self._saved = list(_SAFE_GLOBALS)
        _SAFE_GLOBALS.extend(self.safe_globals)
        return self

    def __exit__(self, *exc):
        _SAFE_GLOBALS[:] = self._saved
        return False


def get_unsafe_globals_in_checkpoint(f):
    """The globals a checkpoint needs that are not allowed: always ``[]``, since ember files name none.

    Args:
        f: a path or file object (not read: an ember file holds no pickled globals).
    """
    return []
