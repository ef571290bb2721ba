"""ember.nn.functional: the softmax family (``softmax``, ``log_softmax``, ``softmin``, ``gumbel_softmax``).

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._nn_common import (
    _C_FLOATS,
    _E,
    _HALF_TYPES,
    _NN,
    _NN_ONLY,
    _NN_ONLY_RANDOM,
    _check_negatable,
    _check_tensor,
    _composite,
    _compute,
    _contiguous,
    _int_arg,
    _not_implemented,
    _upcast,
)
from ._shapes import wrap_dim
from .random import _default_noise

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = ["softmax", "log_softmax"]
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


def _implicit_softmax_dim(ndim, op):
    warnings.warn(
        f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X as an argument.",
        UserWarning, stacklevel=5,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_args(op, input, dim, _stacklevel, dtype, *, warn=True):
    """Checked ``(dim, dtype)`` of a softmax-like call; ``dtype`` is the computation and result dtype."""
    _check_tensor(op, "input", input)
    if isinstance(_stacklevel, D.dtype) and dtype is None:  # torch.softmax(input, dim, dtype) positionally
        dtype = _stacklevel
    if dtype is not None and not isinstance(dtype, D.dtype):
        raise TypeError(f"{op}(): argument 'dtype' must be ember.dtype, not {type(dtype).__name__}")
    if dim is None:
        dim = _implicit_softmax_dim(input.ndim, op) if warn else (0 if input.ndim in (0, 1, 3) else 1)
    dim = wrap_dim(_int_arg(op, "dim", dim, 2), input.ndim)
    out = input.dtype if dtype is None else dtype
    if out.category != D.FLOATING:
        last = dim == input.ndim - 1 or input.ndim == 0
        kernel = "softmax_lastdim_kernel_impl" if last else "softmax_kernel_impl"
        if op == "log_softmax":
            kernel = "log_" + kernel
        raise _not_implemented(kernel, out)
    return dim, out


#: Rows of at most this many elements take ``ember._C.softmax_rows`` (one thread, float32: 65-element rows 3x
#: faster than the generic kernel, 1024-element rows 1.5x; longer rows keep the generic kernel).
_SHORT_ROW = 1024
_HAS_SOFTMAX_ROWS = hasattr(_C, "softmax_rows")  # an ember._C built before the row kernels lacks it


def _softmax_np(x, axis, log=False):
    """Softmax (or log-softmax) of the float array ``x`` along ``axis``, in ``x``'s dtype."""
    if x.ndim == 0:
        return _softmax_np(x.reshape(1), 0, log).reshape(())
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    if x.dtype in _C_FLOATS:
        if axis % x.ndim == x.ndim - 1 and x.shape[-1] <= _SHORT_ROW and _HAS_SOFTMAX_ROWS:
            # short rows (attention scores): csrc/nn_rows_backward.cpp's row kernel, without the ~0.5 us a
            # row that the generic kernel spends around its vector loops
            return _C.softmax_rows(_contiguous(x), log)
        return _C.softmax(_contiguous(x), axis % x.ndim, log)
    with np.errstate(all="ignore"):
        shifted = x - x.max(axis=axis, keepdims=True)
        if log:
            total = np.exp(shifted).sum(axis=axis, keepdims=True)
            shifted -= np.log(total)
            return shifted
        np.exp(shifted, out=shifted)
        shifted /= shifted.sum(axis=axis, keepdims=True)
        return shifted


def _softmax_meta(input, dim=None, _stacklevel=3, dtype=None):
    """Softmax along ``dim``: ``exp(x) / sum(exp(x))``, computed stably (the maximum is subtracted first).

    Args:
        input (Tensor): the logits.
        dim (int): the dimension the result sums to 1 along (an implicit choice is deprecated and warns).
        _stacklevel (int): ignored (PyTorch's warning plumbing); a dtype here is taken as ``dtype``.
        dtype (ember.dtype, optional): cast ``input`` to this floating dtype first; the result has it.

    Returns:
        Tensor: same shape as ``input``; dtype ``dtype`` or ``input``'s.

    Raises:
        NotImplementedError: if the computation dtype is not floating point.
        IndexError: if ``dim`` is out of range.

    Example:
        >>> import ember
        >>> ember.softmax(ember.tensor([1.0, 2.0, 3.0]), dim=0)
        tensor([0.0900, 0.2447, 0.6652])
    """
    _, out = _softmax_args("softmax", input, dim, _stacklevel, dtype)
    return MetaArray(input._data.shape, out.numpy_dtype)


def _softmax_kernels(op, *, log=False, negate=False):
    """The CPU kernel and the decomposition of ``op``: softmax, its log (``log``) or softmin (``negate``:
    the softmax of ``-input``, negated in ``input``'s dtype before the cast), one rule for the three ops."""

    def cpu(input, dim=None, _stacklevel=3, dtype=None):
        dim, out = _softmax_args(op, input, dim, _stacklevel, dtype, warn=False)
        data = np.negative(input._data) if negate else input._data
        return _softmax_np(_compute(data, out.numpy_dtype), dim, log).astype(out.numpy_dtype, copy=False)

    def decomposition(input, dim=None, _stacklevel=3, dtype=None):
        dim, out = _softmax_args(op, input, dim, _stacklevel, dtype, warn=False)
        return _softmax_values((-input if negate else input).to(out), dim, log)

    cpu.__name__, decomposition.__name__ = f"_{op}_cpu", f"_{op}_decomp"
    return cpu, decomposition


def _softmax_values(x, dim, log=False):
    dtype = x.dtype
    x = _upcast(x)
    shifted = x - _E.amax(x, dim, keepdim=True)
    if log:
        return (shifted - _E.log(_E.sum(_E.exp(shifted), dim, keepdim=True))).to(dtype)
    e = _E.exp(shifted)
    return (e / _E.sum(e, dim, keepdim=True)).to(dtype)


