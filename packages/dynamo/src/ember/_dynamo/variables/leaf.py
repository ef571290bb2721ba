"""Calls into ember itself (``ember.relu``, ``F.linear``, registry ops) and pure library functions:
run on the meta examples under the recording mode, which appends their ops to the graph."""

from __future__ import annotations

import functools
import os
import types

from ..exc import Unsupported
from ..reconstruct import Constant, FromSource
from .base import KnownObjectVariable
from .constant import ConstantVariable

__all__ = ["LeafCallableVariable", "is_ember_callable"]

# ember functions whose effect is outside the graph: running them while tracing would happen once.
_REFUSED = {
    "manual_seed", "seed", "set_rng_state", "set_default_dtype", "set_default_device", "set_printoptions",
    "save", "load", "set_num_threads", "use_deterministic_algorithms", "set_default_tensor_type",
}
# Pure functions of other libraries that are safe to run on constants (and on tensors, where ember
# overloads them through Tensor's dunder methods).
_PURE_MODULES = ("math", "operator", "_operator", "cmath")


# ember code that implements modules is inlined like user code (its helpers take callables and
# modules, e.g. the transformer layers' residual blocks); the rest of ember is the op-level API.
_INLINED_EMBER_MODULES = (
    "ember.nn.modules", "ember.nn.utils", "ember.nn.parameter", "ember.nn._mha_functional",
    # the step wrappers of optimizers and LR schedulers (the update itself, Adam.step..., is refused
    # as a leaf that takes the optimizer: a graph break, and it runs natively)
    "ember.optim.optimizer", "ember.optim.lr_scheduler",
    "ember.distributions",  # Python classes over ops (lazy properties, validation): inlined as user code
)


def is_ember_callable(value):
    """Whether ``value`` is an ember function, registry op, or ember class (a leaf of capture)."""
    from ember._ops._registry import Op

    if isinstance(value, Op):
        return True
    if not isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return False  # an instance of an ember class (a Generator, an optimizer) is an object with state
    module = getattr(value, "__module__", None) or ""
    if module.startswith(_INLINED_EMBER_MODULES):
        return False  # (its classes too: a helper object such as a hook call record is built inline)
    if not (module == "ember" or module.startswith("ember.")):
        return False
    if isinstance(value, types.FunctionType):
        # ``functools.wraps`` copies ``__module__``: a user's (or an LR scheduler's) wrapper around an
        # ember function says "ember.nn.functional" but is Python to inline, not ember's op-level API
        return value.__code__.co_filename.startswith(_ember_source_dirs())
    return True


@functools.cache
def _ember_source_dirs():
    """The folders of the ``ember`` package's source (one per installed ember distribution)."""
    import ember

    return tuple(os.path.join(os.path.abspath(path), "") for path in ember.__path__)


def is_pure_library_callable(value):
    """Whether ``value`` is a pure ``math``/``operator``/``cmath`` function (safe to run on constants)."""
    module = getattr(value, "__module__", None) or ""
    return module in _PURE_MODULES


