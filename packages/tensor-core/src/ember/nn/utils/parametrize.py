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

# Nesting depth of cached() contexts, and the values computed inside them keyed by (id(module), name).
_cache_depth = 0
_cached_values: dict = {}


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
    global _cache_depth, _cached_values
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if _cache_depth == 0:
            _cached_values = {}


def _register_like(module, name, tensor):
    """Register ``tensor`` on ``module`` as what it is: a parameter if it is a Parameter, else a buffer."""
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def _overwrite_keeping_identity(dest, src):
    """Give ``dest`` the values and shape of ``src`` while staying the same object, so optimizers
    holding ``dest`` keep working (PyTorch's ``dest.set_(src)``)."""
    dest.data = src.detach()


def _apply_right_inverses(modules, value):
    """Map ``value`` back through the parametrizations (last to first) that define ``right_inverse``;
    one that raises NotImplementedError leaves the value as it is."""
    for module in reversed(modules):
        if not hasattr(module, "right_inverse"):
            continue
        try:
            value = module.right_inverse(value)
        except NotImplementedError:
            pass
    return value


def _check_same_dtype_and_shape(unparametrized_dtype, unparametrized_shape, value):
    if not isinstance(value, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")
    if value.dtype != unparametrized_dtype:
        raise ValueError(
            "Registering a parametrization may not change the dtype of the tensor, unless `unsafe` flag is "
            "enabled.\n"
            f"unparametrized dtype: {unparametrized_dtype}\n"
            f"parametrized dtype: {value.dtype}"
        )
    if value.shape != unparametrized_shape:
        raise ValueError(
            "Registering a parametrization may not change the shape of the tensor, unless `unsafe` flag is "
            "enabled.\n"
            f"unparametrized shape: {unparametrized_shape}\n"
            f"parametrized shape: {value.shape}"
        )


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
        dtype_before, shape_before = original.dtype, original.shape

        with no_grad():
            stored = _apply_right_inverses(self, original)
        if isinstance(stored, Tensor):
            self._store_one_original(original, stored)
        elif isinstance(stored, collections.abc.Sequence):
            self._store_original_sequence(original, stored)
        else:
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(stored).__name__}"
            )
        if not self.unsafe:
            _check_same_dtype_and_shape(dtype_before, shape_before, self())

    # ``is_tensor`` and ``ntensors`` are public attributes in PyTorch: whether a single ``original`` is
    # stored, and how many originals there are.

    def _store_one_original(self, original, value):
        from ... import no_grad

        self.is_tensor = True
        self.ntensors = 1
        for what in ("dtype", "device"):
            before, after = getattr(original, what), getattr(value, what)
            if before != after:
                raise ValueError(
                    f"When `right_inverse` outputs one tensor, it may not change the {what}.\n"
                    f"original.{what}: {before}\n"
                    f"right_inverse(original).{what}: {after}"
                )
        if value is not original:
            with no_grad():
                _overwrite_keeping_identity(original, value)
        _register_like(self, "original", original)

    def _store_original_sequence(self, original, values):
        self.is_tensor = False
        self.ntensors = len(values)
        for i, value in enumerate(values):
            if not isinstance(value, Tensor):
                raise ValueError(
                    "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                    f"Got element {i} of the sequence with type {type(value).__name__}."
                )
            # Each piece inherits the kind (parameter or buffer) and requires_grad of the tensor it replaces.
            if isinstance(original, Parameter):
                value = Parameter(value, original.requires_grad)
            value.requires_grad_(original.requires_grad)
            _register_like(self, f"original{i}", value)

    def _originals(self):
        if self.is_tensor:
            return (self.original,)
        return tuple(getattr(self, f"original{i}") for i in range(self.ntensors))

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
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                self._write_one_original(value)
            else:
                self._write_original_sequence(value)

    def _write_one_original(self, value):
        if not isinstance(value, Tensor):
            raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
        if value.dtype != self.original.dtype:
            raise ValueError(
                f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                f"while `original` has dtype {self.original.dtype}"
            )
        _overwrite_keeping_identity(self.original, value)

    def _write_original_sequence(self, values):
        if not isinstance(values, collections.abc.Sequence):
            raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(values).__name__}.")
        if len(values) != self.ntensors:
            raise ValueError(
                f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                f"Got a sequence of length {len(values)}."
            )
        for i, (target, value) in enumerate(zip(self._originals(), values)):
            if not isinstance(value, Tensor):
                raise ValueError(
                    "'right_inverse' must return a sequence of tensors or reference-type opaques. "
                    f"Got element {i} of type {type(value).__name__}."
                )
            if target.dtype != value.dtype:
                raise ValueError(
                    f"Tensor {i} returned by `right_inverse` has dtype {value.dtype} "
                    f"while `original{i}` has dtype {target.dtype}"
                )
            _overwrite_keeping_identity(target, value)

    def forward(self):
        """Evaluate the parametrized tensor: the first module on the original(s), then each following one."""
        first, *rest = self
        value = first(*self._originals())
        for module in rest:
            value = module(value)
        return value


def _deepcopy_parametrized(self, memo):
    """``copy.deepcopy`` for a parametrized module. Needed because the class's ``__getstate__`` raises
    (to refuse pickling) and the default deepcopy goes through it."""
    if id(self) in memo:
        return memo[id(self)]
    clone = self.__new__(type(self))
    memo[id(self)] = clone
    clone.__dict__ = deepcopy(self.__dict__, memo)
    for slot in copyreg._slotnames(type(self)):
        if hasattr(self, slot):
            setattr(clone, slot, deepcopy(getattr(self, slot), memo))
    return clone


