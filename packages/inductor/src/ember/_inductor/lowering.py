"""Registry op -> loop IR: THE lowering table, and the ops kept as extern calls.

:data:`lowerings` maps an :class:`~ember._ops._registry.Op` to a function
``lower(graph, node, **arguments)`` (``arguments`` bound to the op's signature, defaults applied)
that returns the node's value: a :class:`~ember._inductor.ir.Buffer`, a :class:`View` of one, or
a Python scalar. Entries are made by one-line helpers (:func:`register_unary`,
:func:`register_binary`, ...), so the table reads like a list.

:data:`fallbacks` maps the ops that are deliberately extern calls of the eager kernel to the
reason (BLAS, a library kernel, the eager random generator...). An op in neither table is also
an extern call (logged with "no lowering"); a lowering that meets a case it does not handle
(complex dtypes, an unusual argument) raises :class:`NotLowered` and the node becomes an extern
call too - never a wrong answer.

Dtype rules: a pointwise op reads its output dtype from ``node.meta["val"]``, converts its
operands to the compute dtype (the output dtype; for comparisons the operands' promoted dtype)
and computes there; float16/bfloat16 compute in float32 and round when stored (as PyTorch's
inductor does).
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import sympy

import ember
from ember._ops import registry as _ops

from . import ir
from .ir import Constant, IndexExpr, Load, Op

__all__ = ["lowerings", "fallbacks", "View", "NotLowered", "load", "sizes_of", "dtype_of",
           "register_unary", "register_binary", "register_pointwise"]

#: op -> lowering function (THE table).
lowerings: dict = {}

#: op -> why it runs as an extern call of the eager kernel.
fallbacks: dict = {}


class NotLowered(Exception):
    """A lowering cannot handle this particular call; the node becomes an extern call."""


_HALF = (ember.float16, ember.bfloat16)
SUPPORTED_DTYPES = frozenset({ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64,
                              ember.float16, ember.bfloat16, ember.float32, ember.float64})


def _register(name, fn):
    op = _ops[name]
    if op in lowerings:
        raise ValueError(f"lowering for {name} registered twice")
    lowerings[op] = fn
    return fn


def lowering(*names):
    """Decorator: register ``fn`` as the lowering of each op in ``names``."""

    def deco(fn):
        for n in names:
            _register(n, fn)
        return fn

    return deco


# --------------------------------------------------------------------------------------------
# values: buffers and views


class View:
    """A view of ``base`` (a Buffer or View): ``reindex(index) -> base index`` composes into loads."""

    def __init__(self, base, sizes, reindex):
        self.base = base
        self.sizes = [sympy.sympify(s) for s in sizes]
        self.reindex = reindex

    @property
    def dtype(self):
        """The element dtype: the viewed value's."""
        return self.base.dtype


def sizes_of(value):
    """The sizes (a list of SymPy expressions or ints) of a lowered tensor value (Buffer or View)."""
    return list(value.sizes)


def dtype_of(value):
    """The ember dtype of a lowered value: a Buffer, a View or an IR expression."""
    return value.dtype


def is_tensor_value(v):
    """Whether ``v`` is a lowered tensor (a :class:`~ember._inductor.ir.Buffer` or a :class:`View`), not a number."""
    return isinstance(v, (ir.Buffer, View))


def load(value, index):
    """The expression reading ``value`` (Buffer or View) at multi-dim ``index``."""
    while isinstance(value, View):
        index = value.reindex(list(index))
        value = value.base
    return Load(value, tuple(sympy.sympify(i) for i in index))


def _out_val(node):
    val = node.meta["val"]
    if not isinstance(val, ember.Tensor):
        raise NotLowered(f"{node.target.name} does not return one tensor")
    if val.dtype not in SUPPORTED_DTYPES:
        raise NotLowered(f"dtype {val.dtype} is not supported by the C++ backend")
    return val


def compute_dtype(dtype):
    """The dtype arithmetic runs in for values stored as ``dtype``."""
    return ember.float32 if dtype in _HALF else dtype


def cast(expr, dtype):
    """IR expression ``expr`` converted to ``dtype`` (a constant is converted now; no-op if it has it)."""
    if expr.dtype == dtype:
        return expr
    if isinstance(expr, Constant):
        return Constant(_py_value(expr.value, dtype), dtype)
    return Op("to_dtype", (expr,), dtype)


def _py_value(value, dtype):
    if dtype == ember.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    return int(value)


def op(name, *args, dtype=None):
    """An IR op node; its dtype defaults to the first argument's (for ``where``, the second's)."""
    if dtype is None:
        dtype = args[1].dtype if name == "where" else args[0].dtype
    return Op(name, tuple(args), dtype)


def _broadcast_index(value, index, out_sizes):
    """The index into ``value`` for output ``index`` (right-aligned broadcasting)."""
    sizes = sizes_of(value)
    lead = len(out_sizes) - len(sizes)
    return [sympy.Integer(0) if (s == 1 and out_sizes[lead + k] != 1) else index[lead + k]
            for k, s in enumerate(sizes)]


def operand(x, index, out_sizes, dtype):
    """``x`` (tensor value or Python scalar) read at ``index`` and converted to ``dtype``."""
    if is_tensor_value(x):
        if x.dtype not in SUPPORTED_DTYPES:
            raise NotLowered(f"dtype {x.dtype} is not supported by the C++ backend")
        return cast(load(x, _broadcast_index(x, index, out_sizes)), dtype)
    if isinstance(x, (bool, int, float)):
        if isinstance(x, float) and not dtype.is_floating_point and dtype != ember.bool:
            raise NotLowered("a float scalar in an integer computation")
        return Constant(_py_value(x, dtype), dtype)
    raise NotLowered(f"operand of type {type(x).__name__}")


