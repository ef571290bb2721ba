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

import sys

from ember import _dtype as _D
from ember._dtype import numpy_dtype_set
from ember._ops import registry
from ember._ops._dispatch import PLAIN_TENSOR_TYPES as _TENSOR_TYPES  # Tensor and nn.Parameter
from ember._ops._dispatch import autograd_recorders, run_backend, state
from ember._tensor import Tensor

from . import _anomaly, _inplace
from ._formula_node import _needs, node_class
from ._table import DERIVATIVES, NONDIFFERENTIABLE, THROUGH_DECOMPOSITION, VAR_POSITIONAL, _bits
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
    result = run_without_grad(op, args, kwargs, device)
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
            node._saved_results = (_save_output(result, node),)
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


# ------------------------------------------------------------------ building nodes
#
# Every recorded call goes through the same three steps, whichever path found its arguments:
# _inputs (an edge and the metadata per differentiable argument, and the bit mask of those that
# need a gradient), new_node (the node, with the values the formulas that will run read) and
# _attach (the outputs). The paths differ only in where they find the values: the positional recorder reads
# them at positions worked out once per op (data), make_node binds any call.

_new_object = object.__new__
_save_input = SavedTensor._of_input
_save_output = SavedTensor._of_output
_anomaly_state = _anomaly._state
_NUMBERS = frozenset({int, float, bool, complex})
_NO_EDGE = (None, 0)
_NO_EDGES = (_NO_EDGE,)
_NO_META = (None,)
_LIST = object()  # what _inputs answers when a differentiable argument is a list of tensors (cat's)


def _inputs(values):
    """``(edges, input_meta, mask)`` of the differentiable arguments' ``values``.

    ``mask`` has bit i set when ``values[i]`` requires grad. A tensor's edge is the one its gradient
    flows to, and its metadata ``(shape, numpy dtype, device)`` what the backward checks that gradient
    against; values that need no gradient (numbers, tensors that do not require grad) get no edge and
    None for metadata (nothing reads it: one tuple less per constant argument). A list or tuple
    answers :data:`_LIST` (the caller lays out one edge per element). The positional recorder inlines
    this loop.
    """
    edges = []
    meta = []
    mask = 0
    bit = 1
    for v in values:
        t = type(v)
        if t in _TENSOR_TYPES or isinstance(v, Tensor):
            if v._requires_grad:
                fn = v._grad_fn
                edges.append((fn, v._output_nr) if fn is not None and v._view_info is None else edge_of(v))
                data = v._data
                meta.append((data.shape, data.dtype, v._device))
                mask |= bit
            else:  # no gradient flows to it: its metadata is never read
                edges.append(_NO_EDGE)
                meta.append(None)
        elif t in _NUMBERS:
            edges.append(_NO_EDGE)
            meta.append(None)
        elif t is list or t is tuple:
            return _LIST
        else:
            edges.append(_NO_EDGE)
            meta.append(None)
        bit <<= 1
    return tuple(edges), meta, mask


def new_node(cls, entry, edges, input_meta, layout, needed, plan, args, kwargs):
    """The :class:`FormulaNode` of a call: the one place a recorded node's state is set.

    Args:
        cls (type): the op's node class (:func:`~ember.autograd._formula_node.node_class`).
        entry (Derivative): the op's formulas.
        edges (tuple): per input edge, ``(node, output_nr)``; ``(None, 0)`` for none.
        input_meta (list): per input edge, ``(shape, numpy dtype, device)``, or None where no gradient flows.
        layout (dict): per differentiable argument, ``(first edge, count or -1 for a tensor)``.
        needed (int): bit mask over ``entry.grad_args`` of the arguments that need a gradient (-1: all).
        plan (tuple): the values to save (:func:`_save_plan`); the node keeps those that the formulas
            that will run read, tensors wrapped in :class:`SavedTensor`.
        args, kwargs: the call; ``kwargs`` None for a positional call (a value past the positional
            arguments is then its default).
    """
    # object.__new__ and attribute stores, without an __init__ frame: this runs for every recorded op
    node = _new_object(cls)
    node.next_functions = edges
    node._seq = next(_sequence)
    node._input_meta = input_meta
    if layout is not entry.static_layout:  # (the node class holds the entry and its static layout)
        node._layout = layout
    if needed != -1:  # the class default is -1
        node._needed = needed
    if plan:  # (a node that saves nothing keeps the class's empty mapping: one dict less per op)
        saved = node._saved = {}
    nargs = len(args)
    for key, name, position, shape_only, readers, default in plan:
        if not needed & readers:
            continue  # only formulas of arguments that need no gradient read it
        if 0 <= position < nargs:
            v = args[position]
        elif kwargs is None:
            v = default
        else:
            v = entry.value(name, position, args, kwargs)
        t = type(v)
        if shape_only:
            v = tensor_meta(v)
        elif t in _TENSOR_TYPES:
            v = _save_input(v)
        elif t not in _NUMBERS and v is not None:  # (numbers are most saved values that are not tensors)
            v = _save_value(v)
        saved[key] = v
    if _anomaly_state.enabled:
        _anomaly.record_forward(node)
    return node


