"""Input makers and reference helpers shared by the OpInfos of the reduction ops.

The references are written on purpose in a different way from the kernels (Python loops over
rows, ``sorted`` with keys, numpy's own functions in float64), so that they check rather than repeat.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from ... import _dtype as D
from .._opinfo import ALL_TYPES, COMPLEX_TYPES, FLOATING_TYPES, INTEGRAL_TYPES, ErrorInput, SampleInput

_REAL = ALL_TYPES  # bool, integers, floats
_NUMERIC = INTEGRAL_TYPES + FLOATING_TYPES  # no bool, no complex
_FLOAT_COMPLEX = FLOATING_TYPES + COMPLEX_TYPES
_FLOAT32_64 = (D.float32, D.float64)


# -- making inputs ---------------------------------------------------------------------------------------


def _tensor(array, dtype, device, noncontiguous=False):
    """A tensor of ``array``'s values as ``dtype``; optionally a non-contiguous view of the same values."""
    import ember

    array = np.asarray(array)
    if dtype.is_complex:
        array = array.astype(np.complex128)
    array = array.astype(dtype.numpy_dtype)
    if noncontiguous and array.ndim and array.size > 1:
        wide = np.zeros(array.shape[:-1] + (array.shape[-1] * 2,), dtype=array.dtype)
        wide[..., ::2] = array
        return ember.tensor(wide, device=device)[..., ::2]
    return ember.tensor(array, device=device)


def _small_ints(shape, dtype, device, seed=0, low=0, high=3, noncontiguous=False):
    """A tensor of few distinct integer values (many ties, zeros), in any dtype."""
    values = np.random.default_rng(seed).integers(low, high + 1, size=shape)
    if dtype is D.bool:
        values = values % 2
    return _tensor(values, dtype, device, noncontiguous)


def _with_nan(t, *flat_positions):
    """A copy of floating ``t`` with NaN at the given flat positions (unchanged for other dtypes), a leaf that
    requires grad when ``t`` does."""
    import ember

    if not (t.dtype.is_floating_point or t.dtype.is_complex) or t.dtype is D.bfloat16:
        # bfloat16 is left out: numpy's assert_array_equal (test_inputs_not_modified) sees its NaNs as different
        return t
    array = t.detach().cpu().numpy().astype(np.complex128 if t.dtype.is_complex else np.float64)
    for p in flat_positions:
        array.reshape(-1)[p] = np.nan
    return ember.tensor(array.astype(t.dtype.numpy_dtype), device=t.device, requires_grad=t.requires_grad)


# -- reference helpers -----------------------------------------------------------------------------------


def _wide(a):
    """``a`` in the widest dtype of its kind: references compute in int64/float64/complex128."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def _quiet(fn):
    """Run a reference with numpy's warnings (empty slices, 0/0) silenced."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)

    return run


def _scan(a, dim, row_fn):
    """Apply ``row_fn`` (1-D -> tuple of 1-D arrays of the same length) along ``dim``."""
    a = np.asarray(a)
    if a.ndim == 0:
        return tuple(np.asarray(v).reshape(()) for v in row_fn(a.reshape(1)))
    moved = np.moveaxis(a, dim, -1)
    rows = moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1])
    outs = [row_fn(r) for r in rows]
    count = len(row_fn(np.zeros(1, a.dtype)))
    results = []
    for i in range(count):
        stacked = np.array([o[i] for o in outs]).reshape(moved.shape) if outs else np.zeros(moved.shape)
        results.append(np.moveaxis(stacked, -1, dim))
    return tuple(results)


class _Lazy:
    """A tensor argument of an error case, made when the case runs (on the device under test)."""

    def __init__(self, make):
        self.make = make

    def __call__(self, ember, device):
        return self.make(ember, device)


def _resolve(value, ember, device):
    return value(ember, device) if isinstance(value, _Lazy) else value


def _errors(*cases):
    """ErrorInputs from ``(input, args, kwargs, error, regex)``; :class:`_Lazy` values become tensors."""

    def gen(opinfo, device):
        import ember

        for make_input, args, kwargs, error, regex in cases:
            args = tuple(_resolve(a, ember, device) for a in args)
            kwargs = {k: _resolve(v, ember, device) for k, v in kwargs.items()}
            yield ErrorInput(SampleInput(make_input(ember, device), args, kwargs), error, regex)

    return gen


def _floats(*shape):
    return _Lazy(lambda ember, device: ember.ones(*shape, device=device))


def _ints(*shape):
    return _Lazy(lambda ember, device: ember.ones(*shape, dtype=ember.int64, device=device))


def _empty(*shape):
    return _Lazy(lambda ember, device: ember.zeros(*shape, device=device))


def _of(values, dtype=None):
    return _Lazy(lambda ember, device: ember.tensor(values, dtype=dtype, device=device))
