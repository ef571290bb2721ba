"""Derivatives of the advanced-indexing ops (``ember._ops.indexing``).

``input[indices]`` reads positions (some maybe more than once), so its
backward adds the gradient back at those positions. ``index_put`` writes
``values`` there: ``values`` gets the gradient read at those positions, and
``input`` the gradient everywhere else (everywhere, when the values are added
rather than written).
"""

from __future__ import annotations

from ember._ops import registry

from .._table import derivative
from ._helpers import metadata_only

_index = registry["index"]


derivative(
    "index",
    input=metadata_only(
        lambda grad, input_meta, indices: grad.new_zeros(tuple(input_meta.shape)).index_put(
            indices, grad, accumulate=True
        )
    ),
    nondiff=("indices",),
)


def _overwritten(grad, indices, accumulate):
    """``grad`` with the positions that ``index_put`` overwrote set to zero (they no longer depend on the input)."""
    if accumulate:
        return grad
    return grad.index_put(indices, grad.new_zeros(()))


# values broadcast to the indexed shape; the engine sums the gathered gradient back to values' shape
derivative(
    "index_put",
    input=_overwritten,
    values=lambda grad, indices: _index(grad, indices),
    nondiff=("indices",),
)
derivative(
    "index_put_",
    self=_overwritten,
    values=lambda grad, indices: _index(grad, indices),
    nondiff=("indices",),
)
