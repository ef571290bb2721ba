"""ember.nn.functional: the dropout family (``dropout``, ``dropout1d/2d/3d``, ``alpha_dropout``, ...).

Composite ops with fused CPU kernels; see :mod:`ember._ops._nn_common` for the
conventions shared by all ``nn.functional`` op modules.
"""

from __future__ import annotations

import functools
import math
import sys
import warnings

import numpy as np

from .. import _dtype as D
from .._autograd_functions import function_class
from .._meta import MetaArray
from .._tensor import Tensor
from ._dispatch import PLAIN_TENSOR_TYPES, ops_intercepted
from ._dispatch import state as _dispatch_state
from ._nn_common import (
    _E,
    _NN_ONLY_RANDOM,
    _NN_RANDOM,
    _check_tensor,
    _composite,
    _compute,
    _finish,
    _not_implemented,
    _number,
)
from ._pointwise_helpers import _torch_name
from .nn_activation import _inplace_result, _scalar_as
from .random import _default_noise

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}


_SELU_NEG_SATURATION = 1.7580993408473766  # -alpha * scale of SELU: where SELU saturates for large negatives


def _check_dropout_p(p):
    p = _number("dropout", "p", p, 2)
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def _dropout_draws(input, p, training):
    """Whether a dropout call draws random numbers (otherwise it is the identity or a multiplication by 0)."""
    return training and 0 < p < 1 and input.numel() > 0


def _dropout_meta_common(op, input, p, training, noise_shape):
    """Checks shared by the dropout family; ``noise_shape(input)`` gives the mask shape when it draws."""
    p = _check_dropout_p(p)
    if _dropout_draws(input, p, training):
        if input.dtype.is_complex:
            raise _not_implemented("bernoulli_scalar_cpu_", input.dtype)
        if input.dtype.category < D.FLOATING:
            raise RuntimeError(f"result type Float can't be cast to the desired output type {_torch_name(input.dtype)}")
        noise_shape(input)
    return MetaArray(input._data.shape, input._data.dtype)


def _elementwise_noise(input):
    return tuple(input.shape)


def _feature_noise(input):
    """Mask shape of feature (channel-wise) dropout: one draw per (batch, channel)."""
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return tuple(input.shape[:2]) + (1,) * (input.ndim - 2)


def _unbatched_feature_noise(input):
    """Mask shape of feature dropout on an input without a batch dim (dim 0 is the channel)."""
    if input.ndim < 1:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return (input.shape[0],) + (1,) * (input.ndim - 1)


def _dropout_np(input, p, training, inplace, noise_shape, alpha):
    """The dropout kernel: one mask of ``noise_shape`` (broadcast over ``input``) from the default generator."""
    data = input._data
    if not _dropout_draws(input, p, training):
        if training and p == 1 and data.size:
            return _finish(input, data * _scalar_as(0, data.dtype), inplace)
        return input  # the identity: input itself, as PyTorch returns it (no copy)
    x = _compute(data)
    keep = 1.0 - p
    noise = (_default_noise(x).random(noise_shape(input)) < keep).astype(x.dtype)
    with np.errstate(all="ignore"):
        if alpha:
            a = 1.0 / math.sqrt((_SELU_NEG_SATURATION**2 * p + 1) * keep)
            shift = noise - np.asarray(1, x.dtype)
            shift *= np.asarray(_SELU_NEG_SATURATION * a, x.dtype)
            shift += np.asarray(_SELU_NEG_SATURATION * a * p, x.dtype)
            noise *= np.asarray(a, x.dtype)
            out = x * noise
            out += shift
        else:
            noise /= np.asarray(keep, x.dtype)
            out = x * noise
    return _finish(input, out, inplace)


