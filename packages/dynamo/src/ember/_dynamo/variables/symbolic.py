"""Symbolic ints: a size read from a tensor with dynamic dims, and arithmetic on it."""

from __future__ import annotations

import operator

from ..exc import Unsupported
from ..reconstruct import GraphOutput
from ..symbolic import SymHint, floor_div
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import TupleVariable

__all__ = ["SymIntVariable", "SizeVariable", "sym_binary", "sym_compare"]


class SymIntVariable(VariableTracker):
    """A size that depends on the capture's symbols.

    Attributes:
        expr (sympy.Expr or None): the size over the symbols (None: a size of a tensor computed in the
            graph that no known expression matches; it still works in the graph, but cannot be guarded).
        hint (int): its value on the capture's examples.
        shadow (int): its value on the shadow examples (see :mod:`ember._dynamo.symbolic`).
        node: the graph node that computes it at run time.
    """

    def __init__(self, output, expr, hint, shadow, node):
        super().__init__()
        self.output = output
        self.expr = expr
        self.hint = hint
        self.shadow = shadow
        self.node = node
        output.sym_exprs[node] = expr  # a slice bound given as this node is guarded through it

    def describe(self):
        return f"size {self.expr if self.expr is not None else '?'} (= {self.hint} here)"

    def python_type(self):
        return int

    def is_constant(self):
        # anything that needs the value as a Python int gets it, guarded (see as_constant): correct,
        # only no longer dynamic for that use
        return True

    def as_constant(self):
        """The hint, with the guard that the size equals it (a use that needs a concrete int)."""
        if self.expr is None:
            raise Unsupported(
                f"a size of a tensor computed in the graph ({self.hint} here) is used as a Python value "
                "with dynamic shapes"
            )
        self.output.shape_env.guard(_sympy().Eq(self.expr, self.hint))
        return self.hint

    def as_python(self, tx):
        if self.output.shadowing:
            return self.shadow
        value = SymHint(self.hint)
        value.node = self.node
        return value

    def truth(self, tx):
        return sym_compare(tx, operator.ne, self, ConstantVariable(0)).as_constant()

    def reconstruct(self, out):
        # a size returned (or live at a break): an output of the graph, whatever its value at run time
        return GraphOutput(out.output_node_index(self.node))


class SizeVariable(TupleVariable):
    """``tensor.shape``/``tensor.size()`` with symbolic items: an ``ember.Size`` of trackers."""

    @property
    def python_cls(self):
        import ember

        return ember.Size

    def getitem(self, tx, key):
        item = super().getitem(tx, key)
        return SizeVariable(item.items) if isinstance(item, TupleVariable) else item

    def call_method(self, tx, name, args, kwargs):
        if name == "numel" and not args and not kwargs:
            total = ConstantVariable(1)
            for size in self.items:
                total = tx.binary_op(operator.mul, total, size)
            return total
        return super().call_method(tx, name, args, kwargs)


def _operand(var):
    """(expr, hint, shadow, graph argument) of a SymIntVariable or an int constant; None otherwise."""
    if isinstance(var, SymIntVariable):
        return var.expr, var.hint, var.shadow, var.node
    if isinstance(var, ConstantVariable) and type(var.value) is int:
        value = var.as_constant()
        return _sympy().Integer(value), value, value, value
    return None


_ARITH = {
    operator.add: lambda a, b: a + b,
    operator.sub: lambda a, b: a - b,
    operator.mul: lambda a, b: a * b,
    operator.floordiv: floor_div,
    operator.mod: lambda a, b: _sympy().Mod(a, b),
}

_RELATIONS = {
    operator.lt: "Lt", operator.le: "Le", operator.gt: "Gt", operator.ge: "Ge", operator.eq: "Eq", operator.ne: "Ne",
}


def _sympy():
    import sympy  # only dynamic captures need it

    return sympy


def sym_binary(tx, fn, a, b):
    """``fn(a, b)`` with a symbolic size: a graph node and an expression, or None when ``fn`` or the
    other operand is not size arithmetic (the caller then uses the values, guarded)."""
    if fn in _RELATIONS:
        return sym_compare(tx, fn, a, b)
    build = _ARITH.get(fn)
    left, right = _operand(a), _operand(b)
    if build is None or left is None or right is None:
        return None
    if fn in (operator.floordiv, operator.mod) and (right[1] == 0 or right[2] == 0):
        return None  # eager raises ZeroDivisionError: the constant path raises it too
    hint, shadow = fn(left[1], right[1]), fn(left[2], right[2])
    expr = None
    if left[0] is not None and right[0] is not None:
        expr = build(left[0], right[0])
        if isinstance(expr, _sympy().Integer):
            return ConstantVariable(int(expr))
    output = tx.output
    node = output.graph.call_function(fn, (left[3], right[3]))
    output.shape_env.remember(expr, hint, shadow)
    return SymIntVariable(output, expr, hint, shadow, node)


def sym_compare(tx, fn, a, b):
    """A comparison of sizes: decided on the hints, the relation it relied on becomes a guard."""
    left, right = _operand(a), _operand(b)
    if left is None or right is None:
        return None
    result = fn(left[1], right[1])
    if left[0] is None or right[0] is None:
        if fn(left[2], right[2]) != result:
            raise Unsupported("a branch on the size of a tensor computed in the graph, with dynamic shapes")
        return ConstantVariable(result)  # the same answer on the shadows: treated as not depending on sizes
    sympy = _sympy()
    relation = getattr(sympy, _RELATIONS[fn])(left[0], right[0])
    tx.output.shape_env.guard(relation if result else sympy.Not(relation))
    return ConstantVariable(result)
