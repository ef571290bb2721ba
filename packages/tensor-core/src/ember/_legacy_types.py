"""PyTorch's legacy tensor types: ``ember.FloatTensor``, ``ember.cuda.LongTensor``, ...

Old PyTorch programs (and many still in use) name a dtype and a device together through
one of these classes:

* as constructors: ``ember.FloatTensor(2, 3)`` (uninitialised, of that shape),
  ``ember.LongTensor([1, 2])`` (from data), ``ember.FloatTensor(t)`` (an alias of a
  tensor that already has that dtype and device);
* in type checks: ``isinstance(t, ember.FloatTensor)`` is true for a float32 CPU tensor,
  and ``t.type()`` returns ``'ember.FloatTensor'`` (``'ember.cuda.FloatTensor'`` on a GPU);
* in conversions: ``t.type(ember.LongTensor)`` or ``t.type('ember.LongTensor')``.

They are not subclasses of :class:`ember.Tensor` (in PyTorch neither: every tensor is a
``torch.Tensor``); a metaclass answers ``isinstance`` by dtype and device type.

Type strings: ember's own prefix is ``ember.`` (``t.type()`` returns
``'ember.FloatTensor'``); :func:`parse_type_string` also accepts PyTorch's spelling
(``'torch.FloatTensor'``), so ``t.type('torch.LongTensor')`` in a program written for
PyTorch still converts.
"""

from __future__ import annotations

import builtins
import warnings

from . import _dtype as D
from ._tensor import Size, Tensor

__all__ = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "ByteTensor",
    "CharTensor",
    "ShortTensor",
    "IntTensor",
    "LongTensor",
    "BoolTensor",
    "set_default_tensor_type",
    "typename",
]

#: Each dtype's legacy type name (complex ones have names for ``Tensor.type()`` but, as in
#: PyTorch, no class).
TYPE_NAMES = {
    D.bool: "BoolTensor",
    D.uint8: "ByteTensor",
    D.int8: "CharTensor",
    D.int16: "ShortTensor",
    D.int32: "IntTensor",
    D.int64: "LongTensor",
    D.float16: "HalfTensor",
    D.bfloat16: "BFloat16Tensor",
    D.float32: "FloatTensor",
    D.float64: "DoubleTensor",
    D.complex64: "ComplexFloatTensor",
    D.complex128: "ComplexDoubleTensor",
}

# The ten classes PyTorch defines per device type (no complex ones).
_CLASS_DTYPES = [D.float32, D.float64, D.float16, D.bfloat16, D.uint8, D.int8, D.int16, D.int32, D.int64, D.bool]


def type_string(dtype, device_type):
    """The legacy type name of a tensor: ``'ember.FloatTensor'``, ``'ember.cuda.LongTensor'``."""
    prefix = "ember." if device_type == "cpu" else f"ember.{device_type}."
    return prefix + TYPE_NAMES[dtype]


def parse_type_string(text):
    """``(dtype, device_type)`` for a legacy type string (``'ember.cuda.FloatTensor'``).

    PyTorch's spelling (``'torch.FloatTensor'``) is accepted too.

    Raises:
        ValueError: for a string that names no legacy type.
    """
    parts = text.split(".")
    if len(parts) in (2, 3) and parts[0] in ("ember", "torch"):
        device_type = parts[1] if len(parts) == 3 else "cpu"
        for dtype, name in TYPE_NAMES.items():
            if name == parts[-1]:
                return dtype, device_type
    raise ValueError(f"invalid type: {text!r}")


