"""The Autograd step of the dispatcher: run an op and record its backward node.

:func:`handle` is installed with ``ember._ops._dispatch.set_autograd_handler``;
the dispatcher calls it for ops with an argument that requires grad while
grad mode is on. What happens depends on the op's entry in the derivative
table (:mod:`ember.autograd._table`):

* a formula: run the kernel with grad mode off, then attach a
  :class:`FormulaNode` to the outputs (saving what the formulas read);
* through decomposition: run the decomposition with grad mode on, so its
  ops record themselves;
* non-differentiable: run it; outputs do not require grad.

In-place ops are recorded as their out-of-place op followed by a copy into
``self`` (which then points at the new node); when ``self`` is a view, the
base's history is rewritten with :class:`CopySlices`, so gradients flow
through every view of the storage, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

import ember
from ember._dtype import bfloat16 as _bf16
from ember._dtype import from_numpy_dtype
from ember._ops import registry
from ember._ops._dispatch import run_backend, state
from ember._tensor import Tensor

from . import _anomaly
from ._table import DERIVATIVES, NONDIFFERENTIABLE, THROUGH_DECOMPOSITION
from .derivatives._helpers import as_strided_backward
from .graph import Node, SavedTensor, _sequence, edge_of, tensor_meta

__all__ = [
    "handle",
    "FormulaNode",
    "CopySlices",
    "view_grad_fn",
    "DIFFERENTIABLE_DTYPES",
    "sum_to",
    "validate_grad",
    "make_node",
]

#: numpy dtypes of tensors that can require grad.
DIFFERENTIABLE_DTYPES = frozenset(
    np.dtype(t) for t in (np.float16, np.float32, np.float64, np.complex64, np.complex128, _bf16.numpy_dtype)
)

_copy_ = registry["copy_"]
_detach = registry["detach"]


def _is_tensor(v):
    return type(v) is Tensor or isinstance(v, Tensor)


# ------------------------------------------------------------------ formula nodes


class FormulaNode(Node):
    """A node whose backward is an entry of the derivative table.

    Attributes:
        entry (Derivative): the op's formulas.
    """

    _needed = -1  # bit mask over grad_args of the arguments that need a gradient (-1: all)

    def __init__(self, entry, next_functions, input_meta, layout, num_outputs):
        # Node.__init__, inlined: this runs for every recorded op
        self.next_functions = next_functions
        self._num_outputs = num_outputs
        self._seq = next(_sequence)
        self.entry = entry
        self._input_meta = input_meta  # per edge: (shape, dtype, device)
        self._layout = layout  # per differentiable argument: (name, first edge, count or -1 for a tensor)
        self._saved = None  # {argument name: value}; SavedTensor for tensors
        self._saved_results = None  # tuple of SavedTensor
        self._output_meta = None  # multi-output ops: (shape, dtype, device) per output
        if _anomaly._state.enabled:
            _anomaly.record_forward(self)

    def name(self):
        return self.entry.node_name

    def _unpacked(self):
        name = self.entry.node_name
        env = {}
        if self._saved_results is _FREED_TENSOR:
            raise RuntimeError(_FREED)
        for key, value in self._saved.items():
            if value is _FREED_TENSOR:
                raise RuntimeError(_FREED)
            if type(value) is SavedTensor:
                value = value.unpack(name)
            elif type(value) is list and value and type(value[0]) is SavedTensor:
                value = [v.unpack(name, i) for i, v in enumerate(value)]
            env[key] = value
        if self._saved_results is not None:
            results = tuple(s.unpack(name, i) if s is not None else None for i, s in enumerate(self._saved_results))
            env["result"] = results[0]
            env["results"] = results
        return env

    def apply(self, grad_outputs):
        env = self._unpacked()
        if self._output_meta is not None:
            grad_outputs = _materialize(grad_outputs, self._output_meta)
        env["grad"] = grad_outputs[0]
        if self.entry.reads_grads:
            env["grads"] = tuple(grad_outputs)
        next_functions = self.next_functions
        grads = [None] * len(next_functions)
        layout = self._layout
        for formula in self.entry.formulas:
            if formula.joint:
                mask = tuple(_needs(next_functions, layout[name]) for name in formula.inputs)
                if not any(mask):
                    continue
                env["output_mask"] = mask
                out = formula.call(env)
                for name, g, needed in zip(formula.inputs, out, mask):
                    if needed:
                        _place(grads, layout[name], g)
                continue
            slot = layout[formula.inputs[0]]
            if slot[1] < 0:
                if next_functions[slot[0]][0] is None:
                    continue
                grads[slot[0]] = formula.call(env)
            elif _needs(next_functions, slot):
                _place(grads, slot, formula.call(env))
        meta = self._input_meta
        for i, g in enumerate(grads):
            if g is not None:
                m = meta[i]
                if m is None or next_functions[i][0] is None:
                    grads[i] = None  # an input that needs no gradient
                    continue
                if g._data.shape != m[0] or g._data.dtype != m[1] or g._device is not m[2]:
                    grads[i] = validate_grad(g, m, self, i)
        return grads

    def _release(self):
        # Only saved tensors are freed: a node that saved none can run again, as in PyTorch.
        saved = self._saved
        if saved:
            for key, value in saved.items():
                if type(value) is SavedTensor or (type(value) is list and value and type(value[0]) is SavedTensor):
                    saved[key] = _FREED_TENSOR
        if self._saved_results is not None:
            self._saved_results = _FREED_TENSOR


_FREED_TENSOR = object()  # what a saved tensor becomes after a backward without retain_graph
_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


def _needs(next_functions, slot):
    first, count = slot
    if count < 0:
        return next_functions[first][0] is not None
    return any(next_functions[i][0] is not None for i in range(first, first + count))


def _place(grads, slot, g):
    first, count = slot
    if count < 0:
        grads[first] = g
    elif g is not None:
        for i, gi in enumerate(g):
            grads[first + i] = gi


def _materialize(grad_outputs, output_meta):
    """Missing gradients of differentiable outputs become zeros (formulas may then add them)."""
    out = list(grad_outputs)
    for i, g in enumerate(out):
        if g is None and output_meta[i] is not None:
            shape, dtype, device = output_meta[i]
            out[i] = ember.zeros(shape, dtype=dtype, device=device)
    return out


def validate_grad(g, meta, node, index):
    """``g`` summed to the input's shape and cast to its dtype and device.

    ``meta`` is the input's ``(shape, numpy dtype, device)``.

    Raises:
        RuntimeError: when ``g`` cannot be summed to the input's shape.
    """
    shape, np_dtype, device = meta
    if g._data.shape != shape:
        g = sum_to(g, shape, node, index)
    if g._data.dtype != np_dtype:
        dtype = from_numpy_dtype(np_dtype)
        if g.is_complex() and not dtype.is_complex:
            g = ember.real(g)
        if g.dtype is not dtype:
            g = g.to(dtype)
    if g._device != device:
        g = g.to(device)
    return g


def sum_to(g, shape, node=None, index=0):
    """Sum ``g`` over the dimensions that broadcasting added or expanded to reach ``shape``."""
    gshape = g._data.shape
    lead = len(gshape) - len(shape)
    if lead < 0 or any(s != 1 and s != gs for s, gs in zip(shape, gshape[lead:])):
        where = f" {node.name()}" if node is not None else ""
        raise RuntimeError(
            f"Function{where} returned an invalid gradient at index {index} - got {list(gshape)} but expected "
            f"shape compatible with {list(shape)}"
        )
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and gshape[lead + i] != 1]
    if dims:
        g = ember.sum(g, dims, keepdim=True)
    if lead:
        g = g.reshape(shape)
    return g


# ------------------------------------------------------------------ the handler


def handle(op, args, kwargs, device):
    """The dispatcher's autograd step for ``op`` (see the module docstring)."""
    if op.kind == "inplace":
        return _inplace(op, args, kwargs, device)
    flag = _INPLACE_FLAG.get(op, _UNKNOWN)
    if flag is _UNKNOWN:
        flag = _inplace_flag_position(op)
    if flag is not None and (args[flag] if flag < len(args) else kwargs and kwargs.get("inplace")):
        return _inplace_flagged(op, flag, args, kwargs, device)
    entry = DERIVATIVES.get(op)
    if entry is not None:
        if entry.decompose_if is not None and entry.decomposes(args, kwargs):
            op.meta(*args, **kwargs)
            return op.decomposition(*args, **kwargs)
        return _record(op, entry, args, kwargs, device)
    if op in THROUGH_DECOMPOSITION or (op not in NONDIFFERENTIABLE and op.decomposition is not None):
        op.meta(*args, **kwargs)
        return op.decomposition(*args, **kwargs)
    result = _below(op, args, kwargs, device)
    if op is _detach:
        result._nondiff_view = True
        result._base = None  # not a view autograd knows of: writes through it leave the original's history alone
    elif op not in NONDIFFERENTIABLE:
        for o in result if isinstance(result, tuple) else (result,):
            if _is_tensor(o) and o._data.dtype in DIFFERENTIABLE_DTYPES:
                raise NotImplementedError(f"the derivative for '{op.name}' is not implemented in ember-autograd")
    return result


