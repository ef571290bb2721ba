"""``nn.utils.skip_init``: build a module without running its parameter initialisation."""

from __future__ import annotations

import inspect

from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """Construct ``module_cls(*args, **kwargs)`` with uninitialized (``empty``) parameters and buffers.

    The module is built on the ``"meta"`` device, where initialisation computes nothing, then given
    real, uninitialized storage on ``kwargs["device"]`` (default ``"cpu"``) by
    :meth:`Module.to_empty`. Useful when the values are about to be loaded or set anyway.

    Args:
        module_cls: a :class:`Module` subclass whose constructor takes ``device``.
        *args: the constructor's positional arguments.
        **kwargs: the constructor's keyword arguments.

    Returns:
        Module: the module, its tensors uninitialized.

    Raises:
        RuntimeError: ``module_cls`` is not a Module class, or its constructor has no ``device``.

    Example:
        >>> from ember import nn
        >>> m = nn.utils.skip_init(nn.Linear, 5, 1)
        >>> m.weight.shape, m.weight.device
        (ember.Size([1, 5]), device(type='cpu'))
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "meta"
    return module_cls(*args, **kwargs).to_empty(device=final_device)
