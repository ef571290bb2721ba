"""Triton source for scheduled kernels (the GPU half of the code generator).

Each :class:`~ember._inductor.scheduler.FusedKernel` becomes one ``@triton.jit`` function (two for a
split reduction), with the fusion the scheduler chose for C++ (:mod:`.cpp`): the same nodes, in the
same order, one comment per node. Three shapes of kernel:

* **pointwise** - a 1-D grid over the flattened output: ``xindex`` of ``XBLOCK`` lanes per program,
  ``xmask = xindex < xnumel`` for the tail, the loop symbols ``x0..`` recovered with ``//`` and ``%``
  by the sizes;
* **reduction** - 2-D tiles ``[XBLOCK, RBLOCK]``: output rows along the first axis, the reduced
  (or an inner loop's) flattened extent along the second. *Persistent* when every row extent fits one
  block (``RBLOCK >= rnumel``: the whole row is loaded once and reduced with ``tl.reduce``), *looped*
  otherwise (``for roffset in range(0, rnumel, RBLOCK)`` with a per-lane accumulator, reduced at the
  end). Softmax's normalisation, an inner loop over ``y0..`` per row, is another such row segment;
* **split reduction** - few long rows (a full ``x.sum()``): kernel ``<name>_split`` reduces
  :data:`SPLIT` chunks of each row into a partial buffer, then ``<name>`` combines the partials and
  runs the rest of the kernel (its epilogue).

Kernels take the sizes they use as ``ks0, ks1, ...`` arguments (not baked constants), so dynamic
shapes are a change of guards. Values: float16/bfloat16 are loaded, widened to float32, computed in
float32 and rounded on store; bool is Triton's ``int1`` (stored as one byte). Every op of
:data:`ember._inductor.ir.OPS` and every reduction type has a rule in :data:`OP_RULES` /
:func:`reduction_combine`; ops with ember semantics beyond one Triton op call helpers of
:mod:`ember._inductor.runtime.triton_helpers` (``th.``), libdevice functions go through ``th.libdevice``.

This module needs no Triton: it only writes text (tests check it without Triton installed).
"""

from __future__ import annotations

import dataclasses
import math

import sympy

import ember

from .. import ir
from ..scheduler import SchedulerNode

__all__ = ["generate", "TritonKernelSource", "GraphSource", "OP_RULES", "SPLIT", "PERSISTENT_LIMIT",
           "SPLIT_MIN_ELEMENTS", "SPLIT_MAX_ROWS", "texpr", "triton_type"]

#: Chunks of each row a split reduction reduces in parallel (its partial buffer has SPLIT per row).
SPLIT = 64
#: The longest row extent a persistent reduction takes in one block (longer rows loop).
PERSISTENT_LIMIT = 1024
#: A kernel with at most SPLIT_MAX_ROWS rows of at least SPLIT_MIN_ELEMENTS elements is split.
SPLIT_MIN_ELEMENTS = 32768
SPLIT_MAX_ROWS = 8

_HALF = (ember.float16, ember.bfloat16)
_TL = {
    ember.float32: "tl.float32", ember.float64: "tl.float64", ember.float16: "tl.float16",
    ember.bfloat16: "tl.bfloat16", ember.int64: "tl.int64", ember.int32: "tl.int32", ember.int16: "tl.int16",
    ember.int8: "tl.int8", ember.uint8: "tl.uint8", ember.bool: "tl.int1",
}


def triton_type(dtype):
    """The Triton type a buffer of ember ``dtype`` holds (``tl.float16`` ...)."""
    try:
        return _TL[dtype]
    except KeyError:
        raise NotImplementedError(f"Triton codegen: no Triton type for {dtype}") from None


def compute_type(dtype):
    """The Triton type values of ``dtype`` are computed in (half types compute as float32)."""
    return "tl.float32" if dtype in _HALF else triton_type(dtype)


# --------------------------------------------------------------------------------------------
# index expressions


