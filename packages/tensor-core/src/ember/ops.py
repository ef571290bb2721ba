"""``ember.ops.<namespace>.<name>``: the custom ops of :mod:`ember.library` by namespace (PyTorch's ``torch.ops``).

Example::

    ember.ops.mylib.numpy_sin(x)  # the op defined as "mylib::numpy_sin"
"""

from __future__ import annotations

__all__ = []


class _Namespace:
    """The custom ops of one namespace, as attributes."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, name):
        from .library import _CUSTOM_OPS

        definition = _CUSTOM_OPS.get(f"{self._name}::{name}")
        if definition is None:
            raise AttributeError(f"'_OpNamespace' '{self._name}' object has no attribute '{name}'")
        return definition.op

    def __repr__(self):
        return f"ember.ops.{self._name}"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Namespace(name)
