"""Symbolic sizes: the dims of graph inputs that a capture leaves free (dynamic shapes).

A dynamic dim of a graph input is a SymPy symbol ``s0, s1, ...`` with the size seen at capture as its
*hint*. Tensors are still traced on meta examples of the hint sizes; a size read in the traced code is
a graph node (``s0 = arg0_1.size(0)``), so ops that take it get the node and the graph works for any
size. Relations the capture relied on (``if x.shape[0] > 2``, sizes 0 and 1 never symbolic) become one
SHAPE_EXPR guard each.

How the capture knows which sizes depend on the symbols: every ember call is run twice, once on the
hint examples (recorded into the graph) and once on *shadow* examples where every symbol has another
value. A size that differs between the two runs depends on the symbols; a plain int in an op's
arguments that differs means ember code computed a size from the hint itself (it would be baked into
the graph): the capture then falls back to static sizes (:class:`SizeSpecialized`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .exc import Unsupported

__all__ = ["ShapeEnv", "SymHint", "ShapeRelation", "SizeSpecialized", "floor_div", "to_python"]


@functools.cache
def _floor_div_function():
    import sympy  # imported on the first dynamic capture only (it takes most of a second)

    # ``a // b`` on sizes (SymPy's floor(a/b) would print as something Python cannot run)
    return sympy.Function("FloorDiv")


def floor_div(a, b):
    """The SymPy expression of ``a // b`` on sizes."""
    return _floor_div_function()(a, b)


class SizeSpecialized(Exception):
    """A dynamic capture would bake a size into the graph: capture again with static sizes (not an
    :class:`Unsupported`: it must not become a graph break)."""

    def __init__(self, reason, culprit=None):
        super().__init__(reason)
        self.reason = reason
        self.culprit = culprit  # (source name, dim) to keep static and try again, when known


class SymHint(int):
    """The hint of a symbolic size as handed to ember code: an int (ops run on it) that carries its
    graph node (the recording mode puts the node into the op's arguments)."""

    node = None


def to_python(expr, name_of) -> str:
    """Python source text for a SymPy size expression; ``name_of(symbol)`` gives a symbol's text."""
    import sympy

    if isinstance(expr, sympy.Symbol):
        return name_of(expr)
    if isinstance(expr, sympy.Integer):
        return str(int(expr))
    if expr is sympy.true or expr is sympy.false:
        return str(bool(expr))
    args = [to_python(a, name_of) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + " * ".join(args) + ")"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp >= 0:
        return f"({args[0]} ** {args[1]})"
    if isinstance(expr, sympy.Mod):
        return f"({args[0]} % {args[1]})"
    if getattr(expr, "func", None) == _floor_div_function():
        return f"({args[0]} // {args[1]})"
    ops = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}
    for cls, op in ops.items():
        if isinstance(expr, cls):
            return f"{args[0]} {op} {args[1]}"
    raise Unsupported(f"the size expression {expr} has no Python form for a guard")


