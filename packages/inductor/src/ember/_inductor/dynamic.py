"""Dynamic shapes in kernels: one compile whose kernels take the dynamic sizes as arguments.

ember-dynamo tells the backend which input dims are symbolic (:class:`DynamicDims`: a SymPy symbol and
its hint per dim). The aot trace and the lowering stay concrete (they work on ints); the symbols come
from running them five times: at the hint sizes, at three *probe* sizes (each symbol's hint times a
small factor of its own, so divisibility holds on every run) and at a low probe (every size 2, see
:func:`domain`: the sizes a compile accepts). The loop IRs must match object for
object; every integer that differs between them (a size, a stride, an index coefficient, an extern
call's shape argument, ``1/n`` in a mean) is written as an expression over the symbols:
``c*m + b`` for a monomial ``m`` (a symbol, a product of two symbols), fitted on two runs and
checked on the others (:class:`Unifier`). Any mismatch raises :class:`NotDynamic`, and the caller
compiles for the sizes it has (never a wrong answer).

The symbolic IR then goes through the scheduler and codegen: decisions on sizes use the hint
(:func:`ember._inductor.ir.size_hint`) and record what they assume (:func:`ember._inductor.ir.assume`,
e.g. ``s0 % 16 == 0``); the compiled callable checks those assumptions on each call and the caller
compiles again when one fails (:func:`compilation_count` counts every backend compilation).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import sympy

from . import ir
from .metrics import compilation_count, count_compilation

__all__ = ["DynamicDims", "NotDynamic", "Unifier", "unify_graphs", "probe_inputs", "py_code",
           "compilation_count", "count_compilation", "SizeBinding", "SizeFloat", "slice_assumptions"]


class NotDynamic(Exception):
    """The graph cannot be compiled with symbolic sizes (the reason is the message): compile it for the
    sizes at hand instead."""


@dataclasses.dataclass(frozen=True)
class DynamicDims:
    """Which dims of a graph's inputs are symbolic.

    Attributes:
        dims (tuple): per graph input, a tuple of ``(dim, symbol)`` pairs (empty: static input).
        hints (dict): symbol -> its size on the example inputs (>= 2).
    """

    dims: tuple
    hints: dict

    def at(self, inputs):
        """This spec with the hints read from ``inputs`` (a later compile of the same capture)."""
        hints = dict(self.hints)
        for value, dims in zip(inputs, self.dims):
            for d, symbol in dims:
                hints[symbol] = int(value.shape[d])
        return DynamicDims(self.dims, hints)

    def symbol_groups(self):
        """Symbols grouped by hint (symbols with equal hints are guarded equal by the capture)."""
        groups = {}
        for symbol, hint in self.hints.items():
            groups.setdefault(hint, []).append(symbol)
        return list(groups.values())

    def canonical(self):
        """symbol -> the symbol standing for its group (the first of equal hints)."""
        return {s: group[0] for group in self.symbol_groups() for s in group}


#: Probe factors per symbol group: run k multiplies group g's hint by _FACTORS[k][g]. A value fits
#: ``c*m + b`` when its values on the runs lie on a line with ``m``'s: fitted on the first two runs, it is
#: checked on the other two. The factors are chosen so that no two monomials of degree <= 3 lie on one
#: line over runs 0-2 (``(f2 - 1) / (f1 - 1)`` differs for each; with factors 3, 5 and 5, 7, ``4*s1**2``
#: passed for ``c*s0 + b``), and run 3 is a further check against values outside that family.
_FACTORS = ((1,) * 8, (3, 5, 7, 11, 13, 17, 19, 23), (7, 11, 13, 17, 19, 31, 29, 41),
            (2, 13, 3, 5, 7, 11, 23, 17))
#: The size of every symbol on the last run, a *low* probe: where it lowers alike and every fitted size
#: holds there too, the compiled code is checked from 2 up (else from the hint up). With the largest
#: probe this bounds the sizes a compile accepts (:func:`domain`): a size computed with a threshold
#: (``t.diagonal()`` of an ``(s0, 8)`` matrix is ``min(s0, 8)`` long) is a line between its checked points.
LOW = 2
#: How many traces a dynamic compile makes (the hint, the probes, the low probe).
RUNS = len(_FACTORS) + 1
#: The traces a dynamic compile needs (the low probe may fail: a size 2 some view cannot take).
REQUIRED_RUNS = len(_FACTORS)


def probe_points(spec):
    """The value of each (canonical) symbol on each run: the hint, then the probes."""
    groups = spec.symbol_groups()
    if len(groups) > len(_FACTORS[1]):
        raise NotDynamic(f"{len(groups)} independent dynamic sizes (at most {len(_FACTORS[1])})")
    points = []
    for factors in _FACTORS:
        points.append({group[0]: spec.hints[group[0]] * factors[g] for g, group in enumerate(groups)})
    points.append({group[0]: LOW for group in groups})
    return points


def domain(spec, runs):
    """Relations bounding each symbol to the sizes the first ``runs`` traces checked (from ``LOW`` or the
    hint up to the largest probe): a compile accepts only sizes between its checked points."""
    points = probe_points(spec)[:runs]
    relations = []
    for symbol in points[0]:
        values = [p[symbol] for p in points]
        if min(values) > LOW:
            relations.append(sympy.Ge(symbol, min(values)))
        relations.append(sympy.Le(symbol, max(values)))
    return relations


def lower_and_unify(gms, example_inputs, spec, lower):
    """``(graph, assumptions)``: the traces lowered (``lower(gm, inputs) -> GraphLowering``) and unified;
    without the low probe when it does not match (then the sizes checked start at the hint).

    Raises:
        NotDynamic: the required traces differ, or a size has no expression.
    """
    if len(gms) > REQUIRED_RUNS:
        try:
            graphs = [lower(gm, ex) for gm, ex in zip(gms, example_inputs)]
            graph, assumptions = unify_graphs(graphs, spec)
            return graph, assumptions + slice_assumptions(gms, spec) + domain(spec, len(gms))
        except Exception:  # noqa: BLE001 - the low probe lowers otherwise: check from the hint up
            gms, example_inputs = gms[:REQUIRED_RUNS], example_inputs[:REQUIRED_RUNS]
    graphs = [lower(gm, ex) for gm, ex in zip(gms, example_inputs)]
    graph, assumptions = unify_graphs(graphs, spec)
    return graph, assumptions + slice_assumptions(gms, spec) + domain(spec, len(gms))


def probe_inputs(example_inputs, spec, run):
    """Meta tensors like ``example_inputs`` with the dynamic dims at probe ``run``'s sizes (contiguous)."""
    import ember

    canon = spec.canonical()
    point = probe_points(spec)[run]
    out = []
    for value, dims in zip(example_inputs, spec.dims):
        if not dims or not isinstance(value, ember.Tensor):
            out.append(value)
            continue
        shape = list(value.shape)
        for d, symbol in dims:
            shape[d] = point[canon[symbol]]
        meta = ember.empty(shape, dtype=value.dtype, device="meta")
        if value.requires_grad:
            meta.requires_grad_(True)
        out.append(meta)
    return out


