"""``ember.use_deterministic_algorithms``: refuse (or warn about) ops whose results may vary run to run.

Which ops are nondeterministic on which device type is one table, :data:`NONDETERMINISTIC`, not checks
spread over kernels. On CUDA, ember's kernels that add floats into shared places run CuPy's ``add.at``
(atomic adds, whose order, and so whose rounding, varies): ``index_add``, ``scatter_add``,
``scatter_reduce``/``index_reduce`` summing or averaging, ``index_put_``/``put_`` accumulating,
``embedding_bag`` summing or averaging (and through it its backward), and the float ``bincount``/``histc``.
``put_`` without ``accumulate`` is refused on every device, as in PyTorch (which of two values written
to one place wins is unspecified).

How it is enforced, at no cost to other ops: each marked op's ``kernels`` and ``checked_kernels`` dicts
become a :class:`_GuardedKernels`, whose ``get`` (what the dispatcher calls) hands out the kernel wrapped in
the check while deterministic mode is on. The check binds the call's arguments to see the conditions
(``accumulate=True``, ``reduce="sum"``). The guarded ``checked_kernels`` decline while the mode is on, so
the check runs once, on the general path. Unmarked ops keep plain dicts.

``ember.empty`` (and ``empty_like``, ``empty_strided``) fill their memory with NaN (floats and complex)
or the dtype's largest value (integers, True for bool) while deterministic mode is on and
``ember.utils.deterministic.fill_uninitialized_memory`` is True, as PyTorch does.

``ember.backends.cudnn.deterministic`` is a separate flag, as in PyTorch: it neither turns this mode on nor
follows it (ember has no cuDNN; the flag is stored only).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from ._device import get_backend
from ._meta import MetaArray
from ._ops._registry import registry
from .utils import deterministic as _user_flags

__all__ = [
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode", "get_deterministic_debug_mode",
    "mark_nondeterministic", "unmark_nondeterministic", "NONDETERMINISTIC",
]


class _State:
    """Process-wide, as in PyTorch (not per thread)."""

    enabled = False
    warn_only = False


_state = _State()

#: op name -> {device type -> condition(bound arguments) -> bool, or None for "always"}
NONDETERMINISTIC = {}

_FILLING = ("empty", "empty_strided")  # empty_like and new_empty decompose into empty


# ---- the public switches ---------------------------------------------------------------------------


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Make ops without a deterministic implementation raise (or warn), and fill ``ember.empty``'s memory.

    Args:
        mode (bool): True to turn deterministic mode on, False to turn it off.
        warn_only (bool): with ``mode=True``, warn instead of raising.

    Raises:
        TypeError: when ``mode`` or ``warn_only`` is not a bool.

    While on, an op listed in :data:`NONDETERMINISTIC` for the device it runs on raises
    ``RuntimeError("<op> on <device> does not have a deterministic implementation, ...")`` (a
    ``UserWarning`` with ``warn_only=True``).

    Example:
        >>> import ember
        >>> ember.use_deterministic_algorithms(True)
        >>> ember.empty(2)
        tensor([nan, nan])
        >>> ember.use_deterministic_algorithms(False)
    """
    if type(mode) is not bool:
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    if type(warn_only) is not bool:
        raise TypeError(
            f"use_deterministic_algorithms(): argument 'warn_only' must be bool, not {type(warn_only).__name__}"
        )
    _state.enabled = mode
    _state.warn_only = warn_only if mode else False


def are_deterministic_algorithms_enabled():
    """Whether deterministic mode is on (:func:`use_deterministic_algorithms`)."""
    return _state.enabled


def is_deterministic_algorithms_warn_only_enabled():
    """Whether deterministic mode only warns (``use_deterministic_algorithms(True, warn_only=True)``)."""
    return _state.warn_only


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """PyTorch's other spelling: ``"default"``/0 (off), ``"warn"``/1 (warn only), ``"error"``/2 (raise).

    Raises:
        RuntimeError: for another value.
    """
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES[debug_mode]
    if debug_mode not in (0, 1, 2) or isinstance(debug_mode, bool):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    """0 (off), 1 (warn only) or 2 (raise): see :func:`set_deterministic_debug_mode`."""
    if not _state.enabled:
        return 0
    return 1 if _state.warn_only else 2


# ---- the table and its guard -------------------------------------------------------------------------


class _GuardedKernels(dict):
    """A marked op's kernel dict: ``get`` wraps the kernel in the determinism check while the mode is on."""

    __slots__ = ("op", "checked")

    def __init__(self, op, kernels, checked):
        super().__init__(kernels)
        self.op = op
        self.checked = checked  # the checked_kernels dict: it declines instead, so the check runs once

    def get(self, device_type, default=None):
        kernel = dict.get(self, device_type, default)
        if not _state.enabled:
            return kernel
        op = self.op
        if op.name in _FILLING:
            return None if self.checked or kernel is None else functools.partial(_filled, kernel)
        if device_type not in NONDETERMINISTIC.get(op.name, ()):
            return kernel
        if self.checked:
            return None
        if kernel is None:
            kernel = _fallback(op, device_type)
            if kernel is None:
                return None
        return functools.partial(_checked, op, device_type, kernel)


