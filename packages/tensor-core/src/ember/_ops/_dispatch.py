"""The dispatcher: how a call of an op reaches a kernel.

Layers, in order (docs/internals.rst, "The dispatcher")::

    op(*args, **kwargs)
      1. __ember_function__ overrides   (Tensor subclasses, FX proxies)
      2. dispatch modes                 (ember.utils._python_dispatch; an autocast region pushes one)
      3. autograd                       (registered by ember-autograd)
      4. backend: meta checks, then the kernel of the device type,
         or the decomposition of a composite op without one

One scan over the arguments finds what the layers need: the common device,
whether any tensor requires grad, and any argument that overrides.

Fast paths
----------
A plain call (no override, no mode) would pay for the general path's scan, meta
call, kernel and wrapping; the fast paths below skip parts of that work for the
calls they take. Each must give, for those calls, what the general path gives:
the same value and dtype, the same warnings and errors, the same version
counters. ``tests/test_dispatch_paths.py`` runs op_db's samples both ways, the
general way with :func:`fast_paths_disabled` (and with keywords, ``out=``, a
Tensor subclass, the meta device), and compares.

=====================  ====================================  ===========================================
fast path (where)      taken for                             must equal
=====================  ====================================  ===========================================
positional scan        calls without keywords whose          :func:`_dispatch_general` and :func:`_scan`:
(:func:`dispatch`)     arguments are plain tensors           the same device, grad flag and sequence
                       (``PLAIN_TENSOR_TYPES``), numbers     check; anything else goes there
                       or sequences of numbers
compiled hot path      the positional scan's calls of plain  :data:`python_dispatch` (the Python
(``ember._C.make_``    tensors of one device object and      ``dispatch``), which gets every other call
``dispatch``,          ``_PLAIN_TYPES`` values, no mode      (``tests/test_dispatch_native.py``)
csrc/dispatch.h)
checked kernel         ``op.checked_kernels[device.type]``   ``op.meta`` then ``op.kernels[device]``:
(:func:`dispatch`,     returning an array, for a call        it declines (None) every call it does not
:func:`run_backend`,   without keywords                      check completely, so errors come from the
autograd's recorders)                                        meta function
view kernel            ``op.view_kernels[device.type]``      ``op.meta`` then the backend's strided
(:func:`run_backend`)  answering a view op's call without    view: the same shape, strides, offset and
                       keywords (``view``, ``transpose``,    storage (``tests/test_view_kernels.py``)
                       ``permute`` of plain int arguments)
autograd recorder      ``autograd_recorders[op]`` answering  the autograd handler's node (tested in
(:func:`dispatch`)     a call without keywords that          ember-autograd)
                       requires grad
array wrapping         a kernel returning one new backend    ``Tensor._make`` (:func:`_wrap`); the
(:func:`_wrap_array`)  array                                 checked-kernel step of :func:`dispatch`
                                                             inlines it (the hottest site)
binary plan            two tensors of one dtype, or a        the op's general meta and kernel
(``BinaryRule`` in     tensor and a number that keeps its    (promotion, operand casts), with keywords
``_binary_plan``)      dtype: read by the meta function,     (``alpha=1``) or without
                       the kernel and the checked kernel
in-place direct        ``make_inplace``'s ``_INTO``:         the functional kernel, then a copy
kernel                 float32/float64 ``self``, operands    (``tests/test_inplace_direct.py``)
                       of its dtype or real numbers
profiler hook          a profiler recording: it is a mode    the same call below the modes
(:func:`_run_mode`)    on ``state.modes``, so no fast path   (:func:`run_below_modes`), timed; nothing
                       checks anything more when none        when not profiling (``tests/profiler``
                       records                               counts that no call reaches it)
=====================  ====================================  ===========================================

numpy's floating-point error state: :func:`run_backend` runs every kernel under
numpy's quiet state (PyTorch computes overflow and ``1 / 0`` silently); checked
kernels, which :func:`dispatch` and autograd's recorders call outside
:func:`run_backend`, set it themselves (``_binary_plan.BinaryRule.compute`` for the
binary ops), through :mod:`ember._ops._float_errors`.
"""

from __future__ import annotations

import contextlib
import sys
import threading

import numpy as _np

