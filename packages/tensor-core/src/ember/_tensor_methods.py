"""Tensor methods and operators, attached from the op registry.

Most methods are ops called with the tensor as first argument
(``x.view(2, 3)`` is ``ember.view(x, 2, 3)``); :func:`install` turns every op
listed in an op module's ``METHODS`` into one (``ALIASES`` add other names,
``OPERATORS`` dunder methods). Operators and the few methods with
their own argument parsing (``to``, ``type``, ``new_*``) are written here.
"""

from __future__ import annotations

from . import _dtype as D
from ._device import canonical_device
from ._device import device as _device_cls
from ._indexing import getitem, setitem
from ._ops import _registry
from ._ops._dispatch import dispatch as _dispatch
from ._tensor import Tensor

__all__ = ["install"]


def _method_from_op(op):
    def method(self, *args, **kwargs):
        return _dispatch(op, (self, *args), kwargs)  # op(self, ...) without the Op.__call__ frame

    method.__name__ = method.__qualname__ = op.name
    method.__doc__ = f"See :func:`ember.{op.name}`."
    return method


def _binary_operators(add, sub, mul, div, eq, ne, lt, le, gt, ge, neg, abs_, logical_not):
    def rsub(self, other):
        return _dispatch(sub, (other, self), {})

    def rdiv(self, other):
        return _dispatch(div, (other, self), {})

    def iadd(self, other):
        return add.inplace(self, other)

    def isub(self, other):
        return sub.inplace(self, other)

    def imul(self, other):
        return mul.inplace(self, other)

    def idiv(self, other):
        return div.inplace(self, other)

    def invert(self):
        if self.dtype is not D.bool:
            bitwise_not = _registry.registry.get("bitwise_not")
            if bitwise_not is None:
                raise TypeError(f"~ on a {self.dtype} tensor needs bitwise_not")
            return bitwise_not(self)
        return logical_not(self)

    return {
        "__add__": lambda self, other: _dispatch(add, (self, other), {}),
        "__radd__": lambda self, other: _dispatch(add, (self, other), {}),
        "__iadd__": iadd,
        "__sub__": lambda self, other: _dispatch(sub, (self, other), {}),
        "__rsub__": rsub,
        "__isub__": isub,
        "__mul__": lambda self, other: _dispatch(mul, (self, other), {}),
        "__rmul__": lambda self, other: _dispatch(mul, (self, other), {}),
        "__imul__": imul,
        "__truediv__": lambda self, other: _dispatch(div, (self, other), {}),
        "__rtruediv__": rdiv,
        "__itruediv__": idiv,
        "__eq__": lambda self, other: eq(self, other),
        "__ne__": lambda self, other: ne(self, other),
        "__lt__": lambda self, other: lt(self, other),
        "__le__": lambda self, other: le(self, other),
        "__gt__": lambda self, other: gt(self, other),
        "__ge__": lambda self, other: ge(self, other),
        "__neg__": lambda self: _dispatch(neg, (self,), {}),
        "__pos__": lambda self: self,
        "__abs__": lambda self: abs_(self),
        "__invert__": invert,
    }


# -- to / type conversions ----------------------------------------------------------


def _parse_to(args, kwargs):
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, (str, _device_cls, int)) and not isinstance(a, bool):
            device = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        else:
            raise TypeError(f"to() received an invalid combination of arguments: {type(a).__name__}")
    non_blocking = kwargs.pop("non_blocking", False)
    copy = kwargs.pop("copy", False)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    return dtype, device, non_blocking, copy


def to(self, *args, **kwargs):
    """This tensor converted to a dtype and/or moved to a device.

    Accepts ``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``
    (other's dtype and device) and the keywords ``dtype``, ``device``,
    ``non_blocking``, ``copy``. Returns ``self`` when nothing changes and
    ``copy`` is False.

    Example:
        >>> import ember
        >>> ember.tensor([1.5, 2.5]).to(ember.int64)
        tensor([1, 2])
    """
    dtype, device, non_blocking, copy = _parse_to(args, dict(kwargs))
    target = canonical_device(device) if device is not None else self.device
    if not copy and (dtype is None or dtype is self.dtype) and target == self.device:
        return self
    return _registry.get("_to_copy")(self, dtype=dtype, device=target, non_blocking=non_blocking)


def _converter(dtype):
    def convert(self, memory_format=None):
        return to(self, dtype)

    convert.__doc__ = f"``self.to(ember.{dtype.name})``."
    return convert


_CONVERSIONS = {
    "bool": D.bool,
    "byte": D.uint8,
    "char": D.int8,
    "short": D.int16,
    "int": D.int32,
    "long": D.int64,
    "half": D.float16,
    "bfloat16": D.bfloat16,
    "float": D.float32,
    "double": D.float64,
    "cfloat": D.complex64,
    "cdouble": D.complex128,
}


def cpu(self, memory_format=None):
    """A copy of this tensor on the CPU (itself if already there)."""
    return to(self, "cpu")


def cuda(self, device=None, non_blocking=False, memory_format=None):
    """A copy of this tensor on a CUDA device (itself if already there)."""
    target = "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device)
    return to(self, target, non_blocking=non_blocking)


