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

In-place ops and ``inplace=True`` calls go to :mod:`ember.autograd._inplace`.
"""

from __future__ import annotations

from ember import _dtype as _D
from ember._dtype import numpy_dtype_set
from ember._ops import registry
from ember._ops._dispatch import PLAIN_TENSOR_TYPES as _TENSOR_TYPES  # Tensor and nn.Parameter
from ember._ops._dispatch import autograd_recorders, run_backend, state
from ember._tensor import Tensor

from . import _anomaly, _inplace
from ._formula_node import _needs, node_class
from ._table import DERIVATIVES, NONDIFFERENTIABLE, THROUGH_DECOMPOSITION
from .graph import SavedTensor, _sequence, edge_of, tensor_meta

__all__ = ["handle", "record", "run_without_grad", "make_node", "DIFFERENTIABLE_DTYPES"]

#: numpy dtypes of tensors that can require grad.
DIFFERENTIABLE_DTYPES = numpy_dtype_set(  # (a set that learns bfloat16 when ml_dtypes loads)
    (_D.float16, _D.bfloat16, _D.float32, _D.float64, _D.complex64, _D.complex128)
)

_detach = registry["detach"]

#: Functional ops with PyTorch's ``inplace`` flag (``F.relu(x, inplace=True)``): op -> the flag's position
#: among the parameters, or None for ops without the flag (filled on first use).
_INPLACE_FLAG = {}


def _inplace_flag(op):
    names = list(op._call_signature.parameters)
    position = names.index("inplace") if op.kind == "function" and "inplace" in names else None
    _INPLACE_FLAG[op] = position
    return position


def _is_tensor(v):
    return type(v) is Tensor or isinstance(v, Tensor)


# ------------------------------------------------------------------ the handler


def handle(op, args, kwargs, device):
    """The dispatcher's autograd step for ``op`` (see the module docstring)."""
    entry = DERIVATIVES.get(op)
    if entry is not None and not kwargs:
        fast = entry.fast_record
        if fast is False:
            fast = entry.fast_record = _fast_recorder(entry)
        if fast is not None:
            autograd_recorders[op] = fast  # the dispatcher calls it directly from now on
            result = fast(args, device)
            if result is not NotImplemented:
                return result
    if op.kind == "inplace":
        return _inplace.inplace(op, args, kwargs, device)
    flag = _INPLACE_FLAG.get(op, _INPLACE_FLAG)  # the dict itself marks "not looked up yet"
    if flag is _INPLACE_FLAG:
        flag = _inplace_flag(op)
    if flag is not None and (args[flag] if flag < len(args) else kwargs and kwargs.get("inplace")):
        return _inplace.inplace_flagged(op, flag, args, kwargs, device)
    if entry is not None:
        if entry.decompose_if is not None and entry.decomposes(args, kwargs):
            op.meta(*args, **kwargs)
            return op.decomposition(*args, **kwargs)
        return record(op, entry, args, kwargs, device)
    if op in THROUGH_DECOMPOSITION or (op not in NONDIFFERENTIABLE and op.decomposition is not None):
        if not op.decomposition_checks:
            op.meta(*args, **kwargs)
        return op.decomposition(*args, **kwargs)
    result = run_without_grad(op, args, kwargs, device)
    if op is _detach:
        result._nondiff_view = True
        result._base = None  # not a view autograd knows of: writes through it leave the original's history alone
    elif op not in NONDIFFERENTIABLE:
        for o in result if isinstance(result, tuple) else (result,):
            if _is_tensor(o) and o._data.dtype in DIFFERENTIABLE_DTYPES:
                raise NotImplementedError(f"the derivative for '{op.name}' is not implemented in ember-autograd")
    return result


def run_without_grad(op, args, kwargs, device):
    """Run the op's kernel (or decomposition) with grad mode off."""
    previous = state.grad_enabled
    state.grad_enabled = False
    try:
        return run_backend(op, args, kwargs, device)
    finally:
        state.grad_enabled = previous


def record(op, entry, args, kwargs, device, attach=True):
    """Run ``op`` below autograd and attach its :class:`FormulaNode` (``attach=False``: return it too)."""
    previous = state.grad_enabled
    state.grad_enabled = False
    try:
        result = run_backend(op, args, kwargs, device)
    finally:
        state.grad_enabled = previous
    node = make_node(entry, args, kwargs)
    if node is None:
        return result if attach else (result, None)
    return _attach(op, entry, node, result, attach)