def pointwise(g, node, fn, inputs, *, dtype=None):
    """A :class:`ComputedBuffer` of ``fn(*operands)`` over the node's output sizes.

    Args:
        fn: builds the body from the operands (IR expressions in the compute dtype).
        inputs: tensor values or Python scalars.
        dtype: the compute dtype (default: the output's, float32 for half outputs).
    """
    val = _out_val(node)
    sizes = [sympy.Integer(s) for s in val.shape]
    cdtype = dtype if dtype is not None else compute_dtype(val.dtype)
    cdtype = compute_dtype(cdtype)
    index = ir.index_vars(len(sizes))
    args = [operand(x, index, sizes, cdtype) for x in inputs]
    body = fn(*args)
    body = cast(body, compute_dtype(val.dtype))
    return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, body))


def _promoted(node, *inputs):
    """The common dtype of ``inputs`` under ember's promotion rules (metadata only)."""
    metas = [ember.empty((), dtype=x.dtype, device="meta") if is_tensor_value(x) and not sizes_of(x)
             else (ember.empty((1,), dtype=x.dtype, device="meta") if is_tensor_value(x) else x)
             for x in inputs]
    return ember.result_type(*metas) if len(metas) > 1 else metas[0].dtype


# --------------------------------------------------------------------------------------------
# pointwise ops


