"""Derivatives of ``max_unpool{1,2,3}d`` (``ember._ops.nn_unpooling``): ``grad`` gathered at the indices."""

from __future__ import annotations

import math

from .._table import derivative


def _make_max_unpool(n):
    def unpool_grad(grad, input, indices):
        # out[idx] = x: the gradient reads grad back at the indices
        lead = input.shape[: input.dim() - n]
        count = math.prod(lead)
        cells = math.prod(grad.shape[grad.dim() - n :])
        g = grad.reshape(count, cells).gather(1, indices.reshape(count, math.prod(input.shape[input.dim() - n :])))
        return g.reshape(input.shape)

    derivative(f"max_unpool{n}d", input=unpool_grad, nondiff=("indices",))


for _n in (1, 2, 3):
    _make_max_unpool(_n)
