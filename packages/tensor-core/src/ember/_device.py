"""Devices: where a tensor's data lives.

A :class:`device` is a type (``"cpu"``, ``"cuda"``, ``"meta"`` or an
out-of-tree type registered through :mod:`ember.utils.backend_registration`)
and an optional index. Each device type has a :class:`Backend` that knows how
to move numpy data in and out of its arrays; kernels are registered per device
type in the op registry (:mod:`ember._ops`).
"""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["device", "Backend", "get_backend", "register_backend_type"]

_BUILTIN_TYPES = ("cpu", "cuda", "meta")


class Backend:
    """How one device type stores data.

    Subclasses (or instances configured with functions) provide:

    * ``from_numpy(array, index)``: a backend array holding a copy of ``array``
      (or ``array`` itself on CPU);
    * ``to_numpy(array)``: a numpy array with the values of a backend array;
    * ``is_available()``: whether tensors of this type can be created now.

    Backend arrays expose ``shape``, ``strides`` (bytes), ``dtype`` (a numpy
    dtype) and ``ndim`` as numpy arrays do; tensor metadata is read from them.
    """

    name = "?"

    def from_numpy(self, array, index):
        raise NotImplementedError

    def to_numpy(self, array):
        raise NotImplementedError

    def is_available(self):
        return True

    def strided_view(self, storage, shape, strides, offset, dtype):
        """An array viewing ``storage`` with ``shape``, ``strides`` and ``offset`` (elements) of ``dtype``.

        Every view op reaches the backend through this one primitive.
        """
        raise NotImplementedError(f"device type '{self.name}' does not implement strided_view")

    def unavailable_reason(self):
        return f"device type '{self.name}' is not available"

    def current_index(self):
        """The index a device of this type without one (``"cuda"``) allocates on: the current device."""
        return 0

    def fallback_kernel(self, op):
        """A kernel for ``op`` when it registered none for this device type (None: there is none).

        The CUDA backend runs the op's numpy-namespace CPU kernel on its arrays (see
        :mod:`ember.cuda._backend`).
        """
        return None


_BACKENDS: dict[str, Backend] = {}


def register_backend_type(name, backend):
    """Register the :class:`Backend` for device type ``name``.

    Raises:
        RuntimeError: if ``name`` is already registered.
    """
    if name in _BACKENDS:
        raise RuntimeError(f"device type '{name}' is already registered")
    backend.name = name
    _BACKENDS[name] = backend


def get_backend(type_name):
    """The backend of device type ``type_name``.

    Raises:
        RuntimeError: for an unknown device type.
    """
    try:
        return _BACKENDS[type_name]
    except KeyError:
        raise RuntimeError(
            f"Expected one of {', '.join(sorted(set(_BUILTIN_TYPES) | set(_BACKENDS)))} device type "
            f"at start of device string: {type_name}"
        ) from None


class device:
    """A device: ``ember.device("cpu")``, ``ember.device("cuda", 0)`` or ``ember.device("cuda:1")``.

    Args:
        type (str or device): the device type, optionally with ``:index``.
        index (int, optional): the device index; ``None`` means "the current one".

    Raises:
        RuntimeError: for an unknown device type or a malformed string.

    Equal devices compare equal and hash alike; ``str(device)`` gives ``"cuda:0"``.
    """

    __slots__ = ("type", "index", "_key")
    _cache: dict = {}

    def __new__(cls, type, index=None):  # noqa: A002 - PyTorch's argument name
        if isinstance(type, device):
            if index is None:
                return type
            type = type.type
        key = (type, index)
        cached = cls._cache.get(key)
        if cached is not None:
            return cached
        if not isinstance(type, str):
            raise TypeError(f"device(): argument 'type' must be str or device, not {type.__class__.__name__}")
        name, idx = type, index
        if ":" in type:
            if index is not None:
                raise RuntimeError(f"device(): type string '{type}' already has an index; don't pass index={index}")
            name, _, idx_text = type.partition(":")
            if not idx_text.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            idx = int(idx_text)
        if name not in _BACKENDS:
            get_backend(name)  # raises the unknown-type error
        if idx is not None and (not isinstance(idx, int) or idx < 0):
            raise RuntimeError(f"Device index must not be negative, got {idx}")
        cached = cls._cache.get((name, idx))
        if cached is not None:  # "cuda:0" and ("cuda", 0) are one object: the dispatcher compares identity
            cls._cache[key] = cached
            return cached
        self = object.__new__(cls)
        object.__setattr__(self, "type", name)
        object.__setattr__(self, "index", idx)
        object.__setattr__(self, "_key", (name, idx))
        cls._cache[key] = self
        cls._cache[(name, idx)] = self
        return self

    def __setattr__(self, name, value):
        raise AttributeError("ember.device is immutable")

    def __eq__(self, other):
        # A device string compares as the device it names ("cpu", "cuda:0"); a string that
        # names none is simply unequal, and other objects are left to their own __eq__:
        # comparing must never raise (dict and set lookups compare keys of any type).
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError, ValueError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return (
            f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"
        )

    def __reduce__(self):
        return (device, self._key)

    def __enter__(self):
        """``with ember.device("cuda"):`` makes this the default device of factories in the block."""
        _default.stack.append(_default.device)
        _default.device = self
        return self

    def __exit__(self, exc_type, exc, tb):
        _default.device = _default.stack.pop()
        return False


