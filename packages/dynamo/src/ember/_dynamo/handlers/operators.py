"""Unary, binary, comparison, identity and membership operators."""

from __future__ import annotations

import operator

from ..exc import Unsupported
from ..variables.constant import ConstantVariable
from ..variables.symbolic import SymIntVariable, sym_binary, sym_compare
from .versions import compare_op_name

_BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
_INPLACE = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
}
_COMPARE = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}
# In-place operators on immutable values are their plain operator.
_INPLACE_TO_PLAIN = {v: _BINARY[k[:-1]] for k, v in _INPLACE.items()}


def _identity(var):
    """What ``is`` compares for a tracker: the Python object it stands for."""
    from ..variables.tensor import TensorVariable

    if isinstance(var, TensorVariable):
        return var.example
    if var.is_constant():
        return var.as_constant()
    return getattr(var, "value", var)


def _sym_shape_items(var):
    """The items of a tuple/list tracker holding symbolic sizes (a shape read as trackers), else None."""
    from ..variables.containers import BaseListVariable

    if isinstance(var, BaseListVariable) and any(isinstance(v, SymIntVariable) for v in var.items):
        return var.items
    return None


def _shape_items(var):
    """The items of a shape-like tracker: one with symbolic sizes, or a constant tuple."""
    items = _sym_shape_items(var)
    if items is None and isinstance(var, ConstantVariable) and isinstance(var.value, tuple):
        items = [ConstantVariable(v) for v in var.as_constant()]
    return items


