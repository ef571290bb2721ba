"""The wrapper: lower + schedule + C++ + load, and the callable that runs the compiled graph.

:func:`compile_graph` turns a functional FX graph into a Python callable. The generated ``.so``
has one ``extern "C"`` entry per *segment* (the kernels between two extern calls); a call fills
one pointer table (inputs, fresh outputs, intermediate storage), then runs the steps in order:
one native call per segment, the eager op for each extern call (matmul, conv, random ops...).
A graph without extern calls is one native call.

Intermediate buffers share storage where the scheduler's memory plan says so; outputs are fresh
tensors (contiguous) each call. Inputs must have the example inputs' shapes, strides and dtypes
(the kernels index them with those strides); anything else raises ``ValueError`` - the caller's
guards decide when to recompile.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

import ember
from ember._meta import MetaArray
from ember._ops._dispatch import _wrap
from ember._ops._dispatch import state as _dispatch_state
from ember._ops._float_errors import IGNORE_ALL, get_error_state, reset_error_state, set_error_state
from ember._ops.matmul import _matmul_arrays
from ember._tensor import Tensor

from .. import config
from . import plan_cache

# The compiler (lowering, scheduling, C++ generation) imports SymPy: it is imported when a graph is
# compiled, not when a compiled graph is loaded from the plan cache (a warm start).

__all__ = ["compile_graph", "compile_graph_dynamic", "CompiledGraph"]


def _stage(name, text):
    from .. import debug

    debug.stage(name, text)


#: No FP-exception traps (lets selects be if-converted, so loops with ternaries vectorise) and no
#: errno from math functions (lets sqrt vectorise). The first also lets GCC fold (float)(int)x into
#: trunc(x); codegen/cpp.py's ember_i2f/ember_f2i keep those conversions exact.
CPP_FLAGS = ("-fno-trapping-math", "-fno-math-errno")


def _load(source):
    from ..codecache import CppCodeCache

    return CppCodeCache.load(source, name="graph", extra_flags=CPP_FLAGS)


def _numpy_dtype(dtype):
    return dtype.numpy_dtype


def _find_data_offset():
    """Where a numpy array object keeps its data pointer (right after the object header in CPython):
    reading it there costs a fraction of ``arr.ctypes.data``. None when the layout is not the expected one."""
    probe = np.arange(6, dtype=np.float32)[2:]
    for offset in (16,):
        if ctypes.c_void_p.from_address(id(probe) + offset).value == probe.ctypes.data:
            return offset
    return None


_DATA_OFFSET = _find_data_offset()
_from_address = ctypes.c_void_p.from_address


def _address(arr):
    """The data pointer of numpy array ``arr``."""
    if _DATA_OFFSET is not None:
        return _from_address(id(arr) + _DATA_OFFSET).value
    return arr.ctypes.data


#: The key of a call's scratch arrays (slot -> bytes) in its ``values`` (buffer names are strings).
_SCRATCH = object()


def _threads():
    return config.threads if config.threads else ember.get_num_threads()


def compile_graph(gm, example_inputs):
    """Compile ``gm`` (a functional graph of registry ops) to C++ and return a callable.

    Args:
        gm (ember.fx.GraphModule): the graph; nodes carry ``meta["val"]`` (filled if missing).
        example_inputs (sequence): one value per placeholder; tensors fix shapes, strides, dtypes.

    Returns:
        CompiledGraph: ``f(*inputs)`` returning the graph's outputs (a tuple when the graph
        returns a tuple or list, else the single value).

    Raises:
        LoweringException: the graph cannot be compiled (compile_fx then runs it eagerly).
        CppCompileError: the generated C++ did not build.

    Example:
        >>> import ember
        >>> from ember._inductor.codegen.wrapper import compile_graph
        >>> from ember.fx.experimental.proxy_tensor import make_fx
        >>> x = ember.arange(4.0)
        >>> f = compile_graph(make_fx(lambda t: (ember.exp(t) * 2,))(x), [x])
        >>> bool(ember.allclose(f(x)[0], ember.exp(x) * 2))
        True
    """
    key = plan_cache.key(gm, example_inputs)
    plan = plan_cache.read(key) if key is not None else None
    if plan is not None:  # a warm start: the run plan and the library, no lowering
        return CompiledGraph(plan, lambda: _lower(gm, example_inputs))
    graph, scheduler = _lower(gm, example_inputs)
    plan = _RunPlan(graph, scheduler)
    compiled = CompiledGraph(plan, (graph, scheduler))  # builds the library: a plan is stored once it loads
    if key is not None:
        plan_cache.write(key, plan)
    return compiled


def compile_graph_dynamic(gms, example_inputs, spec):
    """Compile a graph with symbolic sizes: its kernels take the dynamic sizes as arguments.

    Args:
        gms (list): the same graph traced at the hint sizes and at the probe sizes of
            :mod:`ember._inductor.dynamic` (GraphModules alike node for node).
        example_inputs (list): the example inputs of each trace.
        spec (DynamicDims): the symbols (only their hints are read here).

    Returns:
        CompiledGraph: callable with inputs of any sizes that keep its assumptions
        (``compiled.binding.check``); its ``assumptions`` list them.

    Raises:
        NotDynamic: the lowerings differ, or a size has no expression (compile for fixed sizes).
    """
    import sympy

    from .. import dynamic, ir
    from ..graph import GraphLowering
    from ..scheduler import Scheduler

    graph, assumptions = dynamic.lower_and_unify(gms, example_inputs, spec,
                                                 lambda gm, ex: GraphLowering(gm, ex).run())
    hints = dynamic.probe_points(spec)[0]
    inputs = [(b.position, b.sizes) for b in graph.inputs if b is not None]
    used = set().union(*(sympy.sympify(s).free_symbols for _, sizes in inputs for s in sizes)) if inputs else set()
    symbols = [s for s in hints if s in used]
    _stage("loop_ir", lambda: str(graph))
    with ir.size_hints(hints) as assumed:
        scheduler = Scheduler(graph)
        _stage("scheduled", lambda: str(scheduler))
        plan = _RunPlan(graph, scheduler, symbols)
    binding = dynamic.SizeBinding(inputs, symbols, assumptions + assumed)
    return CompiledGraph(plan, (graph, scheduler), binding)


def _size(s):
    """A plan's size: an int, or a SymPy expression over the dynamic sizes (resolved per call)."""
    import sympy

    s = sympy.sympify(s)
    return int(s) if s.is_Integer else s