from .._alloc import AllocationError, allocation_error
from .._device import canonical_device, get_backend
from .._dtype import dtype as _dtype_cls
from .._meta import MetaArray
from .._storage import storage_of
from .._tensor import Size, Tensor
from ._float_errors import IGNORE_ALL, as_user, get_error_state, reset_error_state, set_error_state

__all__ = [
    "dispatch", "run_below_modes", "run_backend", "set_autograd_handler", "state", "autograd_recorders",
    "ops_intercepted", "profiler_recorder",
    "set_device_array_type", "PLAIN_TENSOR_TYPES", "register_plain_tensor_type", "wrap_array", "fast_paths_disabled",
]


class _State(threading.local):
    """Per-thread dispatcher state."""

    def __init__(self):
        self.modes = []  # active dispatch modes, innermost last
        self.overrides_disabled = False  # inside a default __ember_function__
        self.grad_enabled = True
        self.inference_mode = False


state = _State()

# Set by ember-autograd: handler(op, args, kwargs, device) -> result.
_autograd_handler = None

#: Filled by the autograd handler: op -> ``recorder(args, device)``, its autograd step for calls
#: without keyword arguments, which returns the result or ``NotImplemented`` (then the handler
#: runs). It spares the common call of a recorded op one frame and the handler's look-ups.
autograd_recorders = {}


def set_autograd_handler(handler):
    """Install the autograd layer (ember-autograd calls this once at import).

    ``handler(op, args, kwargs, device)`` is called for ops with at least one
    argument that requires grad while grad mode is on; it computes the result
    with :func:`run_backend` and records the graph. It may fill
    :data:`autograd_recorders`, which a new handler starts without.
    """
    global _autograd_handler
    _autograd_handler = handler
    autograd_recorders.clear()


_ndarray = _np.ndarray
_new_object = object.__new__
_device_array = _ndarray  # the array type of the accelerator backend's results (cupy.ndarray), once set


def _wrap_array(array, device):
    """A new tensor on ``device`` around ``array``, a backend array a kernel just made (``Tensor._make``
    without the class lookup): every site that wraps one kernel result calls it."""
    result = _new_object(Tensor)
    result._data = array
    result._device = device
    return result


wrap_array = _wrap_array


def set_device_array_type(array_type):
    """Tell the dispatcher the array type of the cuda backend (``cupy.ndarray``): results of that type
    are wrapped inline, as numpy arrays are on the CPU."""
    global _device_array
    _device_array = array_type


#: Types the hot paths treat as plain tensors: ``Tensor`` and subclasses that opt out of overrides
#: (``nn.Parameter``, see :func:`register_plain_tensor_type`), as the general scan does.
PLAIN_TENSOR_TYPES = {Tensor}


def register_plain_tensor_type(cls):
    """Let the dispatcher's hot loop and autograd's recorders take instances of Tensor subclass ``cls`` as
    plain tensors. Only for subclasses whose ``__ember_function__`` is the opting-out marker
    (``nn.Parameter``'s): the general scan would see nothing to override in them either.

    Raises:
        TypeError: for a class that is not such a subclass.
    """
    function = getattr(cls, "__ember_function__", None)
    if not (isinstance(cls, type) and issubclass(cls, Tensor)) or getattr(function, "__func__", None) is not \
            _disabled_ember_function:
        raise TypeError(f"register_plain_tensor_type: {cls!r} is not a Tensor subclass that opts out of overrides")
    PLAIN_TENSOR_TYPES.add(cls)


# arguments that are never tensors nor overridable (a Size holds ints: grad.expand(input.shape))
_PLAIN_TYPES = frozenset({int, float, bool, complex, str, type(None), slice, type(Ellipsis), _dtype_cls, Size})


def _disabled_ember_function(cls, func, types, args=(), kwargs=None):
    """Marker ``__ember_function__`` that opts a subclass out of overrides (``nn.Parameter``).

    A subclass of such a class that overrides ``__ember_function__`` and calls this one through ``super()``
    gets ``func`` run with overrides off, so the call does not come back to it.
    """
    previous = state.overrides_disabled
    state.overrides_disabled = True
    try:
        return func(*args, **(kwargs or {}))
    finally:
        state.overrides_disabled = previous


class _Scan:
    """What one pass over the arguments found."""

    __slots__ = ("arguments", "device", "needs_grad", "overloaded", "sequences")

    def __init__(self, arguments):
        self.arguments = arguments  # what is scanned (read again only when two devices meet)
        self.device = None
        self.needs_grad = False
        self.overloaded = None
        self.sequences = False  # a list or tuple argument: Op.check_not_sequences looks at it


