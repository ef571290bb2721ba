"""The :class:`Optimizer` base class: parameter groups, per-parameter state, state dicts and step hooks.

Same programming model, names, error messages and state-dict layout as
``torch.optim.Optimizer``, so an optimizer state dict converts between the two
libraries by converting its tensors::

    {"state": {0: {"step": tensor(3.), "exp_avg": ..., ...}, 1: {...}},
     "param_groups": [{"lr": 0.001, ..., "params": [0, 1]}, ...]}

Parameters are numbered in the order they appear across the groups; ``state``
holds an entry only for parameters that have one (those that received a
gradient).

Reference: PyTorch's ``torch/optim/optimizer.py``.
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from copy import deepcopy
from itertools import chain

import ember
from ember._ops._dispatch import profiler_recorder
from ember._tensor import Tensor
from ember.autograd.graph import RemovableHandle, _add_hook, _HookDict

__all__ = [
    "Optimizer",
    "required",
    "register_optimizer_step_pre_hook",
    "register_optimizer_step_post_hook",
]


class _RequiredParameter:
    """Singleton marking a hyper-parameter that every parameter group must specify."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()
"""Default value of a hyper-parameter that has no default (``SGD``'s ``lr`` in old PyTorch releases)."""

_global_optimizer_pre_hooks = _HookDict()
_global_optimizer_post_hooks = _HookDict()


def register_optimizer_step_pre_hook(hook) -> RemovableHandle:
    """Register a pre-step hook for every optimizer: ``hook(optimizer, args, kwargs) -> None or (args, kwargs)``.

    Returns:
        RemovableHandle: ``handle.remove()`` unregisters the hook.
    """
    return _add_hook(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook) -> RemovableHandle:
    """Register a post-step hook for every optimizer: ``hook(optimizer, args, kwargs) -> None``.

    Returns:
        RemovableHandle: ``handle.remove()`` unregisters the hook.
    """
    return _add_hook(_global_optimizer_post_hooks, hook)


def _typename(obj) -> str:
    """PyTorch's ``torch.typename``: ``"ember.Tensor"`` for a tensor, the qualified class name otherwise."""
    if isinstance(obj, Tensor):
        return "ember.Tensor"
    module = type(obj).__module__
    name = type(obj).__qualname__
    return name if module in (None, "builtins") else f"{module}.{name}"


def _get_scalar_dtype():
    """The dtype of scalar state such as ``step``: float64 when that is the default dtype, float32 otherwise."""
    return ember.float64 if ember.get_default_dtype() == ember.float64 else ember.float32


def _get_value(x):
    """A Python number from a 0-d tensor or a number."""
    return x.item() if isinstance(x, Tensor) else x


def _to_scalar(x):
    """A 1-element tensor hyper-parameter as a Python number; anything else unchanged."""
    if isinstance(x, Tensor) and x.numel() == 1:
        return x.item()
    return x


#: What ``foreach=None`` picks for plain CPU tensors. True: the foreach path measured faster here, and
#: its results are the same bits as the single-tensor loop's. Per parameter and per step, the single-tensor
#: loop runs each in-place op through the dispatcher (argument scan, meta check: 2 to 8 microseconds
#: each), where the ``ember._foreach_*`` list ops check a list once and run the same direct numpy kernels
#: tensor by tensor (``ember._ops.foreach``); Adam.step on the 784-512-512-10 MLP's six parameters took
#: 0.96 ms instead of 1.13 ms of CPU time (``time.thread_time``, minimum of 5 repeats of 100 steps, one
#: thread, 2026-11-30). PyTorch
#: defaults to foreach only on CUDA, where its list ops launch one kernel for many tensors.
_FOREACH_BY_DEFAULT = True


def _foreach_supported(p):
    """Whether ``p`` may take the foreach path by default: a plain tensor or parameter (no subclass that
    overrides ops, whose ``__ember_function__`` would then see list ops it doesn't expect)."""
    return type(p) is Tensor or type(p) is ember.nn.Parameter


def _default_to_foreach(params, differentiable):
    """``foreach=None``'s choice for ``params`` (PyTorch's ``_default_to_fused_or_foreach``, foreach half):
    never with ``differentiable``, else :data:`_FOREACH_BY_DEFAULT` when every tensor is a plain one."""
    if differentiable or not _FOREACH_BY_DEFAULT:
        return False
    return all(p is None or _foreach_supported(p) for p in params)