def register_pointwise(name, build, *, compare=False):
    """Register ``name`` as a pointwise op whose tensor/scalar operands are its leading arguments.

    ``build(*operands, **other_args)`` returns the body; ``compare=True`` computes in the
    operands' promoted dtype (the output is bool).
    """
    signature = _ops[name]._call_signature
    params = list(signature.parameters)

    def lower(g, node, *args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = bound.arguments
        inputs = [arguments[p] for p in params if p in _OPERAND_NAMES]
        extra = {k: v for k, v in arguments.items() if k not in _OPERAND_NAMES}
        dtype = _promoted(node, *inputs) if compare else None
        return pointwise(g, node, lambda *a: build(*a, **extra), inputs, dtype=dtype)

    return _register(name, lower)


_OPERAND_NAMES = frozenset({"input", "other", "self", "grad_output", "output", "end", "weight", "tensor1",
                            "tensor2", "condition", "exponent", "values"})


def register_unary(name, ir_name=None):
    """A unary op that maps to IR op ``ir_name`` (default: the same name)."""
    return register_pointwise(name, lambda x: op(ir_name or name, x))


def register_binary(name, ir_name=None, *, compare=False):
    """A binary op ``name(input, other)`` that maps to IR op ``ir_name``."""
    if compare:
        return register_pointwise(name, lambda a, b: op(ir_name or name, a, b, dtype=ember.bool),
                                  compare=True)
    return register_pointwise(name, lambda a, b: op(ir_name or name, a, b))


for _name in ("exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal sin cos tan asin acos atan sinh "
              "cosh tanh asinh acosh atanh erf erfc erfinv lgamma sigmoid floor ceil trunc neg abs sign "
              "bitwise_not").split():
    register_unary(_name)
del lowerings[_ops["erfinv"]]  # no C++ rule yet: the eager kernel (see fallbacks)
register_unary("negative", "neg")
register_unary("absolute", "abs")
register_unary("fix", "trunc")
for _name in "maximum minimum fmax fmin atan2 copysign hypot fmod remainder pow bitwise_and bitwise_or " \
             "bitwise_xor".split():
    register_binary(_name)
register_binary("bitwise_left_shift", "lshift")
register_binary("bitwise_right_shift", "rshift")
register_binary("floor_divide", "floordiv")
for _name in "eq ne lt le gt ge".split():
    register_binary(_name, compare=True)
register_binary("greater", "gt", compare=True)
register_binary("greater_equal", "ge", compare=True)
register_binary("less", "lt", compare=True)
register_binary("less_equal", "le", compare=True)
register_binary("not_equal", "ne", compare=True)
for _name in "logical_and logical_or logical_xor".split():
    register_pointwise(_name, (lambda n: lambda a, b: op(n, a, b, dtype=ember.bool))(_name), compare=True)
register_pointwise("logical_not", lambda a: op("logical_not", a, dtype=ember.bool), compare=True)
for _name in ("isnan", "isinf", "isfinite"):
    register_pointwise(_name, (lambda n: lambda a: op(n, a, dtype=ember.bool))(_name), compare=True)
register_pointwise("square", lambda x: op("mul", x, x))
register_pointwise("frac", lambda x: op("sub", x, op("trunc", x)))
register_pointwise("sigmoid_backward", lambda g, y: op("mul", g, op("mul", y, op("sub", _one(y), y))))
register_pointwise("tanh_backward", lambda g, y: op("mul", g, op("sub", _one(y), op("mul", y, y))))
register_pointwise("lerp", lambda a, b, w: op("add", a, op("mul", w, op("sub", b, a))))


def _one(like):
    return Constant(_py_value(1, like.dtype), like.dtype)


def _zero(like):
    return Constant(_py_value(0, like.dtype), like.dtype)


def _scaled(value, alpha):
    if alpha == 1:
        return value
    return op("mul", value, Constant(_py_value(alpha, value.dtype), value.dtype))


register_pointwise("add", lambda a, b, alpha=1: op("add", a, _scaled(b, alpha)))
register_pointwise("sub", lambda a, b, alpha=1: op("sub", a, _scaled(b, alpha)))
register_pointwise("subtract", lambda a, b, alpha=1: op("sub", a, _scaled(b, alpha)))
register_binary("mul")
register_binary("multiply", "mul")


def _div(a, b, rounding_mode=None):
    if rounding_mode is None:
        return op("truediv", a, b)
    if rounding_mode == "floor":
        return op("floordiv", a, b)
    if rounding_mode == "trunc":
        return op("trunc", op("truediv", a, b)) if a.dtype.is_floating_point else op("truediv", a, b)
    raise NotLowered(f"div rounding_mode={rounding_mode!r}")


register_pointwise("div", _div)
register_pointwise("divide", _div)


register_pointwise("deg2rad", lambda x: op("mul", x, Constant(math.pi / 180, x.dtype)))
register_pointwise("rad2deg", lambda x: op("mul", x, Constant(180 / math.pi, x.dtype)))
register_pointwise("heaviside", lambda x, v: op("where", op("eq", x, _zero(x), dtype=ember.bool), v,
                                                op("to_dtype", op("gt", x, _zero(x), dtype=ember.bool),
                                                   dtype=x.dtype)))
register_pointwise("xlogy", lambda x, y: op("where", op("isnan", y, dtype=ember.bool), y,
                                            op("where", op("eq", x, _zero(x), dtype=ember.bool), _zero(x),
                                               op("mul", x, op("log", y)))))


def _logaddexp(base2):
    def build(a, b):
        # max + log(1 + exp(-|a - b|)); equal infinities give that infinity (not inf - inf = nan)
        hi = op("maximum", a, b)
        lo = op("minimum", a, b)
        if base2:
            tail = op("truediv", op("log1p", op("exp2", op("sub", lo, hi))), Constant(math.log(2), a.dtype))
        else:
            tail = op("log1p", op("exp", op("sub", lo, hi)))
        same = op("eq", a, b, dtype=ember.bool)
        return op("where", op("logical_and", same, op("isinf", a, dtype=ember.bool), dtype=ember.bool), a,
                  op("add", hi, tail))

    return build


register_pointwise("logaddexp", _logaddexp(False))
register_pointwise("logaddexp2", _logaddexp(True))
register_pointwise("isposinf", lambda x: op("logical_and", op("isinf", x, dtype=ember.bool),
                                            op("gt", x, _zero(x), dtype=ember.bool), dtype=ember.bool),
                   compare=True)
register_pointwise("isneginf", lambda x: op("logical_and", op("isinf", x, dtype=ember.bool),
                                            op("lt", x, _zero(x), dtype=ember.bool), dtype=ember.bool),
                   compare=True)
register_pointwise("sgn", lambda x: op("sign", x))


@lowering("round")
def _round(g, node, input, decimals=0):
    if decimals != 0:
        raise NotLowered("round with decimals")
    return pointwise(g, node, lambda x: op("round", x), [input])


@lowering("addcmul")
def _addcmul(g, node, input, tensor1, tensor2, value=1):
    return pointwise(g, node, lambda a, b, c: op("add", a, _scaled(op("mul", b, c), value)),
                     [input, tensor1, tensor2])


@lowering("addcdiv")
def _addcdiv(g, node, input, tensor1, tensor2, value=1):
    return pointwise(g, node, lambda a, b, c: op("add", a, _scaled(op("truediv", b, c), value)),
                     [input, tensor1, tensor2])


@lowering("threshold_backward")
def _threshold_backward(g, node, grad_output, self, threshold):
    def body(grad, x, t):
        return op("where", op("le", x, t, dtype=ember.bool), _zero(grad), grad)

    return pointwise(g, node, body, [grad_output, self, threshold])


@lowering("relu")
def _relu(g, node, input, inplace=False):
    if inplace:
        raise NotLowered("inplace relu")
    return pointwise(g, node, lambda x: op("maximum", x, _zero(x)), [input])


@lowering("where")
def _where(g, node, condition, input, other):
    val = _out_val(node)
    sizes = [sympy.Integer(s) for s in val.shape]
    index = ir.index_vars(len(sizes))
    cd = compute_dtype(val.dtype)
    c = operand(condition, index, sizes, ember.bool)
    body = op("where", c, operand(input, index, sizes, cd), operand(other, index, sizes, cd))
    return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, body))


@lowering("clamp", "clip")
def _clamp(g, node, input, min=None, max=None):
    def body(x, *bounds):
        bounds = list(bounds)
        if min is not None:
            x = op("maximum", x, bounds.pop(0))
        if max is not None:
            x = op("minimum", x, bounds.pop(0))
        return x

    return pointwise(g, node, body, [input] + [b for b in (min, max) if b is not None])


