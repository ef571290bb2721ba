"""The loop-level IR: buffers whose contents are loops over small expression trees.

A compiled graph is a list of buffers. Each buffer has a name, a dtype and a layout (sizes and
strides in elements, as SymPy expressions even when static, so dynamic shapes later are a change
of guards). Its contents come from one of:

* :class:`InputBuffer` - a graph input (or a tensor constant), with the real strides of the
  tensor the caller passes;
* :class:`ComputedBuffer` - a loop nest: :class:`Pointwise` (one value per index) or
  :class:`Reduction` (outer ranges x reduced ranges, combined with a reduction type);
* :class:`ExternKernel` - a call of the eager op (matmul, conv, sort, random ops...); its
  tensor results are :class:`ExternOutput` buffers.

A loop body is an expression tree over index symbols (``i0, i1, ...`` for the output's dims,
``r0, r1, ...`` for reduced dims): :class:`Load` (a buffer at a multi-dim index), :class:`Constant`,
:class:`IndexExpr` (an index expression used as a value, e.g. iota) and :class:`Op` (one of the
closed list :data:`OPS`). A load keeps the multi-dim index into the buffer (not the flat offset) so
the scheduler can inline a producer's body by substituting its index symbols; printing shows the
flat offset through the buffer's strides::

    buf3: float32[4096, 1024] = pointwise(i0, i1: add(load(arg0, 1024*i0 + i1), ...))

Views (view, transpose, expand, slice, ...) are not buffers: the lowering composes their index
arithmetic into the consumers' loads (see :class:`View` in :mod:`ember._inductor.lowering`).

float16/bfloat16 values are computed in float32 and rounded on store (as PyTorch's inductor
does); an explicit conversion to a half type inside a body rounds there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math

import sympy

__all__ = [
    "OPS", "RANDOM_OPS", "REDUCTION_TYPES", "FloorDiv", "ModIndex", "index_vars", "reduction_vars",
    "contiguous_strides", "flat_index", "Expr", "Load", "Constant", "IndexExpr", "Op",
    "Pointwise", "Reduction", "Buffer", "InputBuffer", "OpaqueInput", "ComputedBuffer", "EmptyArg", "ExternKernel",
    "ExternOutput", "substitute", "loads", "count_ops", "structural_key", "free_symbols",
    "size_hints", "size_hint", "assume", "size_symbols",
]

#: The closed list of op names a loop body may use (codegen has one rule per name).
OPS = frozenset("""
add sub mul truediv floordiv mod fmod remainder neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt
reciprocal sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh erf erfc erfinv lgamma floor ceil trunc
round sign pow maximum minimum fmax fmin eq ne lt le gt ge logical_and logical_or logical_not logical_xor
bitwise_and bitwise_or bitwise_xor bitwise_not lshift rshift where to_dtype isnan isinf isfinite atan2
copysign hypot sigmoid philox_rand philox_randn
""".split())
#: The random ops of :data:`OPS` (``philox_rand(seed, offset, ordinal)``: a float32 uniform in ``[0, 1)``;
#: ``philox_randn``: a float32 standard normal), computed in the kernel from Philox4x32-10 of counter
#: ``(lo32(offset), hi32(offset), ordinal, 0)`` under key ``(lo32(seed), hi32(seed))``; ``seed`` is a load
#: of the graph's int64 seed input, ``offset`` the element's row-major position (an int64
#: :class:`IndexExpr`), ``ordinal`` the random node's number (an int64 :class:`Constant`). See
#: :mod:`ember._inductor.inkernel_random`.
RANDOM_OPS = frozenset({"philox_rand", "philox_randn"})

#: Reduction types. ``mean`` is a sum scaled afterwards; ``var`` is two reductions (mean, then the
#: sum of squared deviations), which is exact enough and fuses into one kernel.
REDUCTION_TYPES = frozenset({"sum", "prod", "max", "min", "argmax", "argmin", "any", "all"})


class FloorDiv(sympy.Function):
    """``a // b`` for non-negative integer index expressions (C's ``/`` on them)."""

    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, a, b):
        """SymPy's canonicalisation hook: the folded value, or None to keep ``FloorDiv(a, b)``."""
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        # (k*b*x + y) // b with 0 <= y < b is left alone: we cannot prove the bound here
        return None