def texpr(expr, names=None):
    """Triton (Python) arithmetic for integer SymPy index ``expr``; ``names`` maps size expressions to
    argument names (``ks0``...). ``//`` and ``%`` are exact here: index expressions are non-negative."""
    names = names or {}
    expr = sympy.sympify(expr)
    if expr in names:
        return names[expr]
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return expr.name
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(texpr(a, names) for a in expr.args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + " * ".join(texpr(a, names) for a in expr.args) + ")"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:  # a dynamic size squared
        return "(" + " * ".join([texpr(expr.base, names)] * int(expr.exp)) + ")"
    if isinstance(expr, ir.FloorDiv):
        return f"({texpr(expr.args[0], names)} // {texpr(expr.args[1], names)})"
    if isinstance(expr, ir.ModIndex):
        return f"({texpr(expr.args[0], names)} % {texpr(expr.args[1], names)})"
    if isinstance(expr, (sympy.Max, sympy.Min)):
        fn = "tl.maximum" if isinstance(expr, sympy.Max) else "tl.minimum"
        out = texpr(expr.args[0], names)
        for a in expr.args[1:]:
            out = f"{fn}({out}, {texpr(a, names)})"
        return out
    raise NotImplementedError(f"Triton codegen: index expression {expr!r}")


# --------------------------------------------------------------------------------------------
# op rules: one entry per name of ir.OPS; each gets the op, its argument codes (already in the
# argument compute type) and returns Triton code of the result (converted to the op's type after)


def _infix(sym):
    return lambda e, a: f"({a[0]} {sym} {a[1]})"


def _ld(fn):
    return lambda e, a: f"th.libdevice.{fn}({', '.join(a)})"


def _tl(fn):
    return lambda e, a: f"tl.{fn}({', '.join(a)})"


def _is_float(e):
    return (e.args[0].dtype if e.args else e.dtype).is_floating_point


def _bool_or(fn_bool, fn_other):
    return lambda e, a: fn_bool(e, a) if e.dtype == ember.bool else fn_other(e, a)


def _float_or(fn_float, fn_int):
    return lambda e, a: fn_float(e, a) if _is_float(e) else fn_int(e, a)


def _int_identity(fn):
    """A rounding op: integers are already whole."""
    return _float_or(fn, lambda e, a: a[0])


OP_RULES = {
    "add": _bool_or(_infix("|"), _infix("+")),
    "sub": _bool_or(_infix("^"), _infix("-")),
    "mul": _bool_or(_infix("&"), _infix("*")),
    "truediv": _float_or(_infix("/"), lambda e, a: f"th.int_truncdiv({a[0]}, {a[1]})"),
    "floordiv": _float_or(lambda e, a: f"th.float_floordiv({a[0]}, {a[1]})",
                          lambda e, a: f"th.int_floordiv({a[0]}, {a[1]})"),
    "mod": _float_or(lambda e, a: f"th.float_remainder({a[0]}, {a[1]})",
                     lambda e, a: f"th.int_remainder({a[0]}, {a[1]})"),
    "remainder": _float_or(lambda e, a: f"th.float_remainder({a[0]}, {a[1]})",
                           lambda e, a: f"th.int_remainder({a[0]}, {a[1]})"),
    "fmod": _float_or(_ld("fmod"), lambda e, a: f"th.int_fmod({a[0]}, {a[1]})"),
    "neg": _bool_or(lambda e, a: a[0], lambda e, a: f"(-{a[0]})"),
    "abs": _tl("abs"),
    "exp": _tl("exp"),
    "exp2": _tl("exp2"),
    "expm1": _ld("expm1"),
    "log": _tl("log"),
    "log2": _tl("log2"),
    "log10": _ld("log10"),
    "log1p": _ld("log1p"),
    "sqrt": _tl("sqrt"),
    "rsqrt": lambda e, a: f"(1.0 / tl.sqrt({a[0]}))",
    "reciprocal": lambda e, a: f"(1.0 / {a[0]})",
    "sin": _tl("sin"),
    "cos": _tl("cos"),
    "tan": _ld("tan"),
    "asin": _ld("asin"),
    "acos": _ld("acos"),
    "atan": _ld("atan"),
    "sinh": _ld("sinh"),
    "cosh": _ld("cosh"),
    "tanh": _ld("tanh"),
    "asinh": _ld("asinh"),
    "acosh": _ld("acosh"),
    "atanh": _ld("atanh"),
    "erf": _tl("erf"),
    "erfc": _ld("erfc"),
    "erfinv": _ld("erfinv"),
    "lgamma": _ld("lgamma"),
    "floor": _int_identity(_tl("floor")),
    "ceil": _int_identity(_tl("ceil")),
    "trunc": _int_identity(_ld("trunc")),
    "round": _int_identity(lambda e, a: f"th.round_half_even({a[0]})"),
    "sign": lambda e, a: f"th.sign({a[0]})",
    "pow": _float_or(_ld("pow"), lambda e, a: f"th.int_pow({a[0]}, {a[1]})"),
    "maximum": _float_or(lambda e, a: f"th.maximum({a[0]}, {a[1]})", _tl("maximum")),
    "minimum": _float_or(lambda e, a: f"th.minimum({a[0]}, {a[1]})", _tl("minimum")),
    "fmax": _float_or(lambda e, a: f"th.fmax({a[0]}, {a[1]})", _tl("maximum")),
    "fmin": _float_or(lambda e, a: f"th.fmin({a[0]}, {a[1]})", _tl("minimum")),
    "eq": _infix("=="),
    "ne": _infix("!="),
    "lt": _infix("<"),
    "le": _infix("<="),
    "gt": _infix(">"),
    "ge": _infix(">="),
    "logical_and": lambda e, a: f"(({a[0]} != 0) & ({a[1]} != 0))",
    "logical_or": lambda e, a: f"(({a[0]} != 0) | ({a[1]} != 0))",
    "logical_xor": lambda e, a: f"(({a[0]} != 0) ^ ({a[1]} != 0))",
    "logical_not": lambda e, a: f"({a[0]} == 0)",
    "bitwise_and": _infix("&"),
    "bitwise_or": _infix("|"),
    "bitwise_xor": _infix("^"),
    "bitwise_not": lambda e, a: f"({a[0]} == 0)" if e.args[0].dtype == ember.bool else f"(~{a[0]})",
    "lshift": _infix("<<"),
    "rshift": _infix(">>"),
    "where": lambda e, a: f"tl.where({a[0]}, {a[1]}, {a[2]})",
    "to_dtype": lambda e, a: a[0],  # the conversion is done by the printer (see convert)
    "isnan": _float_or(lambda e, a: f"({a[0]} != {a[0]})", lambda e, a: f"({a[0]} != {a[0]})"),
    "isinf": _float_or(lambda e, a: f"(tl.abs({a[0]}) == float('inf'))", lambda e, a: f"({a[0]} != {a[0]})"),
    "isfinite": _float_or(lambda e, a: f"(tl.abs({a[0]}) < float('inf'))", lambda e, a: f"({a[0]} == {a[0]})"),
    "atan2": _ld("atan2"),
    "copysign": _ld("copysign"),
    "hypot": _ld("hypot"),
    "sigmoid": lambda e, a: f"(1.0 / (1.0 + tl.exp(-{a[0]})))",
    # random numbers computed in the kernel: the same Philox words as the C++ kernels' (int64 arguments)
    "philox_rand": lambda e, a: f"th_random.philox_rand({a[0]}, {a[1]}, {a[2]})",
    "philox_randn": lambda e, a: f"th_random.philox_randn({a[0]}, {a[1]}, {a[2]})",
}

_COMPARE = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
#: Integer forms of these divide: a zero divisor sets the kernel's error flag (eager raises).
_INT_DIVISIONS = frozenset({"truediv", "floordiv", "mod", "remainder", "fmod"})
_BOOL_ARGS = frozenset({"logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite"})
# ops whose Triton form needs a float argument even when the op's type is an integer (math functions on
# integers compute in float and convert, as eager promotes them)
_FLOAT_MATH = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
                         "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
                         "erfc", "erfinv", "lgamma", "sigmoid", "atan2", "copysign", "hypot", "reciprocal"})


