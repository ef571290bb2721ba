"""Helpers shared by the OpInfos of the shape ops (index tensors, error tables, input makers).

Samples cover, for every dtype: empty, zero-dim, non-contiguous and
transposed inputs, promotion across inputs (cat/stack family), repeated
indices (accumulating ops), both ``include_self`` settings, index tensors of
int32 where PyTorch allows them, and the keyword arguments that matter.
References are numpy, written element by element (Python loops over small
samples) where numpy has no direct counterpart, so they don't share code
paths with the kernels.
"""

from __future__ import annotations

import numpy as np

from .._opinfo import ErrorInput, SampleInput


def _ember():
    import ember

    return ember


def _idx(values, device, dtype=None):
    """An index tensor (int64 unless ``dtype``) from nested lists or a numpy array."""
    ember = _ember()
    return ember.tensor(np.asarray(values), dtype=ember.int64 if dtype is None else dtype, device=device)


def _wide(a):
    """``a`` in a wide dtype of its category for exact-ish reference arithmetic (bool stays bool)."""
    a = np.asarray(a)
    kind = a.dtype.kind
    if kind == "b":
        return a.copy()
    if kind in "iu":
        return a.astype(np.int64)
    if kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def _errors(*cases):
    """ErrorInputs from ``(make_input(ember, device), args, kwargs, error, regex)`` tuples."""

    def gen(opinfo, device):
        ember = _ember()
        for build, args, kwargs, error, regex in cases:
            inp, built_args = build(ember, device)
            yield ErrorInput(SampleInput(inp, built_args + args, kwargs), error, regex)

    return gen


def _t(*shape, dtype=None):
    """A builder of ``zeros(shape)`` for error inputs."""
    return lambda ember, device: (ember.zeros(shape, dtype=dtype or ember.float32, device=device), ())


def _with(builder, *extra):
    """A builder that also returns extra leading args (tensors built from ``ember``)."""

    def build(ember, device):
        inp, _ = builder(ember, device)
        return inp, tuple(e(ember, device) if callable(e) else e for e in extra)

    return build