# --------------------------------------------------------------------------------------------
# fitting integers to expressions over the symbols


class Unifier:
    """Writes values that differ between the runs (hint, then probes) as expressions over the symbols.

    Args:
        spec (DynamicDims): the symbols and hints.
    """

    def __init__(self, spec, runs=RUNS):
        self.points = probe_points(spec)[:runs]
        self.runs = len(self.points)
        symbols = list(self.points[0])
        self.monomials = [sympy.Integer(1)] + symbols
        self.monomials += [a * b for i, a in enumerate(symbols) for b in symbols[i:]]
        self.assumptions = []  # relations a fitted expression needs (divisibility)
        self._cache = {}

    def _value(self, expr, run):
        return int(expr.xreplace(self.points[run]))

    def fit(self, values):
        """An expression equal to ``values[k]`` on run ``k``, or raise :class:`NotDynamic`."""
        values = tuple(values)
        if len(set(values)) == 1:
            return sympy.Integer(values[0])
        if values in self._cache:
            return self._cache[values]
        for m in self.monomials[1:]:
            ms = [self._value(m, k) for k in range(self.runs)]
            if ms[1] == ms[0]:
                continue
            c = Fraction(values[1] - values[0], ms[1] - ms[0])
            b = values[0] - c * ms[0]
            # fitted on two runs, checked on the others
            if c == 0 or b.denominator != 1 or any(c * mk + b != v for mk, v in zip(ms[2:], values[2:])):
                continue
            expr = self._rational_times(c, m) + int(b)
            self._cache[values] = expr
            return expr
        raise NotDynamic(f"no expression over the dynamic sizes gives {', '.join(map(str, values))} on the "
                         f"{self.runs} traces")

    def _rational_times(self, c, m):
        if c.denominator == 1:
            return int(c) * m
        # c = p/q: exact only where q divides p*m: assumed (checked on every call)
        relation = sympy.Eq(ir.ModIndex(c.numerator * m, c.denominator), 0)
        if relation not in self.assumptions:
            self.assumptions.append(relation)
        return ir.FloorDiv(c.numerator * m, c.denominator)

    def expr(self, *exprs):
        """Unify SymPy expressions of the same structure, one per run (integers may differ)."""
        exprs = [sympy.sympify(e) for e in exprs]
        a = exprs[0]
        if all(e == a for e in exprs[1:]):
            return a
        if all(e.is_Integer for e in exprs):
            return self.fit([int(e) for e in exprs])
        if all(e.is_Number for e in exprs):
            return self.number([float(e) for e in exprs])
        if any(e.func != a.func or len(e.args) != len(a.args) for e in exprs[1:]):
            raise NotDynamic(f"index expressions differ in structure across sizes: {' / '.join(map(str, exprs))}")
        return a.func(*[self.expr(*args) for args in zip(*(e.args for e in exprs))])

    def number(self, values):
        """A float that differs across the runs: a size used as a float, or a :class:`SizeFloat`."""
        values = tuple(values)
        if len(set(values)) == 1:
            return values[0]
        if all(v.is_integer() for v in values):  # a size used as a float (``x / x.shape[0]``)
            return self.fit(tuple(int(v) for v in values))
        if all(v != 0 for v in values):
            inverse = [1.0 / v for v in values]
            ints = [round(v) for v in inverse]
            if all(abs(i - v) <= 1e-9 * abs(v) for i, v in zip(ints, inverse)):
                return SizeFloat("reciprocal", 1.0, self.fit(tuple(ints)))  # a mean's 1/n
        found = self._bessel(values)
        if found is not None:
            return found
        raise NotDynamic(f"a constant {values[0]} depends on the sizes (not n, 1/n or k*n/(n-1))")

    def _bessel(self, values):
        """``k * n / (n - 1)`` (batch norm's running variance: momentum times Bessel's correction)."""
        v0, v1 = values[0], values[1]
        if v1 == 0 or v0 == v1:
            return None
        r = v0 / v1
        for m in self.monomials[1:]:
            m0, m1 = self._value(m, 0), self._value(m, 1)
            c = round((r * m1 - m0) / (m0 * m1 * (r - 1)))
            if c < 1:
                continue
            n = [c * self._value(m, k) for k in range(self.runs)]
            if n[0] < 2:
                continue
            k = v0 * (n[0] - 1) / n[0]
            candidate = SizeFloat("bessel", k, c * m)
            if all(abs(candidate.at(nj) - vj) <= 1e-12 * abs(vj) for nj, vj in zip(n, values)):
                return candidate
        return None

    def value(self, *vals):
        """Unify Python values of the IR, one per run (numbers, SymPy, lists, buffers by name, ...)."""
        a = vals[0]
        if isinstance(a, bool) or a is None or isinstance(a, str):
            if any(v != a for v in vals[1:]):
                raise NotDynamic(f"values differ across sizes: {' / '.join(map(repr, vals))}")
            return a
        if all(type(v) is int for v in vals):
            return a if len(set(vals)) == 1 else self.fit(vals)
        if all(isinstance(v, float) for v in vals):
            return self.number(vals)
        if isinstance(a, sympy.Basic):
            return self.expr(*vals)
        if isinstance(a, (list, tuple)):
            if any(type(v) is not type(a) or len(v) != len(a) for v in vals[1:]):
                raise NotDynamic(f"lists differ across sizes: {a!r} / {vals[1]!r}")
            return type(a)(self.value(*items) for items in zip(*vals))
        if isinstance(a, dict):
            if any(v.keys() != a.keys() for v in vals[1:]):
                raise NotDynamic("keyword arguments differ across sizes")
            return {k: self.value(*(v[k] for v in vals)) for k in a}
        if isinstance(a, ir.Buffer):
            if any(getattr(v, "name", None) != a.name for v in vals[1:]):
                raise NotDynamic(f"buffer {a.name} is not the same across sizes")
            return a
        if isinstance(a, (ir.StridedArg, ir.EmptyArg)):
            return self.view_arg(*vals)
        try:
            same = all(v == a for v in vals[1:])
        except Exception:  # noqa: BLE001 - a value that does not compare (a tensor constant)
            same = all(v is a for v in vals[1:])
        if not same:
            raise NotDynamic(f"values differ across sizes: {' / '.join(map(repr, vals))}")
        return a

    def view_arg(self, *vals):
        """One view argument of an extern call (an ``ir`` view or ``StridedArg``) from its versions across
        the traces: its sizes, and for a ``StridedArg`` its strides and offset, become size expressions
        (the first version is updated and returned).

        Raises:
            NotDynamic: when the versions differ in kind or a value has no expression over the sizes.
        """
        a = vals[0]
        if any(type(v) is not type(a) for v in vals[1:]):
            raise NotDynamic("extern arguments differ in kind across sizes")
        a.sizes = self.value(*(v.sizes for v in vals))
        if isinstance(a, ir.StridedArg):
            self.value(*(v.buffer for v in vals))
            a.strides = self.value(*(v.strides for v in vals))
            a.offset = self.expr(*(v.offset for v in vals))
        return a