class _DefaultDevice(threading.local):
    """Per thread, as in PyTorch: the device factories use when given none (None: the cpu)."""

    def __init__(self):
        self.device = None
        self.stack = []  # the defaults that open `with ember.device(...)` blocks replaced


_default = _DefaultDevice()


def canonical_device(dev):
    """The device tensors are created on when ``dev`` is requested (``None`` -> cpu).

    Indexed device types (everything but cpu and meta) get the current device's index
    (:meth:`Backend.current_index`; ``ember.cuda.current_device()`` for cuda) when no index is given, as
    PyTorch allocates ``device="cuda"`` on the current device.
    """
    if dev is None:
        dev = _default.device  # ember.set_default_device / `with ember.device(...)`
        if dev is None:
            return CPU
    if type(dev) is device:
        d = dev
    elif isinstance(dev, int):
        d = device("cuda", dev)
    else:
        d = device(dev)
    backend = _BACKENDS[d.type]
    if not backend.is_available():
        raise RuntimeError(backend.unavailable_reason())
    if d.index is None and d.type not in ("cpu", "meta"):
        d = device(d.type, backend.current_index())
    return d


class _CPUBackend(Backend):
    def from_numpy(self, array, index):
        return array

    def to_numpy(self, array):
        return array

    def strided_view(self, storage, shape, strides, offset, dtype):
        itemsize = dtype.itemsize
        if 0 in shape:  # an empty view may start past the end of its storage (PyTorch allows it)
            return np.empty(shape, dtype)
        byte_strides = tuple(s * itemsize for s in strides)
        try:
            return np.ndarray(shape, dtype, buffer=storage.base, offset=offset * itemsize, strides=byte_strides)
        except ValueError:
            if math.prod(shape) * itemsize <= 2**63 - 1:
                raise
            # PyTorch allows an expanded view of 2**62 floats; a numpy array, even a view, must fit int64 bytes
            raise RuntimeError(
                f"a CPU tensor of sizes {list(shape)} and {itemsize}-byte elements would span more than 2**63 - 1 "
                f"bytes, which ember's CPU arrays cannot describe, even as a view (the meta device can)"
            ) from None


class _CUDABackend(Backend):
    """CUDA (and ROCm, through CuPy's ROCm build): arrays are ``cupy.ndarray`` (see :mod:`ember.cuda._backend`).

    CuPy is imported on the first request for a CUDA tensor, never by ``import ember``.
    """

    _ready = False

    def is_available(self):
        if self._ready:
            return True
        from .cuda import _backend, _runtime

        if not _runtime.is_available():
            return False
        _backend.initialize()
        type(self)._ready = True
        return True

    def unavailable_reason(self):
        from .cuda._runtime import unavailable_reason

        return unavailable_reason() or "CUDA is not available"

    def current_index(self):
        from .cuda._backend import current_index

        return current_index()

    def from_numpy(self, array, index):
        from .cuda._backend import from_numpy

        return from_numpy(array, index)

    def to_numpy(self, array):
        from .cuda._backend import to_numpy

        return to_numpy(array)

    def strided_view(self, storage, shape, strides, offset, dtype):
        # every view op of a cuda tensor comes here: bind the function on first use instead of importing each call
        from .cuda._backend import strided_view

        self.strided_view = strided_view
        return strided_view(storage, shape, strides, offset, dtype)

    def fallback_kernel(self, op):
        from .cuda._backend import fallback_kernel

        return fallback_kernel(op)


register_backend_type("cpu", _CPUBackend())
register_backend_type("cuda", _CUDABackend())
# "meta" is registered by ember._meta, which defines its array type.

CPU = device("cpu")