def _attach(op, entry, node, result, attach=True):
    """Make ``node`` the ``grad_fn`` of the op's differentiable outputs and save the outputs its formulas read."""
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
    cls = entry.node_class or node_class(entry)
    node = cls(entry, tuple(edges), meta, entry.static_layout)
    if needed < len(edges):  # some argument needs no gradient: skip what only its formula reads
        node._needed = mask
    node._saved = _save(entry, args, kwargs, mask if needed < len(edges) else -1) if entry.saved_specs else {}
    return node


_new_object = object.__new__
_save_input = SavedTensor._of_input
_save_output = SavedTensor._of_output
_anomaly_state = _anomaly._state
_NUMBERS = frozenset({int, float, bool, complex})


def _fast_recorder(entry):
    """``record(args, device)`` for calls of ``entry``'s op without keywords, or None where the op has none.

    It covers the common calls: the differentiable arguments are the leading
    positional parameters and the call passes exactly those, each a plain
    tensor or a number, so every argument that requires grad has an edge and
    the values to save are found at positions (or defaults) known in advance.
    What :func:`make_node` works out per call is worked out here once. Other
    calls answer ``NotImplemented`` and take :func:`record`.
    """
    op = entry.op
    k = len(entry.grad_args)
    if (
        op.kind != "function"
        or entry.decompose_if is not None
        or entry.var_positional is not None
        or entry.grad_args != entry.params[:k]
        or _inplace_flag(op) is not None
    ):
        return None
    # what to save: (key, position among the args or -1 for the default, only the metadata, readers' bit mask,
    # default value)
    plan = []
    for (key, name, position, shape_only), readers in zip(entry.saved_specs, entry.saved_by):
        if 0 <= position < k:
            plan.append((key, position, shape_only, readers, None))
        elif name in entry.defaults:
            plan.append((key, -1, shape_only, readers, entry.defaults[name]))
        else:
            return None  # a required argument past the differentiable ones: no call passes exactly k arguments
    plan = tuple(plan)
    cls = node_class(entry)
    layout = entry.static_layout
    every = (1 << k) - 1
    result_by = entry.result_by if entry.saves_result else 0
    checked = op.checked_cpu

    def run(args, device):
        """The op's result, computed below autograd."""
        array = checked(*args) if checked is not None and device.type == "cpu" else None
        if array is not None:
            # a checked kernel computes in numpy alone (no ops dispatched): no need to turn grad mode off
            result = _new_object(Tensor)
            result._data = array
            result._device = device
            return result
        previous = state.grad_enabled
        state.grad_enabled = False
        try:
            return run_backend(op, args, {}, device)
        finally:
            state.grad_enabled = previous

    def finish(args, mask, node, result):
        """Save what the formulas that will run read; make ``node`` the result's ``grad_fn``."""
        saved = {}
        for key, position, shape_only, readers, default in plan:
            if mask & readers:
                v = args[position] if position >= 0 else default
                if shape_only:
                    v = tensor_meta(v)
                elif type(v) in _TENSOR_TYPES:
                    v = _save_input(v)
                saved[key] = v
        node._saved = saved
        if type(result) is Tensor:
            if result._data.dtype in DIFFERENTIABLE_DTYPES:
                result._requires_grad = True
                result._grad_fn = node
            if mask & result_by:
                node._saved_results = (_save_output(result, node),)
            return result
        return _attach(op, entry, node, result)

    def record_unary(args, device):
        # record_fast below for one argument (unary ops: most recorded calls), with run() and finish()
        # inlined: each frame saved is a few percent of the op
        if len(args) != 1:
            return NotImplemented
        (v,) = args
        if type(v) not in _TENSOR_TYPES or not v._requires_grad:
            return NotImplemented
        fn = v._grad_fn
        edge = (fn, v._output_nr) if fn is not None and v._view_info is None else edge_of(v)
        data = v._data
        array = checked(v) if checked is not None and device.type == "cpu" else None
        if array is not None:
            result = _new_object(Tensor)
            result._data = array
            result._device = device
        else:
            result = run(args, device)
        node = _new_object(cls)  # FormulaNode.__init__, inlined (keep the two in step)
        node.next_functions = (edge,)
        node._seq = next(_sequence)
        node.entry = entry
        node._input_meta = ((data.shape, data.dtype, v._device),)
        node._layout = layout
        if _anomaly_state.enabled:
            _anomaly.record_forward(node)
        saved = {}
        for key, position, shape_only, _, default in plan:  # the one argument needs a gradient: save all
            value = v if position >= 0 else default
            if shape_only:
                value = tensor_meta(value)
            elif type(value) in _TENSOR_TYPES:
                value = _save_input(value)
            saved[key] = value
        node._saved = saved
        if type(result) is Tensor:
            if result._data.dtype in DIFFERENTIABLE_DTYPES:
                result._requires_grad = True
                result._grad_fn = node
            if result_by:
                node._saved_results = (_save_output(result, node),)
            return result
        return _attach(op, entry, node, result)

    def record_fast(args, device):
        if len(args) != k:
            return NotImplemented
        edges = []
        meta = []
        mask = 0
        bit = 1
        for v in args:
            if type(v) in _TENSOR_TYPES:
                data = v._data
                if v._requires_grad:
                    fn = v._grad_fn
                    edges.append((fn, v._output_nr) if fn is not None and v._view_info is None else edge_of(v))
                    mask |= bit
                else:
                    edges.append(_NO_EDGE)
                meta.append((data.shape, data.dtype, v._device))
            elif type(v) in _NUMBERS:
                edges.append(_NO_EDGE)
                meta.append(None)
            else:
                return NotImplemented
            bit <<= 1
        if not mask:
            return NotImplemented
        result = run(args, device)
        node = cls(entry, tuple(edges), meta, layout)
        if mask != every:  # some argument needs no gradient: skip what only its formula reads
            node._needed = mask
        return finish(args, mask, node, result)

    def record_binary(args, device):
        # record_fast for two arguments (mul, add, sub, div...), with the loop unrolled and run(), the node's
        # __init__ and finish() inlined: a third of the recorded calls of a small-op chain
        if len(args) != 2:
            return NotImplemented
        a, b = args
        if type(a) in _TENSOR_TYPES:
            data = a._data
            meta_a = (data.shape, data.dtype, a._device)
            if a._requires_grad:
                fn = a._grad_fn
                edge_a = (fn, a._output_nr) if fn is not None and a._view_info is None else edge_of(a)
                mask = 1
            else:
                edge_a, mask = _NO_EDGE, 0
        elif type(a) in _NUMBERS:
            edge_a, meta_a, mask = _NO_EDGE, None, 0
        else:
            return NotImplemented
        if type(b) in _TENSOR_TYPES:
            data = b._data
            meta_b = (data.shape, data.dtype, b._device)
            if b._requires_grad:
                fn = b._grad_fn
                edge_b = (fn, b._output_nr) if fn is not None and b._view_info is None else edge_of(b)
                mask |= 2
            else:
                edge_b = _NO_EDGE
        elif type(b) in _NUMBERS:
            edge_b, meta_b = _NO_EDGE, None
        else:
            return NotImplemented
        if not mask:
            return NotImplemented
        array = checked(a, b) if checked is not None and device.type == "cpu" else None
        if array is not None:
            result = _new_object(Tensor)
            result._data = array
            result._device = device
        else:
            result = run(args, device)
        node = _new_object(cls)  # FormulaNode.__init__, inlined (keep the two in step)
        node.next_functions = (edge_a, edge_b)
        node._seq = next(_sequence)
        node.entry = entry
        node._input_meta = (meta_a, meta_b)
        node._layout = layout
        if _anomaly_state.enabled:
            _anomaly.record_forward(node)
        if mask != 3:  # one argument needs no gradient: skip what only its formula reads
            node._needed = mask
        saved = {}
        for key, position, shape_only, readers, default in plan:
            if mask & readers:
                v = args[position] if position >= 0 else default
                if shape_only:
                    v = tensor_meta(v)
                elif type(v) in _TENSOR_TYPES:
                    v = _save_input(v)
                saved[key] = v
        node._saved = saved
        if type(result) is Tensor:
            if result._data.dtype in DIFFERENTIABLE_DTYPES:
                result._requires_grad = True
                result._grad_fn = node
            if mask & result_by:
                node._saved_results = (_save_output(result, node),)
            return result
        return _attach(op, entry, node, result)

    if k == 1:
        return record_unary
    return record_binary if k == 2 else record_fast


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
    node = node_class(entry)(entry, tuple(edges), meta, layout)
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