class SizeFloat:
    """A float constant of a loop body that depends on an integer size expression ``expr`` (``n``):
    ``scale / n`` (form ``"reciprocal"``) or ``scale * n / (n - 1)`` (form ``"bessel"``), computed in
    double as Python computes it, so the compiled value is the eager one bit for bit."""

    __slots__ = ("form", "scale", "expr")

    def __init__(self, form, scale, expr):
        self.form, self.scale, self.expr = form, float(scale), expr

    def at(self, n):
        """The value for ``n``."""
        return self.scale / n if self.form == "reciprocal" else self.scale * n / (n - 1)

    def cpp(self, n_code):
        """C++ (double) code of the value, given the C++ code of ``n``."""
        n = f"static_cast<double>({n_code})"
        if self.form == "reciprocal":
            return f"({self.scale!r} / {n})"
        return f"(({self.scale!r} * {n}) / ({n} - 1.0))"

    def __eq__(self, other):
        return isinstance(other, SizeFloat) and (self.form, self.scale, self.expr) == (other.form, other.scale,
                                                                                       other.expr)

    def __hash__(self):
        return hash((self.form, self.scale, self.expr))

    def __repr__(self):
        return f"SizeFloat({self.form}, {self.scale!r}, {self.expr})"


# --------------------------------------------------------------------------------------------
# unifying three lowered graphs