def _sizes(sizes):
    return tuple(_size(s) for s in sizes)


def _nbytes(buf):
    import sympy

    n = sympy.Integer(buf.dtype.itemsize)
    for s in buf.sizes:
        n = n * sympy.sympify(s)
    return _size(n)


def _lower(gm, example_inputs):
    """Lower and schedule ``gm``: ``(GraphLowering, Scheduler)``."""
    from ..graph import GraphLowering
    from ..scheduler import Scheduler

    graph = GraphLowering(gm, example_inputs).run()
    _stage("loop_ir", lambda: str(graph))  # built only when debugging is on
    scheduler = Scheduler(graph)
    _stage("scheduled", lambda: str(scheduler))
    return graph, scheduler


class _BufRef:
    """What the runtime needs of a buffer an extern call reads: name, slot, sizes, numpy dtype, constant."""

    __slots__ = ("name", "slot", "sizes", "np_dtype", "nbytes", "constant")
    _sized = True  # dynamic.SizeBinding.resolve evaluates its sizes per call

    def __init__(self, buf, slots):
        from .. import ir

        self.name = buf.name
        self.slot = slots.get(buf.name)
        self.sizes = _sizes(buf.sizes)
        self.np_dtype = _numpy_dtype(buf.dtype)
        self.nbytes = _nbytes(buf)
        self.constant = buf.constant if isinstance(buf, ir.InputBuffer) else None


class _StridedRef:
    """An :class:`~ember._inductor.ir.StridedArg` for the runtime: a buffer, sizes, element strides, offset."""

    __slots__ = ("buffer", "sizes", "strides", "offset")
    _sized = True

    def __init__(self, arg, slots):
        self.buffer = _BufRef(arg.buffer, slots)
        self.sizes = _sizes(arg.sizes)
        self.strides = _sizes(arg.strides)
        self.offset = _size(arg.offset)