def _save_value(v):
    """What a node keeps of a saved value that is not a plain tensor, a number or None: a tensor subclass
    as a :class:`SavedTensor`, a list of tensors as a list of them, anything else as it is."""
    if isinstance(v, Tensor):
        return _save_input(v)
    # (the first element first: most such values are sizes or dims, whose first element is a number)
    if (type(v) is list or type(v) is tuple) and v and isinstance(v[0], Tensor) and \
            all(isinstance(e, Tensor) for e in v):
        return [_save_input(e) for e in v]
    return v


def _save_plan(entry):
    """``entry``'s saved values as :func:`new_node` reads them: ``(key, name, position, shape_only, readers, default)``.

    Per value: its key in the formulas' environment, the argument, its position among the
    positional parameters (negative: keyword-only or ``*args``), whether only its metadata is kept,
    the bit mask of the differentiable arguments whose formulas read it, and its default.
    """
    plan = entry.save_plan
    if plan is None:
        defaults = entry.defaults
        plan = entry.save_plan = tuple(
            (key, name, position, shape_only, readers, defaults.get(name))
            for (key, name, position, shape_only), readers in zip(entry.saved_specs, entry.saved_by)
        )
    return plan


def make_node(entry, args, kwargs):
    """The :class:`FormulaNode` of a call, with its edges and saved values; None if no input needs grad."""
    nargs = len(args)
    values = [args[p] if 0 <= p < nargs else entry.value(n, p, args, kwargs) for n, p in entry.grad_specs]
    found = _inputs(values)
    if found is _LIST:
        return _make_node_with_lists(entry, args, kwargs)
    edges, meta, mask = found
    if mask.bit_count() < _requiring_grad(args, kwargs):
        _check_covered(entry, entry.bind(args, kwargs))
    if not mask:
        return None
    needed = -1 if mask == (1 << len(edges)) - 1 else mask
    return new_node(node_class(entry), entry, edges, meta, entry.static_layout, needed, _save_plan(entry), args, kwargs)


def _make_node_with_lists(entry, args, kwargs):
    """:func:`make_node` for calls with a list of tensors among the differentiable arguments (``cat``)."""
    edges = []
    meta = []
    layout = {}
    for name, position in entry.grad_specs:
        v = entry.value(name, position, args, kwargs)
        items = v if type(v) is list or type(v) is tuple else (v,)
        layout[name] = (len(edges), len(items) if items is v else -1)
        for t in items:
            if isinstance(t, Tensor) and t._requires_grad:
                edges.append(edge_of(t))
                meta.append((t._data.shape, t._data.dtype, t._device))
            else:
                edges.append(_NO_EDGE)
                meta.append(None)
    needed = sum(1 for e in edges if e[0] is not None)
    if needed < _requiring_grad(args, kwargs):
        _check_covered(entry, entry.bind(args, kwargs))
    if not needed:
        return None
    edges = tuple(edges)
    needed = -1 if needed == len(edges) else _bits(i for i, n in enumerate(entry.grad_args) if _needs(edges, layout[n]))
    return new_node(node_class(entry), entry, edges, meta, layout, needed, _save_plan(entry), args, kwargs)


