"""Parametrizations of module tensors, PyTorch's ``torch.nn.utils.parametrize``.

:func:`register_parametrization` replaces a parameter or buffer ``module.<name>`` by a computed
value: the original tensor moves to ``module.parametrizations.<name>.original`` (a
:class:`ParametrizationList`), and reading ``module.<name>`` runs the parametrization on it. As in
PyTorch, the module's class is swapped for a dynamically created subclass
``Parametrized<ClassName>`` that carries a property per parametrized tensor, so state-dict keys are
``parametrizations.<name>.original`` (``original0``, ``original1``, ... when ``right_inverse``
returns several tensors), the same as PyTorch's.

Reference: Lezcano-Casado, "Trivializations for Gradient-Based Optimization on Manifolds", NeurIPS 2019.
"""

from __future__ import annotations

import collections.abc
import copyreg
from contextlib import contextmanager
from copy import deepcopy

from ..._tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = [
    "cached",
    "ParametrizationList",
    "register_parametrization",
    "is_parametrized",
    "remove_parametrizations",
    "type_before_parametrizations",
    "transfer_parametrizations_and_params",
]

_cache_enabled = 0
_cache: dict = {}


@contextmanager
def cached():
    """Cache the value of every parametrized tensor computed inside this context manager.

    Inside the context, the first access to ``module.<name>`` computes the parametrization and later
    accesses return the same tensor (useful when a parametrized weight is used several times in one
    forward pass, as in RNNs). The cache is emptied when the outermost context exits.

    Example:
        >>> import ember
        >>> from ember.nn.utils import parametrize
        >>> with parametrize.cached():
        ...     pass
    """
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module, name, X):
    if isinstance(X, Parameter):
        module.register_parameter(name, X)
    else:
        module.register_buffer(name, X)


def _maybe_set(dest, src):
    """Make ``dest`` hold ``src``'s values and shape, keeping the ``dest`` object (PyTorch's ``dest.set_(src)``)."""
    dest.data = src.detach()


class ParametrizationList(ModuleList):
    """The list of parametrizations of one tensor, stored as ``module.parametrizations.<name>``.

    Created by :func:`register_parametrization`; not meant to be built by hand. The unparametrized
    tensor is registered here as ``original`` (a parameter or buffer, like the tensor it replaces),
    or as ``original0``, ``original1``, ... if the first parametrization's ``right_inverse`` returns a
    sequence of tensors. Calling the list (``forward()``) evaluates the parametrized tensor.

    Args:
        modules (sequence of Module): the parametrizations, applied first to last.
        original (Tensor or Parameter): the tensor being parametrized; kept as the same object and
            set to ``right_inverse(original)`` when the parametrizations define ``right_inverse``.
        unsafe (bool): skip the check that the parametrization keeps dtype and shape. Default: ``False``.

    Raises:
        ValueError: if ``modules`` is empty, ``right_inverse`` returns something that is not a tensor
            or a sequence of tensors, or (unless ``unsafe``) the parametrization changes dtype or shape.
    """

    def __init__(self, modules, original, unsafe=False):
        from ... import no_grad

        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe

        original_shape = original.shape
        original_dtype = original.dtype

        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass

        if not isinstance(new, Tensor) and not isinstance(new, collections.abc.Sequence):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )

        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)

        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\n"
                    f"right_inverse(original).dtype: {new.dtype}"
                )
            if original.device != new.device:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the device.\n"
                    f"original.device: {original.device}\n"
                    f"right_inverse(original).device: {new.device}"
                )
            if new is not original:
                with no_grad():
                    _maybe_set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, originali in enumerate(new):
                if not isinstance(originali, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                        f"Got element {i} of the sequence with type {type(originali).__name__}."
                    )
                if isinstance(original, Parameter):
                    originali = Parameter(originali, original.requires_grad)
                originali.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", originali)

        if not self.unsafe:
            Z = self()
            if not isinstance(Z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(Z).__name__}.")
            if Z.dtype != original_dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, unless `unsafe` flag is "
                    "enabled.\n"
                    f"unparametrized dtype: {original_dtype}\n"
                    f"parametrized dtype: {Z.dtype}"
                )
            if Z.shape != original_shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, unless `unsafe` flag is "
                    "enabled.\n"
                    f"unparametrized shape: {original_shape}\n"
                    f"parametrized shape: {Z.shape}"
                )

    def right_inverse(self, value):
        """Set the original tensor(s) so that the parametrization evaluates to ``value``.

        Calls ``right_inverse`` of each parametrization, last to first, and writes the result into
        ``original`` (or ``original0``, ``original1``, ...) in place, under ``no_grad``.

        Args:
            value (Tensor): the value the parametrized tensor should take.

        Raises:
            RuntimeError: if a parametrization does not implement ``right_inverse``.
            ValueError: if the result does not match the originals in type, number or dtype.
        """
        from ... import no_grad

        with no_grad():
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
                else:
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                        f"while `original` has dtype {self.original.dtype}"
                    )
                _maybe_set(self.original, value)
            else:
                if not isinstance(value, collections.abc.Sequence):
                    raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
                if len(value) != self.ntensors:
                    raise ValueError(
                        f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                        f"Got a sequence of length {len(value)}."
                    )
                for i, tensor in enumerate(value):
                    original_i = getattr(self, f"original{i}")
                    if not isinstance(tensor, Tensor):
                        raise ValueError(
                            "'right_inverse' must return a sequence of tensors or reference-type opaques. "
                            f"Got element {i} of type {type(tensor).__name__}."
                        )
                    if original_i.dtype != tensor.dtype:
                        raise ValueError(
                            f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} "
                            f"while `original{i}` has dtype {original_i.dtype}"
                        )
                    _maybe_set(original_i, tensor)

    def forward(self):
        """Evaluate the parametrized tensor: the first module on the original(s), then each following one."""
        if self.is_tensor:
            x = self[0](self.original)
        else:
            originals = (getattr(self, f"original{i}") for i in range(self.ntensors))
            x = self[0](*originals)
        curr_idx = 1
        while hasattr(self, str(curr_idx)):
            x = self[curr_idx](x)
            curr_idx += 1
        return x