def _arg_type(e):
    """The compute type an op's operands are converted to before its rule applies."""
    if e.name == "where":
        return None  # the condition stays bool; the branches take the op's type
    if e.name == "to_dtype" or e.name in ir.RANDOM_OPS:  # random ops: int64 seed, offset and ordinal as they are
        return None
    if e.name in _COMPARE or e.name in _BOOL_ARGS or e.name in ("isnan",):
        return compute_type(e.args[0].dtype)
    if e.name in ("bitwise_not",):
        return compute_type(e.args[0].dtype)
    if e.name in _FLOAT_MATH and not e.dtype.is_floating_point:
        return "tl.float32"
    return compute_type(e.dtype)


def convert(code, src, dst):
    """Triton code converting a value computed as ember ``src`` to one of ``dst`` (half types round here)."""
    if src == dst:
        return code
    if dst == ember.bool:
        return f"({code} != 0)"
    if dst in _HALF:
        return f"{code}.to({triton_type(dst)}).to(tl.float32)"
    if compute_type(src) == compute_type(dst):
        return code
    if src.is_floating_point and not dst.is_floating_point:
        # as eager (numpy on x86) and the C++ path: truncation in range; NaN or out of range gives the
        # "integer indefinite" INT_MIN of the 64- or 32-bit conversion, narrower types keep the low bits
        # of the 32-bit result (a GPU's own conversion saturates instead)
        wide = "tl.int64" if dst == ember.int64 else "tl.int32"
        bound = "9223372036854775808.0" if dst == ember.int64 else "2147483648.0"
        ok = f"({code} >= -{bound}) & ({code} < {bound})"
        whole = f"tl.where({ok}, {code}, -{bound}).to({wide})"
        return whole if wide == compute_type(dst) else f"{whole}.to({compute_type(dst)})"
    return f"{code}.to({compute_type(dst)})"


def constant(value, dtype, shape):
    """A Triton tensor of ``shape`` (a code string like ``[1, 1]``) holding Python number ``value``."""
    if dtype == ember.bool:
        return f"tl.full({shape}, {1 if value else 0}, tl.int1)"
    if dtype.is_floating_point:
        v = float(value)
        text = f"float('{v}')" if math.isnan(v) or math.isinf(v) else repr(v)
    else:
        text = str(int(value))
    return f"tl.full({shape}, {text}, {compute_type(dtype)})"


# --------------------------------------------------------------------------------------------
# reductions


def reduction_identity(rtype, dtype):
    """The value masked-out lanes hold for ``rtype`` over ``dtype`` (the combine's identity)."""
    if rtype in ("sum", "any"):
        return "0"
    if rtype in ("prod", "all"):
        return "1"
    big = rtype in ("min", "argmin")
    if dtype.is_floating_point:
        return "float('inf')" if big else "float('-inf')"
    if dtype == ember.bool:
        return "1" if big else "0"
    info = {ember.int64: 2**63 - 1, ember.int32: 2**31 - 1, ember.int16: 2**15 - 1, ember.int8: 127, ember.uint8: 255}
    lo = {ember.uint8: 0}.get(dtype, -info[dtype] - 1)
    return str(info[dtype]) if big else str(lo)


def reduction_combine(rtype, dtype):
    """The ``th.combine_*`` function (of :mod:`~ember._inductor.runtime.triton_helpers`) for ``rtype``."""
    if dtype == ember.bool:
        rtype = {"sum": "any", "prod": "all"}.get(rtype, rtype)
    name = {"sum": "sum", "prod": "prod", "max": "max", "min": "min", "any": "max", "all": "min",
            "argmax": "argmax", "argmin": "argmin"}[rtype]
    return f"th.combine_{name}"


def _reduce_type(rtype, dtype):
    """The type a reduction accumulates in (bool reductions run on int8: Triton reduces no int1)."""
    return "tl.int8" if dtype == ember.bool else compute_type(dtype)


# --------------------------------------------------------------------------------------------
# kernels


@dataclasses.dataclass
class TritonKernelSource:
    """One generated ``@triton.jit`` function and what launching it needs.

    Attributes:
        name (str): the function's name.
        kind (str): ``"pointwise"``, ``"persistent"``, ``"looped"`` or ``"split"`` (the first of a split pair).
        buffers (list[str]): buffer names passed as pointer arguments, in order.
        sizes (list): SymPy size expressions passed as ``ks0..`` integer arguments, in order.
        xnumel (sympy.Expr): the outputs (rows) the grid covers.
        rnumel (sympy.Expr or None): the longest row extent (reductions), None for pointwise.
        source (str): the text.
        scratch (tuple or None): ``(name, elements, ember dtype)`` of a partial buffer (split reductions).
        error_flag (bool): the kernel divides integers: its last pointer argument is ``ember_err_ptr``, an
            int32 flag it sets to 1 where a divisor is 0 (the wrapper then raises, as eager does).
    """

    name: str
    kind: str
    buffers: list
    sizes: list
    xnumel: object
    rnumel: object
    source: str
    scratch: object = None
    error_flag: bool = False