class _EmptyRef:
    """An :class:`~ember._inductor.ir.EmptyArg` for the runtime: sizes and numpy dtype of a fresh tensor."""

    __slots__ = ("sizes", "np_dtype")
    _sized = True

    def __init__(self, sizes, np_dtype):
        self.sizes = _sizes(sizes)
        self.np_dtype = np_dtype


class _InputRef:
    """An :class:`~ember._inductor.ir.OpaqueInput` for the runtime: the graph input (a sparse tensor) of that
    name, passed to the extern call as given."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class _ExternStep:
    """An extern call for the runtime: the op (by name), its arguments with buffer references, its outputs."""

    __slots__ = ("op_name", "args", "kwargs", "outputs", "_op")
    _sized = True

    def __init__(self, kernel, slots):
        self.op_name = kernel.op.name
        self.args = _refs(kernel.args, slots)
        self.kwargs = {k: _refs(v, slots) for k, v in kernel.kwargs.items()}
        # (name, path in the result, element strides: eager's dense layout, or None for contiguous)
        self.outputs = [(o.name, o.path, _layout(o)) for o in kernel.outputs]
        self._op = kernel.op

    @property
    def op(self):
        if self._op is None:
            from ember._ops import registry

            self._op = registry[self.op_name]
        return self._op

    @property
    def is_product(self):
        """Whether this is ``matmul(a, b)`` of two tensor references (see ``CompiledGraph._blas_product``)."""
        return self.op_name == "matmul" and not self.kwargs and len(self.args) == 2 and \
            all(isinstance(a, (_BufRef, _StridedRef)) for a in self.args)

    def __getstate__(self):
        return (self.op_name, self.args, self.kwargs, self.outputs)

    def __setstate__(self, state):
        self.op_name, self.args, self.kwargs, self.outputs = state
        self._op = None


class _Extern:
    """An :class:`_ExternStep` ready to run: what each call would otherwise work out again.

    A compiled step of a small model makes tens of extern calls, and the per-call Python work of each
    (the op's kind, whether it is a BLAS product, the output slots, a walk of its arguments to find the
    buffer references) came to a third of a small product's time. This is made once per plan (per
    size, for a graph with dynamic sizes), not stored: the plan itself stays a plain picklable value.

    Attributes:
        op_name, op, kwargs: the step's.
        product (bool): ``matmul(a, b)`` of two tensor references, computed on arrays
            (:meth:`CompiledGraph._blas_product`).
        direct: the op's CPU kernel, which a call of a graph of fixed sizes runs without the dispatcher
            (:func:`_direct_kernel`), or None.
        function (bool): the op makes a new tensor (not a view of an argument).
        outputs (list): ``(name, path in the result, strides or None, pointer slot)`` per output.
        template (list): the positional arguments, buffer references included.
        refs (tuple): ``(position, reference)`` of the arguments that are (or hold) buffer references:
            the only ones a call replaces with tensors.
    """

    __slots__ = ("op_name", "op", "args", "kwargs", "product", "direct", "function", "outputs", "template", "refs")

    def __init__(self, step, slots):
        self.op_name = step.op_name
        self.op = step.op
        self.args = step.args
        self.kwargs = step.kwargs
        self.product = step.is_product
        self.direct = _direct_kernel(self.op)
        self.function = self.op.kind == "function"
        self.outputs = [(name, path, strides, slots[name]) for name, path, strides in step.outputs]
        self.template = list(step.args)
        self.refs = tuple((i, a) for i, a in enumerate(step.args) if _holds_ref(a))


def _direct_kernel(op, device_type="cpu"):
    """The kernel for ``device_type`` of an extern op that a call may run without the dispatcher, or None.

    The dispatcher's work per call (the argument scan, the meta function's checks of shapes and dtypes,
    grad mode) was a third of a small op's time: the model suite's DLRM makes 24 such extern calls a step
    (embedding_bag, searchsorted, index, index_add). In a graph of fixed sizes the meta function would check
    the shapes and dtypes it checked when the graph was traced, and the extern calls run without grad, so
    the kernel is all that is left to run; its checks of values (index bounds) stay. Ops whose result the
    dispatcher builds from the arguments (views, in-place ops), factories and composites without a kernel
    of their own for the device keep the dispatcher. The Triton runner (``runtime/triton_graph.py``) takes the
    same rule for its device.
    """
    if op.kind != "function" or "factory" in op.tags:
        return None
    return op.kernels.get(device_type)


_NOT_PLAIN = object()  # _run_direct's answer when an argument is not a plain CPU tensor


def _run_direct(op, kernel, args, kwargs, device=None):
    """``op``'s result from its ``kernel`` (see :func:`_direct_kernel`) as ``run_backend`` wraps it, with
    numpy's floating-point errors ignored as there; ``_NOT_PLAIN`` where the dispatcher must decide: a tensor
    argument that is a subclass, or (``device`` None: the C++ runner) does not hold a numpy array, or (the
    call's ``device`` given: the Triton runner) is on another device or holds a meta array."""
    found = None
    for a in (*args, *kwargs.values()) if kwargs else args:
        for t in a if type(a) is list or type(a) is tuple else (a,):
            if isinstance(t, Tensor):
                if type(t) is not Tensor:
                    return _NOT_PLAIN
                if device is None:
                    if type(t._data) is not np.ndarray:
                        return _NOT_PLAIN
                elif t._device != device or type(t._data) is MetaArray:
                    return _NOT_PLAIN
                found = t._device
    if found is None:
        return _NOT_PLAIN
    token = None if get_error_state() is IGNORE_ALL else set_error_state(IGNORE_ALL)
    try:
        result = kernel(*args, **kwargs) if kwargs else kernel(*args)
    finally:
        if token is not None:
            reset_error_state(token)
    return _wrap(result, found, op)


def _holds_ref(value):
    """Whether an extern argument is, or holds, a buffer reference (resolved to a tensor per call)."""
    if isinstance(value, (_BufRef, _StridedRef, _EmptyRef, _InputRef)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_ref(v) for v in value)
    return False


def _layout(buf):
    """``buf``'s strides (ints) when they are not contiguous, else None."""
    from .. import ir

    strides = _sizes(buf.strides)
    return None if strides == _sizes(ir.contiguous_strides(buf.sizes)) else strides


_BLAS_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def _strided_array(arr, strided):
    """The view of numpy array ``arr`` that a :class:`_StridedRef` describes (element offset and strides)."""
    item = arr.itemsize
    byte_strides = tuple(s * item for s in strided.strides)
    if arr.flags.c_contiguous:  # one constructor call instead of two as_strided calls
        try:
            return np.ndarray(strided.sizes, arr.dtype, arr, strided.offset * item, byte_strides)
        except (TypeError, ValueError):  # a view reaching outside the buffer: as_strided checks nothing
            pass
    start = np.lib.stride_tricks.as_strided(arr, (strided.offset + 1,), (item,))[strided.offset:]
    return np.lib.stride_tricks.as_strided(start, strided.sizes, byte_strides)


def _strided_empty(sizes, strides, np_dtype):
    """An uninitialised numpy array of ``sizes`` with element ``strides`` (a dense layout)."""
    flat = np.empty(max(math.prod(sizes), 1), dtype=np_dtype)
    return np.lib.stride_tricks.as_strided(flat, sizes, tuple(s * flat.itemsize for s in strides))


def _relayoutable(sizes, byte_strides):
    """Whether a value can be copied into this example layout: no stride 0 over a dimension longer than 1
    (an expanded example: the kernels read one element there, which another value need not repeat)."""
    return all(b > 0 or n <= 1 for n, b in zip(sizes, byte_strides))


def _relayout(arr, byte_strides):
    """A copy of ``arr`` laid out with ``byte_strides`` (positive; possibly with gaps, as a slice's)."""
    extent = 1 + sum((n - 1) * (b // arr.itemsize) for n, b in zip(arr.shape, byte_strides))
    flat = np.empty(extent, dtype=arr.dtype)
    out = np.lib.stride_tricks.as_strided(flat, arr.shape, byte_strides)
    np.copyto(out, arr)
    return out


def _refs(value, slots):
    from .. import ir

    if isinstance(value, ir.StridedArg):
        return _StridedRef(value, slots)
    if isinstance(value, ir.EmptyArg):
        return _EmptyRef(value.sizes, _numpy_dtype(value.dtype))
    if isinstance(value, ir.OpaqueInput):
        return _InputRef(value.name)
    if isinstance(value, ir.Buffer):
        return _BufRef(value, slots)
    if isinstance(value, (list, tuple)):
        return type(value)(_refs(v, slots) for v in value)
    return value


class _RunPlan:
    """Everything a call of a compiled graph needs, as plain values (no IR, no SymPy): picklable.

    Built from the lowered graph and its schedule; :mod:`.plan_cache` stores it on disk so a later
    process loads it and the library instead of compiling again.
    """

    def __init__(self, graph, scheduler, symbols=()):
        from . import cpp

        self.symbols = [s.name for s in symbols]  # dynamic sizes: kernel arguments in the pointer table
        self._assign_slots(graph, scheduler)
        self.source, steps = cpp.generate(scheduler, self.slots)
        _stage("cpp", self.source)
        self.native = any(isinstance(s, str) for s in steps)
        self.steps = [("native", s) if isinstance(s, str) else ("extern", _ExternStep(s, self.slots)) for s in steps]
        self.scalar_inputs = list(graph.scalar_inputs)
        self.opaque_inputs = [(b.position, b.name) for b in graph.opaque_inputs]
        self.output_is_sequence = graph.output_is_sequence
        self._plan_call(graph, scheduler)

    def _assign_slots(self, graph, scheduler):
        """One pointer slot per buffer in memory (buffers sharing storage share the slot)."""
        from .. import ir

        slots = {}
        order = []

        def add(name, key=None):
            key = key or name
            if key not in order:
                order.append(key)
            slots[name] = order.index(key)

        for b in graph.inputs:
            if b is not None:
                add(b.name)
        for b in graph.constants:
            add(b.name)
        for name, storage in scheduler.storage.items():
            add(name, "storage:" + storage)
        for step in scheduler.steps:
            if isinstance(step, ir.ExternKernel):
                for out in step.outputs:
                    add(out.name)
        for name in self.symbols:  # a size's value travels in the table as a pointer-sized integer
            add("sym:" + name)
        self.slots = slots
        self.nslots = len(order)

    def _plan_call(self, g, scheduler):
        import sympy

        from .. import ir
        from ..scheduler import FusedKernel

        outputs = {b.name for b in g.outputs if isinstance(b, ir.Buffer)}
        self.inputs = []
        for b in g.inputs:
            if b is None:
                continue
            np_dtype = _numpy_dtype(b.dtype)
            self.inputs.append((b.position, self.slots[b.name], _sizes(b.sizes),
                                _sizes(sympy.sympify(s) * np_dtype.itemsize for s in b.strides), np_dtype, b.name))
        self.constants = [(self.slots[b.name], b.constant) for b in g.constants]
        buffers = {}
        for step in scheduler.steps:
            if isinstance(step, FusedKernel):
                for node in step.nodes:
                    buffers[node.buffer.name] = node.buffer
        # outputs: fresh ember tensors per call; other storage: one numpy byte array per slot
        self.fresh = [(self.slots[name], name, _sizes(buffers[name].sizes),
                       _numpy_dtype(buffers[name].dtype), _layout(buffers[name]))
                      for name in outputs if name in buffers]
        storage = {}
        for name in scheduler.storage:
            if name in outputs:
                continue
            b = buffers[name]
            nbytes = _nbytes(b)
            slot = self.slots[name]
            # buffers share storage only at equal sizes (scheduler): Max only folds equal expressions
            storage[slot] = _size(sympy.Max(storage.get(slot, 0), nbytes))
        self.scratch = sorted(storage.items())
        # each output: (True, buffer name or (name, sizes): a view) read from the call's values, or (False, a value)
        self.outputs = []
        for o in g.outputs:
            if isinstance(o, ir.InputBuffer) and o.constant is not None:
                self.outputs.append((False, o.constant))
            elif isinstance(o, (ir.Buffer, ir.OpaqueInput)):  # (a sparse input a forward saves for backward)
                self.outputs.append((True, o.name))
            elif isinstance(o, ir.StridedArg):  # an extern's whole result, reshaped: a view of it
                self.outputs.append((True, (o.buffer.name, _sizes(o.sizes))))
            else:
                self.outputs.append((False, o))


class CompiledGraph:
    """A compiled graph: call it with the graph's inputs.

    Attributes:
        graph (GraphLowering): the loop IR (lowered again on first access after a warm start).
        scheduler (Scheduler): the kernels and the memory plan (likewise).
        source (str): the generated C++.
    """

    def __init__(self, plan, lowered, binding=None):
        self._plan = plan
        #: dynamic.SizeBinding of a graph with symbolic sizes (None: fixed sizes)
        self.binding = binding
        self.assumptions = binding.assumption_text if binding is not None else []
        self._resolved = {}  # symbol values -> the plan's lists at those sizes
        self._lowered = lowered  # (graph, scheduler), or a function that lowers again (warm start)
        self.source = plan.source
        self.slots = plan.slots
        self.nslots = plan.nslots
        lib = _load(plan.source) if plan.native else None
        self._steps = []
        for kind, step in plan.steps:
            if kind == "native":
                fn = getattr(lib, step)
                fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
                # nonzero: a kernel of the segment divided an integer by zero (eager raises)
                fn.restype = ctypes.c_int
                self._steps.append(("native", fn))
            else:
                self._steps.append(("extern", _Extern(step, plan.slots)))
        # extern calls other than BLAS products go through the dispatcher: a call runs them all under one
        # no_grad (entering it per extern call cost about 1.5 us each)
        self._dispatches = any(k == "extern" and not s.product for k, s in self._steps)
        self._inputs = plan.inputs
        self._scalar_inputs = plan.scalar_inputs
        self._opaque_inputs = plan.opaque_inputs
        self._constants = plan.constants
        self._fresh = plan.fresh
        self._scratch = plan.scratch
        self._outputs = plan.outputs
        self._output_is_sequence = plan.output_is_sequence
        self._table_type = ctypes.c_void_p * max(plan.nslots, 1)
        self._scratch_pool = []  # [(scratch plan, its arrays)]: the scratch of a finished call, for the next

    def _lowering(self):
        if callable(self._lowered):
            self._lowered = self._lowered()
        return self._lowered

    @property
    def graph(self):
        """The loop IR (:class:`~ember._inductor.graph.GraphLowering`), lowered again after a warm start."""
        return self._lowering()[0]

    @property
    def scheduler(self):
        """The kernels and memory plan (:class:`~ember._inductor.scheduler.Scheduler`)."""
        return self._lowering()[1]

    # the call ------------------------------------------------------------------------------

    def __call__(self, *args):
        if self.binding is not None:
            return self._run(args, *self._at_sizes(self.binding.values(args)))
        return self._run(args, self._inputs, self._fresh, self._scratch, self._outputs, self._steps, ())

    def _at_sizes(self, values):
        """The plan's lists with the dynamic sizes resolved at ``values`` (cached per sizes)."""
        resolved = self._resolved.get(values)
        if resolved is None:
            binding = self.binding
            if not binding.check(values):
                raise ValueError(f"compiled graph: sizes {dict(zip(binding.symbols, values))} break its "
                                 f"assumptions {binding.assumption_text}")
            steps = [(k, _Extern(binding.resolve(p, values), self.slots) if k == "extern" else s)
                     for (k, s), (_, p) in zip(self._steps, self._plan.steps)]
            sizes = [(self.slots["sym:" + s.name], v) for s, v in zip(binding.symbols, values)]
            resolved = (*binding.resolve([self._inputs, self._fresh, self._scratch, self._outputs], values),
                        steps, sizes)
            self._resolved[values] = resolved
        return resolved

    def _run(self, args, inputs, fresh, scratch_plan, outputs, steps, sizes):
        ptrs = self._table_type()
        for slot, value in sizes:
            ptrs[slot] = value
        values = {}  # buffer name -> tensor, for extern calls and outputs
        for position, slot, sizes, byte_strides, np_dtype, name in inputs:
            t = args[position]
            arr = t._data
            if type(arr) is not np.ndarray or arr.shape != sizes or arr.dtype != np_dtype:
                raise self._layout_error(position, name, t)
            if arr.strides != byte_strides and arr.size:  # (an empty input is never read)
                # another layout than the example's, e.g. a saved activation that the compiled forward
                # returned dense where the joint graph had a view: copied into the layout the kernels index
                if not _relayoutable(sizes, byte_strides):
                    raise self._layout_error(position, name, t)
                arr = _relayout(arr, byte_strides)
                t = Tensor._make(arr)
            ptrs[slot] = _address(arr)
            values[name] = t
        for position, name in self._opaque_inputs:  # sparse inputs, for the extern calls that take them
            values[name] = args[position]
        for position, value in self._scalar_inputs:
            if args[position] != value:
                raise ValueError(f"compiled graph: input {position} was compiled as the constant {value!r}, "
                                 f"got {args[position]!r}")
        for slot, t in self._constants:
            ptrs[slot] = _address(t._data)
        scratch = values[_SCRATCH] = self._take_scratch(scratch_plan)  # slot -> its bytes
        for slot, arr in scratch.items():
            ptrs[slot] = _address(arr)
        for slot, name, sizes, np_dtype, strides in fresh:
            arr = np.empty(sizes, dtype=np_dtype) if strides is None else _strided_empty(sizes, strides, np_dtype)
            values[name] = Tensor._make(arr)
            ptrs[slot] = _address(arr)
        if self._dispatches:
            with ember.no_grad():  # the extern ops record no graph (inputs may require grad)
                self._run_steps(steps, ptrs, values, args)
        else:
            self._run_steps(steps, ptrs, values, args)
        outs = [(values[v] if type(v) is str else values[v[0]].view(v[1])) if from_values else v
                for from_values, v in outputs]
        self._give_back_scratch(scratch_plan, scratch, outs)
        return tuple(outs) if self._output_is_sequence else outs[0]

    def _run_steps(self, steps, ptrs, values, args):
        nthreads = _threads()
        for kind, step in steps:
            if kind == "native":
                if step(ptrs, nthreads):
                    raise RuntimeError("ZeroDivisionError")
            else:
                self._run_extern(step, ptrs, values, args)

    def _take_scratch(self, scratch_plan):
        """The scratch arrays of a call (slot -> bytes): those of an earlier call of the same plan when one
        is free, else fresh ones. Reusing them saves the page faults of tens of MB per call (a fresh
        32 MB array costs about 4 ms more to write than one already mapped)."""
        pool = self._scratch_pool
        while pool:
            try:
                plan, arrays = pool.pop()
            except IndexError:  # another thread took it
                break
            if plan is scratch_plan:
                return arrays
        return {slot: np.empty(max(nbytes, 1), dtype=np.uint8) for slot, nbytes in scratch_plan}

    def _give_back_scratch(self, scratch_plan, scratch, outs):
        """Keep ``scratch`` for the next call unless an output is a view of it (an extern op that returned
        its argument): that output must not change when the next call writes the scratch."""
        if not scratch or self._scratch_pool:
            return
        ids = {id(arr) for arr in scratch.values()}
        for out in outs:
            base = out._data if isinstance(out, Tensor) else None
            while isinstance(base, np.ndarray):
                if id(base) in ids:
                    return
                base = base.base
        self._scratch_pool.append((scratch_plan, scratch))

    def _layout_error(self, position, name, t):
        sizes, byte_strides, np_dtype = next((i[2], i[3], i[4]) for i in self._inputs if i[0] == position)
        strides = tuple(b // np_dtype.itemsize for b in byte_strides)
        return ValueError(
            f"compiled graph: input {position} ({name}) must be a CPU tensor with shape "
            f"{sizes}, strides {strides} and dtype {np_dtype} like the example input, got {tuple(t.shape)}, "
            f"{tuple(t.stride())}, {t.dtype} on {t.device}")

    def _tensor_of(self, buf, ptrs, values):
        t = values.get(buf.name)
        if t is not None:
            return t
        if buf.constant is not None:
            return buf.constant
        # an intermediate in scratch memory: a view of its slot's bytes (no copy)
        arr = values[_SCRATCH][buf.slot][:buf.nbytes].view(buf.np_dtype).reshape(buf.sizes)
        t = Tensor._make(arr)  # (from_numpy's checks of dtype and strides hold for our own bytes)
        values[buf.name] = t
        return t

    def _strided_tensor(self, strided, ptrs, values):
        """The tensor of a :class:`~ember._inductor.ir.StridedArg`: a strided view of its buffer's array."""
        return Tensor._make(_strided_array(self._tensor_of(strided.buffer, ptrs, values)._data, strided))

    def _operand_array(self, v, ptrs, values):
        """The numpy array of an extern call's tensor argument ``v`` (a buffer or strided reference)."""
        if isinstance(v, _StridedRef):
            return _strided_array(self._tensor_of(v.buffer, ptrs, values)._data, v)
        return self._tensor_of(v, ptrs, values)._data

    def _blas_product(self, kernel, ptrs, values):
        """A matmul extern's result through the eager kernel's array function, or None for another call.

        Dispatching ``ember.matmul`` (argument checks, the meta function, grad mode, two tensor wrappers)
        cost several times a small product's BLAS call: BERT-sized graphs make dozens of them per step.
        The eager kernel's array function gives the same values, as long as both operands are numpy arrays
        of one float dtype with at least two dims (what the checks would accept anyway).
        """
        first, second = kernel.args
        a = self._operand_array(first, ptrs, values)
        b = self._operand_array(second, ptrs, values)
        if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype or \
                a.dtype not in _BLAS_DTYPES or a.ndim < 2 or b.ndim < 2:
            return None
        return Tensor._make(_matmul_arrays(a, b))

    def _extern_value(self, v, ptrs, values):
        """The call argument for ``v``: a tensor for a buffer reference, lists and tuples element-wise."""
        if isinstance(v, _BufRef):
            return self._tensor_of(v, ptrs, values)
        if isinstance(v, _StridedRef):
            return self._strided_tensor(v, ptrs, values)
        if isinstance(v, _EmptyRef):
            return Tensor._make(np.empty(v.sizes, dtype=v.np_dtype))
        if isinstance(v, _InputRef):
            return values[v.name]
        if isinstance(v, (list, tuple)):
            return type(v)(self._extern_value(x, ptrs, values) for x in v)
        return v

    def _dispatch(self, kernel, ptrs, values):
        """The extern op called on its arguments, buffer references replaced by tensors: its CPU kernel alone
        where :func:`_direct_kernel` allows (fixed sizes, no dispatch mode watching), else through the
        dispatcher."""
        call_args = kernel.template.copy()
        for i, ref in kernel.refs:
            call_args[i] = self._extern_value(ref, ptrs, values)
        kwargs = None
        if kernel.kwargs:
            arg = self._extern_value
            kwargs = {k: arg(v, ptrs, values) for k, v in kernel.kwargs.items()}
        if kernel.direct is not None and self.binding is None and not _dispatch_state.modes:
            result = _run_direct(kernel.op, kernel.direct, call_args, kwargs)
            if result is not _NOT_PLAIN:
                return result
        return kernel.op(*call_args, **kwargs) if kwargs else kernel.op(*call_args)

    def _run_extern(self, kernel, ptrs, values, args):
        """Run the :class:`_Extern` ``kernel`` (under ``_run``'s no_grad) and enter its outputs in
        ``values`` and the pointer table."""
        # no closure over ``values`` here: a self-referencing nested function is a reference cycle that
        # kept every call's tensors alive until the garbage collector ran (75 MB a step for the encoder)
        if not kernel.product:
            result = self._dispatch(kernel, ptrs, values)
        else:
            result = self._blas_product(kernel, ptrs, values)
            if result is None:  # integers, half floats: dispatched (a graph of products only has no no_grad on)
                with ember.no_grad():
                    result = self._dispatch(kernel, ptrs, values)
        for name, path, strides, slot in kernel.outputs:
            value = result
            for k in path:
                value = value[k]
            if strides is not None:  # the layout eager gives (and the kernels reading it index by)
                if not kernel.function or tuple(value.stride()) != strides or value.storage_offset():
                    value = Tensor._make(_strided_empty(tuple(value.shape), strides, value._data.dtype)).copy_(value)
            elif not (kernel.product and value._data.flags.c_contiguous):
                # a view-like op's result may alias scratch memory that a later buffer reuses: copy it
                value = value.contiguous() if kernel.function else value.clone()
            values[name] = value
            ptrs[slot] = _address(value._data)

    def __str__(self):
        return str(self.scheduler)