class ModIndex(sympy.Function):
    """``a % b`` for non-negative integer index expressions."""

    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, a, b):
        """SymPy's canonicalisation hook: the folded value, or None to keep ``ModIndex(a, b)``."""
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        return None


# --------------------------------------------------------------------------------------------
# symbolic sizes (dynamic shapes): hints for decisions, and the assumptions those decisions make

_HINTS = {}  # size symbol -> its hint, while a graph with symbolic sizes is scheduled and generated
_ASSUMED = []  # relations the generated code relies on (see assume)


@contextlib.contextmanager
def size_hints(hints):
    """Context: sizes over the symbols of ``hints`` (symbol -> int) are compiled; yields the list that
    :func:`assume` fills with the relations the generated code relies on."""
    global _HINTS, _ASSUMED
    saved = _HINTS, _ASSUMED
    _HINTS, _ASSUMED = dict(hints), []
    try:
        yield _ASSUMED
    finally:
        _HINTS, _ASSUMED = saved


def size_hint(expr):
    """The int value of size expression ``expr`` at the hints (``expr`` itself when static)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return int(expr)
    return int(expr.xreplace(_HINTS))


def assume(relation):
    """Whether SymPy ``relation`` over sizes holds at the hints. A decision that takes a special path
    when it holds (a split loop, a persistent reduction) asks here: when the relation depends on a
    symbol and holds, it is recorded (the compiled graph checks it on each call and is compiled again
    where it fails). The general path taken when it fails is right for every size: nothing is recorded."""
    relation = sympy.sympify(relation)
    if relation in (sympy.true, sympy.false):
        return bool(relation)
    holds = bool(relation.xreplace(_HINTS))
    if holds and relation not in _ASSUMED:
        _ASSUMED.append(relation)
    return holds


def size_symbols():
    """The size symbols of the graph being compiled (empty for static sizes)."""
    return set(_HINTS)


def _symbol(prefix, k):
    return sympy.Symbol(f"{prefix}{k}", integer=True, nonnegative=True)


def index_vars(n, prefix="i"):
    """``[i0, ..., i{n-1}]``: the index symbols of an ``n``-dim loop nest."""
    return [_symbol(prefix, k) for k in range(n)]


def reduction_vars(n):
    """``[r0, ..., r{n-1}]``: the index symbols of reduced dims."""
    return index_vars(n, "r")


def contiguous_strides(sizes):
    """Row-major strides (in elements) of ``sizes``, as SymPy integers."""
    strides = []
    acc = sympy.Integer(1)
    for s in reversed(list(sizes)):
        strides.append(acc)
        acc = acc * sympy.sympify(s)
    return list(reversed(strides))


def flat_index(index, strides):
    """The element offset of multi-dim ``index`` under ``strides``."""
    return _flat_index(tuple(sympy.sympify(i) for i in index), tuple(strides))


@functools.lru_cache(maxsize=8192)
def _flat_index(index, strides):
    return merge_div_mod(sympy.expand(sum((i * s for i, s in zip(index, strides)), sympy.Integer(0))))


def merge_div_mod(expr):
    """``expr`` with each ``b*c*FloorDiv(x, b) + c*ModIndex(x, b)`` rewritten as ``c*x``.

    The pair is what a reshape that splits a dim and one that merges it back leave in an index
    (``x == b*(x // b) + x % b`` for non-negative ``x``); folded, a contiguous reshape of a
    contiguous buffer reads it at ``x`` again, so its loop stays contiguous (and vectorises) and an
    extern call can take the buffer as it is.
    """
    if not expr.has(FloorDiv):
        return expr
    changed = True
    while changed:
        changed = False
        for div in expr.atoms(FloorDiv):
            x, b = div.args
            mod = ModIndex(x, b)
            q, r = expr.coeff(div), expr.coeff(mod)
            if r != 0 and sympy.expand(q - b * r) == 0:
                expr = sympy.expand(expr - q * div - r * mod + r * x)
                changed = True
                break
    return expr


def _dtype_name(dtype):
    return str(dtype).replace("ember.", "")


# --------------------------------------------------------------------------------------------
# expressions


class Expr:
    """A node of a loop body. Every node has a ``dtype`` (an ember dtype)."""

    dtype = None

    def children(self):
        """The sub-expressions (a tuple; none for a leaf)."""
        return ()


@dataclasses.dataclass(frozen=True, eq=False)
class Load(Expr):
    """The element of ``buffer`` (a :class:`Buffer`) at multi-dim ``index`` (tuple of SymPy exprs)."""

    buffer: object
    index: tuple

    @property
    def dtype(self):
        """The buffer's dtype."""
        return self.buffer.dtype

    def __str__(self):
        return f"load({self.buffer.name}, {flat_index(self.index, self.buffer.strides)})"


@dataclasses.dataclass(frozen=True, eq=False)
class Constant(Expr):
    """A scalar constant (Python bool/int/float, may be inf or nan) of ``dtype``."""

    value: object
    dtype: object

    def __str__(self):
        return f"constant({self.value!r}, {_dtype_name(self.dtype)})"


@dataclasses.dataclass(frozen=True, eq=False)
class IndexExpr(Expr):
    """An index expression (SymPy, over the loop symbols) used as a value of ``dtype``."""

    expr: object
    dtype: object

    def __str__(self):
        return f"index({self.expr}, {_dtype_name(self.dtype)})"


@dataclasses.dataclass(frozen=True, eq=False)
class Op(Expr):
    """``name(*args)`` computed in ``dtype``; ``name`` is in :data:`OPS`.

    ``to_dtype`` converts its single argument to ``dtype``; comparisons have dtype bool and
    compute in their arguments' (common) dtype.
    """

    name: str
    args: tuple
    dtype: object

    def __post_init__(self):
        if self.name not in OPS:
            raise ValueError(f"ir.Op: unknown op name {self.name!r}")

    def children(self):
        """The operands."""
        return self.args

    def __str__(self):
        inner = ", ".join(str(a) for a in self.args)
        if self.name == "to_dtype":
            return f"to_dtype({inner}, {_dtype_name(self.dtype)})"
        return f"{self.name}({inner})"


def substitute(expr, mapping, load_fn=None, rewrites=None):
    """A copy of ``expr`` with index symbols replaced through ``mapping`` (symbol -> SymPy expr).

    ``load_fn(load, new_index)`` may return a replacement for a load (used for inlining); by
    default the load is rebuilt with the substituted index. ``rewrites``: a dict the caller keeps
    across calls, memoising each index rewrite by the index and the mapping's items. The scheduler
    passes one: inlining brings the same rewrites back again and again (diffusion_unet: 15,000, 500
    distinct), and building a SymPy ``Max``/``Min`` (padding, pooling) is slow (issue 28).
    """
    cache = {}
    rule = tuple(mapping.items()) if rewrites is not None else None

    def rewrite(index):
        index = sympy.sympify(index)
        if rule is None:
            return index.xreplace(mapping)
        if not rule:  # nothing to replace: xreplace would return the index itself
            return index
        key = (index, rule)
        out = rewrites.get(key)
        if out is None:
            out = rewrites[key] = index.xreplace(mapping)
        return out

    def walk(e):
        key = id(e)
        if key in cache:
            return cache[key]
        if isinstance(e, Load):
            index = tuple(rewrite(i) for i in e.index)
            out = load_fn(e, index) if load_fn is not None else None
            if out is None:
                out = Load(e.buffer, index)
        elif isinstance(e, IndexExpr):
            out = IndexExpr(rewrite(e.expr), e.dtype)
        elif isinstance(e, Op):
            out = Op(e.name, tuple(walk(a) for a in e.args), e.dtype)
        else:
            out = e
        cache[key] = out
        return out

    return walk(expr)


def structural_key(expr):
    """A hashable key equal for structurally equal expressions (same ops, constants, loads)."""
    if isinstance(expr, Load):
        return ("load", expr.buffer.name, tuple(str(sympy.sympify(i)) for i in expr.index))
    if isinstance(expr, Constant):
        return ("constant", repr(expr.value), str(expr.dtype))
    if isinstance(expr, IndexExpr):
        return ("index", str(expr.expr), str(expr.dtype))
    return (expr.name, str(expr.dtype), tuple(structural_key(a) for a in expr.args))


def free_symbols(expr):
    """The index symbols ``expr`` depends on."""
    if isinstance(expr, Load):
        out = set()
        for i in expr.index:
            out |= sympy.sympify(i).free_symbols
        return out
    if isinstance(expr, IndexExpr):
        return set(sympy.sympify(expr.expr).free_symbols)
    out = set()
    for a in expr.children():
        out |= free_symbols(a)
    return out


def loads(expr):
    """Every :class:`Load` in ``expr`` (with repeats, in tree order)."""
    out = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Load):
            out.append(e)
        stack.extend(e.children())
    return out


def count_ops(expr):
    """The number of :class:`Op` nodes in ``expr`` (a cost estimate for inlining decisions)."""
    n = 0
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Op):
            n += 1
        stack.extend(e.children())
    return n


