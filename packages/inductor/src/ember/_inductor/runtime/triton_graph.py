"""The Python wrapper that runs a graph compiled to Triton: kernels and extern calls, in order.

:func:`compile_graph_triton` lowers and schedules a functional FX graph exactly as the C++ path does
(:mod:`ember._inductor.codegen.wrapper`), generates one Triton module for it
(:mod:`ember._inductor.codegen.triton`), loads it through the cache (:mod:`.triton_launch`) and returns a
:class:`TritonCompiledGraph`. A call allocates the outputs and intermediates on the inputs' device
(cuda: CuPy memory; cpu under ``TRITON_INTERPRET=1``: numpy memory), launches each kernel with the config
:mod:`ember._inductor.autotune` picks, and calls the eager op for each extern call.

Unlike the C++ wrapper there is no native entry: one Python launch per kernel (CUDA graphs, which remove
that cost, are a later step). Intermediate buffers share memory as the scheduler planned it.
"""

from __future__ import annotations

import sympy

import ember
from ember._ops._dispatch import state as _dispatch_state

from .. import config, ir
from ..codegen.wrapper import _NOT_PLAIN, _direct_kernel, _run_direct
from .triton_launch import _timing_kernels, timer

__all__ = ["compile_graph_triton", "compile_graph_triton_dynamic", "TritonCompiledGraph"]

#: The key of a call's integer-division error flag in its values (buffer names are strings).
_ERROR_FLAG = object()


def _stage(name, text):
    from .. import debug

    debug.stage(name, text)


def compile_graph_triton(gm, example_inputs, device=None):
    """Compile ``gm`` (a functional graph of registry ops) to Triton kernels and return a callable.

    Args:
        gm (ember.fx.GraphModule): the graph (after aot).
        example_inputs (sequence): one value per placeholder; tensors fix shapes, strides, dtypes, device.
        device (ember.device or None): the device it runs on; None: the first real tensor's of
            ``example_inputs`` (aot hands meta tensors, so ``compile_fx`` passes the real inputs' device).

    Returns:
        TritonCompiledGraph: ``f(*inputs)`` returning the graph's outputs like the C++ path's callable.

    Raises:
        LoweringException: the graph cannot be compiled (compile_fx then runs it eagerly).
    """
    from ..codegen.triton import generate
    from ..codegen.wrapper import _lower
    from ..lowering import graph_device

    device = ember.device(device) if device is not None else _device_of(example_inputs)
    # the lowering reads only shapes, strides and dtypes: real cuda examples (a direct call; aot
    # hands meta ones) are described by meta tensors, which it accepts on every path
    with graph_device(device):
        graph, scheduler = _lower(gm, [_meta_like(t) for t in example_inputs])
    if config.resolved_max_autotune():  # matmul templates (select_algorithm.py)
        from ..select_algorithm import select_templates

        select_templates(scheduler, device)
    source = generate(scheduler)
    _stage("triton", source.source)
    return TritonCompiledGraph(graph, scheduler, source, device)


def compile_graph_triton_dynamic(gms, example_inputs, spec, device=None):
    """:func:`compile_graph_triton` for a graph with symbolic sizes: the kernels take the dynamic sizes
    as arguments (see :func:`ember._inductor.codegen.wrapper.compile_graph_dynamic`, the C++ twin).

    Raises:
        NotDynamic: the lowerings at the traced sizes differ, or a size has no expression.
    """
    import sympy

    from .. import dynamic
    from ..codegen.triton import generate
    from ..graph import GraphLowering
    from ..lowering import graph_device
    from ..scheduler import Scheduler

    device = ember.device(device) if device is not None else _device_of(example_inputs[0])
    with graph_device(device):
        graph, assumptions = dynamic.lower_and_unify(
            gms, example_inputs, spec, lambda gm, ex: GraphLowering(gm, [_meta_like(t) for t in ex]).run())
    hints = dynamic.probe_points(spec)[0]
    inputs = [(b.position, b.sizes) for b in graph.inputs if b is not None]
    used = set().union(*(sympy.sympify(s).free_symbols for _, sizes in inputs for s in sizes)) if inputs else set()
    _stage("loop_ir", lambda: str(graph))
    with ir.size_hints(hints) as assumed:
        scheduler = Scheduler(graph)
        _stage("scheduled", lambda: str(scheduler))
        if config.resolved_max_autotune():  # templates take their sizes as arguments too
            from ..select_algorithm import select_templates

            select_templates(scheduler, device)
        source = generate(scheduler)
        _stage("triton", source.source)
        compiled = TritonCompiledGraph(graph, scheduler, source, device)
    compiled.binding = dynamic.SizeBinding(inputs, [s for s in hints if s in used], assumptions + assumed)
    compiled.assumptions = compiled.binding.assumption_text
    return compiled