def _inject_new_class(module):
    """Swap ``module.__class__`` for a fresh subclass ``Parametrized<Class>`` that can hold the properties."""
    cls = module.__class__

    def default_deepcopy(self, memo):
        obj = memo.get(id(self), None)
        if obj is not None:
            return obj
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__dict__ = deepcopy(self.__dict__, memo)
        for slot in copyreg._slotnames(self.__class__):
            if hasattr(self, slot):
                setattr(replica, slot, deepcopy(getattr(self, slot), memo))
        return replica

    def getstate(self):
        raise RuntimeError(
            "Serialization of parametrized modules is only supported through state_dict(). See:\n"
            "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
            "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training"
        )

    dct = {"__getstate__": getstate}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), dct)


def _inject_property(module, tensor_name):
    """Add to ``module``'s (parametrized) class a property ``tensor_name`` that evaluates its parametrization."""
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_cached_parametrization(parametrization):
        key = (id(module), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = parametrization()
            _cache[key] = tensor
        return tensor

    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if _cache_enabled:
            return get_cached_parametrization(parametrization)
        return parametrization()

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Register a parametrization on the parameter or buffer ``module.<tensor_name>``.

    Afterwards ``module.<tensor_name>`` is computed as ``parametrization(original)`` on every access
    (or once per :func:`cached` context), the original tensor lives in
    ``module.parametrizations[tensor_name].original`` (the same object, so optimizers built before
    keep working, and gradients flow into it), and assigning ``module.<tensor_name> = value`` calls
    ``right_inverse``. If ``parametrization`` has a ``right_inverse(X)`` method it initialises the
    original with it; when that returns a sequence of tensors they are stored as ``original0``,
    ``original1``, ... and passed to ``forward`` as separate arguments. Registering a second
    parametrization on the same tensor appends it (applied after the first).

    Args:
        module (Module): the module owning the tensor; its class is swapped for ``Parametrized<Class>``.
        tensor_name (str): name of a parameter, buffer or already-parametrized tensor of ``module``.
        parametrization (Module): the parametrization; put into the module's train/eval mode.
        unsafe (bool): keyword-only; skip checking that the parametrization keeps dtype and shape.
            Default: ``False``.

    Returns:
        Module: ``module``.

    Raises:
        ValueError: if ``module`` has no parameter, buffer or parametrized tensor called
            ``tensor_name``, or (unless ``unsafe``) the parametrization changes its dtype or shape.

    Example:
        >>> import ember
        >>> from ember import nn
        >>> from ember.nn.utils import parametrize
        >>> class Symmetric(nn.Module):
        ...     def forward(self, X):
        ...         return X.triu() + X.triu(1).transpose(-1, -2)
        >>> m = parametrize.register_parametrization(nn.Linear(3, 3), "weight", Symmetric())
        >>> bool((m.weight == m.weight.T).all()), type(m).__name__
        (True, 'ParametrizedLinear')
        >>> list(m.state_dict())
        ['bias', 'parametrizations.weight.original']
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            Y = getattr(module, tensor_name)
            X = parametrization(Y)
            if not isinstance(X, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(X).__name__}.")
            if X.dtype != Y.dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, unless the `unsafe` flag is "
                    "enabled.\n"
                    f"module.{tensor_name}.dtype: {Y.dtype}\n"
                    f"parametrization(module.{tensor_name}).dtype: {X.dtype}"
                )
            if X.shape != Y.shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, unless the `unsafe` flag is "
                    "enabled.\n"
                    f"module.{tensor_name}.shape: {Y.shape}\n"
                    f"parametrization(module.{tensor_name}).shape: {X.shape}"
                )
            if hasattr(parametrization, "right_inverse"):
                try:
                    Z = parametrization.right_inverse(X)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(Z, Tensor):
                        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: {type(Z).__name__}")
                    if Z.dtype != Y.dtype:
                        raise ValueError(
                            "The tensor returned by parametrization.right_inverse must have the same dtype "
                            f"as module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
                            f"module.{tensor_name}.dtype: {Y.dtype}\n"
                            f"returned dtype: {Z.dtype}"
                        )
                    if Z.shape != Y.shape:
                        raise ValueError(
                            "The tensor returned by parametrization.right_inverse must have the same shape "
                            f"as module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
                            f"module.{tensor_name}.shape: {Y.shape}\n"
                            f"returned shape: {Z.shape}"
                        )
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
            f"with name '{tensor_name}'"
        )
    return module


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has a parametrization (on ``tensor_name``, or on any tensor if it is ``None``).

    Args:
        module (Module): the module to query.
        tensor_name (str, optional): the tensor to look for. Default: ``None``.

    Returns:
        bool
    """
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Remove the parametrizations on ``module.<tensor_name>``, turning it back into a parameter or buffer.

    With ``leave_parametrized=True`` the tensor keeps its current parametrized value (written into
    the original tensor object, so it stays the same ``Parameter``); with ``False`` it goes back to the
    unparametrized ``original``. When no parametrization is left the module gets its class back.

    Args:
        module (Module): the parametrized module.
        tensor_name (str): the parametrized tensor.
        leave_parametrized (bool, optional): keep the parametrized value. Default: ``True``.

    Returns:
        Module: ``module``.

    Raises:
        ValueError: if ``module.<tensor_name>`` is not parametrized, or if ``leave_parametrized=False``
            for a tensor parametrized by a sequence of tensors (``original0``, ...).
    """
    from ... import no_grad

    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")

    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
                _maybe_set(original, t)
    elif leave_parametrized:
        t = getattr(module, tensor_name)
        original = Parameter(t.detach()) if t.requires_grad else t
    else:
        raise ValueError(
            "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in terms of "
            "a sequence of tensors."
        )

    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)

    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The class of ``module`` before any parametrization was registered (``type(module)`` if none).

    Args:
        module (Module): a module, parametrized or not.

    Returns:
        type
    """
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Copy the parametrizations (and their originals) of ``from_module`` onto ``to_module``.

    Registers the same parametrization objects on ``to_module`` and makes its ``original`` (or
    ``original0``, ...) the same tensors as ``from_module``'s, creating the parameter on ``to_module``
    if it has none of that name.

    Args:
        from_module (Module): the module to copy from.
        to_module (Module): the module to copy to.
        tensor_name (str, optional): the one tensor to transfer; all parametrized tensors if ``None``.

    Returns:
        Module: ``to_module``.
    """
    if is_parametrized(from_module):
        names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
        for parameter_name in names:
            if not hasattr(to_module, parameter_name):
                setattr(to_module, parameter_name, Parameter(getattr(from_module, parameter_name).detach()))
            for param_func in from_module.parametrizations[parameter_name]:
                register_parametrization(to_module, parameter_name, param_func)
            src = from_module.parametrizations[parameter_name]
            dst = to_module.parametrizations[parameter_name]
            if hasattr(src, "original"):
                dst.original = src.original
            else:
                num = 0
                while hasattr(src, f"original{num}"):
                    setattr(dst, f"original{num}", getattr(src, f"original{num}"))
                    num += 1
    return to_module
