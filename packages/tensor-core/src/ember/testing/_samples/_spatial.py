"""Helpers of the OpInfos of the spatial ops: dtype sets, tolerances, the exact-dtype widening of references, error-input makers.
"""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ErrorInput, SampleInput

_FLOATS = (D.float16, D.bfloat16, D.float32, D.float64)

_FLOATS = (D.float16, D.bfloat16, D.float32, D.float64)
_INTS = (D.uint8, D.int8, D.int16, D.int32, D.int64)

# sums of many products: float32 rounding grows with the sum's terms
_SUM_TOLERANCES = {D.float32: (1e-4, 1e-5), D.complex64: (1e-4, 1e-5), D.float16: (4e-3, 1e-2),
                   D.bfloat16: (1.6e-2, 5e-2)}


def _tup(value, n):
    return tuple(value) * (n if len(tuple(value)) == 1 else 1) if isinstance(value, (tuple, list)) else (value,) * n


def _wide(a):
    """``a`` in a dtype where the reference computes exactly enough: int64, float64 or complex128 (bool stays)."""
    if a.dtype.kind == "b":
        return a
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def _errors(*cases):
    """``(make_args, kwargs, error, regex)`` -> an error_inputs generator; make_args(ember, device) gives the args."""

    def gen(opinfo, device):
        import ember

        for make_args, kwargs, error, regex in cases:
            args = make_args(ember, device)
            yield ErrorInput(SampleInput(args[0], tuple(args[1:]), kwargs), error, regex)

    return gen


def _z(*shape, dtype=None):
    return lambda e, d: e.zeros(*shape, dtype=dtype, device=d)


def _args(*makers):
    return lambda e, d: tuple(m(e, d) if callable(m) else m for m in makers)
