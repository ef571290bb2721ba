"""Rule tables: registry op -> the function that emits its ONNX nodes.

Each op family (:mod:`._rules_pointwise`, :mod:`._rules_shape`, :mod:`._rules_nn`)
fills its own :class:`RuleTable`; :mod:`._rules` merges them into the one table the
emitter reads, keyed by the :class:`ember._ops._registry.Op` objects (as autograd's
derivative table is). A rule is called as ``rule(g, **arguments)``: ``g`` is the
:class:`~._builder.GraphBuilder`, the arguments are the node's, bound to the op's
signature by name (defaults filled in), tensors replaced by ONNX value names.
"""

from __future__ import annotations

from ember._ops import _registry

__all__ = ["RuleTable", "merge"]


class RuleTable:
    """The ONNX rules of one op family.

    Args:
        family (str): a name for error messages.
    """

    def __init__(self, family):
        self.family = family
        self.rules = {}

    def register(self, *names):
        """Decorator: ``fn`` emits the ops ``names`` (registry op names).

        Raises:
            ValueError: if one of the ops already has a rule in this table.
        """

        def add(fn):
            for name in names:
                op = _registry.get(name)
                if op in self.rules:
                    raise ValueError(f"{self.family}: op {name!r} has two ONNX rules")
                self.rules[op] = fn
            return fn

        return add

    def add(self, name, fn):
        """Register ``fn`` for op ``name`` (for rules built by a helper)."""
        self.register(name)(fn)


def merge(*tables):
    """One dict op -> rule from several tables.

    Raises:
        ValueError: if two tables have a rule for the same op.
    """
    merged, owner = {}, {}
    for table in tables:
        for op, fn in table.rules.items():
            if op in merged:
                raise ValueError(f"op {op.name!r} has ONNX rules in {owner[op]} and {table.family}")
            merged[op], owner[op] = fn, table.family
    return merged
