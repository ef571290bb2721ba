"""Activation checkpointing: trade compute for memory by recomputing a block's activations in backward.

Training keeps, for every op, the tensors its backward formula reads (the
*activations*), so memory grows with the depth of the network. A checkpointed
block runs its forward without keeping them; when backward reaches the block,
its forward runs again (with the random number generator put back where it
was, so dropout draws the same mask) and the recomputed activations are used.
Checkpointing every ``sqrt(n)`` layers of an ``n``-layer network brings the
activation memory from ``O(n)`` to ``O(sqrt(n))`` for one extra forward pass
(Chen, Xu, Zhang and Guestrin, "Training Deep Nets with Sublinear Memory
Cost", 2016, arXiv:1604.06174).

Two implementations, chosen with ``use_reentrant`` as in PyTorch:

* ``use_reentrant=False`` (recommended): the block runs under
  :class:`ember.autograd.graph.saved_tensors_hooks` whose pack hook keeps a
  placeholder instead of the tensor; the first unpack in a backward reruns
  the block and hands out the recomputed tensors, in the order they were
  saved. The graph is the ordinary one, so ``ember.autograd.grad``,
  ``backward(inputs=...)``, keyword arguments and parameters used inside the
  block all work.
* ``use_reentrant=True``: the block is one custom
  :class:`ember.autograd.Function` whose backward reruns the block and calls
  ``backward`` inside the outer backward. Gradients reach only the tensors
  among ``args`` (and, by accumulation, the leaves used inside), so at least
  one argument must require grad, and ``ember.autograd.grad`` cannot be used.

This module is part of ember-core but needs ember-autograd, which it imports
when called.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref

from .. import _extensions
from .._tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "set_checkpoint_early_stop", "CheckpointError"]


class CheckpointError(RuntimeError):
    """The recomputation of a checkpointed block did not match its original forward."""


def _autograd():
    """``ember.autograd``, or a clear error naming the distribution to install."""
    if not _extensions.autograd.installed:
        _extensions.require("ember.utils.checkpoint", "ember-autograd")
    import ember.autograd

    return ember.autograd


_USE_REENTRANT_WARNING = (
    "ember.utils.checkpoint: the use_reentrant parameter should be passed explicitly. use_reentrant=False is "
    "recommended; pass use_reentrant=True to keep the current default. The two variants differ in what they "
    "support (see the ember.utils.checkpoint docstring)."
)

_early_stop_override = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """Within the block, non-reentrant checkpoints stop recomputing once they have every saved tensor (or not).

    Args:
        enable (bool): stop early (the default of :func:`checkpoint`) or always rerun the whole block.
    """
    global _early_stop_override
    previous = _early_stop_override
    _early_stop_override = bool(enable)
    try:
        yield
    finally:
        _early_stop_override = previous


def _no_context():
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(
    function,
    *args,
    use_reentrant=None,
    preserve_rng_state=True,
    context_fn=_no_context,
    determinism_check="default",
    debug=False,
    early_stop=True,
    **kwargs,
):
    """Run ``function(*args, **kwargs)`` without keeping its activations; recompute them in backward.

    Args:
        function (callable): the block; it must compute the same thing when called again
            (random ops are fine with ``preserve_rng_state``).
        *args: its arguments; tensors among them are the inputs gradients flow to
            (with ``use_reentrant=True``, the only ones, apart from leaves used inside).
        use_reentrant (bool): which implementation (see the module docstring). Omitting it
            warns and uses ``True``, as PyTorch does; ``False`` is recommended.
        preserve_rng_state (bool): restore the default generator's state before recomputing,
            so random ops (dropout) draw the same numbers as in the forward.
        context_fn (callable): non-reentrant only: returns two context managers, entered
            around the forward and around the recomputation respectively.
        determinism_check (str): non-reentrant only: ``"default"`` checks that the recomputed
            tensors have the shapes, dtypes and devices of the original ones; ``"none"`` does not.
        debug (bool): accepted for PyTorch compatibility; must be False.
        early_stop (bool): non-reentrant only: stop the recomputation as soon as every saved
            tensor is recomputed (see :func:`set_checkpoint_early_stop`).
        **kwargs: keyword arguments of ``function`` (non-reentrant only).

    Returns:
        what ``function`` returns.

    Raises:
        ValueError: keyword arguments, ``context_fn`` or ``debug`` with ``use_reentrant=True``,
            or an unknown ``determinism_check``.
        MissingDistributionError: if ember-autograd is not installed.
        CheckpointError: in backward, when the recomputation saved different tensors.

    Example:
        >>> import ember
        >>> from ember.utils.checkpoint import checkpoint
        >>> w = ember.tensor([2.0, 3.0], requires_grad=True)
        >>> x = ember.tensor([1.0, 1.0], requires_grad=True)
        >>> y = checkpoint(lambda t: (t * w).exp() * w, x, use_reentrant=False)
        >>> y.sum().backward()
        >>> [round(v, 3) for v in x.grad.tolist()]
        [29.556, 180.77]
    """
    autograd = _autograd()
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    if debug:
        raise ValueError("ember.utils.checkpoint: debug=True is not supported")
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not _no_context:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return _reentrant_function(autograd).apply(function, preserve_rng_state, *args)
    if determinism_check not in _DETERMINISM_CHECKS:
        raise ValueError(
            f"determinism_check should be one of {list(_DETERMINISM_CHECKS)}, but got {determinism_check!r}"
        )
    stop = _early_stop_override if _early_stop_override is not None else early_stop
    return _checkpoint_without_reentrant(
        autograd, function, args, kwargs, preserve_rng_state, context_fn, determinism_check, stop
    )


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` one after the other, checkpointing them in ``segments`` groups (all but the last).

    With ``segments`` about ``sqrt(len(functions))``, only the segment boundaries are kept
    alive in forward, plus one segment's activations at a time in backward (Chen et al., 2016).

    Args:
        functions (sequence of callables, or a module with ``children()``): the layers.
        segments (int): how many groups to split them into.
        input (Tensor): the input of the first function.
        use_reentrant (bool): as for :func:`checkpoint`.
        preserve_rng_state (bool, keyword): as for :func:`checkpoint`.

    Returns:
        the output of the last function.

    Raises:
        ValueError: for other keyword arguments.

    Example:
        >>> import ember
        >>> from ember.utils.checkpoint import checkpoint_sequential
        >>> x = ember.tensor([0.5], requires_grad=True)
        >>> layers = [lambda t: t * 2, lambda t: t.exp(), lambda t: t * 3, lambda t: t + 1]
        >>> y = checkpoint_sequential(layers, 2, x, use_reentrant=False)
        >>> y.backward()
        >>> round(x.grad.item(), 4)
        16.3097
    """
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children"):
        functions = list(functions.children())
    functions = list(functions)

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)


