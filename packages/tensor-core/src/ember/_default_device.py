"""``ember.set_default_device`` / ``ember.get_default_device``: where factories allocate without ``device=``.

The setting is per thread, as in PyTorch; ``with ember.device("cuda"):`` sets it for a block
(:class:`ember.device`'s context manager). Tensors made from other tensors (``zeros_like``, ops) follow
their inputs' device, never the default.
"""

from __future__ import annotations

from . import _device

__all__ = ["set_default_device", "get_default_device"]


def set_default_device(device):
    """Make ``device`` the one factories (``zeros``, ``randn``, ``tensor``, ...) use when given no ``device=``.

    Args:
        device (str, int, ember.device or None): the device; ``None`` resets to the cpu.

    Raises:
        RuntimeError: for an unknown device type or a malformed device string.

    Example:
        >>> import ember
        >>> ember.set_default_device("meta")
        >>> ember.zeros(2).device
        device(type='meta')
        >>> ember.set_default_device(None)
    """
    if device is None:
        _device._default.device = None
        return
    if isinstance(device, int):
        device = _device.device("cuda", device)
    _device._default.device = _device.device(device)


def get_default_device():
    """The device factories use when given none (``device(type='cpu')`` unless set); an index-less cuda
    default comes back with the current device's index, as in PyTorch."""
    return _device.canonical_device(None)
