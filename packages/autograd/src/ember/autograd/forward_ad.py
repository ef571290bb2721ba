"""Forward-mode automatic differentiation: dual tensors (PyTorch's ``torch.autograd.forward_ad``).

Inside ``with dual_level():``, :func:`make_dual` pairs a tensor (the primal) with a tangent of the
same shape; every op on the resulting dual tensor computes its primal result and the result's
tangent, the Jacobian-vector product, by the op's jvp rule (:mod:`ember.autograd._jvp_rules`);
:func:`unpack_dual` reads both back. Leaving the level drops the tangents.

Example:
    >>> import ember
    >>> import ember.autograd.forward_ad as fwAD
    >>> x, v = ember.tensor([1.0, 2.0]), ember.tensor([1.0, 0.0])
    >>> with fwAD.dual_level():
    ...     y = fwAD.make_dual(x, v) ** 2
    ...     fwAD.unpack_dual(y).tangent
    tensor([2., 0.])
"""

from __future__ import annotations

import contextlib
from collections import namedtuple

import ember
from ember._ops._registry import Op
from ember._tensor import Tensor
from ember.utils._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor", "enter_dual_level", "exit_dual_level"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_levels: list[int] = []  # active dual levels, innermost last
_next_level = [0]


def enter_dual_level():
    """Enter a new dual level (prefer the :func:`dual_level` context manager); returns its number."""
    _next_level[0] += 1
    _levels.append(_next_level[0])
    return _next_level[0]


def exit_dual_level(*, level=None):
    """Leave the innermost dual level (or ``level``, which must be the innermost).

    Raises:
        RuntimeError: no level is active, or ``level`` is not the innermost.
    """
    if not _levels or (level is not None and level != _levels[-1]):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created")
    _levels.pop()


@contextlib.contextmanager
def dual_level():
    """A forward-AD level: dual tensors made inside carry tangents until it exits."""
    level = enter_dual_level()
    try:
        yield level
    finally:
        exit_dual_level(level=level)


def _current_level(level):
    if level is None:
        if not _levels:
            raise RuntimeError(
                "make_dual/unpack_dual need an active forward AD level: use them inside `with dual_level():`"
            )
        return _levels[-1]
    return level


class DualTensor(Tensor):
    """A tensor (its primal's values) that carries a tangent at one dual level.

    It shares the primal's array, so printing it, ``item()`` and ``numpy()`` read the primal, as in
    PyTorch; every op reaches :func:`_dual_call` through ``__ember_function__``.
    """

    _primal = None
    _tangent = None
    _dual_level = 0

    @property
    def requires_grad(self):
        return self._primal.requires_grad

    @property
    def grad_fn(self):
        return self._primal.grad_fn

    def requires_grad_(self, requires_grad=True):
        self._primal.requires_grad_(requires_grad)
        return self

    def __repr__(self, *, tensor_contents=None):
        return f"{self._primal!r} (dual, tangent={self._tangent!r})"

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        if any(not issubclass(t, Tensor) for t in types):
            return NotImplemented
        return _dual_call(func, args, kwargs or {})


def _dual(primal, tangent, level):
    t = object.__new__(DualTensor)
    t._primal, t._tangent, t._dual_level = primal, tangent, level
    t._data = primal._data
    t._device = primal._device
    return t