class _Printer:
    """Emits one statement per IR expression (CSE over structurally equal subexpressions)."""

    def __init__(self, gen, lines, indent, shape, memo=None, hoist=None):
        self.gen = gen
        self.lines = lines
        self.indent = indent
        self.shape = shape  # "[1]" in pointwise kernels, "[1, 1]" in reduction kernels
        self.memo = dict(memo or {})
        self.hoist = hoist  # inside a row loop: the printer of the lines before the loop (see _Loop)

    def emit(self, e):
        """Statements computing ``e``; returns the name holding its value (in ``compute_type(e.dtype)``)."""
        key = ir.structural_key(e)
        if key in self.memo:
            return self.memo[key]
        if self.hoist is not None and self.gen.row_free(e):  # the same in every iteration: once, before the loop
            self.memo[key] = self.hoist.emit(e)
            return self.memo[key]
        if isinstance(e, ir.Constant) and _sized_value(e.value):  # a value over the dynamic sizes: an argument
            arg = self.gen.size(e.value) if not isinstance(e.value, sympy.Basic) else self.gen.index_code(e.value)
            code = f"(tl.zeros({self.shape}, {compute_type(e.dtype)}) + {arg})"
        elif isinstance(e, ir.Constant):
            code = constant(e.value, e.dtype, self.shape)
        elif isinstance(e, ir.IndexExpr):
            expr = sympy.sympify(e.expr)
            if expr.free_symbols:
                index = self.gen.index_code(expr)
                code = f"({index}).to({compute_type(e.dtype)})" if e.dtype != ember.bool else f"(({index}) != 0)"
            else:
                code = constant(int(expr), e.dtype, self.shape)
        elif isinstance(e, ir.Load):
            if e.buffer.name in self.gen.values:  # computed earlier in this kernel: its variable
                self.memo[key] = self.gen.values[e.buffer.name]
                return self.memo[key]
            code = self.gen.load_code(e, self)
        else:
            code = self._op(e)
        name = self.gen.tmp()
        self.lines.append(f"{self.indent}{name} = {code}")
        self.memo[key] = name
        return name

    def _op(self, e):
        rule = OP_RULES.get(e.name)
        if rule is None:
            raise NotImplementedError(f"Triton codegen has no rule for op {e.name!r}")
        target = _arg_type(e)
        args = []
        for k, a in enumerate(e.args):
            code = self.emit(a)
            if e.name == "where" and k > 0:
                code = convert(code, a.dtype, e.dtype)
            elif e.name == "where":
                code = convert(code, a.dtype, ember.bool)
            elif target is not None and compute_type(a.dtype) != target:
                code = f"{code}.to({target})" if a.dtype != ember.bool or target != "tl.int1" else code
            args.append(code)
        if e.name in _INT_DIVISIONS and not _is_float(e):
            self.gen.flag_zero_division(args[1], self)
        code = rule(e, args)
        if e.name == "to_dtype":
            return convert(code, e.args[0].dtype, e.dtype)
        if e.name in _FLOAT_MATH and not e.dtype.is_floating_point:
            return f"{code}.to({compute_type(e.dtype)})"
        if e.dtype in _HALF and e.name not in _COMPARE:
            return code  # computed in float32; rounded where stored (or by an explicit to_dtype)
        if e.dtype == ember.bool or e.name in _COMPARE:
            return code
        return f"({code}).to({compute_type(e.dtype)})" if e.name in ("sign", "abs", "neg") and \
            e.dtype in (ember.int8, ember.int16, ember.uint8) else code


class _Loop:
    """A row loop's printers: ``body`` emits the loop's statements, and sends every expression that does
    not depend on the row (a row's statistic, its scale, a load at the row's first element) to the
    printer of the statements before the loop, so it is computed once per row instead of once per
    iteration (a layer_norm's ``rsqrt(var + eps)`` in float64 in every iteration of its normalising
    loop cost more than the loop's loads and stores). :meth:`close` puts those statements before the
    ``for`` line.

    Args:
        gen (_KernelGen): the kernel being generated.
        lines (list[str]): the kernel's lines; the ``for`` line is the next one appended.
        outer (_Printer): the printer of the statements before the loop (its memo gains the hoisted values).
        indent (str): the loop body's indent.
        row_buffers (set[str]): buffers the loop computes (their values differ along the row).
    """

    def __init__(self, gen, lines, outer, indent, row_buffers=frozenset()):
        self.lines = lines
        self.anchor = len(lines)
        self.before = []
        hoisted = _Printer(gen, self.before, outer.indent, outer.shape)
        hoisted.memo = outer.memo  # shared: values hoisted here are known after the loop too
        self.body = _Printer(gen, lines, indent, "[1, 1]", outer.memo, hoist=hoisted)
        gen.row_buffers = set(row_buffers)

    def close(self, gen):
        """Insert the hoisted statements before the loop."""
        self.lines[self.anchor:self.anchor] = self.before
        gen.row_buffers = set()


