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

import numpy as np

import ember
from ember._tensor import Tensor

from .. import config, ir
from ..graph import GraphLowering
from ..scheduler import FusedKernel, Scheduler
from . import cpp

__all__ = ["compile_graph", "CompiledGraph"]


def _stage(name, text):
    from .. import debug

    debug.stage(name, text)


#: Flags that change no result: no FP-exception traps (lets selects be if-converted, so loops with
#: ternaries vectorise) and no errno from math functions (lets sqrt vectorise).
CPP_FLAGS = ("-fno-trapping-math", "-fno-math-errno")


def _load(source):
    from ..codecache import CppCodeCache

    return CppCodeCache.load(source, name="graph", extra_flags=CPP_FLAGS)


def _numpy_dtype(dtype):
    return ember.empty(0, dtype=dtype)._data.dtype


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
        >>> from ember.fx.experimental.proxy_tensor import make_fx
        >>> x = ember.arange(4.0)
        >>> f = compile_graph(make_fx(lambda t: (ember.exp(t) * 2,))(x), [x])
        >>> bool(ember.allclose(f(x)[0], ember.exp(x) * 2))
        True
    """
    graph = GraphLowering(gm, example_inputs).run()
    _stage("loop_ir", lambda: str(graph))  # built only when debugging is on
    scheduler = Scheduler(graph)
    _stage("scheduled", lambda: str(scheduler))
    return CompiledGraph(graph, scheduler)


class CompiledGraph:
    """A compiled graph: call it with the graph's inputs.

    Attributes:
        graph (GraphLowering): the loop IR.
        scheduler (Scheduler): the kernels and the memory plan.
        source (str): the generated C++.
    """

    def __init__(self, graph, scheduler):
        self.graph = graph
        self.scheduler = scheduler
        self._assign_slots()
        self.source, steps = cpp.generate(scheduler, self.slots)
        _stage("cpp", self.source)
        lib = _load(self.source) if any(isinstance(s, str) for s in steps) else None
        self._steps = []
        # kernels that divide integers report a zero divisor through a flag, raised after the call
        self._div_check = None
        if lib is not None and cpp.divides_integers(self.source):
            self._div_check = lib.ember_take_div_error
            self._div_check.restype = ctypes.c_int
            self._div_check.argtypes = []
        for step in steps:
            if isinstance(step, str):
                fn = getattr(lib, step)
                fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
                fn.restype = None
                self._steps.append(("native", fn))
            else:
                self._steps.append(("extern", step))
        self._plan_call()

    # slots and allocation ------------------------------------------------------------------

    def _assign_slots(self):
        """One pointer slot per buffer in memory (buffers sharing storage share the slot)."""
        slots = {}
        order = []

        def add(name, key=None):
            key = key or name
            if key not in order:
                order.append(key)
            slots[name] = order.index(key)

        for b in self.graph.inputs:
            if b is not None:
                add(b.name)
        for b in self.graph.constants:
            add(b.name)
        for name, storage in self.scheduler.storage.items():
            add(name, "storage:" + storage)
        for step in self.scheduler.steps:
            if isinstance(step, ir.ExternKernel):
                for out in step.outputs:
                    add(out.name)
        self.slots = slots
        self.nslots = len(order)

    def _plan_call(self):
        g = self.graph
        outputs = {b.name for b in g.outputs if isinstance(b, ir.Buffer)}
        self._inputs = []
        for b in g.inputs:
            if b is None:
                continue
            np_dtype = _numpy_dtype(b.dtype)
            self._inputs.append((b.position, self.slots[b.name], tuple(int(s) for s in b.sizes),
                                 tuple(int(s) * np_dtype.itemsize for s in b.strides), np_dtype, b.name))
        self._constants = [(self.slots[b.name], b.constant) for b in g.constants]
        buffers = {}
        for step in self.scheduler.steps:
            if isinstance(step, FusedKernel):
                for node in step.nodes:
                    buffers[node.buffer.name] = node.buffer
        # outputs: fresh ember tensors per call; other storage: one numpy byte array per slot
        self._fresh = [(self.slots[name], name, tuple(int(s) for s in buffers[name].sizes),
                        _numpy_dtype(buffers[name].dtype)) for name in outputs if name in buffers]
        storage = {}
        for name in self.scheduler.storage:
            if name in outputs:
                continue
            b = buffers[name]
            nbytes = b.numel * b.dtype.itemsize
            slot = self.slots[name]
            storage[slot] = max(storage.get(slot, 0), nbytes)
        self._scratch = sorted(storage.items())
        self._buffers = buffers
        self._table_type = ctypes.c_void_p * max(self.nslots, 1)
        # each output: (True, buffer name) read from the call's values, or (False, a fixed value)
        self._outputs = []
        for o in g.outputs:
            if isinstance(o, ir.InputBuffer) and o.constant is not None:
                self._outputs.append((False, o.constant))
            elif isinstance(o, ir.Buffer):
                self._outputs.append((True, o.name))
            elif isinstance(o, ir.StridedArg):  # an extern's whole result, reshaped: a view of it
                self._outputs.append((True, (o.buffer.name, tuple(int(s) for s in o.sizes))))
            else:
                self._outputs.append((False, o))

    # the call ------------------------------------------------------------------------------

    def __call__(self, *args):
        ptrs = self._table_type()
        values = {}  # buffer name -> tensor, for extern calls and outputs
        for position, slot, sizes, byte_strides, np_dtype, name in self._inputs:
            t = args[position]
            arr = t._data
            if type(arr) is not np.ndarray or arr.shape != sizes or arr.dtype != np_dtype or \
                    (arr.strides != byte_strides and arr.size):  # an empty input is never read
                raise self._layout_error(position, name, t)
            ptrs[slot] = _address(arr)
            values[name] = t
        for position, value in self.graph.scalar_inputs:
            if args[position] != value:
                raise ValueError(f"compiled graph: input {position} was compiled as the constant {value!r}, "
                                 f"got {args[position]!r}")
        for slot, t in self._constants:
            ptrs[slot] = _address(t._data)
        keep = []
        for slot, nbytes in self._scratch:
            arr = np.empty(max(nbytes, 1), dtype=np.uint8)
            keep.append(arr)
            ptrs[slot] = _address(arr)
        for slot, name, sizes, np_dtype in self._fresh:
            arr = np.empty(sizes, dtype=np_dtype)
            values[name] = Tensor._make(arr)
            ptrs[slot] = _address(arr)
        nthreads = _threads()
        for kind, step in self._steps:
            if kind == "native":
                step(ptrs, nthreads)
                if self._div_check is not None and self._div_check():
                    raise RuntimeError("ZeroDivisionError")
            else:
                self._run_extern(step, ptrs, values, args)
        outs = [(values[v] if type(v) is str else values[v[0]].view(v[1])) if from_values else v
                for from_values, v in self._outputs]
        del keep
        return tuple(outs) if self.graph.output_is_sequence else outs[0]

    def _layout_error(self, position, name, t):
        expected = next(b for b in self.graph.inputs if b is not None and b.position == position)
        return ValueError(
            f"compiled graph: input {position} ({name}) must be a CPU tensor with shape "
            f"{tuple(int(s) for s in expected.sizes)}, strides {tuple(int(s) for s in expected.strides)} and dtype "
            f"{expected.dtype} like the example input, got {tuple(t.shape)}, {tuple(t.stride())}, {t.dtype} on "
            f"{t.device}")

    def _tensor_of(self, buf, ptrs, values):
        t = values.get(buf.name)
        if t is not None:
            return t
        if isinstance(buf, ir.InputBuffer) and buf.constant is not None:
            return buf.constant
        # an intermediate in scratch memory: wrap its bytes (no copy)
        sizes = tuple(int(s) for s in buf.sizes)
        np_dtype = ember.empty(0, dtype=buf.dtype)._data.dtype
        nbytes = buf.numel * buf.dtype.itemsize
        raw = (ctypes.c_uint8 * max(nbytes, 1)).from_address(ptrs[self.slots[buf.name]])
        arr = np.frombuffer(raw, dtype=np.uint8, count=nbytes).view(np_dtype).reshape(sizes)
        t = ember.from_numpy(arr)
        values[buf.name] = t
        return t

    def _strided_tensor(self, strided, ptrs, values):
        """The tensor of a :class:`~ember._inductor.ir.StridedArg`: a strided view of its buffer's array."""
        arr = self._tensor_of(strided.buffer, ptrs, values)._data
        item = arr.itemsize
        start = np.lib.stride_tricks.as_strided(arr, (int(strided.offset) + 1,), (item,))[int(strided.offset):]
        view = np.lib.stride_tricks.as_strided(start, tuple(int(s) for s in strided.sizes),
                                               tuple(int(s) * item for s in strided.strides))
        return ember.from_numpy(view)

    def _run_extern(self, kernel, ptrs, values, args):
        def arg(v):
            if isinstance(v, ir.Buffer):
                return self._tensor_of(v, ptrs, values)
            if isinstance(v, ir.StridedArg):
                return self._strided_tensor(v, ptrs, values)
            if isinstance(v, (list, tuple)):
                return type(v)(arg(x) for x in v)
            return v

        with ember.no_grad():
            result = kernel.op(*arg(kernel.args), **{k: arg(v) for k, v in kernel.kwargs.items()})
        for out in kernel.outputs:
            value = result
            for k in out.path:
                value = value[k]
            # a view-like op's result may alias scratch memory that a later buffer reuses: copy it
            value = value.contiguous() if kernel.op.kind == "function" else value.clone()
            values[out.name] = value
            ptrs[self.slots[out.name]] = _address(value._data)

    def __str__(self):
        return str(self.scheduler)
