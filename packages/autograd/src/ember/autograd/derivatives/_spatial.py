"""Helpers of the derivatives of the spatial ops (convolution, pooling, interpolation, grid sampling)."""

from __future__ import annotations

import numpy as np

import ember

_FLOAT64 = np.dtype(np.float64)


_INT_ONLY = frozenset((int,))


def _tup(value, n):
    """A convolution parameter (an int, or a sequence of 1 or ``n`` ints) as a tuple of ``n`` ints."""
    if type(value) is tuple and len(value) == n and _INT_ONLY.issuperset(map(type, value)):
        return value  # what conv{n}d's decomposition records: its plan's tuples (the loop below copies them)
    if isinstance(value, ember.Tensor):
        value = value.tolist()
    if isinstance(value, (tuple, list)):
        value = tuple(int(v) for v in value)
        return value * n if len(value) == 1 else value
    return (int(value),) * n


def _narrow_to(t, sizes, first=2):
    """``t`` cut down to ``sizes`` in the dims from ``first`` on (keeping the start); no op where it fits."""
    for i, size in enumerate(sizes):
        if t.shape[first + i] != size:
            t = t.narrow(first + i, 0, size)
    return t


def _const(array, like):
    """A constant tensor (indices, weights) from a numpy array, on ``like``'s device."""
    return ember.tensor(np.ascontiguousarray(array), device=like.device)


def _compute_dtype(t):
    """The dtype resampling gradients are computed in: float32 for float16/bfloat16, else ``t``'s."""
    return ember.float32 if t.dtype in (ember.float16, ember.bfloat16) else t.dtype
