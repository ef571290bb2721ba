"""The derivative table reads signatures from code objects: the same answers as inspect.signature."""

from __future__ import annotations

import functools
import inspect

import pytest

from ember._ops import registry
from ember.autograd._table import DERIVATIVES, _parameter_names, _signature_parts


def _positional(a, b=1):
    pass


def _everything(a, /, b, *rest, c, d=2, **extra):
    pass


def _keyword_only(*, k):
    pass


def _star_only(*items):
    pass


def _wrapped(a, b):
    pass


@functools.wraps(_wrapped)
def _wrapper(*args, **kwargs):
    return _wrapped(*args, **kwargs)


def _with_signature(*args):
    pass


_with_signature.__signature__ = inspect.signature(_positional)


@pytest.mark.parametrize(
    "fn",
    [
        _positional, _everything, _keyword_only, _star_only, _wrapper, _with_signature,
        lambda: None, lambda grad, *rest: None, functools.partial(_everything, 1), len,
    ],
)
def test_names_are_inspect_signatures(fn):
    assert _parameter_names(fn) == tuple(inspect.signature(fn).parameters)


def test_every_registered_formula_has_its_signature_names():
    formulas = [f for entry in DERIVATIVES.values() for f in entry.formulas]
    assert len(formulas) > 200
    for formula in formulas:
        assert formula.params == tuple(inspect.signature(formula.fn).parameters), formula.fn


def _reference_parts(fn):
    parameters = inspect.signature(fn).parameters.items()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return (
        tuple(n for n, _ in parameters),
        tuple(n for n, p in parameters if p.kind in positional),
        next((n for n, p in parameters if p.kind is p.VAR_POSITIONAL), None),
        list((n, p.default) for n, p in parameters if p.default is not p.empty),
    )


def _defaults_everywhere(a, b=1, /, c=2, *rest, d, e=3, f=4, **extra):
    pass


@pytest.mark.parametrize("fn", [_positional, _everything, _keyword_only, _star_only, _wrapper, _with_signature,
                                _defaults_everywhere, lambda x=None: x, functools.partial(_everything, 1)])
def test_signature_parts_are_inspect_signatures(fn):
    names, positional, var_positional, defaults = _signature_parts(fn)
    assert (names, positional, var_positional, list(defaults.items())) == _reference_parts(fn)


def test_every_op_of_the_registry_has_its_signature_parts():
    for op in registry.values():
        names, positional, var_positional, defaults = _signature_parts(op.meta)
        assert (names, positional, var_positional, list(defaults.items())) == _reference_parts(op.meta), op.name
