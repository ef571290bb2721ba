"""ember.autograd: reverse-mode automatic differentiation (the ember-autograd distribution).

Importing it (``import ember`` does, through the ``ember.extensions`` entry
point) installs the Autograd step of the dispatcher (docs/internals.rst, "The
dispatcher"): ops on tensors that require grad record backward nodes, and
``Tensor.backward``/:func:`grad` run them. The pieces:

* :mod:`ember.autograd._table` and :mod:`ember.autograd.derivatives`: the
  derivative table, one entry per op of the registry;
* :mod:`ember.autograd._record`: the dispatcher step that records nodes, with
  :mod:`ember.autograd._formula_node` (the nodes of formulas) and
  :mod:`ember.autograd._inplace` (in-place ops and views);
* :mod:`ember.autograd._engine`: the backward engine;
* :mod:`ember.autograd.graph`: nodes, saved tensors and hooks;
* :mod:`ember.autograd.function`: custom :class:`Function`;
* :mod:`ember.autograd.gradcheck`: finite-difference checks.
"""

from __future__ import annotations

import weakref

import ember
from ember import _extensions
from ember._grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ember._ops._dispatch import set_autograd_handler
from ember._tensor import Tensor

from . import derivatives as _derivatives  # noqa: F401 - fills the derivative table
from . import graph
from ._anomaly import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly
from ._engine import is_checkpoint_valid as _is_checkpoint_valid
from ._engine import run_backward
from ._inplace import view_grad_fn
from ._record import handle
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .graph import _HookDict, _add_hook
from .variable import Variable

from . import forward_ad, functional  # noqa: E402,I001 - as torch.autograd.forward_ad / .functional

__all__ = [
    "backward",
    "grad",
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "graph",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
    "Variable",
]


