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

from ..._hooks import RemovableHandle
from ..._tensor import Tensor
from ..parameter import Buffer, Parameter, is_lazy

__all__ = ["Module"]

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What :meth:`Module.load_state_dict` returns: ``(missing_keys, unexpected_keys)``."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

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


def _addindent(s_, num_spaces):
    s = s_.split("\n")
    if len(s) == 1:
        return s_
    first = s.pop(0)
    s = [(num_spaces * " ") + line for line in s]
    return first + "\n" + "\n".join(s)


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


class BackwardHook:
    """Runs a module's full backward (pre-)hooks, PyTorch's ``torch.utils.hooks.BackwardHook``.

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

    def setup_input_hook(self, args):
        positions = self._tensor_positions(args)
        self.n_inputs = len(positions)
        from ... import is_grad_enabled

        grad_positions = [i for i in positions if args[i].requires_grad]
        if not grad_positions or not is_grad_enabled():
            return args
        self.input_positions = [positions.index(i) for i in grad_positions]
        outs = _hook_functions()[0].apply(self, *(args[i] for i in grad_positions))
        args = list(args)
        for i, o in zip(grad_positions, outs):
            args[i] = o
        return tuple(args)

    def setup_output_hook(self, result):
        from ... import is_grad_enabled

        single = isinstance(result, Tensor)
        values = (result,) if single else result
        if not isinstance(values, tuple) or not is_grad_enabled():
            return result
        positions = [i for i in self._tensor_positions(values) if values[i].requires_grad]
        if not positions:
            return result
        outs = _hook_functions()[1].apply(self, *(values[i] for i in positions))
        values = list(values)
        for i, o in zip(positions, outs):
            values[i] = o
        return values[0] if single else tuple(values)

    def _on_grad_output(self, grads):
        for hook in self.user_pre_hooks:
            result = hook(self.module, tuple(grads))
            if result is not None:
                grads = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        self.grad_outputs = tuple(grads)
        if self.input_positions is None:  # no input requires grad: call the hooks now
            grad_inputs = (None,) * max(self.n_inputs, 1)
            for hook in self.user_hooks:
                out = hook(self.module, grad_inputs, self.grad_outputs)
                if out is not None and not all(g is None for g in out):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should always return None or None"
                        " for all gradients."
                    )
        return grads

    def _on_grad_input(self, grads):
        full = [None] * self.n_inputs
        for pos, g in zip(self.input_positions, grads):
            full[pos] = g
        full = tuple(full)
        for hook in self.user_hooks:
            out = hook(self.module, full, self.grad_outputs)
            if out is not None:
                out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
                if len(out) != len(full):
                    raise RuntimeError(
                        f"Backward hook returned an invalid number of grad_input, got {len(out)}, but expected "
                        f"{len(full)}"
                    )
                full = out
        return tuple(full[pos] for pos in self.input_positions)


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
        if self.call_super_init is False and bool(kwargs):
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'"
            )
        if self.call_super_init is False and bool(args):
            raise TypeError(
                f"{type(self).__name__}.__init__() takes 1 positional argument but {len(args) + 1} were given"
            )
        setattr_ = super().__setattr__
        setattr_("training", True)
        setattr_("_parameters", {})
        setattr_("_buffers", {})
        setattr_("_non_persistent_buffers_set", set())
        setattr_("_backward_pre_hooks", OrderedDict())
        setattr_("_backward_hooks", OrderedDict())
        setattr_("_is_full_backward_hook", None)
        setattr_("_forward_hooks", OrderedDict())
        setattr_("_forward_hooks_with_kwargs", OrderedDict())
        setattr_("_forward_hooks_always_called", OrderedDict())
        setattr_("_forward_pre_hooks", OrderedDict())
        setattr_("_forward_pre_hooks_with_kwargs", OrderedDict())
        setattr_("_state_dict_hooks", OrderedDict())
        setattr_("_state_dict_pre_hooks", OrderedDict())
        setattr_("_load_state_dict_pre_hooks", OrderedDict())
        setattr_("_load_state_dict_post_hooks", OrderedDict())
        setattr_("_modules", {})
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
        elif not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {_typename(name)}")
        elif "." in name:
            raise KeyError('buffer name can\'t contain "."')
        elif name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        elif hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        elif tensor is not None and not _is_tensor_like(tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (ember Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

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
        elif not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {_typename(name)}")
        elif "." in name:
            raise KeyError('parameter name can\'t contain "."')
        elif name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        elif hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")

        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' (ember.nn.Parameter or None required)"
            )
        elif param.grad_fn:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                f"parameters must be created explicitly. To express '{name}' "
                "as a function of another Tensor, compute the value in "
                "the forward() method."
            )
        else:
            self._parameters[name] = param

    def add_module(self, name, module):
        """Add a child module, accessible as the attribute ``name``.

        Raises:
            TypeError: if ``module`` is not a Module (or None), or ``name`` not a string.
            KeyError: for a name with ``"."``, an empty name, or one of another attribute.
        """
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        elif not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        elif hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        elif "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        elif name == "":
            raise KeyError('module name can\'t be empty string ""')
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

    def get_parameter(self, target):
        """The parameter at the dotted path ``target`` (``"layer.weight"``).

        Raises:
            AttributeError: if the path does not lead to a Parameter.
        """
        module_path, _, param_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, param_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(mod, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at the dotted path ``target`` (``"bn.running_mean"``).

        Raises:
            AttributeError: if the path does not lead to a buffer.
        """
        module_path, _, buffer_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, buffer_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + buffer_name + "`")
        buffer = getattr(mod, buffer_name)
        if buffer_name not in mod._buffers:
            raise AttributeError("`" + buffer_name + "` is not a buffer")
        return buffer

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
        d = self.__dict__
        if "_parameters" in d:
            if name in d["_parameters"]:
                return d["_parameters"][name]
        if "_buffers" in d:
            if name in d["_buffers"]:
                return d["_buffers"][name]
        if "_modules" in d:
            if name in d["_modules"]:
                return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        def remove_from(*dicts_or_sets):
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' (ember.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
        else:
            modules = self.__dict__.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(
                        f"cannot assign '{_typename(value)}' as child module '{name}' "
                        "(ember.nn.Module or None expected)"
                    )
                modules[name] = value
            else:
                buffers = self.__dict__.get("_buffers")
                if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                    if value is not None and not _is_tensor_like(value):
                        raise TypeError(
                            f"cannot assign '{_typename(value)}' as buffer '{name}' "
                            "(ember.nn.Buffer, ember.Tensor or None expected)"
                        )
                    if isinstance(value, Buffer):
                        persistent = value.persistent
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    self.register_buffer(name, value, persistent)
                else:
                    super().__setattr__(name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            super().__delattr__(name)

    def __dir__(self):
        module_attrs = dir(self.__class__)
        attrs = list(self.__dict__.keys())
        parameters = list(self._parameters.keys())
        modules = list(self._modules.keys())
        buffers = list(self._buffers.keys())
        keys = module_attrs + attrs + parameters + modules + buffers
        keys = [key for key in keys if not key[0].isdigit()]  # Python identifiers only
        return sorted(keys)

    # -- iteration ---------------------------------------------------------------------------------

    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or v in memo:
                    continue
                if remove_duplicate:
                    memo.add(v)
                name = module_prefix + ("." if module_prefix else "") + k
                yield name, v

    def parameters(self, recurse=True):
        """Iterator over the parameters (of submodules too when ``recurse``), each once."""
        for _name, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Iterator over ``(name, parameter)``; names are dotted paths (``"0.weight"``).

        Args:
            prefix (str): prepended to every name.
            recurse (bool): include submodules' parameters.
            remove_duplicate (bool): yield a parameter shared by several modules once.
        """
        yield from self._named_members(
            lambda module: module._parameters.items(), prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate
        )

    def buffers(self, recurse=True):
        """Iterator over the buffers (of submodules too when ``recurse``)."""
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """Iterator over ``(name, buffer)``, persistent or not; see :meth:`named_parameters`."""
        yield from self._named_members(
            lambda module: module._buffers.items(), prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate
        )

    def children(self):
        """Iterator over the immediate child modules."""
        for _name, module in self.named_children():
            yield module

    def named_children(self):
        """Iterator over ``(name, child)`` for the immediate children, each module once."""
        memo = set()
        for name, module in self._modules.items():
            if module is not None and module not in memo:
                memo.add(module)
                yield name, module

    def modules(self, remove_duplicate=True):
        """Iterator over all modules of the tree, ``self`` first (pre-order); a module reachable by
        several paths comes once unless ``remove_duplicate=False``."""
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Iterator over ``(dotted name, module)`` of the tree, ``("", self)`` first (pre-order)."""
        if memo is None:
            memo = set()
        if self not in memo:
            if remove_duplicate:
                memo.add(self)
            yield prefix, self
            for name, module in self._modules.items():
                if module is None:
                    continue
                submodule_prefix = prefix + ("." if prefix else "") + name
                yield from module.named_modules(memo, submodule_prefix, remove_duplicate)

    # -- modes and gradients -----------------------------------------------------------------------

    def train(self, mode=True):
        """Set training mode on this module and all its descendants; returns ``self``.

        Raises:
            ValueError: if ``mode`` is not a bool.
        """
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        """``self.train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` of every parameter; returns ``self``."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters: to ``None`` (default) or to zeros in place."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first, as in PyTorch), then ``self``; returns ``self``."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- conversions -------------------------------------------------------------------------------

    def _apply(self, fn, recurse=True):
        """Apply ``fn`` to every parameter, gradient and buffer, keeping Parameter objects (``.data = ...``)."""
        from ... import no_grad

        if recurse:
            for module in self.children():
                module._apply(fn)

        for param in self._parameters.values():
            if param is None:
                continue
            with no_grad():
                param_applied = fn(param)
            if param_applied is not param:
                param.data = param_applied
            if param.grad is not None:
                with no_grad():
                    grad_applied = fn(param.grad)
                if grad_applied is not param.grad:
                    param.grad.data = grad_applied

        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
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
        from ... import empty

        # ember.empty rather than empty_like: empty_like(meta_tensor, device=...) stays on meta today.
        return self._apply(lambda t: empty(tuple(t.shape), dtype=t.dtype, device=device), recurse=recurse)

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
        if dtype is not None:
            if not (dtype.is_floating_point or dtype.is_complex):
                raise TypeError(
                    f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}"
                )

        def convert(t):
            target = {} if device is None else {"device": device}
            if dtype is not None and (t.is_floating_point() or t.is_complex()):
                target["dtype"] = dtype
            return t.to(non_blocking=non_blocking, **target)

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
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """Register ``hook(module, args, output) -> None or new output`` run after :meth:`forward`.

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs, output)``.

        Args:
            prepend (bool): run before the hooks already registered.
            always_call (bool): run the hook even when ``forward`` raised (the error is re-raised).

        Returns:
            RemovableHandle: ``handle.remove()`` unregisters the hook.
        """
        handle = RemovableHandle(
            self._forward_hooks, extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called]
        )
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """Register ``hook(module, grad_input, grad_output) -> None or new grad_input``.

        Called when the gradients with respect to the module's tensor inputs are computed.
        ``grad_input`` and ``grad_output`` are tuples with one entry per tensor input/output
        (``None`` for inputs that do not require grad). Needs ember-autograd.

        Returns:
            RemovableHandle: ``handle.remove()`` unregisters the hook.
        """
        self._is_full_backward_hook = True
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Register ``hook(module, grad_output) -> None or new grad_output``, run before the module's backward."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def _register_state_dict_hook(self, hook):
        """Register ``hook(module, state_dict, prefix, local_metadata) -> None or state_dict`` run after
        :meth:`state_dict` filled this module's entries."""
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    register_state_dict_post_hook = _register_state_dict_hook

    def register_state_dict_pre_hook(self, hook):
        """Register ``hook(module, prefix, keep_vars)`` run before :meth:`state_dict`."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """Register ``hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` run before loading this module's entries (``module`` first when ``with_module``)."""
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = functools.partial(hook, self) if with_module else hook
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """Register ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` run before loading this module's entries."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """Register ``hook(module, incompatible_keys) -> None`` run after :meth:`load_state_dict`
        loaded this module; it may edit ``incompatible_keys`` in place (strict mode sees the edits)."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    # -- calling -----------------------------------------------------------------------------------

    def _call_impl(self, *args, **kwargs):
        forward_call = self.forward
        if not (self._backward_hooks or self._backward_pre_hooks or self._forward_hooks or self._forward_pre_hooks):
            return forward_call(*args, **kwargs)

        called_always_called_hooks = set()
        result = None
        try:
            for hook_id, hook in self._forward_pre_hooks.items():
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    args_kwargs_result = hook(self, args, kwargs)
                    if args_kwargs_result is not None:
                        if isinstance(args_kwargs_result, tuple) and len(args_kwargs_result) == 2:
                            args, kwargs = args_kwargs_result
                        else:
                            raise RuntimeError(
                                "forward pre-hook must return None or a tuple "
                                f"of (new_args, new_kwargs), but got {args_kwargs_result}."
                            )
                else:
                    args_result = hook(self, args)
                    if args_result is not None:
                        if not isinstance(args_result, tuple):
                            args_result = (args_result,)
                        args = args_result

            bw_hook = None
            if self._backward_hooks or self._backward_pre_hooks:
                bw_hook = BackwardHook(
                    self, list(self._backward_hooks.values()), list(self._backward_pre_hooks.values())
                )
                args = bw_hook.setup_input_hook(args)

            result = forward_call(*args, **kwargs)
            for hook_id, hook in self._forward_hooks.items():
                if hook_id in self._forward_hooks_always_called:
                    called_always_called_hooks.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    hook_result = hook(self, args, kwargs, result)
                else:
                    hook_result = hook(self, args, result)
                if hook_result is not None:
                    result = hook_result

            if bw_hook is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn(
                        "For backward hooks to be called, module output should be a Tensor or a tuple of Tensors"
                        f" but received {type(result)}",
                        stacklevel=2,
                    )
                result = bw_hook.setup_output_hook(result)
            return result
        except Exception:
            for hook_id, hook in self._forward_hooks.items():
                if hook_id in self._forward_hooks_always_called and hook_id not in called_always_called_hooks:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook_result = hook(self, args, kwargs, result)
                        else:
                            hook_result = hook(self, args, result)
                        if hook_result is not None:
                            result = hook_result
                    except Exception as e:
                        warnings.warn(
                            "forward hook with ``always_call=True`` raised an exception "
                            f"that was silenced as another error was raised in forward: {str(e)}",
                            stacklevel=2,
                        )
                        continue
            raise

    __call__ = _call_impl

    # -- state dict --------------------------------------------------------------------------------

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """Put this module's parameters and persistent buffers (not its children's) in ``destination``."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if getattr(self.__class__, "get_extra_state", Module.get_extra_state) is not Module.get_extra_state:
            destination[extra_state_key] = self.get_extra_state()

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
        if len(args) > 0:
            # positional (destination, prefix, keep_vars) as in old PyTorch; deprecated there too
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead. Refer to "
                "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict"
                " for details.",
                FutureWarning,
                stacklevel=2,
            )
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]

        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()

        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata

        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            hook_result = hook(self, destination, prefix, local_metadata)
            if hook_result is not None:
                destination = hook_result
        return destination

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        """Load this module's own entries (not its children's) from ``state_dict``."""
        from ... import no_grad

        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_name_params = itertools.chain(self._parameters.items(), persistent_buffers.items())
        local_state = {k: v for k, v in local_name_params if v is not None}
        assign_to_params_buffers = local_metadata.get("assign_to_params_buffers", False)

        for name, param in local_state.items():
            key = prefix + name
            if key in state_dict:
                input_param = state_dict[key]
                if not _is_tensor_like(input_param):
                    error_msgs.append(
                        f'While copying the parameter named "{key}", '
                        "expected ember.Tensor or Tensor-like object from checkpoint but "
                        f"received {type(input_param)}"
                    )
                    continue

                is_param_lazy = is_lazy(param)
                if (
                    not is_param_lazy
                    and len(param.shape) == 0
                    and len(input_param.shape) == 1
                    and input_param.shape[0] == 1
                ):
                    input_param = input_param[0]

                if not is_param_lazy and input_param.shape != param.shape:
                    error_msgs.append(
                        f"size mismatch for {key}: copying a param with shape {input_param.shape} from checkpoint, "
                        f"the shape in current model is {param.shape}."
                    )
                    continue

                try:
                    with no_grad():
                        if assign_to_params_buffers:
                            if isinstance(param, Parameter):
                                if not isinstance(input_param, Parameter):
                                    input_param = Parameter(input_param, requires_grad=param.requires_grad)
                                else:
                                    input_param.requires_grad_(param.requires_grad)
                            setattr(self, name, input_param)
                        elif is_param_lazy:
                            param.materialize(input_param.shape)
                            param.copy_(input_param)
                        else:
                            param.copy_(input_param)
                except Exception as ex:
                    error_msgs.append(
                        f'While copying the parameter named "{key}", '
                        f"whose dimensions in the model are {param.size()} and "
                        f"whose dimensions in the checkpoint are {input_param.size()}, "
                        f"an exception occurred : {ex.args}."
                    )
            elif strict:
                missing_keys.append(key)

        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if getattr(self.__class__, "set_extra_state", Module.set_extra_state) is not Module.set_extra_state:
            if extra_state_key in state_dict:
                self.set_extra_state(state_dict[extra_state_key])
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and (extra_state_key in state_dict):
            unexpected_keys.append(extra_state_key)

        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_state_key:
                    input_name = key[len(prefix) :].split(".", 1)
                    if input_name[0] not in self._modules and input_name[0] not in local_state:
                        unexpected_keys.append(key)

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

        missing_keys = []
        unexpected_keys = []
        error_msgs = []

        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(
                local_state_dict, prefix, local_metadata, True, missing_keys, unexpected_keys, error_msgs
            )
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                    load(child, child_state_dict, child_prefix)

            incompatible_keys = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                out = hook(module, incompatible_keys)
                if out is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be modified, "
                        "it should be done inplace."
                    )

        load(self, state_dict)

        if strict:
            if len(unexpected_keys) > 0:
                error_msgs.insert(
                    0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected_keys))
                )
            if len(missing_keys) > 0:
                error_msgs.insert(
                    0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing_keys))
                )

        if len(error_msgs) > 0:
            raise RuntimeError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(self.__class__.__name__, "\n\t".join(error_msgs))
            )
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # -- printing ----------------------------------------------------------------------------------

    def _get_name(self):
        return self.__class__.__name__

    def extra_repr(self):
        """The module-specific part of ``repr`` (``"in_features=2, out_features=3, bias=True"``).

        Override it in subclasses; one line or several.
        """
        return ""

    def __repr__(self):
        extra_lines = []
        extra_repr = self.extra_repr()
        if extra_repr:
            extra_lines = extra_repr.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines

        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        main_str += ")"
        return main_str
