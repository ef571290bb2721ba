"""Jacobians and forward-mode products: :func:`jacrev`, :func:`jacfwd`, :func:`hessian`, :func:`jvp`, :func:`linearize`.

``jacrev`` runs the function once and the backward pass once for all rows of the Jacobian: the
cotangents (rows of the identity) are a batch of :func:`~ember.func.vmap`, and the backward
formulas run on batched tensors, so each op's backward is one batched call.

:func:`jvp` and :func:`jacfwd` run the function once on dual tensors (:mod:`ember.autograd.forward_ad`):
each op computes its value and its tangent by its jvp rule; ``jacfwd`` vmaps over the tangents (the
columns of the identity), so each op's tangent is one batched call.

:func:`linearize`, and ``jvp``/``jacfwd`` of functions that run a reverse-mode transform on the dual
tensors (``jacfwd(jacrev(f))``: the backward graph saves primals, not tangents), use the *double-vjp*
identity: ``g(u) = J^T u`` is linear in ``u``, so the vjp of ``g`` with cotangent ``v`` is ``J v``,
exactly, for every op autograd can differentiate twice. :func:`linearize` builds ``g`` once (a backward
pass with ``create_graph``); each tangent then costs one more backward pass.
"""

from __future__ import annotations

import functools

import ember
from ember._tensor import Tensor
from ember.autograd import forward_ad as fwAD
from ember.utils._pytree import tree_flatten, tree_map, tree_unflatten

from . import debug
from ._batched import lift, lower
from ._batching_rules import UnbatchedWrite
from ._grad import ForwardOverReverse, _call_with, _check_argnums, _check_differentiable, _detach, _split_aux
from ._vmap import vmap

__all__ = ["jacrev", "jacfwd", "hessian", "jvp", "linearize"]


def _output_leaves(value, name):
    leaves, spec = tree_flatten(value)
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"{name}(f, ...): expected f to return Tensors, got {type(leaf).__name__}")
    return leaves, spec


def _assemble(blocks, out_spec, in_spec, single_input):
    """``blocks[i][j]`` (output leaf i, input leaf j) into the outputs' structure of the inputs' structure."""
    per_output = []
    for row in blocks:
        inner = tree_unflatten(row, in_spec)
        per_output.append(inner[0] if single_input else inner)
    return tree_unflatten(per_output, out_spec)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian of ``func`` with respect to the arguments ``argnums``, by reverse mode.

    Args:
        func (callable): a function of tensors returning a tensor (or a pytree of tensors).
        argnums (int or tuple[int]): the positional arguments to differentiate (pytrees allowed).
        has_aux (bool): ``func`` returns ``(output, aux)``; the result is then ``(jacobian, aux)``.
        chunk_size (int, optional): compute at most this many rows at a time.

    Returns:
        callable: returns the Jacobian; for output shape ``O`` and input shape ``I``, a tensor of
        shape ``(*O, *I)`` (nested in the outputs' and ``argnums``' structures).

    Example:
        >>> import ember
        >>> from ember.func import jacrev
        >>> jacrev(lambda x: x ** 2)(ember.tensor([1.0, 2.0]))
        tensor([[2., 0.],
                [0., 4.]])
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        name = "jacrev"
        inputs, in_spec, output = _call_with(func, args, kwargs, argnums, name)
        value, aux = _split_aux(output, has_aux, name)
        out_leaves, out_spec = _output_leaves(value, name)
        with ember.enable_grad():
            lifted = [lift(o) for o in out_leaves]
        sizes = [o.numel() for o in out_leaves]
        basis = ember.eye(sum(sizes), dtype=out_leaves[0].dtype, device=out_leaves[0].device)

        def rows(row):
            cts, start = [], 0
            for o, n in zip(out_leaves, sizes):
                part = row if len(sizes) == 1 else row.narrow(0, start, n)  # (a slice's double backward is costly)
                cts.append(lift(part.reshape(o.shape), inputs.top))
                start += n
            with ember.enable_grad():
                return inputs.gradients(lifted, cts, create_graph=inputs.nested)

        grads = _rows_of(rows, basis, chunk_size)  # per input: (M, *input shape)
        blocks, start = [], 0
        for o, n in zip(out_leaves, sizes):
            blocks.append([(g if len(sizes) == 1 else g.narrow(0, start, n)).reshape(*o.shape, *g.shape[1:])
                           for g in grads])
            start += n
        jac = _assemble(blocks, out_spec, in_spec, isinstance(argnums, int))
        if not inputs.nested:
            jac, aux = _detach(jac), _detach(aux)
        return (jac, aux) if has_aux else jac

    return wrapper


