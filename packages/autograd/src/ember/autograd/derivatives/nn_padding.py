"""Derivative of ``pad`` (``ember._ops.nn_padding``): ``index_add`` of ``grad`` along each dim, at the
positions the forward read (from the forward's own plan, so they match it exactly).
"""

from __future__ import annotations

import numpy as np

import ember
from ember._ops import nn_padding as _core  # the forward's plans

from .._table import derivative
from ._spatial import _const

# -- pad ------------------------------------------------------------------------------------------------


def _pad_grad(grad, input, pad, mode, value):
    plan, _ = _core._pad_plan(input, pad, mode, value)
    if mode == "constant":
        # the padded border gets no gradient and cropped parts get zeros: padding by the negated amounts
        return ember.nn.functional.pad(grad, [-int(v) for v in pad])
    g = grad
    for d, lo, hi in plan:
        if lo == 0 and hi == 0:
            continue
        size = input.shape[d]
        out = g.shape[d]
        # the forward read input position idx[j] into output position j (as the core's kernel does)
        idx = np.arange(out) - lo
        if mode == "reflect":
            idx = np.abs(idx)
            idx = np.where(idx >= size, 2 * (size - 1) - idx, idx)
        elif mode == "replicate":
            idx = np.clip(idx, 0, size - 1)
        else:
            start, kept = max(-lo, 0), size - max(-lo, 0) - max(-hi, 0)
            idx = start + (np.arange(out) - max(lo, 0)) % max(kept, 1)
        shape = list(g.shape)
        shape[d] = size
        g = ember.zeros(shape, dtype=g.dtype, device=g.device).index_add(d, _const(idx, g), g)
    return g


derivative("pad", input=_pad_grad)