def _see_tensor(scan, t, op):
    d = t._device
    if t._requires_grad:
        scan.needs_grad = True
    if scan.device is None:
        scan.device = d
    elif d is not scan.device:
        scan.device = _common_device(op, scan.device, t, scan.arguments)


def _holds_cpu_tensor_with_dims(values):
    """Whether ``values`` (arguments: nested lists, tuples and dicts) hold a CPU tensor of one or more dims."""
    for value in values.values() if isinstance(values, dict) else values:
        if isinstance(value, Tensor):
            if value._device.type == "cpu" and value._data.ndim != 0:
                return True
        elif isinstance(value, (list, tuple, dict)) and _holds_cpu_tensor_with_dims(value):
            return True
    return False


def _common_device(op, current, t, seen=()):
    """The device of an op mixing ``current`` with tensor ``t``'s device.

    Zero-dim CPU tensors may join tensors of any device (as in PyTorch). ``seen`` holds the op's
    arguments (nested lists, tuples and dicts), those met before ``t`` among them; when ``current``
    is the CPU, a CPU tensor with dimensions among them is a mismatch (the CPU device may only have
    come from zero-dim tensors). Only this rare path reads them.

    Raises:
        RuntimeError: "Expected all tensors to be on the same device" otherwise.
    """
    d = t._device
    if "cross_device" in op.tags or (d.type == "cpu" and t._data.ndim == 0):
        return current
    if d.type == current.type and d.index == current.index:
        return current  # the same device as another object (callers compare devices by identity first)
    if current.type == "cpu" and not _holds_cpu_tensor_with_dims(seen):
        return d  # the CPU tensors so far were all zero-dim
    raise RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {current} and {d}! "
        f"(when checking argument for op {op.name})"
    )


def _see(scan, a, op):
    t = type(a)
    if t is Tensor:
        _see_tensor(scan, a, op)
    elif t in _PLAIN_TYPES:
        return
    elif t is list or t is tuple:
        scan.sequences = True
        for b in a:
            if type(b) in _PLAIN_TYPES:
                continue
            _see(scan, b, op)
    elif isinstance(a, Tensor):
        _see_tensor(scan, a, op)
        if t.__ember_function__.__func__ is not _disabled_ember_function and not state.overrides_disabled:
            scan.overloaded = (scan.overloaded or []) + [a]
    elif hasattr(t, "__ember_function__") and not state.overrides_disabled:
        scan.overloaded = (scan.overloaded or []) + [a]


def _scan(args, kwargs, op):
    scan = _Scan((args, kwargs or {}))
    for a in args:
        if type(a) is Tensor:
            _see_tensor(scan, a, op)
        else:
            _see(scan, a, op)
    if kwargs:
        for a in kwargs.values():
            _see(scan, a, op)
    return scan


def dispatch(op, args, kwargs):
    """Run ``op`` on ``args``/``kwargs`` through every dispatcher layer.

    The loop below is the hot path: positional arguments that are plain
    tensors, Python scalars or tuples/lists of scalars are classified inline;
    anything else (lists of tensors, subclasses, proxies, keyword tensors,
    ``out=``) takes the general scan.
    """
    if kwargs:
        return _dispatch_general(op, args, kwargs)
    device = None
    needs_grad = False
    sequence = False
    for a in args:
        t = type(a)
        if t is Tensor or t in PLAIN_TENSOR_TYPES:
            if device is None:
                device = a._device
            elif a._device is not device:
                device = _common_device(op, device, a, args)
            if a._requires_grad:
                needs_grad = True
        elif t not in _PLAIN_TYPES:
            if (t is not tuple and t is not list) or not _all_plain(a):
                return _dispatch_general(op, args, kwargs)
            # a tuple of ints (conv's stride=(1, 1)): nothing to scan in it, but it must not stand
            # for a tensor (add([1, 2], t)); only calls holding a sequence pay for the check, once
            if not sequence:
                op.check_not_sequences(args, None)
                sequence = True
    if state.modes:
        return _run_mode(op, args, kwargs, state.modes)
    if device is None:
        if sequence:  # no tensor (a factory's size tuple): the general path finds the default device
            return _dispatch_general(op, args, kwargs)
        device = canonical_device(None)  # no tensor: a factory, on the default device
    # One handler for the layers below (a try costs nothing until it raises): a kernel's failed
    # allocation becomes PyTorch's RuntimeError, and a number where a tensor belongs names the
    # argument (Op.explain_attribute_error). Autograd's recorders may call checked kernels too.
    try:
        if needs_grad and _autograd_handler is not None and state.grad_enabled:
            recorder = autograd_recorders.get(op)
            if recorder is not None:
                result = recorder(args, device)
                if result is not NotImplemented:
                    return result
            return _autograd_handler(op, args, kwargs, device)
        checked = op.checked_kernels.get(device.type)
        if checked is not None:  # run_backend's first step, inlined
            array = checked(*args)
            if array is not None:  # _wrap_array, inlined: its call was 5% of a + b on 16 elements
                result = _new_object(Tensor)
                result._data = array
                result._device = device
                return result
        return run_backend(op, args, kwargs, device)
    except MemoryError as exc:
        raise _allocation_error(exc, device) from None
    except AttributeError as exc:
        op.explain_attribute_error(args, kwargs, exc)
        raise