class OperatorHandlers:
    """Interpreter handlers for unary, binary, comparison, identity and membership operators."""

    def binary_op(self, fn, a, b):
        """``fn(a, b)`` on trackers: folded on constants, recorded for tensors, sequences concatenated."""
        from ..variables.containers import BaseListVariable, ListVariable, TupleVariable
        from ..variables.tensor import TensorVariable

        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            return self.output.leaf_call(self, fn, [a, b], {})
        if isinstance(a, SymIntVariable) or isinstance(b, SymIntVariable):
            result = sym_binary(self, _INPLACE_TO_PLAIN.get(fn, fn), a, b)
            if result is not None:
                return result  # else: the sizes' values are used (guarded), as for constants
        if a.is_constant() and b.is_constant() and not isinstance(a, BaseListVariable) and not isinstance(
            b, BaseListVariable
        ):
            plain = _INPLACE_TO_PLAIN.get(fn, fn)
            try:
                return ConstantVariable(plain(a.as_constant(), b.as_constant()))
            except (ArithmeticError, TypeError, ValueError) as e:  # e.g. ZeroDivisionError: eager raises it
                from ..variables.exceptions import raise_observed

                raise_observed(type(e), str(e))
        if isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable):
            if fn is operator.iadd and isinstance(a, ListVariable):
                a.call_method(self, "extend", [b], {})
                return a
            if fn in (operator.add, operator.iadd):
                return type(a)(a.items + b.items) if type(a) in (ListVariable, TupleVariable) else TupleVariable(
                    a.items + b.items
                )
        if isinstance(a, BaseListVariable) and b.is_constant() and fn in (operator.mul, operator.imul):
            return type(a)(a.items * b.as_constant()) if type(a) in (ListVariable, TupleVariable) else TupleVariable(
                a.items * b.as_constant()
            )
        if a.is_constant() and b.is_constant():
            try:
                return ConstantVariable(_INPLACE_TO_PLAIN.get(fn, fn)(a.as_constant(), b.as_constant()))
            except Exception as e:  # noqa: BLE001
                raise Unsupported(f"{fn.__name__} raised {type(e).__name__}: {e}") from None
        raise Unsupported(f"operator {fn.__name__} on {a.describe()} and {b.describe()}")

    def BINARY_OP(self, inst):  # 3.11+
        b = self.pop()
        a = self.pop()
        symbol = inst.argrepr
        fn = _BINARY.get(symbol) or _INPLACE.get(symbol)
        if fn is None:
            raise Unsupported(f"binary operator {symbol!r}")
        self.push(self.binary_op(fn, a, b))

    def COMPARE_OP(self, inst):
        b = self.pop()
        a = self.pop()
        fn = _COMPARE[compare_op_name(inst)]
        from ..variables.tensor import TensorVariable

        if isinstance(a, SymIntVariable) or isinstance(b, SymIntVariable):
            result = sym_compare(self, fn, a, b)
            if result is not None:
                self.push(result)
                return
        if fn in (operator.eq, operator.ne) and (_sym_shape_items(a) is not None or _sym_shape_items(b) is not None):
            left, right = _shape_items(a), _shape_items(b)
            if left is None or right is None:
                raise Unsupported(f"comparison of {a.describe()} and {b.describe()}")
            # two shapes: equal item by item, each comparison a guarded relation (up to the first difference)
            same = len(left) == len(right) and all(
                self.binary_op(operator.eq, x, y).as_constant() for x, y in zip(left, right)
            )
            self.push(ConstantVariable(same if fn is operator.eq else not same))
            return
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable) or (a.is_constant() and b.is_constant()):
            self.push(self.binary_op(fn, a, b))
            return
        if fn in (operator.eq, operator.ne):
            same = _identity(a) is _identity(b)
            if not same and (hasattr(a, "value") or hasattr(b, "value")):
                self.push(ConstantVariable(same if fn is operator.eq else not same))
                return
        raise Unsupported(f"comparison {compare_op_name(inst)} of {a.describe()} and {b.describe()}")

    def IS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        same = self._pending_identity(a, b)
        if same is None:
            same = _identity(a) is _identity(b)
        self.push(ConstantVariable(same != bool(inst.arg)))

    def _pending_identity(self, a, b):
        """``a is b`` where one side is a constant read from the frame whose value was not used yet and the
        other a constant of another type (``x is None``, a continuation's ``x is NULL`` check): a type guard
        decides it, so a float argument that changes does not recompile. None when this does not apply."""
        from ..guards import GuardKind

        for pending, other in ((a, b), (b, a)):
            if isinstance(pending, ConstantVariable) and pending.on_use is not None and other.is_constant():
                value, target = pending.value, other.as_constant()
                if value is None or type(value) is type(target):
                    return None
                self.output.add_guard(pending.source, GuardKind.TYPE_MATCH, type(value))
                return False
        return None

    def CONTAINS_OP(self, inst):
        container = self.pop()
        item = self.pop()
        found = self.contains(container, item)
        self.push(ConstantVariable(found != bool(inst.arg)))

    def contains(self, container, item):
        from ..variables.containers import BaseListVariable, DictVariable, SetVariable

        if isinstance(container, DictVariable):
            return item.as_constant() in container.items
        if isinstance(container, SetVariable):
            return item.as_constant() in container.values
        if isinstance(container, BaseListVariable):
            if item.is_constant() and all(v.is_constant() for v in container.items):
                return item.as_constant() in [v.as_constant() for v in container.items]
            target = _identity(item)
            if any(_identity(v) is target for v in container.items):
                return True
            if all(not v.is_constant() for v in container.items) and not item.is_constant():
                return False
            raise Unsupported(f"'in' comparing {item.describe()} with values that are not constants")
        if container.is_constant() and item.is_constant():
            return item.as_constant() in container.as_constant()
        raise Unsupported(f"'in' on {container.describe()}")

    # -- unary ----------------------------------------------------------------------------------------

    def _unary(self, fn):
        from ..variables.tensor import TensorVariable

        value = self.pop()
        if isinstance(value, TensorVariable):
            self.push(self.output.leaf_call(self, fn, [value], {}))
        elif isinstance(value, SymIntVariable) and fn in (operator.neg, operator.pos):
            self.push(value if fn is operator.pos else sym_binary(self, operator.mul, value, ConstantVariable(-1)))
        elif value.is_constant():
            self.push(ConstantVariable(fn(value.as_constant())))
        else:
            raise Unsupported(f"{fn.__name__} of {value.describe()}")

    def UNARY_NEGATIVE(self, inst):
        self._unary(operator.neg)

    def UNARY_POSITIVE(self, inst):
        self._unary(operator.pos)

    def UNARY_INVERT(self, inst):
        self._unary(operator.invert)

    def UNARY_NOT(self, inst):
        self.push(ConstantVariable(not self.pop().truth(self)))

    def TO_BOOL(self, inst):  # 3.13
        self.push(ConstantVariable(self.pop().truth(self)))

    def CALL_INTRINSIC_1(self, inst):  # 3.12+
        name = inst.argrepr
        if name == "INTRINSIC_UNARY_POSITIVE":
            self._unary(operator.pos)
        elif name == "INTRINSIC_LIST_TO_TUPLE":
            self.LIST_TO_TUPLE(inst)
        else:
            raise Unsupported(f"CALL_INTRINSIC_1 {name}")