@lowering("nan_to_num")
def _nan_to_num(g, node, input, nan=0.0, posinf=None, neginf=None):
    val = _out_val(node)
    if not val.dtype.is_floating_point:
        return pointwise(g, node, lambda x: x, [input])
    info = ember.finfo(val.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf

    def body(x):
        def c(v):
            return Constant(float(v), x.dtype)

        isinf_pos = op("logical_and", op("isinf", x, dtype=ember.bool), op("gt", x, c(0), dtype=ember.bool),
                       dtype=ember.bool)
        isinf_neg = op("logical_and", op("isinf", x, dtype=ember.bool), op("lt", x, c(0), dtype=ember.bool),
                       dtype=ember.bool)
        y = op("where", op("isnan", x, dtype=ember.bool), c(nan), x)
        y = op("where", isinf_pos, c(hi), y)
        return op("where", isinf_neg, c(lo), y)

    return pointwise(g, node, body, [input])


@lowering("_to_copy")
def _to_copy(g, node, input, dtype=None, layout=None, device=None, pin_memory=False, non_blocking=False,
             memory_format=None):
    if not on_graph_device(device):
        raise NotLowered("_to_copy to another device")
    val = _out_val(node)
    return pointwise(g, node, lambda x: x, [input], dtype=val.dtype)


@lowering("clone")
def _clone(g, node, input, memory_format=None):
    return pointwise(g, node, lambda x: x, [input])


# --------------------------------------------------------------------------------------------
# factories

#: The device the graph being lowered runs on. The loop IR itself has no devices: the C++ path lowers
#: cpu graphs and the Triton path cuda ones (from meta examples), so a ``device=`` argument of a factory
#: or of ``_to_copy`` is checked against this (set by :func:`graph_device` around a lowering).
_graph_device = contextvars.ContextVar("ember_inductor_graph_device", default=None)  # None: cpu


@contextlib.contextmanager
def graph_device(device):
    """Within the block, lowerings accept ``device=`` arguments naming ``device`` (e.g. ``cuda:0`` for a
    graph compiled to Triton) instead of only ``cpu``."""
    token = _graph_device.set(ember.device(device))
    try:
        yield
    finally:
        _graph_device.reset(token)


def on_graph_device(device):
    """Whether a ``device=`` argument (None: the default) names the graph's device; an index of None on
    either side means the current device of that type."""
    if device is None:
        return True
    wanted, graph = ember.device(device), _graph_device.get() or ember.device("cpu")
    return wanted.type == graph.type and (wanted.index is None or graph.index is None or wanted.index == graph.index)


def _check_device(device):
    """Refuse a factory whose ``device`` is not the graph's (see :func:`on_graph_device`)."""
    if not on_graph_device(device):
        raise NotLowered("a factory for another device")


def _constant_buffer(g, node, value):
    val = _out_val(node)
    sizes = [sympy.Integer(s) for s in val.shape]
    cd = compute_dtype(val.dtype)
    return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, Constant(_py_value(value, cd), cd)))


@lowering("full")
def _full(g, node, size, fill_value, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False):
    _check_device(device)
    if not isinstance(fill_value, (bool, int, float)):
        raise NotLowered("full with a non-number fill value")
    return _constant_buffer(g, node, fill_value)


def _factory(value):
    def lower(g, node, *size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
              memory_format=None, **_):
        _check_device(device)
        return _constant_buffer(g, node, value)

    return lower


_register("zeros", _factory(0))
_register("ones", _factory(1))
_register("empty", _factory(0))


def _like(value):
    def lower(g, node, input, fill_value=None, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
        _check_device(device)
        v = value if value is not None else fill_value
        if not isinstance(v, (bool, int, float)):
            raise NotLowered("a non-number fill value")
        return _constant_buffer(g, node, v)

    return lower


_register("zeros_like", _like(0))
_register("ones_like", _like(1))
_register("full_like", _like(None))


@lowering("scalar_tensor")
def _scalar_tensor(g, node, s, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    _check_device(device)
    if not isinstance(s, (bool, int, float)):
        raise NotLowered("scalar_tensor of a non-number")
    return _constant_buffer(g, node, s)


@lowering("arange")
def _arange(g, node, start, end=None, step=1, dtype=None, layout=None, device=None, requires_grad=False,
            pin_memory=False):
    _check_device(device)
    if end is None:
        start, end = 0, start
    val = _out_val(node)
    sizes = [sympy.Integer(s) for s in val.shape]
    cd = compute_dtype(val.dtype)
    i = ir.index_vars(1)[0]
    if cd.is_floating_point or any(isinstance(v, float) for v in (start, step)):
        # computed in float64 like the eager kernel, then converted
        body = op("add", Constant(float(start), ember.float64),
                  op("mul", IndexExpr(i, ember.float64), Constant(float(step), ember.float64)))
        body = cast(body, cd)
    else:
        body = IndexExpr(int(start) + int(step) * i, cd)
    return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, body))


# --------------------------------------------------------------------------------------------
# views: index arithmetic, no copy


def _dim(d, ndim):
    if ndim == 0 and d in (0, -1):
        return 0
    if not -ndim <= d < ndim:
        raise NotLowered(f"dim {d} out of range")
    return d % ndim


def _val_sizes(node):
    return [sympy.Integer(s) for s in _out_val(node).shape]


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        return list(shape[0])
    return list(shape)