def _dispatch_failed(op, args, kwargs, device, exc):
    """Raise what :func:`dispatch`'s except clauses raise for ``exc`` (a MemoryError or an AttributeError
    from the layers below): the native dispatch hands its errors here."""
    if isinstance(exc, MemoryError):
        raise _allocation_error(exc, device) from None
    op.explain_attribute_error(args, kwargs, exc)
    raise exc


def _native_dispatch(reference):
    """:func:`dispatch` compiled (``ember._C.make_dispatch``, csrc/dispatch.h), or None without the extension.

    It takes the calls that the Python function's inline loop takes (plain tensors of one device object
    and plain values, no keywords, no mode) and hands every other call to ``reference`` unchanged.
    """
    try:
        from .. import _C
    except ImportError:
        return None
    make = getattr(_C, "make_dispatch", None)
    if make is None:
        return None
    return make({
        "reference": reference, "tensor_type": Tensor, "plain_tensor_types": PLAIN_TENSOR_TYPES,
        "plain_types": _PLAIN_TYPES, "state": state, "globals": globals(), "run_backend": run_backend,
        "failed": _dispatch_failed,
    })


def _all_plain(values):
    """Whether a tuple or list argument holds only plain values (``stride=(1, 1)``): nothing for the scan to see."""
    for v in values:
        if type(v) not in _PLAIN_TYPES:
            return False
    return True


def _dispatch_general(op, args, kwargs):
    out = kwargs.pop("out", None) if kwargs and op.has_out else None
    scan = _scan(args, kwargs, op)
    if scan.overloaded is not None:
        from ..overrides import handle_ember_function

        if out is not None:
            kwargs["out"] = out
        # __ember_function__ is the user's code: under the user's numpy error state inside backward (see _float_errors)
        return as_user(handle_ember_function, op, scan.overloaded, args, kwargs)
    if scan.sequences:
        op.check_not_sequences(args, kwargs)
    if out is not None:
        out_module = _OUT_MODULE or _load_out_module()
        # CPU results straight into out when a C++ writer takes the call (no result, no copy)
        written = out_module.write_direct(op, out, args, kwargs, scan)
        if written is not None:
            return written
        return out_module.write_out(op, out, run_below_overrides(op, args, kwargs, scan))
    return run_below_overrides(op, args, kwargs, scan)


_OUT_MODULE = None  # ember._ops._out, imported on first use (it imports this module)


def _load_out_module():
    global _OUT_MODULE
    from . import _out

    _OUT_MODULE = _out
    return _out


def run_below_overrides(op, args, kwargs, scan=None):
    """Layers 2 to 4: modes, autograd, backend."""
    modes = state.modes
    if modes:
        return _run_mode(op, args, kwargs, modes)
    return run_below_modes(op, args, kwargs, scan)


