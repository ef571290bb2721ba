"""The autograd graph: nodes, edges, saved tensors and hooks.

A tensor computed from tensors that require grad points at the **node** that
made it (``t.grad_fn``) and says which output of that node it is
(``t._output_nr``). A node knows, for each of its differentiable inputs, the
edge ``(node, output_nr)`` that the input's gradient flows to
(``next_functions``); leaves that require grad are reached through their
:class:`AccumulateGrad` node. Running a node maps the gradients of its
outputs to the gradients of its inputs.
"""

from __future__ import annotations

import itertools
import threading
import weakref

from ember._hooks import RemovableHandle
from ember._ops._dispatch import state as _dispatch_state
from ember._ops._float_errors import as_user
from ember._storage import storage_of
from ember._tensor import Tensor

__all__ = [
    "Node",
    "AccumulateGrad",
    "SavedTensor",
    "saved_tensors_hooks",
    "save_on_cpu",
    "disable_saved_tensors_hooks",
    "RemovableHandle",
    "increment_version",
    "TensorMeta",
    "tensor_meta",
]

_sequence = itertools.count()
_new_object = object.__new__


class _HookDict(dict):
    """An ordered dict of hooks that :class:`RemovableHandle` can refer to weakly."""

    __slots__ = ("__weakref__",)


def _add_hook(hooks, fn):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


class Node:
    """A backward function of the graph (PyTorch's ``torch.autograd.graph.Node``).

    Attributes:
        next_functions (tuple[tuple[Node or None, int]]): per input of the forward op,
            the edge its gradient flows to (``(None, 0)`` when it needs none).
        metadata (dict): free-form, for users and tools.
    """

    _pre_hooks = None  # {key: fn(grad_outputs) -> grad_outputs or None}
    _hooks = None  # {key: fn(grad_inputs, grad_outputs) -> grad_inputs or None}
    _tensor_pre_hooks = None  # {output_nr: _HookDict of fn(grad) -> grad or None}
    _retain_grad_hooks = None  # {output_nr: fn(grad)} (Tensor.retain_grad), run after the tensor hooks
    _any_hooks = False  # whether any of the hook tables above is set (the engine's fast path checks this)
    # whether apply runs ember's own code only (no user callbacks besides saved-tensor unpack hooks, which
    # SavedTensor.unpack runs through as_user): the engine then leaves numpy's error state to ember's
    _runs_ember_code = False
    _anomaly_trace = None  # the forward stack, recorded in anomaly mode
    _anomaly_parent = None

    def __init__(self, next_functions=(), num_outputs=1):
        self.next_functions = tuple(next_functions)
        self._num_outputs = num_outputs
        self._seq = next(_sequence)

    @property
    def metadata(self):
        """A dict for users and tools to attach information to the node (created on first use)."""
        meta = self.__dict__.get("_metadata")
        if meta is None:
            meta = self.__dict__["_metadata"] = {}
        return meta

    def name(self):
        """The node's name, e.g. ``"MulBackward0"``."""
        return type(self).__name__

    def apply(self, grad_outputs):
        """Gradients of the inputs, one per edge of ``next_functions``, from the outputs' gradients."""
        raise NotImplementedError

    def register_hook(self, fn):
        """Call ``fn(grad_inputs, grad_outputs)`` after the node runs; it may return new ``grad_inputs``.

        ``grad_inputs`` are the gradients the node computed for its inputs, ``grad_outputs``
        the gradients it received.
        """
        if self._hooks is None:
            self._hooks = _HookDict()
        self._any_hooks = True
        return _add_hook(self._hooks, fn)

    def register_prehook(self, fn):
        """Call ``fn(grad_outputs)`` before the node runs; it may return new ``grad_outputs``."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        self._any_hooks = True
        return _add_hook(self._pre_hooks, fn)

    def _register_tensor_prehook(self, output_nr, fn):
        self._any_hooks = True
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        hooks = self._tensor_pre_hooks.get(output_nr)
        if hooks is None:
            hooks = self._tensor_pre_hooks[output_nr] = _HookDict()
        return _add_hook(hooks, fn)

    def _release(self):
        """Free what the node saved for backward (after a backward without ``retain_graph``)."""

    def _apply_release(self, grad_outputs):
        """``apply(grad_outputs)`` (skipped when None, then None is returned) and then ``_release()``.

        The engine's compiled loop (csrc/engine.cpp) makes its two calls for a node of a backward that
        frees the graph as this one; a node class may do both in one frame (FormulaNode does).
        """
        out = None if grad_outputs is None else self.apply(grad_outputs)
        self._release()
        return out

    def __repr__(self):
        return f"<{self.name()} object>"


class AccumulateGrad(Node):
    """The node that adds a gradient into a leaf's ``.grad``.

    Attributes:
        variable (Tensor): the leaf.
    """

    def __init__(self, variable):
        super().__init__((), 1)
        self.variable = variable
        self._seq = float("inf")  # run as soon as ready, as PyTorch does

    def apply(self, grad_outputs):
        raise RuntimeError("AccumulateGrad is applied by the engine")

    def name(self):
        return "ember::autograd::AccumulateGrad"


def accumulator_of(leaf):
    """The leaf's :class:`AccumulateGrad` node (kept alive by the graphs that use it)."""
    ref = leaf._grad_accumulator
    node = ref() if ref is not None else None
    if node is None:
        node = AccumulateGrad(leaf)
        leaf._grad_accumulator = weakref.ref(node)
    return node


