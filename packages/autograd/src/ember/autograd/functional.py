"""``ember.autograd.functional``: PyTorch's higher-level autograd API, built on :mod:`ember.func`.

``jacobian`` and ``hessian`` with ``vectorize=True`` compute every row (or column) in one
vmapped backward (or forward) pass; with ``vectorize=False`` they loop over rows, as PyTorch's
default does. ``vjp``, ``jvp``, ``vhp`` and ``hvp`` return ``(outputs, product)``.
Inputs are a tensor or a tuple of tensors; results follow PyTorch's layout (a tensor for a
tensor input and output, nested tuples otherwise).
"""

from __future__ import annotations

import ember
from ember._tensor import Tensor

__all__ = ["vjp", "jvp", "vhp", "hvp", "jacobian", "hessian"]


def _as_tuple(x, name, arg):
    if isinstance(x, Tensor):
        return (x,), True
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x), False
    raise TypeError(f"The {arg} given to {name} must be either a Tensor or a tuple of Tensors but got {type(x)}")


def _prepare(inputs, create_graph):
    """Fresh leaves (or differentiable aliases with ``create_graph``) that require grad."""
    return tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_() for t in inputs)


def _grads(outputs, inputs, grad_outputs, create_graph, strict, name):
    result = ember.autograd.grad(
        outputs, inputs, grad_outputs, retain_graph=True, create_graph=create_graph, allow_unused=True
    )
    out = []
    for i, (g, x) in enumerate(zip(result, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(
                    f"The output of the user-provided function is independent of input {i}. This is not allowed in "
                    f"strict mode ({name})."
                )
            g = ember.zeros_like(x)
        out.append(g if create_graph else g.detach())
    return tuple(out)


def _finish(values, single):
    return values[0] if single else values


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``.

    Args:
        func (callable): a function of tensors returning a tensor or a tuple of tensors.
        inputs (Tensor or tuple[Tensor]): the point.
        v (Tensor or tuple[Tensor], optional): the vector (defaults to 1 for a one-element output).
        create_graph (bool): make the results differentiable.
        strict (bool): raise when an input does not influence the output.

    Returns:
        tuple: ``(outputs, vjp)``, each shaped as the outputs and inputs respectively.
    """
    inputs, single_in = _as_tuple(inputs, "vjp", "inputs")
    with ember.enable_grad():
        xs = _prepare(inputs, create_graph)
        out = func(*xs)
        outs, single_out = _as_tuple(out, "vjp", "outputs of the user-provided function")
        if v is None:
            if any(o.numel() != 1 for o in outs):
                raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                                   "Tensor with a single element.")
            vs = tuple(ember.ones_like(o) for o in outs)
        else:
            vs, _ = _as_tuple(v, "vjp", "v")
        needed = [(o, w) for o, w in zip(outs, vs) if o.requires_grad]
        if needed:
            grads = _grads([o for o, _ in needed], xs, [w for _, w in needed], create_graph, strict, "vjp")
        else:
            if strict:
                raise RuntimeError("The output of the user-provided function does not require gradients (strict mode)")
            grads = tuple(ember.zeros_like(x) for x in xs)
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _finish(outs, single_out), _finish(grads, single_in)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)`` (by the double-vjp identity, exact).

    Returns:
        tuple: ``(outputs, jvp)``, each shaped as the outputs.
    """
    inputs, single_in = _as_tuple(inputs, "jvp", "inputs")
    if v is None:
        if any(x.numel() != 1 for x in inputs):
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        v = tuple(ember.ones_like(x) for x in inputs)
    vs, _ = _as_tuple(v, "jvp", "v")
    with ember.enable_grad():
        xs = _prepare(inputs, True)
        out = func(*xs)
        outs, single_out = _as_tuple(out, "jvp", "outputs of the user-provided function")
        dummies = tuple(ember.zeros_like(o).requires_grad_() for o in outs)
        live = [(o, d) for o, d in zip(outs, dummies) if o.requires_grad]
        if not live:
            products = tuple(ember.zeros_like(o) for o in outs)
        else:
            g = ember.autograd.grad([o for o, _ in live], xs, [d for _, d in live], create_graph=True,
                                    allow_unused=True)
            pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi is not None and gi.requires_grad]
            if strict and len(pairs) != len(xs):
                raise RuntimeError("The output of the user-provided function is independent of an input (strict mode)")
            products = (None,) * len(outs)
            if pairs:
                products = ember.autograd.grad([p for p, _ in pairs], dummies, [w for _, w in pairs],
                                               create_graph=create_graph, allow_unused=True)
            products = tuple(ember.zeros_like(o) if p is None else (p if create_graph else p.detach())
                             for p, o in zip(products, outs))
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _finish(outs, single_out), _finish(products, single_out)


def _scalar_and_grads(func, inputs, create_graph, strict, name):
    with ember.enable_grad():
        xs = _prepare(inputs, True)
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError(f"The function given to {name} should return a single Tensor with a single element")
        (g,) = (ember.autograd.grad(out, xs, create_graph=True, allow_unused=True),)
        g = tuple(ember.zeros_like(x) if gi is None else gi for gi, x in zip(g, xs))
    return xs, out, g


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` for a scalar ``func`` (H its Hessian).

    Returns:
        tuple: ``(output, vhp)``, the product shaped as the inputs.
    """
    inputs, single_in = _as_tuple(inputs, "vhp", "inputs")
    vs = _as_tuple(v, "vhp", "v")[0] if v is not None else tuple(ember.ones_like(x) for x in inputs)
    xs, out, g = _scalar_and_grads(func, inputs, create_graph, strict, "vhp")
    with ember.enable_grad():
        live = [(gi, vi) for gi, vi in zip(g, vs) if gi.requires_grad]
        if live:
            prods = _grads([a for a, _ in live], xs, [b for _, b in live], create_graph, strict, "vhp")
        else:
            prods = tuple(ember.zeros_like(x) for x in xs)
    return (out if create_graph else out.detach()), _finish(prods, single_in)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)``; the Hessian is symmetric, so this is :func:`vhp`."""
    return vhp(func, inputs, v, create_graph, strict)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``.

    Args:
        func (callable): tensors -> a tensor or a tuple of tensors.
        inputs (Tensor or tuple[Tensor]): the point.
        create_graph (bool): make the result differentiable.
        strict (bool): raise when an input does not influence an output (row-loop path only).
        vectorize (bool): compute all rows in one vmapped pass (:func:`ember.func.jacrev` /
            :func:`ember.func.jacfwd`) instead of a Python loop over rows.
        strategy (str): ``"reverse-mode"`` or ``"forward-mode"`` (needs ``vectorize=True``, as in PyTorch).

    Returns:
        Tensor or tuple: ``J[i][j]`` of shape ``(*output_i.shape, *input_j.shape)``; a tensor when both
        the input and the output are single tensors.

    Raises:
        ValueError: an unknown strategy.
        NotImplementedError: forward mode without ``vectorize`` (as in PyTorch).
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function '
                         'has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, prefer '
                         'to use "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("computing Jacobian with forward-mode AD is only implemented for vectorize=True")
    inputs, single_in = _as_tuple(inputs, "jacobian", "inputs")
    if vectorize:
        from ember import func as ft

        argnums = tuple(range(len(inputs)))
        transform = ft.jacrev if strategy == "reverse-mode" else ft.jacfwd
        xs = _prepare(inputs, create_graph)
        jac = transform(lambda *a: func(*a), argnums=argnums)(*xs)
        single_out = isinstance(jac, tuple) and len(jac) == len(inputs) and isinstance(jac[0], Tensor)
        rows = (jac,) if single_out else tuple(jac)
        rows = tuple(tuple(b if create_graph else b.detach() for b in row) for row in rows)
        if single_out:
            return rows[0][0] if single_in else rows[0]
        return tuple(r[0] for r in rows) if single_in else rows
    with ember.enable_grad():
        xs = _prepare(inputs, create_graph)
        out = func(*xs)
        outs, single_out = _as_tuple(out, "jacobian", "outputs of the user-provided function")
        blocks = []
        for o in outs:
            flat = o.reshape(-1)
            rows = [[] for _ in xs]
            for k in range(flat.numel()):
                if flat.requires_grad:
                    grads = _grads([flat[k]], xs, None, create_graph, strict, "jacobian")
                else:
                    grads = tuple(ember.zeros_like(x) for x in xs)
                for j, g in enumerate(grads):
                    rows[j].append(g)
            blocks.append(tuple(
                (ember.stack(r) if r else ember.zeros(0, *x.shape, dtype=x.dtype)).reshape(*o.shape, *x.shape)
                for r, x in zip(rows, xs)
            ))
    if single_out:
        return blocks[0][0] if single_in else blocks[0]
    return tuple(b[0] for b in blocks) if single_in else tuple(blocks)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``: the Jacobian of its gradient.

    Returns:
        Tensor or tuple: ``H[i][j]`` of shape ``(*input_i.shape, *input_j.shape)``.
    """
    inputs_t, single_in = _as_tuple(inputs, "hessian", "inputs")

    def scalar(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor with a single element")
        return out.reshape(())

    def gradient(*xs):
        with ember.enable_grad():
            g = ember.autograd.grad(scalar(*xs), xs, create_graph=True, allow_unused=True)
        g = tuple(ember.zeros_like(x) if gi is None else gi for gi, x in zip(g, xs))
        return g[0] if single_in else g

    if vectorize and outer_jacobian_strategy == "forward-mode":
        # the outer jacobian runs on dual tensors, which don't require grad: the inner gradient is ember.func's
        # grad, whose reverse pass over duals jacfwd computes by the double-vjp identity
        from ember import func as ft

        gradient = ft.grad(scalar, argnums=0 if single_in else tuple(range(len(inputs_t))))

    return jacobian(gradient, inputs_t if not single_in else inputs_t[0], create_graph=create_graph, strict=strict,
                    vectorize=vectorize, strategy=outer_jacobian_strategy)