def type_(self, dtype=None, non_blocking=False):
    """The legacy type name (``'ember.FloatTensor'``, ``'ember.cuda.LongTensor'``) with no argument;
    else this tensor converted to ``dtype``: an ember.dtype, a legacy type (``ember.LongTensor``,
    ``ember.cuda.FloatTensor``, which also set the device) or its name (``'ember.LongTensor'``;
    PyTorch's ``'torch.LongTensor'`` is accepted too). See :mod:`ember._legacy_types`.

    Raises:
        ValueError: for a string that names no legacy type.
    """
    from . import _legacy_types as L

    if dtype is None:
        return L.type_string(self.dtype, self.device.type)
    if isinstance(dtype, str):
        dtype, device_type = L.parse_type_string(dtype)
    elif L.is_legacy_type(dtype):
        dtype, device_type = dtype.dtype, dtype._device_type
    else:
        return to(self, dtype, non_blocking=non_blocking)
    if device_type == self.device.type:
        return to(self, dtype, non_blocking=non_blocking)
    return to(self, device_type, dtype, non_blocking=non_blocking)


def contiguous(self, memory_format=None):
    """This tensor if it is contiguous, else a contiguous copy."""
    if self.is_contiguous():
        return self
    from ._ops.creation import contiguous_format

    return _registry.get("clone")(self, memory_format=contiguous_format)


def type_as(self, other):
    """This tensor converted to ``other``'s dtype."""
    return to(self, other.dtype)


# -- new_* ----------------------------------------------------------------------------


def _new_factory(name):
    factory = _registry.get(name)

    def new(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        return factory(
            *size,
            dtype=self.dtype if dtype is None else dtype,
            device=self.device if device is None else device,
            requires_grad=requires_grad,
        )

    new.__name__ = f"new_{name}"
    new.__doc__ = f"``ember.{name}(size)`` with this tensor's dtype and device unless given."
    return new


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """``ember.full(size, fill_value)`` with this tensor's dtype and device unless given.

    Raises:
        TypeError: if ``fill_value`` is not a number (or a zero-dim tensor).
    """
    from ._ops.creation import check_number_argument

    check_number_argument("new_full", "fill_value", 2, fill_value, tensor_ok=False)
    return _registry.get("full")(
        size,
        fill_value,
        dtype=self.dtype if dtype is None else dtype,
        device=self.device if device is None else device,
        requires_grad=requires_grad,
    )


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """``ember.tensor(data)`` with this tensor's dtype and device unless given."""
    from ._creation import tensor

    return tensor(
        data,
        dtype=self.dtype if dtype is None else dtype,
        device=self.device if device is None else device,
        requires_grad=requires_grad,
    )


# -- properties -------------------------------------------------------------------------


def _T(self):
    return _registry.get("permute")(self, *reversed(range(self.ndim)))


def _mT(self):
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return _registry.get("transpose")(self, -2, -1)


def _real_get(self):
    return _registry.get("real")(self)


def _real_set(self, value):
    _registry.get("real")(self).copy_(value)


def _imag_get(self):
    return _registry.get("imag")(self)


def _imag_set(self, value):
    _registry.get("imag")(self).copy_(value)


def _data_get(self):
    return _registry.get("detach")(self)


def _data_set(self, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
    self._set_data(value._data, value._storage)
    self._device = value._device


def detach_(self):
    """Detach this tensor from the autograd graph in place; returns ``self``."""
    if self._view_info is not None:
        raise RuntimeError("Can't detach views in-place. Use detach() instead.")
    self._grad_fn = None
    self._output_nr = 0
    self._requires_grad = False
    return self


def install():
    """Attach ops as Tensor methods, and the operators."""
    from ._ops import OP_MODULES

    reg = _registry.registry
    for module in OP_MODULES:
        for name in getattr(module, "METHODS", ()):
            setattr(Tensor, name, _method_from_op(reg[name]))
        for alias, name in getattr(module, "ALIASES", {}).items():
            setattr(Tensor, alias, _method_from_op(reg[name]))
    ops = [
        reg[n] for n in ("add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "neg", "abs", "logical_not")
    ]
    for name, fn in _binary_operators(*ops).items():
        setattr(Tensor, name, fn)
    for module in OP_MODULES:  # operators of later op families (``@``, ``**``, ``//``, ...)
        for name, fn in getattr(module, "OPERATORS", {}).items():
            setattr(Tensor, name, fn)
    Tensor.__hash__ = object.__hash__  # __eq__ is elementwise; hashing stays by identity
    Tensor.__getitem__ = getitem
    Tensor.__setitem__ = setitem
    Tensor.to = to
    Tensor.cpu = cpu
    Tensor.cuda = cuda
    Tensor.type = type_
    Tensor.type_as = type_as
    Tensor.contiguous = contiguous
    Tensor.detach_ = detach_
    for name, dtype in _CONVERSIONS.items():
        setattr(Tensor, name, _converter(dtype))
    for name in ("empty", "zeros", "ones"):
        setattr(Tensor, f"new_{name}", _new_factory(name))
    Tensor.new_full = new_full
    Tensor.new_tensor = new_tensor
    Tensor.T = property(_T)
    Tensor.mT = property(_mT)
    Tensor.real = property(_real_get, _real_set)
    Tensor.imag = property(_imag_get, _imag_set)
    Tensor.data = property(_data_get, _data_set)