# ------------------------------------------------------------------ use_reentrant=True


_REENTRANT = None


def _reentrant_function(autograd):
    """The custom Function of the reentrant variant (made on first use: it subclasses ember-autograd's)."""
    global _REENTRANT
    if _REENTRANT is None:
        _REENTRANT = _make_reentrant_function(autograd)
    return _REENTRANT


def _make_reentrant_function(autograd):
    import ember
    from ember.autograd._engine import is_checkpoint_valid

    class CheckpointFunction(autograd.Function):
        """Forward without a graph; backward reruns the block with a graph and backpropagates through it."""

        @staticmethod
        def forward(ctx, run_function, preserve_rng_state, *args):
            if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
                warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=4)
            ctx.run_function = run_function
            ctx.preserve_rng_state = preserve_rng_state
            if preserve_rng_state:
                ctx.rng_state = ember.get_rng_state()
            ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
            ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
            ctx.save_for_backward(*(args[i] for i in ctx.tensor_indices))
            return run_function(*args)

        @staticmethod
        def backward(ctx, *grad_outputs):
            if not is_checkpoint_valid():
                raise RuntimeError(
                    "When use_reentrant=True, ember.utils.checkpoint is incompatible with .grad() or passing an "
                    "`inputs` parameter to .backward(). To resolve this error, you can either set "
                    "use_reentrant=False, or call .backward() without passing the `inputs` argument."
                )
            inputs = list(ctx.inputs)
            for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
                inputs[i] = t
            detached = []
            for a in inputs:
                if isinstance(a, Tensor):
                    d = a.detach()
                    d.requires_grad_(a.requires_grad)
                    a = d
                detached.append(a)
            with ember.random.fork_rng(enabled=ctx.preserve_rng_state):
                if ctx.preserve_rng_state:
                    ember.set_rng_state(ctx.rng_state)
                with ember.enable_grad():
                    outputs = ctx.run_function(*detached)
            if isinstance(outputs, Tensor):
                outputs = (outputs,)
            roots, grads = [], []
            for out, g in zip(outputs, grad_outputs):
                if isinstance(out, Tensor) and out.requires_grad:
                    roots.append(out)
                    grads.append(g)
            if not roots:
                raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
            autograd.backward(roots, grads)
            return (None, None, *(a.grad if isinstance(a, Tensor) else None for a in detached))

    return CheckpointFunction


