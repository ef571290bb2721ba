""":func:`vmap`: run a function of one sample over a batch, vectorised by the batching rules."""

from __future__ import annotations

import functools

import ember
from ember._ops._dispatch import _run_mode, run_below_modes
from ember._ops._dispatch import state as _dispatch_state
from ember._ops._shapes import wrap_dim
from ember._tensor import Tensor
from ember.utils._python_dispatch import DispatchMode
from ember.utils._pytree import tree_flatten, tree_unflatten

from . import _batching_rules
from ._batched import _LEVELS, BatchedTensor, Level, wrap

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Vectorise ``func`` over a dimension of its inputs: ``func`` is written for one sample.

    ``vmap(f)(x)`` equals ``ember.stack([f(x[i]) for i in range(x.shape[0])])``, computed with
    one call of each op on the whole batch (see :mod:`ember.func._batching_rules`). Nestable, and
    composable with :func:`ember.func.grad` (``vmap(grad(loss))`` gives per-sample gradients).

    Args:
        func (callable): a function of tensors (and pytrees of tensors: tuples, lists, dicts).
        in_dims (int, None or pytree): the batch dim of each positional argument: one int for all,
            or a tuple with one entry per argument (an int, None for "not batched", or a pytree
            prefix of the argument). Keyword arguments are never batched.
        out_dims (int, None or pytree): where the batch dim goes in each output.
        randomness (str): ``"error"`` (random ops raise), ``"different"`` (each sample draws its own
            numbers) or ``"same"`` (all samples share the draws).
        chunk_size (int, optional): run at most this many samples at a time (less memory).

    Returns:
        callable: the vectorised function.

    Raises:
        ValueError: bad ``in_dims``/``out_dims``/``randomness``/``chunk_size``, no batched input, or
            batched inputs of different sizes.

    Example:
        >>> import ember
        >>> from ember.func import vmap
        >>> x, y = ember.ones(5, 3), ember.ones(3)
        >>> vmap(ember.dot, in_dims=(0, None))(x, y).shape
        ember.Size([5])
    """
    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {_RANDOMNESS}, got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}")
    if not callable(func):
        raise TypeError(f"vmap: func must be callable, got {type(func).__name__}")

    @functools.wraps(func)
    def vmapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs)

    return vmapped


def _broadcast_prefix(spec, tree, what):
    """The leaves of ``spec`` (a pytree prefix of ``tree``) repeated over ``tree``'s leaves."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(tree_flatten(tree)[0])
    if isinstance(spec, (tuple, list)) and isinstance(tree, (tuple, list)) and len(spec) == len(tree):
        return [d for s, t in zip(spec, tree) for d in _broadcast_prefix(s, t, what)]
    if isinstance(spec, dict) and isinstance(tree, dict) and set(spec) == set(tree):
        return [d for k in tree for d in _broadcast_prefix(spec[k], tree[k], what)]
    raise ValueError(
        f"vmap: {what}={spec!r} is not compatible with the structure of the values it describes "
        f"({type(tree).__name__}); give an int, None, or a pytree prefix of them"
    )


def _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    if isinstance(in_dims, (tuple, list)):
        if len(in_dims) != len(args):
            raise ValueError(
                f"vmap: in_dims is a {type(in_dims).__name__} of {len(in_dims)} entries, but the function was called "
                f"with {len(args)} positional arguments; give one entry per argument"
            )
        dims = [d for spec, a in zip(in_dims, args) for d in _broadcast_prefix(spec, a, "in_dims")]
    elif in_dims is None or isinstance(in_dims, int):
        dims = _broadcast_prefix(in_dims, args, "in_dims")
    else:
        raise ValueError(f"vmap: in_dims must be an int, None or a tuple, got {type(in_dims).__name__}")
    leaves, spec = tree_flatten(args)
    size = _batch_size(leaves, dims, in_dims)
    if chunk_size is not None and chunk_size < size:
        return _chunked(func, leaves, dims, spec, size, out_dims, randomness, chunk_size, kwargs)
    return _run_level(func, leaves, dims, spec, size, out_dims, randomness, kwargs)


def _batch_size(leaves, dims, in_dims):
    sizes = []
    for leaf, dim in zip(leaves, dims):
        if dim is None:
            continue
        if not isinstance(leaf, Tensor):
            raise ValueError(
                f"vmap: in_dims={in_dims!r} asks to batch a value of type {type(leaf).__name__}, which is not a "
                "Tensor; use None for it"
            )
        if not -leaf.ndim <= dim < max(leaf.ndim, 0) or leaf.ndim == 0:
            raise ValueError(
                f"vmap: in_dim {dim} is out of range for an input with {leaf.ndim} dims (shape {list(leaf.shape)})"
            )
        sizes.append(leaf.shape[dim])
    if not sizes:
        raise ValueError("vmap: at least one input must be batched (an in_dim that is not None on a Tensor)")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes {sizes} "
            "for the mapped dimension"
        )
    return sizes[0]


def _run_level(func, leaves, dims, spec, size, out_dims, randomness, kwargs):
    level = Level(len(_LEVELS) + 1, size, randomness)
    wrapped = [
        leaf if dim is None else wrap(leaf, dim % leaf.ndim, level.number) for leaf, dim in zip(leaves, dims)
    ]
    _LEVELS.append(level)
    try:
        with _RandomnessMode(level):
            outputs = func(*tree_unflatten(wrapped, spec), **kwargs)
        return _unwrap_outputs(outputs, out_dims, level)
    finally:
        _LEVELS.pop()