def unify_graphs(graphs, spec):
    """The first of the :class:`~ember._inductor.graph.GraphLowering` s of one graph lowered at the hint
    sizes and at each probe's, rewritten in place with symbolic sizes; returns ``(graph, assumptions)``.

    Raises:
        NotDynamic: the graphs differ in structure, or a size has no expression.
    """
    u = Unifier(spec, len(graphs))
    g0 = graphs[0]
    shape = (len(g0.inputs), len(g0.buffers), len(g0.constants), len(g0.outputs))
    if any((len(g.inputs), len(g.buffers), len(g.constants), len(g.outputs)) != shape for g in graphs[1:]):
        raise NotDynamic("the graphs lowered at different sizes have different buffers")
    for bufs in zip(*(g.inputs for g in graphs)):
        if bufs[0] is not None:
            _layout(u, bufs)
    for bufs in zip(*(g.constants for g in graphs)):
        _layout(u, bufs)
    bodies = {}
    for steps in zip(*(g.buffers for g in graphs)):
        a = steps[0]
        if any(type(s) is not type(a) for s in steps[1:]):
            raise NotDynamic(f"{a.name}: a different kind of step across sizes")
        if isinstance(a, ir.ExternKernel):
            if any(s.op is not a.op or len(s.outputs) != len(a.outputs) for s in steps[1:]):
                raise NotDynamic(f"{a.name}: a different extern call across sizes")
            a.args = u.value(*(s.args for s in steps))
            a.kwargs = u.value(*(s.kwargs for s in steps))
            for outs in zip(*(s.outputs for s in steps)):
                _layout(u, outs)
            continue
        _layout(u, steps)
        datas = [s.data for s in steps]
        da = datas[0]
        if any(type(d) is not type(da) for d in datas[1:]):
            raise NotDynamic(f"{a.name}: a different loop kind across sizes")
        da.ranges = u.value(*(list(d.ranges) for d in datas))
        if isinstance(da, ir.Reduction):
            if any(d.reduction_type != da.reduction_type for d in datas[1:]):
                raise NotDynamic(f"{a.name}: a different reduction across sizes")
            da.reduction_ranges = u.value(*(list(d.reduction_ranges) for d in datas))
        da.body = _body(u, [d.body for d in datas], bodies)
    g0.outputs = [u.view_arg(*outs) if isinstance(outs[0], ir.StridedArg) else u.value(*outs)
                  for outs in zip(*(g.outputs for g in graphs))]
    if any([v for _, v in g.scalar_inputs] != [v for _, v in g0.scalar_inputs] for g in graphs[1:]):
        raise NotDynamic("non-tensor inputs differ across sizes")
    return g0, list(u.assumptions)