def _dropout_values(input, p, training, inplace, noise_shape, alpha):
    """The dropout decomposition, in ember ops (the mask from ``ember.bernoulli``).

    Plain dropout is ``input * (mask / keep)`` (``mask`` of 0s and 1s in ``input``'s dtype, ``keep = 1 - p``),
    which autograd records on every device: the backward pass is then one multiplication by the saved
    ``mask / keep``. On cuda when nothing is recorded, the same values come from
    ``(input * bool_mask) * scale`` (:func:`_dropout_scale`): the bool mask is written in one pass of
    1 byte per element and both products are single fused passes, 18 bytes of memory traffic per element
    against 24. The GPU's bernoulli draws the same mask for either dtype, so the two forms agree (bit for bit
    in float32 and float64): a kept element is ``x * scale`` rounded once, a dropped one ``x * 0``.

    Plain dropout of a contiguous cuda tensor skips both forms: one kernel draws the same mask and writes
    the same values (:func:`_cuda_fused_dropout`, :mod:`ember.cuda.kernels.dropout`).
    """
    if not _dropout_draws(input, p, training):
        if training and p == 1 and input.numel():
            return _inplace_result("dropout", input, input * 0, inplace)
        return input  # the identity (evaluation, p = 0, no elements): input itself, as in PyTorch
    keep = 1.0 - p
    if not alpha and input.device.type == "cuda":
        fused = _cuda_fused_dropout(input, keep, inplace, noise_shape)
        if fused is not None:
            return fused
    if not alpha and input.device.type == "cuda" and not _records_grad(input):
        mask = _E.bernoulli(_E.empty(noise_shape(input), dtype=D.bool, device=input.device), keep)
        return _inplace_result("dropout", input, (input * mask) * _dropout_scale(input.dtype, keep), inplace)
    noise = _E.bernoulli(_E.empty(noise_shape(input), dtype=input.dtype, device=input.device), keep)
    if alpha:
        a = 1.0 / math.sqrt((_SELU_NEG_SATURATION**2 * p + 1) * keep)
        shift = (noise - 1) * (_SELU_NEG_SATURATION * a) + _SELU_NEG_SATURATION * a * p
        out = input * (noise * a) + shift
    else:
        out = input * (noise / keep)
    return _inplace_result("dropout", input, out, inplace)


# -- cuda: one kernel (ember.cuda.kernels.dropout) ----------------------------------------------------------


def _cuda_fused_dropout(input, keep, inplace, noise_shape):
    """Elementwise dropout of a cuda tensor in one kernel (:mod:`ember.cuda.kernels.dropout`), or None where
    that kernel does not apply (the decomposition then runs).

    It draws one Philox key from the GPU's default generator, as ``ember.bernoulli`` does, and gives the
    unrecorded decomposition's values bit for bit: the same mask, each kept element ``x * scale`` rounded once
    (recorded float16/bfloat16 dropout gets them too; on the GPU its ``mask / keep`` rounded the scale through
    float32, see docs/internals.rst). Without
    autograd recording it writes the output only (4 bytes of traffic per bfloat16 element against the
    decomposition's 10, one launch against three); in place it writes into ``input``. When autograd records,
    the output comes from an ``ember.autograd.Function`` (``FusedDropout``, :func:`_fused_forward`) that also
    keeps the bool mask, so the backward pass is one kernel, ``(grad * mask) * scale``.

    Taken for plain cuda tensors of float32/float64/float16/bfloat16, C-contiguous, with a mask of the
    input's own shape (``dropout``, not the feature dropouts), seen by no dispatch mode but a recorder (the
    profiler) and not while ``ember.compile`` traces: modes and tracing see fake or batched tensors, whose
    arrays the kernel cannot read, so they run the decomposition's ops.
    """
    kernels = _cuda_kernels(input)
    if kernels is None or noise_shape(input) != tuple(input.shape):
        return None
    records = _records_grad(input)
    function = function_class("FusedDropout", _fused_forward, _fused_backward) if records else None
    if records and function is None:
        return None  # (without ember-autograd nothing records; kept for safety)
    scale = _cuda_scale(input.dtype, keep)
    with _cuda_device(input):
        key = _cuda_noise_key(input)
        if function is not None:
            out = function.apply(input, keep, scale, key)
            return _inplace_result("dropout", input, out, inplace)
        data = input._data
        out, _ = kernels.forward(data, keep, scale, key, out=data if inplace else None)
    if inplace:
        input._bump_version()
        return input
    return Tensor._make(out, input._device)


def _cuda_kernels(input):
    """:mod:`ember.cuda.kernels.dropout` where its kernel may run on ``input`` (see :func:`_cuda_fused_dropout`),
    else None."""
    if type(input) not in PLAIN_TENSOR_TYPES or ops_intercepted():
        return None
    dynamo = sys.modules.get("ember._dynamo")  # not imported: nothing compiles (and no failed import per call)
    if dynamo is not None and dynamo.is_compiling():
        return None
    from ..cuda.kernels import dropout as kernels

    return kernels if kernels.supported(input._data) else None


@functools.lru_cache(maxsize=64)
def _cuda_scale(dtype, keep):
    """:func:`_dropout_scale`, remembered (a training loop asks for a few values only, about 2 µs each)."""
    return _dropout_scale(dtype, keep)


