"""``ember.cuda``: the CUDA runtime as PyTorch's ``torch.cuda`` exposes it, backed by CuPy.

CuPy is optional: ``pip install ember-core[cuda12]`` (or ``[cuda]``) for CUDA 12,
``ember-core[cuda13]`` for CUDA 13; bfloat16 tensors on the GPU need CuPy >= 14. This
module imports without it: :func:`is_available` is then False, :func:`device_count`
is 0 and every other function raises a ``RuntimeError`` that says how to install
CUDA support. ROCm GPUs are the same ``cuda`` device type, through CuPy's ROCm build.

``Tensor.pin_memory()`` and ``Tensor.is_pinned()`` (page-locked host memory for fast,
asynchronous copies to the GPU) are installed by this module; see ``ember.cuda._pinned``.

Device arguments accept an int index, a string (``"cuda"``, ``"cuda:1"``), an
:class:`ember.device` of type ``cuda`` or ``None`` (the current device).

Example:
    >>> import ember
    >>> if ember.cuda.is_available():
    ...     x = ember.ones(3, device="cuda")
    ...     ember.cuda.synchronize()
"""

from __future__ import annotations

import sys

from . import _pinned
from .._alloc import OutOfMemoryError  # noqa: F401 - torch.cuda.OutOfMemoryError (the same class as ember.OutOfMemoryError)
from .. import _legacy_types
from ._runtime import INSTALL_HINT, cupy_module
from ._runtime import is_available as _cupy_available
from .memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_peak_memory_stats,
)
from .random import (
    default_generators,
    get_rng_state,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, stream
from ._sync import get_sync_debug_mode, set_sync_debug_mode

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device", "device",
    "device_of", "get_device_name", "get_device_capability", "get_device_properties", "synchronize",
    "Stream", "Event", "StreamContext", "current_stream", "default_stream", "stream",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "default_generators",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
    "reset_peak_memory_stats", "empty_cache", "mem_get_info", "memory_summary", "INSTALL_HINT",
    "OutOfMemoryError", "set_sync_debug_mode", "get_sync_debug_mode",
]


# PyTorch's legacy CUDA tensor types: ember.cuda.FloatTensor, ... (see ember._legacy_types)
globals().update(_legacy_types.CUDA_TYPES)
__all__ += list(_legacy_types.CUDA_TYPES)

_pinned.install()  # Tensor.pin_memory() / Tensor.is_pinned() (pinning needs the GPU driver; see _pinned)


def is_available():
    """Whether CUDA tensors can be created: CuPy imports and sees at least one GPU."""
    return _cupy_available()


def is_initialized():
    """Whether the CUDA backend has been set up in this process (it is on first use)."""
    # not imported yet means not set up; importing it here would load ml_dtypes (0.7 s) for the answer
    backend = sys.modules.get(f"{__name__}._backend")
    return backend is not None and backend.initialized()


def init():
    """Set up the CUDA backend now rather than on first use.

    Raises:
        RuntimeError: when CUDA is not available (the message says how to install it).
    """
    from . import _backend

    _backend.initialize()


def device_count():
    """The number of GPUs CuPy sees (0 without CuPy or a GPU)."""
    if not _cupy_available():
        return 0
    return cupy_module().cuda.runtime.getDeviceCount()


def _device_index(device, optional=True):
    """The GPU index ``device`` names (the current device for ``None``).

    Raises:
        ValueError: for a device of another type.
        RuntimeError: when CUDA is not available.
    """
    from .._device import device as _device_cls

    cp = cupy_module()
    if device is None:
        return cp.cuda.runtime.getDevice()
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        dev = _device_cls(device) if isinstance(device, str) else device
        if not isinstance(dev, _device_cls):
            raise TypeError(f"Expected a cuda device (int, str or ember.device), but got: {type(device).__name__}")
        if dev.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {dev}")
        index = cp.cuda.runtime.getDevice() if dev.index is None else dev.index
    count = cp.cuda.runtime.getDeviceCount()
    if not 0 <= index < count:
        raise RuntimeError(f"Invalid device id {index}: there are {count} CUDA device(s)")
    return index


def current_device():
    """The index of the current GPU."""
    return cupy_module().cuda.runtime.getDevice()


def set_device(device):
    """Make ``device`` the current GPU (a negative index is ignored, as in PyTorch)."""
    if isinstance(device, int) and device < 0:
        return
    cupy_module().cuda.runtime.setDevice(_device_index(device))


class device:
    """Context manager that makes ``device`` the current GPU inside the block.

    Args:
        device (int, str or ember.device): the GPU; ``None`` or a negative index does nothing.
    """

    def __init__(self, device):
        self.idx = -1 if device is None or (isinstance(device, int) and device < 0) else _device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the GPU of tensor ``obj`` current (does nothing for a CPU tensor)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


class _DeviceProperties:
    """What :func:`get_device_properties` returns: PyTorch's field names over CUDA's properties."""

    def __init__(self, props):
        name = props["name"]
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.major = int(props["major"])
        self.minor = int(props["minor"])
        self.total_memory = int(props["totalGlobalMem"])
        self.multi_processor_count = int(props["multiProcessorCount"])
        self.L2_cache_size = int(props.get("l2CacheSize", 0))
        self.warp_size = int(props.get("warpSize", 32))
        self.is_integrated = bool(props.get("integrated", 0))
        self.is_multi_gpu_board = bool(props.get("isMultiGpuBoard", 0))

    def __repr__(self):
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count}, "
            f"L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)"
        )


def get_device_properties(device=None):
    """The properties of a GPU: ``name``, ``major``, ``minor``, ``total_memory`` (bytes),
    ``multi_processor_count``, ``L2_cache_size``, ``warp_size``.

    Raises:
        RuntimeError: when CUDA is not available or the index is out of range.
    """
    index = _device_index(device)
    return _DeviceProperties(cupy_module().cuda.runtime.getDeviceProperties(index))


def get_device_name(device=None):
    """The name of a GPU (``"NVIDIA H200"``)."""
    return get_device_properties(device).name


def get_device_capability(device=None):
    """The compute capability of a GPU as ``(major, minor)``."""
    props = get_device_properties(device)
    return props.major, props.minor


def synchronize(device=None):
    """Wait until every kernel queued on every stream of ``device`` (default: current) has finished.

    Raises:
        IndexError: (for example) when a kernel queued earlier found a bad input it reports asynchronously,
            such as a ``cross_entropy`` class index out of range (see :mod:`ember.cuda._async_errors`).
    """
    from ._async_errors import raise_pending
    from ._sync import host_sync

    cp = cupy_module()

    def wait():
        with cp.cuda.Device(_device_index(device)):
            cp.cuda.runtime.deviceSynchronize()
        raise_pending()

    host_sync("ember.cuda.synchronize()", wait)
