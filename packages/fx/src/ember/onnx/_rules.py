"""The ONNX rule table: every registry op the exporter can emit, keyed by its ``Op`` object."""

from __future__ import annotations

from . import _rules_nn, _rules_pointwise, _rules_shape
from ._table import merge

__all__ = ["RULES", "rule_for", "supported_ops", "decompositions"]

#: registry Op -> rule(g, **arguments); see :mod:`._table`.
RULES = merge(_rules_pointwise.TABLE, _rules_shape.TABLE, _rules_nn.TABLE)


def rule_for(op):
    """The rule for ``op``, or for its functional form when ``op`` is an in-place variant; None if neither has one."""
    rule = RULES.get(op)
    if rule is None and getattr(op, "functional", None) is not None:
        rule = RULES.get(op.functional)
    return rule


def decompositions():
    """The composite ops without a rule, each with its decomposition: capture records the ops it calls instead.

    This is how aliases (``subtract``, ``concat``, ``swapaxes``) and composites such as
    ``normalize``, ``glu`` or ``rms_norm`` export without rules of their own.
    """
    from ember._ops._registry import COMPOSITE, registry

    return {
        op: op.decomposition
        for op in registry.values()
        if op.category == COMPOSITE and op.decomposition is not None and rule_for(op) is None
    }


def supported_ops():
    """The names of the registry ops :func:`ember.onnx.export` can emit (by a rule), sorted."""
    return sorted(op.name for op in RULES)