class _KernelGen:
    """Triton source for one :class:`~ember._inductor.scheduler.FusedKernel`."""

    def __init__(self, kernel, persistent_limit=PERSISTENT_LIMIT):
        self.kernel = kernel
        self.persistent_limit = persistent_limit
        self._tmp = 0
        self.sizes = {}  # SymPy size -> argument name (ks0...)
        self.buffers = {}  # buffer name -> pointer argument name
        self.values = {}  # buffer name computed here -> the variable holding its value (same element)
        self.row_symbols = set()  # the symbols along the second (row) axis while a row segment is emitted
        self.row_buffers = set()  # buffers computed inside the row loop being emitted (see _Loop)
        self.reduction = any(n.is_reduction for n in kernel.nodes)
        self.error_flag = False  # an integer division: ember_err_ptr is an argument

    # names -------------------------------------------------------------------------------------

    def tmp(self):
        """A fresh temporary name."""
        self._tmp += 1
        return f"tmp{self._tmp}"

    def size(self, expr):
        """The argument name of size ``expr`` (added to the kernel's size arguments on first use); a
        :class:`~ember._inductor.dynamic.SizeFloat` (``1/n`` of a dynamic mean) is a float argument."""
        if not isinstance(expr, sympy.Basic) and hasattr(expr, "expr"):
            if expr not in self.sizes:
                self.sizes[expr] = f"ks{len(self.sizes)}"
            return self.sizes[expr]
        expr = sympy.sympify(expr)
        if expr.is_Integer and int(expr) == 1:
            return "1"
        if expr not in self.sizes:
            self.sizes[expr] = f"ks{len(self.sizes)}"
        return self.sizes[expr]

    def pointer(self, buf):
        """The pointer argument of ``buf``."""
        if buf.name not in self.buffers:
            self.buffers[buf.name] = f"{buf.name}_ptr"
        return self.buffers[buf.name]

    def index_code(self, expr):
        """Triton code of index ``expr`` (sizes appearing whole become their arguments)."""
        expr = sympy.sympify(expr)
        for symbol in sorted(expr.free_symbols & ir.size_symbols(), key=str):  # a dynamic size inside
            self.size(symbol)
        return texpr(expr, {s: n for s, n in self.sizes.items() if isinstance(s, sympy.Basic) and not s.is_Integer})

    def _mask(self, symbols):
        """The mask of an access depending on ``symbols``."""
        names = {s.name[0] for s in symbols}
        parts = ["xmask"]
        if names & {"r", "y"} and self.row_symbols & set(symbols):
            parts.append("rmask")
        return " & ".join(parts)

    def row_free(self, e):
        """Whether ``e`` has one value per row (no row symbol in its indices, no value computed along the row)."""
        if isinstance(e, ir.Load):
            if e.buffer.name in self.values:
                return e.buffer.name not in self.row_buffers
            return not ir.free_symbols(e) & self.row_symbols
        if isinstance(e, ir.IndexExpr):
            return not ir.free_symbols(e) & self.row_symbols
        if isinstance(e, ir.Op) and e.name in _INT_DIVISIONS and not _is_float(e):
            return False  # its zero-divisor flag is stored under the row's mask, defined inside the loop
        return all(self.row_free(a) for a in e.children())

    def flag_zero_division(self, divisor, printer):
        """Emit the store of 1 to the error flag in the lanes (in bounds) whose ``divisor`` is 0."""
        self.error_flag = True
        mask = "xmask & rmask" if self.row_symbols else "xmask"
        bad = self.tmp()
        printer.lines.append(f"{printer.indent}{bad} = ({mask}) & ({divisor} == 0)  # eager raises: flag it")
        printer.lines.append(f"{printer.indent}tl.store(ember_err_ptr + 0 * {bad}.to(tl.int32), "
                             f"{bad}.to(tl.int32), {bad})")

    # memory ------------------------------------------------------------------------------------

    def load_code(self, e, printer):
        """A load of ``e`` (a buffer computed earlier in this kernel is read from its variable)."""
        buf = e.buffer
        if buf.name in self.values:
            return self.values[buf.name]
        flat = ir.flat_index(e.index, buf.strides)
        if not flat.free_symbols:  # one element for every lane (in bounds: no mask): a tensor of the printer's shape
            code = f"tl.broadcast_to(tl.load({self.pointer(buf)} + {self.index_code(flat)}), {printer.shape})"
        else:
            mask = self._mask(flat.free_symbols)
            code = f"tl.load({self.pointer(buf)} + ({self.index_code(flat)}), {mask}, other=0)"
        if buf.dtype in _HALF:
            code += ".to(tl.float32)"
        return code

    def store(self, node, value, lines, indent):
        """Store ``value`` (a variable of the node body's compute type) to ``node``'s buffer, or keep it."""
        buf = node.buffer
        if buf.dtype in _HALF or node.body.dtype != buf.dtype:
            value_b = convert(value, node.body.dtype, buf.dtype)
            if value_b != value:
                name = self.tmp()
                lines.append(f"{indent}{name} = {value_b}")
                value = name
        self.values[buf.name] = value
        if node.local:
            return
        flat = ir.flat_index(node.index, buf.strides)
        mask = self._mask(flat.free_symbols | {sympy.Symbol("x")})
        stored = value if buf.dtype not in _HALF else f"{value}.to({triton_type(buf.dtype)})"
        index = self.index_code(flat)
        if not flat.free_symbols:  # one output: a block of pointers all equal to it, masked to the first lane
            index = f"{index} + 0 * xindex"
        lines.append(f"{indent}tl.store({self.pointer(buf)} + ({index}), {stored}, {mask})")

    # x axis ------------------------------------------------------------------------------------

    def _x_decompose(self, lines, column):
        """Lines computing ``x0..`` from ``xindex`` (innermost fastest)."""
        k = self.kernel
        ranges = [sympy.sympify(r) for r in k.ranges]
        numel = " * ".join(self.size(r) for r in ranges) or "1"
        lines.append(f"    xnumel = {numel}")
        arange = "tl.arange(0, XBLOCK)[:, None]" if column else "tl.arange(0, XBLOCK)"
        lines.append(f"    xindex = tl.program_id(0) * XBLOCK + {arange}")
        lines.append("    xmask = xindex < xnumel")
        self._decompose(lines, "    ", "xindex", k.vars, ranges)

    def _decompose(self, lines, indent, flat, symbols, ranges):
        stride = None
        for v, r in reversed(list(zip(symbols, ranges))):
            base = flat if stride is None else f"({flat} // ({stride}))" if "*" in stride else f"({flat} // {stride})"
            if v == symbols[0]:
                lines.append(f"{indent}{v.name} = {base}")
            else:
                lines.append(f"{indent}{v.name} = {base} % {self.size(r)}")
            stride = self.size(r) if stride is None else f"{stride} * {self.size(r)}"

    # kernels -----------------------------------------------------------------------------------

    def _comment(self, node, lines, indent):
        text = str(node).replace("\n", " ")
        lines.append(f"{indent}# {text[:160]}{'...' if len(text) > 160 else ''}")

    def pointwise(self):
        """The body of a pointwise kernel."""
        lines = []
        self._x_decompose(lines, column=False)
        printer = _Printer(self, lines, "    ", "[1]")
        for node in self.kernel.nodes:
            self._comment(node, lines, "    ")
            self.store(node, printer.emit(node.body), lines, "    ")
        return lines

    def _segments(self):
        """The kernel's nodes grouped: ``("x", node)``, ``("reduce", node)``, ``("inner", [nodes])``."""
        out = []
        for node in self.kernel.nodes:
            if node.inner_ranges:
                if out and out[-1][0] == "inner" and out[-1][1][0].inner_ranges == node.inner_ranges:
                    out[-1][1].append(node)
                else:
                    out.append(("inner", [node]))
            elif node.is_reduction:
                out.append(("reduce", node))
            else:
                out.append(("x", node))
        return out

    def _grouped_segments(self, single=False):
        """:meth:`_segments` with consecutive sibling reductions (same reduced ranges, none reading another's
        result) as one ``("reduce", [nodes])`` entry: their loads and their loop are shared."""
        out = []
        for kind, what in self._segments():
            if kind != "reduce":
                out.append((kind, what))
                continue
            if not single and out and out[-1][0] == "reduce":
                group = out[-1][1]
                names = {n.buffer.name for n in group}
                same = list(group[0].buffer.data.reduction_ranges) == list(what.buffer.data.reduction_ranges)
                if same and not any(ld.buffer.name in names for ld in ir.loads(what.body)):
                    group.append(what)
                    continue
            out.append(("reduce", [what]))
        return out

    def row_extents(self):
        """The flattened extent of each row segment (reductions and inner loops)."""
        extents = []
        for kind, what in self._segments():
            if kind == "reduce":
                extents.append(_product(what.buffer.data.reduction_ranges))
            elif kind == "inner":
                extents.append(_product(what[0].inner_ranges))
        return extents

    def is_persistent(self):
        """Whether every row extent fits one block (a dynamic extent: at its hint, assumed for every size)."""
        extents = self.row_extents()
        if not all(ir.size_hint(e) <= self.persistent_limit for e in extents):
            return False
        return all(ir.assume(sympy.Le(e, self.persistent_limit)) for e in extents)

    def reduction_body(self, persistent, split=None):
        """The body of a reduction kernel (``split``: ``"partial"`` / ``"combine"`` for a split pair)."""
        lines = []
        if split == "partial":
            lines += self._split_partial()
            return lines
        self._x_decompose(lines, column=True)
        if persistent:
            lines.append("    rbase = tl.arange(0, RBLOCK)[None, :]")
        printer = _Printer(self, lines, "    ", "[1, 1]")
        for kind, what in self._grouped_segments(split == "combine"):
            if kind == "x":
                self._comment(what, lines, "    ")
                self.store(what, printer.emit(what.body), lines, "    ")
            elif kind == "reduce":
                for node in what:
                    self._comment(node, lines, "    ")
                if split == "combine":
                    values = [self._combine_partials(node, lines) for node in what]
                else:
                    values = self._reduce(what, lines, printer, persistent)
                for node, value in zip(what, values):
                    self.store(node, value, lines, "    ")
            else:
                for node in what:
                    self._comment(node, lines, "    ")
                self._inner(what, lines, printer, persistent)
        return lines

    def _row(self, lines, indent, symbols, ranges, start="rbase"):
        numel = " * ".join(self.size(r) for r in ranges) or "1"
        lines.append(f"{indent}rnumel = {numel}")
        lines.append(f"{indent}rindex = {start}")
        lines.append(f"{indent}rmask = rindex < rnumel")
        self._decompose(lines, indent, "rindex", symbols, [sympy.sympify(r) for r in ranges])
        self.row_symbols = set(symbols)

    def _persistent_row(self, lines, rvars, ranges, printer):
        """The printer of a persistent kernel's row over ``ranges``: the previous segment's when it ran over
        the same ranges (its loads are reused: softmax reads its row once), else a fresh row set-up."""
        key = tuple(sympy.sympify(r) for r in ranges)
        state = getattr(self, "_row_state", None)
        if state is not None and state[0] == key:
            self.row_symbols = set(rvars)
            return state[1]
        self._row(lines, "    ", rvars, ranges)
        inner = _Printer(self, lines, "    ", "[1, 1]", printer.memo)
        self._row_state = (key, inner)
        return inner

    def _reduce(self, nodes, lines, printer, persistent):
        """Sibling reductions over the same row (``nodes``, none reading another) in one pass: one row
        set-up (one loop when looped), loads shared between their bodies, one accumulator each.
        Returns each node's result, a ``[XBLOCK, 1]`` variable."""
        data = nodes[0].buffer.data
        rvars = ir.reduction_vars(len(data.reduction_ranges))
        specs = []
        for node in nodes:
            rtype, dtype = node.buffer.data.reduction_type, node.body.dtype
            specs.append((node, rtype, dtype, _reduce_type(rtype, dtype), reduction_identity(rtype, dtype),
                          reduction_combine(rtype, dtype), rtype in ("argmax", "argmin"), self.tmp()))
        if persistent:
            indent = "    "
            inner = self._persistent_row(lines, rvars, data.reduction_ranges, printer)
        else:
            indent = "        "
            for *_, acc_t, ident, _, arg, out in specs:
                lines.append(f"    {out}_acc = tl.full([XBLOCK, RBLOCK], {ident}, {acc_t})")
                if arg:
                    lines.append(f"    {out}_acc_i = tl.full([XBLOCK, RBLOCK], 2147483647, tl.int32)")
            extent = " * ".join(self.size(r) for r in data.reduction_ranges)
            loop = _Loop(self, lines, printer, indent)
            lines.append(f"    for roffset in range(0, {extent}, RBLOCK):")
            self._row(lines, indent, rvars, data.reduction_ranges, "roffset + tl.arange(0, RBLOCK)[None, :]")
            inner = loop.body  # shared by the siblings: a row is loaded once
        for node, _, dtype, acc_t, ident, combine, arg, out in specs:
            value = inner.emit(node.body)
            v = self.tmp()
            cast = "" if compute_type(dtype) == acc_t else f".to({acc_t})"
            lines.append(f"{indent}{v} = tl.where(xmask & rmask, {value}{cast}, {ident})")
            if arg:
                lines.append(f"{indent}{v}_i = tl.where(xmask & rmask, rindex, 2147483647)")
                pair = f"{v}, tl.broadcast_to({v}_i, {v}.shape)"
            if persistent and arg:
                lines.append(f"    _, {out} = tl.reduce(({pair}), 1, {combine})")
            elif persistent:
                lines.append(f"    {out} = tl.reduce({v}, 1, {combine})")
            elif arg:
                lines.append(f"        {out}_acc, {out}_acc_i = {combine}({out}_acc, {out}_acc_i, {pair})")
            else:
                lines.append(f"        {out}_acc = {combine}({out}_acc, {v})")
        if not persistent:
            loop.close(self)
        results = []
        for _, _, dtype, _, _, combine, arg, out in specs:
            if not persistent and arg:
                lines.append(f"    _, {out} = tl.reduce(({out}_acc, {out}_acc_i), 1, {combine})")
            elif not persistent:
                lines.append(f"    {out} = tl.reduce({out}_acc, 1, {combine})")
            tail = ".to(tl.int64)" if arg else " != 0" if dtype == ember.bool else ""
            lines.append(f"    {out} = {out}[:, None]{tail}")
            results.append(out)
        self.row_symbols = set()
        return results

    def _inner(self, group, lines, printer, persistent):
        ranges = group[0].inner_ranges
        ys = ir.index_vars(len(ranges), "y")
        if persistent:
            rvars = ir.reduction_vars(len(ranges))
            inner = self._persistent_row(lines, rvars, ranges, printer)
            rename = dict(zip(ys, rvars))  # the row's symbols: loads match the reductions' (loaded once)
            for node in group:
                same = SchedulerNode(node.buffer, ir.substitute(node.body, rename),
                                     tuple(sympy.sympify(i).xreplace(rename) for i in node.index), node.inner_ranges)
                same.local = node.local
                self.store(same, inner.emit(same.body), lines, "    ")
        else:
            loop = _Loop(self, lines, printer, "        ", {node.buffer.name for node in group})
            lines.append(f"    for roffset in range(0, {' * '.join(self.size(r) for r in ranges)}, RBLOCK):")
            self._row(lines, "        ", ys, ranges, "roffset + tl.arange(0, RBLOCK)[None, :]")
            for node in group:
                self.store(node, loop.body.emit(node.body), lines, "        ")
            loop.close(self)
        for node in group:  # values along a row segment are not visible to later segments: reload
            self.values.pop(node.buffer.name, None)
        lines.append("    tl.debug_barrier()  # the stores above are visible to every thread of the block")
        self.row_symbols = set()

    # split reductions ----------------------------------------------------------------------------

    def splittable(self):
        """Whether this kernel is few long rows whose reductions can be split in SPLIT chunks."""
        k = self.kernel
        reductions = [n for n in k.nodes if n.is_reduction]
        if not reductions or any(n.inner_ranges for n in k.nodes):
            return False
        first = reductions[0].buffer.data.reduction_ranges
        rnumel, xnumel = _product(first), _product(k.ranges)
        # dynamic sizes: decided at the hints (the split kernels are right for any sizes)
        if ir.size_hint(xnumel) > SPLIT_MAX_ROWS or ir.size_hint(rnumel) < SPLIT_MIN_ELEMENTS:
            return False
        inside = {n.buffer.name for n in k.nodes}
        for n in reductions:
            data = n.buffer.data
            if data.reduction_type in ("argmax", "argmin") or list(data.reduction_ranges) != list(first):
                return False
            if any(ld.buffer.name in inside for ld in ir.loads(n.body)):
                return False
        return True

    def split_reductions(self):
        """The reduction nodes of a split kernel."""
        return [n for n in self.kernel.nodes if n.is_reduction]

    def _split_partial(self):
        """Kernel one of a split pair: program (x block, chunk) reduces its chunk of each row into
        ``partial<k>[x * SPLIT + chunk]`` for each reduction ``k``."""
        lines = []
        self._x_decompose(lines, column=True)
        lines.append("    chunk = tl.program_id(1)")
        nodes = self.split_reductions()
        data = nodes[0].buffer.data
        rvars = ir.reduction_vars(len(data.reduction_ranges))
        rnumel = " * ".join(self.size(r) for r in data.reduction_ranges)
        lines.append(f"    rnumel = {rnumel}")
        lines.append(f"    chunk_size = (rnumel + {SPLIT} - 1) // {SPLIT}")
        lines.append("    rstart = chunk * chunk_size")
        printer = _Printer(self, lines, "    ", "[1, 1]")
        accs = []
        for node in nodes:
            rtype, dtype = node.buffer.data.reduction_type, node.body.dtype
            acc = self.tmp()
            accs.append(acc)
            lines.append(f"    {acc} = tl.full([XBLOCK, RBLOCK], {reduction_identity(rtype, dtype)}, "
                         f"{_reduce_type(rtype, dtype)})")
        lines.append("    for roffset in range(0, chunk_size, RBLOCK):")
        lines.append("        rindex = rstart + roffset + tl.arange(0, RBLOCK)[None, :]")
        lines.append("        rmask = (rindex < rnumel) & (roffset + tl.arange(0, RBLOCK)[None, :] < chunk_size)")
        self._decompose(lines, "        ", "rindex", rvars, [sympy.sympify(r) for r in data.reduction_ranges])
        self.row_symbols = set(rvars)
        inner = _Printer(self, lines, "        ", "[1, 1]", printer.memo)
        for node, acc in zip(nodes, accs):
            self._comment(node, lines, "        ")
            rtype, dtype = node.buffer.data.reduction_type, node.body.dtype
            value = inner.emit(node.body)
            lines.append(f"        {acc} = {reduction_combine(rtype, dtype)}({acc}, tl.where(xmask & rmask, "
                         f"{value}.to({_reduce_type(rtype, dtype)}), {reduction_identity(rtype, dtype)}))")
        self.row_symbols = set()
        for k, (node, acc) in enumerate(zip(nodes, accs)):
            rtype, dtype = node.buffer.data.reduction_type, node.body.dtype
            part = f"partial{k}_ptr"
            lines.append(f"    tl.store({part} + (xindex * {SPLIT} + chunk), "
                         f"tl.reduce({acc}, 1, {reduction_combine(rtype, dtype)})[:, None], xmask)")
        return lines

    def _combine_partials(self, node, lines):
        """Kernel two of a split pair: combine the SPLIT partials of each row (one block)."""
        k = self.split_reductions().index(node)
        rtype, dtype = node.buffer.data.reduction_type, node.body.dtype
        out = self.tmp()
        lines.append(f"    {out} = tl.load(partial{k}_ptr + (xindex * {SPLIT} + tl.arange(0, {SPLIT})[None, :]), "
                     f"xmask, other={reduction_identity(rtype, dtype)})")
        lines.append(f"    {out} = tl.reduce({out}, 1, {reduction_combine(rtype, dtype)})[:, None]")
        if dtype == ember.bool:
            lines.append(f"    {out} = {out} != 0")
        return out

    # assembly -----------------------------------------------------------------------------------

    def _function(self, name, body, extra_ptrs=(), rblock=True):
        ptrs = list(self.buffers.values()) + list(extra_ptrs) + (["ember_err_ptr"] if self.error_flag else [])
        args = ptrs + list(self.sizes.values()) + ["XBLOCK: tl.constexpr"]
        if rblock:
            args.append("RBLOCK: tl.constexpr")
        head = ["@triton.jit", f"def {name}({', '.join(args)}):"]
        return "\n".join(head + body) + "\n"

    def generate(self):
        """The kernel(s): a list of :class:`TritonKernelSource` in launch order."""
        k = self.kernel
        xnumel = _product(k.ranges)
        if not self.reduction:
            body = self.pointwise()
            return [TritonKernelSource(k.name, "pointwise", list(self.buffers), list(self.sizes), xnumel, None,
                                       self._function(k.name, body, rblock=False), error_flag=self.error_flag)]
        extents = self.row_extents()
        if all(e.is_Integer for e in extents):
            rnumel = max(extents, key=int)
        else:  # dynamic extents: the longest at run time (a persistent kernel's RBLOCK must cover every row)
            rnumel = sympy.Max(*extents)
        if self.splittable():
            return self._generate_split(xnumel, rnumel)
        persistent = self.is_persistent()
        body = self.reduction_body(persistent)
        kind = "persistent" if persistent else "looped"
        return [TritonKernelSource(k.name, kind, list(self.buffers), list(self.sizes), xnumel, rnumel,
                                   self._function(k.name, body), error_flag=self.error_flag)]

    def _generate_split(self, xnumel, rnumel):
        k = self.kernel
        nodes = self.split_reductions()
        partial_names = [f"partial{i}_ptr" for i in range(len(nodes))]
        first = _KernelGen(k, self.persistent_limit)
        body = first._split_partial()
        first_src = TritonKernelSource(f"{k.name}_split", "split", list(first.buffers), list(first.sizes),
                                       xnumel, rnumel, first._function(f"{k.name}_split", body, partial_names))
        second = _KernelGen(k, self.persistent_limit)
        body = second.reduction_body(True, split="combine")
        second_src = TritonKernelSource(k.name, "split_combine", list(second.buffers), list(second.sizes), xnumel,
                                        sympy.Integer(SPLIT), second._function(k.name, body, partial_names))
        scratch = [(f"{k.name}_partial{i}", _static(xnumel * SPLIT), _scratch_dtype(n)) for i, n in enumerate(nodes)]
        first_src.scratch = second_src.scratch = scratch
        first_src.error_flag, second_src.error_flag = first.error_flag, second.error_flag
        return [first_src, second_src]