def reshape_view(x, new_sizes):
    """A view of ``x`` (contiguous semantics) with ``new_sizes``: dims are grouped where the products
    match, so splitting a dim costs a multiply-add and merging dims a div/mod."""
    old = [int(s) for s in sizes_of(x)]
    new = [int(s) for s in new_sizes]
    if 0 in old or 0 in new:  # nothing is ever loaded from an empty tensor
        return View(x, new_sizes, lambda index: [sympy.Integer(0)] * len(old))
    old_nz = [k for k, s in enumerate(old) if s != 1]
    new_nz = [k for k, s in enumerate(new) if s != 1]
    groups = []  # (old dims, new dims)
    a = b = 0
    while a < len(old_nz) or b < len(new_nz):
        go, gn = [old_nz[a]], [new_nz[b]]
        po, pn = old[old_nz[a]], new[new_nz[b]]
        a += 1
        b += 1
        while po != pn:
            if po < pn:
                go.append(old_nz[a])
                po *= old[old_nz[a]]
                a += 1
            else:
                gn.append(new_nz[b])
                pn *= new[new_nz[b]]
                b += 1
        groups.append((go, gn))

    def reindex(index):
        out = [sympy.Integer(0)] * len(old)
        for go, gn in groups:
            linear = sympy.Integer(0)
            for k in gn:
                linear = linear * new[k] + index[k]
            stride = math.prod(old[k] for k in go)
            for pos, k in enumerate(go):
                stride //= old[k]
                v = ir.FloorDiv(linear, stride)
                if pos > 0:
                    v = ir.ModIndex(v, old[k])
                out[k] = v
        return out

    return View(x, new_sizes, reindex)


@lowering("view", "reshape")
def _view(g, node, input, *args, shape=None, **_):
    return reshape_view(input, _val_sizes(node))


for _name in ("flatten", "unflatten", "ravel", "view_as"):
    if _name in _ops:
        _register(_name, lambda g, node, input, *a, **k: reshape_view(input, _val_sizes(node)))


@lowering("flip")
def _flip(g, node, input, dims):
    sizes = sizes_of(input)
    n = len(sizes)
    flipped = {_dim(d, n) for d in (dims if isinstance(dims, (list, tuple)) else [dims])}
    return View(input, _val_sizes(node),
                lambda index: [sizes[k] - 1 - index[k] if k in flipped else index[k] for k in range(n)])


@lowering("eye")
def _eye(g, node, n, m=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    _check_device(device)
    val = _out_val(node)
    sizes = [sympy.Integer(s) for s in val.shape]
    cd = compute_dtype(val.dtype)
    i, j = ir.index_vars(2)
    body = op("where", op("eq", IndexExpr(i, ember.int64), IndexExpr(j, ember.int64), dtype=ember.bool),
              Constant(_py_value(1, cd), cd), Constant(_py_value(0, cd), cd))
    return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, body))


@lowering("detach")
def _identity_view(g, node, input):
    return input


@lowering("expand", "broadcast_to", "expand_as")
def _expand(g, node, input, *args, **kwargs):
    new = _val_sizes(node)
    return View(input, new, lambda index: _broadcast_index(input, index, new))


@lowering("permute")
def _permute(g, node, input, *dims):
    dims = [_dim(d, len(sizes_of(input))) for d in _shape_args(dims)]

    def reindex(index):
        out = [None] * len(dims)
        for k, d in enumerate(dims):
            out[d] = index[k]
        return out

    return View(input, _val_sizes(node), reindex)


@lowering("transpose", "swapaxes", "swapdims")
def _transpose(g, node, input, dim0, dim1):
    n = len(sizes_of(input))
    if n == 0:
        return input
    d0, d1 = _dim(dim0, n), _dim(dim1, n)

    def reindex(index):
        index = list(index)
        index[d0], index[d1] = index[d1], index[d0]
        return index

    return View(input, _val_sizes(node), reindex)


@lowering("t")
def _t(g, node, input):
    if len(sizes_of(input)) < 2:
        return input
    return View(input, _val_sizes(node), lambda index: [index[1], index[0]])


@lowering("unsqueeze")
def _unsqueeze(g, node, input, dim):
    d = _dim(dim, len(sizes_of(input)) + 1)
    return View(input, _val_sizes(node), lambda index: index[:d] + index[d + 1:])