def edge_of(t):
    """The edge ``(node, output_nr)`` that ``t``'s gradient flows to, or ``(None, 0)``."""
    if not t._requires_grad:
        return (None, 0)
    fn = t._grad_fn if t._view_info is None else t.grad_fn
    if fn is None:
        return (accumulator_of(t), 0)
    return (fn, t._output_nr)


# ---------------------------------------------------------------- saved tensors


class _HooksState(threading.local):
    def __init__(self):
        self.stack = []  # (pack, unpack) pairs, innermost last
        self.disabled_reason = None


_hooks_state = _HooksState()
# How many saved_tensors_hooks contexts are open, in all threads: while none is, saving a tensor skips
# the thread-local lookup of the stack (a threading.local attribute read costs more than the rest of
# saving an input). Changed under the lock; read without it (a stale nonzero only takes the slow check).
_hooks_open = 0
_hooks_open_lock = threading.Lock()


class SavedTensor:
    """A tensor kept for backward, with the version it had when saved.

    Unpacking checks that no in-place operation changed it since, and raises
    PyTorch's "modified by an inplace operation" error otherwise.
    """

    __slots__ = ("_tensor", "_version", "_node_ref", "_output_nr", "_packed", "_unpack", "_is_output", "_requires_grad")

    def __init__(self, tensor, node=None, output_nr=0, is_output=False):
        self._is_output = is_output
        self._output_nr = output_nr
        self._requires_grad = tensor._requires_grad
        self._node_ref = None
        if is_output:
            # Keep a plain alias, not the output itself: the output holds its grad_fn,
            # which holds this, and the cycle would outlive the training step.
            storage = storage_of(tensor)
            alias = Tensor._make(tensor._data, tensor._device)
            alias._storage = storage
            alias._strides, alias._offset = tensor._strides, tensor._offset
            self._node_ref = weakref.ref(node)
            tensor = alias
            self._version = storage.version
        else:
            self._version = tensor._version
        stack = _hooks_state.stack if _hooks_open else None
        if stack:
            pack, unpack = stack[-1]
            self._packed = pack(tensor if not is_output else _reattach(tensor, node, output_nr, self._requires_grad))
            self._unpack = unpack
            self._tensor = None
        else:
            self._tensor = tensor
            self._unpack = None

    @classmethod
    def _of_input(cls, tensor):
        """``SavedTensor(tensor)`` for an input, the attributes that a plain unpack reads set directly."""
        if _hooks_open and _hooks_state.stack:
            return cls(tensor)
        saved = _new_object(cls)
        saved._is_output = False
        storage = tensor._storage
        saved._version = 0 if storage is None else storage.version
        saved._tensor = tensor
        saved._unpack = None
        return saved

    @classmethod
    def _of_output(cls, tensor, node):
        """``SavedTensor(tensor, node, 0, is_output=True)`` for the one output of a new tensor (see __init__)."""
        if (_hooks_open and _hooks_state.stack) or tensor._strides is not None or tensor._offset is not None:
            return cls(tensor, node, 0, is_output=True)
        saved = _new_object(cls)
        saved._is_output = True
        saved._output_nr = 0
        saved._requires_grad = tensor._requires_grad
        saved._node_ref = None  # no weak reference: the node passes itself to unpack (see there)
        storage = storage_of(tensor)
        alias = _new_object(Tensor)
        alias._data = tensor._data
        alias._device = tensor._device
        alias._storage = storage
        saved._tensor = alias
        saved._version = storage.version
        saved._unpack = None
        return saved

    def unpack(self, node_name="", index=0, node=None):
        """The saved tensor, checked against in-place modification.

        ``node`` is the node that saved it: a saved output made by :meth:`_of_output` keeps no reference
        to its node (a weak reference per op costs), so its node passes itself here.

        Raises:
            RuntimeError: if it was freed by an earlier backward, or modified in place since it was saved.
        """
        if self._unpack is not None:
            return as_user(self._unpack, self._packed)  # the user's hook: under the user's numpy error state
        t = self._tensor
        if t is None:
            raise RuntimeError(_FREED_MESSAGE)
        storage = t._storage  # t._version, inlined: this runs for every saved tensor of every backward
        if (0 if storage is None else storage.version) != self._version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{t.dtype.name} {list(t.shape)}], which is {'output' if self._is_output else 'input'} {index} of "
                f"{node_name}, is at version {t._version}; expected version {self._version} instead. Hint: the "
                "backtrace further above shows the operation that failed to compute its gradient; enable anomaly "
                "detection with ember.autograd.set_detect_anomaly(True) to see where the tensor was used."
            )
        if self._is_output and _dispatch_state.grad_enabled:  # double backward: the output's history counts
            if self._node_ref is not None:
                node = self._node_ref()
            return _reattach(t, node, self._output_nr, self._requires_grad)
        return t