def _refuse_pickling(self):
    raise RuntimeError(
        "Serialization of parametrized modules is only supported through state_dict(). See:\n"
        "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
        "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training"
    )


def _swap_in_parametrized_class(module):
    """Give ``module`` its own subclass ``Parametrized<Class>``: properties can then be added to it
    without touching the original class, which other instances share."""
    base = type(module)
    namespace = {"__getstate__": _refuse_pickling}
    if not hasattr(base, "__deepcopy__"):
        namespace["__deepcopy__"] = _deepcopy_parametrized
    module.__class__ = type(f"Parametrized{base.__name__}", (base,), namespace)


def _add_parametrized_property(module, tensor_name):
    """Make ``module.<tensor_name>`` a property of its (parametrized) class: reading evaluates the
    parametrization (once per :func:`cached` context), assigning calls ``right_inverse``."""
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")
    cache_key = (id(module), tensor_name)

    def evaluate(self):
        plist = self.parametrizations[tensor_name]
        if not _cache_depth:
            return plist()
        if _cached_values.get(cache_key) is None:
            _cached_values[cache_key] = plist()
        return _cached_values[cache_key]

    def assign(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(type(module), tensor_name, property(evaluate, assign))


def _check_stacked_parametrization(module, tensor_name, parametrization):
    """A parametrization added on top of others must keep the current value's dtype and shape, and so
    must its ``right_inverse`` (checked on the value it produces)."""
    current = getattr(module, tensor_name)
    produced = parametrization(current)
    if not isinstance(produced, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(produced).__name__}.")
    for what in ("dtype", "shape"):
        if getattr(produced, what) != getattr(current, what):
            raise ValueError(
                f"Registering a parametrization may not change the {what} of the tensor, unless the `unsafe` flag "
                "is enabled.\n"
                f"module.{tensor_name}.{what}: {getattr(current, what)}\n"
                f"parametrization(module.{tensor_name}).{what}: {getattr(produced, what)}"
            )
    if not hasattr(parametrization, "right_inverse"):
        return
    try:
        recovered = parametrization.right_inverse(produced)
    except NotImplementedError:
        return
    if not isinstance(recovered, Tensor):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: {type(recovered).__name__}")
    for what in ("dtype", "shape"):
        if getattr(recovered, what) != getattr(current, what):
            raise ValueError(
                f"The tensor returned by parametrization.right_inverse must have the same {what} "
                f"as module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
                f"module.{tensor_name}.{what}: {getattr(current, what)}\n"
                f"returned {what}: {getattr(recovered, what)}"
            )


def _parametrize_plain_tensor(module, tensor_name, parametrization, unsafe):
    """First parametrization of a parameter or buffer: move it into a ParametrizationList."""
    plist = ParametrizationList([parametrization], getattr(module, tensor_name), unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _swap_in_parametrized_class(module)
        module.parametrizations = ModuleDict()
    _add_parametrized_property(module, tensor_name)
    module.parametrizations[tensor_name] = plist


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
        >>> class ZeroDiagonal(nn.Module):  # a layer whose units never see their own input
        ...     def forward(self, W):
        ...         return W - ember.diag_embed(W.diagonal())
        >>> m = parametrize.register_parametrization(nn.Linear(3, 3), "weight", ZeroDiagonal())
        >>> m.weight.diagonal().tolist(), type(m).__name__
        ([0.0, 0.0, 0.0], 'ParametrizedLinear')
        >>> list(m.state_dict())
        ['bias', 'parametrizations.weight.original']
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_stacked_parametrization(module, tensor_name, parametrization)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        _parametrize_plain_tensor(module, tensor_name, parametrization, unsafe)
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
    plists = getattr(module, "parametrizations", None)
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def _tensor_after_removal(module, tensor_name, plist, leave_parametrized):
    """The parameter or buffer that replaces the parametrized ``module.<tensor_name>``."""
    from ... import no_grad

    if plist.is_tensor:
        # Reuse the original object (optimizers may hold it), with the current value if asked.
        if leave_parametrized:
            with no_grad():
                _overwrite_keeping_identity(plist.original, getattr(module, tensor_name))
        return plist.original
    if not leave_parametrized:
        raise ValueError(
            "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in terms of "
            "a sequence of tensors."
        )
    value = getattr(module, tensor_name)
    return Parameter(value.detach()) if value.requires_grad else value


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
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    restored = _tensor_after_removal(module, tensor_name, module.parametrizations[tensor_name], leave_parametrized)
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_like(module, tensor_name, restored)
    if not is_parametrized(module):
        # Last one gone: drop the container and give the module its own class back.
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module):
    """The class of ``module`` before any parametrization was registered (``type(module)`` if none).

    Args:
        module (Module): a module, parametrized or not.

    Returns:
        type
    """
    if is_parametrized(module):
        return type(module).__bases__[0]
    return type(module)


def _original_names(plist):
    """``["original"]`` or ``["original0", "original1", ...]``: where a list keeps its originals."""
    if hasattr(plist, "original"):
        return ["original"]
    names = []
    while hasattr(plist, f"original{len(names)}"):
        names.append(f"original{len(names)}")
    return names


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
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        # Share the very tensors, not copies: both modules then train the same originals.
        for original_name in _original_names(source):
            setattr(target, original_name, getattr(source, original_name))
    return to_module