@lowering("squeeze")
def _squeeze(g, node, input, dim=None):
    sizes = sizes_of(input)
    n = len(sizes)
    if dim is None:
        dims = [k for k, s in enumerate(sizes) if s == 1]
    else:
        dims = [_dim(d, n) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
        dims = [d for d in dims if n and sizes[d] == 1]

    def reindex(index):
        it = iter(index)
        return [sympy.Integer(0) if k in dims else next(it) for k in range(n)]

    return View(input, _val_sizes(node), reindex)


@lowering("slice")
def _slice(g, node, input, dim=0, start=None, end=None, step=1):
    n = len(sizes_of(input))
    d = _dim(dim, n)
    size = int(sizes_of(input)[d])
    start = 0 if start is None else start
    start = max(0, min(size, start + size if start < 0 else start))

    def reindex(index):
        index = list(index)
        index[d] = start + step * index[d]
        return index

    return View(input, _val_sizes(node), reindex)


@lowering("narrow")
def _narrow(g, node, input, dim, start, length):
    if not isinstance(start, int):
        raise NotLowered("narrow with a tensor start")
    n = len(sizes_of(input))
    d = _dim(dim, n)
    start = start % int(sizes_of(input)[d]) if start < 0 else start

    def reindex(index):
        index = list(index)
        index[d] = start + index[d]
        return index

    return View(input, _val_sizes(node), reindex)


@lowering("select")
def _select(g, node, input, dim, index):
    n = len(sizes_of(input))
    d = _dim(dim, n)
    i = index % int(sizes_of(input)[d]) if index < 0 else index
    return View(input, _val_sizes(node), lambda idx: idx[:d] + [sympy.Integer(i)] + idx[d:])


@lowering("diagonal")
def _diagonal(g, node, input, offset=0, dim1=0, dim2=1):
    n = len(sizes_of(input))
    d1, d2 = _dim(dim1, n), _dim(dim2, n)
    rest = [k for k in range(n) if k not in (d1, d2)]

    def reindex(index):
        out = [None] * n
        for k, pos in zip(rest, index[:-1]):
            out[k] = pos
        out[d1] = index[-1] + max(-offset, 0)
        out[d2] = index[-1] + max(offset, 0)
        return out

    return View(input, _val_sizes(node), reindex)


# --------------------------------------------------------------------------------------------
# joining and padding: pointwise with a select over ranges (loads are clamped in bounds, since
# both branches of a C++ select are evaluated)


@lowering("cat", "concat", "concatenate")
def _cat(g, node, tensors, dim=0):
    val = _out_val(node)
    sizes = [sympy.Integer(s) for s in val.shape]
    n = len(sizes)
    d = _dim(dim, n)
    parts = [t for t in tensors if not (len(sizes_of(t)) == 1 and sizes_of(t)[0] == 0)]
    cd = compute_dtype(val.dtype)
    index = ir.index_vars(n)
    body = None
    offset = 0
    pieces = []
    for t in parts:
        length = int(sizes_of(t)[d])
        if length == 0:
            continue
        local = list(index)
        local[d] = sympy.Max(sympy.Min(index[d] - offset, length - 1), 0)
        pieces.append((offset, length, cast(load(t, local), cd)))
        offset += length
    if not pieces:
        return _constant_buffer(g, node, 0)
    body = pieces[-1][2]
    for start, length, value in reversed(pieces[:-1]):
        inside = op("lt", IndexExpr(index[d], ember.int64), Constant(start + length, ember.int64),
                    dtype=ember.bool)
        body = op("where", inside, value, body)
    return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, cast(body, cd)))


@lowering("pad")
def _pad(g, node, input, pad, mode="constant", value=None):
    if mode != "constant":
        raise NotLowered(f"pad mode {mode!r}")
    val = _out_val(node)
    sizes = [sympy.Integer(s) for s in val.shape]
    n = len(sizes)
    in_sizes = [int(s) for s in sizes_of(input)]
    cd = compute_dtype(val.dtype)
    index = ir.index_vars(n)
    local = list(index)
    conds = []
    for k in range(len(pad) // 2):
        d = n - 1 - k
        lo = pad[2 * k]
        shifted = index[d] - lo
        local[d] = sympy.Max(sympy.Min(shifted, in_sizes[d] - 1), 0) if in_sizes[d] > 0 else sympy.Integer(0)
        pos = IndexExpr(shifted, ember.int64)
        conds.append(op("ge", pos, Constant(0, ember.int64), dtype=ember.bool))
        conds.append(op("lt", pos, Constant(in_sizes[d], ember.int64), dtype=ember.bool))
    fill = Constant(_py_value(0 if value is None else value, cd), cd)
    if any(s == 0 for s in in_sizes):
        body = fill
    else:
        inside = conds[0]
        for c in conds[1:]:
            inside = op("logical_and", inside, c, dtype=ember.bool)
        body = op("where", inside, cast(load(input, local), cd), fill) if conds else cast(load(input, local), cd)
    return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, body))


# --------------------------------------------------------------------------------------------
# reductions


def _reduce_dims(dim, ndim, empty_means_all=True):
    if ndim == 0:  # a 0-d tensor reduced over dim 0 or -1 is itself
        return []
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, (list, tuple)):
        if not dim and empty_means_all:
            return list(range(ndim))
        return sorted({_dim(d, ndim) for d in dim})
    return [_dim(dim, ndim)]


def reduction(g, node, x, dims, keepdim, rtype, *, acc_dtype=None, value_fn=None, out_dtype=None,
              out_sizes=None):
    """A :class:`ComputedBuffer` reducing ``x`` over ``dims`` with ``rtype``.

    ``value_fn(expr, in_index)`` may transform the loaded value (e.g. squared deviation);
    ``acc_dtype`` is the dtype the values are combined in.
    """
    in_sizes = sizes_of(x)
    n = len(in_sizes)
    if out_dtype is None:
        out_dtype = _out_val(node).dtype
    if out_sizes is None:
        out_sizes = [sympy.Integer(s) for s in (in_sizes[k] if k not in dims else 1
                                                for k in range(n) if keepdim or k not in dims)]
    ivars = ir.index_vars(len(out_sizes))
    rvars = ir.reduction_vars(len(dims))
    in_index = []
    kept = 0
    for k in range(n):
        if k in dims:
            in_index.append(rvars[dims.index(k)])
            if keepdim:
                kept += 1
        else:
            in_index.append(ivars[kept])
            kept += 1
    if acc_dtype is None:
        acc_dtype = compute_dtype(out_dtype)
    value = cast(load(x, in_index), acc_dtype)
    if value_fn is not None:
        value = value_fn(value, in_index)
    data = ir.Reduction(out_sizes, [in_sizes[k] for k in dims], rtype, value)
    return g.new_buffer(out_dtype, out_sizes, data)


def _register_reduction(name, rtype):
    def lower(g, node, input, dim=None, keepdim=False, dtype=None):
        if input.dtype not in SUPPORTED_DTYPES:
            raise NotLowered("unsupported dtype")
        dims = _reduce_dims(dim, len(sizes_of(input)))
        return reduction(g, node, input, dims, keepdim, rtype)

    _register(name, lower)


