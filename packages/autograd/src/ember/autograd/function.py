"""Custom differentiable functions: :class:`Function` with ``forward`` and ``backward``.

Subclass :class:`Function`, write ``forward`` (in any code, run without
recording) and ``backward`` (gradients of the inputs from the gradients of
the outputs), and call ``MyFn.apply(*args)``. Two styles are supported, as in
PyTorch:

* ``forward(ctx, *args)`` receives the context first;
* ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``, which
  separates computing from saving (the style function transforms need).

The context (``ctx``) is the backward node itself (:class:`BackwardCFunction`).
"""

from __future__ import annotations

import functools
import inspect

import ember
from ember._ops._dispatch import state
from ember._tensor import Tensor

from . import _anomaly
from ._formula_node import validate_grad
from ._inplace import _check_inplace_allowed, _rebase_history
from ._record import DIFFERENTIABLE_DTYPES
from .graph import Node, SavedTensor, edge_of

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable", "InplaceFunction"]


class FunctionCtx:
    """What ``forward``/``setup_context`` may call on ``ctx``; attributes may be set freely.

    Attributes:
        needs_input_grad (tuple[bool]): per argument of ``forward``, whether its gradient is needed.
    """

    def save_for_backward(self, *tensors):
        """Keep tensors (inputs, outputs or None) for ``backward``, checked against in-place changes."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, but argument is {type(t).__name__}")
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        """Accepted for PyTorch compatibility (forward-mode AD is not implemented)."""
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors):
        """Declare inputs that ``forward`` modified in place (they must be returned as outputs)."""
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        """Declare outputs that get no gradient (e.g. indices); their gradient in ``backward`` is zeros."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value):
        """Whether ``backward`` receives zeros (default) or None for outputs that got no gradient."""
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The node of one call of a custom :class:`Function`; also its ``ctx``."""

    to_save = ()
    dirty_tensors = ()
    non_differentiable = ()
    materialize_grads = True

    def __init__(self, cls):
        Node.__init__(self, (), 1)
        self._cls = cls
        self._saved = None
        self._freed = False
        self._input_meta = ()
        self._output_meta = ()
        self.needs_input_grad = ()
        if _anomaly.enabled():
            _anomaly.record_forward(self)

    def name(self):
        return f"{self._cls.__name__}Backward"

    @property
    def saved_tensors(self):
        """The tensors given to ``save_for_backward``, checked against in-place modification.

        Raises:
            RuntimeError: after the graph was freed, or if a saved tensor was modified in place.
        """
        if self._freed:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Specify retain_graph=True if you need to backward through the graph a "
                "second time or if you need to access saved tensors after calling backward."
            )
        if self._saved is None:
            return tuple(self.to_save)
        return tuple(s.unpack(self.name(), i) if s is not None else None for i, s in enumerate(self._saved))

    saved_variables = saved_tensors

    def apply(self, grad_outputs):
        grads = list(grad_outputs)
        if self.materialize_grads:
            for i, g in enumerate(grads):
                meta = self._output_meta[i]
                if g is None and meta is not None:
                    shape, dtype, device = meta
                    grads[i] = ember.zeros(shape, dtype=dtype, device=device)
        result = self._cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_args = len(self._arg_is_tensor)
        if len(result) < n_args or any(r is not None for r in result[n_args:]):
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected {n_args}, "
                f"got {len(result)})"
            )
        out = []
        for position, (is_tensor, g) in enumerate(zip(self._arg_is_tensor, result)):
            if not is_tensor:
                if g is not None:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different than None at position "
                        f"{position + 1}, but the corresponding forward input was not a Variable"
                    )
                continue
            index = len(out)
            if g is not None and self.next_functions[index][0] is not None:
                if not isinstance(g, Tensor):
                    raise TypeError(f"function {self.name()} returned a gradient of type {type(g).__name__}")
                device = self._input_meta[index][2]
                if g._device != device and g._data.ndim != 0:  # a zero-dim gradient moves, as in PyTorch
                    raise RuntimeError(
                        f"Function {self.name()} returned an invalid gradient at index {position} - expected device "
                        f"{device} but got {g._device}"
                    )
                g = validate_grad(g, self._input_meta[index], self, position)
            elif self.next_functions[index][0] is None:
                g = None
            out.append(g)
        return out

    def _release(self):
        self._freed = True
        self._saved = None


class _FunctionMeta(type):
    """Gives each Function subclass a node class named ``<Name>Backward`` (for printing)."""

    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_cls = type(f"{name}Backward", (BackwardCFunction,), {})


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable operations.

    Example:
        >>> import ember
        >>> class Cube(ember.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x ** 3
        ...     @staticmethod
        ...     def backward(ctx, grad):
        ...         (x,) = ctx.saved_tensors
        ...         return grad * 3 * x ** 2
        >>> x = ember.tensor([2.0], requires_grad=True)
        >>> Cube.apply(x).backward()
        >>> x.grad
        tensor([12.])
    """

    generate_vmap_rule = False

    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            "Function objects are not meant to be instantiated; call the classmethod apply "
            f"(e.g. {type(self).__name__}.apply(...))"
        )

    @staticmethod
    def forward(*args, **kwargs):
        """Compute the outputs (override). Called without graph recording."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Save what backward needs (override, for ``forward`` without ``ctx``)."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Gradients of the inputs of ``forward`` (one per argument; None for non-tensors), override."""
        raise NotImplementedError("You must implement either the backward or vjp method for your custom Function.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("forward-mode AD (jvp) is not implemented in ember-autograd")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` and record a node whose backward is ``backward``.

        Returns:
            the outputs of ``forward``; tensors among them require grad when an input does.
        """
        ctx = cls._backward_cls(cls)
        uses_setup_context = cls.setup_context is not Function.setup_context
        if uses_setup_context:
            # setup_context sees every argument positionally, defaults filled in, as in PyTorch
            args, kwargs = _bind_forward_arguments(cls.forward, args, kwargs)
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        recording = state.grad_enabled and any(t._requires_grad for t in tensor_args)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad and recording for a in args)
        previous = state.grad_enabled
        state.grad_enabled = False
        try:
            if uses_setup_context:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        finally:
            state.grad_enabled = previous
        if not recording:
            return output
        return _attach(ctx, args, output)


def _bind_forward_arguments(forward, args, kwargs):
    """``args`` and ``kwargs`` of a call of ``forward`` as positional arguments (defaults filled in)."""
    code = getattr(forward, "__code__", None)
    if not kwargs and code is not None and code.co_argcount == len(args):
        return args, kwargs  # every parameter given positionally: the common case, no binding
    bound = inspect.signature(forward).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.args, bound.kwargs


def _attach(ctx, args, output):
    """Make ``ctx`` the grad_fn of the outputs, with edges to the tensor inputs."""
    ctx._arg_is_tensor = tuple(isinstance(a, Tensor) for a in args)
    tensor_args = [a for a in args if isinstance(a, Tensor)]
    ctx.next_functions = tuple(edge_of(t) for t in tensor_args)
    ctx._input_meta = tuple((t._data.shape, t._data.dtype, t._device) for t in tensor_args)
    single = not isinstance(output, tuple)
    outputs = (output,) if single else output
    dirty = {id(t) for t in ctx.dirty_tensors}
    non_diff = {id(t) for t in ctx.non_differentiable}
    inputs_by_id = {id(t): t for t in tensor_args}
    final = []
    for nr, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            final.append(o)
            continue
        if id(o) in dirty:
            base = _check_inplace_allowed(o)
            if base is not None:
                _rebase_history(o, base, ctx, nr)
            else:
                o._grad_fn, o._output_nr, o._requires_grad = ctx, nr, True
        elif id(o) in non_diff or o._data.dtype not in DIFFERENTIABLE_DTYPES:
            pass
        else:
            if id(o) in inputs_by_id:  # an input returned as is: the output is a new alias of it
                o = ember.Tensor._make(o._data, o._device)
            o._grad_fn, o._output_nr, o._requires_grad = ctx, nr, True
        final.append(o)
    ctx._num_outputs = len(outputs)
    # every tensor output, non-differentiable ones included: PyTorch hands ``backward`` zeros of
    # the output's dtype for them (integer indices too) when grads are materialized
    ctx._output_meta = tuple((o._data.shape, o.dtype, o._device) if isinstance(o, Tensor) else None for o in final)
    output_ids = {id(o): i for i, o in enumerate(final) if isinstance(o, Tensor)}
    original_ids = {id(o): i for i, o in enumerate(outputs) if isinstance(o, Tensor)}
    saved = []
    for t in ctx.to_save:
        if t is None:
            saved.append(None)
        elif id(t) in original_ids and final[original_ids[id(t)]]._grad_fn is ctx and id(t) not in inputs_by_id:
            saved.append(SavedTensor(final[original_ids[id(t)]], ctx, original_ids[id(t)], is_output=True))
        elif id(t) in output_ids and final[output_ids[id(t)]]._grad_fn is ctx:
            saved.append(SavedTensor(t, ctx, output_ids[id(t)], is_output=True))
        else:
            saved.append(SavedTensor(t))
    ctx._saved = saved
    ctx.to_save = ()
    return final[0] if single else tuple(final)


class InplaceFunction(Function):
    """A :class:`Function` with an ``inplace`` flag (kept for PyTorch compatibility)."""


class _OnceDifferentiableError(Node):
    """Stands in for the backward of a ``once_differentiable`` backward: differentiating it again fails."""

    def __init__(self, name, edges):
        super().__init__(edges, 1)
        self._name = name

    def name(self):
        return "DelayedError"

    def apply(self, grad_outputs):
        raise RuntimeError(
            f"trying to differentiate twice a function that was marked with @once_differentiable ({self._name})"
        )


def once_differentiable(fn):
    """Decorator for ``backward``: run it without recording; differentiating it again raises.

    Use it when ``backward`` is written with non-differentiable code (numpy, in-place tricks).
    """

    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        with ember.no_grad():
            result = fn(ctx, *grads)
        if not (state.grad_enabled and any(isinstance(g, Tensor) and g._requires_grad for g in grads)):
            return result
        edges = tuple(edge_of(g) for g in grads if isinstance(g, Tensor) and g._requires_grad)
        error = _OnceDifferentiableError(ctx.name(), edges)
        single = not isinstance(result, tuple)
        marked = []
        for r in (result,) if single else result:
            if isinstance(r, Tensor) and r._data.dtype in DIFFERENTIABLE_DTYPES:
                r = ember.Tensor._make(r._data, r._device)
                r._grad_fn, r._output_nr, r._requires_grad = error, 0, True
            marked.append(r)
        return marked[0] if single else tuple(marked)

    return wrapper