def make_dual(tensor, tangent, *, level=None):
    """A dual tensor: ``tensor``'s values with ``tangent`` as their directional derivative.

    Args:
        tensor (Tensor): the primal (float or complex).
        tangent (Tensor): same shape (and dtype category) as ``tensor``.
        level (int, optional): the dual level (default: the innermost active one).

    Returns:
        Tensor: the dual tensor; ops on it carry tangents until the level exits.

    Raises:
        RuntimeError: no active level, or shapes/dtypes that do not match.
    """
    level = _current_level(level)
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(
            f"Trying to set a forward gradient that has a different size than that of the original Tensor, this is "
            f"not supported. Tensor is of size {list(tensor.shape)} while the given forward gradient is of size "
            f"{list(tangent.shape)}."
        )
    if tangent.dtype != tensor.dtype:
        tangent = tangent.to(tensor.dtype)
    return _dual_under_vmap(tensor, tangent, level)


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor`` at ``level``; the tangent is None for a tensor without one.

    Returns:
        UnpackedDualTensor: a namedtuple ``(primal, tangent)``.
    """
    if not _levels and level is None:
        return UnpackedDualTensor(tensor, None)
    level = _current_level(level)
    if isinstance(tensor, DualTensor) and tensor._dual_level == level:
        return UnpackedDualTensor(tensor._primal, tensor._tangent)
    if _is_batched(tensor):
        return UnpackedDualTensor(*_unpack_batched(tensor, level))
    return UnpackedDualTensor(tensor, None)


# ---------------------------------------------------------------------------------------------------
# dual tensors inside vmap
#
# vmap and forward mode commute: a batch of duals is a dual of batches. A dual tensor made of a vmap
# sample (``vmap(jvp(f))``, ``vmap(jacfwd(f))``) is therefore built *inside* the batch: the primal and the
# tangent are lifted to plain tensors with the batch dims in front (``ember.func._batched.lift``), paired,
# and the pair is wrapped back into the vmap levels. Every op then meets the batched tensor first, and its
# batching rule calls the op on the inner dual tensors, whose jvp rules see plain primals: the rules never
# meet a batched primal, and the double-vjp path can make the primals require grad. A primal that is not
# batched (``jacfwd``, which batches only the tangents) keeps the plain form, so its factorisations run once.


def holds_dual(tensor):
    """Whether ``tensor`` is a dual tensor, or a vmap batch of dual tensors (see :func:`_dual_under_vmap`)."""
    while _is_batched(tensor):
        tensor = tensor._inner
    return isinstance(tensor, DualTensor)


def _is_batched(tensor):
    from ember.func._batched import BatchedTensor

    return isinstance(tensor, BatchedTensor)


def _dual_under_vmap(primal, tangent, level):
    from ember.func._batched import level_of, lift, lower

    top = level_of(primal)
    if top == 0 or _lift_would_cross_a_dual(primal, top):
        return _dual(primal, tangent, level)
    # levels above the primal's (a vmap over the tangents) stay batched around the lifted tangent
    return lower(_dual(lift(primal, top), lift(tangent, top), level), top)


def _lift_would_cross_a_dual(value, top):
    """Whether lifting ``value`` to level ``top`` would expand a level it is not batched at over a dual tensor of
    an outer dual level (``jacfwd(vmap(jvp(f)))``: jacfwd's tangent level is inside that dual, and an expanded
    wrapper of it outside would batch the dual's tangent twice); such a primal keeps the plain dual form."""
    levels = set()
    while _is_batched(value):
        levels.add(value._level)
        value = value._inner
    return isinstance(value, DualTensor) and levels != set(range(1, top + 1))


def _wrap_dim(value, dim, level):
    """``value`` with its logical dim ``dim`` batched at vmap ``level``, under any higher levels it has."""
    from ember.func._batched import BatchedTensor, wrap

    if isinstance(value, BatchedTensor) and value._level > level:
        inner_dim = dim if dim < value._bdim else dim + 1
        bdim = value._bdim if value._bdim < inner_dim else value._bdim - 1
        return wrap(_wrap_dim(value._inner, inner_dim, level), bdim, value._level)
    return wrap(value, dim, level)


def _unpack_batched(tensor, level):
    """``(primal, tangent)`` of a batched tensor over a dual tensor of ``level`` (tangent None if none)."""
    inner = tensor._inner
    if isinstance(inner, DualTensor) and inner._dual_level == level:
        primal, tangent = inner._primal, inner._tangent
    elif _is_batched(inner):
        primal, tangent = _unpack_batched(inner, level)
    else:
        return tensor, None
    if tangent is None:
        return tensor, None
    return _wrap_dim(primal, tensor._bdim, tensor._level), _wrap_dim(tangent, tensor._bdim, tensor._level)


# ---------------------------------------------------------------------------------------------------
# computing through dual tensors


def _top_level(values):
    leaves, _ = tree_flatten(values)
    return max((v._dual_level for v in leaves if isinstance(v, DualTensor)), default=0)


def _primal_of(value, level):
    return value._primal if isinstance(value, DualTensor) and value._dual_level == level else value


def _tangent_of(value, level):
    if isinstance(value, DualTensor) and value._dual_level == level:
        return value._tangent
    return None


def _dual_call(func, args, kwargs):
    level = _top_level((args, kwargs))
    if level not in _levels:  # the level exited: the tangent is gone, compute with the primal
        return func(*tree_map(lambda v: _primal_of(v, level), args), **tree_map(lambda v: _primal_of(v, level), kwargs))
    if not isinstance(func, Op):  # a Python function routed here (getitem with a dual index): no tangent
        return func(*tree_map(lambda v: _primal_of(v, level), args), **tree_map(lambda v: _primal_of(v, level), kwargs))
    args, kwargs = func.normalize(args, kwargs)
    if func.kind == "inplace":
        return _inplace(func, args, kwargs, level)
    primals = tree_map(lambda v: _primal_of(v, level), (args, kwargs))
    tangents = tree_map(lambda v: _tangent_of(v, level), (list(args), dict(kwargs)),
                        is_leaf=lambda v: isinstance(v, Tensor))
    from ._jvp_rules import FALLBACK, JVP_RULES

    rule = JVP_RULES.get(func)
    if rule is not None:
        result = func(*primals[0], **primals[1])
        tangent = rule(func, primals, tangents, result)
        if tangent is not FALLBACK:
            return _attach(result, tangent, level)
        return _by_double_vjp(func, primals, tangents, level)
    if func.decomposition is not None:
        return func.decomposition(*args, **kwargs)  # its ops reach their own rules
    return _by_double_vjp(func, primals, tangents, level)


def _attach(result, tangent, level):
    if isinstance(result, Tensor):
        if tangent is None or not (result.is_floating_point() or result.is_complex()):
            return result
        return _dual(result, tangent, level)
    if isinstance(result, tuple):
        tangents = tangent if isinstance(tangent, (tuple, list)) else [None] * len(result)
        items = [_attach(r, t, level) for r, t in zip(result, tangents)]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    return result


def _by_double_vjp(op, primals, tangents, level):
    """The tangent of ``op``'s outputs from its backward formulas: ``J t`` as the vjp of ``u -> J^T u``."""
    from ._table import DERIVATIVES

    args, kwargs = primals
    targs, tkwargs = tangents
    flat_t, _ = tree_flatten((targs, tkwargs))
    if op not in DERIVATIVES or all(t is None for t in flat_t):
        return op(*args, **kwargs)  # not differentiable (comparisons, argmax, integer results): no tangent
    from ember.func import debug

    debug.record_jvp(op.name)
    leaves, spec = tree_flatten((list(args), dict(kwargs)))
    t_leaves, _ = tree_flatten((targs, tkwargs), is_leaf=lambda v: v is None or isinstance(v, Tensor))
    with ember.enable_grad():
        inputs, seeds = [], []
        for i, (p, t) in enumerate(zip(leaves, t_leaves)):
            if t is not None and isinstance(p, Tensor):
                alias = p.view_as(p) if p.requires_grad else p.detach().requires_grad_()
                leaves[i] = alias
                inputs.append(alias)
                seeds.append(t)
        call_args, call_kwargs = tree_unflatten(leaves, spec)
        result = op(*call_args, **call_kwargs)
        outs = [r for r in tree_flatten(result)[0] if isinstance(r, Tensor)]
        live = [o for o in outs if o.requires_grad]
        dummies = [ember.zeros_like(o).requires_grad_() for o in live]
        grads = ember.autograd.grad(live, inputs, dummies, create_graph=True, allow_unused=True)
        pairs = [(g, s) for g, s in zip(grads, seeds) if g is not None and g.requires_grad]
        jv = [None] * len(dummies)
        if pairs:
            jv = ember.autograd.grad([g for g, _ in pairs], dummies, [s for _, s in pairs], allow_unused=True,
                                     create_graph=ember.is_grad_enabled())
    tangent_of = {id(o): (ember.zeros_like(o) if j is None else j) for o, j in zip(live, jv)}
    # without autograd on the primals, the aliases' graph is not the caller's: hand back plain values
    keep_graph = any(p.requires_grad for p in tree_flatten(primals)[0] if isinstance(p, Tensor))

    def finish(r):
        if not isinstance(r, Tensor):
            return r
        tangent = tangent_of.get(id(r))
        value = r if keep_graph else r.detach()
        if tangent is None:
            return value
        return _dual(value, tangent if keep_graph else tangent.detach(), level)

    return tree_map(finish, result)


def _inplace(op, args, kwargs, level):
    """In-place ops on dual tensors: the functional op's primal and tangent written into ``self``."""
    self = args[0]
    if op.name == "copy_":  # self takes src's values and tangent
        src = args[1]
        primal, tangent = _primal_of(src, level), _tangent_of(src, level)
        primal = primal.expand_as(self) if isinstance(primal, Tensor) else primal
        tangent = tangent.expand_as(self) if tangent is not None else None
    elif op.name == "index_put_":  # linear in self and values: the same write into the tangent
        primal, tangent = _index_put(args, kwargs, level)
    elif op.functional is None:  # fill_, zero_, random fills: constants, tangent zero
        op(_primal_of(self, level), *[_primal_of(a, level) for a in args[1:]], **kwargs)
        if isinstance(self, DualTensor) and self._tangent is not None:
            self._tangent.zero_()
        return self
    else:
        primal, tangent = unpack_dual(op.functional(*args, **kwargs), level=level)
    if not isinstance(self, DualTensor) or self._dual_level != level:
        if tangent is not None:
            raise RuntimeError(
                f"forward AD: {op.name} would write a dual tensor into a tensor without a tangent; make the "
                "destination a dual tensor first (make_dual)"
            )
        self.copy_(primal)
        return self
    self._primal.copy_(primal)
    if tangent is not None:
        if self._tangent is None:
            self._tangent = tangent.clone()
        else:
            self._tangent.copy_(tangent)
    elif self._tangent is not None:
        self._tangent.zero_()
    return self


def _index_put(args, kwargs, level):
    """``self[indices] = values`` (``+=`` with ``accumulate``) on the primals and on the tangents (zeros
    for a side without one): ``(new primal, new tangent or None)``."""
    self, indices, values = args[0], args[1], args[2]
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    indices = type(indices)(_primal_of(i, level) for i in indices)
    self_p, values_p = _primal_of(self, level), _primal_of(values, level)
    primal = ember.index_put(self_p, indices, values_p, accumulate)
    self_t, values_t = _tangent_of(self, level), _tangent_of(values, level)
    if self_t is None and values_t is None:
        return primal, None
    self_t = ember.zeros_like(self_p) if self_t is None else self_t
    values_t = ember.zeros_like(values_p, dtype=self_p.dtype) if values_t is None else values_t
    return primal, ember.index_put(self_t, indices, values_t, accumulate)
