"""Regression tests for the bugs a new user's trial of ember.compile found (issue 26): each compiled
result is compared with eager ember's."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember._dynamo as dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _fresh_cache():
    dynamo.reset()
    yield
    dynamo.reset()


def _same(got, want):
    assert got.dtype == want.dtype
    assert got.requires_grad == want.requires_grad
    np.testing.assert_allclose(got.detach().float().numpy(), want.detach().float().numpy(), rtol=1e-5, atol=1e-6)


# -- autocast inside a compiled function --------------------------------------------------------------


def _autocast_matmul(x):
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = x @ x
    return y + 1


def _autocast_with_break(x):
    with ember.autocast("cpu", enabled=False):
        y = x * 2
        v = y.sum().item()
    return y + v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_autocast_matmul, _autocast_with_break])
def test_autocast_region_inside_compiled_function(backend, fn):
    x = ember.randn(4, 4)
    want = fn(x)
    _same(ember.compile(fn, backend=backend)(x), want)
    assert not ember.is_autocast_enabled("cpu")


# -- a break inside enable_grad, called under no_grad ---------------------------------------------------


def _enable_grad_break(x):
    with ember.enable_grad():
        y = x * x
        s = y.sum().item()
        z = y * s
    return z


def _enable_grad_no_break(x):
    with ember.enable_grad():
        y = x * x
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_enable_grad_break, _enable_grad_no_break])
def test_enable_grad_inside_no_grad_call(backend, fn):
    x = ember.randn(3, requires_grad=True)
    with ember.no_grad():
        want = fn(x)
        got = ember.compile(fn, backend=backend)(x)
    assert want.requires_grad
    _same(got, want)
    got.sum().backward()
    assert x.grad is not None
    assert ember.is_grad_enabled()


# -- a compiled function calling another compiled function twice ----------------------------------------


def test_compiled_function_called_twice_inside_another():
    inner = ember.compile(lambda x: x.sin() + 1)

    def outer(x):
        return inner(x) * 2 + inner(x * 2)

    x = ember.randn(4)
    compiled = ember.compile(outer)
    _same(compiled(x), outer(x))
    _same(compiled(x), outer(x))  # the second call reuses the entry: its guards hold
