"""The current accelerator, whatever its type: PyTorch's ``torch.accelerator`` (2.6+).

Code that should run on "the GPU if there is one" without naming CUDA writes::

    device = ember.accelerator.current_accelerator() or ember.device("cpu")

An accelerator is the device type tensors go to when a program asks for "the" accelerator:

* ``cuda`` (through CuPy; ROCm is the same device type) when CUDA is available;
* otherwise the first out-of-tree device type registered through
  :mod:`ember.utils.backend_registration` whose backend reports itself available (PyTorch
  likewise treats its PrivateUse1 device as the accelerator when one is registered).

``cpu`` and ``meta`` are never accelerators. An out-of-tree backend may add
``device_count()``, ``set_index(index)``, ``synchronize(index)`` methods; without them it
counts as one device, index 0, whose work finishes before each op returns (so
:func:`synchronize` has nothing to wait for).
"""

from __future__ import annotations

import contextlib
import importlib.util

from ._device import _BACKENDS, canonical_device
from ._device import device as _device_cls

__all__ = [
    "is_available",
    "current_accelerator",
    "device_count",
    "current_device_index",
    "set_device_index",
    "device_index",
    "synchronize",
    "current_stream",
    "set_stream",
    "empty_cache",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
    "current_device_idx",
    "set_device_idx",
]

_NOT_ACCELERATORS = ("cpu", "meta")
_NONE_AVAILABLE = "Cannot access accelerator device when none is available."


def _out_of_tree_types():
    return [name for name in _BACKENDS if name not in _NOT_ACCELERATORS and name != "cuda"]


def _cuda_built():
    """Whether ember's CUDA backend is installed: CuPy can be imported (a GPU may still be missing)."""
    return importlib.util.find_spec("cupy") is not None


def _accelerator_type(check_available=True):
    from . import cuda

    if cuda.is_available() or (not check_available and _cuda_built()):
        return "cuda"
    for name in _out_of_tree_types():
        if not check_available or _BACKENDS[name].is_available():
            return name
    return None


def is_available():
    """Whether an accelerator (see the module docstring) is available in this process.

    Example:
        >>> import ember
        >>> ember.accelerator.is_available() == (ember.accelerator.current_accelerator() is not None)
        True
    """
    return _accelerator_type() is not None


def current_accelerator(check_available=False):
    """The accelerator's device type as an :class:`ember.device` (``device(type='cuda')``), or ``None``.

    Args:
        check_available (bool): when False (PyTorch's default), ``cuda`` is returned wherever
            ember's CUDA backend is installed (CuPy imports), even if no GPU is visible; when
            True only an accelerator that can run now is returned.

    Returns:
        ember.device or None: ``None`` when there is no accelerator (a CPU-only machine).
    """
    name = _accelerator_type(check_available=check_available)
    return None if name is None else _device_cls(name)


def _require():
    name = _accelerator_type()
    if name is None:
        raise RuntimeError(_NONE_AVAILABLE)
    return name


def _require_cuda(lacking):
    """Raise RuntimeError unless the accelerator is CUDA: ``"device type 'x' <lacking>"``."""
    name = _require()
    if name != "cuda":
        raise RuntimeError(f"device type {name!r} {lacking}")


def device_count():
    """The number of devices of the accelerator type (0 when there is no accelerator)."""
    name = _accelerator_type()
    if name is None:
        return 0
    if name == "cuda":
        from . import cuda

        return cuda.device_count()
    count = getattr(_BACKENDS[name], "device_count", None)
    return 1 if count is None else int(count())


def current_device_index():
    """The index of the current accelerator device.

    Raises:
        RuntimeError: when there is no accelerator.
    """
    name = _require()
    if name == "cuda":
        from . import cuda

        return cuda.current_device()
    return _BACKENDS[name].current_index()


def _index_of(device, name):
    """The device index ``device`` (int, str or ember.device of the accelerator type) names."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    dev = canonical_device(device)
    if dev.type != name:
        raise ValueError(f"{dev} is not of the current accelerator type {name!r}")
    return dev.index if dev.index is not None else current_device_index()


def set_device_index(device, /):
    """Make ``device`` (an index, a string or an :class:`ember.device`) the current accelerator device.

    ``None`` or a negative index does nothing, as in PyTorch.

    Raises:
        RuntimeError: when there is no accelerator.
        ValueError: for a device of another type.
    """
    name = _require()
    if device is None:
        return
    index = _index_of(device, name)
    if index < 0:
        return
    if name == "cuda":
        from . import cuda

        cuda.set_device(index)
        return
    set_index = getattr(_BACKENDS[name], "set_index", None)
    if set_index is not None:
        set_index(index)
    elif index != 0:
        raise RuntimeError(f"device type {name!r} has one device (index 0); got index {index}")


@contextlib.contextmanager
def device_index(device, /):
    """Context manager that makes device ``device`` (an index) current inside the block.

    ``None`` does nothing (and needs no accelerator), as in PyTorch.

    Raises:
        RuntimeError: when ``device`` is an index and there is no accelerator.
    """
    if device is None:
        yield
        return
    previous = current_device_index()
    set_device_index(device)
    try:
        yield
    finally:
        set_device_index(previous)


def synchronize(device=None, /):
    """Wait until all work queued on ``device`` (default: the current accelerator device) has finished.

    Raises:
        RuntimeError: when there is no accelerator.
    """
    name = _require()
    if name == "cuda":
        from . import cuda

        cuda.synchronize(device)
        return
    wait = getattr(_BACKENDS[name], "synchronize", None)
    if wait is not None:
        wait(current_device_index() if device is None else _index_of(device, name))


def current_stream(device=None, /):
    """The current stream of ``device`` (CUDA: an :class:`ember.cuda.Stream`).

    Raises:
        RuntimeError: when there is no accelerator, or it has no streams (out-of-tree devices).
    """
    _require_cuda("has no streams")
    from . import cuda

    return cuda.current_stream(device)


def set_stream(stream):
    """Make ``stream`` current on its device (CUDA only; see :func:`ember.cuda.stream`).

    Raises:
        RuntimeError: when there is no accelerator, or it has no streams.
    """
    _require_cuda("has no streams")
    from .cuda import _runtime

    cp = _runtime.cupy_module()
    with cp.cuda.Device(stream.device_index):
        stream._cupy.use()  # CuPy's "make this the current stream of its device"


def _cuda_memory(function_name):
    def function(*args, **kwargs):
        _require_cuda("reports no memory statistics")
        from . import cuda

        return getattr(cuda, function_name)(*args, **kwargs)

    function.__name__ = function_name
    function.__doc__ = (
        f"The accelerator's :func:`ember.cuda.{function_name}` (CUDA only).\n\n"
        "Raises:\n    RuntimeError: when there is no accelerator, or it is not CUDA.\n"
    )
    return function


empty_cache = _cuda_memory("empty_cache")
memory_allocated = _cuda_memory("memory_allocated")
max_memory_allocated = _cuda_memory("max_memory_allocated")
memory_reserved = _cuda_memory("memory_reserved")
max_memory_reserved = _cuda_memory("max_memory_reserved")
memory_stats = _cuda_memory("memory_stats")
reset_peak_memory_stats = _cuda_memory("reset_peak_memory_stats")

# PyTorch 2.6's names, kept (deprecated there) for programs written against it.
current_device_idx = current_device_index
set_device_idx = set_device_index
