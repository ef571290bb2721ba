"""ember.nn.functional: convolution, pooling, padding, interpolation, grid sampling, pixel shuffle, fold/unfold.

The spatial ops of ``ember.nn.functional``, with PyTorch's names, arguments,
defaults, shapes and errors. Spatial dimensions come last: ``(N, C, L)``,
``(N, C, H, W)`` or ``(N, C, D, H, W)``, and most ops also take an unbatched
input without ``N``.

How they are built:

* ``convolution`` is the prim (PyTorch's ``torch.convolution``): forward and
  transposed, every dimensionality, groups; real dtypes only, as in PyTorch.
  ``conv1d``..``conv3d`` and ``conv_transpose1d``..``conv_transpose3d`` are
  composites over it (their decomposition handles unbatched inputs,
  ``padding='same'`` and complex inputs, as four real convolutions) with a
  fused CPU kernel.
* The CPU forward of float32 (and float16/bfloat16, computed in float32) runs
  ``ember._C.conv_avx512`` where the CPU has AVX-512: an implicit GEMM over
  the zero-padded input split into its stride phases, so that every kernel
  tap reads contiguous input; no im2col copy, OpenMP over output tiles (its
  register tile runs along output positions, or, on small images, along
  output channels; the kernel picks by an estimate of cost).
  Otherwise (float64, integers, complex, CPUs without AVX-512): im2col (a
  strided window view of the padded input, copied once) and one batched BLAS
  matmul per group, or a direct OpenMP kernel for thin groups (depthwise).
  Transposed convolution is that GEMM followed by col2im, the scatter-add of
  ``fold``; an ungrouped float32 one of stride 1 is the plain convolution by
  the flipped kernel (channels swapped) on the AVX-512 kernels.
* An ungrouped convolution with few output positions and a large kernel, the
  shape of a weight gradient (which the autograd formula computes as the
  input convolved with the output gradient, batch and channels swapped), runs
  ``ember._C.conv_weight_grad`` in float32 and float64 on AVX-512: the weight
  gradient computed directly, its register tile along the output channels and
  its long reduction over batch and positions kept in registers.
* Small matrix products run on one BLAS thread (``_blas_threads``): OpenBLAS's
  spinning workers would otherwise take the cores of the OpenMP kernels.
* ``max_pool1d``..``max_pool3d`` and ``adaptive_max_pool1d``..``3d`` are
  composites over the prims ``max_pool{n}d_with_indices`` and
  ``adaptive_max_pool{n}d_with_indices``, which return the argmax of every
  window with the maxima (autograd records those and keeps the indices for
  the backward, as PyTorch does). The composites keep CPU kernels of their
  own, so calls without autograd run as before (``max_pool{n}d`` without
  ``return_indices`` skips computing the indices).
* Pooling, fold/col2im, padding, grid sampling and the separable passes of
  ``interpolate`` are C++/OpenMP loops of ``ember._C`` over the ``N * C``
  planes (float32/float64, integers where PyTorch takes them); float16 and
  bfloat16 compute in float32 and cast back. The rest (index arithmetic,
  ``affine_grid``, ``pixel_shuffle``, ``channel_shuffle``, ``max_unpool``, uint8 resampling) is
  vectorised numpy, with no Python loop over elements.
* On the cuda device these ops run kernels over CuPy arrays (the "over xp"
  section below). Float convolutions there take a fast path: one im2col
  launch, one cuBLAS GEMM and one launch for the layout and bias, and, for
  the derivative of a backward pass that records nothing, a fused backward
  (the output gradient's rows and the bias gradient in one launch, then an
  im2col and a GEMM for the weight, a GEMM and a col2im for the input).
* Argument checking happens once per distinct call signature: the "plan"
  functions that check arguments and compute output shapes are memoised by
  the arguments' metadata (the meta function and the kernel both need them).
  The plans of ``conv{n}d`` and ``convolution``, asked four times per
  convolution under autograd, key their common calls (tensors, ints and
  tuples of ints) with a cheaper flat key.

Ops that PyTorch also has as ``torch.<name>`` are tagged ``"nn.functional"``;
the others (``pad``, ``interpolate``, ``grid_sample``, ``avg_pool2d``, ...) are
tagged ``"nn.functional_only"``. ``F.unfold`` (im2col) is registered as
``im2col``, since ``unfold`` is already the registry's name of ``Tensor.unfold``
(a view op); see :data:`NN_FUNCTIONAL_ALIASES`.
"""

from __future__ import annotations

import collections
import math
import numbers
import operator
import warnings

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from .._tensor import Tensor
from ._array_module import array_namespace as _array_namespace  # numpy or CuPy (the CUDA backend)
from ._blas_threads import matmul as _blas_matmul
from ._pointwise_helpers import _torch_name
from ._registry import COMPOSITE, defop, registry

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry

#: Ops of this module that are also Tensor methods (see ember._tensor_methods).
METHODS: list[str] = []
#: Tensor method aliases: alias name -> op name.
ALIASES: dict[str, str] = {}
#: ``ember.nn.functional`` names that differ from the registry name: public name -> op name.
NN_FUNCTIONAL_ALIASES: dict[str, str] = {"unfold": "im2col", "native_channel_shuffle": "channel_shuffle"}

_NN = ("nn.functional",)  # PyTorch has torch.<name> too
_NN_ONLY = ("nn.functional_only",)  # only torch.nn.functional.<name>

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_HALF_TYPES = D.numpy_dtype_set((D.float16, D.bfloat16))  # (learns bfloat16 when ml_dtypes loads)
_FLOATS = (D.float16, D.bfloat16, D.float32, D.float64)
_C_FLOAT = {_F32, _F64}


class _OpTable:
    """``_E.name`` is the registry op ``name``, looked up when a decomposition runs."""

    def __getattr__(self, name):
        try:
            return registry[name]
        except KeyError:
            raise NotImplementedError(f"this decomposition needs the op {name!r}, which is not registered") from None


_E = _OpTable()


# -- argument checks -----------------------------------------------------------------------------------


