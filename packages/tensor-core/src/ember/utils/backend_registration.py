"""Out-of-tree devices: PyTorch's PrivateUse1 idea, for any number of devices.

A package adds a device type by registering a :class:`~ember._device.Backend`
(how its arrays are made from and turned into numpy arrays, and how a strided
view of its storage is built) and kernels for the prims it implements. Every
composite op then runs on it through its decomposition; every view op through
the backend's strided-view primitive.

Example (see ``tests/test_backend_registration.py`` for a complete device)::

    from ember.utils.backend_registration import register_backend, register_kernel

    register_backend("mydev", MyBackend())

    @register_kernel("add", "mydev")
    def add(input, other, *, alpha=1):
        ...  # return an array of mydev
"""

from __future__ import annotations

from .._device import Backend, canonical_device, register_backend_type
from .._ops import _registry

__all__ = ["Backend", "register_backend", "register_kernel", "missing_prims"]


def register_backend(name, backend, *, generate_methods=True):
    """Register device type ``name`` backed by ``backend``.

    Args:
        name (str): the device type (``ember.device(name)`` works afterwards).
        backend (Backend): array conversion and strided views for the device.
        generate_methods (bool): add ``Tensor.<name>()`` (move a tensor there)
            and ``Tensor.is_<name>``, as PyTorch generates for PrivateUse1.

    Raises:
        RuntimeError: if ``name`` is already registered, or would shadow a Tensor attribute.
    """
    from .._device import _BACKENDS
    from .._tensor import Tensor

    if name in _BACKENDS:
        raise RuntimeError(f"device type '{name}' is already registered")
    from .._tensor import PREDICATE_DEVICE_TYPES

    # PyTorch's own predicates (Tensor.is_xpu, ...) already answer by device type: not a clash.
    has_predicate = hasattr(Tensor, f"is_{name}") and name not in PREDICATE_DEVICE_TYPES
    if generate_methods and (hasattr(Tensor, name) or has_predicate):
        raise RuntimeError(f"device name '{name}' would shadow an existing Tensor attribute")
    register_backend_type(name, backend)
    if generate_methods:

        def to_device(self, device=None, non_blocking=False):
            target = canonical_device(
                name if device is None else f"{name}:{device}" if isinstance(device, int) else device
            )
            return self.to(target, non_blocking=non_blocking)

        to_device.__name__ = name
        to_device.__doc__ = f"A copy of this tensor on device type '{name}' (itself if already there)."
        setattr(Tensor, name, to_device)
        setattr(Tensor, f"is_{name}", property(lambda self: self.device.type == name))


def register_kernel(op, device_type, kernel=None):
    """Register ``kernel`` as ``op``'s kernel for ``device_type`` (usable as a decorator).

    Args:
        op (str or Op): the op or its registry name.
        device_type (str): a registered device type.

    Raises:
        KeyError: for an unknown op name.
        RuntimeError: if the op already has a kernel for that device type.
    """
    target = _registry.get(op) if isinstance(op, str) else op
    return target.register_kernel(device_type, kernel)


def missing_prims(device_type):
    """Names of prim ops (not views, which need no kernel) lacking a kernel for ``device_type``."""
    return sorted(
        name
        for name, op in _registry.registry.items()
        if op.category == _registry.PRIM and op.kind != "view" and device_type not in op.kernels
    )