def _cuda_device(input):
    """A context in which kernels launch on ``input``'s GPU."""
    from ..cuda._runtime import cupy_module

    return cupy_module().cuda.Device(input._device.index)


def _cuda_noise_key(input):
    """One Philox key from the default generator of ``input``'s GPU: the key ``ember.bernoulli`` would take
    (the same draw, so the mask, and the generator's next state, are the decomposition's)."""
    from ..cuda.random import DeviceNoise, generator_for

    return DeviceNoise(generator_for(input._device.index)).key()


def _fused_forward(ctx, input, keep, scale, key):
    from ..cuda.kernels import dropout as kernels

    out, mask = kernels.forward(input._data, keep, scale, key, with_mask=True)
    ctx.mask, ctx.scale = mask, scale  # the bool mask (1 byte per element): all the backward reads
    return Tensor._make(out, input._device)


def _fused_backward(ctx, grad):
    """The gradient of ``(x * mask) * scale``, ``(grad * mask) * scale``: one kernel, or, when the backward
    records (``create_graph``) or a mode other than a recorder watches, the same in ember ops on the mask
    (differentiable again)."""
    mask = ctx.mask
    if _dispatch_state.grad_enabled or ops_intercepted() or type(grad) not in PLAIN_TENSOR_TYPES:
        return (grad * Tensor._make(mask, grad._device)) * ctx.scale, None, None, None
    from ..cuda.kernels import dropout as kernels

    with _cuda_device(grad):
        return Tensor._make(kernels.backward(grad._data, mask, ctx.scale), grad._device), None, None, None


def _records_grad(input):
    """Whether autograd records ops on ``input`` here (grad mode on and ``input`` requires grad)."""
    return _dispatch_state.grad_enabled and input.requires_grad


def _dropout_scale(dtype, keep):
    """``1 / keep`` rounded as ``mask / keep`` rounds it in ember ``dtype`` (a float dtype), as a Python
    float: exact in ``dtype``, so multiplying by it rounds once, as multiplying by ``mask / keep`` does."""
    np_dtype = dtype.numpy_dtype
    with np.errstate(all="ignore"):  # a keep that rounds to 0 (float16) gives inf, as mask / keep does
        return float(np.asarray(1, np_dtype) / np.asarray(keep, np_dtype))


def _dropout_doc(what, extra="", example=None):
    if example is not None:
        extra += f"""

    Example:
        >>> import ember
        >>> ember.nn.functional.{example}(ember.ones(2, 2, 2), p=0.5, training=False)
        tensor([[[1., 1.],
                 [1., 1.]],
        <BLANKLINE>
                [[1., 1.],
                 [1., 1.]]])"""
    return f"""{what}

    Each kept element is scaled so that the expected value is unchanged; the mask
    is drawn from :data:`ember.default_generator` (through ``ember.bernoulli``).{extra}

    Args:
        input (Tensor): the input; floating point when it draws a mask.
        p (float): probability of zeroing, in ``[0, 1]``.
        training (bool): apply dropout; when False (or when ``p`` is 0) the result is ``input`` itself, as
            in PyTorch (no copy: a later in-place write to it writes ``input``).
        inplace (bool): write the result into ``input`` and return it.

    Returns:
        Tensor: same shape and dtype as ``input``.

    Raises:
        ValueError: if ``p`` is outside ``[0, 1]``.
        RuntimeError: for an integer or bool input when a mask is drawn, or a wrong number of dims.
    """


def _dropout_meta(input, p=0.5, training=True, inplace=False):
    _check_tensor("dropout", "input", input)
    return _dropout_meta_common("dropout", input, p, training, _elementwise_noise)


_dropout_meta.__doc__ = _dropout_doc(
    "Zero each element of ``input`` with probability ``p`` and scale the rest by ``1 / (1 - p)``.",
    """

    Example:
        >>> import ember
        >>> ember.dropout(ember.ones(4), p=0.5, training=False)
        tensor([1., 1., 1., 1.])""",
)



def _dropout1d_noise(input):
    return _feature_noise(input) if input.ndim == 3 else _unbatched_feature_noise(input)


def _dropout1d_meta(input, p=0.5, training=True, inplace=False):
    _check_tensor("dropout1d", "input", input)
    _check_dropout_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d exists to "
            "provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an optional "
            "batch dimension (i.e. 2D or 3D inputs)."
        )
    return _dropout_meta_common("dropout1d", input, p, training, _dropout1d_noise)


_dropout1d_meta.__doc__ = _dropout_doc(
    "Zero whole channels of a ``(N, C, L)`` or ``(C, L)`` input, each with probability ``p``.", example="dropout1d"
)


