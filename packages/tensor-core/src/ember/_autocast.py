"""Autocast: run chosen ops in lower precision inside a region (PyTorch's ``torch.autocast``).

Where it sits in dispatch (docs/internals.rst, "Autocast, the default device and deterministic
mode"): an enabled region pushes one dispatch mode (:class:`AutocastMode`), so every op call reaches it
after ``__ember_function__`` overrides and before autograd. The mode casts the call's inputs with
ordinary ``_to_copy`` op calls (what ``Tensor.to`` runs) and runs the op one layer down. Because the
casts are op calls below the mode, autograd records them (the gradient of a float32 parameter comes
back float32) and a tracing mode outside it (``make_fx``, the compiler) records them too. A composite
op's decomposition runs below the mode, so its inner ops are not cast; PyTorch casts inside its
implicit composites, so those whose inner matrix products it casts (``einsum``, ``tensordot``, ...)
are listed themselves (:mod:`ember._autocast_policy`). Outside any region no mode is pushed: the plain
dispatch path pays nothing.

The state is per thread, as in PyTorch: per device type whether autocast is enabled and its dtype, and
the weight-cast cache of the current outermost region.
"""

from __future__ import annotations

import functools
import threading
import warnings

import numpy as np

from . import _dtype
from ._autocast_policy import AUTOCAST_OPS, POLICIES, policy_of
from ._ops._dispatch import state as _dispatch_state
from ._ops._registry import registry as _registry
from ._tensor import Tensor
from .utils._python_dispatch import DispatchMode

__all__ = [
    "autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache", "AutocastMode",
    "TracingAutocastMode",
]

_DEFAULT_DTYPES = {"cpu": _dtype.bfloat16, "cuda": _dtype.float16}
_SUPPORTED_DTYPES = {"cpu": (_dtype.bfloat16, _dtype.float16), "cuda": (_dtype.float16, _dtype.bfloat16)}


class _State(threading.local):
    def __init__(self):
        self.enabled = {}  # device type -> bool
        self.dtypes = dict(_DEFAULT_DTYPES)  # device type -> the lower-precision dtype
        self.cache_enabled = True
        self.nesting = 0  # open autocast regions (enabled or not); the cache empties when it returns to 0
        self.cache = {}  # id(weight) -> (weight, dtype, cast copy)
        self.mode = None  # the pushed AutocastMode, while one is


_state = _State()


