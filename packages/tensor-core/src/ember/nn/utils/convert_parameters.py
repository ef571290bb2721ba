"""Flatten parameters into one vector and back, PyTorch's ``torch.nn.utils.convert_parameters``."""

from __future__ import annotations

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter's values, flattened and concatenated in iteration order.

    The result is differentiable with respect to the parameters (it is ``cat`` of their views).

    Args:
        parameters (Iterable[Tensor]): the parameters of a model, all on one device.

    Returns:
        Tensor: a 1-D tensor of ``sum(p.numel())`` elements.

    Raises:
        TypeError: if the parameters are on different devices.

    Example:
        >>> import ember
        >>> from ember.nn.utils import parameters_to_vector
        >>> parameters_to_vector([ember.ones(2, 2), ember.zeros(1)])
        tensor([1., 1., 1., 1., 0.])
    """
    from ... import cat

    param_device = None
    vec = []
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        vec.append(param.reshape(-1))
    return cat(vec)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into ``parameters`` (sets each ``param.data``; no autograd record).

    Args:
        vec (Tensor): a 1-D vector holding the values of all the parameters (as from
            :func:`parameters_to_vector`).
        parameters (Iterable[Tensor]): the parameters to overwrite, in the same order.

    Raises:
        TypeError: if ``vec`` is not a tensor, or the parameters are on different devices.
    """
    from ..._tensor import Tensor

    if not isinstance(vec, Tensor):
        raise TypeError(f"expected ember.Tensor, but got: {type(vec).__module__}.{type(vec).__qualname__}")
    param_device = None
    pointer = 0
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        num_param = param.numel()
        param.data = vec[pointer : pointer + num_param].view_as(param).data
        pointer += num_param


def _check_param_device(param, old_param_device):
    """Return the device of the first parameter, raising ``TypeError`` if ``param`` is on another one."""
    if old_param_device is None:
        return param.device
    if param.device != old_param_device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return old_param_device