def _run_mode(op, args, kwargs, modes):
    """Hand the call to the innermost mode, which runs with itself popped off the stack.

    The profiler (:mod:`ember.profiler`) records through this layer: while it records, it sits on the
    mode stack, so calls reach it through the one check of ``state.modes`` every path already makes, and
    costs nothing otherwise. Its ``__ember_record__(op, args, kwargs)`` takes the call as given (not
    normalised) and stays on the stack, so the ops a composite op runs are recorded too.

    A mode may name the ops it handles in ``__ember_ops__`` (a set of op names; the autocast mode's
    are the ops some policy casts): any other op runs below it as given, not normalised (normalising
    was most of the cost of an op inside an autocast region).
    """
    mode = modes[-1]
    record = getattr(mode, "__ember_record__", None)
    if record is not None:
        return record(op, args, kwargs)
    handled = getattr(mode, "__ember_ops__", None)
    modes.pop()
    try:
        if handled is not None and op.name not in handled:
            return dispatch(op, args, kwargs)
        nargs, nkwargs = op.normalize(args, kwargs)
        types = tuple({type(a) for a in _flat_tensors(nargs, nkwargs)})
        return mode.__ember_dispatch__(op, types, nargs, nkwargs)
    finally:
        modes.append(mode)


def ops_intercepted():
    """Whether an active dispatch mode must see each op: a tracer, fake tensors, vmap, autocast.

    Fused fast paths that call kernels directly, not op by op through the dispatcher (a multi-tensor norm,
    the fused optimizer, a cached causal mask, cuda backward kernels), step aside while this is true, so
    the mode sees every op. A mode that only watches calls sets ``observes_only = True`` (the profiler's
    recorder): under it the program keeps its fast paths, so what is timed is what runs without it.
    Costs one empty loop when no mode is active.
    """
    for mode in state.modes:
        if not getattr(mode, "observes_only", False):
            return True
    return False


def profiler_recorder():
    """The recorder of the profiler that records now (``ember.profiler``'s), or None.

    Looked up, not imported: ``import ember`` leaves the profiler until a program uses it, and code on the
    hot path (the ``_foreach_*`` ops, each optimizer step) asks this once per call: a dict look-up when no
    profiler was ever loaded.
    """
    recorder = sys.modules.get("ember.profiler._recorder")
    return None if recorder is None else recorder.active_recorder()


def _flat_tensors(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            yield a
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, Tensor):
                    yield b


def run_below_modes(op, args, kwargs, scan=None):
    """Layers 3 and 4: autograd when any input requires grad, then the backend."""
    if scan is None:
        scan = _scan(args, kwargs, op)
    device = scan.device
    if device is None or (kwargs and "factory" in op.tags and kwargs.get("device") is not None):
        # A factory's device= wins over its tensor arguments' (empty_like(meta_tensor, device="cpu")).
        device = canonical_device(kwargs.get("device")) if kwargs else canonical_device(None)
    try:  # as in dispatch: failed allocations and numbers where tensors belong get PyTorch's errors
        if scan.needs_grad and _autograd_handler is not None and state.grad_enabled:
            return _autograd_handler(op, args, kwargs, device)
        return run_backend(op, args, kwargs, device)
    except MemoryError as exc:
        raise _allocation_error(exc, device) from None
    except AttributeError as exc:
        op.explain_attribute_error(args, kwargs, exc)
        raise


def run_backend(op, args, kwargs, device):
    """Layer 4: check arguments with the meta function, then run the device's kernel.

    A prim view op without a kernel of its own is built by the backend's
    strided-view primitive from the meta function's strides. A composite op
    without a kernel for the device runs its decomposition.

    Raises:
        NotImplementedError: when a prim has no kernel for the device type.
    """
    if not kwargs:
        checked = op.checked_kernels.get(device.type)  # a kernel that checks what the meta function would
        if checked is not None:
            try:
                array = checked(*args)
            except MemoryError as exc:
                raise _allocation_error(exc, device) from None
            if array is not None:
                return _wrap_array(array, device)
    kernel = op.kernels.get(device.type)
    kind = op.kind
    if kernel is None:
        if op.decomposition is not None:
            if not op.decomposition_checks:
                op.meta(*args, **kwargs)  # the composite's own argument checks, as for prims
            return op.decomposition(*args, **kwargs)
        if kind == "view":
            view_kernel = op.view_kernels.get(device.type) if not kwargs else None
            if view_kernel is not None:  # the common calls' view, without the meta function (see Op)
                array = view_kernel(*args)
                if array is not None:
                    return Tensor._make_view(array, args[0])
            return _strided_views(op.meta(*args, **kwargs), args[0], device)
        kernel = get_backend(device.type).fallback_kernel(op)  # non-CPU devices only: every CPU prim has a kernel
        if kernel is None:
            raise NotImplementedError(
                f"Could not run '{op.name}' with arguments from the '{device.type}' backend: the op is a "
                f"{op.category} with no kernel for device type '{device.type}'"
            )
    if device.type != "meta":
        op.meta(*args, **kwargs)  # also refuses sizes that do not fit int64 before the kernel allocates
    # Kernels compute inf and NaN silently, as PyTorch does: numpy's floating-point warnings are
    # switched off here for every kernel (a cast of a float16 sum past 65504 would warn); the
    # checked kernels, called outside this function, quiet themselves (see the module docstring).
    quiet_token = None if get_error_state() is IGNORE_ALL else set_error_state(IGNORE_ALL)
    try:
        result = kernel(*args, **kwargs)
    except MemoryError as exc:
        raise _allocation_error(exc, device) from None
    finally:
        if quiet_token is not None:
            reset_error_state(quiet_token)
    if kind == "function":
        if type(result) is _ndarray or type(result) is _device_array:  # a new numpy (or GPU) array
            result = _wrap_array(result, device)
        else:
            result = _wrap(result, device, op)
        if kwargs and "factory" in op.tags and kwargs.get("requires_grad"):
            result.requires_grad_(True)
        return result
    if kind == "view":
        return _wrap_view(result, args[0], op)
    if kind == "inplace":
        self = args[0]
        self._bump_version()
        return self
    return result


