"""``Variable``: PyTorch's pre-0.4 wrapper of a tensor, kept for old programs (``torch.autograd.Variable``).

Since PyTorch 0.4 every tensor is a Variable: ``Variable(t)`` returns a tensor that shares
``t``'s data (detached from ``t``'s graph), with ``requires_grad`` as asked, and
``isinstance(t, Variable)`` is true for every tensor. Ember keeps exactly that.
"""

from __future__ import annotations

from ember._tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)

    def __call__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            raise ValueError("Variable(volatile=True) was removed in PyTorch 0.4; use `with ember.no_grad():` instead")
        return data.detach().requires_grad_(requires_grad)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False)``: ``data`` detached, sharing its memory (see the module docstring).

    Args:
        data (Tensor): the tensor to wrap.
        requires_grad (bool): whether the result is a leaf that requires grad.

    Raises:
        TypeError: if ``data`` is not a tensor.

    Example:
        >>> import ember
        >>> from ember.autograd import Variable
        >>> x = ember.ones(2)
        >>> v = Variable(x, requires_grad=True)
        >>> v.requires_grad, x.requires_grad, isinstance(x, Variable)
        (True, False, True)
    """
