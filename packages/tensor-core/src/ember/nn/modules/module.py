"""``ember.nn.Module``: the base class of every layer, PyTorch's ``torch.nn.Module``.

A module owns parameters (:class:`ember.nn.Parameter`), buffers (tensors that are state but not
parameters) and child modules, registered by assigning them as attributes. Names, state-dict keys,
hook signatures, error types and messages follow PyTorch, so a state dict from one loads into the
other once its arrays are converted.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from ..._hooks import RemovableHandle, check_hook_result, check_hook_results
from ..._tensor import Tensor
from ..parameter import Buffer, Parameter, is_lazy

__all__ = ["Module"]

# state_dict key (after the module's prefix) of what get_extra_state returns.
_EXTRA_STATE_KEY = "_extra_state"

# Per-instance hook tables. OrderedDicts because handles hold weak references to them and
# ``prepend=True`` moves an entry to the front.
_HOOK_TABLES = (
    "_backward_pre_hooks",
    "_backward_hooks",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What :meth:`Module.load_state_dict` returns: ``(missing_keys, unexpected_keys)``."""

    __slots__ = ()

    def __repr__(self):
        if self.missing_keys or self.unexpected_keys:
            return super().__repr__()
        return "<All keys matched successfully>"

    __str__ = __repr__


def _typename(obj):
    """``torch.typename``: ``'ember.FloatTensor'`` for tensors, the qualified class name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(type(obj), "__module__", "") or ""
    name = type(obj).__qualname__
    return name if module in ("builtins", "__builtin__") else f"{module}.{name}"


def _is_tensor_like(obj):
    return isinstance(obj, Tensor) or hasattr(type(obj), "__ember_function__")


def _indent_tail(text, spaces):
    """Indent every line of ``text`` but the first: a child's repr starts after ``"(name): "``."""
    return text.replace("\n", "\n" + " " * spaces)


def _dotted(prefix, name):
    """``"encoder.0"`` from ``"encoder"`` and ``"0"``; just ``name`` at the root."""
    return f"{prefix}.{name}" if prefix else name


def _forward_unimplemented(self, *input):
    """Define the computation performed at every call. Subclasses override it."""
    raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')


def _hook_functions():
    """The identity autograd Functions that carry full backward hooks (built on first use)."""
    global _HOOK_FUNCTIONS
    if _HOOK_FUNCTIONS is None:
        try:
            from ember.autograd import Function
        except ImportError as e:  # pragma: no cover - ember-autograd is installed with the tests
            raise RuntimeError("full backward hooks need ember-autograd: pip install ember-autograd") from e

        class _InputHook(Function):
            @staticmethod
            def forward(ctx, hook, *tensors):
                ctx.hook = hook
                return tuple(t.clone() for t in tensors)

            @staticmethod
            def backward(ctx, *grads):
                return (None, *ctx.hook._on_grad_input(grads))

        class _OutputHook(Function):
            @staticmethod
            def forward(ctx, hook, *tensors):
                ctx.hook = hook
                return tuple(t.clone() for t in tensors)

            @staticmethod
            def backward(ctx, *grads):
                return (None, *ctx.hook._on_grad_output(grads))

        _HOOK_FUNCTIONS = (_InputHook, _OutputHook)
    return _HOOK_FUNCTIONS


_HOOK_FUNCTIONS = None


def _route_through(function, owner, values, positions):
    """Replace ``values[i]`` for ``i`` in ``positions`` by the outputs of ``function.apply(owner, ...)``."""
    routed = function.apply(owner, *(values[i] for i in positions))
    values = list(values)
    for i, tensor in zip(positions, routed):
        values[i] = tensor
    return tuple(values)