def __getattr__(name):
    # ``ember.autograd.profiler`` is imported on first use: it loads the whole of ember.profiler (about 10 ms),
    # which ``import ember`` otherwise leaves until a program profiles
    if name == "profiler":
        import importlib

        return importlib.import_module(".profiler", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulate into the leaves' ``.grad`` the gradients of ``tensors``.

    Args:
        tensors (Tensor or sequence[Tensor]): the outputs to differentiate.
        grad_tensors (Tensor or sequence, optional): the gradient of each output (a vector for
            the vector-Jacobian product); may be omitted for scalar outputs (ones).
        retain_graph (bool, optional): keep the graph for another backward (default: ``create_graph``).
        create_graph (bool): record the backward computation, for higher-order gradients.
        inputs (Tensor or sequence[Tensor], optional): accumulate only into these tensors.

    Raises:
        RuntimeError: an output does not require grad, a non-scalar output has no gradient given,
            shapes mismatch, or the graph was already freed.
    """
    if grad_variables is not None:
        grad_tensors = grad_variables
    tensors = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors) if grad_tensors is not None else (None,) * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(grads)} gradients for {len(tensors)} tensors")
    if retain_graph is None:
        retain_graph = create_graph
    inputs = _as_tuple(inputs)
    if inputs is not None and len(inputs) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    run_backward(tensors, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """The gradients of ``outputs`` with respect to ``inputs`` (nothing is accumulated into ``.grad``).

    Args:
        outputs (Tensor or sequence[Tensor]): what to differentiate.
        inputs (Tensor or sequence[Tensor]): with respect to what.
        grad_outputs (sequence, optional): the vector of the vector-Jacobian product, per output.
        retain_graph (bool, optional): default ``create_graph``.
        create_graph (bool): make the result differentiable (hessian-vector products, penalties).
        allow_unused (bool, optional): return None for inputs the outputs do not depend on
            (default False, or True when ``materialize_grads``).
        materialize_grads (bool): return zeros instead of None for unused inputs.

    Returns:
        tuple[Tensor or None]: one gradient per input.

    Raises:
        RuntimeError: as :func:`backward`, or an input was not used and ``allow_unused`` is False.

    With ``is_grads_batched=True``, each of ``grad_outputs`` has a leading batch dim and the backward
    pass runs once for all of them, vectorised by :func:`ember.func.vmap` (rows of a Jacobian).
    """
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True")
    single = isinstance(inputs, Tensor)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grads = _as_tuple(grad_outputs) if grad_outputs is not None else (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"grad_outputs has {len(grads)} entries for {len(outputs)} outputs")
    if retain_graph is None:
        retain_graph = create_graph
    result = run_backward(
        outputs,
        grads,
        retain_graph=retain_graph,
        create_graph=create_graph,
        inputs=inputs,
        accumulate=False,
        allow_unused=allow_unused,
    )
    if materialize_grads:
        result = tuple(ember.zeros_like(i) if g is None else g for g, i in zip(result, inputs))
    del single
    return result


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """``grad`` once per row of the batched ``grad_outputs``, in one vmapped backward pass."""
    from ember.func import vmap

    if grad_outputs is None:
        raise RuntimeError("grad(is_grads_batched=True) needs grad_outputs with a leading batch dim")
    rows = _as_tuple(grad_outputs)
    sizes = {g.shape[0] for g in rows if isinstance(g, Tensor)}
    if len(sizes) != 1:
        raise RuntimeError(f"grad(is_grads_batched=True): the grad_outputs' batch sizes differ: {sorted(sizes)}")
    in_dims = tuple(0 if isinstance(g, Tensor) else None for g in rows)

    def one(*gos):
        return grad(outputs, inputs, gos, retain_graph=True, create_graph=create_graph, allow_unused=allow_unused,
                    materialize_grads=materialize_grads)

    return vmap(one, in_dims=in_dims)(*rows)


# ---------------------------------------------------------------- Tensor hooks


def _register_hook(tensor, hook):
    if not tensor._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    fn = tensor.grad_fn
    if fn is None:
        hooks = tensor.__dict__.get("_leaf_hooks")
        if hooks is None:
            hooks = tensor.__dict__["_leaf_hooks"] = _HookDict()
        return _add_hook(hooks, hook)
    return fn._register_tensor_prehook(tensor._output_nr, hook)


def _register_post_accumulate_grad_hook(tensor, hook):
    if not tensor._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if tensor.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    hooks = tensor.__dict__.get("_post_accumulate_hooks")
    if hooks is None:
        hooks = tensor.__dict__["_post_accumulate_hooks"] = _HookDict()
    return _add_hook(hooks, hook)


def _retain_grad(tensor):
    if not tensor._requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    fn = tensor.grad_fn
    if fn is None or tensor.__dict__.get("_retains_grad"):
        return
    ref = weakref.ref(tensor)

    def store(g):
        t = ref()
        if t is None:
            return
        g = g if ember.is_grad_enabled() else g.detach()
        t._grad = g.clone() if t._grad is None else t._grad + g

    fn._any_hooks = True
    if fn._retain_grad_hooks is None:
        fn._retain_grad_hooks = {}
    fn._retain_grad_hooks[tensor._output_nr] = store
    tensor.__dict__["_retains_grad"] = True


class _Autograd:
    """The implementation behind core's autograd slot (see ``ember._extensions``)."""

    installed = True

    def backward(self, tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        backward(tensor, gradient, retain_graph, create_graph, inputs=inputs)

    register_hook = staticmethod(_register_hook)
    retain_grad = staticmethod(_retain_grad)
    register_post_accumulate_grad_hook = staticmethod(_register_post_accumulate_grad_hook)
    view_grad_fn = staticmethod(view_grad_fn)


def _install():
    _extensions.autograd = _Autograd()
    Tensor.retains_grad = property(lambda self: bool(self.__dict__.get("_retains_grad", False)))
    set_autograd_handler(handle)


_install()

# ember.optim ships with ember-autograd; `import ember` gives it, as `import torch` gives torch.optim.
from ember import optim  # noqa: E402,F401