def _warn_feature_dims(op, ndim, allowed, spatial):
    if ndim not in allowed:
        warnings.warn(
            f"{op}: Received a {ndim}-D input to {op}, which is deprecated and will result in an error in a future "
            f"release. To retain the behavior and silence this warning, please use dropout instead. Note that {op} "
            f"exists to provide channel-wise dropout on inputs with {spatial} spatial dimensions, a channel dimension, "
            f"and an optional batch dimension (i.e. {allowed[0]}D or {allowed[1]}D inputs).",
            UserWarning, stacklevel=4,
        )


def _dropout2d_meta(input, p=0.5, training=True, inplace=False):
    _check_tensor("dropout2d", "input", input)
    _check_dropout_p(p)
    _warn_feature_dims("dropout2d", input.ndim, (3, 4), 2)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior is "
            "desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior will change "
            "in a future release to interpret the input as one without a batch dimension, i.e. shape (C, H, W). To "
            "maintain the 1D channel-wise dropout behavior, please switch to using dropout1d instead.",
            UserWarning, stacklevel=4,
        )
    return _dropout_meta_common("dropout2d", input, p, training, _feature_noise)


_dropout2d_meta.__doc__ = _dropout_doc(
    "Zero whole channels of a ``(N, C, H, W)`` input, each with probability ``p``.",
    "\n\n    A 3-D input is taken as ``(N, C, L)`` (with a warning), as PyTorch does.", example="dropout2d"
)


def _dropout3d_noise(input):
    return _feature_noise(input) if input.ndim == 5 else _unbatched_feature_noise(input)


def _dropout3d_meta(input, p=0.5, training=True, inplace=False):
    _check_tensor("dropout3d", "input", input)
    _check_dropout_p(p)
    _warn_feature_dims("dropout3d", input.ndim, (4, 5), 3)
    return _dropout_meta_common("dropout3d", input, p, training, _dropout3d_noise)


_dropout3d_meta.__doc__ = _dropout_doc(
    "Zero whole channels of a ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input, each with probability ``p``.",
    example="dropout3d",
)


def _alpha_dropout_meta(input, p=0.5, training=False, inplace=False):
    _check_tensor("alpha_dropout", "input", input)
    return _dropout_meta_common("alpha_dropout", input, p, training, _elementwise_noise)


_alpha_dropout_meta.__doc__ = _dropout_doc(
    "Alpha dropout (Klambauer et al., 2017): dropped elements are set to SELU's negative saturation value.",
    "\n\n    An affine map then restores the mean and variance of inputs with zero mean and unit variance.",
    example="alpha_dropout",
)


def _feature_alpha_dropout_meta(input, p=0.5, training=False, inplace=False):
    _check_tensor("feature_alpha_dropout", "input", input)
    return _dropout_meta_common("feature_alpha_dropout", input, p, training, _feature_noise)


_feature_alpha_dropout_meta.__doc__ = _dropout_doc(
    "Alpha dropout of whole channels (dim 1) of ``input``; see :func:`ember.alpha_dropout`.",
    example="feature_alpha_dropout",
)


def _define_dropout(name, meta, noise_shape, alpha, tags):
    training_default = meta.__defaults__[1]

    def cpu(input, p=0.5, training=training_default, inplace=False):
        return _dropout_np(input, p, training, inplace, noise_shape, alpha)

    def decomposition(input, p=0.5, training=training_default, inplace=False):
        return _dropout_values(input, p, training, inplace, noise_shape, alpha)

    return _composite(name, meta, cpu=cpu, decomposition=decomposition, tags=tags)


dropout = _define_dropout("dropout", _dropout_meta, _elementwise_noise, False, _NN_RANDOM)
dropout1d = _define_dropout("dropout1d", _dropout1d_meta, _dropout1d_noise, False, _NN_ONLY_RANDOM)
dropout2d = _define_dropout("dropout2d", _dropout2d_meta, _feature_noise, False, _NN_ONLY_RANDOM)
dropout3d = _define_dropout("dropout3d", _dropout3d_meta, _dropout3d_noise, False, _NN_ONLY_RANDOM)
alpha_dropout = _define_dropout("alpha_dropout", _alpha_dropout_meta, _elementwise_noise, True, _NN_RANDOM)
feature_alpha_dropout = _define_dropout(
    "feature_alpha_dropout", _feature_alpha_dropout_meta, _feature_noise, True, _NN_RANDOM
)