def _unwrap_outputs(outputs, out_dims, level):
    leaves, spec = tree_flatten(outputs)
    dims = _broadcast_prefix(out_dims, outputs, "out_dims")
    return tree_unflatten([_unwrap_one(leaf, dim, level) for leaf, dim in zip(leaves, dims)], spec)


def _unwrap_one(value, dim, level):
    batched = isinstance(value, BatchedTensor) and value._level == level.number
    if dim is None:
        if batched:
            raise ValueError(
                "vmap: an output with out_dims=None is batched (it depends on a batched input); only outputs that "
                "are the same for every sample can have out_dims=None"
            )
        return value
    if not isinstance(value, Tensor):
        if value is None:
            return None
        raise ValueError(f"vmap: func must only return Tensors (or None), got an output of type {type(value).__name__}")
    if batched:
        inner = value._inner
        target = wrap_dim(dim, inner.ndim)  # (IndexError out of range, in PyTorch's words)
        return inner if value._bdim == target else inner.movedim(value._bdim, target)
    # the same for every sample: repeat it along the new dim (a view)
    target = wrap_dim(dim, value.ndim + 1)
    shape = list(value.shape)
    shape.insert(target, level.size)
    return value.unsqueeze(target).expand(*shape)


def _chunked(func, leaves, dims, spec, size, out_dims, randomness, chunk_size, kwargs):
    results = []
    for start in range(0, size, chunk_size):
        length = min(chunk_size, size - start)
        chunk = [leaf if d is None else leaf.narrow(d, start, length) for leaf, d in zip(leaves, dims)]
        results.append(_run_level(func, chunk, dims, spec, length, out_dims, randomness, kwargs))
    flat = [tree_flatten(r)[0] for r in results]
    out_spec = tree_flatten(results[0])[1]
    out_dim_list = _broadcast_prefix(out_dims, results[0], "out_dims")
    merged = []
    for i, dim in enumerate(out_dim_list):
        parts = [f[i] for f in flat]
        merged.append(parts[0] if dim is None or not isinstance(parts[0], Tensor) else ember.cat(parts, dim))
    return tree_unflatten(merged, out_spec)


class _RandomnessMode(DispatchMode):
    """Applies a vmap level's ``randomness`` to random ops that meet no batched tensor (``ember.randn(3)``).

    Random ops on batched tensors reach the batching rules instead (``random_call``). The calls that the
    rules themselves make on inner tensors never reach it (``batch_call`` takes it off the stack).
    """

    vmap_randomness = True  # batch_call takes these modes off the stack while a batching rule runs

    def __init__(self, level):
        self.level = level

    def __ember_record__(self, op, args, kwargs):
        """The dispatcher's raw-call hook (see ``_dispatch._run_mode``): every op inside the vmapped function
        that meets no batched tensor comes here, which is most of them under ``vmap(grad(f))`` (``grad`` lifts
        its inputs to plain tensors). Only random prims need this mode; every other call runs below it at
        once, without the signature binding and second dispatch that ``__ember_dispatch__`` would cost.
        """
        modes = _dispatch_state.modes
        modes.pop()  # as for any mode: the call runs with this one off the stack
        try:
            if "random" in op.tags and op.category == "prim":
                nargs, nkwargs = op.normalize(args, kwargs or {})
                return self.__ember_dispatch__(op, (), nargs, nkwargs)
            if modes:
                return _run_mode(op, args, kwargs or {}, modes)
            return run_below_modes(op, args, kwargs or {})
        finally:
            modes.append(self)

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "random" not in func.tags or func.category != "prim":
            return func(*args, **kwargs)
        randomness = self.level.randomness
        if randomness == "same":
            return func(*args, **kwargs)
        if randomness == "error":
            raise RuntimeError(_batching_rules._RANDOM_ERROR)
        return self._different(func, args, kwargs)

    def _different(self, func, args, kwargs):
        size, number = self.level.size, self.level.number
        if func.name in ("rand", "randn"):
            sizes = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            return wrap(func(size, *sizes, **kwargs), 0, number)
        if func.name in ("randint", "normal") and not isinstance(args[0], Tensor):
            args = list(args)
            args[2] = (size, *args[2])
            return wrap(func(*args, **kwargs), 0, number)
        if func.name == "randperm":  # one permutation per sample: the order of independent uniform draws
            keys = ember.rand(size, args[0], generator=kwargs.get("generator"), device=kwargs.get("device"))
            return wrap(keys.argsort(dim=-1).to(kwargs.get("dtype") or ember.int64), 0, number)
        if func.kind == "inplace":
            raise RuntimeError(
                f"vmap: {func.name} on a tensor that is not batched, with randomness='different': each sample "
                "would need its own values in one tensor; make the tensor inside the vmapped function from a "
                "batched one, or use randomness='same'"
            )
        if args and isinstance(args[0], Tensor):  # bernoulli / multinomial / normal on an unbatched tensor
            x = args[0]
            batched = wrap(x.unsqueeze(0).expand(size, *x.shape), 0, number)
            return func(batched, *args[1:], **kwargs)
        raise RuntimeError(f"vmap: randomness='different' is not supported for {func.name} here")