def _reattach(alias, node, output_nr, requires_grad):
    """The saved output as a tensor of the graph again (for double backward)."""
    if node is None or not requires_grad:
        return alias
    t = Tensor._make(alias._data, alias._device)
    t._storage = alias._storage
    t._strides, t._offset = alias._strides, alias._offset
    t._requires_grad = True
    t._grad_fn = node
    t._output_nr = output_nr
    return t


_FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


class saved_tensors_hooks:
    """Context manager: pack every tensor autograd saves with ``pack_hook``, unpack with ``unpack_hook``.

    ``pack_hook(tensor) -> object`` runs when a tensor is saved for backward;
    ``unpack_hook(object) -> tensor`` runs when backward needs it. Use it to
    offload activations to another device or to compress them.

    Raises:
        RuntimeError: on entry, inside :class:`disable_saved_tensors_hooks`.
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if _hooks_state.disabled_reason is not None:
            raise RuntimeError(_hooks_state.disabled_reason)
        global _hooks_open
        with _hooks_open_lock:
            _hooks_open += 1
        _hooks_state.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        global _hooks_open
        _hooks_state.stack.pop()
        with _hooks_open_lock:
            _hooks_open -= 1
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are moved to the CPU at forward time and back at backward time.

    Args:
        pin_memory (bool): accepted for PyTorch compatibility (no effect on CPU-only builds).
    """

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            return (t.device, t.cpu())

        def unpack(packed):
            device, t = packed
            return t.to(device)

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    """Context manager: using :class:`saved_tensors_hooks` inside raises ``RuntimeError(error_message)``."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self._previous = _hooks_state.disabled_reason
        _hooks_state.disabled_reason = self.error_message
        return self

    def __exit__(self, *exc):
        _hooks_state.disabled_reason = self._previous
        return False


def increment_version(tensor):
    """Bump the version counter of ``tensor``'s storage, as an in-place write does."""
    tensor._bump_version()


class TensorMeta:
    """What a formula that reads no values keeps of a tensor argument (``input_meta``).

    It answers as the tensor would: ``shape``, ``size()``, ``dim()``/``ndim``,
    ``numel()``, ``stride()``, ``storage_offset()``, ``dtype``, ``device``,
    ``is_complex()``, ``is_floating_point()``.
    """

    __slots__ = ("shape", "_np_dtype", "device", "_strides", "_offset")

    def __init__(self, t):
        self.shape = t.shape
        self._np_dtype = t._data.dtype
        self.device = t._device
        self._strides = t.stride()
        self._offset = t.storage_offset()

    @property
    def dtype(self):
        from ember._dtype import from_numpy_dtype

        return from_numpy_dtype(self._np_dtype)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return len(self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def storage_offset(self):
        return self._offset

    def is_complex(self):
        return self._np_dtype.kind == "c"

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def __repr__(self):
        return f"TensorMeta(shape={list(self.shape)}, stride={list(self._strides)}, dtype={self.dtype})"


def tensor_meta(v):
    """:class:`TensorMeta` of a tensor, a list of them for a list of tensors, ``v`` itself otherwise."""
    if isinstance(v, Tensor):
        return TensorMeta(v)
    if type(v) in (list, tuple):
        return [TensorMeta(t) if isinstance(t, Tensor) else t for t in v]
    return v