class _BackwardHookRunner:
    """Runs one call's full backward (pre-)hooks.

    The module's tensor inputs and outputs pass through identity autograd Functions: the one on
    the outputs sees ``grad_output`` (and runs the pre-hooks), the one on the inputs sees
    ``grad_input`` and calls ``hook(module, grad_input, grad_output)``. When no input requires
    grad, the hooks run at the outputs with ``grad_input`` all ``None``.
    """

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = 0
        self.input_positions = None  # positions (among the tensor inputs) that pass through the Function

    @staticmethod
    def _tensor_positions(values):
        return [i for i, v in enumerate(values) if isinstance(v, Tensor)]

    def wrap_inputs(self, args):
        from ... import is_grad_enabled

        positions = self._tensor_positions(args)
        self.n_inputs = len(positions)
        grad_positions = [i for i in positions if args[i].requires_grad]
        if not grad_positions or not is_grad_enabled():
            return args
        self.input_positions = [positions.index(i) for i in grad_positions]
        return _route_through(_hook_functions()[0], self, args, grad_positions)

    def wrap_outputs(self, output):
        from ... import is_grad_enabled

        single = isinstance(output, Tensor)
        values = (output,) if single else output
        if not isinstance(values, tuple) or not is_grad_enabled():
            return output
        positions = [i for i in self._tensor_positions(values) if values[i].requires_grad]
        if not positions:
            return output
        values = _route_through(_hook_functions()[1], self, values, positions)
        return values[0] if single else values

    def _on_grad_output(self, grads):
        for hook in self.user_pre_hooks:
            replaced = hook(self.module, tuple(grads))
            if replaced is not None:
                replaced = tuple(replaced) if isinstance(replaced, (tuple, list)) else (replaced,)
                if len(replaced) != len(grads):
                    raise RuntimeError(
                        f"Backward pre hook returned an invalid number of grad_output, got {len(replaced)}, but "
                        f"expected {len(grads)}"
                    )
                grads = tuple(check_hook_results(hook, grads, replaced))
        self.grad_outputs = tuple(grads)
        if self.input_positions is None:  # no input requires grad: call the hooks now
            self._call_hooks_without_grad_input()
        return grads

    def _call_hooks_without_grad_input(self):
        grad_inputs = (None,) * max(self.n_inputs, 1)
        for hook in self.user_hooks:
            out = hook(self.module, grad_inputs, self.grad_outputs)
            if out is not None and any(g is not None for g in out):
                raise RuntimeError(
                    "Backward hook for Modules where no input requires gradient should always return None or None"
                    " for all gradients."
                )

    def _on_grad_input(self, grads):
        grad_inputs = [None] * self.n_inputs
        for pos, g in zip(self.input_positions, grads):
            grad_inputs[pos] = g
        grad_inputs = tuple(grad_inputs)
        for hook in self.user_hooks:
            replaced = hook(self.module, grad_inputs, self.grad_outputs)
            if replaced is None:
                continue
            replaced = tuple(replaced) if isinstance(replaced, (tuple, list)) else (replaced,)
            if len(replaced) != len(grad_inputs):
                raise RuntimeError(
                    f"Backward hook returned an invalid number of grad_input, got {len(replaced)}, but expected "
                    f"{len(grad_inputs)}"
                )
            # what replaces a gradient that flows on must keep its shape, dtype and device; the
            # values at inputs that do not require grad are dropped, as in PyTorch
            for pos in self.input_positions:
                check_hook_result(hook, grad_inputs[pos], replaced[pos])
            grad_inputs = replaced
        return tuple(grad_inputs[pos] for pos in self.input_positions)


class _ForwardCall:
    """One hooked call's arguments and output, updated in place by the hooks so that the
    ``always_call`` hooks run after an error see what the earlier hooks had changed."""

    __slots__ = ("args", "kwargs", "output", "always_called_done")

    def __init__(self, args, kwargs):
        self.args = args
        self.kwargs = kwargs
        self.output = None
        self.always_called_done = set()


def _check_member_name(kind, name, dot_message):
    """Raise for a parameter/buffer/module name that cannot be an attribute path component."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
    if "." in name:
        raise KeyError(dot_message)
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')


def _overrides(module, method_name):
    """Whether ``module``'s class replaces ``Module.<method_name>`` (the extra-state protocol is opt-in)."""
    return getattr(type(module), method_name) is not getattr(Module, method_name)


