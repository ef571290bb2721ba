"""Gradient clipping, PyTorch's ``torch.nn.utils.clip_grad``.

:func:`clip_grad_norm_` rescales the gradients of a set of parameters so that their total norm (the
norm of the per-gradient norms, as if every gradient were flattened into one vector) is at most
``max_norm``; :func:`clip_grad_value_` clamps every gradient element into ``[-clip_value, clip_value]``.
:func:`get_total_norm` and :func:`clip_grads_with_norm_` are the two halves of :func:`clip_grad_norm_`.

``foreach=True`` computes the per-tensor norms, the scaling and the clamping with the ``ember._foreach_*``
list ops (``ember._ops.foreach``); ``foreach=None`` (the default) does too. Both paths give the same bits.

On the GPU, :func:`clip_grad_norm_` of float32/float64 gradients of one device (2-norm, ``foreach`` None or
True) runs three fused kernels (:mod:`ember.cuda.kernels.multi_tensor`): the norm and the clip coefficient
``min(max_norm / (total + 1e-6), 1)`` stay on the device, nothing is read back (the host does not wait for the
GPU) unless ``error_if_nonfinite`` asks for the norm's value, as in PyTorch. Its squares are summed in float64,
so the norm may differ from the list ops' in the last bits.
"""

from __future__ import annotations

import functools
import types
import warnings

from ..._ops.foreach import _foreach_clamp_max_, _foreach_clamp_min_, _foreach_mul_, _foreach_norm

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _no_grad(func):
    """Run ``func`` under ``ember.no_grad()`` (a decorator that keeps the wrapped signature and docstring)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from ... import no_grad

        with no_grad():
            return func(*args, **kwargs)

    return wrapper


def _as_list(tensors):
    from ..._tensor import Tensor

    if isinstance(tensors, Tensor):
        return [tensors]
    return list(tensors)


@_no_grad
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Compute the ``norm_type``-norm of an iterable of tensors, as if they were concatenated into one vector.

    Args:
        tensors (Iterable[Tensor] or Tensor): the tensors (typically gradients), of any shapes.
        norm_type (float): order of the p-norm; ``float('inf')`` for the max-abs norm. Default: ``2.0``.
        error_if_nonfinite (bool): raise if the total norm is ``nan``, ``inf`` or ``-inf``. Default: ``False``.
        foreach (bool, optional): compute the per-tensor norms with ``ember._foreach_norm``
            (None, the default: yes). The result is the same either way.

    Returns:
        Tensor: a 0-dim tensor, the total norm (``ember.tensor(0.0)`` for no tensors).

    Raises:
        RuntimeError: if ``error_if_nonfinite`` and the total norm is not finite.

    Example:
        >>> import ember
        >>> from ember.nn.utils import get_total_norm
        >>> get_total_norm([ember.tensor([3.0]), ember.tensor([4.0])])
        tensor(5.)
    """
    from ... import stack, tensor

    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return tensor(0.0)
    first_device = tensors[0].device
    if foreach is None or foreach:
        norms = [n if n.device == first_device else n.to(first_device) for n in _foreach_norm(tensors, norm_type)]
    else:
        norms = [t.norm(norm_type).to(first_device) for t in tensors]
    total_norm = stack(norms).norm(norm_type)
    if error_if_nonfinite:
        _check_finite(total_norm, norm_type)
    return total_norm


@_no_grad
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    r"""Scale the gradients of ``parameters`` in place, given their precomputed total norm.

    Each gradient is multiplied by :math:`\min(\text{max\_norm} / (\text{total\_norm} + 10^{-6}), 1)`,
    so gradients are only ever scaled down.

    Args:
        parameters (Iterable[Tensor] or Tensor): tensors whose ``.grad`` is scaled; ``grad=None`` is skipped.
        max_norm (float): the maximum norm of the gradients.
        total_norm (Tensor): their total norm, e.g. from :func:`get_total_norm`.
        foreach (bool, optional): scale with ``ember._foreach_mul_`` (None, the default: yes); same result.

    Returns:
        None
    """
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    if len(grads) == 0:
        return
    clip_coef = max_norm / (total_norm + 1e-6)
    clip_coef_clamped = clip_coef.clamp(max=1.0)
    if foreach is None or foreach:
        devices = {g.device for g in grads}
        for device in devices:  # a list op per device, as the coefficient is moved once per device
            _foreach_mul_([g for g in grads if g.device == device], clip_coef_clamped.to(device))
    else:
        for g in grads:
            g.mul_(clip_coef_clamped.to(g.device))