_register_reduction("sum", "sum")
_register_reduction("prod", "prod")


def _extreme(rtype):
    def lower(g, node, input, dim=(), keepdim=False):
        dims = _reduce_dims(dim, len(sizes_of(input)))
        return reduction(g, node, input, dims, keepdim, rtype)

    return lower


_register("amax", _extreme("max"))
_register("amin", _extreme("min"))


def _arg(rtype):
    def lower(g, node, input, dim=None, keepdim=False):
        n = len(sizes_of(input))
        if dim is None:
            x = reshape_view(input, [sympy.Integer(math.prod(int(s) for s in sizes_of(input)))])
            out_sizes = [sympy.Integer(s) for s in _out_val(node).shape]
            return reduction(g, node, x, [0], False, rtype, acc_dtype=compute_dtype(input.dtype),
                             out_sizes=out_sizes)
        return reduction(g, node, input, _reduce_dims(dim, n), keepdim, rtype, acc_dtype=compute_dtype(input.dtype))

    return lower


_register("argmax", _arg("argmax"))
_register("argmin", _arg("argmin"))


def _bool_reduction(rtype):
    def lower(g, node, input, dim=None, keepdim=False):
        dims = _reduce_dims(dim, len(sizes_of(input)))
        return reduction(g, node, input, dims, keepdim, rtype, acc_dtype=ember.bool)

    return lower


_register("any", _bool_reduction("any"))
_register("all", _bool_reduction("all"))


@lowering("mean")
def _mean(g, node, input, dim=None, keepdim=False, dtype=None):
    val = _out_val(node)
    if not val.dtype.is_floating_point:
        raise NotLowered("mean of a non-float dtype")
    dims = _reduce_dims(dim, len(sizes_of(input)))
    count = math.prod(int(sizes_of(input)[d]) for d in dims)
    total = reduction(g, node, input, dims, keepdim, "sum")
    return _scale(g, node, total, 1.0 / count if count else math.nan)


def _scale(g, node, buffer, factor):
    sizes = sizes_of(buffer)
    cd = compute_dtype(buffer.dtype)
    index = ir.index_vars(len(sizes))
    body = op("mul", cast(load(buffer, index), cd), Constant(float(factor), cd))
    return g.new_buffer(buffer.dtype, sizes, ir.Pointwise(sizes, body))


@lowering("var")
def _var(g, node, input, dim=None, unbiased=None, keepdim=False, correction=None):
    """Two reductions: the mean, then the sum of squared deviations from it (one fused kernel)."""
    val = _out_val(node)
    if not val.dtype.is_floating_point:
        raise NotLowered("var of a non-float dtype")
    if correction is None:
        correction = 0 if unbiased is False else 1
    n = len(sizes_of(input))
    dims = _reduce_dims(dim, n)
    count = math.prod(int(sizes_of(input)[d]) for d in dims)
    acc = compute_dtype(val.dtype)
    keep_sizes = [sympy.Integer(1) if k in dims else sizes_of(input)[k] for k in range(n)]
    total = reduction(g, node, input, dims, True, "sum", acc_dtype=acc, out_dtype=val.dtype)
    mean = _scale(g, node, total, 1.0 / count if count else math.nan)

    def deviation(value, in_index):
        m = cast(load(mean, [sympy.Integer(0) if k in dims else in_index[k] for k in range(n)]), acc)
        diff = op("sub", value, m)
        return op("mul", diff, diff)

    squares = reduction(g, node, input, dims, keepdim, "sum", acc_dtype=acc, value_fn=deviation)
    del keep_sizes
    divisor = max(count - correction, 0)
    return _scale(g, node, squares, 1.0 / divisor if divisor else math.inf)


# --------------------------------------------------------------------------------------------
# random ops computed in the kernel (``config.fallback_random`` off): see ember._inductor.inkernel_random


def _philox(g, node, name, sizes):
    """IR ``name`` (``philox_rand``/``philox_randn``, float32) of the random node ``node`` at the output
    index ``index_vars(len(sizes))``: the counter is the element's row-major position in ``sizes``.

    Raises:
        NotLowered: the node was not marked by :func:`~ember._inductor.inkernel_random.seed_graph`
            (``fallback_random`` on, an explicit generator): it stays an eager call, in program order.
    """
    from .inkernel_random import META

    marked = node.meta.get(META)
    if marked is None:
        raise NotLowered("eager generator, program order (fallback_random, or an explicit generator)")
    seed_node, ordinal = marked
    index = ir.index_vars(len(sizes))
    offset = ir.flat_index(index, ir.contiguous_strides(sizes))
    return Op(name, (load(g.env[seed_node], ()), IndexExpr(offset, ember.int64), Constant(ordinal, ember.int64)),
              ember.float32)


def _float32_at_least(p):
    """The smallest float32 ``>= p`` (a float32 uniform ``u`` has 24 bits, so ``u < p`` exactly when ``u`` is
    below it)."""
    import numpy as np

    f = np.float32(p)
    if float(f) < p:
        f = np.nextafter(f, np.float32(np.inf))
    return float(f)