def _reject_init_arguments(module, args, kwargs):
    """Module.__init__ takes no arguments unless the class opts into cooperative ``super().__init__``."""
    if kwargs:
        raise TypeError(f"{type(module).__name__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if args:
        raise TypeError(
            f"{type(module).__name__}.__init__() takes 1 positional argument but {len(args) + 1} were given"
        )


def _fresh_module_state():
    """The per-instance attributes every Module starts with."""
    state = {
        "training": True,
        "_parameters": {},
        "_buffers": {},
        "_non_persistent_buffers_set": set(),
        "_modules": {},
        "_is_full_backward_hook": None,
    }
    state.update((table, OrderedDict()) for table in _HOOK_TABLES)
    return state


def _check_parameter_value(name, param):
    if not isinstance(param, Parameter):
        raise TypeError(
            f"cannot assign '{_typename(param)}' object to parameter '{name}' (ember.nn.Parameter or None required)"
        )
    if param.grad_fn:
        raise ValueError(
            f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
            f"parameters must be created explicitly. To express '{name}' "
            "as a function of another Tensor, compute the value in "
            "the forward() method."
        )


def _remove_name(name, *stores):
    """Forget ``name`` in each dict or set (an attribute changing kind, e.g. buffer -> parameter)."""
    for store in stores:
        if isinstance(store, set):
            store.discard(name)
        else:
            store.pop(name, None)


def _zero_gradient_in_place(grad):
    # Detach first: zeroing a gradient that is part of a graph (create_graph=True) must not record.
    if grad.grad_fn is not None:
        grad.detach_()
    else:
        grad.requires_grad_(False)
    grad.zero_()


def _convert_keeping_identity(param, fn):
    """Convert ``param`` (and its gradient) with ``fn`` while keeping the objects optimizers hold."""
    from ... import no_grad

    with no_grad():
        converted = fn(param)
    if converted is not param:
        param.data = converted
    if param.grad is None:
        return
    with no_grad():
        converted_grad = fn(param.grad)
    if converted_grad is not param.grad:
        param.grad.data = converted_grad


def _add_hook(table, hook, *, prepend=False, flags=()):
    """Put ``hook`` in ``table`` under a new handle's id. ``flags`` holds ``(side_table, marked)``
    pairs: side tables record which hooks take kwargs or are always called, and the handle removes
    the hook from them too."""
    handle = RemovableHandle(table, extra_dict=[side_table for side_table, _ in flags])
    table[handle.id] = hook
    for side_table, marked in flags:
        if marked:
            side_table[handle.id] = True
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


def _wrap_outputs_for_backward_hooks(runner, output):
    if not isinstance(output, (Tensor, tuple)):
        warnings.warn(
            "For backward hooks to be called, module output should be a Tensor or a tuple of Tensors"
            f" but received {type(output)}",
            stacklevel=4,
        )
    return runner.wrap_outputs(output)


def _positional_state_dict_args(args, destination, prefix, keep_vars):
    """Old-style ``state_dict(destination, prefix, keep_vars)``: still accepted, with a warning."""
    warnings.warn(
        "Positional args are being deprecated, use kwargs instead. Refer to "
        "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict"
        " for details.",
        FutureWarning,
        stacklevel=3,
    )
    # A keyword that was given explicitly wins over the positional value.
    values = [destination, prefix, keep_vars]
    still_default = (lambda v: v is None, lambda v: v == "", lambda v: v is False)
    for i, positional in enumerate(args[:3]):
        if still_default[i](values[i]):
            values[i] = positional
    return tuple(values)


def _as_assigned_value(current, value):
    """``load_state_dict(assign=True)``: the checkpoint tensor becomes the member, a Parameter where
    the member was one, with the member's ``requires_grad``."""
    if not isinstance(current, Parameter):
        return value
    if isinstance(value, Parameter):
        value.requires_grad_(current.requires_grad)
        return value
    return Parameter(value, requires_grad=current.requires_grad)


class _LoadReport:
    """What ``load_state_dict`` collects while walking the tree. The key lists are shared with the
    post hooks, which may edit them in place."""

    def __init__(self):
        self.missing_keys = []
        self.unexpected_keys = []
        self.error_msgs = []

    def strict_problems(self):
        problems = []
        if self.missing_keys:
            quoted = ", ".join(f'"{k}"' for k in self.missing_keys)
            problems.append(f"Missing key(s) in state_dict: {quoted}. ")
        if self.unexpected_keys:
            quoted = ", ".join(f'"{k}"' for k in self.unexpected_keys)
            problems.append(f"Unexpected key(s) in state_dict: {quoted}. ")
        return problems


def _load_subtree(module, state_dict, prefix, metadata, assign, report):
    """Load ``module`` then its children (each given only the keys under its prefix), then run the
    module's post hooks, which therefore see the keys of the whole subtree."""
    local_metadata = dict(metadata.get(prefix[:-1], {})) if metadata is not None else {}
    if assign:
        local_metadata["assign_to_params_buffers"] = assign
    module._load_from_state_dict(
        state_dict, prefix, local_metadata, True, report.missing_keys, report.unexpected_keys, report.error_msgs
    )
    for name, child in module._modules.items():
        if child is None:
            continue
        child_prefix = f"{prefix}{name}."
        child_state = {key: value for key, value in state_dict.items() if key.startswith(child_prefix)}
        _load_subtree(child, child_state, child_prefix, metadata, assign, report)

    keys = _IncompatibleKeys(report.missing_keys, report.unexpected_keys)
    for post_hook in module._load_state_dict_post_hooks.values():
        if post_hook(module, keys) is not None:
            raise AssertionError(
                "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                "expected to return new values, if incompatible_keys need to be modified, "
                "it should be done inplace."
            )


class Module:
    """Base class for all neural network modules; models subclass it.

    Assign :class:`~ember.nn.Parameter`\\ s, buffers and other modules as attributes in
    ``__init__`` (after calling ``super().__init__()``) and define :meth:`forward`::

        >>> import ember
        >>> class Scale(ember.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.weight = ember.nn.Parameter(ember.ones(2))
        ...     def forward(self, x):
        ...         return x * self.weight
        >>> [name for name, _ in Scale().named_parameters()]
        ['weight']

    Attributes:
        training (bool): whether the module is in training mode (see :meth:`train`).
    """

    dump_patches = False
    _version = 1
    training: bool
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if not self.call_super_init:
            _reject_init_arguments(self, args, kwargs)
        # object.__setattr__: our __setattr__ consults these stores, so they must exist first.
        for name, value in _fresh_module_state().items():
            object.__setattr__(self, name, value)
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    forward = _forward_unimplemented

    # -- registration ------------------------------------------------------------------------------

    def register_buffer(self, name, tensor, persistent=True):
        """Add a buffer: state that is not a parameter (``BatchNorm``'s ``running_mean``).

        Args:
            name (str): the attribute name.
            tensor (Tensor or None): the buffer; ``None`` registers a name that is skipped by
                conversions and the state dict.
            persistent (bool): whether the buffer is part of :meth:`state_dict`. Default: ``True``.

        Raises:
            AttributeError: before ``Module.__init__()`` ran.
            TypeError: for a non-string name or a non-tensor value.
            KeyError: for a name with ``"."``, an empty name, or one of another attribute.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_member_name("buffer", name, 'buffer name can\'t contain "."')
        self._refuse_taken_name(name, self._buffers)
        if tensor is not None and not _is_tensor_like(tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (ember Tensor or None required)"
            )
        self._buffers[name] = tensor
        self._set_buffer_persistence(name, persistent)

    def _set_buffer_persistence(self, name, persistent):
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def _refuse_taken_name(self, name, own_store):
        """A new member may not shadow another kind of attribute (a method, a plain attribute, a
        member of another store); re-registering under the same store replaces it."""
        if name not in own_store and hasattr(self, name):
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Add a parameter, accessible as the attribute ``name``.

        Args:
            name (str): the attribute name.
            param (Parameter or None): ``None`` registers a name skipped by conversions and the
                state dict.

        Raises:
            AttributeError: before ``Module.__init__()`` ran.
            TypeError: for a non-string name, or a value that is not a Parameter.
            KeyError: for a name with ``"."``, an empty name, or one of another attribute.
            ValueError: for a non-leaf tensor.
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_member_name("parameter", name, 'parameter name can\'t contain "."')
        self._refuse_taken_name(name, self._parameters)
        if param is not None:
            _check_parameter_value(name, param)
        self._parameters[name] = param

    def add_module(self, name, module):
        """Add a child module, accessible as the attribute ``name``.

        Raises:
            TypeError: if ``module`` is not a Module (or None), or ``name`` not a string.
            KeyError: for a name with ``"."``, an empty name, or one of another attribute.
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        _check_member_name("module", name, f'module name can\'t contain ".", got: {name}')
        self._refuse_taken_name(name, self._modules)
        self._modules[name] = module

    def register_module(self, name, module):
        """Alias for :meth:`add_module`."""
        self.add_module(name, module)

    def get_submodule(self, target):
        """The submodule at the dotted path ``target`` (``""`` is ``self``).

        Raises:
            AttributeError: naming the missing attribute, or one that is not a Module.
        """
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        """Put ``module`` at the dotted path ``target`` (``"encoder.0"``), replacing what is there.

        Args:
            target (str): the path; its parent must exist.
            module (Module): the new submodule.
            strict (bool): refuse to create a new attribute (the last name must exist already).

        Raises:
            ValueError: an empty ``target``, or ``module`` is not a Module.
            AttributeError: a missing parent or (with ``strict``) a missing last name; the last name
                holds something that is not a Module.
        """
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if hasattr(parent, name):
            if not isinstance(getattr(parent, name), Module):
                raise AttributeError("`" + name + "` is not an nn.Module")
        elif strict:
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        setattr(parent, name, module)

    def _resolve_attribute(self, target):
        """``(owner module, attribute name)`` for the dotted path ``target``; the attribute must exist."""
        owner_path, _, attr = target.rpartition(".")
        owner = self.get_submodule(owner_path)
        if not hasattr(owner, attr):
            raise AttributeError(owner._get_name() + " has no attribute `" + attr + "`")
        return owner, attr

    def get_parameter(self, target):
        """The parameter at the dotted path ``target`` (``"layer.weight"``).

        Raises:
            AttributeError: if the path does not lead to a Parameter.
        """
        owner, attr = self._resolve_attribute(target)
        value = getattr(owner, attr)
        if not isinstance(value, Parameter):
            raise AttributeError("`" + attr + "` is not an nn.Parameter")
        return value

    def get_buffer(self, target):
        """The buffer at the dotted path ``target`` (``"bn.running_mean"``).

        Raises:
            AttributeError: if the path does not lead to a buffer.
        """
        owner, attr = self._resolve_attribute(target)
        value = getattr(owner, attr)
        if attr not in owner._buffers:
            raise AttributeError("`" + attr + "` is not a buffer")
        return value

    def get_extra_state(self):
        """Extra state to put in the state dict; override together with :meth:`set_extra_state`."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug."
        )

    def set_extra_state(self, state):
        """Restore what :meth:`get_extra_state` returned; override together with it."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug."
        )

    # -- attribute protocol ------------------------------------------------------------------------

    def __getattr__(self, name):
        # Only called when ordinary lookup failed: members live in the three stores, not in __dict__.
        attributes = self.__dict__
        for store_name in ("_parameters", "_buffers", "_modules"):
            store = attributes.get(store_name)
            if store is not None and name in store:
                return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        # An existing member keeps its kind (assigning None to it clears it); a Parameter, Module or
        # Buffer value becomes a member of that kind; anything else is an ordinary attribute.
        attributes = self.__dict__
        if isinstance(value, Parameter) or name in attributes.get("_parameters", ()):
            self._assign_parameter(name, value)
        elif isinstance(value, Module) or name in attributes.get("_modules", ()):
            self._assign_module(name, value)
        elif isinstance(value, Buffer) or name in attributes.get("_buffers", ()):
            self._assign_buffer(name, value)
        else:
            super().__setattr__(name, value)

    def _assign_parameter(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameters before Module.__init__() call")
        if isinstance(value, Parameter):
            _remove_name(name, self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
        elif value is not None:
            raise TypeError(
                f"cannot assign '{_typename(value)}' as parameter '{name}' (ember.nn.Parameter or None expected)"
            )
        self.register_parameter(name, value)

    def _assign_module(self, name, value):
        if "_modules" not in self.__dict__:
            raise AttributeError("cannot assign module before Module.__init__() call")
        if isinstance(value, Module):
            _remove_name(name, self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
        elif value is not None:
            raise TypeError(
                f"cannot assign '{_typename(value)}' as child module '{name}' (ember.nn.Module or None expected)"
            )
        self._modules[name] = value

    def _assign_buffer(self, name, value):
        if value is not None and not _is_tensor_like(value):
            raise TypeError(
                f"cannot assign '{_typename(value)}' as buffer '{name}' "
                "(ember.nn.Buffer, ember.Tensor or None expected)"
            )
        if isinstance(value, Buffer):
            persistent = value.persistent
        else:  # a plain tensor assigned to an existing buffer keeps that buffer's persistence
            persistent = name not in self._non_persistent_buffers_set
        self.register_buffer(name, value, persistent)

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        super().__delattr__(name)

    def __dir__(self):
        names = itertools.chain(dir(type(self)), self.__dict__, self._parameters, self._modules, self._buffers)
        # Members such as Sequential's "0" are not identifiers, so completion should not offer them.
        return sorted(n for n in names if not n[0].isdigit())

    # -- iteration ---------------------------------------------------------------------------------

    def _iter_members(self, members_of, prefix, recurse, remove_duplicate):
        """Yield ``(dotted name, tensor)`` for ``members_of(module)`` over this module (and its
        descendants when ``recurse``), skipping ``None`` and, with ``remove_duplicate``, repeats."""
        owners = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        seen = set()
        for owner_name, owner in owners:
            for name, tensor in members_of(owner):
                if tensor is None or tensor in seen:
                    continue
                if remove_duplicate:
                    seen.add(tensor)
                yield _dotted(owner_name, name), tensor

    def parameters(self, recurse=True):
        """Iterator over the parameters (of submodules too when ``recurse``), each once."""
        return (param for _, param in self.named_parameters(recurse=recurse))

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Iterator over ``(name, parameter)``; names are dotted paths (``"0.weight"``).

        Args:
            prefix (str): prepended to every name.
            recurse (bool): include submodules' parameters.
            remove_duplicate (bool): yield a parameter shared by several modules once.
        """
        return self._iter_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """Iterator over the buffers (of submodules too when ``recurse``)."""
        return (buf for _, buf in self.named_buffers(recurse=recurse))

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """Iterator over ``(name, buffer)``, persistent or not; see :meth:`named_parameters`."""
        return self._iter_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self):
        """Iterator over the immediate child modules."""
        return (child for _, child in self.named_children())

    def named_children(self):
        """Iterator over ``(name, child)`` for the immediate children, each module once."""
        seen = set()
        for name, child in self._modules.items():
            if child is None or child in seen:
                continue
            seen.add(child)
            yield name, child

    def modules(self, remove_duplicate=True):
        """Iterator over all modules of the tree, ``self`` first (pre-order); a module reachable by
        several paths comes once unless ``remove_duplicate=False``."""
        return (module for _, module in self.named_modules(remove_duplicate=remove_duplicate))

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Iterator over ``(dotted name, module)`` of the tree, ``("", self)`` first (pre-order)."""
        visited = set() if memo is None else memo
        if self in visited:
            return
        if remove_duplicate:
            visited.add(self)
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(visited, _dotted(prefix, name), remove_duplicate)

    # -- modes and gradients -----------------------------------------------------------------------

    def train(self, mode=True):
        """Set training mode on this module and all its descendants; returns ``self``.

        Raises:
            ValueError: if ``mode`` is not a bool.
        """
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for child in self.children():
            child.train(mode)
        return self

    def eval(self):
        """``self.train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` of every parameter; returns ``self``."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters: to ``None`` (default) or to zeros in place."""
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                _zero_gradient_in_place(param.grad)

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first, as in PyTorch), then ``self``; returns ``self``."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # -- conversions -------------------------------------------------------------------------------

    def _apply(self, fn, recurse=True):
        """Apply ``fn`` to every parameter, gradient and buffer, keeping Parameter objects (``.data = ...``)."""
        if recurse:
            for child in self.children():
                child._apply(fn)
        for param in self._parameters.values():
            if param is not None:
                _convert_keeping_identity(param, fn)
        self._buffers.update((name, fn(buf)) for name, buf in self._buffers.items() if buf is not None)
        return self

    def to_empty(self, *, device, recurse=True):
        """Move parameters and buffers to ``device`` without copying their values (new, uninitialized
        storage of the same shapes and dtypes); for modules built on the ``"meta"`` device, which
        hold no values. Returns ``self``.

        Example:
            >>> from ember import nn
            >>> nn.Linear(2, 3, device="meta").to_empty(device="cpu").weight.device
            device(type='cpu')
        """
        from ... import empty_like

        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def to(self, *args, **kwargs):
        """Move and/or cast parameters and buffers in place; returns ``self``.

        Accepts ``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)`` and the
        keywords ``device``, ``dtype``, ``non_blocking``. A dtype converts only floating-point (and
        complex) tensors; integer buffers keep their dtype. Parameters stay the same objects.

        Raises:
            TypeError: for a dtype that is not floating point or complex.
        """
        from ..._tensor_methods import _parse_to

        dtype, device, non_blocking, _copy = _parse_to(args, dict(kwargs))
        casts_values = dtype is not None
        if casts_values and not dtype.is_floating_point and not dtype.is_complex:
            raise TypeError(
                f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}"
            )

        def convert(t):
            # integer and bool tensors (step counters, masks) keep their dtype
            cast = casts_values and (t.is_floating_point() or t.is_complex())
            return t.to(device=device, dtype=dtype if cast else None, non_blocking=non_blocking)

        return self._apply(convert)

    def cpu(self):
        """Move all parameters and buffers to the CPU; returns ``self``."""
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None):
        """Move all parameters and buffers to a CUDA device; returns ``self``."""
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type):
        """Cast all parameters and buffers to ``dst_type``; returns ``self``."""
        return self._apply(lambda t: t.type(dst_type))

    def float(self):
        """Cast floating-point parameters and buffers to float32; returns ``self``."""
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        """Cast floating-point parameters and buffers to float64; returns ``self``."""
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        """Cast floating-point parameters and buffers to float16; returns ``self``."""
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        """Cast floating-point parameters and buffers to bfloat16; returns ``self``."""
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    # -- hooks -------------------------------------------------------------------------------------

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Register ``hook(module, args) -> None or new args`` run before :meth:`forward`.

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs) -> None or (args, kwargs)``.
        A non-tuple return value is wrapped in a one-tuple.

        Args:
            prepend (bool): run before the hooks already registered.

        Returns:
            RemovableHandle: ``handle.remove()`` unregisters the hook.
        """
        flags = [(self._forward_pre_hooks_with_kwargs, with_kwargs)]
        return _add_hook(self._forward_pre_hooks, hook, prepend=prepend, flags=flags)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """Register ``hook(module, args, output) -> None or new output`` run after :meth:`forward`.

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs, output)``.

        Args:
            prepend (bool): run before the hooks already registered.
            always_call (bool): run the hook even when ``forward`` raised (the error is re-raised).

        Returns:
            RemovableHandle: ``handle.remove()`` unregisters the hook.
        """
        flags = [(self._forward_hooks_with_kwargs, with_kwargs), (self._forward_hooks_always_called, always_call)]
        return _add_hook(self._forward_hooks, hook, prepend=prepend, flags=flags)

    def register_full_backward_hook(self, hook, prepend=False):
        """Register ``hook(module, grad_input, grad_output) -> None or new grad_input``.

        Called when the gradients with respect to the module's tensor inputs are computed.
        ``grad_input`` and ``grad_output`` are tuples with one entry per tensor input/output
        (``None`` for inputs that do not require grad). Needs ember-autograd.

        Returns:
            RemovableHandle: ``handle.remove()`` unregisters the hook.
        """
        self._is_full_backward_hook = True
        return _add_hook(self._backward_hooks, hook, prepend=prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Register ``hook(module, grad_output) -> None or new grad_output``, run before the module's backward."""
        return _add_hook(self._backward_pre_hooks, hook, prepend=prepend)

    def _register_state_dict_hook(self, hook):
        """Register ``hook(module, state_dict, prefix, local_metadata) -> None or state_dict`` run after
        :meth:`state_dict` filled this module's entries."""
        return _add_hook(self._state_dict_hooks, hook)

    register_state_dict_post_hook = _register_state_dict_hook

    def register_state_dict_pre_hook(self, hook):
        """Register ``hook(module, prefix, keep_vars)`` run before :meth:`state_dict`."""
        return _add_hook(self._state_dict_pre_hooks, hook)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """Register ``hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` run before loading this module's entries (``module`` first when ``with_module``)."""
        return _add_hook(self._load_state_dict_pre_hooks, functools.partial(hook, self) if with_module else hook)

    def register_load_state_dict_pre_hook(self, hook):
        """Register ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` run before loading this module's entries."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """Register ``hook(module, incompatible_keys) -> None`` run after :meth:`load_state_dict`
        loaded this module; it may edit ``incompatible_keys`` in place (strict mode sees the edits)."""
        return _add_hook(self._load_state_dict_post_hooks, hook)

    # -- calling -----------------------------------------------------------------------------------

    # Set by Module.compile(): the compiled __call__ (ember-dynamo), run instead of the steps below.
    _compiled_call_impl = None

    def compile(self, *args, **kwargs):
        """Compile this module's calls in place with ``ember.compile`` (ember-dynamo).

        Unlike ``ember.compile(module)``, which returns a wrapper module, the module itself
        keeps its type and state-dict keys; later calls run the compiled ``__call__``.

        Args:
            *args, **kwargs: ``ember.compile``'s keyword arguments (``backend``, ``fullgraph``,
                ``dynamic``, ``mode``, ``options``).

        Raises:
            ember._extensions.MissingDistributionError: if ember-dynamo is not installed.
        """
        if args:
            raise TypeError(f"Module.compile() takes keyword arguments only, got {len(args)} positional")
        try:
            from ember._dynamo import compile_module_call
        except ImportError:
            from ember._extensions import require

            require("nn.Module.compile()", "ember-dynamo")
        self._compiled_call_impl = compile_module_call(self, **kwargs)

    def _call_impl(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks:
            return self._call_with_hooks(self.forward, _ForwardCall(args, kwargs))
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, forward, call):
        try:
            self._run_forward_pre_hooks(call)
            backward_hooks = self._backward_hook_runner()
            if backward_hooks is not None:
                call.args = backward_hooks.wrap_inputs(call.args)
            call.output = forward(*call.args, **call.kwargs)
            self._run_forward_hooks(call)
            if backward_hooks is not None:
                call.output = _wrap_outputs_for_backward_hooks(backward_hooks, call.output)
            return call.output
        except Exception:
            self._run_pending_always_called_hooks(call)
            raise

    def _run_forward_pre_hooks(self, call):
        for hook_id, hook in self._forward_pre_hooks.items():
            if hook_id not in self._forward_pre_hooks_with_kwargs:
                new_args = hook(self, call.args)
                if new_args is not None:
                    call.args = new_args if isinstance(new_args, tuple) else (new_args,)
                continue
            replacement = hook(self, call.args, call.kwargs)
            if replacement is None:
                continue
            if not (isinstance(replacement, tuple) and len(replacement) == 2):
                raise RuntimeError(
                    f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got {replacement}."
                )
            call.args, call.kwargs = replacement

    def _backward_hook_runner(self):
        if not (self._backward_hooks or self._backward_pre_hooks):
            return None
        return _BackwardHookRunner(self, list(self._backward_hooks.values()), list(self._backward_pre_hooks.values()))

    def _invoke_forward_hook(self, hook_id, hook, call):
        """Call one forward hook; a non-None result replaces the output."""
        if hook_id in self._forward_hooks_with_kwargs:
            new_output = hook(self, call.args, call.kwargs, call.output)
        else:
            new_output = hook(self, call.args, call.output)
        if new_output is not None:
            call.output = new_output

    def _run_forward_hooks(self, call):
        for hook_id, hook in self._forward_hooks.items():
            if hook_id in self._forward_hooks_always_called:
                call.always_called_done.add(hook_id)
            self._invoke_forward_hook(hook_id, hook, call)

    def _run_pending_always_called_hooks(self, call):
        """After an error, run the ``always_call`` forward hooks that have not run yet. Their own
        errors become warnings so that the original error is the one the caller sees."""
        for hook_id, hook in self._forward_hooks.items():
            if hook_id not in self._forward_hooks_always_called or hook_id in call.always_called_done:
                continue
            try:
                self._invoke_forward_hook(hook_id, hook, call)
            except Exception as e:
                warnings.warn(
                    "module forward hook with ``always_call=True`` raised an exception "
                    f"that was silenced as another error was raised in forward: {str(e)}",
                    stacklevel=4,
                )

    __call__ = _call_impl

    # -- state dict --------------------------------------------------------------------------------

    def _state_tensors(self):
        """This module's own state-dict entries as ``(name, tensor)``: parameters, then persistent
        buffers, skipping names registered as ``None``."""
        for name, param in self._parameters.items():
            if param is not None:
                yield name, param
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                yield name, buf

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """Put this module's parameters and persistent buffers (not its children's) in ``destination``."""
        for name, tensor in self._state_tensors():
            destination[prefix + name] = tensor if keep_vars else tensor.detach()
        if _overrides(self, "get_extra_state"):
            destination[prefix + _EXTRA_STATE_KEY] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict of parameters and persistent buffers, keyed by dotted names.

        Per module: its parameters, then its persistent buffers, then each child's entries
        recursively. Values are detached tensors sharing data with the module (unless ``keep_vars``).

        Args:
            destination (dict, optional): filled and returned instead of a new ``OrderedDict``.
            prefix (str): prepended to every key.
            keep_vars (bool): keep the Parameter objects (not detached).

        Returns:
            dict: ``{"0.weight": ..., "0.bias": ..., "1.running_mean": ...}``.
        """
        if args:
            destination, prefix, keep_vars = _positional_state_dict_args(args, destination, prefix, keep_vars)
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        # Per-module metadata (the class's _version) lets _load_from_state_dict upgrade old checkpoints.
        own_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = own_metadata

        for pre_hook in self._state_dict_pre_hooks.values():
            pre_hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination=destination, prefix=f"{prefix}{name}.", keep_vars=keep_vars)
        for post_hook in self._state_dict_hooks.values():
            replaced = post_hook(self, destination, prefix, own_metadata)
            if replaced is not None:
                destination = replaced
        return destination

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        """Load this module's own entries (not its children's) from ``state_dict``."""
        for pre_hook in self._load_state_dict_pre_hooks.values():
            pre_hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

        own = dict(self._state_tensors())
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, current in own.items():
            key = prefix + name
            if key in state_dict:
                self._load_one_tensor(name, current, state_dict[key], key, assign, error_msgs)
            elif strict:
                missing_keys.append(key)

        self._load_extra_state(state_dict, prefix, strict, missing_keys, unexpected_keys)
        if strict:
            unexpected_keys.extend(self._unknown_keys(state_dict, prefix, own))

    def _load_one_tensor(self, name, current, value, key, assign, error_msgs):
        """Copy (or, with ``assign``, set) one checkpoint tensor; problems go to ``error_msgs``."""
        from ... import no_grad

        if not _is_tensor_like(value):
            error_msgs.append(
                f'While copying the parameter named "{key}", '
                "expected ember.Tensor or Tensor-like object from checkpoint but "
                f"received {type(value)}"
            )
            return
        lazy = is_lazy(current)
        if not lazy:
            # Old checkpoints stored 0-d tensors with shape (1,).
            if len(current.shape) == 0 and tuple(value.shape) == (1,):
                value = value[0]
            if value.shape != current.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                    f"the shape in current model is {current.shape}."
                )
                return
        try:
            with no_grad():
                if assign:
                    setattr(self, name, _as_assigned_value(current, value))
                else:
                    if lazy:
                        current.materialize(value.shape)
                    current.copy_(value)
        except Exception as ex:
            error_msgs.append(
                f'While copying the parameter named "{key}", '
                f"whose dimensions in the model are {current.size()} and "
                f"whose dimensions in the checkpoint are {value.size()}, "
                f"an exception occurred : {ex.args}."
            )

    def _load_extra_state(self, state_dict, prefix, strict, missing_keys, unexpected_keys):
        key = prefix + _EXTRA_STATE_KEY
        if not _overrides(self, "set_extra_state"):
            if strict and key in state_dict:
                unexpected_keys.append(key)
        elif key in state_dict:
            self.set_extra_state(state_dict[key])
        elif strict:
            missing_keys.append(key)

    def _unknown_keys(self, state_dict, prefix, own):
        """Keys under ``prefix`` that name neither one of ``own`` entries nor a child module."""
        extra_state_key = prefix + _EXTRA_STATE_KEY
        for key in state_dict:
            if not key.startswith(prefix) or key == extra_state_key:
                continue
            first = key[len(prefix) :].split(".", 1)[0]
            if first not in self._modules and first not in own:
                yield key

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from ``state_dict`` into this module and its descendants.

        Values are copied in place under ``no_grad`` (``assign=False``) or assigned (``assign=True``:
        the module then holds the given tensors, wrapped as Parameters where needed).

        Args:
            state_dict (Mapping[str, Tensor]): as returned by :meth:`state_dict`.
            strict (bool): require the keys to match exactly. Default: ``True``.
            assign (bool): assign instead of copying. Default: ``False``.

        Returns:
            _IncompatibleKeys: the namedtuple ``(missing_keys, unexpected_keys)``.

        Raises:
            TypeError: if ``state_dict`` is not a mapping.
            RuntimeError: ``"Error(s) in loading state_dict for Net:"`` listing missing and unexpected
                keys (strict) and size mismatches.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")

        report = _LoadReport()
        metadata = getattr(state_dict, "_metadata", None)
        root_state = OrderedDict(state_dict)
        if metadata is not None:
            root_state._metadata = metadata  # visible to load pre-hooks, as in a state_dict() result
        _load_subtree(self, root_state, "", metadata, assign, report)
        problems = report.strict_problems() if strict else []
        problems += report.error_msgs
        if problems:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(problems))
        return _IncompatibleKeys(report.missing_keys, report.unexpected_keys)

    # -- printing ----------------------------------------------------------------------------------

    def _get_name(self):
        return self.__class__.__name__

    def extra_repr(self):
        """The module-specific part of ``repr`` (``"in_features=2, out_features=3, bias=True"``).

        Override it in subclasses; one line or several.
        """
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        own_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): {_indent_tail(repr(child), 2)}" for name, child in self._modules.items()]
        if not child_lines and len(own_lines) <= 1:
            return f"{self._get_name()}({''.join(own_lines)})"
        # One entry per line, indented under the class name.
        body = "".join(f"\n  {line}" for line in own_lines + child_lines)
        return f"{self._get_name()}({body}\n)"