def _resolve_foreach(foreach, differentiable, params):
    """The path a step takes: ``foreach`` as given, or the default for ``params`` when None.

    Raises:
        AssertionError: ``foreach=True`` with ``differentiable=True`` (PyTorch's "_foreach ops don't support
            autograd": the foreach paths skip the clones the differentiable single-tensor paths make).
    """
    if foreach is None:
        return _default_to_foreach(params, differentiable)
    if foreach and differentiable:
        raise AssertionError("_foreach ops don't support autograd")
    return bool(foreach)


def _check_hyperparameters(lr, *checks, reject_nan=True):
    """Check an optimizer's hyperparameters, in PyTorch's order and words (every optimizer's one check).

    Args:
        lr (float or Tensor): the learning rate: a Tensor must hold one element; >= 0.
        *checks: ``(label, value)`` for a value that must be >= 0, or ``(label, value, upper, inclusive)``
            for one that must also be below ``upper`` (at most ``upper`` when ``inclusive``); ``label``
            names it in the message (``"epsilon value"``, ``"beta parameter at index 0"``).
        reject_nan (bool): whether NaN fails the checks (SGD's ``x < 0`` tests, as PyTorch's, let it pass).

    Raises:
        ValueError: ``"Invalid <label>: <value>"`` for the first value out of range.
    """
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    for check in (("learning rate", lr), *checks):
        label, value = check[0], check[1]
        if reject_nan:
            ok = 0.0 <= value
            if ok and len(check) > 2:
                ok = value <= check[2] if check[3] else value < check[2]
        else:
            ok = not value < 0.0
        if not ok:
            raise ValueError(f"Invalid {label}: {value}")


def _check_adam_family_args(lr, betas, eps, weight_decay):
    """The hyperparameter checks of Adam, AdamW, Adamax, NAdam and RAdam (see :func:`_check_hyperparameters`).

    Args:
        lr (float or Tensor): learning rate, >= 0 (a Tensor must hold one element).
        betas (tuple[float, float]): each in [0, 1).
        eps (float): >= 0.
        weight_decay (float): >= 0.

    Raises:
        ValueError: naming the first argument out of range and its value.
    """
    _check_hyperparameters(
        lr,
        ("epsilon value", eps),
        ("beta parameter at index 0", betas[0], 1.0, False),
        ("beta parameter at index 1", betas[1], 1.0, False),
        ("weight_decay value", weight_decay),
    )


def _pick_step(foreach, differentiable, params, single_tensor, multi_tensor):
    """The step implementation for ``params``: ``multi_tensor`` (foreach list ops) or ``single_tensor``.

    Every optimizer routes its functional step through this (Adam and AdamW first take their fused
    kernel where ``fused`` asks for it); ``foreach=None`` picks the default (:func:`_resolve_foreach`).

    Raises:
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    return multi_tensor if _resolve_foreach(foreach, differentiable, params) else single_tensor


def _check_fused(fused, foreach, differentiable, supported=False):
    """Check ``fused`` against ``foreach`` and ``differentiable`` (None/False always pass).

    Args:
        supported (bool): whether the optimizer has a fused step (Adam, AdamW); the others refuse ``fused=True``.

    Raises:
        RuntimeError: ``fused`` with ``differentiable`` or ``foreach`` (PyTorch's messages), or ``fused=True``
            for an optimizer without a fused step.
    """
    if not fused:
        return
    if differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")
    if foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    if not supported:
        raise RuntimeError(
            "`fused=True` is not implemented in ember for this optimizer: only Adam and AdamW have a fused step; "
            "use foreach=True (the default for CPU tensors) or foreach=False"
        )


#: The dtypes of the fused kernels (``ember._C.fused_adam_``); complex parameters are viewed as real.
_FUSED_DTYPES = frozenset({"float32", "float64", "complex64", "complex128"})


def _fused_supported(p):
    """Whether ``p`` may take the fused path by default: a plain CPU tensor of a dtype the kernel takes."""
    return _foreach_supported(p) and p.device.type == "cpu" and p.dtype.name in _FUSED_DTYPES


def _default_to_fused(params, differentiable):
    """``fused=None``'s choice for ``params`` (PyTorch's ``_default_to_fused_or_foreach``, fused half, which
    ember answers differently: see ``ember.optim.adam._FUSED_BY_DEFAULT``)."""
    if differentiable:
        return False
    return all(p is None or _fused_supported(p) for p in params)


def _as_real(tensors):
    """``tensors`` with each complex tensor viewed as real (a last dimension of 2 holds (real, imag)), as
    the single-tensor loops view each complex parameter and its state."""
    return [ember.view_as_real(t) if t.is_complex() else t for t in tensors]


def _lr_value(lr, differentiable):
    """``lr`` as a Python number, except a tensor ``lr`` that requires grad in a differentiable step: it stays a
    0-d tensor, so that the update records its use and a loss after the step has a gradient for it."""
    if differentiable and isinstance(lr, Tensor) and lr.requires_grad:
        return lr.reshape(())
    return _to_scalar(lr)


def _evaluate_closure(closure):
    """The loss of ``closure()`` (run with grad enabled, as the step itself runs without), or None."""
    if closure is None:
        return None
    with ember.enable_grad():
        return closure()


def _use_grad_for_differentiable(step):
    """Run ``step`` under ``ember.no_grad()`` unless the group's ``differentiable`` default is set."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with ember.set_grad_enabled(bool(self.defaults.get("differentiable", False))):
            return step(self, *args, **kwargs)

    return wrapper