# ------------------------------------------------------------------ use_reentrant=False


def _metadata(t):
    return {"shape": tuple(t.shape), "dtype": t.dtype, "device": t.device}


_DETERMINISM_CHECKS = {"default": _metadata, "none": None}


class _StopRecomputation(Exception):
    """Raised from the recomputation's pack hook once every needed tensor is recomputed."""


class _Holder:
    """Stands for one saved tensor of a checkpointed block; ``value`` is filled by a recomputation."""

    __slots__ = ("value", "__weakref__")

    def __init__(self):
        self.value = None


class _Frame:
    """One call of a non-reentrant checkpoint: what it needs to recompute, and the placeholders."""

    def __init__(self, recompute, metadata_fn, early_stop):
        self.recompute = recompute
        self.metadata_fn = metadata_fn
        self.early_stop = early_stop
        self.holders = []  # weak references, in the order the forward saved the tensors
        self.metadata = []

    def pack(self, t):
        holder = _Holder()
        self.holders.append(weakref.ref(holder))
        if self.metadata_fn is not None:
            self.metadata.append(self.metadata_fn(t))
        return holder

    def unpack(self, holder):
        if holder.value is None:
            self._recompute()
        value, holder.value = holder.value, None  # handed out once; a later backward recomputes again
        return value

    def _recompute(self):
        autograd = _autograd()
        holders = self.holders
        count = 0

        def pack(t):
            nonlocal count
            index = count
            count += 1
            if index >= len(holders):
                raise CheckpointError(
                    "ember.utils.checkpoint: trying to save more tensors during recomputation than during the "
                    "original forward pass."
                )
            if self.metadata_fn is not None and self.metadata_fn(t) != self.metadata[index]:
                raise CheckpointError(
                    "ember.utils.checkpoint: Recomputed values for the following tensors have different "
                    f"metadata than during the forward pass.\ntensor at position {index}:\n"
                    f"saved metadata: {self.metadata[index]}\nrecomputed metadata: {self.metadata_fn(t)}\n"
                )
            value = t.detach() if t.requires_grad else t
            holder = holders[index]()
            if holder is not None:  # None: that node's saved tensors were freed already
                holder.value = value
            if self.early_stop and count == len(holders):
                raise _StopRecomputation
            return value  # the recomputation's own graph is dropped, unless the block differentiates it

        try:
            with autograd.graph.saved_tensors_hooks(pack, _identity), autograd.enable_grad():
                self.recompute()
        except _StopRecomputation:
            pass
        if count != len(holders):
            raise CheckpointError(
                "ember.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(holders)}\n"
                f"Number of tensors saved during recomputation: {count}."
            )


def _identity(value):
    return value


def _checkpoint_without_reentrant(autograd, function, args, kwargs, preserve_rng_state, context_fn, check, stop):
    import ember

    if not ember.is_grad_enabled():
        return function(*args, **kwargs)
    forward_context, recompute_context = context_fn()
    rng_state = ember.get_rng_state() if preserve_rng_state else None
    tensors = [a for a in args if isinstance(a, Tensor)]
    versions = [t._version for t in tensors]

    def recompute():
        for i, (t, version) in enumerate(zip(tensors, versions)):
            if t._version != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: input {i} of a checkpointed function is at version {t._version}; expected version "
                    f"{version} instead."
                )
        with ember.random.fork_rng(enabled=preserve_rng_state):
            if preserve_rng_state:
                ember.set_rng_state(rng_state)
            with recompute_context:
                function(*args, **kwargs)

    frame = _Frame(recompute, _DETERMINISM_CHECKS[check], stop)
    with autograd.graph.saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        return function(*args, **kwargs)
