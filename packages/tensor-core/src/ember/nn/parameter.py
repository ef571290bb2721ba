"""``Parameter``, ``Buffer`` and their uninitialized forms, PyTorch's ``torch.nn.parameter``.

A :class:`Parameter` is a :class:`ember.Tensor` subclass that a :class:`ember.nn.Module` registers
as a parameter when it is assigned as an attribute. It shares its data with the tensor it was
made from and opts out of ``__ember_function__`` overrides, so ops on it run as on a plain tensor
and return plain tensors.
"""

from __future__ import annotations

from .._ops._dispatch import _disabled_ember_function, register_plain_tensor_type
from .._tensor import Tensor

__all__ = [
    "Parameter",
    "UninitializedParameter",
    "is_lazy",
    "Buffer",
    "UninitializedBuffer",
    "UninitializedTensorMixin",
]


def _empty(device=None, dtype=None):
    from .. import empty

    return empty(0, device=device, dtype=dtype)


def _make_subclass(cls, data, requires_grad):
    """A ``cls`` instance sharing ``data``'s storage, as a fresh leaf (``torch.Tensor._make_subclass``)."""
    t = data.detach().as_subclass(cls)
    t._grad = None
    t._grad_fn = None
    t._output_nr = 0
    t._view_info = None
    t._grad_accumulator = None
    t._requires_grad = False
    return t.requires_grad_(requires_grad)  # refuses integer and bool data, as PyTorch's Parameter does


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning it to a :class:`Module` attribute registers it.

    Args:
        data (Tensor, optional): the parameter's values; shared, not copied. Default: an empty
            float tensor of shape ``(0,)``.
        requires_grad (bool, optional): whether the parameter requires gradient. ``ember.no_grad()``
            does not change it. Default: ``True``.

    Example:
        >>> import ember
        >>> p = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
        >>> p
        Parameter containing:
        tensor([1., 2.], requires_grad=True)
        >>> type(p * 2).__name__
        'Tensor'
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _empty()
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be an ember.Tensor, got {type(data).__name__}")
        return _make_subclass(cls, data, requires_grad)

    def __init__(self, data=None, requires_grad=True):
        pass  # everything is done in __new__ (Tensor.__init__ refuses direct construction)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.data.clone(), self.requires_grad)
        memo[id(self)] = result
        return result

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.data, self.requires_grad))

    __ember_function__ = classmethod(_disabled_ember_function)


# A Parameter overrides nothing: the dispatcher's hot loop and autograd's recorders take it as a plain tensor.
register_plain_tensor_type(Parameter)


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


class UninitializedTensorMixin:
    """Shared behaviour of :class:`UninitializedParameter` and :class:`UninitializedBuffer`.

    Only dtype/device conversions, ``copy_``, ``size`` queries and :meth:`materialize` are allowed;
    any other op raises ``ValueError``.
    """

    _allowed_ops = frozenset({"_to_copy", "copy_", "detach", "empty", "empty_like"})

    def materialize(self, shape, device=None, dtype=None):
        """Turn this into a real ``cls_to_become`` of ``shape`` (uninitialized values), in place.

        Args:
            shape (tuple[int]): the shape of the materialized tensor.
            device (ember.device, optional): default: this tensor's device.
            dtype (ember.dtype, optional): default: this tensor's dtype.
        """
        from .. import empty

        if device is None:
            device = self.data.device
        if dtype is None:
            dtype = self.data.dtype
        self.data = empty(shape, device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. "
            "This error usually happens in `load_state_dict` when trying to load "
            "an uninitialized parameter into an initialized one. "
            "Call `forward` to initialize the parameters before accessing their attributes."
        )

    def share_memory_(self):
        raise RuntimeError(
            "Can't share memory on an uninitialized parameter or buffer. "
            "Call `forward` to initialize the parameters before calling "
            "`module.share_memory()`."
        )

    def __repr__(self):
        return f"<{self.__class__.__name__}>"

    def __reduce_ex__(self, protocol):
        return (self.__class__, (self.requires_grad,))

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "name", None) in cls._allowed_ops:
            from ..overrides import disable_ember_function

            with disable_ember_function():
                return func(*args, **(kwargs or {}))
        raise ValueError(
            f"Attempted to use an uninitialized parameter in {func}. "
            "This error happens when you are using a `LazyModule` or "
            f"explicitly manipulating `ember.nn.parameter.{cls.__name__}` "
            "objects. When using LazyModules Call `forward` with a dummy batch "
            "to initialize the parameters before calling ember functions"
        )


def is_lazy(param):
    """Whether ``param`` is an :class:`UninitializedParameter` or :class:`UninitializedBuffer`."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet (used by ``Lazy*`` modules).

    Args:
        requires_grad (bool, optional): Default: ``True``.
        device (ember.device, optional): the device it materializes on by default.
        dtype (ember.dtype, optional): the dtype it materializes with by default.
    """

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return _make_subclass(cls, _empty(device, dtype), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.requires_grad, self.data.device, self.data.dtype)
        memo[id(self)] = result
        return result


class _BufferMeta(type):
    """``isinstance(t, Buffer)`` is True for tensors flagged ``_is_buffer`` (what ``Buffer(...)`` returns)."""

    def __instancecheck__(cls, instance):
        if cls is Buffer and isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False):
            return True
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A tensor that is module state but not a parameter (``BatchNorm``'s ``running_mean``).

    Assigning it to a :class:`Module` attribute registers it as a buffer. ``Buffer(data)`` returns a
    plain tensor (a detached alias of ``data``) flagged as a buffer, as in PyTorch.

    Args:
        data (Tensor, optional): the buffer's values (shared). Default: an empty tensor.
        persistent (bool, optional): whether it is part of the module's ``state_dict``. Default: ``True``.
    """

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = _empty()
        t = data.detach()
        t._requires_grad = data.requires_grad
        t.persistent = persistent
        t._is_buffer = True
        return t

    __ember_function__ = classmethod(_disabled_ember_function)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet; materializes into a plain tensor."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        t = _make_subclass(cls, _empty(device, dtype), requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass
