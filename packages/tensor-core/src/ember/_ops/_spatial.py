"""Helpers shared by the spatial op modules of ``ember.nn.functional``.

Used by nn_padding, nn_conv, nn_fold, nn_pooling, nn_unpooling, nn_interpolate, nn_grid_sample and
nn_shuffle (and the CUDA kernels of :mod:`ember.cuda.kernels.conv` and :mod:`ember.cuda.kernels.pooling`):
argument checks with PyTorch's messages, and :func:`_memoized`, which caches the "plan" functions.

Argument checking happens once per distinct call signature: the plan functions that check arguments and
compute output shapes are memoised by the arguments' metadata (the meta function and the kernel both need
them). The plans of ``conv{n}d`` and ``convolution``, asked four times per convolution under autograd, key
their common calls (tensors, ints and tuples of ints) with a cheaper flat key (:func:`_ints_key`,
:func:`_tensors_key`). This module registers no ops.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ._nn_common import _F32, _HALF_TYPES, _fmt, _not_implemented

__all__ = []  # private helpers of the spatial op modules


_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_FLOATS = (D.float16, D.bfloat16, D.float32, D.float64)
_C_FLOAT = {_F32, _F64}
_INT_TYPES = (D.uint8, D.int8, D.int16, D.int32, D.int64)
_LETTERS = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}


# -- argument checks -----------------------------------------------------------------------------------



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


def _empty_nonbatch_dim(shape, n):
    """The first empty dim of ``shape`` (an ``n``-d spatial input, batched or not) other than the batch dim,
    or None: adaptive pooling and max unpooling refuse such inputs, each with PyTorch's message."""
    for i in range(1 if len(shape) == n + 2 else 0, len(shape)):
        if shape[i] == 0:
            return i
    return None


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