@dataclass(frozen=True)
class ShapeRelation:
    """What a SHAPE_EXPR guard checks: a relation between input sizes that held at capture.

    Attributes:
        text (str): the relation over the symbols, e.g. ``"s0 > 2"`` (shown by explain).
        template (str): its Python form with ``{0}``, ``{1}``... for the sizes in ``sizes``.
        sizes (tuple): ``(source, dim)`` per placeholder: ``source``'s tensor's size in ``dim``, or
            with ``dim`` None the int at ``source`` itself (a dynamic int).
        names (tuple): the symbol of each placeholder, as named in ``text``.
    """

    text: str
    template: str
    sizes: tuple
    names: tuple = ()

    def __repr__(self):
        names = self.names or tuple(f"{{{i}}}" for i in range(len(self.sizes)))
        where = ", ".join(
            f"{n}={src.name()}" + ("" if d is None else f".size({d})") for n, (src, d) in zip(names, self.sizes)
        )
        return f"{self.text!r} [{where}]" if where else repr(self.text)

    def write(self, w) -> None:
        """Add the test to a guard check function being written (``guards._CodeWriter``)."""
        w.test(self.template.format(
            *[w.value(src) if d is None else f"{w.value(src)}._data.shape[{d}]" for src, d in self.sizes]
        ))

    def holds(self, frame_locals, frame_globals) -> bool:
        values = [self._value(src, d, frame_locals, frame_globals) for src, d in self.sizes]
        return bool(eval(self.template.format(*map(str, values)), {}))  # noqa: S307 - our own text

    def describe_failure(self, frame_locals, frame_globals) -> str | None:
        try:
            if self.holds(frame_locals, frame_globals):
                return None
        except Exception as exc:  # noqa: BLE001 - a path that is gone
            return f"size relation {self.text} cannot be checked: {type(exc).__name__}: {exc}"
        values = ", ".join(
            src.name() + ("" if d is None else f".size({d})") + f" = {self._value(src, d, frame_locals, frame_globals)}"
            for src, d in self.sizes
        )
        return f"size relation {self.text} failed ({values})"

    @staticmethod
    def _value(src, dim, frame_locals, frame_globals):
        value = src.read(frame_locals, frame_globals)
        return value if dim is None else value.shape[dim]


_PRIMES = (7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)


class _Symbol:
    __slots__ = ("symbol", "source", "dim", "hint", "shadow", "node")

    def __init__(self, symbol, source, dim, hint, shadow):
        self.symbol, self.source, self.dim, self.hint, self.shadow = symbol, source, dim, hint, shadow
        self.node = None


class ShapeEnv:
    """The symbols of one capture, the shadow value of each, and the relations to guard."""

    def __init__(self):
        self.symbols = {}  # sympy.Symbol -> _Symbol
        self._by_input = {}  # (source name, dim) -> _Symbol
        self._known = {}  # (hint, shadow) -> expr: how a derived size is written over the symbols
        self.relations = []  # sympy boolean expressions that held at capture

    def __bool__(self):
        return bool(self.symbols)

    def new_symbol(self, source, dim, hint):
        """The symbol of ``source``'s size in ``dim`` (``hint`` >= 2), made once."""
        import sympy

        key = (source.name(), dim)
        known = self._by_input.get(key)
        if known is not None:
            return known
        index = len(self.symbols)
        symbol = sympy.Symbol(f"s{index}", integer=True, positive=True)
        # The shadow is the hint times a prime of its own: a size that depends on the symbol differs
        # between the runs, divisibility is kept (``x.view(n // 2, 2)`` works on both), and sizes
        # derived differently (2*s0, s1) differ. Sizes equal at capture share the prime (ops such as
        # matmul need them equal) and are guarded to stay equal (PyTorch guards that when an op
        # relies on it; here always).
        factor = None
        for other in self.symbols.values():
            if other.hint == hint:
                self.relations.append(sympy.Eq(symbol, other.symbol))
                factor = other.shadow // other.hint
                break
        if factor is None:
            factor = _PRIMES[len({e.hint for e in self.symbols.values()}) % len(_PRIMES)]
        shadow = hint * factor
        entry = _Symbol(symbol, source, dim, hint, shadow)
        self.symbols[symbol] = entry
        self._by_input[key] = entry
        self._known.setdefault((hint, shadow), symbol)
        self.relations.append(sympy.Ge(symbol, 2))  # sizes 0 and 1 are never symbolic
        return entry

    def remember(self, expr, hint, shadow):
        if expr is not None:
            self._known.setdefault((hint, shadow), expr)

    def expr_for(self, hint, shadow):
        """The expression of a size seen as ``hint`` on the examples and ``shadow`` on the shadows
        (None when no known expression, or product of two symbols, gives both)."""
        known = self._known.get((hint, shadow))
        if known is not None:
            return known
        entries = list(self.symbols.values())
        for i, a in enumerate(entries):
            for b in entries[i:]:
                if a.hint * b.hint == hint and a.shadow * b.shadow == shadow:
                    return a.symbol * b.symbol
        return None

    def guard(self, relation):
        """Record that ``relation`` (a SymPy boolean) held; constant relations need no guard."""
        import sympy

        if relation is sympy.true:
            return
        if relation is sympy.false:
            raise Unsupported(f"a size relation that is false on the capture's sizes: {relation}")
        self.relations.append(relation)

    def annotate(self, gm, graph_inputs):
        """Tell backends which dims of ``gm``'s inputs are symbolic: ``gm.meta["dynamic_dims"]`` (a
        ``DynamicDims`` of ember-inductor: per graph input its ``(dim, symbol)`` pairs, and each
        symbol's hint). Nothing when every size is static, or without ember-inductor."""
        entries = [e for e in self.symbols.values() if e.dim is not None]
        if not entries or not hasattr(gm, "meta"):
            return
        try:
            from ember._inductor.dynamic import DynamicDims
        except ImportError:  # only ember-inductor's backends compile kernels with symbolic sizes
            return
        by_source = {}
        for e in entries:
            by_source.setdefault(e.source.name(), []).append((e.dim, e.symbol))
        dims = tuple(tuple(sorted(by_source.get(src.name(), ()), key=lambda p: p[0])) if src is not None else ()
                     for src in graph_inputs)
        gm.meta["dynamic_dims"] = DynamicDims(dims, {e.symbol: e.hint for e in entries})

    def relation_guards(self):
        """One ShapeRelation per recorded relation, over the input sizes it names."""
        result, seen = [], set()
        for relation in self.relations:
            if relation in seen:
                continue
            seen.add(relation)
            symbols = sorted(relation.free_symbols, key=lambda s: s.name)
            index = {s: "{" + str(i) + "}" for i, s in enumerate(symbols)}
            template = to_python(relation, index.__getitem__)
            sizes = tuple((self.symbols[s].source, self.symbols[s].dim) for s in symbols)
            result.append(ShapeRelation(str(relation), template, sizes, tuple(s.name for s in symbols)))
        return result


