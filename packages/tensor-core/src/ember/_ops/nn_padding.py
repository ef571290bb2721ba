"""ember.nn.functional.pad: constant, reflect, replicate and circular padding of the last dims.

The CPU kernel of the reflect, replicate and circular modes is ember._C's ``pad_nd`` over the ``N * C``
planes; constant padding is a numpy fill and one slice assignment. The kernel is namespace-generic
otherwise, so it is also ``pad``'s CUDA kernel (on CuPy arrays).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _C
from .. import _dtype as D
from .._meta import MetaArray
from ._array_module import array_namespace as _array_namespace
from ._nn_common import _NN_ONLY, _check_tensor, _fmt, _not_implemented
from ._registry import defop
from ._spatial import _int_tuple, _lift3, _memoized

__all__ = []  # ops are exported by ember/__init__.py and ember.nn.functional from the registry


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