def _fast_recorder(entry, native=True):
    """The positional recorder of ``entry``'s op: ``record(args, device)``, or None where the op has none.

    It covers the common calls: the differentiable arguments are the leading positional parameters,
    the call passes each of them as a plain tensor, a number or None, and any further positional arguments
    (dims, sizes, flags, index tensors) hold no tensor that requires grad, so every argument that
    requires grad has an edge and every saved value is an argument at a known position or a default.
    The dispatcher calls it directly (:data:`~ember._ops._dispatch.autograd_recorders`) for calls
    without keywords; other calls answer ``NotImplemented`` and take :func:`record`. One function
    serves every function and view op: what differs between ops is data (the number of arguments,
    the save plan, the node class).

    With ``native`` (and ember._C built with it), the recorder is ``ember._C.PositionalRecorder``
    (csrc/record.cpp): the same steps in C++ for calls of exactly the differentiable arguments, which
    hands every other call to the Python function below, its reference (``recorder.reference``).
    """
    op = entry.op
    k = len(entry.grad_args)
    if op.kind not in ("function", "view") or entry.decompose_if is not None or entry.grad_args != entry.params[:k]:
        return None
    # ``*args`` after the parameters (view's sizes, permute's dims): any number of further arguments, and the
    # node reads a saved ``*args`` value through entry.value (so new_node gets a keyword dict, not None)
    var_positional = entry.var_positional is not None
    flag = _inplace_flag(op)  # F.relu(x, True) writes in place: _inplace records that
    if flag is not None and flag < k:
        return None
    plan = _save_plan(entry)
    least = k  # the fewest positional arguments a call passes: the differentiable ones and the saved required ones
    for _key, name, position, _shape_only, _readers, _default in plan:
        if name not in entry.defaults and position != VAR_POSITIONAL:
            if position < 0:
                return None  # a required keyword-only argument: no positional call passes it
            least = max(least, position + 1)
    most = sys.maxsize if var_positional else len(entry.params)
    call_kwargs = {} if var_positional else None
    layout = entry.static_layout
    every = (1 << k) - 1
    result_by = entry.result_by if entry.saves_result else 0
    cls = node_class(entry)
    checked = op.checked_kernels.get("cpu")
    is_function = op.kind == "function"

    def record_positional(args, device):
        n = len(args)
        if n != k and not _rest_taken(args, k, least, most, flag):
            return NotImplemented
        # _inputs' loop, inlined for the values this recorder takes (plain tensors and numbers; anything
        # else leaves the call to make_node), with tuples grown by one per argument (cheaper than lists
        # and tuple() for one or two): each frame saved is a few percent of a small op
        edges = ()
        meta = ()
        mask = 0
        bit = 1
        for v in args if n == k else args[:k]:
            t = type(v)
            if t in _TENSOR_TYPES:
                if v._requires_grad:
                    fn = v._grad_fn
                    edges += ((fn, v._output_nr) if fn is not None and v._view_info is None else edge_of(v),)
                    data = v._data
                    meta += ((data.shape, data.dtype, v._device),)
                    mask |= bit
                else:
                    edges += _NO_EDGES
                    meta += _NO_META
            elif t in _NUMBERS or v is None:  # (None: an optional tensor left out, linear's bias=None)
                edges += _NO_EDGES
                meta += _NO_META
            else:
                return NotImplemented
            bit <<= 1
        if not mask:
            return NotImplemented
        array = checked(*args) if checked is not None and device.type == "cpu" else None
        if array is not None:
            result = _new_object(Tensor)
            result._data = array
            result._device = device
        else:
            result = run_without_grad(op, args, {}, device)
        node = new_node(cls, entry, edges, meta, layout, -1 if mask == every else mask, plan, args, call_kwargs)
        if type(result) is Tensor and is_function:  # _attach's common case, inlined (~150 ns of a 3 us op)
            if result._data.dtype in DIFFERENTIABLE_DTYPES:
                result._requires_grad = True
                result._grad_fn = node
            if mask & result_by:
                node._saved_results = (_save_output(result, node),)
            return result
        return _attach(op, entry, node, result)

    # (the compiled recorder saves no *args value; its masks are 64-bit integers)
    if native and _NativeRecorder is not None and k <= 62 and not var_positional:
        return _NativeRecorder(record_positional, op, entry, cls, plan, k, result_by, checked, is_function)
    return record_positional


def _rest_taken(args, k, least, most, flag):
    """Whether the positional recorder takes a call's arguments after the ``k`` differentiable ones.

    As many as the saved required arguments need (``least``) and the op's parameters allow (``most``);
    no ``inplace=True`` at the op's flag position ``flag`` (``_inplace`` records those); and no tensor
    that requires grad among them, in a list or tuple either: make_node checks that such an argument
    has a formula (and raises if not) rather than letting its gradient drop silently.
    """
    n = len(args)
    if n < least or n > most or (flag is not None and flag < n and args[flag]):
        return False
    for v in args[k:]:
        if isinstance(v, Tensor):
            if v._requires_grad:
                return False
        elif type(v) is list or type(v) is tuple:
            for e in v:
                if isinstance(e, Tensor) and e._requires_grad:
                    return False
    return True


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



# The C++ positional recorder (csrc/record.cpp) calls these helpers of this module for what it does not do
# itself; a build of ember-core without it leaves the Python recorder.
try:
    from ember._C import PositionalRecorder as _NativeRecorder
    from ember._C import init_recorder as _init_native_recorder
except ImportError:
    _NativeRecorder = None
else:
    from ember._storage import Storage as _Storage

    from . import graph as _graph

    _init_native_recorder(
        {
            "tensor_type": Tensor,
            "tensor_types": _TENSOR_TYPES,
            "differentiable": DIFFERENTIABLE_DTYPES,
            "sequence": _sequence,
            "new_object": _new_object,
            "saved_tensor": SavedTensor,
            "graph_globals": vars(_graph),
            "anomaly_state": _anomaly_state,
            "record_forward": _anomaly.record_forward,
            "edge_of": edge_of,
            "tensor_meta": tensor_meta,
            "save_input": _save_input,
            "save_output": _save_output,
            "storage_type": _Storage,  # to save an output inline (SavedTensor._of_output's common case)
            "save_value": _save_value,
            "run_without_grad": run_without_grad,
            "attach": _attach,
        }
    )
