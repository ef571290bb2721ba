"""The hook-based ``nn.utils.weight_norm`` / ``remove_weight_norm`` (PyTorch's older API).

The weight ``w`` is replaced by two parameters ``<name>_g`` (the norm over every dim but ``dim``) and
``<name>_v`` (the direction), and a forward pre-hook sets the plain attribute
``<name> = g * v / ||v||`` before every forward. PyTorch deprecates this in favour of
:func:`ember.nn.utils.parametrizations.weight_norm`, whose state-dict keys differ
(``parametrizations.<name>.original0``/``original1``); both are kept because code and checkpoints
still use the old keys.

Reference: Salimans & Kingma, "Weight Normalization: A Simple Reparameterization to Accelerate
Training of Deep Neural Networks", NeurIPS 2016, https://arxiv.org/abs/1602.07868
"""

from __future__ import annotations

import warnings

from ..parameter import Parameter, UninitializedParameter
from .parametrizations import _norm_except_dim

__all__ = ["weight_norm", "remove_weight_norm"]


class _WeightNormHook:
    """The forward pre-hook: recomputes ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))

    def remove(self, module):
        weight = self.compute_weight(module).detach()
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight))


def _find_hook(module, name, kind):
    for hook_id, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            return hook_id, hook
    return None, None


def weight_norm(module, name="weight", dim=0):
    r"""Reparametrize ``module.<name>`` as ``w = g * v / ||v||`` with hooks (deprecated PyTorch API).

    ``<name>_g`` (shape of ``w`` with size 1 on every dim but ``dim``) and ``<name>_v`` (``w``'s shape,
    initially ``w``) become the module's parameters, so its state dict has the keys ``<name>_g`` and
    ``<name>_v`` instead of ``<name>``; a forward pre-hook recomputes ``module.<name>`` (a plain
    tensor attribute) before each forward. Prefer :func:`ember.nn.utils.parametrizations.weight_norm`.

    Args:
        module (Module): the module holding the weight.
        name (str, optional): the weight's name. Default: ``"weight"``.
        dim (int, optional): the dimension whose slices are normalized separately; ``None`` for one
            norm over the whole tensor. Default: ``0``.

    Returns:
        Module: ``module``, with the hook.

    Raises:
        RuntimeError: ``name`` already has a ``weight_norm`` hook.
        ValueError: the weight is an uninitialized (lazy) parameter.

    Warns:
        FutureWarning: this API is deprecated.

    References:
        Salimans & Kingma, "Weight Normalization", NeurIPS 2016, https://arxiv.org/abs/1602.07868

    Example:
        >>> import warnings
        >>> from ember import nn
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", FutureWarning)
        ...     m = nn.utils.weight_norm(nn.Linear(20, 40))
        >>> m.weight_g.shape, m.weight_v.shape, list(m.state_dict())
        (ember.Size([40, 1]), ember.Size([40, 20]), ['bias', 'weight_g', 'weight_v'])
    """
    warnings.warn(
        "`ember.nn.utils.weight_norm` is deprecated in favor of `ember.nn.utils.parametrizations.weight_norm`.",
        FutureWarning,
        stacklevel=2,
    )
    if _find_hook(module, name, _WeightNormHook)[1] is not None:
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    dim = -1 if dim is None else dim
    hook = _WeightNormHook(name, dim)
    weight = getattr(module, name)
    if isinstance(weight, UninitializedParameter):
        raise ValueError(
            "The module passed to `WeightNorm` can't have uninitialized parameters. "
            "Make sure to run the dummy forward before applying weight normalization"
        )
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, hook.compute_weight(module))
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo :func:`weight_norm`: ``module.<name>`` becomes a parameter again, holding the current
    ``g * v / ||v||``; ``<name>_g``, ``<name>_v`` and the hook are removed.

    Args:
        module (Module): the module.
        name (str, optional): the weight's name. Default: ``"weight"``.

    Returns:
        Module: ``module``.

    Raises:
        ValueError: ``module`` has no ``weight_norm`` hook for ``name``.

    Example:
        >>> import warnings
        >>> from ember import nn
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", FutureWarning)
        ...     m = nn.utils.remove_weight_norm(nn.utils.weight_norm(nn.Linear(2, 3)))
        >>> list(m.state_dict())
        ['bias', 'weight']
    """
    hook_id, hook = _find_hook(module, name, _WeightNormHook)
    if hook is None:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    hook.remove(module)
    del module._forward_pre_hooks[hook_id]
    return module