def _meta_like(value):
    if isinstance(value, ember.Tensor) and value.device.type not in ("cpu", "meta"):
        return ember.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta")
    return value


def _device_of(tensors, default=None):
    """The device of the first real tensor of ``tensors`` (example inputs may be meta tensors)."""
    for t in tensors:
        if isinstance(t, ember.Tensor) and t.device.type != "meta":
            return t.device
    return default if default is not None else ember.device("cpu")


class TritonCompiledGraph:
    """A graph compiled to Triton: call it with the graph's inputs.

    Attributes:
        graph (GraphLowering): the loop IR.
        scheduler (Scheduler): the kernels.
        source (str): the generated Triton module.
        module: the imported module (its ``__file__`` is in the cache folder).
    """

    def __init__(self, graph, scheduler, graph_source, device):
        from .. import autotune
        from .triton_helpers import interpreting
        from .triton_launch import load_module

        self.graph = graph
        self.scheduler = scheduler
        self.source = graph_source.source
        self.steps = graph_source.steps
        self.device = device
        self.module = load_module(self.source)
        self.autotuner = autotune.Autotuner(self.module.__file__, benchmark=not interpreting())
        self._buffers = {}
        for step in scheduler.steps:
            if not isinstance(step, ir.ExternKernel):
                for node in step.nodes:
                    self._buffers[node.buffer.name] = node.buffer
        self.binding = None  # dynamic.SizeBinding of a graph with symbolic sizes
        self.assumptions = []
        self._env = {}  # the dynamic sizes of the current call (symbol -> int)
        self._memos = {}  # the sizes' values -> {size expression: its value}
        self._memo = self._memos.setdefault((), {})
        self._plan_memory(graph, scheduler)
        self._moved = {}  # constants copied to the call's device

    def _plan_memory(self, graph, scheduler):
        """Outputs (and buffers in a layout of their own) get fresh memory each call; other intermediates
        share the byte slots of the scheduler's plan (``scheduler.storage``: a slot is reused once its
        last reader has run)."""
        outputs = {b.name for b in graph.outputs if isinstance(b, ir.Buffer)}
        self._fresh = []
        self._slots = {}  # slot name -> bytes
        self._slot_views = []  # (buffer name, slot name, bytes, dtype, sizes)
        for name in sorted(n for n in self._buffers if n in scheduler.storage):
            buf = self._buffers[name]
            contiguous = list(buf.strides) == list(ir.contiguous_strides(buf.sizes))
            if name in outputs or not contiguous:
                self._fresh.append(name)
                continue
            slot, nbytes = scheduler.storage[name], _nbytes(buf)
            # slots are shared only by buffers of equal sizes (scheduler): Max folds equal expressions
            self._slots[slot] = _static(sympy.Max(self._slots.get(slot, 0), nbytes))
            self._slot_views.append((name, slot, nbytes, buf.dtype, [_static(d) for d in buf.sizes]))

    def __str__(self):
        return self.source

    def _int(self, expr):
        """The value of a size at this call (an int, or a float ``SizeFloat`` argument); evaluated once per
        set of sizes (``_memo``), so a call with sizes seen before does no SymPy work."""
        if type(expr) is int:
            return expr
        value = self._memo.get(expr)
        if value is None:
            if isinstance(expr, sympy.Basic) and expr.is_Integer:
                value = int(expr)
            else:
                from ..dynamic import _resolve

                value = _resolve(expr, self._env)
            self._memo[expr] = value
        return value

    def _ints(self, exprs):
        return [self._int(e) for e in exprs]

    def _on_device(self, constant):
        """A tensor constant of the graph on the device the call runs on (moved once, then kept)."""
        if constant.device == self.device:
            return constant
        moved = self._moved.get((id(constant), str(self.device)))
        if moved is None:
            moved = self._moved[(id(constant), str(self.device))] = constant.to(self.device)
        return moved

    def _empty(self, buf_or_sizes, dtype=None):
        if isinstance(buf_or_sizes, ir.Buffer):
            buf = buf_or_sizes
            sizes, strides = self._ints(buf.sizes), self._ints(buf.strides)
            if strides != self._ints(ir.contiguous_strides(buf.sizes)):  # an output in eager's layout
                return ember.empty_strided(sizes, strides, dtype=buf.dtype, device=self.device)
            return ember.empty(sizes, dtype=buf.dtype, device=self.device)
        else:
            sizes = self._ints(buf_or_sizes)
        return ember.empty(sizes, dtype=dtype, device=self.device)

    def __call__(self, *args):
        g = self.graph
        values = {}
        self.device = _device_of(args, self.device)
        if self.binding is not None:
            sizes = self.binding.values(args)
            if not self.binding.check(sizes):
                raise ValueError(f"compiled graph: sizes {sizes} break its assumptions {self.assumptions}")
            self._env = dict(zip(self.binding.symbols, sizes))
            self._memo = self._memos.setdefault(sizes, {})
        for b in g.inputs:
            if b is None:
                continue
            t = args[b.position]
            expected = tuple(self._ints(b.strides))
            if tuple(t.shape) != tuple(self._ints(b.sizes)) or t.dtype != b.dtype:
                sizes = tuple(self._ints(b.sizes))
                raise ValueError(f"compiled graph: input {b.position} ({b.name}) must have shape {sizes} and "
                                 f"dtype {b.dtype}, got {tuple(t.shape)}, {t.dtype}")
            if tuple(t.stride()) != expected and t.numel() > 1:
                # the kernels index with the example's strides: copy into that layout, unless the example was
                # expanded (stride 0: the kernels read one element there, which another value need not repeat)
                if any(st == 0 and n > 1 for st, n in zip(expected, t.shape)):
                    raise ValueError(f"compiled graph: input {b.position} ({b.name}) must have strides {expected} "
                                     f"like the example input (it was expanded), got {tuple(t.stride())}")
                t = ember.empty_strided(tuple(t.shape), expected, dtype=t.dtype, device=t.device).copy_(t)
            values[b.name] = t
        for position, value in g.scalar_inputs:
            if args[position] != value:
                raise ValueError(f"compiled graph: input {position} was compiled as the constant {value!r}, "
                                 f"got {args[position]!r}")
        for b in g.constants:
            values[b.name] = self._on_device(b.constant)
        for name in self._fresh:
            values[name] = self._empty(self._buffers[name])
        slots = {slot: ember.empty(max(self._int(n), 1), dtype=ember.uint8, device=self.device)
                 for slot, n in self._slots.items()}
        for name, slot, nbytes, dtype, sizes in self._slot_views:
            values[name] = slots[slot][:self._int(nbytes)].view(dtype).view(self._ints(sizes))
        for step in self.steps:
            if isinstance(step, ir.ExternKernel):
                try:
                    with timer(("extern", str(step.op), "") if _timing_kernels() else None):
                        self._run_extern(step, values)
                except Exception as exc:
                    # which call failed (a CUDA-graph capture refusing a host copy names it in its log)
                    if hasattr(exc, "add_note"):  # Python 3.11+
                        exc.add_note(f"in the extern call of {getattr(step.op, 'name', step.op)}")
                    raise
            elif getattr(step, "is_template", False):  # a matmul template (select_algorithm.py)
                step.run(self, values)
            else:
                self._run_kernels(step, values)
        flag = values.get(_ERROR_FLAG)
        if flag is not None and int(flag.cpu().numpy()[0]):  # (a device sync: only graphs that divide integers)
            raise RuntimeError("ZeroDivisionError")
        outs = []
        for o in g.outputs:
            if isinstance(o, ir.InputBuffer) and o.constant is not None:
                outs.append(o.constant)
            elif isinstance(o, ir.StridedArg):
                outs.append(values[o.buffer.name].view(self._ints(o.sizes)))
            elif isinstance(o, ir.Buffer):
                outs.append(values[o.name])
            else:
                outs.append(o)
        return tuple(outs) if g.output_is_sequence else outs[0]

    # kernels -----------------------------------------------------------------------------------

    def _run_kernels(self, kernels, values):
        from .triton_launch import BufferArg, launch, use_ember_stream

        if self.device.type == "cuda":  # pragma: no cover - needs a GPU
            use_ember_stream()
        scratch = {}
        for name, numel, dtype in kernels[0].scratch or ():  # a split reduction's partial results
            scratch[name] = ember.empty(self._int(numel), dtype=dtype, device=self.device)
        for kernel in kernels:
            ptrs = [BufferArg(values[name]) for name in kernel.buffers]
            ptrs += [BufferArg(t) for t in scratch.values()]
            if kernel.error_flag:
                if _ERROR_FLAG not in values:
                    values[_ERROR_FLAG] = ember.zeros(1, dtype=ember.int32, device=self.device)
                ptrs.append(BufferArg(values[_ERROR_FLAG]))
            sizes = self._ints(kernel.sizes)
            xnumel = self._int(kernel.xnumel)
            rnumel = self._int(kernel.rnumel) if kernel.rnumel is not None else None
            fn = getattr(self.module, kernel.name)

            def run(cfg, fn=fn, kernel=kernel, ptrs=ptrs, sizes=sizes, xnumel=xnumel):
                launch(fn, kernel, [*ptrs, *sizes], cfg, xnumel)

            cfg = self.autotuner.choose(kernel, xnumel, rnumel, run)
            run(cfg)

    # extern calls ------------------------------------------------------------------------------

    def _arg(self, v, values):
        if isinstance(v, ir.StridedArg):
            base = values[v.buffer.name] if v.buffer.name in values else self._on_device(v.buffer.constant)
            return base.as_strided(self._ints(v.sizes), self._ints(v.strides), self._int(v.offset))
        if isinstance(v, ir.EmptyArg):
            return self._empty(v.sizes, v.dtype)
        if isinstance(v, ir.InputBuffer) and v.constant is not None:
            return self._on_device(v.constant)
        if isinstance(v, ir.Buffer):
            return values[v.name]
        if isinstance(v, (list, tuple)):
            return type(v)(self._arg(x, values) for x in v)
        if isinstance(v, sympy.Basic) or hasattr(v, "expr"):  # an argument over the dynamic sizes
            return self._int(v)
        return v

    def _run_extern(self, kernel, values):
        args = self._arg(list(kernel.args), values)
        kwargs = {k: self._arg(v, values) for k, v in kernel.kwargs.items()}
        result = self._direct_call(kernel.op, args, kwargs)
        if result is None:
            with ember.no_grad():
                result = kernel.op(*args, **kwargs)
        for out in kernel.outputs:
            value = result
            for k in out.path:
                value = value[k]
            strides = tuple(self._ints(out.strides))
            if strides != tuple(self._ints(ir.contiguous_strides(out.sizes))):
                if tuple(value.stride()) != strides or value.storage_offset():
                    value = ember.empty_strided(tuple(value.shape), strides, dtype=value.dtype,
                                                device=value.device).copy_(value)
            else:
                value = value.contiguous() if kernel.op.kind == "function" else value.clone()
            values[out.name] = value


    def _direct_call(self, op, args, kwargs):
        """The extern ``op``'s result from its kernel for the call's device, without the dispatcher; None where
        the dispatcher must run.

        The C++ runner's rule and code (``codegen/wrapper.py``'s ``_direct_kernel`` and ``_run_direct``): in a
        graph of fixed sizes the meta function would repeat the checks it made when the graph was traced, and
        extern calls run without grad, so only the kernel is left to run (its checks of values stay). On cuda
        the dispatcher's Python work (argument scan, meta function, wrappers) is host time, which bounds a small
        model's step: the model suite's MLP ran compiled slower than eagerly. Views, in-place ops, factories,
        ops without a kernel of their own for the device, dispatch modes, tensor subclasses and tensors of
        another device keep the dispatcher.
        """
        if self.binding is not None or _dispatch_state.modes:
            return None
        kernel = _direct_kernel(op, self.device.type)
        if kernel is None:
            return None
        result = _run_direct(op, kernel, args, kwargs, self.device)
        return None if result is _NOT_PLAIN else result


def _static(expr):
    """An int for a static size, else the SymPy expression (evaluated per call)."""
    expr = sympy.sympify(expr)
    return int(expr) if expr.is_Integer else expr


def _nbytes(buf):
    n = sympy.Integer(buf.dtype.itemsize)
    for s in buf.sizes:
        n = n * sympy.sympify(s)
    return _static(n)