def _fmt(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _check_tensor(op, name, value, position=1):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not {type(value).__name__}")


def _not_implemented(kernel, dtype):
    """PyTorch's error for a kernel without a loop for ``dtype``."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{_torch_name(dtype)}\'')


def _check_dtype(kernel, t, allowed):
    if t.dtype not in allowed:
        raise _not_implemented(kernel, t.dtype)


def _is_int(value):
    return not isinstance(value, bool) and hasattr(type(value), "__index__")


def _int_arg(op, name, value, position):
    if not _is_int(value):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be int, not {type(value).__name__}")
    return operator.index(value)


def _int_tuple(op, name, value, position):
    """``value`` (an int or a sequence of ints) as a tuple of ints; a single int gives a 1-tuple.

    Raises:
        TypeError: naming the argument for anything else.
    """
    if _is_int(value):
        return (operator.index(value),)
    if isinstance(value, (tuple, list)) or (isinstance(value, Tensor) and value.ndim == 1):
        items = value.tolist() if isinstance(value, Tensor) else value
        for i, v in enumerate(items):
            if not _is_int(v):
                raise TypeError(f"{op}(): argument '{name}' (position {position}) must be tuple of ints, but found "
                                f"element of type {type(v).__name__} at pos {i}")
        return tuple(operator.index(v) for v in items)
    raise TypeError(f"{op}(): argument '{name}' (position {position}) must be tuple of ints, not "
                    f"{type(value).__name__}")


def _expand_param(op, name, value, position, n):
    """A convolution parameter for ``n`` spatial dims: an int or a sequence of 1 or ``n`` ints.

    Raises:
        RuntimeError: for a sequence of another length (PyTorch's message).
    """
    values = _int_tuple(op, name, value, position)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match the "
                           f"convolution dimensions, but got {name}={_fmt(values)}")
    return values


_WORDS = {1: "one int", 2: "two ints", 3: "three ints"}


def _pool_param(op, name, value, position, n, *, optional=False):
    """A pooling parameter: an int or a sequence of 1 or ``n`` ints (None/empty when ``optional``).

    Raises:
        RuntimeError: for a sequence of another length (PyTorch's message).
    """
    if optional and (value is None or (isinstance(value, (tuple, list)) and len(value) == 0)):
        return None
    values = _int_tuple(op, name, value, position)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        omitted = "be omitted, " if optional else ""
        raise RuntimeError(f"{op}: {name} must either {omitted}be a single int, or a tuple of {_WORDS[n]}")
    return values


def _bool_arg(op, name, value, position):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be bool, not {type(value).__name__}")
    return bool(value)


def _lift3(values, fill):
    """1-D or 2-D spatial parameters as 3-D ones, for the kernels of ember._C."""
    return [fill] * (3 - len(values)) + list(values)


_PLAIN_KEY_TYPES = frozenset((int, float, bool, str, type(None)))


def _key(value):
    """A hashable stand-in for an argument: tensors by type, shape and dtype, numbers with their type.

    A tuple or list of plain values (the common ``stride=[1, 1]``) is keyed by its values and their types
    in one go (``True`` and ``1`` stay apart); others element by element. A tensor's dtype is keyed as its
    array's numpy dtype, which determines it (``Tensor.dtype`` maps it on every read).
    """
    t = type(value)
    if t is Tensor:
        return (t, value._data.shape, value._data.dtype)
    if t in _PLAIN_KEY_TYPES:
        return (t, value)
    if t is tuple or t is list:
        types = tuple(map(type, value))
        if _PLAIN_KEY_TYPES.issuperset(types):
            return (t, tuple(value), types)
        return (t, *map(_key, value))
    if isinstance(value, Tensor):
        return (t, value._data.shape, value._data.dtype)
    return (t, value)


def _memoized(plan=None, *, fast_key=None):
    """Cache a plan function's result by its arguments' metadata (meta and kernel both ask, per call).

    Plans read only shapes, dtypes and the Python arguments (and the default dtype), so
    equal keys give equal plans; calls that raise are not cached. Unhashable arguments
    skip the cache. ``fast_key(*args)``, where given (``@_memoized(fast_key=...)``), is a
    cheaper flat key of the common calls of a hot plan, or None for the others, which take
    the general key; its keys start with a string, the general ones with a dtype, so the two
    kinds never meet.
    """
    if plan is None:
        return lambda function: _memoized(function, fast_key=fast_key)
    cache = {}

    def cached(*args):
        try:
            key = None if fast_key is None else fast_key(*args)
            if key is None:
                key = (D.get_default_dtype(), *map(_key, args))
            return cache[key]
        except KeyError:
            pass
        except TypeError:
            return plan(*args)
        result = plan(*args)
        if len(cache) >= 512:
            cache.clear()
        cache[key] = result
        return result

    cached.__wrapped__ = plan
    return cached


_INT_ONLY = frozenset((int,))


def _ints_key(value):
    """A convolution parameter as a plan-key part when it is an int or a tuple or list of ints, else None.

    Exactly ``int``: bools, floats and numpy integers compare equal to ints but are checked (or
    converted) otherwise, so their calls take the general key, which keeps their types. A list is
    keyed as the tuple of its values (the plans read both alike).
    """
    t = type(value)
    if t is int:
        return value
    if (t is tuple or t is list) and _INT_ONLY.issuperset(map(type, value)):
        return value if t is tuple else tuple(value)
    return None


def _tensors_key(input, weight, bias):
    """The shapes and numpy dtypes of a convolution's tensors as a plan-key part, or None (not tensors)."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor)):
        return None
    x, w = input._data, weight._data
    if bias is None:
        return x.shape, x.dtype, w.shape, w.dtype, None
    if not isinstance(bias, Tensor):
        return None
    return x.shape, x.dtype, w.shape, w.dtype, bias._data.shape, bias._data.dtype


# -- numpy helpers ------------------------------------------------------------------------------------


def _compute(data):
    """``data`` as a kernel computes it: float32 for float16/bfloat16, else unchanged."""
    return data.astype(_F32) if data.dtype in _HALF_TYPES else data


def _planes(data, n):
    """``data`` (…, *spatial of n dims) as a contiguous (planes, D, H, W) array for ember._C."""
    spatial = data.shape[data.ndim - n:]
    return np.ascontiguousarray(data).reshape((-1, *_lift3(spatial, 1)))



# -- pad -----------------------------------------------------------------------------------------------

_PAD_MODES = ("constant", "reflect", "replicate", "circular")
_PAD_KERNELS = {"reflect": "reflection_pad", "replicate": "replication_pad"}
_PAD_CODES = {"reflect": 0, "replicate": 1, "circular": 2}  # ember._C.pad_nd's modes


@_memoized
def _pad_plan(input, pad, mode, value):
    """Check ``pad``'s arguments; return ``[(dim, before, after), ...]`` and the output shape."""
    _check_tensor("pad", "input", input)
    if not isinstance(pad, (tuple, list)):
        raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, not {type(pad).__name__}")
    pads = _int_tuple("pad", "pad", pad, 2)
    if not isinstance(mode, str):
        raise TypeError(f"pad(): argument 'mode' (position 3) must be str, not {type(mode).__name__}")
    shape = input._data.shape
    ndim = len(shape)
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    k = len(pads) // 2
    if k > ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pads)} and input of dimension {ndim}")
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    plan = [(ndim - 1 - i, pads[2 * i], pads[2 * i + 1]) for i in range(k)]
    out = list(shape)
    if mode == "constant":
        if value is not None and (isinstance(value, complex) or not isinstance(value, numbers.Number)):
            raise TypeError(f"pad(): argument 'value' (position 4) must be float, not {type(value).__name__}")
        for d, lo, hi in plan:
            out[d] = shape[d] + lo + hi
            if shape[d] + min(lo, 0) + min(hi, 0) < 0:
                raise RuntimeError(f"pad: the negative padding ({lo}, {hi}) removes more than the {shape[d]} elements "
                                   f"of dimension {d} of the input")
        return plan, tuple(out)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if k not in (1, 2, 3) or ndim not in (k + 1, k + 2):
        raise NotImplementedError(f"Padding size {len(pads)} is not supported for {ndim}D input tensor.")
    if mode in _PAD_KERNELS:
        if input.dtype is D.bool:
            raise _not_implemented(f"{_PAD_KERNELS[mode]}{k}d", input.dtype)
        checked = shape[1:] if ndim == k + 2 else shape
        if 0 in checked:
            raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and "
                               f"other non-zero dimensions for input, but got: {_fmt(shape)}")
    names = "WHD"
    for i, (d, lo, hi) in enumerate(plan):
        size = shape[d]
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                               f"got: padding ({lo}, {hi}) at dimension {d} of input {_fmt(shape)}")
        if mode == "circular" and (lo > size or hi > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        out[d] = size + lo + hi
        if out[d] < (0 if mode == "circular" else 1):
            raise RuntimeError(f"input ({names[i]}: {size}) is too small. Calculated output {names[i]}: {out[d]}")
    return plan, tuple(out)


def _pad_meta(input, pad, mode="constant", value=None):
    """Pad ``input``: PyTorch's ``F.pad``.

    ``pad`` gives (before, after) amounts for the last dimensions, **last
    dimension first**: ``(left, right)`` pads the last dim, ``(left, right,
    top, bottom)`` the last two, and so on. Negative amounts crop.

    Args:
        input (Tensor): any shape for ``"constant"``; for the other modes,
            ``len(pad) // 2`` padded dims plus one or two leading dims
            ((C, W) or (N, C, W) for a 2-element ``pad``, up to 3 padded dims).
        pad (tuple[int]): an even number of amounts, at most ``2 * input.ndim``.
        mode (str): ``"constant"`` (fill with ``value``), ``"reflect"`` (mirror
            without repeating the edge; each amount < the dim's size),
            ``"replicate"`` (repeat the edge) or ``"circular"`` (wrap around;
            each amount <= the dim's size).
        value (float, optional): the fill of ``"constant"`` (default 0), cast to
            ``input``'s dtype.

    Returns:
        Tensor: ``input`` padded, of its dtype.

    Raises:
        RuntimeError: for an odd or too long ``pad``, a negative output size, a
            ``value`` with another mode, or amounts too large for reflect/circular.
        NotImplementedError: for an unknown mode, or a ``pad`` length that does
            not fit ``input``'s dims in a non-constant mode.

    Example:
        >>> import ember
        >>> x = ember.tensor([[1., 2., 3.]])
        >>> ember.nn.functional.pad(x, (1, 2))
        tensor([[0., 1., 2., 3., 0., 0.]])
        >>> ember.nn.functional.pad(x[None], (2, 1), mode="reflect")
        tensor([[[3., 2., 1., 2., 3., 2.]]])
    """
    _, out = _pad_plan(input, pad, mode, value)
    return MetaArray(out, input._data.dtype)


def _pad_cpu(input, pad, mode="constant", value=None):
    plan, out_shape = _pad_plan(input, pad, mode, value)
    x = input._data
    on_host = type(x) is np.ndarray  # ember._C's one-pass kernel takes host arrays only
    xp = np if on_host else _array_namespace(x)
    if mode == "constant":
        fill = np.array(0 if value is None else value).astype(x.dtype)
        if on_host and len(plan) <= 3 and all(lo >= 0 and hi >= 0 for _, lo, hi in plan):
            return _pad_planes(x, plan, out_shape, 3, fill.reshape(1))
        out = xp.full(out_shape, fill[()], dtype=x.dtype)
        src = [slice(None)] * x.ndim
        dst = [slice(None)] * x.ndim
        for d, lo, hi in plan:
            start, stop = max(-lo, 0), x.shape[d] - max(-hi, 0)
            if stop <= start:
                return out
            src[d] = slice(start, stop)
            dst[d] = slice(max(lo, 0), max(lo, 0) + stop - start)
        out[tuple(dst)] = x[tuple(src)]
        return out
    if on_host and all(lo >= 0 and hi >= 0 for _, lo, hi in plan):
        return _pad_planes(x, plan, out_shape, _PAD_CODES[mode])
    result = x
    for d, lo, hi in plan:
        if lo == 0 and hi == 0:
            continue
        size = x.shape[d]
        idx = xp.arange(out_shape[d]) - lo
        if mode == "reflect":
            idx = np.abs(idx)
            idx = np.where(idx >= size, 2 * (size - 1) - idx, idx)
        elif mode == "replicate":
            idx = np.clip(idx, 0, size - 1)
        else:  # negative amounts crop first; the rest wraps around what is left
            start, kept = max(-lo, 0), size - max(-lo, 0) - max(-hi, 0)
            idx = start + (xp.arange(out_shape[d]) - max(lo, 0)) % max(kept, 1)
        result = np.take(result, idx, axis=d)
    return xp.array(result, copy=True) if result is x else result


def _pad_planes(x, plan, out_shape, mode, fill=None):
    """Non-negative padding of at most 3 trailing dims by ember._C.pad_nd (one pass, any dtype)."""
    k = len(plan)
    lead = x.shape[:x.ndim - k]
    lo3 = _lift3([lo for _, lo, _ in reversed(plan)], 0)
    hi3 = _lift3([hi for _, _, hi in reversed(plan)], 0)
    planes = np.ascontiguousarray(x).reshape((math.prod(lead), *_lift3(x.shape[x.ndim - k:], 1)))
    return _C.pad_nd(planes, lo3, hi3, mode, fill).reshape(out_shape)


pad = defop("pad", _pad_meta, cpu=_pad_cpu, tags=_NN_ONLY)
# _pad_cpu takes ember._C's path for numpy arrays only and is namespace-generic otherwise: CuPy arrays run it
# as pad's CUDA kernel directly (no generic-path wrapper)
pad.register_kernel("cuda", _pad_cpu)


# -- convolution ---------------------------------------------------------------------------------------

_CONV_TYPES = tuple(d for d in D.ALL_DTYPES if d is not D.bool)
_CONV_TRANSPOSE_TYPES = (D.int64, *_FLOATS, D.complex64, D.complex128)


def _conv_shape(op, x_shape, x_dtype, w_shape, w_dtype, b, stride, pad_lo, pad_hi, dilation, transposed,
                output_padding, groups, allow_complex=True):
    """Check a batched convolution and return its output shape.

    ``x_shape`` is (N, C, *spatial), ``w_shape`` is (O, C / groups, *kernel) or,
    transposed, (C, O / groups, *kernel); ``pad_lo``/``pad_hi`` pad each spatial dim
    before/after. Raises PyTorch's errors (RuntimeError, NotImplementedError).
    ``allow_complex=False`` refuses complex dtypes, as the ``convolution`` prim does.
    """
    n = len(w_shape) - 2
    if (x_dtype is D.bool or (transposed and x_dtype not in _CONV_TRANSPOSE_TYPES)
            or (x_dtype.is_complex and not allow_complex)):
        kernel = f"slow_conv_transpose{max(n, 2)}d_out_cpu" if transposed else f"slow_conv{max(n, 2)}d_cpu"
        raise _not_implemented(kernel, x_dtype)
    if not transposed and any(d != 1 for d in dilation) and x_dtype in _INT_TYPES and x_dtype is not D.int64:
        raise _not_implemented("slow_conv_dilated<>", x_dtype)
    if w_dtype is not x_dtype:
        raise RuntimeError(f"Input type ({_torch_name(x_dtype)}) and weight type ({_torch_name(w_dtype)}) should be "
                           "the same")
    if b is not None and b.dtype is not x_dtype:
        raise RuntimeError(f"Input type ({_torch_name(x_dtype)}) and bias type ({_torch_name(b.dtype)}) should be "
                           "the same")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in pad_lo + pad_hi):
        raise RuntimeError("negative padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if w_shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{_fmt(w_shape)}] instead")
    channels = x_shape[1]
    kernel = w_shape[2:]
    spatial = x_shape[2:]
    if transposed:
        if channels != w_shape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {_fmt(w_shape)}, expected input{_fmt(x_shape)} to "
                               f"have {w_shape[0]} channels, but got {channels} channels instead")
        out_channels = w_shape[1] * groups
        for i in range(n):
            if output_padding[i] >= stride[i] and output_padding[i] >= dilation[i]:
                raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                                   f"output_padding={_fmt(output_padding)}, stride={_fmt(stride)} and "
                                   f"dilation={_fmt(dilation)}")
        out = tuple((spatial[i] - 1) * stride[i] - pad_lo[i] - pad_hi[i] + dilation[i] * (kernel[i] - 1)
                    + output_padding[i] + 1 for i in range(n))
        if any(o <= 0 for o in out):
            raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). Calculated output "
                               f"size per channel: ({' x '.join(map(str, out))}). Output size is too small")
        bias_prefix = "Given transposed=1, weight of size"
    else:
        if w_shape[0] < 1:
            raise RuntimeError(f"Given groups={groups}, expected weight to be at least 1 at dimension 0, but got "
                               f"weight of size {_fmt(w_shape)} instead")
        if channels != w_shape[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {_fmt(w_shape)}, expected input{_fmt(x_shape)} "
                               f"to have {w_shape[1] * groups} channels, but got {channels} channels instead")
        padded = tuple(spatial[i] + pad_lo[i] + pad_hi[i] for i in range(n))
        effective = tuple(dilation[i] * (kernel[i] - 1) + 1 for i in range(n))
        if any(p < e for p, e in zip(padded, effective)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                               f"size: ({' x '.join(map(str, effective))}). Kernel size can't be greater than actual "
                               "input size")
        out_channels = w_shape[0]
        out = tuple((padded[i] - effective[i]) // stride[i] + 1 for i in range(n))
        bias_prefix = "Given weight of size"
    if b is not None and (b._data.ndim != 1 or b._data.shape[0] != out_channels):
        raise RuntimeError(f"{bias_prefix} {_fmt(w_shape)}, expected bias to be 1-dimensional with {out_channels} "
                           f"elements, but got bias of size {_fmt(b._data.shape)} instead")
    return (x_shape[0], out_channels, *out)


def _zero_pad(x, pad_lo, pad_hi):
    """``x`` (N, C, *spatial) with zeros around the spatial dims, as a new C-contiguous array."""
    n = len(pad_lo)
    padded = np.zeros((*x.shape[:2], *(x.shape[2 + i] + pad_lo[i] + pad_hi[i] for i in range(n))), x.dtype)
    padded[(slice(None), slice(None), *(slice(pad_lo[i], pad_lo[i] + x.shape[2 + i]) for i in range(n)))] = x
    return padded


def _stride_phases(x, pad_lo, pad_hi, stride, dtype=_F32):
    """``x`` (N, C, *spatial) zero-padded and split by stride phases: (N, C, prod(stride), Dq, Hq, Wq).

    Phase (a, b, c) holds the padded elements (q * stride + (a, b, c)); with stride 1 this is
    the padded input itself. Spatial dims are lifted to 3 for ember._C.conv_avx512 and
    ember._C.conv_weight_grad; the result has ``dtype``.
    """
    n = len(stride)
    N, C = x.shape[:2]
    if all(v == 1 for v in stride):
        x = np.ascontiguousarray(x, dtype)
        if any(pad_lo) or any(pad_hi):
            # ember._C.pad_zero: a few times faster than numpy's copy into the middle of short rows
            x = _C.pad_zero(x.reshape(N * C, *_lift3(x.shape[2:], 1)), _lift3(pad_lo, 0), _lift3(pad_hi, 0))
        return x.reshape(N, C, 1, *_lift3(x.shape[-n:], 1))
    sizes = [x.shape[2 + i] + pad_lo[i] + pad_hi[i] for i in range(n)]
    q = [-(-sizes[i] // stride[i]) for i in range(n)]
    out = np.zeros((N, C, *stride, *q), dtype)
    for phase in np.ndindex(*stride):
        src, dst = [], []
        for i in range(n):
            # padded index q * s + a holds input index q * s + a - pad_lo, when inside the input
            q0 = max(-((phase[i] - pad_lo[i]) // stride[i]), 0)
            start = q0 * stride[i] + phase[i] - pad_lo[i]
            count = len(range(start, x.shape[2 + i], stride[i]))
            src.append(slice(start, start + (count - 1) * stride[i] + 1 if count else start, stride[i]))
            dst.append(slice(q0, q0 + count))
        out[(slice(None), slice(None), *phase, *dst)] = x[(slice(None), slice(None), *src)]
    return out.reshape(N, C, math.prod(stride), *_lift3(q, 1))


def _im2col_windows(x, kernel, stride, pad_lo, pad_hi, dilation, out, groups=1):
    """Sliding windows of ``x`` (N, C, *spatial) as a view (N, groups, C / groups, *kernel, *out).

    The view reads a zero-padded copy when there is padding; it is never written.
    """
    n = len(kernel)
    if any(pad_lo) or any(pad_hi):
        x = _zero_pad(x, pad_lo, pad_hi)
    st = x.strides
    cpg = x.shape[1] // groups
    shape = (x.shape[0], groups, cpg, *kernel, *out)
    strides = (st[0], cpg * st[1], st[1], *(st[2 + i] * dilation[i] for i in range(n)),
               *(st[2 + i] * stride[i] for i in range(n)))
    return as_strided(x, shape, strides, writeable=False)


def _conv_few_outputs(x, w, stride, pad_lo, pad_hi, dilation, out):
    """Ungrouped convolution with few output positions and a large kernel, as one BLAS matmul.

    The zero-padded input is copied once, channels last (N, *padded, C), so that every
    window (*kernel, C) is a strided view of it; the windows of all N * prod(out)
    output positions become a (N * P, prod(kernel) * C) matrix, which is small next to
    the kernel when P is small, multiplied by the (C_out, prod(kernel) * C) weight.
    This is how a weight gradient (input correlated with the output gradient) runs.
    """
    if _FAST_CONV:
        return _conv_few_outputs_avx512(x, w, stride, pad_lo, pad_hi, dilation, out)
    n = len(out)
    N, C = x.shape[:2]
    out_channels = w.shape[0]
    kernel = w.shape[2:]
    padded = tuple(x.shape[2 + i] + pad_lo[i] + pad_hi[i] for i in range(n))
    xcl = np.zeros((N, *padded, C), x.dtype)
    xcl[(slice(None), *(slice(pad_lo[i], pad_lo[i] + x.shape[2 + i]) for i in range(n)))] = np.moveaxis(x, 1, -1)
    st = xcl.strides
    windows = as_strided(xcl, (N, *out, *kernel, C),
                         (st[0], *(st[1 + i] * stride[i] for i in range(n)),
                          *(st[1 + i] * dilation[i] for i in range(n)), st[-1]), writeable=False)
    cols = windows.reshape(N * math.prod(out), -1)
    wm = np.moveaxis(w, 1, -1).reshape(out_channels, -1)
    result = _blas_matmul(cols, wm.T).reshape((N, *out, out_channels))
    return np.ascontiguousarray(np.moveaxis(result, -1, 1))


def _conv_few_outputs_avx512(x, w, stride, pad_lo, pad_hi, dilation, out):
    """``_conv_few_outputs`` on ember._C.conv_weight_grad (float32 or float64, AVX-512).

    The convolution ``y[b, o, k] = sum_{n, p} x[b, n, k * stride + p * dilation] w[o, n, p]`` is a weight
    gradient read the other way round: with ``b`` as the channel, ``n`` as the batch and ``w`` as the output
    gradient, it is ``dW[o, b, k]`` of a convolution whose stride is this one's dilation and whose dilation is
    this one's stride. The autograd formula hands over transposed views of the forward's input and output
    gradient, so swapping the two leading axes back costs no copy.
    """
    dtype = x.dtype
    x_nc = x.swapaxes(0, 1)  # (n, b, *spatial): the "batch" n first
    phases = _stride_phases(x_nc, pad_lo, pad_hi, dilation, dtype)
    g = np.ascontiguousarray(w.swapaxes(0, 1))  # (n, o, *p)
    g = g.reshape((*g.shape[:2], *_lift3(g.shape[2:], 1)))
    dw = _C.conv_weight_grad(phases, g, _lift3(out, 1), 1, _lift3(dilation, 1), _lift3(stride, 1))
    return np.ascontiguousarray(dw.reshape((w.shape[0], x.shape[0], *out)).swapaxes(0, 1))


# Output positions up to which (with a kernel of at least _FEW_OUTPUTS_KERNEL_RATIO times as many taps) an
# ungrouped convolution runs as one matmul over its windows (_conv_few_outputs).
_FEW_OUTPUTS = 64
_FEW_OUTPUTS_KERNEL_RATIO = 4
# Direct kernel (ember._C.conv_direct) when a group is this thin: depthwise and its neighbours.
_DIRECT_MAX_GROUP_WORK = 16
# float32 convolutions run ember._C.conv_avx512 where the CPU has AVX-512.
_FAST_CONV = _C.conv_fast_available()


def _conv_forward(x, w, b, stride, pad_lo, pad_hi, dilation, groups):
    """Convolution of numpy x (N, C, *spatial) by w (C_out, C / groups, *kernel), plus bias b (C_out,) or None."""
    dtype = x.dtype
    x, w = _compute(x), _compute(w)
    n = w.ndim - 2
    N, C = x.shape[:2]
    out_channels = w.shape[0]
    kernel = w.shape[2:]
    out = tuple((x.shape[2 + i] + pad_lo[i] + pad_hi[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(n))
    cpg, opg = C // groups, out_channels // groups
    if N == 0 or out_channels == 0 or 0 in out or C == 0:
        result = np.zeros((N, out_channels, *out), x.dtype)
    elif (groups == 1 and x.dtype in _C_FLOAT and math.prod(out) <= _FEW_OUTPUTS
          and math.prod(kernel) >= _FEW_OUTPUTS_KERNEL_RATIO * math.prod(out)):
        result = _conv_few_outputs(x, w, stride, pad_lo, pad_hi, dilation, out)
    elif x.dtype == _F32 and _FAST_CONV and (groups == 1 or cpg == 1 or cpg * opg > _DIRECT_MAX_GROUP_WORK):
        # AVX-512 implicit GEMM on the zero-padded input split by stride phases: no im2col copy
        w5 = np.ascontiguousarray(w).reshape((out_channels, cpg, *_lift3(kernel, 1)))
        bias = None if b is None else np.ascontiguousarray(_compute(b), _F32)
        result = _C.conv_avx512(_stride_phases(x, pad_lo, pad_hi, stride), w5, bias, groups, _lift3(stride, 1),
                                _lift3(dilation, 1), _lift3(out, 1)).reshape((N, out_channels, *out))
        return result.astype(dtype, copy=False)
    elif x.dtype in _C_FLOAT and groups > 1 and cpg * opg <= _DIRECT_MAX_GROUP_WORK:
        x5 = np.ascontiguousarray(x).reshape((N, C, *_lift3(x.shape[2:], 1)))
        w5 = np.ascontiguousarray(w).reshape((out_channels, cpg, *_lift3(kernel, 1)))
        result = _C.conv_direct(x5, w5, _lift3(out, 1), _lift3(stride, 1), _lift3(pad_lo, 0), _lift3(dilation, 1),
                                groups).reshape((N, out_channels, *out))
    else:
        K = math.prod(kernel)
        P = math.prod(out)
        if K == 1 and not any(pad_lo) and not any(pad_hi) and all(s == 1 for s in stride):
            cols = x.reshape(N, groups, cpg, P)
        else:
            cols = _im2col_windows(x, kernel, stride, pad_lo, pad_hi, dilation, out, groups).reshape(
                N, groups, cpg * K, P)
        result = _blas_matmul(w.reshape(groups, opg, cpg * K), cols).reshape((N, out_channels, *out))
    if b is not None:
        result += _compute(b).reshape((out_channels,) + (1,) * n)
    return result.astype(dtype, copy=False)


def _col2im(cols, planes, image, kernel, blocks, stride, pad, dilation, parallel=True):
    """Scatter-add cols (planes, *kernel, *blocks) into images (planes, *image): fold's and conv_transpose's core.

    Block ``l`` and kernel offset ``k`` land at ``l * stride - pad + k * dilation`` in each dim.
    ``parallel=False`` keeps the C++ loop on this thread, for use right after a BLAS call:
    OpenBLAS's threads keep spinning for a while, and OpenMP threads would fight them.
    """
    n = len(kernel)
    if cols.dtype in _C_FLOAT:
        cols = np.ascontiguousarray(cols)
        result = _C.col2im(cols, planes, _lift3(image, 1), _lift3(kernel, 1), _lift3(blocks, 1), _lift3(stride, 1),
                           _lift3(pad, 0), _lift3(dilation, 1), parallel)
        return result.reshape((planes, *image))
    # any other dtype: one vectorised add per kernel offset
    cols = cols.reshape((planes, *kernel, *blocks))
    full = tuple(max((blocks[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1, pad[i] + image[i])
                 for i in range(n))
    buffer = np.zeros((planes, *full), cols.dtype)
    for offset in np.ndindex(*kernel):
        target = tuple(slice(offset[i] * dilation[i], offset[i] * dilation[i] + (blocks[i] - 1) * stride[i] + 1,
                             stride[i]) for i in range(n))
        buffer[(slice(None), *target)] += cols[(slice(None), *offset)]
    return np.array(buffer[(slice(None), *(slice(pad[i], pad[i] + image[i]) for i in range(n)))], copy=True)


def _transpose_geometry(x_shape, w_shape, stride, padding, output_padding, dilation, groups):
    """The sizes of a transposed convolution of x (N, C, *blocks) by w (C, C_out / groups, *kernel):
    ``(n, N, C, C_out / groups, C_out, kernel, blocks, output spatial sizes)``."""
    n = len(w_shape) - 2
    N, C = x_shape[:2]
    opg = w_shape[1]
    kernel, blocks = tuple(w_shape[2:]), tuple(x_shape[2:])
    out = tuple((blocks[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + output_padding[i] + 1
                for i in range(n))
    return n, N, C, opg, opg * groups, kernel, blocks, out


def _conv_transpose_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    """Transposed convolution of x (N, C, *spatial) by w (C, C_out / groups, *kernel): matmul, then col2im."""
    dtype = x.dtype
    x, w = _compute(x), _compute(w)
    n, N, C, opg, out_channels, kernel, blocks, out = _transpose_geometry(
        x.shape, w.shape, stride, padding, output_padding, dilation, groups)
    cpg = C // groups
    K, L = math.prod(kernel), math.prod(blocks)
    if N == 0 or out_channels == 0 or C == 0:
        result = np.zeros((N, out_channels, *out), x.dtype)
    elif (x.dtype == _F32 and _FAST_CONV and groups == 1 and all(s == 1 for s in stride) and not any(output_padding)
          and all(padding[i] <= dilation[i] * (kernel[i] - 1) for i in range(n))):
        # at stride 1 it is the plain convolution by the flipped kernel, channels swapped, padded by
        # dilation * (kernel - 1) - padding: the forward's kernels, and no col2im scatter
        flipped = np.flip(w.swapaxes(0, 1), axis=tuple(range(2, 2 + n)))
        pad = tuple(dilation[i] * (kernel[i] - 1) - padding[i] for i in range(n))
        return _conv_forward(x, flipped, b, (1,) * n, pad, pad, dilation, 1).astype(dtype, copy=False)
    elif x.dtype == _F32 and _FAST_CONV:
        # the GEMM as a 1x1 convolution on ember._C's AVX-512 kernel, then col2im (no BLAS threads to fight)
        wm = np.ascontiguousarray(w.reshape(groups, cpg, opg * K).transpose(0, 2, 1)).reshape(
            groups * opg * K, cpg, 1, 1, 1)
        xm = np.ascontiguousarray(x).reshape(N, C, 1, 1, 1, L)
        cols = _C.conv_avx512(xm, wm, None, groups, [1, 1, 1], [1, 1, 1], [1, 1, L])
        result = _col2im(cols, N * out_channels, out, kernel, blocks, stride, padding, dilation)
        result = result.reshape((N, out_channels, *out))
    else:
        wm = w.reshape(groups, cpg, opg * K).transpose(0, 2, 1)
        cols = _blas_matmul(wm, x.reshape(N, groups, cpg, L))  # (N, groups, C_out / groups * K, L)
        result = _col2im(cols, N * out_channels, out, kernel, blocks, stride, padding, dilation, parallel=False)
        result = result.reshape((N, out_channels, *out))
    if b is not None:
        result += _compute(b).reshape((out_channels,) + (1,) * n)
    return result.astype(dtype, copy=False)


def _convolution_key(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """:func:`_convolution_plan`'s key for calls of tensors, ints or tuples of ints, and a bool (else None):
    the decomposition of ``conv{n}d`` passes its plan's tuples, so every forward convolution is such a call."""
    tensors = _tensors_key(input, weight, bias)
    params = (_ints_key(stride), _ints_key(padding), _ints_key(dilation), _ints_key(output_padding),
              _ints_key(groups))
    if tensors is None or None in params or type(transposed) is not bool:
        return None
    return ("convolution", *tensors, *params, transposed)


@_memoized(fast_key=_convolution_key)
def _convolution_plan(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    op = "convolution"
    _check_tensor(op, "input", input, 1)
    _check_tensor(op, "weight", weight, 2)
    if bias is not None:
        _check_tensor(op, "bias", bias, 3)
    w_shape = weight._data.shape
    x_shape = input._data.shape
    if len(w_shape) < 3:
        raise RuntimeError(f"convolution: expected weight to have at least 3 dimensions, but got weight of size "
                           f"{_fmt(w_shape)}")
    if len(x_shape) != len(w_shape):
        raise RuntimeError(f"Expected {len(w_shape)}-dimensional input for {len(w_shape)}-dimensional weight "
                           f"{_fmt(w_shape)}, but got {len(x_shape)}-dimensional input of size {_fmt(x_shape)} instead")
    n = len(w_shape) - 2
    stride = _expand_param(op, "stride", stride, 4, n)
    padding = _expand_param(op, "padding", padding, 5, n)
    dilation = _expand_param(op, "dilation", dilation, 6, n)
    transposed = _bool_arg(op, "transposed", transposed, 7)
    output_padding = _expand_param(op, "output_padding", output_padding, 8, n)
    groups = _int_arg(op, "groups", groups, 9)
    out = _conv_shape(op, x_shape, input.dtype, w_shape, weight.dtype, bias, stride, padding, padding, dilation,
                      transposed, output_padding, groups, allow_complex=False)
    return stride, padding, dilation, transposed, output_padding, groups, out


def _convolution_meta(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """Convolution or transposed convolution over 1, 2 or 3 spatial dims: the prim behind ``conv*d``.

    PyTorch's ``torch.convolution``. Every argument is required; ``input`` is
    batched ``(N, C, *spatial)``.

    Args:
        input (Tensor): ``(N, C_in, *spatial)``, not bool.
        weight (Tensor): ``(C_out, C_in / groups, *kernel)``, or transposed
            ``(C_in, C_out / groups, *kernel)``; same dtype as ``input``.
        bias (Tensor or None): (C_out,).
        stride, padding, dilation (int or sequence of ints): per spatial dim.
        transposed (bool): a transposed convolution (the adjoint of the forward one).
        output_padding (int or sequence of ints): extra size on one side of a
            transposed convolution's output, smaller than stride or dilation.
        groups (int): splits channels into independent groups.

    Returns:
        Tensor: ``(N, C_out, *out)``, with ``out = (in + 2 p - d (k - 1) - 1) // s + 1``,
        or transposed ``(in - 1) s - 2 p + d (k - 1) + output_padding + 1``.

    Raises:
        RuntimeError: for mismatched dims, channels, groups, dtypes or bias, bad
            parameters, or a kernel larger than the padded input.
        NotImplementedError: for bool and complex inputs (and transposed integer inputs
            but int64); ``conv*d`` take complex inputs as four real convolutions.

    Example:
        >>> import ember
        >>> x = ember.ones(1, 1, 4)
        >>> ember.convolution(x, ember.ones(1, 1, 2), None, [1], [0], [1], False, [0], 1)
        tensor([[[2., 2., 2.]]])
    """
    out = _convolution_plan(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)[-1]
    return MetaArray(out, input._data.dtype)


def _convolution_cpu(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    stride, padding, dilation, transposed, output_padding, groups, _ = _convolution_plan(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    b = None if bias is None else bias._data
    if transposed:
        return _conv_transpose_forward(input._data, weight._data, b, stride, padding, output_padding, dilation,
                                       groups)
    return _conv_forward(input._data, weight._data, b, stride, padding, padding, dilation, groups)


convolution = defop("convolution", _convolution_meta, cpu=_convolution_cpu)


def _complex_by_parts(conv, x, weight, bias, n):
    """A complex convolution from real ones: (a + ib) * (c + id) = (ac - bd) + i(ad + bc)."""
    xr, xi, wr, wi = _E.real(x), _E.imag(x), _E.real(weight), _E.imag(weight)
    out = _E.complex(_E.sub(conv(xr, wr, None), conv(xi, wi, None)), _E.add(conv(xr, wi, None), conv(xi, wr, None)))
    if bias is not None:
        out = _E.add(out, _E.reshape(bias, (-1,) + (1,) * n))
    return out


def _conv_key(name, n, input, weight, bias, stride, padding, dilation, groups):
    """:func:`_conv_plan`'s key for calls of tensors, ints or tuples of ints (a string padding too), else None."""
    tensors = _tensors_key(input, weight, bias)
    params = (_ints_key(stride), padding if type(padding) is str else _ints_key(padding), _ints_key(dilation),
              _ints_key(groups))
    if tensors is None or None in params:
        return None
    return (name, n, *tensors, *params)


@_memoized(fast_key=_conv_key)
def _conv_plan(name, n, input, weight, bias, stride, padding, dilation, groups):
    """Check a ``conv{n}d`` call; return (stride, pad_lo, pad_hi, dilation, groups, unbatched, output shape)."""
    _check_tensor(name, "input", input, 1)
    _check_tensor(name, "weight", weight, 2)
    if bias is not None:
        _check_tensor(name, "bias", bias, 3)
    x_shape = input._data.shape
    if len(x_shape) not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input of "
                           f"size: {_fmt(x_shape)}")
    w_shape = weight._data.shape
    if len(w_shape) != n + 2:
        raise RuntimeError(f"{name}: expected weight to be {n + 2}-dimensional (out_channels, in_channels / groups, "
                           f"*kernel_size), but got weight of size {_fmt(w_shape)}")
    unbatched = len(x_shape) == n + 1
    if unbatched:
        x_shape = (1, *x_shape)
    stride = _expand_param(name, "stride", stride, 4, n)
    dilation = _expand_param(name, "dilation", dilation, 6, n)
    groups = _int_arg(name, "groups", groups, 7)
    if isinstance(padding, str):
        if padding == "valid":
            pad_lo = pad_hi = (0,) * n
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            total = tuple(dilation[i] * (w_shape[2 + i] - 1) for i in range(n))
            pad_lo = tuple(t // 2 for t in total)
            pad_hi = tuple(t - t // 2 for t in total)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pad_lo = pad_hi = _expand_param(name, "padding", padding, 5, n)
    out = _conv_shape(name, x_shape, input.dtype, w_shape, weight.dtype, bias, stride, pad_lo, pad_hi, dilation,
                      False, (0,) * n, groups)
    return stride, pad_lo, pad_hi, dilation, groups, unbatched, out[1:] if unbatched else out


def _make_conv(n):
    name = f"conv{n}d"
    letters = ("L",) if n == 1 else ("H", "W") if n == 2 else ("D", "H", "W")
    spatial = ", ".join(f"i{c}" for c in letters)
    kernel = ", ".join(f"k{c}" for c in letters)

    def meta(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        out = _conv_plan(name, n, input, weight, bias, stride, padding, dilation, groups)[-1]
        return MetaArray(out, input._data.dtype)

    def cpu(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        stride, pad_lo, pad_hi, dilation, groups, unbatched, _ = _conv_plan(name, n, input, weight, bias, stride,
                                                                            padding, dilation, groups)
        x = input._data[None] if unbatched else input._data
        out = _conv_forward(x, weight._data, None if bias is None else bias._data, stride, pad_lo, pad_hi, dilation,
                            groups)
        return out[0] if unbatched else out

    no_output_padding = (0,) * n

    def decomposition(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        stride, pad_lo, pad_hi, dilation, groups, unbatched, _ = _conv_plan(name, n, input, weight, bias, stride,
                                                                            padding, dilation, groups)
        x = _E.unsqueeze(input, 0) if unbatched else input
        if pad_lo != pad_hi:  # 'same' with an even effective kernel: the extra zero goes after
            extra = []
            for i in reversed(range(n)):
                extra += [0, pad_hi[i] - pad_lo[i]]
            x = _E.pad(x, extra)

        def conv(x, w, b):
            # the prim of this module (not looked up through _E: a few tenths of a us per call), with the plan's
            # tuples of ints, which key its own plan cheaply (_convolution_key)
            return convolution(x, w, b, stride, pad_lo, dilation, False, no_output_padding, groups)

        out = _complex_by_parts(conv, x, weight, bias, n) if input.dtype.is_complex else conv(x, weight, bias)
        return _E.squeeze(out, 0) if unbatched else out

    meta.__name__ = name
    meta.__doc__ = f"""{n}-D convolution (cross-correlation, as in PyTorch) of ``input`` by ``weight``.

    Args:
        input (Tensor): (N, C_in, {spatial}) or unbatched (C_in, {spatial}); any dtype but bool.
        weight (Tensor): (C_out, C_in / groups, {kernel}), same dtype as ``input``.
        bias (Tensor, optional): (C_out,).
        stride (int or tuple[int]): step of the kernel, per spatial dim. Default 1.
        padding (int, tuple[int] or str): zeros added on both sides of each spatial dim,
            or ``"valid"`` (none) or ``"same"`` (output size = input size; stride 1 only,
            the odd extra zero goes after). Default 0.
        dilation (int or tuple[int]): spacing between kernel elements. Default 1.
        groups (int): input and output channels split into this many independent groups. Default 1.

    Returns:
        Tensor: ``(N, C_out, *out)`` (unbatched: ``(C_out, *out)``), with
        ``out = (in + 2 * padding - dilation * (k - 1) - 1) // stride + 1``. With no input
        channels (``C_in == 0``) each output is an empty sum: the bias, or zeros (PyTorch
        returns ``(N, 0, *out)`` there, dropping ``C_out`` and the bias).

    Raises:
        RuntimeError: for wrong dims, mismatched channels, groups, dtypes or bias,
            non-positive stride/dilation/groups, negative padding, an invalid padding
            string, ``"same"`` with a stride, or a kernel larger than the padded input.
        NotImplementedError: for bool inputs.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.arange(16.).reshape(1, 1, 4, 4)
        >>> w = ember.ones(1, 1, 2, 2)
        >>> ember.nn.functional.conv2d(x, w, stride=2)
        tensor([[[[10., 18.],
                  [42., 50.]]]])
"""
    op = defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_NN)
    op.decomposition_checks = True  # the decomposition runs _conv_plan, whose checks are the meta function's
    return op


conv1d = _make_conv(1)
conv2d = _make_conv(2)
conv3d = _make_conv(3)


@_memoized
def _conv_transpose_plan(name, n, input, weight, bias, stride, padding, output_padding, groups, dilation):
    _check_tensor(name, "input", input, 1)
    _check_tensor(name, "weight", weight, 2)
    if bias is not None:
        _check_tensor(name, "bias", bias, 3)
    x_shape = input._data.shape
    if len(x_shape) not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input of "
                           f"size: {_fmt(x_shape)}")
    w_shape = weight._data.shape
    if len(w_shape) != n + 2:
        raise RuntimeError(f"{name}: expected weight to be {n + 2}-dimensional (in_channels, out_channels / groups, "
                           f"*kernel_size), but got weight of size {_fmt(w_shape)}")
    unbatched = len(x_shape) == n + 1
    if unbatched:
        x_shape = (1, *x_shape)
    stride = _expand_param(name, "stride", stride, 4, n)
    padding = _expand_param(name, "padding", padding, 5, n)
    output_padding = _expand_param(name, "output_padding", output_padding, 6, n)
    groups = _int_arg(name, "groups", groups, 7)
    dilation = _expand_param(name, "dilation", dilation, 8, n)
    out = _conv_shape(name, x_shape, input.dtype, w_shape, weight.dtype, bias, stride, padding, padding, dilation,
                      True, output_padding, groups)
    return stride, padding, output_padding, groups, dilation, unbatched, out[1:] if unbatched else out


def _make_conv_transpose(n):
    name = f"conv_transpose{n}d"
    letters = ("L",) if n == 1 else ("H", "W") if n == 2 else ("D", "H", "W")
    spatial = ", ".join(f"i{c}" for c in letters)
    kernel = ", ".join(f"k{c}" for c in letters)

    def meta(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        out = _conv_transpose_plan(name, n, input, weight, bias, stride, padding, output_padding, groups,
                                   dilation)[-1]
        return MetaArray(out, input._data.dtype)

    def cpu(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        stride, padding, output_padding, groups, dilation, unbatched, _ = _conv_transpose_plan(
            name, n, input, weight, bias, stride, padding, output_padding, groups, dilation)
        x = input._data[None] if unbatched else input._data
        out = _conv_transpose_forward(x, weight._data, None if bias is None else bias._data, stride, padding,
                                      output_padding, dilation, groups)
        return out[0] if unbatched else out

    def decomposition(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        stride, padding, output_padding, groups, dilation, unbatched, _ = _conv_transpose_plan(
            name, n, input, weight, bias, stride, padding, output_padding, groups, dilation)
        x = _E.unsqueeze(input, 0) if unbatched else input

        def conv(x, w, b):
            return convolution(x, w, b, stride, padding, dilation, True, output_padding, groups)

        out = _complex_by_parts(conv, x, weight, bias, n) if input.dtype.is_complex else conv(x, weight, bias)
        return _E.squeeze(out, 0) if unbatched else out

    meta.__name__ = name
    meta.__doc__ = f"""{n}-D transposed convolution ("deconvolution"): the adjoint of :func:`conv{n}d`.

    Args:
        input (Tensor): (N, C_in, {spatial}) or unbatched (C_in, {spatial}); a floating,
            complex or int64 dtype.
        weight (Tensor): (C_in, C_out / groups, {kernel}), same dtype as ``input``.
        bias (Tensor, optional): (C_out,).
        stride (int or tuple[int]): Default 1.
        padding (int or tuple[int]): ``dilation * (k - 1) - padding`` zeros pad each side
            of the input in the equivalent direct convolution. Default 0.
        output_padding (int or tuple[int]): extra size added to one side of the output,
            smaller than stride or dilation. Default 0.
        groups (int): Default 1.
        dilation (int or tuple[int]): Default 1.

    Returns:
        Tensor: ``(N, C_out, *out)`` (unbatched: ``(C_out, *out)``), with
        ``out = (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    Raises:
        RuntimeError: for wrong dims, mismatched channels, groups, dtypes or bias, bad
            parameters, or an output size below 1.
        NotImplementedError: for bool inputs and integer inputs other than int64.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[[1., 2.], [3., 4.]]]])
        >>> ember.nn.functional.conv_transpose2d(x, ember.ones(1, 1, 2, 2), stride=2)
        tensor([[[[1., 1., 2., 2.],
                  [1., 1., 2., 2.],
                  [3., 3., 4., 4.],
                  [3., 3., 4., 4.]]]])
"""
    return defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_NN)


conv_transpose1d = _make_conv_transpose(1)
conv_transpose2d = _make_conv_transpose(2)
conv_transpose3d = _make_conv_transpose(3)


# -- unfold (im2col) and fold (col2im) -----------------------------------------------------------------

_FOLD_TYPES = (D.bool, *_FLOATS, D.complex64, D.complex128)


def _pair_param(name, value):
    values = _int_tuple("unfold", name, value, 2)
    if len(values) == 1:
        return values * 2
    if len(values) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(values)}")
    return values


def _block_params(kernel_size, dilation, padding, stride):
    k = _pair_param("kernel_size", kernel_size)
    d = _pair_param("dilation", dilation)
    p = _pair_param("padding", padding)
    s = _pair_param("stride", stride)
    if k[0] <= 0 or k[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {k[0]} kernel_width: "
                           f"{k[1]}")
    if d[0] <= 0 or d[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {d[0]} dilation_width: "
                           f"{d[1]}")
    if p[0] < 0 or p[1] < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} pad_width: {p[1]}")
    if s[0] <= 0 or s[1] <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {s[0]} stride_width: {s[1]}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    return tuple((size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))


@_memoized
def _im2col_plan(input, kernel_size, dilation, padding, stride):
    _check_tensor("unfold", "input", input)
    k, d, p, s = _block_params(kernel_size, dilation, padding, stride)
    shape = input._data.shape
    if len(shape) not in (3, 4) or 0 in shape[len(shape) - 3:]:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {_fmt(shape)}")
    _check_dtype("im2col_out_cpu", input, _FOLD_TYPES)
    blocks = _blocks(shape[-2:], k, d, p, s)
    if blocks[0] < 1 or blocks[1] < 1:
        raise RuntimeError(f"Given input with spatial size ({shape[-2]}, {shape[-1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), calculated shape of the array of "
                           f"sliding blocks as ({blocks[0]}, {blocks[1]}), but its components must be at least one.")
    out = (shape[-3] * k[0] * k[1], blocks[0] * blocks[1])
    return k, d, p, s, blocks, (out if len(shape) == 3 else (shape[0], *out))


def _im2col_meta(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks of a batched image into columns: PyTorch's ``F.unfold`` (im2col).

    Exported as ``ember.nn.functional.unfold``; the registry calls it ``im2col``
    because ``unfold`` is :meth:`Tensor.unfold` (a view op).

    Args:
        input (Tensor): (N, C, H, W) or unbatched (C, H, W); bool, floating or complex.
        kernel_size (int or tuple[int, int]): block size.
        dilation (int or tuple[int, int]): spacing of block elements. Default 1.
        padding (int or tuple[int, int]): zeros on both sides of H and W. Default 0.
        stride (int or tuple[int, int]): step between blocks. Default 1.

    Returns:
        Tensor: (N, C * kH * kW, L) (unbatched: (C * kH * kW, L)), where L counts the
        blocks; row ``c * kH * kW + i * kW + j`` holds element (i, j) of every block of channel c.

    Raises:
        RuntimeError: for wrong dims or empty non-batch dims, bad parameters, or no block fitting.
        NotImplementedError: for integer dtypes.

    Example:
        >>> import ember
        >>> x = ember.arange(9.).reshape(1, 1, 3, 3)
        >>> ember.nn.functional.unfold(x, 2)
        tensor([[[0., 1., 3., 4.],
                 [1., 2., 4., 5.],
                 [3., 4., 6., 7.],
                 [4., 5., 7., 8.]]])
    """
    return MetaArray(_im2col_plan(input, kernel_size, dilation, padding, stride)[-1], input._data.dtype)


def _im2col_cpu(input, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s, blocks, out = _im2col_plan(input, kernel_size, dilation, padding, stride)
    x = input._data
    if x.ndim == 3:
        x = x[None]
    windows = _im2col_windows(x, k, s, p, p, d, blocks)
    return np.array(windows, order="C").reshape(out)


im2col = defop("im2col", _im2col_meta, cpu=_im2col_cpu, tags=_NN_ONLY)


@_memoized
def _fold_plan(input, output_size, kernel_size, dilation, padding, stride):
    _check_tensor("fold", "input", input)
    out_size = _pair_param("output_size", output_size)
    k, d, p, s = _block_params(kernel_size, dilation, padding, stride)
    shape = input._data.shape
    if len(shape) not in (2, 3) or 0 in shape[len(shape) - 2:]:
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {_fmt(shape)}")
    _check_dtype("col2im_out_cpu", input, _FOLD_TYPES)
    rows, length = shape[-2:]
    if rows % (k[0] * k[1]):
        raise RuntimeError(f"Expected size of input's dimension {len(shape) - 2} to be divisible by the product of "
                           f"kernel_size, but got input.size({len(shape) - 2})={rows} and "
                           f"kernel_size=({k[0]}, {k[1]}).")
    blocks = _blocks(out_size, k, d, p, s)
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"Given output_size=({out_size[0]}, {out_size[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), expected "
                           f"size of input's dimension {len(shape) - 1} to match the calculated number of sliding "
                           f"blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size({len(shape) - 1})={length}.")
    if blocks[0] < 1 or blocks[1] < 1:
        raise RuntimeError(f"Given output_size=({out_size[0]}, {out_size[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), calculated "
                           f"shape of the array of sliding blocks as ({blocks[0]}, {blocks[1]}), but its components "
                           "must be at least one.")
    channels = rows // (k[0] * k[1])
    out = (channels, *out_size)
    return k, d, p, s, blocks, out_size, (out if len(shape) == 2 else (shape[0], *out))


def _fold_meta(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum columns of sliding blocks back into a batched image: PyTorch's ``F.fold`` (col2im).

    The adjoint of :func:`ember.nn.functional.unfold`: overlapping block elements add up.

    Args:
        input (Tensor): (N, C * kH * kW, L) or unbatched (C * kH * kW, L); bool, floating or complex.
        output_size (int or tuple[int, int]): (H, W) of the image.
        kernel_size (int or tuple[int, int]): block size.
        dilation, padding, stride (int or tuple[int, int]): as for ``unfold``.

    Returns:
        Tensor: (N, C, H, W) (unbatched: (C, H, W)).

    Raises:
        RuntimeError: for wrong dims, a row count not divisible by kH * kW, or an L
            that is not the number of blocks of ``output_size``.
        NotImplementedError: for integer dtypes.

    Example:
        >>> import ember
        >>> cols = ember.ones(1, 4, 4)
        >>> ember.nn.functional.fold(cols, (3, 3), 2)
        tensor([[[[1., 2., 1.],
                  [2., 4., 2.],
                  [1., 2., 1.]]]])
    """
    return MetaArray(_fold_plan(input, output_size, kernel_size, dilation, padding, stride)[-1], input._data.dtype)


def _fold_cpu(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s, blocks, out_size, out = _fold_plan(input, output_size, kernel_size, dilation, padding, stride)
    x = _compute(input._data)
    planes = math.prod(out[:-2])
    result = _col2im(x.reshape(planes, k[0] * k[1], blocks[0] * blocks[1]), planes, out_size, k, blocks, s, p, d)
    return result.reshape(out).astype(input._data.dtype, copy=False)


fold = defop("fold", _fold_meta, cpu=_fold_cpu, tags=_NN_ONLY)


# -- convolution, im2col and fold over xp (numpy or CuPy): the CUDA kernels -------------------------------
#
# The CPU keeps its ember._C kernels above; CuPy arrays take these paths, registered below as the "cuda"
# kernels of convolution, conv{1,2,3}d, conv_transpose{1,2,3}d, im2col and fold. They use only the array
# namespace ``xp`` of their inputs, so they run on numpy arrays too (tests/cuda/test_cuda_conv.py checks
# them there against the CPU kernels). A convolution is im2col (a strided window view of the zero-padded
# input, copied once into columns ordered (group, C / groups * taps, N * positions)) and one batched matrix
# product over the groups: cuBLAS for floating and complex dtypes, CuPy's integer GEMM kernel for integers
# (exact, wrapping like numpy's). float16 computes in float32, as on CPU. A transposed convolution is the
# product the other way round followed by col2im, which fold shares: one strided add per kernel tap.
# That generic path costs about five kernel launches per forward convolution, whatever its size (small CNNs
# are bound by the host's time per launch); float convolutions take the fast path below instead (three
# launches forward, and a fused backward for the derivative).


# On CuPy arrays, im2col and col2im can each run as one CuPy ElementwiseKernel (zero padding folded into
# the index arithmetic, any input strides) instead of a padded copy plus a layout copy, or one add per tap.
# tests/cuda/test_cuda_conv.py's test_fused_* check them against CPU, and passed on the H200 (2026-11-30);
# they stay off until their speed has been measured against the default path. Float convolutions don't reach
# them while _FAST_CUDA is on (its RawKernels below take them first).
_FUSED_CUDA = False
_cuda_kernels = {}  # name -> compiled cupy.ElementwiseKernel

_IM2COL_PARAMS = ("raw T x, int64 C, int64 N, int64 D, int64 H, int64 W, int64 KD, int64 KH, int64 KW, int64 OD, "
                  "int64 OH, int64 OW, int64 sd, int64 sh, int64 sw, int64 pd, int64 ph, int64 pw, int64 dd, int64 dh, "
                  "int64 dw, int64 xn, int64 xc, int64 xd, int64 xh, int64 xw")
# element i of the columns (C, KD, KH, KW, N, OD, OH, OW): input element (n, c, o * s - p + k * d) or 0 outside
_IM2COL_BODY = """
    long long r = i;
    const long long ow = r % OW; r /= OW;
    const long long oh = r % OH; r /= OH;
    const long long od = r % OD; r /= OD;
    const long long n = r % N; r /= N;
    const long long kw = r % KW; r /= KW;
    const long long kh = r % KH; r /= KH;
    const long long kd = r % KD;
    const long long c = r / KD;
    const long long z = od * sd - pd + kd * dd;
    const long long y = oh * sh - ph + kh * dh;
    const long long q = ow * sw - pw + kw * dw;
    if (z < 0 || z >= D || y < 0 || y >= H || q < 0 || q >= W) {
        col = T(0);
    } else {
        col = x[n * xn + c * xc + z * xd + y * xh + q * xw];
    }
"""
_COL2IM_PARAMS = ("raw T cols, int64 M2, int64 D, int64 H, int64 W, int64 KD, int64 KH, int64 KW, int64 BD, "
                  "int64 BH, int64 BW, int64 sd, int64 sh, int64 sw, int64 pd, int64 ph, int64 pw, int64 dd, int64 dh, "
                  "int64 dw, int64 ckd, int64 ckh, int64 ckw, int64 cm1, int64 cm2, int64 cbd, int64 cbh, int64 cbw")
# element i of the images (M1, M2, D, H, W): the sum over the taps k whose block b has b * s - p + k * d there
_COL2IM_BODY = """
    long long r = i;
    const long long q = r % W; r /= W;
    const long long y = r % H; r /= H;
    const long long z = r % D; r /= D;
    const long long m2 = r % M2;
    const long long m1 = r / M2;
    const long long base = m1 * cm1 + m2 * cm2;
    T acc = T(0);
    for (long long kd = 0; kd < KD; ++kd) {
        const long long tz = z + pd - kd * dd;
        if (tz < 0 || tz % sd != 0 || tz / sd >= BD) continue;
        for (long long kh = 0; kh < KH; ++kh) {
            const long long ty = y + ph - kh * dh;
            if (ty < 0 || ty % sh != 0 || ty / sh >= BH) continue;
            for (long long kw = 0; kw < KW; ++kw) {
                const long long tq = q + pw - kw * dw;
                if (tq < 0 || tq % sw != 0 || tq / sw >= BW) continue;
                acc += cols[base + kd * ckd + kh * ckh + kw * ckw
                            + (tz / sd) * cbd + (ty / sh) * cbh + (tq / sw) * cbw];
            }
        }
    }
    img = acc;
"""


def _cuda_kernel(name):
    kernel = _cuda_kernels.get(name)
    if kernel is None:
        import cupy

        params, out, body = {"im2col": (_IM2COL_PARAMS, "T col", _IM2COL_BODY),
                             "col2im": (_COL2IM_PARAMS, "T img", _COL2IM_BODY)}[name]
        kernel = _cuda_kernels[name] = cupy.ElementwiseKernel(params, out, body, f"ember_{name}")
    return kernel


def _cuda_flat(cp, a):
    """``a``'s memory span as a 1-D CuPy array, and ``a``'s element strides into it (a copy's, if any is negative)."""
    if any(s < 0 for s in a.strides):
        a = cp.ascontiguousarray(a)
    strides = tuple(s // a.itemsize for s in a.strides)
    span = 1 + sum((d - 1) * s for d, s in zip(a.shape, strides))
    return cp.ndarray((span,), a.dtype, memptr=a.data, strides=(a.itemsize,)), strides


def _cuda_columns(x, kernel, stride, pad_lo, dilation, out):
    """The columns (C, *kernel, N, *out) of CuPy x (N, C, *spatial), non-empty, in one kernel launch."""
    import cupy as cp

    flat, st = _cuda_flat(cp, x)
    cols = cp.empty((x.shape[1], *kernel, x.shape[0], *out), x.dtype)
    _cuda_kernel("im2col")(flat, x.shape[1], x.shape[0], *_lift3(x.shape[2:], 1), *_lift3(kernel, 1), *_lift3(out, 1),
                           *_lift3(stride, 1), *_lift3(pad_lo, 0), *_lift3(dilation, 1), st[0], st[1],
                           *_lift3(st[2:], 0), cols)
    return cols


def _cuda_col2im(cols, image, kernel, blocks, stride, pad, dilation):
    """``_xp_col2im`` of CuPy ``cols`` (*kernel, *lead, *blocks), 1 or 2 lead dims: one gather launch, no atomics."""
    import cupy as cp

    n = len(kernel)
    lead = cols.shape[n:cols.ndim - n]
    flat, st = _cuda_flat(cp, cols)
    lead_strides = (0,) * (2 - len(lead)) + st[n:n + len(lead)]
    img = cp.empty((*lead, *image), cols.dtype)
    _cuda_kernel("col2im")(flat, lead[-1], *_lift3(image, 1), *_lift3(kernel, 1), *_lift3(blocks, 1),
                           *_lift3(stride, 1), *_lift3(pad, 0), *_lift3(dilation, 1), *_lift3(st[:n], 0),
                           *lead_strides, *_lift3(st[n + len(lead):], 0), img)
    return img


# The fast CUDA path of float convolutions (float32 and float64; float16/bfloat16 computed in float32), on by
# default. Every CuPy call costs the host about 5-10 us, and a small CNN's step is bound by that host time, so
# a convolution here is as few calls as it can be:
#
# * forward: one im2col launch (the columns (C * K, N * P) gathered from the unpadded input, any strides, the
#   padding done by index arithmetic), one GEMM (one direct cuBLAS call, _fast_gemm), one launch that lays the
#   product (C_out, N, P) out as (N, C_out, P) and adds the bias;
# * backward (groups 1, for the derivative of ``convolution`` in a backward pass that records nothing): one
#   launch that lays the output gradient out as rows (C_out, N * P) and sums each row (the bias gradient),
#   one im2col launch and one GEMM for the weight gradient (rows @ columns^T: the weight's own layout), and
#   one GEMM (weight^T @ rows: every tap's contribution) and one col2im launch (a gather, no atomics) for
#   the input gradient.
#
# The kernels are CUDA C compiled by NVRTC (cupy.RawModule), one module per element type and index width.
_FAST_CUDA = True
_FAST_TYPES = {_F32: "float", _F64: "double"}
_FAST_THREADS = 256  # threads per block (the row kernel's reduction assumes exactly this many)
_FAST_MAX_BLOCKS = 1 << 16  # the element-wise kernels loop over the rest (a grid-stride loop)
_INT32_LIMIT = 2**31 - 1 - _FAST_THREADS * _FAST_MAX_BLOCKS  # 32-bit indexing below this many elements
_fast_modules = {}  # (device, dtype, 64-bit indexing) -> the functions of _FAST_KERNELS, or None (no build)

_FAST_SOURCE = r"""
// T: the element type (float or double); I: the index type (int, or long long for large arrays).
//
// Each kernel takes its scalars (sizes, strides, paddings, flags: what its launch plan fixes) as ONE struct
// passed by value: CuPy converts every launch argument on the host (0.3-0.5 us each), so one struct costs
// what one scalar does. Every field is an I, in the order of nn_conv._FAST_FIELDS (the host packs the
// values as consecutive I words: no padding, offsets k * sizeof(I)); the kernels copy them into locals
// and compute as with separate arguments.

struct ConvIm2colArgs {
    I total, N, D, H, W, KD, KH, KW, OD, OH, OW, sd, sh, sw, pd, ph, pw, dd, dh, dw, xn, xc, xd, xh, xw;
};
struct ConvOutputArgs {
    I total, CO, N, P, has_bias;
};
struct ConvGradRowsArgs {
    I CO, N, P;
};
struct ConvCol2imArgs {
    I total, C, N, D, H, W, KD, KH, KW, OD, OH, OW, sd, sh, sw, pd, ph, pw, dd, dh, dw;
};

// cols (C, KD, KH, KW, N, OD, OH, OW), C-contiguous: element (c, k, n, o) is the input element
// (n, c, o * s - p + k * d) of x (N, C, D, H, W) with element strides xn..xw, or 0 outside the input.
extern "C" __global__ void ember_conv_im2col(
        const T* __restrict__ x, T* __restrict__ cols, const ConvIm2colArgs a) {
    const I total = a.total, N = a.N, D = a.D, H = a.H, W = a.W, KD = a.KD, KH = a.KH, KW = a.KW;
    const I OD = a.OD, OH = a.OH, OW = a.OW, sd = a.sd, sh = a.sh, sw = a.sw, pd = a.pd, ph = a.ph, pw = a.pw;
    const I dd = a.dd, dh = a.dh, dw = a.dw, xn = a.xn, xc = a.xc, xd = a.xd, xh = a.xh, xw = a.xw;
    const I step = (I)blockDim.x * (I)gridDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < total; i += step) {
        I r = i;
        const I ow = r % OW; r /= OW;
        const I oh = r % OH; r /= OH;
        const I od = r % OD; r /= OD;
        const I n = r % N; r /= N;
        const I kw = r % KW; r /= KW;
        const I kh = r % KH; r /= KH;
        const I kd = r % KD;
        const I c = r / KD;
        const I z = od * sd - pd + kd * dd;
        const I y = oh * sh - ph + kh * dh;
        const I q = ow * sw - pw + kw * dw;
        T v = T(0);
        if (z >= 0 && z < D && y >= 0 && y < H && q >= 0 && q < W) {
            v = x[n * xn + c * xc + z * xd + y * xh + q * xw];
        }
        cols[i] = v;
    }
}

// out (N, CO, P) = product (CO, N, P) with its first two dims swapped, plus bias[co] when has_bias.
extern "C" __global__ void ember_conv_output(
        const T* __restrict__ product, const T* __restrict__ bias, T* __restrict__ out, const ConvOutputArgs a) {
    const I total = a.total, CO = a.CO, N = a.N, P = a.P, has_bias = a.has_bias;
    const I step = (I)blockDim.x * (I)gridDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < total; i += step) {
        const I p = i % P;
        const I r = i / P;
        const I co = r % CO;
        const I n = r / CO;
        T v = product[(co * N + n) * P + p];
        if (has_bias) {
            v += bias[co];
        }
        out[i] = v;
    }
}

// One block of THREADS threads per output channel co: rows (CO, N * P) = gy (N, CO, P) with its first two
// dims swapped, and sums[co] = the sum of row co (each thread's strided partial sum, then a tree).
extern "C" __global__ void ember_conv_grad_rows(
        const T* __restrict__ gy, T* __restrict__ rows, T* __restrict__ sums, const ConvGradRowsArgs a) {
    const I CO = a.CO, N = a.N, P = a.P;
    __shared__ T part[THREADS];
    const I co = (I)blockIdx.x;
    const I length = N * P;
    T acc = T(0);
    for (I j = (I)threadIdx.x; j < length; j += THREADS) {
        const I n = j / P;
        const T v = gy[(n * CO + co) * P + (j - n * P)];
        rows[co * length + j] = v;
        acc += v;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            part[threadIdx.x] += part[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        sums[co] = part[0];
    }
}

// img (N, C, D, H, W), C-contiguous: element (n, c, z) sums cols (C, KD, KH, KW, N, OD, OH, OW) over the
// taps k (kd, kh, kw ascending) whose output position o has o * s - p + k * d == z.
extern "C" __global__ void ember_conv_col2im(
        const T* __restrict__ cols, T* __restrict__ img, const ConvCol2imArgs a) {
    const I total = a.total, C = a.C, N = a.N, D = a.D, H = a.H, W = a.W, KD = a.KD, KH = a.KH, KW = a.KW;
    const I OD = a.OD, OH = a.OH, OW = a.OW, sd = a.sd, sh = a.sh, sw = a.sw, pd = a.pd, ph = a.ph, pw = a.pw;
    const I dd = a.dd, dh = a.dh, dw = a.dw;
    const I P = OD * OH * OW;
    const I step = (I)blockDim.x * (I)gridDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < total; i += step) {
        I r = i;
        const I q = r % W; r /= W;
        const I y = r % H; r /= H;
        const I z = r % D; r /= D;
        const I c = r % C;
        const I n = r / C;
        T acc = T(0);
        for (I kd = 0; kd < KD; ++kd) {
            const I tz = z + pd - kd * dd;
            if (tz < 0 || tz % sd != 0 || tz / sd >= OD) continue;
            for (I kh = 0; kh < KH; ++kh) {
                const I ty = y + ph - kh * dh;
                if (ty < 0 || ty % sh != 0 || ty / sh >= OH) continue;
                for (I kw = 0; kw < KW; ++kw) {
                    const I tq = q + pw - kw * dw;
                    if (tq < 0 || tq % sw != 0 || tq / sw >= OW) continue;
                    acc += cols[(((c * KD + kd) * KH + kh) * KW + kw) * N * P + n * P
                                + ((tz / sd) * OH + ty / sh) * OW + tq / sw];
                }
            }
        }
        img[i] = acc;
    }
}
"""
_FAST_KERNELS = ("im2col", "output", "grad_rows", "col2im")

#: The fields of each kernel's by-value struct (``Conv*Args`` in ``_FAST_SOURCE``), in their declaration order,
#: every one of the index type I. tests/cuda/test_cuda_conv.py checks this layout against g++'s (offsetof).
_FAST_FIELDS = {
    "im2col": ("total", "N", "D", "H", "W", "KD", "KH", "KW", "OD", "OH", "OW", "sd", "sh", "sw", "pd", "ph", "pw",
               "dd", "dh", "dw", "xn", "xc", "xd", "xh", "xw"),
    "output": ("total", "CO", "N", "P", "has_bias"),
    "grad_rows": ("CO", "N", "P"),
    "col2im": ("total", "C", "N", "D", "H", "W", "KD", "KH", "KW", "OD", "OH", "OW", "sd", "sh", "sw", "pd", "ph",
               "pw", "dd", "dh", "dw"),
}


def _fast_struct_dtype(kernel, index):
    """The numpy structured dtype of ``kernel``'s argument struct with index type ``index`` (np.int32 or
    np.int64): one field per name of ``_FAST_FIELDS[kernel]``, consecutive, as the C struct lays them out."""
    return np.dtype([(name, index) for name in _FAST_FIELDS[kernel]])


def _fast_struct(kernel, index, values):
    """``kernel``'s by-value struct argument: ``values`` (one per field of ``_FAST_FIELDS[kernel]``, in order).

    Args:
        kernel (str): a name of ``_FAST_KERNELS``.
        index (type): np.int32 or np.int64, the kernels' index type I.
        values (sequence of int): the fields' values.

    Returns:
        numpy.ndarray: one element of a void dtype of the struct's size (its bytes), read-only. CuPy passes a
        numpy array of one element by value (its bytes copied into the launch). It is a void dtype rather than
        the structured one because CuPy reads the array's address from ``__array_interface__``, which lists
        every field of a structured dtype (about 13 us a launch, against 1).

    Raises:
        OverflowError: a value out of ``index``'s range (as ``index(value)``).
        ValueError: not one value per field.
    """
    dtype = _fast_struct_dtype(kernel, index)
    if len(values) != len(dtype.names):
        raise ValueError(f"{kernel}: {len(values)} values for the {len(dtype.names)} fields {dtype.names}")
    record = np.array([tuple(map(index, values))], dtype)
    struct = record.view(np.dtype((np.void, dtype.itemsize)))
    struct.flags.writeable = False  # shared by every launch of its plan
    return struct


def _fast_kernels(xp, device, dtype, wide):
    """The compiled kernels of ``_FAST_SOURCE`` for ``dtype`` (float32/float64) on GPU ``device``, with 64-bit
    indexing when ``wide``: a tuple (im2col, output, grad_rows, col2im), or None when they did not compile
    (then every call takes the generic path, after one warning)."""
    key = (device, dtype, wide)
    kernels = _fast_modules.get(key, False)
    if kernels is False:
        code = (f"#define T {_FAST_TYPES[dtype]}\n#define I {'long long' if wide else 'int'}\n"
                f"#define THREADS {_FAST_THREADS}\n{_FAST_SOURCE}")
        try:
            module = xp.RawModule(code=code)
            kernels = tuple(module.get_function(f"ember_conv_{name}") for name in _FAST_KERNELS)
        except Exception as exc:  # a kernel that does not build leaves its calls to the generic path
            warnings.warn(f"ember: the CUDA convolution kernels for {dtype} did not compile ({type(exc).__name__}: "
                          f"{exc}); convolutions take the generic path", RuntimeWarning, stacklevel=4)
            kernels = None
        _fast_modules[key] = kernels
    return kernels


def _fast_device(xp, *arrays):
    """The current GPU when every array is on it (the kernels launch there), else None."""
    device = xp.cuda.runtime.getDevice()
    for a in arrays:
        if a.data.device_id != device:
            return None
    return device


def _fast_grid(total):
    return (min((total + _FAST_THREADS - 1) // _FAST_THREADS, _FAST_MAX_BLOCKS),)


def _fast_im2col_args(x_shape, x_strides, item, kernel, stride, pad_lo, dilation, out, index):
    """The grid and the struct argument of ``ember_conv_im2col`` (after ``x`` and ``cols``)."""
    N, C = x_shape[:2]
    total = C * math.prod(kernel) * N * math.prod(out)
    values = (total, N, *_lift3(x_shape[2:], 1), *_lift3(kernel, 1), *_lift3(out, 1), *_lift3(stride, 1),
              *_lift3(pad_lo, 0), *_lift3(dilation, 1), x_strides[0] // item, x_strides[1] // item,
              *_lift3([s // item for s in x_strides[2:]], 0))
    return _fast_grid(total), _fast_struct("im2col", index, values)


def _fast_index(*sizes):
    """(64-bit indexing?, the numpy type of the index arguments) for kernels whose arrays hold ``sizes`` elements."""
    wide = max(sizes) > _INT32_LIMIT
    return wide, (np.int64 if wide else np.int32)


def _fast_span(shape, strides, item):
    """Elements from an array's first element to its farthest one, plus one (what its indexing reaches)."""
    return 1 + sum((d - 1) * abs(s) for d, s in zip(shape, strides)) // item


# Launch plans (shapes, grids and the kernels' struct arguments), by the arrays' metadata and the convolution's
# parameters: a training loop repeats a handful of calls. None marks a call the fast path does not take. A call
# reads its plan and the compiled kernels from two dicts and launches with the plan's structs: nothing per call
# depends on the sizes but the look-ups.
_fast_plans = {}
_FAST_PLANS_MAX = 512


def _fast_forward_plan(x_shape, x_strides, dtype, w_shape, w_dtype, b_dtype, stride, pad_lo, pad_hi, dilation,
                       groups):
    """The launch plan of :func:`_fast_conv_forward`, or None for a call it does not take: a tuple (the compute
    dtype, the kernels' variant (compute dtype, 64-bit indexing), the columns' shape, im2col's grid
    and struct, the weight's and the columns' matrix shapes for the GEMM (the columns' None when 2-D), the output's
    shape, the output kernel's grid and struct)."""
    compute = _F32 if dtype in _HALF_TYPES else dtype
    if compute not in _FAST_TYPES or w_dtype != dtype or (b_dtype is not None and b_dtype != dtype):
        return None
    n = len(w_shape) - 2
    N, C = x_shape[:2]
    out_channels = w_shape[0]
    kernel = w_shape[2:]
    out = tuple((x_shape[2 + i] + pad_lo[i] + pad_hi[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(n))
    item = compute.itemsize
    if compute is not dtype:  # float16/bfloat16 run on a C-contiguous float32 copy
        x_strides = tuple(item * math.prod(x_shape[i + 1:]) for i in range(len(x_shape)))
    if N == 0 or C == 0 or out_channels == 0 or min(out) <= 0 or any(s % item for s in x_strides):
        return None
    K, P = math.prod(kernel), math.prod(out)
    wide, index = _fast_index(_fast_span(x_shape, x_strides, item), C * K * N * P, N * out_channels * P)
    im2col_grid, im2col_struct = _fast_im2col_args(x_shape, x_strides, item, kernel, stride, pad_lo, dilation, out,
                                                   index)
    if groups == 1:
        w_matrix, cols_matrix = (out_channels, C * K), None
    else:
        cpg, opg = C // groups, out_channels // groups
        w_matrix, cols_matrix = (groups, opg, cpg * K), (groups, cpg * K, N * P)
    total = N * out_channels * P
    output_struct = _fast_struct("output", index, (total, out_channels, N, P, int(b_dtype is not None)))
    return (compute, (compute, wide), (C * K, N * P), im2col_grid, im2col_struct, w_matrix, cols_matrix,
            (N, out_channels, *out), _fast_grid(total), output_struct)


def _fast_plan(key, build):
    """The memoised plan of a fast-path call (``build(*key[1:])``; None for calls the path does not take)."""
    plan = _fast_plans.get(key, False)
    if plan is False:
        if len(_fast_plans) >= _FAST_PLANS_MAX:
            _fast_plans.clear()
        plan = _fast_plans[key] = build(*key[1:])
    return plan


def _fast_conv_forward(xp, x, w, b, stride, pad_lo, pad_hi, dilation, groups):
    """``_xp_conv_forward`` of CuPy arrays in three launches (im2col, GEMM, layout and bias), or None for the
    calls it does not take (other dtypes, empty arrays, arrays on another GPU than the current one).

    The parameters are tuples of ints. float16/bfloat16 compute in float32 (one conversion per operand and
    one of the result), as the generic path does.
    """
    dtype = x.dtype
    key = ("forward", x.shape, x.strides, dtype, w.shape, w.dtype, None if b is None else b.dtype, stride, pad_lo,
           pad_hi, dilation, groups)
    plan = _fast_plan(key, _fast_forward_plan)
    if plan is None:
        return None
    compute, variant, cols_shape, im2col_grid, im2col_struct, w_matrix, cols_matrix, out_shape, out_grid, \
        output_struct = plan
    device = _fast_device(xp, x, w) if b is None else _fast_device(xp, x, w, b)
    kernels = None if device is None else _fast_kernels(xp, device, *variant)
    if kernels is None:
        return None
    im2col, output, _, _ = kernels
    if compute is not dtype:
        x, w = x.astype(compute, order="C"), w.astype(compute)
        b = None if b is None else b.astype(compute)
    elif b is not None and not b._c_contiguous:
        b = xp.ascontiguousarray(b)
    block = (_FAST_THREADS,)
    cols = xp.empty(cols_shape, compute)
    im2col(im2col_grid, block, (x, cols, im2col_struct))
    product = _fast_gemm(xp, w.reshape(w_matrix), cols if cols_matrix is None else cols.reshape(cols_matrix))
    if not product._c_contiguous:  # (cupy.matmul's results are; the kernel reads C order)
        product = xp.ascontiguousarray(product)
    result = xp.empty(out_shape, compute)
    # without a bias the kernel reads no bias: any pointer does
    output(out_grid, block, (product, product if b is None else b, result, output_struct))
    return result if compute is dtype else result.astype(dtype)


def _fast_backward_plan(gy_shape, x_shape, x_strides, dtype, gy_dtype, w_shape, w_dtype, stride, padding, dilation):
    """The launch plan of :func:`_fast_conv_backward`, or None for a call it does not take: a tuple (the kernels'
    variant (dtype, 64-bit indexing), the rows' shape, the row kernel's grid (one block per output channel: also
    the sums' shape) and struct, the columns' shape, im2col's grid and struct, the weight's matrix shape, col2im's
    grid and struct)."""
    if dtype not in _FAST_TYPES or gy_dtype != dtype or w_dtype != dtype:
        return None
    N, C = x_shape[:2]
    out_channels = w_shape[0]
    kernel = w_shape[2:]
    out = gy_shape[2:]
    item = dtype.itemsize
    if N == 0 or C == 0 or out_channels == 0 or 0 in out or any(s % item for s in x_strides):
        return None
    K, P = math.prod(kernel), math.prod(out)
    wide, index = _fast_index(_fast_span(x_shape, x_strides, item), C * K * N * P, out_channels * N * P,
                              math.prod(x_shape))
    im2col_grid, im2col_struct = _fast_im2col_args(x_shape, x_strides, item, kernel, stride, padding, dilation, out,
                                                   index)
    total = math.prod(x_shape)
    col2im_struct = _fast_struct("col2im", index, (total, C, N, *_lift3(x_shape[2:], 1), *_lift3(kernel, 1),
                                                   *_lift3(out, 1), *_lift3(stride, 1), *_lift3(padding, 0),
                                                   *_lift3(dilation, 1)))
    rows_struct = _fast_struct("grad_rows", index, (out_channels, N, P))
    return ((dtype, wide), (out_channels, N * P), (out_channels,), rows_struct, (C * K, N * P), im2col_grid,
            im2col_struct, (out_channels, C * K), _fast_grid(total), col2im_struct)


def _fast_conv_backward(xp, gy, x, w, stride, padding, dilation, mask):
    """The gradients ``(d x, d w, d b)`` (None where ``mask`` is False) of an ungrouped convolution of CuPy
    arrays ``y = conv(x, w) + b`` given ``gy = dL/dy``, or None for the calls it does not take (dtypes other
    than float32/float64, mixed dtypes, empty arrays, arrays on another GPU than the current one).

    With ``rows`` (C_out, N * P) the output gradient's rows and ``cols`` (C * K, N * P) the forward's columns:
    ``d w = rows @ cols^T``, ``d b`` the row sums, and ``d x`` is col2im of ``w^T @ rows`` (the adjoint of
    im2col), so the input gradient needs neither a flipped kernel nor a padded copy. The parameters are
    tuples of ints.
    """
    dtype = x.dtype
    key = ("backward", gy.shape, x.shape, x.strides, dtype, gy.dtype, w.shape, w.dtype, stride, padding, dilation)
    plan = _fast_plan(key, _fast_backward_plan)
    if plan is None:
        return None
    variant, rows_shape, rows_grid, rows_struct, cols_shape, im2col_grid, im2col_struct, w_matrix, col2im_grid, \
        col2im_struct = plan
    device = _fast_device(xp, gy, x, w)
    kernels = None if device is None else _fast_kernels(xp, device, *variant)
    if kernels is None:
        return None
    im2col, _, grad_rows, col2im = kernels
    if not gy._c_contiguous:
        gy = xp.ascontiguousarray(gy)
    block = (_FAST_THREADS,)
    rows = xp.empty(rows_shape, dtype)
    sums = xp.empty(rows_grid, dtype)
    grad_rows(rows_grid, block, (gy, rows, sums, rows_struct))
    grad_x = grad_w = None
    if mask[1]:
        cols = xp.empty(cols_shape, dtype)
        im2col(im2col_grid, block, (x, cols, im2col_struct))
        grad_w = _fast_gemm(xp, rows, cols.T).reshape(w.shape)
    if mask[0]:
        taps = _fast_gemm(xp, w.reshape(w_matrix).T, rows)  # (C * K, N * P): the gradient of the columns
        if not taps._c_contiguous:
            taps = xp.ascontiguousarray(taps)
        grad_x = xp.empty(x.shape, dtype)
        col2im(col2im_grid, block, (taps, grad_x, col2im_struct))
    return grad_x, grad_w, sums if mask[2] else None


#: Whether the fast path's 2-D float GEMMs call cuBLAS directly (:func:`ember.cuda._bf16.product_2d`) rather than
#: through ``cupy.matmul``: on the H200's machine 18.7 against 21.7 us of host time per call (the same cuBLAS
#: routine and compute type, so the same values).
_DIRECT_GEMM = True


_gemm_module = None  # ember.cuda._bf16 once imported (an import statement costs every call a look-up)


def _fast_gemm(xp, a, b):
    """``a @ b`` of 2-D arrays for the fast path: one direct cuBLAS call on CuPy float32/float64 operands."""
    global _gemm_module
    if _DIRECT_GEMM and getattr(xp, "__name__", "") == "cupy" and a.ndim == b.ndim == 2 and a.dtype == b.dtype:
        if _gemm_module is None:
            from ..cuda import _bf16 as _gemm_module  # (ember.cuda imports this module: imported on first use)
        if a.dtype in _gemm_module.FLOAT_GEMM_DTYPES and max(a.shape + b.shape) < 2**31:  # cuBLAS' 32-bit sizes
            return _gemm_module.product_2d(a, b)
    return xp.matmul(a, b)


def convolution_backward_cuda(grad, input, weight, stride, padding, dilation, groups, output_mask):
    """The gradients of ``convolution(input, weight, bias, stride, padding, dilation, False, 0, groups)`` on CUDA
    tensors, for the derivative of ``convolution`` in a backward pass that records nothing.

    Args:
        grad (Tensor): the output gradient (N, C_out, *out).
        input (Tensor): (N, C, *spatial); weight (Tensor): (C_out, C, *kernel).
        stride, padding, dilation (tuple[int]): one int per spatial dim.
        groups (int): only 1 is taken.
        output_mask (sequence of 3 bool): which of the input, weight and bias gradients to compute.

    Returns:
        ``(d input, d weight, d bias)``: new CUDA tensors, None where ``output_mask`` is False; or None when
        the fast path does not take the call (CPU tensors, groups, dtypes other than float32/float64, empty
        tensors, or ``_FAST_CUDA`` off): the caller then runs the generic formulas.
    """
    g = grad._data
    if type(g) is np.ndarray or not _FAST_CUDA or groups != 1:
        return None
    xp = _namespace(g, g)
    if xp is np:
        return None
    grads = _fast_conv_backward(xp, g, input._data, weight._data, stride, padding, dilation, output_mask)
    if grads is None:
        return None
    device = grad._device
    gx, gw, gb = grads
    return (None if gx is None else Tensor._make(gx, device), None if gw is None else Tensor._make(gw, device),
            None if gb is None else Tensor._make(gb, device))


def _xp_as_strided(xp, x, shape, strides):
    """A view of ``x`` with ``shape`` and byte ``strides``, in ``x``'s namespace; never written through."""
    if xp is np:
        return as_strided(x, shape, strides, writeable=False)
    from cupy.lib.stride_tricks import as_strided as device_as_strided

    return device_as_strided(x, shape, strides)


def _xp_windows(xp, x, kernel, stride, pad_lo, pad_hi, dilation, out):
    """The sliding windows of ``x`` (N, C, *spatial) as a view (N, C, *kernel, *out).

    With padding, the view reads a zero-padded copy of ``x``; ``x`` itself is never written.
    """
    n = len(kernel)
    if any(pad_lo) or any(pad_hi):
        padded = xp.zeros((*x.shape[:2], *(x.shape[2 + i] + pad_lo[i] + pad_hi[i] for i in range(n))), x.dtype)
        padded[(slice(None), slice(None), *(slice(pad_lo[i], pad_lo[i] + x.shape[2 + i]) for i in range(n)))] = x
        x = padded
    elif any(s < 0 for s in x.strides):
        x = xp.ascontiguousarray(x)
    st = x.strides
    strides = (st[0], st[1], *(st[2 + i] * dilation[i] for i in range(n)), *(st[2 + i] * stride[i] for i in range(n)))
    return _xp_as_strided(xp, x, (*x.shape[:2], *kernel, *out), strides)


def _xp_col2im(xp, cols, image, kernel, blocks, stride, pad, dilation):
    """Sum ``cols`` (*kernel, *lead, *blocks), any strides, into new images (*lead, *image).

    Kernel tap ``k`` of block ``l`` lands at ``l * stride - pad + k * dilation`` in each spatial dim;
    one strided in-place add per tap (bool adds are logical or, as on CPU).
    """
    n = len(kernel)
    lead = cols.shape[n:cols.ndim - n]
    if _FUSED_CUDA and xp is not np and 1 <= len(lead) <= 2:
        return _cuda_col2im(cols, image, kernel, blocks, stride, pad, dilation)
    full = tuple(max((blocks[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1, pad[i] + image[i])
                 for i in range(n))
    buffer = xp.zeros((*lead, *full), cols.dtype)
    head = (slice(None),) * len(lead)
    for offset in np.ndindex(*kernel):
        target = buffer[(*head, *(slice(offset[i] * dilation[i], offset[i] * dilation[i] + (blocks[i] - 1) * stride[i]
                                        + 1, stride[i]) for i in range(n)))]
        xp.add(target, cols[offset], out=target)
    return xp.ascontiguousarray(buffer[(*head, *(slice(pad[i], pad[i] + image[i]) for i in range(n)))])


def _xp_group_matmul(xp, a, b):
    """``a @ b`` of stacks (groups, M, K) and (groups, K, L): one batched GEMM, or per group for integers on GPU.

    CuPy's 2-D product runs an exact integer GEMM kernel (wrapping like numpy's); some CuPy versions compute
    batched integer products in floating point, so integers on the GPU take one 2-D product per group.
    """
    if xp is np or a.dtype.kind not in "biu":
        return xp.matmul(a, b)
    if a.shape[0] == 1:
        return xp.matmul(a[0], b[0])[None]
    return xp.stack([xp.matmul(a[g], b[g]) for g in range(a.shape[0])])


#: array type -> the namespace of its arrays (numpy or CuPy), as array_namespace answered for the first pair of
#: that type: its check of a CuPy array (``__cuda_array_interface__``) builds a dict, the dtype's ``descr`` in it,
#: on every call, a few us a convolution.
_NAMESPACES = {np.ndarray: np}


def _namespace(x, w):
    """``array_namespace(x, w)``, answered by the arrays' type once known (both of one type)."""
    t = type(x)
    xp = _NAMESPACES.get(t)
    if xp is None or type(w) is not t:
        xp = _array_namespace(x, w)
        if type(w) is t:
            _NAMESPACES[t] = xp
    return xp


def _xp_conv_forward(x, w, b, stride, pad_lo, pad_hi, dilation, groups):
    """Convolution of x (N, C, *spatial) by w (C_out, C / groups, *kernel), plus b (C_out,) or None; any namespace.

    Returns a new C-contiguous array of ``x``'s dtype and namespace.
    """
    xp = _namespace(x, w)
    if _FAST_CUDA and xp is not np:
        result = _fast_conv_forward(xp, x, w, b, stride, pad_lo, pad_hi, dilation, groups)
        if result is not None:
            return result
    dtype = x.dtype
    x, w = _compute(x), _compute(w)
    n = w.ndim - 2
    N, C = x.shape[:2]
    out_channels = w.shape[0]
    kernel = w.shape[2:]
    out = tuple((x.shape[2 + i] + pad_lo[i] + pad_hi[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(n))
    if N == 0 or out_channels == 0 or C == 0 or 0 in out:
        result = xp.zeros((N, out_channels, *out), x.dtype)
    else:
        cpg, opg = C // groups, out_channels // groups
        K, P = math.prod(kernel), math.prod(out)
        # columns (C, *kernel, N, *out), seen as (groups, C / groups * K, N * P): channel-and-tap rows, every
        # output position of the batch a column
        if _FUSED_CUDA and xp is not np:
            cols = _cuda_columns(x, kernel, stride, pad_lo, dilation, out)
        else:
            if K == 1 and not any(pad_lo) and not any(pad_hi) and all(s == 1 for s in stride):
                windows = x[(slice(None), slice(None), *(None,) * n)]  # a 1x1 kernel: the input is its own window
            else:
                windows = _xp_windows(xp, x, kernel, stride, pad_lo, pad_hi, dilation, out)
            cols = xp.ascontiguousarray(windows.transpose(1, *range(2, 2 + n), 0, *range(2 + n, 2 + 2 * n)))
        product = _xp_group_matmul(xp, w.reshape(groups, opg, cpg * K), cols.reshape(groups, cpg * K, N * P))
        result = product.reshape(out_channels, N, *out).swapaxes(0, 1)
    if b is not None:
        result = result + _compute(b).reshape((out_channels,) + (1,) * n)  # also lays out (N, C_out, ...)
    return xp.ascontiguousarray(result).astype(dtype, copy=False)


def _xp_conv_transpose_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    """Transposed convolution of x (N, C, *spatial) by w (C, C_out / groups, *kernel); any namespace.

    The matrix product gives every kernel tap's contribution of every input position (columns), which
    col2im sums into the output. Returns a new C-contiguous array of ``x``'s dtype and namespace.
    """
    xp = _array_namespace(x, w)
    dtype = x.dtype
    x, w = _compute(x), _compute(w)
    n, N, C, opg, out_channels, kernel, blocks, out = _transpose_geometry(
        x.shape, w.shape, stride, padding, output_padding, dilation, groups)
    if N == 0 or out_channels == 0 or C == 0:
        result = xp.zeros((N, out_channels, *out), x.dtype)
    else:
        cpg = C // groups
        K, L = math.prod(kernel), math.prod(blocks)
        wm = w.reshape(groups, cpg, opg * K).swapaxes(1, 2)  # (groups, C_out / groups * K, C / groups)
        xm = xp.ascontiguousarray(x.reshape(N, groups, cpg, L).transpose(1, 2, 0, 3)).reshape(groups, cpg, N * L)
        cols = _xp_group_matmul(xp, wm, xm).reshape(out_channels, *kernel, N, *blocks)
        cols = cols.transpose(*range(1, 1 + n), 1 + n, 0, *range(2 + n, 2 + 2 * n))  # (*kernel, N, C_out, *blocks)
        result = _xp_col2im(xp, cols, out, kernel, blocks, stride, padding, dilation)
    if b is not None:
        result = result + _compute(b).reshape((out_channels,) + (1,) * n)
    return xp.ascontiguousarray(result).astype(dtype, copy=False)


def _convolution_cuda(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    stride, padding, dilation, transposed, output_padding, groups, _ = _convolution_plan(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    b = None if bias is None else bias._data
    if transposed:
        return _xp_conv_transpose_forward(input._data, weight._data, b, stride, padding, output_padding, dilation,
                                          groups)
    return _xp_conv_forward(input._data, weight._data, b, stride, padding, padding, dilation, groups)


def _make_conv_cuda(n):
    """The fused kernel of ``conv{n}d`` over xp (complex inputs directly, unlike the prim)."""
    name = f"conv{n}d"

    def kernel(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        stride, pad_lo, pad_hi, dilation, groups, unbatched, _ = _conv_plan(name, n, input, weight, bias, stride,
                                                                            padding, dilation, groups)
        x = input._data[None] if unbatched else input._data
        out = _xp_conv_forward(x, weight._data, None if bias is None else bias._data, stride, pad_lo, pad_hi,
                               dilation, groups)
        return out[0] if unbatched else out

    kernel.__name__ = f"{name}_cuda"
    return kernel


def _make_conv_transpose_cuda(n):
    """The fused kernel of ``conv_transpose{n}d`` over xp."""
    name = f"conv_transpose{n}d"

    def kernel(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        stride, padding, output_padding, groups, dilation, unbatched, _ = _conv_transpose_plan(
            name, n, input, weight, bias, stride, padding, output_padding, groups, dilation)
        x = input._data[None] if unbatched else input._data
        out = _xp_conv_transpose_forward(x, weight._data, None if bias is None else bias._data, stride, padding,
                                         output_padding, dilation, groups)
        return out[0] if unbatched else out

    kernel.__name__ = f"{name}_cuda"
    return kernel


def _im2col_cuda(input, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s, blocks, out = _im2col_plan(input, kernel_size, dilation, padding, stride)
    x = input._data
    xp = _array_namespace(x)
    if x.ndim == 3:
        x = x[None]
    if x.size == 0:
        return xp.zeros(out, x.dtype)
    return xp.ascontiguousarray(_xp_windows(xp, x, k, s, p, p, d, blocks)).reshape(out)


def _fold_cuda(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s, blocks, out_size, out = _fold_plan(input, output_size, kernel_size, dilation, padding, stride)
    x = _compute(input._data)
    xp = _array_namespace(x)
    if x.size == 0:
        return xp.zeros(out, input._data.dtype)
    lead = out[:-2]  # (N, C) or (C,)
    cols = x.reshape((*lead, *k, *blocks))
    m = len(lead)
    cols = cols.transpose(m, m + 1, *range(m), m + 2, m + 3)  # (kH, kW, *lead, *blocks)
    return _xp_col2im(xp, cols, out_size, k, blocks, s, p, d).astype(input._data.dtype, copy=False)


convolution.register_kernel("cuda", _convolution_cuda)
# _convolution_plan does every check of the meta function: the dispatcher may skip the meta call on cuda
convolution.register_checked_kernel("cuda", _convolution_cuda)
im2col.register_kernel("cuda", _im2col_cuda)
fold.register_kernel("cuda", _fold_cuda)
for _n, _conv_op, _transpose_op in ((1, conv1d, conv_transpose1d), (2, conv2d, conv_transpose2d),
                                    (3, conv3d, conv_transpose3d)):
    _conv_op.register_kernel("cuda", _make_conv_cuda(_n))
    _transpose_op.register_kernel("cuda", _make_conv_transpose_cuda(_n))
del _n, _conv_op, _transpose_op


# -- pooling -------------------------------------------------------------------------------------------

_INT_TYPES = (D.uint8, D.int8, D.int16, D.int32, D.int64)
_LETTERS = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}


def _pool_output_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling output size of one dim; ``ceil_mode`` windows must start inside the input or left padding."""
    numerator = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = numerator // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _check_pool_input(op, n, shape):
    """Whether the input is unbatched; raises unless it has n+1 or n+2 dims with non-empty non-batch dims."""
    if len(shape) not in (n + 1, n + 2) or 0 in shape[len(shape) - n - 1:]:
        raise RuntimeError(f"{op}: Expected {n + 1}D or {n + 2}D (batch mode) tensor with optional 0 dim batch size "
                           f"for input, but got: {_fmt(shape)}")
    return len(shape) == n + 1


@_memoized
def _window_plan(op, n, input, kernel_size, stride, padding, dilation, ceil_mode, *, positions=(2, 3, 4, 5)):
    """Check a pooling window; return (kernel, stride, padding, dilation, out spatial sizes, unbatched)."""
    _check_tensor(op, "input", input)
    shape = input._data.shape
    unbatched = _check_pool_input(op, n, shape)
    k = _pool_param(op, "kernel_size", kernel_size, positions[0], n)
    s = _pool_param(op, "stride", stride, positions[1], n, optional=True) or k
    p = _pool_param(op, "padding", padding, positions[2], n)
    d = (1,) * n if dilation is None else _pool_param(op, "dilation", dilation, positions[3], n)
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: kernel_size must be greater than zero, but got kernel_size={_fmt(k)}")
    if any(v <= 0 for v in s):
        raise RuntimeError("stride should not be zero")
    if any(v < 0 for v in p):
        raise RuntimeError(f"pad must be non-negative, but got pad: {min(p)}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation={_fmt(d)}")
    for i in range(n):
        if p[i] > k[i] // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation={d[i]}")
    spatial = shape[len(shape) - n:]
    out = tuple(_pool_output_size(spatial[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(n))
    if any(o < 1 for o in out):
        channels = shape[-n - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (channels, *spatial)))}). Calculated output size: "
                           f"({'x'.join(map(str, (channels, *out)))}). Output size is too small")
    return k, s, p, d, out, unbatched


def _max_pool_run(x, n, k, s, p, d, out, with_indices):
    """Max pooling of numpy x (…, *spatial): values, or (values, int64 flat indices per plane)."""
    lead = x.shape[:x.ndim - n]
    planes = _planes(_compute(x), n)
    result = _C.max_pool(planes, _lift3(out, 1), _lift3(k, 1), _lift3(s, 1), _lift3(p, 0), _lift3(d, 1),
                         with_indices)
    if with_indices:
        values, indices = result
        return values.reshape((*lead, *out)).astype(x.dtype, copy=False), indices.reshape((*lead, *out))
    return result.reshape((*lead, *out)).astype(x.dtype, copy=False)


def _pool_return_type(name):
    """The namedtuple ``(values, indices)`` of a ``*_with_indices`` op (``ember.return_types.<name>``)."""
    cls = collections.namedtuple(name, ["values", "indices"])
    cls.__module__ = "ember.return_types"
    return cls


# -- pooling over any array namespace (CuPy arrays; numpy arrays keep the ember._C kernels) ---------------
#
# The windows of a pool are a strided view (planes, *out, *kernel) of the (padded) input, reduced over
# the kernel axes in one launch; adaptive windows (unequal sizes) are gathered with one ``take``. Index
# maps and masks of window taps depend only on shapes: they are built on the host with numpy (metadata,
# memoised) and uploaded once per GPU (``_uploaded``). On CuPy arrays max pooling itself runs one CUDA
# kernel (``_max_pool_device``, below); its window reductions (``_max_pool_xp``) remain the fallback.
# These functions take numpy arrays too, where tests/cuda/test_cuda_pool.py checks them against ember._C.


_DEVICE_COPIES = {}


def _uploaded(xp, host):
    """``host`` (a memoised numpy index map or mask: metadata) on the current GPU, uploaded once while it lives."""
    if xp is np:
        return host
    key = (id(host), xp.cuda.runtime.getDevice())
    entry = _DEVICE_COPIES.get(key)
    if entry is None or entry[0] is not host:  # the entry keeps ``host`` alive, so its id is not reused meanwhile
        if len(_DEVICE_COPIES) >= 256:
            _DEVICE_COPIES.clear()
        entry = _DEVICE_COPIES[key] = (host, xp.asarray(host))
    return entry[1]


def _lowest(dtype):
    """The value that never wins a max: the minimum of integer dtypes, else -inf."""
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _padded_planes_xp(xp, x, n, lo, hi, fill):
    """``x`` (…, *spatial) as (planes, *spatial), ``lo``/``hi`` cells of ``fill`` added on each side."""
    spatial = x.shape[x.ndim - n:]
    planes = x.reshape((-1, *spatial))
    if not any(lo) and not any(hi):
        return planes
    padded = xp.full((planes.shape[0], *(a + size + b for a, size, b in zip(lo, spatial, hi))), fill, x.dtype)
    padded[(slice(None), *(slice(a, a + size) for a, size in zip(lo, spatial)))] = planes
    return padded


def _pool_windows_xp(xp, planes, k, s, d, out):
    """The strided view (planes, *out, *k) of every window of ``planes`` (planes, *spatial); read it only."""
    n = len(k)
    st = planes.strides
    shape = (planes.shape[0], *out, *k)
    strides = (st[0], *(st[1 + i] * s[i] for i in range(n)), *(st[1 + i] * d[i] for i in range(n)))
    return xp.lib.stride_tricks.as_strided(planes, shape, strides)


def _window_pick(xp, windows, values, valid, window_dims=1):
    """The tap (0..K-1) of every window that ember._C's max pools report for its maximum ``values``.

    ``windows`` is (P, *cells, *taps) with ``window_dims`` tap dims, ``values`` (P, *cells); the result
    is (P, cells). The first maximum wins, or the last NaN of a window holding NaN (``values`` is NaN
    there). ``valid`` (cells, K) masks taps outside the input (None: all are inside).
    """
    hit = windows == values.reshape(values.shape + (1,) * window_dims)
    nan_kind = windows.dtype.kind == "f"
    if nan_kind:
        hit |= xp.isnan(windows)  # a window holding NaN has NaN as its maximum: its NaN taps are the hits
    planes = hit.shape[0]
    cells = math.prod(values.shape[1:])
    taps = math.prod(windows.shape[windows.ndim - window_dims:])
    hit = hit.reshape(planes, cells, taps)  # hit is a new contiguous array: a free reshape
    if valid is not None:
        hit &= valid
    first = xp.argmax(hit, axis=-1)  # argmax picks the first of equal values (numpy and CuPy alike)
    if not nan_kind:
        return first
    last = (hit.shape[-1] - 1) - xp.argmax(hit[..., ::-1], axis=-1)
    return xp.where(xp.isnan(values.reshape(planes, cells)), last, first)


@_memoized
def _max_pool_taps(spatial, k, s, p, d, out):
    """Host metadata of a max pool's windows: flat input index = ``start[cell] + offset[tap]`` of every tap.

    Returns ``(start (cells,), offset (K,), valid (cells, K) bool or None when every tap is inside)``.
    """
    n = len(k)
    start = np.zeros((1,) * n, np.int64)
    offset = np.zeros((1,) * n, np.int64)
    valid = np.ones((1,) * (2 * n), bool)
    for i in range(n):
        first = np.arange(out[i]) * s[i] - p[i]
        taps = np.arange(k[i]) * d[i]
        shape = [1] * n
        shape[i] = -1
        start = start * spatial[i] + first.reshape(shape)
        offset = offset * spatial[i] + taps.reshape(shape)
        pos = first[:, None] + taps[None, :]
        inside = ((pos >= 0) & (pos < spatial[i])).reshape([out[i] if j == i else k[i] if j == n + i else 1
                                                            for j in range(2 * n)])
        valid = valid & inside
    valid = np.broadcast_to(valid, (*out, *k)).reshape(math.prod(out), math.prod(k))
    return start.reshape(-1), offset.reshape(-1), None if valid.all() else valid


def _max_pool_xp(x, n, k, s, p, d, out, with_indices):
    """Max pooling of an array of any namespace (…, *spatial): as ``_max_pool_run``, same values and indices."""
    xp = _array_namespace(x)
    lead, spatial = x.shape[:x.ndim - n], x.shape[x.ndim - n:]
    hi = [max(0, (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - p[i] - spatial[i]) for i in range(n)]
    planes = _padded_planes_xp(xp, x, n, p, hi, _lowest(x.dtype))
    windows = _pool_windows_xp(xp, planes, k, s, d, out)
    values = windows.max(axis=tuple(range(n + 1, 2 * n + 1)))
    if not with_indices:
        return values.reshape((*lead, *out))
    start, offset, valid = _max_pool_taps(tuple(spatial), tuple(k), tuple(s), tuple(p), tuple(d), tuple(out))
    tap = _window_pick(xp, windows, values, None if valid is None else _uploaded(xp, valid), n)
    indices = _uploaded(xp, start) + xp.take(_uploaded(xp, offset), tap)
    return values.reshape((*lead, *out)), indices.reshape((*lead, *out))


#: CuPy arrays max-pool in one CUDA kernel (ember._C.max_pool's loop, one thread per output value);
#: False: :func:`_max_pool_xp`'s window reductions (about a dozen launches with indices).
_MAX_POOL_RAW_KERNEL = True

# element i of the output (P, oD, oH, oW): the maximum of its window and the window's flat plane index of
# it, the first maximum or the last NaN, as ember._C.max_pool
_MAX_POOL_SOURCE = r"""
long long r = i;
const long long ow = r % out_w; r /= out_w;
const long long oh = r % out_h; r /= out_h;
const long long od = r % out_d;
const long long pl = r / out_d;
long long d0 = od * s_d - p_d, h0 = oh * s_h - p_h, w0 = ow * s_w - p_w;
const long long d_end = d0 + (k_d - 1) * dil_d + 1, h_end = h0 + (k_h - 1) * dil_h + 1;
const long long w_end = w0 + (k_w - 1) * dil_w + 1;
const long long d1 = d_end < size_d ? d_end : size_d, h1 = h_end < size_h ? h_end : size_h;
const long long w1 = w_end < size_w ? w_end : size_w;
while (d0 < 0) d0 += dil_d;
while (h0 < 0) h0 += dil_h;
while (w0 < 0) w0 += dil_w;
long long best = (d0 * size_h + h0) * size_w + w0;
T m = lowest;
const long long base = pl * size_d * size_h * size_w;
for (long long dd = d0; dd < d1; dd += dil_d)
  for (long long hh = h0; hh < h1; hh += dil_h) {
    const long long row = (dd * size_h + hh) * size_w;
    for (long long ww = w0; ww < w1; ww += dil_w) {
      const T v = x[base + row + ww];
      if (v > m || v != v) {
        m = v;
        best = row + ww;
      }
    }
  }
y = m;
"""
_MAX_POOL_PARAMS = ("raw T x, T lowest, int64 size_d, int64 size_h, int64 size_w, int64 out_d, int64 out_h, "
                    "int64 out_w, int64 k_d, int64 k_h, int64 k_w, int64 s_d, int64 s_h, int64 s_w, int64 p_d, "
                    "int64 p_h, int64 p_w, int64 dil_d, int64 dil_h, int64 dil_w")
_max_pool_kernels = {}


def _max_pool_device(xp, x, n, k, s, p, d, out, with_indices):
    """Max pooling of a CuPy array (…, *spatial) in one kernel: values, or (values, int64 indices)."""
    kernel = _max_pool_kernels.get((xp, with_indices))
    if kernel is None:
        outputs = "T y, int64 best_index" if with_indices else "T y"
        source = _MAX_POOL_SOURCE + ("best_index = best;\n" if with_indices else "")
        name = "ember_max_pool_indices" if with_indices else "ember_max_pool"
        kernel = _max_pool_kernels[xp, with_indices] = xp.ElementwiseKernel(_MAX_POOL_PARAMS, outputs, source, name)
    lead, spatial = x.shape[:x.ndim - n], x.shape[x.ndim - n:]
    planes = xp.ascontiguousarray(x).reshape(-1)
    shape = (*lead, *out)
    values = xp.empty(shape, x.dtype)
    indices = xp.empty(shape, np.int64) if with_indices else None
    if values.size:
        args = (planes, x.dtype.type(_lowest(x.dtype)), *_lift3(spatial, 1), *_lift3(out, 1), *_lift3(k, 1),
                *_lift3(s, 1), *_lift3(p, 0), *_lift3(d, 1), values)
        if with_indices:
            kernel(*args, indices)
        else:
            kernel(*args)
    return (values, indices) if with_indices else values


def _max_pool_any(x, n, k, s, p, d, out, with_indices):
    """Max pooling: ember._C for numpy arrays, one CUDA kernel or :func:`_max_pool_xp` for others (CuPy).

    float16 and bfloat16 pool in float32 (exact: the maxima are input values), as on CPU.
    """
    if type(x) is np.ndarray:
        return _max_pool_run(x, n, k, s, p, d, out, with_indices)
    data = _compute(x)
    if _MAX_POOL_RAW_KERNEL:
        result = _max_pool_device(_array_namespace(x), data, n, k, s, p, d, out, with_indices)
    else:
        result = _max_pool_xp(data, n, k, s, p, d, out, with_indices)
    if data is x:
        return result
    if with_indices:
        return result[0].astype(x.dtype), result[1]
    return result.astype(x.dtype)


@_memoized
def _avg_pool_divisors(spatial, k, s, p, out, count_include_pad):
    """Host metadata: every window's divisor as ember._C's avg_pool (int64, shape ``out``), or an int if all agree."""
    n = len(k)
    divisor = np.ones((1,) * n, np.int64)
    for i in range(n):
        first = np.arange(out[i]) * s[i] - p[i]
        last = np.minimum(first + k[i], spatial[i] + p[i])
        size = last - first if count_include_pad else np.minimum(last, spatial[i]) - np.maximum(first, 0)
        shape = [1] * n
        shape[i] = -1
        divisor = divisor * size.reshape(shape)
    divisor = np.broadcast_to(divisor, out)
    return int(divisor.flat[0]) if (divisor == divisor.flat[0]).all() else np.ascontiguousarray(divisor)


def _truncating_divide(total, divisor):
    """Integer ``total / divisor`` rounded toward zero (C's division), for a positive ``divisor``."""
    quotient = total // divisor
    return quotient + ((total < 0) & (quotient * divisor != total))


def _avg_pool_xp(x, n, k, s, p, out, count_include_pad, divisor_override):
    """Average pooling of an array of any namespace (…, *spatial): as ``_avg_pool_run``."""
    xp = _array_namespace(x)
    lead, spatial = x.shape[:x.ndim - n], x.shape[x.ndim - n:]
    data = _compute(x)
    hi = [max(0, (out[i] - 1) * s[i] + k[i] - p[i] - spatial[i]) for i in range(n)]
    planes = _padded_planes_xp(xp, data, n, p, hi, 0)
    windows = _pool_windows_xp(xp, planes, k, s, (1,) * n, out)
    total = windows.sum(axis=tuple(range(n + 1, 2 * n + 1)), dtype=data.dtype)
    if divisor_override is not None and divisor_override > 0:
        divisor = int(divisor_override)
    else:
        divisor = _avg_pool_divisors(tuple(spatial), tuple(k), tuple(s), tuple(p), tuple(out), bool(count_include_pad))
    if data.dtype.kind == "i":
        result = _truncating_divide(total, divisor if type(divisor) is int else _uploaded(xp, divisor))
    elif type(divisor) is int:
        result = total / data.dtype.type(divisor)
    else:
        result = total / _uploaded(xp, divisor).astype(data.dtype, copy=False)
    return result.reshape((*lead, *out)).astype(x.dtype, copy=False)


def _avg_pool_any(x, n, k, s, p, out, count_include_pad, divisor_override):
    """Average pooling: ember._C for numpy arrays, :func:`_avg_pool_xp` for others (CuPy)."""
    if type(x) is np.ndarray:
        return _avg_pool_run(x, n, k, s, p, out, count_include_pad, divisor_override)
    return _avg_pool_xp(x, n, k, s, p, out, count_include_pad, divisor_override)


@_memoized
def _adaptive_taps(spatial, out):
    """Host metadata of adaptive pooling windows.

    Returns the flat input index (cells, K) of every tap of the widest window (clipped into the
    input), whether each tap is inside its window (None: all are), and the windows' sizes (cells,).
    """
    n = len(out)
    index = np.zeros((1,) * (2 * n), np.int64)
    valid = np.ones((1,) * (2 * n), bool)
    sizes = np.ones((1,) * n, np.int64)
    widths = []
    for i in range(n):
        o = np.arange(out[i])
        first = (o * spatial[i]) // out[i]
        last = -((-(o + 1) * spatial[i]) // out[i])
        widths.append(int((last - first).max()))
        pos = first[:, None] + np.arange(widths[i])[None, :]
        shape = [out[i] if j == i else widths[i] if j == n + i else 1 for j in range(2 * n)]
        index = index * spatial[i] + np.minimum(pos, spatial[i] - 1).reshape(shape)
        valid = valid & (pos < last[:, None]).reshape(shape)
        size_shape = [1] * n
        size_shape[i] = -1
        sizes = sizes * (last - first).reshape(size_shape)
    cells, taps = math.prod(out), math.prod(widths)
    index = np.broadcast_to(index, (*out, *widths)).reshape(cells, taps)
    valid = np.broadcast_to(valid, (*out, *widths)).reshape(cells, taps)
    return index, None if valid.all() else valid, np.broadcast_to(sizes, out).reshape(-1)


def _adaptive_windows_xp(xp, planes, spatial, sizes, fill):
    """Every adaptive window of ``planes`` (P, plane size) gathered as (P, cells, K), ``fill`` at taps
    outside the window; with the host index map (cells, K) and the windows' sizes (cells,)."""
    index, valid, counts = _adaptive_taps(tuple(spatial), tuple(sizes))
    windows = xp.take(planes, _uploaded(xp, index).reshape(-1), axis=1).reshape(planes.shape[0], *index.shape)
    if valid is not None:
        windows = xp.where(_uploaded(xp, valid), windows, windows.dtype.type(fill))
    return windows, index, counts


def _adaptive_avg_xp(x, n, sizes, shape):
    """Adaptive average pooling of an array of any namespace: window sums divided by their sizes, as ember._C."""
    xp = _array_namespace(x)
    if 0 in sizes:
        return xp.zeros(shape, x.dtype)
    data = _compute(x)
    spatial = x.shape[x.ndim - n:]
    planes = data.reshape(-1, math.prod(spatial))
    if all(spatial[i] % sizes[i] == 0 for i in range(n)):  # equal windows that tile the input: a reshape
        split = []
        for i in range(n):
            split += [sizes[i], spatial[i] // sizes[i]]
        total = planes.reshape(planes.shape[0], *split).sum(axis=tuple(range(2, 2 * n + 1, 2)))
        result = total / data.dtype.type(math.prod(spatial) // math.prod(sizes))
    else:
        windows, _, counts = _adaptive_windows_xp(xp, planes, spatial, sizes, 0)
        result = windows.sum(axis=-1) / _uploaded(xp, counts).astype(data.dtype, copy=False)
    return result.reshape(shape).astype(x.dtype, copy=False)


def _adaptive_max_xp(x, n, sizes, shape):
    """Adaptive max pooling of an array of any namespace: values and indices as ember._C's.

    float16 and bfloat16 pool in float32 (exact: the maxima are input values), as on CPU.
    """
    xp = _array_namespace(x)
    if 0 in sizes:
        return xp.zeros(shape, x.dtype), xp.zeros(shape, np.int64)
    if x.dtype in _HALF_TYPES:
        values, indices = _adaptive_max_xp(_compute(x), n, sizes, shape)
        return values.astype(x.dtype), indices
    spatial = x.shape[x.ndim - n:]
    if all(spatial[i] % sizes[i] == 0 for i in range(n)):  # equal windows that tile the input: a max pool
        k = tuple(spatial[i] // sizes[i] for i in range(n))
        values, indices = _max_pool_any(x, n, k, k, (0,) * n, (1,) * n, tuple(sizes), True)
        return values.reshape(shape), indices.reshape(shape)
    planes = x.reshape(-1, math.prod(spatial))
    windows, index, _ = _adaptive_windows_xp(xp, planes, spatial, sizes, _lowest(x.dtype))
    values = windows.max(axis=-1)
    # taps past a window hold the lowest value; tap 0 is always inside, so they are never the first maximum
    tap = _window_pick(xp, windows, values, None)
    index = _uploaded(xp, index)
    indices = index[xp.arange(index.shape[0]), tap]
    return values.reshape(shape), indices.reshape(shape)


def _make_max_pool(n):
    """``max_pool{n}d_with_indices`` (the prim) and ``max_pool{n}d`` (a composite over it), as in PyTorch.

    The prim returns the argmax of every window with the maxima, so autograd saves
    the indices at forward time and its backward is one scatter, with no second
    pooling pass. ``max_pool{n}d`` keeps a fused kernel of its own, which skips the
    indices where nobody asks for them (inference); under autograd it is recorded
    as its decomposition, the prim.
    """
    name = f"max_pool{n}d"
    with_name = f"{name}_with_indices"
    letters = _LETTERS[n]
    spatial = ", ".join(letters)

    @_memoized
    def plan(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
        k, s, p, d, out, unbatched = _window_plan(name, n, input, kernel_size, stride, padding, dilation, ceil_mode)
        allowed = (*_INT_TYPES, *_FLOATS) if (return_indices or n > 1) else _FLOATS
        _check_dtype(f"{name}_impl" if n == 1 else name, input, allowed)
        return k, s, p, d, input._data.shape[:input._data.ndim - n] + out

    def with_meta(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        shape = plan(input, kernel_size, stride, padding, dilation, ceil_mode, True)[-1]
        return MetaArray(shape, input._data.dtype), MetaArray(shape, _I64)

    def with_cpu(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        k, s, p, d, shape = plan(input, kernel_size, stride, padding, dilation, ceil_mode, True)
        return _max_pool_any(input._data, n, k, s, p, d, shape[len(shape) - n:], True)

    def meta(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        shape = plan(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)[-1]
        values = MetaArray(shape, input._data.dtype)
        return (values, MetaArray(shape, _I64)) if return_indices else values

    def cpu(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        k, s, p, d, shape = plan(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
        return _max_pool_any(input._data, n, k, s, p, d, shape[len(shape) - n:], bool(return_indices))

    def decomposition(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        values, indices = getattr(_E, with_name)(input, kernel_size, stride, padding, dilation, ceil_mode)
        return (values, indices) if return_indices else values

    args_doc = """
        kernel_size (int or tuple[int]): window size.
        stride (int or tuple[int], optional): window step; default ``kernel_size``.
        padding (int or tuple[int]): implicit -inf padding on both sides, at most half the kernel. Default 0.
        dilation (int or tuple[int]): spacing of window elements. Default 1.
        ceil_mode (bool): round the output size up (windows must start inside the
            input or the left padding). Default False."""
    out_doc = """``(…, *out)`` with
        ``out = (in + 2 * padding - dilation * (k - 1) - 1) // stride + 1`` (rounded up
        with ``ceil_mode``)"""
    raises_doc = """
    Raises:
        RuntimeError: for wrong dims, bad parameters or an output size below 1.
        NotImplementedError: for bool and complex inputs.
"""
    meta.__name__ = name
    meta.__doc__ = f"""{n}-D max pooling over (N, C, {spatial}) or unbatched (C, {spatial}) inputs.

    Args:
        input (Tensor): floating or integer (integers only with ``return_indices``
            for 1-D pooling, as in PyTorch).{args_doc}
        return_indices (bool): also return the argmax of every window. Default False.

    Returns:
        Tensor, or (Tensor, Tensor): the maxima, {out_doc}; with ``return_indices`` also int64 indices into each
        flattened input plane (what :func:`max_unpool{n}d` takes). NaN wins a window.
{raises_doc}"""
    with_meta.__name__ = with_name
    with_meta.__doc__ = f"""{n}-D max pooling that also returns the argmax of every window.

    ``max_pool{n}d(..., return_indices=True)``, as its own op: ``max_pool{n}d`` is
    defined by it, and autograd records it, keeping the indices for the backward.

    Args:
        input (Tensor): floating or integer, (N, C, {spatial}) or unbatched (C, {spatial}).{args_doc}

    Returns:
        (Tensor, Tensor): ``(values, indices)``: the maxima, {out_doc}, and int64 indices into each flattened
        input plane. NaN wins a window.
{raises_doc}"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2., 0.], [3., 4., 8., 7.]]])
        >>> ember.nn.functional.max_pool2d(x, 2, return_indices=True)
        (tensor([[[5., 8.]]]), tensor([[[1, 6]]]))
"""
        with_meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2., 0.], [3., 4., 8., 7.]]])
        >>> values, indices = ember.nn.functional.max_pool2d_with_indices(x, 2)
        >>> indices
        tensor([[[1, 6]]])
"""
    op = defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_NN)
    # PyTorch has torch.max_pool1d_with_indices, but max_pool2d/3d_with_indices only in torch.nn.functional
    defop(with_name, with_meta, cpu=with_cpu, tags=_NN if n == 1 else _NN_ONLY,
          return_type=_pool_return_type(with_name))
    return op


max_pool1d = _make_max_pool(1)
max_pool2d = _make_max_pool(2)
max_pool3d = _make_max_pool(3)


_AVG_TYPES = {1: (D.int64, *_FLOATS), 2: (D.int64, *_FLOATS), 3: (D.int64, D.float32, D.float64)}
_AVG_KERNELS = {1: "avg_pool2d", 2: "avg_pool2d", 3: "avg_pool3d_out_frame"}


def _avg_pool_run(x, n, k, s, p, out, count_include_pad, divisor_override):
    lead = x.shape[:x.ndim - n]
    planes = _planes(_compute(x), n)
    result = _C.avg_pool(planes, _lift3(out, 1), _lift3(k, 1), _lift3(s, 1), _lift3(p, 0), bool(count_include_pad),
                         0 if divisor_override is None else divisor_override)
    return result.reshape((*lead, *out)).astype(x.dtype, copy=False)


def _make_avg_pool(n):
    name = f"avg_pool{n}d"
    spatial = ", ".join(_LETTERS[n])

    @_memoized
    def plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        k, s, p, _, out, _ = _window_plan(name, n, input, kernel_size, stride, padding, None, ceil_mode)
        if divisor_override is not None:
            divisor_override = _int_arg(name, "divisor_override", divisor_override, 7)
            if divisor_override == 0:
                raise RuntimeError("divisor must be not zero")
        _check_dtype(_AVG_KERNELS[n], input, _AVG_TYPES[n])
        return k, s, p, out, divisor_override, input._data.shape[:input._data.ndim - n] + out

    if n == 1:
        def meta(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
            shape = plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)[-1]
            return MetaArray(shape, input._data.dtype)

        def cpu(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
            k, s, p, out, _, _ = plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)
            return _avg_pool_any(input._data, n, k, s, p, out, count_include_pad, None)
    else:
        def meta(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
            shape = plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)[-1]
            return MetaArray(shape, input._data.dtype)

        def cpu(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
            k, s, p, out, div, _ = plan(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                        divisor_override)
            return _avg_pool_any(input._data, n, k, s, p, out, count_include_pad, div)

    divisor_doc = "" if n == 1 else """
        divisor_override (int, optional): divide every window sum by this instead. Default None."""
    types = "int64 or floating" if n < 3 else "int64, float32 or float64"
    meta.__name__ = name
    meta.__doc__ = f"""{n}-D average pooling over (N, C, {spatial}) or unbatched (C, {spatial}) inputs.

    Args:
        input (Tensor): {types} (int64 sums divide truncating toward zero).
        kernel_size (int or tuple[int]): window size.
        stride (int or tuple[int], optional): window step; default ``kernel_size``.
        padding (int or tuple[int]): implicit zero padding on both sides, at most half the kernel. Default 0.
        ceil_mode (bool): round the output size up. Default False.
        count_include_pad (bool): count padding zeros in the divisor. Default True.{divisor_doc}

    Returns:
        Tensor: ``(…, *out)``, ``out = (in + 2 * padding - k) // stride + 1`` (rounded up with ``ceil_mode``).

    Raises:
        RuntimeError: for wrong dims, bad parameters, a zero divisor or an output size below 1.
        NotImplementedError: for other dtypes.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2., 0.], [3., 4., 8., 7.]]])
        >>> ember.nn.functional.avg_pool2d(x, 2)
        tensor([[[3.2500, 4.2500]]])
"""
    return defop(name, meta, cpu=cpu, tags=_NN if n == 1 else _NN_ONLY)


avg_pool1d = _make_avg_pool(1)
avg_pool2d = _make_avg_pool(2)
avg_pool3d = _make_avg_pool(3)


@_memoized
def _adaptive_plan(op, n, input, output_size):
    _check_tensor(op, "input", input)
    shape = input._data.shape
    if len(shape) not in (n + 1, n + 2):
        raise RuntimeError(f"{op}(): Expected {n + 1}D or {n + 2}D tensor, but got {_fmt(shape)}")
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != n:
            raise RuntimeError(f"{op}: output_size must be {n}")
        sizes = tuple(shape[len(shape) - n + i] if v is None else v for i, v in enumerate(output_size))
    else:
        sizes = (output_size,) * n
    for v in sizes:
        if not _is_int(v):
            raise TypeError(f"{op}(): argument 'output_size' must be tuple of ints, but found element of type "
                            f"{type(v).__name__}")
    sizes = tuple(operator.index(v) for v in sizes)
    if any(v < 0 for v in sizes):
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to 0 but received "
                           f"{{{', '.join(map(str, sizes))}}}")
    first = 1 if len(shape) == n + 2 else 0
    for i in range(first, len(shape)):
        if shape[i] == 0:
            raise RuntimeError(f"{op}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {_fmt(shape)} with dimension {i} being empty")
    _check_dtype(op, input, _FLOATS)
    return sizes, shape[:len(shape) - n] + sizes


def _adaptive_avg(x, n, sizes, shape):
    """Adaptive average pooling of x (…, *spatial) to ``sizes``; ``shape`` is the result's."""
    if type(x) is not np.ndarray:
        return _adaptive_avg_xp(x, n, sizes, shape)
    result = _C.adaptive_avg_pool(_planes(_compute(x), n), _lift3(sizes, 1))
    return result.reshape(shape).astype(x.dtype, copy=False)


def _make_adaptive_avg_pool(n):
    name = f"adaptive_avg_pool{n}d"
    spatial = ", ".join(_LETTERS[n])

    def meta(input, output_size):
        return MetaArray(_adaptive_plan(name, n, input, output_size)[1], input._data.dtype)

    def cpu(input, output_size):
        sizes, shape = _adaptive_plan(name, n, input, output_size)
        return _adaptive_avg(input._data, n, sizes, shape)

    meta.__name__ = name
    meta.__doc__ = f"""{n}-D adaptive average pooling to a given output size, over (N, C, {spatial}) or (C, {spatial}).

    Output cell ``i`` of a dim of size ``n -> m`` averages input cells
    ``floor(i * n / m)`` to ``ceil((i + 1) * n / m) - 1``.

    Args:
        input (Tensor): floating, with non-empty non-batch dims.
        output_size (int or tuple[int or None]): the output's spatial size; None keeps an input size.

    Returns:
        Tensor: ``(…, *output_size)``.

    Raises:
        RuntimeError: for wrong dims, empty non-batch dims or negative sizes.
        NotImplementedError: for non-floating dtypes.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2.], [3., 4., 9.]]])
        >>> ember.nn.functional.adaptive_avg_pool2d(x, (1, 2))
        tensor([[[3.2500, 5.0000]]])
"""
    return defop(name, meta, cpu=cpu, tags=_NN if n == 1 else _NN_ONLY)


adaptive_avg_pool1d = _make_adaptive_avg_pool(1)
adaptive_avg_pool2d = _make_adaptive_avg_pool(2)
adaptive_avg_pool3d = _make_adaptive_avg_pool(3)


def _make_adaptive_max_pool(n):
    """``adaptive_max_pool{n}d`` (a composite) over ``adaptive_max_pool{n}d_with_indices`` (the prim).

    As for max pooling: autograd records the prim and keeps its indices for the backward.
    """
    name = f"adaptive_max_pool{n}d"
    with_name = f"{name}_with_indices"
    spatial = ", ".join(_LETTERS[n])

    def run(input, output_size):
        sizes, shape = _adaptive_plan(name, n, input, output_size)
        x = input._data
        if type(x) is not np.ndarray:
            return _adaptive_max_xp(x, n, sizes, shape)
        values, indices = _C.adaptive_max_pool(_planes(_compute(x), n), _lift3(sizes, 1))
        return values.reshape(shape).astype(x.dtype, copy=False), indices.reshape(shape)

    def with_meta(input, output_size):
        shape = _adaptive_plan(name, n, input, output_size)[1]
        return MetaArray(shape, input._data.dtype), MetaArray(shape, _I64)

    def meta(input, output_size, return_indices=False):
        values, indices = with_meta(input, output_size)
        return (values, indices) if return_indices else values

    def cpu(input, output_size, return_indices=False):
        values, indices = run(input, output_size)
        return (values, indices) if return_indices else values

    def decomposition(input, output_size, return_indices=False):
        values, indices = getattr(_E, with_name)(input, output_size)
        return (values, indices) if return_indices else values

    args_doc = """
        input (Tensor): floating, with non-empty non-batch dims.
        output_size (int or tuple[int or None]): the output's spatial size; None keeps an input size."""
    raises_doc = """
    Raises:
        RuntimeError: for wrong dims, empty non-batch dims or negative sizes.
        NotImplementedError: for non-floating dtypes.
"""
    meta.__name__ = name
    meta.__doc__ = f"""{n}-D adaptive max pooling to a given output size, over (N, C, {spatial}) or (C, {spatial}).

    Windows are those of ``adaptive_avg_pool{n}d``.

    Args:{args_doc}
        return_indices (bool): also return int64 argmax indices into each flattened input plane. Default False.

    Returns:
        Tensor, or (Tensor, Tensor): ``(…, *output_size)`` maxima (and indices).
{raises_doc}"""
    with_meta.__name__ = with_name
    with_meta.__doc__ = f"""{n}-D adaptive max pooling that also returns the argmax of every window.

    ``adaptive_max_pool{n}d(..., return_indices=True)``, as its own op:
    ``adaptive_max_pool{n}d`` is defined by it, and autograd records it, keeping the
    indices for the backward.

    Args:{args_doc}

    Returns:
        (Tensor, Tensor): ``(values, indices)``, each ``(…, *output_size)``: the maxima and
        int64 indices into each flattened input plane.
{raises_doc}"""
    op = defop(name, meta, cpu=cpu, category=COMPOSITE, decomposition=decomposition, tags=_NN if n == 1 else _NN_ONLY)
    defop(with_name, with_meta, cpu=run, tags=_NN_ONLY, return_type=_pool_return_type(with_name))
    return op


adaptive_max_pool1d = _make_adaptive_max_pool(1)
adaptive_max_pool2d = _make_adaptive_max_pool(2)
adaptive_max_pool3d = _make_adaptive_max_pool(3)


def _make_lp_pool(n):
    name = f"lp_pool{n}d"
    spatial = ", ".join(_LETTERS[n])

    @_memoized
    def plan(input, norm_type, kernel_size, stride, ceil_mode):
        """(window plan, powered dtype or None for the max path, result dtype, output shape)."""
        _check_tensor(name, "input", input)
        if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real):
            raise TypeError(f"{name}(): argument 'norm_type' must be a real number, not {type(norm_type).__name__}")
        if n == 1 and not _is_int(kernel_size):
            raise TypeError(f"lp_pool1d(): argument 'kernel_size' must be int, not {type(kernel_size).__name__}")
        if math.isinf(norm_type):
            window = _window_plan(f"max_pool{n}d", n, input, kernel_size, stride, 0, 1, ceil_mode)
            if n == 1:
                _check_dtype("max_pool1d_impl", input, _FLOATS)
            else:
                _check_dtype(f"max_pool{n}d", input, (*_INT_TYPES, *_FLOATS))
            return window, None, input.dtype, input._data.shape[:input._data.ndim - n] + window[4]
        if norm_type == 0:
            raise ZeroDivisionError("float division by zero")
        dtype = input.dtype
        if dtype.is_floating_point:
            powered = dtype
        elif isinstance(norm_type, numbers.Integral) and dtype.category <= D.INTEGRAL:
            if norm_type < 0:
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            powered = D.int64 if dtype is D.bool else dtype
        else:
            powered = D.get_default_dtype()
        if powered not in _AVG_TYPES[n]:
            raise _not_implemented(_AVG_KERNELS[n], powered)
        window = _window_plan(f"avg_pool{n}d", n, input, kernel_size, stride, 0, None, ceil_mode)
        result = powered if powered.is_floating_point else D.get_default_dtype()
        return window, powered, result, input._data.shape[:input._data.ndim - n] + window[4]

    def meta(input, norm_type, kernel_size, stride=None, ceil_mode=False):
        _, _, result, shape = plan(input, norm_type, kernel_size, stride, ceil_mode)
        return MetaArray(shape, result.numpy_dtype)

    def cpu(input, norm_type, kernel_size, stride=None, ceil_mode=False):
        (k, s, p, d, out, _), powered, result, _ = plan(input, norm_type, kernel_size, stride, ceil_mode)
        x = input._data
        if powered is None:
            with np.errstate(all="ignore"):
                if norm_type > 0:
                    return _max_pool_any(np.abs(x), n, k, s, p, d, out, False)
                return -_max_pool_any(-np.abs(x), n, k, s, p, d, out, False)
        with np.errstate(all="ignore"):
            if powered.is_floating_point:
                y = np.power(_compute(x.astype(powered.numpy_dtype, copy=False)), norm_type)
            else:
                y = np.power(x.astype(powered.numpy_dtype, copy=False), norm_type)
            avg = _avg_pool_any(y, n, k, s, p, out, True, None)
            compute = _F64 if result is D.float64 else _F32
            avg = avg.astype(compute, copy=False)
            value = np.sign(avg) * np.maximum(np.abs(avg), 0) * compute.type(math.prod(k))
            return np.power(value, compute.type(1.0 / norm_type)).astype(result.numpy_dtype, copy=False)

    meta.__name__ = name
    meta.__doc__ = f"""{n}-D power-average pooling: ``(sum over a window of x ** p) ** (1 / p)``.

    Over (N, C, {spatial}) or unbatched (C, {spatial}) inputs.

    Computed as PyTorch does: ``avg_pool{n}d(x ** p) * prod(kernel_size)`` raised to
    ``1 / p`` (so integer inputs with an integer ``p`` sum truncated averages);
    ``p = inf`` is the max of ``|x|``, ``p = -inf`` minus the max of ``-|x|``.

    Args:
        input (Tensor): floating, int64 or bool (see ``avg_pool{n}d``).
        norm_type (float): the power ``p``, non-zero.
        kernel_size (int or tuple[int]): window size.
        stride (int or tuple[int], optional): window step; default ``kernel_size``.
        ceil_mode (bool): round the output size up. Default False.

    Returns:
        Tensor: ``(…, *out)``; floating inputs keep their dtype, others give the default float.

    Raises:
        ZeroDivisionError: for ``norm_type`` 0.
        RuntimeError: for wrong dims, bad parameters or an output size below 1.
        NotImplementedError: for dtypes ``avg_pool{n}d`` refuses.
"""
    return defop(name, meta, cpu=cpu, tags=_NN_ONLY)


lp_pool1d = _make_lp_pool(1)
lp_pool2d = _make_lp_pool(2)
lp_pool3d = _make_lp_pool(3)


def _make_max_unpool(n):
    name = f"max_unpool{n}d"
    spatial = ", ".join(_LETTERS[n])

    @_memoized
    def plan(input, indices, kernel_size, stride, padding, output_size):
        _check_tensor(name, "input", input, 1)
        _check_tensor(name, "indices", indices, 2)
        shape = input._data.shape
        if len(shape) not in (n + 1, n + 2):
            raise RuntimeError(f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d Tensor, but got a tensor "
                               f"with {len(shape)} dimensions.")
        k = _pool_param(name, "kernel_size", kernel_size, 3, n)
        s = _pool_param(name, "stride", stride, 4, n, optional=True) or k
        p = _pool_param(name, "padding", padding, 5, n)
        spatial_in = shape[len(shape) - n:]
        default = [(spatial_in[i] - 1) * s[i] + k[i] - 2 * p[i] for i in range(n)]
        if output_size is None:
            out = tuple(default)
        else:
            out = list(_int_tuple(name, "output_size", output_size, 6))
            if len(out) == n + 2:
                out = out[2:]
            if len(out) != n:
                raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a "
                                 f"length of '{len(out)}'")
            for i in range(n):
                low, high = default[i] - s[i], default[i] + s[i]
                if not low < out[i] < high:
                    raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {i} must be between {low} and '
                                     f"{high})")
            out = tuple(out)
        if any(o < 0 for o in out):
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size={_fmt(out)}")
        if indices.dtype is not D.int64:
            raise RuntimeError(f"elements in indices should be type int64 but got: {_torch_name(indices.dtype)}")
        if indices._data.shape != shape:
            raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({_fmt(shape)}) but "
                               f"got indices tensor with shape: {_fmt(indices._data.shape)}")
        first = 1 if len(shape) == n + 2 else 0
        for i in range(first, len(shape)):
            if shape[i] == 0:
                raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but got "
                                   f"{_fmt(shape)} with dimension {i} being empty.")
        _check_dtype(name, input, _FLOATS)
        return out, shape[:len(shape) - n] + out

    def meta(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        return MetaArray(plan(input, indices, kernel_size, stride, padding, output_size)[1], input._data.dtype)

    def cpu(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        out, shape = plan(input, indices, kernel_size, stride, padding, output_size)
        x = input._data
        lead = x.shape[:x.ndim - n]
        planes, size = math.prod(lead), math.prod(out)
        xp = _array_namespace(x)
        result = xp.zeros((planes, size), x.dtype)
        idx = indices._data.reshape(planes, -1)
        if idx.size:
            bad = (idx < 0) | (idx >= size)
            if bad.any():  # on CUDA this reads back one bool: the argument check PyTorch's CPU kernel makes
                raise RuntimeError(f"Found an invalid max index: {idx[bad][0]} (output volumes are of size "
                                   f"{'x'.join(map(str, out))})")
            if xp is np:
                np.put_along_axis(result, idx, x.reshape(planes, -1), axis=1)
            else:
                result[xp.arange(planes)[:, None], idx] = x.reshape(planes, -1)
        return result.reshape(shape)

    meta.__name__ = name
    meta.__doc__ = f"""Partial inverse of ``max_pool{n}d``: maxima back at their indices, zeros elsewhere.

    Args:
        input (Tensor): (N, C, {spatial}) or (C, {spatial}) pooled values; floating.
        indices (Tensor): int64, same shape: flat indices into each output plane
            (``max_pool{n}d(..., return_indices=True)``'s second output).
        kernel_size (int or tuple[int]): the pooling window.
        stride (int or tuple[int], optional): default ``kernel_size``.
        padding (int or tuple[int]): Default 0.
        output_size (sequence of int, optional): the spatial size (optionally with
            N, C in front), within ``stride`` of the default
            ``(in - 1) * stride + kernel_size - 2 * padding``.

    Returns:
        Tensor: ``(…, *output_size)``.

    Raises:
        ValueError: for an ``output_size`` of a wrong length or out of range.
        RuntimeError: for wrong dims, non-int64 or mismatched indices, or an index
            outside the output plane.
        NotImplementedError: for non-floating dtypes.
"""
    if n == 2:
        meta.__doc__ += """
    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 5., 2., 0.], [3., 4., 8., 7.]]])
        >>> values, indices = ember.nn.functional.max_pool2d(x, 2, return_indices=True)
        >>> ember.nn.functional.max_unpool2d(values, indices, 2)
        tensor([[[0., 5., 0., 0.],
                 [0., 0., 8., 0.]]])
"""
    return defop(name, meta, cpu=cpu, tags=_NN_ONLY)


max_unpool1d = _make_max_unpool(1)
max_unpool2d = _make_max_unpool(2)
max_unpool3d = _make_max_unpool(3)


# -- interpolate / upsample ------------------------------------------------------------------------------

_INTERP_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_MODE_DIMS = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
_UINT8_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")


@_memoized
def _interpolate_plan(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    """Check an interpolate call as PyTorch's ``F.interpolate`` does.

    Returns (mode, spatial dims, output sizes, scale factors or None, align_corners, antialias).
    """
    _check_tensor("interpolate", "input", input)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    shape = input._data.shape
    n = len(shape) - 2
    scales = None
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (tuple, list)):
            if len(size) != n:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(shape[2:])} and output size of {size}. Please "
                                 "provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            if not all(_is_int(v) for v in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, "
                                f"int], but got size with types {[type(v) for v in size]}")
            out = tuple(operator.index(v) for v in size)
        else:
            if not _is_int(size):
                raise TypeError(f"interpolate(): size must be an int or a tuple of ints, not {type(size).__name__}")
            out = (operator.index(size),) * max(n, 0)
    elif scale_factor is not None:
        out = None
        if isinstance(scale_factor, (tuple, list)):
            if len(scale_factor) != n:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(shape[2:])} and scale_factor of shape "
                                 f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 "scale_factor in (s1, s2, ...,sK) format.")
            scales = tuple(scale_factor)
        else:
            scales = (scale_factor,) * max(n, 0)
        for v in scales:
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError(f"interpolate(): scale_factor must be a float or a tuple of floats, not "
                                f"{type(v).__name__}")
        scales = tuple(float(v) for v in scales)
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out is None:
        recompute_scale_factor = True
    if recompute_scale_factor and scales is not None:
        out = tuple(int(shape[2 + i] * scales[i]) for i in range(n))
        scales = None
    if antialias and not (mode in ("bilinear", "bicubic") and len(shape) == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D "
                         "tensor as input")
    if mode in _MODE_DIMS and len(shape) in (3, 4, 5) and len(shape) != _MODE_DIMS[mode]:
        if mode != "bicubic":
            raise NotImplementedError(f"Got {len(shape)}D input, but {mode} mode needs {_MODE_DIMS[mode]}D input")
    if mode not in _INTERP_MODES or len(shape) not in (3, 4, 5) or (mode == "bicubic" and len(shape) != 4):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {len(shape)}D) for "
                                  "the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | "
                                  f"nearest-exact (got {mode})")
    if out is None:
        out = tuple(math.floor(shape[2 + i] * scales[i]) for i in range(n))
    if mode == "area":
        kernel = f"adaptive_avg_pool{n}d"
        _adaptive_plan(kernel, n, input, out)
        return mode, n, out, None, None, False
    if 0 in shape[1:2]:
        raise RuntimeError(f"Non-empty {n + 2}D data tensor expected but got a tensor with sizes {_fmt(shape)}")
    spatial = shape[2:]
    if any(v <= 0 for v in spatial) or any(v <= 0 for v in out):
        names = _LETTERS[n] if n > 1 else ("W",)
        given = ", ".join(f"{c}: {v}" for c, v in zip(names, spatial))
        wanted = ", ".join(f"{c}: {v}" for c, v in zip(names, out))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({given}) output "
                           f"({wanted})")
    allowed = (D.uint8, *_FLOATS) if mode in _UINT8_MODES else _FLOATS
    if antialias and input.dtype in (D.float16, D.bfloat16):
        raise _not_implemented("compute_index_ranges_weights", input.dtype)
    if input.dtype not in allowed:
        kind = {"nearest-exact": "_upsample_nearest_exact", "linear": "upsample_linear"}.get(mode, f"upsample_{mode}")
        raise _not_implemented(f"{kind}{n}d", input.dtype)
    return mode, n, out, scales, align_corners, bool(antialias)


def _interpolate_meta(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                      recompute_scale_factor=None, antialias=False):
    """Resize ``input`` ``(N, C, *spatial)`` by interpolation: PyTorch's ``F.interpolate``.

    Args:
        input (Tensor): (N, C, L), (N, C, H, W) or (N, C, D, H, W); floating
            (uint8 too for nearest, nearest-exact, bilinear and bicubic).
        size (int or tuple[int], optional): the output's spatial size.
        scale_factor (float or tuple[float], optional): multiplier of the spatial
            size (output ``floor(in * scale_factor)``); exactly one of ``size`` and
            ``scale_factor``.
        mode (str): ``"nearest"`` (PyTorch's legacy ``floor(out_index * in / out)``),
            ``"nearest-exact"`` (pixel centres), ``"linear"`` (3-D input),
            ``"bilinear"``/``"bicubic"`` (4-D), ``"trilinear"`` (5-D) or ``"area"``
            (adaptive average pooling). Default ``"nearest"``.
        align_corners (bool, optional): for the linear and cubic modes: map corner
            pixel centres onto each other (True) or pixel edges (False, the default).
        recompute_scale_factor (bool, optional): compute the output size from
            ``scale_factor``, then sample with the ratio of sizes instead of
            ``scale_factor``.
        antialias (bool): low-pass filter when downsampling (bilinear, bicubic, 4-D; not
            float16/bfloat16, as in PyTorch). Default False.

    Returns:
        Tensor: ``(N, C, *output_size)``, of ``input``'s dtype (uint8 rounds and saturates).

    Raises:
        ValueError: for both or neither of ``size``/``scale_factor``, lengths that do
            not match the spatial dims, ``align_corners`` with a non-interpolating mode,
            or ``antialias`` with another mode.
        NotImplementedError: for a mode that doesn't fit the input's dims, an unknown
            mode, or an unsupported dtype.
        RuntimeError: for empty input or output sizes.

    Example:
        >>> import ember
        >>> x = ember.tensor([[[1., 2., 4.]]])
        >>> ember.nn.functional.interpolate(x, scale_factor=2)
        tensor([[[1., 1., 2., 2., 4., 4.]]])
        >>> ember.nn.functional.interpolate(x, size=5, mode="linear", align_corners=True)
        tensor([[[1.0000, 1.5000, 2.0000, 3.0000, 4.0000]]])
    """
    mode, n, out, *_ = _interpolate_plan(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                                         antialias)
    return MetaArray(input._data.shape[:2] + out, input._data.dtype)


def _source_scale(in_size, out_size, align_corners, scale, ct):
    """PyTorch's ``area_pixel_compute_scale`` in the compute type ``ct``."""
    if align_corners:
        return ct.type(in_size - 1) / ct.type(out_size - 1) if out_size > 1 else ct.type(0)
    if scale is not None and scale > 0:
        return ct.type(1.0 / scale)
    return ct.type(in_size) / ct.type(out_size)


def _nearest_index(in_size, out_size, scale, exact):
    if not exact and out_size == in_size:
        return np.arange(out_size)
    if not exact and out_size == 2 * in_size:
        return np.arange(out_size) >> 1
    s = _source_scale(in_size, out_size, False, scale, _F32)
    position = np.arange(out_size, dtype=_F32)
    if exact:
        position = position + _F32.type(0.5)
    return np.minimum(np.floor(position * s).astype(np.int64), in_size - 1)


def _cubic_weights(t, a):
    """Weights of the 4 taps at offsets -1..2 around a point ``t`` in [0, 1) past the first (Keys' cubic)."""
    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _interp_taps(in_size, out_size, scale, align_corners, cubic, ct):
    """Indices (out, T) and weights (out, T) of linear (T=2) or cubic (T=4) interpolation along one dim."""
    s = _source_scale(in_size, out_size, align_corners, scale, ct)
    dst = np.arange(out_size, dtype=ct)
    if align_corners:
        src = s * dst
    else:
        src = s * (dst + ct.type(0.5)) - ct.type(0.5)
        if not cubic:
            src = np.maximum(src, ct.type(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0.astype(ct), 0, 1).astype(ct)
    if cubic:
        idx = np.stack([np.clip(i0 - 1 + j, 0, in_size - 1) for j in range(4)], axis=1)
        return idx, np.stack(_cubic_weights(lam, ct.type(-0.75)), axis=1).astype(ct)
    i1 = i0 + (i0 < in_size - 1)
    return np.stack([i0, i1], axis=1), np.stack([1 - lam, lam], axis=1).astype(ct)


def _separable_taps(in_size, out_size, scale, align_corners, cubic, antialias, delta=0.0):
    """Indices and float64 weights (out, T) of PyTorch's separable (PIL-style) resampling along one dim.

    With ``antialias`` the filter widens by the downscaling factor (a low-pass);
    the bicubic filter is Keys' with a = -0.5 then, -0.75 otherwise. Taps outside
    the input are dropped and the rest renormalised. ``delta`` is 0.5 for PyTorch's
    uint8 kernels with ``align_corners``.
    """
    s = float(_source_scale(in_size, out_size, align_corners, scale, _F64))
    interp_size = 4 if cubic else 2
    wide = antialias and s >= 1
    support = interp_size / 2 * s if wide else interp_size / 2
    invscale = 1 / s if wide else 1.0
    taps = int(math.ceil(support)) * 2 + 1
    center = s * (np.arange(out_size) + 0.5 - delta)
    xmin = np.maximum(np.trunc(center - support + 0.5 + delta).astype(np.int64), 0)
    xsize = np.minimum(np.trunc(center + support + 0.5 + delta).astype(np.int64), in_size) - xmin
    j = np.arange(taps)
    x = np.abs((j[None, :] + xmin[:, None] - center[:, None] + 0.5 - delta) * invscale)
    if cubic:
        a = -0.5 if antialias else -0.75
        w = np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1, np.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, 0.0))
    else:
        w = np.maximum(0.0, 1 - x)
    w = np.where(j[None, :] < xsize[:, None], w, 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w)
    idx = np.minimum(xmin[:, None] + j[None, :], in_size - 1)
    return idx, w


def _uint8_pass(x, axis, idx, w):
    """One separable pass over uint8 data as PyTorch's uint8 kernels: int16 weights, rounding, saturation."""
    max_weight = float(np.abs(w).max()) if w.size else 0.0
    precision = 0
    while precision < 22 and int(0.5 + max_weight * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    scaled = w * (1 << precision)
    wi = np.where(scaled < 0, scaled - 0.5, scaled + 0.5).astype(np.int64)
    acc = _apply_taps(x.astype(np.int64), axis, idx, wi)
    return np.clip((acc + (1 << (precision - 1) if precision else 0)) >> precision, 0, 255).astype(np.uint8)


def _apply_taps(x, axis, idx, w):
    """Sum over taps t of ``take(x, idx[:, t], axis) * w[:, t]`` (weights broadcast along ``axis``).

    ``idx`` and ``w`` are host (numpy) arrays computed from shapes; for a CuPy ``x`` they are uploaded
    and every tap is gathered in one ``take``, weighted and summed over the tap axis.
    """
    if type(x) is not np.ndarray:
        xp = _array_namespace(x)
        out, taps = idx.shape
        picked = xp.take(x, xp.asarray(idx.reshape(-1)), axis=axis)
        picked = picked.reshape(x.shape[:axis] + (out, taps) + x.shape[axis + 1:])
        weights = xp.asarray(w).reshape((out, taps) + (1,) * (x.ndim - axis - 1))
        return (picked * weights).sum(axis=axis + 1)
    if x.dtype in _C_FLOAT and w.dtype == x.dtype:
        outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
        result = _C.resample_axis(np.ascontiguousarray(x).reshape(outer, x.shape[axis], inner),
                                  np.ascontiguousarray(idx, np.int64), np.ascontiguousarray(w))
        return result.reshape(x.shape[:axis] + (idx.shape[0],) + x.shape[axis + 1:])
    shape = (-1,) + (1,) * (x.ndim - axis - 1)
    result = None
    for t in range(idx.shape[1]):
        term = np.take(x, idx[:, t], axis=axis) * w[:, t].reshape(shape)
        result = term if result is None else result + term
    return result


def _interpolate_cpu(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                     recompute_scale_factor=None, antialias=False):
    mode, n, out, scales, align_corners, antialias = _interpolate_plan(
        input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    x = input._data
    if mode == "area":
        return _adaptive_avg(x, n, out, x.shape[:2] + out)
    xp = _array_namespace(x)
    if x.shape[0] == 0:
        return xp.zeros(x.shape[:2] + out, x.dtype)
    # The passes below allocate per-axis index arrays and partial results before the output. Ask for
    # the output's memory first (untouched, then freed), so an output that cannot exist fails here
    # rather than after a terabyte-sized intermediate that an overcommitting host hands out.
    xp.empty(x.shape[:2] + out, x.dtype)
    if mode in ("nearest", "nearest-exact"):
        for i in range(n):
            scale = scales[i] if scales is not None else None
            index = _nearest_index(x.shape[2 + i], out[i], scale, mode == "nearest-exact")  # host metadata
            x = xp.take(x, index if xp is np else xp.asarray(index), axis=2 + i)
        return x.copy() if x is input._data else x
    cubic = mode == "bicubic"
    if x.dtype == np.uint8:
        delta = 0.5 if align_corners and not antialias else 0.0
        for i in reversed(range(n)):
            scale = scales[i] if scales is not None else None
            if cubic and not antialias:  # PyTorch's uint8 bicubic clamps taps at the border, like the float one
                idx, w = _interp_taps(x.shape[2 + i], out[i], scale, align_corners, True, _F64)
            else:
                idx, w = _separable_taps(x.shape[2 + i], out[i], scale, align_corners, cubic, antialias, delta)
            x = _uint8_pass(x, 2 + i, idx, w)
        return x
    dtype = x.dtype
    ct = _F64 if dtype == _F64 else _F32
    x = x.astype(ct)
    with np.errstate(all="ignore"):
        for i in reversed(range(n)):
            scale = scales[i] if scales is not None else None
            if antialias:
                idx, w = _separable_taps(x.shape[2 + i], out[i], scale, align_corners, cubic, True)
                w = w.astype(ct)
            else:
                idx, w = _interp_taps(x.shape[2 + i], out[i], scale, align_corners, cubic, ct)
            x = _apply_taps(x, 2 + i, idx, w)
    return x.astype(dtype)


interpolate = defop("interpolate", _interpolate_meta, cpu=_interpolate_cpu, tags=_NN_ONLY)


def _upsample_meta(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`ember.nn.functional.interpolate` (warns, as PyTorch's ``F.upsample``).

    Args:
        input, size, scale_factor, mode, align_corners: as for ``interpolate``.

    Returns:
        Tensor: ``interpolate(input, size, scale_factor, mode, align_corners)``.

    Raises:
        ValueError, NotImplementedError, RuntimeError: as ``interpolate``.
    """
    return _interpolate_meta(input, size, scale_factor, mode, align_corners)


def _warn_upsample(name):
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=4)


def _upsample_cpu(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _warn_upsample("upsample")
    return _interpolate_cpu(input, size, scale_factor, mode, align_corners)


def _upsample_decomp(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _warn_upsample("upsample")
    return _E.interpolate(input, size, scale_factor, mode, align_corners)


upsample = defop("upsample", _upsample_meta, cpu=_upsample_cpu, category=COMPOSITE, decomposition=_upsample_decomp,
                 tags=_NN_ONLY)


def _upsample_nearest_meta(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode="nearest")`` (warns, as PyTorch).

    Args:
        input, size, scale_factor: as for ``interpolate``.

    Returns:
        Tensor: the nearest-neighbour resize.

    Raises:
        ValueError, NotImplementedError, RuntimeError: as ``interpolate``.
    """
    return _interpolate_meta(input, size, scale_factor, "nearest")


def _upsample_nearest_cpu(input, size=None, scale_factor=None):
    _warn_upsample("upsample_nearest")
    return _interpolate_cpu(input, size, scale_factor, "nearest")


def _upsample_nearest_decomp(input, size=None, scale_factor=None):
    _warn_upsample("upsample_nearest")
    return _E.interpolate(input, size, scale_factor, "nearest")


upsample_nearest = defop("upsample_nearest", _upsample_nearest_meta, cpu=_upsample_nearest_cpu, category=COMPOSITE,
                         decomposition=_upsample_nearest_decomp, tags=_NN_ONLY)


def _upsample_bilinear_meta(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)`` (warns).

    Args:
        input, size, scale_factor: as for ``interpolate``; ``input`` is 4-D.

    Returns:
        Tensor: the bilinear resize with aligned corners.

    Raises:
        ValueError, NotImplementedError, RuntimeError: as ``interpolate``.
    """
    return _interpolate_meta(input, size, scale_factor, "bilinear", True)


def _upsample_bilinear_cpu(input, size=None, scale_factor=None):
    _warn_upsample("upsample_bilinear")
    return _interpolate_cpu(input, size, scale_factor, "bilinear", True)


def _upsample_bilinear_decomp(input, size=None, scale_factor=None):
    _warn_upsample("upsample_bilinear")
    return _E.interpolate(input, size, scale_factor, "bilinear", True)


upsample_bilinear = defop("upsample_bilinear", _upsample_bilinear_meta, cpu=_upsample_bilinear_cpu,
                          category=COMPOSITE, decomposition=_upsample_bilinear_decomp, tags=_NN_ONLY)


# -- grid_sample / affine_grid -----------------------------------------------------------------------

_GRID_MODES = ("bilinear", "nearest", "bicubic")
_GRID_PADDINGS = ("zeros", "border", "reflection")
_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


@_memoized
def _grid_sample_plan(input, grid, mode, padding_mode, align_corners):
    _check_tensor("grid_sample", "input", input, 1)
    _check_tensor("grid_sample", "grid", grid, 2)
    if mode not in _GRID_MODES:
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in _GRID_PADDINGS:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=4)
        align_corners = False
    x_shape, g_shape = input._data.shape, grid._data.shape
    if grid.dtype is not input.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{_torch_name(input.dtype)} and grid has {_torch_name(grid.dtype)}")
    if len(x_shape) not in (4, 5) or len(g_shape) != len(x_shape) or x_shape[0] != g_shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {_fmt(x_shape)} and grid with sizes {_fmt(g_shape)}")
    n = len(x_shape) - 2
    if g_shape[-1] != n:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {n} in last dimension, but got grid with "
                           f"sizes {_fmt(g_shape)}")
    for i in range(2, len(x_shape)):
        if x_shape[i] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {_fmt(x_shape)} with dimension {i} being empty")
    if mode == "bicubic" and n != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    _check_dtype(f"grid_sampler_{n}d_cpu_kernel_impl", input, _FLOATS)
    return n, bool(align_corners), (x_shape[0], x_shape[1], *g_shape[1:-1])


def _grid_sample_meta(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` at the normalised coordinates of ``grid``: PyTorch's ``F.grid_sample``.

    ``grid[n, ..., :]`` holds (x, y) (or (x, y, z)) in [-1, 1], x along W: -1 is
    the left edge (``align_corners=False``) or the centre of the left pixel
    (``align_corners=True``).

    Args:
        input (Tensor): (N, C, H, W) or (N, C, D, H, W); floating, non-empty spatial dims.
        grid (Tensor): (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3), same dtype.
        mode (str): ``"bilinear"`` (trilinear for 5-D), ``"nearest"`` (ties to even) or
            ``"bicubic"`` (4-D only). Default ``"bilinear"``.
        padding_mode (str): values outside the input: ``"zeros"``, ``"border"``
            (clamp coordinates) or ``"reflection"`` (mirror them). Default ``"zeros"``.
        align_corners (bool, optional): see above; None means False, with PyTorch's warning.

    Returns:
        Tensor: (N, C, H_out, W_out) or (N, C, D_out, H_out, W_out).

    Raises:
        ValueError: for an unknown mode or padding mode.
        RuntimeError: for mismatched dims, batch sizes, dtypes or coordinate counts,
            empty spatial dims, or bicubic on 5-D input.
        NotImplementedError: for non-floating dtypes.

    Example:
        >>> import ember
        >>> x = ember.tensor([[[[1., 2.], [3., 4.]]]])
        >>> grid = ember.tensor([[[[-1., -1.], [0., 0.], [1., 1.]]]])
        >>> ember.nn.functional.grid_sample(x, grid, align_corners=True)
        tensor([[[[1.0000, 2.5000, 4.0000]]]])
    """
    out = _grid_sample_plan(input, grid, mode, padding_mode, align_corners)[-1]
    return MetaArray(out, input._data.dtype)


def _reflect(coord, twice_low, twice_high):
    """Mirror coordinates into [twice_low / 2, twice_high / 2] (PyTorch's ``reflect_coordinates``)."""
    xp = _array_namespace(coord)
    if twice_low == twice_high:
        return xp.zeros_like(coord)
    low = coord.dtype.type(twice_low / 2)
    span = coord.dtype.type((twice_high - twice_low) / 2)
    coord = xp.abs(coord - low)
    extra = xp.fmod(coord, span)
    flips = xp.floor(coord / span)
    return xp.where(flips % 2 == 0, extra + low, span - extra + low)


def _pad_coordinates(coord, size, padding_mode, align_corners):
    """Source coordinates after ``border`` or ``reflection`` padding (``zeros`` leaves them)."""
    if padding_mode == "border":
        return coord.clip(0, size - 1)
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        return coord.clip(0, size - 1)
    return coord


#: CuPy arrays of float32/float64 run bilinear and nearest grid sampling as one CUDA kernel (the
#: computation of ember._C.grid_sample, one thread per output value); False: the xp code below.
_GRID_SAMPLE_RAW_KERNEL = True

_GRID_SAMPLE_PREAMBLE = r"""
template <typename F> __device__ F gs_unnormalize(F c, long long size, bool align) {
  return align ? (c + F(1)) / F(2) * F(size - 1) : ((c + F(1)) * F(size) - F(1)) / F(2);
}
template <typename F> __device__ F gs_reflect(F c, long long twice_low, long long twice_high) {
  if (twice_low == twice_high) return F(0);
  const F low = F(twice_low) / F(2);
  const F span = F(twice_high - twice_low) / F(2);
  c = fabs(c - low);
  const F extra = fmod(c, span);
  const long long flips = (long long)floor(c / span);
  return flips % 2 == 0 ? extra + low : span - extra + low;
}
template <typename F> __device__ F gs_pad(F c, long long size, int padding, bool align) {
  if (padding == 0 || !isfinite(c)) return c;
  if (padding == 2) c = align ? gs_reflect(c, 0, 2 * (size - 1)) : gs_reflect(c, -1, 2 * size - 1);
  c = c < F(0) ? F(0) : c;
  return c < F(size - 1) ? c : F(size - 1);
}
template <typename F> __device__ long long gs_floor_index(F c, long long size) {
  if (!(c > F(-2) && c < F(size + 1))) return -2;
  return (long long)floor(c);
}
"""

_GRID_SAMPLE_SOURCE = r"""
const long long p = i % n_p;
const long long nc = i / n_p;
const long long g = (nc / n_c * n_p + p) * nd;
const T cx = gs_pad(gs_unnormalize(grid[g], size_w, align), size_w, padding, align);
const T cy = gs_pad(gs_unnormalize(grid[g + 1], size_h, align), size_h, padding, align);
const T cz = nd == 3 ? gs_pad(gs_unnormalize(grid[g + 2], size_d, align), size_d, padding, align) : T(0);
const long long plane = nc * size_d * size_h * size_w;
if (mode == 1) {
  const long long ix = gs_floor_index(nearbyint(cx), size_w), iy = gs_floor_index(nearbyint(cy), size_h),
                  iz = gs_floor_index(nearbyint(cz), size_d);
  const bool inside = ix >= 0 && ix < size_w && iy >= 0 && iy < size_h && iz >= 0 && iz < size_d;
  y = inside ? x[plane + (iz * size_h + iy) * size_w + ix] : T(0);
} else {
  const long long x0 = gs_floor_index(cx, size_w), y0 = gs_floor_index(cy, size_h);
  const long long z0 = nd == 3 ? gs_floor_index(cz, size_d) : 0;
  const T tx = cx - T(x0), ty = cy - T(y0), tz = cz - T(z0);
  T acc = T(0);
  for (int dz = 0; dz < (nd == 3 ? 2 : 1); ++dz)
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx) {
        const long long ix = x0 + dx, iy = y0 + dy, iz = z0 + dz;
        T w = (dx ? tx : T(1) - tx) * (dy ? ty : T(1) - ty);
        if (nd == 3) w *= dz ? tz : T(1) - tz;
        if (ix >= 0 && ix < size_w && iy >= 0 && iy < size_h && iz >= 0 && iz < size_d)
          acc += x[plane + (iz * size_h + iy) * size_w + ix] * w;
      }
  y = acc;
}
"""

_grid_sample_kernels = {}


def _grid_sample_device(xp, x5, points, mode, padding, align):
    """ember._C.grid_sample's computation on CuPy arrays: x5 (N, C, D, H, W), points (N, P, nd) -> (N, C, P)."""
    kernel = _grid_sample_kernels.get(xp)
    if kernel is None:
        kernel = xp.ElementwiseKernel(
            "raw T x, raw T grid, int64 n_c, int64 n_p, int64 size_d, int64 size_h, int64 size_w, int32 nd, "
            "int32 mode, int32 padding, bool align", "T y", _GRID_SAMPLE_SOURCE, "ember_grid_sample",
            preamble=_GRID_SAMPLE_PREAMBLE)
        _grid_sample_kernels[xp] = kernel
    N, C, D, H, W = x5.shape
    P, nd = points.shape[1], points.shape[2]
    y = xp.empty((N, C, P), x5.dtype)
    if y.size:
        kernel(x5.reshape(-1), points.reshape(-1), C, P, D, H, W, nd, mode, padding, bool(align), y)
    return y


def _grid_sample_cpu(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    n, align_corners, out = _grid_sample_plan(input, grid, mode, padding_mode, align_corners)
    x = _compute(input._data)
    N, C = x.shape[:2]
    spatial = x.shape[2:]
    # PyTorch computes float16/bfloat16 coordinates in that dtype; so do we, to pick the same pixels
    half_coordinates = input._data.dtype in _HALF_TYPES
    xp = _array_namespace(x)
    if mode != "bicubic" and not half_coordinates and (xp is np or _GRID_SAMPLE_RAW_KERNEL):
        x5 = xp.ascontiguousarray(x).reshape((N, C, *_lift3(spatial, 1)))
        points = xp.ascontiguousarray(_compute(grid._data).reshape(N, -1, n))
        mode_code, padding_code = 0 if mode == "bilinear" else 1, _GRID_PADDINGS.index(padding_mode)
        if xp is np:
            result = _C.grid_sample(x5, points, mode_code, padding_code, align_corners)
        else:
            result = _grid_sample_device(xp, x5, points, mode_code, padding_code, align_corners)
        return result.reshape(out).astype(input._data.dtype, copy=False)
    points = grid._data.reshape(N, -1, n)
    if not half_coordinates:
        points = _compute(points)
    flat = x.reshape(N, C, -1)
    ct = points.dtype.type

    # coords[i]: source coordinate along spatial dim i (D, H, W order); grid component n - 1 - i
    coords = []
    for i in range(n):
        size = spatial[i]
        c = points[..., n - 1 - i]
        if align_corners:
            c = (c + ct(1)) / ct(2) * ct(size - 1)
        else:
            c = ((c + ct(1)) * ct(size) - ct(1)) / ct(2)
        coords.append(c)

    def gather(indices, weight):
        """weight * input at integer coordinates (zero outside), for every channel: (N, C, M)."""
        inside = xp.ones(indices[0].shape, bool)
        flat_index = xp.zeros(indices[0].shape, np.int64)
        for i in range(n):
            idx = indices[i]
            inside &= (idx >= 0) & (idx < spatial[i])
            flat_index = flat_index * spatial[i] + idx.clip(0, spatial[i] - 1)
        every_channel = xp.broadcast_to(flat_index[:, None, :], flat.shape[:2] + flat_index.shape[1:])
        values = xp.take_along_axis(flat, every_channel, axis=2)
        # an outside tap's value is 0, but its weight still multiplies it: a non-finite coordinate's NaN weight
        # gives NaN, as PyTorch 2.13's bilinear and bicubic do (ember._C's bilinear kernel, and the CUDA one
        # that mirrors it, give 0 there instead)
        return xp.where(inside[:, None, :], values, 0) * weight.astype(x.dtype)[:, None, :]

    def index(c):
        """Integer coordinates, with non-finite ones outside."""
        c = c.astype(np.float64)
        return xp.where(xp.isfinite(c), c, -2).astype(np.int64)

    result = xp.zeros((N, C, points.shape[1]), x.dtype)
    with np.errstate(all="ignore"):
        if mode == "bicubic":
            base = [np.floor(c) for c in coords]
            weights = [_cubic_weights(c - b, ct(-0.75)) for c, b in zip(coords, base)]
            for a in range(4):
                for b in range(4):
                    idx = [index(_pad_coordinates(base[i] - ct(1) + ct(t), spatial[i], padding_mode, align_corners))
                           for i, t in zip(range(2), (a, b))]
                    result += gather(idx, weights[0][a] * weights[1][b])
        else:
            coords = [_pad_coordinates(c, spatial[i], padding_mode, align_corners) for i, c in enumerate(coords)]
            if mode == "nearest":
                result += gather([index(xp.rint(c)) for c in coords], xp.ones(coords[0].shape, x.dtype))
            else:
                low = [np.floor(c) for c in coords]
                frac = [(c - f).astype(x.dtype) for c, f in zip(coords, low)]
                low = [index(f) for f in low]
                for corner in np.ndindex(*(2,) * n):
                    weight = xp.ones(low[0].shape, x.dtype)
                    for i in range(n):
                        weight = weight * (frac[i] if corner[i] else x.dtype.type(1) - frac[i])
                    result += gather([low[i] + corner[i] for i in range(n)], weight)
    return result.reshape(out).astype(input._data.dtype, copy=False)


grid_sample = defop("grid_sample", _grid_sample_meta, cpu=_grid_sample_cpu, tags=_NN_ONLY)


@_memoized
def _affine_grid_plan(theta, size, align_corners):
    _check_tensor("affine_grid", "theta", theta, 1)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=4)
        align_corners = False
    size = _int_tuple("affine_grid", "size", size, 2)
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got ember.{theta.dtype.name}")
    shape = theta._data.shape
    if len(size) == 4:
        if len(shape) != 3 or shape[-2:] != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"ember.Size({list(shape)}).")
    elif len(size) == 5:
        if len(shape) != 3 or shape[-2:] != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"ember.Size({list(shape)}).")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if not (align_corners and min(size[2:]) == 1) and min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if shape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, "
                           f"{shape[2]}] but got: [{shape[0]}, {shape[2]}].")
    n = len(size) - 2
    return n, bool(align_corners), (size[0], *size[2:], n)


def _affine_grid_meta(theta, size, align_corners=None):
    """Sampling grids of a batch of affine maps, for :func:`grid_sample`: PyTorch's ``F.affine_grid``.

    Output point ``(x, y[, z])`` of the normalised [-1, 1] output grid maps to
    ``theta @ (x, y[, z], 1)``.

    Args:
        theta (Tensor): (N, 2, 3) for 2-D or (N, 3, 4) for 3-D maps; floating.
        size (sequence of int): the output image size (N, C, H, W) or (N, C, D, H, W).
        align_corners (bool, optional): as in ``grid_sample``; None means False, with PyTorch's warning.

    Returns:
        Tensor: (N, H, W, 2) or (N, D, H, W, 3), of ``theta``'s dtype.

    Raises:
        ValueError: for a non-floating ``theta``, a ``theta`` shape that doesn't fit
            ``size``, or non-positive sizes.
        NotImplementedError: for a ``size`` of length other than 4 or 5.
        RuntimeError: for a batch size that differs from ``theta``'s.

    Example:
        >>> import ember
        >>> theta = ember.tensor([[[1., 0., 0.], [0., 1., 0.]]])
        >>> ember.nn.functional.affine_grid(theta, (1, 1, 1, 2), align_corners=True)
        tensor([[[[-1.,  0.],
                  [ 1.,  0.]]]])
    """
    out = _affine_grid_plan(theta, size, align_corners)[-1]
    return MetaArray(out, theta._data.dtype)


def _affine_base(steps, align_corners, ct):
    """PyTorch's ``linspace_from_neg_one``: the normalised coordinates of ``steps`` pixels."""
    if steps <= 1:
        return np.zeros(1, ct)
    r = np.linspace(-1, 1, steps).astype(ct)
    if not align_corners:
        r = r * ct.type(steps - 1) / ct.type(steps)
    return r


def _affine_grid_cpu(theta, size, align_corners=None):
    n, align_corners, out = _affine_grid_plan(theta, size, align_corners)
    th = _compute(theta._data)
    ct = th.dtype
    spatial = out[1:-1]
    base = np.ones((*spatial, n + 1), ct)
    for i in range(n):  # component i runs along spatial dim n - 1 - i (x along W)
        shape = [1] * n
        shape[n - 1 - i] = spatial[n - 1 - i]
        base[..., i] = _affine_base(spatial[n - 1 - i], align_corners, ct).reshape(shape)
    xp = _array_namespace(th)
    base = base if xp is np else xp.asarray(base)  # built on the host from the size alone (metadata)
    grid = xp.matmul(base.reshape(1, -1, n + 1), th.transpose(0, 2, 1))
    return grid.reshape(out).astype(theta._data.dtype, copy=False)


affine_grid = defop("affine_grid", _affine_grid_meta, cpu=_affine_grid_cpu, tags=_NN_ONLY)


# -- pixel_shuffle / pixel_unshuffle -------------------------------------------------------------------


@_memoized
def _shuffle_plan(op, input, factor, up):
    _check_tensor(op, "input", input)
    factor = _int_arg(op, "upscale_factor" if up else "downscale_factor", factor, 2)
    shape = input._data.shape
    if len(shape) < 3:
        raise RuntimeError(f"{op} expects input to have at least 3 dimensions, but got input with {len(shape)} "
                           "dimension(s)")
    if factor <= 0:
        raise RuntimeError(f"{op} expects a positive {'upscale' if up else 'downscale'}_factor, but got {factor}")
    c, h, w = shape[-3:]
    if up:
        if c % (factor * factor):
            raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                               f"of upscale_factor, but input.size(-3)={c} is not divisible by {factor * factor}")
        return factor, (*shape[:-3], c // (factor * factor), h * factor, w * factor)
    if h % factor:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {factor}")
    if w % factor:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {factor}")
    return factor, (*shape[:-3], c * factor * factor, h // factor, w // factor)


def _pixel_shuffle_meta(input, upscale_factor):
    """Rearrange ``(*, C * r * r, H, W)`` into ``(*, C, H * r, W * r)``: sub-pixel convolution's shuffle.

    Output ``[..., c, h * r + i, w * r + j]`` is input ``[..., c * r * r + i * r + j, h, w]``.

    Args:
        input (Tensor): at least 3-D, channels (dim -3) divisible by ``r * r``; any dtype.
        upscale_factor (int): ``r``, positive.

    Returns:
        Tensor: ``(*, C, H * r, W * r)``.

    Raises:
        RuntimeError: for fewer than 3 dims, a non-positive factor or indivisible channels.
        TypeError: for a non-integer factor.

    Example:
        >>> import ember
        >>> ember.nn.functional.pixel_shuffle(ember.arange(4).reshape(4, 1, 1), 2)
        tensor([[[0, 1],
                 [2, 3]]])
    """
    return MetaArray(_shuffle_plan("pixel_shuffle", input, upscale_factor, True)[1], input._data.dtype)


def _pixel_shuffle_cpu(input, upscale_factor):
    r, out = _shuffle_plan("pixel_shuffle", input, upscale_factor, True)
    x = input._data
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    result = _array_namespace(x).empty((*lead, c // (r * r), h, r, w, r), x.dtype)
    for i in range(r):  # r * r strided copies with whole rows inside (numpy's copy of the transpose loops r at a time)
        for j in range(r):
            result[..., i, :, j] = y[..., i, j, :, :]
    return result.reshape(out)


def _pixel_shuffle_decomp(input, upscale_factor):
    r, out = _shuffle_plan("pixel_shuffle", input, upscale_factor, True)
    lead, (c, h, w) = input.shape[:-3], input.shape[-3:]
    k = len(lead)
    y = _E.reshape(input, (*lead, c // (r * r), r, r, h, w))
    y = _E.permute(y, (*range(k), k, k + 3, k + 1, k + 4, k + 2))
    return _E.reshape(_E.clone(y, memory_format=_contiguous()), out)


def _contiguous():
    from .creation import contiguous_format

    return contiguous_format


pixel_shuffle = defop("pixel_shuffle", _pixel_shuffle_meta, cpu=_pixel_shuffle_cpu, category=COMPOSITE,
                      decomposition=_pixel_shuffle_decomp, tags=_NN)


def _pixel_unshuffle_meta(input, downscale_factor):
    """Rearrange ``(*, C, H * r, W * r)`` into ``(*, C * r * r, H, W)``: the inverse of :func:`pixel_shuffle`.

    Args:
        input (Tensor): at least 3-D, H and W divisible by ``r``; any dtype.
        downscale_factor (int): ``r``, positive.

    Returns:
        Tensor: ``(*, C * r * r, H, W)``, empty inputs included (PyTorch's CPU kernel hands an empty
        input back unchanged: ``(0, 4, 4, 4)`` stays ``(0, 4, 4, 4)`` where its meta function and
        ember give ``(0, 16, 2, 2)`` for a factor of 2).

    Raises:
        RuntimeError: for fewer than 3 dims, a non-positive factor or indivisible H or W.
        TypeError: for a non-integer factor.

    Example:
        >>> import ember
        >>> ember.nn.functional.pixel_unshuffle(ember.arange(4).reshape(1, 2, 2), 2).flatten()
        tensor([0, 1, 2, 3])
    """
    return MetaArray(_shuffle_plan("pixel_unshuffle", input, downscale_factor, False)[1], input._data.dtype)


def _pixel_unshuffle_cpu(input, downscale_factor):
    r, out = _shuffle_plan("pixel_unshuffle", input, downscale_factor, False)
    x = input._data
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    result = _array_namespace(x).empty((*lead, c, r, r, h // r, w // r), x.dtype)
    for i in range(r):
        for j in range(r):
            result[..., i, j, :, :] = y[..., :, i, :, j]
    return result.reshape(out)


def _pixel_unshuffle_decomp(input, downscale_factor):
    r, out = _shuffle_plan("pixel_unshuffle", input, downscale_factor, False)
    lead, (c, h, w) = input.shape[:-3], input.shape[-3:]
    k = len(lead)
    y = _E.reshape(input, (*lead, c, h // r, r, w // r, r))
    y = _E.permute(y, (*range(k), k, k + 2, k + 4, k + 1, k + 3))
    return _E.reshape(_E.clone(y, memory_format=_contiguous()), out)


pixel_unshuffle = defop("pixel_unshuffle", _pixel_unshuffle_meta, cpu=_pixel_unshuffle_cpu, category=COMPOSITE,
                        decomposition=_pixel_unshuffle_decomp, tags=_NN)


# -- channel_shuffle ------------------------------------------------------------------------------------


@_memoized
def _channel_shuffle_plan(input, groups):
    """Check ``channel_shuffle``'s arguments; the number of channels per group."""
    _check_tensor("channel_shuffle", "input", input)
    groups = _int_arg("channel_shuffle", "groups", groups, 2)
    shape = input._data.shape
    if len(shape) <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {_fmt(shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if shape[1] % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {shape[1]} channels and {groups} "
                           "groups.")
    return groups, shape[1] // groups


def _channel_shuffle_meta(input, groups):
    """Interleave the channel groups of ``(N, C, *)``: ShuffleNet's channel shuffle.

    The channels, read as a ``(groups, C / groups)`` grid, are transposed: output channel
    ``j * groups + g`` is input channel ``g * (C / groups) + j``.

    Args:
        input (Tensor): ``(N, C, *)``, at least 3-D, ``C`` divisible by ``groups``; any dtype.
        groups (int): the number of groups, positive.

    Returns:
        Tensor: the same shape and dtype as ``input``.

    Raises:
        RuntimeError: for fewer than 3 dims, a non-positive ``groups`` or ``C`` not divisible by it.
        TypeError: for a non-integer ``groups``.

    References:
        Zhang et al., "ShuffleNet: An Extremely Efficient Convolutional Neural Network for Mobile
        Devices", CVPR 2018, https://arxiv.org/abs/1707.01083

    Example:
        >>> import ember
        >>> ember.nn.functional.channel_shuffle(ember.arange(6).reshape(1, 6, 1), 2).flatten()
        tensor([0, 3, 1, 4, 2, 5])
    """
    _channel_shuffle_plan(input, groups)
    return MetaArray(input._data.shape, input._data.dtype)


def _channel_shuffle_cpu(input, groups):
    g, k = _channel_shuffle_plan(input, groups)
    x = input._data
    n, rest = x.shape[0], x.shape[2:]
    return _array_namespace(x).ascontiguousarray(x.reshape(n, g, k, *rest).swapaxes(1, 2)).reshape(x.shape)


def _channel_shuffle_decomp(input, groups):
    g, k = _channel_shuffle_plan(input, groups)
    n, rest = input.shape[0], tuple(input.shape[2:])
    y = _E.transpose(_E.reshape(input, (n, g, k, *rest)), 1, 2)
    return _E.reshape(_E.clone(y, memory_format=_contiguous()), tuple(input.shape))


channel_shuffle = defop("channel_shuffle", _channel_shuffle_meta, cpu=_channel_shuffle_cpu, category=COMPOSITE,
                        decomposition=_channel_shuffle_decomp, tags=_NN)


# -- CUDA kernels ------------------------------------------------------------------------------------------
# The kernels of pooling, unpooling, interpolation, grid sampling and channel_shuffle take CuPy arrays too:
# pooling through its xp paths, the rest computing over their input's namespace with host-built index maps
# uploaded. Registered for "cuda", they run there as on CPU, composites included (so max_pool{n}d without
# return_indices skips the indices). pixel_shuffle/pixel_unshuffle keep their decompositions on cuda: one
# strided copy there, where the CPU kernel's r * r row copies would be r * r kernel launches.
for _name in (*(f"{kind}{_n}d{suffix}" for _n in (1, 2, 3)
                for kind, suffix in (("max_pool", ""), ("max_pool", "_with_indices"), ("avg_pool", ""),
                                     ("adaptive_avg_pool", ""), ("adaptive_max_pool", ""),
                                     ("adaptive_max_pool", "_with_indices"), ("lp_pool", ""), ("max_unpool", ""))),
              "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "grid_sample", "affine_grid",
              "channel_shuffle"):
    registry[_name].register_kernel("cuda", registry[_name].kernels["cpu"])
del _name