def _below(op, args, kwargs, device):
    """Run the op's kernel (or decomposition) with grad mode off."""
    previous = state.grad_enabled
    state.grad_enabled = False
    try:
        return run_backend(op, args, kwargs, device)
    finally:
        state.grad_enabled = previous


def _record(op, entry, args, kwargs, device, attach=True):
    previous = state.grad_enabled
    state.grad_enabled = False
    try:
        result = run_backend(op, args, kwargs, device)
    finally:
        state.grad_enabled = previous
    node = make_node(entry, args, kwargs)
    if node is None:
        return result if attach else (result, None)
    if type(result) is Tensor and attach and op.kind == "function":
        # the common case: one new tensor
        if result._data.dtype in DIFFERENTIABLE_DTYPES:
            result._requires_grad = True
            result._grad_fn = node
        if entry.saves_result and node._needed & entry.result_by:
            # saved once marked, so that double backward sees the output's history
            node._saved_results = (SavedTensor(result, node, 0, is_output=True),)
        return result
    outs = result if isinstance(result, tuple) else (result,)
    if len(outs) > 1:
        node._output_meta = tuple(
            (o._data.shape, o.dtype, o._device) if _is_tensor(o) and o._data.dtype in DIFFERENTIABLE_DTYPES else None
            for o in outs
        )
        node._num_outputs = len(outs)
    if attach:
        is_view = op.kind == "view"
        for i, o in enumerate(outs):
            if _is_tensor(o) and o._data.dtype in DIFFERENTIABLE_DTYPES:
                o._requires_grad = True
                o._grad_fn = node
                o._output_nr = i
                if is_view and o._base is not None:
                    o._view_info = (o._base, o._storage.version)
    if entry.saves_result and node._needed & entry.result_by:
        # saved once marked, so that double backward sees the outputs' history
        node._saved_results = tuple(
            SavedTensor(o, node, i, is_output=True) if _is_tensor(o) else None for i, o in enumerate(outs)
        )
    return result if attach else (result, node)


