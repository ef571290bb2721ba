"""Same-dtype copies on the GPU as one device-to-device memcpy: ``clone`` and ``_to_copy``.

The generic copy (``cupy.ndarray.copy``/``astype``) runs an elementwise kernel
(about 1.7 TB/s on an H200); a contiguous copy is one ``cudaMemcpyAsync`` on the
current stream, which the driver runs at the device's copy bandwidth. The fast path
takes a C-contiguous source on the current GPU whose copy is C-contiguous too; other
calls (strided sources, other dtypes or devices, channels-last) run the kernel the op
had before.
"""

from __future__ import annotations

import contextlib

from ..._tensor import Tensor
from .._runtime import cupy_module

__all__ = ["register", "generic_only", "device_copy"]

_state = {}
_installed = {}  # op -> its cuda kernel before register()


def device_copy(array):
    """A new C-contiguous CuPy array equal to C-contiguous ``array``, by one device-to-device memcpy."""
    out = _state["ndarray"](array.shape, array.dtype)
    if array.size:
        out.data.copy_from_device_async(array.data, array.nbytes)
    return out


def _copyable(data):
    if type(data) is not _state["ndarray"] or not data._c_contiguous:
        return False
    return _state["one_gpu"] or data.data.device_id == _state["device"]()


def _clone_kernel(previous):
    from ..._ops.creation import contiguous_format, preserve_format

    def kernel(input, *, memory_format=None):
        data = input._data
        if (memory_format is None or memory_format is preserve_format or memory_format is contiguous_format) and (
            _copyable(data)
        ):
            return device_copy(data)
        return previous(input, memory_format=memory_format)

    kernel.__name__ = "clone_cuda"
    kernel._ember_fast_kernel = True
    return kernel


def _to_copy_kernel(previous):
    from ..._ops.creation import preserve_format

    def kernel(
        input, *, dtype=None, layout=None, device=None, pin_memory=False, non_blocking=False, memory_format=None
    ):
        data = input._data
        if (
            (dtype is None or dtype.numpy_dtype == data.dtype)
            and device is None
            and layout is None
            and not pin_memory
            and (memory_format is None or memory_format is preserve_format)
            and _copyable(data)
        ):
            return Tensor._make(device_copy(data), input.device)
        return previous(
            input,
            dtype=dtype,
            layout=layout,
            device=device,
            pin_memory=pin_memory,
            non_blocking=non_blocking,
            memory_format=memory_format,
        )

    kernel.__name__ = "_to_copy_cuda"
    kernel._ember_fast_kernel = True
    return kernel


def register():
    """Put the memcpy path in front of ``clone``'s and ``_to_copy``'s cuda kernels (idempotent)."""
    from ..._ops._registry import registry

    cp = cupy_module()
    _state["ndarray"], _state["device"] = cp.ndarray, cp.cuda.runtime.getDevice
    _state["one_gpu"] = cp.cuda.runtime.getDeviceCount() == 1  # every array is then on the current GPU
    for name, make in (("clone", _clone_kernel), ("_to_copy", _to_copy_kernel)):
        op = registry.get(name)
        previous = op.kernels.get("cuda") if op is not None else None
        if previous is None or getattr(previous, "_ember_fast_kernel", False):
            continue
        _installed[op] = previous
        op.kernels["cuda"] = make(previous)


@contextlib.contextmanager
def generic_only():
    """Within the block, ``clone``/``_to_copy`` run the cuda kernels they had before :func:`register`."""
    saved = {op: op.kernels["cuda"] for op in _installed}
    for op, previous in _installed.items():
        op.kernels["cuda"] = previous
    try:
        yield
    finally:
        for op, kernel in saved.items():
            op.kernels["cuda"] = kernel