def _profiler_span(optimizer, method):
    """A profiler span ``Optimizer.<method>#<class>.<method>`` (PyTorch's label) to enter while a profiler
    records, else None (no context manager either: ember.compile traces optimizer steps, and a context object
    of its own would break the graph)."""
    if profiler_recorder() is None:
        return None
    from ember.profiler import record_function  # (loaded: a profiler records)

    return record_function(f"Optimizer.{method}#{type(optimizer).__name__}.{method}")


def _hooked_step(step):
    """Wrap a subclass's ``step`` so that the global and per-optimizer step hooks run around it, all of it
    inside a profiler span ``Optimizer.step#<class>.step`` when a profiler records (PyTorch's label)."""

    @functools.wraps(step)
    def wrapper(*args, **kwargs):
        self = args[0]
        span = _profiler_span(self, "step")
        if span is None:
            return _run_step_with_hooks(step, self, args, kwargs)
        with span:
            return _run_step_with_hooks(step, self, args, kwargs)

    wrapper._ember_hooked = True
    return wrapper


def _run_step_with_hooks(step, self, args, kwargs):
    """``step(*args, **kwargs)`` between the pre-step hooks (which may replace the arguments) and the post-step
    hooks, counting the step."""
    for pre_hook in chain(_global_optimizer_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
        result = pre_hook(self, args, kwargs)
        if result is not None:
            if isinstance(result, tuple) and len(result) == 2:
                args, kwargs = result
            else:
                raise RuntimeError(
                    f"{type(self).__name__}.step must return None or a tuple of (new_args, new_kwargs), but got "
                    f"{result}."
                )
    out = step(*args, **kwargs)
    self._opt_called = True
    self._step_count = getattr(self, "_step_count", 0) + 1
    for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_optimizer_post_hooks.values()):
        post_hook(self, args, kwargs)
    return out