def make_node(entry, args, kwargs):
    """The :class:`FormulaNode` of a call, with its edges and saved values; None if no input needs grad.

    This runs for every recorded op, so the common case (differentiable arguments that are
    tensors or scalars, not lists of tensors) has one edge per argument and a precomputed layout.
    """
    nargs = len(args)
    edges = []
    meta = []
    needed = 0
    mask = 0
    for i, (name, position) in enumerate(entry.grad_specs):
        v = args[position] if 0 <= position < nargs else entry.value(name, position, args, kwargs)
        if type(v) is Tensor or isinstance(v, Tensor):
            if v._requires_grad:
                fn = v._grad_fn
                edges.append((fn, v._output_nr) if fn is not None and v._view_info is None else edge_of(v))
                needed += 1
                mask |= 1 << i
            else:
                edges.append(_NO_EDGE)
            meta.append((v._data.shape, v._data.dtype, v._device))
        elif type(v) is list or type(v) is tuple:
            return _make_node_with_lists(entry, args, kwargs)
        else:
            edges.append(_NO_EDGE)
            meta.append(None)
    if needed < _requiring_grad(args, kwargs):
        _check_covered(entry, entry.bind(args, kwargs))
    if not needed:
        return None
    node = FormulaNode(entry, tuple(edges), meta, entry.static_layout, 1)
    if needed < len(edges):  # some argument needs no gradient: skip what only its formula reads
        node._needed = mask
    node._saved = _save(entry, args, kwargs, node._needed) if entry.saved_specs else {}
    return node