def _check_device_type(device_type, where):
    if not isinstance(device_type, str):
        raise ValueError(f"{where}: expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type not in _DEFAULT_DTYPES:
        raise RuntimeError(
            f"{where}: unsupported autocast device_type '{device_type}'; supported are 'cpu' and 'cuda'"
        )


def is_autocast_enabled(device_type="cuda"):
    """Whether autocast is enabled for ``device_type`` in this thread (``"cuda"`` when not given, as in PyTorch).

    Raises:
        ValueError / RuntimeError: for a device type that is not a string or has no autocast.
    """
    _check_device_type(device_type, "is_autocast_enabled")
    return _state.enabled.get(device_type, False)


def set_autocast_enabled(device_type, enabled):
    """Switch autocast on or off for ``device_type`` in this thread (prefer the :class:`autocast` region)."""
    _check_device_type(device_type, "set_autocast_enabled")
    _state.enabled[device_type] = bool(enabled)
    _sync_mode()


def get_autocast_dtype(device_type):
    """The lower-precision dtype autocast uses on ``device_type`` (bfloat16 on cpu, float16 on cuda by default)."""
    _check_device_type(device_type, "get_autocast_dtype")
    return _state.dtypes[device_type]


def set_autocast_dtype(device_type, dtype):
    """Set the lower-precision dtype of ``device_type`` for this thread."""
    _check_device_type(device_type, "set_autocast_dtype")
    _state.dtypes[device_type] = dtype


def is_autocast_cache_enabled():
    """Whether autocast regions cache the casts of weights (leaf tensors that require grad)."""
    return _state.cache_enabled


def set_autocast_cache_enabled(enabled):
    """Switch the weight-cast cache on or off for this thread."""
    _state.cache_enabled = bool(enabled)


def clear_autocast_cache():
    """Forget every cached weight cast of this thread."""
    _state.cache.clear()


def _sync_mode():
    """Push the autocast mode while some device type is enabled, pop it when none is.

    The mode is popped only when it is the innermost one. A mode pushed after it (``make_fx`` entered
    inside the region) must leave first, so an ``enabled=False`` region inside that one leaves the
    autocast mode where it is, passing every call through (no device type is enabled), and the
    enclosing region finds it there again.
    """
    enabled = tuple(sorted(device for device, on in _state.enabled.items() if on))
    mode = _state.mode
    if enabled and mode is None:
        mode = _state.mode = AutocastMode()
        _dispatch_state.modes.append(mode)
    elif not enabled and mode is not None:
        modes = _dispatch_state.modes
        if modes and modes[-1] is mode:
            modes.pop()
            _state.mode = None
        elif mode not in modes:  # popped by someone else (a mode stack reset): forget it
            _state.mode = None
    if mode is not None:
        mode.__ember_ops__ = _handled_ops(enabled)


@functools.cache
def _handled_ops(device_types):
    """The op names the autocast mode must see while ``device_types`` (a sorted tuple) are enabled: those
    with a policy on one of them. The dispatcher runs any other op below the mode without normalising its
    arguments (``__ember_ops__``, see ``ember._ops._dispatch._run_mode``)."""
    names = set()
    for device_type in device_types:
        names.update(POLICIES[device_type])
    if "cpu" in device_types:
        names.add("pad")  # a cpu policy decided per call (policy_of)
    return frozenset(names)


class autocast:
    """A region (context manager or decorator) where chosen ops run in a lower-precision dtype.

    Inside it, matrix products, convolutions and ``linear`` on tensors of ``device_type`` run in ``dtype``;
    ops that need range or precision (losses, some reductions, ...) run in float32; ops mixing dtypes such
    as ``cat`` run in the widest one (lists in :mod:`ember._autocast_policy`, after PyTorch's). Gradients
    flow back through the casts, so float32 parameters get float32 gradients. Regions nest; an inner
    ``enabled=False`` region switches autocast off for its device type.

    Args:
        device_type (str): ``"cpu"`` or ``"cuda"``.
        dtype (ember.dtype, optional): the lower-precision dtype; default bfloat16 on cpu, float16 on cuda.
        enabled (bool): whether casting happens in the region (default True).
        cache_enabled (bool, optional): cast each weight (a leaf tensor that requires grad) once per
            region and reuse the copy; default: the thread's setting (True).

    Raises:
        ValueError: ``device_type`` not a string.
        RuntimeError: an unsupported ``device_type``.

    A dtype the device type does not support, or cuda when CUDA is not available, warns and disables the
    region, as PyTorch does.

    Example:
        >>> import ember
        >>> a = ember.randn(4, 4)
        >>> with ember.autocast("cpu"):
        ...     (a @ a).dtype
        ember.bfloat16
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        _check_device_type(device_type, "autocast")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be a bool, got {type(enabled).__name__}")
        self.device = device_type
        self.fast_dtype = _state.dtypes[device_type] if dtype is None else dtype
        self._enabled = enabled
        self._cache_enabled = cache_enabled
        if enabled and self.fast_dtype not in _SUPPORTED_DTYPES[device_type]:
            warnings.warn(
                f"In {device_type} autocast, but the target dtype {self.fast_dtype} is not supported "
                f"(supported: {', '.join(str(d) for d in _SUPPORTED_DTYPES[device_type])}). Disabling autocast.",
                UserWarning, stacklevel=2,
            )
            self._enabled = False
        if self._enabled and device_type == "cuda":
            from . import cuda

            if not cuda.is_available():
                warnings.warn(
                    "User provided device_type of 'cuda', but CUDA is not available. Disabling autocast.",
                    UserWarning, stacklevel=2,
                )
                self._enabled = False
        self._saved = []  # a stack: the decorator form may re-enter the same object

    def __enter__(self):
        device = self.device
        self._saved.append(
            (_state.enabled.get(device, False), _state.dtypes[device], _state.cache_enabled)
        )
        _state.nesting += 1
        _state.enabled[device] = self._enabled
        _state.dtypes[device] = self.fast_dtype
        if self._cache_enabled is not None:
            _state.cache_enabled = self._cache_enabled
        _sync_mode()
        return self

    def __exit__(self, exc_type, exc, tb):
        enabled, dtype, cache_enabled = self._saved.pop()
        _state.nesting -= 1
        if _state.nesting == 0:
            _state.cache.clear()
        _state.enabled[self.device] = enabled
        _state.dtypes[self.device] = dtype
        _state.cache_enabled = cache_enabled
        _sync_mode()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def decorated(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return decorated


# ---- the mode ------------------------------------------------------------------------------------------


def _call_device_type(values, found=None):
    """The device type an op call runs on: that of its tensors, a non-cpu one winning (zero-dim cpu
    tensors may join cuda ones)."""
    for value in values:
        if isinstance(value, Tensor):
            kind = value._device.type
            if kind != "cpu":
                return kind
            found = kind
        elif type(value) is list or type(value) is tuple:
            found = _call_device_type(value, found) or found
    return found


_to_copy = _registry["_to_copy"]  # what Tensor.to(dtype) runs, without its argument parsing


def _eligible(t, device_type):
    return isinstance(t, Tensor) and t._device.type == device_type and t.dtype.is_floating_point and \
        t.dtype is not _dtype.float64


def _cast(value, device_type, to_dtype):
    if isinstance(value, Tensor):
        if not _eligible(value, device_type) or value.dtype is to_dtype:
            return value
        # only with grad mode on: a copy cast under no_grad has no edge to the weight, and reusing it
        # later in the region would lose the weight's gradient
        if _state.cache_enabled and to_dtype is not _dtype.float32 and value.dtype is _dtype.float32 and \
                value._requires_grad and value._grad_fn is None and value._base is None and \
                _dispatch_state.grad_enabled:
            return _cached_cast(value, to_dtype)
        # under any mode, the profiler's too: the cast is then an op the mode sees (a profile shows it)
        if not _dispatch_state.modes and not (value._requires_grad and _dispatch_state.grad_enabled):
            cast = _plain_cast(value, to_dtype)
            if cast is not None:
                return cast
        return _to_copy(value, dtype=to_dtype)
    if type(value) is list or type(value) is tuple:
        return type(value)(_cast(v, device_type, to_dtype) for v in value)
    return value


# Larger casts take _to_copy, whose kernel copies over threads from 32,768 elements (ember._C.copy_into).
_PLAIN_CAST_BELOW = 32768


def _plain_cast(value, to_dtype):
    """``_to_copy(value, dtype=to_dtype)`` without the dispatcher, or None.

    For a C-contiguous CPU tensor, when nothing needs to see the cast: autograd has nothing to record
    (the caller checked grad) and no mode sits below autocast (a tracer, the profiler). The copy is
    numpy's ``astype`` (float to float), the bits ``_to_copy``'s kernel gives; the dispatcher's path cost
    a cast about as much as the op it feeds on small tensors.
    """
    data = value._data
    if type(data) is not np.ndarray or not data.flags.c_contiguous or data.size >= _PLAIN_CAST_BELOW:
        return None
    with np.errstate(over="ignore", invalid="ignore"):  # overflow gives inf, as _to_copy's kernel does
        array = data.astype(to_dtype.numpy_dtype)
    return Tensor._make(array, value._device)


def _cached_cast(weight, to_dtype):
    """The region's one low-precision copy of a weight (PyTorch caches the same ones)."""
    entry = _state.cache.get(id(weight))
    if entry is not None and entry[0] is weight and entry[1] is to_dtype:
        return entry[2]
    copy = _to_copy(weight, dtype=to_dtype)
    _state.cache[id(weight)] = (weight, to_dtype, copy)  # the weight is kept so its id stays its own
    return copy


def _widest(values, device_type, widest=None):
    for value in values:
        if _eligible(value, device_type):
            if widest is None or widest is value.dtype:
                widest = value.dtype
            else:
                widest = _dtype.float32  # float16 with bfloat16, or either with float32
        elif type(value) is list or type(value) is tuple:
            widest = _widest(value, device_type, widest)
    return widest


def _dtype_given(func, args, kwargs):
    if kwargs.get("dtype") is not None:
        return True
    position = _dtype_position(func)
    return position is not None and position < len(args) and args[position] is not None


@functools.cache
def _dtype_position(func):
    """Where a normalised call holds ``dtype`` positionally (None: keyword-only, or no such parameter)."""
    for index, parameter in enumerate(func.signature.parameters.values()):
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            return None
        if parameter.name == "dtype":
            return index
    return None


class AutocastMode(DispatchMode):
    """The dispatch mode an enabled :class:`autocast` region pushes: casts the inputs of listed ops.

    ``__ember_ops__`` tells the dispatcher which ops to hand it (those of some policy); every other op
    runs below the mode as given, without the normalising of its arguments that a mode call costs.
    """

    __ember_ops__ = AUTOCAST_OPS

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.name
        if name not in AUTOCAST_OPS:
            return func(*args, **kwargs)
        device_type = _call_device_type((*args, *kwargs.values()))
        if device_type is None or not _state.enabled.get(device_type, False):
            return func(*args, **kwargs)
        to_dtype = _target_dtype(func, args, kwargs, device_type, _state.dtypes[device_type], device_type)
        if to_dtype is None:
            return func(*args, **kwargs)
        args = tuple(_cast(a, device_type, to_dtype) for a in args)
        kwargs = {k: _cast(v, device_type, to_dtype) for k, v in kwargs.items()}
        return func(*args, **kwargs)


def _target_dtype(func, args, kwargs, device_type, lower, tensor_device_type):
    """The dtype ``func``'s floating inputs are cast to on ``device_type`` (None: run as given).

    ``lower`` is the region's lower-precision dtype; ``tensor_device_type`` the device type of the
    call's tensors (``"meta"`` while ember-dynamo traces a region of ``device_type``).
    """
    name = func.name
    policy = policy_of(name, device_type, args, kwargs)
    if policy is None:
        return None
    if policy == "lower":
        return lower
    if policy == "float32":
        return _dtype.float32
    if policy == "float32_unless_dtype":
        return None if _dtype_given(func, args, kwargs) else _dtype.float32
    if policy == "promote":
        return _widest((*args, *kwargs.values()), tensor_device_type)
    raise RuntimeError(  # banned
        f"ember.nn.functional.{name} is unsafe to autocast on {device_type}: its float16 inputs lose "
        "the range it needs. Use binary_cross_entropy_with_logits (or BCEWithLogitsLoss), which is safe "
        "to autocast, or leave the region for this call."
    )


class TracingAutocastMode(DispatchMode):
    """Autocast for a tracer that runs on meta tensors (ember-dynamo inside an ``ember.autocast`` region).

    The meta examples stand for tensors of ``device_type``: the mode casts them by ``device_type``'s
    policy to ``dtype``, with ordinary ``_to_copy`` calls that the tracing mode below it records, so
    the graph holds the region's casts explicitly and runs right without autocast. No weight-cast
    cache: each cast is a node (the compiler removes repeats).

    Args:
        device_type (str): ``"cpu"`` or ``"cuda"``: the device the traced tensors live on at run time.
        dtype (ember.dtype): the region's lower-precision dtype.
    """

    __ember_ops__ = AUTOCAST_OPS

    def __init__(self, device_type, dtype):
        super().__init__()
        _check_device_type(device_type, "TracingAutocastMode")
        self.device_type = device_type
        self.dtype = dtype

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.name not in AUTOCAST_OPS or _call_device_type((*args, *kwargs.values())) != "meta":
            return func(*args, **kwargs)
        to_dtype = _target_dtype(func, args, kwargs, self.device_type, self.dtype, "meta")
        if to_dtype is None:
            return func(*args, **kwargs)
        args = tuple(_traced_cast(a, to_dtype) for a in args)
        kwargs = {k: _traced_cast(v, to_dtype) for k, v in kwargs.items()}
        return func(*args, **kwargs)


def _traced_cast(value, to_dtype):
    if isinstance(value, Tensor):
        return _to_copy(value, dtype=to_dtype) if _eligible(value, "meta") and value.dtype is not to_dtype else value
    if type(value) is list or type(value) is tuple:
        return type(value)(_traced_cast(v, to_dtype) for v in value)
    return value
