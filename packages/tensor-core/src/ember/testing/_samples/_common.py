"""Shared pieces of sample generators."""

from __future__ import annotations

import functools

import numpy as np

from ... import _dtype as D
from .. import _opinfo


def maker(device, dtype, requires_grad, seed=0, **defaults):
    """A ``make(shape, **overrides)`` closure over a seeded numpy generator."""
    rng = np.random.default_rng(seed)
    return functools.partial(_opinfo.make_tensor, dtype=dtype, device=device, rng=rng, requires_grad=requires_grad,
                             **defaults)


def scalar_for(dtype):
    """A Python number of the dtype's category (bool for bool, int for ints, float otherwise)."""
    if dtype is D.bool:
        return True
    if dtype.category == D.INTEGRAL:
        return 3
    if dtype.is_complex:
        return 1.5 - 0.5j
    return 1.5
