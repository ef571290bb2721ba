"""Every optimizer's hyperparameter checks (``optimizer._check_hyperparameters``) raise PyTorch's ValueError,
word for word, for each argument out of range; and accept what PyTorch accepts (SGD lets NaN pass)."""

from __future__ import annotations

import math

import pytest

import ember
import ember.optim

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.parity

_NAN = math.nan

#: (optimizer, keyword arguments): one bad value each.
_CASES = [
    ("SGD", {"lr": -0.1}),
    ("SGD", {"momentum": -1.0}),
    ("SGD", {"weight_decay": -1.0}),
    ("SGD", {"lr": _NAN}),
    ("Adam", {"lr": -1.0}),
    ("Adam", {"eps": -1.0}),
    ("Adam", {"betas": (1.0, 0.9)}),
    ("Adam", {"betas": (0.9, -0.1)}),
    ("Adam", {"weight_decay": -1.0}),
    ("AdamW", {"betas": (0.9, 1.0)}),
    ("Adamax", {"eps": -1e-8}),
    ("NAdam", {"momentum_decay": -1.0}),
    ("RAdam", {"lr": _NAN}),
    ("Adadelta", {"rho": 1.5}),
    ("Adadelta", {"rho": 1.0}),
    ("Adadelta", {"eps": -1.0}),
    ("Adagrad", {"lr_decay": -1.0}),
    ("Adagrad", {"initial_accumulator_value": -1.0}),
    ("RMSprop", {"alpha": -1.0}),
    ("RMSprop", {"momentum": -1.0}),
    ("Rprop", {"lr": -1.0}),
    ("Rprop", {"etas": (1.5, 2.0)}),
    ("LBFGS", {"lr": -1.0}),
]


def _outcome(lib, name, kwargs):
    p = lib.zeros(2, requires_grad=True)
    try:
        getattr(lib.optim, name)([p], **kwargs)
    except ValueError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(("name", "kwargs"), _CASES, ids=[f"{n}-{sorted(k)[0]}={k[sorted(k)[0]]}" for n, k in _CASES])
def test_hyperparameter_checks_match_pytorch(name, kwargs):
    assert _outcome(ember, name, kwargs) == _outcome(torch, name, kwargs)


def test_some_cases_raise_and_some_pass():
    """The table above exercises both sides: most values are refused, the boundary ones are not."""
    outcomes = [_outcome(torch, n, k) for n, k in _CASES]
    assert sum(o is not None for o in outcomes) >= 18 and any(o is None for o in outcomes)
