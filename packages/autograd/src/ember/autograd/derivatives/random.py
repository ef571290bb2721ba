"""Derivatives of the random ops (``ember._ops.random``).

Samples are not differentiated through their parameters: PyTorch gives
``normal(mean, std)`` and ``bernoulli(p)`` a backward node whose gradients are
zeros (a reparameterised sample is written ``mean + std * randn_like(std)``),
and so does ember. The in-place fills (``uniform_``, ``normal_``, ...) replace
``self``'s values, which then get a zero gradient. Factories and integer
samples (``randint``, ``randperm``, ``multinomial``, ``rand_like``, ...) are
non-differentiable.
"""

from __future__ import annotations

import ember

from .._table import derivative, nondifferentiable


def _zeros(grad):
    """Zeros: the gradient of a random sample with respect to its parameters, as PyTorch gives it."""
    return ember.zeros_like(grad)


nondifferentiable(
    "rand", "randn", "randint", "randperm", "multinomial", "rand_like", "randn_like", "randint_like",
)  # fmt: skip
derivative("normal", mean=_zeros, std=_zeros)
derivative("bernoulli", input=_zeros)
derivative("uniform_", self=_zeros)
derivative("normal_", self=_zeros)
derivative("random_", self=_zeros)
derivative("exponential_", self=_zeros)
derivative("bernoulli_", self=_zeros, p=_zeros)