# --------------------------------------------------------------------------------------------
# loop nests


@dataclasses.dataclass(eq=False)
class Pointwise:
    """One value per index of ``ranges`` (SymPy sizes); ``body`` is over ``index_vars(len(ranges))``."""

    ranges: list
    body: Expr

    def __str__(self):
        names = ", ".join(str(v) for v in index_vars(len(self.ranges)))
        return f"pointwise({names}: {self.body})"


@dataclasses.dataclass(eq=False)
class Reduction:
    """``reduction_type`` over ``reduction_ranges`` of ``body`` for each index of ``ranges``.

    ``body`` is over ``i0..`` (output dims) and ``r0..`` (reduced dims). For argmax/argmin the
    result is the flat (row-major) position within the reduced ranges of the first extreme value.
    """

    ranges: list
    reduction_ranges: list
    reduction_type: str
    body: Expr

    def __post_init__(self):
        if self.reduction_type not in REDUCTION_TYPES:
            raise ValueError(f"ir.Reduction: unknown reduction type {self.reduction_type!r}")

    def __str__(self):
        names = ", ".join(str(v) for v in index_vars(len(self.ranges)))
        rnames = ", ".join(f"{v} < {s}" for v, s in zip(reduction_vars(len(self.reduction_ranges)),
                                                          self.reduction_ranges))
        return f"reduction_{self.reduction_type}({names} | {rnames}: {self.body})"


