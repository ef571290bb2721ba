"""The derivative table covers the op registry, and its entries are well formed.

Every op of ``ember._ops.registry`` falls in exactly one class (:func:`classify`):

1. ``formula``: it has backward formulas (``derivative(...)``);
2. ``decomposition``: a composite differentiated by recording its decomposition
   (``through_decomposition(...)``);
3. ``nondifferentiable``: its outputs never require grad (``nondifferentiable(...)``);
4. ``inplace``: an in-place op whose out-of-place op (``op.functional``) is in
   class 1, 2 or 3: autograd records ``x.op_(...)`` as ``op(x, ...)`` and a copy,
   so it needs no entry of its own (in-place ops *without* a functional, such as
   ``copy_``, ``fill_``, ``zero_`` and the random fills, need one);
5. ``factory``: an op tagged ``"factory"`` all of whose parameters are sizes,
   scalars or options (``_grad_samples.FACTORY_PARAMETERS``): it has no tensor input, so
   autograd never sees it (its output is a leaf; ``requires_grad=`` makes it
   require grad). Factories with a tensor argument (``zeros_like``, ``normal``'s
   ``mean``) are not exempt: they need an entry.

Anything else is *uncovered*, and :func:`test_every_op_is_covered` lists it:
that test is the coverage gate of the table.
"""

from __future__ import annotations

import pytest
from _grad_samples import BACKWARD_NOT_IMPLEMENTED, is_factory

from ember._ops import registry
from ember.autograd._table import (
    DERIVATIVES,
    META_SUFFIX,
    NONDIFFERENTIABLE,
    SPECIAL_PARAMETERS,
    THROUGH_DECOMPOSITION,
    Derivative,
    Formula,
    derivative,
    lookup,
)
from ember.testing import op_db


def classify(op):
    """The class of ``op`` (see the module docstring), or None when the table does not cover it."""
    if op in DERIVATIVES:
        return "formula"
    if op in THROUGH_DECOMPOSITION:
        return "decomposition"
    if op in NONDIFFERENTIABLE:
        return "nondifferentiable"
    if op.kind == "inplace" and op.functional is not None and classify(op.functional) is not None:
        return "inplace"
    if is_factory(op):
        return "factory"
    return None


def test_every_op_is_covered():
    """The coverage gate: no op of the registry lacks a derivative-table decision."""
    uncovered = sorted(name for name, op in registry.items() if classify(op) is None)
    assert uncovered == [], f"{len(uncovered)} ops are not covered by the derivative table: {uncovered}"


def test_classification_examples():
    assert is_factory(registry["zeros"]) and is_factory(registry["randn"])
    assert classify(registry["zeros_like"]) != "factory"  # a tensor argument: needs a decision
    assert classify(registry["normal"]) != "factory"
    assert classify(registry["add"]) == "formula"
    assert classify(registry["add_"]) == "inplace"
    assert classify(registry["detach"]) == "nondifferentiable"


def test_classes_are_disjoint():
    formulas = set(DERIVATIVES)
    assert not formulas & THROUGH_DECOMPOSITION
    assert not formulas & NONDIFFERENTIABLE
    assert not THROUGH_DECOMPOSITION & NONDIFFERENTIABLE
    for op in formulas | THROUGH_DECOMPOSITION | NONDIFFERENTIABLE:
        assert registry[op.name] is op, f"{op.name} is not the registry's op"


def test_lookup_agrees_with_classes():
    for op in registry.values():
        kind, entry = lookup(op)
        expected = {"formula": "formula", "decomposition": "decomposition", "nondifferentiable": "none"}.get(
            classify(op)
        )
        assert kind == expected, op.name
        assert (entry is DERIVATIVES[op]) if kind == "formula" else entry is None


@pytest.mark.parametrize("entry", list(DERIVATIVES.values()), ids=[op.name for op in DERIVATIVES])
def test_formulas_name_real_arguments(entry):
    """What a formula returns and reads are arguments of the op (or their ``_meta``, or grad/grads/result/...)."""
    names = set(entry.op._call_signature.parameters)
    assert entry.formulas, f"{entry.op.name} has an entry without formulas: make it nondifferentiable instead"
    covered = []
    for formula in entry.formulas:
        assert set(formula.inputs) <= names, f"{entry.op.name}: gradients for {formula.inputs}, not all arguments"
        metadata = {n + META_SUFFIX for n in names}  # ``input_meta``: only the argument's metadata
        unknown = set(formula.params) - names - metadata - SPECIAL_PARAMETERS
        assert not unknown, f"{entry.op.name}: a formula reads {sorted(unknown)}"
        if "output_mask" in formula.params:
            assert formula.joint, f"{entry.op.name}: only joint formulas get output_mask"
        if "grads" in formula.params or "results" in formula.params:
            assert entry.op.kind != "inplace" or entry.op.functional is None
        covered.extend(formula.inputs)
    assert len(covered) == len(set(covered)), f"{entry.op.name}: two formulas for one of {covered}"
    assert set(entry.nondiff_args) <= names, f"{entry.op.name}: nondiff={sorted(entry.nondiff_args)}"
    assert not set(entry.nondiff_args) & set(covered), f"{entry.op.name}: an argument is both nondiff and graded"


def test_table_rejects_names_that_are_not_arguments():
    add = registry["add"]
    with pytest.raises(ValueError, match="not arguments of add"):
        Derivative(add, [Formula(("self",), lambda grad: grad)])
    with pytest.raises(ValueError, match="reads \\['othr'\\]"):
        Derivative(add, [Formula(("input",), lambda grad, othr: grad)])
    with pytest.raises(ValueError, match="reads \\['othr_meta'\\]"):
        Derivative(add, [Formula(("input",), lambda grad, othr_meta: grad)])
    with pytest.raises(RuntimeError, match="already has an entry"):
        derivative("add", input=lambda grad: grad)
    with pytest.raises(KeyError, match="not an op of the ember registry"):
        derivative("no_such_op", input=lambda grad: grad)


def test_through_decomposition_ops_have_decompositions():
    for op in THROUGH_DECOMPOSITION:
        assert op.decomposition is not None, op.name


def test_inplace_entries_are_reachable():
    """An in-place op with a differentiable functional is recorded through it: its own entry would be dead."""
    dead = sorted(
        op.name
        for op in DERIVATIVES
        if op.kind == "inplace" and op.functional is not None and op.functional not in NONDIFFERENTIABLE
    )
    assert dead == []


def test_table_agrees_with_op_db():
    """Ops without gradients in the sample registry have no formulas; differentiable ones are not nondifferentiable.

    The exception: ops whose backward raises NotImplementedError, as PyTorch's does
    (``_grad_samples.BACKWARD_NOT_IMPLEMENTED``), have "formulas" that raise.
    """
    wrong = []
    for name, info in op_db.items():
        op = info.op
        if info.supports_autograd and op in NONDIFFERENTIABLE:
            wrong.append(f"{name}: supports_autograd in op_db, nondifferentiable in the table")
        if not info.supports_autograd and op in DERIVATIVES and name not in BACKWARD_NOT_IMPLEMENTED:
            wrong.append(f"{name}: no autograd in op_db, formulas in the table")
    assert wrong == []


def test_print_table_summary(capsys):
    counts = {}
    for op in registry.values():
        counts[classify(op)] = counts.get(classify(op), 0) + 1
    with capsys.disabled():
        print("\nderivative table:", ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=str)))
    assert None not in counts and sum(counts.values()) == len(registry)  # every op in exactly one class
