"""OpInfos of ``scaled_dot_product_attention``.

References are written directly from the definitions (in float64, loops where that
is clearer), independently of the kernels; see :mod:`ember.testing._samples._nn_common`.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from .._opinfo import (
    SampleInput,
)
from ._common import maker
from ._nn_common import (
    _FLOATS,
    _args,
    _errors,
    _f64,
    _nn,
    _z,
)


def _sdpa_samples(opinfo, device, dtype, requires_grad):
    import ember

    make = maker(device, dtype, requires_grad, low=-2, high=2)
    bools = maker(device, ember.bool, False, seed=3)
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), name="3-d")
    yield SampleInput(make((3, 4)), (make((5, 4)), make((5, 2))), name="2-d")
    yield SampleInput(make((2, 2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), name="broadcast batch")
    yield SampleInput(make((2, 4, 4)), (make((2, 4, 4)), make((2, 4, 3))), {"is_causal": True}, name="causal")
    yield SampleInput(make((1, 5, 4)), (make((1, 3, 4)), make((1, 3, 2))), {"is_causal": True},
                      name="causal, more queries than keys")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), {"attn_mask": bools((3, 5))},
                      name="bool mask")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), {"attn_mask": make((2, 3, 5))},
                      name="float mask")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))),
                      {"attn_mask": ember.zeros(3, 5, dtype=ember.bool, device=device)}, name="everything masked")
    yield SampleInput(make((2, 3, 4)), (make((2, 5, 4)), make((2, 5, 6))), {"scale": 0.3}, name="scale")
    yield SampleInput(make((1, 4, 3, 4)), (make((1, 2, 5, 4)), make((1, 2, 5, 6))), {"enable_gqa": True},
                      name="grouped-query")
    yield SampleInput(make((2, 0, 4)), (make((2, 5, 4)), make((2, 5, 6))), name="no queries")
    yield SampleInput(make((2, 3, 4), noncontiguous=True), (make((2, 5, 4)).transpose(0, 1).transpose(0, 1),
                                                             make((2, 5, 6), noncontiguous=True)),
                      name="noncontiguous")


def _sdpa_ref(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    q, k, v = _f64(q), _f64(k), _f64(v)
    if enable_gqa and q.ndim >= 3:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    allowed = np.ones(scores.shape[-2:], bool)
    if is_causal:
        allowed = np.tril(allowed)
    if attn_mask is not None and np.asarray(attn_mask).dtype == np.bool_:
        allowed = allowed & np.asarray(attn_mask)
    elif attn_mask is not None:
        scores = scores + _f64(attn_mask)
    scores = np.where(allowed, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True, initial=-np.inf)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = weights.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, weights / np.where(total > 0, total, 1), 0)
    return weights @ v


_nn("scaled_dot_product_attention", _sdpa_samples, _FLOATS, _sdpa_ref,
    _errors((_args(_z(4), _z(4), _z(6)), {}, RuntimeError, "at least 2 dimensional"),
            (_args(_z(2, 3, 4), _z(2, 5, 3), _z(2, 5, 6)), {}, RuntimeError, "Expected size for first two dimensions"),
            (_args(_z(2, 3, 4), _z(2, 5, 4), _z(2, 5, 6)), {"attn_mask": lambda device: _z(3, 5)(device) > 0, "is_causal": True},
             RuntimeError, "Explicit attn_mask should not be set when is_causal=True"),
            (_args(_z(2, 3, 4), _z(2, 5, 4, dtype=D.float64), _z(2, 5, 6)), {}, RuntimeError, "the same dtype"),
            (_args(_z(2, 3, 4), _z(2, 5, 4), _z(2, 5, 6)), {"attn_mask": _z(3, 5, dtype=D.float64)},
             RuntimeError, "Expected attn_mask dtype to be bool or float"),
            (_args(_z(1, 4, 3, 4), _z(1, 3, 5, 4), _z(1, 3, 5, 6)), {"enable_gqa": True}, RuntimeError,
             "Number of heads in key and value must divide")),
    tolerances={D.float16: (3e-3, 3e-3), D.bfloat16: (3e-2, 3e-2)})