def _scratch_dtype(node):
    dtype = node.body.dtype
    if dtype == ember.bool:
        return ember.int8
    return ember.float32 if dtype in _HALF else dtype


def _static(expr):
    """An int for a static size, else the SymPy expression (the wrapper evaluates it per call)."""
    expr = sympy.sympify(expr)
    return int(expr) if expr.is_Integer else expr


def _sized_value(value):
    """Whether a constant's value depends on dynamic sizes (a SymPy expression, a ``SizeFloat``)."""
    if isinstance(value, sympy.Basic):
        return not value.is_Number
    return not isinstance(value, (bool, int, float)) and hasattr(value, "expr")


def _product(sizes):
    out = sympy.Integer(1)
    for s in sizes:
        out = out * sympy.sympify(s)
    return out


# --------------------------------------------------------------------------------------------
# the graph's module

HEADER = """\
import triton
import triton.language as tl

from ember._inductor.runtime import triton_helpers as th
from ember._inductor.runtime import triton_random as th_random
"""


@dataclasses.dataclass
class GraphSource:
    """The Triton module of a scheduled graph.

    Attributes:
        source (str): the module text (every kernel, printable, importable).
        steps (list): in order, a list of :class:`TritonKernelSource` (one fused kernel: one, or two for a
            split reduction) or an :class:`~ember._inductor.ir.ExternKernel`.
    """

    source: str
    steps: list

    def __str__(self):
        return self.source


def generate(scheduler, persistent_limit=PERSISTENT_LIMIT):
    """Triton source for ``scheduler``'s kernels.

    Args:
        scheduler: a :class:`~ember._inductor.scheduler.Scheduler`.
        persistent_limit (int): the longest row a persistent reduction takes (longer rows loop).

    Returns:
        GraphSource: the module text and the steps to run.

    Example:
        >>> src = generate(scheduler)          # doctest: +SKIP
        >>> print(src.source)                  # doctest: +SKIP
    """
    parts = [HEADER]
    steps = []
    for step in scheduler.steps:
        if isinstance(step, ir.ExternKernel):
            steps.append(step)
            continue
        if getattr(step, "is_template", False):  # a matmul template chosen by max-autotune (select_algorithm.py)
            parts.append(f"# matmul template\n{step.source}")
            steps.append(step)
            continue
        kernels = _KernelGen(step, persistent_limit).generate()
        for kern in kernels:
            parts.append(f"# {kern.kind} kernel; sizes: " +
                         ", ".join(f"ks{i} = {s}" for i, s in enumerate(kern.sizes)) + "\n" + kern.source)
        steps.append(kernels)
    return GraphSource("\n\n".join(parts), steps)
