"""Reverse-mode transforms: :func:`grad`, :func:`grad_and_value`, :func:`vjp`.

Each is one call of :func:`ember.autograd.grad` on the function's outputs with respect to fresh
aliases of its inputs. The aliases are views of the inputs (not detached copies) when an outer
transform or the caller's autograd tracks them, and the backward pass then records its own graph
(``create_graph``), so the transforms nest: ``grad(grad(f))``, ``jacrev(jacrev(f))``, and
``grad(f)`` of a function that closes over tensors an outer ``grad`` differentiates.

Inside :func:`~ember.func.vmap`, inputs are first lifted to plain tensors batched at every active
level (:func:`ember.func._batched.lift`): samples are independent, so one backward pass over
the whole batch gives every sample's gradient (``vmap(grad(loss))``: per-sample gradients).
"""

from __future__ import annotations

import contextlib
import functools

import ember
from ember._ops._dispatch import state as _dispatch_state
from ember._tensor import Tensor
from ember.utils._pytree import tree_flatten, tree_map, tree_unflatten

from ._batched import BatchedTensor, active_levels, lift, lower

__all__ = ["grad", "grad_and_value", "vjp"]

# how many grad/vjp transforms are running: inside one, results must stay differentiable
_depth = 0


def _check_argnums(argnums, nargs, name):
    if isinstance(argnums, int):
        numbers = (argnums,)
    elif isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums):
        numbers = argnums
    else:
        raise RuntimeError(f"{name}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    out = []
    for a in numbers:
        if not -nargs <= a < nargs:
            raise RuntimeError(
                f"{name}: Got argnums={a}, but only {nargs} positional inputs were given to the function"
            )
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{name}: argnums must be unique, got {argnums!r}")
    return out


def _check_differentiable(leaves, name):
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"{name}: expected the inputs to differentiate to be Tensors, got {type(leaf).__name__}")
        if not (leaf.is_floating_point() or leaf.is_complex()):
            raise RuntimeError(
                f"{name}: only Tensors of floating point or complex dtype can be differentiated, got {leaf.dtype}"
            )


class ForwardOverReverse(Exception):
    """A reverse-mode transform met dual tensors (``jacfwd(jacrev(f))``).

    The graph the backward pass runs on saves the duals' primals, not their tangents, so the backward
    formulas cannot carry tangents; :func:`ember.func.jvp` and :func:`ember.func.jacfwd` catch this
    and compute the product by the double-vjp identity instead (counted in :mod:`ember.func.debug`).
    """


def _forward_ad_active():
    from ember.autograd import forward_ad

    return bool(forward_ad._levels)


def _is_dual(t):
    from ember.autograd.forward_ad import holds_dual

    return holds_dual(t)  # a vmap batch of dual tensors too (vmap(jvp(f)) with reverse mode inside f)


class _Inputs:
    """The inputs of one differentiation, as fresh aliases that require grad (see the module docstring)."""

    def __init__(self, leaves):
        if _forward_ad_active() and any(_is_dual(t) for t in leaves):
            raise ForwardOverReverse
        self.top = len(active_levels())  # the vmap levels of the inputs; later ones batch the cotangents
        lifted = [lift(t) for t in leaves]
        # differentiable results are needed when something outside tracks the inputs or an outer transform runs
        self.nested = _depth > 0 or any(p.requires_grad for p in lifted)
        self.prims = [_fresh_alias(t, p) for t, p in zip(leaves, lifted)]
        self.leaves = [lower(p) for p in self.prims]

    def gradients(self, outputs, cotangents, create_graph):
        """``sum(cotangent * d output / d input)`` per input, as tensors of the inputs' (batched) shapes."""
        pairs = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
        grads = [None] * len(self.prims)
        if pairs:
            with _no_vmap_randomness_modes():
                grads = ember.autograd.grad(
                    [o for o, _ in pairs],
                    self.prims,
                    grad_outputs=[c for _, c in pairs],
                    retain_graph=True,
                    create_graph=create_graph,
                    allow_unused=True,
                )
        return [lower(ember.zeros_like(p) if g is None else g, self.top) for g, p in zip(grads, self.prims)]


@contextlib.contextmanager
def _no_vmap_randomness_modes():
    """Run the backward pass without vmap's randomness modes on the dispatch stack.

    A backward pass draws no random numbers (dropout's saves its mask), so the modes have nothing to
    do there, and without them each of its ops takes the dispatcher's fast path instead of the modes'.
    """
    modes = _dispatch_state.modes
    if not any(getattr(m, "vmap_randomness", False) for m in modes):
        yield
        return
    saved = modes[:]
    modes[:] = [m for m in saved if not getattr(m, "vmap_randomness", False)]
    try:
        yield
    finally:
        modes[:] = saved


def _fresh_alias(leaf, lifted):
    """``lifted`` (``leaf`` lifted) as a new tensor that requires grad and aliases the input's memory."""
    if lifted.requires_grad:
        return lifted.view_as(lifted)
    if type(leaf) is not BatchedTensor and lifted is not leaf:
        return lifted.requires_grad_()  # the view lift expanded is ours already: no detach needed
    return lifted.detach().requires_grad_()


