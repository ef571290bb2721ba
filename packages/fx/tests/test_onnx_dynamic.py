"""ember.onnx._dynamic: fitting traced sizes to functions of the dynamic axes (no onnx needed)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ember.onnx._dynamic import DimExpr, fit, trial_sizes

AXES = ["b", "s"]
BASE = {"b": 2, "s": 16}
SINGLE = {"b": 3, "s": 15}
VERIFY = {"b": 4, "s": 14}


def _values(f):
    """The traced values of ``f(b, s)`` at the base point, each axis changed alone, and all changed."""
    single = [f(SINGLE["b"], BASE["s"]), f(BASE["b"], SINGLE["s"])]
    return f(BASE["b"], BASE["s"]), single, f(VERIFY["b"], VERIFY["s"])


def _fit(f):
    base, single, verify = _values(f)
    return fit(base, single, verify, AXES, BASE, SINGLE, VERIFY)


@pytest.mark.parametrize(
    ("f", "expected"),
    [
        (lambda b, s: 4 * b, DimExpr(Fraction(4), (("b", 1),))),
        (lambda b, s: b * s, DimExpr(Fraction(1), (("b", 1), ("s", 1)))),
        (lambda b, s: 3 * b * s * s, DimExpr(Fraction(3), (("b", 1), ("s", 2)))),
        (lambda b, s: s - 1, DimExpr(Fraction(1), (("s", 1),), -1)),
        (lambda b, s: 2 * s + 3, DimExpr(Fraction(2), (("s", 1),), 3)),
    ],
)
def test_fit_products_and_affine(f, expected):
    expr = _fit(f)
    assert expr == expected
    for b, s in [(5, 9), (1, 1), (7, 30)]:
        assert expr.evaluate({"b": b, "s": s}) == f(b, s)


def test_fit_fraction_coefficient():
    expr = _fit(lambda b, s: b * s // 2)
    assert expr.coeff == Fraction(1, 2)
    assert str(expr) == "1/2*b*s"


@pytest.mark.parametrize("f", [lambda b, s: b + s, lambda b, s: b * b + 1, lambda b, s: s // 3])
def test_fit_rejects_other_functions(f):
    assert _fit(f) is None


def test_trial_sizes_avoid_one_and_prefer_smaller():
    assert trial_sizes(16) == (15, 14)
    assert trial_sizes(3) == (2, 4)
    assert trial_sizes(2) == (3, 4)
    assert trial_sizes(1) == (2, 3)
