"""The graph being captured: its FX graph of registry ops, graph inputs, guards and side effects.

Tensors are traced on meta examples: each call into ember runs on the examples under a
:class:`RecordingMode` (a dispatch mode like make_fx's), which appends one node per registry op to
the graph.  Graph inputs (arguments, parameters, buffers, globals that are tensors) become
placeholders, in the order the translator first reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.fx.experimental.proxy_tensor import ProxyDispatchMode
from ember.utils._python_dispatch import DispatchMode

from .exc import SkipFrame, Unsupported
from .guards import Guard, GuardKind, TensorSpec, autocast_state
from .side_effects import SideEffects
from .symbolic import ShapeEnv, SizeSpecialized, SymHint

__all__ = ["CapturedFrame", "GraphBreak", "OutputGraph", "RecordingMode"]


@dataclass
class GraphBreak:
    """Where and why capture stopped; the runtime builds the break function from ``plan``."""

    reason: str
    filename: str | None
    lineno: int | None
    source_line: str
    plan: object  # resume.BreakPlan
    #: When the break is a call of a user function that could not be inlined whole (the reason is
    #: inside it): the index in the stack values of that callable. The runtime may compile it with
    #: the same settings before the break function calls it, so its own code is captured in graphs.
    callee_stack_index: int | None = None


@dataclass
class CapturedFrame:
    """What :func:`ember._dynamo.translator.translate` produces (see the dynamo contract)."""

    gm: object
    graph_inputs: list
    example_inputs: list
    guards: list
    side_effects: list
    result: object
    graph_break: GraphBreak | None
    ops_in_graph: int
    #: the SymPy symbols of dynamic sizes in the graph (empty: every size is static)
    symbols: tuple = ()


def _to_meta(value):
    """A meta tensor with the metadata of a real tensor (requires_grad kept)."""
    import ember

    meta = ember.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta")
    if value.requires_grad:
        meta.requires_grad_(True)
    return meta


class RecordingMode(ProxyDispatchMode):
    """Records registry ops called on meta examples; results on a real device become meta examples
    too (a factory call such as ``ember.ones(3)`` runs for real once, then is a node like any other)."""

    def __init__(self, output):
        super().__init__(output.graph, output.root)
        self.output = output
        self.real_device = None  # the device the recorded call runs on at run time
        self.log = None  # with dynamic sizes: (func, args, kwargs) per op recorded, for the shadow run

    def _to_arg(self, a):
        if isinstance(a, SymHint):
            return a.node  # a symbolic size: the node that computes it at run time
        if isinstance(a, slice):
            return slice(self._to_arg(a.start), self._to_arg(a.stop), self._to_arg(a.step))
        # ops on the examples see device='meta' (``x.float()`` passes x's device on): the graph gets the real one
        if type(a).__name__ == "device" and getattr(a, "type", None) == "meta" and self.real_device is not None:
            return self.real_device
        return super()._to_arg(a)

    def refuse_value_read(self, what):
        raise Unsupported(f"{what} reads a tensor's value into Python (data-dependent)")

    def node_of(self, value):
        entry = self._nodes.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        entry = self._by_data.get(id(value._data))
        if entry is not None and entry[0] is value._data:
            return entry[1]
        if value.device.type == "meta":
            raise Unsupported("a meta tensor that is not in the graph reached an op (made outside the recording)")
        # a real tensor constant (``ember.tensor([pos])`` made in the frame): a get_attr node of a
        # non-persistent buffer, so backends that lift a module's buffers to inputs (aot) see it as one
        name = f"_tensor_constant{self._constants}"
        self._constants += 1
        self.root.register_buffer(name, value, persistent=False)
        node = self.graph.get_attr(name)
        self.track(value, node)
        return node

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "random" in func.tags:
            # a random factory runs for real while tracing: it must not use up the generator's state
            # (the graph draws these numbers when it runs, as eager would)
            import ember

            state = ember.get_rng_state()
            try:
                result = func(*args, **kwargs)
            finally:
                ember.set_rng_state(state)
        else:
            result = func(*args, **kwargs)
        result = _metaize(result)
        node_args = tuple(self._to_arg(a) for a in args)
        node_kwargs = {k: self._to_arg(v) for k, v in kwargs.items()}
        node = self.graph.call_function(func, node_args, node_kwargs)
        if self.log is not None:
            self.log.append((func, node_args, node_kwargs, args))
        self._track_result(result, node)
        return result


class ShadowMode(DispatchMode):
    """Runs ember calls on the shadow examples, logging each registry op (nothing is recorded).

    ``recorded`` is the recording's log of the same call (``(func, node args, node kwargs, hint
    args)`` per op) and ``shape_env`` the capture's: a slice whose bound is a symbolic size is
    compared with its recorded twin (see :func:`_shadow_slice`).
    """

    def __init__(self, recorded=(), sym_exprs=None, shape_env=None):
        super().__init__()
        self.log = []
        self.recorded = recorded
        self.sym_exprs = sym_exprs or {}
        self.shape_env = shape_env

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        import ember

        kwargs = kwargs or {}
        state = ember.get_rng_state() if "random" in func.tags else None
        try:
            twin = self.recorded[len(self.log)] if len(self.log) < len(self.recorded) else None
            result = None
            if func.name == "slice" and twin is not None and twin[0] is func and not kwargs:
                result = _shadow_slice(func, args, twin, self.sym_exprs, self.shape_env)
            if result is None:
                result = func(*args, **kwargs)
        finally:
            if state is not None:
                ember.set_rng_state(state)
        self.log.append((func, args, kwargs))
        return _metaize(result)


def _shadow_slice(func, args, twin, sym_exprs, shape_env):
    """The shadow result of ``x[start:end]`` on a static dim when a bound is a symbolic size, or
    None (run the slice as it is).

    A slice clamps its bounds to the dim's size. With the symbolic bound guarded to stay within
    the dim (``s0 <= 32`` for ``pos[:T]`` on a table of 32 rows, ``s0 <= 32`` for ``pos[-T:]``, as
    PyTorch guards them), the slice has the symbolic length on every size the guard admits, though
    the shadow value itself (the hint times a prime) may fall outside the dim: the shadow result is
    then a meta tensor of the unclamped length. A bound that clamps at capture is guarded to keep
    clamping instead. Handled: ``[start:end]`` with non-negative bounds and ``[-n:]``.
    """
    import ember
    from ember.fx import Node

    if len(args) != 5 or len(twin[1]) != 5:
        return None
    x, dim, start, end, step = args
    hint_x, _, hint_start, hint_end, _ = twin[3]
    symbolic = [isinstance(b, Node) and sym_exprs.get(b) is not None for b in twin[1][2:4]]
    if not any(symbolic) or not isinstance(x, ember.Tensor) or x.dim() == 0:
        return None
    dim = dim % x.dim()
    size = x.shape[dim]
    if hint_x.shape[dim] != size:
        return None  # a symbolic dim: the shadow run already tells
    bounds = [(start, hint_start, twin[1][2]), (end, hint_end, twin[1][3])]
    if any(type(b) is not int for b, _, _ in bounds if b is not None):
        return None
    negative_start = start is not None and start < 0
    if negative_start and (end is not None or hint_start >= 0):
        return None  # ``[-n:m]``: its length depends on the dim's size
    if not negative_start and any(b is not None and b < 0 for b, _, _ in bounds[1:]):
        return None
    import sympy

    width = size
    for (value, hint, node), is_symbolic in zip(bounds, symbolic):
        if not is_symbolic:
            continue
        expr = sym_exprs[node]
        if hint < 0:  # ``-n``: within the dim while n <= size
            inside = -hint <= size
            shape_env.guard(sympy.Ge(expr, -size) if inside else sympy.Lt(expr, -size))
            reach = -value
        else:
            inside = hint <= size
            shape_env.guard(sympy.Le(expr, size) if inside else sympy.Gt(expr, size))
            reach = value
        if not inside:
            return None  # clamped on both runs: the dim's static size
        width = max(width, reach)
    if width == size:
        return None
    shape = list(x.shape)
    shape[dim] = width
    wide = ember.empty_strided(shape, x.stride(), dtype=x.dtype, device="meta")
    return func(wide, dim, start, end, step)


def _flat(value, out):
    if isinstance(value, (list, tuple)):
        for v in value:
            _flat(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _flat(v, out)
    elif isinstance(value, slice):
        _flat((value.start, value.stop, value.step), out)
    else:
        out.append(value)
    return out


def _same_sizes(recorded, shadow):
    """Whether the ops run on the shadows took the same non-symbolic ints as those recorded (an int
    that differs was computed from a size by ember code: the graph would hold the hint's value)."""
    if len(recorded) != len(shadow):
        return False
    for (func, args, kwargs, _hint_args), (sfunc, sargs, skwargs) in zip(recorded, shadow):
        if func is not sfunc:
            return False
        flat, sflat = _flat([args, kwargs], []), _flat([sargs, skwargs], [])
        if len(flat) != len(sflat):
            return False
        for a, b in zip(flat, sflat):
            # ints and floats (a scale computed from a size) that differ were computed from the hint
            if isinstance(a, (int, float)) and not isinstance(a, (bool, SymHint)) and a != b and a == a:
                return False
    return True


def _metaize(result):
    import ember

    if isinstance(result, ember.Tensor):
        return result if result.device.type == "meta" else _to_meta(result)
    if isinstance(result, tuple) and hasattr(result, "_fields"):
        return type(result)(*[_metaize(r) for r in result])
    if isinstance(result, (tuple, list)):
        return type(result)(_metaize(r) for r in result)
    return result


class OutputGraph:
    """The state shared by the root frame and every frame inlined into it."""

    def __init__(self, f_globals, dynamic=None, dynamic_dims=None, static_dims=()):
        import ember
        from ember.fx import Graph

        self.f_globals = f_globals
        # dynamic shapes: True (every dim of size >= 2), False (none), None (the dims in dynamic_dims)
        self.dynamic = dynamic
        self.dynamic_dims = dynamic_dims or {}
        self.static_dims = frozenset(static_dims)  # (source name, dim): kept static after a SizeSpecialized
        self.shape_env = ShapeEnv()
        self.sym_exprs = {}  # graph node of a symbolic size -> its SymPy expression (None: unknown)
        self.shadowing = False  # as_python hands out shadow values (the shadow run of a leaf call)
        self.graph = Graph()
        self.root = ember.nn.Module()
        self.mode = RecordingMode(self)
        self.graph_inputs = []  # Source per placeholder
        self.example_inputs = []  # real values per placeholder
        self._inputs_by_id = {}  # id(real tensor) -> (tensor, TensorVariable)
        self._last_placeholder = None
        self.guards = {}  # (source name, kind) -> Guard, in insertion order
        self.side_effects = SideEffects()
        self._memo = {}  # id(value) -> (value, tracker) for values with identity (lists, dicts, objects)
        self.outputs = []  # graph output nodes, in order
        self._output_index = {}
        self._shared = {}  # id(tracker) -> (tracker, Shared): one rebuilt object per mutable tracker
        self.initial_grad_enabled = ember.is_grad_enabled()
        self.grad_enabled = self.initial_grad_enabled
        self.add_guard(None, GuardKind.GRAD_MODE, self.grad_enabled)
        # autocast regions in force while tracing: device type -> lower dtype (regions entered outside
        # are guarded by GuardKind.AUTOCAST; those entered inside change this as the trace goes)
        self.autocast = dict(autocast_state())

    # -- guards -------------------------------------------------------------------------------------

    def add_guard(self, source, kind, expected):
        if source is not None and type(source).__name__ == "ConstantSource":
            return
        key = (source.name() if source is not None else None, kind)
        if key not in self.guards:
            self.guards[key] = Guard(source, kind, expected)

    def guard_len(self, source, length):
        self.add_guard(source, GuardKind.LEN_MATCH, length)

    # -- values -------------------------------------------------------------------------------------

    def wrap(self, value, source, guard=True):
        """The tracker of a real value read at ``source`` (see :func:`variables.builder.wrap_value`)."""
        import ember

        from .variables.builder import wrap_value

        # tensors are deduplicated by tensor_input (which guards a second path to the same tensor)
        identity = isinstance(value, (list, dict, set)) or (
            not isinstance(value, (int, float, str, bytes, tuple, type(None), ember.Tensor))
            and hasattr(value, "__dict__")
            and not isinstance(value, type)
        )
        if identity:
            entry = self._memo.get(id(value))
            if entry is not None and entry[0] is value:
                known = entry[1]
                if guard and source is not None and known.source != source:
                    # the same object through a second path: the capture relies on that staying so
                    from .source import SameObjectSource

                    if known.source is not None:
                        self.add_guard(SameObjectSource(known.source, source), GuardKind.EQUALS_MATCH, True)
                    else:
                        self.add_guard(source, GuardKind.ID_MATCH, value)
                return known
        var = wrap_value(self, value, source, guard)
        if identity and getattr(var, "source", source) == source:
            # (not a tracker of another object standing in for it: a compiled function's inlined _orig_fn)
            self._memo[id(value)] = (value, var)
        return var

    def tensor_input(self, real, source):
        """The tracker of a real tensor that the frame can reach: a placeholder (once per tensor)."""
        import ember

        from .variables.tensor import TensorVariable

        entry = self._inputs_by_id.get(id(real))
        if entry is not None and entry[0] is real:
            first = entry[1].source
            if source is not None and first is not None and source != first:
                from .source import SameObjectSource

                self.add_guard(SameObjectSource(first, source), GuardKind.EQUALS_MATCH, True)
            return entry[1]
        if source is None:
            raise Unsupported("a tensor with no run-time source (a tensor constant of the capture)")
        if real.layout != ember.strided:
            return self._sparse_input(real, source)
        dims = self._dynamic_dims_of(real, source)
        shape, stride = tuple(real.shape), tuple(real.stride())
        if dims:
            # a dynamic dim's size is any size >= 2; a stride that multiplies it is any stride
            shape = tuple(None if d in dims else n for d, n in enumerate(shape))
            stride = tuple(None if any(j > d for j in dims) else n for d, n in enumerate(stride))
        self.add_guard(source, GuardKind.TENSOR_MATCH, TensorSpec(
            real.dtype, real.device, shape, stride, real.requires_grad
        ))
        example = _to_meta(real)
        var = self._add_placeholder(real, source, example, TensorVariable(example, real.device, source, real=real))
        if dims:
            symbols = {d: self.shape_env.new_symbol(source, d, real.shape[d]) for d in sorted(dims)}
            var.symbols = symbols
            shadow_shape = [symbols[d].shadow if d in symbols else n for d, n in enumerate(real.shape)]
            var.shadow = ember.empty(shadow_shape, dtype=real.dtype, device="meta")
        return var

    def _sparse_input(self, real, source):
        """A sparse COO/CSR input: an opaque placeholder whose example is a meta sparse tensor
        (``ember.sparse._graph``). Its guard checks layout, shape, dtype, device and requires_grad, not
        the number of stored elements, which the graph never reads (only ``_sparse_mm`` takes it)."""
        from ember.sparse._graph import meta_like

        from .variables.tensor import TensorVariable

        if real.requires_grad:
            raise SkipFrame(f"a {real.layout} tensor that requires grad reaches the frame (sparse graph inputs "
                            "get no gradient)")
        self.add_guard(source, GuardKind.TENSOR_MATCH, TensorSpec(
            real.dtype, real.device, tuple(real.shape), None, False, layout=real.layout
        ))
        example = meta_like(real)
        return self._add_placeholder(real, source, example, TensorVariable(example, real.device, source, real=real))

    def _add_placeholder(self, real, source, example, var):
        """The placeholder of graph input ``real`` (read at ``source``), after the last one; ``var`` tracks it."""
        index = len(self.graph_inputs)
        anchor = self._last_placeholder
        insert = self.graph.inserting_after(anchor) if anchor is not None else self.graph.inserting_before(None)
        with insert:
            node = self.graph.placeholder(f"arg{index}_1")
        self._last_placeholder = node
        self.mode.track(example, node)
        self.graph_inputs.append(source)
        self.example_inputs.append(real)
        var.on_type_check = lambda: self.add_guard(source, GuardKind.TYPE_MATCH, type(real))
        self._inputs_by_id[id(real)] = (real, var)
        return var

    def wants_dynamic_int(self, value, source):
        """Whether the int ``value`` read at ``source`` becomes a symbolic graph input: with
        ``dynamic=True``, or after its value changed in an earlier call (automatic dynamic ints).
        0 and 1 (and negative ints) stay constants, as sizes do."""
        if self.dynamic is False or type(value) is not int or value < 2 or source is None:
            return False
        name = source.name()
        if (name, None) in self.static_dims:
            return False
        return self.dynamic is True or None in self.dynamic_dims.get(name, ())

    def int_input(self, value, source):
        """The tracker of a dynamic int: a graph input (a placeholder the runtime reads from
        ``source``) standing for a SymPy symbol, with ``value`` as its hint."""
        from .variables.symbolic import SymIntVariable

        entry = self._inputs_by_id.get(("int", source.name()))
        if entry is not None:
            return entry[1]
        self.add_guard(source, GuardKind.TYPE_MATCH, int)
        index = len(self.graph_inputs)
        anchor = self._last_placeholder
        insert = self.graph.inserting_after(anchor) if anchor is not None else self.graph.inserting_before(None)
        with insert:
            node = self.graph.placeholder(f"arg{index}_1")
        self._last_placeholder = node
        self.graph_inputs.append(source)
        self.example_inputs.append(value)
        symbol = self.shape_env.new_symbol(source, None, value)
        symbol.node = node
        var = SymIntVariable(self, symbol.symbol, value, symbol.shadow, node)
        self._inputs_by_id[("int", source.name())] = (value, var)
        return var

    def _dynamic_dims_of(self, real, source):
        """The dims of a graph input to make symbolic: never sizes 0 and 1 (they are specialised, as
        in PyTorch), nor dims of a tensor that is not contiguous (its strides would be guessed)."""
        if self.dynamic is False:
            return frozenset()
        static = {d for name, d in self.static_dims if name == source.name()}
        if self.dynamic is True:
            import ember

            if isinstance(real, ember.nn.Parameter):
                return frozenset()  # parameters keep static sizes, as in PyTorch
            wanted = range(real.dim())
        else:
            wanted = self.dynamic_dims.get(source.name(), ())
        wanted = {d % real.dim() for d in wanted} if real.dim() else set()
        dims = frozenset(d for d in wanted if real.shape[d] >= 2 and d not in static)
        if dims and not real.is_contiguous():
            return frozenset()
        return dims

    def size_of(self, tx, tensor_var, dim):
        """``tensor.size(dim)`` as a tracker: a constant, or a symbolic size (a graph node)."""
        from .variables.constant import ConstantVariable
        from .variables.symbolic import SymIntVariable

        dim = dim % tensor_var.example.dim() if tensor_var.example.dim() else dim
        hint = tensor_var.example.shape[dim]
        shadow = tensor_var.shadow.shape[dim] if tensor_var.shadow is not None else hint
        if not self.shape_env or hint == shadow:
            return ConstantVariable(hint)
        cache = tensor_var.size_vars
        if dim in cache:
            return cache[dim]
        entry = tensor_var.symbols.get(dim)
        expr = entry.symbol if entry is not None else self.shape_env.expr_for(hint, shadow)
        # an input's symbol is named after it: the printed graph reads ``s0 = arg0_1.size(0)``
        node = self.graph.create_node(
            "call_method", "size", (self.mode.node_of(tensor_var.example), dim),
            name=str(entry.symbol) if entry is not None else None,
        )
        var = SymIntVariable(self, expr, hint, shadow, node)
        cache[dim] = var
        return var

    def leaf_call(self, tx, fn, args, kwargs, device=None):
        """Call ``fn`` (an ember callable) on the examples of ``args``, recording its ops; ``device`` is
        where its results live at run time (by default its ``device=`` argument or first tensor's)."""
        import ember

        py_args = [a.as_python(tx) for a in args]
        py_kwargs = {k: v.as_python(tx) for k, v in kwargs.items()}
        device = device if device is not None else _device_of(args, kwargs)
        if isinstance(py_kwargs.get("device"), (str, ember.device)):
            # a factory's device=: made on meta while tracing (no real allocation, no GPU needed); the
            # recorded node gets the real device back (RecordingMode._to_arg)
            py_kwargs["device"] = ember.device("meta")
        self.mode.real_device = device
        dynamic = bool(self.shape_env)
        self.mode.log = [] if dynamic else None
        try:
            with self.mode, self.autocast_mode(device):
                result = fn(*py_args, **py_kwargs)
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001 - eager raises it too; run that part eagerly
            name = getattr(fn, "__name__", None) or getattr(fn, "name", None) or repr(fn)
            raise Unsupported(f"{name}() raised {type(e).__name__} while tracing: {e}") from e
        finally:
            recorded, self.mode.log = self.mode.log, None
        constant_args = all(a.is_constant() for a in args) and all(v.is_constant() for v in kwargs.values())
        if constant_args and dynamic and any(_holds_symbolic(a) for a in [*args, *kwargs.values()]):
            constant_args = "symbolic"  # a tensor made from it would be a constant of the graph
        var = self.wrap_result(result, device, constant_args)
        if dynamic:
            self._shadow_call(tx, fn, args, kwargs, recorded, var, device)
        return var

    def autocast_mode(self, device):
        """The mode that applies the traced autocast region to a call whose results live on ``device``
        (its casts become graph nodes), or a context that does nothing."""
        import contextlib

        from ember._autocast import TracingAutocastMode

        device_type = getattr(device, "type", None)
        dtype = self.autocast.get(device_type)
        return contextlib.nullcontext() if dtype is None else TracingAutocastMode(device_type, dtype)

    def set_autocast(self, device_type, dtype):
        """Enter (``dtype``) or leave (None) an autocast region of ``device_type`` in the trace."""
        if dtype is None:
            self.autocast.pop(device_type, None)
        else:
            self.autocast[device_type] = dtype

    def _shadow_call(self, tx, fn, args, kwargs, recorded, var, device=None):
        """Run ``fn`` again on the shadow examples: the shadow of each tensor result, and a check that
        no size was computed from a hint inside ember code (else :class:`SizeSpecialized`, naming the
        input dim to keep static when one is found)."""
        name = getattr(fn, "__name__", None) or getattr(fn, "name", None) or repr(fn)
        shadow, problem = self._run_shadow(tx, fn, args, kwargs, recorded, device)
        if problem is not None:
            raise SizeSpecialized(f"{name}() {problem}", self._culprit(tx, fn, args, kwargs, recorded, device))
        _attach_shadows(var, shadow, name)

    def _run_shadow(self, tx, fn, args, kwargs, recorded, device=None):
        """``(shadow result, None)``, or ``(None, what went wrong)``."""
        import ember

        self.shadowing = True
        try:
            py_args = [a.as_python(tx) for a in args]
            py_kwargs = {k: v.as_python(tx) for k, v in kwargs.items()}
        finally:
            self.shadowing = False
        if isinstance(py_kwargs.get("device"), (str, ember.device)):
            py_kwargs["device"] = ember.device("meta")
        shadow_mode = ShadowMode(recorded, self.sym_exprs, self.shape_env)
        try:
            with shadow_mode, self.autocast_mode(device):
                shadow = _metaize(fn(*py_args, **py_kwargs))
        except Exception as e:  # noqa: BLE001 - the call only works for the hint's sizes
            return None, f"fails on other sizes ({type(e).__name__}: {e})"
        if not _same_sizes(recorded, shadow_mode.log):
            return None, "computes a size from its inputs' sizes inside ember code"
        return shadow, None

    def _culprit(self, tx, fn, args, kwargs, recorded, device=None):
        """The input dim ``(source name, dim)`` whose symbol, made static, lets the call run on the
        shadows (``x @ w`` with x's last dim symbolic and w a parameter), or None."""
        import ember

        from .variables.tensor import TensorVariable

        tensors = [a for a in [*args, *kwargs.values()] if isinstance(a, TensorVariable)]
        tensors += [i for a in [*args, *kwargs.values()] for i in getattr(a, "items", None) or []
                    if isinstance(i, TensorVariable)]
        for t in tensors:
            if t.shadow is None:
                continue
            for d, (hint, shadow_size) in enumerate(zip(t.example.shape, t.shadow.shape)):
                entry = self.shape_env.symbols.get(self.shape_env.expr_for(hint, shadow_size))
                if hint == shadow_size or entry is None:
                    continue
                saved = t.shadow
                shape = list(saved.shape)
                shape[d] = hint
                t.shadow = ember.empty(shape, dtype=saved.dtype, device="meta")
                try:
                    _, problem = self._run_shadow(tx, fn, args, kwargs, recorded, device)
                finally:
                    t.shadow = saved
                if problem is None:
                    return (entry.source.name(), entry.dim)
        return None

    def wrap_result(self, result, device, constant_args=False):
        """Trackers for what a leaf call returned (tensors are meta examples the mode knows)."""
        import ember

        from .variables.constant import ConstantVariable, is_constant_value
        from .variables.containers import ListVariable, NamedTupleVariable, TupleVariable
        from .variables.tensor import TensorVariable

        if isinstance(result, ember.Tensor):
            if result.device.type != "meta":
                # made without an op from constants (``ember.tensor(2.0)``): a constant of the graph
                if constant_args == "symbolic":
                    raise SizeSpecialized("an ember call made a tensor from a symbolic size without an op")
                if not constant_args:
                    raise Unsupported("an ember call made a tensor from values that are not constants of the capture")
                node = self.mode.node_of(result)
                device = result.device
                result = _to_meta(result)
                self.mode.track(result, node)
            self.mode.node_of(result)  # raises if it is not a recorded value
            return TensorVariable(result, device)
        if isinstance(result, tuple) and hasattr(type(result), "_fields"):
            return NamedTupleVariable(type(result), [self.wrap_result(r, device, constant_args) for r in result])
        if type(result) in (tuple, list) and not is_constant_value(result):
            items = [self.wrap_result(r, device, constant_args) for r in result]
            return TupleVariable(items) if type(result) is tuple else ListVariable(items)
        if is_constant_value(result):
            return ConstantVariable(result)
        if isinstance(result, list):
            return ListVariable([self.wrap_result(r, device, constant_args) for r in result])
        if isinstance(result, (ember.nn.Module,)) or _holds_tensor(result):
            raise Unsupported(f"an ember call returned a {type(result).__name__} (not a tensor or constant)")
        return self.wrap(result, None, guard=False)  # a class, a function...

    # -- grad mode ------------------------------------------------------------------------------------

    def set_grad_enabled(self, mode):
        """A grad-mode change inside the frame: the graph sets it at run time where it happened."""
        import ember

        mode = bool(mode)
        if mode == self.grad_enabled:
            return
        self.grad_enabled = mode
        ember.set_grad_enabled(mode)
        self.graph.call_function(_set_grad_enabled, (mode,))

    def restore_grad_mode(self):
        """At the end of capture: the real grad mode back to the caller's (tracing changed it)."""
        import ember

        ember.set_grad_enabled(self.initial_grad_enabled)

    # -- outputs --------------------------------------------------------------------------------------

    def shared(self, var, make):
        """The one :class:`~ember._dynamo.reconstruct.Shared` rebuilding ``var`` (``make()`` builds it)."""
        from .reconstruct import Shared

        entry = self._shared.get(id(var))
        if entry is None or entry[0] is not var:
            entry = (var, Shared(None))
            self._shared[id(var)] = entry
            entry[1].inner = make()  # after registering: a cycle refers back to the same Shared
        return entry[1]

    def output_index(self, tensor_var):
        return self.output_node_index(self.mode.node_of(tensor_var.example))

    def output_node_index(self, node):
        index = self._output_index.get(node)
        if index is None:
            index = len(self.outputs)
            self.outputs.append(node)
            self._output_index[node] = index
        return index

    def finish(self, result_var, pending_effects=True):
        """Close the graph: returns ``(gm, result Reconstruct, side effects)``."""
        from ember.fx import GraphModule

        from .reconstruct import ReleaseShared

        result = result_var.reconstruct(self)
        effects = self.side_effects.finish(self) if pending_effects else []
        if self._shared:
            result = ReleaseShared(result, [entry[1] for entry in self._shared.values()])
        # grad mode is left as the frame left it: a graph that ends inside ``with no_grad():`` (a break)
        # leaves it off, one that exits a block its caller entered (a continuation) turns it back on
        self.graph.output(tuple(self.outputs))
        gm = GraphModule(self.root, self.graph)
        return gm, result, effects

    def ops_in_graph(self):
        from ember._ops._registry import Op

        return sum(1 for n in self.graph.nodes if n.op == "call_function" and isinstance(n.target, Op))

    def guard_list(self):
        guards = list(self.guards.values())
        for relation in self.shape_env.relation_guards():
            guards.append(Guard(None, GuardKind.SHAPE_EXPR, relation))
        return guards


def _holds_symbolic(var):
    """Whether a tracker is, or contains, a symbolic size."""
    from .variables.symbolic import SymIntVariable

    if isinstance(var, SymIntVariable):
        return True
    inner = getattr(var, "items", None) or getattr(var, "parts", None)
    if isinstance(inner, dict):
        inner = list(inner.values())
    return isinstance(inner, list) and any(_holds_symbolic(v) for v in inner)


def _attach_shadows(var, shadow, name):
    """Give each tensor tracker of a leaf call's result the matching shadow tensor."""
    import ember

    from .variables.tensor import TensorVariable

    if isinstance(var, TensorVariable):
        if not isinstance(shadow, ember.Tensor):
            raise SizeSpecialized(f"{name}() returns something else on other sizes")
        var.shadow = shadow
        return
    items = getattr(var, "items", None)
    if isinstance(items, list) and isinstance(shadow, (tuple, list)):
        if len(items) != len(shadow):
            raise SizeSpecialized(f"{name}() returns {len(items)} values here, {len(shadow)} on other sizes")
        for item, s in zip(items, shadow):
            _attach_shadows(item, s, name)
        return
    value = getattr(var, "value", None)
    if isinstance(value, (int, tuple)) and not isinstance(value, bool) and value != shadow:
        raise SizeSpecialized(f"{name}() returns {value!r} here, {shadow!r} on other sizes (a constant of the graph)")


def _holds_tensor(value):
    import ember

    state = getattr(value, "__dict__", None)
    return isinstance(state, dict) and any(isinstance(v, ember.Tensor) for v in state.values())


def _set_grad_enabled(mode):
    """Graph node target: set ember's grad mode (what ``with ember.no_grad():`` did at this point)."""
    import ember

    ember.set_grad_enabled(mode)


def _device_of(args, kwargs):
    """The real device of a leaf call's results: its ``device=`` argument, else its first tensor's."""
    import ember

    from .variables.tensor import TensorVariable

    if "device" in kwargs and kwargs["device"].is_constant() and kwargs["device"].as_constant() is not None:
        device = ember.device(kwargs["device"].as_constant())
        if device.type == "cuda" and device.index is None and ember.cuda.is_available():
            # ``device="cuda"``: eager factories put the tensor on the current device (cuda:0); the
            # graph's factory must name it too, or its result fails device checks against inputs
            device = ember.device("cuda", ember.cuda.current_device())
        return device
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, TensorVariable):
            return a.device
        items = getattr(a, "items", None)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, TensorVariable):
                    return item.device
    return ember.device("cpu")