class _LegacyTensorType(type):
    """Metaclass of the legacy types: ``isinstance`` by dtype and device type; calling constructs."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == cls._device_type

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__name__}'>"

    def __call__(cls, *args, device=None):
        _check_device(cls, device)
        if not args:
            return _empty(cls, (0,))
        if len(args) == 1 and isinstance(args[0], Tensor):
            return _alias(cls, args[0])
        if all(isinstance(a, builtins.int) and not isinstance(a, builtins.bool) for a in args):
            return _empty(cls, args)
        if len(args) == 1 and isinstance(args[0], Size):
            return _empty(cls, tuple(args[0]))
        if len(args) == 1 and not isinstance(args[0], (str, bytes)) and hasattr(args[0], "__len__"):
            from ._creation import tensor

            return tensor(args[0], dtype=cls.dtype, device=cls._device_type)
        given = ", ".join(type(a).__name__ for a in args)
        raise TypeError(
            f"{cls.__module__}.{cls.__name__}() takes sizes (ints), an ember.Size, a sequence of data or a "
            f"tensor, but got ({given})"
        )


def _check_device(cls, device):
    if device is not None:
        from ._device import canonical_device

        if canonical_device(device).type != cls._device_type:
            raise RuntimeError(
                f"legacy constructor {cls.__module__}.{cls.__name__} expects device type "
                f"{cls._device_type}, but device type {canonical_device(device).type} was passed"
            )
    if cls._device_type == "cuda":
        from . import cuda

        if not cuda.is_available():
            raise TypeError(f"type {cls.__module__}.{cls.__name__} not available: CUDA is not available here")


def _empty(cls, size):
    from ._ops import _registry

    return _registry.get("empty")(*size, dtype=cls.dtype, device=cls._device_type)


def _alias(cls, t):
    if t.dtype is not cls.dtype or t.device.type != cls._device_type:
        raise TypeError(
            f"{cls.__module__}.{cls.__name__}(tensor) expects a tensor of dtype {cls.dtype} on "
            f"{cls._device_type}, got one of dtype {t.dtype} on {t.device}; use t.to(...) or t.type(...) to convert"
        )
    return t.view(t.shape)  # a new tensor object sharing t's storage, as PyTorch returns


def _make_type(dtype, device_type, module):
    name = TYPE_NAMES[dtype]
    doc = (
        f"Legacy tensor type for {dtype} tensors on {device_type}: ``{module}.{name}(*sizes)``, "
        f"``{module}.{name}(data)``, ``isinstance(t, {module}.{name})``, ``t.type({module}.{name})``."
    )
    namespace = {
        "__module__": module,
        "__doc__": doc,
        "dtype": dtype,
        "is_cuda": device_type == "cuda",
        "is_sparse": False,
        "_device_type": device_type,
    }
    return _LegacyTensorType(name, (), namespace)


def _make_types(device_type, module):
    return {TYPE_NAMES[d]: _make_type(d, device_type, module) for d in _CLASS_DTYPES}


CPU_TYPES = _make_types("cpu", "ember")
CUDA_TYPES = _make_types("cuda", "ember.cuda")

FloatTensor = CPU_TYPES["FloatTensor"]
DoubleTensor = CPU_TYPES["DoubleTensor"]
HalfTensor = CPU_TYPES["HalfTensor"]
BFloat16Tensor = CPU_TYPES["BFloat16Tensor"]
ByteTensor = CPU_TYPES["ByteTensor"]
CharTensor = CPU_TYPES["CharTensor"]
ShortTensor = CPU_TYPES["ShortTensor"]
IntTensor = CPU_TYPES["IntTensor"]
LongTensor = CPU_TYPES["LongTensor"]
BoolTensor = CPU_TYPES["BoolTensor"]


def is_legacy_type(obj):
    """Whether ``obj`` is one of the legacy tensor type classes."""
    return type(obj) is _LegacyTensorType


def set_default_tensor_type(t):
    """Set the default floating-point dtype through a legacy type (deprecated in PyTorch 2.1).

    ``ember.set_default_tensor_type(ember.DoubleTensor)`` is
    ``ember.set_default_dtype(ember.float64)``. Prefer :func:`ember.set_default_dtype`.

    Args:
        t: a CPU floating-point legacy type or its name (``'ember.DoubleTensor'``;
            ``'torch.DoubleTensor'`` is accepted too).

    Raises:
        TypeError: for a type that is not floating point, or not a legacy type.
        RuntimeError: for a CUDA type: ember has no default device (create tensors with
            ``device=`` or move them with ``.to()``).
    """
    warnings.warn(
        "ember.set_default_tensor_type() is deprecated, as in PyTorch 2.1; use ember.set_default_dtype()",
        UserWarning,
        stacklevel=2,
    )
    if isinstance(t, str):
        dtype, device_type = parse_type_string(t)
    elif is_legacy_type(t):
        dtype, device_type = t.dtype, t._device_type
    else:
        raise TypeError(f"set_default_tensor_type: expected a legacy tensor type or its name, got {t!r}")
    if not dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    if device_type != "cpu":
        raise RuntimeError(
            f"set_default_tensor_type: ember has no default device, so {device_type} types cannot be the "
            "default; pass device= to creation functions or move tensors with .to()"
        )
    D.set_default_dtype(dtype)


def typename(obj):
    """A name for the type of ``obj``: a tensor's legacy type (``'ember.FloatTensor'``), else the
    type's module and qualified name (``'ember.nn.modules.linear.Linear'``; builtins bare: ``'int'``).

    A class names itself. This is PyTorch's ``torch.typename``.

    Example:
        >>> import ember
        >>> ember.typename(ember.ones(2)), ember.typename(1)
        ('ember.FloatTensor', 'int')
    """
    if isinstance(obj, Tensor):
        return obj.type()
    kind = obj if isinstance(obj, type) else type(obj)
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", kind.__name__)
    return name if module in ("builtins", "") else f"{module}.{name}"