def _fallback(op, device_type):
    """The kernel ``run_backend`` runs for ``op`` on a device type it registered none for: the backend's
    generic one (cuda runs the CPU kernel on CuPy arrays), unless a decomposition or view runs instead."""
    if op.decomposition is not None or op.kind == "view":
        return None
    return get_backend(device_type).fallback_kernel(op)


def _checked(op, device_type, kernel, *args, **kwargs):
    condition = NONDETERMINISTIC[op.name][device_type]
    if condition is None or condition(_arguments(op, args, kwargs)):
        alert(f"{op.name} on {device_type}")
    return kernel(*args, **kwargs)


def _arguments(op, args, kwargs):
    """The call's arguments by parameter name; an in-place variant (``put_(self, *args, **kwargs)``) is
    bound to its functional op's signature, so ``self`` is named ``input`` there too."""
    if op.name.endswith("_") and op.name[:-1] in registry:
        op = registry[op.name[:-1]]
    bound = op._call_signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


def alert(caller):
    """Raise (or warn, in warn-only mode) that ``caller`` has no deterministic implementation.

    Kernels without a table entry (a custom op's, say) may call it directly while
    :func:`are_deterministic_algorithms_enabled`.
    """
    if not _state.enabled:
        return
    setting = "ember.use_deterministic_algorithms(True, warn_only=True)" if _state.warn_only else \
        "ember.use_deterministic_algorithms(True)"
    message = (
        f"{caller} does not have a deterministic implementation, but you set '{setting}'. Turn determinism off "
        "around this operation, or pass warn_only=True if a warning is acceptable for your application."
    )
    if _state.warn_only:
        warnings.warn(message, UserWarning, stacklevel=3)
    else:
        raise RuntimeError(message)


def _filled(kernel, *args, **kwargs):
    array = kernel(*args, **kwargs)
    if _user_flags.fill_uninitialized_memory and type(array) is not MetaArray:
        kind = array.dtype.kind
        if kind in "iu":
            array.fill(np.iinfo(array.dtype).max)
        elif kind == "b":
            array.fill(True)
        else:  # float, complex, and ml_dtypes' bfloat16
            array.fill(np.nan)
    return array


def _guard(op):
    if not isinstance(op.kernels, _GuardedKernels):
        op.kernels = _GuardedKernels(op, op.kernels, checked=False)
        op.checked_kernels = _GuardedKernels(op, op.checked_kernels, checked=True)


def mark_nondeterministic(op_name, device_types, condition=None):
    """Record that op ``op_name`` has no deterministic kernel on ``device_types``.

    Args:
        op_name (str): a registered op's name.
        device_types (str or tuple[str]): device types (``"cuda"``, ``"cpu"``, a registered one).
        condition (callable, optional): ``condition(arguments) -> bool`` over the call's bound arguments
            (a dict by parameter name, defaults applied); None means every call.

    Raises:
        KeyError: for an unknown op name.
    """
    op = registry[op_name]
    for device_type in (device_types,) if isinstance(device_types, str) else device_types:
        NONDETERMINISTIC.setdefault(op_name, {})[device_type] = condition
    _guard(op)


def unmark_nondeterministic(op_name, device_types):
    """Undo :func:`mark_nondeterministic` for ``device_types`` (the op's dicts stay guarded, at no cost)."""
    marks = NONDETERMINISTIC.get(op_name, {})
    for device_type in (device_types,) if isinstance(device_types, str) else device_types:
        marks.pop(device_type, None)


def _floating(name):
    def condition(arguments):
        value = arguments.get(name)
        return value is not None and (value.dtype.is_floating_point or value.dtype.is_complex)

    return condition


def _install():
    floating = _floating("input")  # conditions read the functional op's parameter names (see _arguments)
    for name in ("index_add", "index_add_", "scatter_add", "scatter_add_"):
        mark_nondeterministic(name, "cuda", floating)
    for name in ("scatter", "scatter_"):
        mark_nondeterministic(name, "cuda", lambda a: a.get("reduce") == "add" and floating(a))
    for name in ("scatter_reduce", "scatter_reduce_", "index_reduce", "index_reduce_"):
        mark_nondeterministic(name, "cuda", lambda a: a.get("reduce") in ("sum", "mean") and floating(a))
    for name in ("index_put", "index_put_"):
        mark_nondeterministic(name, "cuda", lambda a: bool(a.get("accumulate")) and floating(a))
    for name in ("put", "put_"):
        # without accumulate, which duplicate wins is unspecified on every device (PyTorch refuses it too)
        mark_nondeterministic(name, "cpu", lambda a: not a.get("accumulate"))
        mark_nondeterministic(name, "cuda", lambda a: not a.get("accumulate") or floating(a))
    mark_nondeterministic("embedding_bag", "cuda", lambda a: a.get("mode") in ("sum", "mean"))
    mark_nondeterministic("bincount", "cuda", lambda a: a.get("weights") is not None)
    mark_nondeterministic("histc", "cuda")
    for name in _FILLING:
        _guard(registry[name])


_install()
