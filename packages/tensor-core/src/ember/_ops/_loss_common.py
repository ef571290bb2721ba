"""Checks shared by the loss op modules (``ember._ops.nn_loss_*``)."""

from __future__ import annotations

from ._nn_common import _E, _check_tensor


def _check_loss_tensors(op, *named):
    """Raise as PyTorch does unless each ``(name, value)`` of ``named`` is a Tensor (positions count from 1)."""
    for position, (name, value) in enumerate(named, 1):
        _check_tensor(op, name, value, position)


def _any_off_cpu(flags):
    """Whether bool tensor ``flags`` (not on CPU) has a True element: the value checks of the fused CPU kernels,
    for the decompositions other devices run. Reading the answer waits for the device: these are
    data-dependent errors, as the index checks of ``gather`` (PyTorch's CUDA kernels assert on the device).
    On CPU it is False without a look: the fused kernels check there, and the decompositions stay as fast.
    On meta tensors (ahead-of-time tracing) there are no values to check: False, as on CPU."""
    return flags._device.type not in ("cpu", "meta") and bool(_E.any(flags))