def _strided_views(spec, base, device):
    """Views of ``base``'s storage described by meta arrays (one, or a tuple)."""
    storage = storage_of(base)
    backend = get_backend(device.type)
    if type(spec) is tuple:
        return tuple(_strided_view(backend, storage, s, base) for s in spec)
    return _strided_view(backend, storage, spec, base)


def _strided_view(backend, storage, spec, base):
    strides = spec._elem_strides
    array = backend.strided_view(storage, spec.shape, strides, spec.offset, spec.dtype)
    return Tensor._make_view(array, base, strides, spec.offset)


def _allocation_error(exc, device):
    """The RuntimeError for a kernel's failed allocation (PyTorch's words); one raised below passes as is."""
    return exc if isinstance(exc, AllocationError) else allocation_error(exc, device)


def _wrap(result, device, op):
    if isinstance(result, Tensor):  # a kernel may hand back an argument (F.relu(x, inplace=True) returns x)
        return result
    if type(result) is tuple:
        wrapped = tuple(_wrap_array(r, device) for r in result)
        return op.return_type(*wrapped) if op.return_type is not None else wrapped
    return _wrap_array(result, device)


def _wrap_view(result, base, op):
    if type(result) is tuple or type(result) is list:
        return tuple(_view_of(r, base) for r in result)
    return _view_of(result, base)


def _view_of(array, base):
    if type(array) is MetaArray:  # meta views carry their strides and offset
        return Tensor._make_view(array, base, array._elem_strides, array.offset)
    return Tensor._make_view(array, base)


@contextlib.contextmanager
def fast_paths_disabled():
    """Within the block, every call of an op object takes the general path (a switch for tests).

    ``op(...)`` goes through the general scan (:func:`_dispatch_general`) instead of the positional
    scan, no checked kernel runs, and the binary pointwise ops find no plan (they promote and cast
    as the general path does): what the fast paths of the module docstring must equal. Tensor
    methods and operators (``a + b``) bound :func:`dispatch` at import and keep the positional
    scan, but lose the checked kernels and plans too. Not thread-safe: for tests only.
    """
    from . import _binary_plan
    from ._registry import registry

    module = globals()
    checked = {op: op.checked_kernels for op in registry.values()}
    views = {op: op.view_kernels for op in registry.values()}
    module["dispatch"] = _dispatch_general_only
    for op in checked:
        op.checked_kernels = {}
        op.view_kernels = {}
    try:
        with _binary_plan.plans_disabled():
            yield
    finally:
        module["dispatch"] = _dispatch_fast
        for op, kernels in checked.items():
            kernels.update(op.checked_kernels)  # any registered inside the block stay
            op.checked_kernels = kernels
            views[op].update(op.view_kernels)
            op.view_kernels = views[op]


def _dispatch_general_only(op, args, kwargs):
    return _dispatch_general(op, args, dict(kwargs) if kwargs else {})


#: The Python hot path: the reference of the compiled one, which calls it for every call it does not take.
python_dispatch = dispatch
dispatch = _native_dispatch(python_dispatch) or python_dispatch
_dispatch_fast = dispatch
