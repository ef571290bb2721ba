"""ember.func: composable function transforms (PyTorch's ``torch.func``), in ember-autograd.

* :func:`vmap`: vectorise a function of one sample over a batch (batching rules:
  :mod:`ember.func._batching_rules`; which ops fall back to a loop: :mod:`ember.func.debug`);
* :func:`grad`, :func:`grad_and_value`, :func:`vjp`, :func:`jacrev`, :func:`hessian`:
  reverse mode, built on :func:`ember.autograd.grad` with ``create_graph`` so they nest;
* :func:`jvp`, :func:`jacfwd`, :func:`linearize`: forward mode;
* :func:`functional_call`, :func:`stack_module_state`: modules as functions of their parameters;
  :func:`replace_all_batch_norm_modules_`: batch norm without running statistics, for vmap.
"""

from __future__ import annotations

from . import debug
from ._grad import grad, grad_and_value, vjp
from ._jacobians import hessian, jacfwd, jacrev, jvp, linearize
from ._modules import functional_call, replace_all_batch_norm_modules_, stack_module_state
from ._vmap import vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize",
           "functional_call", "stack_module_state", "replace_all_batch_norm_modules_", "debug"]