def _detach(tree):
    return tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def _call_with(func, args, kwargs, argnums, name):
    """Call ``func`` with the arguments at ``argnums`` replaced by fresh aliases; returns (inputs, spec, output)."""
    numbers = _check_argnums(argnums, len(args), name)
    chosen = tuple(args[a] for a in numbers)
    leaves, spec = tree_flatten(chosen)
    _check_differentiable(leaves, name)
    global _depth
    with ember.enable_grad():
        inputs = _Inputs(leaves)
        replaced = tree_unflatten(inputs.leaves, spec)
        new_args = list(args)
        for a, value in zip(numbers, replaced):
            new_args[a] = value
        _depth += 1
        try:
            output = func(*new_args, **kwargs)
        finally:
            _depth -= 1
    return inputs, spec, output


def _split_aux(output, has_aux, name):
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{name}(f, ...): output of function f should be a tuple: (output, aux) if has_aux is True")
    return output


def grad_and_value(func, argnums=0, has_aux=False):
    """Like :func:`grad`, also returning the function's value: ``(grads, value)`` or ``(grads, (value, aux))``.

    Args:
        func (callable): returns a zero-dim tensor (and, with ``has_aux``, a second value).
        argnums (int or tuple[int]): which positional arguments to differentiate (pytrees of tensors).
        has_aux (bool): ``func`` returns ``(output, aux)``; aux is returned as is.

    Returns:
        callable: the transformed function.

    Raises:
        RuntimeError: the output is not a zero-dim tensor, or an input is not a float/complex tensor.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        name = "grad_and_value"
        inputs, spec, output = _call_with(func, args, kwargs, argnums, name)
        value, aux = _split_aux(output, has_aux, name)
        if not isinstance(value, Tensor):
            raise RuntimeError(f"{name}(f)(*args): Expected f(*args) to return a Tensor, got {type(value).__name__}")
        if value.dim() != 0:
            raise RuntimeError(
                f"{name}(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with {value.dim()} dims. "
                "Maybe you wanted to use the vjp or jacrev APIs instead?"
            )
        with ember.enable_grad():
            out = lift(value)
            grads = inputs.gradients([out], [ember.ones_like(out)], create_graph=inputs.nested)
        grads = tree_unflatten(grads, spec)
        if isinstance(argnums, int):
            grads = grads[0]
        if not inputs.nested:
            value, aux = _detach(value), _detach(aux)
        return (grads, (value, aux)) if has_aux else (grads, value)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of a scalar function, as a function: ``grad(f)(x)`` is ``df/dx`` at ``x``.

    Composable: ``grad(grad(f))`` (second derivatives), ``vmap(grad(f))`` (per-sample gradients),
    ``jacrev(grad(f))``.

    Args:
        func (callable): returns a zero-dim tensor (and, with ``has_aux``, a second value).
        argnums (int or tuple[int]): which positional arguments to differentiate; each may be a
            pytree (tuple, list, dict) of float or complex tensors. A tuple gives a tuple of gradients.
        has_aux (bool): ``func`` returns ``(output, aux)``; ``grad`` then returns ``(grads, aux)``.

    Returns:
        callable: the gradient function, with ``func``'s signature.

    Raises:
        RuntimeError: the output is not a zero-dim tensor, or an input is not a float/complex tensor.

    Example:
        >>> import ember
        >>> from ember.func import grad
        >>> grad(lambda x: (x ** 3).sum())(ember.tensor(2.0))
        tensor(12.)
        >>> grad(grad(lambda x: x ** 3))(ember.tensor(2.0))
        tensor(12.)
    """
    transformed = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        grads, value = transformed(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapper


def vjp(func, *primals, has_aux=False):
    """The function's value at ``primals`` and its vector-Jacobian product function.

    Args:
        func (callable): a function of tensors (pytrees allowed) returning tensors (pytrees allowed).
        *primals: the point; every tensor in them is differentiated.
        has_aux (bool): ``func`` returns ``(output, aux)``.

    Returns:
        tuple: ``(output, vjp_fn)`` or ``(output, vjp_fn, aux)``. ``vjp_fn(cotangents)`` (cotangents
        with the output's structure and shapes) returns a tuple with one gradient per primal.
        ``vjp_fn`` may be called several times, and under :func:`~ember.func.vmap` (batched cotangents:
        the rows of a Jacobian at once).

    Raises:
        RuntimeError: a primal is not a float/complex tensor, or the cotangents do not match the output.
    """
    name = "vjp"
    inputs, spec, output = _call_with(lambda *p: func(*p), primals, {}, tuple(range(len(primals))), name)
    value, aux = _split_aux(output, has_aux, name)
    out_leaves, out_spec = tree_flatten(value)
    for leaf in out_leaves:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"{name}(f, ...): expected f to return Tensors, got {type(leaf).__name__}")
    levels = len(active_levels())
    with ember.enable_grad():
        lifted = [lift(o) for o in out_leaves]

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        ct_leaves, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec and not (len(out_leaves) == 1 and len(ct_leaves) == 1):
            raise RuntimeError(
                f"{name}: Expected pytree structure of cotangents to be the same as pytree structure of outputs to "
                f"the function. cotangents: {ct_spec}, primal output: {out_spec}"
            )
        for c, o in zip(ct_leaves, out_leaves):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(
                    f"{name}: Mismatch in shape: the cotangent has shape {list(c.shape)} and the output has shape "
                    f"{list(o.shape)}"
                )
        with ember.enable_grad():
            cts = [lift(c, levels) for c in ct_leaves]  # levels made later (a vmap over vjp_fn) stay batched
            graph = inputs.nested or any(c.requires_grad for c in cts) if create_graph is None else create_graph
            grads = inputs.gradients(lifted, cts, create_graph=graph)
        return tuple(tree_unflatten(grads, spec))

    if not inputs.nested:
        value, aux = _detach(value), _detach(aux)
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)