_softmax_cpu, _softmax_decomp = _softmax_kernels("softmax")
softmax = _composite(
    "softmax", _softmax_meta, cpu=_softmax_cpu, decomposition=_softmax_decomp, tags=_NN
)


def _log_softmax_meta(input, dim=None, _stacklevel=3, dtype=None):
    """Log of the softmax along ``dim``: ``x - logsumexp(x)``, computed stably.

    Args:
        input (Tensor): the logits.
        dim (int): the dimension to normalize along (an implicit choice is deprecated and warns).
        _stacklevel (int): ignored (PyTorch's warning plumbing); a dtype here is taken as ``dtype``.
        dtype (ember.dtype, optional): cast ``input`` to this floating dtype first; the result has it.

    Returns:
        Tensor: same shape as ``input``; dtype ``dtype`` or ``input``'s.

    Raises:
        NotImplementedError: if the computation dtype is not floating point.
        IndexError: if ``dim`` is out of range.

    Example:
        >>> import ember
        >>> ember.log_softmax(ember.tensor([1.0, 2.0, 3.0]), dim=0)
        tensor([-2.4076, -1.4076, -0.4076])
    """
    _, out = _softmax_args("log_softmax", input, dim, _stacklevel, dtype)
    return MetaArray(input._data.shape, out.numpy_dtype)


_log_softmax_cpu, _log_softmax_decomp = _softmax_kernels("log_softmax", log=True)
log_softmax = _composite(
    "log_softmax", _log_softmax_meta, cpu=_log_softmax_cpu, decomposition=_log_softmax_decomp,
    tags=_NN,
)


def _softmin_meta(input, dim=None, _stacklevel=3, dtype=None):
    """Softmax of ``-input`` along ``dim``: small values get large weights.

    Args:
        input (Tensor): any dtype but bool (``-input`` is taken in ``input``'s dtype).
        dim (int): the dimension the result sums to 1 along.
        _stacklevel (int): ignored (PyTorch's warning plumbing).
        dtype (ember.dtype, optional): cast ``-input`` to this floating dtype first; the result has it.

    Returns:
        Tensor: same shape as ``input``.

    Raises:
        RuntimeError: for a bool tensor.
        NotImplementedError: if the computation dtype is not floating point.

    Example:
        >>> import ember
        >>> ember.nn.functional.softmin(ember.tensor([1.0, 2.0, 3.0]), dim=0)
        tensor([0.6652, 0.2447, 0.0900])
    """
    _check_negatable(input)
    _, out = _softmax_args("softmin", input, dim, _stacklevel, dtype)
    return MetaArray(input._data.shape, out.numpy_dtype)


_softmin_cpu, _softmin_decomp = _softmax_kernels("softmin", negate=True)
softmin = _composite(
    "softmin", _softmin_meta, cpu=_softmin_cpu, decomposition=_softmin_decomp, tags=_NN_ONLY
)


def _gumbel_softmax_meta(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """Samples of the Gumbel-softmax distribution (Jang et al., 2016; Maddison et al., 2016).

    ``softmax((logits + g) / tau, dim)`` with ``g`` standard Gumbel noise drawn from
    :data:`ember.default_generator`. With ``hard=True`` the values are the one-hot
    vectors of the argmax (the straight-through estimator: ``y_hard - y + y``).

    Args:
        logits (Tensor): unnormalized log-probabilities; floating point.
        tau (float): the temperature.
        hard (bool): return one-hot samples.
        eps (float): deprecated, no effect (warns when changed).
        dim (int): the category dimension.

    Returns:
        Tensor: same shape and dtype as ``logits``.

    Raises:
        NotImplementedError: for non-floating ``logits``.

    Example:
        >>> import ember
        >>> y = ember.nn.functional.gumbel_softmax(ember.zeros(2, 5), hard=True)
        >>> y.sum(dim=-1)
        tensor([1., 1.])
    """
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", UserWarning, stacklevel=4)
    _check_tensor("gumbel_softmax", "logits", logits)
    dim, _ = _softmax_args("gumbel_softmax", logits, dim, 3, None, warn=False)
    return MetaArray(logits._data.shape, logits._data.dtype)


def _one_hot_argmax_np(y, axis):
    hard = np.zeros_like(y)
    index = np.expand_dims(np.argmax(y, axis=axis), axis)
    np.put_along_axis(hard, index, 1, axis=axis)
    return hard


def _gumbel_softmax_cpu(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    data = logits._data
    dim = wrap_dim(dim, data.ndim)
    noise = _default_noise(data).standard_exponential(data.shape).astype(data.dtype)
    x = _compute(data)
    with np.errstate(all="ignore"):
        g = (x - np.log(_compute(noise))) / np.asarray(tau, x.dtype)
    y = _softmax_np(g.astype(data.dtype), dim) if data.dtype in _HALF_TYPES else _softmax_np(g, dim)
    if hard and y.ndim:
        y_hard = _one_hot_argmax_np(y, dim)
        y = (y_hard - y) + y
    return y.astype(data.dtype, copy=False)


def _gumbel_softmax_decomp(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    gumbels = -_E.log(_E.exponential_(_E.empty_like(logits)))
    y = _E.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y
    index = _E.argmax(y, dim, keepdim=True)
    y_hard = _E.scatter(_E.zeros_like(logits), dim, index, 1.0)
    return y_hard - y.detach() + y


gumbel_softmax = _composite(
    "gumbel_softmax", _gumbel_softmax_meta, cpu=_gumbel_softmax_cpu,
    decomposition=_gumbel_softmax_decomp, tags=_NN_ONLY_RANDOM,
)