@_no_grad
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the total gradient norm of an iterable of parameters in place.

    The norm is computed over all gradients together, as if they were concatenated into a single
    vector; if it exceeds ``max_norm`` every gradient is scaled by ``max_norm / (total_norm + 1e-6)``.
    Equivalent to :func:`get_total_norm` followed by :func:`clip_grads_with_norm_`.

    Args:
        parameters (Iterable[Tensor] or Tensor): tensors whose gradients are clipped.
        max_norm (float): max norm of the gradients.
        norm_type (float, optional): order of the p-norm; ``float('inf')`` for the max-abs norm.
            Default: ``2.0``.
        error_if_nonfinite (bool, optional): raise if the total norm is ``nan``, ``inf`` or ``-inf``.
            Default: ``False``.
        foreach (bool, optional): use the ``ember._foreach_*`` list ops (None, the default: yes); same result.

    Returns:
        Tensor: the total norm of the gradients before clipping (0-dim).

    Raises:
        RuntimeError: if ``error_if_nonfinite`` and the total norm is not finite.

    Example:
        >>> import ember
        >>> p = ember.nn.Parameter(ember.zeros(2))
        >>> p.grad = ember.tensor([3.0, 4.0])
        >>> ember.nn.utils.clip_grad_norm_([p], max_norm=1.0)
        tensor(5.)
        >>> p.grad
        tensor([0.6000, 0.8000])
    """
    from ..._tensor import Tensor

    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and len(parameters) == 0:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=3)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = None
    if foreach is None or foreach:
        total_norm = _fused_cuda_clip(grads, float(max_norm), float(norm_type))
    if total_norm is None:
        total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
        clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    elif error_if_nonfinite:
        _check_finite(total_norm, norm_type)  # (reads the norm back: a wait for the GPU, as in PyTorch)
    return total_norm


def _fused_cuda_clip(grads, max_norm, norm_type):
    """The 2-norm clip of plain CUDA gradients in three kernel launches, nothing read back
    (:mod:`ember.cuda.kernels.multi_tensor`): the total norm tensor, or None for other calls (other norms,
    devices, dtypes or layouts, tensor subclasses, dispatch modes), which take the list ops."""
    from ..._ops._dispatch import ops_intercepted
    from ..._tensor import Tensor

    if norm_type != 2.0 or not grads or ops_intercepted():
        return None
    if any(type(g) is not Tensor or g._device.type != "cuda" for g in grads):
        return None
    from ...cuda.kernels import multi_tensor

    arrays = [g._data for g in grads]
    if not multi_tensor.supported(arrays):
        return None
    norm = multi_tensor.clip_grad_norm_(arrays, max_norm)
    if norm is None:
        return None
    for g in grads:  # written in place, as the list op's mul_ would record
        g._bump_version()
    return Tensor._make(norm, grads[0]._device)


def _check_finite(total_norm, norm_type):
    if bool(total_norm.isnan() | total_norm.isinf()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from "
            "`parameters` is non-finite, so it cannot be clipped. To disable "
            "this error and scale the gradients by the non-finite norm anyway, "
            "set `error_if_nonfinite=False`"
        )


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_` (emits a ``FutureWarning``)."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@_no_grad
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element of ``parameters`` into ``[-clip_value, clip_value]``, in place.

    Args:
        parameters (Iterable[Tensor] or Tensor): tensors whose gradients are clipped.
        clip_value (float): the maximum absolute value allowed.
        foreach (bool, optional): clamp with ``ember._foreach_clamp_min_``/``_foreach_clamp_max_`` (None, the
            default: yes); the same values as one ``clamp_`` per gradient.

    Returns:
        None
    """
    parameters = _as_list(parameters)
    clip_value = float(clip_value)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    if foreach is None or foreach:
        _foreach_clamp_min_(grads, -clip_value)
        _foreach_clamp_max_(grads, clip_value)
    else:
        for g in grads:
            g.clamp_(min=-clip_value, max=clip_value)