class Optimizer:
    """Base class for all optimizers (PyTorch's ``torch.optim.Optimizer``).

    Args:
        params (iterable): tensors to optimize, or dicts defining parameter groups
            (each with a ``"params"`` entry and optional per-group hyper-parameters).
            The order must be deterministic (a list, not a set).
        defaults (dict): default hyper-parameters, used for groups that do not set them.

    Attributes:
        defaults (dict): as given.
        param_groups (list[dict]): one dict per group: ``"params"`` (list of tensors) and hyper-parameters.
        state (defaultdict[Tensor, dict]): per-parameter state (momentum buffers, moments, ``step``).

    Raises:
        TypeError: ``params`` is a single tensor, a set, or holds something other than tensors.
        ValueError: ``params`` is empty, a tensor is not a leaf, a group lacks a required
            hyper-parameter, or a parameter appears in more than one group.

    Subclasses implement ``step(closure=None)``; it is wrapped automatically so that the
    hooks of :meth:`register_step_pre_hook` / :meth:`register_step_post_hook` run around it.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ember_hooked", False):
            cls.step = _hooked_step(step)

    def __init__(self, params, defaults: dict) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks = _HookDict()
        self._optimizer_step_post_hooks = _HookDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()

        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but got "
                + _typename(params)
            )

        self.state = defaultdict(dict)
        self.param_groups: list[dict] = []

        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # ------------------------------------------------------------------ pickling / printing

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name in (
            "_optimizer_step_pre_hooks",
            "_optimizer_step_post_hooks",
        ):
            if name not in self.__dict__:
                setattr(self, name, _HookDict())
        for name in (
            "_optimizer_state_dict_pre_hooks",
            "_optimizer_state_dict_post_hooks",
            "_optimizer_load_state_dict_pre_hooks",
            "_optimizer_load_state_dict_post_hooks",
        ):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())

    def _upgrade_loaded_state(self, group_defaults, tensor_keys=("step",)):
        """After ``__setstate__``: fill group options that older state dicts lack, and turn per-parameter
        state saved as Python numbers (``step``) into 0-d tensors, as PyTorch 2.x keeps them.

        Args:
            group_defaults (dict): option name -> value for groups that lack it.
            tensor_keys (tuple[str]): per-parameter state entries kept as 0-d tensors.
        """
        for group in self.param_groups:
            for key, value in group_defaults.items():
                group.setdefault(key, value)
        for p_state in self.state.values():
            for key in tensor_keys:
                if key in p_state and not isinstance(p_state[key], Tensor):
                    p_state[key] = ember.tensor(float(p_state[key]), dtype=_get_scalar_dtype())

    def _gather_state(self, group, buffers, scalars=None, filled=None, step_dtype=None):
        """The group's parameters that have a gradient, their gradients and their per-parameter state.

        Every optimizer whose state appears at a parameter's first step creates it here, in this
        order: ``step`` (a 0-d tensor, 0), each of ``scalars`` (0-d tensors of their start values),
        each of ``buffers`` (zeros shaped and typed like the parameter), then each of ``filled``.

        Args:
            group (dict): one of ``self.param_groups``.
            buffers (list[str]): state entries shaped like the parameter, starting at zero.
            scalars (dict[str, float], optional): 0-d state entries and their start values.
            filled (dict[str, callable], optional): state entries made by ``make(param, group)``
                (Rprop's step sizes, which start at the learning rate).
            step_dtype (dtype, optional): of ``step`` and ``scalars``; default the scalar dtype
                (float32 for Adam's fused step, as PyTorch's).

        Returns:
            tuple: ``(params, grads, state)``, where ``state`` maps ``"step"`` and every name of
            ``scalars``, ``buffers`` and ``filled`` to the list of that entry, one per returned parameter.
        """
        scalars = scalars or {}
        filled = filled or {}
        dtype = step_dtype or _get_scalar_dtype()
        params, grads = [], []
        state = {name: [] for name in ("step", *scalars, *buffers, *filled)}
        lists = tuple(state.items())
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            params.append(p)
            grads.append(grad)
            p_state = self.state[p]
            if len(p_state) == 0:
                p_state["step"] = ember.tensor(0.0, dtype=dtype)
                for name, start in scalars.items():
                    p_state[name] = ember.tensor(start, dtype=dtype)
                for name in buffers:
                    p_state[name] = ember.zeros_like(p)
                for name, make in filled.items():
                    p_state[name] = make(p, group)
            for name, values in lists:
                values.append(p_state[name])
        return params, grads, state

    def __repr__(self) -> str:
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += "\n"
            format_string += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += f"    {key}: {group[key]}\n"
        format_string += ")"
        return format_string

    # ------------------------------------------------------------------ hooks

    def register_step_pre_hook(self, hook) -> RemovableHandle:
        """Register ``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)`` to run before ``step``.

        ``args`` includes the optimizer itself as its first element, as in PyTorch.

        Returns:
            RemovableHandle: ``handle.remove()`` unregisters the hook.
        """
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook) -> RemovableHandle:
        """Register ``hook(optimizer, args, kwargs) -> None`` to run after ``step``.

        Returns:
            RemovableHandle: ``handle.remove()`` unregisters the hook.
        """
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer) -> None``, called at the start of :meth:`state_dict`."""
        return self._add_ordered_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer, state_dict) -> state_dict or None``, called at the end of :meth:`state_dict`."""
        return self._add_ordered_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer, state_dict) -> state_dict or None``, called before loading."""
        return self._add_ordered_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer) -> None``, called after loading."""
        return self._add_ordered_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    @staticmethod
    def _add_ordered_hook(hooks, hook, prepend):
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    # ------------------------------------------------------------------ parameter groups

    def add_param_group(self, param_group: dict) -> None:
        """Add a parameter group, filling unspecified hyper-parameters from :attr:`defaults`.

        Useful for fine-tuning: unfreeze layers and add their parameters as training progresses.

        Args:
            param_group (dict): ``"params"`` (a tensor or an ordered iterable of tensors) and
                hyper-parameters specific to this group.

        Raises:
            TypeError: ``param_group`` is not a dict, ``params`` is a set or holds a non-tensor.
            ValueError: a non-leaf tensor, a missing required hyper-parameter, or a parameter
                already present in another group.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")

        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but "
                "the ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            param_group["params"] = list(params)

        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not self.defaults.get("differentiable", None) and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)

        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; "
                "in future, this will cause an error; "
                "see github.com/pytorch/pytorch/issues/40967 for more information",
                stacklevel=3,
            )

        param_ids = {id(p) for group in self.param_groups for p in group["params"]}
        if not param_ids.isdisjoint({id(p) for p in param_group["params"]}):
            raise ValueError("some parameters appear in more than one parameter group")

        self.param_groups.append(param_group)

    # ------------------------------------------------------------------ gradients

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors.

        Args:
            set_to_none (bool): set ``.grad`` to ``None`` (the default) instead of filling it
                with zeros; saves memory, and ``step`` skips parameters whose grad is ``None``.
        """
        span = _profiler_span(self, "zero_grad")
        if span is None:
            return self._zero_grad(set_to_none)
        with span:
            self._zero_grad(set_to_none)

    def _zero_grad(self, set_to_none):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        if p.grad.grad_fn is not None:
                            p.grad.detach_()
                        else:
                            p.grad.requires_grad_(False)
                        p.grad.zero_()

    def step(self, closure=None):
        """Perform a single optimization step; subclasses implement it.

        Args:
            closure (Callable, optional): re-evaluates the model and returns the loss.
        """
        raise NotImplementedError

    # ------------------------------------------------------------------ state dicts

    def state_dict(self) -> dict:
        """The optimizer's state as a dict, in PyTorch's layout.

        Returns:
            dict: ``{"state": {index: {name: value}}, "param_groups": [{..., "params": [index, ...]}]}``.
            Parameters are numbered by their order across the groups. Tensors in ``"state"`` are the
            optimizer's own (not copies), as in PyTorch; copy or save them before stepping again.
        """
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)

        param_mappings: dict[int, int] = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update(
                {id(p): i for i, p in enumerate(group["params"], start_index) if id(p) not in param_mappings}
            )
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}

        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    @staticmethod
    def _process_value_according_to_param_policy(param, value, param_id, param_groups, key=None):
        """Cast a loaded state tensor like PyTorch: to the parameter's dtype (floating) and device; ``step`` kept."""
        fused = False
        capturable = False
        for pg in param_groups:
            if param_id in pg["params"]:
                fused = pg.get("fused", False) or False
                capturable = pg.get("capturable", False) or False
                break
        if key == "step":
            if capturable or fused:
                return value.to(dtype=ember.float32, device=param.device)
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)

    def load_state_dict(self, state_dict: dict) -> None:
        """Load an optimizer state produced by :meth:`state_dict` (ember's or PyTorch's after conversion).

        Args:
            state_dict (dict): ``{"state": ..., "param_groups": ...}``; the groups must match this
                optimizer's in number and size. State tensors of floating parameters are cast to the
                parameter's dtype and device; ``step`` keeps its dtype.

        Raises:
            ValueError: the number of groups or a group's size differs.
        """
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result

        state_dict = state_dict.copy()
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])

        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        param_lens = (len(g["params"]) for g in groups)
        saved_lens = (len(g["params"]) for g in saved_groups)
        if any(p_len != s_len for p_len, s_len in zip(param_lens, saved_lens)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
            )

        id_map = dict(
            zip(
                chain.from_iterable(g["params"] for g in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
            )
        )

        def _cast(param, value, param_id=None, param_groups=None, key=None):
            if isinstance(value, Tensor):
                return Optimizer._process_value_according_to_param_policy(param, value, param_id, param_groups, key)
            if isinstance(value, dict):
                return {
                    k: _cast(param, v, param_id=param_id, param_groups=param_groups, key=k) for k, v in value.items()
                }
            if isinstance(value, (str, bytes)):
                return value
            if isinstance(value, Iterable):
                return type(value)(_cast(param, v, param_id=param_id, param_groups=param_groups) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = _cast(param, v, param_id=k, param_groups=state_dict["param_groups"])
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})

        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)