class PerShapeCompiled:
    """The backend's compiles behind a graph with symbolic sizes, inside one cache entry (the guards
    and the capture are shared; only the backend repeats).

    A backend result with an ``accepts(inputs)`` method (ember-inductor's compile with symbolic sizes,
    see ``gm.meta["dynamic_dims"]``) serves every call it accepts; it is asked first, newest first.
    Other results specialise to their example inputs' sizes ("aot_eager", or a graph inductor could not
    compile with symbolic sizes): one per signature of input shapes.

    Args:
        compile (callable): ``compile(example_inputs) -> callable``, the backend on the graph.
        example_inputs (list): the capture's inputs (the first compile is made now).

    Attributes:
        compiles (int): how many times the backend compiled.
    """

    def __init__(self, compile, example_inputs):
        self.compile = compile
        self.compiled = {}  # signature of input shapes -> a result that specialises to it
        self.general = []  # results that say which inputs they accept
        self.compiles = 0
        self._add(example_inputs)

    @staticmethod
    def _key(inputs):
        # ints (dynamic ints are graph inputs) are part of the signature: the backend bakes them in
        return tuple(tuple(a.shape) if hasattr(a, "shape") else a if type(a) is int else None for a in inputs)

    def _add(self, inputs):
        fn = self.compile(list(inputs))
        self.compiles += 1
        if callable(getattr(fn, "accepts", None)):
            self.general.insert(0, fn)
        else:
            self.compiled[self._key(inputs)] = fn
        return fn

    def __call__(self, *inputs):
        for fn in self.general:
            if fn.accepts(inputs):
                return fn(*inputs)
        fn = self.compiled.get(self._key(inputs))
        if fn is None:
            fn = self._add(inputs)
        return fn(*inputs)