# --------------------------------------------------------------------------------------------
# buffers


class Buffer:
    """A named tensor in the compiled graph: ``dtype``, ``sizes`` and ``strides`` (SymPy, elements)."""

    def __init__(self, name, dtype, sizes, strides=None, device="cpu"):
        self.name = name
        self.dtype = dtype
        self.sizes = [sympy.sympify(s) for s in sizes]
        self.strides = ([sympy.sympify(s) for s in strides] if strides is not None
                        else contiguous_strides(self.sizes))
        self.device = device

    @property
    def numel(self):
        """The number of elements (at the size hints when the sizes are symbolic)."""
        return math.prod(size_hint(s) for s in self.sizes)

    def layout_str(self):
        """``dtype[sizes]``, with the strides when they are not contiguous: for printing."""
        sizes = ", ".join(str(s) for s in self.sizes)
        text = f"{_dtype_name(self.dtype)}[{sizes}]"
        if self.strides != contiguous_strides(self.sizes):
            text += "(strides " + ", ".join(str(s) for s in self.strides) + ")"
        return text

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}: {self.layout_str()}>"


class InputBuffer(Buffer):
    """Graph input number ``position`` (a constant tensor has ``constant`` set instead)."""

    def __init__(self, name, dtype, sizes, strides, position=None, constant=None):
        super().__init__(name, dtype, sizes, strides)
        self.position = position
        self.constant = constant

    def __str__(self):
        what = f"input {self.position}" if self.constant is None else "constant"
        return f"{self.name}: {self.layout_str()} = {what}"


