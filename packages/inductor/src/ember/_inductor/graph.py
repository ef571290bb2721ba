"""FX graph -> loop IR: input buffers, computed buffers, extern calls and the outputs.

:class:`GraphLowering` walks a GraphModule of registry ops (placeholders and nodes carrying
``node.meta["val"]``; missing values are filled by running the graph once on the example inputs),
applies :data:`ember._inductor.lowering.lowerings` to each call, and falls back to an extern call
of the eager op wherever there is no lowering (logged with the reason).
"""

from __future__ import annotations

import logging
import math
import operator

import sympy

import ember

from . import ir
from .exc import LoweringException
from .lowering import SUPPORTED_DTYPES, NotLowered, View, fallbacks, is_tensor_value, load, lowerings, reshape_view

__all__ = ["GraphLowering"]

log = logging.getLogger("ember._inductor")


def _to_meta(value):
    if isinstance(value, ember.Tensor) and value.device.type != "meta":
        if value.layout is not ember.strided:  # a sparse input: layout, shape and dtype, no strides
            from ember.sparse._graph import meta_like

            return meta_like(value)
        return ember.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta")
    if isinstance(value, (tuple, list)):
        return tuple(_to_meta(v) for v in value)  # namedtuples (sort's) become plain tuples
    return value


def ensure_meta_vals(gm, example_inputs):
    """Give every node a ``meta["val"]`` (run the graph once on ``example_inputs`` if some lack one)."""
    nodes = [n for n in gm.graph.nodes if n.op not in ("output",)]
    if all("val" in n.meta for n in nodes):
        return
    from ember.fx import Interpreter

    class Recorder(Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            if n.op != "output" and "val" not in n.meta:
                n.meta["val"] = _to_meta(result)
            return result

    with ember.no_grad():
        Recorder(gm).run(*example_inputs)


class GraphLowering:
    """The loop IR of one FX graph.

    Args:
        gm (ember.fx.GraphModule): a functional graph of registry ops.
        example_inputs (sequence of Tensor): one value per placeholder (their strides become the
            input buffers' strides).

    Attributes (after :meth:`run`):
        inputs (list[InputBuffer | None]): one per placeholder (None for non-tensor inputs).
        scalar_inputs (list[tuple[int, object]]): position and value of each non-tensor input
            (compiled in as constants).
        constants (list[InputBuffer]): tensor constants (``get_attr`` nodes).
        buffers (list[ComputedBuffer | ExternKernel]): in program order.
        outputs (list): the graph's outputs: buffers, or Python values.

    Example:
        >>> import ember
        >>> from ember.fx.experimental.proxy_tensor import make_fx
        >>> gm = make_fx(lambda x: ember.exp(x) + 1)(ember.ones(2, 3))
        >>> print(GraphLowering(gm, [ember.ones(2, 3)]).run())  # doctest: +NORMALIZE_WHITESPACE
        arg0_1: float32[2, 3] = input 0
        buf0: float32[2, 3] = pointwise(i0, i1: exp(load(arg0_1, 3*i0 + i1)))
        buf1: float32[2, 3] = pointwise(i0, i1: add(load(buf0, 3*i0 + i1), constant(1.0, float32)))
        return (buf1,)
    """

    def __init__(self, gm, example_inputs):
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.inputs = []
        self.constants = []
        self.buffers = []
        self.outputs = []
        self.output_is_sequence = True
        self.scalar_inputs = []  # (position, value) of non-tensor inputs
        self.opaque_inputs = []  # ir.OpaqueInput of sparse inputs (only extern calls take them)
        self.env = {}
        self._count = 0

    # naming and creation -----------------------------------------------------------------

    def _name(self, prefix="buf"):
        name = f"{prefix}{self._count}"
        self._count += 1
        return name

    def new_buffer(self, dtype, sizes, data):
        """Append a :class:`~ember._inductor.ir.ComputedBuffer` filled by ``data``."""
        buf = ir.ComputedBuffer(self._name(), dtype, sizes, data)
        self.buffers.append(buf)
        return buf

    def realize(self, value):
        """``value`` as a buffer: a view becomes a contiguous copy."""
        if isinstance(value, ir.Buffer):
            return value
        if isinstance(value, View):
            sizes = list(value.sizes)
            index = ir.index_vars(len(sizes))
            return self.new_buffer(value.dtype, sizes, ir.Pointwise(sizes, load(value, index)))
        raise LoweringException(f"cannot realize a value of type {type(value).__name__}")

    # the walk ----------------------------------------------------------------------------

    def run(self):
        """Lower every node; returns ``self``."""
        ensure_meta_vals(self.gm, self.example_inputs)
        placeholders = 0
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.env[node] = self._placeholder(node, placeholders)
                placeholders += 1
            elif node.op == "get_attr":
                self.env[node] = self._constant(node)
            elif node.op == "call_function":
                self.env[node] = self._call(node)
            elif node.op == "output":
                self.output_is_sequence = isinstance(node.args[0], (list, tuple))
                self.outputs = [self._output(self.env[v], v.meta.get("val")) if isinstance(v, ember.fx.Node)
                                else self._output(v) for v in _flatten_output(node.args[0])]
            else:
                raise LoweringException(f"node {node.name}: unsupported node kind {node.op!r}")
        self._remove_dead_buffers()
        return self

    def _remove_dead_buffers(self):
        """Drop computed buffers nothing reads (an ``empty`` an extern call now gets fresh, say).

        The graph is functional, so an unread computed buffer has no effect; extern calls are kept
        (a random op advances the generator even when its result is unused)."""
        live = set()

        def mark(value):
            if isinstance(value, ir.StridedArg):
                live.add(value.buffer.name)
            elif isinstance(value, ir.Buffer):
                live.add(value.name)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    mark(v)
            elif isinstance(value, dict):
                for v in value.values():
                    mark(v)

        mark(self.outputs)
        kept = []
        for buf in reversed(self.buffers):
            if isinstance(buf, ir.ExternKernel):
                mark(buf.args)
                mark(buf.kwargs)
            elif buf.name in live:
                for ld in ir.loads(buf.data.body):
                    live.add(ld.buffer.name)
            else:
                log.debug("buffer %s is never read: removed", buf.name)
                continue
            kept.append(buf)
        self.buffers = kept[::-1]

    def _placeholder(self, node, position):
        example = self.example_inputs[position] if position < len(self.example_inputs) else None
        if not isinstance(example, ember.Tensor):
            # a non-tensor input (a Python number) is compiled in as a constant: the wrapper checks
            # each call passes the same value
            self.inputs.append(None)
            self.scalar_inputs.append((position, example))
            return example
        if example.device.type not in ("cpu", "meta"):
            raise LoweringException(f"input {node.name}: tensors on {example.device} are not supported")
        if example.layout is not ember.strided:  # sparse: no memory to index, extern calls take it whole
            opaque = ir.OpaqueInput(node.name, example.dtype, list(example.shape), example.layout, position)
            self.inputs.append(None)
            self.opaque_inputs.append(opaque)
            return opaque
        # other dtypes (complex) are allowed: only extern calls read them (see _call)
        buf = ir.InputBuffer(node.name, example.dtype, [sympy.Integer(s) for s in example.shape],
                             [sympy.Integer(s) for s in example.stride()], position=position)
        self.inputs.append(buf)
        return buf

    def _constant(self, node):
        value = self.gm
        for part in node.target.split("."):
            value = getattr(value, part)
        if not isinstance(value, ember.Tensor):
            return value
        buf = ir.InputBuffer(node.name, value.dtype, [sympy.Integer(s) for s in value.shape],
                             [sympy.Integer(s) for s in value.stride()], constant=value)
        self.constants.append(buf)
        return buf

    def _args(self, node):
        def value(a):
            if isinstance(a, ember.fx.Node):
                return self.env[a]
            if isinstance(a, (list, tuple)):
                return type(a)(value(x) for x in a)
            return a

        return value(node.args), {k: value(v) for k, v in node.kwargs.items()}

    def _call(self, node):
        target = node.target
        args, kwargs = self._args(node)
        if target is operator.getitem:
            return args[0][args[1]]
        if not hasattr(target, "kernels") or not hasattr(target, "kind"):
            raise LoweringException(f"node {node.name}: target {target!r} is not a registry op")
        if target.kind == "inplace":
            raise LoweringException(f"node {node.name}: in-place op {target.name} in a graph that must be functional")
        fn = lowerings.get(target)
        reason = fallbacks.get(target, "no lowering")
        unsupported = _unsupported_dtype(node, args, kwargs)
        if unsupported is not None:
            fn, reason = None, f"dtype {unsupported} is not supported by the C++ backend"
        if fn is not None:
            try:
                bound = target._call_signature.bind(*args, **kwargs)
                bound.apply_defaults()
                return fn(self, node, *bound.args, **bound.kwargs)
            except NotLowered as e:
                reason = f"lowering declined: {e}"
        log.debug("extern %s (%s): %s", node.name, target.name, reason)
        return self._extern(node, target, args, kwargs, reason)

    def _extern(self, node, target, args, kwargs, reason):
        if _stack_times_matrix(target, args, kwargs, node):
            return self._matmul_rows(node, target, args, reason)
        strided_ok = target.name in STRIDED_EXTERNS

        def arg(a):
            if strided_ok and isinstance(a, View):
                strided = strided_arg(a)
                if strided is not None:
                    return strided
            if is_tensor_value(a):
                return self.realize(a)
            if isinstance(a, (list, tuple)):
                return type(a)(arg(x) for x in a)
            return a

        fx_args = node.args if len(node.args) == len(args) else [None] * len(args)
        lowered_args = [ir.EmptyArg(a.sizes, a.dtype) if _from_empty(n, a) else arg(a) for n, a in zip(fx_args, args)]
        kernel = ir.ExternKernel(self._name("extern"), target, tuple(lowered_args),
                                 {k: arg(v) for k, v in kwargs.items()}, reason)
        self.buffers.append(kernel)

        def outputs(val, path):
            if isinstance(val, ember.Tensor):
                out = ir.ExternOutput(self._name(), val.dtype, [sympy.Integer(s) for s in val.shape], kernel, path)
                strides = dense_strides(val)
                if strides is not None:  # eager's layout (empty_strided's, LAPACK's column-major): kept
                    out.strides = [sympy.Integer(s) for s in strides]
                kernel.outputs.append(out)
                return out
            if isinstance(val, (tuple, list)):
                return tuple(outputs(v, path + (k,)) for k, v in enumerate(val))
            if val is None:
                return None
            raise LoweringException(f"node {node.name}: {target.name} returns a {type(val).__name__}")

        return outputs(node.meta["val"], ())

    def _matmul_rows(self, node, target, args, reason):
        """``(..., n, k) @ (k, m)`` as one ``(N, k) @ (k, m)`` product viewed back as ``(..., n, m)``.

        The eager matmul runs a stack as one BLAS call per matrix (the encoder's sequence-first
        projection: 128 calls of 16 rows, each too small for the BLAS's threads); one call over all the
        rows is what eager ``linear`` does. A stack that is not one strided matrix is copied first.
        """
        input, other = args
        lead = [int(s) for s in input.sizes[:-1]]
        k, m = int(input.sizes[-1]), int(other.sizes[-1])
        rows = reshape_view(input, [math.prod(lead), k])
        kernel = ir.ExternKernel(self._name("extern"), target, (self._extern_arg(rows), self._extern_arg(other)), {},
                                 reason)
        self.buffers.append(kernel)
        out = ir.ExternOutput(self._name(), node.meta["val"].dtype, [sympy.Integer(math.prod(lead)), sympy.Integer(m)],
                              kernel, ())
        kernel.outputs.append(out)
        return reshape_view(out, [*lead, m])

    def _extern_arg(self, value):
        """A tensor argument of a BLAS extern call: a strided view of a buffer where one will do, else a buffer."""
        if isinstance(value, View):
            strided = strided_arg(value)
            if strided is not None:
                return strided
        return self.realize(value)

    def _output(self, value, val=None):
        """A graph output: a buffer (laid out as eager's result ``val`` when that is a dense permutation:
        ``rot90``'s transposed view, a pointwise op on a transposed input), a reshaped extern result,
        or a value."""
        if isinstance(value, View):
            reshaped = _reshaped_extern_output(value)
            if reshaped is not None:
                return reshaped
        strides = dense_strides(val) if isinstance(val, ember.Tensor) and is_tensor_value(value) else None
        if strides is not None and (isinstance(value, View) or isinstance(value, ir.ComputedBuffer) and
                                    isinstance(value.data, ir.Pointwise)):
            # a copy in eager's layout (the scheduler fuses a pointwise producer into it); the buffer
            # itself keeps its layout: extern arguments were already described by its strides
            sizes = list(value.sizes)
            index = ir.index_vars(len(sizes))
            buf = self.new_buffer(value.dtype, sizes, ir.Pointwise(sizes, load(value, index)))
            buf.strides = [sympy.Integer(s) for s in strides]
            return buf
        if is_tensor_value(value):
            return self.realize(value)
        return value

    # printing ----------------------------------------------------------------------------

    def __str__(self):
        lines = [str(b) for b in self.inputs if b is not None]
        lines += [str(b) for b in self.constants]
        for b in self.buffers:
            lines.append(str(b))
            if isinstance(b, ir.ExternKernel):
                lines.extend("  " + str(o) for o in b.outputs)
        outs = ", ".join(o.name if isinstance(o, ir.Buffer) else repr(o) for o in self.outputs)
        lines.append(f"return ({outs},)" if len(self.outputs) == 1 else f"return ({outs})")
        return "\n".join(lines)


def _from_empty(fx_arg, value):
    """Whether an extern's argument is the result of ``empty`` (its contents are unspecified: a fresh
    uninitialised tensor is as good, and no kernel needs to fill it)."""
    target = getattr(fx_arg, "target", None)
    return getattr(target, "name", None) in ("empty", "empty_like") and isinstance(value, ir.ComputedBuffer)


#: Extern ops that take a strided view of a buffer (:class:`~ember._inductor.ir.StridedArg`) as it is:
#: the BLAS reads transposed operands, so a view is not copied into a contiguous buffer first.
STRIDED_EXTERNS = frozenset({"matmul", "mm", "bmm"})


def _stack_times_matrix(target, args, kwargs, node):
    """Whether the extern call is a float ``matmul`` of a stack of matrices (3+ dims) by one matrix."""
    if target.name != "matmul" or kwargs or len(args) != 2 or not all(is_tensor_value(a) for a in args):
        return False
    input, other = args
    val = node.meta.get("val")
    return (len(input.sizes) > 2 and len(other.sizes) == 2 and isinstance(val, ember.Tensor)
            and all(isinstance(s, sympy.Integer) for s in (*input.sizes, *other.sizes)))


def _reshaped_extern_output(view):
    """An output that is an extern call's whole result under a new shape (a matmul folded by
    :meth:`GraphLowering._matmul_rows`): a :class:`~ember._inductor.ir.StridedArg` the wrapper returns
    as a view of the extern's (fresh, contiguous) tensor instead of a copy; None for other views."""
    strided = strided_arg(view)
    if strided is None or not isinstance(strided.buffer, ir.ExternOutput) or strided.offset != 0:
        return None
    if strided.strides != ir.contiguous_strides(strided.sizes) or \
            math.prod(int(s) for s in strided.sizes) != strided.buffer.numel:
        return None
    if strided.buffer.strides != ir.contiguous_strides(strided.buffer.sizes):
        return None  # a result kept in eager's layout (column-major, say): ``view`` would not reorder it
    return strided


def strided_arg(view):
    """``view`` as a :class:`~ember._inductor.ir.StridedArg` of the buffer it reads, or None.

    Only views whose element offset is affine in the index (transpose, permute, select, unit-step
    slice, expand, reshapes that keep strides) qualify; a reshape that needs index division does not.
    """
    sizes = list(view.sizes)
    if not all(isinstance(s, sympy.Integer) and s > 0 for s in sizes):
        return None
    index = ir.index_vars(len(sizes))
    ld = load(view, index)
    flat = ir.flat_index(ld.index, ld.buffer.strides)
    zero = {v: 0 for v in index}
    offset = flat.subs(zero)
    strides = [flat.subs({**zero, v: 1}) - offset for v in index]
    if not all(isinstance(x, sympy.Integer) and x >= 0 for x in (offset, *strides)):
        return None
    if sympy.expand(flat - offset - sum(s * v for s, v in zip(strides, index))) != 0:
        return None  # not affine (FloorDiv/ModIndex): the view needs a copy
    return ir.StridedArg(ld.buffer, sizes, strides, offset)


def _unsupported_dtype(node, args, kwargs):
    """A dtype among the node's tensors that kernels cannot handle (complex), or None."""
    found = []

    def walk(v):
        if isinstance(v, (ember.Tensor, ir.Buffer, View)):
            if v.dtype not in SUPPORTED_DTYPES:
                found.append(v.dtype)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(node.meta.get("val"))
    walk(args)
    walk(kwargs)
    return found[0] if found else None


def dense_strides(val):
    """``val``'s strides when they lay it out densely but not contiguously (a permutation of the dims,
    no gaps or overlaps, no storage offset), else None (contiguous, or a layout buffers cannot have)."""
    sizes, strides = list(val.shape), list(val.stride())
    if val.numel() == 0 or val.storage_offset() != 0 or strides == list(ir.contiguous_strides(sizes)):
        return None
    expected = 1
    for d in sorted((d for d in range(len(sizes)) if sizes[d] != 1), key=lambda d: strides[d]):
        if strides[d] != expected:
            return None
        expected *= sizes[d]
    return strides if all(s >= 0 for s in strides) else None


def _flatten_output(out):
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out]
