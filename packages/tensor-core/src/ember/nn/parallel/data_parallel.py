"""``DataParallel``: PyTorch's single-process data parallelism, on one device.

PyTorch's ``DataParallel`` splits each batch along ``dim`` across several GPUs, runs a replica
of the module on each and gathers the outputs. Ember implements the cases a program meets
on one device:

* no accelerator (a CPU-only machine): the wrapper calls the module directly, as PyTorch
  does when it sees no GPU (``device_ids`` is then ``[]``);
* one accelerator device: inputs are moved to ``device_ids[0]`` and the module runs there.

Replicating the module over several GPUs is not done yet: with more than one entry in
``device_ids`` the forward raises ``NotImplementedError`` saying to pass one device or to use
``DistributedDataParallel`` (ember-distributed), PyTorch's recommended replacement.

In every case the module is registered as the child ``module``, so ``state_dict()`` keys
start with ``"module."`` exactly as with PyTorch's wrapper, and checkpoints move between
the two unchanged.
"""

from __future__ import annotations

import builtins

from ..._tensor import Tensor
from ...utils._pytree import tree_map
from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _accelerator_devices(device_ids, output_device):
    """``(device_ids, output_device, device_type)`` after PyTorch's defaults; ``([], None, None)`` without one."""
    from ... import accelerator

    found = accelerator.current_accelerator(check_available=True)
    if found is None:
        return [], None, None
    device_type = found.type
    if device_ids is None:
        device_ids = list(range(accelerator.device_count()))
    device_ids = [_index(d, device_type) for d in device_ids]
    if not device_ids:
        return [], None, device_type
    output_device = device_ids[0] if output_device is None else _index(output_device, device_type)
    return device_ids, output_device, device_type


def _index(device, device_type):
    """The device index of ``device`` (an int, a string or an ember.device)."""
    from ..._device import device as device_cls

    if isinstance(device, builtins.int) and not isinstance(device, builtins.bool):
        return device
    dev = device_cls(device) if isinstance(device, str) else device
    if not isinstance(dev, device_cls):
        raise TypeError(f"DataParallel: expected a device index, string or ember.device, got {type(device).__name__}")
    if dev.type != device_type:
        raise ValueError(f"DataParallel: expected a {device_type} device, got {dev}")
    return 0 if dev.index is None else dev.index


def _move(obj, device):
    return tree_map(lambda x: x.to(device) if isinstance(x, Tensor) else x, obj)


class DataParallel(Module):
    """Run ``module`` on the accelerator (or the CPU), registered as ``self.module``.

    Without an accelerator the wrapper calls the module (``device_ids`` is ``[]``), as
    PyTorch's does without GPUs; on one device it moves the inputs there first. Several
    devices would need the module replicated on each, which ember does not do yet: the
    forward then raises. ``state_dict()`` keys start with ``"module."`` as with PyTorch's
    wrapper, so checkpoints move between the two unchanged.

    Args:
        module (Module): the module to run.
        device_ids (list of int or ember.device, optional): devices to use; default: every
            device of the current accelerator (none on a CPU-only machine).
        output_device (int or ember.device, optional): where outputs go; default
            ``device_ids[0]``.
        dim (int): the batch dimension PyTorch scatters along (kept for compatibility; with
            one device nothing is split).

    Raises:
        RuntimeError: in ``forward``, when a parameter or buffer of ``module`` is not on
            ``device_ids[0]``.
        NotImplementedError: in ``forward``, when ``device_ids`` names several devices
            (replication over several GPUs is not implemented).

    Example:
        >>> import ember
        >>> model = ember.nn.DataParallel(ember.nn.Linear(3, 2))
        >>> list(model.state_dict())
        ['module.weight', 'module.bias']
        >>> model(ember.ones(4, 3)).shape
        ember.Size([4, 2])
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an ember.nn.Module, got {type(module).__name__}")
        self.module = module
        self.device_ids, self.output_device, device_type = _accelerator_devices(device_ids, output_device)
        self.dim = dim
        self.src_device_obj = None
        if self.device_ids:
            from ..._device import device

            self.src_device_obj = device(device_type, self.device_ids[0])

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        if len(self.device_ids) > 1:
            raise NotImplementedError(
                f"DataParallel over {len(self.device_ids)} devices (device_ids={self.device_ids}) would replicate "
                "the module on each; ember does not do that yet. Pass device_ids=[<one device>] or use "
                "ember.nn.parallel.DistributedDataParallel (ember-distributed)"
            )
        for tensor in (*self.module.parameters(), *self.module.buffers()):
            if tensor.device != self.src_device_obj:
                raise RuntimeError(
                    f"module must have its parameters and buffers on device {self.src_device_obj} "
                    f"(device_ids[0]) but found one of them on device: {tensor.device}"
                )
        inputs, kwargs = _move((inputs, kwargs), self.src_device_obj)
        outputs = self.module(*inputs, **kwargs)
        if self.output_device != self.device_ids[0]:
            outputs = _move(outputs, self.src_device_obj.__class__(self.src_device_obj.type, self.output_device))
        return outputs


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """Functional :class:`DataParallel`: ``module(*inputs, **module_kwargs)`` on the accelerator or CPU.

    Args:
        module (Module): the module to run.
        inputs (tensor or tuple): its positional inputs (a single tensor is one input).
        device_ids, output_device, dim: as for :class:`DataParallel`.
        module_kwargs (dict, optional): its keyword inputs.

    Raises:
        NotImplementedError: when ``device_ids`` names several devices.
    """
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    wrapper = DataParallel(module, device_ids=device_ids, output_device=output_device, dim=dim)
    return wrapper(*inputs, **(module_kwargs or {}))