def _make_node_with_lists(entry, args, kwargs):
    """:func:`make_node` for calls with a list of tensors among the differentiable arguments (``cat``)."""
    edges = []
    meta = []
    layout = {}
    needed = 0
    for name, position in entry.grad_specs:
        v = entry.value(name, position, args, kwargs)
        items = v if type(v) is list or type(v) is tuple else (v,)
        layout[name] = (len(edges), len(items) if items is v else -1)
        for t in items:
            if isinstance(t, Tensor) and t._requires_grad:
                edges.append(edge_of(t))
                meta.append((t._data.shape, t._data.dtype, t._device))
                needed += 1
            else:
                edges.append(_NO_EDGE)
                meta.append(None)
    if needed < _requiring_grad(args, kwargs):
        _check_covered(entry, entry.bind(args, kwargs))
    if not needed:
        return None
    node = FormulaNode(entry, tuple(edges), meta, layout, 1)
    if needed < len(edges):
        node._needed = sum(1 << i for i, name in enumerate(entry.grad_args) if _needs(edges, layout[name]))
    node._saved = _save(entry, args, kwargs, node._needed)
    return node


def _save(entry, args, kwargs, needed=-1):
    """The values the formulas that will run read, tensors wrapped in :class:`SavedTensor`.

    ``needed``: bit mask over ``entry.grad_args`` of the arguments that need a gradient (-1: all).
    """
    saved = {}
    nargs = len(args)
    saved_by = entry.saved_by
    for j, (key, name, position, shape_only) in enumerate(entry.saved_specs):
        if not needed & saved_by[j]:
            continue
        v = args[position] if 0 <= position < nargs else entry.value(name, position, args, kwargs)
        if shape_only:
            saved[key] = tensor_meta(v)
            continue
        if type(v) is Tensor or isinstance(v, Tensor):
            v = SavedTensor(v)
        elif type(v) in (list, tuple) and v and all(isinstance(t, Tensor) for t in v):
            v = [SavedTensor(t) for t in v]
        saved[name] = v
    return saved


_NO_EDGE = (None, 0)


def _requiring_grad(args, kwargs):
    """How many tensors among the arguments (and in list arguments) require grad."""
    n = 0
    for a in args:
        if type(a) is Tensor:
            if a._requires_grad:
                n += 1
        elif type(a) is list or type(a) is tuple:
            n += sum(1 for t in a if isinstance(t, Tensor) and t._requires_grad)
        elif isinstance(a, Tensor) and a._requires_grad:
            n += 1
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, Tensor) and a._requires_grad:
                n += 1
    return n


def _check_covered(entry, bound):
    """Raise if an argument that requires grad has no formula (instead of silently dropping its gradient)."""
    grad_args = entry.grad_args
    for name, v in bound.items():
        if name in grad_args or name in entry.nondiff_args:
            continue
        tensors = v if type(v) in (list, tuple) else (v,)
        if any(isinstance(t, Tensor) and t._requires_grad for t in tensors):
            raise NotImplementedError(
                f"the derivative of '{entry.op.name}' with respect to argument '{name}' is not implemented "
                "in ember-autograd"
            )


# ------------------------------------------------------------------ in-place ops and views


def _differentiable_base(t):
    """The base whose history an in-place write through view ``t`` must update, or None."""
    info = t._view_info
    if info is not None:
        return info[0]
    if t._base is not None and not t._nondiff_view:
        return t._base
    return None


def _check_inplace_allowed(self):
    if self._requires_grad and self._grad_fn is None and self._view_info is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = _differentiable_base(self)
    if base is not None and base._requires_grad and base._grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    return base


def _inplace(op, args, kwargs, device):
    self = args[0]
    base = _check_inplace_allowed(self)
    functional = op.functional
    if functional is not None and functional not in NONDIFFERENTIABLE:
        op.meta(*args, **kwargs)  # the in-place op's own checks (result dtype castable to self's, shapes)
        position = getattr(op, "self_index", 0)  # where self goes among the functional's arguments
        return _functional_then_copy(
            functional, args[1 : 1 + position], self, args[1 + position :], kwargs, base, device
        )
    entry = DERIVATIVES.get(op)
    if entry is None:
        if op in NONDIFFERENTIABLE or functional in NONDIFFERENTIABLE:
            result = _below(op, args, kwargs, device)
            _rebase_history(self, base, None, 0)
            return result
        raise NotImplementedError(f"the derivative for '{op.name}' is not implemented in ember-autograd")
    result, node = _record(op, entry, args, kwargs, device, attach=False)
    _rebase_history(self, base, node, 0)
    return result