@lowering("bernoulli")
def _bernoulli(g, node, input, p=None, *, generator=None):
    val = _out_val(node)
    if generator is not None:
        raise NotLowered("an explicit generator (eager)")
    if p is None:
        p = input  # the probabilities are the input's values
    sizes = [sympy.Integer(s) for s in val.shape]
    u = _philox(g, node, "philox_rand", sizes)
    if is_tensor_value(p):
        if not p.dtype.is_floating_point or p.dtype not in SUPPORTED_DTYPES:
            raise NotLowered(f"bernoulli with probabilities of dtype {p.dtype}")
        cd = compute_dtype(p.dtype)  # float64 probabilities: the uniform converts exactly
        keep = op("lt", cast(u, cd), operand(p, ir.index_vars(len(sizes)), sizes, cd), dtype=ember.bool)
    elif isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 1:
        keep = op("lt", u, Constant(_float32_at_least(p), ember.float32), dtype=ember.bool)
    else:
        raise NotLowered(f"bernoulli with p={p!r} (eager checks it)")
    return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, cast(keep, compute_dtype(val.dtype))))


def _random_factory(name):
    """The lowering of ``rand``/``randn`` (``name``: the IR op) and their ``_like`` forms: float32 numbers,
    rounded when the output is a half type; float64 outputs stay eager (they need 53 random bits)."""

    def lower(g, node, *args, generator=None, dtype=None, layout=None, device=None, **_):
        val = _out_val(node)
        _check_device(device)
        if generator is not None:
            raise NotLowered("an explicit generator (eager)")
        if val.dtype not in (ember.float32, *_HALF):
            raise NotLowered(f"random numbers of dtype {val.dtype} (eager)")
        sizes = [sympy.Integer(s) for s in val.shape]
        return g.new_buffer(val.dtype, sizes, ir.Pointwise(sizes, _philox(g, node, name, sizes)))

    return lower


_register("rand", _random_factory("philox_rand"))
_register("rand_like", _random_factory("philox_rand"))
_register("randn", _random_factory("philox_randn"))
_register("randn_like", _random_factory("philox_randn"))


# --------------------------------------------------------------------------------------------
# extern fallbacks: ops kept as calls of the eager kernel, with the reason


def _fallback(names, reason):
    for name in names:
        if name in _ops:
            fallbacks[_ops[name]] = reason


_fallback(["matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "addr", "mv", "dot", "vdot",
           "linear", "bilinear", "einsum", "tensordot", "inner", "outer", "ger", "kron", "chain_matmul",
           "linalg_multi_dot"], "BLAS (a tuned matrix-multiply library)")
_fallback(["convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"], "ember._C conv kernel")
_fallback(["sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "quantile",
           "nanquantile", "unique", "unique_consecutive"], "sorting kernel")
_fallback(["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"], "scan kernel (sequential)")
_fallback(["gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index", "index_put",
           "index_add", "index_copy", "index_fill", "take", "take_along_dim", "embedding", "embedding_bag",
           "masked_select", "nonzero", "argwhere", "put"], "data-dependent indexing (eager kernel)")
_fallback(["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "interpolate",
           "grid_sample"], "windowed kernel (eager)")
_fallback(["_linalg_lstsq", "_linalg_lu", "_linalg_solve_lu", "_lu_unpack", "orgqr", "cholesky_inverse",
           "cholesky_solve", "linalg_solve"], "LAPACK (a factorization library)")
_fallback(["ctc_loss"], "sequence loss with a dynamic-programming kernel (eager)")
_fallback(["_stft_frames", "_stft_frames_backward", "fold", "im2col", "unfold"], "windowed kernel (eager)")
_fallback(["adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d", "lp_pool1d",
           "lp_pool2d", "lp_pool3d", "affine_grid"], "windowed kernel (eager)")
_fallback(["as_strided", "empty_strided"], "arbitrary strides and storage offsets (eager)")
_fallback(["complex", "polar", "view_as_complex", "view_as_real", "angle", "conj_physical", "isreal"],
          "complex dtypes are not in the C++ backend")
_fallback(["bincount", "histc", "histogram", "searchsorted", "masked_scatter"],
          "data-dependent indexing (eager kernel)")
_fallback(["allclose", "equal", "isclose"], "returns a Python value or a whole-tensor comparison (eager)")
_fallback(["diag", "diag_embed", "diagflat", "block_diag", "tril_indices", "triu_indices", "linspace", "logspace"],
          "shape-building op (eager kernel)")
_fallback(["float_power"], "float64 computation with complex cases (eager)")
_fallback(["digamma", "polygamma", "i0", "logit", "sinc", "_standard_gamma_grad", "erfinv"],
          "special function (eager kernel)")
_fallback(["scaled_dot_product_attention"], "BLAS (a tuned matrix-multiply library)")
_fallback(["_sparse_mm"], "sparse @ dense: the eager sparse kernel takes the opaque sparse input (never loops)")
for _op in _ops.values():
    if _op.name.startswith("special_"):
        fallbacks.setdefault(_op, "special function (eager kernel)")
    elif _op.name.startswith("linalg_") or _op.name in ("det", "inverse", "cholesky", "qr", "svd", "slogdet",
                                                       "logdet", "lu", "triangular_solve", "pinverse"):
        fallbacks.setdefault(_op, "LAPACK (a factorization library)")
    elif _op.name.startswith("fft_") or _op.name.startswith("_fft"):
        fallbacks.setdefault(_op, "FFT library (pocketfft)")
    elif "random" in _op.tags:  # bernoulli, rand, randn are lowered (in-kernel) unless fallback_random
        fallbacks.setdefault(_op, "eager generator, program order")
for _op in list(fallbacks):
    if _op in lowerings:
        del fallbacks[_op]
