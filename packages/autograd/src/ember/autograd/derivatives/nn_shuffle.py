"""Derivatives of ``pixel_shuffle``/``pixel_unshuffle`` and ``channel_shuffle`` (``ember._ops.nn_shuffle``):
permutations, whose adjoints are the inverse permutations."""

from __future__ import annotations

import ember

from .._table import derivative

# -- pixel_shuffle / pixel_unshuffle: each other's inverse (a permutation, so also the adjoint) ----------

derivative(
    "pixel_shuffle", input=lambda grad, upscale_factor: ember.nn.functional.pixel_unshuffle(grad, upscale_factor)
)
derivative(
    "pixel_unshuffle", input=lambda grad, downscale_factor: ember.nn.functional.pixel_shuffle(grad, downscale_factor)
)

# -- channel_shuffle: a permutation of channels; its adjoint is the shuffle with C / groups groups ----------

derivative(
    "channel_shuffle",
    input=lambda grad, groups: ember.nn.functional.channel_shuffle(grad, grad.shape[1] // groups),
)