class ComputedBuffer(Buffer):
    """A contiguous buffer filled by a :class:`Pointwise` or :class:`Reduction` (``data``)."""

    def __init__(self, name, dtype, sizes, data):
        super().__init__(name, dtype, sizes)
        self.data = data

    def __str__(self):
        return f"{self.name}: {self.layout_str()} = {self.data}"


class StridedArg:
    """``buffer`` read as a strided tensor (``sizes``, ``strides`` and element ``offset``): a view of an
    existing buffer passed to an extern call as it is (BLAS takes transposed operands), not copied first."""

    def __init__(self, buffer, sizes, strides, offset):
        self.buffer = buffer
        self.sizes = [sympy.sympify(s) for s in sizes]
        self.strides = [sympy.sympify(s) for s in strides]
        self.offset = sympy.sympify(offset)

    @property
    def dtype(self):
        """The buffer's dtype."""
        return self.buffer.dtype

    def __str__(self):
        sizes = ", ".join(str(s) for s in self.sizes)
        strides = ", ".join(str(s) for s in self.strides)
        return f"{self.buffer.name}.as_strided(({sizes}), ({strides}), {self.offset})"

    __repr__ = __str__


class OpaqueInput:
    """Graph input number ``position`` that no kernel reads: a sparse tensor (``layout`` ``sparse_coo`` or
    ``sparse_csr``, ``sizes``, ``dtype``), handed whole to the extern calls that take it (``_sparse_mm``).

    Not a :class:`Buffer`: it has no strided memory, so no lowering can index it (a lowering that meets
    it fails instead of reading the placeholder array of a sparse tensor)."""

    def __init__(self, name, dtype, sizes, layout, position):
        self.name = name
        self.dtype = dtype
        self.sizes = [sympy.sympify(s) for s in sizes]
        self.layout = layout
        self.position = position

    def __str__(self):
        sizes = ", ".join(str(s) for s in self.sizes)
        return f"{self.name}: {_dtype_name(self.dtype)}[{sizes}] {self.layout} = input {self.position}"

    __repr__ = __str__


class EmptyArg:
    """An extern call's tensor argument that came from ``empty``: the runtime passes a fresh uninitialised
    tensor of ``sizes`` and ``dtype`` (no kernel fills it; ``bernoulli(empty(...), p)`` reads only its shape)."""

    def __init__(self, sizes, dtype):
        self.sizes = [sympy.sympify(s) for s in sizes]
        self.dtype = dtype

    def __str__(self):
        sizes = ", ".join(str(s) for s in self.sizes)
        return f"empty(({sizes}), {self.dtype})"

    __repr__ = __str__


class ExternKernel:
    """A call of the eager op ``op`` with ``args``/``kwargs`` (buffers where tensors go).

    Its tensor results are :attr:`outputs` (:class:`ExternOutput`), in the order of
    ``output_paths`` (the index path into the op's result: ``()`` for a tensor, ``(1,)`` for the
    second item of a tuple).
    """

    def __init__(self, name, op, args, kwargs, reason):
        self.name = name
        self.op = op
        self.args = args
        self.kwargs = kwargs
        self.reason = reason
        self.outputs = []

    def inputs(self):
        """The buffers this call reads."""
        found = []

        def walk(v):
            if isinstance(v, Buffer):
                found.append(v)
            elif isinstance(v, StridedArg):
                found.append(v.buffer)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)

        walk(self.args)
        walk(self.kwargs)
        return found

    def __str__(self):
        def show(v):
            if isinstance(v, Buffer):
                return v.name
            if isinstance(v, StridedArg):
                return str(v)
            if isinstance(v, (list, tuple)):
                return "[" + ", ".join(show(x) for x in v) + "]"
            return repr(v)

        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        outs = ", ".join(o.name for o in self.outputs) or "()"
        return f"{outs} = extern {self.op.name}({', '.join(parts)})  # {self.reason}"


class ExternOutput(Buffer):
    """Result ``path`` of an :class:`ExternKernel`; the wrapper makes it contiguous."""

    def __init__(self, name, dtype, sizes, kernel, path):
        super().__init__(name, dtype, sizes)
        self.kernel = kernel
        self.path = tuple(path)

    def __str__(self):
        return f"{self.name}: {self.layout_str()} = {self.kernel.name}{list(self.path)}"