def _layout(u, bufs):
    a = bufs[0]
    if any(b.name != a.name or b.dtype != a.dtype for b in bufs[1:]):
        raise NotDynamic(f"buffer {a.name} differs across sizes ({bufs[1].name})")
    a.sizes = u.value(*(list(b.sizes) for b in bufs))
    a.strides = u.value(*(list(b.strides) for b in bufs))


def _body(u, nodes, memo):
    key = tuple(id(n) for n in nodes)
    if key in memo:
        return memo[key]
    a = nodes[0]
    if any(type(n) is not type(a) for n in nodes[1:]):
        raise NotDynamic(f"loop bodies differ across sizes: {a} / {nodes[1]}")
    if isinstance(a, ir.Load):
        if any(n.buffer.name != a.buffer.name or len(n.index) != len(a.index) for n in nodes[1:]):
            raise NotDynamic(f"loads differ across sizes: {a} / {nodes[1]}")
        out = ir.Load(a.buffer, tuple(u.expr(*index) for index in zip(*(n.index for n in nodes))))
    elif isinstance(a, ir.Constant):
        out = ir.Constant(u.value(*(n.value for n in nodes)), a.dtype)
    elif isinstance(a, ir.IndexExpr):
        out = ir.IndexExpr(u.expr(*(n.expr for n in nodes)), a.dtype)
    elif isinstance(a, ir.Op):
        if any(n.name != a.name or len(n.args) != len(a.args) for n in nodes[1:]):
            raise NotDynamic(f"loop bodies differ across sizes: {a.name} / {nodes[1].name}")
        out = ir.Op(a.name, tuple(_body(u, list(args), memo) for args in zip(*(n.args for n in nodes))), a.dtype)
    else:
        raise NotDynamic(f"an unknown loop body node {type(a).__name__}")
    memo[key] = out
    return out


def slice_assumptions(gms, spec):
    """Relations that keep every ``slice`` of a dynamic dim clamped as it was at the hint.

    A slice with a static bound (``x[:10]``, ``x[-4:]``) of a dynamic dim has the same length on every
    trace as long as the dim is longer than the bound, so its length is baked into the IR as a
    constant (or as the dim itself when the bound is past every traced size). The compiled code is
    right only on that side of the bound: ``10 <= s0`` (or ``1000 > s0``) is assumed, as the hint had it.

    Args:
        gms (list): the graph traced at the hint and probe sizes (nodes with ``meta["val"]``).
        spec (DynamicDims): the symbols.

    Returns:
        list: SymPy relations (none for slices of static dims).

    Raises:
        NotDynamic: the graphs differ, or a size has no expression.
    """
    u = Unifier(spec, len(gms))
    relations = []
    node_lists = [list(gm.graph.nodes) for gm in gms]
    if any(len(nodes) != len(node_lists[0]) for nodes in node_lists[1:]):
        raise NotDynamic("the graphs traced at different sizes have different nodes")
    for nodes in zip(*node_lists):
        first = nodes[0]
        if first.op != "call_function" or getattr(first.target, "name", None) != "slice":
            continue
        bound = [first.target._call_signature.bind(*n.args, **n.kwargs) for n in nodes]
        for b in bound:
            b.apply_defaults()
        vals = [b.arguments["input"].meta["val"] for b in bound]
        dim = bound[0].arguments["dim"] % max(vals[0].dim(), 1)
        sizes = [int(v.shape[dim]) for v in vals]
        if len(set(sizes)) == 1:
            continue  # a static dim: nothing moves
        size = u.fit(sizes)
        for name in ("start", "end"):
            values = [b.arguments[name] for b in bound]
            if values[0] is None:
                continue
            at = u.fit(values)
            b0, s0 = values[0], sizes[0]
            if b0 < 0:
                relation = sympy.Ge(at + size, 0) if b0 + s0 >= 0 else sympy.Lt(at + size, 0)
            else:
                relation = sympy.Le(at, size) if b0 <= s0 else sympy.Gt(at, size)
            if relation not in (sympy.true, sympy.false) and relation not in relations:
                relations.append(relation)
    return relations + [a for a in u.assumptions if a not in relations]