def _functional_then_copy(functional, before, self, after, kwargs, base, device):
    """Overwrite ``self`` with ``functional(*before, self, *after, **kwargs)``, recorded as that call and a copy."""
    entry = DERIVATIVES.get(functional)
    # CopySlices can call the functional's node directly when its first gradient is self's
    direct = not before and entry is not None and entry.grad_args[:1] == entry.params[:1]
    source = self
    if base is not None and base._requires_grad:
        # self's history may be followed backward from here (by CopyBackwards below, or by double
        # backward through a formula that reads self): make it a view of base's current history that
        # keeps no values of base, which the write is about to change (the view op's node may have saved them)
        _regenerate_view(self, base)
    if not direct or entry.reads_original_input:
        source = ember.clone(self)  # the formula reads self's old value, which the write destroys
    out = functional(*before, source, *after, **kwargs)
    previous = state.grad_enabled
    state.grad_enabled = False
    try:
        run_backend(_copy_, (self, out), {}, device)
    finally:
        state.grad_enabled = previous
    if not out._requires_grad:
        _rebase_history(self, base, None, 0)  # self now holds values that depend on nothing that needs grad
    elif base is not None and not _takes_self_first(out._grad_fn, functional):
        # out's history is not one node of the functional op whose first input is self (the functional
        # was differentiated through its decomposition): the write is then a copy of out into the view
        _rebase_history(self, base, CopyBackwards(edge_of(out)), 0)
    else:
        _rebase_history(self, base, out._grad_fn, out._output_nr)
    return self


#: Functional ops with PyTorch's ``inplace`` flag (``F.relu(x, inplace=True)``): op -> the flag's position
#: among the parameters, or None for ops without the flag (filled on first use).
_INPLACE_FLAG = {}
_UNKNOWN = object()


def _inplace_flag_position(op):
    names = list(op._call_signature.parameters)
    position = names.index("inplace") if op.kind == "function" and "inplace" in names else None
    _INPLACE_FLAG[op] = position
    return position


def _inplace_flagged(op, position, args, kwargs, device):
    """``F.relu(x, inplace=True)``: recorded as ``relu(x)`` and a copy into ``x``, as ``x.relu_()`` is.

    The kernel writing into ``x`` under a formula node would let the formula read the overwritten
    input and skip the leaf and view rules of in-place writes; a decomposition that copies its
    result into ``x`` would find the input it saved modified.
    """
    self = args[0]
    base = _check_inplace_allowed(self)
    op.meta(*args, **kwargs)
    if position < len(args):
        args = args[:position] + (False,) + args[position + 1 :]
    else:
        kwargs = dict(kwargs, inplace=False)
    return _functional_then_copy(op, (), self, args[1:], kwargs, base, device)


def _takes_self_first(node, op):
    """Whether ``node`` is ``op``'s formula node with the gradient of ``op``'s first argument first (what
    :class:`CopySlices` calls to get the gradient of the overwritten region)."""
    if type(node) is not FormulaNode or node.entry.op is not op:
        return False
    entry = node.entry
    return bool(entry.grad_args) and bool(entry.params) and entry.grad_args[0] == entry.params[0]


class CopyBackwards(Node):
    """``self.copy_(src)`` as a node: the old value of ``self`` gets no gradient, ``src`` all of it.

    Its inputs are ``(self, src)``, as :class:`CopySlices` expects of the node that wrote the view.
    """

    def __init__(self, src_edge):
        super().__init__(((None, 0), src_edge), 1)

    def apply(self, grad_outputs):
        return [None, grad_outputs[0]]


def _rebase_history(self, base, node, output_nr):
    """After an in-place write into ``self``, point ``self`` (and its base) at the node that wrote it."""
    if base is None:
        self._grad_fn = node
        self._output_nr = output_nr
        self._requires_grad = node is not None
        return
    if node is None and not base._requires_grad:
        return
    copy_slices = CopySlices(base, self, node, output_nr)
    base._grad_fn = copy_slices
    base._output_nr = 0
    base._requires_grad = True
    if base._view_info is not None:
        base._view_info = None
    _regenerate_view(self, base)


