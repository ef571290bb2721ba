"""Derivatives of the distribution samplers (``ember._ops.random_distributions``).

``_standard_gamma`` is reparameterised: its sample's derivative in the concentration is the implicit
gradient ``_standard_gamma_grad`` (Figurnov et al., 2018), so ``Gamma.rsample``, ``Beta.rsample`` and
``Dirichlet.rsample`` carry gradients, as in PyTorch. ``poisson`` and ``binomial`` are discrete: their
samples get zero gradients (PyTorch gives ``poisson`` a zeros backward), and the gradient op itself is
not differentiated further.
"""

from __future__ import annotations

import ember

from .._table import derivative, nondifferentiable

derivative("_standard_gamma", input=lambda grad, input, result: grad * ember._standard_gamma_grad(input, result))
derivative("poisson", input=lambda grad: ember.zeros_like(grad))
nondifferentiable("binomial", "_standard_gamma_grad")