# --------------------------------------------------------------------------------------------
# run time: binding the symbols from the inputs, evaluating size expressions


def py_code(expr, name_of=str):
    """Python source of an integer size expression (``name_of(symbol)`` names a symbol)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return name_of(expr)
    args = [py_code(a, name_of) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + " * ".join(args) + ")"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
        return f"({args[0]} ** {args[1]})"
    if isinstance(expr, ir.FloorDiv):
        return f"({args[0]} // {args[1]})"
    if isinstance(expr, ir.ModIndex):
        return f"({args[0]} % {args[1]})"
    if isinstance(expr, sympy.Max):
        return f"max({', '.join(args)})"
    if isinstance(expr, sympy.Min):
        return f"min({', '.join(args)})"
    if isinstance(expr, sympy.Not):
        return f"(not {args[0]})"
    ops = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}
    for cls, op in ops.items():
        if isinstance(expr, cls):
            return f"({args[0]} {op} {args[1]})"
    raise NotDynamic(f"the size expression {expr} has no Python form")


class SizeBinding:
    """Reads the symbols' values from a compiled graph's inputs and resolves symbolic values.

    Args:
        inputs (list): ``(position, sizes)`` per tensor input (sizes: SymPy expressions).
        symbols (list[sympy.Symbol]): the symbols the graph uses, in kernel-argument order.
        assumptions (list): SymPy relations the compiled code needs (checked by :meth:`check`).

    Raises:
        NotDynamic: a symbol is not the size of some input dim.
    """

    def __init__(self, inputs, symbols, assumptions=()):
        self.symbols = list(symbols)
        where = {}
        for position, sizes in inputs:
            for d, s in enumerate(sizes):
                if isinstance(s, sympy.Symbol) and s not in where:
                    where[s] = (position, d)
        missing = [s for s in self.symbols if s not in where]
        if missing:
            raise NotDynamic(f"the sizes {missing} are not the size of an input dim")
        self.where = [where[s] for s in self.symbols]
        self.assumptions = [a for a in assumptions if a is not sympy.true]
        self._check = _checker(self.assumptions)
        # the graph's own check (per call) reads the sizes of its inputs: relations over other symbols
        # (the whole compile's bounds) are checked by the caller's ``accepts``
        self._check_own = _checker([a for a in self.assumptions if a.free_symbols <= set(self.symbols)])
        self.assumption_text = [str(a) for a in self.assumptions]

    def values(self, args):
        """The symbols' values for a call's ``args`` (a tuple of ints)."""
        return tuple(args[p].shape[d] for p, d in self.where)

    def check(self, values):
        """Whether the assumptions over this graph's symbols hold for these values (``symbols`` order)."""
        return bool(self._check_own({s.name: v for s, v in zip(self.symbols, values)}))

    def check_env(self, env):
        """Whether the assumptions hold for ``env`` (symbol name or symbol -> value)."""
        env = {getattr(k, "name", k): v for k, v in env.items()}
        try:
            return bool(self._check(env))
        except KeyError:  # an assumption on a size the caller did not give
            return False

    def resolve(self, obj, values):
        """``obj`` with every SymPy expression evaluated at ``values`` (ints; floats for ``1/n``)."""
        env = dict(zip(self.symbols, values))
        return _resolve(obj, env)


def _checker(relations):
    """``check(env) -> bool`` for SymPy ``relations`` (``env``: symbol name -> int)."""
    text = " and ".join(py_code(a, lambda s: f"e[{s.name!r}]") for a in relations) or "True"
    return eval(f"lambda e: {text}")  # noqa: S307 - our own generated text


def _resolve(obj, env):
    if isinstance(obj, sympy.Basic):
        return int(obj.xreplace(env))
    if isinstance(obj, SizeFloat):
        return obj.at(int(obj.expr.xreplace(env)))
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_resolve(v, env) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_resolve(v, env) for v in obj)
    if isinstance(obj, dict):
        return {k: _resolve(v, env) for k, v in obj.items()}
    if getattr(type(obj), "_sized", False):  # the wrapper's references (_BufRef, _ExternStep, ...)
        copy = object.__new__(type(obj))
        for name in type(obj).__slots__:
            if hasattr(obj, name):
                setattr(copy, name, _resolve(getattr(obj, name), env))
        return copy
    return obj

