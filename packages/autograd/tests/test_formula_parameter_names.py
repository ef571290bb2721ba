"""The derivative table reads formula parameter names from code objects: the same names as inspect.signature."""

from __future__ import annotations

import functools
import inspect

import pytest

from ember.autograd._table import DERIVATIVES, _parameter_names


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