class LeafCallableVariable(KnownObjectVariable):
    """An ember callable (or a pure ``math``/``operator`` function): calls are recorded, not inlined."""

    def describe(self):
        return f"callable {getattr(self.value, '__qualname__', self.value)!r}"

    def getattr(self, tx, name):
        if not hasattr(self.value, name):
            raise Unsupported(f"{self.describe()} has no attribute {name!r}")
        return tx.output.wrap(getattr(self.value, name), None, guard=False)

    def call(self, tx, args, kwargs):
        import ember

        fn = self.value
        name = getattr(fn, "__name__", "")
        if name in _REFUSED:
            raise Unsupported(f"ember.{name}() changes state outside the graph")
        from .tensor import TensorVariable

        name = getattr(fn, "__name__", "")
        if args and isinstance(args[0], TensorVariable) and getattr(ember.Tensor, name, None) is fn:
            return args[0].call_method(tx, name, args[1:], kwargs)  # Tensor.item(x) as x.item()
        special = _special_call(tx, fn, args, kwargs)
        if special is not None:
            return special
        from .functions import UserMethodVariable, _InlinableFunction
        from .user_objects import UserObjectVariable

        for arg in [*args, *kwargs.values()]:
            if isinstance(arg, (_InlinableFunction, UserMethodVariable, UserObjectVariable)):
                # it would run untraced inside the call, its Python effects happening now, once
                raise Unsupported(f"passing {arg.describe()} to {self.describe()} (a function that is not traced)")
        if isinstance(fn, types.FunctionType) and (getattr(fn, "__module__", "") or "").startswith("ember.optim"):
            # an optimizer's update (Adam.step) keeps Python state (lazily made moment buffers): run on
            # the meta examples it would store meta tensors in it
            raise Unsupported(f"{self.describe()} updates an optimizer's state (not traced: it runs natively)")
        owner = getattr(fn, "__self__", None)
        if isinstance(fn, types.MethodType) and not isinstance(owner, (type, types.ModuleType, ember.Tensor)):
            # a method of an object with state (an optimizer's update reached through a wrapper): the
            # same, with the object bound
            kind = type(owner).__name__
            raise Unsupported(f"calling {self.describe()} of a {kind} object (a method that is not traced)")
        if fn in (ember.is_grad_enabled,):
            return ConstantVariable(tx.output.grad_enabled)
        if name == "is_compiling" and not args and not kwargs:
            return ConstantVariable(True)  # ember.compiler.is_compiling() / ember._dynamo.is_compiling()
        folds = (isinstance(fn, type) and fn in (ember.device, ember.Size, ember.dtype)) or is_pure_library_callable(fn)
        if folds and all(a.is_constant() for a in args) and all(v.is_constant() for v in kwargs.values()):
            # (a symbolic size is used by value here, guarded; an ember call takes its graph node instead)
            values = [a.as_constant() for a in args]
            keywords = {k: v.as_constant() for k, v in kwargs.items()}
            return ConstantVariable(fn(*values, **keywords))
        return tx.output.leaf_call(tx, fn, args, kwargs)

    def reconstruct(self, out):
        return FromSource(self.source) if self.source is not None else Constant(self.value)


def _special_call(tx, fn, args, kwargs):
    """Grad-mode and autocast context managers and functions that are not plain op calls; None for the
    others."""
    import ember

    from .misc import GradModeVariable

    if fn is ember.no_grad or fn is ember.enable_grad:
        if args:
            raise Unsupported(f"ember.{fn.__name__} used as a decorator inside a compiled function")
        return GradModeVariable(fn is ember.enable_grad, tx.output.grad_enabled)
    if fn is ember.set_grad_enabled:
        mode = (args[0] if args else kwargs["mode"]).as_constant()
        previous = tx.output.grad_enabled
        tx.output.set_grad_enabled(bool(mode))  # set at once, as the function form does
        return GradModeVariable(bool(mode), previous, immediate=True)
    if fn is ember.inference_mode:
        # traced as the grad mode it sets (inference_mode(True): grad off; False: grad on); the
        # inference flag itself (is_inference_mode_enabled, Tensor.is_inference) is not tracked
        mode = (args[0] if args else kwargs["mode"]).as_constant() if args or kwargs else True
        return GradModeVariable(not mode, tx.output.grad_enabled)
    if isinstance(fn, type) and issubclass(fn, ember.autocast):
        from .misc import AutocastVariable

        if not all(a.is_constant() for a in args) or not all(v.is_constant() for v in kwargs.values()):
            raise Unsupported("ember.autocast(...) with arguments that are not constants of the capture")
        values = [a.as_constant() for a in args]
        keywords = {k: v.as_constant() for k, v in kwargs.items()}
        return AutocastVariable(fn(*values, **keywords))  # checks its arguments (and warns) as eager does
    if fn is ember.is_autocast_enabled or fn is ember.get_autocast_dtype:
        # the regions in force in the trace, not the caller's (a region entered inside is not entered for real)
        device_type = (args[0] if args else kwargs["device_type"]).as_constant() if args or kwargs else "cuda"
        fn(device_type)  # the same argument checks
        dtype = tx.output.autocast.get(device_type)
        if fn is ember.is_autocast_enabled:
            return ConstantVariable(dtype is not None)
        return ConstantVariable(dtype if dtype is not None else ember.get_autocast_dtype(device_type))
    if getattr(fn, "__name__", "") == "checkpoint" and getattr(fn, "__module__", "") == "ember.utils.checkpoint":
        # activation checkpointing changes memory, not values: the function is traced inline
        if not args:
            raise Unsupported("checkpoint() without a function")
        options = ("use_reentrant", "preserve_rng_state", "determinism_check")
        kwargs = {k: v for k, v in kwargs.items() if k not in options}
        return args[0].call(tx, list(args[1:]), kwargs)
    return None