def _rows_of(fn, basis, chunk_size, randomness="error"):
    """``vmap(fn)(basis)``; a loop over the rows where a backward formula cannot run batched.

    That happens when a backward formula makes a plain buffer and writes a batched gradient into it.
    Autograd's ``CopySlices`` (the double backward of a slice, met by hessians of functions that slice
    their input) no longer does: for a batched gradient it makes a batched buffer and addresses the
    view's region with a vectorised ``as_strided``. Any remaining case is counted in
    :mod:`ember.func.debug` as ``"CopySlices"``.
    """
    try:
        return vmap(fn, chunk_size=chunk_size, randomness=randomness)(basis)
    except UnbatchedWrite:
        debug.record("CopySlices")
        results = [fn(row) for row in basis.unbind(0)]
        return [ember.stack([r[i] for r in results]) for i in range(len(results[0]))]


class _Linearization:
    """``func`` at a point, with ``J^T u`` recorded as a function of dummy cotangents ``u`` (double vjp)."""

    def __init__(self, func, args, kwargs, argnums, has_aux, name):
        self.name = name
        self.inputs, self.in_spec, output = _call_with(func, args, kwargs, argnums, name)
        self.value, self.aux = _split_aux(output, has_aux, name)
        self.out_leaves, self.out_spec = _output_leaves(self.value, name)
        with ember.enable_grad():
            lifted = [lift(o) for o in self.out_leaves]
            self.dummies = [ember.zeros_like(q).requires_grad_() for q in lifted]
            self.vjps = [
                g for g in self.inputs.gradients(lifted, self.dummies, create_graph=True)
            ]
            self.vjps = [lift(g, self.inputs.top) for g in self.vjps]

    def push(self, tangent_leaves):
        """``J t`` for tangents ``t`` (one per input leaf, the inputs' shapes), one tensor per output leaf."""
        inputs = self.inputs
        for t, p in zip(tangent_leaves, inputs.leaves):
            if tuple(t.shape) != tuple(p.shape):
                raise RuntimeError(
                    f"{self.name}: Expected the tangents to have the shapes of the primals, got {list(t.shape)} for "
                    f"a primal of shape {list(p.shape)}"
                )
        with ember.enable_grad():
            tangents = [lift(t, inputs.top) for t in tangent_leaves]
            pairs = [(g, t) for g, t in zip(self.vjps, tangents) if g.requires_grad]
            results = [None] * len(self.dummies)
            if pairs:
                results = ember.autograd.grad(
                    [g for g, _ in pairs], self.dummies, grad_outputs=[t for _, t in pairs],
                    retain_graph=True, create_graph=inputs.nested, allow_unused=True,
                )
        return [lower(ember.zeros_like(d) if r is None else r, inputs.top) for r, d in zip(results, self.dummies)]


def _check_tangents(tangent_leaves, primal_leaves, name):
    for t, p in zip(tangent_leaves, primal_leaves):
        if not isinstance(t, Tensor):
            raise RuntimeError(f"{name}: Expected the tangents to be Tensors, got {type(t).__name__}")
        if tuple(t.shape) != tuple(p.shape):
            raise RuntimeError(
                f"{name}: Expected the tangents to have the shapes of the primals, got {list(t.shape)} for "
                f"a primal of shape {list(p.shape)}"
            )


def _forward(func, args, kwargs, numbers, spec, tangent_leaves, has_aux, name):
    """``func`` on dual tensors: ``(output leaves, output spec, tangents of the output leaves, aux)``."""
    primal_leaves = tree_flatten(tuple(args[a] for a in numbers))[0]
    with fwAD.dual_level() as level:
        duals = [fwAD.make_dual(p, t) for p, t in zip(primal_leaves, tangent_leaves)]
        new_args = list(args)
        for a, value in zip(numbers, tree_unflatten(duals, spec)):
            new_args[a] = value
        value, aux = _split_aux(func(*new_args, **kwargs), has_aux, name)
        out_leaves, out_spec = _output_leaves(value, name)
        unpacked = [fwAD.unpack_dual(o, level=level) for o in out_leaves]
        values = [u.primal for u in unpacked]
        tangents = [ember.zeros_like(u.primal) if u.tangent is None else u.tangent for u in unpacked]
        aux = tree_map(lambda v: fwAD.unpack_dual(v, level=level).primal if isinstance(v, Tensor) else v, aux)
    return values, out_spec, tangents, aux


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """The value of ``func`` at ``primals`` and its Jacobian-vector product with ``tangents``, by forward mode.

    ``func`` runs once, on dual tensors (:mod:`ember.autograd.forward_ad`): each op computes its value
    and its tangent together.

    Args:
        func (callable): a function of tensors.
        primals (tuple): the point (a tuple of float/complex tensors or pytrees of them).
        tangents (tuple): the direction, with the primals' structure and shapes.
        has_aux (bool): ``func`` returns ``(output, aux)``.

    Returns:
        tuple: ``(output, jvp_out)``, or ``(output, jvp_out, aux)``.

    Raises:
        RuntimeError: ``primals``/``tangents`` are not tuples of matching structure and shapes.

    Example:
        >>> import ember
        >>> from ember.func import jvp
        >>> jvp(lambda x: x ** 2, (ember.tensor([1.0, 2.0]),), (ember.tensor([1.0, 1.0]),))[1]
        tensor([2., 4.])
    """
    name = "jvp"
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if t_spec != p_spec:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same structure")
    _check_differentiable(p_leaves, name)
    _check_tangents(t_leaves, p_leaves, name)
    numbers = tuple(range(len(primals)))
    try:
        values, out_spec, jv, aux = _forward(func, primals, {}, numbers, p_spec, t_leaves, has_aux, name)
    except ForwardOverReverse:
        debug.record_jvp("forward-over-reverse")
        lin = _Linearization(lambda *p: func(*p), primals, {}, numbers, has_aux, name)
        out = tree_unflatten(lin.push(t_leaves), lin.out_spec)
        value, aux = (lin.value, lin.aux) if lin.inputs.nested else (_detach(lin.value), _detach(lin.aux))
        return (value, out, aux) if has_aux else (value, out)
    value, out = tree_unflatten(values, out_spec), tree_unflatten(jv, out_spec)
    return (value, out, aux) if has_aux else (value, out)