def _geometry(t, real_units):
    """``(shape, strides, offset)`` of ``t`` in elements, or in real scalars (a complex element is two)."""
    shape, strides, offset = tuple(t._data.shape), tuple(t.stride()), t.storage_offset()
    if real_units and t.is_complex():
        return shape + (2,), tuple(2 * s for s in strides) + (1,), 2 * offset
    return shape, strides, offset


def _region(base_like, view_geometry, view_is_complex):
    """The view's region of a tensor laid out like the base (``base_like``), as a view of it.

    ``view_geometry`` is in real scalars when the view's dtype differs from the base's
    (``view_as_real``, ``.real``/``.imag`` of a complex base; ``view_as_complex`` of a real one).
    """
    vshape, vstrides, voffset = view_geometry
    if base_like.is_complex() == view_is_complex:
        return base_like.as_strided(vshape, vstrides, voffset)
    if base_like.is_complex():
        return ember.view_as_real(base_like).as_strided(vshape, vstrides, voffset)
    return ember.view_as_complex(base_like.as_strided(vshape, vstrides, voffset))


class CopySlices(Node):
    """The history of a base after an in-place write through one of its views.

    The gradient of the new base is the incoming gradient, except in the
    region of the view, where it is what the in-place op's node gives for
    its ``self`` input; the op's other inputs get their gradients as usual.
    Views of another dtype (the real view of a complex base) are handled in
    real scalars.
    """

    def __init__(self, base, view, node, output_nr):
        base_edge = edge_of(base)
        rest = tuple(node.next_functions[1:]) if node is not None else ()
        super().__init__((base_edge, *rest), 1)
        real_units = base.is_complex() != view.is_complex()
        shape, strides, offset = _geometry(base, False)
        self._base_geometry = (shape, strides, base.dtype, base._device)
        vshape, vstrides, voffset = _geometry(view, real_units)
        # the region's offset relative to the base's first element, in the units of the region's strides
        relative = voffset - (2 * offset if real_units and base.is_complex() else offset)
        self._view_geometry = (vshape, vstrides, relative)
        self._view_is_complex = view.is_complex()
        self._fn = node
        self._fn_output_nr = output_nr

    def name(self):
        return "CopySlices"

    def apply(self, grad_outputs):
        g = grad_outputs[0]
        shape, strides, dtype, device = self._base_geometry
        result = ember.empty_strided(shape, strides, dtype=dtype, device=device)
        result.copy_(g)
        region = _region(result, self._view_geometry, self._view_is_complex)
        if self._fn is None:
            region.zero_()
            return [result]
        fn_grads = [None] * self._fn._num_outputs
        fn_grads[self._fn_output_nr] = region.clone()
        res = self._fn.apply(fn_grads)
        if res[0] is None:
            region.zero_()
        else:
            region.copy_(res[0])
        return [result, *res[1:]]

    def _release(self):
        if self._fn is not None:
            self._fn._release()


def view_grad_fn(t):
    """``t.grad_fn`` for a view: rebuilt from the base's history when the base was written in place since."""
    base, version = t._view_info
    if t._storage.version != version and base._requires_grad:
        _regenerate_view(t, base)
    return t._grad_fn


class AsStridedView(Node):
    """A view's history rebuilt from its base's: ``base.as_strided(view's geometry)``.

    It keeps the two geometries, not the base's values, so later in-place
    writes to the storage don't invalidate it (the base's own history says
    what the base was). Its backward is :func:`as_strided_backward`, in
    real scalars when the view's dtype differs from the base's.
    """

    def __init__(self, base, view):
        super().__init__((edge_of(base),), 1)
        real_units = base.is_complex() != view.is_complex()
        self._real_units = real_units
        self._base_is_complex = base.is_complex()
        self._base_geometry = _geometry(base, real_units)
        self._view_geometry = _geometry(view, real_units)

    def name(self):
        return "AsStridedBackward0"

    def apply(self, grad_outputs):
        g = grad_outputs[0]
        if self._real_units and g.is_complex():
            g = ember.view_as_real(g.contiguous())
        g = as_strided_backward(g, *self._base_geometry, *self._view_geometry)
        if self._real_units and self._base_is_complex:
            g = ember.view_as_complex(g.contiguous())
        return [g]


def _regenerate_view(view, base):
    """Make ``view``'s history an ``as_strided`` of ``base``'s current history."""
    view._grad_fn = AsStridedView(base, view)
    view._output_nr = 0
    view._requires_grad = True
    view._view_info = (base, view._storage.version)