def linearize(func, *primals):
    """``func``'s value at ``primals`` and a function computing its Jacobian-vector products there.

    Returns:
        tuple: ``(output, jvp_fn)``; ``jvp_fn(*tangents)`` returns ``J @ tangents`` with the output's
        structure, reusing the linearization (no new forward pass).
    """
    lin = _Linearization(lambda *p: func(*p), primals, {}, tuple(range(len(primals))), False, "linearize")

    def jvp_fn(*tangents):
        return tree_unflatten(lin.push(tree_flatten(tangents)[0]), lin.out_spec)

    return (lin.value if lin.inputs.nested else _detach(lin.value)), jvp_fn


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of ``func`` with respect to ``argnums``, by forward mode.

    ``func`` runs once on dual tensors whose tangents are the columns of the identity, batched by
    :func:`~ember.func.vmap`: each op's tangent is one batched call. Same arguments and result layout
    as :func:`jacrev`; preferable when inputs are fewer than outputs.

    Args:
        func (callable): a function of tensors returning a tensor (or a pytree of tensors).
        argnums (int or tuple[int]): the positional arguments to differentiate (pytrees allowed).
        has_aux (bool): ``func`` returns ``(output, aux)``; the result is then ``(jacobian, aux)``.
        randomness (str): vmap's randomness mode for the tangents' batch.

    Returns:
        callable: returns the Jacobian, a tensor of shape ``(*O, *I)`` per output and input leaf.

    Example:
        >>> import ember
        >>> from ember.func import jacfwd
        >>> jacfwd(lambda x: x.sin())(ember.zeros(2))
        tensor([[1., 0.],
                [0., 1.]])
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        name = "jacfwd"
        numbers = _check_argnums(argnums, len(args), name)
        in_leaves, in_spec = tree_flatten(tuple(args[a] for a in numbers))
        _check_differentiable(in_leaves, name)
        sizes = [p.numel() for p in in_leaves]
        basis = ember.eye(sum(sizes), dtype=in_leaves[0].dtype, device=in_leaves[0].device)

        def split(col):
            tangents, start = [], 0
            for p, n in zip(in_leaves, sizes):
                tangents.append((col if len(sizes) == 1 else col.narrow(0, start, n)).reshape(p.shape))
                start += n
            return tangents

        try:
            out = {}

            def columns(col):
                values, out["spec"], tangents, aux = _forward(func, args, kwargs, numbers, in_spec, split(col),
                                                              has_aux, name)
                return tangents, values, aux

            cols, values, aux = vmap(columns, out_dims=(0, None, None), randomness=randomness)(basis)
            out_leaves, out_spec = values, out["spec"]
        except ForwardOverReverse:
            debug.record_jvp("forward-over-reverse")
            lin = _Linearization(func, args, kwargs, argnums, has_aux, name)
            cols = _rows_of(lambda col: lin.push(split(col)), basis, None, randomness)
            out_leaves, out_spec, aux = lin.out_leaves, lin.out_spec, lin.aux
            if not lin.inputs.nested:
                cols, aux = _detach(cols), _detach(aux)
        blocks = []
        for o, c in zip(out_leaves, cols):  # c: (N, *output shape)
            row, start = [], 0
            for p, n in zip(in_leaves, sizes):
                block = (c if len(sizes) == 1 else c.narrow(0, start, n)).reshape(n, -1).t()  # (output numel, n)
                row.append(block.reshape(*o.shape, *p.shape))
                start += n
            blocks.append(row)
        jac = _assemble(blocks, out_spec, in_spec, isinstance(argnums, int))
        return (jac, aux) if has_aux else jac

    return wrapper


def hessian(func, argnums=0):
    """The Hessian of a scalar ``func``: ``jacrev(jacrev(func, argnums), argnums)``.

    Returns:
        callable: for an input of shape ``I``, a tensor of shape ``(*I, *I)``.

    Example:
        >>> import ember
        >>> from ember.func import hessian
        >>> hessian(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    return jacrev(jacrev(func, argnums), argnums)
